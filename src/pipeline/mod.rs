//! The engine: pure decisions (`plan`, `decide`), the journal, and the loop that performs them.

mod checks;
mod context;
mod decide;
mod engine;
mod journal;
mod project;

pub use checks::GitHubChecks;
pub use context::{
    IssueContext, MAX_NOTE_CHARS, Return, TaskInput, TrustedNote, build_task, has_heading,
};
pub use decide::{
    DecideError, DecideInput, Decision, MAX_ITERATIONS, RunState, Step, StopReason, Transition,
    TransitionKind, decide, plan,
};
pub use engine::{RunError, RunOptions, Services, exit_code, run_issue};
pub use journal::{Entry, Event, Journal, JournalError, Replay, read_entries, runs_dir};
pub use project::{Project, process_env};
