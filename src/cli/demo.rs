//! `supervisor demo`: the whole pipeline against the built-in sandbox GitHub.

use std::path::{Path, PathBuf};

use super::output::{errln, outln};
use super::run::{present, runtime};
use super::{EXIT_OK, EXIT_STOPPED, EXIT_USAGE};
use crate::demo::{DemoReport, demo_dir, demo_spec, run_demo, run_demo_watch};
use crate::report;
use crate::workspace::Shutdown;

/// Gate tools installed by `scripts/install-tools.sh` in the checkout this binary was built from.
fn source_tools() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    [".tools/node/node_modules/.bin", ".tools/venv/bin"]
        .iter()
        .map(|p| root.join(p))
        .filter(|p| p.is_dir())
        .collect()
}

pub fn run(json: bool, clean: bool, dir: Option<PathBuf>, watch: bool) -> u8 {
    // Where the pinned gate tools exist, the demo uses them; where they don't, those gates show as not run.
    let tools = source_tools();
    if !tools.is_empty() {
        let mut paths = tools;
        paths.extend(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        ));
        if let Ok(joined) = std::env::join_paths(paths) {
            // SAFETY: no other thread exists yet; the runtime starts below.
            unsafe { std::env::set_var("PATH", joined) };
        }
    }
    let program = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            errln!("supervisor demo: cannot find its own executable for the scripted agents: {e}");
            return EXIT_STOPPED;
        }
    };
    let dir = dir.unwrap_or_else(demo_dir);
    if dir.join("repo").exists() {
        errln!(
            "supervisor demo: {} already holds a demo; pick another --dir",
            dir.display()
        );
        return EXIT_USAGE;
    }
    let rt = match runtime("demo") {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let code = rt.block_on(async {
        let shutdown = match Shutdown::install() {
            Ok(s) => s,
            Err(e) => {
                errln!("supervisor demo: cannot install signal handlers: {e}");
                return EXIT_STOPPED;
            }
        };
        errln!(
            "supervisor demo: building a repository, a bare remote and the sandbox GitHub in {}",
            dir.display()
        );
        if watch {
            return watch_demo(&dir, json, &shutdown).await;
        }
        // The demo shows the live tracking comment, as the Action does.
        let mut spec = demo_spec();
        spec.settings
            .insert("trackingComment".into(), serde_json::Value::Bool(true));
        match run_demo(
            &dir,
            spec,
            program,
            &shutdown,
            crate::runtime::ProgressMode::for_stderr(),
        )
        .await
        {
            Ok((summary, report)) => {
                let code = present(&summary, false, false);
                if json {
                    // One document: the run summary (as `run --json` prints it) with the demo's
                    // own facts under `demo`.
                    let mut doc = serde_json::to_value(&summary).expect("summaries serialise");
                    doc["demo"] = serde_json::to_value(&report).expect("json");
                    outln!("{}", serde_json::to_string_pretty(&doc).expect("json"));
                }
                let pr = match &summary.end {
                    crate::pipeline::RunEnd::PullRequest { url, .. } => Some(url.as_str()),
                    _ => None,
                };
                where_to_look(&report, pr);
                code
            }
            Err(e) => {
                errln!("supervisor demo: {e}");
                EXIT_STOPPED
            }
        }
    });
    if clean {
        let _ = std::fs::remove_dir_all(&dir);
    }
    code
}

/// `demo --watch`: the board-driven mode on the demo's board.
async fn watch_demo(dir: &Path, json: bool, shutdown: &Shutdown) -> u8 {
    errln!(
        "supervisor demo --watch: the scheduler watches the board; a maintainer drags issue #1 from Backlog to Research"
    );
    match run_demo_watch(dir, demo_spec(), super::watch::printer(json), shutdown).await {
        Ok((end, pr, report)) => {
            if json {
                outln!("{}", serde_json::to_string_pretty(&report).expect("json"));
            }
            where_to_look(&report, pr.as_deref());
            if end == "pull-request" {
                EXIT_OK
            } else {
                EXIT_STOPPED
            }
        }
        Err(e) => {
            errln!("supervisor demo: {e}");
            EXIT_STOPPED
        }
    }
}

fn where_to_look(report: &DemoReport, pr: Option<&str>) {
    errln!("\nwhere to look");
    if let Some(url) = pr {
        errln!("  pull request   {url}");
    }
    if let Some(r) = &report.revision {
        errln!("  review round   {}", report::summary_headline(r));
    }
    errln!(
        "  issue #1       {} comments, card in {}",
        report.comments,
        report.column.as_deref().unwrap_or("(no column)")
    );
    errln!("  journal        {}", report.journal);
    if let Some(map) = &report.run_map {
        errln!("  run map        {} (mermaid)", map.display());
    }
    errln!("  GitHub state   {}", report.sandbox_state.display());
    errln!(
        "                 browse it: supervisor sandbox serve --state {}",
        report.sandbox_state.display()
    );
    errln!(
        "  requests       {} to the sandbox GitHub, {} outside GitHub's published description",
        report.github_requests,
        report.description_violations.len()
    );
    for v in &report.description_violations {
        errln!("                 {v}");
    }
}
