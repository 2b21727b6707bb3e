//! `supervisor revise PR` as a subprocess: the real binary against the sandbox GitHub over
//! loopback, a bare repository as `origin`, scripted agents. The codeowner's review is submitted
//! through the sandbox's REST API, as GitHub would receive it.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use supervisor::demo::{World, answer, quick_spec};
use supervisor::github::{ClientConfig, GitHub, Token};

const BIN: &str = env!("CARGO_BIN_EXE_supervisor");

async fn supervisor(world: &World, args: &[&str]) -> (i32, Value, String) {
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.args(args)
        .arg("--repo-root")
        .arg(&world.repo)
        .arg("--json")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (k, _) in std::env::vars() {
        if k.starts_with("SUPERVISOR_")
            || ["GH_TOKEN", "GITHUB_TOKEN", "GITHUB_API_URL"].contains(&k.as_str())
        {
            cmd.env_remove(k);
        }
    }
    cmd.envs(world.env());
    world
        .sandbox
        .check_conformance()
        .expect("the vendored description compiles");
    let out = tokio::time::timeout(Duration::from_secs(120), cmd.output())
        .await
        .expect("finished within 120 s")
        .expect("supervisor ran");
    // Every request supervisor sent and every answer it got conform to GitHub's descriptions.
    if let Err(report) = world.sandbox.conformance_report() {
        panic!("{report}");
    }
    (
        out.status.code().unwrap_or(-1),
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn revise_answers_a_codeowners_review_on_the_same_pull_request() {
    let mut spec = quick_spec();
    // The script's revision attempts: what the developer and the auditor do when revising.
    spec.script["developer@revision"] = json!([[
        { "write": { "path": "src/duration.ts", "content": "export const WEEK = 604800;\n" } },
        { "final": answer("Done.", json!({ "action": "COMPLETE", "agentName": "developer" })) }
    ]]);
    spec.script["auditor@revision"] = spec.script["auditor"].clone();
    let dir = tempfile::tempdir().unwrap();
    let world = World::build(dir.path(), spec).await.expect("world builds");

    let (code, summary, stderr) = supervisor(&world, &["run", "1"]).await;
    assert_eq!(code, 0, "{stderr}");
    let pr = summary["end"]["number"].as_u64().unwrap();

    // Before any review: nothing to revise, nothing written.
    let (code, summary, stderr) = supervisor(&world, &["revise", &pr.to_string()]).await;
    assert_eq!(
        (code, summary["end"]["kind"].as_str()),
        (0, Some("nothing-to-revise")),
        "{stderr}"
    );

    let reviewer = GitHub::new(ClientConfig::new(
        world.sandbox.url(),
        Some(Token::new(world.spec.reviewer_token()).unwrap()),
        supervisor::config::RepoSlug::parse("demo-org/durations").unwrap(),
    ))
    .unwrap();
    reviewer
        .submit_review(
            pr,
            "REQUEST_CHANGES",
            "Add weeks.",
            &[("src/duration.ts", 1, "A week constant here, please.")],
        )
        .await
        .unwrap();
    // Two more comments make the thread three long; the revision answers the first (GitHub takes
    // no reply to a reply), whichever comment asked last.
    let top = world
        .sandbox
        .with_state(|s| s.pull(pr).unwrap().review_comments[0].id);
    for more in ["And a day constant.", "Both exported."] {
        reviewer.reply_in_thread(pr, top, more).await.unwrap();
    }

    let (code, summary, _) = supervisor(&world, &["revise", &pr.to_string(), "--dry-run"]).await;
    assert_eq!(
        (code, summary["end"]["kind"].as_str()),
        (0, Some("dry-run"))
    );

    let (code, summary, stderr) = supervisor(&world, &["revise", &pr.to_string()]).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(summary["end"]["kind"], "revised", "{summary}");
    let sha = summary["end"]["sha"].as_str().unwrap().to_string();
    world.sandbox.with_state(|s| {
        let p = s.pull(pr).unwrap();
        let root = p
            .review_comments
            .iter()
            .find(|c| c.in_reply_to.is_none())
            .unwrap();
        assert_eq!(root.resolved_by.as_deref(), Some("supervisor-bot"));
        let replies: Vec<_> = p
            .review_comments
            .iter()
            .filter(|c| c.in_reply_to == Some(root.id) && c.author == "supervisor-bot")
            .collect();
        assert_eq!(replies.len(), 1, "{:#?}", p.review_comments);
        assert!(replies[0].body.starts_with(&format!("Addressed in {sha}.")));
        assert!(
            p.body.contains(&format!("supervisor-head: {sha}")),
            "{}",
            p.body
        );
        assert_eq!(s.pulls().len(), 1);
    });
    let head = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(&world.remote)
        .args(["rev-parse", "worktree-git-issue-1"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&head.stdout).trim(),
        sha,
        "pushed on the pull request's branch"
    );

    // The feedback is answered: asking again changes nothing.
    let (code, summary, stderr) = supervisor(&world, &["revise", &pr.to_string()]).await;
    assert_eq!(
        (code, summary["end"]["kind"].as_str()),
        (0, Some("nothing-to-revise")),
        "{stderr}"
    );
    world.sandbox.shutdown().await;
}

const BRANCH: &str = "worktree-git-issue-1";

/// Someone else's commit of `path` on the pull request's branch, pushed to the bare `remote`.
fn push_as_someone_else(remote: &std::path::Path, path: &str, content: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let clone = dir.path().join("c");
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args([
                "-c",
                "user.name=Carol",
                "-c",
                "user.email=carol@example.com",
            ])
            .args(args)
            .current_dir(if clone.exists() { &clone } else { dir.path() })
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    git(&[
        "clone",
        "-q",
        "--branch",
        BRANCH,
        &remote.display().to_string(),
        "c",
    ]);
    let file = clone.join(path);
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, content).unwrap();
    git(&["add", "-A"]);
    git(&["commit", "-qm", "Carol's change"]);
    git(&["push", "-q", "origin", BRANCH]);
    git(&["rev-parse", "HEAD"])
}

fn remote_head(world: &World) -> String {
    let out = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(&world.remote)
        .args(["rev-parse", BRANCH])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn is_ancestor(world: &World, old: &str, new: &str) -> bool {
    std::process::Command::new("git")
        .arg("--git-dir")
        .arg(&world.remote)
        .args(["merge-base", "--is-ancestor", old, new])
        .status()
        .unwrap()
        .success()
}

/// A world whose pull request is open and has a codeowner's change request; the developer's
/// revision runs `before` (a shell command) and then rewrites src/duration.ts.
async fn reviewed_world(dir: &std::path::Path, before: Option<String>) -> (World, u64) {
    let mut steps = vec![];
    if let Some(command) = before {
        steps.push(json!({ "run": { "command": command } }));
    }
    steps.push(json!({ "write": { "path": "src/duration.ts", "content": "export const WEEK = 604800;\n" } }));
    steps.push(json!({ "final": answer("Done.", json!({ "action": "COMPLETE", "agentName": "developer" })) }));
    reviewed_world_with(dir, steps).await
}

/// A world whose pull request is open and has a codeowner's change request; the developer's
/// revision takes `steps`.
async fn reviewed_world_with(dir: &std::path::Path, steps: Vec<Value>) -> (World, u64) {
    let mut spec = quick_spec();
    spec.script["developer@revision"] = json!([steps]);
    spec.script["auditor@revision"] = spec.script["auditor"].clone();
    let world = World::build(dir, spec).await.expect("world builds");
    let (code, summary, stderr) = supervisor(&world, &["run", "1"]).await;
    assert_eq!(code, 0, "{stderr}");
    let pr = summary["end"]["number"].as_u64().unwrap();
    let reviewer = GitHub::new(ClientConfig::new(
        world.sandbox.url(),
        Some(Token::new(world.spec.reviewer_token()).unwrap()),
        supervisor::config::RepoSlug::parse("demo-org/durations").unwrap(),
    ))
    .unwrap();
    reviewer
        .submit_review(pr, "REQUEST_CHANGES", "Add weeks.", &[])
        .await
        .unwrap();
    (world, pr)
}

#[tokio::test]
async fn commits_others_pushed_to_the_branch_are_kept_and_a_conflicting_push_stops_the_revision() {
    // Carol pushed to the pull request's branch after supervisor: the revision continues her
    // history instead of pushing over it.
    let dir = tempfile::tempdir().unwrap();
    let (world, pr) = reviewed_world(dir.path(), None).await;
    let carol = push_as_someone_else(&world.remote, "docs/note.md", "A note.\n");
    let (code, summary, stderr) = supervisor(&world, &["revise", &pr.to_string()]).await;
    assert_eq!(
        (code, summary["end"]["kind"].as_str()),
        (0, Some("revised")),
        "{stderr}"
    );
    let head = remote_head(&world);
    assert_eq!(summary["end"]["sha"].as_str(), Some(head.as_str()));
    assert!(is_ancestor(&world, &carol, &head), "Carol's commit is kept");
    world.sandbox.shutdown().await;

    // Carol pushes a change to the same file while the revision works: nothing is pushed over
    // it, and the stop names the file.
    let dir = tempfile::tempdir().unwrap();
    let remote = dir.path().join("remote.git");
    let push = format!(
        "d=$(mktemp -d) && git clone -q --branch {BRANCH} {remote} $d/c && cd $d/c && \
         printf 'export const WEEK = 7;\\n' > src/duration.ts && git add -A && \
         git -c user.name=Carol -c user.email=carol@example.com commit -qm theirs && git push -q origin {BRANCH} && git rev-parse HEAD > {sha}",
        remote = remote.display(),
        sha = dir.path().join("carol.sha").display()
    );
    let (world, pr) = reviewed_world(dir.path(), Some(push)).await;
    let (code, summary, stderr) = supervisor(&world, &["revise", &pr.to_string()]).await;
    assert_ne!(code, 0, "{summary}");
    let carol = std::fs::read_to_string(dir.path().join("carol.sha")).expect("Carol pushed");
    assert_eq!(
        remote_head(&world),
        carol.trim(),
        "nothing pushed over Carol's commit"
    );
    let text = summary.to_string();
    assert!(
        text.contains("conflicts with it in src/duration.ts"),
        "{text}\n{stderr}"
    );
    world.sandbox.shutdown().await;
}

/// `supervisor runs why` in text, as a person reads it (stdout).
async fn why(world: &World, run: &str) -> String {
    let out = tokio::process::Command::new(BIN)
        .args(["runs", "why", run, "--repo-root"])
        .arg(&world.repo)
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A revision that stopped goes on as a revision: `runs why` names the pull request, where its card
/// is and `supervisor revise PR` (`supervisor run` would refuse while a revision is unfinished, and
/// start the pipeline otherwise), and `revise --dry-run` plans the revision, not a run.
#[tokio::test]
async fn a_stopped_revision_is_taken_up_again_with_supervisor_revise() {
    // The developer's revision changes nothing: the revision stops for a human.
    let dir = tempfile::tempdir().unwrap();
    let done = json!({ "action": "COMPLETE", "agentName": "developer" });
    let steps = vec![json!({ "final": answer("Nothing to change.", done) })];
    let (world, pr) = reviewed_world_with(dir.path(), steps).await;
    let (code, summary, stderr) = supervisor(&world, &["revise", &pr.to_string()]).await;
    assert_eq!(summary["end"]["kind"], "stopped", "{summary}\n{stderr}");
    assert_ne!(code, 0);
    let card = world
        .sandbox
        .with_state(|s| s.column_of(1).map(String::from))
        .expect("the card is on the board");
    assert_eq!(card, "Audit", "the revision's column");

    let text = why(&world, "1").await;
    assert!(text.starts_with(&format!("revision 1-rev{pr}-")), "{text}");
    assert!(
        text.contains(&format!("of pull request #{pr} (issue #1): stopped")),
        "{text}"
    );
    assert!(
        text.contains("where:  Implementation (card in Audit)"),
        "{text}"
    );
    assert!(text.contains("then revise again"), "{text}");
    assert!(
        text.trim_end()
            .ends_with(&format!("supervisor revise {pr}")),
        "{text}"
    );
    assert!(!text.contains("supervisor run"), "{text}");

    let (code, summary, stderr) =
        supervisor(&world, &["revise", &pr.to_string(), "--dry-run"]).await;
    assert_eq!(code, 0, "{stderr}");
    let plan: Vec<&str> = summary["end"]["plan"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert_eq!(
        plan[0],
        format!("revise pull request #{pr}; the card (in Audit) goes to Audit while it works"),
        "{plan:#?}"
    );
    assert!(
        plan[1].starts_with("Implementation: run developer"),
        "{plan:#?}"
    );
    assert!(
        plan.contains(
            &"answer the review threads, rewrite the pull request's body and move the card to Done"
        ),
        "{plan:#?}"
    );
    assert!(
        !plan.iter().any(|s| s.contains("open the pull request")),
        "{plan:#?}"
    );
    world.sandbox.shutdown().await;
}

/// The tracking comments on GitHub issue or pull request `number`: the run id each names.
fn tracking_runs(world: &World, number: u64) -> Vec<String> {
    world.sandbox.with_state(|s| {
        s.comments_of(number)
            .iter()
            .filter(|c| c.author == "supervisor-bot")
            .filter_map(|c| {
                let m = supervisor::github::Marker::parse_all(&c.body)
                    .into_iter()
                    .find(|m| m.kind == supervisor::github::MarkerKind::Tracking)?;
                Some(m.run)
            })
            .collect()
    })
}

/// A revision keeps a tracking comment of its own, on the pull request it revises: the issue's
/// stays the run's. The body it rewrites counts the whole history: the run's rejection too.
#[tokio::test]
async fn a_revision_keeps_its_own_tracking_comment_and_the_runs_counts() {
    let mut spec = quick_spec();
    spec.settings.insert("trackingComment".into(), json!(true));
    let approve = spec.script["auditor"][0].clone();
    let reject = json!([{ "final": answer("Reviewed.", json!({ "action": "REJECTED", "agentName": "auditor",
        "commentBody": "## Audit Rejected\n\nNot yet.",
        "findings": [{ "severity": "warning", "dimension": "completeness", "message": "hours are not documented" }] })) }]);
    spec.script["auditor"] = json!([reject, approve]);
    spec.script["developer@revision"] = json!([[
        { "write": { "path": "src/duration.ts", "content": "export const WEEK = 604800;\n" } },
        { "final": answer("Done.", json!({ "action": "COMPLETE", "agentName": "developer" })) }
    ]]);
    spec.script["auditor@revision"] = json!([approve]);
    let dir = tempfile::tempdir().unwrap();
    let world = World::build(dir.path(), spec).await.expect("world builds");
    let (code, summary, stderr) = supervisor(&world, &["run", "1"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(summary["rejections"], 1, "{summary}");
    let pr = summary["end"]["number"].as_u64().unwrap();
    let run = summary["runId"].as_str().unwrap().to_string();
    let body = world
        .sandbox
        .with_state(|s| s.pull(pr).unwrap().body.clone());
    assert!(
        body.contains("_Reviewed by supervisor after 1 rejection and"),
        "{body}"
    );
    assert_eq!(tracking_runs(&world, 1), std::slice::from_ref(&run));

    let reviewer = GitHub::new(ClientConfig::new(
        world.sandbox.url(),
        Some(Token::new(world.spec.reviewer_token()).unwrap()),
        supervisor::config::RepoSlug::parse("demo-org/durations").unwrap(),
    ))
    .unwrap();
    reviewer
        .submit_review(pr, "REQUEST_CHANGES", "Add weeks.", &[])
        .await
        .unwrap();
    let (code, summary, stderr) = supervisor(&world, &["revise", &pr.to_string()]).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(summary["end"]["kind"], "revised", "{summary}");
    let revision = summary["runId"].as_str().unwrap().to_string();
    assert!(revision.contains("-rev"), "{revision}");
    // The tracking comment is still the run's; the revision's is on the pull request.
    assert_eq!(tracking_runs(&world, 1), [run]);
    assert_eq!(tracking_runs(&world, pr), [revision]);
    let body = world
        .sandbox
        .with_state(|s| s.pull(pr).unwrap().body.clone());
    assert!(
        body.contains("_Reviewed by supervisor after 1 rejection and"),
        "the rewritten body counts the run's rejection: {body}"
    );
    world.sandbox.shutdown().await;
}

/// With a personal token the codeowner owns supervisor's pull requests: GitHub refuses their
/// "Request changes", so a `/supervisor revise …` comment (or a Comment review) is how they ask, and
/// it is taken although supervisor posts as the same account.
#[tokio::test]
async fn a_codeowner_whose_token_opened_the_pull_request_revises_with_a_comment() {
    let mut spec = quick_spec();
    spec.bot = spec.codeowner.clone();
    spec.script["developer@revision"] = json!([[
        { "write": { "path": "src/duration.ts", "content": "export const WEEK = 604800;\n" } },
        { "final": answer("Done.", json!({ "action": "COMPLETE", "agentName": "developer" })) }
    ]]);
    spec.script["auditor@revision"] = spec.script["auditor"].clone();
    let dir = tempfile::tempdir().unwrap();
    let world = World::build(dir.path(), spec).await.expect("world builds");
    let (code, summary, stderr) = supervisor(&world, &["run", "1"]).await;
    assert_eq!(code, 0, "{stderr}");
    let pr = summary["end"]["number"].as_u64().unwrap();

    let owner = GitHub::new(ClientConfig::new(
        world.sandbox.url(),
        Some(Token::new(world.token.clone()).unwrap()),
        supervisor::config::RepoSlug::parse("demo-org/durations").unwrap(),
    ))
    .unwrap();
    let refused = owner
        .submit_review(pr, "REQUEST_CHANGES", "Add weeks.", &[])
        .await
        .expect_err("GitHub refuses changes requested on one's own pull request");
    assert!(
        refused.to_string().contains("own pull request"),
        "{refused}"
    );
    owner
        .create_comment(pr, "/supervisor revise also accept weeks")
        .await
        .unwrap();

    let (code, summary, stderr) = supervisor(&world, &["revise", &pr.to_string()]).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(summary["end"]["kind"], "revised", "{summary}\n{stderr}");
    let prompt = std::fs::read_dir(world.runs_dir())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains("-rev"))
        .flat_map(|e| {
            std::fs::read_dir(e.path().join("prompts"))
                .unwrap()
                .flatten()
        })
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .find(|p| p.contains("also accept weeks"));
    assert!(prompt.is_some(), "the developer's task holds the request");
    world.sandbox.shutdown().await;
}
