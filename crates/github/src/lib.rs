//! The GitHub client and its events (webhooks and polls): the rooms `github`, `events` of supervisor
//! (the root crate `supervisor` re-exports every room; `tests/layering.rs` holds their layers).

pub mod events;
pub mod github;

// The rooms below this crate that its rooms use, reached as `crate::room` as before.
pub use supervisor_base::{config, ids, metrics, tls};
