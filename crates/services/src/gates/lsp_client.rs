//! A minimal Language Server Protocol client over a server's stdio: Content-Length framed JSON-RPC,
//! typed with `lsp-types`. Enough to initialize a server on a worktree, keep documents open across
//! gate rounds (`didOpen`/`didChange`/`didClose`) and learn each file's diagnostics only once the
//! server has said it finished the file, then shut it down.
//!
//! A background task reads everything the server sends: it answers the server's own requests at once
//! (a server waiting on its client would stall), routes responses to the request waiting for them and
//! keeps the latest published diagnostics of the open documents only, so memory stays bounded however
//! long the server lives between rounds.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lsp_types::{Diagnostic, Uri};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::tool::{Tool, brief, tail_lines};
use crate::process::{GroupGuard, process_group_alive, signal_group};

/// Largest message accepted from a server.
const MAX_MESSAGE: usize = 64 * 1024 * 1024;
/// typescript-language-server's command forwarding a request to tsserver (5.x and later).
pub(crate) const TSSERVER_REQUEST: &str = "typescript.tsserverRequest";
/// LSP error code: the server cancelled the request and asks for it to be sent again.
const SERVER_CANCELLED: i64 = -32802;
/// Pause before asking again a server that cancelled a request.
const RETRY_PAUSE: Duration = Duration::from_millis(100);

/// What a server last published for a document.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Published {
    /// The document version the server said the diagnostics are for, if it said.
    pub(crate) version: Option<i32>,
    pub(crate) diagnostics: Vec<Diagnostic>,
}

/// How long a server has gone without saying it finished a document.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Unfinished {
    /// It published nothing for the document.
    Silent,
    /// It published diagnostics without a document version, so nothing says they are complete.
    Unversioned,
    /// It published only for an older version of the document.
    Stale { published: i32, current: i32 },
}

#[derive(Debug, Default)]
struct State {
    /// Responses that arrived for requests still waiting, by id.
    responses: HashMap<i64, Result<Value, ResponseError>>,
    waiting: HashSet<i64>,
    /// Latest diagnostics of the open documents, by path.
    published: HashMap<PathBuf, Published>,
    open: HashSet<PathBuf>,
    /// Why the server's output ended, once it has.
    ended: Option<String>,
}

#[derive(Debug, Clone)]
struct ResponseError {
    code: i64,
    message: String,
}

struct Shared {
    state: Mutex<State>,
    changed: Notify,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A poisoned lock only means a panic elsewhere; the state itself stays usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

type Writer = Arc<tokio::sync::Mutex<ChildStdin>>;

/// A running language server.
pub(crate) struct LspServer {
    name: String,
    child: Child,
    guard: GroupGuard,
    writer: Writer,
    shared: Arc<Shared>,
    stderr: Arc<Mutex<VecDeque<String>>>,
    reader: tokio::task::JoinHandle<()>,
    next_id: i64,
    capabilities: Value,
    /// Supervisor's process id as the server can see it: `None` from inside the sandbox's PID
    /// namespace, where a server watching that id would find it gone and exit.
    client_pid: Option<u32>,
}

impl Drop for LspServer {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl LspServer {
    /// Start `tool` with `args` in `root`.
    pub(crate) fn start(tool: &Tool, args: &[&str], root: &Path) -> Result<LspServer, String> {
        let mut cmd = tool.command(root, args, &[])?;
        // Its own process group, registered while it runs, dying with supervisor.
        crate::process::lead_own_group(&mut cmd);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("{} could not be started: {e}", tool.spec.bin))?;
        let pgid = child.id().and_then(|p| i32::try_from(p).ok()).unwrap_or(0);
        let guard = GroupGuard::new(pgid);
        let stdin = child.stdin.take().ok_or("no stdin pipe")?;
        let stdout = child.stdout.take().ok_or("no stdout pipe")?;
        let stderr_pipe = child.stderr.take().ok_or("no stderr pipe")?;

        let writer: Writer = Arc::new(tokio::sync::Mutex::new(stdin));
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            changed: Notify::new(),
        });
        let reader = tokio::spawn(pump(stdout, Arc::clone(&shared), Arc::clone(&writer)));
        let stderr = Arc::new(Mutex::new(VecDeque::new()));
        let sink = Arc::clone(&stderr);
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr_pipe).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if let Ok(mut q) = sink.lock() {
                    q.push_back(line);
                    if q.len() > 40 {
                        q.pop_front();
                    }
                }
            }
        });
        Ok(LspServer {
            name: tool.spec.bin.to_string(),
            child,
            guard,
            writer,
            shared,
            stderr,
            reader,
            next_id: 1,
            capabilities: Value::Null,
            client_pid: (!tool.is_confined()).then(std::process::id),
        })
    }

    /// The server's process group, for killing it from elsewhere (session shutdown).
    pub(crate) fn process_group(&self) -> Option<i32> {
        Some(self.guard.pgid()).filter(|p| *p > 0)
    }

    /// Whether the process still runs and speaks.
    pub(crate) fn is_alive(&mut self) -> bool {
        self.shared.lock().ended.is_none() && matches!(self.child.try_wait(), Ok(None))
    }

    /// The last lines the server wrote to stderr.
    pub(crate) fn stderr_tail(&self, lines: usize) -> String {
        let text = self
            .stderr
            .lock()
            .map(|q| q.iter().cloned().collect::<Vec<_>>().join("\n"))
            .unwrap_or_default();
        tail_lines(&text, lines)
    }

    /// `initialize` with `root` as the workspace (and `options` as initializationOptions), then
    /// `initialized`. The server's capabilities are kept.
    pub(crate) async fn initialize(
        &mut self,
        root: &Path,
        options: Option<Value>,
        deadline: Instant,
    ) -> Result<(), String> {
        let root_uri = file_uri(root)?;
        let name = root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "workspace".into());
        let mut params = json!({
            "processId": self.client_pid,
            "rootUri": root_uri.as_str(),
            "rootPath": root.to_string_lossy(),
            "workspaceFolders": [{ "uri": root_uri.as_str(), "name": name }],
            "capabilities": {
                "textDocument": {
                    "synchronization": { "dynamicRegistration": false },
                    "publishDiagnostics": { "relatedInformation": false, "versionSupport": true },
                    "diagnostic": { "dynamicRegistration": false, "relatedDocumentSupport": false }
                },
                "workspace": { "configuration": true, "workspaceFolders": true }
            },
            "clientInfo": { "name": "supervisor", "version": env!("CARGO_PKG_VERSION") }
        });
        if let Some(options) = options {
            params["initializationOptions"] = options;
        }
        let result = self.request("initialize", params, deadline).await?;
        self.capabilities = result.get("capabilities").cloned().unwrap_or(Value::Null);
        self.notify("initialized", json!({})).await
    }

    /// Whether the server answers `textDocument/diagnostic` (LSP 3.17 pull diagnostics).
    pub(crate) fn supports_pull_diagnostics(&self) -> bool {
        self.capabilities
            .get("diagnosticProvider")
            .is_some_and(|p| !p.is_null() && *p != Value::Bool(false))
    }

    /// Whether the server offers `command` through `workspace/executeCommand`.
    pub(crate) fn supports_command(&self, command: &str) -> bool {
        self.capabilities
            .pointer("/executeCommandProvider/commands")
            .and_then(Value::as_array)
            .is_some_and(|c| c.iter().any(|c| c.as_str() == Some(command)))
    }

    /// Open `file` (absolute) at `version` with `text`.
    pub(crate) async fn open(
        &mut self,
        file: &Path,
        language_id: &str,
        version: i32,
        text: &str,
    ) -> Result<(), String> {
        {
            let mut state = self.shared.lock();
            state.open.insert(file.to_path_buf());
            state.published.remove(file);
        }
        let params = json!({ "textDocument": {
            "uri": file_uri(file)?.as_str(), "languageId": language_id, "version": version, "text": text
        }});
        self.notify("textDocument/didOpen", params).await
    }

    /// Replace the whole text of the open `file`, now at `version`.
    pub(crate) async fn change(
        &mut self,
        file: &Path,
        version: i32,
        text: &str,
    ) -> Result<(), String> {
        let params = json!({
            "textDocument": { "uri": file_uri(file)?.as_str(), "version": version },
            "contentChanges": [{ "text": text }]
        });
        self.notify("textDocument/didChange", params).await
    }

    /// Close `file`: the server reads it from disk again and its diagnostics are forgotten.
    pub(super) async fn close(&mut self, file: &Path) -> Result<(), String> {
        {
            let mut state = self.shared.lock();
            state.open.remove(file);
            state.published.remove(file);
        }
        let params = json!({ "textDocument": { "uri": file_uri(file)?.as_str() } });
        self.notify("textDocument/didClose", params).await
    }

    /// The diagnostics of `file` from `textDocument/diagnostic`: complete by definition.
    pub(crate) async fn pull_diagnostics(
        &mut self,
        file: &Path,
        deadline: Instant,
    ) -> Result<Vec<Diagnostic>, String> {
        let params = json!({ "textDocument": { "uri": file_uri(file)?.as_str() } });
        let report = self
            .request_retrying("textDocument/diagnostic", params, deadline)
            .await?;
        match report.get("kind").and_then(Value::as_str) {
            Some("full") => parse_diagnostics(&self.name, report.get("items")),
            other => Err(format!(
                "{} answered textDocument/diagnostic with a `{}` report where a full one was asked for",
                self.name,
                other.unwrap_or("?")
            )),
        }
    }

    /// The syntactic and semantic diagnostics of `file` asked of tsserver itself through
    /// typescript-language-server: tsserver answers once it has checked the file.
    pub(crate) async fn tsserver_diagnostics(
        &mut self,
        file: &Path,
        deadline: Instant,
    ) -> Result<Vec<Diagnostic>, String> {
        let mut all = Vec::new();
        for command in ["syntacticDiagnosticsSync", "semanticDiagnosticsSync"] {
            let params = json!({
                "command": TSSERVER_REQUEST,
                "arguments": [command, { "file": file.to_string_lossy(), "includeLinePosition": false }]
            });
            let response = self
                .request_retrying("workspace/executeCommand", params, deadline)
                .await?;
            if response.get("type").and_then(Value::as_str) == Some("cancelled") {
                return Err(format!("tsserver cancelled `{command}`"));
            }
            if response.get("success") != Some(&Value::Bool(true)) {
                return Err(format!(
                    "tsserver could not answer `{command}` for {}: {}",
                    file.display(),
                    response
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("no reason given")
                ));
            }
            let items = response
                .get("body")
                .and_then(Value::as_array)
                .ok_or_else(|| format!("tsserver's `{command}` answer has no diagnostics list"))?;
            for item in items {
                all.push(tsserver_diagnostic(item).ok_or_else(|| {
                    format!("tsserver sent a diagnostic that could not be read: {item}")
                })?);
            }
        }
        Ok(all)
    }

    /// Wait until the server publishes diagnostics of `file` for `version` (for servers that lint a
    /// document version in one pass and publish once, such as pylsp). `Err(Unfinished)` at the
    /// deadline, or at once when the server publishes without versions. Errors of the server itself
    /// (it died) are `Ok(Err(_))`.
    pub(crate) async fn published_for(
        &mut self,
        file: &Path,
        version: i32,
        deadline: Instant,
    ) -> Result<Result<Vec<Diagnostic>, Unfinished>, String> {
        let waited = self
            .wait_until(deadline, |state| match state.published.get(file) {
                Some(p) if p.version == Some(version) => Some(Ok(p.diagnostics.clone())),
                Some(p) if p.version.is_none() => Some(Err(Unfinished::Unversioned)),
                _ => None,
            })
            .await?;
        Ok(waited.unwrap_or_else(|| {
            Err(match self.shared.lock().published.get(file) {
                Some(Published {
                    version: Some(v), ..
                }) => Unfinished::Stale {
                    published: *v,
                    current: version,
                },
                Some(_) => Unfinished::Unversioned,
                None => Unfinished::Silent,
            })
        }))
    }

    /// Wait until `ready` finds what it looks for in the state (`Ok(Some)`), the deadline passes
    /// (`Ok(None)`) or the server's output ends (`Err`, saying how it exited).
    async fn wait_until<T>(
        &mut self,
        deadline: Instant,
        mut ready: impl FnMut(&mut State) -> Option<T>,
    ) -> Result<Option<T>, String> {
        let shared = Arc::clone(&self.shared);
        loop {
            let notified = shared.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut state = shared.lock();
                if let Some(found) = ready(&mut state) {
                    return Ok(Some(found));
                }
                if state.ended.is_some() {
                    drop(state);
                    return Err(self.exited());
                }
            }
            let now = Instant::now();
            if now >= deadline
                || tokio::time::timeout(deadline - now, notified)
                    .await
                    .is_err()
            {
                return Ok(None);
            }
        }
    }

    /// `shutdown` then `exit`; the process group is killed if the server lingers.
    pub(crate) async fn shutdown(mut self) {
        let deadline = Instant::now() + Duration::from_secs(5);
        if self
            .request("shutdown", Value::Null, deadline)
            .await
            .is_ok()
        {
            let _ = self.notify("exit", Value::Null).await;
            if let Ok(Ok(_)) = tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await
            {
                // Whatever the server left running in its group goes with it.
                if process_group_alive(self.guard.pgid()) {
                    signal_group(self.guard.pgid(), libc::SIGKILL);
                }
                self.guard.armed = false;
            }
        }
        // An armed guard kills the group as it drops.
    }

    /// A request, sent again while the server answers "cancelled, ask again".
    async fn request_retrying(
        &mut self,
        method: &str,
        params: Value,
        deadline: Instant,
    ) -> Result<Value, String> {
        loop {
            match self.request_raw(method, params.clone(), deadline).await? {
                Ok(v) => return Ok(v),
                Err(e) if e.code == SERVER_CANCELLED && Instant::now() + RETRY_PAUSE < deadline => {
                    tokio::time::sleep(RETRY_PAUSE).await;
                }
                Err(e) => {
                    return Err(format!(
                        "{} answered `{method}` with an error: {}",
                        self.name, e.message
                    ));
                }
            }
        }
    }

    async fn request(
        &mut self,
        method: &str,
        params: Value,
        deadline: Instant,
    ) -> Result<Value, String> {
        self.request_raw(method, params, deadline)
            .await?
            .map_err(|e| {
                format!(
                    "{} answered `{method}` with an error: {}",
                    self.name, e.message
                )
            })
    }

    /// Send a request and wait for its response (or the deadline, or the server's end).
    async fn request_raw(
        &mut self,
        method: &str,
        params: Value,
        deadline: Instant,
    ) -> Result<Result<Value, ResponseError>, String> {
        let id = self.next_id;
        self.next_id += 1;
        self.shared.lock().waiting.insert(id);
        let sent = self
            .send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        let result = match sent {
            Ok(()) => self.wait_for(id, method, deadline).await,
            Err(e) => Err(e),
        };
        let mut state = self.shared.lock();
        state.waiting.remove(&id);
        state.responses.remove(&id);
        result
    }

    async fn wait_for(
        &mut self,
        id: i64,
        method: &str,
        deadline: Instant,
    ) -> Result<Result<Value, ResponseError>, String> {
        self.wait_until(deadline, |state| state.responses.remove(&id))
            .await?
            .ok_or_else(|| format!("{} did not answer `{method}` in time", self.name))
    }

    async fn notify(&mut self, method: &str, params: Value) -> Result<(), String> {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
            .await
    }

    async fn send(&mut self, msg: &Value) -> Result<(), String> {
        match write_message(&self.writer, msg).await {
            Ok(()) => Ok(()),
            Err(_) => Err(self.exited()),
        }
    }

    fn exited(&mut self) -> String {
        let status = match self.child.try_wait() {
            Ok(Some(s)) => super::tool::status_text(s),
            _ => self
                .shared
                .lock()
                .ended
                .clone()
                .unwrap_or_else(|| "closed its input".into()),
        };
        let tail = brief(&self.stderr_tail(40));
        if tail.is_empty() {
            format!("{} exited ({status})", self.name)
        } else {
            format!("{} exited ({status}): {tail}", self.name)
        }
    }
}

async fn write_message(writer: &Writer, msg: &Value) -> std::io::Result<()> {
    let body = serde_json::to_vec(msg).map_err(std::io::Error::other)?;
    let mut frame = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    frame.extend_from_slice(&body);
    let mut w = writer.lock().await;
    w.write_all(&frame).await?;
    w.flush().await
}

/// Read the server's messages until its output ends: answer its requests, hand responses to the
/// requests waiting for them, keep the diagnostics of open documents.
async fn pump<R: AsyncRead + Unpin>(stream: R, shared: Arc<Shared>, writer: Writer) {
    let mut reader = BufReader::new(stream);
    let ended = loop {
        match read_message(&mut reader).await {
            Ok(Some(msg)) => {
                if let Some(answer) = receive(&shared, msg) {
                    // A server that stopped reading will end its output too; nothing to do here.
                    let _ = write_message(&writer, &answer).await;
                }
                shared.changed.notify_waiters();
            }
            Ok(None) => break "closed its output".to_string(),
            Err(e) => break e,
        }
    };
    shared.lock().ended = Some(ended);
    shared.changed.notify_waiters();
}

/// Take in one message; returns the answer to send when it is a request of the server.
fn receive(shared: &Shared, msg: Value) -> Option<Value> {
    let method = msg.get("method").and_then(Value::as_str);
    match (method, msg.get("id")) {
        (Some(method), Some(id)) => {
            let result = match method {
                "workspace/configuration" => {
                    let n = msg
                        .pointer("/params/items")
                        .and_then(Value::as_array)
                        .map_or(0, Vec::len);
                    Value::Array(vec![Value::Null; n])
                }
                "workspace/workspaceFolders" => Value::Null,
                _ => Value::Null,
            };
            Some(json!({"jsonrpc": "2.0", "id": id, "result": result}))
        }
        (Some("textDocument/publishDiagnostics"), None) => {
            let params = msg.get("params")?;
            let path = uri_to_path(params.get("uri")?.as_str()?)?;
            let mut state = shared.lock();
            if state.open.contains(&path) {
                let diagnostics: Vec<Diagnostic> = params
                    .get("diagnostics")
                    .and_then(|d| serde_json::from_value(d.clone()).ok())
                    .unwrap_or_default();
                let version = params
                    .get("version")
                    .and_then(Value::as_i64)
                    .and_then(|v| i32::try_from(v).ok());
                state.published.insert(
                    path,
                    Published {
                        version,
                        diagnostics,
                    },
                );
            }
            None
        }
        (Some(_), None) => None,
        (None, Some(id)) => {
            let id = id.as_i64()?;
            let mut state = shared.lock();
            if state.waiting.contains(&id) {
                let response = match msg.get("error") {
                    Some(err) => Err(ResponseError {
                        code: err.get("code").and_then(Value::as_i64).unwrap_or(0),
                        message: err
                            .get("message")
                            .and_then(Value::as_str)
                            .unwrap_or("?")
                            .to_string(),
                    }),
                    None => Ok(msg.get("result").cloned().unwrap_or(Value::Null)),
                };
                state.responses.insert(id, response);
            }
            None
        }
        (None, None) => None,
    }
}

fn parse_diagnostics(server: &str, items: Option<&Value>) -> Result<Vec<Diagnostic>, String> {
    serde_json::from_value(items.cloned().unwrap_or(Value::Array(Vec::new())))
        .map_err(|e| format!("{server} sent diagnostics that could not be read: {e}"))
}

/// A tsserver diagnostic (`{start: {line, offset}, end, text, code, category}`, 1-based) as LSP's.
fn tsserver_diagnostic(item: &Value) -> Option<Diagnostic> {
    let position = |key: &str| -> Option<Value> {
        let p = item.get(key)?;
        let line = p.get("line")?.as_u64()?.saturating_sub(1);
        let character = p.get("offset")?.as_u64()?.saturating_sub(1);
        Some(json!({ "line": line, "character": character }))
    };
    let severity = match item.get("category").and_then(Value::as_str) {
        Some("error") => 1,
        Some("warning") => 2,
        Some("suggestion") => 4,
        _ => 3,
    };
    let mut diagnostic = json!({
        "range": { "start": position("start")?, "end": position("end")? },
        "severity": severity,
        "source": item.get("source").and_then(Value::as_str).unwrap_or("typescript"),
        "message": item.get("text")?.as_str()?,
    });
    if let Some(code) = item.get("code").filter(|c| c.is_number()) {
        diagnostic["code"] = code.clone();
    }
    serde_json::from_value(diagnostic).ok()
}

/// One framed message; `Ok(None)` at a clean EOF.
pub(crate) async fn read_message<R: AsyncBufReadExt + Unpin>(
    reader: &mut R,
) -> Result<Option<Value>, String> {
    let mut length: Option<usize> = None;
    let mut saw_header = false;
    loop {
        let mut line = String::new();
        let n = reader
            .read_line(&mut line)
            .await
            .map_err(|e| format!("reading from the server failed: {e}"))?;
        if n == 0 {
            return if saw_header {
                Err("the server closed its output in the middle of a message".into())
            } else {
                Ok(None)
            };
        }
        let line = line.trim_end_matches(['\r', '\n']);
        if line.is_empty() {
            if saw_header {
                break;
            }
            continue;
        }
        saw_header = true;
        if let Some((name, value)) = line.split_once(':') {
            if name.trim().eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().ok();
            }
        }
    }
    let length = length.ok_or("the server sent a message without Content-Length")?;
    if length > MAX_MESSAGE {
        return Err(format!("the server sent a {length}-byte message"));
    }
    let mut body = vec![0u8; length];
    reader
        .read_exact(&mut body)
        .await
        .map_err(|e| format!("reading from the server failed: {e}"))?;
    serde_json::from_slice(&body)
        .map(Some)
        .map_err(|e| format!("the server sent invalid JSON: {e}"))
}

/// `file:///…` for an absolute path, percent-encoding what a URI path may not hold.
pub(crate) fn file_uri(path: &Path) -> Result<Uri, String> {
    let raw = path.to_string_lossy();
    let mut s = String::from("file://");
    for b in raw.as_bytes() {
        let c = *b as char;
        if c.is_ascii_alphanumeric() || "-._~/".contains(c) {
            s.push(c);
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    s.parse::<Uri>()
        .map_err(|e| format!("{} cannot be written as a URI: {e}", path.display()))
}

/// The path of a `file://` URI (percent-decoded); `None` for other schemes.
pub(crate) fn uri_to_path(uri: &str) -> Option<PathBuf> {
    let rest = uri.strip_prefix("file://")?;
    // `file://host/path` is not ours; `file:///path` has an empty host.
    let path = if rest.starts_with('/') {
        rest
    } else {
        rest.strip_prefix("localhost")?
    };
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
            if let Some(v) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    Some(PathBuf::from(String::from_utf8_lossy(&out).into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_round_trip() {
        for p in [
            "/tmp/a b/ü.ts",
            "/w/src/index.ts",
            "/x/%41.py",
            "/y/c#d?.ts",
        ] {
            let uri = file_uri(Path::new(p)).unwrap();
            assert_eq!(
                uri_to_path(uri.as_str()).unwrap(),
                PathBuf::from(p),
                "{uri:?}"
            );
        }
        assert_eq!(
            uri_to_path("file:///C%3A/x").unwrap(),
            PathBuf::from("/C:/x")
        );
        assert_eq!(uri_to_path("untitled:1"), None);
        assert_eq!(
            uri_to_path("file:///bad%zz").unwrap(),
            PathBuf::from("/bad%zz")
        );
        assert_eq!(
            uri_to_path("file:///end%4").unwrap(),
            PathBuf::from("/end%4")
        );
    }

    #[tokio::test]
    async fn reads_framed_messages() {
        let body = r#"{"jsonrpc":"2.0","method":"x"}"#;
        let input = format!(
            "Content-Length: {}\r\nContent-Type: application/vscode-jsonrpc\r\n\r\n{body}Content-Length: 2\r\n\r\n{{}}",
            body.len()
        );
        let mut r = BufReader::new(input.as_bytes());
        let first = read_message(&mut r).await.unwrap().unwrap();
        assert_eq!(first["method"], "x");
        assert_eq!(read_message(&mut r).await.unwrap().unwrap(), json!({}));
        assert_eq!(read_message(&mut r).await.unwrap(), None);
        let mut bad = BufReader::new("Content-Length: 10\r\n\r\n{}".as_bytes());
        assert!(read_message(&mut bad).await.is_err());
        let mut no_len = BufReader::new("X: 1\r\n\r\n{}".as_bytes());
        assert!(read_message(&mut no_len).await.is_err());
    }

    #[test]
    fn only_open_documents_keep_diagnostics_and_responses_reach_their_request() {
        let shared = Shared {
            state: Mutex::new(State::default()),
            changed: Notify::new(),
        };
        shared.lock().open.insert(PathBuf::from("/w/a.py"));
        shared.lock().waiting.insert(7);
        let publish = |uri: &str, version: Option<i32>| {
            json!({"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics", "params": {
                "uri": uri, "version": version, "diagnostics": [{
                    "range": {"start": {"line": 1, "character": 0}, "end": {"line": 1, "character": 3}},
                    "severity": 1, "message": "bad"}]}})
        };
        assert_eq!(receive(&shared, publish("file:///w/a.py", Some(2))), None);
        assert_eq!(
            receive(&shared, publish("file:///w/other.py", Some(1))),
            None
        );
        let state = shared.lock();
        assert_eq!(state.published.len(), 1);
        assert_eq!(state.published[Path::new("/w/a.py")].version, Some(2));
        drop(state);
        // Requests of the server are answered at once.
        let answer = receive(
            &shared,
            json!({"jsonrpc": "2.0", "id": "c1", "method": "workspace/configuration",
                   "params": {"items": [{}, {}]}}),
        )
        .unwrap();
        assert_eq!(answer["result"], json!([null, null]));
        // Responses for requests nobody waits for are dropped.
        receive(&shared, json!({"jsonrpc": "2.0", "id": 8, "result": 1}));
        receive(
            &shared,
            json!({"jsonrpc": "2.0", "id": 7, "error": {"code": -32802, "message": "again"}}),
        );
        let state = shared.lock();
        assert_eq!(state.responses.len(), 1);
        assert_eq!(state.responses[&7].as_ref().unwrap_err().code, -32802);
    }

    #[test]
    fn tsserver_diagnostics_become_lsp_diagnostics() {
        let d = tsserver_diagnostic(&json!({
            "start": {"line": 4, "offset": 7}, "end": {"line": 4, "offset": 13},
            "text": "Type 'string' is not assignable to type 'number'.", "code": 2322,
            "category": "error"
        }))
        .unwrap();
        assert_eq!(d.range.start.line, 3);
        assert_eq!(d.range.start.character, 6);
        assert_eq!(d.severity, Some(lsp_types::DiagnosticSeverity::ERROR));
        assert_eq!(d.code, Some(lsp_types::NumberOrString::Number(2322)));
        assert_eq!(d.source.as_deref(), Some("typescript"));
        assert!(tsserver_diagnostic(&json!({"text": "no position"})).is_none());
    }
}
