//! The engine: pure decisions (`decide`), a step function over the run's state (`machine`), the
//! journal its state is folded from, and the driver that performs its effects.

mod checks;
mod context;
pub mod decide;
mod effects;
mod engine;
mod failure;
mod history;
mod journal;
mod machine;
mod project;
pub mod replay;
mod summary;
mod user_text;

pub use checks::GitHubChecks;
pub(crate) use context::{IssueContext, NoteKind, Return, TrustedNote, has_heading};
pub use decide::{
    DecideError, DecideInput, Decision, MAX_ITERATIONS, RunState, SkipReason, Step, StopReason,
    Transition, TransitionKind, decide, plan,
};
pub use effects::{
    Cleanup, CommitResult, Context, Dispatch, Effect, Effects, EpicParent, GateFeed, Input,
    PrRequest, TaskSpec, Text, ThreadAnswer, WorktreeInfo,
};
pub use engine::{RunError, RunOptions, drive};
pub use failure::{EffectError, ErrorClass};
pub use history::{
    LastWord, RunRecord, RunStatus, RunTotals, find_run, prune_runs, read_runs, read_runs_where,
    revised_pull,
};
pub(crate) use journal::off_the_runtime;
pub use journal::{
    AgentStats, Entry, Event, FORMAT, Halt, Journal, JournalError, read_entries, runs_dir,
};
pub use machine::{Machine, Next, Step as MachineStep};
pub use project::{Project, process_env};
pub use summary::{
    AgentLine, CurrentWork, GateRound, Progress, ReviewRejection, RunEnd, RunFacts, RunSummary,
    StageMark, StageProgress, exit,
};
pub use user_text::UserText;
