//! The board-driven modes, measured against the sandbox GitHub on loopback:
//!
//! - a full poll of a 5,000-card board: wall time (target ≤ 2 s) and GraphQL points (≤ 50);
//! - a webhook delivery to the start of its run in `supervisor serve` (target ≤ 1 s);
//! - 20 concurrent runs with instant scripted agents under `supervisor watch --once`: the
//!   watcher's peak RSS (target ≤ 60 MB), and every run reaching its pull request.
//!
//! `cargo bench --bench watch`

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
    let (status, rss_kb) = tokio::task::spawn_blocking(move || {
        let mut status = 0;
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        assert_eq!(r, pid);
        (status, usage.ru_maxrss)
    })
    .await
    .unwrap();
    let wall = started.elapsed();
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "watch failed: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
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
    });
}
