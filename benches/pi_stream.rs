//! Throughput and memory of reading a pi JSON event stream: a writer thread pushes generated,
//! realistic pi JSONL (text deltas repeating the growing partial message, tool-call events, tool
//! output, `message_end` with usage) through an OS pipe; the same incremental reader and parser as
//! the runner consume it. Prints MB/s and peak RSS (VmHWM).
//!
//! `cargo bench --bench pi_stream` (1 GiB); `PI_STREAM_BYTES=100000000` for a shorter run.

use std::fs::File;
use std::io::Write;
use std::os::fd::FromRawFd;
use std::time::Instant;

use serde_json::json;
use supervisor::agent::backend::PiStream;
use supervisor::agent::stream::{DEFAULT_LINE_CAP, StreamParser, Tally, parse_stream};

const DEFAULT_BYTES: u64 = 1 << 30;
const DELTAS_PER_MESSAGE: usize = 120;
const TOOLS_PER_TURN: u64 = 2;
const INPUT_TOKENS: u64 = 5400;
const OUTPUT_TOKENS: u64 = 610;

fn usage(input: u64, output: u64) -> serde_json::Value {
    json!({ "input": input, "output": output, "cacheRead": 1200, "cacheWrite": 0,
            "totalTokens": input + output + 1200,
            "cost": { "input": 0.016, "output": 0.009, "cacheRead": 0.0004, "cacheWrite": 0, "total": 0.0254 } })
}

fn assistant(content: serde_json::Value, u: serde_json::Value, stop: &str) -> serde_json::Value {
    json!({ "role": "assistant", "content": content, "api": "anthropic-messages", "provider": "anthropic",
            "model": "claude-sonnet-4-5", "usage": u, "stopReason": stop, "timestamp": 1795316709663u64 })
}

/// One agent turn as pi writes it.
fn turn(n: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut line = |v: serde_json::Value| {
        out.extend_from_slice(v.to_string().as_bytes());
        out.push(b'\n');
    };
    line(json!({ "type": "turn_start" }));
    line(json!({ "type": "message_start", "message": assistant(json!([]), usage(0, 0), "stop") }));
    let mut text = String::new();
    for i in 0..DELTAS_PER_MESSAGE {
        let delta = format!("token {i} of turn {n}: the module exports a parser; ");
        text.push_str(&delta);
        let partial = assistant(
            json!([{ "type": "text", "text": text }]),
            usage(0, 0),
            "stop",
        );
        line(json!({ "type": "message_update",
            "assistantMessageEvent": { "type": "text_delta", "contentIndex": 0, "delta": delta, "partial": partial },
            "message": partial }));
    }
    let calls: Vec<serde_json::Value> = (0..TOOLS_PER_TURN)
        .map(|t| {
            json!({ "type": "toolCall", "id": format!("call_{n}_{t}"), "name": "bash",
                         "arguments": { "command": "grep -rn parse src/" } })
        })
        .collect();
    let mut content = vec![json!({ "type": "text", "text": text })];
    content.extend(calls.iter().cloned());
    line(json!({ "type": "message_end",
        "message": assistant(json!(content), usage(INPUT_TOKENS, OUTPUT_TOKENS), "toolUse") }));
    for (t, call) in calls.iter().enumerate() {
        let id = format!("call_{n}_{t}");
        line(
            json!({ "type": "tool_execution_start", "toolCallId": id, "toolName": "bash", "args": call["arguments"] }),
        );
        let output =
            "src/parser.rs:12: pub fn parse(input: &str) -> Result<Ast, Error> {\n".repeat(40);
        line(
            json!({ "type": "tool_execution_update", "toolCallId": id, "toolName": "bash",
            "args": call["arguments"], "partialResult": { "content": [{ "type": "text", "text": output }] } }),
        );
        line(
            json!({ "type": "tool_execution_end", "toolCallId": id, "toolName": "bash",
            "result": { "content": [{ "type": "text", "text": output }] }, "isError": false }),
        );
    }
    line(
        json!({ "type": "turn_end", "message": assistant(json!(content), usage(INPUT_TOKENS, OUTPUT_TOKENS), "toolUse"), "toolResults": [] }),
    );
    out
}

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn main() {
    let target: u64 = std::env::var("PI_STREAM_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_BYTES);
    let turn_bytes = turn(0);
    let last = {
        let text = "## Research Findings\nAll parsed.";
        let mut v = json!({ "type": "message_end",
            "message": assistant(json!([{ "type": "text", "text": text }]), usage(100, 20), "stop") })
        .to_string()
        .into_bytes();
        v.push(b'\n');
        v
    };
    let turns = target.div_ceil(turn_bytes.len() as u64);
    let rss_before = peak_rss_kib();

    let mut fds = [0i32; 2];
    // SAFETY: pipe(2) fills two descriptors we then own.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0, "pipe");
    // SAFETY: the descriptors are fresh and owned by these files only.
    let (reader, mut writer) = unsafe { (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])) };
    let producer = std::thread::spawn(move || {
        for _ in 0..turns {
            writer.write_all(&turn_bytes).expect("write");
        }
        writer.write_all(&last).expect("write");
    });

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let started = Instant::now();
    let (bytes, tally) = rt.block_on(async move {
        let pipe = tokio::net::unix::pipe::Receiver::from_file(reader).expect("pipe receiver");
        let mut parser = PiStream;
        let mut tally = Tally::default();
        let bytes = parse_stream(pipe, &mut parser, &mut tally, DEFAULT_LINE_CAP)
            .await
            .expect("read");
        parser.end(&mut tally, true);
        (bytes, tally)
    });
    let secs = started.elapsed().as_secs_f64();
    producer.join().unwrap();

    assert_eq!(
        tally.tool_calls,
        turns * TOOLS_PER_TURN,
        "every tool call counted"
    );
    assert_eq!(
        tally.usage.total,
        turns * (INPUT_TOKENS + OUTPUT_TOKENS + 1200) + 1320,
        "usage summed"
    );
    assert_eq!(
        tally.final_text.as_deref(),
        Some("## Research Findings\nAll parsed.")
    );
    let mb = bytes as f64 / 1e6;
    println!(
        "pi_stream: {mb:.0} MB in {secs:.2} s = {:.0} MB/s; {} lines; peak RSS {:.1} MiB (before reading {:.1} MiB)",
        mb / secs,
        tally.lines,
        peak_rss_kib() as f64 / 1024.0,
        rss_before as f64 / 1024.0
    );
}
