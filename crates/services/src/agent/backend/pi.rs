//! pi (`@mariozechner/pi-coding-agent`): `pi -p --mode json`, JSON events one a line.
//!
//! Read: `message_end` of an assistant message carries that call's usage, its text and its
//! `stopReason` (`stop`, `length`, `toolUse`, `error`, `aborted`); `tool_execution_start` is one tool
//! call. pi exits 0 even when the provider failed, so a last assistant message with
//! `stopReason:"error"` makes the run fail. `message_update` (token deltas, each repeating the whole
//! partial message, so quadratic in the message's size) and `tool_execution_update` are skipped
//! unread and left out of the transcript; `turn_end` and `agent_end`, which repeat messages already
//! written, are shortened there.
//!
//! The task goes on stdin: pi reads piped stdin as the prompt (and waits for its end).

use serde::Deserialize;
use serde_json::{Value, json};

use super::{AgentCli, Guard, Invocation, Launch};
use crate::agent::run::{Limits, Usage};
use crate::agent::stream::{
    SkipProbe, StreamParser, Tally, TranscriptLine, event_kind, event_type, parse_event,
};

pub(super) struct Pi;

/// The pi extension that enforces a dispatch's tool-call cap and token budget before a tool runs.
pub const LIMITS_EXTENSION: &str = include_str!("../../../../../config/pi-limits.ts");
/// How the limits extension's refusal of a tool call begins (the call's result text).
pub const REFUSAL: &str = "supervisor refused this tool call:";
/// The variables that give the limits extension its limits (0: none).
const TOOL_CALLS_VAR: &str = "SUPERVISOR_LIMIT_TOOL_CALLS";
const TOKENS_VAR: &str = "SUPERVISOR_LIMIT_TOKENS";

impl AgentCli for Pi {
    fn launch(&self, inv: &Invocation<'_>) -> Launch {
        let role = inv.role;
        let mut args: Vec<String> = ["-p", "--mode", "json", "--no-session"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let mut opt = |flag: &str, value: &str| {
            args.push(flag.to_string());
            args.push(value.to_string());
        };
        if let Some(p) = &role.provider {
            opt("--provider", p);
        }
        if let Some(m) = &role.model {
            opt("--model", m);
        }
        if let Some(t) = &role.thinking {
            opt("--thinking", t);
        }
        if !role.tools.is_empty() {
            opt("--tools", &role.tools.join(","));
        }
        for e in &role.extensions {
            opt("--extension", e);
        }
        for s in &role.skills {
            opt("--skill", s);
        }
        opt("--append-system-prompt", inv.system_prompt);
        let mut launch = Launch::new("pi", args).with_stdin(inv.task);
        launch.model = role.model.clone();
        launch
    }

    fn parser(&self) -> Box<dyn StreamParser> {
        Box::new(PiStream)
    }

    /// The limits extension, in a private directory, loaded with `--extension`.
    fn guard(&self, launch: &mut Launch, limits: &Limits) -> Result<Option<Guard>, String> {
        if limits.max_tool_calls == 0 && limits.token_budget == 0 {
            return Ok(None);
        }
        let guard = Guard::new("pi's limits extension")?;
        let file = guard.file("supervisor-limits.ts", LIMITS_EXTENSION)?;
        launch
            .args
            .extend(["--extension".to_string(), file.display().to_string()]);
        launch.env.extend([
            (TOOL_CALLS_VAR.into(), limits.max_tool_calls.to_string()),
            (TOKENS_VAR.into(), limits.token_budget.to_string()),
        ]);
        Ok(Some(guard))
    }
}

/// Reads pi's JSON event stream.
#[derive(Debug, Default)]
pub struct PiStream;

#[derive(Deserialize)]
struct MessageEvent {
    message: Message,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Message {
    role: Option<String>,
    #[serde(default)]
    content: Value,
    #[serde(default)]
    usage: Option<PiUsage>,
    stop_reason: Option<String>,
    error_message: Option<String>,
    model: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct PiUsage {
    input: u64,
    output: u64,
    cache_read: u64,
    cache_write: u64,
    total_tokens: u64,
    cost: Option<PiCost>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct PiCost {
    total: f64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ToolEnd {
    #[serde(default)]
    is_error: bool,
    #[serde(default)]
    result: Value,
}

impl ToolEnd {
    /// Whether the limits extension refused this call before it ran.
    fn refused(&self) -> bool {
        self.is_error && text_blocks(&self.result["content"]).starts_with(REFUSAL)
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RetryEnd {
    success: bool,
    final_error: Option<String>,
}

/// Partial updates: every one repeats the message (or tool output) so far.
fn partial_update(head: &[u8]) -> bool {
    head.starts_with(br#"{"type":"message_update""#)
        || head.starts_with(br#"{"type":"tool_execution_update""#)
}

impl StreamParser for PiStream {
    fn skip_probe(&self) -> Option<SkipProbe> {
        Some(partial_update)
    }

    fn transcript(&self, line: &str) -> TranscriptLine {
        if partial_update(line.as_bytes()) {
            return TranscriptLine::Drop;
        }
        match event_type(line).as_deref() {
            Some("message_update") | Some("tool_execution_update") => TranscriptLine::Drop,
            Some("turn_end") if line.len() > 512 => TranscriptLine::Replace(
                json!({ "type": "turn_end", "note": "message and toolResults left out: the message_end and tool_execution_end lines above hold them" })
                    .to_string(),
            ),
            Some("agent_end") if line.len() > 512 => TranscriptLine::Replace(
                json!({ "type": "agent_end", "note": "messages left out: the message_end lines above hold them" })
                    .to_string(),
            ),
            Some("message_start") if line.len() > 4096 => TranscriptLine::Replace(
                json!({ "type": "message_start", "note": "message left out: its message_end follows" })
                    .to_string(),
            ),
            _ => TranscriptLine::Keep,
        }
    }

    fn line(&mut self, line: &str, tally: &mut Tally) {
        let Some(kind) = event_kind(line, tally) else {
            return;
        };
        match kind.as_ref() {
            "tool_execution_start" => {
                let name = serde_json::from_str::<Value>(line)
                    .ok()
                    .and_then(|v| v.get("toolName")?.as_str().map(str::to_string));
                tally.saw_tool(name.as_deref());
            }
            "tool_execution_end" => {
                // Parsed only when it may be a refusal: tool results can be large.
                let refused = line.contains(REFUSAL)
                    && serde_json::from_str::<ToolEnd>(line).is_ok_and(|end| end.refused());
                if refused {
                    tally.refused_tool();
                }
            }
            "message_end" => {
                if let Some(ev) = parse_event::<MessageEvent>(line, tally) {
                    assistant_message(ev.message, tally);
                }
            }
            "auto_retry_end" => {
                if let Ok(end) = serde_json::from_str::<RetryEnd>(line) {
                    if !end.success {
                        tally.error = Some(
                            end.final_error
                                .unwrap_or_else(|| "the provider kept failing".into()),
                        );
                    }
                }
            }
            _ => {}
        }
    }

    fn end(&mut self, tally: &mut Tally, success: bool) {
        if success && tally.final_text.is_none() && tally.error.is_none() {
            // Stopped without a final message (e.g. `length` on the last call): keep what was said.
            if tally.last_text.is_empty() {
                tally.error = Some("pi ended without an assistant answer".into());
            }
        }
    }
}

fn assistant_message(m: Message, tally: &mut Tally) {
    if m.role.as_deref() != Some("assistant") {
        return;
    }
    if let Some(u) = m.usage {
        let mut call = Usage {
            input: u.input,
            output: u.output,
            cache_read: u.cache_read,
            cache_write: u.cache_write,
            total: u.total_tokens,
            cost_usd: u.cost.map(|c| c.total).unwrap_or(0.0),
            cost_estimated: false,
        };
        if call.total == 0 {
            call = call.with_computed_total();
        }
        tally.usage.add(&call);
    }
    if let Some(model) = m.model {
        tally.model = Some(model);
    }
    let text = text_blocks(&m.content);
    tally.saw_text(&text);
    match m.stop_reason.as_deref() {
        Some("error") | Some("aborted") => {
            tally.error = Some(
                m.error_message
                    .unwrap_or_else(|| "the provider reported an error".into()),
            );
        }
        Some("stop") | Some("length") => {
            tally.error = None;
            tally.final_text = Some(text);
        }
        _ => tally.error = None,
    }
}

/// The text blocks of a message's content, joined.
fn text_blocks(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => {
            let mut out = String::new();
            for b in blocks {
                if b.get("type").and_then(Value::as_str) == Some("text") {
                    if let Some(t) = b.get("text").and_then(Value::as_str) {
                        if !out.is_empty() {
                            out.push('\n');
                        }
                        out.push_str(t);
                    }
                }
            }
            out
        }
        _ => String::new(),
    }
}

/// Writes pi-format JSON event lines (the scripted backend speaks pi's format so that one parser
/// serves both).
#[derive(Debug, Default)]
pub struct PiEvents {
    seq: u64,
}

impl PiEvents {
    pub(crate) fn session(&self, cwd: &str) -> String {
        json!({ "type": "session", "version": 3, "id": "scripted", "cwd": cwd }).to_string()
    }

    pub(crate) fn agent_start(&self) -> String {
        json!({ "type": "agent_start" }).to_string()
    }

    pub(crate) fn agent_end(&self) -> String {
        json!({ "type": "agent_end", "messages": [] }).to_string()
    }

    /// An assistant `message_end` with its usage and stop reason.
    pub(crate) fn assistant(
        &self,
        text: &str,
        input: u64,
        output: u64,
        stop_reason: &str,
        error: Option<&str>,
    ) -> String {
        let content = if text.is_empty() {
            json!([])
        } else {
            json!([{ "type": "text", "text": text }])
        };
        let mut message = json!({
            "role": "assistant",
            "content": content,
            "api": "scripted",
            "provider": "scripted",
            "model": "scripted",
            "usage": {
                "input": input, "output": output, "cacheRead": 0, "cacheWrite": 0,
                "totalTokens": input + output,
                "cost": { "input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0 }
            },
            "stopReason": stop_reason,
        });
        if let Some(e) = error {
            message["errorMessage"] = json!(e);
        }
        json!({ "type": "message_end", "message": message }).to_string()
    }

    /// The id the next [`tool`](Self::tool) call will carry.
    pub(crate) fn next_call_id(&self) -> String {
        format!("scripted_{}", self.seq + 1)
    }

    /// `tool_execution_start` and `tool_execution_end` of one tool call.
    pub(crate) fn tool(
        &mut self,
        name: &str,
        args: Value,
        result: &str,
        is_error: bool,
    ) -> [String; 2] {
        self.seq += 1;
        let id = format!("scripted_{}", self.seq);
        [
            json!({ "type": "tool_execution_start", "toolCallId": id, "toolName": name, "args": args })
                .to_string(),
            json!({
                "type": "tool_execution_end", "toolCallId": id, "toolName": name,
                "result": { "content": [{ "type": "text", "text": result }] }, "isError": is_error
            })
            .to_string(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::stream::feed;

    fn tally_of(lines: &[String]) -> Tally {
        let mut p = PiStream;
        let mut t = Tally::default();
        for l in lines {
            feed(&mut p, &mut t, l.as_bytes(), false);
        }
        p.end(&mut t, true);
        t
    }

    #[test]
    fn a_call_the_limits_extension_refused_is_not_counted() {
        let mut ev = PiEvents::default();
        let mut lines = Vec::new();
        lines.extend(ev.tool("bash", json!({}), "ran", false));
        let refusal =
            format!("{REFUSAL} the tool-call cap is reached (1 calls ran, cap 1); stop now.");
        lines.extend(ev.tool("bash", json!({}), &refusal, true));
        let t = tally_of(&lines);
        assert_eq!(t.tool_calls, 1, "the refused call did not run");
        assert!(t.refused);
        // The same words as a command's own failing output are no refusal.
        let mut ev = PiEvents::default();
        let t = tally_of(&ev.tool("bash", json!({}), &refusal, false));
        assert_eq!((t.tool_calls, t.refused), (1, false));
    }

    #[test]
    fn the_limits_extension_speaks_as_the_stream_reads_it() {
        assert!(LIMITS_EXTENSION.contains(&format!("const REFUSAL = \"{REFUSAL}\";")));
        for var in [TOOL_CALLS_VAR, TOKENS_VAR] {
            assert!(
                LIMITS_EXTENSION.contains(&format!("limit(\"{var}\")")),
                "{var}"
            );
        }
        let role = super::super::test_role("tools: [bash]");
        let inv = Invocation {
            role: &role,
            system_prompt: "Role.",
            task: "t",
            attempt: 1,
            revision: false,
            subject: None,
            env: &[],
        };
        let mut launch = Pi.launch(&inv);
        let limits = Limits {
            max_tool_calls: 3,
            ..Limits::default()
        };
        let guard = Pi.guard(&mut launch, &limits).unwrap().expect("a guard");
        let at = launch.args.iter().position(|a| a == "--extension").unwrap();
        let file = std::path::Path::new(&launch.args[at + 1]);
        assert!(file.starts_with(guard.dir()));
        assert_eq!(std::fs::read_to_string(file).unwrap(), LIMITS_EXTENSION);
        assert!(launch.env.contains(&(TOOL_CALLS_VAR.into(), "3".into())));
        assert!(launch.env.contains(&(TOKENS_VAR.into(), "0".into())));
        let dir = guard.dir().to_path_buf();
        drop(guard);
        assert!(!dir.exists(), "the private directory goes with the run");
        // No limits, no extension.
        let mut plain = Pi.launch(&inv);
        assert!(Pi.guard(&mut plain, &Limits::default()).unwrap().is_none());
        assert!(!plain.args.iter().any(|a| a == "--extension"));
    }

    #[test]
    fn usage_is_summed_over_calls_not_overwritten() {
        let ev = PiEvents::default();
        let t = tally_of(&[
            ev.assistant("thinking", 100, 10, "toolUse", None),
            ev.assistant("done", 200, 20, "stop", None),
        ]);
        assert_eq!(t.usage.total, 330);
        assert_eq!((t.usage.input, t.usage.output), (300, 30));
        assert_eq!(t.final_text.as_deref(), Some("done"));
        assert!(t.error.is_none());
    }

    #[test]
    fn an_error_stop_fails_and_a_later_success_clears_it() {
        let ev = PiEvents::default();
        let t = tally_of(&[ev.assistant("", 0, 0, "error", Some("429 rate limited"))]);
        assert_eq!(t.error.as_deref(), Some("429 rate limited"));
        let t = tally_of(&[
            ev.assistant("", 0, 0, "error", Some("overloaded")),
            ev.assistant("ok", 1, 1, "stop", None),
        ]);
        assert!(t.error.is_none());
    }

    #[test]
    fn partial_updates_are_left_out_of_the_transcript_and_repeats_shortened() {
        let p = PiStream;
        let update = r#"{"type":"message_update","assistantMessageEvent":{"type":"text_delta"}}"#;
        assert_eq!(p.transcript(update), TranscriptLine::Drop);
        assert!(p.skip_probe().unwrap()(update.as_bytes()));
        let end = format!(
            r#"{{"type":"turn_end","message":{{"content":"{}"}},"toolResults":[]}}"#,
            "x".repeat(600)
        );
        match p.transcript(&end) {
            TranscriptLine::Replace(s) => assert!(s.len() < 200 && s.contains("turn_end")),
            other => panic!("{other:?}"),
        }
        let ev = PiEvents::default();
        let message_end = ev.assistant("done", 1, 1, "stop", None);
        assert_eq!(p.transcript(&message_end), TranscriptLine::Keep);
        assert_eq!(
            p.transcript(r#"{"type":"tool_execution_start","toolName":"write"}"#),
            TranscriptLine::Keep
        );
    }

    proptest::proptest! {
        #[test]
        fn never_panics(line in ".{0,300}") {
            let mut p = PiStream;
            let mut t = Tally::default();
            p.line(&line, &mut t);
            p.line(&format!("{{\"type\":\"message_end\",\"message\":{line}}}"), &mut t);
        }
    }
}
