//! What an agent could change to steer supervisor's git: the repository-level configuration that
//! names remotes, rewrites URLs, supplies credentials or headers, or runs commands. supervisor's
//! pushes and fetches read none of it (see `git.rs`); a change is still a sign that a stage tried,
//! and the run stops naming it rather than carrying on as if nothing happened.

use std::collections::BTreeSet;

use git2::{ConfigLevel, Repository};

use super::Worktree;

/// The security-relevant entries of a worktree's repository-level git configuration (the shared
/// `config`, the worktree's `config.worktree`, and the files they include), at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GitSetup {
    entries: BTreeSet<(String, String)>,
}

impl GitSetup {
    /// What changed from `before` to this one, each named by its key with the parts an agent
    /// chose left out (`url.*.insteadof`), never by its value: the text may be posted on GitHub.
    pub(crate) fn changes_since(&self, before: &GitSetup) -> Vec<String> {
        let keys = |s: &GitSetup| -> BTreeSet<String> {
            s.entries.iter().map(|(k, _)| k.clone()).collect()
        };
        let (was, now) = (keys(before), keys(self));
        let mut changes = BTreeSet::new();
        for key in now.union(&was) {
            fn of<'s>(s: &'s GitSetup, key: &str) -> Vec<&'s String> {
                s.entries
                    .iter()
                    .filter(|(k, _)| k == key)
                    .map(|(_, v)| v)
                    .collect()
            }
            let what = match (was.contains(key), now.contains(key)) {
                (false, true) => "added",
                (true, false) => "removed",
                _ if of(before, key) != of(self, key) => "changed",
                _ => continue,
            };
            changes.insert(format!("`{}` {what}", masked(key)));
        }
        changes.into_iter().collect()
    }
}

impl Worktree {
    /// The worktree's repository-level git set-up now, read through the git directory recorded
    /// when it was made (never through the checkout's `.git` file); empty when it cannot be read.
    pub fn git_setup(&self) -> GitSetup {
        let Ok(repo) = Repository::open(&self.git_dir) else {
            return GitSetup::default();
        };
        let Ok(config) = repo.config() else {
            return GitSetup::default();
        };
        let mut entries = BTreeSet::new();
        if let Ok(mut all) = config.entries(None) {
            while let Some(Ok(entry)) = all.next() {
                if !matches!(entry.level(), ConfigLevel::Local | ConfigLevel::Worktree) {
                    continue;
                }
                let (Ok(name), value) = (entry.name(), entry.value().unwrap_or_default()) else {
                    continue;
                };
                if steers_git(name) {
                    entries.insert((name.to_ascii_lowercase(), value.to_string()));
                }
            }
        }
        GitSetup { entries }
    }

    /// What a stage changed in the worktree's git set-up since `before` (its `.git` file, the
    /// configuration): `None` when nothing did.
    pub fn git_changed_since(&self, before: &GitSetup) -> Option<String> {
        if let Err(e) = self.check_link() {
            return Some(match e {
                super::WorkspaceError::GitChanged { what } => what,
                other => other.to_string(),
            });
        }
        let changes = self.git_setup().changes_since(before);
        (!changes.is_empty()).then(|| {
            format!(
                "the repository's git configuration changed: {}",
                changes.join(", ")
            )
        })
    }
}

/// Whether git configuration key `name` decides where git connects, what it sends or what it runs.
fn steers_git(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    let Some((section, rest)) = name.split_once('.') else {
        return false;
    };
    let key = rest.rsplit('.').next().unwrap_or(rest);
    match section {
        "url" | "remote" | "credential" | "http" | "include" | "includeif" | "protocol"
        | "filter" | "uploadpack" | "ssh" => true,
        "core" => matches!(
            key,
            "sshcommand" | "hookspath" | "fsmonitor" | "askpass" | "gitproxy" | "worktree"
        ),
        "diff" => matches!(key, "textconv" | "command"),
        "merge" => key == "driver",
        _ => false,
    }
}

/// `section.subsection.key` as `section.*.key`: the subsection is whatever the writer chose.
fn masked(key: &str) -> String {
    match (key.split_once('.'), key.rsplit_once('.')) {
        (Some((section, _)), Some((head, last))) if head.contains('.') => {
            format!("{section}.*.{last}")
        }
        _ => key.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup(entries: &[(&str, &str)]) -> GitSetup {
        GitSetup {
            entries: entries
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn keys_that_steer_git_are_watched_and_others_are_not() {
        for key in [
            "remote.origin.url",
            "remote.origin.pushurl",
            "url.https://attacker.example/.insteadof",
            "url.x.pushinsteadof",
            "credential.helper",
            "credential.https://github.com.username",
            "http.extraheader",
            "http.https://github.com/.proxy",
            "core.sshCommand",
            "core.hooksPath",
            "core.fsmonitor",
            "include.path",
            "includeIf.gitdir:/x/.path",
            "filter.lfs.smudge",
            "diff.bin.textconv",
            "merge.ours.driver",
        ] {
            assert!(steers_git(key), "{key}");
        }
        for key in [
            "user.name",
            "user.email",
            "branch.main.remote",
            "submodule.vendor.url",
            "core.filemode",
            "core.bare",
            "diff.renames",
            "gc.auto",
        ] {
            assert!(!steers_git(key), "{key}");
        }
    }

    #[test]
    fn a_change_is_named_by_its_key_without_what_the_agent_wrote() {
        let before = setup(&[("remote.origin.url", "/srv/r.git"), ("core.hookspath", "x")]);
        let after = setup(&[
            ("remote.origin.url", "https://attacker.example/r.git"),
            (
                "url.https://attacker.example/.insteadof",
                "https://github.com/",
            ),
        ]);
        let changes = after.changes_since(&before);
        assert_eq!(
            changes,
            [
                "`core.hookspath` removed",
                "`remote.*.url` changed",
                "`url.*.insteadof` added"
            ]
        );
        assert!(changes.iter().all(|c| !c.contains("attacker")));
        assert!(before.changes_since(&before.clone()).is_empty());
        // A second value for a key is a change too.
        let twice = setup(&[
            ("remote.origin.url", "/srv/r.git"),
            ("remote.origin.url", "/srv/other.git"),
            ("core.hookspath", "x"),
        ]);
        assert_eq!(twice.changes_since(&before), ["`remote.*.url` changed"]);
    }
}
