//! `/supervisor <issue>` inside pi and Claude Code: `supervisor init --slash-commands` installs
//! them, and the real CLIs (the versions `scripts/install-tools.sh` pins) load and run them against
//! the sandbox GitHub, the pipeline's agents being the scripted ones. pi loads the extension through
//! its own loader (RPC mode, as an editor drives it); Claude Code parses the command file, expands
//! its arguments, and runs `supervisor run` through its Bash tool when the (fake) model asks.
//!
//! A CLI that is not installed fails these tests when `CI` is set; elsewhere they are skipped.

mod fake_model;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use fake_model::{FakeModel, Reply, Step};
use serde_json::Value;
use supervisor::demo::{World, WorldSpec};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

#[path = "support/specs.rs"]
mod specs;

const BIN: &str = env!("CARGO_BIN_EXE_supervisor");
const TIMEOUT: Duration = Duration::from_secs(120);

fn installed(name: &str) -> Option<PathBuf> {
    let local = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(".tools/agents/node_modules/.bin")
        .join(name);
    if local.exists() {
        return Some(local);
    }
    if std::env::var_os("CI").is_some() {
        panic!("{name} is not installed: scripts/install-tools.sh installs the pinned agent CLIs");
    }
    eprintln!("skipped: {name} is not installed (scripts/install-tools.sh installs it)");
    None
}

/// The world of the scenarios, with the slash commands installed by `init`.
async fn world() -> (tempfile::TempDir, World) {
    let dir = tempfile::tempdir().unwrap();
    let spec: WorldSpec = specs::spec();
    let world = World::build(dir.path(), spec).await.expect("world builds");
    let out = std::process::Command::new(BIN)
        .args(["init", "--slash-commands"])
        .current_dir(&world.repo)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(".pi/extensions/supervisor/index.ts"),
        "{stderr}"
    );
    assert!(world.repo.join(".claude/commands/supervisor.md").is_file());
    (dir, world)
}

/// The environment a user's shell would give the CLI: the world's GitHub, `supervisor` on PATH.
fn command(program: &Path, world: &World, home: &Path) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(program);
    let bin = Path::new(BIN).parent().unwrap().display().to_string();
    cmd.current_dir(&world.repo)
        .env_clear()
        .env("PATH", format!("{bin}:/usr/local/bin:/usr/bin:/bin"))
        .env("HOME", home)
        .envs(world.env())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

fn card(world: &World) -> Option<String> {
    world
        .sandbox
        .with_state(|s| s.column_of(1).map(String::from))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pi_loads_the_extension_and_supervisor_runs_the_issue_from_the_session() {
    let Some(pi) = installed("pi") else { return };
    let (dir, world) = world().await;
    let agent_dir = dir.path().join("pi-agent");
    std::fs::create_dir_all(&agent_dir).unwrap();
    let mut cmd = command(&pi, &world, dir.path());
    cmd.args(["--mode", "rpc", "--no-session"])
        .env("PI_CODING_AGENT_DIR", &agent_dir)
        .env("PI_OFFLINE", "1");
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for request in [
        r#"{"id":"c","type":"get_commands"}"#,
        r#"{"id":"p","type":"prompt","message":"/supervisor 1"}"#,
    ] {
        stdin
            .write_all(format!("{request}\n").as_bytes())
            .await
            .unwrap();
    }
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen: Vec<Value> = Vec::new();
    let finished = tokio::time::timeout(TIMEOUT, async {
        while let Ok(Some(line)) = lines.next_line().await {
            let Ok(v) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            let last = v["method"] == "notify";
            seen.push(v);
            if last {
                return true;
            }
        }
        false
    })
    .await;
    let _ = child.kill().await;
    let stderr = {
        let mut s = String::new();
        use tokio::io::AsyncReadExt;
        let _ = child.stderr.take().unwrap().read_to_string(&mut s).await;
        s
    };
    let dump = || format!("{seen:#?}\n{stderr}");
    assert_eq!(finished, Ok(true), "no notification came: {}", dump());
    let commands = seen
        .iter()
        .find(|v| v["id"] == "c")
        .expect("commands listed");
    let ours = commands["data"]["commands"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "supervisor")
        .unwrap_or_else(|| panic!("/supervisor is not registered: {}", dump()));
    assert_eq!(ours["source"], "extension", "{ours}");
    // Progress reached the session as the run moved, and the outcome came last.
    let statuses: Vec<&str> = (seen.iter())
        .filter(|v| v["method"] == "setStatus")
        .filter_map(|v| v["statusText"].as_str())
        .collect();
    assert!(
        statuses
            .iter()
            .any(|s| s.contains("→ Research · researcher")),
        "{}",
        dump()
    );
    let notify = seen.last().unwrap();
    assert_eq!(notify["notifyType"], "info", "{}", dump());
    let message = notify["message"].as_str().unwrap();
    assert!(
        message.starts_with("supervisor #1: pull request http://"),
        "{message}"
    );
    assert_eq!(card(&world).as_deref(), Some("Done"));
}

/// pi in RPC mode in the world's repository, given `prompts`.
struct PiSession {
    child: tokio::process::Child,
    /// Kept open: pi ends when its input does.
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    /// What pi printed so far.
    seen: Vec<Value>,
}

impl PiSession {
    async fn start(pi: &Path, world: &World, home: &Path, prompts: &[&str]) -> PiSession {
        let agent_dir = home.join("pi-agent");
        std::fs::create_dir_all(&agent_dir).unwrap();
        let mut cmd = command(pi, world, home);
        cmd.args(["--mode", "rpc", "--no-session"])
            .env("PI_CODING_AGENT_DIR", &agent_dir)
            .env("PI_OFFLINE", "1");
        let mut child = cmd.spawn().unwrap();
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut session = PiSession {
            child,
            stdin,
            lines,
            seen: Vec::new(),
        };
        for prompt in prompts {
            session.prompt(prompt).await;
        }
        session
    }

    async fn prompt(&mut self, message: &str) {
        let request = serde_json::json!({ "id": "p", "type": "prompt", "message": message });
        self.stdin
            .write_all(format!("{request}\n").as_bytes())
            .await
            .unwrap();
    }

    /// Reads what pi prints until `until` accepts a line: whether one was accepted in time.
    async fn until(&mut self, until: impl Fn(&Value) -> bool) -> bool {
        let (lines, seen) = (&mut self.lines, &mut self.seen);
        tokio::time::timeout(TIMEOUT, async {
            while let Ok(Some(line)) = lines.next_line().await {
                let Ok(v) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                let last = until(&v);
                seen.push(v);
                if last {
                    return true;
                }
            }
            false
        })
        .await
        .unwrap_or(false)
    }

    /// Goes on reading (and dropping) what pi prints, as a terminal would, while pi lives: pi
    /// ends on a write to a closed output.
    fn keep_reading(self) -> tokio::process::Child {
        let PiSession {
            child,
            stdin,
            mut lines,
            ..
        } = self;
        std::mem::forget(stdin);
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        child
    }
}

/// The status line pi shows once the run moved the card to Research.
fn in_research(v: &Value) -> bool {
    v["method"] == "setStatus"
        && v["statusText"]
            .as_str()
            .is_some_and(|s| s.contains("→ Research"))
}

/// The run of issue 1 ends as interrupted within 20 s (its agent sleeps 30 s): its status.
async fn interrupted_soon(world: &World) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let out = std::process::Command::new(BIN)
            .args(["runs", "--json"])
            .current_dir(&world.repo)
            .output()
            .unwrap();
        let runs: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        let status = runs["runs"][0]["status"].as_str().unwrap_or("").to_string();
        if status == "interrupted" || std::time::Instant::now() > deadline {
            return status;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// pi running `/supervisor 1`, read until the run moved the card to Research.
async fn running_in_pi(pi: &Path, world: &World, home: &Path) -> PiSession {
    let mut session = PiSession::start(pi, world, home, &["/supervisor 1"]).await;
    assert!(
        session.until(in_research).await,
        "the run did not start: {:#?}",
        session.seen
    );
    session
}

/// A world whose researcher sleeps 30 s, with the slash commands installed.
async fn sleeping_world(dir: &Path) -> World {
    let mut spec: WorldSpec = specs::spec();
    specs::set_role(
        &mut spec,
        "researcher",
        vec![serde_json::json!([{ "sleep": 30000 }, { "final": "late" }])],
    );
    let world = World::build(dir, spec).await.expect("world builds");
    let out = std::process::Command::new(BIN)
        .args(["init", "--slash-commands"])
        .current_dir(&world.repo)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    world
}

/// `/supervisor 1 --dry-run`: the plan reaches the session (a dry run records no journal, so
/// nothing comes as progress).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pi_shows_the_plan_of_a_dry_run() {
    let Some(pi) = installed("pi") else { return };
    let (dir, world) = world().await;
    let mut pi = PiSession::start(&pi, &world, dir.path(), &["/supervisor 1 --dry-run"]).await;
    let found = pi.until(|v| v["method"] == "notify").await;
    let _ = pi.child.kill().await;
    let all: Vec<String> = pi.seen.iter().map(Value::to_string).collect();
    assert!(found, "no notification came: {all:#?}");
    let message = all
        .iter()
        .find(|v| v.contains("customType") && v.contains("supervisor #1"))
        .unwrap_or_else(|| panic!("no message from the extension: {all:#?}"));
    assert!(
        message.contains("dry run: nothing was written"),
        "{message}"
    );
    assert!(message.contains("· "), "the plan's steps: {message}");
    assert_eq!(card(&world).as_deref(), Some("Backlog"), "nothing moved");
}

/// pi ending while `/supervisor` runs stops supervisor too (SIGTERM: it stops its agent and
/// cleans up), instead of leaving it running on its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pi_ending_stops_the_run_it_started() {
    let Some(pi) = installed("pi") else { return };
    let dir = tempfile::tempdir().unwrap();
    let world = sleeping_world(dir.path()).await;
    let session = running_in_pi(&pi, &world, dir.path()).await;
    let seen = session.seen.clone();
    let mut child = session.keep_reading();
    // pi is asked to end, as a terminal closing does.
    let pid = child.id().unwrap() as libc::pid_t;
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let _ = tokio::time::timeout(TIMEOUT, child.wait()).await;
    // supervisor heard it: the run ends as interrupted within moments, not 30 s later.
    assert_eq!(interrupted_soon(&world).await, "interrupted", "{seen:#?}");
}

/// pi dying of an error (here: writing to an output nobody reads) stops the run too: nothing of
/// it goes on alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pi_crashing_stops_the_run_it_started() {
    let Some(pi) = installed("pi") else { return };
    let dir = tempfile::tempdir().unwrap();
    let world = sleeping_world(dir.path()).await;
    let session = running_in_pi(&pi, &world, dir.path()).await;
    let PiSession {
        mut child,
        mut stdin,
        lines,
        seen,
    } = session;
    drop(lines);
    // A command pi answers on its output, which is closed: pi throws EPIPE and exits.
    let request = serde_json::json!({ "id": "crash", "type": "get_state" });
    let _ = stdin.write_all(format!("{request}\n").as_bytes()).await;
    let status = tokio::time::timeout(TIMEOUT, child.wait()).await;
    assert!(
        matches!(&status, Ok(Ok(s)) if !s.success()),
        "pi did not fail: {status:?}"
    );
    assert_eq!(interrupted_soon(&world).await, "interrupted", "{seen:#?}");
    drop(stdin);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_expands_the_command_and_runs_supervisor_through_its_bash_tool() {
    let Some(claude) = installed("claude") else {
        return;
    };
    let (dir, world) = world().await;
    let model = FakeModel::start(vec![
        Reply::answer(
            vec![Step::Run("supervisor run 1 --progress plain".into())],
            100,
            20,
        ),
        Reply::answer(
            vec![Step::Text("The run opened a pull request.".into())],
            100,
            20,
        ),
    ])
    .await;
    let config = dir.path().join("claude");
    std::fs::create_dir_all(&config).unwrap();
    let mut cmd = command(&claude, &world, dir.path());
    cmd.args([
        "-p",
        "/supervisor 1",
        "--output-format",
        "json",
        "--model",
        "claude-sonnet-4-5",
        "--no-session-persistence",
    ])
    .env("ANTHROPIC_BASE_URL", &model.url)
    .env("ANTHROPIC_API_KEY", "test-key")
    .env("CLAUDE_CONFIG_DIR", &config)
    .env("CLAUDE_CODE_MAX_RETRIES", "0")
    .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
    .env("DISABLE_AUTOUPDATER", "1");
    let out = tokio::time::timeout(TIMEOUT, cmd.output())
        .await
        .expect("claude finished in time")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let calls = model.model_calls();
    let dump = || format!("{stdout}\n{stderr}\n{} model calls", calls.len());
    assert!(
        calls.first().is_some_and(|c| c
            .body
            .contains("Run the supervisor pipeline for GitHub issue 1 in this repository")),
        "the command was not expanded: {}",
        dump()
    );
    // The Bash tool ran supervisor (allowed by the command's frontmatter) and its output went back.
    let answer = calls.get(1).map(|c| c.body.as_str()).unwrap_or_default();
    assert!(
        answer.contains("✔ approved — pull request opened"),
        "supervisor's output did not come back: {}\n{answer}",
        dump()
    );
    assert_eq!(card(&world).as_deref(), Some("Done"), "{}", dump());
    assert_eq!(out.status.code(), Some(0), "{}", dump());
}
