//! Creating, using and removing an issue's worktree.

use std::path::{Path, PathBuf};

use git2::build::CheckoutBuilder;
use git2::{
    BranchType, ErrorCode, IndexAddOption, Oid, Repository, ResetType, Signature,
    WorktreePruneOptions,
};
use serde::{Deserialize, Serialize};

use super::git::{Git, PushAuth, RemoteGit};
use super::{Reuse, WorkspaceConfig, WorkspaceError, Worktree, git_err, io_err};

/// Committer used when git has no identity configured.
const FALLBACK_NAME: &str = "supervisor";
const FALLBACK_EMAIL: &str = "supervisor@localhost";

/// What merging the base branch into the worktree's branch did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum MergeOutcome {
    /// The branch already contains the base.
    UpToDate,
    /// A merge commit (or a fast-forward) to `sha`.
    Merged { sha: String },
    /// The merge would conflict in these files; nothing was changed.
    Conflicts { files: Vec<String> },
}

fn open(path: &Path) -> Result<Repository, WorkspaceError> {
    Repository::open(path).map_err(|source| WorkspaceError::NotARepository {
        path: path.to_path_buf(),
        source,
    })
}

/// `a` and `b` name the same directory (compared canonically when they exist).
fn same_dir(a: &Path, b: &Path) -> bool {
    let strip = |p: PathBuf| p.to_string_lossy().trim_end_matches('/').to_string();
    strip(canonical(a)) == strip(canonical(b))
}

/// The registered worktrees of `repo`: (name, path, whether its directory is valid).
fn registered(repo: &Repository) -> Result<Vec<(String, PathBuf, bool)>, WorkspaceError> {
    let names = repo.worktrees().map_err(git_err("worktree list"))?;
    let mut out = Vec::new();
    for name in names.iter().flatten().flatten() {
        if let Ok(w) = repo.find_worktree(name) {
            out.push((
                name.to_string(),
                w.path().to_path_buf(),
                w.validate().is_ok(),
            ));
        }
    }
    Ok(out)
}

/// The branch checked out in the worktree at `path`, as a full ref name.
fn head_ref(path: &Path) -> Option<String> {
    let repo = Repository::open(path).ok()?;
    let head = repo.find_reference("HEAD").ok()?;
    head.symbolic_target().ok().flatten().map(str::to_string)
}

/// The branch a worktree's record has checked out (readable when its directory is gone), as a full
/// ref name.
fn recorded_head(repo: &Repository, name: &str) -> Option<String> {
    let head = repo.commondir().join("worktrees").join(name).join("HEAD");
    let text = std::fs::read_to_string(head).ok()?;
    text.trim()
        .strip_prefix("ref:")
        .map(|r| r.trim().to_string())
}

/// Remove a registered worktree's record, and its directory when `with_dir`.
fn prune(repo: &Repository, name: &str, with_dir: bool) -> Result<(), WorkspaceError> {
    let w = repo
        .find_worktree(name)
        .map_err(git_err("worktree lookup"))?;
    let mut opts = WorktreePruneOptions::new();
    opts.valid(true).locked(true).working_tree(with_dir);
    w.prune(Some(&mut opts)).map_err(git_err("worktree prune"))
}

/// The commit a new branch starts from: the local default branch, else the remote's.
fn base_commit<'r>(
    repo: &'r Repository,
    cfg: &WorkspaceConfig,
) -> Result<git2::Commit<'r>, WorkspaceError> {
    let commit = |name: String| -> Result<Option<git2::Commit<'r>>, WorkspaceError> {
        match repo.find_reference(&name) {
            Ok(r) => r.peel_to_commit().map(Some).map_err(git_err("base lookup")),
            Err(_) => Ok(None),
        }
    };
    let local = commit(format!("refs/heads/{}", cfg.default_branch))?;
    let remote = commit(format!(
        "refs/remotes/{}/{}",
        cfg.remote, cfg.default_branch
    ))?;
    match (local, remote) {
        // The local branch, unless the remote's is further along it (pull requests merged since
        // it was updated): then the remote's, so the work starts from what was merged.
        (Some(local), Some(remote)) => {
            let behind = local.id() != remote.id()
                && repo
                    .graph_descendant_of(remote.id(), local.id())
                    .map_err(git_err("base lookup"))?;
            Ok(if behind { remote } else { local })
        }
        (Some(only), None) | (None, Some(only)) => Ok(only),
        (None, None) => Err(WorkspaceError::BaseNotFound {
            base: cfg.default_branch.clone(),
            remote: cfg.remote.clone(),
        }),
    }
}

/// The issue's branch as the destination has it, fetched into `refs/remotes/<remote>/<branch>`;
/// `None` when the destination has no such branch or cannot be reached (then a new branch starts
/// from the base).
fn fetch_remote_branch<'r>(
    repo: &'r Repository,
    cfg: &WorkspaceConfig,
    branch: &str,
    auth: &PushAuth,
) -> Option<git2::Commit<'r>> {
    let tracking = format!("refs/remotes/{}/{branch}", cfg.remote);
    let tip = RemoteGit::new(repo.commondir(), &cfg.push_url, auth, &cfg.git_config)
        .ok()?
        .fetch(repo, branch, &tracking)
        .ok()?;
    repo.find_commit(tip).ok()
}

/// The repository's worktree registry, held by this process until the returned file is dropped:
/// `git worktree add` reads every other worktree's record, and fails on one another add (a run
/// beside this one, in this process or another) is still writing.
fn registry_lock(repo: &Repository) -> Result<Option<std::fs::File>, WorkspaceError> {
    super::lock_file(&repo.commondir().join("supervisor-worktrees.lock"), true)
}

/// Where [`cleanup`] moves a worktree's directory before removing it.
fn moved_aside(path: &Path) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    path.with_file_name(format!("{}.removing", name.unwrap_or_default()))
}

/// Remove what a cleanup that a stop cut short left moved aside beside `path`.
fn remove_moved_aside(path: &Path) -> Result<(), WorkspaceError> {
    let aside = moved_aside(path);
    if aside.symlink_metadata().is_ok() {
        std::fs::remove_dir_all(&aside).map_err(io_err("cannot remove", &aside))?;
    }
    Ok(())
}

/// Fetch the default branch from the destination into `refs/remotes/<remote>/<branch>`, where a
/// new worktree starts from when there is no local branch of that name: an epic's tasks start from
/// the epic branch as it is now, with the tasks merged into it so far.
pub fn fetch_base(cfg: &WorkspaceConfig, auth: &PushAuth) -> Result<(), WorkspaceError> {
    let repo = open(&cfg.repo_root)?;
    let tracking = format!("refs/remotes/{}/{}", cfg.remote, cfg.default_branch);
    RemoteGit::new(repo.commondir(), &cfg.push_url, auth, &cfg.git_config)?.fetch(
        &repo,
        &cfg.default_branch,
        &tracking,
    )?;
    Ok(())
}

/// Make (or find) the worktree of `issue`: at `<worktree_root>/<branch>` on branch
/// `<branch_prefix><issue>` from the default branch. An existing branch is reused; an existing
/// directory is reused when it is that worktree and refused when it is anything else.
pub fn ensure_worktree(cfg: &WorkspaceConfig, issue: u64) -> Result<Worktree, WorkspaceError> {
    ensure_worktree_with(cfg, issue, &PushAuth::None)
}

/// `ensure_worktree`, first fetching the issue's branch from the remote (with `auth` for HTTPS), so
/// that work pushed by an earlier run is continued rather than replaced by a fresh branch.
pub fn ensure_worktree_with(
    cfg: &WorkspaceConfig,
    issue: u64,
    auth: &PushAuth,
) -> Result<Worktree, WorkspaceError> {
    ensure_worktree_then(cfg, issue, auth, &mut |_, _, _| {})
}

/// [`ensure_worktree_with`], calling `before_checkout` with the new worktree's path, the repository
/// and the tree about to be checked out into it, when a new worktree is made (work can start on it meanwhile).
pub(super) fn ensure_worktree_then(
    cfg: &WorkspaceConfig,
    issue: u64,
    auth: &PushAuth,
    before_checkout: &mut dyn FnMut(&Path, &Repository, &git2::Tree<'_>),
) -> Result<Worktree, WorkspaceError> {
    cfg.check_names()?;
    let branch = cfg.branch_for(issue)?;
    let path = cfg.worktree_path(issue)?;
    let repo = open(&cfg.repo_root)?;
    // A branch not made here yet may have been pushed by an earlier run: fetched before the
    // registry is locked, so that other runs make their worktrees while it talks to the remote.
    let pushed = match repo.find_branch(&branch, BranchType::Local) {
        Err(e) if e.code() == ErrorCode::NotFound => {
            fetch_remote_branch(&repo, cfg, &branch, auth).map(|c| c.id())
        }
        _ => None,
    };
    let _registry = registry_lock(&repo)?;
    let records = repo.commondir().join("worktrees");
    // A `git worktree add` of this path that a crash cut short would make every add fail.
    remove_unfinished_add(&records, &path);
    let branch_ref = format!("refs/heads/{branch}");
    let make = |origin, git_dir| Worktree {
        path: path.clone(),
        branch: branch.clone(),
        base: cfg.default_branch.clone(),
        origin,
        remote: cfg.remote.clone(),
        git_config: cfg.git_config.clone(),
        push_url: cfg.push_url.clone(),
        git_dir,
        common_dir: canonical(repo.commondir()),
    };

    for (wt_name, wt_path, valid) in registered(&repo)? {
        if same_dir(&wt_path, &path) {
            if !valid {
                prune(&repo, &wt_name, false)?;
                continue;
            }
            return match head_ref(&wt_path) {
                Some(r) if r == branch_ref => Ok(make(
                    Reuse::ExistingWorktree,
                    canonical(&records.join(&wt_name)),
                )),
                other => Err(WorkspaceError::PathOccupied {
                    path: path.clone(),
                    what: format!(
                        "a worktree of this repository on {}",
                        other.as_deref().unwrap_or("a detached HEAD")
                    ),
                }),
            };
        }
        if valid && head_ref(&wt_path).as_deref() == Some(branch_ref.as_str()) {
            return Err(WorkspaceError::BranchCheckedOutElsewhere {
                branch,
                path: wt_path,
            });
        }
        // A record whose directory is gone still holds its branch for git: freed.
        if !valid && recorded_head(&repo, &wt_name).as_deref() == Some(branch_ref.as_str()) {
            prune(&repo, &wt_name, false)?;
        }
    }
    if !repo.is_bare() && head_ref(&cfg.repo_root).as_deref() == Some(branch_ref.as_str()) {
        return Err(WorkspaceError::BranchCheckedOutElsewhere {
            branch,
            path: cfg.repo_root.clone(),
        });
    }

    remove_moved_aside(&path)?;
    // What a cleanup of an earlier version cut short between pruning the worktree's record and
    // removing its directory: a checkout naming a record of this repository that is gone.
    if path.is_dir()
        && is_worktree_of(&repo, &path)
        && record_of(&path).is_some_and(|r| !r.exists())
    {
        std::fs::remove_dir_all(&path).map_err(io_err("cannot remove", &path))?;
    }
    if path.exists() {
        let empty = path.is_dir()
            && std::fs::read_dir(&path)
                .map(|mut d| d.next().is_none())
                .unwrap_or(false);
        if !empty {
            return Err(WorkspaceError::PathOccupied {
                path,
                what: "a directory that is not a worktree of this repository".into(),
            });
        }
        std::fs::remove_dir(&path).map_err(io_err("cannot use the empty directory", &path))?;
    }

    let (reference, origin) = match repo.find_branch(&branch, BranchType::Local) {
        Ok(b) => (b.into_reference(), Reuse::ExistingBranch),
        Err(e) if e.code() == ErrorCode::NotFound => {
            if let Some(pushed) = pushed.and_then(|id| repo.find_commit(id).ok()) {
                let b = repo
                    .branch(&branch, &pushed, false)
                    .map_err(git_err("branch create"))?;
                (b.into_reference(), Reuse::RemoteBranch)
            } else {
                let base = base_commit(&repo, cfg)?;
                let b = repo
                    .branch(&branch, &base, false)
                    .map_err(git_err("branch create"))?;
                (b.into_reference(), Reuse::Created)
            }
        }
        Err(e) => return Err(git_err("branch lookup")(e)),
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io_err("cannot create", parent))?;
    }
    if let Ok(tree) = reference.peel_to_tree() {
        before_checkout(&path, &repo, &tree);
    }
    if let Err(e) = add_worktree(cfg, &path, &branch) {
        // A stop kills git mid-way: what it had made goes, or the repository's next add fails.
        remove_unfinished_add(&records, &path);
        return Err(e);
    }
    // The git directory git made for the checkout, recorded now: later git work goes through it
    // only while the checkout's `.git` file still names it.
    let git_dir = registered(&repo)?
        .into_iter()
        .find(|(_, p, valid)| *valid && same_dir(p, &path))
        .map(|(name, _, _)| canonical(&records.join(name)))
        .ok_or_else(|| {
            WorkspaceError::Task(format!(
                "git worktree add made no worktree record for {}",
                path.display()
            ))
        })?;
    Ok(make(origin, git_dir))
}

/// What a `git worktree add` of `path` that did not finish leaves: its record in `records` (named
/// after the path, still locked "initializing", or without the `commondir` git writes after the
/// `gitdir`), which makes every later `git worktree add` in the repository fail, and the checkout's
/// directory, whose `.git` names that record. Both are removed; a finished record is left alone.
fn remove_unfinished_add(records: &Path, path: &Path) {
    let Some(name) = path.file_name() else {
        return;
    };
    let record = records.join(name);
    let initializing = std::fs::read_to_string(record.join("locked"))
        .is_ok_and(|reason| reason.trim() == "initializing");
    if !record.is_dir() || (record.join("commondir").is_file() && !initializing) {
        return;
    }
    let checkout_is_its = record_of(path).is_some_and(|r| same_dir(&r, &record));
    let is_link = path
        .symlink_metadata()
        .is_ok_and(|m| m.file_type().is_symlink());
    if checkout_is_its && !is_link {
        let _ = std::fs::remove_dir_all(path);
    }
    let _ = std::fs::remove_dir_all(&record);
}

/// Register a worktree at `path` and check `branch` out into it with `git worktree add`: git's own
/// checkout writes the files faster than libgit2's, which looks each file's attributes up on its own.
/// Hooks are not run (the repository's `post-checkout` is no part of supervisor's setup).
fn add_worktree(cfg: &WorkspaceConfig, path: &Path, branch: &str) -> Result<(), WorkspaceError> {
    let mut config = cfg.git_config.clone();
    config.push(("core.hooksPath".into(), "/dev/null".into()));
    let args: [&std::ffi::OsStr; 6] = [
        "worktree".as_ref(),
        "add".as_ref(),
        "--quiet".as_ref(),
        "--".as_ref(),
        path.as_os_str(),
        branch.as_ref(),
    ];
    Git::new(&cfg.repo_root, &config).run(&args)?;
    Ok(())
}

/// The worktree of `issue` when one exists (a crashed run's, say), without creating anything.
pub fn existing_worktree(
    cfg: &WorkspaceConfig,
    issue: u64,
) -> Result<Option<Worktree>, WorkspaceError> {
    let branch = cfg.branch_for(issue)?;
    let path = cfg.worktree_path(issue)?;
    let repo = open(&cfg.repo_root)?;
    let branch_ref = format!("refs/heads/{branch}");
    let found = registered(&repo)?.into_iter().find(|(_, wt_path, valid)| {
        *valid && same_dir(wt_path, &path) && head_ref(wt_path).as_deref() == Some(&branch_ref)
    });
    Ok(found.map(|(name, _, _)| Worktree {
        path,
        branch,
        base: cfg.default_branch.clone(),
        origin: Reuse::ExistingWorktree,
        remote: cfg.remote.clone(),
        git_config: cfg.git_config.clone(),
        push_url: cfg.push_url.clone(),
        git_dir: canonical(&repo.commondir().join("worktrees").join(name)),
        common_dir: canonical(repo.commondir()),
    }))
}

/// Whether `path` is a checkout whose `.git` file points into `repo`'s worktree records.
fn is_worktree_of(repo: &Repository, path: &Path) -> bool {
    record_of(path).is_some_and(|r| r.starts_with(canonical(&repo.commondir().join("worktrees"))))
}

/// The worktree record the `.git` file of checkout `path` names (`gitdir: …`, relative to the
/// checkout when it is relative), canonical.
fn record_of(path: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(path.join(".git")).ok()?;
    let gitdir = text.trim().strip_prefix("gitdir:")?;
    Some(canonical(&path.join(gitdir.trim())))
}

/// `p` with links resolved, or as it is when it cannot be.
fn canonical(p: &Path) -> PathBuf {
    p.canonicalize().unwrap_or_else(|_| p.to_path_buf())
}

/// Remove the worktree's directory and record (and a dependency staging directory beside it), then
/// delete its local branch. Idempotent: parts
/// already gone are fine. A directory that is not a worktree of this repository is never deleted.
pub fn cleanup(cfg: &WorkspaceConfig, wt: &Worktree) -> Result<(), WorkspaceError> {
    let repo = open(&cfg.repo_root)?;
    let registry = registry_lock(&repo)?;
    let records: Vec<String> = (registered(&repo)?.into_iter())
        .filter(|(_, path, _)| same_dir(path, &wt.path))
        .map(|(name, _, _)| name)
        .collect();
    if wt.path.exists() {
        if records.is_empty() && !is_worktree_of(&repo, &wt.path) {
            return Err(WorkspaceError::RefuseToDelete {
                path: wt.path.clone(),
                reason: "it is not a worktree of this repository".into(),
            });
        }
        // Moved aside in one step first: a stop from here on leaves the worktree's path free
        // (its record is pruned where it is next used) and a directory nothing uses.
        let aside = moved_aside(&wt.path);
        remove_moved_aside(&wt.path)?;
        std::fs::rename(&wt.path, &aside).map_err(io_err("cannot move aside", &wt.path))?;
        for name in &records {
            prune(&repo, name, false)?;
        }
        // Moved aside and unregistered: nothing of the registry is left to guard while its files
        // go, and other runs make or remove their worktrees meanwhile.
        drop(registry);
        std::fs::remove_dir_all(&aside).map_err(io_err("cannot remove", &aside))?;
    } else {
        for name in &records {
            prune(&repo, name, false)?;
        }
    }
    // What a crash left of a dependency clone beside it.
    let staging = super::deps::staging_dir(&wt.path);
    if staging.symlink_metadata().is_ok() {
        std::fs::remove_dir_all(&staging).map_err(io_err("cannot remove", &staging))?;
    }
    if crate::config::is_safe_ref_component(&wt.branch) {
        match repo.find_branch(&wt.branch, BranchType::Local) {
            Ok(mut b) if !b.is_head() => b.delete().map_err(git_err("branch delete"))?,
            _ => {}
        }
    }
    Ok(())
}

impl Worktree {
    /// The worktree's repository, opened once its `.git` file is known to still name the git
    /// directory supervisor made for it (an agent could point it at a git directory of its own).
    fn repo(&self) -> Result<Repository, WorkspaceError> {
        self.check_link()?;
        open(&self.path)
    }

    /// `Err` naming what changed when the checkout's `.git` is no longer the file naming the git
    /// directory recorded when the worktree was made, or that directory no longer shares the
    /// repository's.
    pub(crate) fn check_link(&self) -> Result<(), WorkspaceError> {
        let changed = |what: String| Err(WorkspaceError::GitChanged { what });
        let dot_git = self.path.join(".git");
        match dot_git.symlink_metadata() {
            Ok(m) if m.file_type().is_file() => {}
            Ok(_) => {
                return changed(
                    "the worktree's .git is no longer the file git made (it is a directory or a link now)"
                        .into(),
                );
            }
            Err(e) => return Err(io_err("cannot read", &dot_git)(e)),
        }
        if record_of(&self.path).as_deref() != Some(self.git_dir.as_path()) {
            return changed(
                "the worktree's .git file names another git directory than the one git made for it"
                    .into(),
            );
        }
        let common = std::fs::read_to_string(self.git_dir.join("commondir"))
            .map(|c| canonical(&self.git_dir.join(c.trim())));
        if common.ok().as_deref() != Some(self.common_dir.as_path()) {
            return changed(
                "the worktree's git directory no longer shares the repository's (its commondir changed)"
                    .into(),
            );
        }
        Ok(())
    }

    /// Where the worktree's setup is recorded as finished: in git's own administrative directory
    /// of the worktree (never in the tree an agent commits).
    fn setup_record(&self) -> Result<PathBuf, WorkspaceError> {
        Ok(self.repo()?.path().join("supervisor-setup-done"))
    }

    /// Whether setup ran to its end in this worktree (a stop or a crash during setup leaves it
    /// unfinished, and the next run sets the worktree up again).
    pub fn setup_done(&self) -> bool {
        self.setup_record().is_ok_and(|p| p.is_file())
    }

    /// Record that setup ran to its end.
    pub fn mark_setup_done(&self) -> Result<(), WorkspaceError> {
        let path = self.setup_record()?;
        std::fs::write(&path, b"").map_err(io_err("cannot write", &path))
    }

    /// Tips of the base: the local branch and the remote's, those that exist.
    fn base_tips(&self, repo: &Repository) -> Vec<Oid> {
        [
            format!("refs/heads/{}", self.base),
            format!("refs/remotes/{}/{}", self.remote, self.base),
        ]
        .iter()
        .filter_map(|r| repo.refname_to_id(r).ok())
        .collect()
    }

    /// Commit every change in the worktree (new, modified and deleted files; git-ignored files
    /// excepted). `Ok(None)` when there is nothing to commit.
    pub fn commit_all(&self, message: &str) -> Result<Option<String>, WorkspaceError> {
        commit_in(&self.repo()?, message)
    }

    /// [`commit_all`](Worktree::commit_all), then where the branch stands: its head and how many
    /// commits it has beyond its base (one opening of the repository for the three).
    pub fn commit_and_count(&self, message: &str) -> Result<Committed, WorkspaceError> {
        self.commit_within(message, None)
    }

    /// Commit what changed in the paths `scope` matches (everything when `None`); every change
    /// elsewhere is undone first — a modified or deleted file back to HEAD's, a new one removed —
    /// and named in `outside`.
    pub fn commit_within(
        &self,
        message: &str,
        scope: Option<&globset::GlobSet>,
    ) -> Result<Committed, WorkspaceError> {
        let repo = self.repo()?;
        let outside = match scope {
            Some(scope) => undo_outside(&repo, &self.path, scope)?,
            None => Vec::new(),
        };
        Ok(Committed {
            sha: commit_in(&repo, message)?,
            ahead: self.ahead_in(&repo)?,
            head: head_in(&repo)?,
            outside,
        })
    }

    /// The commit the worktree's branch points at.
    pub fn head_sha(&self) -> Result<String, WorkspaceError> {
        head_in(&self.repo()?)
    }

    /// Commits on the branch that are on neither the local nor the remote base branch.
    pub fn commits_ahead(&self) -> Result<u32, WorkspaceError> {
        self.ahead_in(&self.repo()?)
    }

    fn ahead_in(&self, repo: &Repository) -> Result<u32, WorkspaceError> {
        let mut walk = repo.revwalk().map_err(git_err("revwalk"))?;
        walk.push_head().map_err(git_err("revwalk"))?;
        for tip in self.base_tips(repo) {
            walk.hide(tip).map_err(git_err("revwalk"))?;
        }
        Ok(walk.count() as u32)
    }

    /// Whether `head` (a commit here) merges into `base` (the base branch's commit a pull request
    /// names) without a conflict, computed here: the base branch is fetched when `base` is not
    /// known yet. `None` when `base` is still unknown after the fetch.
    pub fn merges_cleanly(
        &self,
        auth: &PushAuth,
        head: &str,
        base: &str,
    ) -> Result<Option<bool>, WorkspaceError> {
        let (Ok(head), Ok(base)) = (git2::Oid::from_str(head), git2::Oid::from_str(base)) else {
            return Ok(None);
        };
        let mut repo = self.repo()?;
        if repo.find_commit(base).is_err() {
            self.fetch_branch(auth, &self.base)?;
            repo = self.repo()?;
        }
        let (Ok(ours), Ok(theirs)) = (repo.find_commit(base), repo.find_commit(head)) else {
            return Ok(None);
        };
        if base == head || repo.graph_descendant_of(head, base).unwrap_or(false) {
            return Ok(Some(true));
        }
        let index = repo
            .merge_commits(&ours, &theirs, None)
            .map_err(git_err("merge"))?;
        Ok(Some(!index.has_conflicts()))
    }

    /// Whether the branch holds commits the remote does not: commits beyond the base whose tip is
    /// not on the remote-tracking branch (which `push` and `fetch` keep current).
    pub fn unpushed(&self) -> Result<bool, WorkspaceError> {
        if self.commits_ahead()? == 0 {
            return Ok(false);
        }
        let repo = self.repo()?;
        let head = head_oid(&repo)?;
        let Ok(remote) = repo.refname_to_id(&self.tracking()) else {
            return Ok(true);
        };
        let reached = remote == head
            || repo
                .graph_descendant_of(remote, head)
                .map_err(git_err("merge base"))?;
        Ok(!reached)
    }

    /// Push the branch to the destination, provided the branch there is still where it was last
    /// fetched or pushed (the branch is ours; `undo_last_commit` may have rewritten it). A token
    /// goes to the destination's host only, and is never written anywhere.
    pub fn push(&self, auth: &PushAuth) -> Result<(), WorkspaceError> {
        let repo = self.repo()?;
        let head = head_oid(&repo)?;
        let tracking = self.tracking();
        let lease = repo.refname_to_id(&tracking).ok();
        self.remote_git(auth)?
            .push(head, &self.branch, lease, false)?;
        repo.reference(&tracking, head, true, "supervisor: push")
            .map_err(git_err("update the remote-tracking branch"))?;
        Ok(())
    }

    /// The remote-tracking branch of the worktree's branch.
    fn tracking(&self) -> String {
        format!("refs/remotes/{}/{}", self.remote, self.branch)
    }

    /// Git talking to the destination for this worktree's repository.
    fn remote_git(&self, auth: &PushAuth) -> Result<RemoteGit, WorkspaceError> {
        RemoteGit::new(&self.common_dir, &self.push_url, auth, &self.git_config)
    }

    /// The worktree's files as they are now (new, changed and deleted files; git-ignored ones
    /// excepted), as a tree written to the repository: what committing everything would record.
    /// Neither the index nor the branch changes.
    pub fn snapshot(&self) -> Result<String, WorkspaceError> {
        let repo = self.repo()?;
        let mut index = repo.index().map_err(git_err("index"))?;
        index
            .add_all(["*"], IndexAddOption::DEFAULT, None)
            .map_err(git_err("add"))?;
        index.update_all(["*"], None).map_err(git_err("add"))?;
        let tree = index.write_tree().map_err(git_err("write tree"))?;
        Ok(tree.to_string())
    }

    /// Put the worktree's files back to `tree` (a [`snapshot`](Worktree::snapshot)): files changed
    /// or deleted since come back, files added since go (git-ignored files stay). The number of
    /// files that differed.
    pub fn restore(&self, tree: &str) -> Result<usize, WorkspaceError> {
        let repo = self.repo()?;
        let now = self.snapshot()?;
        if now == tree {
            return Ok(0);
        }
        let oid = |t: &str| Oid::from_str(t).map_err(git_err("tree id"));
        let (target, current) = (
            repo.find_tree(oid(tree)?).map_err(git_err("tree lookup"))?,
            repo.find_tree(oid(&now)?).map_err(git_err("tree lookup"))?,
        );
        let differed = repo
            .diff_tree_to_tree(Some(&current), Some(&target), None)
            .map_err(git_err("diff"))?
            .deltas()
            .len();
        let mut how = CheckoutBuilder::new();
        how.force().remove_untracked(true);
        // The index first holds what is there now, so that files added since count as the
        // checkout's to remove.
        let mut index = repo.index().map_err(git_err("index"))?;
        index.read_tree(&current).map_err(git_err("index"))?;
        index.write().map_err(git_err("index write"))?;
        repo.checkout_tree(target.as_object(), Some(&mut how))
            .map_err(git_err("checkout"))?;
        Ok(differed)
    }

    /// Undo the branch's last commit, keeping its changes in the working tree.
    pub fn undo_last_commit(&self) -> Result<(), WorkspaceError> {
        if self.commits_ahead()? == 0 {
            return Err(WorkspaceError::NothingToUndo);
        }
        let repo = self.repo()?;
        let head = repo
            .head()
            .and_then(|h| h.peel_to_commit())
            .map_err(git_err("head"))?;
        let parent = head.parent(0).map_err(git_err("parent"))?;
        repo.reset(parent.as_object(), ResetType::Mixed, None)
            .map_err(git_err("reset"))
    }

    /// Fetch the base branch and merge it into the worktree's branch.
    pub fn merge_base_branch(&self) -> Result<MergeOutcome, WorkspaceError> {
        self.merge_base_branch_with(&PushAuth::None)
    }

    /// [`merge_base_branch`](Self::merge_base_branch) with credentials for the fetch. Conflicts
    /// change nothing: the merge is computed in memory first.
    pub fn merge_base_branch_with(&self, auth: &PushAuth) -> Result<MergeOutcome, WorkspaceError> {
        let tracking = self.fetch_branch(auth, &self.base)?;
        self.merge_tracking(&tracking, &self.base)
    }

    /// Fetch `branch` from the destination into its remote-tracking ref, which is returned.
    fn fetch_branch(&self, auth: &PushAuth, branch: &str) -> Result<String, WorkspaceError> {
        let repo = self.repo()?;
        let tracking = format!("refs/remotes/{}/{branch}", self.remote);
        self.remote_git(auth)?.fetch(&repo, branch, &tracking)?;
        Ok(tracking)
    }

    /// Fetch the worktree's own branch from the remote (where others may have pushed to it) and
    /// say whether it still holds `sha`: `false` when its history was rewritten without it.
    pub fn fetch_own(&self, auth: &PushAuth, sha: Option<&str>) -> Result<bool, WorkspaceError> {
        let tracking = self.fetch_branch(auth, &self.branch)?;
        let Some(sha) = sha else {
            return Ok(true);
        };
        let repo = self.repo()?;
        let remote = repo
            .refname_to_id(&tracking)
            .map_err(git_err("branch lookup"))?;
        let Ok(ours) = repo.revparse_single(sha).and_then(|o| o.peel_to_commit()) else {
            return Ok(false);
        };
        Ok(remote == ours.id()
            || repo
                .graph_descendant_of(remote, ours.id())
                .map_err(git_err("merge base"))?)
    }

    /// Merge the remote's copy of the worktree's branch (fetched by [`fetch_own`](Self::fetch_own))
    /// into it: a fast-forward when the local branch has nothing of its own.
    pub fn merge_own_remote(&self) -> Result<MergeOutcome, WorkspaceError> {
        self.merge_tracking(&self.tracking(), &self.branch)
    }

    /// Merge `tracking` (the remote's `name`) into the worktree's branch; conflicts change nothing.
    fn merge_tracking(&self, tracking: &str, name: &str) -> Result<MergeOutcome, WorkspaceError> {
        let repo = self.repo()?;
        let ours = repo
            .head()
            .and_then(|h| h.peel_to_commit())
            .map_err(git_err("head"))?;
        let theirs = repo
            .find_reference(tracking)
            .and_then(|r| r.peel_to_commit())
            .map_err(git_err("branch lookup"))?;
        if ours.id() == theirs.id()
            || repo
                .graph_descendant_of(ours.id(), theirs.id())
                .map_err(git_err("merge base"))?
        {
            return Ok(MergeOutcome::UpToDate);
        }
        let target = if repo
            .graph_descendant_of(theirs.id(), ours.id())
            .map_err(git_err("merge base"))?
        {
            theirs.clone()
        } else {
            let mut index = repo
                .merge_commits(&ours, &theirs, None)
                .map_err(git_err("merge"))?;
            if index.has_conflicts() {
                let mut files: Vec<String> = Vec::new();
                for c in index.conflicts().map_err(git_err("merge"))?.flatten() {
                    let entry = c.our.or(c.their).or(c.ancestor);
                    if let Some(e) = entry {
                        let f = String::from_utf8_lossy(&e.path).into_owned();
                        if !files.contains(&f) {
                            files.push(f);
                        }
                    }
                }
                return Ok(MergeOutcome::Conflicts { files });
            }
            let tree_id = index.write_tree_to(&repo).map_err(git_err("merge tree"))?;
            let tree = repo.find_tree(tree_id).map_err(git_err("merge tree"))?;
            let sig = repo
                .signature()
                .or_else(|_| Signature::now(FALLBACK_NAME, FALLBACK_EMAIL))
                .map_err(git_err("signature"))?;
            let message = format!("Merge {}/{name} into {}", self.remote, self.branch);
            let oid = repo
                .commit(None, &sig, &sig, &message, &tree, &[&ours, &theirs])
                .map_err(git_err("merge commit"))?;
            repo.find_commit(oid).map_err(git_err("merge commit"))?
        };
        // Check the files out against the current HEAD first, then move the branch.
        repo.checkout_tree(target.as_object(), Some(CheckoutBuilder::new().safe()))
            .map_err(git_err("checkout"))?;
        repo.find_reference(&format!("refs/heads/{}", self.branch))
            .and_then(|mut r| r.set_target(target.id(), "supervisor: merge base branch"))
            .map_err(git_err("update branch"))?;
        Ok(MergeOutcome::Merged {
            sha: target.id().to_string(),
        })
    }
}

/// Whether the credentials may push to the destination: `git push --dry-run` of the current
/// commit to a branch under `branch_prefix` (nothing is sent). The error is git's answer.
pub fn push_probe(ws: &WorkspaceConfig, auth: &PushAuth) -> Result<(), WorkspaceError> {
    let repo = open(&ws.repo_root)?;
    let head = head_oid(&repo)?;
    let branch = format!("{}preflight", ws.branch_prefix);
    RemoteGit::new(repo.commondir(), &ws.push_url, auth, &ws.git_config)?
        .push(head, &branch, None, true)
}

/// A commit of everything in the worktree and where the branch then stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    /// The new commit, when there was something to commit.
    pub sha: Option<String>,
    /// Commits the branch has beyond its base.
    pub ahead: u32,
    /// The branch's head.
    pub head: String,
    /// Changes outside the commit's scope, undone (paths, sorted).
    pub outside: Vec<String>,
}

/// Undo every change of the working tree outside `scope` (see [`Worktree::commit_within`]).
fn undo_outside(
    repo: &Repository,
    root: &Path,
    scope: &globset::GlobSet,
) -> Result<Vec<String>, WorkspaceError> {
    let mut opts = git2::StatusOptions::new();
    opts.include_untracked(true)
        .recurse_untracked_dirs(true)
        .include_ignored(false);
    let statuses = repo.statuses(Some(&mut opts)).map_err(git_err("status"))?;
    let head = repo
        .head()
        .and_then(|h| h.peel_to_tree())
        .map_err(git_err("head"))?;
    let mut outside = Vec::new();
    for entry in statuses.iter() {
        let Ok(path) = entry.path() else { continue };
        if scope.is_match(path) {
            continue;
        }
        let full = root.join(path);
        match head.get_path(Path::new(path)) {
            Ok(e) => {
                let blob = repo.find_blob(e.id()).map_err(git_err("blob"))?;
                // A link or directory planted in the file's place goes first.
                if std::fs::symlink_metadata(&full).is_ok_and(|m| !m.is_file()) {
                    let _ = std::fs::remove_dir_all(&full).or_else(|_| std::fs::remove_file(&full));
                }
                if let Some(dir) = full.parent() {
                    std::fs::create_dir_all(dir)
                        .map_err(|e| WorkspaceError::Task(format!("undoing {path}: {e}")))?;
                }
                std::fs::write(&full, blob.content())
                    .map_err(|e| WorkspaceError::Task(format!("undoing {path}: {e}")))?;
            }
            Err(_) => {
                let _ = std::fs::remove_file(&full).or_else(|_| std::fs::remove_dir_all(&full));
            }
        }
        outside.push(path.to_string());
    }
    outside.sort();
    outside.dedup();
    Ok(outside)
}

/// [`Worktree::commit_all`] in the open `repo`.
fn commit_in(repo: &Repository, message: &str) -> Result<Option<String>, WorkspaceError> {
    let mut index = repo.index().map_err(git_err("index"))?;
    index
        .add_all(["*"], IndexAddOption::DEFAULT, None)
        .map_err(git_err("add"))?;
    index.update_all(["*"], None).map_err(git_err("add"))?;
    index.write().map_err(git_err("index write"))?;
    let tree_id = index.write_tree().map_err(git_err("write tree"))?;
    let head = repo
        .head()
        .and_then(|h| h.peel_to_commit())
        .map_err(git_err("head"))?;
    if head.tree_id() == tree_id {
        return Ok(None);
    }
    let sig = repo
        .signature()
        .or_else(|_| Signature::now(FALLBACK_NAME, FALLBACK_EMAIL))
        .map_err(git_err("signature"))?;
    let tree = repo.find_tree(tree_id).map_err(git_err("tree"))?;
    let oid = repo
        .commit(Some("HEAD"), &sig, &sig, message, &tree, &[&head])
        .map_err(git_err("commit"))?;
    Ok(Some(oid.to_string()))
}

/// The commit `repo`'s HEAD points at.
fn head_in(repo: &Repository) -> Result<String, WorkspaceError> {
    Ok(head_oid(repo)?.to_string())
}

fn head_oid(repo: &Repository) -> Result<Oid, WorkspaceError> {
    repo.head()
        .map_err(git_err("head"))?
        .target()
        .ok_or_else(|| git_err("head")(git2::Error::from_str("HEAD has no target")))
}
