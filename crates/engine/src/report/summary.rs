//! The end-of-run summary (Phase 3) for humans and machines, and the mermaid run map.

use std::fmt::Write;

use super::comments::{human_duration, human_tokens};
use crate::pipeline::{RunEnd, RunSummary, Transition, TransitionKind};

/// One line saying how the run ended.
/// One line saying how a run ended.
pub fn summary_headline(s: &RunSummary) -> String {
    headline(&s.end)
}

pub(super) fn headline(end: &RunEnd) -> String {
    match end {
        RunEnd::PullRequest { url, created, .. } => {
            format!(
                "✔ approved — pull request {}: {url}",
                if *created { "opened" } else { "already open" }
            )
        }
        RunEnd::AlreadyDone => "✔ the issue is already in Done: nothing to do".into(),
        RunEnd::ClosedAsResolved => {
            "✔ no changes were needed: the issue was closed as already resolved".into()
        }
        RunEnd::Stopped { stage, reason } => format!("✖ stopped in {stage}: {reason}"),
        RunEnd::Refused { reason } => format!("✖ not started: {reason}"),
        RunEnd::Interrupted => {
            "✖ interrupted: the agent was stopped and the worktree removed".into()
        }
        RunEnd::Paused { reason } => {
            format!("… paused: {reason}; run the same command again to resume")
        }
        RunEnd::DryRun { .. } => "dry run: nothing was written".into(),
        RunEnd::Revised {
            url, round, sha, ..
        } => format!("✔ revision {round} pushed ({sha}): {url}"),
        RunEnd::NothingToRevise { reason } => format!("✔ nothing to revise: {reason}"),
        RunEnd::Planned { tasks } => format!("✔ planned: {}", planned_tasks(tasks)),
        RunEnd::EpicFinished {
            tasks,
            pull_request,
        } => format!(
            "✔ epic done: {}{}",
            (tasks.iter())
                .map(|(task, n, outcome)| format!("{task} #{n} {outcome}"))
                .collect::<Vec<_>>()
                .join(", "),
            pull_request.map_or(String::new(), |n| format!("; pull request #{n}"))
        ),
    }
}

/// An epic's planned tasks: `3 task(s) as sub-issues: units #40, …`.
pub fn planned_tasks(tasks: &[(String, u64)]) -> String {
    let list: Vec<String> = tasks.iter().map(|(id, n)| format!("{id} #{n}")).collect();
    format!("{} task(s) as sub-issues: {}", tasks.len(), list.join(", "))
}

/// The headline as posted on GitHub (the tracking comment): a pause's reason may hold an error's
/// detail, which stays in the journal and the log.
pub(super) fn public_headline(end: &RunEnd) -> String {
    match end {
        RunEnd::Paused { .. } => "… paused; run the same command again to resume".into(),
        other => headline(other),
    }
}

/// What the run's agents cost, when their CLIs said.
pub(super) fn cost(s: &RunSummary) -> Option<String> {
    (s.total_cost() > 0.0).then(|| format!("${:.4}", s.total_cost()))
}

/// The summary for a terminal.
pub fn summary_text(s: &RunSummary) -> String {
    let mut out = String::new();
    let _ = match s.title.is_empty() {
        true => writeln!(out, "supervisor · {}#{}", s.repo, s.issue),
        false => writeln!(out, "supervisor · {}#{} — {}", s.repo, s.issue, s.title),
    };
    let headline = headline(&s.end);
    let _ = writeln!(out, "{headline}");
    if let RunEnd::DryRun { plan } = &s.end {
        for step in plan {
            let _ = writeln!(out, "  · {step}");
        }
    }
    if !s.agents.is_empty() {
        let _ = writeln!(out, "\nagents");
        let _ = writeln!(
            out,
            "  {:<15} {:<14} {:>3} {:>9} {:>8} {:>6}  {:<24} exit",
            "stage", "agent", "try", "time", "tokens", "tools", "model"
        );
        for a in &s.agents {
            let _ = writeln!(
                out,
                "  {:<15} {:<14} {:>3} {:>9} {:>8} {:>6}  {:<24} {}",
                a.stage,
                a.agent,
                a.attempt,
                human_duration(a.duration_ms),
                human_tokens(a.tokens),
                a.tool_calls,
                a.model.as_deref().unwrap_or("-"),
                a.exit
            );
        }
        let _ = writeln!(
            out,
            "  total: {} tokens{}, {} dispatches",
            human_tokens(s.total_tokens()),
            cost(s).map(|c| format!(", {c}")).unwrap_or_default(),
            s.agents.len()
        );
    }
    if let Some(score) = &s.score {
        let _ = writeln!(
            out,
            "\naudit score {}/{} (threshold {}){}",
            score.passing,
            score.total,
            score.threshold,
            if score.failing.is_empty() {
                String::new()
            } else {
                format!(
                    "; failing: {}",
                    crate::config::Dimension::list(&score.failing)
                )
            }
        );
    }
    let _ = writeln!(
        out,
        "loops: {} rejection{}, {} gate bounce{}",
        s.rejections,
        if s.rejections == 1 { "" } else { "s" },
        s.gate_bounces,
        if s.gate_bounces == 1 { "" } else { "s" }
    );
    if !s.gate_rounds.is_empty() {
        let _ = writeln!(out, "\ngates");
        for g in &s.gate_rounds {
            let mut line = format!("  {} attempt {}: {}", g.stage, g.attempt, g.verdict);
            if !g.failing.is_empty() {
                let _ = write!(line, "; failing {}", g.failing.join(", "));
            }
            if !g.not_run.is_empty() {
                let _ = write!(line, "; not run {}", g.not_run.join(", "));
            }
            if !g.warnings.is_empty() {
                let _ = write!(line, "; warnings {}", g.warnings.join(", "));
            }
            let _ = writeln!(out, "{line}");
        }
    }
    if !s.warnings.is_empty() {
        let _ = writeln!(out, "\nwarnings");
        for w in &s.warnings {
            let _ = writeln!(out, "  ! {w}");
        }
    }
    let _ = writeln!(
        out,
        "\njournal {} · {}",
        s.journal,
        human_duration(s.duration_ms)
    );
    out
}

/// A mermaid flowchart of the moves the run made, numbered in order.
pub fn run_map(transitions: &[Transition]) -> String {
    let id = |s: &str| -> String { s.chars().filter(|c| c.is_ascii_alphanumeric()).collect() };
    let mut out = String::from("flowchart LR\n");
    let mut nodes: Vec<&str> = Vec::new();
    for t in transitions {
        for n in [t.from.as_str(), t.to.as_str()] {
            if !nodes.contains(&n) {
                nodes.push(n);
                let _ = writeln!(out, "    {}[{}]", id(n), n);
            }
        }
    }
    for (i, t) in transitions.iter().enumerate() {
        let label = match t.kind {
            TransitionKind::Auto => "auto",
            TransitionKind::Skip => "skipped",
            TransitionKind::Forward => "complete",
            TransitionKind::LoopBack => "loop back",
            TransitionKind::Rejection => "rejected",
            TransitionKind::ScoreGate => "score gate",
            TransitionKind::GateBounce => "gates blocked",
        };
        let arrow = match t.kind {
            TransitionKind::Forward | TransitionKind::Auto | TransitionKind::Skip => "-->",
            _ => "-.->",
        };
        let _ = writeln!(
            out,
            "    {} {arrow}|{} {label}| {}",
            id(&t.from),
            i + 1,
            id(&t.to)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gates::{GateReport, GateStatus, Verdict};
    use crate::pipeline::{AgentLine, GateRound};

    fn t(from: &str, to: &str, kind: TransitionKind) -> Transition {
        Transition::new(from, to, kind, "r")
    }

    fn transitions() -> Vec<Transition> {
        use TransitionKind::*;
        vec![
            t("Backlog", "Research", Auto),
            t("Research", "Architecture", Forward),
            t("Architecture", "TestDesign", Forward),
            t("TestDesign", "Implementation", Forward),
            t("Implementation", "Implementation", GateBounce),
            t("Implementation", "Audit", Forward),
            t("Audit", "Implementation", Rejection),
            t("Implementation", "Audit", Forward),
            t("Audit", "Done", Forward),
        ]
    }

    #[test]
    fn run_map_numbers_every_move() {
        insta::assert_snapshot!(run_map(&transitions()));
    }

    #[test]
    fn summary_text_and_json() {
        let s = RunSummary {
            run_id: crate::ids::RunId::new("42-20261122T030000Z"),
            repo: "acme/widgets".into(),
            issue: 42,
            title: "Parse durations".into(),
            end: RunEnd::PullRequest {
                number: 7,
                url: "http://127.0.0.1:1/acme/widgets/pull/7".into(),
                created: true,
            },
            agents: vec![AgentLine {
                stage: "Research".into(),
                agent: "researcher".into(),
                attempt: 1,
                backend: "scripted".into(),
                duration_ms: 1200,
                tokens: 12_345,
                cost_usd: 0.0123,
                tool_calls: 4,
                model: Some("m".into()),
                exit: "completed".into(),
            }],
            transitions: transitions(),
            gate_rounds: vec![
                GateRound {
                    stage: "Implementation".into(),
                    attempt: 1,
                    verdict: Verdict::Blocked,
                    failing: vec!["tsc".into()],
                    not_run: vec!["lsp".into()],
                    warnings: vec![],
                },
                GateRound {
                    stage: "Implementation".into(),
                    attempt: 2,
                    verdict: Verdict::NotBlocked,
                    failing: vec![],
                    not_run: vec!["lsp".into()],
                    warnings: vec![],
                },
            ],
            gates: Vec::new(),
            rejections: 1,
            gate_bounces: 1,
            score: None,
            warnings: vec!["setup: npm ci failed twice".into()],
            journal: ".supervisor/runs/42/events.jsonl".into(),
            duration_ms: 4200,
        };
        let text = summary_text(&s);
        insta::assert_snapshot!(text);
        assert!(
            text.contains("attempt 2: not-blocked; not run lsp"),
            "a round with a gate not run is never called passed"
        );
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["end"]["kind"], "pull-request");
        assert_eq!(v["end"]["url"], "http://127.0.0.1:1/acme/widgets/pull/7");
        assert_eq!(v["agents"][0]["toolCalls"], 4);
        assert_eq!(v["transitions"].as_array().unwrap().len(), 9);
        assert_eq!(v["gateRounds"][1]["verdict"], "not-blocked");
    }

    #[test]
    fn a_gate_round_names_hooks_and_takes_the_gates_verdict() {
        use crate::config::GateKind;
        let report = GateReport::new;
        let reports = [
            report(GateKind::Command, "unit tests", GateStatus::Pass),
            report(GateKind::Lsp, "lsp", GateStatus::not_run("pylsp missing")),
            report(GateKind::Duplicates, "clones", GateStatus::Warn),
        ];
        let round = GateRound::new("Implementation", 2, &reports);
        assert_eq!(round.verdict, Verdict::NotBlocked);
        assert_eq!(round.not_run, ["lsp"]);
        assert_eq!(round.warnings, ["clones"]);
        assert!(round.failing.is_empty());
        let all_pass = GateRound::new("Implementation", 1, &reports[..1]);
        assert_eq!(all_pass.verdict, Verdict::Pass);
    }
}
