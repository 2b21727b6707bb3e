//! The board-driven bot: one scheduler owning the live runs — each `run_issue` on its own task
//! with its own cancellation — fed by board polls and by the events a webhook receiver queues.
//!
//! - **Triggers.** A card that arrived in a trigger column since the board was last seen, a
//!   codeowner's `/supervisor run`, the trigger label added by a codeowner: the issue is queued.
//! - **Bounded.** At most `maxConcurrent` runs live at once; a column with a limit takes no more
//!   runs than that (a run waits before moving its card into a full one). The rest wait in order.
//! - **Reconciliation.** Every poll and every card event compares the board with the live runs: a
//!   card a human moved elsewhere stops its run at the next safe point with one comment saying
//!   why (back into an agent column: the run starts again from there); a closed issue stops it.
//! - **Claims.** A local lock (the run's flock) and a claim on GitHub (a comment with an expiry,
//!   renewed while the run lives, and a label) so two watchers never run one issue.
//! - **Refusals first.** Before a start writes anything (claim comment, label), the run's own
//!   admission is asked as a dry run: an issue it would refuse gets nothing on GitHub.
//! - **Restarts.** Runs a killed watcher left (their checkpoints) and runs a drained one stopped
//!   are started again first; the journal and the comment markers make that post nothing twice.
//!   Every queued start is owed in the watch state from the poll that saw its card (written in
//!   the same file as the board it saw) until its run ends, so a restart starts what was queued
//!   — once its card is read still in the column that asked for it — and a run whose end the
//!   state missed is known by its journal.
//!   A shutdown request drains: nothing new starts, live runs stop at a safe point, the loop ends.
//!
//! With [`Mode::Actions`] nothing runs here: each ready card becomes one `workflow_dispatch` of
//! the dispatch workflow, with the claim set.

mod board;
mod claims;
mod core;
mod state;
mod tracker;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

pub use board::{Columns, Verdict, arrived, reconcile, still_due};
pub use claims::{Claimed, Claims, Held};
pub use core::{
    Action, Admission, ClaimAnswer, Core, Input, LiveStatus, Now, PollStatus, Status, WorkKey,
    authorise,
};
pub use state::{Owed, WatchState};
pub(crate) use tracker::Tracker;

use crate::events::Event;
use crate::github::{BoardRef, GitHub, Marker};
use crate::ids::IssueNumber;
use crate::pipeline::{Project, RunError, RunOptions, RunSummary, read_runs_where};
use crate::runtime::{
    Monitor, Scheduled, Services, epic_refusal, refusal, revised_pull, run_epic_run, run_issue,
    run_revision,
};
use crate::workspace::{Checkpoint, PushAuth};

/// Where the work of a ready card is done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// Runs on this machine.
    Local,
    /// One `workflow_dispatch` of `workflow` on `git_ref` per ready card (input `issue`).
    Actions { workflow: String, git_ref: String },
}

/// How the scheduler runs.
#[derive(Debug, Clone)]
pub struct SchedulerConfig {
    pub max_concurrent: usize,
    pub poll_interval: Duration,
    /// Poll once, start what is due, wait for those runs, end.
    pub once: bool,
    pub mode: Mode,
}

/// What the scheduler reports as it goes (printed by the command line, one JSON line each with
/// `--json`). Names and numbers only: never anyone's text.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Notice {
    Polled {
        cards: usize,
        skipped: usize,
        pages: u32,
        cost: u64,
        remaining: Option<u64>,
        reset_at: Option<String>,
        duration_ms: u64,
    },
    PollFailed {
        error: String,
    },
    Queued {
        issue: u64,
        reason: String,
    },
    /// A queued start that will not happen: its card left the column that asked for it.
    Dequeued {
        issue: u64,
        reason: String,
    },
    /// Its run's admission refuses the issue: nothing was written to it.
    Refused {
        issue: u64,
        reason: String,
    },
    Started {
        issue: u64,
        column: Option<String>,
    },
    /// Someone else holds the issue's claim.
    Claimed {
        issue: u64,
        holder: String,
        until: String,
    },
    Stopping {
        issue: u64,
        reason: String,
    },
    Finished {
        issue: u64,
        run_id: String,
        end: String,
        pr_url: Option<String>,
    },
    Failed {
        issue: u64,
        error: String,
        resumable: bool,
    },
    Dispatched {
        issue: u64,
        workflow: String,
    },
    Ignored {
        event: String,
        reason: String,
    },
    Draining {
        live: Vec<u64>,
    },
    /// A live run has journalled nothing for `watch.silentRunMin`: its agent or gate may hang.
    Silent {
        issue: u64,
        run_id: Option<String>,
        minutes: i64,
    },
}

/// How the scheduler ended.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    /// Runs that ended, with how (`pull-request`, `stopped`, …, or `error`).
    pub runs: Vec<(u64, String)>,
    pub dispatched: Vec<u64>,
    /// No poll succeeded.
    pub never_polled: bool,
    /// A shutdown request ended it.
    pub drained: bool,
}

/// Who reads the notices.
pub type NoticeSink = Arc<dyn Fn(&Notice) + Send + Sync>;

/// How the scheduler and its runs reach GitHub.
#[derive(Clone)]
pub struct Access {
    pub gh: GitHub,
    pub push_auth: PushAuth,
    /// Given to agents only when the settings opt in.
    pub github_token: Option<String>,
}

/// The scheduler of one repository's board.
pub struct Scheduler {
    project: Arc<Project>,
    access: Access,
    config: SchedulerConfig,
    sink: NoticeSink,
    status: Arc<Mutex<Value>>,
    monitor: Monitor,
}

impl Scheduler {
    pub fn new(
        project: Arc<Project>,
        access: Access,
        config: SchedulerConfig,
        sink: NoticeSink,
    ) -> Scheduler {
        let silent = project.settings.watch.silent_run_min;
        let silent_after = (silent > 0).then(|| Duration::from_secs(silent * 60));
        Scheduler {
            project,
            access,
            config,
            sink,
            status: Arc::new(Mutex::new(json!({ "live": [], "queue": [] }))),
            monitor: Monitor::new(silent_after),
        }
    }

    /// The live picture of the queue and the runs (the dashboard's, `supervisor status`'s).
    pub fn monitor(&self) -> Monitor {
        self.monitor.clone()
    }

    /// The scheduler's part of `GET /status`: live runs, the queue, the last poll.
    pub fn status(&self) -> impl Fn() -> Value + Send + Sync + 'static {
        let status = self.status.clone();
        move || status.lock().map(|s| s.clone()).unwrap_or(Value::Null)
    }

    /// Run until `shutdown` is cancelled (then drain) or, with `once`, until the runs the first
    /// poll started have ended. `events` are the receiver's queue, when there is one.
    pub async fn run(
        self,
        events: Option<mpsc::Receiver<Event>>,
        shutdown: CancellationToken,
    ) -> Outcome {
        Driver::new(self, shutdown.clone())
            .run(events, shutdown)
            .await
    }
}

/// The scheduler's driver: performs [`Core`]'s actions and feeds their answers back; only its
/// own task touches it.
struct Driver {
    s: Scheduler,
    core: Core,
    board: BoardRef,
    claims: Claims,
    tracker: Tracker,
    /// The live runs' cancellations.
    cancels: BTreeMap<WorkKey, CancellationToken>,
    runs: JoinSet<(WorkKey, Result<RunSummary, RunError>)>,
    shutdown: CancellationToken,
}

impl Driver {
    fn new(s: Scheduler, shutdown: CancellationToken) -> Driver {
        let settings = &s.project.settings;
        let state = WatchState::load(&s.project.root);
        s.monitor.set_watcher(&state.watcher);
        let project = s.project.clone();
        let is_codeowner: Arc<dyn Fn(&str) -> bool + Send + Sync> =
            Arc::new(move |l: &str| project.settings.is_codeowner(l));
        let claims = Claims::new(
            s.access.gh.clone(),
            settings.watch.claim_label.clone(),
            Duration::from_secs(settings.watch.claim_ttl_sec),
            state.watcher.clone(),
            is_codeowner,
        );
        let tracker = Tracker::new(settings.watch.column_limits.clone());
        let core = Core::new(s.project.clone(), s.config.clone(), tracker.clone(), state);
        Driver {
            board: BoardRef::from_settings(settings),
            claims,
            tracker,
            core,
            cancels: BTreeMap::new(),
            runs: JoinSet::new(),
            shutdown,
            s,
        }
    }

    /// Feed `input` to the core and perform what it decides, answers included, until nothing is
    /// left to do.
    async fn feed(&mut self, input: Input) {
        let mut pending: VecDeque<Input> = VecDeque::from([input]);
        while let Some(input) = pending.pop_front() {
            for action in self.core.on(input, Now::real()) {
                // Its log lines name the issue (or pull request) it is about.
                let span = match action.work() {
                    Some(WorkKey::Issue(n)) => tracing::info_span!("work", issue = n),
                    Some(WorkKey::Revision(n)) => tracing::info_span!("work", pr = n),
                    Some(WorkKey::Epic(n)) => tracing::info_span!("work", epic = n),
                    None => tracing::Span::none(),
                };
                // Boxed: an admission's future (a dry run of the run's start) is large.
                let performed = Box::pin(self.perform(action)).instrument(span);
                if let Some(answer) = performed.await {
                    pending.push_back(answer);
                }
            }
        }
    }

    async fn perform(&mut self, action: Action) -> Option<Input> {
        match action {
            Action::Notice(n) => (self.s.sink)(&n),
            Action::SaveState => {
                if let Err(e) = self.core.state().save(&self.s.project.root) {
                    tracing::warn!("could not save the watch state: {e}");
                }
            }
            Action::Admit(key) => return Some(self.admission(key).await),
            Action::Claim(issue) => {
                let answer = match self.claims.claim(issue).await {
                    Ok(Claimed::Ours(held)) => ClaimAnswer::Ours(held),
                    Ok(Claimed::Taken { holder, until }) => ClaimAnswer::Taken {
                        holder,
                        until: until.to_rfc3339(),
                    },
                    Err(e) => {
                        tracing::warn!(
                            issue,
                            "cannot claim the issue on GitHub: {e}; trying again at the next poll"
                        );
                        ClaimAnswer::Unknown(e.to_string())
                    }
                };
                return Some(Input::Claimed { issue, answer });
            }
            Action::Start { key, column, .. } => self.spawn(key, column),
            Action::Dispatch {
                issue,
                workflow,
                git_ref,
            } => {
                let inputs = json!({ "issue": issue.to_string() });
                let result = self
                    .s
                    .access
                    .gh
                    .dispatch_workflow(&workflow, &git_ref, &inputs)
                    .await
                    .map_err(|e| (e.to_string(), e.is_transient()));
                return Some(Input::Dispatched {
                    issue,
                    workflow,
                    result,
                });
            }
            Action::ReadCard(moved) => {
                let found = self
                    .s
                    .access
                    .gh
                    .board_card(&moved.item_node_id, &self.board.status_field)
                    .await
                    .map_err(|e| e.to_string());
                return Some(Input::CardRead { moved, found });
            }
            Action::Stop(key) => {
                if let Some(cancel) = self.cancels.get(&key) {
                    cancel.cancel();
                }
            }
            Action::Release { issue, held } => {
                if let Err(e) = self.claims.release(issue, held).await {
                    tracing::warn!(issue, "could not release the claim: {e}");
                }
            }
            Action::Post {
                issue,
                marker,
                body,
                edit,
            } => {
                let gh = &self.s.access.gh;
                let posted = if edit {
                    gh.post_or_edit(issue, &marker, &body).await.map(|_| ())
                } else {
                    gh.post_once(issue, &marker, &body, None).await.map(|_| ())
                };
                if let Err(e) = posted {
                    tracing::warn!(issue, "could not post a comment ({}): {e}", marker.kind);
                }
            }
            Action::AlreadyRunning {
                issue,
                by,
                column,
                comment,
            } => {
                self.already_running(issue, by.as_deref(), column, comment)
                    .await
            }
        }
        None
    }

    /// Whether the run's admission takes the work, asked before anything is written to it.
    async fn admission(&mut self, key: WorkKey) -> Input {
        let issue = key.number();
        let svc = self.services(self.shutdown.child_token());
        let asked = match key {
            WorkKey::Epic(n) => epic_refusal(&self.s.project, &svc.github, n).await,
            WorkKey::Issue(_) | WorkKey::Revision(_) => {
                Box::pin(refusal(self.s.project.clone(), svc, issue)).await
            }
        };
        let answer = match asked {
            Ok(None) => Admission::Admit,
            Ok(Some(reason)) => {
                tracing::info!(issue, "not started: {reason}");
                Admission::Refused(reason)
            }
            Err(e) if e.is_resumable() => {
                tracing::warn!(
                    issue,
                    "cannot ask whether the issue may run: {e}; trying again at the next poll"
                );
                Admission::Unknown(e.to_string())
            }
            Err(e) => Admission::Failed(e.to_string()),
        };
        Input::Admission { key, answer }
    }

    /// What a run (or an admission check) started here talks to.
    fn services(&self, cancel: CancellationToken) -> Services {
        Services {
            github: self.s.access.gh.clone(),
            push_auth: self.s.access.push_auth.clone(),
            github_token: self
                .s
                .access
                .github_token
                .clone()
                .filter(|_| self.s.project.settings.pass_github_token),
            scripted_program: None,
            cancel,
            hooks: None,
            // Several runs at once: the scheduler's notices say how they go.
            progress: crate::runtime::ProgressMode::Off,
            feed: None,
        }
    }

    fn spawn(&mut self, key: WorkKey, column: Option<String>) {
        let cancel = self.shutdown.child_token();
        let number = key.number();
        let svc = Services {
            feed: Some(self.s.monitor.feed(number)),
            ..self.services(cancel.clone())
        };
        self.s.monitor.started(number, column);
        let opts = RunOptions {
            issue: IssueNumber::new(number),
            ..RunOptions::default()
        };
        let project = self.s.project.clone();
        match key {
            // The revision moves its issue's card, which this scheduler does not track by the
            // pull request's number: no column limits for it.
            WorkKey::Revision(pr) => self
                .runs
                .spawn(async move { (key, run_revision(project, svc, pr, opts).await) }),
            WorkKey::Issue(_) => {
                let svc = Services {
                    hooks: Some(Arc::new(self.tracker.clone())),
                    ..svc
                };
                self.runs
                    .spawn(async move { (key, run_issue(project, svc, opts).await) })
            }
            // Planning moves only its sub-issues' new cards.
            WorkKey::Epic(n) => self
                .runs
                .spawn(async move { (key, run_epic_run(project, svc, n).await) }),
        };
        self.cancels.insert(key, cancel);
    }

    /// A run ended: the picture first, then the core.
    async fn ended(&mut self, key: WorkKey, result: Result<RunSummary, RunError>) {
        self.cancels.remove(&key);
        self.s.monitor.run_ended(key.number(), &result);
        self.feed(Input::RunEnded { key, result }).await;
    }

    /// A `run` of an issue whose run is live: one line saying which run and where it is, in a
    /// comment of its own edited in place when asked again (for a command made in a comment).
    async fn already_running(
        &self,
        issue: u64,
        by: Option<&str>,
        column: Option<String>,
        comment: Option<u64>,
    ) {
        let run = Checkpoint::all(&self.s.project.root)
            .into_iter()
            .find(|cp| cp.issue == issue)
            .map_or_else(
                || "of this issue".to_string(),
                |cp| format!("`{}`", cp.run_id),
            );
        let column = column.map_or_else(
            || "a column not known yet".to_string(),
            |c| format!("**{c}**"),
        );
        let by = by.map(|l| format!("@{l}: ")).unwrap_or_default();
        let line = format!(
            "{by}run {run} is already running, with the card in {column}; nothing new was started (`{} stop` stops it).",
            self.s.project.settings.watch.command_prefix
        );
        if comment.is_some() {
            let marker = Marker::new(
                format!("issue-{issue}"),
                "watch",
                0,
                crate::github::MarkerKind::AlreadyRunning,
            );
            if let Err(e) = self.s.access.gh.post_or_edit(issue, &marker, &line).await {
                tracing::warn!(issue, "could not answer the `run`: {e}");
            }
        }
        tracing::info!(event = "run", "ignored: {line}");
        (self.s.sink)(&Notice::Ignored {
            event: "run".to_string(),
            reason: line,
        });
    }

    /// The keys of the runs a dead watcher left, and of the owed runs whose journals show them
    /// ended since they were asked for.
    fn begin(&self) -> Input {
        let root = &self.s.project.root;
        let leftovers = if self.s.config.mode == Mode::Local {
            Checkpoint::all(root)
                .into_iter()
                .filter(|cp| !cp.process_alive())
                .map(|cp| match revised_pull(&cp.run_id) {
                    Some(pr) => WorkKey::Revision(pr),
                    None => WorkKey::Issue(cp.issue),
                })
                .collect()
        } else {
            Vec::new()
        };
        let owed = &self.core.state().owed;
        let mut paid = BTreeSet::new();
        if !owed.is_empty() {
            let runs =
                read_runs_where(root, |id| owed.iter().any(|o| o.names(id))).unwrap_or_else(|e| {
                    tracing::warn!("cannot read the run journals: {e}; the owed runs are queued");
                    Vec::new()
                });
            for o in owed.iter().filter(|o| o.paid_by(&runs)) {
                paid.insert(WorkKey::of(o));
            }
        }
        Input::Begin { leftovers, paid }
    }

    async fn run(
        mut self,
        mut events: Option<mpsc::Receiver<Event>>,
        shutdown: CancellationToken,
    ) -> Outcome {
        let begin = self.begin();
        self.feed(begin).await;
        let mut polls = tokio::time::interval(self.s.config.poll_interval);
        polls.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut refresh = tokio::time::interval(self.claims.ttl() / 3);
        refresh.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        refresh.tick().await;
        let mut silence = tokio::time::interval(silence_check_every(
            self.s.project.settings.watch.silent_run_min,
        ));
        silence.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let draining = self.core.draining();
            tokio::select! {
                biased;
                () = shutdown.cancelled(), if !draining => self.feed(Input::Shutdown).await,
                Some(done) = self.runs.join_next(), if !self.runs.is_empty() => {
                    match done {
                        Ok((key, result)) => self.ended(key, result).await,
                        Err(e) => tracing::error!("a run's task failed: {e}"),
                    }
                }
                event = next_event(&mut events), if events.is_some() && !draining => {
                    match event {
                        Some(event) => self.feed(Input::Event(event)).await,
                        None => events = None,
                    }
                }
                _ = polls.tick(), if !draining => self.poll().await,
                _ = refresh.tick(), if self.core.has_live() => self.refresh_claims().await,
                _ = silence.tick() => self.report_silent(),
            }
            self.publish();
            if self.core.done() && (self.core.draining() || self.runs.is_empty()) {
                break;
            }
        }
        if let Err(e) = self.core.state().save(&self.s.project.root) {
            tracing::warn!("could not save the watch state: {e}");
        }
        self.core.outcome()
    }

    async fn poll(&mut self) {
        let started = Instant::now();
        let input = match self.s.access.gh.poll_board(&self.board).await {
            Ok(poll) => {
                let duration_ms = started.elapsed().as_millis() as u64;
                tracing::debug!(
                    cards = poll.cards.len(),
                    pages = poll.pages,
                    cost = poll.rate.cost,
                    remaining = poll.rate.remaining,
                    reset_at = poll.rate.reset_at.as_deref().unwrap_or(""),
                    "board polled in {duration_ms} ms"
                );
                if let Some(login) = &poll.viewer {
                    self.claims.set_login(login);
                }
                Input::Polled {
                    poll,
                    read_at: started,
                    duration_ms,
                }
            }
            Err(e) => Input::PollFailed(e.to_string()),
        };
        self.feed(input).await;
    }

    async fn refresh_claims(&mut self) {
        for held in self.core.held() {
            if let Err(e) = self.claims.refresh(held).await {
                tracing::warn!(comment = held.comment_id, "could not renew the claim: {e}");
            }
        }
    }

    /// Report the live runs that have newly gone silent.
    fn report_silent(&self) {
        for (issue, run_id, minutes) in self.s.monitor.newly_silent(chrono::Utc::now()) {
            tracing::warn!(
                issue,
                run = run_id.as_deref().unwrap_or("-"),
                "the run has journalled nothing for {minutes} min (watch.silentRunMin): its agent or a gate may hang"
            );
            (self.s.sink)(&Notice::Silent {
                issue,
                run_id,
                minutes,
            });
        }
    }

    fn publish(&self) {
        let live = self.core.live();
        self.s.monitor.scheduled(
            self.core.queued(),
            live.iter()
                .map(|(issue, column, stopping)| Scheduled {
                    issue: *issue,
                    column: column.clone(),
                    stopping: stopping.clone(),
                })
                .collect(),
            self.core.draining(),
        );
        let status = Status {
            silent: self.s.monitor.silent(),
            ..self.core.status()
        };
        let value = serde_json::to_value(status).unwrap_or(Value::Null);
        if let Ok(mut s) = self.s.status.lock() {
            *s = value;
        }
    }
}

/// How often live runs are checked for silence: a tenth of the limit, between 1 s and a minute.
fn silence_check_every(silent_run_min: u64) -> Duration {
    if silent_run_min == 0 {
        return Duration::from_secs(3600);
    }
    Duration::from_secs(silent_run_min * 6).clamp(Duration::from_secs(1), Duration::from_secs(60))
}

async fn next_event(events: &mut Option<mpsc::Receiver<Event>>) -> Option<Event> {
    match events {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}
