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

mod fault;
pub mod git;
mod graphql;
mod rest;
mod schema;
mod state;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub use fault::Fault;
pub use git::GitRemote;
pub use state::{
    AppSeed, BoardSeed, CheckRunSeed, CommentSeed, IssueSeed, OwnerType, PullSeed, RepoSeed,
    ReviewCommentSeed, ReviewSeed, SandboxState, SeedState, TokenSeed, UserSeed,
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

/// Stable ids for GraphQL nodes, derived from the state so seeds need not carry them.
pub(crate) mod ids {
    pub const REPO: &str = "R_sandbox";

    pub fn issue(n: u64) -> String {
        format!("I_{n}")
    }
    pub fn pull(n: u64) -> String {
        format!("PR_{n}")
    }
    pub fn project(number: u64) -> String {
        format!("PVT_{number}")
    }
    pub fn status_field(number: u64) -> String {
        format!("PVTSSF_{number}")
    }
    pub fn item(n: u64) -> String {
        format!("PVTI_{n}")
    }
    /// GitHub's option ids are short hex strings; these are a hash of the option's name.
    pub fn option(name: &str) -> String {
        format!("{:08x}", fnv(name))
    }
    /// FNV-1a, for ids and ETags.
    pub fn fnv(s: &str) -> u32 {
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
    },
    /// A JWT, for the App endpoints (checked there).
    AppJwt(String),
}

impl Caller {
    /// Granted scopes; `None` when unrestricted.
    pub fn scopes(&self) -> Option<&[String]> {
        match self {
            Caller::Unrestricted { .. } => None,
            Caller::Token { scopes, .. } => Some(scopes),
            Caller::Anonymous | Caller::AppJwt(_) => Some(&[]),
        }
    }

    pub fn login(&self) -> Option<&str> {
        match self {
            Caller::Unrestricted { login } | Caller::Token { login, .. } => Some(login),
            Caller::Anonymous | Caller::AppJwt(_) => None,
        }
    }

    pub fn is_anonymous(&self) -> bool {
        matches!(self, Caller::Anonymous | Caller::AppJwt(_))
    }
}

/// Everything the server's handlers share.
pub(crate) struct Shared {
    state: Mutex<SandboxState>,
    pub git: GitRemote,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    faults: Mutex<Vec<Fault>>,
    counts: Mutex<BTreeMap<String, u64>>,
    used: AtomicU64,
    started: i64,
    /// The bare repository was made for this run and is not part of the dump.
    temp_git: bool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Shared {
    pub fn state(&self) -> MutexGuard<'_, SandboxState> {
        lock(&self.state)
    }

    /// Count a request under `route` and take the first fault injected for it.
    pub fn admit(&self, route: &str) -> Option<Fault> {
        *lock(&self.counts).entry(route.to_string()).or_default() += 1;
        self.used.fetch_add(1, Ordering::Relaxed);
        let mut faults = lock(&self.faults);
        let i = faults.iter().position(|f| f.matches(route))?;
        let fault = faults[i].clone();
        if faults[i].times <= 1 {
            faults.remove(i);
        } else {
            faults[i].times -= 1;
        }
        Some(fault)
    }

    /// `x-ratelimit-*` values: (limit, remaining, reset, used).
    pub fn quota(&self) -> (u64, u64, i64, u64) {
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
    pub async fn start(mut state: SandboxState, port: u16) -> Result<Sandbox, SandboxError> {
        state.normalize().map_err(SandboxError::Invalid)?;
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
            "  git remote: {} (push branches here to open pull requests)\n",
            self.shared.git.path().display()
        ));
        out.push_str(&format!(
            "  state dump: curl {url}/_sandbox/state    request counts: curl {url}/_sandbox/requests\n"
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
