//! The oracle: runs a project's tests and reads what they did from the runner's machine-readable
//! report — never from the exit status alone.
//!
//! A [`Project`] is a directory and its [`Runner`], detected ([`detect`]: vitest, jest with
//! jest-junit, `node --test`, pytest, `go test`, `cargo test`) or configured ([`VerifyConfig`]:
//! `verify.command` and `verify.report`). [`run`] runs a [`Selection`] of its tests — the whole
//! suite or designated tests, narrowed by the runner's own filter — and gives a [`TestRun`]: per
//! test a stable [`TestId`] (file and full name), an [`Outcome`] (an [`Outcome::Error`] for a test
//! that could not run, such as one in a file that does not load, apart from an [`Outcome::Fail`]),
//! the failure's first line and place, and the suite's [`Totals`]. A run that gave no readable
//! report is [`NotRun`], which is never green.
//!
//! On top of runs: [`run_twice`] and [`flaky`] (tests whose outcome changed between two runs),
//! [`compare`] (what regressed from a base run to a head run), [`designated`] (RED: every designated
//! test fails on the base; GREEN: every one passes on the head) and [`proof`] (one row per
//! designated test, base against head).
//!
//! Runs go through the gates' machinery: the runner is found under the gates' trust rules, run with
//! their environment allowlist and trusted PATH in a process group of its own (with a timeout, the
//! gate session's stop request, and the process reaper for what a test run leaves behind).

mod compare;
mod detect;
mod frozen;
mod gates;
mod gotest;
mod junit;
mod libtest;
mod model;
mod proof;
mod runner;
mod text;

use serde::{Deserialize, Serialize};

use crate::gates::GateContext;

pub use crate::config::{ReportSpec, VerifyConfig};
pub use compare::{Comparison, Designated, Flaky, ProofRow, compare, designated, flaky, proof};
pub use detect::{DetectError, Runner, detect, runner_for};
pub use frozen::{Violation, Weakening, weakenings};
pub use gates::gate_for;
pub use model::{
    Location, NotRun, Outcome, Selection, TestId, TestResult, TestRun, TestSelector, Totals,
};
pub use proof::{
    Criterion, Mapping, Problem, ProofInput, ProofLine, ProofTable, TestEvidence, checklist,
    designated_of, is_syntax_error, judge_base_suite, judge_green, judge_red, map_checklist,
    proof_lines,
};
pub use runner::{DEFAULT_TIMEOUT, Project, run};

/// Two runs of one selection, one after the other, and the tests whose outcome changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Repeated {
    pub first: TestRun,
    pub(crate) second: TestRun,
    /// [`flaky`] of the two runs.
    pub flaky: Vec<Flaky>,
}

/// Run `selection` twice, one run after the other, and compare ([`flaky`]). Either run not running
/// is [`NotRun`].
pub async fn run_twice(
    ctx: &GateContext,
    project: &Project,
    selection: &Selection,
) -> Result<Repeated, NotRun> {
    let first = run(ctx, project, selection).await?;
    let second = run(ctx, project, selection).await?;
    let flaky = flaky(&first, &second);
    Ok(Repeated {
        first,
        second,
        flaky,
    })
}
