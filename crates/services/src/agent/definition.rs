//! Role agents: `agents/<name>.md` files with YAML frontmatter and a role prompt.
//!
//! The default roles are embedded in the binary: the five stage roles of the built-in workflow and
//! the two roles of an epic ([`EPIC_ROLES`]). A repository overrides any of them by placing a file of
//! the same name in `.supervisor/agents/` (or `.pi/extensions/supervisor/agents/`, or the directory
//! its settings name).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::config::{BUILTIN_BACKENDS, ConfigError, ConfigIssue, Settings, Workflow, did_you_mean};

/// The embedded default roles: (name, text).
pub const DEFAULT_AGENTS: [(&str, &str); 7] = [
    (
        "researcher",
        include_str!("../../../../agents/researcher.md"),
    ),
    ("architect", include_str!("../../../../agents/architect.md")),
    (
        "test-designer",
        include_str!("../../../../agents/test-designer.md"),
    ),
    ("developer", include_str!("../../../../agents/developer.md")),
    ("auditor", include_str!("../../../../agents/auditor.md")),
    ("planner", include_str!("../../../../agents/planner.md")),
    ("reviewer", include_str!("../../../../agents/reviewer.md")),
];

/// The roles of an epic, which no workflow stage names: the planner splits the epic into tasks
/// (answering a plan), the reviewer judges each task's pull request (answering a verdict).
pub const EPIC_ROLES: [&str; 2] = ["planner", "reviewer"];

/// Directories searched for overrides, relative to the repository root, after the settings' `agentsDir`.
pub const AGENT_DIRS: [&str; 2] = [".supervisor/agents", ".pi/extensions/supervisor/agents"];

const FRONTMATTER_KEYS: [&str; 12] = [
    "name",
    "description",
    "tools",
    "extensions",
    "skills",
    "model",
    "thinking",
    "entryMarker",
    "outputFormat",
    "backend",
    "provider",
    "readOnly",
];

/// Role prompts reach pi and Claude Code as one argument, which Linux limits to 128 KiB.
pub(crate) const MAX_ROLE_PROMPT_BYTES: usize = 100 * 1024;

/// A list written either as a YAML sequence or as a comma-separated string.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
enum ListOrCsv {
    #[default]
    None,
    List(Vec<String>),
    Csv(String),
}

impl ListOrCsv {
    fn into_vec(self) -> Vec<String> {
        match self {
            ListOrCsv::None => Vec::new(),
            ListOrCsv::List(v) => v
                .into_iter()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect(),
            ListOrCsv::Csv(s) => s
                .split(',')
                .map(|p| p.trim().to_string())
                .filter(|p| !p.is_empty())
                .collect(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Frontmatter {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    tools: ListOrCsv,
    #[serde(default)]
    extensions: ListOrCsv,
    #[serde(default)]
    skills: ListOrCsv,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    thinking: Option<String>,
    #[serde(default)]
    entry_marker: Option<String>,
    #[serde(default)]
    output_format: Option<String>,
    #[serde(default)]
    backend: Option<String>,
    #[serde(default)]
    provider: Option<String>,
    #[serde(default)]
    read_only: bool,
}

/// A parsed role agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentDefinition {
    pub name: String,
    pub(crate) description: Option<String>,
    pub tools: Vec<String>,
    pub(crate) extensions: Vec<String>,
    pub(crate) skills: Vec<String>,
    pub model: Option<String>,
    /// off | minimal | low | medium | high | xhigh
    pub thinking: Option<String>,
    pub(crate) entry_marker: Option<String>,
    pub(crate) output_format: Option<String>,
    /// Which agent CLI runs this role; the settings' `agentBackend` when absent.
    pub(crate) backend: Option<String>,
    /// Model provider for CLIs that take one (pi `--provider`); with it, `model` is passed verbatim.
    pub(crate) provider: Option<String>,
    /// The role must not change the worktree: Codex runs it in its read-only sandbox, Claude Code
    /// without its file-writing tools. pi has no sandbox: only the role's tools limit it.
    pub(crate) read_only: bool,
    /// The role prompt (the Markdown after the frontmatter).
    pub(crate) prompt: String,
    /// `built-in` or the file it came from.
    pub source: String,
}

pub const THINKING_LEVELS: [&str; 6] = ["off", "minimal", "low", "medium", "high", "xhigh"];

impl AgentDefinition {
    /// Parse an agent file. `stem` is the file name without `.md`. Returns warnings beside the definition.
    pub fn parse(
        path: &Path,
        stem: &str,
        text: &str,
    ) -> Result<(AgentDefinition, Vec<ConfigIssue>), ConfigError> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let fail = |line: usize, field: &str, problem: String, fix: &str| {
            ConfigError::one(ConfigIssue::new(path, field, problem, fix).at_line(Some(line)))
        };
        let mut lines = text.split_inclusive('\n');
        let first = lines.next().unwrap_or("");
        if first.trim_end() != "---" {
            return Err(fail(
                1,
                "frontmatter",
                "does not start with a `---` line".into(),
                "begin the file with YAML frontmatter between two `---` lines, then the role prompt",
            ));
        }
        let mut yaml = String::new();
        let mut body_start = None;
        let mut offset = first.len();
        for line in lines {
            if line.trim_end() == "---" {
                body_start = Some(offset + line.len());
                break;
            }
            yaml.push_str(line);
            offset += line.len();
        }
        let Some(body_start) = body_start else {
            return Err(fail(
                1,
                "frontmatter",
                "is never closed".into(),
                "end the frontmatter with a `---` line",
            ));
        };
        let prompt = text[body_start..].trim().to_string();

        // Line numbers below are of the file: YAML line 1 is file line 2.
        let value: serde_norway::Value = if yaml.trim().is_empty() {
            serde_norway::Value::Mapping(Default::default())
        } else {
            serde_norway::from_str(&yaml).map_err(|e| {
                let line = e.location().map(|l| l.line() + 1).unwrap_or(2);
                fail(
                    line,
                    "frontmatter",
                    format!("is not valid YAML: {}", strip_location(&e.to_string())),
                    "fix the YAML syntax (key: value, lists as [a, b])",
                )
            })?
        };
        let Some(map) = value.as_mapping() else {
            return Err(fail(
                2,
                "frontmatter",
                "is not a mapping of keys to values".into(),
                "write one `key: value` per line",
            ));
        };
        let mut warnings = Vec::new();
        for key in map.keys() {
            let Some(k) = key.as_str() else { continue };
            if !FRONTMATTER_KEYS.contains(&k) {
                let fix = match did_you_mean(k, &FRONTMATTER_KEYS) {
                    Some(s) => format!("did you mean `{s}`?"),
                    None => format!("known keys: {}", FRONTMATTER_KEYS.join(", ")),
                };
                warnings.push(
                    ConfigIssue::new(path, k, "is not a known frontmatter key", fix)
                        .at_line(yaml_key_line(&yaml, k).map(|l| l + 1)),
                );
            }
        }
        // Type-check key by key, so the error names the field and its line.
        for (key, v) in map {
            let Some(k) = key.as_str() else { continue };
            let ok = match k {
                "tools" | "extensions" | "skills" => {
                    serde_norway::from_value::<ListOrCsv>(v.clone()).is_ok() && !v.is_mapping()
                }
                "readOnly" => v.is_bool() || v.is_null(),
                _ if FRONTMATTER_KEYS.contains(&k) => v.is_string() || v.is_null(),
                _ => true,
            };
            if !ok {
                let expected = if matches!(k, "tools" | "extensions" | "skills") {
                    "a list such as [read, bash] or a comma-separated string"
                } else if k == "readOnly" {
                    "true or false"
                } else {
                    "a string"
                };
                return Err(fail(
                    yaml_key_line(&yaml, k).map(|l| l + 1).unwrap_or(2),
                    k,
                    format!("must be {expected}"),
                    "fix the value's type",
                ));
            }
        }
        let fm: Frontmatter = serde_norway::from_value(value.clone()).map_err(|e| {
            fail(
                2,
                "frontmatter",
                format!("is not valid: {}", strip_location(&e.to_string())),
                "strings for name/model/thinking/backend; lists for tools/extensions/skills",
            )
        })?;
        if let Some(level) = &fm.thinking {
            if !THINKING_LEVELS.contains(&level.as_str()) {
                return Err(fail(
                    yaml_key_line(&yaml, "thinking").map(|l| l + 1).unwrap_or(2),
                    "thinking",
                    format!("`{level}` is not a thinking level"),
                    "use off, minimal, low, medium, high or xhigh",
                ));
            }
        }
        if prompt.is_empty() {
            return Err(fail(
                body_start_line(text, body_start),
                "prompt",
                "is empty".into(),
                "write the role prompt below the frontmatter",
            ));
        }
        if prompt.len() > MAX_ROLE_PROMPT_BYTES {
            return Err(fail(
                body_start_line(text, body_start),
                "prompt",
                format!(
                    "is {} KiB; agent CLIs receive the role prompt as one argument, which Linux limits to 128 KiB",
                    prompt.len() / 1024
                ),
                "keep the role prompt under 100 KiB; put long reference material in the repository and tell the role where to read it",
            ));
        }
        let tools = fm.tools.into_vec();
        if fm.read_only {
            if let Some(t) = tools
                .iter()
                .find(|t| matches!(t.as_str(), "write" | "edit"))
            {
                return Err(fail(
                    yaml_key_line(&yaml, "readOnly").map(|l| l + 1).unwrap_or(2),
                    "readOnly",
                    format!("is true, but the role's tools include `{t}`"),
                    "drop the file-writing tools or set readOnly: false",
                ));
            }
        }
        let name = fm.name.clone().unwrap_or_else(|| stem.to_string());
        if name != stem {
            warnings.push(
                ConfigIssue::new(
                    path,
                    "name",
                    format!("`{name}` differs from the file name `{stem}`"),
                    "the file name is what workflows refer to; rename one of them",
                )
                .at_line(yaml_key_line(&yaml, "name").map(|l| l + 1)),
            );
        }
        Ok((
            AgentDefinition {
                name: stem.to_string(),
                description: fm.description,
                tools,
                extensions: fm.extensions.into_vec(),
                skills: fm.skills.into_vec(),
                model: fm.model.filter(|m| !m.trim().is_empty()),
                thinking: fm.thinking,
                entry_marker: fm.entry_marker,
                output_format: fm.output_format,
                backend: fm.backend.filter(|b| !b.trim().is_empty()),
                provider: fm.provider.filter(|p| !p.trim().is_empty()),
                read_only: fm.read_only,
                prompt,
                source: path.display().to_string(),
            },
            warnings,
        ))
    }

    /// The backend that runs this role under `settings`.
    pub fn backend_name<'a>(&'a self, settings: &'a Settings) -> &'a str {
        self.backend.as_deref().unwrap_or(&settings.agent_backend)
    }
}

fn strip_location(msg: &str) -> String {
    // serde_norway appends " at line L column C"; the issue carries the line already.
    match msg.find(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg.to_string(),
    }
}

fn body_start_line(text: &str, body_start: usize) -> usize {
    text[..body_start].matches('\n').count() + 1
}

/// 1-based line of `key:` at the start of a YAML line.
fn yaml_key_line(yaml: &str, key: &str) -> Option<usize> {
    yaml.lines()
        .position(|l| {
            l.trim_start()
                .strip_prefix(key)
                .is_some_and(|rest| rest.trim_start().starts_with(':'))
        })
        .map(|i| i + 1)
}

/// Where overrides of the roles are looked for, in order: the settings' `agentsDir` (which must
/// exist), then [`AGENT_DIRS`].
fn search_dirs(
    root: &Path,
    settings: &Settings,
    settings_path: &Path,
) -> Result<Vec<PathBuf>, ConfigError> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(d) = &settings.agents_dir {
        let full = root.join(d);
        if !full.is_dir() {
            return Err(ConfigError::one(ConfigIssue::new(
                settings_path,
                "supervisor.agentsDir",
                format!("names {}, which is not a directory", full.display()),
                "fix the path (relative to the repository root) or remove the setting",
            )));
        }
        dirs.push(full);
    }
    dirs.extend(AGENT_DIRS.iter().map(|d| root.join(d)));
    Ok(dirs)
}

/// Role agents resolved from overrides and built-ins: those a workflow names ([`RoleSet::load`]), or
/// the epic's ([`RoleSet::load_epic`]).
#[derive(Debug, Clone)]
pub struct RoleSet {
    pub agents: BTreeMap<String, AgentDefinition>,
    pub warnings: Vec<ConfigIssue>,
}

impl RoleSet {
    /// Resolve every agent the workflow names. Errors name the workflow or settings field that refers to
    /// a missing agent, and any agent file that fails to parse.
    pub fn load(
        root: &Path,
        settings: &Settings,
        settings_path: &Path,
        workflow: &Workflow,
    ) -> Result<RoleSet, ConfigError> {
        let dirs = search_dirs(root, settings, settings_path)?;
        let mut errors = Vec::new();
        let mut names = Vec::new();
        for name in workflow.agent_names() {
            if is_safe_agent_name(&name) {
                names.push(name);
            } else {
                errors.push(ConfigIssue::new(
                    Path::new(&workflow.source),
                    "agentName",
                    format!("`{name}` is not a valid agent name"),
                    "use letters, digits, '-' and '_' only",
                ));
            }
        }
        let missing = |name: &str| {
            let (file, field) = match settings.status_mapping.iter().find(|(_, a)| **a == name) {
                Some((col, _)) => (
                    settings_path.to_path_buf(),
                    format!("supervisor.statusMapping.{col}"),
                ),
                None => {
                    let status = workflow
                        .stages
                        .iter()
                        .find(|s| s.agent.as_deref() == Some(name))
                        .map(|s| s.status.clone())
                        .unwrap_or_default();
                    (
                        PathBuf::from(&workflow.source),
                        format!("stages ({status}).agentName"),
                    )
                }
            };
            let built_in: Vec<&str> = DEFAULT_AGENTS.iter().map(|(n, _)| *n).collect();
            let hint = match did_you_mean(name, &built_in) {
                Some(s) => format!(" (did you mean `{s}`?)"),
                None => String::new(),
            };
            ConfigIssue::new(
                &file,
                field,
                format!("names agent `{name}`, which has no definition{hint}"),
                format!(
                    "create {}/{name}.md with frontmatter and a role prompt, or use a built-in agent: {}",
                    AGENT_DIRS[0],
                    built_in.join(", ")
                ),
            )
        };
        let set = RoleSet::resolve(&dirs, settings, &names, missing, &mut errors);
        ConfigError::check(errors)?;
        Ok(set)
    }

    /// The roles of an epic ([`EPIC_ROLES`]), each from the repository's override where it has
    /// one (found as the workflow's roles are), else built in.
    pub fn load_epic(
        root: &Path,
        settings: &Settings,
        settings_path: &Path,
    ) -> Result<RoleSet, ConfigError> {
        let dirs = search_dirs(root, settings, settings_path)?;
        let mut errors = Vec::new();
        let missing = |name: &str| {
            ConfigIssue::new(
                Path::new(AGENT_DIRS[0]),
                name,
                "has no definition".to_string(),
                format!("create {}/{name}.md", AGENT_DIRS[0]),
            )
        };
        let set = RoleSet::resolve(&dirs, settings, &EPIC_ROLES, missing, &mut errors);
        ConfigError::check(errors)?;
        Ok(set)
    }

    /// Each of `names` from the first of `dirs` holding `<name>.md`, else built in; a name with
    /// neither is `missing`. Problems go to `errors`.
    fn resolve<N: AsRef<str>>(
        dirs: &[PathBuf],
        settings: &Settings,
        names: &[N],
        missing: impl Fn(&str) -> ConfigIssue,
        errors: &mut Vec<ConfigIssue>,
    ) -> RoleSet {
        let mut warnings = Vec::new();
        let mut agents = BTreeMap::new();
        for name in names {
            let name = name.as_ref();
            let file = dirs
                .iter()
                .map(|d| d.join(format!("{name}.md")))
                .find(|p| p.is_file());
            let parsed = match file {
                Some(path) => match std::fs::read_to_string(&path) {
                    Ok(text) => AgentDefinition::parse(&path, name, &text),
                    Err(e) => Err(ConfigError::one(ConfigIssue::new(
                        &path,
                        "(file)",
                        format!("cannot be read: {e}"),
                        "check the file's permissions",
                    ))),
                },
                None => match DEFAULT_AGENTS.iter().find(|(n, _)| *n == name) {
                    Some((n, text)) => AgentDefinition::parse(
                        Path::new(&format!("agents/{n}.md (built-in)")),
                        n,
                        text,
                    )
                    .map(|(mut d, w)| {
                        d.source = "built-in".into();
                        (d, w)
                    }),
                    None => {
                        errors.push(missing(name));
                        continue;
                    }
                },
            };
            match parsed {
                Ok((def, w)) => {
                    let backend = def.backend_name(settings).to_string();
                    // The settings' own `agentBackend` is checked (once) with the settings.
                    if backend != settings.agent_backend
                        && !BUILTIN_BACKENDS.contains(&backend.as_str())
                        && !settings.backends.contains_key(&backend)
                    {
                        errors.push(ConfigIssue::new(
                            Path::new(&def.source),
                            "backend",
                            format!("`{backend}` is neither built in nor defined in the settings' \"backends\""),
                            "use pi, claude, codex, scripted or a command line of your own under supervisor.backends (see the README, Agent backends)",
                        ));
                    }
                    warnings.extend(w);
                    agents.insert(name.to_string(), def);
                }
                Err(e) => errors.extend(e.issues),
            }
        }
        RoleSet { agents, warnings }
    }

    pub fn get(&self, name: &str) -> Option<&AgentDefinition> {
        self.agents.get(name)
    }
}

/// Agent names become file names: keep them to a safe alphabet.
pub fn is_safe_agent_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<(AgentDefinition, Vec<ConfigIssue>), ConfigError> {
        AgentDefinition::parse(Path::new("agents/x.md"), "x", text)
    }

    #[test]
    fn built_in_agents_parse_and_teach_the_protocol() {
        for (name, text) in DEFAULT_AGENTS {
            let (def, warnings) = AgentDefinition::parse(Path::new(name), name, text).unwrap();
            assert!(warnings.is_empty(), "{name}: {warnings:?}");
            assert_eq!(def.name, name);
            assert!(def.prompt.len() > 1500, "{name} prompt is too thin");
            assert!(
                def.prompt.contains("```json"),
                "{name} shows the JSON block"
            );
            // The epic's roles answer a plan and a verdict (held to their readers in
            // `epic::answer`), the stage roles the agent protocol.
            let protocol = "\"agentName\": \"{name}\"".replace("{name}", name);
            assert_eq!(
                def.prompt.contains(protocol.as_str()),
                !EPIC_ROLES.contains(&name),
                "{name}"
            );
            assert!(!def.tools.is_empty(), "{name}");
            assert!(def.entry_marker.is_some(), "{name}");
        }
        let (auditor, _) =
            AgentDefinition::parse(Path::new("auditor"), "auditor", DEFAULT_AGENTS[4].1).unwrap();
        for dim in crate::config::Dimension::ALL {
            assert!(
                auditor.prompt.contains(dim.name()),
                "auditor prompt lacks {dim}"
            );
        }
        assert!(auditor.prompt.contains("\"APPROVED\""));
        assert!(auditor.prompt.contains("REJECTED"));
    }

    #[test]
    fn full_frontmatter() {
        let (d, w) = parse(
            "---\nname: x\ntools: [read, bash]\nextensions: a, b\nskills: []\nmodel: m/n\nthinking: high\nentryMarker: Research\noutputFormat: structured-json\nbackend: claude\n---\n\nDo things.\n",
        )
        .unwrap();
        assert!(w.is_empty());
        assert_eq!(d.tools, ["read", "bash"]);
        assert_eq!(d.extensions, ["a", "b"]);
        assert!(d.skills.is_empty());
        assert_eq!(d.model.as_deref(), Some("m/n"));
        assert_eq!(d.thinking.as_deref(), Some("high"));
        assert_eq!(d.entry_marker.as_deref(), Some("Research"));
        assert_eq!(d.backend.as_deref(), Some("claude"));
        assert_eq!(d.prompt, "Do things.");
    }

    #[test]
    fn bad_yaml_names_file_and_line() {
        let err = parse("---\nname: x\ntools: [read, bash\nmodel: y\n---\nprompt\n").unwrap_err();
        let issue = &err.issues[0];
        assert_eq!(issue.file, Path::new("agents/x.md"));
        assert_eq!(issue.field, "frontmatter");
        assert!(issue.problem.contains("not valid YAML"), "{issue}");
        let line = issue.line.unwrap();
        assert!((3..=5).contains(&line), "line {line}");
    }

    #[test]
    fn wrong_types_and_missing_parts() {
        let err = parse("---\ntools:\n  nested: map\n---\nprompt\n").unwrap_err();
        assert_eq!(err.issues[0].field, "tools");
        assert_eq!(err.issues[0].line, Some(2));
        let err = parse("---\nthinking: extreme\n---\nprompt\n").unwrap_err();
        assert_eq!(err.issues[0].field, "thinking");
        assert_eq!(err.issues[0].line, Some(2));
        let err = parse("no frontmatter\n").unwrap_err();
        assert_eq!(err.issues[0].line, Some(1));
        let err = parse("---\nname: x\n").unwrap_err();
        assert!(err.issues[0].problem.contains("never closed"));
        let err = parse("---\nname: x\n---\n\n").unwrap_err();
        assert_eq!(err.issues[0].field, "prompt");
        let err = parse("---\n- a\n- b\n---\nprompt\n").unwrap_err();
        assert!(err.issues[0].problem.contains("mapping"));
    }

    #[test]
    fn unknown_keys_and_name_mismatch_warn() {
        let (_, w) = parse("---\nname: y\nmodle: z\n---\nprompt\n").unwrap();
        assert_eq!(w.len(), 2);
        assert_eq!(w[0].field, "modle");
        assert_eq!(w[0].fix, "did you mean `model`?");
        assert_eq!(w[0].line, Some(3));
        assert_eq!(w[1].field, "name");
    }

    #[test]
    fn read_only_roles_and_oversized_prompts() {
        let (d, _) = parse("---\ntools: [read, bash]\nreadOnly: true\n---\nLook only.\n").unwrap();
        assert!(d.read_only);
        let err = parse("---\ntools: [read, write]\nreadOnly: true\n---\nx\n").unwrap_err();
        assert_eq!(err.issues[0].field, "readOnly");
        assert_eq!(err.issues[0].line, Some(3));
        let err = parse("---\nreadOnly: maybe\n---\nx\n").unwrap_err();
        assert_eq!(err.issues[0].field, "readOnly");
        let big = format!("---\nname: x\n---\n{}\n", "word ".repeat(30_000));
        let err = parse(&big).unwrap_err();
        assert_eq!(err.issues[0].field, "prompt");
        assert!(
            err.issues[0].problem.contains("128 KiB"),
            "{}",
            err.issues[0]
        );
        // Built-in roles that must not change the tree say so.
        for (name, text) in DEFAULT_AGENTS {
            let (d, _) = AgentDefinition::parse(Path::new(name), name, text).unwrap();
            let writes = name == "developer" || name == "test-designer";
            assert_eq!(d.read_only, !writes, "{name}");
        }
    }

    /// A repository with `agentsDir` set as given, and the built-in workflow.
    fn repository(agents_dir: Option<&str>) -> (tempfile::TempDir, Settings, Workflow) {
        let dir = tempfile::tempdir().unwrap();
        let mut settings = Settings::minimal(
            crate::config::RepoSlug::parse("o/r").unwrap(),
            1,
            vec!["a".into()],
        );
        settings.agents_dir = agents_dir.map(PathBuf::from);
        (dir, settings, Workflow::builtin(&BTreeMap::new()))
    }

    #[test]
    fn the_epic_roles_are_built_in_beside_the_stage_roles_and_overridable_like_them() {
        let names: Vec<&str> = DEFAULT_AGENTS.iter().map(|(n, _)| *n).collect();
        for role in EPIC_ROLES {
            assert!(names.contains(&role), "{role} is listed with the others");
        }
        let (dir, settings, workflow) = repository(None);
        let settings_path = dir.path().join(".supervisor/settings.json");
        let stages = RoleSet::load(dir.path(), &settings, &settings_path, &workflow).unwrap();
        assert!(
            EPIC_ROLES.iter().all(|r| stages.get(r).is_none()),
            "a workflow's roles are those its stages name"
        );
        let epic = RoleSet::load_epic(dir.path(), &settings, &settings_path).unwrap();
        assert_eq!(
            epic.agents.keys().collect::<Vec<_>>(),
            ["planner", "reviewer"]
        );
        for role in EPIC_ROLES {
            let def = epic.get(role).unwrap();
            assert_eq!(def.source, "built-in");
            assert!(def.read_only, "{role} only reads");
        }

        // An override in .supervisor/agents/ wins, as for any role.
        let agents = dir.path().join(".supervisor/agents");
        std::fs::create_dir_all(&agents).unwrap();
        let file = agents.join("planner.md");
        std::fs::write(
            &file,
            "---\nmodel: big/model\nreadOnly: true\n---\nPlan in our house style.\n",
        )
        .unwrap();
        let epic = RoleSet::load_epic(dir.path(), &settings, &settings_path).unwrap();
        let planner = epic.get("planner").unwrap();
        assert_eq!(planner.source, file.display().to_string());
        assert_eq!(planner.prompt, "Plan in our house style.");
        assert_eq!(planner.model.as_deref(), Some("big/model"));
        assert_eq!(epic.get("reviewer").unwrap().source, "built-in");

        // A broken override is an error naming its file, never a silent fall back.
        std::fs::write(&file, "---\nthinking: extreme\n---\nx\n").unwrap();
        let err = RoleSet::load_epic(dir.path(), &settings, &settings_path).unwrap_err();
        assert_eq!(err.issues[0].file, file);
        assert_eq!(err.issues[0].field, "thinking");

        // So is the settings' agentsDir, searched first.
        let (dir, settings, _) = repository(Some("roles"));
        let settings_path = dir.path().join(".supervisor/settings.json");
        let err = RoleSet::load_epic(dir.path(), &settings, &settings_path).unwrap_err();
        assert_eq!(err.issues[0].field, "supervisor.agentsDir");
        std::fs::create_dir_all(dir.path().join("roles")).unwrap();
        std::fs::write(
            dir.path().join("roles/reviewer.md"),
            "---\nreadOnly: true\n---\nJudge strictly.\n",
        )
        .unwrap();
        let epic = RoleSet::load_epic(dir.path(), &settings, &settings_path).unwrap();
        assert_eq!(epic.get("reviewer").unwrap().prompt, "Judge strictly.");
    }

    #[test]
    fn agent_names() {
        assert!(is_safe_agent_name("test-designer"));
        assert!(!is_safe_agent_name("../etc/passwd"));
        assert!(!is_safe_agent_name(""));
    }
}
