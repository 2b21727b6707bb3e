//! What the engine asks the world to do ([`Effect`]), what comes back ([`Input`]), and the
//! [`Effects`] trait that does it: GitHub, the git worktree, agents, gates.
//!
//! The engine never performs I/O itself: the production implementation is `runtime::LiveEffects`;
//! tests drive the same engine against an in-memory world.

use std::future::Future;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::context::{IssueContext, Return, TrustedNote};
use super::decide::revision::RevisionFeedback;
use super::engine::RunError;
use super::failure::EffectError;
use super::summary::{Progress, RunFacts};
use super::user_text::UserText;
use crate::agent::{AgentRun, AuditFinding};
use crate::audit::AuditScore;
use crate::config::{Hook, StageId};
use crate::gates::{GateReport, IssueText};
use crate::github::{Blocker, BoardItem, Comment, Editors, Feedback, Issue, Marker, PullRequest};
use crate::ids::{CommitSha, IssueNumber, PrNumber};
use crate::workspace::{MergeOutcome, Reuse};

/// The content of a comment the engine posts, rendered to Markdown by the effects (`report`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Text {
    /// An agent's comment, its review findings, and the facts of its run.
    Stage {
        body: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        findings: Vec<AuditFinding>,
        facts: RunFacts,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
    /// The combined note of a gate round that blocked.
    Gates { reports: Vec<GateReport> },
    /// An approval whose computed score missed the threshold.
    ScoreGate {
        score: AuditScore,
        findings: Vec<AuditFinding>,
    },
    /// The run stopped in `stage`; a human is needed.
    Stopped { stage: String, reason: UserText },
    /// The developer changed nothing and the designated tests pass on the base: the issue is
    /// closed as already resolved.
    Resolved {
        branch: String,
        base: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        proof: Option<crate::verify::ProofTable>,
    },
    /// The answer in a review thread a revision addressed.
    ThreadAnswer { sha: CommitSha },
    /// A revision is done: what it addressed and where.
    Revised {
        round: u32,
        sha: CommitSha,
        /// (path, line) of each thread answered.
        threads: Vec<(String, Option<u64>)>,
        /// Review texts and requests it took in.
        general: usize,
        score: Option<Box<AuditScore>>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        left_out: Vec<String>,
    },
}

/// A reply in a review thread, and whether to resolve the thread.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadAnswer {
    pub thread: String,
    /// The comment replied to: the thread's top-level comment.
    pub reply_to: u64,
    pub marker: Marker,
    pub text: Text,
    pub resolve: bool,
    /// A reply with the marker is already in the thread.
    pub replied: bool,
}

/// The pull request to open (or find) on approval.
#[derive(Debug, Clone, PartialEq)]
pub struct PrRequest {
    pub(crate) issue: u64,
    pub(crate) issue_title: String,
    pub head: String,
    pub base: String,
    /// The auditor's title, if it gave one.
    pub(crate) title: Option<String>,
    /// The auditor's approving comment.
    pub(crate) audit_comment: String,
    pub(crate) auditor_body: Option<String>,
    pub(crate) score: AuditScore,
    pub(crate) findings: Vec<AuditFinding>,
    /// The latest gate reports, for the gate table.
    pub(crate) gates: Vec<GateReport>,
    pub(crate) rejections: u32,
    pub(crate) gate_bounces: u32,
    pub draft: bool,
    /// The head supervisor pushed, recorded hidden in the body (what a revision checks the
    /// branch against).
    pub(crate) head_sha: Option<CommitSha>,
    /// The revision this body is written by (0: the run that opened the pull request).
    pub revision: u32,
    /// The designated tests on the base and on the head.
    pub(crate) proof: Option<crate::verify::ProofTable>,
    /// A revision's: the Proof section of the body supervisor wrote, kept as it was.
    pub(crate) kept_proof: Option<String>,
}

/// Everything an agent's task is built from (trusted text only).
#[derive(Debug, Clone, PartialEq)]
pub struct TaskSpec {
    pub(crate) issue: IssueContext,
    pub(crate) notes: Vec<TrustedNote>,
    pub(crate) returned: Option<Return>,
    /// The gate reports a review stage weighs.
    pub(crate) gates: Option<Vec<GateReport>>,
    /// The Proof table a review stage weighs.
    pub(crate) proof: Option<crate::verify::ProofTable>,
    /// (branch, base) of the worktree.
    pub(crate) worktree: (String, String),
    /// Review feedback on the pull request, when the work revises one.
    pub revision: Option<RevisionFeedback>,
}

/// One agent dispatch.
#[derive(Debug, Clone, PartialEq)]
pub struct Dispatch {
    pub stage: String,
    pub agent: String,
    pub attempt: u32,
    pub(crate) task: TaskSpec,
    /// Keep the partial answer when a budget stops the agent (stages that may degrade).
    pub keep_partial: bool,
}

/// The worktree the run works in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorktreeInfo {
    pub path: String,
    pub branch: String,
    pub base: String,
    pub reused: Reuse,
}

/// What committing the agent's work did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitResult {
    /// The new commit, when there was something to commit.
    pub sha: Option<CommitSha>,
    /// Commits the branch has beyond its base.
    pub ahead: u32,
    pub head: CommitSha,
    /// Changes outside the stage's `writes`, undone before the commit.
    pub outside: Vec<String>,
}

/// What admission reads after the issue itself.
#[derive(Debug, Clone)]
pub struct Context {
    pub board: Option<BoardItem>,
    pub blockers: Vec<Blocker>,
    pub comments: Vec<Comment>,
    pub editors: Editors,
    /// The login supervisor posts as; only its comments' markers count.
    pub viewer: Option<String>,
    /// The issue it is a sub-issue of (kept only for an issue a codeowner did not open whose body
    /// carries an epic's seal).
    pub epic: Option<EpicParent>,
}

/// The issue a sealed issue is a sub-issue of, as GitHub has it: with the seal, what decides
/// whether the issue is one of an epic's tasks, written by supervisor.
pub type EpicParent = crate::github::ParentIssue;

/// What to do at the end of a run with the worktree and the checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cleanup {
    /// Keep the worktree (work not on the remote, or `--debug` after a failure).
    pub keep_worktree: bool,
    /// Keep the checkpoint, so running again resumes this run.
    pub keep_checkpoint: bool,
}

/// A request to the world. Each is answered by one [`Input`].
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    FetchIssue,
    /// Read the issue's card, blockers, comments and edits.
    FetchContext(Box<Issue>),
    AddToBoard(Box<Issue>),
    PrepareWorktree,
    Dispatch(Box<Dispatch>),
    Commit {
        message: String,
        /// The stage's `writes` globs: changes elsewhere are undone, not committed.
        scope: Option<Vec<String>>,
    },
    Push,
    Post {
        marker: Marker,
        text: Text,
    },
    /// Move the card to the board option that holds this stage.
    MoveCard {
        card: Box<BoardItem>,
        to: StageId,
    },
    RunGates {
        stage: String,
        attempt: u32,
        hooks: Vec<Hook>,
        /// The issue's text, which gates read (trusted: a codeowner's issue).
        issue: Box<IssueText>,
    },
    UndoCommit,
    CloseIssue {
        issue: u64,
        marker: Marker,
        text: Text,
    },
    OpenPullRequest(Box<PrRequest>),
    CheckMergeable {
        number: u64,
    },
    MergeBase,
    Cleanup(Cleanup),
    /// Read a pull request and the feedback on it (and who supervisor is).
    FetchFeedback {
        pr: PrNumber,
    },
    /// The worktree on the pull request's branch at `head`, checked to hold `ours` (the head
    /// supervisor last pushed, when known).
    PrepareRevision {
        head: String,
        ours: Option<String>,
    },
    /// Reply in a review thread (unless `replied`), and resolve it when `resolve`.
    AnswerThread(Box<ThreadAnswer>),
    /// Rewrite the pull request's body for the revision.
    UpdatePullBody {
        number: u64,
        request: Box<PrRequest>,
    },
}

impl Effect {
    /// What the effect does, in a word or two, for the logs.
    pub fn name(&self) -> &'static str {
        match self {
            Effect::FetchIssue => "fetch issue",
            Effect::FetchContext(_) => "fetch context",
            Effect::AddToBoard(_) => "add to board",
            Effect::PrepareWorktree => "prepare worktree",
            Effect::Dispatch(_) => "dispatch agent",
            Effect::Commit { .. } => "commit",
            Effect::Push => "push",
            Effect::Post { .. } => "post comment",
            Effect::MoveCard { .. } => "move card",
            Effect::RunGates { .. } => "run gates",
            Effect::UndoCommit => "undo commit",
            Effect::CloseIssue { .. } => "close issue",
            Effect::OpenPullRequest(_) => "open pull request",
            Effect::CheckMergeable { .. } => "check mergeable",
            Effect::MergeBase => "merge base",
            Effect::Cleanup(_) => "clean up",
            Effect::FetchFeedback { .. } => "fetch feedback",
            Effect::PrepareRevision { .. } => "prepare revision",
            Effect::AnswerThread(_) => "answer thread",
            Effect::UpdatePullBody { .. } => "update pull request body",
        }
    }

    /// Effects that start new work: not begun once the run is cancelled.
    pub(crate) fn starts_work(&self) -> bool {
        matches!(
            self,
            Effect::PrepareWorktree
                | Effect::PrepareRevision { .. }
                | Effect::Dispatch(_)
                | Effect::RunGates { .. }
                | Effect::OpenPullRequest(_)
                | Effect::MergeBase
        )
    }
}

/// The answer to an [`Effect`].
#[derive(Debug, Clone)]
pub enum Input {
    Start,
    Issue(Box<Issue>),
    Context(Box<Context>),
    OnBoard(Box<BoardItem>),
    Worktree {
        info: WorktreeInfo,
        warnings: Vec<String>,
    },
    Agent(Box<AgentRun>),
    Committed(Result<CommitResult, EffectError>),
    Pushed(Result<CommitSha, EffectError>),
    /// The comment, and whether it was created now (`false`: found from an earlier attempt).
    Posted {
        marker: Marker,
        text: Text,
        result: Result<(Comment, bool), EffectError>,
    },
    Moved,
    Gates {
        stage: String,
        attempt: u32,
        reports: Vec<GateReport>,
    },
    Undone(Result<(), EffectError>),
    Closed,
    PullRequest(Result<(PullRequest, bool), EffectError>),
    Mergeable(Result<Option<bool>, EffectError>),
    Merged(Result<MergeOutcome, EffectError>),
    CleanedUp {
        warnings: Vec<String>,
    },
    /// The run was asked to stop (a signal, or the scheduler).
    Cancelled,
    Feedback {
        feedback: Box<Feedback>,
        viewer: Option<String>,
    },
    /// The revision's worktree, or why the branch cannot be revised.
    Revision(Result<(WorktreeInfo, Vec<String>), UserText>),
    /// Whether the thread is resolved now.
    Answered {
        thread: String,
        result: Result<bool, EffectError>,
    },
    BodyUpdated(Result<(), EffectError>),
}

/// Where [`Effects::run_gates`] sends each gate's report as it finishes, with the gate's index in
/// the round's hooks: the engine journals it at once (`gate-finished`).
pub type GateFeed = tokio::sync::mpsc::UnboundedSender<(usize, GateReport)>;

/// The world the engine acts on. Fatal failures (the run cannot go on, running again resumes it)
/// are `Err(RunError)`; failures the engine decides about come back inside the `Ok` value.
pub trait Effects: Send {
    fn fetch_issue(
        &mut self,
        issue: IssueNumber,
    ) -> impl Future<Output = Result<Issue, RunError>> + Send;
    fn fetch_context(
        &mut self,
        issue: &Issue,
    ) -> impl Future<Output = Result<Context, RunError>> + Send;
    fn add_to_board(
        &mut self,
        issue: &Issue,
    ) -> impl Future<Output = Result<BoardItem, RunError>> + Send;
    /// Post a comment unless one with the marker, written by supervisor, is already there.
    fn post(
        &mut self,
        issue: u64,
        marker: &Marker,
        text: &Text,
    ) -> impl Future<Output = Result<(Comment, bool), EffectError>> + Send;
    fn move_card(
        &mut self,
        board: &BoardItem,
        to: &StageId,
    ) -> impl Future<Output = Result<(), RunError>> + Send;
    /// Post the closing comment once and close the issue.
    fn close_issue(
        &mut self,
        issue: u64,
        marker: &Marker,
        text: &Text,
    ) -> impl Future<Output = Result<(), RunError>> + Send;
    fn open_pull_request(
        &mut self,
        pr: &PrRequest,
    ) -> impl Future<Output = Result<(PullRequest, bool), EffectError>> + Send;
    /// Whether the PR merges cleanly, once GitHub knows; `None` when it could not tell in time.
    fn mergeable(
        &mut self,
        number: u64,
    ) -> impl Future<Output = Result<Option<bool>, EffectError>> + Send;

    fn prepare_worktree(
        &mut self,
        cancel: &CancellationToken,
    ) -> impl Future<Output = Result<(WorktreeInfo, Vec<String>), RunError>> + Send;
    fn commit(
        &mut self,
        message: &str,
        scope: Option<&[String]>,
    ) -> impl Future<Output = Result<CommitResult, EffectError>> + Send;
    fn push(&mut self) -> impl Future<Output = Result<CommitSha, EffectError>> + Send;
    fn undo_commit(&mut self) -> impl Future<Output = Result<(), EffectError>> + Send;
    /// Merge the base branch into the branch and push it, or list the conflicting files.
    fn merge_base(&mut self) -> impl Future<Output = Result<MergeOutcome, EffectError>> + Send;
    fn cleanup(&mut self, how: Cleanup) -> impl Future<Output = Vec<String>> + Send;

    fn dispatch(
        &mut self,
        dispatch: &Dispatch,
        cancel: &CancellationToken,
    ) -> impl Future<Output = AgentRun> + Send;
    /// Run the gates of `hooks`, sending each gate's report through `finished` as it finishes
    /// (its index in `hooks` with it); the reports, in hook order, at the end.
    fn run_gates(
        &mut self,
        hooks: &[Hook],
        issue: &IssueText,
        proof: Option<crate::verify::ProofInput>,
        finished: GateFeed,
        cancel: &CancellationToken,
    ) -> impl Future<Output = Vec<GateReport>> + Send;

    /// A pull request with its reviews, threads and conversation, and the login supervisor posts as.
    fn fetch_feedback(
        &mut self,
        pr: PrNumber,
    ) -> impl Future<Output = Result<(Feedback, Option<String>), RunError>> + Send;
    /// The worktree on the pull request's branch, continuing its history at `head` (merged with
    /// local work not yet pushed); `Ok(Err(reason))` (said publicly) when the branch cannot be revised (it no
    /// longer holds `ours`, or it moved in a way that conflicts).
    fn prepare_revision(
        &mut self,
        head: &str,
        ours: Option<&str>,
        cancel: &CancellationToken,
    ) -> impl Future<Output = Result<Result<(WorktreeInfo, Vec<String>), UserText>, RunError>> + Send;
    /// Reply in the thread of `answer` on pull request `pr` (unless it already replied), then
    /// resolve the thread when asked. `Ok(resolved)`.
    fn answer_thread(
        &mut self,
        pr: u64,
        answer: &ThreadAnswer,
    ) -> impl Future<Output = Result<bool, EffectError>> + Send;
    fn update_pull_body(
        &mut self,
        number: u64,
        request: &PrRequest,
    ) -> impl Future<Output = Result<(), EffectError>> + Send;
    /// Show the run's progress (the tracking comment, when configured): after every step once the
    /// run is admitted, and once more when it ends. Showing it never stops the run.
    fn track(&mut self, progress: &Progress) -> impl Future<Output = ()> + Send;
}
