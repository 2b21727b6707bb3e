//! Agent transcripts: the CLI's stdout and stderr as they arrived, bounded.
//!
//! Partial updates that later lines repeat (pi's `message_update`, which carries the whole message so
//! far with every delta) are left out or shortened by the backend's parser
//! ([`StreamParser::transcript`](super::stream::StreamParser::transcript)); final messages, tool calls
//! and tool results are kept. Past the size cap, the first part of the stream stays on disk, then a
//! note of what was left out, then the last lines (the answer and the end of the run). A closing note
//! says what was left out and why.

use std::collections::{BTreeMap, VecDeque};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use serde_json::json;

/// The end of the stream kept when the cap is reached: a quarter of the cap, at most this much.
const MAX_TAIL: u64 = 1024 * 1024;

/// The transcript of one dispatch: `<path>` for stdout (JSON lines) and `<path>.stderr`, made
/// when the first stderr line arrives (most dispatches write none, and a file made is a file
/// system's inode spent on nothing).
#[derive(Default)]
pub(crate) struct Transcript {
    stdout: Option<Capped>,
    stderr: Option<Capped>,
    /// Where stderr goes once it says something, and the cap it gets.
    stderr_later: Option<(PathBuf, u64)>,
}

impl Transcript {
    /// Create the stdout file (and the directory). `cap` bytes per file, 0 for no cap.
    pub(crate) fn open(path: Option<&Path>, cap: u64) -> std::io::Result<Transcript> {
        let Some(path) = path else {
            return Ok(Transcript::default());
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut err_path = PathBuf::from(path);
        err_path.as_mut_os_string().push(".stderr");
        Ok(Transcript {
            stdout: Some(Capped::new(File::create(path)?, cap, Format::Json)),
            stderr: None,
            stderr_later: Some((err_path, cap)),
        })
    }

    /// A stdout line kept as it is.
    pub(crate) fn stdout(&mut self, line: &[u8]) {
        if let Some(f) = &mut self.stdout {
            f.line(line);
        }
    }

    /// A stdout line of event `kind` left out (`len` bytes).
    pub(crate) fn stdout_dropped(&mut self, kind: &str, len: u64) {
        if let Some(f) = &mut self.stdout {
            f.count(Omission::Dropped, kind, len);
        }
    }

    /// A stdout line of event `kind` (`len` bytes) written in a shorter form.
    pub(crate) fn stdout_replaced(&mut self, kind: &str, len: u64, short: &str) {
        if let Some(f) = &mut self.stdout {
            f.count(
                Omission::Shortened,
                kind,
                len.saturating_sub(short.len() as u64),
            );
            f.line(short.as_bytes());
        }
    }

    pub(crate) fn stderr(&mut self, line: &[u8]) {
        if let Some((path, cap)) = self.stderr_later.take() {
            match File::create(&path) {
                Ok(file) => self.stderr = Some(Capped::new(file, cap, Format::Text)),
                Err(e) => tracing::warn!(
                    "agent stderr transcript {} not written: {e}",
                    path.display()
                ),
            }
        }
        if let Some(f) = &mut self.stderr {
            f.line(line);
        }
    }

    /// Write the kept end of each stream and the closing notes.
    pub(crate) fn finish(&mut self) {
        for f in [&mut self.stdout, &mut self.stderr].into_iter().flatten() {
            f.finish();
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    /// JSON lines: notes are JSON objects of type `transcript_note`.
    Json,
    /// Plain text: notes are lines starting `[supervisor]`.
    Text,
}

#[derive(Clone, Copy)]
enum Omission {
    Dropped,
    Shortened,
}

/// One transcript file with a size cap.
struct Capped {
    out: Option<BufWriter<File>>,
    format: Format,
    cap: u64,
    head_budget: u64,
    tail_budget: u64,
    written: u64,
    head_full: bool,
    tail: VecDeque<Vec<u8>>,
    tail_bytes: u64,
    elided_lines: u64,
    elided_bytes: u64,
    /// Event kind → (lines, bytes) left out as partial updates.
    dropped: BTreeMap<String, (u64, u64)>,
    /// Event kind → (lines, bytes saved) written shorter.
    shortened: BTreeMap<String, (u64, u64)>,
}

impl Capped {
    fn new(file: File, cap: u64, format: Format) -> Capped {
        let tail_budget = if cap == 0 { 0 } else { (cap / 4).min(MAX_TAIL) };
        Capped {
            out: Some(BufWriter::new(file)),
            format,
            cap,
            head_budget: cap - tail_budget,
            tail_budget,
            written: 0,
            head_full: false,
            tail: VecDeque::new(),
            tail_bytes: 0,
            elided_lines: 0,
            elided_bytes: 0,
            dropped: BTreeMap::new(),
            shortened: BTreeMap::new(),
        }
    }

    fn line(&mut self, line: &[u8]) {
        let size = line.len() as u64 + 1;
        if self.cap == 0 || (!self.head_full && self.written + size <= self.head_budget) {
            self.write(line);
            return;
        }
        self.head_full = true;
        let kept = if size > self.tail_budget {
            // Too big even for the tail: say what it was instead.
            self.elided_lines += 1;
            self.elided_bytes += size;
            self.note_line(&self.omitted_line(line))
        } else {
            line.to_vec()
        };
        self.tail_bytes += kept.len() as u64 + 1;
        self.tail.push_back(kept);
        while self.tail_bytes > self.tail_budget {
            let Some(old) = self.tail.pop_front() else {
                break;
            };
            self.tail_bytes -= old.len() as u64 + 1;
            self.elided_lines += 1;
            self.elided_bytes += old.len() as u64 + 1;
        }
    }

    fn count(&mut self, how: Omission, kind: &str, bytes: u64) {
        let map = match how {
            Omission::Dropped => &mut self.dropped,
            Omission::Shortened => &mut self.shortened,
        };
        let kind = if kind.is_empty() { "(no type)" } else { kind };
        let e = map.entry(kind.to_string()).or_default();
        e.0 += 1;
        e.1 += bytes;
    }

    fn omitted_line(&self, line: &[u8]) -> String {
        let kind = std::str::from_utf8(&line[..line.len().min(256)])
            .ok()
            .and_then(super::stream::event_type)
            .map(|k| k.into_owned())
            .unwrap_or_default();
        match self.format {
            Format::Json => json!({
                "type": "transcript_note",
                "note": format!("a {} line of {} bytes is left out: larger than the transcript's tail", if kind.is_empty() { "stdout" } else { &kind }, line.len()),
            })
            .to_string(),
            Format::Text => format!(
                "[supervisor] a line of {} bytes is left out: larger than the transcript's tail",
                line.len()
            ),
        }
    }

    fn note_line(&self, text: &str) -> Vec<u8> {
        text.as_bytes().to_vec()
    }

    fn write(&mut self, line: &[u8]) {
        if let Some(f) = &mut self.out {
            if f.write_all(line).and_then(|_| f.write_all(b"\n")).is_err() {
                tracing::warn!("agent transcript write failed; the rest is not recorded");
                self.out = None;
                return;
            }
            self.written += line.len() as u64 + 1;
        }
    }

    fn finish(&mut self) {
        if self.elided_lines > 0 {
            let text = format!(
                "{} lines ({}) left out here: the transcript cap of {} was reached (setting agentTranscriptMaxMb); the last {} lines follow",
                self.elided_lines,
                human_bytes(self.elided_bytes),
                human_bytes(self.cap),
                self.tail.len()
            );
            let note = self.note(
                &text,
                json!({ "lines": self.elided_lines, "bytes": self.elided_bytes, "cap": self.cap }),
            );
            self.write(note.as_bytes());
        }
        while let Some(line) = self.tail.pop_front() {
            self.write(&line);
        }
        if !self.dropped.is_empty() || !self.shortened.is_empty() {
            let describe = |m: &BTreeMap<String, (u64, u64)>| {
                m.iter()
                    .map(|(k, (n, b))| format!("{n} {k} ({})", human_bytes(*b)))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let mut parts = Vec::new();
            if !self.dropped.is_empty() {
                parts.push(format!(
                    "left out partial updates that later lines repeat: {}",
                    describe(&self.dropped)
                ));
            }
            if !self.shortened.is_empty() {
                parts.push(format!(
                    "shortened events that repeat earlier lines: {}",
                    describe(&self.shortened)
                ));
            }
            let as_json = |m: &BTreeMap<String, (u64, u64)>| {
                m.iter()
                    .map(|(k, (n, b))| (k.clone(), json!({ "lines": n, "bytes": b })))
                    .collect::<serde_json::Map<_, _>>()
            };
            let note = match self.format {
                Format::Json => json!({
                    "type": "transcript_note",
                    "note": parts.join("; "),
                    "dropped": as_json(&self.dropped),
                    "shortened": as_json(&self.shortened),
                })
                .to_string(),
                Format::Text => format!("[supervisor] {}", parts.join("; ")),
            };
            self.write(note.as_bytes());
        }
        if let Some(f) = &mut self.out {
            let _ = f.flush();
        }
    }

    fn note(&self, text: &str, elided: serde_json::Value) -> String {
        match self.format {
            Format::Json => {
                json!({ "type": "transcript_note", "note": text, "elided": elided }).to_string()
            }
            Format::Text => format!("[supervisor] {text}"),
        }
    }
}

/// `1.5 MiB`, `300 B`.
pub fn human_bytes(n: u64) -> String {
    const KIB: f64 = 1024.0;
    let f = n as f64;
    if f >= KIB * KIB * KIB {
        format!("{:.1} GiB", f / (KIB * KIB * KIB))
    } else if f >= KIB * KIB {
        format!("{:.1} MiB", f / (KIB * KIB))
    } else if f >= KIB {
        format!("{:.1} KiB", f / KIB)
    } else {
        format!("{n} B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines_of(path: &Path) -> Vec<String> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn a_dispatch_silent_on_stderr_leaves_no_stderr_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let mut t = Transcript::open(Some(&path), 1 << 20).unwrap();
        t.stdout(br#"{"type":"message_end"}"#);
        t.finish();
        assert_eq!(lines_of(&path), [r#"{"type":"message_end"}"#]);
        assert!(!dir.path().join("t.jsonl.stderr").exists());
    }

    #[test]
    fn under_the_cap_everything_is_kept_and_omissions_are_noted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let mut t = Transcript::open(Some(&path), 1 << 20).unwrap();
        t.stdout(br#"{"type":"message_start"}"#);
        t.stdout_dropped("message_update", 5000);
        t.stdout_dropped("message_update", 7000);
        t.stdout_replaced("turn_end", 9000, r#"{"type":"turn_end"}"#);
        t.stdout(br#"{"type":"message_end"}"#);
        t.stderr(b"warning: x");
        t.finish();
        let out = lines_of(&path);
        assert_eq!(out.len(), 4, "{out:?}");
        assert_eq!(out[1], r#"{"type":"turn_end"}"#);
        let note: serde_json::Value = serde_json::from_str(&out[3]).unwrap();
        assert_eq!(note["type"], "transcript_note");
        assert_eq!(note["dropped"]["message_update"]["lines"], 2);
        assert_eq!(note["dropped"]["message_update"]["bytes"], 12000);
        assert!(note["note"].as_str().unwrap().contains("2 message_update"));
        assert_eq!(lines_of(&dir.path().join("t.jsonl.stderr")), ["warning: x"]);
    }

    #[test]
    fn over_the_cap_the_head_and_the_tail_are_kept_with_a_note_between() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let cap = 4000;
        let mut t = Transcript::open(Some(&path), cap).unwrap();
        for i in 0..1000 {
            t.stdout(format!(r#"{{"type":"tool_execution_end","n":{i}}}"#).as_bytes());
            t.stderr(format!("stderr line {i}").as_bytes());
        }
        t.stdout(&vec![b'x'; 5000]);
        t.stdout(br#"{"type":"agent_end","n":"last"}"#);
        t.finish();
        let size = std::fs::metadata(&path).unwrap().len();
        assert!(size <= cap + 400, "{size}");
        let out = lines_of(&path);
        assert!(out[0].contains("\"n\":0"));
        let note_at = out
            .iter()
            .position(|l| l.contains("transcript_note") && l.contains("cap of"))
            .expect("a note says where lines were left out");
        assert!(out[note_at].contains("agentTranscriptMaxMb"));
        assert!(
            out.iter()
                .any(|l| l.contains("larger than the transcript's tail"))
        );
        assert_eq!(out.last().unwrap(), r#"{"type":"agent_end","n":"last"}"#);
        let err = std::fs::read_to_string(dir.path().join("t.jsonl.stderr")).unwrap();
        assert!(err.len() as u64 <= cap + 400);
        assert!(err.starts_with("stderr line 0\n"));
        assert!(err.contains("[supervisor] "));
        assert!(err.ends_with("stderr line 999\n"));
    }
}
