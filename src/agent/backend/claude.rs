//! Claude Code: `claude -p --output-format stream-json --verbose`.
//!
//! Read: `system/init` names the model; each `assistant` event holds one content block of an API
//! message (several events share a message id and repeat its usage snapshot, so usage is counted once
//! per message id, the latest snapshot winning); `tool_use` blocks are tool calls; the closing `result`
//! event carries the answer, `is_error`, the whole run's usage and its cost, and replaces the running
//! sum.

use serde::Deserialize;
use serde_json::Value;

use super::{AgentCli, Invocation, Launch};
use crate::agent::run::Usage;
use crate::agent::stream::{StreamParser, Tally, event_kind, parse_event};

pub(super) struct Claude;

/// pi's tool names, as role files list them, to Claude Code's.
fn tool_name(tool: &str) -> String {
    match tool {
        "read" => "Read".into(),
        "bash" => "Bash".into(),
        "edit" => "Edit".into(),
        "write" => "Write".into(),
        "grep" => "Grep".into(),
        "find" => "Glob".into(),
        "ls" => "LS".into(),
        other => other.to_string(),
    }
}

impl AgentCli for Claude {
    fn launch(&self, inv: &Invocation<'_>) -> Launch {
        let role = inv.role;
        let mut args: Vec<String> = [
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--no-session-persistence",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        if let Some(m) = &role.model {
            args.extend(["--model".into(), m.clone()]);
        }
        if !role.tools.is_empty() {
            let tools: Vec<String> = role.tools.iter().map(|t| tool_name(t)).collect();
            let tools = tools.join(",");
            // `--tools` limits what exists; `--allowedTools` lets them run without a prompt.
            args.extend([
                "--tools".into(),
                tools.clone(),
                "--allowedTools".into(),
                tools,
            ]);
        }
        args.extend([
            "--append-system-prompt".into(),
            inv.system_prompt.to_string(),
            "--".into(),
            inv.task.to_string(),
        ]);
        Launch::new("claude", args)
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
    /// The message being streamed and its latest usage snapshot.
    current: Option<(String, Usage)>,
    saw_result: bool,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ClaudeUsage {
    input_tokens: u64,
    output_tokens: u64,
    cache_read_input_tokens: u64,
    cache_creation_input_tokens: u64,
}

impl ClaudeUsage {
    fn normalised(&self) -> Usage {
        Usage {
            input: self.input_tokens,
            output: self.output_tokens,
            cache_read: self.cache_read_input_tokens,
            cache_write: self.cache_creation_input_tokens,
            total: 0,
            cost_usd: 0.0,
        }
        .with_computed_total()
    }
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
                Some("tool_use") => tally.tool_calls += 1,
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
            let id = m.id.unwrap_or_default();
            let snapshot = u.normalised();
            match &mut self.current {
                Some((cur, usage)) if *cur == id => *usage = snapshot,
                _ => {
                    if let Some((_, prev)) = self.current.take() {
                        self.done.add(&prev);
                    }
                    self.current = Some((id, snapshot));
                }
            }
            let mut running = self.done;
            if let Some((_, cur)) = &self.current {
                running.add(cur);
            }
            running.cost_usd = tally.usage.cost_usd;
            tally.usage = running;
        }
    }

    fn result(&mut self, ev: ResultEvent, tally: &mut Tally) {
        self.saw_result = true;
        if let Some(u) = ev.usage {
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

impl StreamParser for ClaudeStream {
    fn line(&mut self, line: &str, tally: &mut Tally) {
        let Some(kind) = event_kind(line, tally) else {
            return;
        };
        match kind.as_ref() {
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
