//! Oracle tests: the real runners (vitest, pytest, cargo) on fixture projects under
//! `tests/fixtures/verify/`, each with passing tests, a failing assertion, a test file that does not
//! load, a skipped test and a test that fails every other run. `scripts/test.sh` installs the pinned
//! runners; a missing one fails a test when `CI` is set and skips it otherwise.

#[path = "../gates/common.rs"]
mod common;
mod harness;

mod configured;
mod python;
mod rust;
mod typescript;

use harness::*;
