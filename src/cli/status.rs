//! `supervisor status`: the picture of a running `serve` or `watch --dashboard` — its queue, live
//! runs and last finished runs — asked of the process itself (found by the
//! `.supervisor/watch/status.json` it writes, or `--url`), printed for a terminal or as JSON.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use serde_json::Value;

use super::output::{errln, outln};
use super::run::canonical;
use super::{EXIT_OK, EXIT_STOPPED, EXIT_USAGE};
use crate::report::{human_duration, human_tokens};
use crate::serve::dashboard::{StatusFile, is_picture};

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The running process's address (`http://127.0.0.1:8080`) [default: the one in
    /// .supervisor/watch/status.json].
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// The environment variable holding the dashboard's token [default: the one the running
    /// process names].
    #[arg(long, value_name = "NAME")]
    pub token_env: Option<String>,
    /// Repository root (default: the current directory).
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub repo_root: PathBuf,
    /// Print the picture as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

pub(super) fn run(args: StatusArgs) -> u8 {
    let runtime = match super::run::runtime("status") {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    runtime.block_on(status(args))
}

/// Where to ask, and with which token variable; an error is printed and its exit code returned.
fn target(args: &StatusArgs) -> Result<(String, Option<String>), u8> {
    if let Some(url) = &args.url {
        return Ok((
            url.trim_end_matches('/').to_string(),
            args.token_env.clone(),
        ));
    }
    let root = canonical(&args.repo_root);
    let file = match StatusFile::read(&root) {
        Ok(Some(file)) => file,
        Ok(None) => {
            errln!(
                "supervisor status: no `supervisor serve` nor `supervisor watch --dashboard` is running for {} (no {}); start one, or pass --url",
                root.display(),
                StatusFile::path(&root).display()
            );
            return Err(EXIT_STOPPED);
        }
        Err(e) => {
            errln!("supervisor status: {e}");
            return Err(EXIT_USAGE);
        }
    };
    let alive = i32::try_from(file.pid).is_ok_and(|pid| unsafe { libc::kill(pid, 0) } == 0);
    if !alive {
        errln!(
            "supervisor status: the `supervisor {}` that wrote {} (pid {}) is no longer running: nothing is running for {}",
            file.command,
            StatusFile::path(&root).display(),
            file.pid,
            root.display()
        );
        return Err(EXIT_STOPPED);
    }
    // The file lies in the checkout, where an agent without a sandbox can write: a token goes only
    // to this machine from it, and only `--url` sends one elsewhere.
    if !on_this_machine(&file.url) {
        errln!(
            "supervisor status: {} names {}, which is not on this machine: pass --url to ask it",
            StatusFile::path(&root).display(),
            file.url
        );
        return Err(EXIT_USAGE);
    }
    Ok((file.url, args.token_env.clone().or(file.token_env)))
}

/// Whether `url` is served on this machine's loopback.
fn on_this_machine(url: &str) -> bool {
    let Ok(url) = url::Url::parse(url) else {
        return false;
    };
    match url.host() {
        Some(url::Host::Ipv4(a)) => crate::serve::dashboard::is_loopback(a.into()),
        Some(url::Host::Ipv6(a)) => crate::serve::dashboard::is_loopback(a.into()),
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        None => false,
    }
}

async fn status(args: StatusArgs) -> u8 {
    let (url, token_env) = match target(&args) {
        Ok(t) => t,
        Err(code) => return code,
    };
    let token = match token_env.as_deref().map(std::env::var) {
        Some(Ok(token)) => Some(token.trim().to_string()),
        Some(Err(_)) => {
            errln!(
                "supervisor status: the dashboard asks for its token: set the environment variable {} to it",
                token_env.unwrap_or_default()
            );
            return EXIT_USAGE;
        }
        None => None,
    };
    let picture = match ask(&url, token.as_deref()).await {
        Ok(picture) => picture,
        Err(e) => {
            errln!("supervisor status: {e}");
            return EXIT_STOPPED;
        }
    };
    if args.json {
        outln!("{picture}");
    } else {
        outln!("{}", picture_text(&url, &picture));
    }
    EXIT_OK
}

/// `GET <url>/api/state`.
async fn ask(url: &str, token: Option<&str>) -> Result<Value, String> {
    let client = crate::github::http_client(url, Duration::from_secs(10))
        .map_err(|e| format!("cannot make an HTTP client: {e}"))?;
    let mut request = client.get(format!("{url}/api/state"));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let unreachable = |e: reqwest::Error| {
        format!(
            "nothing answers at {url} ({e}): is `supervisor serve` or `watch --dashboard` still running there?"
        )
    };
    let response = request.send().await.map_err(unreachable)?;
    let status = response.status();
    let body = response.text().await.map_err(unreachable)?;
    if status == reqwest::StatusCode::UNAUTHORIZED {
        return Err(format!(
            "{url} asks for the dashboard's token: pass --token-env NAME with the variable holding it"
        ));
    }
    if !status.is_success() {
        return Err(format!(
            "{url}/api/state answered {status}: {}",
            body.trim()
        ));
    }
    serde_json::from_str::<Value>(&body)
        .ok()
        .filter(is_picture)
        .ok_or_else(|| {
            format!("{url} is not a supervisor dashboard (its /api/state is not the picture)")
        })
}

fn cost(usd: f64) -> String {
    if usd > 0.0 {
        format!("${usd:.2}")
    } else {
        "-".into()
    }
}

fn since_ms(at: &Value, now: &Value) -> u64 {
    let parse = |v: &Value| {
        v.as_str()
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
    };
    match (parse(at), parse(now)) {
        (Some(at), Some(now)) => (now - at).num_milliseconds().max(0) as u64,
        _ => 0,
    }
}

/// The picture for a terminal.
pub(super) fn picture_text(url: &str, p: &Value) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let text = |v: &Value| v.as_str().unwrap_or("-").to_string();
    let _ = writeln!(
        out,
        "watcher {} (pid {}) at {url}, up {}{}",
        text(&p["watcher"]),
        p["pid"],
        human_duration(since_ms(&p["started_at"], &p["now"])),
        if p["draining"] == true {
            ", stopping"
        } else {
            ""
        }
    );
    let numbers = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| a.iter().map(|n| format!("#{n}")).collect())
            .unwrap_or_default()
    };
    let queue = numbers(&p["queue"]);
    let _ = writeln!(
        out,
        "queue: {}",
        if queue.is_empty() {
            "empty".to_string()
        } else {
            queue.join(", ")
        }
    );
    let live = p["live"].as_array().cloned().unwrap_or_default();
    let _ = writeln!(out, "live runs: {}", live.len());
    for r in &live {
        let agent = match (&r["agent"], r["attempt"].as_u64()) {
            (Value::String(a), Some(n)) if n > 1 => format!(" · {a} (attempt {n})"),
            (Value::String(a), _) => format!(" · {a}"),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "  #{}  {}{agent} · {} · {} tokens · {}  {}",
            r["issue"],
            text(&r["stage"]),
            human_duration(since_ms(&r["since"], &p["now"])),
            human_tokens(r["tokens"].as_u64().unwrap_or(0)),
            cost(r["cost_usd"].as_f64().unwrap_or(0.0)),
            text(&r["run_id"]),
        );
        if let Some(round) = r["gate_rounds"].as_array().and_then(|a| a.last()) {
            let gates: Vec<String> = round["gates"]
                .as_array()
                .map(|g| {
                    g.iter()
                        .map(|g| format!("{} {}", text(&g["name"]), text(&g["mark"])))
                        .collect()
                })
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "      gates {} #{}: {}{}",
                text(&round["stage"]),
                round["attempt"],
                gates.join(", "),
                round["verdict"]
                    .as_str()
                    .map(|v| format!(" ({v})"))
                    .unwrap_or_default()
            );
        }
        if let Some(reason) = r["stopping"].as_str() {
            let _ = writeln!(out, "      stopping: {reason}");
        }
        if r["silent"] == true {
            let _ = writeln!(
                out,
                "      silent: nothing journalled for {} (watch.silentRunMin is {} min)",
                human_duration(since_ms(&r["last_event"]["at"], &p["now"])),
                p["silent_run_min"]
            );
        }
    }
    let finished = p["finished"].as_array().cloned().unwrap_or_default();
    if !finished.is_empty() {
        let _ = writeln!(out, "finished (newest first):");
        for f in &finished {
            let _ = writeln!(
                out,
                "  #{}  {}  {}  {}",
                f["issue"],
                text(&f["end"]),
                f["pr_url"].as_str().or(f["error"].as_str()).unwrap_or("-"),
                text(&f["run_id"]),
            );
        }
    }
    out.trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The status file is read from the checkout: a URL off this machine in it is refused, so a
    /// planted file cannot send the dashboard token (or any variable it names) elsewhere.
    #[test]
    fn only_a_url_on_this_machine_is_taken_from_the_status_file() {
        for ok in [
            "http://127.0.0.1:8080",
            "http://[::1]:9/",
            "http://localhost:1",
            "http://127.9.9.9",
        ] {
            assert!(on_this_machine(ok), "{ok}");
        }
        for bad in [
            "http://10.0.0.1:8080",
            "https://evil.example",
            "http://127.0.0.1.evil.example",
            "not a url",
            "http://0.0.0.0:80",
        ] {
            assert!(!on_this_machine(bad), "{bad}");
        }
    }
    use serde_json::json;

    #[test]
    fn the_picture_reads_as_lines() {
        let p = json!({
            "watcher": "w-1", "pid": 42, "started_at": "2026-01-01T10:00:00Z",
            "now": "2026-01-01T10:05:00Z", "silent_run_min": 30, "draining": false,
            "queue": [3, 4],
            "live": [{
                "issue": 1, "run_id": "1-x", "since": "2026-01-01T10:04:00Z", "stage": "Research",
                "agent": "researcher", "attempt": 1, "tokens": 1500, "cost_usd": 0.5,
                "gate_rounds": [{"stage": "Implementation", "attempt": 1, "verdict": "pass",
                    "gates": [{"name": "ci", "mark": "pass", "ms": 3}]}],
                "silent": true, "last_event": {"kind": "stage-started", "at": "2026-01-01T09:30:00Z"}
            }],
            "finished": [{"issue": 2, "end": "pull-request", "pr_url": "http://x/pull/9", "run_id": "2-y"}]
        });
        let text = picture_text("http://127.0.0.1:1", &p);
        assert!(text.contains("queue: #3, #4"), "{text}");
        assert!(text.contains("#1  Research · researcher · 1m"), "{text}");
        assert!(
            text.contains("gates Implementation #1: ci pass (pass)"),
            "{text}"
        );
        assert!(
            text.contains("silent: nothing journalled for 35m"),
            "{text}"
        );
        assert!(
            text.contains("#2  pull-request  http://x/pull/9  2-y"),
            "{text}"
        );
    }
}
