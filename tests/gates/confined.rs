//! `agentSandbox: "bwrap"`: gate tools run in the agents' sandbox. A confined agent cannot read a
//! file in HOME, and neither can the tools that read and run what it wrote: a link out of the
//! checkout, a command gate's `cat $HOME/…`. The tools still give their findings (their installation,
//! caches and reports reachable), and a gate whose sandbox cannot start is not run, never a pass.
//!
//! HOME is a directory outside /tmp here, so that only the sandbox's hiding of HOME keeps it out of
//! reach. Tests that need bwrap are skipped when it cannot run here (failed in CI).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use supervisor::agent::Sandbox;
use supervisor::config::{Expect, GateKind, Hook};
use supervisor::gates::{GateReport, GateSession, GateStatus, ToolEnv, default_hook, run_gate};

use crate::common::{
    Fixture, Runtime, context_for, manifest_dir, run_bounded, tools_available, tools_path,
};

/// What no gate report may show when its tools are confined.
const MARKER: &str = "SECRET_TOKEN_123";

/// bwrap, when it can create its namespaces here; prints why not (and fails in CI when missing).
fn bwrap() -> Option<PathBuf> {
    let works = Command::new("bwrap")
        .args(["--ro-bind", "/", "/", "--unshare-pid", "--", "true"])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if works {
        return supervisor::gates::find_on_path("bwrap", std::env::var_os("PATH").as_deref());
    }
    if std::env::var_os("CI").is_some() {
        panic!("bwrap cannot run: CI installs bubblewrap (apt-get install bubblewrap)");
    }
    eprintln!("skipped: bwrap is not installed or cannot create namespaces here");
    None
}

fn sandbox_of(program: Option<PathBuf>) -> Sandbox {
    Sandbox {
        program,
        writable: Vec::new(),
        read_only: Vec::new(),
    }
}

/// A HOME outside /tmp holding secrets: `secret.ts` (TypeScript naming the marker) and
/// `secret.txt`.
struct Home {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
}

impl Home {
    fn new() -> Home {
        let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        std::fs::create_dir_all(tmp.path().join("home")).unwrap();
        let dir = tmp.path().join("home").canonicalize().unwrap();
        std::fs::write(
            dir.join("secret.ts"),
            format!("export const x = {MARKER};\n"),
        )
        .unwrap();
        std::fs::write(dir.join("secret.txt"), format!("{MARKER}\n")).unwrap();
        Home { _tmp: tmp, dir }
    }

    /// A gate session over `f` whose tools get this HOME, in `sandbox` when given.
    fn session(&self, f: &Fixture, sandbox: Option<Sandbox>) -> GateSession {
        let home = self.dir.display().to_string();
        let path = tools_path().to_string_lossy().into_owned();
        let env = ToolEnv::base_from(&|k| match k {
            "HOME" => Some(home.clone()),
            "PATH" => Some(path.clone()),
            _ => std::env::var(k).ok(),
        });
        GateSession::for_checkout(&f.dir, &f.dir.join(".supervisor/gates"), env)
            .with_sandbox(sandbox)
    }
}

fn run(hook: &Hook, f: &Fixture, session: &GateSession) -> GateReport {
    let ctx = context_for(&f.dir, session);
    run_bounded(240, async {
        let report = run_gate(hook, &ctx).await;
        session.shutdown().await;
        report
    })
}

/// Everything a report says (status, summary, findings).
fn text(r: &GateReport) -> String {
    format!("{r:?}")
}

fn locations(r: &GateReport) -> Vec<String> {
    r.findings.iter().map(|f| f.location()).collect()
}

/// A checkout whose `src/config.ts` is the agent's link to the secret in HOME, committed.
fn linked_to_the_secret(home: &Home) -> Fixture {
    let f = Fixture::new("ts-base");
    std::os::unix::fs::symlink(home.dir.join("secret.ts"), f.dir.join("src/config.ts")).unwrap();
    f.commit_all("Add the configuration (#7)");
    f
}

#[test]
fn confined_tsc_does_not_follow_a_link_out_of_the_checkout() {
    if !tools_available(&["tsc"]) {
        return;
    }
    let Some(bwrap) = bwrap() else { return };
    let home = Home::new();
    let f = linked_to_the_secret(&home);
    let hook = default_hook(GateKind::Tsc);

    // Outside the sandbox tsc reads the secret and quotes it: what the sandbox is for.
    let open = run(&hook, &f, &home.session(&f, None));
    assert!(text(&open).contains(MARKER), "{open:#?}");

    // The same tree in the sandbox: its own answer (not the one cached for the tree above).
    let confined = run(&hook, &f, &home.session(&f, Some(sandbox_of(Some(bwrap)))));
    assert!(!text(&confined).contains(MARKER), "{confined:#?}");
    assert!(
        matches!(confined.status, GateStatus::Pass | GateStatus::Fail),
        "{confined:#?}"
    );
}

#[test]
fn confined_lsp_gets_no_text_the_sandbox_hides_and_still_checks() {
    if !tools_available(&["typescript-language-server", "tsc"]) {
        return;
    }
    let Some(bwrap) = bwrap() else { return };
    let home = Home::new();
    let f = linked_to_the_secret(&home);
    let hook = default_hook(GateKind::Lsp);

    let open = run(&hook, &f, &home.session(&f, None));
    assert!(text(&open).contains(MARKER), "{open:#?}");

    let confined = run(
        &hook,
        &f,
        &home.session(&f, Some(sandbox_of(Some(bwrap.clone())))),
    );
    assert!(!text(&confined).contains(MARKER), "{confined:#?}");
    assert!(
        matches!(&confined.status, GateStatus::NotRun { reason: r, .. } if r.contains("src/config.ts") && r.contains("what the sandbox shows")),
        "{confined:#?}"
    );

    // A plain type error is found by the confined server, which stays up between rounds: from
    // inside its PID namespace supervisor's process id is not there, and a server told to watch it
    // would exit within seconds, as if its client had died.
    let g = Fixture::new("ts-base");
    g.apply("ts-type-error");
    let session = home.session(&g, Some(sandbox_of(Some(bwrap))));
    let ctx = context_for(&g.dir, &session);
    let rt = Runtime::new();
    let r = rt.run(240, run_gate(&hook, &ctx));
    assert_eq!(r.status, GateStatus::Fail, "{r:#?}");
    assert_eq!(locations(&r), vec!["src/index.ts:4"]);
    let servers = session.language_servers();
    std::thread::sleep(std::time::Duration::from_secs(5));
    let again = rt.run(240, run_gate(&hook, &ctx));
    assert_eq!(again.status, GateStatus::Fail, "{again:#?}");
    assert_eq!(
        session.language_servers(),
        servers,
        "the warm server answered"
    );
    rt.run(60, session.shutdown());
}

fn command(name: &str, run: &str, expect: Expect) -> Hook {
    Hook {
        name: name.into(),
        run: Some(run.into()),
        expect,
        ..default_hook(GateKind::Command)
    }
}

#[test]
fn a_confined_command_gate_reads_the_checkout_but_not_home() {
    let Some(bwrap) = bwrap() else { return };
    let home = Home::new();
    let f = Fixture::new("ts-base");
    let read_home = command("read-home", "cat \"$HOME/secret.txt\"", Expect::Pass);
    let planted = home.dir.join("planted");
    let write_home = command(
        "write-home",
        &format!("echo planted > {}", planted.display()),
        Expect::Pass,
    );
    let tree = command(
        "tree",
        "grep -c 'export function' src/math.ts && echo built > built.txt && echo tree-ok",
        Expect::Contains("tree-ok".into()),
    );

    let open = home.session(&f, None);
    let r = run(&read_home, &f, &open);
    assert_eq!(r.status, GateStatus::Pass, "{r:#?}");

    let confined = || home.session(&f, Some(sandbox_of(Some(bwrap.clone()))));
    let r = run(&read_home, &f, &confined());
    assert_eq!(r.status, GateStatus::Fail, "{r:#?}");
    assert!(!text(&r).contains(MARKER), "{r:#?}");
    assert!(text(&r).contains("No such file"), "{r:#?}");

    // HOME inside is empty and private: a write there lands nowhere.
    let r = run(&write_home, &f, &confined());
    assert_eq!(r.status, GateStatus::Pass, "{r:#?}");
    assert!(!planted.exists());

    // The checkout is there, and writable (builds and tests write into it).
    let r = run(&tree, &f, &confined());
    assert_eq!(r.status, GateStatus::Pass, "{r:#?}");
    assert_eq!(
        std::fs::read_to_string(f.dir.join("built.txt")).unwrap(),
        "built\n"
    );
}

#[test]
fn confined_knip_reports_its_findings_and_keeps_its_cache() {
    if !tools_available(&["knip"]) {
        return;
    }
    let Some(bwrap) = bwrap() else { return };
    let home = Home::new();
    let f = Fixture::new("ts-base");
    f.apply("ts-unused-export");
    let session = home.session(&f, Some(sandbox_of(Some(bwrap.clone()))));
    let ctx = context_for(&f.dir, &session);
    let (r, cached) = run_bounded(240, async {
        let r = run_gate(&default_hook(GateKind::DeadCode), &ctx).await;
        // knip's cache is in the session's scratch directory, bound writable into the sandbox.
        let cached = session
            .scratch_root()
            .map(|root| count_files(&root.join("knip")))
            .unwrap_or(0);
        session.shutdown().await;
        (r, cached)
    });
    assert_eq!(r.status, GateStatus::Fail, "{r:#?}");
    assert_eq!(locations(&r), vec!["src/math.ts:5"]);
    assert!(
        cached > 0,
        "knip left no cache in the session's scratch directory"
    );
}

/// jscpd writes its report to a directory under /tmp, which the sandbox would otherwise hide.
#[test]
fn confined_jscpd_reports_its_findings() {
    if !tools_available(&["jscpd"]) {
        return;
    }
    let Some(bwrap) = bwrap() else { return };
    let home = Home::new();
    let g = Fixture::new("ts-base");
    g.apply("ts-duplicates");
    let r = run(
        &default_hook(GateKind::Duplicates),
        &g,
        &home.session(&g, Some(sandbox_of(Some(bwrap)))),
    );
    assert_eq!(r.status, GateStatus::Warn, "{r:#?}");
    let rules: Vec<(String, String)> = r
        .findings
        .iter()
        .map(|x| (x.location(), x.rule.clone()))
        .collect();
    assert!(
        rules.contains(&("src/orders-copy.ts:1".into(), "type-1-clone".into())),
        "{rules:?}"
    );
}

fn count_files(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| {
            if e.path().is_dir() {
                count_files(&e.path())
            } else {
                1
            }
        })
        .sum()
}

/// A tool installed under the hidden HOME (`gates.toolPaths`) is brought back into the sandbox
/// with its installation: its `node_modules/.bin` entry links to the package beside it.
#[test]
fn a_tool_installed_under_home_runs_in_the_sandbox() {
    if !tools_available(&["tsc"]) {
        return;
    }
    let Some(bwrap) = bwrap() else { return };
    let home = Home::new();
    let modules = home.dir.join("tools/node_modules");
    std::fs::create_dir_all(modules.join(".bin")).unwrap();
    std::os::unix::fs::symlink(
        manifest_dir().join(".tools/node/node_modules/typescript"),
        modules.join("typescript"),
    )
    .unwrap();
    std::os::unix::fs::symlink("../typescript/bin/tsc", modules.join(".bin/tsc")).unwrap();

    let f = Fixture::new("ts-base");
    f.apply("ts-type-error");
    let session = home.session(&f, Some(sandbox_of(Some(bwrap))));
    let mut ctx = context_for(&f.dir, &session);
    ctx.settings.tool_paths = vec![modules.join(".bin")];
    let r = run_bounded(240, async {
        let r = run_gate(&default_hook(GateKind::Tsc), &ctx).await;
        session.shutdown().await;
        r
    });
    assert_eq!(r.status, GateStatus::Fail, "{r:#?}");
    assert_eq!(locations(&r), vec!["src/index.ts:4"]);
}

/// A fake `bwrap` in `dir` running `script`.
fn fake_bwrap(dir: &Path, script: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let bwrap = dir.join("bwrap");
    std::fs::write(&bwrap, format!("#!/bin/sh\n{script}")).unwrap();
    std::fs::set_permissions(&bwrap, std::fs::Permissions::from_mode(0o755)).unwrap();
    bwrap
}

/// A fake `bwrap` that knows its version but cannot create namespaces, as on a host forbidding them.
fn failing_bwrap(dir: &Path) -> PathBuf {
    fake_bwrap(
        dir,
        "if [ \"$1\" = --version ]; then echo 'bubblewrap 0.8.0'; exit 0; fi\necho 'bwrap: No permissions to creating new namespace' >&2\nexit 1\n",
    )
}

/// Missing, or unable to create its namespaces: the gate is not run, with the reason — never a
/// pass, even for a command expected to fail (which bwrap's own failure would otherwise satisfy).
#[test]
fn a_gate_whose_sandbox_cannot_start_is_not_run() {
    let home = Home::new();
    let f = Fixture::new("ts-base");
    f.apply("ts-type-error");
    let fails = command("fails", "false", Expect::Fail);
    let tmp = tempfile::tempdir().unwrap();
    let cases = [
        (None, "bwrap is not on supervisor's PATH"),
        (
            Some(failing_bwrap(tmp.path())),
            "No permissions to creating new namespace",
        ),
    ];
    for (program, why) in cases {
        for hook in [&fails, &default_hook(GateKind::Tsc)] {
            let session = home.session(&f, Some(sandbox_of(program.clone())));
            let r = run(hook, &f, &session);
            assert!(
                matches!(&r.status, GateStatus::NotRun { reason, .. } if reason.contains(why) && reason.contains("sandbox")),
                "{}: {r:#?}",
                hook.name
            );
            assert!(!r.is_pass(), "{r:#?}");
        }
    }
}

/// A sandbox that started for the probe but fails to set up for the command (namespaces used up,
/// a mount refused): bwrap's own exit status is not the command's answer, even for `expect: fail`.
#[test]
fn a_command_whose_sandbox_fails_to_set_up_is_not_run() {
    let home = Home::new();
    let f = Fixture::new("ts-base");
    let tmp = tempfile::tempdir().unwrap();
    let bwrap = fake_bwrap(
        tmp.path(),
        "for last; do :; done\nif [ \"$1\" = --version ] || [ \"$last\" = true ]; then exit 0; fi\necho 'bwrap: Creating new namespace failed: No space left on device' >&2\nexit 1\n",
    );
    let session = home.session(&f, Some(sandbox_of(Some(bwrap))));
    let r = run(&command("fails", "false", Expect::Fail), &f, &session);
    assert!(
        matches!(&r.status, GateStatus::NotRun { reason, .. } if reason.contains("sandbox could not be set up") && reason.contains("No space left")),
        "{r:#?}"
    );
}

/// `supervisor gates` takes the sandbox from the repository's settings.
#[test]
fn supervisor_gates_confines_the_gates_as_the_settings_say() {
    let Some(_) = bwrap() else { return };
    let home = Home::new();
    let f = Fixture::new("ts-base");
    f.write(
        ".pi/settings.json",
        r#"{"supervisor": {"repo": "acme/widgets", "projectNumber": 1, "codeowners": ["alice"],
            "defaultBranch": "main", "workflow": "flow.json", "agentSandbox": "bwrap"}}"#,
    );
    f.write(
        "flow.json",
        r#"{"stages": [
          {"status": "Backlog", "builtIn": "backlog"},
          {"status": "Implementation", "agentName": "developer", "commits": true,
           "markerMap": {"IMPLEMENTATION_COMPLETE": "Audit"},
           "hooks": [{"gate": "command", "name": "peek", "run": "cat \"$HOME/secret.txt\" && cat src/math.ts", "expect": "pass"}]},
          {"status": "Audit", "agentName": "auditor", "review": true,
           "markerMap": {"AUDIT_APPROVED": "Done", "AUDIT_REJECTED": "Implementation"}, "canLoopBackTo": ["Implementation"]},
          {"status": "Done", "builtIn": "done"}]}"#,
    );
    let out = Command::new(env!("CARGO_BIN_EXE_supervisor"))
        .args(["gates", "--json", "--in"])
        .arg(&f.dir)
        .env_clear()
        .env("PATH", tools_path())
        .env("HOME", &home.dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    let doc: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(doc["reports"][0]["name"], "peek", "{stdout}");
    assert_eq!(doc["reports"][0]["status"], "fail", "{stdout}");
    assert!(!stdout.contains(MARKER), "{stdout}");
    assert!(stdout.contains("No such file"), "{stdout}");
}
