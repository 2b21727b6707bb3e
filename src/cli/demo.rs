//! `supervisor demo`: the whole pipeline against the built-in sandbox GitHub.

use std::path::{Path, PathBuf};

use super::output::{errln, outln};
use super::run::{present, runtime};
use super::{EXIT_OK, EXIT_STOPPED, EXIT_USAGE};
use crate::demo::{
    DemoError, DemoReport, WorldError, demo_dir, demo_spec, run_demo, run_demo_epic, run_demo_watch,
};
use crate::pipeline::RunEnd;
use crate::report;
use crate::runtime::EpicEnd;
use crate::sandbox::{Sandbox, SandboxError};
use crate::workspace::Shutdown;

/// Where `scripts/install-tools.sh` puts the pinned gate tools and agent CLIs, under its `.tools/`
/// (the directories `scripts/tools-env.sh` puts on PATH).
const TOOL_BINS: [&str; 3] = [
    "node/node_modules/.bin",
    "venv/bin",
    "agents/node_modules/.bin",
];

/// The tools directory the demo uses: `$SUPERVISOR_TOOLS_DIR` when set (it must exist), else
/// `.tools/` in the current directory when there is one (a checkout after `scripts/test.sh`).
fn tools_dir(env: Option<std::ffi::OsString>, cwd: &Path) -> Result<Option<PathBuf>, String> {
    match env.filter(|v| !v.is_empty()) {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            if dir.is_dir() {
                Ok(Some(dir))
            } else {
                Err(format!(
                    "SUPERVISOR_TOOLS_DIR={} is not a directory: point it at the .tools/ that scripts/install-tools.sh made, or unset it",
                    dir.display()
                ))
            }
        }
        None => Ok(Some(cwd.join(".tools")).filter(|d| d.is_dir())),
    }
}

/// PATH with the tool directories of `tools` that exist put first.
fn path_with_tools(tools: &Path, path: &std::ffi::OsStr) -> Option<std::ffi::OsString> {
    let mut dirs: Vec<PathBuf> = TOOL_BINS
        .iter()
        .map(|b| tools.join(b))
        .filter(|d| d.is_dir())
        .collect();
    if dirs.is_empty() {
        return None;
    }
    dirs.extend(std::env::split_paths(path));
    std::env::join_paths(dirs).ok()
}

/// Which demo runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// One issue through the pipeline, and a review round.
    Run,
    /// The scheduler on the board.
    Watch,
    /// An epic worked to its pull request.
    Epic,
}

impl Mode {
    pub(super) fn of(watch: bool, epic: bool) -> Mode {
        match (watch, epic) {
            (true, _) => Mode::Watch,
            (false, true) => Mode::Epic,
            (false, false) => Mode::Run,
        }
    }
}

pub(super) fn run(
    json: bool,
    clean: bool,
    dir: Option<PathBuf>,
    mode: Mode,
    serve: Option<u16>,
) -> u8 {
    // Where the pinned gate tools exist, the demo uses them; where they don't, those gates show as not run.
    let cwd = std::env::current_dir().unwrap_or_default();
    match tools_dir(std::env::var_os("SUPERVISOR_TOOLS_DIR"), &cwd) {
        Err(e) => {
            errln!("supervisor demo: {e}");
            return EXIT_USAGE;
        }
        Ok(None) => {}
        Ok(Some(tools)) => {
            let path = std::env::var_os("PATH").unwrap_or_default();
            if let Some(joined) = path_with_tools(&tools, &path) {
                errln!("supervisor demo: using the tools in {}", tools.display());
                // SAFETY: no other thread exists yet; the runtime starts below.
                unsafe { std::env::set_var("PATH", joined) };
            }
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
    if dir.exists() && !dir.is_dir() {
        errln!(
            "supervisor demo: --dir {}: is not a directory; pass a directory to build the demo in (it is created when missing)",
            dir.display()
        );
        return EXIT_USAGE;
    }
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
        match mode {
            Mode::Watch => return watch_demo(&dir, json, clean, &shutdown).await,
            Mode::Epic => return epic_demo(&dir, json, clean, program, &shutdown, serve).await,
            Mode::Run => {}
        }
        // The demo shows the live tracking comment, as the Action does.
        let mut spec = demo_spec();
        spec.settings
            .insert("trackingComment".into(), serde_json::Value::Bool(true));
        let progress = crate::runtime::ProgressMode::for_stderr();
        let port = serve.unwrap_or(0);
        match run_demo(&dir, spec, program, &shutdown, progress, port).await {
            Ok((summary, report, sandbox)) => {
                let code = present(&summary, false, false);
                if let Some(line) = missing_tools_line(&summary.gates, &cwd) {
                    errln!("{line}");
                }
                if json {
                    // One document: the run summary (as `run --json` prints it) with the demo's
                    // own facts under `demo`.
                    let mut doc = serde_json::to_value(&summary).expect("summaries serialise");
                    doc["demo"] = serde_json::to_value(&report).expect("json");
                    outln!("{}", serde_json::to_string_pretty(&doc).expect("json"));
                }
                let pr = match &summary.end {
                    RunEnd::PullRequest { url, .. } => Some(url.as_str()),
                    _ => None,
                };
                where_to_look(&report, pr, Some(&sandbox), serve.is_some(), clean);
                if serve.is_some() && !shutdown.requested() {
                    errln!("\nserving the sandbox GitHub until Ctrl-C");
                    shutdown.token().cancelled().await;
                }
                sandbox.shutdown().await;
                code
            }
            Err(DemoError::World(WorldError::Sandbox(e @ SandboxError::Bind { .. }))) => {
                errln!("supervisor demo: {e}: choose another --port");
                EXIT_USAGE
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

/// Which gates did not run for want of a tool, and how to install the tools (`None`: every gate
/// had its tools).
fn missing_tools_line(reports: &[crate::gates::GateReport], cwd: &Path) -> Option<String> {
    let missing = crate::gates::missing_tools(reports);
    if missing.is_empty() {
        return None;
    }
    let gates: Vec<&str> = (reports.iter())
        .filter(|r| !crate::gates::missing_tools(std::slice::from_ref(r)).is_empty())
        .map(|r| r.name.as_str())
        .collect();
    let tools: Vec<&str> = missing.iter().map(|t| t.bin).collect();
    Some(format!(
        "\n{} of {} gates not run ({}): {} not installed; install with {}, then run the demo again",
        gates.len(),
        reports.len(),
        gates.join(", "),
        tools.join(", "),
        crate::gates::install_hint(&missing, cwd)
    ))
}

/// `demo --epic`: an epic of three tasks worked to its pull request.
async fn epic_demo(
    dir: &Path,
    json: bool,
    clean: bool,
    program: PathBuf,
    shutdown: &Shutdown,
    serve: Option<u16>,
) -> u8 {
    errln!(
        "supervisor demo --epic: issue #1 is an epic; the planner splits it into units, format (after units) and docs, the reviewer sends format back once"
    );
    match run_demo_epic(dir, program, shutdown, serve.unwrap_or(0)).await {
        Ok((end, report, sandbox)) => {
            let (code, line) = match &end {
                EpicEnd::Finished {
                    tasks,
                    pull_request,
                } => {
                    let list: Vec<String> = (tasks.iter())
                        .map(|t| {
                            format!(
                                "{} #{} {} after {} review(s)",
                                t.task, t.issue, t.outcome, t.reviews
                            )
                        })
                        .collect();
                    let pr = pull_request.map_or(String::new(), |n| {
                        format!("; the epic's pull request: #{n}")
                    });
                    (EXIT_OK, format!("epic #1 done: {}{pr}", list.join(", ")))
                }
                other => (EXIT_STOPPED, format!("epic #1 did not finish: {other:?}")),
            };
            errln!("{line}");
            if json {
                let tasks = match &end {
                    EpicEnd::Finished { tasks, .. } => serde_json::to_value(tasks).expect("json"),
                    _ => serde_json::Value::Null,
                };
                let pr = match &end {
                    EpicEnd::Finished { pull_request, .. } => *pull_request,
                    _ => None,
                };
                outln!(
                    "{}",
                    serde_json::to_string_pretty(&serde_json::json!({
                        "epic": 1, "tasks": tasks, "pullRequest": pr, "demo": report
                    }))
                    .expect("json")
                );
            }
            where_to_look(&report, None, Some(&sandbox), serve.is_some(), clean);
            if serve.is_some() && !shutdown.requested() {
                errln!("\nserving the sandbox GitHub until Ctrl-C");
                shutdown.token().cancelled().await;
            }
            sandbox.shutdown().await;
            code
        }
        Err(e) => {
            errln!("supervisor demo: {e}");
            EXIT_STOPPED
        }
    }
}

/// `demo --watch`: the board-driven mode on the demo's board.
async fn watch_demo(dir: &Path, json: bool, clean: bool, shutdown: &Shutdown) -> u8 {
    errln!(
        "supervisor demo --watch: the scheduler watches the board; a maintainer drags issue #1 from Backlog to Research"
    );
    match run_demo_watch(dir, demo_spec(), super::watch::printer(json), shutdown).await {
        Ok((end, pr, report)) => {
            if json {
                outln!("{}", serde_json::to_string_pretty(&report).expect("json"));
            }
            where_to_look(&report, pr.as_deref(), None, false, clean);
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

/// The pull request, the issue, the board, the journal and the files the demo leaves; with the
/// sandbox still up, the web view's URLs. With `--clean` the files are about to go: their paths
/// are not shown, nor URLs no server will answer.
fn where_to_look(
    report: &DemoReport,
    pr: Option<&str>,
    sandbox: Option<&Sandbox>,
    serving: bool,
    clean: bool,
) {
    // With `--clean` (and no server) the files and the URLs are gone once this returns.
    let gone = clean && !serving;
    if gone {
        errln!(
            "\n{} removed (--clean): run the demo without --clean to keep its journal, run map and GitHub state, or with --serve to browse it first",
            report.dir.display()
        );
    } else {
        errln!("\nwhere to look");
        if let Some(url) = pr {
            errln!("  pull request   {url}");
        }
        if let Some(r) = &report.revision {
            errln!("  review round   {}", report::summary_headline(r));
        }
    }
    let state = sandbox
        .filter(|_| !gone)
        .map(|s| (s.url(), s.port(), s.snapshot()));
    let issue_url = state.as_ref().map_or(String::new(), |(web, _, st)| {
        format!("{web}/{}/{}/issues/1: ", st.repo.owner, st.repo.name)
    });
    errln!(
        "  issue #1       {issue_url}{} comments, card in {}",
        report.comments,
        report.column.as_deref().unwrap_or("(no column)")
    );
    if let Some((web, _, st)) = &state {
        if let Some(b) = &st.board {
            errln!(
                "  board          {web}/orgs/{}/projects/{}",
                b.owner,
                b.number
            );
        }
        errln!("  repository     {web}/");
    }
    if !gone {
        files_to_look_at(report, state.as_ref().map(|(_, port, _)| *port), serving);
    }
    errln!(
        "  requests       {} to the sandbox GitHub, {} outside GitHub's published description",
        report.github_requests,
        report.description_violations.len()
    );
    for v in &report.description_violations {
        errln!("                 {v}");
    }
}

/// The journal, the run map and the GitHub state the demo leaves, and how to serve that state.
fn files_to_look_at(report: &DemoReport, port: Option<u16>, serving: bool) {
    errln!("  journal        {}", report.journal);
    if let Some(map) = &report.run_map {
        errln!("  run map        {} (mermaid)", map.display());
    }
    errln!("  GitHub state   {}", report.sandbox_state.display());
    match port {
        Some(_) if serving => {}
        Some(port) => errln!(
            "                 these URLs open while it is served: supervisor sandbox serve --state {} --port {port} (or run the demo with --serve)",
            report.sandbox_state.display()
        ),
        None => errln!(
            "                 browse it: supervisor sandbox serve --state {}",
            report.sandbox_state.display()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// After gates that did not run for want of a tool: which, and the command that installs
    /// them; supervisor's install script only where the directory has it.
    #[test]
    fn gates_not_run_for_want_of_tools_name_them_and_how_to_install() {
        use crate::config::GateKind;
        use crate::gates::{GateReport, GateStatus};
        let not_run =
            |kind, name: &str, why: &str| GateReport::new(kind, name, GateStatus::not_run(why));
        let reports = [
            GateReport::new(GateKind::Ci, "ci", GateStatus::Pass),
            not_run(
                GateKind::Tsc,
                "tsc",
                "tsc not found in gates.toolPaths, the main checkout's node_modules/.bin or PATH (install typescript, or set gates.allowNpx)",
            ),
            not_run(
                GateKind::DeadCode,
                "knip",
                "knip not found in gates.toolPaths, the main checkout's node_modules/.bin or PATH",
            ),
            not_run(GateKind::Command, "build", "the command failed to start"),
        ];
        let dir = tempfile::tempdir().unwrap();
        let line = missing_tools_line(&reports, dir.path()).unwrap();
        assert_eq!(
            line.trim(),
            "2 of 4 gates not run (tsc, knip): tsc, knip not installed; install with `npm install -g typescript@5.9.3 knip@6.44.2`, then run the demo again"
        );
        std::fs::create_dir_all(dir.path().join("scripts")).unwrap();
        std::fs::write(dir.path().join("scripts/install-tools.sh"), "").unwrap();
        let line = missing_tools_line(&reports, dir.path()).unwrap();
        assert!(
            line.contains("`scripts/install-tools.sh --gates`"),
            "{line}"
        );
        assert_eq!(missing_tools_line(&reports[..1], dir.path()), None);
    }

    #[test]
    fn the_tools_directory_is_the_variable_or_the_checkouts() {
        let dir = tempfile::tempdir().unwrap();
        let tools = dir.path().join(".tools");
        // No variable and no .tools/: no tools.
        assert_eq!(tools_dir(None, dir.path()), Ok(None));
        std::fs::create_dir_all(tools.join("venv/bin")).unwrap();
        assert_eq!(tools_dir(None, dir.path()), Ok(Some(tools.clone())));
        // The variable wins, and must name a directory.
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        assert_eq!(
            tools_dir(Some(elsewhere.clone().into()), dir.path()),
            Ok(Some(elsewhere))
        );
        let err = tools_dir(Some(dir.path().join("nope").into()), dir.path()).unwrap_err();
        assert!(
            err.contains("SUPERVISOR_TOOLS_DIR") && err.contains("nope"),
            "{err}"
        );
        // Only the tool directories that exist go first on PATH.
        let path = path_with_tools(&tools, std::ffi::OsStr::new("/usr/bin")).unwrap();
        let dirs: Vec<PathBuf> = std::env::split_paths(&path).collect();
        assert_eq!(dirs, [tools.join("venv/bin"), PathBuf::from("/usr/bin")]);
        assert_eq!(
            path_with_tools(&dir.path().join("nope"), "/usr/bin".as_ref()),
            None
        );
    }
}
