//! Before anything is written: is every agent CLI the workflow will use installed where agents will
//! look for it (the PATH of the agents' allowlisted environment), and which version is it?
//!
//! `supervisor check` prints the result; `supervisor run` calls [`preflight`] before its first write
//! to GitHub and stops with the problems when [`Preflight::ok`] is false.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::backend::Backend;
use super::backend::models::{CodexConfig, model_warning};
use super::definition::RoleSet;
use super::dispatch::{agent_env, agent_env_names};
use super::protocol::strip_ansi;
use super::sandbox::Sandbox;
use crate::config::Settings;

/// How long `<cli> --version` may take (a cold start of a large CLI can take seconds).
const VERSION_TIMEOUT: Duration = Duration::from_secs(20);

/// One backend the workflow uses: its name as configured (`pi`, `claude`, a key of `backends`, …),
/// the roles that run on it, where the agents' PATH finds its program, and either the first line the
/// CLI printed for `--version` (none for CLIs without one) or why it cannot run, with what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendCheck {
    pub name: String,
    pub roles: Vec<String>,
    pub path: Option<PathBuf>,
    pub state: Result<Option<String>, String>,
}

impl BackendCheck {
    pub fn version(&self) -> Option<&str> {
        self.state.as_ref().ok().and_then(|v| v.as_deref())
    }

    pub fn problem(&self) -> Option<&str> {
        self.state.as_ref().err().map(String::as_str)
    }

    /// `{ name, roles, path, version, problem }`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "name": self.name, "roles": self.roles, "path": self.path,
            "version": self.version(), "problem": self.problem(),
        })
    }
}

/// What [`preflight`] found: the backends, models that do not suit their backend (as warnings), and
/// the names agents may receive (the effective allowlist, in order), each with whether it is set in
/// supervisor's environment now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Preflight {
    pub backends: Vec<BackendCheck>,
    /// The agents' sandbox (`agentSandbox`), when one is asked for: bwrap's path and version, or why
    /// agents cannot run in it.
    pub sandbox: Option<BackendCheck>,
    pub warnings: Vec<String>,
    pub agent_env: Vec<(String, bool)>,
    /// Backends that would find no provider credentials, where that can be known: one line each
    /// (`claude (researcher, auditor): …`), with what to do.
    pub keys: Vec<String>,
}

impl Preflight {
    /// Whether every backend can run (in the sandbox, when one is asked for).
    pub fn ok(&self) -> bool {
        self.checks().all(|b| b.state.is_ok())
    }

    fn checks(&self) -> impl Iterator<Item = &BackendCheck> {
        self.backends.iter().chain(&self.sandbox)
    }

    /// One line per backend that cannot run: `claude (researcher, auditor): …`.
    pub fn problems(&self) -> Vec<String> {
        self.checks()
            .filter_map(|b| {
                b.problem()
                    .map(|p| format!("{} ({}): {p}", b.name, b.roles.join(", ")))
            })
            .collect()
    }
}

/// Check every backend the roles of `roles` (the workflow's agents) run on: resolvable, on the
/// agents' PATH, and answering `--version`. Never fails; problems are in the result.
pub async fn preflight(settings: &Settings, roles: &RoleSet, repo_root: &Path) -> Preflight {
    let env = agent_env(settings, None);
    let agent_env = agent_env_names(settings)
        .into_iter()
        .map(|n| {
            let set = env.iter().any(|(k, _)| *k == n);
            (n, set)
        })
        .collect();
    let path_var = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone());
    let codex = CodexConfig::for_env(&env);

    let mut by_backend: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut warnings = Vec::new();
    for (name, role) in &roles.agents {
        let backend = role.backend_name(settings).to_string();
        if let Some(w) = model_warning(role, &backend, &codex.providers) {
            warnings.push(format!(
                "role `{name}` (backend {backend}): model `{}` {w}",
                role.model.as_deref().unwrap_or("")
            ));
        }
        by_backend.entry(backend).or_default().push(name.clone());
    }

    let mut tasks = tokio::task::JoinSet::new();
    let mut keys = Vec::new();
    for (i, (name, role_names)) in by_backend.into_iter().enumerate() {
        let mut check = BackendCheck {
            name: name.clone(),
            roles: role_names,
            path: None,
            state: Ok(None),
        };
        let backend = match Backend::resolve_in(&name, settings, repo_root) {
            Ok(b) => b,
            Err(e) => {
                check.state = Err(e.to_string());
                tasks.spawn(async move { (i, check) });
                continue;
            }
        };
        if let Backend::Scripted { script, .. } = &backend {
            if !script.is_file() {
                check.state = Err(format!(
                    "the script {} does not exist; fix supervisor.agentScript",
                    script.display()
                ));
            }
        }
        if let Some(missing) = missing_credentials(&backend, &env) {
            keys.push(format!("{name} ({}): {missing}", check.roles.join(", ")));
        }
        let program = backend.program();
        check.path = program
            .as_deref()
            .and_then(|p| find_program(p, path_var.as_deref(), repo_root));
        if check.path.is_none() && check.state.is_ok() {
            check.state = Err(not_found(&name, program.as_deref(), path_var.as_deref()));
        }
        let flag = backend.version_flag();
        let env = env.clone();
        let dir = repo_root.to_path_buf();
        tasks.spawn(async move {
            if let (Some(path), Some(flag), Ok(_)) = (&check.path, flag, &check.state) {
                check.state = version(path, flag, &env, &dir).await.map(Some);
            }
            (i, check)
        });
    }
    let all_roles: Vec<String> = roles.agents.keys().cloned().collect();
    let sandbox = Sandbox::from_settings(settings).map(|sb| async move {
        let state = sb.probe(&env, repo_root).await.map(Some);
        BackendCheck {
            name: "bwrap (agentSandbox)".into(),
            roles: all_roles,
            path: sb.program,
            state,
        }
    });
    let sandbox = match sandbox {
        Some(probe) => Some(probe.await),
        None => None,
    };
    let mut backends: Vec<(usize, BackendCheck)> = tasks.join_all().await;
    backends.sort_by_key(|(i, _)| *i);
    Preflight {
        backends: backends.into_iter().map(|(_, c)| c).collect(),
        sandbox,
        warnings,
        agent_env,
        keys,
    }
}

/// Why `backend` would find no provider credentials in `env` (the agents' environment) and the
/// files its CLI reads them from; `None` when it has some, or when that cannot be known (a CLI
/// run by a command of the settings, a macOS keychain, a provider configured in the CLI's own
/// settings).
pub(crate) fn missing_credentials(backend: &Backend, env: &[(String, String)]) -> Option<String> {
    let var = |k: &str| {
        env.iter()
            .find(|(name, _)| name == k)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.trim().is_empty())
    };
    let set = |names: &[&str]| names.iter().any(|n| var(n).is_some());
    let home = var("HOME").map(PathBuf::from);
    let dir = |over: &str, under_home: &str| {
        var(over)
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(under_home)))
    };
    let has =
        |dir: &Option<PathBuf>, file: &str| dir.as_ref().is_some_and(|d| d.join(file).is_file());
    let mentions = |path: Option<PathBuf>, what: &[&str]| {
        path.and_then(|p| std::fs::read_to_string(p).ok())
            .is_some_and(|text| what.iter().any(|w| text.contains(w)))
    };
    match backend {
        Backend::Claude => {
            let vars = [
                "ANTHROPIC_API_KEY",
                "ANTHROPIC_AUTH_TOKEN",
                "CLAUDE_CODE_OAUTH_TOKEN",
                "CLAUDE_CODE_USE_BEDROCK",
                "CLAUDE_CODE_USE_VERTEX",
                "CLAUDE_CODE_USE_FOUNDRY",
            ];
            let config = dir("CLAUDE_CONFIG_DIR", ".claude");
            let logged_in = has(&config, ".credentials.json")
                || mentions(
                    config.as_ref().map(|d| d.join("settings.json")),
                    &["apiKeyHelper"],
                )
                || mentions(
                    config.as_ref().map(|d| d.join(".claude.json")),
                    &["primaryApiKey"],
                )
                || mentions(
                    home.as_ref().map(|h| h.join(".claude.json")),
                    &["primaryApiKey"],
                );
            // On macOS a login lives in the keychain, which is not read here.
            (!set(&vars) && !logged_in && !cfg!(target_os = "macos")).then(|| {
                format!(
                    "no credentials: ANTHROPIC_API_KEY is not among the variables agents receive, and no login is stored in {}; export ANTHROPIC_API_KEY (agentEnv passes others, e.g. CLAUDE_CODE_OAUTH_TOKEN), or run `claude` once and log in as the user supervisor runs as",
                    shown(&config)
                )
            })
        }
        Backend::Codex => {
            let codex = dir("CODEX_HOME", ".codex");
            let own_provider = mentions(
                codex.as_ref().map(|d| d.join("config.toml")),
                &["model_provider"],
            );
            (!set(&["OPENAI_API_KEY", "CODEX_API_KEY"]) && !has(&codex, "auth.json") && !own_provider)
                .then(|| {
                    format!(
                        "no credentials: OPENAI_API_KEY is not among the variables agents receive, and {} does not exist; export OPENAI_API_KEY, or run `codex login` as the user supervisor runs as",
                        codex.map_or("CODEX_HOME/auth.json".into(), |d| d.join("auth.json").display().to_string())
                    )
                })
        }
        Backend::Pi => {
            let agent = dir("PI_CODING_AGENT_DIR", ".pi/agent");
            let key = env.iter().any(|(name, v)| {
                (name.ends_with("_API_KEY") || name.ends_with("_AUTH_TOKEN"))
                    && !v.trim().is_empty()
            });
            (!key && !has(&agent, "auth.json") && !has(&agent, "models.json")).then(|| {
                format!(
                    "no provider key: no …_API_KEY is among the variables agents receive, and {} has no auth.json (a login) or models.json (providers of your own); export your provider's key (ANTHROPIC_API_KEY, OPENAI_API_KEY, GEMINI_API_KEY, …; agentEnv passes others), or log in with pi's /login as the user supervisor runs as",
                    shown(&agent)
                )
            })
        }
        Backend::Command(_) | Backend::Scripted { .. } => None,
    }
}

fn shown(dir: &Option<PathBuf>) -> String {
    dir.as_ref().map_or(
        "the CLI's configuration directory (HOME is not set)".into(),
        |d| d.display().to_string(),
    )
}

fn not_found(name: &str, program: Option<&Path>, path_var: Option<&str>) -> String {
    let program = program.map(|p| p.display().to_string()).unwrap_or_default();
    let install = match name {
        "pi" => "install it (npm install -g @mariozechner/pi-coding-agent)",
        "claude" => "install it (npm install -g @anthropic-ai/claude-code)",
        "codex" => "install it (npm install -g @openai/codex)",
        _ => "install it",
    };
    format!(
        "`{program}` is not on the agents' PATH ({}); {install}, put it on PATH, or give the roles another backend",
        path_var.unwrap_or("PATH is not set")
    )
}

/// `program` as the agents' PATH resolves it: a path with a slash as it is (relative to
/// `base`), else the first executable file of that name in `path_var`.
pub fn find_program(program: &Path, path_var: Option<&str>, base: &Path) -> Option<PathBuf> {
    if program.as_os_str().is_empty() {
        return None;
    }
    if program.components().count() > 1 || program.is_absolute() {
        let p = base.join(program);
        return is_executable(&p).then_some(p);
    }
    path_var?
        .split(':')
        .filter(|d| !d.is_empty())
        .map(|d| Path::new(d).join(program))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// `program args` in `dir` with only `env` and stdin from /dev/null, to its end within `timeout`;
/// why not when it could not start or did not end.
pub(super) async fn output_within(
    program: &Path,
    args: &[String],
    env: &[(String, String)],
    dir: &Path,
    timeout: Duration,
) -> Result<std::process::Output, String> {
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .current_dir(dir)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let shown = format!("`{} {}`", program.display(), args.join(" "));
    match tokio::time::timeout(timeout, cmd.output()).await {
        Err(_) => Err(format!(
            "{shown} did not answer within {} s",
            timeout.as_secs()
        )),
        Ok(Err(e)) => Err(format!("{shown} could not start: {e}")),
        Ok(Ok(out)) => Ok(out),
    }
}

/// The first line `program flag` prints (pi prints its version on stderr).
async fn version(
    program: &Path,
    flag: &str,
    env: &[(String, String)],
    dir: &Path,
) -> Result<String, String> {
    let shown = format!("`{} {flag}`", program.display());
    let out = output_within(program, &[flag.to_string()], env, dir, VERSION_TIMEOUT)
        .await
        .map_err(|e| format!("{e}; check the installation"))?;
    let text = |b: &[u8]| {
        strip_ansi(&String::from_utf8_lossy(b))
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .map(str::to_string)
    };
    let first = text(&out.stdout).or_else(|| text(&out.stderr));
    if !out.status.success() {
        return Err(format!(
            "{shown} failed ({}){}; check the installation",
            out.status,
            first.map(|l| format!(": {l}")).unwrap_or_default()
        ));
    }
    first.ok_or_else(|| format!("{shown} printed nothing; check the installation"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A provider key among the agents' variables, or a login in the CLI's own directory, is
    /// enough; neither is a missing key, said before anything runs.
    #[test]
    fn a_missing_provider_key_is_known_from_the_environment_and_the_clis_files() {
        let home = tempfile::tempdir().unwrap();
        let env = |extra: &[(&str, &str)]| -> Vec<(String, String)> {
            let mut env = vec![("HOME".to_string(), home.path().display().to_string())];
            env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
            env
        };
        let claude = missing_credentials(&Backend::Claude, &env(&[]));
        if !cfg!(target_os = "macos") {
            let why = claude.expect("no key, no login");
            assert!(why.contains("ANTHROPIC_API_KEY"), "{why}");
            assert!(why.contains(".claude"), "{why}");
        }
        assert_eq!(
            missing_credentials(&Backend::Claude, &env(&[("ANTHROPIC_API_KEY", "sk")])),
            None
        );
        // An empty variable is no key.
        let codex = missing_credentials(&Backend::Codex, &env(&[("OPENAI_API_KEY", " ")]));
        assert!(codex.unwrap().contains("codex login"));
        let pi = missing_credentials(&Backend::Pi, &env(&[]));
        assert!(pi.unwrap().contains(".pi/agent"));
        assert_eq!(
            missing_credentials(&Backend::Pi, &env(&[("GEMINI_API_KEY", "k")])),
            None
        );
        // Logins the CLIs keep in their own directories.
        std::fs::create_dir_all(home.path().join(".claude")).unwrap();
        std::fs::write(home.path().join(".claude/.credentials.json"), "{}").unwrap();
        std::fs::create_dir_all(home.path().join(".codex")).unwrap();
        std::fs::write(home.path().join(".codex/auth.json"), "{}").unwrap();
        let pi_dir = home.path().join("pi");
        std::fs::create_dir_all(&pi_dir).unwrap();
        std::fs::write(pi_dir.join("models.json"), "{}").unwrap();
        let pi_env = env(&[("PI_CODING_AGENT_DIR", &pi_dir.display().to_string())]);
        assert_eq!(missing_credentials(&Backend::Claude, &env(&[])), None);
        assert_eq!(missing_credentials(&Backend::Codex, &env(&[])), None);
        assert_eq!(missing_credentials(&Backend::Pi, &pi_env), None);
    }

    #[test]
    fn programs_are_found_on_the_given_path_only() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let exe = bin.join("tool");
        std::fs::write(&exe, "#!/bin/sh\n").unwrap();
        let plain = bin.join("plain");
        std::fs::write(&plain, "").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = format!("/nonexistent:{}", bin.display());
        assert_eq!(
            find_program(Path::new("tool"), Some(&path), dir.path()),
            Some(exe.clone())
        );
        assert_eq!(
            find_program(Path::new("plain"), Some(&path), dir.path()),
            None
        );
        assert_eq!(
            find_program(Path::new("tool"), Some("/nonexistent"), dir.path()),
            None
        );
        assert_eq!(
            find_program(Path::new("bin/tool"), None, dir.path()),
            Some(exe)
        );
    }
}
