//! The bare repository standing for GitHub's copy of the repository: branches, commits, merges.

use std::path::{Path, PathBuf};

use git2::{BranchType, Oid, Repository, Signature};

/// A commit as the commits API shows it.
#[derive(Debug, Clone)]
pub struct CommitInfo {
    pub(crate) sha: String,
    pub message: String,
    pub author: String,
    pub(crate) email: String,
    pub(crate) time: i64,
    pub parents: Vec<String>,
}

impl CommitInfo {
    fn of(commit: &git2::Commit<'_>) -> CommitInfo {
        let author = commit.author();
        CommitInfo {
            sha: commit.id().to_string(),
            message: commit.message().unwrap_or_default().to_string(),
            author: author.name().unwrap_or_default().to_string(),
            email: author.email().unwrap_or_default().to_string(),
            time: commit.time().seconds(),
            parents: commit.parent_ids().map(|p| p.to_string()).collect(),
        }
    }
}

/// Commits a pull request lists at most (GitHub's pull request commits list stops at 250).
pub(crate) const MAX_PULL_COMMITS: usize = 250;

/// Lines of a pull request's diff kept at most; the files past them show without their lines.
pub(crate) const MAX_DIFF_LINES: usize = 3000;

/// A file of a pull request's diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileDiff {
    pub(crate) path: String,
    /// The path before a rename or copy.
    pub(crate) old_path: Option<String>,
    /// GitHub's file status: `added`, `removed`, `modified`, `renamed` or `copied`.
    pub(crate) status: &'static str,
    /// The file's blob at the head; `None` for a removed file.
    pub(crate) sha: Option<String>,
    pub(crate) additions: usize,
    pub(crate) deletions: usize,
    pub(crate) binary: bool,
    pub(crate) hunks: Vec<Hunk>,
    /// Some of its lines are left out ([`MAX_DIFF_LINES`]).
    pub(crate) truncated: bool,
}

impl FileDiff {
    /// The file's unified diff as GitHub's `patch` shows it: each hunk's `@@` header and its
    /// lines. `None` where GitHub leaves it out: a binary file, one without changed lines, or one
    /// whose lines were cut ([`MAX_DIFF_LINES`]).
    pub(crate) fn patch(&self) -> Option<String> {
        if self.binary || self.truncated || self.hunks.is_empty() {
            return None;
        }
        let mut out = Vec::new();
        for hunk in &self.hunks {
            out.push(hunk.header.clone());
            out.extend(hunk.lines.iter().map(|l| format!("{}{}", l.origin, l.text)));
        }
        Some(out.join("\n"))
    }
}

/// Why a reference was not created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RefRefusal {
    /// A reference of that name is there already.
    Exists,
    /// The sha is not a commit of the repository.
    UnknownCommit,
    /// Git refused the name, or failed: what went wrong.
    Failed(String),
}

/// A hunk of a file's diff: its `@@` header and its lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hunk {
    pub(crate) header: String,
    pub(crate) lines: Vec<DiffLine>,
}

/// A line of a hunk: `+` added, `-` removed, ` ` context; its numbers in the old and new file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DiffLine {
    pub(crate) origin: char,
    pub(crate) old: Option<u32>,
    pub new: Option<u32>,
    pub(crate) text: String,
}

/// How a merge of head into base would go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mergeability {
    Clean,
    Conflicting,
    /// A branch is missing.
    Unknown,
}

/// Why a pull request's branches were not merged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MergeRefusal {
    /// The head does not merge cleanly into the base (or, rebased, one of its commits does not
    /// apply).
    Conflict,
    /// A branch is missing, or git failed: what went wrong.
    Failed(String),
}

/// A commit by branch name or (full or abbreviated) sha.
fn resolve<'r>(repo: &'r Repository, spec: &str) -> Option<git2::Commit<'r>> {
    if spec.is_empty() || spec.starts_with('-') || spec.contains("..") {
        return None;
    }
    tip(repo, spec).ok().or_else(|| {
        let is_hex = spec.len() >= 4 && spec.chars().all(|c| c.is_ascii_hexdigit());
        is_hex
            .then(|| repo.revparse_single(spec).ok()?.peel_to_commit().ok())
            .flatten()
    })
}

/// The diff of a pull request from `head` (a branch or a commit) into branch `base`, as GitHub
/// computes it: from where `head` left `base` (their merge base) to `head`.
fn three_dot<'r>(
    repo: &'r Repository,
    base: &str,
    head: &str,
    opts: &mut git2::DiffOptions,
) -> Option<git2::Diff<'r>> {
    let head = resolve(repo, head)?;
    let base = tip(repo, base).ok()?;
    let fork = repo.merge_base(base.id(), head.id()).ok()?;
    let old = repo.find_commit(fork).ok()?.tree().ok()?;
    repo.diff_tree_to_tree(Some(&old), Some(&head.tree().ok()?), Some(opts))
        .ok()
}

/// A bare repository standing for GitHub's copy.
pub struct GitRemote {
    path: PathBuf,
}

fn open(path: &Path) -> Result<Repository, git2::Error> {
    Repository::open_bare(path).or_else(|_| Repository::open(path))
}

/// The commit a local branch points at.
fn tip<'r>(repo: &'r Repository, branch: &str) -> Result<git2::Commit<'r>, git2::Error> {
    repo.find_branch(branch, BranchType::Local)?
        .get()
        .peel_to_commit()
}

impl GitRemote {
    pub(crate) fn open(path: &Path) -> Result<GitRemote, String> {
        open(path).map_err(|e| {
            format!(
                "{} is not a git repository ({}): create it with `git init --bare {}`, or leave repo.git_dir out for a temporary one",
                path.display(),
                e.message(),
                path.display()
            )
        })?;
        Ok(GitRemote {
            path: path.to_path_buf(),
        })
    }

    /// A new bare repository at `path` with one commit on `branch`.
    pub fn create(path: &Path, branch: &str) -> Result<GitRemote, String> {
        let fail = |e: git2::Error| format!("cannot create {}: {}", path.display(), e.message());
        let repo = Repository::init_bare(path).map_err(fail)?;
        let remote = GitRemote {
            path: path.to_path_buf(),
        };
        remote.commit_files(
            branch,
            None,
            &[(
                "README.md",
                "A repository served by the supervisor sandbox GitHub.\n",
            )],
            "Initial commit",
        )?;
        repo.set_head(&format!("refs/heads/{branch}"))
            .map_err(fail)?;
        Ok(remote)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Commit top-level `files` (name, content) on `branch`, which starts from `from` when it does not exist
    /// yet. For tests and demos that need branches to open pull requests from. Returns the sha.
    pub fn commit_files(
        &self,
        branch: &str,
        from: Option<&str>,
        files: &[(&str, &str)],
        message: &str,
    ) -> Result<String, String> {
        let fail = |e: git2::Error| format!("commit on {branch}: {}", e.message());
        let repo = open(&self.path).map_err(fail)?;
        let sig = Signature::now("sandbox", "sandbox@localhost").map_err(fail)?;
        let parent = match tip(&repo, branch) {
            Ok(c) => Some(c),
            Err(_) => match from {
                Some(f) => Some(tip(&repo, f).map_err(fail)?),
                None => None,
            },
        };
        let base_tree = match &parent {
            Some(p) => Some(p.tree().map_err(fail)?),
            None => None,
        };
        let mut tb = repo.treebuilder(base_tree.as_ref()).map_err(fail)?;
        for (name, content) in files {
            let blob = repo.blob(content.as_bytes()).map_err(fail)?;
            tb.insert(name, blob, 0o100644).map_err(fail)?;
        }
        let tree = repo.find_tree(tb.write().map_err(fail)?).map_err(fail)?;
        let parents: Vec<&git2::Commit> = parent.iter().collect();
        let oid = repo
            .commit(
                Some(&format!("refs/heads/{branch}")),
                &sig,
                &sig,
                message,
                &tree,
                &parents,
            )
            .map_err(fail)?;
        Ok(oid.to_string())
    }

    fn repo(&self) -> Option<Repository> {
        open(&self.path).ok()
    }

    /// Tip of a branch.
    pub fn branch_sha(&self, branch: &str) -> Option<String> {
        let repo = self.repo()?;
        let b = repo.find_branch(branch, BranchType::Local).ok()?;
        b.get().target().map(|o| o.to_string())
    }

    /// The commit reference `name` (`refs/heads/main`, `refs/tags/v1`) points at.
    pub(crate) fn ref_sha(&self, name: &str) -> Option<String> {
        let repo = self.repo()?;
        let commit = repo.find_reference(name).ok()?.peel_to_commit().ok()?;
        Some(commit.id().to_string())
    }

    /// Create reference `name` (`refs/heads/topic`) at commit `sha` (its 40 hex digits), as
    /// GitHub's `POST /git/refs` does.
    pub(crate) fn create_ref(&self, name: &str, sha: &str) -> Result<(), RefRefusal> {
        let fail = |e: git2::Error| RefRefusal::Failed(e.message().to_string());
        let repo = open(&self.path).map_err(fail)?;
        if repo.find_reference(name).is_ok() {
            return Err(RefRefusal::Exists);
        }
        let commit = (sha.len() == 40)
            .then(|| Oid::from_str(sha).ok())
            .flatten()
            .and_then(|oid| repo.find_commit(oid).ok())
            .ok_or(RefRefusal::UnknownCommit)?;
        match repo.reference(name, commit.id(), false, "created through the API") {
            Ok(_) => Ok(()),
            Err(e) if e.code() == git2::ErrorCode::Exists => Err(RefRefusal::Exists),
            Err(e) => Err(fail(e)),
        }
    }

    /// A commit by sha (full or abbreviated) or branch name.
    pub fn commit(&self, spec: &str) -> Option<CommitInfo> {
        let repo = self.repo()?;
        Some(CommitInfo::of(&resolve(&repo, spec)?))
    }

    /// The commits of a pull request from `head` (a branch or a commit) into branch `base`, oldest
    /// first, as GitHub lists them: those `head` has and `base` lacks, at most [`MAX_PULL_COMMITS`].
    /// `None` when either is unknown.
    pub(crate) fn pull_commits(&self, base: &str, head: &str) -> Option<Vec<CommitInfo>> {
        let repo = self.repo()?;
        let head = resolve(&repo, head)?;
        let base = tip(&repo, base).ok()?;
        let mut walk = repo.revwalk().ok()?;
        walk.push(head.id()).ok()?;
        walk.hide(base.id()).ok()?;
        walk.set_sorting(git2::Sort::TOPOLOGICAL | git2::Sort::REVERSE)
            .ok()?;
        let commits = walk
            .filter_map(Result::ok)
            .take(MAX_PULL_COMMITS)
            .filter_map(|oid| repo.find_commit(oid).ok())
            .map(|c| CommitInfo::of(&c))
            .collect();
        Some(commits)
    }

    /// The files a pull request from `head` (a branch or a commit) into branch `base` changes, as
    /// GitHub's "Files changed" shows them: the diff from where `head` left `base`, renames found,
    /// at most [`MAX_DIFF_LINES`] lines in all. `None` when either is unknown.
    pub(crate) fn pull_files(&self, base: &str, head: &str) -> Option<Vec<FileDiff>> {
        let repo = self.repo()?;
        let mut diff = three_dot(&repo, base, head, &mut git2::DiffOptions::new())?;
        diff.find_similar(None).ok()?;
        let mut budget = MAX_DIFF_LINES;
        let mut files = Vec::new();
        for i in 0..diff.deltas().len() {
            let Some(delta) = diff.get_delta(i) else {
                continue;
            };
            let name = |f: git2::DiffFile<'_>| {
                f.path()
                    .map(|p| p.to_string_lossy().into_owned())
                    .unwrap_or_default()
            };
            let (old_path, path) = (name(delta.old_file()), name(delta.new_file()));
            let status = match delta.status() {
                git2::Delta::Added => "added",
                git2::Delta::Deleted => "removed",
                git2::Delta::Renamed => "renamed",
                git2::Delta::Copied => "copied",
                _ => "modified",
            };
            let mut file = FileDiff {
                old_path: (old_path != path && !old_path.is_empty()).then_some(old_path),
                path: if path.is_empty() {
                    name(delta.old_file())
                } else {
                    path
                },
                status,
                sha: Some(delta.new_file().id())
                    .filter(|id| !id.is_zero())
                    .map(|id| id.to_string()),
                additions: 0,
                deletions: 0,
                binary: delta.flags().is_binary(),
                hunks: Vec::new(),
                truncated: false,
            };
            if let Ok(Some(patch)) = git2::Patch::from_diff(&diff, i) {
                let (_, additions, deletions) = patch.line_stats().ok()?;
                (file.additions, file.deletions) = (additions, deletions);
                for h in 0..patch.num_hunks() {
                    let Ok((hunk, count)) = patch.hunk(h) else {
                        continue;
                    };
                    if count > budget {
                        file.truncated = true;
                        break;
                    }
                    budget -= count;
                    let lines = (0..count)
                        .filter_map(|l| patch.line_in_hunk(h, l).ok())
                        .filter(|l| matches!(l.origin(), '+' | '-' | ' '))
                        .map(|l| DiffLine {
                            origin: l.origin(),
                            old: l.old_lineno(),
                            new: l.new_lineno(),
                            text: String::from_utf8_lossy(l.content())
                                .trim_end_matches(['\n', '\r'])
                                .to_string(),
                        })
                        .collect();
                    file.hunks.push(Hunk {
                        header: String::from_utf8_lossy(hunk.header())
                            .trim_end()
                            .to_string(),
                        lines,
                    });
                }
            } else {
                file.binary = true;
            }
            files.push(file);
        }
        Some(files)
    }

    /// Whether `head` has commits that `base` lacks.
    pub fn has_commits_beyond(&self, base: &str, head: &str) -> bool {
        let Some(repo) = self.repo() else {
            return false;
        };
        let (Some(b), Some(h)) = (self.branch_sha(base), self.branch_sha(head)) else {
            return false;
        };
        let (Ok(b), Ok(h)) = (Oid::from_str(&b), Oid::from_str(&h)) else {
            return false;
        };
        repo.merge_base(b, h).map(|m| m != h).unwrap_or(true)
    }

    /// Whether commit `sha` is `head` or one of its ancestors: a commit of the pull request whose
    /// head branch is `head`.
    pub(crate) fn reaches(&self, head: &str, sha: &str) -> bool {
        let Some(repo) = self.repo() else {
            return false;
        };
        let (Some(h), Some(c)) = (resolve(&repo, head), resolve(&repo, sha)) else {
            return false;
        };
        h.id() == c.id() || repo.graph_descendant_of(h.id(), c.id()).unwrap_or(false)
    }

    /// Where line `line` of `path` at commit `from` stands at commit `to` (a sha or a branch):
    /// `None` when a change between them touched that line (GitHub then shows a comment on it as
    /// outdated) or either commit is unknown.
    pub(crate) fn line_at(&self, from: &str, to: &str, path: &str, line: u64) -> Option<u64> {
        let repo = self.repo()?;
        let (from, to) = (resolve(&repo, from)?, resolve(&repo, to)?);
        if from.id() == to.id() {
            return Some(line);
        }
        let mut opts = git2::DiffOptions::new();
        opts.pathspec(path)
            .disable_pathspec_match(true)
            .context_lines(0);
        let diff = repo
            .diff_tree_to_tree(
                Some(&from.tree().ok()?),
                Some(&to.tree().ok()?),
                Some(&mut opts),
            )
            .ok()?;
        let mut now = i64::try_from(line).ok()?;
        let old = now;
        let mut touched = false;
        diff.foreach(
            &mut |_, _| true,
            None,
            Some(&mut |_, hunk| {
                let (start, count) = (i64::from(hunk.old_start()), i64::from(hunk.old_lines()));
                let grown = i64::from(hunk.new_lines()) - count;
                // A hunk of added lines only starts after old line `start`.
                let (first, last) = if count == 0 {
                    (start + 1, start)
                } else {
                    (start, start + count - 1)
                };
                if (first..=last).contains(&old) {
                    touched = true;
                } else if old >= first {
                    now += grown;
                }
                true
            }),
            None,
        )
        .ok()?;
        if touched {
            return None;
        }
        u64::try_from(now).ok()
    }

    /// The diff hunk GitHub shows above a line comment: the hunk of the pull request's diff
    /// (`base...head`, `head` a branch or a commit of it) that holds new line `line` of `path`,
    /// from its header to that line. `None` when the line is not part of the diff.
    pub(crate) fn diff_hunk(
        &self,
        base: &str,
        head: &str,
        path: &str,
        line: u64,
    ) -> Option<String> {
        self.diff_line(base, head, path, line).map(|(hunk, _)| hunk)
    }

    /// Where new line `line` of `path` stands in the pull request's diff (`base...head`) as
    /// GitHub counts a comment's `position`: the lines below the file's first `@@` header, later
    /// headers included.
    pub(crate) fn diff_position(
        &self,
        base: &str,
        head: &str,
        path: &str,
        line: u64,
    ) -> Option<u64> {
        self.diff_line(base, head, path, line).map(|(_, at)| at)
    }

    fn diff_line(&self, base: &str, head: &str, path: &str, line: u64) -> Option<(String, u64)> {
        let repo = self.repo()?;
        let mut opts = git2::DiffOptions::new();
        opts.pathspec(path).disable_pathspec_match(true);
        let diff = three_dot(&repo, base, head, &mut opts)?;
        let patch = git2::Patch::from_diff(&diff, 0).ok()??;
        let mut position = 0;
        for h in 0..patch.num_hunks() {
            let (hunk, lines) = patch.hunk(h).ok()?;
            if h > 0 {
                position += 1;
            }
            let mut text = String::from_utf8_lossy(hunk.header())
                .trim_end()
                .to_string();
            for l in 0..lines {
                let dl = patch.line_in_hunk(h, l).ok()?;
                let origin = match dl.origin() {
                    c @ ('+' | '-' | ' ') => c,
                    _ => continue,
                };
                position += 1;
                text.push('\n');
                text.push(origin);
                text.push_str(String::from_utf8_lossy(dl.content()).trim_end_matches('\n'));
                if origin != '-' && dl.new_lineno() == Some(line as u32) {
                    return Some((text, position));
                }
            }
        }
        None
    }

    /// Merge branch `head` into branch `base` as GitHub's merge button does, and move `base` to
    /// the result: a merge commit of the two (`Merge`), the head's changes as one commit on the
    /// base (`Squash`, with `message`), or each of the head's commits replayed onto the base with
    /// its own message (`Rebase`). `message` is the new commit's message otherwise; `by` its
    /// committer (and, but for rebased commits, its author). The new tip's sha.
    pub(crate) fn merge(
        &self,
        base: &str,
        head: &str,
        method: crate::github::MergeMethod,
        message: &str,
        by: &str,
    ) -> Result<String, MergeRefusal> {
        use crate::github::MergeMethod;
        let failed = |e: git2::Error| MergeRefusal::Failed(e.message().to_string());
        let repo = open(&self.path).map_err(failed)?;
        let onto = tip(&repo, base).map_err(failed)?;
        let theirs = tip(&repo, head).map_err(failed)?;
        let sig = Signature::now(by, &format!("{by}@users.noreply.localhost")).map_err(failed)?;
        // The tree of `index`, unless it conflicts.
        let tree_of = |mut index: git2::Index| {
            if index.has_conflicts() {
                return Err(MergeRefusal::Conflict);
            }
            let id = index.write_tree_to(&repo).map_err(failed)?;
            repo.find_tree(id).map_err(failed)
        };
        let new = match method {
            MergeMethod::Merge | MergeMethod::Squash => {
                let tree = tree_of(repo.merge_commits(&onto, &theirs, None).map_err(failed)?)?;
                let parents: Vec<&git2::Commit> = if method == MergeMethod::Merge {
                    vec![&onto, &theirs]
                } else {
                    vec![&onto]
                };
                repo.commit(None, &sig, &sig, message, &tree, &parents)
                    .map_err(failed)?
            }
            MergeMethod::Rebase => {
                let mut walk = repo.revwalk().map_err(failed)?;
                walk.push(theirs.id()).map_err(failed)?;
                walk.hide(onto.id()).map_err(failed)?;
                walk.set_sorting(git2::Sort::TOPOLOGICAL | git2::Sort::REVERSE)
                    .map_err(failed)?;
                let mut last = onto.clone();
                for oid in walk {
                    let commit = repo.find_commit(oid.map_err(failed)?).map_err(failed)?;
                    // A merge commit has no single change to replay: GitHub refuses those too.
                    let index = repo
                        .cherrypick_commit(&commit, &last, 0, None)
                        .map_err(|_| MergeRefusal::Conflict)?;
                    let tree = tree_of(index)?;
                    let id = repo
                        .commit(
                            None,
                            &commit.author(),
                            &sig,
                            commit.message().unwrap_or_default(),
                            &tree,
                            &[&last],
                        )
                        .map_err(failed)?;
                    last = repo.find_commit(id).map_err(failed)?;
                }
                last.id()
            }
        };
        // Only from the tip merged onto: a push in between is not overwritten.
        repo.reference_matching(
            &format!("refs/heads/{base}"),
            new,
            true,
            onto.id(),
            &format!("merge {head}"),
        )
        .map_err(failed)?;
        Ok(new.to_string())
    }

    /// Merge `head` into `base` in memory.
    pub(crate) fn mergeability(&self, base: &str, head: &str) -> Mergeability {
        let merge = || -> Option<Mergeability> {
            let repo = self.repo()?;
            let base = tip(&repo, base).ok()?;
            let head = tip(&repo, head).ok()?;
            let index = repo.merge_commits(&base, &head, None).ok()?;
            Some(if index.has_conflicts() {
                Mergeability::Conflicting
            } else {
                Mergeability::Clean
            })
        };
        merge().unwrap_or(Mergeability::Unknown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Branch `clash` and then `main` change README.md: they conflict.
    fn clash(remote: &GitRemote) {
        remote
            .commit_files(
                "clash",
                Some("main"),
                &[("README.md", "theirs\n")],
                "theirs",
            )
            .unwrap();
        remote
            .commit_files("main", None, &[("README.md", "ours\n")], "ours")
            .unwrap();
    }

    #[test]
    fn merges_and_conflicts() {
        let dir = tempfile::tempdir().unwrap();
        let remote = GitRemote::create(&dir.path().join("r.git"), "main").unwrap();
        remote
            .commit_files("clean", Some("main"), &[("a.txt", "a\n")], "add a")
            .unwrap();
        clash(&remote);
        assert_eq!(remote.mergeability("main", "clean"), Mergeability::Clean);
        assert_eq!(
            remote.mergeability("main", "clash"),
            Mergeability::Conflicting
        );
        assert_eq!(
            remote.mergeability("main", "missing"),
            Mergeability::Unknown
        );
        assert!(remote.has_commits_beyond("main", "clean"));
        assert!(!remote.has_commits_beyond("main", "main"));
        let sha = remote.branch_sha("clean").unwrap();
        assert_eq!(remote.commit(&sha).unwrap().sha, sha);
        assert_eq!(remote.commit(&sha[..7]).unwrap().sha, sha);
        assert_eq!(remote.commit("clean").unwrap().sha, sha);
        assert!(remote.commit("deadbeef").is_none());
        assert!(remote.commit("--all").is_none());
    }

    #[test]
    fn a_merge_moves_the_base_as_each_method_does_and_a_conflict_changes_nothing() {
        use crate::github::MergeMethod;
        let dir = tempfile::tempdir().unwrap();
        let remote = GitRemote::create(&dir.path().join("r.git"), "main").unwrap();
        for branch in ["merged", "squashed", "rebased"] {
            remote
                .commit_files(
                    branch,
                    Some("main"),
                    &[(&format!("{branch}.txt"), "1\n")],
                    "one",
                )
                .unwrap();
            remote
                .commit_files(branch, None, &[(&format!("{branch}.txt"), "2\n")], "two")
                .unwrap();
        }
        let before = remote.branch_sha("main").unwrap();
        let head = remote.branch_sha("merged").unwrap();
        let sha = remote
            .merge(
                "main",
                "merged",
                MergeMethod::Merge,
                "Merge pull request #1",
                "alice",
            )
            .unwrap();
        assert_eq!(remote.branch_sha("main").unwrap(), sha);
        let commit = remote.commit(&sha).unwrap();
        assert_eq!(commit.parents, [before.clone(), head]);
        assert_eq!(
            (commit.message.as_str(), commit.author.as_str()),
            ("Merge pull request #1", "alice")
        );

        let before = sha;
        let squashed = remote
            .merge(
                "main",
                "squashed",
                MergeMethod::Squash,
                "Squashed (#2)",
                "alice",
            )
            .unwrap();
        let commit = remote.commit(&squashed).unwrap();
        assert_eq!(commit.parents, [before], "one commit on the base");
        assert!(!remote.has_commits_beyond("main", "merged"));

        let sha = remote
            .merge("main", "rebased", MergeMethod::Rebase, "unused", "alice")
            .unwrap();
        let two = remote.commit(&sha).unwrap();
        let one = remote.commit(&two.parents[0]).unwrap();
        assert_eq!((one.message.as_str(), two.message.as_str()), ("one", "two"));
        assert_eq!(one.parents, [squashed], "replayed onto the base");
        assert_eq!(one.author, "sandbox", "rebased commits keep their author");
        let files = remote.pull_files("merged", "main").unwrap();
        let mut names: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
        names.sort_unstable();
        assert_eq!(names, ["rebased.txt", "squashed.txt"]);

        clash(&remote);
        let tip = remote.branch_sha("main").unwrap();
        for method in [MergeMethod::Merge, MergeMethod::Squash, MergeMethod::Rebase] {
            assert_eq!(
                remote.merge("main", "clash", method, "m", "alice"),
                Err(MergeRefusal::Conflict),
                "{method:?}"
            );
        }
        assert_eq!(remote.branch_sha("main").unwrap(), tip, "nothing moved");
        assert!(matches!(
            remote.merge("main", "missing", MergeMethod::Merge, "m", "alice"),
            Err(MergeRefusal::Failed(_))
        ));
    }

    #[test]
    fn diff_hunks_end_at_the_commented_line() {
        let dir = tempfile::tempdir().unwrap();
        let remote = GitRemote::create(&dir.path().join("r.git"), "main").unwrap();
        remote
            .commit_files("main", None, &[("a.txt", "one\ntwo\n")], "base")
            .unwrap();
        remote
            .commit_files(
                "topic",
                Some("main"),
                &[("a.txt", "one\nTWO\nthree\n")],
                "change",
            )
            .unwrap();
        let hunk = remote.diff_hunk("main", "topic", "a.txt", 2).unwrap();
        assert!(hunk.starts_with("@@ -1,2 +1,3 @@"), "{hunk}");
        assert!(hunk.ends_with("+TWO"), "{hunk}");
        assert!(!hunk.contains("three"), "{hunk}");
        assert!(remote.diff_hunk("main", "topic", "a.txt", 9).is_none());
        // `-two`, `+TWO`: the new line 2 is the third line below the header.
        assert_eq!(remote.diff_position("main", "topic", "a.txt", 2), Some(3));
        assert_eq!(remote.diff_position("main", "topic", "a.txt", 3), Some(4));
        assert!(remote.diff_hunk("main", "topic", "b.txt", 1).is_none());
    }

    #[test]
    fn a_pull_request_lists_its_commits_and_files_from_where_it_left_the_base() {
        let dir = tempfile::tempdir().unwrap();
        let remote = GitRemote::create(&dir.path().join("r.git"), "main").unwrap();
        remote
            .commit_files("main", None, &[("a.txt", "one\ntwo\n")], "base")
            .unwrap();
        let first = remote
            .commit_files(
                "topic",
                Some("main"),
                &[("a.txt", "one\nTWO\n")],
                "change a",
            )
            .unwrap();
        let second = remote
            .commit_files("topic", None, &[("b.txt", "new\n")], "add b")
            .unwrap();
        // A later commit on main is not the pull request's, nor is its change in the diff.
        remote
            .commit_files("main", None, &[("c.txt", "main only\n")], "main moves on")
            .unwrap();
        let commits = remote.pull_commits("main", "topic").unwrap();
        let shas: Vec<&str> = commits.iter().map(|c| c.sha.as_str()).collect();
        assert_eq!(shas, [first.as_str(), second.as_str()]);
        assert_eq!(commits[0].message, "change a");
        assert_eq!(commits[0].author, "sandbox");
        let files = remote.pull_files("main", "topic").unwrap();
        let names: Vec<(&str, &str)> = files.iter().map(|f| (f.path.as_str(), f.status)).collect();
        assert_eq!(names, [("a.txt", "modified"), ("b.txt", "added")]);
        let a = &files[0];
        assert_eq!((a.additions, a.deletions), (1, 1));
        assert_eq!(a.hunks.len(), 1);
        assert!(a.hunks[0].header.starts_with("@@ -1,2 +1,2 @@"), "{a:?}");
        let lines: Vec<(char, Option<u32>, Option<u32>, &str)> = a.hunks[0]
            .lines
            .iter()
            .map(|l| (l.origin, l.old, l.new, l.text.as_str()))
            .collect();
        assert_eq!(
            lines,
            [
                (' ', Some(1), Some(1), "one"),
                ('-', Some(2), None, "two"),
                ('+', None, Some(2), "TWO"),
            ]
        );
        assert!(!a.truncated && !a.binary);
        assert_eq!(
            a.patch().unwrap(),
            format!("{}\n one\n-two\n+TWO", a.hunks[0].header)
        );
        let b = &files[1];
        assert_eq!(b.patch().unwrap(), "@@ -0,0 +1 @@\n+new");
        // The head's blob of each file.
        assert_eq!(
            b.sha.as_deref(),
            Some("3e757656cf36eca53338e520d134963a44f793f8")
        );
        assert!(remote.pull_commits("main", "missing").is_none());
        assert!(remote.pull_files("missing", "topic").is_none());
        assert_eq!(remote.pull_commits("main", "main").unwrap().len(), 0);
    }

    #[test]
    fn lines_follow_later_commits_until_a_change_touches_them() {
        let dir = tempfile::tempdir().unwrap();
        let remote = GitRemote::create(&dir.path().join("r.git"), "main").unwrap();
        let first = remote
            .commit_files("topic", Some("main"), &[("a.txt", "1\n2\n3\n4\n")], "one")
            .unwrap();
        // Two lines above line 3 and one below it are added; line 2 changes.
        let second = remote
            .commit_files(
                "topic",
                None,
                &[("a.txt", "0\n0\n1\nTWO\n3\n4\n5\n")],
                "two",
            )
            .unwrap();
        assert_eq!(remote.line_at(&first, &first, "a.txt", 2), Some(2));
        assert_eq!(remote.line_at(&first, "topic", "a.txt", 1), Some(3));
        assert_eq!(remote.line_at(&first, "topic", "a.txt", 2), None);
        assert_eq!(remote.line_at(&first, &second, "a.txt", 3), Some(5));
        assert_eq!(remote.line_at(&first, &second, "a.txt", 4), Some(6));
        assert_eq!(remote.line_at(&first, "missing", "a.txt", 1), None);
        assert!(remote.reaches("topic", &first));
        assert!(remote.reaches("topic", &second));
        assert!(!remote.reaches("main", &first));
        assert!(!remote.reaches("topic", "0123abcd"));
    }

    #[test]
    fn references_are_created_once_at_a_known_commit() {
        let dir = tempfile::tempdir().unwrap();
        let remote = GitRemote::create(&dir.path().join("r.git"), "main").unwrap();
        let main = remote.branch_sha("main").unwrap();
        assert_eq!(
            remote.ref_sha("refs/heads/main").as_deref(),
            Some(main.as_str())
        );
        assert!(remote.ref_sha("refs/heads/topic").is_none());
        assert_eq!(remote.create_ref("refs/heads/topic/a", &main), Ok(()));
        assert_eq!(remote.branch_sha("topic/a").as_deref(), Some(main.as_str()));
        assert_eq!(
            remote.create_ref("refs/heads/topic/a", &main),
            Err(RefRefusal::Exists)
        );
        // Not a commit of the repository, or not a whole sha.
        for sha in [
            "0123456789012345678901234567890123456789",
            &main[..7],
            "main",
        ] {
            assert_eq!(
                remote.create_ref("refs/heads/other", sha),
                Err(RefRefusal::UnknownCommit),
                "{sha}"
            );
        }
        assert!(matches!(
            remote.create_ref("refs/heads/a..b", &main),
            Err(RefRefusal::Failed(_))
        ));
        assert!(remote.branch_sha("other").is_none());
    }

    #[test]
    fn open_explains_a_missing_repository() {
        let e = GitRemote::open(Path::new("/nonexistent/x.git"))
            .err()
            .unwrap();
        assert!(e.contains("git init --bare"), "{e}");
    }
}
