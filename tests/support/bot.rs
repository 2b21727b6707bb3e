//! A running `supervisor watch` or `serve` and what it printed: its JSON notices (stdout, one a
//! line) as they come, and its stderr.

#![allow(dead_code)]

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

/// How long a notice, or the process's end, is waited for.
pub(crate) const DEADLINE: Duration = Duration::from_secs(120);

/// A running watcher (or server) and what it printed.
pub(crate) struct Bot {
    pub child: Child,
    lines: mpsc::UnboundedReceiver<Value>,
    pub seen: Vec<Value>,
    stderr: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Bot {
    pub(crate) fn spawn(mut cmd: Command) -> Bot {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().expect("spawn supervisor");
        let (tx, lines) = mpsc::unbounded_channel();
        let stdout = child.stdout.take().unwrap();
        tokio::spawn(async move {
            let mut reader = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    let _ = tx.send(v);
                }
            }
        });
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let err_text = stderr.clone();
        let err_pipe = child.stderr.take().unwrap();
        tokio::spawn(async move {
            let mut reader = BufReader::new(err_pipe).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                let mut t = err_text.lock().unwrap();
                t.push_str(&line);
                t.push('\n');
            }
        });
        Bot {
            child,
            lines,
            seen: Vec::new(),
            stderr,
        }
    }

    pub(crate) fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// The first notice (from now on) that `want` accepts.
    pub(crate) async fn wait(&mut self, what: &str, want: impl Fn(&Value) -> bool) -> Value {
        let deadline = tokio::time::Instant::now() + DEADLINE;
        loop {
            match tokio::time::timeout_at(deadline, self.lines.recv()).await {
                Ok(Some(v)) => {
                    self.seen.push(v.clone());
                    if want(&v) {
                        return v;
                    }
                }
                Ok(None) => panic!(
                    "the bot ended before {what}; notices {:#?}\nstderr:\n{}",
                    self.seen,
                    self.stderr()
                ),
                Err(_) => panic!(
                    "no {what} within {DEADLINE:?}; notices {:#?}\nstderr:\n{}",
                    self.seen,
                    self.stderr()
                ),
            }
        }
    }

    /// Wait for the process to end; its exit code.
    pub(crate) async fn exit(&mut self) -> i32 {
        let status = tokio::time::timeout(DEADLINE, self.child.wait())
            .await
            .expect("the bot ends in time")
            .unwrap();
        while let Ok(v) = self.lines.try_recv() {
            self.seen.push(v);
        }
        // Notices still in the pipe.
        while let Ok(Some(v)) =
            tokio::time::timeout(Duration::from_millis(500), self.lines.recv()).await
        {
            self.seen.push(v);
        }
        status.code().unwrap_or(-1)
    }

    pub(crate) fn signal(&self, sig: i32) {
        let pid = self.child.id().expect("running") as i32;
        assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
    }

    pub(crate) fn count(&self, kind: &str, issue: u64) -> usize {
        self.seen
            .iter()
            .filter(|v| v["kind"] == kind && v["issue"] == issue)
            .count()
    }

    /// SIGTERM, then wait for the end; its exit code.
    pub(crate) async fn stop(&mut self) -> i32 {
        self.signal(libc::SIGTERM);
        self.exit().await
    }
}
