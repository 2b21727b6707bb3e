//! Preparing a new worktree: `.pi/git/` copied, submodules initialised, git-ignored files such as
//! `.env` copied, then the setup commands (default `npm ci` when a lockfile exists). Every step that
//! fails is a warning, not a stop: agents can still work in a partly set-up tree, and say so.
//!
//! When the worktree's npm lockfile is the main checkout's and the main checkout has its dependencies
//! installed, they are reused instead of installed again (see [`super::deps`]); configured setup
//! commands still run afterwards.

use std::path::{Component, Path};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

use super::deps::{LOCKFILES, StagedDeps, reuse_dependencies};
use super::git::Git;
use super::{WorkspaceConfig, Worktree};
use crate::agent::GITHUB_TOKEN_VARS;
use crate::process::RunFailure;

/// How long one setup command or the submodule update may take.
const STEP_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// Output kept in a step's detail.
const DETAIL_CAP: usize = 2000;
/// pi's project-local git packages, copied into every worktree.
const PI_GIT_DIR: &str = ".pi/git";

/// One setup step and how it went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetupStep {
    pub what: String,
    pub ok: bool,
    pub detail: String,
}

/// What setup did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetupReport {
    pub steps: Vec<SetupStep>,
    pub warnings: Vec<String>,
    /// How the dependencies came to be, when there is an npm lockfile.
    #[serde(default)]
    pub dependencies: Option<Dependencies>,
    /// Wall time of the whole setup.
    #[serde(default)]
    pub duration_ms: u64,
    /// A stop was asked for before setup finished: the worktree is not ready for an agent.
    #[serde(default)]
    pub cancelled: bool,
}

/// How a new worktree got its npm dependencies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Dependencies {
    /// The main checkout's `node_modules`, cloned copy-on-write.
    Cloned,
    /// `npm ci --prefer-offline` (the lockfile is the main checkout's; no copy-on-write here).
    InstalledOffline,
    /// Installed by the setup commands (the default `npm ci`, or configured ones).
    SetupCommands,
}

impl SetupReport {
    pub(super) fn step(&mut self, what: impl Into<String>, ok: bool, detail: impl Into<String>) {
        let (what, detail) = (what.into(), detail.into());
        if !ok {
            self.warnings.push(format!("setup: {what}: {detail}"));
        }
        self.steps.push(SetupStep { what, ok, detail });
    }
}

/// Set up a worktree. Never fails; problems are warnings in the report. Cancelling `cancel` kills
/// the running step's process group and skips the rest (the report says `cancelled`).
pub async fn setup(
    cfg: &WorkspaceConfig,
    wt: &Worktree,
    cancel: &CancellationToken,
) -> SetupReport {
    setup_staged(cfg, wt, StagedDeps::default(), cancel).await
}

/// [`setup`] with the dependencies [`ensure_worktree_staged`](super::ensure_worktree_staged) cloned
/// while the worktree was checked out (moved in when they may be used, removed otherwise).
pub async fn setup_staged(
    cfg: &WorkspaceConfig,
    wt: &Worktree,
    staged: StagedDeps,
    cancel: &CancellationToken,
) -> SetupReport {
    let started = Instant::now();
    let mut report = SetupReport::default();
    copy_ignored(cfg, wt, PI_GIT_DIR, &mut report, true);
    if wt.path.join(".gitmodules").is_file() {
        submodules(wt, &mut report, cancel).await;
    }
    for file in &cfg.copy_files {
        copy_ignored(cfg, wt, file, &mut report, false);
    }
    let lockfile = LOCKFILES
        .iter()
        .copied()
        .find(|l| wt.path.join(l).is_file());
    if let Some(lockfile) = lockfile {
        report.dependencies =
            reuse_dependencies(cfg, wt, lockfile, staged, &mut report, cancel).await;
    }
    let commands = match &cfg.setup_commands {
        Some(list) => list.clone(),
        None if report.dependencies.is_some() => Vec::new(),
        None if lockfile.is_some() => {
            report.dependencies = Some(Dependencies::SetupCommands);
            vec!["npm ci".to_string()]
        }
        None => Vec::new(),
    };
    for command in commands {
        if cancel.is_cancelled() {
            break;
        }
        let attempts = cfg.setup_attempts.max(1);
        run_setup_command(&command, &wt.path, attempts, &mut report, cancel).await;
    }
    report.cancelled = cancel.is_cancelled();
    report.duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    report
}

/// The default install when the lockfile is the main checkout's but nothing can be cloned.
pub(super) const OFFLINE_INSTALL: &str = "npm ci --prefer-offline --no-audit --no-fund";

async fn submodules(wt: &Worktree, report: &mut SetupReport, cancel: &CancellationToken) {
    let mut cmd: Command = Git::new(&wt.path, &wt.git_config)
        .command(&["submodule", "update", "--init", "--recursive"])
        .into();
    let (ok, detail) = run_bounded(&mut cmd, cancel).await;
    report.step("git submodule update --init", ok, detail);
}

/// A relative path that stays inside the tree.
pub(super) fn is_inside(rel: &str) -> bool {
    !rel.is_empty()
        && Path::new(rel)
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
}

/// Copy `rel` from the repository into the worktree when it exists there, is missing in the worktree,
/// and the worktree ignores it (an untracked, unignored copy would end up in the developer's commit).
fn copy_ignored(
    cfg: &WorkspaceConfig,
    wt: &Worktree,
    rel: &str,
    report: &mut SetupReport,
    quiet_when_absent: bool,
) {
    let what = format!("copy {rel}");
    if !is_inside(rel) {
        report.step(
            what,
            false,
            "not copied: copyFiles entries must be relative paths inside the repository",
        );
        return;
    }
    let (src, dst) = (cfg.repo_root.join(rel), wt.path.join(rel));
    if src.symlink_metadata().is_err() {
        if !quiet_when_absent {
            report.step(what, true, "not present in the repository; nothing to copy");
        }
        return;
    }
    if dst.symlink_metadata().is_ok() {
        report.step(what, true, "already present in the worktree");
        return;
    }
    // Directory-only patterns (`.pi/git/`) match only a path that says it is a directory.
    let probe = if src.is_dir() {
        format!("{}/", rel.trim_end_matches('/'))
    } else {
        rel.to_string()
    };
    let ignored = git2::Repository::open(&wt.path)
        .and_then(|r| r.status_should_ignore(Path::new(&probe)))
        .unwrap_or(false);
    if !ignored {
        report.step(
            what,
            false,
            "not copied: it is not git-ignored, so it would be committed; add it to .gitignore",
        );
        return;
    }
    match copy_tree(&src, &dst) {
        Ok(n) => report.step(what, true, format!("{n} file(s) copied")),
        Err(e) => report.step(what, false, format!("copy failed: {e}")),
    }
}

/// Copy a file, symlink or directory tree. Returns the number of files and links copied.
fn copy_tree(src: &Path, dst: &Path) -> std::io::Result<u64> {
    let meta = src.symlink_metadata()?;
    if let Some(parent) = dst.parent() {
        std::fs::create_dir_all(parent)?;
    }
    if meta.file_type().is_symlink() {
        std::os::unix::fs::symlink(std::fs::read_link(src)?, dst)?;
        Ok(1)
    } else if meta.is_dir() {
        std::fs::create_dir_all(dst)?;
        let mut n = 0;
        for entry in std::fs::read_dir(src)? {
            let entry = entry?;
            n += copy_tree(&entry.path(), &dst.join(entry.file_name()))?;
        }
        Ok(n)
    } else {
        std::fs::copy(src, dst)?;
        Ok(1)
    }
}

pub(super) async fn run_setup_command(
    command: &str,
    dir: &Path,
    attempts: u32,
    report: &mut SetupReport,
    cancel: &CancellationToken,
) {
    let mut last = String::new();
    for attempt in 1..=attempts {
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(command).current_dir(dir);
        // Setup commands are the repository's own, but GitHub tokens stay with supervisor.
        for var in GITHUB_TOKEN_VARS {
            cmd.env_remove(var);
        }
        let (ok, detail) = run_bounded(&mut cmd, cancel).await;
        if cancel.is_cancelled() {
            report.step(command, false, "stopped: a stop was asked for");
            return;
        }
        if ok {
            let note = if attempt > 1 {
                format!("succeeded on attempt {attempt}")
            } else {
                "succeeded".into()
            };
            report.step(command, true, note);
            return;
        }
        last = detail;
    }
    report.step(
        command,
        false,
        format!("failed {attempts} time(s); last output: {last}"),
    );
}

/// Run a command with no stdin and a timeout, in its own registered process group that is killed
/// when `cancel` is cancelled; (success, the tail of its output).
pub(super) async fn run_bounded(cmd: &mut Command, cancel: &CancellationToken) -> (bool, String) {
    let out = match crate::process::run_to_end(cmd, STEP_TIMEOUT, cancel).await {
        Ok(out) => out,
        Err(RunFailure::TimedOut(_)) => {
            return (
                false,
                format!("timed out after {} minutes", STEP_TIMEOUT.as_secs() / 60),
            );
        }
        Err(e) => return (false, e.to_string()),
    };
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    let text = text.trim();
    let mut from = text.len().saturating_sub(DETAIL_CAP);
    while !text.is_char_boundary(from) {
        from += 1;
    }
    let tail = text[from..].to_string();
    let detail = if out.status.success() || !tail.is_empty() {
        tail
    } else {
        format!("exit status {}", out.status)
    };
    (out.status.success(), detail)
}
