//! The identities, the settings, processes, TLS, metrics and evidence: the rooms `ids`, `config`, `process`, `tls`, `metrics`, `evidence` of supervisor
//! (the root crate `supervisor` re-exports every room; `tests/layering.rs` holds their layers).

pub mod config;
pub mod evidence;
pub mod ids;
pub mod metrics;
pub mod process;
pub mod tls;
