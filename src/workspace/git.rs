//! The `git` CLI, for what git2 cannot do here: HTTPS push and fetch (git2 is built without TLS) and
//! submodules. Arguments built from data always come after the options they belong to; credentials
//! travel in the child's environment to a one-shot credential helper, never in arguments, files or logs.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use super::WorkspaceError;

/// Credentials for push and fetch.
#[derive(Clone, Default, PartialEq, Eq)]
pub enum PushAuth {
    /// Whatever git is configured with (SSH keys, credential helpers, local paths).
    #[default]
    None,
    /// A GitHub token, used for HTTPS remotes only.
    Token(String),
    /// Asked for a token before each git command that talks to an HTTPS remote, so that a token
    /// that expires (a GitHub App's lives an hour) is replaced in time.
    Provider(TokenProvider),
}

impl PushAuth {
    /// Credentials from `provider`, asked before each HTTPS push or fetch.
    pub fn provider(
        provider: impl Fn() -> Result<String, String> + Send + Sync + 'static,
    ) -> PushAuth {
        PushAuth::Provider(TokenProvider(Arc::new(provider)))
    }
}

/// Hands out the token to use now; `Err` says why there is none.
#[derive(Clone)]
pub struct TokenProvider(Arc<dyn Fn() -> Result<String, String> + Send + Sync>);

impl PartialEq for TokenProvider {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for TokenProvider {}

impl std::fmt::Debug for PushAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PushAuth::None => f.write_str("None"),
            PushAuth::Token(_) => f.write_str("Token(***)"),
            PushAuth::Provider(_) => f.write_str("Provider(***)"),
        }
    }
}

/// The variable the credential helper reads the token from.
const TOKEN_VAR: &str = "SUPERVISOR_GIT_TOKEN";
/// Answers git's `get` with the token from the environment; nothing is stored.
const HELPER: &str = "!f() { test \"$1\" = get && echo username=x-access-token && echo \"password=${SUPERVISOR_GIT_TOKEN}\"; }; f";
/// Git variables that would redirect a subprocess to another repository.
const REPO_VARS: [&str; 5] = [
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_COMMON_DIR",
];

/// A `git` invocation in a directory.
pub(crate) struct Git<'a> {
    dir: &'a Path,
    config: Vec<(String, String)>,
    token: Option<String>,
}

impl<'a> Git<'a> {
    pub(crate) fn new(dir: &'a Path, config: &[(String, String)]) -> Git<'a> {
        Git {
            dir,
            config: config.to_vec(),
            token: None,
        }
    }

    /// Use `auth` when `url` is an HTTPS URL (a provider is asked for its token now); `Err` when
    /// the provider has none to give.
    pub(crate) fn with_auth(
        mut self,
        auth: &PushAuth,
        url: Option<&str>,
    ) -> Result<Git<'a>, WorkspaceError> {
        let https = url.is_some_and(|u| u.starts_with("https://"));
        let token = match auth {
            PushAuth::Token(t) if https => Some(t.clone()),
            PushAuth::Provider(p) if https => {
                Some((p.0)().map_err(|detail| WorkspaceError::GitCommand {
                    command: "git credentials".into(),
                    detail,
                })?)
            }
            _ => None,
        };
        if let Some(t) = token {
            self.token = Some(t);
            // Reset the helper list first so no configured helper sees (or stores) the token.
            self.config
                .push(("credential.helper".into(), String::new()));
            self.config
                .push(("credential.helper".into(), HELPER.into()));
        }
        // Give up on a stalled transfer instead of hanging the pipeline.
        self.config
            .push(("http.lowSpeedLimit".into(), "1000".into()));
        self.config.push(("http.lowSpeedTime".into(), "60".into()));
        Ok(self)
    }

    pub(crate) fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("git");
        for (k, v) in &self.config {
            cmd.arg("-c").arg(format!("{k}={v}"));
        }
        cmd.args(args)
            .current_dir(self.dir)
            .stdin(Stdio::null())
            .env("GIT_TERMINAL_PROMPT", "0");
        for var in REPO_VARS {
            cmd.env_remove(var);
        }
        if let Some(t) = &self.token {
            cmd.env(TOKEN_VAR, t);
        }
        cmd
    }

    /// Run git to completion; stdout on success, an error with git's message otherwise.
    pub(crate) fn run(&self, args: &[&str]) -> Result<String, WorkspaceError> {
        let shown = format!("git {}", args.join(" "));
        let out = self
            .command(args)
            .output()
            .map_err(|e| WorkspaceError::GitCommand {
                command: shown.clone(),
                detail: format!("cannot run git: {e}; is git installed?"),
            })?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let detail = self.redact(stderr.trim());
            Err(WorkspaceError::GitCommand {
                command: shown,
                detail: if detail.is_empty() {
                    format!("exit status {}", out.status)
                } else {
                    detail
                },
            })
        }
    }

    /// Never let the token reach a message, whatever git printed.
    fn redact(&self, text: &str) -> String {
        match &self.token {
            Some(t) if !t.is_empty() => text.replace(t.as_str(), "***"),
            _ => text.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_only_for_https_and_only_in_the_environment() {
        let auth = PushAuth::Token("ghp_secret".into());
        let g = Git::new(Path::new("."), &[])
            .with_auth(&auth, Some("https://github.com/o/r.git"))
            .unwrap();
        let cmd = g.command(&["push"]);
        let args: Vec<String> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert!(args.iter().all(|a| !a.contains("ghp_secret")));
        assert!(args.iter().any(|a| a == "credential.helper="));
        assert!(
            cmd.get_envs()
                .any(|(k, v)| k == TOKEN_VAR && v.is_some_and(|v| v == "ghp_secret"))
        );
        assert_eq!(g.redact("fatal: ghp_secret leaked"), "fatal: *** leaked");
        assert_eq!(format!("{auth:?}"), "Token(***)");

        let g = Git::new(Path::new("."), &[])
            .with_auth(&auth, Some("/tmp/remote.git"))
            .unwrap();
        assert!(g.command(&["push"]).get_envs().all(|(k, _)| k != TOKEN_VAR));
    }

    #[test]
    fn a_provider_is_asked_before_each_https_command() {
        use std::sync::atomic::{AtomicU32, Ordering};
        let asked = Arc::new(AtomicU32::new(0));
        let counter = asked.clone();
        let auth = PushAuth::provider(move || {
            Ok(format!(
                "ghs_token{}",
                counter.fetch_add(1, Ordering::SeqCst)
            ))
        });
        let url = Some("https://github.com/o/r.git");
        let env_token = |g: &Git| {
            g.command(&["push"])
                .get_envs()
                .find(|(k, _)| *k == TOKEN_VAR)
                .and_then(|(_, v)| v.map(|v| v.to_string_lossy().into_owned()))
        };
        let first = Git::new(Path::new("."), &[]).with_auth(&auth, url).unwrap();
        let second = Git::new(Path::new("."), &[]).with_auth(&auth, url).unwrap();
        assert_eq!(env_token(&first).as_deref(), Some("ghs_token0"));
        assert_eq!(env_token(&second).as_deref(), Some("ghs_token1"));
        // Local remotes need no token: the provider is not asked.
        Git::new(Path::new("."), &[])
            .with_auth(&auth, Some("/tmp/remote.git"))
            .unwrap();
        assert_eq!(asked.load(Ordering::SeqCst), 2);
        assert_eq!(format!("{auth:?}"), "Provider(***)");
        // A provider with nothing to give stops the command with its reason.
        let broken = PushAuth::provider(|| Err("the App's key was refused".into()));
        let e = Git::new(Path::new("."), &[])
            .with_auth(&broken, url)
            .err()
            .expect("an error");
        assert!(e.to_string().contains("the App's key was refused"), "{e}");
    }
}
