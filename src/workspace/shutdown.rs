//! SIGINT/SIGTERM handling: the first signal asks everything to stop (the running agent is killed,
//! the worktree cleaned); a second one exits at once with status 1.

use std::io::Write;

use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;

/// Exit status of a second signal.
pub const SECOND_SIGNAL_EXIT: i32 = 1;

/// The shutdown request, as a watch channel that agents and the pipeline loop listen to.
#[derive(Debug, Clone)]
pub struct Shutdown {
    tx: watch::Sender<bool>,
}

impl Shutdown {
    /// Install the SIGINT and SIGTERM handlers. Must be called inside a tokio runtime.
    pub fn install() -> std::io::Result<Shutdown> {
        let shutdown = Shutdown::manual();
        let mut int = signal(SignalKind::interrupt())?;
        let mut term = signal(SignalKind::terminate())?;
        let tx = shutdown.tx.clone();
        tokio::spawn(async move {
            loop {
                let name = tokio::select! {
                    _ = int.recv() => "SIGINT",
                    _ = term.recv() => "SIGTERM",
                };
                // Best effort: stderr may be a closed pipe, which must not stop the shutdown.
                let mut stderr = std::io::stderr();
                if *tx.borrow() {
                    let _ = writeln!(stderr, "supervisor: {name} again: exiting now");
                    crate::agent::kill_live_agents();
                    std::process::exit(SECOND_SIGNAL_EXIT);
                }
                let _ = writeln!(
                    stderr,
                    "supervisor: {name}: stopping the agent and cleaning up (signal again to exit at once)"
                );
                tx.send_replace(true);
            }
        });
        Ok(shutdown)
    }

    /// A shutdown switch without signal handlers (tests, embedding).
    pub fn manual() -> Shutdown {
        let (tx, _) = watch::channel(false);
        Shutdown { tx }
    }

    /// A receiver for `run_agent` and the pipeline loop.
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.tx.subscribe()
    }

    /// Ask everything to stop.
    pub fn request(&self) {
        self.tx.send_replace(true);
    }

    /// Whether a stop was asked for.
    pub fn requested(&self) -> bool {
        *self.tx.borrow()
    }
}
