//! The board-driven bot, end to end: the real `supervisor watch` and `supervisor serve` binaries
//! against the sandbox GitHub, scripted agents in real worktrees. A human is played through the
//! sandbox (card moves, comments), and every wait is on a state with a deadline.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use supervisor::demo::{World, WorldSpec};
use supervisor::events::WebhookSecret;
use supervisor::sandbox::{Act, Fault, IssueSeed, WebhookTarget};
use tokio::process::Command;

#[path = "support/specs.rs"]
mod specs;
use specs::*;

const BIN: &str = env!("CARGO_BIN_EXE_supervisor");
const SECRET: &str = "a-webhook-secret-of-some-length";

#[path = "support/bot.rs"]
mod bot;
#[path = "support/ports.rs"]
mod ports;
use bot::{Bot, DEADLINE};
use ports::free_port;

fn is(kind: &'static str, issue: u64) -> impl Fn(&Value) -> bool {
    move |v| v["kind"] == kind && v["issue"] == issue
}

fn command(world: &World, repo: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(args).arg("--repo-root").arg(repo).arg("--json");
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
    cmd.env(
        "RUST_LOG",
        std::env::var("TEST_BOT_LOG").unwrap_or("warn".into()),
    );
    cmd
}

fn watch(world: &World, args: &[&str]) -> Bot {
    let mut all = vec!["watch", "--interval", "200ms"];
    all.extend_from_slice(args);
    Bot::spawn(command(world, &world.repo, &all))
}

/// A world whose issues 1..=n are codeowner issues; `column` of each, on the board.
async fn world(spec: WorldSpec, n: u64, column: &str) -> (tempfile::TempDir, World) {
    world_with(spec, n, column, None).await
}

async fn world_with(
    mut spec: WorldSpec,
    n: u64,
    column: &str,
    webhook: Option<WebhookTarget>,
) -> (tempfile::TempDir, World) {
    spec.issue.column = Some(column.to_string());
    for number in 2..=n {
        spec.extra_issues.push(IssueSeed::new(
            number,
            &format!("Accept unit number {number}"),
            "Accept hours.\n\n- [ ] hours work",
            "alice",
        ));
    }
    let dir = tempfile::tempdir().unwrap();
    let world = World::build_with_webhook(dir.path(), spec, webhook)
        .await
        .expect("world builds");
    // Every exchange is held to GitHub's published descriptions.
    world
        .sandbox
        .check_conformance()
        .expect("the vendored description compiles");
    world.sandbox.with_state(|s| {
        let board = s.board.as_mut().unwrap();
        for number in 2..=n {
            board.items.insert(number, Some(column.to_string()));
        }
    });
    (dir, world)
}

/// Every exchange so far, the bot's and the sandbox's webhooks' REST side, was as GitHub describes.
fn conforms(world: &World) {
    if let Err(report) = world.sandbox.conformance_report() {
        panic!("{report}");
    }
}

fn column(world: &World, issue: u64) -> Option<String> {
    world
        .sandbox
        .with_state(|s| s.column_of(issue).map(String::from))
}

fn bodies(world: &World, issue: u64) -> Vec<String> {
    world.sandbox.with_state(|s| {
        s.comments_of(issue)
            .iter()
            .filter(|c| c.author == "supervisor-bot")
            .map(|c| c.body.clone())
            .collect()
    })
}

/// No comment of supervisor's appears twice (same hidden marker).
fn assert_no_duplicates(world: &World, issue: u64) {
    let markers: Vec<String> = bodies(world, issue)
        .iter()
        .filter_map(|b| {
            b.lines()
                .rev()
                .find(|l| l.contains("supervisor:run="))
                .map(str::to_string)
        })
        // Claim notes are one per claim, not per step of a run.
        .filter(|m| !m.contains("kind=claim"))
        .collect();
    let mut unique = markers.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(
        unique.len(),
        markers.len(),
        "duplicate comments: {markers:#?}"
    );
}

fn labels(world: &World, issue: u64) -> Vec<String> {
    world
        .sandbox
        .with_state(|s| s.issue(issue).unwrap().labels.clone())
}

fn pulls_for(world: &World, issue: u64) -> usize {
    world.sandbox.with_state(|s| {
        s.pulls()
            .iter()
            .filter(|p| p.head.ends_with(&format!("-{issue}")))
            .count()
    })
}

/// Wait until `check` holds, reading state that something else changes.
async fn until(what: &str, check: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while !check() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what} within {DEADLINE:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn act(world: &World, act: Value) {
    let act: Act = serde_json::from_value(act).unwrap();
    world.sandbox.act(act).unwrap();
}

/// The developer's first dispatch waits until it is stopped (a file beside the worktrees marks
/// that it was); every later one does the work.
fn slow_developer(spec: &mut WorldSpec) {
    let mut steps = developer_change("src/hours.ts", GOOD_CODE);
    steps.as_array_mut().unwrap().insert(
        0,
        json!({ "run": "test -f ../../slept || { touch ../../slept; exec sleep 600; }" }),
    );
    set_role(spec, "developer", vec![steps]);
}

fn process_groups(world: &World, issue: u64) -> Vec<i32> {
    supervisor::workspace::GroupLog::read(&world.repo, issue).0
}

/// Whether a process of group `pgid` still runs (zombies waiting to be reaped do not count).
fn group_alive(pgid: i32) -> bool {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return unsafe { libc::kill(-pgid, 0) == 0 };
    };
    procs.flatten().any(|p| {
        let Ok(stat) = std::fs::read_to_string(p.path().join("stat")) else {
            return false;
        };
        // pid (comm) state ppid pgrp …: fields after the command's closing parenthesis.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            return false;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        fields.len() > 2 && fields[0] != "Z" && fields[2] == pgid.to_string()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_moved_into_research_runs_to_a_pull_request() {
    let (_d, world) = world(spec(), 1, "Backlog").await;
    let mut bot = watch(&world, &[]);
    bot.wait("the first poll", |v| v["kind"] == "polled").await;
    act(
        &world,
        json!({ "move": { "issue": 1, "to": "Research", "by": "alice" } }),
    );
    bot.wait("the run to start", is("started", 1)).await;
    let done = bot.wait("the run to end", is("finished", 1)).await;
    assert_eq!(done["end"], "pull-request", "{done}");
    assert_eq!(column(&world, 1).as_deref(), Some("Done"));
    assert_eq!(pulls_for(&world, 1), 1);
    // The claim was shown while the run lived and is given back.
    assert!(!labels(&world, 1).contains(&"supervisor:running".to_string()));
    let claim = bodies(&world, 1)
        .into_iter()
        .find(|b| b.contains("supervisor:claim"))
        .expect("a claim comment");
    assert!(claim.contains("released"), "{claim}");
    assert_no_duplicates(&world, 1);
    bot.signal(libc::SIGTERM);
    assert_eq!(bot.exit().await, 0, "{}", bot.stderr());
    conforms(&world);
}

/// The scheduler's own work for an issue (its admission, its claim, its release) logs under a
/// `work` span naming the issue, as the run's lines carry their run span.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_schedulers_log_lines_for_an_issue_name_it() {
    let (_d, world) = world(spec(), 1, "Research").await;
    let mut cmd = command(
        &world,
        &world.repo,
        &["watch", "--once", "--log-format", "json"],
    );
    cmd.env("RUST_LOG", "supervisor=debug");
    let mut bot = Bot::spawn(cmd);
    assert_eq!(bot.exit().await, 0, "{}", bot.stderr());
    assert_eq!(bot.count("finished", 1), 1, "{:#?}", bot.seen);
    let lines: Vec<Value> = bot
        .stderr()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    // The claim's comment and its release are written by the scheduler, not by the run.
    let claims: Vec<&Value> = lines
        .iter()
        .filter(|l| {
            l["fields"]["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("GitHub answered"))
                && l["fields"]["route"]
                    .as_str()
                    .is_some_and(|r| r.contains("/issues/{number}/comments"))
                && l["span"]["name"] != "stage"
        })
        .collect();
    assert!(!claims.is_empty(), "{}", bot.stderr());
    for line in claims {
        assert_eq!(line["span"]["name"], "work", "{line}");
        assert_eq!(line["span"]["issue"], 1, "{line}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_max_concurrent_1_the_second_card_waits_then_runs() {
    let (_d, world) = world(spec(), 2, "Research").await;
    let mut bot = watch(&world, &["--once", "--max-concurrent", "1"]);
    assert_eq!(bot.exit().await, 0, "{}", bot.stderr());
    let order: Vec<(String, u64)> = bot
        .seen
        .iter()
        .filter(|v| v["kind"] == "started" || v["kind"] == "finished")
        .map(|v| {
            (
                v["kind"].as_str().unwrap().to_string(),
                v["issue"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(order.len(), 4, "{order:?}");
    // One at a time: each run finishes before the next starts.
    assert_eq!(order[0].0, "started");
    assert_eq!(order[1], ("finished".to_string(), order[0].1));
    assert_eq!(order[2].0, "started");
    assert_eq!(order[3], ("finished".to_string(), order[2].1));
    assert_ne!(order[0].1, order[2].1);
    for issue in [1, 2] {
        assert_eq!(pulls_for(&world, issue), 1, "issue #{issue}");
        assert_eq!(column(&world, issue).as_deref(), Some("Done"));
    }
    conforms(&world);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_dragged_back_to_backlog_stops_its_run_with_one_comment() {
    let mut s = spec();
    slow_developer(&mut s);
    let (_d, world) = world(s, 1, "Research").await;
    let mut bot = watch(&world, &[]);
    bot.wait("the run to start", is("started", 1)).await;
    until("the developer at work", || {
        world.dir.join("slept").exists() && !process_groups(&world, 1).is_empty()
    })
    .await;
    let groups = process_groups(&world, 1);
    act(
        &world,
        json!({ "move": { "issue": 1, "to": "Backlog", "by": "alice" } }),
    );
    let stopping = bot.wait("the stop", is("stopping", 1)).await;
    assert!(
        stopping["reason"].as_str().unwrap().contains("to Backlog"),
        "{stopping}"
    );
    let done = bot.wait("the run to end", is("finished", 1)).await;
    assert_eq!(done["end"], "interrupted", "{done}");
    let stopped: Vec<String> = bodies(&world, 1)
        .into_iter()
        .filter(|b| b.starts_with("## Run Stopped"))
        .collect();
    assert_eq!(stopped.len(), 1, "{stopped:#?}");
    assert!(
        stopped[0].contains("from Implementation to Backlog"),
        "{}",
        stopped[0]
    );
    // The card stays where the human put it, and no agent is left running.
    assert_eq!(column(&world, 1).as_deref(), Some("Backlog"));
    for g in groups {
        assert!(!group_alive(g), "process group {g} outlived its run");
    }
    assert!(!labels(&world, 1).contains(&"supervisor:running".to_string()));
    // The next trigger resumes from the card's column.
    act(
        &world,
        json!({ "move": { "issue": 1, "to": "Research", "by": "alice" } }),
    );
    let again = bot.wait("the second run to end", is("finished", 1)).await;
    assert_eq!(again["end"], "pull-request", "{again}");
    assert_no_duplicates(&world, 1);
    bot.signal(libc::SIGTERM);
    assert_eq!(bot.exit().await, 0);
    conforms(&world);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watcher_killed_mid_run_resumes_it_with_no_duplicate_comments() {
    let mut s = spec();
    slow_developer(&mut s);
    let (_d, world) = world(s, 1, "Research").await;
    let mut bot = watch(&world, &[]);
    bot.wait("the run to start", is("started", 1)).await;
    until("the developer at work", || {
        world.dir.join("slept").exists() && !process_groups(&world, 1).is_empty()
    })
    .await;
    let before = bodies(&world, 1).len();
    bot.signal(libc::SIGKILL);
    bot.exit().await;
    let mut again = watch(&world, &[]);
    let resumed = again.wait("the resumed run", is("queued", 1)).await;
    assert!(
        resumed["reason"].as_str().unwrap().contains("resuming"),
        "{resumed}"
    );
    let done = again.wait("the run to end", is("finished", 1)).await;
    assert_eq!(done["end"], "pull-request", "{done}");
    assert!(bodies(&world, 1).len() > before);
    assert_no_duplicates(&world, 1);
    // One claim comment for both processes: the restarted watcher knew its own claim.
    let claims = bodies(&world, 1)
        .iter()
        .filter(|b| b.contains("supervisor:claim"))
        .count();
    assert_eq!(claims, 1);
    assert_eq!(pulls_for(&world, 1), 1);
    again.signal(libc::SIGTERM);
    assert_eq!(again.exit().await, 0);
    conforms(&world);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_and_the_next_start_runs_the_stopped_work() {
    let mut s = spec();
    slow_developer(&mut s);
    let (_d, world) = world(s, 1, "Research").await;
    let mut bot = watch(&world, &[]);
    bot.wait("the run to start", is("started", 1)).await;
    until("the developer at work", || {
        world.dir.join("slept").exists() && !process_groups(&world, 1).is_empty()
    })
    .await;
    let groups = process_groups(&world, 1);
    bot.signal(libc::SIGTERM);
    assert_eq!(bot.exit().await, 0, "{}", bot.stderr());
    assert!(bot.seen.iter().any(|v| v["kind"] == "draining"));
    for g in groups {
        assert!(!group_alive(g), "process group {g} outlived the drain");
    }
    let mut again = watch(&world, &[]);
    let done = again.wait("the run to end", is("finished", 1)).await;
    assert_eq!(done["end"], "pull-request", "{done}");
    assert_no_duplicates(&world, 1);
    again.signal(libc::SIGTERM);
    assert_eq!(again.exit().await, 0);
    conforms(&world);
}

/// The runs of `issue` that have a journal (a resumed run keeps its own).
fn runs_of(world: &World, issue: u64) -> Vec<String> {
    let prefix = format!("{issue}-");
    std::fs::read_dir(supervisor::pipeline::runs_dir(&world.repo))
        .map(|dir| {
            dir.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|name| name.starts_with(&prefix))
                .collect()
        })
        .unwrap_or_default()
}

/// Three cards in Research and room for one run: the first runs (its developer sleeps), the
/// other two wait in the queue. The watcher is stopped by `signal` with both waiting, and a
/// person takes the third card back to Backlog meanwhile. The next start resumes the first run,
/// starts the second card, leaves the third alone, and runs nothing twice.
async fn queued_cards_outlive_the_watcher(signal: i32) {
    let mut s = spec();
    slow_developer(&mut s);
    let (_d, world) = world(s, 3, "Research").await;
    let mut bot = watch(&world, &["--max-concurrent", "1"]);
    // One poll queues all three and writes the watch state before the first run starts.
    let first = bot.wait("a run to start", |v| v["kind"] == "started").await;
    let a = first["issue"].as_u64().unwrap();
    let waiting: Vec<u64> = (1..=3).filter(|i| *i != a).collect();
    for issue in &waiting {
        assert_eq!(bot.count("queued", *issue), 1, "{:#?}", bot.seen);
    }
    until("the developer at work", || {
        world.dir.join("slept").exists() && !process_groups(&world, a).is_empty()
    })
    .await;
    bot.signal(signal);
    bot.exit().await;
    let (b, c) = (waiting[0], waiting[1]);
    for issue in [b, c] {
        assert_eq!(bot.count("started", issue), 0, "{:#?}", bot.seen);
    }
    act(
        &world,
        json!({ "move": { "issue": c, "to": "Backlog", "by": "alice" } }),
    );

    let mut again = watch(&world, &["--once", "--max-concurrent", "1"]);
    assert_eq!(again.exit().await, 0, "{}", again.stderr());
    for issue in [a, b] {
        assert_eq!(
            pulls_for(&world, issue),
            1,
            "issue #{issue}: {:#?}",
            again.seen
        );
        assert_eq!(column(&world, issue).as_deref(), Some("Done"));
        assert_eq!(again.count("started", issue), 1, "{:#?}", again.seen);
        assert_no_duplicates(&world, issue);
    }
    // The queued card ran once. The killed run was resumed, not run again (a drained run ended
    // as interrupted, and the next start continues its work in a run of its own).
    let runs = runs_of(&world, b);
    assert_eq!(runs.len(), 1, "issue #{b} ran once: {runs:?}");
    if signal == libc::SIGKILL {
        let runs = runs_of(&world, a);
        assert_eq!(runs.len(), 1, "issue #{a} resumed: {runs:?}");
    }
    // The card taken back while the watcher was down is neither started nor claimed.
    assert_eq!(again.count("started", c), 0, "{:#?}", again.seen);
    assert_eq!(runs_of(&world, c), Vec::<String>::new());
    assert_eq!(column(&world, c).as_deref(), Some("Backlog"));
    assert!(
        bodies(&world, c)
            .iter()
            .all(|body| !body.contains("supervisor:claim"))
    );
    conforms(&world);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cards_queued_when_the_watcher_is_killed_start_after_the_restart() {
    queued_cards_outlive_the_watcher(libc::SIGKILL).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cards_queued_when_the_watcher_drains_start_at_the_next_start() {
    queued_cards_outlive_the_watcher(libc::SIGTERM).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_ended_before_the_watch_state_was_saved_is_not_started_again() {
    let (_d, world) = world(spec(), 1, "Research").await;
    let state = world.repo.join(".supervisor/watch/state.json");
    let mut bot = watch(&world, &["--once"]);
    // The poll that queued the card has written the state (the card owed) before the run starts.
    bot.wait("the run to start", is("started", 1)).await;
    let owed = std::fs::read(&state).unwrap();
    assert_eq!(bot.exit().await, 0, "{}", bot.stderr());
    assert_eq!(pulls_for(&world, 1), 1);
    // As if the watcher had been killed after the run ended and before it wrote the state again;
    // and the card is back in the column that queued it.
    std::fs::write(&state, owed).unwrap();
    act(
        &world,
        json!({ "move": { "issue": 1, "to": "Research", "by": "alice" } }),
    );
    let mut again = watch(&world, &["--once"]);
    assert_eq!(again.exit().await, 0, "{}", again.stderr());
    assert_eq!(again.count("started", 1), 0, "{:#?}", again.seen);
    assert_eq!(runs_of(&world, 1).len(), 1);
    assert_eq!(pulls_for(&world, 1), 1);
    conforms(&world);
}

/// The requests that change something on GitHub, by route (REST writes, GraphQL mutations).
fn writes(world: &World) -> std::collections::BTreeMap<String, u64> {
    const MUTATIONS: [&str; 6] = [
        "AddToBoard",
        "CreateBoard",
        "LinkBoard",
        "ResolveThread",
        "SetStatusOptions",
        "UpdateItemStatus",
    ];
    world
        .sandbox
        .request_counts()
        .into_iter()
        .filter(|(route, _)| match route.strip_prefix("POST /graphql") {
            Some(op) => MUTATIONS.contains(&op.trim()),
            None => !route.starts_with("GET "),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issues_the_run_would_refuse_get_nothing_from_the_watcher() {
    let mut s = spec();
    let body = "Accept minutes.\n\n- [ ] minutes work";
    // A stranger's issue, and a codeowner's blocked by an open one.
    s.extra_issues
        .push(IssueSeed::new(2, "Accept minutes", body, "mallory"));
    let mut blocked = IssueSeed::new(3, "Accept seconds", body, "alice");
    blocked.blocked_by = vec![4];
    s.extra_issues.push(blocked);
    s.extra_issues
        .push(IssueSeed::new(4, "Accept days", body, "alice"));
    let (_d, world) = world(s, 1, "Backlog").await;
    world.sandbox.with_state(|s| {
        let board = s.board.as_mut().unwrap();
        board.items.insert(2, Some("Research".into()));
        board.items.insert(3, Some("Research".into()));
        board.items.insert(4, Some("Backlog".into()));
    });
    let before = writes(&world);
    let mut bot = watch(&world, &["--once"]);
    assert_eq!(bot.exit().await, 0, "{}", bot.stderr());
    for issue in [2, 3] {
        let comments = world.sandbox.with_state(|s| s.comments_of(issue).len());
        assert_eq!(comments, 0, "issue #{issue}: {:#?}", bodies(&world, issue));
        assert_eq!(
            labels(&world, issue),
            Vec::<String>::new(),
            "issue #{issue}"
        );
        assert_eq!(bot.count("started", issue), 0, "{:#?}", bot.seen);
        assert_eq!(column(&world, issue).as_deref(), Some("Research"));
    }
    assert_eq!(writes(&world), before, "the watcher wrote to GitHub");
    let refusal = |issue: u64| -> String {
        let found = bot.seen.iter().find(|v| is("refused", issue)(v));
        let found = found.unwrap_or_else(|| panic!("no refusal of #{issue}: {:#?}", bot.seen));
        found["reason"].as_str().unwrap().to_string()
    };
    let stranger = refusal(2);
    assert!(
        stranger.contains("@mallory, who is not a codeowner")
            && stranger.contains("nothing was posted"),
        "{stranger}"
    );
    let blocked = refusal(3);
    assert!(blocked.contains("blocked by open #4"), "{blocked}");
    conforms(&world);
}

/// A second clone of the world's repository, with its own worktrees.
fn second_clone(world: &World) -> PathBuf {
    let repo = world.dir.join("repo2");
    let out = std::process::Command::new("cp")
        .arg("-r")
        .arg(&world.repo)
        .arg(&repo)
        .output()
        .unwrap();
    assert!(out.status.success());
    let _ = std::fs::remove_dir_all(repo.join(".supervisor/watch"));
    let settings = repo.join(".pi/settings.json");
    let text = std::fs::read_to_string(&settings).unwrap();
    let worktrees = world.dir.join("worktrees2");
    std::fs::create_dir_all(&worktrees).unwrap();
    let text = text.replace(
        &world.worktrees.display().to_string(),
        &worktrees.display().to_string(),
    );
    std::fs::write(&settings, text).unwrap();
    repo
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_watchers_on_one_board_run_each_issue_once() {
    let (_d, world) = world(spec(), 3, "Research").await;
    let other = second_clone(&world);
    let mut a = watch(&world, &["--once", "--max-concurrent", "3"]);
    let mut b = Bot::spawn(command(
        &world,
        &other,
        &[
            "watch",
            "--interval",
            "200ms",
            "--once",
            "--max-concurrent",
            "3",
        ],
    ));
    assert_eq!(a.exit().await, 0, "{}", a.stderr());
    assert_eq!(b.exit().await, 0, "{}", b.stderr());
    for issue in 1..=3 {
        let started = a.count("started", issue) + b.count("started", issue);
        assert_eq!(started, 1, "issue #{issue}: {:#?} {:#?}", a.seen, b.seen);
        assert_eq!(pulls_for(&world, issue), 1);
        assert_no_duplicates(&world, issue);
    }
    conforms(&world);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_once_dispatch_actions_fires_one_workflow_run_per_ready_card() {
    let (_d, world) = world(spec(), 10, "Research").await;
    // One card elsewhere: not ready.
    world.sandbox.with_state(|s| {
        s.board
            .as_mut()
            .unwrap()
            .items
            .insert(10, Some("Backlog".into()));
    });
    let mut bot = watch(&world, &["--once", "--dispatch", "actions"]);
    assert_eq!(bot.exit().await, 0, "{}", bot.stderr());
    let dispatches = world.sandbox.with_state(|s| s.dispatches.clone());
    assert_eq!(dispatches.len(), 9, "{dispatches:#?}");
    let mut issues: Vec<String> = dispatches
        .iter()
        .map(|d| d.inputs["issue"].clone())
        .collect();
    issues.sort_by_key(|i| i.parse::<u64>().unwrap());
    assert_eq!(issues, (1..=9).map(|n| n.to_string()).collect::<Vec<_>>());
    for d in &dispatches {
        assert_eq!(d.workflow, "supervisor-dispatch.yml");
        assert_eq!(d.git_ref, "main");
    }
    for issue in 1..=9 {
        assert!(labels(&world, issue).contains(&"supervisor:running".to_string()));
        assert!(
            bodies(&world, issue)
                .iter()
                .any(|b| b.contains("supervisor:claim"))
        );
    }
    assert!(!labels(&world, 10).contains(&"supervisor:running".to_string()));
    // A second sweep fires nothing again: the cards are claimed and were seen.
    let mut again = watch(&world, &["--once", "--dispatch", "actions"]);
    assert_eq!(again.exit().await, 0);
    assert_eq!(world.sandbox.with_state(|s| s.dispatches.len()), 9);
    conforms(&world);
}

// --- serve ------------------------------------------------------------------------------------

async fn served_world(spec: WorldSpec, column: &str) -> (tempfile::TempDir, World, Bot, u16) {
    let port = free_port();
    let target = WebhookTarget::new(
        format!("http://127.0.0.1:{port}/webhook"),
        WebhookSecret::new(SECRET).unwrap(),
    );
    let (d, world) = world_with(spec, 1, column, Some(target)).await;
    let port_text = port.to_string();
    let mut cmd = command(
        &world,
        &world.repo,
        &[
            "serve",
            "--webhook-secret-env",
            "TEST_WEBHOOK_SECRET",
            "--port",
            &port_text,
        ],
    );
    cmd.env("TEST_WEBHOOK_SECRET", SECRET);
    // What a server says of the events it takes, down to each queued one.
    if std::env::var_os("TEST_BOT_LOG").is_none() {
        cmd.env("RUST_LOG", "warn,supervisor=debug");
    }
    let mut bot = Bot::spawn(cmd);
    bot.wait("the first poll", |v| v["kind"] == "polled").await;
    (d, world, bot, port)
}

async fn status(port: u16) -> Value {
    let body = reqwest_free_get(port, "/status").await;
    serde_json::from_str(&body).unwrap()
}

/// GET over a plain TCP stream (the tests need no HTTP client).
async fn reqwest_free_get(port: u16, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default()
}

async fn post_raw(port: u16, event: &str, signature: &str, body: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let head = format!(
        "POST /webhook HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-GitHub-Event: {event}\r\nX-GitHub-Delivery: forged-1\r\nX-Hub-Signature-256: {signature}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(body.as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redelivered_card_move_starts_one_run() {
    let (_d, world, mut bot, port) = served_world(spec(), "Backlog").await;
    world
        .sandbox
        .inject(Fault::status("WEBHOOK projects_v2_item", 200));
    act(
        &world,
        json!({ "move": { "issue": 1, "to": "Research", "by": "alice" } }),
    );
    bot.wait("the run to start", is("started", 1)).await;
    let done = bot.wait("the run to end", is("finished", 1)).await;
    assert_eq!(done["end"], "pull-request", "{done}");
    let deliveries = world.sandbox.deliveries();
    let first = deliveries
        .iter()
        .find(|d| d.event == "projects_v2_item")
        .expect("the move was delivered");
    let again = deliveries
        .iter()
        .find(|d| d.redelivery && d.id == first.id)
        .expect("and delivered again");
    assert_eq!(first.status, Some(202));
    assert_eq!(
        again.status,
        Some(200),
        "a redelivery is answered, not queued"
    );
    let s = status(port).await;
    assert_eq!(s["receiver"]["deliveries"]["redeliveries"], 1, "{s}");
    // The card is named by its issue's number, never by GitHub's node id.
    let logs = bot.stderr();
    assert!(
        logs.contains("card of #1 moved to Research by alice"),
        "{logs}"
    );
    assert!(!logs.contains("issue I_"), "{logs}");
    assert!(!s.to_string().contains("issue I_"), "{s}");
    assert_eq!(bot.count("started", 1), 1);
    assert_eq!(pulls_for(&world, 1), 1);
    bot.signal(libc::SIGTERM);
    assert_eq!(bot.exit().await, 0, "{}", bot.stderr());
    conforms(&world);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_deliveries_and_strangers_commands_start_nothing() {
    let (_d, world, mut bot, port) = served_world(spec(), "Backlog").await;
    // A forged signature: 401, nothing queued.
    let body = r#"{"action":"created"}"#;
    let forged = WebhookSecret::new("another-secret-entirely")
        .unwrap()
        .sign(body.as_bytes());
    let answer = post_raw(port, "issue_comment", &forged, body).await;
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    // A non-codeowner's `/supervisor run`: delivered, read, ignored.
    act(
        &world,
        json!({ "comment": { "issue": 1, "body": "/supervisor run", "by": "mallory" } }),
    );
    let ignored = bot
        .wait("the command to be ignored", |v| v["kind"] == "ignored")
        .await;
    assert!(
        ignored["reason"].as_str().unwrap().contains("mallory"),
        "{ignored}"
    );
    let s = status(port).await;
    assert_eq!(s["receiver"]["deliveries"]["bad_signature"], 1, "{s}");
    assert_eq!(s["scheduler"]["live"], json!([]), "{s}");
    assert_eq!(s["scheduler"]["queue"], json!([]), "{s}");
    // A malformed command: a stranger's gets no answer, a codeowner's gets the commands' help,
    // once for its comment.
    let help = |world: &World| {
        bodies(world, 1)
            .iter()
            .filter(|b| b.contains("unknown command `strat`"))
            .cloned()
            .collect::<Vec<_>>()
    };
    act(
        &world,
        json!({ "comment": { "issue": 1, "body": "/supervisor strat", "by": "mallory" } }),
    );
    bot.wait("the stranger's typo to be ignored", |v| {
        v["kind"] == "ignored" && v["reason"].as_str().unwrap_or("").contains("mallory")
    })
    .await;
    act(
        &world,
        json!({ "comment": { "issue": 1, "body": "/supervisor strat", "by": "alice" } }),
    );
    bot.wait("the codeowner's typo to be answered", |v| {
        v["kind"] == "ignored" && v["reason"].as_str().unwrap_or("").contains("strat")
    })
    .await;
    let answers = help(&world);
    assert_eq!(answers.len(), 1, "{:#?}", bodies(&world, 1));
    assert!(
        answers[0].starts_with("@alice: unknown command `strat`"),
        "{}",
        answers[0]
    );
    assert!(answers[0].contains("`/supervisor run`"), "{}", answers[0]);
    // A codeowner's command does start the run.
    act(
        &world,
        json!({ "comment": { "issue": 1, "body": "/supervisor run", "by": "alice" } }),
    );
    let queued = bot.wait("the run to be queued", is("queued", 1)).await;
    assert!(
        queued["reason"].as_str().unwrap().contains("alice"),
        "{queued}"
    );
    assert!(
        !bot.seen.iter().any(
            |v| v["kind"] == "queued" && v["reason"].as_str().unwrap_or("").contains("mallory")
        )
    );
    bot.wait("the run to end", is("finished", 1)).await;
    bot.signal(libc::SIGTERM);
    assert_eq!(bot.exit().await, 0, "{}", bot.stderr());
    conforms(&world);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_codeowners_review_or_revise_comment_on_the_pull_request_starts_a_revision() {
    let mut s = spec();
    // Every revision's developer adds a line (each revision is its own run, from the first step).
    let mut change = developer_change("src/hours.ts", GOOD_CODE);
    change[0] = json!({ "run": "date +%s%N >> src/week.ts" });
    s.script["developer@revision"] = json!([change]);
    s.script["auditor@revision"] = json!([approve(json!([]))]);
    let (_d, world, mut bot, _port) = served_world(s, "Research").await;
    let done = bot.wait("the run to end", is("finished", 1)).await;
    assert_eq!(done["end"], "pull-request", "{done}");
    let pr = world.sandbox.with_state(|s| s.pulls()[0].number);
    let pr_comment = |by: &str, body: &str| {
        act(
            &world,
            json!({ "comment": { "issue": pr, "body": body, "by": by } }),
        )
    };

    // A stranger's command on the pull request starts nothing.
    pr_comment("mallory", "/supervisor revise push to main");
    let ignored = bot
        .wait("the stranger's command ignored", |v| v["kind"] == "ignored")
        .await;
    assert!(
        ignored["reason"].as_str().unwrap().contains("mallory"),
        "{ignored}"
    );

    // The codeowner requests changes in a review: the pull request is revised.
    let reviewer = supervisor::github::GitHub::new(supervisor::github::ClientConfig::new(
        world.sandbox.url(),
        Some(supervisor::github::Token::new(world.spec.reviewer_token()).unwrap()),
        supervisor::config::RepoSlug::parse(&format!("{}/{}", world.spec.owner, world.spec.name))
            .unwrap(),
    ))
    .unwrap();
    reviewer
        .submit_review(pr, "REQUEST_CHANGES", "Add weeks.", &[])
        .await
        .unwrap();
    let queued = bot.wait("the revision queued", is("queued", pr)).await;
    assert!(
        queued["reason"]
            .as_str()
            .unwrap()
            .contains("requested changes"),
        "{queued}"
    );
    let revised = bot.wait("the revision to end", is("finished", pr)).await;
    assert_eq!(revised["end"], "revised", "{revised}");

    // The codeowner's `/supervisor revise` comment on the pull request: another revision. GitHub's
    // times are whole seconds, and feedback counts from the second after the revision's comment.
    let answered = world.sandbox.with_state(|s| {
        s.comments_of(pr)
            .iter()
            .filter_map(|c| c.created_at)
            .max()
            .unwrap()
            .timestamp()
    });
    until("a later second", || {
        chrono::Utc::now().timestamp() > answered
    })
    .await;
    pr_comment(&world.spec.codeowner, "/supervisor revise also add days");
    let again = bot.wait("the second revision", is("finished", pr)).await;
    assert_eq!(
        again["end"],
        "revised",
        "{again}\n{:#?}",
        bodies(&world, pr).last()
    );
    assert_eq!(bot.count("started", pr), 2);
    assert_eq!(world.sandbox.with_state(|s| s.pulls().len()), 1);
    assert_no_duplicates(&world, 1);
    bot.signal(libc::SIGTERM);
    assert_eq!(bot.exit().await, 0);
    conforms(&world);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_asked_of_an_issue_already_running_is_answered_in_one_comment_edited_in_place() {
    let mut s = spec();
    slow_developer(&mut s);
    s.settings
        .insert("codeowners".into(), json!(["alice", "bob"]));
    let (_d, world, mut bot, _port) = served_world(s, "Research").await;
    bot.wait("the run to start", is("started", 1)).await;
    until("the developer at work", || world.dir.join("slept").exists()).await;
    let run = supervisor::workspace::Checkpoint::all(&world.repo)
        .into_iter()
        .find(|c| c.issue == 1)
        .expect("the live run's checkpoint")
        .run_id;
    let answers = || {
        world.sandbox.with_state(|s| {
            s.comments_of(1)
                .iter()
                .filter(|c| c.body.contains("kind=already-running"))
                .cloned()
                .collect::<Vec<_>>()
        })
    };
    for by in ["alice", "bob"] {
        act(
            &world,
            json!({ "comment": { "issue": 1, "body": "/supervisor run", "by": by } }),
        );
        let answered = bot
            .wait("the `run` answered", |v| {
                v["kind"] == "ignored" && v["event"] == "run"
            })
            .await;
        assert!(
            answered["reason"]
                .as_str()
                .unwrap()
                .starts_with(&format!("@{by}:")),
            "{answered}"
        );
    }
    let answers = answers();
    assert_eq!(answers.len(), 1, "one answer, edited: {answers:#?}");
    let text = answers[0].body.lines().next().unwrap();
    assert!(
        text.starts_with(&format!(
            "@bob: run `{run}` is already running, with the card in **Implementation**;"
        )),
        "{text}"
    );
    assert_eq!(answers[0].editor.as_deref(), Some("supervisor-bot"));
    assert!(
        !bot.seen
            .iter()
            .any(|v| v["kind"] == "queued"
                && v["reason"].as_str().unwrap_or("").contains("`run` by")),
        "nothing new was queued"
    );
    bot.signal(libc::SIGTERM);
    assert_eq!(bot.exit().await, 0, "{}", bot.stderr());
    conforms(&world);
}

/// How many lines of the bot's log name a failed poll with `reason`.
fn poll_failures_logged(bot: &Bot, reason: &str) -> usize {
    bot.stderr()
        .lines()
        .filter(|l| l.contains("board poll failed") && l.contains(reason))
        .count()
}

fn poll_failed(v: &Value) -> bool {
    v["kind"] == "poll_failed"
}

fn polled(v: &Value) -> bool {
    v["kind"] == "polled"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graphql_error_mid_poll_and_github_down_lose_nothing_live() {
    let mut s = spec();
    slow_developer(&mut s);
    // 150 cards, so a poll reads two pages; only #1 waits in a trigger column.
    let (_d, world) = world(s, 150, "Backlog").await;
    world.sandbox.with_state(|s| {
        let board = s.board.as_mut().unwrap();
        board.items.insert(1, Some("Research".into()));
    });
    let mut bot = watch(&world, &[]);
    let first = bot.wait("the first poll", polled).await;
    assert_eq!(
        (first["pages"].as_u64(), first["cards"].as_u64()),
        (Some(2), Some(150))
    );
    bot.wait("the run to start", is("started", 1)).await;
    until("the developer at work", || {
        world.dir.join("slept").exists() && !process_groups(&world, 1).is_empty()
    })
    .await;
    let groups = process_groups(&world, 1);

    // A GraphQL error on the second page of a poll: the half-read board is not taken for the
    // board (the live run's card would seem gone).
    let message = "Something went wrong while executing your query. Please include `0000:1111` when reporting this issue.";
    world.sandbox.inject(
        Fault::status("POST /graphql BoardItems", 200)
            .with_body(json!({ "data": null, "errors": [{ "message": message }] }))
            .skipping(1),
    );
    let failed = bot.wait("the failed poll", poll_failed).await;
    assert!(
        failed["error"]
            .as_str()
            .unwrap()
            .contains("Something went wrong"),
        "{failed}"
    );
    bot.wait("a poll after it", polled).await;

    // GitHub down for several polls: every GraphQL request answers 502.
    world
        .sandbox
        .inject(Fault::status("POST /graphql", 502).times(15));
    for n in 0..3 {
        bot.wait(&format!("failed poll {n}"), poll_failed).await;
    }
    bot.wait("a poll once GitHub is back", polled).await;

    // Nothing live was lost and nothing else started; each reason was logged once.
    assert_eq!(bot.count("stopping", 1), 0, "{:#?}", bot.seen);
    assert_eq!(
        bot.seen.iter().filter(|v| v["kind"] == "started").count(),
        1
    );
    assert!(
        groups.iter().all(|g| group_alive(*g)),
        "the agent still works"
    );
    assert_eq!(
        poll_failures_logged(&bot, "Something went wrong"),
        1,
        "{}",
        bot.stderr()
    );
    assert_eq!(poll_failures_logged(&bot, "502"), 1, "{}", bot.stderr());
    bot.signal(libc::SIGTERM);
    assert_eq!(bot.exit().await, 0, "{}", bot.stderr());
    conforms(&world);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_board_without_the_status_field_is_named_once_and_watching_goes_on() {
    let (_d, world) = world(spec(), 1, "Research").await;
    world
        .sandbox
        .with_state(|s| s.board.as_mut().unwrap().status_field = "Stage".into());
    // `--once`: the one poll fails, naming the setting to fix; GitHub's error code.
    let mut once = watch(&world, &["--once"]);
    assert_eq!(once.exit().await, 3, "{}", once.stderr());
    assert!(
        once.stderr().contains("set `statusField`"),
        "{}",
        once.stderr()
    );

    let mut bot = watch(&world, &[]);
    for n in 0..3 {
        let failed = bot.wait(&format!("failed poll {n}"), poll_failed).await;
        assert!(
            failed["error"]
                .as_str()
                .unwrap()
                .contains("no single-select field named `Status`"),
            "{failed}"
        );
    }
    assert_eq!(
        poll_failures_logged(&bot, "statusField"),
        1,
        "{}",
        bot.stderr()
    );
    assert_eq!(bot.count("queued", 1), 0);
    // The board gets its field: the watcher, still polling, starts the card.
    world
        .sandbox
        .with_state(|s| s.board.as_mut().unwrap().status_field = "Status".into());
    bot.wait("the run to start", is("started", 1)).await;
    bot.signal(libc::SIGTERM);
    assert_eq!(bot.exit().await, 0, "{}", bot.stderr());
    conforms(&world);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_board_whose_columns_have_other_names_drives_the_mapped_stages() {
    let mut s = spec();
    // The board calls Research "Investigating" (`columns` maps the stage to it).
    s.settings
        .insert("columns".into(), json!({ "Research": "Investigating" }));
    let (_d, world) = world(s, 1, "Backlog").await;
    world.sandbox.with_state(|s| {
        let board = s.board.as_mut().unwrap();
        for option in board.options.iter_mut().filter(|o| *o == "Research") {
            *option = "Investigating".into();
        }
    });
    let mut bot = watch(&world, &[]);
    bot.wait("the first poll", polled).await;
    act(
        &world,
        json!({ "move": { "issue": 1, "to": "Investigating", "by": "alice" } }),
    );
    let queued = bot.wait("the card queued", is("queued", 1)).await;
    assert!(
        queued["reason"]
            .as_str()
            .unwrap()
            .contains("arrived in Research"),
        "{queued}"
    );
    let done = bot.wait("the run to end", is("finished", 1)).await;
    assert_eq!(done["end"], "pull-request", "{done}");
    assert_eq!(bot.count("stopping", 1), 0);
    bot.signal(libc::SIGTERM);
    assert_eq!(bot.exit().await, 0, "{}", bot.stderr());
    conforms(&world);
}

/// Issue 25: a detached process an agent's shell left behind dies with a `kill -9` of the watcher
/// (it used to be reparented to PID 1 and go on writing into the worktree).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_an_agent_left_running_dies_with_a_killed_watcher() {
    let mut s = spec();
    let mut steps = developer_change("src/hours.ts", GOOD_CODE);
    steps.as_array_mut().unwrap().insert(
        0,
        json!({ "run": "test -f ../../slept || { (setsid sh -c 'sleep 3.0303; echo late > src/orphan.ts' >/dev/null 2>&1 &); touch ../../slept; exec sleep 600; }" }),
    );
    set_role(&mut s, "developer", vec![steps]);
    let (_d, world) = world(s, 1, "Research").await;
    let mut bot = watch(&world, &[]);
    until("the developer at work", || world.dir.join("slept").exists()).await;
    let detached = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter(|p| {
                let cmdline = std::fs::read(p.path().join("cmdline")).unwrap_or_default();
                let zombie = std::fs::read_to_string(p.path().join("stat"))
                    .unwrap_or_default()
                    .rsplit_once(')')
                    .is_some_and(|(_, r)| r.trim_start().starts_with('Z'));
                !zombie && String::from_utf8_lossy(&cmdline).contains("3.0303")
            })
            .count()
    };
    assert!(detached() > 0, "the detached writer runs");
    bot.signal(libc::SIGKILL);
    bot.exit().await;
    let killed = std::time::Instant::now();
    while detached() > 0 && killed.elapsed() < Duration::from_secs(1) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(detached(), 0, "alive a second after the kill");
}
