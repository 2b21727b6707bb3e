//! Every text a human reads: the `check` summary, comments, the PR body, the run summary.

mod actions;
mod check;
mod comments;
mod gates;
mod history;
mod progress;
mod summary;
mod task;
mod tracking;

pub use actions::{
    action_outputs, annotations, delimiter_fits, error_job_summary, error_outputs, escape_data,
    escape_property, github_output, job_summary,
};
pub use check::{check_json, check_text, errors_text};
pub use comments::{
    PrBodyInput, already_resolved_comment, comment_text, default_pr_title, dimension_table,
    findings_list, human_duration, human_tokens, pr_body, pull_request_text, score_gate_comment,
    score_line, stage_comment, stopped_comment,
};
pub use gates::{
    combined_gate_note, gate_findings_for_auditor, gate_reports_text, gate_summary_table,
    verdict_text,
};
pub use history::{runs_text, timeline_text, why_text};
pub use progress::{
    colour_on_stderr, gate_finished_line, gate_mark, progress_lines, progress_status,
};
pub use summary::{planned_tasks, run_map, summary_headline, summary_text};
pub use task::{MAX_NOTE_CHARS, REVISION_TASK_HEADING, TaskInput, build_task, task_text};
/// A run of three stages for tests of live views: at a stage, or ended.
#[cfg(test)]
pub(crate) use tracking::tests::progress as test_progress;
pub(crate) use tracking::{TrackingLinks, tracking_text};
