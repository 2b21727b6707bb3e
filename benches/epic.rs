//! An epic of 8 independent tasks with instant scripted agents, worked by `supervisor epic`
//! against the sandbox GitHub on loopback: with `epic.maxConcurrency: 4`, and with 1 (the tasks
//! one after another). Printed: the wall time of each and their ratio (target ≤ 0.35), the GitHub
//! requests per task (target ≤ 25), and the peak RSS of the process working the epic (target ≤ 60
//! MB).
//!
//! `cargo bench --bench epic` (`--profile dev` for a quicker build: the figures are then a debug
//! build's)

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::json;
use supervisor::demo::{World, epic_spec};

const BIN: &str = env!("CARGO_BIN_EXE_supervisor");
const TASKS: usize = 8;

/// Wait for child `pid` to end: its wait status and peak RSS in kB.
async fn reap(pid: libc::pid_t) -> (i32, libc::c_long) {
    tokio::task::spawn_blocking(move || {
        let mut status = 0;
        // SAFETY: an all-zero rusage is a valid value for wait4 to fill in.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: pid is our child; status and usage point to live values.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        assert_eq!(r, pid);
        (status, usage.ru_maxrss)
    })
    .await
    .unwrap()
}

struct Worked {
    wall: Duration,
    requests_per_task: f64,
    rss_mb: f64,
}

async fn work(concurrency: usize) -> Worked {
    let ids: Vec<String> = (1..=TASKS).map(|i| format!("t{i}")).collect();
    let tasks: Vec<(&str, &[&str])> = ids.iter().map(|id| (id.as_str(), &[][..])).collect();
    let mut spec = epic_spec(&tasks, &[]);
    spec.settings.insert(
        "epic".into(),
        json!({ "maxConcurrency": concurrency, "maxTasks": TASKS }),
    );
    // The tasks are the process's runs: its own cap is raised with the epic's.
    spec.settings
        .insert("watch".into(), json!({ "maxConcurrent": concurrency }));
    let dir = tempfile::tempdir().unwrap();
    let world = World::build(dir.path(), spec).await.unwrap();
    let log = world.dir.join("epic.log");
    let mut cmd = std::process::Command::new(BIN);
    cmd.args(["epic", "1", "--json", "--repo-root"])
        .arg(&world.repo)
        .env_clear()
        .envs(world.env())
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap());
    let requests = world.sandbox.request_total();
    let started = Instant::now();
    // Reaped by wait4 below (std's wait would not report the child's peak RSS).
    #[allow(clippy::zombie_processes)]
    let child = cmd.spawn().unwrap();
    let (status, rss_kb) = reap(child.id() as libc::pid_t).await;
    let wall = started.elapsed();
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "supervisor epic failed: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let merged = world
        .sandbox
        .with_state(|s| s.pulls().iter().filter(|p| p.merged).count());
    assert_eq!(merged, TASKS, "every task's pull request is merged");
    Worked {
        wall,
        requests_per_task: (world.sandbox.request_total() - requests) as f64 / TASKS as f64,
        rss_mb: rss_kb as f64 / 1024.0,
    }
}

#[tokio::main]
async fn main() {
    let one = work(1).await;
    let four = work(4).await;
    println!(
        "an epic of {TASKS} independent tasks (instant scripted agents): maxConcurrency 4 {:.1} s, one after another {:.1} s: {:.2}× (target ≤ 0.35); {:.1} GitHub requests per task (target ≤ 25); peak RSS {:.1} MB (target ≤ 60)",
        four.wall.as_secs_f64(),
        one.wall.as_secs_f64(),
        four.wall.as_secs_f64() / one.wall.as_secs_f64(),
        four.requests_per_task,
        four.rss_mb.max(one.rss_mb)
    );
}
