//! `agentSandbox: "bwrap"`: agents run in bubblewrap. Probes that an agent runs as shell commands
//! (scripted agents, real subprocesses) show what it can reach with and without the sandbox: writes
//! outside the worktree, supervisor's environment through /proc, files in HOME. Under bwrap a run
//! still reaches its pull request. `supervisor check` and `supervisor run` refuse agents that cannot
//! run (their CLI missing, a sandbox that cannot work) before anything is written.
//!
//! When bwrap is not installed or cannot create namespaces here, the tests that need it say so and
//! are skipped; with `CI` set a missing bwrap fails them (CI installs bubblewrap).

#[path = "support/scratch.rs"]
mod scratch;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::json;
use supervisor::agent::{AgentRun, ExitReason};
use supervisor::demo::{World, answer};

#[path = "support/specs.rs"]
mod specs;
use specs::*;

const BIN: &str = env!("CARGO_BIN_EXE_supervisor");

/// Whether bwrap can run here; prints why not (and fails in CI when it is not installed).
fn bwrap_works() -> bool {
    static WORKS: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    let state = WORKS.get_or_init(|| {
        let out = Command::new("bwrap")
            .args(["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"])
            .args(["--unshare-pid", "--die-with-parent", "--", "true"])
            .stdin(Stdio::null())
            .output();
        match out {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if std::env::var_os("CI").is_some() {
                    panic!("bwrap is not installed: CI installs bubblewrap (apt-get install bubblewrap)");
                }
                Err("bwrap is not installed (apt-get install bubblewrap)".into())
            }
            Err(e) => Err(format!("bwrap cannot start: {e}")),
            Ok(o) if !o.status.success() => Err(format!(
                "bwrap cannot create namespaces here: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            )),
            Ok(_) => Ok(()),
        }
    });
    match state {
        Ok(()) => true,
        Err(why) => {
            eprintln!("skipped: {why}");
            false
        }
    }
}

/// A scratch directory outside /tmp (which the sandbox replaces with an empty one), so that a write
/// there would land on the real file system.
fn scratch() -> tempfile::TempDir {
    tempfile::tempdir_in(scratch::scratch_base()).unwrap()
}

/// The shell commands of the probe: write outside the worktree, look for `canary` in every
/// readable /proc/<pid>/environ, read a secret in HOME; the findings go to files in the worktree.
fn probe(outside: &Path, canary: &str) -> Vec<serde_json::Value> {
    let outside = outside.display();
    [
        format!("echo planted > {outside} 2> write-error.txt || true"),
        format!(
            "for f in /proc/[0-9]*/environ; do cat \"$f\" 2>/dev/null; echo; done | tr '\\0' '\\n' | grep -c '{canary}' > environ-hits.txt || true"
        ),
        "cat \"$HOME/.git-credentials\" > home-secret.txt 2>/dev/null || true".to_string(),
    ]
    .into_iter()
    .map(|c| json!({ "run": c }))
    .collect()
}

struct Probe {
    run: AgentRun,
    /// Files the agent left in the worktree (besides supervisor's transcripts).
    tree: Vec<String>,
    wrote_outside: bool,
    environ_hits: u32,
    home_secret: String,
}

/// `supervisor agent ROLE` (scripted: the probe, then an answer), with `sandbox`.
fn agent_probe(role: &str, sandbox: &str) -> Probe {
    let tmp = scratch();
    let work = tmp.path().join("work");
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join(".git-credentials"),
        "https://u:ghp_home_secret@github.com\n",
    )
    .unwrap();
    let outside = tmp.path().join("outside.txt");
    let canary = format!("canary-{}", std::process::id());
    let mut actions = probe(&outside, &canary);
    actions.push(json!({ "final": "done" }));
    let script = tmp.path().join("script.json");
    std::fs::write(&script, json!({ role: [actions] }).to_string()).unwrap();
    let out = Command::new(BIN)
        .args(["agent", role, "--task", "probe", "--json", "--in"])
        .arg(&work)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", &home)
        .env("RUST_LOG", "warn")
        .env("SANDBOX_CANARY", &canary)
        .env("SUPERVISOR_AGENT_BACKEND", "scripted")
        .env("SUPERVISOR_AGENT_SCRIPT", &script)
        .env("SUPERVISOR_AGENT_SANDBOX", sandbox)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let run: AgentRun = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no run ({e}); stderr:\n{stderr}"));
    assert_eq!(run.exit, ExitReason::Completed, "{run:?}\n{stderr}");
    let read = |name: &str| std::fs::read_to_string(work.join(name)).unwrap_or_default();
    Probe {
        environ_hits: read("environ-hits.txt").trim().parse().unwrap_or(0),
        home_secret: read("home-secret.txt"),
        wrote_outside: outside.exists(),
        tree: std::fs::read_dir(&work)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n != ".supervisor")
            .collect(),
        run,
    }
}

/// Without a sandbox the probe reaches everything (so the probe itself works); under bwrap it
/// reaches nothing outside the worktree, yet works in it.
#[test]
fn under_bwrap_an_agent_cannot_write_outside_its_worktree_or_read_supervisors_environment() {
    let open = agent_probe("developer", "none");
    assert!(open.wrote_outside, "without a sandbox the write lands");
    assert!(
        open.environ_hits >= 1,
        "without a sandbox supervisor's environ is readable"
    );
    assert!(open.home_secret.contains("ghp_home_secret"));
    if !bwrap_works() {
        return;
    }
    let boxed = agent_probe("developer", "bwrap");
    assert!(
        !boxed.wrote_outside,
        "the write outside the worktree never lands"
    );
    assert_eq!(
        boxed.environ_hits, 0,
        "supervisor's /proc/<pid>/environ is out of reach"
    );
    assert_eq!(boxed.home_secret, "", "HOME is hidden");
    assert_eq!(boxed.run.tool_calls, 3, "the commands ran: {:?}", boxed.run);
    assert!(
        boxed.tree.contains(&"environ-hits.txt".to_string()),
        "{:?}",
        boxed.tree
    );

    // A read-only role (the built-in researcher) cannot change its worktree either, whatever its
    // CLI's own tools allow.
    let researcher = agent_probe("researcher", "bwrap");
    assert_eq!(researcher.run.tool_calls, 3);
    assert!(researcher.tree.is_empty(), "{:?}", researcher.tree);
    assert!(agent_probe("researcher", "none").tree.len() >= 2);
}

/// A whole run with every agent in bwrap opens its pull request; the developer's probe, committed
/// with its work, shows what it could not reach.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_with_agents_in_bwrap_reaches_its_pull_request() {
    if !bwrap_works() {
        return;
    }
    let outside = scratch();
    let planted = outside.path().join("planted.txt");
    let canary = format!("canary-run-{}", std::process::id());
    let mut spec = spec();
    spec.settings.insert("agentSandbox".into(), json!("bwrap"));
    let mut actions = probe(&planted, &canary);
    actions.push(
        json!({ "write": { "path": "src/hours.ts", "content": "export const hours = 1;\n" } }),
    );
    actions.push(json!({ "final": answer("Done.", json!({"action": "COMPLETE", "agentName": "developer"})) }));
    set_role(&mut spec, "developer", vec![json!(actions)]);
    let dir = tempfile::tempdir().unwrap();
    let world = World::build(dir.path(), spec).await.expect("world builds");
    let out = run_supervisor(&world, &[("SANDBOX_CANARY", canary.as_str())]).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["end"]["kind"], "pull-request", "{summary}");
    let show = |file: &str| {
        supervisor::demo::git(
            &world.remote,
            &["show", &format!("worktree-git-issue-1:{file}")],
        )
        .unwrap_or_default()
    };
    assert_eq!(show("src/hours.ts"), "export const hours = 1;");
    assert_eq!(show("environ-hits.txt").trim(), "0");
    assert!(
        !planted.exists(),
        "the write outside the worktree never landed"
    );
}

async fn run_supervisor(world: &World, extra_env: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.arg("run")
        .arg(world.spec.issue.number.to_string())
        .arg("--repo-root")
        .arg(&world.repo)
        .arg("--json")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    for (k, _) in std::env::vars() {
        if k.starts_with("SUPERVISOR_") || k == "GH_TOKEN" || k == "GITHUB_TOKEN" {
            cmd.env_remove(k);
        }
    }
    cmd.envs(world.env()).envs(extra_env.iter().copied());
    tokio::time::timeout(Duration::from_secs(120), cmd.output())
        .await
        .expect("supervisor run finished within 120 s")
        .unwrap()
}

/// A directory holding a `bwrap` that cannot create namespaces, as on a host that forbids them.
fn failing_bwrap() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let bwrap = dir.path().join("bwrap");
    std::fs::write(
        &bwrap,
        "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'bubblewrap 0.8.0'; exit 0; fi\necho 'bwrap: No permissions to creating new namespace, likely because the kernel does not allow non-privileged user namespaces' >&2\nexit 1\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&bwrap, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = dir.path().to_path_buf();
    (dir, path)
}

/// `supervisor check` names a sandbox that cannot work (bwrap missing, or unable to create
/// namespaces) and exits 2; a working one is shown with its version.
#[test]
fn check_refuses_a_sandbox_that_cannot_work() {
    let repo = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(repo.path().join(".supervisor")).unwrap();
    std::fs::write(
        repo.path().join(".supervisor/settings.json"),
        r#"{ "supervisor": { "repo": "o/r", "projectNumber": 1, "codeowners": ["a"],
             "agentBackend": "scripted", "agentScript": "s.json", "agentSandbox": "bwrap" } }"#,
    )
    .unwrap();
    std::fs::write(repo.path().join("s.json"), "{}").unwrap();
    let check = |path: &str| {
        let out = Command::new(BIN)
            .args(["check", "--repo-root"])
            .arg(repo.path())
            .env_clear()
            .env("PATH", path)
            .env("HOME", repo.path())
            .output()
            .unwrap();
        // The report is on stdout.
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (code, text) = check("/nonexistent");
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("bwrap is not on supervisor's PATH"), "{text}");
    assert!(text.contains("apt-get install bubblewrap"), "{text}");

    let (_d, fake) = failing_bwrap();
    let (code, text) = check(&format!("{}:/usr/bin:/bin", fake.display()));
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("bwrap cannot create the agents' sandbox here"),
        "{text}"
    );
    assert!(
        text.contains("No permissions to creating new namespace"),
        "{text}"
    );

    if bwrap_works() {
        let (code, text) = check("/usr/local/bin:/usr/bin:/bin");
        assert_eq!(code, Some(0), "{text}");
        let line = text
            .lines()
            .find(|l| l.starts_with("agent sandbox"))
            .unwrap();
        assert!(line.contains("bubblewrap"), "{line}");
    }
}

/// `supervisor run` with a sandbox that cannot work stops before anything is written: no comment,
/// no card move, no worktree.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_sandbox_cannot_work_writes_nothing() {
    let mut spec = spec();
    spec.settings.insert("agentSandbox".into(), json!("bwrap"));
    let (_d, fake) = failing_bwrap();
    let path = format!("{}:/usr/bin:/bin", fake.display());
    refused_before_writing(spec, &path, "No permissions to creating new namespace").await;
}

/// Issue 13: a run whose agent CLI is not installed stops before anything is written, instead of
/// moving the card and posting "Pipeline Stopped … claude: No such file or directory".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_agent_cli_is_missing_writes_nothing() {
    let mut spec = spec();
    spec.settings.insert("agentBackend".into(), json!("claude"));
    refused_before_writing(
        spec,
        "/nonexistent-bin:/usr/bin:/bin",
        "claude (architect, auditor, developer, researcher, test-designer): `claude` is not on the agents' PATH",
    )
    .await;
}

/// A run whose agent CLI would find no provider key (none among the variables agents receive,
/// no login in its configuration directory) stops before anything is written, instead of moving
/// the card and failing at the first agent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_agent_cli_has_no_provider_key_writes_nothing() {
    let mut spec = spec();
    spec.settings.insert("agentBackend".into(), json!("claude"));
    let bin = tempfile::tempdir().unwrap();
    let claude = bin.path().join("claude");
    std::fs::write(
        &claude,
        "#!/bin/sh\nif [ \"$1\" = --version ]; then echo '2.1.330 (Claude Code)'; exit 0; fi\necho 'Invalid API key · Please run /login' >&2\nexit 1\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&claude, std::fs::Permissions::from_mode(0o755)).unwrap();
    let home = tempfile::tempdir().unwrap();
    let path = format!("{}:/usr/bin:/bin", bin.path().display());
    let home_text = home.path().display().to_string();
    let mut env = vec![("PATH", path.as_str()), ("HOME", home_text.as_str())];
    for var in [
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "CLAUDE_CONFIG_DIR",
        "CLAUDE_CODE_OAUTH_TOKEN",
    ] {
        env.push((var, ""));
    }
    refused_before_writing_with(
        spec,
        &env,
        "claude (architect, auditor, developer, researcher, test-designer): no credentials: ANTHROPIC_API_KEY is not among the variables agents receive",
    )
    .await;
}

async fn refused_before_writing(spec: supervisor::demo::WorldSpec, path: &str, reason: &str) {
    refused_before_writing_with(spec, &[("PATH", path)], reason).await;
}

async fn refused_before_writing_with(
    spec: supervisor::demo::WorldSpec,
    env: &[(&str, &str)],
    reason: &str,
) {
    let dir = tempfile::tempdir().unwrap();
    let world = World::build(dir.path(), spec).await.expect("world builds");
    let out = run_supervisor(&world, env).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("agents cannot run, so nothing was started"),
        "{stderr}"
    );
    assert!(stderr.contains(reason), "{stderr}");
    assert!(
        world.sandbox.with_state(|s| s
            .comments_of(1)
            .iter()
            .all(|c| c.author != "supervisor-bot")),
        "nothing posted"
    );
    assert_eq!(
        world
            .sandbox
            .with_state(|s| s.column_of(1).map(String::from))
            .as_deref(),
        Some("Backlog"),
        "the card did not move"
    );
    assert_eq!(world.sandbox.request_total(), 0, "GitHub was never asked");
    assert!(!world.worktrees.join("worktree-git-issue-1").exists());
}
