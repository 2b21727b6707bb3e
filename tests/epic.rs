//! `supervisor epic N` against the sandbox GitHub, through the binary, with a scripted planner:
//! the plan's tasks become sealed sub-issues of the epic on the board, blocked by the tasks they
//! depend on, the plan is posted once; a stop at any step resumes without a duplicate; plans and
//! epics that may not be used are refused with nothing else written.

use std::path::Path;
use tokio::process::Command;

use serde_json::{Value, json};
use supervisor::demo::{World, WorldSpec, demo_spec};
use supervisor::epic::Seal;

#[path = "support/scratch.rs"]
mod scratch;

const BIN: &str = env!("CARGO_BIN_EXE_supervisor");

/// Issue #1 of the demo world as an epic of a codeowner, with a planner answering `plans` in turn.
fn epic_spec(plans: &[Value]) -> WorldSpec {
    let mut spec = demo_spec();
    spec.issue.title = "Durations in days, weeks and years".into();
    spec.issue.body = "Support d, w and y in parseDuration, add formatDuration, and document both.\n\n## Review criteria\n\n- every unit has a test".into();
    spec.script["planner"] = Value::Array(
        plans
            .iter()
            .map(|plan| {
                let text = format!("Here is the plan.\n\n```json\n{plan}\n```");
                json!([{ "final": text }])
            })
            .collect(),
    );
    spec
}

fn three_tasks() -> Value {
    json!({ "tasks": [
        { "id": "units", "title": "Parse d, w and y", "body": "- [ ] `parseDuration(\"2w\")` is 1209600000", "dependsOn": [] },
        { "id": "format", "title": "Add formatDuration", "body": "- [ ] `formatDuration(90000)` is `1m 30s`", "dependsOn": ["units"] },
        { "id": "docs", "title": "Document the units", "body": "- [ ] the README lists d, w and y", "dependsOn": ["units", "format"] }
    ]})
}

async fn world(spec: WorldSpec) -> (tempfile::TempDir, World) {
    let dir = tempfile::tempdir_in(scratch::scratch_base()).unwrap();
    let world = World::build(dir.path(), spec).await.expect("world builds");
    (dir, world)
}

/// `supervisor ARGS` in the world's repository, with its environment only.
async fn supervisor(world: &World, args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .args(args)
        .current_dir(&world.repo)
        .env_clear()
        .envs(world.env())
        .kill_on_drop(true)
        .output()
        .await
        .unwrap()
}

/// `supervisor epic 1 --json`: its exit code and JSON answer.
async fn plan(world: &World) -> (Option<i32>, Value, String) {
    let out = supervisor(world, &["epic", "1", "--json", "--plan-only"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let answer = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{stderr}", String::from_utf8_lossy(&out.stdout)));
    (out.status.code(), answer, stderr)
}

fn journal(world: &World) -> std::path::PathBuf {
    world.repo.join(".supervisor/runs/epics/1/events.jsonl")
}

/// What the sandbox holds of the epic: its sub-issues (number, title, author, sealed task), each
/// one's blockers and column, and its comments.
#[derive(Debug, PartialEq)]
struct Seen {
    subs: Vec<(u64, String, String, String)>,
    blockers: Vec<Vec<u64>>,
    columns: Vec<Option<String>>,
    comments: Vec<String>,
    issues: usize,
    labels: Vec<String>,
}

fn seen(world: &World) -> Seen {
    world.sandbox.with_state(|s| {
        let epic = s.issue(1).unwrap();
        let subs: Vec<_> = epic
            .sub_issues
            .iter()
            .map(|n| {
                let i = s.issue(*n).unwrap();
                let task = Seal::verify(&i.body, 1).map(|s| s.task).unwrap_or_default();
                (*n, i.title.clone(), i.author.clone(), task)
            })
            .collect();
        Seen {
            blockers: subs
                .iter()
                .map(|(n, ..)| s.issue(*n).unwrap().blocked_by.clone())
                .collect(),
            columns: subs
                .iter()
                .map(|(n, ..)| s.column_of(*n).map(String::from))
                .collect(),
            subs,
            comments: s.comments_of(1).iter().map(|c| c.body.clone()).collect(),
            issues: s.issues.len(),
            labels: epic.labels.clone(),
        }
    })
}

#[tokio::test]
async fn an_epic_is_planned_into_sealed_sub_issues_on_the_board_blocked_as_planned() {
    let (_dir, world) = world(epic_spec(&[three_tasks()])).await;
    let before = world.sandbox.with_state(|s| s.issues.len());
    let requests = world.sandbox.request_total();
    let reads = |route: &str| -> u64 {
        (world.sandbox.request_counts().iter())
            .filter(|(r, _)| r.starts_with("GET ") && r.ends_with(route))
            .map(|(_, n)| n)
            .sum()
    };
    let (subs_before, issues_before) = (reads("/sub_issues"), reads("/issues/{number}"));
    let latest_before = reads("/{repo}/issues");
    let blockers_before = reads("/dependencies/blocked_by");
    let (code, out, stderr) = plan(&world).await;
    assert_eq!(code, Some(0), "{out}\n{stderr}");
    assert_eq!(out["end"], "planned", "{out}");
    // A sub-issue this process opened is linked without reading it, or the epic's sub-issues,
    // back: the epic's sub-issues (and supervisor's latest issues) are read once in the process,
    // to find any opened before a crash, the issues once for the epic itself.
    assert_eq!(
        reads("/sub_issues") - subs_before,
        1,
        "{:?}",
        world.sandbox.request_counts()
    );
    assert_eq!(
        reads("/{repo}/issues") - latest_before,
        1,
        "{:?}",
        world.sandbox.request_counts()
    );
    assert_eq!(
        reads("/issues/{number}") - issues_before,
        1,
        "{:?}",
        world.sandbox.request_counts()
    );
    assert_eq!(
        reads("/dependencies/blocked_by") - blockers_before,
        0,
        "nothing to read back of a sub-issue opened just now: {:?}",
        world.sandbox.request_counts()
    );
    // GitHub requests of the whole planning, per task (the epic's own reads and the plan's
    // comment included).
    let per_task = (world.sandbox.request_total() - requests) as f64 / 3.0;
    eprintln!("planning: {per_task:.1} GitHub requests per task");
    assert!(per_task <= 8.5, "{per_task}");
    let seen = seen(&world);
    assert_eq!(seen.issues, before + 3);
    let bot = world.spec.bot.clone();
    let tasks: Vec<(&str, &str, &str)> = seen
        .subs
        .iter()
        .map(|(_, title, author, task)| (title.as_str(), author.as_str(), task.as_str()))
        .collect();
    assert_eq!(
        tasks,
        [
            ("Parse d, w and y", bot.as_str(), "units"),
            ("Add formatDuration", bot.as_str(), "format"),
            ("Document the units", bot.as_str(), "docs"),
        ]
    );
    let n: Vec<u64> = seen.subs.iter().map(|s| s.0).collect();
    assert_eq!(seen.blockers, [vec![], vec![n[0]], vec![n[0], n[1]]]);
    // On the board, in Backlog: the epic's work starts each task's run when its time comes.
    assert_eq!(seen.columns, vec![Some("Backlog".to_string()); 3]);
    assert!(seen.labels.contains(&"supervisor:epic".to_string()));
    let plan_comments: Vec<&String> = seen
        .comments
        .iter()
        .filter(|c| c.contains("## Epic Plan"))
        .collect();
    assert_eq!(plan_comments.len(), 1);
    let posted = plan_comments[0];
    for (id, issue) in [("units", n[0]), ("format", n[1]), ("docs", n[2])] {
        assert!(
            posted.contains(id) && posted.contains(&format!("#{issue}")),
            "{posted}"
        );
    }
    assert!(posted.contains("```mermaid"), "{posted}");
    let listed: Vec<(String, u64)> = out["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["task"].as_str().unwrap().to_string(),
                t["issue"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        listed,
        [
            ("units".to_string(), n[0]),
            ("format".into(), n[1]),
            ("docs".into(), n[2])
        ]
    );
    // Running it again changes nothing.
    let (code, again, _) = plan(&world).await;
    assert_eq!(code, Some(0));
    assert_eq!(again["tasks"], out["tasks"]);
    assert_eq!(self::seen(&world), seen);
    // `supervisor runs` lists the epic with its tasks.
    let runs = supervisor_in(&world, &["runs"]).await;
    assert!(
        runs.contains(&format!(
            "epic #1: planned, 3 task(s): units #{} (waiting, no run yet), format #{} (waiting, no run yet), docs #{} (waiting, no run yet)",
            n[0], n[1], n[2]
        )),
        "{runs}"
    );
    // The first task, supervisor's own sub-issue, runs through the pipeline to its pull request;
    // the second waits for it.
    let blocked = supervisor_in(&world, &["run", &n[1].to_string()]).await;
    assert!(
        blocked.contains(&format!("blocked by open #{}", n[0])),
        "{blocked}"
    );
    let ran = supervisor_in(&world, &["run", &n[0].to_string()]).await;
    assert!(ran.contains("pull request"), "{ran}");
    let listed: Value =
        serde_json::from_str(&supervisor_in(&world, &["runs", "--json"]).await).unwrap();
    let tasks = &listed["epics"][0]["tasks"];
    assert_eq!(tasks[0]["status"], "done", "{listed}");
    assert_eq!(tasks[1]["status"], "stopped", "{listed}");
    assert_eq!(tasks[2]["status"], Value::Null, "{listed}");
    let violations = world.sandbox.violations();
    assert!(violations.is_empty(), "{violations:?}");
}

/// What `supervisor ARGS` says (stdout and stderr), run in the world's repository.
async fn supervisor_in(world: &World, args: &[&str]) -> String {
    let out = supervisor(world, args).await;
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[tokio::test]
async fn a_planning_stopped_after_any_write_resumes_without_a_duplicate() {
    let (_dir, world) = world(epic_spec(&[three_tasks()])).await;
    let (code, _, stderr) = plan(&world).await;
    assert_eq!(code, Some(0), "{stderr}");
    let done = seen(&world);
    let lines: Vec<String> = std::fs::read_to_string(journal(&world))
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    assert!(lines.len() >= 9, "{lines:?}");
    // Each write reached GitHub, and the process died before journaling it: every prefix of the
    // journal, and a last line cut in the middle.
    for keep in (0..lines.len()).rev() {
        let mut text: String = lines[..keep].iter().map(|l| format!("{l}\n")).collect();
        text.push_str(&lines[keep][..lines[keep].len() / 2]);
        std::fs::write(journal(&world), text).unwrap();
        let (code, _, stderr) = plan(&world).await;
        assert_eq!(code, Some(0), "kept {keep}: {stderr}");
        assert_eq!(seen(&world), done, "kept {keep} of {} lines", lines.len());
    }
}

#[tokio::test]
async fn a_sub_issue_opened_just_before_a_crash_is_found_not_opened_again() {
    // The process that opened task `units`'s sub-issue died before journaling or linking it.
    let mut spec = epic_spec(&[three_tasks()]);
    let body = Seal {
        epic: 1,
        task: "units".into(),
    }
    .stamp("- [ ] `parseDuration(\"2w\")` is 1209600000\n\nTask `units` of epic #1.");
    spec.extra_issues.push(supervisor::sandbox::IssueSeed {
        number: 40,
        title: "Parse d, w and y".into(),
        body,
        author: spec.bot.clone(),
        ..Default::default()
    });
    // A copy of the seal in someone else's issue is not supervisor's.
    let mut copy = spec.extra_issues[spec.extra_issues.len() - 1].clone();
    copy.number = 41;
    copy.author = "mallory".into();
    spec.extra_issues.push(copy);
    let (_dir, world) = world(spec).await;
    let (code, out, stderr) = plan(&world).await;
    assert_eq!(code, Some(0), "{out}\n{stderr}");
    let seen = seen(&world);
    assert_eq!(seen.subs[0].0, 40, "{:?}", seen.subs);
    assert_eq!(seen.subs.len(), 3);
    let titled = world.sandbox.with_state(|s| {
        s.issues
            .iter()
            .filter(|i| i.title == "Parse d, w and y")
            .count()
    });
    assert_eq!(titled, 2, "the two seeded ones, no third");
}

#[tokio::test]
async fn a_journal_naming_an_issue_supervisor_did_not_open_links_nothing() {
    // The journal lies in the checkout: something that writes there names another issue (the
    // epic itself, a stranger's) as a task's sub-issue.
    let mut spec = epic_spec(&[three_tasks()]);
    spec.extra_issues.push(supervisor::sandbox::IssueSeed {
        number: 40,
        title: "Unrelated".into(),
        body: "Someone else's issue.".into(),
        author: "mallory".into(),
        ..Default::default()
    });
    let (_dir, world) = world(spec).await;
    let (code, _, stderr) = plan(&world).await;
    assert_eq!(code, Some(0), "{stderr}");
    let lines: Vec<String> = std::fs::read_to_string(journal(&world))
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    // Up to the first sub-issue opened, before it was linked.
    let created = lines
        .iter()
        .position(|l| l.contains("sub-issue-created"))
        .unwrap();
    for forged in [1, 40] {
        let mut line: Value = serde_json::from_str(&lines[created]).unwrap();
        line["number"] = json!(forged);
        let text: String = lines[..created]
            .iter()
            .chain([&line.to_string()])
            .map(|l| format!("{l}\n"))
            .collect();
        std::fs::write(journal(&world), text).unwrap();
        let before = world.sandbox.request_counts();
        let column = world
            .sandbox
            .with_state(|s| s.column_of(forged).map(String::from));
        let (code, out, stderr) = plan(&world).await;
        assert_ne!(code, Some(0), "{out}");
        assert!(
            out["message"]
                .as_str()
                .unwrap()
                .contains(&format!("names #{forged} as task `units`'s sub-issue")),
            "{out}\n{stderr}"
        );
        // Nothing written: no REST write, the issue not linked, its card where it was.
        for (route, n) in world.sandbox.request_counts() {
            if !route.starts_with("GET") && !route.contains("graphql") {
                assert_eq!(before.get(&route), Some(&n), "{route}");
            }
        }
        world.sandbox.with_state(|s| {
            assert!(s.parent_of(forged).is_none());
            assert_eq!(s.column_of(forged).map(String::from), column);
        });
    }
}

#[tokio::test]
async fn a_plan_that_cannot_be_used_is_refused_on_the_epic_and_nothing_else_is_written() {
    let cycle = json!({ "tasks": [
        { "id": "a", "title": "A", "body": "- [ ] a", "dependsOn": ["b"] },
        { "id": "b", "title": "B", "body": "- [ ] b", "dependsOn": ["a"] }
    ]});
    let many: Vec<Value> = (0..9)
        .map(|i| json!({ "id": format!("t{i}"), "title": "T", "body": "- [ ] t", "dependsOn": [] }))
        .collect();
    for (plan_json, expected) in [
        (cycle, "cycle"),
        (json!({ "tasks": many }), "more than epic.maxtasks (8)"),
        (json!({ "tasks": [] }), "the plan has no tasks"),
    ] {
        let (_dir, world) = world(epic_spec(&[plan_json])).await;
        let before = world.sandbox.with_state(|s| s.issues.len());
        let (code, out, stderr) = plan(&world).await;
        assert_eq!(code, Some(1), "{out}\n{stderr}");
        assert_eq!(out["end"], "plan-refused", "{out}");
        let seen = seen(&world);
        assert_eq!(seen.issues, before, "no sub-issue");
        let refusals: Vec<&String> = seen
            .comments
            .iter()
            .filter(|c| c.contains("## Epic Plan Refused"))
            .collect();
        assert_eq!(refusals.len(), 1, "{:?}", seen.comments);
        assert!(
            refusals[0].to_lowercase().contains(expected),
            "{expected}: {}",
            refusals[0]
        );
        assert!(!seen.comments.iter().any(|c| c.contains("## Epic Plan\n")));
    }
}

#[tokio::test]
async fn a_strangers_epic_is_refused_and_nothing_is_written() {
    let mut spec = epic_spec(&[three_tasks()]);
    spec.issue.author = "mallory".into();
    let (_dir, world) = world(spec).await;
    let before = world.sandbox.with_state(|s| {
        (
            s.issues.len(),
            s.comments_of(1).len(),
            s.issue(1).unwrap().labels.clone(),
        )
    });
    let (code, out, stderr) = plan(&world).await;
    assert_eq!(code, Some(1), "{out}\n{stderr}");
    assert_eq!(out["end"], "refused");
    assert!(
        out["message"]
            .as_str()
            .unwrap()
            .contains("opened by @mallory, who is not a codeowner"),
        "{out}"
    );
    let after = world.sandbox.with_state(|s| {
        (
            s.issues.len(),
            s.comments_of(1).len(),
            s.issue(1).unwrap().labels.clone(),
        )
    });
    assert_eq!(after, before);
    assert!(!Path::new(&journal(&world)).exists());
}

/// The journal's events of epic #1, by kind and task (`started units`, `merged units`, …).
fn journal_events(world: &World) -> Vec<String> {
    let text = std::fs::read_to_string(journal(world)).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|v| {
            let kind = v["kind"].as_str().unwrap_or_default().to_string();
            match v["task"].as_str() {
                Some(task) => format!("{kind} {task}"),
                None => kind,
            }
        })
        .collect()
}

/// The epic planned: `supervisor epic 1 --plan-only`, which succeeds.
async fn planned(world: &World) {
    let (code, answer, stderr) = plan(world).await;
    assert_eq!(code, Some(0), "{answer}\n{stderr}");
}

/// `events` (journal lines of the task `units`, all at one time) written after the epic's
/// journal's own: what an earlier process, or an agent, left there.
fn journaled(world: &World, events: &[Value]) {
    let mut text = std::fs::read_to_string(journal(world)).unwrap();
    for event in events {
        let mut line = json!({ "at": "2026-11-29T10:00:00Z", "task": "units" });
        line.as_object_mut()
            .unwrap()
            .extend(event.as_object().unwrap().clone());
        text.push_str(&format!("{line}\n"));
    }
    std::fs::write(journal(world), text).unwrap();
}

/// The demo epic worked to its end through the binary: three tasks, `format` depending on
/// `units` and sent back once by the reviewer; every task is accepted and merged into `epic-1`,
/// and one pull request from `epic-1` carries the combined report.
#[tokio::test]
async fn an_epic_is_worked_to_one_pull_request_its_tasks_reviewed_revised_and_merged() {
    let spec = supervisor::demo::epic_spec(
        &[("units", &[]), ("format", &["units"]), ("docs", &[])],
        &["format"],
    );
    let (_dir, world) = world(spec).await;
    let out = supervisor(&world, &["epic", "1", "--json"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let answer: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{stderr}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(out.status.code(), Some(0), "{answer}\n{stderr}");
    assert_eq!(answer["end"], "finished", "{answer}");
    let outcomes: Vec<(String, String, u64)> = answer["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["task"].as_str().unwrap().to_string(),
                t["outcome"].as_str().unwrap().to_string(),
                t["reviews"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        outcomes,
        [
            ("units".to_string(), "accepted".to_string(), 1),
            ("format".to_string(), "accepted".to_string(), 2),
            ("docs".to_string(), "accepted".to_string(), 1),
        ]
    );
    let epic_pr = answer["pullRequest"]
        .as_u64()
        .expect("the epic's pull request");
    let task_prs: Vec<u64> = (answer["tasks"].as_array().unwrap().iter())
        .map(|t| t["pullRequest"].as_u64().unwrap())
        .collect();
    world.sandbox.with_state(|s| {
        let pr = s.pull(epic_pr).unwrap();
        assert_eq!((pr.head.as_str(), pr.base.as_str()), ("epic-1", "main"));
        assert!(
            !pr.merged && pr.body.starts_with("Closes #1"),
            "{}",
            pr.body
        );
        assert!(pr.body.contains("| `format` | #3 |"), "{}", pr.body);
        for n in &task_prs {
            let p = s.pull(*n).unwrap();
            assert!(p.merged, "#{n} is merged");
            assert_eq!(p.base, "epic-1", "#{n} targets the epic branch");
        }
        for sub in 2..=4 {
            assert_eq!(
                s.issue(sub).unwrap().state,
                supervisor::sandbox::SeedState::Closed
            );
        }
        let reviews = |n: u64| {
            (s.pull(n).unwrap().comments.iter())
                .filter(|c| c.body.contains("## Epic review: changes needed"))
                .count()
        };
        assert_eq!(reviews(task_prs[1]), 1, "format was sent back once");
        assert_eq!(reviews(task_prs[0]), 0);
        let summaries = (s.comments_of(1).iter())
            .filter(|c| c.body.contains("## Epic Summary"))
            .count();
        assert_eq!(summaries, 1);
        // The plan's comment tracks the epic to its end: how each task ended, its audit's score.
        let plan = (s.comments_of(1).iter())
            .find(|c| c.body.contains("## Epic Plan"))
            .map(|c| c.body.clone())
            .unwrap();
        assert!(plan.contains("### Done"), "{plan}");
        assert!(
            regex::Regex::new(r"\| `format` \| #3 \| #\d+ \| accepted \| 2 \| \d+/\d+ \|")
                .unwrap()
                .is_match(&plan),
            "{plan}"
        );
    });
    // `format` started once `units` was merged; `docs` did not wait.
    let events = journal_events(&world);
    let at = |e: &str| {
        events
            .iter()
            .position(|x| x == e)
            .unwrap_or_else(|| panic!("{e}: {events:?}"))
    };
    assert!(at("merged units") < at("started format"), "{events:?}");
    assert!(at("started docs") < at("merged units"), "{events:?}");
    // The epic branch holds every task's work and the revision.
    let tree = supervisor::demo::git(&world.remote, &["ls-tree", "-r", "--name-only", "epic-1"])
        .expect("the epic branch");
    for file in [
        "src/units.ts",
        "src/format.ts",
        "src/format.revised.ts",
        "src/docs.ts",
    ] {
        assert!(tree.lines().any(|l| l == file), "{file} in\n{tree}");
    }
    // Running it again after the end writes nothing.
    let written = || {
        world
            .sandbox
            .with_state(|s| (s.issues.len(), s.pulls().len(), s.comments_of(1).len()))
    };
    let before = written();
    let again = supervisor(&world, &["epic", "1", "--json"]).await;
    assert_eq!(
        again.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    assert_eq!(written(), before);
    let violations = world.sandbox.violations();
    assert!(violations.is_empty(), "{violations:?}");
}

/// Every marker supervisor left twice on one issue or pull request: a write repeated.
fn repeated_markers(world: &World) -> Vec<String> {
    let re = regex::Regex::new(r"<!-- supervisor:[^>]*-->").unwrap();
    world.sandbox.with_state(|s| {
        let mut lists: Vec<(String, Vec<String>)> = Vec::new();
        for i in &s.issues {
            let bodies = s
                .comments_of(i.number)
                .iter()
                .map(|c| c.body.clone())
                .collect();
            lists.push((format!("#{}", i.number), bodies));
        }
        for p in s.pulls() {
            let bodies = p.comments.iter().map(|c| c.body.clone()).collect();
            lists.push((format!("pull #{}", p.number), bodies));
        }
        let mut repeated = Vec::new();
        for (on, bodies) in lists {
            let mut seen = std::collections::BTreeSet::new();
            for body in bodies {
                for m in re.find_iter(&body) {
                    if !seen.insert(m.as_str().to_string()) {
                        repeated.push(format!("{on}: {}", m.as_str()));
                    }
                }
            }
        }
        repeated
    })
}

/// kill -9 of `supervisor epic` while a task's run goes on, once a task's pull request waits for
/// its review, and once the reviewer sent a task back: running it again ends the epic with the
/// same sub-issues, one pull request per task and one for the epic, and no comment twice.
#[tokio::test]
async fn an_epic_killed_during_its_work_resumes_without_a_duplicate() {
    for (point, count) in [
        ("started units", 1),
        ("run-ended units", 1),
        ("reviewed format", 1),
    ] {
        let mut spec = supervisor::demo::epic_spec(
            &[("units", &[]), ("format", &["units"]), ("docs", &[])],
            &["format"],
        );
        // The developers and the reviewer take a moment, so that the kill lands inside their work.
        for (role, attempts) in spec.script.as_object_mut().unwrap() {
            if role.starts_with("developer@") || role.starts_with("reviewer") {
                for attempt in attempts.as_array_mut().unwrap() {
                    attempt
                        .as_array_mut()
                        .unwrap()
                        .insert(0, json!({ "sleep": 300 }));
                }
            }
        }
        let (_dir, world) = world(spec).await;
        let mut child = Command::new(BIN)
            .args(["epic", "1", "--json"])
            .current_dir(&world.repo)
            .env_clear()
            .envs(world.env())
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(world.dir.join("killed.log")).unwrap())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let log = || std::fs::read_to_string(world.dir.join("killed.log")).unwrap_or_default();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        loop {
            let seen = journal_events(&world)
                .iter()
                .filter(|e| *e == point)
                .count();
            if seen >= count {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{point}: never reached"
            );
            assert!(
                child.try_wait().unwrap().is_none(),
                "{point}: it ended first: {}",
                log()
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        child.start_kill().unwrap();
        child.wait().await.unwrap();
        let out = supervisor(&world, &["epic", "1", "--json"]).await;
        let answer: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        assert_eq!(
            answer["end"],
            "finished",
            "{point}: {answer}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let (subs, pulls) = world
            .sandbox
            .with_state(|s| (s.issue(1).unwrap().sub_issues.len(), s.pulls().len()));
        assert_eq!((subs, pulls), (3, 4), "{point}");
        let repeated = repeated_markers(&world);
        assert!(repeated.is_empty(), "{point}: {repeated:?}");
        let outcomes: Vec<&str> = (answer["tasks"].as_array().unwrap().iter())
            .map(|t| t["outcome"].as_str().unwrap())
            .collect();
        assert_eq!(outcomes, ["accepted"; 3], "{point}");
    }
}

/// Six independent tasks with `epic.maxConcurrency: 2`: two run at once, never more.
#[tokio::test]
async fn never_more_than_max_concurrency_tasks_of_an_epic_run_at_once() {
    let ids = ["a", "b", "c", "d", "e", "f"];
    let tasks: Vec<(&str, &[&str])> = ids.iter().map(|id| (*id, &[][..])).collect();
    let mut spec = supervisor::demo::epic_spec(&tasks, &[]);
    spec.settings
        .insert("epic".into(), json!({ "maxConcurrency": 2 }));
    let (_dir, world) = world(spec).await;
    let out = supervisor(&world, &["epic", "1", "--json"]).await;
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    assert_eq!(
        answer["end"],
        "finished",
        "{answer}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (mut running, mut most) = (0, 0);
    for e in journal_events(&world) {
        if e.starts_with("started ") {
            running += 1;
        } else if e.starts_with("run-ended ") {
            running -= 1;
        }
        most = most.max(running);
    }
    assert_eq!(most, 2, "{:?}", journal_events(&world));
}

/// The reviewer escalates `units`: its sub-issue gets the escalation label and a comment naming
/// the codeowners, `format` (which depends on it) is escalated without running, `docs` is
/// accepted, and the epic's pull request carries only what was accepted.
#[tokio::test]
async fn an_escalated_task_goes_to_the_codeowners_and_its_dependants_with_it() {
    let mut spec = supervisor::demo::epic_spec(
        &[("units", &[]), ("format", &["units"]), ("docs", &[])],
        &[],
    );
    spec.script["reviewer@2"] = json!([[{ "final": "```json\n{\"verdict\": \"escalate\", \"reason\": \"the epic's criteria contradict the task\"}\n```" }]]);
    let (_dir, world) = world(spec).await;
    let out = supervisor(&world, &["epic", "1", "--json"]).await;
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    assert_eq!(
        answer["end"],
        "finished",
        "{answer}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let outcomes: Vec<(&str, &str)> = (answer["tasks"].as_array().unwrap().iter())
        .map(|t| (t["task"].as_str().unwrap(), t["outcome"].as_str().unwrap()))
        .collect();
    assert_eq!(
        outcomes,
        [
            ("units", "escalated"),
            ("format", "escalated"),
            ("docs", "accepted")
        ]
    );
    assert_eq!(
        answer["tasks"][1]["pullRequest"],
        Value::Null,
        "format never ran"
    );
    world.sandbox.with_state(|s| {
        let units = s.issue(2).unwrap();
        assert!(units.labels.contains(&"supervisor:escalated".to_string()));
        let said: Vec<&str> = s.comments_of(2).iter().map(|c| c.body.as_str()).collect();
        assert!(
            said.iter().any(|c| c.contains("## Escalated")
                && c.contains("@alice")
                && c.contains("the epic's criteria contradict the task")),
            "{said:?}"
        );
        assert!(
            s.issue(3)
                .unwrap()
                .labels
                .contains(&"supervisor:escalated".to_string())
        );
        let epic_pr = answer["pullRequest"].as_u64().unwrap();
        let body = &s.pull(epic_pr).unwrap().body;
        assert!(
            body.contains("| `docs` | #4 |") && body.contains("escalated"),
            "{body}"
        );
        // The escalated task's pull request was not merged.
        let units_pr = answer["tasks"][0]["pullRequest"].as_u64().unwrap();
        assert!(!s.pull(units_pr).unwrap().merged);
    });
}

/// The epic's journal lies in the checkout, where an agent could write. A journal naming a
/// stranger's pull request as an accepted task's: nothing is merged (the merge takes only the
/// pull request of the task's branch into the epic branch), and the work stops naming the file.
#[tokio::test]
async fn a_journal_naming_a_strangers_pull_request_merges_nothing() {
    let spec = supervisor::demo::epic_spec(&[("units", &[])], &[]);
    let (_dir, world) = world(spec).await;
    planned(&world).await;
    supervisor::demo::git(&world.remote, &["branch", "evil", "main"]).unwrap();
    world.sandbox.with_state(|s| {
        s.pulls.push(supervisor::sandbox::PullSeed::new(
            90, "evil", "main", "Evil", "Merge me", "mallory",
        ));
    });
    let forged = [
        json!({ "kind": "started" }),
        json!({ "kind": "run-ended", "pr": 90, "reason": null }),
        json!({ "kind": "reviewed", "verdict": { "verdict": "accepted" } }),
    ];
    journaled(&world, &forged);
    let out = supervisor(&world, &["epic", "1", "--json"]).await;
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let merged = world.sandbox.with_state(|s| s.pull(90).unwrap().merged);
    assert!(!merged, "the stranger's pull request was merged: {answer}");
    assert_ne!(out.status.code(), Some(0), "{answer}");
    let message = answer["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("pull request #90") && message.contains("events.jsonl"),
        "{answer}"
    );
}

/// The demo epic whose `format` review asks for a new plan: the planner's second plan adds
/// `labels` (which `format` now depends on), changes `format`'s text and drops `extra`, which the
/// reviewer had sent back. `epic.maxConcurrency: 1`, so the order is the plan's.
fn replan_spec() -> WorldSpec {
    let tasks: [(&str, &[&str]); 4] = [
        ("units", &[]),
        ("format", &["units"]),
        ("extra", &["units"]),
        ("docs", &["format"]),
    ];
    let mut spec = supervisor::demo::epic_spec(&tasks, &[]);
    spec.settings
        .insert("epic".into(), json!({ "maxConcurrency": 1 }));
    let verdict = |v: Value| json!({ "final": format!("I read it.\n\n```json\n{v}\n```") });
    // #3 is format's sub-issue, #4 extra's.
    spec.script["reviewer@3"] = json!([
        [verdict(
            json!({ "verdict": "replan", "reason": "formatting needs a table of unit labels, which no task makes" })
        )],
        [verdict(json!({ "verdict": "accepted" }))]
    ]);
    spec.script["reviewer@4"] = json!([
        [verdict(
            json!({ "verdict": "needs-revision", "feedback": "- [ ] not needed as it is" })
        )],
        [verdict(
            json!({ "verdict": "needs-revision", "feedback": "- [ ] still not needed" })
        )]
    ]);
    let task = |id: &str, body: &str, deps: &[&str]| json!({ "id": id, "title": format!("Task {id}"), "body": body, "dependsOn": deps });
    let second = json!({ "tasks": [
        task("units", "- [ ] `src/units.ts` exports `task_units`", &[]),
        task("labels", "- [ ] `src/labels.ts` lists the unit labels", &["units"]),
        task("format", "- [ ] `src/format.ts` exports `task_format`, using the unit labels", &["units", "labels"]),
        task("docs", "- [ ] `src/docs.ts` exports `task_docs`", &["format"]),
    ]});
    let first = spec.script["planner"][0].clone();
    spec.script["planner"] = json!([
        first,
        [{ "sleep": 300 }, { "final": format!("A new plan.\n\n```json\n{second}\n```") }]
    ]);
    spec
}

/// What a re-planned epic ended with: every task's outcome and reviews, and what GitHub holds.
async fn assert_replanned(world: &World, answer: &Value) {
    assert_eq!(answer["end"], "finished", "{answer}");
    let outcomes: Vec<(String, String)> = (answer["tasks"].as_array().unwrap().iter())
        .map(|t| {
            let task = t["task"].as_str().unwrap().to_string();
            (task, t["outcome"].as_str().unwrap().to_string())
        })
        .collect();
    let expected: Vec<(String, String)> = [
        ("units", "accepted"),
        ("labels", "accepted"),
        ("format", "accepted"),
        ("docs", "accepted"),
        ("extra", "dropped"),
    ]
    .iter()
    .map(|(t, o)| (t.to_string(), o.to_string()))
    .collect();
    assert_eq!(outcomes, expected, "{answer}");
    let task = |id: &str| {
        (answer["tasks"].as_array().unwrap().iter())
            .find(|t| t["task"] == id)
            .unwrap()
            .clone()
    };
    assert_eq!(task("format")["reviews"], 2, "{answer}");
    let extra_pr = task("extra")["pullRequest"]
        .as_u64()
        .expect("extra's pull request");
    let labels = task("labels")["issue"].as_u64().unwrap();
    world.sandbox.with_state(|s| {
        // extra: its pull request closed unmerged, its sub-issue closed as not planned.
        let pr = s.pull(extra_pr).unwrap();
        assert!(
            !pr.merged && pr.state == supervisor::sandbox::SeedState::Closed,
            "#{extra_pr}"
        );
        assert!(pr.comments.iter().any(|c| c.body.contains("## Dropped")));
        let sub = s.issue(4).unwrap();
        assert_eq!(sub.state, supervisor::sandbox::SeedState::Closed);
        assert_eq!(sub.state_reason.as_deref(), Some("not_planned"));
        // format's sub-issue says the new text, sealed by supervisor; it waits on labels.
        let format = s.issue(3).unwrap();
        assert!(
            format.body.contains("using the unit labels"),
            "{}",
            format.body
        );
        assert_eq!(Seal::verify(&format.body, 1).unwrap().task, "format");
        assert!(
            format.blocked_by.contains(&labels),
            "{:?}",
            format.blocked_by
        );
        assert!(s.issue(1).unwrap().sub_issues.contains(&labels));
        // One plan comment, edited: the new plan and what changed.
        let plans: Vec<&str> = (s.comments_of(1).iter())
            .filter(|c| c.body.contains("## Epic Plan"))
            .map(|c| c.body.as_str())
            .collect();
        assert_eq!(plans.len(), 1, "{plans:?}");
        for said in [
            "### Changes",
            "asked by the review of `format`",
            "added `labels`",
            "changed `format`",
            "dropped `extra`",
            "#labels",
        ] {
            let said = said.replace("#labels", &format!("#{labels}"));
            assert!(plans[0].contains(&said), "{said}: {}", plans[0]);
        }
        // format's pull request was revised to its new text once.
        let format_pr = task("format")["pullRequest"].as_u64().unwrap();
        let feedback = (s.pull(format_pr).unwrap().comments.iter())
            .filter(|c| c.body.contains("## Epic review: changes needed"))
            .count();
        assert_eq!(feedback, 1);
    });
    let repeated = repeated_markers(world);
    assert!(repeated.is_empty(), "{repeated:?}");
    let violations = world.sandbox.violations();
    assert!(violations.is_empty(), "{violations:?}");
}

/// A review asks for a new plan: once nothing runs, the planner plans again; the new task is
/// opened and run, the changed one resealed and revised, the dropped one closed with its pull
/// request, and the plan's comment says what changed.
#[tokio::test]
async fn a_review_asking_for_a_new_plan_changes_adds_and_drops_tasks() {
    let (_dir, world) = world(replan_spec()).await;
    let out = supervisor(&world, &["epic", "1", "--json"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let answer: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{stderr}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(out.status.code(), Some(0), "{answer}\n{stderr}");
    assert_replanned(&world, &answer).await;
    let events = journal_events(&world);
    let at = |e: &str| {
        events
            .iter()
            .position(|x| x == e)
            .unwrap_or_else(|| panic!("{e}: {events:?}"))
    };
    assert!(at("replanned") < at("resealed format"), "{events:?}");
    assert!(at("dropped extra") < at("started labels"), "{events:?}");
    assert!(at("merged labels") < events.iter().rposition(|e| e == "started format").unwrap());
}

/// kill -9 while the planner plans again, once the new plan is journaled, and once a changed
/// task's sub-issue says its new text: running again ends the same, nothing written twice.
#[tokio::test]
async fn an_epic_killed_while_it_is_planned_again_resumes_without_a_duplicate() {
    for point in [
        "reviewed format",
        "replanned",
        "resealed format",
        "dropped extra",
    ] {
        let (_dir, world) = world(replan_spec()).await;
        let mut child = Command::new(BIN)
            .args(["epic", "1", "--json"])
            .current_dir(&world.repo)
            .env_clear()
            .envs(world.env())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        while !journal_events(&world).iter().any(|e| e == point) {
            assert!(
                std::time::Instant::now() < deadline,
                "{point}: never reached"
            );
            assert!(
                child.try_wait().unwrap().is_none(),
                "{point}: it ended first"
            );
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        child.start_kill().unwrap();
        child.wait().await.unwrap();
        let out = supervisor(&world, &["epic", "1", "--json"]).await;
        let answer: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{point}: {e}: {}", String::from_utf8_lossy(&out.stderr)));
        assert_replanned(&world, &answer).await;
        let subs = world
            .sandbox
            .with_state(|s| s.issue(1).unwrap().sub_issues.len());
        assert_eq!(subs, 5, "{point}");
    }
}

/// With `epic.column` set, the epic's card sits there while the epic is worked and moves to Done
/// once its work is done; a second `supervisor epic` meanwhile is refused, naming the process
/// that works it.
#[tokio::test]
async fn the_epics_card_moves_with_its_work_and_one_process_works_it_at_a_time() {
    let mut spec = supervisor::demo::epic_spec(&[("units", &[]), ("docs", &["units"])], &[]);
    spec.settings
        .insert("epic".into(), json!({ "column": "Epics" }));
    spec.script["reviewer"] =
        json!([[{ "sleep": 500 }, { "final": "```json\n{\"verdict\": \"accepted\"}\n```" }]]);
    let (_dir, world) = world(spec).await;
    world.sandbox.with_state(|s| {
        s.board.as_mut().unwrap().options.push("Epics".into());
    });
    let child = Command::new(BIN)
        .args(["epic", "1", "--json"])
        .current_dir(&world.repo)
        .env_clear()
        .envs(world.env())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid = child.id().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !journal_events(&world).iter().any(|e| e == "started units") {
        assert!(std::time::Instant::now() < deadline, "never started");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let column = world
        .sandbox
        .with_state(|s| s.column_of(1).map(String::from));
    assert_eq!(column.as_deref(), Some("Epics"));
    let second = supervisor(&world, &["epic", "1", "--json"]).await;
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&second.stdout),
        String::from_utf8_lossy(&second.stderr)
    );
    assert_ne!(second.status.code(), Some(0), "{said}");
    assert!(
        said.contains(&format!(
            "another supervisor (pid {pid}) is running issue #1"
        )),
        "{said}"
    );
    let out = child.wait_with_output().await.unwrap();
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    assert_eq!(
        answer["end"],
        "finished",
        "{answer}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let column = world
        .sandbox
        .with_state(|s| s.column_of(1).map(String::from));
    assert_eq!(column.as_deref(), Some("Done"));
    // The tasks' cards went their own way: each run moved its own.
    let tasks = world.sandbox.with_state(|s| {
        (s.issue(1).unwrap().sub_issues.iter())
            .map(|n| s.column_of(*n).map(String::from))
            .collect::<Vec<_>>()
    });
    assert!(
        tasks.iter().all(|c| c.as_deref() != Some("Epics")),
        "{tasks:?}"
    );
}

/// `independent` integration: each task's pull request targets `main`; the dependant waits
/// (exit 3, naming the pull request) until a person merges its blocker's, and then starts from
/// `main` with the blocker's work in it, though the checkout's own `main` was never updated.
#[tokio::test]
async fn with_independent_integration_a_dependant_starts_from_its_blockers_merge() {
    let mut spec = supervisor::demo::epic_spec(&[("units", &[]), ("format", &["units"])], &[]);
    spec.settings
        .insert("epic".into(), json!({ "integration": "independent" }));
    // format's developer (#3) shows what its worktree started from.
    spec.script["developer@3"] = json!([[
        { "run": "test -f src/units.ts && echo 'export const sawUnits = true;' > src/format.ts || echo 'export const sawUnits = false;' > src/format.ts" },
        { "final": supervisor::demo::answer("Done.", json!({ "action": "COMPLETE", "agentName": "developer" })) }
    ]]);
    let (_dir, world) = world(spec).await;
    let out = supervisor(&world, &["epic", "1", "--json"]).await;
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    assert_eq!(out.status.code(), Some(3), "{answer}");
    assert_eq!(answer["end"], "waiting", "{answer}");
    let pulls = answer["waitingFor"].as_array().cloned().unwrap_or_default();
    assert_eq!(pulls.len(), 1, "{answer}");
    let pr = pulls[0].as_u64().unwrap();
    assert!(answer.to_string().contains(&format!("#{pr}")), "{answer}");
    // A person merges units' pull request on GitHub.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let merged = reqwest::Client::new()
        .put(format!(
            "{}/repos/{}/{}/pulls/{pr}/merge",
            world.sandbox.url(),
            world.spec.owner,
            world.spec.name
        ))
        .bearer_auth(world.spec.reviewer_token())
        .header("user-agent", "test")
        .json(&json!({ "merge_method": "merge" }))
        .send()
        .await
        .unwrap();
    assert!(
        merged.status().is_success(),
        "{}",
        merged.text().await.unwrap()
    );
    let out = supervisor(&world, &["epic", "1", "--json"]).await;
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    assert_eq!(answer["end"], "finished", "{answer}");
    let format_pr = (answer["tasks"].as_array().into_iter().flatten())
        .find(|t| t["task"] == "format")
        .and_then(|t| t["pullRequest"].as_u64())
        .unwrap_or_else(|| panic!("format's pull request: {answer}"));
    let head = world
        .sandbox
        .with_state(|s| s.pull(format_pr).unwrap().head.clone());
    let file =
        supervisor::demo::git(&world.remote, &["show", &format!("{head}:src/format.ts")]).unwrap();
    assert!(file.contains("sawUnits = true"), "{file}");
}

/// A person drags a planned task's card to Done (without closing its sub-issue): the epic takes it
/// as done by hand — no run, no pull request — and its dependants go on.
#[tokio::test]
async fn a_task_a_person_dragged_to_done_counts_as_done() {
    let spec = supervisor::demo::epic_spec(&[("units", &[]), ("format", &["units"])], &[]);
    let (_dir, world) = world(spec).await;
    let (code, answer, stderr) = plan(&world).await;
    assert_eq!(code, Some(0), "{answer}\n{stderr}");
    world.sandbox.with_state(|s| {
        let board = s.board.as_mut().unwrap();
        board.items.insert(2, Some("Done".into()));
    });
    let out = supervisor(&world, &["epic", "1", "--json"]).await;
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    assert_eq!(
        answer["end"],
        "finished",
        "{answer}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let outcome = |id: &str| {
        (answer["tasks"].as_array().unwrap().iter())
            .find(|t| t["task"] == id)
            .map(|t| (t["outcome"].clone(), t["pullRequest"].clone()))
            .unwrap()
    };
    assert_eq!(outcome("units"), (json!("closed"), Value::Null), "{answer}");
    assert_eq!(outcome("format").0, json!("accepted"), "{answer}");
}

/// A task's sub-issue run on its own (`supervisor run`, as a card a person moved would be) once
/// its epic branch exists: it starts from the epic branch and its pull request targets it, so the
/// epic's work takes it up and merges it.
#[tokio::test]
async fn a_task_run_on_its_own_works_on_its_epic_branch() {
    let spec = supervisor::demo::epic_spec(&[("units", &[])], &[]);
    let (_dir, world) = world(spec).await;
    let (code, answer, stderr) = plan(&world).await;
    assert_eq!(code, Some(0), "{answer}\n{stderr}");
    supervisor::demo::git(
        &world.repo,
        &[
            "push",
            "-q",
            world.remote.to_str().unwrap(),
            "HEAD:refs/heads/epic-1",
        ],
    )
    .unwrap();
    let out = supervisor(&world, &["run", "2"]).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let base = world.sandbox.with_state(|s| {
        let pr = s
            .pulls()
            .iter()
            .find(|p| p.head.ends_with("-2"))
            .cloned()
            .unwrap();
        pr.base
    });
    assert_eq!(base, "epic-1");
    let out = supervisor(&world, &["epic", "1", "--json"]).await;
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    assert_eq!(
        answer["end"],
        "finished",
        "{answer}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(answer["tasks"][0]["outcome"], "accepted", "{answer}");
    let tree =
        supervisor::demo::git(&world.remote, &["ls-tree", "-r", "--name-only", "epic-1"]).unwrap();
    assert!(tree.lines().any(|l| l == "src/units.ts"), "{tree}");
}

/// The journal lies in the checkout, where an agent could write. One that names the epic itself as
/// a task's sub-issue, then says a new plan changed or dropped that task, rewrites and closes
/// nothing: the work stops naming the journal.
#[tokio::test]
async fn a_journal_naming_the_epic_as_a_changed_or_dropped_task_rewrites_and_closes_nothing() {
    for change in ["changed", "dropped"] {
        let spec = supervisor::demo::epic_spec(
            &[("units", &[]), ("format", &["units"]), ("docs", &[])],
            &[],
        );
        let (_dir, world) = world(spec).await;
        let (code, answer, stderr) = plan(&world).await;
        assert_eq!(code, Some(0), "{answer}\n{stderr}");
        let before = world
            .sandbox
            .with_state(|s| s.issue(1).map(|i| (i.body.clone(), i.state)));
        let text = std::fs::read_to_string(journal(&world)).unwrap();
        let mut lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        for line in &mut lines {
            if line["kind"] == "sub-issue-created" && line["task"] == "units" {
                line["number"] = json!(1);
            }
        }
        let task = |id: &str, body: &str, deps: &[&str]| json!({ "id": id, "title": format!("Task {id}"), "body": body, "dependsOn": deps });
        let (tasks, revision) = if change == "changed" {
            (
                vec![
                    task("units", "- [ ] rewritten", &[]),
                    task(
                        "format",
                        "- [ ] `src/format.ts` exports `task_format`",
                        &["units"],
                    ),
                    task("docs", "- [ ] `src/docs.ts` exports `task_docs`", &[]),
                ],
                json!({ "task": "docs", "reason": "r", "added": [], "changed": ["units"], "dropped": [], "kept": [] }),
            )
        } else {
            (
                vec![
                    task("format", "- [ ] `src/format.ts` exports `task_format`", &[]),
                    task("docs", "- [ ] `src/docs.ts` exports `task_docs`", &[]),
                ],
                json!({ "task": "docs", "reason": "r", "added": [], "changed": [], "dropped": ["units"], "kept": [] }),
            )
        };
        lines.push(json!({
            "at": "2026-11-27T00:00:00Z",
            "kind": "replanned",
            "plan": { "tasks": tasks },
            "revision": revision,
        }));
        let forged: String = lines.iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(journal(&world), forged).unwrap();
        let out = supervisor(&world, &["epic", "1", "--json"]).await;
        let answer: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        assert_ne!(out.status.code(), Some(0), "{change}: {answer}");
        assert!(
            answer["message"]
                .as_str()
                .unwrap_or_default()
                .contains("which supervisor did not open for it"),
            "{change}: {answer}"
        );
        let after = world
            .sandbox
            .with_state(|s| s.issue(1).map(|i| (i.body.clone(), i.state)));
        assert_eq!(after, before, "{change}: the epic is left as it was");
    }
}

/// `supervisor epic 1 --json` worked to its end: its JSON answer.
async fn work_epic(world: &World) -> Value {
    let out = supervisor(world, &["epic", "1", "--json"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let answer: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{stderr}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(out.status.code(), Some(0), "{answer}\n{stderr}");
    answer
}

/// What an epic's tasks cost in GitHub requests: nothing asked twice, nothing asked that the
/// process already knows or can tell from what GitHub already said.
#[tokio::test]
async fn an_epics_tasks_ask_github_only_what_it_has_not_said() {
    let tasks: [(&str, &[&str]); 4] = [("a", &[]), ("b", &[]), ("c", &[]), ("d", &[])];
    let (_dir, world) = world(supervisor::demo::epic_spec(&tasks, &[])).await;
    let answer = work_epic(&world).await;
    assert_eq!(answer["end"], "finished", "{answer}");
    let counts = world.sandbox.request_counts();
    let count = |route: &str| counts.get(route).copied().unwrap_or(0);
    let issue = "/repos/{owner}/{repo}/issues/{number}";
    // Earlier sub-issues are looked for once in the process, not once per task; no task's run
    // reads the epic's sub-issues or the epic (its parent comes with its own context).
    assert_eq!(count(&format!("GET {issue}/sub_issues")), 1, "{counts:?}");
    assert_eq!(count("GET /repos/{owner}/{repo}/issues"), 1, "{counts:?}");
    // Each sub-issue is read once before its run (which takes that read as its first), the epic
    // once: GitHub says they have no dependencies and no comments, so neither is listed.
    assert_eq!(count(&format!("GET {issue}")), 4 + 1, "{counts:?}");
    assert_eq!(
        count(&format!("GET {issue}/dependencies/blocked_by")),
        0,
        "{counts:?}"
    );
    // Comments are listed only to edit the plan's comment and post the summary once.
    assert!(count(&format!("GET {issue}/comments")) <= 3, "{counts:?}");
    // One read of each issue's card, editors and parent, for its run and for its review.
    assert_eq!(count("POST /graphql IssueContext"), 2 * 4 + 1, "{counts:?}");
    // The review reads the branch it checks out; the merge merges the commit it reviewed; whether a
    // pull request merges is tried here: no pull request is read or listed.
    assert_eq!(
        count("GET /repos/{owner}/{repo}/pulls/{number}"),
        0,
        "{counts:?}"
    );
    assert_eq!(
        count("GET /repos/{owner}/{repo}/pulls/{number}/files"),
        0,
        "{counts:?}"
    );
    let per_task = world.sandbox.request_total() as f64 / 4.0;
    assert!(per_task <= 27.0, "{per_task} requests per task: {counts:?}");
    let violations = world.sandbox.violations();
    assert!(violations.is_empty(), "{violations:?}");
}

/// The commit a review accepted is the one merged: a task whose branch moved after its reviewer
/// looked (a push by anyone, the reviewer's own included) goes to a person, merged nowhere.
#[tokio::test]
async fn a_branch_that_moved_after_its_review_is_escalated_not_merged() {
    let mut spec = supervisor::demo::epic_spec(&[("units", &[])], &[]);
    spec.script["reviewer@2"] = json!([[
        { "run": "echo 'export const unreviewed = 1;' > src/unreviewed.ts && git add -A && git -c user.name=mallory -c user.email=m@example.com commit -qm 'After the review' && git push -q origin HEAD:worktree-git-issue-2" },
        { "final": "I read the change.\n\n```json\n{\"verdict\": \"accepted\"}\n```" }
    ]]);
    let (_dir, world) = world(spec).await;
    worked_to_a_moved_branch(&world).await;
    let tree = supervisor::demo::git(&world.remote, &["ls-tree", "-r", "--name-only", "epic-1"])
        .expect("the epic branch");
    assert!(!tree.contains("src/unreviewed.ts"), "{tree}");
}

/// What the review judges is the branch as its pull request holds it (its run's worktree and
/// branch are gone; the reviewer's worktree starts from GitHub's copy): a commit a person pushed to
/// it after its run is reviewed, and merged with the rest, not taken for a branch that moved.
#[tokio::test]
async fn a_commit_pushed_to_a_tasks_branch_before_its_review_is_reviewed_and_merged() {
    let mut spec = supervisor::demo::epic_spec(&[("units", &[])], &[]);
    // A person's commit, pushed from a clone of their own while the run's audit goes on.
    let mut auditor = spec.script["auditor"][0].clone();
    auditor.as_array_mut().unwrap().insert(
        0,
        json!({ "run": "d=$(mktemp -d) && git clone -q \"$(git remote get-url origin)\" \"$d\" && cd \"$d\" && git checkout -q worktree-git-issue-2 && echo 'export const byHand = 1;' > src/by-hand.ts && git add -A && git -c user.name=alice -c user.email=a@example.com commit -qm 'By hand' && git push -q origin HEAD:worktree-git-issue-2" }),
    );
    spec.script["auditor@2"] = json!([auditor]);
    let (_dir, world) = world(spec).await;
    let answer = work_epic(&world).await;
    assert_eq!(answer["tasks"][0]["outcome"], "accepted", "{answer}");
    let tree = supervisor::demo::git(&world.remote, &["ls-tree", "-r", "--name-only", "epic-1"])
        .expect("the epic branch");
    for file in ["src/units.ts", "src/by-hand.ts"] {
        assert!(tree.lines().any(|l| l == file), "{file} in\n{tree}");
    }
}

/// The epic worked to its end, its one task escalated because its branch moved since its review:
/// the task's pull request, which is not merged.
async fn worked_to_a_moved_branch(world: &World) -> u64 {
    let answer = work_epic(world).await;
    let task = &answer["tasks"][0];
    assert_eq!(task["outcome"], "escalated", "{answer}");
    assert!(
        (task["reason"].as_str().unwrap()).contains("its branch moved since its review"),
        "{answer}"
    );
    let pr = task["pullRequest"].as_u64().unwrap();
    world
        .sandbox
        .with_state(|s| assert!(!s.pull(pr).unwrap().merged, "#{pr} is not merged"));
    pr
}

/// A merge taken up by a later process merges the commit the review judged, which the journal
/// keeps: a branch pushed to between the review and a stop is escalated, never merged.
#[tokio::test]
async fn after_a_stop_only_the_commit_the_review_judged_is_merged() {
    let spec = supervisor::demo::epic_spec(&[("units", &[])], &[]);
    let (_dir, world) = world(spec).await;
    planned(&world).await;
    // The task's branch and pull request as its run left them, its review done at `reviewed`.
    let remote = world.sandbox.git();
    supervisor::demo::git(&world.remote, &["branch", "epic-1", "main"]).unwrap();
    let branch = "worktree-git-issue-2";
    let file = [("units.ts", "export const task_units = \"units\";\n")];
    let reviewed = remote
        .commit_files(branch, Some("epic-1"), &file, "Units")
        .unwrap();
    world.sandbox.with_state(|s| {
        s.pulls.push(supervisor::sandbox::PullSeed::new(
            90,
            branch,
            "epic-1",
            "Task units",
            "Closes #2",
            "supervisor-bot",
        ));
    });
    let events = [
        json!({ "kind": "started" }),
        json!({ "kind": "run-ended", "pr": 90, "reason": null }),
        json!({ "kind": "reviewed-at", "sha": reviewed }),
        json!({ "kind": "reviewed", "verdict": { "verdict": "accepted" } }),
    ];
    journaled(&world, &events);
    // Then, before the merge, someone pushes to it.
    let unreviewed = [("unreviewed.ts", "export const unreviewed = 1;\n")];
    remote
        .commit_files(branch, None, &unreviewed, "After the review")
        .unwrap();
    assert_eq!(worked_to_a_moved_branch(&world).await, 90);
}
