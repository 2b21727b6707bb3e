//! The read-only web view: the pages a person opens from the URLs in the sandbox's answers — the
//! repository (`/`, `/{owner}/{repo}`), an issue with its comments, a pull request with its body,
//! reviews and line comments, and the board's columns (`/orgs/{owner}/projects/{n}`). Markdown is
//! rendered with raw HTML shown as text and only web and mail links kept: comments are untrusted.
//! These routes sit outside the API's gate (no token, not counted, not checked against GitHub's
//! API description); anything they do not know is the API's 404.

use std::fmt::Write as _;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use pulldown_cmark::{CowStr, Event, Options, Parser, Tag, html};

use super::Shared;
use super::state::{BoardSeed, CommentSeed, IssueSeed, PullSeed, SandboxState, SeedState};

type S = State<Arc<Shared>>;

pub(crate) fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route("/", get(home))
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

fn is_repo(st: &SandboxState, owner: &str, repo: &str) -> bool {
    st.repo.owner.eq_ignore_ascii_case(owner) && st.repo.name.eq_ignore_ascii_case(repo)
}

/// `text` with `<`, `>`, `&` and double quotes escaped (fit for text and quoted attributes).
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::new();
    html::push_html(&mut out, std::iter::once(Event::Text(text.into())));
    out.replace('"', "&quot;")
}

/// Markdown as HTML: GitHub's tables, task lists and strikethrough; raw HTML is shown as text,
/// and a link or image whose target is not http(s), mail or relative goes nowhere.
pub(crate) fn markdown(text: &str) -> String {
    let options =
        Options::ENABLE_TABLES | Options::ENABLE_TASKLISTS | Options::ENABLE_STRIKETHROUGH;
    let events = Parser::new_ext(text, options).filter_map(|event| {
        Some(match event {
            // An HTML comment (supervisor's hidden markers) is hidden, as GitHub hides it.
            Event::Html(raw) | Event::InlineHtml(raw) if is_comment(&raw) => return None,
            Event::Html(raw) | Event::InlineHtml(raw) => Event::Text(raw),
            Event::Start(Tag::Link {
                link_type,
                dest_url,
                title,
                id,
            }) => Event::Start(Tag::Link {
                link_type,
                dest_url: safe_url(dest_url),
                title,
                id,
            }),
            Event::Start(Tag::Image {
                link_type,
                dest_url,
                title,
                id,
            }) => Event::Start(Tag::Image {
                link_type,
                dest_url: safe_url(dest_url),
                title,
                id,
            }),
            other => other,
        })
    });
    let mut out = String::new();
    html::push_html(&mut out, events);
    out
}

fn is_comment(raw: &str) -> bool {
    let raw = raw.trim();
    let inner = raw.strip_prefix("<!--").and_then(|r| r.strip_suffix("-->"));
    inner.is_some_and(|i| !i.contains("-->"))
}

fn safe_url(url: CowStr<'_>) -> CowStr<'_> {
    let lower = url.trim().to_ascii_lowercase();
    let scheme = lower.split_once(':').map(|(s, _)| s);
    match scheme {
        // No scheme (relative), or one of the web's: kept. A colon after a slash is a path.
        None | Some("http" | "https" | "mailto") => url,
        Some(s) if s.contains(['/', '?', '#']) => url,
        Some(_) => CowStr::Borrowed("#"),
    }
}

fn page(title: &str, body: &str) -> Response {
    let doc = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>\
<style>body{{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#1f2328}}\
.comment{{border:1px solid #d1d9e0;border-radius:6px;margin:1rem 0}}.comment>header{{background:#f6f8fa;padding:.4rem .8rem;border-bottom:1px solid #d1d9e0}}\
.comment>div{{padding:0 .8rem}}table{{border-collapse:collapse}}td,th{{border:1px solid #d1d9e0;padding:.2rem .5rem}}\
pre{{background:#f6f8fa;padding:.6rem;overflow:auto}}.board{{display:flex;gap:1rem;overflow:auto}}\
.column{{background:#f6f8fa;border-radius:6px;padding:.5rem;min-width:11rem}}.state{{color:#59636e}}</style>\
</head><body>\n{body}\n<footer class=\"state\"><p>sandbox GitHub · read-only view</p></footer></body></html>\n",
        escape(title)
    );
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        doc,
    )
        .into_response()
}

fn repo_link(st: &SandboxState) -> String {
    format!(
        "<p><a href=\"/{o}/{r}\">{}</a></p>",
        escape(&format!("{}/{}", st.repo.owner, st.repo.name)),
        o = escape(&st.repo.owner),
        r = escape(&st.repo.name),
    )
}

fn state_word(state: SeedState, merged: bool) -> &'static str {
    match (state, merged) {
        (_, true) => "merged",
        (SeedState::Open, _) => "open",
        (SeedState::Closed, _) => "closed",
    }
}

fn comment(author: &str, note: &str, body: &str) -> String {
    format!(
        "<article class=\"comment\"><header><strong>{}</strong> {}</header><div>{}</div></article>\n",
        escape(author),
        escape(note),
        markdown(body)
    )
}

fn comments(list: &[CommentSeed]) -> String {
    list.iter()
        .map(|c| {
            let when = c
                .created_at
                .map(|t| format!("commented {}", t.format("%Y-%m-%d %H:%M UTC")))
                .unwrap_or_else(|| "commented".into());
            comment(&c.author, &when, &c.body)
        })
        .collect()
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

fn repository_page(st: &SandboxState) -> Response {
    let slug = format!("{}/{}", st.repo.owner, st.repo.name);
    let mut body = format!("<h1>{}</h1>\n<h2>Issues</h2>\n<ul>\n", escape(&slug));
    for i in &st.issues {
        let _ = writeln!(
            body,
            "<li><a href=\"/{slug}/issues/{n}\">#{n} {}</a> <span class=\"state\">{} · {} comment(s){}</span></li>",
            escape(&i.title),
            state_word(i.state, false),
            i.comments.len(),
            st.column_of(i.number)
                .map(|c| format!(" · {}", escape(c)))
                .unwrap_or_default(),
            slug = escape(&slug),
            n = i.number,
        );
    }
    body.push_str("</ul>\n<h2>Pull requests</h2>\n<ul>\n");
    for p in &st.pulls {
        let _ = writeln!(
            body,
            "<li><a href=\"/{slug}/pull/{n}\">#{n} {}</a> <span class=\"state\">{} · {} → {}</span></li>",
            escape(&p.title),
            state_word(p.state, p.merged),
            escape(&p.head),
            escape(&p.base),
            slug = escape(&slug),
            n = p.number,
        );
    }
    body.push_str("</ul>\n");
    if let Some(b) = &st.board {
        body.push_str(&board_html(st, b));
    }
    page(&slug, &body)
}

/// Title and link of issue or pull request `n`, for a card.
fn card(st: &SandboxState, n: u64) -> String {
    let slug = escape(&format!("{}/{}", st.repo.owner, st.repo.name));
    let (kind, title) = match (st.issue(n), st.pull(n)) {
        (Some(i), _) => ("issues", i.title.as_str()),
        (None, Some(p)) => ("pull", p.title.as_str()),
        (None, None) => ("issues", ""),
    };
    format!(
        "<li><a href=\"/{slug}/{kind}/{n}\">#{n}</a> {}</li>",
        escape(title)
    )
}

fn board_html(st: &SandboxState, b: &BoardSeed) -> String {
    let mut out = format!(
        "<h2>Board: <a href=\"/orgs/{}/projects/{}\">{}</a></h2>\n<div class=\"board\">\n",
        escape(&b.owner),
        b.number,
        escape(&b.title)
    );
    let mut column = |name: &str, wanted: Option<&str>| {
        let cards: String = b
            .items
            .iter()
            .filter(|(_, c)| c.as_deref() == wanted)
            .map(|(n, _)| card(st, *n))
            .collect();
        let _ = writeln!(
            out,
            "<section class=\"column\"><h3>{}</h3><ul>{cards}</ul></section>",
            escape(name)
        );
    };
    for option in &b.options {
        column(option, Some(option));
    }
    if b.items.values().any(Option::is_none) {
        column("No status", None);
    }
    out.push_str("</div>\n");
    out
}

async fn board(State(s): S, Path((owner, number)): Path<(String, u64)>) -> Response {
    let st = s.state();
    match &st.board {
        Some(b) if b.owner.eq_ignore_ascii_case(&owner) && b.number == number => {
            let body = format!("{}{}", repo_link(&st), board_html(&st, b));
            page(&b.title, &body)
        }
        _ => missing(),
    }
}

async fn issue(State(s): S, Path((owner, repo, number)): Path<(String, String, u64)>) -> Response {
    let st = s.state();
    if !is_repo(&st, &owner, &repo) {
        return missing();
    }
    match (st.issue(number), st.pull(number)) {
        (Some(i), _) => issue_page(&st, i),
        (None, Some(p)) => pull_page(&st, p),
        (None, None) => missing(),
    }
}

fn issue_page(st: &SandboxState, i: &IssueSeed) -> Response {
    let column = st
        .column_of(i.number)
        .map(|c| format!(" · card in <strong>{}</strong>", escape(c)))
        .unwrap_or_default();
    let body = format!(
        "{}<h1>{} <span class=\"state\">#{}</span></h1>\n<p class=\"state\">{}{column}</p>\n{}{}",
        repo_link(st),
        escape(&i.title),
        i.number,
        state_word(i.state, false),
        comment(&i.author, "opened this issue", &i.body),
        comments(&i.comments),
    );
    page(&format!("{} · Issue #{}", i.title, i.number), &body)
}

async fn pull(State(s): S, Path((owner, repo, number)): Path<(String, String, u64)>) -> Response {
    let st = s.state();
    if !is_repo(&st, &owner, &repo) {
        return missing();
    }
    match st.pull(number) {
        Some(p) => pull_page(&st, p),
        None => missing(),
    }
}

fn pull_page(st: &SandboxState, p: &PullSeed) -> Response {
    let mut body = format!(
        "{}<h1>{} <span class=\"state\">#{}</span></h1>\n<p class=\"state\">{} · <code>{}</code> into <code>{}</code></p>\n{}{}",
        repo_link(st),
        escape(&p.title),
        p.number,
        state_word(p.state, p.merged),
        escape(&p.head),
        escape(&p.base),
        comment(&p.author, "opened this pull request", &p.body),
        comments(&p.comments),
    );
    for r in &p.reviews {
        let verdict = match r.state.as_str() {
            "APPROVED" => "approved these changes",
            "CHANGES_REQUESTED" => "requested changes",
            _ => "reviewed",
        };
        body.push_str(&comment(&r.author, verdict, &r.body));
    }
    for root in p.review_comments.iter().filter(|c| c.in_reply_to.is_none()) {
        let at = match root.line {
            Some(line) => format!("{}:{line}", root.path),
            None => root.path.clone(),
        };
        let resolved = root
            .resolved_by
            .as_deref()
            .map(|who| format!(" · resolved by {who}"))
            .unwrap_or_default();
        let _ = write!(
            body,
            "<section class=\"comment\"><header><code>{}</code>{}</header><div><pre>{}</pre>",
            escape(&at),
            escape(&resolved),
            escape(&root.diff_hunk)
        );
        for c in p.thread(root.id) {
            body.push_str(&comment(&c.author, "", &c.body));
        }
        body.push_str("</div></section>\n");
    }
    page(&format!("{} · Pull Request #{}", p.title, p.number), &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_html_and_script_links_are_shown_as_text() {
        let out = markdown(
            "Hi <script>alert(1)</script>\n\n<img src=x onerror=alert(1)>\n\n[x](javascript:alert(1)) [ok](https://example.com/a) [rel](/a/b)",
        );
        assert!(!out.contains("<script"), "{out}");
        assert!(!out.contains("<img"), "{out}");
        assert!(out.contains("&lt;script&gt;"), "{out}");
        assert!(out.contains("href=\"#\""), "{out}");
        assert!(!out.contains("javascript:"), "{out}");
        assert!(out.contains("href=\"https://example.com/a\""), "{out}");
        assert!(out.contains("href=\"/a/b\""), "{out}");
        // Hidden markers stay hidden; a comment that closes early does not hide what follows.
        let out = markdown("Done.\n\n<!-- supervisor:run=r1 stage=Research -->\n");
        assert!(!out.contains("supervisor:run"), "{out}");
        assert!(!markdown("<!--->\n").contains("<!--"));
        let out = markdown("<!-- a --><script>x</script> -->\n");
        assert!(
            out.contains("&lt;script&gt;") && !out.contains("<script"),
            "{out}"
        );
    }

    #[test]
    fn markdown_renders_tables_task_lists_and_headings() {
        let out = markdown("## Plan\n\n- [x] done\n\n| a | b |\n|---|---|\n| 1 | 2 |\n");
        assert!(out.contains("<h2>Plan</h2>"), "{out}");
        assert!(out.contains("type=\"checkbox\""), "{out}");
        assert!(out.contains("<td>1</td>"), "{out}");
    }

    #[test]
    fn escape_escapes_markup() {
        assert_eq!(
            escape("<a href=\"x\">&</a>"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&lt;/a&gt;"
        );
    }
}
