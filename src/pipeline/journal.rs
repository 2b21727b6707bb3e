//! The run journal: `.supervisor/runs/<run-id>/events.jsonl`, one JSON object per line.
//!
//! GitHub is the source of truth; the journal is our memory. Every step appends an event (seq, time,
//! kind, payload) and flushes it before the next step starts, so a run killed at any point can be
//! resumed: finished stages are not re-run and writes already made are recognised.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::decide::{RunState, Transition};

/// Where runs of a repository are kept.
pub fn runs_dir(repo_root: &Path) -> PathBuf {
    repo_root.join(".supervisor").join("runs")
}

/// What happened. `kind` and `payload` in the file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "payload", rename_all = "kebab-case")]
pub enum Event {
    RunStarted {
        issue: u64,
        repo: String,
        resumed: bool,
        version: String,
    },
    /// Trust, board and blocker checks passed; the column the card was in.
    Admitted {
        column: String,
    },
    WorktreeReady {
        path: String,
        branch: String,
        reused: String,
        warnings: Vec<String>,
    },
    StageStarted {
        stage: String,
        agent: String,
        attempt: u32,
    },
    /// Agent statistics (the normalised run minus its text).
    AgentFinished {
        stage: String,
        attempt: u32,
        stats: Value,
    },
    /// The parsed outcome of a stage attempt (or the error that stopped it).
    Outcome {
        stage: String,
        attempt: u32,
        outcome: Value,
    },
    Committed {
        stage: String,
        attempt: u32,
        sha: Option<String>,
    },
    Pushed {
        sha: String,
    },
    GatesFinished {
        stage: String,
        attempt: u32,
        reports: Value,
    },
    /// A write to GitHub, with the marker that makes it idempotent.
    GitHubWrite {
        what: String,
        marker: Option<String>,
        url: Option<String>,
        /// The id of a comment we posted: only these (and codeowners') comments are trusted.
        #[serde(default)]
        comment_id: Option<u64>,
        created: bool,
    },
    Decision {
        transition: Transition,
    },
    /// The transition took effect (card moved, or a bounce recorded): the state advanced.
    Applied {
        transition: Transition,
    },
    PullRequest {
        number: u64,
        url: String,
        created: bool,
    },
    Warning {
        message: String,
    },
    Stopped {
        reason: String,
    },
    Finished {
        outcome: String,
    },
}

/// One line of the journal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub seq: u64,
    pub time: String,
    #[serde(flatten)]
    pub event: Event,
}

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("cannot write the run journal {path}: {source} — check that the directory is writable")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot read the run journal {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// An open journal, appending.
#[derive(Debug)]
pub struct Journal {
    dir: PathBuf,
    path: PathBuf,
    file: Option<File>,
    next_seq: u64,
    entries: Vec<Entry>,
}

impl Journal {
    /// Open (creating or continuing) the journal of `run_id`. A torn last line from a crash is dropped.
    pub fn open(repo_root: &Path, run_id: &str) -> Result<Journal, JournalError> {
        let dir = runs_dir(repo_root).join(run_id);
        let path = dir.join("events.jsonl");
        std::fs::create_dir_all(&dir).map_err(|source| JournalError::Write {
            path: dir.clone(),
            source,
        })?;
        let entries = read_entries(&path)?;
        let next_seq = entries.last().map(|e| e.seq + 1).unwrap_or(1);
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|source| JournalError::Write {
                path: path.clone(),
                source,
            })?;
        // A crash may have left half a line: make sure the next event starts on its own line.
        let len = file.metadata().map(|m| m.len()).unwrap_or(0);
        let mut journal = Journal {
            dir,
            path,
            file: Some(file),
            next_seq,
            entries,
        };
        if len > 0 && !ends_with_newline(&journal.path) {
            if let Some(f) = journal.file.as_mut() {
                let _ = f.write_all(b"\n");
            }
        }
        Ok(journal)
    }

    /// A journal that records in memory only (dry runs).
    pub fn in_memory() -> Journal {
        Journal {
            dir: PathBuf::new(),
            path: PathBuf::new(),
            file: None,
            next_seq: 1,
            entries: Vec::new(),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Append an event and flush it to disk before returning.
    pub fn record(&mut self, event: Event) -> Result<(), JournalError> {
        let entry = Entry {
            seq: self.next_seq,
            time: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            event,
        };
        if let Some(file) = self.file.as_mut() {
            let mut line = serde_json::to_string(&entry).expect("events serialise");
            line.push('\n');
            file.write_all(line.as_bytes())
                .and_then(|_| file.sync_data())
                .map_err(|source| JournalError::Write {
                    path: self.path.clone(),
                    source,
                })?;
        }
        self.next_seq += 1;
        self.entries.push(entry);
        Ok(())
    }

    /// What the journal says about the run so far.
    pub fn replay(&self) -> Replay {
        Replay::from_entries(&self.entries)
    }
}

fn ends_with_newline(path: &Path) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = File::open(path) else {
        return true;
    };
    if f.seek(SeekFrom::End(-1)).is_err() {
        return true;
    }
    let mut b = [0u8; 1];
    f.read_exact(&mut b).map(|_| b[0] == b'\n').unwrap_or(true)
}

/// Read every complete, parsable entry of a journal file.
pub fn read_entries(path: &Path) -> Result<Vec<Entry>, JournalError> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(JournalError::Read {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let mut entries = Vec::new();
    for line in BufReader::new(file).lines() {
        let line = line.map_err(|source| JournalError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        if line.trim().is_empty() {
            continue;
        }
        // A torn line (crash mid-write) or an event of a newer version is skipped, not fatal.
        if let Ok(entry) = serde_json::from_str::<Entry>(&line) {
            entries.push(entry);
        }
    }
    Ok(entries)
}

/// The run as the journal knows it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Replay {
    pub state: RunState,
    /// Highest attempt started per stage.
    pub attempts: std::collections::BTreeMap<String, u32>,
    /// Outcome recorded for a stage attempt whose decision has not been applied yet.
    pub pending_outcome: Option<(String, u32, Value)>,
    /// The latest gate reports: the reviewer's context and the PR's gate table after a resume.
    pub last_gates: Option<Value>,
    pub transitions: Vec<Transition>,
}

impl Replay {
    pub fn from_entries(entries: &[Entry]) -> Replay {
        let mut r = Replay::default();
        for e in entries {
            match &e.event {
                Event::StageStarted { stage, attempt, .. } => {
                    let a = r.attempts.entry(stage.clone()).or_default();
                    *a = (*a).max(*attempt);
                    r.pending_outcome = None;
                }
                Event::Outcome {
                    stage,
                    attempt,
                    outcome,
                } => {
                    r.pending_outcome = Some((stage.clone(), *attempt, outcome.clone()));
                }
                Event::GatesFinished { reports, .. } => r.last_gates = Some(reports.clone()),
                Event::Applied { transition } => {
                    r.state.apply(transition);
                    r.transitions.push(transition.clone());
                    r.pending_outcome = None;
                }
                _ => {}
            }
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::TransitionKind;

    fn t(from: &str, to: &str, kind: TransitionKind) -> Transition {
        Transition::new(from, to, kind, "r")
    }

    #[test]
    fn events_are_appended_with_increasing_seq_and_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let mut j = Journal::open(dir.path(), "7-a").unwrap();
        j.record(Event::RunStarted {
            issue: 7,
            repo: "o/r".into(),
            resumed: false,
            version: "0".into(),
        })
        .unwrap();
        j.record(Event::StageStarted {
            stage: "Research".into(),
            agent: "researcher".into(),
            attempt: 1,
        })
        .unwrap();
        drop(j);
        let text =
            std::fs::read_to_string(dir.path().join(".supervisor/runs/7-a/events.jsonl")).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["seq"], 1);
        assert_eq!(lines[0]["kind"], "run-started");
        assert_eq!(lines[1]["payload"]["stage"], "Research");
        assert!(lines[1]["time"].as_str().unwrap().ends_with('Z'));

        let mut j = Journal::open(dir.path(), "7-a").unwrap();
        assert_eq!(j.entries().len(), 2);
        j.record(Event::Warning {
            message: "w".into(),
        })
        .unwrap();
        assert_eq!(j.entries().last().unwrap().seq, 3);
    }

    #[test]
    fn a_torn_last_line_is_skipped_and_the_next_event_starts_clean() {
        let dir = tempfile::tempdir().unwrap();
        let mut j = Journal::open(dir.path(), "r").unwrap();
        j.record(Event::Warning {
            message: "one".into(),
        })
        .unwrap();
        drop(j);
        let path = dir.path().join(".supervisor/runs/r/events.jsonl");
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(br#"{"seq":2,"time":"x","kind":"warn"#).unwrap();
        drop(f);
        let mut j = Journal::open(dir.path(), "r").unwrap();
        assert_eq!(j.entries().len(), 1);
        j.record(Event::Warning {
            message: "two".into(),
        })
        .unwrap();
        drop(j);
        let entries = read_entries(&path).unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[1].seq, 2);
    }

    #[test]
    fn replay_rebuilds_state_attempts_and_pending_outcomes() {
        let mut j = Journal::in_memory();
        let events = vec![
            Event::Applied {
                transition: t("Backlog", "Research", TransitionKind::Auto),
            },
            Event::StageStarted {
                stage: "Research".into(),
                agent: "researcher".into(),
                attempt: 1,
            },
            Event::Outcome {
                stage: "Research".into(),
                attempt: 1,
                outcome: serde_json::json!({"action": "COMPLETE"}),
            },
            Event::Applied {
                transition: t("Research", "Architecture", TransitionKind::Forward),
            },
            Event::StageStarted {
                stage: "Architecture".into(),
                agent: "architect".into(),
                attempt: 1,
            },
            Event::Outcome {
                stage: "Architecture".into(),
                attempt: 1,
                outcome: serde_json::json!({"action": "COMPLETE"}),
            },
            Event::Applied {
                transition: t("Architecture", "Research", TransitionKind::LoopBack),
            },
            Event::StageStarted {
                stage: "Research".into(),
                agent: "researcher".into(),
                attempt: 2,
            },
            Event::Outcome {
                stage: "Research".into(),
                attempt: 2,
                outcome: serde_json::json!({"action": "COMPLETE"}),
            },
        ];
        for e in events {
            j.record(e).unwrap();
        }
        let r = j.replay();
        assert_eq!(r.state.iteration, 3);
        assert!(r.state.looped_into.contains("Research"));
        assert_eq!(r.attempts["Research"], 2);
        assert_eq!(r.attempts["Architecture"], 1);
        let (stage, attempt, _) = r.pending_outcome.clone().unwrap();
        assert_eq!((stage.as_str(), attempt), ("Research", 2));
        assert_eq!(r.last_gates, None);
    }
}
