//! Credentials: a token from the environment or the gh CLI, or a GitHub App.
//!
//! Order: a GitHub App when `SUPERVISOR_APP_ID` is set (the option GitHub Actions users need, since the
//! Actions `GITHUB_TOKEN` cannot reach Projects v2), then `GH_TOKEN`, then `GITHUB_TOKEN`, then
//! `gh auth token` when the gh CLI is installed. Secrets never appear in `Debug` or `Display` output.

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use super::error::GitHubError;

/// Environment variable naming the GitHub App's id.
pub const APP_ID_ENV: &str = "SUPERVISOR_APP_ID";
/// Environment variable holding the App's private key (PEM text; `\n` escapes are accepted).
pub const APP_KEY_ENV: &str = "SUPERVISOR_APP_PRIVATE_KEY";
/// Environment variable naming a file holding the App's private key.
pub const APP_KEY_PATH_ENV: &str = "SUPERVISOR_APP_PRIVATE_KEY_PATH";
/// Optional: the installation to use; found from the repository when absent.
pub const APP_INSTALLATION_ENV: &str = "SUPERVISOR_APP_INSTALLATION_ID";
pub use crate::config::API_URL_ENV;
/// Where the public API lives.
pub const DEFAULT_API_URL: &str = "https://api.github.com";

/// Where a token came from, for messages (never the token itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenSource {
    /// The named environment variable.
    Env(&'static str),
    /// `gh auth token`.
    GhCli,
    /// An installation token minted for a GitHub App.
    App,
    /// Given in code.
    Explicit,
}

impl fmt::Display for TokenSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenSource::Env(var) => write!(f, "${var}"),
            TokenSource::GhCli => f.write_str("`gh auth token`"),
            TokenSource::App => f.write_str("GitHub App installation"),
            TokenSource::Explicit => f.write_str("configuration"),
        }
    }
}

/// A GitHub token. Its text is only reachable through [`Token::expose`].
#[derive(Clone, PartialEq, Eq)]
pub struct Token {
    secret: String,
    source: TokenSource,
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Token(<redacted> from {})", self.source)
    }
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted token>")
    }
}

impl Token {
    /// A token given in code. Surrounding whitespace is trimmed; empty or multi-word text is refused.
    pub fn new(text: impl Into<String>) -> Result<Token, GitHubError> {
        Token::with_source(text.into(), TokenSource::Explicit)
    }

    fn with_source(text: String, source: TokenSource) -> Result<Token, GitHubError> {
        let secret = text.trim().to_string();
        if secret.is_empty() {
            return Err(GitHubError::Config(format!(
                "the token from {source} is empty"
            )));
        }
        if !secret.chars().all(|c| c.is_ascii_graphic()) {
            return Err(GitHubError::Config(format!(
                "the token from {source} contains spaces or non-ASCII characters: paste only the token"
            )));
        }
        Ok(Token { secret, source })
    }

    /// The token text, for an `Authorization` header or a git credential. Never log it.
    pub fn expose(&self) -> &str {
        &self.secret
    }

    pub fn source(&self) -> TokenSource {
        self.source
    }

    pub(crate) fn relabel(mut self, source: TokenSource) -> Token {
        self.source = source;
        self
    }

    /// `GH_TOKEN`, then `GITHUB_TOKEN`, then `gh auth token` when gh is on PATH. `Ok(None)` when
    /// none gives a token; an error when a variable is set to something that is not a token.
    pub(crate) fn discover(
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<Token>, GitHubError> {
        for var in ["GH_TOKEN", "GITHUB_TOKEN"] {
            if let Some(v) = env(var).filter(|v| !v.trim().is_empty()) {
                return Token::with_source(v, TokenSource::Env(var)).map(Some);
            }
        }
        let Some(gh) = find_on_path(env, "gh") else {
            return Ok(None);
        };
        let host = env(API_URL_ENV).and_then(|u| enterprise_host(&u));
        Ok(gh_auth_token(&gh, host.as_deref())
            .and_then(|t| Token::with_source(t, TokenSource::GhCli).ok()))
    }
}

/// The host to ask gh about when the API is not github.com's.
fn enterprise_host(api_url: &str) -> Option<String> {
    let host = url::Url::parse(api_url)
        .ok()?
        .host_str()?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase();
    (!host.is_empty() && host != "api.github.com" && host != "github.com").then_some(host)
}

fn find_on_path(env: &dyn Fn(&str) -> Option<String>, program: &str) -> Option<PathBuf> {
    let path = env("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// Runs `gh auth token`; `None` when gh is not logged in, fails or takes more than 10 s.
fn gh_auth_token(gh: &Path, host: Option<&str>) -> Option<String> {
    let mut cmd = Command::new(gh);
    cmd.args(["auth", "token"]);
    if let Some(host) = host {
        cmd.args(["--hostname", host]);
    }
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => break,
            Ok(Some(_)) | Err(_) => return None,
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
            // A start-up helper waiting on a child process; no async runtime is involved here.
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
    let mut out = String::new();
    use std::io::Read;
    child.stdout.take()?.read_to_string(&mut out).ok()?;
    let token = out.trim().to_string();
    (!token.is_empty()).then_some(token)
}

/// A GitHub App: its id and private key, and optionally which installation to use.
#[derive(Clone)]
pub struct AppCredentials {
    pub(crate) app_id: u64,
    private_key_pem: String,
    pub(crate) installation_id: Option<u64>,
}

impl fmt::Debug for AppCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AppCredentials")
            .field("app_id", &self.app_id)
            .field("private_key_pem", &"<redacted>")
            .field("installation_id", &self.installation_id)
            .finish()
    }
}

impl AppCredentials {
    /// App credentials from an id and an RSA private key in PEM form (checked here).
    pub fn new(
        app_id: u64,
        private_key_pem: impl Into<String>,
        installation_id: Option<u64>,
    ) -> Result<AppCredentials, GitHubError> {
        let pem = private_key_pem.into().replace("\\n", "\n");
        octocrab::jsonwebtoken::EncodingKey::from_rsa_pem(pem.as_bytes()).map_err(|_| {
            GitHubError::Config(
                "the GitHub App private key is not an RSA private key in PEM form: use the .pem file GitHub generated for the App".into(),
            )
        })?;
        Ok(AppCredentials {
            app_id,
            private_key_pem: pem,
            installation_id,
        })
    }

    pub(crate) fn encoding_key(&self) -> Result<octocrab::jsonwebtoken::EncodingKey, GitHubError> {
        octocrab::jsonwebtoken::EncodingKey::from_rsa_pem(self.private_key_pem.as_bytes())
            .map_err(|_| GitHubError::Config("the GitHub App private key is not valid PEM".into()))
    }

    /// `SUPERVISOR_APP_ID` with `SUPERVISOR_APP_PRIVATE_KEY` or `SUPERVISOR_APP_PRIVATE_KEY_PATH`, and
    /// optionally `SUPERVISOR_APP_INSTALLATION_ID`. `Ok(None)` when no App is configured.
    pub(crate) fn from_env(
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<AppCredentials>, GitHubError> {
        let get = |k: &str| env(k).filter(|v| !v.trim().is_empty());
        let id = get(APP_ID_ENV);
        let key = get(APP_KEY_ENV);
        let key_path = get(APP_KEY_PATH_ENV);
        let Some(id) = id else {
            if key.is_some() || key_path.is_some() {
                return Err(GitHubError::Config(format!(
                    "a GitHub App private key is set but {APP_ID_ENV} is not: set it to the App's numeric id"
                )));
            }
            return Ok(None);
        };
        let app_id: u64 = id.trim().parse().map_err(|_| {
            GitHubError::Config(format!(
                "{APP_ID_ENV} must be the App's numeric id, not `{}`",
                id.trim()
            ))
        })?;
        let pem = match (key, key_path) {
            (Some(pem), _) => pem,
            (None, Some(path)) => std::fs::read_to_string(path.trim()).map_err(|e| {
                GitHubError::Config(format!(
                    "cannot read {APP_KEY_PATH_ENV} ({}): {e}",
                    path.trim()
                ))
            })?,
            (None, None) => {
                return Err(GitHubError::Config(format!(
                    "{APP_ID_ENV} is set but neither {APP_KEY_ENV} nor {APP_KEY_PATH_ENV}: give the App's private key"
                )));
            }
        };
        let installation_id = match get(APP_INSTALLATION_ENV) {
            None => None,
            Some(v) => Some(v.trim().parse().map_err(|_| {
                GitHubError::Config(format!("{APP_INSTALLATION_ENV} must be a number"))
            })?),
        };
        AppCredentials::new(app_id, pem, installation_id).map(Some)
    }
}

/// How the client authenticates.
#[derive(Debug, Clone, Default)]
pub enum Credentials {
    /// A GitHub App; installation tokens are minted and refreshed as needed.
    App(AppCredentials),
    Token(Token),
    /// No credentials: public data only.
    #[default]
    Anonymous,
}

impl Credentials {
    /// A GitHub App from the environment, else a token ([`Token::discover`]), else anonymous.
    pub(crate) fn discover(
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Credentials, GitHubError> {
        if let Some(app) = AppCredentials::from_env(env)? {
            return Ok(Credentials::App(app));
        }
        Ok(match Token::discover(env)? {
            Some(t) => Credentials::Token(t),
            None => Credentials::Anonymous,
        })
    }
}

/// Tokens for git over HTTPS, asked for before each push or fetch. A token given in the environment
/// is handed out as it is; a GitHub App's installation token lives an hour, so a new one is minted
/// whenever the current one is near its end: with less than [`GitCredentials::margin`] of its life
/// left (five minutes, or half its lifetime when that is shorter). Cheap to clone; clones share
/// the current token.
#[derive(Clone)]
pub struct GitCredentials {
    kind: Arc<CredentialKind>,
}

enum CredentialKind {
    Fixed(Option<Token>),
    App {
        api_url: String,
        app: AppCredentials,
        installation_id: u64,
        timeout: Duration,
        current: Mutex<Option<Minted>>,
    },
}

/// An installation token and its life.
#[derive(Clone)]
struct Minted {
    token: Token,
    minted_at: DateTime<Utc>,
    expires_at: DateTime<Utc>,
}

impl fmt::Debug for GitCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind.as_ref() {
            CredentialKind::Fixed(t) => f.debug_tuple("GitCredentials::Fixed").field(t).finish(),
            CredentialKind::App {
                installation_id, ..
            } => write!(f, "GitCredentials::App(installation {installation_id})"),
        }
    }
}

impl GitCredentials {
    /// Always `token` (or none).
    pub fn fixed(token: Option<Token>) -> GitCredentials {
        GitCredentials {
            kind: Arc::new(CredentialKind::Fixed(token)),
        }
    }

    /// Installation tokens of `app` on installation `installation_id`, minted at `api_url`.
    pub(crate) fn app(
        api_url: &str,
        app: AppCredentials,
        installation_id: u64,
        timeout: Duration,
    ) -> GitCredentials {
        GitCredentials {
            kind: Arc::new(CredentialKind::App {
                api_url: api_url.trim_end_matches('/').to_string(),
                app,
                installation_id,
                timeout,
                current: Mutex::new(None),
            }),
        }
    }

    /// The longest a token may have left before it is replaced, for a token that lives `life`.
    pub(crate) fn margin(life: Duration) -> Duration {
        Duration::from_secs(300).min(life / 2)
    }

    /// The token to use now, minting a fresh installation token when the current one is near its
    /// end. It blocks while minting (a request to GitHub on a thread of its own), so it can be
    /// called from synchronous git code on any runtime.
    pub fn token(&self) -> Result<Option<Token>, GitHubError> {
        let CredentialKind::App {
            api_url,
            app,
            installation_id,
            timeout,
            current,
        } = self.kind.as_ref()
        else {
            let CredentialKind::Fixed(t) = self.kind.as_ref() else {
                unreachable!("two kinds")
            };
            return Ok(t.clone());
        };
        let mut current = current.lock().unwrap_or_else(|p| p.into_inner());
        let now = Utc::now();
        if let Some(m) = current.as_ref() {
            let life = (m.expires_at - m.minted_at).to_std().unwrap_or_default();
            let left = (m.expires_at - now).to_std().unwrap_or_default();
            if left > GitCredentials::margin(life) {
                return Ok(Some(m.token.clone()));
            }
        }
        let minted = mint_installation_token(api_url, app, *installation_id, *timeout)?;
        tracing::debug!(
            expires_at = %minted.expires_at,
            "minted a GitHub App installation token for git"
        );
        let token = minted.token.clone();
        *current = Some(minted);
        Ok(Some(token))
    }
}

/// `POST /app/installations/{id}/access_tokens` with the App's JWT, on a thread with its own
/// runtime so that the caller may be synchronous code inside any async runtime.
fn mint_installation_token(
    api_url: &str,
    app: &AppCredentials,
    installation_id: u64,
    timeout: Duration,
) -> Result<Minted, GitHubError> {
    #[derive(serde::Deserialize)]
    struct Answer {
        token: String,
        #[serde(default)]
        expires_at: Option<DateTime<Utc>>,
    }
    let fail = |detail: String| GitHubError::AppAuth {
        detail: format!("cannot mint an installation token for git: {detail}"),
    };
    let key = app.encoding_key()?;
    let route = format!("/app/installations/{installation_id}/access_tokens");
    let minted_at = Utc::now();
    let answer = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| fail(format!("no runtime: {e}")))?;
                runtime.block_on(async {
                    let http = super::retry::http_client(api_url, timeout)
                        .map_err(|e| fail(e.to_string()))?;
                    let client = octocrab::Octocrab::builder()
                        .base_uri(api_url)
                        .map_err(|_| fail(format!("`{api_url}` is not a URL")))?
                        .add_retry_config(octocrab::service::middleware::retry::RetryConfig::None)
                        .app(octocrab::models::AppId(app.app_id), key)
                        .build_with_reqwest(http)
                        .map_err(|e| fail(e.to_string()))?;
                    let answer = tokio::time::timeout(
                        timeout,
                        client.post::<_, Answer>(route.as_str(), None::<&()>),
                    )
                    .await
                    .map_err(|_| fail(format!("no answer within {} s", timeout.as_secs())))?;
                    answer.map_err(|e| match e {
                        octocrab::Error::GitHub { source, .. } => fail(format!(
                            "{} {}",
                            source.status_code.as_u16(),
                            source.message
                        )),
                        other => fail(other.to_string()),
                    })
                })
            })
            .join()
            .map_err(|_| fail("the minting thread panicked".into()))?
    })?;
    let token = Token::new(answer.token).map(|t| t.relabel(TokenSource::App))?;
    Ok(Minted {
        token,
        minted_at,
        // Without an expiry, assume GitHub's hour.
        expires_at: answer
            .expires_at
            .unwrap_or(minted_at + chrono::Duration::hours(1)),
    })
}

/// The API base URL from `GITHUB_API_URL`, else github.com's.
pub fn api_url_from_env(env: &dyn Fn(&str) -> Option<String>) -> String {
    env(API_URL_ENV)
        .map(|u| u.trim().trim_end_matches('/').to_string())
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| DEFAULT_API_URL.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn token_is_redacted() {
        let t = Token::new("ghp_secretvalue123").unwrap();
        assert!(!format!("{t:?}").contains("secretvalue"));
        assert!(!format!("{t}").contains("secretvalue"));
        assert_eq!(t.expose(), "ghp_secretvalue123");
    }

    #[test]
    fn token_rejects_junk() {
        assert!(Token::new("   ").is_err());
        assert!(Token::new("two words").is_err());
        assert!(Token::new("line\nbreak").is_err());
        assert_eq!(Token::new(" abc \n").unwrap().expose(), "abc");
    }

    #[test]
    fn discovery_order() {
        let env = env_of(&[("GH_TOKEN", "first"), ("GITHUB_TOKEN", "second")]);
        let t = Token::discover(&env).unwrap().unwrap();
        assert_eq!(t.expose(), "first");
        assert_eq!(t.source(), TokenSource::Env("GH_TOKEN"));
        let env = env_of(&[("GH_TOKEN", " "), ("GITHUB_TOKEN", "second")]);
        assert_eq!(Token::discover(&env).unwrap().unwrap().expose(), "second");
        // No PATH: gh cannot be found, so nothing.
        let env = env_of(&[]);
        assert!(Token::discover(&env).unwrap().is_none());
    }

    #[test]
    fn gh_cli_is_asked_for_its_token() {
        let dir = tempfile::tempdir().unwrap();
        let gh = dir.path().join("gh");
        std::fs::write(
            &gh,
            "#!/bin/sh\n[ \"$1 $2\" = \"auth token\" ] && echo gho_fromcli && exit 0\nexit 1\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&gh, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = dir.path().display().to_string();
        let env = move |k: &str| (k == "PATH").then(|| path.clone());
        let t = Token::discover(&env).unwrap().unwrap();
        assert_eq!(t.expose(), "gho_fromcli");
        assert_eq!(t.source(), TokenSource::GhCli);
    }

    #[test]
    fn enterprise_hosts() {
        assert_eq!(enterprise_host("https://api.github.com"), None);
        assert_eq!(
            enterprise_host("https://ghe.example.com/api/v3"),
            Some("ghe.example.com".into())
        );
        assert_eq!(
            enterprise_host("http://127.0.0.1:8080"),
            Some("127.0.0.1".into())
        );
    }

    #[test]
    fn app_env_errors_name_the_variable() {
        let env = env_of(&[("SUPERVISOR_APP_ID", "12")]);
        let e = AppCredentials::from_env(&env).unwrap_err().to_string();
        assert!(e.contains(APP_KEY_ENV), "{e}");
        let env = env_of(&[("SUPERVISOR_APP_ID", "x"), (APP_KEY_ENV, "k")]);
        assert!(
            AppCredentials::from_env(&env)
                .unwrap_err()
                .to_string()
                .contains(APP_ID_ENV)
        );
        let env = env_of(&[("SUPERVISOR_APP_ID", "1"), (APP_KEY_ENV, "not a pem")]);
        assert!(
            AppCredentials::from_env(&env)
                .unwrap_err()
                .to_string()
                .contains("PEM")
        );
        let env = env_of(&[(APP_KEY_ENV, "k")]);
        assert!(AppCredentials::from_env(&env).is_err());
        assert!(AppCredentials::from_env(&env_of(&[])).unwrap().is_none());
    }

    #[test]
    fn fixed_credentials_hand_out_their_token() {
        let t = Token::new("ghp_fixed123").unwrap();
        let c = GitCredentials::fixed(Some(t.clone()));
        assert_eq!(c.token().unwrap(), Some(t));
        assert!(!format!("{c:?}").contains("ghp_fixed123"));
        assert_eq!(GitCredentials::fixed(None).token().unwrap(), None);
        assert_eq!(
            GitCredentials::margin(Duration::from_secs(3600)),
            Duration::from_secs(300)
        );
        assert_eq!(
            GitCredentials::margin(Duration::from_secs(4)),
            Duration::from_secs(2)
        );
    }

    #[test]
    fn api_url() {
        assert_eq!(api_url_from_env(&env_of(&[])), DEFAULT_API_URL);
        assert_eq!(
            api_url_from_env(&env_of(&[(API_URL_ENV, "http://127.0.0.1:9/")])),
            "http://127.0.0.1:9"
        );
    }
}
