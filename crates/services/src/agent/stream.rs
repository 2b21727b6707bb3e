//! Reading an agent CLI's output as it arrives, in bounded memory.
//!
//! [`LineReader`] splits a byte stream into lines through a fixed buffer; a line longer than its cap is
//! truncated (the rest of it is skipped), so an endless line or a huge stream never grows memory. Each
//! line goes to a [`StreamParser`], which folds it into a [`Tally`]: the counters and the latest
//! assistant text, never the transcript.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt};

use super::run::Usage;

/// Default cap of one line: longer lines are truncated to this many bytes.
pub const DEFAULT_LINE_CAP: usize = 16 * 1024 * 1024;
const READ_CHUNK: usize = 256 * 1024;
/// How much of a line is read before asking whether it can be skipped unread.
pub(crate) const SKIP_PROBE: usize = 64;

/// Decides from the first [`SKIP_PROBE`] bytes of a line whether the rest may be skipped unread.
pub(crate) type SkipProbe = fn(&[u8]) -> bool;

/// Splits an async byte stream into lines with a bounded buffer. Cancel-safe: all progress lives in
/// the reader, so `next_line` may be raced in `select!` and called again.
pub(crate) struct LineReader<R> {
    inner: R,
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    line: Vec<u8>,
    cap: usize,
    truncated: bool,
    /// The line in `line` is complete and waiting to be taken.
    ready: bool,
    eof: bool,
    skip: Option<SkipProbe>,
    /// The current line was asked about (`skip`); it is being skipped.
    probed: bool,
    skipping: bool,
    /// Bytes of the current line, including what was cut or skipped.
    len: u64,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    pub(crate) fn new(inner: R, cap: usize) -> LineReader<R> {
        LineReader {
            inner,
            buf: vec![0; READ_CHUNK].into_boxed_slice(),
            start: 0,
            end: 0,
            line: Vec::new(),
            cap: cap.max(1),
            truncated: false,
            ready: false,
            eof: false,
            skip: None,
            probed: false,
            skipping: false,
            len: 0,
        }
    }

    /// Skip lines the probe picks without copying them: their first bytes stay readable through
    /// [`line`](Self::line), [`skipped`](Self::skipped) tells, [`len`](Self::len) has their size.
    pub(crate) fn with_skip(mut self, probe: Option<SkipProbe>) -> LineReader<R> {
        self.skip = probe;
        self
    }

    /// Read until a whole line is available. `Ok(true)`: take it with [`line`](Self::line);
    /// `Ok(false)`: the stream ended.
    pub(crate) async fn next_line(&mut self) -> io::Result<bool> {
        if self.ready {
            self.line.clear();
            self.truncated = false;
            self.ready = false;
            self.probed = false;
            self.skipping = false;
            self.len = 0;
        }
        loop {
            if self.start < self.end {
                let chunk = &self.buf[self.start..self.end];
                match memchr::memchr(b'\n', chunk) {
                    Some(i) => {
                        self.push(i);
                        self.start += i + 1;
                        self.probe(true);
                        self.ready = true;
                        return Ok(true);
                    }
                    None => {
                        self.push(chunk.len());
                        self.start = self.end;
                    }
                }
            }
            if self.eof {
                if self.line.is_empty() && !self.truncated {
                    return Ok(false);
                }
                self.probe(true);
                self.ready = true;
                return Ok(true);
            }
            let n = self.inner.read(&mut self.buf).await?;
            self.start = 0;
            self.end = n;
            if n == 0 {
                self.eof = true;
            }
        }
    }

    /// Append `n` bytes from the buffer to the current line, up to the cap.
    fn push(&mut self, n: usize) {
        self.len += n as u64;
        if self.skipping {
            return;
        }
        let room = self.cap.saturating_sub(self.line.len());
        let take = n.min(room);
        self.line
            .extend_from_slice(&self.buf[self.start..self.start + take]);
        if take < n {
            self.truncated = true;
        }
        self.probe(false);
    }

    /// Ask the probe about the current line once its first bytes (or all of it) are in.
    fn probe(&mut self, complete: bool) {
        let Some(skip) = self.skip else { return };
        if self.probed || (!complete && self.line.len() < SKIP_PROBE) {
            return;
        }
        self.probed = true;
        let head = &self.line[..self.line.len().min(SKIP_PROBE)];
        if skip(head) {
            self.skipping = true;
            self.line.truncate(SKIP_PROBE);
        }
    }

    /// Whether the last line was skipped unread (only its first bytes are in [`line`](Self::line)).
    pub(crate) fn skipped(&self) -> bool {
        self.skipping
    }

    /// The size of the last line in bytes, without its newline, whatever was cut or skipped.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// The line last returned by `next_line`, without its newline (and without a trailing `\r`).
    pub(crate) fn line(&self) -> &[u8] {
        let l = &self.line[..];
        l.strip_suffix(b"\r").unwrap_or(l)
    }

    /// Whether the last line was longer than the cap and cut.
    pub(crate) fn truncated(&self) -> bool {
        self.truncated
    }
}

/// What the stream told so far. Bounded: counters and the latest texts only.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    /// The answer, when the CLI marked one as final.
    pub final_text: Option<String>,
    /// The last assistant text seen (partial findings when the run is stopped early).
    pub(crate) last_text: String,
    pub tool_calls: u64,
    /// The tool the agent called last (the one at work while it runs).
    pub(crate) tool: Option<String>,
    pub usage: Usage,
    pub model: Option<String>,
    /// An error the CLI reported; a later success clears it (retries).
    pub error: Option<String>,
    /// Lines that were not understood (not JSON, truncated, unknown shape).
    pub(crate) skipped_lines: u64,
    pub lines: u64,
    /// The CLI refused a tool call before it ran because a limit was reached (pi's limits
    /// extension); that call is not in `tool_calls`.
    pub(crate) refused: bool,
}

/// An agent's progress while it works, for the live view: what its stream told so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pulse {
    pub tokens: u64,
    pub tool_calls: u64,
    pub tool: Option<String>,
}

impl Tally {
    /// The counters a live view shows.
    pub(crate) fn pulse(&self) -> Pulse {
        Pulse {
            tokens: self.usage.total,
            tool_calls: self.tool_calls,
            tool: self.tool.clone(),
        }
    }

    /// Record a tool call (`name` when the stream gives it).
    pub(crate) fn saw_tool(&mut self, name: Option<&str>) {
        self.tool_calls += 1;
        if let Some(name) = name.filter(|n| !n.trim().is_empty()) {
            self.tool = Some(name.to_string());
        }
    }

    /// Record that the CLI refused the last tool call at a limit: it never ran.
    pub(crate) fn refused_tool(&mut self) {
        self.tool_calls = self.tool_calls.saturating_sub(1);
        self.refused = true;
    }

    /// Record an assistant text as the latest seen.
    pub(crate) fn saw_text(&mut self, text: &str) {
        if !text.trim().is_empty() {
            self.last_text.clear();
            self.last_text.push_str(text);
        }
    }

    /// The answer to report: the final text, else the last assistant text.
    pub(crate) fn answer(&self) -> String {
        self.final_text
            .clone()
            .unwrap_or_else(|| self.last_text.clone())
    }
}

/// What goes into the transcript for one stdout line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TranscriptLine {
    Keep,
    /// Left out (counted in the transcript's closing note): a partial update that later lines repeat.
    Drop,
    /// Written in this shorter form: an event repeating what earlier lines already hold.
    Replace(String),
}

/// Folds one CLI's output lines into a [`Tally`]. One implementation per output format.
pub trait StreamParser: Send {
    /// One stdout line (UTF-8, lossily decoded), as it arrives.
    fn line(&mut self, line: &str, tally: &mut Tally);
    /// One stderr line, as it arrives: CLIs that report usage only in their logs are read here.
    /// Returns true for a line that is the CLI's telemetry rather than a message for people: it
    /// stays in the transcript but out of the run's stderr tail.
    fn stderr_line(&mut self, _line: &str, _tally: &mut Tally) -> bool {
        false
    }
    /// The stream ended. `success` tells whether the process exited 0. Formats that must see a
    /// closing event (a result) report its absence here.
    fn end(&mut self, _tally: &mut Tally, _success: bool) {}
    /// Lines this format never needs, recognised by their first bytes and skipped unread.
    fn skip_probe(&self) -> Option<SkipProbe> {
        None
    }
    /// How a stdout line is kept in the transcript.
    fn transcript(&self, _line: &str) -> TranscriptLine {
        TranscriptLine::Keep
    }
}

/// Feed every line of `reader` to `parser`: the loop the runner uses, minus process handling.
/// Returns the number of bytes read.
pub async fn parse_stream<R: AsyncRead + Unpin>(
    reader: R,
    parser: &mut dyn StreamParser,
    tally: &mut Tally,
    cap: usize,
) -> io::Result<u64> {
    let mut lines = LineReader::new(reader, cap).with_skip(parser.skip_probe());
    let mut bytes = 0u64;
    while lines.next_line().await? {
        bytes += lines.len() + 1;
        if lines.skipped() {
            tally.lines += 1;
            continue;
        }
        feed(parser, tally, lines.line(), lines.truncated());
    }
    Ok(bytes)
}

/// Decode one line and hand it to the parser.
pub(crate) fn feed(parser: &mut dyn StreamParser, tally: &mut Tally, line: &[u8], truncated: bool) {
    tally.lines += 1;
    if truncated {
        tally.skipped_lines += 1;
    }
    match std::str::from_utf8(line) {
        Ok(s) => parser.line(s, tally),
        Err(_) => parser.line(&String::from_utf8_lossy(line), tally),
    }
}

/// The `"type"` of a JSON event line, read without parsing the line when it starts `{"type":"…"`
/// (as pi, Claude Code and Codex all write it).
pub(crate) fn event_type(line: &str) -> Option<std::borrow::Cow<'_, str>> {
    let trimmed = line.trim_start();
    if let Some(rest) = trimmed.strip_prefix("{\"type\":\"") {
        if let Some(end) = rest.find('"') {
            let t = &rest[..end];
            if !t.contains('\\') {
                return Some(std::borrow::Cow::Borrowed(t));
            }
        }
    }
    #[derive(serde::Deserialize)]
    struct Typed {
        #[serde(rename = "type")]
        kind: Option<String>,
    }
    serde_json::from_str::<Typed>(trimmed)
        .ok()?
        .kind
        .map(std::borrow::Cow::Owned)
}

/// The `"type"` of an event line; a line without one is counted as skipped.
pub(crate) fn event_kind<'a>(
    line: &'a str,
    tally: &mut Tally,
) -> Option<std::borrow::Cow<'a, str>> {
    let kind = event_type(line);
    if kind.is_none() {
        tally.skipped_lines += 1;
    }
    kind
}

/// Parse an event line into `T`; a line of another shape is counted as skipped.
pub(crate) fn parse_event<T: serde::de::DeserializeOwned>(
    line: &str,
    tally: &mut Tally,
) -> Option<T> {
    let parsed = serde_json::from_str(line).ok();
    if parsed.is_none() {
        tally.skipped_lines += 1;
    }
    parsed
}

/// Keeps the last `cap` bytes of a text stream, cut at a character boundary.
#[derive(Debug, Clone)]
pub(crate) struct Tail {
    text: String,
    cap: usize,
}

impl Tail {
    pub(crate) fn new(cap: usize) -> Tail {
        Tail {
            text: String::new(),
            cap,
        }
    }

    pub(crate) fn push_line(&mut self, line: &str) {
        self.text.push_str(line);
        self.text.push('\n');
        // Trim only when twice the cap is reached: amortised O(1) per byte, memory ≤ 2 × cap.
        if self.text.len() > 2 * self.cap {
            self.trim();
        }
    }

    fn trim(&mut self) {
        if self.text.len() > self.cap {
            let mut from = self.text.len() - self.cap;
            while !self.text.is_char_boundary(from) {
                from += 1;
            }
            self.text.drain(..from);
        }
    }

    /// The kept tail (at most `cap` bytes).
    pub(crate) fn text(&mut self) -> &str {
        self.trim();
        &self.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines(input: &[u8], cap: usize) -> Vec<(String, bool)> {
        let mut r = LineReader::new(input, cap);
        let mut out = Vec::new();
        while r.next_line().await.unwrap() {
            out.push((
                String::from_utf8_lossy(r.line()).into_owned(),
                r.truncated(),
            ));
        }
        out
    }

    #[tokio::test]
    async fn splits_lines_and_keeps_a_last_line_without_newline() {
        let got = lines(b"a\nbb\r\n\nccc", 100).await;
        let want: Vec<(String, bool)> = ["a", "bb", "", "ccc"]
            .iter()
            .map(|s| (s.to_string(), false))
            .collect();
        assert_eq!(got, want);
        assert!(lines(b"", 10).await.is_empty());
    }

    #[tokio::test]
    async fn long_lines_are_truncated_and_the_next_line_is_intact() {
        let mut input = vec![b'x'; 200_000];
        input.extend_from_slice(b"\nnext\n");
        let got = lines(&input, 1000).await;
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].0.len(), 1000);
        assert!(got[0].1);
        assert_eq!(got[1], ("next".to_string(), false));
    }

    #[test]
    fn event_types() {
        assert_eq!(
            event_type(r#"{"type":"message_end","x":1}"#).unwrap(),
            "message_end"
        );
        assert_eq!(
            event_type(r#"{ "x": 1, "type": "turn_end" }"#).unwrap(),
            "turn_end"
        );
        assert!(event_type("not json").is_none());
        assert!(event_type(r#"{"x":1}"#).is_none());
    }

    #[test]
    fn tail_keeps_the_end() {
        let mut t = Tail::new(8);
        t.push_line("abc");
        t.push_line("defghij");
        assert_eq!(t.text(), "defghij\n");
        t.push_line("é".repeat(10).as_str());
        assert!(t.text().len() <= 8 && t.text().ends_with("é\n"));
    }

    #[tokio::test]
    async fn probed_lines_are_skipped_with_their_size_and_the_rest_is_intact() {
        fn probe(head: &[u8]) -> bool {
            head.starts_with(b"skip")
        }
        let mut input = b"keep 1\nskip ".to_vec();
        input.extend(vec![b'x'; 300_000]);
        input.extend_from_slice(b"\nskip short\nkeep 2");
        let mut r = LineReader::new(&input[..], 1000).with_skip(Some(probe));
        let mut got = Vec::new();
        while r.next_line().await.unwrap() {
            got.push((
                String::from_utf8_lossy(r.line()).into_owned(),
                r.skipped(),
                r.len(),
            ));
        }
        assert_eq!(got.len(), 4);
        assert_eq!(got[0], ("keep 1".into(), false, 6));
        assert!(got[1].1 && got[1].0.len() == SKIP_PROBE && got[1].2 == 300_005);
        assert_eq!(got[2], ("skip short".into(), true, 10));
        assert_eq!(got[3], ("keep 2".into(), false, 6));
    }

    proptest::proptest! {
        #[test]
        fn reader_never_panics_and_respects_the_cap(data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..4000), cap in 1usize..64) {
            let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
            let got = rt.block_on(lines(&data, cap));
            for (l, _) in &got {
                proptest::prop_assert!(l.len() <= cap * 3);
            }
        }
    }
}
