//! The production effects: what the engine asks for, done against GitHub, git, agent CLIs and gate
//! tools. Blocking git work runs on tokio's blocking pool so a signal is always heard.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::Services;
use super::tracker::Tracker;
use crate::agent::{self, AgentRequest, AgentRun, ExitReason};
use crate::config::{Hook, StageId};
use crate::gates::{self, CiContext, CiSource, GateContext, GateReport, IssueText};
use crate::github::{
    BoardItem, BoardRef, Comment, GitHub, GitHubError, Issue, Marker, MarkerKind, NewPullRequest,
    PullRequest,
};
use crate::ids::{CommitSha, IssueNumber, PrNumber, RunId};
use crate::pipeline::decide::admission::sealed_epic;
use crate::pipeline::{
    Cleanup, CommitResult, Context, Dispatch, EffectError, Effects, ErrorClass, GateFeed,
    GitHubChecks, PrRequest, Progress, Project, RunError, Text, ThreadAnswer, UserText,
    WorktreeInfo,
};
use crate::report;
use crate::workspace::{
    self, Checkpoint, MergeOutcome, PushAuth, Reuse, WorkspaceConfig, WorkspaceError, Worktree,
};

/// The effects of one run against the real world.
pub(crate) struct LiveEffects {
    project: Arc<Project>,
    gh: GitHub,
    push_auth: PushAuth,
    github_token: Option<String>,
    scripted_program: Option<PathBuf>,
    cancel: CancellationToken,
    hooks: Option<Arc<dyn super::RunHooks>>,
    ws: WorkspaceConfig,
    run_id: RunId,
    issue: u64,
    journal_dir: PathBuf,
    /// The issue's comments as last read, with the ones posted since: where a marker is looked
    /// for before posting.
    comments: Vec<Comment>,
    /// Supervisor's own comments on another issue or pull request (a revision's pull request) as
    /// read once, with the ones posted since: only supervisor adds to them while the run holds
    /// the issue.
    others: std::collections::HashMap<u64, Vec<Comment>>,
    /// The login supervisor posts as; only its comments' markers count.
    viewer: Option<String>,
    /// A revision's pull request and feedback with the login supervisor posts as, read just
    /// before the run began: its first reading.
    feedback: Option<(crate::github::Feedback, String)>,
    wt: Option<Worktree>,
    /// The pull request this run opened or found: its number, head and base commits.
    opened: Option<(u64, String, String)>,
    /// Revising a pull request: pushes never rewrite the branch's history.
    revising: bool,
    /// Shared with the recorder of the run's process groups, which writes them into it.
    checkpoint: Arc<std::sync::Mutex<Option<Checkpoint>>>,
    /// The tracking comment's writer, once the run shows progress (when configured).
    tracker: Option<Tracker>,
    /// The run's progress on the terminal.
    console: super::Console,
    /// The live picture of the scheduler that started the run.
    feed: Option<super::Feed>,
    /// The run's gate state (trusted tools, warm language servers, incremental caches); shut down
    /// when the run ends, however it ends.
    gates: gates::GateSession,
    /// The issue as read just before the run started (to know its base): its first read.
    read_first: Option<Issue>,
    /// The worktree's git set-up as supervisor left it before the first agent ran.
    git_setup: Option<workspace::GitSetup>,
    /// The first stage after which the git set-up was found changed, and what changed: supervisor
    /// then commits, pushes and fetches nothing more.
    git_changed: Option<(String, String)>,
}

/// How often a live run refreshes its checkpoint while an agent works.
const HEARTBEAT: Duration = Duration::from_secs(60);
/// How often the agent at work's tokens so far reach the scheduler's picture.
const PULSE_FEED: Duration = Duration::from_secs(1);

impl LiveEffects {
    pub(crate) fn new(
        project: Arc<Project>,
        svc: Services,
        ws: WorkspaceConfig,
        issue: u64,
        run_id: RunId,
        journal_dir: PathBuf,
    ) -> LiveEffects {
        // The main checkout's tools are recorded now, before any agent has run. Gate tools run in
        // the agents' sandbox: they read and run what the agents wrote.
        let gates = gates::GateSession::new(
            Some(&project.root),
            &project.root.join(".supervisor").join("gates"),
            gates::ToolEnv::for_settings(&project.settings, svc.github_token.as_deref()),
        )
        .with_sandbox(crate::agent::Sandbox::from_settings(&project.settings))
        .with_cancel(svc.cancel.clone());
        LiveEffects {
            project,
            gh: svc.github,
            push_auth: svc.push_auth,
            github_token: svc.github_token,
            scripted_program: svc.scripted_program,
            cancel: svc.cancel,
            hooks: svc.hooks,
            ws,
            run_id,
            issue,
            journal_dir,
            comments: Vec::new(),
            others: std::collections::HashMap::new(),
            viewer: None,
            feedback: None,
            wt: None,
            opened: None,
            revising: false,
            checkpoint: Arc::default(),
            tracker: None,
            console: super::Console::new(svc.progress),
            feed: svc.feed,
            gates,
            read_first: None,
            git_setup: None,
            git_changed: None,
        }
    }

    /// `issue`, read just before the run started: the run's first read of it is this one.
    pub(crate) fn with_issue(mut self, issue: Option<Issue>) -> LiveEffects {
        self.read_first = issue.filter(|i| i.number == self.issue);
        self
    }

    /// Take `feedback` (a revision's pull request, its feedback and the login supervisor posts
    /// as, just read) as the first reading of the pull request.
    pub(crate) fn with_feedback(
        mut self,
        feedback: Option<(crate::github::Feedback, String)>,
    ) -> LiveEffects {
        self.feedback = feedback;
        self
    }

    /// The run's gate session.
    pub(crate) fn gate_session(&self) -> gates::GateSession {
        self.gates.clone()
    }

    /// A recorder of the run's child process groups that keeps them in the run's [`GroupLog`] while
    /// the run has a checkpoint.
    pub(crate) fn group_recorder(&self) -> Arc<crate::process::RunGroups> {
        let checkpoint = self.checkpoint.clone();
        let (root, issue) = (self.project.root.clone(), self.issue);
        let log = std::sync::Mutex::new(None::<workspace::GroupLog>);
        crate::process::RunGroups::new(move |groups| {
            let (Ok(cp), Ok(mut log)) = (checkpoint.lock(), log.lock()) else {
                return;
            };
            if cp.is_none() {
                // Removed with the checkpoint; a later checkpoint starts a log of its own.
                *log = None;
                return;
            }
            if log.is_none() {
                match workspace::GroupLog::create(&root, issue) {
                    Ok(l) => *log = Some(l),
                    Err(e) => tracing::warn!("the run's process groups are not recorded: {e}"),
                }
            }
            if let Some(Err(e)) = log.as_mut().map(|l| l.record(groups)) {
                tracing::warn!("the run's process groups are not recorded: {e}");
            }
        })
    }

    /// The run's cancellation token.
    pub(crate) fn cancel_token(&self) -> CancellationToken {
        self.cancel.clone()
    }

    fn board_ref(&self) -> BoardRef {
        BoardRef::from_settings(&self.project.settings)
    }

    fn worktree(&self) -> Result<Worktree, EffectError> {
        self.wt
            .clone()
            .ok_or_else(|| EffectError::new(ErrorClass::NotFound, "the worktree is not ready"))
    }

    /// The worktree, for git work that writes or talks to the remote: refused, naming the stage
    /// and the change, once a stage changed the worktree's git set-up.
    fn worktree_for_git(&self) -> Result<Worktree, EffectError> {
        if let Some((stage, what)) = &self.git_changed {
            return Err(EffectError::workspace(&WorkspaceError::GitChanged {
                what: format!("the {stage} changed the worktree's git set-up ({what})"),
            }));
        }
        self.worktree()
    }

    /// One look at the worktree, off the async threads, after it is made, after an agent (`stage`,
    /// "Implementation stage (developer)") and after supervisor's own merges: the git set-up
    /// before the first agent (taken once), whether the stage changed it (the first stage that did
    /// is remembered), and its files as a tree, recorded in the checkpoint for a resume.
    async fn look_at_worktree(&mut self, stage: Option<&str>) {
        let Some(wt) = self.wt.clone() else {
            return;
        };
        let baseline = self.git_setup.clone();
        let compare = stage.is_some() && self.git_changed.is_none();
        let looked = tokio::task::spawn_blocking(move || {
            let changed = baseline
                .as_ref()
                .filter(|_| compare)
                .and_then(|before| wt.git_changed_since(before));
            let setup = baseline.is_none().then(|| wt.git_setup());
            (setup, changed, wt.snapshot())
        })
        .await;
        let (setup, changed, tree) = match looked {
            Ok(looked) => looked,
            Err(e) => return tracing::warn!("the worktree could not be looked at: {e}"),
        };
        if setup.is_some() {
            self.git_setup = setup;
        }
        if let (Some(stage), Some(what)) = (stage, changed) {
            tracing::warn!("the {stage} changed the worktree's git set-up: {what}");
            self.git_changed = Some((stage.to_string(), what));
        }
        let tree = match tree {
            Ok(tree) => tree,
            Err(e) => return tracing::warn!("the worktree's state is not recorded: {e}"),
        };
        let Ok(mut cp) = self.checkpoint.lock() else {
            return;
        };
        if let Some(cp) = cp.as_mut().filter(|cp| cp.settled.as_ref() != Some(&tree)) {
            cp.settled = Some(tree);
            if let Err(e) = cp.save(&self.project.root) {
                tracing::warn!("could not write the checkpoint: {e}");
            }
        }
    }

    /// Comments a marker may be found on: supervisor's own (none while its login is unknown).
    fn own_comments(&self) -> Vec<Comment> {
        self.comments
            .iter()
            .filter(|c| {
                self.viewer
                    .as_deref()
                    .is_some_and(|v| v.eq_ignore_ascii_case(&c.author))
            })
            .cloned()
            .collect()
    }

    /// Supervisor's own comments on `number`: the issue's as the run knows them, another's read
    /// from GitHub the first time.
    async fn own_comments_on(&mut self, number: u64) -> Result<Vec<Comment>, GitHubError> {
        if number == self.issue {
            return Ok(self.own_comments());
        }
        if let Some(known) = self.others.get(&number) {
            return Ok(known.clone());
        }
        let own = self.gh.own_comments(number).await?;
        self.others.insert(number, own.clone());
        Ok(own)
    }

    async fn gate_context(&self, wt: &Worktree, issue: &IssueText) -> GateContext {
        let s = &self.project.settings;
        let (path, base, head) = (wt.clone(), self.ws.default_branch.clone(), wt.clone());
        // git2 reads the repository: off the async threads.
        let changes = crate::process::spawn_blocking(None, move || {
            gates::ChangeSet::compute(&path.path, &base)
        })
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r.map_err(|e| e.to_string()))
        .unwrap_or_else(|e| {
            tracing::warn!("could not compute the change set: {e}");
            gates::ChangeSet {
                base: self.ws.default_branch.clone(),
                ..gates::ChangeSet::default()
            }
        });
        let head_sha = crate::process::spawn_blocking(None, move || head.head_sha())
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
        // Also with a zero timeout: the gate then says CI is not waited for (n/a), which no
        // connection at all would not.
        let ci = Some(CiContext {
            head_sha,
            timeout: Duration::from_secs(s.ci_gating_timeout_sec),
            interval: Duration::from_secs(s.gates.ci_poll_interval_sec),
            source: Arc::new(GitHubChecks::new(
                self.gh.clone(),
                wt.clone(),
                self.push_auth.clone(),
                self.cancel.clone(),
            )) as Arc<dyn CiSource>,
        });
        GateContext {
            dir: wt.path.clone(),
            changes,
            issue: Some(issue.clone()),
            settings: s.gates.clone(),
            ci,
            state_dir: self.project.root.join(".supervisor").join("gates"),
            search_path: None,
            session: self.gates.clone(),
            proof: None,
        }
    }
}

/// The globs of a stage's `writes` (validated with the workflow).
fn globset_of(globs: &[String]) -> Result<globset::GlobSet, String> {
    let mut b = globset::GlobSetBuilder::new();
    for g in globs {
        b.add(globset::Glob::new(g).map_err(|e| format!("writes: `{g}`: {e}"))?);
    }
    b.build().map_err(|e| format!("writes: {e}"))
}

/// Mark the run's checkpoint (when it has one) alive now.
fn touch_checkpoint(checkpoint: &std::sync::Mutex<Option<Checkpoint>>, root: &std::path::Path) {
    let Ok(mut guard) = checkpoint.lock() else {
        return;
    };
    if let Some(Err(e)) = guard.as_mut().map(|cp| cp.touch(root)) {
        tracing::warn!("could not write the checkpoint: {e}");
    }
}

/// How long the new worktree took to be ready for the first agent, as the progress shows it.
fn ready_text(
    wt: &Worktree,
    took: Duration,
    dependencies: Option<workspace::Dependencies>,
) -> String {
    let how = match dependencies {
        Some(workspace::Dependencies::Cloned) => "the main checkout's, cloned",
        Some(workspace::Dependencies::InstalledOffline) => "npm ci --prefer-offline",
        Some(workspace::Dependencies::SetupCommands) => "npm ci",
        None => "left to the setup commands",
    };
    format!(
        "worktree {} ready in {:.2} s (time to first agent; dependencies: {how})",
        wt.path.display(),
        took.as_secs_f64()
    )
}

/// Run blocking git work off the async threads; the git processes it starts are killed when
/// `cancel` is cancelled.
async fn blocking<T: Send + 'static>(
    cancel: &CancellationToken,
    f: impl FnOnce() -> Result<T, WorkspaceError> + Send + 'static,
) -> Result<T, EffectError> {
    let result = match crate::process::spawn_blocking(Some(cancel.clone()), f).await {
        Ok(r) => r.map_err(EffectError::from),
        Err(e) => Err(EffectError::new(
            ErrorClass::Transient,
            format!("the git task failed: {e}"),
        )),
    };
    // git killed by a stop failed because of the stop.
    result.map_err(|e| match cancel.is_cancelled() {
        true => EffectError {
            class: ErrorClass::Cancelled,
            ..e
        },
        false => e,
    })
}

impl Effects for LiveEffects {
    async fn fetch_issue(&mut self, issue: IssueNumber) -> Result<Issue, RunError> {
        if let Some(read) = self.read_first.take().filter(|i| i.number == issue.get()) {
            return Ok(read);
        }
        Ok(self.gh.get_issue(issue.get()).await?)
    }

    async fn fetch_context(&mut self, issue: &Issue) -> Result<Context, RunError> {
        // Independent reads, asked together.
        let board_ref = self.board_ref();
        // An issue GitHub counted no comments on has none to list.
        let comments = async {
            match issue.comments {
                Some(0) => Ok(Vec::new()),
                _ => self.gh.list_comments(issue.number).await,
            }
        };
        let (context, blockers, comments) = tokio::try_join!(
            self.gh.issue_context(&board_ref, issue.number),
            self.gh.open_blockers(issue),
            comments,
        )?;

        // Asked once per run: only comments by this login are supervisor's.
        if self.viewer.is_none() {
            self.viewer = Some(self.gh.viewer_login().await?);
        }
        self.comments = comments.clone();
        // What a sealed issue is a sub-issue of decides whether it is one of an epic's tasks.
        let sealed = sealed_epic(&self.project.settings, issue).is_some();
        Ok(Context {
            board: context.board,
            blockers,
            comments,
            editors: context.editors,
            viewer: self.viewer.clone(),
            epic: context.parent.filter(|_| sealed),
        })
    }

    async fn add_to_board(&mut self, issue: &Issue) -> Result<BoardItem, RunError> {
        let item = self.gh.add_to_board(&self.board_ref(), issue).await?;
        Ok(item)
    }

    async fn post(
        &mut self,
        issue: u64,
        marker: &Marker,
        text: &Text,
    ) -> Result<(Comment, bool), EffectError> {
        let body = report::comment_text(text);
        // Comments on the pull request (a revision's) are not among the issue's: GitHub is asked
        // once.
        let known = self.own_comments_on(issue).await?;
        match self.gh.post_once(issue, marker, &body, Some(&known)).await {
            Ok(posted) => {
                if posted.created {
                    match self.others.get_mut(&issue) {
                        Some(others) => others.push(posted.comment.clone()),
                        None => self.comments.push(posted.comment.clone()),
                    }
                }
                Ok((posted.comment, posted.created))
            }
            Err(e) => Err(EffectError::from(e)),
        }
    }

    async fn move_card(&mut self, board: &BoardItem, to: &StageId) -> Result<(), RunError> {
        let option = self.project.settings.board_option(to);
        let column = to.as_str();
        let Some(hooks) = self.hooks.clone() else {
            return Ok(self.gh.move_card(board, &option).await?);
        };
        tokio::select! {
            () = hooks.moving(self.issue, column) => {}
            () = self.cancel.cancelled() => {}
        }
        if self.cancel.is_cancelled() {
            // Stopped while waiting: the card stays where it is, the run ends at its next step.
            return Ok(());
        }
        self.gh.move_card(board, &option).await?;
        hooks.moved(self.issue, column);
        Ok(())
    }

    async fn close_issue(
        &mut self,
        issue: u64,
        marker: &Marker,
        text: &Text,
    ) -> Result<(), RunError> {
        let body = report::comment_text(text);
        Ok(self.gh.close_issue(issue, Some((marker, &body))).await?)
    }

    async fn open_pull_request(
        &mut self,
        pr: &PrRequest,
    ) -> Result<(PullRequest, bool), EffectError> {
        let (title, body) = report::pull_request_text(pr);
        let new = NewPullRequest {
            head: pr.head.clone(),
            base: pr.base.clone(),
            title,
            body,
            draft: pr.draft,
        };
        let (pull, created) = self.gh.find_or_create_pr(&new).await?;
        self.opened = Some((pull.number, pull.head_sha.clone(), pull.base_sha.clone()));
        Ok((pull, created))
    }

    async fn mergeable(&mut self, number: u64) -> Result<Option<bool>, EffectError> {
        // The branch's head merged into the base's head GitHub answered with, computed here: a
        // fast-forward, or a merge with or without conflicts, whatever GitHub has computed so far.
        if let (Some((n, head, base)), Ok(wt)) = (self.opened.clone(), self.worktree_for_git()) {
            let auth = self.push_auth.clone();
            if n == number {
                match blocking(&self.cancel, move || wt.merges_cleanly(&auth, &head, &base)).await {
                    Ok(Some(clean)) => return Ok(Some(clean)),
                    Ok(None) => {}
                    Err(e) if e.class == ErrorClass::Cancelled => return Err(e),
                    Err(e) => tracing::warn!("the merge was not tried here: {e}"),
                }
            }
        }
        // Otherwise GitHub computes it in the background: read until it is known (bounded).
        let poll = self.gh.mergeable_poll();
        Ok(self.gh.mergeable(number, &poll).await?)
    }

    async fn prepare_worktree(
        &mut self,
        cancel: &CancellationToken,
    ) -> Result<(WorktreeInfo, Vec<String>), RunError> {
        let started = std::time::Instant::now();
        // The main checkout's dependencies are cloned while the files are checked out.
        let (wt, staged) =
            workspace::ensure_worktree_staged(&self.ws, self.issue, &self.push_auth, cancel)
                .await?;
        // The checkpoint comes first, so that setup's processes are recorded in it too.
        let checkpoint = Checkpoint::new(self.run_id.clone(), self.issue, &wt);
        checkpoint.save(&self.project.root)?;
        if let Ok(mut cp) = self.checkpoint.lock() {
            *cp = Some(checkpoint);
        }
        let mut warnings = Vec::new();
        // A worktree whose setup a stop or a crash cut short is set up again.
        if wt.origin != Reuse::ExistingWorktree || !wt.setup_done() {
            let report = workspace::setup_staged(&self.ws, &wt, staged, cancel).await;
            warnings = report.warnings;
            if !report.cancelled {
                if let Err(e) = wt.mark_setup_done() {
                    warnings.push(e.to_string());
                }
                (self.console).note(&ready_text(&wt, started.elapsed(), report.dependencies));
            }
        }
        let info = WorktreeInfo {
            path: wt.path.display().to_string(),
            branch: wt.branch.clone(),
            base: wt.base.clone(),
            reused: wt.origin,
        };
        self.wt = Some(wt);
        self.look_at_worktree(None).await;
        Ok((info, warnings))
    }

    async fn commit(
        &mut self,
        message: &str,
        scope: Option<&[String]>,
    ) -> Result<CommitResult, EffectError> {
        let wt = self.worktree_for_git()?;
        let message = message.to_string();
        let scope = match scope {
            Some(globs) => {
                Some(globset_of(globs).map_err(|e| EffectError::new(ErrorClass::Conflict, e))?)
            }
            None => None,
        };
        blocking(&self.cancel, move || {
            let c = wt.commit_within(&message, scope.as_ref())?;
            Ok(CommitResult {
                sha: c.sha.map(CommitSha::new),
                ahead: c.ahead,
                head: CommitSha::new(c.head),
                outside: c.outside,
            })
        })
        .await
    }

    async fn push(&mut self) -> Result<CommitSha, EffectError> {
        let wt = self.worktree_for_git()?;
        let auth = self.push_auth.clone();
        let revising = self.revising;
        blocking(&self.cancel, move || {
            if revising {
                // The branch may have moved on GitHub meanwhile: its commits are merged in, never
                // pushed over.
                wt.fetch_own(&auth, None)?;
                if let MergeOutcome::Conflicts { files } = wt.merge_own_remote()? {
                    return Err(WorkspaceError::RemoteMoved {
                        branch: wt.branch.clone(),
                        files,
                    });
                }
            }
            wt.push(&auth)?;
            wt.head_sha().map(CommitSha::new)
        })
        .await
    }

    async fn undo_commit(&mut self) -> Result<(), EffectError> {
        let wt = self.worktree()?;
        blocking(&self.cancel, move || wt.undo_last_commit()).await
    }

    async fn merge_base(&mut self) -> Result<MergeOutcome, EffectError> {
        let wt = self.worktree_for_git()?;
        let auth = self.push_auth.clone();
        let base = self.ws.default_branch.clone();
        let merged = blocking(&self.cancel, move || {
            let outcome = wt.merge_base_branch_with(&auth)?;
            if let MergeOutcome::Merged { .. } = &outcome {
                wt.push(&auth).inspect_err(|e| {
                    tracing::warn!("merged {base} into the branch but the push failed: {e}");
                })?;
            }
            Ok(outcome)
        })
        .await;
        if let Ok(MergeOutcome::Merged { .. }) = &merged {
            self.look_at_worktree(None).await;
        }
        merged
    }

    async fn cleanup(&mut self, how: Cleanup) -> Vec<String> {
        let mut warnings = Vec::new();
        // A worktree this process did not prepare may be an earlier process's (it died late).
        let wt = match self.wt.take() {
            Some(wt) => Some(wt),
            None => workspace::existing_worktree(&self.ws, self.issue).unwrap_or_default(),
        };
        if let Some(wt) = wt {
            let ws = self.ws.clone();
            let keep = how.keep_worktree;
            let result = tokio::task::spawn_blocking(move || {
                let unpushed = wt.unpushed().unwrap_or(true);
                if keep {
                    return Ok(Some(format!("keeping the worktree {}", wt.path.display())));
                }
                if unpushed {
                    return Ok(Some(format!(
                        "keeping the worktree {}: its branch has commits the remote does not; the next run continues from them",
                        wt.path.display()
                    )));
                }
                workspace::cleanup(&ws, &wt)
                    .map(|()| None)
                    .map_err(|e| format!("could not remove the worktree {}: {e}", wt.path.display()))
            })
            .await;
            match result {
                Ok(Ok(Some(w)) | Err(w)) => warnings.push(w),
                Ok(Ok(None)) => {}
                Err(e) => warnings.push(format!("could not clean up the worktree: {e}")),
            }
        }
        if !how.keep_checkpoint {
            if let Ok(mut cp) = self.checkpoint.lock() {
                *cp = None;
            }
            if let Err(e) = Checkpoint::remove(&self.project.root, self.issue) {
                warnings.push(e.to_string());
            }
        }
        warnings
    }

    async fn dispatch(&mut self, d: &Dispatch, cancel: &CancellationToken) -> AgentRun {
        let p = self.project.clone();
        let task = report::task_text(&p.workflow, d);
        let prompts = self.journal_dir.join("prompts");
        let slug = format!("{}-{}", d.stage, d.attempt);
        if let Err(e) = std::fs::create_dir_all(&prompts)
            .and_then(|()| std::fs::write(prompts.join(format!("{slug}.md")), &task))
        {
            tracing::warn!("could not keep the prompt: {e}");
        }
        let def = p
            .roles
            .get(&d.agent)
            .expect("dispatches name a defined role");
        let cwd = self.wt.as_ref().map(|w| w.path.clone()).unwrap_or_default();
        let token = self.github_token.as_deref();
        let mut req =
            match AgentRequest::for_role(&p.settings, &p.root, def, task, cwd, None, token) {
                Ok(r) => r,
                Err(e) => {
                    return AgentRun::not_started(def, ExitReason::SpawnFailed(e.to_string()));
                }
            };
        if let (agent::Backend::Scripted { program, .. }, Some(p)) =
            (&mut req.backend, &self.scripted_program)
        {
            *program = p.clone();
        }
        req.transcript = Some(
            self.journal_dir
                .join("transcripts")
                .join(format!("{slug}.jsonl")),
        );
        req.attempt = d.attempt;
        req.revision = d.task.revision.is_some();
        req.subject = Some(self.issue.to_string());
        req.keep_partial_on_budget |= d.keep_partial;
        // The checkpoint shows the run alive for as long as the agent works (its start is in the
        // group log already).
        let (checkpoint, root) = (self.checkpoint.clone(), p.root.clone());
        let heartbeat = async move {
            loop {
                tokio::time::sleep(HEARTBEAT).await;
                touch_checkpoint(&checkpoint, &root);
            }
        };
        // On a terminal the live line follows the agent's stream: tokens, tool calls, its tool.
        // So does the dashboard's picture, at most once a second.
        let (tx, mut pulses) = tokio::sync::watch::channel(agent::Pulse::default());
        if self.console.wants_pulse() || self.feed.is_some() {
            req.pulse = Some(tx);
        }
        let console = &mut self.console;
        let feed = self.feed.clone();
        let live = async move {
            let mut fed: Option<std::time::Instant> = None;
            while pulses.changed().await.is_ok() {
                let pulse = pulses.borrow_and_update().clone();
                console.pulse(&pulse);
                if let Some(feed) = feed
                    .as_ref()
                    .filter(|_| fed.is_none_or(|t| t.elapsed() >= PULSE_FEED))
                {
                    feed.pulsed(pulse.tokens);
                    fed = Some(std::time::Instant::now());
                }
            }
            std::future::pending::<()>().await
        };
        let run = tokio::select! {
            run = agent::run_agent(req, cancel.clone()) => run,
            () = heartbeat => unreachable!("the heartbeat never ends"),
            () = live => unreachable!("the live view waits for the run"),
        };
        self.look_at_worktree(Some(&format!("{} stage ({})", d.stage, d.agent)))
            .await;
        run
    }

    async fn fetch_feedback(
        &mut self,
        pr: PrNumber,
    ) -> Result<(crate::github::Feedback, Option<String>), RunError> {
        let read = self.feedback.take().filter(|(f, _)| f.number == pr.get());
        let (feedback, viewer) = match read {
            Some(read) => read,
            None => self.gh.pull_feedback(pr.get()).await?,
        };
        self.viewer = Some(viewer.clone());
        Ok((feedback, Some(viewer)))
    }

    async fn prepare_revision(
        &mut self,
        head: &str,
        ours: Option<&str>,
        cancel: &CancellationToken,
    ) -> Result<Result<(WorktreeInfo, Vec<String>), UserText>, RunError> {
        self.revising = true;
        let prepared = self.prepare_worktree(cancel).await?;
        let wt = self
            .worktree()
            .map_err(|e| WorkspaceError::Task(e.detail))?;
        let auth = self.push_auth.clone();
        let (head, ours) = (head.to_string(), ours.map(str::to_string));
        let checked = blocking(&self.cancel, move || {
            if !wt.fetch_own(&auth, ours.as_deref())? {
                return Ok(Err(UserText::ours(format!(
                    "{} no longer holds {}, the commit supervisor last pushed: its history was rewritten (force-pushed) by someone else, and supervisor does not revise over commits it did not make; restore the branch or revise by hand",
                    wt.branch,
                    ours.as_deref().unwrap_or_default()
                ))));
            }
            Ok(match wt.merge_own_remote()? {
                MergeOutcome::Conflicts { files } => Err(UserText::ours(format!(
                    "{} on GitHub ({head}) conflicts with supervisor's unpushed work on it in {}; merge by hand, then run again",
                    wt.branch,
                    files.join(", ")
                ))),
                _ => Ok(()),
            })
        })
        .await
        .map_err(|e| RunError::Workspace(WorkspaceError::Task(e.detail)))?;
        self.look_at_worktree(None).await;
        Ok(checked.map(|()| prepared))
    }

    async fn answer_thread(&mut self, pr: u64, a: &ThreadAnswer) -> Result<bool, EffectError> {
        if !a.replied {
            let body = a.marker.stamp(&report::comment_text(&a.text));
            self.gh.reply_in_thread(pr, a.reply_to, &body).await?;
        }
        if !a.resolve {
            return Ok(false);
        }
        self.gh.resolve_thread(&a.thread).await?;
        Ok(true)
    }

    async fn update_pull_body(
        &mut self,
        number: u64,
        request: &PrRequest,
    ) -> Result<(), EffectError> {
        let (_, body) = report::pull_request_text(request);
        Ok(self.gh.update_pull_body(number, &body).await?)
    }

    async fn run_gates(
        &mut self,
        hooks: &[Hook],
        issue: &IssueText,
        proof: Option<crate::verify::ProofInput>,
        finished: GateFeed,
        cancel: &CancellationToken,
    ) -> Vec<GateReport> {
        let Some(wt) = self.wt.clone() else {
            return Vec::new();
        };
        let mut ctx = self.gate_context(&wt, issue).await;
        ctx.proof = proof.map(Arc::new);
        // Each gate shows as it finishes, on the terminal and (through the engine) in the journal.
        let console = &mut self.console;
        console.gates_started(hooks.len());
        let tell = |i: usize, report: &GateReport| {
            console.gate_finished(report);
            let _ = finished.send((i, report.clone()));
        };
        tokio::select! {
            reports = gates::run_gates_with(hooks, &ctx, crate::verify::gate_for, tell) => reports,
            _ = cancel.cancelled() => Vec::new(),
        }
    }

    /// Show `progress` on the terminal, and in the tracking comment: the one an earlier run of the
    /// issue left, found by its marker on supervisor's own comments, or a new one. A revision keeps
    /// a tracking comment of its own on the pull request it revises: the issue's stays the run's.
    async fn track(&mut self, progress: &Progress) {
        self.console.show(progress);
        if let Some(feed) = &self.feed {
            feed.progressed(progress);
        }
        if !self.project.settings.tracking_comment {
            return;
        }
        if self.tracker.is_none() {
            let revising = crate::pipeline::revised_pull(&progress.run_id);
            let target = revising.unwrap_or(self.issue);
            let comments = self.own_comments_on(target).await.unwrap_or_default();
            let existing = comments.into_iter().rev().find(|c| {
                Marker::parse_all(&c.body).iter().any(|m| {
                    m.kind == MarkerKind::Tracking
                        && crate::pipeline::revised_pull(&m.run) == revising
                })
            });
            self.tracker = Some(Tracker::start(
                self.gh.clone(),
                target,
                existing.map(|c| c.id),
                workflow_run_link(),
            ));
        }
        let Some(tracker) = self.tracker.as_mut() else {
            return;
        };
        tracker.show(progress);
        if progress.end.is_some() {
            if let Some(tracker) = self.tracker.take() {
                tracker.finish().await;
            }
        }
    }
}

/// The GitHub Actions run doing this work, from the variables every job has.
fn workflow_run_link() -> crate::report::TrackingLinks {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let workflow_run = match (
        var("GITHUB_SERVER_URL"),
        var("GITHUB_REPOSITORY"),
        var("GITHUB_RUN_ID"),
    ) {
        (Some(server), Some(repo), Some(id))
            if var("GITHUB_ACTIONS").as_deref() == Some("true") =>
        {
            Some(format!(
                "{}/{repo}/actions/runs/{id}",
                server.trim_end_matches('/')
            ))
        }
        _ => None,
    };
    crate::report::TrackingLinks { workflow_run }
}
