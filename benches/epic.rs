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

/// Wait for child `pid` to end: its wait status, peak RSS in kB and CPU time (its own and its
/// children's, user and system).
async fn reap(pid: libc::pid_t) -> (i32, libc::c_long, Duration) {
    tokio::task::spawn_blocking(move || {
        let mut status = 0;
        // SAFETY: an all-zero rusage is a valid value for wait4 to fill in.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: pid is our child; status and usage point to live values.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        assert_eq!(r, pid);
        (
            status,
            usage.ru_maxrss,
            duration(usage.ru_utime) + duration(usage.ru_stime),
        )
    })
    .await
    .unwrap()
}

/// CPU time of this process so far (user and system, all its threads).
fn own_cpu() -> Duration {
    // SAFETY: an all-zero rusage is a valid value for getrusage to fill in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: usage points to a live value.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    duration(usage.ru_utime) + duration(usage.ru_stime)
}

fn duration(t: libc::timeval) -> Duration {
    Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
}

struct Worked {
    wall: Duration,
    requests_per_task: f64,
    rss_mb: f64,
    /// CPU time of the process working the epic and of everything it ran.
    cpu: Duration,
    /// CPU time of this process meanwhile: the sandbox GitHub answering.
    sandbox_cpu: Duration,
    /// Requests by route over the epic's work, divided by the tasks.
    by_route: Vec<(String, f64)>,
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
        .env(
            "RUST_LOG",
            std::env::var("EPIC_BENCH_RUST_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap());
    let before = world.sandbox.request_counts();
    let requests = world.sandbox.request_total();
    let started = Instant::now();
    let own_before = own_cpu();
    // Reaped by wait4 below (std's wait would not report the child's peak RSS).
    #[allow(clippy::zombie_processes)]
    let child = cmd.spawn().unwrap();
    let (status, rss_kb, cpu) = reap(child.id() as libc::pid_t).await;
    let wall = started.elapsed();
    let sandbox_cpu = own_cpu().saturating_sub(own_before);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "supervisor epic failed: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    // `EPIC_BENCH_KEEP_LOG=DIR`: the log of each run kept as DIR/epic-<concurrency>.log.
    if let Some(keep) = std::env::var_os("EPIC_BENCH_KEEP_LOG") {
        let kept = std::path::Path::new(&keep).join(format!("epic-{concurrency}.log"));
        std::fs::copy(&log, kept).unwrap();
    }
    let merged = world
        .sandbox
        .with_state(|s| s.pulls().iter().filter(|p| p.merged).count());
    assert_eq!(merged, TASKS, "every task's pull request is merged");
    let by_route = world
        .sandbox
        .request_counts()
        .into_iter()
        .map(|(route, n)| {
            let n = n - before.get(&route).copied().unwrap_or(0);
            (route, n as f64 / TASKS as f64)
        })
        .filter(|(_, n)| *n > 0.0)
        .collect();
    Worked {
        wall,
        cpu,
        sandbox_cpu,
        by_route,
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
    // `EPIC_BENCH_ROUTES=1`: where the requests go, per task, for each run.
    if std::env::var_os("EPIC_BENCH_ROUTES").is_some() {
        for (name, worked) in [("maxConcurrency 4", &four), ("one after another", &one)] {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            let busy = (worked.cpu + worked.sandbox_cpu).as_secs_f64() / worked.wall.as_secs_f64();
            println!(
                "{name}: wall {:.2} s, CPU {:.2} s (the sandbox's {:.2} s besides): {busy:.1} of {cores} cores busy",
                worked.wall.as_secs_f64(),
                worked.cpu.as_secs_f64(),
                worked.sandbox_cpu.as_secs_f64()
            );
            println!("requests per task by route, {name}:");
            for (route, n) in &worked.by_route {
                println!("  {n:6.2}  {route}");
            }
        }
    }
}
