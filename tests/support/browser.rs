//! Debian's headless Chromium for tests that look at a page as a person would: one page, driven
//! over the DevTools protocol on a pipe (`--remote-debugging-pipe`: JSON messages ended by NUL on
//! file descriptors 3 and 4), script evaluated in it after its own scripts ran.
//! Without Chromium a browser test fails where `CI` is set, and is skipped with a message elsewhere.

#![allow(dead_code)]

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// What Chromium needs to start and stay quiet on a machine with no network: no sandbox (tests
/// run as root), no GPU, and none of its own connections.
pub const FLAGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
];

const INSTALL: &str = "apt-get install -y --no-install-recommends chromium";

/// How long one answer of the browser may take.
const ANSWER: Duration = Duration::from_secs(30);

/// `chromium` on PATH: in CI (`CI` set) its absence fails the test; elsewhere the test is
/// skipped with a message naming `what` it would have checked.
pub fn require(what: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join("chromium"))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        if std::env::var_os("CI").is_some_and(|v| !v.is_empty()) {
            panic!("no chromium on PATH, and CI is set: {what} needs it; install it: {INSTALL}");
        }
        eprintln!("skipped: {what} (no chromium on PATH; install it: {INSTALL})");
    }
    found
}

/// One Chromium with one page.
pub struct Browser {
    child: Child,
    to: File,
    from: mpsc::Receiver<Value>,
    next: u64,
    session: String,
    _profile: tempfile::TempDir,
}

fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

impl Browser {
    /// Start `browser` with a window of `width` × `height` and attach to its page.
    pub fn launch(browser: &Path, width: u32, height: u32) -> Browser {
        let profile = tempfile::tempdir().unwrap();
        let (commands_read, commands_write) = pipe();
        let (answers_read, answers_write) = pipe();
        let (fd3, fd4) = (commands_read.as_raw_fd(), answers_write.as_raw_fd());
        let mut cmd = Command::new(browser);
        cmd.args(FLAGS)
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg(format!("--window-size={width},{height}"))
            .args(["--remote-debugging-pipe", "about:blank"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                // Copied above 9 first, so that neither end is overwritten before it is moved.
                let (a, b) = (
                    libc::fcntl(fd3, libc::F_DUPFD, 10),
                    libc::fcntl(fd4, libc::F_DUPFD, 10),
                );
                if a < 0 || b < 0 || libc::dup2(a, 3) < 0 || libc::dup2(b, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                libc::close(a);
                libc::close(b);
                Ok(())
            });
        }
        let child = cmd.spawn().expect("chromium starts");
        drop((commands_read, answers_write));
        let (tx, from) = mpsc::channel();
        let mut reader = BufReader::new(File::from(answers_read));
        std::thread::spawn(move || {
            let mut message = Vec::new();
            while reader.read_until(0, &mut message).is_ok_and(|n| n > 0) {
                if message.last() == Some(&0) {
                    message.pop();
                }
                if let Ok(v) = serde_json::from_slice::<Value>(&message) {
                    if tx.send(v).is_err() {
                        return;
                    }
                }
                message.clear();
            }
        });
        let mut b = Browser {
            child,
            to: File::from(commands_write),
            from,
            next: 0,
            session: String::new(),
            _profile: profile,
        };
        let targets = b.call("Target.getTargets", json!({}));
        let page = targets["targetInfos"]
            .as_array()
            .and_then(|t| t.iter().find(|t| t["type"] == "page"))
            .map(|t| t["targetId"].clone())
            .expect("chromium has a page");
        let attached = b.call(
            "Target.attachToTarget",
            json!({ "targetId": page, "flatten": true }),
        );
        b.session = attached["sessionId"].as_str().unwrap().to_string();
        b.call("Page.enable", json!({}));
        b.call("Runtime.enable", json!({}));
        b
    }

    /// Send a command (to the page once attached); its result.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        let mut message = json!({ "id": id, "method": method, "params": params });
        if !self.session.is_empty() {
            message["sessionId"] = json!(self.session);
        }
        let mut bytes = serde_json::to_vec(&message).unwrap();
        bytes.push(0);
        self.to.write_all(&bytes).unwrap();
        let deadline = Instant::now() + ANSWER;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let v = self
                .from
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("chromium did not answer {method} within {ANSWER:?}"));
            if v["id"] == id {
                if let Some(e) = v.get("error") {
                    panic!("chromium refused {method}: {e}");
                }
                return v["result"].clone();
            }
        }
    }

    /// Open `url` and wait until it has loaded.
    pub fn open(&mut self, url: &str) {
        self.call("Page.navigate", json!({ "url": url }));
        self.wait_for("the page to load", "document.readyState === 'complete'");
    }

    /// The value of `expression`, evaluated in the page (a promise is awaited).
    pub fn eval(&mut self, expression: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({ "expression": expression, "returnByValue": true, "awaitPromise": true }),
        );
        if let Some(e) = r.get("exceptionDetails") {
            panic!("`{expression}` threw in the page: {e}");
        }
        r["result"]["value"].clone()
    }

    /// Wait (30 s at most) until `expression` is true in the page.
    pub fn wait_for(&mut self, what: &str, expression: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.eval(expression) != json!(true) {
            assert!(Instant::now() < deadline, "no {what} within 30 s");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
