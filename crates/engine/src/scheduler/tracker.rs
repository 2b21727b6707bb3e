//! Where each live run has put its card, as the runs report it, and the column limits: a run
//! about to move its card into a full column waits there until another run leaves it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use futures_util::future::BoxFuture;
use tokio::sync::Notify;

use crate::runtime::RunHooks;

/// One live run's card, as the run knows it.
#[derive(Debug, Clone)]
pub(crate) struct Position {
    /// `None` until the run first moves the card, when the scheduler did not know its column.
    pub(crate) column: Option<String>,
    /// When the run last asked to move the card (a poll read before that may show the old column).
    pub(crate) moving_since: Option<Instant>,
    pub(crate) moved_at: Instant,
}

#[derive(Default)]
struct Inner {
    runs: BTreeMap<u64, Position>,
}

/// Shared by the scheduler and its runs.
#[derive(Clone)]
pub struct Tracker {
    inner: Arc<Mutex<Inner>>,
    room: Arc<Notify>,
    limits: Arc<BTreeMap<String, usize>>,
}

impl Tracker {
    pub fn new(limits: BTreeMap<String, usize>) -> Tracker {
        Tracker {
            inner: Arc::default(),
            room: Arc::new(Notify::new()),
            limits: Arc::new(limits),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A run starts with its card in `column`.
    pub(crate) fn enter(&self, issue: u64, column: &str) {
        self.start(issue, Some(column.to_string()));
    }

    /// A run starts with its card in a column the scheduler has not seen.
    pub(crate) fn enter_unknown(&self, issue: u64) {
        self.start(issue, None);
    }

    fn start(&self, issue: u64, column: Option<String>) {
        self.lock().runs.insert(
            issue,
            Position {
                column,
                moving_since: None,
                moved_at: Instant::now(),
            },
        );
    }

    /// A run ended: its column has room again.
    pub(crate) fn leave(&self, issue: u64) {
        self.lock().runs.remove(&issue);
        self.room.notify_waiters();
    }

    pub(crate) fn position(&self, issue: u64) -> Option<Position> {
        self.lock().runs.get(&issue).cloned()
    }

    /// Whether `column` has room for one more run (`issue` itself not counted).
    pub(crate) fn has_room(&self, column: &str, issue: u64) -> bool {
        let Some(limit) = self.limits.get(column) else {
            return true;
        };
        let inner = self.lock();
        let here = inner
            .runs
            .iter()
            .filter(|(i, p)| **i != issue && p.column.as_deref() == Some(column))
            .count();
        here < *limit
    }
}

impl RunHooks for Tracker {
    fn moving(&self, issue: u64, column: &str) -> BoxFuture<'static, ()> {
        let this = self.clone();
        let column = column.to_string();
        Box::pin(async move {
            loop {
                let notified = this.room.notified();
                if this.has_room(&column, issue) {
                    let mut inner = this.lock();
                    if let Some(p) = inner.runs.get_mut(&issue) {
                        p.column = Some(column.clone());
                        p.moving_since = Some(Instant::now());
                    }
                    drop(inner);
                    this.room.notify_waiters();
                    return;
                }
                tracing::info!(issue, column = %column, "waiting for room in {column}");
                notified.await;
            }
        })
    }

    fn moved(&self, issue: u64, _column: &str) {
        if let Some(p) = self.lock().runs.get_mut(&issue) {
            p.moving_since = None;
            p.moved_at = Instant::now();
        }
    }

    fn started(&self, issue: u64) {
        self.enter_unknown(issue);
    }

    fn ended(&self, issue: u64) {
        self.leave(issue);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_run_waits_for_room_in_a_limited_column() {
        let t = Tracker::new([("Implementation".to_string(), 1)].into());
        t.enter(1, "Implementation");
        t.enter(2, "TestDesign");
        assert!(!t.has_room("Implementation", 2));
        let waiting = tokio::spawn({
            let t = t.clone();
            async move { t.moving(2, "Implementation").await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        assert_eq!(t.position(2).unwrap().column.as_deref(), Some("TestDesign"));
        t.leave(1);
        tokio::time::timeout(std::time::Duration::from_secs(5), waiting)
            .await
            .expect("the move goes ahead once the column has room")
            .unwrap();
        assert_eq!(
            t.position(2).unwrap().column.as_deref(),
            Some("Implementation")
        );
        assert!(t.position(2).unwrap().moving_since.is_some());
        t.moved(2, "Implementation");
        assert!(t.position(2).unwrap().moving_since.is_none());
        // Columns without a limit always have room.
        assert!(t.has_room("Research", 9));
    }

    /// A task of an epic runs inside the epic's run: told of through the hooks, its card counts
    /// in the column limits from its first move until it ends.
    #[tokio::test]
    async fn a_task_run_inside_an_epic_counts_in_the_column_limits() {
        let t = Tracker::new([("Implementation".to_string(), 1)].into());
        let hooks: &dyn RunHooks = &t;
        hooks.started(11);
        hooks.moving(11, "Implementation").await;
        hooks.moved(11, "Implementation");
        assert!(
            !t.has_room("Implementation", 12),
            "the task fills the column"
        );
        hooks.ended(11);
        assert!(t.has_room("Implementation", 12));
        assert!(t.position(11).is_none());
    }
}
