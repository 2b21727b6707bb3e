//! The epic's work after planning: its tasks run through the pipeline (at most
//! `epic.maxConcurrency` at once, each when the tasks it depends on are accepted and merged), the
//! reviewer judges each task's pull request, a task sent back is revised with the reviewer's
//! feedback, an accepted one is merged into the epic branch (`branch` integration), a task that
//! cannot go on is handed to a person; at the end the epic's pull request and its summary.
//!
//! What to do is [`Epic::next`]'s, from the journal; every step is journaled once GitHub (or the
//! task's run) confirmed it, so a stop anywhere goes on where it stopped: a task's run the journal
//! says is going on is started again, and its own journal resumes it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use tokio::task::JoinSet;
use tracing::Instrument;

use super::{Dispatch, EpicJournal, Planned, Planner, journal_error, open_epic};
use crate::agent::ExitReason;
use crate::epic::{Epic, Happened, Integration, Seal, Step, TaskState, Verdict, read_verdict};
use crate::github::{CloseReason, IssueState, Marker, MarkerKind};
use crate::github::{MergeError, MergeMethod, NewPullRequest};
use crate::ids::{IssueNumber, PrNumber};
use crate::pipeline::{Project, RunEnd, RunError, RunOptions, RunSummary};
use crate::runtime::{Services, run_task};
use crate::workspace::{self, WorkspaceConfig};

/// How an epic's work ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EpicEnd {
    /// Every task is accepted, escalated or closed: the summary is on the epic, and — with
    /// `branch` integration and something accepted — the epic's pull request is open.
    Finished {
        tasks: Vec<TaskOutcome>,
        pull_request: Option<u64>,
    },
    /// Nothing goes on until a person merges these pull requests (`independent` integration):
    /// running again then goes on.
    Waiting { pulls: Vec<u64> },
    /// A task's run or the reviewer stopped short of an end (GitHub failing, an agent CLI
    /// failing): running again goes on.
    Paused { reason: String },
    /// The epic may not be planned: nothing was written.
    Refused { reason: String },
    /// The planner's plan was refused (said on the epic).
    PlanRefused { errors: Vec<String> },
    /// Stopped by a signal; running again goes on.
    Interrupted,
}

/// What came of one task.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TaskOutcome {
    pub task: String,
    pub issue: u64,
    #[serde(rename = "pullRequest")]
    pub pull_request: Option<u64>,
    /// `accepted`, `escalated`, `closed` or `dropped`.
    pub outcome: &'static str,
    /// Reviews of its pull request.
    pub reviews: u32,
    /// The latest audit score of its runs (`passing/total`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<String>,
    /// Why it was escalated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The epic branch of epic `number`: the tasks' pull requests target it (`branch` integration).
pub fn epic_branch(number: u64) -> String {
    format!("epic-{number}")
}

/// Plan epic `number` (where it is not planned yet) and work it to its end.
pub async fn run_epic(
    project: Arc<Project>,
    svc: &Services,
    number: u64,
) -> Result<EpicEnd, RunError> {
    let (mut planner, mut journal) = match open_epic(project.clone(), svc, number).await? {
        Ok(opened) => opened,
        Err(reason) => return Ok(EpicEnd::Refused { reason }),
    };
    if !Epic::fold(&journal.happened).finished {
        planner.place_epic(false).await?;
    }
    match planner.plan_all(&mut journal).await? {
        Planned::Ready { .. } => {}
        Planned::Refused { reason } => return Ok(EpicEnd::Refused { reason }),
        Planned::PlanRefused { errors } => return Ok(EpicEnd::PlanRefused { errors }),
        Planned::Interrupted => return Ok(EpicEnd::Interrupted),
    }
    let task_project = match planner.limits.integration {
        // The tasks' worktrees start from the epic branch and their pull requests target it.
        Integration::Branch => {
            let mut p = (*project).clone();
            p.settings.default_branch = epic_branch(number);
            Arc::new(p)
        }
        Integration::Independent => project,
    };
    let mut worker = Worker {
        planner,
        journal,
        task_project,
        runs: JoinSet::new(),
        running: BTreeSet::new(),
        reviews: JoinSet::new(),
        reviewing: BTreeSet::new(),
        read: BTreeMap::new(),
        ran: BTreeMap::new(),
    };
    let end = worker.work().await;
    // However it ended, the runs started here end first (a signal reaches them through the
    // same cancellation; an error leaves them to finish their step).
    while let Some(joined) = worker.runs.join_next().await {
        if let Err(e) = worker.ended(joined).await {
            tracing::warn!("epic #{number}: {e}");
        }
    }
    while let Some(joined) = worker.reviews.join_next().await {
        if let Err(e) = worker.reviewed(joined) {
            tracing::warn!("epic #{number}: {e}");
        }
    }
    end
}

/// One task's run, as it ended.
type Joined = Result<(String, Result<RunSummary, RunError>), tokio::task::JoinError>;

struct Worker<'s> {
    planner: Planner<'s>,
    journal: EpicJournal,
    /// The project the tasks run in: its default branch is the epic branch with `branch`
    /// integration.
    task_project: Arc<Project>,
    runs: JoinSet<(String, Result<RunSummary, RunError>)>,
    /// Tasks whose run this process started and which have not ended.
    running: BTreeSet<String>,
    reviews: JoinSet<(String, Reviewed)>,
    /// Tasks whose review this process started and which has not ended.
    reviewing: BTreeSet<String>,
    /// The sub-issues of tasks about to start, read just before: their runs' first reads.
    read: BTreeMap<String, crate::github::Issue>,
    /// The pull request each task's run in this process opened or revised.
    ran: BTreeMap<String, u64>,
}

/// A review's end: the verdict to journal with the commit the reviewer saw (when it saw one), or
/// why the work pauses.
type Reviewed = Result<Result<(Happened, Option<String>), String>, RunError>;

/// Why the work waits.
enum Wait {
    /// On a person merging this pull request.
    Merge(u64),
}

impl Worker<'_> {
    fn svc(&self) -> &Services {
        self.planner.svc
    }

    fn number(&self) -> u64 {
        self.planner.epic.number
    }

    async fn work(&mut self) -> Result<EpicEnd, RunError> {
        let cancel = self.svc().cancel.clone();
        let mut paused: Option<String> = None;
        loop {
            while let Some(joined) = self.runs.try_join_next() {
                if let Some(reason) = self.ended(joined).await? {
                    paused.get_or_insert(reason);
                }
            }
            while let Some(joined) = self.reviews.try_join_next() {
                if let Some(reason) = self.reviewed(joined)? {
                    paused.get_or_insert(reason);
                }
            }
            let state = Epic::fold(&self.journal.happened);
            if state.finished {
                return Ok(self.finished(&state));
            }
            if cancel.is_cancelled() {
                return Ok(EpicEnd::Interrupted);
            }
            if let Some(reason) = paused {
                return Ok(EpicEnd::Paused { reason });
            }
            // The runs the journal says are going on: started just now, or cut short by a stop
            // (their own journals resume them).
            let to_start: Vec<(&String, &TaskState)> = (state.tasks.iter())
                .filter(|(id, task)| task.running && !self.running.contains(*id))
                .collect();
            if !to_start.is_empty() {
                // They start from the epic branch as it is now: with the tasks merged so far.
                if let Err(reason) = self.fetch_base().await {
                    paused = Some(reason);
                    continue;
                }
                for (id, task) in to_start {
                    self.start(id, task);
                }
            }
            let before = self.journal.happened.len();
            let mut waits = Vec::new();
            for step in state.next(self.planner.limits) {
                if cancel.is_cancelled() {
                    break;
                }
                match self.step(&state, step).await? {
                    Ok(Some(happened)) => self.journal.record(happened).map_err(journal_error)?,
                    Ok(None) => {}
                    Err(Ok(wait)) => waits.push(wait),
                    Err(Err(reason)) => {
                        paused = Some(reason);
                        break;
                    }
                }
            }
            if self.journal.happened.len() > before || paused.is_some() {
                continue;
            }
            if self.runs.is_empty() && self.reviews.is_empty() {
                let pulls: Vec<u64> = waits.into_iter().map(|Wait::Merge(pr)| pr).collect();
                if pulls.is_empty() {
                    return Err(RunError::Unfinished(format!(
                        "epic #{}: nothing is left to do, yet the epic is not finished; its \
                         journal is {}",
                        self.number(),
                        self.journal.path.display()
                    )));
                }
                return Ok(EpicEnd::Waiting { pulls });
            }
            // Nothing to do until a run or a review ends (or a signal).
            tokio::select! {
                Some(joined) = self.runs.join_next(), if !self.runs.is_empty() => {
                    if let Some(reason) = self.ended(joined).await? {
                        paused = Some(reason);
                    }
                }
                Some(joined) = self.reviews.join_next(), if !self.reviews.is_empty() => {
                    if let Some(reason) = self.reviewed(joined)? {
                        paused = Some(reason);
                    }
                }
                () = cancel.cancelled() => {}
            }
        }
    }

    /// Fetch the tasks' base branch, where their worktrees start from; `Err` with the reason.
    async fn fetch_base(&self) -> Result<(), String> {
        let tp = &self.task_project;
        let ws = WorkspaceConfig::from_settings(&tp.root, &tp.settings);
        let auth = self.svc().push_auth.clone();
        let cancel = Some(self.svc().cancel.clone());
        match crate::process::spawn_blocking(cancel, move || workspace::fetch_base(&ws, &auth))
            .await
        {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(format!("fetching the tasks' base branch: {e}")),
            Err(e) => Err(format!("fetching the tasks' base branch: {e}")),
        }
    }

    /// Start `id`'s run (its first, or the revision of its pull request), recorded before.
    fn start(&mut self, id: &str, task: &TaskState) {
        let Some((number, _)) = task.issue else {
            return;
        };
        let revise = task.revising.as_ref().and(task.pr).map(PrNumber::new);
        let opts = RunOptions {
            issue: IssueNumber::new(number),
            revise,
            add_to_board: true,
            epic_task: true,
            ..RunOptions::default()
        };
        let project = self.task_project.clone();
        let read = self.read.remove(id);
        let mut svc = self.svc().for_task();
        // The watcher's picture shows it as a run of its own.
        let feed = (self.svc().feed.as_ref()).map(|f| f.inner_run(number));
        svc.feed = feed.clone();
        let id = id.to_string();
        self.running.insert(id.clone());
        let span = tracing::info_span!("task", epic = self.number(), task = %id);
        // Its card counts in the watcher's column limits while it runs.
        let hooks = svc.hooks.clone();
        if let Some(h) = &hooks {
            h.started(number);
        }
        self.runs.spawn(
            async move {
                let result = run_task(project, svc, opts, read).await;
                if let Some(h) = &hooks {
                    h.ended(number);
                }
                if let Some(f) = &feed {
                    f.ended(&result);
                }
                (id, result)
            }
            .instrument(span),
        );
    }

    /// What a task's run came to, journaled; `Some(reason)` when it paused (running again
    /// resumes it).
    async fn ended(&mut self, joined: Joined) -> Result<Option<String>, RunError> {
        let (id, result) = joined
            .map_err(|e| RunError::Unfinished(format!("a task's run ended abnormally: {e}")))?;
        self.running.remove(&id);
        let state = Epic::fold(&self.journal.happened);
        let task = state.tasks.get(&id).cloned().unwrap_or_default();
        let summary = match result {
            Ok(summary) => summary,
            Err(e) => return Ok(Some(format!("task `{id}`: {e}"))),
        };
        let tokens = summary.agents.iter().map(|a| a.tokens).sum();
        let score = (summary.score.as_ref()).map(|s| format!("{}/{}", s.passing, s.total));
        let ran = |pr: Option<u64>, reason: Option<String>| Happened::RunEnded {
            task: id.clone(),
            pr,
            reason,
            tokens,
            score: score.clone(),
        };
        let happened = match summary.end {
            RunEnd::PullRequest { number, .. } | RunEnd::Revised { number, .. } => {
                self.ran.insert(id.clone(), number);
                ran(Some(number), None)
            }
            // A run that ended before a stop, whose end the journal missed, is found done when
            // started again: its pull request is open on its branch.
            RunEnd::AlreadyDone | RunEnd::ClosedAsResolved => match self.open_pull(&task).await? {
                Some(pr) => ran(Some(pr), None),
                // Nothing to change: a person closed the task's issue or put its card in Done
                // (done, as far as its dependants go). Still open, it would hold their runs back
                // as blocked.
                None => {
                    if let Some((number, _)) = task.issue {
                        let issue = self.planner.own_sub_issue(number, &id).await?;
                        if issue.state != IssueState::Closed {
                            self.planner.gh().close_issue(number, None).await?;
                        }
                    }
                    Happened::ClosedByHand { task: id }
                }
            },
            // The revision (its feedback posted just before it started) was made before a stop.
            RunEnd::NothingToRevise { .. } if task.revising.is_some() && task.pr.is_some() => {
                ran(task.pr, None)
            }
            RunEnd::Stopped { stage, reason } => ran(
                None,
                Some(format!("its run stopped in {stage}: {}", reason.as_str())),
            ),
            RunEnd::Refused { reason } | RunEnd::NothingToRevise { reason } => {
                ran(None, Some(format!("its run was refused: {reason}")))
            }
            RunEnd::Paused { reason } => return Ok(Some(format!("task `{id}` paused: {reason}"))),
            RunEnd::Interrupted => return Ok(None),
            RunEnd::DryRun { .. } | RunEnd::Planned { .. } | RunEnd::EpicFinished { .. } => {
                ran(None, Some("its run ended in an unexpected way".into()))
            }
        };
        self.journal.record(happened).map_err(journal_error)?;
        Ok(None)
    }

    /// What a review came to, journaled; `Some(reason)` when the work pauses (the reviewer failed:
    /// running again asks it again).
    fn reviewed(
        &mut self,
        joined: Result<(String, Reviewed), tokio::task::JoinError>,
    ) -> Result<Option<String>, RunError> {
        let (task, reviewed) =
            joined.map_err(|e| RunError::Unfinished(format!("a review ended abnormally: {e}")))?;
        self.reviewing.remove(&task);
        match reviewed? {
            Ok((happened, seen)) => {
                if let Some(sha) = seen {
                    let at = Happened::ReviewedAt { task, sha };
                    self.journal.record(at).map_err(journal_error)?;
                }
                self.journal.record(happened).map_err(journal_error)?;
                Ok(None)
            }
            Err(reason) => Ok(Some(reason)),
        }
    }

    /// Pull request `pr`, when it is `task`'s: from its sub-issue's branch into the tasks' base.
    /// The journal lies in the checkout, where an agent could write: a pull request it names is
    /// merged (or waited for) only when it is the one supervisor's run of the task opened.
    async fn task_pull(
        &self,
        state: &Epic,
        task: &str,
        pr: u64,
    ) -> Result<crate::github::PullRequest, RunError> {
        let pull = self.planner.gh().get_pr(pr).await?;
        let settings = &self.task_project.settings;
        let issue = state.tasks.get(task).and_then(|t| t.issue).map(|i| i.0);
        let head = issue.map(|n| format!("{}{n}", settings.branch_prefix));
        if head.as_deref() != Some(pull.head.as_str()) || pull.base != settings.default_branch {
            return Err(RunError::Unfinished(format!(
                "the epic's journal names pull request #{pr} (`{}` into `{}`) as task `{task}`'s, \
                 which is not the pull request of its branch into `{}`; move {} away to work \
                 the epic afresh",
                pull.head,
                pull.base,
                settings.default_branch,
                self.journal.path.display()
            )));
        }
        Ok(pull)
    }

    /// The open pull request of `task`'s branch, when it has one.
    async fn open_pull(&self, task: &TaskState) -> Result<Option<u64>, RunError> {
        let Some((number, _)) = task.issue else {
            return Ok(None);
        };
        let tp = &self.task_project;
        let branch = format!("{}{number}", tp.settings.branch_prefix);
        Ok((self.planner.gh().find_open_pr(&branch).await?).map(|p| p.number))
    }

    /// Take one step: what happened (`None`: nothing to record), or why the work waits or pauses.
    async fn step(
        &mut self,
        state: &Epic,
        step: Step,
    ) -> Result<Result<Option<Happened>, Result<Wait, String>>, RunError> {
        let p = &mut self.planner;
        let happened = match step {
            // The planning's steps (a new plan's): as planning takes them.
            Step::Plan => match p.plan().await? {
                Ok(happened) => happened,
                Err(Planned::Interrupted) => return Ok(Ok(None)),
                Err(_) => return Ok(Err(Err("the planner's new plan was refused".into()))),
            },
            Step::CreateSubIssue { task } => p.sub_issue(state, &task).await?,
            Step::Link { task, number } => p.link(state, &task, number).await?,
            Step::Block { task, on } => p.block(state, &task, &on, true).await?,
            Step::Unblock { task, on } => p.block(state, &task, &on, false).await?,
            Step::Reseal { task, number } => p.reseal(state, &task, number).await?,
            Step::Drop { task } => self.drop_task(state, &task).await?,
            Step::Replan { task, reason } => match p.replan(state, &task, &reason).await? {
                Ok(Some(happened)) => happened,
                Ok(None) => return Ok(Ok(None)),
                Err(reason) => return Ok(Err(Err(reason))),
            },
            Step::PostPlan => p.post_plan(state).await?,
            Step::CreateBranch => self.create_branch().await?,
            Step::Start { task, number } => {
                // A sub-issue a person closed is done as far as the epic goes.
                let issue = self.planner.gh().get_issue(number).await?;
                if issue.state == IssueState::Closed {
                    Happened::ClosedByHand { task }
                } else {
                    // Read just now: the run's first read of it.
                    self.read.insert(task.clone(), issue);
                    Happened::Started { task }
                }
            }
            Step::Revise { task, pr, feedback } => {
                let reviews = state.tasks.get(&task).map_or(0, |t| t.reviews);
                self.post_feedback(&task, pr, reviews, &feedback).await?;
                Happened::Started { task }
            }
            // Reviews run beside the rest: a reviewer taking its time holds up no other task.
            Step::Review { task, pr } => {
                if self.reviewing.insert(task.clone()) {
                    let job = self.review_job(state, &task, pr);
                    let span = tracing::info_span!("review", epic = self.number(), task = %task);
                    self.reviews
                        .spawn(async move { (task, job.run().await) }.instrument(span));
                }
                return Ok(Ok(None));
            }
            Step::Escalate { task, reason } => self.escalate(state, &task, &reason).await?,
            Step::Merge { task, pr } => self.merge(state, &task, pr).await?,
            Step::AwaitMerge { task, pr } => {
                let pull = self.task_pull(state, &task, pr).await?;
                if !pull.merged {
                    return Ok(Err(Ok(Wait::Merge(pr))));
                }
                // Its sub-issue, still open, would hold its dependants' runs back.
                self.close_accepted(state, &task, pr, &pull.base, false)
                    .await?;
                Happened::Merged { task }
            }
            Step::OpenEpicPullRequest => self.open_epic_pull(state).await?,
            Step::Summarise => self.summarise(state).await?,
        };
        Ok(Ok(Some(happened)))
    }

    /// The epic branch, made from the default branch's head (found when it exists).
    async fn create_branch(&self) -> Result<Happened, RunError> {
        let gh = self.planner.gh();
        let branch = epic_branch(self.number());
        if gh.branch_head(&branch).await?.is_none() {
            let base = &self.planner.project.settings.default_branch;
            let Some(sha) = gh.branch_head(base).await? else {
                return Err(RunError::Unfinished(format!(
                    "the default branch `{base}` is not on GitHub: set `defaultBranch` to the \
                     repository's default branch"
                )));
            };
            gh.create_branch(&branch, &sha).await?;
        }
        Ok(Happened::BranchCreated)
    }

    fn marker(&self, stage: String, attempt: u32, kind: MarkerKind) -> Marker {
        Marker::new(format!("epic-{}", self.number()), stage, attempt, kind)
    }

    /// The reviewer's feedback on the task's pull request, where the revision reads it.
    async fn post_feedback(
        &self,
        task: &str,
        pr: u64,
        reviews: u32,
        feedback: &str,
    ) -> Result<(), RunError> {
        let marker = self.marker(format!("review-{task}"), reviews, MarkerKind::EpicReview);
        let body = format!(
            "## Epic review: changes needed\n\nThe reviewer of epic #{} sends task `{task}` \
             back (review {reviews} of at most {}):\n\n{}\n\nsupervisor revises this pull \
             request with it.",
            self.number(),
            self.planner.limits.max_iterations,
            feedback.trim()
        );
        (self.planner.gh())
            .post_once(pr, &marker, &body, None)
            .await?;
        Ok(())
    }

    /// A job that reviews `task`'s pull request `pr` beside the epic's other work.
    fn review_job(&self, state: &Epic, task: &str, pr: u64) -> ReviewJob {
        ReviewJob {
            project: self.planner.project.clone(),
            task_project: self.task_project.clone(),
            svc: self.svc().for_task(),
            epic: self.planner.epic.clone(),
            viewer: self.planner.viewer.clone(),
            task: task.to_string(),
            state: state.tasks.get(task).cloned().unwrap_or_default(),
            pr,
        }
    }

    /// Hand `task` to a person: the escalation label on its sub-issue and a comment naming the
    /// codeowners and the reason; it is left out of the integration.
    async fn escalate(&self, state: &Epic, task: &str, reason: &str) -> Result<Happened, RunError> {
        let gh = self.planner.gh();
        let settings = &self.planner.project.settings;
        if let Some((number, _)) = state.tasks.get(task).and_then(|t| t.issue) {
            gh.add_label(number, &settings.epic.escalation_label)
                .await?;
            let pr = (state.tasks.get(task).and_then(|t| t.pr))
                .map(|pr| format!(" Its pull request #{pr} is left out of the epic's work."))
                .unwrap_or_default();
            let owners: Vec<String> = settings
                .codeowners
                .iter()
                .map(|o| format!("@{o}"))
                .collect();
            let body = format!(
                "## Escalated\n\n{}: task `{task}` of epic #{} needs a person: {reason}.{pr}\n\n\
                 Close this issue when it is settled; the tasks that depend on it wait for that.",
                owners.join(" "),
                self.number()
            );
            let marker = self.marker(format!("escalated-{task}"), 0, MarkerKind::EpicEscalated);
            gh.post_once(number, &marker, &body, None).await?;
        }
        Ok(Happened::Escalated {
            task: task.to_string(),
            reason: reason.to_string(),
        })
    }

    /// Close the sub-issue of a task a new plan dropped, as not planned, and its open pull
    /// request, each with the reason.
    async fn drop_task(&self, state: &Epic, task: &str) -> Result<Happened, RunError> {
        let gh = self.planner.gh();
        let t = state.tasks.get(task).cloned().unwrap_or_default();
        if let Some((number, _)) = t.issue {
            self.planner.own_sub_issue(number, task).await?;
            let why = (state.revisions.iter().rev())
                .find(|r| r.dropped.iter().any(|d| d == task))
                .map(|r| format!(", asked by the review of `{}`", r.task))
                .unwrap_or_default();
            let body = format!(
                "## Dropped\n\nThe new plan of epic #{}{why} leaves task `{task}` out: nothing \
                 more is done for it.",
                self.number()
            );
            let marker = self.marker(format!("dropped-{task}"), 0, MarkerKind::EpicDropped);
            if let Some(pr) = self.open_pull(&t).await? {
                gh.post_once(pr, &marker, &body, None).await?;
                gh.close_pull(pr).await?;
            }
            gh.close_issue_as(number, CloseReason::NotPlanned, Some((&marker, &body)))
                .await?;
        }
        Ok(Happened::Dropped {
            task: task.to_string(),
        })
    }

    /// Merge `task`'s accepted pull request into the epic branch and close its sub-issue; a pull
    /// request that cannot be merged (a conflict, a branch moved since its review) escalates the
    /// task.
    async fn merge(&self, state: &Epic, task: &str, pr: u64) -> Result<Happened, RunError> {
        let gh = self.planner.gh();
        let merged = Happened::Merged {
            task: task.to_string(),
        };
        // Merged at the commit its review judged. A pull request this process's run opened is
        // merged so without reading it first.
        let reviewed = state.tasks.get(task).and_then(|t| t.reviewed_at.as_ref());
        let known = reviewed.filter(|_| self.ran.get(task) == Some(&pr));
        if let Some(sha) = known {
            match gh.merge_pull(pr, MergeMethod::Merge, Some(sha)).await {
                Ok(_) => {
                    let base = &self.task_project.settings.default_branch;
                    self.close_accepted(state, task, pr, base, true).await?;
                    return Ok(merged);
                }
                Err(MergeError::GitHub(e)) => return Err(e.into()),
                // Merged meanwhile (by a person, or before an answer that was lost), or not
                // mergeable as reviewed: as GitHub has it now.
                Err(e @ (MergeError::NotMergeable { .. } | MergeError::HeadMoved { .. })) => {
                    tracing::info!("epic #{}: task `{task}`: {e}", self.number());
                }
            }
        }
        let pull = self.task_pull(state, task, pr).await?;
        if !pull.merged {
            // At the commit its review judged (its head, for a journal that names none). Not
            // what its review saw, or not mergeable: a person looks at it.
            let at = reviewed.unwrap_or(&pull.head_sha);
            let unmerged = if *at != pull.head_sha {
                Some("its branch moved since its review")
            } else if known.is_some() {
                // Asked at this very commit just now.
                Some("a conflict")
            } else {
                match (gh.merge_pull(pr, MergeMethod::Merge, Some(at))).await {
                    Ok(_) => None,
                    Err(MergeError::GitHub(e)) => return Err(e.into()),
                    Err(e @ (MergeError::NotMergeable { .. } | MergeError::HeadMoved { .. })) => {
                        tracing::info!("epic #{}: task `{task}`: {e}", self.number());
                        Some("a conflict, or its branch moved")
                    }
                }
            };
            if let Some(why) = unmerged {
                let reason = format!(
                    "its pull request #{pr} could not be merged into `{}` ({why})",
                    pull.base
                );
                return self.escalate(state, task, &reason).await;
            }
        }
        self.close_accepted(state, task, pr, &pull.base, false)
            .await?;
        Ok(merged)
    }

    /// Close the sub-issue of `task`, accepted and merged into `base` with `pr`, saying so. `fresh`:
    /// merged just now by this process, so nothing said it before.
    async fn close_accepted(
        &self,
        state: &Epic,
        task: &str,
        pr: u64,
        base: &str,
        fresh: bool,
    ) -> Result<(), RunError> {
        if let Some((number, _)) = state.tasks.get(task).and_then(|t| t.issue) {
            let marker = self.marker(format!("accepted-{task}"), 0, MarkerKind::EpicAccepted);
            let body = format!(
                "Accepted by the reviewer of epic #{} and merged into `{base}` with #{pr}.",
                self.number(),
            );
            let gh = self.planner.gh();
            let known: &[crate::github::Comment] = &[];
            gh.post_once(number, &marker, &body, fresh.then_some(known))
                .await?;
            gh.close_issue(number, None).await?;
        }
        Ok(())
    }

    /// The pull request from the epic branch to the default branch, with the combined report.
    async fn open_epic_pull(&self, state: &Epic) -> Result<Happened, RunError> {
        let p = &self.planner.project;
        let epic = &self.planner.epic;
        let body = format!(
            "Closes #{}\n\n## Epic\n\nThe work of epic #{}, task by task: each task's pull \
             request was reviewed and merged into `{}`.\n\n{}",
            epic.number,
            epic.number,
            epic_branch(epic.number),
            outcome_table(&outcomes(state))
        );
        let new = NewPullRequest {
            head: epic_branch(epic.number),
            base: p.settings.default_branch.clone(),
            title: epic.title.clone(),
            body,
            draft: false,
        };
        let (pull, _) = self.planner.gh().find_or_create_pr(&new).await?;
        Ok(Happened::EpicPullRequest {
            number: pull.number,
        })
    }

    /// The epic's summary on the epic.
    async fn summarise(&self, state: &Epic) -> Result<Happened, RunError> {
        let started = self.journal.started();
        let took = started
            .map(|s| (chrono::Utc::now() - s).num_milliseconds().max(0) as u64)
            .map(|ms| format!(" in {}", crate::report::human_duration(ms)))
            .unwrap_or_default();
        let tokens: u64 = state.tasks.values().map(|t| t.tokens).sum();
        let pr = state
            .epic_pr
            .map(|n| format!("\n\nThe epic's pull request: #{n}."))
            .unwrap_or_default();
        let body = format!(
            "## Epic Summary\n\nThe epic's work is done{took}, {tokens} tokens.\n\n{}{pr}",
            outcome_table(&outcomes(state))
        );
        let marker = self.marker("summary".into(), 0, MarkerKind::EpicSummary);
        self.planner.place_epic(true).await?;
        // The plan's comment tracks the epic to its end.
        let table = outcome_table(&outcomes(state));
        self.planner.say_plan(state, Some(&table)).await?;
        (self.planner.gh())
            .post_once(self.number(), &marker, &body, None)
            .await?;
        Ok(Happened::Finished)
    }

    fn finished(&self, state: &Epic) -> EpicEnd {
        EpicEnd::Finished {
            tasks: outcomes(state),
            pull_request: state.epic_pr,
        }
    }
}

/// What a review needs, owned: it runs beside the epic's other work.
struct ReviewJob {
    project: Arc<Project>,
    /// The project the tasks run in (their base is the epic branch with `branch` integration).
    task_project: Arc<Project>,
    svc: Services,
    epic: crate::github::Issue,
    /// The login supervisor opens issues as.
    viewer: String,
    task: String,
    state: TaskState,
    pr: u64,
}

impl ReviewJob {
    /// The sub-issue supervisor opened for `task`, read from GitHub and held to its seal: its
    /// body is the task's text a reviewer may read. `Err` with the reason when it no longer is.
    async fn sealed_task(&self) -> Result<Result<crate::github::Issue, String>, RunError> {
        let task = &self.task;
        let Some((number, _)) = self.state.issue else {
            return Ok(Err(format!("task `{task}` has no sub-issue")));
        };
        let settings = &self.project.settings;
        let board = crate::github::BoardRef::from_settings(settings);
        let read = self.svc.github.issue_context(&board, number).await?;
        let (issue, editors) = (read.issue, read.editors);
        let viewer = &self.viewer;
        let edited_by_stranger = (editors.issue.as_deref())
            .is_some_and(|e| !e.eq_ignore_ascii_case(viewer) && !settings.is_codeowner(e));
        let sealed = Seal::verify(&issue.body, self.epic.number).is_ok_and(|s| &s.task == task);
        if !issue.author.eq_ignore_ascii_case(viewer) || !sealed || edited_by_stranger {
            return Ok(Err(format!(
                "its sub-issue #{number} is no longer the text supervisor wrote for it"
            )));
        }
        Ok(Ok(issue))
    }

    /// The reviewer's verdict on `task`'s pull request `pr`, run in a worktree of its branch;
    /// `Err(reason)` pauses the work (the reviewer failed: running again asks it again).
    async fn run(self) -> Reviewed {
        let (task, pr) = (self.task.as_str(), self.pr);
        let reviewed = |verdict, seen| {
            Ok(Ok((
                Happened::Reviewed {
                    task: task.to_string(),
                    verdict,
                },
                seen,
            )))
        };
        let sub = match self.sealed_task().await? {
            Ok(issue) => issue,
            Err(reason) => return reviewed(Verdict::Escalate { reason }, None),
        };
        let tp = &self.task_project;
        let ws = WorkspaceConfig::from_settings(&tp.root, &tp.settings);
        let auth = self.svc.push_auth.clone();
        let (ws2, n) = (ws.clone(), sub.number);
        let cancel = Some(self.svc.cancel.clone());
        // The branch as the reviewer sees it: its commit (what an acceptance merges) and what it
        // changes against the tasks' base, both read before the reviewer runs in it.
        let (wt, sha, changes) = crate::process::spawn_blocking(cancel.clone(), move || {
            let wt = workspace::ensure_worktree_with(&ws2, n, &auth)
                .map_err(|e| format!("the reviewer's worktree: {e}"))?;
            let sha = (wt.head_sha()).map_err(|e| format!("the reviewed commit: {e}"))?;
            // Not listed (the base not known here): the reviewer reads the branch itself.
            let changes = crate::gates::ChangeSet::compute(&wt.path, &ws2.default_branch)
                .inspect_err(|e| tracing::warn!("the reviewed branch's files are not listed: {e}"))
                .unwrap_or_default();
            Ok::<_, String>((wt, sha, changes))
        })
        .await
        .map_err(|e| RunError::Unfinished(format!("the reviewer's worktree: {e}")))?
        .map_err(RunError::Unfinished)?;
        let reviews = self.state.reviews;
        let dispatch = Dispatch {
            role: "reviewer",
            task: reviewer_task(
                &self.epic,
                &self.project.settings,
                &sub,
                pr,
                &ws.default_branch,
                &changes.files,
            ),
            cwd: wt.path.clone(),
            attempt: reviews + 1,
            subject: Some(sub.number.to_string()),
            transcript: format!("reviewer-{task}-{}.jsonl", reviews + 1),
        };
        let run = super::run_role(&self.project, &self.svc, self.epic.number, dispatch).await;
        // The worktree was the reviewer's alone: a revision makes its own.
        match crate::process::spawn_blocking(cancel, move || workspace::cleanup(&ws, &wt)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!("the reviewer's worktree was not removed: {e}"),
            Err(e) => tracing::warn!("the reviewer's worktree was not removed: {e}"),
        }
        let run = match run {
            Ok(run) => run,
            Err(e) => return Ok(Err(format!("the reviewer's definition: {e}"))),
        };
        match &run.exit {
            ExitReason::Interrupted => return Ok(Err("interrupted".into())),
            _ if !run.succeeded() => {
                return Ok(Err(format!(
                    "the reviewer of task `{task}` {}; `supervisor agent reviewer` runs it alone \
                     to see why",
                    match &run.exit {
                        ExitReason::SpawnFailed(_) => "could not be started".to_string(),
                        ExitReason::Failed(_) => "failed".to_string(),
                        other => other.describe(),
                    }
                )));
            }
            _ => {}
        }
        // An answer that cannot be read is never an acceptance.
        let verdict = read_verdict(&run.final_text).unwrap_or_else(|e| Verdict::Escalate {
            reason: format!("the reviewer's verdict could not be read ({e})"),
        });
        reviewed(verdict, Some(sha))
    }
}

/// What came of each task, in the plan's order, then the tasks new plans dropped.
fn outcomes(state: &Epic) -> Vec<TaskOutcome> {
    let order = state.plan.as_ref().map(|p| p.order()).unwrap_or_default();
    let planned = order.into_iter().map(|t| &t.id);
    let dropped = super::dropped_tasks(state).map(|(id, _)| id);
    planned
        .chain(dropped)
        .filter_map(|id| {
            let s = state.tasks.get(id)?;
            let (outcome, reason) = match (&s.escalated, s.accepted) {
                _ if s.dropped => ("dropped", None),
                (Some(reason), _) => ("escalated", Some(reason.clone())),
                (None, true) => ("accepted", None),
                (None, false) => ("closed", None),
            };
            Some(TaskOutcome {
                task: id.clone(),
                issue: s.issue?.0,
                pull_request: s.pr,
                outcome,
                reviews: s.reviews,
                score: s.score.clone(),
                reason,
            })
        })
        .collect()
}

/// The tasks as a Markdown table.
fn outcome_table(tasks: &[TaskOutcome]) -> String {
    let mut out = String::from(
        "| Task | Sub-issue | Pull request | Verdict | Reviews | Audit |\n|---|---|---|---|---|---|\n",
    );
    for t in tasks {
        let verdict = match &t.reason {
            Some(reason) => format!(
                "{}: {}",
                t.outcome,
                reason.replace('|', "\\|").replace('\n', " ")
            ),
            None => t.outcome.to_string(),
        };
        out.push_str(&format!(
            "| `{}` | #{} | {} | {verdict} | {} | {} |\n",
            t.task,
            t.issue,
            t.pull_request.map_or("—".to_string(), |n| format!("#{n}")),
            t.reviews,
            t.score.as_deref().unwrap_or("—")
        ));
    }
    out
}

/// The reviewer's task: the task (its sealed sub-issue), the epic's review criteria (the
/// codeowner's section, else the settings'), and the pull request's files.
fn reviewer_task(
    epic: &crate::github::Issue,
    settings: &crate::config::Settings,
    task: &crate::github::Issue,
    pr: u64,
    base: &str,
    files: &[crate::gates::ChangedFile],
) -> String {
    let criteria = review_criteria(&epic.body)
        .or_else(|| settings.epic.review_criteria.clone())
        .unwrap_or_else(|| "None named: judge the task's acceptance checklist.".into());
    let mut listed: Vec<String> = files
        .iter()
        .map(|f| {
            let status = match &f.status {
                crate::gates::FileStatus::Added => "added".to_string(),
                crate::gates::FileStatus::Modified => "modified".to_string(),
                crate::gates::FileStatus::Deleted => "removed".to_string(),
                crate::gates::FileStatus::Renamed { from } => format!("renamed from `{from}`"),
            };
            format!(
                "- `{}` ({status}, +{} −{})",
                f.path, f.additions, f.deletions
            )
        })
        .collect();
    if listed.is_empty() {
        listed.push(format!(
            "None listed: `git diff {base}...HEAD` in your working directory shows them."
        ));
    }
    format!(
        "Review pull request #{pr} of task #{} of epic #{}. Its branch is checked out in your \
         working directory; its base is `{base}` (`git diff {base}...HEAD`).\n\n# Task: {}\n\n{}\n\n\
         # Review criteria\n\n{}\n\n# Files changed\n\n{}\n",
        task.number,
        epic.number,
        task.title,
        task.body.trim(),
        criteria.trim(),
        listed.join("\n")
    )
}

/// The "Review criteria" section of an epic's description (a heading of any level), when it has
/// one.
pub(crate) fn review_criteria(body: &str) -> Option<String> {
    let mut lines = body.lines();
    let level = lines.by_ref().find_map(|l| {
        let t = l.trim_start();
        let hashes = t.len() - t.trim_start_matches('#').len();
        (hashes > 0 && t[hashes..].trim().eq_ignore_ascii_case("review criteria")).then_some(hashes)
    })?;
    let section: Vec<&str> = lines
        .take_while(|l| {
            let t = l.trim_start();
            let hashes = t.len() - t.trim_start_matches('#').len();
            hashes == 0 || hashes > level || !t[hashes..].starts_with(' ')
        })
        .collect();
    let text = section.join("\n").trim().to_string();
    (!text.is_empty()).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reviewers_task_lists_the_branchs_files_or_says_how_to_see_them() {
        let issue = |number: u64, body: &str| crate::github::Issue {
            number,
            title: format!("Issue {number}"),
            body: body.into(),
            author: "alice".into(),
            ..Default::default()
        };
        let (epic, task) = (
            issue(1, "## Review criteria\n\n- tested"),
            issue(2, "- [ ] d"),
        );
        let repo = crate::config::RepoSlug::parse("acme/widgets").unwrap();
        let settings = crate::config::Settings::minimal(repo, 1, vec!["alice".into()]);
        let files = [
            crate::gates::ChangedFile {
                path: "src/units.ts".into(),
                status: crate::gates::FileStatus::Added,
                additions: 3,
                deletions: 0,
            },
            crate::gates::ChangedFile {
                path: "src/new.ts".into(),
                status: crate::gates::FileStatus::Renamed {
                    from: "src/old.ts".into(),
                },
                additions: 1,
                deletions: 2,
            },
        ];
        let text = reviewer_task(&epic, &settings, &task, 7, "epic-1", &files);
        assert!(text.contains("- `src/units.ts` (added, +3 −0)"), "{text}");
        assert!(
            text.contains("- `src/new.ts` (renamed from `src/old.ts`, +1 −2)"),
            "{text}"
        );
        assert!(text.contains("- tested"), "{text}");
        let none = reviewer_task(&epic, &settings, &task, 7, "epic-1", &[]);
        assert!(
            none.contains("None listed: `git diff epic-1...HEAD`"),
            "{none}"
        );
    }

    #[test]
    fn the_review_criteria_are_the_epics_section_up_to_the_next_heading_of_its_level() {
        let body = "Support d, w and y.\n\n## Review criteria\n\n- every unit has a test\n### detail\n- no new dependency\n\n## Notes\n\nnot criteria";
        assert_eq!(
            review_criteria(body).as_deref(),
            Some("- every unit has a test\n### detail\n- no new dependency")
        );
        assert_eq!(review_criteria("## Review Criteria\n\n"), None);
        assert_eq!(review_criteria("no section"), None);
        assert_eq!(
            review_criteria("# Review criteria\nall of it\n## sub\nstill").as_deref(),
            Some("all of it\n## sub\nstill")
        );
    }

    #[test]
    fn the_outcome_table_escapes_what_would_break_it() {
        let table = outcome_table(&[TaskOutcome {
            task: "units".into(),
            issue: 11,
            pull_request: Some(21),
            outcome: "escalated",
            reviews: 3,
            score: Some("9/10".into()),
            reason: Some("a | b\nc".into()),
        }]);
        assert!(
            table.contains("| `units` | #11 | #21 | escalated: a \\| b c | 3 | 9/10 |"),
            "{table}"
        );
    }
}
