//! `supervisor gates` on fixture checkouts: reports, the verdict and the exit code.

use std::process::{Command, Output};

use serde_json::Value;

use crate::common::{Fixture, path_without, tools_available, tools_path};

fn supervisor(f: &Fixture, args: &[&str], path: std::ffi::OsString) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_supervisor"));
    cmd.arg("gates")
        .arg("--in")
        .arg(&f.dir)
        .args(args)
        .env("PATH", path);
    for (k, _) in std::env::vars() {
        if k.starts_with("SUPERVISOR_") {
            cmd.env_remove(k);
        }
    }
    cmd.output().expect("supervisor runs")
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}):\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[test]
fn a_type_error_blocks_with_exit_1_and_json_reports() {
    if !tools_available(&["tsc"]) {
        return;
    }
    let f = Fixture::new("ts-base");
    f.apply("ts-type-error");
    let out = supervisor(&f, &["--only", "tsc,traceability", "--json"], tools_path());
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = json(&out);
    assert_eq!(doc["verdict"], "blocked");
    assert_eq!(doc["base"], "main");
    let reports = doc["reports"].as_array().unwrap();
    assert_eq!(reports.len(), 2);
    assert_eq!(reports[0]["kind"], "tsc");
    assert_eq!(reports[0]["name"], "tsc");
    assert_eq!(reports[0]["status"], "fail");
    assert_eq!(reports[0]["findings"][0]["file"], "src/index.ts");
    assert_eq!(reports[0]["findings"][0]["line"], 4);
    assert_eq!(reports[1]["name"], "traceability");
}

/// The report is the command's output, on stdout; what it is doing meanwhile goes to stderr.
#[test]
fn the_report_goes_to_stdout_progress_to_stderr_and_a_clean_change_exits_0() {
    if !tools_available(&["tsc"]) {
        return;
    }
    let f = Fixture::new("ts-base");
    f.apply("ts-clean");
    let out = supervisor(&f, &["--only", "tsc,ci"], tools_path());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("gates of Implementation on"), "{stderr}");
    assert!(!stderr.contains("verdict:"), "{stderr}");
    assert!(stdout.contains("✅ tsc"), "{stdout}");
    assert!(stdout.contains("⛔ ci"), "{stdout}");
    assert!(stdout.contains("no GitHub connection"), "{stdout}");
    assert!(
        stdout.contains("verdict: not-blocked — nothing blocks, but gates warned or did not run"),
        "{stdout}"
    );
}

#[test]
fn the_repository_settings_decide_hooks_base_and_requirements() {
    let f = Fixture::new("ts-base");
    f.apply("ts-type-error");
    f.write(
        ".pi/settings.json",
        r#"{"supervisor": {"repo": "acme/widgets", "projectNumber": 1, "codeowners": ["alice"], "defaultBranch": "trunk", "workflow": "flow.json"}}"#,
    );
    f.write(
        "flow.json",
        r#"{"stages": [
          {"status": "Backlog", "builtIn": "backlog"},
          {"status": "Implementation", "agentName": "developer", "commits": true,
           "markerMap": {"IMPLEMENTATION_COMPLETE": "Audit"},
           "hooks": [{"gate": "tsc", "required": true}, {"gate": "command", "name": "lint", "run": "echo lint ok", "expect": "contains:ok"}]},
          {"status": "Audit", "agentName": "auditor", "review": true,
           "markerMap": {"AUDIT_APPROVED": "Done", "AUDIT_REJECTED": "Implementation"}, "canLoopBackTo": ["Implementation"]},
          {"status": "Done", "builtIn": "done"}]}"#,
    );
    // The base named in the settings does not exist yet: a usage error that says so.
    let out = supervisor(&f, &["--json"], path_without(&["tsc"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("base `trunk`"));

    // With --base: tsc (required) cannot run without its tool → blocked.
    let out = supervisor(&f, &["--json", "--base", "main"], path_without(&["tsc"]));
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = json(&out);
    let reports = doc["reports"].as_array().unwrap();
    assert_eq!(reports.len(), 2);
    assert_eq!(reports[0]["status"], "not-run");
    assert_eq!(reports[0]["required"], true);
    assert!(
        reports[0]["reason"]
            .as_str()
            .unwrap()
            .starts_with("tsc not found")
    );
    assert_eq!(reports[1]["kind"], "command");
    assert_eq!(reports[1]["name"], "lint");
    assert_eq!(reports[1]["status"], "pass");
}

#[test]
fn usage_errors_exit_2() {
    let f = Fixture::new("ts-base");
    let out = supervisor(&f, &["--only", "lint"], tools_path());
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("`lint` is neither a gate nor a hook"));
    let out = supervisor(&f, &["--base", "nope"], tools_path());
    assert_eq!(out.status.code(), Some(2));
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_supervisor"))
        .args(["gates", "--in"])
        .arg(tmp.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not inside a git repository"));
}

#[test]
fn a_gate_that_did_not_run_reads_not_blocked_in_json_and_text_alike() {
    // The CI gate cannot run without a GitHub connection: not a pass, and (optional) not blocking.
    let f = Fixture::new("ts-base");
    f.write("src/helper.ts", "export const helper = 1;\n");
    let out = supervisor(&f, &["--only", "ci", "--json"], tools_path());
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = json(&out);
    assert_eq!(doc["reports"][0]["status"], "not-run");
    assert_eq!(doc["verdict"], "not-blocked");

    let out = supervisor(&f, &["--only", "ci"], tools_path());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("verdict: not-blocked")),
        "the text names the verdict with the JSON's word, on stdout: {stdout}"
    );
}

/// `check` and `gates` validate the settings alike: a `gates.exclude` pattern that is not a glob is
/// the same error, at the same line, in both.
#[test]
fn an_exclude_pattern_that_is_not_a_glob_is_the_same_error_in_check_and_gates() {
    let f = Fixture::new("ts-base");
    f.write(
        ".pi/settings.json",
        "{\"supervisor\": {\"repo\": \"acme/widgets\", \"projectNumber\": 1, \"codeowners\": [\"alice\"],\n  \"gates\": {\"exclude\": [\"dist/\", \"src/[ab.ts\"]}}}",
    );
    let said = |out: &Output| {
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        stderr
            .lines()
            .find(|l| l.contains("`supervisor.gates.exclude[1]`"))
            .unwrap_or_else(|| panic!("no error names gates.exclude[1]:\n{stderr}"))
            .trim()
            .to_string()
    };
    let in_gates = said(&supervisor(&f, &["--only", "traceability"], tools_path()));
    assert!(
        in_gates.contains(
            "settings.json:2:34: `supervisor.gates.exclude[1]`: `src/[ab.ts` is not a valid glob"
        ),
        "{in_gates}"
    );
    assert!(in_gates.contains("correct or remove it"), "{in_gates}");
    let in_check = said(
        &Command::new(env!("CARGO_BIN_EXE_supervisor"))
            .args(["check", "--repo-root"])
            .arg(&f.dir)
            .output()
            .unwrap(),
    );
    assert_eq!(in_check, in_gates);
}

/// A directory that is not a checkout is named in words, with what to do: never libgit2's text.
#[test]
fn a_directory_that_is_no_checkout_is_said_plainly() {
    let empty = tempfile::tempdir().unwrap();
    let file = empty.path().join("notes.txt");
    std::fs::write(&file, "x").unwrap();
    let cases = [
        (
            std::path::PathBuf::from("/nonexistent"),
            "`/nonexistent` does not exist",
        ),
        (empty.path().to_path_buf(), "is not inside a git repository"),
        (file.clone(), "is not a directory"),
    ];
    for (dir, problem) in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_supervisor"))
            .args(["gates", "--in"])
            .arg(&dir)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.starts_with("supervisor gates: "), "{stderr}");
        assert!(stderr.contains(problem), "{dir:?}: {stderr}");
        assert!(
            stderr.contains("run it inside a git checkout, or pass --in DIR"),
            "{stderr}"
        );
        assert!(!stderr.contains("class="), "{stderr}");
        assert!(!stderr.contains("os error"), "{stderr}");
    }
}

/// Whether any live process is left in process group `pgid`.
fn group_alive(pgid: i32) -> bool {
    supervisor::process::process_group_alive(pgid)
}

/// Wait (bounded) for `path` to hold a pid.
fn wait_for_pid(path: &std::path::Path) -> i32 {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        if let Some(pid) = std::fs::read_to_string(path)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            return pid;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Issue 9: `supervisor gates` stops on SIGINT within 2 s — the running command gate's process
/// group killed, no verdict, exit 3 — where it used to run the gate on (and a second signal left
/// `sh -c sleep 120` to PID 1).
#[test]
fn sigint_stops_a_long_command_gate_within_two_seconds_and_kills_its_group() {
    let f = Fixture::new("ts-base");
    f.write("src/extra.ts", "export const extra = 1;\n");
    let pidfile = f.dir.parent().expect("temp dir").join("gate.pid");
    f.write(
        ".pi/settings.json",
        r#"{"supervisor": {"repo": "acme/widgets", "projectNumber": 1, "codeowners": ["alice"], "workflow": "flow.json"}}"#,
    );
    f.write(
        "flow.json",
        &format!(
            r#"{{"stages": [
          {{"status": "Backlog", "builtIn": "backlog"}},
          {{"status": "Implementation", "agentName": "developer", "commits": true,
           "markerMap": {{"IMPLEMENTATION_COMPLETE": "Done"}},
           "hooks": [{{"gate": "command", "name": "slow", "run": "cut -d' ' -f5 /proc/$$/stat > {}; sleep 120", "expect": "pass", "timeoutSec": 600}}]}},
          {{"status": "Done", "builtIn": "done"}}]}}"#,
            pidfile.display()
        ),
    );
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_supervisor"));
    cmd.arg("gates")
        .arg("--in")
        .arg(&f.dir)
        .args(["--json", "--only", "slow"])
        .env("PATH", tools_path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    for (k, _) in std::env::vars() {
        if k.starts_with("SUPERVISOR_") {
            cmd.env_remove(k);
        }
    }
    let child = cmd.spawn().expect("supervisor starts");
    let gate = wait_for_pid(&pidfile);
    assert!(group_alive(gate), "the gate runs");
    let signalled = std::time::Instant::now();
    // SAFETY: a signal to the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().expect("supervisor ends");
    let took = signalled.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(took.as_secs_f64() <= 2.0, "took {took:?}: {stderr}");
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("no verdict"), "{stderr}");
    // SIGKILL is sent before supervisor exits; the kernel ends the processes just after.
    assert!(
        gone_within_a_second(gate),
        "the gate's process group is gone"
    );
}

/// Whether process group `pgid` ends within a second.
fn gone_within_a_second(pgid: i32) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
    while group_alive(pgid) {
        if std::time::Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    true
}
