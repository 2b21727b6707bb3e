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

pub use board::{Columns, Verdict, arrived, reconcile, still_due};
pub use claims::{Claimed, Claims, Held};
pub use state::{Owed, WatchState};
pub use tracker::Tracker;

use crate::events::{Command, Event, Origin, ReviewActivity, ReviewKind, ReviewState, Target};
use crate::github::{BoardRef, Card, GitHub, GitHubError, Marker};
use crate::pipeline::{Project, RunEnd, RunError, RunOptions, RunSummary, read_runs_where};
use crate::runtime::{
    Monitor, Scheduled, Services, refusal, revised_pull, run_issue, run_revision,
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
        let mut l = Loop::new(self, shutdown.clone());
        l.resume_leftovers();
        l.restore_owed();
        l.run(events, shutdown).await
    }
}

/// Why the scheduler stopped a run.
#[derive(Debug, Clone)]
struct StopRequest {
    reason: String,
    /// Start it again (from the card's new column) once it has stopped.
    restart: bool,
}

/// A start waiting for room.
struct Queued {
    number: u64,
    /// The column whose arrival asked for it: the card must still be there when it starts.
    column: Option<String>,
    /// Startable: asked for by name, or its card was read in `column` by this process (a start
    /// restored from the watch state waits for the first poll to read it).
    confirmed: bool,
}

struct Live {
    cancel: CancellationToken,
    held: Option<Held>,
    stop: Option<StopRequest>,
    since: chrono::DateTime<chrono::Utc>,
}

/// The scheduler's state while it runs; only its own task touches it.
struct Loop {
    s: Scheduler,
    board: BoardRef,
    triggers: Vec<String>,
    state: WatchState,
    claims: Claims,
    tracker: Tracker,
    live: BTreeMap<u64, Live>,
    queue: VecDeque<Queued>,
    /// Issues to queue again at the next poll (a run GitHub's trouble paused).
    retry: BTreeSet<u64>,
    /// Issues already tried again in this process (`once`).
    retried: BTreeSet<u64>,
    /// Runs an earlier process left: where their cards are is learnt from their own moves.
    resumed: BTreeSet<u64>,
    /// Pull requests queued or live for a revision (keyed by their own number, which no issue
    /// shares), until the revision ends for good.
    revisions: BTreeSet<u64>,
    runs: JoinSet<(u64, Result<RunSummary, RunError>)>,
    /// The board's node, once a poll has read it.
    board_id: Option<String>,
    /// New triggers are taken (off after the first poll with `once`, and when draining).
    accepting: bool,
    draining: bool,
    polled: bool,
    /// The watch state changed since it was last written.
    dirty: bool,
    last_poll_error: Option<String>,
    last_poll: Value,
    outcome: Outcome,
    shutdown: CancellationToken,
}

impl Loop {
    fn new(s: Scheduler, shutdown: CancellationToken) -> Loop {
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
        Loop {
            board: BoardRef::from_settings(settings),
            triggers: s.project.trigger_columns(),
            tracker: Tracker::new(settings.watch.column_limits.clone()),
            claims,
            state,
            live: BTreeMap::new(),
            queue: VecDeque::new(),
            retry: BTreeSet::new(),
            resumed: BTreeSet::new(),
            revisions: BTreeSet::new(),
            retried: BTreeSet::new(),
            runs: JoinSet::new(),
            board_id: None,
            accepting: true,
            draining: false,
            polled: false,
            dirty: false,
            last_poll_error: None,
            last_poll: Value::Null,
            outcome: Outcome::default(),
            shutdown,
            s,
        }
    }

    fn notice(&self, n: Notice) {
        (self.s.sink)(&n);
    }

    /// Runs a dead watcher left (their checkpoints) and runs a drain stopped go first.
    fn resume_leftovers(&mut self) {
        if self.s.config.mode != Mode::Local {
            return;
        }
        let mut issues: BTreeSet<u64> = std::mem::take(&mut self.state.resume);
        for cp in Checkpoint::all(&self.s.project.root) {
            if cp.process_alive() {
                continue;
            }
            match revised_pull(&cp.run_id) {
                Some(pr) => {
                    self.revisions.insert(pr);
                    issues.insert(pr);
                }
                None => {
                    issues.insert(cp.issue);
                }
            }
        }
        for issue in issues {
            self.enqueue(
                issue,
                "resuming the run that was live when the watcher stopped",
                None,
            );
        }
    }

    /// Queue again what the last process owed and did not start (or started without leaving a
    /// checkpoint). What a run's journal shows ended since it was asked for is paid; a start its
    /// card's arrival asked for waits for the first poll to find the card still there.
    fn restore_owed(&mut self) {
        if self.state.owed.is_empty() {
            return;
        }
        let owed = self.state.owed.clone();
        let runs = read_runs_where(&self.s.project.root, |id| owed.iter().any(|o| o.names(id)))
            .unwrap_or_else(|e| {
                tracing::warn!("cannot read the run journals: {e}; the owed runs are queued");
                Vec::new()
            });
        for o in owed {
            if self.is_queued(o.number) || self.live.contains_key(&o.number) {
                continue;
            }
            if o.paid_by(&runs) {
                self.forget(o.number);
                continue;
            }
            if o.revision {
                self.revisions.insert(o.number);
            }
            let reason = format!("queued before the watcher stopped: {}", o.reason);
            self.queue.push_back(Queued {
                number: o.number,
                confirmed: o.column.is_none(),
                column: o.column,
            });
            self.notice(Notice::Queued {
                issue: o.number,
                reason,
            });
        }
    }

    async fn run(
        mut self,
        mut events: Option<mpsc::Receiver<Event>>,
        shutdown: CancellationToken,
    ) -> Outcome {
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
            tokio::select! {
                biased;
                () = shutdown.cancelled(), if !self.draining => self.drain(),
                Some(done) = self.runs.join_next(), if !self.runs.is_empty() => {
                    match done {
                        Ok((issue, result)) => self.finished(issue, result).await,
                        Err(e) => tracing::error!("a run's task failed: {e}"),
                    }
                }
                event = next_event(&mut events), if events.is_some() && !self.draining => {
                    match event {
                        Some(event) => self.event(event).await,
                        None => events = None,
                    }
                }
                _ = polls.tick(), if !self.draining => self.poll().await,
                _ = refresh.tick(), if !self.live.is_empty() => self.refresh_claims().await,
                _ = silence.tick() => self.report_silent(),
            }
            if !self.draining {
                self.start_queued().await;
            }
            if self.dirty {
                self.save_state();
            }
            self.publish();
            let running = !self.live.is_empty() || !self.runs.is_empty();
            if self.draining && self.runs.is_empty() {
                break;
            }
            if self.s.config.once && self.polled && self.queue.is_empty() && !running {
                break;
            }
            let startable = self.queue.iter().any(|q| q.confirmed);
            if self.s.config.once
                && !self.polled
                && self.last_poll_error.is_some()
                && !startable
                && !running
            {
                // The one poll failed: there is nothing to wait for (what is owed stays owed).
                break;
            }
        }
        self.save_state();
        self.outcome.never_polled = !self.polled;
        self.outcome
    }

    fn save_state(&mut self) {
        if let Err(e) = self.state.save(&self.s.project.root) {
            tracing::warn!("could not save the watch state: {e}");
        }
        self.dirty = false;
    }

    fn is_queued(&self, number: u64) -> bool {
        self.queue.iter().any(|q| q.number == number)
    }

    /// Queue a start; `column`: the column whose arrival asks for it (the card must still be
    /// there when it starts).
    fn enqueue(&mut self, issue: u64, reason: &str, column: Option<String>) {
        if self.live.contains_key(&issue) || self.is_queued(issue) {
            return;
        }
        self.owe(Owed::new(
            issue,
            self.revisions.contains(&issue),
            reason,
            column.clone(),
        ));
        self.queue.push_back(Queued {
            number: issue,
            column,
            confirmed: true,
        });
        self.notice(Notice::Queued {
            issue,
            reason: reason.to_string(),
        });
    }

    /// Record a run as owed (the latest ask for it replaces an earlier one).
    fn owe(&mut self, owed: Owed) {
        match self.state.owed.iter_mut().find(|o| o.number == owed.number) {
            Some(o) => *o = owed,
            None => self.state.owed.push(owed),
        }
        self.dirty = true;
    }

    /// The run of `number` is no longer owed.
    fn forget(&mut self, number: u64) {
        self.state.owed.retain(|o| o.number != number);
        self.dirty = true;
    }

    /// Check a queued start against its card as now read: one whose card left the column that
    /// asked for it is dropped, one still there may start.
    fn recheck_queued(&mut self, number: u64, card: Option<&Card>) {
        let Some(pos) = self.queue.iter().position(|q| q.number == number) else {
            return;
        };
        let Some(column) = self.queue[pos].column.clone() else {
            return;
        };
        if still_due(&column, card) {
            self.queue[pos].confirmed = true;
            return;
        }
        self.queue.remove(pos);
        self.forget(number);
        self.notice(Notice::Dequeued {
            issue: number,
            reason: format!("the card left {column} before its run started"),
        });
    }

    /// The column a card was last seen in.
    fn seen_column(&self, issue: u64) -> Option<String> {
        self.state
            .board
            .as_ref()
            .and_then(|b| b.get(&issue).cloned())
            .flatten()
    }

    /// Start queued issues while there is room.
    async fn start_queued(&mut self) {
        let local = self.s.config.mode == Mode::Local;
        while !local || self.live.len() < self.s.config.max_concurrent {
            let pos = self.queue.iter().position(|q| {
                q.confirmed
                    && (!local
                        || self
                            .seen_column(q.number)
                            .is_none_or(|c| self.tracker.has_room(&c, q.number)))
            });
            let Some(issue) = pos.and_then(|p| self.queue.remove(p)).map(|q| q.number) else {
                return;
            };
            if !local {
                self.dispatch(issue).await;
                continue;
            }
            // A revision is claimed by its issue's local lock; its pull request carries no claim.
            let held = if self.revisions.contains(&issue) {
                None
            } else {
                if !self.admissible(issue).await {
                    continue;
                }
                match self.claim(issue).await {
                    Some(held) => Some(held),
                    None => continue,
                }
            };
            self.spawn(issue, held);
        }
    }

    /// Whether the run's admission takes `issue`, asked before anything is written to it. A
    /// refusal is reported and the issue is no longer owed; GitHub's trouble tries again.
    async fn admissible(&mut self, issue: u64) -> bool {
        let svc = self.services(self.shutdown.child_token());
        match refusal(self.s.project.clone(), svc, issue).await {
            Ok(None) => true,
            Ok(Some(reason)) => {
                tracing::info!(issue, "not started: {reason}");
                self.notice(Notice::Refused { issue, reason });
                self.forget(issue);
                false
            }
            Err(e) if e.is_resumable() => {
                tracing::warn!(
                    issue,
                    "cannot ask whether the issue may run: {e}; trying again at the next poll"
                );
                self.retry.insert(issue);
                false
            }
            Err(e) => {
                self.notice(Notice::Failed {
                    issue,
                    error: e.to_string(),
                    resumable: false,
                });
                self.forget(issue);
                false
            }
        }
    }

    /// Claim `issue` on GitHub; `None` when someone else holds it or GitHub cannot say.
    async fn claim(&mut self, issue: u64) -> Option<Held> {
        match self.claims.claim(issue).await {
            Ok(Claimed::Ours(held)) => Some(held),
            Ok(Claimed::Taken { holder, until }) => {
                // The holder runs it.
                self.forget(issue);
                self.notice(Notice::Claimed {
                    issue,
                    holder,
                    until: until.to_rfc3339(),
                });
                None
            }
            Err(e) => {
                tracing::warn!(
                    issue,
                    "cannot claim the issue on GitHub: {e}; trying again at the next poll"
                );
                self.retry.insert(issue);
                None
            }
        }
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

    fn spawn(&mut self, issue: u64, held: Option<Held>) {
        let cancel = self.shutdown.child_token();
        let column = if self.resumed.remove(&issue) {
            None
        } else {
            self.seen_column(issue)
        };
        if let Some(c) = &column {
            self.tracker.enter(issue, c);
        } else {
            self.tracker.enter_unknown(issue);
        }
        let svc = Services {
            feed: Some(self.s.monitor.feed(issue)),
            ..self.services(cancel.clone())
        };
        self.s.monitor.started(issue, column.clone());
        let opts = RunOptions {
            issue,
            ..RunOptions::default()
        };
        let project = self.s.project.clone();
        if self.revisions.contains(&issue) {
            // The revision moves its issue's card, which this scheduler does not track by the
            // pull request's number: no column limits for it.
            self.runs
                .spawn(async move { (issue, run_revision(project, svc, issue, opts).await) });
        } else {
            let svc = Services {
                hooks: Some(Arc::new(self.tracker.clone())),
                ..svc
            };
            self.runs
                .spawn(async move { (issue, run_issue(project, svc, opts).await) });
        }
        self.live.insert(
            issue,
            Live {
                cancel,
                held,
                stop: None,
                since: chrono::Utc::now(),
            },
        );
        self.notice(Notice::Started { issue, column });
    }

    async fn dispatch(&mut self, issue: u64) {
        let Mode::Actions { workflow, git_ref } = self.s.config.mode.clone() else {
            return;
        };
        if !self.admissible(issue).await || self.claim(issue).await.is_none() {
            return;
        }
        let inputs = json!({ "issue": issue.to_string() });
        match self
            .s
            .access
            .gh
            .dispatch_workflow(&workflow, &git_ref, &inputs)
            .await
        {
            Ok(()) => {
                self.forget(issue);
                self.outcome.dispatched.push(issue);
                self.notice(Notice::Dispatched { issue, workflow });
            }
            Err(e) => {
                self.forget(issue);
                self.notice(Notice::Failed {
                    issue,
                    error: format!("dispatching {workflow}: {e}"),
                    resumable: e.is_transient(),
                });
            }
        }
    }

    /// Ask a live run to stop at its next safe point.
    fn stop(&mut self, issue: u64, request: StopRequest) {
        let Some(live) = self.live.get_mut(&issue) else {
            return;
        };
        if live.stop.is_some() {
            return;
        }
        live.cancel.cancel();
        let reason = request.reason.clone();
        live.stop = Some(request);
        self.notice(Notice::Stopping { issue, reason });
    }

    fn drain(&mut self) {
        self.draining = true;
        self.accepting = false;
        // What was queued stays owed: the next start queues it again.
        self.queue.clear();
        let live: Vec<u64> = self.live.keys().copied().collect();
        self.notice(Notice::Draining { live: live.clone() });
        // Their cancellation comes from the process's token; they are started again next time.
        self.state.resume.extend(live);
        self.outcome.drained = true;
    }

    async fn finished(&mut self, issue: u64, result: Result<RunSummary, RunError>) {
        self.tracker.leave(issue);
        let Some(live) = self.live.remove(&issue) else {
            return;
        };
        if let Some(held) = live.held {
            if let Err(e) = self.claims.release(issue, held).await {
                tracing::warn!(issue, "could not release the claim: {e}");
            }
        }
        let end = match &result {
            Ok(summary) => end_name(&summary.end),
            Err(_) => "error".to_string(),
        };
        self.outcome.runs.push((issue, end.clone()));
        match &result {
            Ok(summary) => self.s.monitor.finished(
                issue,
                Some(summary.run_id.clone()),
                &end,
                match &summary.end {
                    RunEnd::PullRequest { url, .. } | RunEnd::Revised { url, .. } => {
                        Some(url.clone())
                    }
                    _ => None,
                },
                None,
            ),
            Err(e) => self
                .s
                .monitor
                .finished(issue, None, &end, None, Some(e.to_string())),
        }
        match result {
            Ok(summary) => {
                if let (Some(stop), RunEnd::Interrupted) = (&live.stop, &summary.end) {
                    self.stopped_comment(issue, &summary.run_id, stop).await;
                    if stop.restart && !self.draining {
                        self.enqueue(issue, "the card was moved back", None);
                    }
                }
                if summary.end.is_resumable() && !self.draining {
                    self.retry.insert(issue);
                }
                if !self.draining {
                    self.state.resume.remove(&issue);
                }
                let pr_url = match &summary.end {
                    RunEnd::PullRequest { url, .. } => Some(url.clone()),
                    _ => None,
                };
                self.notice(Notice::Finished {
                    issue,
                    run_id: summary.run_id,
                    end,
                    pr_url,
                });
            }
            Err(e) => {
                let resumable = e.is_resumable() && !matches!(e, RunError::Busy { .. });
                if resumable && !self.draining {
                    if self.s.config.once && self.retried.insert(issue) {
                        // No later poll will come: once more now, from its checkpoint.
                        self.queue.push_back(Queued {
                            number: issue,
                            column: None,
                            confirmed: true,
                        });
                    } else {
                        self.retry.insert(issue);
                    }
                }
                self.notice(Notice::Failed {
                    issue,
                    error: e.to_string(),
                    resumable,
                });
            }
        }
        let again = self.retry.contains(&issue)
            || self.state.resume.contains(&issue)
            || self.is_queued(issue);
        if !again {
            self.revisions.remove(&issue);
            self.forget(issue);
        }
    }

    /// The one comment a stopped run gets (its marker makes a retry post nothing).
    async fn stopped_comment(&self, issue: u64, run_id: &str, stop: &StopRequest) {
        let next = if stop.restart {
            "It starts again from there.".to_string()
        } else {
            format!(
                "Move the card into {} or comment `{} run` to continue; the run picks up from the card's column.",
                self.triggers.join(" or "),
                self.s.project.settings.watch.command_prefix
            )
        };
        let body = format!(
            "## Run Stopped\n\n{}: the run stopped at its next safe point (the agent was stopped; commits not yet pushed stay in the worktree).\n\n{next}",
            capitalise(&stop.reason)
        );
        let marker = Marker::new(run_id, "board", 0, "board-stop");
        if let Err(e) = self
            .s
            .access
            .gh
            .post_once(issue, &marker, &body, None)
            .await
        {
            tracing::warn!(issue, "could not post why the run stopped: {e}");
        }
    }

    async fn refresh_claims(&mut self) {
        for (issue, live) in &self.live {
            if let Some(held) = live.held {
                if let Err(e) = self.claims.refresh(held).await {
                    tracing::warn!(issue, "could not renew the claim: {e}");
                }
            }
        }
    }

    async fn poll(&mut self) {
        let started = Instant::now();
        let mut poll = match self.s.access.gh.poll_board(&self.board).await {
            Ok(poll) => poll,
            Err(e) => return self.poll_failed(e),
        };
        for card in &mut poll.cards {
            self.to_stage(card);
        }
        self.last_poll_error = None;
        let duration_ms = started.elapsed().as_millis() as u64;
        tracing::debug!(
            cards = poll.cards.len(),
            pages = poll.pages,
            cost = poll.rate.cost,
            remaining = poll.rate.remaining,
            reset_at = poll.rate.reset_at.as_deref().unwrap_or(""),
            "board polled in {duration_ms} ms"
        );
        let notice = Notice::Polled {
            cards: poll.cards.len(),
            skipped: poll.skipped,
            pages: poll.pages,
            cost: poll.rate.cost,
            remaining: poll.rate.remaining,
            reset_at: poll.rate.reset_at.clone(),
            duration_ms,
        };
        self.last_poll = json!({ "at": chrono::Utc::now().to_rfc3339(), "poll": notice });
        self.notice(notice);
        self.board_id = Some(poll.project_id.clone());
        if let Some(login) = &poll.viewer {
            self.claims.set_login(login);
        }
        let cards: BTreeMap<u64, &Card> = poll.cards.iter().map(|c| (c.issue, c)).collect();
        let live: Vec<u64> = self.live.keys().copied().collect();
        for issue in live {
            self.reconcile(issue, cards.get(&issue).copied(), None, Some(started));
        }
        let queued: Vec<u64> = self.queue.iter().map(|q| q.number).collect();
        for number in queued {
            self.recheck_queued(number, cards.get(&number).copied());
        }
        if self.accepting {
            let previous = self.state.board.clone();
            for card in &poll.cards {
                if arrived(card, previous.as_ref(), &self.triggers) {
                    self.arrived(card);
                }
            }
            for issue in std::mem::take(&mut self.retry) {
                self.enqueue(issue, "trying again", None);
            }
        }
        self.state.board = Some(
            poll.cards
                .iter()
                .map(|c| (c.issue, c.column.clone()))
                .collect(),
        );
        self.state.polled_at = Some(chrono::Utc::now());
        // The board as seen and what it queued, in one write.
        self.save_state();
        self.polled = true;
        if self.s.config.once {
            self.accepting = false;
        }
    }

    fn poll_failed(&mut self, e: GitHubError) {
        let text = e.to_string();
        // Each new reason once; the same trouble again is not repeated at every poll.
        if self.last_poll_error.as_deref() != Some(text.as_str()) {
            tracing::error!(
                "board poll failed: {text}; polling again in {:?}",
                self.s.config.poll_interval
            );
        }
        self.last_poll_error = Some(text.clone());
        self.notice(Notice::PollFailed { error: text });
    }

    /// Compare live run `issue` with its card as now seen; `read_at`: when the card was read
    /// (a move the run made since then makes the reading too old to judge).
    fn reconcile(
        &mut self,
        issue: u64,
        card: Option<&Card>,
        moved_by: Option<&str>,
        read_at: Option<Instant>,
    ) {
        let Some(pos) = self.tracker.position(issue) else {
            return;
        };
        let Some(column) = &pos.column else {
            return;
        };
        if pos.moving_since.is_some() || read_at.is_some_and(|t| t < pos.moved_at) {
            return;
        }
        match reconcile(column, card, &self.s.project.workflow, moved_by) {
            Verdict::Fine => {}
            Verdict::Stop(reason) => self.stop(
                issue,
                StopRequest {
                    reason,
                    restart: false,
                },
            ),
            Verdict::Restart { reason, .. } => self.stop(
                issue,
                StopRequest {
                    reason,
                    restart: true,
                },
            ),
        }
    }

    async fn event(&mut self, event: Event) {
        match event {
            Event::CardMoved(moved) => self.card_moved(moved).await,
            Event::Command(c) => {
                let settings = &self.s.project.settings;
                let ignore = if c.repository != settings.repo {
                    Some(format!(
                        "a command in {}, not {}",
                        c.repository, settings.repo
                    ))
                } else if matches!(c.target, Target::PullRequest(_))
                    != matches!(c.command, Ok(Command::Revise { .. }))
                {
                    Some(
                        "`revise` is taken on pull requests, `run`, `stop` and `status` on issues"
                            .to_string(),
                    )
                } else if !settings.is_codeowner(&c.author.login)
                    || !settings.is_codeowner(&c.sender.login)
                {
                    Some(format!("@{} is not a codeowner", c.sender.login))
                } else {
                    None
                };
                if let Some(reason) = ignore {
                    return self.ignored("command", reason);
                }
                match c.command {
                    Ok(command) => {
                        let by = c.author.login.clone();
                        self.command(c.target.number(), command, &by, Some(c.comment_id))
                            .await;
                    }
                    Err(e) => self.ignored("command", e.to_string()),
                }
            }
            Event::Cli(c) => {
                self.command(c.issue, c.command, "the command line", None)
                    .await
            }
            Event::IssueLabeled(l) => {
                let settings = &self.s.project.settings;
                if l.repository != settings.repo {
                    return self.ignored("label", format!("an issue of {}", l.repository));
                }
                if !settings.is_codeowner(&l.labeled_by.login) {
                    return self.ignored(
                        "label",
                        format!("@{} is not a codeowner", l.labeled_by.login),
                    );
                }
                if self.accepting {
                    self.enqueue(
                        l.issue,
                        &format!("labeled `{}` by @{}", l.label, l.labeled_by.login),
                        None,
                    );
                }
            }
            Event::Review(r) => self.review(r),
            Event::Ping(_) => {}
        }
    }

    /// A codeowner's review asking for changes sends the pull request back; other review
    /// activity waits for one (line comments come with their review when it is submitted).
    fn review(&mut self, r: ReviewActivity) {
        let settings = &self.s.project.settings;
        let reason = if r.repository != settings.repo {
            Some(format!("a review in {}", r.repository))
        } else if !settings.is_codeowner(&r.author.login) {
            Some(format!("@{} is not a codeowner", r.author.login))
        } else if !matches!(
            r.kind,
            ReviewKind::Review {
                state: ReviewState::ChangesRequested,
                ..
            }
        ) {
            Some(format!(
                "on pull request #{} only a submitted review requesting changes (or `{} revise`) starts a revision",
                r.pull_request, settings.watch.command_prefix
            ))
        } else {
            None
        };
        match reason {
            Some(reason) => self.ignored("review", reason),
            None => self.revise(
                r.pull_request,
                &format!("@{} requested changes", r.author.login),
            ),
        }
    }

    /// Queue a revision of pull request `pr`.
    fn revise(&mut self, pr: u64, why: &str) {
        if !self.accepting {
            return self.ignored("revise", "the scheduler is stopping".to_string());
        }
        if self.s.config.mode != Mode::Local {
            return self.ignored(
                "revise",
                "revisions run where the scheduler runs, not dispatched".to_string(),
            );
        }
        if self.live.contains_key(&pr) {
            return self.ignored(
                "revise",
                format!("a revision of pull request #{pr} is already live"),
            );
        }
        self.revisions.insert(pr);
        self.enqueue(pr, &format!("revise pull request #{pr}: {why}"), None);
    }

    fn ignored(&self, event: &str, reason: String) {
        tracing::info!(event, "ignored: {reason}");
        self.notice(Notice::Ignored {
            event: event.to_string(),
            reason,
        });
    }

    async fn command(&mut self, issue: u64, command: Command, by: &str, comment: Option<u64>) {
        match command {
            Command::Run if self.live.contains_key(&issue) => {
                self.already_running(issue, by, comment).await;
            }
            Command::Run => {
                if self.accepting {
                    self.enqueue(issue, &format!("`run` by @{by}"), None);
                }
            }
            Command::Stop => self.stop(
                issue,
                StopRequest {
                    reason: format!("@{by} asked it to stop"),
                    restart: false,
                },
            ),
            Command::Status => self.status_comment(issue, comment).await,
            // The revision reads the codeowners' feedback, this comment included, itself.
            Command::Revise { .. } => self.revise(issue, &format!("@{by} asked for a revision")),
        }
    }

    /// A `run` of an issue whose run is live: one line saying which run and where it is, in a
    /// comment of its own edited in place when asked again (for a command made in a comment).
    async fn already_running(&self, issue: u64, by: &str, comment: Option<u64>) {
        let run = Checkpoint::all(&self.s.project.root)
            .into_iter()
            .find(|cp| cp.issue == issue)
            .map_or_else(
                || "of this issue".to_string(),
                |cp| format!("`{}`", cp.run_id),
            );
        let column = self
            .tracker
            .position(issue)
            .and_then(|p| p.column)
            .map_or_else(
                || "a column not known yet".to_string(),
                |c| format!("**{c}**"),
            );
        let line = format!(
            "@{by}: run {run} is already running, with the card in {column}; nothing new was started (`{} stop` stops it).",
            self.s.project.settings.watch.command_prefix
        );
        if comment.is_some() {
            let marker = Marker::new(format!("issue-{issue}"), "watch", 0, "already-running");
            if let Err(e) = self.s.access.gh.post_or_edit(issue, &marker, &line).await {
                tracing::warn!(issue, "could not answer the `run`: {e}");
            }
        }
        self.ignored("run", line);
    }

    async fn status_comment(&self, issue: u64, comment: Option<u64>) {
        let line = match (self.live.get(&issue), self.tracker.position(issue)) {
            (Some(live), pos) => format!(
                "A run is live since {} with the card in {}.",
                live.since
                    .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                pos.and_then(|p| p.column)
                    .unwrap_or_else(|| "no known column".into())
            ),
            (None, _) if self.is_queued(issue) => {
                "The issue is queued: it starts when a run slot frees.".to_string()
            }
            (None, _) => format!(
                "No run is live here; {} run(s) are live on this board.",
                self.live.len()
            ),
        };
        let body = format!("## Run Status\n\n{line}");
        let key = comment.map_or_else(
            || chrono::Utc::now().timestamp().to_string(),
            |c| c.to_string(),
        );
        let marker = Marker::new(format!("status-{key}"), "status", 0, "status");
        if let Err(e) = self
            .s
            .access
            .gh
            .post_once(issue, &marker, &body, None)
            .await
        {
            tracing::warn!(issue, "could not post the status: {e}");
        }
    }

    async fn card_moved(&mut self, moved: crate::events::CardMoved) {
        let number = self.s.project.settings.project_number;
        let other_board = moved.board.number.is_some_and(|n| n != number)
            || self
                .board_id
                .as_deref()
                .is_some_and(|id| id != moved.board.node_id);
        if other_board {
            return self.ignored(
                "card",
                format!("a card of another board ({})", moved.board.node_id),
            );
        }
        let found = match self
            .s
            .access
            .gh
            .board_card(&moved.item_node_id, &self.board.status_field)
            .await
        {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(
                    "cannot read card {}: {e}; the next poll sees it",
                    moved.item_node_id
                );
                return;
            }
        };
        let Some(found) = found.filter(|f| f.project_number == number) else {
            return self.ignored(
                "card",
                format!("card {} is not on board #{number}", moved.item_node_id),
            );
        };
        let Some(mut card) = found.card else {
            return self.ignored(
                "card",
                format!(
                    "card {} holds no issue of {}",
                    moved.item_node_id, self.s.project.settings.repo
                ),
            );
        };
        self.board_id.get_or_insert(found.project_id);
        self.to_stage(&mut card);
        tracing::info!(
            "card of #{} moved to {} by {}",
            card.issue,
            card.column.as_deref().unwrap_or("no column"),
            moved.moved_by
        );
        let human = match &moved.origin {
            Origin::Webhook { .. } => Some(moved.moved_by.login.as_str()),
            _ => None,
        };
        if self.live.contains_key(&card.issue) {
            self.reconcile(card.issue, Some(&card), human, None);
        }
        self.recheck_queued(card.issue, Some(&card));
        if self.accepting && arrived(&card, self.state.board.as_ref(), &self.triggers) {
            self.arrived(&card);
        }
        if let Some(board) = &mut self.state.board {
            board.insert(card.issue, card.column.clone());
            self.dirty = true;
        }
    }

    /// Queue the start `card`'s arrival in a trigger column asks for.
    fn arrived(&mut self, card: &Card) {
        let column = card.column.clone().unwrap_or_default();
        self.enqueue(
            card.issue,
            &format!("the card arrived in {column}"),
            card.column.clone(),
        );
    }

    /// The card's column as the workflow's stage (`columns` maps stages to board options).
    fn to_stage(&self, card: &mut Card) {
        let settings = &self.s.project.settings;
        card.column = card.column.take().map(|option| settings.stage_of(&option));
    }

    /// Report the live runs that have newly gone silent.
    fn report_silent(&self) {
        for (issue, run_id, minutes) in self.s.monitor.newly_silent(chrono::Utc::now()) {
            tracing::warn!(
                issue,
                run = run_id.as_deref().unwrap_or("-"),
                "the run has journalled nothing for {minutes} min (watch.silentRunMin): its agent or a gate may hang"
            );
            self.notice(Notice::Silent {
                issue,
                run_id,
                minutes,
            });
        }
    }

    fn publish(&self) {
        self.s.monitor.scheduled(
            self.queue.iter().map(|q| q.number).collect(),
            self.live
                .iter()
                .map(|(issue, l)| Scheduled {
                    issue: *issue,
                    column: self.tracker.position(*issue).and_then(|p| p.column),
                    stopping: l.stop.as_ref().map(|s| s.reason.clone()),
                })
                .collect(),
            self.draining,
        );
        let live: Vec<Value> = self
            .live
            .iter()
            .map(|(issue, l)| {
                json!({
                    "issue": issue,
                    "column": self.tracker.position(*issue).and_then(|p| p.column),
                    "since": l.since.to_rfc3339(),
                    "stopping": l.stop.as_ref().map(|s| s.reason.clone()),
                })
            })
            .collect();
        let value = json!({
            "watcher": self.state.watcher,
            "mode": match &self.s.config.mode { Mode::Local => "local", Mode::Actions { .. } => "actions" },
            "max_concurrent": self.s.config.max_concurrent,
            "live": live,
            "queue": self.queue.iter().map(|q| q.number).collect::<Vec<_>>(),
            "last_poll": self.last_poll,
            "last_poll_error": self.last_poll_error,
            "draining": self.draining,
            "silent": self.s.monitor.silent(),
        });
        if let Ok(mut status) = self.s.status.lock() {
            *status = value;
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

/// A run's end as its JSON names it (`pull-request`, `stopped`, …).
fn end_name(end: &RunEnd) -> String {
    serde_json::to_value(end)
        .ok()
        .and_then(|v| v["kind"].as_str().map(str::to_string))
        .unwrap_or_else(|| "unknown".to_string())
}

fn capitalise(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}
