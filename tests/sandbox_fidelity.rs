//! The sandbox GitHub held to what GitHub documents for reviews, review threads and webhooks:
//! replies only to top-level comments, each reply (and each single line comment) in a review of its
//! own, 32-bit `databaseId`s failing past 2^31, threads outdated by later commits, the required
//! `commit_id`, the two shapes of 422, single reviews and review comments, who may resolve a
//! thread, and every webhook payload validated against GitHub's published schemas
//! (`@octokit/webhooks-schemas`, installed by `scripts/install-tools.sh`).

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use common::*;
use serde_json::{Value, json};
use supervisor::events::WebhookSecret;
use supervisor::github::{GitHub, MergeError, MergeMethod};
use supervisor::sandbox::{
    Act, GitRemote, HookKind, PullSeed, Sandbox, SandboxState, TokenSeed, UserSeed, WebhookTarget,
};

/// bob: no association with the repository (read access), neither author nor reviewer.
const BOB: &str = "tok-bob-0123456789";
/// carol: no association either, but the pull request is hers.
const CAROL: &str = "tok-carol-0123456789";
/// The pull request, from `feature` (which adds verbose.txt and flags.txt) into main.
const PR: u64 = 5;
const FLAGS: &str = "a\nb\nc\n";

struct Fixture {
    sandbox: Sandbox,
    /// alice, a member of the organization (write access).
    gh: GitHub,
    _dir: tempfile::TempDir,
}

impl Fixture {
    async fn new(webhook: Option<WebhookTarget>) -> Fixture {
        Fixture::with(webhook, |_| {}).await
    }

    async fn with(
        webhook: Option<WebhookTarget>,
        change: impl FnOnce(&mut SandboxState),
    ) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let git_dir = dir.path().join("remote.git");
        let git = GitRemote::create(&git_dir, "main").unwrap();
        git.commit_files(
            "feature",
            Some("main"),
            &[("verbose.txt", "--verbose\n"), ("flags.txt", FLAGS)],
            "add flags",
        )
        .unwrap();
        let mut state = seed(&git_dir);
        for login in ["bob", "carol"] {
            state.users.push(UserSeed {
                login: login.into(),
                association: Some("NONE".into()),
                ..UserSeed::default()
            });
        }
        state.tokens.push(TokenSeed::classic(BOB, "bob", &["repo"]));
        state
            .tokens
            .push(TokenSeed::classic(CAROL, "carol", &["repo"]));
        state.pulls.push(PullSeed::new(
            PR,
            "feature",
            "main",
            "Flags",
            "Closes #1",
            "carol",
        ));
        change(&mut state);
        let sandbox = Sandbox::start_with_webhook(state, 0, webhook)
            .await
            .expect("sandbox starts");
        sandbox
            .check_conformance()
            .expect("the vendored description compiles");
        let gh = client(&sandbox, Some(FULL), quick());
        Fixture {
            sandbox,
            gh,
            _dir: dir,
        }
    }

    async fn call(&self, token: &str, method: &str, path: &str, body: &Value) -> RawAnswer {
        let auth = format!("Bearer {token}");
        let text = if body.is_null() {
            String::new()
        } else {
            body.to_string()
        };
        raw(
            &self.sandbox.url(),
            method,
            path,
            &[
                ("authorization", &auth),
                ("content-type", "application/json"),
            ],
            &text,
        )
        .await
    }

    async fn graphql(&self, token: &str, query: &str) -> Value {
        let a = self
            .call(token, "POST", "/graphql", &json!({ "query": query }))
            .await;
        assert_eq!(a.status, 200, "{}", a.body);
        a.json()
    }

    /// `fields` of the pull request, as `token`'s user reads them through GraphQL (the whole
    /// answer, errors included).
    async fn pull_fields(&self, token: &str, fields: &str) -> Value {
        let query = format!(
            r#"{{ repository(owner: "acme", name: "widgets") {{ pullRequest(number: {PR}) {{ {fields} }} }} }}"#
        );
        self.graphql(token, &query).await
    }

    /// alice's review (event COMMENT) with one line comment on flags.txt `line`: the comment's id.
    async fn thread_on(&self, line: u64) -> u64 {
        let body = format!("Line {line}?");
        self.gh
            .submit_review(PR, "COMMENT", "", &[("flags.txt", line, &body)])
            .await
            .unwrap();
        self.sandbox.with_state(|s| {
            s.pull(PR)
                .unwrap()
                .review_comments
                .iter()
                .find(|c| c.body == body)
                .unwrap()
                .id
        })
    }

    fn head(&self) -> String {
        self.sandbox.git().branch_sha("feature").unwrap()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            if let Err(report) = self.sandbox.conformance_report() {
                panic!("{report}");
            }
        }
    }
}

fn review_comments(f: &Fixture) -> Vec<supervisor::sandbox::ReviewCommentSeed> {
    f.sandbox
        .with_state(|s| s.pull(PR).unwrap().review_comments.clone())
}

#[tokio::test]
async fn a_reply_to_a_reply_is_refused_and_each_reply_is_a_review_of_its_own() {
    within(async {
        let f = Fixture::new(None).await;
        let root = f.thread_on(2).await;
        let first = f.gh.reply_in_thread(PR, root, "Fixed.").await.unwrap();

        // GitHub: "This must be the ID of a top-level review comment, not a reply to that
        // comment. Replies to replies are not supported."
        let path = format!("/repos/acme/widgets/pulls/{PR}/comments/{first}/replies");
        let refused = f.call(FULL, "POST", &path, &json!({"body": "Again."})).await;
        assert_eq!(refused.status, 422, "{}", refused.body);
        let body = refused.json();
        assert_eq!(body["message"], "Validation Failed");
        let error = &body["errors"][0];
        assert_eq!(error["resource"], "PullRequestReviewComment");
        assert!(
            error["message"]
                .as_str()
                .unwrap()
                .contains("Replies to replies are not supported"),
            "{body}"
        );
        assert_eq!(review_comments(&f).len(), 2, "nothing was added");
        let missing = f
            .call(
                FULL,
                "POST",
                &format!("/repos/acme/widgets/pulls/{PR}/comments/99/replies"),
                &json!({"body": "?"}),
            )
            .await;
        assert_eq!(missing.status, 404);

        // The reply belongs to a new, empty COMMENTED review, in REST and in GraphQL.
        let comments = review_comments(&f);
        let (top, reply) = (&comments[0], &comments[1]);
        assert_eq!(reply.in_reply_to, Some(root));
        let own = reply.review_id.expect("the reply has a review");
        assert_ne!(Some(own), top.review_id);
        let path = format!("/repos/acme/widgets/pulls/comments/{first}");
        let answer = f.call(FULL, "GET", &path, &Value::Null).await.json();
        assert_eq!(answer["pull_request_review_id"], json!(own));
        assert_eq!(answer["in_reply_to_id"], json!(root));
        let path = format!("/repos/acme/widgets/pulls/{PR}/reviews/{own}");
        let review = f.call(FULL, "GET", &path, &Value::Null).await;
        assert_eq!(review.status, 200, "{}", review.body);
        let review = review.json();
        assert_eq!(
            (&review["state"], &review["body"], &review["user"]["login"]),
            (&json!("COMMENTED"), &json!(""), &json!("alice"))
        );
        let data = f.pull_fields(
                FULL,
                r#"
                    reviews(first: 10) { nodes { state body } }
                    reviewThreads(first: 10) { nodes { comments(first: 10) { nodes {
                      fullDatabaseId pullRequestReview { fullDatabaseId state body } } } } }"#,
            )
            .await;
        let pr = &data["data"]["repository"]["pullRequest"];
        assert_eq!(
            pr["reviews"]["nodes"],
            json!([{"state": "COMMENTED", "body": ""}, {"state": "COMMENTED", "body": ""}])
        );
        let nodes = &pr["reviewThreads"]["nodes"][0]["comments"]["nodes"];
        assert_eq!(
            nodes[1]["pullRequestReview"],
            json!({"fullDatabaseId": own.to_string(), "state": "COMMENTED", "body": ""})
        );

        // A single line comment also comes with a review of its own.
        let single = f
            .call(
                FULL,
                "POST",
                &format!("/repos/acme/widgets/pulls/{PR}/comments"),
                &json!({"body": "Here too.", "commit_id": f.head(), "path": "flags.txt", "line": 3}),
            )
            .await;
        assert_eq!(single.status, 201, "{}", single.body);
        let single = single.json();
        assert!(single["pull_request_review_id"].is_u64(), "{single}");
        assert!(single.get("in_reply_to_id").is_none());
    })
    .await
}

#[tokio::test]
async fn review_and_review_comment_database_ids_past_2_31_fail_as_32_bit_ints() {
    within(async {
        let f = Fixture::new(None).await;
        let root = f.thread_on(2).await;
        assert!(root > i32::MAX as u64, "ids as large as github.com's");
        let data = f.pull_fields(
                FULL,
                r#"
                    reviews(first: 1) { nodes { databaseId fullDatabaseId } }
                    reviewThreads(first: 1) { nodes { comments(first: 1) { nodes { databaseId fullDatabaseId } } } }"#,
            )
            .await;
        let pr = &data["data"]["repository"]["pullRequest"];
        let review = &pr["reviews"]["nodes"][0];
        let comment = &pr["reviewThreads"]["nodes"][0]["comments"]["nodes"][0];
        assert_eq!(review["databaseId"], Value::Null, "{data}");
        assert_eq!(comment["databaseId"], Value::Null, "{data}");
        assert_eq!(comment["fullDatabaseId"], json!(root.to_string()));
        assert_eq!(review["fullDatabaseId"], json!((root - 1).to_string()));
        let errors = data["errors"].as_array().unwrap();
        let messages: Vec<&str> = errors.iter().filter_map(|e| e["message"].as_str()).collect();
        assert_eq!(
            messages,
            [
                format!(
                    "Integer out of bounds: {} @ databaseId (PullRequestReview.databaseId). Consider using ID or GraphQL::Types::BigInt instead.",
                    root - 1
                ),
                format!(
                    "Integer out of bounds: {root} @ databaseId (PullRequestReviewComment.databaseId). Consider using ID or GraphQL::Types::BigInt instead."
                ),
            ],
            "{data}"
        );
        assert_eq!(
            errors[1]["path"],
            json!(["repository", "pullRequest", "reviewThreads", "nodes", 0, "comments", "nodes", 0, "databaseId"])
        );
    })
    .await
}

#[tokio::test]
async fn a_thread_whose_line_a_later_commit_changed_is_outdated() {
    within(async {
        let f = Fixture::new(None).await;
        let changed = f.thread_on(2).await;
        let kept = f.thread_on(3).await;
        // Line 2 changes, and a line is added above line 3.
        f.sandbox
            .git()
            .commit_files("feature", None, &[("flags.txt", "a\nz\nB\nc\n")], "rework")
            .unwrap();
        let threads = f
            .pull_fields(
                FULL,
                r#"
                    reviewThreads(first: 10) { nodes { isOutdated line originalLine
                      comments(first: 1) { nodes { outdated line originalLine } } } }"#,
            )
            .await;
        assert_eq!(threads.get("errors"), None, "{threads}");
        let nodes = &threads["data"]["repository"]["pullRequest"]["reviewThreads"]["nodes"];
        assert_eq!(
            nodes,
            &json!([
                {"isOutdated": true, "line": null, "originalLine": 2,
                 "comments": {"nodes": [{"outdated": true, "line": null, "originalLine": 2}]}},
                {"isOutdated": false, "line": 4, "originalLine": 3,
                 "comments": {"nodes": [{"outdated": false, "line": 4, "originalLine": 3}]}},
            ])
        );
        let listed = f
            .call(
                FULL,
                "GET",
                &format!("/repos/acme/widgets/pulls/{PR}/comments"),
                &Value::Null,
            )
            .await
            .json();
        let by_id = |id: u64| {
            listed
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["id"] == json!(id))
                .unwrap()
                .clone()
        };
        let (old, new) = (by_id(changed), by_id(kept));
        // The REST description types `line` and `position` as integers: an outdated comment
        // leaves them out.
        assert_eq!((old.get("line"), &old["original_line"]), (None, &json!(2)));
        assert_eq!(old.get("position"), None);
        assert!(old["original_position"].is_u64(), "{old}");
        assert!(new["position"].is_u64(), "{new}");
        assert_eq!(
            (&new["line"], &new["original_line"]),
            (&json!(4), &json!(3))
        );
        assert_eq!(
            new["commit_id"],
            json!(f.head()),
            "a comment that still applies follows the head"
        );
        assert_ne!(old["commit_id"], json!(f.head()));
        assert_eq!(old["original_commit_id"], new["original_commit_id"]);
    })
    .await
}

#[tokio::test]
async fn line_comments_need_a_commit_and_a_line_of_the_diff_refused_in_each_routes_shape() {
    within(async {
        let f = Fixture::new(None).await;
        let comments = format!("/repos/acme/widgets/pulls/{PR}/comments");
        // GitHub requires `commit_id` (the description's `required`).
        let a = f
            .call(FULL, "POST", &comments, &json!({"body": "?", "path": "flags.txt", "line": 1}))
            .await;
        assert_eq!(a.status, 422, "{}", a.body);
        assert_eq!(a.json()["message"], "Invalid request.\n\n\"commit_id\" wasn't supplied.");
        let sent = f.sandbox.take_violations();
        assert!(
            sent.iter().all(|v| v.to_string().contains("commit_id")),
            "only the request broke the description: {sent:?}"
        );
        let a = f
            .call(
                FULL,
                "POST",
                &comments,
                &json!({"body": "?", "commit_id": "0123456789abcdef0123456789abcdef01234567", "path": "flags.txt", "line": 1}),
            )
            .await;
        assert_eq!(a.status, 422, "{}", a.body);
        // A line outside the diff: objects in `errors` here (`validation-error`)…
        let a = f
            .call(
                FULL,
                "POST",
                &comments,
                &json!({"body": "?", "commit_id": f.head(), "path": "README.md", "line": 1}),
            )
            .await;
        assert_eq!(a.status, 422, "{}", a.body);
        let body = a.json();
        assert_eq!(body["message"], "Validation Failed");
        assert_eq!(
            body["errors"][0]["message"],
            "pull_request_review_thread.line must be part of the diff"
        );
        // …and strings in a review's (`validation-error-simple`).
        let a = f
            .call(
                FULL,
                "POST",
                &format!("/repos/acme/widgets/pulls/{PR}/reviews"),
                &json!({"event": "COMMENT", "body": "x",
                    "comments": [{"path": "README.md", "line": 1, "body": "?"}]}),
            )
            .await;
        assert_eq!(a.status, 422, "{}", a.body);
        assert_eq!(
            a.json()["errors"],
            json!(["Pull request review thread line must be part of the diff"])
        );
        assert!(review_comments(&f).is_empty());
    })
    .await
}

#[tokio::test]
async fn one_review_and_one_review_comment_are_read_by_id() {
    within(async {
        let f = Fixture::new(None).await;
        let id = f.thread_on(1).await;
        let review = review_comments(&f)[0].review_id.unwrap();
        let listed = f
            .call(
                FULL,
                "GET",
                &format!("/repos/acme/widgets/pulls/{PR}/reviews"),
                &Value::Null,
            )
            .await
            .json();
        let one = f
            .call(
                FULL,
                "GET",
                &format!("/repos/acme/widgets/pulls/{PR}/reviews/{review}"),
                &Value::Null,
            )
            .await;
        assert_eq!(one.status, 200, "{}", one.body);
        assert_eq!(one.json(), listed[0]);
        let comment = f
            .call(
                FULL,
                "GET",
                &format!("/repos/acme/widgets/pulls/comments/{id}"),
                &Value::Null,
            )
            .await;
        assert_eq!(comment.status, 200, "{}", comment.body);
        assert_eq!(comment.json()["body"], "Line 1?");
        for path in [
            format!("/repos/acme/widgets/pulls/{PR}/reviews/{}", review + 100),
            format!("/repos/acme/widgets/pulls/comments/{}", id + 100),
        ] {
            assert_eq!(
                f.call(FULL, "GET", &path, &Value::Null).await.status,
                404,
                "{path}"
            );
        }
    })
    .await
}

#[tokio::test]
async fn a_merge_through_the_api_merges_in_the_repository_only_the_head_that_was_reviewed() {
    within(async {
        let f = Fixture::new(None).await;
        let git = f.sandbox.git();
        let merge = format!("/repos/acme/widgets/pulls/{PR}/merge");
        // Someone pushed after the review: the head asked for is not the head any more.
        let reviewed = f.head();
        git.commit_files(
            "feature",
            None,
            &[("flags.txt", "a\nb\nc\nd\n")],
            "one more flag",
        )
        .unwrap();
        let main = git.branch_sha("main").unwrap();
        let e =
            f.gh.merge_pull(PR, MergeMethod::Merge, Some(&reviewed))
                .await
                .unwrap_err();
        assert!(matches!(e, MergeError::HeadMoved { .. }), "{e}");
        // Only those who may push merge.
        let refused = f.call(BOB, "PUT", &merge, &json!({})).await;
        assert_eq!(refused.status, 403, "{}", refused.body);
        assert_eq!(git.branch_sha("main").unwrap(), main, "nothing merged yet");

        let head = f.head();
        let merged =
            f.gh.merge_pull(PR, MergeMethod::Merge, Some(&head))
                .await
                .unwrap();
        assert!(merged.merged);
        assert_eq!(git.branch_sha("main").unwrap(), merged.sha, "main moved");
        let commit = git.commit(&merged.sha).unwrap();
        assert_eq!(commit.parents, [main, head]);
        assert_eq!(commit.author, "alice");
        assert_eq!(
            commit.message,
            format!("Merge pull request #{PR} from acme/feature\n\nFlags")
        );
        assert!(
            !git.has_commits_beyond("main", "feature"),
            "main has the feature's commits"
        );
        let pr = f.gh.get_pr(PR).await.unwrap();
        assert!(pr.merged && pr.state == "closed", "{pr:?}");
        let raw = f
            .call(
                FULL,
                "GET",
                &format!("/repos/acme/widgets/pulls/{PR}"),
                &Value::Null,
            )
            .await
            .json();
        assert_eq!(raw["merge_commit_sha"], json!(merged.sha));
        assert_eq!(raw["merged_by"]["login"], "alice");
        assert!(raw["merged_at"].is_string(), "{raw}");

        // Merged already: GitHub's 405.
        let again =
            f.gh.merge_pull(PR, MergeMethod::Merge, None)
                .await
                .unwrap_err();
        assert!(matches!(again, MergeError::NotMergeable { .. }), "{again}");
    })
    .await
}

#[tokio::test]
async fn a_conflicting_or_draft_pull_request_is_not_merged_and_a_squash_is_one_commit() {
    within(async {
        let f = Fixture::with(None, |state| {
            state
                .pulls
                .push(PullSeed::new(6, "clash", "main", "Clash", "", "carol"));
            let mut draft = PullSeed::new(7, "feature", "main", "Draft", "", "carol");
            draft.draft = true;
            state.pulls.push(draft);
        })
        .await;
        let git = f.sandbox.git();
        git.commit_files(
            "clash",
            Some("main"),
            &[("README.md", "theirs\n")],
            "theirs",
        )
        .unwrap();
        git.commit_files("main", None, &[("README.md", "ours\n")], "ours")
            .unwrap();
        let main = git.branch_sha("main").unwrap();
        for method in [MergeMethod::Merge, MergeMethod::Squash, MergeMethod::Rebase] {
            let e = f.gh.merge_pull(6, method, None).await.unwrap_err();
            assert!(
                matches!(e, MergeError::NotMergeable { .. }),
                "{method:?}: {e}"
            );
        }
        let e =
            f.gh.merge_pull(7, MergeMethod::Merge, None)
                .await
                .unwrap_err();
        assert!(
            matches!(&e, MergeError::NotMergeable { message, .. } if message.contains("draft")),
            "{e}"
        );
        assert_eq!(git.branch_sha("main").unwrap(), main, "nothing merged");

        // The same branch from a pull request that is no draft, squashed.
        let squashed =
            f.gh.merge_pull(PR, MergeMethod::Squash, None)
                .await
                .unwrap();
        let commit = git.commit(&squashed.sha).unwrap();
        assert_eq!(commit.parents, [main], "one commit on main");
        assert_eq!(commit.message, format!("Flags (#{PR})"));
    })
    .await
}

#[tokio::test]
async fn only_the_author_and_those_with_write_access_resolve_a_thread() {
    within(async {
        let f = Fixture::new(None).await;
        f.thread_on(2).await;
        let thread = f.sandbox.with_state(|s| {
            format!("PRRT_{}", s.pull(PR).unwrap().review_comments[0].id)
        });
        let can = |token: &'static str| {
            let f = &f;
            async move {
                let data = f
                    .graphql(
                        token,
                        &format!(
                            r#"{{ repository(owner: "acme", name: "widgets") {{ viewerPermission
                            pullRequest(number: {PR}) {{ reviewThreads(first: 1) {{ nodes {{ viewerCanResolve }} }} }} }} }}"#
                        ),
                    )
                    .await;
                let repo = &data["data"]["repository"];
                (
                    repo["viewerPermission"].as_str().unwrap().to_string(),
                    repo["pullRequest"]["reviewThreads"]["nodes"][0]["viewerCanResolve"] == true,
                )
            }
        };
        assert_eq!(can(BOB).await, ("READ".into(), false));
        assert_eq!(can(CAROL).await, ("READ".into(), true));
        assert_eq!(can(FULL).await, ("WRITE".into(), true));
        let resolve = format!(
            r#"mutation {{ resolveReviewThread(input: {{threadId: "{thread}"}}) {{ thread {{ isResolved }} }} }}"#
        );
        let refused = f.graphql(BOB, &resolve).await;
        assert_eq!(refused["data"]["resolveReviewThread"], Value::Null, "{refused}");
        assert_eq!(refused["errors"][0]["type"], "FORBIDDEN");
        assert_eq!(
            refused["errors"][0]["message"],
            "bob does not have the correct permissions to execute `ResolveReviewThread`"
        );
        assert_eq!(review_comments(&f)[0].resolved_by, None);
        let by_author = f.graphql(CAROL, &resolve).await;
        assert_eq!(
            by_author["data"]["resolveReviewThread"]["thread"]["isResolved"],
            true,
            "{by_author}"
        );
        let unresolve = resolve.replace("resolveReviewThread", "unresolveReviewThread");
        let refused = f.graphql(BOB, &unresolve).await;
        assert_eq!(refused["errors"][0]["type"], "FORBIDDEN", "{refused}");
        f.gh.resolve_thread(&thread).await.unwrap();
    })
    .await
}

/// A webhook receiver that keeps what it is sent.
#[derive(Clone, Default)]
struct Inbox(Arc<Mutex<Vec<(HeaderMap, Value)>>>);

impl Inbox {
    async fn start() -> (String, Inbox) {
        let inbox = Inbox::default();
        let keep = inbox.clone();
        let app = axum::Router::new().route(
            "/webhook",
            axum::routing::post(move |headers: HeaderMap, body: Bytes| {
                let keep = keep.clone();
                async move {
                    let value = serde_json::from_slice(&body).expect("a JSON payload");
                    keep.0.lock().unwrap().push((headers, value));
                    StatusCode::OK
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/webhook", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        (url, inbox)
    }

    /// What arrived: (event, action, target type, payload).
    fn received(&self) -> Vec<(String, String, String, Value)> {
        let header = |h: &HeaderMap, k: &str| {
            h.get(k)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string()
        };
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|(h, v)| {
                (
                    header(h, "x-github-event"),
                    v["action"].as_str().unwrap_or_default().to_string(),
                    header(h, "x-github-hook-installation-target-type"),
                    v.clone(),
                )
            })
            .collect()
    }
}

const SECRET: &str = "a-webhook-secret-of-some-length";

fn target(url: &str, kind: Option<HookKind>) -> WebhookTarget {
    WebhookTarget {
        kind,
        ..WebhookTarget::new(url, WebhookSecret::new(SECRET).unwrap())
    }
}

/// Wait until the sandbox has sent everything it queued.
async fn delivered(sandbox: &Sandbox) {
    while sandbox.deliveries_pending() > 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// GitHub's published webhook schemas (`@octokit/webhooks-schemas`, draft-07), one definition a
/// `<event>$<action>`.
struct WebhookSchemas {
    schemas: boon::Schemas,
    compiler: boon::Compiler,
}

const SCHEMAS_URL: &str = "https://sandbox.test/webhooks-schemas.json";
/// GitHub's OpenAPI description of webhooks, the parts vendored in tests/fixtures/webhooks.
const OPENAPI_URL: &str = "https://sandbox.test/openapi-webhooks.json";
/// What a card's field change carries beyond `@octokit/webhooks-schemas` 7.6.1, which predates
/// them: GitHub sends them, its OpenAPI webhook description lists them, the events room reads
/// them. They are checked against that description instead.
const FIELD_CHANGE_EXTRAS: [&str; 4] = ["field_name", "project_number", "from", "to"];

impl WebhookSchemas {
    fn load() -> WebhookSchemas {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(".tools/schemas/node_modules/@octokit/webhooks-schemas/schema.json");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e}; scripts/install-tools.sh installs GitHub's webhook schemas (scripts/test.sh runs it)",
                path.display()
            )
        });
        let doc: Value = serde_json::from_str(&text).unwrap();
        let mut compiler = boon::Compiler::new();
        // boon's own check takes `…/blobs{/sha}` for an unclosed brace: RFC 6570's grammar instead.
        compiler.register_format(boon::Format {
            name: "uri-template",
            func: uri_template,
        });
        compiler.add_resource(SCHEMAS_URL, doc).unwrap();
        let vendored = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/webhooks/schemas.json");
        let vendored: Value = serde_json::from_slice(&std::fs::read(vendored).unwrap()).unwrap();
        compiler
            .add_resource(
                OPENAPI_URL,
                json!({ "components": { "schemas": vendored["schemas"] } }),
            )
            .unwrap();
        WebhookSchemas {
            schemas: boon::Schemas::new(),
            compiler,
        }
    }

    fn check(&mut self, url: &str, value: &Value) -> Vec<String> {
        let index = self
            .compiler
            .compile(url, &mut self.schemas)
            .unwrap_or_else(|e| panic!("no schema {url}: {e}"));
        match self.schemas.validate(value, index) {
            Ok(()) => Vec::new(),
            Err(e) => format!("{e:#}").lines().map(str::to_string).collect(),
        }
    }

    /// What of `payload` breaks the schema of `event`'s `action`.
    fn problems(&mut self, event: &str, action: &str, payload: &Value) -> Vec<String> {
        let url = format!("{SCHEMAS_URL}#/definitions/{event}${action}");
        if (event, action) != ("projects_v2_item", "edited") {
            return self.check(&url, payload);
        }
        let mut older = payload.clone();
        if let Some(Value::Object(change)) = older.pointer_mut("/changes/field_value") {
            for k in FIELD_CHANGE_EXTRAS {
                change.remove(k);
            }
        }
        let mut found = self.check(&url, &older);
        found.extend(self.check(
            &format!(
                "{OPENAPI_URL}#/components/schemas/webhook-projects-v2-item-edited/properties/changes"
            ),
            &payload["changes"],
        ));
        found
    }
}

/// RFC 6570: literals, and expressions of an optional operator and comma-separated variables,
/// each with an optional prefix length or explode modifier.
fn uri_template(v: &Value) -> Result<(), Box<dyn std::error::Error>> {
    static TEMPLATE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let re = TEMPLATE.get_or_init(|| {
        let var = r"[A-Za-z0-9_%][A-Za-z0-9_%.]*(?::[1-9][0-9]{0,3}|\*)?";
        regex::Regex::new(&format!(r"^(?:[^{{}}]|\{{[+#./;?&]?{var}(?:,{var})*\}})*$")).unwrap()
    });
    match v.as_str() {
        Some(s) if !re.is_match(s) => Err(format!("{s} is no RFC 6570 URI template").into()),
        _ => Ok(()),
    }
}

/// GitHub's timestamps: whole seconds, UTC.
fn timestamps_are_whole_seconds(value: &Value, at: &str, bad: &mut Vec<String>) {
    static WHOLE_SECONDS: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let re = WHOLE_SECONDS
        .get_or_init(|| regex::Regex::new(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$").unwrap());
    match value {
        Value::Object(m) => {
            for (k, v) in m {
                let here = format!("{at}/{k}");
                if k.ends_with("_at") && v.is_string() && !re.is_match(v.as_str().unwrap()) {
                    bad.push(format!("{here}: {v}"));
                }
                timestamps_are_whole_seconds(v, &here, bad);
            }
        }
        Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                timestamps_are_whole_seconds(v, &format!("{at}/{i}"), bad);
            }
        }
        _ => {}
    }
}

/// Everything the sandbox sends webhooks for, played once.
async fn play_everything(f: &Fixture) {
    let act = |a: Act| f.sandbox.act(a).unwrap();
    act(Act::Move {
        issue: 1,
        to: Some("Research".into()),
        by: "alice".into(),
    });
    act(Act::Comment {
        issue: 1,
        body: "/supervisor run".into(),
        by: "alice".into(),
    });
    act(Act::Label {
        issue: 3,
        name: "supervisor".into(),
        by: "alice".into(),
    });
    act(Act::Unlabel {
        issue: 3,
        name: "supervisor".into(),
        by: "alice".into(),
    });
    act(Act::Close {
        issue: 3,
        by: "alice".into(),
    });
    let c = f.gh.create_comment(1, "Working on it.").await.unwrap();
    f.gh.update_comment(c.id, "Working on it (edited).")
        .await
        .unwrap();
    // A pull request's conversation comes as `issue_comment` too.
    f.gh.create_comment(PR, "On the pull request.")
        .await
        .unwrap();
    let root = f.thread_on(2).await;
    f.gh.reply_in_thread(PR, root, "Fixed.").await.unwrap();
    let reviewer = client(&f.sandbox, Some(FULL), quick());
    reviewer
        .submit_review(PR, "REQUEST_CHANGES", "Not yet.", &[])
        .await
        .unwrap();
    delivered(&f.sandbox).await;
}

#[tokio::test]
async fn every_webhook_the_sandbox_sends_validates_against_githubs_schemas() {
    within(async {
        let mut schemas = WebhookSchemas::load();
        let mut kinds = std::collections::BTreeSet::new();
        let mut bad = Vec::new();
        for kind in [HookKind::Organization, HookKind::Repository, HookKind::App] {
            let (url, inbox) = Inbox::start().await;
            let f = Fixture::with(Some(target(&url, Some(kind))), |s| {
                s.apps.push(supervisor::sandbox::AppSeed {
                    app_id: 42,
                    installation_id: 4242,
                    public_key_pem: Some("unused".into()),
                    ..supervisor::sandbox::AppSeed::default()
                });
            })
            .await;
            play_everything(&f).await;
            let received = inbox.received();
            assert_eq!(received.len(), f.sandbox.deliveries().len());
            for (event, action, target_type, payload) in &received {
                let want_type = match kind {
                    HookKind::Organization => "organization",
                    HookKind::Repository => "repository",
                    HookKind::App => "integration",
                };
                assert_eq!(target_type, want_type);
                for p in schemas.problems(event, action, payload) {
                    bad.push(format!("{kind:?} {event}.{action}: {p}"));
                }
                timestamps_are_whole_seconds(payload, &format!("{event}.{action}"), &mut bad);
                assert_eq!(
                    payload.get("installation").is_some(),
                    kind == HookKind::App,
                    "{event}: only an App's payloads name the installation"
                );
                kinds.insert(format!("{event}.{action}"));
            }
            let cards = received
                .iter()
                .filter(|r| r.0 == "projects_v2_item")
                .count();
            assert_eq!(
                cards,
                usize::from(kind != HookKind::Repository),
                "{kind:?}: board events reach organization webhooks and Apps only"
            );
        }
        assert!(
            bad.is_empty(),
            "payloads unlike GitHub's schemas:\n{}",
            bad.join("\n")
        );
        assert_eq!(
            kinds.into_iter().collect::<Vec<_>>(),
            [
                "issue_comment.created",
                "issue_comment.edited",
                "issues.closed",
                "issues.labeled",
                "issues.unlabeled",
                "projects_v2_item.edited",
                "pull_request_review.submitted",
                "pull_request_review_comment.created",
            ],
            "every kind of webhook the sandbox sends was validated"
        );
    })
    .await
}

#[tokio::test]
async fn an_organization_webhook_needs_an_organization() {
    let (url, _inbox) = Inbox::start().await;
    let mut state = SandboxState::new("octocat", "Hello-World");
    state.repo.owner_type = supervisor::sandbox::OwnerType::User;
    let e = Sandbox::start_with_webhook(
        state.clone(),
        0,
        Some(target(&url, Some(HookKind::Organization))),
    )
    .await
    .unwrap_err();
    assert!(e.to_string().contains("octocat is a user"), "{e}");
    // Left to the owner, a user's repository gets a repository webhook: no board events.
    let sandbox = Sandbox::start_with_webhook(state, 0, Some(target(&url, None)))
        .await
        .unwrap();
    sandbox.shutdown().await;
}
