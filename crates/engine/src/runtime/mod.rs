//! Running the pipeline for real: the production [`Effects`](crate::pipeline::Effects) — the GitHub
//! client, git worktrees, agent CLIs, gate tools — and [`run_issue`], which claims an issue's run
//! (checkpoint), opens its journal and drives the engine to its end. Texts are rendered by `report`.

mod console;
mod epic;
mod live;
mod monitor;
mod tracker;

use std::path::PathBuf;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tracing::Instrument;

pub use console::{Console, LogWriter, ProgressMode, write_stderr};
pub use epic::{
    EpicEnd, EpicRecord, EpicTask, Planned, TaskOutcome, epic_branch, epic_refusal, plan_epic,
    read_epics, run_epic, run_epic_run, waiting_text,
};
pub(crate) use live::LiveEffects;
pub use monitor::{
    Feed, FinishedView, GateMark, LiveView, Monitor, RoundView, Scheduled, is_silent,
};

use crate::github::GitHub;
use crate::ids::{IssueNumber, PrNumber, RunId};
use crate::pipeline::{
    Event, Journal, Machine, Project, RunEnd, RunError, RunOptions, RunSummary, drive,
};
use crate::workspace::{self, Checkpoint, PushAuth, RunLock, WorkspaceConfig};

/// What a run talks to.
pub struct Services {
    pub github: GitHub,
    pub push_auth: PushAuth,
    /// Passed to agents only when the settings opt in.
    pub github_token: Option<String>,
    /// Program the scripted backend runs (the supervisor binary); `None` = the current executable.
    pub scripted_program: Option<PathBuf>,
    /// Cancelled on SIGINT/SIGTERM/SIGHUP (or by the scheduler): the run stops at its next safe point.
    pub cancel: CancellationToken,
    /// Told of the run's card moves, and may hold a move back (the scheduler's column limits).
    pub hooks: Option<Arc<dyn RunHooks>>,
    /// How the run shows its progress while it moves.
    pub progress: ProgressMode,
    /// The live picture the run's journal and progress feed (a scheduler's runs).
    pub feed: Option<Feed>,
}

impl Services {
    /// The services of one task's run of an epic worked by this process: the same GitHub,
    /// credentials and agents, cancelled with it, under the same column limits; its progress
    /// shows through the epic's.
    pub fn for_task(&self) -> Services {
        Services {
            github: self.github.clone(),
            push_auth: self.push_auth.clone(),
            github_token: self.github_token.clone(),
            scripted_program: self.scripted_program.clone(),
            cancel: self.cancel.child_token(),
            hooks: self.hooks.clone(),
            progress: ProgressMode::Off,
            feed: None,
        }
    }

    /// The services of a command run from a terminal or a CI job: no scheduler, the agents'
    /// program their own; `token` reaches agents only when `passGitHubToken` says so.
    pub fn command(
        github: GitHub,
        push_auth: PushAuth,
        token: Option<&crate::github::Token>,
        settings: &crate::config::Settings,
        cancel: CancellationToken,
        progress: ProgressMode,
    ) -> Services {
        Services {
            github,
            push_auth,
            github_token: token
                .filter(|_| settings.pass_github_token)
                .map(|t| t.expose().to_string()),
            scripted_program: None,
            cancel,
            hooks: None,
            progress,
            feed: None,
        }
    }
}

/// What a scheduler hears from a run it started, and how it holds one back.
pub trait RunHooks: Send + Sync {
    /// The run is about to move `issue`'s card to `column`: the move waits until the returned
    /// future resolves (room in a column with a limit). It resolves early when the run is
    /// cancelled, and then the card is not moved.
    fn moving(&self, issue: u64, column: &str) -> futures_util::future::BoxFuture<'static, ()>;
    /// The run moved `issue`'s card to `column`.
    fn moved(&self, issue: u64, column: &str);
    /// A run of `issue` started inside another run (a task of an epic): its card counts in the
    /// column limits from its first move until [`RunHooks::ended`].
    fn started(&self, _issue: u64) {}
    /// The run of `issue` [`RunHooks::started`] ended.
    fn ended(&self, _issue: u64) {}
}

/// A new run id: `<issue>-<UTC timestamp>`, or `<issue>-rev<pr>-<UTC timestamp>` for a revision.
fn new_run_id(issue: u64, revise: Option<u64>) -> String {
    let kind = revise.map(|pr| format!("rev{pr}-")).unwrap_or_default();
    format!(
        "{issue}-{kind}{}",
        chrono::Utc::now().format("%Y%m%dT%H%M%S%3fZ")
    )
}

pub(crate) use crate::pipeline::revised_pull;

/// Claim `issue`'s run: take its lock (another live process holding it refuses), kill what a dead
/// run left running, then resume its run id from the checkpoint — or, when the checkpoint is stale
/// or absent, prune what is left and start a new one.
fn claim(
    project: &Project,
    ws: &WorkspaceConfig,
    issue: u64,
    revise: Option<u64>,
) -> Result<(String, bool, RunLock), RunError> {
    let busy = |cp: Option<&Checkpoint>| RunError::Busy {
        pid: cp.map(|c| c.pid).unwrap_or_default(),
        issue,
    };
    let cp = Checkpoint::load(&project.root, issue)?;
    let Some(lock) = RunLock::acquire(&project.root, issue)? else {
        return Err(busy(cp.as_ref()));
    };
    let Some(cp) = cp else {
        return Ok((new_run_id(issue, revise), false, lock));
    };
    // Never take over from a process that is still running, however old its checkpoint.
    if cp.pid != std::process::id() && cp.process_alive() {
        return Err(busy(Some(&cp)));
    }
    let (groups, last_alive) = cp.leftover_groups(&project.root);
    let killed = crate::process::kill_leftovers(&groups, last_alive.into());
    if killed > 0 {
        tracing::warn!(
            "killed {killed} process(es) the previous run of issue #{issue} left running"
        );
    }
    // Nothing of the dead run may write into the worktree from here on.
    if !crate::process::leftovers_gone(&groups, last_alive.into(), LEFTOVERS_WAIT) {
        return Err(RunError::Unfinished(format!(
            "processes the previous run of issue #{issue} left are still running {} s after they were killed; end them (process groups {groups:?}), then run again",
            LEFTOVERS_WAIT.as_secs()
        )));
    }
    if cp.is_stale(chrono::Utc::now()) {
        workspace::prune_stale(ws, &cp)?;
        Checkpoint::remove(&project.root, issue)?;
        return Ok((new_run_id(issue, revise), false, lock));
    }
    if revised_pull(&cp.run_id).is_some() != revise.is_some() {
        let (live, other) = if revise.is_some() {
            ("run", format!("`supervisor run {issue}`"))
        } else {
            (
                "revision",
                "`supervisor revise` of its pull request".to_string(),
            )
        };
        return Err(RunError::Unfinished(format!(
            "issue #{issue} has an unfinished {live} ({}): finish it first with {other}",
            cp.run_id
        )));
    }
    put_back(ws, &cp)?;
    Ok((cp.run_id, true, lock))
}

/// How long a resume waits for the processes it killed to end.
const LEFTOVERS_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Put a resumed run's worktree back to how its last agent left it: what arrived after (the work
/// of an agent the crash cut short, or writes of processes that outlived it) is undone before
/// anything of it could be committed.
fn put_back(ws: &WorkspaceConfig, cp: &Checkpoint) -> Result<(), RunError> {
    let (Some(tree), Some(wt)) = (&cp.settled, workspace::existing_worktree(ws, cp.issue)?) else {
        return Ok(());
    };
    let undone = wt.restore(tree)?;
    if undone > 0 {
        tracing::warn!(
            "undid {undone} file change(s) made in {} after the last agent of the previous run ended",
            wt.path.display()
        );
    }
    Ok(())
}

/// Revise pull request `pr` after review feedback: the issue it closes is its run's, and the
/// revision claims, journals, resumes and summarises like a run of it.
pub async fn run_revision(
    project: Arc<Project>,
    svc: Services,
    pr: u64,
    mut opts: RunOptions,
) -> Result<RunSummary, RunError> {
    let (feedback, viewer) = svc.github.pull_feedback(pr).await?;
    let Some(issue) = crate::pipeline::decide::revision::linked_issue(&feedback.body) else {
        return Err(RunError::Unfinished(format!(
            "pull request #{pr} names no issue it closes (`Closes #N` in its description): supervisor revises the pull requests it opened for an issue"
        )));
    };
    opts.issue = IssueNumber::new(issue);
    opts.revise = Some(PrNumber::new(pr));
    // What was just read is the revision's first reading of its pull request.
    run_read(project, svc, opts, Some((feedback, viewer))).await
}

/// Why the run of `issue` would be refused (an author who is not a codeowner, open blockers, an
/// untrusted edit, …), asked without writing anything: the run's own admission, as a dry run
/// (no lock, no journal on disk, no comment, no card move). `None`: it would be admitted.
pub(crate) async fn refusal(
    project: Arc<Project>,
    svc: Services,
    issue: u64,
) -> Result<Option<String>, RunError> {
    let opts = RunOptions {
        issue: IssueNumber::new(issue),
        dry_run: true,
        ..RunOptions::default()
    };
    Ok(match run_issue(project, svc, opts).await?.end {
        RunEnd::Refused { reason } => Some(reason),
        _ => None,
    })
}

/// Run the pipeline for one issue, resuming its run when a checkpoint says one is live.
pub async fn run_issue(
    project: Arc<Project>,
    svc: Services,
    opts: RunOptions,
) -> Result<RunSummary, RunError> {
    run_read(project, svc, opts, None).await
}

/// [`run_issue`] for a task of an epic, with its issue when the epic's work read it just before.
pub(crate) async fn run_task(
    project: Arc<Project>,
    svc: Services,
    opts: RunOptions,
    issue: Option<crate::github::Issue>,
) -> Result<RunSummary, RunError> {
    let first = FirstReads {
        issue,
        feedback: None,
    };
    run_first(project, svc, opts, first).await
}

/// [`run_issue`], with a revision's pull request and feedback (and the login supervisor posts as)
/// when they were read just before.
async fn run_read(
    project: Arc<Project>,
    svc: Services,
    opts: RunOptions,
    feedback: Option<(crate::github::Feedback, String)>,
) -> Result<RunSummary, RunError> {
    let first = FirstReads {
        issue: None,
        feedback,
    };
    run_first(project, svc, opts, first).await
}

/// [`run_issue`], with what was read just before.
async fn run_first(
    project: Arc<Project>,
    svc: Services,
    opts: RunOptions,
    first: FirstReads,
) -> Result<RunSummary, RunError> {
    let FirstReads { issue, feedback } = first;
    let (project, read) = if opts.epic_task || opts.revise.is_some() {
        (project, issue)
    } else {
        task_project(project, &svc, opts.issue.get()).await
    };
    let ws = WorkspaceConfig::from_settings(&project.root, &project.settings);
    let (issue, pr) = (opts.issue.get(), opts.revise.map(PrNumber::get));
    let (run_id, resumed, lock) = if opts.dry_run {
        (new_run_id(issue, pr), false, None)
    } else {
        let (id, resumed, lock) = claim(&project, &ws, issue, pr)?;
        (id, resumed, Some(lock))
    };
    let run_id = RunId::new(run_id);
    // Every log line of the run, down through its agents and gates, names it.
    let span = tracing::info_span!(
        "run",
        run = %run_id,
        issue,
        pr = pr.map(tracing::field::display),
    );
    let first = FirstReads {
        issue: read,
        feedback,
    };
    let result = run_in(project, svc, opts, ws, run_id, resumed, first)
        .instrument(span)
        .await;
    drop(lock);
    result
}

/// The project a run of `issue` works in. A task of an epic worked on its epic branch (`branch`
/// integration) starts from that branch and its pull request targets it, however its run was
/// started (a card a person moved, `supervisor run`): else the epic could not merge it. Whether
/// the issue may run at all is admission's to say; anything unclear here leaves the project as it
/// is. With the issue as read, the run's first read of it.
async fn task_project(
    project: Arc<Project>,
    svc: &Services,
    issue: u64,
) -> (Arc<Project>, Option<crate::github::Issue>) {
    if project.settings.epic.integration != crate::config::EpicIntegration::Branch {
        return (project, None);
    }
    let gh = &svc.github;
    let Ok(found) = gh.get_issue(issue).await else {
        return (project, None);
    };
    let Some(epic) = crate::epic::Seal::claimed(&found.body) else {
        return (project, Some(found));
    };
    let branch = epic::epic_branch(epic);
    match gh.branch_head(&branch).await {
        Ok(Some(_)) if project.settings.default_branch != branch => {
            tracing::info!(
                issue,
                epic,
                "a task of epic #{epic}: it works on `{branch}`"
            );
            let mut p = (*project).clone();
            p.settings.default_branch = branch;
            // Its worktree starts from the branch as GitHub has it now.
            let ws = WorkspaceConfig::from_settings(&p.root, &p.settings);
            let auth = svc.push_auth.clone();
            let cancel = Some(svc.cancel.clone());
            let fetched =
                crate::process::spawn_blocking(cancel, move || workspace::fetch_base(&ws, &auth));
            if let Ok(Err(e)) = fetched.await {
                tracing::warn!(issue, "fetching the epic branch: {e}");
            }
            (Arc::new(p), Some(found))
        }
        _ => (project, Some(found)),
    }
}

/// What was read just before a run started: its first reads.
struct FirstReads {
    issue: Option<crate::github::Issue>,
    /// A revision's pull request, its feedback and the login supervisor posts as.
    feedback: Option<(crate::github::Feedback, String)>,
}

/// The run `run_id`, claimed.
async fn run_in(
    project: Arc<Project>,
    svc: Services,
    opts: RunOptions,
    ws: WorkspaceConfig,
    run_id: RunId,
    resumed: bool,
    first: FirstReads,
) -> Result<RunSummary, RunError> {
    let mut journal = if opts.dry_run {
        Journal::in_memory()
    } else {
        Journal::open(&project.root, &run_id)?
    };
    if svc.progress == ProgressMode::Jsonl {
        journal.mirror_to(Box::new(std::io::stdout()));
    }
    if let Some(feed) = svc.feed.clone().filter(|_| !opts.dry_run) {
        let run_id = run_id.clone();
        journal.observe(Box::new(move |entry| feed.journalled(&run_id, entry)));
    }
    let mut machine = Machine::new(
        project.clone(),
        opts.clone(),
        run_id.clone(),
        journal.entries(),
    );
    journal.record(Event::RunStarted {
        issue: opts.issue.get(),
        repo: project.settings.repo.to_string(),
        resumed,
        version: env!("CARGO_PKG_VERSION").to_string(),
    })?;
    let mut effects = LiveEffects::new(
        project,
        svc,
        ws,
        opts.issue.get(),
        run_id,
        journal.dir().to_path_buf(),
    )
    .with_issue(first.issue)
    .with_feedback(first.feedback);
    let cancel = effects.cancel_token();
    let groups = effects.group_recorder();
    let gates = effects.gate_session();
    crate::process::recording(groups, async {
        let result = drive(&mut machine, &mut effects, &mut journal, &cancel).await;
        // Warm language servers and incremental gate state end with the run, however it ended.
        gates.shutdown().await;
        result
    })
    .await
}
