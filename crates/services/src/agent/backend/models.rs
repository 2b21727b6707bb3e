//! `provider/model` names as role files write them (pi's convention), mapped to what each CLI takes,
//! and the model a CLI will use when the role names none (Codex: its `config.toml`).

use std::path::{Path, PathBuf};

use crate::agent::AgentDefinition;

/// Providers Claude Code can reach (the Anthropic API, or Anthropic models on Bedrock or Vertex).
pub(crate) const CLAUDE_PROVIDERS: [&str; 5] = [
    "anthropic",
    "bedrock",
    "amazon-bedrock",
    "vertex",
    "google-vertex",
];

/// Model providers built into Codex; more can be defined in its `config.toml`.
pub(crate) const CODEX_BUILTIN_PROVIDERS: [&str; 4] = ["openai", "oss", "ollama", "lmstudio"];

/// A role's model split into provider and model. An explicit `provider:` keeps the model verbatim
/// (a slash may be part of a gateway's model name); otherwise a `provider/` prefix is split off.
pub(crate) fn provider_and_model(role: &AgentDefinition) -> (Option<&str>, Option<&str>) {
    let model = role.model.as_deref();
    if let Some(p) = role.provider.as_deref() {
        return (Some(p), model);
    }
    match model.and_then(|m| m.split_once('/')) {
        Some((p, m)) if is_provider_name(p) && !m.is_empty() => (Some(p), Some(m)),
        _ => (None, model),
    }
}

fn is_provider_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// The `--model` Claude Code gets: the model without a provider Claude Code serves; a name whose
/// provider it does not serve is passed unchanged (a gateway may know it; `check` warns).
pub(crate) fn claude_model(role: &AgentDefinition) -> Option<String> {
    match provider_and_model(role) {
        (Some(p), Some(m)) if role.provider.is_none() && !CLAUDE_PROVIDERS.contains(&p) => {
            Some(format!("{p}/{m}"))
        }
        (_, m) => m.map(str::to_string),
    }
}

/// The `--model` Codex gets and, for a provider other than `openai`, the `model_provider` to select.
pub(crate) fn codex_model(role: &AgentDefinition) -> (Option<String>, Option<String>) {
    let (provider, model) = provider_and_model(role);
    let provider = provider.filter(|p| *p != "openai").map(str::to_string);
    (model.map(str::to_string), provider)
}

/// Why a role's model does not suit its backend, if it does not. `codex_providers` are the providers
/// defined in Codex's `config.toml`.
pub(crate) fn model_warning(
    role: &AgentDefinition,
    backend: &str,
    codex_providers: &[String],
) -> Option<String> {
    let (provider, _) = provider_and_model(role);
    let provider = provider?;
    match backend {
        "claude" if !CLAUDE_PROVIDERS.contains(&provider) => Some(format!(
            "names provider `{provider}`, which Claude Code does not serve (it speaks to Anthropic, Bedrock or Vertex); the model is passed unchanged"
        )),
        "codex"
            if !CODEX_BUILTIN_PROVIDERS.contains(&provider)
                && !codex_providers.iter().any(|p| p == provider) =>
        {
            Some(format!(
                "names provider `{provider}`, which is neither built into Codex ({}) nor defined under [model_providers] in its config.toml",
                CODEX_BUILTIN_PROVIDERS.join(", ")
            ))
        }
        _ => None,
    }
}

/// What Codex's `config.toml` says about models, read without a TOML library: top-level `model` and
/// `model_provider`, and the names of the `[model_providers.NAME]` tables.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct CodexConfig {
    pub(crate) model: Option<String>,
    pub(crate) model_provider: Option<String>,
    pub(crate) providers: Vec<String>,
}

impl CodexConfig {
    /// The configuration under `CODEX_HOME` (else `~/.codex`) of an agent environment; empty when
    /// there is none.
    pub(crate) fn for_env(env: &[(String, String)]) -> CodexConfig {
        match codex_home(env) {
            Some(home) => CodexConfig::read(&home.join("config.toml")),
            None => CodexConfig::default(),
        }
    }

    pub(crate) fn read(path: &Path) -> CodexConfig {
        std::fs::read_to_string(path)
            .map(|t| CodexConfig::parse(&t))
            .unwrap_or_default()
    }

    pub(crate) fn parse(text: &str) -> CodexConfig {
        let mut out = CodexConfig::default();
        let mut top_level = true;
        for line in text.lines() {
            let line = line.trim();
            if line.starts_with('#') || line.is_empty() {
                continue;
            }
            if let Some(header) = line.strip_prefix('[') {
                top_level = false;
                let header = header.trim_start_matches('[');
                let name = header.split(']').next().unwrap_or("").trim();
                if let Some(p) = name.strip_prefix("model_providers.") {
                    let p = p.trim().trim_matches('"').trim_matches('\'');
                    if !p.is_empty() && !out.providers.iter().any(|x| x == p) {
                        out.providers.push(p.to_string());
                    }
                }
                continue;
            }
            if !top_level {
                continue;
            }
            let Some((key, value)) = line.split_once('=') else {
                continue;
            };
            let value = toml_string(value);
            match key.trim() {
                "model" => out.model = value,
                "model_provider" => out.model_provider = value,
                _ => {}
            }
        }
        out
    }
}

/// A TOML basic or literal string value, without a trailing comment.
fn toml_string(value: &str) -> Option<String> {
    let v = value.trim();
    let quote = v.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    let rest = &v[1..];
    let end = rest.find(quote)?;
    Some(rest[..end].to_string())
}

/// `CODEX_HOME` of an agent environment, else `$HOME/.codex`.
pub(crate) fn codex_home(env: &[(String, String)]) -> Option<PathBuf> {
    let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    get("CODEX_HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .or_else(|| get("HOME").map(|h| Path::new(&h).join(".codex")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn role(frontmatter: &str) -> AgentDefinition {
        super::super::test_role(frontmatter)
    }

    #[test]
    fn provider_prefixes_are_mapped_per_backend() {
        let r = role("model: anthropic/claude-sonnet-4-5");
        assert_eq!(claude_model(&r).as_deref(), Some("claude-sonnet-4-5"));
        let r = role("model: claude-opus-4-1");
        assert_eq!(claude_model(&r).as_deref(), Some("claude-opus-4-1"));
        let r = role("model: openai/gpt-5");
        assert_eq!(claude_model(&r).as_deref(), Some("openai/gpt-5"));
        assert_eq!(codex_model(&r), (Some("gpt-5".into()), None));
        let r = role("model: ollama/qwen3");
        assert_eq!(
            codex_model(&r),
            (Some("qwen3".into()), Some("ollama".into()))
        );
        // An explicit provider keeps the model verbatim.
        let r = role("provider: openrouter\nmodel: anthropic/claude-sonnet-4.5");
        assert_eq!(
            codex_model(&r),
            (
                Some("anthropic/claude-sonnet-4.5".into()),
                Some("openrouter".into())
            )
        );
    }

    #[test]
    fn mismatched_providers_are_warned_about() {
        let r = role("model: openai/gpt-5");
        assert!(
            model_warning(&r, "claude", &[])
                .unwrap()
                .contains("`openai`")
        );
        assert!(model_warning(&r, "codex", &[]).is_none());
        assert!(model_warning(&r, "pi", &[]).is_none());
        let r = role("model: anthropic/claude-sonnet-4-5");
        assert!(model_warning(&r, "claude", &[]).is_none());
        assert!(model_warning(&r, "codex", &[]).is_some());
        let r = role("model: local/fake-model");
        assert!(model_warning(&r, "codex", &["local".into()]).is_none());
        assert!(model_warning(&role("model: gpt-5"), "claude", &[]).is_none());
    }

    #[test]
    fn codex_config_is_read_for_models() {
        let c = CodexConfig::parse(
            "# comment\nmodel = \"gpt-5-codex\" # the default\nmodel_provider = 'local'\n\n[model_providers.local]\nname = \"x\"\nmodel = \"not-top-level\"\n[model_providers.\"other\"]\n[profiles.fast]\nmodel = \"o4\"\n",
        );
        assert_eq!(c.model.as_deref(), Some("gpt-5-codex"));
        assert_eq!(c.model_provider.as_deref(), Some("local"));
        assert_eq!(c.providers, ["local", "other"]);
        assert_eq!(CodexConfig::parse("model = 5\n[x"), CodexConfig::default());
    }
}
