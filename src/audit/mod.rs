//! Deterministic audit scoring. Pure: findings in, score out.
//!
//! A dimension fails when it has any critical or warning finding (suggestions never count). The score is
//! passing / total and must reach the threshold. It is computed on EVERY approval, including one with no
//! findings at all. Findings naming an unknown dimension are reported, never silently dropped.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::agent::{AuditFinding, ClaimedScore, Severity};

/// The eight audit dimensions.
pub const DIMENSIONS: [&str; 8] = [
    "architecture-compliance",
    "ticket-fulfillment",
    "test-quality",
    "correctness-safety",
    "code-quality",
    "completeness",
    "duplicate-code",
    "research-incorporation",
];

/// Outcome of scoring one review.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditScore {
    pub passing: u32,
    pub total: u32,
    pub threshold: f64,
    /// passing ≥ threshold × total.
    pub passed: bool,
    /// Dimensions with a critical or warning finding, in the order of `DIMENSIONS`.
    pub failing: Vec<String>,
    /// Dimensions left out of the count (e.g. research skipped by dedup).
    pub excluded: Vec<String>,
    /// Dimensions named by findings that are not audit dimensions.
    pub unknown: Vec<String>,
    /// What the auditor claimed, when it differs from what we computed.
    pub claimed: Option<ClaimedScore>,
}

impl AuditScore {
    pub fn ratio(&self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            f64::from(self.passing) / f64::from(self.total)
        }
    }
}

/// Score `findings`. `excluded` dimensions (e.g. `research-incorporation` when the researcher was
/// skipped) are left out of the total; findings against them are ignored for the count.
pub fn score(
    findings: &[AuditFinding],
    excluded: &[String],
    threshold: f64,
    claimed: Option<ClaimedScore>,
) -> AuditScore {
    let counted: Vec<&str> = DIMENSIONS
        .iter()
        .copied()
        .filter(|d| !excluded.iter().any(|e| e == d))
        .collect();
    let failing_set: BTreeSet<&str> = findings
        .iter()
        .filter(|f| matches!(f.severity, Severity::Critical | Severity::Warning))
        .map(|f| f.dimension.as_str())
        .collect();
    let failing: Vec<String> = counted
        .iter()
        .filter(|d| failing_set.contains(*d))
        .map(|d| d.to_string())
        .collect();
    let unknown: Vec<String> = findings
        .iter()
        .map(|f| f.dimension.as_str())
        .filter(|d| !DIMENSIONS.contains(d))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .map(String::from)
        .collect();
    let total = counted.len() as u32;
    let passing = total - failing.len() as u32;
    // Compare in integers where possible so 6/8 against 0.75 is exact.
    let passed = total > 0 && f64::from(passing) + 1e-9 >= threshold * f64::from(total);
    let excluded_known: Vec<String> = DIMENSIONS
        .iter()
        .filter(|d| excluded.iter().any(|e| e == *d))
        .map(|d| d.to_string())
        .collect();
    AuditScore {
        passing,
        total,
        threshold,
        passed,
        failing,
        excluded: excluded_known,
        unknown,
        claimed: claimed.filter(|c| c.passing != passing || c.total != total),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(sev: Severity, dim: &str) -> AuditFinding {
        AuditFinding {
            severity: sev,
            dimension: dim.into(),
            message: "m".into(),
            file: None,
            line: None,
        }
    }

    use Severity::*;

    #[test]
    fn table() {
        let research = vec!["research-incorporation".to_string()];
        // (findings, excluded, threshold, passing, total, passed)
        type Row = (Vec<AuditFinding>, Vec<String>, f64, u32, u32, bool);
        let rows: Vec<Row> = vec![
            // Approval with empty findings is scored, and passes.
            (vec![], vec![], 0.75, 8, 8, true),
            // Suggestions never fail a dimension.
            (
                vec![f(Suggestion, "code-quality"), f(Suggestion, "test-quality")],
                vec![],
                0.75,
                8,
                8,
                true,
            ),
            // One warning fails one dimension.
            (vec![f(Warning, "test-quality")], vec![], 0.75, 7, 8, true),
            // Two findings on the same dimension fail it once.
            (
                vec![f(Critical, "test-quality"), f(Warning, "test-quality")],
                vec![],
                0.75,
                7,
                8,
                true,
            ),
            // Exactly at the threshold: 6/8 = 0.75 passes.
            (
                vec![f(Warning, "test-quality"), f(Critical, "completeness")],
                vec![],
                0.75,
                6,
                8,
                true,
            ),
            // Just below: 5/8 fails.
            (
                vec![
                    f(Warning, "test-quality"),
                    f(Critical, "completeness"),
                    f(Warning, "code-quality"),
                ],
                vec![],
                0.75,
                5,
                8,
                false,
            ),
            // Research skipped: 7 dimensions.
            (vec![], research.clone(), 0.75, 7, 7, true),
            // A finding on the excluded dimension does not count.
            (
                vec![f(Critical, "research-incorporation")],
                research.clone(),
                0.75,
                7,
                7,
                true,
            ),
            // 5/7 = 0.714 < 0.75.
            (
                vec![f(Warning, "test-quality"), f(Warning, "completeness")],
                research.clone(),
                0.75,
                5,
                7,
                false,
            ),
            // Threshold 1.0 demands a clean audit.
            (vec![f(Warning, "duplicate-code")], vec![], 1.0, 7, 8, false),
            (vec![], vec![], 1.0, 8, 8, true),
            // An unknown dimension is reported but fails nothing.
            (vec![f(Critical, "vibes")], vec![], 0.75, 8, 8, true),
        ];
        for (i, (findings, excluded, threshold, passing, total, passed)) in
            rows.into_iter().enumerate()
        {
            let s = score(&findings, &excluded, threshold, None);
            assert_eq!(
                (s.passing, s.total, s.passed),
                (passing, total, passed),
                "row {i}: {s:?}"
            );
        }
    }

    #[test]
    fn exactly_at_threshold_with_seven_dimensions() {
        // 0.75 × 7 = 5.25: 6 passes, 5 fails.
        let research = vec!["research-incorporation".to_string()];
        let s = score(&[f(Warning, "test-quality")], &research, 0.75, None);
        assert_eq!((s.passing, s.total, s.passed), (6, 7, true));
        // A threshold of 6/7 exactly.
        let s = score(&[f(Warning, "test-quality")], &research, 6.0 / 7.0, None);
        assert!(s.passed);
    }

    #[test]
    fn details_are_reported() {
        let s = score(
            &[
                f(Warning, "completeness"),
                f(Critical, "architecture-compliance"),
                f(Critical, "Made-Up"),
            ],
            &["research-incorporation".to_string()],
            0.75,
            Some(ClaimedScore {
                passing: 8,
                total: 8,
            }),
        );
        assert_eq!(s.failing, ["architecture-compliance", "completeness"]);
        assert_eq!(s.excluded, ["research-incorporation"]);
        assert_eq!(s.unknown, ["Made-Up"]);
        assert_eq!(
            s.claimed,
            Some(ClaimedScore {
                passing: 8,
                total: 8
            })
        );
        assert!((s.ratio() - 5.0 / 7.0).abs() < 1e-12);
        // A matching claim is not reported as a discrepancy.
        let s = score(
            &[],
            &[],
            0.75,
            Some(ClaimedScore {
                passing: 8,
                total: 8,
            }),
        );
        assert_eq!(s.claimed, None);
    }
}
