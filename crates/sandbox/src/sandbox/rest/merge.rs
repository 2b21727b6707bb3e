//! Merging a pull request (`PUT /repos/{owner}/{repo}/pulls/{number}/merge`), in the sandbox's
//! git repository, refused as GitHub refuses it.

use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Map, Value, json};

use super::{
    RepoCall, author_of, gh_error, parse_body, require_auth, text_field, validation_failed,
};
use crate::github::MergeMethod;
use crate::sandbox::git::MergeRefusal;
use crate::sandbox::state::{MergeSeed, SeedState};

const DOC: &str = "https://docs.github.com/rest/pulls/pulls#merge-a-pull-request";

/// GitHub's 405: the pull request cannot be merged as it is.
fn not_mergeable(message: &str) -> Response {
    gh_error(StatusCode::METHOD_NOT_ALLOWED, message, DOC)
}

/// `PUT /repos/{owner}/{repo}/pulls/{number}/merge`
pub(super) async fn merge_pull(call: RepoCall, body: Bytes) -> Response {
    let mut st = tri!(call.state());
    tri!(require_auth(&call.caller));
    // The body is optional: none, `null` or an object.
    let input = match serde_json::from_slice::<Value>(&body) {
        _ if body.iter().all(u8::is_ascii_whitespace) => Map::new(),
        Ok(Value::Null) => Map::new(),
        _ => tri!(parse_body(&body)),
    };
    let method = match input.get("merge_method").map(|m| m.as_str()) {
        None => MergeMethod::Merge,
        Some(Some("merge")) => MergeMethod::Merge,
        Some(Some("squash")) => MergeMethod::Squash,
        Some(Some("rebase")) => MergeMethod::Rebase,
        Some(_) => {
            return validation_failed(
                json!([{"resource": "PullRequest", "field": "merge_method", "code": "invalid"}]),
                DOC,
            );
        }
    };
    let n = tri!(call.find(DOC, |n| st.pull(n).map(|p| p.number)));
    if !call.caller.may_write(&st, "contents") {
        return gh_error(
            StatusCode::FORBIDDEN,
            "Must have push access to merge this pull request.",
            DOC,
        );
    }
    let git = &call.s.git;
    let Some(p) = st.pull(n).cloned() else {
        return not_mergeable("Pull Request is not mergeable");
    };
    if p.state != SeedState::Open || p.merged {
        return not_mergeable("Pull Request is not mergeable");
    }
    if p.draft {
        return not_mergeable("Pull Request is still a draft");
    }
    let head_sha = git.branch_sha(&p.head).unwrap_or_default();
    if let Some(expected) = text_field(&input, "sha") {
        if expected != head_sha {
            return gh_error(
                StatusCode::CONFLICT,
                "Head branch was modified. Review and try the merge again.",
                DOC,
            );
        }
    }
    let owner = st.repo.owner.clone();
    let default_title = match method {
        MergeMethod::Merge => format!("Merge pull request #{n} from {owner}/{}", p.head),
        MergeMethod::Squash | MergeMethod::Rebase => format!("{} (#{n})", p.title),
    };
    let title = text_field(&input, "commit_title").unwrap_or(default_title);
    let extra = text_field(&input, "commit_message").unwrap_or_else(|| match method {
        MergeMethod::Merge => p.title.clone(),
        MergeMethod::Squash | MergeMethod::Rebase => String::new(),
    });
    let message = if extra.trim().is_empty() {
        title
    } else {
        format!("{title}\n\n{extra}")
    };
    let by = author_of(&call.caller, &st);
    let sha = match git.merge(&p.base, &p.head, method, &message, &by) {
        Ok(sha) => sha,
        Err(MergeRefusal::Conflict) if method == MergeMethod::Rebase => {
            return not_mergeable("This branch can't be rebased");
        }
        Err(MergeRefusal::Conflict) => return not_mergeable("Pull Request is not mergeable"),
        Err(MergeRefusal::Failed(why)) => {
            tracing::warn!(pull = n, %why, "the sandbox could not merge");
            return not_mergeable("Pull Request is not mergeable");
        }
    };
    if let Some(pull) = st.pulls.iter_mut().find(|p| p.number == n) {
        pull.merged = true;
        pull.state = SeedState::Closed;
        pull.merge = Some(MergeSeed {
            sha: sha.clone(),
            by,
            at: chrono::Utc::now(),
        });
    }
    call.ok(json!({
        "sha": sha,
        "merged": true,
        "message": "Pull Request successfully merged",
    }))
}
