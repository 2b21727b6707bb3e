//! Worktrees on real repositories: a local bare repository as `origin`, a submodule from another
//! bare repository, git-ignored files to copy, and checkpoints.

use std::path::{Path, PathBuf};
use std::process::Command;

use supervisor::workspace::{
    Checkpoint, Dependencies, MergeOutcome, PushAuth, Reuse, WorkspaceConfig, WorkspaceError,
    Worktree, cleanup, ensure_worktree, ensure_worktree_staged, fetch_base, prune_stale,
    push_probe, setup, setup_staged,
};

/// Run git for test set-up; panics with git's message on failure.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=Test",
            "-c",
            "user.email=test@example.com",
            "-c",
            "protocol.file.allow=always",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

struct World {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    repo: PathBuf,
    remote: PathBuf,
    cfg: WorkspaceConfig,
}

impl World {
    /// origin (bare) ← repo (clone) with a submodule, ignored `.env` and `.pi/git/`.
    fn new() -> World {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let remote = root.join("remote.git");
        let sub = root.join("sub.git");
        git(&root, &["init", "-q", "--bare", "remote.git"]);
        git(&root, &["init", "-q", "--bare", "sub.git"]);
        git(&root, &["clone", "-q", sub.to_str().unwrap(), "sub-src"]);
        std::fs::write(root.join("sub-src/lib.txt"), "sub library\n").unwrap();
        git(&root.join("sub-src"), &["add", "."]);
        git(&root.join("sub-src"), &["commit", "-qm", "sub"]);
        git(
            &root.join("sub-src"),
            &["push", "-q", "origin", "HEAD:main"],
        );

        git(&root, &["clone", "-q", remote.to_str().unwrap(), "repo"]);
        let repo = root.join("repo");
        std::fs::write(repo.join("README.md"), "# app\n").unwrap();
        std::fs::write(repo.join(".gitignore"), ".env\n.pi/git/\nnode_modules/\n").unwrap();
        git(
            &repo,
            &["submodule", "add", "-q", "../sub.git", "vendor/sub"],
        );
        git(&repo, &["add", "."]);
        git(&repo, &["commit", "-qm", "initial"]);
        git(&repo, &["push", "-q", "origin", "HEAD:main"]);
        std::fs::write(repo.join(".env"), "API_KEY=local\n").unwrap();
        std::fs::create_dir_all(repo.join(".pi/git/github.com/x/pkg")).unwrap();
        std::fs::write(repo.join(".pi/git/github.com/x/pkg/index.js"), "//\n").unwrap();

        let cfg = WorkspaceConfig {
            repo_root: repo.clone(),
            worktree_root: root.join("worktrees"),
            branch_prefix: "worktree-git-issue-".into(),
            default_branch: "main".into(),
            remote: "origin".into(),
            copy_files: vec![".env".into()],
            setup_commands: Some(Vec::new()),
            setup_attempts: 2,
            git_config: vec![("protocol.file.allow".into(), "always".into())],
            push_url: remote.display().to_string(),
        };
        World {
            _tmp: tmp,
            root,
            repo,
            remote,
            cfg,
        }
    }

    fn remote_ref(&self, branch: &str) -> Option<String> {
        let repo = git2::Repository::open_bare(&self.remote).unwrap();
        repo.refname_to_id(&format!("refs/heads/{branch}"))
            .ok()
            .map(|o| o.to_string())
    }

    fn local_branch_exists(&self, branch: &str) -> bool {
        let repo = git2::Repository::open(&self.repo).unwrap();
        repo.find_branch(branch, git2::BranchType::Local).is_ok()
    }

    /// Push a commit to origin's main from another clone.
    fn upstream_commit(&self, file: &str, text: &str) {
        let other = self.root.join("other");
        if !other.exists() {
            git(
                &self.root,
                &["clone", "-q", self.remote.to_str().unwrap(), "other"],
            );
        }
        git(&other, &["pull", "-q", "origin", "main"]);
        std::fs::write(other.join(file), text).unwrap();
        git(&other, &["add", "."]);
        git(&other, &["commit", "-qm", &format!("upstream {file}")]);
        git(&other, &["push", "-q", "origin", "HEAD:main"]);
    }
}

fn status(wt: &Worktree) -> String {
    git(&wt.path, &["status", "--porcelain"])
}

#[tokio::test]
async fn create_setup_commit_push_and_clean_up() {
    let w = World::new();
    let mut cfg = w.cfg.clone();
    cfg.setup_commands = Some(vec![
        // Fails on the first attempt, succeeds on the second.
        "mkdir -p node_modules; if [ -f node_modules/.tried ]; then touch node_modules/.ok; else touch node_modules/.tried; exit 1; fi".into(),
        "echo broken >&2; exit 7".into(),
    ]);
    let wt = ensure_worktree(&cfg, 42).unwrap();
    assert_eq!(wt.origin, Reuse::Created);
    assert_eq!(wt.branch, "worktree-git-issue-42");
    assert_eq!(wt.path, w.root.join("worktrees/worktree-git-issue-42"));
    assert_eq!(
        git(&wt.path, &["rev-parse", "--abbrev-ref", "HEAD"]),
        "worktree-git-issue-42"
    );

    let report = setup(&cfg, &wt, &tokio_util::sync::CancellationToken::new()).await;
    let step = |what: &str| {
        report
            .steps
            .iter()
            .find(|s| s.what.starts_with(what))
            .unwrap_or_else(|| panic!("no step {what}: {report:?}"))
    };
    assert!(step("git submodule").ok, "{report:?}");
    assert_eq!(
        std::fs::read_to_string(wt.path.join("vendor/sub/lib.txt")).unwrap(),
        "sub library\n"
    );
    assert!(step("copy .env").ok);
    assert_eq!(
        std::fs::read_to_string(wt.path.join(".env")).unwrap(),
        "API_KEY=local\n"
    );
    assert!(step("copy .pi/git").ok);
    assert!(wt.path.join(".pi/git/github.com/x/pkg/index.js").is_file());
    assert!(step("mkdir -p node_modules").ok);
    assert!(step("mkdir -p node_modules").detail.contains("attempt 2"));
    assert!(wt.path.join("node_modules/.ok").exists());
    let broken = step("echo broken");
    assert!(!broken.ok && broken.detail.contains("broken"), "{broken:?}");
    assert_eq!(
        report.warnings.len(),
        1,
        "a failed setup command warns: {report:?}"
    );
    assert_eq!(status(&wt), "", "copied and generated files stay ignored");

    // Developer stage: change, commit (with the issue in the message), push.
    std::fs::write(wt.path.join("feature.txt"), "new\n").unwrap();
    std::fs::remove_file(wt.path.join("README.md")).unwrap();
    let sha = wt.commit_all("Implement #42").unwrap().expect("a commit");
    assert_eq!(wt.head_sha().unwrap(), sha);
    assert_eq!(
        wt.commit_all("Implement #42").unwrap(),
        None,
        "no changes is not an error"
    );
    assert_eq!(wt.commits_ahead().unwrap(), 1);
    assert_eq!(
        wt.commit_and_count("Implement #42").unwrap(),
        supervisor::workspace::Committed {
            sha: None,
            ahead: 1,
            head: sha.clone(),
            outside: Vec::new(),
        },
        "nothing new: the branch as it stands"
    );
    assert_eq!(
        git(&wt.path, &["log", "-1", "--format=%s"]),
        "Implement #42"
    );
    assert_eq!(
        git(&wt.path, &["show", "--name-status", "--format="]),
        "D\tREADME.md\nA\tfeature.txt"
    );
    wt.push(&PushAuth::None).unwrap();
    assert_eq!(w.remote_ref("worktree-git-issue-42"), Some(sha.clone()));

    // The dead-code gate blocks: undo, keep the changes, commit again, push over the old commit.
    wt.undo_last_commit().unwrap();
    assert_eq!(wt.commits_ahead().unwrap(), 0);
    assert!(wt.path.join("feature.txt").is_file());
    assert!(matches!(
        wt.undo_last_commit(),
        Err(WorkspaceError::NothingToUndo)
    ));
    std::fs::write(wt.path.join("feature.txt"), "better\n").unwrap();
    let committed = wt.commit_and_count("Implement #42 (fix)").unwrap();
    let sha2 = committed.sha.clone().expect("a commit");
    assert_eq!((committed.ahead, committed.head), (1, sha2.clone()));
    wt.push(&PushAuth::None).unwrap();
    assert_eq!(w.remote_ref("worktree-git-issue-42"), Some(sha2));

    cleanup(&cfg, &wt).unwrap();
    assert!(!wt.path.exists());
    assert!(!w.local_branch_exists("worktree-git-issue-42"));
    assert_eq!(
        git(&w.repo, &["worktree", "list", "--porcelain"])
            .matches("worktree ")
            .count(),
        1
    );
    cleanup(&cfg, &wt).unwrap();
}

#[tokio::test]
async fn default_setup_runs_npm_ci_when_a_lockfile_exists() {
    let w = World::new();
    std::fs::write(
        w.repo.join("package.json"),
        r#"{ "name": "app", "version": "1.0.0" }"#,
    )
    .unwrap();
    std::fs::write(
        w.repo.join("package-lock.json"),
        r#"{ "name": "app", "version": "1.0.0", "lockfileVersion": 3, "requires": true, "packages": { "": { "name": "app", "version": "1.0.0" } } }"#,
    )
    .unwrap();
    git(&w.repo, &["add", "."]);
    git(&w.repo, &["commit", "-qm", "npm"]);
    let mut cfg = w.cfg.clone();
    cfg.setup_commands = None;
    let wt = ensure_worktree(&cfg, 1).unwrap();
    let report = setup(&cfg, &wt, &tokio_util::sync::CancellationToken::new()).await;
    assert!(
        report.steps.iter().any(|s| s.what == "npm ci"),
        "{report:?}"
    );
}

#[tokio::test]
async fn files_that_are_not_ignored_are_not_copied() {
    let w = World::new();
    std::fs::write(w.repo.join("notes.txt"), "private\n").unwrap();
    let mut cfg = w.cfg.clone();
    cfg.copy_files = vec![
        "notes.txt".into(),
        "../outside".into(),
        "missing.env".into(),
    ];
    let wt = ensure_worktree(&cfg, 2).unwrap();
    let report = setup(&cfg, &wt, &tokio_util::sync::CancellationToken::new()).await;
    assert!(!wt.path.join("notes.txt").exists());
    assert_eq!(report.warnings.len(), 2, "{report:?}");
    assert!(report.warnings[0].contains("not git-ignored"));
    assert!(report.warnings[1].contains("relative paths inside"));
}

#[test]
fn fallbacks_reuse_what_is_ours_and_refuse_the_rest() {
    let w = World::new();
    let cfg = &w.cfg;

    // The worktree exists: reused as it is.
    let first = ensure_worktree(cfg, 7).unwrap();
    std::fs::write(first.path.join("wip.txt"), "work in progress").unwrap();
    let again = ensure_worktree(cfg, 7).unwrap();
    assert_eq!(again.origin, Reuse::ExistingWorktree);
    assert!(again.path.join("wip.txt").exists());

    // The branch exists (its worktree is gone): a new worktree on it, its commits kept.
    let sha = first.commit_all("wip").unwrap().unwrap();
    git(
        &w.repo,
        &[
            "worktree",
            "remove",
            "--force",
            first.path.to_str().unwrap(),
        ],
    );
    let third = ensure_worktree(cfg, 7).unwrap();
    assert_eq!(third.origin, Reuse::ExistingBranch);
    assert_eq!(third.head_sha().unwrap(), sha);

    // The directory vanished behind git's back: the stale record is pruned, the branch reused.
    std::fs::remove_dir_all(&third.path).unwrap();
    let fourth = ensure_worktree(cfg, 7).unwrap();
    assert_eq!(fourth.origin, Reuse::ExistingBranch);
    assert!(fourth.path.join("wip.txt").exists());

    // Something else lives at the path: refused, untouched.
    let occupied = cfg.worktree_path(8).unwrap();
    std::fs::create_dir_all(&occupied).unwrap();
    std::fs::write(occupied.join("keep.me"), "mine").unwrap();
    match ensure_worktree(cfg, 8) {
        Err(WorkspaceError::PathOccupied { path, what }) => {
            assert_eq!(path, occupied);
            assert!(what.contains("not a worktree"), "{what}");
        }
        other => panic!("{other:?}"),
    }
    assert!(occupied.join("keep.me").exists());

    // Another worktree of this repository on another branch at the path: refused.
    let elsewhere = cfg.worktree_path(9).unwrap();
    git(
        &w.repo,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "other",
            elsewhere.to_str().unwrap(),
        ],
    );
    assert!(matches!(
        ensure_worktree(cfg, 9),
        Err(WorkspaceError::PathOccupied { .. })
    ));

    // An empty directory is fine.
    std::fs::create_dir_all(cfg.worktree_path(10).unwrap()).unwrap();
    assert_eq!(ensure_worktree(cfg, 10).unwrap().origin, Reuse::Created);

    // The branch is checked out in the main checkout: refused with where.
    git(&w.repo, &["branch", "worktree-git-issue-11"]);
    git(&w.repo, &["checkout", "-q", "worktree-git-issue-11"]);
    assert!(matches!(
        ensure_worktree(cfg, 11),
        Err(WorkspaceError::BranchCheckedOutElsewhere { .. })
    ));

    // Names derived from configuration are validated.
    let bad = WorkspaceConfig {
        branch_prefix: "x/../".into(),
        ..cfg.clone()
    };
    assert!(matches!(
        ensure_worktree(&bad, 1),
        Err(WorkspaceError::UnsafeName { .. })
    ));
    let bad = WorkspaceConfig {
        default_branch: "--upload-pack=x".into(),
        ..cfg.clone()
    };
    assert!(matches!(
        ensure_worktree(&bad, 1),
        Err(WorkspaceError::UnsafeName { .. })
    ));
}

/// A `git worktree add` that a crash or a stop cut short leaves a record without `commondir`, still
/// locked "initializing", and a checkout pointing at it; git then refuses every later add in the
/// repository. The next worktree of that path removes both and is made.
#[test]
fn an_unfinished_worktree_add_is_cleared_before_the_next() {
    let w = World::new();
    let path = w.cfg.worktree_path(26).unwrap();
    let record = w
        .repo
        .join(".git/worktrees")
        .join(path.file_name().unwrap());
    std::fs::create_dir_all(&record).unwrap();
    std::fs::write(record.join("locked"), "initializing\n").unwrap();
    std::fs::write(
        record.join("gitdir"),
        format!("{}\n", path.join(".git").display()),
    )
    .unwrap();
    std::fs::create_dir_all(&path).unwrap();
    std::fs::write(path.join(".git"), format!("gitdir: {}\n", record.display())).unwrap();

    let wt = ensure_worktree(&w.cfg, 26).unwrap();
    assert_eq!(status(&wt), "");
    assert!(record.join("commondir").is_file(), "a finished record");
    assert!(!record.join("locked").exists());
    // And the repository's other adds work.
    ensure_worktree(&w.cfg, 27).unwrap();
}

/// Whether a pull request merges is tried here: a base head in the branch is a fast-forward; a
/// base that moved on is fetched and merged in memory (clean, or a conflict), nothing written;
/// what cannot be known here is `None` (GitHub is asked then).
#[test]
fn whether_a_branch_merges_into_its_base_is_tried_here() {
    let w = World::new();
    let wt = ensure_worktree(&w.cfg, 6).unwrap();
    let base = wt.head_sha().unwrap();
    std::fs::write(wt.path.join("mine.txt"), "mine\n").unwrap();
    wt.commit_all("mine").unwrap().unwrap();
    let head = wt.head_sha().unwrap();
    let none = PushAuth::None;
    assert_eq!(wt.merges_cleanly(&none, &head, &base).unwrap(), Some(true));
    assert_eq!(wt.merges_cleanly(&none, &head, &head).unwrap(), Some(true));
    let upstream = || {
        git(&w.root.join("other"), &["rev-parse", "HEAD"])
            .trim()
            .to_string()
    };
    w.upstream_commit("theirs.txt", "theirs\n");
    let moved = upstream();
    assert_eq!(
        wt.merges_cleanly(&none, &head, &moved).unwrap(),
        Some(true),
        "a base head not here yet is fetched, and merges cleanly"
    );
    w.upstream_commit("mine.txt", "theirs too\n");
    let conflicting = upstream();
    assert_eq!(
        wt.merges_cleanly(&none, &head, &conflicting).unwrap(),
        Some(false)
    );
    assert_eq!(wt.merges_cleanly(&none, &head, "not-a-sha").unwrap(), None);
    assert_eq!(wt.head_sha().unwrap(), head, "nothing was written");
    assert_eq!(status(&wt), "");
}

#[test]
fn merging_the_base_branch() {
    let w = World::new();
    let wt = ensure_worktree(&w.cfg, 5).unwrap();
    assert_eq!(wt.merge_base_branch().unwrap(), MergeOutcome::UpToDate);

    std::fs::write(wt.path.join("mine.txt"), "mine\n").unwrap();
    wt.commit_all("mine").unwrap().unwrap();
    w.upstream_commit("theirs.txt", "theirs\n");
    match wt.merge_base_branch().unwrap() {
        MergeOutcome::Merged { sha } => assert_eq!(wt.head_sha().unwrap(), sha),
        other => panic!("{other:?}"),
    }
    assert!(wt.path.join("theirs.txt").is_file() && wt.path.join("mine.txt").is_file());
    assert_eq!(status(&wt), "");
    assert_eq!(wt.commits_ahead().unwrap(), 2, "mine and the merge commit");

    std::fs::write(wt.path.join("README.md"), "# ours\n").unwrap();
    wt.commit_all("ours").unwrap().unwrap();
    let before = wt.head_sha().unwrap();
    w.upstream_commit("README.md", "# theirs\n");
    assert_eq!(
        wt.merge_base_branch().unwrap(),
        MergeOutcome::Conflicts {
            files: vec!["README.md".into()]
        }
    );
    assert_eq!(
        wt.head_sha().unwrap(),
        before,
        "a conflicting merge changes nothing"
    );
    assert_eq!(status(&wt), "");
    assert_eq!(
        std::fs::read_to_string(wt.path.join("README.md")).unwrap(),
        "# ours\n"
    );
}

#[test]
fn stale_checkpoints_are_pruned_fresh_ones_resume() {
    let w = World::new();
    let wt = ensure_worktree(&w.cfg, 12).unwrap();
    let mut cp = Checkpoint::new("run-12", 12, &wt);
    cp.save(&w.repo).unwrap();
    let loaded = Checkpoint::load(&w.repo, 12).unwrap().unwrap();
    assert!(!loaded.is_stale(chrono::Utc::now()), "fresh: resume");

    cp.updated_at = chrono::Utc::now() - chrono::Duration::minutes(90);
    cp.save(&w.repo).unwrap();
    let loaded = Checkpoint::load(&w.repo, 12).unwrap().unwrap();
    assert!(loaded.is_stale(chrono::Utc::now()));
    prune_stale(&w.cfg, &loaded).unwrap();
    assert!(!wt.path.exists());
    assert!(!w.local_branch_exists(&wt.branch));
    assert_eq!(Checkpoint::load(&w.repo, 12).unwrap(), None);
    // A fresh start works after pruning.
    assert_eq!(ensure_worktree(&w.cfg, 12).unwrap().origin, Reuse::Created);
}

#[test]
fn a_checkpoint_never_points_cleanup_elsewhere() {
    let w = World::new();
    let victim = w.root.join("precious");
    std::fs::create_dir_all(&victim).unwrap();
    std::fs::write(victim.join("data"), "keep").unwrap();
    let wt = ensure_worktree(&w.cfg, 13).unwrap();
    let mut cp = Checkpoint::new("run-13", 13, &wt);
    cp.worktree = victim.clone();
    assert!(matches!(
        prune_stale(&w.cfg, &cp),
        Err(WorkspaceError::Checkpoint { .. })
    ));
    let fake = Worktree {
        path: victim.clone(),
        ..wt.clone()
    };
    assert!(matches!(
        cleanup(&w.cfg, &fake),
        Err(WorkspaceError::RefuseToDelete { .. })
    ));
    assert!(victim.join("data").exists());
}

/// A repository whose main checkout has its npm dependencies installed (one tiny package, no
/// registry needed: npm installs a lockfile without dependencies offline).
fn world_with_installed_dependencies() -> World {
    let w = World::new();
    std::fs::write(
        w.repo.join("package.json"),
        r#"{ "name": "app", "version": "1.0.0" }"#,
    )
    .unwrap();
    std::fs::write(
        w.repo.join("package-lock.json"),
        r#"{ "name": "app", "version": "1.0.0", "lockfileVersion": 3, "requires": true, "packages": { "": { "name": "app", "version": "1.0.0" } } }"#,
    )
    .unwrap();
    git(&w.repo, &["add", "."]);
    git(&w.repo, &["commit", "-qm", "npm"]);
    // What `npm ci` left in the main checkout.
    std::fs::create_dir_all(w.repo.join("node_modules/left-pad")).unwrap();
    std::fs::write(
        w.repo.join("node_modules/.package-lock.json"),
        r#"{ "name": "app", "lockfileVersion": 3, "packages": {} }"#,
    )
    .unwrap();
    std::fs::write(
        w.repo.join("node_modules/left-pad/index.js"),
        "module.exports = 1;\n",
    )
    .unwrap();
    w
}

#[tokio::test]
async fn an_unchanged_lockfile_reuses_the_main_checkouts_dependencies() {
    let w = world_with_installed_dependencies();
    let mut cfg = w.cfg.clone();
    cfg.setup_commands = None;
    let wt = ensure_worktree(&cfg, 7).unwrap();
    let report = setup(&cfg, &wt, &tokio_util::sync::CancellationToken::new()).await;
    let reuse = report
        .steps
        .iter()
        .find(|s| s.what == "reuse the main checkout's node_modules")
        .unwrap_or_else(|| panic!("{report:#?}"));
    assert!(reuse.ok, "{report:#?}");
    // The default `npm ci` from scratch never runs.
    assert!(
        !report.steps.iter().any(|s| s.what == "npm ci"),
        "{report:#?}"
    );
    match report.dependencies {
        // Copy-on-write file systems (btrfs, XFS, APFS…): the worktree has its own copy.
        Some(Dependencies::Cloned) => {
            let copy = wt.path.join("node_modules/left-pad/index.js");
            assert_eq!(
                std::fs::read_to_string(&copy).unwrap(),
                "module.exports = 1;\n"
            );
            std::fs::write(&copy, "module.exports = 2;\n").unwrap();
            assert_eq!(
                std::fs::read_to_string(w.repo.join("node_modules/left-pad/index.js")).unwrap(),
                "module.exports = 1;\n",
                "writing the worktree's copy changed the main checkout"
            );
        }
        // Elsewhere: npm ci from npm's cache, offline first.
        Some(Dependencies::InstalledOffline) => {
            assert!(reuse.detail.contains("no copy-on-write clone"), "{reuse:?}");
            let install = report
                .steps
                .iter()
                .find(|s| s.what.starts_with("npm ci --prefer-offline"))
                .unwrap_or_else(|| panic!("{report:#?}"));
            assert!(install.ok, "{install:?}");
        }
        other => panic!("{other:?}: {report:#?}"),
    }
    // Nothing of it shows in the worktree's status (so nothing reaches a commit).
    assert_eq!(status(&wt), "");
    assert!(report.duration_ms > 0);
}

#[tokio::test]
async fn a_changed_lockfile_installs_afresh_and_setup_commands_still_run() {
    let w = world_with_installed_dependencies();
    // The main checkout's lockfile moved on (uncommitted): the worktree's is not the one installed.
    std::fs::write(
        w.repo.join("package-lock.json"),
        r#"{ "name": "app", "version": "1.0.1", "lockfileVersion": 3, "requires": true, "packages": { "": { "name": "app", "version": "1.0.1" } } }"#,
    )
    .unwrap();
    let mut cfg = w.cfg.clone();
    cfg.setup_commands = None;
    let wt = ensure_worktree(&cfg, 8).unwrap();
    let report = setup(&cfg, &wt, &tokio_util::sync::CancellationToken::new()).await;
    assert_eq!(report.dependencies, Some(Dependencies::SetupCommands));
    assert!(
        report.steps.iter().any(|s| s
            .detail
            .contains("package-lock.json differs from the main checkout's")),
        "{report:#?}"
    );
    assert!(
        report.steps.iter().any(|s| s.what == "npm ci"),
        "{report:#?}"
    );

    // Configured setup commands run whatever happened to the dependencies.
    let mut cfg = w.cfg.clone();
    std::fs::write(
        w.repo.join("package-lock.json"),
        std::fs::read(wt.path.join("package-lock.json")).unwrap(),
    )
    .unwrap();
    cfg.setup_commands = Some(vec![
        "touch node_modules/.setup-ran || touch .setup-ran".into(),
    ]);
    let wt = ensure_worktree(&cfg, 9).unwrap();
    let report = setup(&cfg, &wt, &tokio_util::sync::CancellationToken::new()).await;
    let ran = report
        .steps
        .iter()
        .find(|s| s.what.starts_with("touch"))
        .unwrap_or_else(|| panic!("{report:#?}"));
    assert!(ran.ok, "{report:#?}");
    assert!(
        report
            .steps
            .iter()
            .any(|s| s.what == "reuse the main checkout's node_modules"),
        "{report:#?}"
    );
}

#[tokio::test]
async fn dependencies_that_are_not_git_ignored_are_not_reused() {
    let w = world_with_installed_dependencies();
    std::fs::write(w.repo.join(".gitignore"), ".env\n.pi/git/\n").unwrap();
    git(&w.repo, &["add", ".gitignore"]);
    git(&w.repo, &["commit", "-qm", "track everything"]);
    let mut cfg = w.cfg.clone();
    cfg.setup_commands = Some(Vec::new());
    let wt = ensure_worktree(&cfg, 10).unwrap();
    let report = setup(&cfg, &wt, &tokio_util::sync::CancellationToken::new()).await;
    assert!(!wt.path.join("node_modules").exists());
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.contains("node_modules is not git-ignored")),
        "{report:#?}"
    );
}

/// Nothing of a dependency clone is left beside the worktree.
fn no_staging_beside(wt_path: &Path) {
    let name = wt_path.file_name().unwrap().to_string_lossy().into_owned();
    let left: Vec<String> = std::fs::read_dir(wt_path.parent().unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(&name) && n != &name)
        .collect();
    assert!(
        left.is_empty(),
        "left beside {}: {left:?}",
        wt_path.display()
    );
}

#[tokio::test]
async fn dependencies_are_cloned_while_the_worktree_is_checked_out() {
    let w = world_with_installed_dependencies();
    let mut cfg = w.cfg.clone();
    cfg.setup_commands = None;
    let cancel = tokio_util::sync::CancellationToken::new();
    let (wt, staged) = ensure_worktree_staged(&cfg, 21, &PushAuth::None, &cancel)
        .await
        .unwrap();
    assert_eq!(wt.origin, Reuse::Created);
    // The clone (or the attempt, where the file system cannot clone) ran beside the checkout.
    assert!(staged.is_staged(), "{staged:?}");
    let report = setup_staged(&cfg, &wt, staged, &cancel).await;
    assert!(report.warnings.is_empty(), "{report:#?}");
    match report.dependencies {
        Some(Dependencies::Cloned) => assert_eq!(
            std::fs::read_to_string(wt.path.join("node_modules/left-pad/index.js")).unwrap(),
            "module.exports = 1;\n"
        ),
        Some(Dependencies::InstalledOffline) => assert!(
            report
                .steps
                .iter()
                .any(|s| s.what.starts_with("npm ci --prefer-offline") && s.ok),
            "{report:#?}"
        ),
        other => panic!("{other:?}: {report:#?}"),
    }
    no_staging_beside(&wt.path);
    assert_eq!(status(&wt), "");
    // The same files as git's own checkout of the branch.
    assert_eq!(
        git(&wt.path, &["ls-files", "--stage"]),
        git(&w.repo, &["ls-files", "--stage"])
    );

    // An existing worktree is used as it is: nothing is cloned.
    let (again, staged) = ensure_worktree_staged(&cfg, 21, &PushAuth::None, &cancel)
        .await
        .unwrap();
    assert_eq!(again.origin, Reuse::ExistingWorktree);
    assert!(!staged.is_staged());
}

#[tokio::test]
async fn staged_dependencies_never_outlive_a_refusal_a_failure_or_a_stop() {
    let w = world_with_installed_dependencies();
    let cancel = tokio_util::sync::CancellationToken::new();

    // node_modules is not git-ignored on the branch: what was cloned is thrown away.
    std::fs::write(w.repo.join(".gitignore"), ".env\n.pi/git/\n").unwrap();
    git(&w.repo, &["add", ".gitignore"]);
    git(&w.repo, &["commit", "-qm", "track everything"]);
    let mut cfg = w.cfg.clone();
    cfg.setup_commands = Some(Vec::new());
    let (wt, staged) = ensure_worktree_staged(&cfg, 22, &PushAuth::None, &cancel)
        .await
        .unwrap();
    let report = setup_staged(&cfg, &wt, staged, &cancel).await;
    assert!(!wt.path.join("node_modules").exists(), "{report:#?}");
    no_staging_beside(&wt.path);
    git(&w.repo, &["reset", "-q", "--hard", "HEAD~1"]);

    // The checkout fails (a dangling link holds the path): the clone is removed with it.
    let path = cfg.worktree_path(23).unwrap();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(w.root.join("nowhere"), &path).unwrap();
    let failed = ensure_worktree_staged(&cfg, 23, &PushAuth::None, &cancel).await;
    assert!(failed.is_err(), "{failed:?}");
    assert!(path.symlink_metadata().unwrap().file_type().is_symlink());
    no_staging_beside(&path);

    // A stop while the worktree is made: nothing of the clone stays.
    let stopped = tokio_util::sync::CancellationToken::new();
    stopped.cancel();
    let made = ensure_worktree_staged(&cfg, 24, &PushAuth::None, &stopped).await;
    let path = cfg.worktree_path(24).unwrap();
    no_staging_beside(&path);
    if let Ok((wt, staged)) = made {
        let report = setup_staged(&cfg, &wt, staged, &stopped).await;
        assert!(report.cancelled, "{report:#?}");
        assert!(!wt.path.join("node_modules").exists(), "{report:#?}");
        no_staging_beside(&wt.path);
    }

    // A crash's leftover beside a worktree goes with the worktree's clean-up.
    let (wt, staged) = ensure_worktree_staged(&cfg, 25, &PushAuth::None, &cancel)
        .await
        .unwrap();
    drop(staged);
    let leftover = wt.path.with_file_name(format!(
        ".{}.supervisor-deps",
        wt.path.file_name().unwrap().to_string_lossy()
    ));
    std::fs::create_dir_all(leftover.join("node_modules/x")).unwrap();
    cleanup(&cfg, &wt).unwrap();
    assert!(!leftover.exists());
    assert!(!wt.path.exists());
}

#[test]
fn a_new_worktree_runs_no_hooks_and_keeps_gits_conversions() {
    let w = World::new();
    // A post-checkout hook is the repository's own, not part of supervisor's setup.
    let hook = w.repo.join(".git/hooks/post-checkout");
    std::fs::write(&hook, "#!/bin/sh\ntouch \"$PWD/hook-ran\"\n").unwrap();
    let mut perms = std::fs::metadata(&hook).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&hook, perms).unwrap();
    std::fs::write(w.repo.join(".gitattributes"), "*.crlf eol=crlf\n").unwrap();
    std::fs::write(w.repo.join("a.crlf"), "one\ntwo\n").unwrap();
    git(&w.repo, &["add", "."]);
    git(&w.repo, &["commit", "-qm", "attributes"]);
    let wt = ensure_worktree(&w.cfg, 26).unwrap();
    assert!(!wt.path.join("hook-ran").exists());
    assert_eq!(
        std::fs::read(wt.path.join("a.crlf")).unwrap(),
        b"one\r\ntwo\r\n"
    );
    assert_eq!(status(&wt), "");
}

#[test]
fn a_stale_record_elsewhere_does_not_hold_the_branch() {
    let w = World::new();
    let first = ensure_worktree(&w.cfg, 27).unwrap();
    // The worktree root moved and the old directory was deleted behind git's back.
    std::fs::remove_dir_all(&first.path).unwrap();
    let mut cfg = w.cfg.clone();
    cfg.worktree_root = w.root.join("moved");
    let again = ensure_worktree(&cfg, 27).unwrap();
    assert_eq!(again.origin, Reuse::ExistingBranch);
    assert!(again.path.starts_with(w.root.join("moved")));
    assert!(again.path.join("README.md").is_file());
}

#[test]
fn the_push_probe_sends_nothing_and_names_an_unreachable_remote() {
    let w = World::new();
    push_probe(&w.cfg, &PushAuth::None).unwrap();
    assert_eq!(w.remote_ref("worktree-git-issue-preflight"), None);
    // The destination is the configuration's: the repository's remotes and rewrite rules, which an
    // agent can change, decide nothing.
    git(
        &w.repo,
        &["remote", "set-url", "origin", "elsewhere:gone.git"],
    );
    git(
        &w.repo,
        &[
            "config",
            &format!("url.{}/.insteadOf", w.root.join("nowhere").display()),
            w.remote.to_str().unwrap(),
        ],
    );
    push_probe(&w.cfg, &PushAuth::None).unwrap();
    let gone = w.root.join("gone.git");
    let cfg = WorkspaceConfig {
        push_url: gone.display().to_string(),
        ..w.cfg.clone()
    };
    let err = push_probe(&cfg, &PushAuth::None).unwrap_err().to_string();
    assert!(err.contains("push"), "{err}");
    assert!(err.contains(gone.to_str().unwrap()), "{err}");
}

/// A resume puts the worktree back to a snapshot: changed and deleted files come back, added files
/// go, git-ignored files stay, and neither the branch nor its commits move.
#[test]
fn a_snapshot_is_restored_file_for_file() {
    let w = World::new();
    let wt = ensure_worktree(&w.cfg, 31).unwrap();
    std::fs::write(wt.path.join("kept.txt"), "agent work\n").unwrap();
    let settled = wt.snapshot().unwrap();
    let head = wt.head_sha().unwrap();
    assert_eq!(status(&wt), "?? kept.txt", "a snapshot changes nothing");

    std::fs::write(wt.path.join("README.md"), "# changed later\n").unwrap();
    std::fs::write(wt.path.join("kept.txt"), "overwritten later\n").unwrap();
    std::fs::write(wt.path.join("late.ts"), "late\n").unwrap();
    std::fs::write(wt.path.join(".env"), "IGNORED=1\n").unwrap();
    std::fs::remove_file(wt.path.join(".gitignore")).unwrap();
    std::fs::write(
        wt.path.join(".gitignore"),
        ".env\n.pi/git/\nnode_modules/\n",
    )
    .unwrap();
    assert_eq!(wt.restore(&settled).unwrap(), 3);

    assert_eq!(
        std::fs::read_to_string(wt.path.join("README.md")).unwrap(),
        "# app\n"
    );
    assert_eq!(
        std::fs::read_to_string(wt.path.join("kept.txt")).unwrap(),
        "agent work\n"
    );
    assert!(!wt.path.join("late.ts").exists());
    assert!(wt.path.join(".env").exists(), "ignored files stay");
    assert_eq!(wt.head_sha().unwrap(), head);
    assert_eq!(wt.restore(&settled).unwrap(), 0, "nothing left to undo");
    let committed = wt.commit_and_count("work").unwrap();
    assert!(committed.sha.is_some());
    let files = git(&wt.path, &["show", "--name-only", "--format=", "HEAD"]);
    assert_eq!(files.trim(), "kept.txt");
}

/// A stage limited to test paths: what it changed elsewhere is undone, not committed — a link
/// planted in a file's place is removed, never written through.
#[test]
fn a_commit_within_test_paths_undoes_the_rest() {
    let w = World::new();
    let wt = ensure_worktree(&w.cfg, 3).unwrap();
    let readme = std::fs::read_to_string(wt.path.join("README.md")).unwrap();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("target.txt");
    std::fs::write(&target, "untouched\n").unwrap();
    std::fs::create_dir_all(wt.path.join("tests")).unwrap();
    std::fs::write(wt.path.join("tests/a.test.ts"), "it('x', () => {});\n").unwrap();
    std::fs::write(wt.path.join("src.ts"), "export const x = 1;\n").unwrap();
    std::fs::remove_file(wt.path.join("README.md")).unwrap();
    std::os::unix::fs::symlink(&target, wt.path.join("README.md")).unwrap();
    let mut scope = globset::GlobSetBuilder::new();
    scope.add(globset::Glob::new("tests/**").unwrap());
    let c = wt
        .commit_within("tests for #3", Some(&scope.build().unwrap()))
        .unwrap();
    assert!(c.sha.is_some());
    assert_eq!(
        c.outside,
        vec!["README.md".to_string(), "src.ts".to_string()]
    );
    assert_eq!(
        git(&wt.path, &["show", "--name-only", "--format=", "HEAD"]),
        "tests/a.test.ts"
    );
    assert!(!wt.path.join("src.ts").exists());
    let meta = std::fs::symlink_metadata(wt.path.join("README.md")).unwrap();
    assert!(meta.is_file(), "the link is gone, the file back");
    assert_eq!(
        std::fs::read_to_string(wt.path.join("README.md")).unwrap(),
        readme
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "untouched\n");
    assert_eq!(status(&wt), "");
}

/// A cleanup that a stop cut short — its directory moved aside but its record not yet pruned, or
/// (as earlier versions cleaned up) its record pruned but its directory left — does not block the
/// next worktree of the issue: the next one is made, and the leftover is gone.
#[test]
fn a_cleanup_cut_short_leaves_the_worktrees_path_usable() {
    let w = World::new();
    let wt = ensure_worktree(&w.cfg, 31).unwrap();
    std::fs::write(wt.path.join("work.txt"), "work\n").unwrap();
    // Stopped after the move aside.
    let aside = wt.path.with_file_name(format!(
        "{}.removing",
        wt.path.file_name().unwrap().to_string_lossy()
    ));
    std::fs::rename(&wt.path, &aside).unwrap();
    let again = ensure_worktree(&w.cfg, 31).unwrap();
    assert_eq!(status(&again), "");
    assert!(!aside.exists(), "what was moved aside is removed");

    // Stopped after the record was pruned, with the directory still there.
    std::fs::write(again.path.join("work.txt"), "work\n").unwrap();
    let record = w
        .repo
        .join(".git/worktrees")
        .join(again.path.file_name().unwrap());
    std::fs::remove_dir_all(&record).unwrap();
    let third = ensure_worktree(&w.cfg, 31).unwrap();
    assert_eq!(status(&third), "");
    assert!(!third.path.join("work.txt").exists());

    // A whole cleanup leaves nothing, the moved-aside directory included.
    cleanup(&w.cfg, &third).unwrap();
    assert!(!third.path.exists() && !aside.exists());
    // A directory that is no worktree of this repository is still never taken.
    std::fs::create_dir_all(&third.path).unwrap();
    std::fs::write(third.path.join("mine.txt"), "mine\n").unwrap();
    assert!(matches!(
        ensure_worktree(&w.cfg, 31),
        Err(WorkspaceError::PathOccupied { .. })
    ));
}

/// Worktrees of several issues made at once in one repository (an epic's tasks, a watcher's runs,
/// a reviewer's): `git worktree add` reads every other worktree's record and failed on one another
/// add was still writing; each is made, every time.
#[test]
fn worktrees_made_at_once_are_all_made() {
    let w = World::new();
    for round in 0..3u64 {
        let made: Vec<Result<Worktree, WorkspaceError>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8u64)
                .map(|i| {
                    let cfg = w.cfg.clone();
                    s.spawn(move || ensure_worktree(&cfg, 100 + round * 10 + i))
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (i, wt) in made.into_iter().enumerate() {
            let wt = wt.unwrap_or_else(|e| panic!("round {round}, worktree {i}: {e}"));
            assert_eq!(status(&wt), "");
        }
    }
}

/// A ref's lock file left by a process killed while it updated the ref refused every later update
/// of it: the base could never be fetched again. A lock older than a minute is removed; a fresh
/// one (an update going on) is left alone.
#[test]
fn a_stale_lock_of_the_remote_tracking_ref_does_not_stop_the_fetch() {
    let w = World::new();
    w.upstream_commit("later.txt", "later\n");
    let lock = w.repo.join(".git/refs/remotes/origin/main.lock");
    std::fs::write(&lock, "").unwrap();
    assert!(
        fetch_base(&w.cfg, &PushAuth::None).is_err(),
        "a fresh lock is held"
    );
    assert!(lock.exists());
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(120);
    std::fs::File::options()
        .write(true)
        .open(&lock)
        .unwrap()
        .set_modified(old)
        .unwrap();
    fetch_base(&w.cfg, &PushAuth::None).unwrap();
    assert!(!lock.exists());
    let fetched = git(&w.repo, &["rev-parse", "origin/main"]);
    let upstream = git(&w.root.join("other"), &["rev-parse", "HEAD"]);
    assert_eq!(fetched, upstream);
}

/// An agent that controls a worktree's path plants a symlink there (and one where a cleanup moves
/// a worktree aside) to a directory of its choosing, with a `.git` file naming a record of this
/// repository that is gone: the next worktree of the issue removes the links, never what they
/// point at.
#[test]
fn a_symlink_planted_at_a_worktrees_path_is_removed_not_followed() {
    let w = World::new();
    let path = w.cfg.worktree_path(41).unwrap();
    let victim = w.root.join("victim");
    std::fs::create_dir_all(&victim).unwrap();
    std::fs::write(victim.join("precious.txt"), "keep\n").unwrap();
    let ghost = w.repo.join(".git/worktrees/ghost");
    std::fs::write(
        victim.join(".git"),
        format!("gitdir: {}\n", ghost.display()),
    )
    .unwrap();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(&victim, &path).unwrap();
    let aside = path.with_file_name(format!(
        "{}.removing",
        path.file_name().unwrap().to_string_lossy()
    ));
    std::os::unix::fs::symlink(&victim, &aside).unwrap();
    let wt = ensure_worktree(&w.cfg, 41).unwrap();
    assert_eq!(status(&wt), "");
    assert!(!path.symlink_metadata().unwrap().file_type().is_symlink());
    assert!(
        aside.symlink_metadata().is_err(),
        "the planted link is gone"
    );
    assert_eq!(
        std::fs::read_to_string(victim.join("precious.txt")).unwrap(),
        "keep\n"
    );
}

/// A worktree starts from the fetched default branch when the local one is behind it (pull
/// requests merged since the checkout was last updated: an epic's dependant must see its merged
/// blockers), and from the local one when that has commits of its own.
#[test]
fn a_worktree_starts_from_the_fetched_default_branch_when_the_local_one_is_behind_it() {
    let w = World::new();
    w.upstream_commit("merged.txt", "a blocker's work\n");
    fetch_base(&w.cfg, &PushAuth::None).unwrap();
    let wt = ensure_worktree(&w.cfg, 7).unwrap();
    assert!(
        wt.path.join("merged.txt").exists(),
        "starts from the remote's main, which the local main is behind"
    );
    // A local commit not on the remote: the local main is not behind, it has diverged.
    std::fs::write(w.repo.join("local.txt"), "mine\n").unwrap();
    git(&w.repo, &["add", "local.txt"]);
    git(&w.repo, &["commit", "-qm", "local"]);
    let wt = ensure_worktree(&w.cfg, 8).unwrap();
    assert!(wt.path.join("local.txt").exists());
    assert!(!wt.path.join("merged.txt").exists());
}

/// Fetching a branch an earlier run pushed talks to the remote: it is done before the worktree
/// registry is locked, so that runs beside this one make and remove their worktrees meanwhile.
#[test]
fn a_pushed_branch_is_fetched_without_holding_the_worktree_registry() {
    let w = World::new();
    let branch = "worktree-git-issue-7";
    git(
        &w.repo,
        &["push", "-q", "origin", &format!("HEAD:refs/heads/{branch}")],
    );
    let tracking = format!("refs/remotes/origin/{branch}");
    git(&w.repo, &["update-ref", "-d", &tracking]);
    // Another run making its worktree holds the registry.
    let registry = supervisor::workspace::lock_file(
        &w.repo.join(".git").join("supervisor-worktrees.lock"),
        true,
    )
    .unwrap()
    .unwrap();
    let (fetched, made) = std::thread::scope(|s| {
        let cfg = w.cfg.clone();
        let making =
            s.spawn(move || supervisor::workspace::ensure_worktree_with(&cfg, 7, &PushAuth::None));
        let started = std::time::Instant::now();
        let fetched = loop {
            let repo = git2::Repository::open(&w.repo).unwrap();
            if repo.refname_to_id(&tracking).is_ok() {
                break true;
            }
            if started.elapsed() > std::time::Duration::from_secs(20) {
                break false;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        drop(registry);
        (fetched, making.join().unwrap())
    });
    assert!(
        fetched,
        "the branch was not fetched while the registry was held"
    );
    let wt = made.unwrap();
    assert_eq!(wt.origin, Reuse::RemoteBranch);
    assert_eq!(status(&wt), "");
}
