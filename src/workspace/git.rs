//! The `git` CLI, for what git2 cannot do here: HTTPS push and fetch (git2 is built without TLS),
//! submodules, and checking a new worktree out as fast as git does. Arguments built from data always come after the options they belong to; credentials
//! travel in the child's environment to a one-shot credential helper, never in arguments, files or logs.
//!
//! A checkout made by `actions/checkout` (unless `persist-credentials: false`) keeps the workflow's
//! token in the git configuration as an `http.<url>.extraheader` Authorization header. git sends that
//! header and never asks a credential helper, so a push would go out as the workflow's token (which
//! starts no CI, or is refused). When supervisor brings its own token, such headers are switched off
//! for its push and fetch through command-scope configuration; the repository's files are not touched.

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

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
/// Persisted Authorization headers were reported: say it once per process, not at every push.
static HEADERS_REPORTED: AtomicBool = AtomicBool::new(false);
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
    /// Command-scope configuration passed through `GIT_CONFIG_COUNT` (keys may hold any character,
    /// which `-c key=value` cannot carry): the resets of persisted Authorization headers.
    env_config: Vec<(String, String)>,
}

impl<'a> Git<'a> {
    pub(crate) fn new(dir: &'a Path, config: &[(String, String)]) -> Git<'a> {
        Git {
            dir,
            config: config.to_vec(),
            token: None,
            env_config: Vec::new(),
        }
    }

    /// Use `auth` when `url` is an HTTPS URL (or plain HTTP to this machine's loopback, where the
    /// token never leaves the host); a provider is asked for its token now, `Err` when it has none
    /// to give. Persisted Authorization headers are switched off so that git asks for, and sends,
    /// this token.
    pub(crate) fn with_auth(
        mut self,
        auth: &PushAuth,
        url: Option<&str>,
    ) -> Result<Git<'a>, WorkspaceError> {
        let travels = url.is_some_and(token_may_travel_to);
        let token = match auth {
            PushAuth::Token(t) if travels => Some(t.clone()),
            PushAuth::Provider(p) if travels => {
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
            self.env_config = self.header_resets();
        }
        // Give up on a stalled transfer instead of hanging the pipeline.
        self.config
            .push(("http.lowSpeedLimit".into(), "1000".into()));
        self.config.push(("http.lowSpeedTime".into(), "60".into()));
        Ok(self)
    }

    pub(crate) fn command<S: AsRef<OsStr>>(&self, args: &[S]) -> Command {
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
        if !self.env_config.is_empty() {
            // Entries already in the environment keep their places; ours come after them.
            let base: usize = std::env::var("GIT_CONFIG_COUNT")
                .ok()
                .and_then(|n| n.trim().parse().ok())
                .unwrap_or(0);
            for (i, (k, v)) in self.env_config.iter().enumerate() {
                cmd.env(format!("GIT_CONFIG_KEY_{}", base + i), k);
                cmd.env(format!("GIT_CONFIG_VALUE_{}", base + i), v);
            }
            cmd.env(
                "GIT_CONFIG_COUNT",
                (base + self.env_config.len()).to_string(),
            );
        }
        cmd
    }

    /// The configured `http[.<url>].extraheader` entries (every scope, includes followed, as git
    /// itself reads them here), in order.
    fn extra_headers(&self) -> Vec<(String, String)> {
        let mut cmd = Command::new("git");
        cmd.args(["config", "-z", "--get-regexp", r"^http\..*extraheader$"])
            .current_dir(self.dir)
            .stdin(Stdio::null())
            .stderr(Stdio::null());
        for var in REPO_VARS {
            cmd.env_remove(var);
        }
        // Exit status 1: no such key.
        let Ok(out) = crate::process::output_blocking(&mut cmd) else {
            return Vec::new();
        };
        parse_config_z(&out.stdout)
    }

    /// Command-scope entries that empty every configured key holding an Authorization header (an
    /// empty value resets git's header list for that key) and give back the key's other headers.
    fn header_resets(&self) -> Vec<(String, String)> {
        let headers = self.extra_headers();
        let mut keys: Vec<&str> = Vec::new();
        for (k, v) in &headers {
            if is_authorization(v) && !keys.contains(&k.as_str()) {
                keys.push(k);
            }
        }
        if keys.is_empty() {
            return Vec::new();
        }
        if !HEADERS_REPORTED.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                "git: ignoring the Authorization header persisted in the git configuration ({}), \
                 as actions/checkout leaves it unless `persist-credentials: false`: supervisor's \
                 push and fetch use its own token, so the push can start CI",
                keys.join(", ")
            );
        }
        let mut resets = Vec::new();
        for key in keys {
            resets.push((key.to_string(), String::new()));
            for (k, v) in &headers {
                if k == key && !v.is_empty() && !is_authorization(v) {
                    resets.push((k.clone(), v.clone()));
                }
            }
        }
        resets
    }

    /// Run git to completion; stdout on success, an error with git's message otherwise.
    pub(crate) fn run<S: AsRef<OsStr>>(&self, args: &[S]) -> Result<String, WorkspaceError> {
        let shown: Vec<_> = args.iter().map(|a| a.as_ref().to_string_lossy()).collect();
        let shown = format!("git {}", shown.join(" "));
        // Its own process group, registered, killed when the run's stop is asked for.
        let out = crate::process::output_blocking(&mut self.command(args)).map_err(|e| {
            WorkspaceError::GitCommand {
                command: shown.clone(),
                detail: if e.kind() == std::io::ErrorKind::Interrupted {
                    e.to_string()
                } else {
                    format!("cannot run git: {e}; is git installed?")
                },
            }
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

/// Whether a token may be sent to `url`: HTTPS anywhere, plain HTTP only to the loopback.
fn token_may_travel_to(url: &str) -> bool {
    if url.starts_with("https://") {
        return true;
    }
    let Some(rest) = url.strip_prefix("http://") else {
        return false;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host_port = authority.rsplit('@').next().unwrap_or_default();
    let host = match host_port.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host_port.split(':').next().unwrap_or_default(),
    };
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// An `extraheader` value that authenticates: `AUTHORIZATION: basic …`, `Authorization: Bearer …`.
fn is_authorization(header: &str) -> bool {
    header
        .split_once(':')
        .is_some_and(|(name, _)| name.trim().eq_ignore_ascii_case("authorization"))
}

/// `git config -z --get-regexp` output: `key\nvalue\0` per entry (`key\0` for a key without value).
fn parse_config_z(out: &[u8]) -> Vec<(String, String)> {
    String::from_utf8_lossy(out)
        .split('\0')
        .filter(|e| !e.is_empty())
        .map(|e| match e.split_once('\n') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None => (e.to_string(), String::new()),
        })
        .collect()
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

#[cfg(test)]
mod header_tests {
    use super::*;

    fn git_in(dir: &Path, args: &[&str]) {
        let ok = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .status()
            .unwrap()
            .success();
        assert!(ok, "git {args:?}");
    }

    #[test]
    fn tokens_travel_over_https_or_to_the_loopback_only() {
        for (url, ok) in [
            ("https://github.com/o/r.git", true),
            ("http://127.0.0.1:8080/r.git", true),
            ("http://localhost/r.git", true),
            ("http://x:y@127.0.0.2:1/r", true),
            ("http://[::1]:3000/r.git", true),
            ("http://github.com/o/r.git", false),
            ("http://127.0.0.1.example.com/r.git", false),
            ("http://10.0.0.1/r.git", false),
            ("git@github.com:o/r.git", false),
            ("/tmp/remote.git", false),
        ] {
            assert_eq!(token_may_travel_to(url), ok, "{url}");
        }
    }

    #[test]
    fn authorization_headers_are_recognised_by_name() {
        assert!(is_authorization("AUTHORIZATION: basic eC1hY2Nlc3M="));
        assert!(is_authorization(" authorization : Bearer t"));
        assert!(!is_authorization("X-Authorization-Hint: no"));
        assert!(!is_authorization("X-Custom: Authorization: basic"));
        assert!(!is_authorization("no colon"));
    }

    #[test]
    fn config_z_output_is_split_into_entries() {
        assert_eq!(
            parse_config_z(
                b"http.https://github.com/.extraheader\nAUTHORIZATION: basic a\0http.extraheader\0"
            ),
            [
                (
                    "http.https://github.com/.extraheader".to_string(),
                    "AUTHORIZATION: basic a".to_string()
                ),
                ("http.extraheader".to_string(), String::new()),
            ]
        );
        assert!(parse_config_z(b"").is_empty());
    }

    /// Both ways actions/checkout persists the header: in `.git/config` (v4) and in a file included
    /// for the repository and its worktrees (v6 and later). Other headers are kept.
    #[test]
    fn persisted_authorization_headers_are_reset_and_other_headers_kept() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        std::fs::create_dir(&repo).unwrap();
        git_in(&repo, &["init", "--quiet"]);
        let gitdir = repo.join(".git").display().to_string();
        let included = dir.path().join("git-credentials-1.config");
        std::fs::write(
            &included,
            "[http \"https://github.com/\"]\n\textraheader = AUTHORIZATION: basic djY=\n",
        )
        .unwrap();
        git_in(
            &repo,
            &[
                "config",
                &format!("includeIf.gitdir:{gitdir}.path"),
                &included.display().to_string(),
            ],
        );
        git_in(
            &repo,
            &[
                "config",
                "--add",
                "http.https://github.com/o/r.extraheader",
                "X-Trace: 1",
            ],
        );
        git_in(
            &repo,
            &[
                "config",
                "--add",
                "http.https://github.com/o/r.extraheader",
                "Authorization: basic djQ=",
            ],
        );

        let auth = PushAuth::Token("ghs_supervisor".into());
        let g = Git::new(&repo, &[])
            .with_auth(&auth, Some("https://github.com/o/r.git"))
            .unwrap();
        assert_eq!(
            g.env_config,
            [
                (
                    "http.https://github.com/.extraheader".to_string(),
                    String::new()
                ),
                (
                    "http.https://github.com/o/r.extraheader".to_string(),
                    String::new()
                ),
                (
                    "http.https://github.com/o/r.extraheader".to_string(),
                    "X-Trace: 1".to_string()
                ),
            ]
        );
        let envs: Vec<(String, String)> = g
            .command(&["push"])
            .get_envs()
            .filter_map(|(k, v)| {
                Some((
                    k.to_string_lossy().into_owned(),
                    v?.to_string_lossy().into_owned(),
                ))
            })
            .collect();
        assert!(
            envs.iter()
                .any(|(k, v)| k == "GIT_CONFIG_COUNT" && v.parse::<usize>().unwrap() >= 3)
        );
        assert!(
            g.command(&["push"])
                .get_args()
                .all(|a| !a.to_string_lossy().contains("djY=")),
            "no header value travels in arguments"
        );

        // git reads the resets last, in the command scope (an empty value clears the header list
        // there; what a server receives is checked end to end in tests/action.rs).
        let out = g
            .command(&[
                "config",
                "--show-scope",
                "--get-all",
                "http.https://github.com/o/r.extraheader",
            ])
            .output()
            .unwrap();
        let seen = String::from_utf8_lossy(&out.stdout);
        assert!(seen.ends_with("command\t\ncommand\tX-Trace: 1\n"), "{seen}");

        // Without a token of ours the repository's own credentials are left alone.
        let g = Git::new(&repo, &[])
            .with_auth(&PushAuth::None, Some("https://github.com/o/r.git"))
            .unwrap();
        assert!(g.env_config.is_empty());
    }
}
