//! The engine as a step function.
//!
//! A [`Machine`] is the state of one run. [`Machine::step`] takes the answer to the last effect and
//! returns the journal events that answer produced and the next effect to perform — no I/O. The run's
//! lasting state is a fold over its journal events, so a run resumed after a crash continues from
//! exactly what was recorded: whatever was not recorded is done again, and every write it repeats
//! is idempotent (markers on comments, find-before-create for the pull request).
//!
//! This process's own knowledge is a [`Phase`]: *admitting* (reading the issue, its context and
//! its card; each may still be missing), *working* (admitted: the issue, its context and card are
//! there for the rest of the run, the worktree once made) and *finishing* (ending as a known
//! [`RunEnd`]: unconfirmed comments again, then the clean-up). A revision reads its pull request
//! first; its steps are in `revise`.
//!
//! Each effect, the input that answers it, and the events that input makes (every effect may also
//! be answered by `Input::Cancelled` when a stop is asked: no event, the run finishes as
//! interrupted):
//!
//! | Effect | Input | Events |
//! |---|---|---|
//! | `FetchFeedback` (revision) | `Feedback` | — (read again by every process) |
//! | `FetchIssue` | `Issue` | — |
//! | `FetchContext` | `Context` | `Warning` when a non-codeowner renamed the issue |
//! | `AddToBoard` | `OnBoard` | — |
//! | (admission decided) | — | `Admitted`, `Applied` for a move that reached the board before a crash |
//! | `PrepareWorktree` | `Worktree` | `Warning` per set-up warning, `WorktreeReady` |
//! | `PrepareRevision` | `Revision` | `WorktreeReady`, or `Halted` (stop) |
//! | `Dispatch` | `Agent` | `AgentFinished`, then `Outcome` or `Halted` |
//! | `Commit` | `Committed` | `Committed`, or `Halted` (stop, by the failure's class) |
//! | `Push` | `Pushed` | `Pushed`, or `Halted` (stop, by the failure's class) |
//! | `RunGates` | `Gates` | `GatesFinished` (each `GateFinished` is journaled as its gate ends) |
//! | `UndoCommit` | `Undone` | `Warning` when it failed, `CommitUndone` |
//! | `Post` | `Posted` | `Posted`, or `Warning` and `WriteFailed` (and `Halted` for a missing permission) |
//! | `MoveCard` | `Moved` | `Applied` (a revision's first move: `CardPlaced`) |
//! | `CloseIssue` | `Closed` | `IssueClosed` |
//! | `OpenPullRequest` | `PullRequest` | `PullRequest`; `Paused` (transient failure) or `Halted` (any other) |
//! | `CheckMergeable` | `Mergeable` | `Mergeability` (`Warning` when unreadable) |
//! | `MergeBase` | `Merged` | `Pushed` when merged, `Warning` on conflicts, `BaseMerged` |
//! | `AnswerThread` | `Answered` | `Warning` when it failed, `ThreadAnswered` |
//! | `UpdatePullBody` | `BodyUpdated` | `Warning` when it failed, `PullBodyUpdated` |
//! | `Cleanup` | `CleanedUp` | `Warning` per problem, then `Finished` (unless paused) |
//!
//! Decisions need no effect: `StageStarted`, `Decision`, `Halted`, `Stopped`, `Paused`,
//! `Revising` and `Finished` are recorded from the state alone.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::context::{IssueContext, NoteKind, TrustedNote, has_heading};
use super::decide::admission::{
    TitleTrust, refuse_context, refuse_issue, sealed_epic, sealed_task, start_column, trusted_title,
};
use super::decide::trust::{Authority, trusted_notes};
use super::decide::work::{
    commit_message, exit_text, move_work, outcome_of, return_context, unchanged_after_commit_stage,
    unproven_resolution,
};
use super::decide::{
    DecideInput, Decision, RunState, Step as PlanStep, StopReason, Transition, TransitionKind,
    decide, plan,
};
use super::effects::{
    Cleanup, CommitResult, Context, Dispatch, Effect, Input, PrRequest, TaskSpec, Text,
    WorktreeInfo,
};
use super::engine::{RunError, RunOptions};
use super::failure::{EffectError, ErrorClass};
use super::journal::{AgentStats, Entry, Event, Halt};
use super::project::Project;
use super::summary::{
    AgentLine, CurrentWork, GateRound, Progress, ReviewRejection, RunEnd, RunFacts, RunSummary,
    StageMark,
};
use super::user_text::UserText;
use crate::agent::{AgentRun, Outcome};
use crate::audit::AuditScore;
use crate::config::GateKind;
use crate::config::{BuiltIn, Stage};
use crate::gates::{GateReport, IssueText};
use crate::github::{BoardItem, Comment, GitHubError, Issue, Marker, MarkerKind};
use crate::ids::{CommitSha, IssueNumber, RunId};
use crate::verify::{ProofInput, ProofTable, TestEvidence};
use crate::workspace::MergeOutcome;
use revise::revision_commit_message;

mod revise;

/// What a step returns: events to journal (already applied to the state), then what to do.
#[derive(Debug)]
pub struct Step {
    pub(crate) events: Vec<Event>,
    pub(crate) next: Next,
}

/// After the events of a step are journaled.
#[derive(Debug)]
pub enum Next {
    Effect(Effect),
    End(RunEnd),
    /// The run cannot go on; running again resumes it.
    Fail(RunError),
}

/// One stage attempt in progress.
#[derive(Debug, Clone)]
struct Work {
    stage: String,
    agent: String,
    attempt: u32,
    /// This attempt asks the agent to fix an unusable answer.
    fix: Option<String>,
    /// The answer broke the output protocol.
    unusable: Option<String>,
    /// The agent stalled: why (the run pauses).
    stalled: Option<String>,
    ran: bool,
    outcome: Option<Outcome>,
    /// Commits ahead of the base after the commit (commit stages).
    ahead: Option<u32>,
    pushed: bool,
    gates: Option<Vec<GateReport>>,
    undone: bool,
    /// Changes outside the stage's `writes`, undone before its commit.
    outside: Vec<String>,
}

impl Work {
    fn new(stage: &str, agent: &str, attempt: u32, fix: Option<String>) -> Work {
        Work {
            stage: stage.to_string(),
            agent: agent.to_string(),
            attempt,
            fix,
            unusable: None,
            stalled: None,
            ran: false,
            outcome: None,
            ahead: None,
            pushed: false,
            gates: None,
            undone: false,
            outside: Vec::new(),
        }
    }

    /// Fold the events that concern the attempt in progress.
    fn apply(&mut self, event: &Event) {
        match event {
            Event::AgentFinished { .. } => self.ran = true,
            Event::Outcome { outcome, .. } => self.outcome = Some((**outcome).clone()),
            // An interrupted attempt produced nothing: a resumed run starts a new one.
            Event::Halted {
                halt: Halt::Interrupted,
                ..
            } => self.ran = false,
            Event::Halted {
                halt: Halt::Unusable { problem },
                ..
            } => self.unusable = Some(problem.clone()),
            Event::Halted {
                halt: Halt::Stalled { reason },
                ..
            } => self.stalled = Some(reason.clone()),
            Event::Committed { ahead, outside, .. } => {
                self.ahead = Some(*ahead);
                self.outside = outside.clone();
            }
            Event::Pushed { .. } => self.pushed = true,
            Event::GatesFinished { reports, .. } => self.gates = Some(reports.clone()),
            // A pause waits for something outside: the rerun asks the gates again.
            Event::Paused { .. } => self.gates = None,
            Event::CommitUndone { .. } => self.undone = true,
            // The rest concern the run, not the attempt (folded by `Machine::apply`).
            Event::Halted {
                halt: Halt::Stop { .. },
                ..
            }
            | Event::RunStarted { .. }
            | Event::Admitted { .. }
            | Event::WorktreeReady { .. }
            | Event::StageStarted { .. }
            | Event::GateFinished { .. }
            | Event::Posted { .. }
            | Event::WriteFailed { .. }
            | Event::Decision { .. }
            | Event::Applied { .. }
            | Event::PullRequest { .. }
            | Event::Mergeability { .. }
            | Event::BaseMerged { .. }
            | Event::IssueClosed
            | Event::Warning { .. }
            | Event::Stopped { .. }
            | Event::Finished { .. }
            | Event::Revising { .. }
            | Event::CardPlaced { .. }
            | Event::ThreadAnswered { .. }
            | Event::PullBodyUpdated => {}
        }
    }
}

/// The run as its journal tells it.
#[derive(Debug, Default)]
struct Record {
    column: Option<String>,
    state: RunState,
    attempts: BTreeMap<String, u32>,
    transitions: Vec<Transition>,
    work: Option<Work>,
    /// Decided, not yet applied.
    pending: Option<Transition>,
    last_gates: Option<Vec<GateReport>>,
    last_score: Option<AuditScore>,
    /// The latest outcome of each stage: what a stage that sent work back said.
    outcomes: BTreeMap<String, Outcome>,
    /// Comments GitHub confirmed: marker → comment id.
    posted: Vec<(Marker, u64)>,
    /// Comments GitHub did not confirm, to post again.
    outbox: Vec<(Marker, Text)>,
    pr: Option<(u64, String, bool)>,
    mergeability: Option<Option<bool>>,
    base_merged: bool,
    closed: bool,
    /// Why the run stops (a comment says so, then it ends).
    stop: Option<UserText>,
    /// The class of the failed effect that stopped the run.
    stop_cause: Option<ErrorClass>,
    stopped: bool,
    agents: Vec<AgentLine>,
    gate_rounds: Vec<GateRound>,
    /// Each time a review stage sent the work back.
    rejections: Vec<ReviewRejection>,
    warnings: Vec<String>,
    /// The latest head pushed.
    pushed: Option<CommitSha>,
    /// A commit with new work was made in this run.
    new_commit: bool,
    /// Revision: the card is in the revision's column.
    placed: bool,
    /// Revision: threads answered.
    answered: Vec<String>,
    /// Revision: the pull request's body was rewritten.
    body_updated: bool,
    /// Revision: admitted, as this round.
    revising: Option<u32>,
    /// Stages whose agent committed new work in this run.
    committed_by: std::collections::BTreeSet<String>,
    /// The last commit of a stage that writes tests (TestDesign's).
    tests_commit: Option<CommitSha>,
    /// What the last passing `red` gate saw on the base code.
    red: Option<TestEvidence>,
    /// What the last passing `green` gate saw on the head.
    green: Option<TestEvidence>,
}

impl Record {
    /// Keep `t` for the live view when a review stage sent the work back with it; its findings
    /// are the stage's latest outcome's (recorded before the decision).
    fn note_rejection(&mut self, t: &Transition) {
        let findings = self
            .outcomes
            .get(&t.from)
            .map_or(&[][..], |o| &o.findings[..]);
        if let Some(r) = ReviewRejection::of(t, findings) {
            self.rejections.push(r);
        }
    }
}

/// What admission reads, as far as this process has read it (`None`: still to read).
#[derive(Debug, Default)]
struct Reading {
    issue: Option<Issue>,
    context: Option<Context>,
    board: Option<BoardItem>,
}

/// What an admitted run works with, known from its admission to its end.
#[derive(Debug, Clone)]
struct Admitted {
    issue: Issue,
    context: Context,
    /// The card (the issue a revision's pull request closes may have none).
    board: Option<BoardItem>,
    /// Made (or reused) once admitted.
    worktree: Option<WorktreeInfo>,
}

/// Where this process is in the run. Not journaled: a resumed run reads the issue, its context
/// and its card again and is admitted again from them (its journal says where it was).
#[derive(Debug)]
enum Phase {
    Admitting(Box<Reading>),
    Working(Box<Admitted>),
    /// Ending as `end`: unconfirmed comments are posted again, then the clean-up.
    Finishing {
        at: Box<Admitted>,
        end: RunEnd,
        cleaned: bool,
    },
}

/// A revision's pull request and its feedback, read before anything else, and the login
/// supervisor posts as.
#[derive(Debug)]
struct PullRead {
    feedback: crate::github::Feedback,
    viewer: Option<String>,
}

/// What this process has learnt and done (not journaled: fetched again on resume).
#[derive(Debug)]
struct Session {
    phase: Phase,
    pull: Option<PullRead>,
    /// The stage attempt this process started (an attempt started before a crash is not resumed:
    /// a new one begins).
    started: Option<(String, u32)>,
    /// Outbox entries tried in the current round.
    outbox_tried: Vec<Marker>,
    interrupted: bool,
    pause: Option<String>,
}

impl Default for Session {
    fn default() -> Session {
        Session {
            phase: Phase::Admitting(Box::default()),
            pull: None,
            started: None,
            outbox_tried: Vec::new(),
            interrupted: false,
            pause: None,
        }
    }
}

/// The tests an answer designates: its `tests` and every test its contract names.
fn designated_by(answer: Option<&Outcome>) -> Vec<crate::verify::TestSelector> {
    answer
        .map(|o| crate::verify::designated_of(&o.tests, &o.contract))
        .unwrap_or_default()
}

/// What the machine wants next (internal).
enum Want {
    Record(Vec<Event>),
    Do(Effect),
    /// End after cleaning up.
    Finish(RunEnd),
    /// End now, recording these events.
    End(RunEnd, Vec<Event>),
    /// Admitted, starting from this column, with what admission read.
    Admit(String, Box<Admitted>),
    Fail(RunError),
}

/// One run of one issue.
#[derive(Debug)]
pub struct Machine {
    project: Arc<Project>,
    opts: RunOptions,
    run_id: RunId,
    r: Record,
    s: Session,
}

impl Machine {
    /// A machine for `run_id`, continuing from its journal's entries (none for a new run).
    pub fn new(project: Arc<Project>, opts: RunOptions, run_id: RunId, entries: &[Entry]) -> Self {
        let mut m = Machine {
            project,
            opts,
            run_id,
            r: Record::default(),
            s: Session::default(),
        };
        for e in entries {
            m.apply(&e.event);
        }
        m
    }

    pub fn run_id(&self) -> &RunId {
        &self.run_id
    }

    pub(crate) fn issue_number(&self) -> IssueNumber {
        self.opts.issue
    }

    /// Whether the run was admitted (its issue read, trusted and on the board).
    pub(crate) fn admitted(&self) -> bool {
        self.admitted_run().is_some() || self.r.column.is_some()
    }

    /// What the run works with, once this process admitted it.
    fn admitted_run(&self) -> Option<&Admitted> {
        match &self.s.phase {
            Phase::Admitting(_) => None,
            Phase::Working(a) | Phase::Finishing { at: a, .. } => Some(a),
        }
    }

    fn admitted_run_mut(&mut self) -> Option<&mut Admitted> {
        match &mut self.s.phase {
            Phase::Admitting(_) => None,
            Phase::Working(a) | Phase::Finishing { at: a, .. } => Some(a),
        }
    }

    /// The issue, once read.
    pub(crate) fn issue(&self) -> Option<&Issue> {
        match &self.s.phase {
            Phase::Admitting(r) => r.issue.as_ref(),
            Phase::Working(a) | Phase::Finishing { at: a, .. } => Some(&a.issue),
        }
    }

    /// The issue's comments, blockers and edits, once read.
    fn context(&self) -> Option<&Context> {
        match &self.s.phase {
            Phase::Admitting(r) => r.context.as_ref(),
            Phase::Working(a) | Phase::Finishing { at: a, .. } => Some(&a.context),
        }
    }

    /// The issue's card, once read.
    pub(crate) fn board(&self) -> Option<&BoardItem> {
        match &self.s.phase {
            Phase::Admitting(r) => r.board.as_ref(),
            Phase::Working(a) | Phase::Finishing { at: a, .. } => a.board.as_ref(),
        }
    }

    /// A revision's pull request and its feedback.
    fn feedback(&self) -> Option<&crate::github::Feedback> {
        self.s.pull.as_ref().map(|p| &p.feedback)
    }

    /// The login supervisor posts as (revisions).
    fn viewer(&self) -> Option<&str> {
        self.s.pull.as_ref().and_then(|p| p.viewer.as_deref())
    }

    /// The card's column as the run knows it.
    pub(crate) fn column(&self) -> Option<&str> {
        self.r.column.as_deref()
    }

    /// Take the answer to the last effect (`Input::Start` first) and say what comes next.
    pub(crate) fn step(&mut self, input: Input) -> Step {
        let mut events = self.absorb(input);
        for e in &events {
            self.apply(e);
        }
        for _ in 0..10_000 {
            match self.want() {
                Want::Record(more) => {
                    for e in &more {
                        self.apply(e);
                        // What this process decided itself (a resumed run starts a new attempt
                        // and asks again).
                        if let Event::StageStarted { stage, attempt, .. } = e {
                            self.s.started = Some((stage.clone(), *attempt));
                        } else if let Event::Paused { reason } = e {
                            self.s.pause = Some(reason.clone());
                        }
                    }
                    events.extend(more);
                }
                Want::Admit(column, admitted) => {
                    let mut more = vec![Event::Admitted { column }];
                    more.extend(self.recovered_move());
                    for e in &more {
                        self.apply(e);
                    }
                    events.extend(more);
                    self.s.phase = Phase::Working(admitted);
                }
                Want::Do(effect) => {
                    return Step {
                        events,
                        next: Next::Effect(effect),
                    };
                }
                Want::Finish(end) => {
                    let phase =
                        std::mem::replace(&mut self.s.phase, Phase::Admitting(Box::default()));
                    match phase {
                        Phase::Working(at) | Phase::Finishing { at, .. } => {
                            self.s.phase = Phase::Finishing {
                                at,
                                end,
                                cleaned: false,
                            };
                            self.s.outbox_tried.clear();
                        }
                        // Before admission nothing was made to clean up, nor posted.
                        Phase::Admitting(_) => {
                            return Step {
                                events,
                                next: Next::End(end),
                            };
                        }
                    }
                }
                Want::End(end, more) => {
                    for e in &more {
                        self.apply(e);
                    }
                    events.extend(more);
                    return Step {
                        events,
                        next: Next::End(end),
                    };
                }
                Want::Fail(e) => {
                    return Step {
                        events,
                        next: Next::Fail(e),
                    };
                }
            }
        }
        unreachable!("the machine made no progress in 10 000 moves")
    }

    /// The summary of the run so far, ending with `end`.
    pub(crate) fn summary(&self, end: RunEnd, journal: String, duration_ms: u64) -> RunSummary {
        let p = &self.project;
        RunSummary {
            run_id: self.run_id.clone(),
            repo: p.settings.repo.to_string(),
            issue: self.opts.issue.get(),
            title: self.issue().map(|i| i.title.clone()).unwrap_or_default(),
            end,
            agents: self.r.agents.clone(),
            transitions: self.r.transitions.clone(),
            gate_rounds: self.r.gate_rounds.clone(),
            gates: self.r.last_gates.clone().unwrap_or_default(),
            rejections: self.r.state.total_rejections(),
            gate_bounces: self.r.state.gate_bounces,
            score: self.r.last_score.clone(),
            warnings: self.r.warnings.clone(),
            journal,
            duration_ms,
        }
    }

    /// Fold one journal event into the run's state.
    fn apply(&mut self, event: &Event) {
        let test_stage = self.test_stage().map(|s| s.status.clone());
        let r = &mut self.r;
        if let Some(w) = r.work.as_mut() {
            w.apply(event);
        }
        match event {
            Event::Admitted { column } => r.column = Some(column.clone()),
            Event::StageStarted {
                stage,
                agent,
                attempt,
                fix,
            } => {
                let a = r.attempts.entry(stage.clone()).or_default();
                *a = (*a).max(*attempt);
                r.work = Some(Work::new(stage, agent, *attempt, fix.clone()));
            }
            Event::AgentFinished {
                stage,
                attempt,
                stats,
            } => r.agents.push(agent_line(stage, *attempt, stats)),
            Event::Halted {
                halt:
                    Halt::Stop {
                        reason,
                        cause,
                        rejection,
                    },
                ..
            } => {
                r.stop = Some(reason.clone());
                r.stop_cause = *cause;
                if let Some(t) = rejection {
                    r.state.count(t);
                    r.note_rejection(t);
                }
            }
            Event::GatesFinished {
                stage,
                attempt,
                reports,
            } => {
                r.gate_rounds.push(GateRound::new(stage, *attempt, reports));
                r.last_gates = Some(reports.clone());
                for report in reports.iter().filter(|g| g.is_pass()) {
                    let evidence = report.evidence.as_deref().cloned();
                    match report.kind {
                        GateKind::Red if evidence.is_some() => r.red = evidence,
                        GateKind::Green if evidence.is_some() => r.green = evidence,
                        _ => {}
                    }
                }
            }
            Event::Posted {
                marker, comment_id, ..
            } => {
                r.outbox.retain(|(m, _)| m != marker);
                if !r.posted.iter().any(|(m, _)| m == marker) {
                    r.posted.push((marker.clone(), *comment_id));
                }
            }
            Event::WriteFailed { marker, text, .. }
                if !r.outbox.iter().any(|(m, _)| m == marker) =>
            {
                r.outbox.push((marker.clone(), text.clone()));
            }
            Event::Outcome { stage, outcome, .. } => {
                r.outcomes.insert(stage.clone(), (**outcome).clone());
            }
            Event::Decision { transition } => {
                if transition.score.is_some() {
                    r.last_score = transition.score.clone();
                }
                r.pending = Some(transition.clone());
            }
            Event::Applied { transition } => {
                r.state.apply(transition);
                r.note_rejection(transition);
                r.transitions.push(transition.clone());
                r.column = Some(transition.to.clone());
                r.pending = None;
                r.work = None;
            }
            Event::PullRequest {
                number,
                url,
                created,
            } => r.pr = Some((*number, url.clone(), *created)),
            Event::Mergeability { mergeable } => r.mergeability = Some(*mergeable),
            Event::BaseMerged { .. } => r.base_merged = true,
            Event::IssueClosed => r.closed = true,
            Event::Warning { message } => r.warnings.push(message.clone()),
            Event::Stopped { .. } => r.stopped = true,
            Event::Pushed { sha } => r.pushed = Some(sha.clone()),
            Event::Committed {
                sha: Some(sha),
                stage,
                ..
            } => {
                r.new_commit = true;
                r.committed_by.insert(stage.clone());
                if test_stage.as_ref() == Some(stage) {
                    r.tests_commit = Some(sha.clone());
                }
            }
            Event::CardPlaced { .. } => r.placed = true,
            Event::ThreadAnswered { thread, .. } => r.answered.push(thread.clone()),
            Event::PullBodyUpdated => r.body_updated = true,
            Event::Revising { round, .. } => r.revising = Some(*round),
            // Known again by each process (the worktree, the agents' and gates' own records),
            // or folded by the attempt in progress (`Work::apply`).
            Event::Committed { sha: None, .. }
            | Event::RunStarted { .. }
            | Event::WorktreeReady { .. }
            | Event::Halted { .. }
            | Event::GateFinished { .. }
            | Event::WriteFailed { .. }
            | Event::CommitUndone { .. }
            | Event::Paused { .. }
            | Event::Finished { .. } => {}
        }
    }

    /// Turn the answer to an effect into events (and per-process facts).
    fn absorb(&mut self, input: Input) -> Vec<Event> {
        match input {
            Input::Start | Input::Closed | Input::Moved => self.absorb_simple(input),
            Input::Issue(issue) => {
                if let Phase::Admitting(r) = &mut self.s.phase {
                    r.issue = Some(*issue);
                }
                Vec::new()
            }
            Input::Context(context) => self.absorb_context(*context),
            Input::OnBoard(board) => {
                if let Phase::Admitting(r) = &mut self.s.phase {
                    r.board = Some(*board);
                }
                Vec::new()
            }
            Input::Worktree { info, warnings } => self.absorb_worktree(info, warnings),
            Input::Agent(run) => self.absorb_agent(&run),
            Input::Committed(result) => self.absorb_commit(result),
            Input::Pushed(result) => self.absorb_push(result),
            Input::Posted {
                marker,
                text,
                result,
            } => self.absorb_post(marker, text, result),
            Input::Gates {
                stage,
                attempt,
                reports,
            } => vec![Event::GatesFinished {
                stage,
                attempt,
                reports,
            }],
            Input::Undone(result) => {
                let (stage, attempt) = self.attempt_here();
                let mut events = Vec::new();
                if let Err(e) = result {
                    events.push(warning(format!(
                        "could not undo the last commit after the dead-code gate: {e}"
                    )));
                }
                // Said in the journal and the log only.
                events.push(Event::CommitUndone { stage, attempt });
                events
            }
            Input::PullRequest(result) => self.absorb_pull_request(result),
            Input::Mergeable(result) => self.absorb_mergeable(result),
            Input::Merged(result) => self.absorb_merge(result),
            Input::CleanedUp { warnings } => {
                if let Phase::Finishing { cleaned, .. } = &mut self.s.phase {
                    *cleaned = true;
                }
                warnings.into_iter().map(warning).collect()
            }
            Input::Cancelled => {
                self.s.interrupted = true;
                Vec::new()
            }
            Input::Feedback { feedback, viewer } => {
                self.s.pull = Some(PullRead {
                    feedback: *feedback,
                    viewer,
                });
                Vec::new()
            }
            Input::Revision(result) => self.absorb_revision_worktree(result),
            Input::Answered { thread, result } => self.absorb_answer(thread, result),
            Input::BodyUpdated(result) => match result {
                Ok(()) => vec![Event::PullBodyUpdated],
                Err(e) => vec![
                    warning(format!("could not update the pull request's body: {e}")),
                    Event::PullBodyUpdated,
                ],
            },
        }
    }

    /// The context; a title renamed by someone who is not a codeowner gives way to the last
    /// title a codeowner set, so that it reaches no agent.
    fn absorb_context(&mut self, context: Context) -> Vec<Event> {
        let Phase::Admitting(r) = &mut self.s.phase else {
            return Vec::new();
        };
        r.board = context.board.clone();
        let mut events = Vec::new();
        if let Some(issue) = r.issue.as_mut() {
            let settings = &self.project.settings;
            if let TitleTrust::Earlier { title, renamed_by } =
                trusted_title(settings, issue, &context.editors)
            {
                let message = format!(
                    "the title of issue #{} was last changed by @{renamed_by}, who is not a \
                     codeowner: agents get the title a codeowner set, \"{title}\"",
                    issue.number
                );
                issue.title = title;
                if !self.r.warnings.contains(&message) {
                    events.push(warning(message));
                }
            }
        }
        r.context = Some(context);
        events
    }

    fn absorb_simple(&mut self, input: Input) -> Vec<Event> {
        match input {
            Input::Closed => vec![Event::IssueClosed],
            Input::Moved => match self.r.pending.clone() {
                Some(transition) => vec![Event::Applied { transition }],
                None if self.opts.revise.is_some() => vec![Event::CardPlaced {
                    column: self.project.workflow.revision.column.to_string(),
                }],
                None => Vec::new(),
            },
            _ => Vec::new(),
        }
    }

    fn absorb_worktree(&mut self, info: WorktreeInfo, warnings: Vec<String>) -> Vec<Event> {
        if let Some(a) = self.admitted_run_mut() {
            a.worktree = Some(info.clone());
        }
        let mut events: Vec<Event> = warnings
            .iter()
            .map(|w| warning(format!("setup: {w}")))
            .collect();
        events.push(Event::WorktreeReady {
            path: info.path,
            branch: info.branch,
            base: info.base,
            reused: info.reused,
            warnings,
        });
        events
    }

    fn absorb_agent(&mut self, run: &AgentRun) -> Vec<Event> {
        let Some(w) = self.r.work.clone() else {
            return Vec::new();
        };
        let stats = AgentStats {
            agent: w.agent.clone(),
            backend: run.backend.clone(),
            duration_ms: run.duration.as_millis() as u64,
            usage: run.usage,
            tool_calls: run.tool_calls,
            model: run.model.clone(),
            exit: run.exit.clone(),
        };
        let mut events = vec![Event::AgentFinished {
            stage: w.stage.clone(),
            attempt: w.attempt,
            stats,
        }];
        let stage = self.stage(&w.stage);
        let result = match stage {
            Some(stage) => outcome_of(stage, &w.agent, run),
            None => Err(Halt::stop(UserText::ours(format!(
                "the workflow has no stage {}",
                w.stage
            )))),
        };
        events.push(match result {
            Ok(outcome) => Event::Outcome {
                stage: w.stage,
                attempt: w.attempt,
                outcome: Box::new(outcome),
            },
            Err(halt) => {
                if halt == Halt::Interrupted {
                    self.s.interrupted = true;
                }
                Event::Halted {
                    stage: w.stage,
                    attempt: w.attempt,
                    halt,
                }
            }
        });
        events
    }

    fn absorb_commit(&mut self, result: Result<CommitResult, EffectError>) -> Vec<Event> {
        let (stage, attempt) = self.attempt_here();
        match result {
            Ok(c) => vec![Event::Committed {
                stage,
                attempt,
                sha: c.sha.or_else(|| self.unpushed_revision(&c.head)),
                ahead: c.ahead,
                outside: c.outside,
            }],
            Err(e) => failed_stop(
                stage,
                attempt,
                "committing the developer's work",
                &e,
                "write access to the worktree",
            ),
        }
    }

    fn absorb_push(&mut self, result: Result<CommitSha, EffectError>) -> Vec<Event> {
        match result {
            Ok(sha) => vec![Event::Pushed { sha }],
            Err(e) => {
                let (stage, attempt) = self.attempt_here();
                let doing = format!("pushing {}", self.branch());
                failed_stop(stage, attempt, &doing, &e, PUSH_PERMISSION)
            }
        }
    }

    fn absorb_post(
        &mut self,
        marker: Marker,
        text: Text,
        result: Result<(Comment, bool), EffectError>,
    ) -> Vec<Event> {
        self.s.outbox_tried.push(marker.clone());
        match result {
            Ok((comment, created)) => {
                let event = Event::Posted {
                    marker,
                    comment_id: comment.id,
                    url: comment.html_url.clone(),
                    created,
                };
                let ctx = match &mut self.s.phase {
                    Phase::Admitting(r) => r.context.as_mut(),
                    Phase::Working(a) | Phase::Finishing { at: a, .. } => Some(&mut a.context),
                };
                if let Some(ctx) = ctx {
                    if !ctx.comments.iter().any(|c| c.id == comment.id) {
                        ctx.comments.push(comment);
                    }
                }
                vec![event]
            }
            Err(error) => {
                // Refused for a permission, every later comment is refused too: the run stops
                // (once: not for the stop's own comment, nor while it ends).
                let finishing = matches!(self.s.phase, Phase::Finishing { .. });
                let stop =
                    (error.class == ErrorClass::Permission && self.r.stop.is_none() && !finishing)
                        .then(|| {
                            let (stage, attempt) = self.attempt_here();
                            let doing = format!("posting the {} comment", marker.kind);
                            failed_stop(stage, attempt, &doing, &error, "Issues: write")
                        });
                let mut events = vec![
                    warning(format!(
                        "could not post the {} comment: {error}; it is posted when the run resumes",
                        marker.kind
                    )),
                    Event::WriteFailed {
                        marker,
                        text,
                        error: error.to_string(),
                    },
                ];
                events.extend(stop.into_iter().flatten());
                events
            }
        }
    }

    fn absorb_pull_request(
        &mut self,
        result: Result<(crate::github::PullRequest, bool), EffectError>,
    ) -> Vec<Event> {
        match result {
            Ok((pr, created)) => vec![Event::PullRequest {
                number: pr.number,
                url: pr.html_url,
                created,
            }],
            // Running again may open it: the approved audit is kept for that.
            Err(e) if matches!(e.class, ErrorClass::Transient | ErrorClass::Cancelled) => {
                let reason = format!(
                    "opening the pull request failed: {e}; the approved audit is kept, and running again opens it"
                );
                self.s.pause = Some(reason.clone());
                vec![Event::Paused { reason }]
            }
            // Running again as things are fails the same way: a human is needed first.
            Err(e) => {
                let (stage, attempt) = self.attempt_here();
                failed_stop(
                    stage,
                    attempt,
                    "opening the pull request",
                    &e,
                    "Pull requests: write",
                )
            }
        }
    }

    fn absorb_mergeable(&mut self, result: Result<Option<bool>, EffectError>) -> Vec<Event> {
        match result {
            Ok(mergeable) => vec![Event::Mergeability { mergeable }],
            Err(e) => vec![
                warning(format!(
                    "could not read the pull request's mergeability: {e}"
                )),
                Event::Mergeability { mergeable: None },
            ],
        }
    }

    fn absorb_merge(&mut self, result: Result<MergeOutcome, EffectError>) -> Vec<Event> {
        let base = self.project.settings.default_branch.clone();
        let mut events = Vec::new();
        match &result {
            Ok(MergeOutcome::Merged { sha }) => events.push(Event::Pushed {
                sha: CommitSha::new(sha),
            }),
            Ok(MergeOutcome::Conflicts { files }) => events.push(warning(format!(
                "the pull request conflicts with {base}; resolve by hand: {}",
                files.join(", ")
            ))),
            Ok(MergeOutcome::UpToDate) => {}
            Err(e) => events.push(warning(format!(
                "could not merge {base} into the branch: {e}"
            ))),
        }
        events.push(Event::BaseMerged {
            outcome: result.ok(),
        });
        events
    }

    /// A decision whose card move reached GitHub before a crash, but was not recorded as applied:
    /// the board shows its target, so it took effect.
    fn recovered_move(&self) -> Option<Event> {
        let t = self.r.pending.as_ref()?;
        let here = self.r.column.as_deref()?;
        let target = self.stage(&t.to).map(|s| s.status.as_str());
        (t.to != t.from && target == self.stage(here).map(|s| s.status.as_str())).then(|| {
            Event::Applied {
                transition: t.clone(),
            }
        })
    }

    /// What to do next, from the state alone.
    fn want(&self) -> Want {
        match &self.s.phase {
            Phase::Finishing { end, cleaned, .. } => self.want_finish(end, *cleaned),
            Phase::Admitting(reading) => match (self.opts.revise, &self.s.pull) {
                (Some(pr), None) => Want::Do(Effect::FetchFeedback { pr }),
                _ => self.want_admission(reading),
            },
            Phase::Working(a) => self.want_working(a),
        }
    }

    /// What to do next once admitted.
    fn want_working(&self, a: &Admitted) -> Want {
        if let Some(want) = self.want_card_placed(a) {
            return want;
        }
        if self.is_done() {
            return Want::Finish(self.done_end());
        }
        if self.opts.dry_run {
            return Want::End(
                RunEnd::DryRun {
                    plan: self.plan_lines(),
                },
                Vec::new(),
            );
        }
        if self.s.interrupted {
            return Want::Finish(RunEnd::Interrupted);
        }
        if a.worktree.is_none() {
            return match self.revision_worktree() {
                Some(effect) => Want::Do(effect),
                None => Want::Do(Effect::PrepareWorktree),
            };
        }
        if let Some(retry) = self.want_outbox() {
            return retry;
        }
        if let Some(reason) = &self.s.pause {
            return Want::Finish(RunEnd::Paused {
                reason: reason.clone(),
            });
        }
        if let Some(reason) = &self.r.stop {
            return self.want_stop(reason);
        }
        if let Some(t) = &self.r.pending {
            return self.want_pending(a, t);
        }
        match &self.r.work {
            Some(w) => self.want_work(a, w),
            None => self.want_plan(),
        }
    }

    fn want_admission(&self, reading: &Reading) -> Want {
        let Some(issue) = &reading.issue else {
            return Want::Do(Effect::FetchIssue);
        };
        let settings = &self.project.settings;
        // An issue a codeowner did not open runs only as one of supervisor's sealed sub-issues
        // of an epic, which its context (the epic) decides.
        let sealed = sealed_epic(settings, issue).is_some();
        if let Some(reason) = refuse_issue(settings, issue).filter(|_| !sealed) {
            return refuse(reason);
        }
        let Some(ctx) = &reading.context else {
            return Want::Do(Effect::FetchContext(Box::new(issue.clone())));
        };
        if sealed {
            if let Err(reason) =
                sealed_task(settings, issue, ctx.viewer.as_deref(), ctx.epic.as_ref())
            {
                return refuse(reason);
            }
        }
        if let Some(pull) = &self.s.pull {
            return self.want_revision_admission(&pull.feedback, issue, ctx, reading);
        }
        let Some(board) = &reading.board else {
            if self.opts.add_to_board && !self.opts.dry_run {
                return Want::Do(Effect::AddToBoard(Box::new(issue.clone())));
            }
            return Want::Fail(RunError::GitHub(GitHubError::NotOnBoard {
                issue: issue.number,
                project: settings.project_number,
            }));
        };
        if let Some(reason) = refuse_context(settings, issue, &ctx.blockers, &ctx.editors, sealed) {
            return refuse(reason);
        }
        if let TitleTrust::Refused(reason) = trusted_title(settings, issue, &ctx.editors) {
            return refuse(reason);
        }
        match start_column(settings, &self.project.workflow, board) {
            Ok(stage) => admit(stage.to_string(), issue, ctx, reading),
            Err(reason) => refuse(reason),
        }
    }

    /// Post again what GitHub did not confirm, once per round (at the start and at the end).
    fn want_outbox(&self) -> Option<Want> {
        let (marker, text) = self
            .r
            .outbox
            .iter()
            .find(|(m, _)| !self.s.outbox_tried.contains(m))?;
        Some(Want::Do(Effect::Post {
            marker: marker.clone(),
            text: text.clone(),
        }))
    }

    fn want_finish(&self, end: &RunEnd, cleaned: bool) -> Want {
        if let Some(retry) = self.want_outbox() {
            return retry;
        }
        // A run stopped for a missing permission stays stopped: its comments fail for the same
        // reason, and running again helps only once the permission is granted.
        let permission = self.r.stop_cause == Some(ErrorClass::Permission);
        let end = match (&self.r.outbox[..], end) {
            ([], _) | (_, RunEnd::Paused { .. } | RunEnd::DryRun { .. }) => end.clone(),
            (_, RunEnd::Stopped { .. }) if permission => end.clone(),
            (unconfirmed, _) => RunEnd::Paused {
                reason: format!(
                    "GitHub did not confirm {} comment{} ({}); running again posts {}",
                    unconfirmed.len(),
                    if unconfirmed.len() == 1 { "" } else { "s" },
                    unconfirmed
                        .iter()
                        .map(|(m, _)| format!("{} {}", m.stage, m.kind))
                        .collect::<Vec<_>>()
                        .join(", "),
                    if unconfirmed.len() == 1 { "it" } else { "them" }
                ),
            },
        };
        let paused = end.is_resumable();
        if !cleaned {
            return Want::Do(Effect::Cleanup(Cleanup {
                keep_worktree: paused || self.opts.debug,
                keep_checkpoint: paused,
            }));
        }
        let events = if paused {
            Vec::new()
        } else {
            vec![Event::Finished {
                outcome: end_text(&end),
            }]
        };
        Want::End(end, events)
    }

    fn want_stop(&self, reason: &UserText) -> Want {
        let (stage, attempt) = self.column_attempt();
        let marker = self.marker(&stage, attempt, MarkerKind::Stopped);
        if !self.handled(&marker) {
            return Want::Do(Effect::Post {
                marker,
                text: Text::Stopped {
                    stage,
                    reason: reason.clone(),
                },
            });
        }
        if !self.r.stopped {
            return Want::Record(vec![Event::Stopped {
                reason: reason.to_string(),
            }]);
        }
        Want::Finish(RunEnd::Stopped {
            stage,
            reason: reason.clone(),
        })
    }

    fn want_pending(&self, a: &Admitted, t: &Transition) -> Want {
        if self.opts.revise.is_some() {
            return self.want_revision_move(a, t);
        }
        if t.to == t.from {
            return Want::Record(vec![Event::Applied {
                transition: t.clone(),
            }]);
        }
        let attempt = self.r.attempts.get(&t.from).copied().unwrap_or(0);
        let stop = |why: String| Want::Record(vec![halt(t.from.clone(), attempt, why)]);
        match (self.stage(&t.to), &a.board) {
            (Some(stage), Some(card)) => Want::Do(Effect::MoveCard {
                card: Box::new(card.clone()),
                to: stage.id(),
            }),
            (None, _) => stop(format!("the workflow has no stage {}", t.to)),
            (_, None) => stop(format!("issue #{} has no card to move", a.issue.number)),
        }
    }

    fn want_plan(&self) -> Want {
        let (column, attempt) = self.column_attempt();
        let p = &self.project;
        let has = |h: &str| self.has_trusted_heading(h);
        let step = plan(
            &p.workflow,
            &self.r.state,
            &column,
            p.settings.enable_experimental_features,
            &has,
        );
        match step {
            Err(e) => Want::End(
                RunEnd::Stopped {
                    stage: column,
                    reason: UserText::ours(e.to_string()),
                },
                vec![Event::Stopped {
                    reason: e.to_string(),
                }],
            ),
            Ok(PlanStep::Finish) => Want::Finish(self.done_end()),
            Ok(PlanStep::Stop(reason)) => {
                Want::Record(vec![halt(column, attempt, reason.to_string())])
            }
            Ok(PlanStep::Move(transition)) => Want::Record(vec![Event::Decision { transition }]),
            Ok(PlanStep::RunAgent) => self.want_start(&column),
        }
    }

    fn want_start(&self, column: &str) -> Want {
        let attempt = self.r.attempts.get(column).copied().unwrap_or(0);
        let Some((stage, agent)) = (self.stage(column)).and_then(|s| Some((s, s.agent.clone()?)))
        else {
            let why = format!("the workflow has no stage {column} with an agent to run");
            return Want::Record(vec![halt(column.to_string(), attempt, why)]);
        };
        if self.project.roles.get(&agent).is_none() {
            return Want::Record(vec![halt(
                stage.status.clone(),
                attempt,
                format!("agent `{agent}` has no definition"),
            )]);
        }
        Want::Record(vec![Event::StageStarted {
            stage: stage.status.clone(),
            agent,
            attempt: attempt + 1,
            fix: None,
        }])
    }

    /// An answer that broke the output protocol: ask once for a usable one, then stop.
    fn want_fix(&self, w: &Work, problem: &str) -> Want {
        if w.fix.is_some() {
            return Want::Record(vec![halt(
                w.stage.clone(),
                w.attempt,
                format!("{} produced no usable outcome, twice: {problem}", w.agent),
            )]);
        }
        Want::Record(vec![Event::StageStarted {
            stage: w.stage.clone(),
            agent: w.agent.clone(),
            attempt: w.attempt + 1,
            fix: Some(problem.to_string()),
        }])
    }

    fn want_work(&self, a: &Admitted, w: &Work) -> Want {
        let Some(stage) = self.stage(&w.stage) else {
            return Want::Record(vec![halt(
                w.stage.clone(),
                w.attempt,
                format!("the workflow has no stage {}", w.stage),
            )]);
        };
        if let Some(problem) = &w.unusable {
            return self.want_fix(w, problem);
        }
        let Some(outcome) = &w.outcome else {
            if self.s.started.as_ref() != Some(&(w.stage.clone(), w.attempt)) {
                // Started before a crash and never finished: a new attempt begins.
                return self.want_start(&w.stage);
            }
            if let Some(reason) = &w.stalled {
                // A stalled agent: pause; the rerun starts a new attempt (above).
                return self.want_pause(w, reason.clone());
            }
            if w.ran {
                // Ran in this process without an outcome: the halt event says why.
                return Want::Finish(RunEnd::Interrupted);
            }
            return Want::Do(Effect::Dispatch(Box::new(self.dispatch(a, stage, w))));
        };
        if let Some(want) = self.want_delivery(a, stage, w, outcome) {
            return want;
        }
        let p = &self.project;
        let decision = decide(DecideInput {
            workflow: &p.workflow,
            state: &self.r.state,
            column: &stage.status,
            outcome,
            gates: w.gates.as_deref(),
            max_rejections: p.settings.max_rejections,
            threshold: p.settings.audit_score_threshold,
            experimental: p.settings.enable_experimental_features,
        });
        match decision {
            Err(e) => Want::Record(vec![halt(w.stage.clone(), w.attempt, e.to_string())]),
            Ok(Decision::RunGates { hooks, .. }) => {
                if self.opts.revise.is_none() && self.unchanged(stage, w) && !self.proven_resolved()
                {
                    return Want::Record(vec![halt(
                        w.stage.clone(),
                        w.attempt,
                        unproven_resolution(&w.agent),
                    )]);
                }
                Want::Do(Effect::RunGates {
                    stage: w.stage.clone(),
                    attempt: w.attempt,
                    hooks,
                    issue: Box::new(issue_text(&a.issue)),
                })
            }
            Ok(Decision::Stop(reason)) => self.want_stop_decided(w, outcome, reason),
            Ok(Decision::Move(t)) => self.want_move(a, stage, w, outcome, t),
        }
    }

    /// Commit and push the work, or post the agent's comment.
    fn want_delivery(
        &self,
        a: &Admitted,
        stage: &Stage,
        w: &Work,
        outcome: &Outcome,
    ) -> Option<Want> {
        if stage.commits {
            let issue = &a.issue;
            return match w.ahead {
                None => Some(Want::Do(Effect::Commit {
                    message: match self.revision_feedback() {
                        Some(f) => revision_commit_message(&f, &w.agent, w.attempt),
                        None => commit_message(issue.number, &issue.title, &w.agent, w.attempt),
                    },
                    scope: stage.writes.clone(),
                })),
                Some(_) if self.opts.revise.is_some() && !self.r.new_commit => {
                    Some(Want::Record(vec![halt(
                        w.stage.clone(),
                        w.attempt,
                        format!(
                            "{} changed nothing for the review feedback: nothing to push",
                            w.agent
                        ),
                    )]))
                }
                Some(ahead) if ahead > 0 && !w.pushed => Some(Want::Do(Effect::Push)),
                Some(_) => None,
            };
        }
        let marker = self.marker(&w.stage, w.attempt, MarkerKind::Stage);
        if self.handled(&marker) {
            return None;
        }
        let body = outcome
            .comment_body
            .clone()
            .or_else(|| outcome.summary.clone())
            .unwrap_or_else(|| format!("{} completed without a comment.", w.agent));
        let note = outcome
            .partial
            .as_ref()
            .map(|why| format!("partial findings: {why}"));
        let findings = if stage.review {
            outcome.findings.clone()
        } else {
            Vec::new()
        };
        Some(Want::Do(Effect::Post {
            marker,
            text: Text::Stage {
                body,
                findings,
                facts: self.facts(w),
                note,
            },
        }))
    }

    fn want_stop_decided(&self, w: &Work, outcome: &Outcome, reason: StopReason) -> Want {
        if reason.is_resumable() {
            return self.want_pause(w, reason.to_string());
        }
        if let StopReason::MaxRejections { last, .. } = &reason {
            if let Some(post) = self.score_note(w, outcome, last) {
                return post;
            }
            // The rejection that went over the limit counts like every other.
            return Want::Record(vec![Event::Halted {
                stage: w.stage.clone(),
                attempt: w.attempt,
                halt: Halt::Stop {
                    reason: UserText::ours(reason.to_string()),
                    cause: None,
                    rejection: Some(last.clone()),
                },
            }]);
        }
        Want::Record(vec![halt(w.stage.clone(), w.attempt, reason.to_string())])
    }

    /// Stop short with a comment saying why, keeping everything for a rerun (time, not a human,
    /// fixes the cause); the rerun runs the gates again.
    fn want_pause(&self, w: &Work, reason: String) -> Want {
        let marker = self.marker(&w.stage, w.attempt, MarkerKind::Paused);
        if !self.handled(&marker) {
            return Want::Do(Effect::Post {
                marker,
                text: Text::Stopped {
                    stage: w.stage.clone(),
                    reason: UserText::ours(reason.clone()),
                },
            });
        }
        Want::Record(vec![Event::Paused { reason }])
    }

    /// The score-gate comment for an approval that missed the threshold, unless already posted.
    fn score_note(&self, w: &Work, outcome: &Outcome, t: &Transition) -> Option<Want> {
        let score = t
            .score
            .clone()
            .filter(|_| t.kind == TransitionKind::ScoreGate)?;
        let marker = self.marker(&w.stage, w.attempt, MarkerKind::ScoreGate);
        (!self.handled(&marker)).then(|| {
            Want::Do(Effect::Post {
                marker,
                text: Text::ScoreGate {
                    score,
                    findings: outcome.findings.clone(),
                },
            })
        })
    }

    fn want_move(
        &self,
        a: &Admitted,
        stage: &Stage,
        w: &Work,
        outcome: &Outcome,
        t: Transition,
    ) -> Want {
        let todo = move_work(&self.project.workflow, stage, &t, w.gates.as_deref());
        let gates_marker = self.marker(&w.stage, w.attempt, MarkerKind::Gates);
        if todo.gate_note && !self.handled(&gates_marker) {
            return Want::Do(Effect::Post {
                marker: gates_marker,
                text: Text::Gates {
                    reports: w.gates.clone().unwrap_or_default(),
                },
            });
        }
        if todo.undo_commit && !w.undone {
            return Want::Do(Effect::UndoCommit);
        }
        if todo.score_note {
            if let Some(post) = self.score_note(w, outcome, &t) {
                return post;
            }
        }
        if todo.pull_request && self.opts.revise.is_none() && self.resolved_without_change() {
            return self.want_resolved(a, w, t);
        }
        if todo.pull_request {
            let want = match self.opts.revise {
                Some(_) => self.want_revision_done(a, w, outcome, &t),
                None => self.want_pull_request(a, w, outcome, &t),
            };
            if let Some(want) = want {
                return want;
            }
        }
        Want::Record(vec![Event::Decision { transition: t }])
    }

    fn want_pull_request(
        &self,
        a: &Admitted,
        w: &Work,
        outcome: &Outcome,
        t: &Transition,
    ) -> Option<Want> {
        let Some((number, _, _)) = &self.r.pr else {
            let Some(score) = t.score.clone() else {
                // Approvals are scored; an unscored one opens nothing.
                return Some(Want::Record(vec![halt(
                    w.stage.clone(),
                    w.attempt,
                    "the approval carries no audit score: no pull request without one",
                )]));
            };
            return Some(Want::Do(Effect::OpenPullRequest(Box::new(
                self.pr_request(&a.issue, outcome, score),
            ))));
        };
        match self.r.mergeability {
            None => Some(Want::Do(Effect::CheckMergeable { number: *number })),
            Some(Some(false)) if !self.r.base_merged => Some(Want::Do(Effect::MergeBase)),
            Some(_) => None,
        }
    }

    fn pr_request(&self, issue: &Issue, outcome: &Outcome, score: AuditScore) -> PrRequest {
        let p = &self.project;
        PrRequest {
            issue: issue.number,
            issue_title: issue.title.clone(),
            head: self.branch(),
            base: self.base(),
            title: outcome.pr_title.clone(),
            audit_comment: outcome
                .comment_body
                .clone()
                .unwrap_or_else(|| "## Audit Approved".into()),
            auditor_body: outcome.pr_body.clone(),
            score,
            findings: outcome.findings.clone(),
            gates: self.r.last_gates.clone().unwrap_or_default(),
            rejections: self.r.state.total_rejections(),
            gate_bounces: self.r.state.gate_bounces,
            draft: p.settings.draft_pr,
            head_sha: self.r.pushed.clone(),
            revision: 0,
            proof: self.proof_table(),
            kept_proof: None,
        }
    }

    /// The Proof section of the pull request's body as supervisor wrote it (nobody else edited the
    /// body): a revision keeps it, since its own run proves no designated tests.
    pub(super) fn kept_proof(&self) -> Option<String> {
        let f = self.feedback()?;
        let viewer = self.viewer()?;
        let ours = |who: &str| who.eq_ignore_ascii_case(viewer);
        if !ours(&f.author) || f.body_editor.as_deref().is_some_and(|e| !ours(e)) {
            return None;
        }
        super::decide::revision::proof_section(&f.body)
    }

    /// The first stage whose agent writes only where its `writes` says (TestDesign, writing tests).
    fn test_stage(&self) -> Option<&Stage> {
        self.project
            .workflow
            .stages
            .iter()
            .find(|s| s.writes.is_some() && s.agent.is_some())
    }

    /// What the oracle's gates are given: the designated tests and the contract of the test
    /// designer's last answer, its commit, and what RED recorded. `None` without a test stage.
    pub(crate) fn proof_input(&self) -> Option<ProofInput> {
        let wf = &self.project.workflow;
        let (ts, answer) = self.test_answer()?;
        let criteria = answer.map(|o| o.contract.clone()).unwrap_or_default();
        let outside = match &self.r.work {
            Some(w) if w.stage == ts.status => w.outside.clone(),
            _ => Vec::new(),
        };
        Some(ProofInput {
            designated: designated_by(answer),
            criteria,
            test_paths: ts.writes.clone().unwrap_or_default(),
            tests_commit: self.r.tests_commit.clone().map(String::from),
            already_resolved: answer.is_some_and(|o| o.already_resolved),
            outside,
            base: self.r.red.clone(),
            unverifiable: wf.contract.unverifiable,
            verify: wf.verify.clone(),
        })
    }

    /// The test stage and its last answer (none yet before it answered).
    fn test_answer(&self) -> Option<(&Stage, Option<&Outcome>)> {
        let ts = self.test_stage()?;
        Some((ts, self.r.outcomes.get(&ts.status)))
    }

    /// The Proof table: each criterion's tests on the base (RED) and on the head (GREEN).
    fn proof_table(&self) -> Option<ProofTable> {
        let (_, answer) = self.test_answer()?;
        let designated = designated_by(answer);
        if designated.is_empty() || (self.r.red.is_none() && self.r.green.is_none()) {
            return None;
        }
        Some(ProofTable {
            lines: crate::verify::proof_lines(
                answer.map(|o| o.contract.as_slice()).unwrap_or_default(),
                &designated,
                self.r.red.as_ref(),
                self.r.green.as_ref(),
            ),
            base: self.r.red.as_ref().and_then(|e| e.totals),
            head: self.r.green.as_ref().and_then(|e| e.totals),
            runner: self
                .r
                .green
                .as_ref()
                .or(self.r.red.as_ref())
                .map(|e| e.runner.clone())
                .unwrap_or_default(),
            already_resolved: answer.is_some_and(|o| o.already_resolved),
        })
    }

    /// A committing stage's agent that changed nothing in this run (a test stage's commit is not
    /// the developer's change).
    fn unchanged(&self, stage: &Stage, w: &Work) -> bool {
        if stage.writes.is_some() || !stage.commits {
            return false;
        }
        if self.r.committed_by.contains(&stage.status) {
            return false;
        }
        let tests_only = self.r.tests_commit.is_some();
        tests_only || unchanged_after_commit_stage(stage, w.ahead.unwrap_or(0))
    }

    /// RED showed every designated test passing on the base, as the test designer said: the issue
    /// is resolved already, if the audit agrees.
    fn proven_resolved(&self) -> bool {
        let Some((_, Some(answer))) = self.test_answer() else {
            return false;
        };
        answer.already_resolved
            && self.r.red.as_ref().is_some_and(|e| {
                !e.designated.is_empty()
                    && e.designated
                        .iter()
                        .all(|r| r.outcome == crate::verify::Outcome::Pass)
            })
    }

    /// The developer changed nothing and RED proved the issue resolved: an approval closes the
    /// issue instead of opening a pull request.
    fn resolved_without_change(&self) -> bool {
        let Some(stage) = self
            .project
            .workflow
            .stages
            .iter()
            .find(|s| s.commits && s.writes.is_none() && s.agent.is_some())
        else {
            return false;
        };
        !self.r.committed_by.contains(&stage.status) && self.proven_resolved()
    }

    fn want_resolved(&self, a: &Admitted, w: &Work, approved: Transition) -> Want {
        if !self.r.closed {
            return Want::Do(Effect::CloseIssue {
                issue: a.issue.number,
                marker: self.marker(&w.stage, w.attempt, MarkerKind::Resolved),
                text: Text::Resolved {
                    branch: self.branch(),
                    base: self.base(),
                    proof: self.proof_table(),
                },
            });
        }
        Want::Record(vec![Event::Decision {
            transition: Transition {
                reason: format!(
                    "{}; nothing changed: every designated test passes on the base, so the issue was closed as already resolved",
                    approved.reason
                ),
                ..approved
            },
        }])
    }

    fn dispatch(&self, a: &Admitted, stage: &Stage, w: &Work) -> Dispatch {
        let issue = &a.issue;
        let mut notes = self.trusted_notes();
        if self.opts.revise.is_some() {
            // The approved audit is given as such; the rest of the issue's story stays.
            notes.retain(|n| !self.is_review_note(n));
        }
        let returned = match &w.fix {
            Some(problem) => Some(super::context::Return::Unusable {
                problem: problem.clone(),
            }),
            None => return_context(
                &self.r.transitions,
                &self.r.outcomes,
                self.r.last_gates.as_deref(),
                stage,
            ),
        };
        Dispatch {
            stage: w.stage.clone(),
            agent: w.agent.clone(),
            attempt: w.attempt,
            task: TaskSpec {
                issue: IssueContext {
                    number: issue.number,
                    title: issue.title.clone(),
                    body: issue.body.clone(),
                    author: issue.author.clone(),
                    url: issue.html_url.clone(),
                },
                notes,
                returned,
                gates: stage.review.then(|| self.r.last_gates.clone()).flatten(),
                proof: (stage.review || (stage.commits && stage.writes.is_none()))
                    .then(|| self.proof_table())
                    .flatten(),
                worktree: (self.branch(), self.base()),
                revision: self.revision_feedback().map(|mut f| {
                    f.approved_audit = self.approved_audit();
                    f
                }),
            },
            keep_partial: stage.skip_when_heading.is_some(),
        }
    }

    /// The run so far for a live view, once admitted (never for a dry run); `end` once it ended.
    pub(crate) fn progress(&self, end: Option<&RunEnd>) -> Option<Progress> {
        if self.admitted_run().is_none() || self.opts.dry_run {
            return None;
        }
        let stages: Vec<(String, Option<String>)> = (self.project.workflow.stages.iter())
            .map(|s| (s.status.clone(), s.agent.clone()))
            .collect();
        let work = self.r.work.as_ref();
        // The stage at work, else the card's column (a stage before or after the agents').
        let at = work.map(|w| w.stage.as_str()).or(self.r.column.as_deref());
        let stages = match end {
            None => Progress::marks(&stages, at, StageMark::Current, StageMark::Pending),
            Some(
                RunEnd::PullRequest { .. }
                | RunEnd::ClosedAsResolved
                | RunEnd::AlreadyDone
                | RunEnd::Revised { .. },
            ) => Progress::marks(&stages, None, StageMark::Done, StageMark::Done),
            Some(RunEnd::Stopped { stage, .. }) => {
                Progress::marks(&stages, Some(stage), StageMark::Stopped, StageMark::Pending)
            }
            Some(RunEnd::Interrupted | RunEnd::Paused { .. }) => {
                Progress::marks(&stages, at, StageMark::Paused, StageMark::Pending)
            }
            Some(
                RunEnd::Refused { .. }
                | RunEnd::DryRun { .. }
                | RunEnd::NothingToRevise { .. }
                | RunEnd::Planned { .. }
                | RunEnd::EpicFinished { .. },
            ) => Progress::marks(&stages, None, StageMark::Pending, StageMark::Pending),
        };
        Some(Progress {
            run_id: self.run_id.clone(),
            issue: self.opts.issue.get(),
            stages,
            current: work.filter(|_| end.is_none()).map(|w| CurrentWork {
                stage: w.stage.clone(),
                agent: w.agent.clone(),
                attempt: w.attempt,
            }),
            tokens: self.r.agents.iter().map(|a| a.tokens).sum(),
            cost_usd: self.r.agents.iter().map(|a| a.cost_usd).sum(),
            gates: self.r.gate_rounds.last().cloned(),
            pr: self.r.pr.as_ref().map(|(_, url, _)| url.clone()),
            end: end.cloned(),
            rejections: self.r.rejections.clone(),
        })
    }

    /// Comments that may reach an agent, and this run's stage comments GitHub has not confirmed yet
    /// (they are supervisor's own text, waiting in the outbox).
    fn trusted_notes(&self) -> Vec<TrustedNote> {
        let Some(ctx) = self.context() else {
            return Vec::new();
        };
        let ours = self.r.posted.iter().map(|(_, id)| *id).collect();
        let settings = &self.project.settings;
        let owner = |login: &str| settings.is_codeowner(login);
        let mut notes = trusted_notes(
            &ctx.comments,
            &ctx.editors,
            &Authority {
                viewer: ctx.viewer.as_deref(),
                ours: &ours,
                is_codeowner: &owner,
            },
        );
        notes.extend(self.r.outbox.iter().filter_map(|(m, text)| match text {
            Text::Stage { body, .. } => Some(TrustedNote {
                stage: Some(m.stage.clone()),
                kind: NoteKind::Stage,
                author: ctx.viewer.clone().unwrap_or_default(),
                body: body.clone(),
            }),
            _ => None,
        }));
        notes
    }

    fn has_trusted_heading(&self, heading: &str) -> bool {
        self.issue().is_some_and(|i| has_heading(&i.body, heading))
            || self
                .trusted_notes()
                .iter()
                .any(|n| has_heading(&n.body, heading))
    }

    fn facts(&self, w: &Work) -> RunFacts {
        self.r
            .agents
            .iter()
            .rev()
            .find(|a| a.stage == w.stage && a.attempt == w.attempt)
            .map(|a| RunFacts {
                agent: a.agent.clone(),
                attempt: a.attempt,
                duration_ms: a.duration_ms,
                tokens: a.tokens,
                tool_calls: a.tool_calls,
                model: a.model.clone(),
            })
            .unwrap_or_else(|| RunFacts {
                agent: w.agent.clone(),
                attempt: w.attempt,
                ..RunFacts::default()
            })
    }

    /// Whether GitHub has (or the outbox holds) the comment with this marker.
    fn handled(&self, marker: &Marker) -> bool {
        self.r.posted.iter().any(|(m, _)| m == marker)
            || self.r.outbox.iter().any(|(m, _)| m == marker)
    }

    fn marker(&self, stage: &str, attempt: u32, kind: MarkerKind) -> Marker {
        Marker::new(self.run_id.clone(), stage, attempt, kind)
    }

    fn stage(&self, name: &str) -> Option<&Stage> {
        self.project.workflow.stage_for_column(name)
    }

    /// The column, and the latest attempt started there.
    fn column_attempt(&self) -> (String, u32) {
        let column = self.r.column.clone().unwrap_or_default();
        let attempt = self.r.attempts.get(&column).copied().unwrap_or(0);
        (column, attempt)
    }

    /// The stage and attempt the current work belongs to (the column's otherwise).
    fn attempt_here(&self) -> (String, u32) {
        match &self.r.work {
            Some(w) => (w.stage.clone(), w.attempt),
            None => self.column_attempt(),
        }
    }

    fn worktree(&self) -> Option<&WorktreeInfo> {
        self.admitted_run().and_then(|a| a.worktree.as_ref())
    }

    fn branch(&self) -> String {
        self.worktree()
            .map(|w| w.branch.clone())
            .unwrap_or_default()
    }

    fn base(&self) -> String {
        self.worktree()
            .map(|w| w.base.clone())
            .unwrap_or_else(|| self.project.settings.default_branch.clone())
    }

    fn is_done(&self) -> bool {
        self.r.pending.is_none()
            && self
                .r
                .column
                .as_deref()
                .and_then(|c| self.stage(c))
                .is_some_and(|s| s.built_in == Some(BuiltIn::Done))
    }

    /// How a run that reached Done ended.
    fn done_end(&self) -> RunEnd {
        if let Some(end) = self.revised_end() {
            return end;
        }
        match (&self.r.pr, self.r.closed) {
            (Some((number, url, created)), _) => RunEnd::PullRequest {
                number: *number,
                url: url.clone(),
                created: *created,
            },
            (None, true) => RunEnd::ClosedAsResolved,
            (None, false) => RunEnd::AlreadyDone,
        }
    }

    /// The dry run's plan: the stages ahead, their agents and backends, the gates.
    fn plan_lines(&self) -> Vec<String> {
        let p = &self.project;
        let wf = &p.workflow;
        let (column, _) = self.column_attempt();
        let revision = self.revision_plan();
        let mut steps = vec![match &revision {
            Some((first, _)) => first.clone(),
            None => format!("card is in {column}"),
        }];
        let start = wf
            .stage_for_column(&column)
            .and_then(|s| wf.index(&s.status))
            .unwrap_or(0);
        for st in &wf.stages[start..] {
            match (&st.agent, st.built_in) {
                (_, Some(BuiltIn::Backlog)) => steps.push(format!(
                    "move {} → {}",
                    st.status,
                    st.forward.as_deref().unwrap_or("?")
                )),
                (_, Some(BuiltIn::Done)) => steps.push(match &revision {
                    Some((_, last)) => last.clone(),
                    None => "open the pull request and move the card to Done".into(),
                }),
                (Some(agent), None) => steps.push(self.plan_line(st, agent)),
                _ => {}
            }
        }
        let ws = crate::workspace::WorkspaceConfig::from_settings(&p.root, &p.settings);
        let branch = format!("{}{}", ws.branch_prefix, self.opts.issue);
        steps.push(format!(
            "worktree {} on branch {branch}",
            ws.worktree_root.join(&branch).display()
        ));
        steps
    }

    fn plan_line(&self, st: &Stage, agent: &str) -> String {
        let p = &self.project;
        let backend = p
            .roles
            .get(agent)
            .map(|d| d.backend_name(&p.settings).to_string())
            .unwrap_or_default();
        let mut s = format!("{}: run {agent} ({backend})", st.status);
        s.push_str(if st.commits {
            ", commit and push"
        } else {
            ", post its comment"
        });
        if !st.hooks.is_empty() {
            let names: Vec<&str> = st.hooks.iter().map(|h| h.name.as_str()).collect();
            s.push_str(&format!(", then gates: {}", names.join(", ")));
        }
        s
    }
}

/// The issue text the gates may read (trusted: the issue of a codeowner).
fn issue_text(i: &Issue) -> IssueText {
    IssueText {
        number: i.number,
        title: i.title.clone(),
        body: i.body.clone(),
    }
}

/// Admitted from what was read, starting from `column`.
fn admit(column: String, issue: &Issue, context: &Context, reading: &Reading) -> Want {
    Want::Admit(
        column,
        Box::new(Admitted {
            issue: issue.clone(),
            context: context.clone(),
            board: reading.board.clone(),
            worktree: None,
        }),
    )
}

fn refuse(reason: String) -> Want {
    Want::End(
        RunEnd::Refused {
            reason: reason.clone(),
        },
        vec![Event::Stopped { reason }],
    )
}

fn halt(stage: String, attempt: u32, reason: impl Into<String>) -> Event {
    Event::Halted {
        stage,
        attempt,
        halt: Halt::stop(UserText::ours(reason)),
    }
}

/// What pushing needs of a fine-grained token or a GitHub App.
const PUSH_PERMISSION: &str = "Contents: write";

/// The stop of a run whose effect (`doing`) failed with `e`: the detail goes to the journal (a
/// warning) and the log; the stop's reason, said on GitHub, comes from the failure's class.
fn failed_stop(
    stage: String,
    attempt: u32,
    doing: &str,
    e: &EffectError,
    permission: &str,
) -> Vec<Event> {
    vec![
        warning(format!("{doing} failed: {e}")),
        Event::Halted {
            stage,
            attempt,
            halt: Halt::Stop {
                reason: UserText::failed(doing, e, permission),
                cause: Some(e.class),
                rejection: None,
            },
        },
    ]
}

fn warning(message: String) -> Event {
    tracing::warn!("{message}");
    Event::Warning { message }
}

fn end_text(end: &RunEnd) -> String {
    match end {
        RunEnd::PullRequest { url, .. } => format!("pull request {url}"),
        RunEnd::Interrupted => "interrupted".into(),
        other => format!("{other:?}"),
    }
}

fn agent_line(stage: &str, attempt: u32, stats: &AgentStats) -> AgentLine {
    AgentLine {
        stage: stage.to_string(),
        agent: stats.agent.clone(),
        attempt,
        backend: stats.backend.clone(),
        duration_ms: stats.duration_ms,
        tokens: stats.usage.total,
        cost_usd: stats.usage.cost_usd,
        tool_calls: stats.tool_calls,
        model: stats.model.clone(),
        exit: exit_text(&stats.exit),
    }
}
