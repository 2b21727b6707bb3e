//! Everything one dispatch needs besides the process itself: the one prompt assembly, the environment
//! allowlist, and the request that the pipeline and `supervisor agent` both build the same way.

use std::path::{Path, PathBuf};

use crate::config::Settings;

use super::AgentDefinition;
use super::backend::Backend;
use super::error::AgentError;
use super::prices::Prices;
use super::run::Limits;
use super::sandbox::Sandbox;
use super::stream::Pulse;

/// Variables always passed to agents when set: the basics a CLI needs to run.
pub const BASE_ENV: [&str; 12] = [
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TMPDIR", "TERM", "TZ", "LANG", "LANGUAGE",
    "LC_ALL", "LC_CTYPE",
];

/// Provider variables passed to agents unless `agentEnvDefaults` is false: API keys, base URLs and the
/// CLIs' own configuration homes. The settings' `agentEnv` adds to this list.
pub const DEFAULT_AGENT_ENV: [&str; 18] = [
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "CODEX_API_KEY",
    "GEMINI_API_KEY",
    "OPENROUTER_API_KEY",
    "DEEPSEEK_API_KEY",
    "MISTRAL_API_KEY",
    "GROQ_API_KEY",
    "XAI_API_KEY",
    "PI_CODING_AGENT_DIR",
    "PI_OFFLINE",
    "CODEX_HOME",
    "CLAUDE_CONFIG_DIR",
    "CLAUDE_CODE_MAX_RETRIES",
    "DISABLE_AUTOUPDATER",
];

/// Variables that carry GitHub credentials: passed only with `passGitHubToken`, whatever `agentEnv` says.
pub const GITHUB_TOKEN_VARS: [&str; 5] = [
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "GITHUB_PAT",
    "GH_ENTERPRISE_TOKEN",
    "GITHUB_ENTERPRISE_TOKEN",
];

/// The role that keeps partial findings when it runs over budget (graceful degradation).
pub const DEGRADING_ROLE: &str = "researcher";

/// The system prompt of a role: the one assembly used by the pipeline and `supervisor agent`.
pub fn system_prompt(role: &AgentDefinition) -> String {
    role.prompt.trim().to_string()
}

/// The names agents may receive, in order: the basics, the default provider variables (unless
/// `agentEnvDefaults` is false), then `agentEnv`; without duplicates. GitHub token variables are
/// left out unless `passGitHubToken` is set.
pub fn agent_env_names(settings: &Settings) -> Vec<String> {
    let defaults: &[&str] = if settings.agent_env_defaults {
        &DEFAULT_AGENT_ENV
    } else {
        &[]
    };
    let mut names: Vec<String> = Vec::new();
    let all = BASE_ENV
        .iter()
        .chain(defaults)
        .map(|s| s.to_string())
        .chain(settings.agent_env.iter().map(|s| s.trim().to_string()));
    for name in all {
        let is_token = GITHUB_TOKEN_VARS.contains(&name.as_str());
        if name.is_empty() || (is_token && !settings.pass_github_token) || names.contains(&name) {
            continue;
        }
        names.push(name);
    }
    names
}

/// The environment of an agent process, from the current process environment: an allowlist of the
/// basics, the locale, the default provider variables and the variables the settings name. GitHub tokens are passed only when the
/// settings opt in with `passGitHubToken`, as `GITHUB_TOKEN` and `GH_TOKEN`.
pub fn agent_env(settings: &Settings, github_token: Option<&str>) -> Vec<(String, String)> {
    agent_env_from(settings, github_token, &|k| std::env::var(k).ok())
}

/// As [`agent_env`], reading variables through `lookup`.
pub fn agent_env_from(
    settings: &Settings,
    github_token: Option<&str>,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = Vec::new();
    for name in agent_env_names(settings) {
        if let Some(v) = lookup(&name) {
            env.push((name, v));
        }
    }
    if settings.pass_github_token {
        if let Some(token) = github_token {
            for name in ["GITHUB_TOKEN", "GH_TOKEN"] {
                env.retain(|(k, _)| k != name);
                env.push((name.to_string(), token.to_string()));
            }
        }
    }
    env
}

/// One dispatch of a role agent.
#[derive(Debug, Clone)]
pub struct AgentRequest<'a> {
    pub role: &'a AgentDefinition,
    pub task: String,
    pub cwd: PathBuf,
    pub backend: Backend,
    pub limits: Limits,
    pub env: Vec<(String, String)>,
    /// Where the raw stdout goes (stderr beside it as `<file>.stderr`).
    pub transcript: Option<PathBuf>,
    /// 1-based: the nth dispatch of this role in the run (the scripted backend plays that attempt).
    pub attempt: u32,
    /// The task revises a pull request after review (the scripted backend plays the role's
    /// revision script).
    pub revision: bool,
    /// The issue the dispatch is about (a run's, or an epic's sub-issue its reviewer judges): the
    /// scripted backend plays `<role>@<subject>` when the script names it.
    pub subject: Option<String>,
    /// Keep the partial text when a budget stops the agent (the researcher's graceful degradation).
    pub keep_partial_on_budget: bool,
    /// Run the agent inside this sandbox (`agentSandbox`); `None`: unconfined.
    pub sandbox: Option<Sandbox>,
    /// Where the stream's counters go as they change, for a live view; `None`: nowhere.
    pub pulse: Option<tokio::sync::watch::Sender<Pulse>>,
    /// What the usage costs when the CLI reports no cost.
    pub prices: Prices,
}

impl<'a> AgentRequest<'a> {
    /// The request the pipeline makes for `role` under `settings`: the role's backend (or
    /// `backend_override`), its limits, the environment allowlist, attempt 1, and no transcript.
    pub fn for_role(
        settings: &Settings,
        repo_root: &Path,
        role: &'a AgentDefinition,
        task: String,
        cwd: PathBuf,
        backend_override: Option<&str>,
        github_token: Option<&str>,
    ) -> Result<AgentRequest<'a>, AgentError> {
        let name = backend_override.unwrap_or_else(|| role.backend_name(settings));
        let backend = Backend::resolve_in(name, settings, repo_root)?;
        Ok(AgentRequest {
            role,
            task,
            cwd,
            backend,
            limits: Limits::for_role(settings, &role.name),
            env: agent_env(settings, github_token),
            transcript: None,
            attempt: 1,
            revision: false,
            subject: None,
            keep_partial_on_budget: role.name == DEGRADING_ROLE,
            sandbox: Sandbox::from_settings(settings),
            pulse: None,
            prices: Prices::new(&settings.prices),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RepoSlug;

    fn settings() -> Settings {
        Settings::minimal(RepoSlug::parse("o/r").unwrap(), 1, vec!["a".into()])
    }

    fn lookup(k: &str) -> Option<String> {
        match k {
            "PATH"
            | "HOME"
            | "LANG"
            | "OPENAI_API_KEY"
            | "GITHUB_TOKEN"
            | "GH_TOKEN"
            | "AWS_SECRET_ACCESS_KEY"
            | "MY_VAR" => Some(format!("{k}-value")),
            _ => None,
        }
    }

    fn keys(env: &[(String, String)]) -> Vec<&str> {
        env.iter().map(|(k, _)| k.as_str()).collect()
    }

    #[test]
    fn only_the_allowlist_reaches_agents() {
        let mut s = settings();
        s.agent_env.push("MY_VAR".into());
        s.agent_env.push("GITHUB_TOKEN".into());
        let env = agent_env_from(&s, Some("ghp_secret"), &lookup);
        assert_eq!(
            keys(&env),
            ["PATH", "HOME", "LANG", "OPENAI_API_KEY", "MY_VAR"]
        );
        assert!(env.iter().all(|(_, v)| !v.contains("ghp_secret")));
    }

    #[test]
    fn agent_env_adds_to_the_defaults_and_replacing_is_explicit() {
        let mut s = settings();
        s.agent_env = vec!["CLAUDE_CONFIG_DIR".into(), "MY_VAR".into()];
        let names = agent_env_names(&s);
        for kept in [
            "PATH",
            "ANTHROPIC_API_KEY",
            "OPENAI_API_KEY",
            "CODEX_HOME",
            "MY_VAR",
        ] {
            assert!(
                names.iter().any(|n| n == kept),
                "{kept} missing from {names:?}"
            );
        }
        assert_eq!(
            names.iter().filter(|n| *n == "CLAUDE_CONFIG_DIR").count(),
            1,
            "no duplicates"
        );
        let env = agent_env_from(&s, None, &lookup);
        assert!(keys(&env).contains(&"OPENAI_API_KEY"), "{env:?}");

        s.agent_env_defaults = false;
        let names = agent_env_names(&s);
        assert!(!names.iter().any(|n| n == "OPENAI_API_KEY"), "{names:?}");
        assert!(names.iter().any(|n| n == "MY_VAR") && names.iter().any(|n| n == "PATH"));
    }

    #[test]
    fn a_settings_file_adding_one_variable_keeps_the_provider_keys() {
        let text = r#"{ "supervisor": { "repo": "o/r", "projectNumber": 1, "codeowners": ["a"],
            "agentEnv": ["CLAUDE_CONFIG_DIR"] } }"#;
        let s = Settings::from_text(Path::new("s.json"), text, &|_| None)
            .unwrap()
            .settings;
        let lookup = |k: &str| {
            matches!(k, "ANTHROPIC_API_KEY" | "CODEX_HOME" | "CLAUDE_CONFIG_DIR")
                .then(|| format!("{k}-value"))
        };
        let env = agent_env_from(&s, None, &lookup);
        assert_eq!(
            keys(&env),
            ["ANTHROPIC_API_KEY", "CODEX_HOME", "CLAUDE_CONFIG_DIR"]
        );
    }

    #[test]
    fn github_token_only_when_opted_in() {
        let mut s = settings();
        s.pass_github_token = true;
        let env = agent_env_from(&s, Some("ghp_secret"), &lookup);
        let tokens: Vec<_> = env
            .iter()
            .filter(|(k, _)| GITHUB_TOKEN_VARS.contains(&k.as_str()))
            .collect();
        assert_eq!(tokens.len(), 2);
        assert!(tokens.iter().all(|(_, v)| v == "ghp_secret"));
    }

    #[test]
    fn requests_follow_the_role_and_settings() {
        let mut s = settings();
        s.agent_token_budget = 99;
        let (role, _) = AgentDefinition::parse(
            Path::new("researcher.md"),
            "researcher",
            "---\nbackend: codex\n---\nFind things.\n",
        )
        .unwrap();
        let make = |backend: Option<&str>| {
            AgentRequest::for_role(
                &s,
                Path::new("/r"),
                &role,
                "t".into(),
                "/w".into(),
                backend,
                None,
            )
            .unwrap()
        };
        let req = make(None);
        assert_eq!(req.backend, Backend::Codex);
        assert_eq!(req.limits.token_budget, 99);
        assert!(req.keep_partial_on_budget);
        assert_eq!(system_prompt(&role), "Find things.");
        let req = make(Some("claude"));
        assert_eq!(req.backend, Backend::Claude);
    }
}
