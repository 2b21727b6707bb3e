//! Codex: `codex exec --json`.
//!
//! Read: `item.started`/`item.completed` of tool items (`command_execution`, `file_change`,
//! `mcp_tool_call`, `web_search`) are tool calls, counted once per item id; `agent_message` items are
//! the answer; `turn.failed` and top-level `error` events fail the run unless a later turn
//! completes. Error *items* are warnings and are ignored.
//!
//! Usage: the JSON stream reports it once per turn, in `turn.completed` (and a single `exec` is
//! one turn), and `turn.failed` reports none. The earliest signal is Codex's own telemetry log: with
//! `RUST_LOG=codex_otel.trace_safe=info` it writes one stderr line per model response
//! (`event.kind=response.completed input_token_count=… output_token_count=… cached_token_count=…
//! cache_write_token_count=…`, plus `model=…`), which is read live here. The run's usage is the larger
//! of the two sums, so tokens of a failed turn are kept and a Codex that stops logging still has its
//! `turn.completed` totals. Codex's input counts include cached and cache-write tokens.
//!
//! The prompt (role and task in one text: Codex takes no separate system prompt) goes on stdin
//! (`codex exec … -`).

use serde::Deserialize;

use super::models::{CodexConfig, codex_model};
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
/// The log target whose lines carry per-response token counts, and nothing of the conversation.
pub(crate) const USAGE_LOG: &str = "codex_otel.trace_safe=info";

/// A role's `thinking` as Codex's `model_reasoning_effort`.
fn reasoning_effort(thinking: &str) -> Option<&'static str> {
    Some(match thinking {
        "off" => "none",
        "minimal" => "minimal",
        "low" => "low",
        "medium" => "medium",
        "high" => "high",
        "xhigh" => "xhigh",
        _ => return None,
    })
}

impl AgentCli for Codex {
    fn launch(&self, inv: &Invocation<'_>) -> Launch {
        let role = inv.role;
        let writes = !role.read_only
            && (role.tools.is_empty()
                || role
                    .tools
                    .iter()
                    .any(|t| matches!(t.as_str(), "write" | "edit" | "bash")));
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
        let (model, provider) = codex_model(role);
        if let Some(m) = &model {
            args.extend(["--model".into(), m.clone()]);
        }
        if let Some(p) = &provider {
            args.extend([
                "--config".into(),
                format!("model_provider={}", toml_quoted(p)),
            ]);
        }
        if let Some(e) = role.thinking.as_deref().and_then(reasoning_effort) {
            args.extend(["--config".into(), format!("model_reasoning_effort=\"{e}\"")]);
        }
        args.push("-".into());
        let mut launch =
            Launch::new("codex", args).with_stdin(combined_prompt(inv.system_prompt, inv.task));
        let rust_log = match inv.env.iter().find(|(k, _)| k == "RUST_LOG") {
            Some((_, v)) if !v.trim().is_empty() => format!("{v},{USAGE_LOG}"),
            _ => USAGE_LOG.to_string(),
        };
        launch.env.push(("RUST_LOG".into(), rust_log));
        launch.model = model.or_else(|| CodexConfig::for_env(inv.env).model);
        launch
    }

    fn parser(&self) -> Box<dyn StreamParser> {
        Box::new(CodexStream::default())
    }
}

/// A TOML basic string.
fn toml_quoted(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Reads Codex's `exec --json` events and its usage log on stderr.
#[derive(Debug, Default)]
pub struct CodexStream {
    in_flight: Vec<String>,
    saw_turn: bool,
    /// Tool calls seen as JSON items; and as `codex.tool_call_received` log lines (in its read-only
    /// sandbox Codex runs commands without reporting them as items).
    item_calls: u64,
    log_calls: u64,
    /// The last HTTP error status the log reports for a model request: Codex replaces the
    /// provider's message of a 5xx by its own.
    http_error: Option<u16>,
    /// Usage summed from `turn.completed` events.
    turns: Usage,
    /// Usage summed from the per-response log lines.
    responses: Usage,
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
    cache_write_input_tokens: u64,
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

/// One model call's tokens as Codex counts them: `input` includes the cached and cache-write tokens.
fn call_usage(input: u64, cached: u64, cache_write: u64, output: u64) -> Usage {
    Usage {
        input: input.saturating_sub(cached).saturating_sub(cache_write),
        output,
        cache_read: cached,
        cache_write,
        ..Usage::default()
    }
    .with_computed_total()
}

/// `key=value` of a log line (values unquoted or in double quotes).
fn log_field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let mut rest = line;
    while let Some(i) = rest.find(key) {
        let before_ok = i == 0 || rest.as_bytes()[i - 1] == b' ';
        let after = &rest[i + key.len()..];
        if before_ok {
            if let Some(value) = after.strip_prefix('=') {
                let value = value.strip_prefix('"').map_or_else(
                    || value.split(' ').next().unwrap_or(""),
                    |v| v.split('"').next().unwrap_or(""),
                );
                return Some(value);
            }
        }
        rest = after;
    }
    None
}

impl CodexStream {
    /// The run's usage: the larger of the per-turn and the per-response sums.
    fn publish(&self, tally: &mut Tally) {
        tally.usage = if self.responses.total > self.turns.total {
            self.responses
        } else {
            self.turns
        };
    }

    fn item(&mut self, started: bool, item: Item, tally: &mut Tally) {
        if TOOL_ITEMS.contains(&item.kind.as_str()) {
            let id = item.id.unwrap_or_default();
            if started {
                if self.in_flight.len() < MAX_IN_FLIGHT {
                    self.in_flight.push(id);
                }
                self.item_calls += 1;
            } else if let Some(i) = self.in_flight.iter().position(|x| *x == id) {
                self.in_flight.swap_remove(i);
            } else {
                self.item_calls += 1;
            }
            tally.tool_calls = self.item_calls.max(self.log_calls);
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
                    self.turns.add(&call_usage(
                        u.input_tokens,
                        u.cached_input_tokens,
                        u.cache_write_input_tokens,
                        u.output_tokens,
                    ));
                    self.publish(tally);
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

    fn stderr_line(&mut self, line: &str, tally: &mut Tally) -> bool {
        if !line.contains("codex_otel.trace_safe") {
            return false;
        }
        match log_field(line, "event.name") {
            Some("codex.tool_call_received") => {
                self.log_calls += 1;
                tally.tool_calls = self.item_calls.max(self.log_calls);
                return true;
            }
            Some("codex.api_request") => {
                let status = log_field(line, "http.response.status_code")
                    .and_then(|s| s.parse::<u16>().ok());
                if let Some(code) = status.filter(|c| *c >= 400) {
                    self.http_error = Some(code);
                }
                return true;
            }
            _ => {}
        }
        if !line.contains("event.kind=response.completed") || !line.contains("input_token_count=") {
            return true;
        }
        let n = |k: &str| {
            log_field(line, k)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        self.responses.add(&call_usage(
            n("input_token_count"),
            n("cached_token_count"),
            n("cache_write_token_count"),
            n("output_token_count"),
        ));
        if let Some(model) = log_field(line, "model").filter(|m| !m.is_empty()) {
            tally.model = Some(model.to_string());
        }
        self.publish(tally);
        true
    }

    fn end(&mut self, tally: &mut Tally, success: bool) {
        if let (Some(error), Some(code)) = (&mut tally.error, self.http_error) {
            let code = code.to_string();
            if !error.contains(&code) {
                error.push_str(&format!(" (the provider answered HTTP {code})"));
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(frontmatter: &str, env: &[(String, String)]) -> Launch {
        super::super::test_launch(&Codex, frontmatter, env)
    }

    fn after<'a>(l: &'a Launch, flag: &str) -> Vec<&'a str> {
        l.args
            .windows(2)
            .filter(|w| w[0] == flag)
            .map(|w| w[1].as_str())
            .collect()
    }

    #[test]
    fn read_only_roles_get_the_read_only_sandbox() {
        let l = launch("tools: [read, bash, grep]\nreadOnly: true", &[]);
        assert_eq!(after(&l, "--sandbox"), ["read-only"]);
        let l = launch("tools: [read, bash, edit]", &[]);
        assert_eq!(after(&l, "--sandbox"), ["workspace-write"]);
        let l = launch("tools: [read, grep]", &[]);
        assert_eq!(after(&l, "--sandbox"), ["read-only"]);
    }

    #[test]
    fn models_providers_and_effort() {
        let l = launch("model: ollama/qwen3\nthinking: xhigh", &[]);
        assert_eq!(after(&l, "--model"), ["qwen3"]);
        assert_eq!(
            after(&l, "--config"),
            [
                "model_provider=\"ollama\"",
                "model_reasoning_effort=\"xhigh\""
            ]
        );
        assert_eq!(l.model.as_deref(), Some("qwen3"));
        let l = launch("model: openai/gpt-5\nthinking: off", &[]);
        assert_eq!(after(&l, "--model"), ["gpt-5"]);
        assert_eq!(after(&l, "--config"), ["model_reasoning_effort=\"none\""]);
        assert_eq!(l.args.last().map(String::as_str), Some("-"));
        assert!(l.stdin.as_deref().unwrap().ends_with("the task"));
        assert_eq!(
            l.env,
            [("RUST_LOG".to_string(), USAGE_LOG.to_string())],
            "the usage log is on"
        );
    }

    #[test]
    fn without_a_role_model_the_model_comes_from_codex_config() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("config.toml"),
            "model = \"gpt-5-codex\"\n[model_providers.local]\nbase_url = \"http://x\"\n",
        )
        .unwrap();
        let env = [
            ("CODEX_HOME".to_string(), dir.path().display().to_string()),
            ("RUST_LOG".to_string(), "warn".to_string()),
        ];
        let l = launch("tools: [read]", &env);
        assert_eq!(l.model.as_deref(), Some("gpt-5-codex"));
        assert!(after(&l, "--model").is_empty());
        assert_eq!(l.env[0].1, format!("warn,{USAGE_LOG}"));
    }

    #[test]
    fn log_fields() {
        let line = r#"2026 INFO codex_otel.trace_safe: event.name="codex.sse_event" event.kind=response.completed input_token_count=1000 output_token_count=30 model=fake-model slug=fake-model"#;
        assert_eq!(log_field(line, "input_token_count"), Some("1000"));
        assert_eq!(log_field(line, "event.name"), Some("codex.sse_event"));
        assert_eq!(log_field(line, "model"), Some("fake-model"));
        assert_eq!(log_field(line, "missing"), None);
    }
}
