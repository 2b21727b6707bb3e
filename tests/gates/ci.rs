//! The CI gate against an in-test GitHub: stateful check runs that progress with each poll, ETags and
//! 304s, a commit that reaches the remote only after a push, API errors of each kind. A CI status that
//! cannot be established is never a verdict: not run, with a cause, blocking when required.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use supervisor::config::{GateKind, Hook};
use supervisor::gates::{
    BoxFuture, CiContext, CiError, CiPoll, CiRun, CiSource, GateContext, GateReport, GateStatus,
    NotRunCause, default_hook, run_gate,
};

use crate::common::{Fixture, run_bounded};

const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

/// What the fake GitHub knows.
#[derive(Default)]
struct State {
    /// Check runs as they look after each poll: poll n sees `timeline[min(n, len-1)]`.
    timeline: Vec<Vec<CiRun>>,
    polls: usize,
    /// Conditional requests answered 304.
    not_modified: usize,
    /// Requests that carried an ETag.
    conditional: usize,
    /// The remote has the commit.
    visible: bool,
    /// Check-run requests answered "No commit found".
    missing_asked: usize,
    /// Requests asking only whether the remote has the commit.
    visibility_asked: usize,
    /// Pushes that still do not make it visible.
    pushes_before_visible: usize,
    pushes: usize,
    /// Poll numbers (0-based) that fail with an API error.
    errors_at: Vec<usize>,
    /// The error those polls fail with (default: a transient 502).
    error: Option<CiError>,
    /// Why pushes fail (default: rejected, try again).
    push_error: Option<CiError>,
}

#[derive(Clone, Default)]
struct FakeGitHub(Arc<Mutex<State>>);

fn run(name: &str, status: &str, conclusion: Option<&str>) -> CiRun {
    CiRun {
        name: name.into(),
        status: status.into(),
        conclusion: conclusion.map(str::to_string),
        url: Some(format!("https://github.example/checks/{name}")),
    }
}

impl CiSource for FakeGitHub {
    fn check_runs<'a>(
        &'a self,
        sha: &'a str,
        etag: Option<&'a str>,
    ) -> BoxFuture<'a, Result<CiPoll, CiError>> {
        Box::pin(async move {
            let mut s = self.0.lock().unwrap();
            assert_eq!(sha, SHA);
            if !s.visible {
                // GitHub answers 422 for a sha it does not have.
                s.missing_asked += 1;
                return Err(CiError::CommitMissing(format!(
                    "GitHub API error 422: No commit found for SHA: {SHA}"
                )));
            }
            let n = s.polls;
            s.polls += 1;
            if s.errors_at.contains(&n) {
                return Err(s
                    .error
                    .clone()
                    .unwrap_or_else(|| CiError::Transient("HTTP 502 from api.github.com".into())));
            }
            let idx = n.min(s.timeline.len().saturating_sub(1));
            let runs = s.timeline.get(idx).cloned().unwrap_or_default();
            // The ETag is a digest of the answer, as GitHub's is.
            let tag = format!("\"{:x}\"", fingerprint(&runs));
            if let Some(sent) = etag {
                s.conditional += 1;
                if sent == tag {
                    s.not_modified += 1;
                    return Ok(CiPoll::NotModified);
                }
            }
            Ok(CiPoll::Runs {
                runs,
                etag: Some(tag),
            })
        })
    }

    fn commit_visible<'a>(&'a self, sha: &'a str) -> BoxFuture<'a, Result<bool, CiError>> {
        Box::pin(async move {
            assert_eq!(sha, SHA);
            let mut s = self.0.lock().unwrap();
            s.visibility_asked += 1;
            Ok(s.visible)
        })
    }

    fn push<'a>(&'a self) -> BoxFuture<'a, Result<(), CiError>> {
        Box::pin(async move {
            let mut s = self.0.lock().unwrap();
            s.pushes += 1;
            if s.pushes > s.pushes_before_visible {
                s.visible = true;
                Ok(())
            } else {
                Err(s.push_error.clone().unwrap_or_else(|| {
                    CiError::Other("remote rejected the push: try again".into())
                }))
            }
        })
    }
}

fn fingerprint(runs: &[CiRun]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for r in runs {
        (&r.name, &r.status, &r.conclusion).hash(&mut h);
    }
    h.finish()
}

fn gate(fake: &FakeGitHub, timeout: Duration) -> (GateReport, Fixture) {
    gate_for(fake, timeout, &default_hook(GateKind::Ci))
}

fn required_ci() -> Hook {
    let mut hook = default_hook(GateKind::Ci);
    hook.required = true;
    hook
}

fn gate_for(fake: &FakeGitHub, timeout: Duration, hook: &Hook) -> (GateReport, Fixture) {
    let fixture = Fixture::new("ts-base");
    let mut ctx: GateContext = fixture.context();
    ctx.ci = Some(CiContext {
        head_sha: SHA.into(),
        timeout,
        interval: Duration::from_millis(2),
        source: Arc::new(fake.clone()),
    });
    let report = run_bounded(30, async { run_gate(hook, &ctx).await });
    (report, fixture)
}

fn fake(timeline: Vec<Vec<CiRun>>) -> FakeGitHub {
    FakeGitHub(Arc::new(Mutex::new(State {
        timeline,
        visible: true,
        ..State::default()
    })))
}

#[test]
fn all_checks_succeed_after_pending_polls_with_etags() {
    let pending = vec![
        run("build", "in_progress", None),
        run("lint", "queued", None),
    ];
    let halfway = vec![
        run("build", "in_progress", None),
        run("lint", "completed", Some("success")),
    ];
    let done = vec![
        run("build", "completed", Some("success")),
        run("lint", "completed", Some("skipped")),
    ];
    let gh = fake(vec![
        pending.clone(),
        pending,
        halfway.clone(),
        halfway,
        done,
    ]);
    let (r, _f) = gate(&gh, Duration::from_secs(10));
    assert_eq!(r.status, GateStatus::Pass, "{r:#?}");
    assert_eq!(r.summary, "all 2 checks passed on 0123456789");
    let s = gh.0.lock().unwrap();
    assert_eq!(s.polls, 5);
    assert_eq!(
        s.conditional, 4,
        "every poll after the first sends the ETag"
    );
    assert_eq!(s.not_modified, 2, "unchanged answers come back as 304");
    assert_eq!(
        s.visibility_asked, 0,
        "the check runs answer whether the remote has the commit"
    );
}

#[test]
fn a_failed_check_fails_the_gate_with_its_name_and_url() {
    let gh = fake(vec![
        vec![
            run("build", "in_progress", None),
            run("test", "in_progress", None),
        ],
        vec![
            run("build", "in_progress", None),
            run("test", "completed", Some("failure")),
        ],
    ]);
    let (r, _f) = gate(&gh, Duration::from_secs(10));
    assert_eq!(r.status, GateStatus::Fail, "{r:#?}");
    assert!(r.blocks());
    assert_eq!(r.findings.len(), 1);
    assert_eq!(r.findings[0].rule, "ci-failure");
    assert!(
        r.findings[0]
            .message
            .contains("check `test` concluded failure: https://github.example/checks/test"),
        "{:?}",
        r.findings
    );
    assert!(r.summary.contains("1 of 2 checks failed"), "{}", r.summary);
}

#[test]
fn unknown_conclusions_never_pass() {
    let gh = fake(vec![vec![run(
        "deploy",
        "completed",
        Some("action_required"),
    )]]);
    let (r, _f) = gate(&gh, Duration::from_secs(10));
    assert_eq!(r.status, GateStatus::Fail);
    assert_eq!(r.findings[0].rule, "ci-action-required");
}

#[test]
fn pending_at_the_timeout_is_not_run_and_blocks_only_when_required() {
    let gh = fake(vec![vec![
        run("build", "completed", Some("success")),
        run("e2e", "in_progress", None),
    ]]);
    let (r, _f) = gate(&gh, Duration::from_millis(60));
    assert!(matches!(r.status, GateStatus::NotRun { .. }), "{r:#?}");
    assert_eq!(r.not_run_cause(), Some(NotRunCause::Pending));
    assert!(!r.is_pass());
    assert!(!r.blocks(), "an optional CI gate lets the audit proceed");
    assert_eq!(r.findings.len(), 1);
    assert!(
        r.findings[0]
            .message
            .contains("check `e2e` still in progress"),
        "{:?}",
        r.findings
    );
    assert!(
        r.summary.contains("1 of 2 checks still pending"),
        "{}",
        r.summary
    );

    let (r, _f) = gate_for(&gh, Duration::from_millis(60), &required_ci());
    assert!(
        r.blocks(),
        "a required CI gate still pending blocks: {r:#?}"
    );
}

#[test]
fn no_checks_is_not_applicable() {
    let gh = fake(vec![vec![]]);
    let (r, _f) = gate(&gh, Duration::from_secs(10));
    assert_eq!(r.status, GateStatus::NotApplicable, "{r:#?}");
    assert!(r.summary.contains("CI is not configured"), "{}", r.summary);
    // Runs may appear a moment after the push: more than one poll before concluding.
    assert!(gh.0.lock().unwrap().polls >= 2);
}

#[test]
fn checks_that_appear_late_are_waited_for() {
    let gh = fake(vec![
        vec![],
        vec![run("build", "queued", None)],
        vec![run("build", "completed", Some("success"))],
    ]);
    let (r, _f) = gate(&gh, Duration::from_secs(10));
    assert_eq!(r.status, GateStatus::Pass, "{r:#?}");
}

#[test]
fn a_commit_missing_on_the_remote_is_pushed_again() {
    let gh = fake(vec![vec![run("build", "completed", Some("success"))]]);
    {
        let mut s = gh.0.lock().unwrap();
        s.visible = false;
        s.pushes_before_visible = 1; // the first push fails, the second lands
    }
    let (r, _f) = gate(&gh, Duration::from_secs(10));
    assert_eq!(r.status, GateStatus::Pass, "{r:#?}");
    let s = gh.0.lock().unwrap();
    assert_eq!(s.pushes, 2);
    assert_eq!(
        s.missing_asked, 1,
        "the check runs said the commit is missing"
    );
    assert!(s.visibility_asked >= 2, "then each push is followed up");
}

#[test]
fn a_commit_that_never_reaches_the_remote_is_not_run() {
    let gh = fake(vec![vec![run("build", "completed", Some("success"))]]);
    {
        let mut s = gh.0.lock().unwrap();
        s.visible = false;
        s.pushes_before_visible = 100;
    }
    let (r, _f) = gate_for(&gh, Duration::from_secs(10), &required_ci());
    assert!(matches!(r.status, GateStatus::NotRun { .. }), "{r:#?}");
    assert!(r.blocks(), "required, and CI never saw the commit");
    assert_eq!(
        r.not_run_cause(),
        Some(NotRunCause::Setup),
        "a rejected push needs a person"
    );
    assert_eq!(r.findings[0].rule, "ci-commit-not-pushed");
    assert!(
        r.findings[0].message.contains("after 3 pushes"),
        "{:?}",
        r.findings
    );
    assert!(r.findings[0].message.contains("remote rejected the push"));

    // Pushes that fail for the moment leave a resumable cause.
    let gh = fake(vec![vec![run("build", "completed", Some("success"))]]);
    {
        let mut s = gh.0.lock().unwrap();
        s.visible = false;
        s.pushes_before_visible = 100;
        s.push_error = Some(CiError::Transient("connection reset".into()));
    }
    let (r, _f) = gate(&gh, Duration::from_secs(10));
    assert_eq!(r.not_run_cause(), Some(NotRunCause::Transient), "{r:#?}");
}

#[test]
fn api_errors_are_retried_then_not_run_and_transient() {
    // One transient error is absorbed.
    let gh = fake(vec![vec![run("build", "completed", Some("success"))]]);
    gh.0.lock().unwrap().errors_at = vec![0];
    let (r, _f) = gate(&gh, Duration::from_secs(10));
    assert_eq!(r.status, GateStatus::Pass, "{r:#?}");

    // A persistent one: the status is unknown, never a pass; required, it blocks.
    let gh = fake(vec![vec![run("build", "completed", Some("success"))]]);
    gh.0.lock().unwrap().errors_at = (0..100).collect();
    let (r, _f) = gate_for(&gh, Duration::from_secs(10), &required_ci());
    assert!(matches!(r.status, GateStatus::NotRun { .. }), "{r:#?}");
    assert_eq!(r.not_run_cause(), Some(NotRunCause::Transient));
    assert!(r.summary.contains("HTTP 502"), "{}", r.summary);
    assert!(r.blocks());
    assert_eq!(gh.0.lock().unwrap().polls, 3, "three tries, then give up");
}

#[test]
fn a_rate_limit_or_a_refusal_is_not_asked_again() {
    let cases = [
        (
            CiError::RateLimited("GitHub's API rate limit was hit; run again after 12:00".into()),
            NotRunCause::Transient,
            "rate limit",
        ),
        (
            CiError::PermissionDenied {
                permission: "Checks: read".into(),
                detail: "GitHub API error 403: Resource not accessible by integration".into(),
            },
            NotRunCause::Denied,
            "\"Checks: read\" permission",
        ),
        (
            CiError::NotFound("GitHub API error 404: Not Found".into()),
            NotRunCause::Setup,
            "404",
        ),
    ];
    for (error, cause, text) in cases {
        let gh = fake(vec![vec![run("build", "completed", Some("success"))]]);
        {
            let mut s = gh.0.lock().unwrap();
            s.errors_at = (0..100).collect();
            s.error = Some(error.clone());
        }
        let (r, _f) = gate_for(&gh, Duration::from_secs(10), &required_ci());
        assert_eq!(r.not_run_cause(), Some(cause), "{error:?}: {r:#?}");
        assert!(r.blocks());
        assert!(r.status.label().contains(text), "{}", r.status.label());
        assert_eq!(gh.0.lock().unwrap().polls, 1, "{error:?} is not retried");
    }
}

#[test]
fn disabled_and_unconnected() {
    let gh = fake(vec![]);
    let (r, _f) = gate(&gh, Duration::ZERO);
    assert_eq!(r.status, GateStatus::NotApplicable);
    assert_eq!(r.summary, "ciGatingTimeoutSec is 0: CI is not waited for");
    assert_eq!(gh.0.lock().unwrap().polls, 0);

    let f = Fixture::new("ts-base");
    let ctx = f.context();
    let r = run_bounded(10, async {
        run_gate(&default_hook(GateKind::Ci), &ctx).await
    });
    let GateStatus::NotRun { reason, .. } = &r.status else {
        panic!("{r:#?}")
    };
    assert!(reason.starts_with("no GitHub connection"), "{reason}");
}
