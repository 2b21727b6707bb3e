//! A newcomer's first runs: what `supervisor run` leaves behind in the repository, boards that
//! were not set up for supervisor, and the preflight that refuses before anything is written.

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use supervisor::demo::{World, WorldSpec, git};

#[path = "support/specs.rs"]
mod specs;
use specs::*;

const BIN: &str = env!("CARGO_BIN_EXE_supervisor");

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn summary(r: &Run) -> Value {
    serde_json::from_str(&r.stdout).unwrap_or(Value::Null)
}

async fn supervisor(world: &World, args: &[&str]) -> Run {
    supervisor_fed(world, args, None).await
}

/// Run the binary in the world's repository, with `input` on its stdin (none: stdin is empty).
async fn supervisor_fed(world: &World, args: &[&str], input: Option<&str>) -> Run {
    use tokio::io::AsyncWriteExt;
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.args(args)
        .current_dir(&world.repo)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (k, _) in std::env::vars() {
        if k.starts_with("SUPERVISOR_")
            || k == "GH_TOKEN"
            || k == "GITHUB_TOKEN"
            || k == "GITHUB_API_URL"
        {
            cmd.env_remove(k);
        }
    }
    cmd.envs(world.env());
    let mut child = cmd.spawn().expect("supervisor starts");
    if let Some(text) = input {
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(text.as_bytes()).await.unwrap();
        drop(stdin);
    }
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
        "] ✔ approved — pull request opened",
    ] {
        assert!(
            r.stderr.contains(line),
            "{line} missing from:\n{}",
            r.stderr
        );
    }
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
    let journal = std::fs::read_dir(world.runs_dir())
        .unwrap()
        .flatten()
        .map(|e| e.path().join("events.jsonl"))
        .find(|p| p.is_file())
        .unwrap();
    assert_eq!(std::fs::read_to_string(journal).unwrap(), r.stdout);
    let r = supervisor(&world, &["run", "1", "--json", "--progress", "jsonl"]).await;
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("choose one"), "{}", r.stderr);
    let r = supervisor(&world, &["runs"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let row = r.stderr.lines().nth(1).unwrap_or_default().to_string();
    assert!(row.starts_with("#1 "), "{}", r.stderr);
    assert!(row.contains(" stopped "), "{row}");
    assert!(row.contains(" Audit "), "{row}");
    let r = supervisor(&world, &["runs", "show", "1"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    for line in [
        "Research: researcher starts (attempt 1)",
        "GitHub: card moved to Research",
        "(rejection)",
        "Implementation: gates:",
        "stopped: Audit rejected the work 2 times (maxRejections 1)",
    ] {
        assert!(
            r.stderr.contains(line),
            "{line} missing from:\n{}",
            r.stderr
        );
    }
    let r = supervisor(&world, &["runs", "why", "1"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("where:  Audit"), "{}", r.stderr);
    assert!(
        r.stderr.contains("why:    Audit rejected the work 2 times"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains("last agent: auditor in Audit (attempt 2)"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("\n        supervisor run 1\n"),
        "{}",
        r.stderr
    );
    let r = supervisor(&world, &["runs", "why", "7"]).await;
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("no run `7`"), "{}", r.stderr);
    // Nothing is older than a day yet; everything is older than the future.
    let r = supervisor(&world, &["runs", "prune", "--older-than", "1d", "--json"]).await;
    assert_eq!(
        summary(&r)["removed"],
        serde_json::json!([]),
        "{}",
        r.stderr
    );
    let r = supervisor(&world, &["runs", "prune", "--older-than", "soon"]).await;
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("like 30d"), "{}", r.stderr);
}

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
    let ignore = std::fs::read_to_string(world.repo.join(".gitignore")).unwrap();
    assert!(ignore.lines().any(|l| l == ".supervisor/runs/"), "{ignore}");

    // The issue is alice's: make her a codeowner too, as a newcomer would edit the file.
    let r = supervisor(
        &world,
        &[
            "init",
            "--repo",
            "demo-org/durations",
            "--project-number",
            "1",
            "--codeowners",
            "alice",
        ],
    )
    .await;
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
    let base = [
        "init",
        "--repo",
        "demo-org/durations",
        "--project-number",
        "1",
        "--codeowners",
        "alice",
    ];
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

/// On a terminal `init` asks for what its flags leave open: codeowners (the token's account by
/// default), the board, the slash commands and a copy of the workflow to edit, which `check` then
/// reads. A closed input is an error that writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_asks_on_a_terminal_and_copies_the_workflow_for_editing() {
    let mut spec = spec();
    spec.workflow = None;
    let (_d, world) = world(spec).await;
    world.sandbox.with_state(|s| s.board = None);
    let args = ["init", "--repo", "demo-org/durations", "--prompt"];

    let r = supervisor_fed(&world, &args, Some("")).await;
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("no answer to \"Codeowners") && r.stderr.contains("input ended"),
        "{}",
        r.stderr
    );
    assert!(board_of(&world).is_none(), "nothing was made");

    // Codeowners typed, a new board (the settings name #1, so keeping it is the default), both
    // extras wanted.
    let r = supervisor_fed(
        &world,
        &args,
        Some("alice, supervisor-bot\ncreate\ny\nyes\n"),
    )
    .await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    for question in [
        "Codeowners: GitHub logins whose issues run, comma-separated [supervisor-bot]: ",
        "Board: create a new one, an existing board's number, or skip (keep #1) [skip]: ",
        "Install /supervisor for pi and Claude Code in this repository? [n]: ",
        "Copy the workflow and role files into .supervisor/ for editing? [n]: ",
    ] {
        assert!(
            r.stderr.contains(question),
            "{question} not asked:\n{}",
            r.stderr
        );
    }
    assert!(board_of(&world).is_some(), "a board was created");
    let block = settings_block(&world);
    assert_eq!(
        block["codeowners"],
        serde_json::json!(["alice", "supervisor-bot"])
    );
    assert_eq!(block["projectNumber"], 1);
    assert!(world.repo.join(".claude/commands/supervisor.md").is_file());
    assert!(
        world
            .repo
            .join(".pi/extensions/supervisor/index.ts")
            .is_file()
    );
    let copied = std::fs::read_to_string(world.repo.join(".supervisor/workflow.json")).unwrap();
    assert_eq!(copied, supervisor::config::DEFAULT_WORKFLOW);
    for (name, text) in supervisor::agent::DEFAULT_AGENTS {
        let path = world.repo.join(format!(".supervisor/agents/{name}.md"));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text, "{name}");
    }

    // `check` reads the copies: a broken role file there is named.
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

    // Again with --copy-workflow alone: what was edited is kept.
    let r = supervisor(&world, &["init", "--copy-workflow"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("kept "), "{}", r.stderr);
    assert!(std::fs::read_to_string(&role).unwrap().contains("broken"));

    // Skipping the board when the settings name none writes the rest and says what is missing.
    let path = world.repo.join(".pi/settings.json");
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    doc["supervisor"]
        .as_object_mut()
        .unwrap()
        .remove("projectNumber");
    std::fs::write(&path, doc.to_string()).unwrap();
    let r = supervisor_fed(&world, &args, Some("bob\nskip\nn\nn\n")).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("or skip (set it later) [create]: "),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains("no board yet: `supervisor init --create-board`"),
        "{}",
        r.stderr
    );
    let block = settings_block(&world);
    assert_eq!(block["codeowners"], serde_json::json!(["bob"]));
}

/// Asked about an existing board with GitHub's default columns, `init` maps what it can and adds
/// the missing columns only after showing the change and a yes; --yes asks nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_asks_before_changing_an_existing_boards_columns() {
    let (_d, world) = world(spec()).await;
    board_options(&world, &["Todo", "In Progress", "Done"], Some("Todo"));
    let args = ["init", "--repo", "demo-org/durations", "--prompt"];
    // Default codeowner, board #1, no extras, add the columns, but do not apply.
    let r = supervisor_fed(&world, &args, Some("\n#1\nn\nn\ny\n\n")).await;
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("The board has no column for Research, Architecture, TestDesign, Implementation, Audit: add them")
            && r.stderr.contains("after: Todo, In Progress, Research")
            && r.stderr.contains("Apply this change? [n]: "),
        "{}",
        r.stderr
    );
    assert_eq!(
        board_of(&world).unwrap().1,
        ["Todo", "In Progress", "Done"],
        "nothing changed"
    );
    let r = supervisor_fed(&world, &args, Some("alice\n1\nn\nn\ny\ny\n")).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(board_of(&world).unwrap().1.len(), 8);
    let block = settings_block(&world);
    assert_eq!(block["columns"], serde_json::json!({ "Backlog": "Todo" }));
    assert_eq!(block["codeowners"], serde_json::json!(["alice"]));
    assert!(!world.repo.join(".claude/commands/supervisor.md").exists());

    // With --yes nothing is asked (an empty input would be an error if it were).
    let yes = [
        "init",
        "--repo",
        "demo-org/durations",
        "--prompt",
        "--yes",
        "--project-number",
        "1",
    ];
    let r = supervisor_fed(&world, &yes, Some("")).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!r.stderr.contains("[n]: "), "{}", r.stderr);
    assert_eq!(
        settings_block(&world)["codeowners"],
        serde_json::json!(["supervisor-bot"])
    );
}
