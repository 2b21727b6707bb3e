//! A newcomer's first runs: what `supervisor run` leaves behind in the repository, boards that
//! were not set up for supervisor, and the preflight that refuses before anything is written.

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use supervisor::demo::{World, WorldSpec, git};

#[path = "support/specs.rs"]
mod specs;
use specs::*;
#[path = "support/pty.rs"]
mod pty;
use pty::Pty;
#[path = "support/screen.rs"]
mod screen;

const BIN: &str = env!("CARGO_BIN_EXE_supervisor");

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn summary(r: &Run) -> Value {
    serde_json::from_str(&r.stdout).unwrap_or(Value::Null)
}

/// The binary in the world's repository, with the world's environment (none of the caller's
/// GitHub or supervisor settings).
fn command(world: &World, args: &[&str]) -> std::process::Command {
    let mut cmd = std::process::Command::new(BIN);
    cmd.args(args).current_dir(&world.repo);
    for (k, _) in std::env::vars() {
        if k.starts_with("SUPERVISOR_")
            || k == "GH_TOKEN"
            || k == "GITHUB_TOKEN"
            || k == "GITHUB_API_URL"
            || k == "NO_COLOR"
        {
            cmd.env_remove(k);
        }
    }
    cmd.envs(world.env());
    cmd
}

/// Run the binary in the world's repository, stdin empty.
async fn supervisor(world: &World, args: &[&str]) -> Run {
    let mut cmd = tokio::process::Command::from(command(world, args));
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let child = cmd.spawn().expect("supervisor starts");
    let out = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .expect("supervisor finished within 120 s")
        .expect("supervisor ran");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The binary in the world's repository on a terminal of its own.
fn on_terminal(world: &World, args: &[&str]) -> Pty {
    let mut cmd = command(world, args);
    cmd.env("TERM", "xterm-256color");
    Pty::spawn(cmd)
}

/// The journal of the world's only run.
fn journal_text(world: &World) -> String {
    let journal = std::fs::read_dir(world.runs_dir())
        .unwrap()
        .flatten()
        .map(|e| e.path().join("events.jsonl"))
        .find(|p| p.is_file())
        .unwrap();
    std::fs::read_to_string(journal).unwrap()
}

async fn world(spec: WorldSpec) -> (tempfile::TempDir, World) {
    let dir = tempfile::tempdir().unwrap();
    let world = World::build(dir.path(), spec).await.expect("world builds");
    (dir, world)
}

/// A repository whose `.gitignore` says nothing about supervisor.
fn plain_gitignore(spec: &mut WorldSpec) {
    spec.files.retain(|(p, _)| p != ".gitignore");
    spec.files
        .push((".gitignore".into(), "node_modules/\n".into()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_leaves_nothing_untracked_in_the_repository() {
    let mut spec = spec();
    plain_gitignore(&mut spec);
    let (_d, world) = world(spec).await;
    let r = supervisor(&world, &["run", "1", "--json"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(summary(&r)["end"]["kind"], "pull-request");
    assert!(world.runs_dir().is_dir());
    // Not a terminal: one plain line per change while the run moves, before the summary.
    for line in [
        "] run 1-",
        "] → Research · researcher, attempt 1 · stage 1/5",
        "] ✓ Research · researcher",
        "]   gates after Implementation (attempt 1): ",
        "] pull request http://",
    ] {
        assert!(
            r.stderr.contains(line),
            "{line} missing from:\n{}",
            r.stderr
        );
    }
    // How it ended is said once, by the summary after the progress.
    assert_eq!(
        r.stderr.matches("✔ approved — pull request opened").count(),
        1,
        "{}",
        r.stderr
    );
    let status = git(
        &world.repo,
        &["status", "--porcelain", "--untracked-files=all"],
    )
    .unwrap();
    assert_eq!(status, "", "the run left files for git to see");

    // The run is in the history, with its pull request.
    let r = supervisor(&world, &["runs", "--json"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let runs = summary(&r)["runs"].clone();
    assert_eq!(runs.as_array().unwrap().len(), 1, "{runs}");
    assert_eq!(runs[0]["issue"], 1);
    assert_eq!(runs[0]["status"], "done");
    assert_eq!(runs[0]["column"], "Done");
    assert!(
        runs[0]["pr"].as_str().unwrap().ends_with("/pull/2"),
        "{runs}"
    );
    assert!(runs[0]["tokens"].as_u64().unwrap() > 0, "{runs}");
    assert!(runs[0]["ended"].is_string(), "{runs}");
}

/// Issue 30: an agent stopped by its budget still costs what it used. Its CLI reported no cost (that
/// would have come at its end), so its usage is priced from the price table (`prices` here; the
/// built-in table knows the common Claude and OpenAI models), and the run's summary, its timeline
/// and `supervisor runs` add it in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_agents_cost_adds_into_the_run_and_the_board() {
    let mut spec = spec();
    spec.settings
        .insert("agentTokenBudget".into(), serde_json::json!(2000));
    spec.settings.insert(
        "prices".into(),
        serde_json::json!({ "scripted": { "inputPerMTok": 1000, "outputPerMTok": 2000 } }),
    );
    set_role(
        &mut spec,
        "developer",
        vec![serde_json::json!([
            { "write": { "path": "src/hours.ts", "content": GOOD_CODE } },
            { "usage": { "input": 1500, "output": 600 } },
            { "sleep": 5000 }
        ])],
    );
    let (_d, world) = world(spec).await;
    let r = supervisor(&world, &["run", "1", "--json"]).await;
    assert_eq!(r.code, 1, "{}", r.stderr);
    let s = summary(&r);
    let agents = s["agents"].as_array().cloned().unwrap_or_default();
    let cost = |a: &Value| a["costUsd"].as_f64().unwrap_or_default();
    let near = |a: f64, b: f64| (a - b).abs() < 1e-9;
    let developer = agents
        .iter()
        .find(|a| a["agent"] == "developer")
        .cloned()
        .unwrap_or_default();
    // 1500 input tokens at $1000 and 600 output tokens at $2000 per million.
    assert!(near(cost(&developer), 2.7), "{s}");
    assert!(
        developer["exit"]
            .as_str()
            .unwrap_or_default()
            .contains("token budget"),
        "{developer}"
    );
    // The three agents before it (1000 in, 200 out each) completed without a cost from their CLI.
    assert_eq!(agents.len(), 4, "{s}");
    let total: f64 = agents.iter().map(cost).sum();
    assert!(near(total, 3.0 * 1.4 + 2.7), "{s}");

    let r = supervisor(&world, &["runs", "--json"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let runs = summary(&r);
    assert!(near(cost(&runs["runs"][0]), total), "{runs}");
    assert!(near(cost(&runs["total"]), total), "{runs}");
    assert_eq!(runs["total"]["runs"], 1, "{runs}");
    let r = supervisor(&world, &["runs"]).await;
    assert!(
        r.stdout.contains("total: 1 run, 4 agent runs, ") && r.stdout.contains("cost $6.90"),
        "{}",
        r.stdout
    );
    let r = supervisor(&world, &["runs", "show", "1"]).await;
    assert!(
        r.stdout
            .contains("developer exceeded the token budget (2100 of 2000 tokens) in ")
            && r.stdout.contains("~$2.7000"),
        "{}",
        r.stdout
    );
}

/// A stopped run's history: the list, its timeline and its postmortem with the command to go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_run_is_listed_shown_and_explained() {
    let mut spec = spec();
    spec.settings
        .insert("maxRejections".into(), serde_json::json!(1));
    set_role(&mut spec, "auditor", vec![reject("still wrong")]);
    let (_d, world) = world(spec).await;
    let r = supervisor(&world, &["run", "1", "--progress", "jsonl"]).await;
    assert_eq!(r.code, 1, "{}", r.stderr);
    // The journal's events, live on stdout: the same lines the journal file holds.
    let events: Vec<Value> = (r.stdout.lines())
        .map(|l| serde_json::from_str(l).expect("each line is one JSON event"))
        .collect();
    let kinds: Vec<&str> = events.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds.first(), Some(&"run-started"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"finished"), "{kinds:?}");
    assert!(kinds.contains(&"stopped"), "{kinds:?}");
    assert_eq!(journal_text(&world), r.stdout);
    let r = supervisor(&world, &["run", "1", "--json", "--progress", "jsonl"]).await;
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("choose one"), "{}", r.stderr);
    // Listings and reports go to stdout, to be paged or piped (`supervisor runs | less`).
    let r = supervisor(&world, &["runs"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stderr, "", "nothing but the listing, and that on stdout");
    let row = r.stdout.lines().nth(1).unwrap_or_default().to_string();
    assert!(row.starts_with("#1 "), "{}", r.stdout);
    assert!(row.contains(" stopped "), "{row}");
    assert!(row.contains(" Audit "), "{row}");
    let r = supervisor(&world, &["runs", "show", "1"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stderr, "", "the timeline is on stdout");
    for line in [
        "Research: researcher starts (attempt 1)",
        "GitHub: card moved to Research",
        "(rejection)",
        "Implementation: gates:",
        "stopped: Audit rejected the work 2 times (maxRejections 1)",
    ] {
        assert!(
            r.stdout.contains(line),
            "{line} missing from:\n{}",
            r.stdout
        );
    }
    let r = supervisor(&world, &["runs", "why", "1"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stderr, "", "the postmortem is on stdout");
    assert!(r.stdout.contains("where:  Audit"), "{}", r.stdout);
    assert!(
        r.stdout.contains("why:    Audit rejected the work 2 times"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("last agent: auditor in Audit (attempt 2)"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("\n        supervisor run 1\n"),
        "{}",
        r.stdout
    );
    let r = supervisor(&world, &["runs", "why", "7"]).await;
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("no run `7`"), "{}", r.stderr);
    assert_eq!(r.stdout, "", "an error is no report");
    // Nothing is older than a day yet; everything is older than the future.
    let r = supervisor(&world, &["runs", "prune", "--older-than", "1d", "--json"]).await;
    assert_eq!(
        summary(&r)["removed"],
        serde_json::json!([]),
        "{}",
        r.stderr
    );
    let r = supervisor(&world, &["runs", "prune", "--older-than", "1d"]).await;
    assert!(r.stdout.starts_with("removed 0 run(s)"), "{}", r.stderr);
    let r = supervisor(&world, &["runs", "prune", "--older-than", "soon"]).await;
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("like 30d"), "{}", r.stderr);
}

/// A number argument that is not one is a usage error naming the argument, not the integer
/// parser's "invalid digit found in string".
#[test]
fn a_number_argument_that_is_not_one_is_named() {
    for (args, message) in [
        (
            &["run", "abc"][..],
            "ISSUE must be an issue number, got `abc`",
        ),
        (
            &["revise", "x"],
            "PR must be a pull request number, got `x`",
        ),
        (
            &["serve", "--webhook-secret-env", "S", "--port", "80x"],
            "--port must be a port number, 0 to 65535, got `80x`",
        ),
        (
            &["watch", "--max-concurrent", "0"],
            "--max-concurrent must be a number of runs, 1 or more, got `0`",
        ),
    ] {
        let out = std::process::Command::new(BIN).args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
        assert!(!stderr.contains("invalid digit"), "{args:?}: {stderr}");
    }
}

/// `init` on the sandbox's board #1 with alice as the codeowner.
const INIT_BOARD_1: [&str; 7] = [
    "init",
    "--repo",
    "demo-org/durations",
    "--project-number",
    "1",
    "--codeowners",
    "alice",
];

/// The board's options, replacing the built-in workflow's column names.
fn board_options(world: &World, options: &[&str], card: Option<&str>) {
    world.sandbox.with_state(|s| {
        let board = s.board.as_mut().unwrap();
        board.options = options.iter().map(|o| o.to_string()).collect();
        match card {
            Some(c) => {
                board.items.insert(1, Some(c.to_string()));
            }
            None => {
                board.items.remove(&1);
            }
        }
    });
}

fn card(world: &World) -> Option<String> {
    world
        .sandbox
        .with_state(|s| s.column_of(1).map(String::from))
}

fn comment_count(world: &World) -> usize {
    world.sandbox.with_state(|s| s.comments_of(1).len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn board_options_named_otherwise_are_mapped_by_the_columns_setting() {
    let mut spec = spec();
    spec.settings.insert(
        "columns".into(),
        serde_json::json!({ "Backlog": "Todo", "Done": "Shipped" }),
    );
    let (_d, world) = world(spec).await;
    let columns = [
        "Todo",
        "Research",
        "Architecture",
        "TestDesign",
        "Implementation",
        "Audit",
        "Shipped",
    ];
    board_options(&world, &columns, Some("Todo"));
    let r = supervisor(&world, &["run", "1", "--json"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(summary(&r)["end"]["kind"], "pull-request");
    assert_eq!(card(&world).as_deref(), Some("Shipped"));
}

/// GitHub's default board (Todo / In Progress / Done): every way of starting a run refuses with
/// the fix before anything is written — no comment, no card, no worktree, no checkpoint.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn githubs_default_board_is_refused_before_anything_is_written() {
    let (_d, world) = world(spec()).await;
    board_options(&world, &["Todo", "In Progress", "Done"], Some("Todo"));
    let comments = comment_count(&world);
    for args in [
        &["run", "1"][..],
        &["run", "1", "--dry-run"][..],
        &["run", "1", "--add-to-board"][..],
    ] {
        let r = supervisor(&world, args).await;
        assert_eq!(r.code, 3, "{args:?}: {}", r.stderr);
        assert!(
            r.stderr
                .contains("no column on the board for Backlog, Research")
                && r.stderr.contains("supervisor init"),
            "{args:?}: {}",
            r.stderr
        );
    }
    board_options(&world, &["Todo", "In Progress", "Done"], None);
    let r = supervisor(&world, &["run", "1", "--add-to-board"]).await;
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert_eq!(comment_count(&world), comments, "nothing was posted");
    assert_eq!(card(&world), None, "the card was not added");
    let writes: u64 = world
        .sandbox
        .request_counts()
        .iter()
        .filter(|(route, _)| {
            route.starts_with("POST /repos")
                || route.starts_with("PATCH")
                || route.contains("UpdateItemStatus")
                || route.contains("AddToBoard")
        })
        .map(|(_, n)| n)
        .sum();
    assert_eq!(writes, 0, "{:?}", world.sandbox.request_counts());
    assert!(!world.worktrees.join("worktree-git-issue-1").exists());
    assert!(!world.runs_dir().join("checkpoint-1.json").exists());
}

async fn doctor(world: &World, env: &[(&str, &str)]) -> (Run, Value) {
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.args(["doctor", "--json"])
        .current_dir(&world.repo)
        .stdin(Stdio::null())
        .kill_on_drop(true);
    for (k, _) in std::env::vars() {
        if k.starts_with("SUPERVISOR_") || k == "GH_TOKEN" || k == "GITHUB_TOKEN" {
            cmd.env_remove(k);
        }
    }
    cmd.envs(world.env());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().await.unwrap();
    let run = Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    let v = serde_json::from_str(&run.stdout).unwrap_or(Value::Null);
    (run, v)
}

/// The check called `name` (the first, when several share the name).
fn check<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["checks"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["name"] == name))
        .unwrap_or_else(|| panic!("no check {name} in {v}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_passes_on_a_ready_repository_and_names_each_check() {
    let (_d, world) = world(spec()).await;
    let (r, v) = doctor(&world, &[]).await;
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(v["ok"], true);
    for name in [
        "token",
        "scopes",
        "repository",
        "board",
        "columns",
        "codeowners",
        "push",
        "agent",
        "worktrees",
    ] {
        assert_eq!(check(&v, name)["mark"], "ok", "{name}: {v}");
    }
    assert!(
        check(&v, "scopes")["detail"]
            .as_str()
            .unwrap()
            .contains("supervisor-bot"),
        "{v}"
    );
}

/// doctor says how a codeowner asks for a revision: with a token of their own they cannot request
/// changes on the pull requests it opens, so the `/supervisor revise` comment is named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_says_how_a_codeowner_asks_for_a_revision() {
    let (_d, world) = world(spec()).await;
    let (_, v) = doctor(&world, &[]).await;
    let revise = check(&v, "revise");
    assert_eq!(revise["mark"], "ok", "{v}");
    assert!(
        revise["detail"]
            .as_str()
            .unwrap()
            .contains("opened by supervisor-bot"),
        "{v}"
    );

    let mut own = spec();
    own.bot = own.codeowner.clone();
    let (_d2, world) = self::world(own).await;
    let (r, v) = doctor(&world, &[]).await;
    assert_eq!(r.code, 0, "a warning fails nothing: {v}");
    let revise = check(&v, "revise");
    assert_eq!(revise["mark"], "warn", "{v}");
    assert!(
        revise["detail"]
            .as_str()
            .unwrap()
            .contains("alice, a codeowner"),
        "{v}"
    );
    assert!(
        revise["fix"]
            .as_str()
            .unwrap()
            .contains("/supervisor revise <what to change>"),
        "{v}"
    );
}

/// With the oracle in the workflow, doctor names the test runner, or says that the required red and
/// green gates would stop every run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_names_the_test_runner_of_the_oracle() {
    let mut spec = spec();
    spec.workflow = Some(serde_json::from_str(supervisor::config::DEFAULT_WORKFLOW).unwrap());
    let (_d, world) = world(spec.clone()).await;
    let (_, v) = doctor(&world, &[]).await;
    let runner = check(&v, "test runner");
    assert_eq!(runner["mark"], "ok", "{v}");
    assert!(
        runner["detail"].as_str().unwrap().starts_with("vitest"),
        "{v}"
    );

    spec.files.retain(|(p, _)| p != "package.json");
    let (_d2, bare) = self::world(spec).await;
    let (r, v) = doctor(&bare, &[]).await;
    assert_eq!(r.code, 2, "{}", r.stderr);
    let runner = check(&v, "test runner");
    assert_eq!(runner["mark"], "fail", "{v}");
    assert!(
        runner["detail"]
            .as_str()
            .unwrap()
            .contains("no test runner found"),
        "{v}"
    );
    assert!(
        runner["fix"]
            .as_str()
            .unwrap()
            .contains("workflow-without-oracle"),
        "{v}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_names_a_missing_scope() {
    let mut spec = spec();
    spec.token_scopes = vec!["repo".into()];
    let (_d, world) = world(spec).await;
    let (r, v) = doctor(&world, &[]).await;
    assert_eq!(r.code, 2, "{}", r.stderr);
    let scopes = check(&v, "scopes");
    assert_eq!(scopes["mark"], "fail", "{v}");
    assert!(
        scopes["detail"].as_str().unwrap().contains("'project'"),
        "{v}"
    );
    assert!(
        scopes["fix"]
            .as_str()
            .unwrap()
            .contains("gh auth refresh -s project"),
        "{v}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_names_a_missing_option_and_an_unknown_codeowner() {
    let mut spec = spec();
    spec.settings.insert(
        "codeowners".into(),
        serde_json::json!(["alice", "nobody-here"]),
    );
    let (_d, world) = world(spec).await;
    board_options(
        &world,
        &[
            "Backlog",
            "Research",
            "Architecture",
            "Implementation",
            "Audit",
            "Done",
        ],
        Some("Backlog"),
    );
    let (r, v) = doctor(&world, &[]).await;
    assert_eq!(r.code, 2, "{}", r.stderr);
    let columns = check(&v, "columns");
    assert_eq!(columns["mark"], "fail");
    assert_eq!(
        columns["detail"], "no column on the board for TestDesign",
        "{v}"
    );
    let owners = check(&v, "codeowners");
    assert_eq!(owners["mark"], "fail");
    assert!(
        owners["detail"].as_str().unwrap().contains("nobody-here"),
        "{v}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_names_a_missing_agent_cli() {
    let mut spec = spec();
    spec.settings.insert("agentBackend".into(), "claude".into());
    let (_d, world) = world(spec).await;
    let (r, v) = doctor(&world, &[("PATH", "/nonexistent")]).await;
    assert_eq!(r.code, 2, "{}", r.stderr);
    let agent = check(&v, "agent");
    assert_eq!(agent["mark"], "fail", "{v}");
    assert!(
        agent["detail"].as_str().unwrap().starts_with("claude ("),
        "{v}"
    );
    assert!(
        agent["fix"].as_str().unwrap().contains("install the CLI"),
        "{v}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_refuses_an_app_on_a_users_board() {
    use supervisor::sandbox::{OwnerType, TokenSeed};
    let (_d, world) = world(spec()).await;
    world.sandbox.with_state(|s| {
        s.repo.owner_type = OwnerType::User;
        s.board.as_mut().unwrap().owner_type = OwnerType::User;
        s.tokens.push(TokenSeed {
            token: "ghs_installation0123456789".into(),
            login: "supervisor-app[bot]".into(),
            scopes: vec!["repo".into(), "project".into()],
            permissions: None,
            expires_at: None,
        });
    });
    let (r, v) = doctor(&world, &[("GH_TOKEN", "ghs_installation0123456789")]).await;
    assert_eq!(r.code, 2, "{}", r.stderr);
    let board = check(&v, "board");
    assert_eq!(board["mark"], "fail", "{v}");
    assert!(
        board["detail"]
            .as_str()
            .unwrap()
            .contains("GitHub Apps cannot reach boards owned by a user"),
        "{v}"
    );
}

fn board_of(world: &World) -> Option<(String, Vec<String>)> {
    world.sandbox.with_state(|s| {
        s.board
            .as_ref()
            .map(|b| (b.title.clone(), b.options.clone()))
    })
}

fn settings_block(world: &World) -> Value {
    let text = std::fs::read_to_string(world.repo.join(".pi/settings.json")).unwrap();
    serde_json::from_str::<Value>(&text).unwrap()["supervisor"].clone()
}

/// The closing lines of an `init` that wrote `files`.
fn commit_hint(files: &str) -> String {
    format!(
        "commit and push these files so the GitHub Action and `supervisor watch` on another machine find them (a fresh checkout has only what was pushed):\n  git add {files}\n  git commit -m \"Set up supervisor\" && git push\n"
    )
}

/// From no board to a pull request: `init --create-board`, `doctor`, `run --add-to-board`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_creates_a_board_and_the_first_run_reaches_a_pull_request() {
    let mut spec = spec();
    plain_gitignore(&mut spec);
    spec.issue.column = None;
    let (_d, world) = world(spec).await;
    world.sandbox.with_state(|s| s.board = None);
    let r = supervisor(
        &world,
        &["init", "--repo", "demo-org/durations", "--create-board"],
    )
    .await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let (title, options) = board_of(&world).expect("a board was created");
    assert_eq!(title, "durations pipeline");
    assert_eq!(
        options,
        [
            "Backlog",
            "Research",
            "Architecture",
            "TestDesign",
            "Implementation",
            "Audit",
            "Done"
        ]
    );
    let counts = world.sandbox.request_counts();
    assert_eq!(
        counts.get("POST /graphql CreateBoard"),
        Some(&1),
        "{counts:?}"
    );
    let block = settings_block(&world);
    assert_eq!(block["projectNumber"], 1);
    // The token's account is the default codeowner; the scripted agents' settings are kept.
    assert_eq!(block["codeowners"], serde_json::json!(["supervisor-bot"]));
    assert_eq!(block["agentBackend"], "scripted");
    // Everything supervisor writes while it works is ignored: runs, gate state, the watcher's.
    let ignore = std::fs::read_to_string(world.repo.join(".gitignore")).unwrap();
    for dir in [
        ".supervisor/runs/",
        ".supervisor/gates/",
        ".supervisor/watch/",
    ] {
        assert!(ignore.lines().any(|l| l == dir), "{dir}: {ignore}");
    }
    // It says what it chose: the board and the codeowners.
    assert!(
        r.stderr.contains(
            "repository demo-org/durations · board #1 of demo-org · codeowners supervisor-bot"
        ),
        "{}",
        r.stderr
    );
    // It ends with what to commit: the Action's checkout has only what was pushed.
    assert!(
        r.stderr
            .ends_with(&commit_hint(".pi/settings.json .gitignore")),
        "{}",
        r.stderr
    );

    // The issue is alice's: make her a codeowner too, as a newcomer would edit the file.
    let r = supervisor(&world, &INIT_BOARD_1).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let (r, v) = doctor(&world, &[]).await;
    assert_eq!(r.code, 0, "{v}");
    let r = supervisor(&world, &["run", "1", "--add-to-board", "--json"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(summary(&r)["end"]["kind"], "pull-request");
    assert_eq!(card(&world).as_deref(), Some("Done"));
}

/// An existing board with GitHub's default columns: init maps what it can, names what is missing,
/// shows the option change and applies it only with --yes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_maps_an_existing_board_and_adds_columns_only_when_told() {
    let (_d, world) = world(spec()).await;
    board_options(&world, &["Todo", "In Progress", "Done"], Some("Todo"));
    let base = INIT_BOARD_1;
    let r = supervisor(&world, &base).await;
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("no column for Research, Architecture, TestDesign, Implementation, Audit")
            && r.stderr.contains("--add-columns"),
        "{}",
        r.stderr
    );
    let with_add: Vec<&str> = base.iter().copied().chain(["--add-columns"]).collect();
    let r = supervisor(&world, &with_add).await;
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("after: Todo, In Progress, Research, Architecture, TestDesign, Implementation, Audit, Done")
            && r.stderr.contains("--yes"),
        "{}",
        r.stderr
    );
    assert_eq!(
        board_of(&world).unwrap().1,
        ["Todo", "In Progress", "Done"],
        "nothing changed"
    );
    let with_yes: Vec<&str> = with_add.iter().copied().chain(["--yes"]).collect();
    let r = supervisor(&world, &with_yes).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        settings_block(&world)["columns"],
        serde_json::json!({ "Backlog": "Todo" })
    );
    assert_eq!(
        card(&world).as_deref(),
        Some("Todo"),
        "the card kept its column"
    );
    let r = supervisor(&world, &["run", "1", "--json"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(card(&world).as_deref(), Some("Done"));
}

/// Running `init` again on a board it already mapped keeps the saved `columns`: nothing is asked
/// again and nothing is refused; a saved option the board no longer has is not kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_again_keeps_the_boards_saved_columns() {
    let (_d, world) = world(spec()).await;
    // Every stage has an option of its name but Implementation, whose option is `implementation`.
    let board = |implementation: &str| {
        board_options(
            &world,
            &[
                "Backlog",
                "Research",
                "Architecture",
                "TestDesign",
                implementation,
                "Audit",
                "Done",
            ],
            Some("Backlog"),
        )
    };
    board("Build");
    let base = INIT_BOARD_1;
    let first: Vec<&str> = base
        .iter()
        .copied()
        .chain(["--column", "Implementation=Build"])
        .collect();
    let r = supervisor(&world, &first).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let saved = serde_json::json!({ "Implementation": "Build" });
    assert_eq!(settings_block(&world)["columns"], saved);

    let r = supervisor(&world, &base).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("Implementation → \"Build\""),
        "{}",
        r.stderr
    );
    assert_eq!(settings_block(&world)["columns"], saved);

    // The option was renamed on the board: the saved mapping no longer holds.
    board("Building");
    let r = supervisor(&world, &base).await;
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("no column for Implementation"),
        "{}",
        r.stderr
    );
}

/// Point `origin` at the repository on GitHub, where `init` reads it from (the world's pushes go
/// to a local remote; `init` pushes nothing).
fn origin_on_github(world: &World) {
    let url = "https://github.com/demo-org/durations.git";
    git(&world.repo, &["remote", "set-url", "origin", url]).unwrap();
}

/// On a real terminal `init` asks what its flags leave open: the repository (the one `origin`
/// names by default, none when it names none), the codeowners (the token's account by default),
/// the board, the slash commands and a copy of the workflow. A closed input (Ctrl-D) writes
/// nothing; skipping the board writes the rest and says what is missing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_on_a_terminal_asks_and_writes_the_settings_and_gitignore() {
    let mut spec = spec();
    plain_gitignore(&mut spec);
    spec.workflow = None;
    let (_d, world) = world(spec).await;
    world.sandbox.with_state(|s| s.board = None);
    // A repository with no settings yet.
    std::fs::remove_file(world.repo.join(".pi/settings.json")).unwrap();
    let settings = world.repo.join(".supervisor/settings.json");
    tokio::task::block_in_place(|| {
        let mut t = on_terminal(&world, &["init"]);
        // `origin` is no GitHub URL here: an answer is needed.
        t.answer("GitHub repository, owner/name: ", "");
        t.answer("an answer is needed", "demo-org/durations");
        t.expect("Codeowners: GitHub logins whose issues run, comma-separated [supervisor-bot]: ");
        t.end_input();
        let (status, screen) = t.finish();
        assert_eq!(status.code(), Some(2), "{screen}");
        assert!(screen.contains("input ended"), "{screen}");
    });
    assert!(board_of(&world).is_none(), "nothing was made");
    assert!(!settings.exists(), "nothing was written");

    origin_on_github(&world);
    tokio::task::block_in_place(|| {
        let mut t = on_terminal(&world, &["init"]);
        t.answer("GitHub repository, owner/name [demo-org/durations]: ", "");
        t.answer("comma-separated [supervisor-bot]: ", "");
        t.answer(
            "Board: create a new one, an existing board's number, or skip (set it later) [create]: ",
            "",
        );
        t.answer(
            "Install /supervisor for pi and Claude Code in this repository? [n]: ",
            "y",
        );
        t.answer(
            "Copy the workflow and role files into .supervisor/ for editing? [n]: ",
            "yes",
        );
        let (status, screen) = t.finish();
        assert_eq!(status.code(), Some(0), "{screen}");
        assert!(screen.contains("created board #1"), "{screen}");
    });
    let (title, options) = board_of(&world).expect("a board was created");
    assert_eq!(title, "durations pipeline");
    assert_eq!(options.len(), 7, "{options:?}");
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    assert_eq!(
        written,
        serde_json::json!({ "supervisor": {
            "repo": "demo-org/durations", "projectNumber": 1, "codeowners": ["supervisor-bot"]
        } })
    );
    let ignore = std::fs::read_to_string(world.repo.join(".gitignore")).unwrap();
    assert_eq!(
        ignore.lines().filter(|l| *l == ".supervisor/runs/").count(),
        1,
        "{ignore}"
    );
    assert!(world.repo.join(".claude/commands/supervisor.md").is_file());
    assert!(
        world
            .repo
            .join(".pi/extensions/supervisor/index.ts")
            .is_file()
    );
    let copied = std::fs::read_to_string(world.repo.join(".supervisor/workflow.json")).unwrap();
    assert_eq!(copied, supervisor::config::DEFAULT_WORKFLOW);

    // Skipping the board when the settings name none writes the rest and says what is missing.
    std::fs::write(
        &settings,
        r#"{ "supervisor": { "repo": "demo-org/durations", "codeowners": ["alice"] } }"#,
    )
    .unwrap();
    tokio::task::block_in_place(|| {
        let mut t = on_terminal(&world, &["init"]);
        t.answer("[demo-org/durations]: ", "");
        t.answer("[supervisor-bot]: ", "@bob");
        // The boards there are, before the choice.
        t.expect("boards of demo-org: #1 \"durations pipeline\"");
        t.answer("or skip (set it later) [create]: ", "skip");
        t.answer("[n]: ", "");
        t.answer("[n]: ", "n");
        let (status, screen) = t.finish();
        assert_eq!(status.code(), Some(0), "{screen}");
        assert!(
            screen.contains("no board yet: `supervisor init --create-board`"),
            "{screen}"
        );
    });
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    assert_eq!(
        written["supervisor"]["codeowners"],
        serde_json::json!(["bob"])
    );
    assert!(written["supervisor"].get("projectNumber").is_none());
}

/// On a terminal, an existing board with GitHub's default columns: each stage no option is named
/// after is asked for (an option of the board, or add it), the change is shown and applied only
/// after a yes; `--yes` asks nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_on_a_terminal_maps_an_existing_boards_columns() {
    let (_d, world) = world(spec()).await;
    board_options(&world, &["Todo", "In Progress", "Done"], Some("Todo"));
    origin_on_github(&world);
    let answer_all = |mut t: Pty, apply: &str| {
        t.answer("[demo-org/durations]: ", "");
        t.answer("[supervisor-bot]: ", "");
        t.answer("or skip (keep #1) [skip]: ", "#1");
        t.answer("[n]: ", "");
        t.answer("[n]: ", "");
        for stage in ["Research", "Architecture", "TestDesign"] {
            t.answer(
                &format!("Board column for {stage}: one of In Progress, or add a new one [add]: "),
                "",
            );
        }
        t.answer(
            "Board column for Implementation: one of In Progress, or add a new one [add]: ",
            "in progress",
        );
        // No option is left for Audit: it is added without asking.
        t.expect("after: Todo, Research, Architecture, TestDesign, In Progress, Audit, Done");
        t.answer("Apply this change? [n]: ", apply);
        t.finish()
    };
    tokio::task::block_in_place(|| {
        let (status, screen) = answer_all(on_terminal(&world, &["init"]), "");
        assert_eq!(status.code(), Some(2), "{screen}");
        assert!(screen.contains("nothing changed"), "{screen}");
        assert!(!screen.contains("Board column for Audit"), "{screen}");
    });
    assert_eq!(
        board_of(&world).unwrap().1,
        ["Todo", "In Progress", "Done"],
        "nothing changed"
    );
    tokio::task::block_in_place(|| {
        let (status, screen) = answer_all(on_terminal(&world, &["init"]), "y");
        assert_eq!(status.code(), Some(0), "{screen}");
    });
    assert_eq!(board_of(&world).unwrap().1.len(), 7);
    let block = settings_block(&world);
    assert_eq!(
        block["columns"],
        serde_json::json!({ "Backlog": "Todo", "Implementation": "In Progress" })
    );
    assert_eq!(block["codeowners"], serde_json::json!(["supervisor-bot"]));
    assert_eq!(
        card(&world).as_deref(),
        Some("Todo"),
        "the card kept its column"
    );

    // With --yes nothing is asked, even on a terminal.
    tokio::task::block_in_place(|| {
        let t = on_terminal(
            &world,
            &[
                "init",
                "--yes",
                "--project-number",
                "1",
                "--column",
                "Implementation=In Progress",
                "--codeowners",
                "alice",
            ],
        );
        let (status, screen) = t.finish();
        assert_eq!(status.code(), Some(0), "{screen}");
        assert!(!screen.contains("]: "), "{screen}");
    });
    assert_eq!(
        settings_block(&world)["codeowners"],
        serde_json::json!(["alice"])
    );
}

/// `--copy-workflow` alone, in a repository with settings, writes the built-in workflow and roles
/// for editing, which `check` then reads; what was edited is kept when it runs again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_copies_the_workflow_for_editing_and_check_reads_it() {
    let mut spec = spec();
    spec.workflow = None;
    let (_d, world) = world(spec).await;
    let r = supervisor(&world, &["init", "--copy-workflow"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let roles: Vec<String> = (supervisor::agent::DEFAULT_AGENTS.iter())
        .map(|(name, _)| format!(".supervisor/agents/{name}.md"))
        .collect();
    let files = format!(".supervisor/workflow.json {}", roles.join(" "));
    assert!(r.stderr.ends_with(&commit_hint(&files)), "{}", r.stderr);
    let copied = std::fs::read_to_string(world.repo.join(".supervisor/workflow.json")).unwrap();
    assert_eq!(copied, supervisor::config::DEFAULT_WORKFLOW);
    for (name, text) in supervisor::agent::DEFAULT_AGENTS {
        let path = world.repo.join(format!(".supervisor/agents/{name}.md"));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text, "{name}");
    }
    let r = supervisor(&world, &["check"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let role = world.repo.join(".supervisor/agents/researcher.md");
    std::fs::write(&role, "---\nname: researcher\nmodel: [\n---\nbroken\n").unwrap();
    let r = supervisor(&world, &["check"]).await;
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains(".supervisor/agents/researcher.md"),
        "{}",
        r.stderr
    );
    let r = supervisor(&world, &["init", "--copy-workflow"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("kept "), "{}", r.stderr);
    assert!(
        !r.stderr.contains("git add"),
        "nothing new to commit: {}",
        r.stderr
    );
    assert!(std::fs::read_to_string(&role).unwrap().contains("broken"));
}

/// A world whose Implementation gates end every way a gate can: `check` fails on the developer's
/// first change and passes on the second, `slow` overruns its time and is not run.
fn spec_with_gate_rounds() -> WorldSpec {
    let mut spec = spec();
    spec.workflow = Some(workflow_with_hooks(serde_json::json!([
        "ci",
        "traceability",
        { "gate": "command", "name": "check", "run": "grep -q 3600 src/hours.ts" },
        { "gate": "command", "name": "slow", "run": "sleep 10", "timeoutSec": 1 },
    ])));
    let first = "export function hours(n: number): number {\n  return n * 60;\n}\n";
    set_role(
        &mut spec,
        "developer",
        vec![
            developer_change("src/hours.ts", first),
            developer_change("src/hours.ts", GOOD_CODE),
        ],
    );
    spec
}

/// `--progress jsonl` has one `gate-finished` event per gate of a round, each before the round's
/// `gates-finished` and with the status the round reports; plain progress has one line per gate,
/// each before the round's line. A gate that did not run says so, never pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_gate_shows_as_it_finishes_before_its_rounds_verdict() {
    let (_d, jsonl) = world(spec_with_gate_rounds()).await;
    let r = supervisor(&jsonl, &["run", "1", "--progress", "jsonl"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let events: Vec<Value> = (r.stdout.lines())
        .map(|l| serde_json::from_str(l).expect("each line is one JSON event"))
        .collect();
    let mut told: Vec<Value> = Vec::new();
    let mut rounds = Vec::new();
    for e in &events {
        match e["kind"].as_str().unwrap() {
            "gate-finished" => told.push(e["payload"].clone()),
            "gates-finished" => {
                let p = &e["payload"];
                let reports = p["reports"].as_array().unwrap();
                assert_eq!(told.len(), reports.len(), "one event per gate: {told:?}");
                for report in reports {
                    let one = told
                        .iter()
                        .find(|t| t["report"]["name"] == report["name"])
                        .unwrap_or_else(|| panic!("no gate-finished for {report}"));
                    assert_eq!(one["report"], *report);
                    assert_eq!(
                        (&one["stage"], &one["attempt"]),
                        (&p["stage"], &p["attempt"])
                    );
                }
                let status = |name: &str| {
                    let r = reports.iter().find(|r| r["name"] == name).unwrap();
                    r["status"].as_str().unwrap().to_string()
                };
                rounds.push((status("check"), status("slow")));
                told.clear();
            }
            _ => {}
        }
    }
    assert!(
        told.is_empty(),
        "gate events after the last round: {told:?}"
    );
    assert_eq!(
        rounds,
        [
            ("fail".to_string(), "not-run".to_string()),
            ("pass".to_string(), "not-run".to_string())
        ]
    );
    // The journal holds the same lines.
    assert_eq!(journal_text(&jsonl), r.stdout);

    // Plain lines (not a terminal), the same gates before each round's line.
    let (_d2, plain) = world(spec_with_gate_rounds()).await;
    let r = supervisor(&plain, &["run", "1"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let lines: Vec<&str> = r.stderr.lines().collect();
    let rounds: Vec<usize> = (lines.iter().enumerate())
        .filter(|(_, l)| l.contains("]   gates after Implementation"))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(rounds.len(), 2, "{}", r.stderr);
    let mut from = 0;
    for (n, &at) in rounds.iter().enumerate() {
        let gates: Vec<&str> = lines[from..at]
            .iter()
            .filter_map(|l| l.split_once("]   ").map(|(_, g)| g))
            .filter(|g| !g.starts_with("gates after"))
            .collect();
        assert_eq!(gates.len(), 4, "one line per gate: {gates:?}\n{}", r.stderr);
        let line = |name: &str| {
            gates
                .iter()
                .find(|g| g.split(' ').nth(1) == Some(name))
                .unwrap_or_else(|| panic!("no line for {name}: {gates:?}"))
                .to_string()
        };
        assert!(line("ci").starts_with("✔ ci · pass · "), "{gates:?}");
        assert!(
            line("slow").starts_with("⊘ slow · not run: `sleep 10` did not finish within 1 s"),
            "{gates:?}"
        );
        let check = line("check");
        if n == 0 {
            assert!(check.starts_with("✖ check · fail: "), "{check}");
        } else {
            assert!(check.starts_with("✔ check · pass · "), "{check}");
        }
        assert!(!r.stderr.contains('\u{1b}'), "no colour into a pipe");
        from = at + 1;
    }
}

/// On a terminal the round's live line gains each gate's mark as it finishes (the slow gate still
/// running meanwhile), and the marks stay under the round's verdict.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_terminal_the_rounds_line_shows_each_gate_as_it_finishes() {
    let (_d, coloured) = world(spec_with_gate_rounds()).await;
    let screen = tokio::task::block_in_place(|| {
        let mut t = on_terminal(&coloured, &["run", "1"]);
        t.expect("gates after Implementation (attempt 1) · ");
        // The slow gate is not run only after a second: the line shows the others first.
        // (How long the check took depends on the machine's load: 0.0 s, 0.1 s, ….)
        t.expect("\u{1b}[31m✖\u{1b}[0m check ");
        t.expect(" s · 1 running");
        t.expect("\u{1b}[35m⊘\u{1b}[0m slow not run");
        let (status, screen) = t.finish();
        assert_eq!(status.code(), Some(0), "{screen}");
        screen
    });
    // What stays on the screen: each round's verdict, its gates' marks beneath it.
    let lines: Vec<&str> = (screen.split(['\r', '\n']))
        .flat_map(|l| l.split("\u{1b}[2K"))
        .collect();
    let marks_under = |verdict: &str| {
        let at = (lines.iter().position(|l| l.starts_with(verdict)))
            .unwrap_or_else(|| panic!("no `{verdict}` in {screen:?}"));
        lines[at + 1..]
            .iter()
            .find(|l| l.starts_with("    "))
            .unwrap()
            .to_string()
    };
    let first = marks_under(
        "  gates after Implementation (attempt 1): blocked; failing: check; not run: slow",
    );
    for mark in [
        "\u{1b}[32m✔\u{1b}[0m ci ",
        "\u{1b}[31m✖\u{1b}[0m check ",
        "\u{1b}[35m⊘\u{1b}[0m slow not run",
    ] {
        assert!(first.contains(mark), "{mark:?} not in {first:?}");
    }
    let second = marks_under("  gates after Implementation (attempt 2): not-blocked");
    assert!(
        second.contains("\u{1b}[32m✔\u{1b}[0m check ") && !second.contains('✖'),
        "{second:?}"
    );
}

/// `supervisor gates` shows each gate on a line of its own as it finishes (on stderr), before the
/// report (on stdout): its mark coloured on a terminal, not under `NO_COLOR`, nor into a pipe.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gates_command_shows_each_gate_as_it_finishes() {
    let (_d, world) = world(spec_with_gate_rounds()).await;
    // The main branch has no src/hours.ts: `check` fails.
    let args = ["gates", "--only", "check,ci"];
    let r = supervisor(&world, &args).await;
    assert_eq!(r.code, 1, "{}", r.stderr);
    let shown = |start: &str| r.stderr.lines().any(|l| l.starts_with(start));
    assert!(shown("  ✖ check · fail: "), "{}", r.stderr);
    // Without GitHub the CI gate is not run, and says so: never a pass.
    assert!(
        shown("  ⊘ ci · not run: no GitHub connection"),
        "{}",
        r.stderr
    );
    // The report follows them, on stdout: it is the command's output.
    assert!(
        r.stdout
            .lines()
            .any(|l| l.starts_with("verdict: blocked by check")),
        "{}",
        r.stdout
    );
    assert!(!r.stderr.contains("verdict:"), "{}", r.stderr);
    assert!(
        !r.stderr.contains('\u{1b}') && !r.stdout.contains('\u{1b}'),
        "no colour into a pipe"
    );
    tokio::task::block_in_place(|| {
        let (status, screen) = on_terminal(&world, &args).finish();
        assert_eq!(status.code(), Some(1), "{screen}");
        assert!(
            screen.contains("  \u{1b}[31m✖\u{1b}[0m check · fail: "),
            "{screen:?}"
        );
        let mut cmd = command(&world, &args);
        cmd.env("TERM", "xterm-256color").env("NO_COLOR", "1");
        let (status, screen) = Pty::spawn(cmd).finish();
        assert_eq!(status.code(), Some(1), "{screen}");
        assert!(screen.contains("  ✖ check · fail: "), "{screen:?}");
        assert!(
            !screen.contains('\u{1b}'),
            "no colour under NO_COLOR: {screen:?}"
        );
    });
}

/// `--log-format json`: every log line is one JSON object, and each line a run logs carries the
/// run's id and issue, and the stage it was in (its span list, as log shippers read it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_name_the_run_and_stage_on_every_line_of_it() {
    let (_d, world) = world(spec_with_gate_rounds()).await;
    let mut cmd = tokio::process::Command::from(command(
        &world,
        &[
            "run",
            "1",
            "--log-format",
            "json",
            "--progress",
            "none",
            "--json",
        ],
    ));
    cmd.env("RUST_LOG", "supervisor=debug")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(120), cmd.output())
        .await
        .unwrap()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let run_id = summary(&Run {
        code: 0,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::new(),
    })["runId"]
        .as_str()
        .unwrap()
        .to_string();
    let lines: Vec<Value> = stderr
        .lines()
        // The run's own human output (the summary) is not a log line.
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let in_run: Vec<&Value> = lines
        .iter()
        .filter(|l| l["spans"].as_array().is_some_and(|s| !s.is_empty()))
        .collect();
    assert!(in_run.len() >= 20, "{stderr}");
    for line in &in_run {
        let spans = line["spans"].as_array().unwrap();
        assert_eq!(spans[0]["name"], "run", "{line}");
        assert_eq!(spans[0]["run"], run_id.as_str(), "{line}");
        assert_eq!(spans[0]["issue"], 1, "{line}");
        assert!(
            spans
                .iter()
                .any(|s| s["name"] == "stage" && s.get("stage").is_some()),
            "{line}"
        );
    }
    // Agents and gates say which attempt they belong to.
    for what in ["dispatch agent", "run gates"] {
        let line = in_run
            .iter()
            .find(|l| l["fields"]["message"] == what)
            .unwrap_or_else(|| panic!("no {what} line: {stderr}"));
        assert!(line["span"]["attempt"].is_u64(), "{line}");
    }
    let gate_lines = in_run.iter().filter(|l| {
        l["spans"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["name"] == "gate")
    });
    assert!(gate_lines.count() > 0, "{stderr}");
}

/// The auditor's rejection is a line of the progress, with why (its score, or the critical
/// finding) and its first finding; and the run counts rejections one way: the summary's loops
/// say as many as the stop does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejection_shows_in_the_progress_and_every_count_agrees() {
    let mut spec = spec();
    spec.settings
        .insert("maxRejections".into(), serde_json::json!(1));
    set_role(
        &mut spec,
        "auditor",
        vec![reject("the tests assert nothing")],
    );
    let (_d, world) = world(spec).await;
    let r = supervisor(&world, &["run", "1", "--progress", "plain"]).await;
    assert_eq!(r.code, 1, "{}", r.stderr);
    let rejected: Vec<&str> = (r.stderr.lines())
        .filter(|l| l.contains("✘ Audit rejected"))
        .collect();
    assert_eq!(rejected.len(), 2, "{}", r.stderr);
    assert!(
        rejected[0].ends_with(
            "✘ Audit rejected (critical finding: test-quality): the tests assert nothing"
        ),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains("✖ stopped in Audit: Audit rejected the work 2 times (maxRejections 1)"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("loops: 2 rejections,"),
        "the summary counts the rejection that stopped the run:\n{}",
        r.stderr
    );
}

/// On a terminal nothing of the live line is left in the scrollback (the worktree line and the
/// stage lines each on a row of their own), and how the run ended is said once, by the summary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_on_a_terminal_leaves_no_spinner_frame_and_says_its_end_once() {
    let (_d, world) = world(spec()).await;
    let (status, output) =
        tokio::task::block_in_place(|| on_terminal(&world, &["run", "1"]).finish());
    assert_eq!(status.code(), Some(0), "{output}");
    let rows = screen::rows(&output, 120);
    let spinner = ['⠁', '⠂', '⠄', '⡀', '⢀', '⠠', '⠐', '⠈'];
    let frames: Vec<&String> = (rows.iter())
        .filter(|r| r.chars().any(|c| spinner.contains(&c)))
        .collect();
    assert!(
        frames.is_empty(),
        "frames of the live line left: {frames:?}\n{}",
        rows.join("\n")
    );
    assert!(
        rows.iter()
            .any(|r| r.starts_with("worktree ") && r.contains(" ready in ")),
        "{}",
        rows.join("\n")
    );
    assert!(
        rows.iter()
            .any(|r| r.starts_with("✓ Research · researcher")),
        "{}",
        rows.join("\n")
    );
    assert_eq!(
        rows.iter().filter(|r| r.contains("✔ approved")).count(),
        1,
        "{}",
        rows.join("\n")
    );
}

/// `--progress none` shows nothing while the run moves: no worktree line either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_progress_shows_no_worktree_line() {
    let (_d, world) = world(spec()).await;
    let r = supervisor(&world, &["run", "1", "--progress", "none"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!r.stderr.contains(" ready in "), "{}", r.stderr);
    assert!(r.stderr.contains("✔ approved"), "{}", r.stderr);
}

/// A typo'd issue number: the error says the issue does not exist in the repository, and no run
/// is left to resume; `runs prune` removes what is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_of_an_issue_that_does_not_exist_leaves_nothing_to_resume() {
    let (_d, world) = world(spec()).await;
    let r = supervisor(&world, &["run", "9999"]).await;
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("Issue #9999 does not exist in demo-org/durations"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("can be resumed"), "{}", r.stderr);
    let r = supervisor(&world, &["runs", "--json"]).await;
    let runs = summary(&r)["runs"].clone();
    assert_eq!(runs.as_array().map(Vec::len), Some(1), "{runs}");
    assert_eq!(runs[0]["status"], "stopped", "{runs}");
    assert!(
        runs[0]["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("does not exist"),
        "{runs}"
    );
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let r = supervisor(&world, &["runs", "prune", "--older-than", "1s", "--json"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        summary(&r)["removed"].as_array().map(Vec::len),
        Some(1),
        "{}",
        r.stdout
    );
}

/// `doctor` names what to install for a missing gate tool, by package and pinned version; a
/// repository without supervisor's install script is not sent to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_names_the_install_command_of_a_missing_gate_tool() {
    let mut spec = spec();
    spec.workflow = Some(workflow_with_hooks(serde_json::json!(["tsc"])));
    let (_d, world) = world(spec).await;
    let (_, v) = doctor(&world, &[("PATH", "/usr/bin:/bin")]).await;
    let tool = v["checks"]
        .as_array()
        .and_then(|c| {
            c.iter()
                .find(|c| c["name"] == "gate tool" && c["mark"] != "ok")
        })
        .unwrap_or_else(|| panic!("no missing gate tool in {v}"));
    let fix = tool["fix"].as_str().unwrap();
    assert!(fix.contains("npm install -g typescript@5.9.3"), "{fix}");
    assert!(!fix.contains("install-tools.sh"), "{fix}");
}

/// `init --slash-commands` again: a command file someone changed is kept (and `--force` named),
/// one an earlier `init` wrote and nobody changed is brought up to date.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_keeps_an_edited_slash_command_and_updates_the_ones_it_wrote() {
    let (_d, world) = world(spec()).await;
    let r = supervisor(&world, &["init", "--slash-commands"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let claude = world.repo.join(".claude/commands/supervisor.md");
    let pi = world.repo.join(".pi/extensions/supervisor/index.ts");
    let current_pi = std::fs::read_to_string(&pi).unwrap();
    // Someone edits the Claude Code command.
    let edited = std::fs::read_to_string(&claude).unwrap() + "\nAlso say hello.\n";
    std::fs::write(&claude, &edited).unwrap();
    // An earlier init wrote another version of the extension, stamped as init stamps it.
    let older = "// an earlier version of the extension\nexport default function () {}\n";
    let digest: String = {
        use sha2::Digest;
        sha2::Sha256::digest(older.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    };
    std::fs::write(&pi, format!("{older}// supervisor init: sha256 {digest}\n")).unwrap();
    let r = supervisor(&world, &["init", "--slash-commands"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(std::fs::read_to_string(&claude).unwrap(), edited, "kept");
    assert!(
        r.stderr.contains("kept ") && r.stderr.contains("--slash-commands --force"),
        "{}",
        r.stderr
    );
    assert_eq!(
        std::fs::read_to_string(&pi).unwrap(),
        current_pi,
        "updated: {}",
        r.stderr
    );
    // Again: nothing to do for the extension.
    let r = supervisor(&world, &["init", "--slash-commands"]).await;
    assert!(r.stderr.contains("index.ts is up to date"), "{}", r.stderr);
    // --force replaces the edited file.
    let r = supervisor(&world, &["init", "--slash-commands", "--force"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        !std::fs::read_to_string(&claude)
            .unwrap()
            .contains("Also say hello."),
        "{}",
        r.stderr
    );
}
