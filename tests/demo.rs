//! `supervisor demo` end to end: the real binary builds its world, runs the pipeline and prints a PR URL.

use std::process::Command;

#[test]
fn demo_runs_the_whole_pipeline_and_prints_a_pull_request() {
    let dir = tempfile::tempdir().unwrap();
    let demo = dir.path().join("demo");
    let out = Command::new(env!("CARGO_BIN_EXE_supervisor"))
        .args(["demo", "--json", "--dir"])
        .arg(&demo)
        .env_remove("GH_TOKEN")
        .env_remove("GITHUB_TOKEN")
        .env_remove("GITHUB_API_URL")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("pull request   http://127.0.0.1:"),
        "{stderr}"
    );
    let summary: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("stdout holds one JSON document");
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
    // The no-TODO gate needs only git, so the bounce happens on every machine; tools that are
    // missing show as not run, never as passed.
    let first = &summary["gateRounds"][0];
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
        }
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
    let pr = &state.pulls()[0];
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
