//! The command gate: `expect` pass / fail / contains, timeouts, signals, the output tail and the
//! `file:line` places it names.

use supervisor::config::{Expect, GateKind, Hook};
use supervisor::gates::{GateReport, GateStatus, default_hook, run_gate};

use crate::common::{Fixture, run_bounded};

fn command(run: &str, expect: Expect, timeout_sec: Option<u64>) -> Hook {
    Hook {
        name: "oracle".into(),
        run: Some(run.into()),
        expect,
        timeout_sec,
        ..default_hook(GateKind::Command)
    }
}

fn gate(f: &Fixture, hook: &Hook) -> GateReport {
    let ctx = f.context();
    run_bounded(30, async { run_gate(hook, &ctx).await })
}

#[test]
fn expectations() {
    let f = Fixture::new("ts-base");
    let cases: &[(&str, Expect, GateStatus)] = &[
        ("true", Expect::Pass, GateStatus::Pass),
        ("exit 3", Expect::Pass, GateStatus::Fail),
        ("false", Expect::Fail, GateStatus::Pass),
        ("true", Expect::Fail, GateStatus::Fail),
        (
            "echo 'build ok: 12 tests'",
            Expect::Contains("12 tests".into()),
            GateStatus::Pass,
        ),
        (
            "echo 'build ok' >&2; exit 1",
            Expect::Contains("build ok".into()),
            GateStatus::Pass,
        ),
        (
            "echo nope",
            Expect::Contains("12 tests".into()),
            GateStatus::Fail,
        ),
        // Killed by a signal: never the answer asked for.
        ("kill -9 $$", Expect::Fail, GateStatus::Fail),
    ];
    for (run, expect, status) in cases {
        let r = gate(&f, &command(run, expect.clone(), None));
        assert_eq!(&r.status, status, "{run}: {r:#?}");
        assert_eq!(r.name, "oracle");
        assert_eq!(r.kind, GateKind::Command);
    }
}

#[test]
fn failure_keeps_the_output_tail_and_the_places_it_names() {
    let f = Fixture::new("ts-base");
    let script = "for i in $(seq 1 50); do echo line $i; done; echo 'src/math.ts:2:5: error: boom' >&2; echo 'at ./src/index.ts:4' >&2; echo 'missing.ts:9: not here' >&2; exit 101";
    let r = gate(&f, &command(script, Expect::Pass, None));
    assert_eq!(r.status, GateStatus::Fail);
    let main = &r.findings[0];
    assert!(
        main.message
            .contains("ended with exit status 101; expected exit status 0")
    );
    assert!(main.message.contains("line 50"), "{}", main.message);
    assert!(!main.message.contains("line 10\n"), "only the tail is kept");
    let places: Vec<String> = r.findings[1..].iter().map(|x| x.location()).collect();
    assert_eq!(places, vec!["src/math.ts:2", "src/index.ts:4"]);
}

#[test]
fn a_command_that_overruns_its_timeout_is_not_run() {
    let f = Fixture::new("ts-base");
    let r = gate(&f, &command("sleep 30", Expect::Pass, Some(1)));
    let GateStatus::NotRun { reason, .. } = &r.status else {
        panic!("{r:#?}")
    };
    assert!(reason.contains("did not finish within 1 s"), "{reason}");
}

#[test]
fn a_command_hook_without_run_is_not_run() {
    let f = Fixture::new("ts-base");
    let hook = default_hook(GateKind::Command);
    let r = gate(&f, &hook);
    assert!(matches!(r.status, GateStatus::NotRun { .. }), "{r:#?}");
}
