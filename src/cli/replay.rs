//! `supervisor runs replay`: past runs' decisions taken again with today's configuration (or the
//! settings and workflow files given). It reads journals and configuration files only.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use clap::Args;
use serde::Serialize;

use super::output::{err, errln, out, outln};
use super::{EXIT_OK, EXIT_STOPPED, EXIT_USAGE};
use crate::pipeline::replay::{Choice, Config, DecisionPoint, Replay, replay};
use crate::pipeline::{Project, RunRecord, process_env, read_entries};
use crate::report;

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// A run id, or an issue number (its latest run).
    #[arg(conflicts_with = "all")]
    pub run: Option<String>,
    /// Replay every run under .supervisor/runs and print a summary.
    #[arg(long)]
    pub all: bool,
    /// With --all: only the last N runs (by start time).
    #[arg(long, value_name = "N")]
    pub last: Option<usize>,
    /// A settings file to decide with instead of the repository's (.supervisor/settings.json).
    #[arg(long, value_name = "FILE")]
    pub settings: Option<PathBuf>,
    /// A workflow file to decide with instead of the one the settings name.
    #[arg(long, value_name = "FILE")]
    pub workflow: Option<PathBuf>,
}

/// Runs `--all` could not replay: the journal unreadable, or no decision in it replayable.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Unreplayable {
    run_id: String,
    why: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Summary {
    replayed: usize,
    with_differences: Vec<String>,
    not_replayable: Vec<Unreplayable>,
}

pub(super) fn run(root: &Path, runs: &[RunRecord], args: ReplayArgs, json: bool) -> u8 {
    if args.run.is_none() && !args.all {
        errln!(
            "supervisor runs replay: name the run to replay (a run id, or an issue number for its latest run; `supervisor runs` lists them), or pass --all"
        );
        return EXIT_USAGE;
    }
    if args.last.is_some() && !args.all {
        errln!("supervisor runs replay: --last N goes with --all (the last N runs)");
        return EXIT_USAGE;
    }
    let chosen: Vec<RunRecord> = match (&args.run, args.last) {
        (Some(key), _) => match super::runs::found(runs, key) {
            Ok(r) => vec![r],
            Err(code) => return code,
        },
        (None, Some(n)) => runs[runs.len().saturating_sub(n)..].to_vec(),
        (None, None) => runs.to_vec(),
    };
    // Files named on the command line are relative to where it was given.
    let here = |p: &Option<PathBuf>| {
        p.as_ref()
            .map(|p| std::path::absolute(p).unwrap_or(p.clone()))
    };
    let (settings, workflow) = (here(&args.settings), here(&args.workflow));
    for (flag, file) in [("--settings", &settings), ("--workflow", &workflow)] {
        if let Some(file) = file.as_ref().filter(|f| !f.is_file()) {
            errln!(
                "supervisor runs replay: {flag} {}: no such file; pass {flag} FILE with a file to decide with",
                file.display()
            );
            return EXIT_USAGE;
        }
    }
    let project =
        match Project::load_replacing(root, &process_env, settings.as_deref(), workflow.as_deref())
        {
            Ok(p) => p,
            Err(e) => {
                err!("{}", report::errors_text(&e, false));
                return EXIT_USAGE;
            }
        };
    let config = Config {
        workflow: &project.workflow,
        settings: &project.settings,
    };
    // What `runs replay RUN` needs to show a run's differences as --all found them.
    let mut flags = String::new();
    for (flag, file) in [("--settings", &settings), ("--workflow", &workflow)] {
        if let Some(file) = file {
            let _ = write!(flags, " {flag} {}", file.display());
        }
    }
    // The files decided with, for --json.
    let used = serde_json::json!({
        "settings": project.settings_path,
        "workflow": project.workflow.source,
    });
    let with = format!(
        "the settings in {} and the workflow {}",
        project.settings_path.display(),
        project.workflow.source
    );
    if !args.all {
        let record = &chosen[0];
        return match read_entries(&record.journal) {
            Ok(entries) => {
                let r = replay(&record.run_id, &entries, config);
                if json {
                    outln!("{}", serde_json::json!({ "replay": r, "config": used }));
                } else {
                    out!("{}", replay_text(&r, &with));
                }
                EXIT_OK
            }
            Err(e) => {
                errln!("supervisor runs replay: {e}");
                EXIT_STOPPED
            }
        };
    }
    let mut replays = Vec::new();
    let mut summary = Summary {
        replayed: 0,
        with_differences: Vec::new(),
        not_replayable: Vec::new(),
    };
    for record in &chosen {
        let entries = match read_entries(&record.journal) {
            Ok(e) => e,
            Err(e) => {
                summary.not_replayable.push(Unreplayable {
                    run_id: record.run_id.clone(),
                    why: e.to_string(),
                });
                continue;
            }
        };
        let r = replay(&record.run_id, &entries, config);
        if r.replayed == 0 {
            let why = match r.not_replayable.first() {
                Some(n) => n.why.clone(),
                None => "its journal records no decision".to_string(),
            };
            summary.not_replayable.push(Unreplayable {
                run_id: r.run_id.clone(),
                why,
            });
        } else {
            summary.replayed += 1;
            if !r.differences.is_empty() {
                summary.with_differences.push(r.run_id.clone());
            }
        }
        replays.push(r);
    }
    if json {
        outln!(
            "{}",
            serde_json::json!({ "runs": replays, "summary": summary, "config": used })
        );
    } else {
        out!("{}", all_text(&replays, &summary, &with, &flags));
    }
    EXIT_OK
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn place(stage: &str, attempt: Option<u32>, point: DecisionPoint) -> String {
    match (attempt, point) {
        (Some(a), _) => format!("{stage}, attempt {a}"),
        (None, DecisionPoint::Plan) => format!("{stage}, on arrival"),
        (None, DecisionPoint::Outcome) => stage.to_string(),
    }
}

/// One run's replay, for people.
pub(super) fn replay_text(r: &Replay, with: &str) -> String {
    let mut text = format!(
        "run {}: {} replayed with {with}: {} differ{}, {} not replayable\n",
        r.run_id,
        plural(r.replayed, "decision", "decisions"),
        r.differences.len(),
        if r.differences.len() == 1 { "s" } else { "" },
        r.not_replayable.len(),
    );
    for d in &r.differences {
        let _ = writeln!(
            text,
            "\n{}{}",
            place(&d.stage, d.attempt, d.point),
            if d.after_earlier_difference {
                " (after an earlier difference: the run would not have come here as it did)"
            } else {
                ""
            }
        );
        if let Some(g) = &d.gates {
            let list = |v: &[String]| {
                if v.is_empty() {
                    "none blocking".to_string()
                } else {
                    format!("blocking: {}", v.join(", "))
                }
            };
            let _ = writeln!(
                text,
                "  gates     recorded {} ({}), replayed {} ({})",
                g.recorded,
                list(&g.recorded_blocking),
                g.replayed,
                list(&g.replayed_blocking)
            );
        }
        let _ = writeln!(text, "  recorded  {}", d.recorded.describe());
        let _ = writeln!(text, "  replayed  {}", d.replayed.describe());
        if let (Some(was), Some(now)) = (score_of(&d.recorded), score_of(&d.replayed)) {
            let _ = writeln!(text, "  score     recorded {was}; replayed {now}");
        }
    }
    if !r.not_replayable.is_empty() {
        text.push_str("\nnot replayable\n");
        for n in &r.not_replayable {
            let _ = writeln!(
                text,
                "  {}: not replayable: {}",
                place(&n.stage, n.attempt, n.point),
                n.why
            );
        }
    }
    text
}

/// `passing/total (ratio) against the threshold T: passed`.
fn score_of(choice: &Choice) -> Option<String> {
    let Choice::Move { score: Some(s), .. } = choice else {
        return None;
    };
    Some(format!(
        "{}/{} ({:.2}) against the threshold {}: {}",
        s.passing,
        s.total,
        s.ratio(),
        s.threshold,
        if s.passed { "passes" } else { "fails" }
    ))
}

fn all_text(replays: &[Replay], summary: &Summary, with: &str, flags: &str) -> String {
    let mut text = format!(
        "{} replayed with {with}: {} with differences, {} not replayable\n",
        plural(summary.replayed, "run", "runs"),
        summary.with_differences.len(),
        summary.not_replayable.len()
    );
    for r in replays.iter().filter(|r| !r.differences.is_empty()) {
        let _ = writeln!(
            text,
            "  differs         {} ({}; `supervisor runs replay {}{flags}` shows them)",
            r.run_id,
            plural(r.differences.len(), "difference", "differences"),
            r.run_id
        );
    }
    for n in &summary.not_replayable {
        let _ = writeln!(text, "  not replayable  {}: {}", n.run_id, n.why);
    }
    text
}
