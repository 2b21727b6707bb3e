//! The audit's eight dimensions: the vocabulary of the auditor's findings, the score and the
//! workflow's `scoreDimension`.

use std::fmt;

use serde::{Deserialize, Serialize};

/// One audit dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Dimension {
    ArchitectureCompliance,
    TicketFulfillment,
    TestQuality,
    CorrectnessSafety,
    CodeQuality,
    Completeness,
    DuplicateCode,
    ResearchIncorporation,
}

impl Dimension {
    /// Every dimension, in report order.
    pub const ALL: [Dimension; 8] = [
        Dimension::ArchitectureCompliance,
        Dimension::TicketFulfillment,
        Dimension::TestQuality,
        Dimension::CorrectnessSafety,
        Dimension::CodeQuality,
        Dimension::Completeness,
        Dimension::DuplicateCode,
        Dimension::ResearchIncorporation,
    ];

    /// The name agents and reports use.
    pub fn name(self) -> &'static str {
        match self {
            Dimension::ArchitectureCompliance => "architecture-compliance",
            Dimension::TicketFulfillment => "ticket-fulfillment",
            Dimension::TestQuality => "test-quality",
            Dimension::CorrectnessSafety => "correctness-safety",
            Dimension::CodeQuality => "code-quality",
            Dimension::Completeness => "completeness",
            Dimension::DuplicateCode => "duplicate-code",
            Dimension::ResearchIncorporation => "research-incorporation",
        }
    }

    /// The dimension named `text` (case and `_`/space for `-` do not matter).
    pub fn parse(text: &str) -> Option<Dimension> {
        let norm: String = text
            .trim()
            .chars()
            .map(|c| match c {
                '_' | ' ' => '-',
                c => c.to_ascii_lowercase(),
            })
            .collect();
        Dimension::ALL.into_iter().find(|d| d.name() == norm)
    }

    /// The names of every dimension, for messages.
    pub fn names() -> String {
        Dimension::list(&Dimension::ALL)
    }

    /// `dims` as a comma-separated list of names.
    pub fn list(dims: &[Dimension]) -> String {
        dims.iter().map(|d| d.name()).collect::<Vec<_>>().join(", ")
    }
}

impl fmt::Display for Dimension {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_spelling_is_forgiven() {
        for d in Dimension::ALL {
            assert_eq!(Dimension::parse(d.name()), Some(d));
            assert_eq!(
                serde_json::to_value(d).unwrap(),
                serde_json::json!(d.name())
            );
        }
        assert_eq!(
            Dimension::parse("Test_Quality"),
            Some(Dimension::TestQuality)
        );
        assert_eq!(Dimension::parse("security"), None);
    }
}
