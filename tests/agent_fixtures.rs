//! Output recorded from the real pi, Claude Code and Codex CLIs (see tests/fixtures/agents/README.md),
//! replayed through each backend's parser and through the runner.

use std::path::{Path, PathBuf};
use std::time::Duration;

use supervisor::agent::backend::{ClaudeStream, CodexStream, PiStream};
use supervisor::agent::stream::{DEFAULT_LINE_CAP, StreamParser, Tally, parse_stream};
use supervisor::agent::{
    AgentDefinition, AgentRequest, AgentRun, Backend, ExitReason, Limits, run_agent,
};
use tokio_util::sync::CancellationToken;

const FINAL: &str = "Findings: the repository has one file.\n\n```json\n{\"action\":\"RESEARCH_COMPLETE\",\"findings\":\"one file\"}\n```";

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/agents")
        .join(rel)
}

async fn replay(rel: &str, parser: &mut dyn StreamParser, exit_ok: bool) -> Tally {
    let file = tokio::fs::File::open(fixture(rel)).await.unwrap();
    let mut tally = Tally::default();
    parse_stream(file, parser, &mut tally, DEFAULT_LINE_CAP)
        .await
        .unwrap();
    parser.end(&mut tally, exit_ok);
    tally
}

#[tokio::test]
async fn pi_tool_then_final() {
    let t = replay("pi/tool-then-final.jsonl", &mut PiStream, true).await;
    assert_eq!(t.final_text.as_deref(), Some(FINAL));
    assert_eq!(t.tool_calls, 1);
    assert_eq!(t.usage.total, 1230 + 1360, "summed over both model calls");
    assert_eq!((t.usage.input, t.usage.output), (2500, 90));
    assert!((t.usage.cost_usd - 0.00885).abs() < 1e-9);
    assert_eq!(t.model.as_deref(), Some("fake-model"));
    assert!(t.error.is_none());
}

#[tokio::test]
async fn pi_provider_error_with_exit_zero_is_an_error() {
    let t = replay("pi/provider-error-exit0.jsonl", &mut PiStream, true).await;
    assert_eq!(
        t.error.as_deref(),
        Some("400 model overloaded: quota exhausted for this key")
    );
    assert_eq!(t.final_text, None);
}

#[tokio::test]
async fn claude_tool_then_final() {
    let mut p = ClaudeStream::default();
    let t = replay("claude/tool-then-final.jsonl", &mut p, true).await;
    assert_eq!(t.final_text.as_deref(), Some(FINAL));
    assert_eq!(t.tool_calls, 1);
    assert_eq!(t.usage.total, 2590, "the result event's total usage");
    assert!((t.usage.cost_usd - 0.00885).abs() < 1e-9);
    assert_eq!(t.model.as_deref(), Some("claude-sonnet-4-5"));
    assert!(t.error.is_none());
}

#[tokio::test]
async fn claude_api_error() {
    let mut p = ClaudeStream::default();
    let t = replay("claude/api-error.jsonl", &mut p, false).await;
    let e = t.error.unwrap();
    assert!(e.contains("API Error: 400 model overloaded"), "{e}");
}

#[tokio::test]
async fn codex_tool_then_final() {
    let mut p = CodexStream::default();
    let t = replay("codex/tool-then-final.jsonl", &mut p, true).await;
    assert_eq!(t.final_text.as_deref(), Some(FINAL));
    assert_eq!(t.tool_calls, 1, "started and completed once");
    assert_eq!(t.usage.total, 2590);
    assert!(t.error.is_none(), "an error *item* is only a warning");
}

#[tokio::test]
async fn codex_turn_failed() {
    let mut p = CodexStream::default();
    let t = replay("codex/turn-failed.jsonl", &mut p, false).await;
    assert_eq!(
        t.error.as_deref(),
        Some("model overloaded: quota exhausted for this key")
    );
}

/// A stand-in executable named like the real CLI: it records its arguments and its stdin, and
/// replays a recorded stream with the recorded exit status.
fn stand_in(bin: &Path, name: &str, rel: &str, code: i32) {
    let script = format!(
        "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\0' \"$a\"; done > \"$ARGS_FILE\"\ncat > \"$ARGS_FILE.stdin\"\ncat '{}'\nexit {code}\n",
        fixture(rel).display()
    );
    let path = bin.join(name);
    std::fs::write(&path, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

struct StandIn {
    run: AgentRun,
    args: Vec<String>,
    stdin: String,
}

async fn run_stand_in(backend: Backend, name: &str, rel: &str, code: i32) -> StandIn {
    run_stand_in_with(backend, name, rel, code, "-Find the bug").await
}

async fn run_stand_in_with(
    backend: Backend,
    name: &str,
    rel: &str,
    code: i32,
    task: &str,
) -> StandIn {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    stand_in(&bin, name, rel, code);
    let role = AgentDefinition::parse(
        Path::new("researcher.md"),
        "researcher",
        "---\ntools: [read, grep]\nmodel: m-1\nthinking: high\n---\nResearch carefully.\n",
    )
    .unwrap()
    .0;
    let args_file = dir.path().join("args");
    let req = AgentRequest {
        role: &role,
        task: task.into(),
        cwd: dir.path().to_path_buf(),
        backend,
        limits: Limits::default(),
        env: vec![
            ("PATH".into(), format!("{}:/usr/bin:/bin", bin.display())),
            ("ARGS_FILE".into(), args_file.display().to_string()),
        ],
        transcript: None,
        attempt: 1,
        revision: false,
        subject: None,
        keep_partial_on_budget: true,
        sandbox: None,
        pulse: None,
        prices: Default::default(),
    };
    let run = tokio::time::timeout(
        Duration::from_secs(30),
        run_agent(req, CancellationToken::new()),
    )
    .await
    .unwrap();
    let args = std::fs::read(&args_file).unwrap_or_default();
    let args = String::from_utf8(args)
        .unwrap()
        .split('\0')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    let stdin = std::fs::read_to_string(dir.path().join("args.stdin")).unwrap_or_default();
    StandIn { run, args, stdin }
}

fn after<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    let i = args.iter().position(|a| a == flag)?;
    args.get(i + 1).map(String::as_str)
}

#[tokio::test]
async fn pi_through_the_runner() {
    let StandIn { run, args, stdin } =
        run_stand_in(Backend::Pi, "pi", "pi/tool-then-final.jsonl", 0).await;
    assert_eq!(run.exit, ExitReason::Completed);
    assert_eq!(
        (run.final_text.as_str(), run.tool_calls, run.usage.total),
        (FINAL, 1, 2590)
    );
    assert_eq!(args[..4], ["-p", "--mode", "json", "--no-session"]);
    assert_eq!(after(&args, "--model"), Some("m-1"));
    assert_eq!(after(&args, "--thinking"), Some("high"));
    assert_eq!(after(&args, "--tools"), Some("read,grep"));
    assert_eq!(
        after(&args, "--append-system-prompt"),
        Some("Research carefully.")
    );
    assert_eq!(stdin, "-Find the bug", "the task goes on stdin");
    assert!(!args.iter().any(|a| a.contains("Find the bug")));

    let run = run_stand_in(Backend::Pi, "pi", "pi/provider-error-exit0.jsonl", 0)
        .await
        .run;
    assert_eq!(
        run.exit,
        ExitReason::Failed("400 model overloaded: quota exhausted for this key".into())
    );
    assert!(!run.succeeded());
}

#[tokio::test]
async fn claude_through_the_runner() {
    let StandIn { run, args, stdin } =
        run_stand_in(Backend::Claude, "claude", "claude/tool-then-final.jsonl", 0).await;
    assert_eq!(run.exit, ExitReason::Completed);
    assert_eq!(
        (run.final_text.as_str(), run.tool_calls, run.usage.total),
        (FINAL, 1, 2590)
    );
    assert_eq!(
        args[..4],
        ["-p", "--output-format", "stream-json", "--verbose"]
    );
    assert_eq!(after(&args, "--tools"), Some("Read,Grep"));
    assert_eq!(after(&args, "--allowedTools"), Some("Read,Grep"));
    assert!(args.iter().any(|a| a == "--include-partial-messages"));
    assert_eq!(after(&args, "--effort"), Some("high"), "thinking: high");
    assert_eq!(stdin, "-Find the bug", "the task goes on stdin");

    let run = run_stand_in(Backend::Claude, "claude", "claude/api-error.jsonl", 1)
        .await
        .run;
    match run.exit {
        ExitReason::Failed(m) => assert!(m.contains("API Error: 400"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn codex_through_the_runner() {
    let StandIn { run, args, stdin } =
        run_stand_in(Backend::Codex, "codex", "codex/tool-then-final.jsonl", 0).await;
    assert_eq!(run.exit, ExitReason::Completed);
    assert_eq!(
        (run.final_text.as_str(), run.tool_calls, run.usage.total),
        (FINAL, 1, 2590)
    );
    assert_eq!(args[..2], ["exec", "--json"]);
    assert_eq!(
        after(&args, "--sandbox"),
        Some("read-only"),
        "read/grep only"
    );
    assert_eq!(
        args.last().map(String::as_str),
        Some("-"),
        "prompt on stdin"
    );
    assert!(stdin.starts_with("Research carefully.") && stdin.ends_with("-Find the bug"));
    assert_eq!(
        run.model.as_deref(),
        Some("m-1"),
        "the model Codex was given"
    );

    let run = run_stand_in(Backend::Codex, "codex", "codex/turn-failed.jsonl", 1)
        .await
        .run;
    match run.exit {
        ExitReason::Failed(m) => assert!(m.contains("model overloaded"), "{m}"),
        other => panic!("{other:?}"),
    }
}

/// Prompts over 128 KiB (one argument's limit on Linux) reach every CLI whole, on stdin.
#[tokio::test]
async fn prompts_over_128_kib_reach_every_cli() {
    let task = format!(
        "{}\nEND-OF-TASK",
        "Context line of a long issue.\n".repeat(7000)
    );
    assert!(task.len() > 200 * 1024);
    for (backend, name, rel) in [
        (Backend::Pi, "pi", "pi/tool-then-final.jsonl"),
        (Backend::Claude, "claude", "claude/tool-then-final.jsonl"),
        (Backend::Codex, "codex", "codex/tool-then-final.jsonl"),
    ] {
        let StandIn { run, args, stdin } = run_stand_in_with(backend, name, rel, 0, &task).await;
        assert_eq!(run.exit, ExitReason::Completed, "{name}: {:?}", run.exit);
        assert!(stdin.ends_with(&task), "{name}: the whole task on stdin");
        assert!(
            args.iter().all(|a| a.len() < 128 * 1024),
            "{name}: no argument over the limit"
        );
    }
}

fn lines(rel: &str) -> Vec<String> {
    std::fs::read_to_string(fixture(rel))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// With `--include-partial-messages` Claude Code streams each API message: its input usage at
/// `message_start`, its output tokens at `message_delta`, long before the closing `result`.
#[tokio::test]
async fn claude_usage_is_counted_while_messages_stream() {
    let mut p = ClaudeStream::default();
    let mut t = Tally::default();
    let all = lines("claude/partial-messages.jsonl");
    let first_delta = all
        .iter()
        .position(|l| l.contains(r#""type":"message_delta""#))
        .unwrap();
    for l in &all[..=first_delta] {
        p.line(l, &mut t);
    }
    // 1000 input + 50 cache write + 20 cache read + 30 output, not the 1 output token of the
    // `assistant` events.
    assert_eq!(t.usage.total, 1100);
    assert_eq!(t.usage.output, 30);
    let result = all
        .iter()
        .position(|l| l.contains(r#""type":"result""#))
        .unwrap();
    for l in &all[first_delta + 1..result] {
        p.line(l, &mut t);
    }
    assert_eq!(t.usage.total, 3590, "all three calls before the result");
    for l in &all[result..] {
        p.line(l, &mut t);
    }
    p.end(&mut t, true);
    assert_eq!(t.usage.total, 3590);
    assert_eq!((t.usage.cache_write, t.usage.cache_read), (150, 60));
    assert_eq!(t.tool_calls, 2);
    assert_eq!(t.final_text.as_deref(), Some("All done."));
    let deltas = all
        .iter()
        .filter(|l| p.transcript(l) == supervisor::agent::stream::TranscriptLine::Drop)
        .count();
    assert!(deltas >= 4, "token deltas are left out of the transcript");
}

/// Codex reports usage once per turn on stdout; its telemetry log on stderr has every response's.
#[tokio::test]
async fn codex_usage_is_counted_per_response_from_its_log() {
    let mut p = CodexStream::default();
    let mut t = Tally::default();
    let log = lines("codex/usage-log.stderr");
    let first = log
        .iter()
        .position(|l| l.contains("input_token_count="))
        .unwrap();
    for l in &log[..=first] {
        p.stderr_line(l, &mut t);
    }
    assert_eq!(
        t.usage.total, 1030,
        "the first response, before the turn ends"
    );
    assert_eq!(
        t.model.as_deref(),
        Some("fake-model"),
        "the model Codex used"
    );
    for l in &log[first + 1..] {
        p.stderr_line(l, &mut t);
    }
    assert_eq!(t.usage.total, 3380);
    for l in lines("codex/usage-log.jsonl") {
        p.line(&l, &mut t);
    }
    p.end(&mut t, true);
    assert_eq!(
        t.usage.total, 3380,
        "the turn's total agrees; nothing counted twice"
    );
    assert_eq!(
        (t.usage.input, t.usage.cache_read, t.usage.output),
        (2400, 900, 80)
    );
    assert_eq!(t.tool_calls, 2);
    assert_eq!(t.final_text.as_deref(), Some("All done."));
}

#[tokio::test]
async fn codex_tokens_used_before_a_failed_turn_are_kept() {
    let mut p = CodexStream::default();
    let mut t = Tally::default();
    for l in lines("codex/failed-after-a-call.stderr") {
        p.stderr_line(&l, &mut t);
    }
    for l in lines("codex/failed-after-a-call.jsonl") {
        p.line(&l, &mut t);
    }
    p.end(&mut t, false);
    assert_eq!(t.usage.total, 1030);
    assert_eq!(
        t.error.as_deref(),
        Some("scripted second request failed (the provider answered HTTP 400)"),
        "the status from Codex's log is added"
    );
}

/// `cache_write_input_tokens` of `turn.completed` is counted (part of Codex's input count).
#[tokio::test]
async fn codex_cache_write_tokens_are_counted() {
    let mut p = CodexStream::default();
    let mut t = Tally::default();
    p.line(
        r#"{"type":"turn.completed","usage":{"input_tokens":1000,"cached_input_tokens":200,"cache_write_input_tokens":300,"output_tokens":50,"reasoning_output_tokens":0}}"#,
        &mut t,
    );
    assert_eq!(
        (
            t.usage.input,
            t.usage.cache_read,
            t.usage.cache_write,
            t.usage.total
        ),
        (500, 200, 300, 1050)
    );
}
