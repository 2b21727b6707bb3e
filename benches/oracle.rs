//! What the oracle costs: the TypeScript fixture's designated test run through `verify::run` (runner
//! lookup, process group, JUnit report read and parsed) against the same vitest command run by hand.
//! Prints both medians and their ratio; issue 26 aims at 1.2× or less.
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
use supervisor::gates::find_on_path;
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
}

/// The command the oracle runs for the designated test, started directly.
fn by_hand(vitest: &Path, dir: &Path, report: &Path) -> Duration {
    let started = Instant::now();
    let status = Command::new(vitest)
        .args([
            "run".to_string(),
            "--reporter=junit".into(),
            format!("--outputFile={}", report.display()),
            "-t".into(),
            "^(?:math adds two numbers)$".into(),
            FILE.into(),
        ])
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("vitest starts");
    let elapsed = started.elapsed();
    assert!(status.success(), "vitest by hand: {status}");
    elapsed
}

fn median(samples: &mut [Duration]) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
