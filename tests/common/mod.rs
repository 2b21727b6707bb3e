//! The world the GitHub tests run in: a sandbox GitHub seeded with a repository, a board, issues and
//! a bare git repository with branches, and a real client pointed at it over loopback.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use supervisor::config::RepoSlug;
use supervisor::github::{BoardRef, ClientConfig, GitHub, RetryPolicy, Token};
use supervisor::sandbox::{
    BoardSeed, CheckRunSeed, CommentSeed, GitRemote, IssueSeed, OwnerType, Sandbox, SandboxState,
    SeedState, TokenSeed, UserSeed,
};

/// A token with `repo` and `project`.
pub(crate) const FULL: &str = "tok-full-0123456789";
/// A token with `repo` only.
pub(crate) const REPO_ONLY: &str = "tok-repo-0123456789";

/// Every test body runs under this limit.
pub(crate) async fn within<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(60), f)
        .await
        .expect("the test did not finish within 60 s")
}

pub(crate) fn issue(number: u64, title: &str, body: &str, author: &str) -> IssueSeed {
    IssueSeed::new(number, title, body, author)
}

pub(crate) fn comment(author: &str, body: &str) -> CommentSeed {
    CommentSeed::new(author, body)
}

pub(crate) const COLUMNS: [&str; 7] = [
    "Backlog",
    "Research",
    "Architecture",
    "TestDesign",
    "Implementation",
    "Audit",
    "Done",
];

/// acme/widgets: issue 1 on the board in Backlog, issue 2 (closed) and 3 off the board, issue 4
/// blocked by 1 and 2, branches `feature` (merges cleanly) and `clash` (conflicts with main).
pub(crate) fn seed(git_dir: &std::path::Path) -> SandboxState {
    let mut s = SandboxState::new("acme", "widgets");
    s.repo.git_dir = Some(git_dir.to_path_buf());
    s.users = vec![UserSeed {
        login: "alice".into(),
        name: Some("Alice".into()),
        association: Some("MEMBER".into()),
        permission: None,
    }];
    s.tokens = vec![
        TokenSeed::classic(FULL, "alice", &["repo", "project"]),
        TokenSeed::classic(REPO_ONLY, "alice", &["repo"]),
    ];
    let mut one = issue(1, "Add a --verbose flag", "Print more.", "alice");
    one.labels = vec!["enhancement".into(), "cli".into()];
    one.comments = vec![comment("bob", "Please also add --quiet")];
    let mut two = issue(2, "Logging crate", "", "alice");
    two.state = SeedState::Closed;
    let three = issue(3, "Docs", "", "alice");
    let mut four = issue(
        4,
        "Release",
        "Depends on #3 and #2.\n\n```\nBlocked by #99\n```\nBlocked by #77",
        "alice",
    );
    four.blocked_by = vec![1, 2];
    s.issues = vec![one, two, three, four];
    s.board = Some(BoardSeed {
        owner: "acme".into(),
        owner_type: OwnerType::Organization,
        number: 7,
        title: "Pipeline".into(),
        status_field: "Status".into(),
        options: COLUMNS.iter().map(|c| c.to_string()).collect(),
        items: BTreeMap::from([(1, Some("Backlog".to_string()))]),
    });
    s
}

pub(crate) fn board() -> BoardRef {
    BoardRef {
        owner: "acme".into(),
        number: 7,
        status_field: "Status".into(),
    }
}

/// The sandbox, its bare repository's directory, and a client with the full token.
pub(crate) struct World {
    pub sandbox: Sandbox,
    pub gh: GitHub,
    pub dir: tempfile::TempDir,
}

impl World {
    pub(crate) async fn new() -> World {
        World::with(|_| {}).await
    }

    pub(crate) async fn with(change: impl FnOnce(&mut SandboxState)) -> World {
        let dir = tempfile::tempdir().expect("temp dir");
        let git_dir = dir.path().join("remote.git");
        let git = GitRemote::create(&git_dir, "main").expect("bare repository");
        git.commit_files(
            "feature",
            Some("main"),
            &[("verbose.txt", "--verbose\n")],
            "add verbose",
        )
        .expect("feature branch");
        git.commit_files(
            "clash",
            Some("main"),
            &[("README.md", "theirs\n")],
            "rewrite readme",
        )
        .expect("clash branch");
        git.commit_files("main", None, &[("README.md", "ours\n")], "edit readme")
            .expect("main moves on");
        let mut state = seed(&git_dir);
        change(&mut state);
        let sandbox = Sandbox::start(state, 0).await.expect("sandbox starts");
        // Every exchange of every test is held to GitHub's published descriptions.
        sandbox
            .check_conformance()
            .expect("the vendored description compiles");
        let gh = client(&sandbox, Some(FULL), quick());
        World { sandbox, gh, dir }
    }

    /// A client with the full token and the quick policy changed by `change`.
    pub(crate) fn client_with(&self, change: impl FnOnce(&mut RetryPolicy)) -> GitHub {
        let mut policy = quick();
        change(&mut policy);
        client(&self.sandbox, Some(FULL), policy)
    }

    /// Requests the sandbox counted for `route`.
    pub(crate) fn count(&self, route: &str) -> u64 {
        self.sandbox
            .request_counts()
            .get(route)
            .copied()
            .unwrap_or(0)
    }

    pub(crate) fn check_runs(&self, sha: &str, runs: &[(&str, &str, Option<&str>)]) {
        self.sandbox.with_state(|s| {
            s.check_runs.insert(
                sha.to_string(),
                runs.iter()
                    .map(|(name, status, conclusion)| CheckRunSeed {
                        name: name.to_string(),
                        status: status.to_string(),
                        conclusion: conclusion.map(str::to_string),
                        html_url: None,
                    })
                    .collect(),
            );
        });
    }
}

impl Drop for World {
    /// A test whose exchanges differ from GitHub's descriptions fails, naming operation and field.
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        if let Err(report) = self.sandbox.conformance_report() {
            panic!("{report}");
        }
    }
}

/// Loopback policy with short waits, so fault tests stay quick.
pub(crate) fn quick() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 4,
        base_backoff: Duration::from_millis(10),
        max_wait: Duration::from_secs(5),
        min_mutation_interval: Duration::ZERO,
        request_timeout: Duration::from_secs(5),
        secondary_min_wait: Duration::from_millis(100),
    }
}

pub(crate) fn client(sandbox: &Sandbox, token: Option<&str>, retry: RetryPolicy) -> GitHub {
    let mut cfg = ClientConfig::new(
        sandbox.url(),
        token.map(|t| Token::new(t).expect("token")),
        RepoSlug::parse("acme/widgets").expect("slug"),
    );
    cfg.retry = retry;
    GitHub::new(cfg).expect("client")
}

/// An answer read off the wire by [`raw`].
pub(crate) struct RawAnswer {
    pub status: u16,
    /// Header names in lower case.
    pub headers: BTreeMap<String, String>,
    pub body: String,
}

impl RawAnswer {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }

    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).expect("a JSON body")
    }
}

/// One HTTP/1.1 request to `base` (`http://127.0.0.1:PORT`), headers and all, as a client other
/// than supervisor's would send it (on a blocking thread, so the sandbox keeps serving).
pub(crate) async fn raw(
    base: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> RawAnswer {
    let (base, method, path, body) = (
        base.to_string(),
        method.to_string(),
        path.to_string(),
        body.to_string(),
    );
    let headers: Vec<(String, String)> = headers
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    tokio::task::spawn_blocking(move || raw_blocking(&base, &method, &path, &headers, &body))
        .await
        .expect("the request ran")
}

fn raw_blocking(
    base: &str,
    method: &str,
    path: &str,
    headers: &[(String, String)],
    body: &str,
) -> RawAnswer {
    use std::io::{Read, Write};
    let addr = base.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        req.push_str(&format!("Host: {addr}\r\n"));
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    RawAnswer {
        status,
        headers,
        body: body.to_string(),
    }
}
