//! The one place that sends requests to GitHub: retries, rate limits, mutation spacing, timeouts.
//!
//! octocrab provides the connection, TLS, the base URL, authentication (tokens, and GitHub App JWTs
//! with installation tokens it refreshes itself). Its own retry layer is switched off
//! (`RetryConfig::None`) and its typed helpers are not used: they hide the status and headers this
//! module needs (`retry-after`, `x-ratelimit-*`, `ETag`, `Link`) and would retry a second time around
//! our retries. Every request, REST or GraphQL, goes through [`Transport::send`], which follows GitHub's
//! guidance:
//!
//! - 5xx answers, timeouts and connection errors are retried with jittered exponential back-off, up to
//!   `max_attempts`. A request that is not safe to repeat (creating a comment or a pull request) is
//!   not resent blindly: GitHub may have applied it before failing, so the caller first looks for
//!   the result ([`Transport::create`]).
//! - 403/429 with `retry-after`: wait that long. With `x-ratelimit-remaining: 0`: wait until
//!   `x-ratelimit-reset`. Other secondary-limit answers: wait `secondary_min_wait` (a minute against
//!   github.com), doubling each time. A 200 GraphQL answer whose error type is `RATE_LIMITED` counts
//!   as the primary limit.
//! - After an answer saying the quota is used up, later requests for the same resource wait for the
//!   reset before being sent.
//! - Any wait longer than `max_wait` is not waited: the request fails at once with
//!   [`GitHubError::RateLimited`], which is resumable.
//! - Mutating requests are sent one at a time, at least `min_mutation_interval` apart.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex as StdMutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeZone, Utc};
use http::{HeaderMap, Method, StatusCode};
use octocrab::Octocrab;
use serde::de::DeserializeOwned;
use tokio::sync::{Mutex, OnceCell};

use super::auth::AppCredentials;
use super::error::GitHubError;
use crate::config::RepoSlug;

/// How patiently requests are retried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Sends of one request, the first included.
    pub max_attempts: u32,
    /// First back-off after a 5xx or network error; doubled each time, with jitter.
    pub base_backoff: Duration,
    /// Longest single wait; a rate limit asking for more fails at once, resumably.
    pub max_wait: Duration,
    /// Spacing of mutating requests: 1 s against github.com per GitHub's guidance, 0 for the sandbox.
    pub min_mutation_interval: Duration,
    /// Limit on one attempt, answer body included.
    pub request_timeout: Duration,
    /// First wait after a secondary rate limit that names no time (GitHub: at least a minute).
    pub secondary_min_wait: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy::github()
    }
}

impl RetryPolicy {
    /// For github.com and GitHub Enterprise Server.
    pub(crate) fn github() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 5,
            base_backoff: Duration::from_secs(1),
            max_wait: Duration::from_secs(10 * 60),
            min_mutation_interval: Duration::from_secs(1),
            request_timeout: Duration::from_secs(30),
            secondary_min_wait: Duration::from_secs(60),
        }
    }

    /// For a server on this machine (the sandbox): quick back-off, no spacing.
    pub(crate) fn loopback() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 5,
            base_backoff: Duration::from_millis(20),
            max_wait: Duration::from_secs(60),
            min_mutation_interval: Duration::ZERO,
            request_timeout: Duration::from_secs(10),
            secondary_min_wait: Duration::from_millis(200),
        }
    }

    /// [`RetryPolicy::loopback`] for 127.0.0.1/localhost URLs, else [`RetryPolicy::github`].
    pub(crate) fn for_api_url(api_url: &str) -> RetryPolicy {
        if is_loopback(api_url) {
            RetryPolicy::loopback()
        } else {
            RetryPolicy::github()
        }
    }

    /// The back-off before attempt `attempt + 1`, jittered to between half and all of
    /// `base_backoff * 2^(attempt-1)`, never above `max_wait`.
    pub(crate) fn backoff(&self, attempt: u32) -> Duration {
        let exp = self
            .base_backoff
            .saturating_mul(1u32 << attempt.saturating_sub(1).min(16));
        let capped = exp.min(self.max_wait);
        capped.mul_f64(0.5 + fastrand::f64() * 0.5)
    }
}

/// Whether `api_url` names this machine (the sandbox, a test server).
pub(crate) fn is_loopback(api_url: &str) -> bool {
    url::Url::parse(api_url).is_ok_and(|u| match u.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    })
}

/// One request to send.
#[derive(Debug, Clone)]
pub(crate) struct ApiRequest {
    pub(crate) method: Method,
    /// Path and query, relative to the API base URL.
    pub(crate) path: String,
    /// Route template for logs and errors: `GET /repos/{owner}/{repo}/issues/{number}`.
    pub(crate) route: String,
    pub(crate) body: Option<serde_json::Value>,
    pub(crate) if_none_match: Option<String>,
    /// `Accept` media type when not `application/vnd.github+json`.
    pub(crate) accept: Option<&'static str>,
    /// Changes state on GitHub (spaced and serialised).
    pub(crate) mutation: bool,
    /// May be resent after a failure that GitHub may have applied (5xx, timeout).
    pub(crate) repeatable: bool,
}

impl ApiRequest {
    pub(crate) fn get(path: String, route: &str) -> ApiRequest {
        ApiRequest {
            method: Method::GET,
            path,
            route: format!("GET {route}"),
            body: None,
            if_none_match: None,
            accept: None,
            mutation: false,
            repeatable: true,
        }
    }

    /// A write. `repeatable` when sending it twice does no harm (PATCH of a body, PUT).
    pub(crate) fn write(
        method: Method,
        path: String,
        route: &str,
        body: serde_json::Value,
        repeatable: bool,
    ) -> ApiRequest {
        ApiRequest {
            route: format!("{method} {route}"),
            method,
            path,
            body: Some(body),
            if_none_match: None,
            accept: None,
            mutation: true,
            repeatable,
        }
    }
}

/// An answer with a 2xx or 304 status.
#[derive(Debug)]
pub(crate) struct ApiResponse {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: String,
    pub(crate) route: String,
}

impl ApiResponse {
    pub(crate) fn json<T: DeserializeOwned>(&self) -> Result<T, GitHubError> {
        serde_json::from_str(&self.body).map_err(|e| GitHubError::InvalidResponse {
            route: self.route.clone(),
            detail: format!("cannot read the JSON answer: {e}"),
        })
    }

    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        header(&self.headers, name)
    }

    /// Path and query of the `Link: <…>; rel="next"` page, relative to the API base `base`;
    /// `Ok(None)` on the last page. A link to another host (a proxy's public address, a
    /// misconfigured GitHub Enterprise Server) is followed on `base`, whose credentials it was
    /// meant for, when its path lies under `base`'s path; otherwise the list cannot be completed
    /// and that is an error, never a silently short list.
    pub(crate) fn next_page(&self, base: &str) -> Result<Option<String>, GitHubError> {
        let Some(link) = self.header("link") else {
            return Ok(None);
        };
        let next = link.split(',').find_map(|part| {
            let (url, params) = part.split_once(';')?;
            params
                .split(';')
                .any(|p| {
                    let p = p.trim().replace(' ', "");
                    p == "rel=\"next\"" || p == "rel=next"
                })
                .then(|| url.trim().trim_start_matches('<').trim_end_matches('>'))
        });
        let Some(next) = next else {
            return Ok(None);
        };
        relative_to(base, next).map(Some).ok_or_else(|| GitHubError::InvalidResponse {
            route: self.route.clone(),
            detail: format!(
                "the next page is at `{next}`, which is not under the API URL `{base}`: the list cannot be read to its end. Set GITHUB_API_URL to the URL GitHub (or the proxy in front of it) calls itself"
            ),
        })
    }
}

fn header<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name)?.to_str().ok().map(str::trim)
}

/// The path and query to request for `link` on the API base `base`. Requests stay relative to the
/// base, so octocrab sends them, with their credentials, to the configured server only: a link on
/// the same server is used as it is; one on another host (a proxy's public name for the same API)
/// is followed on `base` when its path lies under `base`'s path (`/api/v3` of GitHub Enterprise
/// Server); `None` when the link cannot be placed under `base`.
fn relative_to(base: &str, link: &str) -> Option<String> {
    if link.starts_with('/') {
        return Some(link.to_string());
    }
    let base = url::Url::parse(base).ok()?;
    let link = url::Url::parse(link).ok()?;
    if !matches!(link.scheme(), "http" | "https") {
        return None;
    }
    let path_and_query = match link.query() {
        Some(q) => format!("{}?{q}", link.path()),
        None => link.path().to_string(),
    };
    if link.origin() == base.origin() {
        return Some(path_and_query);
    }
    let prefix = base.path().trim_end_matches('/');
    let under = link.path() == prefix
        || link
            .path()
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('/'));
    if !under {
        return None;
    }
    tracing::debug!(
        link = %link,
        "a next-page link names another host: following it on the configured API URL"
    );
    Some(path_and_query)
}

/// How a GitHub error body looks.
#[derive(Debug, Default, serde::Deserialize)]
pub(crate) struct ErrorBody {
    #[serde(default)]
    pub(crate) message: Option<String>,
    #[serde(default)]
    pub(crate) documentation_url: Option<String>,
    #[serde(default)]
    pub(crate) errors: Vec<serde_json::Value>,
}

impl ErrorBody {
    pub(crate) fn parse(body: &str) -> ErrorBody {
        serde_json::from_str(body).unwrap_or_default()
    }

    /// `message` plus the details of `errors` (422 validation failures carry the useful part there).
    pub(crate) fn text(&self) -> String {
        let mut text = self
            .message
            .clone()
            .unwrap_or_else(|| "no message".to_string());
        let details: Vec<String> = self
            .errors
            .iter()
            .map(|e| match e {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Object(o) => {
                    if let Some(m) = o.get("message").and_then(|m| m.as_str()) {
                        m.to_string()
                    } else {
                        let get = |k: &str| o.get(k).and_then(|v| v.as_str()).unwrap_or("");
                        format!("{} {} {}", get("resource"), get("field"), get("code"))
                            .trim()
                            .to_string()
                    }
                }
                other => other.to_string(),
            })
            .filter(|s| !s.is_empty())
            .collect();
        if !details.is_empty() {
            text.push_str(" (");
            text.push_str(&details.join("; "));
            text.push(')');
        }
        text
    }
}

/// Remaining quota of one rate-limit resource (`core`, `graphql`, …).
#[derive(Debug, Clone, Copy)]
struct Quota {
    remaining: u64,
    reset: Option<DateTime<Utc>>,
}

/// Which octocrab client to use.
enum Auth {
    Ready(Octocrab),
    /// An App: the JWT client, and the installation client found on first use.
    App(Box<AppAuth>),
}

struct AppAuth {
    app: Octocrab,
    installation_id: Option<u64>,
    installation: OnceCell<(Octocrab, u64)>,
}

/// The HTTP client under octocrab: reqwest with supervisor's TLS set-up ([`crate::tls`]: the
/// system's roots, read here for an `https` API and never for a plain-HTTP one), `timeout` to
/// connect and between reads, no redirects of its own (octocrab follows them), and the
/// environment's proxy (`HTTPS_PROXY`, `NO_PROXY`) except for a server on this machine.
pub fn http_client(base: &str, timeout: Duration) -> Result<reqwest::Client, GitHubError> {
    let tls = crate::tls::client_config().map_err(GitHubError::Config)?;
    if base.starts_with("https://") {
        // The client is made off the path of its first request (`run` makes it while the agent
        // CLIs are checked): the handshake should not wait for the roots.
        crate::tls::read_roots();
    }
    let mut builder = reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .connect_timeout(timeout)
        .read_timeout(timeout)
        .redirect(reqwest::redirect::Policy::none());
    if is_loopback(base) {
        builder = builder.no_proxy();
    }
    builder.build().map_err(|e| {
        GitHubError::Config(format!("cannot build the GitHub client's HTTP client: {e}"))
    })
}

/// An octocrab client for `base` with our timeouts and without octocrab's retries.
fn build_auth(
    base: &str,
    token: Option<&str>,
    app: Option<&AppCredentials>,
    policy: &RetryPolicy,
) -> Result<Auth, GitHubError> {
    let http = http_client(base, policy.request_timeout)?;
    let builder = Octocrab::builder()
        .base_uri(base)
        .map_err(|_| {
            GitHubError::Config(format!(
                "API URL `{base}` is not a URL (set GITHUB_API_URL to e.g. https://api.github.com)"
            ))
        })?
        .add_retry_config(octocrab::service::middleware::retry::RetryConfig::None);
    let built = match (app, token) {
        (Some(app), _) => builder
            .app(octocrab::models::AppId(app.app_id), app.encoding_key()?)
            .build_with_reqwest(http)
            .map(|client| {
                Auth::App(Box::new(AppAuth {
                    app: client,
                    installation_id: app.installation_id,
                    installation: OnceCell::new(),
                }))
            }),
        (None, Some(token)) => builder
            .personal_token(token.to_string())
            .build_with_reqwest(http)
            .map(Auth::Ready),
        (None, None) => builder.build_with_reqwest(http).map(Auth::Ready),
    };
    built.map_err(|e| GitHubError::Config(format!("cannot build the GitHub client: {e}")))
}

/// Sends requests with the policy above.
pub(crate) struct Transport {
    auth: Auth,
    /// GitHub Enterprise Server's GraphQL endpoint, when it is not under the REST base.
    graphql_auth: Option<Auth>,
    pub(crate) base: String,
    pub(crate) repo: RepoSlug,
    pub(crate) policy: RetryPolicy,
    mutations: Mutex<Option<Instant>>,
    quotas: StdMutex<HashMap<String, Quota>>,
    /// Token text to scrub from error messages, should GitHub ever echo it.
    secret: Option<String>,
    sent: AtomicU64,
}

/// What one attempt came to.
enum Outcome {
    Done(ApiResponse),
    /// Wait this long, then send again; the request was not applied.
    Wait(Duration, GitHubError),
    /// May or may not have been applied.
    Ambiguous(GitHubError),
    Fail(GitHubError),
}

impl Outcome {
    fn into_error(self) -> GitHubError {
        match self {
            Outcome::Done(resp) => GitHubError::InvalidResponse {
                route: resp.route,
                detail: "unexpected success".into(),
            },
            Outcome::Wait(_, e) | Outcome::Ambiguous(e) | Outcome::Fail(e) => e,
        }
    }
}

impl Transport {
    pub(super) fn new(
        base: &str,
        token: Option<&str>,
        app: Option<&AppCredentials>,
        repo: RepoSlug,
        policy: RetryPolicy,
    ) -> Result<Transport, GitHubError> {
        let base = base.trim().trim_end_matches('/').to_string();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(GitHubError::Config(format!(
                "API URL `{base}` must start with https:// (or http:// for a local server)"
            )));
        }
        let auth = build_auth(&base, token, app, &policy)?;
        // GitHub Enterprise Server serves REST under /api/v3 and GraphQL at /api/graphql.
        let graphql_auth = match base.strip_suffix("/v3") {
            Some(api) if api.ends_with("/api") => Some(build_auth(api, token, app, &policy)?),
            _ => None,
        };
        Ok(Transport {
            auth,
            graphql_auth,
            base,
            repo,
            policy,
            mutations: Mutex::new(None),
            quotas: StdMutex::new(HashMap::new()),
            secret: token.map(str::to_string),
            sent: AtomicU64::new(0),
        })
    }

    pub(crate) fn is_app(&self) -> bool {
        matches!(self.auth, Auth::App(_))
    }

    /// Requests sent so far (every attempt counts).
    pub(crate) fn requests_sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    /// The octocrab client for a request (an App's installation client once found).
    async fn client(&self, graphql: bool) -> Result<&Octocrab, GitHubError> {
        let rest = self.ready(&self.auth, None).await?;
        match (&self.graphql_auth, graphql) {
            (Some(g), true) => self.ready(g, installation_of(&self.auth)).await,
            _ => Ok(rest),
        }
    }

    async fn ready<'a>(
        &'a self,
        auth: &'a Auth,
        known_installation: Option<u64>,
    ) -> Result<&'a Octocrab, GitHubError> {
        match auth {
            Auth::Ready(c) => Ok(c),
            Auth::App(a) => {
                let AppAuth {
                    app,
                    installation_id,
                    installation,
                } = a.as_ref();
                let (client, _) = installation
                    .get_or_try_init(|| async {
                        let id = match installation_id.or(known_installation) {
                            Some(id) => id,
                            None => self.repo_installation(app).await?,
                        };
                        let client = app
                            .installation(octocrab::models::InstallationId(id))
                            .map_err(|e| GitHubError::AppAuth {
                                detail: format!("installation {id}: {e}"),
                            })?;
                        Ok::<_, GitHubError>((client, id))
                    })
                    .await?;
                Ok(client)
            }
        }
    }

    /// The App's installation on the repository.
    async fn repo_installation(&self, app: &Octocrab) -> Result<u64, GitHubError> {
        #[derive(serde::Deserialize)]
        struct Installation {
            id: u64,
        }
        let route = "GET /repos/{owner}/{repo}/installation";
        let path = format!("/repos/{}/{}/installation", self.repo.owner, self.repo.name);
        self.sent.fetch_add(1, Ordering::Relaxed);
        crate::metrics::metrics().github_request("core");
        let resp = self
            .attempt(app, &ApiRequest::get(path, route))
            .await
            .map_err(Outcome::into_error)?;
        if !resp.status.is_success() {
            let body = ErrorBody::parse(&resp.body);
            return Err(GitHubError::AppAuth {
                detail: format!(
                    "the App is not installed on {} or its key was refused ({} {}): install it on the repository, or set SUPERVISOR_APP_INSTALLATION_ID",
                    self.repo,
                    resp.status.as_u16(),
                    self.scrub(body.text())
                ),
            });
        }
        Ok(resp.json::<Installation>()?.id)
    }

    /// The App's installation, found on first use (`None` without an App).
    pub(crate) async fn installation_id(&self) -> Result<Option<u64>, GitHubError> {
        if !self.is_app() {
            return Ok(None);
        }
        self.client(false).await?;
        Ok(installation_of(&self.auth))
    }

    /// A fresh installation token of the App (`None` without an App).
    pub(crate) async fn app_token(&self) -> Result<Option<String>, GitHubError> {
        match &self.auth {
            Auth::Ready(_) => Ok(None),
            Auth::App(a) => {
                self.client(false).await?;
                let Some(id) = installation_of(&self.auth) else {
                    return Ok(None);
                };
                let app = &a.app;
                self.sent.fetch_add(1, Ordering::Relaxed);
                let (_, token) = app
                    .installation_and_token(octocrab::models::InstallationId(id))
                    .await
                    .map_err(|e| GitHubError::AppAuth {
                        detail: format!("cannot mint an installation token: {}", short_error(&e)),
                    })?;
                use octocrab::secrecy::ExposeSecret;
                Ok(Some(token.expose_secret().to_string()))
            }
        }
    }

    fn scrub(&self, text: String) -> String {
        match &self.secret {
            Some(s) if s.len() >= 4 && text.contains(s.as_str()) => {
                text.replace(s.as_str(), "<redacted>")
            }
            _ => text,
        }
    }

    /// One send, no retry. Non-2xx answers come back as responses too.
    async fn attempt(&self, client: &Octocrab, req: &ApiRequest) -> Result<ApiResponse, Outcome> {
        let mut builder = http::Request::builder()
            .method(req.method.clone())
            .uri(req.path.as_str())
            .header(
                http::header::ACCEPT,
                req.accept.unwrap_or("application/vnd.github+json"),
            );
        if let Some(etag) = &req.if_none_match {
            builder = builder.header(http::header::IF_NONE_MATCH, etag.as_str());
        }
        let net = |detail: String, timed_out: bool| GitHubError::Network {
            route: req.route.clone(),
            detail,
            timed_out,
        };
        let request = client
            .build_request(builder, req.body.as_ref())
            .map_err(|e| Outcome::Fail(net(short_error(&e), false)))?;
        let exchange = async {
            let resp = client.execute(request).await?;
            let status = resp.status();
            let headers = resp.headers().clone();
            let body = client.body_to_string(resp).await?;
            Ok::<_, octocrab::Error>((status, headers, body))
        };
        let no_answer = || {
            Outcome::Ambiguous(net(
                format!(
                    "no answer within {:.1} s",
                    self.policy.request_timeout.as_secs_f64()
                ),
                true,
            ))
        };
        match tokio::time::timeout(self.policy.request_timeout, exchange).await {
            Err(_) => Err(no_answer()),
            Ok(Err(e)) => Err(match &e {
                // An installation token could not be minted: not a network problem.
                octocrab::Error::GitHub { source, .. } => {
                    let status = source.status_code.as_u16();
                    let err = GitHubError::AppAuth {
                        detail: format!("{status} {}", self.scrub(source.message.clone())),
                    };
                    if status >= 500 {
                        Outcome::Ambiguous(err)
                    } else {
                        Outcome::Fail(err)
                    }
                }
                _ if timed_out(&e) => no_answer(),
                _ => Outcome::Ambiguous(net(self.scrub(short_error(&e)), false)),
            }),
            Ok(Ok((status, headers, body))) => Ok(ApiResponse {
                status,
                headers,
                body,
                route: req.route.clone(),
            }),
        }
    }

    /// Send with retries; an `Ok` answer has a 2xx or 304 status.
    pub(crate) async fn send(&self, req: &ApiRequest) -> Result<ApiResponse, GitHubError> {
        let graphql = req.path.starts_with("/graphql");
        let client = self.client(graphql).await?;
        self.send_on(client, graphql, req).await
    }

    /// [`send`](Self::send) authenticated as the GitHub App itself (its JWT), for the `/app`
    /// endpoints; `Ok(None)` when the client is not an App.
    pub(crate) async fn send_as_app(
        &self,
        req: &ApiRequest,
    ) -> Result<Option<ApiResponse>, GitHubError> {
        match &self.auth {
            Auth::App(a) => self.send_on(&a.app, false, req).await.map(Some),
            Auth::Ready(_) => Ok(None),
        }
    }

    async fn send_on(
        &self,
        client: &Octocrab,
        graphql: bool,
        req: &ApiRequest,
    ) -> Result<ApiResponse, GitHubError> {
        let resource = if graphql { "graphql" } else { "core" };
        let mut secondary_hits = 0u32;
        let mut last: Option<GitHubError> = None;
        for attempt in 1..=self.policy.max_attempts.max(1) {
            self.wait_for_quota(resource, &req.route).await?;
            let spacing = if req.mutation {
                Some(self.space_mutation().await)
            } else {
                None
            };
            self.sent.fetch_add(1, Ordering::Relaxed);
            crate::metrics::metrics().github_request(resource);
            let outcome = match self.attempt(client, req).await {
                Ok(resp) => {
                    self.note_quota(resource, &resp.headers);
                    self.classify(resp, &mut secondary_hits)
                }
                Err(outcome) => outcome,
            };
            if let Some(mut guard) = spacing {
                *guard = Some(Instant::now());
            }
            match outcome {
                Outcome::Done(resp) => {
                    tracing::debug!(route = %req.route, status = resp.status.as_u16(), attempt, "GitHub answered");
                    return Ok(resp);
                }
                Outcome::Fail(e) => return Err(e),
                Outcome::Wait(wait, err) => {
                    if wait > self.policy.max_wait {
                        return Err(err);
                    }
                    if attempt < self.policy.max_attempts {
                        tracing::warn!(route = %req.route, wait_ms = wait.as_millis() as u64, attempt, "GitHub rate limit: waiting before retrying");
                        tokio::time::sleep(wait).await;
                    }
                    last = Some(err);
                }
                Outcome::Ambiguous(err) => {
                    if !req.repeatable {
                        return Err(err);
                    }
                    if attempt < self.policy.max_attempts {
                        let wait = self.policy.backoff(attempt);
                        tracing::warn!(route = %req.route, error = %err, wait_ms = wait.as_millis() as u64, attempt, "GitHub request failed: retrying");
                        tokio::time::sleep(wait).await;
                    }
                    last = Some(err);
                }
            }
        }
        Err(last.unwrap_or_else(|| GitHubError::Network {
            route: req.route.clone(),
            detail: "no attempt was made".into(),
            timed_out: false,
        }))
    }

    /// Create something that must not be created twice. `send` does not resend the request after a
    /// failure GitHub may have applied; here, before each new attempt, `find` looks for the result
    /// and returns it when the earlier attempt did land.
    pub(crate) async fn create<T, P, F, Fut>(
        &self,
        req: &ApiRequest,
        parse: P,
        mut find: F,
    ) -> Result<T, GitHubError>
    where
        P: Fn(&ApiResponse) -> Result<T, GitHubError>,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<Option<T>, GitHubError>>,
    {
        let mut attempt = 1u32;
        loop {
            match self.send(req).await {
                Ok(resp) => return parse(&resp),
                Err(e) if e.is_transient() && attempt < self.policy.max_attempts => {
                    let wait = self.policy.backoff(attempt);
                    tracing::warn!(route = %req.route, error = %e, "write may or may not have landed: checking before sending it again");
                    tokio::time::sleep(wait).await;
                    if let Some(found) = find().await? {
                        return Ok(found);
                    }
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Map a complete answer to done, wait, or failure.
    fn classify(&self, resp: ApiResponse, secondary_hits: &mut u32) -> Outcome {
        let status = resp.status;
        let route = resp.route.clone();
        if status.is_success() || status == StatusCode::NOT_MODIFIED {
            if resp.route.starts_with("POST /graphql") && graphql_rate_limited(&resp.body) {
                return self.quota_wait(route, &resp.headers);
            }
            return Outcome::Done(resp);
        }
        let body = ErrorBody::parse(&resp.body);
        let message = self.scrub(body.text());
        if status == StatusCode::FORBIDDEN || status == StatusCode::TOO_MANY_REQUESTS {
            if let Some(wait) = retry_after(&resp.headers) {
                return secondary_wait(route, wait);
            }
            if header(&resp.headers, "x-ratelimit-remaining") == Some("0") {
                return self.quota_wait(route, &resp.headers);
            }
            let lower = message.to_ascii_lowercase();
            if status == StatusCode::TOO_MANY_REQUESTS
                || lower.contains("secondary rate limit")
                || lower.contains("abuse")
            {
                *secondary_hits += 1;
                let wait = self
                    .policy
                    .secondary_min_wait
                    .saturating_mul(1u32 << (*secondary_hits - 1).min(16));
                return secondary_wait(route, wait);
            }
        }
        let accepted =
            header(&resp.headers, "x-accepted-github-permissions").filter(|v| !v.is_empty());
        let err = if status == StatusCode::UNAUTHORIZED {
            GitHubError::Unauthorized { route, message }
        } else if let (StatusCode::FORBIDDEN, Some(accepted)) = (status, accepted) {
            GitHubError::MissingPermission {
                route,
                permission: GitHubError::permission_name(accepted),
            }
        } else {
            GitHubError::Api {
                status: status.as_u16(),
                route,
                message,
                documentation_url: body.documentation_url,
            }
        };
        if status.is_server_error() {
            Outcome::Ambiguous(err)
        } else {
            Outcome::Fail(err)
        }
    }

    /// The hourly quota is used up: wait until `x-ratelimit-reset`.
    fn quota_wait(&self, route: String, headers: &HeaderMap) -> Outcome {
        let reset = reset_time(headers);
        Outcome::Wait(
            until(reset).unwrap_or(self.policy.secondary_min_wait),
            GitHubError::RateLimited {
                route,
                secondary: false,
                reset_at: reset,
                retry_after: None,
            },
        )
    }

    fn note_quota(&self, resource: &str, headers: &HeaderMap) {
        let Some(remaining) =
            header(headers, "x-ratelimit-remaining").and_then(|v| v.parse::<u64>().ok())
        else {
            return;
        };
        let resource = header(headers, "x-ratelimit-resource").unwrap_or(resource);
        crate::metrics::metrics().rate_limit(resource, remaining);
        if let Ok(mut q) = self.quotas.lock() {
            q.insert(
                resource.to_string(),
                Quota {
                    remaining,
                    reset: reset_time(headers),
                },
            );
        }
    }

    /// When the last answer said the quota is used up, wait for its reset (or fail resumably).
    async fn wait_for_quota(&self, resource: &str, route: &str) -> Result<(), GitHubError> {
        let quota = self
            .quotas
            .lock()
            .ok()
            .and_then(|q| q.get(resource).copied());
        let Some(Quota {
            remaining: 0,
            reset: Some(reset),
        }) = quota
        else {
            return Ok(());
        };
        let Some(wait) = until(Some(reset)) else {
            return Ok(());
        };
        if wait > self.policy.max_wait {
            return Err(GitHubError::RateLimited {
                route: route.to_string(),
                secondary: false,
                reset_at: Some(reset),
                retry_after: None,
            });
        }
        tracing::warn!(
            route,
            wait_ms = wait.as_millis() as u64,
            "GitHub quota used up: waiting for its reset"
        );
        tokio::time::sleep(wait).await;
        if let Ok(mut q) = self.quotas.lock() {
            q.remove(resource);
        }
        Ok(())
    }

    /// Serialise mutations and keep them `min_mutation_interval` apart. The guard is held while the
    /// request is in flight; the caller stamps it when done.
    async fn space_mutation(&self) -> tokio::sync::MutexGuard<'_, Option<Instant>> {
        let guard = self.mutations.lock().await;
        if let Some(last) = *guard {
            let next = last + self.policy.min_mutation_interval;
            if next > Instant::now() {
                tokio::time::sleep_until(next.into()).await;
            }
        }
        guard
    }
}

/// A secondary limit: wait as long as GitHub asked (or our back-off says).
fn secondary_wait(route: String, wait: Duration) -> Outcome {
    crate::metrics::metrics().secondary_limit_waits.inc();
    Outcome::Wait(
        wait,
        GitHubError::RateLimited {
            route,
            secondary: true,
            reset_at: None,
            retry_after: Some(wait),
        },
    )
}

/// The App installation found or configured, once known.
fn installation_of(auth: &Auth) -> Option<u64> {
    match auth {
        Auth::App(a) => a.installation.get().map(|(_, id)| *id),
        Auth::Ready(_) => None,
    }
}

fn short_error(e: &octocrab::Error) -> String {
    // octocrab's Display is terse; include the source chain for network causes (each cause once:
    // some layers repeat their source's text in their own).
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let cause = s.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
        source = s.source();
    }
    text
}

/// Whether the transport gave up waiting for GitHub (to connect, or between reads).
fn timed_out(e: &octocrab::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        let waited = s
            .downcast_ref::<reqwest::Error>()
            .is_some_and(reqwest::Error::is_timeout)
            || s.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut);
        if waited {
            return true;
        }
        source = s.source();
    }
    false
}

/// `retry-after`, in seconds or as an HTTP date.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let v = header(headers, "retry-after")?;
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = DateTime::parse_from_rfc2822(v).ok()?.with_timezone(&Utc);
    Some(until(Some(at)).unwrap_or(Duration::ZERO))
}

fn reset_time(headers: &HeaderMap) -> Option<DateTime<Utc>> {
    let secs = header(headers, "x-ratelimit-reset")?.parse::<i64>().ok()?;
    Utc.timestamp_opt(secs, 0).single()
}

/// Time from now until `at` plus a second of slack (the header has whole seconds); `None` when past.
fn until(at: Option<DateTime<Utc>>) -> Option<Duration> {
    let at = at?;
    let ms = (at - Utc::now()).num_milliseconds() + 1000;
    (ms > 0).then(|| Duration::from_millis(ms as u64))
}

fn graphql_rate_limited(body: &str) -> bool {
    if !body.contains("RATE_LIMITED") {
        return false;
    }
    #[derive(serde::Deserialize)]
    struct Errors {
        #[serde(default)]
        errors: Vec<serde_json::Value>,
    }
    serde_json::from_str::<Errors>(body).is_ok_and(|b| {
        b.errors
            .iter()
            .any(|e| e.get("type").and_then(|t| t.as_str()) == Some("RATE_LIMITED"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_with_jitter_and_is_capped() {
        let p = RetryPolicy {
            base_backoff: Duration::from_millis(100),
            max_wait: Duration::from_millis(500),
            ..RetryPolicy::loopback()
        };
        for _ in 0..50 {
            let b1 = p.backoff(1);
            assert!(b1 >= Duration::from_millis(50) && b1 <= Duration::from_millis(100));
            let b3 = p.backoff(3);
            assert!(b3 >= Duration::from_millis(200) && b3 <= Duration::from_millis(400));
            assert!(p.backoff(30) <= Duration::from_millis(500));
        }
    }

    #[test]
    fn policy_by_url() {
        assert_eq!(
            RetryPolicy::for_api_url("http://127.0.0.1:8080"),
            RetryPolicy::loopback()
        );
        assert_eq!(
            RetryPolicy::for_api_url("http://localhost"),
            RetryPolicy::loopback()
        );
        assert_eq!(
            RetryPolicy::for_api_url("https://api.github.com"),
            RetryPolicy::github()
        );
        assert_eq!(
            RetryPolicy::github().min_mutation_interval,
            Duration::from_secs(1)
        );
    }

    #[test]
    fn links_stay_on_the_api_server() {
        let base = "http://127.0.0.1:5000";
        assert_eq!(
            relative_to(
                base,
                "http://127.0.0.1:5000/repos/a/b/issues/1/comments?page=2"
            ),
            Some("/repos/a/b/issues/1/comments?page=2".into())
        );
        // Another host's link is followed on our own server, never sent there.
        assert_eq!(
            relative_to(base, "https://proxy.example/repos/a/b/issues?page=2"),
            Some("/repos/a/b/issues?page=2".into())
        );
        assert_eq!(
            relative_to(
                "https://ghe.example.com/api/v3",
                "https://ghe.example.com/api/v3/repos/a/b/issues?page=3"
            ),
            Some("/api/v3/repos/a/b/issues?page=3".into())
        );
        // Under GHES's prefix on a public name: followed; outside it: cannot be placed.
        assert_eq!(
            relative_to(
                "http://10.0.0.5:8080/api/v3",
                "https://ghe.example.com/api/v3/repos/a/b/issues?page=3"
            ),
            Some("/api/v3/repos/a/b/issues?page=3".into())
        );
        assert_eq!(
            relative_to(
                "http://10.0.0.5:8080/api/v3",
                "https://ghe.example.com/github/repos/a/b/issues?page=3"
            ),
            None
        );
        assert_eq!(relative_to(base, "ftp://h/x"), None);
        assert_eq!(relative_to(base, "not a url"), None);
    }

    #[test]
    fn next_link_is_found() {
        let mut headers = HeaderMap::new();
        headers.insert(
            "link",
            "<http://h:1/x?page=2>; rel=\"next\", <http://h:1/x?page=3>; rel=\"last\""
                .parse()
                .unwrap(),
        );
        let resp = ApiResponse {
            status: StatusCode::OK,
            headers,
            body: String::new(),
            route: "GET /x".into(),
        };
        assert_eq!(
            resp.next_page("http://h:1").unwrap(),
            Some("/x?page=2".into())
        );
        let e = resp.next_page("http://other:2/api/v3").unwrap_err();
        assert!(e.to_string().contains("not under the API URL"), "{e}");
        let resp = ApiResponse {
            headers: HeaderMap::new(),
            ..resp
        };
        assert_eq!(resp.next_page("http://h:1").unwrap(), None);
    }

    #[test]
    fn retry_after_forms() {
        let mut h = HeaderMap::new();
        h.insert("retry-after", "7".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(7)));
        h.insert(
            "retry-after",
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after(&h), Some(Duration::ZERO));
        h.insert("retry-after", "soon".parse().unwrap());
        assert_eq!(retry_after(&h), None);
    }

    #[test]
    fn error_bodies() {
        let b = ErrorBody::parse(
            r#"{"message":"Validation Failed","errors":[{"resource":"PullRequest","field":"head","code":"invalid"}],"documentation_url":"https://docs.github.com/rest"}"#,
        );
        assert_eq!(b.text(), "Validation Failed (PullRequest head invalid)");
        let b = ErrorBody::parse(
            r#"{"message":"Validation Failed","errors":[{"resource":"PullRequest","code":"custom","message":"A pull request already exists for o:b."}]}"#,
        );
        assert!(b.text().contains("already exists"));
        assert_eq!(ErrorBody::parse("<html>").text(), "no message");
    }

    #[test]
    fn graphql_rate_limit_detection() {
        assert!(graphql_rate_limited(
            r#"{"errors":[{"type":"RATE_LIMITED","message":"API rate limit exceeded"}]}"#
        ));
        assert!(!graphql_rate_limited(r#"{"data":{"x":"RATE_LIMITED"}}"#));
    }
}
