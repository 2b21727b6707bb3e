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
pub const FULL: &str = "tok-full-0123456789";
/// A token with `repo` only.
pub const REPO_ONLY: &str = "tok-repo-0123456789";

/// Every test body runs under this limit.
pub async fn within<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(60), f)
        .await
        .expect("the test did not finish within 60 s")
}

pub fn issue(number: u64, title: &str, body: &str, author: &str) -> IssueSeed {
    IssueSeed::new(number, title, body, author)
}

pub fn comment(author: &str, body: &str) -> CommentSeed {
    CommentSeed::new(author, body)
}

pub const COLUMNS: [&str; 7] = [
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
pub fn seed(git_dir: &std::path::Path) -> SandboxState {
    let mut s = SandboxState::new("acme", "widgets");
    s.repo.git_dir = Some(git_dir.to_path_buf());
    s.users = vec![UserSeed {
        login: "alice".into(),
        name: Some("Alice".into()),
        association: Some("MEMBER".into()),
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

pub fn board() -> BoardRef {
    BoardRef {
        owner: "acme".into(),
        number: 7,
        status_field: "Status".into(),
    }
}

/// The sandbox, its bare repository's directory, and a client with the full token.
pub struct World {
    pub sandbox: Sandbox,
    pub gh: GitHub,
    pub dir: tempfile::TempDir,
}

impl World {
    pub async fn new() -> World {
        World::with(|_| {}).await
    }

    pub async fn with(change: impl FnOnce(&mut SandboxState)) -> World {
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
        let gh = client(&sandbox, Some(FULL), quick());
        World { sandbox, gh, dir }
    }

    /// A client with the full token and the quick policy changed by `change`.
    pub fn client_with(&self, change: impl FnOnce(&mut RetryPolicy)) -> GitHub {
        let mut policy = quick();
        change(&mut policy);
        client(&self.sandbox, Some(FULL), policy)
    }

    /// Requests the sandbox counted for `route`.
    pub fn count(&self, route: &str) -> u64 {
        self.sandbox
            .request_counts()
            .get(route)
            .copied()
            .unwrap_or(0)
    }

    pub fn check_runs(&self, sha: &str, runs: &[(&str, &str, Option<&str>)]) {
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

/// Loopback policy with short waits, so fault tests stay quick.
pub fn quick() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 4,
        base_backoff: Duration::from_millis(10),
        max_wait: Duration::from_secs(5),
        min_mutation_interval: Duration::ZERO,
        request_timeout: Duration::from_secs(5),
        secondary_min_wait: Duration::from_millis(100),
    }
}

pub fn client(sandbox: &Sandbox, token: Option<&str>, retry: RetryPolicy) -> GitHub {
    let mut cfg = ClientConfig::new(
        sandbox.url(),
        token.map(|t| Token::new(t).expect("token")),
        RepoSlug::parse("acme/widgets").expect("slug"),
    );
    cfg.retry = retry;
    GitHub::new(cfg).expect("client")
}
