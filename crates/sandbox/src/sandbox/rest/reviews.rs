//! Pull request reviews, their line comments and threads, and pull request edits, as GitHub's
//! REST API answers them (`/repos/{owner}/{repo}/pulls/{number}/…`).

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::Query;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::{
    RepoCall, author_of, edit_pull, gh_error, not_found, state_input, text_field, validation_failed,
};
use crate::sandbox::hooks::Hook;
use crate::sandbox::state::{PullSeed, ReviewCommentSeed, ReviewSeed, SandboxState, SeedState};

const COMMENTS_DOC: &str = "https://docs.github.com/rest/pulls/comments";

/// `GET /repos/{owner}/{repo}/pulls/{number}/reviews`
pub(super) async fn list_reviews(
    call: RepoCall,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let st = tri!(call.state());
    let doc = "https://docs.github.com/rest/pulls/reviews#list-reviews-for-a-pull-request";
    let p = tri!(call.find(doc, |n| st.pull(n)));
    let items = p
        .reviews
        .iter()
        .map(|r| call.shapes(&st).review(p.number, r))
        .collect();
    call.paged(&format!("/pulls/{}/reviews", p.number), &q, items)
}

/// `GET /repos/{owner}/{repo}/pulls/{number}/reviews/{review_id}`
pub(super) async fn get_review(call: RepoCall) -> Response {
    let st = tri!(call.state());
    let doc = "https://docs.github.com/rest/pulls/reviews#get-a-review-for-a-pull-request";
    let p = tri!(call.find(doc, |n| st.pull(n)));
    let id = call.more.first().and_then(|c| c.parse::<u64>().ok());
    match p.reviews.iter().find(|r| Some(r.id) == id) {
        Some(r) => call.ok(call.shapes(&st).review(p.number, r)),
        None => not_found(doc),
    }
}

/// `GET /repos/{owner}/{repo}/pulls/{number}/comments`
pub(super) async fn list_review_comments(
    call: RepoCall,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let st = tri!(call.state());
    let doc = "https://docs.github.com/rest/pulls/comments#list-review-comments-on-a-pull-request";
    let p = tri!(call.find(doc, |n| st.pull(n)));
    let items = p
        .review_comments
        .iter()
        .map(|c| call.shapes(&st).review_comment(&call.s.git, p, c))
        .collect();
    call.paged(&format!("/pulls/{}/comments", p.number), &q, items)
}

/// `GET /repos/{owner}/{repo}/pulls/comments/{comment_id}`
pub(super) async fn get_review_comment(call: RepoCall) -> Response {
    let st = tri!(call.state());
    let doc = "https://docs.github.com/rest/pulls/comments#get-a-review-comment-for-a-pull-request";
    let id = tri!(call.number(doc));
    let Some(p) = st.pull_of_review_comment(id) else {
        return not_found(doc);
    };
    match p.review_comments.iter().find(|c| c.id == id) {
        Some(c) => call.ok(call.shapes(&st).review_comment(&call.s.git, p, c)),
        None => not_found(doc),
    }
}

fn unprocessable(message: &str, doc: &str) -> Response {
    gh_error(StatusCode::UNPROCESSABLE_ENTITY, message, doc)
}

/// A 422 whose `errors` are strings, as the reviews API answers (`validation-error-simple`).
fn unprocessable_because(errors: &[&str], doc: &str) -> Response {
    let body = json!({
        "message": "Unprocessable Entity",
        "errors": errors,
        "documentation_url": doc,
        "status": "422",
    });
    (StatusCode::UNPROCESSABLE_ENTITY, axum::Json(body)).into_response()
}

/// The route a line comment came by, which shapes its refusal: the reviews API lists errors as
/// strings, the review comments API as objects.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Route {
    Review,
    Comment,
}

/// The `Invalid request` answer naming the required fields `input` lacks, if any.
fn missing(input: &Map<String, Value>, required: &[&str], doc: &str) -> Option<Response> {
    let absent: Vec<String> = required
        .iter()
        .filter(|k| input.get(**k).is_none_or(Value::is_null))
        .map(|k| format!("\"{k}\""))
        .collect();
    let list = match absent.as_slice() {
        [] => return None,
        [one] => format!("{one} wasn't supplied."),
        [rest @ .., last] => format!("{} and {last} weren't supplied.", rest.join(", ")),
    };
    Some(unprocessable(&format!("Invalid request.\n\n{list}"), doc))
}

/// A new line comment from `input` (`path`, `line`, `body`) on commit `commit` of the pull
/// request, its diff hunk computed from the pull request's diff at that commit; GitHub refuses a
/// line that is not part of the diff.
fn line_comment(
    call: &RepoCall,
    p: &PullSeed,
    input: &Map<String, Value>,
    (id, author, commit): (u64, &str, &str),
    route: Route,
    doc: &str,
) -> Result<ReviewCommentSeed, Response> {
    if let Some(refused) = missing(input, &["path", "body"], doc) {
        return Err(refused);
    }
    let text = |k: &str| input.get(k).and_then(|v| v.as_str()).map(str::to_string);
    let (Some(path), Some(body)) = (text("path"), text("body")) else {
        return Err(unprocessable(
            "Invalid request.\n\n\"path\" and \"body\" are strings.",
            doc,
        ));
    };
    let Some(line) = input.get("line").and_then(|v| v.as_u64()) else {
        return Err(unprocessable(
            "Invalid request.\n\n\"line\" wasn't supplied.",
            doc,
        ));
    };
    let Some(diff_hunk) = call.s.git.diff_hunk(&p.base, commit, &path, line) else {
        return Err(match route {
            Route::Review => unprocessable_because(
                &["Pull request review thread line must be part of the diff"],
                doc,
            ),
            Route::Comment => validation_failed(
                json!([{"resource": "PullRequestReviewComment", "code": "custom",
                    "field": "pull_request_review_thread.line",
                    "message": "pull_request_review_thread.line must be part of the diff"}]),
                doc,
            ),
        });
    };
    Ok(ReviewCommentSeed {
        id,
        review_id: None,
        author: author.to_string(),
        body,
        path,
        line: Some(line),
        diff_hunk,
        in_reply_to: None,
        editor: None,
        commit_id: Some(commit.to_string()),
        created_at: Some(chrono::Utc::now()),
        resolved_by: None,
    })
}

/// The empty `COMMENTED` review GitHub makes for a line comment written outside a review (a
/// single comment, or a reply in a thread): each one belongs to a review of its own.
fn review_of_one(id: u64, author: &str, commit_id: Option<String>) -> ReviewSeed {
    ReviewSeed {
        id,
        author: author.to_string(),
        state: "COMMENTED".into(),
        body: String::new(),
        editor: None,
        commit_id,
        submitted_at: Some(chrono::Utc::now()),
    }
}

/// Store a submitted `review` with its line `comments` on pull request `n` and send their
/// webhooks: `pull_request_review_comment` `created` for each comment, then
/// `pull_request_review` `submitted` (a pending review sends none).
fn add_review(
    call: &RepoCall,
    st: &mut SandboxState,
    n: u64,
    review: ReviewSeed,
    comments: Vec<ReviewCommentSeed>,
) -> Result<(), Response> {
    let Some(pull) = st.pull_mut(n) else {
        return Err(not_found(COMMENTS_DOC));
    };
    let ids: Vec<u64> = comments.iter().map(|c| c.id).collect();
    let (review_id, submitted) = (review.id, review.state != "PENDING");
    pull.reviews.push(review);
    pull.review_comments.extend(comments);
    if submitted {
        for comment_id in ids {
            call.s.emit(
                st,
                Hook::ReviewCommented {
                    pull: n,
                    comment_id,
                },
            );
        }
        call.s.emit(st, Hook::Reviewed { pull: n, review_id });
    }
    Ok(())
}

/// `POST /repos/{owner}/{repo}/pulls/{number}/reviews`: `event` APPROVE, REQUEST_CHANGES or
/// COMMENT submits it (none leaves it PENDING); `comments` are its line comments.
pub(super) async fn create_review(call: RepoCall, body: Bytes) -> Response {
    let doc = "https://docs.github.com/rest/pulls/reviews#create-a-review-for-a-pull-request";
    let (mut st, input) = tri!(call.write(&body));
    let p = tri!(call.find(doc, |n| st.pull(n).cloned()));
    let author = author_of(&call.caller, &st);
    let state = match input.get("event").and_then(|v| v.as_str()) {
        None => "PENDING",
        Some("APPROVE") => "APPROVED",
        Some("REQUEST_CHANGES") => "CHANGES_REQUESTED",
        Some("COMMENT") => "COMMENTED",
        Some(other) => {
            return unprocessable(
                &format!("Unprocessable Entity: event {other} is not valid"),
                doc,
            );
        }
    };
    let text = text_field(&input, "body").unwrap_or_default();
    let lines = input
        .get("comments")
        .and_then(|v| v.as_array())
        .cloned()
        .unwrap_or_default();
    if p.state != SeedState::Open || p.merged {
        return unprocessable("Unprocessable Entity: the pull request is closed", doc);
    }
    if author.eq_ignore_ascii_case(&p.author) && state != "COMMENTED" && state != "PENDING" {
        let what = if state == "APPROVED" {
            "approve"
        } else {
            "request changes on"
        };
        return validation_failed(
            json!([format!("Can not {what} your own pull request")]),
            doc,
        );
    }
    if text.is_empty() && lines.is_empty() && matches!(state, "CHANGES_REQUESTED" | "COMMENTED") {
        return validation_failed(
            json!([format!(
                "Body is required for a review with event {}",
                if state == "COMMENTED" {
                    "COMMENT"
                } else {
                    "REQUEST_CHANGES"
                }
            )]),
            doc,
        );
    }
    // The review is of the commit named, else of the pull request's head.
    let commit = match text_field(&input, "commit_id") {
        Some(c) if !call.s.git.reaches(&p.head, &c) => {
            return unprocessable_because(&["Commit is not part of the pull request"], doc);
        }
        Some(c) => Some(c),
        None => call.s.git.branch_sha(&p.head),
    };
    let mut next = st.next_comment_id();
    let review_id = next;
    next += 1;
    let mut comments = Vec::new();
    for c in &lines {
        let Some(obj) = c.as_object() else {
            return unprocessable("Invalid request.\n\nFor 'items', it is not an object.", doc);
        };
        let on = commit.as_deref().unwrap_or(&p.head);
        let mut seed = tri!(line_comment(
            &call,
            &p,
            obj,
            (next, &author, on),
            Route::Review,
            doc
        ));
        seed.review_id = Some(review_id);
        comments.push(seed);
        next += 1;
    }
    let review = ReviewSeed {
        id: review_id,
        author,
        state: state.to_string(),
        body: text,
        editor: None,
        commit_id: commit,
        submitted_at: Some(chrono::Utc::now()),
    };
    tri!(add_review(
        &call,
        &mut st,
        p.number,
        review.clone(),
        comments
    ));
    call.ok(call.shapes(&st).review(p.number, &review))
}

/// `POST /repos/{owner}/{repo}/pulls/{number}/comments`: a new thread on a line of commit
/// `commit_id`, or (with `in_reply_to`) a reply in one.
pub(super) async fn create_review_comment(call: RepoCall, body: Bytes) -> Response {
    let doc =
        "https://docs.github.com/rest/pulls/comments#create-a-review-comment-for-a-pull-request";
    let (st, input) = tri!(call.write(&body));
    drop(st);
    if let Some(parent) = input.get("in_reply_to").and_then(|v| v.as_u64()) {
        // "When specified, all parameters other than `body` in the request body are ignored."
        return add_reply(&call, parent, &input, Parent::AnyInThread, doc);
    }
    let mut st = tri!(call.state());
    let p = tri!(call.find(doc, |n| st.pull(n).cloned()));
    if let Some(refused) = missing(&input, &["body", "commit_id", "path"], doc) {
        return refused;
    }
    let commit = text_field(&input, "commit_id").unwrap_or_default();
    if !call.s.git.reaches(&p.head, &commit) {
        return validation_failed(
            json!([{"resource": "PullRequestReviewComment", "code": "custom", "field": "commit_id",
                "message": "commit_id is not part of the pull request"}]),
            doc,
        );
    }
    let review_id = st.next_comment_id();
    let author = author_of(&call.caller, &st);
    let mut seed = tri!(line_comment(
        &call,
        &p,
        &input,
        (review_id + 1, &author, &commit),
        Route::Comment,
        doc
    ));
    seed.review_id = Some(review_id);
    let review = review_of_one(review_id, &author, Some(commit));
    tri!(add_review(
        &call,
        &mut st,
        p.number,
        review,
        vec![seed.clone()]
    ));
    let value = call.shapes(&st).review_comment(&call.s.git, &p, &seed);
    call.created(&st, value, &format!("/pulls/comments/{}", seed.id))
}

/// `POST /repos/{owner}/{repo}/pulls/{number}/comments/{comment_id}/replies`: `comment_id` must
/// be a thread's top-level comment.
pub(super) async fn reply(call: RepoCall, body: Bytes) -> Response {
    let doc = "https://docs.github.com/rest/pulls/comments#create-a-reply-for-a-review-comment";
    let (st, input) = tri!(call.write(&body));
    drop(st);
    let Some(parent) = call.more.first().and_then(|c| c.parse::<u64>().ok()) else {
        return not_found(doc);
    };
    add_reply(&call, parent, &input, Parent::TopLevel, doc)
}

/// Which comments a reply may answer.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Parent {
    /// The replies route: "This must be the ID of a top-level review comment, not a reply to
    /// that comment. Replies to replies are not supported."
    TopLevel,
    /// `in_reply_to` of a new review comment, of which the description says no such thing: the
    /// reply joins the thread of the comment named.
    AnyInThread,
}

fn add_reply(
    call: &RepoCall,
    parent: u64,
    input: &Map<String, Value>,
    allowed: Parent,
    doc: &str,
) -> Response {
    let mut st = tri!(call.state());
    let n = tri!(call.number(doc));
    let Some(text) = text_field(input, "body") else {
        return unprocessable("Invalid request.\n\n\"body\" wasn't supplied.", doc);
    };
    if text.chars().count() > crate::github::MAX_BODY_CHARS {
        return validation_failed(
            json!([{"resource": "PullRequestReviewComment", "code": "custom",
                "message": "Body is too long (maximum is 65536 characters)"}]),
            doc,
        );
    }
    let author = author_of(&call.caller, &st);
    let review_id = st.next_comment_id();
    let Some(p) = st.pull(n).cloned() else {
        return not_found(doc);
    };
    let Some(root) = p.thread_root(parent).cloned() else {
        return not_found(COMMENTS_DOC);
    };
    if allowed == Parent::TopLevel && root.id != parent {
        return validation_failed(
            json!([{"resource": "PullRequestReviewComment", "code": "invalid",
                "field": "in_reply_to",
                "message": format!("{parent} is not a top-level review comment (its thread starts at {}). Replies to replies are not supported.", root.id)}]),
            doc,
        );
    }
    let seed = ReviewCommentSeed {
        id: review_id + 1,
        review_id: Some(review_id),
        author: author.clone(),
        body: text,
        in_reply_to: Some(root.id),
        editor: None,
        created_at: Some(chrono::Utc::now()),
        resolved_by: None,
        ..root
    };
    let review = review_of_one(review_id, &author, call.s.git.branch_sha(&p.head));
    tri!(add_review(call, &mut st, n, review, vec![seed.clone()]));
    let value = call.shapes(&st).review_comment(&call.s.git, &p, &seed);
    call.created(&st, value, &format!("/pulls/comments/{}", seed.id))
}

/// `PATCH /repos/{owner}/{repo}/pulls/{number}`: title, body, state, base.
pub(super) async fn update_pull(call: RepoCall, body: Bytes) -> Response {
    let doc = "https://docs.github.com/rest/pulls/pulls#update-a-pull-request";
    let (mut st, input) = tri!(call.write(&body));
    let n = tri!(call.number(doc));
    let editor = author_of(&call.caller, &st);
    let state = tri!(state_input(&input, "PullRequest", doc));
    if let Some(b) = text_field(&input, "body") {
        if b.chars().count() > crate::github::MAX_BODY_CHARS {
            return validation_failed(
                json!([{"resource": "PullRequest", "code": "custom", "field": "body",
                    "message": "body is too long (maximum is 65536 characters)"}]),
                doc,
            );
        }
    }
    let Some(pull) = st.pull_mut(n) else {
        return not_found(doc);
    };
    edit_pull(pull, &input, state, editor);
    if let Some(base) = text_field(&input, "base") {
        pull.base = base;
    }
    let pull = pull.clone();
    call.ok(call.shapes(&st).pull(&call.s.git, &pull, true))
}
