//! Two small HTTP servers on the loopback for the Action's tests: a git server (`git http-backend`
//! behind HTTP Basic authentication) that records the credentials each request carries, and a
//! release host serving files at `/{owner}/{repo}/releases/download/{tag}/{file}`.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::body::{Body, to_bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::Response;
use tokio::io::AsyncWriteExt;

/// One request the git server received.
#[derive(Debug, Clone)]
pub(crate) struct GitRequest {
    pub method: String,
    pub path: String,
    /// The `Authorization` header, as sent.
    pub authorization: Option<String>,
}

/// Whether an `Authorization` header is let in.
type Admit = Box<dyn Fn(&str) -> bool + Send + Sync>;

struct GitState {
    root: PathBuf,
    seen: Mutex<Vec<GitRequest>>,
    admit: Admit,
}

/// `git http-backend` serving the repositories under a directory.
pub(crate) struct GitServer {
    pub url: String,
    state: Arc<GitState>,
    task: tokio::task::JoinHandle<()>,
}

impl GitServer {
    pub(crate) async fn start(root: PathBuf) -> GitServer {
        GitServer::start_with(root, |_| true).await
    }

    /// A server that answers 401, as GitHub does to a token it no longer accepts, to every request
    /// whose `Authorization` header `admit` refuses.
    pub(crate) async fn start_with(
        root: PathBuf,
        admit: impl Fn(&str) -> bool + Send + Sync + 'static,
    ) -> GitServer {
        let state = Arc::new(GitState {
            root,
            seen: Mutex::new(Vec::new()),
            admit: Box::new(admit),
        });
        let app = axum::Router::new()
            .fallback(git_cgi)
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        GitServer { url, state, task }
    }

    pub(crate) fn requests(&self) -> Vec<GitRequest> {
        self.state.seen.lock().unwrap().clone()
    }
}

impl Drop for GitServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn git_cgi(State(state): State<Arc<GitState>>, req: Request) -> Response {
    let method = req.method().to_string();
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or_default().to_string();
    let headers = req.headers().clone();
    let authorization = header(&headers, "authorization");
    state.seen.lock().unwrap().push(GitRequest {
        method: method.clone(),
        path: path.clone(),
        authorization: authorization.clone(),
    });
    // Like a real host: no (valid) credentials, no access; then git asks its credential helper.
    if !authorization.as_deref().is_some_and(|a| (state.admit)(a)) {
        return Response::builder()
            .status(StatusCode::UNAUTHORIZED)
            .header("www-authenticate", "Basic realm=\"git\"")
            .body(Body::empty())
            .unwrap();
    }
    let body = to_bytes(req.into_body(), usize::MAX)
        .await
        .unwrap_or_default();
    let mut cmd = tokio::process::Command::new("git");
    cmd.arg("http-backend")
        .env("GIT_PROJECT_ROOT", &state.root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("REQUEST_METHOD", &method)
        .env("PATH_INFO", &path)
        .env("QUERY_STRING", &query)
        .env("CONTENT_LENGTH", body.len().to_string())
        .env("REMOTE_USER", "pusher")
        .env("REMOTE_ADDR", "127.0.0.1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    if let Some(ct) = header(&headers, "content-type") {
        cmd.env("CONTENT_TYPE", ct);
    }
    if let Some(enc) = header(&headers, "content-encoding") {
        cmd.env("HTTP_CONTENT_ENCODING", enc);
    }
    if let Some(proto) = header(&headers, "git-protocol") {
        cmd.env("GIT_PROTOCOL", proto);
    }
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = tokio::spawn(async move {
        let _ = stdin.write_all(&body).await;
    });
    let out = child.wait_with_output().await.unwrap();
    let _ = writer.await;
    cgi_response(&out.stdout)
}

/// A CGI answer (headers, blank line, body) as an HTTP response.
fn cgi_response(raw: &[u8]) -> Response {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|p| (p, p + 4))
        .or_else(|| {
            raw.windows(2)
                .position(|w| w == b"\n\n")
                .map(|p| (p, p + 2))
        })
        .unwrap_or((raw.len(), raw.len()));
    let head = String::from_utf8_lossy(&raw[..split.0]);
    let mut builder = Response::builder().status(StatusCode::OK);
    for line in head.lines() {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("status") {
            let code: u16 = value
                .split_whitespace()
                .next()
                .and_then(|c| c.parse().ok())
                .unwrap_or(500);
            builder = builder.status(code);
        } else if let (Ok(n), Ok(v)) = (
            HeaderName::from_bytes(name.trim().as_bytes()),
            HeaderValue::from_str(value),
        ) {
            builder = builder.header(n, v);
        }
    }
    builder.body(Body::from(raw[split.1..].to_vec())).unwrap()
}

fn header(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(String::from)
}

/// `Authorization: Basic` of `user:password`, as git sends it.
pub(crate) fn basic(user: &str, password: &str) -> String {
    format!("Basic {}", base64(format!("{user}:{password}").as_bytes()))
}

/// Standard base64 with padding.
pub(crate) fn base64(data: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ABC[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

struct ReleaseState {
    files: BTreeMap<String, Vec<u8>>,
    seen: Mutex<Vec<String>>,
}

/// A release host: `GET {url}/{path}` answers the file stored under `path`, or 404.
pub(crate) struct ReleaseServer {
    pub url: String,
    state: Arc<ReleaseState>,
    task: tokio::task::JoinHandle<()>,
}

impl ReleaseServer {
    pub(crate) async fn start(files: BTreeMap<String, Vec<u8>>) -> ReleaseServer {
        let state = Arc::new(ReleaseState {
            files,
            seen: Mutex::new(Vec::new()),
        });
        let app = axum::Router::new()
            .fallback(release_file)
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        ReleaseServer { url, state, task }
    }

    /// Paths asked for, in order.
    pub(crate) fn requests(&self) -> Vec<String> {
        self.state.seen.lock().unwrap().clone()
    }
}

impl Drop for ReleaseServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn release_file(State(state): State<Arc<ReleaseState>>, req: Request) -> Response {
    let path = req.uri().path().trim_start_matches('/').to_string();
    state.seen.lock().unwrap().push(path.clone());
    match state.files.get(&path) {
        Some(bytes) => Response::new(Body::from(bytes.clone())),
        None => Response::builder()
            .status(StatusCode::NOT_FOUND)
            .body(Body::from("Not Found"))
            .unwrap(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64_matches_the_standard_alphabet_and_padding() {
        assert_eq!(super::base64(b""), "");
        assert_eq!(super::base64(b"f"), "Zg==");
        assert_eq!(super::base64(b"fo"), "Zm8=");
        assert_eq!(super::base64(b"foo"), "Zm9v");
        assert_eq!(
            super::base64(b"x-access-token:abc"),
            "eC1hY2Nlc3MtdG9rZW46YWJj"
        );
    }
}
