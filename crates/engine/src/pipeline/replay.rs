//! Replaying a run: its journal folded through today's decisions.
//!
//! Every decision the run took from what its journal holds — the plan in a column, the move after
//! an agent's outcome, the gates' verdict, the audit score against the threshold — is taken again
//! by the same functions the engine calls ([`plan`], [`decide`], [`gates::reweigh`]), with the
//! configuration given, on the state the run had at that point. Nothing is read but the journal:
//! no GitHub, no agent, no git. What differs from what the run recorded is reported; a decision
//! that needs something the journal does not hold is reported as not replayable, never guessed.

use std::cell::RefCell;

use serde::Serialize;

use super::decide::work::unproven_resolution;
use super::decide::{
    DecideInput, Decision, RunState, SkipReason, Step, Transition, TransitionKind, decide, gates,
    plan,
};
use super::journal::{Entry, Event, Halt};
use crate::agent::{Evidence, Outcome};
use crate::audit::AuditScore;
use crate::config::{Settings, Workflow};
use crate::gates::{GateReport, Verdict};
use crate::github::MarkerKind;

/// What a decision chose.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Choice {
    /// The stage's agent runs.
    RunAgent,
    /// The card moves (a gate bounce: the stage runs again).
    Move {
        to: String,
        transition: TransitionKind,
        /// A gate bounce counted like a rejection.
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        counted: bool,
        reason: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        score: Option<AuditScore>,
    },
    /// The run stops: a human is needed.
    Stop { reason: String },
    /// The run pauses: running again later resumes it.
    Pause { reason: String },
}

impl Choice {
    fn of_transition(t: &Transition) -> Choice {
        Choice::Move {
            to: t.to.clone(),
            transition: t.kind,
            counted: t.counted,
            reason: t.reason.clone(),
            score: t.score.clone(),
        }
    }

    /// Whether two choices are the same decision: the same move (and, for a scored move, the
    /// same score and verdict), or a stop or pause for the same reason. A move's wording is not
    /// compared: it names the threshold, which may change without changing the move.
    fn same(&self, other: &Choice) -> bool {
        let score = |s: &Option<AuditScore>| s.as_ref().map(|s| (s.passing, s.total, s.passed));
        match (self, other) {
            (
                Choice::Move {
                    to,
                    transition,
                    counted,
                    score: s,
                    ..
                },
                Choice::Move {
                    to: to2,
                    transition: transition2,
                    counted: counted2,
                    score: s2,
                    ..
                },
            ) => {
                to == to2
                    && transition == transition2
                    && counted == counted2
                    && score(s) == score(s2)
            }
            _ => self == other,
        }
    }

    /// One line for people.
    pub fn describe(&self) -> String {
        match self {
            Choice::RunAgent => "run the stage's agent".into(),
            Choice::Move {
                to,
                transition,
                reason,
                score,
                ..
            } => {
                let kind = serde_json::to_value(transition)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default();
                let score = score
                    .as_ref()
                    .map(|s| {
                        format!(
                            "; audit score {}/{} against the threshold {}: {}",
                            s.passing,
                            s.total,
                            s.threshold,
                            if s.passed { "passes" } else { "fails" }
                        )
                    })
                    .unwrap_or_default();
                format!("{kind} to {to} ({reason}){score}")
            }
            Choice::Stop { reason } => format!("stop: {reason}"),
            Choice::Pause { reason } => format!("pause: {reason}"),
        }
    }
}

/// Which decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DecisionPoint {
    /// What to do in a column before any agent runs.
    Plan,
    /// The move after an agent's outcome (and the gates' reports).
    Outcome,
}

/// The gates' verdict, recorded and replayed, when the gates were judged both times and differ.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GatesChange {
    pub recorded: Verdict,
    pub replayed: Verdict,
    /// The gates that blocked (`tsc (fail)`).
    pub recorded_blocking: Vec<String>,
    pub replayed_blocking: Vec<String>,
}

/// A decision replay takes differently.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Difference {
    pub stage: String,
    /// The attempt of the stage's agent (none for a plan decision).
    pub attempt: Option<u32>,
    pub point: DecisionPoint,
    pub recorded: Choice,
    pub replayed: Choice,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gates: Option<GatesChange>,
    /// An earlier decision already differed: the run would not have reached this one as it did.
    pub after_earlier_difference: bool,
}

/// A decision the journal does not hold enough to take again.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NotReplayable {
    pub stage: String,
    pub attempt: Option<u32>,
    pub point: DecisionPoint,
    pub why: String,
}

/// The replay of one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Replay {
    pub run_id: String,
    /// Decisions taken again.
    pub replayed: usize,
    pub differences: Vec<Difference>,
    pub not_replayable: Vec<NotReplayable>,
}

/// The configuration decisions are taken with.
#[derive(Debug, Clone, Copy)]
pub struct Config<'a> {
    pub workflow: &'a Workflow,
    pub settings: &'a Settings,
}

/// Replay the run `run_id` whose journal holds `entries` with `config`.
pub fn replay(run_id: &str, entries: &[Entry], config: Config<'_>) -> Replay {
    let mut fold = Fold {
        config,
        state: RunState::default(),
        column: None,
        work: None,
        out: Replay {
            run_id: run_id.to_string(),
            replayed: 0,
            differences: Vec::new(),
            not_replayable: Vec::new(),
        },
    };
    for entry in entries {
        fold.event(&entry.event);
    }
    fold.out
}

/// One stage attempt, as far as the journal has told it.
#[derive(Debug)]
struct Attempt {
    stage: String,
    agent: String,
    attempt: u32,
    outcome: Option<Outcome>,
    gates: Option<Vec<GateReport>>,
    /// Its comment was posted (stages that comment).
    posted: bool,
    /// Commits ahead of the base after its commit (stages that commit).
    ahead: Option<u32>,
    pushed: bool,
}

impl Attempt {
    /// The attempt a `stage-started` event begins.
    fn started(event: &Event) -> Option<Attempt> {
        let Event::StageStarted {
            stage,
            agent,
            attempt,
            ..
        } = event
        else {
            return None;
        };
        Some(Attempt {
            stage: stage.clone(),
            agent: agent.clone(),
            attempt: *attempt,
            outcome: None,
            gates: None,
            posted: false,
            ahead: None,
            pushed: false,
        })
    }

    /// The answer was delivered (posted, or committed and pushed): only then does the engine
    /// decide on it. A stop before that is a failure to deliver, not a decision.
    fn delivered(&self) -> bool {
        self.posted || self.ahead.is_some_and(|ahead| ahead == 0 || self.pushed)
    }
}

/// What replaying one decision gave.
enum Judged {
    /// The engine took no decision here that replay re-judges.
    Nothing,
    NotReplayable(String),
    Replayed(Choice, Option<GatesChange>),
}

struct Fold<'a> {
    config: Config<'a>,
    /// The state the run had, from what it recorded (not from what replay decides).
    state: RunState,
    column: Option<String>,
    work: Option<Attempt>,
    out: Replay,
}

impl Fold<'_> {
    fn event(&mut self, event: &Event) {
        match event {
            Event::StageStarted { fix, .. } => {
                if fix.is_none() && self.work.is_none() {
                    self.plan(&Choice::RunAgent, None);
                }
                self.work = Attempt::started(event);
            }
            Event::Outcome { outcome, .. } => {
                if let Some(w) = self.work.as_mut() {
                    w.outcome = Some((**outcome).clone());
                }
            }
            Event::Committed { ahead, .. } => {
                if let Some(w) = self.work.as_mut() {
                    w.ahead = Some(*ahead);
                }
            }
            Event::Pushed { .. } => {
                if let Some(w) = self.work.as_mut() {
                    w.pushed = true;
                }
            }
            Event::Posted { marker, .. } => {
                if let Some(w) = self.work.as_mut() {
                    if marker.kind == MarkerKind::Stage
                        && marker.stage == w.stage
                        && marker.attempt == w.attempt
                    {
                        w.posted = true;
                    }
                }
            }
            Event::GatesFinished { reports, .. } => {
                if let Some(w) = self.work.as_mut() {
                    w.gates = Some(reports.clone());
                }
            }
            Event::Decision { transition } => {
                let recorded = Choice::of_transition(transition);
                if self.work.is_none() {
                    let heading = match &transition.skip {
                        Some(SkipReason::AlreadyDone { heading }) => Some(heading.as_str()),
                        _ => None,
                    };
                    self.plan(&recorded, heading);
                } else {
                    self.outcome(&recorded);
                }
            }
            Event::Halted {
                halt: Halt::Stop {
                    reason, rejection, ..
                },
                ..
            } => {
                // A stop with no attempt under way (the iteration limit, an agent without a
                // definition) depends on nothing a configuration changes the meaning of.
                if self.work.is_some() {
                    self.outcome(&Choice::Stop {
                        reason: reason.to_string(),
                    });
                }
                if let Some(t) = rejection {
                    self.state.count(t);
                }
            }
            Event::Paused { reason } => {
                if self.work.as_ref().is_some_and(|w| w.gates.is_some()) {
                    self.outcome(&Choice::Pause {
                        reason: reason.clone(),
                    });
                }
                // The engine runs the gates again after a pause.
                if let Some(w) = self.work.as_mut() {
                    w.gates = None;
                }
            }
            Event::Applied { transition } => {
                self.state.apply(transition);
                self.column = Some(transition.to.clone());
                self.work = None;
            }
            Event::Admitted { column } => self.column = Some(column.clone()),
            _ => {}
        }
    }

    /// Take the plan decision in the current column again; `known` is the heading the run found
    /// already present (a recorded skip), the one heading the journal vouches for.
    fn plan(&mut self, recorded: &Choice, known: Option<&str>) {
        let Some(column) = self.column.clone() else {
            return;
        };
        let stage = (self.config.workflow.stage_for_column(&column))
            .map_or_else(|| column.clone(), |s| s.status.clone());
        let judged = self.judge_plan(&column, &stage, known);
        self.settle(stage, None, DecisionPoint::Plan, recorded, judged);
    }

    fn judge_plan(&self, column: &str, stage: &str, known: Option<&str>) -> Judged {
        let Config { workflow, settings } = self.config;
        let asked = RefCell::new(None::<String>);
        let step = |assume: bool| {
            let has = |h: &str| {
                if known == Some(h) {
                    return true;
                }
                *asked.borrow_mut() = Some(h.to_string());
                assume
            };
            plan(
                workflow,
                &self.state,
                column,
                settings.enable_experimental_features,
                &has,
            )
        };
        let (absent, present) = (step(false), step(true));
        match (absent, present) {
            (Err(e), _) => Judged::NotReplayable(e.to_string()),
            (Ok(a), Ok(p)) if a != p => {
                let heading = asked.into_inner().unwrap_or_default();
                Judged::NotReplayable(format!(
                    "whether the issue or a trusted comment already had `## {heading}` when the run reached {stage} is not in the journal"
                ))
            }
            (Ok(step), _) => match step {
                Step::RunAgent => Judged::Replayed(Choice::RunAgent, None),
                Step::Move(t) => Judged::Replayed(Choice::of_transition(&t), None),
                Step::Stop(reason) => Judged::Replayed(
                    Choice::Stop {
                        reason: reason.to_string(),
                    },
                    None,
                ),
                Step::Finish => Judged::Nothing,
            },
        }
    }

    /// Take the decision after the current attempt's outcome again.
    fn outcome(&mut self, recorded: &Choice) {
        let Some(w) = self.work.as_ref() else {
            return;
        };
        let (stage, attempt) = (w.stage.clone(), Some(w.attempt));
        let judged = self.judge_outcome(w, recorded);
        self.settle(stage, attempt, DecisionPoint::Outcome, recorded, judged);
    }

    fn judge_outcome(&self, w: &Attempt, recorded: &Choice) -> Judged {
        let Some(outcome) = w.outcome.as_ref().filter(|_| w.delivered()) else {
            // No outcome, or stopped before delivering it: the engine decided nothing here.
            return Judged::Nothing;
        };
        let stage = &w.stage;
        let Config { workflow, settings } = self.config;
        if let (Evidence::Marker(marker), Some(st)) =
            (&outcome.evidence, workflow.stage_for_column(stage))
        {
            let today = st.marker_map.get(marker);
            if today != outcome.marker_target.as_ref() {
                return Judged::NotReplayable(format!(
                    "the agent answered with the marker {marker}, which today's markerMap reads as {}; the answer's text is not in the journal",
                    today.map_or("nothing", String::as_str)
                ));
            }
        }
        let input = DecideInput {
            workflow,
            state: &self.state,
            column: stage,
            outcome,
            gates: None,
            max_rejections: settings.max_rejections,
            threshold: settings.audit_score_threshold,
            experimental: settings.enable_experimental_features,
        };
        let mut gates_change = None;
        let decision = match decide(input) {
            Ok(Decision::RunGates { hooks, .. }) => {
                let unproven = Choice::Stop {
                    reason: unproven_resolution(&w.agent),
                };
                if *recorded == unproven {
                    // The engine stopped before the gates, on facts no configuration changes.
                    return Judged::Nothing;
                }
                let Some(ran) = &w.gates else {
                    let names: Vec<&str> = hooks.iter().map(|h| h.name.as_str()).collect();
                    return Judged::NotReplayable(format!(
                        "today's workflow runs the gates {} before leaving {stage}; this run ran none here, so their verdict is not in the journal",
                        names.join(", ")
                    ));
                };
                let reports = match gates::reweigh(ran, &hooks, &settings.gates) {
                    Ok(r) => r,
                    Err(missing) => {
                        return Judged::NotReplayable(format!(
                            "today's workflow runs {} before leaving {stage}, which this run did not run: their verdict is not in the journal",
                            missing.join(", ")
                        ));
                    }
                };
                let (before, after) = (Verdict::of(ran), Verdict::of(&reports));
                let (was, now) = (
                    gates::labels(&gates::blocking(ran)),
                    gates::labels(&gates::blocking(&reports)),
                );
                if before != after || was != now {
                    gates_change = Some(GatesChange {
                        recorded: before,
                        replayed: after,
                        recorded_blocking: was,
                        replayed_blocking: now,
                    });
                }
                decide(DecideInput {
                    gates: Some(&reports),
                    ..input
                })
            }
            other => other,
        };
        let replayed = match decision {
            Ok(Decision::Move(t)) => Choice::of_transition(&t),
            Ok(Decision::Stop(reason)) if reason.is_resumable() => Choice::Pause {
                reason: reason.to_string(),
            },
            Ok(Decision::Stop(reason)) => Choice::Stop {
                reason: reason.to_string(),
            },
            Ok(Decision::RunGates { .. }) => {
                return Judged::NotReplayable(
                    "the gates' reports did not settle the move".to_string(),
                );
            }
            Err(e) => Choice::Stop {
                reason: e.to_string(),
            },
        };
        Judged::Replayed(replayed, gates_change)
    }

    fn settle(
        &mut self,
        stage: String,
        attempt: Option<u32>,
        point: DecisionPoint,
        recorded: &Choice,
        judged: Judged,
    ) {
        match judged {
            Judged::Nothing => {}
            Judged::NotReplayable(why) => self.out.not_replayable.push(NotReplayable {
                stage,
                attempt,
                point,
                why,
            }),
            Judged::Replayed(replayed, gates) => {
                self.compare(stage, attempt, point, recorded, replayed, gates)
            }
        }
    }

    fn compare(
        &mut self,
        stage: String,
        attempt: Option<u32>,
        point: DecisionPoint,
        recorded: &Choice,
        replayed: Choice,
        gates: Option<GatesChange>,
    ) {
        self.out.replayed += 1;
        if recorded.same(&replayed) && gates.is_none() {
            return;
        }
        let after_earlier_difference = !self.out.differences.is_empty();
        self.out.differences.push(Difference {
            stage,
            attempt,
            point,
            recorded: recorded.clone(),
            replayed,
            gates,
            after_earlier_difference,
        });
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::agent::parse_outcome;
    use crate::config::RepoSlug;
    use crate::github::Marker;

    fn workflow(text: &str) -> Workflow {
        Workflow::parse(std::path::Path::new("w.json"), text, &BTreeMap::new()).unwrap()
    }

    fn settings() -> Settings {
        Settings::minimal(
            RepoSlug::parse("acme/widgets").unwrap(),
            1,
            vec!["alice".into()],
        )
    }

    fn replayed(run: &[Entry], workflow: &Workflow, settings: &Settings) -> Replay {
        replay("r", run, Config { workflow, settings })
    }

    fn entries(events: Vec<Event>) -> Vec<Entry> {
        (events.into_iter().enumerate())
            .map(|(i, event)| Entry {
                v: crate::pipeline::FORMAT,
                seq: i as u64 + 1,
                time: "2026-01-01T00:00:00.000Z".into(),
                event,
            })
            .collect()
    }

    /// An attempt of `stage`'s `agent` answering `text`, its comment posted.
    fn answered(wf: &Workflow, stage: &str, agent: &str, attempt: u32, text: &str) -> Vec<Event> {
        let outcome = parse_outcome(text, wf.stage(stage).unwrap()).unwrap();
        vec![
            Event::StageStarted {
                stage: stage.into(),
                agent: agent.into(),
                attempt,
                fix: None,
            },
            Event::Outcome {
                stage: stage.into(),
                attempt,
                outcome: Box::new(outcome),
            },
            Event::Posted {
                marker: Marker::new("r", stage, attempt, MarkerKind::Stage),
                comment_id: 1,
                url: "u".into(),
                created: true,
            },
        ]
    }

    fn moved(t: Transition) -> Vec<Event> {
        vec![
            Event::Decision {
                transition: t.clone(),
            },
            Event::Applied { transition: t },
        ]
    }

    const BACK: &str = r#"{"action": "COMPLETE", "targetStatus": "Research"}"#;

    /// The architect sent the work back to research; a workflow without that loop-back refuses it.
    #[test]
    fn a_loop_back_today_s_workflow_refuses_is_a_difference() {
        let wf = workflow(crate::config::WORKFLOW_WITHOUT_ORACLE);
        let mut events = vec![Event::Admitted {
            column: "Architecture".into(),
        }];
        events.extend(answered(&wf, "Architecture", "architect", 1, BACK));
        let back = Transition::new(
            "Architecture",
            "Research",
            TransitionKind::LoopBack,
            "architect sent the issue back to Research",
        );
        events.extend(moved(back));
        let run = entries(events);
        let settings = settings();
        let same = replayed(&run, &wf, &settings);
        assert_eq!((same.replayed, same.differences.len()), (2, 0), "{same:?}");

        let strict = workflow(
            &crate::config::WORKFLOW_WITHOUT_ORACLE
                .replacen(
                    "\"canLoopBackTo\": [\"Research\"]",
                    "\"canLoopBackTo\": []",
                    1,
                )
                .replacen(", \"FEEDBACK_RESEARCH\": \"Research\"", "", 1),
        );
        let r = replayed(&run, &strict, &settings);
        assert_eq!(r.differences.len(), 1, "{r:?}");
        let d = &r.differences[0];
        assert_eq!(
            (d.stage.as_str(), d.attempt, d.point),
            ("Architecture", Some(1), DecisionPoint::Outcome)
        );
        assert!(matches!(&d.recorded, Choice::Move { to, .. } if to == "Research"));
        let Choice::Stop { reason } = &d.replayed else {
            panic!("{d:?}")
        };
        assert!(reason.contains("canLoopBackTo"), "{reason}");
    }

    /// A rejection the run made counts toward today's maxRejections.
    #[test]
    fn a_lower_max_rejections_stops_where_the_run_went_back() {
        let wf = workflow(crate::config::WORKFLOW_WITHOUT_ORACLE);
        let mut events = vec![Event::Admitted {
            column: "Audit".into(),
        }];
        events.extend(answered(&wf, "Audit", "auditor", 1, "AUDIT_REJECTED"));
        let mut rejection = Transition::new(
            "Audit",
            "Implementation",
            TransitionKind::Rejection,
            "auditor rejected the work (0 findings)",
        );
        rejection.score = Some(crate::audit::score(&[], &[], 0.75, None));
        events.extend(moved(rejection));
        let run = entries(events);
        let mut settings = settings();
        let same = replayed(&run, &wf, &settings);
        assert!(same.differences.is_empty(), "{same:?}");
        settings.max_rejections = 0;
        let r = replayed(&run, &wf, &settings);
        let [d] = &r.differences[..] else {
            panic!("{r:?}")
        };
        let Choice::Stop { reason } = &d.replayed else {
            panic!("{d:?}")
        };
        assert!(reason.contains("maxRejections 0"), "{reason}");
    }

    /// What the engine never decided is not replayed: an answer whose comment was never posted,
    /// a halt with no attempt under way. A marker today's markerMap reads otherwise is named.
    #[test]
    fn only_what_the_engine_decided_is_replayed_and_markers_read_otherwise_are_named() {
        let wf = workflow(crate::config::WORKFLOW_WITHOUT_ORACLE);
        let mut events = vec![Event::Admitted {
            column: "Architecture".into(),
        }];
        let mut attempt = answered(&wf, "Architecture", "architect", 1, "FEEDBACK_RESEARCH");
        attempt.pop();
        events.extend(attempt);
        events.push(Event::Halted {
            stage: "Architecture".into(),
            attempt: 1,
            halt: Halt::stop(crate::pipeline::UserText::ours("posting failed")),
        });
        let settings = settings();
        let r = replayed(&entries(events.clone()), &wf, &settings);
        assert_eq!((r.replayed, r.differences.len()), (1, 0), "{r:?}");
        assert!(r.not_replayable.is_empty(), "{r:?}");

        // Posted, then sent back by its marker; today the marker means something else.
        events.truncate(3);
        events.push(Event::Posted {
            marker: Marker::new("r", "Architecture", 1, MarkerKind::Stage),
            comment_id: 1,
            url: "u".into(),
            created: true,
        });
        events.extend(moved(Transition::new(
            "Architecture",
            "Research",
            TransitionKind::LoopBack,
            "architect sent the issue back to Research",
        )));
        let renamed = workflow(&crate::config::WORKFLOW_WITHOUT_ORACLE.replacen(
            "\"FEEDBACK_RESEARCH\": \"Research\"",
            "\"NEEDS_RESEARCH\": \"Research\"",
            1,
        ));
        let r = replayed(&entries(events), &renamed, &settings);
        let [n] = &r.not_replayable[..] else {
            panic!("{r:?}")
        };
        assert!(n.why.contains("FEEDBACK_RESEARCH"), "{}", n.why);
        assert!(n.why.contains("not in the journal"), "{}", n.why);
        assert!(r.differences.is_empty(), "{r:?}");
    }
}
