//! Everything configured for one repository: settings, workflow and role agents, loaded together.

use std::path::{Path, PathBuf};

use crate::agent::RoleSet;
use crate::config::{ConfigError, ConfigIssue, LoadedSettings, Settings, Workflow};

/// A repository's validated configuration.
#[derive(Debug, Clone)]
pub struct Project {
    pub root: PathBuf,
    pub settings: Settings,
    pub settings_path: PathBuf,
    pub workflow: Workflow,
    pub roles: RoleSet,
    pub warnings: Vec<ConfigIssue>,
    /// Settings keys taken from `SUPERVISOR_*` variables.
    pub overridden: Vec<String>,
}

impl Project {
    /// Load and validate the configuration of the repository at `root`.
    pub fn load(root: &Path, env: &dyn Fn(&str) -> Option<String>) -> Result<Project, ConfigError> {
        let LoadedSettings {
            settings,
            path,
            warnings,
            overridden,
        } = Settings::load(root, env)?;
        Self::assemble(root, settings, path, warnings, overridden)
    }

    /// Validate settings built in code (demo, tests) together with the repository's workflow and agents.
    pub fn from_settings(root: &Path, settings: Settings) -> Result<Project, ConfigError> {
        let path = root.join(crate::config::SETTINGS_PATHS[0]);
        Self::assemble(root, settings, path, Vec::new(), Vec::new())
    }

    fn assemble(
        root: &Path,
        settings: Settings,
        settings_path: PathBuf,
        mut warnings: Vec<ConfigIssue>,
        overridden: Vec<String>,
    ) -> Result<Project, ConfigError> {
        let workflow = Workflow::load(
            root,
            settings.workflow.as_deref(),
            &settings.status_mapping,
            &settings_path,
        )?;
        watch_columns(&settings, &workflow, &settings_path)?;
        ConfigError::check(column_issues(&settings, &workflow, &settings_path))?;
        let roles = RoleSet::load(root, &settings, &settings_path, &workflow)?;
        warnings.extend(roles.warnings.iter().cloned());
        Ok(Project {
            root: root.to_path_buf(),
            settings,
            settings_path,
            workflow,
            roles,
            warnings,
            overridden,
        })
    }
}

impl Project {
    /// The columns whose newly arrived cards start a run: `watch.triggerColumns`, else the first
    /// column with an agent.
    pub fn trigger_columns(&self) -> Vec<String> {
        if !self.settings.watch.trigger_columns.is_empty() {
            return self.settings.watch.trigger_columns.clone();
        }
        self.workflow
            .stages
            .iter()
            .find(|s| s.agent.is_some())
            .map(|s| vec![s.status.clone()])
            .unwrap_or_default()
    }
}

/// `watch.triggerColumns` and `watch.columnLimits` name columns of the workflow.
fn watch_columns(settings: &Settings, workflow: &Workflow, file: &Path) -> Result<(), ConfigError> {
    let known: Vec<&str> = workflow.stages.iter().map(|s| s.status.as_str()).collect();
    let named = settings
        .watch
        .trigger_columns
        .iter()
        .map(|c| ("triggerColumns", c))
        .chain(
            settings
                .watch
                .column_limits
                .keys()
                .map(|c| ("columnLimits", c)),
        );
    let issues = named
        .filter(|(_, c)| !known.contains(&c.as_str()))
        .map(|(key, c)| {
            ConfigIssue::new(
                file,
                format!("supervisor.watch.{key}"),
                format!("`{c}` is not a column of the workflow"),
                format!("use one of {}", known.join(", ")),
            )
        })
        .collect();
    ConfigError::check(issues)
}

/// What is wrong with the `columns` setting against the workflow: a key that is no stage, two
/// stages on one board option.
fn column_issues(settings: &Settings, workflow: &Workflow, path: &Path) -> Vec<ConfigIssue> {
    let stages: Vec<&str> = workflow.stages.iter().map(|s| s.status.as_str()).collect();
    let mut issues = Vec::new();
    for (stage, option) in &settings.columns {
        if !stages.contains(&stage.as_str()) {
            let fix = match crate::config::did_you_mean(stage, &stages) {
                Some(near) => {
                    format!("did you mean \"{near}\"? The keys are the workflow's stages")
                }
                None => format!("the keys are the workflow's stages: {}", stages.join(", ")),
            };
            issues.push(ConfigIssue::new(
                path,
                format!("supervisor.columns.{stage}"),
                "is not a stage of the workflow",
                fix,
            ));
        }
        let shared: Vec<&str> = stages
            .iter()
            .copied()
            .filter(|s| *s != stage && settings.board_option(s).eq_ignore_ascii_case(option))
            .collect();
        // Reported once: by the later key when both stages are mapped.
        if let Some(other) = shared
            .iter()
            .find(|o| !settings.columns.contains_key(**o) || **o < stage.as_str())
        {
            issues.push(ConfigIssue::new(
                path,
                format!("supervisor.columns.{stage}"),
                format!("puts {stage} on the board option \"{option}\", which already holds {other}"),
                "give every stage a column of its own (`supervisor init` can add the missing options to the board)",
            ));
        }
    }
    issues
}

/// The process environment, as `Project::load` wants it (secrets taken out of it at start
/// included).
pub fn process_env(key: &str) -> Option<String> {
    crate::process::secret(key)
        .map(str::to_string)
        .or_else(|| std::env::var(key).ok())
}
