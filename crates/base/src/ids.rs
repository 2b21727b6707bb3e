//! The identities supervisor's parts pass each other, each its own type so that one cannot be
//! given where another is meant: an issue's number is not a pull request's, a name on the board is
//! not a stage of the workflow (that one is `config::StageId`, made only by a validated
//! workflow), a run's id is not any string.
//!
//! They are written to journals, checkpoints and JSON as the plain values they wrap.
//!
//! A stage reaches the board through the settings, which say which column holds it:
//!
//! ```
//! fn move_card(_to: &supervisor_base::ids::BoardOption) {}
//! fn close(_issue: supervisor_base::ids::IssueNumber) {}
//! # fn f(s: &supervisor_base::config::Settings, w: &supervisor_base::config::Workflow) {
//! let stage = w.stage_id("Research").unwrap();
//! move_card(&s.board_option(&stage));
//! # }
//! close(supervisor_base::ids::IssueNumber::new(7));
//! ```
//!
//! and the compiler refuses the shortcuts:
//!
//! ```compile_fail
//! // A workflow's stage is not a column of the board: the compiler refuses one for the other.
//! fn move_card(_to: &supervisor_base::ids::BoardOption) {}
//! fn stage(w: &supervisor_base::config::Workflow) -> supervisor_base::config::StageId {
//!     w.stage_id("Research").unwrap()
//! }
//! # fn f(w: &supervisor_base::config::Workflow) {
//! move_card(&stage(w));
//! # }
//! ```
//!
//! ```compile_fail
//! // A pull request's number is not an issue's.
//! fn close(_issue: supervisor_base::ids::IssueNumber) {}
//! close(supervisor_base::ids::PrNumber::new(7));
//! ```

use std::fmt;

use serde::{Deserialize, Serialize};

macro_rules! number {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(u64);

        impl $name {
            pub const fn new(n: u64) -> Self {
                Self(n)
            }

            /// The number GitHub's API takes.
            pub const fn get(self) -> u64 {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }
    };
}

number!(
    /// An issue's number in its repository.
    IssueNumber
);
number!(
    /// A pull request's number in its repository.
    PrNumber
);

macro_rules! name {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            pub fn new(s: impl Into<String>) -> Self {
                Self(s.into())
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        /// Read as the text it is (the other way, any text as one, takes `new`).
        impl std::ops::Deref for $name {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }
    };
}

name!(
    /// A column of the board: an option of its Status field, as GitHub names it. Which stage of
    /// the workflow it stands for is the settings' `columns` mapping's to say.
    BoardOption
);
name!(
    /// A run's id (`<issue>-<time>`, or `pr<number>-<time>` for a revision).
    RunId
);
name!(
    /// A commit's object id, as git prints it.
    CommitSha
);

impl BoardOption {
    /// The same column, GitHub's names being matched without regard to case.
    pub(crate) fn is(&self, other: &str) -> bool {
        self.0.eq_ignore_ascii_case(other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_are_written_as_the_values_they_wrap() {
        assert_eq!(serde_json::to_string(&IssueNumber::new(7)).unwrap(), "7");
        assert_eq!(serde_json::to_string(&PrNumber::new(9)).unwrap(), "9");
        assert_eq!(
            serde_json::to_string(&BoardOption::new("In review")).unwrap(),
            "\"In review\""
        );
        let back: RunId = serde_json::from_str("\"7-20261127T081700\"").unwrap();
        assert_eq!(back.as_str(), "7-20261127T081700");
        assert_eq!(format!("#{}", IssueNumber::new(12)), "#12");
    }

    #[test]
    fn board_columns_are_matched_without_regard_to_case() {
        assert!(BoardOption::new("In Progress").is("in progress"));
        assert!(!BoardOption::new("In Progress").is("Progress"));
    }
}
