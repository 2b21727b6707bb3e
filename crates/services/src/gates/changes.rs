//! What a change consists of: the files that differ from the base branch (committed, staged, unstaged
//! and untracked-but-not-ignored) and the commits on top of it. Computed with git2, so the gates see the
//! same change on a pipeline worktree and on a developer's checkout before they commit.

use std::path::{Path, PathBuf};

use git2::{Delta, DiffFindOptions, DiffOptions, Oid, Repository, Sort};
use serde::{Deserialize, Serialize};

use super::GateError;
pub use crate::config::{ExcludeError, ExcludeGlobs};

/// How a file changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum FileStatus {
    Added,
    Modified,
    Deleted,
    Renamed { from: String },
}

/// One changed file, its path relative to the repository root (with `/` separators).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangedFile {
    pub path: String,
    pub status: FileStatus,
    pub additions: usize,
    pub deletions: usize,
}

impl ChangedFile {
    /// Whether the file exists in the working tree after the change.
    pub(crate) fn exists(&self) -> bool {
        self.status != FileStatus::Deleted
    }

    /// The extension, lower-cased, without the dot (`ts` for `src/a.ts`; `` for `Makefile`).
    pub(crate) fn extension(&self) -> String {
        extension_of(&self.path)
    }
}

/// The lower-cased extension of a path, without the dot.
pub fn extension_of(path: &str) -> String {
    let name = path.rsplit('/').next().unwrap_or(path);
    match name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => ext.to_ascii_lowercase(),
        _ => String::new(),
    }
}

/// A commit of the change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitInfo {
    pub(crate) sha: String,
    pub message: String,
}

/// The change under review, relative to a base branch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ChangeSet {
    /// The base as given (`main`, `origin/main`, a SHA).
    pub base: String,
    /// The commit the change starts from; `None` when HEAD shares no history with the base (or has no
    /// commit yet): then every file counts as added.
    pub merge_base: Option<String>,
    /// Changed files, sorted by path.
    pub files: Vec<ChangedFile>,
    /// Commits from the merge base to HEAD, oldest first.
    pub commits: Vec<CommitInfo>,
}

impl ChangeSet {
    /// The change without the files `exclude` matches.
    pub(crate) fn without(&self, exclude: &ExcludeGlobs) -> ChangeSet {
        let mut kept = self.clone();
        kept.files.retain(|f| !exclude.is_match(&f.path));
        kept
    }

    /// Compute the change of the checkout at `dir` against `base`: merge-base(base, HEAD) → HEAD, plus
    /// what is staged, modified or untracked (not ignored) in the working tree. `base` may be a local
    /// branch, `origin/<base>` or any revision; when both `<base>` and `origin/<base>` exist, the one
    /// whose merge base with HEAD is newer is used (a stale local branch would drag in foreign commits).
    pub fn compute(dir: &Path, base: &str) -> Result<ChangeSet, GateError> {
        let repo = open_repository(dir)?;
        let git = |context: &str| {
            let context = context.to_string();
            move |source: git2::Error| GateError::Git { context, source }
        };
        let head = match repo.head() {
            Ok(r) => Some(r.peel_to_commit().map_err(git("reading HEAD"))?.id()),
            Err(e) if e.code() == git2::ErrorCode::UnbornBranch => None,
            Err(e) if e.code() == git2::ErrorCode::NotFound => None,
            Err(e) => return Err(git("reading HEAD")(e)),
        };
        let candidates = base_candidates(&repo, base);
        if candidates.is_empty() {
            return Err(GateError::BaseNotFound {
                base: base.to_string(),
            });
        }
        let merge_base = match head {
            None => None,
            Some(head) => newest_merge_base(&repo, head, &candidates)?,
        };

        let base_tree = match merge_base {
            Some(oid) => Some(
                repo.find_commit(oid)
                    .and_then(|c| c.tree())
                    .map_err(git("reading the merge base's tree"))?,
            ),
            None => None,
        };
        let mut opts = DiffOptions::new();
        opts.include_untracked(true)
            .recurse_untracked_dirs(true)
            .show_untracked_content(true)
            .ignore_submodules(true)
            .context_lines(0);
        let mut diff = repo
            .diff_tree_to_workdir_with_index(base_tree.as_ref(), Some(&mut opts))
            .map_err(git("comparing the working tree with the base"))?;
        diff.find_similar(Some(
            DiffFindOptions::new()
                .renames(true)
                .for_untracked(true)
                .renames_from_rewrites(true),
        ))
        .map_err(git("detecting renames"))?;

        let mut files = Vec::new();
        for (idx, delta) in diff.deltas().enumerate() {
            let path_of = |f: git2::DiffFile<'_>| f.path().map(slash_path);
            let status = match delta.status() {
                Delta::Added | Delta::Untracked | Delta::Copied => FileStatus::Added,
                Delta::Modified | Delta::Typechange => FileStatus::Modified,
                Delta::Deleted => FileStatus::Deleted,
                Delta::Renamed => FileStatus::Renamed {
                    from: path_of(delta.old_file()).unwrap_or_default(),
                },
                // Unmodified, ignored, unreadable and conflicted entries are not part of the change.
                _ => continue,
            };
            let path = match status {
                FileStatus::Deleted => path_of(delta.old_file()),
                _ => path_of(delta.new_file()),
            };
            let Some(path) = path else { continue };
            let (additions, deletions) = match git2::Patch::from_diff(&diff, idx) {
                Ok(Some(patch)) => patch
                    .line_stats()
                    .map(|(_, add, del)| (add, del))
                    .unwrap_or((0, 0)),
                _ => (0, 0),
            };
            files.push(ChangedFile {
                path,
                status,
                additions,
                deletions,
            });
        }
        files.sort_by(|a, b| a.path.cmp(&b.path));
        files.dedup_by(|a, b| a.path == b.path);

        let commits = match head {
            Some(head) => commits_between(&repo, merge_base, head)?,
            None => Vec::new(),
        };
        Ok(ChangeSet {
            base: base.to_string(),
            merge_base: merge_base.map(|o| o.to_string()),
            files,
            commits,
        })
    }

    /// The files that exist after the change (added, modified, renamed).
    pub(crate) fn existing(&self) -> impl Iterator<Item = &ChangedFile> {
        self.files.iter().filter(|f| f.exists())
    }

    /// Paths of the existing changed files whose extension is one of `extensions`.
    pub(crate) fn existing_with_extension(&self, extensions: &[&str]) -> Vec<&str> {
        self.existing()
            .filter(|f| extensions.contains(&f.extension().as_str()))
            .map(|f| f.path.as_str())
            .collect()
    }

    /// Whether `path` (relative, `/`-separated) is a changed file that still exists.
    pub fn touches(&self, path: &str) -> bool {
        let path = path.trim_start_matches("./");
        self.existing().any(|f| f.path == path)
    }

    pub fn get(&self, path: &str) -> Option<&ChangedFile> {
        self.files.iter().find(|f| f.path == path)
    }

    pub(crate) fn total_additions(&self) -> usize {
        self.files.iter().map(|f| f.additions).sum()
    }

    pub(crate) fn total_deletions(&self) -> usize {
        self.files.iter().map(|f| f.deletions).sum()
    }
}

/// Open the repository containing `dir`.
pub(crate) fn open_repository(dir: &Path) -> Result<Repository, GateError> {
    let repo = Repository::discover(dir).map_err(|source| {
        let dir = dir.to_path_buf();
        if !dir.exists() {
            GateError::Missing { dir }
        } else if !dir.is_dir() {
            GateError::NotADirectory { dir }
        } else if source.code() == git2::ErrorCode::NotFound {
            GateError::NotARepository { dir }
        } else {
            GateError::Unreadable { dir, source }
        }
    })?;
    if repo.is_bare() {
        return Err(GateError::Bare {
            dir: dir.to_path_buf(),
        });
    }
    Ok(repo)
}

/// The root of the working tree containing `dir`.
pub fn worktree_root(dir: &Path) -> Result<PathBuf, GateError> {
    let repo = open_repository(dir)?;
    let root = repo.workdir().ok_or_else(|| GateError::Bare {
        dir: dir.to_path_buf(),
    })?;
    Ok(root.canonicalize().unwrap_or_else(|_| root.to_path_buf()))
}

/// The branch HEAD points at (`None` when detached or unborn).
pub fn current_branch(dir: &Path) -> Option<String> {
    let repo = Repository::discover(dir).ok()?;
    let head = repo.head().ok()?;
    if !head.is_branch() {
        return None;
    }
    head.shorthand().ok().map(str::to_string)
}

/// The content of `path` at the change's merge base (`None` when it did not exist there).
pub(crate) fn content_at_base(dir: &Path, changes: &ChangeSet, path: &str) -> Option<Vec<u8>> {
    let oid = Oid::from_str(changes.merge_base.as_deref()?).ok()?;
    let repo = Repository::discover(dir).ok()?;
    let tree = repo.find_commit(oid).ok()?.tree().ok()?;
    let entry = tree.get_path(Path::new(path)).ok()?;
    let blob = repo.find_blob(entry.id()).ok()?;
    Some(blob.content().to_vec())
}

fn slash_path(p: &Path) -> String {
    p.to_string_lossy().replace('\\', "/")
}

/// Commits that `base` may name: the local branch, the remote-tracking branch, any revision.
fn base_candidates(repo: &Repository, base: &str) -> Vec<Oid> {
    let mut out = Vec::new();
    let mut push = |oid: Oid| {
        if !out.contains(&oid) {
            out.push(oid);
        }
    };
    for name in [
        format!("refs/heads/{base}"),
        format!("refs/remotes/origin/{base}"),
    ] {
        if let Ok(c) = repo.find_reference(&name).and_then(|r| r.peel_to_commit()) {
            push(c.id());
        }
    }
    if let Ok(c) = repo.revparse_single(base).and_then(|o| o.peel_to_commit()) {
        push(c.id());
    }
    out
}

/// The merge base of HEAD with each candidate; the newest one (a descendant of the others) wins.
fn newest_merge_base(
    repo: &Repository,
    head: Oid,
    candidates: &[Oid],
) -> Result<Option<Oid>, GateError> {
    let mut best: Option<Oid> = None;
    for &candidate in candidates {
        let mb = match repo.merge_base(head, candidate) {
            Ok(mb) => mb,
            Err(e) if e.code() == git2::ErrorCode::NotFound => continue,
            Err(source) => {
                return Err(GateError::Git {
                    context: "computing the merge base".into(),
                    source,
                });
            }
        };
        best = Some(match best {
            None => mb,
            Some(prev) if prev == mb => prev,
            Some(prev) => {
                if repo.graph_descendant_of(mb, prev).unwrap_or(false) {
                    mb
                } else {
                    prev
                }
            }
        });
    }
    Ok(best)
}

fn commits_between(
    repo: &Repository,
    merge_base: Option<Oid>,
    head: Oid,
) -> Result<Vec<CommitInfo>, GateError> {
    let git = |source| GateError::Git {
        context: "listing the branch's commits".into(),
        source,
    };
    let mut walk = repo.revwalk().map_err(git)?;
    walk.set_sorting(Sort::TOPOLOGICAL | Sort::REVERSE)
        .map_err(git)?;
    walk.push(head).map_err(git)?;
    if let Some(mb) = merge_base {
        walk.hide(mb).map_err(git)?;
    }
    let mut commits = Vec::new();
    for oid in walk {
        let oid = oid.map_err(git)?;
        let commit = repo.find_commit(oid).map_err(git)?;
        let message = match commit.message() {
            Ok(m) => m.to_string(),
            Err(_) => String::from_utf8_lossy(commit.message_bytes()).into_owned(),
        };
        commits.push(CommitInfo {
            sha: oid.to_string(),
            message,
        });
    }
    Ok(commits)
}

#[cfg(test)]
mod glob_tests {
    use super::{ChangeSet, ChangedFile, ExcludeGlobs, FileStatus};

    #[test]
    fn excluded_files_leave_the_change_set() {
        let file = |path: &str| ChangedFile {
            path: path.into(),
            status: FileStatus::Added,
            additions: 1,
            deletions: 0,
        };
        let all = ChangeSet {
            base: "main".into(),
            merge_base: None,
            files: vec![
                file("src/a.ts"),
                file("dist/a.js"),
                file("src/api.generated.ts"),
            ],
            commits: vec![],
        };
        let exclude = ExcludeGlobs::new(&["dist/".into(), "**/*.generated.ts".into()]).unwrap();
        let kept = all.without(&exclude);
        let paths: Vec<&str> = kept.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["src/a.ts"]);
        assert_eq!(all.without(&ExcludeGlobs::new(&[]).unwrap()), all);
    }
}

#[cfg(test)]
mod tests {
    use super::extension_of;

    #[test]
    fn extensions() {
        assert_eq!(extension_of("src/a.TS"), "ts");
        assert_eq!(extension_of("src/a.test.tsx"), "tsx");
        assert_eq!(extension_of("Makefile"), "");
        assert_eq!(extension_of(".gitignore"), "");
        assert_eq!(extension_of("dir.v2/file"), "");
    }
}
