//! The process's Prometheus metrics, served as `GET /metrics` (OpenMetrics text) by `serve` and by
//! `watch --dashboard`: runs started and finished, live and queued runs, stage and gate durations,
//! agent tokens and cost, GitHub requests and rate limits, webhook deliveries, claims taken over.
//!
//! One registry per process: whatever counts (the GitHub client, the webhook receiver, the
//! scheduler, the runs' journals) counts into it, and a scrape reads it.

use std::sync::LazyLock;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The content type of [`render`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

type Labels<const N: usize> = [(&'static str, String); N];
type Histograms<const N: usize> = Family<Labels<N>, Histogram, fn() -> Histogram>;

/// Seconds, from a tenth of a second to about 7 hours (×2 each bucket).
fn seconds() -> Histogram {
    Histogram::new(exponential_buckets(0.1, 2.0, 18))
}

/// Every metric of the process.
pub struct Metrics {
    pub runs_started: Counter,
    /// By how the run ended (`pull-request`, `stopped`, …, `error`).
    pub(crate) runs_finished: Family<Labels<1>, Counter>,
    pub live_runs: Gauge,
    pub queued_runs: Gauge,
    /// Agent dispatches by stage, role (agent) and backend.
    pub(crate) stage_seconds: Histograms<3>,
    /// Gates by name and result.
    pub(crate) gate_seconds: Histograms<2>,
    /// By backend and role.
    pub(crate) agent_tokens: Family<Labels<2>, Counter>,
    pub(crate) agent_cost: Family<Labels<2>, Counter<f64, AtomicU64>>,
    /// Every attempt sent, by API (`core`, `graphql`).
    pub(crate) github_requests: Family<Labels<1>, Counter>,
    /// What the last answer of each rate-limit resource said was left.
    pub(crate) rate_limit_remaining: Family<Labels<1>, Gauge>,
    pub secondary_limit_waits: Counter,
    /// By outcome (`queued`, `ignored`, `bad-signature`, …).
    pub(crate) webhook_deliveries: Family<Labels<1>, Counter>,
    /// Claims of another watcher that had expired, taken over.
    pub claims_taken_over: Counter,
    /// Live runs that have journalled nothing for `watch.silentRunMin`.
    pub silent_runs: Gauge,
    registry: Registry,
}

impl Metrics {
    fn new() -> Metrics {
        let mut m = Metrics {
            runs_started: Counter::default(),
            runs_finished: Family::default(),
            live_runs: Gauge::default(),
            queued_runs: Gauge::default(),
            stage_seconds: Family::new_with_constructor(seconds),
            gate_seconds: Family::new_with_constructor(seconds),
            agent_tokens: Family::default(),
            agent_cost: Family::default(),
            github_requests: Family::default(),
            rate_limit_remaining: Family::default(),
            secondary_limit_waits: Counter::default(),
            webhook_deliveries: Family::default(),
            claims_taken_over: Counter::default(),
            silent_runs: Gauge::default(),
            registry: Registry::with_prefix("supervisor"),
        };
        let r = &mut m.registry;
        r.register("runs_started", "Runs started", m.runs_started.clone());
        r.register(
            "runs_finished",
            "Runs finished, by how they ended",
            m.runs_finished.clone(),
        );
        r.register("live_runs", "Runs live now", m.live_runs.clone());
        r.register(
            "queued_runs",
            "Starts waiting for a slot",
            m.queued_runs.clone(),
        );
        r.register(
            "stage_duration_seconds",
            "Agent dispatches, by stage, agent and backend",
            m.stage_seconds.clone(),
        );
        r.register(
            "gate_duration_seconds",
            "Gate runs, by gate and result",
            m.gate_seconds.clone(),
        );
        r.register(
            "agent_tokens",
            "Tokens used by agents, by backend and role",
            m.agent_tokens.clone(),
        );
        r.register(
            "agent_cost_usd",
            "Agent cost in US dollars, by backend and role",
            m.agent_cost.clone(),
        );
        r.register(
            "github_requests",
            "Requests sent to GitHub (every attempt), by API",
            m.github_requests.clone(),
        );
        r.register(
            "github_rate_limit_remaining",
            "Requests left in GitHub's rate-limit window, by resource, as last answered",
            m.rate_limit_remaining.clone(),
        );
        r.register(
            "github_secondary_limit_waits",
            "Waits GitHub's secondary rate limits asked for",
            m.secondary_limit_waits.clone(),
        );
        r.register(
            "webhook_deliveries",
            "Webhook deliveries, by outcome",
            m.webhook_deliveries.clone(),
        );
        r.register(
            "claims_taken_over",
            "Expired claims of other watchers taken over",
            m.claims_taken_over.clone(),
        );
        r.register(
            "silent_runs",
            "Live runs that journalled nothing for watch.silentRunMin",
            m.silent_runs.clone(),
        );
        m
    }

    /// A run ended `end` (`error`: it failed outside its stages).
    pub fn run_finished(&self, end: &str) {
        self.runs_finished
            .get_or_create(&[("end", end.to_string())])
            .inc();
    }

    /// An agent dispatch of `agent` (role) on `backend` for `stage` ended.
    pub fn agent_finished(
        &self,
        stage: &str,
        agent: &str,
        backend: &str,
        seconds: f64,
        tokens: u64,
        cost_usd: f64,
    ) {
        self.stage_seconds
            .get_or_create(&[
                ("stage", stage.to_string()),
                ("agent", agent.to_string()),
                ("backend", backend.to_string()),
            ])
            .observe(seconds);
        let by = [
            ("backend", backend.to_string()),
            ("role", agent.to_string()),
        ];
        self.agent_tokens.get_or_create(&by).inc_by(tokens);
        if cost_usd > 0.0 {
            self.agent_cost.get_or_create(&by).inc_by(cost_usd);
        }
    }

    /// A gate ran for `seconds` with `result` (`pass`, `fail`, …).
    pub fn gate_finished(&self, gate: &str, result: &str, seconds: f64) {
        self.gate_seconds
            .get_or_create(&[("gate", gate.to_string()), ("result", result.to_string())])
            .observe(seconds);
    }

    /// A request to GitHub's `api` (`core`, `graphql`) is being sent.
    pub fn github_request(&self, api: &str) {
        self.github_requests
            .get_or_create(&[("api", api.to_string())])
            .inc();
    }

    /// GitHub said `remaining` requests are left of `resource`.
    pub fn rate_limit(&self, resource: &str, remaining: u64) {
        self.rate_limit_remaining
            .get_or_create(&[("resource", resource.to_string())])
            .set(i64::try_from(remaining).unwrap_or(i64::MAX));
    }

    /// A webhook delivery was answered with `outcome`.
    pub fn delivery(&self, outcome: &str) {
        self.webhook_deliveries
            .get_or_create(&[("outcome", outcome.to_string())])
            .inc();
    }
}

static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);

/// The process's metrics.
pub fn metrics() -> &'static Metrics {
    &METRICS
}

/// Every metric, in the OpenMetrics text format Prometheus scrapes.
pub fn render() -> String {
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = encode(&mut out, &metrics().registry);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_show_in_the_text_under_their_labels() {
        let m = Metrics::new();
        m.runs_started.inc();
        m.run_finished("pull-request");
        m.agent_finished("Research", "researcher", "scripted", 1.5, 120, 0.25);
        m.gate_finished("ci", "pass", 0.3);
        m.github_request("graphql");
        m.rate_limit("core", 4999);
        let mut out = String::new();
        encode(&mut out, &m.registry).unwrap();
        for line in [
            "supervisor_runs_started_total 1",
            "supervisor_runs_finished_total{end=\"pull-request\"} 1",
            "supervisor_agent_tokens_total{backend=\"scripted\",role=\"researcher\"} 120",
            "supervisor_agent_cost_usd_total{backend=\"scripted\",role=\"researcher\"} 0.25",
            "supervisor_gate_duration_seconds_count{gate=\"ci\",result=\"pass\"} 1",
            "supervisor_github_requests_total{api=\"graphql\"} 1",
            "supervisor_github_rate_limit_remaining{resource=\"core\"} 4999",
        ] {
            assert!(out.lines().any(|l| l == line), "no `{line}` in\n{out}");
        }
        assert!(out.ends_with("# EOF\n"), "{out}");
    }
}
