//! A run's progress on stderr: on a terminal a spinner line for the agent at work (with its time so
//! far), or for the gate round under way (each gate's mark as it finishes), above which finished
//! stages, gate rounds and the end are printed; elsewhere one plain line per change and per
//! finished gate. Both render the run's [`Progress`], the same view the tracking comment shows.

use std::io::Write;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::agent::Pulse;
use crate::gates::GateReport;
use crate::pipeline::{CurrentWork, Progress};
use crate::report::{
    colour_on_stderr, gate_finished_line, gate_mark, progress_lines, progress_status,
};

/// How `supervisor run` shows its progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProgressMode {
    /// Nothing while the run moves (the summary still comes at the end).
    #[default]
    Off,
    /// One plain line per change, with the time since the start.
    Plain,
    /// A live spinner line on a terminal.
    Terminal,
    /// The journal's events, one JSON object per line on stdout, as they are recorded.
    Jsonl,
}

impl ProgressMode {
    /// `Terminal` when stderr is a terminal, else `Plain`.
    pub fn for_stderr() -> ProgressMode {
        if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            ProgressMode::Terminal
        } else {
            ProgressMode::Plain
        }
    }
}

/// The live line on stderr now, if any: other writers to stderr (logs) go around it.
static LIVE: std::sync::Mutex<Option<ProgressBar>> = std::sync::Mutex::new(None);

/// Write `text` to stderr in one write, above the live line when one is drawn (so that neither a
/// frame of it is left in the scrollback nor the text runs into it). Best effort: stderr may be a
/// closed pipe.
pub fn write_stderr(text: &[u8]) -> std::io::Result<()> {
    let live = LIVE.lock().ok().and_then(|l| l.clone());
    let write = || std::io::stderr().lock().write_all(text);
    match live {
        Some(bar) => bar.suspend(write),
        None => write(),
    }
}

/// Stderr for the log subscriber: [`write_stderr`] for each event.
pub struct LogWriter;

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        write_stderr(buf).map(|()| buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// Where the live line is drawn: stderr, or (in tests) a terminal of the caller's.
type DrawTarget = Box<dyn Fn() -> ProgressDrawTarget + Send + Sync>;

/// The progress view of one run.
pub struct Console {
    mode: ProgressMode,
    started: Instant,
    last: Option<Progress>,
    bar: Option<ProgressBar>,
    target: DrawTarget,
    /// The gate round under way (terminal): its gates, the marks of those finished.
    round: Option<RoundView>,
    /// Marks may be coloured (a terminal without `NO_COLOR`).
    colour: bool,
}

/// A gate round on the live line.
struct RoundView {
    label: String,
    total: usize,
    marks: Vec<String>,
}

impl RoundView {
    fn line(&self) -> String {
        let mut line = self.label.clone();
        for mark in &self.marks {
            line.push_str(" · ");
            line.push_str(mark);
        }
        let running = self.total.saturating_sub(self.marks.len());
        if running > 0 {
            line.push_str(&format!(" · {running} running"));
        }
        line
    }
}

impl Console {
    pub fn new(mode: ProgressMode) -> Console {
        Console {
            mode,
            started: Instant::now(),
            last: None,
            bar: None,
            target: Box::new(ProgressDrawTarget::stderr),
            round: None,
            colour: mode == ProgressMode::Terminal && colour_on_stderr(),
        }
    }

    /// A console whose live line is drawn on `term` instead of stderr.
    #[cfg(test)]
    fn on(mode: ProgressMode, term: impl indicatif::TermLike + Clone + 'static) -> Console {
        let mut console = Console::new(mode);
        console.target = Box::new(move || ProgressDrawTarget::term_like(Box::new(term.clone())));
        console
    }

    /// A line that is not the run's progress (the worktree ready, say): above the live line on a
    /// terminal, a plain line elsewhere, nothing with `--progress none` or `jsonl`.
    pub(crate) fn note(&self, text: &str) {
        match (self.mode, &self.bar) {
            (ProgressMode::Plain, _) => self.say(text),
            (ProgressMode::Terminal, Some(bar)) => bar.println(text),
            (ProgressMode::Terminal, None) => {
                let _ = write_stderr(format!("{text}\n").as_bytes());
            }
            (ProgressMode::Off | ProgressMode::Jsonl, _) => {}
        }
    }

    /// A plain line with the time since the start (best effort: stderr may be a closed pipe).
    fn say(&self, text: &str) {
        let secs = self.started.elapsed().as_secs();
        // One write: stderr is unbuffered, and another writer's output must not split the line.
        let line = format!("[{:02}:{:02}] {text}\n", secs / 60, secs % 60);
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }

    /// A round of `total` gates starts, after the work at hand.
    pub(crate) fn gates_started(&mut self, total: usize) {
        if self.mode != ProgressMode::Terminal {
            return;
        }
        let label = match self.last.as_ref().and_then(|p| p.current.as_ref()) {
            Some(w) => format!("gates after {} (attempt {})", w.stage, w.attempt),
            None => "gates".to_string(),
        };
        let round = RoundView {
            label,
            total,
            marks: Vec::new(),
        };
        if let Some(bar) = &self.bar {
            bar.set_message(round.line());
        }
        self.round = Some(round);
    }

    /// A gate of the round finished: its mark joins the live line (terminal), or a line of its
    /// own (plain).
    pub(crate) fn gate_finished(&mut self, report: &GateReport) {
        match self.mode {
            ProgressMode::Plain => self.say(&gate_finished_line(report, false)),
            ProgressMode::Terminal => {
                if let Some(round) = self.round.as_mut() {
                    round.marks.push(gate_mark(report, self.colour));
                    if let Some(bar) = &self.bar {
                        bar.set_message(round.line());
                    }
                }
            }
            ProgressMode::Off | ProgressMode::Jsonl => {}
        }
    }

    /// Show `p`: what changed since the last view, and the agent at work.
    pub(crate) fn show(&mut self, p: &Progress) {
        if !matches!(self.mode, ProgressMode::Plain | ProgressMode::Terminal) {
            return;
        }
        let mut lines = progress_lines(self.last.as_ref(), p);
        let moved = self.last.as_ref().map(|l| &l.current) != Some(&p.current);
        let status = progress_status(p, None);
        if self.mode == ProgressMode::Plain {
            lines.iter().for_each(|l| self.say(l));
            if let Some(status) = status.as_ref().filter(|_| moved) {
                self.say(&format!("→ {status}"));
            }
        } else {
            // The round's verdict line keeps its gates' marks beneath it.
            let round_ended = self.last.as_ref().map(|l| &l.gates) != Some(&p.gates);
            if let Some(round) = self.round.take_if(|_| round_ended) {
                let at = lines
                    .iter()
                    .position(|l| l.starts_with("  gates after"))
                    .map_or(lines.len(), |i| i + 1);
                lines.insert(at, format!("    {}", round.marks.join(" · ")));
            }
            self.draw(&lines, status, moved, p.current.as_ref());
        }
        if p.end.is_some() {
            self.clear();
        }
        self.last = Some(p.clone());
    }

    /// Take the live line off the terminal.
    fn clear(&mut self) {
        if let Some(bar) = self.bar.take() {
            if let Ok(mut live) = LIVE.lock() {
                *live = None;
            }
            bar.finish_and_clear();
        }
    }

    /// Whether [`Console::pulse`] shows anything: the live line is a terminal's.
    pub(crate) fn wants_pulse(&self) -> bool {
        self.mode == ProgressMode::Terminal
    }

    /// The agent at work's counters so far (tokens, tool calls, latest tool) on the live line.
    pub(crate) fn pulse(&mut self, pulse: &Pulse) {
        let status = self
            .last
            .as_ref()
            .and_then(|p| progress_status(p, Some(pulse)));
        if let (Some(bar), Some(status)) = (&self.bar, status) {
            bar.set_message(status);
        }
    }

    fn draw(
        &mut self,
        lines: &[String],
        status: Option<String>,
        moved: bool,
        at: Option<&CurrentWork>,
    ) {
        let target = &self.target;
        let bar = self.bar.get_or_insert_with(|| {
            let bar = ProgressBar::with_draw_target(None, target());
            bar.set_style(
                ProgressStyle::with_template("{spinner} {msg} · {elapsed}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.enable_steady_tick(Duration::from_millis(120));
            if let Ok(mut live) = LIVE.lock() {
                *live = Some(bar.clone());
            }
            bar
        });
        for line in lines {
            bar.println(line);
        }
        if moved && at.is_some() {
            bar.reset_elapsed();
        }
        bar.set_message(status.unwrap_or_else(|| "between stages".into()));
    }
}

impl Drop for Console {
    fn drop(&mut self) {
        self.clear();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::pipeline::RunEnd;

    /// A terminal of 80 columns as indicatif drives it: rows of text, a cursor, lines that wrap at
    /// the right edge. What is left in its rows at the end is what a person scrolls back through.
    #[derive(Debug, Clone, Default)]
    struct Terminal(Arc<Mutex<Screen>>);

    #[derive(Debug, Default)]
    struct Screen {
        rows: Vec<Vec<char>>,
        row: usize,
        col: usize,
    }

    const WIDTH: usize = 80;

    impl Terminal {
        fn rows(&self) -> Vec<String> {
            let s = self.0.lock().unwrap();
            (s.rows.iter())
                .map(|r| r.iter().collect::<String>().trim_end().to_string())
                .filter(|r| !r.is_empty())
                .collect()
        }

        fn with(&self, f: impl FnOnce(&mut Screen)) -> std::io::Result<()> {
            f(&mut self.0.lock().unwrap());
            Ok(())
        }
    }

    impl Screen {
        fn put(&mut self, text: &str) {
            for c in text.chars() {
                match c {
                    '\r' => self.col = 0,
                    '\n' => (self.row, self.col) = (self.row + 1, 0),
                    c => {
                        if self.col >= WIDTH {
                            (self.row, self.col) = (self.row + 1, 0);
                        }
                        while self.rows.len() <= self.row {
                            self.rows.push(Vec::new());
                        }
                        let line = &mut self.rows[self.row];
                        line.resize(line.len().max(self.col), ' ');
                        match line.get_mut(self.col) {
                            Some(at) => *at = c,
                            None => line.push(c),
                        }
                        self.col += 1;
                    }
                }
            }
        }
    }

    impl indicatif::TermLike for Terminal {
        fn width(&self) -> u16 {
            WIDTH as u16
        }
        fn move_cursor_up(&self, n: usize) -> std::io::Result<()> {
            self.with(|s| (s.row, s.col) = (s.row.saturating_sub(n), s.col.min(WIDTH - 1)))
        }
        fn move_cursor_down(&self, n: usize) -> std::io::Result<()> {
            self.with(|s| (s.row, s.col) = (s.row + n, s.col.min(WIDTH - 1)))
        }
        fn move_cursor_right(&self, n: usize) -> std::io::Result<()> {
            self.with(|s| s.col = (s.col + n).min(WIDTH - 1))
        }
        fn move_cursor_left(&self, n: usize) -> std::io::Result<()> {
            self.with(|s| s.col = s.col.saturating_sub(n))
        }
        fn write_line(&self, text: &str) -> std::io::Result<()> {
            self.with(|s| {
                s.put(text);
                s.put("\n");
            })
        }
        fn write_str(&self, text: &str) -> std::io::Result<()> {
            self.with(|s| s.put(text))
        }
        fn clear_line(&self) -> std::io::Result<()> {
            self.with(|s| {
                if let Some(row) = s.rows.get_mut(s.row) {
                    row.clear();
                }
                s.col = 0;
            })
        }
        fn flush(&self) -> std::io::Result<()> {
            Ok(())
        }
    }

    use crate::report::test_progress as progress;

    /// On a terminal, a note (the worktree ready) goes above the live line, and nothing of the
    /// live line stays once the run ended; the end itself is left to the summary.
    #[test]
    fn a_terminal_keeps_notes_and_changes_and_no_frame_of_the_live_line() {
        let term = Terminal::default();
        let mut console = Console::on(ProgressMode::Terminal, term.clone());
        console.show(&progress(Some("Research"), None));
        console.note("worktree /w/issue-7 ready in 0.20 s");
        std::thread::sleep(Duration::from_millis(300));
        console.show(&progress(Some("Implementation"), None));
        let end = RunEnd::PullRequest {
            number: 2,
            url: "http://x/pull/2".into(),
            created: true,
        };
        console.show(&progress(None, Some(end)));
        assert_eq!(
            term.rows(),
            [
                "run 7-x · issue #7",
                "worktree /w/issue-7 ready in 0.20 s",
                "✓ Research · researcher",
                "✓ Implementation · developer",
                "✓ Audit · auditor",
            ]
        );
        assert!(LIVE.lock().unwrap().is_none(), "no live line is left");
    }

    /// `--progress none` shows nothing at all, notes included.
    #[test]
    fn no_progress_shows_no_note() {
        let term = Terminal::default();
        let mut console = Console::on(ProgressMode::Off, term.clone());
        console.show(&progress(Some("Research"), None));
        console.note("worktree /w/issue-7 ready in 0.20 s");
        assert!(term.rows().is_empty(), "{:?}", term.rows());
    }
}
