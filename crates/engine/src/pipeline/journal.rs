//! The run journal: `.supervisor/runs/<run-id>/events.jsonl`, one JSON object per line.
//!
//! GitHub is the source of truth; the journal is our memory. Every step appends an event (seq, time,
//! kind, payload) and flushes it before the next step starts, so a run killed at any point can be
//! resumed: finished stages are not re-run and writes already made are recognised.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::decide::Transition;
use super::effects::Text;
use super::failure::ErrorClass;
use super::user_text::UserText;
use crate::agent::{ExitReason, Outcome, Usage};
use crate::gates::GateReport;
use crate::github::Marker;
use crate::ids::CommitSha;
use crate::workspace::{MergeOutcome, Reuse};

/// The journal format this build writes. Every line carries it as `v`; lines of
/// [`OLDEST_READ`] and later are read (an older line is converted as it is read, see [`upgrade`]),
/// so a run started by an earlier version resumes.
///
/// Format 3: a gate that did not run is `{"status": "not-run", "cause": …, "reason": …}` with its
/// cause always there (format 2 left it out for a set-up cause), and an outcome kept short of a
/// budget says so in `partial` (format 2: a note `partial findings: …`).
pub const FORMAT: u32 = 3;

/// The oldest journal format this build reads.
pub(crate) const OLDEST_READ: u32 = 2;

/// Where runs of a repository are kept.
pub fn runs_dir(repo_root: &Path) -> PathBuf {
    repo_root.join(crate::workspace::CHECKPOINT_DIR)
}

/// The statistics of one agent dispatch (its run minus its text).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentStats {
    pub(crate) agent: String,
    pub(crate) backend: String,
    pub(crate) duration_ms: u64,
    pub(crate) usage: Usage,
    pub(crate) tool_calls: u64,
    pub(crate) model: Option<String>,
    pub exit: ExitReason,
}

/// Why a stage attempt produced no outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Halt {
    /// A signal or the scheduler stopped the run.
    Interrupted,
    /// The run stops here; a human is needed.
    Stop {
        /// Said on GitHub: supervisor's own wording.
        reason: UserText,
        /// The class of the failure that stopped the run, when an effect failed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cause: Option<ErrorClass>,
        /// The rejection that went over `maxRejections` and stopped the run: counted, never
        /// applied (the card stays where it is).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rejection: Option<Box<Transition>>,
    },
    /// The answer broke the output protocol (no outcome, an unknown audit dimension, a bad field):
    /// the agent is asked once to answer again.
    Unusable { problem: String },
    /// The agent wrote nothing for too long and was stopped: the run pauses, and running again
    /// starts the stage afresh.
    Stalled { reason: String },
}

impl Halt {
    /// A stop for `reason`.
    pub(crate) fn stop(reason: UserText) -> Halt {
        Halt::Stop {
            reason,
            cause: None,
            rejection: None,
        }
    }
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
    #[serde(rename_all = "camelCase")]
    WorktreeReady {
        path: String,
        branch: String,
        base: String,
        reused: Reuse,
        warnings: Vec<String>,
    },
    StageStarted {
        stage: String,
        agent: String,
        attempt: u32,
        /// Why the previous answer could not be used, when this attempt asks the agent to fix it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fix: Option<String>,
    },
    AgentFinished {
        stage: String,
        attempt: u32,
        stats: AgentStats,
    },
    /// The parsed outcome of a stage attempt.
    Outcome {
        stage: String,
        attempt: u32,
        outcome: Box<Outcome>,
    },
    /// The attempt ended without an outcome.
    Halted {
        stage: String,
        attempt: u32,
        halt: Halt,
    },
    /// The agent's work was committed (`sha` is `None` when there was nothing new); `ahead` counts
    /// the branch's commits beyond its base.
    Committed {
        stage: String,
        attempt: u32,
        sha: Option<CommitSha>,
        ahead: u32,
        /// Changes outside the stage's `writes`, undone before the commit.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        outside: Vec<String>,
    },
    Pushed {
        sha: CommitSha,
    },
    /// One gate of the round under way finished (in the order they finish); the round's
    /// `gates-finished` follows once all have.
    GateFinished {
        stage: String,
        attempt: u32,
        report: GateReport,
    },
    GatesFinished {
        stage: String,
        attempt: u32,
        reports: Vec<GateReport>,
    },
    /// A comment GitHub confirmed (posted now, or found from an earlier attempt).
    #[serde(rename_all = "camelCase")]
    Posted {
        marker: Marker,
        comment_id: u64,
        url: String,
        created: bool,
    },
    /// A comment GitHub did not confirm: kept in the outbox and posted again before anything else
    /// when the run resumes.
    WriteFailed {
        marker: Marker,
        text: Text,
        error: String,
    },
    /// The last commit was undone after the dead-code gate failed.
    CommitUndone {
        stage: String,
        attempt: u32,
    },
    /// A transition decided; its card move may not have happened yet.
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
    /// What GitHub said about merging the pull request (`None`: it did not know in time).
    Mergeability {
        mergeable: Option<bool>,
    },
    /// The base branch was merged in (`None`: the merge failed, see the warning before it).
    BaseMerged {
        outcome: Option<MergeOutcome>,
    },
    /// The issue was closed as already resolved.
    IssueClosed,
    Warning {
        message: String,
    },
    Stopped {
        reason: String,
    },
    /// The run stopped short of its end; running again resumes it from here.
    Paused {
        reason: String,
    },
    Finished {
        outcome: String,
    },
    /// This run revises pull request `pr` after review feedback (its `round`th revision).
    Revising {
        pr: u64,
        round: u32,
    },
    /// The card was put in the revision's column.
    CardPlaced {
        column: String,
    },
    /// A review thread was answered (and resolved, when `resolved`).
    ThreadAnswered {
        thread: String,
        resolved: bool,
    },
    /// The pull request's body now shows the revision's audit.
    PullBodyUpdated,
}

/// One line of the journal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// The format version ([`FORMAT`]).
    pub(crate) v: u32,
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
    #[error(
        "the run journal {path} is in format {found}, which this supervisor does not read (it reads formats {OLDEST_READ} to {FORMAT}); \
         finish that run with the supervisor version that started it, or remove {dir} to start the issue afresh"
    )]
    Version {
        path: PathBuf,
        dir: PathBuf,
        found: u32,
    },
    #[error(
        "line {line} of the run journal {path} is damaged ({problem}); remove {dir} to start the issue afresh"
    )]
    Damaged {
        path: PathBuf,
        dir: PathBuf,
        line: usize,
        problem: String,
    },
}

/// A stream that receives a copy of every line the journal records (`run --progress jsonl`).
pub(crate) struct Mirror(pub Box<dyn Write + Send>);

impl std::fmt::Debug for Mirror {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Mirror")
    }
}

/// What hears of every entry once it is recorded (the live picture of a scheduler's runs).
pub(crate) struct Observer(pub Box<dyn FnMut(&Entry) + Send>);

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Observer")
    }
}

/// An open journal, appending.
#[derive(Debug)]
pub struct Journal {
    dir: PathBuf,
    path: PathBuf,
    file: Option<File>,
    next_seq: u64,
    entries: Vec<Entry>,
    mirror: Option<Mirror>,
    observer: Option<Observer>,
}

impl Journal {
    /// Open (creating or continuing) the journal of `run_id`. A torn last line from a crash is dropped.
    pub fn open(repo_root: &Path, run_id: &str) -> Result<Journal, JournalError> {
        let dir = runs_dir(repo_root).join(run_id);
        let path = dir.join("events.jsonl");
        crate::workspace::runs_dir(repo_root).map_err(|e| JournalError::Write {
            path: dir.clone(),
            source: std::io::Error::other(e.to_string()),
        })?;
        std::fs::create_dir_all(&dir).map_err(|source| JournalError::Write {
            path: dir.clone(),
            source,
        })?;
        let (entries, good) = read_journal(&path)?;
        let next_seq = entries.last().map(|e| e.seq + 1).unwrap_or(1);
        let write_err = |source| JournalError::Write {
            path: path.clone(),
            source,
        };
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(write_err)?;
        // A crash may have left half a line: cut it, so the next event starts on its own line.
        if file.metadata().map_err(write_err)?.len() > good {
            file.set_len(good).map_err(write_err)?;
        }
        Ok(Journal {
            dir,
            path,
            file: Some(file),
            next_seq,
            entries,
            mirror: None,
            observer: None,
        })
    }

    /// A journal that records in memory only (dry runs).
    pub fn in_memory() -> Journal {
        Journal {
            dir: PathBuf::new(),
            path: PathBuf::new(),
            file: None,
            next_seq: 1,
            entries: Vec::new(),
            mirror: None,
            observer: None,
        }
    }

    /// Copy every event recorded from now on to `mirror` as well, one JSON line each, flushed. A
    /// mirror that fails (a closed pipe) is dropped; the journal goes on.
    pub(crate) fn mirror_to(&mut self, mirror: Box<dyn Write + Send>) {
        self.mirror = Some(Mirror(mirror));
    }

    /// Tell `observer` of every entry recorded from now on, once it is on disk.
    pub(crate) fn observe(&mut self, observer: Box<dyn FnMut(&Entry) + Send>) {
        self.observer = Some(Observer(observer));
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Append an event and flush it to disk before returning.
    pub(crate) fn record(&mut self, event: Event) -> Result<(), JournalError> {
        self.record_all(vec![event])
    }

    /// Append a step's events, then flush them to disk together before returning (one sync for
    /// the step: what it decided is on disk before anything acts on it). A crash mid-write leaves
    /// whole lines and at most one torn last line, which reading drops.
    pub(crate) fn record_all(&mut self, events: Vec<Event>) -> Result<(), JournalError> {
        if events.is_empty() {
            return Ok(());
        }
        let time = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let mut lines = String::new();
        let first = self.entries.len();
        for event in events {
            let entry = Entry {
                v: FORMAT,
                seq: self.next_seq,
                time: time.clone(),
                event,
            };
            lines.push_str(&serde_json::to_string(&entry).expect("events serialise"));
            lines.push('\n');
            self.next_seq += 1;
            self.entries.push(entry);
        }
        if let Some(Mirror(w)) = self.mirror.as_mut() {
            if w.write_all(lines.as_bytes())
                .and_then(|_| w.flush())
                .is_err()
            {
                self.mirror = None;
            }
        }
        if let Some(file) = self.file.as_mut() {
            if let Err(source) = off_the_runtime(|| {
                file.write_all(lines.as_bytes())
                    .and_then(|_| file.sync_data())
            }) {
                // Not on disk: not recorded.
                self.next_seq -= (self.entries.len() - first) as u64;
                self.entries.truncate(first);
                return Err(JournalError::Write {
                    path: self.path.clone(),
                    source,
                });
            }
        }
        if let Some(Observer(observe)) = self.observer.as_mut() {
            for entry in &self.entries[first..] {
                observe(entry);
            }
        }
        Ok(())
    }
}

/// Run `f`, which waits on the disk (a sync), without holding up the async runtime: on a
/// multi-threaded runtime its worker hands its other tasks on first (runs beside this one keep
/// going meanwhile); elsewhere it runs as it is.
pub(crate) fn off_the_runtime<T>(f: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// Read a journal file. A torn last line (a crash mid-write) is dropped; any other line that does
/// not parse, or a line of another format, is an error naming the journal.
pub fn read_entries(path: &Path) -> Result<Vec<Entry>, JournalError> {
    read_journal(path).map(|(entries, _)| entries)
}

/// The entries of a journal file, and the length of its complete lines.
fn read_journal(path: &Path) -> Result<(Vec<Entry>, u64), JournalError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), 0)),
        Err(source) => {
            return Err(JournalError::Read {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let dir = path.parent().unwrap_or(path).to_path_buf();
    let damaged = |line: usize, problem: String| JournalError::Damaged {
        path: path.to_path_buf(),
        dir: dir.clone(),
        line,
        problem,
    };
    let mut entries = Vec::new();
    let mut good = 0u64;
    let mut offset = 0usize;
    for (i, raw) in bytes.split_inclusive(|b| *b == b'\n').enumerate() {
        offset += raw.len();
        let complete = raw.ends_with(b"\n");
        let line = String::from_utf8_lossy(raw);
        if line.trim().is_empty() {
            good = offset as u64;
            continue;
        }
        let value: serde_json::Value = match (serde_json::from_str(&line), complete) {
            (Ok(v), true) => v,
            // The last line, cut short by a crash (only the last piece can lack its newline).
            (_, false) => break,
            (Err(_), true) if offset == bytes.len() => break,
            (Err(e), true) => return Err(damaged(i + 1, e.to_string())),
        };
        let found = value.get("v").and_then(|v| v.as_u64()).unwrap_or(1) as u32;
        if !(OLDEST_READ..=FORMAT).contains(&found) {
            return Err(JournalError::Version {
                path: path.to_path_buf(),
                dir,
                found,
            });
        }
        let value = upgrade(value, found);
        let entry =
            serde_json::from_value::<Entry>(value).map_err(|e| damaged(i + 1, e.to_string()))?;
        entries.push(entry);
        good = offset as u64;
    }
    Ok((entries, good))
}

/// A line of format `found` as format [`FORMAT`] writes it.
fn upgrade(mut line: serde_json::Value, found: u32) -> serde_json::Value {
    if found < 3 {
        if let Some(payload) = line.get_mut("payload") {
            not_run_causes(payload);
        }
        partial_note(&mut line);
        line["v"] = FORMAT.into();
    }
    line
}

/// Format 2 → 3: every gate report that did not run gets its cause; format 2 left a set-up cause
/// out.
fn not_run_causes(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            if map.get("status").and_then(|s| s.as_str()) == Some("not-run")
                && map.contains_key("reason")
                && !map.contains_key("cause")
            {
                map.insert("cause".into(), "setup".into());
            }
            map.values_mut().for_each(not_run_causes);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(not_run_causes),
        _ => {}
    }
}

/// How format 2 marked an outcome kept short of a budget: a note.
const PARTIAL_NOTE: &str = "partial findings: ";

/// Format 2 → 3: an outcome's `partial findings: …` note becomes its `partial`.
fn partial_note(line: &mut serde_json::Value) {
    if line.get("kind").and_then(|k| k.as_str()) != Some("outcome") {
        return;
    }
    let Some(outcome) = line.pointer_mut("/payload/outcome") else {
        return;
    };
    let Some(notes) = outcome.get_mut("notes").and_then(|n| n.as_array_mut()) else {
        return;
    };
    let Some(i) = notes
        .iter()
        .position(|n| n.as_str().is_some_and(|n| n.starts_with(PARTIAL_NOTE)))
    else {
        return;
    };
    let note = notes.remove(i);
    let why = note.as_str().unwrap_or_default()[PARTIAL_NOTE.len()..].to_string();
    outcome["partial"] = why.into();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gates::GateStatus;
    use crate::pipeline::TransitionKind;

    /// While a step's events are synced, the runtime's other tasks (runs beside this one) go on,
    /// even on a runtime of one worker.
    #[test]
    fn the_runtimes_other_tasks_go_on_while_a_journal_syncs() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let waited = rt.block_on(async {
            tokio::spawn(async {
                let (tx, rx) = std::sync::mpsc::channel();
                let other = tokio::spawn(async move { tx.send(()).unwrap() });
                // A sync that ends only once the other task has run.
                let waited = off_the_runtime(|| rx.recv_timeout(std::time::Duration::from_secs(5)));
                other.await.unwrap();
                waited
            })
            .await
            .unwrap()
        });
        assert!(waited.is_ok(), "the other task waited for the sync");
        // Without a runtime, or on one thread, it simply runs.
        assert_eq!(off_the_runtime(|| 7), 7);
        let one = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        assert_eq!(one.block_on(async { off_the_runtime(|| 8) }), 8);
    }

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
            fix: None,
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
    fn a_steps_events_are_recorded_together_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut j = Journal::open(dir.path(), "s").unwrap();
        j.record(Event::IssueClosed).unwrap();
        j.record_all(vec![
            Event::Warning {
                message: "one".into(),
            },
            Event::Warning {
                message: "two".into(),
            },
        ])
        .unwrap();
        j.record_all(Vec::new()).unwrap();
        let read = read_entries(j.path()).unwrap();
        assert_eq!(
            read.iter().map(|e| e.seq).collect::<Vec<_>>(),
            vec![1, 2, 3]
        );
        assert_eq!(read, j.entries());
        assert_eq!(read[1].time, read[2].time);
    }

    #[test]
    fn a_mirror_gets_each_recorded_line_as_the_file_does() {
        #[derive(Clone, Default)]
        struct Shared(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
        impl Write for Shared {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let mut j = Journal::open(dir.path(), "m").unwrap();
        let seen = Shared::default();
        j.mirror_to(Box::new(seen.clone()));
        for message in ["one", "two"] {
            j.record(Event::Warning {
                message: message.into(),
            })
            .unwrap();
        }
        let file = std::fs::read_to_string(j.path()).unwrap();
        let mirrored = String::from_utf8(seen.0.lock().unwrap().clone()).unwrap();
        assert_eq!(mirrored, file);
        assert_eq!(mirrored.lines().count(), 2);
        // A dry run's journal has no file; its mirror still streams.
        let mut j = Journal::in_memory();
        let seen = Shared::default();
        j.mirror_to(Box::new(seen.clone()));
        j.record(Event::IssueClosed).unwrap();
        assert!(
            String::from_utf8(seen.0.lock().unwrap().clone())
                .unwrap()
                .contains("issue-closed")
        );
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
    fn a_journal_of_another_format_is_a_clear_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".supervisor/runs/r/events.jsonl");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        // Format 1 had no `v` and untyped payloads.
        std::fs::write(
            &path,
            "{\"seq\":1,\"time\":\"t\",\"kind\":\"outcome\",\"payload\":{\"stage\":\"Research\",\"attempt\":1,\"outcome\":{}}}\n",
        )
        .unwrap();
        let err = Journal::open(dir.path(), "r").unwrap_err().to_string();
        assert!(err.contains("format 1"), "{err}");
        assert!(err.contains("formats 2 to 3"), "{err}");
        assert!(err.contains(&path.display().to_string()), "{err}");
        assert!(err.contains("remove"), "{err}");
    }

    #[test]
    fn a_format_2_journal_is_read_with_its_not_run_gates_and_partial_outcomes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".supervisor/runs/r/events.jsonl");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        // As format 2 wrote them: a set-up cause left out, another cause written beside the reason,
        // and a partial outcome said by a note.
        let gate = |seq: u32, name: &str, cause: &str| {
            format!(
                "{{\"v\":2,\"seq\":{seq},\"time\":\"t\",\"kind\":\"gate-finished\",\"payload\":{{\"stage\":\"Implementation\",\"attempt\":1,\"report\":{{\"kind\":\"tsc\",\"name\":\"{name}\",\"status\":\"not-run\",\"reason\":\"tsc not found\"{cause},\"findings\":[],\"durationMs\":5,\"required\":true,\"summary\":\"tsc not found\"}}}}}}\n"
            )
        };
        let wf = crate::config::Workflow::parse(
            Path::new("workflow.json"),
            crate::config::WORKFLOW_WITHOUT_ORACLE,
            &std::collections::BTreeMap::new(),
        )
        .unwrap();
        let mut outcome = crate::agent::parse_outcome(
            r#"{"action": "COMPLETE", "commentBody": "Research findings"}"#,
            wf.stage("Research").unwrap(),
        )
        .unwrap();
        outcome.notes = vec![
            "ignored unknown key `x`".into(),
            "partial findings: researcher stopped when it hit the token budget".into(),
        ];
        let mut outcome_line = serde_json::to_value(Entry {
            v: 2,
            seq: 3,
            time: "t".into(),
            event: Event::Outcome {
                stage: "Research".into(),
                attempt: 1,
                outcome: Box::new(outcome),
            },
        })
        .unwrap();
        outcome_line["payload"]["outcome"]
            .as_object_mut()
            .unwrap()
            .remove("partial");
        let text = format!(
            "{}{}{outcome_line}\n",
            gate(1, "tsc", ""),
            gate(2, "ci", ",\"cause\":\"transient\"")
        );
        std::fs::write(&path, text).unwrap();

        let entries = read_entries(&path).unwrap();
        assert_eq!(entries.len(), 3);
        let causes: Vec<_> = entries[..2]
            .iter()
            .map(|e| match &e.event {
                Event::GateFinished { report, .. } => {
                    (report.status.clone(), report.not_run_cause())
                }
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            causes,
            [
                (
                    GateStatus::not_run("tsc not found"),
                    Some(crate::gates::NotRunCause::Setup)
                ),
                (
                    GateStatus::not_run_because(
                        crate::gates::NotRunCause::Transient,
                        "tsc not found"
                    ),
                    Some(crate::gates::NotRunCause::Transient)
                ),
            ]
        );
        let Event::Outcome { outcome, .. } = &entries[2].event else {
            panic!("{:?}", entries[2]);
        };
        assert_eq!(
            outcome.partial.as_deref(),
            Some("researcher stopped when it hit the token budget")
        );
        assert_eq!(outcome.notes, ["ignored unknown key `x`"]);
        assert!(
            entries.iter().all(|e| e.v == FORMAT),
            "read as format {FORMAT}"
        );

        // A resumed run appends format 3 lines to it: both are read.
        let mut j = Journal::open(dir.path(), "r").unwrap();
        j.record(Event::Warning {
            message: "resumed".into(),
        })
        .unwrap();
        drop(j);
        assert_eq!(read_entries(&path).unwrap().len(), 4);
    }

    #[test]
    fn a_changed_payload_is_an_error_not_a_silently_lost_field() {
        let dir = tempfile::tempdir().unwrap();
        let mut j = Journal::open(dir.path(), "r").unwrap();
        j.record(Event::Applied {
            transition: t("Backlog", "Research", TransitionKind::Auto),
        })
        .unwrap();
        j.record(Event::Warning {
            message: "kept".into(),
        })
        .unwrap();
        drop(j);
        let path = dir.path().join(".supervisor/runs/r/events.jsonl");
        let text = std::fs::read_to_string(&path).unwrap();
        // The first line's transition loses a field it needs.
        let broken = text.replacen("\"kind\":\"auto\",", "", 1);
        assert_ne!(broken, text);
        std::fs::write(&path, broken).unwrap();
        let err = read_entries(&path).unwrap_err().to_string();
        assert!(err.contains("line 1"), "{err}");
        assert!(err.contains("damaged"), "{err}");
    }
}
