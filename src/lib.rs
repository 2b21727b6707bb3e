//! supervisor walks a GitHub issue across a Projects board — Research → Architecture → TestDesign →
//! Implementation → Audit — running a role agent per column, quality gates before the audit, a
//! deterministic audit score, and a pull request on approval.
//!
//! Rooms, in layers, each using only the rooms below it (`tests/layering.rs` holds the table):
//! `ids` (the identities all of them pass each other); `config`, `process`, `tls`, `metrics`; `evidence`; the services `agent`, `github`, `workspace`,
//! `gates`, `verify`, `audit` and `epic`; `events`; `sandbox` (GitHub's stand-in, beside the rest);
//! `pipeline`; `report`; `doctor`; `runtime`; `scheduler`; `serve`; `demo`; and `cli`, which wires
//! them to the command line.

pub use supervisor_services::agent;
pub use supervisor_services::audit;
pub mod cli;
pub use supervisor_base::config;
pub mod demo;
pub use supervisor_base::evidence;
pub use supervisor_base::ids;
pub use supervisor_base::metrics;
pub use supervisor_base::process;
pub use supervisor_base::tls;
pub use supervisor_engine::doctor;
pub use supervisor_engine::pipeline;
pub use supervisor_engine::report;
pub use supervisor_engine::runtime;
pub use supervisor_engine::scheduler;
pub use supervisor_engine::serve;
pub use supervisor_github::events;
pub use supervisor_github::github;
pub use supervisor_sandbox::sandbox;
pub use supervisor_services::epic;
pub use supervisor_services::gates;
pub use supervisor_services::verify;
pub use supervisor_services::workspace;
