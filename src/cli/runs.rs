//! `supervisor runs`: the run history kept under `.supervisor/runs/`. The listings and reports
//! go to stdout, to be paged or piped (`supervisor runs | less`); errors to stderr.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::output::{errln, out, outln};
use super::{EXIT_OK, EXIT_STOPPED, EXIT_USAGE};
use crate::pipeline::{RunRecord, find_run, prune_runs, read_entries, read_runs};
use crate::report;

#[derive(Debug, Args)]
pub struct RunsArgs {
    #[command(subcommand)]
    pub command: Option<RunsCommand>,
    /// Repository root (default: the current directory).
    #[arg(long, value_name = "DIR", default_value = ".", global = true)]
    pub repo_root: PathBuf,
    /// Print JSON on stdout.
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// One run's timeline: stages, agents, gate rounds, decisions with reasons, GitHub writes.
    Show {
        /// A run id, or an issue number (its latest run).
        run: String,
    },
    /// Why a run stopped: where, why, what the last agent said, and the command that goes on.
    Why {
        /// A run id, or an issue number (its latest run).
        run: String,
    },
    /// A run's decisions taken again with today's configuration: which would differ.
    ///
    /// Takes each decision the run recorded again, with today's settings and workflow (or the
    /// files given), and prints each one that would differ: gate verdicts, audit scores against
    /// the threshold, moves. Reads the journal only: no GitHub, no agent, no git.
    Replay(super::replay::ReplayArgs),
    /// Remove the journals of runs that ended longer ago than DURATION (runs that can resume stay).
    Prune {
        /// How old a run must be: a number and a unit, `30d`, `12h`, `45m`.
        #[arg(long, value_name = "DURATION", value_parser = parse_age)]
        older_than: chrono::Duration,
    },
}

/// `30d`, `12h`, `45m`, `90s`.
fn parse_age(text: &str) -> Result<chrono::Duration, String> {
    let bad = || format!("`{text}` is not an age: write a number and a unit, like 30d, 12h or 45m");
    let unit = text.chars().last().ok_or_else(bad)?;
    let n: i64 = text[..text.len() - unit.len_utf8()]
        .parse()
        .map_err(|_| bad())?;
    match unit {
        'd' => chrono::Duration::try_days(n),
        'h' => chrono::Duration::try_hours(n),
        'm' => chrono::Duration::try_minutes(n),
        's' => chrono::Duration::try_seconds(n),
        _ => None,
    }
    .ok_or_else(bad)
}

pub(super) fn run(args: RunsArgs) -> u8 {
    let root = match super::paths::existing_dir(
        "--repo-root",
        &args.repo_root,
        "the repository's directory",
    ) {
        Ok(root) => root,
        Err(e) => {
            errln!("supervisor runs: {e}");
            return EXIT_USAGE;
        }
    };
    let runs = match read_runs(&root) {
        Ok(r) => r,
        Err(e) => {
            errln!(
                "supervisor runs: cannot read {}: {}",
                crate::pipeline::runs_dir(&root).display(),
                crate::config::io_reason(&e)
            );
            return EXIT_STOPPED;
        }
    };
    // Epics planned here, each task with its sub-issue's latest run.
    let epics = crate::runtime::read_epics(&root).unwrap_or_else(|e| {
        errln!("supervisor runs: the epics' journals cannot be read: {e}");
        Vec::new()
    });
    match args.command {
        None if args.json => outln!(
            "{}",
            serde_json::json!({
                "runs": runs,
                "total": crate::pipeline::RunTotals::of(&runs),
                "epics": epics_json(&epics, &runs),
            })
        ),
        None => {
            out!("{}", report::runs_text(&runs));
            out!("{}", epics_text(&epics, &runs));
        }
        Some(RunsCommand::Show { run }) => return show(&runs, &run, args.json, false),
        Some(RunsCommand::Why { run }) => return show(&runs, &run, args.json, true),
        Some(RunsCommand::Replay(replay)) => {
            return super::replay::run(&root, &runs, replay, args.json);
        }
        Some(RunsCommand::Prune { older_than }) => {
            return prune(&root, chrono::Utc::now() - older_than, args.json);
        }
    }
    EXIT_OK
}

/// The latest run of issue `n`.
fn latest(runs: &[RunRecord], n: u64) -> Option<&RunRecord> {
    runs.iter()
        .rev()
        .find(|r| r.issue == n && r.revises.is_none())
}

/// One line per epic: its tasks, each with its sub-issue and where its latest run is.
fn epics_text(epics: &[crate::runtime::EpicRecord], runs: &[RunRecord]) -> String {
    let mut out = String::new();
    for e in epics {
        if let Some(why) = &e.unreadable {
            out.push_str(&format!(
                "epic #{}: its journal cannot be read: {why}\n",
                e.epic
            ));
            continue;
        }
        let state = match (e.finished, e.pull_request, e.planned) {
            (true, Some(pr), _) => format!("done, pull request #{pr}"),
            (true, None, _) => "done".to_string(),
            (false, _, true) => "planned".to_string(),
            (false, _, false) => "being planned".to_string(),
        };
        let tasks: Vec<String> = (e.tasks.iter())
            .map(|t| match t.issue {
                None => format!("{} (no sub-issue yet)", t.task),
                Some(n) => match latest(runs, n) {
                    Some(r) => format!("{} #{n} ({}, run {})", t.task, t.stage, r.status.as_str()),
                    None => format!("{} #{n} ({}, no run yet)", t.task, t.stage),
                },
            })
            .collect();
        out.push_str(&format!(
            "epic #{}: {state}, {} task(s): {}\n",
            e.epic,
            e.tasks.len(),
            tasks.join(", ")
        ));
    }
    out
}

fn epics_json(epics: &[crate::runtime::EpicRecord], runs: &[RunRecord]) -> serde_json::Value {
    let epics: Vec<serde_json::Value> = epics
        .iter()
        .map(|e| {
            let mut v = serde_json::json!(e);
            for (t, task) in (e.tasks.iter()).zip(v["tasks"].as_array_mut().into_iter().flatten()) {
                let run = t.issue.and_then(|n| latest(runs, n));
                task["run"] = serde_json::json!(run.map(|r| &r.run_id));
                task["status"] = serde_json::json!(run.map(|r| r.status.as_str()));
            }
            v
        })
        .collect();
    serde_json::Value::Array(epics)
}

pub(super) fn found(runs: &[RunRecord], key: &str) -> Result<RunRecord, u8> {
    find_run(runs, key).ok_or_else(|| {
        errln!(
            "supervisor runs: no run `{key}` here; `supervisor runs` lists them ({} known)",
            runs.len()
        );
        EXIT_USAGE
    })
}

fn show(runs: &[RunRecord], key: &str, json: bool, why: bool) -> u8 {
    let r = match found(runs, key) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let entries = match read_entries(&r.journal) {
        Ok(e) => e,
        Err(e) => {
            errln!("supervisor runs: {e}");
            return EXIT_STOPPED;
        }
    };
    match (json, why) {
        (true, true) => outln!("{}", serde_json::json!({ "run": r })),
        (true, false) => outln!("{}", serde_json::json!({ "run": r, "events": entries })),
        (false, true) => out!("{}", report::why_text(&r)),
        (false, false) => out!("{}", report::timeline_text(&r, &entries)),
    }
    EXIT_OK
}

fn prune(root: &std::path::Path, cutoff: chrono::DateTime<chrono::Utc>, json: bool) -> u8 {
    match prune_runs(root, cutoff) {
        Ok(removed) if json => outln!("{}", serde_json::json!({ "removed": removed })),
        Ok(removed) => outln!("removed {} run(s): {}", removed.len(), removed.join(", ")),
        Err((path, e)) => {
            errln!(
                "supervisor runs prune: cannot remove {}: {e}",
                path.display()
            );
            return EXIT_STOPPED;
        }
    }
    EXIT_OK
}

#[cfg(test)]
mod tests {
    use super::parse_age;

    #[test]
    fn ages_take_a_unit_and_refuse_anything_else() {
        assert_eq!(parse_age("30d").unwrap(), chrono::Duration::days(30));
        assert_eq!(parse_age("12h").unwrap(), chrono::Duration::hours(12));
        for bad in ["", "30", "d", "3w", "x5m"] {
            let e = parse_age(bad).unwrap_err();
            assert!(e.contains("30d"), "{e}");
        }
    }
}
