//! What the commands print. std's `println!` and `eprintln!` panic when the reader has gone
//! (`supervisor check --json | head -c 10`); here output to a stream that cannot take it any more is
//! dropped quietly from then on, and the command finishes what it was doing (a run still cleans up)
//! and exits with its usual status.

use std::fmt;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

static STDOUT_GONE: AtomicBool = AtomicBool::new(false);
static STDERR_GONE: AtomicBool = AtomicBool::new(false);

/// Print on stdout (`--json` output, and listings and reports: `supervisor runs | less`).
pub(super) fn stdout(args: fmt::Arguments<'_>, newline: bool) {
    write(&mut io::stdout().lock(), args, newline, &STDOUT_GONE);
}

/// Print on stderr (human output).
pub(super) fn stderr(args: fmt::Arguments<'_>, newline: bool) {
    write(&mut io::stderr().lock(), args, newline, &STDERR_GONE);
}

/// The text goes out in one write: stderr is unbuffered, and a line written piece by piece could be
/// split by another writer's (a log line, another run's progress).
fn write(w: &mut dyn Write, args: fmt::Arguments<'_>, newline: bool, gone: &AtomicBool) {
    if gone.load(Ordering::Relaxed) {
        return;
    }
    let mut text = fmt::format(args);
    if newline {
        text.push('\n');
    }
    let written = w.write_all(text.as_bytes()).and_then(|()| w.flush());
    if written.is_err() {
        // A closed pipe (EPIPE) or a full disk: nobody can read what follows either.
        gone.store(true, Ordering::Relaxed);
    }
}

/// `println!` that never panics.
macro_rules! outln {
    ($($arg:tt)*) => { $crate::cli::output::stdout(format_args!($($arg)*), true) };
}

/// `print!` that never panics.
macro_rules! out {
    ($($arg:tt)*) => { $crate::cli::output::stdout(format_args!($($arg)*), false) };
}

/// `eprintln!` that never panics.
macro_rules! errln {
    ($($arg:tt)*) => { $crate::cli::output::stderr(format_args!($($arg)*), true) };
}

/// `eprint!` that never panics.
macro_rules! err {
    ($($arg:tt)*) => { $crate::cli::output::stderr(format_args!($($arg)*), false) };
}

pub(crate) use {err, errln, out, outln};

#[cfg(test)]
mod tests {
    use super::*;

    struct Closed;
    impl Write for Closed {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// Counts the writes it is given.
    #[derive(Default)]
    struct Writes(Vec<Vec<u8>>);
    impl Write for Writes {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.push(buf.to_vec());
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_line_goes_out_in_one_write() {
        let mut w = Writes::default();
        write(
            &mut w,
            format_args!("[{:02}:{:02}] {}", 0, 7, "→ Research"),
            true,
            &AtomicBool::new(false),
        );
        assert_eq!(w.0, vec!["[00:07] → Research\n".as_bytes().to_vec()]);
    }

    #[test]
    fn a_closed_stream_is_given_up_quietly() {
        let gone = AtomicBool::new(false);
        write(&mut Closed, format_args!("{}", 1), true, &gone);
        assert!(gone.load(Ordering::Relaxed));

        let gone = AtomicBool::new(false);
        let mut buf = Vec::new();
        write(&mut buf, format_args!("a{}", 1), true, &gone);
        write(&mut buf, format_args!("b"), false, &gone);
        assert_eq!(buf, b"a1\nb");
        assert!(!gone.load(Ordering::Relaxed));
        gone.store(true, Ordering::Relaxed);
        write(&mut buf, format_args!("c"), false, &gone);
        assert_eq!(buf, b"a1\nb", "nothing is written once the stream is gone");
    }
}
