//! supervisor walks a GitHub issue across a Projects board — Research → Architecture → TestDesign →
//! Implementation → Audit — running a role agent per column, quality gates before the audit, a
//! deterministic audit score, and a pull request on approval.
//!
//! Rooms, in layers, each using only the rooms below it (`tests/layering.rs` holds the table):
//! `ids` (the identities all of them pass each other); `config`, `process`, `tls`, `metrics`; `evidence`; the services `agent`, `github`, `workspace`,
//! `gates`, `verify`, `audit` and `epic`; `events`; `sandbox` (GitHub's stand-in, beside the rest);
//! `pipeline`; `report`; `doctor`; `runtime`; `scheduler`; `serve`; `demo`; and `cli`, which wires
//! them to the command line.

pub mod agent;
pub mod audit;
pub mod cli;
pub mod config;
pub mod demo;
pub mod doctor;
pub mod epic;
pub mod events;
pub mod evidence;
pub mod gates;
pub mod github;
pub mod ids;
pub mod metrics;
pub mod pipeline;
pub mod process;
pub mod report;
pub mod runtime;
pub mod sandbox;
pub mod scheduler;
pub mod serve;
pub mod tls;
pub mod verify;
pub mod workspace;
