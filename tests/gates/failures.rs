//! A gate whose tool is missing, crashes, prints nonsense or hangs is NotRun with the reason — never a
//! pass — and a required one blocks the combined verdict.

use supervisor::config::GateKind;
use supervisor::gates::{GateStatus, Verdict, default_hook, run_gate, run_gates, verdict};
use supervisor::report::combined_gate_note;

use crate::common::{Fixture, path_without, run_bounded};

/// A stand-in tool in the fixture's `node_modules/.bin` (found before PATH).
fn fake_tool(f: &Fixture, name: &str, script: &str) {
    use std::os::unix::fs::PermissionsExt;
    let path = f.dir.join("node_modules/.bin").join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, format!("#!/bin/sh\n{script}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    // node_modules is ignored, as in any real project.
    f.write(".gitignore", "node_modules/\n");
}

#[test]
fn a_tool_removed_from_path_is_not_run_and_a_required_gate_blocks() {
    let f = Fixture::new("ts-base");
    f.apply("ts-type-error");
    let mut ctx = f.context();
    ctx.search_path = Some(path_without(&["tsc", "typescript-language-server"]));

    let mut tsc = default_hook(GateKind::Tsc);
    tsc.required = true;
    let hooks = vec![tsc, default_hook(GateKind::Traceability)];
    let reports = run_bounded(60, async { run_gates(&hooks, &ctx).await });

    let tsc = &reports[0];
    assert_eq!(
        tsc.status,
        GateStatus::not_run(
            "tsc not found in gates.toolPaths, the main checkout's node_modules/.bin or PATH (install typescript, or set gates.allowNpx); a copy inside the checkout is never run"
        )
    );
    assert!(!tsc.is_pass());
    assert!(tsc.blocks());
    assert_eq!(verdict(&reports), Verdict::Blocked);
    let note = combined_gate_note(&reports);
    assert!(note.contains("### ⛔ tsc — not run (required)"), "{note}");
    assert!(
        note.contains(
            "tsc not found in gates.toolPaths, the main checkout's node_modules/.bin or PATH"
        ),
        "{note}"
    );

    // Optional: reported, not blocking, and still not a pass.
    let hooks = vec![default_hook(GateKind::Tsc)];
    let reports = run_bounded(60, async { run_gates(&hooks, &ctx).await });
    assert!(matches!(reports[0].status, GateStatus::NotRun { .. }));
    assert_eq!(verdict(&reports), Verdict::NotBlocked);
}

#[test]
fn lsp_names_each_language_whose_server_is_missing() {
    let f = Fixture::new("ts-base");
    f.write("tool/check.py", "print('hi')\n");
    f.write("tool/main.go", "package main\n");
    let mut ctx = f.context();
    ctx.search_path = Some(path_without(&[
        "typescript-language-server",
        "pylsp",
        "gopls",
    ]));
    let r = run_bounded(60, async {
        run_gate(&default_hook(GateKind::Lsp), &ctx).await
    });
    let GateStatus::NotRun { reason, .. } = &r.status else {
        panic!("{r:#?}");
    };
    assert!(
        reason.contains(
            "Python: pylsp not found in gates.toolPaths, the main checkout's .venv/bin or PATH"
        ),
        "{reason}"
    );
    assert!(
        reason.contains("Go: gopls not found in gates.toolPaths or PATH (install gopls)"),
        "{reason}"
    );
}

#[test]
fn a_crashing_tool_is_not_run_with_its_output() {
    let f = Fixture::new("ts-base");
    f.apply("ts-type-error");
    fake_tool(
        &f,
        "tsc",
        "echo 'Segmentation fault: something broke' >&2; exit 3",
    );
    let r = run_bounded(60, async {
        run_gate(&default_hook(GateKind::Tsc), &f.context()).await
    });
    let GateStatus::NotRun { reason, .. } = &r.status else {
        panic!("{r:#?}");
    };
    assert!(reason.contains("exit status 3"), "{reason}");
    assert!(reason.contains("something broke"), "{reason}");
}

#[test]
fn unparsable_output_is_not_read_as_no_findings() {
    let f = Fixture::new("ts-base");
    f.apply("ts-unused-export");
    fake_tool(&f, "knip", "echo 'Welcome to knip! (not JSON)'; exit 0");
    let r = run_bounded(60, async {
        run_gate(&default_hook(GateKind::DeadCode), &f.context()).await
    });
    let GateStatus::NotRun { reason, .. } = &r.status else {
        panic!("{r:#?}");
    };
    assert!(reason.contains("not its JSON report"), "{reason}");

    // jscpd that "succeeds" without writing its report.
    fake_tool(&f, "jscpd", "exit 0");
    let r = run_bounded(60, async {
        run_gate(&default_hook(GateKind::Duplicates), &f.context()).await
    });
    let GateStatus::NotRun { reason, .. } = &r.status else {
        panic!("{r:#?}");
    };
    assert!(reason.contains("wrote no jscpd-report.json"), "{reason}");
}

#[test]
fn a_hanging_tool_is_killed_and_not_run() {
    let f = Fixture::new("ts-base");
    f.apply("ts-type-error");
    fake_tool(&f, "tsc", "sleep 60");
    let mut ctx = f.context();
    ctx.settings.tool_timeout_sec = 1;
    let started = std::time::Instant::now();
    let r = run_bounded(30, async {
        run_gate(&default_hook(GateKind::Tsc), &ctx).await
    });
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    let GateStatus::NotRun { reason, .. } = &r.status else {
        panic!("{r:#?}");
    };
    assert!(reason.contains("did not finish within 1 s"), "{reason}");
}

#[test]
fn npx_is_used_only_when_allowed() {
    let f = Fixture::new("ts-base");
    f.apply("ts-type-error");
    let mut ctx = f.context();
    ctx.search_path = Some(path_without(&["tsc", "npx"]));
    ctx.settings.allow_npx = true;
    let r = run_bounded(60, async {
        run_gate(&default_hook(GateKind::Tsc), &ctx).await
    });
    assert_eq!(
        r.status,
        GateStatus::not_run(
            "tsc not found in gates.toolPaths, the main checkout's node_modules/.bin or PATH, and npx is not on PATH either (install typescript or Node.js)"
        )
    );
}

#[test]
fn a_projects_own_tsc_is_found_from_the_project_up() {
    use std::os::unix::fs::PermissionsExt;
    let f = Fixture::new("ts-base");
    f.write(".gitignore", "node_modules/\n");
    f.write("packages/app/tsconfig.json", "{}\n");
    f.write("packages/app/src/a.ts", "export const a = 1\n");
    let bin = f.dir.join("packages/app/node_modules/.bin/tsc");
    std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
    std::fs::write(
        &bin,
        "#!/bin/sh\necho \"packages/app/src/a.ts(1,19): error TS1005: ';' expected.\"\nexit 2\n",
    )
    .unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut ctx = f.context();
    // Not on PATH: only the project's own copy can answer.
    ctx.search_path = Some(path_without(&["tsc"]));
    let r = run_bounded(60, async {
        run_gate(&default_hook(GateKind::Tsc), &ctx).await
    });
    assert_eq!(r.status, GateStatus::Fail, "{r:#?}");
    assert_eq!(r.findings[0].location(), "packages/app/src/a.ts:1");
    assert!(r.summary.contains("in packages/app"), "{}", r.summary);
}

/// Install the scripted language server as the project's `pylsp` (`.venv/bin`, found before PATH).
fn fake_pylsp(f: &Fixture, mode: &str) {
    use std::os::unix::fs::PermissionsExt;
    let script = std::fs::read_to_string(crate::common::fixture_dir("fake-lsp/server.py"))
        .unwrap()
        .replace("MODE = \"error\"", &format!("MODE = \"{mode}\""));
    let path = f.dir.join(".venv/bin/pylsp");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, format!("#!/usr/bin/env python3\n{script}")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    f.write(".gitignore", ".venv/\n.fake-lsp-starts\n");
}

fn lsp_on_python(f: &Fixture, timeout_sec: u64) -> supervisor::gates::GateReport {
    let mut ctx = f.context();
    ctx.settings.tool_timeout_sec = timeout_sec;
    run_bounded(60, async {
        run_gate(&default_hook(GateKind::Lsp), &ctx).await
    })
}

#[test]
fn a_language_server_that_keeps_crashing_is_tried_three_times() {
    let f = Fixture::new("py-base");
    f.apply("py-error");
    fake_pylsp(&f, "crash");
    let r = lsp_on_python(&f, 30);
    let GateStatus::NotRun { reason, .. } = &r.status else {
        panic!("{r:#?}")
    };
    assert!(reason.contains("pylsp failed 3 times"), "{reason}");
    assert!(reason.contains("cannot load the workspace"), "{reason}");
}

#[test]
fn a_flaky_language_server_is_retried_until_it_answers() {
    let f = Fixture::new("py-base");
    f.apply("py-error");
    fake_pylsp(&f, "flaky");
    let r = lsp_on_python(&f, 30);
    assert_eq!(r.status, GateStatus::Fail, "{r:#?}");
    assert_eq!(r.findings[0].location(), "app/greet.py:1");
    assert_eq!(r.findings[0].rule, "fake(E1)");
    let starts = std::fs::read_to_string(f.dir.join(".fake-lsp-starts")).unwrap();
    assert_eq!(starts, "3");
}

#[test]
fn a_silent_language_server_is_not_run_not_clean() {
    let f = Fixture::new("py-base");
    f.apply("py-clean");
    fake_pylsp(&f, "silent");
    let started = std::time::Instant::now();
    let r = lsp_on_python(&f, 2);
    let GateStatus::NotRun { reason, .. } = &r.status else {
        panic!("{r:#?}")
    };
    assert!(
        reason.contains("published no diagnostics for app/greet.py within 2 s"),
        "{reason}"
    );
    // Silence is not retried.
    assert!(started.elapsed() < std::time::Duration::from_secs(15));
}
