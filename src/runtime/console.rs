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

/// The progress view of one run.
pub struct Console {
    mode: ProgressMode,
    started: Instant,
    last: Option<Progress>,
    bar: Option<ProgressBar>,
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
            round: None,
            colour: mode == ProgressMode::Terminal && colour_on_stderr(),
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
    pub fn gates_started(&mut self, total: usize) {
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
    pub fn gate_finished(&mut self, report: &GateReport) {
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
    pub fn show(&mut self, p: &Progress) {
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
            if let Some(bar) = self.bar.take() {
                bar.finish_and_clear();
            }
        }
        self.last = Some(p.clone());
    }

    /// Whether [`Console::pulse`] shows anything: the live line is a terminal's.
    pub fn wants_pulse(&self) -> bool {
        self.mode == ProgressMode::Terminal
    }

    /// The agent at work's counters so far (tokens, tool calls, latest tool) on the live line.
    pub fn pulse(&mut self, pulse: &Pulse) {
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
        let bar = self.bar.get_or_insert_with(|| {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template("{spinner} {msg} · {elapsed}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.enable_steady_tick(Duration::from_millis(120));
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
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}
