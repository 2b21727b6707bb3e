//! Git references (`GET /repos/{owner}/{repo}/git/ref/{ref}`, `POST /repos/{owner}/{repo}/git/refs`)
//! in the sandbox's git repository, and the files a pull request changes
//! (`GET /repos/{owner}/{repo}/pulls/{number}/files`).

use axum::body::Bytes;
use axum::extract::Query;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use super::{Q, RepoCall, gh_error, not_found, text_field, validation_failed};
use crate::sandbox::git::RefRefusal;

const GET_DOC: &str = "https://docs.github.com/rest/git/refs#get-a-reference";
const CREATE_DOC: &str = "https://docs.github.com/rest/git/refs#create-a-reference";
const FILES_DOC: &str = "https://docs.github.com/rest/pulls/pulls#list-pull-requests-files";

/// Files GitHub lists of a pull request at most.
const MAX_PULL_FILES: usize = 3000;

/// `GET /repos/{owner}/{repo}/git/ref/{ref}`: `ref` is `heads/<branch>` (or `tags/<tag>`).
pub(super) async fn get_ref(call: RepoCall) -> Response {
    // Only the check: the state is not held while git answers.
    drop(tri!(call.state()));
    let name = format!("refs/{}", call.arg);
    let Some(sha) = call.s.git.ref_sha(&name) else {
        return not_found(GET_DOC);
    };
    let st = call.s.state();
    call.ok(call.shapes(&st).git_ref(&name, &sha))
}

/// `POST /repos/{owner}/{repo}/git/refs` with `ref` (`refs/heads/<branch>`) and `sha`.
pub(super) async fn create_ref(call: RepoCall, body: Bytes) -> Response {
    let (st, input) = tri!(call.write(&body));
    let (Some(name), Some(sha)) = (text_field(&input, "ref"), text_field(&input, "sha")) else {
        let missing = if text_field(&input, "ref").is_none() {
            "ref"
        } else {
            "sha"
        };
        return validation_failed(
            json!([{"resource": "Reference", "field": missing, "code": "missing_field"}]),
            CREATE_DOC,
        );
    };
    if !name.starts_with("refs/") || name.matches('/').count() < 2 {
        return gh_error(
            StatusCode::UNPROCESSABLE_ENTITY,
            &format!(
                "{name} is not a valid ref name: ref must start with 'refs' and have at least two slashes (refs/heads/<branch>)"
            ),
            CREATE_DOC,
        );
    }
    if !call.caller.may_write(&st, "contents") {
        return gh_error(
            StatusCode::FORBIDDEN,
            "Must have push access to this repository.",
            CREATE_DOC,
        );
    }
    drop(st);
    match call.s.git.create_ref(&name, &sha) {
        Ok(()) => {}
        Err(RefRefusal::Exists) => {
            return gh_error(
                StatusCode::UNPROCESSABLE_ENTITY,
                "Reference already exists",
                CREATE_DOC,
            );
        }
        Err(RefRefusal::UnknownCommit) => {
            return gh_error(
                StatusCode::UNPROCESSABLE_ENTITY,
                "Object does not exist",
                CREATE_DOC,
            );
        }
        Err(RefRefusal::Failed(why)) => {
            return gh_error(
                StatusCode::UNPROCESSABLE_ENTITY,
                &format!("Reference update failed: {why}"),
                CREATE_DOC,
            );
        }
    }
    let st = call.s.state();
    let body = call.shapes(&st).git_ref(&name, &sha);
    call.created(&st, body, &format!("/git/{name}"))
}

/// `GET /repos/{owner}/{repo}/pulls/{number}/files`: the diff from where the head left the base,
/// a page of at most 100 files, 3000 in all.
pub(super) async fn list_files(call: RepoCall, Query(q): Q) -> Response {
    let (n, base, head) = {
        let st = tri!(call.state());
        let pull = tri!(call.find(FILES_DOC, |n| st.pull(n)));
        (pull.number, pull.base.clone(), pull.head.clone())
    };
    // Git is read without holding the state.
    let git = &call.s.git;
    let head_sha = git.branch_sha(&head).unwrap_or_default();
    let mut files = git.pull_files(&base, &head).unwrap_or_default();
    files.truncate(MAX_PULL_FILES);
    let st = call.s.state();
    let shapes = call.shapes(&st);
    let items: Vec<Value> = files
        .iter()
        .map(|f| shapes.diff_entry(&head_sha, f))
        .collect();
    call.paged(&format!("/pulls/{n}/files"), &q, items)
}
