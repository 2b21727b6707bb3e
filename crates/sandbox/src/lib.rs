//! GitHub's stand-in: the sandbox: the rooms `sandbox` of supervisor
//! (the root crate `supervisor` re-exports every room; `tests/layering.rs` holds their layers).

pub mod sandbox;

// The rooms below this crate that its rooms use, reached as `crate::room` as before.
pub use supervisor_github::{events, github};
