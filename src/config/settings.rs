//! The `supervisor` block of `.pi/settings.json`, its defaults, `SUPERVISOR_*` overrides and validation.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::issue::{ConfigError, ConfigIssue, did_you_mean, json_key_line};

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

/// A user-defined agent CLI: `{ "command": ["aider", "--yes", "--message", "{prompt}"], "promptVia": "arg" }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CommandBackend {
    /// Program and arguments. `{prompt}`, `{system_prompt}`, `{model}` and `{role}` are substituted.
    pub command: Vec<String>,
    #[serde(default)]
    pub prompt_via: PromptVia,
}

/// Settings of the quality gates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct GateSettings {
    /// Allow running a pinned `npx` version of a tool that is neither in `node_modules/.bin` nor on PATH.
    pub allow_npx: bool,
    /// Seconds between check-run polls of the CI gate.
    pub ci_poll_interval_sec: u64,
    /// Per-tool timeout.
    pub tool_timeout_sec: u64,
    /// Dependency versions published fewer days ago than this are flagged.
    pub min_package_age_days: u64,
    /// Flagged packages block instead of warning.
    pub package_safety_blocking: bool,
    /// npm registry to ask for publish dates.
    pub npm_registry: String,
    /// More changed files than this is flagged by traceability.
    pub max_changed_files: usize,
    /// Globs of files the gates leave out (generated code, vendored code, fixtures): `dist/`,
    /// `**/*.generated.ts`.
    pub exclude: Vec<String>,
}

impl Default for GateSettings {
    fn default() -> Self {
        GateSettings {
            allow_npx: false,
            ci_poll_interval_sec: 15,
            tool_timeout_sec: 300,
            min_package_age_days: 14,
            package_safety_blocking: false,
            npm_registry: "https://registry.npmjs.org".into(),
            max_changed_files: 50,
            exclude: Vec::new(),
        }
    }
}

/// The validated `supervisor` settings block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Settings {
    pub repo: RepoSlug,
    pub project_number: u64,
    /// Login of the user or organization owning the board; the repository owner when absent.
    #[serde(default)]
    pub project_owner: Option<String>,
    #[serde(default = "default_status_field")]
    pub status_field: String,
    /// Board column → agent name. Overrides the workflow's `agentName` for that column.
    #[serde(default)]
    pub status_mapping: BTreeMap<String, String>,
    #[serde(default = "default_branch")]
    pub default_branch: String,
    #[serde(default = "default_branch_prefix")]
    pub branch_prefix: String,
    pub codeowners: Vec<String>,
    #[serde(default = "default_max_rejections")]
    pub max_rejections: u32,
    #[serde(default = "default_threshold")]
    pub audit_score_threshold: f64,
    /// 0 skips the CI gate entirely.
    #[serde(default = "default_ci_timeout")]
    pub ci_gating_timeout_sec: u64,
    /// Summed tokens per agent dispatch; 0 = unlimited.
    #[serde(default)]
    pub agent_token_budget: u64,
    /// Tool calls per agent dispatch; 0 = unlimited.
    #[serde(default)]
    pub max_tool_calls: u64,
    /// Agent name → timeout in minutes.
    #[serde(default)]
    pub agent_timeouts_min: BTreeMap<String, f64>,
    #[serde(default)]
    pub bell_on_complete: bool,
    #[serde(default)]
    pub enable_experimental_features: bool,

    /// Backend for agents whose definition names none: pi, claude, codex, scripted, or a key of `backends`.
    #[serde(default = "default_backend")]
    pub agent_backend: String,
    /// Custom command backends by name.
    #[serde(default)]
    pub backends: BTreeMap<String, CommandBackend>,
    /// Script file for the `scripted` backend (tests and the demo).
    #[serde(default)]
    pub agent_script: Option<PathBuf>,
    /// Environment variables passed to agents in addition to the basics (PATH, HOME, the locale) and,
    /// unless `agentEnvDefaults` is false, the common provider variables.
    #[serde(default)]
    pub agent_env: Vec<String>,
    /// Whether agents get the built-in list of provider variables; `false`: only `agentEnv` is added
    /// to the basics.
    #[serde(default = "default_true")]
    pub agent_env_defaults: bool,
    /// Size cap of each agent transcript file (stdout and stderr each), in MiB; 0 = no cap.
    #[serde(default = "default_transcript_max_mb")]
    pub agent_transcript_max_mb: u64,
    /// Pass the GitHub token to agents (off: agents never see it).
    #[serde(default)]
    pub pass_github_token: bool,
    /// Directory in which worktrees are created; the repository's parent when absent.
    #[serde(default)]
    pub worktree_root: Option<PathBuf>,
    /// Git-ignored files copied from the repository into each worktree when present.
    #[serde(default = "default_copy_files")]
    pub copy_files: Vec<String>,
    /// Shell commands run in a new worktree; absent = `npm ci` when a package-lock.json exists.
    #[serde(default)]
    pub setup_commands: Option<Vec<String>>,
    /// Attempts per setup command.
    #[serde(default = "default_setup_attempts")]
    pub setup_attempts: u32,
    /// Workflow file, relative to the repository root; the built-in workflow when absent.
    #[serde(default)]
    pub workflow: Option<PathBuf>,
    /// Directory of role-agent overrides, relative to the repository root.
    #[serde(default)]
    pub agents_dir: Option<PathBuf>,
    #[serde(default)]
    pub gates: GateSettings,
    /// Open pull requests as drafts.
    #[serde(default)]
    pub draft_pr: bool,
}

fn default_status_field() -> String {
    "Status".into()
}
fn default_branch() -> String {
    "main".into()
}
fn default_branch_prefix() -> String {
    "worktree-git-issue-".into()
}
fn default_max_rejections() -> u32 {
    3
}
fn default_threshold() -> f64 {
    0.75
}
fn default_ci_timeout() -> u64 {
    300
}
fn default_backend() -> String {
    "pi".into()
}
fn default_setup_attempts() -> u32 {
    2
}
fn default_copy_files() -> Vec<String> {
    vec![".env".into()]
}
fn default_true() -> bool {
    true
}
fn default_transcript_max_mb() -> u64 {
    16
}

/// How a settings field is typed, for environment overrides.
#[derive(Clone, Copy)]
enum Kind {
    Str,
    Int,
    Float,
    Bool,
    List,
    Object,
}

/// Every key of the `supervisor` block, with its type.
const FIELDS: &[(&str, Kind)] = &[
    ("repo", Kind::Str),
    ("projectNumber", Kind::Int),
    ("projectOwner", Kind::Str),
    ("statusField", Kind::Str),
    ("statusMapping", Kind::Object),
    ("defaultBranch", Kind::Str),
    ("branchPrefix", Kind::Str),
    ("codeowners", Kind::List),
    ("maxRejections", Kind::Int),
    ("auditScoreThreshold", Kind::Float),
    ("ciGatingTimeoutSec", Kind::Int),
    ("agentTokenBudget", Kind::Int),
    ("maxToolCalls", Kind::Int),
    ("agentTimeoutsMin", Kind::Object),
    ("bellOnComplete", Kind::Bool),
    ("enableExperimentalFeatures", Kind::Bool),
    ("agentBackend", Kind::Str),
    ("backends", Kind::Object),
    ("agentScript", Kind::Str),
    ("agentEnv", Kind::List),
    ("agentEnvDefaults", Kind::Bool),
    ("agentTranscriptMaxMb", Kind::Int),
    ("passGitHubToken", Kind::Bool),
    ("worktreeRoot", Kind::Str),
    ("copyFiles", Kind::List),
    ("setupCommands", Kind::List),
    ("setupAttempts", Kind::Int),
    ("workflow", Kind::Str),
    ("agentsDir", Kind::Str),
    ("gates", Kind::Object),
    ("draftPr", Kind::Bool),
];

const GATE_FIELDS: &[&str] = &[
    "allowNpx",
    "ciPollIntervalSec",
    "toolTimeoutSec",
    "minPackageAgeDays",
    "packageSafetyBlocking",
    "npmRegistry",
    "maxChangedFiles",
    "exclude",
];

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
}

impl Settings {
    /// Find and load the settings of the repository at `root`, applying `env` overrides.
    pub fn load(
        root: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<LoadedSettings, ConfigError> {
        let Some(path) = SETTINGS_PATHS
            .iter()
            .map(|p| root.join(p))
            .find(|p| p.is_file())
        else {
            return Err(ConfigError::one(ConfigIssue::new(
                &root.join(SETTINGS_PATHS[0]),
                "supervisor",
                "no settings file found",
                format!(
                    "create {} with a \"supervisor\" block holding at least \"repo\", \"projectNumber\" and \"codeowners\" (see the README, Configuration)",
                    SETTINGS_PATHS[0]
                ),
            )));
        };
        let text = std::fs::read_to_string(&path).map_err(|e| {
            ConfigError::one(ConfigIssue::new(
                &path,
                "supervisor",
                format!("cannot be read: {e}"),
                "check the file's permissions",
            ))
        })?;
        Self::from_text(&path, &text, env)
    }

    /// Parse settings from the text of a settings file.
    pub fn from_text(
        path: &Path,
        text: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<LoadedSettings, ConfigError> {
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
        let block = match doc.get("supervisor") {
            Some(Value::Object(map)) => map.clone(),
            Some(_) => {
                return Err(ConfigError::one(
                    ConfigIssue::new(
                        path,
                        "supervisor",
                        "is not an object",
                        "make \"supervisor\" an object of settings",
                    )
                    .at_line(json_key_line(text, "supervisor")),
                ));
            }
            None => {
                return Err(ConfigError::one(ConfigIssue::new(
                    path,
                    "supervisor",
                    "is missing",
                    "add a \"supervisor\" block with \"repo\", \"projectNumber\" and \"codeowners\" (see the README, Configuration)",
                )));
            }
        };
        Self::from_block(path, text, block, env)
    }

    fn from_block(
        path: &Path,
        text: &str,
        mut block: Map<String, Value>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<LoadedSettings, ConfigError> {
        let mut errors = Vec::new();
        let mut warnings = Vec::new();
        let line = |key: &str| json_key_line(text, key);
        let known: Vec<&str> = FIELDS.iter().map(|(k, _)| *k).collect();

        // Unknown keys: warn, suggest, and drop so the typed parse succeeds.
        let unknown: Vec<String> = block
            .keys()
            .filter(|k| !known.contains(&k.as_str()))
            .cloned()
            .collect();
        for key in unknown {
            let fix = match did_you_mean(&key, &known) {
                Some(k) => format!("did you mean \"{k}\"?"),
                None => "remove it; it is ignored".to_string(),
            };
            warnings.push(
                ConfigIssue::new(
                    path,
                    format!("supervisor.{key}"),
                    "is not a known setting",
                    fix,
                )
                .at_line(line(&key)),
            );
            block.remove(&key);
        }
        if let Some(Value::Object(gates)) = block.get_mut("gates") {
            let unknown: Vec<String> = gates
                .keys()
                .filter(|k| !GATE_FIELDS.contains(&k.as_str()))
                .cloned()
                .collect();
            for key in unknown {
                let fix = match did_you_mean(&key, GATE_FIELDS) {
                    Some(k) => format!("did you mean \"{k}\"?"),
                    None => "remove it; it is ignored".to_string(),
                };
                warnings.push(
                    ConfigIssue::new(
                        path,
                        format!("supervisor.gates.{key}"),
                        "is not a known gate setting",
                        fix,
                    )
                    .at_line(line(&key)),
                );
                gates.remove(&key);
            }
        }

        // Environment overrides.
        let mut overridden = Vec::new();
        for (key, kind) in FIELDS {
            let var = env_name(key);
            let Some(raw) = env(&var) else { continue };
            match env_value(&raw, *kind) {
                Ok(v) => {
                    block.insert(key.to_string(), v);
                    overridden.push(key.to_string());
                }
                Err(problem) => errors.push(ConfigIssue::new(
                    Path::new(&format!("${var}")),
                    format!("supervisor.{key}"),
                    problem,
                    format!("fix or unset the environment variable {var}"),
                )),
            }
        }

        // Required fields, named one by one.
        let required: [(&str, &str); 3] = [
            (
                "repo",
                "add \"repo\": \"owner/name\" to the supervisor block",
            ),
            (
                "projectNumber",
                "add \"projectNumber\": N, the number in the board's URL (github.com/orgs/ORG/projects/N)",
            ),
            (
                "codeowners",
                "add \"codeowners\": [\"your-github-login\"]: only issues opened by these users are processed",
            ),
        ];
        for (key, fix) in required {
            if !block.contains_key(key) {
                errors.push(ConfigIssue::new(
                    path,
                    format!("supervisor.{key}"),
                    "is missing (required)",
                    fix,
                ));
            }
        }

        // Type-check field by field so every bad field is reported, not only the first.
        for (key, value) in &block {
            if let Err(problem) = check_field(key, value) {
                errors.push(
                    ConfigIssue::new(path, format!("supervisor.{key}"), problem.0, problem.1)
                        .at_line(line(key)),
                );
            }
        }
        ConfigError::check(errors)?;

        let settings: Settings = serde_json::from_value(Value::Object(block)).map_err(|e| {
            ConfigError::one(ConfigIssue::new(
                path,
                "supervisor",
                format!("is not valid: {e}"),
                "see the README, Configuration, for each field's type",
            ))
        })?;
        let mut errors = Vec::new();
        settings.validate(path, text, &mut errors);
        ConfigError::check(errors)?;
        Ok(LoadedSettings {
            settings,
            path: path.to_path_buf(),
            warnings,
            overridden,
        })
    }

    /// Checks across fields that types alone cannot express.
    fn validate(&self, path: &Path, text: &str, errors: &mut Vec<ConfigIssue>) {
        let mut err = |key: &str, problem: String, fix: &str| {
            errors.push(
                ConfigIssue::new(path, format!("supervisor.{key}"), problem, fix).at_line(
                    json_key_line(text, key.split('.').next_back().unwrap_or(key)),
                ),
            )
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
                    "codeowners",
                    format!("entry {i} (`{owner}`) is not a GitHub login"),
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
        for (agent, minutes) in &self.agent_timeouts_min {
            if !(minutes.is_finite() && *minutes > 0.0) {
                err(
                    &format!("agentTimeoutsMin.{agent}"),
                    format!("is {minutes}"),
                    "use a positive number of minutes",
                );
            }
        }
        if self.setup_attempts == 0 {
            err("setupAttempts", "is 0".into(), "use 1 or more (default 2)");
        }
        if self.gates.ci_poll_interval_sec == 0 {
            err(
                "gates.ciPollIntervalSec",
                "is 0".into(),
                "use a poll interval of at least 1 second (default 15)",
            );
        }
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
                "use pi, claude, codex, command, scripted or a key of \"backends\"",
            );
        }
    }

    /// The timeout of one agent dispatch, if configured.
    pub fn agent_timeout(&self, agent: &str) -> Option<std::time::Duration> {
        self.agent_timeouts_min
            .get(agent)
            .map(|m| std::time::Duration::from_secs_f64(m * 60.0))
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
        serde_json::from_value(Value::Object(block)).expect("minimal settings are valid")
    }
}

fn is_github_login(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 39
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '[' || c == ']')
        && !s.starts_with('-')
}

/// `(problem, fix)` for a field whose JSON type is wrong.
fn check_field(key: &str, value: &Value) -> Result<(), (String, String)> {
    let kind = FIELDS
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, k)| *k)
        .unwrap_or(Kind::Object);
    let found = json_type(value);
    let ok = match kind {
        Kind::Str => value.is_string() || (value.is_null() && is_optional(key)),
        Kind::Int => value.as_u64().is_some(),
        Kind::Float => value.is_number(),
        Kind::Bool => value.is_boolean(),
        Kind::List => {
            (value.is_array()
                && value
                    .as_array()
                    .is_some_and(|a| a.iter().all(Value::is_string)))
                || (value.is_null() && is_optional(key))
        }
        Kind::Object => value.is_object(),
    };
    if ok {
        if key == "repo" {
            let s = value.as_str().unwrap_or_default();
            if RepoSlug::parse(s).is_none() {
                return Err((
                    format!("`{s}` is not of the form owner/name"),
                    "write it as \"owner/name\", e.g. \"octocat/hello-world\"".into(),
                ));
            }
        }
        if key == "gates" {
            return serde_json::from_value::<GateSettings>(value.clone())
                .map(|_| ())
                .map_err(|e| (format!("is not valid: {e}"), "see the README, Gates".into()));
        }
        if key == "backends" {
            return serde_json::from_value::<BTreeMap<String, CommandBackend>>(value.clone())
                .map(|_| ())
                .map_err(|e| {
                    (
                        format!("is not valid: {e}"),
                        "each backend is {\"command\": [...], \"promptVia\": \"stdin\"|\"arg\"}"
                            .into(),
                    )
                });
        }
        if matches!(key, "statusMapping") {
            if let Some((k, _)) = value
                .as_object()
                .and_then(|m| m.iter().find(|(_, v)| !v.is_string()))
            {
                return Err((
                    format!("entry `{k}` is not an agent name"),
                    "map each column to an agent name, e.g. \"Research\": \"researcher\"".into(),
                ));
            }
        }
        if matches!(key, "agentTimeoutsMin") {
            if let Some((k, _)) = value
                .as_object()
                .and_then(|m| m.iter().find(|(_, v)| !v.is_number()))
            {
                return Err((
                    format!("entry `{k}` is not a number of minutes"),
                    "write e.g. { \"developer\": 30 }".into(),
                ));
            }
        }
        return Ok(());
    }
    let expected = match kind {
        Kind::Str => "a string",
        Kind::Int => "a whole number ≥ 0",
        Kind::Float => "a number",
        Kind::Bool => "true or false",
        Kind::List => "a list of strings",
        Kind::Object => "an object",
    };
    let problem = format!("is {found}, expected {expected}");
    let fix = match key {
        "auditScoreThreshold" => "use a ratio such as 0.75".to_string(),
        "codeowners" => "write e.g. \"codeowners\": [\"octocat\"]".to_string(),
        _ => format!("make it {expected}"),
    };
    Err((problem, fix))
}

fn is_optional(key: &str) -> bool {
    matches!(
        key,
        "projectOwner"
            | "agentScript"
            | "worktreeRoot"
            | "setupCommands"
            | "workflow"
            | "agentsDir"
    )
}

fn json_type(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("{b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) => format!("the string \"{s}\""),
        Value::Array(_) => "a list".into(),
        Value::Object(_) => "an object".into(),
    }
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
    fn missing_file_names_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let err = Settings::load(dir.path(), &no_env).unwrap_err();
        assert!(err.issues[0].file.ends_with(".pi/settings.json"));
        assert!(err.to_string().contains("no settings file found"));
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
}
