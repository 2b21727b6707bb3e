//! pytest on the Python fixture.

use supervisor::gates::NotRunCause;
use supervisor::verify::{Flaky, Location, Runner};

use super::*;

fn pytest_ready() -> bool {
    common::tools_available(&["pytest"])
}

const MATH: &str = "tests/test_math.py";
const FLAKY: &str = "tests/test_flaky.py";

#[test]
fn the_suite_gives_ids_outcomes_first_lines_and_totals() {
    if !pytest_ready() {
        return;
    }
    let copy = Copy::of("python");
    assert_eq!(copy.project().runner, Runner::Pytest);
    let run = copy.run(&Selection::All).expect("pytest ran");
    assert_eq!(
        outcomes(&run),
        [
            (
                format!("{FLAKY}::test_passes_every_other_run"),
                Outcome::Pass
            ),
            (
                format!("{MATH}::TestGroup::test_adds_negatives"),
                Outcome::Pass
            ),
            (format!("{MATH}::test_adds"), Outcome::Pass),
            (format!("{MATH}::test_divides"), Outcome::Skipped),
            (format!("{MATH}::test_multiplies"), Outcome::Fail),
            ("tests/test_syntax.py".into(), Outcome::Error),
        ]
    );
    let failed = result(&run, MATH, "test_multiplies");
    assert_eq!(failed.message.as_deref(), Some("assert 0 == 6"));
    assert_eq!(
        failed.location,
        Some(Location {
            file: MATH.into(),
            line: 11
        })
    );
    assert_eq!(
        result(&run, MATH, "test_divides").message.as_deref(),
        Some("not today")
    );
    // The file that does not load is an error, not a failure.
    let broken = result(&run, "tests/test_syntax.py", "");
    let message = broken.message.as_deref().unwrap_or_default();
    assert!(message.starts_with("SyntaxError"), "{message}");
    assert_eq!(broken.location.as_ref().map(|l| l.line), Some(1));
    assert_eq!(run.totals, totals(3, 1, 1, 1));
}

#[test]
fn designated_tests_run_twice_show_the_flaky_one() {
    if !pytest_ready() {
        return;
    }
    let copy = Copy::of("python");
    let selection = only(&[
        TestSelector::test(FLAKY, "test_passes_every_other_run"),
        TestSelector::test(MATH, "test_multiplies"),
    ]);
    let twice = copy.run_twice(&selection);
    assert_eq!(
        outcomes(&twice.first),
        [
            (
                format!("{FLAKY}::test_passes_every_other_run"),
                Outcome::Pass
            ),
            (format!("{MATH}::test_multiplies"), Outcome::Fail),
        ],
        "only the designated tests are kept"
    );
    assert!(
        !twice.first.command.contains("test_syntax"),
        "{}",
        twice.first.command
    );
    assert_eq!(
        twice.flaky,
        [Flaky {
            id: TestId::new(FLAKY, "test_passes_every_other_run"),
            first: Some(Outcome::Pass),
            second: Some(Outcome::Fail),
        }]
    );
}

#[test]
fn without_pytest_the_run_is_not_run() {
    let copy = Copy::of("python");
    let ctx = copy.context_with(common::path_without(&["pytest"]));
    let err = common::run_bounded(60, verify::run(&ctx, &copy.project(), &Selection::All))
        .expect_err("no pytest anywhere");
    assert!(err.reason.contains("pytest not found"), "{err}");
    assert_eq!(err.cause, NotRunCause::Setup);
}
