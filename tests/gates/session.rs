//! The gate session of a run: incremental tsc, warm language servers and knip's cache give the
//! answers a cold run gives; a failing warm server is restarted once; shutting the session down (at the
//! end of a run or on cancellation) stops every server and leaves nothing behind.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use supervisor::config::GateKind;
use supervisor::gates::{
    GateContext, GateReport, GateSession, GateStatus, ToolEnv, default_hook, run_gate,
};

use crate::common::{Fixture, Runtime, context_for, run_bounded, tools_available};

fn run(kind: GateKind, ctx: &GateContext) -> GateReport {
    run_bounded(240, async { run_gate(&default_hook(kind), ctx).await })
}

/// A round of the warm session on its runtime.
fn round(rt: &Runtime, kind: GateKind, ctx: &GateContext) -> GateReport {
    rt.run(240, async { run_gate(&default_hook(kind), ctx).await })
}

/// A warm session for the fixture: state in the fixture's `.supervisor/gates`.
fn session(f: &Fixture) -> GateSession {
    GateSession::for_checkout(&f.dir, &f.dir.join(".supervisor/gates"), ToolEnv::base())
}

/// The same gate from cold: a new session with its state somewhere else (no cache, no warm server).
fn cold(kind: GateKind, f: &Fixture) -> GateReport {
    let state = tempfile::tempdir().expect("state dir");
    let session = GateSession::for_checkout(&f.dir, state.path(), ToolEnv::base());
    let mut ctx = context_for(&f.dir, &session);
    ctx.state_dir = state.path().to_path_buf();
    run(kind, &ctx)
}

/// Status and findings: what a warm round must share with a cold one.
fn answer(r: &GateReport) -> (GateStatus, Vec<(String, String, String)>) {
    let mut findings: Vec<(String, String, String)> = r
        .findings
        .iter()
        .map(|f| (f.location(), f.rule.clone(), f.message.clone()))
        .collect();
    findings.sort();
    (r.status.clone(), findings)
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// What `git status` shows besides the files the test itself wrote.
fn untracked_or_modified(f: &Fixture) -> Vec<String> {
    let mut opts = git2::StatusOptions::new();
    opts.include_untracked(true).recurse_untracked_dirs(true);
    f.repo
        .statuses(Some(&mut opts))
        .expect("status")
        .iter()
        .filter_map(|s| s.path().ok().map(str::to_string))
        .collect()
}

fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(pid, 0) == 0 }
}

#[test]
fn incremental_tsc_answers_as_a_cold_run_while_errors_come_and_go() {
    if !tools_available(&["tsc"]) {
        return;
    }
    let f = Fixture::new("ts-base");
    let s = session(&f);

    // Round 1: a type error.
    f.apply("ts-type-error");
    let warm = run(GateKind::Tsc, &f.context_in(&s));
    assert_eq!(warm.status, GateStatus::Fail, "{warm:#?}");
    assert_eq!(answer(&warm), answer(&cold(GateKind::Tsc, &f)));
    let scratch = s
        .scratch_root()
        .expect("the session made its scratch directory");
    let build_info: Vec<PathBuf> = files_under(&scratch)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "tsbuildinfo"))
        .collect();
    assert_eq!(build_info.len(), 1, "{:?}", files_under(&scratch));
    assert!(scratch.starts_with(f.dir.join(".supervisor/gates")));

    // Round 2: fixed.
    f.apply("ts-clean");
    let warm = run(GateKind::Tsc, &f.context_in(&s));
    assert_eq!(warm.status, GateStatus::Pass, "{warm:#?}");
    assert_eq!(answer(&warm), answer(&cold(GateKind::Tsc, &f)));

    // Round 3: a change to math.ts breaks index.ts, which did not change since round 2.
    f.write(
        "src/math.ts",
        "export function add(a: string, b: number): number {\n  return a.length + b;\n}\n",
    );
    let warm = run(GateKind::Tsc, &f.context_in(&s));
    assert_eq!(warm.status, GateStatus::Fail, "{warm:#?}");
    assert!(
        warm.findings
            .iter()
            .any(|x| x.location() == "src/index.ts:5" && x.rule == "TS2345"),
        "{:#?}",
        warm.findings
    );
    assert_eq!(answer(&warm), answer(&cold(GateKind::Tsc, &f)));

    // Nothing of it is in the change, and nothing survives the session.
    let status = untracked_or_modified(&f);
    assert!(
        status
            .iter()
            .all(|p| p.starts_with("src/") && !p.ends_with(".tsbuildinfo")),
        "{status:?}"
    );
    run_bounded(30, s.shutdown());
    assert!(!scratch.exists(), "{}", scratch.display());
}

#[test]
fn warm_language_servers_are_reused_and_answer_as_cold_ones() {
    if !tools_available(&["typescript-language-server", "tsc", "pylsp"]) {
        return;
    }
    let f = Fixture::new("ts-base");
    let s = session(&f);
    let rt = Runtime::new();
    f.apply("ts-type-error");
    f.write(
        "tool/greet.py",
        "def greet(name):\n    return 'hi ' + nme\n",
    );
    let round1 = round(&rt, GateKind::Lsp, &f.context_in(&s));
    assert_eq!(round1.status, GateStatus::Fail, "{round1:#?}");
    assert_eq!(answer(&round1), answer(&cold(GateKind::Lsp, &f)));
    let servers = s.language_servers();
    assert_eq!(
        servers.len(),
        2,
        "one warm server per language: {servers:?}"
    );
    assert!(servers.iter().all(|p| alive(*p)));

    // Round 2: the TypeScript error is fixed, a new file is added, the Python one changes its error.
    f.apply("ts-clean");
    f.write(
        "tool/greet.py",
        "def greet(name):\n    return 'hi ' + nam\n",
    );
    let round2 = round(&rt, GateKind::Lsp, &f.context_in(&s));
    assert_eq!(s.language_servers(), servers, "the same servers answered");
    assert_eq!(answer(&round2), answer(&cold(GateKind::Lsp, &f)));
    assert!(
        round2
            .findings
            .iter()
            .any(|x| x.location() == "tool/greet.py:2" && x.message.contains("'nam'")),
        "{round2:#?}"
    );
    assert!(
        round2
            .summary
            .contains("TypeScript/JavaScript: 2 files, 0 errors"),
        "{}",
        round2.summary
    );

    rt.run(30, s.shutdown());
    assert!(s.language_servers().is_empty());
    let deadline = Instant::now() + Duration::from_secs(10);
    while servers.iter().any(|p| alive(*p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(servers.iter().all(|p| !alive(*p)), "{servers:?} still run");
}

/// Install the scripted language server as the project's `pylsp` (the main checkout's `.venv/bin`).
fn fake_pylsp(f: &Fixture, mode: &str) {
    use std::os::unix::fs::PermissionsExt;
    let script = std::fs::read_to_string(crate::common::fixture_dir("fake-lsp/server.py"))
        .unwrap()
        .replace("MODE = \"error\"", &format!("MODE = \"{mode}\""));
    let path = f.dir.join(".venv/bin/pylsp");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, format!("#!/usr/bin/env python3\n{script}")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    f.write(
        ".gitignore",
        ".venv/\n.fake-lsp-starts\n.fake-lsp-env\n.supervisor/\n",
    );
}

fn python_round(
    rt: &Runtime,
    f: &Fixture,
    s: &GateSession,
    text: &str,
    timeout_sec: u64,
) -> GateReport {
    f.write("app/greet.py", text);
    let mut ctx = f.context_in(s);
    ctx.settings.tool_timeout_sec = timeout_sec;
    rt.run(60, async {
        run_gate(&default_hook(GateKind::Lsp), &ctx).await
    })
}

fn starts(f: &Fixture) -> String {
    std::fs::read_to_string(f.dir.join(".fake-lsp-starts")).unwrap_or_default()
}

#[test]
fn a_warm_server_that_crashes_is_restarted_once() {
    let f = Fixture::new("py-base");
    fake_pylsp(&f, "pull-crash-on-change");
    let s = session(&f);
    let rt = Runtime::new();
    let first = python_round(&rt, &f, &s, "print(1)\n", 30);
    assert_eq!(first.status, GateStatus::Fail, "{first:#?}");
    assert_eq!(starts(&f), "1");
    // The change kills the warm server; a fresh one answers.
    let second = python_round(&rt, &f, &s, "print(2)\n", 30);
    assert_eq!(second.status, GateStatus::Fail, "{second:#?}");
    assert_eq!(second.findings[0].location(), "app/greet.py:1");
    assert_eq!(second.findings[0].rule, "fake(E1)");
    assert_eq!(starts(&f), "2");
    rt.run(30, s.shutdown());
}

#[test]
fn a_warm_server_that_hangs_again_after_its_restart_is_not_run() {
    let f = Fixture::new("py-base");
    fake_pylsp(&f, "pull-hang-after-first-start");
    let s = session(&f);
    let rt = Runtime::new();
    let first = python_round(&rt, &f, &s, "print(1)\n", 2);
    assert_eq!(first.status, GateStatus::Fail, "{first:#?}");
    let started = Instant::now();
    let second = python_round(&rt, &f, &s, "print(2)\n", 2);
    let GateStatus::NotRun { reason, .. } = &second.status else {
        panic!("{second:#?}")
    };
    assert!(
        reason.contains("pylsp failed while checking after a restart"),
        "{reason}"
    );
    assert!(reason.contains("did not answer"), "{reason}");
    assert_eq!(starts(&f), "2", "restarted exactly once");
    assert!(started.elapsed() < Duration::from_secs(30));
    assert!(s.language_servers().is_empty());
    rt.run(30, s.shutdown());
}

#[test]
fn a_server_that_never_says_it_finished_is_not_run_diagnostics_incomplete() {
    let f = Fixture::new("py-base");
    fake_pylsp(&f, "unversioned");
    let s = session(&f);
    let rt = Runtime::new();
    let r = python_round(&rt, &f, &s, "print(1)\n", 30);
    let GateStatus::NotRun { reason, .. } = &r.status else {
        panic!("{r:#?}")
    };
    assert!(
        reason.contains("Python: diagnostics incomplete"),
        "{reason}"
    );
    assert!(reason.contains("without a document version"), "{reason}");
    rt.run(30, s.shutdown());
}

#[test]
fn shutting_the_session_down_mid_round_stops_its_servers_and_leaves_nothing() {
    let f = Fixture::new("py-base");
    fake_pylsp(&f, "pull-hang-on-change");
    let s = session(&f);
    let rt = Runtime::new();
    let first = python_round(&rt, &f, &s, "print(1)\n", 60);
    assert_eq!(first.status, GateStatus::Fail, "{first:#?}");
    let servers = s.language_servers();
    assert_eq!(servers.len(), 1);
    let scratch = s.scratch_dir("probe").unwrap();

    // Round 2 hangs in the warm server; the run is cancelled meanwhile.
    f.write("app/greet.py", "print(2)\n");
    let ctx = f.context_in(&s);
    let started = Instant::now();
    let report = rt.run(60, async {
        let round = tokio::spawn(async move { run_gate(&default_hook(GateKind::Lsp), &ctx).await });
        tokio::time::sleep(Duration::from_millis(500)).await;
        s.shutdown().await;
        round.await.expect("the round ends")
    });
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    let GateStatus::NotRun { reason, .. } = &report.status else {
        panic!("{report:#?}")
    };
    assert!(reason.contains("pylsp failed while checking"), "{reason}");
    assert_eq!(starts(&f), "1", "a cancelled session restarts nothing");
    assert!(s.language_servers().is_empty());
    let deadline = Instant::now() + Duration::from_secs(10);
    while servers.iter().any(|p| alive(*p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(servers.iter().all(|p| !alive(*p)), "{servers:?} still run");
    assert!(!scratch.exists());
}

#[test]
fn knip_with_its_cache_answers_as_a_full_run() {
    if !tools_available(&["knip"]) {
        return;
    }
    let f = Fixture::new("ts-base");
    let s = session(&f);
    f.apply("ts-unused-export");
    let warm = run(GateKind::DeadCode, &f.context_in(&s));
    assert_eq!(warm.status, GateStatus::Fail, "{warm:#?}");
    assert_eq!(answer(&warm), answer(&cold(GateKind::DeadCode, &f)));
    let scratch = s.scratch_root().expect("knip's cache is in the session");
    assert!(scratch.join("knip").is_dir());

    // Round 2: the unused export is used now, and a new file exports something nobody uses.
    f.write(
        "src/index.ts",
        "import { add, subtract } from \"./math\";\nimport { orderTotal } from \"./orders\";\n\nconst total: number = subtract(add(1, 2), 1);\nconsole.log(total, orderTotal([{ id: \"a\", quantity: 2, unitPrice: 1.5 }]));\n",
    );
    f.write("src/extra.ts", "export const unused = 1;\n");
    let warm = run(GateKind::DeadCode, &f.context_in(&s));
    assert_eq!(answer(&warm), answer(&cold(GateKind::DeadCode, &f)));
    assert!(
        warm.findings
            .iter()
            .any(|x| x.file.as_deref() == Some("src/extra.ts")),
        "{warm:#?}"
    );
    assert!(
        !warm.findings.iter().any(|x| x.message.contains("subtract")),
        "{warm:#?}"
    );
    run_bounded(30, s.shutdown());
    assert!(!scratch.exists());
}
