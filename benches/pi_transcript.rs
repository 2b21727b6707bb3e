//! The transcript of an agent that writes a file through pi with small deltas. pi repeats the whole
//! partial message (twice, with the arguments parsed and raw) in every `message_update`, so the raw
//! stream grows with the square of the file: a 1 MB file in 4-character deltas is hundreds of GB.
//! The scripted backend replays exactly that stream in a real subprocess; the runner reads it and
//! writes the transcript. Prints the raw stream size, the transcript size and the time, and fails
//! when the transcript is over 5 MB.
//!
//! `cargo bench --bench pi_transcript` (1 MiB file, 4-character deltas: reads ~550 GB, minutes);
//! `PI_TRANSCRIPT_FILE_BYTES=100000` for a shorter run; `PI_TRANSCRIPT_DELTA` sets the delta.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use supervisor::agent::{
    AgentDefinition, AgentRequest, Backend, ExitReason, Limits, human_bytes, run_agent,
};
use tokio_util::sync::CancellationToken;

const LIMIT: u64 = 5_000_000;

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let file_bytes = env_number("PI_TRANSCRIPT_FILE_BYTES", 1 << 20);
    let delta = env_number("PI_TRANSCRIPT_DELTA", 4);
    let line = "    const value = compute(input, \"option\"); // a line of generated code\n";
    let content: String = line.repeat(file_bytes / line.len() + 1)[..file_bytes].to_string();

    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.json");
    std::fs::write(
        &script,
        serde_json::json!({ "developer": [[
            { "usage": { "input": 1200, "output": 300 } },
            { "write": { "path": "generated.ts", "content": content, "delta": delta } },
            { "final": "Wrote generated.ts." } ]] })
        .to_string(),
    )
    .unwrap();
    let role = AgentDefinition::parse(
        std::path::Path::new("developer.md"),
        "developer",
        "---\ntools: [read, write]\n---\nWrite the file.\n",
    )
    .unwrap()
    .0;
    let transcript = dir.path().join("transcript.jsonl");
    let req = AgentRequest {
        role: &role,
        task: "Write generated.ts".into(),
        cwd: dir.path().to_path_buf(),
        backend: Backend::Scripted {
            script,
            program: PathBuf::from(env!("CARGO_BIN_EXE_supervisor")),
        },
        limits: Limits {
            timeout: Some(Duration::from_secs(3 * 3600)),
            ..Limits::default()
        },
        env: vec![("PATH".into(), std::env::var("PATH").unwrap_or_default())],
        transcript: Some(transcript.clone()),
        attempt: 1,
        revision: false,
        subject: None,
        keep_partial_on_budget: false,
        sandbox: None,
        pulse: None,
        prices: Default::default(),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let started = Instant::now();
    let run = rt.block_on(run_agent(req, CancellationToken::new()));
    let secs = started.elapsed().as_secs_f64();
    assert_eq!(run.exit, ExitReason::Completed, "{}", run.stderr_tail);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("generated.ts")).unwrap(),
        content
    );
    let size = std::fs::metadata(&transcript).unwrap().len();
    let text = std::fs::read_to_string(&transcript).unwrap();
    let note: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    let dropped = note["dropped"]["message_update"]["bytes"]
        .as_u64()
        .unwrap_or(0);
    let updates = note["dropped"]["message_update"]["lines"]
        .as_u64()
        .unwrap_or(0);
    println!(
        "pi_transcript: a {} file written with {delta}-character deltas: {updates} message_update lines, raw stream {} ({:.0} MB/s); transcript {size} bytes ({}) — limit {LIMIT} bytes: {}",
        human_bytes(file_bytes as u64),
        human_bytes(dropped + size),
        (dropped + size) as f64 / 1e6 / secs,
        human_bytes(size),
        if size <= LIMIT { "ok" } else { "OVER" }
    );
    assert!(size <= LIMIT, "the transcript is over {LIMIT} bytes");
}
