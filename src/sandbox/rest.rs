//! The HTTP side: routes, the gate every request passes (auth, counting, faults, rate-limit
//! headers), the REST handlers and the GraphQL endpoint.

// Handlers return early with a finished error `Response` through `Result<_, Response>`; boxing
// each one would only add noise to a test server.
#![allow(clippy::result_large_err)]

use std::collections::HashMap;
use std::sync::{Arc, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Extension, FromRequestParts, MatchedPath, Path, Query, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use graphql_parser::query::{Document, OperationDefinition};
use serde_json::{Map, Value, json};

use super::git::Mergeability;
use super::graphql::{Exec, GqlRequest, pick_operation};
use super::state::{CommentSeed, IssueSeed, PullSeed, SandboxState, SeedState, TokenSeed};
use super::{Caller, Fault, Shared, ids};

type S = State<Arc<Shared>>;
type Q = Query<HashMap<String, String>>;

const DOCS: &str = "https://docs.github.com/rest";

/// GitHub Enterprise Server's REST prefix; the sandbox answers with and without it.
const GHES_PREFIX: &str = "/api/v3";

pub(crate) fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .merge(api_routes())
        .nest(GHES_PREFIX, api_routes())
        .route("/graphql", post(graphql))
        .route("/api/graphql", post(graphql))
        .route("/_sandbox/state", get(dump))
        .route("/_sandbox/requests", get(counts))
        .route("/_sandbox/faults", post(add_fault))
        .fallback(not_found_route)
        .layer(middleware::from_fn_with_state(shared.clone(), gate))
        .with_state(shared)
}

/// The REST routes, served at the root (as api.github.com) and under `/api/v3` (as GHES).
fn api_routes() -> Router<Arc<Shared>> {
    Router::new()
        .route("/user", get(user))
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
            "/repos/{owner}/{repo}/issues/{number}/dependencies/blocked_by",
            get(blocked_by),
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
            "/repos/{owner}/{repo}/pulls/{number}/reviews",
            get(reviews::list_reviews).post(reviews::create_review),
        )
        .route(
            "/repos/{owner}/{repo}/pulls/{number}/comments",
            get(reviews::list_review_comments).post(reviews::create_review_comment),
        )
        .route(
            "/repos/{owner}/{repo}/pulls/{number}/comments/{comment_id}/replies",
            post(reviews::reply),
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
    if let Some(TokenSeed { login, scopes, .. }) = state.tokens.iter().find(|t| t.token == token) {
        return Ok(Caller::Token {
            login: login.clone(),
            scopes: scopes.clone(),
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
                .to_string()
        },
    );
    let route = format!("{} {template}", req.method());
    let app_route = path.starts_with("/app/") || template.ends_with("/installation");
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
                with_fault(fault, next.run(req)).await
            }
        }
    };
    let scopes = req_scopes(&resp);
    add_github_headers(&s, &path, &mut resp, scopes);
    resp
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
        let Path(params) = Path::<Vec<String>>::from_request_parts(parts, s)
            .await
            .map_err(IntoResponse::into_response)?;
        let mut params = params.into_iter();
        let mut next = || params.next().unwrap_or_default();
        let (owner, repo, arg) = (next(), next(), next());
        Ok(RepoCall {
            s: s.clone(),
            caller,
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
        format!("/repos/{}/{}{rest}", self.owner, self.repo)
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
        set_header(&mut resp, header::LOCATION, &api(&self.s, st, rest));
        self.reply(resp)
    }

    /// One page of `items`, linked under `rest` of the repository's path.
    fn paged(&self, rest: &str, query: &HashMap<String, String>, items: Vec<Value>) -> Response {
        let paging = Paging::of(query, items.len());
        let mut resp = json_ok(StatusCode::OK, Value::Array(paging.page(items).collect()));
        paging.link(&self.s, &self.path(rest), query, &mut resp);
        self.reply(resp)
    }
}

fn user_json(base: &str, login: &str) -> Value {
    let bot = login.ends_with("[bot]");
    json!({
        "login": login,
        "id": ids::fnv(login),
        "node_id": format!("U_{login}"),
        "type": if bot { "Bot" } else { "User" },
        "site_admin": false,
        "url": format!("{base}/users/{login}"),
        "html_url": format!("{base}/{login}"),
    })
}

fn web(s: &Shared, st: &SandboxState, rest: &str) -> String {
    format!("{}/{}/{}{rest}", s.base, st.repo.owner, st.repo.name)
}

fn api(s: &Shared, st: &SandboxState, rest: &str) -> String {
    format!("{}/repos/{}/{}{rest}", s.base, st.repo.owner, st.repo.name)
}

fn association(st: &SandboxState, login: &str) -> &'static str {
    if st.repo.owner.eq_ignore_ascii_case(login) {
        "OWNER"
    } else {
        "NONE"
    }
}

/// GitHub's timestamp format.
fn iso(t: chrono::DateTime<chrono::Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn time(t: Option<chrono::DateTime<chrono::Utc>>) -> String {
    iso(t.unwrap_or_else(chrono::Utc::now))
}

fn issue_json(s: &Shared, st: &SandboxState, i: &IssueSeed) -> Value {
    let n = i.number;
    json!({
        "id": n,
        "node_id": ids::issue(n),
        "number": n,
        "title": i.title,
        "body": i.body,
        "user": user_json(&s.base, &i.author),
        "labels": i.labels.iter().map(|l| json!({
            "id": ids::fnv(l), "node_id": format!("LA_{l}"), "name": l, "color": "ededed", "default": false,
        })).collect::<Vec<_>>(),
        "state": match i.state { SeedState::Open => "open", SeedState::Closed => "closed" },
        "state_reason": i.state_reason,
        "locked": false,
        "comments": i.comments.len(),
        "author_association": association(st, &i.author),
        "created_at": time(i.created_at),
        "updated_at": time(i.created_at),
        "closed_at": Value::Null,
        "url": api(s, st, &format!("/issues/{n}")),
        "repository_url": api(s, st, ""),
        "comments_url": api(s, st, &format!("/issues/{n}/comments")),
        "html_url": web(s, st, &format!("/issues/{n}")),
    })
}

/// A pull request as the issues API shows it.
fn pull_as_issue_json(s: &Shared, st: &SandboxState, p: &PullSeed) -> Value {
    let n = p.number;
    json!({
        "id": n,
        "node_id": ids::pull(n),
        "number": n,
        "title": p.title,
        "body": p.body,
        "user": user_json(&s.base, &p.author),
        "labels": [],
        "state": if p.state == SeedState::Open && !p.merged { "open" } else { "closed" },
        "locked": false,
        "comments": 0,
        "author_association": association(st, &p.author),
        "created_at": time(p.created_at),
        "url": api(s, st, &format!("/issues/{n}")),
        "html_url": web(s, st, &format!("/pull/{n}")),
        "pull_request": {
            "url": api(s, st, &format!("/pulls/{n}")),
            "html_url": web(s, st, &format!("/pull/{n}")),
        },
    })
}

fn comment_json(s: &Shared, st: &SandboxState, issue: u64, c: &CommentSeed) -> Value {
    json!({
        "id": c.id,
        "node_id": format!("IC_{}", c.id),
        "user": user_json(&s.base, &c.author),
        "body": c.body,
        "author_association": association(st, &c.author),
        "created_at": time(c.created_at),
        "updated_at": time(c.created_at),
        "url": api(s, st, &format!("/issues/comments/{}", c.id)),
        "issue_url": api(s, st, &format!("/issues/{issue}")),
        "html_url": web(s, st, &format!("/issues/{issue}#issuecomment-{}", c.id)),
    })
}

fn pull_json(s: &Shared, st: &SandboxState, p: &PullSeed) -> Value {
    let n = p.number;
    let open = p.state == SeedState::Open && !p.merged;
    let (mergeable, mergeable_state) = if open {
        match s.git.mergeability(&p.base, &p.head) {
            Mergeability::Clean if p.draft => (json!(true), "draft"),
            Mergeability::Clean => (json!(true), "clean"),
            Mergeability::Conflicting => (json!(false), "dirty"),
            Mergeability::Unknown => (Value::Null, "unknown"),
        }
    } else {
        (Value::Null, "unknown")
    };
    let side = |branch: &str| {
        json!({
            "ref": branch,
            "sha": s.git.branch_sha(branch).unwrap_or_default(),
            "label": format!("{}:{branch}", st.repo.owner),
            "repo": {"name": st.repo.name, "full_name": format!("{}/{}", st.repo.owner, st.repo.name)},
        })
    };
    json!({
        "id": 1_000_000 + n,
        "node_id": ids::pull(n),
        "number": n,
        "state": if open { "open" } else { "closed" },
        "locked": false,
        "title": p.title,
        "body": p.body,
        "user": user_json(&s.base, &p.author),
        "draft": p.draft,
        "merged": p.merged,
        "mergeable": mergeable,
        "mergeable_state": mergeable_state,
        "head": side(&p.head),
        "base": side(&p.base),
        "author_association": association(st, &p.author),
        "created_at": time(p.created_at),
        "updated_at": time(p.created_at),
        "url": api(s, st, &format!("/pulls/{n}")),
        "issue_url": api(s, st, &format!("/issues/{n}")),
        "html_url": web(s, st, &format!("/pull/{n}")),
    })
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
    fn link(&self, s: &Shared, path: &str, query: &HashMap<String, String>, resp: &mut Response) {
        let mut keep: Vec<(&String, &String)> = query
            .iter()
            .filter(|(k, _)| k.as_str() != "page" && k.as_str() != "per_page")
            .collect();
        keep.sort();
        let url = |p: usize| {
            let mut q: Vec<String> = keep
                .iter()
                .map(|(k, v)| {
                    format!(
                        "{}={}",
                        crate::github::url_encode(k),
                        crate::github::url_encode(v)
                    )
                })
                .collect();
            q.push(format!("per_page={}", self.per_page));
            q.push(format!("page={p}"));
            format!("<{}{path}?{}>", s.base, q.join("&"))
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

async fn user(State(s): S, Extension(caller): Extension<Caller>) -> Response {
    let login = tri!(require_auth(&caller));
    with_scopes(&caller, json_ok(StatusCode::OK, user_json(&s.base, login)))
}

async fn repository(call: RepoCall) -> Response {
    let st = tri!(call.state());
    let (s, r) = (&call.s, &st.repo);
    call.ok(json!({
        "id": 1,
        "node_id": ids::REPO,
        "name": r.name,
        "full_name": format!("{}/{}", r.owner, r.name),
        "owner": user_json(&s.base, &r.owner),
        "private": r.private,
        "default_branch": r.default_branch,
        "html_url": web(s, &st, ""),
        "url": api(s, &st, ""),
    }))
}

async fn get_issue(call: RepoCall) -> Response {
    let st = tri!(call.state());
    let doc = "https://docs.github.com/rest/issues/issues#get-an-issue";
    let n = tri!(call.number(doc));
    let body = if let Some(i) = st.issue(n) {
        issue_json(&call.s, &st, i)
    } else if let Some(p) = st.pull(n) {
        pull_as_issue_json(&call.s, &st, p)
    } else {
        return not_found(doc);
    };
    call.ok(body)
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
    if let Some(issue) = st.issue_mut(n) {
        if let Some(state) = state {
            issue.state = state;
            issue.state_reason = match state {
                SeedState::Closed => {
                    Some(text_field(&input, "state_reason").unwrap_or_else(|| "completed".into()))
                }
                SeedState::Open => text_field(&input, "state_reason").filter(|r| r == "reopened"),
            };
        }
        if let Some(t) = text_field(&input, "title") {
            issue.title = t;
        }
        if let Some(b) = text_field(&input, "body") {
            issue.body = b;
            issue.editor = Some(editor);
        }
        if let Some(labels) = input.get("labels").and_then(|v| v.as_array()) {
            issue.labels = labels
                .iter()
                .filter_map(|l| l.as_str().or_else(|| l.get("name")?.as_str()))
                .map(str::to_string)
                .collect();
        }
        let issue = issue.clone();
        return call.ok(issue_json(&call.s, &st, &issue));
    }
    if let Some(pull) = st.pulls.iter_mut().find(|p| p.number == n) {
        edit_pull(pull, &input, state, editor);
        let pull = pull.clone();
        return call.ok(pull_as_issue_json(&call.s, &st, &pull));
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
        .map(|c| comment_json(&call.s, &st, n, c))
        .collect();
    call.paged(&format!("/issues/{n}/comments"), &q, items)
}

async fn create_comment(call: RepoCall, body: Bytes) -> Response {
    let doc = "https://docs.github.com/rest/issues/comments#create-an-issue-comment";
    let (mut st, text) = tri!(call.comment_write(&body, doc));
    let n = tri!(call.number(doc));
    let id = st.max_comment_id() + 1;
    let author = author_of(&call.caller, &st);
    let Some(comments) = st.comments_mut(n) else {
        return not_found(doc);
    };
    let comment = CommentSeed {
        id,
        author,
        body: text,
        editor: None,
        created_at: Some(chrono::Utc::now()),
    };
    comments.push(comment.clone());
    let body = comment_json(&call.s, &st, n, &comment);
    call.created(&st, body, &format!("/issues/comments/{id}"))
}

async fn get_comment(call: RepoCall) -> Response {
    let st = tri!(call.state());
    let doc = "https://docs.github.com/rest/issues/comments#get-an-issue-comment";
    let (n, pos) = tri!(call.find(doc, |id| st.find_comment(id)));
    call.ok(comment_json(&call.s, &st, n, &st.comments_of(n)[pos]))
}

async fn update_comment(call: RepoCall, body: Bytes) -> Response {
    let doc = "https://docs.github.com/rest/issues/comments#update-an-issue-comment";
    let (mut st, text) = tri!(call.comment_write(&body, doc));
    let (n, pos) = tri!(call.find(doc, |id| st.find_comment(id)));
    let editor = author_of(&call.caller, &st);
    let Some(comments) = st.comments_mut(n) else {
        return not_found(doc);
    };
    comments[pos].body = text;
    comments[pos].editor = Some(editor);
    let c = comments[pos].clone();
    call.ok(comment_json(&call.s, &st, n, &c))
}

async fn blocked_by(call: RepoCall, Query(q): Q) -> Response {
    let st = tri!(call.state());
    let doc = "https://docs.github.com/rest/issues/issue-dependencies#list-dependencies-an-issue-is-blocked-by";
    let issue = tri!(call.find(doc, |n| st.issue(n)));
    let items = issue
        .blocked_by
        .iter()
        .filter_map(|b| st.issue(*b))
        .map(|i| issue_json(&call.s, &st, i))
        .collect();
    let rest = format!("/issues/{}/dependencies/blocked_by", call.arg);
    call.paged(&rest, &q, items)
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
        return call.reply((StatusCode::OK, c.sha).into_response());
    }
    let st = call.s.state();
    let date = iso(chrono::DateTime::from_timestamp(c.time, 0).unwrap_or_default());
    call.ok(json!({
        "sha": c.sha,
        "node_id": format!("C_{}", c.sha),
        "commit": {
            "message": c.message,
            "author": {"name": c.author, "email": c.email, "date": date},
            "committer": {"name": c.author, "email": c.email, "date": date},
        },
        "parents": c.parents.iter().map(|p| json!({"sha": p})).collect::<Vec<_>>(),
        "url": api(&call.s, &st, &format!("/commits/{}", c.sha)),
        "html_url": web(&call.s, &st, &format!("/commit/{}", c.sha)),
    }))
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
        (Some(runs), _) => runs.clone(),
        // A commit without runs of its own gets the state's `auto_check_runs` (a CI that checks every push).
        (None, Some(_)) => st.auto_check_runs.clone(),
        (None, None) => return no_commit(spec),
    };
    let head_sha = sha.unwrap_or_else(|| spec.clone());
    let paging = Paging::of(&q, runs.len());
    let items: Vec<Value> = paging
        .page(runs.iter().enumerate())
        .map(|(i, r)| {
            json!({
                "id": u64::from(ids::fnv(&format!("{head_sha}/{}", r.name))) + i as u64,
                "name": r.name,
                "head_sha": head_sha,
                "status": r.status,
                "conclusion": r.conclusion,
                "html_url": r.html_url.clone().unwrap_or_else(|| web(s, &st, &format!("/runs/{}", ids::fnv(&r.name)))),
                "details_url": r.html_url,
            })
        })
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
        let path = call.path(&format!("/commits/{spec}/check-runs"));
        paging.link(s, &path, &q, &mut resp);
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
        .map(|p| pull_json(&call.s, &st, p))
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
    st.pulls.push(pull.clone());
    let rest = format!("/pulls/{}", pull.number);
    call.created(&st, pull_json(s, &st, &pull), &rest)
}

async fn get_pull(call: RepoCall) -> Response {
    let st = tri!(call.state());
    let doc = "https://docs.github.com/rest/pulls/pulls#get-a-pull-request";
    let p = tri!(call.find(doc, |n| st.pull(n)));
    call.ok(pull_json(&call.s, &st, p))
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
    json_ok(
        StatusCode::OK,
        json!({
            "id": app.installation_id,
            "app_id": app.app_id,
            "app_slug": app.slug,
            "account": user_json(&call.s.base, &st.repo.owner),
            "target_type": "Organization",
            "permissions": {"issues": "write", "pull_requests": "write", "contents": "write", "organization_projects": "write"},
        }),
    )
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
    st.tokens.push(TokenSeed {
        token: token.clone(),
        login: format!("{}[bot]", app.slug),
        scopes: app.scopes.clone(),
    });
    let expires = iso(chrono::Utc::now() + chrono::Duration::hours(1));
    json_ok(
        StatusCode::CREATED,
        json!({"token": token, "expires_at": expires, "permissions": {}, "repository_selection": "all"}),
    )
}

async fn graphql(State(s): S, Extension(caller): Extension<Caller>, body: Bytes) -> Response {
    let (request, name) = match graphql_request(&caller, &body) {
        Ok(ok) => ok,
        Err(resp) => {
            s.admit("POST /graphql");
            return resp;
        }
    };
    let fault = s.admit(&format!("POST /graphql {name}"));
    let answer = async { json_ok(StatusCode::OK, execute(&s, &caller, &request)) };
    with_fault(fault, answer).await
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
fn execute(s: &Shared, caller: &Caller, request: &GqlRequest) -> Value {
    let doc = match document(request) {
        Ok(doc) => doc,
        Err(errors) => return errors,
    };
    match operation(&doc, request) {
        Ok((op, _)) => {
            let mut st = s.state();
            Exec::new(&mut st, &s.base, caller, &doc, request.variables.as_ref())
                .with_git(&s.git)
                .run(op)
        }
        Err(errors) => errors,
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
mod reviews;
