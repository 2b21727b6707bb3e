//! The driver: steps a [`Machine`], journals what each step recorded, performs the effect it asked
//! for through an [`Effects`] implementation, and feeds the answer back.

use std::time::Instant;

use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::effects::{Effect, Effects, Input};
use super::failure::EffectError;
use super::journal::{Event, Journal, JournalError};
use super::machine::{Machine, Next};
use super::summary::{RunEnd, RunSummary, exit};
use crate::config::{ConfigError, Hook};
use crate::gates::{GateReport, IssueText};
use crate::github::GitHubError;
use crate::ids::{IssueNumber, PrNumber};
use crate::workspace::WorkspaceError;

/// What `supervisor run` was asked to do.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// The issue the run is about (for a revision: the issue its pull request closes).
    pub issue: IssueNumber,
    /// Keep the worktree however the run ends.
    pub debug: bool,
    /// Read, plan and print; write nothing.
    pub dry_run: bool,
    /// Add the issue to the board (Backlog) when it is not on it, instead of stopping.
    pub add_to_board: bool,
    /// Revise this pull request (of `issue`) after review feedback instead of running the issue.
    pub revise: Option<PrNumber>,
    /// The run is a task of an epic, started by the epic's work in the project the task runs in
    /// (its base the epic branch with `branch` integration).
    pub epic_task: bool,
}

/// Errors that end a run before or outside the stages (GitHub, workspace, journal, configuration).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    GitHub(#[from] GitHubError),
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error(
        "another supervisor (pid {pid}) is running issue #{issue}; wait for it, or stop it and run again to resume"
    )]
    Busy { pid: u32, issue: u64 },
    /// The work cannot start as asked (an unfinished run of the issue, a pull request that closes
    /// no issue).
    #[error("{0}")]
    Unfinished(String),
}

impl RunError {
    /// Whether running the same command again continues the run.
    pub fn is_resumable(&self) -> bool {
        match self {
            RunError::GitHub(e) => e.is_resumable() || e.is_transient(),
            RunError::Config(_) | RunError::Busy { .. } | RunError::Unfinished(_) => false,
            _ => true,
        }
    }

    pub fn exit_code(&self) -> u8 {
        match self {
            RunError::Config(_) => exit::USAGE,
            RunError::GitHub(_) => exit::RESUMABLE,
            _ => exit::STOPPED,
        }
    }
}

/// Run `machine` to its end against `effects`, journaling every step before acting on it.
/// Cancelling `cancel` stops the running agent or gates and ends the run at the next safe point.
pub async fn drive<E: Effects>(
    machine: &mut Machine,
    effects: &mut E,
    journal: &mut Journal,
    cancel: &CancellationToken,
) -> Result<RunSummary, RunError> {
    let started = Instant::now();
    let mut input = Input::Start;
    loop {
        let step = machine.step(input);
        journal.record_all(step.events)?;
        let effect = match step.next {
            Next::Effect(effect) => effect,
            Next::End(end) => {
                track(machine, effects, Some(&end)).await;
                let journal = journal.path().display().to_string();
                return Ok(machine.summary(end, journal, elapsed_ms(started)));
            }
            Next::Fail(e) => return Err(fail(machine, effects, journal, e).await),
        };
        track(machine, effects, None).await;
        input = if cancel.is_cancelled() && effect.starts_work() {
            Input::Cancelled
        } else {
            let span = effect_span(machine, &effect);
            let name = effect.name();
            let performed = async {
                tracing::debug!("{name}");
                let input = perform(machine, effects, journal, effect, cancel).await;
                if let Err(e) = &input {
                    tracing::debug!("{name} failed: {e}");
                }
                input
            };
            match performed.instrument(span).await {
                Ok(input) => input,
                Err(e) => return Err(fail(machine, effects, journal, e).await),
            }
        };
    }
}

/// The span of one effect: the stage it works for and, for an agent or a gate round, the attempt
/// (inside the run's span, which names the run and the issue).
fn effect_span(machine: &Machine, effect: &Effect) -> tracing::Span {
    match effect {
        Effect::Dispatch(d) => tracing::info_span!(
            "stage",
            stage = %d.stage,
            attempt = d.attempt,
            agent = %d.agent
        ),
        Effect::RunGates { stage, attempt, .. } => {
            tracing::info_span!("stage", stage = %stage, attempt = attempt, gates = true)
        }
        _ => tracing::info_span!("stage", stage = machine.column().unwrap_or("-")),
    }
}

fn elapsed_ms(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Show the run's progress, once it is admitted.
async fn track<E: Effects>(machine: &Machine, effects: &mut E, end: Option<&RunEnd>) {
    if let Some(progress) = machine.progress(end) {
        effects.track(&progress).await;
    }
}

/// A run that cannot go on keeps its checkpoint and worktree; the journal and the live view say
/// why. A run that never started (its issue not found, say) has nothing to resume: it ends as
/// stopped, unless running again later may get further (GitHub failing for the moment).
async fn fail<E: Effects>(
    machine: &Machine,
    effects: &mut E,
    journal: &mut Journal,
    e: RunError,
) -> RunError {
    let reason = e.to_string();
    if !machine.admitted() && !e.is_resumable() {
        let _ = journal.record(Event::Stopped {
            reason: format!("not started: {reason}"),
        });
        return e;
    }
    let _ = journal.record(Event::Paused {
        reason: reason.clone(),
    });
    track(machine, effects, Some(&RunEnd::Paused { reason })).await;
    e
}

/// The answer to git work: a failure while a stop is under way is the stop (git was killed), not a
/// fault of the change.
fn unless_stopped<T>(
    result: Result<T, EffectError>,
    cancel: &CancellationToken,
    answer: fn(Result<T, EffectError>) -> Input,
) -> Input {
    match result {
        Err(_) if cancel.is_cancelled() => Input::Cancelled,
        result => answer(result),
    }
}

/// Run a round of gates (the `hooks` of leaving `stage` on its `attempt`), journaling each gate as
/// it finishes (`gate-finished`, in the order they finish) before the round's reports go to the
/// machine. A gate the effects did not tell of one by one is journaled when the round ends, so
/// every gate has its event before the round's.
async fn gate_round<E: Effects>(
    machine: &Machine,
    fx: &mut E,
    journal: &mut Journal,
    (stage, attempt, hooks, text): (String, u32, Vec<Hook>, IssueText),
    cancel: &CancellationToken,
) -> Result<Input, RunError> {
    let (feed, mut finished) = tokio::sync::mpsc::unbounded_channel();
    let mut told = vec![false; hooks.len()];
    let mut tell = |(i, report): (usize, GateReport)| -> Result<(), JournalError> {
        if told.get(i).copied() != Some(false) {
            return Ok(());
        }
        told[i] = true;
        journal.record(Event::GateFinished {
            stage: stage.clone(),
            attempt,
            report,
        })
    };
    let reports = {
        let gates = fx.run_gates(&hooks, &text, machine.proof_input(), feed, cancel);
        tokio::pin!(gates);
        loop {
            tokio::select! {
                biased;
                Some(one) = finished.recv() => tell(one)?,
                reports = &mut gates => break reports,
            }
        }
    };
    while let Ok(one) = finished.try_recv() {
        tell(one)?;
    }
    // Gates a stop cut short said nothing about the change.
    if cancel.is_cancelled() {
        return Ok(Input::Cancelled);
    }
    for (i, report) in reports.iter().enumerate() {
        tell((i, report.clone()))?;
    }
    Ok(Input::Gates {
        stage,
        attempt,
        reports,
    })
}

async fn perform<E: Effects>(
    machine: &Machine,
    fx: &mut E,
    journal: &mut Journal,
    effect: Effect,
    cancel: &CancellationToken,
) -> Result<Input, RunError> {
    Ok(match effect {
        Effect::FetchIssue => Input::Issue(Box::new(fx.fetch_issue(machine.issue_number()).await?)),
        Effect::FetchContext(issue) => Input::Context(Box::new(fx.fetch_context(&issue).await?)),
        Effect::AddToBoard(issue) => Input::OnBoard(Box::new(fx.add_to_board(&issue).await?)),
        Effect::PrepareWorktree => {
            let (info, warnings) = fx.prepare_worktree(cancel).await?;
            // Setup cut short by a stop is no worktree to work in.
            if cancel.is_cancelled() {
                return Ok(Input::Cancelled);
            }
            Input::Worktree { info, warnings }
        }
        Effect::Dispatch(d) => Input::Agent(Box::new(fx.dispatch(&d, cancel).await)),
        Effect::Commit { message, scope } => {
            Input::Committed(fx.commit(&message, scope.as_deref()).await)
        }
        Effect::Push => unless_stopped(fx.push().await, cancel, Input::Pushed),
        Effect::Post { marker, text } => {
            let result = fx.post(machine.post_target(), &marker, &text).await;
            Input::Posted {
                marker,
                text,
                result,
            }
        }
        Effect::MoveCard { card, to } => {
            fx.move_card(&card, &to).await?;
            Input::Moved
        }
        Effect::RunGates {
            stage,
            attempt,
            hooks,
            issue,
        } => {
            let round = (stage, attempt, hooks, *issue);
            return gate_round(machine, fx, journal, round, cancel).await;
        }
        Effect::UndoCommit => unless_stopped(fx.undo_commit().await, cancel, Input::Undone),
        Effect::CloseIssue {
            issue,
            marker,
            text,
        } => {
            fx.close_issue(issue, &marker, &text).await?;
            Input::Closed
        }
        Effect::OpenPullRequest(pr) => Input::PullRequest(fx.open_pull_request(&pr).await),
        Effect::CheckMergeable { number } => Input::Mergeable(fx.mergeable(number).await),
        Effect::MergeBase => unless_stopped(fx.merge_base().await, cancel, Input::Merged),
        Effect::Cleanup(how) => Input::CleanedUp {
            warnings: fx.cleanup(how).await,
        },
        Effect::FetchFeedback { pr } => {
            let (feedback, viewer) = fx.fetch_feedback(pr).await?;
            Input::Feedback {
                feedback: Box::new(feedback),
                viewer,
            }
        }
        Effect::PrepareRevision { head, ours } => {
            Input::Revision(fx.prepare_revision(&head, ours.as_deref(), cancel).await?)
        }
        Effect::AnswerThread(a) => {
            let result = fx.answer_thread(machine.post_target(), &a).await;
            Input::Answered {
                thread: a.thread,
                result,
            }
        }
        Effect::UpdatePullBody { number, request } => {
            Input::BodyUpdated(fx.update_pull_body(number, &request).await)
        }
    })
}
