//! The happy path with instant scripted agents: the real `supervisor run` binary against the sandbox
//! GitHub and a local bare remote. Prints the wall time minus the worktree checkout (target ≤ 300 ms),
//! GitHub requests by route (target ≤ 20 in all) and the run's own peak RSS (target ≤ 25 MB), with
//! the largest among it and the processes it started (git, the agents) beside it.
//!
//! It runs the binary as `cargo build --release` makes it, built into `target/bench-release`: the one
//! `cargo bench` builds carries the dev-dependencies' features too (wiremock's HTTP/2 server), which
//! no user runs. The first run builds it (minutes), later ones only when the sources changed.
//!
//! Beside the figures, the mean time from each journal event to the next (and from the spawn to the
//! first, from the last to the exit), to show where a run's time goes.
//!
//! `cargo bench --bench pipeline`; `PIPELINE_BENCH_BINARY=path` runs that binary instead (another
//! build to compare, side by side on the same machine), `PIPELINE_BENCH_ROUNDS=n` (default 5).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use supervisor::demo::{World, quick_spec};
use supervisor::pipeline::{Event, read_entries};

const ROUNDS: usize = 5;

/// One step of a run: from one journal event (or the spawn) to the next (or the exit).
type Phase = (String, f64);

struct Round {
    wall_ms: f64,
    checkout_ms: f64,
    requests: u64,
    max_rss_kb: i64,
    tree_rss_kb: i64,
    routes: std::collections::BTreeMap<String, u64>,
    phases: Vec<Phase>,
}

fn millis(a: &str, b: &str) -> f64 {
    let a = chrono::DateTime::parse_from_rfc3339(a).unwrap();
    let b = chrono::DateTime::parse_from_rfc3339(b).unwrap();
    (b - a).num_microseconds().unwrap() as f64 / 1000.0
}

/// `supervisor` built by `cargo build --release --locked` into its own target directory.
fn release_binary() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let target = root.join("target/bench-release");
    let status = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args([
            "build",
            "--release",
            "--locked",
            "--bin",
            "supervisor",
            "--target-dir",
        ])
        .arg(&target)
        .current_dir(root)
        .status()
        .expect("cargo runs");
    assert!(status.success(), "cargo build --release failed");
    target.join("release/supervisor")
}

async fn round(binary: &Path) -> Round {
    let dir = tempfile::tempdir().unwrap();
    let world = World::build(dir.path(), quick_spec()).await.unwrap();
    let mut cmd = Command::new(binary);
    cmd.args(["run", "1", "--repo-root"])
        .arg(&world.repo)
        .envs(world.env())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let spawned_at = chrono::Utc::now();
    // Reaped by wait4 below (std's wait would not report the child's peak RSS).
    #[allow(clippy::zombie_processes)]
    let child = cmd.spawn().unwrap();
    let pid = child.id() as libc::pid_t;
    // The run's own peak RSS: its high-water mark, read while it lives (wait4 below reports the
    // largest of it and its reaped children: git, the agents).
    let own_peak = std::thread::spawn(move || {
        let mut peak = 0i64;
        while let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) {
            match status
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            {
                Some(kb) => peak = peak.max(kb),
                None => break, // a zombie: the run has ended
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        peak
    });
    // wait4 gives the largest peak RSS among the run and the children it reaped.
    let (status, rss) = tokio::task::spawn_blocking(move || {
        let mut status = 0;
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        assert_eq!(r, pid);
        (status, usage.ru_maxrss)
    })
    .await
    .unwrap();
    let wall_ms = started.elapsed().as_secs_f64() * 1000.0;
    let own_rss = own_peak.join().unwrap();
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the run failed"
    );
    let run_dir = std::fs::read_dir(world.runs_dir())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.join("events.jsonl").is_file())
        .expect("the run's directory");
    let entries = read_entries(&run_dir.join("events.jsonl")).unwrap();
    let time_of = |pred: &dyn Fn(&Event) -> bool| {
        entries
            .iter()
            .find(|e| pred(&e.event))
            .map(|e| e.time.clone())
            .unwrap()
    };
    let exited_at = spawned_at + chrono::Duration::microseconds((wall_ms * 1000.0) as i64);
    let phases = phases(&entries, &spawned_at.to_rfc3339(), &exited_at.to_rfc3339());
    let admitted = time_of(&|e| matches!(e, Event::Admitted { .. }));
    let ready = time_of(&|e| matches!(e, Event::WorktreeReady { .. }));
    let routes = world.sandbox.request_counts();
    let requests = world.sandbox.request_total();
    world.sandbox.shutdown().await;
    Round {
        wall_ms,
        checkout_ms: millis(&admitted, &ready),
        requests,
        max_rss_kb: own_rss,
        tree_rss_kb: rss,
        routes,
        phases,
    }
}

/// The time between consecutive journal events, the spawn first and the exit last.
fn phases(entries: &[supervisor::pipeline::Entry], spawned: &str, exited: &str) -> Vec<Phase> {
    let kind = |e: &Event| {
        serde_json::to_value(e)
            .ok()
            .and_then(|v| v["kind"].as_str().map(str::to_string))
    };
    let mut marks = vec![("spawn".to_string(), spawned.to_string())];
    for e in entries {
        marks.push((kind(&e.event).unwrap_or_default(), e.time.clone()));
    }
    marks.push(("exit".to_string(), exited.to_string()));
    marks
        .windows(2)
        .map(|w| (format!("{} → {}", w[0].0, w[1].0), millis(&w[0].1, &w[1].1)))
        .collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let binary = std::env::var_os("PIPELINE_BENCH_BINARY")
        .map(PathBuf::from)
        .unwrap_or_else(release_binary);
    let count = std::env::var("PIPELINE_BENCH_ROUNDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(ROUNDS)
        .max(1);
    let rounds: Vec<Round> = (0..count).map(|_| rt.block_on(round(&binary))).collect();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "happy path, instant scripted agents, gates ci + traceability, {count} rounds (load {})",
        load.trim()
    );
    for (i, r) in rounds.iter().enumerate() {
        println!(
            "  round {}: wall {:.0} ms, worktree checkout {:.0} ms, wall − checkout {:.0} ms, {} requests, peak RSS {:.1} MB (largest child or self {:.1} MB)",
            i + 1,
            r.wall_ms,
            r.checkout_ms,
            r.wall_ms - r.checkout_ms,
            r.requests,
            r.max_rss_kb as f64 / 1024.0,
            r.tree_rss_kb as f64 / 1024.0
        );
    }
    let net = median(rounds.iter().map(|r| r.wall_ms - r.checkout_ms).collect());
    let rss = median(
        rounds
            .iter()
            .map(|r| r.max_rss_kb as f64 / 1024.0)
            .collect(),
    );
    println!("median wall time minus worktree checkout: {net:.0} ms (target ≤ 300 ms)");
    println!("GitHub requests: {} (target ≤ 20)", rounds[0].requests);
    for (route, n) in &rounds[0].routes {
        println!("  {n:>3}  {route}");
    }
    println!("median peak RSS of supervisor run: {rss:.1} MB (target ≤ 25 MB)");
    // Rounds of the same run record the same events; a round that differs is left out here.
    let same: Vec<&Round> = rounds
        .iter()
        .filter(|r| r.phases.len() == rounds[0].phases.len())
        .collect();
    println!("mean time between journal events ({} rounds):", same.len());
    for (i, (label, _)) in rounds[0].phases.iter().enumerate() {
        let mean = same.iter().map(|r| r.phases[i].1).sum::<f64>() / same.len() as f64;
        println!("  {mean:6.2} ms  {label}");
    }
}
