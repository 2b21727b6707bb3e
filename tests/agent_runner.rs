//! The runner with real subprocesses: the scripted backend (the `supervisor` binary replaying a
//! script) for budgets, timeouts, caps and cancellation; small shell programs for the rest.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use supervisor::agent::{
    AgentDefinition, AgentRequest, AgentRun, Backend, ExitReason, Limits, Pulse,
    process_group_alive, run_agent,
};
use supervisor::config::{CommandBackend, PromptVia};
use tokio_util::sync::CancellationToken;

const TEST_TIMEOUT: Duration = Duration::from_secs(60);

fn role(name: &str) -> AgentDefinition {
    let text = "---\ntools: [read, bash]\nmodel: test-model\n---\nYou are a careful agent.\n";
    AgentDefinition::parse(Path::new("role.md"), name, text)
        .unwrap()
        .0
}

fn base_env() -> Vec<(String, String)> {
    vec![("PATH".into(), std::env::var("PATH").unwrap_or_default())]
}

fn scripted(dir: &Path, yaml: &str) -> Backend {
    let script = dir.join("script.yaml");
    std::fs::write(&script, yaml).unwrap();
    Backend::Scripted {
        script,
        program: PathBuf::from(env!("CARGO_BIN_EXE_supervisor")),
    }
}

fn request<'a>(role: &'a AgentDefinition, cwd: &Path, backend: Backend) -> AgentRequest<'a> {
    AgentRequest {
        role,
        task: "do the thing".into(),
        cwd: cwd.to_path_buf(),
        backend,
        limits: Limits {
            kill_grace: Duration::from_millis(500),
            ..Limits::default()
        },
        env: base_env(),
        transcript: None,
        attempt: 1,
        revision: false,
        subject: None,
        keep_partial_on_budget: false,
        sandbox: None,
        pulse: None,
        prices: Default::default(),
    }
}

async fn run(req: AgentRequest<'_>) -> AgentRun {
    tokio::time::timeout(TEST_TIMEOUT, run_agent(req, CancellationToken::new()))
        .await
        .expect("the run ends in time")
}

/// Poll `cond` until it holds or the deadline passes.
async fn eventually(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn pgid_of(pid_file: &Path) -> i32 {
    let pid: i32 = std::fs::read_to_string(pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // SAFETY: getpgid only reads.
    unsafe { libc::getpgid(pid) }
}

#[tokio::test]
async fn scripted_agent_does_its_work_and_reports_it() {
    let dir = tempfile::tempdir().unwrap();
    let backend = scripted(
        dir.path(),
        "developer:\n  - - write: {path: src/a.txt, content: one}\n    - run: \"echo ran > ran.txt\"\n    - usage: {input: 100, output: 20}\n    - usage: {input: 150, output: 30}\n    - stderr: warming up\n    - final: all done\n",
    );
    let r = role("developer");
    let mut req = request(&r, dir.path(), backend);
    req.transcript = Some(dir.path().join("logs/dev.jsonl"));
    let (tx, pulses) = tokio::sync::watch::channel(Pulse::default());
    req.pulse = Some(tx);
    let run = run(req).await;
    assert_eq!(run.exit, ExitReason::Completed, "{run:?}");
    assert!(run.succeeded() && !run.degraded());
    // The live view heard the stream's counters as they came, ending with the run's own.
    assert!(pulses.has_changed().unwrap_or(true), "a pulse was sent");
    let last = pulses.borrow().clone();
    assert_eq!(
        last,
        Pulse {
            tokens: 300,
            tool_calls: 2,
            tool: Some("bash".into())
        }
    );
    assert_eq!(run.final_text, "all done");
    assert_eq!(run.tool_calls, 2);
    assert_eq!(run.usage.total, 300, "usage is summed over calls");
    assert_eq!(run.stderr_tail, "warming up\n");
    assert_eq!(run.backend, "scripted");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("src/a.txt")).unwrap(),
        "one"
    );
    assert!(dir.path().join("ran.txt").exists());
    let transcript = std::fs::read_to_string(dir.path().join("logs/dev.jsonl")).unwrap();
    assert!(transcript.contains("\"stopReason\":\"stop\""));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("logs/dev.jsonl.stderr")).unwrap(),
        "warming up\n"
    );
}

#[tokio::test]
async fn attempts_pick_the_script_entry_and_the_last_repeats() {
    let dir = tempfile::tempdir().unwrap();
    let backend = scripted(
        dir.path(),
        "auditor:\n  - [ {final: first} ]\n  - [ {final: second} ]\n",
    );
    let r = role("auditor");
    for (attempt, want) in [(1, "first"), (2, "second"), (5, "second")] {
        let mut req = request(&r, dir.path(), backend.clone());
        req.attempt = attempt;
        assert_eq!(run(req).await.final_text, want);
    }
}

#[tokio::test]
async fn timeout_kills_the_whole_group() {
    let dir = tempfile::tempdir().unwrap();
    let backend = scripted(
        dir.path(),
        "developer:\n  - - final: partial thoughts\n    - run: \"sleep 120 & echo $! > child.pid; wait\"\n",
    );
    let r = role("developer");
    let mut req = request(&r, dir.path(), backend);
    req.limits.timeout = Some(Duration::from_millis(1500));
    let started = Instant::now();
    let run = run(req).await;
    assert_eq!(run.exit, ExitReason::TimedOut(Duration::from_millis(1500)));
    assert!(!run.succeeded());
    assert!(started.elapsed() < Duration::from_secs(30));
    assert_eq!(run.final_text, "partial thoughts", "the last text is kept");
    let pgid = pgid_of(&dir.path().join("child.pid"));
    eventually("the agent's group to die", || !process_group_alive(pgid)).await;
}

/// An agent that stops writing is stopped at the stall limit, its whole group with it, while one
/// that keeps writing runs on past it.
#[tokio::test]
async fn a_silent_agent_is_stopped_as_stalled() {
    let dir = tempfile::tempdir().unwrap();
    let backend = scripted(
        dir.path(),
        "developer:\n  - - final: before the silence\n    - run: \"sleep 120 & echo $! > child.pid; wait\"\n",
    );
    let r = role("developer");
    let mut req = request(&r, dir.path(), backend);
    req.limits.stall = Some(Duration::from_millis(1200));
    req.limits.timeout = Some(Duration::from_secs(50));
    let started = Instant::now();
    let stalled = run(req).await;
    assert_eq!(
        stalled.exit,
        ExitReason::Stalled(Duration::from_millis(1200))
    );
    assert!(!stalled.succeeded());
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "stopped at the stall limit, not the timeout"
    );
    assert_eq!(stalled.final_text, "before the silence");
    let pgid = pgid_of(&dir.path().join("child.pid"));
    eventually("the stalled agent's group to die", || {
        !process_group_alive(pgid)
    })
    .await;
    let json = serde_json::to_value(&stalled.exit).unwrap();
    assert_eq!(
        json,
        serde_json::json!({ "stalled": 1.2 }),
        "its own end in the journal"
    );

    // A command backend that never writes a line (`sleep 1000`) is stopped the same way.
    let backend = Backend::Command(CommandBackend {
        command: vec!["sh".into(), "-c".into(), "sleep 1000".into()],
        prompt_via: PromptVia::Stdin,
    });
    let mut req = request(&r, dir.path(), backend);
    req.limits.stall = Some(Duration::from_secs(1));
    let run_c = run(req).await;
    assert_eq!(run_c.exit, ExitReason::Stalled(Duration::from_secs(1)));

    // Output keeps it alive: a line every 300 ms for 2 s, past a 1 s stall limit.
    let backend = Backend::Command(CommandBackend {
        command: vec![
            "sh".into(),
            "-c".into(),
            "for i in 1 2 3 4 5 6 7; do echo tick $i; sleep 0.3; done".into(),
        ],
        prompt_via: PromptVia::Stdin,
    });
    let mut req = request(&r, dir.path(), backend);
    req.limits.stall = Some(Duration::from_secs(1));
    let run_t = run(req).await;
    assert_eq!(run_t.exit, ExitReason::Completed, "{run_t:?}");
}

#[tokio::test]
async fn token_budget_degrades_the_researcher_and_stops_the_developer() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = "\"*\":\n  - - final: \"## Research Findings\\npartial\"\n    - usage: {input: 400, output: 100}\n    - usage: {input: 400, output: 100}\n    - sleep: 30000\n    - final: never reached\n";
    let backend = scripted(dir.path(), yaml);

    // 500 + 500 = 1000 > 900: only the SUM goes over the budget (each message alone is under it).
    let researcher = role("researcher");
    let mut req = request(&researcher, dir.path(), backend.clone());
    req.limits.token_budget = 900;
    req.keep_partial_on_budget = true;
    let run_r = run(req).await;
    assert_eq!(
        run_r.exit,
        ExitReason::TokenBudget {
            used: 1000,
            budget: 900
        }
    );
    assert!(run_r.degraded() && run_r.succeeded());
    assert_eq!(run_r.final_text, "## Research Findings\npartial");

    let developer = role("developer");
    let mut req = request(&developer, dir.path(), backend);
    req.limits.token_budget = 900;
    let run_d = run(req).await;
    assert!(matches!(run_d.exit, ExitReason::TokenBudget { .. }));
    assert!(!run_d.degraded() && !run_d.succeeded());
}

#[tokio::test]
async fn tool_call_cap_is_hard() {
    let dir = tempfile::tempdir().unwrap();
    let backend = scripted(
        dir.path(),
        "developer:\n  - [ {tool: read}, {tool: read}, {tool: read}, {write: {path: fourth.txt, content: x}}, {sleep: 30000} ]\n",
    );
    let r = role("developer");
    let mut req = request(&r, dir.path(), backend);
    req.limits.max_tool_calls = 3;
    let run = run(req).await;
    assert_eq!(run.exit, ExitReason::ToolCallCap { calls: 4, cap: 3 });
    assert!(!run.succeeded());
}

#[tokio::test]
async fn cancellation_interrupts_and_kills_the_group() {
    let dir = tempfile::tempdir().unwrap();
    let backend = scripted(
        dir.path(),
        "developer:\n  - [ {run: \"sleep 120 & echo $! > child.pid; wait\"} ]\n",
    );
    let r = role("developer");
    let req = request(&r, dir.path(), backend);
    let cancel = CancellationToken::new();
    let rx = cancel.clone();
    let pid_file = dir.path().join("child.pid");
    let stopper = async {
        eventually("the grandchild to start", || pid_file.exists()).await;
        cancel.cancel();
    };
    let (run, ()) = tokio::time::timeout(TEST_TIMEOUT, async {
        tokio::join!(run_agent(req, rx), stopper)
    })
    .await
    .expect("the run ends in time");
    let pgid = pgid_of(&pid_file);
    assert_eq!(run.exit, ExitReason::Interrupted);
    eventually("the agent's group to die", || !process_group_alive(pgid)).await;
}

#[tokio::test]
async fn provider_error_with_exit_zero_fails_and_nonzero_exit_fails() {
    let dir = tempfile::tempdir().unwrap();
    let backend = scripted(
        dir.path(),
        "developer:\n  - [ {fail: \"429 quota exhausted\"} ]\nauditor:\n  - [ {stderr: \"boom: config missing\"}, {exit: 3} ]\n",
    );
    let dev = role("developer");
    let run_d = run(request(&dev, dir.path(), backend.clone())).await;
    assert_eq!(run_d.exit, ExitReason::Failed("429 quota exhausted".into()));
    let aud = role("auditor");
    let run_a = run(request(&aud, dir.path(), backend)).await;
    assert_eq!(
        run_a.exit,
        ExitReason::Failed("the agent exited with status 3: boom: config missing".into())
    );
}

#[tokio::test]
async fn missing_program_and_missing_directory_are_spawn_failures() {
    let dir = tempfile::tempdir().unwrap();
    let r = role("developer");
    let cmd = Backend::Command(CommandBackend {
        command: vec!["no-such-agent-cli-xyz".into()],
        prompt_via: PromptVia::Stdin,
    });
    let run1 = run(request(&r, dir.path(), cmd.clone())).await;
    match &run1.exit {
        ExitReason::SpawnFailed(m) => assert!(m.contains("installed"), "{m}"),
        other => panic!("{other:?}"),
    }
    let run2 = run(request(&r, &dir.path().join("gone"), cmd)).await;
    assert!(matches!(run2.exit, ExitReason::SpawnFailed(_)));
}

#[tokio::test]
async fn command_backend_gets_the_prompt_on_stdin_and_only_allowlisted_env() {
    let dir = tempfile::tempdir().unwrap();
    let r = role("developer");
    let cmd = Backend::Command(CommandBackend {
        command: vec![
            "sh".into(),
            "-c".into(),
            "env > env.txt; cat; echo; echo model={model} role={role}".into(),
        ],
        prompt_via: PromptVia::Stdin,
    });
    let mut req = request(&r, dir.path(), cmd);
    req.env.push(("ALLOWED_VAR".into(), "yes".into()));
    let run = run(req).await;
    assert_eq!(run.exit, ExitReason::Completed, "{run:?}");
    assert!(run.final_text.starts_with("You are a careful agent."));
    assert!(run.final_text.contains("do the thing"));
    assert!(run.final_text.ends_with("model=test-model role=developer"));
    let env = std::fs::read_to_string(dir.path().join("env.txt")).unwrap();
    let names: Vec<&str> = env.lines().filter_map(|l| l.split('=').next()).collect();
    assert!(names.contains(&"ALLOWED_VAR"), "{names:?}");
    for leaked in [
        "GITHUB_TOKEN",
        "GH_TOKEN",
        "CARGO",
        "RUST_TEST_THREADS",
        "HOSTNAME",
    ] {
        assert!(!names.contains(&leaked), "{leaked} leaked: {names:?}");
    }
}

#[tokio::test]
async fn huge_output_keeps_memory_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let r = role("developer");
    // 32 MiB in one line (over the 16 MiB line cap), then 16 MiB of short lines.
    let cmd = Backend::Command(CommandBackend {
        command: vec![
            "sh".into(),
            "-c".into(),
            "head -c 33554432 /dev/zero | tr '\\0' x; echo; yes line | head -c 16777216; echo the end".into(),
        ],
        prompt_via: PromptVia::Arg,
    });
    let run = run(request(&r, dir.path(), cmd)).await;
    assert_eq!(run.exit, ExitReason::Completed, "{}", run.stderr_tail);
    assert!(
        run.final_text.len() <= 1024 * 1024,
        "{}",
        run.final_text.len()
    );
    assert!(run.final_text.ends_with("the end"));
}

/// pi repeats the whole partial message in every `message_update`: a file written with small deltas
/// makes a quadratic stream. The transcript keeps the final message and the tool call and says
/// what it left out.
#[tokio::test]
async fn partial_updates_leave_the_transcript_linear() {
    let dir = tempfile::tempdir().unwrap();
    let content = "fn main() { println!(\"a line of generated code\"); }\n".repeat(200);
    let script = serde_json::json!({ "developer": [[
        { "write": { "path": "big.rs", "content": content, "delta": 8 } },
        { "final": "wrote big.rs" } ]] });
    let backend = scripted(dir.path(), &script.to_string());
    let r = role("developer");
    let mut req = request(&r, dir.path(), backend);
    let path = dir.path().join("logs/dev.jsonl");
    req.transcript = Some(path.clone());
    let run = run(req).await;
    assert_eq!(run.exit, ExitReason::Completed, "{}", run.stderr_tail);
    assert_eq!(run.final_text, "wrote big.rs");
    assert_eq!(run.tool_calls, 1);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("big.rs")).unwrap(),
        content
    );
    let size = std::fs::metadata(&path).unwrap().len();
    // The raw stream is ~1,400 updates averaging ~24 KB: over 30 MB.
    assert!(
        size < 4 * content.len() as u64,
        "transcript {size} bytes for a {} byte file",
        content.len()
    );
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("the transcript stays JSON lines"))
        .collect();
    let kinds: Vec<&str> = lines.iter().filter_map(|l| l["type"].as_str()).collect();
    assert!(!kinds.contains(&"message_update"), "{kinds:?}");
    for kind in ["message_end", "tool_execution_start", "tool_execution_end"] {
        assert!(kinds.contains(&kind), "{kind} kept: {kinds:?}");
    }
    let start = lines
        .iter()
        .find(|l| l["type"] == "tool_execution_start")
        .unwrap();
    assert_eq!(
        start["args"]["content"],
        content.as_str(),
        "the tool call is whole"
    );
    let note = lines.last().unwrap();
    assert_eq!(note["type"], "transcript_note");
    let dropped = note["dropped"]["message_update"]["lines"].as_u64().unwrap();
    assert!(dropped > 1300, "{note}");
    assert!(note["dropped"]["message_update"]["bytes"].as_u64().unwrap() > 30_000_000);
}

/// Past the cap, the transcript keeps its beginning and its end and says what is missing.
#[tokio::test]
async fn transcripts_are_capped_per_dispatch() {
    let dir = tempfile::tempdir().unwrap();
    let r = role("developer");
    let cmd = Backend::Command(CommandBackend {
        command: vec![
            "sh".into(),
            "-c".into(),
            "yes out-line | head -c 4000000; yes err-line | head -c 4000000 >&2; echo the end"
                .into(),
        ],
        prompt_via: PromptVia::Arg,
    });
    let mut req = request(&r, dir.path(), cmd);
    req.limits.transcript_cap = 256 * 1024;
    let path = dir.path().join("t.log");
    req.transcript = Some(path.clone());
    let run = run(req).await;
    assert_eq!(run.exit, ExitReason::Completed);
    for file in [path.clone(), dir.path().join("t.log.stderr")] {
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(
            text.len() <= 256 * 1024 + 1024,
            "{}: {}",
            file.display(),
            text.len()
        );
        assert!(text.contains("agentTranscriptMaxMb"), "{}", file.display());
    }
    let out = std::fs::read_to_string(&path).unwrap();
    assert!(out.starts_with("out-line\n") && out.ends_with("the end\n"));
}

/// The reason a CLI failed is the line that says what went wrong, not the last line (a docs path).
#[tokio::test]
async fn the_failure_reason_is_the_line_that_names_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let r = role("developer");
    let cmd = Backend::Command(CommandBackend {
        command: vec![
            "sh".into(),
            "-c".into(),
            "printf 'No API key found for anthropic.\\n\\nUse /login to log into a provider via OAuth or API key. See:\\n  /opt/pi/docs/providers.md\\n  /opt/pi/docs/models.md\\n' >&2; exit 1".into(),
        ],
        prompt_via: PromptVia::Arg,
    });
    let run = run(request(&r, dir.path(), cmd)).await;
    assert_eq!(
        run.exit,
        ExitReason::Failed(
            "the agent exited with status 1: No API key found for anthropic.".into()
        )
    );
    assert!(run.stderr_tail.ends_with("models.md\n"), "the tail is kept");
}
