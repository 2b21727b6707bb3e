//! What gate tools may be and what they may see.
//!
//! The checkout under review is written by an agent: anything in it — `node_modules/.bin/tsc`, a
//! `.venv`, `node_modules/typescript/lib/tsserver.js` — may be planted. Gate tools therefore come only
//! from places the agent did not write: `gates.toolPaths`, the main checkout's installed dependencies as
//! they were when the gate session began, PATH (never a relative entry, never one inside the checkout),
//! and the pinned npx version. Every tool runs with the agents' allowlisted environment and never a
//! GitHub token.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use crate::agent::{BASE_ENV, GITHUB_TOKEN_VARS, agent_env_from};
use crate::config::Settings;

/// The environment of every process a gate starts (tools, language servers, command gates).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolEnv {
    vars: Vec<(String, String)>,
}

impl ToolEnv {
    /// The agents' allowlist under `settings` (`agent::agent_env`) — without any GitHub token, even when
    /// agents are allowed one, and without any variable holding `github_token`'s value.
    pub fn for_settings(settings: &Settings, github_token: Option<&str>) -> ToolEnv {
        Self::for_settings_from(settings, github_token, &|k| std::env::var(k).ok())
    }

    /// [`ToolEnv::for_settings`], reading variables through `lookup`.
    pub fn for_settings_from(
        settings: &Settings,
        github_token: Option<&str>,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> ToolEnv {
        Self::from_vars(agent_env_from(settings, None, lookup), github_token)
    }

    /// The agents' base allowlist (PATH, HOME, locale…), for checkouts without settings.
    pub fn base() -> ToolEnv {
        Self::base_from(&|k| std::env::var(k).ok())
    }

    /// [`ToolEnv::base`], reading variables through `lookup`.
    pub fn base_from(lookup: &dyn Fn(&str) -> Option<String>) -> ToolEnv {
        let vars = BASE_ENV
            .iter()
            .filter_map(|k| lookup(k).map(|v| (k.to_string(), v)))
            .collect();
        Self::from_vars(vars, None)
    }

    fn from_vars(vars: Vec<(String, String)>, github_token: Option<&str>) -> ToolEnv {
        let secret = github_token.filter(|t| !t.is_empty());
        let vars = vars
            .into_iter()
            .filter(|(k, _)| !GITHUB_TOKEN_VARS.contains(&k.as_str()))
            .filter(|(_, v)| secret.is_none_or(|t| !v.contains(t)))
            .collect();
        ToolEnv { vars }
    }

    pub(crate) fn vars(&self) -> &[(String, String)] {
        &self.vars
    }

    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.vars
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// `dir` is `root` or inside it (compared as given and canonically).
pub(crate) fn is_inside(dir: &Path, root: &Path) -> bool {
    if dir.starts_with(root) {
        return true;
    }
    match (dir.canonicalize(), root.canonicalize()) {
        (Ok(d), Ok(r)) => d.starts_with(r),
        _ => false,
    }
}

/// A PATH for finding and running tools: only absolute directories outside `checkout` (a relative
/// entry such as `node_modules/.bin` would resolve inside the checkout a tool runs in).
pub(crate) fn trusted_path(path: &OsStr, checkout: &Path) -> OsString {
    let dirs: Vec<PathBuf> = std::env::split_paths(path)
        .filter(|d| d.is_absolute() && !is_inside(d, checkout))
        .collect();
    std::env::join_paths(dirs).unwrap_or_default()
}

/// The main checkout of the repository holding `dir`: `dir`'s own working tree, or for a linked
/// worktree the working tree of the repository it belongs to. `None` for a bare main repository.
pub fn main_checkout_of(dir: &Path) -> Option<PathBuf> {
    let repo = git2::Repository::open(dir).ok()?;
    if repo.is_worktree() {
        let common = repo.commondir().canonicalize().ok()?;
        let main = git2::Repository::open(&common).ok()?;
        main.workdir().map(Path::to_path_buf)
    } else {
        repo.workdir().map(Path::to_path_buf)
    }
}

/// What a file was when it was recorded: the target it resolves to, its size, time and content.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fingerprint {
    target: PathBuf,
    len: u64,
    modified: Option<std::time::SystemTime>,
    content: Option<git2::Oid>,
}

/// Entry files larger than this are fingerprinted by size and time only.
const MAX_HASHED: u64 = 32 * 1024 * 1024;
/// Directories whose installed tools are recorded, at most.
const MAX_PROJECT_DIRS: usize = 20_000;

impl Fingerprint {
    fn of(path: &Path) -> Option<Fingerprint> {
        let target = path.canonicalize().ok()?;
        let meta = std::fs::metadata(&target).ok()?;
        if !meta.is_file() {
            return None;
        }
        let content = (meta.len() <= MAX_HASHED)
            .then(|| std::fs::read(&target).ok())
            .flatten()
            .and_then(|b| git2::Oid::hash_object(git2::ObjectType::Blob, &b).ok());
        Some(Fingerprint {
            target,
            len: meta.len(),
            modified: meta.modified().ok(),
            content,
        })
    }
}

/// How a tool found in the main checkout compares with the record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Installed {
    /// As it was when the session began.
    Unchanged,
    /// Not there when the session began (installed since, perhaps by an agent): not used.
    Unrecorded,
    /// Changed since the session began.
    Changed(String),
}

/// The gate tools installed in the main checkout when the session began (`node_modules/.bin/<tool>`
/// of the root and of the directories below it, `.venv/bin/<tool>`).
#[derive(Debug, Default)]
pub(crate) struct InstalledTools {
    recorded: HashMap<PathBuf, Fingerprint>,
}

impl InstalledTools {
    /// Record the tools `npm_bins` and `python_bins` as installed in `main` now.
    pub(crate) fn record(main: &Path, npm_bins: &[&str], python_bins: &[&str]) -> InstalledTools {
        let mut recorded = HashMap::new();
        let mut dirs: Vec<PathBuf> = vec![main.to_path_buf()];
        dirs.extend(project_dirs(main));
        for dir in dirs {
            let bin = dir.join("node_modules/.bin");
            if !bin.is_dir() {
                continue;
            }
            for name in npm_bins {
                let path = bin.join(name);
                if let Some(f) = Fingerprint::of(&path) {
                    recorded.insert(path, f);
                }
            }
        }
        for name in python_bins {
            let path = main.join(".venv/bin").join(name);
            if let Some(f) = Fingerprint::of(&path) {
                recorded.insert(path, f);
            }
        }
        InstalledTools { recorded }
    }

    /// Compare `path` (a candidate in the main checkout) with the record.
    pub(crate) fn check(&self, path: &Path) -> Installed {
        let Some(recorded) = self.recorded.get(path) else {
            return Installed::Unrecorded;
        };
        match Fingerprint::of(path) {
            Some(now) if now == *recorded => Installed::Unchanged,
            Some(_) => Installed::Changed(format!(
                "{} changed since the gate session began; not run (reinstall the main checkout's dependencies and run again)",
                path.display()
            )),
            None => Installed::Changed(format!(
                "{} was removed since the gate session began; not run",
                path.display()
            )),
        }
    }
}

/// Directories of the main checkout where a project's `node_modules` may be: every directory but
/// `node_modules` and hidden ones (`.git`, `.venv`…), breadth first, at most [`MAX_PROJECT_DIRS`].
fn project_dirs(main: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut queue = std::collections::VecDeque::from([main.to_path_buf()]);
    while let Some(dir) = queue.pop_front() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            let name = entry.file_name();
            if !is_dir || name == "node_modules" || name.to_string_lossy().starts_with('.') {
                continue;
            }
            if found.len() >= MAX_PROJECT_DIRS {
                return found;
            }
            found.push(entry.path());
            queue.push_back(entry.path());
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RepoSlug;

    fn lookup(k: &str) -> Option<String> {
        match k {
            "PATH" => Some("/usr/bin".into()),
            "HOME" => Some("/home/u".into()),
            "GITHUB_TOKEN" | "GH_TOKEN" => Some("ghp_secret".into()),
            "OPENAI_API_KEY" => Some("sk-1".into()),
            "COPY_OF_TOKEN" => Some("x-ghp_secret-y".into()),
            "CARGO_HOME" => Some("/c".into()),
            _ => None,
        }
    }

    #[test]
    fn tools_get_the_agent_allowlist_and_never_a_token() {
        let mut s = Settings::minimal(RepoSlug::parse("o/r").unwrap(), 1, vec!["a".into()]);
        // Even when agents may have the token, gate tools may not.
        s.pass_github_token = true;
        s.agent_env = vec![
            "OPENAI_API_KEY".into(),
            "GITHUB_TOKEN".into(),
            "COPY_OF_TOKEN".into(),
        ];
        let env = ToolEnv::for_settings_from(&s, Some("ghp_secret"), &lookup);
        let names: Vec<&str> = env.vars().iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["PATH", "HOME", "OPENAI_API_KEY"]);
        assert!(env.vars().iter().all(|(_, v)| !v.contains("ghp_secret")));
        let base = ToolEnv::base_from(&lookup);
        assert_eq!(base.get("PATH"), Some("/usr/bin"));
        assert_eq!(base.get("CARGO_HOME"), None);
        assert_eq!(base.get("GH_TOKEN"), None);
    }

    #[test]
    fn path_entries_inside_the_checkout_or_relative_are_dropped() {
        let path = OsString::from("/usr/bin:node_modules/.bin:/w/repo/node_modules/.bin:.:/opt/t");
        let trusted = trusted_path(&path, Path::new("/w/repo"));
        assert_eq!(trusted, OsString::from("/usr/bin:/opt/t"));
    }

    #[test]
    fn recorded_tools_are_trusted_until_they_change() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("node_modules/.bin");
        std::fs::create_dir_all(&bin).unwrap();
        let tsc = bin.join("tsc");
        std::fs::write(&tsc, "#!/bin/sh\necho real\n").unwrap();
        std::fs::set_permissions(&tsc, std::fs::Permissions::from_mode(0o755)).unwrap();
        let installed = InstalledTools::record(dir.path(), &["tsc", "knip"], &["pylsp"]);
        assert_eq!(installed.recorded.len(), 1);
        assert_eq!(installed.check(&tsc), Installed::Unchanged);
        assert_eq!(installed.check(&bin.join("knip")), Installed::Unrecorded);
        std::fs::write(&tsc, "#!/bin/sh\necho planted\n").unwrap();
        assert!(
            matches!(installed.check(&tsc), Installed::Changed(r) if r.contains("changed since")),
        );
    }
}
