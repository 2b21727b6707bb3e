//! What a watcher keeps across restarts, in `.supervisor/watch/state.json`: its id (the holder
//! of its claims), the board as last seen (so a restart or the next `--once` only starts cards
//! that arrived since), the runs it owes (queued, or started and not yet ended) and the runs a
//! drain stopped (started again on the next start).
//!
//! The board as seen and the runs owed are written together, in one file replaced at once: no
//! crash leaves a card seen but not owed.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use chrono::{DateTime, SubsecRound, Utc};
use serde::{Deserialize, Serialize};

use super::board::Columns;
use crate::pipeline::RunRecord;
use crate::runtime::revised_pull;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WatchState {
    /// This watcher's id: the holder named in its claims.
    pub(crate) watcher: String,
    /// The board as last seen: issue → column. `None` before the first poll.
    #[serde(default)]
    pub(crate) board: Option<Columns>,
    /// Runs live when the watcher was last stopped by a signal: started again first.
    #[serde(default)]
    pub(crate) resume: BTreeSet<u64>,
    /// The runs this watcher owes, in the order they were asked for: each from the moment it is
    /// queued until its run ends for good (or it is refused, left to another watcher, or its card
    /// moves away before it starts).
    #[serde(default)]
    pub(crate) owed: Vec<Owed>,
    #[serde(default)]
    pub(crate) polled_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// A run a watcher owes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Owed {
    /// The issue, or for a revision its pull request.
    pub(crate) number: u64,
    #[serde(default)]
    pub revision: bool,
    /// An epic's planning, not a run.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) epic: bool,
    /// Why it was queued.
    pub(crate) reason: String,
    /// The column whose arrival asked for it: after a restart it is owed only while its card is
    /// still there. `None`: asked for by name (a command, a label, a review, a resume), owed
    /// wherever the card is.
    #[serde(default)]
    pub(crate) column: Option<String>,
    /// When it was asked for, to the millisecond (as the run journals keep time).
    pub(crate) queued_at: DateTime<Utc>,
}

impl Owed {
    pub fn new(
        number: u64,
        revision: bool,
        reason: &str,
        column: Option<String>,
        at: DateTime<Utc>,
    ) -> Owed {
        Owed {
            number,
            revision,
            epic: false,
            reason: reason.to_string(),
            column,
            // Rounded down: a run that ended in the same millisecond ended before it.
            queued_at: at.trunc_subsecs(3),
        }
    }

    /// Whether `run_id` is a run of this issue (or revision of this pull request).
    pub fn names(&self, run_id: &str) -> bool {
        if self.epic {
            // Planning keeps a journal of its own, not a run's: planned again, it goes on.
            return false;
        }
        match revised_pull(run_id) {
            Some(pr) => self.revision && pr == self.number,
            None => !self.revision && run_id.split('-').next() == Some(&self.number.to_string()),
        }
    }

    /// Whether one of `runs` ended after this was asked for: the debt was paid, and only the
    /// watcher's own record of it was lost (a crash between the run's end and the next save).
    pub(crate) fn paid_by(&self, runs: &[RunRecord]) -> bool {
        runs.iter()
            .any(|r| self.names(&r.run_id) && r.ended.is_some_and(|t| t > self.queued_at))
    }
}

impl WatchState {
    pub(crate) fn path(root: &Path) -> PathBuf {
        root.join(".supervisor/watch/state.json")
    }

    /// The saved state, or a new one with a new watcher id. A file that cannot be read is
    /// reported and replaced: the board is then seen afresh.
    pub(crate) fn load(root: &Path) -> WatchState {
        let path = Self::path(root);
        match std::fs::read(&path) {
            Ok(bytes) => match serde_json::from_slice::<WatchState>(&bytes) {
                Ok(state) if !state.watcher.is_empty() => return state,
                Ok(_) => tracing::warn!("{}: no watcher id; starting afresh", path.display()),
                Err(e) => tracing::warn!(
                    "{} cannot be read ({e}); the board is seen afresh",
                    path.display()
                ),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!("cannot read {}: {e}", path.display()),
        }
        WatchState {
            watcher: new_watcher_id(),
            ..WatchState::default()
        }
    }

    /// Write the state (a temporary file renamed over the old one).
    pub(crate) fn save(&self, root: &Path) -> std::io::Result<()> {
        let path = Self::path(root);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let tmp = path.with_extension(format!("json.{}.tmp", std::process::id()));
        let text = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, &path)
    }
}

/// `<host>-<random>`: readable in a claim comment, unique per checkout.
fn new_watcher_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| {
            h.trim()
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
                .take(30)
                .collect::<String>()
        })
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".to_string());
    format!("{host}-{:08x}", fastrand::u32(..))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_round_trips_and_a_damaged_file_starts_afresh() {
        let dir = tempfile::tempdir().unwrap();
        let fresh = WatchState::load(dir.path());
        assert!(!fresh.watcher.is_empty());
        assert_eq!(fresh.board, None);
        let mut state = fresh.clone();
        state.board = Some([(3, Some("Research".to_string()))].into());
        state.resume.insert(3);
        state.owed.push(Owed::new(
            4,
            false,
            "the card arrived in Research",
            Some("Research".into()),
            Utc::now(),
        ));
        state.owed.push(Owed::new(
            9,
            true,
            "revise pull request #9",
            None,
            Utc::now(),
        ));
        state.save(dir.path()).unwrap();
        assert_eq!(WatchState::load(dir.path()), state);
        std::fs::write(WatchState::path(dir.path()), "{ not json").unwrap();
        let again = WatchState::load(dir.path());
        assert_eq!(again.board, None);
        assert_ne!(again.watcher, "");
    }

    fn run(run_id: &str, ended: Option<DateTime<Utc>>) -> RunRecord {
        let mut r = RunRecord::fold(run_id, PathBuf::new(), &[], false);
        r.ended = ended;
        r
    }

    #[test]
    fn a_run_is_known_as_its_issues_or_its_pull_requests() {
        let issue = Owed::new(12, false, "asked", None, Utc::now());
        assert!(issue.names("12-20250101T000000.000Z"));
        assert!(!issue.names("1-20250101T000000.000Z"));
        assert!(!issue.names("123-20250101T000000.000Z"));
        // A revision of one of issue 12's pull requests is not a run of the issue.
        assert!(!issue.names("12-rev40-20250101T000000.000Z"));
        let revision = Owed::new(40, true, "asked", None, Utc::now());
        assert!(revision.names("12-rev40-20250101T000000.000Z"));
        assert!(!revision.names("40-20250101T000000.000Z"));
        assert!(!revision.names("12-rev4-20250101T000000.000Z"));
    }

    #[test]
    fn only_a_run_that_ended_after_the_ask_pays_it() {
        let asked = Utc::now().trunc_subsecs(3);
        let owed = Owed {
            queued_at: asked,
            ..Owed::new(
                12,
                false,
                "the card arrived in Research",
                Some("Research".into()),
                asked,
            )
        };
        let ms = chrono::Duration::milliseconds;
        let cases: [(RunRecord, bool); 7] = [
            // Started and never ended (the process died): still owed.
            (run("12-a", None), false),
            // Ended before the ask (an earlier run), or in the same millisecond.
            (run("12-b", Some(asked - ms(1000))), false),
            (run("12-c", Some(asked)), false),
            // Another issue's run, or a revision's.
            (run("1-d", Some(asked + ms(5))), false),
            (run("12-rev40-e", Some(asked + ms(5))), false),
            // Ended after it was asked for: paid, whatever the end.
            (run("12-f", Some(asked + ms(1))), true),
            (run("12-g", Some(asked + ms(60_000))), true),
        ];
        for (r, paid) in &cases {
            assert_eq!(owed.paid_by(std::slice::from_ref(r)), *paid, "{}", r.run_id);
        }
        let all: Vec<RunRecord> = cases.iter().map(|(r, _)| r.clone()).collect();
        assert!(owed.paid_by(&all));
        assert!(!owed.paid_by(&all[..5]));
        let revision = Owed {
            queued_at: asked,
            ..Owed::new(40, true, "revise", None, asked)
        };
        assert!(revision.paid_by(&all[4..5]));
    }
}
