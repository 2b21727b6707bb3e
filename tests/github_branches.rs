//! Branches and the files of a pull request: the real client against the sandbox GitHub over
//! loopback, every exchange held to GitHub's REST description.

mod common;

use common::*;
use supervisor::github::{GitHubError, NewPullRequest};
use supervisor::sandbox::TokenSeed;

const GET_REF: &str = "GET /repos/{owner}/{repo}/git/ref/{ref}";
const CREATE_REF: &str = "POST /repos/{owner}/{repo}/git/refs";
const FILES: &str = "GET /repos/{owner}/{repo}/pulls/{number}/files";

/// The number of a new pull request from `head` into main.
async fn open_pull(w: &World, head: &str) -> u64 {
    let new = NewPullRequest {
        head: head.into(),
        base: "main".into(),
        title: format!("Changes of {head}"),
        body: String::new(),
        draft: false,
    };
    let (pr, created) = w.gh.find_or_create_pr(&new).await.unwrap();
    assert!(created);
    pr.number
}

#[tokio::test]
async fn a_branch_is_created_once_and_found_by_its_head() {
    within(async {
        let w = World::new().await;
        let git = w.sandbox.git();
        let main = git.branch_sha("main").unwrap();
        // A missing branch is no error.
        assert_eq!(w.gh.branch_head("epic/7").await.unwrap(), None);
        assert!(w.gh.create_branch("epic/7", &main).await.unwrap());
        assert_eq!(
            w.gh.branch_head("epic/7").await.unwrap().as_deref(),
            Some(main.as_str())
        );
        assert_eq!(git.branch_sha("epic/7").as_deref(), Some(main.as_str()));
        // Created again, even at another commit: it exists, and stays where it was.
        let feature = git.branch_sha("feature").unwrap();
        assert!(!w.gh.create_branch("epic/7", &main).await.unwrap());
        assert!(!w.gh.create_branch("epic/7", &feature).await.unwrap());
        assert_eq!(git.branch_sha("epic/7").as_deref(), Some(main.as_str()));
        assert_eq!(
            w.gh.branch_head("feature").await.unwrap().as_deref(),
            Some(feature.as_str())
        );
        assert_eq!(w.count(CREATE_REF), 3);
        assert_eq!(w.count(GET_REF), 3);
    })
    .await
}

#[tokio::test]
async fn a_branch_at_an_unknown_commit_is_refused_naming_the_commit() {
    within(async {
        let w = World::new().await;
        let sha = "0123456789abcdef0123456789abcdef01234567";
        let e = w.gh.create_branch("topic", sha).await.unwrap_err();
        assert_eq!(e.status(), Some(422), "{e}");
        let text = e.to_string();
        assert!(text.contains("Object does not exist"), "{text}");
        assert!(text.contains(sha) && text.contains("`topic`"), "{text}");
        assert!(w.sandbox.git().branch_sha("topic").is_none());
        assert_eq!(w.gh.branch_head("topic").await.unwrap(), None);
    })
    .await
}

#[tokio::test]
async fn unsafe_branch_names_are_refused_without_a_request() {
    within(async {
        let w = World::new().await;
        let main = w.sandbox.git().branch_sha("main").unwrap();
        for bad in [
            "a..b",
            "-x",
            "a b",
            "x.lock",
            "",
            "refs/../main",
            "@{u}",
            "a:b",
        ] {
            let e = w.gh.create_branch(bad, &main).await.unwrap_err();
            assert!(
                matches!(&e, GitHubError::UnsafeBranch { branch } if branch == bad),
                "{e}"
            );
            assert!(e.to_string().contains("not a safe branch name"), "{e}");
            let e = w.gh.branch_head(bad).await.unwrap_err();
            assert!(matches!(e, GitHubError::UnsafeBranch { .. }), "{e}");
        }
        assert_eq!(w.gh.requests_sent(), 0);
        assert_eq!(w.count(CREATE_REF) + w.count(GET_REF), 0);
    })
    .await
}

#[tokio::test]
async fn creating_a_branch_needs_contents_write() {
    within(async {
        let w = World::with(|s| {
            s.tokens.push(TokenSeed {
                token: "github_pat_read".into(),
                login: "alice".into(),
                permissions: Some(
                    [("contents", "read"), ("metadata", "read")]
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..Default::default()
            });
        })
        .await;
        let main = w.sandbox.git().branch_sha("main").unwrap();
        let reader = client(&w.sandbox, Some("github_pat_read"), quick());
        assert_eq!(
            reader.branch_head("main").await.unwrap().as_deref(),
            Some(main.as_str())
        );
        let e = reader.create_branch("topic", &main).await.unwrap_err();
        assert!(
            matches!(&e, GitHubError::MissingPermission { permission, .. } if permission == "Contents: write"),
            "{e}"
        );
        assert!(w.sandbox.git().branch_sha("topic").is_none());
    })
    .await
}

/// `GET …/pulls/{number}/files` (page `page`), as any client asks it of the sandbox.
async fn pull_files(w: &World, number: u64, page: u32) -> RawAnswer {
    let path = format!("/repos/acme/widgets/pulls/{number}/files?per_page=100&page={page}");
    let auth = format!("Bearer {FULL}");
    raw(
        &w.sandbox.url(),
        "GET",
        &path,
        &[("Authorization", &auth)],
        "",
    )
    .await
}

#[tokio::test]
async fn a_pull_requests_files_are_listed_with_their_patches() {
    within(async {
        let w = World::new().await;
        w.sandbox
            .git()
            .commit_files(
                "two",
                Some("main"),
                &[("a.txt", "one\n"), ("README.md", "ours\nand more\n")],
                "two files",
            )
            .unwrap();
        let number = open_pull(&w, "two").await;
        let files = pull_files(&w, number, 1).await.json();
        let got: Vec<(&str, &str, u64, u64, &str)> = (files.as_array().unwrap().iter())
            .map(|f| {
                (
                    f["filename"].as_str().unwrap(),
                    f["status"].as_str().unwrap(),
                    f["additions"].as_u64().unwrap(),
                    f["deletions"].as_u64().unwrap(),
                    f["patch"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (
                    "README.md",
                    "modified",
                    1,
                    0,
                    "@@ -1 +1,2 @@\n ours\n+and more"
                ),
                ("a.txt", "added", 1, 0, "@@ -0,0 +1 @@\n+one"),
            ]
        );
        assert_eq!(pull_files(&w, 99, 1).await.status, 404);
        let violations = w.sandbox.violations();
        assert!(violations.is_empty(), "{violations:?}");
    })
    .await
}

#[tokio::test]
async fn a_pull_request_of_150_files_is_listed_over_two_pages() {
    within(async {
        let w = World::new().await;
        let names: Vec<String> = (0..150).map(|i| format!("f{i:03}.txt")).collect();
        let files: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "x\n")).collect();
        w.sandbox
            .git()
            .commit_files("many", Some("main"), &files, "150 files")
            .unwrap();
        let number = open_pull(&w, "many").await;
        let first = pull_files(&w, number, 1).await;
        assert!(
            first
                .header("link")
                .is_some_and(|l| l.contains("rel=\"next\"")),
            "{:?}",
            first.headers
        );
        let mut got = Vec::new();
        for page in [first.json(), pull_files(&w, number, 2).await.json()] {
            for f in page.as_array().unwrap() {
                assert_eq!(f["status"], "added");
                got.push(f["filename"].as_str().unwrap().to_string());
            }
        }
        assert_eq!(got, names);
        assert_eq!(w.count(FILES), 2, "100 + 50 per page");
    })
    .await
}
