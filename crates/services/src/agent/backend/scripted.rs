//! The scripted backend: a real subprocess (`supervisor agent-script`) that replays a script file's
//! actions for one role and attempt in its working directory and reports them as pi JSON events, so
//! process groups, budgets, timeouts and signals are exercised exactly as with a real agent.
//!
//! A script maps role names to attempts, each attempt a list of actions (JSON or YAML):
//!
//! ```yaml
//! researcher:
//!   - [ { usage: { input: 900, output: 100 } }, { final: "## Research Findings ..." } ]
//! developer:
//!   - - write: { path: src/a.ts, content: "export const a = 1;\n" }
//!     - run: npm test
//!     - final: "```json\n{\"action\": \"IMPLEMENTATION_COMPLETE\"}\n```"
//! "*": [ [ { final: "done" } ] ]
//! ```
//!
//! The nth dispatch of a role plays attempt n; past the list the last attempt repeats. A role given a
//! plain list of actions has one attempt. `"*"` serves roles the script does not name. A dispatch
//! that revises a pull request (its dispatch says so) plays `<role>@revision` when the
//! script names it, so a script can tell a revision's attempts from the run's; any other dispatch
//! about issue N (a run's, or the reviewer's of an epic's sub-issue) plays `<role>@N` when the
//! script names it, so one script can play several issues.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Component, Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::pi::{PiEvents, PiStream};
use super::{AgentCli, Invocation, Launch};
use crate::agent::stream::StreamParser;

/// The hidden subcommand that replays a script.
pub const SCRIPT_SUBCOMMAND: &str = "agent-script";
/// The suffix of a script's role key for revision dispatches.
const REVISION_ROLE: &str = "@revision";
/// Tool results keep this much of a command's output.
const RESULT_CAP: usize = 4096;

pub(super) struct Scripted<'a> {
    pub script: &'a Path,
    pub(crate) program: &'a Path,
}

impl AgentCli for Scripted<'_> {
    fn launch(&self, inv: &Invocation<'_>) -> Launch {
        Launch::new(
            self.program,
            vec![
                SCRIPT_SUBCOMMAND.into(),
                "--script".into(),
                self.script.display().to_string(),
                "--role".into(),
                match (inv.revision, inv.subject) {
                    (true, _) => format!("{}{REVISION_ROLE}", inv.role.name),
                    (false, Some(subject)) => format!("{}@{subject}", inv.role.name),
                    (false, None) => inv.role.name.clone(),
                },
                "--attempt".into(),
                inv.attempt.max(1).to_string(),
            ],
        )
    }

    fn parser(&self) -> Box<dyn StreamParser> {
        Box::new(PiStream)
    }
}

/// One step of a scripted agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum ScriptAction {
    /// Write a file (relative to the working directory), as a `write` tool call. With `delta`, the
    /// tool call is streamed first as pi streams it: one `message_update` per `delta` characters of
    /// the arguments, each repeating the whole partial message.
    Write {
        path: String,
        content: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        delta: Option<usize>,
    },
    /// Replace the first `old` by `new` in a file, as an `edit` tool call.
    Edit {
        path: String,
        old: String,
        new: String,
    },
    /// Run a shell command in the working directory, as a `bash` tool call.
    Run { command: String },
    /// Wait.
    Sleep { ms: u64 },
    /// Report one model call's token usage.
    Usage { input: u64, output: u64 },
    /// A tool call with no effect.
    Tool { name: String },
    /// The final answer (an assistant message with `stopReason: "stop"`).
    Final { text: String },
    /// Text written to stderr.
    Stderr { text: String },
    /// A provider error (`stopReason: "error"`), as pi reports it while still exiting 0.
    Fail { message: String },
    /// Exit at once with this code.
    Exit { code: i32 },
}

/// The single field of actions that may be written as a bare value (`final: "text"`, `sleep: 200`).
fn shorthand_field(action: &str) -> Option<&'static str> {
    Some(match action {
        "run" => "command",
        "sleep" => "ms",
        "tool" => "name",
        "final" | "stderr" => "text",
        "fail" => "message",
        "exit" => "code",
        _ => return None,
    })
}

/// A parsed script: role → attempts → actions.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Script {
    pub roles: BTreeMap<String, Vec<Vec<ScriptAction>>>,
}

impl Script {
    /// Parse a script file (JSON when it ends in `.json`, else YAML, which also reads JSON).
    pub(crate) fn load(path: &Path) -> Result<Script, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the script {}: {e}", path.display()))?;
        Script::parse(&text, path.extension().is_some_and(|e| e == "json"))
            .map_err(|e| format!("script {}: {e}", path.display()))
    }

    /// Parse script text.
    pub fn parse(text: &str, json: bool) -> Result<Script, String> {
        let doc: Value = if json {
            serde_json::from_str(text).map_err(|e| format!("is not valid JSON: {e}"))?
        } else {
            serde_norway::from_str(text).map_err(|e| format!("is not valid YAML: {e}"))?
        };
        let Value::Object(map) = doc else {
            return Err("must map role names to lists of attempts".into());
        };
        let mut roles = BTreeMap::new();
        for (role, attempts) in map {
            let Value::Array(items) = attempts else {
                return Err(format!("`{role}` must be a list of attempts"));
            };
            // A list of action objects is one attempt; a list of lists is several.
            let attempts: Vec<Value> = if items.iter().all(Value::is_array) {
                items
            } else {
                vec![Value::Array(items)]
            };
            let mut parsed = Vec::new();
            for (a, attempt) in attempts.into_iter().enumerate() {
                let Value::Array(actions) = attempt else {
                    return Err(format!(
                        "`{role}` attempt {} must be a list of actions",
                        a + 1
                    ));
                };
                let mut list = Vec::new();
                for (i, action) in actions.into_iter().enumerate() {
                    list.push(parse_action(action).map_err(|e| {
                        format!("`{role}` attempt {} action {}: {e}", a + 1, i + 1)
                    })?);
                }
                parsed.push(list);
            }
            roles.insert(role, parsed);
        }
        Ok(Script { roles })
    }

    /// The actions of `role`'s `attempt` (1-based); past the list the last attempt repeats.
    pub fn attempt(&self, role: &str, attempt: u32) -> Option<&[ScriptAction]> {
        // `<role>@revision`, `<role>@<subject>`: the role's own attempts when not named.
        let base = role.split_once('@').map(|(base, _)| base);
        let attempts = self
            .roles
            .get(role)
            .or_else(|| base.and_then(|b| self.roles.get(b)))
            .or_else(|| self.roles.get("*"))?;
        let i = (attempt.max(1) as usize - 1).min(attempts.len().checked_sub(1)?);
        Some(&attempts[i])
    }
}

fn parse_action(action: Value) -> Result<ScriptAction, String> {
    let action = match action {
        Value::Object(mut map) if map.len() == 1 => {
            let (name, value) = map.iter_mut().next().expect("one entry");
            if !value.is_object() {
                if let Some(field) = shorthand_field(name) {
                    *value = json!({ field: value.take() });
                }
            }
            Value::Object(map)
        }
        Value::Object(_) => {
            return Err(
                "an action is an object with exactly one key, e.g. {\"final\": \"text\"}".into(),
            );
        }
        other => return Err(format!("`{other}` is not an action")),
    };
    serde_json::from_value(action).map_err(|e| {
        format!("{e} (actions: write, edit, run, sleep, usage, tool, final, stderr, fail, exit)")
    })
}

/// A path inside the working directory: relative, no `..`.
fn inside(cwd: &Path, path: &str) -> Result<PathBuf, String> {
    let p = Path::new(path);
    if path.is_empty()
        || !p
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(format!(
            "path `{path}` must be relative and stay inside the working directory"
        ));
    }
    Ok(cwd.join(p))
}

/// Keep the last `cap` bytes of a text.
fn tail_of(text: &str, cap: usize) -> &str {
    if text.len() <= cap {
        return text;
    }
    let mut from = text.len() - cap;
    while !text.is_char_boundary(from) {
        from += 1;
    }
    &text[from..]
}

/// Replay `role`'s `attempt` of the script at `script` in `cwd`, writing pi JSON events to `out` and
/// diagnostics to `err`. Returns the process exit code.
pub fn replay(
    script: &Path,
    role: &str,
    attempt: u32,
    cwd: &Path,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> i32 {
    let script = match Script::load(script) {
        Ok(s) => s,
        Err(e) => {
            let _ = writeln!(err, "agent-script: {e}");
            return 2;
        }
    };
    let Some(actions) = script.attempt(role, attempt) else {
        let _ = writeln!(
            err,
            "agent-script: the script has no entry for role `{role}` (and no \"*\" entry)"
        );
        return 2;
    };
    match play(actions, cwd, out, err) {
        Ok(code) => code,
        Err(e) => {
            let _ = writeln!(err, "agent-script: {e}");
            2
        }
    }
}

fn play(
    actions: &[ScriptAction],
    cwd: &Path,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<i32, String> {
    let mut ev = PiEvents::default();
    emit(out, &ev.session(&cwd.display().to_string()))?;
    emit(out, &ev.agent_start())?;
    for action in actions {
        match action {
            ScriptAction::Write {
                path,
                content,
                delta,
            } => {
                let file = inside(cwd, path)?;
                if let Some(delta) = delta {
                    stream_tool_call(out, &mut ev, path, content, (*delta).max(1))?;
                }
                let args = if delta.is_some() {
                    json!({ "path": path, "content": content })
                } else {
                    json!({ "path": path })
                };
                if let Some(parent) = file.parent() {
                    std::fs::create_dir_all(parent)
                        .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
                }
                std::fs::write(&file, content)
                    .map_err(|e| format!("cannot write {}: {e}", file.display()))?;
                for l in ev.tool("write", args, "written", false) {
                    emit(out, &l)?;
                }
            }
            ScriptAction::Edit { path, old, new } => {
                let file = inside(cwd, path)?;
                let text = std::fs::read_to_string(&file)
                    .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
                let (result, is_error) = match text.find(old.as_str()) {
                    Some(_) => {
                        std::fs::write(&file, text.replacen(old.as_str(), new, 1))
                            .map_err(|e| format!("cannot write {}: {e}", file.display()))?;
                        ("edited", false)
                    }
                    None => ("old text not found", true),
                };
                for l in ev.tool("edit", json!({ "path": path }), result, is_error) {
                    emit(out, &l)?;
                }
            }
            ScriptAction::Run { command } => {
                let [start, end] = ev.tool("bash", json!({ "command": command }), "", false);
                emit(out, &start)?;
                let output = std::process::Command::new("sh")
                    .arg("-c")
                    .arg(command)
                    .current_dir(cwd)
                    .stdin(Stdio::null())
                    .output()
                    .map_err(|e| format!("cannot run sh: {e}"))?;
                let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
                text.push_str(&String::from_utf8_lossy(&output.stderr));
                let mut end: Value = serde_json::from_str(&end).unwrap_or_default();
                end["result"]["content"][0]["text"] = json!(tail_of(&text, RESULT_CAP));
                end["isError"] = json!(!output.status.success());
                emit(out, &end.to_string())?;
            }
            ScriptAction::Sleep { ms } => std::thread::sleep(Duration::from_millis(*ms)),
            ScriptAction::Usage { input, output } => {
                emit(out, &ev.assistant("", *input, *output, "toolUse", None))?;
            }
            ScriptAction::Tool { name } => {
                for l in ev.tool(name, json!({}), "ok", false) {
                    emit(out, &l)?;
                }
            }
            ScriptAction::Final { text } => {
                emit(out, &ev.assistant(text, 0, 0, "stop", None))?;
            }
            ScriptAction::Stderr { text } => {
                let _ = writeln!(err, "{text}");
                let _ = err.flush();
            }
            ScriptAction::Fail { message } => {
                emit(out, &ev.assistant("", 0, 0, "error", Some(message)))?;
            }
            ScriptAction::Exit { code } => return Ok(*code),
        }
    }
    emit(out, &ev.agent_end())?;
    Ok(0)
}

/// A `write` tool call streamed as pi 0.73 writes it: `message_start`, then per `delta` characters of
/// the arguments a `message_update` holding the whole partial message twice (as `partial` and as
/// `message`, each with the parsed arguments so far and the raw `partialArgs`), then `message_end`
/// with the complete call. Lines are assembled from slices of pre-escaped text, so even a quadratic
/// stream costs little more than its bytes.
fn stream_tool_call(
    out: &mut dyn Write,
    ev: &mut PiEvents,
    path: &str,
    content: &str,
    delta: usize,
) -> Result<(), String> {
    let id = ev.next_call_id();
    let json_str = |t: &str| serde_json::to_string(t).expect("strings serialise");
    let path_json = json_str(path);
    let head = format!("{{\"path\":{path_json},\"content\":\"");
    // The arguments text the model streams, and the same text escaped as a JSON string.
    let args = format!(
        "{head}{}\"}}",
        &json_str(content)[1..json_str(content).len() - 1]
    );
    let (escaped, offsets) = escape_with_offsets(&args);
    let message_head = format!(
        r#"{{"role":"assistant","content":[{{"type":"toolCall","id":"{id}","name":"write","arguments":"#
    );
    let message_tail = r#","streamIndex":0}],"api":"openai-completions","provider":"scripted","model":"scripted","usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":0,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":0}"#;
    emit(
        out,
        &json!({ "type": "message_start", "message": {
            "role": "assistant", "content": [], "api": "openai-completions", "provider": "scripted",
            "model": "scripted", "stopReason": "stop", "timestamp": 0 } })
        .to_string(),
    )?;
    let w = |out: &mut dyn Write, b: &[u8]| {
        out.write_all(b)
            .map_err(|e| format!("cannot write the event stream: {e}"))
    };
    let mut start = 0;
    while start < args.len() {
        let mut end = (start + delta).min(args.len());
        while !args.is_char_boundary(end) {
            end += 1;
        }
        let parsed: &str = if end <= head.len() { "{}" } else { "" };
        let mut partial: Vec<&[u8]> = vec![message_head.as_bytes()];
        let content_so_far;
        if parsed.is_empty() {
            content_so_far = complete_escapes(&args[head.len()..end.min(args.len() - 2)]);
            partial.extend([head.as_bytes(), content_so_far.as_bytes(), b"\"}"]);
        } else {
            partial.push(parsed.as_bytes());
        }
        partial.extend([
            &b",\"partialArgs\":\""[..],
            &escaped.as_bytes()[..offsets[end]],
            b"\"",
            message_tail.as_bytes(),
        ]);
        w(
            out,
            format!(
                r#"{{"type":"message_update","assistantMessageEvent":{{"type":"toolcall_delta","contentIndex":0,"delta":{},"partial":"#,
                json_str(&args[start..end])
            )
            .as_bytes(),
        )?;
        for p in &partial {
            w(out, p)?;
        }
        w(out, br#"},"message":"#)?;
        for p in &partial {
            w(out, p)?;
        }
        w(out, b"}\n")?;
        start = end;
    }
    let message = json!({
        "role": "assistant",
        "content": [{ "type": "toolCall", "id": id, "name": "write",
                      "arguments": { "path": path, "content": content } }],
        "api": "openai-completions", "provider": "scripted", "model": "scripted",
        "usage": { "input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
                   "cost": { "input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0 } },
        "stopReason": "toolUse", "timestamp": 0
    });
    emit(
        out,
        &json!({ "type": "message_end", "message": message }).to_string(),
    )?;
    emit(
        out,
        &json!({ "type": "turn_end", "message": message, "toolResults": [] }).to_string(),
    )
}

/// `text` escaped as the inside of a JSON string, and for every byte offset of `text` the offset
/// of the same point in the escaped text.
fn escape_with_offsets(text: &str) -> (String, Vec<usize>) {
    let mut escaped = String::with_capacity(text.len() + text.len() / 8);
    let mut offsets = vec![0; text.len() + 1];
    let mut buf = [0u8; 4];
    for (i, c) in text.char_indices() {
        offsets[i] = escaped.len();
        match c {
            '"' => escaped.push_str("\\\""),
            '\\' => escaped.push_str("\\\\"),
            '\n' => escaped.push_str("\\n"),
            '\r' => escaped.push_str("\\r"),
            '\t' => escaped.push_str("\\t"),
            c if (c as u32) < 0x20 => escaped.push_str(&format!("\\u{:04x}", c as u32)),
            c => escaped.push_str(c.encode_utf8(&mut buf)),
        }
    }
    offsets[text.len()] = escaped.len();
    (escaped, offsets)
}

/// A prefix of JSON string content without a dangling escape at its end (as a partial-JSON parser
/// would keep it).
fn complete_escapes(prefix: &str) -> std::borrow::Cow<'_, str> {
    let bytes = prefix.as_bytes();
    let trailing = bytes.iter().rev().take_while(|b| **b == b'\\').count();
    let mut end = prefix.len() - trailing % 2;
    if let Some(u) = prefix[..end].rfind("\\u") {
        let backslashes = prefix[..u]
            .bytes()
            .rev()
            .take_while(|b| *b == b'\\')
            .count();
        if backslashes % 2 == 0 && end - u < 6 {
            end = u;
        }
    }
    std::borrow::Cow::Borrowed(&prefix[..end])
}

/// Write one event line and flush it, so the reader sees it at once.
fn emit(out: &mut dyn Write, line: &str) -> Result<(), String> {
    let write = |out: &mut dyn Write| -> std::io::Result<()> {
        out.write_all(line.as_bytes())?;
        out.write_all(b"\n")?;
        out.flush()
    };
    write(out).map_err(|e| format!("cannot write the event stream: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_with_shorthands_and_attempts() {
        let s = Script::parse(
            "researcher:\n  - final: one\ndeveloper:\n  - [ {sleep: 5}, {final: {text: first}} ]\n  - [ {exit: 3} ]\n\"*\": [[{tool: read}]]\n",
            false,
        )
        .unwrap();
        assert_eq!(
            s.attempt("researcher", 4).unwrap(),
            [ScriptAction::Final { text: "one".into() }]
        );
        assert_eq!(
            s.attempt("developer", 1).unwrap()[0],
            ScriptAction::Sleep { ms: 5 }
        );
        assert_eq!(
            s.attempt("developer", 9).unwrap(),
            [ScriptAction::Exit { code: 3 }]
        );
        assert_eq!(
            s.attempt("auditor", 1).unwrap(),
            [ScriptAction::Tool {
                name: "read".into()
            }]
        );
    }

    #[test]
    fn json_scripts_and_errors_that_point_at_the_action() {
        let s = Script::parse(
            r#"{ "developer": [[ { "write": { "path": "a.txt", "content": "x" } }, { "usage": { "input": 5, "output": 1 } } ]] }"#,
            true,
        )
        .unwrap();
        assert_eq!(s.attempt("developer", 1).unwrap().len(), 2);
        assert!(s.attempt("auditor", 1).is_none());
        let e = Script::parse(r#"{ "developer": [[ { "fly": 1 } ]] }"#, true).unwrap_err();
        assert!(
            e.contains("attempt 1 action 1") && e.contains("actions: write"),
            "{e}"
        );
        let e = Script::parse(
            r#"{ "developer": [[ { "final": "a", "exit": 1 } ]] }"#,
            true,
        )
        .unwrap_err();
        assert!(e.contains("exactly one key"), "{e}");
        assert!(Script::parse("[1]", true).is_err());
    }

    #[test]
    fn replays_actions_in_the_working_directory() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("s.yaml");
        std::fs::write(
            &script,
            "dev:\n  - write: {path: sub/a.txt, content: \"hello world\"}\n  - edit: {path: sub/a.txt, old: world, new: there}\n  - run: \"cat sub/a.txt\"\n  - usage: {input: 10, output: 2}\n  - stderr: note\n  - final: done\n",
        )
        .unwrap();
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = replay(&script, "dev", 1, dir.path(), &mut out, &mut err);
        assert_eq!(code, 0, "{}", String::from_utf8_lossy(&err));
        assert_eq!(
            std::fs::read_to_string(dir.path().join("sub/a.txt")).unwrap(),
            "hello there"
        );
        let out = String::from_utf8(out).unwrap();
        assert!(out.contains("\"text\":\"hello there\""), "{out}");
        assert_eq!(String::from_utf8(err).unwrap(), "note\n");

        let mut p = PiStream;
        let mut t = crate::agent::stream::Tally::default();
        for l in out.lines() {
            p.line(l, &mut t);
        }
        assert_eq!(t.tool_calls, 3);
        assert_eq!(t.usage.total, 12);
        assert_eq!(t.final_text.as_deref(), Some("done"));
    }

    #[test]
    fn a_streamed_write_repeats_the_partial_message_like_pi() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("s.yaml");
        let content = "line \"one\"\\\nline two\u{1}é\n".repeat(3);
        let yaml = serde_json::json!({ "dev": [[
            { "write": { "path": "f.txt", "content": content, "delta": 3 } },
            { "final": "done" } ]] });
        std::fs::write(&script, yaml.to_string()).unwrap();
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = replay(&script, "dev", 1, dir.path(), &mut out, &mut err);
        assert_eq!(code, 0, "{}", String::from_utf8_lossy(&err));
        assert_eq!(
            std::fs::read_to_string(dir.path().join("f.txt")).unwrap(),
            content
        );
        let out = String::from_utf8(out).unwrap();
        let updates: Vec<Value> = out
            .lines()
            .filter(|l| l.starts_with(r#"{"type":"message_update""#))
            .map(|l| serde_json::from_str(l).expect("every update is valid JSON"))
            .collect();
        let args = serde_json::json!({ "path": "f.txt", "content": content });
        assert!(
            updates.len() >= args.to_string().chars().count() / 3,
            "{}",
            updates.len()
        );
        let last = &updates[updates.len() - 1]["message"]["content"][0];
        assert_eq!(last["arguments"]["content"], content.as_str());
        let streamed: Value = serde_json::from_str(last["partialArgs"].as_str().unwrap()).unwrap();
        assert_eq!(streamed, args);
        for u in &updates {
            assert_eq!(u["message"], u["assistantMessageEvent"]["partial"]);
        }
        let mut p = PiStream;
        let mut t = crate::agent::stream::Tally::default();
        for l in out.lines() {
            p.line(l, &mut t);
        }
        assert_eq!(t.tool_calls, 1);
        assert_eq!(t.final_text.as_deref(), Some("done"));
    }

    #[test]
    fn refuses_paths_outside_the_working_directory() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("s.json");
        std::fs::write(
            &script,
            r#"{ "dev": [ { "write": { "path": "../escape", "content": "x" } } ] }"#,
        )
        .unwrap();
        let (mut out, mut err) = (Vec::new(), Vec::new());
        assert_eq!(replay(&script, "dev", 1, dir.path(), &mut out, &mut err), 2);
        assert!(String::from_utf8(err).unwrap().contains("stay inside"));
        assert!(!dir.path().parent().unwrap().join("escape").exists());
    }
}
