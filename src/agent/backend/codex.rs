//! Codex: `codex exec --json`.
//!
//! Read: `item.started`/`item.completed` of tool items (`command_execution`, `file_change`,
//! `mcp_tool_call`, `web_search`) are tool calls, counted once per item id; `agent_message` items are
//! the answer; `turn.completed` carries one turn's usage (summed); `turn.failed` and top-level `error`
//! events fail the run unless a later turn completes. Error *items* are warnings and are ignored.

use serde::Deserialize;

use super::{AgentCli, Invocation, Launch, combined_prompt};
use crate::agent::run::Usage;
use crate::agent::stream::{StreamParser, Tally, event_kind, parse_event};

pub(super) struct Codex;

const TOOL_ITEMS: [&str; 4] = [
    "command_execution",
    "file_change",
    "mcp_tool_call",
    "web_search",
];
/// In-flight tool items remembered to avoid counting one twice; more than this at once is not real.
const MAX_IN_FLIGHT: usize = 1024;

impl AgentCli for Codex {
    fn launch(&self, inv: &Invocation<'_>) -> Launch {
        let role = inv.role;
        let writes = role.tools.is_empty()
            || role
                .tools
                .iter()
                .any(|t| matches!(t.as_str(), "write" | "edit" | "bash"));
        let mut args: Vec<String> = [
            "exec",
            "--json",
            "--skip-git-repo-check",
            "--ephemeral",
            "--sandbox",
            if writes {
                "workspace-write"
            } else {
                "read-only"
            },
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        if let Some(m) = &role.model {
            args.extend(["--model".into(), m.clone()]);
        }
        let effort = match role.thinking.as_deref() {
            Some("minimal") => Some("minimal"),
            Some("low") => Some("low"),
            Some("medium") => Some("medium"),
            Some("high") | Some("xhigh") => Some("high"),
            _ => None,
        };
        if let Some(e) = effort {
            args.extend(["--config".into(), format!("model_reasoning_effort=\"{e}\"")]);
        }
        args.push("--".into());
        args.push(combined_prompt(inv.system_prompt, inv.task));
        Launch::new("codex", args)
    }

    fn parser(&self) -> Box<dyn StreamParser> {
        Box::new(CodexStream::default())
    }
}

/// Reads Codex's `exec --json` events.
#[derive(Debug, Default)]
pub struct CodexStream {
    in_flight: Vec<String>,
    saw_turn: bool,
}

#[derive(Deserialize)]
struct ItemEvent {
    item: Item,
}

#[derive(Deserialize)]
struct Item {
    id: Option<String>,
    #[serde(rename = "type")]
    kind: String,
    text: Option<String>,
}

#[derive(Deserialize)]
struct TurnCompleted {
    usage: Option<CodexUsage>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct CodexUsage {
    input_tokens: u64,
    cached_input_tokens: u64,
    output_tokens: u64,
}

#[derive(Deserialize)]
struct Failure {
    message: Option<String>,
    error: Option<FailureDetail>,
}

#[derive(Deserialize)]
struct FailureDetail {
    message: Option<String>,
}

impl CodexStream {
    fn item(&mut self, started: bool, item: Item, tally: &mut Tally) {
        if TOOL_ITEMS.contains(&item.kind.as_str()) {
            let id = item.id.unwrap_or_default();
            if started {
                if self.in_flight.len() < MAX_IN_FLIGHT {
                    self.in_flight.push(id);
                }
                tally.tool_calls += 1;
            } else if let Some(i) = self.in_flight.iter().position(|x| *x == id) {
                self.in_flight.swap_remove(i);
            } else {
                tally.tool_calls += 1;
            }
        } else if item.kind == "agent_message" && !started {
            let text = item.text.unwrap_or_default();
            tally.saw_text(&text);
            tally.final_text = Some(text);
        }
    }
}

impl StreamParser for CodexStream {
    fn line(&mut self, line: &str, tally: &mut Tally) {
        let Some(kind) = event_kind(line, tally) else {
            return;
        };
        match kind.as_ref() {
            k @ ("item.started" | "item.completed") => {
                if let Some(ev) = parse_event::<ItemEvent>(line, tally) {
                    self.item(k == "item.started", ev.item, tally);
                }
            }
            "turn.completed" => {
                self.saw_turn = true;
                tally.error = None;
                if let Ok(TurnCompleted { usage: Some(u) }) = serde_json::from_str(line) {
                    let call = Usage {
                        input: u.input_tokens.saturating_sub(u.cached_input_tokens),
                        output: u.output_tokens,
                        cache_read: u.cached_input_tokens,
                        cache_write: 0,
                        total: 0,
                        cost_usd: 0.0,
                    }
                    .with_computed_total();
                    tally.usage.add(&call);
                }
            }
            "turn.failed" | "error" => {
                let message = serde_json::from_str::<Failure>(line)
                    .ok()
                    .and_then(|f| f.error.and_then(|e| e.message).or(f.message))
                    .unwrap_or_else(|| "Codex reported an error".into());
                tally.error = Some(unwrap_api_error(&message));
            }
            _ => {}
        }
    }

    fn end(&mut self, tally: &mut Tally, success: bool) {
        if success && !self.saw_turn && tally.error.is_none() {
            tally.error = Some("Codex ended without completing a turn".into());
        }
    }
}

/// Codex forwards a provider's JSON error body as the message; show its inner message.
fn unwrap_api_error(message: &str) -> String {
    serde_json::from_str::<serde_json::Value>(message)
        .ok()
        .and_then(|v| {
            v.pointer("/error/message")
                .and_then(|m| m.as_str())
                .map(str::to_string)
        })
        .unwrap_or_else(|| message.to_string())
}
