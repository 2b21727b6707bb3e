//! The scheduler's decisions, without I/O: [`Core::on`] takes what happened (an [`Input`]: a
//! poll, an event, the answer to an action) and returns what to do ([`Action`]s). The async
//! driver in the parent module performs each action and feeds its answer back, in order, so a
//! start's admission, claim and spawn follow one another as they did inline; tests feed inputs
//! and read actions with no GitHub, no runs and a clock of their own.
//!
//! | action | performed by the driver | answered by |
//! |---|---|---|
//! | `Admit(key)` | the run's admission as a dry run | `Input::Admission` |
//! | `Claim(issue)` | a claim comment and label on GitHub | `Input::Claimed` |
//! | `Start { .. }` | `run_issue`/`run_revision` on its own task | `Input::RunEnded` (later) |
//! | `Dispatch { .. }` | one `workflow_dispatch` | `Input::Dispatched` |
//! | `ReadCard(moved)` | the card's read by its node id | `Input::CardRead` |
//! | `Stop(key)` | the run's cancellation | (its `RunEnded`) |
//! | `Release`, `Post`, `AlreadyRunning`, `Notice`, `SaveState` | as named | nothing |

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::board::{Columns, Sighting, Verdict, arrived, reconcile, still_due};
use super::claims::Held;
use super::state::{Owed, WatchState};
use super::tracker::Tracker;
use super::{Mode, Notice, Outcome, SchedulerConfig};
use crate::config::RepoSlug;
use crate::events::{
    CardMoved, Command, CommandError, Event, Origin, ReviewActivity, ReviewKind, ReviewState,
    Target,
};
use crate::github::{BoardPoll, Card, FoundCard, Marker};
use crate::pipeline::{Project, RunEnd, RunError, RunSummary};

/// What a unit of the scheduler's work is: an issue's run, a pull request's revision, or the
/// planning of an epic. Issues and pull requests are numbered apart by their kind here, never by
/// a shared `u64`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(tag = "kind", content = "number", rename_all = "snake_case")]
pub enum WorkKey {
    Issue(u64),
    Revision(u64),
    /// An epic (an issue) planned into its sub-issues: no card moves, no run of its own.
    Epic(u64),
}

impl WorkKey {
    /// The issue's or the pull request's number.
    pub(crate) fn number(self) -> u64 {
        match self {
            WorkKey::Issue(n) | WorkKey::Revision(n) | WorkKey::Epic(n) => n,
        }
    }

    pub(crate) fn is_revision(self) -> bool {
        matches!(self, WorkKey::Revision(_))
    }

    /// The issue whose run moves its card across the board (not a revision's, not an epic's).
    pub(crate) fn card_issue(self) -> Option<u64> {
        match self {
            WorkKey::Issue(n) => Some(n),
            WorkKey::Revision(_) | WorkKey::Epic(_) => None,
        }
    }

    pub(super) fn of(owed: &Owed) -> WorkKey {
        if owed.epic {
            WorkKey::Epic(owed.number)
        } else if owed.revision {
            WorkKey::Revision(owed.number)
        } else {
            WorkKey::Issue(owed.number)
        }
    }
}

/// The clock of one input: wall time for what is recorded, the monotonic clock for comparing a
/// card's reading with a run's move.
#[derive(Debug, Clone, Copy)]
pub struct Now {
    pub(crate) wall: DateTime<Utc>,
    pub mono: Instant,
}

impl Now {
    pub(crate) fn real() -> Now {
        Now {
            wall: Utc::now(),
            mono: Instant::now(),
        }
    }
}

/// What the run's admission said of an issue, asked before anything is written to it.
#[derive(Debug, Clone, PartialEq)]
pub enum Admission {
    Admit,
    Refused(String),
    /// GitHub could not say: asked again at the next poll.
    Unknown(String),
    /// An error running again does not cure.
    Failed(String),
}

/// The answer to a claim.
#[derive(Debug, Clone, PartialEq)]
pub enum ClaimAnswer {
    Ours(Held),
    Taken {
        holder: String,
        until: String,
    },
    /// GitHub could not say: asked again at the next poll.
    Unknown(String),
}

/// What happened.
#[derive(Debug)]
pub enum Input {
    /// The scheduler starts: the runs a dead watcher left (their checkpoints' keys) and, of the
    /// runs owed, those whose journals show them ended since they were asked for.
    Begin {
        leftovers: Vec<WorkKey>,
        paid: BTreeSet<WorkKey>,
    },
    /// A board poll read the board (`read_at`: when the read began).
    Polled {
        poll: BoardPoll,
        read_at: Instant,
        duration_ms: u64,
    },
    PollFailed(String),
    /// A webhook delivery or a command line's command.
    Event(Event),
    /// The answer to [`Action::ReadCard`]: `Err` when it could not be read.
    CardRead {
        moved: Box<CardMoved>,
        found: Result<Option<FoundCard>, String>,
    },
    Admission {
        key: WorkKey,
        answer: Admission,
    },
    Claimed {
        issue: u64,
        answer: ClaimAnswer,
    },
    Dispatched {
        issue: u64,
        workflow: String,
        /// `Err((error, transient))`.
        result: Result<(), (String, bool)>,
    },
    RunEnded {
        key: WorkKey,
        result: Result<RunSummary, RunError>,
    },
    /// A shutdown was asked for: drain.
    Shutdown,
}

/// What to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Notice(Notice),
    /// Write the watch state ([`Core::state`]).
    SaveState,
    Admit(WorkKey),
    Claim(u64),
    Start {
        key: WorkKey,
        held: Option<Held>,
        /// The column the card was last seen in (`None`: not known).
        column: Option<String>,
    },
    Dispatch {
        issue: u64,
        workflow: String,
        git_ref: String,
    },
    ReadCard(Box<CardMoved>),
    /// Cancel the live run: it stops at its next safe point.
    Stop(WorkKey),
    Release {
        issue: u64,
        held: Held,
    },
    /// Post `body` under `marker` on `issue`: once (`edit: false`), or edited in place.
    Post {
        issue: u64,
        marker: Marker,
        body: String,
        edit: bool,
    },
    /// Answer a `run` of a live issue: which run, where its card is (the driver knows the run's
    /// id from its checkpoint); `comment`: the command's comment, when it came in one.
    AlreadyRunning {
        issue: u64,
        /// The codeowner who asked (`None`: supervisor's command line).
        by: Option<String>,
        column: Option<String>,
        comment: Option<u64>,
    },
}

impl Action {
    /// The issue or pull request the action is about, when it is about one.
    pub(crate) fn work(&self) -> Option<WorkKey> {
        match self {
            Action::Admit(key) | Action::Stop(key) | Action::Start { key, .. } => Some(*key),
            Action::Claim(issue)
            | Action::Dispatch { issue, .. }
            | Action::Release { issue, .. }
            | Action::Post { issue, .. }
            | Action::AlreadyRunning { issue, .. } => Some(WorkKey::Issue(*issue)),
            Action::ReadCard(moved) => moved.issue.number.map(WorkKey::Issue),
            Action::Notice(_) | Action::SaveState => None,
        }
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
#[derive(Debug, Clone)]
struct Queued {
    key: WorkKey,
    /// The column whose arrival asked for it: the card must still be there when it starts.
    column: Option<String>,
    /// Startable: asked for by name, or its card was read in `column` by this process (a start
    /// restored from the watch state waits for the first poll to read it).
    confirmed: bool,
}

#[derive(Debug)]
struct Live {
    held: Option<Held>,
    stop: Option<StopRequest>,
    since: DateTime<Utc>,
}

/// A start under way: its admission or claim is being asked.
#[derive(Debug, Clone, Copy)]
struct Starting {
    key: WorkKey,
    /// Admitted already: the claim is being asked.
    admitted: bool,
}

/// The scheduler's status, as `GET /status` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    pub(crate) watcher: String,
    pub(crate) mode: &'static str,
    pub(crate) max_concurrent: usize,
    pub(crate) live: Vec<LiveStatus>,
    pub(crate) queue: Vec<u64>,
    pub(crate) last_poll: Option<PollStatus>,
    pub(crate) last_poll_error: Option<String>,
    pub(crate) draining: bool,
    /// Live runs that journalled nothing for `watch.silentRunMin` (the driver's monitor knows).
    pub(crate) silent: Vec<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LiveStatus {
    pub(crate) issue: u64,
    pub(crate) column: Option<String>,
    pub(crate) since: String,
    pub(crate) stopping: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PollStatus {
    pub(crate) at: String,
    pub(crate) poll: Notice,
}

/// Who may ask the scheduler for something: a codeowner, in the configured repository.
/// `actors`: everyone whose hand is in the request (a comment's author and whoever edited it).
pub fn authorise(
    project: &Project,
    repository: &RepoSlug,
    actors: &[&str],
    what: &str,
) -> Result<(), String> {
    let settings = &project.settings;
    if *repository != settings.repo {
        return Err(format!("{what} in {repository}, not {}", settings.repo));
    }
    match actors.iter().find(|a| !settings.is_codeowner(a)) {
        Some(stranger) => Err(format!("@{stranger} is not a codeowner")),
        None => Ok(()),
    }
}

/// The scheduler's state and decisions.
pub struct Core {
    project: Arc<Project>,
    config: SchedulerConfig,
    tracker: Tracker,
    triggers: Vec<String>,
    state: WatchState,
    live: BTreeMap<WorkKey, Live>,
    queue: VecDeque<Queued>,
    starting: Option<Starting>,
    /// Work to queue again at the next poll (a run GitHub's trouble paused).
    retry: BTreeSet<WorkKey>,
    /// Work already tried again in this process (`once`).
    retried: BTreeSet<WorkKey>,
    /// The board's node, once a poll has read it.
    board_id: Option<String>,
    /// New triggers are taken (off after the first poll with `once`, and when draining).
    accepting: bool,
    draining: bool,
    polled: bool,
    /// A poll was tried: nothing starts before, so a start knows where its card is now.
    poll_tried: bool,
    /// The watch state changed since it was last written.
    dirty: bool,
    last_poll_error: Option<String>,
    last_poll: Option<PollStatus>,
    outcome: Outcome,
    /// Actions decided and not yet returned.
    out: Vec<Action>,
}

impl Core {
    pub fn new(
        project: Arc<Project>,
        config: SchedulerConfig,
        tracker: Tracker,
        state: WatchState,
    ) -> Core {
        Core {
            triggers: project.trigger_columns(),
            project,
            config,
            tracker,
            state,
            live: BTreeMap::new(),
            queue: VecDeque::new(),
            starting: None,
            retry: BTreeSet::new(),
            retried: BTreeSet::new(),
            board_id: None,
            accepting: true,
            draining: false,
            polled: false,
            poll_tried: false,
            dirty: false,
            last_poll_error: None,
            last_poll: None,
            outcome: Outcome::default(),
            out: Vec::new(),
        }
    }

    /// Take one input; the actions it calls for, in order.
    pub(crate) fn on(&mut self, input: Input, now: Now) -> Vec<Action> {
        match input {
            Input::Begin { leftovers, paid } => self.begin(leftovers, &paid, now),
            Input::Polled {
                poll,
                read_at,
                duration_ms,
            } => self.polled(poll, read_at, duration_ms, now),
            Input::PollFailed(error) => self.poll_failed(error),
            Input::Event(event) => self.event(event, now),
            Input::CardRead { moved, found } => self.card_read(&moved, found, now),
            Input::Admission { key, answer } => self.admission(key, answer),
            Input::Claimed { issue, answer } => self.claimed(issue, answer, now),
            Input::Dispatched {
                issue,
                workflow,
                result,
            } => self.dispatched(issue, workflow, result),
            Input::RunEnded { key, result } => self.finished(key, result, now),
            Input::Shutdown => self.drain(),
        }
        if !self.draining {
            self.start_next(now);
        }
        if self.dirty {
            self.dirty = false;
            self.out.push(Action::SaveState);
        }
        std::mem::take(&mut self.out)
    }

    /// The watch state to write.
    pub(crate) fn state(&self) -> &WatchState {
        &self.state
    }

    pub(crate) fn outcome(&self) -> Outcome {
        Outcome {
            never_polled: !self.polled,
            ..self.outcome.clone()
        }
    }

    pub(crate) fn draining(&self) -> bool {
        self.draining
    }

    /// Whether the scheduler has nothing left to do: drained with no run live, or (`once`) the
    /// first poll's work done — or its one poll failed with nothing to wait for.
    pub(crate) fn done(&self) -> bool {
        let running = !self.live.is_empty() || self.starting.is_some();
        if self.draining {
            return self.live.is_empty();
        }
        if !self.config.once || running {
            return false;
        }
        if self.polled {
            return self.queue.is_empty();
        }
        // The one poll failed: there is nothing to wait for (what is owed stays owed).
        self.last_poll_error.is_some() && !self.queue.iter().any(|q| q.confirmed)
    }

    /// The issues of the live runs holding a claim.
    pub(crate) fn held(&self) -> Vec<Held> {
        self.live.values().filter_map(|l| l.held).collect()
    }

    pub(crate) fn has_live(&self) -> bool {
        !self.live.is_empty()
    }

    /// The queue's numbers, in order.
    pub(crate) fn queued(&self) -> Vec<u64> {
        self.queue.iter().map(|q| q.key.number()).collect()
    }

    /// Live work: its number, its column, why it is stopping.
    pub(crate) fn live(&self) -> Vec<(u64, Option<String>, Option<String>)> {
        self.live
            .iter()
            .map(|(key, l)| {
                (
                    key.number(),
                    self.column_of(*key),
                    l.stop.as_ref().map(|s| s.reason.clone()),
                )
            })
            .collect()
    }

    pub(crate) fn status(&self) -> Status {
        Status {
            watcher: self.state.watcher.clone(),
            mode: match &self.config.mode {
                Mode::Local => "local",
                Mode::Actions { .. } => "actions",
            },
            max_concurrent: self.config.max_concurrent,
            live: self
                .live
                .iter()
                .map(|(key, l)| LiveStatus {
                    issue: key.number(),
                    column: self.column_of(*key),
                    since: l.since.to_rfc3339(),
                    stopping: l.stop.as_ref().map(|s| s.reason.clone()),
                })
                .collect(),
            queue: self.queued(),
            last_poll: self.last_poll.clone(),
            last_poll_error: self.last_poll_error.clone(),
            draining: self.draining,
            silent: Vec::new(),
        }
    }

    fn column_of(&self, key: WorkKey) -> Option<String> {
        match key {
            WorkKey::Issue(issue) => self.tracker.position(issue).and_then(|p| p.column),
            WorkKey::Revision(_) | WorkKey::Epic(_) => None,
        }
    }

    fn notice(&mut self, n: Notice) {
        self.out.push(Action::Notice(n));
    }

    fn local(&self) -> bool {
        self.config.mode == Mode::Local
    }

    /// Runs a dead watcher left and runs a drain stopped go first; then what the last process
    /// owed and did not start (a start its card's arrival asked for waits for the first poll to
    /// find the card still there; what a journal shows ended since it was asked for is paid).
    fn begin(&mut self, leftovers: Vec<WorkKey>, paid: &BTreeSet<WorkKey>, now: Now) {
        if self.local() {
            let mut keys: BTreeSet<WorkKey> = std::mem::take(&mut self.state.resume)
                .into_iter()
                .map(|n| self.key_of_number(n))
                .collect();
            keys.extend(leftovers);
            for key in keys {
                self.enqueue(
                    key,
                    "resuming the run that was live when the watcher stopped",
                    None,
                    now,
                );
            }
        }
        for o in self.state.owed.clone() {
            let key = WorkKey::of(&o);
            if self.is_queued(key) || self.live.contains_key(&key) {
                continue;
            }
            if paid.contains(&key) {
                self.forget(key);
                continue;
            }
            self.queue.push_back(Queued {
                key,
                confirmed: o.column.is_none(),
                column: o.column,
            });
            self.notice(Notice::Queued {
                issue: key.number(),
                reason: format!("queued before the watcher stopped: {}", o.reason),
            });
        }
    }

    /// A number the watch state keeps without its kind: a revision when it is owed as one.
    fn key_of_number(&self, number: u64) -> WorkKey {
        let mut owed = self.state.owed.iter().map(WorkKey::of);
        owed.find(|k| k.number() == number && k.card_issue().is_none())
            .unwrap_or(WorkKey::Issue(number))
    }

    fn is_queued(&self, key: WorkKey) -> bool {
        self.queue.iter().any(|q| q.key == key)
    }

    fn busy(&self, key: WorkKey) -> bool {
        self.live.contains_key(&key)
            || self.is_queued(key)
            || self.starting.is_some_and(|s| s.key == key)
    }

    /// Queue a start; `column`: the column whose arrival asks for it (the card must still be
    /// there when it starts).
    fn enqueue(&mut self, key: WorkKey, reason: &str, column: Option<String>, now: Now) {
        if self.busy(key) {
            return;
        }
        self.owe(Owed {
            epic: matches!(key, WorkKey::Epic(_)),
            ..Owed::new(
                key.number(),
                key.is_revision(),
                reason,
                column.clone(),
                now.wall,
            )
        });
        self.queue.push_back(Queued {
            key,
            column,
            confirmed: true,
        });
        self.notice(Notice::Queued {
            issue: key.number(),
            reason: reason.to_string(),
        });
    }

    /// Record a run as owed (the latest ask for it replaces an earlier one).
    fn owe(&mut self, owed: Owed) {
        match self
            .state
            .owed
            .iter_mut()
            .find(|o| WorkKey::of(o) == WorkKey::of(&owed))
        {
            Some(o) => *o = owed,
            None => self.state.owed.push(owed),
        }
        self.dirty = true;
    }

    /// `key`'s run is no longer owed.
    fn forget(&mut self, key: WorkKey) {
        self.state.owed.retain(|o| WorkKey::of(o) != key);
        self.dirty = true;
    }

    /// Check a queued start against its card as now read: one whose card left the column that
    /// asked for it is dropped, one still there may start.
    fn recheck_queued(&mut self, issue: u64, card: Option<&Sighting>) {
        let key = WorkKey::Issue(issue);
        let Some(pos) = self.queue.iter().position(|q| q.key == key) else {
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
        self.forget(key);
        self.notice(Notice::Dequeued {
            issue,
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

    /// Start the next queued work when there is room and no start is under way.
    fn start_next(&mut self, now: Now) {
        while self.starting.is_none() && self.poll_tried {
            let local = self.local();
            if local && self.live.len() >= self.config.max_concurrent {
                return;
            }
            let pos = self.queue.iter().position(|q| {
                q.confirmed
                    && (!local
                        || q.key.card_issue().is_none_or(|n| {
                            self.seen_column(n)
                                .is_none_or(|c| self.tracker.has_room(&c, n))
                        }))
            });
            let Some(q) = pos.and_then(|p| self.queue.remove(p)) else {
                return;
            };
            if local && q.key.is_revision() {
                // A revision is claimed by its issue's local lock; its pull request carries no
                // claim, and its run's own admission decides.
                self.start(q.key, None, now);
                continue;
            }
            self.starting = Some(Starting {
                key: q.key,
                admitted: false,
            });
            self.out.push(Action::Admit(q.key));
        }
    }

    fn admission(&mut self, key: WorkKey, answer: Admission) {
        if self.starting.map(|s| s.key) != Some(key) {
            return;
        }
        match answer {
            Admission::Admit => {
                self.starting = Some(Starting {
                    key,
                    admitted: true,
                });
                self.out.push(Action::Claim(key.number()));
                return;
            }
            Admission::Refused(reason) => {
                self.notice(Notice::Refused {
                    issue: key.number(),
                    reason,
                });
                self.forget(key);
            }
            Admission::Unknown(_) => {
                self.retry.insert(key);
            }
            Admission::Failed(error) => {
                self.notice(Notice::Failed {
                    issue: key.number(),
                    error,
                    resumable: false,
                });
                self.forget(key);
            }
        }
        self.starting = None;
    }

    fn claimed(&mut self, issue: u64, answer: ClaimAnswer, now: Now) {
        // The claim is on the issue: its run's, or its planning as an epic.
        let Some(key) = (self.starting)
            .filter(|s| s.admitted && s.key.number() == issue && !s.key.is_revision())
            .map(|s| s.key)
        else {
            return;
        };
        self.starting = None;
        match answer {
            ClaimAnswer::Ours(held) => match &self.config.mode {
                Mode::Local => self.start(key, Some(held), now),
                // Planning runs here: one planner, no worktree, no job of its own.
                Mode::Actions { .. } if matches!(key, WorkKey::Epic(_)) => {
                    self.start(key, Some(held), now)
                }
                Mode::Actions { workflow, git_ref } => {
                    let (workflow, git_ref) = (workflow.clone(), git_ref.clone());
                    self.starting = Some(Starting {
                        key,
                        admitted: true,
                    });
                    self.out.push(Action::Dispatch {
                        issue,
                        workflow,
                        git_ref,
                    });
                }
            },
            ClaimAnswer::Taken { holder, until } => {
                // The holder runs it.
                self.forget(key);
                self.notice(Notice::Claimed {
                    issue,
                    holder,
                    until,
                });
            }
            ClaimAnswer::Unknown(_) => {
                self.retry.insert(key);
            }
        }
    }

    fn dispatched(&mut self, issue: u64, workflow: String, result: Result<(), (String, bool)>) {
        let key = WorkKey::Issue(issue);
        if self.starting.map(|s| s.key) == Some(key) {
            self.starting = None;
        }
        self.forget(key);
        match result {
            Ok(()) => {
                self.outcome.dispatched.push(issue);
                self.notice(Notice::Dispatched { issue, workflow });
            }
            Err((error, transient)) => self.notice(Notice::Failed {
                issue,
                error: format!("dispatching {workflow}: {error}"),
                resumable: transient,
            }),
        }
    }

    fn start(&mut self, key: WorkKey, held: Option<Held>, now: Now) {
        let column = key.card_issue().and_then(|n| self.seen_column(n));
        if let WorkKey::Issue(issue) = key {
            match &column {
                Some(c) => self.tracker.enter(issue, c),
                None => self.tracker.enter_unknown(issue),
            }
        }
        self.live.insert(
            key,
            Live {
                held,
                stop: None,
                since: now.wall,
            },
        );
        self.out.push(Action::Start {
            key,
            held,
            column: column.clone(),
        });
        self.notice(Notice::Started {
            issue: key.number(),
            column,
        });
    }

    /// Ask a live run to stop at its next safe point.
    fn stop(&mut self, key: WorkKey, request: StopRequest) {
        let Some(live) = self.live.get_mut(&key) else {
            return;
        };
        if live.stop.is_some() {
            return;
        }
        let reason = request.reason.clone();
        live.stop = Some(request);
        self.out.push(Action::Stop(key));
        self.notice(Notice::Stopping {
            issue: key.number(),
            reason,
        });
    }

    fn drain(&mut self) {
        if self.draining {
            return;
        }
        self.draining = true;
        self.accepting = false;
        // What was queued stays owed: the next start queues it again.
        self.queue.clear();
        let live: Vec<u64> = self.live.keys().map(|k| k.number()).collect();
        self.notice(Notice::Draining { live: live.clone() });
        // Their cancellation comes from the process's token; they are started again next time.
        self.state.resume.extend(live);
        self.dirty = true;
        self.outcome.drained = true;
    }

    fn finished(&mut self, key: WorkKey, result: Result<RunSummary, RunError>, now: Now) {
        let issue = key.number();
        if let Some(n) = key.card_issue() {
            self.tracker.leave(n);
        }
        let Some(live) = self.live.remove(&key) else {
            return;
        };
        if let Some(held) = live.held {
            self.out.push(Action::Release { issue, held });
        }
        let end = match &result {
            Ok(summary) => summary.end.kind().to_string(),
            Err(_) => "error".to_string(),
        };
        self.outcome.runs.push((issue, end.clone()));
        match result {
            Ok(summary) => {
                if let (Some(stop), RunEnd::Interrupted) = (&live.stop, &summary.end) {
                    self.stopped_comment(issue, &summary.run_id, stop);
                    if stop.restart && !self.draining {
                        self.enqueue(key, "the card was moved back", None, now);
                    }
                }
                if summary.end.is_resumable() && !self.draining {
                    self.retry.insert(key);
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
                    run_id: summary.run_id.into(),
                    end,
                    pr_url,
                });
            }
            Err(e) => {
                let resumable = e.is_resumable() && !matches!(e, RunError::Busy { .. });
                if resumable && !self.draining {
                    if self.config.once && self.retried.insert(key) {
                        // No later poll will come: once more now, from its checkpoint.
                        self.queue.push_back(Queued {
                            key,
                            column: None,
                            confirmed: true,
                        });
                    } else {
                        self.retry.insert(key);
                    }
                }
                self.notice(Notice::Failed {
                    issue,
                    error: e.to_string(),
                    resumable,
                });
            }
        }
        let again =
            self.retry.contains(&key) || self.state.resume.contains(&issue) || self.is_queued(key);
        if !again {
            self.forget(key);
        }
    }

    /// The one comment a stopped run gets (its marker makes a retry post nothing).
    fn stopped_comment(&mut self, issue: u64, run_id: &str, stop: &StopRequest) {
        let next = if stop.restart {
            "It starts again from there.".to_string()
        } else {
            format!(
                "Move the card into {} or comment `{} run` to continue; the run picks up from the card's column.",
                self.triggers.join(" or "),
                self.project.settings.watch.command_prefix
            )
        };
        let body = format!(
            "## Run Stopped\n\n{}: the run stopped at its next safe point (the agent was stopped; commits not yet pushed stay in the worktree).\n\n{next}",
            capitalise(&stop.reason)
        );
        self.out.push(Action::Post {
            issue,
            marker: Marker::new(run_id, "board", 0, crate::github::MarkerKind::BoardStop),
            body,
            edit: false,
        });
    }

    fn polled(&mut self, mut poll: BoardPoll, read_at: Instant, duration_ms: u64, now: Now) {
        let seen: Vec<Sighting> = std::mem::take(&mut poll.cards)
            .into_iter()
            .map(|card| self.sighting(card))
            .collect();
        self.last_poll_error = None;
        let notice = Notice::Polled {
            cards: seen.len(),
            skipped: poll.skipped,
            pages: poll.pages,
            cost: poll.rate.cost,
            remaining: poll.rate.remaining,
            reset_at: poll.rate.reset_at.clone(),
            duration_ms,
        };
        self.last_poll = Some(PollStatus {
            at: now.wall.to_rfc3339(),
            poll: notice.clone(),
        });
        self.notice(notice);
        self.board_id = Some(poll.project_id.clone());
        let cards: BTreeMap<u64, &Sighting> = seen.iter().map(|s| (s.issue(), s)).collect();
        let live: Vec<u64> = self.live.keys().filter_map(|k| k.card_issue()).collect();
        for issue in live {
            self.reconcile(issue, cards.get(&issue).copied(), None, Some(read_at));
        }
        let queued: Vec<u64> = self
            .queue
            .iter()
            .filter_map(|q| q.key.card_issue())
            .collect();
        for issue in queued {
            self.recheck_queued(issue, cards.get(&issue).copied());
        }
        if self.accepting {
            let previous = self.state.board.clone();
            for card in &seen {
                if let Some(epic) = self.arrival(card, previous.as_ref()) {
                    self.take_arrival(card, epic, now);
                }
            }
            for key in std::mem::take(&mut self.retry) {
                self.enqueue(key, "trying again", None, now);
            }
        }
        self.state.board = Some(seen.into_iter().map(|s| (s.issue(), s.place)).collect());
        self.state.polled_at = Some(now.wall);
        self.poll_tried = true;
        // The board as seen and what it queued, in one write.
        self.dirty = true;
        self.polled = true;
        if self.config.once {
            self.accepting = false;
        }
    }

    fn poll_failed(&mut self, error: String) {
        // Each new reason once; the same trouble again is not repeated at every poll.
        if self.last_poll_error.as_deref() != Some(error.as_str()) {
            tracing::error!(
                "board poll failed: {error}; polling again in {:?}",
                self.config.poll_interval
            );
        }
        self.last_poll_error = Some(error.clone());
        self.poll_tried = true;
        self.notice(Notice::PollFailed { error });
    }

    /// Compare live run `issue` with its card as now seen; `read_at`: when the card was read
    /// (a move the run made since then makes the reading too old to judge).
    fn reconcile(
        &mut self,
        issue: u64,
        card: Option<&Sighting>,
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
        let key = WorkKey::Issue(issue);
        match reconcile(column, card, &self.project.workflow, moved_by) {
            Verdict::Fine => {}
            Verdict::Stop(reason) => self.stop(
                key,
                StopRequest {
                    reason,
                    restart: false,
                },
            ),
            Verdict::Restart { reason, .. } => self.stop(
                key,
                StopRequest {
                    reason,
                    restart: true,
                },
            ),
        }
    }

    fn event(&mut self, event: Event, now: Now) {
        match event {
            Event::CardMoved(moved) if self.other_board(&moved) => {
                let reason = format!("a card of another board ({})", moved.board.node_id);
                self.ignored("card", reason);
            }
            Event::CardMoved(moved) => self.out.push(Action::ReadCard(Box::new(moved))),
            Event::Command(c) => {
                let actors = [c.author.login.as_str(), c.sender.login.as_str()];
                if let Err(reason) = authorise(&self.project, &c.repository, &actors, "a command") {
                    // A stranger's command gets no answer.
                    return self.ignored("command", reason);
                }
                let command = match c.command {
                    Ok(command) => command,
                    Err(e) => {
                        return self.command_help(
                            c.target.number(),
                            c.comment_id,
                            &c.author.login,
                            &e,
                        );
                    }
                };
                if matches!(c.target, Target::PullRequest(_))
                    != matches!(command, Command::Revise { .. })
                {
                    return self.ignored(
                        "command",
                        "`revise` is taken on pull requests, `run`, `stop`, `status` and `epic` on issues"
                            .to_string(),
                    );
                }
                let by = c.author.login.clone();
                self.command(
                    c.target.number(),
                    command,
                    Some(&by),
                    Some(c.comment_id),
                    now,
                );
            }
            Event::Cli(c) => self.command(c.issue, c.command, None, None, now),
            Event::IssueLabeled(l) => {
                let by = l.labeled_by.login.as_str();
                if let Err(reason) = authorise(&self.project, &l.repository, &[by], "an issue") {
                    return self.ignored("label", reason);
                }
                if self.accepting {
                    let reason = format!("labeled `{}` by @{by}", l.label);
                    let epic = l
                        .label
                        .eq_ignore_ascii_case(&self.project.settings.epic.label);
                    let key = if epic {
                        WorkKey::Epic(l.issue)
                    } else {
                        WorkKey::Issue(l.issue)
                    };
                    self.enqueue(key, &reason, None, now);
                }
            }
            Event::Review(r) => self.review(r, now),
            Event::Ping(_) => {}
        }
    }

    /// A codeowner's command supervisor cannot read: one answer per comment, saying what is
    /// wrong and what the commands are.
    fn command_help(&mut self, number: u64, comment: u64, by: &str, error: &CommandError) {
        let prefix = &self.project.settings.watch.command_prefix;
        let body = format!(
            "@{by}: {error}.\n\nCommands (on a line of their own):\n\n\
             - `{prefix} run`: start (or resume) the pipeline for this issue\n\
             - `{prefix} stop`: stop its run at the next safe point\n\
             - `{prefix} status`: say where its run is\n\
             - `{prefix} epic`: plan this issue as an epic, its tasks as sub-issues\n\
             - `{prefix} revise <what to change>` (on a pull request): send the work back"
        );
        self.out.push(Action::Post {
            issue: number,
            marker: Marker::new(
                format!("command-{comment}"),
                "watch",
                0,
                crate::github::MarkerKind::CommandHelp,
            ),
            body,
            edit: false,
        });
        self.ignored("command", error.to_string());
    }

    /// A codeowner's review asking for changes sends the pull request back; other review
    /// activity waits for one (line comments come with their review when it is submitted).
    fn review(&mut self, r: ReviewActivity, now: Now) {
        if let Err(reason) = authorise(
            &self.project,
            &r.repository,
            &[r.author.login.as_str()],
            "a review",
        ) {
            return self.ignored("review", reason);
        }
        if !matches!(
            r.kind,
            ReviewKind::Review {
                state: ReviewState::ChangesRequested,
                ..
            }
        ) {
            let reason = format!(
                "on pull request #{} only a submitted review requesting changes (or `{} revise`) starts a revision",
                r.pull_request, self.project.settings.watch.command_prefix
            );
            return self.ignored("review", reason);
        }
        let why = format!("@{} requested changes", r.author.login);
        self.revise(r.pull_request, &why, now);
    }

    /// Queue a revision of pull request `pr`.
    fn revise(&mut self, pr: u64, why: &str, now: Now) {
        let key = WorkKey::Revision(pr);
        if !self.accepting {
            return self.ignored("revise", "the scheduler is stopping".to_string());
        }
        if !self.local() {
            return self.ignored(
                "revise",
                "revisions run where the scheduler runs, not dispatched".to_string(),
            );
        }
        if self.live.contains_key(&key) {
            return self.ignored(
                "revise",
                format!("a revision of pull request #{pr} is already live"),
            );
        }
        self.enqueue(key, &format!("revise pull request #{pr}: {why}"), None, now);
    }

    fn ignored(&mut self, event: &str, reason: String) {
        tracing::info!(event, "ignored: {reason}");
        self.notice(Notice::Ignored {
            event: event.to_string(),
            reason,
        });
    }

    /// A command of a codeowner (`by`), or of supervisor's own command line (`None`).
    fn command(
        &mut self,
        issue: u64,
        command: Command,
        by: Option<&str>,
        comment: Option<u64>,
        now: Now,
    ) {
        let key = WorkKey::Issue(issue);
        let from = by.map_or_else(
            || "from supervisor's command line".to_string(),
            |l| format!("by @{l}"),
        );
        match command {
            Command::Run if self.live.contains_key(&key) => {
                self.out.push(Action::AlreadyRunning {
                    issue,
                    by: by.map(String::from),
                    column: self.column_of(key),
                    comment,
                });
            }
            Command::Run => {
                if self.accepting {
                    self.enqueue(key, &format!("`run` {from}"), None, now);
                }
            }
            Command::Stop => self.stop(
                key,
                StopRequest {
                    reason: match by {
                        Some(l) => format!("@{l} asked it to stop"),
                        None => "stopped from supervisor's command line".to_string(),
                    },
                    restart: false,
                },
            ),
            Command::Status => self.status_comment(issue, comment, now),
            Command::Epic => {
                if self.accepting {
                    self.enqueue(WorkKey::Epic(issue), &format!("`epic` {from}"), None, now);
                }
            }
            // The revision reads the codeowners' feedback, this comment included, itself.
            Command::Revise { .. } => {
                self.revise(issue, &format!("a revision was asked {from}"), now)
            }
        }
    }

    fn status_comment(&mut self, issue: u64, comment: Option<u64>, now: Now) {
        let key = WorkKey::Issue(issue);
        let line = match self.live.get(&key) {
            Some(live) => format!(
                "A run is live since {} with the card in {}.",
                live.since
                    .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                self.column_of(key)
                    .unwrap_or_else(|| "no known column".into())
            ),
            None if self.is_queued(key) => {
                "The issue is queued: it starts when a run slot frees.".to_string()
            }
            None => format!(
                "No run is live here; {} run(s) are live on this board.",
                self.live.len()
            ),
        };
        let key = comment.map_or_else(|| now.wall.timestamp().to_string(), |c| c.to_string());
        self.out.push(Action::Post {
            issue,
            marker: Marker::new(
                format!("status-{key}"),
                "status",
                0,
                crate::github::MarkerKind::Status,
            ),
            body: format!("## Run Status\n\n{line}"),
            edit: false,
        });
    }

    fn card_read(&mut self, moved: &CardMoved, found: Result<Option<FoundCard>, String>, now: Now) {
        let number = self.project.settings.project_number;
        let found = match found {
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
        let Some(card) = found.card else {
            let reason = format!(
                "card {} holds no issue of {}",
                moved.item_node_id, self.project.settings.repo
            );
            return self.ignored("card", reason);
        };
        self.board_id.get_or_insert(found.project_id);
        let card = self.sighting(card);
        tracing::info!(
            "card of #{} moved to {} by {}",
            card.issue(),
            card.place.as_deref().unwrap_or("no column"),
            moved.moved_by
        );
        let human = match &moved.origin {
            Origin::Webhook { .. } => Some(moved.moved_by.login.as_str()),
            _ => None,
        };
        let issue = card.issue();
        if self.live.contains_key(&WorkKey::Issue(issue)) {
            self.reconcile(issue, Some(&card), human, None);
        }
        self.recheck_queued(issue, Some(&card));
        if self.accepting {
            if let Some(epic) = self.arrival(&card, self.state.board.as_ref()) {
                self.take_arrival(&card, epic, now);
            }
        }
        if let Some(board) = &mut self.state.board {
            board.insert(issue, card.place.clone());
            self.dirty = true;
        }
    }

    /// Whether a card event concerns another board (known before its card is read).
    pub(crate) fn other_board(&self, moved: &CardMoved) -> bool {
        let number = self.project.settings.project_number;
        moved.board.number.is_some_and(|n| n != number)
            || self
                .board_id
                .as_deref()
                .is_some_and(|id| id != moved.board.node_id)
    }

    /// Whether `card` just arrived where it asks for work: `Some(false)` in a trigger column (a
    /// run), `Some(true)` in `epic.column` (an epic).
    fn arrival(&self, card: &Sighting, previous: Option<&Columns>) -> Option<bool> {
        if arrived(card, previous, &self.triggers) {
            return Some(false);
        }
        let epics = self.project.settings.epic.column.as_ref();
        epics
            .is_some_and(|c| arrived(card, previous, std::slice::from_ref(c)))
            .then_some(true)
    }

    /// Queue what `card`'s arrival asks for: a run, or (`epic`) the epic's planning and work.
    fn take_arrival(&mut self, card: &Sighting, epic: bool, now: Now) {
        if !epic {
            self.arrived(card, now);
            return;
        }
        let column = card.place.clone().unwrap_or_default();
        self.enqueue(
            WorkKey::Epic(card.issue()),
            &format!("the card arrived in {column}"),
            None,
            now,
        );
    }

    /// Queue the start `card`'s arrival in a trigger column asks for.
    fn arrived(&mut self, card: &Sighting, now: Now) {
        let column = card.place.clone().unwrap_or_default();
        self.enqueue(
            WorkKey::Issue(card.issue()),
            &format!("the card arrived in {column}"),
            card.place.clone(),
            now,
        );
    }

    /// The card as read, placed in the workflow's terms once.
    fn sighting(&self, card: Card) -> Sighting {
        let p = &self.project;
        Sighting::new(card, &p.settings, &p.workflow)
    }
}

fn capitalise(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
#[path = "core_tests.rs"]
mod tests;
