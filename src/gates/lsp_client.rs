//! A minimal Language Server Protocol client over a server's stdio: Content-Length framed JSON-RPC,
//! typed with `lsp-types`. Enough to initialize a server on a worktree, open files and collect the
//! diagnostics it publishes, then shut it down.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lsp_types::{
    ClientCapabilities, ClientInfo, Diagnostic, DidOpenTextDocumentParams, InitializeParams,
    PublishDiagnosticsClientCapabilities, PublishDiagnosticsParams, TextDocumentClientCapabilities,
    TextDocumentItem, Uri, WorkspaceFolder,
};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::tool::{ProcessGroupGuard, Tool, brief, isolate, tail_lines};

/// Largest message accepted from a server.
const MAX_MESSAGE: usize = 64 * 1024 * 1024;
/// After every opened file has reported, diagnostics that follow within this quiet period still count
/// (servers may publish a file twice: syntax first, then semantics).
const SETTLE: Duration = Duration::from_millis(300);

/// What a server published for the opened files.
#[derive(Debug, Default)]
pub struct Collected {
    pub diagnostics: HashMap<PathBuf, Vec<Diagnostic>>,
    /// Opened files it published nothing for before the deadline.
    pub silent: Vec<PathBuf>,
}

/// A running language server.
pub struct LspServer {
    name: String,
    child: Child,
    guard: ProcessGroupGuard,
    stdin: ChildStdin,
    incoming: mpsc::UnboundedReceiver<Result<Value, String>>,
    stderr: Arc<Mutex<VecDeque<String>>>,
    next_id: i64,
    /// Latest diagnostics per file, by decoded path.
    diagnostics: HashMap<PathBuf, Vec<Diagnostic>>,
}

impl LspServer {
    /// Start `tool` with `args` in `root`.
    pub fn start(tool: &Tool, args: &[&str], root: &Path) -> Result<LspServer, String> {
        let mut cmd = tool.command(root, args);
        isolate(&mut cmd);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("{} could not be started: {e}", tool.spec.bin))?;
        let guard = ProcessGroupGuard::new(child.id());
        let stdin = child.stdin.take().ok_or("no stdin pipe")?;
        let stdout = child.stdout.take().ok_or("no stdout pipe")?;
        let stderr_pipe = child.stderr.take().ok_or("no stderr pipe")?;

        let (tx, incoming) = mpsc::unbounded_channel();
        tokio::spawn(read_messages(stdout, tx));
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
            stdin,
            incoming,
            stderr,
            next_id: 1,
            diagnostics: HashMap::new(),
        })
    }

    /// The last lines the server wrote to stderr.
    pub fn stderr_tail(&self, lines: usize) -> String {
        let text = self
            .stderr
            .lock()
            .map(|q| q.iter().cloned().collect::<Vec<_>>().join("\n"))
            .unwrap_or_default();
        tail_lines(&text, lines)
    }

    /// `initialize` with `root` as the workspace, then `initialized`.
    pub async fn initialize(&mut self, root: &Path, deadline: Instant) -> Result<(), String> {
        let root_uri = file_uri(root)?;
        #[allow(deprecated)] // root_uri: older servers still read it.
        let params = InitializeParams {
            process_id: Some(std::process::id()),
            root_uri: Some(root_uri.clone()),
            workspace_folders: Some(vec![WorkspaceFolder {
                uri: root_uri,
                name: root
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| "workspace".into()),
            }]),
            capabilities: ClientCapabilities {
                text_document: Some(TextDocumentClientCapabilities {
                    publish_diagnostics: Some(PublishDiagnosticsClientCapabilities {
                        related_information: Some(false),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            },
            client_info: Some(ClientInfo {
                name: "supervisor".into(),
                version: Some(env!("CARGO_PKG_VERSION").into()),
            }),
            ..Default::default()
        };
        let params = serde_json::to_value(params).map_err(|e| e.to_string())?;
        self.request("initialize", params, deadline).await?;
        self.notify("initialized", json!({})).await
    }

    /// Open `file` (absolute) with its current text.
    pub async fn open(
        &mut self,
        file: &Path,
        language_id: &str,
        text: String,
    ) -> Result<(), String> {
        let params = DidOpenTextDocumentParams {
            text_document: TextDocumentItem {
                uri: file_uri(file)?,
                language_id: language_id.into(),
                version: 1,
                text,
            },
        };
        let params = serde_json::to_value(params).map_err(|e| e.to_string())?;
        self.notify("textDocument/didOpen", params).await
    }

    /// Wait until every file of `files` has had diagnostics published (then a short quiet period for
    /// updates), or until `deadline`. Returns the latest diagnostics of the files that reported; those
    /// that stayed silent until the deadline are listed apart (the server is alive but did not answer
    /// for them). Errors mean the server died or spoke nonsense.
    pub async fn collect_diagnostics(
        &mut self,
        files: &[PathBuf],
        deadline: Instant,
    ) -> Result<Collected, String> {
        let wanted: HashSet<&PathBuf> = files.iter().collect();
        loop {
            let all_reported = wanted.iter().all(|f| self.diagnostics.contains_key(*f));
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            let wait = if all_reported {
                SETTLE.min(deadline - now)
            } else {
                deadline - now
            };
            match tokio::time::timeout(wait, self.incoming.recv()).await {
                Err(_) if all_reported => break,
                Err(_) => continue,
                Ok(Some(Ok(msg))) => self.handle(msg).await?,
                Ok(Some(Err(e))) => return Err(e),
                Ok(None) => return Err(self.exited()),
            }
        }
        let mut collected = Collected::default();
        for f in files {
            match self.diagnostics.get(f) {
                Some(d) => {
                    collected.diagnostics.insert(f.clone(), d.clone());
                }
                None => collected.silent.push(f.clone()),
            }
        }
        Ok(collected)
    }

    /// `shutdown` then `exit`; the process group is killed if the server lingers.
    pub async fn shutdown(mut self) {
        let deadline = Instant::now() + Duration::from_secs(5);
        if self
            .request("shutdown", Value::Null, deadline)
            .await
            .is_ok()
        {
            let _ = self.notify("exit", Value::Null).await;
            if let Ok(Ok(_)) = tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await
            {
                self.guard.disarm();
                return;
            }
        }
        self.guard.kill();
    }

    async fn request(
        &mut self,
        method: &str,
        params: Value,
        deadline: Instant,
    ) -> Result<Value, String> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await?;
        loop {
            let now = Instant::now();
            if now >= deadline {
                return Err(format!("{} did not answer `{method}` in time", self.name));
            }
            let msg = match tokio::time::timeout(deadline - now, self.incoming.recv()).await {
                Err(_) => return Err(format!("{} did not answer `{method}` in time", self.name)),
                Ok(None) => return Err(self.exited()),
                Ok(Some(Err(e))) => return Err(e),
                Ok(Some(Ok(msg))) => msg,
            };
            let is_response = msg.get("method").is_none() && msg.get("id") == Some(&json!(id));
            if !is_response {
                self.handle(msg).await?;
                continue;
            }
            if let Some(err) = msg.get("error") {
                return Err(format!(
                    "{} answered `{method}` with an error: {}",
                    self.name,
                    err.get("message").and_then(Value::as_str).unwrap_or("?")
                ));
            }
            return Ok(msg.get("result").cloned().unwrap_or(Value::Null));
        }
    }

    async fn notify(&mut self, method: &str, params: Value) -> Result<(), String> {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
            .await
    }

    /// Answer server requests (configuration, progress, registrations) and record diagnostics.
    async fn handle(&mut self, msg: Value) -> Result<(), String> {
        let Some(method) = msg.get("method").and_then(Value::as_str) else {
            return Ok(()); // a late response to something we no longer wait for
        };
        if let Some(id) = msg.get("id").cloned() {
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
            return self
                .send(&json!({"jsonrpc": "2.0", "id": id, "result": result}))
                .await;
        }
        if method == "textDocument/publishDiagnostics" {
            let params: PublishDiagnosticsParams =
                serde_json::from_value(msg.get("params").cloned().unwrap_or(Value::Null))
                    .map_err(|e| format!("{} sent malformed diagnostics: {e}", self.name))?;
            if let Some(path) = uri_to_path(params.uri.as_str()) {
                self.diagnostics.insert(path, params.diagnostics);
            }
        }
        Ok(())
    }

    async fn send(&mut self, msg: &Value) -> Result<(), String> {
        let body = serde_json::to_vec(msg).map_err(|e| e.to_string())?;
        let mut frame = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
        frame.extend_from_slice(&body);
        match self.stdin.write_all(&frame).await {
            Ok(()) => self.stdin.flush().await.map_err(|e| e.to_string()),
            Err(_) => Err(self.exited()),
        }
    }

    fn exited(&mut self) -> String {
        let status = match self.child.try_wait() {
            Ok(Some(s)) => super::tool::status_text(s),
            _ => "closed its output".into(),
        };
        let tail = brief(&self.stderr_tail(40));
        if tail.is_empty() {
            format!("{} exited ({status})", self.name)
        } else {
            format!("{} exited ({status}): {tail}", self.name)
        }
    }
}

/// Read Content-Length framed messages until EOF or a framing error.
async fn read_messages<R: AsyncRead + Unpin>(
    stream: R,
    tx: mpsc::UnboundedSender<Result<Value, String>>,
) {
    let mut reader = BufReader::new(stream);
    loop {
        match read_message(&mut reader).await {
            Ok(Some(msg)) => {
                if tx.send(Ok(msg)).is_err() {
                    return;
                }
            }
            Ok(None) => return,
            Err(e) => {
                let _ = tx.send(Err(e));
                return;
            }
        }
    }
}

/// One framed message; `Ok(None)` at a clean EOF.
pub async fn read_message<R: AsyncBufReadExt + Unpin>(
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
pub fn file_uri(path: &Path) -> Result<Uri, String> {
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
pub fn uri_to_path(uri: &str) -> Option<PathBuf> {
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
}
