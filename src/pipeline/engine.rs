//! The pipeline loop: Phase 0 (admission), Phase 1 (stages), Phase 2 (pull request, cleanup) and
//! Phase 3 (summary). All I/O lives here; every decision comes from `plan`/`decide`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::sync::watch;

use super::checks::GitHubChecks;
use super::context::{IssueContext, Return, TaskInput, TrustedNote, build_task, has_heading};
use super::decide::{
    DecideInput, Decision, RunState, Step, StopReason, Transition, TransitionKind, decide, plan,
};
use super::journal::{Event, Journal, JournalError, Replay};
use super::project::Project;
use crate::agent::{
    self, AgentRequest, AgentRun, ExitReason, Outcome, ProtocolError, parse_outcome,
};
use crate::config::{ConfigError, Stage};
use crate::gates::{self, CiContext, CiSource, GateContext, GateReport, GateStatus, IssueText};
use crate::github::{
    BoardItem, BoardRef, Comment, CommentEdit, Editors, GitHub, GitHubError, Issue, IssueState,
    Marker, NewPullRequest,
};
use crate::report::{self, AgentLine, GateRound, RunEnd, RunFacts, RunSummary};
use crate::workspace::{
    self, Checkpoint, MergeOutcome, PushAuth, WorkspaceConfig, WorkspaceError, Worktree,
};

/// What `supervisor run` was asked to do.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    pub issue: u64,
    /// Keep the worktree when PR creation fails.
    pub debug: bool,
    /// Read, plan and print; write nothing.
    pub dry_run: bool,
    /// Add the issue to the board (Backlog) when it is not on it, instead of stopping.
    pub add_to_board: bool,
}

/// What the engine talks to.
pub struct Services {
    pub github: GitHub,
    pub push_auth: PushAuth,
    /// Passed to agents only when the settings opt in.
    pub github_token: Option<String>,
    /// Program the scripted backend runs (the supervisor binary); `None` = the current executable.
    pub scripted_program: Option<PathBuf>,
    /// Flips to true on SIGINT/SIGTERM.
    pub cancel: watch::Receiver<bool>,
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
}

impl RunError {
    /// Whether running the same command again continues the run.
    pub fn is_resumable(&self) -> bool {
        match self {
            RunError::GitHub(e) => e.is_resumable() || e.is_transient(),
            RunError::Config(_) | RunError::Busy { .. } => false,
            _ => true,
        }
    }

    pub fn exit_code(&self) -> u8 {
        match self {
            RunError::Config(_) => crate::cli::EXIT_USAGE,
            RunError::GitHub(_) => crate::cli::EXIT_GITHUB,
            _ => crate::cli::EXIT_STOPPED,
        }
    }
}

/// The exit code for a finished run.
pub fn exit_code(end: &RunEnd) -> u8 {
    match end {
        RunEnd::PullRequest { .. }
        | RunEnd::AlreadyDone
        | RunEnd::ClosedAsResolved
        | RunEnd::DryRun { .. }
        | RunEnd::Interrupted => crate::cli::EXIT_OK,
        RunEnd::Stopped { .. } | RunEnd::Refused { .. } => crate::cli::EXIT_STOPPED,
    }
}

/// A new run id: `<issue>-<UTC timestamp>`.
fn new_run_id(issue: u64) -> String {
    format!("{issue}-{}", chrono::Utc::now().format("%Y%m%dT%H%M%S%3fZ"))
}

struct Engine<'p> {
    p: &'p Project,
    gh: GitHub,
    svc_push: PushAuth,
    github_token: Option<String>,
    scripted_program: Option<PathBuf>,
    cancel: watch::Receiver<bool>,
    opts: RunOptions,
    run_id: String,
    journal: Journal,
    replay: Replay,
    issue: Issue,
    comments: Vec<Comment>,
    editors: Editors,
    board: BoardItem,
    column: String,
    state: RunState,
    attempts: BTreeMap<String, u32>,
    ws: WorkspaceConfig,
    wt: Option<Worktree>,
    checkpoint: Option<Checkpoint>,
    agents: Vec<AgentLine>,
    gate_rounds: Vec<GateRound>,
    warnings: Vec<String>,
    last_gates: Option<Vec<GateReport>>,
    last_score: Option<crate::audit::AuditScore>,
    transitions: Vec<Transition>,
    started: Instant,
    pr_failed: bool,
    /// Gate state for this run (warm language servers, incremental caches); shut down when the run ends.
    gate_session: gates::GateSession,
}

/// Run the pipeline for one issue.
pub async fn run_issue(
    p: &Project,
    svc: Services,
    opts: RunOptions,
) -> Result<RunSummary, RunError> {
    let started = Instant::now();
    let gh = svc.github.clone();
    let ws = WorkspaceConfig::from_settings(&p.root, &p.settings);

    // Checkpoint: resume a fresh one, prune a stale one, refuse a live one.
    let mut resumed = false;
    let mut run_id = new_run_id(opts.issue);
    if !opts.dry_run {
        if let Some(cp) = Checkpoint::load(&p.root, opts.issue)? {
            if cp.pid != std::process::id()
                && cp.process_alive()
                && !cp.is_stale(chrono::Utc::now())
            {
                return Err(RunError::Busy {
                    pid: cp.pid,
                    issue: opts.issue,
                });
            }
            if cp.is_stale(chrono::Utc::now()) {
                workspace::prune_stale(&ws, &cp)?;
                Checkpoint::remove(&p.root, opts.issue)?;
            } else {
                run_id = cp.run_id.clone();
                resumed = true;
            }
        }
    }
    let mut journal = if opts.dry_run {
        Journal::in_memory()
    } else {
        Journal::open(&p.root, &run_id)?
    };
    let replay = journal.replay();
    journal.record(Event::RunStarted {
        issue: opts.issue,
        repo: p.settings.repo.to_string(),
        resumed,
        version: env!("CARGO_PKG_VERSION").to_string(),
    })?;

    // Phase 0: the issue, trust, the board, blockers.
    let issue = gh.get_issue(opts.issue).await?;
    // Refusals before anything is written: journaled, summarised, nothing posted.
    let refuse =
        |reason: String, journal: &mut Journal, title: &str| -> Result<RunSummary, RunError> {
            journal.record(Event::Stopped {
                reason: reason.clone(),
            })?;
            Ok(RunSummary {
                run_id: run_id.clone(),
                repo: p.settings.repo.to_string(),
                issue: opts.issue,
                title: title.to_string(),
                end: RunEnd::Refused { reason },
                agents: Vec::new(),
                transitions: Vec::new(),
                gate_rounds: Vec::new(),
                rejections: 0,
                gate_bounces: 0,
                score: None,
                warnings: Vec::new(),
                journal: journal.path().display().to_string(),
                duration_ms: started.elapsed().as_millis() as u64,
            })
        };
    if !p.settings.is_codeowner(&issue.author) {
        let reason = format!(
            "issue #{} was opened by @{}, who is not a codeowner ({}); nothing was posted",
            issue.number,
            issue.author,
            p.settings.codeowners.join(", ")
        );
        return refuse(reason, &mut journal, &issue.title);
    }
    if issue.state == IssueState::Closed {
        let reason = format!("issue #{} is closed", issue.number);
        return refuse(reason, &mut journal, &issue.title);
    }
    let board_ref = BoardRef {
        owner: p.settings.board_owner().to_string(),
        number: p.settings.project_number,
        status_field: p.settings.status_field.clone(),
    };
    let board = match gh.board_item(&board_ref, issue.number).await? {
        Some(item) => item,
        None if opts.add_to_board && !opts.dry_run => gh.add_to_board(&board_ref, &issue).await?,
        None => {
            return Err(RunError::GitHub(GitHubError::NotOnBoard {
                issue: issue.number,
                project: p.settings.project_number,
            }));
        }
    };
    let blockers = gh.open_blockers(&issue).await?;
    if !blockers.is_empty() {
        let names = blockers
            .iter()
            .map(|b| format!("#{} ({})", b.number, b.title))
            .collect::<Vec<_>>()
            .join(", ");
        let reason = format!("blocked by open {names}; run again when they are closed");
        return refuse(reason, &mut journal, &issue.title);
    }
    let comments = gh.list_comments(issue.number).await?;
    let editors = gh.issue_editors(issue.number).await?;
    if let Some(editor) = editors
        .issue
        .as_deref()
        .filter(|e| !p.settings.is_codeowner(e))
    {
        let reason = format!(
            "the description of issue #{} was last edited by @{editor}, who is not a codeowner; \
             a codeowner must review it (and edit it, so the edit is theirs) before it runs; nothing was posted",
            issue.number
        );
        return refuse(reason, &mut journal, &issue.title);
    }
    let column = board
        .column
        .clone()
        .unwrap_or_else(|| p.workflow.backlog().status.clone());
    journal.record(Event::Admitted {
        column: column.clone(),
    })?;
    let title = issue.title.clone();

    let last_gates: Option<Vec<GateReport>> = replay
        .last_gates
        .clone()
        .and_then(|v| serde_json::from_value(v).ok());
    let gate_session = gates::GateSession::new(
        Some(&p.root),
        &p.root.join(".supervisor").join("gates"),
        gates::ToolEnv::for_settings(&p.settings, svc.github_token.as_deref()),
    );
    let mut engine = Engine {
        p,
        gh,
        svc_push: svc.push_auth,
        github_token: svc.github_token,
        scripted_program: svc.scripted_program,
        cancel: svc.cancel,
        opts: opts.clone(),
        run_id: run_id.clone(),
        journal,
        state: replay.state.clone(),
        attempts: replay.attempts.clone(),
        transitions: replay.transitions.clone(),
        replay,
        issue,
        comments,
        editors,
        board,
        column,
        ws,
        wt: None,
        checkpoint: None,
        agents: Vec::new(),
        gate_rounds: Vec::new(),
        warnings: Vec::new(),
        last_gates,
        last_score: None,
        started,
        pr_failed: false,
        gate_session,
    };
    if p.workflow
        .stage_for_column(&engine.column)
        .is_some_and(|s| s.built_in == Some(crate::config::BuiltIn::Done))
    {
        engine.journal.record(Event::Finished {
            outcome: "already done".into(),
        })?;
        return Ok(engine.summary(RunEnd::AlreadyDone, &title));
    }
    engine.recover_unapplied()?;
    if opts.dry_run {
        let plan = engine.dry_run_plan();
        return Ok(engine.summary(RunEnd::DryRun { plan }, &title));
    }

    let end = engine.run_stages().await;
    engine.gate_session.shutdown().await;
    let end = match end {
        Ok(end) => end,
        Err(e) => {
            let _ = engine.journal.record(Event::Stopped {
                reason: e.to_string(),
            });
            // Resumable: keep the checkpoint and worktree so a rerun continues.
            return Err(e);
        }
    };
    engine.finish(&end)?;
    Ok(engine.summary(end, &title))
}

impl Engine<'_> {
    fn summary(&self, end: RunEnd, title: &str) -> RunSummary {
        RunSummary {
            run_id: self.run_id.clone(),
            repo: self.p.settings.repo.to_string(),
            issue: self.opts.issue,
            title: title.to_string(),
            end,
            agents: self.agents.clone(),
            transitions: self.transitions.clone(),
            gate_rounds: self.gate_rounds.clone(),
            rejections: self.state.total_rejections(),
            gate_bounces: self.state.gate_bounces,
            score: self.last_score.clone(),
            warnings: self.warnings.clone(),
            journal: self.journal.path().display().to_string(),
            duration_ms: self.started.elapsed().as_millis() as u64,
        }
    }

    /// A decision journaled before a crash whose card move reached GitHub but was not recorded as
    /// applied: the board shows its target, so it took effect.
    fn recover_unapplied(&mut self) -> Result<(), RunError> {
        let entries = self.journal.entries();
        let last_decision = entries
            .iter()
            .rposition(|e| matches!(e.event, Event::Decision { .. }));
        let last_applied = entries
            .iter()
            .rposition(|e| matches!(e.event, Event::Applied { .. }));
        let Some(d) = last_decision.filter(|d| last_applied.is_none_or(|a| a < *d)) else {
            return Ok(());
        };
        let Event::Decision { transition } = &entries[d].event else {
            return Ok(());
        };
        let t = transition.clone();
        let here = self
            .p
            .workflow
            .stage_for_column(&self.column)
            .map(|s| s.status.clone());
        if t.to != t.from && here.as_deref() == Some(t.to.as_str()) {
            self.journal.record(Event::Applied {
                transition: t.clone(),
            })?;
            self.state.apply(&t);
            self.transitions.push(t);
            self.replay.pending_outcome = None;
        }
        Ok(())
    }

    fn warn(&mut self, message: String) {
        tracing::warn!("{message}");
        let _ = self.journal.record(Event::Warning {
            message: message.clone(),
        });
        self.warnings.push(message);
    }

    fn dry_run_plan(&self) -> Vec<String> {
        let wf = &self.p.workflow;
        let mut steps = vec![format!("card is in {}", self.column)];
        let start = wf
            .stage_for_column(&self.column)
            .and_then(|s| wf.index(&s.status))
            .unwrap_or(0);
        for st in &wf.stages[start..] {
            match (&st.agent, st.built_in) {
                (_, Some(crate::config::BuiltIn::Backlog)) => steps.push(format!(
                    "move {} → {}",
                    st.status,
                    st.forward.as_deref().unwrap_or("?")
                )),
                (_, Some(crate::config::BuiltIn::Done)) => {
                    steps.push("open the pull request and move the card to Done".into())
                }
                (Some(agent), None) => {
                    let def = self.p.roles.get(agent);
                    let backend = def
                        .map(|d| d.backend_name(&self.p.settings).to_string())
                        .unwrap_or_default();
                    let mut s = format!("{}: run {agent} ({backend})", st.status);
                    if st.commits {
                        s.push_str(", commit and push");
                    } else {
                        s.push_str(", post its comment");
                    }
                    if !st.hooks.is_empty() {
                        s.push_str(&format!(
                            ", then gates: {}",
                            st.hooks
                                .iter()
                                .map(|h| h.name.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ));
                    }
                    steps.push(s);
                }
                _ => {}
            }
        }
        steps.push(format!(
            "worktree {} on branch {}{}",
            self.ws
                .worktree_root
                .join(format!("{}{}", self.ws.branch_prefix, self.opts.issue))
                .display(),
            self.ws.branch_prefix,
            self.opts.issue
        ));
        steps
    }

    fn marker(&self, stage: &str, attempt: u32, kind: &str) -> Marker {
        Marker {
            run: self.run_id.clone(),
            stage: stage.to_string(),
            attempt,
            kind: kind.to_string(),
        }
    }

    /// Comments that may reach an agent: by codeowners, or posted by supervisor (marker present and
    /// written by the same account that posts our comments).
    fn trusted_notes(&self) -> Vec<TrustedNote> {
        let ours = self.created_ids();
        let owner = |login: &str| self.p.settings.is_codeowner(login);
        self.comments
            .iter()
            .filter_map(|c| {
                // Edited text is trusted only when the last editor is a codeowner; comments too old
                // for the editor check are trusted only when this run wrote them.
                let edited_ok = match self.editors.comment(c.id) {
                    CommentEdit::Unedited => true,
                    CommentEdit::EditedBy(editor) => owner(editor),
                    CommentEdit::Unknown => ours.contains(&c.id),
                };
                if !edited_ok {
                    return None;
                }
                let markers = Marker::parse_all(&c.body);
                if let Some(m) = markers
                    .first()
                    .filter(|_| ours.contains(&c.id) || owner(&c.author))
                {
                    return Some(TrustedNote {
                        stage: Some(m.stage.clone()),
                        kind: m.kind.clone(),
                        author: c.author.clone(),
                        body: c.body.clone(),
                    });
                }
                owner(&c.author).then(|| TrustedNote {
                    stage: None,
                    kind: "human".into(),
                    author: c.author.clone(),
                    body: c.body.clone(),
                })
            })
            .collect()
    }

    /// Ids of the comments this run posted (a marker alone proves nothing: anyone can type one).
    fn created_ids(&self) -> Vec<u64> {
        self.journal
            .entries()
            .iter()
            .filter_map(|e| match &e.event {
                Event::GitHubWrite { comment_id, .. } => *comment_id,
                _ => None,
            })
            .collect()
    }

    fn has_trusted_heading(&self, heading: &str) -> bool {
        has_heading(&self.issue.body, heading)
            || self
                .trusted_notes()
                .iter()
                .any(|n| has_heading(&n.body, heading))
    }

    async fn ensure_worktree(&mut self) -> Result<(), RunError> {
        if self.wt.is_some() {
            return Ok(());
        }
        let started = Instant::now();
        let wt = workspace::ensure_worktree_with(&self.ws, self.opts.issue, &self.svc_push)?;
        let mut warnings = Vec::new();
        if wt.origin != workspace::Reuse::ExistingWorktree {
            let report = workspace::setup(&self.ws, &wt).await;
            warnings = report.warnings.clone();
            eprintln!(
                "worktree {} ready in {:.2} s (time to first agent; dependencies: {})",
                wt.path.display(),
                started.elapsed().as_secs_f64(),
                match report.dependencies {
                    Some(workspace::Dependencies::Cloned) => "the main checkout's, cloned",
                    Some(workspace::Dependencies::InstalledOffline) => "npm ci --prefer-offline",
                    Some(workspace::Dependencies::SetupCommands) => "npm ci",
                    None => "left to the setup commands",
                }
            );
        }
        for w in &warnings {
            self.warn(format!("setup: {w}"));
        }
        self.journal.record(Event::WorktreeReady {
            path: wt.path.display().to_string(),
            branch: wt.branch.clone(),
            reused: format!("{:?}", wt.origin),
            warnings,
        })?;
        let checkpoint = Checkpoint::new(self.run_id.clone(), self.opts.issue, &wt);
        checkpoint.save(&self.p.root)?;
        self.checkpoint = Some(checkpoint);
        self.wt = Some(wt);
        Ok(())
    }

    fn cancelled(&self) -> bool {
        *self.cancel.borrow()
    }

    /// Phase 1.
    async fn run_stages(&mut self) -> Result<RunEnd, RunError> {
        self.ensure_worktree().await?;
        // A decision whose card move happened but was not journaled as applied.
        loop {
            if self.cancelled() {
                return Ok(RunEnd::Interrupted);
            }
            let wf = &self.p.workflow;
            let notes_have = |h: &str| self.has_trusted_heading(h);
            let step = plan(
                wf,
                &self.state,
                &self.column,
                self.p.settings.enable_experimental_features,
                &notes_have,
            );
            let step = match step {
                Ok(s) => s,
                Err(e) => return Ok(self.stop_without_comment(e.to_string())),
            };
            match step {
                Step::Finish => return Ok(RunEnd::AlreadyDone),
                Step::Stop(reason) => return self.stop(reason.to_string()).await,
                Step::Move(t) => {
                    self.apply(t).await?;
                    continue;
                }
                Step::RunAgent => {}
            }
            let stage = wf
                .stage_for_column(&self.column)
                .expect("plan checked the column")
                .clone();
            match self.work_stage(&stage).await? {
                Some(end) => return Ok(end),
                None => continue,
            }
        }
    }

    fn stop_without_comment(&mut self, reason: String) -> RunEnd {
        let _ = self.journal.record(Event::Stopped {
            reason: reason.clone(),
        });
        RunEnd::Stopped {
            stage: self.column.clone(),
            reason,
        }
    }

    /// Stop in the current column with a comment saying why.
    async fn stop(&mut self, reason: String) -> Result<RunEnd, RunError> {
        let stage = self.column.clone();
        let body = report::stopped_comment(
            &stage,
            &reason,
            "The card stays in its column. Fix the cause, then run supervisor again: it resumes from the board.",
        );
        let attempt = self.attempts.get(&stage).copied().unwrap_or(0);
        let marker = self.marker(&stage, attempt, "stopped");
        self.post(&marker, &body).await;
        self.journal.record(Event::Stopped {
            reason: reason.clone(),
        })?;
        Ok(RunEnd::Stopped { stage, reason })
    }

    /// Post a comment once; failures are warnings (the pipeline continues, as the spec says).
    async fn post(&mut self, marker: &Marker, body: &str) -> Option<Comment> {
        match self
            .gh
            .post_once(self.opts.issue, marker, body, Some(&self.comments))
            .await
        {
            Ok(posted) => {
                let _ = self.journal.record(Event::GitHubWrite {
                    what: format!("comment {}", marker.kind),
                    marker: Some(marker.render()),
                    url: Some(posted.comment.html_url.clone()),
                    comment_id: Some(posted.comment.id),
                    created: posted.created,
                });
                if posted.created {
                    self.comments.push(posted.comment.clone());
                }
                Some(posted.comment)
            }
            Err(e) => {
                self.warn(format!("could not post the {} comment: {e}", marker.kind));
                None
            }
        }
    }

    /// Move the card (unless the transition stays in place), record and apply the transition.
    async fn apply(&mut self, t: Transition) -> Result<(), RunError> {
        self.journal.record(Event::Decision {
            transition: t.clone(),
        })?;
        if t.to != t.from {
            let column = self
                .p
                .workflow
                .stage(&t.to)
                .map(|s| s.status.clone())
                .unwrap_or_else(|| t.to.clone());
            self.gh.move_card(&self.board, &column).await?;
            self.journal.record(Event::GitHubWrite {
                what: format!("move card {} → {}", t.from, t.to),
                marker: None,
                url: None,
                comment_id: None,
                created: true,
            })?;
        }
        self.journal.record(Event::Applied {
            transition: t.clone(),
        })?;
        self.state.apply(&t);
        self.column = t.to.clone();
        self.transitions.push(t);
        Ok(())
    }

    /// Run (or, on resume, recover) one stage attempt and act on its outcome. `Some(end)` ends the run.
    async fn work_stage(&mut self, stage: &Stage) -> Result<Option<RunEnd>, RunError> {
        let agent_name = stage.agent.clone().expect("agent stages name an agent");
        let Some(def) = self.p.roles.get(&agent_name).cloned() else {
            return self
                .stop(format!("agent `{agent_name}` has no definition"))
                .await
                .map(Some);
        };
        // Resume: an outcome recorded for the latest attempt of this stage is used, not re-earned.
        let recovered = self
            .replay
            .pending_outcome
            .take()
            .filter(|(s, a, _)| {
                *s == stage.status && Some(*a) == self.attempts.get(&stage.status).copied()
            })
            .and_then(|(_, a, v)| serde_json::from_value::<Outcome>(v).ok().map(|o| (a, o)));
        let (attempt, outcome, facts) = match recovered {
            Some((attempt, outcome)) => (attempt, outcome, None),
            None => {
                let attempt = self.attempts.get(&stage.status).copied().unwrap_or(0) + 1;
                self.attempts.insert(stage.status.clone(), attempt);
                if let Some(cp) = self.checkpoint.as_mut() {
                    cp.touch(&self.p.root)?;
                }
                self.journal.record(Event::StageStarted {
                    stage: stage.status.clone(),
                    agent: agent_name.clone(),
                    attempt,
                })?;
                let run = match self.dispatch(stage, &def, attempt).await? {
                    Ok(run) => run,
                    Err(reason) => return self.stop(reason).await.map(Some),
                };
                let facts = RunFacts {
                    agent: agent_name.clone(),
                    attempt,
                    duration_ms: run.duration.as_millis() as u64,
                    tokens: run.usage.total,
                    tool_calls: run.tool_calls,
                    model: run.model.clone(),
                };
                let outcome = match self.outcome_of(stage, &agent_name, &run) {
                    Ok(o) => o,
                    Err(Halt::Interrupted) => return Ok(Some(RunEnd::Interrupted)),
                    Err(Halt::Stop(reason)) => return self.stop(reason).await.map(Some),
                };
                self.journal.record(Event::Outcome {
                    stage: stage.status.clone(),
                    attempt,
                    outcome: serde_json::to_value(&outcome).expect("outcomes serialise"),
                })?;
                (attempt, outcome, Some(facts))
            }
        };

        // After the agent: commit + push, or post its comment.
        if stage.commits {
            let wt = self.wt.as_ref().expect("worktree exists");
            let message = format!(
                "#{}: {} ({} attempt {attempt})",
                self.issue.number,
                self.issue.title.trim(),
                agent_name
            );
            let sha = match wt.commit_all(&message) {
                Ok(sha) => sha,
                Err(e) => {
                    return self
                        .stop(format!("committing the developer's work failed: {e}"))
                        .await
                        .map(Some);
                }
            };
            self.journal.record(Event::Committed {
                stage: stage.status.clone(),
                attempt,
                sha: sha.clone(),
            })?;
            // Push whenever the branch has commits: idempotent, and it also delivers a commit that a
            // crash or a failed push left behind.
            let pushed = match sha {
                Some(sha) => Some(sha),
                None if wt.commits_ahead()? > 0 => Some(wt.head_sha()?),
                None => None,
            };
            if let Some(sha) = pushed {
                if let Err(e) = wt.push(&self.svc_push) {
                    return self
                        .stop(format!("pushing {} failed: {e}", wt.branch))
                        .await
                        .map(Some);
                }
                self.journal.record(Event::Pushed { sha })?;
            }
        } else {
            let body = outcome
                .comment_body
                .clone()
                .or_else(|| outcome.summary.clone())
                .unwrap_or_else(|| format!("{agent_name} completed without a comment."));
            let facts = facts.clone().unwrap_or(RunFacts {
                agent: agent_name.clone(),
                attempt,
                ..RunFacts::default()
            });
            let note = outcome
                .notes
                .iter()
                .find(|n| n.starts_with("partial"))
                .map(String::as_str);
            let body = if stage.review && !outcome.findings.is_empty() {
                format!(
                    "{}\n\n### Findings\n\n{}",
                    body.trim_end(),
                    report::findings_list(&outcome.findings)
                )
            } else {
                body
            };
            let text = report::stage_comment(&body, &facts, note);
            let marker = self.marker(&stage.status, attempt, "stage");
            self.post(&marker, &text).await;
        }

        // Decide; run the gates when the move has hooks.
        let mut gate_reports: Option<Vec<GateReport>> = None;
        loop {
            let input = DecideInput {
                workflow: &self.p.workflow,
                state: &self.state,
                column: &stage.status,
                outcome: &outcome,
                gates: gate_reports.as_deref(),
                max_rejections: self.p.settings.max_rejections,
                threshold: self.p.settings.audit_score_threshold,
                experimental: self.p.settings.enable_experimental_features,
            };
            let decision = match decide(input) {
                Ok(d) => d,
                Err(e) => return self.stop(e.to_string()).await.map(Some),
            };
            match decision {
                Decision::RunGates { hooks, .. } => {
                    if stage.commits {
                        let ahead = self.wt.as_ref().expect("worktree exists").commits_ahead()?;
                        if ahead == 0 {
                            return self.close_as_resolved().await.map(Some);
                        }
                    }
                    let reports = self.run_gates(stage, attempt, &hooks).await?;
                    gate_reports = Some(reports);
                }
                Decision::Stop(reason) => {
                    if let StopReason::MaxRejections { last, .. } = &reason {
                        self.note_rejection(stage, attempt, last, &outcome).await;
                    }
                    return self.stop(reason.to_string()).await.map(Some);
                }
                Decision::Move(t) => {
                    if let Some(score) = &t.score {
                        self.last_score = Some(score.clone());
                    }
                    match t.kind {
                        TransitionKind::GateBounce => {
                            let reports = gate_reports.clone().unwrap_or_default();
                            let note = report::combined_gate_note(&reports);
                            let marker = self.marker(&stage.status, attempt, "gates");
                            self.post(&marker, &note).await;
                            if gates::dead_code_requires_uncommit(&reports) {
                                let wt = self.wt.as_ref().expect("worktree exists");
                                if let Err(e) = wt.undo_last_commit() {
                                    self.warn(format!("could not undo the last commit after the dead-code gate: {e}"));
                                }
                            }
                        }
                        TransitionKind::ScoreGate | TransitionKind::Rejection => {
                            self.note_rejection(stage, attempt, &t, &outcome).await;
                        }
                        _ => {}
                    }
                    let to_done = self
                        .p
                        .workflow
                        .stage(&t.to)
                        .is_some_and(|s| s.built_in == Some(crate::config::BuiltIn::Done));
                    if stage.review && to_done {
                        let end = self.open_pull_request(&outcome, attempt).await?;
                        if let RunEnd::PullRequest { .. } = end {
                            self.apply(t).await?;
                        }
                        return Ok(Some(end));
                    }
                    self.apply(t).await?;
                    return Ok(None);
                }
            }
        }
    }

    /// The score-gate comment (rejections post the auditor's own comment already).
    async fn note_rejection(
        &mut self,
        stage: &Stage,
        attempt: u32,
        t: &Transition,
        outcome: &Outcome,
    ) {
        if t.kind == TransitionKind::ScoreGate {
            if let Some(score) = &t.score {
                let body = report::score_gate_comment(score, &outcome.findings);
                let marker = self.marker(&stage.status, attempt, "score-gate");
                self.post(&marker, &body).await;
            }
        }
    }

    async fn dispatch(
        &mut self,
        stage: &Stage,
        def: &crate::agent::AgentDefinition,
        attempt: u32,
    ) -> Result<Result<AgentRun, String>, RunError> {
        let wt = self.wt.as_ref().expect("worktree exists");
        let returned = self.return_context(stage);
        let gate_context = stage.review.then(|| self.gate_context()).flatten();
        let notes = self.trusted_notes();
        let issue_ctx = IssueContext {
            number: self.issue.number,
            title: self.issue.title.clone(),
            body: self.issue.body.clone(),
            author: self.issue.author.clone(),
            url: self.issue.html_url.clone(),
        };
        let task = build_task(&TaskInput {
            workflow: &self.p.workflow,
            stage,
            issue: &issue_ctx,
            notes: &notes,
            attempt,
            returned: returned.as_ref(),
            gate_context: gate_context.as_deref(),
            worktree: Some((&wt.branch, &wt.base)),
        });
        let prompts = self.journal.dir().join("prompts");
        let _ = std::fs::create_dir_all(&prompts);
        let slug = format!("{}-{attempt}", stage.status);
        let _ = std::fs::write(prompts.join(format!("{slug}.md")), &task);
        let backend_name = def.backend_name(&self.p.settings).to_string();
        let token = self.github_token.clone();
        let mut req = match AgentRequest::for_role(
            &self.p.settings,
            &self.p.root,
            def,
            task,
            wt.path.clone(),
            None,
            token.as_deref(),
        ) {
            Ok(r) => r,
            Err(e) => return Ok(Err(format!("{} cannot run: {e}", def.name))),
        };
        if let (agent::Backend::Scripted { program, .. }, Some(p)) =
            (&mut req.backend, &self.scripted_program)
        {
            *program = p.clone();
        }
        req.transcript = Some(
            self.journal
                .dir()
                .join("transcripts")
                .join(format!("{slug}.jsonl")),
        );
        req.attempt = attempt;
        req.keep_partial_on_budget |= stage.skip_when_heading.is_some();
        let run = agent::run_agent(req, self.cancel.clone()).await;
        self.journal.record(Event::AgentFinished {
            stage: stage.status.clone(),
            attempt,
            stats: json!({
                "agent": def.name,
                "backend": backend_name,
                "durationMs": run.duration.as_millis() as u64,
                "usage": run.usage,
                "toolCalls": run.tool_calls,
                "model": run.model,
                "exit": run.exit,
            }),
        })?;
        self.agents.push(AgentLine {
            stage: stage.status.clone(),
            agent: def.name.clone(),
            attempt,
            backend: backend_name,
            duration_ms: run.duration.as_millis() as u64,
            tokens: run.usage.total,
            cost_usd: run.usage.cost_usd,
            tool_calls: run.tool_calls,
            model: run.model.clone(),
            exit: exit_text(&run.exit),
        });
        Ok(Ok(run))
    }

    /// The outcome of an agent run, or why the run ends without one.
    fn outcome_of(&self, stage: &Stage, agent: &str, run: &AgentRun) -> Result<Outcome, Halt> {
        match &run.exit {
            ExitReason::Completed => {}
            ExitReason::Interrupted => return Err(Halt::Interrupted),
            ExitReason::TokenBudget { .. } if run.degraded() => {
                // Graceful degradation: keep the partial findings and go on.
                let mut o = parse_outcome(&run.final_text, stage)
                    .unwrap_or_else(|_| partial_outcome(&run.final_text, stage));
                o.notes.push(format!(
                    "partial findings: {agent} stopped when it {}",
                    exit_text(&run.exit)
                ));
                return Ok(o);
            }
            other => return Err(Halt::Stop(format!("{agent} {}", exit_text(other)))),
        }
        parse_outcome(&run.final_text, stage).map_err(|e| match e {
            ProtocolError::Empty | ProtocolError::Refusal { .. } => {
                Halt::Stop(format!("{agent}: {e}"))
            }
            e => Halt::Stop(format!("{agent} produced no usable outcome: {e}")),
        })
    }

    /// Why work is back in `stage`: the last applied transition into it, if it came from elsewhere.
    fn return_context(&self, stage: &Stage) -> Option<Return> {
        let t = self
            .transitions
            .iter()
            .rev()
            .find(|t| t.to == stage.status)?;
        let latest = |kind: &str, from: &str| {
            self.trusted_notes()
                .into_iter()
                .rev()
                .find(|n| n.kind == kind && n.stage.as_deref() == Some(from))
                .map(|n| n.body)
        };
        match t.kind {
            TransitionKind::GateBounce => {
                latest("gates", &t.from).map(|note| Return::GatesBlocked { note })
            }
            TransitionKind::ScoreGate => {
                latest("score-gate", &t.from).map(|note| Return::ScoreGate { note })
            }
            TransitionKind::Rejection => latest("stage", &t.from).map(|note| Return::Rejected {
                from: t.from.clone(),
                note,
            }),
            TransitionKind::LoopBack => latest("stage", &t.from).map(|note| Return::LoopBack {
                from: t.from.clone(),
                note,
            }),
            _ => None,
        }
    }

    fn gate_context(&self) -> Option<String> {
        let reports = self.last_gates.as_ref()?;
        Some(format!(
            "{}\n\n{}",
            report::gate_summary_table(reports),
            report::gate_findings_for_auditor(reports)
        ))
    }

    async fn run_gates(
        &mut self,
        stage: &Stage,
        attempt: u32,
        hooks: &[crate::config::Hook],
    ) -> Result<Vec<GateReport>, RunError> {
        let wt = self.wt.as_ref().expect("worktree exists").clone();
        let changes = match gates::ChangeSet::compute(&wt.path, &self.ws.default_branch) {
            Ok(c) => c,
            Err(e) => {
                self.warn(format!("could not compute the change set: {e}"));
                gates::ChangeSet {
                    base: self.ws.default_branch.clone(),
                    merge_base: None,
                    files: Vec::new(),
                    commits: Vec::new(),
                }
            }
        };
        let ci = (self.p.settings.ci_gating_timeout_sec > 0).then(|| CiContext {
            head_sha: wt.head_sha().unwrap_or_default(),
            timeout: Duration::from_secs(self.p.settings.ci_gating_timeout_sec),
            interval: Duration::from_secs(self.p.settings.gates.ci_poll_interval_sec),
            source: Arc::new(GitHubChecks::new(
                self.gh.clone(),
                wt.clone(),
                self.svc_push.clone(),
            )) as Arc<dyn CiSource>,
        });
        let ctx = GateContext {
            dir: wt.path.clone(),
            changes,
            issue: Some(IssueText {
                number: self.issue.number,
                title: self.issue.title.clone(),
                body: self.issue.body.clone(),
            }),
            settings: self.p.settings.gates.clone(),
            ci,
            state_dir: self.p.root.join(".supervisor").join("gates"),
            search_path: None,
            session: self.gate_session.clone(),
        };
        let reports = gates::run_gates(hooks, &ctx).await;
        self.journal.record(Event::GatesFinished {
            stage: stage.status.clone(),
            attempt,
            reports: serde_json::to_value(&reports).expect("reports serialise"),
        })?;
        self.gate_rounds.push(GateRound {
            stage: stage.status.clone(),
            attempt,
            blocked: reports.iter().any(GateReport::blocks),
            failing: reports
                .iter()
                .filter(|r| r.status == GateStatus::Fail)
                .map(|r| r.gate.clone())
                .collect(),
            not_run: reports
                .iter()
                .filter(|r| matches!(r.status, GateStatus::NotRun(_)))
                .map(|r| r.gate.clone())
                .collect(),
            warnings: reports
                .iter()
                .filter(|r| r.status == GateStatus::Warn)
                .map(|r| r.gate.clone())
                .collect(),
        });
        self.last_gates = Some(reports.clone());
        Ok(reports)
    }

    async fn close_as_resolved(&mut self) -> Result<RunEnd, RunError> {
        let wt = self.wt.as_ref().expect("worktree exists");
        let body = report::already_resolved_comment(&wt.branch, &wt.base);
        let attempt = self.attempts.get(&self.column).copied().unwrap_or(0);
        let marker = self.marker(&self.column.clone(), attempt, "resolved");
        self.gh
            .close_issue(self.opts.issue, Some((&marker, &body)))
            .await?;
        self.journal.record(Event::GitHubWrite {
            what: "close issue as already resolved".into(),
            marker: Some(marker.render()),
            url: None,
            comment_id: None,
            created: true,
        })?;
        let done = self.p.workflow.done().status.clone();
        let t = Transition {
            from: self.column.clone(),
            to: done,
            kind: TransitionKind::Forward,
            reason: "no commits on the branch: closed as already resolved".into(),
            score: None,
        };
        self.apply(t).await?;
        Ok(RunEnd::ClosedAsResolved)
    }

    /// Phase 2: the PR, its mergeability, a merge of the base when it conflicts.
    async fn open_pull_request(
        &mut self,
        outcome: &Outcome,
        _attempt: u32,
    ) -> Result<RunEnd, RunError> {
        let wt = self.wt.as_ref().expect("worktree exists").clone();
        let score = self.last_score.clone().expect("approvals are scored");
        let gate_table = self
            .last_gates
            .as_deref()
            .map(report::gate_summary_table)
            .unwrap_or_default();
        let audit_comment = outcome
            .comment_body
            .clone()
            .unwrap_or_else(|| "## Audit Approved".into());
        let body = report::pr_body(&report::PrBodyInput {
            issue: self.issue.number,
            audit_comment: &audit_comment,
            score: &score,
            findings: &outcome.findings,
            gate_table: &gate_table,
            auditor_pr_body: outcome.pr_body.as_deref(),
            rejections: self.state.total_rejections(),
            gate_bounces: self.state.gate_bounces,
        });
        let title = outcome
            .pr_title
            .clone()
            .unwrap_or_else(|| report::default_pr_title(self.issue.number, &self.issue.title));
        let new = NewPullRequest {
            head: wt.branch.clone(),
            base: self.ws.default_branch.clone(),
            title,
            body,
            draft: self.p.settings.draft_pr,
        };
        let (pr, created) = match self.gh.find_or_create_pr(&new).await {
            Ok(x) => x,
            Err(e) => {
                self.pr_failed = true;
                return self
                    .stop(format!("opening the pull request failed: {e}"))
                    .await;
            }
        };
        self.journal.record(Event::PullRequest {
            number: pr.number,
            url: pr.html_url.clone(),
            created,
        })?;
        match self.gh.get_pr(pr.number).await {
            Ok(state) if state.mergeable == Some(false) => {
                match wt.merge_base_branch_with(&self.svc_push) {
                    Ok(MergeOutcome::Merged { sha }) => match wt.push(&self.svc_push) {
                        Ok(()) => {
                            self.journal.record(Event::Pushed { sha })?;
                        }
                        Err(e) => self.warn(format!(
                            "merged {} into the branch but the push failed: {e}",
                            self.ws.default_branch
                        )),
                    },
                    Ok(MergeOutcome::Conflicts { files }) => self.warn(format!(
                        "the pull request conflicts with {}; resolve by hand: {}",
                        self.ws.default_branch,
                        files.join(", ")
                    )),
                    Ok(MergeOutcome::UpToDate) => {}
                    Err(e) => self.warn(format!(
                        "could not merge {} into the branch: {e}",
                        self.ws.default_branch
                    )),
                }
            }
            Ok(_) => {}
            Err(e) => self.warn(format!(
                "could not read the pull request's mergeability: {e}"
            )),
        }
        Ok(RunEnd::PullRequest {
            number: pr.number,
            url: pr.html_url,
            created,
        })
    }

    /// Whether the worktree's branch has commits that never reached the remote.
    fn unpushed(&self, wt: &Worktree) -> bool {
        let last_pushed = self
            .journal
            .entries()
            .iter()
            .rev()
            .find_map(|e| match &e.event {
                Event::Pushed { sha } => Some(sha.clone()),
                _ => None,
            });
        wt.commits_ahead().unwrap_or(0) > 0 && wt.head_sha().ok() != last_pushed
    }

    /// Phase 2 cleanup: remove the worktree (kept with --debug when PR creation failed) and the checkpoint.
    fn finish(&mut self, end: &RunEnd) -> Result<(), RunError> {
        let keep = self.opts.debug && self.pr_failed;
        if let Some(wt) = self.wt.take() {
            let unpushed = self.unpushed(&wt);
            if keep {
                self.warn(format!(
                    "--debug: keeping the worktree {}",
                    wt.path.display()
                ));
            } else if unpushed {
                self.warn(format!(
                    "keeping the worktree {}: its branch has commits the remote does not; the next run continues from them",
                    wt.path.display()
                ));
            } else if let Err(e) = workspace::cleanup(&self.ws, &wt) {
                self.warn(format!(
                    "could not remove the worktree {}: {e}",
                    wt.path.display()
                ));
            }
        }
        Checkpoint::remove(&self.p.root, self.opts.issue)?;
        let outcome = match end {
            RunEnd::PullRequest { url, .. } => format!("pull request {url}"),
            RunEnd::Interrupted => "interrupted".into(),
            other => format!("{other:?}"),
        };
        self.journal.record(Event::Finished { outcome })?;
        Ok(())
    }
}

/// Why a stage produced no outcome.
enum Halt {
    Interrupted,
    Stop(String),
}

/// The outcome of a researcher stopped at its budget: its partial text, moving on.
fn partial_outcome(text: &str, stage: &Stage) -> Outcome {
    let mut o =
        parse_outcome("{\"action\": \"COMPLETE\"}", stage).expect("a literal outcome parses");
    o.comment_body = Some(text.trim().to_string()).filter(|t| !t.is_empty());
    o
}

fn exit_text(exit: &ExitReason) -> String {
    match exit {
        ExitReason::Completed => "completed".into(),
        ExitReason::Failed(m) => format!("failed: {m}"),
        ExitReason::TimedOut(d) => format!(
            "timed out after {}",
            report::human_duration(d.as_millis() as u64)
        ),
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
