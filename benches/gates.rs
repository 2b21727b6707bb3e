//! All gates on one fixture change, concurrently (as the pipeline runs them) and one after another.
//! Prints each gate's time, the sum, the slowest gate and the concurrent wall time.
//!
//! `cargo bench --bench gates` (after `scripts/install-tools.sh`; the pinned tools are put on the
//! search path here). `GATES_BENCH_ROUNDS=N` sets the rounds (default 3).

#[path = "../tests/gates/common.rs"]
mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Fixture, tools_path};
use supervisor::config::{Expect, GateKind, Hook};
use supervisor::gates::{
    BoxFuture, CiContext, CiError, CiPoll, CiRun, CiSource, GateContext, GateReport, default_hook,
    run_gate, run_gates,
};

/// CI that has already finished green.
struct GreenCi;

impl CiSource for GreenCi {
    fn check_runs<'a>(
        &'a self,
        _sha: &'a str,
        _etag: Option<&'a str>,
    ) -> BoxFuture<'a, Result<CiPoll, CiError>> {
        Box::pin(async {
            Ok(CiPoll::Runs {
                runs: vec![CiRun {
                    name: "build".into(),
                    status: "completed".into(),
                    conclusion: Some("success".into()),
                    url: None,
                }],
                etag: None,
            })
        })
    }
    fn commit_visible<'a>(&'a self, _sha: &'a str) -> BoxFuture<'a, Result<bool, CiError>> {
        Box::pin(async { Ok(true) })
    }
    fn push<'a>(&'a self) -> BoxFuture<'a, Result<(), CiError>> {
        Box::pin(async { Ok(()) })
    }
}

/// A registry answering one package, on loopback.
async fn stub_registry() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let doc = serde_json::json!({
        "dist-tags": {"latest": "1.3.0"},
        "versions": {"1.3.0": {}},
        "time": {"1.3.0": "2020-01-01T00:00:00Z"}
    });
    let app = axum::Router::new().fallback(move || {
        let doc = doc.clone();
        async move { axum::Json(doc) }
    });
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    format!("http://{addr}")
}

fn hooks() -> Vec<Hook> {
    let mut hooks: Vec<Hook> = GateKind::ALL
        .iter()
        .filter(|k| **k != GateKind::Command)
        .map(|k| default_hook(*k))
        .collect();
    hooks.push(Hook {
        name: "build oracle".into(),
        run: Some("for f in src/*.ts; do wc -l \"$f\" >/dev/null; done; echo built".into()),
        expect: Expect::Contains("built".into()),
        ..default_hook(GateKind::Command)
    });
    hooks
}

fn fixture() -> Fixture {
    let f = Fixture::new("ts-base");
    f.apply("ts-type-error")
        .apply("ts-unused-export")
        .apply("ts-duplicates");
    f.write(
        "tool/greet.py",
        "def greet(name):\n    return 'hello ' + nme\n",
    );
    f.write(
        "package.json",
        "{\n  \"name\": \"gate-fixture\",\n  \"version\": \"1.0.0\",\n  \"private\": true,\n  \"type\": \"module\",\n  \"main\": \"src/index.ts\",\n  \"dependencies\": { \"left-pad\": \"^1.0.0\" }\n}\n",
    );
    f.commit_all("Bench change (#1)");
    f
}

fn fresh_state(ctx: &mut GateContext, round: usize, mode: &str) {
    // A new state directory per run: no tsc cache hit flatters either mode.
    ctx.state_dir = ctx.dir.join(format!(".supervisor/bench-{round}-{mode}"));
}

/// CPU time (user + system) of all reaped child processes so far.
fn children_cpu() -> Duration {
    // SAFETY: getrusage only writes into the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) } != 0 {
        return Duration::ZERO;
    }
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

fn main() {
    let rounds: usize = std::env::var("GATES_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let missing: Vec<&str> = [
        "tsc",
        "typescript-language-server",
        "knip",
        "jscpd",
        "pylsp",
    ]
    .into_iter()
    .filter(|t| supervisor::gates::find_on_path(t, Some(&tools_path())).is_none())
    .collect();
    if !missing.is_empty() {
        eprintln!(
            "gates bench: {} missing — run scripts/install-tools.sh first",
            missing.join(", ")
        );
        std::process::exit(2);
    }
    let f = fixture();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let hooks = hooks();
    let mut ctx = f.context();
    ctx.settings.npm_registry = runtime.block_on(stub_registry());
    ctx.ci = Some(CiContext {
        head_sha: "0".repeat(40),
        timeout: Duration::from_secs(60),
        interval: Duration::from_millis(10),
        source: Arc::new(GreenCi),
    });

    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "gates bench: {} gates on a TypeScript + Python change of {} files, {} rounds, {cores} cores, load average {}",
        hooks.len(),
        ctx.changes.files.len(),
        rounds,
        load_average()
    );
    // Warm-up: node, python and the OS caches.
    fresh_state(&mut ctx, 0, "warmup");
    let warm = runtime.block_on(run_gates(&hooks, &ctx));
    for r in &warm {
        println!("  warm-up {:<15} {}", r.name, r.status.label());
    }

    let mut concurrent = Vec::new();
    let mut sequential = Vec::new();
    let mut slowest = Vec::new();
    for round in 1..=rounds {
        fresh_state(&mut ctx, round, "seq");
        let mut per_gate: Vec<(String, Duration, Duration)> = Vec::new();
        let started = Instant::now();
        for hook in &hooks {
            let t = Instant::now();
            let cpu = children_cpu();
            let report: GateReport = runtime.block_on(run_gate(hook, &ctx));
            per_gate.push((report.name, t.elapsed(), children_cpu().saturating_sub(cpu)));
        }
        let seq = started.elapsed();
        let tool_cpu: Duration = per_gate.iter().map(|(_, _, c)| *c).sum();

        fresh_state(&mut ctx, round, "conc");
        let started = Instant::now();
        let reports = runtime.block_on(run_gates(&hooks, &ctx));
        let conc = started.elapsed();

        let (slow_name, slow, _) = per_gate
            .iter()
            .max_by_key(|(_, d, _)| *d)
            .cloned()
            .unwrap_or_default();
        println!("round {round} (load average {}):", load_average());
        for ((name, d, cpu), r) in per_gate.iter().zip(&reports) {
            println!(
                "  {:<15} sequential {:>8} (tool CPU {:>8})   concurrent {:>8}",
                name,
                secs(*d),
                secs(*cpu),
                secs(Duration::from_millis(r.duration_ms))
            );
        }
        println!(
            "  sequential total {}   concurrent wall {}   slowest gate {} ({})   concurrent/slowest {:.2}   tool CPU {} (÷{cores} cores = {})",
            secs(seq),
            secs(conc),
            secs(slow),
            slow_name,
            conc.as_secs_f64() / slow.as_secs_f64().max(1e-9),
            secs(tool_cpu),
            secs(tool_cpu / cores as u32)
        );
        concurrent.push(conc);
        sequential.push(seq);
        slowest.push(slow);
    }
    let median = |v: &mut Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let (c, s, w) = (
        median(&mut concurrent),
        median(&mut sequential),
        median(&mut slowest),
    );
    println!(
        "median: sequential {}   concurrent {}   slowest gate {}   concurrent/slowest {:.2} (target ≤ 1.10)   speed-up {:.2}×",
        secs(s),
        secs(c),
        secs(w),
        c.as_secs_f64() / w.as_secs_f64().max(1e-9),
        s.as_secs_f64() / c.as_secs_f64().max(1e-9)
    );
}
