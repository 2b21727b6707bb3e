//! The bare repository standing for GitHub's copy of the repository: branches, commits, merges.

use std::path::{Path, PathBuf};

use git2::{BranchType, Oid, Repository, Signature};

/// A commit as the commits API shows it.
#[derive(Debug, Clone)]
pub struct CommitInfo {
    pub sha: String,
    pub message: String,
    pub author: String,
    pub email: String,
    pub time: i64,
    pub parents: Vec<String>,
}

/// How a merge of head into base would go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mergeability {
    Clean,
    Conflicting,
    /// A branch is missing.
    Unknown,
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
    pub fn open(path: &Path) -> Result<GitRemote, String> {
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

    pub fn path(&self) -> &Path {
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

    /// A commit by sha (full or abbreviated) or branch name.
    pub fn commit(&self, spec: &str) -> Option<CommitInfo> {
        let repo = self.repo()?;
        let commit = resolve(&repo, spec)?;
        let author = commit.author();
        Some(CommitInfo {
            sha: commit.id().to_string(),
            message: commit.message().unwrap_or_default().to_string(),
            author: author.name().unwrap_or_default().to_string(),
            email: author.email().unwrap_or_default().to_string(),
            time: commit.time().seconds(),
            parents: commit.parent_ids().map(|p| p.to_string()).collect(),
        })
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
    pub fn reaches(&self, head: &str, sha: &str) -> bool {
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
    pub fn line_at(&self, from: &str, to: &str, path: &str, line: u64) -> Option<u64> {
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
    pub fn diff_hunk(&self, base: &str, head: &str, path: &str, line: u64) -> Option<String> {
        self.diff_line(base, head, path, line).map(|(hunk, _)| hunk)
    }

    /// Where new line `line` of `path` stands in the pull request's diff (`base...head`) as
    /// GitHub counts a comment's `position`: the lines below the file's first `@@` header, later
    /// headers included.
    pub fn diff_position(&self, base: &str, head: &str, path: &str, line: u64) -> Option<u64> {
        self.diff_line(base, head, path, line).map(|(_, at)| at)
    }

    fn diff_line(&self, base: &str, head: &str, path: &str, line: u64) -> Option<(String, u64)> {
        let repo = self.repo()?;
        let head = resolve(&repo, head)?;
        let base = tip(&repo, base).ok()?;
        let fork = repo.merge_base(base.id(), head.id()).ok()?;
        let old = repo.find_commit(fork).ok()?.tree().ok()?;
        let mut opts = git2::DiffOptions::new();
        opts.pathspec(path).disable_pathspec_match(true);
        let diff = repo
            .diff_tree_to_tree(Some(&old), Some(&head.tree().ok()?), Some(&mut opts))
            .ok()?;
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

    /// Merge `head` into `base` in memory.
    pub fn mergeability(&self, base: &str, head: &str) -> Mergeability {
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

    #[test]
    fn merges_and_conflicts() {
        let dir = tempfile::tempdir().unwrap();
        let remote = GitRemote::create(&dir.path().join("r.git"), "main").unwrap();
        remote
            .commit_files("clean", Some("main"), &[("a.txt", "a\n")], "add a")
            .unwrap();
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
    fn open_explains_a_missing_repository() {
        let e = GitRemote::open(Path::new("/nonexistent/x.git"))
            .err()
            .unwrap();
        assert!(e.contains("git init --bare"), "{e}");
    }
}
