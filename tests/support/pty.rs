//! A program on a pseudo-terminal, driven as a person at a terminal would: wait for text on the
//! screen, type a line. The program's stdin, stdout and stderr are the terminal (its controlling
//! terminal, in a session of its own); what it writes is gathered as it comes.

#![allow(dead_code)]

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long one expectation waits before the test fails, showing the screen so far.
const PATIENCE: Duration = Duration::from_secs(60);

#[derive(Default)]
struct Screen {
    bytes: Vec<u8>,
    closed: bool,
}

pub(crate) struct Pty {
    master: File,
    child: Child,
    screen: Arc<(Mutex<Screen>, Condvar)>,
    /// Where the next expectation starts looking.
    from: usize,
}

impl Pty {
    /// Start `cmd` on a new 120×40 terminal.
    pub(crate) fn spawn(mut cmd: Command) -> Pty {
        let (mut master, mut slave) = (0, 0);
        let size = libc::winsize {
            ws_row: 40,
            ws_col: 120,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: openpty writes the two descriptors it opens into the integers given.
        let rc = unsafe {
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null(),
                &size,
            )
        };
        assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
        for fd in [master, slave] {
            // SAFETY: fcntl on descriptors just opened; the program gets its copies as 0, 1, 2.
            unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
        }
        // SAFETY: both descriptors were just opened and are owned here alone.
        let (master, slave) = unsafe { (File::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
        cmd.stdin(Stdio::from(slave.try_clone().unwrap()))
            .stdout(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave));
        // SAFETY: only async-signal-safe calls between fork and exec; by then the terminal is
        // the program's stdin.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().expect("the program starts on the terminal");
        // The command holds the parent's copies of the terminal's side: closing them lets the
        // reader see the end when the program exits.
        drop(cmd);
        let screen: Arc<(Mutex<Screen>, Condvar)> = Arc::default();
        let (mut reader, shared) = (master.try_clone().unwrap(), screen.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            loop {
                // EIO once the program and its children closed the terminal.
                let n = reader.read(&mut buf).unwrap_or(0);
                let (lock, ready) = &*shared;
                let mut s = lock.lock().unwrap();
                if n == 0 {
                    s.closed = true;
                    ready.notify_all();
                    return;
                }
                s.bytes.extend_from_slice(&buf[..n]);
                ready.notify_all();
            }
        });
        Pty {
            master,
            child,
            screen,
            from: 0,
        }
    }

    /// Everything the program wrote so far, as text.
    pub(crate) fn screen(&self) -> String {
        String::from_utf8_lossy(&self.screen.0.lock().unwrap().bytes).into_owned()
    }

    /// Wait until `text` appears after what earlier expectations matched; what came before it.
    pub(crate) fn expect(&mut self, text: &str) -> String {
        let deadline = Instant::now() + PATIENCE;
        let (lock, ready) = &*self.screen;
        let mut s = lock.lock().unwrap();
        loop {
            let seen = String::from_utf8_lossy(&s.bytes[self.from..]).into_owned();
            if let Some(at) = seen.find(text) {
                self.from += seen[..at + text.len()].len();
                return seen[..at].to_string();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !s.closed && !left.is_zero(),
                "`{text}` never appeared; the terminal shows:\n{}",
                String::from_utf8_lossy(&s.bytes)
            );
            s = ready.wait_timeout(s, left).unwrap().0;
        }
    }

    /// Type `line` and Enter.
    pub(crate) fn type_line(&mut self, line: &str) {
        self.master
            .write_all(format!("{line}\r").as_bytes())
            .unwrap();
    }

    /// Answer the question ending in `question` with `line`.
    pub(crate) fn answer(&mut self, question: &str, line: &str) {
        self.expect(question);
        self.type_line(line);
    }

    /// Ctrl-D: the end of the input.
    pub(crate) fn end_input(&mut self) {
        self.master.write_all(&[4]).unwrap();
    }

    /// Wait for the program to exit and for all it wrote; its status and the whole screen.
    pub(crate) fn finish(mut self) -> (ExitStatus, String) {
        let deadline = Instant::now() + PATIENCE;
        let screen = {
            let (lock, ready) = &*self.screen;
            let mut s = lock.lock().unwrap();
            while !s.closed && Instant::now() < deadline {
                let left = deadline.saturating_duration_since(Instant::now());
                s = ready.wait_timeout(s, left).unwrap().0;
            }
            if !s.closed {
                let _ = self.child.kill();
                panic!(
                    "the program did not exit:\n{}",
                    String::from_utf8_lossy(&s.bytes)
                );
            }
            String::from_utf8_lossy(&s.bytes).into_owned()
        };
        (self.child.wait().unwrap(), screen)
    }
}
