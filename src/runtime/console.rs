//! A run's progress on stderr: on a terminal a spinner line for the agent at work (with its time so
//! far) above which finished stages, gate rounds and the end are printed; elsewhere one plain line
//! per change. Both render the run's [`Progress`], the same view the tracking comment shows.

use std::io::Write;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::agent::Pulse;
use crate::pipeline::{CurrentWork, Progress};
use crate::report::{progress_lines, progress_status};

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
}

impl Console {
    pub fn new(mode: ProgressMode) -> Console {
        Console {
            mode,
            started: Instant::now(),
            last: None,
            bar: None,
        }
    }

    /// Show `p`: what changed since the last view, and the agent at work.
    pub fn show(&mut self, p: &Progress) {
        if !matches!(self.mode, ProgressMode::Plain | ProgressMode::Terminal) {
            return;
        }
        let lines = progress_lines(self.last.as_ref(), p);
        let moved = self.last.as_ref().map(|l| &l.current) != Some(&p.current);
        let status = progress_status(p, None);
        if self.mode == ProgressMode::Plain {
            let secs = self.started.elapsed().as_secs();
            let mut out = std::io::stderr().lock();
            let mut say = |text: &str| {
                let _ = writeln!(out, "[{:02}:{:02}] {text}", secs / 60, secs % 60);
            };
            lines.iter().for_each(|l| say(l));
            if let Some(status) = status.as_ref().filter(|_| moved) {
                say(&format!("→ {status}"));
            }
        } else {
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
