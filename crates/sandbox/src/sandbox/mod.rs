//! A stateful GitHub emulator on 127.0.0.1: the REST endpoints and GraphQL operations supervisor
//! uses, over an in-memory [`SandboxState`] and a local bare git repository.
//!
//! Real semantics rather than canned replies: comments appear in lists and are paged with `Link`
//! headers, cards move between the status field's options, pull requests get numbers and URLs and
//! their `mergeable` is computed by merging the branches of the bare repository, errors have
//! GitHub's `message` / `documentation_url` / `errors` bodies. Tests can [`inject`](Sandbox::inject)
//! faults (status codes, rate-limit headers, delays) and read [request counts](Sandbox::request_counts).
//! Control endpoints live under `/_sandbox/`: `GET /_sandbox/state` (the dump), `GET
//! /_sandbox/requests` (counts by route), `POST /_sandbox/faults` (inject a [`Fault`] as JSON).
//! A read-only web view of the state is served beside the API (`/`, issue and pull request pages).

mod conformance;
mod fault;
pub(crate) mod git;
mod graphql;
mod graphql_validate;
mod hooks;
mod rest;
mod schema;
mod shapes;
mod state;
mod web;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub use conformance::{REST_DESCRIPTION, Side, Violation, check_rest_request, rest_operation_id};
pub use fault::Fault;
pub use git::{GitRemote, MergeRefusal};
pub use hooks::{Act, DeliveryRecord, HookKind, WebhookTarget};
pub use state::{
    AppSeed, BoardSeed, CheckRunSeed, CommentSeed, DispatchSeed, FIRST_COMMENT_ID, IssueSeed,
    MergeSeed, OwnerType, PullSeed, RenameSeed, RepoSeed, ReviewCommentSeed, ReviewSeed,
    SandboxState, SeedState, TokenSeed, UserSeed,
};

/// Why the sandbox could not start or load.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("sandbox state {}: {problem}", .path.display())]
    State { path: PathBuf, problem: String },
    #[error("sandbox state is inconsistent: {0}")]
    Invalid(String),
    #[error("sandbox git repository: {0}")]
    Git(String),
    #[error("cannot listen on 127.0.0.1:{port}: {source}")]
    Bind {
        port: u16,
        #[source]
        source: std::io::Error,
    },
}

/// Where a request reached the sandbox: the base of the API URLs and of the web URLs in its answer
/// (`Link` headers, `url` and `html_url` fields). From the state's `public_url`, else the request's
/// `Host`; API URLs keep GitHub Enterprise Server's `/api/v3` when the request used it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Origin {
    pub(crate) api: String,
    pub(crate) web: String,
}

/// Stable ids, derived from the state so seeds need not carry them. Database ids are as large as
/// github.com's (above 2^31), and an issue's id is not its number.
pub(crate) mod ids {
    pub(crate) const REPO: &str = "R_sandbox";
    pub(crate) const REPO_ID: u64 = 1_296_269;

    /// Database id of issue (or pull request) number `n` as the issues API shows it.
    pub(crate) fn issue_id(n: u64) -> u64 {
        3_100_000_000 + n * 7
    }
    /// Database id of pull request `n` as the pulls API shows it.
    pub(crate) fn pull_id(n: u64) -> u64 {
        2_600_000_000 + n * 7
    }
    /// Database id of a user, organization or bot.
    pub(crate) fn user(login: &str) -> u64 {
        u64::from(fnv(&login.to_ascii_lowercase()))
    }
    pub(crate) fn user_node(login: &str, kind: &str) -> String {
        match kind {
            "Organization" => format!("O_{login}"),
            "Bot" => format!("BOT_{login}"),
            _ => format!("U_{login}"),
        }
    }
    pub(crate) fn comment(id: u64) -> String {
        format!("IC_{id}")
    }
    pub(crate) fn label(name: &str) -> u64 {
        u64::from(fnv(name))
    }

    pub(crate) fn issue(n: u64) -> String {
        format!("I_{n}")
    }
    pub(crate) fn pull(n: u64) -> String {
        format!("PR_{n}")
    }
    pub(crate) fn project(number: u64) -> String {
        format!("PVT_{number}")
    }
    pub(crate) fn status_field(number: u64) -> String {
        format!("PVTSSF_{number}")
    }
    pub(crate) fn item(n: u64) -> String {
        format!("PVTI_{n}")
    }
    /// GitHub's option ids are short hex strings; these are a hash of the option's name.
    pub(crate) fn option(name: &str) -> String {
        format!("{:08x}", fnv(name))
    }
    /// FNV-1a, for ids and ETags.
    pub(crate) fn fnv(s: &str) -> u32 {
        s.bytes().fold(0x811c_9dc5u32, |h, b| {
            (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
        })
    }
}

/// Who is calling, from the `Authorization` header.
#[derive(Debug, Clone)]
pub(crate) enum Caller {
    Anonymous,
    /// The state lists no tokens: everyone is the repository owner with every scope.
    Unrestricted {
        login: String,
    },
    Token {
        login: String,
        scopes: Vec<String>,
        /// A fine-grained token's or an App installation's repository permissions.
        permissions: Option<BTreeMap<String, String>>,
    },
    /// A JWT, for the App endpoints (checked there).
    AppJwt(String),
}

impl Caller {
    /// Granted scopes; `None` when unrestricted.
    pub(crate) fn scopes(&self) -> Option<&[String]> {
        match self {
            Caller::Unrestricted { .. } => None,
            Caller::Token { scopes, .. } => Some(scopes),
            Caller::Anonymous | Caller::AppJwt(_) => Some(&[]),
        }
    }

    pub(crate) fn login(&self) -> Option<&str> {
        match self {
            Caller::Unrestricted { login } | Caller::Token { login, .. } => Some(login),
            Caller::Anonymous | Caller::AppJwt(_) => None,
        }
    }

    pub(crate) fn is_anonymous(&self) -> bool {
        matches!(self, Caller::Anonymous | Caller::AppJwt(_))
    }

    /// An App installation token (acting as `<slug>[bot]`).
    pub(crate) fn is_app_installation(&self) -> bool {
        matches!(self, Caller::Token { login, permissions: Some(_), .. } if login.ends_with("[bot]"))
    }

    /// The caller's role on the repository (`read` … `admin`), as `viewerPermission` reports it:
    /// its user's ([`SandboxState::permission`]); an App installation writes.
    pub(crate) fn role(&self, st: &SandboxState) -> String {
        match self {
            Caller::Anonymous | Caller::AppJwt(_) => "read".into(),
            Caller::Unrestricted { .. } => "admin".into(),
            _ if self.is_app_installation() => "write".into(),
            Caller::Token { login, .. } => st.permission(login),
        }
    }

    /// What a fine-grained token or an App installation is called in GitHub's refusal ("Resource
    /// not accessible by …") when it lacks repository `permission` at `level` (`read`, `write`);
    /// `None` when it has it, or is a caller without such permissions (a classic token).
    pub(crate) fn lacks(&self, permission: &str, level: &str) -> Option<&'static str> {
        let Caller::Token {
            login,
            permissions: Some(granted),
            ..
        } = self
        else {
            return None;
        };
        let has = granted.get(permission).map(String::as_str);
        let enough = match level {
            "read" => matches!(has, Some("read" | "write" | "admin")),
            _ => matches!(has, Some("write" | "admin")),
        };
        match (enough, login.ends_with("[bot]")) {
            (true, _) => None,
            (false, true) => Some("integration"),
            (false, false) => Some("personal access token"),
        }
    }

    /// Whether the caller has write access to the repository's `permission` (`pull_requests`,
    /// …): a role of `write` or above and, for a fine-grained token or an App installation, that
    /// permission granted for writing.
    pub(crate) fn may_write(&self, st: &SandboxState, permission: &str) -> bool {
        let role = matches!(self.role(st).as_str(), "write" | "maintain" | "admin");
        role && self.lacks(permission, "write").is_none()
    }
}

/// Everything the server's handlers share.
pub(crate) struct Shared {
    state: Mutex<SandboxState>,
    pub(crate) git: GitRemote,
    /// `http://127.0.0.1:PORT`.
    pub(crate) base: String,
    faults: Mutex<Vec<Fault>>,
    counts: Mutex<BTreeMap<String, u64>>,
    used: AtomicU64,
    pub(crate) started: i64,
    /// The bare repository was made for this run and is not part of the dump.
    temp_git: bool,
    /// Where webhooks go, when the sandbox sends them.
    hooks: Option<hooks::Hooks>,
    /// Check every exchange against GitHub's descriptions ([`Sandbox::check_conformance`]).
    pub(crate) checking: AtomicBool,
    violations: Mutex<Vec<Violation>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Shared {
    pub(crate) fn state(&self) -> MutexGuard<'_, SandboxState> {
        lock(&self.state)
    }

    /// Count a request under `route` and take the first fault injected for it.
    pub(crate) fn admit(&self, route: &str) -> Option<Fault> {
        *lock(&self.counts).entry(route.to_string()).or_default() += 1;
        self.used.fetch_add(1, Ordering::Relaxed);
        self.take_fault(route)
    }

    /// Take the first fault injected for `route`.
    pub(crate) fn take_fault(&self, route: &str) -> Option<Fault> {
        let mut faults = lock(&self.faults);
        let i = faults.iter().position(|f| f.matches(route))?;
        if faults[i].skip > 0 {
            faults[i].skip -= 1;
            return None;
        }
        let fault = faults[i].clone();
        if faults[i].times <= 1 {
            faults.remove(i);
        } else {
            faults[i].times -= 1;
        }
        Some(fault)
    }

    /// Keep what an exchange broke of GitHub's descriptions.
    pub(crate) fn record(&self, found: Vec<Violation>) {
        if !found.is_empty() {
            for v in &found {
                tracing::warn!(violation = %v, "the exchange differs from GitHub's description");
            }
            lock(&self.violations).extend(found);
        }
    }

    /// Give back the quota of a request that turned out not to count (a 304).
    pub(crate) fn refund(&self) {
        let _ = self
            .used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| u.checked_sub(1));
    }

    /// `x-ratelimit-*` values: (limit, remaining, reset, used).
    pub(crate) fn quota(&self) -> (u64, u64, i64, u64) {
        let used = self.used.load(Ordering::Relaxed);
        (
            5000,
            5000u64.saturating_sub(used),
            self.started + 3600,
            used,
        )
    }

    fn snapshot(&self) -> SandboxState {
        let mut s = self.state().clone();
        if self.temp_git {
            s.repo.git_dir = None;
        }
        s
    }
}

/// A running sandbox GitHub.
pub struct Sandbox {
    shared: Arc<Shared>,
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
    /// Removes the temporary bare repository when the sandbox goes away.
    _temp: Option<TempDir>,
}

impl std::fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandbox").field("url", &self.url()).finish()
    }
}

impl Sandbox {
    /// Serve `state` on 127.0.0.1:`port` (0: any free port).
    pub async fn start(state: SandboxState, port: u16) -> Result<Sandbox, SandboxError> {
        Sandbox::start_with_webhook(state, port, None).await
    }

    /// [`start`](Sandbox::start), sending webhooks to `webhook` when given.
    pub async fn start_with_webhook(
        mut state: SandboxState,
        port: u16,
        webhook: Option<WebhookTarget>,
    ) -> Result<Sandbox, SandboxError> {
        state.normalize().map_err(SandboxError::Invalid)?;
        let hooks = match webhook {
            Some(target) => {
                Some(hooks::Hooks::start(target, &state).map_err(SandboxError::Invalid)?)
            }
            None => None,
        };
        let (git, temp) = match &state.repo.git_dir {
            Some(dir) => (GitRemote::open(dir).map_err(SandboxError::Git)?, None),
            None => {
                let temp = TempDir::new().map_err(SandboxError::Git)?;
                let dir = temp.0.join("remote.git");
                let git = GitRemote::create(&dir, &state.repo.default_branch)
                    .map_err(SandboxError::Git)?;
                state.repo.git_dir = Some(dir);
                (git, Some(temp))
            }
        };
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .map_err(|source| SandboxError::Bind { port, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| SandboxError::Bind { port, source })?;
        let shared = Arc::new(Shared {
            state: Mutex::new(state),
            git,
            base: format!("http://{addr}"),
            faults: Mutex::new(Vec::new()),
            counts: Mutex::new(BTreeMap::new()),
            used: AtomicU64::new(0),
            started: chrono::Utc::now().timestamp(),
            temp_git: temp.is_some(),
            hooks,
            checking: AtomicBool::new(false),
            violations: Mutex::new(Vec::new()),
        });
        let app = rest::router(shared.clone());
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let served = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await;
            if let Err(e) = served {
                tracing::error!(error = %e, "sandbox server stopped");
            }
        });
        tracing::debug!(url = %shared.base, "sandbox GitHub listening");
        Ok(Sandbox {
            shared,
            addr,
            stop: Some(stop),
            task: Some(task),
            _temp: temp,
        })
    }

    /// `http://127.0.0.1:PORT`: the API base URL to give the client.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// The bare repository standing for GitHub's copy (push branches here).
    pub fn git(&self) -> &GitRemote {
        &self.shared.git
    }

    /// What `supervisor sandbox serve` prints: where it listens and how to talk to it.
    pub fn banner(&self) -> String {
        let url = self.url();
        let st = self.shared.state();
        let repo = format!("{}/{}", st.repo.owner, st.repo.name);
        let mut out = format!("sandbox GitHub for {repo} listening on {url}\n");
        out.push_str(&format!("  export GITHUB_API_URL={url}\n"));
        match st.tokens.first() {
            Some(t) => {
                out.push_str(&format!(
                    "  export GH_TOKEN={}    # {} with scopes: {}\n",
                    t.token,
                    t.login,
                    t.scopes.join(", ")
                ));
                for t in st.tokens.iter().skip(1) {
                    out.push_str(&format!(
                        "  (also accepted: {} for {} with scopes: {})\n",
                        t.token,
                        t.login,
                        t.scopes.join(", ")
                    ));
                }
            }
            None => out.push_str("  any token is accepted (the state lists no tokens)\n"),
        }
        let auth = st
            .tokens
            .first()
            .map(|t| format!(" -H 'Authorization: Bearer {}'", t.token))
            .unwrap_or_default();
        let first_issue = st.issues.first().map_or(1, |i| i.number);
        out.push_str(&format!(
            "  curl{auth} {url}/repos/{repo}/issues/{first_issue}\n"
        ));
        out.push_str(&format!(
            "  export SUPERVISOR_GIT_URL={}    # the git remote: supervisor pushes branches here\n",
            self.shared.git.path().display()
        ));
        out.push_str(&format!(
            "  state dump: curl {url}/_sandbox/state    request counts: curl {url}/_sandbox/requests\n"
        ));
        out.push_str(&format!(
            "  web view: {url}/ (issues, pull requests, the board; read-only)\n"
        ));
        out.push_str("Ctrl-C stops it.\n");
        out
    }

    /// The state as it is now, in the seed format (a temporary git repository is left out).
    pub fn snapshot(&self) -> SandboxState {
        self.shared.snapshot()
    }

    /// Read or change the state directly.
    pub fn with_state<R>(&self, f: impl FnOnce(&mut SandboxState) -> R) -> R {
        f(&mut self.shared.state())
    }

    /// Make the next matching request(s) fail or wait as the fault says.
    pub fn inject(&self, fault: Fault) {
        lock(&self.shared.faults).push(fault);
    }

    /// Requests served, by route template (`GET /repos/{owner}/{repo}/issues/{number}`) and, for
    /// GraphQL, operation name (`POST /graphql UpdateItemStatus`).
    pub fn request_counts(&self) -> BTreeMap<String, u64> {
        lock(&self.shared.counts).clone()
    }

    /// The webhooks sent so far, in order (empty when the sandbox sends none).
    pub fn deliveries(&self) -> Vec<DeliveryRecord> {
        self.shared
            .hooks
            .as_ref()
            .map(|h| h.log())
            .unwrap_or_default()
    }

    /// Webhooks queued and not yet answered by the receiver.
    pub fn deliveries_pending(&self) -> usize {
        self.shared.hooks.as_ref().map_or(0, |h| h.pending())
    }

    /// Play a human: move a card, comment, label or close an issue, as `POST /_sandbox/act`
    /// does (webhooks included).
    pub fn act(&self, act: Act) -> Result<(), String> {
        rest::act(&self.shared, act)
    }

    /// Check every exchange from now on against GitHub's published descriptions: REST requests
    /// and answers against the vendored REST description, GraphQL answers against the shape of
    /// their query. What differs is kept ([`Sandbox::violations`]).
    pub fn check_conformance(&self) -> Result<(), SandboxError> {
        conformance::RestContract::get().map_err(SandboxError::Invalid)?;
        self.shared.checking.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// What exchanges broke of GitHub's descriptions so far.
    pub fn violations(&self) -> Vec<Violation> {
        lock(&self.shared.violations).clone()
    }

    /// The violations so far, forgetting them (for tests that break the description on purpose).
    pub fn take_violations(&self) -> Vec<Violation> {
        std::mem::take(&mut *lock(&self.shared.violations))
    }

    /// `Err` listing every violation (operation, side, field, problem), one a line.
    pub fn conformance_report(&self) -> Result<(), String> {
        let found = self.violations();
        if found.is_empty() {
            return Ok(());
        }
        let mut text = format!(
            "{} exchange(s) differ from GitHub's published description:\n",
            found.len()
        );
        for v in found {
            text.push_str(&format!("  {v}\n"));
        }
        Err(text)
    }

    /// Requests served in total.
    pub fn request_total(&self) -> u64 {
        self.request_counts().values().sum()
    }

    /// Stop serving and wait until the server is down.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// A directory removed on drop (tempfile is only a dev-dependency).
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Result<TempDir, String> {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "supervisor-sandbox-{}-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed),
            fastrand::u32(..)
        ));
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        Ok(TempDir(dir))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
