//! The read-only web view: the pages a person opens from the URLs in the sandbox's answers, laid
//! out as GitHub lays them out — the repository (`/`, `/{owner}/{repo}`) with its issues, pull
//! requests and board; an issue with its timeline; a pull request with its conversation (comments,
//! reviews and line-comment threads in the order they were made), its commits and its diff ("Files
//! changed") from the sandbox's git repository; and the board (`/orgs/{owner}/projects/{n}`).
//! Plain HTML and one style sheet, served from the binary: no script, nothing fetched elsewhere.
//! Bodies and comments are untrusted Markdown ([`markdown`]). These routes sit outside the API's
//! gate (no token, not counted, not checked against GitHub's API description); anything they do
//! not know is the API's 404.

mod markdown;

use std::fmt::Write as _;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use chrono::{DateTime, Utc};
use pulldown_cmark::{Event, html};

use super::Shared;
use super::git::{CommitInfo, DiffLine, FileDiff};
use super::state::{
    BoardSeed, CommentSeed, IssueSeed, PullSeed, RenameSeed, ReviewCommentSeed, ReviewSeed,
    SandboxState, SeedState,
};
use markdown::markdown;

type S = State<Arc<Shared>>;

const STYLE: &str = include_str!("style.css");

/// The sandbox's mark (an F in a dark disc, on a 16 × 16 grid): the page header's logo, and the
/// icon browsers show in the tab, served at `/favicon.ico` (they ask for it unprompted).
const MARK: &str = "<circle cx=\"8\" cy=\"8\" r=\"7.5\" fill=\"#1f2328\"/><path d=\"M5 4.5h6v2H7.2v1.2H10v2H7.2v1.8H5z\" fill=\"#fff\"/>";

pub(crate) fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route("/", get(home))
        .route("/favicon.ico", get(favicon))
        .route("/{owner}/{repo}", get(repository))
        .route("/{owner}/{repo}/issues/{number}", get(issue))
        .route("/{owner}/{repo}/pull/{number}", get(pull))
        .route("/orgs/{owner}/projects/{number}", get(board))
        .route("/users/{owner}/projects/{number}", get(board))
}

/// The API's 404 for anything the view does not show.
fn missing() -> Response {
    super::rest::not_found_route_response()
}

async fn favicon() -> Response {
    (
        [
            (header::CONTENT_TYPE, "image/svg+xml"),
            (header::CACHE_CONTROL, "max-age=86400"),
        ],
        format!("<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 16 16\">{MARK}</svg>"),
    )
        .into_response()
}

fn is_repo(st: &SandboxState, owner: &str, repo: &str) -> bool {
    st.repo.owner.eq_ignore_ascii_case(owner) && st.repo.name.eq_ignore_ascii_case(repo)
}

/// `text` with `<`, `>`, `&` and double quotes escaped (fit for text and quoted attributes).
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::new();
    html::push_html(&mut out, std::iter::once(Event::Text(text.into())));
    out.replace('"', "&quot;")
}

/// `/{owner}/{repo}`, escaped.
fn slug(st: &SandboxState) -> String {
    escape(&format!("{}/{}", st.repo.owner, st.repo.name))
}

/// A whole page: GitHub's header with the repository's name and tabs, `main`, a footer.
fn page(st: &SandboxState, title: &str, main: &str, wide: bool) -> Response {
    let slug = slug(st);
    let board = st
        .board
        .as_ref()
        .map(|b| {
            format!(
                "<a href=\"{}\">Projects <span class=\"Counter\">1</span></a>",
                board_url(b)
            )
        })
        .unwrap_or_default();
    let doc = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>{title}</title><link rel=\"icon\" href=\"/favicon.ico\" type=\"image/svg+xml\"><style>{STYLE}</style></head>\n<body>\n\
<header class=\"gh-header\"><div class=\"gh-top\"><a class=\"mark\" href=\"/\" title=\"sandbox GitHub\"><svg width=\"32\" height=\"32\" viewBox=\"0 0 16 16\" aria-hidden=\"true\">{MARK}</svg></a>\
<a class=\"slug\" href=\"/{slug}\">{owner} / <strong>{name}</strong></a>\
<span class=\"sandbox\">sandbox GitHub · read-only</span></div>\n\
<nav class=\"repo-nav\"><a href=\"/{slug}#issues\">Issues <span class=\"Counter\">{issues}</span></a>\
<a href=\"/{slug}#pulls\">Pull requests <span class=\"Counter\">{pulls}</span></a>{board}</nav></header>\n\
<main class=\"container{wide}\">\n{main}\n</main>\n\
<footer class=\"gh-footer\">sandbox GitHub · read-only view · {slug}</footer>\n</body></html>\n",
        title = escape(title),
        owner = escape(&st.repo.owner),
        name = escape(&st.repo.name),
        issues = st
            .issues
            .iter()
            .filter(|i| i.state == SeedState::Open)
            .count(),
        pulls = st.pulls.iter().filter(|p| is_open(p)).count(),
        wide = if wide { " wide" } else { "" },
    );
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        doc,
    )
        .into_response()
}

fn is_open(p: &PullSeed) -> bool {
    p.state == SeedState::Open && !p.merged
}

/// The state an issue shows: its CSS class and its word.
fn issue_state(i: &IssueSeed) -> (&'static str, &'static str) {
    match (i.state, i.state_reason.as_deref()) {
        (SeedState::Open, _) => ("open", "Open"),
        (SeedState::Closed, Some("not_planned")) => ("not_planned", "Closed"),
        (SeedState::Closed, _) => ("completed", "Closed"),
    }
}

/// The state a pull request shows: its CSS class and its word.
fn pull_state(p: &PullSeed) -> (&'static str, &'static str) {
    match (p.state, p.merged, p.draft) {
        (_, true, _) => ("merged", "Merged"),
        (SeedState::Closed, _, _) => ("closed", "Closed"),
        (SeedState::Open, _, true) => ("draft", "Draft"),
        (SeedState::Open, _, false) => ("open", "Open"),
    }
}

/// An issue's (`pull: false`) or pull request's icon in state `class`.
fn icon(pull: bool, class: &str) -> String {
    let path = match (pull, class) {
        (false, "open") => {
            "<path d=\"M8 9.5a1.5 1.5 0 1 0 0-3 1.5 1.5 0 0 0 0 3Z\"/><path d=\"M8 0a8 8 0 1 1 0 16A8 8 0 0 1 8 0ZM1.5 8a6.5 6.5 0 1 0 13 0 6.5 6.5 0 0 0-13 0Z\"/>"
        }
        (false, _) => {
            "<path d=\"M8 0a8 8 0 1 1 0 16A8 8 0 0 1 8 0ZM1.5 8a6.5 6.5 0 1 0 13 0 6.5 6.5 0 0 0-13 0Z\"/><path d=\"M11.3 6.3 7.3 10.3 4.7 7.7l1-1 1.6 1.6 3-3Z\"/>"
        }
        (true, "merged") => {
            "<circle cx=\"4\" cy=\"3\" r=\"2\"/><circle cx=\"4\" cy=\"13\" r=\"2\"/><circle cx=\"12\" cy=\"9\" r=\"2\"/><path d=\"M3.3 4h1.4v8H3.3zM4.7 5.2C5.6 7.4 7.4 8.3 10 8.3v1.4C7.6 9.7 5.8 9 4.7 7.6z\"/>"
        }
        (true, _) => {
            "<circle cx=\"4\" cy=\"3\" r=\"2\"/><circle cx=\"4\" cy=\"13\" r=\"2\"/><circle cx=\"12\" cy=\"13\" r=\"2\"/><path d=\"M3.3 4h1.4v8H3.3zM11.3 11V6.5c0-.6-.4-1-1-1H8v1.8L5.6 5 8 2.7v1.4h2.3c1.4 0 2.4 1 2.4 2.4V11z\"/>"
        }
    };
    format!(
        "<svg class=\"icon-{class}\" width=\"16\" height=\"16\" viewBox=\"0 0 16 16\" aria-hidden=\"true\">{path}</svg>"
    )
}

/// GitHub's state badge (its icon in the badge's colour).
fn badge(pull: bool, (class, word): (&str, &str)) -> String {
    format!(
        "<span class=\"State State--{class}\">{}{word}</span>",
        icon(pull, class)
    )
}

/// A time as GitHub shows it (absolute here: no script to make it relative).
fn time(t: Option<DateTime<Utc>>) -> String {
    match t {
        Some(t) => format!(
            "<time datetime=\"{}\">on {}</time>",
            t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            t.format("%b %-d, %Y, %H:%M:%S UTC")
        ),
        None => String::new(),
    }
}

fn avatar(login: &str, small: bool) -> String {
    format!(
        "<span class=\"avatar{} av{}\" aria-hidden=\"true\">{}</span>",
        if small { " small" } else { "" },
        super::ids::fnv(&login.to_ascii_lowercase()) % 8,
        escape(&login.chars().next().unwrap_or('?').to_string())
    )
}

/// A login in bold, with GitHub's `bot` label for an App's.
fn who(login: &str) -> String {
    let bot = if login.ends_with("[bot]") {
        " <span class=\"Label\">bot</span>"
    } else {
        ""
    };
    format!("<strong class=\"author\">{}</strong>{bot}", escape(login))
}

/// A comment's box: a header (`author action time`) over its rendered body.
fn comment_box(
    id: &str,
    author: &str,
    action: &str,
    at: Option<DateTime<Utc>>,
    body: &str,
) -> String {
    let body = if body.trim().is_empty() {
        "<div class=\"comment-body empty\">No description provided.</div>".to_string()
    } else {
        format!(
            "<div class=\"comment-body markdown-body\">{}</div>",
            markdown(body)
        )
    };
    format!(
        "<article class=\"comment\" id=\"{id}\"><header class=\"comment-header\">{} {action} <a href=\"#{id}\">{}</a></header>{body}</article>",
        who(author),
        time(at),
    )
}

/// A timeline entry with its author's avatar.
fn with_avatar(author: &str, inner: &str) -> String {
    format!(
        "<div class=\"TimelineItem\">{}{inner}</div>\n",
        avatar(author, false)
    )
}

/// What an issue's or pull request's conversation holds, each at the time it happened.
enum Entry<'a> {
    Comment(&'a CommentSeed),
    Rename(&'a RenameSeed),
    Review(&'a ReviewSeed, Vec<&'a ReviewCommentSeed>),
    /// A line-comment thread of no shown review.
    Thread(&'a ReviewCommentSeed),
}

impl Entry<'_> {
    fn at(&self) -> Option<DateTime<Utc>> {
        match self {
            Entry::Comment(c) => c.created_at,
            Entry::Rename(r) => r.created_at,
            Entry::Review(r, _) => r.submitted_at,
            Entry::Thread(c) => c.created_at,
        }
    }
}

/// The opening post, then the entries in the order they happened (those of the same time in the
/// order given).
fn timeline(
    opened: &str,
    mut entries: Vec<Entry<'_>>,
    p: Option<&PullSeed>,
    git: Option<&PullGit>,
) -> String {
    entries.sort_by_key(Entry::at);
    let mut out = format!("<div class=\"timeline\">\n{opened}");
    for e in &entries {
        match e {
            Entry::Comment(c) => {
                let id = format!("issuecomment-{}", c.id);
                out.push_str(&with_avatar(
                    &c.author,
                    &comment_box(&id, &c.author, "commented", c.created_at, &c.body),
                ));
            }
            Entry::Rename(r) => {
                let _ = writeln!(
                    out,
                    "<div class=\"event\"><span class=\"badge\">✎</span>{} changed the title <del>{}</del> <ins>{}</ins> {}</div>",
                    who(&r.actor),
                    escape(&r.from),
                    escape(&r.to),
                    time(r.created_at)
                );
            }
            Entry::Review(r, roots) => {
                if let Some(p) = p {
                    out.push_str(&review(p, r, roots, git));
                }
            }
            Entry::Thread(root) => {
                if let Some(p) = p {
                    let inner = format!("<div class=\"review\">{}</div>", thread(p, root, git));
                    out.push_str(&with_avatar(&root.author, &inner));
                }
            }
        }
    }
    out.push_str("</div>\n");
    out
}

fn review(
    p: &PullSeed,
    r: &ReviewSeed,
    roots: &[&ReviewCommentSeed],
    git: Option<&PullGit>,
) -> String {
    let (class, mark, verdict) = match r.state.as_str() {
        "APPROVED" => ("badge--approved", "✓", "approved these changes"),
        "CHANGES_REQUESTED" => ("badge--changes", "±", "requested changes"),
        "DISMISSED" => ("", "👁", "reviewed (dismissed)"),
        _ => ("", "👁", "reviewed"),
    };
    let id = format!("pullrequestreview-{}", r.id);
    let mut out = format!(
        "<div class=\"event\" id=\"{id}\"><span class=\"badge {class}\">{mark}</span>{} {verdict} <a href=\"#{id}\">{}</a></div>\n",
        who(&r.author),
        time(r.submitted_at)
    );
    let has_body = !r.body.trim().is_empty();
    if has_body || !roots.is_empty() {
        out.push_str("<div class=\"TimelineItem\">");
        out.push_str(&avatar(&r.author, false));
        out.push_str("<div class=\"review\">");
        if has_body {
            out.push_str(&comment_box(
                &format!("{id}-body"),
                &r.author,
                "left a comment",
                r.submitted_at,
                &r.body,
            ));
        }
        for root in roots {
            out.push_str(&thread(p, root, git));
        }
        out.push_str("</div></div>\n");
    }
    out
}

/// A line-comment thread: its file and line, the diff above the line, its comments.
fn thread(p: &PullSeed, root: &ReviewCommentSeed, git: Option<&PullGit>) -> String {
    let line = root
        .line
        .map(|l| format!(" <span>line {l}</span>"))
        .unwrap_or_default();
    let resolved = root
        .resolved_by
        .as_deref()
        .map(|who| format!(" <span class=\"Label\">Resolved by {}</span>", escape(who)))
        .unwrap_or_default();
    let file = git
        .and_then(|g| g.files.as_ref())
        .and_then(|files| files.iter().position(|f| f.path == root.path))
        .map(|i| format!(" <a href=\"#diff-{i}\">view file</a>"))
        .unwrap_or_default();
    let mut out = format!(
        "<div class=\"thread\" id=\"discussion_r{}\"><div class=\"thread-header\"><code>{}</code>{line}{resolved}{file}</div>",
        root.id,
        escape(&root.path),
    );
    out.push_str(&hunk_table(&thread_hunk(&root.diff_hunk)));
    for c in p.thread(root.id) {
        let id = format!("r{}", c.id);
        out.push_str(&comment_box(
            &id,
            &c.author,
            "commented",
            c.created_at,
            &c.body,
        ));
    }
    out.push_str("</div>\n");
    out
}

/// The rows of a line comment's hunk GitHub shows: its header and the four lines up to the line.
fn thread_hunk(hunk: &str) -> Vec<Row<'_>> {
    let mut lines = hunk.lines();
    let Some(header) = lines.next() else {
        return Vec::new();
    };
    // `@@ -old,n +new,m @@`: where the hunk's lines start.
    let start = |sign: char| -> u32 {
        header
            .split_whitespace()
            .find_map(|w| w.strip_prefix(sign))
            .and_then(|w| w.split(',').next()?.parse().ok())
            .unwrap_or(1)
    };
    let (mut old, mut new) = (start('-'), start('+'));
    let mut rows = Vec::new();
    for l in lines {
        let mut chars = l.chars();
        let origin = chars.next().unwrap_or(' ');
        let (o, n) = match origin {
            '+' => (None, Some(new)),
            '-' => (Some(old), None),
            _ => (Some(old), Some(new)),
        };
        old += u32::from(o.is_some());
        new += u32::from(n.is_some());
        rows.push(Row::Line(origin, o, n, chars.as_str()));
    }
    let keep = rows.len().saturating_sub(4);
    let mut shown = vec![Row::Header(header)];
    shown.extend(rows.into_iter().skip(keep));
    shown
}

/// A row of a diff table.
enum Row<'a> {
    Header(&'a str),
    /// Origin (`+`, `-`, ` `), old and new line numbers, the line's text.
    Line(char, Option<u32>, Option<u32>, &'a str),
}

fn hunk_table(rows: &[Row<'_>]) -> String {
    let num = |n: Option<u32>| n.map(|n| n.to_string()).unwrap_or_default();
    let mut out = String::from("<table class=\"diff\"><tbody>");
    for row in rows {
        match row {
            Row::Header(h) => {
                let _ = write!(
                    out,
                    "<tr class=\"hunk\"><td class=\"num\"></td><td class=\"num\"></td><td class=\"code\">{}</td></tr>",
                    escape(h)
                );
            }
            Row::Line(origin, old, new, text) => {
                let class = match origin {
                    '+' => "add",
                    '-' => "del",
                    _ => "ctx",
                };
                let _ = write!(
                    out,
                    "<tr class=\"{class}\"><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"code\">{}</td></tr>",
                    num(*old),
                    num(*new),
                    escape(&format!("{origin}{text}"))
                );
            }
        }
    }
    out.push_str("</tbody></table>");
    out
}

/// A board's URL.
fn board_url(b: &BoardSeed) -> String {
    let kind = match b.owner_type {
        super::state::OwnerType::User => "users",
        super::state::OwnerType::Organization => "orgs",
    };
    format!("/{kind}/{}/projects/{}", escape(&b.owner), b.number)
}

async fn home(State(s): S) -> Response {
    let st = s.state();
    repository_page(&st)
}

async fn repository(State(s): S, Path((owner, repo)): Path<(String, String)>) -> Response {
    let st = s.state();
    if !is_repo(&st, &owner, &repo) {
        return missing();
    }
    repository_page(&st)
}

fn labels(list: &[String]) -> String {
    list.iter()
        .map(|l| format!(" <span class=\"Label Label--accent\">{}</span>", escape(l)))
        .collect()
}

fn repository_page(st: &SandboxState) -> Response {
    let slug = slug(st);
    let mut body =
        String::from("<h2 class=\"section\" id=\"issues\">Issues</h2>\n<div class=\"Box\">\n");
    for i in &st.issues {
        let column = st
            .column_of(i.number)
            .map(|c| format!(" · {}", escape(c)))
            .unwrap_or_default();
        let _ = writeln!(
            body,
            "<div class=\"Box-row\">{}<div class=\"what\"><a class=\"row-title\" href=\"/{slug}/issues/{n}\">{}</a>{}\
<div class=\"row-meta\">#{n} opened {} by {} · {} comment{}{column}</div></div></div>",
            icon(false, issue_state(i).0),
            escape(&i.title),
            labels(&i.labels),
            time(i.created_at),
            escape(&i.author),
            i.comments.len(),
            if i.comments.len() == 1 { "" } else { "s" },
            n = i.number,
        );
    }
    if st.issues.is_empty() {
        body.push_str("<div class=\"Box-empty\">No issues.</div>\n");
    }
    body.push_str(
        "</div>\n<h2 class=\"section\" id=\"pulls\">Pull requests</h2>\n<div class=\"Box\">\n",
    );
    for p in &st.pulls {
        let _ = writeln!(
            body,
            "<div class=\"Box-row\">{}<div class=\"what\"><a class=\"row-title\" href=\"/{slug}/pull/{n}\">{}</a>\
<div class=\"row-meta\">#{n} opened {} by {} · <span class=\"branch\">{}</span> → <span class=\"branch\">{}</span></div></div></div>",
            icon(true, pull_state(p).0),
            escape(&p.title),
            time(p.created_at),
            escape(&p.author),
            escape(&p.head),
            escape(&p.base),
            n = p.number,
        );
    }
    if st.pulls.is_empty() {
        body.push_str("<div class=\"Box-empty\">No pull requests.</div>\n");
    }
    body.push_str("</div>\n");
    if let Some(b) = &st.board {
        body.push_str(&board_html(st, b));
    }
    page(
        st,
        &format!("{}/{}", st.repo.owner, st.repo.name),
        &body,
        false,
    )
}

/// Issue or pull request `n` as a card.
fn card(st: &SandboxState, n: u64) -> String {
    let slug = slug(st);
    let (kind, title, icon) = match (st.issue(n), st.pull(n)) {
        (Some(i), _) => ("issues", i.title.as_str(), icon(false, issue_state(i).0)),
        (None, Some(p)) => ("pull", p.title.as_str(), icon(true, pull_state(p).0)),
        (None, None) => ("issues", "", String::new()),
    };
    format!(
        "<div class=\"card\"><div class=\"card-repo\">{icon}{} #{n}</div><a href=\"/{slug}/{kind}/{n}\">{}</a></div>",
        escape(&st.repo.name),
        escape(title)
    )
}

fn board_html(st: &SandboxState, b: &BoardSeed) -> String {
    let mut out = format!(
        "<section class=\"project\"><div class=\"project-header\"><h2><a href=\"{}\">{}</a></h2><span class=\"Counter\">{} item{}</span></div>\n<div class=\"board\">\n",
        board_url(b),
        escape(&b.title),
        b.items.len(),
        if b.items.len() == 1 { "" } else { "s" }
    );
    let mut column = |name: &str, wanted: Option<&str>| {
        let numbers: Vec<u64> = b
            .items
            .iter()
            .filter(|(_, c)| c.as_deref() == wanted)
            .map(|(n, _)| *n)
            .collect();
        let cards: String = numbers.iter().map(|n| card(st, *n)).collect();
        let _ = writeln!(
            out,
            "<section class=\"column\"><header class=\"column-header\"><h3>{}</h3><span class=\"Counter\">{}</span></header>{cards}</section>",
            escape(name),
            numbers.len()
        );
    };
    for option in &b.options {
        column(option, Some(option));
    }
    if b.items.values().any(Option::is_none) {
        column("No status", None);
    }
    out.push_str("</div></section>\n");
    out
}

async fn board(State(s): S, Path((owner, number)): Path<(String, u64)>) -> Response {
    let st = s.state();
    match &st.board {
        Some(b) if b.owner.eq_ignore_ascii_case(&owner) && b.number == number => {
            page(&st, &b.title, &board_html(&st, b), true)
        }
        _ => missing(),
    }
}

async fn issue(State(s): S, Path((owner, repo, number)): Path<(String, String, u64)>) -> Response {
    let is_pull = {
        let st = s.state();
        if !is_repo(&st, &owner, &repo) {
            return missing();
        }
        match (st.issue(number), st.pull(number)) {
            (Some(i), _) => return issue_page(&st, i),
            (None, Some(_)) => true,
            (None, None) => false,
        }
    };
    if is_pull {
        pull_response(&s, number)
    } else {
        missing()
    }
}

/// Where issue or pull request `n` stands on the board, for a sidebar.
fn project_item(st: &SandboxState, n: u64) -> String {
    let Some(b) = st.board.as_ref().filter(|b| b.items.contains_key(&n)) else {
        return String::new();
    };
    let status = st
        .column_of(n)
        .map(|c| format!("<strong>{}</strong>", escape(c)))
        .unwrap_or_else(|| "No status".into());
    format!(
        "<div class=\"sidebar-item\"><h3>Projects</h3><p><a href=\"{}\">{}</a></p><p>Status: {status}</p></div>",
        board_url(b),
        escape(&b.title)
    )
}

fn issue_page(st: &SandboxState, i: &IssueSeed) -> Response {
    let title = format!("{} · Issue #{}", i.title, i.number);
    page(st, &title, &issue_html(st, i), false)
}

/// An issue's page without GitHub's header: its title, state, timeline and sidebar.
fn issue_html(st: &SandboxState, i: &IssueSeed) -> String {
    let slug = slug(st);
    let mut entries: Vec<Entry<'_>> = i.comments.iter().map(Entry::Comment).collect();
    entries.extend(i.renames.iter().map(Entry::Rename));
    let opened = with_avatar(
        &i.author,
        &comment_box(
            "issue-body",
            &i.author,
            "opened this issue",
            i.created_at,
            &i.body,
        ),
    );
    let mut sidebar = String::new();
    if !i.labels.is_empty() {
        let _ = write!(
            sidebar,
            "<div class=\"sidebar-item\"><h3>Labels</h3>{}</div>",
            labels(&i.labels)
        );
    }
    sidebar.push_str(&project_item(st, i.number));
    let parent: Vec<u64> = st.parent_of(i.number).into_iter().collect();
    for (heading, numbers) in [
        ("Parent issue", &parent),
        ("Sub-issues", &i.sub_issues),
        ("Blocked by", &i.blocked_by),
    ] {
        if numbers.is_empty() {
            continue;
        }
        let links: String = numbers
            .iter()
            .map(|n| {
                let (title, closed) = st.issue(*n).map_or(("", false), |x| {
                    (x.title.as_str(), x.state == SeedState::Closed)
                });
                let state = if closed { " (closed)" } else { "" };
                format!(
                    "<p><a href=\"/{slug}/issues/{n}\">#{n}</a> {}{state}</p>",
                    escape(title)
                )
            })
            .collect();
        let _ = write!(
            sidebar,
            "<div class=\"sidebar-item\"><h3>{heading}</h3>{links}</div>"
        );
    }
    format!(
        "<h1 class=\"title\"><bdi>{}</bdi> <span class=\"number\">#{}</span></h1>\n\
<div class=\"meta\">{} {} opened this issue {} · {} comment{}</div>\n\
<div class=\"layout\">{}<aside>{sidebar}</aside></div>",
        escape(&i.title),
        i.number,
        badge(false, issue_state(i)),
        who(&i.author),
        time(i.created_at),
        i.comments.len(),
        if i.comments.len() == 1 { "" } else { "s" },
        timeline(&opened, entries, None, None),
    )
}

async fn pull(State(s): S, Path((owner, repo, number)): Path<(String, String, u64)>) -> Response {
    if !is_repo(&s.state(), &owner, &repo) {
        return missing();
    }
    pull_response(&s, number)
}

/// What the sandbox's git repository says of a pull request (`None`: a branch is not there).
struct PullGit {
    commits: Option<Vec<CommitInfo>>,
    files: Option<Vec<FileDiff>>,
}

fn pull_response(s: &Shared, number: u64) -> Response {
    // Git is read without holding the state.
    let Some((base, head)) = s
        .state()
        .pull(number)
        .map(|p| (p.base.clone(), p.head.clone()))
    else {
        return missing();
    };
    let git = PullGit {
        commits: s.git.pull_commits(&base, &head),
        files: s.git.pull_files(&base, &head),
    };
    let st = s.state();
    match st.pull(number) {
        Some(p) => pull_page(&st, p, &git),
        None => missing(),
    }
}

fn pull_page(st: &SandboxState, p: &PullSeed, git: &PullGit) -> Response {
    let title = format!("{} · Pull Request #{}", p.title, p.number);
    page(st, &title, &pull_html(st, p, git), false)
}

/// A pull request's page without GitHub's header: its title, state, conversation, commits and
/// changes.
fn pull_html(st: &SandboxState, p: &PullSeed, git: &PullGit) -> String {
    let shown = |r: &ReviewSeed| is_shown(p, r);
    let mut entries: Vec<Entry<'_>> = p.comments.iter().map(Entry::Comment).collect();
    for r in p.reviews.iter().filter(|r| shown(r)) {
        let roots = p
            .review_comments
            .iter()
            .filter(|c| c.in_reply_to.is_none() && c.review_id == Some(r.id))
            .collect();
        entries.push(Entry::Review(r, roots));
    }
    for root in p.review_comments.iter().filter(|c| c.in_reply_to.is_none()) {
        let in_review = root
            .review_id
            .is_some_and(|id| p.reviews.iter().any(|r| r.id == id && shown(r)));
        if !in_review {
            entries.push(Entry::Thread(root));
        }
    }
    let conversation = entries.len();
    let opened = with_avatar(
        &p.author,
        &comment_box(
            "pr-body",
            &p.author,
            "opened this pull request",
            p.created_at,
            &p.body,
        ),
    );
    let commits = git.commits.as_deref();
    let files = git.files.as_deref();
    let count = |n: Option<usize>| n.map(|n| n.to_string()).unwrap_or_else(|| "?".into());
    let n_commits =
        commits.map(|c| format!("{} commit{}", c.len(), if c.len() == 1 { "" } else { "s" }));
    let verb = if p.merged { "merged" } else { "wants to merge" };
    let mut sidebar = reviewers(p);
    sidebar.push_str(&project_item(st, p.number));
    format!(
        "<h1 class=\"title\"><bdi>{}</bdi> <span class=\"number\">#{}</span></h1>\n\
<div class=\"meta\">{} {} {verb} {} into <span class=\"branch\">{}</span> from <span class=\"branch\">{}</span></div>\n\
<nav class=\"tabnav\"><a href=\"#conversation\">Conversation <span class=\"Counter\">{conversation}</span></a>\
<a href=\"#commits\">Commits <span class=\"Counter\">{}</span></a>\
<a href=\"#files\">Files changed <span class=\"Counter\">{}</span></a></nav>\n\
<div class=\"layout\" id=\"conversation\">{}<aside>{sidebar}</aside></div>\n\
<h2 class=\"section\" id=\"commits\">Commits</h2>\n{}\n<h2 class=\"section\" id=\"files\">Files changed</h2>\n{}",
        escape(&p.title),
        p.number,
        badge(true, pull_state(p)),
        who(&p.author),
        n_commits.unwrap_or_else(|| "commits".into()),
        escape(&p.base),
        escape(&p.head),
        count(commits.map(<[_]>::len)),
        count(files.map(<[_]>::len)),
        timeline(&opened, entries, Some(p), Some(git)),
        commits_html(p, commits),
        files_html(p, files),
    )
}

/// Whether review `r` shows in the conversation: not while pending, nor when it holds only
/// replies to threads that show elsewhere (GitHub's review of one reply).
fn is_shown(p: &PullSeed, r: &ReviewSeed) -> bool {
    let starts_thread = p
        .review_comments
        .iter()
        .any(|c| c.in_reply_to.is_none() && c.review_id == Some(r.id));
    r.state != "PENDING" && (starts_thread || !r.body.trim().is_empty() || r.state != "COMMENTED")
}

/// Each reviewer's latest verdict (the author's own replies are none), for the sidebar.
fn reviewers(p: &PullSeed) -> String {
    let mut latest: Vec<(&str, &str)> = Vec::new();
    for r in p
        .reviews
        .iter()
        .filter(|r| is_shown(p, r) && r.author != p.author)
    {
        let verdict = match r.state.as_str() {
            "APPROVED" => "approved",
            "CHANGES_REQUESTED" => "requested changes",
            _ => "commented",
        };
        match latest.iter_mut().find(|(who, _)| *who == r.author) {
            // A comment does not replace an approval or a change request.
            Some(slot) if verdict != "commented" || slot.1 == "commented" => slot.1 = verdict,
            Some(_) => {}
            None => latest.push((&r.author, verdict)),
        }
    }
    if latest.is_empty() {
        return "<div class=\"sidebar-item\"><h3>Reviewers</h3><p>No reviews</p></div>".into();
    }
    let rows: String = latest
        .iter()
        .map(|(who, verdict)| format!("<p>{} {} · {verdict}</p>", avatar(who, true), escape(who)))
        .collect();
    format!("<div class=\"sidebar-item\"><h3>Reviewers</h3>{rows}</div>")
}

/// A branch of the pull request that the repository lacks, for the commits and files sections.
fn absent(p: &PullSeed) -> String {
    format!(
        "<div class=\"Box\"><div class=\"Box-empty\">The sandbox's git repository has no branch <code>{}</code> or <code>{}</code> to compare: push them to show this pull request's commits and changes.</div></div>",
        escape(&p.base),
        escape(&p.head)
    )
}

fn commits_html(p: &PullSeed, commits: Option<&[CommitInfo]>) -> String {
    let Some(commits) = commits else {
        return absent(p);
    };
    if commits.is_empty() {
        return "<div class=\"Box\"><div class=\"Box-empty\">No commits beyond the base branch.</div></div>".into();
    }
    let mut out = String::from("<div class=\"commits\">\n");
    for c in commits {
        let (title, rest) = c
            .message
            .trim()
            .split_once('\n')
            .unwrap_or((c.message.trim(), ""));
        let desc = if rest.trim().is_empty() {
            String::new()
        } else {
            format!("<pre class=\"commit-desc\">{}</pre>", escape(rest.trim()))
        };
        let _ = writeln!(
            out,
            "<div class=\"commit\">{}<div class=\"what\"><div class=\"commit-title\">{}</div>{desc}<div class=\"commit-meta\"><strong>{}</strong> committed {}</div></div><code class=\"sha\" title=\"{}\">{}</code></div>",
            avatar(&c.author, true),
            escape(title),
            escape(&c.author),
            time(DateTime::from_timestamp(c.time, 0)),
            escape(&c.sha),
            escape(c.sha.get(..7).unwrap_or(&c.sha)),
        );
    }
    out.push_str("</div>");
    out
}

fn files_html(p: &PullSeed, files: Option<&[FileDiff]>) -> String {
    let Some(files) = files else {
        return absent(p);
    };
    let (add, del) = files
        .iter()
        .fold((0, 0), |(a, d), f| (a + f.additions, d + f.deletions));
    let mut out = format!(
        "<p class=\"diffstat\">{} file{} changed · <span class=\"add\">+{add}</span> <span class=\"del\">−{del}</span></p>\n",
        files.len(),
        if files.len() == 1 { "" } else { "s" }
    );
    for (i, f) in files.iter().enumerate() {
        let renamed = f
            .old_path
            .as_deref()
            .map(|old| {
                format!(
                    " <span class=\"diffstat\">{} from <code>{}</code></span>",
                    f.status,
                    escape(old)
                )
            })
            .unwrap_or_default();
        let _ = write!(
            out,
            "<div class=\"file\" id=\"diff-{i}\"><div class=\"file-header\"><span class=\"diffstat\"><span class=\"add\">+{}</span> <span class=\"del\">−{}</span></span> <code>{}</code>{renamed}</div>",
            f.additions,
            f.deletions,
            escape(&f.path),
        );
        if f.binary {
            out.push_str("<div class=\"file-note\">Binary file not shown.</div>");
        } else {
            let rows: Vec<Row<'_>> = f
                .hunks
                .iter()
                .flat_map(|h| {
                    std::iter::once(Row::Header(h.header.as_str()))
                        .chain(h.lines.iter().map(line_row))
                })
                .collect();
            if !rows.is_empty() {
                out.push_str(&hunk_table(&rows));
            }
            if f.truncated {
                out.push_str("<div class=\"file-note\">Large diff: the rest of this file's lines are not shown.</div>");
            }
        }
        out.push_str("</div>\n");
    }
    out
}

/// A diff line as a row.
fn line_row(l: &DiffLine) -> Row<'_> {
    Row::Line(l.origin, l.old, l.new, &l.text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::GitRemote;

    fn at(seconds: i64) -> Option<DateTime<Utc>> {
        DateTime::from_timestamp(1_760_000_000 + seconds, 0)
    }

    fn comment(id: u64, author: &str, body: &str, seconds: i64) -> CommentSeed {
        CommentSeed {
            id,
            created_at: at(seconds),
            ..CommentSeed::new(author, body)
        }
    }

    fn review(id: u64, author: &str, state: &str, body: &str, seconds: i64) -> ReviewSeed {
        ReviewSeed {
            id,
            author: author.into(),
            state: state.into(),
            body: body.into(),
            editor: None,
            commit_id: None,
            submitted_at: at(seconds),
        }
    }

    fn line_comment(
        id: u64,
        review: u64,
        reply_to: Option<u64>,
        body: &str,
        seconds: i64,
    ) -> ReviewCommentSeed {
        ReviewCommentSeed {
            id,
            review_id: Some(review),
            author: if reply_to.is_some() { "bot" } else { "alice" }.into(),
            body: body.into(),
            path: "src/a.ts".into(),
            line: Some(2),
            diff_hunk: "@@ -1,2 +1,3 @@\n one\n-two\n+TWO\n+three".into(),
            in_reply_to: reply_to,
            editor: None,
            commit_id: None,
            created_at: at(seconds),
            resolved_by: None,
        }
    }

    /// Where each of `marks` is in `html`, in their order; a missing one fails.
    fn positions(html: &str, marks: &[&str]) -> Vec<usize> {
        marks
            .iter()
            .map(|m| html.find(m).unwrap_or_else(|| panic!("no {m} in {html}")))
            .collect()
    }

    #[test]
    fn a_pull_requests_conversation_is_in_time_order_whatever_each_entry_is() {
        let st = SandboxState::new("acme", "widgets");
        let mut p = PullSeed::new(2, "topic", "main", "Add hours", "The change.", "bot");
        p.created_at = at(0);
        // Stored as the API stores them: conversation comments apart from reviews and threads.
        p.comments = vec![
            comment(1, "carol", "An early question.", 5),
            comment(2, "bot", "## Revision 1\n\nPushed.", 30),
        ];
        p.reviews = vec![
            review(10, "alice", "CHANGES_REQUESTED", "One more unit.", 10),
            // The bot's reply in the thread is a review of its own, shown in the thread only.
            review(12, "bot", "COMMENTED", "", 31),
            review(14, "alice", "APPROVED", "", 40),
        ];
        p.review_comments = vec![
            line_comment(11, 10, None, "Weeks too, please.", 10),
            line_comment(13, 12, Some(11), "Done in abc1234.", 31),
        ];
        p.review_comments[0].resolved_by = Some("bot".into());
        let git = PullGit {
            commits: None,
            files: None,
        };
        let html = pull_html(&st, &p, &git);
        let order = positions(
            &html,
            &[
                "The change.",
                "An early question.",
                "requested changes",
                "One more unit.",
                "Weeks too, please.",
                "Done in abc1234.",
                "<h2>Revision 1</h2>",
                "approved these changes",
            ],
        );
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}: {html}");
        assert_eq!(html.matches("> reviewed <").count(), 0, "{html}");
        assert!(
            html.contains("<code>src/a.ts</code> <span>line 2</span> <span class=\"Label\">Resolved by bot</span>"),
            "{html}"
        );
        // The line's hunk: its header and the lines up to the line, numbered.
        assert!(
            html.contains(
                "<td class=\"num\"></td><td class=\"num\">3</td><td class=\"code\">+three</td>"
            ),
            "{html}"
        );
        // Reviewers: alice's latest verdict; the author's reply is none.
        assert!(html.contains("alice · approved"), "{html}");
        assert!(!html.contains("bot · commented"), "{html}");
        // Without its branches in the repository, the page says so where the commits would be.
        assert_eq!(
            html.matches("has no branch <code>main</code> or <code>topic</code>")
                .count(),
            2,
            "{html}"
        );
    }

    #[test]
    fn a_pull_request_lists_its_commits_and_changed_lines() {
        let dir = tempfile::tempdir().unwrap();
        let remote = GitRemote::create(&dir.path().join("r.git"), "main").unwrap();
        remote
            .commit_files("main", None, &[("a.txt", "one\ntwo\n")], "base")
            .unwrap();
        let sha = remote
            .commit_files(
                "topic",
                Some("main"),
                &[("a.txt", "one\n<b>TWO</b>\n")],
                "Shout two\n\nLouder.",
            )
            .unwrap();
        let st = SandboxState::new("acme", "widgets");
        let p = PullSeed::new(2, "topic", "main", "Shout", "", "bot");
        let git = PullGit {
            commits: remote.pull_commits("main", "topic"),
            files: remote.pull_files("main", "topic"),
        };
        let html = pull_html(&st, &p, &git);
        assert!(html.contains("wants to merge 1 commit into"), "{html}");
        assert!(html.contains("<div class=\"commit-title\">Shout two</div><pre class=\"commit-desc\">Louder.</pre>"), "{html}");
        assert!(html.contains(&format!(">{}</code>", &sha[..7])), "{html}");
        assert!(
            html.contains("<strong>sandbox</strong> committed"),
            "{html}"
        );
        assert!(
            html.contains(
                "1 file changed · <span class=\"add\">+1</span> <span class=\"del\">−1</span>"
            ),
            "{html}"
        );
        assert!(html.contains("<tr class=\"del\"><td class=\"num\">2</td><td class=\"num\"></td><td class=\"code\">-two</td></tr>"), "{html}");
        assert!(
            html.contains("<td class=\"code\">+&lt;b&gt;TWO&lt;/b&gt;</td>"),
            "{html}"
        );
        assert!(html.contains("No description provided."), "{html}");
    }

    #[test]
    fn an_issues_timeline_holds_its_comments_and_renames_in_time_order() {
        let mut st = SandboxState::new("acme", "widgets");
        let mut i = IssueSeed::new(1, "Hours", "Please.", "alice");
        i.created_at = at(0);
        i.comments = vec![comment(1, "bob", "Later comment.", 20)];
        i.renames = vec![RenameSeed {
            actor: "alice".into(),
            from: "hours".into(),
            to: "Hours".into(),
            created_at: at(10),
        }];
        st.issues.push(i.clone());
        let html = issue_html(&st, &i);
        let order = positions(&html, &["Please.", "changed the title", "Later comment."]);
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{html}");
        assert!(
            html.contains("<span class=\"State State--open\">"),
            "{html}"
        );
    }

    #[test]
    fn an_epic_shows_its_sub_issues_and_each_sub_issue_its_parent_and_blockers() {
        let mut st = SandboxState::new("acme", "widgets");
        let mut epic = IssueSeed::new(1, "Durations", "All of it.", "alice");
        epic.sub_issues = vec![2, 3];
        let units = IssueSeed::new(2, "Units <d, w, y>", "- [ ] d", "bot");
        let mut docs = IssueSeed::new(3, "Docs", "- [ ] README", "bot");
        docs.blocked_by = vec![2];
        docs.state = SeedState::Closed;
        st.issues = vec![epic.clone(), units, docs.clone()];
        let html = issue_html(&st, &epic);
        positions(
            &html,
            &[
                "<h3>Sub-issues</h3>",
                "<a href=\"/acme/widgets/issues/2\">#2</a> Units &lt;d, w, y&gt;",
                "<a href=\"/acme/widgets/issues/3\">#3</a> Docs (closed)",
            ],
        );
        assert!(!html.contains("Parent issue"), "{html}");
        let html = issue_html(&st, &docs);
        let order = positions(
            &html,
            &[
                "<h3>Parent issue</h3>",
                "#1</a> Durations",
                "<h3>Blocked by</h3>",
                "#2</a> Units",
            ],
        );
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{html}");
    }

    #[test]
    fn escape_escapes_markup() {
        assert_eq!(
            escape("<a href=\"x\">&</a>"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&lt;/a&gt;"
        );
    }
}
