//! The CI gate against the sandbox GitHub over loopback, through the same adapter the pipeline uses:
//! success, failure, pending at the timeout, no checks, and push recovery.

use std::sync::Arc;
use std::time::Duration;

use supervisor::config::{GateKind, Hook};
use supervisor::demo::{World, demo_spec, git};
use supervisor::gates::{
    CiContext, GateContext, GateReport, GateStatus, NotRunCause, default_hook, run_gate,
};
use supervisor::github::{ClientConfig, GitHub, Token};
use supervisor::pipeline::{GitHubChecks, Project};
use supervisor::sandbox::{CheckRunSeed, Fault};
use supervisor::workspace::{PushAuth, WorkspaceConfig, Worktree, ensure_worktree};

struct Setup {
    _dir: tempfile::TempDir,
    world: World,
    wt: Worktree,
    sha: String,
}

impl Drop for Setup {
    /// Every exchange of every test conforms to GitHub's published descriptions.
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        if let Err(report) = self.world.sandbox.conformance_report() {
            panic!("{report}");
        }
    }
}

/// A world with a worktree holding one commit (not pushed unless `push`).
async fn setup(push: bool) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = demo_spec();
    spec.auto_checks.clear();
    let world = World::build(dir.path(), spec).await.unwrap();
    world
        .sandbox
        .check_conformance()
        .expect("the vendored description compiles");
    let project = Project::load(&world.repo, &|_| None).unwrap();
    let ws = WorkspaceConfig::from_settings(&world.repo, &project.settings);
    let wt = ensure_worktree(&ws, 1).unwrap();
    std::fs::write(wt.path.join("src/hours.ts"), "export const hour = 3600;\n").unwrap();
    let sha = wt
        .commit_all("#1: hours")
        .unwrap()
        .expect("a change to commit");
    if push {
        wt.push(&PushAuth::None).unwrap();
    }
    Setup {
        _dir: dir,
        world,
        wt,
        sha,
    }
}

fn seed(s: &Setup, runs: &[(&str, &str, Option<&str>)]) {
    let runs: Vec<CheckRunSeed> = runs
        .iter()
        .map(|(name, status, conclusion)| CheckRunSeed {
            name: name.to_string(),
            status: status.to_string(),
            conclusion: conclusion.map(str::to_string),
            html_url: Some(format!("https://ci.example/{name}")),
        })
        .collect();
    s.world.sandbox.with_state(|st| {
        st.check_runs.insert(s.sha.clone(), runs);
    });
}

async fn ci_gate(s: &Setup, timeout: Duration) -> GateReport {
    ci_gate_for(s, timeout, &default_hook(GateKind::Ci)).await
}

/// A `required` CI hook: a CI status that cannot be established must block it.
fn required_ci() -> Hook {
    let mut hook = default_hook(GateKind::Ci);
    hook.required = true;
    hook
}

async fn ci_gate_for(s: &Setup, timeout: Duration, hook: &Hook) -> GateReport {
    let token = Token::new(s.world.token.clone()).unwrap();
    let gh = GitHub::new(ClientConfig::new(
        s.world.sandbox.url(),
        Some(token),
        supervisor::config::RepoSlug::parse("demo-org/durations").unwrap(),
    ))
    .unwrap();
    let mut ctx = GateContext::for_checkout(&s.wt.path, "main").unwrap();
    ctx.ci = Some(CiContext {
        head_sha: s.sha.clone(),
        timeout,
        interval: Duration::from_millis(100),
        source: Arc::new(GitHubChecks::new(
            gh,
            s.wt.clone(),
            PushAuth::None,
            tokio_util::sync::CancellationToken::new(),
        )),
    });
    tokio::time::timeout(Duration::from_secs(30), run_gate(hook, &ctx))
        .await
        .expect("the CI gate finishes")
}

fn check_run_requests(s: &Setup) -> u64 {
    s.world
        .sandbox
        .request_counts()
        .iter()
        .filter(|(route, _)| route.contains("check-runs"))
        .map(|(_, n)| n)
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_checks_successful_pass() {
    let s = setup(true).await;
    seed(
        &s,
        &[
            ("build", "completed", Some("success")),
            ("lint", "completed", Some("skipped")),
        ],
    );
    let r = ci_gate(&s, Duration::from_secs(5)).await;
    assert_eq!(r.status, GateStatus::Pass, "{r:?}");
    assert_eq!(check_run_requests(&s), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_check_fails_with_its_name_and_url() {
    let s = setup(true).await;
    seed(
        &s,
        &[
            ("build", "completed", Some("success")),
            ("tests", "completed", Some("failure")),
        ],
    );
    let r = ci_gate(&s, Duration::from_secs(5)).await;
    assert_eq!(r.status, GateStatus::Fail, "{r:?}");
    let text = serde_json::to_string(&r.findings).unwrap();
    assert!(text.contains("tests"), "{text}");
    assert!(text.contains("https://ci.example/tests"), "{text}");
    assert!(
        !text.contains("\"build\""),
        "passing checks are not findings: {text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checks_pending_at_the_timeout_are_not_run_and_polls_are_conditional() {
    let s = setup(true).await;
    seed(&s, &[("build", "in_progress", None)]);
    let r = ci_gate(&s, Duration::from_millis(700)).await;
    assert!(matches!(r.status, GateStatus::NotRun { .. }), "{r:?}");
    assert_eq!(r.not_run_cause(), Some(NotRunCause::Pending));
    assert!(!r.blocks(), "optional: the audit proceeds");
    assert!(
        r.summary.contains("1 of 1 checks still pending"),
        "{}",
        r.summary
    );
    // Several polls of one unchanged state: the sandbox answered the repeats with 304.
    assert!(
        check_run_requests(&s) >= 3,
        "{:?}",
        s.world.sandbox.request_counts()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_checks_is_not_applicable() {
    let s = setup(true).await;
    let r = ci_gate(&s, Duration::from_millis(300)).await;
    assert_eq!(r.status, GateStatus::NotApplicable, "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_missing_on_the_remote_is_pushed_then_checked() {
    let s = setup(false).await;
    let on_remote = git(&s.world.remote, &["cat-file", "-t", &s.sha]).is_ok();
    assert!(!on_remote, "the commit starts out local only");
    seed(&s, &[("build", "completed", Some("success"))]);
    let r = ci_gate(&s, Duration::from_secs(5)).await;
    assert_eq!(r.status, GateStatus::Pass, "{r:?}");
    assert_eq!(
        git(&s.world.remote, &["cat-file", "-t", &s.sha]).unwrap(),
        "commit"
    );
}

const CHECK_RUNS: &str = "GET /repos/{owner}/{repo}/commits/{ref}/check-runs";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_required_ci_gate_blocks_when_the_token_may_not_read_check_runs() {
    let s = setup(true).await;
    seed(&s, &[("build", "completed", Some("success"))]);
    s.world.sandbox.inject(
        Fault::status(CHECK_RUNS, 403)
            .with_body(serde_json::json!({
                "message": "Resource not accessible by integration",
                "documentation_url": "https://docs.github.com/rest/checks/runs#list-check-runs-for-a-git-reference",
                "status": "403"
            }))
            .times(100),
    );
    let r = ci_gate_for(&s, Duration::from_secs(5), &required_ci()).await;
    assert!(
        matches!(r.status, GateStatus::NotRun { .. }),
        "an unreadable CI status is not a verdict: {r:?}"
    );
    assert!(r.blocks(), "required and unknown blocks: {r:?}");
    assert!(
        r.status.label().contains("Checks: read"),
        "the missing permission is named: {r:?}"
    );
    assert_eq!(r.not_run_cause(), Some(NotRunCause::Denied));
    assert_eq!(
        check_run_requests(&s),
        1,
        "a refusal is not retried: {:?}",
        s.world.sandbox.request_counts()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_required_ci_gate_blocks_when_the_rate_limit_outlasts_the_wait() {
    let s = setup(true).await;
    seed(&s, &[("build", "completed", Some("success"))]);
    s.world
        .sandbox
        .inject(Fault::secondary_limit(CHECK_RUNS, 3600).times(100));
    let r = ci_gate_for(&s, Duration::from_secs(5), &required_ci()).await;
    assert!(matches!(r.status, GateStatus::NotRun { .. }), "{r:?}");
    assert!(r.blocks(), "required and unknown blocks: {r:?}");
    assert_eq!(
        r.not_run_cause(),
        Some(NotRunCause::Transient),
        "a rate limit passes with time: {r:?}"
    );
    assert_eq!(
        check_run_requests(&s),
        1,
        "GitHub set the wait; the gate does not ask again: {:?}",
        s.world.sandbox.request_counts()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_required_ci_gate_blocks_when_checks_are_pending_at_the_timeout() {
    let s = setup(true).await;
    seed(&s, &[("build", "in_progress", None)]);
    let r = ci_gate_for(&s, Duration::from_millis(500), &required_ci()).await;
    assert!(matches!(r.status, GateStatus::NotRun { .. }), "{r:?}");
    assert!(r.blocks(), "required and still pending blocks: {r:?}");
    assert_eq!(r.not_run_cause(), Some(NotRunCause::Pending));
    assert!(
        r.summary.contains("1 of 1 checks still pending"),
        "{}",
        r.summary
    );
}
