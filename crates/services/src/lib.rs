//! The agents, workspaces, gates, the oracle, the audit and epics: the rooms `agent`, `workspace`, `gates`, `verify`, `audit`, `epic` of supervisor
//! (the root crate `supervisor` re-exports every room; `tests/layering.rs` holds their layers).

pub mod agent;
pub mod audit;
pub mod epic;
pub mod gates;
pub mod verify;
pub mod workspace;

// The rooms below this crate that its rooms use, reached as `crate::room` as before.
pub use supervisor_base::{config, evidence, process, tls};
