//! The issue's git worktree: creation with the spec's fallbacks, setup, commit, push, merge of the
//! base branch, cleanup, crash checkpoints and signal handling.
//!
//! git2 does the repository work; the `git` CLI does what needs the network or submodule logic
//! (`submodule update`, `push`, `fetch`) and checks new worktrees out (`worktree add`, faster than
//! libgit2's checkout). Branch names and paths derived from configuration or issue
//! data are validated before use and never passed to git as options.

mod checkpoint;
mod deps;
mod git;
mod guard;
mod setup;
mod shutdown;
mod worktree;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::config::{Settings, is_safe_ref_component};

pub use checkpoint::{
    CHECKPOINT_DIR, Checkpoint, GroupLog, RunLock, STALE_AFTER, prune_stale, runs_dir,
};
pub use deps::{StagedDeps, ensure_worktree_staged};
pub use git::{PushAuth, TokenProvider};
pub use guard::GitSetup;
pub use setup::{Dependencies, SetupReport, SetupStep, setup, setup_staged};
pub use shutdown::Shutdown;
pub use worktree::{
    Committed, MergeOutcome, cleanup, ensure_worktree, ensure_worktree_with, existing_worktree,
    fetch_base, push_probe,
};

/// Where and how worktrees are made.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkspaceConfig {
    pub repo_root: PathBuf,
    /// The directory holding worktrees: the settings' `worktreeRoot`, else the repository's parent.
    pub worktree_root: PathBuf,
    pub branch_prefix: String,
    pub default_branch: String,
    /// The remote pushed to and fetched from.
    pub remote: String,
    /// Git-ignored files copied from the repository into a new worktree.
    pub copy_files: Vec<String>,
    /// Shell commands run in a new worktree; `None`: `npm ci` when a package-lock.json exists.
    pub setup_commands: Option<Vec<String>>,
    pub setup_attempts: u32,
    /// Extra `-c key=value` for git subprocesses (e.g. `protocol.file.allow=always` to allow
    /// submodules from local paths, which git refuses by default).
    pub git_config: Vec<(String, String)>,
    /// Where supervisor pushes branches and fetches from (the settings' `gitUrl`, else the
    /// repository on the GitHub host); never read from the repository's git configuration.
    pub push_url: String,
}

impl WorkspaceConfig {
    /// The configuration the settings give the repository at `repo_root`.
    pub fn from_settings(repo_root: &Path, s: &Settings) -> WorkspaceConfig {
        let worktree_root = match &s.worktree_root {
            Some(dir) if dir.is_absolute() => dir.clone(),
            Some(dir) => repo_root.join(dir),
            None => parent_of(repo_root),
        };
        WorkspaceConfig {
            repo_root: repo_root.to_path_buf(),
            worktree_root,
            branch_prefix: s.branch_prefix.clone(),
            default_branch: s.default_branch.clone(),
            remote: "origin".into(),
            copy_files: s.copy_files.clone(),
            setup_commands: s.setup_commands.clone(),
            setup_attempts: s.setup_attempts.max(1),
            git_config: Vec::new(),
            push_url: s.git_url(
                repo_root,
                std::env::var(crate::config::SERVER_URL_ENV).ok().as_deref(),
                std::env::var(crate::config::API_URL_ENV).ok().as_deref(),
            ),
        }
    }

    /// The branch of `issue`'s worktree, validated.
    pub(crate) fn branch_for(&self, issue: u64) -> Result<String, WorkspaceError> {
        let branch = format!("{}{issue}", self.branch_prefix);
        if !is_safe_ref_component(&branch) {
            return Err(WorkspaceError::UnsafeName {
                what: "branch name",
                value: branch,
                fix: "use a branchPrefix of letters, digits, '-', '_' or '/' such as \"supervisor/issue-\"",
            });
        }
        Ok(branch)
    }

    /// The directory of `issue`'s worktree: `<worktree_root>/<branch>`.
    pub fn worktree_path(&self, issue: u64) -> Result<PathBuf, WorkspaceError> {
        // A safe ref component has no `..`, no leading `/` and no empty parts: the join stays inside.
        Ok(self.worktree_root.join(self.branch_for(issue)?))
    }

    fn check_names(&self) -> Result<(), WorkspaceError> {
        for (what, value) in [
            ("default branch", &self.default_branch),
            ("remote name", &self.remote),
        ] {
            if !is_safe_ref_component(value) {
                return Err(WorkspaceError::UnsafeName {
                    what,
                    value: value.clone(),
                    fix: "use a plain name such as \"main\" or \"origin\"",
                });
            }
        }
        Ok(())
    }
}

/// The parent of a path, made absolute first (`.`'s parent is the current directory's parent).
fn parent_of(path: &Path) -> PathBuf {
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let abs = abs.canonicalize().unwrap_or(abs);
    abs.parent().map(Path::to_path_buf).unwrap_or(abs)
}

/// How the worktree came to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Reuse {
    /// New branch from the base, new worktree.
    Created,
    /// The branch existed (an earlier run): a new worktree on it.
    ExistingBranch,
    /// The branch existed only on the remote (pushed by an earlier run): continued from there.
    RemoteBranch,
    /// The worktree existed on the right branch: used as it is.
    ExistingWorktree,
}

/// An issue's worktree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Worktree {
    pub path: PathBuf,
    pub branch: String,
    /// The base branch's name (the settings' `defaultBranch`).
    pub base: String,
    pub origin: Reuse,
    /// The remote pushed to and fetched from.
    pub remote: String,
    /// Extra `-c key=value` for git subprocesses, from the configuration.
    #[serde(default)]
    pub git_config: Vec<(String, String)>,
    /// Where pushes and fetches go (the configuration's destination).
    #[serde(default)]
    pub push_url: String,
    /// The git directory git made for the worktree (`<repo>/.git/worktrees/<name>`), canonical:
    /// supervisor's git work goes through it only while the checkout's `.git` file names it.
    #[serde(default)]
    pub git_dir: PathBuf,
    /// The repository's shared git directory, canonical.
    #[serde(default)]
    pub common_dir: PathBuf,
}

/// What went wrong with the worktree. Messages say what to do.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    #[error("the {what} `{value}` is not safe to use with git; {fix}")]
    UnsafeName {
        what: &'static str,
        value: String,
        fix: &'static str,
    },
    #[error(
        "{} is not a git repository ({}); run supervisor from the repository's root or pass --repo-root",
        path.display(),
        source.message()
    )]
    NotARepository { path: PathBuf, source: git2::Error },
    #[error(
        "the base branch `{base}` exists neither locally nor as {remote}/{base}; check defaultBranch or fetch it"
    )]
    BaseNotFound { base: String, remote: String },
    #[error("{path} is already {what}; remove or move it, or choose another worktreeRoot")]
    PathOccupied { path: PathBuf, what: String },
    #[error(
        "branch `{branch}` is checked out at {path}; switch that checkout to another branch or remove it"
    )]
    BranchCheckedOutElsewhere { branch: String, path: PathBuf },
    #[error("git {op} failed: {}", source.message())]
    Git {
        op: &'static str,
        source: git2::Error,
    },
    #[error("`{command}` failed: {detail}")]
    GitCommand { command: String, detail: String },
    #[error("{op} {}: {}", path.display(), crate::config::io_reason(source))]
    Io {
        op: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the branch has no commit of its own to undo")]
    NothingToUndo,
    #[error("the checkpoint {path} cannot be used: {problem}; delete it to start clean")]
    Checkpoint { path: PathBuf, problem: String },
    #[error("refusing to delete {path}: {reason}")]
    RefuseToDelete { path: PathBuf, reason: String },
    /// Git work that could not finish (its task failed, or a step after it did).
    #[error("{0}")]
    Task(String),
    /// The worktree's git set-up is not the one supervisor made.
    #[error(
        "{what}; supervisor commits, pushes and fetches only through the git set-up it made for the worktree, so nothing was done: restore it or remove the worktree (git worktree remove --force), then run again"
    )]
    GitChanged { what: String },
    /// The branch moved on the remote while supervisor worked on it, and conflicts with its work.
    #[error(
        "{branch} moved on GitHub during the revision and conflicts with it in {}; nothing was pushed: merge by hand, then run again",
        .files.join(", ")
    )]
    RemoteMoved { branch: String, files: Vec<String> },
}

/// `map_err` helper for git2 calls.
pub(crate) fn git_err(op: &'static str) -> impl FnOnce(git2::Error) -> WorkspaceError {
    move |source| WorkspaceError::Git { op, source }
}

/// An exclusive lock (flock) on the file at `path`, made when missing, held until the returned file
/// is dropped (the kernel releases it when the process dies). `wait`: until it is free; else
/// `None` when another holds it.
pub fn lock_file(path: &Path, wait: bool) -> Result<Option<std::fs::File>, WorkspaceError> {
    use std::os::fd::AsRawFd;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(io_err("cannot open", path))?;
    let mode = if wait {
        libc::LOCK_EX
    } else {
        libc::LOCK_EX | libc::LOCK_NB
    };
    // SAFETY: flock(2) on a file descriptor this function owns.
    if unsafe { libc::flock(file.as_raw_fd(), mode) } == 0 {
        return Ok(Some(file));
    }
    let e = std::io::Error::last_os_error();
    if !wait && e.kind() == std::io::ErrorKind::WouldBlock {
        return Ok(None);
    }
    Err(io_err("cannot lock", path)(e))
}

/// `map_err` helper for file-system calls.
pub(crate) fn io_err(
    op: &'static str,
    path: &Path,
) -> impl FnOnce(std::io::Error) -> WorkspaceError {
    let path = path.to_path_buf();
    move |source| WorkspaceError::Io { op, path, source }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RepoSlug;

    #[test]
    fn config_from_settings() {
        let mut s = Settings::minimal(RepoSlug::parse("o/r").unwrap(), 1, vec!["a".into()]);
        let cfg = WorkspaceConfig::from_settings(Path::new("/src/app"), &s);
        assert_eq!(cfg.worktree_root, Path::new("/src"));
        assert_eq!(
            cfg.worktree_path(12).unwrap(),
            Path::new("/src/worktree-git-issue-12")
        );
        s.worktree_root = Some("wt".into());
        s.branch_prefix = "sv/".into();
        let cfg = WorkspaceConfig::from_settings(Path::new("/src/app"), &s);
        assert_eq!(cfg.worktree_path(3).unwrap(), Path::new("/src/app/wt/sv/3"));
        let bad = WorkspaceConfig {
            branch_prefix: "../".into(),
            ..cfg
        };
        assert!(matches!(
            bad.branch_for(1),
            Err(WorkspaceError::UnsafeName { .. })
        ));
    }
}
