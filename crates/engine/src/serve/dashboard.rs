//! The live dashboard of `serve` and `watch --dashboard`, and what feeds it:
//!
//! - `GET /dashboard`: the queue, the live runs (stage, agent, elapsed time, tokens, cost, gate
//!   rounds) and the last finished runs; `GET /dashboard/runs/<run-id>`: a run's timeline and map.
//!   Plain HTML and a little JavaScript from the binary, no other resources.
//! - `GET /dashboard/events`: server-sent events, one per change of the picture as it happens
//!   (the scheduler's decisions, each journal event of each run): `{"event": …, "state": …}`.
//! - `GET /api/state`: the picture as JSON (what `supervisor status` prints);
//!   `GET /api/runs/<run-id>`: a run's timeline and map as text.
//! - `GET /metrics`: the process's metrics (OpenMetrics text).
//!
//! With a token, every one of them asks for it: `Authorization: Bearer <token>`, or a cookie set
//! by opening any page once with `?token=<token>` (the page is then shown without it).
//! The running process says where it serves in `.supervisor/watch/status.json`.

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::Router;
use axum::extract::{Path as UrlPath, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{Next, from_fn_with_state};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use futures_util::Stream;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use crate::pipeline::{Event, RunRecord, read_entries, runs_dir};
use crate::runtime::Monitor;

const DASHBOARD_HTML: &str = include_str!("dashboard.html");
const RUN_HTML: &str = include_str!("run.html");
const STYLE_CSS: &str = include_str!("dashboard.css");
/// The cookie a `?token=` sets.
const COOKIE: &str = "supervisor_dashboard";

/// What the dashboard serves.
pub struct Dashboard {
    pub monitor: Monitor,
    /// The repository root: where run journals are read.
    pub repo_root: PathBuf,
    /// Asked of every request when set.
    pub token: Option<String>,
    /// Cancelled when the process stops: open event streams end so the server can.
    pub stop: CancellationToken,
}

/// The dashboard's, the API's and the metrics' routes.
pub fn routes(dashboard: Dashboard) -> Router {
    let shared = Arc::new(dashboard);
    Router::new()
        .route("/", get(|| async { Redirect::to("/dashboard") }))
        .route("/dashboard", get(page))
        .route("/dashboard/events", get(events))
        .route("/dashboard/style.css", get(style))
        .route("/dashboard/runs/{run_id}", get(run_page))
        .route("/api/state", get(state))
        .route("/api/runs/{run_id}", get(run))
        .route("/metrics", get(metrics))
        .layer(from_fn_with_state(shared.clone(), guard))
        .with_state(shared)
}

/// Whether `addr` is a loopback address (the only kind served without a token).
pub fn is_loopback(addr: IpAddr) -> bool {
    match addr {
        IpAddr::V4(a) => a.is_loopback(),
        IpAddr::V6(a) => a.is_loopback() || a.to_ipv4_mapped().is_some_and(|a| a.is_loopback()),
    }
}

/// The dashboard's token from the environment variable `name`: an error says what to set.
pub fn token_from_env(name: &str) -> Result<String, String> {
    match std::env::var(name) {
        Ok(t) if t.trim().len() >= 16 => Ok(t.trim().to_string()),
        Ok(_) => Err(format!(
            "${name} holds a dashboard token shorter than 16 characters: use a long random one (openssl rand -hex 32)"
        )),
        Err(_) => Err(format!(
            "the environment variable {name} (the dashboard's token) is not set: put a long random token in it (openssl rand -hex 32)"
        )),
    }
}

/// Ask for the token, when there is one.
async fn guard(State(d): State<Arc<Dashboard>>, request: Request, next: Next) -> Response {
    let Some(token) = d.token.as_deref() else {
        return next.run(request).await;
    };
    let headers = request.headers();
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|t| same(t.trim(), token));
    let cookie = cookie(headers).is_some_and(|t| same(&t, token));
    if bearer || cookie {
        return next.run(request).await;
    }
    let query = request.uri().query().unwrap_or("");
    let given = url::form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v.into_owned());
    if given.as_deref().is_some_and(|t| same(t, token)) {
        // Once: the cookie holds it from now on, and the address no longer shows it.
        let path = request.uri().path().to_string();
        let mut response = Redirect::to(&path).into_response();
        let set = format!("{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict");
        if let Ok(value) = HeaderValue::from_str(&set) {
            response.headers_mut().insert(header::SET_COOKIE, value);
        }
        return response;
    }
    let mut response = (
        StatusCode::UNAUTHORIZED,
        "this dashboard asks for its token: send `Authorization: Bearer <token>`, or open /dashboard?token=<token> once in a browser\n",
    )
        .into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"supervisor\""),
    );
    response
}

/// The token the cookie holds.
fn cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v.to_string())
}

/// Equal, in time that does not depend on where they differ.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |diff, (x, y)| diff | (x ^ y))
            == 0
}

/// A file of the binary's, as `content_type`.
fn file(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response()
}

async fn page() -> Response {
    file("text/html; charset=utf-8", DASHBOARD_HTML)
}

async fn run_page() -> Response {
    file("text/html; charset=utf-8", RUN_HTML)
}

async fn style() -> Response {
    file("text/css; charset=utf-8", STYLE_CSS)
}

async fn state(State(d): State<Arc<Dashboard>>) -> Response {
    axum::Json(d.monitor.picture()).into_response()
}

async fn metrics() -> Response {
    (
        [(header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)],
        crate::metrics::render(),
    )
        .into_response()
}

/// The picture now, then each update as it happens, until the process stops.
async fn events(
    State(d): State<Arc<Dashboard>>,
) -> Sse<impl Stream<Item = Result<SseEvent, Infallible>>> {
    // Subscribed before the first picture is taken: no update falls between.
    let updates = d.monitor.subscribe();
    let first = d.monitor.update();
    let stop = d.stop.clone();
    let stream = futures_util::stream::unfold(
        (Some(first), updates, stop),
        |(first, mut updates, stop)| async move {
            if let Some(first) = first {
                return Some((Ok(SseEvent::default().data(&*first)), (None, updates, stop)));
            }
            loop {
                let next = tokio::select! {
                    () = stop.cancelled() => return None,
                    next = updates.recv() => next,
                };
                match next {
                    Ok(update) => {
                        return Some((
                            Ok(SseEvent::default().data(&*update)),
                            (None, updates, stop),
                        ));
                    }
                    // Each update carries the whole picture: the next one catches up.
                    Err(RecvError::Lagged(_)) => continue,
                    Err(RecvError::Closed) => return None,
                }
            }
        },
    );
    Sse::new(stream).keep_alive(KeepAlive::default())
}

/// A run's timeline (as `supervisor runs show` prints it) and its map (mermaid).
async fn run(State(d): State<Arc<Dashboard>>, UrlPath(run_id): UrlPath<String>) -> Response {
    let sound = !run_id.is_empty()
        && run_id.len() <= 128
        && run_id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-');
    if !sound {
        return (
            StatusCode::BAD_REQUEST,
            "a run id is made of letters, digits and dashes (as `supervisor runs` lists them)\n",
        )
            .into_response();
    }
    let path = runs_dir(&d.repo_root).join(&run_id).join("events.jsonl");
    if !path.is_file() {
        return (
            StatusCode::NOT_FOUND,
            format!("no run {run_id} here: `supervisor runs` lists the runs\n"),
        )
            .into_response();
    }
    let entries = match read_entries(&path) {
        Ok(entries) => entries,
        Err(e) => return (StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")).into_response(),
    };
    let live = d.monitor.picture()["live"]
        .as_array()
        .is_some_and(|live| live.iter().any(|l| l["run_id"] == run_id.as_str()));
    let record = RunRecord::fold(&run_id, path, &entries, live);
    let transitions: Vec<_> = entries
        .iter()
        .filter_map(|e| match &e.event {
            Event::Applied { transition } => Some(transition.clone()),
            _ => None,
        })
        .collect();
    axum::Json(json!({
        "run_id": run_id,
        "issue": record.issue,
        "status": record.status.as_str(),
        "live": live,
        "timeline": crate::report::timeline_text(&record, &entries),
        "map": crate::report::run_map(&transitions),
        "events": entries.len(),
    }))
    .into_response()
}

/// Where a running `serve` or `watch` serves its dashboard: `.supervisor/watch/status.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StatusFile {
    /// The base URL (`http://127.0.0.1:PORT`).
    pub url: String,
    pub pid: u32,
    /// `serve` or `watch`.
    pub command: String,
    pub started_at: String,
    /// The environment variable holding the token, when one is asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_env: Option<String>,
}

impl StatusFile {
    pub fn path(repo_root: &Path) -> PathBuf {
        repo_root.join(".supervisor/watch/status.json")
    }

    /// The URL a client on this machine reaches `local` by.
    pub fn url_of(local: SocketAddr) -> String {
        let host = match local.ip() {
            ip if ip.is_unspecified() && ip.is_ipv4() => "127.0.0.1".to_string(),
            ip if ip.is_unspecified() => "[::1]".to_string(),
            IpAddr::V6(ip) => format!("[{ip}]"),
            ip => ip.to_string(),
        };
        format!("http://{host}:{}", local.port())
    }

    /// Write it; it is removed when the returned guard is dropped.
    pub fn write(&self, repo_root: &Path) -> std::io::Result<StatusGuard> {
        let path = Self::path(repo_root);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let text = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, &path)?;
        Ok(StatusGuard {
            path,
            pid: self.pid,
        })
    }

    /// The file of `repo_root`, when there is one.
    pub fn read(repo_root: &Path) -> Result<Option<StatusFile>, String> {
        let path = Self::path(repo_root);
        match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text)
                .map(Some)
                .map_err(|e| format!("{} is damaged ({e}): remove it", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("cannot read {}: {e}", path.display())),
        }
    }
}

/// Removes the status file when the process stops serving (if it is still this process's).
pub struct StatusGuard {
    path: PathBuf,
    pid: u32,
}

impl Drop for StatusGuard {
    fn drop(&mut self) {
        let ours = std::fs::read_to_string(&self.path)
            .ok()
            .and_then(|t| serde_json::from_str::<StatusFile>(&t).ok())
            .is_some_and(|f| f.pid == self.pid);
        if ours {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// The picture's JSON shape, for clients (`supervisor status`).
pub fn is_picture(v: &Value) -> bool {
    v.get("live").is_some_and(Value::is_array) && v.get("queue").is_some_and(Value::is_array)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole() {
        assert!(same("abcdef", "abcdef"));
        assert!(!same("abcdef", "abcdeg"));
        assert!(!same("abc", "abcdef"));
        assert!(!same("", "a"));
    }

    #[test]
    fn only_loopback_goes_without_a_token() {
        assert!(is_loopback("127.0.0.1".parse().unwrap()));
        assert!(is_loopback("::1".parse().unwrap()));
        assert!(is_loopback("::ffff:127.0.0.1".parse().unwrap()));
        assert!(!is_loopback("0.0.0.0".parse().unwrap()));
        assert!(!is_loopback("10.1.2.3".parse().unwrap()));
    }

    #[test]
    fn the_url_of_an_unspecified_bind_is_loopback() {
        let url = |a: &str| StatusFile::url_of(a.parse().unwrap());
        assert_eq!(url("0.0.0.0:8080"), "http://127.0.0.1:8080");
        assert_eq!(url("127.0.0.1:1"), "http://127.0.0.1:1");
        assert_eq!(url("[::]:9"), "http://[::1]:9");
    }

    #[test]
    fn the_cookie_is_found_among_others() {
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; supervisor_dashboard=tok; b=2"),
        );
        assert_eq!(cookie(&h).as_deref(), Some("tok"));
    }
}
