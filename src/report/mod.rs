//! Every text a human reads: the `check` summary, comments, the PR body, the run summary.

mod check;
mod gates;

pub use check::{check_json, check_text, errors_text};
pub use gates::{
    combined_gate_note, gate_findings_for_auditor, gate_reports_text, gate_summary_table,
    verdict_text,
};
