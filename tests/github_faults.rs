//! Faults injected into the sandbox: the client retries what GitHub says to retry, waits as long as
//! GitHub asks (within the policy), stops resumably past that, never panics and never loses or
//! repeats a write. And no token text reaches the logs.

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use supervisor::github::{GitHubError, Marker, MarkerKind, Token};
use supervisor::ids::BoardOption;
use supervisor::sandbox::Fault;

const ISSUE: &str = "GET /repos/{owner}/{repo}/issues/{number}";
const COMMENTS: &str = "GET /repos/{owner}/{repo}/issues/{number}/comments";
const POST_COMMENT: &str = "POST /repos/{owner}/{repo}/issues/{number}/comments";
const MOVE: &str = "POST /graphql UpdateItemStatus";

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

#[tokio::test]
async fn a_502_is_retried() {
    within(async {
        let w = World::new().await;
        w.sandbox.inject(Fault::status(ISSUE, 502));
        let issue = w.gh.get_issue(1).await.unwrap();
        assert_eq!(issue.number, 1);
        assert_eq!(w.count(ISSUE), 2);
    })
    .await
}

#[tokio::test]
async fn persistent_5xx_gives_up_after_max_attempts_with_a_transient_error() {
    within(async {
        let w = World::new().await;
        w.sandbox.inject(Fault::status(ISSUE, 503).times(10));
        let e = w.gh.get_issue(1).await.unwrap_err();
        assert_eq!(e.status(), Some(503));
        assert!(e.is_transient() && e.is_resumable() && e.tolerable_mid_flight());
        assert_eq!(w.count(ISSUE), u64::from(quick().max_attempts));
    })
    .await
}

#[tokio::test]
async fn a_timeout_is_retried() {
    within(async {
        let w = World::new().await;
        let gh = w.client_with(|p| p.request_timeout = Duration::from_millis(300));
        w.sandbox
            .inject(Fault::delay(ISSUE, Duration::from_secs(3)));
        let start = Instant::now();
        assert_eq!(gh.get_issue(1).await.unwrap().number, 1);
        assert!(start.elapsed() < Duration::from_secs(3));
        assert_eq!(w.count(ISSUE), 2);
    })
    .await
}

#[tokio::test]
async fn a_comment_lost_in_a_502_is_posted_exactly_once() {
    within(async {
        let w = World::new().await;
        let marker = Marker::new("run-f", "Research", 1, MarkerKind::Stage);
        // GitHub failed before applying the write: it is sent again.
        w.sandbox.inject(Fault::status(POST_COMMENT, 502));
        let posted =
            w.gh.post_once(3, &marker, "findings", Some(&[]))
                .await
                .unwrap();
        assert!(posted.created);
        assert_eq!(w.count(POST_COMMENT), 2);
        let with_marker = |w: &World| {
            w.sandbox
                .snapshot()
                .comments_of(3)
                .iter()
                .filter(|c| marker.is_in(&c.body))
                .count()
        };
        assert_eq!(with_marker(&w), 1);

        // GitHub applied the write and still answered 502: found, not repeated.
        let second = Marker::new("run-f", "Architecture", 1, MarkerKind::Stage);
        w.sandbox
            .inject(Fault::status(POST_COMMENT, 502).after_handler());
        let posted =
            w.gh.post_once(3, &second, "design", Some(&[]))
                .await
                .unwrap();
        assert!(posted.created);
        assert!(second.is_in(&posted.comment.body));
        assert_eq!(w.count(POST_COMMENT), 3, "one more POST, no resend");
        let bodies = w.sandbox.snapshot().comments_of(3).to_vec();
        assert_eq!(bodies.iter().filter(|c| second.is_in(&c.body)).count(), 1);
    })
    .await
}

#[tokio::test]
async fn a_comment_without_marker_is_not_sent_twice() {
    within(async {
        let w = World::new().await;
        w.sandbox
            .inject(Fault::status(POST_COMMENT, 502).after_handler());
        let e = w.gh.create_comment(3, "plain").await.unwrap_err();
        assert_eq!(e.status(), Some(502));
        assert_eq!(w.count(POST_COMMENT), 1);
        assert_eq!(w.sandbox.snapshot().comments_of(3).len(), 1);
    })
    .await
}

#[tokio::test]
async fn a_pull_request_lost_in_a_502_is_found_not_duplicated() {
    within(async {
        let w = World::new().await;
        w.sandbox
            .inject(Fault::status("POST /repos/{owner}/{repo}/pulls", 502).after_handler());
        let (pr, created) =
            w.gh.find_or_create_pr(&supervisor::github::NewPullRequest {
                head: "feature".into(),
                base: "main".into(),
                title: "t".into(),
                body: "b".into(),
                draft: true,
            })
            .await
            .unwrap();
        assert!(created);
        assert!(pr.draft);
        assert_eq!(w.sandbox.snapshot().pulls().len(), 1);
        assert_eq!(w.count("POST /repos/{owner}/{repo}/pulls"), 1);
    })
    .await
}

#[tokio::test]
async fn a_card_move_is_retried_after_a_502() {
    within(async {
        let w = World::new().await;
        let item = w.gh.board_item(&board(), 1).await.unwrap().unwrap();
        w.sandbox.inject(Fault::status("POST /graphql", 502));
        w.gh.move_card(&item, &BoardOption::new("Research"))
            .await
            .unwrap();
        assert_eq!(w.sandbox.snapshot().column_of(1), Some("Research"));
        assert_eq!(w.count(MOVE), 2);
    })
    .await
}

#[tokio::test]
async fn a_403_with_retry_after_is_waited_out() {
    within(async {
        let w = World::new().await;
        w.sandbox.inject(Fault::secondary_limit(ISSUE, 1));
        let start = Instant::now();
        assert_eq!(w.gh.get_issue(1).await.unwrap().number, 1);
        let waited = start.elapsed();
        assert!(waited >= Duration::from_secs(1), "waited {waited:?}");
        assert!(waited < quick().max_wait, "waited {waited:?}");
        assert_eq!(w.count(ISSUE), 2);
    })
    .await
}

#[tokio::test]
async fn a_429_with_retry_after_on_a_write_is_waited_out_without_losing_it() {
    within(async {
        let w = World::new().await;
        w.sandbox
            .inject(Fault::status(POST_COMMENT, 429).header("retry-after", "1"));
        let start = Instant::now();
        let marker = Marker::new("run-429", "Audit", 1, MarkerKind::Stage);
        let posted =
            w.gh.post_once(3, &marker, "audit", Some(&[]))
                .await
                .unwrap();
        assert!(posted.created);
        assert!(start.elapsed() >= Duration::from_secs(1));
        assert_eq!(w.sandbox.snapshot().comments_of(3).len(), 1);
    })
    .await
}

#[tokio::test]
async fn a_retry_after_beyond_the_maximum_stops_resumably_at_once() {
    within(async {
        let w = World::new().await;
        let gh = w.client_with(|p| p.max_wait = Duration::from_secs(2));
        w.sandbox.inject(Fault::secondary_limit(POST_COMMENT, 3600));
        let marker = Marker::new("run-r", "Research", 1, MarkerKind::Stage);
        let start = Instant::now();
        let e = gh
            .post_once(3, &marker, "text", Some(&[]))
            .await
            .unwrap_err();
        assert!(start.elapsed() < Duration::from_secs(1), "did not wait");
        match &e {
            GitHubError::RateLimited {
                secondary,
                retry_after,
                ..
            } => {
                assert!(secondary);
                assert_eq!(*retry_after, Some(Duration::from_secs(3600)));
            }
            other => panic!("expected RateLimited, got {other}"),
        }
        assert!(e.is_resumable());
        assert!(e.to_string().contains("run the same command again"), "{e}");
        // Resuming later posts the write once.
        let posted = gh.post_once(3, &marker, "text", None).await.unwrap();
        assert!(posted.created);
        assert_eq!(w.sandbox.snapshot().comments_of(3).len(), 1);
    })
    .await
}

#[tokio::test]
async fn a_secondary_limit_without_headers_backs_off() {
    within(async {
        let w = World::new().await;
        w.sandbox.inject(
            Fault::status(ISSUE, 403).with_body(serde_json::json!({
                "message": "You have exceeded a secondary rate limit and have been temporarily blocked from content creation.",
                "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"
            })),
        );
        let start = Instant::now();
        assert_eq!(w.gh.get_issue(1).await.unwrap().number, 1);
        assert!(start.elapsed() >= quick().secondary_min_wait);
    })
    .await
}

#[tokio::test]
async fn an_exhausted_quota_is_waited_for_until_its_reset() {
    within(async {
        let w = World::new().await;
        let reset = now() + 1;
        w.sandbox.inject(Fault::quota_exhausted(ISSUE, reset));
        let start = Instant::now();
        assert_eq!(w.gh.get_issue(1).await.unwrap().number, 1);
        let waited = start.elapsed();
        assert!(waited >= Duration::from_millis(900), "waited {waited:?}");
        assert!(waited <= Duration::from_secs(3), "waited {waited:?}");
        assert_eq!(w.count(ISSUE), 2);
    })
    .await
}

#[tokio::test]
async fn an_exhausted_quota_past_the_maximum_stops_resumably_and_sends_nothing_more() {
    within(async {
        let w = World::new().await;
        let gh = w.client_with(|p| p.max_wait = Duration::from_secs(2));
        let reset = now() + 3600;
        w.sandbox.inject(Fault::quota_exhausted(ISSUE, reset));
        let start = Instant::now();
        let e = gh.get_issue(1).await.unwrap_err();
        assert!(start.elapsed() < Duration::from_secs(1));
        match &e {
            GitHubError::RateLimited {
                secondary: false,
                reset_at: Some(at),
                ..
            } => assert_eq!(at.timestamp(), reset),
            other => panic!("expected RateLimited with the reset time, got {other}"),
        }
        assert!(e.is_resumable());
        // The quota is known to be gone: the next request is not even sent.
        let before = w.sandbox.request_total();
        let e = gh.list_comments(1).await.unwrap_err();
        assert!(matches!(e, GitHubError::RateLimited { .. }));
        assert_eq!(w.sandbox.request_total(), before);
    })
    .await
}

#[tokio::test]
async fn a_graphql_rate_limit_answer_is_waited_out() {
    within(async {
        let w = World::new().await;
        let item = w.gh.board_item(&board(), 1).await.unwrap().unwrap();
        w.sandbox.inject(
            Fault::status("POST /graphql UpdateItemStatus", 200)
                .header("x-ratelimit-remaining", "0")
                .header("x-ratelimit-reset", (now() + 1).to_string())
                .with_body(serde_json::json!({
                    "errors": [{"type": "RATE_LIMITED", "message": "API rate limit exceeded for user ID 1."}]
                })),
        );
        let start = Instant::now();
        w.gh.move_card(&item, &BoardOption::new("Audit")).await.unwrap();
        assert!(start.elapsed() >= Duration::from_millis(900));
        assert_eq!(w.sandbox.snapshot().column_of(1), Some("Audit"));
        assert_eq!(w.count(MOVE), 2);
    })
    .await
}

#[tokio::test]
async fn missing_scope_and_missing_issue_on_the_board_are_actionable() {
    within(async {
        let w = World::new().await;
        let gh = client(&w.sandbox, Some(REPO_ONLY), quick());
        let e = gh.board_item(&board(), 1).await.unwrap_err();
        assert!(
            e.to_string()
                .starts_with("GitHub token missing 'project' scope: "),
            "{e}"
        );
        assert!(e.to_string().contains("https://github.com/settings/tokens"));
        assert!(!e.tolerable_mid_flight());
        let e = w.gh.board_item(&board(), 404).await.unwrap_err();
        assert!(
            e.to_string().starts_with("Issue #404 does not exist"),
            "{e}"
        );
    })
    .await
}

#[tokio::test]
async fn mutations_are_spaced() {
    within(async {
        let w = World::new().await;
        let gh = w.client_with(|p| p.min_mutation_interval = Duration::from_millis(300));
        let start = Instant::now();
        gh.create_comment(3, "one").await.unwrap();
        gh.create_comment(3, "two").await.unwrap();
        gh.create_comment(3, "three").await.unwrap();
        assert!(start.elapsed() >= Duration::from_millis(600));
        // Reads are not spaced.
        let start = Instant::now();
        for _ in 0..3 {
            gh.get_issue(3).await.unwrap();
        }
        assert!(start.elapsed() < Duration::from_millis(300));
    })
    .await
}

/// A log sink shared with the subscriber.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn no_token_text_in_trace_logs_debug_output_or_errors() {
    const SECRET: &str = "ghp_SECRETtoken0123456789abcdefXYZ";
    const WRONG: &str = "ghp_WRONGtoken0123456789abcdefXYZ";
    let captured = Captured::default();
    let sink = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || sink.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    // One thread: the server, the client and their connection tasks all log to this subscriber.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut texts: Vec<String> = Vec::new();
    runtime.block_on(within(async {
        let w = World::with(|s| {
            s.tokens.push(supervisor::sandbox::TokenSeed::classic(
                SECRET,
                "alice",
                &["repo"],
            ));
        })
        .await;
        let gh = client(&w.sandbox, Some(SECRET), quick());
        texts.push(format!("{gh:?}"));
        gh.get_issue(1).await.unwrap();
        let marker = Marker::new("run-log", "Research", 1, MarkerKind::Stage);
        gh.post_once(1, &marker, "logged", None).await.unwrap();
        w.sandbox.inject(Fault::status(ISSUE, 502));
        gh.get_issue(1).await.unwrap();
        w.sandbox.inject(Fault::secondary_limit(COMMENTS, 0));
        gh.list_comments(1).await.unwrap();
        // Failures: missing scope, missing issue, refused token.
        texts.push(gh.board_item(&board(), 1).await.unwrap_err().to_string());
        let e = gh.get_issue(99).await.unwrap_err();
        texts.push(e.to_string());
        texts.push(format!("{e:?}"));
        let wrong = client(&w.sandbox, Some(WRONG), quick());
        let e = wrong.get_issue(1).await.unwrap_err();
        texts.push(e.to_string());
        texts.push(format!("{e:?}"));
        let token = Token::new(SECRET).unwrap();
        texts.push(format!("{token:?}"));
        texts.push(format!("{token}"));
        let mut cfg = supervisor::github::ClientConfig::new(
            w.sandbox.url(),
            Some(token),
            supervisor::config::RepoSlug::parse("acme/widgets").unwrap(),
        );
        texts.push(format!("{cfg:?}"));
        cfg.retry = quick();
        texts.push(format!("{:?}", gh.access_token().await.unwrap()));
    }));
    let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(logs.contains("GitHub"), "the capture works: {logs}");
    assert!(
        logs.contains("TRACE") || logs.contains("DEBUG"),
        "trace-level logs were captured"
    );
    for secret in [SECRET, WRONG, "SECRETtoken", "WRONGtoken"] {
        assert!(!logs.contains(secret), "a token reached the logs");
        for t in &texts {
            assert!(!t.contains(secret), "a token reached: {t}");
        }
    }
}
