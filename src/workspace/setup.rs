//! Preparing a new worktree: `.pi/git/` copied, submodules initialised, git-ignored files such as
//! `.env` copied, then the setup commands (default `npm ci` when a lockfile exists). Every step that
//! fails is a warning, not a stop: agents can still work in a partly set-up tree, and say so.
//!
//! When the worktree's npm lockfile is the main checkout's and the main checkout has its dependencies
//! installed, they are reused instead of installed again: cloned copy-on-write where the file system
//! can (the worktree gets its own copy, sharing disk blocks until written), else installed with
//! `npm ci --prefer-offline` from npm's shared cache in place of the default `npm ci`. Configured
//! setup commands still run afterwards.

use std::path::{Component, Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

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
    fn step(&mut self, what: impl Into<String>, ok: bool, detail: impl Into<String>) {
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
        report.dependencies = reuse_dependencies(cfg, wt, lockfile, &mut report, cancel).await;
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

/// npm lockfiles, in the order npm reads them.
const LOCKFILES: [&str; 2] = ["npm-shrinkwrap.json", "package-lock.json"];
/// Where npm records what it installed.
const INSTALL_RECORD: &str = "node_modules/.package-lock.json";
const REUSE_STEP: &str = "reuse the main checkout's node_modules";

/// Give the worktree the main checkout's installed dependencies when its lockfile is the main
/// checkout's: `Some` when they were provided (cloned, or installed offline in place of the default
/// `npm ci`), `None` when the setup commands are to install them.
async fn reuse_dependencies(
    cfg: &WorkspaceConfig,
    wt: &Worktree,
    lockfile: &str,
    report: &mut SetupReport,
    cancel: &CancellationToken,
) -> Option<Dependencies> {
    let ours = std::fs::read(wt.path.join(lockfile)).ok()?;
    let main = std::fs::read(cfg.repo_root.join(lockfile)).ok();
    if main.as_deref() != Some(ours.as_slice()) {
        report.step(
            REUSE_STEP,
            true,
            format!("not reused: {lockfile} differs from the main checkout's"),
        );
        return None;
    }
    if !cfg.repo_root.join(INSTALL_RECORD).is_file() {
        report.step(
            REUSE_STEP,
            true,
            "not reused: the main checkout has no installed dependencies",
        );
        return None;
    }
    if wt.path.join("node_modules").symlink_metadata().is_ok() {
        report.step(REUSE_STEP, true, "not needed: node_modules already present");
        return None;
    }
    let ignored = git2::Repository::open(&wt.path)
        .and_then(|r| r.status_should_ignore(Path::new("node_modules/")))
        .unwrap_or(false);
    if !ignored {
        report.step(
            REUSE_STEP,
            false,
            "not reused: node_modules is not git-ignored, so it would be committed; add it to .gitignore",
        );
        return None;
    }
    let dirs = node_modules_dirs(&ours);
    let started = Instant::now();
    match clone_copy_on_write(&cfg.repo_root, &wt.path, &dirs, cancel).await {
        Ok(n) => {
            report.step(
                REUSE_STEP,
                true,
                format!(
                    "cloned copy-on-write ({n} node_modules director{}, {:.2} s)",
                    if n == 1 { "y" } else { "ies" },
                    started.elapsed().as_secs_f64()
                ),
            );
            Some(Dependencies::Cloned)
        }
        Err(why) if cfg.setup_commands.is_none() => {
            report.step(
                REUSE_STEP,
                true,
                format!("no copy-on-write clone ({why}): installing from npm's cache instead"),
            );
            let attempts = cfg.setup_attempts.max(1);
            run_setup_command(OFFLINE_INSTALL, &wt.path, attempts, report, cancel).await;
            Some(Dependencies::InstalledOffline)
        }
        Err(why) => {
            report.step(
                REUSE_STEP,
                true,
                format!(
                    "no copy-on-write clone ({why}); the configured setup commands install them"
                ),
            );
            None
        }
    }
}

/// The default install when the lockfile is the main checkout's but nothing can be cloned.
const OFFLINE_INSTALL: &str = "npm ci --prefer-offline --no-audit --no-fund";

/// The `node_modules` directories an npm lockfile installs (`node_modules` and, for workspaces,
/// `packages/a/node_modules`…), relative to the root.
fn node_modules_dirs(lockfile: &[u8]) -> Vec<PathBuf> {
    let mut dirs = vec![PathBuf::from("node_modules")];
    let doc: serde_json::Value = serde_json::from_slice(lockfile).unwrap_or_default();
    if let Some(packages) = doc.get("packages").and_then(|p| p.as_object()) {
        for key in packages.keys() {
            if let Some((prefix, _)) = key.split_once("node_modules/") {
                let dir = Path::new(prefix).join("node_modules");
                if is_inside(&dir.to_string_lossy()) && !dirs.contains(&dir) {
                    dirs.push(dir);
                }
            }
        }
    }
    dirs
}

/// Clone each of `dirs` (relative) from `from` into `to` copy-on-write. Nothing is left behind when
/// the file system cannot clone. Returns how many were cloned.
async fn clone_copy_on_write(
    from: &Path,
    to: &Path,
    dirs: &[PathBuf],
    cancel: &CancellationToken,
) -> Result<usize, String> {
    // One file first: cp goes on through every file after a failed clone, which takes as long as a copy.
    let probe = to.join(format!(".supervisor-clone-probe-{}", std::process::id()));
    let (ok, detail) = run_bounded(
        &mut copy_command(&from.join(INSTALL_RECORD), &probe),
        cancel,
    )
    .await;
    let _ = std::fs::remove_file(&probe);
    if !ok {
        return Err(first_line(&detail));
    }
    let mut made: Vec<PathBuf> = Vec::new();
    for dir in dirs {
        let (src, dst) = (from.join(dir), to.join(dir));
        if !src.is_dir() || dst.symlink_metadata().is_ok() {
            continue;
        }
        if let Some(parent) = dst.parent() {
            if let Err(e) = std::fs::create_dir_all(parent) {
                undo(&made);
                return Err(format!("cannot create {}: {e}", parent.display()));
            }
        }
        made.push(dst.clone());
        let (ok, detail) = run_bounded(&mut copy_command(&src, &dst), cancel).await;
        if !ok {
            undo(&made);
            return Err(first_line(&detail));
        }
    }
    Ok(made.len())
}

/// `cp` cloning `src` (a file or a tree) to `dst` copy-on-write, failing where it cannot.
fn copy_command(src: &Path, dst: &Path) -> Command {
    let mut cmd = Command::new("cp");
    if cfg!(target_os = "macos") {
        cmd.args(["-c", "-R", "-p"]);
    } else {
        cmd.args(["-a", "--reflink=always"]);
    }
    cmd.arg(src).arg(dst);
    cmd
}

/// The first line of a command's output, for a one-line reason.
fn first_line(text: &str) -> String {
    let line = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("failed");
    line.chars().take(300).collect()
}

fn undo(made: &[PathBuf]) {
    for dir in made {
        let _ = std::fs::remove_dir_all(dir);
    }
}

async fn submodules(wt: &Worktree, report: &mut SetupReport, cancel: &CancellationToken) {
    let mut cmd: Command = Git::new(&wt.path, &wt.git_config)
        .command(&["submodule", "update", "--init", "--recursive"])
        .into();
    let (ok, detail) = run_bounded(&mut cmd, cancel).await;
    report.step("git submodule update --init", ok, detail);
}

/// A relative path that stays inside the tree.
fn is_inside(rel: &str) -> bool {
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

async fn run_setup_command(
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
async fn run_bounded(cmd: &mut Command, cancel: &CancellationToken) -> (bool, String) {
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
