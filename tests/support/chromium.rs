//! Debian's headless Chromium, driven over its DevTools protocol on a pipe (`--remote-debugging-pipe`:
//! JSON messages ended by NUL on file descriptors 3 and 4): pages opened at a window's size, script
//! evaluated in them, screenshots taken as PNG and decoded. Without Chromium a browser test fails
//! where `CI` is set, and is skipped with a message elsewhere.

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
/// run as root), no GPU, and none of its own connections (QUIC, updates, sync, background fetches).
pub(crate) const FLAGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
];

/// How long one answer of the browser may take.
const ANSWER: Duration = Duration::from_secs(30);

/// `chromium` on PATH.
pub(crate) fn find() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("chromium"))
        .find(|p| p.is_file())
}

/// Chromium for a browser test: in CI (`CI` set) its absence fails the test; elsewhere the test
/// is skipped with a message naming `what` it would have checked.
pub(crate) fn require(what: &str) -> Option<PathBuf> {
    let found = find();
    if found.is_none() {
        let install =
            "apt-get install -y --no-install-recommends chromium (scripts/test.sh does it)";
        if std::env::var_os("CI").is_some_and(|v| !v.is_empty()) {
            panic!("no chromium on PATH, and CI is set: {what} needs it; install it: {install}");
        }
        eprintln!("skipped: {what} (no chromium on PATH; install it: {install})");
    }
    found
}

/// The page's DOM after the browser loaded it and ran whatever scripts it would run.
pub(crate) fn dump_dom(browser: &Path, url: &str) -> String {
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new(browser)
        .args(FLAGS)
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(["--dump-dom", url])
        .stdin(Stdio::null())
        .output()
        .expect("chromium starts");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// One Chromium with one page, driven over the DevTools protocol.
pub(crate) struct Browser {
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
    /// Start `browser` with a window of `width` × `height` CSS pixels and attach to its page.
    pub(crate) fn launch(browser: &Path, width: u32, height: u32) -> Browser {
        let profile = tempfile::tempdir().unwrap();
        // Chromium reads commands on fd 3 and writes answers on fd 4.
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
                // Copies above 4 first, so that neither end is overwritten before it is moved.
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
            .and_then(|t| t["targetId"].as_str())
            .expect("a page")
            .to_string();
        let attached = b.call(
            "Target.attachToTarget",
            json!({"targetId": page, "flatten": true}),
        );
        b.session = attached["sessionId"].as_str().expect("a session").into();
        // The window's frame takes part of --window-size: the page gets the whole size.
        b.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}),
        );
        b
    }

    /// Send a command (to the page once attached) and wait for its answer's result.
    pub(crate) fn call(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        let mut message = json!({"id": id, "method": method, "params": params});
        if !self.session.is_empty() {
            message["sessionId"] = json!(self.session);
        }
        let mut bytes = serde_json::to_vec(&message).unwrap();
        bytes.push(0);
        self.to.write_all(&bytes).expect("chromium reads its pipe");
        let deadline = Instant::now() + ANSWER;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let answer = self
                .from
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("chromium did not answer {method} within {ANSWER:?}"));
            if answer["id"] == id {
                assert!(
                    answer.get("error").is_none(),
                    "{method}: {}",
                    answer["error"]
                );
                return answer["result"].clone();
            }
        }
    }

    /// Open `url` and wait until it has loaded.
    pub(crate) fn open(&mut self, url: &str) {
        let nav = self.call("Page.navigate", json!({"url": url}));
        assert!(nav.get("errorText").is_none(), "{url}: {nav}");
        let deadline = Instant::now() + ANSWER;
        while self.eval("document.readyState") != "complete" || self.eval("location.href") != url {
            assert!(Instant::now() < deadline, "{url} did not load");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The value of a JavaScript expression evaluated in the page.
    pub(crate) fn eval(&mut self, expression: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true}),
        );
        assert!(
            r.get("exceptionDetails").is_none(),
            "{expression}: {}",
            r["exceptionDetails"]
        );
        r["result"]["value"].clone()
    }

    /// What the window shows, as PNG.
    pub(crate) fn screenshot(&mut self) -> Vec<u8> {
        use base64::Engine as _;
        let shot = self.call("Page.captureScreenshot", json!({"format": "png"}));
        base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().expect("image data"))
            .expect("base64")
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A decoded 8-bit RGB or RGBA PNG (what Chromium writes), as RGB pixels row by row.
pub(crate) struct Image {
    pub width: usize,
    pub height: usize,
    pub pixels: Vec<[u8; 3]>,
}

impl Image {
    pub(crate) fn decode(png: &[u8]) -> Image {
        use std::io::Read as _;
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "a PNG");
        let (mut at, mut width, mut height, mut channels) = (8, 0, 0, 0);
        let mut data = Vec::new();
        while at + 8 <= png.len() {
            let len = u32::from_be_bytes(png[at..at + 4].try_into().unwrap()) as usize;
            let kind = &png[at + 4..at + 8];
            let body = &png[at + 8..at + 8 + len];
            match kind {
                b"IHDR" => {
                    width = u32::from_be_bytes(body[0..4].try_into().unwrap()) as usize;
                    height = u32::from_be_bytes(body[4..8].try_into().unwrap()) as usize;
                    assert_eq!(body[8], 8, "8 bits a channel");
                    assert_eq!(body[12], 0, "not interlaced");
                    channels = match body[9] {
                        2 => 3,
                        6 => 4,
                        other => panic!("colour type {other}"),
                    };
                }
                b"IDAT" => data.extend_from_slice(body),
                _ => {}
            }
            at += 12 + len;
        }
        let mut raw = Vec::new();
        flate2::read::ZlibDecoder::new(&data[..])
            .read_to_end(&mut raw)
            .expect("zlib data");
        let stride = width * channels;
        assert_eq!(raw.len(), height * (stride + 1), "image data size");
        let mut rows: Vec<Vec<u8>> = Vec::with_capacity(height);
        for y in 0..height {
            let line = &raw[y * (stride + 1)..(y + 1) * (stride + 1)];
            let (filter, line) = (line[0], &line[1..]);
            let mut row = line.to_vec();
            for x in 0..stride {
                let left = if x >= channels { row[x - channels] } else { 0 };
                let up = if y > 0 { rows[y - 1][x] } else { 0 };
                let corner = if y > 0 && x >= channels {
                    rows[y - 1][x - channels]
                } else {
                    0
                };
                let add = match filter {
                    0 => 0,
                    1 => left,
                    2 => up,
                    3 => ((u16::from(left) + u16::from(up)) / 2) as u8,
                    4 => paeth(left, up, corner),
                    other => panic!("filter {other}"),
                };
                row[x] = row[x].wrapping_add(add);
            }
            rows.push(row);
        }
        let pixels = rows
            .iter()
            .flat_map(|r| r.chunks(channels).map(|p| [p[0], p[1], p[2]]))
            .collect();
        Image {
            width,
            height,
            pixels,
        }
    }

    pub(crate) fn at(&self, x: usize, y: usize) -> [u8; 3] {
        self.pixels[y * self.width + x]
    }
}

fn paeth(a: u8, b: u8, c: u8) -> u8 {
    let p = i16::from(a) + i16::from(b) - i16::from(c);
    let (pa, pb, pc) = (
        (p - i16::from(a)).abs(),
        (p - i16::from(b)).abs(),
        (p - i16::from(c)).abs(),
    );
    if pa <= pb && pa <= pc {
        a
    } else if pb <= pc {
        b
    } else {
        c
    }
}
