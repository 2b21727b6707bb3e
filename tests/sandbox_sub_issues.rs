//! The sandbox GitHub's sub-issues through GraphQL, as GitHub's schema declares them:
//! `Issue.subIssues` (paged), `Issue.parent`, `Issue.subIssuesSummary`, and the mutations
//! `addSubIssue` (by id or by URL, `replaceParent`) and `removeSubIssue`, over the same state as the
//! REST routes, with GitHub's refusals and the REST side's permission gate. Every query and answer
//! is held to the vendored schema (the world checks conformance; no violation may be left).

mod common;

use std::collections::BTreeMap;

use common::*;
use serde_json::{Value, json};
use supervisor::sandbox::{IssueSeed, TokenSeed};

/// A fine-grained token of alice's that may read issues only.
const READ_ISSUES: &str = "github_pat_read_issues_0123456789";
/// A fine-grained token of alice's that may write issues.
const WRITE_ISSUES: &str = "github_pat_write_issues_0123456789";

async fn world() -> World {
    World::with(|s| {
        for (token, level) in [(READ_ISSUES, "read"), (WRITE_ISSUES, "write")] {
            s.tokens.push(TokenSeed {
                permissions: Some(BTreeMap::from([
                    ("issues".to_string(), level.to_string()),
                    ("metadata".to_string(), "read".to_string()),
                ])),
                ..TokenSeed::classic(token, "alice", &[])
            });
        }
    })
    .await
}

async fn call(w: &World, token: &str, method: &str, path: &str, body: &Value) -> RawAnswer {
    let auth = format!("Bearer {token}");
    let text = if body.is_null() {
        String::new()
    } else {
        body.to_string()
    };
    raw(
        &w.sandbox.url(),
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

/// The answer to `query` with `variables`, sent with `token`; the document must be one GitHub's
/// schema accepts (no validation error, which would come with an `extensions.code`).
async fn gql_as(w: &World, token: &str, query: &str, variables: Value) -> Value {
    let a = call(
        w,
        token,
        "POST",
        "/graphql",
        &json!({"query": query, "variables": variables}),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.body);
    let answer = a.json();
    let invalid: Vec<&Value> = (answer["errors"].as_array().into_iter().flatten())
        .filter(|e| e.get("extensions").is_some())
        .collect();
    assert!(
        invalid.is_empty(),
        "the schema refuses the document: {answer}"
    );
    answer
}

async fn gql(w: &World, query: &str, variables: Value) -> Value {
    gql_as(w, FULL, query, variables).await
}

/// The answer's data, once it has no errors.
fn data(answer: Value) -> Value {
    assert!(answer.get("errors").is_none(), "{answer}");
    answer["data"].clone()
}

/// The numbers of the sub-issues REST lists under issue `n`.
async fn rest_sub_issues(w: &World, n: u64) -> Vec<u64> {
    let a = call(
        w,
        FULL,
        "GET",
        &format!("/repos/acme/widgets/issues/{n}/sub_issues"),
        &Value::Null,
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.body);
    numbers(&a.json())
}

fn numbers(list: &Value) -> Vec<u64> {
    (list.as_array().expect("a list").iter())
        .map(|i| i["number"].as_u64().expect("a number"))
        .collect()
}

const ADD: &str = r#"mutation Add($parent: ID!, $child: ID, $url: String, $replace: Boolean) {
  addSubIssue(input: {issueId: $parent, subIssueId: $child, subIssueUrl: $url, replaceParent: $replace, clientMutationId: "c1"}) {
    clientMutationId
    issue { number }
    subIssue { number parent { number } }
  }
}"#;

const REMOVE: &str = r#"mutation Remove($parent: ID!, $child: ID!) {
  removeSubIssue(input: {issueId: $parent, subIssueId: $child}) {
    clientMutationId
    issue { number subIssues(first: 5) { totalCount } }
    subIssue { number parent { number } }
  }
}"#;

const READ: &str = r#"query Read($n: Int!) {
  repository(owner: "acme", name: "widgets") {
    issue(number: $n) {
      parent { number }
      subIssuesSummary { total completed percentCompleted }
      subIssues(first: 10) {
        totalCount
        nodes { number state }
        edges { cursor node { id number } }
        pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
      }
    }
  }
}"#;

async fn read(w: &World, n: u64) -> Value {
    data(gql(w, READ, json!({"n": n})).await)["repository"]["issue"].clone()
}

fn no_violations(w: &World) {
    let found = w.sandbox.violations();
    assert!(
        found.is_empty(),
        "answers unlike GitHub's schema: {found:#?}"
    );
}

#[tokio::test]
async fn sub_issues_added_through_graphql_are_read_through_rest_and_graphql() {
    within(async {
        let w = world().await;
        let added = data(gql(&w, ADD, json!({"parent": "I_1", "child": "I_3"})).await);
        assert_eq!(
            added["addSubIssue"],
            json!({"clientMutationId": "c1", "issue": {"number": 1},
                "subIssue": {"number": 3, "parent": {"number": 1}}})
        );
        // By URL: the issue's own `url`, as GitHub answers it.
        let url = data(
            gql(
                &w,
                r#"{ repository(owner: "acme", name: "widgets") { issue(number: 2) { url } } }"#,
                json!({}),
            )
            .await,
        )["repository"]["issue"]["url"]
            .clone();
        let added = data(gql(&w, ADD, json!({"parent": "I_1", "url": url})).await);
        assert_eq!(added["addSubIssue"]["subIssue"]["number"], 2);
        assert_eq!(rest_sub_issues(&w, 1).await, [3, 2]);
        w.sandbox
            .with_state(|s| assert_eq!(s.parent_of(2), Some(1)));

        let one = read(&w, 1).await;
        assert_eq!(one["parent"], Value::Null);
        let subs = &one["subIssues"];
        assert_eq!(subs["totalCount"], 2);
        assert_eq!(
            subs["nodes"],
            json!([{"number": 3, "state": "OPEN"}, {"number": 2, "state": "CLOSED"}])
        );
        assert_eq!(subs["edges"][0]["node"], json!({"id": "I_3", "number": 3}));
        assert_eq!(subs["pageInfo"]["hasNextPage"], false);
        // Issue 2 is closed: one of two done.
        assert_eq!(
            one["subIssuesSummary"],
            json!({"total": 2, "completed": 1, "percentCompleted": 50})
        );
        assert_eq!(read(&w, 3).await["parent"], json!({"number": 1}));

        let removed = data(gql(&w, REMOVE, json!({"parent": "I_1", "child": "I_3"})).await);
        assert_eq!(
            removed["removeSubIssue"],
            json!({"clientMutationId": null, "issue": {"number": 1, "subIssues": {"totalCount": 1}},
                "subIssue": {"number": 3, "parent": null}})
        );
        assert_eq!(rest_sub_issues(&w, 1).await, [2]);
        assert_eq!(
            read(&w, 1).await["subIssuesSummary"],
            json!({"total": 1, "completed": 1, "percentCompleted": 100})
        );
        assert_eq!(
            read(&w, 4).await["subIssuesSummary"],
            json!({"total": 0, "completed": 0, "percentCompleted": 0})
        );
        no_violations(&w);
    })
    .await
}

#[tokio::test]
async fn sub_issues_added_through_rest_are_read_through_graphql() {
    within(async {
        let w = world().await;
        let three = call(
            &w,
            FULL,
            "GET",
            "/repos/acme/widgets/issues/3",
            &Value::Null,
        )
        .await;
        let id = three.json()["id"].clone();
        let a = call(
            &w,
            FULL,
            "POST",
            "/repos/acme/widgets/issues/4/sub_issues",
            &json!({"sub_issue_id": id}),
        )
        .await;
        assert_eq!(a.status, 201, "{}", a.body);
        let four = read(&w, 4).await;
        assert_eq!(
            four["subIssues"]["nodes"],
            json!([{"number": 3, "state": "OPEN"}])
        );
        assert_eq!(
            four["subIssuesSummary"],
            json!({"total": 1, "completed": 0, "percentCompleted": 0})
        );
        assert_eq!(read(&w, 3).await["parent"], json!({"number": 4}));
        // And taken out through GraphQL, which REST then sees.
        data(gql(&w, REMOVE, json!({"parent": "I_4", "child": "I_3"})).await);
        assert!(rest_sub_issues(&w, 4).await.is_empty());
        no_violations(&w);
    })
    .await
}

/// GitHub's error for a mutation it refuses: `data` holds `null` for the mutation, `errors` one
/// error of `type` with its `message` and `path`.
fn refused(answer: &Value, mutation: &str, kind: &str) -> String {
    assert_eq!(answer["data"], json!({ mutation: null }), "{answer}");
    let error = &answer["errors"][0];
    assert_eq!(error["type"], kind, "{answer}");
    assert_eq!(error["path"], json!([mutation]), "{answer}");
    error["message"].as_str().expect("a message").to_string()
}

#[tokio::test]
async fn a_second_parent_an_issue_under_itself_and_a_loop_are_refused_in_githubs_shape() {
    within(async {
        let w = world().await;
        data(gql(&w, ADD, json!({"parent": "I_1", "child": "I_3"})).await);
        let second = gql(&w, ADD, json!({"parent": "I_4", "child": "I_3"})).await;
        let message = refused(&second, "addSubIssue", "UNPROCESSABLE");
        assert!(
            message.starts_with("Sub issue may only have one parent"),
            "{message}"
        );
        assert_eq!(rest_sub_issues(&w, 1).await, [3]);
        assert!(rest_sub_issues(&w, 4).await.is_empty());
        // replaceParent moves it.
        let moved = data(
            gql(
                &w,
                ADD,
                json!({"parent": "I_4", "child": "I_3", "replace": true}),
            )
            .await,
        );
        assert_eq!(moved["addSubIssue"]["subIssue"]["parent"]["number"], 4);
        assert!(rest_sub_issues(&w, 1).await.is_empty());
        assert_eq!(rest_sub_issues(&w, 4).await, [3]);

        let itself = gql(&w, ADD, json!({"parent": "I_1", "child": "I_1"})).await;
        let message = refused(&itself, "addSubIssue", "UNPROCESSABLE");
        assert!(message.contains("its own sub-issue"), "{message}");
        // 4 is above 3: it cannot go below it.
        let cycle = gql(&w, ADD, json!({"parent": "I_3", "child": "I_4"})).await;
        refused(&cycle, "addSubIssue", "UNPROCESSABLE");
        let nothing = gql(&w, ADD, json!({"parent": "I_1", "child": "I_99"})).await;
        let message = refused(&nothing, "addSubIssue", "NOT_FOUND");
        assert_eq!(
            message,
            "Could not resolve to a node with the global id of 'I_99'"
        );
        let neither = gql(&w, ADD, json!({"parent": "I_1"})).await;
        let message = refused(&neither, "addSubIssue", "UNPROCESSABLE");
        assert!(message.contains("subIssueId or subIssueUrl"), "{message}");
        let elsewhere = gql(
            &w,
            ADD,
            json!({"parent": "I_1", "url": "https://github.com/octo/other/issues/2"}),
        )
        .await;
        refused(&elsewhere, "addSubIssue", "NOT_FOUND");
        // Not a sub-issue of that parent.
        let stray = gql(&w, REMOVE, json!({"parent": "I_1", "child": "I_3"})).await;
        refused(&stray, "removeSubIssue", "UNPROCESSABLE");
        w.sandbox.with_state(|s| {
            assert_eq!(s.parent_of(3), Some(4));
            assert_eq!(s.parent_of(4), None);
            assert!(s.issue(1).unwrap().sub_issues.is_empty());
        });
        no_violations(&w);
    })
    .await
}

#[tokio::test]
async fn sub_issues_page_forwards_and_backwards() {
    within(async {
        let w = World::with(|s| {
            for n in 5..=9 {
                s.issues
                    .push(IssueSeed::new(n, &format!("task {n}"), "", "alice"));
            }
            s.issues[0].sub_issues = vec![3, 5, 6, 7, 8, 9];
        })
        .await;
        let page = r#"query Page($first: Int, $after: String, $last: Int, $before: String) {
          repository(owner: "acme", name: "widgets") { issue(number: 1) {
            subIssues(first: $first, after: $after, last: $last, before: $before) {
              totalCount nodes { number }
              pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
            } } } }"#;
        let get = |vars: Value| {
            let w = &w;
            async move {
                data(gql(w, page, vars).await)["repository"]["issue"]["subIssues"].clone()
            }
        };
        let one = get(json!({"first": 2})).await;
        assert_eq!(numbers(&one["nodes"]), [3, 5]);
        assert_eq!(one["totalCount"], 6);
        assert_eq!(one["pageInfo"]["hasNextPage"], true);
        assert_eq!(one["pageInfo"]["hasPreviousPage"], false);
        let two = get(json!({"first": 2, "after": one["pageInfo"]["endCursor"]})).await;
        assert_eq!(numbers(&two["nodes"]), [6, 7]);
        assert_eq!(two["pageInfo"]["hasPreviousPage"], true);
        let three = get(json!({"first": 2, "after": two["pageInfo"]["endCursor"]})).await;
        assert_eq!(numbers(&three["nodes"]), [8, 9]);
        assert_eq!(three["pageInfo"]["hasNextPage"], false);
        let end = get(json!({"last": 2})).await;
        assert_eq!(numbers(&end["nodes"]), [8, 9]);
        let back = get(json!({"last": 3, "before": end["pageInfo"]["startCursor"]})).await;
        assert_eq!(numbers(&back["nodes"]), [5, 6, 7]);
        assert_eq!(back["pageInfo"]["hasPreviousPage"], true);
        // GitHub wants a bound.
        let unbounded = gql(&w, page, json!({})).await;
        assert!(unbounded.get("data").is_none(), "{unbounded}");
        assert_eq!(unbounded["errors"][0]["type"], "MISSING_PAGINATION_BOUNDARIES");
        no_violations(&w);
    })
    .await
}

#[tokio::test]
async fn adding_a_sub_issue_through_graphql_needs_the_rest_sides_issues_write_permission() {
    within(async {
        let w = world().await;
        let denied = gql_as(&w, READ_ISSUES, ADD, json!({"parent": "I_1", "child": "I_3"})).await;
        let message = refused(&denied, "addSubIssue", "FORBIDDEN");
        assert_eq!(message, "Resource not accessible by personal access token");
        let denied = gql_as(&w, READ_ISSUES, REMOVE, json!({"parent": "I_1", "child": "I_3"})).await;
        refused(&denied, "removeSubIssue", "FORBIDDEN");
        // The REST side refuses the same token.
        let three = call(&w, FULL, "GET", "/repos/acme/widgets/issues/3", &Value::Null).await;
        let a = call(
            &w,
            READ_ISSUES,
            "POST",
            "/repos/acme/widgets/issues/1/sub_issues",
            &json!({"sub_issue_id": three.json()["id"]}),
        )
        .await;
        assert_eq!(a.status, 403, "{}", a.body);
        assert!(rest_sub_issues(&w, 1).await.is_empty());
        // Reading them needs no more than the token has.
        assert_eq!(
            data(gql_as(&w, READ_ISSUES, READ, json!({"n": 1})).await)["repository"]["issue"]
                ["subIssuesSummary"]["total"],
            0
        );
        let allowed = gql_as(&w, WRITE_ISSUES, ADD, json!({"parent": "I_1", "child": "I_3"})).await;
        assert_eq!(data(allowed)["addSubIssue"]["subIssue"]["number"], 3);
        assert_eq!(rest_sub_issues(&w, 1).await, [3]);
        no_violations(&w);
    })
    .await
}
