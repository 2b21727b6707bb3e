//! The pipeline's stages as data: columns, agents, marker maps, loop-backs, hooks and limits.
//!
//! The default ships in `config/workflow.json` and is embedded in the binary; a repository may
//! provide its own. Adding a stage, a gate or a loop-back is an edit of that file.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::Dimension;
use super::issue::{ConfigError, ConfigIssue, did_you_mean};
use super::lenient::Reader;
use super::source::{JsonIndex, read_text};
use super::verify::VerifyConfig;

/// The built-in workflow's text.
pub const DEFAULT_WORKFLOW: &str = include_str!("../../../../config/workflow.json");

/// The default pipeline without the oracle: TestDesign plans, the developer writes tests and code.
pub const WORKFLOW_WITHOUT_ORACLE: &str =
    include_str!("../../../../config/workflow-without-oracle.json");
/// Where a repository's own workflow is looked for when settings name none.
pub const WORKFLOW_PATH: &str = ".supervisor/workflow.json";

/// Stages that run no agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BuiltIn {
    /// Entry column: moved on to the next stage automatically.
    Backlog,
    /// Terminal column.
    Done,
}

/// The quality gates the pipeline knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GateKind {
    Ci,
    Tsc,
    Lsp,
    DeadCode,
    Duplicates,
    Traceability,
    PackageSafety,
    Command,
    /// The oracle after TestDesign: the designated tests fail on the base code.
    Red,
    /// The oracle before Audit: the designated tests pass on the head, twice, and no test that
    /// passed on the base fails.
    Green,
    /// The designated tests are as TestDesign committed them: not removed, skipped or weakened.
    Frozen,
    /// Every checklist item of the issue maps to a designated test, or is listed as not testable.
    Contract,
}

impl GateKind {
    pub const ALL: [GateKind; 12] = [
        GateKind::Ci,
        GateKind::Tsc,
        GateKind::Lsp,
        GateKind::DeadCode,
        GateKind::Duplicates,
        GateKind::Traceability,
        GateKind::PackageSafety,
        GateKind::Command,
        GateKind::Red,
        GateKind::Green,
        GateKind::Frozen,
        GateKind::Contract,
    ];

    pub fn name(self) -> &'static str {
        match self {
            GateKind::Ci => "ci",
            GateKind::Tsc => "tsc",
            GateKind::Lsp => "lsp",
            GateKind::DeadCode => "dead-code",
            GateKind::Duplicates => "duplicates",
            GateKind::Traceability => "traceability",
            GateKind::PackageSafety => "package-safety",
            GateKind::Command => "command",
            GateKind::Red => "red",
            GateKind::Green => "green",
            GateKind::Frozen => "frozen",
            GateKind::Contract => "contract",
        }
    }

    /// Canonical names and the spec's short forms.
    pub fn parse(s: &str) -> Option<GateKind> {
        let s = s.trim().to_ascii_lowercase();
        Some(match s.as_str() {
            "ci" | "ci-gating" | "checks" => GateKind::Ci,
            "tsc" | "typescript" => GateKind::Tsc,
            "lsp" => GateKind::Lsp,
            "dead-code" | "dead" | "knip" | "deadcode" => GateKind::DeadCode,
            "duplicates" | "dup" | "duplicate-code" | "jscpd" => GateKind::Duplicates,
            "traceability" | "trace" | "requirements-traceability" => GateKind::Traceability,
            "package-safety" | "packages" => GateKind::PackageSafety,
            "command" | "cmd" => GateKind::Command,
            "red" | "tests-fail-first" => GateKind::Red,
            "green" => GateKind::Green,
            "frozen" | "frozen-tests" => GateKind::Frozen,
            "contract" | "acceptance" => GateKind::Contract,
            _ => return None,
        })
    }
}

impl fmt::Display for GateKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a `command` gate's outcome must be.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Expect {
    /// Exit status 0.
    Pass,
    /// Non-zero exit status.
    Fail,
    /// Output contains the text (whatever the exit status).
    Contains(String),
}

impl Expect {
    pub(crate) fn parse(s: &str) -> Option<Expect> {
        match s.trim() {
            "pass" => Some(Expect::Pass),
            "fail" => Some(Expect::Fail),
            other => other
                .strip_prefix("contains:")
                .filter(|t| !t.is_empty())
                .map(|t| Expect::Contains(t.to_string())),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct HookObject {
    pub(crate) gate: String,
    pub name: Option<String>,
    /// A gate that could not run blocks the transition instead of being reported and passed over.
    pub(crate) required: bool,
    /// Shell command of a `command` gate.
    pub run: Option<String>,
    /// `pass` (default), `fail` or `contains:TEXT`.
    pub(crate) expect: Option<String>,
    pub(crate) timeout_sec: Option<u64>,
    /// Runs only with `enableExperimentalFeatures`.
    pub(crate) experimental: bool,
}

/// A validated hook.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hook {
    pub gate: GateKind,
    /// Display name: the gate's name, or the `name` of a command gate.
    pub name: String,
    pub required: bool,
    pub run: Option<String>,
    pub expect: Expect,
    pub timeout_sec: Option<u64>,
    pub experimental: bool,
}

/// One stage as written in the workflow file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct StageSpec {
    pub(crate) status: String,
    pub(crate) agent_name: Option<String>,
    pub(crate) marker_map: BTreeMap<String, String>,
    pub(crate) can_loop_back_to: Vec<String>,
    /// The gates before the stage is left, each as written: `"tsc"`, or a [`HookObject`] such as
    /// `{ "gate": "command", "name": "tests", "run": "cargo test" }`.
    pub(crate) hooks: Vec<serde_json::Value>,
    pub(crate) max_rejections: Option<u32>,
    pub(crate) built_in: Option<BuiltIn>,
    /// Forward target; when absent, the nearest later marker target, else the next stage.
    pub(crate) next: Option<String>,
    /// The agent approves or rejects (APPROVED/REJECTED), its approval is scored, and approval opens the PR.
    pub(crate) review: bool,
    /// The agent changes code: its work is committed and pushed instead of posted as a comment.
    pub(crate) commits: bool,
    /// Where the agent may write (globs relative to the repository root; `"tests"` stands for
    /// [`TEST_PATHS`]). A change elsewhere is undone before the commit and sent back. Absent: anywhere.
    pub(crate) writes: Option<Vec<String>>,
    /// Skip the agent when a trusted text already has this Markdown heading (research dedup).
    pub(crate) skip_when_heading: Option<String>,
    /// Audit dimension dropped from scoring when this stage was skipped.
    pub(crate) score_dimension: Option<String>,
    /// Runs only with `enableExperimentalFeatures`; otherwise passed straight through.
    pub(crate) experimental: bool,
}

/// The workflow file's keys beside `stages` (which are read one by one).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct WorkflowFile {
    #[serde(default, rename = "$schema")]
    _schema: Option<String>,
    #[serde(default, rename = "description")]
    _description: Option<String>,
    #[serde(default)]
    revision: Option<RevisionSpec>,
    /// The project's test command, where the oracle does not detect it.
    #[serde(default)]
    verify: Option<VerifyConfig>,
    #[serde(default)]
    contract: Option<ContractPolicy>,
}

/// How the workflow file is written, for fixes that name no better one.
const FORMAT_FIX: &str = "see config/workflow.json for the format: {\"stages\": [{\"status\": ..., \"agentName\": ..., \"markerMap\": {...}}]}";

/// `contract`: what an acceptance criterion that no test can check does to a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct ContractPolicy {
    pub unverifiable: Unverifiable,
}

/// `contract.unverifiable`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Unverifiable {
    /// Stop with one comment asking a codeowner; the run goes on when asked again.
    #[default]
    Stop,
    /// Go on, the criterion named in the audit and the pull request.
    Warn,
}

/// What `"writes": ["tests"]` stands for: where tests live by the conventions of each language the
/// oracle runs. Tests inside source files (`#[cfg(test)]` modules) are the developer's.
pub const TEST_PATHS: &[&str] = &[
    "**/*.test.*",
    "**/*.spec.*",
    "**/__tests__/**",
    "test/**",
    "tests/**",
    "**/test_*.py",
    "**/*_test.py",
    "**/conftest.py",
    "**/*_test.go",
    "**/testdata/**",
];

/// `revision`: how a pull request is revised after review feedback.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
struct RevisionSpec {
    /// The stage a revision starts in (it follows the workflow from there to Done).
    start: Option<String>,
    /// Where the card is while a revision runs.
    column: Option<String>,
    /// Where the card goes when the revision is done.
    done_column: Option<String>,
}

/// The revision path: a revision starts in `start` (by default the first stage that commits:
/// developer → gates → auditor) and follows the workflow to Done. The card is in `column` while it
/// runs (default: the stage after `start`, Audit) and goes to `done_column` after (default: Done).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Revision {
    pub start: StageId,
    pub column: StageId,
    pub done_column: StageId,
}

/// A stage of a validated workflow, by its name. Only the workflow makes one
/// ([`Workflow::stage_id`]), so it always names one of the workflow's stages — unlike a
/// [`BoardOption`](crate::ids::BoardOption), a name on the board, which the settings' `columns`
/// map to stages ([`Settings::stage_at`](super::Settings::stage_at)).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct StageId(String);

impl StageId {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for StageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl PartialEq<str> for StageId {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for StageId {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<String> for StageId {
    fn eq(&self, other: &String) -> bool {
        &self.0 == other
    }
}

/// A validated stage.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stage {
    pub status: String,
    pub agent: Option<String>,
    pub marker_map: BTreeMap<String, String>,
    pub can_loop_back_to: Vec<String>,
    pub hooks: Vec<Hook>,
    pub max_rejections: Option<u32>,
    pub built_in: Option<BuiltIn>,
    /// Where COMPLETE / APPROVED goes.
    pub forward: Option<String>,
    /// Where REJECTED goes (review stages).
    pub reject_to: Option<String>,
    pub review: bool,
    pub commits: bool,
    /// Globs the agent may write, expanded (`None`: anywhere).
    pub writes: Option<Vec<String>>,
    pub skip_when_heading: Option<String>,
    pub score_dimension: Option<Dimension>,
    pub experimental: bool,
}

impl Stage {
    /// This stage's id.
    pub fn id(&self) -> StageId {
        StageId(self.status.clone())
    }
}

/// The validated workflow.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Workflow {
    pub stages: Vec<Stage>,
    pub revision: Revision,
    /// `verify`: the configured test command, if any (else the oracle detects the runner).
    pub verify: Option<VerifyConfig>,
    pub contract: ContractPolicy,
    /// Where it came from (`built-in` or a path).
    pub source: String,
}

impl Workflow {
    /// The built-in workflow, with statusMapping applied.
    pub fn builtin(status_mapping: &BTreeMap<String, String>) -> Workflow {
        Workflow::parse(
            Path::new("config/workflow.json"),
            DEFAULT_WORKFLOW,
            status_mapping,
        )
        .map(|mut w| {
            w.source = "built-in".into();
            w
        })
        .expect("the built-in workflow is valid")
    }

    /// Load the repository's workflow: the settings' `workflow` file, else `.supervisor/workflow.json`,
    /// else the built-in one.
    pub fn load(
        root: &Path,
        configured: Option<&Path>,
        status_mapping: &BTreeMap<String, String>,
        settings_path: &Path,
    ) -> Result<Workflow, ConfigError> {
        let mut errors = Vec::new();
        let workflow =
            Self::check_load(root, configured, status_mapping, settings_path, &mut errors);
        finish(workflow, errors)
    }

    /// [`Workflow::load`], every error found going to `errors`: the workflow, when its stages could
    /// be read at all (then other settings can be checked against it even when it has errors).
    pub fn check_load(
        root: &Path,
        configured: Option<&Path>,
        status_mapping: &BTreeMap<String, String>,
        settings_path: &Path,
        errors: &mut Vec<ConfigIssue>,
    ) -> Option<Workflow> {
        let path: Option<PathBuf> = match configured {
            Some(p) => {
                let full = root.join(p);
                if !full.is_file() {
                    errors.push(ConfigIssue::new(
                        settings_path,
                        "supervisor.workflow",
                        format!("names {}, which does not exist", full.display()),
                        "fix the path (relative to the repository root) or remove the setting to use the built-in workflow",
                    ));
                    return None;
                }
                Some(full)
            }
            None => Some(root.join(WORKFLOW_PATH)).filter(|p| p.is_file()),
        };
        match path {
            None => {
                let mut w = Workflow::check(
                    Path::new("config/workflow.json (built-in)"),
                    DEFAULT_WORKFLOW,
                    status_mapping,
                    errors,
                )?;
                w.source = "built-in".into();
                Some(w)
            }
            Some(path) => match read_text(&path) {
                Ok(text) => Workflow::check(&path, &text, status_mapping, errors),
                Err(issue) => {
                    errors.push(issue);
                    None
                }
            },
        }
    }

    /// Parse and validate workflow text.
    pub fn parse(
        path: &Path,
        text: &str,
        status_mapping: &BTreeMap<String, String>,
    ) -> Result<Workflow, ConfigError> {
        let mut errors = Vec::new();
        let workflow = Self::check(path, text, status_mapping, &mut errors);
        finish(workflow, errors)
    }

    /// [`Workflow::parse`], every error found going to `errors`.
    pub(crate) fn check(
        path: &Path,
        text: &str,
        status_mapping: &BTreeMap<String, String>,
        errors: &mut Vec<ConfigIssue>,
    ) -> Option<Workflow> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let doc: serde_json::Value = match serde_json::from_str(text) {
            Ok(doc) => doc,
            Err(e) => {
                errors.push(
                    ConfigIssue::new(
                        path,
                        "(file)",
                        format!("is not valid JSON: {e}"),
                        "fix the JSON syntax",
                    )
                    .at(Some((e.line(), e.column()))),
                );
                return None;
            }
        };
        let index = JsonIndex::new(text);
        errors.extend(index.duplicates.iter().map(|d| d.issue(path)));
        let mut reader = Reader {
            file: path,
            index: &index,
            errors,
            fix: FORMAT_FIX,
        };
        let serde_json::Value::Object(mut doc) = doc else {
            reader.report(
                "(file)",
                "",
                "is not a JSON object".into(),
                FORMAT_FIX.into(),
            );
            return None;
        };
        let stages = doc.remove("stages");
        let rest: Option<WorkflowFile> = reader.read(serde_json::Value::Object(doc), "");
        let specs = match stages {
            Some(serde_json::Value::Array(items)) => {
                let specs: Vec<Option<StageSpec>> = items
                    .into_iter()
                    .enumerate()
                    .map(|(i, item)| reader.read(item, &format!("stages[{i}]")))
                    .collect();
                // A stage that is not even an object leaves the others' numbering unknown.
                specs.into_iter().collect::<Option<Vec<StageSpec>>>()?
            }
            Some(other) => {
                reader.report(
                    "stages",
                    "stages",
                    format!("is {}, expected a list of stages", json_kind(&other)),
                    FORMAT_FIX.into(),
                );
                return None;
            }
            None => {
                reader.report(
                    "stages",
                    "",
                    "is missing (required)".into(),
                    FORMAT_FIX.into(),
                );
                return None;
            }
        };
        let rest = rest?;
        let mut wf = validate(path, &index, specs, status_mapping, errors)?;
        wf.revision = revision_path(path, &index, rest.revision.unwrap_or_default(), &wf, errors);
        wf.verify = rest.verify;
        wf.contract = rest.contract.unwrap_or_default();
        Some(wf)
    }

    pub fn stage(&self, status: &str) -> Option<&Stage> {
        self.stages.iter().find(|s| s.status == status)
    }

    /// The stage named `status`, as an id (`None`: the workflow has no such stage).
    pub fn stage_id(&self, status: &str) -> Option<StageId> {
        self.stage(status).map(Stage::id)
    }

    /// Position of a status in stage order.
    pub fn index(&self, status: &str) -> Option<usize> {
        self.stages.iter().position(|s| s.status == status)
    }

    /// Stage lookup that ignores case and spacing differences between the board and the file.
    pub fn stage_for_column(&self, column: &str) -> Option<&Stage> {
        let norm = |s: &str| {
            s.chars()
                .filter(|c| c.is_alphanumeric())
                .collect::<String>()
                .to_lowercase()
        };
        self.stage(column)
            .or_else(|| self.stages.iter().find(|s| norm(&s.status) == norm(column)))
    }

    pub fn backlog(&self) -> &Stage {
        self.stages
            .iter()
            .find(|s| s.built_in == Some(BuiltIn::Backlog))
            .expect("validated workflows have a backlog")
    }

    pub fn done(&self) -> &Stage {
        self.stages
            .iter()
            .find(|s| s.built_in == Some(BuiltIn::Done))
            .expect("validated workflows have a done stage")
    }

    /// Names of every agent the workflow runs.
    pub fn agent_names(&self) -> BTreeSet<String> {
        self.stages.iter().filter_map(|s| s.agent.clone()).collect()
    }

    /// Whether `to` comes before `from` in stage order.
    pub fn is_backwards(&self, from: &str, to: &str) -> bool {
        matches!((self.index(from), self.index(to)), (Some(f), Some(t)) if t < f)
    }
}

/// The workflow when it has no error; every error otherwise.
fn finish(workflow: Option<Workflow>, errors: Vec<ConfigIssue>) -> Result<Workflow, ConfigError> {
    match workflow {
        Some(workflow) if errors.is_empty() => Ok(workflow),
        _ => Err(ConfigError::new(errors)),
    }
}

/// A JSON value's kind, in words.
fn json_kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "true or false",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "a list",
        serde_json::Value::Object(_) => "an object",
    }
}

/// The revision path of `spec` over the validated stages.
fn revision_path(
    path: &Path,
    index: &JsonIndex,
    spec: RevisionSpec,
    wf: &Workflow,
    errors: &mut Vec<ConfigIssue>,
) -> Revision {
    let mut fail = |field: &str, problem: String, fix: String| {
        let at = format!("revision.{field}");
        errors.push(ConfigIssue::new(path, &at, problem, fix).at(index.position(&at)));
    };
    let known = || {
        wf.stages
            .iter()
            .map(|s| s.status.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    // A workflow without a committing stage cannot revise; `supervisor revise` says so.
    let default_start = || {
        wf.stages
            .iter()
            .find(|s| s.commits && s.agent.is_some() && s.writes.is_none())
            .map(|s| s.status.clone())
            .unwrap_or_default()
    };
    let start = match spec.start {
        Some(name) => match wf.stage(&name) {
            None => {
                fail(
                    "start",
                    format!("names `{name}`, which is not a stage"),
                    format!("use one of: {}", known()),
                );
                default_start()
            }
            Some(stage) if !stage.commits || stage.agent.is_none() || stage.writes.is_some() => {
                fail(
                    "start",
                    format!(
                        "names `{name}`, whose agent does not commit: a revision changes the branch"
                    ),
                    "name a stage with an agent, \"commits\": true and no \"writes\" limit (Implementation)".into(),
                );
                default_start()
            }
            Some(stage) => stage.status.clone(),
        },
        None => default_start(),
    };
    let after = wf
        .stage(&start)
        .and_then(|s| s.forward.clone())
        .unwrap_or_else(|| wf.done().status.clone());
    let mut column = |field: &str, given: Option<String>, default: String| match given {
        Some(c) if wf.stage(&c).is_none() => {
            fail(
                field,
                format!("names `{c}`, which is not a stage"),
                format!("use one of: {}", known()),
            );
            default
        }
        Some(c) => c,
        None => default,
    };
    Revision {
        column: StageId(column("column", spec.column, after)),
        done_column: StageId(column(
            "doneColumn",
            spec.done_column,
            wf.done().status.clone(),
        )),
        start: StageId(start),
    }
}

/// The stages checked against each other; the workflow when they have a backlog and a done stage
/// (then the errors, if any, are in `errors` too).
fn validate(
    path: &Path,
    index: &JsonIndex,
    specs: Vec<StageSpec>,
    status_mapping: &BTreeMap<String, String>,
    errors: &mut Vec<ConfigIssue>,
) -> Option<Workflow> {
    let statuses: Vec<String> = specs.iter().map(|s| s.status.clone()).collect();
    let status_refs: Vec<&str> = statuses.iter().map(String::as_str).collect();
    let index_of = |s: &str| statuses.iter().position(|x| x == s);
    // `field` names the mistake for people (`stages[1] (Research).next`); `key` is the JSON path
    // whose line and column it is shown at.
    let mut err = |field: String, problem: String, fix: String, key: &str| {
        errors.push(ConfigIssue::new(path, field, problem, fix).at(index.position(key)));
    };
    let unknown_status_fix = |name: &str| match did_you_mean(name, &status_refs) {
        Some(s) => format!(
            "did you mean \"{s}\"? Known statuses: {}",
            status_refs.join(", ")
        ),
        None => format!("use one of: {}", status_refs.join(", ")),
    };

    if specs.is_empty() {
        err(
            "stages".into(),
            "is empty".into(),
            "list the stages from Backlog to Done".into(),
            "stages",
        );
        return None;
    }

    let mut seen = BTreeSet::new();
    for (i, s) in specs.iter().enumerate() {
        let key = format!("stages[{i}].status");
        if s.status.trim().is_empty() {
            err(
                format!("stages[{i}].status"),
                "is empty".into(),
                "name the board column".into(),
                &key,
            );
        }
        if !seen.insert(s.status.clone()) {
            err(
                format!("stages[{i}].status"),
                format!("`{}` appears twice", s.status),
                "give each stage its own column".into(),
                &key,
            );
        }
    }
    let backlogs = specs
        .iter()
        .filter(|s| s.built_in == Some(BuiltIn::Backlog))
        .count();
    let dones = specs
        .iter()
        .filter(|s| s.built_in == Some(BuiltIn::Done))
        .count();
    if backlogs != 1 {
        err(
            "stages".into(),
            format!("has {backlogs} backlog stages"),
            "mark exactly one stage with \"builtIn\": \"backlog\"".into(),
            "stages",
        );
    }
    if dones != 1 {
        err(
            "stages".into(),
            format!("has {dones} done stages"),
            "mark exactly one stage with \"builtIn\": \"done\"".into(),
            "stages",
        );
    }

    let mut stages = Vec::with_capacity(specs.len());
    for (i, s) in specs.iter().enumerate() {
        let at = |f: &str| format!("stages[{i}] ({}).{f}", s.status);
        let key = |f: &str| format!("stages[{i}].{f}");
        let stage_key = format!("stages[{i}]");
        let agent = status_mapping
            .get(&s.status)
            .cloned()
            .or_else(|| s.agent_name.clone());
        if s.built_in.is_some() {
            if agent.is_some() || !s.marker_map.is_empty() || !s.hooks.is_empty() {
                err(
                    at("builtIn"),
                    "a built-in stage runs no agent, markers or hooks".into(),
                    "remove agentName/markerMap/hooks from it, or remove builtIn".into(),
                    &key("builtIn"),
                );
            }
        } else if agent.is_none() {
            err(
                at("agentName"),
                "is missing".into(),
                "name the agent that works this column (agents/<name>.md), or mark the stage builtIn".into(),
                &stage_key,
            );
        }
        for (marker, target) in &s.marker_map {
            let marker_key = key(&format!("markerMap.{marker}"));
            if marker.trim().is_empty() {
                err(
                    at("markerMap"),
                    "has an empty marker".into(),
                    "use a distinctive text such as RESEARCH_COMPLETE".into(),
                    &marker_key,
                );
            }
            match index_of(target) {
                None => err(
                    at(&format!("markerMap.{marker}")),
                    format!("points to unknown status `{target}`"),
                    unknown_status_fix(target),
                    &marker_key,
                ),
                Some(t) if t < i && !s.can_loop_back_to.contains(target) => err(
                    at(&format!("markerMap.{marker}")),
                    format!("goes back to `{target}`, which canLoopBackTo does not allow"),
                    format!("add \"{target}\" to this stage's canLoopBackTo"),
                    &marker_key,
                ),
                Some(t) if t == i => err(
                    at(&format!("markerMap.{marker}")),
                    "points to its own stage".into(),
                    "point it to the stage that follows or to a loop-back".into(),
                    &marker_key,
                ),
                _ => {}
            }
        }
        for (n, target) in s.can_loop_back_to.iter().enumerate() {
            let item = key(&format!("canLoopBackTo[{n}]"));
            match index_of(target) {
                None => err(
                    at("canLoopBackTo"),
                    format!("names unknown status `{target}`"),
                    unknown_status_fix(target),
                    &item,
                ),
                Some(t) if t >= i => err(
                    at("canLoopBackTo"),
                    format!(
                        "`{target}` is not before `{}`: loop-backs must point backwards",
                        s.status
                    ),
                    "list only earlier stages here; forward moves come from markerMap or next"
                        .into(),
                    &item,
                ),
                Some(t) if specs[t].built_in.is_some() => err(
                    at("canLoopBackTo"),
                    format!("`{target}` is a built-in stage"),
                    "loop back to a stage that runs an agent".into(),
                    &item,
                ),
                _ => {}
            }
        }
        if let Some(next) = &s.next {
            match index_of(next) {
                None => err(
                    at("next"),
                    format!("names unknown status `{next}`"),
                    unknown_status_fix(next),
                    &key("next"),
                ),
                Some(t) if t <= i => err(
                    at("next"),
                    format!("`{next}` is not after `{}`", s.status),
                    "next is the forward move; use canLoopBackTo for backward ones".into(),
                    &key("next"),
                ),
                _ => {}
            }
        }
        let mut hooks = Vec::new();
        for (h, spec) in s.hooks.iter().enumerate() {
            let hook_key = key(&format!("hooks[{h}]"));
            match hook_from_spec(spec) {
                Ok(hook) => hooks.push(hook),
                Err((problem, fix)) => err(at(&format!("hooks[{h}]")), problem, fix, &hook_key),
            }
        }
        if s.review && s.built_in.is_some() {
            err(
                at("review"),
                "a built-in stage cannot review".into(),
                "put review on the auditor's stage".into(),
                &key("review"),
            );
        }
        if s.score_dimension.is_some() && s.skip_when_heading.is_none() {
            err(
                at("scoreDimension"),
                "is set but skipWhenHeading is not, so the stage is never skipped".into(),
                "add skipWhenHeading or remove scoreDimension".into(),
                &key("scoreDimension"),
            );
        }
        let score_dimension = s.score_dimension.as_deref().and_then(|d| {
            let parsed = Dimension::parse(d);
            if parsed.is_none() {
                err(
                    at("scoreDimension"),
                    format!("`{d}` is not an audit dimension"),
                    format!("use one of {}", Dimension::names()),
                    &key("scoreDimension"),
                );
            }
            parsed
        });

        // Forward: explicit next, else nearest later marker target, else the next stage.
        let forward = if s.built_in == Some(BuiltIn::Done) {
            None
        } else {
            s.next
                .clone()
                .or_else(|| {
                    s.marker_map
                        .values()
                        .filter_map(|t| index_of(t).filter(|&ti| ti > i))
                        .min()
                        .map(|ti| statuses[ti].clone())
                })
                .or_else(|| statuses.get(i + 1).cloned())
        };
        let reject_to = s.can_loop_back_to.first().cloned().or_else(|| {
            s.marker_map
                .values()
                .filter_map(|t| index_of(t).filter(|&ti| ti < i))
                .max()
                .map(|ti| statuses[ti].clone())
        });
        let writes = s.writes.as_ref().map(|globs| {
            globs
                .iter()
                .flat_map(|g| match g.trim() {
                    "tests" => TEST_PATHS.iter().map(|p| p.to_string()).collect(),
                    other => vec![other.to_string()],
                })
                .collect::<Vec<String>>()
        });
        if let Some(globs) = &writes {
            if !s.commits {
                err(
                    at("writes"),
                    "limits where the agent writes, but the stage does not commit".into(),
                    "add \"commits\": true, or remove writes".into(),
                    &key("writes"),
                );
            }
            if globs.is_empty() {
                err(
                    at("writes"),
                    "is empty: the agent could write nowhere".into(),
                    "list globs such as \"tests\" or \"src/**/*.test.ts\"".into(),
                    &key("writes"),
                );
            }
            for g in globs {
                if let Err(e) = globset::Glob::new(g) {
                    // The item as written (`tests` stands for several globs, all of them valid).
                    let n = s.writes.iter().flatten().position(|w| w.trim() == g);
                    let item = n.map_or_else(|| key("writes"), |n| key(&format!("writes[{n}]")));
                    err(
                        at("writes"),
                        format!("`{g}` is not a glob: {}", e.kind()),
                        "write globs such as \"tests/**\" or \"**/*.test.ts\"".into(),
                        &item,
                    );
                }
            }
        }
        if s.review && reject_to.is_none() {
            err(
                at("canLoopBackTo"),
                "a review stage needs somewhere to send rejected work".into(),
                "add e.g. \"canLoopBackTo\": [\"Implementation\"]".into(),
                &key("review"),
            );
        }
        stages.push(Stage {
            status: s.status.clone(),
            agent,
            marker_map: s.marker_map.clone(),
            can_loop_back_to: s.can_loop_back_to.clone(),
            hooks,
            max_rejections: s.max_rejections,
            built_in: s.built_in,
            forward,
            reject_to,
            review: s.review,
            commits: s.commits,
            writes,
            skip_when_heading: s.skip_when_heading.clone(),
            score_dimension,
            experimental: s.experimental,
        });
    }
    if backlogs != 1 || dones != 1 {
        return None;
    }

    let mut wf = Workflow {
        stages,
        revision: Revision {
            start: StageId(String::new()),
            column: StageId(String::new()),
            done_column: StageId(String::new()),
        },
        verify: None,
        contract: ContractPolicy::default(),
        source: path.display().to_string(),
    };
    // Done must be reachable from Backlog over the moves the engine can make (to statuses that
    // exist: a move to an unknown one is said above).
    let start = wf.backlog().status.clone();
    let goal = wf.done().status.clone();
    let mut reached = BTreeSet::new();
    let mut queue = VecDeque::from([start.clone()]);
    while let Some(status) = queue.pop_front() {
        if !reached.insert(status.clone()) {
            continue;
        }
        let Some(stage) = wf.stage(&status) else {
            continue;
        };
        let mut targets: Vec<String> = stage.forward.iter().cloned().collect();
        targets.extend(stage.marker_map.values().cloned());
        targets.extend(stage.can_loop_back_to.iter().cloned());
        queue.extend(targets.into_iter().filter(|t| wf.stage(t).is_some()));
    }
    if !reached.contains(&goal) {
        errors.push(
            ConfigIssue::new(
                path,
                "stages",
                format!(
                    "`{goal}` cannot be reached from `{start}` (reachable: {})",
                    reached.into_iter().collect::<Vec<_>>().join(", ")
                ),
                "give every stage a forward move (markerMap target or next) towards Done",
            )
            .at(index.position("stages")),
        );
    }
    wf.revision = revision_path(path, index, RevisionSpec::default(), &wf, errors);
    Some(wf)
}

/// A hook as written: a gate's name (`"tsc"`), or a [`HookObject`].
fn hook_from_spec(spec: &serde_json::Value) -> Result<Hook, (String, String)> {
    let known = || {
        GateKind::ALL
            .iter()
            .map(|g| g.name())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let obj = match spec {
        serde_json::Value::String(n) => HookObject {
            gate: n.clone(),
            ..HookObject::default()
        },
        serde_json::Value::Object(_) => {
            serde_path_to_error::deserialize::<_, HookObject>(spec).map_err(|e| {
                let key = e.path().to_string();
                let (problem, fix) = super::lenient::plain(
                    &e.into_inner().to_string(),
                    "write a hook like { \"gate\": \"command\", \"name\": \"tests\", \"run\": \"cargo test\" }",
                );
                (format!("`{key}` {problem}"), fix)
            })?
        }
        other => {
            return Err((
                format!("is {}, expected a gate's name or a hook object", json_kind(other)),
                format!("use a gate's name ({}) or {{ \"gate\": ..., ... }}", known()),
            ));
        }
    };
    let Some(gate) = GateKind::parse(&obj.gate) else {
        let names: Vec<&str> = GateKind::ALL.iter().map(|g| g.name()).collect();
        let fix = match did_you_mean(&obj.gate, &names) {
            Some(g) => format!("did you mean \"{g}\"? Known gates: {}", known()),
            None => format!("use one of: {}", known()),
        };
        return Err((format!("names unknown gate `{}`", obj.gate), fix));
    };

    if gate == GateKind::Command && obj.run.as_deref().is_none_or(|r| r.trim().is_empty()) {
        return Err((
            "is a command gate without \"run\"".into(),
            "add \"run\": \"the shell command\", e.g. \"cargo test\"".into(),
        ));
    }
    if gate != GateKind::Command && (obj.run.is_some() || obj.expect.is_some()) {
        return Err((
            format!("gives run/expect to the {} gate", gate.name()),
            "use \"gate\": \"command\" for shell commands".into(),
        ));
    }
    let expect = match obj.expect.as_deref() {
        None => Expect::Pass,
        Some(e) => Expect::parse(e).ok_or_else(|| {
            (
                format!("expect `{e}` is not understood"),
                "use \"pass\", \"fail\" or \"contains:TEXT\"".to_string(),
            )
        })?,
    };
    if obj.timeout_sec == Some(0) {
        return Err((
            "timeoutSec is 0".into(),
            "use a positive number of seconds".into(),
        ));
    }
    Ok(Hook {
        name: obj
            .name
            .clone()
            .filter(|n| !n.trim().is_empty())
            .unwrap_or_else(|| gate.name().to_string()),
        gate,
        required: obj.required,
        run: obj.run.clone(),
        expect,
        timeout_sec: obj.timeout_sec,
        experimental: obj.experimental,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Workflow, ConfigError> {
        Workflow::parse(Path::new("wf.json"), text, &BTreeMap::new())
    }

    fn default_wf() -> Workflow {
        Workflow::builtin(&BTreeMap::new())
    }

    /// The oracle's keys: `writes` (with `"tests"` expanded), `verify` and `contract`, and what is
    /// refused about them.
    #[test]
    fn the_oracles_keys_are_read_and_checked() {
        let with = |td: &str, top: &str| {
            format!(
                r#"{{ "stages": [
                  {{ "status": "Backlog", "builtIn": "backlog" }},
                  {{ "status": "TestDesign", "agentName": "t", {td} "markerMap": {{ "T": "Dev" }} }},
                  {{ "status": "Dev", "agentName": "d", "commits": true, "markerMap": {{ "D": "Done" }} }},
                  {{ "status": "Done", "builtIn": "done" }} ] {top} }}"#
            )
        };
        let wf = parse(&with(
            r#""commits": true, "writes": ["tests", "spec/**/*.rb"],"#,
            r#", "verify": { "command": "make test", "report": "junit:out/r.xml", "timeoutSec": 60 }, "contract": { "unverifiable": "warn" }"#,
        ))
        .unwrap();
        let td = wf.stage("TestDesign").unwrap();
        let writes = td.writes.clone().unwrap();
        assert_eq!(writes.len(), TEST_PATHS.len() + 1);
        assert_eq!(writes.last().map(String::as_str), Some("spec/**/*.rb"));
        assert_eq!(wf.contract.unverifiable, Unverifiable::Warn);
        let verify = wf.verify.clone().unwrap();
        assert_eq!(verify.command, "make test");
        assert_eq!(verify.timeout_sec, Some(60));
        // A revision starts with the stage that writes anywhere.
        assert_eq!(wf.revision.start, "Dev");
        // Defaults: no verify command, unverifiable criteria stop.
        let plain = parse(&with("", "")).unwrap();
        assert_eq!(plain.contract.unverifiable, Unverifiable::Stop);
        assert!(plain.verify.is_none() && plain.stage("TestDesign").unwrap().writes.is_none());
        for (td, top, field) in [
            (r#""writes": ["tests"],"#, "", "writes"),
            (r#""commits": true, "writes": [],"#, "", "writes"),
            (r#""commits": true, "writes": ["src/[a"],"#, "", "writes"),
            (
                "",
                r#", "contract": { "unverifiable": "maybe" }"#,
                "contract.unverifiable",
            ),
            (
                "",
                r#", "verify": { "command": "x", "report": "xml" }"#,
                "verify.report",
            ),
        ] {
            let err = parse(&with(td, top)).unwrap_err();
            assert!(
                err.issues.iter().any(|i| i.field.ends_with(field)),
                "{td} {top}: {err:?}"
            );
        }
    }

    /// The spec's workflow table, row by row.
    #[test]
    fn builtin_matches_the_spec_table() {
        let wf = default_wf();
        let statuses: Vec<_> = wf.stages.iter().map(|s| s.status.as_str()).collect();
        assert_eq!(
            statuses,
            [
                "Backlog",
                "Research",
                "Architecture",
                "TestDesign",
                "Implementation",
                "Audit",
                "Done"
            ]
        );
        type Row<'a> = (
            &'a str,
            Option<&'a str>,
            &'a [(&'a str, &'a str)],
            &'a [&'a str],
        );
        let rows: [Row; 7] = [
            ("Backlog", None, &[], &[]),
            (
                "Research",
                Some("researcher"),
                &[("RESEARCH_COMPLETE", "Architecture")],
                &[],
            ),
            (
                "Architecture",
                Some("architect"),
                &[
                    ("ARCHITECTURE_COMPLETE", "TestDesign"),
                    ("FEEDBACK_RESEARCH", "Research"),
                ],
                &["Research"],
            ),
            (
                "TestDesign",
                Some("test-designer"),
                &[("TEST_PLAN_COMPLETE", "Implementation")],
                &[],
            ),
            (
                "Implementation",
                Some("developer"),
                &[
                    ("IMPLEMENTATION_COMPLETE", "Audit"),
                    ("FEEDBACK_TESTS", "TestDesign"),
                ],
                &["TestDesign"],
            ),
            (
                "Audit",
                Some("auditor"),
                &[
                    ("AUDIT_DECISION: APPROVED", "Done"),
                    ("AUDIT_DECISION: REJECTED", "Implementation"),
                    ("AUDIT_APPROVED", "Done"),
                    ("AUDIT_REJECTED", "Implementation"),
                ],
                &["Implementation"],
            ),
            ("Done", None, &[], &[]),
        ];
        for (status, agent, markers, loops) in rows {
            let s = wf.stage(status).unwrap();
            assert_eq!(s.agent.as_deref(), agent, "{status}");
            let expected: BTreeMap<String, String> = markers
                .iter()
                .map(|(m, t)| (m.to_string(), t.to_string()))
                .collect();
            assert_eq!(s.marker_map, expected, "{status}");
            assert_eq!(s.can_loop_back_to, loops, "{status}");
        }
        assert_eq!(wf.backlog().status, "Backlog");
        assert_eq!(wf.done().status, "Done");
        assert_eq!(
            wf.stage("Backlog").unwrap().forward.as_deref(),
            Some("Research")
        );
        assert_eq!(
            wf.stage("Architecture").unwrap().forward.as_deref(),
            Some("TestDesign")
        );
        assert_eq!(wf.stage("Audit").unwrap().forward.as_deref(), Some("Done"));
        assert_eq!(
            wf.stage("Audit").unwrap().reject_to.as_deref(),
            Some("Implementation")
        );
        assert!(wf.stage("Audit").unwrap().review);
        assert!(wf.stage("Implementation").unwrap().commits);
        let research = wf.stage("Research").unwrap();
        assert_eq!(
            research.skip_when_heading.as_deref(),
            Some("Research Findings")
        );
        assert_eq!(
            research.score_dimension,
            Some(Dimension::ResearchIncorporation)
        );
        let td = wf.stage("TestDesign").unwrap();
        assert!(td.commits);
        assert_eq!(
            td.writes.as_deref(),
            Some(
                TEST_PATHS
                    .iter()
                    .map(|p| p.to_string())
                    .collect::<Vec<_>>()
                    .as_slice()
            )
        );
        let oracle: Vec<(GateKind, bool)> = td.hooks.iter().map(|h| (h.gate, h.required)).collect();
        assert_eq!(oracle, [(GateKind::Red, true), (GateKind::Contract, true)]);
        assert_eq!(
            wf.revision.start, "Implementation",
            "a revision starts with the developer"
        );
        let gates: Vec<GateKind> = wf
            .stage("Implementation")
            .unwrap()
            .hooks
            .iter()
            .map(|h| h.gate)
            .collect();
        assert_eq!(
            gates,
            [
                GateKind::Ci,
                GateKind::Tsc,
                GateKind::Lsp,
                GateKind::DeadCode,
                GateKind::Duplicates,
                GateKind::Traceability,
                GateKind::PackageSafety,
                GateKind::Frozen,
                GateKind::Green
            ]
        );
        assert_eq!(wf.source, "built-in");
    }

    fn wf_with(stage_json: &str) -> String {
        format!(
            r#"{{ "stages": [
                {{ "status": "Backlog", "builtIn": "backlog" }},
                {{ "status": "Build", "agentName": "developer", "markerMap": {{ "BUILT": "Review" }} }},
                {stage_json},
                {{ "status": "Done", "builtIn": "done" }}
            ] }}"#
        )
    }

    #[test]
    fn marker_to_unknown_status_is_named() {
        let err = parse(&wf_with(
            r#"{ "status": "Review", "agentName": "auditor", "markerMap": { "OK": "Dnoe" } }"#,
        ))
        .unwrap_err();
        let issue = &err.issues[0];
        assert_eq!(issue.field, "stages[2] (Review).markerMap.OK");
        assert!(issue.problem.contains("unknown status `Dnoe`"));
        assert!(issue.fix.contains("did you mean \"Done\""));
        assert!(issue.line.is_some());
    }

    #[test]
    fn forward_loop_back_is_rejected() {
        let err = parse(&wf_with(
            r#"{ "status": "Review", "agentName": "auditor", "markerMap": { "OK": "Done" }, "canLoopBackTo": ["Done"] }"#,
        ))
        .unwrap_err();
        assert_eq!(err.issues[0].field, "stages[2] (Review).canLoopBackTo");
        assert!(err.issues[0].problem.contains("must point backwards"));
    }

    #[test]
    fn backward_marker_needs_loop_back_permission() {
        let err = parse(&wf_with(
            r#"{ "status": "Review", "agentName": "auditor", "markerMap": { "OK": "Done", "NO": "Build" } }"#,
        ))
        .unwrap_err();
        assert!(
            err.issues[0]
                .problem
                .contains("canLoopBackTo does not allow")
        );
        assert!(
            parse(&wf_with(
                r#"{ "status": "Review", "agentName": "auditor", "markerMap": { "OK": "Done", "NO": "Build" }, "canLoopBackTo": ["Build"] }"#,
            ))
            .is_ok()
        );
    }

    #[test]
    fn unknown_gate_and_bad_command_hooks() {
        let err = parse(&wf_with(
            r#"{ "status": "Review", "agentName": "auditor", "hooks": ["tsc", "lnit", {"gate": "command"}, {"gate": "command", "run": "x", "expect": "maybe"}] }"#,
        ))
        .unwrap_err();
        let problems: Vec<_> = err
            .issues
            .iter()
            .map(|i| (i.field.as_str(), i.problem.as_str()))
            .collect();
        assert_eq!(problems.len(), 3, "{err}");
        assert_eq!(problems[0].0, "stages[2] (Review).hooks[1]");
        assert!(problems[0].1.contains("unknown gate `lnit`"));
        assert!(problems[1].1.contains("without \"run\""));
        assert!(problems[2].1.contains("expect `maybe`"));

        // A hook object's keys are checked one by one, each named.
        let err = parse(&wf_with(
            r#"{ "status": "Review", "agentName": "auditor", "hooks": [{"gate": "tsc", "requird": true}, {"gate": "tsc", "required": "yes"}, 7] }"#,
        ))
        .unwrap_err();
        let said: Vec<String> = err.issues.iter().map(|i| i.to_string()).collect();
        assert_eq!(said.len(), 3, "{err}");
        assert!(
            said[0]
                .contains("hooks[0]`: `requird` is not a known key — did you mean \"required\"?"),
            "{said:?}"
        );
        assert!(
            said[1].contains("hooks[1]`: `required` is the string \"yes\", expected true or false"),
            "{said:?}"
        );
        assert!(
            said[2].contains("hooks[2]`: is a number, expected a gate's name or a hook object"),
            "{said:?}"
        );
    }

    #[test]
    fn hook_aliases_and_objects() {
        let wf = parse(&wf_with(
            r#"{ "status": "Review", "agentName": "auditor", "hooks": ["dup", "trace", "knip",
                {"gate": "command", "name": "unit tests", "run": "cargo test", "expect": "contains:ok", "required": true, "timeoutSec": 60}] }"#,
        ))
        .unwrap();
        let hooks = &wf.stage("Review").unwrap().hooks;
        assert_eq!(hooks[0].gate, GateKind::Duplicates);
        assert_eq!(hooks[1].gate, GateKind::Traceability);
        assert_eq!(hooks[2].gate, GateKind::DeadCode);
        assert_eq!(hooks[3].name, "unit tests");
        assert_eq!(hooks[3].expect, Expect::Contains("ok".into()));
        assert!(hooks[3].required);
        assert_eq!(hooks[3].timeout_sec, Some(60));
    }

    #[test]
    fn done_must_be_reachable() {
        // Review's only target loops back, so Done is never reached.
        let err = parse(
            r#"{ "stages": [
                { "status": "Backlog", "builtIn": "backlog" },
                { "status": "Build", "agentName": "developer", "next": "Review" },
                { "status": "Review", "agentName": "auditor", "next": "Build" },
                { "status": "Done", "builtIn": "done" }
            ] }"#,
        )
        .unwrap_err();
        assert!(
            err.issues.iter().any(|i| i.field.ends_with(".next")),
            "{err}"
        );

        let ok = parse(
            r#"{ "stages": [
                { "status": "Backlog", "builtIn": "backlog" },
                { "status": "Build", "agentName": "developer" },
                { "status": "Done", "builtIn": "done" }
            ] }"#,
        )
        .unwrap();
        assert_eq!(ok.stage("Build").unwrap().forward.as_deref(), Some("Done"));
    }

    #[test]
    fn unreachable_done_is_reported() {
        let err = parse(
            r#"{ "stages": [
                { "status": "Backlog", "builtIn": "backlog", "next": "Build" },
                { "status": "Done", "builtIn": "done" },
                { "status": "Build", "agentName": "developer" }
            ] }"#,
        )
        .unwrap_err();
        assert_eq!(err.issues[0].field, "stages");
        assert!(
            err.issues[0]
                .problem
                .contains("`Done` cannot be reached from `Backlog`"),
            "{err}"
        );
    }

    #[test]
    fn structural_errors() {
        let err = parse(r#"{ "stages": [] }"#).unwrap_err();
        assert_eq!(err.issues[0].field, "stages");
        let err = parse(r#"{ "stages": [ { "status": "Backlog", "builtIn": "backlog" } ] }"#)
            .unwrap_err();
        assert!(err.to_string().contains("0 done stages"));
        let err = parse(r#"{ "stages": [ { "status": "X", "agentNme": "a" } ] }"#).unwrap_err();
        assert!(err.to_string().contains("agentNme"), "{err}");
        let err = parse(
            r#"{ "stages": [
                { "status": "Backlog", "builtIn": "backlog" },
                { "status": "Build" },
                { "status": "Build", "agentName": "x" },
                { "status": "Done", "builtIn": "done", "agentName": "y" }
            ] }"#,
        )
        .unwrap_err();
        let fields: Vec<_> = err.issues.iter().map(|i| i.field.as_str()).collect();
        assert!(fields.contains(&"stages[2].status"), "{fields:?}");
        assert!(
            fields.contains(&"stages[1] (Build).agentName"),
            "{fields:?}"
        );
        assert!(fields.contains(&"stages[3] (Done).builtIn"), "{fields:?}");
    }

    /// (A key that names no stage is the settings' mistake: `Project::load` says so.)
    #[test]
    fn status_mapping_overrides_agents() {
        let mapping = BTreeMap::from([("Research".to_string(), "scout".to_string())]);
        let wf = Workflow::builtin(&mapping);
        assert_eq!(
            wf.stage("Research").unwrap().agent.as_deref(),
            Some("scout")
        );
    }

    #[test]
    fn review_stage_needs_a_rejection_target() {
        let err = parse(&wf_with(
            r#"{ "status": "Review", "agentName": "auditor", "review": true, "markerMap": { "OK": "Done" } }"#,
        ))
        .unwrap_err();
        assert!(err.issues[0].problem.contains("rejected work"));
    }

    #[test]
    fn column_lookup_is_forgiving() {
        let wf = default_wf();
        assert_eq!(
            wf.stage_for_column("Test Design").unwrap().status,
            "TestDesign"
        );
        assert_eq!(wf.stage_for_column("audit").unwrap().status, "Audit");
        assert!(wf.stage_for_column("Nope").is_none());
        assert!(wf.is_backwards("Audit", "Implementation"));
        assert!(!wf.is_backwards("Research", "Architecture"));
    }

    #[test]
    fn expect_parsing() {
        assert_eq!(Expect::parse("pass"), Some(Expect::Pass));
        assert_eq!(Expect::parse("fail"), Some(Expect::Fail));
        assert_eq!(
            Expect::parse("contains:3 passed"),
            Some(Expect::Contains("3 passed".into()))
        );
        assert_eq!(Expect::parse("contains:"), None);
        assert_eq!(Expect::parse("maybe"), None);
    }
}
