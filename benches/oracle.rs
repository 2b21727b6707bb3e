//! What the oracle costs: the TypeScript fixture's designated test run through `verify::run` (runner
//! lookup, process group, JUnit report read and parsed) against the same vitest command run by hand;
//! then the `red` and `green` gates whole (RED: the designated test, and the whole suite once it
//! failed; GREEN: the whole suite, then the designated test again) against the same vitest runs by
//! hand. Prints the medians and their ratios; issue 26 aims at 1.2× or less.
//!
//! `cargo bench --bench oracle` (after `scripts/install-tools.sh`; the pinned vitest is put on the
//! search path here). `ORACLE_BENCH_ROUNDS=N` sets the rounds (default 7); the two alternate, after
//! one warm-up run each.

#[path = "../tests/gates/common.rs"]
mod common;
#[path = "../tests/verify/harness.rs"]
mod harness;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use harness::Copy;
use supervisor::config::GateKind;
use supervisor::evidence::ProofInput;
use supervisor::gates::{GateStatus, default_hook, find_on_path};
use supervisor::verify::{self, Outcome, Selection, TestSelector};

const FILE: &str = "tests/math.test.ts";
const TEST: &str = "math > adds two numbers";

fn main() {
    let rounds: usize = std::env::var("ORACLE_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(7);
    let path = common::tools_path();
    let Some(vitest) = find_on_path("vitest", Some(&path)) else {
        eprintln!("oracle bench skipped: vitest is not installed (run scripts/install-tools.sh)");
        return;
    };
    let copy = Copy::of("typescript");
    let ctx = copy.context();
    let project = copy.project();
    let selection = Selection::Only(vec![TestSelector::test(FILE, TEST)]);
    let runtime = common::Runtime::new();
    let oracle = || {
        let started = Instant::now();
        let run = runtime
            .run(300, verify::run(&ctx, &project, &selection))
            .expect("the oracle ran vitest");
        let elapsed = started.elapsed();
        assert_eq!(run.results.len(), 1, "{:?}", run.results);
        assert_eq!(run.results[0].outcome, Outcome::Pass);
        elapsed
    };
    let scratch = tempfile::tempdir().expect("temp dir");
    let report = scratch.path().join("by-hand.xml");
    let by_hand = || by_hand(&vitest, &copy.dir, &report);

    oracle();
    by_hand();
    let mut through_oracle = Vec::with_capacity(rounds);
    let mut directly = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        through_oracle.push(oracle());
        directly.push(by_hand());
    }
    let (o, d) = (median(&mut through_oracle), median(&mut directly));
    println!("designated test of the TypeScript fixture, median of {rounds} rounds:");
    println!("  by hand (vitest run …)   {:>7.0} ms", ms(d));
    println!("  through the oracle       {:>7.0} ms", ms(o));
    println!("  ratio                    {:>7.2}×", ms(o) / ms(d));

    // The gates: RED on a designated test that fails, so that it runs the whole suite too.
    // (multiply is not written yet in the fixture: its test fails.)
    let failing = TestSelector::test(FILE, "math > multiplies two numbers");
    let mut gate_ctx = copy.context();
    gate_ctx.proof = Some(std::sync::Arc::new(ProofInput {
        designated: vec![failing],
        test_paths: vec!["tests/**".into()],
        ..ProofInput::default()
    }));
    for kind in [GateKind::Red, GateKind::Green] {
        let hook = default_hook(kind);
        let gate = || {
            let started = Instant::now();
            let r = runtime.run(600, verify::gate_for(kind).run(&hook, &gate_ctx));
            let elapsed = started.elapsed();
            assert!(
                !matches!(r.status, GateStatus::NotRun { .. }),
                "{kind}: {r:?}"
            );
            elapsed
        };
        // By hand: the same vitest runs, in the same order.
        let designated = || {
            by_hand_filtered(
                &vitest,
                &copy.dir,
                &report,
                "^(?:math multiplies two numbers)$",
            )
        };
        let suite = || by_hand_all(&vitest, &copy.dir, &report);
        let hand = || match kind {
            GateKind::Red => designated() + suite(),
            _ => suite() + designated(),
        };
        gate();
        hand();
        let (mut through, mut directly) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            through.push(gate());
            directly.push(hand());
        }
        let (g, h) = (median(&mut through), median(&mut directly));
        println!("the {kind} gate on the TypeScript fixture, median of {rounds} rounds:");
        println!("  by hand (two vitest runs) {:>6.0} ms", ms(h));
        println!("  through the gate          {:>6.0} ms", ms(g));
        println!("  ratio                     {:>6.2}×", ms(g) / ms(h));
    }
}

/// vitest on one test name, by hand.
fn by_hand_filtered(vitest: &Path, dir: &Path, report: &Path, pattern: &str) -> Duration {
    vitest_by_hand(vitest, dir, report, &["-t", pattern, FILE]).0
}

/// The whole suite, by hand (failures expected: the fixture holds failing tests).
fn by_hand_all(vitest: &Path, dir: &Path, report: &Path) -> Duration {
    vitest_by_hand(vitest, dir, report, &[]).0
}

/// `vitest run` with a JUnit report and `args`: its time, and whether it passed.
fn vitest_by_hand(vitest: &Path, dir: &Path, report: &Path, args: &[&str]) -> (Duration, bool) {
    let started = Instant::now();
    let status = Command::new(vitest)
        .args(["run", "--reporter=junit"])
        .arg(format!("--outputFile={}", report.display()))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("vitest starts");
    (started.elapsed(), status.success())
}

/// The command the oracle runs for the designated test, started directly.
fn by_hand(vitest: &Path, dir: &Path, report: &Path) -> Duration {
    let (elapsed, passed) = vitest_by_hand(
        vitest,
        dir,
        report,
        &["-t", "^(?:math adds two numbers)$", FILE],
    );
    assert!(passed, "vitest by hand failed");
    elapsed
}

fn median(samples: &mut [Duration]) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
