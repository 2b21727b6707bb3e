//! The `supervisor` block of `.pi/settings.json`, its defaults, `SUPERVISOR_*` overrides and validation.
//!
//! Each block is declared once, with [`settings_block!`]: the declaration is the struct, the list of
//! known keys, their types, defaults and documentation. To add a setting, add one field to the block
//! it belongs to (and a row to the README's Configuration table, which a test holds to this).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::issue::{ConfigError, ConfigIssue};
use super::schema::{Block, Checker, Kind, leaf_setting, settings_block};
use super::source::{JsonIndex, read_text};
use super::workflow::{StageId, Workflow};
use crate::ids::BoardOption;

/// Where settings are looked for, relative to the repository root, in order.
pub const SETTINGS_PATHS: [&str; 2] = [".pi/settings.json", ".supervisor/settings.json"];

/// `owner/name` of a GitHub repository.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RepoSlug {
    pub owner: String,
    pub name: String,
}

impl RepoSlug {
    pub fn parse(s: &str) -> Option<RepoSlug> {
        let (owner, name) = s.trim().split_once('/')?;
        let ok = |p: &str| {
            !p.is_empty()
                && p.len() <= 100
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
                && p != "."
                && p != ".."
        };
        (ok(owner) && ok(name)).then(|| RepoSlug {
            owner: owner.to_string(),
            name: name.to_string(),
        })
    }
}

impl fmt::Display for RepoSlug {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.owner, self.name)
    }
}

impl Serialize for RepoSlug {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for RepoSlug {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        RepoSlug::parse(&s)
            .ok_or_else(|| serde::de::Error::custom(format!("`{s}` is not of the form owner/name")))
    }
}

/// How a custom `command` backend receives the prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum PromptVia {
    #[default]
    Stdin,
    Arg,
}

/// How agent processes are confined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum AgentSandbox {
    /// As supervisor's user, with the environment allowlist only.
    #[default]
    None,
    /// In bubblewrap: own PID and mount namespaces, only the worktree (and the CLI's configuration)
    /// writable, HOME hidden.
    Bwrap,
}

/// How the work of an epic's tasks comes together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum EpicIntegration {
    /// Each task builds on an epic branch its accepted predecessors were merged into; one pull
    /// request from that branch at the end.
    #[default]
    Branch,
    /// Each task's pull request targets the default branch; a person merges them.
    Independent,
}

leaf_setting! {
    RepoSlug: Str => RepoSlug { owner: String::new(), name: String::new() };
    PromptVia: Str, "\"stdin\" or \"arg\"", "prompt modes";
    AgentSandbox: Str, "\"none\" or \"bwrap\"", "sandbox kinds";
    EpicIntegration: Str, "\"branch\" or \"independent\"", "integration kinds";
}

settings_block! {
    /// A user-defined agent CLI: `{ "command": ["aider", "--yes", "--message", "{prompt}"], "promptVia": "arg" }`.
    #[derive(Debug, Clone, PartialEq)]
    pub struct CommandBackend {
        /// The program and its arguments; `{prompt}`, `{system_prompt}`, `{model}` and `{role}` are
        /// substituted.
        #[setting(key = "command", required, example = r#"["aider", "--yes", "--message", "{prompt}"]"#)]
        pub command: Vec<String>,
        /// How the prompt is passed: on stdin, or as the `{prompt}` argument.
        #[setting(key = "promptVia", default = PromptVia::Stdin, example = r#""arg""#)]
        pub prompt_via: PromptVia,
    }
}

settings_block! {
    /// What one model costs, in US dollars per million tokens.
    #[derive(Debug, Clone, PartialEq, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct ModelPrice {
        /// Input tokens read neither from nor into the prompt cache.
        #[setting(key = "inputPerMTok", required, example = "3")]
        pub input: f64,
        /// Output tokens (reasoning included).
        #[setting(key = "outputPerMTok", required, example = "15")]
        pub output: f64,
        /// Input tokens read from the prompt cache; the input price when absent.
        #[setting(key = "cacheReadPerMTok", default = None, example = "0.3")]
        pub cache_read: Option<f64>,
        /// Input tokens written to the prompt cache; the input price when absent.
        #[setting(key = "cacheWritePerMTok", default = None, example = "3.75")]
        pub cache_write: Option<f64>,
    }
}

/// `agentTimeoutMin` when the settings name none.
pub const DEFAULT_AGENT_TIMEOUT_MIN: f64 = 60.0;
/// `agentStallSec` when the settings name none.
pub const DEFAULT_AGENT_STALL_SEC: u64 = 600;

settings_block! {
    /// Settings of the quality gates.
    #[derive(Debug, Clone, PartialEq)]
    pub struct GateSettings {
        /// Allow running a pinned `npx` version of a tool that is neither in `node_modules/.bin` nor
        /// on PATH.
        #[setting(key = "allowNpx", default = false)]
        pub allow_npx: bool,
        /// Seconds between check-run polls of the CI gate.
        #[setting(key = "ciPollIntervalSec", default = 15)]
        pub ci_poll_interval_sec: u64,
        /// Per-tool timeout.
        #[setting(key = "toolTimeoutSec", default = 300)]
        pub tool_timeout_sec: u64,
        /// Dependency versions published fewer days ago than this are flagged.
        #[setting(key = "minPackageAgeDays", default = 14)]
        pub min_package_age_days: u64,
        /// Flagged packages block instead of warning.
        #[setting(key = "packageSafetyBlocking", default = false)]
        pub package_safety_blocking: bool,
        /// npm registry to ask for publish dates.
        #[setting(key = "npmRegistry", default = "https://registry.npmjs.org".into())]
        pub npm_registry: String,
        /// More changed files than this is flagged by traceability.
        #[setting(key = "maxChangedFiles", default = 50)]
        pub max_changed_files: usize,
        /// Globs of files the gates leave out (generated code, vendored code, fixtures): `dist/`,
        /// `**/*.generated.ts`.
        #[setting(key = "exclude", default = Vec::new(), example = r#"["dist/", "**/*.generated.ts"]"#)]
        pub exclude: Vec<String>,
        /// Directories of trusted gate tools, searched before the main checkout's installed
        /// dependencies and PATH. Absolute paths; a directory inside the checkout under review is
        /// never used.
        #[setting(key = "toolPaths", default = Vec::new(), example = r#"["/opt/gate-tools/bin"]"#)]
        pub tool_paths: Vec<PathBuf>,
    }
}

impl Default for GateSettings {
    fn default() -> Self {
        Self::defaults().expect("every gate setting has a default")
    }
}

settings_block! {
    /// Settings of the board-driven modes (`supervisor serve`).
    #[derive(Debug, Clone, PartialEq)]
    pub struct WatchSettings {
        /// What starts a command in a comment (`/supervisor run`): a word such as `/supervisor`,
        /// or a mention such as `@my-bot`.
        #[setting(key = "commandPrefix", default = "/supervisor".into(), example = r#""/supervisor""#)]
        pub command_prefix: String,
        /// Adding this label to an issue asks for a run; absent: labels start nothing.
        #[setting(key = "triggerLabel", default = None, example = r#""supervisor""#)]
        pub trigger_label: Option<String>,
        /// Columns whose newly arrived cards start a run; empty: the first column with an agent
        /// (a card dragged from Backlog to Research starts).
        #[setting(key = "triggerColumns", default = Vec::new(), example = r#"["Research"]"#)]
        pub trigger_columns: Vec<String>,
        /// Runs live at once; more wait in a queue.
        #[setting(key = "maxConcurrent", default = 2)]
        pub max_concurrent: usize,
        /// Column → runs live at once in that column (a run waits before moving into a full one).
        #[setting(key = "columnLimits", default = BTreeMap::new(), example = r#"{ "Implementation": 1 }"#)]
        pub column_limits: BTreeMap<String, usize>,
        /// Seconds between board polls of `supervisor watch`.
        #[setting(key = "pollIntervalSec", default = 30)]
        pub poll_interval_sec: u64,
        /// Seconds between the safety-net board polls of `supervisor serve` (webhooks get lost).
        #[setting(key = "servePollIntervalSec", default = 300)]
        pub serve_poll_interval_sec: u64,
        /// The label that shows on GitHub which issues a watcher is running.
        #[setting(key = "claimLabel", default = "supervisor:running".into(), example = r#""supervisor:running""#)]
        pub claim_label: String,
        /// Seconds a claim holds without being refreshed; a claim older than this is taken over.
        #[setting(key = "claimTtlSec", default = 600)]
        pub claim_ttl_sec: u64,
        /// The workflow `watch --dispatch actions` starts for each ready card (a file name in
        /// `.github/workflows/` or the workflow's id).
        #[setting(key = "dispatchWorkflow", default = "supervisor-dispatch.yml".into(), example = r#""supervisor-dispatch.yml""#)]
        pub dispatch_workflow: String,
        /// Minutes a live run may journal nothing before the scheduler reports it silent (its
        /// agent or a gate may hang); 0: never.
        #[setting(key = "silentRunMin", default = 30)]
        pub silent_run_min: u64,
        /// The environment variable holding the dashboard's token: required when the dashboard
        /// (and `/metrics`) is served on an address other than loopback.
        #[setting(key = "dashboardTokenEnv", default = None, example = r#""SUPERVISOR_DASHBOARD_TOKEN""#)]
        pub dashboard_token_env: Option<String>,
    }
}

impl Default for WatchSettings {
    fn default() -> Self {
        Self::defaults().expect("every watch setting has a default")
    }
}

/// Most tasks `epic.maxTasks` may allow.
pub const MAX_EPIC_TASKS: usize = 50;

/// Longest label name GitHub takes.
const MAX_LABEL_CHARS: usize = 50;

settings_block! {
    /// Settings of epics: issues a planner splits into sub-issues that the board runs.
    #[derive(Debug, Clone, PartialEq)]
    pub struct EpicSettings {
        /// The label that marks an issue as an epic.
        #[setting(key = "label", default = "supervisor:epic".into(), example = r#""supervisor:epic""#)]
        pub label: String,
        /// Tasks a plan may have, 1 to 50; a plan with more is sent back to the planner.
        #[setting(key = "maxTasks", default = 8, example = "8")]
        pub max_tasks: usize,
        /// Tasks of one epic running at once (never more than `watch.maxConcurrent`).
        #[setting(key = "maxConcurrency", default = 2, example = "2")]
        pub max_concurrency: usize,
        /// Reviews of one task's pull request before it is escalated to a person instead of sent
        /// back again; also the new plans an epic's reviews may ask for.
        #[setting(key = "maxIterations", default = 3, example = "3")]
        pub max_iterations: u32,
        /// How the tasks' work comes together: `"branch"` (each task's pull request is merged into
        /// an epic branch the next tasks build on; one pull request from it at the end) or
        /// `"independent"` (each task's pull request targets the default branch).
        #[setting(key = "integration", default = EpicIntegration::Branch, example = r#""independent""#)]
        pub integration: EpicIntegration,
        /// What the reviewer judges each task's pull request against when the epic has no
        /// "Review criteria" section.
        #[setting(key = "reviewCriteria", default = None, example = r#""Every public function is tested; no new dependency.""#)]
        pub review_criteria: Option<String>,
        /// The label a task handed to a person gets (its reviewer escalated it, it was sent back
        /// `maxIterations` times, or a task it depends on was escalated).
        #[setting(key = "escalationLabel", default = "supervisor:escalated".into(), example = r#""supervisor:escalated""#)]
        pub escalation_label: String,
        /// A board column that holds no stage: a codeowner's card moved into it has the watcher
        /// plan and work its issue as an epic.
        #[setting(key = "column", default = None, example = r#""Epics""#)]
        pub column: Option<String>,
    }
}

impl Default for EpicSettings {
    fn default() -> Self {
        Self::defaults().expect("every epic setting has a default")
    }
}

settings_block! {
    /// The validated `supervisor` settings block.
    #[derive(Debug, Clone, PartialEq)]
    pub struct Settings {
        /// The GitHub repository of the issues and pull requests, as `owner/name`.
        #[setting(key = "repo", required, example = r#""octocat/hello-world""#)]
        pub repo: RepoSlug,
        /// The number of the GitHub Projects (v2) board, as in its URL
        /// (github.com/orgs/ORG/projects/N).
        #[setting(key = "projectNumber", required, example = "1")]
        pub project_number: u64,
        /// Login of the user or organization owning the board; the repository owner when absent.
        #[setting(key = "projectOwner", default = None)]
        pub(crate) project_owner: Option<String>,
        /// The board's single-select field holding the column.
        #[setting(key = "statusField", default = "Status".into())]
        pub status_field: String,
        /// Workflow stage → the board's option holding it, where the two names differ:
        /// `{ "Backlog": "Todo", "Done": "Shipped" }`. Stages not listed use their own name.
        #[setting(key = "columns", default = BTreeMap::new(), example = r#"{ "Backlog": "Todo" }"#)]
        pub columns: BTreeMap<String, String>,
        /// Board column → agent name. Overrides the workflow's `agentName` for that column.
        #[setting(key = "statusMapping", default = BTreeMap::new(), example = r#"{ "Research": "researcher" }"#)]
        pub status_mapping: BTreeMap<String, String>,
        /// Base branch of worktrees and target of pull requests.
        #[setting(key = "defaultBranch", default = "main".into())]
        pub default_branch: String,
        /// Worktree branch = prefix + issue number.
        #[setting(key = "branchPrefix", default = "worktree-git-issue-".into())]
        pub branch_prefix: String,
        /// The trusted GitHub logins: only issues they opened are processed, and only their text
        /// reaches agents.
        #[setting(key = "codeowners", required, example = r#"["your-github-login"]"#)]
        pub codeowners: Vec<String>,
        /// Auditor rejections allowed before the pipeline stops.
        #[setting(key = "maxRejections", default = 3)]
        pub max_rejections: u32,
        /// Revisions of one pull request after review feedback (`supervisor revise`) before
        /// supervisor stops and asks for a human.
        #[setting(key = "maxRevisions", default = 3)]
        pub max_revisions: u32,
        /// Resolve a review thread once a revision has answered it.
        #[setting(key = "resolveReviewThreads", default = true)]
        pub resolve_review_threads: bool,
        /// A pull request comment containing this (or a line starting with `/supervisor revise`)
        /// asks for a revision.
        #[setting(key = "reviseMention", default = "@supervisor".into())]
        pub revise_mention: String,
        /// Minimum passing/total share of audit dimensions, in (0, 1].
        #[setting(key = "auditScoreThreshold", default = 0.75, example = "0.75")]
        pub audit_score_threshold: f64,
        /// Seconds to wait for CI check runs; 0 skips the CI gate entirely.
        #[setting(key = "ciGatingTimeoutSec", default = 300)]
        pub ci_gating_timeout_sec: u64,
        /// Summed tokens per agent dispatch; 0 = unlimited.
        #[setting(key = "agentTokenBudget", default = 0)]
        pub agent_token_budget: u64,
        /// Tool calls per agent dispatch; 0 = unlimited.
        #[setting(key = "maxToolCalls", default = 0)]
        pub max_tool_calls: u64,
        /// Minutes one agent dispatch may run before it is stopped; 0 = no limit.
        /// `agentTimeoutsMin` overrides it per agent.
        #[setting(key = "agentTimeoutMin", default = DEFAULT_AGENT_TIMEOUT_MIN, example = "60")]
        pub agent_timeout_min: f64,
        /// Agent name → timeout in minutes, overriding `agentTimeoutMin`; 0 = no limit for that agent.
        #[setting(key = "agentTimeoutsMin", default = BTreeMap::new(), example = r#"{ "developer": 30 }"#)]
        pub agent_timeouts_min: BTreeMap<String, f64>,
        /// Seconds an agent may write nothing (no line on stdout or stderr) before it is stopped as
        /// stalled; the run pauses and running again continues it. 0 = never.
        #[setting(key = "agentStallSec", default = DEFAULT_AGENT_STALL_SEC, example = "600")]
        pub agent_stall_sec: u64,
        /// Model → prices in US dollars per million tokens, adding to and overriding the built-in
        /// table; they price the usage of agents whose CLI reports no cost (a stopped Claude Code,
        /// Codex).
        #[setting(
            key = "prices",
            default = BTreeMap::new(),
            example = r#"{ "claude-sonnet-4-5": { "inputPerMTok": 3, "outputPerMTok": 15, "cacheReadPerMTok": 0.3, "cacheWritePerMTok": 3.75 } }"#
        )]
        pub prices: BTreeMap<String, ModelPrice>,
        /// Ring the terminal bell when a run ends.
        #[setting(key = "bellOnComplete", default = false)]
        pub bell_on_complete: bool,
        /// Keep one issue comment up to date with the run's progress (stages, agent, tokens, gates,
        /// links), edited at most every 10 s.
        #[setting(key = "trackingComment", default = false)]
        pub tracking_comment: bool,
        /// Run stages and gates marked `experimental`.
        #[setting(key = "enableExperimentalFeatures", default = false)]
        pub enable_experimental_features: bool,
        /// Backend for agents whose definition names none: pi, claude, codex, scripted, or a key of
        /// `backends`.
        #[setting(key = "agentBackend", default = "pi".into())]
        pub agent_backend: String,
        /// Custom command backends by name.
        #[setting(
            key = "backends",
            default = BTreeMap::new(),
            example = r#"{ "aider": { "command": ["aider", "--yes", "--message", "{prompt}"], "promptVia": "arg" } }"#
        )]
        pub backends: BTreeMap<String, CommandBackend>,
        /// Script file for the `scripted` backend (tests and the demo).
        #[setting(key = "agentScript", default = None)]
        pub agent_script: Option<PathBuf>,
        /// Environment variables passed to agents in addition to the basics (PATH, HOME, the locale)
        /// and, unless `agentEnvDefaults` is false, the common provider variables.
        #[setting(key = "agentEnv", default = Vec::new(), example = r#"["CLAUDE_CONFIG_DIR"]"#)]
        pub agent_env: Vec<String>,
        /// Whether agents get the built-in list of provider variables; `false`: only `agentEnv` is
        /// added to the basics.
        #[setting(key = "agentEnvDefaults", default = true)]
        pub agent_env_defaults: bool,
        /// Size cap of each agent transcript file (stdout and stderr each), in MiB; 0 = no cap.
        #[setting(key = "agentTranscriptMaxMb", default = 16)]
        pub agent_transcript_max_mb: u64,
        /// How agents are confined: `"none"`, or `"bwrap"` (bubblewrap: own PID and mount
        /// namespaces, the worktree writable, the rest read-only, HOME hidden).
        #[setting(key = "agentSandbox", default = AgentSandbox::None, example = r#""bwrap""#)]
        pub agent_sandbox: AgentSandbox,
        /// Under bwrap: more paths agents may write (besides the worktree and their CLI's
        /// configuration directory).
        #[setting(key = "agentSandboxWritable", default = Vec::new(), example = r#"["~/.cache/pip"]"#)]
        pub agent_sandbox_writable: Vec<PathBuf>,
        /// Under bwrap: paths under HOME agents may read (HOME is hidden otherwise, except the
        /// directories on PATH and the CLI's configuration).
        #[setting(key = "agentSandboxReadOnly", default = Vec::new(), example = r#"["~/.gitconfig"]"#)]
        pub agent_sandbox_read_only: Vec<PathBuf>,
        /// Pass the GitHub token to agents (off: agents never see it).
        #[setting(key = "passGitHubToken", default = false)]
        pub pass_github_token: bool,
        /// Where supervisor pushes the issue branches and fetches from: a URL or a path. Absent:
        /// the repository on the GitHub host, `https://github.com/<repo>.git` (the host from
        /// GITHUB_SERVER_URL, else from GITHUB_API_URL). Never read from the repository's git
        /// configuration, which an agent can change; the token goes to this URL's host only.
        #[setting(key = "gitUrl", default = None, example = r#""https://github.com/octocat/hello-world.git""#)]
        pub(crate) git_url: Option<String>,
        /// Directory in which worktrees are created; the repository's parent when absent.
        #[setting(key = "worktreeRoot", default = None)]
        pub worktree_root: Option<PathBuf>,
        /// Git-ignored files copied from the repository into each worktree when present.
        #[setting(key = "copyFiles", default = vec![".env".into()], example = r#"[".env"]"#)]
        pub copy_files: Vec<String>,
        /// Shell commands run in a new worktree; absent = `npm ci` when a package-lock.json exists.
        #[setting(key = "setupCommands", default = None, example = r#"["npm ci"]"#)]
        pub setup_commands: Option<Vec<String>>,
        /// Attempts per setup command.
        #[setting(key = "setupAttempts", default = 2)]
        pub setup_attempts: u32,
        /// Workflow file, relative to the repository root; the built-in workflow when absent.
        #[setting(key = "workflow", default = None)]
        pub workflow: Option<PathBuf>,
        /// Directory of role-agent overrides, relative to the repository root.
        #[setting(key = "agentsDir", default = None)]
        pub agents_dir: Option<PathBuf>,
        /// Open pull requests as drafts.
        #[setting(key = "draftPr", default = false)]
        pub draft_pr: bool,
        /// Settings of the quality gates.
        #[setting(key = "gates", default = GateSettings::default())]
        pub gates: GateSettings,
        /// Settings of the board-driven modes.
        #[setting(key = "watch", default = WatchSettings::default())]
        pub watch: WatchSettings,
        /// Settings of epics.
        #[setting(key = "epic", default = EpicSettings::default())]
        pub epic: EpicSettings,
    }
}

/// The variable naming GitHub's web address (set by GitHub Actions: `https://github.com`).
pub const SERVER_URL_ENV: &str = "GITHUB_SERVER_URL";
/// The variable naming GitHub's API base URL (GitHub Enterprise Server, the sandbox).
pub const API_URL_ENV: &str = "GITHUB_API_URL";

/// The web address that serves the API at `api` (no trailing slash).
fn web_of_api(api: &str) -> String {
    let (scheme, rest) = api.split_once("://").unwrap_or(("https", api));
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    if let Some(web) = host.strip_prefix("api.").filter(|_| path.is_empty()) {
        return format!("{scheme}://{web}");
    }
    match path.strip_suffix("api/v3") {
        Some(prefix) => format!("{scheme}://{host}/{prefix}")
            .trim_end_matches('/')
            .to_string(),
        None => api.to_string(),
    }
}

/// `projectNumber` → `SUPERVISOR_PROJECT_NUMBER`.
pub fn env_name(key: &str) -> String {
    let mut out = String::from("SUPERVISOR_");
    for (i, c) in key.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

/// Settings plus what was noticed while loading them.
#[derive(Debug, Clone)]
pub struct LoadedSettings {
    pub settings: Settings,
    pub path: PathBuf,
    pub warnings: Vec<ConfigIssue>,
    /// Keys set from the environment.
    pub overridden: Vec<String>,
    /// Where each key of the settings file is.
    pub index: JsonIndex,
}

/// Settings read as far as they could be, with every error found in them: a value that is wrong
/// stands at its default, so the rest of the configuration can still be checked against them.
#[derive(Debug, Clone)]
pub struct CheckedSettings {
    pub loaded: LoadedSettings,
    pub errors: Vec<ConfigIssue>,
}

impl CheckedSettings {
    /// The settings when they have no error.
    pub(crate) fn into_result(self) -> Result<LoadedSettings, ConfigError> {
        if self.errors.is_empty() {
            Ok(self.loaded)
        } else {
            Err(ConfigError::new(self.errors).with_warnings(self.loaded.warnings))
        }
    }
}

impl LoadedSettings {
    /// An issue about the settings key at `path` (`supervisor.columns.Research`): in the settings
    /// file at the key's line and column, or in the environment variable the key was taken from.
    pub fn issue(
        &self,
        path: &str,
        problem: impl Into<String>,
        fix: impl Into<String>,
    ) -> ConfigIssue {
        let top = path
            .strip_prefix(BLOCK)
            .and_then(|p| p.strip_prefix('.'))
            .and_then(|p| p.split(['.', '[']).next());
        match top.filter(|key| self.overridden.iter().any(|o| o == key)) {
            Some(key) => ConfigIssue::new(
                Path::new(&format!("${}", env_name(key))),
                path,
                problem,
                fix,
            ),
            None => ConfigIssue::new(&self.path, path, problem, fix).at(self.index.position(path)),
        }
    }
}

/// The key of the settings block in the settings file.
const BLOCK: &str = "supervisor";

impl Settings {
    /// Find and load the settings of the repository at `root`, applying `env` overrides.
    pub fn load(
        root: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<LoadedSettings, ConfigError> {
        Self::check(root, env)?.into_result()
    }

    /// Find and read the settings of the repository at `root`, applying `env` overrides, with every
    /// error in them. `Err` when there are none to read: no file, not JSON, no `supervisor` block.
    pub fn check(
        root: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<CheckedSettings, ConfigError> {
        if let Some(problem) = super::directory_problem(root) {
            return Err(ConfigError::one(ConfigIssue::new(
                root,
                "(repository root)",
                problem,
                "run supervisor in the repository's directory, or pass --repo-root DIR with it",
            )));
        }
        let Some(path) = SETTINGS_PATHS
            .iter()
            .map(|p| root.join(p))
            .find(|p| p.is_file())
        else {
            // Named after the file `supervisor init` writes; a fresh checkout (the Action's) has
            // only what was committed.
            let looked: Vec<String> = (SETTINGS_PATHS.iter())
                .map(|p| root.join(p).display().to_string())
                .collect();
            return Err(ConfigError::one(ConfigIssue::new(
                &root.join(SETTINGS_PATHS[1]),
                BLOCK,
                format!(
                    "no settings file found (looked for {})",
                    looked.join(" and ")
                ),
                format!(
                    "run `supervisor init` to create {} (see the README, Getting started); for the GitHub Action or `supervisor watch` on another machine, commit and push it",
                    SETTINGS_PATHS[1]
                ),
            )));
        };
        let text = read_text(&path).map_err(ConfigError::one)?;
        Self::check_text(&path, &text, env)
    }

    /// Parse settings from the text of a settings file.
    pub fn from_text(
        path: &Path,
        text: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<LoadedSettings, ConfigError> {
        Self::check_text(path, text, env)?.into_result()
    }

    /// Read settings from the text of a settings file, with every error in them.
    pub fn check_text(
        path: &Path,
        text: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<CheckedSettings, ConfigError> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let doc: Value = serde_json::from_str(text).map_err(|e| {
            ConfigError::one(
                ConfigIssue::new(
                    path,
                    "(file)",
                    format!("is not valid JSON: {e}"),
                    "fix the JSON syntax",
                )
                .at_line(Some(e.line())),
            )
        })?;
        let index = JsonIndex::new(text);
        let block = match doc {
            Value::Object(mut doc) => doc.remove(BLOCK),
            _ => None,
        };
        let block = match block {
            Some(Value::Object(map)) => map,
            Some(_) => {
                return Err(ConfigError::one(
                    ConfigIssue::new(
                        path,
                        BLOCK,
                        "is not an object",
                        "make \"supervisor\" an object of settings",
                    )
                    .at_line(index.line(BLOCK)),
                ));
            }
            None => {
                return Err(ConfigError::one(ConfigIssue::new(
                    path,
                    BLOCK,
                    "is missing",
                    "add a \"supervisor\" block with \"repo\", \"projectNumber\" and \"codeowners\" (see the README, Configuration)",
                )));
            }
        };
        Ok(Self::from_block(path, index, block, env))
    }

    fn from_block(
        path: &Path,
        index: JsonIndex,
        mut block: Map<String, Value>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> CheckedSettings {
        let mut checker = Checker::new(path, &index);

        // A key given twice: JSON keeps the last silently, which is never what was meant.
        let in_block = format!("{BLOCK}.");
        for duplicate in &index.duplicates {
            if duplicate.path == BLOCK || duplicate.path.starts_with(&in_block) {
                checker.error(duplicate.issue(path));
            }
        }

        // Environment overrides, for the top-level keys.
        let mut overridden = Vec::new();
        for field in Settings::FIELDS {
            let var = env_name(field.key);
            let Some(raw) = env(&var) else { continue };
            match env_value(&raw, field.kind) {
                Ok(v) => {
                    block.insert(field.key.to_string(), v);
                    overridden.push(field.key.to_string());
                }
                Err(problem) => checker.error(ConfigIssue::new(
                    Path::new(&format!("${var}")),
                    format!("{BLOCK}.{}", field.key),
                    problem,
                    format!("fix or unset the environment variable {var}"),
                )),
            }
        }

        // Every required field has a stand-in: the block is read whatever its values.
        let settings = checker
            .block::<Settings>(Value::Object(block), BLOCK)
            .expect("a settings object is always read, its mistakes reported");
        settings.validate(&mut checker);
        settings.warn_unbounded(&mut checker);
        let (errors, warnings) = checker.finish();
        CheckedSettings {
            loaded: LoadedSettings {
                settings,
                path: path.to_path_buf(),
                warnings,
                overridden,
                index,
            },
            errors,
        }
    }

    /// Checks across fields and of values that types alone cannot express.
    fn validate(&self, checker: &mut Checker) {
        let mut err = |key: &str, problem: String, fix: &str| {
            checker.report(&format!("{BLOCK}.{key}"), problem, fix)
        };
        let t = self.audit_score_threshold;
        if !(t > 0.0 && t <= 1.0) {
            err(
                "auditScoreThreshold",
                format!("is {t}, outside (0, 1]"),
                "use a ratio such as 0.75 (3 of 4 audit dimensions passing)",
            );
        }
        if self.codeowners.is_empty() {
            err(
                "codeowners",
                "is empty: no issue would ever be processed".into(),
                "list at least one trusted GitHub login",
            );
        }
        for (i, owner) in self.codeowners.iter().enumerate() {
            if !is_github_login(owner) {
                err(
                    &format!("codeowners[{i}]"),
                    format!("`{owner}` is not a GitHub login"),
                    "use logins such as \"octocat\", without @",
                );
            }
        }
        if self.project_number == 0 {
            err(
                "projectNumber",
                "is 0".into(),
                "use the number in the board's URL (github.com/orgs/ORG/projects/N)",
            );
        }
        if self.status_field.trim().is_empty() {
            err(
                "statusField",
                "is empty".into(),
                "name the board's single-select column field, usually \"Status\"",
            );
        }
        if !crate::config::is_safe_ref_component(&self.default_branch) {
            err(
                "defaultBranch",
                format!("`{}` is not a valid branch name", self.default_branch),
                "use the repository's default branch, e.g. \"main\"",
            );
        }
        if !self.branch_prefix.is_empty()
            && !crate::config::is_safe_ref_component(&format!("{}1", self.branch_prefix))
        {
            err(
                "branchPrefix",
                format!("`{}` cannot start a branch name", self.branch_prefix),
                "use letters, digits, '-', '_' or '/' such as \"supervisor/issue-\"",
            );
        }
        let minutes = std::iter::once(("agentTimeoutMin".to_string(), self.agent_timeout_min))
            .chain(
                (self.agent_timeouts_min.iter())
                    .map(|(agent, m)| (format!("agentTimeoutsMin.{agent}"), *m)),
            );
        for (key, minutes) in minutes {
            if !(minutes.is_finite() && minutes >= 0.0) {
                err(
                    &key,
                    format!("is {minutes}"),
                    "use a number of minutes, such as 60; 0 means no limit",
                );
            }
        }
        for (model, price) in &self.prices {
            let rates = [
                ("inputPerMTok", Some(price.input)),
                ("outputPerMTok", Some(price.output)),
                ("cacheReadPerMTok", price.cache_read),
                ("cacheWritePerMTok", price.cache_write),
            ];
            for (key, rate) in rates {
                if rate.is_some_and(|r| !(r.is_finite() && r >= 0.0)) {
                    err(
                        &format!("prices.{model}.{key}"),
                        format!("is {}", rate.unwrap_or_default()),
                        "use US dollars per million tokens, 0 or more, e.g. 3",
                    );
                }
            }
        }
        if self.setup_attempts == 0 {
            err("setupAttempts", "is 0".into(), "use 1 or more (default 2)");
        }
        for (i, pattern) in self.gates.exclude.iter().enumerate() {
            if let Err(e) = super::ExcludeGlobs::glob(pattern) {
                err(
                    &format!("gates.exclude[{i}]"),
                    format!("`{}` {}", e.pattern, e.problem),
                    super::EXCLUDE_FIX,
                );
            }
        }
        for (i, dir) in self.gates.tool_paths.iter().enumerate() {
            if !dir.is_absolute() {
                err(
                    &format!("gates.toolPaths[{i}]"),
                    format!("`{}` is not an absolute path", dir.display()),
                    "give the absolute directory holding the tools, e.g. \"/opt/gate-tools/bin\"",
                );
            }
        }
        if self.gates.ci_poll_interval_sec == 0 {
            err(
                "gates.ciPollIntervalSec",
                "is 0".into(),
                "use a poll interval of at least 1 second (default 15)",
            );
        }
        if let Some(problem) = command_prefix_problem(&self.watch.command_prefix) {
            err(
                "watch.commandPrefix",
                problem.into(),
                "use one word that Markdown leaves alone, such as \"/supervisor\" or \"@my-bot\"",
            );
        }
        if self
            .watch
            .trigger_label
            .as_ref()
            .is_some_and(|l| l.trim().is_empty())
        {
            err(
                "watch.triggerLabel",
                "is empty".into(),
                "name a label, such as \"supervisor\", or remove the key",
            );
        }
        self.validate_watch(&mut err);
        self.validate_epic(&mut err);
        for (name, backend) in &self.backends {
            if backend.command.is_empty() {
                err(
                    &format!("backends.{name}.command"),
                    "is empty".into(),
                    "give the program and its arguments, e.g. [\"aider\", \"--message\", \"{prompt}\"]",
                );
            }
            if crate::config::BUILTIN_BACKENDS.contains(&name.as_str()) {
                err(
                    &format!("backends.{name}"),
                    format!("`{name}` is a built-in backend name"),
                    "choose another name for the custom backend",
                );
            }
        }
        if !crate::config::BUILTIN_BACKENDS.contains(&self.agent_backend.as_str())
            && !self.backends.contains_key(&self.agent_backend)
        {
            err(
                "agentBackend",
                format!(
                    "`{}` is neither built in nor defined in \"backends\"",
                    self.agent_backend
                ),
                "use pi, claude, codex or scripted, or define a command line of your own under \"backends\" \
                 (e.g. \"backends\": { \"aider\": { \"command\": [\"aider\", \"--yes\", \"--message\", \"{prompt}\"], \"promptVia\": \"arg\" } }) \
                 and name its key here",
            );
        }
    }

    /// Warnings for agents nothing stops: a timeout of 0 leaves a silent or looping agent holding
    /// its run (and, under `watch`, its slot) until someone kills it.
    fn warn_unbounded(&self, checker: &mut Checker) {
        let stall = if self.agent_stall_sec == 0 {
            "and agentStallSec is 0, so an agent that hangs is never stopped"
        } else {
            "only agentStallSec stops an agent that hangs, not one that keeps working"
        };
        if self.agent_timeout_min == 0.0 {
            let overridden = self
                .agent_timeouts_min
                .values()
                .filter(|m| **m > 0.0)
                .count();
            let except = if overridden > 0 {
                format!(" (except the {overridden} agent(s) agentTimeoutsMin names)")
            } else {
                String::new()
            };
            checker.warn(
                &format!("{BLOCK}.agentTimeoutMin"),
                format!("is 0: agent dispatches have no time limit{except}, {stall}"),
                format!("set a limit in minutes (default {DEFAULT_AGENT_TIMEOUT_MIN})"),
            );
        }
        for (agent, _) in self.agent_timeouts_min.iter().filter(|(_, m)| **m == 0.0) {
            checker.warn(
                &format!("{BLOCK}.agentTimeoutsMin.{agent}"),
                format!("is 0: {agent} has no time limit, {stall}"),
                "set a limit in minutes, or remove the entry to use agentTimeoutMin",
            );
        }
    }

    /// The `watch` block's numbers and names.
    fn validate_watch(&self, err: &mut impl FnMut(&str, String, &str)) {
        let w = &self.watch;
        if w.max_concurrent == 0 {
            err(
                "watch.maxConcurrent",
                "is 0: no run would ever start".into(),
                "use 1 or more (default 2)",
            );
        }
        for (column, limit) in &w.column_limits {
            if *limit == 0 {
                err(
                    &format!("watch.columnLimits.{column}"),
                    "is 0: no run could ever enter the column".into(),
                    "use 1 or more, or remove the column to leave it unlimited",
                );
            }
        }
        for (key, value) in [
            ("pollIntervalSec", w.poll_interval_sec),
            ("servePollIntervalSec", w.serve_poll_interval_sec),
        ] {
            if value == 0 {
                err(
                    &format!("watch.{key}"),
                    "is 0".into(),
                    "use a number of seconds of at least 1",
                );
            }
        }
        if w.claim_ttl_sec < 30 {
            err(
                "watch.claimTtlSec",
                format!(
                    "is {}: a claim would expire between refreshes",
                    w.claim_ttl_sec
                ),
                "use 30 seconds or more (default 600)",
            );
        }
        if w.claim_label.trim().is_empty() || w.claim_label.chars().count() > 50 {
            err(
                "watch.claimLabel",
                format!("`{}` is not a label name GitHub takes", w.claim_label),
                "name a label of 1 to 50 characters, such as \"supervisor:running\"",
            );
        }
        let workflow = &w.dispatch_workflow;
        if workflow.trim().is_empty() || workflow.contains(['/', '\\', '?', '#', '%']) {
            err(
                "watch.dispatchWorkflow",
                format!("`{workflow}` is not a workflow file name or id"),
                "name the file in .github/workflows/, such as \"supervisor-dispatch.yml\"",
            );
        }
        if let Some(blank) = w.trigger_columns.iter().find(|c| c.trim().is_empty()) {
            err(
                "watch.triggerColumns",
                format!("holds an empty column name `{blank}`"),
                "name board columns, such as [\"Research\"]",
            );
        }
    }

    /// The `epic` block's limits and names.
    fn validate_epic(&self, err: &mut impl FnMut(&str, String, &str)) {
        let e = &self.epic;
        if e.label.trim().is_empty() || e.label.chars().count() > MAX_LABEL_CHARS {
            err(
                "epic.label",
                format!("`{}` is not a label name GitHub takes", e.label),
                "name a label of 1 to 50 characters, such as \"supervisor:epic\"",
            );
        } else if e.label == self.watch.claim_label {
            err(
                "epic.label",
                format!("`{}` is also watch.claimLabel", e.label),
                "give epics a label of their own, such as \"supervisor:epic\"",
            );
        }
        let taken = [&e.label, &self.watch.claim_label];
        if e.escalation_label.trim().is_empty()
            || e.escalation_label.chars().count() > MAX_LABEL_CHARS
        {
            err(
                "epic.escalationLabel",
                format!("`{}` is not a label name GitHub takes", e.escalation_label),
                "name a label of 1 to 50 characters, such as \"supervisor:escalated\"",
            );
        } else if taken.contains(&&e.escalation_label) {
            err(
                "epic.escalationLabel",
                format!(
                    "`{}` is also epic.label or watch.claimLabel",
                    e.escalation_label
                ),
                "give escalated tasks a label of their own, such as \"supervisor:escalated\"",
            );
        }
        if !(1..=MAX_EPIC_TASKS).contains(&e.max_tasks) {
            err(
                "epic.maxTasks",
                format!("is {}, outside 1 to {MAX_EPIC_TASKS}", e.max_tasks),
                "use 1 to 50 (default 8); an epic larger than that is several epics",
            );
        }
        if e.max_concurrency == 0 {
            err(
                "epic.maxConcurrency",
                "is 0: no task of an epic would ever start".into(),
                "use 1 or more (default 2)",
            );
        }
        if e.max_iterations == 0 {
            err(
                "epic.maxIterations",
                "is 0: no task's pull request would ever be reviewed".into(),
                "use 1 or more (default 3)",
            );
        }
        if e.review_criteria
            .as_ref()
            .is_some_and(|c| c.trim().is_empty())
        {
            err(
                "epic.reviewCriteria",
                "is empty".into(),
                "write the criteria every task's pull request is judged against, or remove the key",
            );
        }
    }

    /// The name of the board option that holds workflow stage `stage` (`columns`, else the
    /// stage's own name).
    pub fn board_option_name<'a>(&'a self, stage: &'a str) -> &'a str {
        self.columns.get(stage).map_or(stage, String::as_str)
    }

    /// The board option that holds `stage`.
    pub fn board_option(&self, stage: &StageId) -> BoardOption {
        BoardOption::new(self.board_option_name(stage.as_str()))
    }

    /// The stage of `workflow` a board option stands for: the stage `columns` maps to it
    /// (ignoring case), else the stage of the option's own name; `None` for a column that is no
    /// stage of the workflow.
    pub fn stage_at(&self, workflow: &Workflow, option: &BoardOption) -> Option<StageId> {
        let mapped = self.columns.iter().find(|(_, o)| option.is(o));
        workflow.stage_id(mapped.map_or(option.as_str(), |(stage, _)| stage.as_str()))
    }

    /// The timeout of one dispatch of `agent`: its `agentTimeoutsMin` entry, else
    /// `agentTimeoutMin`; `None` when that is 0.
    pub fn agent_timeout(&self, agent: &str) -> Option<std::time::Duration> {
        let minutes =
            (self.agent_timeouts_min.get(agent).copied()).unwrap_or(self.agent_timeout_min);
        (minutes > 0.0)
            .then(|| std::time::Duration::try_from_secs_f64(minutes * 60.0).ok())
            .flatten()
    }

    /// How long an agent may write nothing before it is stopped as stalled; `None`: never.
    pub fn agent_stall(&self) -> Option<std::time::Duration> {
        (self.agent_stall_sec > 0).then(|| std::time::Duration::from_secs(self.agent_stall_sec))
    }

    /// Where the branches are pushed and fetched from: `gitUrl` (a relative path is taken from
    /// the repository at `root`), else the repository on the web host of GitHub:
    /// `server_url` (GITHUB_SERVER_URL, as Actions sets it), else the one `api_url`
    /// (GITHUB_API_URL) belongs to: `api.github.com` and `api.<host>` are served from `<host>`,
    /// `<host>/api/v3` (Enterprise Server) from `<host>`, any other API (the sandbox) from itself.
    pub fn git_url(&self, root: &Path, server_url: Option<&str>, api_url: Option<&str>) -> String {
        if let Some(url) = self
            .git_url
            .as_deref()
            .map(str::trim)
            .filter(|u| !u.is_empty())
        {
            let is_path = !url.contains("://") && !url.contains(':');
            return if is_path && Path::new(url).is_relative() {
                root.join(url).display().to_string()
            } else {
                url.to_string()
            };
        }
        let clean = |u: &str| u.trim().trim_end_matches('/').to_string();
        let web = match server_url.map(clean).filter(|u| !u.is_empty()) {
            Some(server) => server,
            None => {
                let api = api_url
                    .map(clean)
                    .filter(|u| !u.is_empty())
                    .unwrap_or_else(|| "https://api.github.com".into());
                web_of_api(&api)
            }
        };
        format!("{web}/{}/{}.git", self.repo.owner, self.repo.name)
    }

    /// The login owning the project board.
    pub fn board_owner(&self) -> &str {
        self.project_owner.as_deref().unwrap_or(&self.repo.owner)
    }

    /// Whether `login` is a trusted codeowner (GitHub logins are case-insensitive).
    pub fn is_codeowner(&self, login: &str) -> bool {
        self.codeowners
            .iter()
            .any(|o| o.eq_ignore_ascii_case(login))
    }

    /// Minimal settings for a repository, as the demo and tests build them.
    pub fn minimal(repo: RepoSlug, project_number: u64, codeowners: Vec<String>) -> Settings {
        let mut block = Map::new();
        block.insert("repo".into(), Value::String(repo.to_string()));
        block.insert("projectNumber".into(), Value::from(project_number));
        block.insert("codeowners".into(), Value::from(codeowners));
        Checker::detached()
            .block(Value::Object(block), "")
            .expect("minimal settings are valid")
    }
}

/// Why `prefix` cannot start commands in comments, if it cannot.
pub fn command_prefix_problem(prefix: &str) -> Option<&'static str> {
    if prefix.is_empty() {
        Some("is empty")
    } else if prefix.len() > 64 {
        Some("is longer than 64 bytes")
    } else if prefix.chars().any(|c| c.is_whitespace() || c.is_control()) {
        Some("contains white space")
    } else if prefix.starts_with(['>', '#', '`', '~', '-', '*', '+', '<', '|', '[', '!', '\\']) {
        Some("starts with a character that Markdown reads as formatting")
    } else {
        None
    }
}

fn is_github_login(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 39
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '[' || c == ']')
        && !s.starts_with('-')
}

fn env_value(raw: &str, kind: Kind) -> Result<Value, String> {
    let raw_trim = raw.trim();
    match kind {
        Kind::Str => Ok(Value::String(raw_trim.to_string())),
        Kind::Int => raw_trim
            .parse::<u64>()
            .map(Value::from)
            .map_err(|_| format!("`{raw_trim}` is not a whole number")),
        Kind::Float => raw_trim
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(Value::Number)
            .ok_or_else(|| format!("`{raw_trim}` is not a number")),
        Kind::Bool => match raw_trim.to_ascii_lowercase().as_str() {
            "1" | "true" | "yes" | "on" => Ok(Value::Bool(true)),
            "0" | "false" | "no" | "off" | "" => Ok(Value::Bool(false)),
            _ => Err(format!("`{raw_trim}` is not true or false")),
        },
        Kind::List => {
            if raw_trim.starts_with('[') {
                serde_json::from_str(raw_trim).map_err(|e| format!("is not a JSON list: {e}"))
            } else {
                Ok(Value::from(
                    raw_trim
                        .split(',')
                        .map(str::trim)
                        .filter(|s| !s.is_empty())
                        .map(String::from)
                        .collect::<Vec<_>>(),
                ))
            }
        }
        Kind::Object => {
            serde_json::from_str(raw_trim).map_err(|e| format!("is not a JSON object: {e}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    fn load(text: &str) -> Result<LoadedSettings, ConfigError> {
        Settings::from_text(Path::new(".pi/settings.json"), text, &no_env)
    }

    const MINIMAL: &str =
        r#"{ "supervisor": { "repo": "acme/app", "projectNumber": 7, "codeowners": ["alice"] } }"#;

    #[test]
    fn the_git_url_comes_from_the_settings_and_the_github_host_never_from_git() {
        let mut s = load(MINIMAL).unwrap().settings;
        let root = Path::new("/src/app");
        let url = |s: &Settings, server, api| s.git_url(root, server, api);
        assert_eq!(url(&s, None, None), "https://github.com/acme/app.git");
        assert_eq!(
            url(
                &s,
                Some("https://github.com/"),
                Some("https://api.github.com")
            ),
            "https://github.com/acme/app.git"
        );
        assert_eq!(
            url(&s, None, Some("https://api.github.com/")),
            "https://github.com/acme/app.git"
        );
        assert_eq!(
            url(&s, None, Some("https://ghe.example.com/api/v3")),
            "https://ghe.example.com/acme/app.git"
        );
        assert_eq!(
            url(&s, None, Some("https://api.octo.ghe.com")),
            "https://octo.ghe.com/acme/app.git"
        );
        assert_eq!(
            url(&s, None, Some("http://127.0.0.1:4000")),
            "http://127.0.0.1:4000/acme/app.git"
        );
        assert_eq!(
            url(
                &s,
                Some("https://ghe.example.com"),
                Some("http://127.0.0.1:4000")
            ),
            "https://ghe.example.com/acme/app.git"
        );
        s.git_url = Some("../remote.git".into());
        assert_eq!(url(&s, None, None), "/src/app/../remote.git");
        s.git_url = Some("git@github.com:acme/app.git".into());
        assert_eq!(url(&s, None, None), "git@github.com:acme/app.git");
        s.git_url = Some("https://mirror.example/app.git".into());
        assert_eq!(
            url(&s, Some("https://github.com"), None),
            "https://mirror.example/app.git"
        );
        let env = |k: &str| (k == "SUPERVISOR_GIT_URL").then(|| "/srv/app.git".to_string());
        let s = Settings::from_text(Path::new("s.json"), MINIMAL, &env)
            .unwrap()
            .settings;
        assert_eq!(url(&s, None, None), "/srv/app.git");
    }

    #[test]
    fn defaults_follow_the_spec() {
        let s = load(MINIMAL).unwrap().settings;
        assert_eq!(s.repo.to_string(), "acme/app");
        assert_eq!(s.project_number, 7);
        assert_eq!(s.status_field, "Status");
        assert_eq!(s.default_branch, "main");
        assert_eq!(s.branch_prefix, "worktree-git-issue-");
        assert_eq!(s.max_rejections, 3);
        assert_eq!(s.audit_score_threshold, 0.75);
        assert_eq!(s.ci_gating_timeout_sec, 300);
        assert_eq!(s.agent_token_budget, 0);
        assert_eq!(s.max_tool_calls, 0);
        assert!(s.agent_timeouts_min.is_empty());
        assert_eq!(s.agent_timeout_min, 60.0);
        assert_eq!(
            s.agent_timeout("developer"),
            Some(std::time::Duration::from_secs(3600)),
            "every dispatch has a time limit by default"
        );
        assert_eq!(s.agent_stall(), Some(std::time::Duration::from_secs(600)));
        assert!(s.prices.is_empty());
        assert!(!s.bell_on_complete);
        assert!(!s.enable_experimental_features);
        assert_eq!(s.gates.ci_poll_interval_sec, 15);
        assert_eq!(s.gates.min_package_age_days, 14);
        assert!(!s.pass_github_token);
        assert_eq!(s.board_owner(), "acme");
    }

    #[test]
    fn every_spec_field_is_read() {
        let text = r#"{ "supervisor": {
            "repo": "o/r", "projectNumber": 2, "statusField": "Column",
            "statusMapping": { "Research": "scout" }, "defaultBranch": "trunk",
            "branchPrefix": "sv/", "codeowners": ["a", "b"], "maxRejections": 5,
            "auditScoreThreshold": 0.5, "ciGatingTimeoutSec": 0, "agentTokenBudget": 1000,
            "maxToolCalls": 40, "agentTimeoutsMin": { "developer": 30 }, "bellOnComplete": true,
            "enableExperimentalFeatures": true } }"#;
        let s = load(text).unwrap().settings;
        assert_eq!(s.status_field, "Column");
        assert_eq!(s.status_mapping["Research"], "scout");
        assert_eq!(s.default_branch, "trunk");
        assert_eq!(s.branch_prefix, "sv/");
        assert_eq!(s.codeowners, vec!["a", "b"]);
        assert_eq!(s.max_rejections, 5);
        assert_eq!(s.audit_score_threshold, 0.5);
        assert_eq!(s.ci_gating_timeout_sec, 0);
        assert_eq!(s.agent_token_budget, 1000);
        assert_eq!(s.max_tool_calls, 40);
        assert_eq!(
            s.agent_timeout("developer"),
            Some(std::time::Duration::from_secs(1800))
        );
        assert!(s.bell_on_complete && s.enable_experimental_features);
    }

    fn single_error(text: &str) -> ConfigIssue {
        let err = load(text).unwrap_err();
        assert_eq!(err.issues.len(), 1, "{err}");
        err.issues.into_iter().next().unwrap()
    }

    #[test]
    fn missing_required_fields_are_named() {
        let e = single_error(r#"{ "supervisor": { "projectNumber": 1, "codeowners": ["a"] } }"#);
        assert_eq!(e.field, "supervisor.repo");
        assert!(e.fix.contains("owner/name"));
        let e = single_error(r#"{ "supervisor": { "repo": "o/r", "projectNumber": 1 } }"#);
        assert_eq!(e.field, "supervisor.codeowners");
        let e = single_error(r#"{ "supervisor": { "repo": "o/r", "codeowners": ["a"] } }"#);
        assert_eq!(e.field, "supervisor.projectNumber");
        let e = single_error(r#"{ "other": {} }"#);
        assert_eq!(e.field, "supervisor");
    }

    #[test]
    fn all_missing_fields_reported_at_once() {
        let err = load(r#"{ "supervisor": {} }"#).unwrap_err();
        let fields: Vec<_> = err.issues.iter().map(|i| i.field.as_str()).collect();
        assert_eq!(
            fields,
            vec![
                "supervisor.repo",
                "supervisor.projectNumber",
                "supervisor.codeowners"
            ]
        );
    }

    #[test]
    fn invalid_thresholds_are_rejected() {
        for bad in ["1.5", "0", "-0.2", "\"high\""] {
            let text = format!(
                r#"{{ "supervisor": {{ "repo": "o/r", "projectNumber": 1, "codeowners": ["a"],
                "auditScoreThreshold": {bad} }} }}"#
            );
            let e = single_error(&text);
            assert_eq!(e.field, "supervisor.auditScoreThreshold", "{bad}");
            assert_eq!(e.line, Some(2), "{bad}");
        }
        for good in ["1", "1.0", "0.01", "0.75"] {
            let text = format!(
                r#"{{ "supervisor": {{ "repo": "o/r", "projectNumber": 1, "codeowners": ["a"],
                "auditScoreThreshold": {good} }} }}"#
            );
            assert!(load(&text).is_ok(), "{good}");
        }
    }

    #[test]
    fn wrong_types_and_shapes() {
        let e = single_error(
            r#"{ "supervisor": { "repo": "not-a-slug", "projectNumber": 1, "codeowners": ["a"] } }"#,
        );
        assert_eq!(e.field, "supervisor.repo");
        let e = single_error(
            r#"{ "supervisor": { "repo": "o/r", "projectNumber": 1, "codeowners": "alice" } }"#,
        );
        assert_eq!(e.field, "supervisor.codeowners");
        assert!(e.problem.contains("expected a list of strings"), "{e}");
        let e = single_error(
            r#"{ "supervisor": { "repo": "o/r", "projectNumber": 1, "codeowners": [] } }"#,
        );
        assert_eq!(e.field, "supervisor.codeowners");
        let e = single_error(
            r#"{ "supervisor": { "repo": "o/r", "projectNumber": 1, "codeowners": ["a"], "maxRejections": -1 } }"#,
        );
        assert_eq!(e.field, "supervisor.maxRejections");
        let e = single_error("{ \"supervisor\": ");
        assert_eq!(e.field, "(file)");
    }

    #[test]
    fn unknown_keys_warn_with_suggestion() {
        let text = r#"{ "supervisor": { "repo": "o/r", "projectNumber": 1, "codeowners": ["a"],
            "maxRejection": 2, "frobnicate": true, "gates": { "allowNpxx": true } } }"#;
        let loaded = load(text).unwrap();
        assert_eq!(loaded.warnings.len(), 3);
        assert_eq!(loaded.warnings[0].field, "supervisor.frobnicate");
        assert!(loaded.warnings[0].fix.contains("remove"));
        assert_eq!(loaded.warnings[1].field, "supervisor.maxRejection");
        assert_eq!(loaded.warnings[1].fix, "did you mean \"maxRejections\"?");
        assert_eq!(loaded.warnings[2].fix, "did you mean \"allowNpx\"?");
        assert_eq!(loaded.settings.max_rejections, 3);
    }

    #[test]
    fn gate_tool_paths_must_be_absolute_directories() {
        let loaded = load(
            r#"{ "supervisor": { "repo": "o/r", "projectNumber": 1, "codeowners": ["a"],
                "gates": { "toolPaths": ["/opt/gate-tools/bin"] } } }"#,
        )
        .unwrap();
        assert_eq!(
            loaded.settings.gates.tool_paths,
            vec![PathBuf::from("/opt/gate-tools/bin")]
        );
        let e = single_error(
            r#"{ "supervisor": { "repo": "o/r", "projectNumber": 1, "codeowners": ["a"],
                "gates": { "toolPaths": ["/opt/bin", "node_modules/.bin"] } } }"#,
        );
        assert_eq!(e.field, "supervisor.gates.toolPaths[1]");
        assert!(e.problem.contains("not an absolute path"), "{e}");
        let e = single_error(
            r#"{ "supervisor": { "repo": "o/r", "projectNumber": 1, "codeowners": ["a"],
                "gates": { "toolPaths": "/opt/bin" } } }"#,
        );
        assert!(e.field.starts_with("supervisor.gates.toolPaths"), "{e}");
    }

    #[test]
    fn environment_overrides() {
        let env = |k: &str| match k {
            "SUPERVISOR_AUDIT_SCORE_THRESHOLD" => Some("0.9".to_string()),
            "SUPERVISOR_CODEOWNERS" => Some("x, y".to_string()),
            "SUPERVISOR_BELL_ON_COMPLETE" => Some("yes".to_string()),
            "SUPERVISOR_PROJECT_NUMBER" => Some("12".to_string()),
            _ => None,
        };
        let loaded = Settings::from_text(Path::new("s.json"), MINIMAL, &env).unwrap();
        assert_eq!(loaded.settings.audit_score_threshold, 0.9);
        assert_eq!(loaded.settings.codeowners, vec!["x", "y"]);
        assert!(loaded.settings.bell_on_complete);
        assert_eq!(loaded.settings.project_number, 12);
        assert_eq!(loaded.overridden.len(), 4);

        let bad = |k: &str| (k == "SUPERVISOR_MAX_REJECTIONS").then(|| "many".to_string());
        let err = Settings::from_text(Path::new("s.json"), MINIMAL, &bad).unwrap_err();
        assert_eq!(err.issues[0].file, Path::new("$SUPERVISOR_MAX_REJECTIONS"));
        let bad = |k: &str| (k == "SUPERVISOR_AUDIT_SCORE_THRESHOLD").then(|| "2".to_string());
        let err = Settings::from_text(Path::new("s.json"), MINIMAL, &bad).unwrap_err();
        assert_eq!(err.issues[0].field, "supervisor.auditScoreThreshold");
    }

    #[test]
    fn env_names() {
        assert_eq!(env_name("projectNumber"), "SUPERVISOR_PROJECT_NUMBER");
        assert_eq!(env_name("repo"), "SUPERVISOR_REPO");
        assert_eq!(
            env_name("ciGatingTimeoutSec"),
            "SUPERVISOR_CI_GATING_TIMEOUT_SEC"
        );
    }

    #[test]
    fn missing_file_names_the_paths_and_supervisor_init() {
        let dir = tempfile::tempdir().unwrap();
        let err = Settings::load(dir.path(), &no_env).unwrap_err();
        assert!(err.issues[0].file.ends_with(".supervisor/settings.json"));
        let text = err.to_string();
        assert!(text.contains("no settings file found"), "{text}");
        for path in SETTINGS_PATHS {
            let looked = dir.path().join(path).display().to_string();
            assert!(text.contains(&looked), "{looked} missing from {text}");
        }
        assert!(
            text.contains("run `supervisor init` to create .supervisor/settings.json"),
            "{text}"
        );
        assert!(text.contains("commit and push it"), "{text}");
    }

    #[test]
    fn codeowner_match_is_case_insensitive() {
        let s = load(MINIMAL).unwrap().settings;
        assert!(s.is_codeowner("Alice"));
        assert!(!s.is_codeowner("mallory"));
    }

    #[test]
    fn repo_slugs() {
        assert!(RepoSlug::parse("a/b").is_some());
        assert!(RepoSlug::parse("a/b/c").is_none());
        assert!(RepoSlug::parse("../b").is_none());
        assert!(RepoSlug::parse("a/").is_none());
        assert!(RepoSlug::parse("a b/c").is_none());
    }

    #[test]
    fn pass_github_token_is_read_under_its_documented_spelling() {
        let text = r#"{ "supervisor": { "repo": "o/r", "projectNumber": 1, "codeowners": ["a"],
            "passGitHubToken": true } }"#;
        let loaded = load(text).unwrap();
        assert!(loaded.settings.pass_github_token);
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);

        let text = r#"{ "supervisor": { "repo": "o/r", "projectNumber": 1, "codeowners": ["a"],
            "passGithubToken": true } }"#;
        let loaded = load(text).unwrap();
        assert!(
            !loaded.settings.pass_github_token,
            "only one spelling is read"
        );
        assert_eq!(loaded.warnings.len(), 1);
        assert_eq!(loaded.warnings[0].field, "supervisor.passGithubToken");
        assert_eq!(loaded.warnings[0].fix, "did you mean \"passGitHubToken\"?");
    }

    #[test]
    fn pass_github_token_from_the_environment() {
        let env = |k: &str| (k == "SUPERVISOR_PASS_GIT_HUB_TOKEN").then(|| "true".to_string());
        let loaded = Settings::from_text(Path::new("s.json"), MINIMAL, &env).unwrap();
        assert!(loaded.settings.pass_github_token);
        assert_eq!(loaded.overridden, vec!["passGitHubToken"]);
    }

    fn load_file(bytes: &[u8]) -> Result<LoadedSettings, ConfigError> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".pi")).unwrap();
        std::fs::write(dir.path().join(".pi/settings.json"), bytes).unwrap();
        Settings::load(dir.path(), &no_env)
    }

    #[test]
    fn a_utf8_byte_order_mark_is_accepted() {
        let mut bytes = "\u{feff}".as_bytes().to_vec();
        bytes.extend_from_slice(MINIMAL.as_bytes());
        let loaded = load_file(&bytes).unwrap();
        assert_eq!(loaded.settings.repo.to_string(), "acme/app");
    }

    #[test]
    fn a_non_utf8_file_names_the_first_bad_byte() {
        let mut bytes = b"{\n  \"supervisor\": {\n    \"repo\": \"o/r\", \"x\": \"caf".to_vec();
        bytes.push(0xE9); // Latin-1 é
        bytes.extend_from_slice(b"\" }\n}\n");
        let err = load_file(&bytes).unwrap_err();
        assert_eq!(err.issues.len(), 1, "{err}");
        let issue = &err.issues[0];
        assert!(issue.file.ends_with(".pi/settings.json"), "{issue}");
        assert_eq!(issue.line, Some(3), "{issue}");
        assert!(issue.problem.contains("not UTF-8"), "{issue}");
        assert!(issue.problem.contains("0xE9"), "{issue}");
        assert!(issue.problem.contains("line 3, column 29"), "{issue}");
        assert!(!issue.fix.contains("permission"), "{issue}");
        assert!(issue.fix.contains("UTF-8"), "{issue}");
    }

    #[test]
    fn a_utf16_file_is_named_as_such() {
        let mut bytes = vec![0xFF, 0xFE];
        for unit in MINIMAL.encode_utf16() {
            bytes.extend_from_slice(&unit.to_le_bytes());
        }
        let err = load_file(&bytes).unwrap_err();
        assert!(err.issues[0].problem.contains("UTF-16"), "{err}");
        assert!(err.issues[0].fix.contains("UTF-8"), "{err}");
    }

    #[test]
    fn duplicate_keys_are_errors_naming_the_key_and_both_lines() {
        let text = "{ \"supervisor\": {\n  \"repo\": \"o/r\",\n  \"projectNumber\": 1,\n  \"codeowners\": [\"a\"],\n  \"repo\": \"o/other\",\n  \"gates\": { \"allowNpx\": true,\n    \"allowNpx\": false } } }";
        let err = load(text).unwrap_err();
        let fields: Vec<_> = err.issues.iter().map(|i| i.field.as_str()).collect();
        assert_eq!(
            fields,
            vec!["supervisor.repo", "supervisor.gates.allowNpx"],
            "{err}"
        );
        let repo = &err.issues[0];
        assert_eq!(repo.line, Some(5), "{repo}");
        assert!(repo.problem.contains("lines 2 and 5"), "{repo}");
        assert!(repo.fix.contains("remove"), "{repo}");
        assert!(err.issues[1].problem.contains("lines 6 and 7"), "{err}");

        // The same key in two different objects is no duplicate.
        let text = r#"{ "supervisor": { "repo": "o/r", "projectNumber": 1, "codeowners": ["a"],
            "backends": { "x": { "command": ["x"] }, "y": { "command": ["y"] } } } }"#;
        assert!(load(text).is_ok());
    }

    #[test]
    fn a_typo_of_a_missing_required_field_is_named_with_its_fix() {
        let text = "{ \"supervisor\": {\n  \"repo\": \"o/r\",\n  \"projectNumber\": 1,\n  \"codeowner\": [\"a\"]\n} }";
        let err = load(text).unwrap_err();
        assert_eq!(err.issues.len(), 1, "{err}");
        let issue = &err.issues[0];
        assert_eq!(issue.field, "supervisor.codeowners");
        assert_eq!(issue.line, Some(4), "{issue}");
        assert!(issue.problem.contains("is missing"), "{issue}");
        assert!(issue.problem.contains("\"codeowner\""), "{issue}");
        assert_eq!(issue.fix, "rename \"codeowner\" to \"codeowners\"");
    }

    #[test]
    fn unknown_keys_are_reported_alongside_errors() {
        let text = r#"{ "supervisor": { "repo": "o/r", "projectNumber": 0, "codeowners": ["a"],
            "maxRejection": 2 } }"#;
        let err = load(text).unwrap_err();
        assert_eq!(err.issues[0].field, "supervisor.projectNumber");
        assert!(
            err.to_string()
                .contains("`supervisor.maxRejection`: is not a known setting — did you mean \"maxRejections\"?"),
            "{err}"
        );
    }

    /// `| `key` | …` rows of the README table under `heading`.
    fn readme_keys(readme: &str, heading: &str) -> Vec<String> {
        let section = readme.split(heading).nth(1).expect(heading);
        section
            .lines()
            .skip_while(|l| !l.starts_with('|'))
            .take_while(|l| l.starts_with('|'))
            .filter_map(|l| l.strip_prefix("| `")?.split('`').next().map(String::from))
            .collect()
    }

    #[test]
    fn the_readme_documents_every_setting_and_no_other() {
        let readme = std::fs::read_to_string(
            Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join("README.md"),
        )
        .unwrap();
        let required: Vec<String> = Settings::FIELDS
            .iter()
            .filter(|f| f.required)
            .map(|f| f.key.to_string())
            .collect();
        let mut optional = Vec::new();
        for field in Settings::FIELDS.iter().filter(|f| !f.required) {
            match field.nested {
                // A nested block is documented key by key.
                Some(nested) => {
                    optional.extend(nested.iter().map(|n| format!("{}.{}", field.key, n.key)))
                }
                None => optional.push(field.key.to_string()),
            }
        }
        assert_eq!(readme_keys(&readme, "### Required"), required);
        assert_eq!(readme_keys(&readme, "### Optional"), optional);
    }

    #[test]
    fn a_dispatch_without_a_time_limit_is_a_warning_and_a_negative_one_an_error() {
        assert!(load(MINIMAL).unwrap().warnings.is_empty());
        let text = r#"{ "supervisor": { "repo": "o/r", "projectNumber": 1, "codeowners": ["a"],
            "agentTimeoutMin": 0, "agentTimeoutsMin": { "developer": 0, "auditor": 5 } } }"#;
        let loaded = load(text).unwrap();
        let s = &loaded.settings;
        assert_eq!(s.agent_timeout("researcher"), None);
        assert_eq!(s.agent_timeout("developer"), None);
        assert_eq!(
            s.agent_timeout("auditor"),
            Some(std::time::Duration::from_secs(300))
        );
        let fields: Vec<&str> = loaded.warnings.iter().map(|w| w.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "supervisor.agentTimeoutMin",
                "supervisor.agentTimeoutsMin.developer"
            ]
        );
        assert!(
            loaded.warnings[0].problem.contains("no time limit")
                && loaded.warnings[0].problem.contains("agentStallSec stops"),
            "{}",
            loaded.warnings[0]
        );
        for (key, value) in [
            ("agentTimeoutMin", "-1"),
            ("agentTimeoutsMin", r#"{ "developer": -5 }"#),
            (
                "prices",
                r#"{ "m": { "inputPerMTok": -1, "outputPerMTok": 1 } }"#,
            ),
        ] {
            let text = format!(
                r#"{{ "supervisor": {{ "repo": "o/r", "projectNumber": 1, "codeowners": ["a"], "{key}": {value} }} }}"#
            );
            let e = single_error(&text);
            assert!(e.field.starts_with(&format!("supervisor.{key}")), "{e}");
            assert!(e.problem.contains("-1") || e.problem.contains("-5"), "{e}");
        }
    }

    #[test]
    fn prices_are_read_per_model() {
        let text = r#"{ "supervisor": { "repo": "o/r", "projectNumber": 1, "codeowners": ["a"],
            "prices": { "my-model": { "inputPerMTok": 2, "outputPerMTok": 8, "cacheReadPerMTok": 0.5 } } } }"#;
        let s = load(text).unwrap().settings;
        let p = &s.prices["my-model"];
        assert_eq!(
            (p.input, p.output, p.cache_read, p.cache_write),
            (2.0, 8.0, Some(0.5), None)
        );
        let e = single_error(
            r#"{ "supervisor": { "repo": "o/r", "projectNumber": 1, "codeowners": ["a"],
            "prices": { "my-model": { "inputPerMTok": 2 } } } }"#,
        );
        assert_eq!(e.field, "supervisor.prices.my-model.outputPerMTok");
    }

    #[test]
    fn watch_settings_are_read_and_checked() {
        let s = load(MINIMAL).unwrap().settings;
        assert_eq!(s.watch.command_prefix, "/supervisor");
        assert_eq!(s.watch.trigger_label, None);
        let text = r#"{ "supervisor": { "repo": "o/r", "projectNumber": 1, "codeowners": ["a"],
            "watch": { "commandPrefix": "@acme-bot", "triggerLabel": "supervisor" } } }"#;
        let s = load(text).unwrap().settings;
        assert_eq!(s.watch.command_prefix, "@acme-bot");
        assert_eq!(s.watch.trigger_label.as_deref(), Some("supervisor"));
        for (value, problem) in [
            ("\"\"", "is empty"),
            ("\"run it\"", "white space"),
            ("\">quote\"", "formatting"),
        ] {
            let text = format!(
                r#"{{ "supervisor": {{ "repo": "o/r", "projectNumber": 1, "codeowners": ["a"],
                "watch": {{ "commandPrefix": {value} }} }} }}"#
            );
            let e = single_error(&text);
            assert_eq!(e.field, "supervisor.watch.commandPrefix", "{value}");
            assert!(e.problem.contains(problem), "{e}");
        }
        let e = single_error(
            r#"{ "supervisor": { "repo": "o/r", "projectNumber": 1, "codeowners": ["a"],
            "watch": { "triggerLabel": " " } } }"#,
        );
        assert_eq!(e.field, "supervisor.watch.triggerLabel");
    }

    #[test]
    fn the_table_is_the_struct() {
        let serialized = serde_json::to_value(load(MINIMAL).unwrap().settings).unwrap();
        // Serialized keys come out sorted.
        let same_keys = |value: &Value, fields: &[crate::config::schema::Field]| {
            let mut declared: Vec<&str> = fields.iter().map(|f| f.key).collect();
            declared.sort_unstable();
            let keys: Vec<&str> = value
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect();
            assert_eq!(keys, declared);
        };
        same_keys(&serialized, Settings::FIELDS);
        same_keys(&serialized["gates"], GateSettings::FIELDS);
        same_keys(&serialized["watch"], WatchSettings::FIELDS);
        same_keys(&serialized["epic"], EpicSettings::FIELDS);
        for field in Settings::FIELDS {
            assert!(
                !field.summary().is_empty(),
                "{} has no doc comment",
                field.key
            );
            assert!(
                !field.required || field.example.is_some(),
                "required {} needs an example for its fix",
                field.key
            );
        }
    }

    #[test]
    fn serialized_settings_load_back_unchanged() {
        let text = r#"{ "supervisor": { "repo": "o/r", "projectNumber": 2, "codeowners": ["a"],
            "passGitHubToken": true, "draftPr": true, "setupCommands": ["make"],
            "agentScript": "s.yaml", "statusMapping": { "Research": "scout" },
            "backends": { "aider": { "command": ["aider"], "promptVia": "arg" } },
            "gates": { "allowNpx": true, "exclude": ["dist/"], "maxChangedFiles": 9 } } }"#;
        let s = load(text).unwrap().settings;
        let again = serde_json::json!({ "supervisor": s }).to_string();
        assert_eq!(load(&again).unwrap().settings, s);
        assert!(load(&again).unwrap().warnings.is_empty());
    }

    #[test]
    fn every_example_is_a_valid_value() {
        for field in Settings::FIELDS {
            let Some(example) = field.example else {
                continue;
            };
            let mut block: Map<String, Value> = serde_json::from_str(
                r#"{ "repo": "o/r", "projectNumber": 1, "codeowners": ["a"] }"#,
            )
            .unwrap();
            block.insert(field.key.into(), serde_json::from_str(example).unwrap());
            let text = serde_json::json!({ "supervisor": block }).to_string();
            let loaded = load(&text).unwrap_or_else(|e| panic!("{}: {e}", field.key));
            assert!(loaded.warnings.is_empty(), "{}", field.key);
        }
        for field in GateSettings::FIELDS {
            let Some(example) = field.example else {
                continue;
            };
            let text = format!(
                r#"{{ "supervisor": {{ "repo": "o/r", "projectNumber": 1, "codeowners": ["a"],
                   "gates": {{ "{}": {example} }} }} }}"#,
                field.key
            );
            load(&text).unwrap_or_else(|e| panic!("gates.{}: {e}", field.key));
        }
        for field in EpicSettings::FIELDS {
            let example = field.example.expect("every epic setting shows an example");
            let text = format!(
                r#"{{ "supervisor": {{ "repo": "o/r", "projectNumber": 1, "codeowners": ["a"],
                   "epic": {{ "{}": {example} }} }} }}"#,
                field.key
            );
            let loaded = load(&text).unwrap_or_else(|e| panic!("epic.{}: {e}", field.key));
            assert!(loaded.warnings.is_empty(), "epic.{}", field.key);
        }
    }

    #[test]
    fn epic_settings_have_defaults_and_are_read() {
        let e = load(MINIMAL).unwrap().settings.epic;
        assert_eq!(e, EpicSettings::default());
        assert_eq!(e.label, "supervisor:epic");
        assert_eq!(
            (e.max_tasks, e.max_concurrency, e.max_iterations),
            (8, 2, 3)
        );
        assert_eq!(e.integration, EpicIntegration::Branch);
        assert_eq!(e.review_criteria, None);
        let text = r#"{ "supervisor": { "repo": "o/r", "projectNumber": 1, "codeowners": ["a"],
            "epic": { "label": "epic", "maxTasks": 50, "maxConcurrency": 1, "maxIterations": 1,
                      "integration": "independent", "reviewCriteria": "No new dependency." } } }"#;
        let e = load(text).unwrap().settings.epic;
        assert_eq!(e.label, "epic");
        assert_eq!(
            (e.max_tasks, e.max_concurrency, e.max_iterations),
            (50, 1, 1)
        );
        assert_eq!(e.integration, EpicIntegration::Independent);
        assert_eq!(e.review_criteria.as_deref(), Some("No new dependency."));
    }

    #[test]
    fn every_bad_epic_setting_is_named_at_once_with_what_to_do() {
        let text = r#"{ "supervisor": { "repo": "o/r", "projectNumber": 1, "codeowners": ["a"],
            "epic": { "label": "", "maxTasks": 0, "maxConcurrency": 0, "maxIterations": 0,
                      "integration": "merged", "reviewCriteria": "  " } } }"#;
        let err = load(text).unwrap_err();
        let found: Vec<(&str, &str)> = err
            .issues
            .iter()
            .map(|i| (i.field.as_str(), i.fix.as_str()))
            .collect();
        assert_eq!(
            found,
            [
                (
                    "supervisor.epic.integration",
                    r#"write it like "integration": "independent""#
                ),
                (
                    "supervisor.epic.label",
                    "name a label of 1 to 50 characters, such as \"supervisor:epic\""
                ),
                (
                    "supervisor.epic.maxTasks",
                    "use 1 to 50 (default 8); an epic larger than that is several epics"
                ),
                (
                    "supervisor.epic.maxConcurrency",
                    "use 1 or more (default 2)"
                ),
                ("supervisor.epic.maxIterations", "use 1 or more (default 3)"),
                (
                    "supervisor.epic.reviewCriteria",
                    "write the criteria every task's pull request is judged against, or remove the key"
                ),
            ],
            "{err}"
        );
        assert!(
            err.issues[0].problem.contains("unknown variant `merged`"),
            "{err}"
        );
        assert_eq!(err.issues[0].line, Some(3), "{err}");
        assert_eq!(err.issues[2].problem, "is 0, outside 1 to 50");
        assert!(
            err.issues[3]
                .problem
                .contains("no task of an epic would ever start")
        );

        for (value, problem) in [
            ("51", "is 51, outside 1 to 50"),
            ("-1", "is the number -1, expected a whole number ≥ 0"),
            (
                "\"many\"",
                "is the string \"many\", expected a whole number ≥ 0",
            ),
        ] {
            let e = single_error(&format!(
                r#"{{ "supervisor": {{ "repo": "o/r", "projectNumber": 1, "codeowners": ["a"],
                "epic": {{ "maxTasks": {value} }} }} }}"#
            ));
            assert_eq!(e.field, "supervisor.epic.maxTasks", "{value}");
            assert_eq!(e.problem, problem, "{value}");
        }
        let e = single_error(
            r#"{ "supervisor": { "repo": "o/r", "projectNumber": 1, "codeowners": ["a"],
            "watch": { "claimLabel": "ours" }, "epic": { "label": "ours" } } }"#,
        );
        assert_eq!(e.field, "supervisor.epic.label");
        assert!(e.problem.contains("also watch.claimLabel"), "{e}");
        let e = single_error(
            r#"{ "supervisor": { "repo": "o/r", "projectNumber": 1, "codeowners": ["a"],
            "epic": { "label": "big", "escalationLabel": "big" } } }"#,
        );
        assert_eq!(e.field, "supervisor.epic.escalationLabel");
        assert!(e.problem.contains("also epic.label"), "{e}");
        let e = single_error(
            r#"{ "supervisor": { "repo": "o/r", "projectNumber": 1, "codeowners": ["a"],
            "epic": "on" } }"#,
        );
        assert_eq!(e.field, "supervisor.epic");
        assert_eq!(e.problem, "is the string \"on\", expected an object");
    }

    #[test]
    fn an_unknown_epic_key_is_a_warning_with_the_key_it_looks_like() {
        let text = r#"{ "supervisor": { "repo": "o/r", "projectNumber": 1, "codeowners": ["a"],
            "epic": { "maxTask": 4, "colour": "red" } } }"#;
        let loaded = load(text).unwrap();
        let warnings: Vec<(&str, &str)> = loaded
            .warnings
            .iter()
            .map(|w| (w.field.as_str(), w.fix.as_str()))
            .collect();
        assert_eq!(
            warnings,
            [
                ("supervisor.epic.colour", "remove it; it is ignored"),
                ("supervisor.epic.maxTask", "did you mean \"maxTasks\"?"),
            ]
        );
        assert_eq!(loaded.settings.epic.max_tasks, 8, "the default stands");
    }

    #[test]
    fn messages_come_from_the_declaration() {
        // A wrong type inside a map names the entry, and the fix shows the field's example.
        let e = single_error(
            r#"{ "supervisor": { "repo": "o/r", "projectNumber": 1, "codeowners": ["a"],
                "statusMapping": { "Research": 3 } } }"#,
        );
        assert_eq!(e.field, "supervisor.statusMapping.Research");
        assert_eq!(e.line, Some(2));
        assert_eq!(e.problem, "is the number 3, expected a string");
        assert_eq!(
            e.fix,
            r#"make it a string, e.g. "statusMapping": { "Research": "researcher" }"#
        );
        // A list item.
        let e = single_error(
            "{ \"supervisor\": { \"repo\": \"o/r\", \"projectNumber\": 1,\n \"codeowners\": [\"a\",\n true] } }",
        );
        assert_eq!(e.field, "supervisor.codeowners[1]");
        assert_eq!(e.line, Some(3));
        // A missing field of a nested block, and an unknown key in it.
        let err = load(
            r#"{ "supervisor": { "repo": "o/r", "projectNumber": 1, "codeowners": ["a"],
                "backends": { "aider": { "promptVia": "args", "comand": ["aider"] } } } }"#,
        )
        .unwrap_err();
        let fields: Vec<_> = err.issues.iter().map(|i| i.field.as_str()).collect();
        assert_eq!(
            fields,
            vec![
                "supervisor.backends.aider.command",
                "supervisor.backends.aider.promptVia"
            ],
            "{err}"
        );
        assert_eq!(err.issues[0].fix, "rename \"comand\" to \"command\"");
        assert!(
            err.issues[1].problem.contains("unknown variant `args`"),
            "{err}"
        );
        // null is accepted where the field is optional only.
        assert!(
            load(r#"{ "supervisor": { "repo": "o/r", "projectNumber": 1, "codeowners": ["a"], "workflow": null } }"#)
                .is_ok()
        );
        let e = single_error(
            r#"{ "supervisor": { "repo": "o/r", "projectNumber": 1, "codeowners": ["a"], "draftPr": null } }"#,
        );
        assert_eq!(e.problem, "is null, expected true or false");
        // The missing-field fix is built from the example and the doc comment.
        let e = single_error(r#"{ "supervisor": { "repo": "o/r", "codeowners": ["a"] } }"#);
        assert_eq!(
            e.fix,
            "add \"projectNumber\": 1, the number of the GitHub Projects (v2) board, as in its URL (github.com/orgs/ORG/projects/N)"
        );
    }

    #[test]
    fn gate_settings_default_to_their_declaration() {
        let g = GateSettings::default();
        assert_eq!(g.ci_poll_interval_sec, 15);
        assert_eq!(g.npm_registry, "https://registry.npmjs.org");
        assert!(CommandBackend::defaults().is_none(), "command is required");
    }
}
