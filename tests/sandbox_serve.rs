//! `supervisor sandbox serve` as a user runs it: started from the shipped example state, asked with
//! plain HTTP (what curl sends) for an issue and for the issue's board column, a card moved through
//! the client and seen by the next plain request, and the state dumped on exit.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};
use supervisor::config::RepoSlug;
use supervisor::github::{BoardRef, ClientConfig, GitHub, Token};
use supervisor::ids::BoardOption;
use supervisor::sandbox::SandboxState;

#[path = "support/browse.rs"]
mod browse;
#[path = "support/chromium.rs"]
mod chromium;
#[path = "support/ports.rs"]
mod ports;
use browse::browse;
use ports::free_port;

const TOKEN: &str = "sandbox-token-alice";

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("config/sandbox.example.json")
}

/// The server process; killed if the test fails before stopping it.
struct Server(Child);

impl Server {
    /// Stop it as Ctrl-C would (SIGTERM), so it cleans up and dumps; its exit status.
    fn stop(&mut self) -> std::process::ExitStatus {
        let pid = self.0.id() as libc::pid_t;
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
        self.0.wait().expect("the server exits")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Start `sandbox serve` and wait (bounded) until it prints its URL.
fn serve(state: &Path, port: u16, dump: Option<&Path>) -> (Server, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_supervisor"));
    cmd.args(["sandbox", "serve", "--state"])
        .arg(state)
        .args(["--port", &port.to_string()]);
    if let Some(d) = dump {
        cmd.arg("--dump").arg(d);
    }
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let server = Server(child);
    loop {
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the banner within 30 s");
        if let Some(at) = line.find("listening on ") {
            let url = line[at + "listening on ".len()..].trim().to_string();
            assert_eq!(url, format!("http://127.0.0.1:{port}"));
            return (server, url);
        }
    }
}

/// One HTTP/1.1 exchange, as curl does it: status and body.
fn http(port: u16, method: &str, path: &str, body: Option<&Value>) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUser-Agent: curl/8.5.0\r\nAccept: */*\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).expect("an answer");
    let (head, body) = raw.split_once("\r\n\r\n").expect("headers and body");
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("a status line");
    (status, body.to_string())
}

fn column_query(port: u16) -> Value {
    let (status, body) = http(
        port,
        "POST",
        "/graphql",
        Some(&json!({
            "query": "query($n: Int!) { repository(owner: \"acme\", name: \"widgets\") { issue(number: $n) { projectItems(first: 10) { nodes { project { number } status: fieldValueByName(name: \"Status\") { ... on ProjectV2ItemFieldSingleSelectValue { name } } } } } } }",
            "variables": {"n": 1}
        })),
    );
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).expect("JSON");
    v["data"]["repository"]["issue"]["projectItems"]["nodes"][0]["status"]["name"].clone()
}

#[test]
fn serve_answers_plain_http_and_shows_a_move_made_through_the_client() {
    let dir = tempfile::tempdir().unwrap();
    let dump = dir.path().join("after.json");
    let port = free_port();
    let (mut server, url) = serve(&example(), port, Some(&dump));

    let (status, body) = http(port, "GET", "/repos/acme/widgets/issues/1", None);
    assert_eq!(status, 200, "{body}");
    let issue: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(issue["title"], "Add a --verbose flag");
    assert_eq!(issue["user"]["login"], "alice");
    assert_eq!(column_query(port), json!("Backlog"));

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        tokio::time::timeout(Duration::from_secs(30), async {
            let gh = GitHub::new(ClientConfig::new(
                url.clone(),
                Some(Token::new(TOKEN).unwrap()),
                RepoSlug::parse("acme/widgets").unwrap(),
            ))
            .unwrap();
            let board = BoardRef {
                owner: "acme".into(),
                number: 1,
                status_field: "Status".into(),
            };
            let item = gh
                .board_item(&board, 1)
                .await
                .unwrap()
                .expect("on the board");
            gh.move_card(&item, &BoardOption::new("Research"))
                .await
                .unwrap();
        })
        .await
        .expect("the client finishes within 30 s")
    });
    assert_eq!(column_query(port), json!("Research"));

    let (status, body) = http(port, "GET", "/_sandbox/requests", None);
    assert_eq!(status, 200);
    let counts: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(counts["POST /graphql UpdateItemStatus"], 1);

    // SIGTERM stops it cleanly and the dump has the move.
    let status = server.stop();
    assert!(status.success(), "{status:?}");
    let after = SandboxState::load(&dump).unwrap();
    assert_eq!(after.column_of(1), Some("Research"));
    assert!(
        after.repo.git_dir.is_none(),
        "the temporary repository is not dumped"
    );
}

#[test]
fn serve_reads_yaml_state() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = dir.path().join("state.yaml");
    let state = SandboxState::load(&example()).unwrap();
    std::fs::write(&yaml, state.to_yaml().unwrap()).unwrap();
    let port = free_port();
    let (mut server, _) = serve(&yaml, port, None);
    let (status, body) = http(port, "GET", "/repos/acme/widgets/issues/3", None);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("Translate the README"));
    let (status, body) = http(port, "GET", "/repos/acme/widgets/issues/42", None);
    assert_eq!(status, 404);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["message"], "Not Found");
    assert!(
        v["documentation_url"]
            .as_str()
            .unwrap()
            .starts_with("https://docs.github.com/")
    );
    assert!(server.stop().success());
}

#[test]
fn a_broken_state_file_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, r#"{"repo": {"owner": "a"}}"#).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_supervisor"))
        .args(["sandbox", "serve", "--state"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.json") && err.contains("name"), "{err}");
}

/// A comment written to run script and break out of the page, and one with ordinary Markdown.
const HOSTILE: &str = "<img src=x onerror=\"document.title='pwned'\"><script>document.title='pwned'</script> [click](javascript:alert(1))\n\n<details open onclick=\"document.title='pwned'\"><summary>s</summary>x</details>\n\n<a href=\"javascript:document.title='pwned'\">a</a> <ScRipt>document.title='pwned'</ScRipt> <b onmouseover=\"document.title='pwned'\">b</b></article></div>\n\n<details><summary>unclosed";
const TABLE: &str =
    "## Research Findings\n\n| unit | seconds |\n|---|---|\n| `h` | 3600 |\n\n- [x] checked";

/// The example state plus a pull request with a review and a line comment, and two comments on
/// issue 1: one hostile, one with a table.
fn web_state(dir: &Path) -> PathBuf {
    let mut state: Value =
        serde_json::from_str(&std::fs::read_to_string(example()).unwrap()).unwrap();
    let comments = state["issues"][0]["comments"].as_array_mut().unwrap();
    comments.push(json!({"author": "mallory", "body": HOSTILE}));
    comments.push(json!({"author": "alice", "body": TABLE}));
    state["pulls"] = json!([{
        "number": 4, "head": "feat-verbose", "base": "main", "author": "supervisor-bot",
        "title": "feat(#1): add --verbose",
        "body": "## Summary\nAdds **--verbose**.\n\nCloses #1",
        "reviews": [{"id": 7, "author": "alice", "state": "CHANGES_REQUESTED", "body": "One *more* thing."}],
        "review_comments": [{"id": 9, "review_id": 7, "author": "alice", "path": "src/main.rs", "line": 3,
                             "diff_hunk": "@@ -1,3 +1,4 @@\n+<b>x</b>", "body": "Name it `verbose`."}]
    }]);
    let path = dir.join("web.json");
    std::fs::write(&path, state.to_string()).unwrap();
    path
}

#[test]
fn serve_shows_a_read_only_web_view_beside_the_api() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let (mut server, url) = serve(&web_state(dir.path()), port, None);

    // The repository: its issues, its pull request and the board's columns with their cards.
    for home in ["/", "/acme/widgets"] {
        let (status, kind, page) = browse(&format!("{url}{home}"));
        assert_eq!(status, 200, "{home}: {page}");
        assert!(kind.starts_with("text/html"), "{kind}");
        assert!(
            page.contains(
                "<a class=\"row-title\" href=\"/acme/widgets/issues/1\">Add a --verbose flag</a>"
            ),
            "{page}"
        );
        assert!(
            page.contains(
                "<a class=\"row-title\" href=\"/acme/widgets/pull/4\">feat(#1): add --verbose</a>"
            ),
            "{page}"
        );
        for column in ["Backlog", "Research", "Done", "No status"] {
            assert!(
                page.contains(&format!("<h3>{column}</h3>")),
                "{column}: {page}"
            );
        }
    }
    let (status, _, board) = browse(&format!("{url}/orgs/acme/projects/1"));
    assert_eq!(status, 200);
    let backlog = board.split("<h3>Backlog</h3>").nth(1).unwrap();
    let backlog = backlog.split("</section>").next().unwrap();
    assert!(backlog.contains("/acme/widgets/issues/1"), "{board}");
    assert!(
        !backlog.contains("/acme/widgets/issues/3"),
        "issue 3 has no status: {board}"
    );

    // The issue: comments rendered as Markdown, GitHub's HTML kept bare, other HTML shown as text,
    // script links dropped, and what a comment opens closed inside it.
    let (status, _, issue) = browse(&format!("{url}/acme/widgets/issues/1"));
    assert_eq!(status, 200, "{issue}");
    assert!(
        issue.contains("<h1 class=\"title\"><bdi>Add a --verbose flag</bdi>"),
        "{issue}"
    );
    assert!(issue.contains("<h2>Research Findings</h2>"), "{issue}");
    assert!(issue.contains("<td><code>h</code></td>"), "{issue}");
    assert!(
        issue.contains("Status: <strong>Backlog</strong>"),
        "{issue}"
    );
    let lower = issue.to_ascii_lowercase();
    assert!(
        !lower.contains("<script")
            && !lower.contains("<img")
            && !lower.contains("<a href=\"javascript"),
        "{issue}"
    );
    assert!(issue.contains("&lt;script&gt;"), "{issue}");
    assert!(!issue.contains("href=\"javascript:"), "{issue}");
    assert!(
        issue.contains("<details open><summary>s</summary>x</details>"),
        "{issue}"
    );
    assert!(
        issue.contains("<b>b</b>&lt;/article&gt;&lt;/div&gt;"),
        "{issue}"
    );
    assert!(
        issue.contains("<details><summary>unclosed</summary></details></div></article>"),
        "{issue}"
    );

    // The pull request: body, review, line comment with its hunk (escaped).
    let (status, _, pull) = browse(&format!("{url}/acme/widgets/pull/4"));
    assert_eq!(status, 200, "{pull}");
    assert!(pull.contains("Adds <strong>--verbose</strong>."), "{pull}");
    assert!(
        pull.contains("requested changes") && pull.contains("One <em>more</em> thing."),
        "{pull}"
    );
    assert!(
        pull.contains("<code>src/main.rs</code> <span>line 3</span>")
            && pull.contains("+&lt;b&gt;x&lt;/b&gt;"),
        "{pull}"
    );
    assert!(pull.contains("Name it <code>verbose</code>."), "{pull}");

    // What the view does not have is the API's 404; the API itself is unchanged beside it.
    for missing in [
        "/acme/widgets/issues/42",
        "/acme/other/issues/1",
        "/acme/widgets/pull/1",
        "/orgs/acme/projects/2",
    ] {
        let (status, kind, body) = browse(&format!("{url}{missing}"));
        assert_eq!(status, 404, "{missing}: {body}");
        assert!(kind.starts_with("application/json"), "{missing}: {kind}");
    }
    let (status, body) = http(port, "GET", "/repos/acme/widgets/pulls/4", None);
    assert_eq!(status, 200, "{body}");
    let (status, _) = http(port, "GET", "/user", None);
    assert_eq!(status, 200);
    let (status, _, _) = browse(&format!("{url}/user"));
    assert_eq!(status, 401, "the API still wants a token");
    // The icon a browser asks for unprompted is the view's, not an API 404.
    let (status, kind, icon) = browse(&format!("{url}/favicon.ico"));
    assert_eq!((status, kind.as_str()), (200, "image/svg+xml"), "{icon}");
    assert!(icon.starts_with("<svg"), "{icon}");
    // Browsing is not an API request: only the three above are counted.
    let (_, counts) = http(port, "GET", "/_sandbox/requests", None);
    let counts: Value = serde_json::from_str(&counts).unwrap();
    assert_eq!(
        counts,
        json!({"GET /repos/{owner}/{repo}/pulls/{number}": 1, "GET /user": 2})
    );

    // In a real browser the hostile comment stays text: no script runs, nothing is injected.
    if let Some(browser) = chromium::require("the headless browser check of a hostile comment") {
        let dom = chromium::dump_dom(&browser, &format!("{url}/acme/widgets/issues/1"));
        assert!(
            dom.contains("<title>Add a --verbose flag · Issue #1</title>"),
            "{dom}"
        );
        assert!(
            !dom.contains("pwned</title>") && !dom.contains("<img"),
            "{dom}"
        );
        assert!(dom.contains("<td><code>h</code></td>"), "{dom}");
        assert_eq!(dom.matches("<footer").count(), 1, "{dom}");
    }
    assert!(server.stop().success());
}
