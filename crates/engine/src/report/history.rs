//! `supervisor runs`: the list of runs, one run's timeline, and the postmortem of a stopped run.

use std::fmt::Write;

use chrono::{DateTime, Utc};

use super::comments::{human_duration, human_tokens};
use crate::pipeline::decide::work::exit_text;
use crate::pipeline::{Entry, Event, Halt, RunRecord, RunStatus, RunTotals};

fn when(t: Option<DateTime<Utc>>) -> String {
    t.map(|t| t.format("%Y-%m-%d %H:%M").to_string())
        .unwrap_or_else(|| "-".into())
}

fn cost(usd: f64) -> String {
    if usd > 0.0 {
        format!("${usd:.2}")
    } else {
        "-".into()
    }
}

/// The runs as a table, newest last.
pub fn runs_text(runs: &[RunRecord]) -> String {
    if runs.is_empty() {
        return "no runs yet: `supervisor run ISSUE` starts one\n".into();
    }
    let rows: Vec<[String; 8]> = runs
        .iter()
        .map(|r| {
            [
                format!("#{}", r.issue),
                r.status.as_str().to_string(),
                r.column.clone().unwrap_or_else(|| "-".into()),
                when(r.started),
                human_duration(r.duration_ms),
                human_tokens(r.tokens),
                cost(r.cost_usd),
                r.pr.clone().unwrap_or_else(|| r.run_id.clone()),
            ]
        })
        .collect();
    let head = [
        "ISSUE", "STATUS", "COLUMN", "STARTED", "TOOK", "TOKENS", "COST", "PR / RUN",
    ];
    let mut widths: Vec<usize> = head.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| -> String {
        let mut s = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i + 1 == cells.len() {
                s.push_str(cell);
            } else {
                let _ = write!(s, "{cell:<w$}  ");
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(head.to_vec());
    for row in &rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    let total = RunTotals::of(runs);
    let _ = writeln!(
        out,
        "total: {} run{}, {} agent runs, {} tokens, cost {}",
        total.runs,
        if total.runs == 1 { "" } else { "s" },
        total.agents,
        human_tokens(total.tokens),
        cost(total.cost_usd)
    );
    out
}

/// One journal event as a line of the timeline.
fn event_line(event: &Event) -> Option<String> {
    Some(match event {
        Event::RunStarted { resumed, .. } => {
            (if *resumed { "resumed" } else { "started" }).to_string()
        }
        Event::Admitted { column } => format!("admitted, card in {column}"),
        Event::WorktreeReady { path, branch, .. } => format!("worktree {path} on {branch}"),
        Event::StageStarted {
            stage,
            agent,
            attempt,
            fix,
        } => {
            let mut s = format!("{stage}: {agent} starts (attempt {attempt})");
            if let Some(fix) = fix {
                let _ = write!(s, ", asked to fix: {fix}");
            }
            s
        }
        Event::AgentFinished { stage, stats, .. } => {
            let mut line = format!(
                "{stage}: {} {} in {}, {} tokens, {} tool calls",
                stats.agent,
                exit_text(&stats.exit),
                human_duration(stats.duration_ms),
                human_tokens(stats.usage.total),
                stats.tool_calls
            );
            if stats.usage.cost_usd > 0.0 {
                let _ = write!(line, ", {}", stats.usage.cost_text());
            }
            line
        }
        Event::Outcome { stage, outcome, .. } => format!("{stage}: answered {}", outcome.action),
        Event::Halted { stage, halt, .. } => match halt {
            Halt::Interrupted => format!("{stage}: interrupted"),
            Halt::Stop { reason, .. } => format!("{stage}: halted: {reason}"),
            Halt::Unusable { problem } => format!("{stage}: unusable answer: {problem}"),
            Halt::Stalled { reason } => format!("{stage}: {reason}"),
        },
        Event::Committed {
            stage, sha, ahead, ..
        } => match sha {
            Some(sha) => format!("{stage}: committed {} ({ahead} ahead)", short(sha)),
            None => format!("{stage}: nothing new to commit"),
        },
        Event::Pushed { sha } => format!("pushed {}", short(sha)),
        Event::GatesFinished { stage, reports, .. } => {
            let gates: Vec<String> = (reports.iter())
                .map(|r| format!("{} {}", r.name, r.status.label()))
                .collect();
            format!("{stage}: gates: {}", gates.join(", "))
        }
        Event::Posted { marker, url, .. } => format!("GitHub: {} comment {url}", marker.kind),
        Event::WriteFailed { marker, error, .. } => {
            format!("GitHub: {} comment not confirmed: {error}", marker.kind)
        }
        Event::CommitUndone { stage, .. } => format!("{stage}: last commit undone"),
        Event::Decision { transition: t } => format!(
            "decided {} → {} ({}): {}",
            t.from,
            t.to,
            serde_json::to_value(t.kind)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default(),
            t.reason
        ),
        Event::Applied { transition: t } if t.from == t.to => format!("card stays in {}", t.to),
        Event::Applied { transition: t } => format!("GitHub: card moved to {}", t.to),
        Event::PullRequest { url, created, .. } => format!(
            "GitHub: pull request {} {url}",
            if *created { "opened" } else { "found" }
        ),
        // The round's line names each gate.
        Event::GateFinished { .. } | Event::Mergeability { .. } | Event::BaseMerged { .. } => {
            return None;
        }
        Event::IssueClosed => "GitHub: issue closed as already resolved".into(),
        Event::Warning { message } => format!("warning: {message}"),
        Event::Stopped { reason } => format!("stopped: {reason}"),
        Event::Paused { reason } => format!("paused: {reason}"),
        Event::Finished { outcome } => format!("finished: {outcome}"),
        Event::Revising { pr, round } => format!("revising pull request #{pr} (round {round})"),
        Event::CardPlaced { column } => format!("GitHub: card placed in {column}"),
        Event::ThreadAnswered { thread, resolved } => format!(
            "GitHub: review thread {thread} answered{}",
            if *resolved { " and resolved" } else { "" }
        ),
        Event::PullBodyUpdated => "GitHub: pull request body updated".into(),
    })
}

fn short(sha: &str) -> &str {
    sha.get(..8).unwrap_or(sha)
}

/// One run: its facts, then every journal event with its time since the start.
pub fn timeline_text(r: &RunRecord, entries: &[Entry]) -> String {
    let mut out = format!(
        "run {} · issue #{} · {} · {}\n",
        r.run_id,
        r.issue,
        r.status.as_str(),
        r.repo
    );
    let _ = writeln!(
        out,
        "started {} · took {} · {} agent runs · {} tokens · cost {}",
        when(r.started),
        human_duration(r.duration_ms),
        r.agents,
        human_tokens(r.tokens),
        cost(r.cost_usd)
    );
    if let Some(pr) = &r.pr {
        let _ = writeln!(out, "pull request {pr}");
    }
    out.push('\n');
    let start = r.started;
    for e in entries {
        let Some(line) = event_line(&e.event) else {
            continue;
        };
        let at = DateTime::parse_from_rfc3339(&e.time).ok();
        let offset = match (start, at) {
            (Some(s), Some(t)) => {
                let secs = (t.with_timezone(&Utc) - s).num_seconds().max(0);
                format!("+{:02}:{:02}", secs / 60, secs % 60)
            }
            _ => "      ".into(),
        };
        let _ = writeln!(out, "{offset}  {line}");
    }
    let _ = writeln!(out, "\njournal {}", r.journal.display());
    out
}

/// Where the run stopped, why, what its last agent said, and what to do next.
pub fn why_text(r: &RunRecord) -> String {
    let what = match r.revises {
        Some(pr) => format!(
            "revision {} of pull request #{pr} (issue #{})",
            r.run_id, r.issue
        ),
        None => format!("run {} of issue #{}", r.run_id, r.issue),
    };
    let mut out = format!("{what}: {}\n", r.status.as_str());
    let place = r.stage.as_deref().or(r.column.as_deref()).unwrap_or("-");
    let _ = writeln!(
        out,
        "where:  {place} (card in {})",
        r.column.as_deref().unwrap_or("no column")
    );
    if let Some(reason) = &r.reason {
        let _ = writeln!(out, "why:    {reason}");
    }
    if let Some(e) = &r.agent_error {
        let _ = writeln!(out, "agent:  {e}");
    }
    if let Some(w) = &r.last_word {
        let text: String = w.text.chars().take(600).collect();
        let _ = writeln!(
            out,
            "last agent: {} in {} (attempt {}) said:\n  {}",
            w.agent,
            w.stage,
            w.attempt,
            text.trim().replace('\n', "\n  ")
        );
    }
    let next = match r.status {
        RunStatus::Done => format!(
            "nothing: the run ended{}",
            r.pr.as_ref()
                .map(|p| format!(" with {p}"))
                .unwrap_or_default()
        ),
        RunStatus::Running => "wait: it is running now".into(),
        RunStatus::Paused | RunStatus::Unfinished | RunStatus::Interrupted => {
            "run it again; it resumes where it stopped".into()
        }
        // A revision goes on only as a revision: `supervisor run` refuses while it is unfinished.
        RunStatus::Stopped if r.revises.is_some() => "fix what stopped it (review or comment on \
             the pull request as a codeowner, or fix its branch), then revise again: a new \
             revision reads the codeowners' feedback afresh"
            .into(),
        RunStatus::Stopped => "fix what stopped it (answer on the issue as a codeowner, edit the \
             issue, or move the card), then run again: a new run starts from the card's column"
            .into(),
        RunStatus::Unreadable => "remove the run's directory to start the issue afresh".into(),
    };
    let _ = writeln!(out, "next:   {next}");
    if !matches!(r.status, RunStatus::Done | RunStatus::Running) {
        let _ = match r.revises {
            Some(pr) => writeln!(out, "        supervisor revise {pr}"),
            None => writeln!(out, "        supervisor run {}", r.issue),
        };
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::Journal;

    #[test]
    fn the_postmortem_names_place_reason_last_word_and_the_command() {
        let dir = tempfile::tempdir().unwrap();
        let mut j = Journal::open(dir.path(), "9-z").unwrap();
        for e in [
            Event::RunStarted {
                issue: 9,
                repo: "o/r".into(),
                resumed: false,
                version: "0".into(),
            },
            Event::Admitted {
                column: "Audit".into(),
            },
            Event::StageStarted {
                stage: "Audit".into(),
                agent: "auditor".into(),
                attempt: 2,
                fix: None,
            },
            Event::Stopped {
                reason: "rejected 2 times".into(),
            },
            Event::Finished {
                outcome: "Stopped".into(),
            },
        ] {
            j.record(e).unwrap();
        }
        let r = RunRecord::fold("9-z", j.path().to_path_buf(), j.entries(), false);
        let why = why_text(&r);
        assert!(why.contains("stopped"), "{why}");
        assert!(why.contains("where:  Audit"), "{why}");
        assert!(why.contains("why:    rejected 2 times"), "{why}");
        assert!(why.contains("supervisor run 9"), "{why}");
        let timeline = timeline_text(&r, j.entries());
        assert!(
            timeline.contains("+00:00  Audit: auditor starts (attempt 2)"),
            "{timeline}"
        );
        assert!(timeline.contains("stopped: rejected 2 times"), "{timeline}");
        let table = runs_text(&[r.clone(), r.clone()]);
        assert!(table.starts_with("ISSUE"), "{table}");
        assert!(table.contains("#9     stopped  Audit"), "{table}");
        assert!(
            table.ends_with(&format!(
                "total: 2 runs, {} agent runs, {} tokens, cost -\n",
                2 * r.agents,
                human_tokens(2 * r.tokens)
            )),
            "{table}"
        );
    }

    #[test]
    fn a_paused_revision_goes_on_with_supervisor_revise() {
        let dir = tempfile::tempdir().unwrap();
        let mut j = Journal::open(dir.path(), "4-rev6-z").unwrap();
        for e in [
            Event::RunStarted {
                issue: 4,
                repo: "o/r".into(),
                resumed: false,
                version: "0".into(),
            },
            Event::Revising { pr: 6, round: 1 },
            Event::Admitted {
                column: "Implementation".into(),
            },
            Event::CardPlaced {
                column: "Audit".into(),
            },
            Event::StageStarted {
                stage: "Implementation".into(),
                agent: "developer".into(),
                attempt: 1,
                fix: None,
            },
            // A paused run records no end: running again resumes it.
            Event::Paused {
                reason: "GitHub is rate limited".into(),
            },
        ] {
            j.record(e).unwrap();
        }
        let r = RunRecord::fold("4-rev6-z", j.path().to_path_buf(), j.entries(), false);
        let why = why_text(&r);
        assert!(
            why.starts_with("revision 4-rev6-z of pull request #6 (issue #4): "),
            "{why}"
        );
        assert!(
            why.contains("where:  Implementation (card in Audit)"),
            "{why}"
        );
        assert!(why.contains("it resumes where it stopped"), "{why}");
        assert!(why.trim_end().ends_with("supervisor revise 6"), "{why}");
    }
}
