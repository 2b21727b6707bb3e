//! The pipeline, its reports, doctor, the runtime, the scheduler and serve: the rooms `pipeline`, `report`, `doctor`, `runtime`, `scheduler`, `serve` of supervisor
//! (the root crate `supervisor` re-exports every room; `tests/layering.rs` holds their layers).

pub mod doctor;
pub mod pipeline;
pub mod report;
pub mod runtime;
pub mod scheduler;
pub mod serve;

// The rooms below this crate that its rooms use, reached as `crate::room` as before.
pub use supervisor_base::{config, ids, metrics, process};
pub use supervisor_github::{events, github};
pub use supervisor_services::{agent, audit, epic, gates, verify, workspace};
