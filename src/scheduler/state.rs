//! What a watcher keeps across restarts, in `.supervisor/watch/state.json`: its id (the holder
//! of its claims), the board as last seen (so a restart or the next `--once` only starts cards
//! that arrived since), and the runs a drain stopped (started again on the next start).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::board::Columns;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WatchState {
    /// This watcher's id: the holder named in its claims.
    pub watcher: String,
    /// The board as last seen: issue → column. `None` before the first poll.
    #[serde(default)]
    pub board: Option<Columns>,
    /// Runs live when the watcher was last stopped by a signal: started again first.
    #[serde(default)]
    pub resume: BTreeSet<u64>,
    #[serde(default)]
    pub polled_at: Option<chrono::DateTime<chrono::Utc>>,
}

impl WatchState {
    pub fn path(root: &Path) -> PathBuf {
        root.join(".supervisor/watch/state.json")
    }

    /// The saved state, or a new one with a new watcher id. A file that cannot be read is
    /// reported and replaced: the board is then seen afresh.
    pub fn load(root: &Path) -> WatchState {
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
    pub fn save(&self, root: &Path) -> std::io::Result<()> {
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
        state.save(dir.path()).unwrap();
        assert_eq!(WatchState::load(dir.path()), state);
        std::fs::write(WatchState::path(dir.path()), "{ not json").unwrap();
        let again = WatchState::load(dir.path());
        assert_eq!(again.board, None);
        assert_ne!(again.watcher, "");
    }
}
