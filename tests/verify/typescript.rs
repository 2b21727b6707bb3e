//! vitest on the TypeScript fixture.

use std::os::unix::fs::PermissionsExt;

use supervisor::gates::NotRunCause;
use supervisor::verify::{Flaky, Location, Runner};

use super::*;

fn vitest_ready() -> bool {
    common::tools_available(&["vitest"])
}

const MATH: &str = "tests/math.test.ts";
const MULTIPLIES: &str = "math > multiplies two numbers";

#[test]
fn the_suite_gives_ids_outcomes_first_lines_and_totals() {
    if !vitest_ready() {
        return;
    }
    let copy = Copy::of("typescript");
    assert_eq!(copy.project().runner, Runner::Vitest);
    let run = copy.run(&Selection::All).expect("vitest ran");
    assert_eq!(run.runner, "vitest");
    assert_eq!(
        outcomes(&run),
        [
            ("tests/broken.test.ts".to_string(), Outcome::Error),
            (
                "tests/flaky.test.ts::passes every other run".into(),
                Outcome::Pass
            ),
            (
                "tests/math.test.ts::math > adds two numbers".into(),
                Outcome::Pass
            ),
            (
                "tests/math.test.ts::math > divides by zero".into(),
                Outcome::Skipped
            ),
            (
                "tests/math.test.ts::math > multiplies two numbers".into(),
                Outcome::Fail
            ),
        ]
    );
    let failed = result(&run, MATH, MULTIPLIES);
    assert_eq!(
        failed.message.as_deref(),
        Some("expected +0 to be 6 // Object.is equality")
    );
    assert_eq!(
        failed.location,
        Some(Location {
            file: MATH.into(),
            line: 10
        })
    );
    assert!(failed.duration_ms.is_some(), "{failed:?}");
    // The file that does not load is an error, not a failure.
    let broken = result(&run, "tests/broken.test.ts", "");
    let message = broken.message.as_deref().unwrap_or_default();
    assert!(message.contains("../src/missing"), "{message}");
    assert_eq!(broken.location.as_ref().map(|l| l.line), Some(2));
    assert_eq!(run.totals, totals(2, 1, 1, 1));
    assert!(!run.is_green());
}

#[test]
fn one_designated_test_runs_alone() {
    if !vitest_ready() {
        return;
    }
    let copy = Copy::of("typescript");
    let designated = [TestSelector::test(MATH, MULTIPLIES)];
    let run = copy.run(&only(&designated)).expect("vitest ran");
    assert_eq!(
        outcomes(&run),
        [(format!("{MATH}::{MULTIPLIES}"), Outcome::Fail)]
    );
    assert!(
        run.command.contains("-t") && run.command.contains(MATH),
        "vitest's own filter narrows the run: {}",
        run.command
    );
    assert!(
        !copy.dir.join(".flaky-count").exists(),
        "the flaky test's file did not run"
    );
    let red = verify::designated(&run, &designated);
    assert!(red.all_fail(), "{red:?}");
}

#[test]
fn running_twice_finds_the_flaky_test() {
    if !vitest_ready() {
        return;
    }
    let copy = Copy::of("typescript");
    let selection = only(&[
        TestSelector::file("tests/flaky.test.ts"),
        TestSelector::file(MATH),
    ]);
    let twice = copy.run_twice(&selection);
    assert_eq!(
        twice.flaky,
        [Flaky {
            id: TestId::new("tests/flaky.test.ts", "passes every other run"),
            first: Some(Outcome::Pass),
            second: Some(Outcome::Fail),
        }]
    );
    assert_eq!(twice.first.totals.total(), 4);
}

#[test]
fn base_and_head_show_the_regression_and_the_proof() {
    if !vitest_ready() {
        return;
    }
    let copy = Copy::of("typescript");
    let designated = [TestSelector::test(MATH, MULTIPLIES)];
    let selection = only(&[TestSelector::file(MATH)]);
    let base = copy.run(&selection).expect("base ran");
    assert!(verify::designated(&base, &designated).all_fail());
    // The change makes multiply work and breaks add.
    copy.write(
        "src/math.ts",
        "export function add(a: number, b: number): number {\n  return a - b;\n}\n\nexport function multiply(a: number, b: number): number {\n  return a * b;\n}\n",
    );
    let head = copy.run(&selection).expect("head ran");
    let comparison = verify::compare(&base, &head);
    assert_eq!(
        comparison.regressed,
        [TestId::new(MATH, "math > adds two numbers")]
    );
    assert_eq!(comparison.fixed, [TestId::new(MATH, MULTIPLIES)]);
    assert!(comparison.vanished.is_empty());
    let green = verify::designated(&head, &designated);
    assert!(green.all_pass(), "{green:?}");
    let proof = verify::proof(&base, &head, &designated);
    assert_eq!(proof.len(), 1);
    assert!(proof[0].is_proven(), "{proof:?}");
}

#[test]
fn without_vitest_the_run_is_not_run() {
    let copy = Copy::of("typescript");
    let ctx = copy.context_with(common::path_without(&["vitest"]));
    let err = common::run_bounded(60, verify::run(&ctx, &copy.project(), &Selection::All))
        .expect_err("no vitest anywhere");
    assert!(err.reason.contains("vitest not found"), "{err}");
    assert_eq!(err.cause, NotRunCause::Setup);
}

#[test]
fn a_runner_planted_in_the_checkout_is_never_run() {
    if !vitest_ready() {
        return;
    }
    let copy = Copy::of("typescript");
    let bin = copy.dir.join("node_modules/.bin");
    std::fs::create_dir_all(&bin).unwrap();
    let planted = bin.join("vitest");
    std::fs::write(
        &planted,
        "#!/bin/sh\ntouch \"$(dirname \"$0\")/../../planted-ran\"\nexit 0\n",
    )
    .unwrap();
    std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut dirs = vec![bin.clone()];
    dirs.extend(std::env::split_paths(&common::tools_path()));
    let ctx = copy.context_with(std::env::join_paths(dirs).unwrap());
    let run = common::run_bounded(
        600,
        verify::run(&ctx, &copy.project(), &only(&[TestSelector::file(MATH)])),
    )
    .expect("the trusted vitest ran");
    assert!(!copy.dir.join("planted-ran").exists(), "{}", run.command);
    assert!(
        !run.command.contains(&*copy.dir.to_string_lossy()),
        "{}",
        run.command
    );
    assert_eq!(run.totals.total(), 3);
}
