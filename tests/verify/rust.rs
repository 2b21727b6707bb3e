//! cargo test on the Rust fixture.

use supervisor::verify::{Flaky, Location, Runner};

use super::*;

const LIB: &str = "src/lib.rs";

#[test]
fn the_suite_gives_ids_outcomes_first_lines_and_totals() {
    let copy = Copy::of("rust");
    assert_eq!(copy.project().runner, Runner::Cargo);
    let run = copy.run(&Selection::All).expect("cargo ran");
    assert_eq!(
        outcomes(&run),
        [
            ("src/lib.rs::tests::adds".to_string(), Outcome::Pass),
            ("src/lib.rs::tests::divides".into(), Outcome::Skipped),
            ("src/lib.rs::tests::multiplies".into(), Outcome::Fail),
            (
                "src/lib.rs::tests::passes_every_other_run".into(),
                Outcome::Pass
            ),
            ("tests/broken.rs".into(), Outcome::Error),
            ("tests/outer.rs::adds_from_outside".into(), Outcome::Pass),
        ]
    );
    let failed = result(&run, LIB, "tests::multiplies");
    assert_eq!(
        failed.message.as_deref(),
        Some("assertion `left == right` failed: two times three")
    );
    assert_eq!(
        failed.location,
        Some(Location {
            file: LIB.into(),
            line: 21
        })
    );
    assert_eq!(
        result(&run, LIB, "tests::divides").message.as_deref(),
        Some("not today")
    );
    // The target that does not compile is an error, not a failure.
    let broken = result(&run, "tests/broken.rs", "");
    let message = broken.message.as_deref().unwrap_or_default();
    assert!(message.contains("`subtract`"), "{message}");
    assert_eq!(
        broken.location,
        Some(Location {
            file: "tests/broken.rs".into(),
            line: 3
        })
    );
    assert_eq!(run.totals, totals(3, 1, 1, 1));
}

#[test]
fn designated_tests_run_twice_show_the_flaky_one() {
    let copy = Copy::of("rust");
    let selection = only(&[
        TestSelector::test(LIB, "tests::passes_every_other_run"),
        TestSelector::test(LIB, "tests::multiplies"),
    ]);
    let twice = copy.run_twice(&selection);
    assert_eq!(
        outcomes(&twice.first),
        [
            ("src/lib.rs::tests::multiplies".to_string(), Outcome::Fail),
            (
                "src/lib.rs::tests::passes_every_other_run".into(),
                Outcome::Pass
            ),
        ]
    );
    let command = &twice.first.command;
    assert!(
        command.contains("--lib") && command.contains("--exact") && !command.contains("outer"),
        "cargo's own filters narrow the run: {command}"
    );
    assert_eq!(
        twice.flaky,
        [Flaky {
            id: TestId::new(LIB, "tests::passes_every_other_run"),
            first: Some(Outcome::Pass),
            second: Some(Outcome::Fail),
        }]
    );
}

#[test]
fn without_cargo_the_run_is_not_run() {
    let copy = Copy::of("rust");
    let ctx = copy.context_with(common::path_without(&["cargo"]));
    let err = common::run_bounded(60, verify::run(&ctx, &copy.project(), &Selection::All))
        .expect_err("no cargo anywhere");
    assert!(err.reason.contains("cargo not found"), "{err}");
}
