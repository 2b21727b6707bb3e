//! Shared by the gate tests and the gates benchmark: fixture repositories with a real git history, the
//! pinned tools of `.tools/` on the search path, and gate contexts over them.

#![allow(dead_code)]

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use git2::{Repository, RepositoryInitOptions, Signature};
use supervisor::config::GateSettings;
use supervisor::gates::{ChangeSet, GateContext, GateSession, IssueText, ToolEnv};

pub(crate) fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub(crate) fn fixture_dir(name: &str) -> PathBuf {
    manifest_dir().join("tests/fixtures/gates").join(name)
}

/// The pinned tools (`scripts/install-tools.sh`) first, then the process's PATH — as
/// `scripts/tools-env.sh` sets it up.
pub(crate) fn tools_path() -> OsString {
    let root = manifest_dir();
    let mut dirs = vec![
        root.join(".tools/node/node_modules/.bin"),
        root.join(".tools/venv/bin"),
    ];
    if let Some(path) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&path));
    }
    std::env::join_paths(dirs).expect("PATH entries are joinable")
}

/// PATH without any directory that holds one of `tools` (nor the pinned tool directories).
pub(crate) fn path_without(tools: &[&str]) -> OsString {
    let root = manifest_dir();
    let dirs: Vec<PathBuf> = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .filter(|d| !d.starts_with(root.join(".tools")))
        .filter(|d| !tools.iter().any(|t| d.join(t).exists()))
        .collect();
    std::env::join_paths(dirs).expect("PATH entries are joinable")
}

/// Whether the real tools are installed. Missing tools fail the test in CI and skip it elsewhere.
pub(crate) fn tools_available(tools: &[&str]) -> bool {
    let path = tools_path();
    let missing: Vec<&str> = tools
        .iter()
        .copied()
        .filter(|t| supervisor::gates::find_on_path(t, Some(&path)).is_none())
        .collect();
    if missing.is_empty() {
        return true;
    }
    if std::env::var_os("CI").is_some() {
        panic!(
            "gate tools missing in CI: {} — run scripts/install-tools.sh (scripts/test.sh does)",
            missing.join(", ")
        );
    }
    eprintln!(
        "skipped: {} not installed (run scripts/install-tools.sh)",
        missing.join(", ")
    );
    false
}

/// A repository built from fixtures: `base` committed on `main`, then `feature` checked out.
pub(crate) struct Fixture {
    _tmp: tempfile::TempDir,
    pub dir: PathBuf,
    pub repo: Repository,
}

pub(crate) fn copy_tree(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap_or_else(|e| panic!("{}: {e}", from.display())) {
        let entry = entry.expect("readable fixture entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            std::fs::create_dir_all(&target).expect("create dir");
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy fixture file");
        }
    }
}

fn signature() -> Signature<'static> {
    Signature::now("Gate Tests", "gates@example.com").expect("signature")
}

impl Fixture {
    /// Copy fixture `base` into a fresh repository and commit it on `main`; check out `feature`.
    pub(crate) fn new(base: &str) -> Fixture {
        let tmp = tempfile::tempdir().expect("temp dir");
        let dir = tmp.path().join("repo");
        std::fs::create_dir_all(&dir).expect("repo dir");
        copy_tree(&fixture_dir(base), &dir);
        let mut opts = RepositoryInitOptions::new();
        opts.initial_head("main");
        let repo = Repository::init_opts(&dir, &opts).expect("git init");
        let fixture = Fixture {
            dir: dir.canonicalize().expect("canonical dir"),
            _tmp: tmp,
            repo,
        };
        let base_commit = fixture.commit_all(&format!("Base: {base}"));
        {
            let commit = fixture.repo.find_commit(base_commit).expect("base commit");
            fixture
                .repo
                .branch("feature", &commit, false)
                .expect("create feature branch");
        }
        fixture
            .repo
            .set_head("refs/heads/feature")
            .expect("check out feature");
        fixture
    }

    /// Copy fixture `name` over the working tree (uncommitted).
    pub(crate) fn apply(&self, name: &str) -> &Self {
        copy_tree(&fixture_dir(name), &self.dir);
        self
    }

    pub(crate) fn write(&self, rel: &str, text: &str) -> &Self {
        let path = self.dir.join(rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
        self
    }

    pub(crate) fn remove(&self, rel: &str) -> &Self {
        std::fs::remove_file(self.dir.join(rel)).expect("remove");
        self
    }

    /// Stage everything (deletions included) and commit on the current branch.
    pub(crate) fn commit_all(&self, message: &str) -> git2::Oid {
        let mut index = self.repo.index().expect("index");
        index
            .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
            .expect("add all");
        index.update_all(["*"], None).expect("stage deletions");
        index.write().expect("write index");
        let tree_id = index.write_tree().expect("write tree");
        let tree = self.repo.find_tree(tree_id).expect("tree");
        let parent = self.repo.head().ok().and_then(|h| h.peel_to_commit().ok());
        let parents: Vec<&git2::Commit<'_>> = parent.iter().collect();
        let sig = signature();
        self.repo
            .commit(Some("HEAD"), &sig, &sig, message, &tree, &parents)
            .expect("commit")
    }

    /// A gate context over this checkout against `main`, with the pinned tools on the search path, in
    /// a gate session of its own.
    pub(crate) fn context(&self) -> GateContext {
        let state_dir = self.dir.join(".supervisor/gates");
        let session = GateSession::for_checkout(&self.dir, &state_dir, ToolEnv::base());
        self.context_in(&session)
    }

    /// A gate context over this checkout in `session` (warm servers and caches carry over).
    pub(crate) fn context_in(&self, session: &GateSession) -> GateContext {
        context_for(&self.dir, session)
    }

    pub(crate) fn context_with_issue(&self, number: u64, title: &str, body: &str) -> GateContext {
        let mut ctx = self.context();
        ctx.issue = Some(IssueText {
            number,
            title: title.into(),
            body: body.into(),
        });
        ctx
    }
}

/// A gate context over the checkout at `dir` against `main` in `session`, with the pinned tools on
/// the search path.
pub(crate) fn context_for(dir: &Path, session: &GateSession) -> GateContext {
    GateContext {
        dir: dir.to_path_buf(),
        changes: ChangeSet::compute(dir, "main").expect("change set"),
        issue: None,
        settings: GateSettings {
            tool_timeout_sec: 180,
            ..GateSettings::default()
        },
        ci: None,
        state_dir: dir.join(".supervisor/gates"),
        search_path: Some(tools_path()),
        session: session.clone(),
        proof: None,
    }
}

/// Run a future on a fresh runtime with a time limit, so no test hangs.
pub(crate) fn run_bounded<F: std::future::Future>(secs: u64, fut: F) -> F::Output {
    Runtime::new().run(secs, fut)
}

/// One runtime for several rounds: what a gate session keeps alive (language servers and their
/// readers) lives on the runtime that started it, as in a pipeline run.
pub(crate) struct Runtime(tokio::runtime::Runtime);

impl Runtime {
    pub(crate) fn new() -> Runtime {
        Runtime(
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("runtime"),
        )
    }

    /// Run `fut` with a time limit, so no test hangs.
    pub(crate) fn run<F: std::future::Future>(&self, secs: u64, fut: F) -> F::Output {
        self.0.block_on(async {
            tokio::time::timeout(std::time::Duration::from_secs(secs), fut)
                .await
                .unwrap_or_else(|_| panic!("test did not finish within {secs} s"))
        })
    }
}
