//! The gate session: what the gates keep for the length of one pipeline run.
//!
//! - which tools are trusted (the main checkout's installed gate tools as they were when the session
//!   began), the environment every tool gets and the sandbox it runs in (`agentSandbox`);
//! - warm language servers, reused by the next gate round;
//! - a scratch directory under the state directory (`.supervisor/gates/session-…`, git-ignored) for
//!   incremental state: tsc's build-info file per worktree and project, knip's cache.
//!
//! Nothing of it outlives the session: [`GateSession::shutdown`] stops the servers and removes the
//! scratch directory, and dropping the last handle does the same at once (process groups killed).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

use super::lsp::ServerPool;
use super::tool::{JEST, JSCPD, KNIP, PYLSP, PYTEST, TSC, TYPESCRIPT_LANGUAGE_SERVER, VITEST};
use super::trust::{InstalledTools, ToolEnv, main_checkout_of};
use crate::agent::Sandbox;

/// Gate state for one run; cheap to clone (all clones share it).
#[derive(Clone)]
pub struct GateSession {
    inner: Arc<Inner>,
}

struct Inner {
    main_checkout: Option<PathBuf>,
    installed: InstalledTools,
    env: ToolEnv,
    /// `agentSandbox: "bwrap"`: every process a gate starts on the checkout runs in it.
    sandbox: Option<Sandbox>,
    /// Whether the sandbox starts here: asked once.
    sandbox_ready: tokio::sync::OnceCell<Result<(), String>>,
    state_dir: PathBuf,
    scratch: Mutex<Option<PathBuf>>,
    npx: Mutex<HashMap<String, PathBuf>>,
    servers: ServerPool,
    closed: AtomicBool,
    /// The run's stop request: running tools are killed and unfinished gates report "not run".
    cancel: CancellationToken,
}

impl std::fmt::Debug for GateSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GateSession")
            .field("main_checkout", &self.inner.main_checkout)
            .field("state_dir", &self.inner.state_dir)
            .field("sandbox", &self.inner.sandbox)
            .field("closed", &self.is_closed())
            .finish_non_exhaustive()
    }
}

impl GateSession {
    /// A session for checkouts of the repository whose main checkout is `main_checkout` (its installed
    /// gate tools are recorded now, before any agent runs), keeping its state under `state_dir`, running
    /// tools with `env`.
    pub fn new(main_checkout: Option<&Path>, state_dir: &Path, env: ToolEnv) -> GateSession {
        let main_checkout = main_checkout.map(|m| m.canonicalize().unwrap_or(m.to_path_buf()));
        let installed = main_checkout
            .as_deref()
            .map(|m| {
                InstalledTools::record(
                    m,
                    &[
                        TSC.bin,
                        TYPESCRIPT_LANGUAGE_SERVER.bin,
                        KNIP.bin,
                        JSCPD.bin,
                        VITEST.bin,
                        JEST.bin,
                    ],
                    &[PYLSP.bin, PYTEST.bin],
                )
            })
            .unwrap_or_default();
        GateSession {
            inner: Arc::new(Inner {
                main_checkout,
                installed,
                env,
                sandbox: None,
                sandbox_ready: tokio::sync::OnceCell::new(),
                state_dir: state_dir.to_path_buf(),
                scratch: Mutex::new(None),
                npx: Mutex::new(HashMap::new()),
                servers: ServerPool::default(),
                closed: AtomicBool::new(false),
                cancel: CancellationToken::new(),
            }),
        }
    }

    /// A session for the checkout at `dir`: its main checkout is found through git (`dir` itself, or
    /// the repository a linked worktree belongs to).
    pub fn for_checkout(dir: &Path, state_dir: &Path, env: ToolEnv) -> GateSession {
        Self::new(main_checkout_of(dir).as_deref(), state_dir, env)
    }

    /// The session, stopped by `cancel`: tools it runs are killed (with their process groups) and
    /// unfinished gates report "not run" once it is cancelled. Call before the session is shared.
    pub fn with_cancel(mut self, cancel: CancellationToken) -> GateSession {
        match Arc::get_mut(&mut self.inner) {
            Some(inner) => inner.cancel = cancel,
            None => debug_assert!(false, "with_cancel on a shared gate session"),
        }
        self
    }

    /// The session, running every process its gates start on the checkout in `sandbox` (the
    /// agents' sandbox of the settings, `None` for none). Call before the session is shared.
    pub fn with_sandbox(mut self, sandbox: Option<Sandbox>) -> GateSession {
        match Arc::get_mut(&mut self.inner) {
            Some(inner) => inner.sandbox = sandbox,
            None => debug_assert!(false, "with_sandbox on a shared gate session"),
        }
        self
    }

    /// The sandbox gate processes run in, when the settings ask for one.
    pub(crate) fn sandbox(&self) -> Option<&Sandbox> {
        self.inner.sandbox.as_ref()
    }

    /// `Ok` without a sandbox, or when it starts for a process with `env` in the checkout at `dir`:
    /// bwrap runs `true` in it once per session, and the answer stands for the session. `Err` says
    /// why not, for a gate to report as not run.
    pub(super) async fn sandbox_ready(
        &self,
        env: &[(String, String)],
        dir: &Path,
    ) -> Result<(), String> {
        let Some(sandbox) = &self.inner.sandbox else {
            return Ok(());
        };
        self.inner
            .sandbox_ready
            .get_or_init(|| async {
                sandbox
                    .probe(env, dir)
                    .await
                    .map(drop)
                    .map_err(|e| format!("the gates' sandbox cannot start: {e}"))
            })
            .await
            .clone()
    }

    /// The session's stop request.
    pub(crate) fn cancel(&self) -> &CancellationToken {
        &self.inner.cancel
    }

    /// The main checkout whose installed tools are trusted.
    pub fn main_checkout(&self) -> Option<&Path> {
        self.inner.main_checkout.as_deref()
    }

    pub(super) fn installed(&self) -> &InstalledTools {
        &self.inner.installed
    }

    /// The environment every gate tool runs with.
    pub(crate) fn env(&self) -> &ToolEnv {
        &self.inner.env
    }

    pub(super) fn servers(&self) -> &ServerPool {
        &self.inner.servers
    }

    /// Process groups of the language servers alive now (one per language and checkout).
    pub fn language_servers(&self) -> Vec<i32> {
        self.inner.servers.live_groups()
    }

    /// Whether [`GateSession::shutdown`] has run: gates still work, but keep nothing warm.
    pub(crate) fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::SeqCst)
    }

    /// The session's scratch directory for `purpose` (created on first use), e.g. `tsc`.
    pub fn scratch_dir(&self, purpose: &str) -> std::io::Result<PathBuf> {
        let mut scratch = self.inner.scratch.lock().unwrap_or_else(|e| e.into_inner());
        let root = match &*scratch {
            Some(root) => root.clone(),
            None => {
                std::fs::create_dir_all(&self.inner.state_dir)?;
                // Keep gate state out of `git status` (and so out of commits and change sets).
                let ignore = self.inner.state_dir.join(".gitignore");
                if !ignore.exists() {
                    std::fs::write(&ignore, "*\n")?;
                }
                let root = self.inner.state_dir.join(format!(
                    "session-{}-{:08x}",
                    std::process::id(),
                    fastrand::u32(..)
                ));
                std::fs::create_dir_all(&root)?;
                *scratch = Some(root.clone());
                root
            }
        };
        let dir = root.join(purpose);
        std::fs::create_dir_all(&dir)?;
        Ok(dir)
    }

    /// The scratch directory, if one was made.
    pub fn scratch_root(&self) -> Option<PathBuf> {
        self.inner
            .scratch
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub(super) fn npx_resolved(&self, package: &str) -> Option<PathBuf> {
        self.inner
            .npx
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(package)
            .cloned()
    }

    pub(super) fn remember_npx(&self, package: &str, program: PathBuf) {
        self.inner
            .npx
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(package.to_string(), program);
    }

    /// End the session: language servers are shut down (killed at once when the session's stop was
    /// asked for, or when a gate is using one at this moment — that gate reports its language as not
    /// run), the scratch directory is removed. Idempotent; call it when the run ends, however it ends.
    pub async fn shutdown(&self) {
        self.inner.closed.store(true, Ordering::SeqCst);
        let polite = !self.inner.cancel.is_cancelled();
        self.inner.servers.shutdown(polite).await;
        self.inner.remove_scratch();
    }
}

impl Inner {
    fn remove_scratch(&self) {
        let taken = self
            .scratch
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(dir) = taken {
            if let Err(e) = std::fs::remove_dir_all(&dir) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    tracing::warn!(dir = %dir.display(), error = %e, "could not remove the gate session's scratch directory");
                }
            }
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The servers' process groups are killed as the pool drops; the scratch goes now.
        self.remove_scratch();
    }
}
