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
    let out = tokio::time::timeout(Duration::from_secs(120), cmd.output())
        .await
        .expect("finished within 120 s")
        .expect("supervisor ran");
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
            .filter(|c| c.in_reply_to == Some(root.id))
            .collect();
        assert_eq!(replies.len(), 1);
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
