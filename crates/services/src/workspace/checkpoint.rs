//! Crash checkpoints: a small file per issue recording the live run, so that a restart can tell a
//! run to resume from a stale leftover to clean away.

use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::worktree::cleanup;
use super::{Reuse, WorkspaceConfig, WorkspaceError, Worktree, io_err};

/// Where checkpoints live, relative to the repository root.
pub const CHECKPOINT_DIR: &str = ".supervisor/runs";
/// Create the runs directory under `repo_root` (when missing) with a `.gitignore` that keeps
/// journals, transcripts and checkpoints out of `git status`, whatever the repository ignores.
pub fn runs_dir(repo_root: &Path) -> Result<PathBuf, WorkspaceError> {
    let dir = repo_root.join(CHECKPOINT_DIR);
    std::fs::create_dir_all(&dir).map_err(io_err("cannot create", &dir))?;
    let ignore = dir.join(".gitignore");
    if !ignore.exists() {
        std::fs::write(&ignore, "# supervisor's run journals and checkpoints\n*\n")
            .map_err(io_err("cannot write", &ignore))?;
    }
    Ok(dir)
}

/// The child process groups of the live run of one issue, so that a resume after a crash kills what is
/// left of them: `checkpoint-<issue>.groups` beside the checkpoint, one line per change, `<unix ms>
/// <pgid> <pgid>…` — the whole set each time, so the last whole line is the set. A change appends to
/// the file the run keeps open, where a checkpoint save writes a new file and renames it: runs start
/// and end a process group for every agent and git command.
pub struct GroupLog {
    file: std::fs::File,
}

impl GroupLog {
    /// `<repo_root>/.supervisor/runs/checkpoint-<issue>.groups`.
    pub(crate) fn path(repo_root: &Path, issue: u64) -> PathBuf {
        repo_root
            .join(CHECKPOINT_DIR)
            .join(format!("checkpoint-{issue}.groups"))
    }

    /// Start the log of this process's run of `issue`, in place of an earlier run's.
    pub fn create(repo_root: &Path, issue: u64) -> Result<GroupLog, WorkspaceError> {
        let path = GroupLog::path(repo_root, issue);
        runs_dir(repo_root)?;
        let file = std::fs::File::create(&path).map_err(io_err("cannot write", &path))?;
        Ok(GroupLog { file })
    }

    /// Record that `groups` are the live ones now (one write, so a crash leaves whole lines or a
    /// torn last one, which [`read`](GroupLog::read) skips).
    pub fn record(&mut self, groups: &[i32]) -> std::io::Result<()> {
        use std::fmt::Write as _;
        use std::io::Write as _;
        let mut line = Utc::now().timestamp_millis().to_string();
        for g in groups {
            let _ = write!(line, " {g}");
        }
        line.push('\n');
        self.file.write_all(line.as_bytes())
    }

    /// The groups the last whole line of `issue`'s log holds and when it was written; none when
    /// there is no log.
    pub fn read(repo_root: &Path, issue: u64) -> (Vec<i32>, Option<DateTime<Utc>>) {
        let Ok(text) = std::fs::read_to_string(GroupLog::path(repo_root, issue)) else {
            return (Vec::new(), None);
        };
        let whole = text.rsplit_once('\n').map_or("", |(whole, _)| whole);
        whole
            .lines()
            .rev()
            .find_map(|line| {
                let mut fields = line.split(' ');
                let at = DateTime::from_timestamp_millis(fields.next()?.parse().ok()?)?;
                let groups: Option<Vec<i32>> = fields.map(|g| g.parse().ok()).collect();
                Some((groups?, Some(at)))
            })
            .unwrap_or((Vec::new(), None))
    }
}

/// A checkpoint not touched for this long belongs to a dead run.
pub const STALE_AFTER: Duration = Duration::from_secs(60 * 60);

/// The live run of one issue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Checkpoint {
    pub run_id: String,
    pub issue: u64,
    pub pid: u32,
    pub worktree: PathBuf,
    pub(crate) branch: String,
    pub(crate) started_at: DateTime<Utc>,
    /// Refreshed while the run lives (a heartbeat while agents run).
    pub updated_at: DateTime<Utc>,
    /// Child process groups, as checkpoints written before the [`GroupLog`] recorded them: read so
    /// that a resume after such a run still kills what it left; no longer written.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) groups: Vec<i32>,
    /// The worktree's files as the last agent (or supervisor's last merge) left them, as a git
    /// tree: a resume puts the worktree back to it, undoing what arrived after (an agent cut short
    /// by the crash, or a process it left that went on writing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settled: Option<String>,
}

impl Checkpoint {
    /// A checkpoint for this process's run of `issue` in `wt`.
    pub fn new(run_id: impl Into<String>, issue: u64, wt: &Worktree) -> Checkpoint {
        let now = Utc::now();
        Checkpoint {
            run_id: run_id.into(),
            issue,
            pid: std::process::id(),
            worktree: wt.path.clone(),
            branch: wt.branch.clone(),
            started_at: now,
            updated_at: now,
            groups: Vec::new(),
            settled: None,
        }
    }

    /// `<repo_root>/.supervisor/runs/checkpoint-<issue>.json`.
    pub(crate) fn path(repo_root: &Path, issue: u64) -> PathBuf {
        repo_root
            .join(CHECKPOINT_DIR)
            .join(format!("checkpoint-{issue}.json"))
    }

    /// Every checkpoint under `repo_root`, by issue; unreadable ones are skipped with a warning.
    pub fn all(repo_root: &Path) -> Vec<Checkpoint> {
        let dir = repo_root.join(CHECKPOINT_DIR);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return Vec::new();
        };
        let mut issues: Vec<u64> = entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                name.strip_prefix("checkpoint-")?
                    .strip_suffix(".json")?
                    .parse()
                    .ok()
            })
            .collect();
        issues.sort_unstable();
        issues
            .into_iter()
            .filter_map(|issue| match Checkpoint::load(repo_root, issue) {
                Ok(cp) => cp,
                Err(e) => {
                    tracing::warn!("{e}");
                    None
                }
            })
            .collect()
    }

    /// Write the checkpoint (atomically: a temporary file renamed over the old one).
    pub fn save(&self, repo_root: &Path) -> Result<(), WorkspaceError> {
        let path = Checkpoint::path(repo_root, self.issue);
        runs_dir(repo_root)?;
        let tmp = path.with_extension(format!("json.{}.tmp", std::process::id()));
        let text = serde_json::to_string_pretty(self).unwrap_or_default();
        std::fs::write(&tmp, text).map_err(io_err("cannot write", &tmp))?;
        std::fs::rename(&tmp, &path).map_err(io_err("cannot write", &path))
    }

    /// The checkpoint of `issue`, if there is one.
    pub fn load(repo_root: &Path, issue: u64) -> Result<Option<Checkpoint>, WorkspaceError> {
        let path = Checkpoint::path(repo_root, issue);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err("cannot read", &path)(e)),
        };
        let cp: Checkpoint =
            serde_json::from_str(&text).map_err(|e| WorkspaceError::Checkpoint {
                path: path.clone(),
                problem: format!("it is not a valid checkpoint ({e})"),
            })?;
        if cp.issue != issue {
            return Err(WorkspaceError::Checkpoint {
                path,
                problem: format!("it names issue #{} instead of #{issue}", cp.issue),
            });
        }
        Ok(Some(cp))
    }

    /// Delete the checkpoint of `issue` and its [`GroupLog`] (fine when there is none).
    pub fn remove(repo_root: &Path, issue: u64) -> Result<(), WorkspaceError> {
        for path in [
            Checkpoint::path(repo_root, issue),
            GroupLog::path(repo_root, issue),
        ] {
            match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(io_err("cannot remove", &path)(e));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The process groups a resume must kill what is left of — those the [`GroupLog`] holds last and
    /// any an older checkpoint kept — and the run's last sign of life (no process started after it
    /// belongs to the run).
    pub fn leftover_groups(&self, repo_root: &Path) -> (Vec<i32>, DateTime<Utc>) {
        let (mut groups, at) = GroupLog::read(repo_root, self.issue);
        groups.extend(self.groups.iter().copied());
        (
            groups,
            at.map_or(self.updated_at, |t| t.max(self.updated_at)),
        )
    }

    /// Mark the run alive now and save.
    pub fn touch(&mut self, repo_root: &Path) -> Result<(), WorkspaceError> {
        self.updated_at = Utc::now();
        self.save(repo_root)
    }

    /// The lock file held for the run's lifetime: `<repo_root>/.supervisor/runs/checkpoint-<issue>.lock`.
    pub(crate) fn lock_path(repo_root: &Path, issue: u64) -> PathBuf {
        Checkpoint::path(repo_root, issue).with_extension("lock")
    }

    /// Not touched for over an hour.
    pub fn is_stale(&self, now: DateTime<Utc>) -> bool {
        now.signed_duration_since(self.updated_at)
            .to_std()
            .is_ok_and(|age| age > STALE_AFTER)
    }

    /// Whether the process that wrote the checkpoint is still running (another run in progress).
    pub fn process_alive(&self) -> bool {
        let Ok(pid) = i32::try_from(self.pid) else {
            return false;
        };
        // SAFETY: signal 0 only checks for existence.
        pid > 1 && pid as u32 != std::process::id() && unsafe { libc::kill(pid, 0) } == 0
    }
}

/// An advisory lock (flock) on an issue's run, held for the run's lifetime. The kernel releases it
/// when the process dies, however it dies, so a held lock always means a live run.
#[derive(Debug)]
pub struct RunLock {
    _file: std::fs::File,
}

impl RunLock {
    /// Take the lock of `issue`'s run; `None` when another process holds it.
    pub fn acquire(repo_root: &Path, issue: u64) -> Result<Option<RunLock>, WorkspaceError> {
        let path = Checkpoint::lock_path(repo_root, issue);
        runs_dir(repo_root)?;
        Ok(super::lock_file(&path, false)?.map(|file| RunLock { _file: file }))
    }
}

/// Clean away a stale run: prune and delete its worktree, delete its branch, delete the checkpoint.
/// Only the worktree and branch that `cfg` derives for the issue are touched, whatever the file says.
pub fn prune_stale(cfg: &WorkspaceConfig, cp: &Checkpoint) -> Result<(), WorkspaceError> {
    let branch = cfg.branch_for(cp.issue)?;
    let path = cfg.worktree_path(cp.issue)?;
    if cp.branch != branch || !same_path(&cp.worktree, &path) {
        return Err(WorkspaceError::Checkpoint {
            path: Checkpoint::path(&cfg.repo_root, cp.issue),
            problem: format!(
                "it names {} on `{}`, but issue #{} belongs at {} on `{branch}` (were the settings changed?)",
                cp.worktree.display(),
                cp.branch,
                cp.issue,
                path.display()
            ),
        });
    }
    let wt = Worktree {
        path,
        branch,
        base: cfg.default_branch.clone(),
        origin: Reuse::ExistingWorktree,
        remote: cfg.remote.clone(),
        git_config: cfg.git_config.clone(),
        push_url: cfg.push_url.clone(),
        // Cleaning up works from the repository's own worktree records.
        git_dir: PathBuf::new(),
        common_dir: PathBuf::new(),
    };
    cleanup(cfg, &wt)?;
    Checkpoint::remove(&cfg.repo_root, cp.issue)
}

fn same_path(a: &Path, b: &Path) -> bool {
    let norm = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    norm(a) == norm(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worktree() -> Worktree {
        Worktree {
            path: "/w/x".into(),
            branch: "x".into(),
            base: "main".into(),
            origin: Reuse::Created,
            remote: "origin".into(),
            git_config: Vec::new(),
            push_url: String::new(),
            git_dir: PathBuf::new(),
            common_dir: PathBuf::new(),
        }
    }

    #[test]
    fn staleness_is_one_hour_since_the_last_touch() {
        let now = Utc::now();
        let mut cp = Checkpoint {
            run_id: "r".into(),
            issue: 3,
            pid: 1,
            worktree: "/w".into(),
            branch: "b".into(),
            started_at: now,
            updated_at: now - chrono::Duration::minutes(59),
            groups: Vec::new(),
            settled: None,
        };
        assert!(!cp.is_stale(now));
        cp.updated_at = now - chrono::Duration::minutes(61);
        assert!(cp.is_stale(now));
        cp.updated_at = now + chrono::Duration::minutes(5);
        assert!(!cp.is_stale(now));
    }

    #[test]
    fn save_load_remove() {
        let dir = tempfile::tempdir().unwrap();
        let wt = worktree();
        let mut cp = Checkpoint::new("run-1", 7, &wt);
        cp.save(dir.path()).unwrap();
        assert_eq!(Checkpoint::load(dir.path(), 7).unwrap(), Some(cp.clone()));
        cp.touch(dir.path()).unwrap();
        assert!(Checkpoint::load(dir.path(), 7).unwrap().unwrap().updated_at >= cp.started_at);
        assert!(!cp.process_alive(), "our own pid is not another run");
        Checkpoint::remove(dir.path(), 7).unwrap();
        Checkpoint::remove(dir.path(), 7).unwrap();
        assert_eq!(Checkpoint::load(dir.path(), 7).unwrap(), None);
        std::fs::write(Checkpoint::path(dir.path(), 8), "{").unwrap();
        let err = Checkpoint::load(dir.path(), 8).unwrap_err().to_string();
        assert!(err.contains("delete it"), "{err}");
    }

    #[test]
    fn the_group_log_holds_the_last_whole_set_and_goes_with_the_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        assert_eq!(GroupLog::read(root, 4), (Vec::new(), None));
        let before = Utc::now() - chrono::Duration::milliseconds(1);
        let mut log = GroupLog::create(root, 4).unwrap();
        log.record(&[101]).unwrap();
        log.record(&[101, 202]).unwrap();
        log.record(&[202]).unwrap();
        let (groups, at) = GroupLog::read(root, 4);
        assert_eq!(groups, [202]);
        assert!(at.unwrap() >= before);
        // A line a crash cut short is not the set.
        let path = GroupLog::path(root, 4);
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("17000000");
        std::fs::write(&path, &text).unwrap();
        assert_eq!(GroupLog::read(root, 4).0, [202]);
        // Every change is one line of the one file: no file is made per change.
        assert_eq!(text.lines().count(), 4);
        // An older checkpoint's groups are killed too, and the later sign of life counts.
        let wt = worktree();
        let mut cp = Checkpoint::new("run-4", 4, &wt);
        cp.groups = vec![303];
        cp.updated_at = before - chrono::Duration::minutes(5);
        let (groups, last_alive) = cp.leftover_groups(root);
        assert_eq!(groups, [202, 303]);
        assert_eq!(last_alive, at.unwrap());
        cp.updated_at = Utc::now() + chrono::Duration::minutes(1);
        assert_eq!(cp.leftover_groups(root).1, cp.updated_at);
        // A new run of the issue starts a log of its own; removing the checkpoint removes it.
        GroupLog::create(root, 4).unwrap();
        assert_eq!(GroupLog::read(root, 4), (Vec::new(), None));
        cp.save(root).unwrap();
        Checkpoint::remove(root, 4).unwrap();
        assert!(!path.exists() && !Checkpoint::path(root, 4).exists());
        let saved = serde_json::to_value(Checkpoint::new("run-5", 5, &wt)).unwrap();
        assert!(saved.get("groups").is_none(), "{saved}");
    }
}
