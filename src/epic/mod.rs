//! Epics: one issue a planner fans out into sub-issues the board runs. This room holds what an
//! epic is made of, decided without I/O: the plan (tasks, dependencies, the order they run in).

mod plan;

pub use plan::{Plan, PlanError, Task};
