//! The real client against the sandbox GitHub over loopback, one operation at a time, asserting on
//! the sandbox's state afterwards.

mod common;

use common::*;
use supervisor::github::{
    AppCredentials, BlockerKind, ClientConfig, CloseReason, Conditional, GitHub, GitHubError,
    IssueState, Marker, MarkerKind, NewPullRequest,
};
use supervisor::ids::BoardOption;
use supervisor::sandbox::{AppSeed, Sandbox};

const ISSUE: &str = "GET /repos/{owner}/{repo}/issues/{number}";
const COMMENTS: &str = "GET /repos/{owner}/{repo}/issues/{number}/comments";
const POST_COMMENT: &str = "POST /repos/{owner}/{repo}/issues/{number}/comments";

#[tokio::test]
async fn reads_an_issue() {
    within(async {
        let w = World::new().await;
        let issue = w.gh.get_issue(1).await.unwrap();
        assert_eq!(issue.number, 1);
        assert_eq!(issue.title, "Add a --verbose flag");
        assert_eq!(issue.body, "Print more.");
        assert_eq!(issue.author, "alice");
        assert_eq!(issue.labels, vec!["enhancement", "cli"]);
        assert_eq!(issue.state, IssueState::Open);
        assert_eq!(issue.node_id, "I_1");
        assert!(issue.html_url.ends_with("/acme/widgets/issues/1"));
        assert!(!issue.is_pull_request);
        assert_eq!(w.gh.get_issue(2).await.unwrap().state, IssueState::Closed);
        assert_eq!(w.count(ISSUE), 2);
    })
    .await
}

#[tokio::test]
async fn a_missing_issue_is_named() {
    within(async {
        let w = World::new().await;
        let e = w.gh.get_issue(99).await.unwrap_err();
        assert!(matches!(e, GitHubError::IssueNotFound { number: 99, .. }));
        assert!(
            e.to_string()
                .starts_with("Issue #99 does not exist in acme/widgets"),
            "{e}"
        );
        // Not retried: a 404 is an answer.
        assert_eq!(w.count(ISSUE), 1);
        let e = w.gh.board_item(&board(), 99).await.unwrap_err();
        assert!(
            matches!(e, GitHubError::IssueNotFound { number: 99, .. }),
            "{e}"
        );
        let e = w.gh.list_comments(99).await.unwrap_err();
        assert!(
            matches!(e, GitHubError::IssueNotFound { number: 99, .. }),
            "{e}"
        );
    })
    .await
}

#[tokio::test]
async fn lists_250_comments_over_three_pages() {
    within(async {
        let w = World::with(|s| {
            let issue = s.issue_mut(3).unwrap();
            issue.comments = (0..250)
                .map(|i| comment("bob", &format!("comment {i}")))
                .collect();
        })
        .await;
        let comments = w.gh.list_comments(3).await.unwrap();
        assert_eq!(comments.len(), 250);
        assert_eq!(comments[0].body, "comment 0");
        assert_eq!(comments[249].body, "comment 249");
        assert!(comments.windows(2).all(|p| p[0].id < p[1].id));
        assert_eq!(w.count(COMMENTS), 3, "100 + 100 + 50 per page");
    })
    .await
}

#[tokio::test]
async fn comments_are_created_listed_and_updated() {
    within(async {
        let w = World::new().await;
        let c =
            w.gh.create_comment(1, "## Research Findings\n\nnone")
                .await
                .unwrap();
        assert_eq!(c.author, "alice");
        assert!(c.html_url.contains("#issuecomment-"));
        let listed = w.gh.list_comments(1).await.unwrap();
        assert_eq!(listed.len(), 2);
        assert_eq!(listed[1], c);
        let updated = w.gh.update_comment(c.id, "edited").await.unwrap();
        assert_eq!(updated.body, "edited");
        assert_eq!(w.sandbox.snapshot().comments_of(1)[1].body, "edited");
    })
    .await
}

#[tokio::test]
async fn a_marked_comment_is_not_reposted() {
    within(async {
        let w = World::new().await;
        let marker = Marker::new("run-1", "Research", 1, MarkerKind::Stage);
        let first =
            w.gh.post_once(1, &marker, "## Research Findings", None)
                .await
                .unwrap();
        assert!(first.created);
        assert!(marker.is_in(&first.comment.body));
        // A rerun of the same run, stage and attempt finds it on GitHub.
        let again =
            w.gh.post_once(1, &marker, "## Research Findings", None)
                .await
                .unwrap();
        assert!(!again.created);
        assert_eq!(again.comment.id, first.comment.id);
        // With the comments already known, no request at all.
        let known = w.gh.list_comments(1).await.unwrap();
        let before = w.sandbox.request_total();
        let third =
            w.gh.post_once(1, &marker, "## Research Findings", Some(&known))
                .await
                .unwrap();
        assert!(!third.created);
        assert_eq!(w.sandbox.request_total(), before);
        // A new attempt is a new write: exactly one request.
        let next = Marker::new("run-1", "Research", 2, MarkerKind::Stage);
        let posted =
            w.gh.post_once(1, &next, "## Research Findings (2)", Some(&known))
                .await
                .unwrap();
        assert!(posted.created);
        assert_eq!(w.sandbox.request_total(), before + 1);
        let bodies: Vec<String> = w
            .sandbox
            .snapshot()
            .comments_of(1)
            .iter()
            .map(|c| c.body.clone())
            .collect();
        assert_eq!(bodies.iter().filter(|b| marker.is_in(b)).count(), 1);
        assert_eq!(bodies.iter().filter(|b| next.is_in(b)).count(), 1);
        assert_eq!(w.count(POST_COMMENT), 2);
    })
    .await
}

#[tokio::test]
async fn an_overlong_comment_is_cut_to_fit_and_keeps_its_marker() {
    within(async {
        let w = World::new().await;
        let marker = Marker::new("run-long", "Audit", 1, MarkerKind::Stage);
        let long = "x".repeat(70_000);
        let posted = w.gh.post_once(3, &marker, &long, Some(&[])).await.unwrap();
        assert!(marker.is_in(&posted.comment.body));
        assert!(posted.comment.body.chars().count() <= supervisor::github::MAX_BODY_CHARS);
        assert!(posted.comment.body.contains("GitHub's limit"));
        // The sandbox refuses what GitHub refuses.
        let e = w.gh.create_comment(3, &long).await.unwrap_err();
        assert_eq!(e.status(), Some(422));
        assert!(e.to_string().contains("Body is too long"), "{e}");
    })
    .await
}

#[tokio::test]
async fn closes_an_issue_with_one_comment() {
    within(async {
        let w = World::new().await;
        let marker = Marker::new("run-9", "Implementation", 1, MarkerKind::Stopped);
        w.gh.close_issue(3, Some((&marker, "Already resolved.")))
            .await
            .unwrap();
        w.gh.close_issue(3, Some((&marker, "Already resolved.")))
            .await
            .unwrap();
        let snap = w.sandbox.snapshot();
        let issue = snap.issue(3).unwrap();
        assert_eq!(issue.state, supervisor::sandbox::SeedState::Closed);
        assert_eq!(issue.state_reason.as_deref(), Some("completed"));
        assert_eq!(issue.comments.len(), 1);
        assert!(marker.is_in(&issue.comments[0].body));
        assert_eq!(w.gh.get_issue(3).await.unwrap().state, IssueState::Closed);
        let e = w.gh.close_issue(99, None).await.unwrap_err();
        assert!(matches!(e, GitHubError::IssueNotFound { .. }), "{e}");
    })
    .await
}

#[tokio::test]
async fn open_blockers_native_and_from_the_body() {
    within(async {
        let w = World::new().await;
        let issue = w.gh.get_issue(4).await.unwrap();
        let blockers = w.gh.open_blockers(&issue).await.unwrap();
        let found: Vec<(u64, BlockerKind)> = blockers.iter().map(|b| (b.number, b.kind)).collect();
        // #1 natively (open), #2 natively but closed, #3 from the body (open), #99 only inside a
        // code block, #77 does not exist.
        assert_eq!(
            found,
            vec![(1, BlockerKind::Native), (3, BlockerKind::BodyReference)]
        );
        assert_eq!(blockers[0].title, "Add a --verbose flag");
        assert!(blockers[1].url.ends_with("/issues/3"));
        let free = w.gh.get_issue(3).await.unwrap();
        assert!(w.gh.open_blockers(&free).await.unwrap().is_empty());
    })
    .await
}

/// An epic's pieces: issues opened by the client, linked as sub-issues of a parent, blocked by one
/// another, listed back; GitHub's refusals (its own sub-issue, a second parent, a loop, an id of
/// nothing) are 422s the client names.
#[tokio::test]
async fn sub_issues_and_dependencies_are_created_linked_and_listed() {
    within(async {
        let w = World::new().await;
        let epic = w.gh.get_issue(1).await.unwrap();
        let units =
            w.gh.create_issue("Units", "- [ ] d, w, y", &["supervisor".to_string()])
                .await
                .unwrap();
        let docs =
            w.gh.create_issue("Docs", "- [ ] README", &[])
                .await
                .unwrap();
        assert!(units.number > 4 && docs.number == units.number + 1);
        assert!(units.id > 0 && units.id != docs.id);
        assert_eq!(units.author, w.gh.viewer_login().await.unwrap());
        assert_eq!(units.labels, ["supervisor"]);
        // The latest issues supervisor opened, newest first (where it looks for one it opened
        // just before a crash); nobody else's.
        let viewer = w.gh.viewer_login().await.unwrap();
        let mine: Vec<u64> = (w.gh.latest_issues_by(&viewer).await.unwrap().iter())
            .map(|i| i.number)
            .collect();
        assert_eq!(mine[..2], [docs.number, units.number]);
        assert!(w.gh.latest_issues_by("nobody").await.unwrap().is_empty());
        w.gh.add_sub_issue(1, units.id).await.unwrap();
        w.gh.add_sub_issue(1, docs.id).await.unwrap();
        w.gh.add_blocked_by(docs.number, units.id).await.unwrap();
        let subs: Vec<u64> =
            w.gh.sub_issues(1)
                .await
                .unwrap()
                .iter()
                .map(|i| i.number)
                .collect();
        assert_eq!(subs, [units.number, docs.number]);
        // Read again, the issue counts what blocks it: an issue read with nothing blocking it
        // needs no list of its blockers.
        let requests = w.sandbox.request_total();
        assert!(w.gh.open_blockers(&docs).await.unwrap().is_empty());
        assert_eq!(
            w.sandbox.request_total(),
            requests,
            "counted none, asked nothing"
        );
        let docs = w.gh.get_issue(docs.number).await.unwrap();
        assert_eq!(docs.blocked_by_total, Some(1));
        let blockers = w.gh.open_blockers(&docs).await.unwrap();
        assert_eq!(blockers.len(), 1);
        assert_eq!(
            (blockers[0].number, blockers[0].kind),
            (units.number, BlockerKind::Native)
        );
        w.sandbox.with_state(|s| {
            assert_eq!(s.issue(1).unwrap().sub_issues, [units.number, docs.number]);
            assert_eq!(s.parent_of(docs.number), Some(1));
        });
        // What GitHub refuses.
        let refused = |r: Result<(), GitHubError>| match r {
            Err(e) => assert_eq!(e.status(), Some(422), "{e}"),
            Ok(()) => panic!("accepted"),
        };
        refused(w.gh.add_sub_issue(1, epic.id).await);
        refused(w.gh.add_sub_issue(3, units.id).await);
        refused(w.gh.add_sub_issue(units.number, epic.id).await);
        let nothing = supervisor::github::Issue {
            id: 17,
            ..units.clone()
        };
        refused(w.gh.add_sub_issue(1, nothing.id).await);
        refused(w.gh.add_blocked_by(units.number, units.id).await);
    })
    .await
}

/// An epic's re-planning: a task's title and body rewritten (by whoever sends the edit, which
/// `issue_context` then names), a task dropped as not planned, a task's pull request closed
/// unmerged, a dependency removed.
#[tokio::test]
async fn an_issue_is_rewritten_and_the_editor_is_who_sent_it() {
    within(async {
        let w = World::with(|s| {
            s.tokens.push(supervisor::sandbox::TokenSeed::classic(
                "tok-mallory-0123456789",
                "mallory",
                &["repo"],
            ));
        })
        .await;
        assert_eq!(
            w.gh.issue_context(&board(), 3).await.unwrap().editors.issue,
            None
        );
        let mallory = client(&w.sandbox, Some("tok-mallory-0123456789"), quick());
        let edited = mallory
            .update_issue(3, "Docs for --verbose", "- [ ] README\n- [ ] man page")
            .await
            .unwrap();
        assert_eq!(
            (edited.number, edited.title.as_str(), edited.author.as_str()),
            (3, "Docs for --verbose", "alice")
        );
        assert_eq!(edited.body, "- [ ] README\n- [ ] man page");
        let read = w.gh.get_issue(3).await.unwrap();
        assert_eq!(read, edited);
        let editors = w.gh.issue_context(&board(), 3).await.unwrap().editors;
        assert_eq!(editors.issue.as_deref(), Some("mallory"));
        let renames: Vec<(&str, &str, &str)> = editors
            .renames
            .iter()
            .map(|r| (r.actor.as_str(), r.from.as_str(), r.to.as_str()))
            .collect();
        assert_eq!(renames, [("mallory", "Docs", "Docs for --verbose")]);
        // The same title and body again are no edit: mallory stays the last editor.
        w.gh.update_issue(3, "Docs for --verbose", "- [ ] README\n- [ ] man page")
            .await
            .unwrap();
        let editors = w.gh.issue_context(&board(), 3).await.unwrap().editors;
        assert_eq!(editors.issue.as_deref(), Some("mallory"));
        assert_eq!(
            editors.renames.len(),
            1,
            "the same title again is no rename"
        );
        // Rewritten again by the client's own login: the last editor is named.
        w.gh.update_issue(3, "Docs for --verbose", "- [ ] README")
            .await
            .unwrap();
        let editors = w.gh.issue_context(&board(), 3).await.unwrap().editors;
        assert_eq!(editors.issue.as_deref(), Some("alice"));
        let e = w.gh.update_issue(99, "t", "b").await.unwrap_err();
        assert!(
            matches!(e, GitHubError::IssueNotFound { number: 99, .. }),
            "{e}"
        );
    })
    .await
}

#[tokio::test]
async fn an_issue_closed_as_not_planned_keeps_its_reason() {
    within(async {
        let w = World::new().await;
        let marker = Marker::new("run-9", "Epic", 1, MarkerKind::Stopped);
        w.gh.close_issue_as(
            3,
            CloseReason::NotPlanned,
            Some((&marker, "Dropped from the plan.")),
        )
        .await
        .unwrap();
        let snap = w.sandbox.snapshot();
        let issue = snap.issue(3).unwrap();
        assert_eq!(issue.state, supervisor::sandbox::SeedState::Closed);
        assert_eq!(issue.state_reason.as_deref(), Some("not_planned"));
        assert_eq!(issue.comments.len(), 1);
        assert!(marker.is_in(&issue.comments[0].body));
        assert_eq!(w.gh.get_issue(3).await.unwrap().state, IssueState::Closed);
        let answer = raw(
            &w.sandbox.url(),
            "GET",
            "/repos/acme/widgets/issues/3",
            &[],
            "",
        )
        .await
        .json();
        assert_eq!(
            (&answer["state"], &answer["state_reason"]),
            (
                &serde_json::json!("closed"),
                &serde_json::json!("not_planned")
            )
        );
        // `close_issue` still closes as completed.
        w.gh.close_issue(1, None).await.unwrap();
        assert_eq!(
            w.sandbox
                .snapshot()
                .issue(1)
                .unwrap()
                .state_reason
                .as_deref(),
            Some("completed")
        );
        let e =
            w.gh.close_issue_as(99, CloseReason::NotPlanned, None)
                .await
                .unwrap_err();
        assert!(matches!(e, GitHubError::IssueNotFound { .. }), "{e}");
    })
    .await
}

#[tokio::test]
async fn a_closed_pull_request_is_unmerged_and_no_longer_found_open() {
    within(async {
        let w = World::new().await;
        let (pr, _) = w.gh.find_or_create_pr(&new_pr("feature")).await.unwrap();
        let main = w.sandbox.git().branch_sha("main").unwrap();
        w.gh.close_pull(pr.number).await.unwrap();
        let snap = w.sandbox.snapshot();
        let pull = snap.pull(pr.number).unwrap();
        assert_eq!(pull.state, supervisor::sandbox::SeedState::Closed);
        assert!(!pull.merged);
        assert_eq!(
            w.sandbox.git().branch_sha("main").unwrap(),
            main,
            "nothing merged"
        );
        let read = w.gh.get_pr(pr.number).await.unwrap();
        assert_eq!(read.state, "closed");
        assert!(w.gh.find_open_pr("feature").await.unwrap().is_none());
        // Closing it again changes nothing; a pull request that does not exist is named.
        w.gh.close_pull(pr.number).await.unwrap();
        let e = w.gh.close_pull(99).await.unwrap_err();
        assert!(
            matches!(e, GitHubError::PullNotFound { number: 99, .. }),
            "{e}"
        );
    })
    .await
}

#[tokio::test]
async fn a_removed_dependency_no_longer_blocks() {
    within(async {
        let w = World::new().await;
        let one = w.gh.get_issue(1).await.unwrap();
        let two = w.gh.get_issue(2).await.unwrap();
        let four = w.gh.get_issue(4).await.unwrap();
        let native = |list: Vec<supervisor::github::Issue>| -> Vec<u64> {
            list.iter().map(|i| i.number).collect()
        };
        assert_eq!(native(w.gh.blocked_by(4).await.unwrap()), [1, 2]);
        assert!(
            w.gh.open_blockers(&four)
                .await
                .unwrap()
                .iter()
                .any(|b| b.number == 1)
        );
        w.gh.remove_blocked_by(4, one.id).await.unwrap();
        assert_eq!(native(w.gh.blocked_by(4).await.unwrap()), [2]);
        assert_eq!(w.sandbox.snapshot().issue(4).unwrap().blocked_by, [2]);
        let left: Vec<(u64, BlockerKind)> = (w.gh.open_blockers(&four).await.unwrap().iter())
            .map(|b| (b.number, b.kind))
            .collect();
        assert_eq!(left, [(3, BlockerKind::BodyReference)]);
        // GitHub answers 404 for a dependency that is not there; the client takes it as removed.
        let path = format!(
            "/repos/acme/widgets/issues/4/dependencies/blocked_by/{}",
            one.id
        );
        let auth = format!("Bearer {FULL}");
        let a = raw(
            &w.sandbox.url(),
            "DELETE",
            &path,
            &[("Authorization", &auth)],
            "",
        )
        .await;
        assert_eq!(a.status, 404, "{}", a.body);
        assert_eq!(a.json()["message"], "Not Found");
        w.gh.remove_blocked_by(4, one.id).await.unwrap();
        // The answer is the issue, as GitHub's description says.
        let path = format!(
            "/repos/acme/widgets/issues/4/dependencies/blocked_by/{}",
            two.id
        );
        let a = raw(
            &w.sandbox.url(),
            "DELETE",
            &path,
            &[("Authorization", &auth)],
            "",
        )
        .await;
        assert_eq!(a.status, 200, "{}", a.body);
        assert_eq!(a.json()["number"], 4);
        assert!(w.gh.blocked_by(4).await.unwrap().is_empty());
        // Anonymous callers may not; an issue that does not exist is named.
        let a = raw(&w.sandbox.url(), "DELETE", &path, &[], "").await;
        assert_eq!(a.status, 401, "{}", a.body);
        let e = w.gh.remove_blocked_by(99, one.id).await.unwrap_err();
        assert!(
            matches!(e, GitHubError::IssueNotFound { number: 99, .. }),
            "{e}"
        );
    })
    .await
}

#[tokio::test]
async fn check_runs_are_polled_with_etags() {
    within(async {
        let w = World::new().await;
        let sha = w.sandbox.git().branch_sha("feature").unwrap();
        w.check_runs(&sha, &[("build", "in_progress", None)]);
        let Conditional::Modified { value, etag } = w.gh.check_runs(&sha, None).await.unwrap()
        else {
            panic!("first poll must carry the runs");
        };
        assert_eq!(value.len(), 1);
        assert_eq!(value[0].status, "in_progress");
        let etag = etag.expect("an ETag");
        assert_eq!(
            w.gh.check_runs(&sha, Some(&etag)).await.unwrap(),
            Conditional::NotModified
        );
        w.check_runs(
            &sha,
            &[
                ("build", "completed", Some("success")),
                ("lint", "completed", Some("failure")),
            ],
        );
        let Conditional::Modified { value, etag: next } =
            w.gh.check_runs(&sha, Some(&etag)).await.unwrap()
        else {
            panic!("changed runs must be sent");
        };
        assert_eq!(value[1].conclusion.as_deref(), Some("failure"));
        assert_ne!(next.as_deref(), Some(etag.as_str()));
        // A commit with no runs: an empty list. An unknown commit: GitHub's 422.
        let main = w.sandbox.git().branch_sha("main").unwrap();
        assert!(matches!(
            w.gh.check_runs(&main, None).await.unwrap(),
            Conditional::Modified { value, .. } if value.is_empty()
        ));
        let e =
            w.gh.check_runs("0123456789abcdef0123456789abcdef01234567", None)
                .await
                .unwrap_err();
        assert_eq!(e.status(), Some(422), "{e}");
    })
    .await
}

#[tokio::test]
async fn commits_exist_or_not() {
    within(async {
        let w = World::new().await;
        let sha = w.sandbox.git().branch_sha("feature").unwrap();
        assert!(w.gh.commit_exists(&sha).await.unwrap());
        assert!(
            !w.gh
                .commit_exists("0123456789abcdef0123456789abcdef01234567")
                .await
                .unwrap()
        );
    })
    .await
}

fn new_pr(head: &str) -> NewPullRequest {
    NewPullRequest {
        head: head.into(),
        base: "main".into(),
        title: "feat(#1): --verbose".into(),
        body: "## Audit Approved".into(),
        draft: false,
    }
}

#[tokio::test]
async fn a_pull_request_is_found_instead_of_duplicated() {
    within(async {
        let w = World::new().await;
        assert!(w.gh.find_open_pr("feature").await.unwrap().is_none());
        let (pr, created) = w.gh.find_or_create_pr(&new_pr("feature")).await.unwrap();
        assert!(created);
        assert_eq!(pr.number, 5, "numbers continue after the issues");
        assert!(pr.html_url.ends_with("/acme/widgets/pull/5"));
        assert_eq!((pr.head.as_str(), pr.base.as_str()), ("feature", "main"));
        assert_eq!(pr.head_sha, w.sandbox.git().branch_sha("feature").unwrap());
        let (again, created) = w.gh.find_or_create_pr(&new_pr("feature")).await.unwrap();
        assert!(!created);
        assert_eq!(again.number, 5);
        assert_eq!(w.sandbox.snapshot().pulls().len(), 1);
        // The second attempt was refused ("already exists") and the open one looked up.
        assert_eq!(w.count("POST /repos/{owner}/{repo}/pulls"), 2);
        assert_eq!(w.count("GET /repos/{owner}/{repo}/pulls"), 2);
        // The issues API sees the pull request under its number.
        assert!(w.gh.get_issue(5).await.unwrap().is_pull_request);
    })
    .await
}

#[tokio::test]
async fn mergeable_comes_from_the_branches() {
    within(async {
        let w = World::new().await;
        let (clean, _) = w.gh.find_or_create_pr(&new_pr("feature")).await.unwrap();
        // Right after creation GitHub is still computing it: the first read answers null.
        assert_eq!(clean.mergeable, None);
        let first = w.gh.get_pr(clean.number).await.unwrap();
        assert_eq!(first.mergeable, None);
        assert_eq!(first.mergeable_state.as_deref(), Some("unknown"));
        let clean = w.gh.get_pr(clean.number).await.unwrap();
        assert_eq!(clean.mergeable, Some(true));
        assert_eq!(clean.mergeable_state.as_deref(), Some("clean"));
        let (clash, _) = w.gh.find_or_create_pr(&new_pr("clash")).await.unwrap();
        let poll = w.gh.mergeable_poll();
        assert_eq!(
            w.gh.mergeable(clash.number, &poll).await.unwrap(),
            Some(false)
        );
        let clash = w.gh.get_pr(clash.number).await.unwrap();
        assert_eq!(clash.mergeable_state.as_deref(), Some("dirty"));
        let e = w.gh.get_pr(42).await.unwrap_err();
        assert!(
            matches!(e, GitHubError::PullNotFound { number: 42, .. }),
            "{e}"
        );
    })
    .await
}

#[tokio::test]
async fn mergeability_is_polled_until_github_knows_it() {
    within(async {
        let w = World::with(|s| s.mergeable_unknown_reads = 3).await;
        let (clash, _) = w.gh.find_or_create_pr(&new_pr("clash")).await.unwrap();
        let poll = w.gh.mergeable_poll();
        assert_eq!(
            w.gh.mergeable(clash.number, &poll).await.unwrap(),
            Some(false)
        );
        assert_eq!(
            w.count("GET /repos/{owner}/{repo}/pulls/{number}"),
            4,
            "3 unknown, then known"
        );
        // Bounded: a pull request GitHub never decides about gives up with `None`.
        let (clean, _) = w.gh.find_or_create_pr(&new_pr("feature")).await.unwrap();
        w.sandbox.with_state(|s| {
            s.pulls
                .iter_mut()
                .find(|p| p.number == clean.number)
                .unwrap()
                .mergeable_pending = 1000
        });
        let short = supervisor::github::MergeablePoll {
            attempts: 3,
            ..poll
        };
        assert_eq!(w.gh.mergeable(clean.number, &short).await.unwrap(), None);
        assert_eq!(w.count("GET /repos/{owner}/{repo}/pulls/{number}"), 7);
    })
    .await
}

#[tokio::test]
async fn a_pull_request_from_a_missing_branch_is_refused() {
    within(async {
        let w = World::new().await;
        let e =
            w.gh.find_or_create_pr(&new_pr("not-pushed"))
                .await
                .unwrap_err();
        assert_eq!(e.status(), Some(422));
        let text = e.to_string();
        assert!(text.contains("Validation Failed"), "{text}");
        assert!(text.contains("not-pushed"), "{text}");
        let e = w.gh.find_or_create_pr(&new_pr("main")).await.unwrap_err();
        assert!(e.to_string().contains("No commits between"), "{e}");
        assert!(w.sandbox.snapshot().pulls().is_empty());
    })
    .await
}

#[tokio::test]
async fn a_card_is_moved_and_read_back() {
    within(async {
        let w = World::new().await;
        let item =
            w.gh.board_item(&board(), 1)
                .await
                .unwrap()
                .expect("on the board");
        assert_eq!(item.column_name(), Some("Backlog"));
        assert_eq!(item.project_number, 7);
        assert_eq!(item.issue, 1);
        let names: Vec<&str> = item.options.iter().map(|o| o.name.as_str()).collect();
        assert_eq!(names, COLUMNS);
        assert_eq!(w.gh.board_columns(&board()).await.unwrap(), item.options);
        w.gh.move_card(&item, &BoardOption::new("Research"))
            .await
            .unwrap();
        assert_eq!(w.sandbox.snapshot().column_of(1), Some("Research"));
        let again =
            w.gh.issue_context(&board(), 1)
                .await
                .unwrap()
                .board
                .unwrap();
        assert_eq!(again.column_name(), Some("Research"));
        // Case does not matter; unknown columns list the options.
        w.gh.move_card(&again, &BoardOption::new("testdesign"))
            .await
            .unwrap();
        assert_eq!(w.sandbox.snapshot().column_of(1), Some("TestDesign"));
        let e =
            w.gh.move_card(&again, &BoardOption::new("Doing"))
                .await
                .unwrap_err();
        assert!(matches!(e, GitHubError::UnknownColumn { .. }));
        assert!(
            e.to_string().contains("Backlog, Research, Architecture"),
            "{e}"
        );
        assert_eq!(w.count("POST /graphql UpdateItemStatus"), 2);
        assert_eq!(w.count("POST /graphql IssueContext"), 2);
    })
    .await
}

#[tokio::test]
async fn an_issue_off_the_board_is_added() {
    within(async {
        let w = World::new().await;
        assert!(w.gh.board_item(&board(), 3).await.unwrap().is_none());
        let issue = w.gh.get_issue(3).await.unwrap();
        let item = w.gh.add_to_board(&board(), &issue).await.unwrap();
        assert_eq!(item.column, None);
        assert!(w.sandbox.snapshot().on_board(3));
        w.gh.move_card(&item, &BoardOption::new("Backlog"))
            .await
            .unwrap();
        let read =
            w.gh.issue_context(&board(), 3)
                .await
                .unwrap()
                .board
                .unwrap();
        assert_eq!(read.column_name(), Some("Backlog"));
        // Adding again returns the same card.
        let same = w.gh.add_to_board(&board(), &issue).await.unwrap();
        assert_eq!(same.item_id, item.item_id);
        assert_eq!(same.column_name(), Some("Backlog"));
        // The board of another owner or number does not exist.
        let mut other = board();
        other.number = 8;
        let e = w.gh.add_to_board(&other, &issue).await.unwrap_err();
        assert!(
            matches!(e, GitHubError::BoardNotFound { number: 8, .. }),
            "{e}"
        );
        // An issue on board 7 is not on board 8.
        assert!(w.gh.board_item(&other, 1).await.unwrap().is_none());
    })
    .await
}

#[tokio::test]
async fn a_board_is_read_once_for_the_cards_added_to_it() {
    within(async {
        let w = World::new().await;
        let three = w.gh.get_issue(3).await.unwrap();
        let four = w.gh.get_issue(4).await.unwrap();
        let first = w.gh.add_to_board(&board(), &three).await.unwrap();
        // A column added since: the next card comes with it.
        w.sandbox.with_state(|s| {
            s.board.as_mut().unwrap().options.push("Later".into());
        });
        let second = w.gh.add_to_board(&board(), &four).await.unwrap();
        assert_eq!(w.count("POST /graphql ProjectBoard"), 1);
        assert_eq!(w.count("POST /graphql AddToBoard"), 2);
        assert_eq!(first.project_id, second.project_id);
        assert!(!first.options.iter().any(|o| o.name == "Later"));
        w.gh.move_card(&second, &BoardOption::new("Later"))
            .await
            .unwrap();
        assert_eq!(w.sandbox.snapshot().column_of(4), Some("Later"));
        // A board gone since: the add fails, and the next one reads the board again.
        w.sandbox.with_state(|s| s.board = None);
        assert!(w.gh.add_to_board(&board(), &three).await.is_err());
        let e = w.gh.add_to_board(&board(), &three).await.unwrap_err();
        assert!(
            matches!(e, GitHubError::BoardNotFound { number: 7, .. }),
            "{e}"
        );
        assert_eq!(w.count("POST /graphql ProjectBoard"), 2);
        w.sandbox.conformance_report().unwrap();
    })
    .await
}

#[tokio::test]
async fn a_wrong_status_field_is_named() {
    within(async {
        let w = World::new().await;
        let mut b = board();
        b.status_field = "Stage".into();
        let e = w.gh.board_item(&b, 1).await.unwrap_err();
        assert!(matches!(e, GitHubError::StatusFieldNotFound { .. }), "{e}");
        assert!(e.to_string().contains("statusField"), "{e}");
        let e = w.gh.board_columns(&b).await.unwrap_err();
        assert!(matches!(e, GitHubError::StatusFieldNotFound { .. }), "{e}");
    })
    .await
}

#[tokio::test]
async fn a_token_without_project_scope_gets_the_actionable_message() {
    within(async {
        let w = World::new().await;
        let gh = client(&w.sandbox, Some(REPO_ONLY), quick());
        // REST works with `repo` alone.
        assert_eq!(gh.get_issue(1).await.unwrap().number, 1);
        let e = gh.board_item(&board(), 1).await.unwrap_err();
        assert!(matches!(e, GitHubError::MissingScope { .. }), "{e}");
        let text = e.to_string();
        assert!(
            text.starts_with("GitHub token missing 'project' scope"),
            "{text}"
        );
        assert!(text.contains("gh auth refresh -s project"), "{text}");
        assert!(!e.is_resumable());
        let item =
            w.gh.issue_context(&board(), 1)
                .await
                .unwrap()
                .board
                .unwrap();
        let e = gh
            .move_card(&item, &BoardOption::new("Done"))
            .await
            .unwrap_err();
        assert!(matches!(e, GitHubError::MissingScope { .. }), "{e}");
        assert_eq!(w.sandbox.snapshot().column_of(1), Some("Backlog"));
    })
    .await
}

#[tokio::test]
async fn a_bad_token_is_unauthorized() {
    within(async {
        let w = World::new().await;
        let gh = client(&w.sandbox, Some("tok-revoked"), quick());
        let e = gh.get_issue(1).await.unwrap_err();
        assert!(matches!(e, GitHubError::Unauthorized { .. }), "{e}");
        assert!(e.to_string().contains("GH_TOKEN"), "{e}");
        assert_eq!(w.count(ISSUE), 1, "401 is not retried");
    })
    .await
}

#[tokio::test]
async fn a_github_app_gets_an_installation_token() {
    within(async {
        let fixtures =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/github");
        let w = World::with(|s| {
            s.apps.push(AppSeed {
                app_id: 4242,
                installation_id: 77,
                slug: "supervisor-bot".into(),
                public_key_pem: None,
                public_key_path: Some(fixtures.join("app-key.pub.pem")),
                scopes: vec!["repo".into(), "project".into()],
                ..AppSeed::default()
            });
        })
        .await;
        let pem = std::fs::read_to_string(fixtures.join("app-key.pem")).unwrap();
        let mut cfg = ClientConfig::new(
            w.sandbox.url(),
            None,
            supervisor::config::RepoSlug::parse("acme/widgets").unwrap(),
        );
        cfg.app = Some(AppCredentials::new(4242, pem, None).unwrap());
        cfg.retry = quick();
        let gh = GitHub::new(cfg).unwrap();
        // The installation is found from the repository, a token minted, and used.
        let c = gh.create_comment(1, "from the app").await.unwrap();
        assert_eq!(c.author, "supervisor-bot[bot]");
        let item = gh.board_item(&board(), 1).await.unwrap().unwrap();
        gh.move_card(&item, &BoardOption::new("Research"))
            .await
            .unwrap();
        assert_eq!(w.count("GET /repos/{owner}/{repo}/installation"), 1);
        let token = gh
            .access_token()
            .await
            .unwrap()
            .expect("an installation token");
        assert!(token.expose().starts_with("ghs_"));
        assert!(!format!("{token:?}").contains(token.expose()));
        // A key the sandbox does not know is refused with a message about the App.
        let other = Sandbox::start(common::seed(&w.dir.path().join("remote.git")), 0)
            .await
            .unwrap();
        let mut cfg = ClientConfig::new(
            other.url(),
            None,
            supervisor::config::RepoSlug::parse("acme/widgets").unwrap(),
        );
        cfg.app = Some(
            AppCredentials::new(
                4242,
                std::fs::read_to_string(fixtures.join("app-key.pem")).unwrap(),
                None,
            )
            .unwrap(),
        );
        cfg.retry = quick();
        let e = GitHub::new(cfg).unwrap().get_issue(1).await.unwrap_err();
        assert!(matches!(e, GitHubError::AppAuth { .. }), "{e}");
    })
    .await
}

#[tokio::test]
async fn a_happy_path_fits_the_request_budget() {
    within(async {
        let w = World::new().await;
        let gh = &w.gh;
        let issue = gh.get_issue(1).await.unwrap();
        let mut known = gh.list_comments(1).await.unwrap();
        assert!(gh.open_blockers(&issue).await.unwrap().is_empty());
        let mut item = gh.board_item(&board(), 1).await.unwrap().unwrap();
        for (attempt, column) in [
            "Research",
            "Architecture",
            "TestDesign",
            "Implementation",
            "Audit",
        ]
        .into_iter()
        .enumerate()
        {
            gh.move_card(&item, &BoardOption::new(column))
                .await
                .unwrap();
            item.column = Some(BoardOption::new(column));
            if column != "Implementation" {
                let m = Marker::new("run-budget", column, 1, MarkerKind::Stage);
                let posted = gh
                    .post_once(1, &m, &format!("## {column}"), Some(&known))
                    .await
                    .unwrap();
                known.push(posted.comment);
            }
            let _ = attempt;
        }
        let sha = w.sandbox.git().branch_sha("feature").unwrap();
        let _ = gh.check_runs(&sha, None).await.unwrap();
        let (pr, _) = gh.find_or_create_pr(&new_pr("feature")).await.unwrap();
        gh.move_card(&item, &BoardOption::new("Done"))
            .await
            .unwrap();
        let _ = gh.get_pr(pr.number).await.unwrap();
        assert!(gh.requests_sent() <= 25, "{} requests", gh.requests_sent());
        assert_eq!(gh.requests_sent(), w.sandbox.request_total());
    })
    .await
}

#[tokio::test]
async fn github_enterprise_server_paths_work() {
    within(async {
        let w = World::with(|s| {
            s.issue_mut(3).unwrap().comments =
                (0..120).map(|i| comment("bob", &i.to_string())).collect();
        })
        .await;
        let mut cfg = ClientConfig::new(
            format!("{}/api/v3/", w.sandbox.url()),
            Some(supervisor::github::Token::new(FULL).unwrap()),
            supervisor::config::RepoSlug::parse("acme/widgets").unwrap(),
        );
        cfg.retry = quick();
        let gh = GitHub::new(cfg).unwrap();
        assert_eq!(gh.get_issue(1).await.unwrap().number, 1);
        assert_eq!(gh.list_comments(3).await.unwrap().len(), 120);
        assert_eq!(w.count(COMMENTS), 2);
        // GraphQL goes to /api/graphql: the sandbox has no /api/v3/graphql.
        let item = gh.board_item(&board(), 1).await.unwrap().unwrap();
        gh.move_card(&item, &BoardOption::new("Research"))
            .await
            .unwrap();
        assert_eq!(w.sandbox.snapshot().column_of(1), Some("Research"));
        assert_eq!(w.count("POST /graphql UpdateItemStatus"), 1);
    })
    .await
}

const CHECK_RUNS: &str = "/repos/acme/widgets/commits/main/check-runs";

#[tokio::test]
async fn comment_and_issue_ids_are_github_sized_and_editors_match_them() {
    within(async {
        let w = World::with(|s| {
            let mut edited = comment("alice", "edited later");
            edited.editor = Some("mallory".into());
            s.issue_mut(1).unwrap().comments.push(edited);
        })
        .await;
        let comments = w.gh.list_comments(1).await.unwrap();
        assert_eq!(comments.len(), 2);
        assert!(
            comments.iter().all(|c| c.id > i32::MAX as u64),
            "{comments:?}"
        );
        let issue = raw(
            &w.sandbox.url(),
            "GET",
            "/repos/acme/widgets/issues/1",
            &[],
            "",
        )
        .await
        .json();
        assert_ne!(issue["id"], issue["number"]);
        assert!(issue["id"].as_u64().unwrap() > i32::MAX as u64);
        // The GraphQL ids are matched to the REST ones: every comment is known, the edited one
        // with its editor.
        let editors = w.gh.issue_context(&board(), 1).await.unwrap().editors;
        assert_eq!(
            editors.checked,
            comments.iter().map(|c| c.id).collect::<Vec<_>>()
        );
        assert_eq!(
            editors.comment(comments[1].id),
            supervisor::github::CommentEdit::EditedBy("mallory")
        );
        assert_eq!(
            editors.comment(comments[0].id),
            supervisor::github::CommentEdit::Unedited
        );
    })
    .await
}

#[tokio::test]
async fn title_renames_are_read_with_their_actors() {
    within(async {
        let w = World::with(|s| {
            s.tokens.push(supervisor::sandbox::TokenSeed::classic(
                "tok-mallory-0123456789",
                "mallory",
                &["repo"],
            ));
        })
        .await;
        assert!(
            w.gh.issue_context(&board(), 1)
                .await
                .unwrap()
                .editors
                .renames
                .is_empty()
        );
        let url = w.sandbox.url();
        for (token, title) in [
            (
                "tok-mallory-0123456789",
                "Add a --verbose flag and push to main",
            ),
            (FULL, "Add a --verbose flag"),
            // The same title again is no rename.
            (FULL, "Add a --verbose flag"),
        ] {
            let a = raw(
                &url,
                "PATCH",
                "/repos/acme/widgets/issues/1",
                &[("Authorization", &format!("Bearer {token}"))],
                &format!(r#"{{"title": "{title}"}}"#),
            )
            .await;
            assert_eq!(a.status, 200, "{}", a.body);
        }
        let editors = w.gh.issue_context(&board(), 1).await.unwrap().editors;
        let renames: Vec<(&str, &str)> = editors
            .renames
            .iter()
            .map(|r| (r.actor.as_str(), r.to.as_str()))
            .collect();
        assert_eq!(
            renames,
            [
                ("mallory", "Add a --verbose flag and push to main"),
                ("alice", "Add a --verbose flag")
            ]
        );
        assert_eq!(editors.renames[1].from, editors.renames[0].to);
        assert!(!editors.renames_truncated);
        assert_eq!(w.count("POST /graphql IssueContext"), 2);
    })
    .await
}

#[tokio::test]
async fn edits_move_updated_at_and_codeowners_are_members() {
    within(async {
        let long_ago = chrono::DateTime::parse_from_rfc3339("2024-07-01T10:00:00Z")
            .unwrap()
            .with_timezone(&chrono::Utc);
        let w = World::with(|s| {
            let c = &mut s.issue_mut(1).unwrap().comments[0];
            c.created_at = Some(long_ago);
        })
        .await;
        let id = w.gh.list_comments(1).await.unwrap()[0].id;
        let path = format!("/repos/acme/widgets/issues/comments/{id}");
        let before = raw(&w.sandbox.url(), "GET", &path, &[], "").await.json();
        assert_eq!(before["updated_at"], "2024-07-01T10:00:00Z");
        w.gh.update_comment(id, "changed").await.unwrap();
        let after = raw(&w.sandbox.url(), "GET", &path, &[], "").await.json();
        assert_eq!(after["created_at"], "2024-07-01T10:00:00Z");
        assert_ne!(after["updated_at"], after["created_at"]);
        // alice is a member of the organization; bob, a passer-by, is not.
        let issue = raw(
            &w.sandbox.url(),
            "GET",
            "/repos/acme/widgets/issues/1",
            &[],
            "",
        )
        .await
        .json();
        assert_eq!(issue["author_association"], "MEMBER");
        assert_eq!(after["author_association"], "NONE");
    })
    .await
}

#[tokio::test]
async fn not_modified_answers_cost_no_quota() {
    within(async {
        let w = World::new().await;
        w.check_runs("main", &[("build", "completed", Some("success"))]);
        let auth = format!("Bearer {FULL}");
        let first = raw(
            &w.sandbox.url(),
            "GET",
            CHECK_RUNS,
            &[("Authorization", &auth)],
            "",
        )
        .await;
        assert_eq!(first.status, 200);
        let etag = first.header("etag").unwrap().to_string();
        let remaining = first.header("x-ratelimit-remaining").unwrap().to_string();
        for _ in 0..3 {
            let again = raw(
                &w.sandbox.url(),
                "GET",
                CHECK_RUNS,
                &[("Authorization", &auth), ("If-None-Match", &etag)],
                "",
            )
            .await;
            assert_eq!(again.status, 304);
            assert_eq!(
                again.header("x-ratelimit-remaining"),
                Some(remaining.as_str())
            );
        }
    })
    .await
}

#[tokio::test]
async fn links_name_the_host_the_client_used() {
    within(async {
        let w = World::with(|s| {
            s.issue_mut(3).unwrap().comments =
                (0..106).map(|i| comment("bob", &i.to_string())).collect();
        })
        .await;
        let page = raw(
            &w.sandbox.url(),
            "GET",
            "/repos/acme/widgets/issues/3/comments?per_page=100",
            &[("Host", "gh.internal.example:8443")],
            "",
        )
        .await;
        let link = page.header("link").unwrap();
        assert!(
            link.starts_with(
                "<http://gh.internal.example:8443/repos/acme/widgets/issues/3/comments?"
            ),
            "{link}"
        );
        assert_eq!(
            page.json()[0]["user"]["url"],
            "http://gh.internal.example:8443/users/bob"
        );
    })
    .await
}

#[tokio::test]
async fn pages_behind_a_proxy_are_all_read() {
    within(async {
        let w = World::with(|s| {
            s.public_url = Some("https://github-proxy.example".into());
            s.issue_mut(3).unwrap().comments =
                (0..106).map(|i| comment("bob", &i.to_string())).collect();
        })
        .await;
        // The sandbox's links name the proxy; the client follows them on its own API URL.
        assert_eq!(w.gh.list_comments(3).await.unwrap().len(), 106);
        assert_eq!(w.count(COMMENTS), 2);
        // GitHub Enterprise Server behind the proxy: links keep /api/v3.
        let mut cfg = ClientConfig::new(
            format!("{}/api/v3", w.sandbox.url()),
            Some(supervisor::github::Token::new(FULL).unwrap()),
            supervisor::config::RepoSlug::parse("acme/widgets").unwrap(),
        );
        cfg.retry = quick();
        let ghes = GitHub::new(cfg.clone()).unwrap();
        assert_eq!(ghes.list_comments(3).await.unwrap().len(), 106);
        // A proxy that moves the API under another path: the list cannot be completed, and that
        // is an error rather than 100 of 106 comments.
        w.sandbox
            .with_state(|s| s.public_url = Some("https://github-proxy.example/github".into()));
        let e = ghes.list_comments(3).await.unwrap_err();
        assert!(matches!(e, GitHubError::InvalidResponse { .. }), "{e}");
        assert!(e.to_string().contains("GITHUB_API_URL"), "{e}");
    })
    .await
}

#[tokio::test]
async fn a_403_on_check_runs_names_the_checks_permission() {
    within(async {
        let fine_grained = |token: &str, perms: &[(&str, &str)]| supervisor::sandbox::TokenSeed {
            token: token.into(),
            login: "alice".into(),
            permissions: Some(
                perms
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..Default::default()
        };
        let w = World::with(|s| {
            s.repo.private = true;
            s.tokens.push(fine_grained(
                "github_pat_nochecks",
                &[("issues", "write"), ("contents", "write"), ("metadata", "read")],
            ));
            s.tokens.push(fine_grained(
                "github_pat_checks",
                &[("checks", "read"), ("metadata", "read")],
            ));
        })
        .await;
        w.check_runs("main", &[("build", "completed", Some("success"))]);
        let gh = client(&w.sandbox, Some("github_pat_nochecks"), quick());
        // Issues are readable; check runs are not, and the error says which permission is missing.
        assert_eq!(gh.get_issue(1).await.unwrap().number, 1);
        let e = gh.check_runs("main", None).await.unwrap_err();
        assert!(
            matches!(&e, GitHubError::MissingPermission { permission, .. } if permission == "Checks: read"),
            "{e}"
        );
        assert!(!e.tolerable_mid_flight());
        let e = gh.create_comment(1, "x").await.map(|_| ());
        assert!(e.is_ok());
        let reader = client(&w.sandbox, Some("github_pat_checks"), quick());
        assert!(matches!(
            reader.check_runs("main", None).await.unwrap(),
            Conditional::Modified { .. }
        ));
        let e = reader.create_comment(1, "x").await.unwrap_err();
        assert!(
            matches!(&e, GitHubError::MissingPermission { permission, .. } if permission == "Issues: write"),
            "{e}"
        );
    })
    .await
}

#[tokio::test]
async fn graphql_answers_carry_scopes_and_whole_second_times() {
    within(async {
        let w = World::new().await;
        let a = raw(
            &w.sandbox.url(),
            "POST",
            "/graphql",
            &[("Authorization", &format!("Bearer {FULL}"))],
            r#"{"query": "{ rateLimit { resetAt } }"}"#,
        )
        .await;
        assert_eq!(a.status, 200, "{}", a.body);
        assert_eq!(a.header("x-oauth-scopes"), Some("repo, project"));
        let reset = a.json()["data"]["rateLimit"]["resetAt"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            regex::Regex::new(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
                .unwrap()
                .is_match(&reset),
            "{reset}"
        );
    })
    .await
}

#[tokio::test]
async fn the_sha_media_type_is_answered_with_the_sha() {
    within(async {
        let w = World::new().await;
        let a = raw(
            &w.sandbox.url(),
            "GET",
            "/repos/acme/widgets/commits/main",
            &[("Accept", "application/vnd.github.sha")],
            "",
        )
        .await;
        assert_eq!(a.status, 200);
        assert!(
            a.header("content-type")
                .is_some_and(|t| t.starts_with("application/vnd.github.sha")),
            "{:?}",
            a.headers
        );
        assert_eq!(a.body, w.sandbox.git().branch_sha("main").unwrap());
    })
    .await
}

/// A world whose repository has the sandbox App installed (`token_lifetime` seconds per token),
/// and an App client for it.
async fn app_world(
    token_lifetime: Option<u64>,
    change: impl FnOnce(&mut supervisor::sandbox::SandboxState),
) -> (World, GitHub) {
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/github");
    let w = World::with(|s| {
        s.apps.push(AppSeed {
            app_id: 4242,
            installation_id: 77,
            slug: "supervisor-bot".into(),
            public_key_path: Some(fixtures.join("app-key.pub.pem")),
            scopes: vec!["repo".into(), "project".into()],
            token_lifetime_secs: token_lifetime,
            ..AppSeed::default()
        });
        change(s);
    })
    .await;
    let pem = std::fs::read_to_string(fixtures.join("app-key.pem")).unwrap();
    let mut cfg = ClientConfig::new(
        w.sandbox.url(),
        None,
        supervisor::config::RepoSlug::parse("acme/widgets").unwrap(),
    );
    cfg.app = Some(AppCredentials::new(4242, pem, None).unwrap());
    cfg.retry = quick();
    let gh = GitHub::new(cfg).unwrap();
    (w, gh)
}

#[tokio::test]
async fn git_gets_a_fresh_app_token_before_the_old_one_expires() {
    within(async {
        let (w, gh) = app_world(Some(3), |_| {}).await;
        let creds = gh.git_credentials().await.unwrap();
        let token = |c: &supervisor::github::GitCredentials| {
            let c = c.clone();
            async move {
                tokio::task::spawn_blocking(move || c.token().unwrap().unwrap())
                    .await
                    .unwrap()
            }
        };
        let first = token(&creds).await;
        assert!(first.expose().starts_with("ghs_"));
        // Fresh enough: the same token again, no new request.
        assert_eq!(token(&creds).await, first);
        let minted = "POST /app/installations/{installation_id}/access_tokens";
        let before = w.count(minted);
        // Within the last half of its 3 s life it is replaced before git uses it.
        tokio::time::sleep(std::time::Duration::from_millis(1700)).await;
        let second = token(&creds).await;
        assert_ne!(second, first);
        assert_eq!(w.count(minted), before + 1);
        // The old one stops working when GitHub says; the new one works.
        tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
        let old = client(&w.sandbox, Some(first.expose()), quick());
        assert!(matches!(
            old.get_issue(1).await.unwrap_err(),
            GitHubError::Unauthorized { .. }
        ));
        let new = client(&w.sandbox, Some(second.expose()), quick());
        assert_eq!(new.get_issue(1).await.unwrap().number, 1);
        // A token given in the environment is handed out as it is.
        let fixed = w.gh.git_credentials().await.unwrap();
        assert_eq!(token(&fixed).await.expose(), FULL);
    })
    .await
}

#[tokio::test]
async fn the_viewer_login_is_the_token_user_or_the_app_bot() {
    within(async {
        let (w, app) = app_world(None, |_| {}).await;
        // The scopes check and the markers' login share one `GET /user`.
        assert_eq!(w.gh.viewer().await.unwrap().login, "alice");
        assert_eq!(w.gh.viewer_login().await.unwrap(), "alice");
        assert_eq!(w.gh.clone().viewer_login().await.unwrap(), "alice");
        assert_eq!(w.count("GET /user"), 1, "asked once per client");
        assert_eq!(app.viewer_login().await.unwrap(), "supervisor-bot[bot]");
        assert_eq!(app.viewer_login().await.unwrap(), "supervisor-bot[bot]");
        assert_eq!(w.count("GET /app"), 1);
        // The bot is who the App's comments are authored by.
        let c = app.create_comment(1, "from the app").await.unwrap();
        assert_eq!(c.author, app.viewer_login().await.unwrap());
        // An installation token given as a token (as Actions' GITHUB_TOKEN is) cannot read /user,
        // as on GitHub; GraphQL's viewer names its bot.
        let token = app.access_token().await.unwrap().unwrap();
        let as_bot = client(&w.sandbox, Some(token.expose()), quick());
        let before = w.count("GET /user");
        assert_eq!(as_bot.viewer_login().await.unwrap(), "supervisor-bot[bot]");
        assert_eq!(w.count("GET /user"), before + 1);
        assert_eq!(w.count("POST /graphql Viewer"), 1);
    })
    .await
}

#[tokio::test]
async fn an_app_is_told_it_cannot_reach_a_users_board() {
    within(async {
        let (w, app) = app_world(None, |s| {
            let b = s.board.as_mut().unwrap();
            b.owner = "alice".into();
            b.owner_type = supervisor::sandbox::OwnerType::User;
        })
        .await;
        let board = supervisor::github::BoardRef {
            owner: "alice".into(),
            number: 7,
            status_field: "Status".into(),
        };
        // The same board works with alice's classic token.
        assert!(w.gh.board_item(&board, 1).await.unwrap().is_some());
        let e = app.board_item(&board, 1).await.unwrap_err();
        assert!(
            matches!(&e, GitHubError::AppCannotReachUserBoard { owner, number: 7 } if owner == "alice"),
            "{e}"
        );
        assert!(e.to_string().contains("personal access token"), "{e}");
        let issue = app.get_issue(3).await.unwrap();
        let e = app.add_to_board(&board, &issue).await.unwrap_err();
        assert!(matches!(e, GitHubError::AppCannotReachUserBoard { .. }), "{e}");
    })
    .await
}

#[tokio::test]
async fn exchanges_unlike_githubs_descriptions_are_named() {
    within(async {
        let w = World::new().await;
        // An answer missing what GitHub always sends.
        let mut fault = supervisor::sandbox::Fault::status(ISSUE, 200);
        fault.body = Some(serde_json::json!({"number": 1, "state": "open", "title": "t"}));
        w.sandbox.inject(fault);
        let _ = w.gh.get_issue(1).await;
        // A request GitHub's description does not have: an unknown query parameter.
        let _ = raw(
            &w.sandbox.url(),
            "GET",
            "/repos/acme/widgets/issues/1/comments?perpage=5",
            &[],
            "",
        )
        .await;
        // A GraphQL answer of the wrong shape for its query.
        let mut fault = supervisor::sandbox::Fault::status("POST /graphql IssueContext", 200);
        fault.body = Some(serde_json::json!({"data": {"repository": {"issue": {"editor": null,
            "comments": {"totalCount": 1, "nodes": [{"fullDatabaseId": 2250077004u64, "editor": null}]},
            "timelineItems": {"totalCount": 0, "nodes": []}}}}}));
        w.sandbox.inject(fault);
        let _ = w.gh.issue_context(&board(), 1).await;
        let found: Vec<String> = w
            .sandbox
            .take_violations()
            .iter()
            .map(ToString::to_string)
            .collect();
        let has = |text: &str| found.iter().any(|f| f.contains(text));
        assert!(has("issues/get answer 200: (body): missing properties"), "{found:#?}");
        assert!(has("issues/list-comments request: query.perpage: not a parameter"), "{found:#?}");
        assert!(
            has("graphql IssueContext answer 200: /repository/issue/comments/nodes/0/fullDatabaseId: `2250077004` is not a BigInt"),
            "{found:#?}"
        );
    })
    .await
}

#[tokio::test]
async fn a_wrongly_typed_argument_fails_the_whole_document() {
    within(async {
        let w = World::new().await;
        let ask = |body: &'static str| {
            let url = w.sandbox.url();
            async move {
                raw(
                    &url,
                    "POST",
                    "/graphql",
                    &[("Authorization", &format!("Bearer {FULL}"))],
                    body,
                )
                .await
                .json()
            }
        };
        let literal = ask(
            r#"{"query": "{ viewer { login } repository(owner: \"acme\", name: \"widgets\") { issue(number: \"1\") { title } } }"}"#,
        )
        .await;
        assert!(literal.get("data").is_none(), "{literal}");
        assert_eq!(
            literal["errors"][0]["extensions"]["code"],
            "argumentLiteralsIncompatible"
        );
        let variable = ask(
            r#"{"query": "query($n: Int!) { repository(owner: \"acme\", name: \"widgets\") { issue(number: $n) { title } } }", "variables": {"n": "1"}}"#,
        )
        .await;
        assert!(variable.get("data").is_none(), "{variable}");
        assert_eq!(
            variable["errors"][0]["message"],
            "Variable $n of type Int! was provided invalid value"
        );
    })
    .await
}

#[tokio::test]
async fn one_request_reads_the_board_the_repository_and_who_asks() {
    within(async {
        let w = World::new().await;
        let (field, repository) = w.gh.board_and_repository(&board()).await.unwrap();
        let (_, _, options) = field.unwrap();
        let names: Vec<&str> = options.iter().map(|o| o.name.as_str()).collect();
        assert_eq!(names, COLUMNS);
        let repository = repository.expect("the repository part");
        assert_eq!(repository.viewer.login, "alice");
        assert_eq!(
            repository.viewer.scopes.as_deref(),
            Some(&["repo".to_string(), "project".to_string()][..]),
            "a classic token's scopes come with every answer"
        );
        assert!(repository.permission.is_some());
        // The login is remembered: posting needs no `GET /user`.
        assert_eq!(w.gh.viewer_login().await.unwrap(), "alice");
        assert_eq!(w.count("POST /graphql ProjectBoard"), 1);
        assert_eq!(w.count("GET /user"), 0);

        // A repository GitHub does not know leaves the board readable, and says so apart.
        let mut cfg = ClientConfig::new(
            w.sandbox.url(),
            Some(supervisor::github::Token::new(FULL).unwrap()),
            supervisor::config::RepoSlug::parse("acme/missing").unwrap(),
        );
        cfg.retry = quick();
        let other = GitHub::new(cfg).unwrap();
        let (field, repository) = other.board_and_repository(&board()).await.unwrap();
        assert!(field.is_ok(), "{field:?}");
        assert!(repository.is_none());
        assert!(matches!(
            other.repository_info().await,
            Err(GitHubError::RepoNotFound { .. })
        ));
    })
    .await
}
