//! Everything configured for one repository: settings, workflow and role agents, loaded together.

use std::path::{Path, PathBuf};

use crate::agent::RoleSet;
use crate::config::{ConfigError, ConfigIssue, JsonIndex, LoadedSettings, Settings, Workflow};

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
    pub(crate) overridden: Vec<String>,
}

impl Project {
    /// Load and validate the configuration of the repository at `root`: settings, workflow, role
    /// agents and how they fit together. This is the one check every command makes (`check`, `run`,
    /// `watch`, `serve`, `gates`, …): the error lists every mistake found, in every file, at once.
    pub fn load(root: &Path, env: &dyn Fn(&str) -> Option<String>) -> Result<Project, ConfigError> {
        Self::load_replacing(root, env, None, None)
    }

    /// [`Project::load`], with the settings read from `settings_file` instead of the repository's
    /// settings file and the workflow from `workflow_file` instead of the one the settings name,
    /// when given (`runs replay --settings FILE --workflow FILE`).
    pub fn load_replacing(
        root: &Path,
        env: &dyn Fn(&str) -> Option<String>,
        settings_file: Option<&Path>,
        workflow_file: Option<&Path>,
    ) -> Result<Project, ConfigError> {
        let mut checked = match settings_file {
            None => Settings::check(root, env)?,
            Some(path) => {
                let text = crate::config::read_text(path).map_err(ConfigError::one)?;
                Settings::check_text(path, &text, env)?
            }
        };
        if let Some(path) = workflow_file {
            checked.loaded.settings.workflow = Some(path.to_path_buf());
        }
        Self::assemble(root, checked.loaded, checked.errors)
    }

    /// Validate settings built in code (demo, tests) together with the repository's workflow and agents.
    pub fn from_settings(root: &Path, settings: Settings) -> Result<Project, ConfigError> {
        let loaded = LoadedSettings {
            settings,
            path: root.join(crate::config::SETTINGS_PATHS[0]),
            warnings: Vec::new(),
            overridden: Vec::new(),
            index: JsonIndex::default(),
        };
        Self::assemble(root, loaded, Vec::new())
    }

    /// Everything checked against the settings (which may have errors of their own, in `errors`).
    fn assemble(
        root: &Path,
        loaded: LoadedSettings,
        mut errors: Vec<ConfigIssue>,
    ) -> Result<Project, ConfigError> {
        let settings = &loaded.settings;
        let workflow = Workflow::check_load(
            root,
            settings.workflow.as_deref(),
            &settings.status_mapping,
            &loaded.path,
            &mut errors,
        );
        let mut warnings = loaded.warnings.clone();
        let mut roles = None;
        if let Some(workflow) = &workflow {
            errors.extend(settings_against_workflow(&loaded, workflow));
            match RoleSet::load(root, settings, &loaded.path, workflow) {
                Ok(set) => {
                    warnings.extend(set.warnings.iter().cloned());
                    roles = Some(set);
                }
                Err(e) => errors.extend(e.issues),
            }
        }
        let (Some(workflow), Some(roles), true) = (workflow, roles, errors.is_empty()) else {
            return Err(ConfigError::new(in_reading_order(errors)).with_warnings(warnings));
        };
        Ok(Project {
            root: root.to_path_buf(),
            settings: loaded.settings,
            settings_path: loaded.path,
            workflow,
            roles,
            warnings,
            overridden: loaded.overridden,
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

/// Issues file by file (in the order the files were first named), each file's from the top; those
/// without a line after the others of their file.
fn in_reading_order(mut issues: Vec<ConfigIssue>) -> Vec<ConfigIssue> {
    let mut files: Vec<PathBuf> = Vec::new();
    for issue in &issues {
        if !files.contains(&issue.file) {
            files.push(issue.file.clone());
        }
    }
    issues.sort_by_key(|i| {
        let file = files.iter().position(|f| *f == i.file);
        (file, i.line.is_none(), i.line, i.column)
    });
    issues
}

/// What is wrong with the settings that name the workflow's stages: `statusMapping`,
/// `watch.triggerColumns`, `watch.columnLimits` and `columns`, each at its key in the settings.
fn settings_against_workflow(loaded: &LoadedSettings, workflow: &Workflow) -> Vec<ConfigIssue> {
    let settings = &loaded.settings;
    let stages: Vec<&str> = workflow.stages.iter().map(|s| s.status.as_str()).collect();
    let not_a_stage = |name: &str, what: &str| match crate::config::did_you_mean(name, &stages) {
        Some(near) => format!("did you mean \"{near}\"? {what}: {}", stages.join(", ")),
        None => format!("use one of the workflow's stages: {}", stages.join(", ")),
    };
    let mut issues = Vec::new();
    for (column, agent) in &settings.status_mapping {
        if !stages.contains(&column.as_str()) {
            issues.push(loaded.issue(
                &format!("supervisor.statusMapping.{column}"),
                format!("names a column the workflow does not have (mapped to `{agent}`)"),
                not_a_stage(column, "Known statuses"),
            ));
        }
    }
    for (i, column) in settings.watch.trigger_columns.iter().enumerate() {
        if !column.trim().is_empty() && !stages.contains(&column.as_str()) {
            issues.push(loaded.issue(
                &format!("supervisor.watch.triggerColumns[{i}]"),
                format!("`{column}` is not a column of the workflow"),
                not_a_stage(column, "The columns"),
            ));
        }
    }
    for column in settings.watch.column_limits.keys() {
        if !stages.contains(&column.as_str()) {
            issues.push(loaded.issue(
                &format!("supervisor.watch.columnLimits.{column}"),
                format!("`{column}` is not a column of the workflow"),
                not_a_stage(column, "The columns"),
            ));
        }
    }
    if let Some(column) = &settings.epic.column {
        let stage = (workflow.stages.iter()).find(|s| {
            settings
                .board_option_name(&s.status)
                .eq_ignore_ascii_case(column)
        });
        if column.trim().is_empty() {
            issues.push(loaded.issue(
                "supervisor.epic.column",
                "is empty",
                "name the board column where a card is planned as an epic, such as \"Epics\"",
            ));
        } else if let Some(stage) = stage {
            issues.push(loaded.issue(
                "supervisor.epic.column",
                format!("`{column}` is the column of the stage {}", stage.status),
                "name a board column of its own, which holds no stage, such as \"Epics\"",
            ));
        }
    }
    issues.extend(column_issues(loaded, &stages));
    issues
}

/// What is wrong with the `columns` setting against the workflow's stages: a key that is no stage,
/// two stages on one board option.
fn column_issues(loaded: &LoadedSettings, stages: &[&str]) -> Vec<ConfigIssue> {
    let settings = &loaded.settings;
    let mut issues = Vec::new();
    for (stage, option) in &settings.columns {
        let at = format!("supervisor.columns.{stage}");
        if !stages.contains(&stage.as_str()) {
            let fix = match crate::config::did_you_mean(stage, stages) {
                Some(near) => {
                    format!("did you mean \"{near}\"? The keys are the workflow's stages")
                }
                None => format!("the keys are the workflow's stages: {}", stages.join(", ")),
            };
            issues.push(loaded.issue(&at, "is not a stage of the workflow", fix));
        }
        let shared: Vec<&str> = stages
            .iter()
            .copied()
            .filter(|s| *s != stage && settings.board_option_name(s).eq_ignore_ascii_case(option))
            .collect();
        // Reported once: by the later key when both stages are mapped.
        if let Some(other) = shared
            .iter()
            .find(|o| !settings.columns.contains_key(**o) || **o < stage.as_str())
        {
            issues.push(loaded.issue(
                &at,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RepoSlug;

    fn with_epic_column(column: &str) -> Result<Project, ConfigError> {
        let dir = tempfile::tempdir().unwrap();
        let mut settings = Settings::minimal(
            RepoSlug::parse("acme/widgets").unwrap(),
            1,
            vec!["alice".into()],
        );
        settings.epic.column = Some(column.into());
        Project::from_settings(dir.path(), settings)
    }

    /// `epic.column` is a column of its own: one holding a stage (its name, in any case) or an
    /// empty name is an error naming the setting and what to do.
    #[test]
    fn the_epic_column_holds_no_stage() {
        assert!(with_epic_column("Epics").is_ok());
        for (column, problem) in [
            ("research", "is the column of the stage Research"),
            (" ", "is empty"),
        ] {
            let e = with_epic_column(column).unwrap_err();
            let issue = e
                .issues
                .iter()
                .find(|i| i.field.ends_with("epic.column"))
                .unwrap_or_else(|| panic!("{column}: {e}"));
            assert!(
                issue.problem.contains(problem),
                "{column}: {}",
                issue.problem
            );
            assert!(issue.fix.contains("Epics"), "{}", issue.fix);
        }
    }
}
