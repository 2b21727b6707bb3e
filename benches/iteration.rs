//! Iteration speed on a realistic project: two gate rounds in one gate session, and the time from
//! nothing to a worktree an agent can start in.
//!
//! Generates (deterministically) a TypeScript project of ~800 files with a few real npm dependencies,
//! installed by the bench itself (npm's cache and the lockfile are kept in
//! `target/bench-cache/iteration/`, so only the first run needs the registry). Then:
//!
//! - time to first agent: supervisor's worktree + setup (which reuses the main checkout's installed
//!   dependencies) against `git worktree add` plus a cold `npm ci`;
//! - round 1: a change with a type error, gates tsc, lsp, dead-code and duplicates concurrently from
//!   cold; round 2: the error fixed, the same gates in the same session (incremental tsc, warm
//!   language server, knip's cache).
//!
//! `cargo bench --bench iteration` (after `scripts/install-tools.sh`; the pinned tools are put on the
//! search path here). `ITERATION_MODULES=N` sets the number of modules (8 files each; default 100),
//! `ITERATION_SAMPLES=N` the number of time-to-first-agent samples (default 7; medians are printed).

#[path = "../tests/gates/common.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{Runtime, tools_path};
use supervisor::config::{GateKind, GateSettings};
use supervisor::gates::{
    ChangeSet, GateContext, GateReport, GateSession, ToolEnv, default_hook, run_gates,
};
use supervisor::workspace::{
    Dependencies, PushAuth, WorkspaceConfig, cleanup, ensure_worktree_staged, setup_staged,
};

const DEPENDENCIES: &str = r#"{
    "ms": "2.1.3",
    "nanoid": "5.0.7",
    "zod": "3.23.8"
  }"#;
const DEV_DEPENDENCIES: &str = r#"{
    "@types/ms": "0.7.34",
    "typescript": "5.9.3"
  }"#;

fn cache_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| common::manifest_dir().join("target"));
    target.join("bench-cache/iteration")
}

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

/// One module: 8 files using the dependencies and the previous module.
fn module(root: &Path, i: usize) {
    let dir = format!("src/modules/m{i:03}");
    let prev = i.saturating_sub(1);
    write(
        root,
        &format!("{dir}/types.ts"),
        &format!(
            "export interface Item{i} {{\n  id: string;\n  name: string;\n  quantity: number;\n  createdAt: number;\n}}\n\nexport type Summary{i} = {{ count: number; total: number; label: string }};\n"
        ),
    );
    write(
        root,
        &format!("{dir}/schema.ts"),
        &format!(
            "import {{ z }} from \"zod\";\n\nexport const itemSchema{i} = z.object({{\n  id: z.string().min(1),\n  name: z.string().max(80),\n  quantity: z.number().int().nonnegative(),\n  createdAt: z.number(),\n}});\n\nexport type ParsedItem{i} = z.infer<typeof itemSchema{i}>;\n"
        ),
    );
    write(
        root,
        &format!("{dir}/id.ts"),
        &format!(
            "import {{ nanoid }} from \"nanoid\";\n\nexport function newId{i}(prefix: string): string {{\n  return `${{prefix}}-{i}-${{nanoid(10)}}`;\n}}\n"
        ),
    );
    write(
        root,
        &format!("{dir}/format.ts"),
        &format!(
            "import ms from \"ms\";\nimport type {{ Summary{i} }} from \"./types\";\n\nexport function age{i}(createdAt: number, now: number): string {{\n  return ms(Math.max(0, now - createdAt), {{ long: true }});\n}}\n\nexport function describe{i}(summary: Summary{i}): string {{\n  return `${{summary.label}}: ${{summary.count}} items, ${{summary.total.toFixed(2)}} in total`;\n}}\n"
        ),
    );
    write(
        root,
        &format!("{dir}/model.ts"),
        &format!(
            "import {{ itemSchema{i}, type ParsedItem{i} }} from \"./schema\";\nimport type {{ Item{i} }} from \"./types\";\n\nexport function parse{i}(input: unknown): Item{i} {{\n  const parsed: ParsedItem{i} = itemSchema{i}.parse(input);\n  return {{ ...parsed }};\n}}\n\nexport function weight{i}(item: Item{i}): number {{\n  return item.quantity * {w} + item.name.length;\n}}\n",
            w = i % 7 + 1
        ),
    );
    let upstream = if i == 0 {
        "const upstream = (n: number): number => n;\n".to_string()
    } else {
        format!(
            "import {{ total{prev} }} from \"../m{prev:03}/service\";\n\nconst upstream = (n: number): number => total{prev}([]) + n;\n"
        )
    };
    write(
        root,
        &format!("{dir}/service.ts"),
        &format!(
            "import {{ describe{i} }} from \"./format\";\nimport {{ newId{i} }} from \"./id\";\nimport {{ parse{i}, weight{i} }} from \"./model\";\nimport type {{ Item{i}, Summary{i} }} from \"./types\";\n{upstream}\nexport function total{i}(items: Item{i}[]): number {{\n  return upstream(items.reduce((sum, item) => sum + weight{i}(item), 0));\n}}\n\nexport function summarise{i}(inputs: unknown[]): string {{\n  const items = inputs.map(parse{i});\n  const summary: Summary{i} = {{ count: items.length, total: total{i}(items), label: newId{i}(\"m{i}\") }};\n  return describe{i}(summary);\n}}\n"
        ),
    );
    write(
        root,
        &format!("{dir}/report.ts"),
        &format!(
            "import {{ age{i} }} from \"./format\";\nimport {{ summarise{i} }} from \"./service\";\n\nexport function report{i}(inputs: unknown[], createdAt: number, now: number): string[] {{\n  return [summarise{i}(inputs), `updated ${{age{i}(createdAt, now)}} ago`];\n}}\n"
        ),
    );
    write(
        root,
        &format!("{dir}/index.ts"),
        &format!(
            "export {{ report{i} }} from \"./report\";\nexport {{ summarise{i} }} from \"./service\";\n"
        ),
    );
}

/// The project's files (deterministic).
fn generate(root: &Path, modules: usize) {
    write(
        root,
        "package.json",
        &format!(
            "{{\n  \"name\": \"iteration-bench\",\n  \"version\": \"1.0.0\",\n  \"private\": true,\n  \"type\": \"module\",\n  \"main\": \"src/index.ts\",\n  \"dependencies\": {DEPENDENCIES},\n  \"devDependencies\": {DEV_DEPENDENCIES}\n}}\n"
        ),
    );
    write(
        root,
        "tsconfig.json",
        "{\n  \"compilerOptions\": {\n    \"strict\": true,\n    \"target\": \"ES2022\",\n    \"module\": \"ES2022\",\n    \"moduleResolution\": \"bundler\",\n    \"noEmit\": true,\n    \"skipLibCheck\": true\n  },\n  \"include\": [\"src\"]\n}\n",
    );
    write(root, ".gitignore", "node_modules/\n.supervisor/\n");
    let mut index = String::new();
    for i in 0..modules {
        module(root, i);
        index.push_str(&format!(
            "import {{ report{i} }} from \"./modules/m{i:03}\";\n"
        ));
    }
    index.push_str("\nconst now = Date.now();\nexport const reports = [\n");
    for i in 0..modules {
        index.push_str(&format!("  ...report{i}([], now, now),\n"));
    }
    index.push_str("];\n");
    write(root, "src/index.ts", &index);
}

fn run(dir: &Path, program: &str, args: &[&str]) -> Duration {
    let started = Instant::now();
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .env("npm_config_cache", cache_dir().join("npm"))
        .output()
        .unwrap_or_else(|e| panic!("{program} {args:?}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?} in {}: {}{}",
        dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    started.elapsed()
}

fn git(dir: &Path, args: &[&str]) -> Duration {
    let mut all = vec![
        "-c",
        "user.name=Bench",
        "-c",
        "user.email=bench@example.com",
        "-c",
        "init.defaultBranch=main",
    ];
    all.extend_from_slice(args);
    run(dir, "git", &all)
}

/// The lockfile, made once (needs the registry) and kept in the cache.
fn lockfile(repo: &Path) {
    let kept = cache_dir().join(format!(
        "package-lock-{}.json",
        git2::Oid::hash_object(
            git2::ObjectType::Blob,
            format!("{DEPENDENCIES}{DEV_DEPENDENCIES}").as_bytes()
        )
        .expect("hash")
    ));
    if !kept.is_file() {
        eprintln!(
            "resolving the dependencies (once; kept in {})",
            kept.display()
        );
        run(
            repo,
            "npm",
            &["install", "--package-lock-only", "--no-audit", "--no-fund"],
        );
        std::fs::create_dir_all(kept.parent().expect("parent")).expect("cache dir");
        std::fs::copy(repo.join("package-lock.json"), &kept).expect("keep lockfile");
    }
    std::fs::copy(&kept, repo.join("package-lock.json")).expect("lockfile");
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

fn report_ms(reports: &[GateReport], gate: &str) -> Duration {
    reports
        .iter()
        .find(|r| r.name == gate)
        .map(|r| Duration::from_millis(r.duration_ms))
        .unwrap_or_default()
}

fn round(rt: &Runtime, worktree: &Path, session: &GateSession) -> (Duration, Vec<GateReport>) {
    let hooks: Vec<_> = [
        GateKind::Tsc,
        GateKind::Lsp,
        GateKind::DeadCode,
        GateKind::Duplicates,
    ]
    .into_iter()
    .map(default_hook)
    .collect();
    let ctx = GateContext {
        dir: worktree.to_path_buf(),
        changes: ChangeSet::compute(worktree, "main").expect("change set"),
        issue: None,
        settings: GateSettings::default(),
        ci: None,
        state_dir: worktree.join(".supervisor/gates"),
        search_path: Some(tools_path()),
        session: session.clone(),
        proof: None,
    };
    let started = Instant::now();
    let reports = rt.run(1800, run_gates(&hooks, &ctx));
    (started.elapsed(), reports)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("iteration: bench");
        return;
    }
    let modules: usize = std::env::var("ITERATION_MODULES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let tmp = tempfile::tempdir().expect("temp dir");
    let root = tmp.path().canonicalize().expect("canonical");
    let repo = root.join("repo");
    std::fs::create_dir_all(&repo).expect("repo dir");
    generate(&repo, modules);
    lockfile(&repo);
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-qm", "generated project"]);
    let files = git2::Repository::open(&repo)
        .and_then(|r| r.index())
        .map(|i| i.len())
        .unwrap_or(0);
    // The main checkout has its dependencies installed, as a developer's would.
    run(
        &repo,
        "npm",
        &["ci", "--prefer-offline", "--no-audit", "--no-fund"],
    );
    println!(
        "project: {files} files ({modules} modules), dependencies {}, dev {}",
        DEPENDENCIES
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" "),
        DEV_DEPENDENCIES
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    );

    // Time to first agent, against `git worktree add -b` of the same commit: alternated (each first
    // every other time), several times, the medians compared (a worktree takes a tenth of a second;
    // one sample is noise).
    let cfg = WorkspaceConfig {
        repo_root: repo.clone(),
        worktree_root: root.join("worktrees"),
        branch_prefix: "issue-".into(),
        default_branch: "main".into(),
        remote: "origin".into(),
        copy_files: Vec::new(),
        setup_commands: None,
        setup_attempts: 1,
        git_config: Vec::new(),
        // None there: the issue's branch is looked for, as in a run, and not found.
        push_url: root.join("remote.git").display().to_string(),
    };
    let rt = Runtime::new();
    let samples: usize = std::env::var("ITERATION_SAMPLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(7)
        .max(1);
    let cancel = tokio_util::sync::CancellationToken::new();
    let (mut adds, mut created, mut firsts) = (Vec::new(), Vec::new(), Vec::new());
    let mut kept = None;
    for n in 1..=samples {
        let plain = root.join(format!("plain-{n}"));
        let plain_add = || {
            git(
                &repo,
                &[
                    "worktree",
                    "add",
                    "-q",
                    "-b",
                    &format!("plain-{n}"),
                    plain.to_str().expect("utf-8"),
                ],
            )
        };
        // Each goes first every other time: neither always follows the other's writes.
        if n % 2 == 1 {
            adds.push(plain_add());
        }
        let started = Instant::now();
        let (wt, staged) = rt
            .run(
                60,
                ensure_worktree_staged(&cfg, n as u64, &PushAuth::None, &cancel),
            )
            .expect("worktree");
        created.push(started.elapsed());
        let report = rt.run(1800, setup_staged(&cfg, &wt, staged, &cancel));
        firsts.push(started.elapsed());
        assert!(report.warnings.is_empty(), "{report:#?}");
        if n % 2 == 0 {
            adds.push(plain_add());
        }
        if n < samples {
            cleanup(&cfg, &wt).expect("cleanup");
            git(
                &repo,
                &[
                    "worktree",
                    "remove",
                    "--force",
                    plain.to_str().expect("utf-8"),
                ],
            );
        } else {
            kept = Some((wt, report, plain));
        }
    }
    let (wt, setup_report, plain) = kept.expect("one sample");
    let npm_ci = run(&plain, "npm", &["ci", "--no-audit", "--no-fund"]);
    let (add, created, first_agent) = (median(adds), median(created), median(firsts));

    // Two gate rounds in one session.
    let session = GateSession::for_checkout(
        &wt.path,
        &wt.path.join(".supervisor/gates"),
        ToolEnv::base(),
    );
    let target = modules / 2;
    let service = format!("src/modules/m{target:03}/service.ts");
    let original = std::fs::read_to_string(wt.path.join(&service)).expect("service");
    let broken = original.replace("label: newId", "label: 42, extra: newId");
    assert_ne!(broken, original);
    std::fs::write(wt.path.join(&service), &broken).expect("break");
    let (wall1, r1) = round(&rt, &wt.path, &session);
    let fixed = original.replace(
        "  return describe",
        "  const checked = summary.count >= 0 ? summary : { ...summary, count: 0 };\n  return describe",
    )
    .replace(
        "return describe{target}(summary);",
        &format!("return describe{target}(checked);"),
    );
    std::fs::write(wt.path.join(&service), &fixed).expect("fix");
    let (wall2, r2) = round(&rt, &wt.path, &session);
    rt.run(60, session.shutdown());
    if std::env::var_os("ITERATION_KEEP").is_some() {
        println!("kept: {}", tmp.keep().display());
        return;
    }

    println!();
    println!("{:<26} {:>10} {:>10}", "gate", "round 1", "round 2");
    for gate in ["tsc", "lsp", "dead-code", "duplicates"] {
        println!(
            "{gate:<26} {:>10} {:>10}",
            secs(report_ms(&r1, gate)),
            secs(report_ms(&r2, gate))
        );
    }
    println!(
        "{:<26} {:>10} {:>10}",
        "round wall",
        secs(wall1),
        secs(wall2)
    );
    for (n, reports) in [(1, &r1), (2, &r2)] {
        for r in reports.iter() {
            println!(
                "  round {n} {:<10} {} — {}",
                r.name,
                r.status.label(),
                r.summary
            );
        }
    }
    let ratio = wall2.as_secs_f64() / wall1.as_secs_f64().max(1e-9);
    println!(
        "round 2 / round 1: {ratio:.2} (target ≤ 0.50: {})",
        if ratio <= 0.5 { "met" } else { "missed" }
    );
    println!();
    println!("medians of {samples} alternated samples:");
    println!("git worktree add           {:>10}", secs(add));
    println!("cold npm ci                {:>10}", secs(npm_ci));
    println!("git worktree add + npm ci  {:>10}", secs(add + npm_ci));
    println!(
        "time to first agent        {:>10}  (dependencies: {:?})",
        secs(first_agent),
        setup_report.dependencies
    );
    let meanwhile = match setup_report.dependencies {
        Some(Dependencies::Cloned) => "  (node_modules cloned meanwhile)",
        _ => "",
    };
    println!(
        "  worktree checked out       {:>10}{meanwhile}",
        secs(created)
    );
    for step in &setup_report.steps {
        println!("  setup: {} — {}", step.what, step.detail);
    }
    let ratio = first_agent.as_secs_f64() / add.as_secs_f64().max(1e-9);
    println!(
        "time to first agent / git worktree add: {ratio:.2} (target ≤ 1.20: {})",
        if ratio <= 1.2 { "met" } else { "missed" }
    );
    assert!(
        r1.iter()
            .any(|r| r.name == "tsc" && r.status.label() == "fail"),
        "round 1 must find the type error: {r1:#?}"
    );
    assert!(
        r2.iter()
            .any(|r| r.name == "tsc" && r.status.label() == "pass"),
        "round 2 must pass tsc: {r2:#?}"
    );
}
