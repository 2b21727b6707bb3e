//! The live picture of a scheduler and its runs — the queue, the live runs with their stage,
//! agent, tokens, cost and gate rounds, the last finished runs — kept from what the scheduler
//! decides and what each run journals, for the dashboard, `GET /api/state` and
//! `supervisor status`. Every change is pushed to subscribers as it happens (the dashboard's
//! server-sent events): the picture after it and, for a journal event, the event.
//!
//! It also counts what the journal says into the process's [`metrics`](crate::metrics) and
//! knows which live runs have gone silent (journalled nothing for a while).

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::gates::{GateReport, GateStatus, Verdict};
use crate::metrics::metrics;
use crate::pipeline::{Entry, Event, Progress};

/// Finished runs the picture keeps, newest first.
const FINISHED_KEPT: usize = 20;
/// Gate rounds kept per live run, latest last.
const ROUNDS_KEPT: usize = 8;
/// Updates a slow subscriber may fall behind by before it skips to the latest picture.
const BACKLOG: usize = 256;

/// One gate's mark in a round.
#[derive(Debug, Clone, Serialize)]
pub struct GateMark {
    pub name: String,
    /// `pass`, `fail`, `warn`, `n/a` or `not-run`.
    pub(crate) mark: &'static str,
    pub(crate) ms: u64,
}

/// A round of gates: each gate as it finished, and the round's verdict once all have.
#[derive(Debug, Clone, Serialize)]
pub struct RoundView {
    pub stage: String,
    pub attempt: u32,
    pub(crate) gates: Vec<GateMark>,
    pub(crate) verdict: Option<&'static str>,
}

/// A live run as the picture shows it.
#[derive(Debug, Clone, Serialize)]
pub struct LiveView {
    /// The issue (or, for a revision, the pull request) the scheduler started it for.
    pub(crate) issue: u64,
    pub(crate) run_id: Option<String>,
    pub(crate) since: DateTime<Utc>,
    /// The card's column as the scheduler knows it.
    pub(crate) column: Option<String>,
    /// Why the scheduler is stopping it.
    pub(crate) stopping: Option<String>,
    /// The run's own view, once admitted.
    pub(crate) progress: Option<Progress>,
    pub(crate) gate_rounds: Vec<RoundView>,
    /// Tokens the agent at work has used so far (not yet in `progress`).
    pub(crate) working_tokens: u64,
    /// The last journal event: its kind and time.
    pub(crate) last_event: Option<(String, DateTime<Utc>)>,
    /// When it last journalled (or started).
    pub(crate) heard_at: DateTime<Utc>,
    /// It has journalled nothing for the silence limit.
    pub(crate) silent: bool,
}

/// A finished run.
#[derive(Debug, Clone, Serialize)]
pub struct FinishedView {
    pub(crate) issue: u64,
    pub(crate) run_id: Option<String>,
    /// `pull-request`, `stopped`, …, or `error`.
    pub(crate) end: String,
    pub(crate) pr_url: Option<String>,
    pub(crate) error: Option<String>,
    pub(crate) finished_at: DateTime<Utc>,
    pub(crate) tokens: u64,
    pub(crate) cost_usd: f64,
}

/// What the scheduler says about one live run.
#[derive(Debug, Clone, PartialEq)]
pub struct Scheduled {
    pub(crate) issue: u64,
    pub(crate) column: Option<String>,
    pub(crate) stopping: Option<String>,
}

#[derive(Default)]
struct State {
    watcher: String,
    queue: Vec<u64>,
    live: BTreeMap<u64, LiveView>,
    finished: VecDeque<FinishedView>,
    draining: bool,
}

struct Inner {
    started_at: DateTime<Utc>,
    silent_after: Option<Duration>,
    state: Mutex<State>,
    updates: broadcast::Sender<Arc<str>>,
}

/// The live picture; clones share it.
#[derive(Clone)]
pub struct Monitor {
    inner: Arc<Inner>,
}

impl Monitor {
    /// A picture that reports a live run silent once it has journalled nothing for
    /// `silent_after` (`None`: never).
    pub fn new(silent_after: Option<Duration>) -> Monitor {
        let (updates, _) = broadcast::channel(BACKLOG);
        Monitor {
            inner: Arc::new(Inner {
                started_at: Utc::now(),
                silent_after,
                state: Mutex::new(State::default()),
                updates,
            }),
        }
    }

    /// The watcher's id (its claims name it).
    pub(crate) fn set_watcher(&self, watcher: &str) {
        self.state().watcher = watcher.to_string();
    }

    /// The live runs that are silent now.
    pub(crate) fn silent(&self) -> Vec<u64> {
        let s = self.state();
        s.live
            .values()
            .filter(|l| l.silent)
            .map(|l| l.issue)
            .collect()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // The picture stays readable even if a holder panicked.
        self.inner.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The feed of the run the scheduler starts for `issue`.
    pub(crate) fn feed(&self, issue: u64) -> Feed {
        Feed {
            monitor: self.clone(),
            issue,
        }
    }

    /// Each update from now on: `{"event": …, "state": …}` as JSON (`event` is the journal
    /// event that caused it, or null).
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Arc<str>> {
        self.inner.updates.subscribe()
    }

    /// The picture now.
    pub(crate) fn picture(&self) -> Value {
        let state = self.state();
        self.picture_of(&state)
    }

    /// The picture now, as an update with no event.
    pub(crate) fn update(&self) -> Arc<str> {
        let state = self.state();
        self.message(&state, Value::Null)
    }

    fn picture_of(&self, s: &State) -> Value {
        let live: Vec<Value> = s.live.values().map(live_json).collect();
        json!({
            "watcher": s.watcher,
            "pid": std::process::id(),
            "started_at": self.inner.started_at,
            "now": Utc::now(),
            "silent_run_min": self.inner.silent_after.map(|d| d.as_secs() / 60),
            "draining": s.draining,
            "queue": s.queue,
            "live": live,
            "silent": s.live.values().filter(|l| l.silent).map(|l| l.issue).collect::<Vec<_>>(),
            "finished": s.finished,
        })
    }

    fn message(&self, s: &State, event: Value) -> Arc<str> {
        json!({ "event": event, "state": self.picture_of(s) })
            .to_string()
            .into()
    }

    /// Push the picture of `s` (and `event`) to subscribers.
    fn push(&self, s: &State, event: Value) {
        if self.inner.updates.receiver_count() > 0 {
            let _ = self.inner.updates.send(self.message(s, event));
        }
    }

    /// The scheduler started a run for `issue`, its card in `column`.
    pub(crate) fn started(&self, issue: u64, column: Option<String>) {
        self.started_at(issue, column, Utc::now());
    }

    fn started_at(&self, issue: u64, column: Option<String>, now: DateTime<Utc>) {
        metrics().runs_started.inc();
        let mut s = self.state();
        s.queue.retain(|q| *q != issue);
        s.live.insert(
            issue,
            LiveView {
                issue,
                run_id: None,
                since: now,
                column,
                stopping: None,
                progress: None,
                gate_rounds: Vec::new(),
                working_tokens: 0,
                last_event: None,
                heard_at: now,
                silent: false,
            },
        );
        gauges(&s);
        self.push(&s, Value::Null);
    }

    /// The scheduler's queue and live runs as it now sees them.
    pub(crate) fn scheduled(&self, queue: Vec<u64>, live: Vec<Scheduled>, draining: bool) {
        let mut s = self.state();
        let mut changed = s.queue != queue || s.draining != draining;
        s.queue = queue;
        s.draining = draining;
        for l in live {
            if let Some(view) = s.live.get_mut(&l.issue) {
                if view.column != l.column || view.stopping != l.stopping {
                    view.column = l.column;
                    view.stopping = l.stopping;
                    changed = true;
                }
            }
        }
        gauges(&s);
        if changed {
            self.push(&s, Value::Null);
        }
    }

    /// The run of `issue` ended (`end`: its end's kind, or `error` with `error` saying why).
    pub(crate) fn finished(
        &self,
        issue: u64,
        run_id: Option<String>,
        end: &str,
        pr_url: Option<String>,
        error: Option<String>,
    ) {
        metrics().run_finished(end);
        let mut s = self.state();
        let live = s.live.remove(&issue);
        let progress = live.as_ref().and_then(|l| l.progress.as_ref());
        let view = FinishedView {
            issue,
            run_id: run_id.or_else(|| live.as_ref().and_then(|l| l.run_id.clone())),
            end: end.to_string(),
            pr_url: pr_url.or_else(|| progress.and_then(|p| p.pr.clone())),
            error,
            finished_at: Utc::now(),
            tokens: progress.map_or(0, |p| p.tokens),
            cost_usd: progress.map_or(0.0, |p| p.cost_usd),
        };
        s.finished.push_front(view);
        s.finished.truncate(FINISHED_KEPT);
        gauges(&s);
        self.push(&s, Value::Null);
    }

    /// The run of `issue` ended as `result`.
    pub(crate) fn run_ended(
        &self,
        issue: u64,
        result: &Result<crate::pipeline::RunSummary, crate::pipeline::RunError>,
    ) {
        use crate::pipeline::RunEnd;
        match result {
            Ok(summary) => self.finished(
                issue,
                Some(summary.run_id.to_string()),
                summary.end.kind(),
                match &summary.end {
                    RunEnd::PullRequest { url, .. } | RunEnd::Revised { url, .. } => {
                        Some(url.clone())
                    }
                    _ => None,
                },
                None,
            ),
            Err(e) => self.finished(issue, None, "error", None, Some(e.to_string())),
        }
    }

    /// Live runs that have newly gone silent at `now` (journalled nothing for the limit): their
    /// issue, run id and minutes of silence. Each is reported once until it journals again.
    pub(crate) fn newly_silent(&self, now: DateTime<Utc>) -> Vec<(u64, Option<String>, i64)> {
        let Some(limit) = self.inner.silent_after else {
            return Vec::new();
        };
        let mut s = self.state();
        let mut found = Vec::new();
        for view in s.live.values_mut() {
            if !view.silent && is_silent(view.heard_at, now, limit) {
                view.silent = true;
                found.push((
                    view.issue,
                    view.run_id.clone(),
                    (now - view.heard_at).num_minutes(),
                ));
            }
        }
        metrics()
            .silent_runs
            .set(s.live.values().filter(|l| l.silent).count() as i64);
        if !found.is_empty() {
            self.push(&s, Value::Null);
        }
        found
    }

    fn journalled(&self, issue: u64, run_id: &str, entry: &Entry) {
        count(&entry.event);
        let at = DateTime::parse_from_rfc3339(&entry.time)
            .map(|t| t.with_timezone(&Utc))
            .unwrap_or_else(|_| Utc::now());
        let kind = kind_of(&entry.event);
        let mut s = self.state();
        let Some(view) = s.live.get_mut(&issue) else {
            return;
        };
        view.run_id.get_or_insert_with(|| run_id.to_string());
        view.heard_at = at;
        view.silent = false;
        view.last_event = Some((kind.clone(), at));
        if matches!(
            entry.event,
            Event::StageStarted { .. } | Event::AgentFinished { .. }
        ) {
            // Its tokens are counted in the progress from now on (or a new agent starts at 0).
            view.working_tokens = 0;
        }
        rounds(&mut view.gate_rounds, &entry.event);
        let event = json!({
            "issue": issue,
            "run_id": run_id,
            "seq": entry.seq,
            "time": entry.time,
            "kind": kind,
        });
        self.push(&s, event);
    }

    fn pulsed(&self, issue: u64, tokens: u64) {
        let mut s = self.state();
        let Some(view) = s.live.get_mut(&issue) else {
            return;
        };
        if view.working_tokens == tokens {
            return;
        }
        view.working_tokens = tokens;
        self.push(&s, Value::Null);
    }

    fn progressed(&self, issue: u64, progress: &Progress) {
        let mut s = self.state();
        let Some(view) = s.live.get_mut(&issue) else {
            return;
        };
        if view.progress.as_ref() == Some(progress) {
            return;
        }
        view.run_id
            .get_or_insert_with(|| progress.run_id.to_string());
        view.progress = Some(progress.clone());
        self.push(&s, Value::Null);
    }
}

/// What one run tells the picture: its journal's events and its progress.
#[derive(Clone)]
pub struct Feed {
    monitor: Monitor,
    issue: u64,
}

impl Feed {
    /// The run `run_id` journalled `entry`.
    pub(crate) fn journalled(&self, run_id: &str, entry: &Entry) {
        self.monitor.journalled(self.issue, run_id, entry);
    }

    /// The run's view changed.
    pub(crate) fn progressed(&self, progress: &Progress) {
        self.monitor.progressed(self.issue, progress);
    }

    /// The agent at work has used `tokens` so far.
    pub(crate) fn pulsed(&self, tokens: u64) {
        self.monitor.pulsed(self.issue, tokens);
    }

    /// The feed of a run started inside this one (a task of an epic): a live run of its own in
    /// the picture until [`Feed::ended`].
    pub(crate) fn inner_run(&self, issue: u64) -> Feed {
        self.monitor.started(issue, None);
        Feed {
            monitor: self.monitor.clone(),
            issue,
        }
    }

    /// The run this feed is for ended as `result`.
    pub(crate) fn ended(
        &self,
        result: &Result<crate::pipeline::RunSummary, crate::pipeline::RunError>,
    ) {
        self.monitor.run_ended(self.issue, result);
    }
}

/// Whether a live run last heard from at `heard_at` is silent at `now`: nothing journalled for
/// `limit` or longer.
pub fn is_silent(heard_at: DateTime<Utc>, now: DateTime<Utc>, limit: Duration) -> bool {
    (now - heard_at).to_std().is_ok_and(|quiet| quiet >= limit)
}

fn gauges(s: &State) {
    let m = metrics();
    m.live_runs.set(s.live.len() as i64);
    m.queued_runs.set(s.queue.len() as i64);
}

fn live_json(l: &LiveView) -> Value {
    let p = l.progress.as_ref();
    let current = p.and_then(|p| p.current.as_ref());
    json!({
        "issue": l.issue,
        "run_id": l.run_id,
        "since": l.since,
        "column": l.column,
        "stopping": l.stopping,
        "stage": current.map(|c| c.stage.as_str()).or(l.column.as_deref()),
        "agent": current.map(|c| c.agent.as_str()),
        "attempt": current.map(|c| c.attempt),
        "stages": p.map(|p| &p.stages),
        "tokens": p.map_or(0, |p| p.tokens) + l.working_tokens,
        "cost_usd": p.map_or(0.0, |p| p.cost_usd),
        "pr_url": p.and_then(|p| p.pr.as_deref()),
        "gate_rounds": l.gate_rounds,
        "last_event": l.last_event.as_ref().map(|(kind, at)| json!({ "kind": kind, "at": at })),
        "silent": l.silent,
    })
}

/// The journal name of an event's kind (`stage-started`, …).
fn kind_of(event: &Event) -> String {
    serde_json::to_value(event)
        .ok()
        .and_then(|v| v["kind"].as_str().map(str::to_string))
        .unwrap_or_default()
}

/// A gate's result as one word.
fn mark(status: &GateStatus) -> &'static str {
    match status {
        GateStatus::Pass => "pass",
        GateStatus::Fail => "fail",
        GateStatus::Warn => "warn",
        GateStatus::NotApplicable => "n/a",
        GateStatus::NotRun { .. } => "not-run",
    }
}

fn gate_mark(r: &GateReport) -> GateMark {
    GateMark {
        name: r.name.clone(),
        mark: mark(&r.status),
        ms: r.duration_ms,
    }
}

/// Keep the gate rounds up to date with `event`.
fn rounds(rounds: &mut Vec<RoundView>, event: &Event) {
    let (stage, attempt) = match event {
        Event::GateFinished { stage, attempt, .. }
        | Event::GatesFinished { stage, attempt, .. } => (stage, *attempt),
        _ => return,
    };
    let at = rounds
        .iter()
        .position(|r| r.stage == *stage && r.attempt == attempt && r.verdict.is_none());
    let round = match at {
        Some(i) => &mut rounds[i],
        None => {
            rounds.push(RoundView {
                stage: stage.clone(),
                attempt,
                gates: Vec::new(),
                verdict: None,
            });
            if rounds.len() > ROUNDS_KEPT {
                rounds.remove(0);
            }
            let last = rounds.len() - 1;
            &mut rounds[last]
        }
    };
    match event {
        Event::GateFinished { report, .. } => round.gates.push(gate_mark(report)),
        Event::GatesFinished { reports, .. } => {
            round.gates = reports.iter().map(gate_mark).collect();
            round.verdict = Some(Verdict::of(reports).as_str());
        }
        _ => {}
    }
}

/// Count what `event` says into the metrics.
fn count(event: &Event) {
    let m = metrics();
    match event {
        Event::AgentFinished { stage, stats, .. } => m.agent_finished(
            stage,
            &stats.agent,
            &stats.backend,
            stats.duration_ms as f64 / 1000.0,
            stats.usage.total,
            stats.usage.cost_usd,
        ),
        Event::GateFinished { report, .. } => m.gate_finished(
            &report.name,
            mark(&report.status),
            report.duration_ms as f64 / 1000.0,
        ),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(minute: i64) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-01-01T10:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
            + chrono::Duration::minutes(minute)
    }

    fn entry(seq: u64, time: DateTime<Utc>) -> Entry {
        Entry {
            v: crate::pipeline::FORMAT,
            seq,
            time: time.to_rfc3339(),
            event: Event::StageStarted {
                stage: "Research".into(),
                agent: "researcher".into(),
                attempt: 1,
                fix: None,
            },
        }
    }

    /// A task of an epic shows as a live run of its own beside the epic's, and among the
    /// finished ones once it ended.
    #[test]
    fn a_run_inside_another_shows_in_the_picture_until_it_ends() {
        let m = Monitor::new(None);
        m.started(1, Some("Epics".into()));
        let task = m.feed(1).inner_run(2);
        task.journalled("2-run", &entry(1, at(0)));
        let live: Vec<u64> = (m.picture()["live"].as_array().unwrap().iter())
            .map(|l| l["issue"].as_u64().unwrap())
            .collect();
        assert_eq!(live, [1, 2]);
        task.ended(&Err(crate::pipeline::RunError::Unfinished("gone".into())));
        let picture = m.picture();
        assert_eq!(picture["live"].as_array().unwrap().len(), 1);
        assert_eq!(picture["finished"][0]["issue"], 2);
        assert_eq!(picture["finished"][0]["run_id"], "2-run");
        assert_eq!(picture["finished"][0]["end"], "error");
    }

    #[test]
    fn a_run_is_silent_from_the_limit_on() {
        let limit = Duration::from_secs(30 * 60);
        assert!(!is_silent(at(0), at(29), limit));
        assert!(is_silent(at(0), at(30), limit));
        assert!(is_silent(at(0), at(90), limit));
        // A clock that went back is not silence.
        assert!(!is_silent(at(10), at(0), limit));
    }

    #[test]
    fn a_silent_run_is_reported_once_until_it_journals_again() {
        let m = Monitor::new(Some(Duration::from_secs(30 * 60)));
        m.started_at(7, Some("Research".into()), at(0));
        m.started_at(8, Some("Research".into()), at(0));
        let feed = m.feed(7);
        feed.journalled("7-run", &entry(1, at(5)));
        assert!(m.newly_silent(at(29)).is_empty());
        // 8 journalled nothing since it started; 7 last at minute 5.
        assert_eq!(m.newly_silent(at(31)), vec![(8, None, 31)]);
        assert!(m.newly_silent(at(32)).is_empty(), "reported once");
        assert_eq!(
            m.newly_silent(at(36)),
            vec![(7, Some("7-run".to_string()), 31)]
        );
        let picture = m.picture();
        assert_eq!(picture["silent"], json!([7, 8]));
        assert_eq!(picture["live"][0]["silent"], true);
        // Journalling again ends the silence; a new silence is reported again.
        feed.journalled("7-run", &entry(2, at(40)));
        assert_eq!(m.picture()["silent"], json!([8]));
        assert!(m.newly_silent(at(69)).is_empty());
        assert_eq!(m.newly_silent(at(70)).len(), 1);
    }

    #[test]
    fn without_a_limit_no_run_is_ever_silent() {
        let m = Monitor::new(None);
        m.started_at(1, None, at(0));
        assert!(m.newly_silent(at(10_000)).is_empty());
    }

    #[tokio::test]
    async fn each_change_is_pushed_with_the_picture_after_it() {
        let m = Monitor::new(None);
        let mut updates = m.subscribe();
        m.scheduled(vec![3, 4], Vec::new(), false);
        let first: Value = serde_json::from_str(&updates.recv().await.unwrap()).unwrap();
        assert_eq!(first["state"]["queue"], json!([3, 4]));
        assert_eq!(first["event"], Value::Null);
        // The same view again pushes nothing.
        m.scheduled(vec![3, 4], Vec::new(), false);
        m.started(3, Some("Research".into()));
        let started: Value = serde_json::from_str(&updates.recv().await.unwrap()).unwrap();
        assert_eq!(started["state"]["queue"], json!([4]));
        assert_eq!(started["state"]["live"][0]["issue"], 3);
        m.feed(3).journalled("3-run", &entry(1, at(0)));
        let journalled: Value = serde_json::from_str(&updates.recv().await.unwrap()).unwrap();
        assert_eq!(journalled["event"]["kind"], "stage-started");
        assert_eq!(journalled["event"]["run_id"], "3-run");
        assert_eq!(journalled["state"]["live"][0]["run_id"], "3-run");
        // The agent at work's tokens count until its own end is journalled.
        m.feed(3).pulsed(700);
        let pulsed: Value = serde_json::from_str(&updates.recv().await.unwrap()).unwrap();
        assert_eq!(pulsed["state"]["live"][0]["tokens"], 700);
        m.feed(3).journalled("3-run", &entry(2, at(1)));
        let next: Value = serde_json::from_str(&updates.recv().await.unwrap()).unwrap();
        assert_eq!(next["state"]["live"][0]["tokens"], 0);
        m.finished(
            3,
            None,
            "pull-request",
            Some("http://x/pull/1".into()),
            None,
        );
        let done: Value = serde_json::from_str(&updates.recv().await.unwrap()).unwrap();
        assert_eq!(done["state"]["live"], json!([]));
        assert_eq!(done["state"]["finished"][0]["end"], "pull-request");
        assert_eq!(done["state"]["finished"][0]["run_id"], "3-run");
        assert_eq!(done["state"]["finished"][0]["pr_url"], "http://x/pull/1");
    }
}
