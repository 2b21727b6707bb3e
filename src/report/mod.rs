//! Every text a human reads: the `check` summary, comments, the PR body, the run summary.

mod check;

pub use check::{check_json, check_text, errors_text};
