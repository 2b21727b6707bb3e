//! `supervisor demo` end to end: the real binary builds its world, runs the pipeline and prints a PR URL.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

#[path = "support/browse.rs"]
mod browse;
use browse::browse;

/// The URL after `label` on a line of the demo's "where to look".
fn url_after(stderr: &str, label: &str) -> String {
    let line = stderr
        .lines()
        .map(str::trim_start)
        .find(|l| l.starts_with(label))
        .unwrap_or_else(|| panic!("no `{label}` line: {stderr}"));
    let url = line[label.len()..]
        .split_whitespace()
        .next()
        .unwrap_or_default();
    url.trim_end_matches(':').to_string()
}

#[test]
fn demo_runs_the_whole_pipeline_and_prints_a_pull_request() {
    let dir = tempfile::tempdir().unwrap();
    let demo = dir.path().join("demo");
    // Run from the checkout (as `cargo run -- demo` does), serving afterwards.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // PATH without .tools/ (as when nobody sourced scripts/tools-env.sh).
    let path = std::env::var_os("PATH").unwrap_or_default();
    let path = std::env::join_paths(
        std::env::split_paths(&path).filter(|d| !d.starts_with(root.join(".tools"))),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_supervisor"))
        .args(["demo", "--json", "--serve", "--dir"])
        .arg(&demo)
        .current_dir(root)
        .env_remove("GH_TOKEN")
        .env_remove("GITHUB_TOKEN")
        .env_remove("GITHUB_API_URL")
        .env_remove("SUPERVISOR_TOOLS_DIR")
        .env("PATH", path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let stdout = std::thread::spawn(move || {
        let mut text = Vec::new();
        out.read_to_end(&mut text).unwrap();
        text
    });
    let (tx, rx) = mpsc::channel();
    let err = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut stderr = String::new();
    while !stderr.contains("serving the sandbox GitHub until Ctrl-C") {
        match rx.recv_timeout(Duration::from_secs(120)) {
            Ok(line) => {
                stderr.push_str(&line);
                stderr.push('\n');
            }
            Err(_) => {
                let _ = child.kill();
                panic!("the demo did not start serving: {stderr}");
            }
        }
    }
    // The printed URLs open while it serves: the pull request, the issue, the board.
    let pr_url = url_after(&stderr, "pull request");
    let (status, _, page) = browse(&pr_url);
    assert_eq!(status, 200, "{pr_url}: {page}");
    assert!(
        page.contains("feat(#1): accept hours in parseDuration"),
        "{page}"
    );
    assert!(
        page.contains("Please also accept weeks"),
        "the review's line comment: {page}"
    );
    // The pull request shows the proof: each criterion's test on the base and on the head.
    assert!(page.contains("<h2>Proof</h2>"), "{page}");
    assert!(
        page.contains("parseDuration &gt; accepts hours")
            || page.contains("parseDuration > accepts hours"),
        "{page}"
    );
    let issue_url = url_after(&stderr, "issue #1");
    let (status, _, page) = browse(&issue_url);
    assert_eq!(status, 200, "{issue_url}: {page}");
    assert!(page.contains("<h2>Research Findings</h2>"), "{page}");
    assert!(
        !page.contains("supervisor:run="),
        "markers stay hidden: {page}"
    );
    let board_url = url_after(&stderr, "board");
    let (status, _, page) = browse(&board_url);
    assert_eq!(status, 200, "{board_url}: {page}");
    let done = page.split("<h3>Done</h3>").nth(1).unwrap();
    assert!(
        done.split("</section>")
            .next()
            .unwrap()
            .contains("/demo-org/durations/issues/1"),
        "{page}"
    );
    // Ctrl-C (here SIGTERM) ends it with the run's status.
    assert_eq!(
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) },
        0
    );
    let status = child.wait().unwrap();
    let stdout = stdout.join().unwrap();
    assert_eq!(status.code(), Some(0), "{stderr}");
    let tools = root.join(".tools");
    let tsc_installed = tools.join("node/node_modules/.bin/tsc").is_file();
    let vitest_installed = tools.join("node/node_modules/.bin/vitest").is_file();
    if tools.is_dir() {
        assert!(
            stderr.contains(&format!("using the tools in {}", tools.display())),
            "{stderr}"
        );
    }
    assert!(
        stderr.contains("pull request   http://127.0.0.1:"),
        "{stderr}"
    );
    // Without the gate tools, the gates they run show as not run, and one line says which tools
    // are missing and how to install them.
    if !tsc_installed {
        assert!(
            stderr.contains("not installed; install with `npm install -g typescript@5.9.3"),
            "{stderr}"
        );
    }
    let summary: serde_json::Value =
        serde_json::from_slice(&stdout).expect("stdout holds one JSON document");
    let report = &summary["demo"];
    assert_eq!(summary["end"]["kind"], "pull-request");
    assert!(
        summary["end"]["url"]
            .as_str()
            .unwrap()
            .ends_with("/demo-org/durations/pull/2")
    );
    // The loops people should see: one gate bounce, one auditor rejection.
    assert_eq!(summary["gateBounces"], 1);
    assert_eq!(summary["rejections"], 1);
    assert_eq!(summary["agents"].as_array().unwrap().len(), 8);
    // The test designer's round: the oracle shows its tests failing on the base (where vitest is
    // installed; elsewhere red shows as not run), and the contract holds.
    let rounds = summary["gateRounds"].as_array().unwrap();
    let design = &rounds[0];
    assert_eq!(design["stage"], "TestDesign", "{design}");
    assert_eq!(design["failing"], serde_json::json!([]), "{design}");
    // The README criterion no test can check goes on as the contract's warning.
    assert_eq!(
        design["warnings"],
        serde_json::json!(["contract"]),
        "{design}"
    );
    if vitest_installed {
        assert_eq!(design["verdict"], "not-blocked", "{design}");
        assert_eq!(design["notRun"], serde_json::json!([]), "{design}");
    } else {
        assert_eq!(design["notRun"], serde_json::json!(["red"]), "{design}");
    }
    // The no-TODO gate needs only git, so the bounce happens on every machine; tools that are
    // missing show as not run, never as passed.
    let first = rounds
        .iter()
        .find(|r| r["stage"] == "Implementation")
        .expect("a round of the developer's gates");
    assert!(
        first["failing"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g == "no-todo"),
        "{first}"
    );
    for round in summary["gateRounds"].as_array().unwrap() {
        for gate in round["notRun"].as_array().unwrap() {
            assert!(!round["failing"].as_array().unwrap().contains(gate));
            // The tools of .tools/ are used without anyone putting them on PATH.
            assert!(!(tsc_installed && gate == "tsc"), "{round}");
            assert!(!(vitest_installed && gate == "green"), "{round}");
        }
    }
    if tsc_installed {
        assert!(
            first["failing"]
                .as_array()
                .unwrap()
                .iter()
                .any(|g| g == "tsc"),
            "{first}"
        );
    }
    assert_eq!(report["column"], "Done");
    // The whole demo keeps to GitHub's published descriptions, requests and answers alike.
    assert_eq!(report["descriptionViolations"], serde_json::json!([]));
    assert!(report["githubRequests"].as_u64().unwrap() > 10);
    let state = std::fs::read_to_string(report["sandboxState"].as_str().unwrap()).unwrap();
    assert!(state.contains("feat(#1): accept hours in parseDuration"));
    assert!(std::path::Path::new(report["runMap"].as_str().unwrap()).is_file());
    // The review round: the codeowner's line comment is answered with the revision's commit and
    // resolved, and the pull request's body shows the revision.
    let revision = &report["revision"];
    assert_eq!(revision["end"]["kind"], "revised", "{revision}");
    assert_eq!(revision["end"]["round"], 1);
    let sha = revision["end"]["sha"].as_str().unwrap();
    assert!(
        stderr.contains("review round   ✔ revision 1 pushed"),
        "{stderr}"
    );
    let state: supervisor::sandbox::SandboxState = serde_json::from_str(&state).unwrap();
    // One tracking comment for the whole run, edited to its end.
    let tracking: Vec<_> = state
        .issue(1)
        .unwrap()
        .comments
        .iter()
        .filter(|c| c.author == "supervisor-bot" && c.body.contains("kind=tracking"))
        .collect();
    assert_eq!(tracking.len(), 1, "{tracking:?}");
    assert!(tracking[0].body.contains("/pull/2"), "{}", tracking[0].body);
    // It stays the run's: the revision keeps its own on the pull request.
    assert!(!tracking[0].body.contains("-rev"), "{}", tracking[0].body);
    let pr = &state.pulls()[0];
    assert!(
        pr.comments
            .iter()
            .any(|c| c.author == "supervisor-bot" && c.body.contains("kind=tracking")),
        "{:?}",
        pr.comments
    );
    // The revised body counts the run's rejection and gate bounce.
    assert!(
        pr.body
            .contains("_Reviewed by supervisor after 1 rejection and 1 gate bounce._"),
        "{}",
        pr.body
    );
    let root = pr
        .review_comments
        .iter()
        .find(|c| c.in_reply_to.is_none())
        .unwrap();
    assert_eq!(root.resolved_by.as_deref(), Some("supervisor-bot"));
    assert!(root.diff_hunk.starts_with("@@ "), "{}", root.diff_hunk);
    let reply = pr
        .review_comments
        .iter()
        .find(|c| c.in_reply_to == Some(root.id))
        .unwrap();
    assert!(
        reply.body.starts_with(&format!("Addressed in {sha}.")),
        "{}",
        reply.body
    );
    assert!(
        pr.body.contains("Revised after review (1 revision)"),
        "{}",
        pr.body
    );
    let remote = report["dir"]
        .as_str()
        .map(std::path::PathBuf::from)
        .unwrap()
        .join("remote.git");
    let log = Command::new("git")
        .args(["--git-dir"])
        .arg(&remote)
        .args(["log", "--format=%H %s", &pr.head])
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&log.stdout);
    assert!(
        log.starts_with(&format!(
            "{sha} Revise #2: address review feedback, round 1"
        )),
        "{log}"
    );
}

#[test]
fn a_tools_directory_that_is_not_there_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_supervisor"))
        .args(["demo", "--dir"])
        .arg(dir.path().join("demo"))
        .env("SUPERVISOR_TOOLS_DIR", dir.path().join("no-tools"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("SUPERVISOR_TOOLS_DIR=") && stderr.contains("no-tools"),
        "{stderr}"
    );
    assert!(!dir.path().join("demo").exists(), "nothing is built");
}

#[test]
fn demo_watch_runs_the_card_a_maintainer_drags() {
    let dir = tempfile::tempdir().unwrap();
    let demo = dir.path().join("demo");
    let out = Command::new(env!("CARGO_BIN_EXE_supervisor"))
        .args(["demo", "--watch", "--json", "--dir"])
        .arg(&demo)
        .env_remove("GH_TOKEN")
        .env_remove("GITHUB_TOKEN")
        .env_remove("GITHUB_API_URL")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let docs: Vec<serde_json::Value> = serde_json::Deserializer::from_slice(&out.stdout)
        .into_iter()
        .collect::<Result<_, _>>()
        .expect("stdout holds the notices and the report as JSON");
    let kinds: Vec<&str> = docs.iter().filter_map(|d| d["kind"].as_str()).collect();
    let at = |k: &str| {
        kinds
            .iter()
            .position(|x| *x == k)
            .unwrap_or_else(|| panic!("no {k}: {kinds:?}"))
    };
    assert!(
        at("polled") < at("queued")
            && at("queued") < at("started")
            && at("started") < at("finished")
    );
    let finished = docs.iter().find(|d| d["kind"] == "finished").unwrap();
    assert_eq!(finished["end"], "pull-request", "{finished}");
    let report = docs.last().unwrap();
    assert_eq!(report["column"], "Done");
    assert!(std::path::Path::new(report["journal"].as_str().unwrap()).is_file());
}

/// `--clean` removes the demo's directory: the paths in it and URLs no server answers are not
/// printed as places to look.
#[test]
fn a_cleaned_demo_names_no_file_it_removed() {
    let dir = tempfile::tempdir().unwrap();
    let demo = dir.path().join("demo");
    let out = Command::new(env!("CARGO_BIN_EXE_supervisor"))
        .args(["demo", "--clean", "--dir"])
        .arg(&demo)
        .env_remove("GH_TOKEN")
        .env_remove("GITHUB_TOKEN")
        .env_remove("GITHUB_API_URL")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!demo.exists(), "the directory is removed");
    assert!(stderr.contains("removed (--clean)"), "{stderr}");
    let tail = &stderr[stderr.find("removed (--clean)").unwrap()..];
    for gone in [
        "  journal ",
        "  run map ",
        "  GitHub state ",
        "http://127.0.0.1",
    ] {
        assert!(!tail.contains(gone), "{gone}: {tail}");
    }
    assert!(tail.contains("card in Done"), "{tail}");
}

/// `supervisor demo --epic`: issue #1 worked as an epic of three tasks to the epic's pull request,
/// one task sent back once, every exchange within GitHub's published description.
#[test]
fn demo_epic_works_an_epic_to_its_pull_request() {
    let dir = tempfile::tempdir().unwrap();
    let demo = dir.path().join("demo");
    let out = Command::new(env!("CARGO_BIN_EXE_supervisor"))
        .args(["demo", "--epic", "--json", "--dir"])
        .arg(&demo)
        .env_remove("GH_TOKEN")
        .env_remove("GITHUB_TOKEN")
        .env_remove("GITHUB_API_URL")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    let tasks: Vec<(String, String, u64)> = (doc["tasks"].as_array().unwrap().iter())
        .map(|t| {
            (
                t["task"].as_str().unwrap().to_string(),
                t["outcome"].as_str().unwrap().to_string(),
                t["reviews"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        tasks,
        [
            ("units".to_string(), "accepted".to_string(), 1),
            ("format".to_string(), "accepted".to_string(), 2),
            ("docs".to_string(), "accepted".to_string(), 1),
        ]
    );
    assert!(doc["pullRequest"].as_u64().is_some(), "{doc}");
    assert_eq!(doc["demo"]["descriptionViolations"], serde_json::json!([]));
    assert!(stderr.contains("epic #1 done:"), "{stderr}");
    assert!(
        demo.join("repo/.supervisor/runs/epics/1/events.jsonl")
            .is_file()
    );
}

/// The demo's run and its review round read each thing once: the revision's pull request and
/// feedback once (the read that finds its issue is its first), and supervisor's comments on the
/// pull request once (the tracking comment and each comment posted there look among them).
#[test]
fn the_demo_reads_the_pull_request_and_its_comments_once_per_round() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let mut spec = supervisor::demo::demo_spec();
        spec.settings
            .insert("trackingComment".into(), serde_json::Value::Bool(true));
        let shutdown = supervisor::workspace::Shutdown::default();
        let (summary, report, sandbox) = supervisor::demo::run_demo(
            dir.path(),
            spec,
            env!("CARGO_BIN_EXE_supervisor").into(),
            &shutdown,
            supervisor::runtime::ProgressMode::Off,
            0,
        )
        .await
        .unwrap();
        use supervisor::pipeline::RunEnd;
        assert!(
            matches!(summary.end, RunEnd::PullRequest { .. }),
            "{:?}",
            summary.end
        );
        let revision = report.revision.as_ref().unwrap();
        assert!(
            matches!(revision.end, RunEnd::Revised { .. }),
            "{:?}",
            revision.end
        );
        let routes = &report.requests_by_route;
        let count = |route: &str| routes.get(route).copied().unwrap_or(0);
        assert_eq!(count("POST /graphql PullFeedback"), 1, "{routes:#?}");
        // The issue's comments, once by the run and once by the revision; the pull request's,
        // once by the revision.
        assert_eq!(
            count("GET /repos/{owner}/{repo}/issues/{number}/comments"),
            3,
            "{routes:#?}"
        );
        assert_eq!(report.description_violations, Vec::<String>::new());
        sandbox.shutdown().await;
    });
}
