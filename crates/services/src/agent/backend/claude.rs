//! Claude Code: `claude -p --output-format stream-json --verbose --include-partial-messages`.
//!
//! Read: `system/init` names the model; with partial messages, each API message streams as
//! `stream_event`s: `message_start` carries its input and cache usage, `message_delta` its output
//! tokens so far, so budgets see a call's tokens while it runs (the `assistant` events alone report
//! output = 1 until the end). Each `assistant` event holds one content block of an API message
//! (several share a message id and usage); `tool_use` blocks are tool calls. Usage is kept per
//! message id, field by field the largest seen, and summed over messages; the closing `result`
//! event carries the answer, `is_error`, the whole run's usage and its cost, and replaces the sum.
//! Token deltas (`content_block_delta`) are left out of the transcript: the `assistant` events
//! repeat their text.
//!
//! The task goes on stdin (`claude -p` reads its prompt there when no argument gives one).

use serde::Deserialize;
use serde_json::Value;

use super::models::claude_model;
use super::{AgentCli, Invocation, Launch};
use crate::agent::run::Usage;
use crate::agent::stream::{StreamParser, Tally, TranscriptLine, event_kind, parse_event};

pub(super) struct Claude;

/// pi's tool names, as role files list them, to Claude Code's (`ls` has no tool of its own any more:
/// `Glob` lists directories).
fn tool_name(tool: &str) -> String {
    match tool {
        "read" => "Read".into(),
        "bash" => "Bash".into(),
        "edit" => "Edit".into(),
        "write" => "Write".into(),
        "grep" => "Grep".into(),
        "find" | "ls" => "Glob".into(),
        other => other.to_string(),
    }
}

/// Claude Code's tools that change files, denied to read-only roles.
const WRITE_TOOLS: &str = "Write,Edit,NotebookEdit";

/// A role's `thinking` as Claude Code's `--effort` (which has no lower level than `low`).
fn effort(thinking: &str) -> Option<&'static str> {
    Some(match thinking {
        "off" | "minimal" | "low" => "low",
        "medium" => "medium",
        "high" => "high",
        "xhigh" => "xhigh",
        _ => return None,
    })
}

impl AgentCli for Claude {
    fn launch(&self, inv: &Invocation<'_>) -> Launch {
        let role = inv.role;
        let mut args: Vec<String> = [
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--include-partial-messages",
            "--no-session-persistence",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let model = claude_model(role);
        if let Some(m) = &model {
            args.extend(["--model".into(), m.clone()]);
        }
        if let Some(e) = role.thinking.as_deref().and_then(effort) {
            args.extend(["--effort".into(), e.into()]);
        }
        if !role.tools.is_empty() {
            let mut tools: Vec<String> = Vec::new();
            for t in &role.tools {
                let name = tool_name(t);
                if !tools.contains(&name) {
                    tools.push(name);
                }
            }
            let tools = tools.join(",");
            // `--tools` limits what exists; `--allowedTools` lets them run without a prompt.
            args.extend([
                "--tools".into(),
                tools.clone(),
                "--allowedTools".into(),
                tools,
            ]);
        }
        if role.read_only {
            args.extend(["--disallowedTools".into(), WRITE_TOOLS.into()]);
        }
        args.extend([
            "--append-system-prompt".into(),
            inv.system_prompt.to_string(),
        ]);
        let mut launch = Launch::new("claude", args).with_stdin(inv.task);
        if role.thinking.as_deref() == Some("off") {
            launch.env.push(("MAX_THINKING_TOKENS".into(), "0".into()));
        }
        launch.model = model;
        launch
    }

    fn parser(&self) -> Box<dyn StreamParser> {
        Box::new(ClaudeStream::default())
    }
}

/// Reads Claude Code's stream-json output.
#[derive(Debug, Default)]
pub struct ClaudeStream {
    /// Usage of the API messages already finished.
    done: Usage,
    /// The message being streamed and its usage so far.
    current: Option<(String, Usage)>,
    saw_result: bool,
}

/// A usage object; absent fields stay absent (a `message_delta` may carry only `output_tokens`).
#[derive(Deserialize, Default, Clone, Copy)]
#[serde(default)]
struct ClaudeUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
}

impl ClaudeUsage {
    fn normalised(&self) -> Usage {
        Usage {
            input: self.input_tokens.unwrap_or(0),
            output: self.output_tokens.unwrap_or(0),
            cache_read: self.cache_read_input_tokens.unwrap_or(0),
            cache_write: self.cache_creation_input_tokens.unwrap_or(0),
            ..Usage::default()
        }
        .with_computed_total()
    }

    /// Fold this snapshot into `u`: each field the largest seen (snapshots of one message only grow).
    fn merge_into(&self, u: &mut Usage) {
        let n = self.normalised();
        u.input = u.input.max(n.input);
        u.output = u.output.max(n.output);
        u.cache_read = u.cache_read.max(n.cache_read);
        u.cache_write = u.cache_write.max(n.cache_write);
        *u = u.with_computed_total();
    }
}

#[derive(Deserialize)]
struct StreamEvent {
    event: StreamInner,
    api_message_id: Option<String>,
}

#[derive(Deserialize)]
struct StreamInner {
    #[serde(rename = "type")]
    kind: String,
    message: Option<StreamMessage>,
    usage: Option<ClaudeUsage>,
}

#[derive(Deserialize)]
struct StreamMessage {
    id: Option<String>,
    model: Option<String>,
    usage: Option<ClaudeUsage>,
}

#[derive(Deserialize)]
struct AssistantEvent {
    message: AssistantMessage,
}

#[derive(Deserialize)]
struct AssistantMessage {
    id: Option<String>,
    model: Option<String>,
    #[serde(default)]
    content: Vec<Value>,
    usage: Option<ClaudeUsage>,
}

#[derive(Deserialize)]
struct ResultEvent {
    subtype: Option<String>,
    #[serde(default)]
    is_error: bool,
    result: Option<String>,
    usage: Option<ClaudeUsage>,
    total_cost_usd: Option<f64>,
    #[serde(default)]
    errors: Vec<Value>,
}

#[derive(Deserialize)]
struct InitEvent {
    subtype: Option<String>,
    model: Option<String>,
}

impl ClaudeStream {
    fn assistant(&mut self, ev: AssistantEvent, tally: &mut Tally) {
        let m = ev.message;
        if let Some(model) = m.model.filter(|m| !m.starts_with('<')) {
            tally.model = Some(model);
        }
        let mut text = String::new();
        for block in &m.content {
            match block.get("type").and_then(Value::as_str) {
                Some("tool_use") => {
                    tally.saw_tool(block.get("name").and_then(Value::as_str));
                }
                Some("text") => {
                    if let Some(t) = block.get("text").and_then(Value::as_str) {
                        text.push_str(t);
                    }
                }
                _ => {}
            }
        }
        tally.saw_text(&text);
        if let Some(u) = m.usage {
            self.usage(m.id.unwrap_or_default(), u, tally);
        }
    }

    /// A usage snapshot of API message `id`.
    fn usage(&mut self, id: String, u: ClaudeUsage, tally: &mut Tally) {
        match &mut self.current {
            Some((cur, usage)) if *cur == id => u.merge_into(usage),
            _ => {
                if let Some((_, prev)) = self.current.take() {
                    self.done.add(&prev);
                }
                let mut usage = Usage::default();
                u.merge_into(&mut usage);
                self.current = Some((id, usage));
            }
        }
        let mut running = self.done;
        if let Some((_, cur)) = &self.current {
            running.add(cur);
        }
        running.cost_usd = tally.usage.cost_usd;
        tally.usage = running;
    }

    fn stream_event(&mut self, ev: StreamEvent, tally: &mut Tally) {
        match ev.event.kind.as_str() {
            "message_start" => {
                let Some(m) = ev.event.message else { return };
                if let Some(model) = m.model.filter(|m| !m.starts_with('<')) {
                    tally.model = Some(model);
                }
                let id = m.id.or(ev.api_message_id).unwrap_or_default();
                if let Some(u) = m.usage {
                    self.usage(id, u, tally);
                }
            }
            "message_delta" => {
                let id = ev
                    .api_message_id
                    .or_else(|| self.current.as_ref().map(|(id, _)| id.clone()))
                    .unwrap_or_default();
                if let Some(u) = ev.event.usage {
                    self.usage(id, u, tally);
                }
            }
            _ => {}
        }
    }

    fn result(&mut self, ev: ResultEvent, tally: &mut Tally) {
        self.saw_result = true;
        if let Some(u) = ev
            .usage
            .filter(|u| u.normalised().total > 0 || tally.usage.total == 0)
        {
            let mut total = u.normalised();
            total.cost_usd = ev.total_cost_usd.unwrap_or(0.0);
            tally.usage = total;
        } else if let Some(cost) = ev.total_cost_usd {
            tally.usage.cost_usd = cost;
        }
        let text = ev.result.unwrap_or_default();
        let subtype = ev.subtype.unwrap_or_default();
        if ev.is_error || (subtype != "success" && !subtype.is_empty()) {
            let detail = if !text.trim().is_empty() {
                text.clone()
            } else if let Some(e) = ev.errors.first() {
                e.as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| e.to_string())
            } else {
                format!("Claude Code reported `{subtype}`")
            };
            tally.error = Some(detail);
            tally.saw_text(&text);
        } else {
            tally.error = None;
            tally.saw_text(&text);
            tally.final_text = Some(text);
        }
    }
}

/// A token delta: `{"type":"stream_event","event":{"type":"content_block_delta"…`.
fn token_delta(line: &str) -> bool {
    line.starts_with(r#"{"type":"stream_event","event":{"type":"content_block_delta""#)
}

impl StreamParser for ClaudeStream {
    fn transcript(&self, line: &str) -> TranscriptLine {
        if token_delta(line) {
            TranscriptLine::Drop
        } else {
            TranscriptLine::Keep
        }
    }

    fn line(&mut self, line: &str, tally: &mut Tally) {
        if token_delta(line) {
            return;
        }
        let Some(kind) = event_kind(line, tally) else {
            return;
        };
        match kind.as_ref() {
            "stream_event" => {
                if let Some(ev) = parse_event::<StreamEvent>(line, tally) {
                    self.stream_event(ev, tally);
                }
            }
            "assistant" => {
                if let Some(ev) = parse_event::<AssistantEvent>(line, tally) {
                    self.assistant(ev, tally);
                }
            }
            "result" => {
                if let Some(ev) = parse_event::<ResultEvent>(line, tally) {
                    self.result(ev, tally);
                }
            }
            "system" => {
                if let Ok(init) = serde_json::from_str::<InitEvent>(line) {
                    if init.subtype.as_deref() == Some("init") && init.model.is_some() {
                        tally.model = init.model;
                    }
                }
            }
            _ => {}
        }
    }

    fn end(&mut self, tally: &mut Tally, success: bool) {
        if !self.saw_result && success && tally.error.is_none() {
            tally.error = Some("Claude Code ended without a result event".into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(frontmatter: &str) -> Launch {
        super::super::test_launch(&Claude, frontmatter, &[])
    }

    fn after<'a>(l: &'a Launch, flag: &str) -> Option<&'a str> {
        let i = l.args.iter().position(|a| a == flag)?;
        l.args.get(i + 1).map(String::as_str)
    }

    #[test]
    fn models_effort_and_tools_as_claude_code_takes_them() {
        let l = launch(
            "model: anthropic/claude-sonnet-4-5\nthinking: off\ntools: [read, bash, find, ls]\nreadOnly: true",
        );
        assert_eq!(after(&l, "--model"), Some("claude-sonnet-4-5"));
        assert_eq!(l.model.as_deref(), Some("claude-sonnet-4-5"));
        assert_eq!(after(&l, "--effort"), Some("low"));
        assert!(l.env.contains(&("MAX_THINKING_TOKENS".into(), "0".into())));
        assert_eq!(
            after(&l, "--tools"),
            Some("Read,Bash,Glob"),
            "no removed LS tool"
        );
        assert_eq!(after(&l, "--disallowedTools"), Some(WRITE_TOOLS));
        assert_eq!(l.stdin.as_deref(), Some("the task"));
        assert!(!l.args.iter().any(|a| a == "the task"));

        let l = launch("thinking: xhigh\ntools: [read, write, edit]");
        assert_eq!(after(&l, "--effort"), Some("xhigh"));
        assert!(l.env.is_empty());
        assert_eq!(after(&l, "--disallowedTools"), None);
        assert_eq!(after(&l, "--tools"), Some("Read,Write,Edit"));
        let l = launch("thinking: medium");
        assert_eq!(after(&l, "--effort"), Some("medium"));
        assert_eq!(after(&l, "--model"), None);
    }

    #[test]
    fn message_delta_usage_counts_before_the_result() {
        let mut p = ClaudeStream::default();
        let mut t = Tally::default();
        p.line(r#"{"type":"stream_event","event":{"type":"message_start","message":{"id":"m1","model":"claude-x","usage":{"input_tokens":500,"output_tokens":1,"cache_read_input_tokens":100}}}}"#, &mut t);
        assert_eq!(t.usage.total, 601);
        p.line(r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","name":"Bash"}],"usage":{"input_tokens":500,"output_tokens":1,"cache_read_input_tokens":100}}}"#, &mut t);
        p.line(r#"{"type":"stream_event","event":{"type":"message_delta","usage":{"output_tokens":7000}},"api_message_id":"m1"}"#, &mut t);
        assert_eq!(t.usage.total, 7600);
        p.line(r#"{"type":"stream_event","event":{"type":"message_start","message":{"id":"m2","usage":{"input_tokens":800,"output_tokens":1}}}}"#, &mut t);
        assert_eq!(t.usage.total, 8401);
        assert_eq!(t.tool_calls, 1);
        assert_eq!(t.tool.as_deref(), Some("Bash"), "the tool at work");
        assert_eq!(t.model.as_deref(), Some("claude-x"));
    }
}
