//! Pull request reviews, their line comments and threads, and pull request edits, as GitHub's
//! REST API answers them (`/repos/{owner}/{repo}/pulls/{number}/…`).

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::Query;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Map, Value, json};

use super::{
    RepoCall, author_of, edit_pull, gh_error, not_found, state_input, text_field, validation_failed,
};
use crate::sandbox::state::{PullSeed, ReviewCommentSeed, ReviewSeed, SeedState};

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
        .map(|c| call.shapes(&st).review_comment(p, c))
        .collect();
    call.paged(&format!("/pulls/{}/comments", p.number), &q, items)
}

fn unprocessable(message: &str, doc: &str) -> Response {
    gh_error(StatusCode::UNPROCESSABLE_ENTITY, message, doc)
}

/// A new line comment from `input` (`path`, `line`, `body`), its diff hunk computed from the pull
/// request's diff; GitHub refuses a line that is not part of the diff.
fn line_comment(
    call: &RepoCall,
    p: &PullSeed,
    input: &Map<String, Value>,
    id: u64,
    author: &str,
    doc: &str,
) -> Result<ReviewCommentSeed, Response> {
    let text = |k: &str| input.get(k).and_then(|v| v.as_str()).map(str::to_string);
    let (Some(path), Some(body)) = (text("path"), text("body")) else {
        return Err(unprocessable(
            "Invalid request.\n\n\"path\" and \"body\" are required.",
            doc,
        ));
    };
    let Some(line) = input.get("line").and_then(|v| v.as_u64()) else {
        return Err(unprocessable(
            "Invalid request.\n\n\"line\" wasn't supplied.",
            doc,
        ));
    };
    let Some(diff_hunk) = call.s.git.diff_hunk(&p.base, &p.head, &path, line) else {
        return Err(validation_failed(
            json!([{"resource": "PullRequestReviewComment", "code": "custom",
                "message": "pull_request_review_thread.line must be part of the diff"}]),
            doc,
        ));
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
        commit_id: call.s.git.branch_sha(&p.head),
        created_at: Some(chrono::Utc::now()),
        resolved_by: None,
    })
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
    let mut next = st.next_comment_id();
    let review_id = next;
    next += 1;
    let mut comments = Vec::new();
    for c in &lines {
        let Some(obj) = c.as_object() else {
            return unprocessable("Invalid request.\n\nFor 'items', it is not an object.", doc);
        };
        let mut seed = tri!(line_comment(&call, &p, obj, next, &author, doc));
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
        commit_id: input
            .get("commit_id")
            .and_then(|v| v.as_str())
            .map(str::to_string)
            .or_else(|| call.s.git.branch_sha(&p.head)),
        submitted_at: Some(chrono::Utc::now()),
    };
    let Some(pull) = st.pull_mut(p.number) else {
        return not_found(doc);
    };
    pull.reviews.push(review.clone());
    pull.review_comments.extend(comments);
    if review.state != "PENDING" {
        call.s.emit(
            &st,
            crate::sandbox::hooks::Hook::Reviewed {
                pull: p.number,
                review_id: review.id,
            },
        );
    }
    call.ok(call.shapes(&st).review(p.number, &review))
}

/// `POST /repos/{owner}/{repo}/pulls/{number}/comments`: a new thread on a line, or (with
/// `in_reply_to`) a reply in one.
pub(super) async fn create_review_comment(call: RepoCall, body: Bytes) -> Response {
    let doc =
        "https://docs.github.com/rest/pulls/comments#create-a-review-comment-for-a-pull-request";
    let (st, input) = tri!(call.write(&body));
    drop(st);
    if let Some(parent) = input.get("in_reply_to").and_then(|v| v.as_u64()) {
        return add_reply(&call, parent, &input, doc);
    }
    let mut st = tri!(call.state());
    let p = tri!(call.find(doc, |n| st.pull(n).cloned()));
    let id = st.next_comment_id();
    let author = author_of(&call.caller, &st);
    let seed = tri!(line_comment(&call, &p, &input, id, &author, doc));
    let Some(pull) = st.pull_mut(p.number) else {
        return not_found(doc);
    };
    pull.review_comments.push(seed.clone());
    let value = call.shapes(&st).review_comment(&p, &seed);
    call.created(&st, value, &format!("/pulls/comments/{id}"))
}

/// `POST /repos/{owner}/{repo}/pulls/{number}/comments/{comment_id}/replies`
pub(super) async fn reply(call: RepoCall, body: Bytes) -> Response {
    let doc = "https://docs.github.com/rest/pulls/comments#create-a-reply-for-a-review-comment";
    let (st, input) = tri!(call.write(&body));
    drop(st);
    let Some(parent) = call.more.first().and_then(|c| c.parse::<u64>().ok()) else {
        return not_found(doc);
    };
    add_reply(&call, parent, &input, doc)
}

fn add_reply(call: &RepoCall, parent: u64, input: &Map<String, Value>, doc: &str) -> Response {
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
    let id = st.next_comment_id();
    let Some(p) = st.pull(n) else {
        return not_found(doc);
    };
    // GitHub answers in the thread of the comment replied to (replies to replies join it too).
    let Some(root) = p.thread_root(parent).cloned() else {
        return not_found(COMMENTS_DOC);
    };
    let seed = ReviewCommentSeed {
        id,
        review_id: None,
        author,
        body: text,
        in_reply_to: Some(root.id),
        editor: None,
        created_at: Some(chrono::Utc::now()),
        resolved_by: None,
        ..root
    };
    let Some(pull) = st.pull_mut(n) else {
        return not_found(doc);
    };
    pull.review_comments.push(seed.clone());
    let p = pull.clone();
    let value = call.shapes(&st).review_comment(&p, &seed);
    call.created(&st, value, &format!("/pulls/comments/{id}"))
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
