//! Decisions around one stage attempt: what an agent's run yields, why work came back, and what a
//! decided move needs done before it is applied (gate notes, undoing a commit, the pull request).

use crate::agent::{AgentRun, ExitReason, Outcome, ProtocolError, human_duration, parse_outcome};
use crate::config::{BuiltIn, Stage, Workflow};
use crate::gates::{GateReport, dead_code_requires_uncommit};
use std::collections::BTreeMap;

use crate::pipeline::context::Return;
use crate::pipeline::journal::Halt;

use super::{Transition, TransitionKind};

/// The outcome of an agent's run, or why the attempt halts.
pub(crate) fn outcome_of(stage: &Stage, agent: &str, run: &AgentRun) -> Result<Outcome, Halt> {
    let stop = |reason: String| Halt::stop(crate::pipeline::UserText::ours(reason));
    match &run.exit {
        ExitReason::Completed => {}
        ExitReason::Interrupted => return Err(Halt::Interrupted),
        ExitReason::Stalled(_) => {
            return Err(Halt::Stalled {
                reason: format!(
                    "{agent} {}; it was stopped, and running again starts {} afresh",
                    exit_text(&run.exit),
                    stage.status
                ),
            });
        }
        ExitReason::TokenBudget { .. } if run.degraded() => {
            // Graceful degradation: keep the partial findings and go on.
            let mut o = parse_outcome(&run.final_text, stage)
                .unwrap_or_else(|_| partial_outcome(&run.final_text, stage));
            o.partial = Some(format!("{agent} stopped when it {}", exit_text(&run.exit)));
            return Ok(o);
        }
        // What the CLI said (a provider's error, the OS's) stays in the journal and the log: it
        // may name what only the machine running supervisor should know.
        ExitReason::Failed(_) => {
            return Err(stop(format!(
                "{agent} failed; `supervisor runs why` shows its error, and running again starts {} afresh",
                stage.status
            )));
        }
        ExitReason::SpawnFailed(_) => {
            return Err(stop(format!(
                "{agent} could not be started: its backend's command did not run where supervisor runs; `supervisor doctor` checks it, `supervisor runs why` shows the error"
            )));
        }
        other => return Err(stop(format!("{agent} {}", exit_text(other)))),
    }
    parse_outcome(&run.final_text, stage).map_err(|e| match e {
        ProtocolError::Empty | ProtocolError::Refusal { .. } => stop(format!("{agent}: {e}")),
        e => Halt::Unusable {
            problem: e.to_string(),
        },
    })
}

/// The outcome of a researcher stopped at its budget: its partial text, moving on.
fn partial_outcome(text: &str, stage: &Stage) -> Outcome {
    let mut o =
        parse_outcome("{\"action\": \"COMPLETE\"}", stage).expect("a literal outcome parses");
    o.comment_body = Some(text.trim().to_string()).filter(|t| !t.is_empty());
    o
}

/// How an agent run ended, for comments and the summary.
pub(crate) fn exit_text(exit: &ExitReason) -> String {
    match exit {
        ExitReason::Completed => "completed".into(),
        ExitReason::Failed(m) => format!("failed: {m}"),
        ExitReason::TimedOut(d) => format!("timed out after {}", human_duration(*d)),
        ExitReason::Stalled(d) => format!("stalled: no output for {}", human_duration(*d)),
        ExitReason::TokenBudget { used, budget } => {
            format!("exceeded the token budget ({used} of {budget} tokens)")
        }
        ExitReason::ToolCallCap { calls, cap } => {
            format!("reached the tool-call cap ({calls} of {cap})")
        }
        ExitReason::Interrupted => "interrupted".into(),
        ExitReason::SpawnFailed(m) => format!("could not start: {m}"),
    }
}

/// Why work is back in `stage`: the last transition into it, with what sent it back as the journal
/// recorded it (the sender's outcome, the gate reports, the score) — never comment text, which a
/// failed post or a forger could change.
pub(crate) fn return_context(
    transitions: &[Transition],
    outcomes: &BTreeMap<String, Outcome>,
    last_gates: Option<&[GateReport]>,
    stage: &Stage,
) -> Option<Return> {
    let t = transitions.iter().rev().find(|t| t.to == stage.status)?;
    let sender = outcomes.get(&t.from);
    let note = || {
        sender
            .and_then(|o| o.comment_body.clone().or_else(|| o.summary.clone()))
            .unwrap_or_default()
    };
    let findings = || sender.map(|o| o.findings.clone()).unwrap_or_default();
    let from = t.from.clone();
    match t.kind {
        TransitionKind::GateBounce => last_gates.map(|r| Return::GatesBlocked {
            reports: r.to_vec(),
        }),
        TransitionKind::ScoreGate => t.score.clone().map(|score| Return::ScoreGate {
            score,
            findings: findings(),
        }),
        TransitionKind::Rejection => Some(Return::Rejected {
            from,
            note: note(),
            findings: findings(),
        }),
        TransitionKind::LoopBack => Some(Return::LoopBack { from, note: note() }),
        TransitionKind::Auto | TransitionKind::Skip | TransitionKind::Forward => None,
    }
}

/// The commit message of an agent's work. Control characters of the title (a NUL would make git
/// refuse the commit) become spaces.
pub(crate) fn commit_message(issue: u64, title: &str, agent: &str, attempt: u32) -> String {
    let title: String = title
        .trim()
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    format!("#{issue}: {title} ({agent} attempt {attempt})")
}

/// A developer stage that left its branch without commits.
pub(crate) fn unchanged_after_commit_stage(stage: &Stage, ahead: u32) -> bool {
    stage.commits && ahead == 0
}

/// Why a run whose developer changed nothing stops: an agent saying the work is already done is no
/// proof (its tools may all have failed), and an issue is closed as resolved only on evidence.
pub(crate) fn unproven_resolution(agent: &str) -> String {
    format!(
        "{agent} changed nothing, and nothing proves the issue already resolved: no test of it ran and          passed on the base branch. supervisor does not close an issue on an agent's word; look at it          and close it if it is resolved, or say what is missing and run again"
    )
}

/// What a decided move needs before it is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct MoveWork {
    /// Post the combined note of the blocking gates.
    pub(crate) gate_note: bool,
    /// Undo the agent's commit (the dead-code gate failed).
    pub(crate) undo_commit: bool,
    /// Post the score-gate rejection.
    pub(crate) score_note: bool,
    /// Open the pull request: a review approved into Done.
    pub(crate) pull_request: bool,
}

pub(crate) fn move_work(
    workflow: &Workflow,
    stage: &Stage,
    t: &Transition,
    gates: Option<&[GateReport]>,
) -> MoveWork {
    let bounce = t.kind == TransitionKind::GateBounce;
    MoveWork {
        gate_note: bounce,
        undo_commit: bounce && gates.is_some_and(dead_code_requires_uncommit),
        score_note: t.kind == TransitionKind::ScoreGate && t.score.is_some(),
        pull_request: stage.review
            && workflow
                .stage(&t.to)
                .is_some_and(|s| s.built_in == Some(BuiltIn::Done)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ended(exit: ExitReason) -> AgentRun {
        AgentRun {
            role: "developer".into(),
            backend: "pi".into(),
            final_text: String::new(),
            tool_calls: 0,
            usage: Default::default(),
            duration: std::time::Duration::from_millis(10),
            model: None,
            exit,
            stderr_tail: String::new(),
            transcript: None,
            keep_partial: false,
        }
    }

    #[test]
    fn an_agent_that_failed_or_never_started_is_said_without_what_its_cli_or_the_os_said() {
        let wf = Workflow::builtin(&BTreeMap::new());
        let stage = wf.stage("Implementation").unwrap();
        let said = |exit: ExitReason| match outcome_of(stage, "developer", &ended(exit)) {
            Err(Halt::Stop { reason, .. }) => reason.to_string(),
            other => panic!("{other:?}"),
        };
        let spawn = said(ExitReason::SpawnFailed(
            "/opt/ci/secret-runner/bin/pi: No such file or directory (os error 2)".into(),
        ));
        assert!(spawn.contains("developer could not be started"), "{spawn}");
        assert!(spawn.contains("`supervisor doctor`"), "{spawn}");
        for part in ["/opt/ci", "os error", "No such file"] {
            assert!(!spawn.contains(part), "{part} in {spawn}");
        }
        let failed = said(ExitReason::Failed("403 key sk-live-123 revoked".into()));
        assert!(failed.contains("developer failed"), "{failed}");
        assert!(
            !failed.contains("sk-live") && !failed.contains("403"),
            "{failed}"
        );
        // Supervisor's own limits are said as they are.
        let timeout = said(ExitReason::TimedOut(std::time::Duration::from_secs(600)));
        assert!(
            timeout.contains("developer timed out after 10m"),
            "{timeout}"
        );
    }
}
