//! The board-driven modes, measured against the sandbox GitHub on loopback:
//!
//! - a full poll of a 5,000-card board: wall time (target ≤ 2 s) and GraphQL points (≤ 50);
//! - a webhook delivery to the start of its run in `supervisor serve` (target ≤ 1 s);
//! - 20 concurrent runs with instant scripted agents under `supervisor watch --once`: the
//!   watcher's peak RSS (target ≤ 60 MB), and every run reaching its pull request;
//! - the same 20 runs under `supervisor watch --dashboard 0` with a subscriber on the dashboard's
//!   event stream and `/metrics` scraped: the watcher's peak RSS (target ≤ 70 MB) and the time from
//!   each journal event (its journal timestamp) to its arrival on the stream, median (≤ 100 ms).
//!
//! `cargo bench --bench watch` (`--profile dev` for a quicker build: the figures are then a debug
//! build's)

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;
use supervisor::config::RepoSlug;
use supervisor::demo::{World, WorldSpec, quick_spec};
use supervisor::events::WebhookSecret;
use supervisor::github::{BoardRef, ClientConfig, GitHub, Token};
use supervisor::sandbox::{
    Act, BoardSeed, IssueSeed, OwnerType, Sandbox, SandboxState, WebhookTarget,
};
use tokio::io::{AsyncBufReadExt, BufReader};

const BIN: &str = env!("CARGO_BIN_EXE_supervisor");

fn issue(number: u64) -> IssueSeed {
    IssueSeed {
        labels: vec!["enhancement".into()],
        ..IssueSeed::new(number, &format!("Issue {number}"), "Accept hours.", "alice")
    }
}

async fn big_board() {
    const CARDS: u64 = 5_000;
    let mut state = SandboxState::new("acme", "widgets");
    let columns: Vec<String> = supervisor::demo::columns();
    state.issues = (1..=CARDS).map(issue).collect();
    state.board = Some(BoardSeed {
        owner: "acme".into(),
        owner_type: OwnerType::Organization,
        number: 1,
        title: "Delivery".into(),
        status_field: "Status".into(),
        options: columns.clone(),
        items: (1..=CARDS)
            .map(|n| (n, Some(columns[n as usize % columns.len()].clone())))
            .collect::<BTreeMap<_, _>>(),
    });
    let sandbox = Sandbox::start(state, 0).await.unwrap();
    let gh = GitHub::new(ClientConfig::new(
        sandbox.url(),
        Some(Token::new("bench-token").unwrap()),
        RepoSlug::parse("acme/widgets").unwrap(),
    ))
    .unwrap();
    let board = BoardRef {
        owner: "acme".into(),
        number: 1,
        status_field: "Status".into(),
    };
    let mut walls = Vec::new();
    let mut last = None;
    for _ in 0..3 {
        let started = Instant::now();
        let poll = gh.poll_board(&board).await.unwrap();
        walls.push(started.elapsed());
        assert_eq!(poll.cards.len() as u64, CARDS);
        last = Some(poll);
    }
    walls.sort();
    let poll = last.unwrap();
    println!(
        "full poll of a {CARDS}-card board: median {:.0} ms wall (target ≤ 2000), {} pages, {} GraphQL points (target ≤ 50)",
        walls[1].as_secs_f64() * 1000.0,
        poll.pages,
        poll.rate.cost
    );
    sandbox.shutdown().await;
}

/// A world with issues 1..=n in `column`.
async fn world(n: u64, column: &str, webhook: Option<WebhookTarget>) -> (tempfile::TempDir, World) {
    let mut spec: WorldSpec = quick_spec();
    spec.issue.column = Some(column.into());
    spec.extra_issues = (2..=n).map(issue).collect();
    let dir = tempfile::tempdir().unwrap();
    let world = World::build_with_webhook(dir.path(), spec, webhook)
        .await
        .unwrap();
    world.sandbox.with_state(|s| {
        let board = s.board.as_mut().unwrap();
        for number in 2..=n {
            board.items.insert(number, Some(column.into()));
        }
    });
    (dir, world)
}

fn command(world: &World, args: &[&str]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.args(args)
        .arg("--repo-root")
        .arg(&world.repo)
        .arg("--json")
        .envs(world.env())
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    cmd
}

async fn webhook_to_start() {
    const ROUNDS: u64 = 5;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let secret = "bench-webhook-secret-0123456789";
    let target = WebhookTarget::new(
        format!("http://127.0.0.1:{port}/webhook"),
        WebhookSecret::new(secret).unwrap(),
    );
    let (_d, world) = world(ROUNDS, "Backlog", Some(target)).await;
    let port_text = port.to_string();
    let mut cmd = command(
        &world,
        &[
            "serve",
            "--webhook-secret-env",
            "BENCH_SECRET",
            "--port",
            &port_text,
        ],
    );
    cmd.env("BENCH_SECRET", secret);
    let mut child = cmd.spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut next = async || -> Value {
        let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
            .await
            .expect("serve speaks within 60 s")
            .unwrap()
            .expect("serve is running");
        serde_json::from_str(&line).unwrap_or(Value::Null)
    };
    while next().await["kind"] != "polled" {}
    let mut times = Vec::new();
    for n in 1..=ROUNDS {
        let started = Instant::now();
        world
            .sandbox
            .act(Act::Move {
                issue: n,
                to: Some("Research".into()),
                by: "alice".into(),
            })
            .unwrap();
        loop {
            let v = next().await;
            if v["kind"] == "started" && v["issue"] == n {
                break;
            }
        }
        times.push(started.elapsed());
        loop {
            let v = next().await;
            if v["kind"] == "finished" && v["issue"] == n {
                assert_eq!(v["end"], "pull-request", "{v}");
                break;
            }
        }
    }
    times.sort();
    println!(
        "webhook delivery → run start ({ROUNDS} card moves through `supervisor serve`): median {:.0} ms, max {:.0} ms (target ≤ 1000)",
        times[times.len() / 2].as_secs_f64() * 1000.0,
        times[times.len() - 1].as_secs_f64() * 1000.0
    );
    let _ = child.start_kill();
}

/// Wait for child `pid` to end: its wait status and peak RSS in kB.
async fn reap(pid: libc::pid_t) -> (i32, libc::c_long) {
    tokio::task::spawn_blocking(move || {
        let mut status = 0;
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        assert_eq!(r, pid);
        (status, usage.ru_maxrss)
    })
    .await
    .unwrap()
}

/// The watcher exited 0, or the bench fails with its log.
fn succeeded(status: i32, log: &std::path::Path) {
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "watch failed: {}",
        std::fs::read_to_string(log).unwrap_or_default()
    );
}

async fn twenty_runs() {
    const RUNS: u64 = 20;
    let (_d, world) = world(RUNS, "Research", None).await;
    let cmd = command(
        &world,
        &[
            "watch",
            "--once",
            "--max-concurrent",
            "20",
            "--interval",
            "1s",
        ],
    );
    let mut cmd = cmd.into_std();
    let log = world.dir.join("watch.log");
    cmd.stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap());
    let started = Instant::now();
    // Reaped by wait4 below (std's wait would not report the child's peak RSS).
    #[allow(clippy::zombie_processes)]
    let child = cmd.spawn().unwrap();
    let pid = child.id() as libc::pid_t;
    let (status, rss_kb) = reap(pid).await;
    let wall = started.elapsed();
    succeeded(status, &log);
    let prs = world.sandbox.with_state(|s| s.pulls().len());
    let done = world.sandbox.with_state(|s| {
        (1..=RUNS)
            .filter(|n| s.column_of(*n) == Some("Done"))
            .count()
    });
    println!(
        "{RUNS} concurrent runs (instant scripted agents, `watch --once --max-concurrent 20`): {prs} pull requests, {done} cards in Done, {:.1} s wall, watcher peak RSS {:.1} MB (target ≤ 60)",
        wall.as_secs_f64(),
        rss_kb as f64 / 1024.0
    );
    assert_eq!(prs as u64, RUNS, "every run reaches its pull request");
}

/// Milliseconds since the Unix epoch now.
fn now_ms() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        * 1000.0
}

/// `GET path` on `base` over a plain TCP stream, the connection left open: the reader after the
/// response head.
async fn open_get(base: &str, path: &str) -> tokio::io::Lines<BufReader<tokio::net::TcpStream>> {
    use tokio::io::AsyncWriteExt;
    let host = base.trim_start_matches("http://");
    let mut s = tokio::net::TcpStream::connect(host).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut lines = BufReader::new(s).lines();
    while let Some(line) = lines.next_line().await.unwrap() {
        if line.is_empty() {
            break;
        }
    }
    lines
}

async fn twenty_runs_with_the_dashboard() {
    const RUNS: u64 = 20;
    let (_d, world) = world(RUNS, "Backlog", None).await;
    let cmd = command(
        &world,
        &[
            "watch",
            "--max-concurrent",
            "20",
            "--interval",
            "200ms",
            "--dashboard",
            "0",
        ],
    );
    let mut cmd = cmd.into_std();
    let log = world.dir.join("watch-dashboard.log");
    cmd.stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap());
    // Reaped by wait4 below (std's wait would not report the child's peak RSS).
    #[allow(clippy::zombie_processes)]
    let child = cmd.spawn().unwrap();
    let pid = child.id() as libc::pid_t;
    let status_file = world.repo.join(".supervisor/watch/status.json");
    let url = loop {
        if let Some(v) = std::fs::read_to_string(&status_file)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        {
            break v["url"].as_str().unwrap().to_string();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let mut stream = open_get(&url, "/dashboard/events").await;
    let started = Instant::now();
    for n in 1..=RUNS {
        world
            .sandbox
            .act(Act::Move {
                issue: n,
                to: Some("Research".into()),
                by: "alice".into(),
            })
            .unwrap();
    }
    let mut latencies = Vec::new();
    let mut finished = 0;
    let mut scrapes = 0;
    while finished < RUNS as usize {
        let line = tokio::time::timeout(Duration::from_secs(120), stream.next_line())
            .await
            .expect("the dashboard speaks within 120 s")
            .unwrap()
            .expect("the stream stays open");
        let arrived = now_ms();
        let Some(data) = line.strip_prefix("data: ") else {
            continue;
        };
        let update: Value = serde_json::from_str(data).unwrap();
        if let Some(time) = update["event"]["time"].as_str() {
            let at = chrono::DateTime::parse_from_rfc3339(time).unwrap();
            latencies.push(arrived - at.timestamp_millis() as f64);
        }
        finished = update["state"]["finished"].as_array().map_or(0, |f| {
            f.iter().filter(|f| f["end"] == "pull-request").count()
        });
        // Someone scrapes the metrics meanwhile, as Prometheus would.
        if latencies.len() / 100 > scrapes {
            scrapes += 1;
            let mut m = open_get(&url, "/metrics").await;
            while let Ok(Some(l)) = m.next_line().await {
                if l == "# EOF" {
                    break;
                }
            }
        }
    }
    let wall = started.elapsed();
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let (status, rss_kb) = reap(pid).await;
    succeeded(status, &log);
    latencies.sort_by(f64::total_cmp);
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize];
    println!(
        "{RUNS} concurrent runs with the dashboard and /metrics on (`watch --dashboard 0`, one event-stream subscriber, {scrapes} scrape(s)): {:.1} s wall, watcher peak RSS {:.1} MB (target ≤ 70); journal event → dashboard update over {} events: median {:.1} ms (target ≤ 100), p90 {:.1} ms, max {:.1} ms",
        wall.as_secs_f64(),
        rss_kb as f64 / 1024.0,
        latencies.len(),
        at(0.5),
        at(0.9),
        at(1.0)
    );
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        big_board().await;
        webhook_to_start().await;
        twenty_runs().await;
        twenty_runs_with_the_dashboard().await;
    });
}
