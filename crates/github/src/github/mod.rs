//! The only code that speaks HTTP to GitHub.
//!
//! REST goes through octocrab's raw request methods, GraphQL (Projects v2) through graphql_client
//! operations compiled against GitHub's vendored schema (`graphql/`). Both pass through one transport
//! (`retry.rs`) that owns retries, rate limits, mutation spacing and timeouts. Writes are idempotent:
//! comments carry a hidden [`Marker`] and are not repeated; pull requests are looked up before
//! one is opened.
//!
//! Requests per operation (the pipeline budgets about 25 for a whole run): `get_issue` 1,
//! `list_comments` 1 per 100 comments, `post_once` 1 with `known` comments (else the list first),
//! `board_item` 1, `move_card` 1, `add_to_board` 2, `find_or_create_pr` 1–2, `check_runs` 1
//! (a 304 costs no quota), `open_blockers` 1 plus 1 per body reference.

mod actions;
mod auth;
mod board;
mod editors;
mod error;
pub mod graphql;
mod issues;
mod marker;
mod poll;
mod pulls;
mod references;
mod retry;
mod reviews;
mod setup;
mod types;

use std::sync::Arc;

pub use auth::{
    API_URL_ENV, APP_ID_ENV, APP_INSTALLATION_ENV, APP_KEY_ENV, APP_KEY_PATH_ENV, AppCredentials,
    Credentials, DEFAULT_API_URL, GitCredentials, Token, TokenSource, api_url_from_env,
};
pub use editors::{CommentEdit, Editors, IssueContext, ParentIssue, TitleRename};
pub use error::{GitHubError, PROJECT_SCOPE_HINT};
pub use marker::{Marker, MarkerKind};
pub use poll::{BoardPoll, Card, FoundCard, RateLimit};
pub use pulls::{MergeError, MergeMethod, MergeResult, MergeablePoll};
pub use references::body_blockers;
pub use retry::RetryPolicy;
pub use retry::http_client;
pub use reviews::{
    ConversationComment, FEEDBACK_PAGE, Feedback, PullState, Review, ReviewComment, ReviewState,
    ReviewThread,
};
pub use setup::{AccountKind, NewBoard, RepositoryInfo, Viewer};
pub use types::{
    Blocker, BlockerKind, BoardItem, BoardRef, CheckRun, CloseReason, ColumnOption, Comment,
    Conditional, Issue, IssueState, NewPullRequest, Posted, PullRequest,
};

use crate::config::RepoSlug;
use retry::Transport;

/// How to reach GitHub.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// `https://api.github.com` unless `GITHUB_API_URL` says otherwise (GHES, the sandbox).
    pub(crate) api_url: String,
    pub token: Option<Token>,
    /// A GitHub App; takes precedence over `token`.
    pub app: Option<AppCredentials>,
    pub(crate) repo: RepoSlug,
    pub retry: RetryPolicy,
}

impl ClientConfig {
    /// A token-authenticated client for `repo` at `api_url`, with the retry policy that suits the URL.
    pub fn new(api_url: impl Into<String>, token: Option<Token>, repo: RepoSlug) -> ClientConfig {
        let api_url = api_url.into();
        ClientConfig {
            retry: RetryPolicy::for_api_url(&api_url),
            api_url,
            token,
            app: None,
            repo,
        }
    }

    /// `GITHUB_API_URL` and [`Credentials::discover`].
    pub fn from_env(
        repo: RepoSlug,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ClientConfig, GitHubError> {
        let mut cfg = ClientConfig::new(api_url_from_env(env), None, repo);
        match Credentials::discover(env)? {
            Credentials::App(app) => cfg.app = Some(app),
            Credentials::Token(t) => cfg.token = Some(t),
            Credentials::Anonymous => {}
        }
        Ok(cfg)
    }

    /// Whether any credentials are configured.
    pub fn has_credentials(&self) -> bool {
        self.token.is_some() || self.app.is_some()
    }
}

/// A GitHub client for one repository. Cheap to clone.
#[derive(Clone)]
pub struct GitHub {
    t: Arc<Transport>,
    /// The configured token, handed out by [`GitHub::access_token`] when no App is used.
    token: Option<Token>,
    /// The GitHub App, when one is used: git needs its installation tokens.
    app: Option<AppCredentials>,
    /// The login this client posts as, once asked ([`GitHub::viewer_login`]).
    viewer: Arc<tokio::sync::OnceCell<String>>,
    /// The ids of the boards cards were added to, once read.
    board_ids: Arc<board::BoardIds>,
}

impl std::fmt::Debug for GitHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitHub")
            .field("api_url", &self.t.base)
            .field("repo", &self.t.repo)
            .finish_non_exhaustive()
    }
}

impl GitHub {
    pub fn new(cfg: ClientConfig) -> Result<GitHub, GitHubError> {
        let t = Transport::new(
            &cfg.api_url,
            cfg.token.as_ref().map(Token::expose),
            cfg.app.as_ref(),
            cfg.repo,
            cfg.retry,
        )?;
        Ok(GitHub {
            t: Arc::new(t),
            token: cfg.token,
            app: cfg.app,
            viewer: Arc::new(tokio::sync::OnceCell::new()),
            board_ids: Arc::default(),
        })
    }

    /// The login comments posted by this client are authored by: the token's user (`GET /user`),
    /// or for a GitHub App its bot, `<app-slug>[bot]` (`GET /app` with the App's JWT; installation
    /// tokens cannot read `/user`). Asked once per client (and its clones), then remembered. A
    /// marker on a comment by anyone else is not supervisor's.
    pub async fn viewer_login(&self) -> Result<String, GitHubError> {
        #[derive(serde::Deserialize)]
        struct User {
            login: String,
        }
        #[derive(serde::Deserialize)]
        struct App {
            slug: String,
        }
        self.viewer
            .get_or_try_init(|| async {
                let app = self
                    .t
                    .send_as_app(&retry::ApiRequest::get("/app".into(), "/app"))
                    .await?;
                let login = match app {
                    Some(resp) => format!("{}[bot]", resp.json::<App>()?.slug),
                    None => match self
                        .t
                        .send(&retry::ApiRequest::get("/user".into(), "/user"))
                        .await
                    {
                        Ok(resp) => resp.json::<User>()?.login,
                        // An installation token given as a token (the Actions `GITHUB_TOKEN`, one
                        // made by actions/create-github-app-token) cannot read /user; GraphQL's
                        // `viewer` names its bot.
                        Err(e) if e.status() == Some(403) => self.graphql_viewer().await?,
                        Err(e) => return Err(e),
                    },
                };
                if login.trim().is_empty() || login == "[bot]" {
                    return Err(GitHubError::InvalidResponse {
                        route: "GET /user".into(),
                        detail: "GitHub named no login for the token".into(),
                    });
                }
                tracing::debug!(login = %login, "supervisor posts as");
                Ok(login)
            })
            .await
            .cloned()
    }

    pub(crate) fn repo(&self) -> &RepoSlug {
        &self.t.repo
    }

    pub(crate) fn api_url(&self) -> &str {
        &self.t.base
    }

    /// HTTP requests sent so far by this client and its clones (each retry counts).
    pub fn requests_sent(&self) -> u64 {
        self.t.requests_sent()
    }

    /// A token for git over HTTPS: the configured token, or a fresh App installation token.
    pub async fn access_token(&self) -> Result<Option<Token>, GitHubError> {
        if !self.t.is_app() {
            return Ok(self.token.clone());
        }
        match self.t.app_token().await? {
            Some(text) => Token::new(text)
                .map(|t| t.relabel(TokenSource::App))
                .map(Some),
            None => Ok(None),
        }
    }

    /// Credentials for git pushes and fetches over HTTPS: the configured token, or for a GitHub App
    /// installation tokens minted afresh whenever the current one is near its end (they live an
    /// hour, longer runs push later than that). Finds the App's installation when not yet known.
    pub async fn git_credentials(&self) -> Result<GitCredentials, GitHubError> {
        let Some(app) = &self.app else {
            return Ok(GitCredentials::fixed(self.token.clone()));
        };
        let installation = self
            .t
            .installation_id()
            .await?
            .ok_or_else(|| GitHubError::AppAuth {
                detail: "the App's installation is unknown: set SUPERVISOR_APP_INSTALLATION_ID"
                    .into(),
            })?;
        Ok(GitCredentials::app(
            &self.t.base,
            app.clone(),
            installation,
            self.t.policy.request_timeout,
        ))
    }

    /// `/repos/{owner}/{repo}` + `rest`.
    fn repo_path(&self, rest: &str) -> String {
        format!("/repos/{}/{}{rest}", self.t.repo.owner, self.t.repo.name)
    }
}

/// GitHub refuses comment and pull-request bodies longer than this many characters.
pub const MAX_BODY_CHARS: usize = 65_536;

/// `text` cut to fit in `max` characters, saying so at the end, when it is longer.
pub(crate) fn fit_body(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    let total = text.chars().count();
    if total <= max {
        return std::borrow::Cow::Borrowed(text);
    }
    let note = format!(
        "\n\n… (cut: {} characters over GitHub's limit of {MAX_BODY_CHARS})",
        total - max
    );
    let keep = max.saturating_sub(note.chars().count());
    let mut out: String = text.chars().take(keep).collect();
    out.push_str(&note);
    std::borrow::Cow::Owned(out)
}

/// Bytes left as they are in a URL path segment or query value: RFC 3986's unreserved characters.
pub const PATH_SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// Percent-encode `s` for a URL path segment or query value.
pub(crate) fn url_encode(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, PATH_SEGMENT).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_bodies_are_cut_to_fit() {
        assert_eq!(fit_body("short", 10), "short");
        let long = "é".repeat(200);
        let cut = fit_body(&long, 100);
        assert_eq!(cut.chars().count(), 100);
        assert!(cut.ends_with("GitHub's limit of 65536)"));
    }

    #[test]
    fn encodes_urls() {
        assert_eq!(url_encode("feature/x y"), "feature%2Fx%20y");
        assert_eq!(url_encode("abc-1.2_~"), "abc-1.2_~");
    }

    #[test]
    fn config_from_env() {
        let repo = RepoSlug::parse("o/r").unwrap();
        let env = |k: &str| match k {
            "GITHUB_API_URL" => Some("http://127.0.0.1:1234/".to_string()),
            "GITHUB_TOKEN" => Some("tok_abc".to_string()),
            _ => None,
        };
        let cfg = ClientConfig::from_env(repo, &env).unwrap();
        assert_eq!(cfg.api_url, "http://127.0.0.1:1234");
        assert_eq!(cfg.retry, RetryPolicy::loopback());
        assert!(cfg.has_credentials());
        assert!(!format!("{cfg:?}").contains("tok_abc"));
    }

    #[test]
    fn bad_urls_are_config_errors() {
        let repo = RepoSlug::parse("o/r").unwrap();
        let e = GitHub::new(ClientConfig::new("ftp://x", None, repo)).unwrap_err();
        assert!(matches!(e, GitHubError::Config(_)), "{e}");
    }
}
