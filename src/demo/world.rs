//! A whole world for one pipeline run, built on disk and in memory: a git repository with a project, a
//! bare repository as its `origin`, the sandbox GitHub seeded with an issue on a board, settings for the
//! scripted agents. `supervisor demo` runs in one; the scenario tests build their own.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Map, Value, json};

use crate::sandbox::{
    BoardSeed, CheckRunSeed, CommentSeed, IssueSeed, OwnerType, Sandbox, SandboxError,
    SandboxState, SeedState, TokenSeed, UserSeed, WebhookTarget,
};

/// The columns of the built-in workflow, in board order.
pub fn columns() -> Vec<String> {
    crate::config::Workflow::builtin(&BTreeMap::new())
        .stages
        .into_iter()
        .map(|s| s.status)
        .collect()
}

/// The issue the run is about.
#[derive(Debug, Clone)]
pub struct IssueSpec {
    pub number: u64,
    pub title: String,
    pub body: String,
    pub author: String,
    /// Board column; `None` = not on the board.
    pub column: Option<String>,
    /// (author, body), oldest first.
    pub comments: Vec<(String, String)>,
    pub blocked_by: Vec<u64>,
}

/// What to build.
#[derive(Debug, Clone)]
pub struct WorldSpec {
    pub owner: String,
    pub name: String,
    pub codeowner: String,
    /// Login of the account supervisor's token belongs to.
    pub bot: String,
    pub issue: IssueSpec,
    pub extra_issues: Vec<IssueSeed>,
    /// Files committed on the default branch (path, content).
    pub files: Vec<(String, String)>,
    /// The scripted agents' script.
    pub script: Value,
    /// Merged into the generated `supervisor` settings block.
    pub settings: Map<String, Value>,
    /// Written to `.supervisor/workflow.json` when given.
    pub workflow: Option<Value>,
    pub token_scopes: Vec<String>,
    /// Check runs the sandbox's CI reports for every push.
    pub auto_checks: Vec<CheckRunSeed>,
}

/// A built world. Dropping it leaves the files; `Sandbox::shutdown` stops the server.
pub struct World {
    pub dir: PathBuf,
    /// The repository supervisor runs in (a clone of `remote`).
    pub repo: PathBuf,
    pub remote: PathBuf,
    pub worktrees: PathBuf,
    pub script: PathBuf,
    pub sandbox: Sandbox,
    pub token: String,
    pub spec: WorldSpec,
}

#[derive(Debug, thiserror::Error)]
pub enum WorldError {
    #[error("cannot prepare {}: {}", path.display(), crate::config::io_reason(source))]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("git {args} failed: {detail}")]
    Git { args: String, detail: String },
    #[error("the sandbox GitHub did not start: {0}")]
    Sandbox(#[from] SandboxError),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> WorldError + '_ {
    move |source| WorldError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Run git in `dir` with a fixed identity (the machine may have none configured).
pub fn git(dir: &Path, args: &[&str]) -> Result<String, WorldError> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "supervisor demo")
        .env("GIT_AUTHOR_EMAIL", "demo@supervisor.invalid")
        .env("GIT_COMMITTER_NAME", "supervisor demo")
        .env("GIT_COMMITTER_EMAIL", "demo@supervisor.invalid")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .map_err(|e| WorldError::Git {
            args: args.join(" "),
            detail: format!("cannot run git: {e}"),
        })?;
    if !out.status.success() {
        return Err(WorldError::Git {
            args: args.join(" "),
            detail: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn write(path: &Path, content: &str) -> Result<(), WorldError> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io(parent))?;
    }
    std::fs::write(path, content).map_err(io(path))
}

impl WorldSpec {
    /// The token the sandbox gives supervisor's account.
    pub fn token(&self) -> String {
        format!("sandbox-token-{}", self.bot)
    }

    /// The token the codeowner reviews pull requests with.
    pub fn reviewer_token(&self) -> String {
        format!("sandbox-token-{}", self.codeowner)
    }

    /// The `supervisor` settings block for scripted agents reading `script`, worktrees under
    /// `worktrees`, branches pushed to `remote`, merged with the spec's own settings.
    pub fn settings_block(
        &self,
        script: &Path,
        worktrees: &Path,
        remote: &Path,
    ) -> Map<String, Value> {
        let mut block = Map::new();
        block.insert(
            "repo".into(),
            json!(format!("{}/{}", self.owner, self.name)),
        );
        block.insert("gitUrl".into(), json!(remote.display().to_string()));
        block.insert("projectNumber".into(), json!(1));
        block.insert("codeowners".into(), json!([self.codeowner]));
        block.insert("agentBackend".into(), json!("scripted"));
        block.insert("agentScript".into(), json!(script.display().to_string()));
        block.insert(
            "worktreeRoot".into(),
            json!(worktrees.display().to_string()),
        );
        block.insert("setupCommands".into(), json!([]));
        block.insert("ciGatingTimeoutSec".into(), json!(10));
        block.insert(
            "gates".into(),
            json!({ "ciPollIntervalSec": 1, "toolTimeoutSec": 120 }),
        );
        for (k, v) in &self.settings {
            block.insert(k.clone(), v.clone());
        }
        block
    }

    /// The sandbox GitHub's state: the repository (backed by `git_dir`), the users, the issue on
    /// the board.
    pub fn sandbox_state(&self, git_dir: Option<PathBuf>) -> SandboxState {
        let mut state = SandboxState::new(&self.owner, &self.name);
        state.repo.git_dir = git_dir;
        state.users = [&self.codeowner, &self.bot, &"mallory".to_string()]
            .iter()
            .map(|l| UserSeed {
                login: l.to_string(),
                name: None,
                // The maintainer and the bot belong to the organization; anyone else does not.
                association: Some(if *l == &self.codeowner || *l == &self.bot {
                    "MEMBER".into()
                } else {
                    "NONE".into()
                }),
                permission: None,
            })
            .collect();
        state.tokens = vec![
            TokenSeed {
                token: self.token(),
                login: self.bot.clone(),
                scopes: self.token_scopes.clone(),
                ..TokenSeed::default()
            },
            TokenSeed {
                token: self.reviewer_token(),
                login: self.codeowner.clone(),
                scopes: vec!["repo".into()],
                ..TokenSeed::default()
            },
        ];
        let mut issues = vec![IssueSeed {
            number: self.issue.number,
            title: self.issue.title.clone(),
            body: self.issue.body.clone(),
            author: self.issue.author.clone(),
            labels: vec!["enhancement".into()],
            state: SeedState::Open,
            state_reason: None,
            blocked_by: self.issue.blocked_by.clone(),
            comments: self
                .issue
                .comments
                .iter()
                .map(|(author, body)| CommentSeed::new(author, body))
                .collect(),
            ..IssueSeed::default()
        }];
        issues.extend(self.extra_issues.iter().cloned());
        state.issues = issues;
        let mut items = BTreeMap::new();
        if let Some(col) = &self.issue.column {
            items.insert(self.issue.number, Some(col.clone()));
        }
        state.board = Some(BoardSeed {
            owner: self.owner.clone(),
            owner_type: OwnerType::Organization,
            number: 1,
            title: "Delivery".into(),
            status_field: "Status".into(),
            options: columns(),
            items,
        });
        state.auto_check_runs = self.auto_checks.clone();
        state
    }
}

impl World {
    /// Build the world under `dir` (created if needed) and start its sandbox on a free port.
    pub async fn build(dir: &Path, spec: WorldSpec) -> Result<World, WorldError> {
        World::build_with(dir, spec, 0, None).await
    }

    /// [`build`](World::build), with a sandbox that sends its webhooks to `webhook`.
    pub async fn build_with_webhook(
        dir: &Path,
        spec: WorldSpec,
        webhook: Option<WebhookTarget>,
    ) -> Result<World, WorldError> {
        World::build_with(dir, spec, 0, webhook).await
    }

    /// [`build`](World::build) with the sandbox on `port` (0: a free one).
    pub async fn build_on(dir: &Path, spec: WorldSpec, port: u16) -> Result<World, WorldError> {
        World::build_with(dir, spec, port, None).await
    }

    async fn build_with(
        dir: &Path,
        spec: WorldSpec,
        port: u16,
        webhook: Option<WebhookTarget>,
    ) -> Result<World, WorldError> {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let dir = dir.canonicalize().map_err(io(dir))?;
        let remote = dir.join("remote.git");
        let repo = dir.join("repo");
        let worktrees = dir.join("worktrees");
        let script = dir.join("agents.json");
        std::fs::create_dir_all(&repo).map_err(io(&repo))?;
        std::fs::create_dir_all(&worktrees).map_err(io(&worktrees))?;

        git(
            &dir,
            &[
                "init",
                "--quiet",
                "--bare",
                "--initial-branch=main",
                "remote.git",
            ],
        )?;
        git(&repo, &["init", "--quiet", "--initial-branch=main"])?;
        for (path, content) in &spec.files {
            write(&repo.join(path), content)?;
        }
        let block = spec.settings_block(&script, &worktrees, &remote);
        write(
            &repo.join(".pi/settings.json"),
            &serde_json::to_string_pretty(&json!({ "supervisor": block })).expect("json"),
        )?;
        if let Some(wf) = &spec.workflow {
            write(
                &repo.join(".supervisor/workflow.json"),
                &serde_json::to_string_pretty(wf).expect("json"),
            )?;
        }
        write(
            &script,
            &serde_json::to_string_pretty(&spec.script).expect("json"),
        )?;
        git(&repo, &["add", "--all"])?;
        git(&repo, &["commit", "--quiet", "-m", "Initial commit"])?;
        git(
            &repo,
            &["remote", "add", "origin", &remote.display().to_string()],
        )?;
        git(&repo, &["push", "--quiet", "origin", "main"])?;

        let token = spec.token();
        let state = spec.sandbox_state(Some(remote.clone()));
        let sandbox = Sandbox::start_with_webhook(state, port, webhook).await?;
        Ok(World {
            dir,
            repo,
            remote,
            worktrees,
            script,
            sandbox,
            token,
            spec,
        })
    }

    /// Environment that points supervisor at this world's sandbox.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            ("GITHUB_API_URL".into(), self.sandbox.url()),
            ("GH_TOKEN".into(), self.token.clone()),
        ]
    }

    /// Directory of the run journals.
    pub fn runs_dir(&self) -> PathBuf {
        crate::pipeline::runs_dir(&self.repo)
    }
}

/// The demo's project files, embedded in the binary.
pub fn demo_project() -> Vec<(String, String)> {
    [
        (
            "package.json",
            include_str!("../../config/demo/project/package.json"),
        ),
        (
            "tsconfig.json",
            include_str!("../../config/demo/project/tsconfig.json"),
        ),
        (
            "knip.json",
            include_str!("../../config/demo/project/knip.json"),
        ),
        (
            "README.md",
            include_str!("../../config/demo/project/README.md"),
        ),
        (
            ".gitignore",
            include_str!("../../config/demo/project/gitignore"),
        ),
        (
            "src/duration.ts",
            include_str!("../../config/demo/project/src/duration.ts"),
        ),
        (
            "src/index.ts",
            include_str!("../../config/demo/project/src/index.ts"),
        ),
    ]
    .iter()
    .map(|(p, c)| (p.to_string(), c.to_string()))
    .collect()
}
