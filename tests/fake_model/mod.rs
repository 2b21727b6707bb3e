//! A scripted model server on 127.0.0.1 speaking the three wire formats the agent CLIs use:
//! OpenAI chat completions (pi), Anthropic Messages (Claude Code) and OpenAI Responses (Codex), each
//! streamed as server-sent events. Every model request gets the next [`Reply`] of the script; the
//! requests are recorded for assertions.

#![allow(dead_code)]

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One piece of a model answer.
#[derive(Debug, Clone)]
pub(crate) enum Step {
    /// Assistant text.
    Text(String),
    /// A tool call writing `content` to `path` (pi `write`, Claude `Write`; for Codex, a shell command).
    Write { path: String, content: String },
    /// A tool call running a shell command (pi `bash`, Claude `Bash`, Codex `exec_command`).
    Run(String),
}

/// Tokens one model call reports.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Tokens {
    /// Input tokens not read from or written to the cache.
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
}

/// The answer to one model request.
#[derive(Debug, Clone)]
pub(crate) enum Reply {
    /// A streamed answer: its steps, in chunks of `delta` characters, then its usage.
    Answer {
        steps: Vec<Step>,
        tokens: Tokens,
        delta: usize,
    },
    /// An HTTP error with the provider's error body.
    Status(u16, String),
    /// A stream that starts and then fails (`response.failed`, an `error` event, an error chunk).
    Failed(String),
}

impl Reply {
    pub(crate) fn answer(steps: Vec<Step>, input: u64, output: u64) -> Reply {
        Reply::Answer {
            steps,
            tokens: Tokens {
                input,
                output,
                ..Tokens::default()
            },
            delta: 16,
        }
    }
}

/// A recorded request.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    pub method: String,
    pub path: String,
    pub body: String,
}

impl Request {
    /// Whether this is a model call (not a side request such as `HEAD /api/hello`).
    pub(crate) fn is_model_call(&self) -> bool {
        self.method == "POST"
            && (self.path.contains("/chat/completions")
                || self.path.contains("/responses")
                || (self.path.contains("/messages") && !self.path.contains("count_tokens")))
    }
}

pub(crate) struct FakeModel {
    pub url: String,
    requests: Arc<Mutex<Vec<Request>>>,
    script: Script,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeModel {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeModel {
    /// Serve `script` on a free port of 127.0.0.1.
    pub(crate) async fn start(script: Vec<Reply>) -> FakeModel {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let state = Arc::new(Mutex::new((script, 0usize)));
        let script = state.clone();
        let recorded = requests.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (recorded, state) = (recorded.clone(), state.clone());
                tokio::spawn(async move {
                    let _ = serve(stream, recorded, state).await;
                });
            }
        });
        FakeModel {
            url,
            requests,
            script,
            task,
        }
    }

    /// Replace the script (for scripts that name paths only known once the server runs).
    pub(crate) fn set_script(&self, script: Vec<Reply>) {
        *self.script.lock().unwrap() = (script, 0);
    }

    pub(crate) fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }

    pub(crate) fn model_calls(&self) -> Vec<Request> {
        self.requests()
            .into_iter()
            .filter(Request::is_model_call)
            .collect()
    }
}

type Script = Arc<Mutex<(Vec<Reply>, usize)>>;

async fn serve(
    mut stream: TcpStream,
    recorded: Arc<Mutex<Vec<Request>>>,
    script: Script,
) -> std::io::Result<()> {
    loop {
        let Some(req) = read_request(&mut stream).await? else {
            return Ok(());
        };
        recorded.lock().unwrap().push(req.clone());
        if !req.is_model_call() {
            let body = if req.path.contains("count_tokens") {
                r#"{"input_tokens":1}"#
            } else {
                "{}"
            };
            respond_json(&mut stream, 200, body).await?;
            continue;
        }
        let reply = {
            let mut s = script.lock().unwrap();
            let i = s.1;
            s.1 += 1;
            s.0.get(i).cloned()
        };
        let reply = reply.unwrap_or_else(|| {
            Reply::Status(400, "the scripted conversation has no more turns".into())
        });
        let model = serde_json::from_str::<Value>(&req.body)
            .ok()
            .and_then(|v| v["model"].as_str().map(str::to_string))
            .unwrap_or_else(|| "fake-model".into());
        let wire = Wire::of(&req.path);
        let streaming = serde_json::from_str::<Value>(&req.body)
            .ok()
            .is_some_and(|v| v["stream"] == true);
        match reply {
            Reply::Status(code, message) => {
                respond_json(&mut stream, code, &wire.error_body(code, &message)).await?;
            }
            // A non-streaming request (Claude Code retries a failed stream that way): the same
            // failure as an overloaded answer, or the answer as one JSON message.
            Reply::Failed(message) if !streaming => {
                respond_json(&mut stream, 529, &wire.error_body(529, &message)).await?;
            }
            reply @ Reply::Answer { .. } if !streaming && matches!(wire, Wire::Messages) => {
                let n = script.lock().unwrap().1;
                respond_json(
                    &mut stream,
                    200,
                    &message_json(&reply, &model, n).to_string(),
                )
                .await?;
            }
            reply => {
                stream
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n")
                    .await?;
                let n = script.lock().unwrap().1;
                for event in wire.events(&reply, &model, n) {
                    stream.write_all(event.as_bytes()).await?;
                }
                stream.flush().await?;
                return Ok(());
            }
        }
    }
}

async fn respond_json(stream: &mut TcpStream, code: u16, body: &str) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {code} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nx-request-id: req_fake\r\n\r\n",
        match code {
            200 => "OK",
            400 => "Bad Request",
            401 => "Unauthorized",
            429 => "Too Many Requests",
            500 => "Internal Server Error",
            _ => "Error",
        },
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.flush().await
}

/// Read one HTTP/1.1 request (content-length or chunked body). `None` when the peer closed.
async fn read_request(stream: &mut TcpStream) -> std::io::Result<Option<Request>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 64 * 1024];
    let head_end = loop {
        if let Some(i) = find(&buf, b"\r\n\r\n") {
            break i;
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut body = buf[head_end + 4..].to_vec();
    let mut lines = head.lines();
    let first = lines.next().unwrap_or("");
    let mut parts = first.split(' ');
    let method = parts.next().unwrap_or("").to_string();
    let path = parts.next().unwrap_or("").to_string();
    let header = |name: &str| {
        head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    };
    if let Some(len) = header("content-length").and_then(|v| v.parse::<usize>().ok()) {
        while body.len() < len {
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
        body.truncate(len);
    } else if header("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        while find(&body, b"0\r\n\r\n").is_none() {
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
        body = dechunk(&body);
    }
    Ok(Some(Request {
        method,
        path,
        body: String::from_utf8_lossy(&body).into_owned(),
    }))
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(i) = find(data, b"\r\n") {
        let size =
            usize::from_str_radix(String::from_utf8_lossy(&data[..i]).trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        let start = i + 2;
        out.extend_from_slice(&data[start..(start + size).min(data.len())]);
        data = &data[(start + size + 2).min(data.len())..];
    }
    out
}

/// Split `text` into pieces of `n` characters.
fn pieces(text: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return vec![String::new()];
    }
    chars.chunks(n.max(1)).map(|c| c.iter().collect()).collect()
}

fn sse(data: &Value) -> String {
    format!("data: {data}\n\n")
}

fn sse_named(name: &str, data: &Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// `printf` of `content` into `path`, for CLIs whose only tool is a shell.
fn shell_write(path: &str, content: &str) -> String {
    let q = |s: &str| format!("'{}'", s.replace('\'', "'\\''"));
    format!("printf '%s' {} > {}", q(content), q(path))
}

#[derive(Clone, Copy)]
enum Wire {
    ChatCompletions,
    Messages,
    Responses,
}

impl Wire {
    fn of(path: &str) -> Wire {
        if path.contains("/chat/completions") {
            Wire::ChatCompletions
        } else if path.contains("/responses") {
            Wire::Responses
        } else {
            Wire::Messages
        }
    }

    fn error_body(self, code: u16, message: &str) -> String {
        let kind = match code {
            400 => "invalid_request_error",
            401 => "authentication_error",
            429 => "rate_limit_error",
            529 => "overloaded_error",
            _ => "api_error",
        };
        match self {
            Wire::Messages => {
                json!({ "type": "error", "error": { "type": kind, "message": message } })
            }
            _ => json!({ "error": { "message": message, "type": kind, "code": kind } }),
        }
        .to_string()
    }

    fn events(self, reply: &Reply, model: &str, n: usize) -> Vec<String> {
        match self {
            Wire::ChatCompletions => chat_events(reply, model, n),
            Wire::Messages => messages_events(reply, model, n),
            Wire::Responses => responses_events(reply, model, n),
        }
    }
}

fn chat_events(reply: &Reply, model: &str, n: usize) -> Vec<String> {
    let id = format!("chatcmpl-{n}");
    let chunk = |delta: Value, finish: Value| {
        sse(
            &json!({ "id": id, "object": "chat.completion.chunk", "created": 0, "model": model,
                     "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }] }),
        )
    };
    let mut out = vec![chunk(
        json!({ "role": "assistant", "content": "" }),
        Value::Null,
    )];
    let (steps, tokens, delta) = match reply {
        Reply::Answer {
            steps,
            tokens,
            delta,
        } => (steps, *tokens, *delta),
        Reply::Failed(message) => {
            out.push(chunk(json!({ "content": "Working" }), Value::Null));
            out.push(sse(
                &json!({ "error": { "message": message, "type": "server_error", "code": "server_error" } }),
            ));
            return out;
        }
        Reply::Status(..) => unreachable!(),
    };
    let mut calls = 0;
    for step in steps {
        let (name, args) = match step {
            Step::Text(t) => {
                for p in pieces(t, delta) {
                    out.push(chunk(json!({ "content": p }), Value::Null));
                }
                continue;
            }
            Step::Write { path, content } => ("write", json!({ "path": path, "content": content })),
            Step::Run(command) => ("bash", json!({ "command": command })),
        };
        let index = calls;
        calls += 1;
        out.push(chunk(
            json!({ "tool_calls": [{ "index": index, "id": format!("call_{n}_{index}"), "type": "function",
                                     "function": { "name": name, "arguments": "" } }] }),
            Value::Null,
        ));
        for p in pieces(&args.to_string(), delta) {
            out.push(chunk(
                json!({ "tool_calls": [{ "index": index, "function": { "arguments": p } }] }),
                Value::Null,
            ));
        }
    }
    let finish = if calls > 0 { "tool_calls" } else { "stop" };
    out.push(chunk(json!({}), json!(finish)));
    let prompt = tokens.input + tokens.cache_read;
    out.push(sse(
        &json!({ "id": id, "object": "chat.completion.chunk", "created": 0, "model": model,
        "choices": [],
        "usage": { "prompt_tokens": prompt, "completion_tokens": tokens.output,
                   "total_tokens": prompt + tokens.output,
                   "prompt_tokens_details": { "cached_tokens": tokens.cache_read } } }),
    ));
    out.push("data: [DONE]\n\n".into());
    out
}

fn messages_events(reply: &Reply, model: &str, n: usize) -> Vec<String> {
    let id = format!("msg_{n}");
    let tokens = match reply {
        Reply::Answer { tokens, .. } => *tokens,
        _ => Tokens::default(),
    };
    let mut out = vec![sse_named(
        "message_start",
        &json!({ "type": "message_start", "message": { "id": id, "type": "message", "role": "assistant",
            "model": model, "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": { "input_tokens": tokens.input, "output_tokens": 1,
                       "cache_creation_input_tokens": tokens.cache_write,
                       "cache_read_input_tokens": tokens.cache_read } } }),
    )];
    let (steps, delta) = match reply {
        Reply::Answer { steps, delta, .. } => (steps, *delta),
        Reply::Failed(message) => {
            out.push(sse_named(
                "error",
                &json!({ "type": "error", "error": { "type": "overloaded_error", "message": message } }),
            ));
            return out;
        }
        Reply::Status(..) => unreachable!(),
    };
    let mut tools = 0;
    for (i, step) in steps.iter().enumerate() {
        let (start, deltas): (Value, Vec<Value>) = match step {
            Step::Text(t) => (
                json!({ "type": "text", "text": "" }),
                pieces(t, delta)
                    .into_iter()
                    .map(|p| json!({ "type": "text_delta", "text": p }))
                    .collect(),
            ),
            Step::Write { .. } | Step::Run(_) => {
                tools += 1;
                let (name, input) = match step {
                    Step::Write { path, content } => {
                        ("Write", json!({ "file_path": path, "content": content }))
                    }
                    Step::Run(command) => (
                        "Bash",
                        json!({ "command": command, "description": "Run a command" }),
                    ),
                    Step::Text(_) => unreachable!(),
                };
                (
                    json!({ "type": "tool_use", "id": format!("toolu_{n}_{i}"), "name": name, "input": {} }),
                    pieces(&input.to_string(), delta)
                        .into_iter()
                        .map(|p| json!({ "type": "input_json_delta", "partial_json": p }))
                        .collect(),
                )
            }
        };
        out.push(sse_named(
            "content_block_start",
            &json!({ "type": "content_block_start", "index": i, "content_block": start }),
        ));
        for d in deltas {
            out.push(sse_named(
                "content_block_delta",
                &json!({ "type": "content_block_delta", "index": i, "delta": d }),
            ));
        }
        out.push(sse_named(
            "content_block_stop",
            &json!({ "type": "content_block_stop", "index": i }),
        ));
    }
    let stop = if tools > 0 { "tool_use" } else { "end_turn" };
    out.push(sse_named(
        "message_delta",
        &json!({ "type": "message_delta", "delta": { "stop_reason": stop, "stop_sequence": null },
                 "usage": { "output_tokens": tokens.output } }),
    ));
    out.push(sse_named(
        "message_stop",
        &json!({ "type": "message_stop" }),
    ));
    out
}

/// A whole Anthropic message, for non-streaming requests.
fn message_json(reply: &Reply, model: &str, n: usize) -> Value {
    let Reply::Answer { steps, tokens, .. } = reply else {
        return json!({});
    };
    let mut tools = 0;
    let content: Vec<Value> = steps
        .iter()
        .enumerate()
        .map(|(i, step)| match step {
            Step::Text(t) => json!({ "type": "text", "text": t }),
            Step::Write { path, content } => {
                tools += 1;
                json!({ "type": "tool_use", "id": format!("toolu_{n}_{i}"), "name": "Write",
                        "input": { "file_path": path, "content": content } })
            }
            Step::Run(command) => {
                tools += 1;
                json!({ "type": "tool_use", "id": format!("toolu_{n}_{i}"), "name": "Bash",
                        "input": { "command": command, "description": "Run a command" } })
            }
        })
        .collect();
    json!({ "id": format!("msg_{n}"), "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": if tools > 0 { "tool_use" } else { "end_turn" },
            "stop_sequence": null,
            "usage": { "input_tokens": tokens.input, "output_tokens": tokens.output,
                       "cache_creation_input_tokens": tokens.cache_write,
                       "cache_read_input_tokens": tokens.cache_read } })
}

fn responses_events(reply: &Reply, model: &str, n: usize) -> Vec<String> {
    let id = format!("resp_{n}");
    let ev = |v: Value| sse_named(v["type"].as_str().unwrap_or("message"), &v);
    let mut out = vec![ev(json!({ "type": "response.created",
        "response": { "id": id, "object": "response", "status": "in_progress", "model": model, "output": [] } }))];
    let (steps, tokens, delta) = match reply {
        Reply::Answer {
            steps,
            tokens,
            delta,
        } => (steps, *tokens, *delta),
        Reply::Failed(message) => {
            out.push(ev(json!({ "type": "response.failed",
                "response": { "id": id, "object": "response", "status": "failed", "model": model, "output": [],
                              "error": { "code": "server_error", "message": message } } })));
            return out;
        }
        Reply::Status(..) => unreachable!(),
    };
    let mut items = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        let item = match step {
            Step::Text(t) => {
                let item_id = format!("msg_{n}_{i}");
                out.push(ev(json!({ "type": "response.output_item.added", "output_index": i,
                    "item": { "type": "message", "id": item_id, "role": "assistant", "status": "in_progress", "content": [] } })));
                for p in pieces(t, delta) {
                    out.push(ev(
                        json!({ "type": "response.output_text.delta", "output_index": i,
                        "content_index": 0, "item_id": item_id, "delta": p }),
                    ));
                }
                json!({ "type": "message", "id": item_id, "role": "assistant", "status": "completed",
                        "content": [{ "type": "output_text", "text": t, "annotations": [] }] })
            }
            Step::Write { .. } | Step::Run(_) => {
                let cmd = match step {
                    Step::Write { path, content } => shell_write(path, content),
                    Step::Run(c) => c.clone(),
                    Step::Text(_) => unreachable!(),
                };
                let args = json!({ "cmd": cmd }).to_string();
                let item_id = format!("fc_{n}_{i}");
                out.push(ev(json!({ "type": "response.output_item.added", "output_index": i,
                    "item": { "type": "function_call", "id": item_id, "call_id": format!("call_{n}_{i}"),
                              "name": "exec_command", "arguments": "", "status": "in_progress" } })));
                for p in pieces(&args, delta) {
                    out.push(ev(
                        json!({ "type": "response.function_call_arguments.delta",
                        "output_index": i, "item_id": item_id, "delta": p }),
                    ));
                }
                json!({ "type": "function_call", "id": item_id, "call_id": format!("call_{n}_{i}"),
                        "name": "exec_command", "arguments": args, "status": "completed" })
            }
        };
        out.push(ev(
            json!({ "type": "response.output_item.done", "output_index": i, "item": item }),
        ));
        items.push(item);
    }
    let input = tokens.input + tokens.cache_read + tokens.cache_write;
    out.push(ev(json!({ "type": "response.completed",
        "response": { "id": id, "object": "response", "status": "completed", "model": model, "output": items,
            "usage": { "input_tokens": input,
                       "input_tokens_details": { "cached_tokens": tokens.cache_read, "cache_write_tokens": tokens.cache_write },
                       "output_tokens": tokens.output, "output_tokens_details": { "reasoning_tokens": 0 },
                       "total_tokens": input + tokens.output } } })));
    out
}
