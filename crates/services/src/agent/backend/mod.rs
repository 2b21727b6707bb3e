//! Agent CLIs. Each file knows how to start one CLI and how to read its output stream; all of them
//! fold into the same [`Tally`](super::stream::Tally), which the runner turns into an `AgentRun`.

mod claude;
mod codex;
mod command;
pub(crate) mod models;
mod pi;
pub(crate) mod scripted;

use std::path::{Path, PathBuf};

use crate::config::{CommandBackend, Settings};

use super::AgentDefinition;
use super::error::AgentError;
use super::run::Limits;
use super::stream::StreamParser;

pub use claude::ClaudeStream;
pub use codex::CodexStream;
pub use command::CommandStream;
pub use pi::{LIMITS_EXTENSION, PiEvents, PiStream, REFUSAL};
pub use scripted::{SCRIPT_SUBCOMMAND, Script, ScriptAction, replay};

/// Which agent CLI runs a role.
#[derive(Debug, Clone, PartialEq)]
pub enum Backend {
    /// `pi -p --mode json`.
    Pi,
    /// `claude -p --output-format stream-json --verbose`.
    Claude,
    /// `codex exec --json`.
    Codex,
    /// Any CLI, from the settings' `backends`.
    Command(CommandBackend),
    /// Replays a script file through a real subprocess (`supervisor agent-script`), emitting pi's
    /// JSON events: for tests and the demo.
    Scripted {
        script: PathBuf,
        /// The `supervisor` binary that replays the script; the current executable by default.
        program: PathBuf,
    },
}

/// What one dispatch asks of a CLI.
#[derive(Debug, Clone, Copy)]
pub struct Invocation<'a> {
    pub role: &'a AgentDefinition,
    pub(crate) system_prompt: &'a str,
    pub(crate) task: &'a str,
    pub attempt: u32,
    /// The task revises a pull request after review (not a stage of the board).
    pub revision: bool,
    /// The issue the dispatch is about (a run's, or an epic's sub-issue its reviewer judges).
    pub subject: Option<&'a str>,
    /// The environment the agent gets (the allowlist), for CLIs whose configuration lives in it.
    pub(crate) env: &'a [(String, String)],
}

/// How to start a CLI: program, arguments, what to write on its stdin (`None`: /dev/null), and
/// variables set for this CLI on top of the agent environment.
///
/// The task always travels on stdin for the built-in CLIs: one argument is limited to 128 KiB on
/// Linux, and issue text plus earlier stages' comments can exceed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    pub(crate) program: PathBuf,
    pub(crate) args: Vec<String>,
    pub(crate) stdin: Option<String>,
    pub(crate) env: Vec<(String, String)>,
    /// The model the CLI was told to use, or that its configuration names.
    pub(crate) model: Option<String>,
}

impl Launch {
    /// A program started with `args` and stdin from /dev/null.
    pub fn new(program: impl Into<PathBuf>, args: Vec<String>) -> Launch {
        Launch {
            program: program.into(),
            args,
            stdin: None,
            env: Vec::new(),
            model: None,
        }
    }

    /// The same launch with `text` on stdin.
    pub(crate) fn with_stdin(mut self, text: impl Into<String>) -> Launch {
        self.stdin = Some(text.into());
        self
    }
}

/// One agent CLI: how it is started and how its stdout is read.
pub trait AgentCli {
    fn launch(&self, inv: &Invocation<'_>) -> Launch;
    fn parser(&self) -> Box<dyn StreamParser>;

    /// Have the CLI itself enforce `limits` before a tool runs, where it can: changes `launch` and
    /// returns what must outlive the process. `Ok(None)`: it cannot, and supervisor's checks of the
    /// stream are all there is.
    fn guard(&self, _launch: &mut Launch, _limits: &Limits) -> Result<Option<Guard>, String> {
        Ok(None)
    }
}

/// Files a CLI reads to enforce the limits itself (pi's limits extension), in a private temporary
/// directory that lives as long as this value.
#[derive(Debug)]
pub struct Guard {
    dir: tempfile::TempDir,
}

impl Guard {
    /// A new private directory for the guard's files.
    fn new(what: &str) -> Result<Guard, String> {
        tempfile::Builder::new()
            .prefix("supervisor-guard-")
            .tempdir()
            .map(|dir| Guard { dir })
            .map_err(|e| format!("cannot create a temporary directory for {what}: {e}"))
    }

    /// Write `contents` to `name` in the guard's directory; its path.
    fn file(&self, name: &str, contents: &str) -> Result<PathBuf, String> {
        let path = self.dir.path().join(name);
        std::fs::write(&path, contents)
            .map(|()| path.clone())
            .map_err(|e| format!("cannot write {}: {e}", path.display()))
    }

    /// The directory, which a sandboxed agent must be able to read.
    pub(crate) fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Backend {
    /// The backend called `name` under `settings`: a built-in name or a key of `backends`. A relative
    /// `agentScript` is taken relative to the current directory; see [`Backend::resolve_in`].
    pub fn resolve(name: &str, settings: &Settings) -> Result<Backend, AgentError> {
        let cwd = std::env::current_dir().unwrap_or_default();
        Backend::resolve_in(name, settings, &cwd)
    }

    /// As [`Backend::resolve`], with a relative `agentScript` taken relative to `repo_root`.
    pub(crate) fn resolve_in(
        name: &str,
        settings: &Settings,
        repo_root: &Path,
    ) -> Result<Backend, AgentError> {
        match name {
            "pi" => Ok(Backend::Pi),
            "claude" => Ok(Backend::Claude),
            "codex" => Ok(Backend::Codex),
            "scripted" => {
                let script = settings
                    .agent_script
                    .as_ref()
                    .ok_or_else(|| AgentError::Backend {
                        name: name.into(),
                        problem: "needs a script file".into(),
                        fix: "set supervisor.agentScript (or SUPERVISOR_AGENT_SCRIPT) to a script file; see the README, Scripted agents".into(),
                    })?;
                let program = std::env::current_exe().map_err(|e| AgentError::Backend {
                    name: name.into(),
                    problem: format!("cannot find the supervisor executable: {e}"),
                    fix: "run supervisor from an installed binary".into(),
                })?;
                Ok(Backend::Scripted {
                    script: repo_root.join(script),
                    program,
                })
            }
            other => match settings.backends.get(other) {
                Some(cmd) => Ok(Backend::Command(cmd.clone())),
                None if other == "command" => Err(AgentError::Backend {
                    name: name.into(),
                    problem: "the generic command backend needs a command".into(),
                    fix: "define it under supervisor.backends, e.g. \"aider\": { \"command\": [\"aider\", \"--yes\", \"--message\", \"{prompt}\"], \"promptVia\": \"arg\" }, and name that key".into(),
                }),
                None => Err(AgentError::Backend {
                    name: name.into(),
                    problem: "is neither built in nor defined in the settings' backends".into(),
                    fix: "use pi, claude, codex, scripted or a key of supervisor.backends".into(),
                }),
            },
        }
    }

    /// The name shown in reports.
    pub fn name(&self) -> String {
        match self {
            Backend::Pi => "pi".into(),
            Backend::Claude => "claude".into(),
            Backend::Codex => "codex".into(),
            Backend::Command(c) => format!(
                "command ({})",
                c.command.first().map(String::as_str).unwrap_or("")
            ),
            Backend::Scripted { .. } => "scripted".into(),
        }
    }

    /// The program this backend starts, as the agents' PATH will resolve it; `None` for a command
    /// backend with an empty command.
    pub(crate) fn program(&self) -> Option<PathBuf> {
        match self {
            Backend::Pi => Some("pi".into()),
            Backend::Claude => Some("claude".into()),
            Backend::Codex => Some("codex".into()),
            Backend::Command(c) => c.command.first().map(PathBuf::from),
            Backend::Scripted { program, .. } => Some(program.clone()),
        }
    }

    /// The argument that makes the program print its version, for CLIs known to have one.
    pub(crate) fn version_flag(&self) -> Option<&'static str> {
        match self {
            Backend::Pi | Backend::Claude | Backend::Codex => Some("--version"),
            _ => None,
        }
    }

    /// Run `f` with this backend's CLI.
    pub(crate) fn with_cli<T>(&self, f: impl FnOnce(&dyn AgentCli) -> T) -> T {
        match self {
            Backend::Pi => f(&pi::Pi),
            Backend::Claude => f(&claude::Claude),
            Backend::Codex => f(&codex::Codex),
            Backend::Command(c) => f(c),
            Backend::Scripted { script, program } => f(&scripted::Scripted { script, program }),
        }
    }
}

/// The system prompt and the task as one text, for CLIs that take no separate system prompt.
pub(crate) fn combined_prompt(system_prompt: &str, task: &str) -> String {
    format!("{system_prompt}\n\n---\n\n# Task\n\n{task}")
}

/// A role parsed from frontmatter lines and a one-line prompt, for the backends' tests.
#[cfg(test)]
pub(crate) fn test_role(frontmatter: &str) -> AgentDefinition {
    AgentDefinition::parse(
        Path::new("r.md"),
        "r",
        &format!("---\n{frontmatter}\n---\nRole.\n"),
    )
    .expect("a valid test role")
    .0
}

/// `launch` of `cli` for a role with `frontmatter`, the task "the task" and `env`.
#[cfg(test)]
pub(crate) fn test_launch(
    cli: &dyn AgentCli,
    frontmatter: &str,
    env: &[(String, String)],
) -> Launch {
    let role = test_role(frontmatter);
    cli.launch(&Invocation {
        role: &role,
        system_prompt: "Role.",
        task: "the task",
        attempt: 1,
        revision: false,
        subject: None,
        env,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{PromptVia, RepoSlug};

    fn settings() -> Settings {
        Settings::minimal(RepoSlug::parse("o/r").unwrap(), 1, vec!["a".into()])
    }

    #[test]
    fn resolves_names() {
        let mut s = settings();
        assert_eq!(Backend::resolve("pi", &s).unwrap(), Backend::Pi);
        assert_eq!(Backend::resolve("codex", &s).unwrap(), Backend::Codex);
        assert!(matches!(
            Backend::resolve("scripted", &s),
            Err(AgentError::Backend { .. })
        ));
        s.agent_script = Some("agents.yaml".into());
        match Backend::resolve_in("scripted", &s, Path::new("/repo")).unwrap() {
            Backend::Scripted { script, .. } => assert_eq!(script, Path::new("/repo/agents.yaml")),
            other => panic!("{other:?}"),
        }
        s.backends.insert(
            "aider".into(),
            CommandBackend {
                command: vec!["aider".into()],
                prompt_via: PromptVia::Arg,
            },
        );
        assert!(matches!(
            Backend::resolve("aider", &s).unwrap(),
            Backend::Command(_)
        ));
        let err = Backend::resolve("command", &s).unwrap_err().to_string();
        assert!(err.contains("supervisor.backends"), "{err}");
        assert!(Backend::resolve("nope", &s).is_err());
    }
}
