//! The HTTP side: routes, the gate every request passes (auth, counting, faults, rate-limit
//! headers), the REST handlers and the GraphQL endpoint.

// Handlers return early with a finished error `Response` through `Result<_, Response>`; boxing
// each one would only add noise to a test server.
#![allow(clippy::result_large_err)]

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Extension, FromRequestParts, MatchedPath, Path, Query, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use graphql_parser::query::{Document, OperationDefinition};
use serde_json::{Map, Value, json};

use super::conformance::{RestContract, check_graphql_answer};
use super::graphql::{Exec, GqlRequest, pick_operation};
use super::hooks::{Act, Hook};
use super::shapes::{Shapes, iso};
use super::state::{
    CommentSeed, DispatchSeed, IssueSeed, PullSeed, RenameSeed, SandboxState, SeedState, TokenSeed,
};
use super::{Caller, Fault, Origin, Shared, ids};

type S = State<Arc<Shared>>;
type Q = Query<HashMap<String, String>>;

const DOCS: &str = "https://docs.github.com/rest";

/// GitHub Enterprise Server's REST prefix; the sandbox answers with and without it.
const GHES_PREFIX: &str = "/api/v3";

pub(crate) fn router(shared: Arc<Shared>) -> Router {
    // The web view is merged after the gate's layer, so it is neither authenticated nor counted.
    let api = Router::new()
        .merge(api_routes())
        .nest(GHES_PREFIX, api_routes())
        .route("/graphql", post(graphql))
        .route("/api/graphql", post(graphql))
        .route("/_sandbox/state", get(dump))
        .route("/_sandbox/requests", get(counts))
        .route("/_sandbox/faults", post(add_fault))
        .route("/_sandbox/act", post(act_route))
        .route("/_sandbox/deliveries", get(deliveries))
        .fallback(not_found_route)
        .layer(middleware::from_fn_with_state(shared.clone(), gate));
    super::web::routes().merge(api).with_state(shared)
}

/// The REST routes, served at the root (as api.github.com) and under `/api/v3` (as GHES).
fn api_routes() -> Router<Arc<Shared>> {
    Router::new()
        .route("/user", get(user))
        .route("/app", get(app))
        .route("/repos/{owner}/{repo}", get(repository))
        .route(
            "/repos/{owner}/{repo}/issues/{number}",
            get(get_issue).patch(patch_issue),
        )
        .route(
            "/repos/{owner}/{repo}/issues/{number}/comments",
            get(list_comments).post(create_comment),
        )
        .route(
            "/repos/{owner}/{repo}/issues/comments/{comment_id}",
            get(get_comment).patch(update_comment),
        )
        .route(
            "/repos/{owner}/{repo}/issues",
            get(list_issues).post(create_issue),
        )
        .route(
            "/repos/{owner}/{repo}/issues/{number}/dependencies/blocked_by",
            get(blocked_by).post(add_blocked_by),
        )
        .route(
            "/repos/{owner}/{repo}/issues/{number}/dependencies/blocked_by/{issue_id}",
            delete(remove_blocked_by),
        )
        .route(
            "/repos/{owner}/{repo}/issues/{number}/sub_issues",
            get(sub_issues).post(add_sub_issue),
        )
        .route("/repos/{owner}/{repo}/commits/{ref}", get(commit))
        .route(
            "/repos/{owner}/{repo}/commits/{ref}/check-runs",
            get(check_runs),
        )
        .route(
            "/repos/{owner}/{repo}/pulls",
            get(list_pulls).post(create_pull),
        )
        .route(
            "/repos/{owner}/{repo}/pulls/{number}",
            get(get_pull).patch(reviews::update_pull),
        )
        .route(
            "/repos/{owner}/{repo}/pulls/{number}/merge",
            put(merge::merge_pull),
        )
        .route(
            "/repos/{owner}/{repo}/pulls/{number}/files",
            get(refs::list_files),
        )
        // A reference spans segments: `heads/feature/x`.
        .route("/repos/{owner}/{repo}/git/ref/{*ref}", get(refs::get_ref))
        .route("/repos/{owner}/{repo}/git/refs", post(refs::create_ref))
        .route(
            "/repos/{owner}/{repo}/pulls/{number}/reviews",
            get(reviews::list_reviews).post(reviews::create_review),
        )
        .route(
            "/repos/{owner}/{repo}/pulls/{number}/reviews/{review_id}",
            get(reviews::get_review),
        )
        .route(
            "/repos/{owner}/{repo}/pulls/comments/{comment_id}",
            get(reviews::get_review_comment),
        )
        .route(
            "/repos/{owner}/{repo}/pulls/{number}/comments",
            get(reviews::list_review_comments).post(reviews::create_review_comment),
        )
        .route(
            "/repos/{owner}/{repo}/pulls/{number}/comments/{comment_id}/replies",
            post(reviews::reply),
        )
        .route(
            "/repos/{owner}/{repo}/issues/{number}/labels",
            post(add_labels),
        )
        .route(
            "/repos/{owner}/{repo}/issues/{number}/labels/{name}",
            delete(remove_label),
        )
        .route(
            "/repos/{owner}/{repo}/actions/workflows/{workflow_id}/dispatches",
            post(dispatch_workflow),
        )
        .route("/repos/{owner}/{repo}/installation", get(installation))
        .route(
            "/app/installations/{installation_id}/access_tokens",
            post(installation_token),
        )
}

/// GitHub's error body.
fn gh_error(status: StatusCode, message: &str, doc: &str) -> Response {
    (
        status,
        axum::Json(json!({
            "message": message,
            "documentation_url": doc,
            "status": status.as_u16().to_string(),
        })),
    )
        .into_response()
}

fn not_found(doc: &str) -> Response {
    gh_error(StatusCode::NOT_FOUND, "Not Found", doc)
}

fn validation_failed(errors: Value, doc: &str) -> Response {
    (
        StatusCode::UNPROCESSABLE_ENTITY,
        axum::Json(json!({
            "message": "Validation Failed",
            "errors": errors,
            "documentation_url": doc,
            "status": "422",
        })),
    )
        .into_response()
}

fn json_ok(status: StatusCode, value: Value) -> Response {
    (status, axum::Json(value)).into_response()
}

async fn not_found_route() -> Response {
    not_found_route_response()
}

/// The 404 of a path the sandbox does not serve.
pub(crate) fn not_found_route_response() -> Response {
    not_found(DOCS)
}

/// Who the `Authorization` header names; `Err` is the 401 answer.
fn identify(
    state: &SandboxState,
    headers: &HeaderMap,
    app_route: bool,
) -> Result<Caller, Response> {
    let raw = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::trim);
    if state.tokens.is_empty() {
        return Ok(match raw {
            Some(r) if app_route && looks_like_jwt(r) => Caller::AppJwt(bearer(r).to_string()),
            _ => Caller::Unrestricted {
                login: state.repo.owner.clone(),
            },
        });
    }
    let Some(raw) = raw else {
        return Ok(Caller::Anonymous);
    };
    let token = bearer(raw);
    if let Some(TokenSeed {
        login,
        scopes,
        permissions,
        expires_at,
        ..
    }) = state.tokens.iter().find(|t| t.token == token)
    {
        if expires_at.is_some_and(|at| at <= chrono::Utc::now()) {
            return Err(gh_error(StatusCode::UNAUTHORIZED, "Bad credentials", DOCS));
        }
        return Ok(Caller::Token {
            login: login.clone(),
            scopes: scopes.clone(),
            permissions: permissions.clone(),
        });
    }
    if app_route && looks_like_jwt(raw) {
        return Ok(Caller::AppJwt(token.to_string()));
    }
    Err(gh_error(StatusCode::UNAUTHORIZED, "Bad credentials", DOCS))
}

fn bearer(raw: &str) -> &str {
    raw.strip_prefix("Bearer ")
        .or_else(|| raw.strip_prefix("bearer "))
        .or_else(|| raw.strip_prefix("token "))
        .unwrap_or(raw)
        .trim()
}

fn looks_like_jwt(raw: &str) -> bool {
    let t = bearer(raw);
    t.starts_with("eyJ") && t.matches('.').count() == 2
}

/// Every request: identify the caller, count it, apply an injected fault, add GitHub's headers.
async fn gate(State(s): S, mut req: Request, next: Next) -> Response {
    let full = req.uri().path().to_string();
    if full.starts_with("/_sandbox/") {
        return next.run(req).await;
    }
    // Count GitHub Enterprise Server's paths under github.com's routes.
    let path = match full.strip_prefix(GHES_PREFIX) {
        Some(rest) if rest.starts_with('/') => rest.to_string(),
        _ if full == "/api/graphql" => "/graphql".to_string(),
        _ => full,
    };
    let template = req.extensions().get::<MatchedPath>().map_or_else(
        || "<unmatched>".to_string(),
        |m| {
            let t = m.as_str();
            t.strip_prefix(GHES_PREFIX)
                .filter(|rest| rest.starts_with('/'))
                .unwrap_or(if t == "/api/graphql" { "/graphql" } else { t })
                // A parameter spanning segments is named as GitHub's description names it.
                .replace("{*", "{")
        },
    );
    let route = format!("{} {template}", req.method());
    let app_route =
        path == "/app" || path.starts_with("/app/") || template.ends_with("/installation");
    let origin = origin_of(&s, req.headers(), full_path_is_ghes(req.uri().path()));
    req.extensions_mut().insert(origin);
    let method = req.method().to_string();
    let checking = s.checking.load(std::sync::atomic::Ordering::Relaxed) && path != "/graphql";
    if checking {
        let (parts, body) = req.into_parts();
        let (parts, body) = inspect(parts, body, |parts, bytes| {
            let query = parts.uri.query();
            s.record(contract(|c| c.check_request(&method, &path, query, bytes)));
        })
        .await;
        req = Request::from_parts(parts, body);
    }
    let caller = identify(&s.state(), req.headers(), app_route);
    let mut resp = match caller {
        Err(resp) => {
            s.admit(&route);
            resp
        }
        Ok(caller) => {
            req.extensions_mut().insert(caller.clone());
            if path == "/graphql" {
                // Counted and faulted by the handler, which knows the operation's name.
                next.run(req).await
            } else {
                let fault = s.admit(&route);
                let denied = permission_denied(&s, &caller, &route);
                let answer = async move {
                    match denied {
                        Some(resp) => resp,
                        None => next.run(req).await,
                    }
                };
                with_fault(fault, answer).await
            }
        }
    };
    // Conditional requests answered 304 do not count against the rate limit.
    if resp.status() == StatusCode::NOT_MODIFIED {
        s.refund();
    }
    let scopes = req_scopes(&resp);
    add_github_headers(&s, &path, &mut resp, scopes);
    if checking {
        let (parts, body) = resp.into_parts();
        let (parts, body) = inspect(parts, body, |parts, bytes| {
            let content_type = parts
                .headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok());
            let status = parts.status.as_u16();
            s.record(contract(|c| {
                c.check_response(&method, &path, status, content_type, bytes)
            }));
        })
        .await;
        resp = Response::from_parts(parts, body);
    }
    resp
}

/// Read a whole body, let `look` see it, and hand it on unchanged.
async fn inspect<P>(
    parts: P,
    body: axum::body::Body,
    look: impl FnOnce(&P, &[u8]),
) -> (P, axum::body::Body) {
    let bytes = axum::body::to_bytes(body, usize::MAX)
        .await
        .unwrap_or_default();
    look(&parts, &bytes);
    (parts, axum::body::Body::from(bytes))
}

/// What `check` finds with GitHub's REST description (nothing when it does not compile, which
/// `Sandbox::check_conformance` refuses up front).
fn contract(check: impl FnOnce(&RestContract) -> Vec<super::Violation>) -> Vec<super::Violation> {
    RestContract::get().map(check).unwrap_or_default()
}

fn full_path_is_ghes(full: &str) -> bool {
    full.starts_with(&format!("{GHES_PREFIX}/")) || full == "/api/graphql"
}

/// Where the caller reached the sandbox: the state's `public_url`, else the request's `Host`.
fn origin_of(s: &Shared, headers: &HeaderMap, ghes: bool) -> Origin {
    let web = s
        .state()
        .public_url
        .clone()
        .or_else(|| {
            headers
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .filter(|h| !h.is_empty() && h.parse::<axum::http::uri::Authority>().is_ok())
                .map(|h| format!("http://{h}"))
        })
        .unwrap_or_else(|| s.base.clone());
    let web = web.trim_end_matches('/').to_string();
    let api = if ghes {
        format!("{web}{GHES_PREFIX}")
    } else {
        web.clone()
    };
    Origin { api, web }
}

/// The repository permission a REST route needs from a fine-grained token or an App installation,
/// as GitHub's `X-Accepted-GitHub-Permissions` names it (`checks=read`).
fn required_permission(route: &str) -> Option<(&'static str, &'static str)> {
    let need = match route {
        "GET /repos/{owner}/{repo}" => ("metadata", "read"),
        "GET /repos/{owner}/{repo}/issues/{number}"
        | "GET /repos/{owner}/{repo}/issues/{number}/comments"
        | "GET /repos/{owner}/{repo}/issues/comments/{comment_id}"
        | "GET /repos/{owner}/{repo}/issues/{number}/dependencies/blocked_by"
        | "GET /repos/{owner}/{repo}/issues/{number}/sub_issues" => ("issues", "read"),
        "POST /repos/{owner}/{repo}/issues"
        | "POST /repos/{owner}/{repo}/issues/{number}/dependencies/blocked_by"
        | "DELETE /repos/{owner}/{repo}/issues/{number}/dependencies/blocked_by/{issue_id}"
        | "POST /repos/{owner}/{repo}/issues/{number}/sub_issues"
        | "PATCH /repos/{owner}/{repo}/issues/{number}"
        | "POST /repos/{owner}/{repo}/issues/{number}/comments"
        | "PATCH /repos/{owner}/{repo}/issues/comments/{comment_id}" => ("issues", "write"),
        "GET /repos/{owner}/{repo}/commits/{ref}" | "GET /repos/{owner}/{repo}/git/ref/{ref}" => {
            ("contents", "read")
        }
        "POST /repos/{owner}/{repo}/git/refs" => ("contents", "write"),
        "GET /repos/{owner}/{repo}/commits/{ref}/check-runs" => ("checks", "read"),
        "GET /repos/{owner}/{repo}/pulls"
        | "GET /repos/{owner}/{repo}/pulls/{number}"
        | "GET /repos/{owner}/{repo}/pulls/{number}/files" => ("pull_requests", "read"),
        "POST /repos/{owner}/{repo}/pulls" => ("pull_requests", "write"),
        "PUT /repos/{owner}/{repo}/pulls/{number}/merge" => ("contents", "write"),
        _ => return None,
    };
    Some(need)
}

/// GitHub's 403 when a fine-grained token or an App installation lacks the route's permission.
/// Reads of a public repository need none.
fn permission_denied(s: &Shared, caller: &Caller, route: &str) -> Option<Response> {
    let (name, level) = required_permission(route)?;
    if level == "read" && !s.state().repo.private {
        return None;
    }
    let by = caller.lacks(name, level)?;
    let mut resp = gh_error(
        StatusCode::FORBIDDEN,
        &format!("Resource not accessible by {by}"),
        DOCS,
    );
    set_header(
        &mut resp,
        HeaderName::from_static("x-accepted-github-permissions"),
        &format!("{name}={level}"),
    );
    Some(resp)
}

/// Scopes to report, carried from the handler through a response extension.
fn req_scopes(resp: &Response) -> Option<String> {
    resp.extensions().get::<ScopesHeader>().map(|s| s.0.clone())
}

#[derive(Clone)]
struct ScopesHeader(String);

/// Apply `fault` around `answer`.
async fn with_fault(fault: Option<Fault>, answer: impl Future<Output = Response>) -> Response {
    let Some(fault) = fault else {
        return answer.await;
    };
    if fault.delay_ms > 0 {
        tokio::time::sleep(Duration::from_millis(fault.delay_ms)).await;
    }
    let mut resp = match fault.status {
        None => answer.await,
        Some(code) => {
            if fault.after_handler {
                let _ = answer.await;
            }
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            json_ok(status, fault.answer_body())
        }
    };
    for (k, v) in &fault.headers {
        if let (Ok(k), Ok(v)) = (
            HeaderName::from_bytes(k.as_bytes()),
            HeaderValue::from_str(v),
        ) {
            resp.headers_mut().insert(k, v);
        }
    }
    resp
}

fn add_github_headers(s: &Shared, path: &str, resp: &mut Response, scopes: Option<String>) {
    let (limit, remaining, reset, used) = s.quota();
    let resource = if path == "/graphql" {
        "graphql"
    } else {
        "core"
    };
    let h = resp.headers_mut();
    let mut put = |k: &'static str, v: String| {
        if !h.contains_key(k) {
            if let Ok(v) = HeaderValue::from_str(&v) {
                h.insert(k, v);
            }
        }
    };
    put("x-ratelimit-limit", limit.to_string());
    put("x-ratelimit-remaining", remaining.to_string());
    put("x-ratelimit-reset", reset.to_string());
    put("x-ratelimit-used", used.to_string());
    put("x-ratelimit-resource", resource.to_string());
    put("x-github-api-version-selected", "2022-11-28".to_string());
    put("x-github-request-id", format!("SANDBOX:{used:08X}"));
    if let Some(scopes) = scopes {
        put("x-oauth-scopes", scopes);
    }
}

/// Attach the caller's scopes so the gate can send `X-OAuth-Scopes`.
fn with_scopes(caller: &Caller, mut resp: Response) -> Response {
    let scopes = match caller.scopes() {
        None => Some("repo, project, read:org".to_string()),
        Some(s) if matches!(caller, Caller::Token { .. }) => Some(s.join(", ")),
        Some(_) => None,
    };
    if let Some(s) = scopes {
        resp.extensions_mut().insert(ScopesHeader(s));
    }
    resp
}

/// Set header `name` to `value`, when `value` can be one.
fn set_header(resp: &mut Response, name: HeaderName, value: &str) {
    if let Ok(v) = HeaderValue::from_str(value) {
        resp.headers_mut().insert(name, v);
    }
}

/// The caller's login; `Err` is the 401 answer for an anonymous caller.
fn require_auth(caller: &Caller) -> Result<&str, Response> {
    caller
        .login()
        .ok_or_else(|| gh_error(StatusCode::UNAUTHORIZED, "Requires authentication", DOCS))
}

fn author_of(caller: &Caller, st: &SandboxState) -> String {
    caller
        .login()
        .map_or_else(|| st.repo.owner.clone(), str::to_string)
}

fn parse_body(body: &Bytes) -> Result<Map<String, Value>, Response> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(m)) => Ok(m),
        _ => Err(gh_error(
            StatusCode::BAD_REQUEST,
            "Problems parsing JSON",
            DOCS,
        )),
    }
}

/// The string at `key` of a request body.
fn text_field(input: &Map<String, Value>, key: &str) -> Option<String> {
    input.get(key).and_then(|v| v.as_str()).map(str::to_string)
}

/// `s` percent-encoded for one URL path segment.
pub(crate) fn path_segment(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, crate::github::PATH_SEGMENT).to_string()
}

fn number(s: &str) -> Option<u64> {
    s.parse().ok()
}

/// The value, or GitHub's 404 pointing at `doc`.
fn found<T>(value: Option<T>, doc: &str) -> Result<T, Response> {
    value.ok_or_else(|| not_found(doc))
}

/// A request on a `/repos/{owner}/{repo}/…` route: the server, the caller, the repository as the
/// path names it, and the path's next parameter (an issue or comment number, a commit ref; empty
/// where the route has none).
///
/// Extracting it checks nothing: the handler's first [`state`](RepoCall::state) (or
/// [`write`](RepoCall::write)) does, so that the repository check answers after the body has been
/// read, as it always has.
struct RepoCall {
    s: Arc<Shared>,
    caller: Caller,
    origin: Origin,
    owner: String,
    repo: String,
    arg: String,
    /// The path's parameters after `arg` (a review comment id).
    more: Vec<String>,
}

impl FromRequestParts<Arc<Shared>> for RepoCall {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, s: &Arc<Shared>) -> Result<Self, Response> {
        let Extension(caller) = Extension::<Caller>::from_request_parts(parts, s)
            .await
            .map_err(IntoResponse::into_response)?;
        let Extension(origin) = Extension::<Origin>::from_request_parts(parts, s)
            .await
            .map_err(IntoResponse::into_response)?;
        let Path(params) = Path::<Vec<String>>::from_request_parts(parts, s)
            .await
            .map_err(IntoResponse::into_response)?;
        let mut params = params.into_iter();
        let mut next = || params.next().unwrap_or_default();
        let (owner, repo, arg) = (next(), next(), next());
        Ok(RepoCall {
            s: s.clone(),
            caller,
            origin,
            owner,
            repo,
            arg,
            more: params.collect(),
        })
    }
}

impl RepoCall {
    /// The path names the sandbox's repository (in any case).
    fn names_ours(&self, st: &SandboxState) -> bool {
        st.repo.owner.eq_ignore_ascii_case(&self.owner)
            && st.repo.name.eq_ignore_ascii_case(&self.repo)
    }

    /// The locked state; `Err` is the 404 answer unless the path names the sandbox's repository
    /// and the caller may see it.
    fn state(&self) -> Result<MutexGuard<'_, SandboxState>, Response> {
        let st = self.s.state();
        if self.names_ours(&st) && (!st.repo.private || !self.caller.is_anonymous()) {
            Ok(st)
        } else {
            Err(not_found(DOCS))
        }
    }

    /// [`state`](RepoCall::state) for a write, which also needs a caller that is not anonymous and
    /// a body that is a JSON object (checked in that order).
    fn write(
        &self,
        body: &Bytes,
    ) -> Result<(MutexGuard<'_, SandboxState>, Map<String, Value>), Response> {
        let st = self.state()?;
        require_auth(&self.caller)?;
        Ok((st, parse_body(body)?))
    }

    /// The checks of a comment write, and the comment's new text.
    fn comment_write(
        &self,
        body: &Bytes,
        doc: &str,
    ) -> Result<(MutexGuard<'_, SandboxState>, String), Response> {
        let (st, input) = self.write(body)?;
        match input.get("body").and_then(|v| v.as_str()) {
            Some(text) if text.chars().count() > crate::github::MAX_BODY_CHARS => {
                Err(validation_failed(
                    json!([{"resource": "IssueComment", "code": "unprocessable", "field": "data",
                        "message": "Body is too long (maximum is 65536 characters)"}]),
                    doc,
                ))
            }
            Some(text) => Ok((st, text.to_string())),
            None => Err(gh_error(
                StatusCode::UNPROCESSABLE_ENTITY,
                "Invalid request.\n\n\"body\" wasn't supplied.",
                doc,
            )),
        }
    }

    /// What `look` finds for the number in the path; `Err` is the 404 answer with `doc` when the
    /// path holds no number or `look` finds nothing.
    fn find<T>(&self, doc: &str, look: impl FnOnce(u64) -> Option<T>) -> Result<T, Response> {
        found(number(&self.arg).and_then(look), doc)
    }

    /// The number in the path; `Err` is the 404 answer with `doc`.
    fn number(&self, doc: &str) -> Result<u64, Response> {
        self.find(doc, Some)
    }

    /// `rest` under the repository's path as the request spelled it.
    fn path(&self, rest: &str) -> String {
        format!(
            "/repos/{}/{}{rest}",
            path_segment(&self.owner),
            path_segment(&self.repo)
        )
    }

    /// The answer builder for this request.
    fn shapes<'a>(&'a self, st: &'a SandboxState) -> Shapes<'a> {
        Shapes::new(&self.origin, st)
    }

    /// The answer, with the caller's scopes.
    fn reply(&self, resp: Response) -> Response {
        with_scopes(&self.caller, resp)
    }

    /// 200 with `body`.
    fn ok(&self, body: Value) -> Response {
        self.reply(json_ok(StatusCode::OK, body))
    }

    /// 201 with `body`, and a `Location` of `rest` under the repository's API URL.
    fn created(&self, st: &SandboxState, body: Value, rest: &str) -> Response {
        let mut resp = json_ok(StatusCode::CREATED, body);
        set_header(&mut resp, header::LOCATION, &self.shapes(st).api(rest));
        self.reply(resp)
    }

    /// One page of `items`, linked under `rest` of the repository's path.
    fn paged(&self, rest: &str, query: &HashMap<String, String>, items: Vec<Value>) -> Response {
        let paging = Paging::of(query, items.len());
        let mut resp = json_ok(StatusCode::OK, Value::Array(paging.page(items).collect()));
        paging.link(&self.origin, &self.path(rest), query, &mut resp);
        self.reply(resp)
    }
}

/// Which page of `total` items a query asks for, as GitHub reads it: `per_page` (default 30, at
/// most 100) and `page` (from 1).
struct Paging {
    per_page: usize,
    page: usize,
    last: usize,
}

impl Paging {
    fn of(query: &HashMap<String, String>, total: usize) -> Paging {
        let get = |k: &str| query.get(k).and_then(|v| v.parse::<usize>().ok());
        let per_page = get("per_page").unwrap_or(30).clamp(1, 100);
        Paging {
            per_page,
            page: get("page").unwrap_or(1).max(1),
            last: total.div_ceil(per_page).max(1),
        }
    }

    /// The items of the page asked for.
    fn page<I: IntoIterator>(&self, items: I) -> impl Iterator<Item = I::Item> {
        items
            .into_iter()
            .skip((self.page - 1) * self.per_page)
            .take(self.per_page)
    }

    /// GitHub's `Link` header to the other pages of `path`, where there are any.
    fn link(
        &self,
        origin: &Origin,
        path: &str,
        query: &HashMap<String, String>,
        resp: &mut Response,
    ) {
        let mut keep: Vec<(&String, &String)> = query
            .iter()
            .filter(|(k, _)| k.as_str() != "page" && k.as_str() != "per_page")
            .collect();
        keep.sort();
        let url = |p: usize| {
            let mut q = url::form_urlencoded::Serializer::new(String::new());
            for (k, v) in &keep {
                q.append_pair(k, v);
            }
            q.append_pair("per_page", &self.per_page.to_string());
            q.append_pair("page", &p.to_string());
            format!("<{}{path}?{}>", origin.api, q.finish())
        };
        let (page, last) = (self.page, self.last);
        let mut links = Vec::new();
        if page > 1 {
            links.push(format!("{}; rel=\"prev\"", url(page - 1)));
        }
        if page < last {
            links.push(format!("{}; rel=\"next\"", url(page + 1)));
            links.push(format!("{}; rel=\"last\"", url(last)));
        }
        if page > 1 {
            links.push(format!("{}; rel=\"first\"", url(1)));
        }
        if !links.is_empty() {
            set_header(resp, header::LINK, &links.join(", "));
        }
    }
}

macro_rules! tri {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(resp) => return resp,
        }
    };
}

async fn user(
    State(s): S,
    Extension(caller): Extension<Caller>,
    Extension(origin): Extension<Origin>,
) -> Response {
    let login = tri!(require_auth(&caller));
    // GitHub answers an App installation token's `GET /user` with a 403: the bot is no user.
    if matches!(
        &caller,
        Caller::Token {
            permissions: Some(_),
            ..
        }
    ) && login.ends_with("[bot]")
    {
        return gh_error(
            StatusCode::FORBIDDEN,
            "Resource not accessible by integration",
            "https://docs.github.com/rest/users/users#get-the-authenticated-user",
        );
    }
    let st = s.state();
    let body = Shapes::new(&origin, &st).account(login);
    with_scopes(&caller, json_ok(StatusCode::OK, body))
}

/// `GET /app`: the App whose JWT authenticates the request.
async fn app(
    State(s): S,
    Extension(caller): Extension<Caller>,
    Extension(origin): Extension<Origin>,
) -> Response {
    let st = s.state();
    let app = tri!(app_of_jwt(&st, &caller));
    json_ok(StatusCode::OK, Shapes::new(&origin, &st).app(&app))
}

async fn repository(call: RepoCall) -> Response {
    let st = tri!(call.state());
    call.ok(call.shapes(&st).repository(true))
}

async fn get_issue(call: RepoCall) -> Response {
    let st = tri!(call.state());
    let doc = "https://docs.github.com/rest/issues/issues#get-an-issue";
    let n = tri!(call.number(doc));
    let body = if let Some(i) = st.issue(n) {
        call.shapes(&st).issue(i)
    } else if let Some(p) = st.pull(n) {
        call.shapes(&st).pull_as_issue(p)
    } else {
        return not_found(doc);
    };
    call.ok(body)
}

async fn add_labels(call: RepoCall, body: Bytes) -> Response {
    let doc = "https://docs.github.com/rest/issues/labels#add-labels-to-an-issue";
    let (mut st, input) = tri!(call.write(&body));
    let n = tri!(call.number(doc));
    let names: Option<Vec<String>> = input.get("labels").and_then(|v| v.as_array()).map(|a| {
        a.iter()
            .filter_map(|l| l.as_str().or_else(|| l.get("name")?.as_str()))
            .map(str::to_string)
            .collect()
    });
    let Some(names) = names.filter(|n| !n.is_empty()) else {
        return validation_failed(
            json!([{"resource": "Label", "field": "labels", "code": "missing_field"}]),
            doc,
        );
    };
    let by = author_of(&call.caller, &st);
    let Some(issue) = st.issue_mut(n) else {
        return not_found(doc);
    };
    let mut added = Vec::new();
    for name in names {
        if !issue.labels.iter().any(|l| l.eq_ignore_ascii_case(&name)) {
            issue.labels.push(name.clone());
            added.push(name);
        }
    }
    let labels = issue.labels.clone();
    for label in added {
        call.s.emit(
            &st,
            Hook::Labeled {
                issue: n,
                label,
                by: by.clone(),
            },
        );
    }
    let body = Value::Array(call.shapes(&st).labels(&labels));
    call.ok(body)
}

async fn remove_label(
    call: RepoCall,
    Path((_, _, _, name)): Path<(String, String, String, String)>,
) -> Response {
    let doc = "https://docs.github.com/rest/issues/labels#remove-a-label-from-an-issue";
    let mut st = tri!(call.state());
    tri!(require_auth(&call.caller));
    let n = tri!(call.number(doc));
    let by = author_of(&call.caller, &st);
    let Some(issue) = st.issue_mut(n) else {
        return not_found(doc);
    };
    let Some(pos) = issue
        .labels
        .iter()
        .position(|l| l.eq_ignore_ascii_case(&name))
    else {
        return gh_error(StatusCode::NOT_FOUND, "Label does not exist", doc);
    };
    let label = issue.labels.remove(pos);
    let labels = issue.labels.clone();
    call.s.emit(
        &st,
        Hook::Unlabeled {
            issue: n,
            label,
            by,
        },
    );
    let body = Value::Array(call.shapes(&st).labels(&labels));
    call.ok(body)
}

async fn dispatch_workflow(call: RepoCall, body: Bytes) -> Response {
    let doc = "https://docs.github.com/rest/actions/workflows#create-a-workflow-dispatch-event";
    let (mut st, input) = tri!(call.write(&body));
    let Some(git_ref) = text_field(&input, "ref") else {
        return validation_failed(
            json!([{"resource": "WorkflowDispatch", "field": "ref", "code": "missing_field"}]),
            doc,
        );
    };
    let mut inputs = BTreeMap::new();
    match input.get("inputs") {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) => {
            for (k, v) in map {
                let Some(v) = v.as_str() else {
                    return gh_error(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        &format!("Invalid value for input '{k}': inputs are strings"),
                        doc,
                    );
                };
                inputs.insert(k.clone(), v.to_string());
            }
        }
        Some(_) => {
            return gh_error(
                StatusCode::UNPROCESSABLE_ENTITY,
                "inputs must be an object",
                doc,
            );
        }
    }
    let known_ref = git_ref == st.repo.default_branch
        || call
            .s
            .git
            .branch_sha(git_ref.trim_start_matches("refs/heads/"))
            .is_some();
    if !known_ref {
        return gh_error(
            StatusCode::UNPROCESSABLE_ENTITY,
            &format!("No ref found for: {git_ref}"),
            doc,
        );
    }
    let actor = author_of(&call.caller, &st);
    st.dispatches.push(DispatchSeed {
        workflow: call.arg.clone(),
        git_ref,
        inputs,
        actor,
        created_at: Some(chrono::Utc::now()),
    });
    call.reply(StatusCode::NO_CONTENT.into_response())
}

/// The `state` of an update (`open` or `closed`), if it names one.
fn state_input(
    input: &Map<String, Value>,
    resource: &str,
    doc: &str,
) -> Result<Option<SeedState>, Response> {
    match input.get("state").map(|v| v.as_str()) {
        None => Ok(None),
        Some(Some("open")) => Ok(Some(SeedState::Open)),
        Some(Some("closed")) => Ok(Some(SeedState::Closed)),
        Some(_) => Err(validation_failed(
            json!([{"resource": resource, "field": "state", "code": "invalid"}]),
            doc,
        )),
    }
}

/// Apply an update's state, title and body to a pull request (the body's editor is `editor`).
fn edit_pull(
    pull: &mut PullSeed,
    input: &Map<String, Value>,
    state: Option<SeedState>,
    editor: String,
) {
    if let Some(state) = state {
        pull.state = state;
    }
    if let Some(t) = text_field(input, "title") {
        pull.title = t;
    }
    if let Some(b) = text_field(input, "body") {
        pull.body = b;
        pull.editor = Some(editor);
    }
}

async fn patch_issue(call: RepoCall, body: Bytes) -> Response {
    let doc = "https://docs.github.com/rest/issues/issues#update-an-issue";
    let (mut st, input) = tri!(call.write(&body));
    let n = tri!(call.number(doc));
    let editor = author_of(&call.caller, &st);
    let state = tri!(state_input(&input, "Issue", doc));
    let now = chrono::Utc::now();
    if let Some(issue) = st.issue_mut(n) {
        let closes = state == Some(SeedState::Closed) && issue.state == SeedState::Open;
        issue.updated_at = Some(now);
        if let Some(state) = state {
            issue.state = state;
            issue.state_reason = match state {
                SeedState::Closed => {
                    Some(text_field(&input, "state_reason").unwrap_or_else(|| "completed".into()))
                }
                SeedState::Open => text_field(&input, "state_reason").filter(|r| r == "reopened"),
            };
        }
        if let Some(t) = text_field(&input, "title").filter(|t| *t != issue.title) {
            issue.renames.push(RenameSeed {
                actor: editor.clone(),
                from: std::mem::replace(&mut issue.title, t.clone()),
                to: t,
                created_at: Some(now),
            });
        }
        // The same body again is no edit: GitHub keeps the last editor.
        if let Some(b) = text_field(&input, "body").filter(|b| *b != issue.body) {
            issue.body = b;
            issue.editor = Some(editor.clone());
        }
        if let Some(labels) = input.get("labels").and_then(|v| v.as_array()) {
            issue.labels = labels
                .iter()
                .filter_map(|l| l.as_str().or_else(|| l.get("name")?.as_str()))
                .map(str::to_string)
                .collect();
        }
        let issue = issue.clone();
        if closes {
            call.s.emit(
                &st,
                Hook::Closed {
                    issue: n,
                    by: editor,
                },
            );
        }
        return call.ok(call.shapes(&st).issue(&issue));
    }
    if let Some(pull) = st.pulls.iter_mut().find(|p| p.number == n) {
        edit_pull(pull, &input, state, editor);
        let pull = pull.clone();
        return call.ok(call.shapes(&st).pull_as_issue(&pull));
    }
    not_found(doc)
}

async fn list_comments(call: RepoCall, Query(q): Q) -> Response {
    let st = tri!(call.state());
    let doc = "https://docs.github.com/rest/issues/comments#list-issue-comments";
    let n = tri!(call.number(doc));
    if st.issue(n).is_none() && st.pull(n).is_none() {
        return not_found(doc);
    }
    let items = st
        .comments_of(n)
        .iter()
        .map(|c| call.shapes(&st).comment(n, c))
        .collect();
    call.paged(&format!("/issues/{n}/comments"), &q, items)
}

async fn create_comment(call: RepoCall, body: Bytes) -> Response {
    let doc = "https://docs.github.com/rest/issues/comments#create-an-issue-comment";
    let (mut st, text) = tri!(call.comment_write(&body, doc));
    let n = tri!(call.number(doc));
    let id = st.next_comment_id();
    let author = author_of(&call.caller, &st);
    let Some(comments) = st.comments_mut(n) else {
        return not_found(doc);
    };
    let now = chrono::Utc::now();
    let comment = CommentSeed {
        id,
        author,
        body: text,
        editor: None,
        created_at: Some(now),
        updated_at: Some(now),
    };
    comments.push(comment.clone());
    if let Some(issue) = st.issue_mut(n) {
        issue.updated_at = Some(now);
    }
    let by = comment.author.clone();
    call.s.emit(
        &st,
        Hook::Commented {
            issue: n,
            comment_id: id,
            by,
        },
    );
    let body = call.shapes(&st).comment(n, &comment);
    call.created(&st, body, &format!("/issues/comments/{id}"))
}

async fn get_comment(call: RepoCall) -> Response {
    let st = tri!(call.state());
    let doc = "https://docs.github.com/rest/issues/comments#get-an-issue-comment";
    let (n, pos) = tri!(call.find(doc, |id| st.find_comment(id)));
    call.ok(call.shapes(&st).comment(n, &st.comments_of(n)[pos]))
}

async fn update_comment(call: RepoCall, body: Bytes) -> Response {
    let doc = "https://docs.github.com/rest/issues/comments#update-an-issue-comment";
    let (mut st, text) = tri!(call.comment_write(&body, doc));
    let (n, pos) = tri!(call.find(doc, |id| st.find_comment(id)));
    let editor = author_of(&call.caller, &st);
    let Some(comments) = st.comments_mut(n) else {
        return not_found(doc);
    };
    let before = std::mem::replace(&mut comments[pos].body, text);
    comments[pos].editor = Some(editor.clone());
    comments[pos].updated_at = Some(chrono::Utc::now());
    let c = comments[pos].clone();
    if before != c.body {
        call.s.emit(
            &st,
            Hook::CommentEdited {
                issue: n,
                comment_id: c.id,
                before,
                by: editor,
            },
        );
    }
    call.ok(call.shapes(&st).comment(n, &c))
}

async fn blocked_by(call: RepoCall, Query(q): Q) -> Response {
    let st = tri!(call.state());
    let doc = "https://docs.github.com/rest/issues/issue-dependencies#list-dependencies-an-issue-is-blocked-by";
    let issue = tri!(call.find(doc, |n| st.issue(n)));
    let items = issue
        .blocked_by
        .iter()
        .filter_map(|b| st.issue(*b))
        .map(|i| call.shapes(&st).issue(i))
        .collect();
    let rest = format!("/issues/{}/dependencies/blocked_by", call.arg);
    call.paged(&rest, &q, items)
}

/// The issue a request body names by its database id at `key`; `Err` is GitHub's answer.
fn issue_named_by_id(
    st: &SandboxState,
    input: &Map<String, Value>,
    key: &str,
    doc: &str,
) -> Result<u64, Response> {
    let Some(id) = input.get(key).and_then(Value::as_u64) else {
        return Err(validation_failed(
            json!([{"resource": "Issue", "field": key, "code": "missing_field"}]),
            doc,
        ));
    };
    match st.issue_by_id(id) {
        Some(i) => Ok(i.number),
        None => Err(validation_failed(
            json!([{"resource": "Issue", "field": key, "code": "invalid",
                "message": format!("{key} {id} is not an issue of this repository")}]),
            doc,
        )),
    }
}

async fn create_issue(call: RepoCall, body: Bytes) -> Response {
    let doc = "https://docs.github.com/rest/issues/issues#create-an-issue";
    let (mut st, input) = tri!(call.write(&body));
    let title = match input.get("title") {
        Some(Value::String(t)) if !t.trim().is_empty() => t.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => {
            return validation_failed(
                json!([{"resource": "Issue", "field": "title", "code": "missing_field"}]),
                doc,
            );
        }
    };
    let text = text_field(&input, "body").unwrap_or_default();
    if text.chars().count() > crate::github::MAX_BODY_CHARS {
        return validation_failed(
            json!([{"resource": "Issue", "code": "custom", "field": "body",
                "message": "body is too long (maximum is 65536 characters)"}]),
            doc,
        );
    }
    let labels: Vec<String> = input
        .get("labels")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|l| l.as_str().or_else(|| l.get("name")?.as_str()))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let now = chrono::Utc::now();
    let number = st.next_number();
    let issue = IssueSeed {
        labels,
        created_at: Some(now),
        updated_at: Some(now),
        ..IssueSeed::new(number, &title, &text, &author_of(&call.caller, &st))
    };
    st.issues.push(issue.clone());
    let body = call.shapes(&st).issue(&issue);
    call.created(&st, body, &format!("/issues/{number}"))
}

/// The repository's issues and pull requests (GitHub's issues API lists both), as GitHub filters
/// them: `state` (`open` by default, `closed`, `all`) and `creator`; sorted by `sort` (`created` by
/// default, `updated`) in `direction` (`desc` by default), paged.
async fn list_issues(call: RepoCall, Query(q): Q) -> Response {
    let st = tri!(call.state());
    let doc = "https://docs.github.com/rest/issues/issues#list-repository-issues";
    let state = q.get("state").map_or("open", String::as_str);
    let (sort, direction) = (
        q.get("sort").map_or("created", String::as_str),
        q.get("direction").map_or("desc", String::as_str),
    );
    if !["open", "closed", "all"].contains(&state)
        || !["created", "updated", "comments"].contains(&sort)
        || !["asc", "desc"].contains(&direction)
    {
        return validation_failed(
            json!([{"resource": "Issue", "code": "invalid", "field": "state, sort or direction"}]),
            doc,
        );
    }
    let by = |login: &str| {
        q.get("creator")
            .is_none_or(|c| c.eq_ignore_ascii_case(login))
    };
    let shown = |open: bool| state == "all" || (state == "open") == open;
    let shapes = call.shapes(&st);
    // (the sort's key, number, answer): numbers are given in the order things are created.
    let key = |created: Option<chrono::DateTime<chrono::Utc>>,
               updated: Option<chrono::DateTime<chrono::Utc>>,
               comments: usize| match sort {
        "updated" => updated.or(created).map_or(0, |t| t.timestamp()),
        "comments" => comments as i64,
        _ => created.map_or(0, |t| t.timestamp()),
    };
    let mut items: Vec<(i64, u64, Value)> = Vec::new();
    for i in st.issues.iter().filter(|i| by(&i.author)) {
        if shown(i.state == SeedState::Open) {
            let k = key(i.created_at, i.updated_at, i.comments.len());
            items.push((k, i.number, shapes.issue(i)));
        }
    }
    for p in st.pulls.iter().filter(|p| by(&p.author)) {
        if shown(p.state == SeedState::Open && !p.merged) {
            let k = key(p.created_at, None, p.comments.len());
            items.push((k, p.number, shapes.pull_as_issue(p)));
        }
    }
    items.sort_by_key(|(k, number, _)| (*k, *number));
    if direction == "desc" {
        items.reverse();
    }
    let items = items.into_iter().map(|(_, _, v)| v).collect();
    call.paged("/issues", &q, items)
}

async fn sub_issues(call: RepoCall, Query(q): Q) -> Response {
    let st = tri!(call.state());
    let doc = "https://docs.github.com/rest/issues/sub-issues#list-sub-issues";
    let issue = tri!(call.find(doc, |n| st.issue(n)));
    let items = issue
        .sub_issues
        .iter()
        .filter_map(|s| st.issue(*s))
        .map(|i| call.shapes(&st).issue(i))
        .collect();
    let rest = format!("/issues/{}/sub_issues", call.arg);
    call.paged(&rest, &q, items)
}

async fn add_sub_issue(call: RepoCall, body: Bytes) -> Response {
    let doc = "https://docs.github.com/rest/issues/sub-issues#add-sub-issue";
    let (mut st, input) = tri!(call.write(&body));
    let parent = tri!(call.find(doc, |n| st.issue(n).map(|i| i.number)));
    let child = tri!(issue_named_by_id(&st, &input, "sub_issue_id", doc));
    let replace = input.get("replace_parent").and_then(Value::as_bool) == Some(true);
    if let Err(message) = st.add_sub_issue(parent, child, replace) {
        return validation_failed(
            json!([{"resource": "Issue", "field": "sub_issue_id", "code": "invalid", "message": message}]),
            doc,
        );
    }
    let Some(issue) = st.issue(parent) else {
        return not_found(doc);
    };
    let issue = issue.clone();
    let body = call.shapes(&st).issue(&issue);
    call.created(&st, body, &format!("/issues/{parent}/sub_issues"))
}

async fn add_blocked_by(call: RepoCall, body: Bytes) -> Response {
    let doc = "https://docs.github.com/rest/issues/issue-dependencies#add-a-dependency-an-issue-is-blocked-by";
    let (mut st, input) = tri!(call.write(&body));
    let number = tri!(call.find(doc, |n| st.issue(n).map(|i| i.number)));
    let blocker = tri!(issue_named_by_id(&st, &input, "issue_id", doc));
    if blocker == number {
        return validation_failed(
            json!([{"resource": "Issue", "field": "issue_id", "code": "invalid",
                "message": "an issue cannot block itself"}]),
            doc,
        );
    }
    let now = chrono::Utc::now();
    let Some(issue) = st.issue_mut(number) else {
        return not_found(doc);
    };
    if !issue.blocked_by.contains(&blocker) {
        issue.blocked_by.push(blocker);
        issue.updated_at = Some(now);
    }
    let issue = issue.clone();
    let body = call.shapes(&st).issue(&issue);
    call.created(
        &st,
        body,
        &format!("/issues/{number}/dependencies/blocked_by"),
    )
}

/// GitHub answers with the issue, no longer blocked by the one of database id `{issue_id}`; 404
/// when that issue does not block it.
async fn remove_blocked_by(call: RepoCall) -> Response {
    let doc = "https://docs.github.com/rest/issues/issue-dependencies#remove-dependency-an-issue-is-blocked-by";
    let mut st = tri!(call.state());
    tri!(require_auth(&call.caller));
    let n = tri!(call.find(doc, |n| st.issue(n).map(|i| i.number)));
    let blocker = (call.more.first())
        .and_then(|id| number(id))
        .and_then(|id| st.issue_by_id(id))
        .map(|i| i.number);
    let now = chrono::Utc::now();
    let Some(issue) = st.issue_mut(n) else {
        return not_found(doc);
    };
    let Some(pos) = blocker.and_then(|b| issue.blocked_by.iter().position(|x| *x == b)) else {
        return not_found(doc);
    };
    issue.blocked_by.remove(pos);
    issue.updated_at = Some(now);
    let issue = issue.clone();
    call.ok(call.shapes(&st).issue(&issue))
}

fn no_commit(spec: &str) -> Response {
    gh_error(
        StatusCode::UNPROCESSABLE_ENTITY,
        &format!("No commit found for SHA: {spec}"),
        "https://docs.github.com/rest/commits/commits#get-a-commit",
    )
}

async fn commit(call: RepoCall, headers: HeaderMap) -> Response {
    // Only the check: the state is not held while git answers.
    drop(tri!(call.state()));
    let Some(c) = call.s.git.commit(&call.arg) else {
        return no_commit(&call.arg);
    };
    let wants_sha = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("vnd.github.sha"));
    if wants_sha {
        // GitHub answers this media type with the bare sha, typed as what was asked for.
        let resp = (
            [(
                header::CONTENT_TYPE,
                "application/vnd.github.sha; charset=utf-8",
            )],
            c.sha,
        )
            .into_response();
        return call.reply(resp);
    }
    let st = call.s.state();
    call.ok(call.shapes(&st).commit(&c))
}

async fn check_runs(call: RepoCall, Query(q): Q, headers: HeaderMap) -> Response {
    let st = tri!(call.state());
    let (s, spec) = (&call.s, &call.arg);
    // Runs are keyed by sha (or by the name they were seeded under); a branch name reaches its sha.
    let sha = s.git.commit(spec).map(|c| c.sha);
    let seeded = st
        .check_runs
        .get(spec)
        .or_else(|| sha.as_ref().and_then(|sha| st.check_runs.get(sha)));
    let runs = match (seeded, &sha) {
        // GitHub has no check runs for a commit it does not have, whatever was seeded for it.
        (_, None) => return no_commit(spec),
        (Some(runs), _) => runs.clone(),
        // A commit without runs of its own gets the state's `auto_check_runs` (a CI that checks every push).
        (None, Some(_)) => st.auto_check_runs.clone(),
    };
    let head_sha = sha.unwrap_or_else(|| spec.clone());
    let paging = Paging::of(&q, runs.len());
    let shapes = call.shapes(&st);
    let started = chrono::DateTime::from_timestamp(s.started, 0).unwrap_or_default();
    let items: Vec<Value> = paging
        .page(runs.iter().enumerate())
        .map(|(i, r)| shapes.check_run(&head_sha, i, r, started))
        .collect();
    let body = json!({"total_count": runs.len(), "check_runs": items});
    let text = body.to_string();
    let etag = format!("W/\"{:08x}{:08x}\"", ids::fnv(&text), text.len());
    let matches = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag));
    let mut resp = if matches {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        json_ok(StatusCode::OK, body)
    };
    set_header(&mut resp, header::ETAG, &etag);
    if !matches {
        let path = call.path(&format!("/commits/{}/check-runs", path_segment(spec)));
        paging.link(&call.origin, &path, &q, &mut resp);
    }
    call.reply(resp)
}

async fn list_pulls(call: RepoCall, Query(q): Q) -> Response {
    let st = tri!(call.state());
    let want_state = q.get("state").map_or("open", String::as_str);
    let head = q.get("head").map(|h| match h.split_once(':') {
        Some((o, b)) => (Some(o.to_string()), b.to_string()),
        None => (None, h.clone()),
    });
    let mut pulls: Vec<&PullSeed> = st
        .pulls
        .iter()
        .filter(|p| {
            let open = p.state == SeedState::Open && !p.merged;
            match want_state {
                "all" => true,
                "closed" => !open,
                _ => open,
            }
        })
        .filter(|p| {
            head.as_ref().is_none_or(|(o, b)| {
                &p.head == b
                    && o.as_ref()
                        .is_none_or(|o| o.eq_ignore_ascii_case(&st.repo.owner))
            })
        })
        .filter(|p| q.get("base").is_none_or(|b| &p.base == b))
        .collect();
    pulls.sort_by_key(|p| std::cmp::Reverse(p.number));
    let items = pulls
        .into_iter()
        .map(|p| call.shapes(&st).pull(&call.s.git, p, false))
        .collect();
    call.paged("/pulls", &q, items)
}

async fn create_pull(call: RepoCall, body: Bytes) -> Response {
    let doc = "https://docs.github.com/rest/pulls/pulls#create-a-pull-request";
    let s = &call.s;
    let (mut st, input) = tri!(call.write(&body));
    let text = |k: &str| text_field(&input, k);
    let (Some(title), Some(head), Some(base)) = (text("title"), text("head"), text("base")) else {
        let missing: Vec<Value> = ["title", "head", "base"]
            .iter()
            .filter(|k| text(k).is_none())
            .map(|k| json!({"resource": "PullRequest", "field": k, "code": "missing_field"}))
            .collect();
        return validation_failed(Value::Array(missing), doc);
    };
    if text("body").is_some_and(|b| b.chars().count() > crate::github::MAX_BODY_CHARS) {
        return validation_failed(
            json!([{"resource": "PullRequest", "code": "custom", "field": "body",
                    "message": "body is too long (maximum is 65536 characters)"}]),
            doc,
        );
    }
    let invalid = |field: &str| {
        validation_failed(
            json!([{"resource": "PullRequest", "field": field, "code": "invalid"}]),
            doc,
        )
    };
    let head_branch = match head.split_once(':') {
        Some((o, b)) if o.eq_ignore_ascii_case(&st.repo.owner) => b.to_string(),
        Some(_) => return invalid("head"),
        None => head.clone(),
    };
    if s.git.branch_sha(&base).is_none() {
        return invalid("base");
    }
    if s.git.branch_sha(&head_branch).is_none() {
        return invalid("head");
    }
    if st
        .pulls
        .iter()
        .any(|p| p.head == head_branch && p.base == base && p.state == SeedState::Open && !p.merged)
    {
        return validation_failed(
            json!([{"resource": "PullRequest", "code": "custom", "message": format!("A pull request already exists for {}:{head_branch}.", st.repo.owner)}]),
            doc,
        );
    }
    if !s.git.has_commits_beyond(&base, &head_branch) {
        return validation_failed(
            json!([{"resource": "PullRequest", "code": "custom", "message": format!("No commits between {base} and {head_branch}")}]),
            doc,
        );
    }
    let mut pull = PullSeed::new(
        st.next_number(),
        &head_branch,
        &base,
        &title,
        &text("body").unwrap_or_default(),
        &author_of(&call.caller, &st),
    );
    pull.draft = input
        .get("draft")
        .and_then(|v| v.as_bool())
        .unwrap_or(false);
    pull.mergeable_pending = st.mergeable_unknown_reads;
    st.pulls.push(pull.clone());
    let rest = format!("/pulls/{}", pull.number);
    // Right after creation GitHub has not computed mergeability yet.
    let body = call.shapes(&st).pull(&s.git, &pull, false);
    call.created(&st, body, &rest)
}

async fn get_pull(call: RepoCall) -> Response {
    let mut st = tri!(call.state());
    let doc = "https://docs.github.com/rest/pulls/pulls#get-a-pull-request";
    let n = tri!(call.find(doc, |n| st.pull(n).map(|p| p.number)));
    // GitHub computes mergeability in the background: the first reads answer `null`.
    let known = match st.pulls.iter_mut().find(|p| p.number == n) {
        Some(p) if p.mergeable_pending > 0 => {
            p.mergeable_pending -= 1;
            false
        }
        _ => true,
    };
    let p = tri!(found(st.pull(n), doc));
    call.ok(call.shapes(&st).pull(&call.s.git, p, known))
}

/// The App whose JWT this is, after checking its signature with the seeded public key.
fn app_of_jwt(st: &SandboxState, caller: &Caller) -> Result<super::state::AppSeed, Response> {
    use octocrab::jsonwebtoken::{Algorithm, DecodingKey, Validation, decode};
    let refuse = |why: &str| {
        gh_error(
            StatusCode::UNAUTHORIZED,
            &format!("A JSON web token could not be decoded: {why}"),
            DOCS,
        )
    };
    let Caller::AppJwt(jwt) = caller else {
        return Err(refuse("send the App's JWT as a Bearer token"));
    };
    #[derive(serde::Deserialize)]
    struct Claims {
        iss: Value,
    }
    for app in &st.apps {
        let pem = match (&app.public_key_pem, &app.public_key_path) {
            (Some(p), _) => p.clone(),
            (None, Some(path)) => std::fs::read_to_string(path).unwrap_or_default(),
            (None, None) => continue,
        };
        let Ok(key) = DecodingKey::from_rsa_pem(pem.as_bytes()) else {
            continue;
        };
        let mut validation = Validation::new(Algorithm::RS256);
        validation.set_required_spec_claims(&["exp"]);
        validation.leeway = 60;
        if let Ok(data) = decode::<Claims>(jwt, &key, &validation) {
            let iss = match &data.claims.iss {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            if iss == app.app_id.to_string() {
                return Ok(app.clone());
            }
        }
    }
    Err(refuse("no installed App's key verifies it"))
}

async fn installation(call: RepoCall) -> Response {
    let st = call.s.state();
    let app = tri!(app_of_jwt(&st, &call.caller));
    if !call.names_ours(&st) {
        return not_found(
            "https://docs.github.com/rest/apps/apps#get-a-repository-installation-for-the-authenticated-app",
        );
    }
    json_ok(StatusCode::OK, call.shapes(&st).installation(&app))
}

async fn installation_token(
    State(s): S,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Response {
    let mut st = s.state();
    let app = tri!(app_of_jwt(&st, &caller));
    if number(&id) != Some(app.installation_id) {
        return not_found(
            "https://docs.github.com/rest/apps/apps#create-an-installation-access-token-for-an-app",
        );
    }
    let token = format!("ghs_sandbox{:016x}", fastrand::u64(..));
    let lifetime = app.token_lifetime_secs.unwrap_or(3600);
    let expires_at = chrono::Utc::now() + chrono::Duration::seconds(lifetime as i64);
    let permissions = app.token_permissions();
    st.tokens.push(TokenSeed {
        token: token.clone(),
        login: app.bot_login(),
        scopes: app.scopes.clone(),
        permissions: Some(permissions.clone()),
        expires_at: Some(expires_at),
    });
    json_ok(
        StatusCode::CREATED,
        json!({
            "token": token,
            "expires_at": iso(expires_at),
            "permissions": permissions,
            "repository_selection": "all",
        }),
    )
}

async fn graphql(
    State(s): S,
    Extension(caller): Extension<Caller>,
    Extension(origin): Extension<Origin>,
    body: Bytes,
) -> Response {
    let (request, name) = match graphql_request(&caller, &body) {
        Ok(ok) => ok,
        Err(resp) => {
            s.admit("POST /graphql");
            return resp;
        }
    };
    let fault = s.admit(&format!("POST /graphql {name}"));
    let answer = async {
        let body = execute(&s, &caller, &origin, &request);
        with_scopes(&caller, json_ok(StatusCode::OK, body))
    };
    let resp = with_fault(fault, answer).await;
    if !s.checking.load(std::sync::atomic::Ordering::Relaxed) {
        return resp;
    }
    // Held to the shape of the query, whatever produced the answer.
    let (parts, body) = resp.into_parts();
    let (parts, body) = inspect(parts, body, |parts, bytes| {
        let answer = serde_json::from_slice::<Value>(bytes);
        let doc = document(&request);
        if let (Ok(doc), Ok(answer), true) = (doc, answer, parts.status.is_success()) {
            if let Ok((op, name)) = operation(&doc, &request) {
                s.record(check_graphql_answer(&doc, op, &name, &answer));
            }
        }
    })
    .await;
    Response::from_parts(parts, body)
}

/// The request and the name of the operation it runs; `Err` is the answer to a request that runs
/// none (counted under `POST /graphql` alone).
fn graphql_request(caller: &Caller, body: &Bytes) -> Result<(GqlRequest, String), Response> {
    let Ok(request) = serde_json::from_slice::<GqlRequest>(body) else {
        return Err(gh_error(
            StatusCode::BAD_REQUEST,
            "Problems parsing JSON",
            "https://docs.github.com/graphql",
        ));
    };
    if caller.is_anonymous() {
        return Err(gh_error(
            StatusCode::UNAUTHORIZED,
            "This endpoint requires you to be authenticated.",
            "https://docs.github.com/graphql/guides/forming-calls-with-graphql#authenticating-with-graphql",
        ));
    }
    let name = operation_name(&request).map_err(|errors| json_ok(StatusCode::OK, errors))?;
    Ok((request, name))
}

/// The request's query, parsed; `Err` is the errors body when there is none or it does not parse.
fn document(request: &GqlRequest) -> Result<Document<'_, &str>, Value> {
    let Some(query) = request.query.as_deref() else {
        return Err(
            json!({"errors": [{"message": "A query attribute must be specified and must be a string."}]}),
        );
    };
    graphql_parser::parse_query::<&str>(query)
        .map_err(|e| json!({"errors": [{"message": format!("Parse error: {e}")}]}))
}

/// The operation the request runs in `doc` and its name; `Err` is the errors body when there is
/// none to run.
fn operation<'d, 'q>(
    doc: &'d Document<'q, &'q str>,
    request: &GqlRequest,
) -> Result<(&'d OperationDefinition<'q, &'q str>, String), Value> {
    pick_operation(doc, request.operation_name.as_deref())
        .map_err(|message| json!({"errors": [{"message": message}]}))
}

/// The name of the operation the request runs, or the errors body when there is none to run.
fn operation_name(request: &GqlRequest) -> Result<String, Value> {
    let doc = document(request)?;
    operation(&doc, request).map(|(_, name)| name)
}

/// Run the request over the state (kept synchronous: the parsed document never crosses an await).
fn execute(s: &Shared, caller: &Caller, origin: &Origin, request: &GqlRequest) -> Value {
    let doc = match document(request) {
        Ok(doc) => doc,
        Err(errors) => return errors,
    };
    match operation(&doc, request) {
        Ok((op, _)) => {
            let mut st = s.state();
            let mutation = matches!(op, OperationDefinition::Mutation(_)) && s.hooks.is_some();
            let before = mutation.then(|| st.board.as_ref().map(|b| b.items.clone()));
            let answer = Exec::new(
                &mut st,
                &origin.web,
                caller,
                &doc,
                request.variables.as_ref(),
            )
            .with_git(&s.git)
            .run(op);
            if let Some(Some(before)) = before {
                card_moves(s, &st, caller, &before);
            }
            answer
        }
        Err(errors) => errors,
    }
}

/// The webhooks of the cards a mutation moved.
fn card_moves(
    s: &Shared,
    st: &SandboxState,
    caller: &Caller,
    before: &BTreeMap<u64, Option<String>>,
) {
    let Some(board) = &st.board else {
        return;
    };
    let by = author_of(caller, st);
    for (issue, to) in &board.items {
        let from = before.get(issue);
        if from != Some(to) {
            s.emit(
                st,
                Hook::CardMoved {
                    issue: *issue,
                    from: from.cloned().flatten(),
                    to: to.clone(),
                    by: by.clone(),
                },
            );
        }
    }
}

async fn dump(State(s): S, Query(q): Q) -> Response {
    let snapshot = s.snapshot();
    if q.get("format").is_some_and(|f| f == "yaml") {
        return match snapshot.to_yaml() {
            Ok(text) => ([(header::CONTENT_TYPE, "application/yaml")], text).into_response(),
            Err(e) => gh_error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string(), DOCS),
        };
    }
    json_ok(
        StatusCode::OK,
        serde_json::to_value(&snapshot).unwrap_or_default(),
    )
}

async fn counts(State(s): S) -> Response {
    let counts = super::lock(&s.counts).clone();
    json_ok(
        StatusCode::OK,
        serde_json::to_value(counts).unwrap_or_default(),
    )
}

async fn add_fault(State(s): S, body: Bytes) -> Response {
    match serde_json::from_slice::<Fault>(&body) {
        Ok(fault) => {
            super::lock(&s.faults).push(fault);
            json_ok(
                StatusCode::CREATED,
                json!({"queued": super::lock(&s.faults).len()}),
            )
        }
        Err(e) => gh_error(
            StatusCode::BAD_REQUEST,
            &format!(
                "not a fault: {e} (fields: route, status, headers, body, delay_ms, times, after_handler)"
            ),
            DOCS,
        ),
    }
}

/// Play a human's action on the state, with its webhook.
pub(super) fn act(s: &Shared, act: Act) -> Result<(), String> {
    let mut st = s.state();
    let missing = |n: u64| format!("issue or pull request #{n} does not exist");
    let hook = match act {
        Act::Move { issue, to, by } => {
            let board = st.board.as_mut().ok_or("the sandbox has no board")?;
            if let Some(column) = &to {
                if !board.options.contains(column) {
                    return Err(format!(
                        "`{column}` is not a column of the board ({})",
                        board.options.join(", ")
                    ));
                }
            }
            let from = board.items.insert(issue, to.clone()).flatten();
            Hook::CardMoved {
                issue,
                from,
                to,
                by,
            }
        }
        Act::Comment { issue, body, by } => {
            let id = st.next_comment_id();
            st.comments_mut(issue)
                .ok_or_else(|| missing(issue))?
                .push(CommentSeed {
                    id,
                    author: by.clone(),
                    body,
                    editor: None,
                    created_at: Some(chrono::Utc::now()),
                    updated_at: Some(chrono::Utc::now()),
                });
            Hook::Commented {
                issue,
                comment_id: id,
                by,
            }
        }
        Act::Label { issue, name, by } => {
            let i = st.issue_mut(issue).ok_or_else(|| missing(issue))?;
            if !i.labels.iter().any(|l| l.eq_ignore_ascii_case(&name)) {
                i.labels.push(name.clone());
            }
            Hook::Labeled {
                issue,
                label: name,
                by,
            }
        }
        Act::Unlabel { issue, name, by } => {
            let i = st.issue_mut(issue).ok_or_else(|| missing(issue))?;
            i.labels.retain(|l| !l.eq_ignore_ascii_case(&name));
            Hook::Unlabeled {
                issue,
                label: name,
                by,
            }
        }
        Act::Close { issue, by } => {
            let i = st.issue_mut(issue).ok_or_else(|| missing(issue))?;
            i.state = SeedState::Closed;
            i.state_reason = Some("completed".into());
            Hook::Closed { issue, by }
        }
    };
    s.emit(&st, hook);
    Ok(())
}

async fn act_route(State(s): S, body: Bytes) -> Response {
    let action = match serde_json::from_slice::<Act>(&body) {
        Ok(action) => action,
        Err(e) => {
            return gh_error(
                StatusCode::BAD_REQUEST,
                &format!("not an action: {e} (one of move, comment, label, unlabel, close)"),
                DOCS,
            );
        }
    };
    match act(&s, action) {
        Ok(()) => json_ok(StatusCode::OK, json!({ "done": true })),
        Err(e) => gh_error(StatusCode::UNPROCESSABLE_ENTITY, &e, DOCS),
    }
}

async fn deliveries(State(s): S) -> Response {
    let log = s.hooks.as_ref().map(|h| h.log()).unwrap_or_default();
    json_ok(
        StatusCode::OK,
        serde_json::to_value(log).unwrap_or_default(),
    )
}

mod merge;
mod refs;
mod reviews;
