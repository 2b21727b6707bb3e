//! An in-memory world for the engine: GitHub as the sandbox's state (no server), the worktree as a
//! map of files with a list of commits, scripted agents played in-process, gates decided by a rule.
//! The engine under test is the real one (`Machine` + `drive`); only its effects are fake. A run can
//! be made to "crash" at any effect, before or after the effect reaches the world, the way a
//! `kill -9` would leave it.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use supervisor::agent::backend::{Script, ScriptAction};
use supervisor::agent::{AgentRun, ExitReason, Limits, Usage};
use supervisor::config::{GateKind, Hook};
use supervisor::demo::WorldSpec;
use supervisor::gates::{GateReport, GateStatus, IssueText};
use supervisor::github::{
    Blocker, BlockerKind, BoardItem, ColumnOption, Comment, ConversationComment, Editors, Feedback,
    GitHubError, Issue, IssueState, Marker, PullRequest, PullState, Review, ReviewComment,
    ReviewState, ReviewThread, body_blockers,
};
use supervisor::ids::{IssueNumber, PrNumber};
use supervisor::pipeline::decide::admission::sealed_epic;
use supervisor::pipeline::{
    Cleanup, CommitResult, Context, Dispatch, EffectError, Effects, Entry, EpicParent, ErrorClass,
    Event, GateFeed, Journal, Machine, PrRequest, Progress, Project, RunError, RunOptions,
    RunSummary, Text, ThreadAnswer, UserText, WorktreeInfo, drive, read_entries, runs_dir,
};
use supervisor::report;
use supervisor::sandbox::{
    CommentSeed, IssueSeed, PullSeed, ReviewCommentSeed, SandboxState, SeedState,
};
use supervisor::workspace::{MergeOutcome, Reuse};
use tokio_util::sync::CancellationToken;

/// The fake repository: the base branch, the worktree's files and commits, the remote.
#[derive(Debug, Clone, Default)]
pub(crate) struct Repo {
    pub base: BTreeMap<String, String>,
    /// The worktree's files, when it exists.
    pub files: Option<BTreeMap<String, String>>,
    /// The branch's commits beyond the base: (sha, files).
    pub commits: Vec<(String, BTreeMap<String, String>)>,
    /// The branch on the remote: its commits' shas.
    pub remote: Vec<String>,
    pub push_fails: Option<String>,
    /// The base moved since the branch was made: merging it conflicts in these files (empty: merges cleanly).
    pub base_moved: Option<Vec<String>>,
    next_sha: u64,
}

impl Repo {
    fn head(&self) -> String {
        self.commits
            .last()
            .map(|c| c.0.clone())
            .unwrap_or_else(|| "base".into())
    }

    fn tree(&self) -> BTreeMap<String, String> {
        self.commits
            .last()
            .map(|c| c.1.clone())
            .unwrap_or_else(|| self.base.clone())
    }

    fn commit(&mut self) -> Option<String> {
        let files = self.files.clone()?;
        if files == self.tree() {
            return None;
        }
        self.next_sha += 1;
        let sha = format!("{:040x}", self.next_sha);
        self.commits.push((sha.clone(), files));
        Some(sha)
    }

    /// Files on the remote branch.
    pub(crate) fn remote_files(&self) -> Vec<String> {
        self.commits
            .iter()
            .rev()
            .find(|(sha, _)| self.remote.contains(sha))
            .map(|(_, files)| files.keys().cloned().collect())
            .unwrap_or_default()
    }
}

/// Where a crash happens: the nth effect (from 0), before or after it reaches the world.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Crash {
    pub at: usize,
    pub after: bool,
}

/// How gates answer.
pub(crate) type GateRule =
    Arc<dyn Fn(&Hook, &BTreeMap<String, String>) -> GateReport + Send + Sync>;

/// GitHub answers that fail, by operation name (`post`, `move`, `pr`, …): the next N calls.
pub(crate) type Failures = BTreeMap<&'static str, (u32, String)>;

/// Every gate passes.
pub(crate) fn passing() -> GateRule {
    Arc::new(|hook, _| report(hook, GateStatus::Pass))
}

pub(crate) fn report(hook: &Hook, status: GateStatus) -> GateReport {
    GateReport {
        duration_ms: 1,
        required: hook.required,
        summary: "fake gate".into(),
        ..GateReport::new(hook.gate, hook.name.clone(), status)
    }
}

/// The world and everything runs leave in it.
pub(crate) struct FakeWorld {
    pub dir: tempfile::TempDir,
    pub root: PathBuf,
    pub spec: WorldSpec,
    pub github: Arc<Mutex<SandboxState>>,
    pub repo: Arc<Mutex<Repo>>,
    pub script: Script,
    pub gates: GateRule,
    pub failures: Arc<Mutex<Failures>>,
    /// (file name, text) of every task given to an agent.
    pub prompts: Arc<Mutex<Vec<(String, String)>>>,
    /// The live run, as a checkpoint would name it.
    pub live_run: Arc<Mutex<Option<String>>>,
    /// Effects performed, across runs, by name.
    pub effects: Arc<Mutex<Vec<String>>>,
    /// Dispatches per role whose answer reached the engine: a script's attempts are played in
    /// that order, so a dispatch lost to a crash is played again as it was.
    pub played: Arc<Mutex<BTreeMap<String, u32>>>,
    /// Every live view of the runs' progress, in order.
    pub progress: Arc<Mutex<Vec<Progress>>>,
    runs: u32,
}

/// How one run ended.
pub(crate) struct Ran {
    pub result: Option<Result<RunSummary, RunError>>,
}

impl Ran {
    pub(crate) fn summary(&self) -> &RunSummary {
        match &self.result {
            Some(Ok(s)) => s,
            Some(Err(e)) => panic!("the run failed: {e}"),
            None => panic!("the run crashed"),
        }
    }

    pub(crate) fn code(&self) -> u8 {
        match &self.result {
            Some(Ok(s)) => s.end.exit_code(),
            Some(Err(e)) => e.exit_code(),
            None => 137,
        }
    }
}

impl FakeWorld {
    pub(crate) fn new(spec: WorldSpec) -> FakeWorld {
        // The journal syncs every event to disk; in memory-backed storage that costs nothing.
        let shm = Path::new("/dev/shm");
        let dir = if shm.is_dir() {
            tempfile::tempdir_in(shm)
        } else {
            tempfile::tempdir()
        }
        .expect("temp dir");
        let root = dir.path().to_path_buf();
        let script_path = root.join("agents.json");
        std::fs::write(&script_path, serde_json::to_string(&spec.script).unwrap()).unwrap();
        let block = spec.settings_block(
            &script_path,
            &root.join("worktrees"),
            &root.join("remote.git"),
        );
        let settings = serde_json::json!({ "supervisor": Value::Object(block) });
        std::fs::create_dir_all(root.join(".pi")).unwrap();
        std::fs::write(root.join(".pi/settings.json"), settings.to_string()).unwrap();
        if let Some(wf) = &spec.workflow {
            std::fs::create_dir_all(root.join(".supervisor")).unwrap();
            std::fs::write(root.join(".supervisor/workflow.json"), wf.to_string()).unwrap();
        }
        let script = Script::parse(&spec.script.to_string(), true).expect("script parses");
        let repo = Repo {
            base: spec.files.iter().cloned().collect(),
            ..Repo::default()
        };
        FakeWorld {
            github: Arc::new(Mutex::new({
                let mut state = spec.sandbox_state(None);
                state.normalize().expect("the world's seed is valid");
                state
            })),
            repo: Arc::new(Mutex::new(repo)),
            script,
            gates: passing(),
            failures: Arc::default(),
            prompts: Arc::default(),
            live_run: Arc::default(),
            effects: Arc::default(),
            played: Arc::default(),
            progress: Arc::default(),
            runs: 0,
            dir,
            root,
            spec,
        }
    }

    pub(crate) fn project(&self) -> Arc<Project> {
        Arc::new(Project::load(&self.root, &|_| None).expect("the fake project loads"))
    }

    /// Run the issue to its end (or to the crash point).
    pub(crate) async fn run(&mut self, crash: Option<Crash>) -> Ran {
        self.run_with(crash, RunOptions::default(), CancellationToken::new())
            .await
    }

    pub(crate) async fn run_with(
        &mut self,
        crash: Option<Crash>,
        mut opts: RunOptions,
        cancel: CancellationToken,
    ) -> Ran {
        opts.issue = IssueNumber::new(self.spec.issue.number);
        self.runs += 1;
        let project = self.project();
        let live = self.live_run.lock().unwrap().clone();
        let run_id = live.unwrap_or_else(|| format!("{}-run{}", opts.issue, self.runs));
        let mut journal = if opts.dry_run {
            Journal::in_memory()
        } else {
            Journal::open(&self.root, &run_id).expect("journal opens")
        };
        let mut machine = Machine::new(
            project.clone(),
            opts,
            supervisor::ids::RunId::new(run_id.clone()),
            journal.entries(),
        );
        let crashed = Arc::new(tokio::sync::Notify::new());
        let mut fx = FakeEffects {
            project,
            world: self.handles(),
            run_id,
            crash,
            performed: 0,
            crashed: crashed.clone(),
        };
        let result = tokio::select! {
            r = drive(&mut machine, &mut fx, &mut journal, &cancel) => Some(r),
            _ = crashed.notified() => None,
        };
        Ran { result }
    }

    fn handles(&self) -> Handles {
        Handles {
            github: self.github.clone(),
            repo: self.repo.clone(),
            script: self.script.clone(),
            gates: self.gates.clone(),
            failures: self.failures.clone(),
            prompts: self.prompts.clone(),
            live_run: self.live_run.clone(),
            effects: self.effects.clone(),
            played: self.played.clone(),
            progress: self.progress.clone(),
            bot: self.spec.bot.clone(),
            issue: self.spec.issue.number,
        }
    }

    /// Fail the next `n` calls of GitHub operation `op` with `message`.
    pub(crate) fn fail(&self, op: &'static str, n: u32, message: &str) {
        self.failures
            .lock()
            .unwrap()
            .insert(op, (n, message.to_string()));
    }

    pub(crate) fn with_state<R>(&self, f: impl FnOnce(&mut SandboxState) -> R) -> R {
        f(&mut self.github.lock().unwrap())
    }

    pub(crate) fn comments(&self) -> Vec<(String, String)> {
        self.with_state(|s| {
            s.comments_of(self.spec.issue.number)
                .iter()
                .map(|c| (c.author.clone(), c.body.clone()))
                .collect()
        })
    }

    /// The first line of each comment supervisor posted.
    pub(crate) fn posted_headings(&self) -> Vec<String> {
        self.comments()
            .into_iter()
            .filter(|(a, _)| *a == self.spec.bot)
            .map(|(_, b)| {
                b.lines()
                    .find(|l| !l.trim().is_empty() && !l.starts_with('>'))
                    .unwrap_or("")
                    .to_string()
            })
            .collect()
    }

    pub(crate) fn column(&self) -> Option<String> {
        self.with_state(|s| s.column_of(self.spec.issue.number).map(String::from))
    }

    pub(crate) fn pulls(&self) -> Vec<(String, String, String)> {
        self.with_state(|s| {
            s.pulls()
                .iter()
                .map(|p| (p.head.clone(), p.title.clone(), p.body.clone()))
                .collect()
        })
    }

    pub(crate) fn issue_state(&self) -> SeedState {
        self.with_state(|s| s.issue(self.spec.issue.number).unwrap().state)
    }

    pub(crate) fn journal(&self) -> Vec<Entry> {
        let Ok(dirs) = std::fs::read_dir(runs_dir(&self.root)) else {
            return Vec::new();
        };
        let mut dirs: Vec<PathBuf> = dirs
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect();
        dirs.sort();
        dirs.iter()
            .flat_map(|d| read_entries(&d.join("events.jsonl")).unwrap())
            .collect()
    }

    pub(crate) fn run_count(&self) -> usize {
        std::fs::read_dir(runs_dir(&self.root))
            .map(|d| d.flatten().filter(|e| e.path().is_dir()).count())
            .unwrap_or(0)
    }

    pub(crate) fn starts(&self, stage: &str) -> usize {
        self.journal()
            .iter()
            .filter(|e| matches!(&e.event, Event::StageStarted { stage: s, .. } if s == stage))
            .count()
    }

    pub(crate) fn prompt(&self, name: &str) -> String {
        let prompts = self.prompts.lock().unwrap();
        prompts
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t.clone())
            .unwrap_or_else(|| {
                panic!(
                    "no prompt {name}; have {:?}",
                    prompts.iter().map(|p| &p.0).collect::<Vec<_>>()
                )
            })
    }

    pub(crate) fn all_prompts(&self) -> Vec<(String, String)> {
        self.prompts.lock().unwrap().clone()
    }

    pub(crate) fn worktree_exists(&self) -> bool {
        self.repo.lock().unwrap().files.is_some()
    }
}

/// What the effects of one run share with the world.
#[derive(Clone)]
struct Handles {
    github: Arc<Mutex<SandboxState>>,
    repo: Arc<Mutex<Repo>>,
    script: Script,
    gates: GateRule,
    failures: Arc<Mutex<Failures>>,
    prompts: Arc<Mutex<Vec<(String, String)>>>,
    live_run: Arc<Mutex<Option<String>>>,
    effects: Arc<Mutex<Vec<String>>>,
    played: Arc<Mutex<BTreeMap<String, u32>>>,
    progress: Arc<Mutex<Vec<Progress>>>,
    bot: String,
    issue: u64,
}

pub(crate) struct FakeEffects {
    project: Arc<Project>,
    world: Handles,
    run_id: String,
    crash: Option<Crash>,
    performed: usize,
    crashed: Arc<tokio::sync::Notify>,
}

impl FakeEffects {
    /// Count an effect; hang (the process "dies") at the crash point before it acts.
    async fn enter(&mut self, name: &str) {
        self.world.effects.lock().unwrap().push(name.to_string());
        if self.crash
            == Some(Crash {
                at: self.performed,
                after: false,
            })
        {
            self.die().await;
        }
    }

    /// After the effect acted: hang at an "after" crash point.
    async fn leave(&mut self) {
        let here = self.performed;
        self.performed += 1;
        if self.crash
            == Some(Crash {
                at: here,
                after: true,
            })
        {
            self.die().await;
        }
    }

    async fn die(&self) {
        self.crashed.notify_one();
        std::future::pending::<()>().await;
    }

    fn failure(&self, op: &'static str) -> Option<String> {
        let mut failures = self.world.failures.lock().unwrap();
        let (n, message) = failures.get_mut(op)?;
        if *n == 0 {
            return None;
        }
        *n -= 1;
        Some(message.clone())
    }

    fn state(&self) -> std::sync::MutexGuard<'_, SandboxState> {
        self.world.github.lock().unwrap()
    }

    fn board_item(&self, s: &SandboxState, issue: u64) -> Option<BoardItem> {
        let board = s.board.as_ref()?;
        let column = board.items.get(&issue)?.clone();
        Some(BoardItem {
            issue,
            project_id: "PVT_fake".into(),
            project_number: board.number,
            item_id: format!("PVTI_{issue}"),
            field_id: "PVTSSF_status".into(),
            field_name: board.status_field.clone(),
            options: board
                .options
                .iter()
                .map(|o| ColumnOption {
                    id: o.clone(),
                    name: o.clone(),
                })
                .collect(),
            column: column.map(supervisor::ids::BoardOption::new),
        })
    }

    fn post_comment(&self, issue: u64, marker: &Marker, text: &Text) -> (Comment, bool) {
        let mut s = self.state();
        let bot = self.world.bot.clone();
        let existing = s
            .comments_of(issue)
            .iter()
            .find(|c| c.author == bot && marker.is_in(&c.body))
            .cloned();
        if let Some(c) = existing {
            return (comment(&c), false);
        }
        let id = next_id(&s);
        let seed = CommentSeed {
            id,
            author: bot,
            body: marker.stamp(&report::comment_text(text)),
            editor: None,
            created_at: Some(chrono::Utc::now()),
            updated_at: None,
        };
        s.comments_mut(issue).unwrap().push(seed.clone());
        (comment(&seed), true)
    }
}

/// A fresh id for a comment, review or review comment.
fn next_id(s: &SandboxState) -> u64 {
    let issues = s
        .issues
        .iter()
        .flat_map(|i| i.comments.iter().map(|c| c.id));
    let pulls = s.pulls.iter().flat_map(|p| {
        p.comments
            .iter()
            .map(|c| c.id)
            .chain(p.reviews.iter().map(|r| r.id))
            .chain(p.review_comments.iter().map(|c| c.id))
    });
    issues.chain(pulls).max().unwrap_or(0).max(5000) + 1
}

/// What GitHub's GraphQL API would answer about pull request `p`.
fn feedback_of(p: &PullSeed, head_sha: String) -> Feedback {
    let threads = p
        .review_comments
        .iter()
        .filter(|c| c.in_reply_to.is_none())
        .map(|root| ReviewThread {
            id: format!("PRRT_{}", root.id),
            resolved: root.resolved_by.is_some(),
            path: root.path.clone(),
            line: root.line,
            comments: p
                .thread(root.id)
                .into_iter()
                .map(|c| ReviewComment {
                    id: c.id,
                    author: c.author.clone(),
                    editor: c.editor.clone(),
                    body: c.body.clone(),
                    path: c.path.clone(),
                    line: c.line,
                    diff_hunk: c.diff_hunk.clone(),
                    created_at: c.created_at,
                })
                .collect(),
        })
        .collect();
    Feedback {
        number: p.number,
        url: format!("https://github.invalid/pull/{}", p.number),
        state: match (p.merged, p.state) {
            (true, _) => PullState::Merged,
            (false, SeedState::Closed) => PullState::Closed,
            (false, SeedState::Open) => PullState::Open,
        },
        head: p.head.clone(),
        head_sha,
        base: p.base.clone(),
        body: p.body.clone(),
        author: p.author.clone(),
        body_editor: p.editor.clone(),
        created_at: p.created_at,
        reviews: p
            .reviews
            .iter()
            .map(|r| Review {
                id: r.id,
                state: serde_json::from_value(Value::String(r.state.clone()))
                    .unwrap_or(ReviewState::Unknown),
                body: r.body.clone(),
                author: r.author.clone(),
                editor: r.editor.clone(),
                submitted_at: r.submitted_at,
            })
            .collect(),
        threads,
        conversation: p
            .comments
            .iter()
            .map(|c| ConversationComment {
                id: c.id,
                author: c.author.clone(),
                editor: c.editor.clone(),
                body: c.body.clone(),
                created_at: c.created_at,
                url: String::new(),
            })
            .collect(),
        left_out: Vec::new(),
    }
}

fn comment(c: &CommentSeed) -> Comment {
    Comment {
        id: c.id,
        author: c.author.clone(),
        body: c.body.clone(),
        created_at: c.created_at.unwrap_or_else(chrono::Utc::now),
        html_url: format!("https://github.invalid/comments/{}", c.id),
    }
}

/// A failure of the fake world as an effect's: something running again may get past.
fn transient(message: String) -> EffectError {
    EffectError::new(ErrorClass::Transient, message)
}

fn github_error(message: String) -> RunError {
    RunError::GitHub(GitHubError::Api {
        status: 502,
        message,
        route: "fake".into(),
        documentation_url: None,
    })
}

/// The issue as GitHub gives it.
fn issue_of(i: &IssueSeed) -> Issue {
    let number = i.number;
    Issue {
        id: 0,
        number,
        node_id: format!("I_{number}"),
        title: i.title.clone(),
        body: i.body.clone(),
        author: i.author.clone(),
        labels: i.labels.clone(),
        state: if i.state == SeedState::Closed {
            IssueState::Closed
        } else {
            IssueState::Open
        },
        html_url: format!("https://github.invalid/issues/{number}"),
        is_pull_request: false,
        comments: Some(i.comments.len() as u64),
        blocked_by_total: Some(i.blocked_by.len() as u64),
    }
}

impl Effects for FakeEffects {
    async fn fetch_issue(&mut self, number: IssueNumber) -> Result<Issue, RunError> {
        let number = number.get();
        self.enter("fetch-issue").await;
        if let Some(m) = self.failure("issue") {
            return Err(github_error(m));
        }
        let issue = {
            let s = self.state();
            let i = s.issue(number).ok_or_else(|| {
                RunError::GitHub(GitHubError::IssueNotFound {
                    number,
                    repo: self.project.settings.repo.clone(),
                })
            })?;
            issue_of(i)
        };
        self.leave().await;
        Ok(issue)
    }

    async fn fetch_context(&mut self, issue: &Issue) -> Result<Context, RunError> {
        self.enter("fetch-context").await;
        let ctx = {
            let s = self.state();
            let seed = s.issue(issue.number).unwrap();
            let mut blockers: Vec<u64> = seed.blocked_by.clone();
            blockers.extend(body_blockers(&issue.body, &self.project.settings.repo));
            let blockers = blockers
                .into_iter()
                .filter_map(|n| s.issue(n).filter(|b| b.state == SeedState::Open))
                .map(|b| Blocker {
                    number: b.number,
                    title: b.title.clone(),
                    state: IssueState::Open,
                    kind: BlockerKind::Native,
                    url: String::new(),
                })
                .collect();
            let comments: Vec<Comment> = seed.comments.iter().map(comment).collect();
            let editors = Editors {
                issue: seed.editor.clone(),
                comments: seed
                    .comments
                    .iter()
                    .filter_map(|c| c.editor.clone().map(|e| (c.id, e)))
                    .collect(),
                checked: seed.comments.iter().map(|c| c.id).collect(),
                renames: seed
                    .renames
                    .iter()
                    .map(|r| supervisor::github::TitleRename {
                        actor: r.actor.clone(),
                        from: r.from.clone(),
                        to: r.to.clone(),
                    })
                    .collect(),
                renames_truncated: false,
            };
            Context {
                board: self.board_item(&s, issue.number),
                blockers,
                comments,
                editors,
                viewer: Some(self.world.bot.clone()),
                epic: sealed_epic(&self.project.settings, issue)
                    .and_then(|_| s.issue(s.parent_of(issue.number)?))
                    .map(|e| {
                        let e = issue_of(e);
                        EpicParent {
                            number: e.number,
                            author: e.author,
                            labels: e.labels,
                            state: e.state,
                        }
                    }),
            }
        };
        self.leave().await;
        Ok(ctx)
    }

    async fn add_to_board(&mut self, issue: &Issue) -> Result<BoardItem, RunError> {
        self.enter("add-to-board").await;
        let item = {
            let mut s = self.state();
            s.board.as_mut().unwrap().items.insert(issue.number, None);
            self.board_item(&s, issue.number).unwrap()
        };
        self.leave().await;
        Ok(item)
    }

    async fn post(
        &mut self,
        issue: u64,
        marker: &Marker,
        text: &Text,
    ) -> Result<(Comment, bool), EffectError> {
        self.enter("post").await;
        if let Some(m) = self.failure("post") {
            return Err(transient(m));
        }
        let posted = self.post_comment(issue, marker, text);
        self.leave().await;
        Ok(posted)
    }

    async fn move_card(
        &mut self,
        board: &BoardItem,
        column: &supervisor::config::StageId,
    ) -> Result<(), RunError> {
        self.enter("move").await;
        if let Some(m) = self.failure("move") {
            return Err(github_error(m));
        }
        self.state()
            .board
            .as_mut()
            .unwrap()
            .items
            .insert(board.issue, Some(column.to_string()));
        self.leave().await;
        Ok(())
    }

    async fn close_issue(
        &mut self,
        issue: u64,
        marker: &Marker,
        text: &Text,
    ) -> Result<(), RunError> {
        self.enter("close").await;
        self.post_comment(issue, marker, text);
        self.state().issue_mut(issue).unwrap().state = SeedState::Closed;
        self.leave().await;
        Ok(())
    }

    async fn open_pull_request(
        &mut self,
        pr: &PrRequest,
    ) -> Result<(PullRequest, bool), EffectError> {
        self.enter("pr").await;
        if let Some(m) = self.failure("pr") {
            return Err(transient(m));
        }
        let (title, body) = report::pull_request_text(pr);
        let (seed, created) = {
            let mut s = self.state();
            match s.pulls().iter().find(|p| p.head == pr.head).cloned() {
                Some(p) => (p, false),
                None => {
                    let mut seed = PullSeed::new(
                        100 + s.pulls().len() as u64,
                        &pr.head,
                        &pr.base,
                        &title,
                        &body,
                        &self.world.bot,
                    );
                    seed.draft = pr.draft;
                    s.pulls.push(seed.clone());
                    (seed, true)
                }
            }
        };
        self.leave().await;
        Ok((
            PullRequest {
                number: seed.number,
                html_url: format!("https://github.invalid/pull/{}", seed.number),
                state: "open".into(),
                head: seed.head,
                head_sha: String::new(),
                base: seed.base,
                base_sha: String::new(),
                title: seed.title,
                body: seed.body,
                draft: seed.draft,
                merged: false,
                mergeable: None,
                mergeable_state: None,
            },
            created,
        ))
    }

    async fn mergeable(&mut self, _number: u64) -> Result<Option<bool>, EffectError> {
        self.enter("mergeable").await;
        let conflicts = self.world.repo.lock().unwrap().base_moved.clone();
        self.leave().await;
        Ok(Some(conflicts.is_none_or(|files| files.is_empty())))
    }

    async fn prepare_worktree(
        &mut self,
        _cancel: &CancellationToken,
    ) -> Result<(WorktreeInfo, Vec<String>), RunError> {
        self.enter("worktree").await;
        let reused = {
            let mut repo = self.world.repo.lock().unwrap();
            let reused = if repo.files.is_some() {
                Reuse::ExistingWorktree
            } else {
                repo.files = Some(repo.tree());
                Reuse::Created
            };
            *self.world.live_run.lock().unwrap() = Some(self.run_id.clone());
            reused
        };
        self.leave().await;
        Ok((
            WorktreeInfo {
                path: "/fake/worktree".into(),
                branch: format!("worktree-git-issue-{}", self.world.issue),
                base: "main".into(),
                reused,
            },
            Vec::new(),
        ))
    }

    async fn commit(
        &mut self,
        _message: &str,
        _scope: Option<&[String]>,
    ) -> Result<CommitResult, EffectError> {
        self.enter("commit").await;
        let result = {
            let mut repo = self.world.repo.lock().unwrap();
            let sha = repo.commit();
            CommitResult {
                sha: sha.map(supervisor::ids::CommitSha::new),
                ahead: repo.commits.len() as u32,
                head: supervisor::ids::CommitSha::new(repo.head()),
                outside: Vec::new(),
            }
        };
        self.leave().await;
        Ok(result)
    }

    async fn push(&mut self) -> Result<supervisor::ids::CommitSha, EffectError> {
        self.enter("push").await;
        let result = {
            let mut repo = self.world.repo.lock().unwrap();
            match repo.push_fails.clone() {
                Some(e) => Err(transient(e)),
                None => {
                    repo.remote = repo.commits.iter().map(|c| c.0.clone()).collect();
                    Ok(supervisor::ids::CommitSha::new(repo.head()))
                }
            }
        };
        self.leave().await;
        result
    }

    async fn undo_commit(&mut self) -> Result<(), EffectError> {
        self.enter("undo").await;
        self.world.repo.lock().unwrap().commits.pop();
        self.leave().await;
        Ok(())
    }

    async fn merge_base(&mut self) -> Result<MergeOutcome, EffectError> {
        self.enter("merge").await;
        let outcome = match self.world.repo.lock().unwrap().base_moved.clone() {
            Some(files) if !files.is_empty() => MergeOutcome::Conflicts { files },
            _ => MergeOutcome::UpToDate,
        };
        self.leave().await;
        Ok(outcome)
    }

    async fn cleanup(&mut self, how: Cleanup) -> Vec<String> {
        self.enter("cleanup").await;
        let mut warnings = Vec::new();
        {
            let mut repo = self.world.repo.lock().unwrap();
            let unpushed = repo
                .commits
                .last()
                .is_some_and(|(sha, _)| !repo.remote.contains(sha));
            if repo.files.is_some() {
                if how.keep_worktree || unpushed {
                    warnings.push("keeping the worktree /fake/worktree".into());
                } else {
                    repo.files = None;
                }
            }
            if !how.keep_checkpoint {
                *self.world.live_run.lock().unwrap() = None;
            }
        }
        self.leave().await;
        warnings
    }

    async fn dispatch(&mut self, d: &Dispatch, cancel: &CancellationToken) -> AgentRun {
        self.enter("dispatch").await;
        let task = report::task_text(&self.project.workflow, d);
        self.world
            .prompts
            .lock()
            .unwrap()
            .push((format!("{}-{}.md", d.stage, d.attempt), task));
        let nth = self
            .world
            .played
            .lock()
            .unwrap()
            .get(&d.agent)
            .copied()
            .unwrap_or(0)
            + 1;
        let run = play(
            &self.project,
            &self.world.script,
            d,
            nth,
            &self.world.repo,
            cancel,
        )
        .await;
        self.leave().await;
        *self
            .world
            .played
            .lock()
            .unwrap()
            .entry(d.agent.clone())
            .or_default() += 1;
        run
    }

    async fn fetch_feedback(
        &mut self,
        pr: PrNumber,
    ) -> Result<(Feedback, Option<String>), RunError> {
        let pr = pr.get();
        self.enter("fetch-feedback").await;
        if let Some(m) = self.failure("feedback") {
            return Err(github_error(m));
        }
        let head = {
            let repo = self.world.repo.lock().unwrap();
            repo.remote.last().cloned().unwrap_or_else(|| "base".into())
        };
        let fb = {
            let s = self.state();
            let p = s.pull(pr).ok_or_else(|| {
                RunError::GitHub(GitHubError::PullNotFound {
                    number: pr,
                    repo: self.project.settings.repo.clone(),
                })
            })?;
            feedback_of(p, head)
        };
        self.leave().await;
        Ok((fb, Some(self.world.bot.clone())))
    }

    async fn prepare_revision(
        &mut self,
        _head: &str,
        ours: Option<&str>,
        cancel: &CancellationToken,
    ) -> Result<Result<(WorktreeInfo, Vec<String>), UserText>, RunError> {
        let held = {
            let repo = self.world.repo.lock().unwrap();
            ours.is_none_or(|sha| repo.remote.iter().any(|r| r == sha))
        };
        if !held {
            self.enter("worktree").await;
            self.leave().await;
            return Ok(Err(UserText::ours(format!(
                "the branch no longer holds {}, the commit supervisor last pushed: it was force-pushed by someone else",
                ours.unwrap_or_default()
            ))));
        }
        self.prepare_worktree(cancel).await.map(Ok)
    }

    async fn answer_thread(&mut self, pr: u64, a: &ThreadAnswer) -> Result<bool, EffectError> {
        let (thread, reply_to, marker, text, resolve, replied) = (
            &a.thread, a.reply_to, &a.marker, &a.text, a.resolve, a.replied,
        );
        self.enter("answer").await;
        if let Some(m) = self.failure("answer") {
            return Err(transient(m));
        }
        {
            let mut s = self.state();
            let id = next_id(&s);
            let bot = self.world.bot.clone();
            let p = s
                .pull_mut(pr)
                .ok_or_else(|| transient("no such pull request".into()))?;
            let root: u64 = thread
                .strip_prefix("PRRT_")
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| transient("no such thread".into()))?;
            if !replied {
                let first = p
                    .thread_root(reply_to)
                    .cloned()
                    .ok_or_else(|| transient("no such comment".into()))?;
                p.review_comments.push(ReviewCommentSeed {
                    id,
                    review_id: None,
                    author: bot.clone(),
                    body: marker.stamp(&report::comment_text(text)),
                    in_reply_to: Some(first.id),
                    editor: None,
                    created_at: Some(chrono::Utc::now()),
                    resolved_by: None,
                    ..first
                });
            }
            if resolve {
                if let Some(c) = p.review_comments.iter_mut().find(|c| c.id == root) {
                    c.resolved_by = Some(bot);
                }
            }
        }
        self.leave().await;
        Ok(resolve)
    }

    async fn update_pull_body(
        &mut self,
        number: u64,
        request: &PrRequest,
    ) -> Result<(), EffectError> {
        self.enter("pr-body").await;
        if let Some(m) = self.failure("pr-body") {
            return Err(transient(m));
        }
        let (_, body) = report::pull_request_text(request);
        {
            let mut s = self.state();
            let bot = self.world.bot.clone();
            let p = s
                .pull_mut(number)
                .ok_or_else(|| transient("no such pull request".into()))?;
            p.body = body;
            p.editor = Some(bot);
        }
        self.leave().await;
        Ok(())
    }

    async fn run_gates(
        &mut self,
        hooks: &[Hook],
        _issue: &IssueText,
        _proof: Option<supervisor::verify::ProofInput>,
        finished: GateFeed,
        _cancel: &CancellationToken,
    ) -> Vec<GateReport> {
        self.enter("gates").await;
        let files = self
            .world
            .repo
            .lock()
            .unwrap()
            .files
            .clone()
            .unwrap_or_default();
        let reports: Vec<GateReport> = hooks
            .iter()
            .map(|h| (self.world.gates)(h, &files))
            .collect();
        // The last gate is told first, as a slow first gate would leave it; the others are left
        // to the engine to journal when the round ends.
        if let Some(last) = reports.len().checked_sub(1) {
            let _ = finished.send((last, reports[last].clone()));
        }
        self.leave().await;
        reports
    }

    async fn track(&mut self, progress: &Progress) {
        self.world.progress.lock().unwrap().push(progress.clone());
    }
}

/// Play a scripted agent in-process: files change in the fake worktree; usage, tool calls, the final
/// answer and budgets as the runner counts them. A `sleep` of 30 s or more waits to be cancelled.
async fn play(
    project: &Project,
    script: &Script,
    d: &Dispatch,
    nth: u32,
    repo: &Arc<Mutex<Repo>>,
    cancel: &CancellationToken,
) -> AgentRun {
    let limits = Limits::for_role(&project.settings, &d.agent);
    let mut run = AgentRun {
        role: d.agent.clone(),
        backend: "scripted".into(),
        final_text: String::new(),
        tool_calls: 0,
        usage: Usage::default(),
        duration: std::time::Duration::from_millis(5),
        model: None,
        exit: ExitReason::Completed,
        stderr_tail: String::new(),
        transcript: None,
        keep_partial: d.keep_partial,
    };
    let actions = script.attempt(&d.agent, nth).unwrap_or(&[]).to_vec();
    let mut slept = std::time::Duration::ZERO;
    for action in actions {
        match action {
            ScriptAction::Write { path, content, .. } => {
                run.tool_calls += 1;
                if let Some(files) = repo.lock().unwrap().files.as_mut() {
                    files.insert(path, content);
                }
            }
            ScriptAction::Edit { path, old, new } => {
                run.tool_calls += 1;
                if let Some(f) = repo
                    .lock()
                    .unwrap()
                    .files
                    .as_mut()
                    .and_then(|f| f.get_mut(&path))
                {
                    *f = f.replacen(&old, &new, 1);
                }
            }
            ScriptAction::Run { .. } | ScriptAction::Tool { .. } => run.tool_calls += 1,
            ScriptAction::Usage { input, output } => {
                run.usage.input += input;
                run.usage.output += output;
                run.usage.total += input + output;
            }
            ScriptAction::Final { text } => run.final_text = text,
            ScriptAction::Fail { message } => run.exit = ExitReason::Failed(message),
            ScriptAction::Exit { code } if code != 0 => {
                run.exit = ExitReason::Failed(format!("exit status {code}"))
            }
            ScriptAction::Exit { .. } | ScriptAction::Stderr { .. } => {}
            ScriptAction::Sleep { ms } => {
                slept += std::time::Duration::from_millis(ms);
                if ms >= 30_000 && limits.timeout.is_none_or(|t| slept < t) {
                    cancel.cancelled().await;
                }
            }
        }
        if cancel.is_cancelled() {
            run.exit = ExitReason::Interrupted;
            return run;
        }
        if let Some(t) = limits.timeout.filter(|t| slept > *t) {
            run.exit = ExitReason::TimedOut(t);
            return run;
        }
        if limits.token_budget > 0 && run.usage.total > limits.token_budget {
            run.exit = ExitReason::TokenBudget {
                used: run.usage.total,
                budget: limits.token_budget,
            };
            return run;
        }
        if limits.max_tool_calls > 0 && run.tool_calls > limits.max_tool_calls {
            run.exit = ExitReason::ToolCallCap {
                calls: run.tool_calls,
                cap: limits.max_tool_calls,
            };
            return run;
        }
    }
    run
}

/// A gate rule: hooks of kind `kind` get `status` when `when` holds for the worktree's files.
pub(crate) fn gate_when(
    kind: GateKind,
    status: GateStatus,
    when: impl Fn(&BTreeMap<String, String>) -> bool + Send + Sync + 'static,
) -> GateRule {
    Arc::new(move |hook, files| {
        if hook.gate == kind && when(files) {
            report(hook, status.clone())
        } else {
            report(hook, GateStatus::Pass)
        }
    })
}

pub(crate) fn spec_dir(world: &FakeWorld) -> &Path {
    &world.root
}
