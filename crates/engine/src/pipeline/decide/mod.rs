//! The pipeline's decisions, as pure functions.
//!
//! `plan` says what to do in a column before any agent runs (auto-move, dedup skip, run, finish).
//! `decide` turns an agent's parsed outcome (and, when the move has hooks, the gate reports) into the
//! next transition. Neither does I/O; the engine applies their answers.

pub mod admission;
pub(crate) mod gates;
pub mod revision;
pub(crate) mod trust;
pub(crate) mod work;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::agent::{Action, Outcome};
use crate::audit::{self, AuditScore};
use crate::config::GateKind;
use crate::config::{BuiltIn, Dimension, Hook, Stage, Workflow};
use crate::gates::{GateReport, GateStatus, NotRunCause};

/// The spec's bound on loop iterations per run.
pub const MAX_ITERATIONS: u32 = 20;

/// What the pipeline remembers between decisions. Rebuilt from the journal on resume.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunState {
    /// Transitions made so far.
    pub(crate) iteration: u32,
    /// Counted loop-backs (auditor rejections, score-gate rejections) per stage.
    pub(crate) rejections: BTreeMap<String, u32>,
    /// Gate bounces: never counted as rejections.
    pub(crate) gate_bounces: u32,
    /// Stages skipped because their heading was already present (research dedup).
    pub(crate) skipped: BTreeSet<String>,
    /// Stages re-entered through a loop-back: dedup no longer applies to them.
    pub(crate) looped_into: BTreeSet<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TransitionKind {
    /// Built-in stage moving on (Backlog → first stage).
    Auto,
    /// A stage passed over: its heading already exists, or it is experimental and disabled.
    Skip,
    /// Normal completion.
    Forward,
    /// A requested move back (architect → research).
    LoopBack,
    /// The reviewer rejected: counted against maxRejections.
    Rejection,
    /// The reviewer approved but the computed score missed the threshold: counted too.
    ScoreGate,
    /// Blocking gates sent the work back to the same stage: never counted.
    GateBounce,
}

/// Why a stage was passed over.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum SkipReason {
    /// A trusted text already has the stage's heading: its work is done, and its audit dimension
    /// is left out of the score.
    AlreadyDone { heading: String },
    /// The stage is experimental and experimental features are off.
    Experimental,
}

/// One move of the card (or, for a gate bounce, a re-run of the same column).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Transition {
    pub from: String,
    pub to: String,
    pub kind: TransitionKind,
    pub(crate) reason: String,
    /// The audit score, on every review approval and rejection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<AuditScore>,
    /// Why the stage was skipped, for `Skip` moves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) skip: Option<SkipReason>,
    /// A gate bounce that counts against the stage's rejections (RED: the tests prove nothing).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) counted: bool,
}

impl Transition {
    pub fn new(
        from: &str,
        to: &str,
        kind: TransitionKind,
        reason: impl Into<String>,
    ) -> Transition {
        Transition {
            from: from.to_string(),
            to: to.to_string(),
            kind,
            reason: reason.into(),
            score: None,
            skip: None,
            counted: false,
        }
    }
}

/// Why the pipeline stopped short of Done.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum StopReason {
    MaxRejections {
        stage: String,
        count: u32,
        max: u32,
        /// The rejection that went over the limit.
        last: Box<Transition>,
    },
    IterationLimit {
        max: u32,
    },
    /// Only required gates that could not run block: no agent can fix a missing or broken tool.
    RequiredGatesNotRun {
        gates: String,
    },
    /// Only required gates block that could not reach a verdict for now (a service failing for the
    /// moment, CI still pending): nothing needs fixing, running again later resumes.
    RequiredGatesUnavailable {
        gates: String,
    },
}

impl StopReason {
    /// Running the same command again later, with nothing changed, may get past this stop.
    pub(crate) fn is_resumable(&self) -> bool {
        matches!(self, StopReason::RequiredGatesUnavailable { .. })
    }
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StopReason::MaxRejections {
                stage, count, max, ..
            } => write!(
                f,
                "{stage} rejected the work {count} times (maxRejections {max}): a human needs to look at it"
            ),
            StopReason::IterationLimit { max } => {
                write!(
                    f,
                    "the pipeline made {max} moves without reaching Done (iteration limit)"
                )
            }
            StopReason::RequiredGatesNotRun { gates } => write!(
                f,
                "required gates could not run: {gates}; fix what each reason names (install the \
                 missing tools, which `supervisor doctor` names with their install commands, or \
                 grant the permission named) or mark the gates not required, then run again"
            ),
            StopReason::RequiredGatesUnavailable { gates } => write!(
                f,
                "required gates could not reach a verdict yet: {gates}; nothing is wrong with the \
                 change and nothing was lost: run the same command again later to resume"
            ),
        }
    }
}

/// What to do in a column before running anything.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    RunAgent,
    Move(Transition),
    Finish,
    Stop(StopReason),
}

/// The answer of `decide`.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    Move(Transition),
    /// Run these gates, then call `decide` again with their reports.
    RunGates {
        transition: Transition,
        hooks: Vec<Hook>,
    },
    Stop(StopReason),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecideError {
    #[error("the card is in column `{column}`, which the workflow does not know (known: {known})")]
    UnknownColumn { column: String, known: String },
    #[error(
        "the agent asked to move from {from} to {to}, which {from} may not do (allowed: {allowed}); \
         add `{to}` to canLoopBackTo in the workflow if this loop-back is wanted"
    )]
    TargetNotAllowed {
        from: String,
        to: String,
        allowed: String,
    },
    #[error("the outcome contradicts itself: {0}")]
    Contradictory(String),
    #[error("{0} runs no agent")]
    NotAnAgentStage(String),
}

impl RunState {
    /// Record a transition.
    pub(crate) fn apply(&mut self, t: &Transition) {
        self.iteration += 1;
        self.count(t);
        match t.kind {
            TransitionKind::Rejection | TransitionKind::ScoreGate | TransitionKind::LoopBack => {
                self.looped_into.insert(t.to.clone());
            }
            TransitionKind::GateBounce => self.gate_bounces += 1,
            TransitionKind::Skip => {
                if let Some(SkipReason::AlreadyDone { .. }) = t.skip {
                    self.skipped.insert(t.from.clone());
                }
            }
            TransitionKind::Auto | TransitionKind::Forward => {}
        }
    }

    /// Audit dimensions to leave out because their stage was skipped.
    pub(crate) fn excluded_dimensions(&self, workflow: &Workflow) -> Vec<Dimension> {
        self.skipped
            .iter()
            .filter_map(|s| workflow.stage(s).and_then(|st| st.score_dimension))
            .collect()
    }

    /// Count `t` against its stage's rejections when it is one: a rejection, a score-gate refusal,
    /// or a gate bounce counted like one. The one rule for every count of rejections, also for the
    /// rejection that went over the limit and stopped the run (counted, never applied).
    pub(crate) fn count(&mut self, t: &Transition) {
        let counts = match t.kind {
            TransitionKind::Rejection | TransitionKind::ScoreGate => true,
            TransitionKind::GateBounce => t.counted,
            _ => false,
        };
        if counts {
            *self.rejections.entry(t.from.clone()).or_default() += 1;
        }
    }

    pub(crate) fn total_rejections(&self) -> u32 {
        self.rejections.values().sum()
    }
}

fn lookup<'w>(workflow: &'w Workflow, column: &str) -> Result<&'w Stage, DecideError> {
    workflow
        .stage_for_column(column)
        .ok_or_else(|| DecideError::UnknownColumn {
            column: column.to_string(),
            known: workflow
                .stages
                .iter()
                .map(|s| s.status.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        })
}

/// What to do in `column`. `has_heading` tells whether a trusted text (issue body or a trusted comment)
/// already carries a Markdown heading.
pub fn plan(
    workflow: &Workflow,
    state: &RunState,
    column: &str,
    experimental: bool,
    has_heading: &dyn Fn(&str) -> bool,
) -> Result<Step, DecideError> {
    let stage = lookup(workflow, column)?;
    if stage.built_in == Some(BuiltIn::Done) {
        return Ok(Step::Finish);
    }
    if state.iteration >= MAX_ITERATIONS {
        return Ok(Step::Stop(StopReason::IterationLimit {
            max: MAX_ITERATIONS,
        }));
    }
    let forward = || {
        stage
            .forward
            .clone()
            .unwrap_or_else(|| workflow.done().status.clone())
    };
    if stage.built_in == Some(BuiltIn::Backlog) {
        return Ok(Step::Move(Transition {
            from: stage.status.clone(),
            to: forward(),
            kind: TransitionKind::Auto,
            reason: format!("{} moves on automatically", stage.status),
            score: None,
            skip: None,
            counted: false,
        }));
    }
    if stage.experimental && !experimental {
        return Ok(Step::Move(Transition {
            from: stage.status.clone(),
            to: forward(),
            kind: TransitionKind::Skip,
            reason: "experimental stage; enableExperimentalFeatures is off".into(),
            score: None,
            skip: Some(SkipReason::Experimental),
            counted: false,
        }));
    }
    if let Some(heading) = &stage.skip_when_heading {
        if !state.looped_into.contains(&stage.status) && has_heading(heading) {
            return Ok(Step::Move(Transition {
                from: stage.status.clone(),
                to: forward(),
                kind: TransitionKind::Skip,
                reason: format!(
                    "already has ## {heading}: {} skipped",
                    stage.agent.as_deref().unwrap_or("agent")
                ),
                score: None,
                skip: Some(SkipReason::AlreadyDone {
                    heading: heading.clone(),
                }),
                counted: false,
            }));
        }
    }
    Ok(Step::RunAgent)
}

/// Inputs of `decide`.
#[derive(Debug, Clone, Copy)]
pub struct DecideInput<'a> {
    pub(crate) workflow: &'a Workflow,
    pub(crate) state: &'a RunState,
    pub(crate) column: &'a str,
    pub(crate) outcome: &'a Outcome,
    /// Reports of the hooks `decide` asked for, once they ran.
    pub(crate) gates: Option<&'a [GateReport]>,
    /// The settings' maxRejections, for review stages without their own.
    pub(crate) max_rejections: u32,
    pub(crate) threshold: f64,
    pub(crate) experimental: bool,
}

/// Where an outcome points, besides the stage's forward move.
enum Target {
    Forward,
    /// A loop-back the stage may make.
    Back(String),
    /// A marker naming a later stage other than the forward one.
    Later(String),
}

/// The next transition after an agent's outcome.
pub fn decide(input: DecideInput<'_>) -> Result<Decision, DecideError> {
    let stage = lookup(input.workflow, input.column)?;
    if stage.built_in.is_some() {
        return Err(DecideError::NotAnAgentStage(stage.status.clone()));
    }
    if input.state.iteration >= MAX_ITERATIONS {
        return Ok(Decision::Stop(StopReason::IterationLimit {
            max: MAX_ITERATIONS,
        }));
    }
    let forward = stage
        .forward
        .clone()
        .unwrap_or_else(|| input.workflow.done().status.clone());
    let who = stage.agent.clone().unwrap_or_else(|| stage.status.clone());
    let requested = match target(input, stage, &forward)? {
        Target::Forward => None,
        Target::Back(back) => Some(back),
        Target::Later(m) => {
            // A marker to a later stage other than the default forward: honour it, as the map says.
            let reason = format!("{who} output a marker for {m}");
            return finish_forward(input, stage, m, reason);
        }
    };
    if stage.review {
        return decide_review(input, stage, forward, &who, requested);
    }
    let Some(back) = requested else {
        return finish_forward(input, stage, forward, format!("{who} completed"));
    };
    let reason = format!("{who} sent the issue back to {back}");
    // Non-review loop-backs count only when the stage sets its own limit.
    if stage.max_rejections.is_some() {
        return Ok(count_rejection(
            input,
            stage,
            back,
            TransitionKind::LoopBack,
            reason,
            None,
        ));
    }
    Ok(Decision::Move(Transition::new(
        &stage.status,
        &back,
        TransitionKind::LoopBack,
        reason,
    )))
}

/// Where the outcome asks to go: its `targetStatus` (which the stage must allow), or its marker.
fn target(input: DecideInput<'_>, stage: &Stage, forward: &str) -> Result<Target, DecideError> {
    let workflow = input.workflow;
    match (&input.outcome.target_status, &input.outcome.marker_target) {
        (Some(t), _) => {
            let target = workflow
                .stage_for_column(t)
                .map(|s| s.status.clone())
                .unwrap_or_else(|| t.clone());
            if target == forward {
                Ok(Target::Forward)
            } else if stage.can_loop_back_to.contains(&target) {
                Ok(Target::Back(target))
            } else {
                let mut allowed = vec![forward.to_string()];
                allowed.extend(stage.can_loop_back_to.iter().cloned());
                Err(DecideError::TargetNotAllowed {
                    from: stage.status.clone(),
                    to: t.clone(),
                    allowed: allowed.join(", "),
                })
            }
        }
        (None, Some(m)) if workflow.is_backwards(&stage.status, m) => Ok(Target::Back(m.clone())),
        (None, Some(m)) if m != forward => Ok(Target::Later(m.clone())),
        _ => Ok(Target::Forward),
    }
}

/// A review stage: an approval is scored (and must pass), a rejection counts.
fn decide_review(
    input: DecideInput<'_>,
    stage: &Stage,
    forward: String,
    who: &str,
    requested: Option<String>,
) -> Result<Decision, DecideError> {
    let reject_to = || {
        stage
            .reject_to
            .clone()
            .expect("validated review stages have a reject target")
    };
    match (input.outcome.action, requested) {
        (Action::Approved, Some(back)) => Err(DecideError::Contradictory(format!(
            "{who} APPROVED but asked to go back to {back}"
        ))),
        (Action::Approved, None) => {
            let score = audit::score(
                &input.outcome.findings,
                &input.state.excluded_dimensions(input.workflow),
                input.threshold,
                input.outcome.audit_score,
            );
            if score.passed {
                let reason = format!(
                    "{who} approved; audit score {}/{} meets the threshold {}",
                    score.passing, score.total, input.threshold
                );
                let mut d = finish_forward(input, stage, forward, reason)?;
                if let Decision::Move(t) | Decision::RunGates { transition: t, .. } = &mut d {
                    t.score = Some(score);
                }
                return Ok(d);
            }
            let reason = score_refusal(who, &score, input.threshold);
            Ok(count_rejection(
                input,
                stage,
                reject_to(),
                TransitionKind::ScoreGate,
                reason,
                Some(score),
            ))
        }
        (Action::Rejected, back) => {
            let n = input.outcome.findings.len();
            let reason = format!(
                "{who} rejected the work ({n} finding{})",
                if n == 1 { "" } else { "s" }
            );
            let back = back.unwrap_or_else(reject_to);
            // Scored too, so that the rejection can say how far the work is from the threshold.
            let score = audit::score(
                &input.outcome.findings,
                &input.state.excluded_dimensions(input.workflow),
                input.threshold,
                input.outcome.audit_score,
            );
            Ok(count_rejection(
                input,
                stage,
                back,
                TransitionKind::Rejection,
                reason,
                Some(score),
            ))
        }
        (Action::Complete, _) => Err(DecideError::Contradictory(format!(
            "{who} must APPROVE or REJECT in the {} stage",
            stage.status
        ))),
    }
}

/// Why an approval was refused by the numbers.
fn score_refusal(who: &str, score: &AuditScore, threshold: f64) -> String {
    let names = Dimension::list;
    if score.meets_threshold() {
        format!(
            "{who} approved with a critical finding ({}), which is never approved",
            names(&score.critical)
        )
    } else {
        format!(
            "{who} approved, but the audit score {}/{} is below the threshold {threshold} (failing: {})",
            score.passing,
            score.total,
            names(&score.failing)
        )
    }
}

/// A forward move: through the stage's hooks first, if it has any.
fn finish_forward(
    input: DecideInput<'_>,
    stage: &Stage,
    to: String,
    reason: String,
) -> Result<Decision, DecideError> {
    let transition = Transition::new(&stage.status, &to, TransitionKind::Forward, reason);
    let hooks: Vec<Hook> = stage
        .hooks
        .iter()
        .filter(|h| input.experimental || !h.experimental)
        .cloned()
        .collect();
    if hooks.is_empty() {
        return Ok(Decision::Move(transition));
    }
    let Some(reports) = input.gates else {
        return Ok(Decision::RunGates { transition, hooks });
    };
    let blocking = gates::blocking(reports);
    if blocking.is_empty() {
        return Ok(Decision::Move(transition));
    }
    let names = gates::labels(&blocking).join(", ");
    let causes: Option<Vec<NotRunCause>> = blocking.iter().map(|r| r.not_run_cause()).collect();
    if let Some(causes) = causes {
        // Transient trouble and pending CI pass with time; anything else needs a person.
        return Ok(Decision::Stop(
            if causes.into_iter().all(NotRunCause::is_resumable) {
                StopReason::RequiredGatesUnavailable { gates: names }
            } else {
                StopReason::RequiredGatesNotRun { gates: names }
            },
        ));
    }
    let reason = format!(
        "gates blocked: {names}; returning to {}",
        stage.agent.as_deref().unwrap_or("the agent")
    );
    // Tests that do not fail on the base prove nothing: sent back like a rejection, and counted.
    let red = blocking
        .iter()
        .any(|r| r.kind == GateKind::Red && r.status == GateStatus::Fail);
    if red {
        let mut d = count_rejection(
            input,
            stage,
            stage.status.clone(),
            TransitionKind::GateBounce,
            reason,
            None,
        );
        match &mut d {
            Decision::Move(t) => t.counted = true,
            Decision::Stop(StopReason::MaxRejections { last, .. }) => last.counted = true,
            _ => {}
        }
        return Ok(d);
    }
    Ok(Decision::Move(Transition::new(
        &stage.status,
        &stage.status,
        TransitionKind::GateBounce,
        reason,
    )))
}

fn count_rejection(
    input: DecideInput<'_>,
    stage: &Stage,
    to: String,
    kind: TransitionKind,
    reason: String,
    score: Option<AuditScore>,
) -> Decision {
    let max = stage.max_rejections.unwrap_or(input.max_rejections);
    let count = input
        .state
        .rejections
        .get(&stage.status)
        .copied()
        .unwrap_or(0)
        + 1;
    let transition = Transition {
        score,
        ..Transition::new(&stage.status, &to, kind, reason)
    };
    if count > max {
        Decision::Stop(StopReason::MaxRejections {
            stage: stage.status.clone(),
            count,
            max,
            last: Box::new(transition),
        })
    } else {
        Decision::Move(transition)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::{AuditFinding, Evidence, Severity, parse_outcome};
    use crate::config::GateKind;
    use crate::gates::GateStatus;

    /// The pipeline without the oracle's gates (which `oracle_*` tests add back).
    fn wf() -> Workflow {
        Workflow::parse(
            std::path::Path::new("workflow-without-oracle.json"),
            crate::config::WORKFLOW_WITHOUT_ORACLE,
            &BTreeMap::new(),
        )
        .unwrap()
    }

    fn outcome(text: &str, wf: &Workflow, column: &str) -> Outcome {
        parse_outcome(text, wf.stage(column).unwrap()).unwrap()
    }

    fn run(
        wf: &Workflow,
        state: &RunState,
        column: &str,
        text: &str,
        gates: Option<&[GateReport]>,
    ) -> Result<Decision, DecideError> {
        let o = outcome(text, wf, column);
        decide(DecideInput {
            gates,
            ..input(wf, state, column, &o)
        })
    }

    fn input<'a>(
        workflow: &'a Workflow,
        state: &'a RunState,
        column: &'a str,
        outcome: &'a Outcome,
    ) -> DecideInput<'a> {
        DecideInput {
            workflow,
            state,
            column,
            outcome,
            gates: None,
            max_rejections: 3,
            threshold: 0.75,
            experimental: false,
        }
    }

    fn moved(d: Result<Decision, DecideError>) -> Transition {
        match d {
            Ok(Decision::Move(t)) => t,
            other => panic!("expected a move, got {other:?}"),
        }
    }

    fn gate(kind: GateKind, status: GateStatus, required: bool) -> GateReport {
        GateReport {
            duration_ms: 1,
            required,
            ..GateReport::new(kind, kind.name(), status)
        }
    }

    /// Every forward row of the spec's workflow, by JSON and by marker.
    #[test]
    fn forward_moves_follow_the_marker_map() {
        let wf = wf();
        let state = RunState::default();
        let rows = [
            ("Research", "RESEARCH_COMPLETE", "Architecture"),
            ("Architecture", "ARCHITECTURE_COMPLETE", "TestDesign"),
            ("TestDesign", "TEST_PLAN_COMPLETE", "Implementation"),
        ];
        for (column, marker, to) in rows {
            let t = moved(run(&wf, &state, column, marker, None));
            assert_eq!(
                (t.to.as_str(), t.kind),
                (to, TransitionKind::Forward),
                "{column} marker"
            );
            let t = moved(run(&wf, &state, column, r#"{"action": "COMPLETE"}"#, None));
            assert_eq!(t.to, to, "{column} json");
        }
    }

    #[test]
    fn implementation_runs_its_hooks_before_audit() {
        let wf = wf();
        let state = RunState::default();
        match run(
            &wf,
            &state,
            "Implementation",
            "IMPLEMENTATION_COMPLETE",
            None,
        )
        .unwrap()
        {
            Decision::RunGates { transition, hooks } => {
                assert_eq!(transition.to, "Audit");
                assert_eq!(hooks.len(), 7);
            }
            other => panic!("{other:?}"),
        }
        // All gates fine (warnings and optional not-run included) → Audit.
        let reports = [
            gate(GateKind::Tsc, GateStatus::Pass, false),
            gate(GateKind::Duplicates, GateStatus::Warn, false),
            gate(GateKind::Lsp, GateStatus::not_run("pylsp missing"), false),
        ];
        let t = moved(run(
            &wf,
            &state,
            "Implementation",
            "IMPLEMENTATION_COMPLETE",
            Some(&reports),
        ));
        assert_eq!((t.to.as_str(), t.kind), ("Audit", TransitionKind::Forward));
    }

    #[test]
    fn blocking_gates_bounce_without_counting() {
        let wf = wf();
        let mut state = RunState::default();
        let reports = [
            gate(GateKind::Tsc, GateStatus::Fail, false),
            gate(
                GateKind::Lsp,
                GateStatus::not_run("typescript-language-server missing"),
                true,
            ),
            gate(GateKind::Ci, GateStatus::Pass, false),
        ];
        let t = moved(run(
            &wf,
            &state,
            "Implementation",
            r#"{"action":"COMPLETE"}"#,
            Some(&reports),
        ));
        assert_eq!(t.kind, TransitionKind::GateBounce);
        assert_eq!(t.to, "Implementation");
        assert!(t.reason.contains("tsc (fail)"), "{}", t.reason);
        assert!(
            t.reason
                .contains("lsp (not run: typescript-language-server missing)")
        );
        assert!(!t.reason.contains("ci"));
        state.apply(&t);
        assert_eq!(state.gate_bounces, 1);
        assert_eq!(state.total_rejections(), 0);
    }

    #[test]
    fn a_required_ci_gate_without_a_verdict_stops_resumably_only_when_time_can_help() {
        let wf = wf();
        let state = RunState::default();
        let ci = |cause: NotRunCause| GateReport {
            ..gate(
                GateKind::Ci,
                GateStatus::not_run_because(cause, "CI status unknown: rate limited"),
                true,
            )
        };
        let stop = |reports: &[GateReport]| match run(
            &wf,
            &state,
            "Implementation",
            "IMPLEMENTATION_COMPLETE",
            Some(reports),
        ) {
            Ok(Decision::Stop(reason)) => reason,
            other => panic!("a required gate without a verdict stops: {other:?}"),
        };
        for cause in [NotRunCause::Transient, NotRunCause::Pending] {
            let reason = stop(&[ci(cause)]);
            assert!(
                matches!(reason, StopReason::RequiredGatesUnavailable { .. }),
                "{cause:?}: {reason:?}"
            );
            assert!(reason.is_resumable());
            assert!(
                reason
                    .to_string()
                    .contains("run the same command again later")
            );
        }
        let reason = stop(&[ci(NotRunCause::Denied)]);
        assert!(
            matches!(reason, StopReason::RequiredGatesNotRun { .. }),
            "a missing permission needs a person: {reason:?}"
        );
        assert!(!reason.is_resumable());
        // A transient CI failure next to a missing tool: a person must act first.
        let missing = gate(GateKind::Tsc, GateStatus::not_run("tsc not found"), true);
        let reason = stop(&[ci(NotRunCause::Transient), missing]);
        assert!(!reason.is_resumable(), "{reason:?}");
        // An optional CI gate without a verdict does not block: the audit proceeds.
        let optional = GateReport {
            required: false,
            ..ci(NotRunCause::Pending)
        };
        let t = moved(run(
            &wf,
            &state,
            "Implementation",
            "IMPLEMENTATION_COMPLETE",
            Some(&[optional]),
        ));
        assert_eq!(t.to, "Audit");
    }

    #[test]
    fn required_gates_that_cannot_run_stop_instead_of_bouncing() {
        let wf = wf();
        let state = RunState::default();
        let missing = gate(GateKind::Tsc, GateStatus::not_run("tsc not found"), true);
        match run(
            &wf,
            &state,
            "Implementation",
            "IMPLEMENTATION_COMPLETE",
            Some(std::slice::from_ref(&missing)),
        ) {
            Ok(Decision::Stop(StopReason::RequiredGatesNotRun { gates })) => {
                assert_eq!(gates, "tsc (not run: tsc not found)");
            }
            other => panic!("{other:?}"),
        }
        // With a failure the developer can fix, it still bounces.
        let reports = [missing, gate(GateKind::Lsp, GateStatus::Fail, false)];
        let t = moved(run(
            &wf,
            &state,
            "Implementation",
            "IMPLEMENTATION_COMPLETE",
            Some(&reports),
        ));
        assert_eq!(t.kind, TransitionKind::GateBounce);
    }

    #[test]
    fn architect_loops_back_to_research() {
        let wf = wf();
        let mut state = RunState::default();
        for text in [
            "FEEDBACK_RESEARCH",
            r#"{"action": "COMPLETE", "targetStatus": "Research"}"#,
            r#"{"action": "COMPLETE", "targetStatus": "research"}"#,
        ] {
            let t = moved(run(&wf, &state, "Architecture", text, None));
            assert_eq!(
                (t.to.as_str(), t.kind),
                ("Research", TransitionKind::LoopBack),
                "{text}"
            );
        }
        let t = moved(run(&wf, &state, "Architecture", "FEEDBACK_RESEARCH", None));
        state.apply(&t);
        // Loop-backs are not rejections, and research runs again even if findings exist.
        assert_eq!(state.total_rejections(), 0);
        assert_eq!(
            plan(&wf, &state, "Research", false, &|_| true).unwrap(),
            Step::RunAgent
        );
    }

    #[test]
    fn target_status_needs_permission() {
        let wf = wf();
        let state = RunState::default();
        let err = run(
            &wf,
            &state,
            "TestDesign",
            r#"{"action": "COMPLETE", "targetStatus": "Research"}"#,
            None,
        )
        .unwrap_err();
        assert_eq!(
            err,
            DecideError::TargetNotAllowed {
                from: "TestDesign".into(),
                to: "Research".into(),
                allowed: "Implementation".into()
            }
        );
        assert!(err.to_string().contains("canLoopBackTo"));
        // Forward by targetStatus is the normal move.
        let t = moved(run(
            &wf,
            &state,
            "TestDesign",
            r#"{"action": "COMPLETE", "targetStatus": "Implementation"}"#,
            None,
        ));
        assert_eq!(t.kind, TransitionKind::Forward);
        // Skipping ahead, an unknown column and the stage itself are refused.
        for (column, target) in [
            ("Research", "Done"),
            ("Research", "Nowhere"),
            ("Architecture", "Architecture"),
        ] {
            let text = format!(r#"{{"action": "COMPLETE", "targetStatus": "{target}"}}"#);
            assert!(
                run(&wf, &state, column, &text, None).is_err(),
                "{column} → {target}"
            );
        }
    }

    #[test]
    fn auditor_rejections_count_up_to_max() {
        let wf = wf();
        let mut state = RunState::default();
        let reject = r#"{"action": "REJECTED", "findings": [{"severity": "critical", "dimension": "test-quality", "message": "no tests"}]}"#;
        for n in 1..=3 {
            let t = moved(run(&wf, &state, "Audit", reject, None));
            assert_eq!(
                (t.to.as_str(), t.kind),
                ("Implementation", TransitionKind::Rejection)
            );
            assert!(t.reason.contains("1 finding"));
            state.apply(&t);
            assert_eq!(state.rejections["Audit"], n);
        }
        match run(&wf, &state, "Audit", reject, None).unwrap() {
            Decision::Stop(StopReason::MaxRejections {
                stage, count, max, ..
            }) => {
                assert_eq!((stage.as_str(), count, max), ("Audit", 4, 3));
            }
            other => panic!("{other:?}"),
        }
        // Markers and headings reject too.
        let fresh = RunState::default();
        assert_eq!(
            moved(run(&wf, &fresh, "Audit", "AUDIT_REJECTED", None)).kind,
            TransitionKind::Rejection
        );
        assert_eq!(
            moved(run(&wf, &fresh, "Audit", "## Audit Rejected\nbad", None)).kind,
            TransitionKind::Rejection
        );
    }

    #[test]
    fn stage_max_rejections_overrides_settings() {
        let text = crate::config::DEFAULT_WORKFLOW.replace(
            "\"canLoopBackTo\": [\"Implementation\"]",
            "\"canLoopBackTo\": [\"Implementation\"], \"maxRejections\": 1",
        );
        let wf = Workflow::parse(std::path::Path::new("w.json"), &text, &BTreeMap::new()).unwrap();
        let mut state = RunState::default();
        let t = moved(run(&wf, &state, "Audit", "AUDIT_REJECTED", None));
        state.apply(&t);
        assert!(matches!(
            run(&wf, &state, "Audit", "AUDIT_REJECTED", None),
            Ok(Decision::Stop(StopReason::MaxRejections {
                max: 1,
                count: 2,
                ..
            }))
        ));
    }

    #[test]
    fn approval_is_always_scored() {
        let wf = wf();
        let state = RunState::default();
        // Empty findings: still scored (8/8), and the score is attached.
        let t = moved(run(
            &wf,
            &state,
            "Audit",
            r#"{"action": "APPROVED", "findings": []}"#,
            None,
        ));
        assert_eq!(t.to, "Done");
        let s = t.score.expect("approvals carry a score");
        assert_eq!((s.passing, s.total, s.passed), (8, 8, true));
        // No findings key at all, approval by marker, approval by heading: all scored.
        for text in [
            r#"{"action": "APPROVED"}"#,
            "AUDIT_DECISION: APPROVED",
            "## Audit Approved",
        ] {
            let t = moved(run(&wf, &state, "Audit", text, None));
            assert_eq!(
                t.score.map(|s| (s.passing, s.total)),
                Some((8, 8)),
                "{text}"
            );
        }
    }

    #[test]
    fn score_gate_rejects_low_approvals() {
        let wf = wf();
        let mut state = RunState::default();
        let findings: Vec<AuditFinding> = ["test-quality", "completeness", "code-quality"]
            .iter()
            .map(|d| AuditFinding {
                severity: Severity::Warning,
                dimension: Dimension::parse(d).unwrap(),
                message: "x".into(),
                file: None,
                line: None,
            })
            .collect();
        let mut o = outcome(r#"{"action": "APPROVED"}"#, &wf, "Audit");
        o.findings = findings;
        let inp = input(&wf, &state, "Audit", &o);
        let t = moved(decide(inp));
        assert_eq!(
            (t.to.as_str(), t.kind),
            ("Implementation", TransitionKind::ScoreGate)
        );
        assert_eq!(t.score.as_ref().map(|s| (s.passing, s.total)), Some((5, 8)));
        assert!(
            t.reason.contains("5/8 is below the threshold 0.75"),
            "{}",
            t.reason
        );
        state.apply(&t);
        assert_eq!(state.rejections["Audit"], 1);
        // Exactly at the threshold passes: drop one warning → 6/8.
        o.findings.pop();
        let t = moved(decide(input(&wf, &state, "Audit", &o)));
        assert_eq!(t.to, "Done");
    }

    #[test]
    fn which_dimension_a_skip_drops_is_read_from_its_type_not_its_text() {
        let wf = wf();
        // An experimental skip whose reason reads like a dedup drops nothing.
        let mut state = RunState::default();
        let mut t = Transition::new(
            "Research",
            "Architecture",
            TransitionKind::Skip,
            "already has ## Research Findings (as text only)",
        );
        t.skip = Some(SkipReason::Experimental);
        state.apply(&t);
        assert!(state.excluded_dimensions(&wf).is_empty());
        // A dedup drops its stage's dimension whatever its reason says.
        let mut state = RunState::default();
        let mut t = Transition::new("Research", "Architecture", TransitionKind::Skip, "skipped");
        t.skip = Some(SkipReason::AlreadyDone {
            heading: "Research Findings".into(),
        });
        state.apply(&t);
        assert_eq!(
            state.excluded_dimensions(&wf),
            [Dimension::ResearchIncorporation]
        );
    }

    #[test]
    fn research_dedup_skips_and_drops_the_dimension() {
        let wf = wf();
        let mut state = RunState::default();
        let step = plan(&wf, &state, "Research", false, &|h| {
            h == "Research Findings"
        })
        .unwrap();
        let Step::Move(t) = step else {
            panic!("{step:?}")
        };
        assert_eq!(
            (t.to.as_str(), t.kind),
            ("Architecture", TransitionKind::Skip)
        );
        assert!(t.reason.contains("researcher skipped"));
        state.apply(&t);
        assert_eq!(
            state.excluded_dimensions(&wf),
            [Dimension::ResearchIncorporation]
        );
        // The audit is then scored over 7 dimensions.
        let t = moved(run(&wf, &state, "Audit", r#"{"action": "APPROVED"}"#, None));
        assert_eq!(t.score.map(|s| (s.passing, s.total)), Some((7, 7)));
        // Without the heading the researcher runs.
        assert_eq!(
            plan(&wf, &RunState::default(), "Research", false, &|_| false).unwrap(),
            Step::RunAgent
        );
    }

    #[test]
    fn built_in_columns() {
        let wf = wf();
        let state = RunState::default();
        let Step::Move(t) = plan(&wf, &state, "Backlog", false, &|_| false).unwrap() else {
            panic!()
        };
        assert_eq!((t.to.as_str(), t.kind), ("Research", TransitionKind::Auto));
        assert_eq!(
            plan(&wf, &state, "Done", false, &|_| false).unwrap(),
            Step::Finish
        );
        assert!(matches!(
            plan(&wf, &state, "Triage", false, &|_| false),
            Err(DecideError::UnknownColumn { .. })
        ));
        assert_eq!(
            plan(&wf, &state, "Test Design", false, &|_| false).unwrap(),
            Step::RunAgent
        );
    }

    #[test]
    fn twenty_iterations_at_most() {
        let wf = wf();
        let mut state = RunState::default();
        let mut column = "Architecture".to_string();
        // Architect and researcher bounce forever; the limit stops it.
        let mut stops = 0;
        for _ in 0..30 {
            match plan(&wf, &state, &column, false, &|_| false).unwrap() {
                Step::Stop(StopReason::IterationLimit { max }) => {
                    assert_eq!(max, MAX_ITERATIONS);
                    stops += 1;
                    break;
                }
                Step::RunAgent => {}
                other => panic!("{other:?}"),
            }
            let text = if column == "Architecture" {
                "FEEDBACK_RESEARCH"
            } else {
                "RESEARCH_COMPLETE"
            };
            let t = moved(run(&wf, &state, &column, text, None));
            state.apply(&t);
            column = t.to;
        }
        assert_eq!(stops, 1);
        assert_eq!(state.iteration, MAX_ITERATIONS);
    }

    #[test]
    fn contradictions_are_errors() {
        let wf = wf();
        let state = RunState::default();
        assert!(matches!(
            run(
                &wf,
                &state,
                "Audit",
                r#"{"action": "APPROVED", "targetStatus": "Implementation"}"#,
                None
            ),
            Err(DecideError::Contradictory(_))
        ));
        let o = Outcome {
            action: Action::Complete,
            evidence: Evidence::Marker("X".into()),
            agent_name: None,
            summary: None,
            comment_body: None,
            target_status: None,
            audit_score: None,
            findings: vec![],
            pr_title: None,
            pr_body: None,
            marker_target: None,
            notes: vec![],
            tests: vec![],
            contract: vec![],
            already_resolved: false,
            partial: None,
        };
        let inp = input(&wf, &state, "Audit", &o);
        assert!(matches!(decide(inp), Err(DecideError::Contradictory(_))));
        assert!(matches!(
            decide(DecideInput {
                column: "Backlog",
                ..inp
            }),
            Err(DecideError::NotAnAgentStage(_))
        ));
    }

    #[test]
    fn experimental_stages_and_hooks() {
        let text = r#"{ "stages": [
            { "status": "Backlog", "builtIn": "backlog" },
            { "status": "Polish", "agentName": "developer", "experimental": true },
            { "status": "Build", "agentName": "developer",
              "hooks": ["tsc", { "gate": "lsp", "experimental": true }] },
            { "status": "Done", "builtIn": "done" } ] }"#;
        let wf = Workflow::parse(std::path::Path::new("w.json"), text, &BTreeMap::new()).unwrap();
        let state = RunState::default();
        let Step::Move(t) = plan(&wf, &state, "Polish", false, &|_| false).unwrap() else {
            panic!()
        };
        assert_eq!((t.to.as_str(), t.kind), ("Build", TransitionKind::Skip));
        assert_eq!(
            plan(&wf, &state, "Polish", true, &|_| false).unwrap(),
            Step::RunAgent
        );
        let o = outcome("{\"action\":\"COMPLETE\"}", &wf, "Build");
        let mut inp = input(&wf, &state, "Build", &o);
        let Decision::RunGates { hooks, .. } = decide(inp).unwrap() else {
            panic!()
        };
        assert_eq!(hooks.len(), 1);
        inp.experimental = true;
        let Decision::RunGates { hooks, .. } = decide(inp).unwrap() else {
            panic!()
        };
        assert_eq!(hooks.len(), 2);
    }
}
