//! Scratch directories for tests that must not be under /tmp: bubblewrap gives sandboxed agents an
//! empty /tmp of their own, and Codex refuses to put the helpers its own sandbox runs under a
//! temporary directory.

use std::path::PathBuf;

/// The build's scratch directory, unless the checkout itself is under /tmp; then one under HOME.
pub(crate) fn scratch_base() -> PathBuf {
    let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    if !target.starts_with(std::env::temp_dir()) && !target.starts_with("/tmp") {
        return target;
    }
    let home = std::env::var_os("HOME").expect("HOME is set");
    let base = PathBuf::from(home).join(".cache/supervisor-tests");
    std::fs::create_dir_all(&base).unwrap();
    base
}
