//! Run history: every run's journal under `.supervisor/runs/` folded into a record (issue, status,
//! column reached, times, tokens, pull request), for `supervisor runs`.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::journal::{Entry, Event, Halt, JournalError, read_entries, runs_dir};
use crate::agent::ExitReason;
use crate::workspace::Checkpoint;

/// Where a run stands, as its journal and checkpoint tell it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunStatus {
    /// A process is running it now.
    Running,
    /// It ended: a pull request, nothing to do, or the issue closed as resolved.
    Done,
    /// It stopped before Done (or was refused); a human is needed.
    Stopped,
    /// It paused on something running again fixes.
    Paused,
    /// A signal stopped it.
    Interrupted,
    /// Its journal ends without an end: the process died. Running again resumes it.
    Unfinished,
    /// Its journal cannot be read (the error says why).
    Unreadable,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Done => "done",
            RunStatus::Stopped => "stopped",
            RunStatus::Paused => "paused",
            RunStatus::Interrupted => "interrupted",
            RunStatus::Unfinished => "unfinished",
            RunStatus::Unreadable => "unreadable",
        }
    }

    /// Whether `supervisor run ISSUE` continues this run (rather than starting a new one).
    pub(crate) fn resumes(self) -> bool {
        matches!(self, RunStatus::Paused | RunStatus::Unfinished)
    }
}

/// What the last agent said before the run ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LastWord {
    pub stage: String,
    pub(crate) agent: String,
    pub attempt: u32,
    pub(crate) text: String,
}

/// One run, folded from its journal.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunRecord {
    pub run_id: String,
    pub issue: u64,
    pub(crate) repo: String,
    pub status: RunStatus,
    /// The board column the run last reached.
    pub(crate) column: Option<String>,
    /// The stage last worked on.
    pub stage: Option<String>,
    pub(crate) started: Option<DateTime<Utc>>,
    /// When it ended (none while running or unfinished).
    pub(crate) ended: Option<DateTime<Utc>>,
    /// From its first event to its last.
    pub(crate) duration_ms: u64,
    pub(crate) agents: u32,
    pub(crate) tokens: u64,
    pub(crate) cost_usd: f64,
    pub(crate) pr: Option<String>,
    /// The pull request this run revised after review (`supervisor revise`).
    pub revises: Option<u64>,
    /// Why it stopped or paused.
    pub(crate) reason: Option<String>,
    pub(crate) last_word: Option<LastWord>,
    /// How the last agent that did not complete ended, with what its CLI said (kept out of
    /// comments: shown to whoever reads the journal).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) agent_error: Option<String>,
    /// How many times it was resumed.
    pub(crate) resumes: u32,
    pub journal: PathBuf,
}

/// What a set of runs (a repository's board) spent together.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunTotals {
    pub(crate) runs: usize,
    pub(crate) agents: u32,
    pub(crate) tokens: u64,
    /// Agents stopped before their CLI reported a cost are counted at the price table's prices.
    pub(crate) cost_usd: f64,
}

impl RunTotals {
    pub fn of(runs: &[RunRecord]) -> RunTotals {
        runs.iter().fold(RunTotals::default(), |t, r| RunTotals {
            runs: t.runs + 1,
            agents: t.agents + r.agents,
            tokens: t.tokens + r.tokens,
            cost_usd: t.cost_usd + r.cost_usd,
        })
    }
}

/// The pull request a revision's `run_id` revises; `None` for a run of an issue.
pub fn revised_pull(run_id: &str) -> Option<u64> {
    run_id.split('-').nth(1)?.strip_prefix("rev")?.parse().ok()
}

fn time(entry: &Entry) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(&entry.time)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

impl RunRecord {
    /// The record of the run `run_id` whose journal holds `entries`; `live`: a process holds it now.
    pub fn fold(run_id: &str, journal: PathBuf, entries: &[Entry], live: bool) -> RunRecord {
        let mut r = RunRecord {
            run_id: run_id.to_string(),
            issue: run_id
                .split('-')
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or_default(),
            repo: String::new(),
            status: RunStatus::Unfinished,
            column: None,
            stage: None,
            started: entries.first().and_then(time),
            ended: None,
            duration_ms: 0,
            agents: 0,
            tokens: 0,
            cost_usd: 0.0,
            pr: None,
            // Also for a revision that ended before its journal said so (nothing to revise).
            revises: revised_pull(run_id),
            reason: None,
            last_word: None,
            agent_error: None,
            resumes: 0,
            journal,
        };
        for entry in entries {
            r.apply(entry);
        }
        if let (Some(first), Some(last)) = (r.started, entries.last().and_then(time)) {
            r.duration_ms = u64::try_from((last - first).num_milliseconds()).unwrap_or_default();
        }
        if live && matches!(r.status, RunStatus::Unfinished | RunStatus::Paused) {
            r.status = RunStatus::Running;
        }
        r
    }

    fn apply(&mut self, entry: &Entry) {
        match &entry.event {
            Event::RunStarted { issue, repo, .. } => {
                if self.repo.is_empty() {
                    self.issue = *issue;
                    self.repo = repo.clone();
                } else {
                    self.resumes += 1;
                }
                (self.status, self.ended, self.reason) = (RunStatus::Unfinished, None, None);
            }
            // A revision is admitted at its stage; its card is where `CardPlaced` put it.
            Event::Admitted { column } if self.revises.is_some() => {
                self.stage.get_or_insert_with(|| column.clone());
            }
            Event::Admitted { column } | Event::CardPlaced { column } => {
                self.column = Some(column.clone());
            }
            Event::Applied { transition } => self.column = Some(transition.to.clone()),
            Event::StageStarted { stage, .. } => self.stage = Some(stage.clone()),
            Event::AgentFinished {
                stage,
                attempt,
                stats,
            } => {
                self.agents += 1;
                self.tokens += stats.usage.total;
                self.cost_usd += stats.usage.cost_usd;
                self.agent_error = (stats.exit != ExitReason::Completed).then(|| {
                    format!(
                        "{} in {stage} (attempt {attempt}): {}",
                        stats.agent,
                        stats.exit.describe()
                    )
                });
            }
            Event::Outcome {
                stage,
                attempt,
                outcome,
            } => {
                let text = (outcome.summary.clone())
                    .or_else(|| outcome.comment_body.clone())
                    .unwrap_or_else(|| outcome.action.to_string());
                self.last_word = Some(LastWord {
                    stage: stage.clone(),
                    agent: outcome.agent_name.clone().unwrap_or_default(),
                    attempt: *attempt,
                    text,
                });
            }
            Event::Halted { halt, .. } => match halt {
                Halt::Stop { reason, .. } => self.reason = Some(reason.to_string()),
                Halt::Unusable { problem } => self.reason = Some(problem.clone()),
                Halt::Stalled { reason } => self.reason = Some(reason.clone()),
                Halt::Interrupted => {}
            },
            Event::PullRequest { url, .. } => self.pr = Some(url.clone()),
            Event::Revising { pr, .. } => self.revises = Some(*pr),
            Event::Stopped { reason } => {
                self.status = RunStatus::Stopped;
                self.reason = Some(reason.clone());
            }
            Event::Paused { reason } => {
                self.status = RunStatus::Paused;
                self.reason = Some(reason.clone());
            }
            Event::Finished { outcome } => {
                self.ended = time(entry);
                self.status = match self.status {
                    RunStatus::Stopped => RunStatus::Stopped,
                    _ if outcome == "interrupted" => RunStatus::Interrupted,
                    _ => RunStatus::Done,
                };
            }
            _ => {}
        }
    }

    /// A run whose journal cannot be read.
    fn unreadable(run_id: &str, journal: PathBuf, error: &JournalError) -> RunRecord {
        let mut r = RunRecord::fold(run_id, journal, &[], false);
        r.status = RunStatus::Unreadable;
        r.reason = Some(error.to_string());
        r
    }
}

/// Every run of the repository at `repo_root`, oldest first (run ids sort by issue, then time; the
/// list is sorted by start time).
pub fn read_runs(repo_root: &Path) -> Result<Vec<RunRecord>, std::io::Error> {
    read_runs_where(repo_root, |_| true)
}

/// The runs whose ids `keep` accepts (the others' journals are not read), oldest first.
pub fn read_runs_where(
    repo_root: &Path,
    keep: impl Fn(&str) -> bool,
) -> Result<Vec<RunRecord>, std::io::Error> {
    let dir = runs_dir(repo_root);
    let listing = match std::fs::read_dir(&dir) {
        Ok(l) => l,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut runs = Vec::new();
    for entry in listing {
        let entry = entry?;
        let run_id = entry.file_name().to_string_lossy().into_owned();
        let journal = entry.path().join("events.jsonl");
        if !keep(&run_id) || !journal.is_file() {
            continue;
        }
        runs.push(match read_entries(&journal) {
            Ok(entries) => {
                let live = is_live(repo_root, &run_id, &entries);
                RunRecord::fold(&run_id, journal, &entries, live)
            }
            Err(e) => RunRecord::unreadable(&run_id, journal, &e),
        });
    }
    runs.sort_by(|a, b| (a.started, &a.run_id).cmp(&(b.started, &b.run_id)));
    Ok(runs)
}

/// Whether a live process holds the run (its issue's checkpoint names it and its process lives).
fn is_live(repo_root: &Path, run_id: &str, entries: &[Entry]) -> bool {
    let issue = entries.iter().find_map(|e| match &e.event {
        Event::RunStarted { issue, .. } => Some(*issue),
        _ => None,
    });
    let Some(issue) = issue else {
        return false;
    };
    matches!(Checkpoint::load(repo_root, issue), Ok(Some(cp))
        if cp.run_id == run_id && (cp.pid == std::process::id() || cp.process_alive()))
}

/// The run `key` names: a run id, or an issue number (its latest run).
pub fn find_run(runs: &[RunRecord], key: &str) -> Option<RunRecord> {
    if let Some(r) = runs.iter().find(|r| r.run_id == key) {
        return Some(r.clone());
    }
    let issue: u64 = key.trim_start_matches('#').parse().ok()?;
    runs.iter().rev().find(|r| r.issue == issue).cloned()
}

/// Remove the journals of runs that ended (or were left unfinished) before `cutoff`; runs a
/// process holds and runs that can resume keep theirs. Returns the removed run ids.
pub fn prune_runs(
    repo_root: &Path,
    cutoff: DateTime<Utc>,
) -> Result<Vec<String>, (PathBuf, std::io::Error)> {
    let dir = runs_dir(repo_root);
    let runs = read_runs(repo_root).map_err(|e| (dir.clone(), e))?;
    let mut removed = Vec::new();
    for r in runs {
        let last = r.ended.or(r.started);
        let old = last.is_some_and(|t| t < cutoff) || r.status == RunStatus::Unreadable;
        // A run that never reached a column (its issue not found, say) has nothing to resume.
        let started = r.column.is_some() || r.stage.is_some();
        if !old || r.status == RunStatus::Running || (started && r.status.resumes()) {
            continue;
        }
        let run_dir = dir.join(&r.run_id);
        std::fs::remove_dir_all(&run_dir).map_err(|e| (run_dir, e))?;
        removed.push(r.run_id);
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::Journal;
    use crate::pipeline::decide::{Transition, TransitionKind};

    fn started(issue: u64) -> Event {
        Event::RunStarted {
            issue,
            repo: "o/r".into(),
            resumed: false,
            version: "0".into(),
        }
    }

    fn record(root: &Path, run_id: &str, events: Vec<Event>) {
        let mut j = Journal::open(root, run_id).unwrap();
        for e in events {
            j.record(e).unwrap();
        }
    }

    #[test]
    fn a_stopped_run_a_paused_one_and_a_done_one_are_told_apart() {
        let dir = tempfile::tempdir().unwrap();
        let applied = Event::Applied {
            transition: Transition::new("Backlog", "Research", TransitionKind::Auto, "r"),
        };
        record(
            dir.path(),
            "3-a",
            vec![
                started(3),
                Event::Admitted {
                    column: "Backlog".into(),
                },
                applied,
                Event::Stopped {
                    reason: "needs a human".into(),
                },
                Event::Finished {
                    outcome: "Stopped".into(),
                },
            ],
        );
        let admitted = || Event::Admitted {
            column: "Research".into(),
        };
        record(
            dir.path(),
            "4-b",
            vec![
                started(4),
                admitted(),
                Event::Paused {
                    reason: "GitHub did not answer".into(),
                },
            ],
        );
        record(
            dir.path(),
            "5-c",
            vec![
                started(5),
                Event::PullRequest {
                    number: 2,
                    url: "https://x/pull/2".into(),
                    created: true,
                },
                Event::Finished {
                    outcome: "pull request https://x/pull/2".into(),
                },
            ],
        );
        record(dir.path(), "6-d", vec![started(6), admitted()]);
        // Paused before it was admitted (its issue not found, by an earlier version): nothing of
        // it can resume, so pruning removes it.
        record(
            dir.path(),
            "7-e",
            vec![
                started(7),
                Event::Paused {
                    reason: "Issue #7 not found".into(),
                },
            ],
        );
        let runs = read_runs(dir.path()).unwrap();
        let status: Vec<_> = runs.iter().map(|r| (r.issue, r.status)).collect();
        assert_eq!(
            status,
            [
                (3, RunStatus::Stopped),
                (4, RunStatus::Paused),
                (5, RunStatus::Done),
                (6, RunStatus::Unfinished),
                (7, RunStatus::Paused)
            ]
        );
        assert_eq!(runs[0].column.as_deref(), Some("Research"));
        assert_eq!(runs[0].reason.as_deref(), Some("needs a human"));
        assert!(runs[0].ended.is_some());
        assert_eq!(runs[2].pr.as_deref(), Some("https://x/pull/2"));
        assert_eq!(find_run(&runs, "#4").unwrap().run_id, "4-b");
        assert_eq!(find_run(&runs, "5-c").unwrap().issue, 5);
        assert!(find_run(&runs, "9").is_none());

        // Pruning keeps what can resume, removes what ended before the cutoff.
        let later = Utc::now() + chrono::Duration::days(1);
        let mut removed = prune_runs(dir.path(), later).unwrap();
        removed.sort();
        assert_eq!(removed, ["3-a", "5-c", "7-e"]);
        let left: Vec<_> = read_runs(dir.path()).unwrap();
        assert_eq!(left.len(), 2);
        assert!(
            prune_runs(dir.path(), Utc::now() - chrono::Duration::days(1))
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn an_unreadable_journal_is_listed_with_its_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = runs_dir(dir.path()).join("7-x/events.jsonl");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "{\"seq\":1,\"time\":\"t\",\"kind\":\"warning\"}\n").unwrap();
        let runs = read_runs(dir.path()).unwrap();
        assert_eq!(runs[0].status, RunStatus::Unreadable);
        assert_eq!(runs[0].issue, 7);
        assert!(runs[0].reason.as_ref().unwrap().contains("format 1"));
    }
}
