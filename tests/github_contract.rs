//! Contract tests: the real client (octocrab transport and all) against GitHub's own published
//! request and response examples, served by wiremock. Each example must parse, and each request
//! the client sends must match its operation's parameters and body schema in GitHub's REST
//! description (`src/github/openapi/`, vendored by `scripts/vendor-openapi.py`). The GraphQL
//! tests answer as GitHub's schema says GitHub answers. Transport faults the sandbox does not
//! model (dropped connections, truncated bodies, slow headers) are served here too.
//!
//! REST operations the client calls, each exercised below:
//! - `users/get-authenticated` (`GET /user`): `viewer_login` with a token
//! - `apps/get-authenticated` (`GET /app`): `viewer_login` as a GitHub App
//! - `apps/get-repo-installation` (`GET /repos/{owner}/{repo}/installation`): finding the App's installation
//! - `apps/create-installation-access-token` (`POST /app/installations/{id}/access_tokens`): App tokens
//! - `issues/get`: `get_issue`
//! - `issues/update`: `close_issue`, `close_issue_as`, `update_issue`
//! - `issues/list-comments`: `list_comments`
//! - `issues/create-comment`: `create_comment`, `post_once`
//! - `issues/update-comment`: `update_comment`
//! - `issues/list-dependencies-blocked-by`: `open_blockers`
//! - `issues/add-blocked-by-dependency`, `issues/remove-dependency-blocked-by`: `add_blocked_by`,
//!   `remove_blocked_by` (an epic's tasks and their re-planning)
//! - `repos/get-commit`: `commit_exists`
//! - `checks/list-for-ref`: `check_runs`
//! - `pulls/list`: `find_open_pr`
//! - `pulls/create`: `find_or_create_pr`
//! - `pulls/get`: `get_pr`, `mergeable`
//! - `pulls/update`: `update_pull_body` (a revision rewrites the body), `close_pull`
//! - `pulls/merge`: `merge_pull` (an epic's accepted task merged into the epic branch)
//! - `git/get-ref`: `branch_head`
//! - `git/create-ref`: `create_branch`
//! - `pulls/create-review`: `submit_review`
//! - `pulls/create-reply-for-review-comment`: `reply_in_thread` (to a thread's top-level comment)
//! - `issues/add-labels`, `issues/remove-label`: the scheduler's claim label
//! - `actions/create-workflow-dispatch`: `dispatch_workflow`

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use supervisor::config::RepoSlug;
use supervisor::github::{
    AppCredentials, BoardItem, ClientConfig, CloseReason, ColumnOption, Conditional, GitHub,
    GitHubError, Issue, IssueState, MergeError, MergeMethod, MergeResult, MergeablePoll,
    NewPullRequest, RetryPolicy, Token,
};
use supervisor::ids::BoardOption;
use supervisor::sandbox::{check_rest_request, rest_operation_id};
use wiremock::matchers::{method, path, path_regex};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// The operations listed above.
const CLIENT_OPERATIONS: [&str; 30] = [
    "users/get-authenticated",
    "apps/get-authenticated",
    "apps/get-repo-installation",
    "apps/create-installation-access-token",
    "issues/get",
    "issues/update",
    "issues/list-comments",
    "issues/create-comment",
    "issues/update-comment",
    "issues/list-dependencies-blocked-by",
    "issues/add-blocked-by-dependency",
    "issues/remove-dependency-blocked-by",
    "issues/create",
    "issues/list-for-repo",
    "issues/list-sub-issues",
    "issues/add-sub-issue",
    "repos/get-commit",
    "checks/list-for-ref",
    "pulls/list",
    "pulls/create",
    "pulls/get",
    "pulls/update",
    "pulls/merge",
    "git/get-ref",
    "git/create-ref",
    "pulls/create-review",
    "pulls/create-reply-for-review-comment",
    "issues/add-labels",
    "issues/remove-label",
    "actions/create-workflow-dispatch",
];

const EXAMPLES: &str = include_str!("../crates/github/src/github/openapi/examples.json");
const REST: &str = include_str!("../crates/github/src/github/openapi/rest.json");

fn examples() -> &'static Value {
    static E: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    E.get_or_init(|| serde_json::from_str(EXAMPLES).expect("examples.json parses"))
}

/// GitHub's first example answer of `operation` with `status`.
fn example(operation: &str, status: &str) -> Value {
    let answers = &examples()["operations"][operation]["responses"][status];
    answers
        .as_object()
        .and_then(|m| m.values().next())
        .cloned()
        .unwrap_or_else(|| panic!("GitHub publishes no {status} example of {operation}"))
}

/// A path regex matching `operation`'s path template.
fn path_of(operation: &str) -> (String, String) {
    let rest: Value = serde_json::from_str(REST).unwrap();
    let op = &rest["operations"][operation];
    let template = op["path"].as_str().unwrap();
    let re = regex::Regex::new(r"\{[^}]+\}").unwrap();
    let pattern = format!("^{}$", re.replace_all(template, "[^/]+"));
    (op["method"].as_str().unwrap().to_string(), pattern)
}

/// Serve GitHub's `status` example for `operation`.
async fn serve_example(server: &MockServer, operation: &str, status: u16) {
    let (verb, pattern) = path_of(operation);
    Mock::given(method(verb.as_str()))
        .and(path_regex(pattern))
        .respond_with(
            ResponseTemplate::new(status).set_body_json(example(operation, &status.to_string())),
        )
        .mount(server)
        .await;
}

fn policy() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 3,
        base_backoff: Duration::from_millis(5),
        max_wait: Duration::from_secs(2),
        min_mutation_interval: Duration::ZERO,
        request_timeout: Duration::from_millis(400),
        secondary_min_wait: Duration::from_millis(20),
    }
}

fn client_for(server: &MockServer) -> GitHub {
    let mut cfg = ClientConfig::new(
        server.uri(),
        Some(Token::new("ghp_contract0123456789").unwrap()),
        RepoSlug::parse("octocat/Hello-World").unwrap(),
    );
    cfg.retry = policy();
    GitHub::new(cfg).unwrap()
}

fn app_client_for(server: &MockServer) -> GitHub {
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/github");
    let pem = std::fs::read_to_string(fixtures.join("app-key.pem")).unwrap();
    let mut cfg = ClientConfig::new(
        server.uri(),
        None,
        RepoSlug::parse("octocat/Hello-World").unwrap(),
    );
    cfg.app = Some(AppCredentials::new(1, pem, None).unwrap());
    cfg.retry = policy();
    GitHub::new(cfg).unwrap()
}

/// Every request the server received, checked against GitHub's description; the operations hit.
async fn check_requests(server: &MockServer) -> BTreeSet<String> {
    let mut hit = BTreeSet::new();
    let mut problems = Vec::new();
    for r in server.received_requests().await.unwrap_or_default() {
        let (verb, p, q) = (r.method.as_str(), r.url.path(), r.url.query());
        let found = check_rest_request(verb, p, q, &r.body).expect("the description compiles");
        problems.extend(found.iter().map(ToString::to_string));
        if let Some(id) = rest_operation_id(verb, p) {
            hit.insert(id);
        }
    }
    assert!(
        problems.is_empty(),
        "requests unlike GitHub's description:\n{problems:#?}"
    );
    hit
}

fn issue_1347() -> Issue {
    Issue {
        id: 1,
        number: 1347,
        node_id: "MDU6SXNzdWUx".into(),
        title: "Found a bug".into(),
        body: "I'm having a problem with this.".into(),
        author: "octocat".into(),
        labels: vec![],
        state: IssueState::Open,
        html_url: String::new(),
        is_pull_request: false,
        comments: Some(0),
        blocked_by_total: None,
    }
}

#[tokio::test]
async fn every_rest_operation_the_client_uses_reads_githubs_examples() {
    let server = MockServer::start().await;
    for (op, status) in [
        ("users/get-authenticated", 200),
        ("issues/get", 200),
        ("issues/update", 200),
        ("issues/list-comments", 200),
        ("issues/create-comment", 201),
        ("issues/update-comment", 200),
        ("issues/list-dependencies-blocked-by", 200),
        ("issues/add-blocked-by-dependency", 201),
        ("issues/remove-dependency-blocked-by", 200),
        ("issues/create", 201),
        ("issues/list-for-repo", 200),
        ("issues/list-sub-issues", 200),
        ("issues/add-sub-issue", 201),
        ("checks/list-for-ref", 200),
        ("pulls/get", 200),
        ("pulls/create", 201),
        ("pulls/update", 200),
        ("pulls/merge", 200),
        ("git/create-ref", 201),
        ("pulls/create-review", 200),
        ("pulls/create-reply-for-review-comment", 201),
        ("issues/add-labels", 200),
        ("issues/remove-label", 200),
        ("actions/create-workflow-dispatch", 200),
    ] {
        serve_example(&server, op, status).await;
    }
    // Asked for the sha only, GitHub answers with the sha.
    Mock::given(method("GET"))
        .and(path_regex("^/repos/[^/]+/[^/]+/commits/[^/]+$"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_string("6dcb09b5b57875f334f61aebed695e2e4193db5e")
                .insert_header("content-type", "application/vnd.github.sha; charset=utf-8"),
        )
        .mount(&server)
        .await;
    // A reference spans segments (`heads/<branch>`), which the template's pattern does not.
    Mock::given(method("GET"))
        .and(path_regex("^/repos/[^/]+/[^/]+/git/ref/heads/.+$"))
        .respond_with(ResponseTemplate::new(200).set_body_json(example("git/get-ref", "200")))
        .mount(&server)
        .await;
    let gh = client_for(&server);

    assert_eq!(gh.viewer_login().await.unwrap(), "octocat");
    let issue = gh.get_issue(1347).await.unwrap();
    assert_eq!((issue.number, issue.author.as_str()), (1347, "octocat"));
    assert_eq!(issue.labels, vec!["bug"]);
    gh.close_issue(1347, None).await.unwrap();
    let comments = gh.list_comments(1347).await.unwrap();
    assert_eq!(comments[0].author, "octocat");
    assert_eq!(comments[0].body, "Me too");
    let c = gh.create_comment(1347, "Me too").await.unwrap();
    assert_eq!(c.id, comments[0].id);
    gh.update_comment(c.id, "Me too").await.unwrap();
    // The scheduler's claims and its dispatches to GitHub Actions.
    gh.add_label(1347, "supervisor:running").await.unwrap();
    gh.remove_label(1347, "supervisor:running").await.unwrap();
    gh.dispatch_workflow("supervisor.yml", "main", &json!({ "issue": "1347" }))
        .await
        .unwrap();
    // An epic's sub-issues: one opened, linked under its epic, blocked by another.
    let task = gh
        .create_issue(
            "Found a bug",
            "I'm having a problem with this.",
            &["bug".to_string()],
        )
        .await
        .unwrap();
    assert_eq!(
        (task.id, task.number, task.author.as_str()),
        (1, 1347, "octocat")
    );
    gh.add_sub_issue(1347, task.id).await.unwrap();
    gh.add_blocked_by(1347, task.id).await.unwrap();
    // Re-planning an epic: a task rewritten, one dropped, a dependency removed.
    let edited = gh
        .update_issue(1347, "Found a bug", "I'm having a problem with this.")
        .await
        .unwrap();
    assert_eq!(
        (edited.number, edited.title.as_str()),
        (1347, "Found a bug")
    );
    gh.close_issue_as(1347, CloseReason::NotPlanned, None)
        .await
        .unwrap();
    gh.remove_blocked_by(1347, task.id).await.unwrap();
    // Looking for one opened before a crash: the issues API lists pull requests too (GitHub's
    // example is one), which are left out.
    assert!(gh.latest_issues_by("octocat").await.unwrap().is_empty());
    let subs = gh.sub_issues(1347).await.unwrap();
    assert_eq!((subs[0].id, subs[0].number), (1, 1347));
    let blockers = gh.open_blockers(&issue_1347()).await.unwrap();
    assert_eq!(blockers.len(), 1);
    assert!(
        gh.commit_exists("6dcb09b5b57875f334f61aebed695e2e4193db5e")
            .await
            .unwrap()
    );
    let Conditional::Modified { value: runs, .. } = gh.check_runs("feature/x", None).await.unwrap()
    else {
        panic!("a first poll is never 'not modified'")
    };
    assert_eq!(runs[0].name, "mighty_readme");
    let pr = gh.get_pr(1347).await.unwrap();
    assert_eq!((pr.number, pr.head.as_str()), (1347, "new-topic"));
    assert_eq!(
        gh.mergeable(1347, &MergeablePoll::loopback())
            .await
            .unwrap(),
        Some(true)
    );

    // An epic's accepted task: its pull request merged while its head is what was reviewed.
    assert_eq!(
        gh.merge_pull(
            1347,
            MergeMethod::Merge,
            Some("6dcb09b5b57875f334f61aebed695e2e4193db5e")
        )
        .await
        .unwrap(),
        MergeResult {
            sha: "6dcb09b5b57875f334f61aebed695e2e4193db5e".into(),
            merged: true
        }
    );

    // An epic's branch: created at a commit, then read.
    let sha = "aa218f56b14c9653891f9e74264a383fa43fefbd";
    assert!(gh.create_branch("epic/featureA", sha).await.unwrap());
    assert_eq!(
        gh.branch_head("epic/featureA").await.unwrap().as_deref(),
        Some(sha)
    );

    // A revision: the pull request's body rewritten, a reply in a review thread, a review.
    gh.update_pull_body(1347, "Audit: 8/8").await.unwrap();
    gh.close_pull(1347).await.unwrap();
    assert_eq!(
        gh.reply_in_thread(1347, 10, "Addressed in 6dcb09b")
            .await
            .unwrap(),
        10
    );
    assert_eq!(
        gh.submit_review(1347, "COMMENT", "Looks good", &[("file1.txt", 2, "Nit")])
            .await
            .unwrap(),
        80
    );

    // Opening a pull request (GitHub's example of a new one), then listing open ones (its example list).
    serve_example(&server, "pulls/list", 200).await;
    let (opened, created) = gh
        .find_or_create_pr(&NewPullRequest {
            head: "new-topic".into(),
            base: "master".into(),
            title: "Amazing new feature".into(),
            body: "Please pull these awesome changes in!".into(),
            draft: false,
        })
        .await
        .unwrap();
    assert!(created);
    assert_eq!(opened.number, 1347);
    let found = gh.find_open_pr("new-topic").await.unwrap().unwrap();
    assert_eq!(found.base, "master");

    // A GitHub App: its installation on the repository, a token, its own login.
    let app_server = MockServer::start().await;
    for (op, status) in [
        ("apps/get-authenticated", 200),
        ("apps/get-repo-installation", 200),
        ("apps/create-installation-access-token", 201),
        ("issues/get", 200),
    ] {
        serve_example(&app_server, op, status).await;
    }
    let app = app_client_for(&app_server);
    assert_eq!(app.get_issue(1347).await.unwrap().number, 1347);
    assert_eq!(app.viewer_login().await.unwrap(), "octoapp[bot]");
    let token = app.access_token().await.unwrap().unwrap();
    assert_eq!(token.expose(), "ghs_16C7e42F292c6912E7710c838347Ae178B4a");

    let mut hit = check_requests(&server).await;
    hit.extend(check_requests(&app_server).await);
    let listed: BTreeSet<String> = CLIENT_OPERATIONS.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        hit, listed,
        "every operation the client uses, and only those, was exercised"
    );
}

/// Answers a GraphQL request from its query text, as GitHub's schema says GitHub would.
struct GraphQl(Arc<dyn Fn(&str) -> Value + Send + Sync>);

impl Respond for GraphQl {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let query = body["query"].as_str().unwrap_or_default();
        ResponseTemplate::new(200).set_body_json((self.0)(query))
    }
}

/// The client's `issue_context` of issue #7, GitHub answering with `answer`.
async fn issue_context_answered(
    server: &MockServer,
    answer: impl Fn(&str) -> Value + Send + Sync + 'static,
) -> supervisor::github::IssueContext {
    Mock::given(method("POST"))
        .and(path("/graphql"))
        .respond_with(GraphQl(Arc::new(answer)))
        .mount(server)
        .await;
    let board = supervisor::github::BoardRef {
        owner: "octocat".into(),
        number: 1,
        status_field: "Status".into(),
    };
    client_for(server).issue_context(&board, 7).await.unwrap()
}

#[tokio::test]
async fn comment_ids_past_2_31_are_read_as_githubs_bigint() {
    let server = MockServer::start().await;
    // GitHub's `databaseId` is a 32-bit Int: past 2^31 the field fails; `fullDatabaseId` is the
    // same id as a BigInt string.
    let answer = |query: &str| {
        let id_field = if query.contains("fullDatabaseId") {
            json!({"fullDatabaseId": "2250077004", "editor": {"__typename": "User", "login": "mallory"}})
        } else {
            json!({"databaseId": null, "editor": {"__typename": "User", "login": "mallory"}})
        };
        let mut out = json!({"data": {"repository": {"issue": {
            "id": "I_kwDOA", "fullDatabaseId": "7", "number": 7, "title": "Add hours now",
            "body": "Hours.", "url": "https://github.com/octocat/Hello-World/issues/7",
            "state": "OPEN", "author": {"__typename": "User", "login": "alice"},
            "labels": {"nodes": []}, "projectItems": {"nodes": []}, "parent": null,
            "editor": null,
            "comments": {"totalCount": 1, "nodes": [id_field]},
            "timelineItems": {"totalCount": 1, "nodes": [
                {"__typename": "RenamedTitleEvent", "actor": {"__typename": "User", "login": "mallory"},
                 "previousTitle": "Add hours", "currentTitle": "Add hours now"}
            ]}
        }}}});
        if !query.contains("fullDatabaseId") {
            out["errors"] = json!([{"message": "Integer out of bounds: 2250077004 @ databaseId (IssueComment.databaseId). Consider using ID or GraphQL::Types::BigInt instead.",
                "path": ["repository", "issue", "comments", "nodes", 0, "databaseId"]}]);
        }
        out
    };
    let editors = issue_context_answered(&server, answer).await.editors;
    assert_eq!(editors.checked, vec![2_250_077_004]);
    assert_eq!(
        editors.comment(2_250_077_004),
        supervisor::github::CommentEdit::EditedBy("mallory")
    );
    assert_eq!(
        editors.renames,
        vec![supervisor::github::TitleRename {
            actor: "mallory".into(),
            from: "Add hours".into(),
            to: "Add hours now".into()
        }]
    );
}

/// An issue's parent, as GraphQL's `Issue.parent` names it, counts only when it is an issue of
/// the same repository (a sub-issue may have a parent elsewhere, with the same number as an epic
/// here).
#[tokio::test]
async fn an_issues_parent_counts_only_in_its_own_repository() {
    for (repository, expected) in [
        ("octocat/Hello-World", Some(5)),
        ("mallory/Hello-World", None),
    ] {
        let server = MockServer::start().await;
        let answer = move |_: &str| {
            json!({"data": {"repository": {"issue": {
                "id": "I_kwDOA", "fullDatabaseId": "2250077009", "number": 7, "title": "Units",
                "body": "Sealed.", "url": "https://github.com/octocat/Hello-World/issues/7",
                "state": "OPEN", "author": {"__typename": "Bot", "login": "supervisor-bot"},
                "labels": {"nodes": [{"name": "supervisor"}]}, "projectItems": {"nodes": []},
                "editor": null, "comments": {"totalCount": 0, "nodes": []},
                "timelineItems": {"totalCount": 0, "nodes": []},
                "parent": {
                    "number": 5, "state": "CLOSED",
                    "author": {"__typename": "User", "login": "alice"},
                    "labels": {"nodes": [{"name": "supervisor:epic"}]},
                    "repository": {"nameWithOwner": repository}
                }
            }}}})
        };
        let read = issue_context_answered(&server, answer).await;
        assert_eq!(
            read.parent.as_ref().map(|p| p.number),
            expected,
            "{repository}"
        );
        if let Some(parent) = &read.parent {
            assert_eq!(parent.author, "alice");
            assert_eq!(parent.labels, ["supervisor:epic"]);
            assert_eq!(parent.state, IssueState::Closed);
        }
        assert_eq!(
            (
                read.issue.id,
                read.issue.author.as_str(),
                read.issue.comments
            ),
            (2_250_077_009, "supervisor-bot", Some(0))
        );
        assert_eq!(read.board, None);
    }
}

#[tokio::test]
async fn each_graphql_request_carries_only_its_operation() {
    let server = MockServer::start().await;
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let log = seen.clone();
    let answer = move |query: &str| {
        log.lock().unwrap().push(query.to_string());
        json!({"data": {"updateProjectV2ItemFieldValue": {"projectV2Item": {"id": "PVTI_1"}}}})
    };
    Mock::given(method("POST"))
        .and(path("/graphql"))
        .respond_with(GraphQl(Arc::new(answer)))
        .mount(&server)
        .await;
    let item = BoardItem {
        issue: 1,
        project_id: "PVT_1".into(),
        project_number: 1,
        item_id: "PVTI_1".into(),
        field_id: "PVTSSF_1".into(),
        field_name: "Status".into(),
        options: vec![ColumnOption {
            id: "47fc9ee4".into(),
            name: "Done".into(),
        }],
        column: None,
    };
    client_for(&server)
        .move_card(&item, &BoardOption::new("Done"))
        .await
        .unwrap();
    let sent = seen.lock().unwrap().clone();
    assert_eq!(sent.len(), 1);
    let doc = graphql_parser::parse_query::<&str>(&sent[0]).unwrap();
    assert_eq!(
        doc.definitions.len(),
        1,
        "one operation, no other: {}",
        sent[0]
    );
    assert!(sent[0].contains("mutation UpdateItemStatus"));
    assert!(sent[0].len() < 600, "{} bytes", sent[0].len());
}

#[tokio::test]
async fn a_next_page_named_on_another_host_is_still_read() {
    let server = MockServer::start().await;
    let (verb, pattern) = path_of("issues/list-comments");
    let page = example("issues/list-comments", "200");
    // GitHub behind a proxy names its public address in `Link`.
    Mock::given(method(verb.as_str()))
        .and(path_regex(pattern.clone()))
        .and(wiremock::matchers::query_param("page", "2"))
        .respond_with(ResponseTemplate::new(200).set_body_json(page.clone()))
        .mount(&server)
        .await;
    Mock::given(method(verb.as_str()))
        .and(path_regex(pattern))
        .respond_with(ResponseTemplate::new(200).set_body_json(page).insert_header(
            "link",
            "<https://github.example.com/repos/octocat/Hello-World/issues/1347/comments?per_page=100&page=2>; rel=\"next\", <https://github.example.com/repos/octocat/Hello-World/issues/1347/comments?per_page=100&page=2>; rel=\"last\"",
        ))
        .mount(&server)
        .await;
    let comments = client_for(&server).list_comments(1347).await.unwrap();
    assert_eq!(comments.len(), 2, "both pages");
    check_requests(&server).await;
}

#[tokio::test]
async fn a_403_on_check_runs_is_the_checks_permission() {
    let server = MockServer::start().await;
    let (verb, pattern) = path_of("checks/list-for-ref");
    Mock::given(method(verb.as_str()))
        .and(path_regex(pattern))
        .respond_with(
            ResponseTemplate::new(403)
                .set_body_json(json!({"message": "Resource not accessible by integration",
                    "documentation_url": "https://docs.github.com/rest/checks/runs#list-check-runs-for-a-git-reference",
                    "status": "403"}))
                .insert_header("x-accepted-github-permissions", "checks=read"),
        )
        .mount(&server)
        .await;
    let e = client_for(&server)
        .check_runs("main", None)
        .await
        .unwrap_err();
    assert!(
        matches!(&e, GitHubError::MissingPermission { permission, .. } if permission == "Checks: read"),
        "{e}"
    );
    assert!(e.to_string().contains("Checks: read"), "{e}");
    assert_eq!(
        server.received_requests().await.unwrap().len(),
        1,
        "not retried"
    );
}

#[tokio::test]
async fn a_merge_github_refuses_is_not_mergeable_or_its_head_moved_and_never_sent_twice() {
    const REVIEWED: &str = "6dcb09b5b57875f334f61aebed695e2e4193db5e";
    for status in [405, 409, 404] {
        let server = MockServer::start().await;
        if status == 404 {
            let (verb, pattern) = path_of("pulls/merge");
            Mock::given(method(verb.as_str()))
                .and(path_regex(pattern))
                .respond_with(ResponseTemplate::new(404).set_body_json(
                    json!({"message": "Not Found", "documentation_url": "https://docs.github.com/rest"}),
                ))
                .mount(&server)
                .await;
        } else {
            serve_example(&server, "pulls/merge", status).await;
        }
        let e = client_for(&server)
            .merge_pull(1347, MergeMethod::Squash, Some(REVIEWED))
            .await
            .unwrap_err();
        assert_eq!(e.status(), Some(status), "{e}");
        let text = e.to_string();
        match (status, &e) {
            (405, MergeError::NotMergeable { number, message }) => {
                assert_eq!(*number, 1347);
                assert_eq!(message, "Pull Request is not mergeable");
                assert!(
                    text.contains("resolve that on GitHub, then merge again"),
                    "{text}"
                );
            }
            (
                409,
                MergeError::HeadMoved {
                    number,
                    expected,
                    message,
                },
            ) => {
                assert_eq!((*number, expected.as_str()), (1347, REVIEWED));
                assert!(message.contains("Head branch was modified"), "{message}");
                assert!(
                    text.contains("review the new head, then merge it"),
                    "{text}"
                );
            }
            (404, MergeError::GitHub(GitHubError::PullNotFound { number, .. })) => {
                assert_eq!(*number, 1347)
            }
            _ => panic!("{status}: {e:?}"),
        }
        assert_eq!(
            server.received_requests().await.unwrap().len(),
            1,
            "a refused merge is not sent again"
        );
        assert_eq!(
            check_requests(&server).await,
            BTreeSet::from(["pulls/merge".to_string()])
        );
    }
    let sent = {
        let server = MockServer::start().await;
        serve_example(&server, "pulls/merge", 200).await;
        let gh = client_for(&server);
        gh.merge_pull(1347, MergeMethod::Rebase, None)
            .await
            .unwrap();
        check_requests(&server).await;
        server.received_requests().await.unwrap()[0].body.clone()
    };
    assert_eq!(
        serde_json::from_slice::<Value>(&sent).unwrap(),
        json!({"merge_method": "rebase"}),
        "no head is asked for when none was given"
    );
}

#[tokio::test]
async fn mergeability_unknown_at_first_is_read_again() {
    let server = MockServer::start().await;
    let (verb, pattern) = path_of("pulls/get");
    let mut unknown = example("pulls/get", "200");
    unknown["mergeable"] = Value::Null;
    unknown["mergeable_state"] = json!("unknown");
    let mut conflicting = unknown.clone();
    conflicting["mergeable"] = json!(false);
    conflicting["mergeable_state"] = json!("dirty");
    Mock::given(method(verb.as_str()))
        .and(path_regex(pattern.clone()))
        .respond_with(ResponseTemplate::new(200).set_body_json(unknown))
        .up_to_n_times(2)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method(verb.as_str()))
        .and(path_regex(pattern))
        .respond_with(ResponseTemplate::new(200).set_body_json(conflicting))
        .mount(&server)
        .await;
    let gh = client_for(&server);
    assert_eq!(
        gh.mergeable(1347, &MergeablePoll::loopback())
            .await
            .unwrap(),
        Some(false)
    );
    assert_eq!(server.received_requests().await.unwrap().len(), 3);
}

#[tokio::test]
async fn slow_headers_time_out_and_the_read_is_retried() {
    let server = MockServer::start().await;
    let (verb, pattern) = path_of("issues/get");
    Mock::given(method(verb.as_str()))
        .and(path_regex(pattern.clone()))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(example("issues/get", "200"))
                .set_delay(Duration::from_secs(2)),
        )
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    serve_example(&server, "issues/get", 200).await;
    let started = std::time::Instant::now();
    let issue = client_for(&server).get_issue(1347).await.unwrap();
    assert_eq!(issue.number, 1347);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(server.received_requests().await.unwrap().len(), 2);
    // A write that timed out is not sent again blindly.
    let (verb, pattern) = path_of("issues/create-comment");
    Mock::given(method(verb.as_str()))
        .and(path_regex(pattern))
        .respond_with(
            ResponseTemplate::new(201)
                .set_body_json(example("issues/create-comment", "201"))
                .set_delay(Duration::from_secs(2)),
        )
        .mount(&server)
        .await;
    let e = client_for(&server)
        .create_comment(1347, "no marker")
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            GitHubError::Network {
                timed_out: true,
                ..
            }
        ),
        "{e}"
    );
}

/// A server that answers the first `faulty` connections with `fault` (bytes, then a close) and
/// later ones with GitHub's example issue.
fn raw_server(faulty: usize, fault: &'static [u8]) -> (String, Arc<Mutex<usize>>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let served = Arc::new(Mutex::new(0));
    let count = served.clone();
    let body = example("issues/get", "200").to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(faulty + 4) {
            let Ok(mut s) = stream else { continue };
            let mut buf = [0u8; 8192];
            let _ = s.read(&mut buf);
            let n = {
                let mut c = count.lock().unwrap();
                *c += 1;
                *c
            };
            if n <= faulty {
                let _ = s.write_all(fault);
            } else {
                let _ = write!(
                    s,
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
            let _ = s.flush();
        }
    });
    (url, served)
}

fn raw_client(url: &str) -> GitHub {
    let mut cfg = ClientConfig::new(
        url,
        Some(Token::new("ghp_contract0123456789").unwrap()),
        RepoSlug::parse("octocat/Hello-World").unwrap(),
    );
    cfg.retry = policy();
    GitHub::new(cfg).unwrap()
}

#[tokio::test]
async fn dropped_connections_are_retried() {
    let (url, served) = raw_server(2, b"");
    let issue = raw_client(&url).get_issue(1347).await.unwrap();
    assert_eq!(issue.number, 1347);
    assert_eq!(*served.lock().unwrap(), 3);
}

#[tokio::test]
async fn truncated_bodies_are_retried_then_named() {
    const CUT: &[u8] =
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 5000\r\n\r\n{\"id\": 1, \"number\": 13";
    let (url, served) = raw_server(1, CUT);
    assert_eq!(raw_client(&url).get_issue(1347).await.unwrap().number, 1347);
    assert_eq!(*served.lock().unwrap(), 2);
    // Cut every time: a network error naming the route, never a half-read issue.
    let (url, _) = raw_server(10, CUT);
    let e = raw_client(&url).get_issue(1347).await.unwrap_err();
    assert!(matches!(e, GitHubError::Network { .. }), "{e}");
    assert!(e.to_string().contains("/issues/{number}"), "{e}");
}

/// The request bodies (and paths) of the writes an epic's re-planning sends.
async fn sent_writes(server: &MockServer) -> Vec<(String, String, Value)> {
    server
        .received_requests()
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.method.as_str() != "GET")
        .map(|r| {
            let body = if r.body.is_empty() {
                Value::Null
            } else {
                serde_json::from_slice(&r.body).unwrap()
            };
            (r.method.to_string(), r.url.path().to_string(), body)
        })
        .collect()
}

#[tokio::test]
async fn re_planning_writes_send_what_githubs_description_asks() {
    let server = MockServer::start().await;
    for (op, status) in [
        ("issues/update", 200),
        ("pulls/update", 200),
        ("issues/remove-dependency-blocked-by", 200),
    ] {
        serve_example(&server, op, status).await;
    }
    let gh = client_for(&server);
    let issue = gh
        .update_issue(1347, "New title", "New body")
        .await
        .unwrap();
    assert_eq!(issue.author, "octocat");
    gh.close_issue_as(1347, CloseReason::NotPlanned, None)
        .await
        .unwrap();
    gh.close_issue(1347, None).await.unwrap();
    gh.close_pull(1347).await.unwrap();
    gh.remove_blocked_by(1347, 42).await.unwrap();
    assert_eq!(
        check_requests(&server).await,
        BTreeSet::from([
            "issues/update".to_string(),
            "pulls/update".to_string(),
            "issues/remove-dependency-blocked-by".to_string(),
        ])
    );
    let issue = "/repos/octocat/Hello-World/issues/1347";
    assert_eq!(
        sent_writes(&server).await,
        vec![
            (
                "PATCH".into(),
                issue.into(),
                json!({"title": "New title", "body": "New body"})
            ),
            (
                "PATCH".into(),
                issue.into(),
                json!({"state": "closed", "state_reason": "not_planned"})
            ),
            (
                "PATCH".into(),
                issue.into(),
                json!({"state": "closed", "state_reason": "completed"})
            ),
            (
                "PATCH".into(),
                "/repos/octocat/Hello-World/pulls/1347".into(),
                json!({"state": "closed"})
            ),
            (
                "DELETE".into(),
                format!("{issue}/dependencies/blocked_by/42"),
                Value::Null
            ),
        ]
    );
    assert_eq!(
        serde_json::to_value(CloseReason::NotPlanned).unwrap(),
        json!("not_planned")
    );
}

#[tokio::test]
async fn a_404_removing_a_dependency_is_no_error_unless_the_issue_is_missing() {
    let not_found = || {
        ResponseTemplate::new(404).set_body_json(
            json!({"message": "Not Found", "documentation_url": "https://docs.github.com/rest"}),
        )
    };
    // The dependency is not there (or the server has no issue dependencies); the issue is.
    let server = MockServer::start().await;
    let (verb, pattern) = path_of("issues/remove-dependency-blocked-by");
    Mock::given(method(verb.as_str()))
        .and(path_regex(pattern.clone()))
        .respond_with(not_found())
        .mount(&server)
        .await;
    serve_example(&server, "issues/get", 200).await;
    client_for(&server)
        .remove_blocked_by(1347, 42)
        .await
        .unwrap();
    assert_eq!(
        check_requests(&server).await,
        BTreeSet::from([
            "issues/remove-dependency-blocked-by".to_string(),
            "issues/get".to_string(),
        ])
    );
    // The issue itself is missing: named.
    let server = MockServer::start().await;
    Mock::given(method(verb.as_str()))
        .and(path_regex(pattern))
        .respond_with(not_found())
        .mount(&server)
        .await;
    let (verb, pattern) = path_of("issues/get");
    Mock::given(method(verb.as_str()))
        .and(path_regex(pattern))
        .respond_with(not_found())
        .mount(&server)
        .await;
    let e = client_for(&server)
        .remove_blocked_by(1347, 42)
        .await
        .unwrap_err();
    assert!(
        matches!(e, GitHubError::IssueNotFound { number: 1347, .. }),
        "{e}"
    );
    // Closing a pull request that does not exist names it.
    let (verb, pattern) = path_of("pulls/update");
    Mock::given(method(verb.as_str()))
        .and(path_regex(pattern))
        .respond_with(not_found())
        .mount(&server)
        .await;
    let e = client_for(&server).close_pull(1347).await.unwrap_err();
    assert!(
        matches!(e, GitHubError::PullNotFound { number: 1347, .. }),
        "{e}"
    );
}
