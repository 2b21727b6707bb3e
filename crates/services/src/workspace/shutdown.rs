//! SIGINT/SIGTERM/SIGHUP handling: the first signal cancels the process's root [`CancellationToken`]
//! (every run holds a child of it: its agents and gates stop, its worktree is cleaned); a second one
//! kills every registered child process group and exits at once with status 1.

use std::io::Write;

use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

/// Exit status of a second signal.
pub(crate) const SECOND_SIGNAL_EXIT: i32 = 1;

/// The process's shutdown request.
#[derive(Debug, Clone, Default)]
pub struct Shutdown {
    token: CancellationToken,
}

/// Whether `sig` is ignored by this process (as `nohup` leaves SIGHUP).
fn ignored(sig: libc::c_int) -> bool {
    let mut old = std::mem::MaybeUninit::<libc::sigaction>::uninit();
    // SAFETY: a null new action only reads the current one into `old`.
    let read = unsafe { libc::sigaction(sig, std::ptr::null(), old.as_mut_ptr()) };
    // SAFETY: sigaction filled `old` when it returned 0.
    read == 0 && unsafe { old.assume_init() }.sa_sigaction == libc::SIG_IGN
}

impl Shutdown {
    /// Install the SIGINT, SIGTERM and SIGHUP (the terminal closed) handlers; SIGHUP is left
    /// alone when it is ignored (`nohup`). Must be called inside a tokio runtime.
    pub fn install() -> std::io::Result<Shutdown> {
        let shutdown = Shutdown::manual();
        let mut int = signal(SignalKind::interrupt())?;
        let mut term = signal(SignalKind::terminate())?;
        let mut hup = if ignored(libc::SIGHUP) {
            None
        } else {
            Some(signal(SignalKind::hangup())?)
        };
        let token = shutdown.token.clone();
        tokio::spawn(async move {
            loop {
                let name = tokio::select! {
                    _ = int.recv() => "SIGINT",
                    _ = term.recv() => "SIGTERM",
                    Some(_) = async {
                        match hup.as_mut() {
                            Some(hup) => hup.recv().await,
                            None => std::future::pending().await,
                        }
                    } => "SIGHUP",
                };
                // Best effort: stderr may be a closed pipe, which must not stop the shutdown.
                let mut stderr = std::io::stderr();
                if token.is_cancelled() {
                    let _ = writeln!(stderr, "supervisor: {name} again: exiting now");
                    crate::process::kill_all_groups();
                    std::process::exit(SECOND_SIGNAL_EXIT);
                }
                let _ = writeln!(
                    stderr,
                    "supervisor: {name}: stopping: the running agent, gates or setup are killed and the worktree cleaned up (signal again to exit at once)"
                );
                token.cancel();
            }
        });
        Ok(shutdown)
    }

    /// A shutdown switch without signal handlers (tests, embedding).
    pub(crate) fn manual() -> Shutdown {
        Shutdown::default()
    }

    /// The token runs, agents and gates listen to (each run takes a child of it).
    pub fn token(&self) -> CancellationToken {
        self.token.clone()
    }

    /// Ask everything to stop.
    pub fn request(&self) {
        self.token.cancel();
    }

    /// Whether a stop was asked for.
    pub fn requested(&self) -> bool {
        self.token.is_cancelled()
    }
}
