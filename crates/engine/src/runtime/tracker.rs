//! The tracking comment: one issue comment kept up to date with a run's progress, written by a task
//! of its own so a slow or failing GitHub never holds the run up. Writes come at least
//! [`THROTTLE`] apart while the run moves (the latest view wins), every [`REFRESH`] while an agent
//! works (its time so far), and once more, at once, when the run ends.

use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::github::{GitHub, Marker};
use crate::pipeline::{CurrentWork, Progress};
use crate::report::{TrackingLinks, tracking_text};

/// Least time between two edits of the tracking comment while the run moves.
pub(crate) const THROTTLE: Duration = Duration::from_secs(10);
/// How often the comment is refreshed while an agent works and nothing else changes.
const REFRESH: Duration = Duration::from_secs(60);
/// How long the end of a run waits for the last write.
const FINISH: Duration = Duration::from_secs(30);

/// The writer of one run's tracking comment.
pub(crate) struct Tracker {
    tx: watch::Sender<Option<Progress>>,
    end: CancellationToken,
    task: JoinHandle<()>,
}

impl Tracker {
    /// Start keeping the comment `existing` (an earlier run's, found by its marker), or a new one
    /// once there is something to show.
    pub(crate) fn start(
        gh: GitHub,
        issue: u64,
        existing: Option<u64>,
        links: TrackingLinks,
    ) -> Tracker {
        let (tx, rx) = watch::channel(None);
        let end = CancellationToken::new();
        let writer = Writer {
            gh,
            issue,
            id: existing,
            links,
            shown: String::new(),
            last_write: None,
            since: None,
        };
        let task = tokio::spawn(writer.keep(rx, end.clone()));
        Tracker { tx, end, task }
    }

    /// The run's latest progress (the writer shows it when the throttle allows).
    pub(crate) fn show(&self, progress: &Progress) {
        self.tx.send_if_modified(|shown| {
            let changed = shown.as_ref() != Some(progress);
            if changed {
                *shown = Some(progress.clone());
            }
            changed
        });
    }

    /// Write the latest progress now and stop.
    pub(crate) async fn finish(self) {
        self.end.cancel();
        if tokio::time::timeout(FINISH, self.task).await.is_err() {
            tracing::warn!("the tracking comment's last update did not finish in time");
        }
    }
}

struct Writer {
    gh: GitHub,
    issue: u64,
    id: Option<u64>,
    links: TrackingLinks,
    shown: String,
    last_write: Option<Instant>,
    /// The agent at work and since when.
    since: Option<(CurrentWork, Instant)>,
}

impl Writer {
    async fn keep(mut self, mut rx: watch::Receiver<Option<Progress>>, end: CancellationToken) {
        loop {
            let ending = end.is_cancelled();
            let progress = rx.borrow_and_update().clone();
            if let Some(p) = progress {
                self.write(&p).await;
            }
            if ending {
                return;
            }
            let throttle = self.last_write.map(|t| t + THROTTLE);
            let working = self.since.is_some();
            let wait = async {
                if let Some(at) = throttle {
                    tokio::time::sleep_until(at).await;
                }
                if working {
                    let _ = tokio::time::timeout(REFRESH - THROTTLE, rx.changed()).await;
                } else if rx.changed().await.is_err() {
                    // The run is gone without saying so: nothing more will come.
                    std::future::pending::<()>().await;
                }
            };
            tokio::select! {
                _ = end.cancelled() => {}
                _ = wait => {}
            }
        }
    }

    async fn write(&mut self, p: &Progress) {
        match (&p.current, &self.since) {
            (Some(w), Some((at, _))) if w == at => {}
            (Some(w), _) => self.since = Some((w.clone(), Instant::now())),
            (None, _) => self.since = None,
        }
        let working = self
            .since
            .as_ref()
            .map(|(_, t)| u64::try_from(t.elapsed().as_millis()).unwrap_or(u64::MAX));
        let body = Marker::tracking(&p.run_id).stamp(&tracking_text(p, working, &self.links));
        if body == self.shown {
            return;
        }
        let written = match self.id {
            Some(id) => match self.gh.update_comment(id, &body).await {
                // Deleted, or not ours to edit: start a new one.
                Err(e) if matches!(e.status(), Some(403 | 404 | 410)) => {
                    self.gh.create_comment(self.issue, &body).await
                }
                other => other,
            },
            None => self.gh.create_comment(self.issue, &body).await,
        };
        match written {
            Ok(comment) => {
                self.id = Some(comment.id);
                self.shown = body;
                self.last_write = Some(Instant::now());
            }
            Err(e) => tracing::warn!(
                issue = self.issue,
                "could not update the tracking comment: {e}"
            ),
        }
    }
}
