//! Which refused deliveries are logged. Anyone can send deliveries that are refused before they
//! are known to come from GitHub, so a line each would let anyone grow the log: the first
//! refusal of a kind after a quiet interval is logged at once, with its reason, and the others
//! are counted and logged as one summary line per interval (and when the receiver stops).

use std::time::{Duration, Instant};

/// A delivery refused before it was known to be GitHub's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Missing, malformed or wrong signature (401).
    BadSignature,
    /// Over the size limit (413).
    TooLarge,
    /// Over the limit of bodies being received at once (503).
    Busy,
    /// Its body did not arrive in time (408).
    TooSlow,
    /// Its body could not be read (400).
    Unreadable,
    /// Its body could not be kept in a temporary file (503).
    Unstored,
}

impl Refusal {
    const ALL: [Refusal; 6] = [
        Refusal::BadSignature,
        Refusal::TooLarge,
        Refusal::Busy,
        Refusal::TooSlow,
        Refusal::Unreadable,
        Refusal::Unstored,
    ];

    /// How a summary names this kind.
    fn name(self) -> &'static str {
        match self {
            Refusal::BadSignature => "bad signature",
            Refusal::TooLarge => "too large",
            Refusal::Busy => "too many at once",
            Refusal::TooSlow => "too slow",
            Refusal::Unreadable => "unreadable",
            Refusal::Unstored => "not stored",
        }
    }

    /// The outcome label of this kind in the metrics.
    pub(crate) fn outcome(self) -> &'static str {
        match self {
            Refusal::BadSignature => "bad-signature",
            Refusal::TooLarge => "too-large",
            Refusal::Busy => "busy",
            Refusal::TooSlow => "too-slow",
            Refusal::Unreadable => "unreadable",
            Refusal::Unstored => "unstored",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The refusals of the current interval, and which kinds the interval before had.
#[derive(Debug)]
pub(crate) struct RefusalLog {
    interval: Duration,
    since: Instant,
    counts: [u64; Refusal::ALL.len()],
    /// Refusals of the current interval that were not logged at once.
    unlogged: u64,
    /// Kinds refused in the interval before the current one.
    recent: [bool; Refusal::ALL.len()],
}

/// What to log for one refusal.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct ToLog {
    /// The summary of an interval that ended before this refusal came.
    pub(crate) summary: Option<String>,
    /// Whether to log this refusal itself, with its reason.
    pub(crate) at_once: bool,
}

impl RefusalLog {
    pub(crate) fn new(interval: Duration, now: Instant) -> RefusalLog {
        RefusalLog {
            interval,
            since: now,
            counts: [0; Refusal::ALL.len()],
            unlogged: 0,
            recent: [false; Refusal::ALL.len()],
        }
    }

    pub(crate) fn interval(&self) -> Duration {
        self.interval
    }

    /// Count a refusal at `now`.
    pub(crate) fn refused(&mut self, kind: Refusal, now: Instant) -> ToLog {
        // Without a timer the interval ends here (a receiver outside a runtime has none).
        let summary = self.tick(now);
        let i = kind.index();
        let at_once = self.counts[i] == 0 && !self.recent[i];
        self.counts[i] += 1;
        if !at_once {
            self.unlogged += 1;
        }
        ToLog { summary, at_once }
    }

    /// End the interval if it is over: its summary, unless every refusal in it was logged.
    pub(crate) fn tick(&mut self, now: Instant) -> Option<String> {
        let elapsed = now.saturating_duration_since(self.since);
        if elapsed < self.interval {
            return None;
        }
        let summary = self.summary(elapsed);
        // After a whole quiet interval, the next refusal of any kind is news again.
        self.recent = if elapsed < self.interval * 2 {
            self.counts.map(|n| n > 0)
        } else {
            [false; Refusal::ALL.len()]
        };
        self.counts = [0; Refusal::ALL.len()];
        self.unlogged = 0;
        self.since = now;
        summary
    }

    /// The summary of the interval so far, as the receiver stops.
    pub(crate) fn finish(&mut self, now: Instant) -> Option<String> {
        self.summary(now.saturating_duration_since(self.since))
    }

    fn summary(&self, elapsed: Duration) -> Option<String> {
        if self.unlogged == 0 {
            return None;
        }
        let counts: Vec<String> = Refusal::ALL
            .iter()
            .filter(|kind| self.counts[kind.index()] > 0)
            .map(|kind| format!("{} {}", self.counts[kind.index()], kind.name()))
            .collect();
        Some(format!(
            "webhook deliveries refused in the last {} s: {}",
            elapsed.as_secs().max(1),
            counts.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: Duration = Duration::from_secs(60);

    #[test]
    fn a_flood_is_one_line_at_once_and_one_summary() {
        let start = Instant::now();
        let mut log = RefusalLog::new(MINUTE, start);
        let first = log.refused(Refusal::BadSignature, start);
        assert_eq!(
            first,
            ToLog {
                summary: None,
                at_once: true
            }
        );
        let mut lines = 0;
        for i in 1..2914 {
            let at = start + Duration::from_millis(i);
            let logged = log.refused(Refusal::BadSignature, at);
            lines += usize::from(logged.at_once) + usize::from(logged.summary.is_some());
        }
        for _ in 0..3 {
            let logged = log.refused(Refusal::TooLarge, start + Duration::from_secs(5));
            lines += usize::from(logged.at_once) + usize::from(logged.summary.is_some());
        }
        assert_eq!(lines, 1, "only the first too-large one is logged at once");
        assert_eq!(log.tick(start + Duration::from_secs(59)), None);
        assert_eq!(
            log.tick(start + MINUTE).as_deref(),
            Some("webhook deliveries refused in the last 60 s: 2914 bad signature, 3 too large")
        );
        assert_eq!(
            log.tick(start + MINUTE * 2),
            None,
            "a quiet interval has no summary"
        );
    }

    #[test]
    fn a_kind_is_logged_at_once_again_after_a_quiet_interval() {
        let start = Instant::now();
        let mut log = RefusalLog::new(MINUTE, start);
        assert!(log.refused(Refusal::Busy, start).at_once);
        // Every refusal of the interval was logged: nothing to summarise.
        assert_eq!(log.tick(start + MINUTE), None);
        // Refused in the interval before: counted, not logged at once.
        let logged = log.refused(Refusal::Busy, start + MINUTE + Duration::from_secs(1));
        assert!(!logged.at_once);
        assert!(
            log.refused(
                Refusal::TooSlow,
                start + MINUTE * 2 - Duration::from_secs(1)
            )
            .at_once
        );
        assert_eq!(
            log.tick(start + MINUTE * 2).as_deref(),
            Some("webhook deliveries refused in the last 60 s: 1 too many at once, 1 too slow")
        );
        assert_eq!(log.tick(start + MINUTE * 3), None);
        assert!(log.refused(Refusal::Busy, start + MINUTE * 3).at_once);
    }

    #[test]
    fn without_ticks_a_refusal_ends_the_interval_it_comes_after() {
        let start = Instant::now();
        let mut log = RefusalLog::new(MINUTE, start);
        log.refused(Refusal::Unreadable, start);
        log.refused(Refusal::Unreadable, start);
        let later = log.refused(Refusal::Unreadable, start + MINUTE * 5);
        assert_eq!(
            later.summary.as_deref(),
            Some("webhook deliveries refused in the last 300 s: 2 unreadable")
        );
        assert!(
            later.at_once,
            "four quiet minutes came before it: it is news again"
        );
    }

    #[test]
    fn what_is_counted_when_the_receiver_stops_is_summarised() {
        let start = Instant::now();
        let mut log = RefusalLog::new(MINUTE, start);
        assert_eq!(log.finish(start), None, "nothing refused");
        log.refused(Refusal::BadSignature, start);
        assert_eq!(log.finish(start), None, "the one refusal was logged");
        log.refused(Refusal::BadSignature, start);
        assert_eq!(
            log.finish(start + Duration::from_secs(3)).as_deref(),
            Some("webhook deliveries refused in the last 3 s: 2 bad signature")
        );
    }
}
