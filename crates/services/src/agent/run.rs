//! What one agent dispatch produced, normalised across agent CLIs, and the limits it ran under.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::Settings;

/// How long a killed agent gets between SIGTERM and SIGKILL.
pub const DEFAULT_KILL_GRACE: Duration = Duration::from_secs(5);

/// Token usage of a dispatch, SUMMED over every model call it made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    /// What budgets are checked against: the CLI's own total when it reports one, else the sum of the parts.
    pub total: u64,
    pub cost_usd: f64,
    /// `cost_usd` is the usage at the price table's prices, the CLI having reported no cost (it was
    /// stopped before its closing report, or it reports none).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cost_estimated: bool,
}

impl Usage {
    /// Add another call's usage to this sum.
    pub(crate) fn add(&mut self, other: &Usage) {
        self.input += other.input;
        self.output += other.output;
        self.cache_read += other.cache_read;
        self.cache_write += other.cache_write;
        self.total += other.total;
        self.cost_usd += other.cost_usd;
        self.cost_estimated |= other.cost_estimated;
    }

    /// The cost as shown: `$0.0123`, or `~$0.0123` when estimated from the price table.
    pub fn cost_text(&self) -> String {
        let mark = if self.cost_estimated { "~" } else { "" };
        format!("{mark}${:.4}", self.cost_usd)
    }

    /// `total` as the sum of the parts, for CLIs that report none.
    pub(crate) fn with_computed_total(mut self) -> Usage {
        self.total = self.input + self.output + self.cache_read + self.cache_write;
        self
    }
}

/// Why an agent run ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ExitReason {
    /// The CLI exited 0 and reported no error.
    Completed,
    /// The CLI failed: non-zero exit, a provider error (pi's `stopReason:"error"` even with exit 0),
    /// an error result, or a stream that ended without an answer.
    Failed(String),
    /// Killed after running longer than its timeout.
    TimedOut(#[serde(with = "duration_secs")] Duration),
    /// Killed after writing nothing (no line on stdout or stderr) for this long.
    Stalled(#[serde(with = "duration_secs")] Duration),
    /// Killed when the summed token usage went over the budget.
    TokenBudget { used: u64, budget: u64 },
    /// Killed when the number of tool calls went over the cap.
    ToolCallCap { calls: u64, cap: u64 },
    /// Stopped by a shutdown request (SIGINT/SIGTERM/SIGHUP).
    Interrupted,
    /// The CLI could not be started.
    SpawnFailed(String),
}

impl ExitReason {
    /// Whether the run was stopped by a budget (tokens or tool calls).
    pub(crate) fn is_budget(&self) -> bool {
        matches!(
            self,
            ExitReason::TokenBudget { .. } | ExitReason::ToolCallCap { .. }
        )
    }

    /// One line for humans.
    pub fn describe(&self) -> String {
        match self {
            ExitReason::Completed => "completed".into(),
            ExitReason::Failed(message) => format!("failed: {message}"),
            ExitReason::TimedOut(after) => format!("timed out after {}", human_duration(*after)),
            ExitReason::Stalled(after) => {
                format!("stalled: no output for {}", human_duration(*after))
            }
            ExitReason::TokenBudget { used, budget } => {
                format!("token budget exceeded: {used} tokens used of {budget}")
            }
            ExitReason::ToolCallCap { calls, cap } => {
                format!("tool-call cap exceeded: {calls} calls, cap {cap}")
            }
            ExitReason::Interrupted => "interrupted".into(),
            ExitReason::SpawnFailed(message) => format!("could not start: {message}"),
        }
    }
}

/// Durations in the journal as fractional seconds.
mod duration_secs {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let secs = f64::deserialize(d)?;
        Duration::try_from_secs_f64(secs).map_err(serde::de::Error::custom)
    }
}

/// `1m 05s`, `2.3s`.
pub fn human_duration(d: Duration) -> String {
    let secs = d.as_secs();
    if secs >= 60 {
        format!("{}m {:02}s", secs / 60, secs % 60)
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

/// The normalised result of one agent dispatch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentRun {
    pub role: String,
    pub backend: String,
    /// The agent's answer; when it was stopped early, the last assistant text seen (partial findings).
    pub final_text: String,
    pub tool_calls: u64,
    pub usage: Usage,
    #[serde(with = "duration_secs")]
    pub duration: Duration,
    pub model: Option<String>,
    pub exit: ExitReason,
    /// The last few KiB the CLI wrote to stderr.
    pub stderr_tail: String,
    /// The raw stdout stream (and `<file>.stderr` beside it), when one was requested.
    pub transcript: Option<PathBuf>,
    /// A budget stop keeps the partial text instead of failing (the researcher's graceful degradation).
    pub keep_partial: bool,
}

impl AgentRun {
    /// The run of an agent that could not be started at all.
    pub fn not_started(role: &super::AgentDefinition, exit: ExitReason) -> AgentRun {
        AgentRun {
            role: role.name.clone(),
            backend: String::new(),
            final_text: String::new(),
            tool_calls: 0,
            usage: Usage::default(),
            duration: Duration::ZERO,
            model: role.model.clone(),
            exit,
            stderr_tail: String::new(),
            transcript: None,
            keep_partial: false,
        }
    }

    /// Over budget with its partial text kept: the pipeline goes on with what was found.
    pub fn degraded(&self) -> bool {
        self.keep_partial && self.exit.is_budget() && !self.final_text.trim().is_empty()
    }

    /// Whether the pipeline may use this run's output: it completed, or it is degraded.
    pub fn succeeded(&self) -> bool {
        self.exit == ExitReason::Completed || self.degraded()
    }

    /// A short human summary (several lines), for stderr.
    pub fn summary(&self) -> String {
        let status = if self.degraded() {
            format!("{} (degraded: partial output kept)", self.exit.describe())
        } else {
            self.exit.describe()
        };
        let mut out = format!(
            "agent {} via {}: {status}\n  duration {} · tool calls {} · tokens {} (in {}, out {}, cache r/w {}/{}) · cost {}",
            self.role,
            self.backend,
            human_duration(self.duration),
            self.tool_calls,
            self.usage.total,
            self.usage.input,
            self.usage.output,
            self.usage.cache_read,
            self.usage.cache_write,
            self.usage.cost_text(),
        );
        if let Some(model) = &self.model {
            out.push_str(&format!(" · model {model}"));
        }
        out.push('\n');
        if let Some(t) = &self.transcript {
            out.push_str(&format!("  transcript {}\n", t.display()));
        }
        if !self.succeeded() && !self.stderr_tail.trim().is_empty() {
            out.push_str("  stderr (tail):\n");
            let lines: Vec<&str> = self.stderr_tail.trim_end().lines().collect();
            for line in &lines[lines.len().saturating_sub(10)..] {
                out.push_str(&format!("    {line}\n"));
            }
        }
        out
    }
}

/// Budgets of one dispatch. Zero means unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub timeout: Option<Duration>,
    /// Stop the agent when it writes nothing for this long; `None`: never.
    pub stall: Option<Duration>,
    /// Summed tokens; 0 = none.
    pub token_budget: u64,
    /// Tool calls; 0 = none.
    pub max_tool_calls: u64,
    /// Time between SIGTERM and SIGKILL when the agent is stopped.
    pub kill_grace: Duration,
    /// Bytes of each transcript file (stdout, stderr); 0 = no cap.
    pub transcript_cap: u64,
}

/// The transcript cap when the settings name none: 16 MiB per stream.
pub const DEFAULT_TRANSCRIPT_CAP: u64 = 16 * 1024 * 1024;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: None,
            stall: None,
            token_budget: 0,
            max_tool_calls: 0,
            kill_grace: DEFAULT_KILL_GRACE,
            transcript_cap: DEFAULT_TRANSCRIPT_CAP,
        }
    }
}

impl Limits {
    /// The limits the settings give the agent `role`.
    pub fn for_role(settings: &Settings, role: &str) -> Limits {
        Limits {
            timeout: settings.agent_timeout(role),
            stall: settings.agent_stall(),
            token_budget: settings.agent_token_budget,
            max_tool_calls: settings.max_tool_calls,
            kill_grace: DEFAULT_KILL_GRACE,
            transcript_cap: settings.agent_transcript_max_mb.saturating_mul(1024 * 1024),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(exit: ExitReason, keep_partial: bool, text: &str) -> AgentRun {
        AgentRun {
            role: "researcher".into(),
            backend: "pi".into(),
            final_text: text.into(),
            tool_calls: 0,
            usage: Usage::default(),
            duration: Duration::from_millis(1500),
            model: None,
            exit,
            stderr_tail: String::new(),
            transcript: None,
            keep_partial,
        }
    }

    #[test]
    fn degraded_only_for_budget_stops_with_text_kept() {
        let budget = ExitReason::TokenBudget {
            used: 11,
            budget: 10,
        };
        assert!(run(budget.clone(), true, "partial").degraded());
        assert!(run(budget.clone(), true, "partial").succeeded());
        assert!(!run(budget.clone(), false, "partial").succeeded());
        assert!(!run(budget, true, "  ").degraded());
        let timeout = ExitReason::TimedOut(Duration::from_secs(60));
        assert!(!run(timeout, true, "partial").degraded());
        assert!(run(ExitReason::Completed, false, "").succeeded());
    }

    #[test]
    fn serialises_for_the_journal() {
        let r = run(ExitReason::ToolCallCap { calls: 4, cap: 3 }, false, "text");
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["exit"]["toolCallCap"]["cap"], 3);
        assert_eq!(json["duration"], 1.5);
        let back: AgentRun = serde_json::from_value(json).unwrap();
        assert_eq!(back, r);
        let t = serde_json::to_value(ExitReason::TimedOut(Duration::from_millis(2500))).unwrap();
        assert_eq!(t, serde_json::json!({ "timedOut": 2.5 }));
        let c = serde_json::to_value(ExitReason::Completed).unwrap();
        assert_eq!(c, serde_json::json!("completed"));
    }

    #[test]
    fn limits_follow_settings() {
        let mut s = Settings::minimal(
            crate::config::RepoSlug::parse("o/r").unwrap(),
            1,
            vec!["a".into()],
        );
        s.agent_token_budget = 500;
        s.max_tool_calls = 7;
        s.agent_timeouts_min.insert("developer".into(), 0.5);
        s.agent_timeouts_min.insert("researcher".into(), 0.0);
        let l = Limits::for_role(&s, "developer");
        assert_eq!(l.timeout, Some(Duration::from_secs(30)));
        assert_eq!((l.token_budget, l.max_tool_calls), (500, 7));
        assert_eq!(Limits::for_role(&s, "researcher").timeout, None, "0: none");
        // Without an entry, agentTimeoutMin; 0 there means none.
        assert_eq!(
            Limits::for_role(&s, "auditor").timeout,
            Some(Duration::from_secs(3600))
        );
        s.agent_timeout_min = 0.0;
        assert_eq!(Limits::for_role(&s, "auditor").timeout, None);
        s.agent_timeout_min = 2.0;
        assert_eq!(
            Limits::for_role(&s, "auditor").timeout,
            Some(Duration::from_secs(120))
        );
        assert_eq!(l.stall, Some(Duration::from_secs(600)));
        s.agent_stall_sec = 0;
        assert_eq!(Limits::for_role(&s, "auditor").stall, None);
    }

    /// With no settings at all, every dispatch has a finite timeout and stall limit.
    #[test]
    fn with_no_settings_every_agent_has_a_timeout() {
        let s = Settings::minimal(
            crate::config::RepoSlug::parse("o/r").unwrap(),
            1,
            vec!["a".into()],
        );
        for role in ["researcher", "developer", "auditor", "anything"] {
            let l = Limits::for_role(&s, role);
            assert_eq!(l.timeout, Some(Duration::from_secs(60 * 60)), "{role}");
            assert_eq!(l.stall, Some(Duration::from_secs(600)), "{role}");
        }
    }
}
