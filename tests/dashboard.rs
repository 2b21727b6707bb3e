//! Running unattended, seen from outside: the live dashboard in a real headless browser, `/metrics`
//! scraped and held to the run journals and the sandbox's own request counts, `supervisor status`
//! asking a running watcher, and the dashboard's token. The real binary against the sandbox
//! GitHub, scripted agents that take a moment per stage so that each stage is seen.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use supervisor::demo::{World, WorldSpec};
use supervisor::events::WebhookSecret;
use supervisor::sandbox::{Act, WebhookTarget};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

#[path = "support/specs.rs"]
mod specs;
use specs::*;

#[path = "support/chromium.rs"]
mod chromium;
#[path = "support/ports.rs"]
mod ports;

const BIN: &str = env!("CARGO_BIN_EXE_supervisor");
const TOKEN: &str = "a-dashboard-token-0123456789abcdef";

/// Each agent first takes `secs` (a command it runs), so its stage shows for that long.
fn slow(spec: &mut WorldSpec, secs: &str) {
    for role in [
        "researcher",
        "architect",
        "test-designer",
        "developer",
        "auditor",
    ] {
        for attempt in spec.script[role].as_array_mut().unwrap() {
            attempt
                .as_array_mut()
                .unwrap()
                .insert(0, json!({ "run": format!("sleep {secs}") }));
        }
    }
}

async fn world(spec: WorldSpec, webhook: Option<WebhookTarget>) -> (tempfile::TempDir, World) {
    let mut spec = spec;
    spec.issue.column = Some("Backlog".into());
    let dir = tempfile::tempdir().unwrap();
    let world = World::build_with_webhook(dir.path(), spec, webhook)
        .await
        .expect("world builds");
    (dir, world)
}

fn command(world: &World, args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(args).arg("--repo-root").arg(&world.repo);
    for (k, _) in std::env::vars() {
        if k.starts_with("SUPERVISOR_")
            || k == "GH_TOKEN"
            || k == "GITHUB_TOKEN"
            || k == "GITHUB_API_URL"
        {
            cmd.env_remove(k);
        }
    }
    cmd.envs(world.env()).env("RUST_LOG", "warn");
    cmd
}

#[path = "support/bot.rs"]
mod bot;
use bot::{Bot, DEADLINE};

/// `cmd` started with its notices as JSON lines.
fn spawn(mut cmd: Command) -> Bot {
    cmd.arg("--json");
    Bot::spawn(cmd)
}

/// Wait (30 s at most) until `expression` is true in the page.
fn wait_for(b: &mut chromium::Browser, what: &str, expression: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while b.eval(expression) != json!(true) {
        assert!(
            std::time::Instant::now() < deadline,
            "no {what} within 30 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn is(kind: &'static str, issue: u64) -> impl Fn(&Value) -> bool {
    move |v| v["kind"] == kind && v["issue"] == issue
}

fn move_card(world: &World, to: &str) {
    let act: Act =
        serde_json::from_value(json!({ "move": { "issue": 1, "to": to, "by": "alice" } })).unwrap();
    world.sandbox.act(act).unwrap();
}

/// The base URL the running process wrote into `.supervisor/watch/status.json`.
async fn published_url(world: &World, bot: &Bot) -> String {
    let path = world.repo.join(".supervisor/watch/status.json");
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        if let Some(file) = std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        {
            assert_eq!(file["pid"], bot.child.id().unwrap(), "{file}");
            return file["url"].as_str().unwrap().to_string();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no {} within {DEADLINE:?}; stderr:\n{}",
            path.display(),
            bot.stderr()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// An HTTP/1.1 GET over a plain TCP stream: status, head, body.
async fn get(base: &str, path: &str, headers: &[(&str, &str)]) -> (u16, String, String) {
    let host = base.trim_start_matches("http://");
    let mut s = tokio::net::TcpStream::connect(host).await.unwrap();
    let mut head = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, head.to_string(), body.to_string())
}

/// One sample of the OpenMetrics text: name, labels, value.
type Sample = (String, BTreeMap<String, String>, f64);

/// Parse the text format: `# ` lines are metadata; each other line is
/// `name{label="value",…} value` (label values may hold escaped quotes and backslashes).
fn parse_metrics(text: &str) -> Vec<Sample> {
    let mut samples = Vec::new();
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let (name, rest) = match line.find(['{', ' ']) {
            Some(i) => line.split_at(i),
            None => panic!("not a sample: {line}"),
        };
        let mut labels = BTreeMap::new();
        let value_text = if let Some(rest) = rest.strip_prefix('{') {
            let mut chars = rest.char_indices().peekable();
            let mut end = None;
            loop {
                // key="value"
                let start = match chars.peek() {
                    Some((_, '}')) => {
                        end = chars.next().map(|(i, _)| i);
                        break;
                    }
                    Some((i, _)) => *i,
                    None => break,
                };
                let eq = rest[start..].find("=\"").expect("label=\"value\"") + start;
                let key = rest[start..eq].to_string();
                while chars.peek().is_some_and(|(i, _)| *i <= eq + 1) {
                    chars.next();
                }
                let mut value = String::new();
                while let Some((_, c)) = chars.next() {
                    match c {
                        '\\' => match chars.next() {
                            Some((_, 'n')) => value.push('\n'),
                            Some((_, c)) => value.push(c),
                            None => break,
                        },
                        '"' => break,
                        c => value.push(c),
                    }
                }
                labels.insert(key, value);
                if chars.peek().is_some_and(|(_, c)| *c == ',') {
                    chars.next();
                }
            }
            let end = end.unwrap_or_else(|| panic!("unclosed labels: {line}"));
            &rest[end + 1..]
        } else {
            rest
        };
        let value = value_text
            .split_whitespace()
            .next()
            .unwrap_or_else(|| panic!("no value: {line}"));
        let value: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("not a number `{value}`: {line}"));
        samples.push((name.to_string(), labels, value));
    }
    samples
}

/// The sum of the samples of `name` whose labels include `with`.
fn metric(samples: &[Sample], name: &str, with: &[(&str, &str)]) -> f64 {
    samples
        .iter()
        .filter(|(n, labels, _)| {
            n == name
                && with
                    .iter()
                    .all(|(k, v)| labels.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|(_, _, v)| v)
        .sum()
}

async fn scrape(base: &str) -> Vec<Sample> {
    let (status, head, body) = get(base, "/metrics", &[]).await;
    assert_eq!(status, 200, "{head}\n{body}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/openmetrics-text"),
        "{head}"
    );
    assert!(body.ends_with("# EOF\n"), "{body}");
    parse_metrics(&body)
}

/// Every journal event of the world's runs.
fn journal_kinds(repo: &Path) -> Vec<Value> {
    let mut all = Vec::new();
    for run in std::fs::read_dir(repo.join(".supervisor/runs"))
        .unwrap()
        .flatten()
    {
        let path = run.path().join("events.jsonl");
        if let Ok(text) = std::fs::read_to_string(path) {
            all.extend(
                text.lines()
                    .map(|l| serde_json::from_str::<Value>(l).unwrap()),
            );
        }
    }
    all
}

fn requests_total(world: &World) -> f64 {
    world.sandbox.request_counts().values().sum::<u64>() as f64
}

#[test]
fn the_metrics_parser_reads_labels_escapes_and_bare_samples() {
    let text = "# TYPE a counter\na_total 3\nb{x=\"1\",y=\"q\\\"uote\"} 2.5\nc{} 1\n# EOF\n";
    let s = parse_metrics(text);
    assert_eq!(s.len(), 3);
    assert_eq!(metric(&s, "a_total", &[]), 3.0);
    assert_eq!(metric(&s, "b", &[("y", "q\"uote")]), 2.5);
    assert_eq!(metric(&s, "b", &[("x", "2")]), 0.0);
    assert_eq!(metric(&s, "c", &[]), 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_shows_a_run_move_through_its_stages_to_its_pull_request() {
    let Some(browser) = chromium::require("the live dashboard in a browser") else {
        return;
    };
    let mut spec = spec();
    slow(&mut spec, "1");
    let (_d, world) = world(spec, None).await;
    let mut bot = spawn(command(
        &world,
        &["watch", "--interval", "200ms", "--dashboard", "0"],
    ));
    let url = published_url(&world, &bot).await;
    bot.wait("the first poll", |v| v["kind"] == "polled").await;
    let (ready, loaded) = tokio::sync::oneshot::channel();
    let page = format!("{url}/dashboard");
    let browsing = tokio::task::spawn_blocking(move || {
        let mut b = chromium::Browser::launch(&browser, 1280, 900);
        b.open(&page);
        wait_for(
            &mut b,
            "the event stream to open",
            "document.getElementById('conn').textContent === 'live' && window.__updates > 0",
        );
        let page_id = b.eval("window.__pageId");
        let empty = b.eval("document.querySelector('tr.run') === null");
        ready.send(()).unwrap();
        // What the page shows, read from its DOM as its script left it.
        let look = r#"(() => {
            const r = document.querySelector('tr.run[data-issue="1"]');
            const f = document.querySelector('tr.finished[data-issue="1"]');
            const a = f && f.querySelector('.pr a');
            return {
                stage: r ? r.dataset.stage : null,
                agent: r ? r.querySelector('.agent').textContent : null,
                gates: r ? [...r.querySelectorAll('.gates .gate')].map(g => g.textContent) : [],
                finished: f ? f.dataset.end : null,
                pr: a ? a.getAttribute('href') : null,
                run: f ? f.querySelector('td:last-child').textContent : null,
                updates: window.__updates,
                page: window.__pageId,
                navigations: performance.getEntriesByType('navigation').length,
            };
        })()"#;
        let mut shown: Vec<(String, String)> = Vec::new();
        let mut marks: Vec<String> = Vec::new();
        let deadline = std::time::Instant::now() + DEADLINE;
        let last = loop {
            let v = b.eval(look);
            if let (Some(stage), Some(agent)) = (v["stage"].as_str(), v["agent"].as_str()) {
                let now = (stage.to_string(), agent.to_string());
                if shown.last() != Some(&now) {
                    shown.push(now);
                }
            }
            for mark in v["gates"].as_array().into_iter().flatten() {
                let mark = mark.as_str().unwrap().to_string();
                if !marks.contains(&mark) {
                    marks.push(mark);
                }
            }
            if !v["finished"].is_null() {
                break v;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the run did not end on screen; shown {shown:?}, last {v}"
            );
            std::thread::sleep(Duration::from_millis(40));
        };
        // The run's own page: its timeline and map, as `runs show` and the summary have them.
        let run_id = last["run"].as_str().unwrap().to_string();
        b.open(&format!("{page}/runs/{run_id}"));
        wait_for(
            &mut b,
            "the run's timeline",
            "document.getElementById('map').textContent.startsWith('flowchart LR')",
        );
        let timeline = b.eval("document.getElementById('timeline').textContent");
        let map = b.eval("document.getElementById('map').textContent");
        (page_id, empty, shown, marks, last, timeline, map)
    });
    loaded.await.expect("the page loaded");
    move_card(&world, "Research");
    let done = bot.wait("the run to end", is("finished", 1)).await;
    assert_eq!(done["end"], "pull-request", "{done}");
    let (page_id, empty, shown, marks, last, timeline, map) = browsing.await.unwrap();
    eprintln!("on screen, in order: {shown:?}\ngate marks: {marks:?}\nat the end: {last}");
    assert_eq!(empty, json!(true), "no run was live when the page loaded");
    let stages: Vec<&str> = shown.iter().map(|(s, _)| s.as_str()).collect();
    for (stage, agent) in [
        ("Research", "researcher"),
        ("Architecture", "architect"),
        ("Implementation", "developer"),
        ("Audit", "auditor"),
    ] {
        assert!(
            shown
                .iter()
                .any(|(s, a)| s == stage && a.starts_with(agent)),
            "{stage} with {agent} was never on screen: {shown:?}"
        );
    }
    let order: Vec<usize> = ["Research", "Architecture", "Implementation", "Audit"]
        .iter()
        .map(|s| stages.iter().position(|x| x == s).unwrap())
        .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{shown:?}");
    // The gate round before the audit, each gate with its mark (traceability warns: no test
    // names the issue's criteria).
    assert!(marks.contains(&"ci pass".to_string()), "{marks:?}");
    assert!(
        marks.iter().any(|m| m.starts_with("traceability ")),
        "{marks:?}"
    );
    assert_eq!(last["finished"], "pull-request", "{last}");
    assert_eq!(last["pr"], done["pr_url"], "{last}");
    // One page load; everything after it came over the event stream.
    assert_eq!(last["page"], page_id, "{last}");
    assert_eq!(last["navigations"], 1, "{last}");
    assert!(
        last["updates"].as_u64().unwrap() > shown.len() as u64,
        "{last}"
    );
    let timeline = timeline.as_str().unwrap();
    assert!(timeline.contains("Research"), "{timeline}");
    assert!(timeline.contains("pull request"), "{timeline}");
    assert!(map.as_str().unwrap().contains("-->"), "{map}");
    assert_eq!(bot.stop().await, 0, "{}", bot.stderr());
    assert!(
        !world.repo.join(".supervisor/watch/status.json").exists(),
        "the status file goes with the process"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_metrics_match_the_journal_and_the_sandbox_request_counts() {
    const SECRET: &str = "a-webhook-secret-of-some-length";
    let port = ports::free_port();
    let target = WebhookTarget::new(
        format!("http://127.0.0.1:{port}/webhook"),
        WebhookSecret::new(SECRET).unwrap(),
    );
    let mut spec = spec();
    slow(&mut spec, "0.5");
    let (_d, world) = world(spec, Some(target)).await;
    let before = requests_total(&world);
    let port_text = port.to_string();
    let mut cmd = command(
        &world,
        &[
            "serve",
            "--webhook-secret-env",
            "TEST_WEBHOOK_SECRET",
            "--port",
            &port_text,
        ],
    );
    cmd.env("TEST_WEBHOOK_SECRET", SECRET);
    let mut bot = spawn(cmd);
    let url = published_url(&world, &bot).await;
    assert_eq!(url, format!("http://127.0.0.1:{port}"));
    bot.wait("the first poll", |v| v["kind"] == "polled").await;
    move_card(&world, "Research");
    bot.wait("the run to start", is("started", 1)).await;
    // During the run.
    let during = scrape(&url).await;
    assert_eq!(metric(&during, "supervisor_runs_started_total", &[]), 1.0);
    assert_eq!(metric(&during, "supervisor_live_runs", &[]), 1.0);
    assert_eq!(metric(&during, "supervisor_runs_finished_total", &[]), 0.0);
    let done = bot.wait("the run to end", is("finished", 1)).await;
    assert_eq!(done["end"], "pull-request", "{done}");
    // After: brackets the sandbox's count (a request may go out between two reads).
    let after = scrape(&url).await;
    let sandbox = requests_total(&world) - before;
    let again = scrape(&url).await;
    let journal = journal_kinds(&world.repo);
    let count = |kind: &str| journal.iter().filter(|e| e["kind"] == kind).count() as f64;
    assert_eq!(metric(&after, "supervisor_runs_started_total", &[]), 1.0);
    assert_eq!(
        metric(
            &after,
            "supervisor_runs_finished_total",
            &[("end", "pull-request")]
        ),
        1.0
    );
    assert_eq!(metric(&after, "supervisor_runs_finished_total", &[]), 1.0);
    assert_eq!(metric(&after, "supervisor_live_runs", &[]), 0.0);
    assert_eq!(metric(&after, "supervisor_queued_runs", &[]), 0.0);
    let gates = count("gate-finished");
    assert!(gates >= 2.0, "the ci and traceability gates ran: {gates}");
    assert_eq!(
        metric(&after, "supervisor_gate_duration_seconds_count", &[]),
        gates
    );
    let agents = count("agent-finished");
    assert!(agents >= 5.0, "{agents}");
    assert_eq!(
        metric(&after, "supervisor_stage_duration_seconds_count", &[]),
        agents
    );
    let tokens: f64 = journal
        .iter()
        .filter(|e| e["kind"] == "agent-finished")
        .map(|e| e["payload"]["stats"]["usage"]["total"].as_f64().unwrap())
        .sum();
    assert!(tokens > 0.0);
    assert_eq!(metric(&after, "supervisor_agent_tokens_total", &[]), tokens);
    assert_eq!(
        metric(
            &after,
            "supervisor_agent_tokens_total",
            &[("backend", "scripted"), ("role", "developer")]
        ),
        3500.0
    );
    // Each stage's agent sleeps half a second first: every stage's sum is at least that.
    assert!(
        metric(
            &after,
            "supervisor_stage_duration_seconds_sum",
            &[("stage", "Research")]
        ) >= 0.5
    );
    let sent = metric(&after, "supervisor_github_requests_total", &[]);
    let sent_again = metric(&again, "supervisor_github_requests_total", &[]);
    assert!(sent > 0.0);
    assert!(
        sent <= sandbox && sandbox <= sent_again,
        "GitHub requests {sent}..{sent_again}, the sandbox counted {sandbox}"
    );
    assert!(
        metric(
            &after,
            "supervisor_github_rate_limit_remaining",
            &[("resource", "graphql")]
        ) > 0.0
    );
    assert!(
        metric(
            &after,
            "supervisor_webhook_deliveries_total",
            &[("outcome", "queued")]
        ) >= 1.0
    );
    // The receiver's own counts agree with the metrics (the sandbox's webhooks about the run's own
    // writes still arrive: the two scrapes bracket the receiver's count).
    let ignored = |m: &[Sample]| {
        metric(
            m,
            "supervisor_webhook_deliveries_total",
            &[("outcome", "ignored")],
        )
    };
    let first = scrape(&url).await;
    let (_, _, status) = get(&url, "/status", &[]).await;
    let second = scrape(&url).await;
    let status: Value = serde_json::from_str(&status).unwrap();
    let counted = status["receiver"]["deliveries"]["ignored"]
        .as_f64()
        .unwrap();
    assert!(
        ignored(&first) <= counted && counted <= ignored(&second),
        "ignored deliveries: metrics {}..{}, the receiver {counted}",
        ignored(&first),
        ignored(&second)
    );
    assert_eq!(bot.stop().await, 0, "{}", bot.stderr());
}

async fn status_of(world: &World, args: &[&str]) -> (i32, String, String) {
    let mut cmd = command(world, &[&["status"], args].concat());
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .await
        .expect("supervisor status runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_asks_the_running_watcher_and_says_when_none_runs() {
    let mut spec = spec();
    slow(&mut spec, "2");
    let (_d, world) = world(spec, None).await;
    let (code, _, err) = status_of(&world, &[]).await;
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("no `supervisor serve` nor `supervisor watch --dashboard` is running"),
        "{err}"
    );
    let mut bot = spawn(command(
        &world,
        &["watch", "--interval", "200ms", "--dashboard", "0"],
    ));
    let url = published_url(&world, &bot).await;
    bot.wait("the first poll", |v| v["kind"] == "polled").await;
    move_card(&world, "Research");
    bot.wait("the run to start", is("started", 1)).await;
    let (code, out, err) = status_of(&world, &["--json"]).await;
    assert_eq!(code, 0, "{err}");
    let picture: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(picture["live"][0]["issue"], 1, "{picture}");
    assert_eq!(picture["pid"], bot.child.id().unwrap(), "{picture}");
    assert!(picture["queue"].as_array().unwrap().is_empty(), "{picture}");
    let (code, out, err) = status_of(&world, &[]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&format!("at {url}")), "{out}");
    assert!(out.contains("live runs: 1"), "{out}");
    assert!(out.contains("#1  "), "{out}");
    // `--url` reaches the same process.
    let (code, out, _) = status_of(&world, &["--url", &url, "--json"]).await;
    assert_eq!(code, 0);
    assert!(out.contains("\"live\""), "{out}");
    let done = bot.wait("the run to end", is("finished", 1)).await;
    assert_eq!(done["end"], "pull-request", "{done}");
    let (code, out, _) = status_of(&world, &[]).await;
    assert_eq!(code, 0);
    assert!(out.contains("live runs: 0"), "{out}");
    assert!(out.contains("#1  pull-request  http"), "{out}");
    assert_eq!(bot.stop().await, 0, "{}", bot.stderr());
    let (code, _, err) = status_of(&world, &[]).await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("is running for"), "{err}");
    // A file a killed process left names a process that is gone.
    let stale = json!({ "url": url, "pid": 999_999_999u32, "command": "watch", "started_at": "-" });
    std::fs::write(
        world.repo.join(".supervisor/watch/status.json"),
        stale.to_string(),
    )
    .unwrap();
    let (code, _, err) = status_of(&world, &[]).await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("is no longer running"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn off_loopback_the_dashboard_needs_its_token() {
    let (_d, world) = world(spec(), None).await;
    // No token: refused before anything starts.
    let mut cmd = command(
        &world,
        &["watch", "--dashboard", "0", "--dashboard-bind", "0.0.0.0"],
    );
    let out = cmd.stdin(Stdio::null()).output().await.unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--dashboard-token-env"), "{err}");
    assert!(!world.repo.join(".supervisor/watch/status.json").exists());
    // With one, every route asks for it.
    let mut cmd = command(
        &world,
        &[
            "watch",
            "--interval",
            "200ms",
            "--dashboard",
            "0",
            "--dashboard-bind",
            "0.0.0.0",
            "--dashboard-token-env",
            "TEST_DASHBOARD_TOKEN",
        ],
    );
    cmd.env("TEST_DASHBOARD_TOKEN", TOKEN);
    let mut bot = spawn(cmd);
    let url = published_url(&world, &bot).await;
    for path in ["/dashboard", "/api/state", "/metrics", "/dashboard/events"] {
        let (status, head, _) = get(&url, path, &[]).await;
        assert_eq!(status, 401, "{path}: {head}");
        let (status, _, _) = get(&url, path, &[("Authorization", "Bearer wrong-token")]).await;
        assert_eq!(status, 401, "{path}");
    }
    let bearer = format!("Bearer {TOKEN}");
    let (status, _, body) = get(&url, "/api/state", &[("Authorization", &bearer)]).await;
    assert_eq!(status, 200);
    assert!(body.contains("\"live\""), "{body}");
    // `?token=` once: a cookie, and the address without it.
    let (status, head, _) = get(&url, &format!("/dashboard?token={TOKEN}"), &[]).await;
    assert_eq!(status, 303, "{head}");
    let lower = head.to_ascii_lowercase();
    assert!(lower.contains("location: /dashboard\r\n"), "{head}");
    assert!(lower.contains("httponly"), "{head}");
    let cookie = format!("supervisor_dashboard={TOKEN}");
    let (status, _, body) = get(&url, "/dashboard", &[("Cookie", &cookie)]).await;
    assert_eq!(status, 200);
    assert!(body.contains("EventSource"), "{body}");
    // `status` reads the token from the variable the process names.
    let mut cmd = command(&world, &["status", "--json"]);
    cmd.env("TEST_DASHBOARD_TOKEN", TOKEN);
    let out = cmd.stdin(Stdio::null()).output().await.unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (code, _, err) = status_of(&world, &[]).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("TEST_DASHBOARD_TOKEN"), "{err}");
    assert_eq!(bot.stop().await, 0, "{}", bot.stderr());

    // `serve` bound off loopback for webhooks, without a token: the receiver alone, said so.
    let mut cmd = command(
        &world,
        &[
            "serve",
            "--webhook-secret-env",
            "TEST_WEBHOOK_SECRET",
            "--bind",
            "0.0.0.0",
            "--port",
            "0",
        ],
    );
    cmd.env("TEST_WEBHOOK_SECRET", "a-webhook-secret-of-some-length");
    let mut serve = spawn(cmd);
    serve
        .wait("the first poll", |v| v["kind"] == "polled")
        .await;
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while !serve.stderr().contains("no dashboard") && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let said = serve.stderr();
    let port = said
        .split("listening on http://0.0.0.0:")
        .nth(1)
        .and_then(|rest| rest.lines().next())
        .unwrap_or_else(|| panic!("no port in {said}"));
    let base = format!("http://127.0.0.1:{port}");
    assert!(said.contains("no dashboard nor /metrics"), "{said}");
    for path in ["/dashboard", "/metrics", "/api/state"] {
        let (status, head, _) = get(&base, path, &[]).await;
        assert_eq!(status, 404, "{path}: {head}");
    }
    let (status, _, _) = get(&base, "/healthz", &[]).await;
    assert_eq!(status, 200);
    assert!(!world.repo.join(".supervisor/watch/status.json").exists());
    assert_eq!(serve.stop().await, 0, "{}", serve.stderr());
}
