//! A run's progress on the terminal: lines for what changed since the last view (a stage done, a
//! gate round, the pull request, the end) and the status of the agent at work.

use super::comments::human_tokens;
use super::gates::duration_text;
use crate::agent::Pulse;
use crate::gates::{GateReport, GateStatus, truncate_chars};
use crate::pipeline::{GateRound, Progress, ReviewRejection, StageMark};

/// Whether text on stderr may be coloured: a terminal, and no `NO_COLOR`
/// (<https://no-color.org>: set and not empty).
pub fn colour_on_stderr() -> bool {
    std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// A finished gate's mark and its ANSI colour: ✔ pass, ✖ fail, ! warn, – n/a, ⊘ not run.
fn mark_of(status: &GateStatus) -> (&'static str, &'static str) {
    match status {
        GateStatus::Pass => ("✔", "32"),
        GateStatus::Fail => ("✖", "31"),
        GateStatus::Warn => ("!", "33"),
        GateStatus::NotApplicable => ("–", "2"),
        GateStatus::NotRun { .. } => ("⊘", "35"),
    }
}

fn painted(mark: &str, code: &str, colour: bool) -> String {
    if colour {
        format!("\x1b[{code}m{mark}\x1b[0m")
    } else {
        mark.to_string()
    }
}

/// A finished gate in a round's live line: `✔ tsc 1.2 s`, `✖ lint 0.1 s`, `⊘ lsp not run`.
pub fn gate_mark(r: &GateReport, colour: bool) -> String {
    let (mark, code) = mark_of(&r.status);
    let mark = painted(mark, code, colour);
    match &r.status {
        GateStatus::NotRun { .. } => format!("{mark} {} not run", r.name),
        GateStatus::NotApplicable => format!("{mark} {} n/a", r.name),
        _ => format!("{mark} {} {}", r.name, duration_text(r.duration_ms)),
    }
}

/// A finished gate on a line of its own: `  ✔ tsc · pass · 1.2 s`, with why when it did not pass
/// (`  ⊘ lsp · not run (required): typescript-language-server not found · 0.0 s`).
pub fn gate_finished_line(r: &GateReport, colour: bool) -> String {
    let (mark, code) = mark_of(&r.status);
    let label = match &r.status {
        GateStatus::NotRun { reason, .. } if r.required => format!("not run (required): {reason}"),
        GateStatus::Fail | GateStatus::Warn => {
            let why = truncate_chars(r.summary.lines().next().unwrap_or_default(), 160);
            match why.as_str() {
                "" => r.status.label(),
                why => format!("{}: {why}", r.status.label()),
            }
        }
        other => other.label(),
    };
    format!(
        "  {} {} · {label} · {}",
        painted(mark, code, colour),
        r.name,
        duration_text(r.duration_ms)
    )
}

/// What changed from `prev` (none: the first view) to `next`, one line each: a stage done or
/// stopped, a review sending the work back, a gate round, the pull request.
pub fn progress_lines(prev: Option<&Progress>, next: &Progress) -> Vec<String> {
    let mut lines = Vec::new();
    if prev.is_none() {
        lines.push(format!("run {} · issue #{}", next.run_id, next.issue));
    }
    let mark_before = |stage: &str| {
        prev.and_then(|p| p.stages.iter().find(|s| s.stage == stage))
            .map(|s| s.mark)
    };
    for s in &next.stages {
        if mark_before(&s.stage) == Some(s.mark) {
            continue;
        }
        match s.mark {
            StageMark::Done => lines.push(format!("✓ {} · {}", s.stage, s.agent)),
            StageMark::Stopped => lines.push(format!("✖ {} · {}", s.stage, s.agent)),
            StageMark::Paused => lines.push(format!("⏸ {} · {}", s.stage, s.agent)),
            StageMark::Current | StageMark::Pending => {}
        }
    }
    let seen = prev.map_or(0, |p| p.rejections.len());
    lines.extend(next.rejections.iter().skip(seen).map(rejection_line));
    if let Some(g) = next
        .gates
        .as_ref()
        .filter(|g| prev.and_then(|p| p.gates.as_ref()) != Some(g))
    {
        lines.push(gates_line(g));
    }
    if let Some(pr) = next
        .pr
        .as_ref()
        .filter(|_| prev.is_none_or(|p| p.pr.is_none()))
    {
        lines.push(format!("pull request {pr}"));
    }
    // How the run ended is not among them: the summary printed after the run says it.
    lines
}

/// A review stage sending the work back: `✘ Audit rejected (score 0.62 < 0.80): README.md …`.
pub(crate) fn rejection_line(r: &ReviewRejection) -> String {
    let why = match &r.score {
        Some(s) if !s.critical.is_empty() && s.meets_threshold() => format!(
            " (critical finding: {})",
            crate::config::Dimension::list(&s.critical)
        ),
        Some(s) => format!(
            " (score {:.2} {} {:.2})",
            s.ratio(),
            if s.meets_threshold() { "≥" } else { "<" },
            s.threshold
        ),
        None => String::new(),
    };
    let finding = r
        .finding
        .as_deref()
        .map(|f| {
            format!(
                ": {}",
                truncate_chars(f.lines().next().unwrap_or_default(), 160)
            )
        })
        .unwrap_or_default();
    format!("✘ {} rejected{why}{finding}", r.stage)
}

fn gates_line(g: &GateRound) -> String {
    let mut line = format!(
        "  gates after {} (attempt {}): {}",
        g.stage,
        g.attempt,
        g.verdict.as_str()
    );
    for (what, names) in [
        ("failing", &g.failing),
        ("not run", &g.not_run),
        ("warnings", &g.warnings),
    ] {
        if !names.is_empty() {
            line.push_str(&format!("; {what}: {}", names.join(", ")));
        }
    }
    line
}

/// The agent at work, its attempt and the tokens spent so far (none: nothing at work); with the
/// agent's live counters (`pulse`), its tokens count in and its tool calls and latest tool show.
pub fn progress_status(p: &Progress, pulse: Option<&Pulse>) -> Option<String> {
    let w = p.current.as_ref()?;
    let live_tokens = pulse.map_or(0, |l| l.tokens);
    let done = p
        .stages
        .iter()
        .filter(|s| s.mark == StageMark::Done)
        .count();
    let mut line = format!(
        "{} · {}, attempt {} · stage {}/{} · {} tokens so far",
        w.stage,
        w.agent,
        w.attempt,
        done + 1,
        p.stages.len(),
        human_tokens(p.tokens + live_tokens)
    );
    if let Some(l) = pulse.filter(|l| l.tool_calls > 0) {
        line.push_str(&format!(" · {} tool calls", l.tool_calls));
        if let Some(tool) = &l.tool {
            line.push_str(&format!(" · {tool}"));
        }
    }
    Some(line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::GateKind;

    #[test]
    fn a_finished_gate_shows_its_mark_time_and_why_never_a_pass_when_it_did_not_run() {
        let report = |status: GateStatus, summary: &str, required: bool| GateReport {
            duration_ms: 2_340,
            summary: summary.into(),
            required,
            ..GateReport::new(GateKind::Tsc, "tsc", status)
        };
        let pass = report(GateStatus::Pass, "0 errors", false);
        assert_eq!(gate_mark(&pass, false), "✔ tsc 2.3 s");
        assert_eq!(gate_mark(&pass, true), "\x1b[32m✔\x1b[0m tsc 2.3 s");
        assert_eq!(gate_finished_line(&pass, false), "  ✔ tsc · pass · 2.3 s");
        let fail = report(GateStatus::Fail, "3 errors\nmore", false);
        assert_eq!(gate_mark(&fail, false), "✖ tsc 2.3 s");
        assert_eq!(
            gate_finished_line(&fail, false),
            "  ✖ tsc · fail: 3 errors · 2.3 s"
        );
        let missing = GateStatus::not_run("tsc not found");
        let optional = report(missing.clone(), "tsc not found", false);
        assert_eq!(gate_mark(&optional, false), "⊘ tsc not run");
        assert_eq!(
            gate_finished_line(&optional, false),
            "  ⊘ tsc · not run: tsc not found · 2.3 s"
        );
        let required = report(missing, "tsc not found", true);
        assert_eq!(
            gate_finished_line(&required, true),
            "  \x1b[35m⊘\x1b[0m tsc · not run (required): tsc not found · 2.3 s"
        );
        let long = report(GateStatus::Warn, &"x".repeat(300), false);
        let line = gate_finished_line(&long, false);
        assert!(
            line.starts_with("  ! tsc · warn: xxx") && line.ends_with("x… · 2.3 s"),
            "{line}"
        );
    }
    use crate::gates::Verdict;
    use crate::pipeline::RunEnd;

    fn progress(at: Option<&str>, gates: Option<GateRound>) -> Progress {
        let mut p = super::super::tracking::tests::progress(at, None);
        p.gates = gates;
        p
    }

    #[test]
    fn each_change_is_one_line_and_nothing_else_repeats() {
        let first = progress(Some("Research"), None);
        assert_eq!(progress_lines(None, &first), ["run 7-x · issue #7"]);
        let second = progress(Some("Implementation"), None);
        assert_eq!(
            progress_lines(Some(&first), &second),
            ["✓ Research · researcher"]
        );
        assert_eq!(progress_lines(Some(&second), &second), Vec::<String>::new());
        assert_eq!(
            progress_status(&second, None).unwrap(),
            "Implementation · developer, attempt 2 · stage 2/3 · 12.3k tokens so far"
        );
        let round = GateRound {
            stage: "Implementation".into(),
            attempt: 2,
            verdict: Verdict::Blocked,
            failing: vec!["tsc".into()],
            not_run: vec!["knip".into()],
            warnings: vec![],
        };
        let third = progress(Some("Implementation"), Some(round));
        assert_eq!(
            progress_lines(Some(&second), &third),
            ["  gates after Implementation (attempt 2): blocked; failing: tsc; not run: knip"]
        );
        let mut last = third.clone();
        last.stages = Progress::marks(
            &[("Research".into(), Some("researcher".into()))],
            Some("Research"),
            StageMark::Stopped,
            StageMark::Pending,
        );
        last.current = None;
        last.end = Some(RunEnd::Stopped {
            stage: "Research".into(),
            reason: "why".into(),
        });
        // The end is the summary's to say: printed once, after the run.
        assert_eq!(
            progress_lines(Some(&third), &last),
            ["✖ Research · researcher"]
        );
        assert_eq!(progress_status(&last, None), None);
        // While the agent works, its stream's counters join the line.
        let pulse = Pulse {
            tokens: 700,
            tool_calls: 3,
            tool: Some("bash".into()),
        };
        assert_eq!(
            progress_status(&second, Some(&pulse)).unwrap(),
            "Implementation · developer, attempt 2 · stage 2/3 · 13.0k tokens so far · 3 tool calls · bash"
        );
    }
}
