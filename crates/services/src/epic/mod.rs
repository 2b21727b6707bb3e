//! Epics: one issue a planner fans out into sub-issues the board runs. This room holds what an
//! epic is made of, decided without I/O: the plan (tasks, dependencies, the order they run in) and
//! the epic's progress (what happened, folded; what to do next), and the seal that makes a
//! sub-issue supervisor wrote trusted as long as its body is unchanged.

mod answer;
mod machine;
mod plan;
mod seal;

pub use answer::{read_plan, read_verdict};
pub use machine::{Epic, Happened, Integration, Limits, Revision, Step, TaskState, Verdict};
pub use plan::{Plan, PlanError, Task};
pub use seal::{Seal, SealError};
