//! Deterministic audit scoring. Pure: findings in, score out.
//!
//! A dimension fails when it has any critical or warning finding (suggestions never count). The score is
//! passing / total and must reach the threshold. It is computed on EVERY approval, including one with no
//! findings at all. A critical finding is never approved, whatever the score.

use serde::{Deserialize, Serialize};

use crate::agent::{AuditFinding, ClaimedScore, Severity};
use crate::config::Dimension;

/// Outcome of scoring one review.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditScore {
    pub passing: u32,
    pub total: u32,
    pub threshold: f64,
    /// passing ≥ threshold × total, and no critical finding.
    pub passed: bool,
    /// Dimensions with a critical or warning finding, in report order.
    pub failing: Vec<Dimension>,
    /// Dimensions left out of the count (e.g. research skipped by dedup).
    pub excluded: Vec<Dimension>,
    /// Dimensions with a critical finding: these alone refuse the approval.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub critical: Vec<Dimension>,
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

    /// Whether the threshold was met (a critical finding may still refuse the approval).
    pub fn meets_threshold(&self) -> bool {
        self.total > 0 && f64::from(self.passing) + 1e-9 >= self.threshold * f64::from(self.total)
    }
}

/// Score `findings`. `excluded` dimensions (e.g. research-incorporation when the researcher was
/// skipped) are left out of the total; findings against them do not count against the score, but a
/// critical one still refuses the approval.
pub fn score(
    findings: &[AuditFinding],
    excluded: &[Dimension],
    threshold: f64,
    claimed: Option<ClaimedScore>,
) -> AuditScore {
    let with = |pred: &dyn Fn(&AuditFinding) -> bool, d: &Dimension| {
        findings.iter().any(|f| f.dimension == *d && pred(f))
    };
    let counts = |f: &AuditFinding| matches!(f.severity, Severity::Critical | Severity::Warning);
    let counted: Vec<Dimension> = Dimension::ALL
        .into_iter()
        .filter(|d| !excluded.contains(d))
        .collect();
    let failing: Vec<Dimension> = counted
        .iter()
        .copied()
        .filter(|d| with(&counts, d))
        .collect();
    let critical: Vec<Dimension> = Dimension::ALL
        .into_iter()
        .filter(|d| with(&|f| f.severity == Severity::Critical, d))
        .collect();
    let total = counted.len() as u32;
    let passing = total - failing.len() as u32;
    let mut s = AuditScore {
        passing,
        total,
        threshold,
        passed: false,
        failing,
        excluded: Dimension::ALL
            .into_iter()
            .filter(|d| excluded.contains(d))
            .collect(),
        critical,
        claimed: claimed.filter(|c| c.passing != passing || c.total != total),
    };
    s.passed = s.meets_threshold() && s.critical.is_empty();
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(sev: Severity, dim: &str) -> AuditFinding {
        AuditFinding {
            severity: sev,
            dimension: Dimension::parse(dim).expect("a dimension"),
            message: "m".into(),
            file: None,
            line: None,
        }
    }

    use Severity::*;

    #[test]
    fn table() {
        let research = vec![Dimension::ResearchIncorporation];
        // (findings, excluded, threshold, passing, total, passed)
        type Row = (Vec<AuditFinding>, Vec<Dimension>, f64, u32, u32, bool);
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
                vec![f(Warning, "test-quality"), f(Warning, "test-quality")],
                vec![],
                0.75,
                7,
                8,
                true,
            ),
            // A critical finding is never approved, whatever the score.
            (vec![f(Critical, "test-quality")], vec![], 0.75, 7, 8, false),
            // Exactly at the threshold: 6/8 = 0.75 passes.
            (
                vec![f(Warning, "test-quality"), f(Warning, "completeness")],
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
            // A finding on the excluded dimension does not count against the score…
            (
                vec![f(Warning, "research-incorporation")],
                research.clone(),
                0.75,
                7,
                7,
                true,
            ),
            // …but a critical one still refuses the approval.
            (
                vec![f(Critical, "research-incorporation")],
                research.clone(),
                0.75,
                7,
                7,
                false,
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
        let research = vec![Dimension::ResearchIncorporation];
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
            ],
            &[Dimension::ResearchIncorporation],
            0.75,
            Some(ClaimedScore {
                passing: 8,
                total: 8,
            }),
        );
        assert_eq!(
            s.failing,
            [Dimension::ArchitectureCompliance, Dimension::Completeness]
        );
        assert_eq!(s.excluded, [Dimension::ResearchIncorporation]);
        assert_eq!(s.critical, [Dimension::ArchitectureCompliance]);
        assert!(!s.passed, "a critical finding is never approved");
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
