//! Reusing the main checkout's installed npm dependencies in a new worktree.
//!
//! When the worktree's npm lockfile is the main checkout's and the main checkout has its dependencies
//! installed, its `node_modules` directories are cloned copy-on-write where the file system can (the
//! worktree gets its own copy, sharing disk blocks until written), else installed with
//! `npm ci --prefer-offline` from npm's shared cache in place of the default `npm ci`.
//!
//! The clone goes into a staging directory beside the worktree (`.<name>.supervisor-deps`), so that
//! it can run while git checks the worktree's files out; setup then moves the directories in (a
//! rename) once it has checked that the worktree's lockfile is the main checkout's and that
//! `node_modules` is git-ignored there. The staging directory is removed whatever happens: when its
//! contents are moved in, refused, or dropped (a failed checkout, a stop), and — left by a crash —
//! by the next clone beside the same worktree or by the worktree's clean-up.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tokio::process::Command;
use tokio_util::sync::CancellationToken;

use super::git::PushAuth;
use super::setup::{
    Dependencies, OFFLINE_INSTALL, SetupReport, is_inside, run_bounded, run_setup_command,
};
use super::{WorkspaceConfig, WorkspaceError, Worktree, worktree};

/// npm lockfiles, in the order npm reads them.
pub(super) const LOCKFILES: [&str; 2] = ["npm-shrinkwrap.json", "package-lock.json"];
/// Where npm records what it installed.
const INSTALL_RECORD: &str = "node_modules/.package-lock.json";
const REUSE_STEP: &str = "reuse the main checkout's node_modules";

/// The staging directory of the worktree at `worktree`: beside it, on the same file system, so that
/// what is cloned there can be renamed into it.
pub(super) fn staging_dir(worktree: &Path) -> PathBuf {
    let name = worktree
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    worktree.with_file_name(format!(".{name}.supervisor-deps"))
}

/// The main checkout's `node_modules` cloned into a staging directory, not yet in the worktree.
/// Dropping it removes the staging directory and what is left in it.
#[derive(Debug, Default)]
pub struct StagedDeps(Option<Staged>);

#[derive(Debug)]
struct Staged {
    dir: PathBuf,
    /// The directories cloned (relative to the staging directory), or why nothing was.
    cloned: Result<Vec<PathBuf>, String>,
    took: Duration,
}

impl Drop for Staged {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl StagedDeps {
    /// Whether a clone was attempted (whatever its outcome).
    pub fn is_staged(&self) -> bool {
        self.0.is_some()
    }
}

/// Make (or find) the worktree of `issue` as [`ensure_worktree_with`](super::ensure_worktree_with)
/// does; when a new worktree is checked out from a tree whose lockfile is the main checkout's,
/// the main checkout's installed dependencies are cloned into a staging directory meanwhile, for
/// [`setup_staged`](super::setup_staged) to move in. A stop removes what was staged.
pub async fn ensure_worktree_staged(
    cfg: &WorkspaceConfig,
    issue: u64,
    auth: &PushAuth,
    cancel: &CancellationToken,
) -> Result<(Worktree, StagedDeps), WorkspaceError> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let (blocking_cfg, auth) = (cfg.clone(), auth.clone());
    let made = crate::process::spawn_blocking(Some(cancel.clone()), move || {
        let mut tx = Some(tx);
        let cfg = blocking_cfg;
        worktree::ensure_worktree_then(&cfg, issue, &auth, &mut |path, repo, tree| {
            if let Some(lockfile) = lockfile_to_reuse(&cfg.repo_root, repo, tree) {
                if let Some(tx) = tx.take() {
                    let _ = tx.send((staging_dir(path), lockfile));
                }
            }
        })
    });
    let staging = async {
        match rx.await {
            Ok((dir, lockfile)) => stage(&cfg.repo_root, &lockfile, dir, cancel).await,
            Err(_) => StagedDeps::default(),
        }
    };
    let (made, staged) = tokio::join!(made, staging);
    let wt = made.map_err(|e| WorkspaceError::Task(e.to_string()))??;
    Ok((wt, staged))
}

/// The main checkout's lockfile when `tree` has the same one and the main checkout has its
/// dependencies installed: worth cloning them while the tree is checked out.
fn lockfile_to_reuse(
    repo_root: &Path,
    repo: &git2::Repository,
    tree: &git2::Tree<'_>,
) -> Option<Vec<u8>> {
    let entry = LOCKFILES.iter().find_map(|l| tree.get_name(l))?;
    let name = entry.name().ok()?;
    let main = std::fs::read(repo_root.join(name)).ok()?;
    if !repo_root.join(INSTALL_RECORD).is_file() {
        return None;
    }
    let blob = repo.find_blob(entry.id()).ok()?;
    (blob.content() == main.as_slice()).then_some(main)
}

/// Clone the main checkout's `node_modules` directories (those `lockfile` installs) from `repo_root`
/// into the staging directory `dir` copy-on-write. A staging directory left by a crash is replaced.
async fn stage(
    repo_root: &Path,
    lockfile: &[u8],
    dir: PathBuf,
    cancel: &CancellationToken,
) -> StagedDeps {
    let started = Instant::now();
    let _ = std::fs::remove_dir_all(&dir);
    let mut staged = Staged {
        dir,
        cloned: Err(String::new()),
        took: Duration::ZERO,
    };
    staged.cloned = match std::fs::create_dir_all(&staged.dir) {
        Ok(()) => {
            let dirs = node_modules_dirs(lockfile);
            clone_copy_on_write(repo_root, &staged.dir, &dirs, cancel).await
        }
        Err(e) => Err(format!("cannot create {}: {e}", staged.dir.display())),
    };
    staged.took = started.elapsed();
    StagedDeps(Some(staged))
}

/// Give the worktree the main checkout's installed dependencies when its lockfile is the main
/// checkout's: `Some` when they were provided (cloned, or installed offline in place of the default
/// `npm ci`), `None` when the setup commands are to install them. `staged` is what was cloned while
/// the worktree was checked out; without it the clone happens now.
pub(super) async fn reuse_dependencies(
    cfg: &WorkspaceConfig,
    wt: &Worktree,
    lockfile: &str,
    staged: StagedDeps,
    report: &mut SetupReport,
    cancel: &CancellationToken,
) -> Option<Dependencies> {
    let ours = std::fs::read(wt.path.join(lockfile)).ok()?;
    let main = std::fs::read(cfg.repo_root.join(lockfile)).ok();
    let refusal = if main.as_deref() != Some(ours.as_slice()) {
        Some((
            true,
            format!("not reused: {lockfile} differs from the main checkout's"),
        ))
    } else if !cfg.repo_root.join(INSTALL_RECORD).is_file() {
        Some((
            true,
            "not reused: the main checkout has no installed dependencies".into(),
        ))
    } else if wt.path.join("node_modules").symlink_metadata().is_ok() {
        Some((true, "not needed: node_modules already present".into()))
    } else if !git2::Repository::open(&wt.path)
        .and_then(|r| r.status_should_ignore(Path::new("node_modules/")))
        .unwrap_or(false)
    {
        Some((false, "not reused: node_modules is not git-ignored, so it would be committed; add it to .gitignore".into()))
    } else {
        None
    };
    if let Some((ok, detail)) = refusal {
        report.step(REUSE_STEP, ok, detail);
        return None;
    }
    let staged = match staged.0 {
        Some(staged) => staged,
        None => {
            stage(&cfg.repo_root, &ours, staging_dir(&wt.path), cancel)
                .await
                .0?
        }
    };
    match staged
        .cloned
        .clone()
        .and_then(|dirs| move_in(&staged.dir, &wt.path, &dirs))
    {
        Ok(n) => {
            report.step(
                REUSE_STEP,
                true,
                format!(
                    "cloned copy-on-write ({n} node_modules director{}, {:.2} s)",
                    if n == 1 { "y" } else { "ies" },
                    staged.took.as_secs_f64()
                ),
            );
            Some(Dependencies::Cloned)
        }
        Err(why) if cfg.setup_commands.is_none() => {
            drop(staged);
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

/// Move the staged `dirs` into the worktree (renames on one file system); a directory the worktree
/// already has is left out. On failure nothing moved stays. Returns how many were moved.
fn move_in(staging: &Path, worktree: &Path, dirs: &[PathBuf]) -> Result<usize, String> {
    let mut moved: Vec<PathBuf> = Vec::new();
    for dir in dirs {
        let (src, dst) = (staging.join(dir), worktree.join(dir));
        if dst.symlink_metadata().is_ok() {
            continue;
        }
        let parent = dst.parent().unwrap_or(worktree);
        if let Err(e) = std::fs::create_dir_all(parent).and_then(|()| std::fs::rename(&src, &dst)) {
            undo(&moved);
            return Err(format!(
                "cannot move {} into the worktree: {e}",
                dir.display()
            ));
        }
        moved.push(dst);
    }
    Ok(moved.len())
}

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
/// the file system cannot clone. Returns the directories cloned.
async fn clone_copy_on_write(
    from: &Path,
    to: &Path,
    dirs: &[PathBuf],
    cancel: &CancellationToken,
) -> Result<Vec<PathBuf>, String> {
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
    Ok(made
        .iter()
        .filter_map(|d| d.strip_prefix(to).ok().map(Path::to_path_buf))
        .collect())
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
