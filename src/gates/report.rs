//! What a gate reports. A gate that could not run says so (`NotRun`): that is never a pass.

use std::fmt;

use serde::{Deserialize, Serialize};

/// How a gate ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", content = "reason", rename_all = "kebab-case")]
pub enum GateStatus {
    Pass,
    /// Blocks the transition.
    Fail,
    /// Reported to the auditor; does not block.
    Warn,
    /// Nothing to check here (no TypeScript in the change, no CI configured…).
    NotApplicable,
    /// The gate could not run: tool missing, crashed or timed out. Never a pass.
    NotRun(String),
}

impl GateStatus {
    pub fn label(&self) -> String {
        match self {
            GateStatus::Pass => "pass".into(),
            GateStatus::Fail => "fail".into(),
            GateStatus::Warn => "warn".into(),
            GateStatus::NotApplicable => "n/a".into(),
            GateStatus::NotRun(reason) => format!("not run: {reason}"),
        }
    }
}

impl fmt::Display for GateStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FindingSeverity {
    Error,
    Warning,
    Info,
}

/// One thing a gate found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// Tool rule or code: `TS2345`, `unused-export`, `type-2-clone`…
    pub rule: String,
    pub message: String,
    pub severity: FindingSeverity,
}

impl Finding {
    /// `file:line` (or `file`, or nothing) for display.
    pub fn location(&self) -> String {
        match (&self.file, self.line) {
            (Some(f), Some(l)) => format!("{f}:{l}"),
            (Some(f), None) => f.clone(),
            _ => String::new(),
        }
    }
}

/// The full report of one gate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GateReport {
    /// Display name (the hook's name).
    pub gate: String,
    #[serde(flatten)]
    pub status: GateStatus,
    pub findings: Vec<Finding>,
    pub duration_ms: u64,
    /// The workflow marked it required: not running blocks.
    pub required: bool,
    /// One line for humans: what was checked and the result.
    pub summary: String,
}

impl GateReport {
    /// Whether this report stops the transition.
    pub fn blocks(&self) -> bool {
        match &self.status {
            GateStatus::Fail => true,
            GateStatus::NotRun(_) => self.required,
            _ => false,
        }
    }

    pub fn is_pass(&self) -> bool {
        self.status == GateStatus::Pass
    }
}

/// The combined verdict over all gates of a transition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Every gate passed or had nothing to check.
    Pass,
    /// Nothing blocks, but something warned or could not run.
    PassWithWarnings,
    Blocked,
}

pub fn verdict(reports: &[GateReport]) -> Verdict {
    if reports.iter().any(GateReport::blocks) {
        Verdict::Blocked
    } else if reports
        .iter()
        .all(|r| matches!(r.status, GateStatus::Pass | GateStatus::NotApplicable))
    {
        Verdict::Pass
    } else {
        Verdict::PassWithWarnings
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(status: GateStatus, required: bool) -> GateReport {
        GateReport {
            gate: "g".into(),
            status,
            findings: vec![],
            duration_ms: 0,
            required,
            summary: String::new(),
        }
    }

    #[test]
    fn not_run_is_never_a_pass() {
        let optional = report(GateStatus::NotRun("tsc not found".into()), false);
        let required = report(GateStatus::NotRun("tsc not found".into()), true);
        assert!(!optional.is_pass());
        assert!(!optional.blocks());
        assert!(required.blocks());
        assert_eq!(verdict(&[optional]), Verdict::PassWithWarnings);
        assert_eq!(verdict(&[required]), Verdict::Blocked);
    }

    #[test]
    fn verdicts() {
        assert_eq!(verdict(&[]), Verdict::Pass);
        assert_eq!(
            verdict(&[
                report(GateStatus::Pass, true),
                report(GateStatus::NotApplicable, true)
            ]),
            Verdict::Pass
        );
        assert_eq!(
            verdict(&[
                report(GateStatus::Pass, false),
                report(GateStatus::Warn, false)
            ]),
            Verdict::PassWithWarnings
        );
        assert_eq!(
            verdict(&[
                report(GateStatus::Warn, false),
                report(GateStatus::Fail, false)
            ]),
            Verdict::Blocked
        );
    }

    #[test]
    fn serialises_status_inline() {
        let r = report(GateStatus::NotRun("knip missing".into()), true);
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["status"], "not-run");
        assert_eq!(v["reason"], "knip missing");
        let back: GateReport = serde_json::from_value(v).unwrap();
        assert_eq!(back, r);
    }
}
