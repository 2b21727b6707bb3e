//! What a gate reports. A gate that could not run says so (`NotRun`): that is never a pass.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::config::GateKind;

/// How a gate ended. In JSON (journal format 3): `{"status": "not-run", "cause": "setup",
/// "reason": "…"}`, the other statuses without fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum GateStatus {
    Pass,
    /// Blocks the transition.
    Fail,
    /// Reported to the auditor; does not block.
    Warn,
    /// Nothing to check here (no TypeScript in the change, no CI configured…).
    NotApplicable,
    /// The gate could not run: tool missing, crashed or timed out. Never a pass.
    NotRun {
        /// What decides whether running again, unchanged, can help.
        cause: NotRunCause,
        /// Which tool, which permission, which checks.
        reason: String,
    },
}

impl GateStatus {
    /// A gate that could not run for a set-up reason (what every tool gate reports).
    pub fn not_run(reason: impl Into<String>) -> GateStatus {
        GateStatus::not_run_because(NotRunCause::Setup, reason)
    }

    /// A gate that could not run, for `cause`.
    pub fn not_run_because(cause: NotRunCause, reason: impl Into<String>) -> GateStatus {
        GateStatus::NotRun {
            cause,
            reason: reason.into(),
        }
    }

    pub fn label(&self) -> String {
        match self {
            GateStatus::Pass => "pass".into(),
            GateStatus::Fail => "fail".into(),
            GateStatus::Warn => "warn".into(),
            GateStatus::NotApplicable => "n/a".into(),
            GateStatus::NotRun { reason, .. } => format!("not run: {reason}"),
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

/// Why a gate did not run: what decides whether running again, unchanged, can help. The reason text
/// says the rest (which tool, which permission, which checks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NotRunCause {
    /// The set-up: a tool missing, crashed, timed out or unreadable, a gate misconfigured, no
    /// connection configured. A person fixes it; running again unchanged gives the same answer.
    Setup,
    /// A service the gate reads failed for now (rate limit, network trouble, server error): running
    /// again later may succeed, and nothing needs fixing first.
    Transient,
    /// A service refused access: the credentials lack a permission (the reason names it).
    Denied,
    /// The answer was still outstanding at the deadline (CI checks pending, the head commit not yet on
    /// the remote): running again later may find it.
    Pending,
    /// A stop was asked for (SIGINT, SIGTERM) before the gate finished; its tools were killed.
    Cancelled,
}

impl NotRunCause {
    /// Running again later, with nothing changed, may reach a verdict.
    pub fn is_resumable(self) -> bool {
        matches!(
            self,
            NotRunCause::Transient | NotRunCause::Pending | NotRunCause::Cancelled
        )
    }
}

/// The full report of one gate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GateReport {
    /// Which gate ran: what decides how the pipeline treats the report.
    pub kind: GateKind,
    /// The hook's name, for display only (a workflow may call a `command` gate anything, "knip" included).
    pub name: String,
    #[serde(flatten)]
    pub status: GateStatus,
    pub findings: Vec<Finding>,
    pub duration_ms: u64,
    /// The workflow marked it required: not running blocks.
    pub required: bool,
    /// One line for humans: what was checked and the result.
    pub summary: String,
    /// What an oracle gate (`red`, `green`) ran and saw: the Proof table's source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Box<crate::evidence::TestEvidence>>,
}

impl GateReport {
    /// A report of `kind` under the hook name `name`: no findings, no summary, not required, no time.
    pub fn new(kind: GateKind, name: impl Into<String>, status: GateStatus) -> GateReport {
        GateReport {
            kind,
            name: name.into(),
            status,
            findings: Vec::new(),
            duration_ms: 0,
            required: false,
            summary: String::new(),
            evidence: None,
        }
    }

    /// Whether this report stops the transition.
    pub fn blocks(&self) -> bool {
        match &self.status {
            GateStatus::Fail => true,
            GateStatus::NotRun { .. } => self.required,
            _ => false,
        }
    }

    pub fn is_pass(&self) -> bool {
        self.status == GateStatus::Pass
    }

    /// Why the gate did not run; `None` when it ran.
    pub fn not_run_cause(&self) -> Option<NotRunCause> {
        match self.status {
            GateStatus::NotRun { cause, .. } => Some(cause),
            _ => None,
        }
    }
}

/// The combined verdict over all gates of a transition. Its word ([`Verdict::as_str`]) is the one
/// spelling used everywhere: JSON, terminal text, comments and the PR body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// Every gate passed or had nothing to check.
    Pass,
    /// Nothing blocks, but a gate warned or did not run: never a pass.
    NotBlocked,
    /// A gate failed, or a required gate did not run.
    Blocked,
}

impl Verdict {
    pub(crate) const ALL: [Verdict; 3] = [Verdict::Pass, Verdict::NotBlocked, Verdict::Blocked];

    /// The verdict of these reports.
    pub fn of(reports: &[GateReport]) -> Verdict {
        if reports.iter().any(GateReport::blocks) {
            Verdict::Blocked
        } else if reports
            .iter()
            .all(|r| matches!(r.status, GateStatus::Pass | GateStatus::NotApplicable))
        {
            Verdict::Pass
        } else {
            Verdict::NotBlocked
        }
    }

    /// `pass`, `not-blocked` or `blocked`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::NotBlocked => "not-blocked",
            Verdict::Blocked => "blocked",
        }
    }

    /// What the verdict means, for people.
    pub fn meaning(self) -> &'static str {
        match self {
            Verdict::Pass => "every gate passed or had nothing to check",
            Verdict::NotBlocked => "nothing blocks, but gates warned or did not run",
            Verdict::Blocked => "a gate failed, or a required gate did not run",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Verdict {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Verdict {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Verdict, D::Error> {
        let word = String::deserialize(deserializer)?;
        Verdict::ALL
            .into_iter()
            .find(|v| v.as_str() == word)
            .ok_or_else(|| {
                serde::de::Error::custom(format!(
                    "unknown gate verdict `{word}`: expected one of pass, not-blocked, blocked"
                ))
            })
    }
}

/// The combined verdict of `reports` ([`Verdict::of`]).
pub fn verdict(reports: &[GateReport]) -> Verdict {
    Verdict::of(reports)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(status: GateStatus, required: bool) -> GateReport {
        GateReport {
            required,
            ..GateReport::new(GateKind::Tsc, "g", status)
        }
    }

    #[test]
    fn not_run_is_never_a_pass() {
        let optional = report(GateStatus::not_run("tsc not found"), false);
        let required = report(GateStatus::not_run("tsc not found"), true);
        assert!(!optional.is_pass());
        assert!(!optional.blocks());
        assert!(required.blocks());
        assert_eq!(verdict(&[optional]), Verdict::NotBlocked);
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
            Verdict::NotBlocked
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
        let r = report(GateStatus::not_run("knip missing"), true);
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["status"], "not-run");
        assert_eq!(v["reason"], "knip missing");
        assert_eq!(v["cause"], "setup");
        assert_eq!(v["kind"], "tsc");
        assert_eq!(v["name"], "g");
        let back: GateReport = serde_json::from_value(v).unwrap();
        assert_eq!(back, r);
        assert_eq!(back.not_run_cause(), Some(NotRunCause::Setup));

        let transient = report(
            GateStatus::not_run_because(NotRunCause::Transient, "rate limited"),
            true,
        );
        let v = serde_json::to_value(&transient).unwrap();
        assert_eq!(v["cause"], "transient");
        let back: GateReport = serde_json::from_value(v).unwrap();
        assert_eq!(back.not_run_cause(), Some(NotRunCause::Transient));
        assert!(NotRunCause::Transient.is_resumable() && NotRunCause::Pending.is_resumable());
        assert!(!NotRunCause::Setup.is_resumable() && !NotRunCause::Denied.is_resumable());

        let passed = report(GateStatus::Pass, true);
        assert_eq!(
            passed.not_run_cause(),
            None,
            "a gate that ran has no not-run cause"
        );
        assert!(
            serde_json::to_value(&passed)
                .unwrap()
                .get("cause")
                .is_none()
        );
    }

    #[test]
    fn the_verdict_has_one_spelling() {
        for v in Verdict::ALL {
            let json = serde_json::to_value(v).unwrap();
            assert_eq!(json, v.as_str());
            assert_eq!(v.to_string(), v.as_str());
            assert_eq!(serde_json::from_value::<Verdict>(json).unwrap(), v);
        }
        assert_eq!(Verdict::NotBlocked.as_str(), "not-blocked");
        let err = serde_json::from_value::<Verdict>("pass-with-warnings".into()).unwrap_err();
        assert!(err.to_string().contains("unknown gate verdict"), "{err}");
    }
}
