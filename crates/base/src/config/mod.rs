//! Settings, the workflow and their validation. Knows no other room.

mod dimension;
mod globs;
mod issue;
mod lenient;
pub mod schema;
mod settings;
mod source;
mod verify;
mod workflow;

pub use dimension::Dimension;
pub use globs::{EXCLUDE_FIX, ExcludeError, ExcludeGlobs};
pub use issue::{ConfigError, ConfigIssue, did_you_mean};
pub use settings::{
    API_URL_ENV, AgentSandbox, CheckedSettings, CommandBackend, DEFAULT_AGENT_STALL_SEC,
    DEFAULT_AGENT_TIMEOUT_MIN, EpicIntegration, EpicSettings, GateSettings, LoadedSettings,
    MAX_EPIC_TASKS, ModelPrice, PromptVia, RepoSlug, SERVER_URL_ENV, SETTINGS_PATHS, Settings,
    WatchSettings, command_prefix_problem, env_name,
};
pub use source::{DuplicateKey, JsonIndex, directory_problem, io_reason, read_text};
pub use verify::{ReportSpec, VerifyConfig};
pub use workflow::{
    BuiltIn, ContractPolicy, DEFAULT_WORKFLOW, Expect, GateKind, Hook, HookObject, Stage, StageId,
    StageSpec, TEST_PATHS, Unverifiable, WORKFLOW_PATH, WORKFLOW_WITHOUT_ORACLE, Workflow,
};

/// Agent backends that need no configuration. Any other command line is a key of `backends`.
pub const BUILTIN_BACKENDS: [&str; 4] = ["pi", "claude", "codex", "scripted"];

/// Whether `s` is safe as a git branch name built from configuration or issue data:
/// no traversal, no refspec or option syntax, nothing git's `check-ref-format` refuses.
pub fn is_safe_ref_component(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 200
        && !s.starts_with(['-', '/', '.'])
        && !s.ends_with(['/', '.'])
        && !s.ends_with(".lock")
        && !s.contains("..")
        && !s.contains("//")
        && !s.contains("@{")
        && !s.contains("/.")
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '/' | '.'))
}

#[cfg(test)]
mod tests {
    use super::is_safe_ref_component;

    #[test]
    fn ref_names() {
        for ok in [
            "main",
            "worktree-git-issue-12",
            "supervisor/issue-3",
            "release-1.2",
        ] {
            assert!(is_safe_ref_component(ok), "{ok}");
        }
        for bad in [
            "",
            "-x",
            "a..b",
            "a b",
            "a:b",
            "a~1",
            "a^",
            "x.lock",
            "/a",
            "a/",
            "a//b",
            "@{u}",
            "refs/../x",
            "a/.hidden",
            "+main",
            "*",
            "a\\b",
        ] {
            assert!(!is_safe_ref_component(bad), "{bad}");
        }
    }
}
