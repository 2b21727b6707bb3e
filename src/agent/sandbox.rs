//! `agentSandbox: "bwrap"`: every agent runs inside bubblewrap. It gets PID, IPC and UTS namespaces
//! of its own and a /proc that shows only its own processes (so supervisor's `/proc/<pid>/environ`,
//! `cmdline` and `mem` are out of reach), a mount namespace in which the whole file system is
//! read-only, HOME and /tmp are empty and private, and only the worktree (read-only for a
//! `readOnly` role) and the CLI's configuration directory are writable. The network stays shared.
//!
//! Inside HOME only what a CLI needs comes back: the directories on the agents' PATH that lie under
//! HOME (with their parent when they are a `bin`, where a Node or native installer keeps the rest),
//! the CLI's configuration, the repository's git directory when it is there, and the paths the
//! settings add.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::config::{AgentSandbox, Settings};

use super::backend::{Backend, Launch};
use super::preflight::output_within;

/// How long the namespace probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// What to install when bwrap is missing.
const INSTALL_HINT: &str = "install bubblewrap (apt-get install bubblewrap, dnf install bubblewrap) or set supervisor.agentSandbox to \"none\"";

/// The sandbox the settings ask for: `None` when agents run unconfined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sandbox {
    /// The bwrap program as supervisor's PATH finds it; `None` when it is not installed.
    pub program: Option<PathBuf>,
    /// Extra writable paths (`agentSandboxWritable`), `~/` not yet expanded.
    pub writable: Vec<PathBuf>,
    /// Extra readable paths under HOME (`agentSandboxReadOnly`), `~/` not yet expanded.
    pub read_only: Vec<PathBuf>,
}

/// Where a dispatch runs and what it may reach, for [`Sandbox::wrap`].
#[derive(Debug, Clone, Copy)]
pub struct Confinement<'a> {
    pub cwd: &'a Path,
    /// The worktree is mounted read-only (a `readOnly` role).
    pub read_only_tree: bool,
    pub backend: &'a Backend,
    /// The agent's environment (its PATH, HOME and the CLIs' configuration variables).
    pub env: &'a [(String, String)],
}

impl Sandbox {
    /// The sandbox of `settings`, with bwrap looked up on supervisor's PATH.
    pub fn from_settings(settings: &Settings) -> Option<Sandbox> {
        match settings.agent_sandbox {
            AgentSandbox::None => None,
            AgentSandbox::Bwrap => Some(Sandbox {
                program: super::preflight::find_program(
                    Path::new("bwrap"),
                    std::env::var("PATH").ok().as_deref(),
                    Path::new("/"),
                ),
                writable: settings.agent_sandbox_writable.clone(),
                read_only: settings.agent_sandbox_read_only.clone(),
            }),
        }
    }

    /// Why agents cannot run in this sandbox, when bwrap is not installed.
    pub fn missing(&self) -> Option<String> {
        self.program.is_none().then(|| {
            format!(
                "agentSandbox is \"bwrap\" but bwrap is not on supervisor's PATH; {INSTALL_HINT}"
            )
        })
    }

    /// `launch` run inside bwrap as `c` says, or why it cannot be.
    pub fn wrap(&self, launch: Launch, c: &Confinement<'_>) -> Result<Launch, String> {
        if let Some(problem) = self.missing() {
            return Err(problem);
        }
        let bwrap = self.program.clone().unwrap_or_default();
        let mut args = self.arguments(c);
        args.push("--".into());
        args.push(launch.program.display().to_string());
        args.extend(launch.args);
        Ok(Launch {
            program: bwrap,
            args,
            ..launch
        })
    }

    /// The bwrap arguments before `--` (mounts in order: a later one covers an earlier one).
    pub fn arguments(&self, c: &Confinement<'_>) -> Vec<String> {
        let var = |name: &str| {
            c.env
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
                .filter(|v| !v.is_empty())
        };
        let home = var("HOME")
            .map(PathBuf::from)
            .filter(|h| h != Path::new("/"));
        let expand = |p: &Path| -> Option<PathBuf> {
            match (p.strip_prefix("~"), &home) {
                (Ok(rest), Some(h)) => Some(h.join(rest)),
                (Ok(_), None) => None,
                (Err(_), _) => Some(p.to_path_buf()),
            }
        };
        let mut a = Mounts::default();
        a.flags(&[
            "--die-with-parent",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--tmpfs",
            "/tmp",
        ]);
        if let Some(home) = &home {
            a.flags(&["--tmpfs", &home.display().to_string()]);
        }
        // What the two empty file systems hide comes back read-only where the agents' PATH points
        // into it: an agent CLI installed under HOME or under /tmp must still start.
        let hidden: Vec<&Path> = home
            .as_deref()
            .into_iter()
            .chain([Path::new("/tmp")])
            .collect();
        for dir in var("PATH").unwrap_or("").split(':').map(Path::new) {
            let real = dir.canonicalize().ok();
            for dir in std::iter::once(dir).chain(real.as_deref()) {
                if let Some(keep) = path_entry_to_bind(dir, &hidden) {
                    a.bind("--ro-bind-try", keep);
                }
            }
        }
        if home.is_some() {
            for p in self.read_only.iter().filter_map(|p| expand(p)) {
                a.bind("--ro-bind-try", &p);
            }
        }
        for p in config_homes(c.backend, var, home.as_deref()) {
            a.bind("--bind-try", &p);
        }
        for p in self.writable.iter().filter_map(|p| expand(p)) {
            a.bind("--bind-try", &p);
        }
        if let Backend::Scripted { script, program } = c.backend {
            a.bind("--ro-bind-try", script);
            a.bind("--ro-bind-try", program);
        }
        if let Some(git) = common_git_dir(c.cwd) {
            a.bind("--ro-bind-try", &git);
        }
        let tree = if c.read_only_tree {
            "--ro-bind"
        } else {
            "--bind"
        };
        a.bind(tree, c.cwd);
        a.flags(&["--chdir", &c.cwd.display().to_string()]);
        a.flags(&["--setenv", "TMPDIR", "/tmp"]);
        a.0
    }

    /// Whether bwrap can create its namespaces here: runs `true` inside the sandbox a dispatch in
    /// `cwd` would get. `Ok` carries bwrap's version.
    pub async fn probe(&self, env: &[(String, String)], cwd: &Path) -> Result<String, String> {
        if let Some(problem) = self.missing() {
            return Err(problem);
        }
        let bwrap = self.program.clone().unwrap_or_default();
        let version = run(&bwrap, &["--version".to_string()], env, cwd)
            .await
            .map(|out| out.trim().to_string())?;
        let backend = Backend::Command(crate::config::CommandBackend {
            command: vec!["true".into()],
            prompt_via: crate::config::PromptVia::Stdin,
        });
        let mut args = self.arguments(&Confinement {
            cwd,
            read_only_tree: true,
            backend: &backend,
            env,
        });
        args.extend(["--".into(), "true".into()]);
        run(&bwrap, &args, env, cwd).await.map_err(|e| {
            format!("bwrap cannot create the agents' sandbox here: {e}; allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, or on Ubuntu an AppArmor profile for bwrap), or set supervisor.agentSandbox to \"none\"")
        })?;
        Ok(version)
    }
}

/// What to bind back for PATH entry `dir` when it lies under one of the `hidden` directories: the
/// directory, or its parent when it is a `bin` or `.bin` (where npm, nvm, a virtualenv or a native
/// installer keeps the rest of the program) unless that parent is the hidden directory itself.
fn path_entry_to_bind<'p>(dir: &'p Path, hidden: &[&Path]) -> Option<&'p Path> {
    let under = hidden
        .iter()
        .find(|h| dir.is_absolute() && dir.starts_with(h) && dir != **h)?;
    Some(match (dir.file_name(), dir.parent()) {
        (Some(n), Some(parent)) if (n == "bin" || n == ".bin") && parent != *under => parent,
        _ => dir,
    })
}

/// Mount arguments, skipping duplicates.
#[derive(Default)]
struct Mounts(Vec<String>);

impl Mounts {
    fn flags(&mut self, f: &[&str]) {
        self.0.extend(f.iter().map(|s| s.to_string()));
    }

    fn bind(&mut self, how: &str, path: &Path) {
        let p = path.display().to_string();
        self.0.extend([how.to_string(), p.clone(), p]);
    }
}

/// The configuration directories of the CLI `backend` starts, which it writes (sessions, caches,
/// its own state): the variable naming it, else its default under HOME.
fn config_homes<'a>(
    backend: &Backend,
    var: impl Fn(&str) -> Option<&'a str>,
    home: Option<&Path>,
) -> Vec<PathBuf> {
    let dir = |name: &str, default: &str| -> Option<PathBuf> {
        var(name)
            .map(PathBuf::from)
            .or_else(|| home.map(|h| h.join(default)))
    };
    match backend {
        Backend::Pi | Backend::Scripted { .. } => {
            dir("PI_CODING_AGENT_DIR", ".pi").into_iter().collect()
        }
        Backend::Claude => [
            dir("CLAUDE_CONFIG_DIR", ".claude"),
            home.map(|h| h.join(".claude.json")),
        ]
        .into_iter()
        .flatten()
        .collect(),
        Backend::Codex => dir("CODEX_HOME", ".codex").into_iter().collect(),
        Backend::Command(_) => Vec::new(),
    }
}

/// The git directory a worktree at `cwd` shares with its repository (`<repo>/.git`), read from its
/// `.git` file; `None` for a plain checkout (whose `.git` is inside `cwd`).
fn common_git_dir(cwd: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(cwd.join(".git")).ok()?;
    let gitdir = cwd.join(text.strip_prefix("gitdir:")?.trim());
    let common = std::fs::read_to_string(gitdir.join("commondir"))
        .map(|c| gitdir.join(c.trim()))
        .unwrap_or(gitdir);
    common.canonicalize().ok()
}

/// `program args` to its end within [`PROBE_TIMEOUT`]: its stdout, or the reason it failed.
async fn run(
    program: &Path,
    args: &[String],
    env: &[(String, String)],
    cwd: &Path,
) -> Result<String, String> {
    let out = output_within(program, args, env, cwd, PROBE_TIMEOUT).await?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stderr.lines().rev().find(|l| !l.trim().is_empty());
    Err(format!(
        "{} ({})",
        line.unwrap_or("it printed nothing").trim(),
        out.status
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sandbox() -> Sandbox {
        Sandbox {
            program: Some("/usr/bin/bwrap".into()),
            writable: vec!["~/.cache/pip".into(), "/srv/cache".into()],
            read_only: vec!["~/.gitconfig".into()],
        }
    }

    fn env() -> Vec<(String, String)> {
        [
            ("HOME", "/home/u"),
            (
                "PATH",
                "/home/u/.nvm/versions/node/v20/bin:/home/u/.local/bin:/home/u/bin:/usr/bin",
            ),
            ("CLAUDE_CONFIG_DIR", "/etc/claude-cfg"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .to_vec()
    }

    /// Each `how src dest` triple, in order.
    fn binds(args: &[String]) -> Vec<(String, String)> {
        args.windows(3)
            .filter(|w| w[0].contains("bind") && w[1] == w[2])
            .map(|w| (w[0].clone(), w[1].clone()))
            .collect()
    }

    #[test]
    fn home_is_hidden_and_only_what_the_cli_needs_comes_back() {
        let env = env();
        let args = sandbox().arguments(&Confinement {
            cwd: Path::new("/work/wt-1"),
            read_only_tree: false,
            backend: &Backend::Claude,
            env: &env,
        });
        let text = args.join(" ");
        assert!(
            text.starts_with("--die-with-parent --unshare-pid"),
            "{text}"
        );
        assert!(!text.contains("--unshare-net"), "the network stays: {text}");
        assert!(!text.contains("--unshare-user "), "{text}");
        let pos = |s: &str| text.find(s).unwrap_or_else(|| panic!("{s} in {text}"));
        assert!(pos("--ro-bind / /") < pos("--tmpfs /home/u"));
        assert!(text.contains("--proc /proc"));
        assert!(text.contains("--tmpfs /tmp"));
        assert_eq!(
            binds(&args),
            [
                ("--ro-bind", "/"),
                ("--ro-bind-try", "/home/u/.nvm/versions/node/v20"),
                ("--ro-bind-try", "/home/u/.local"),
                ("--ro-bind-try", "/home/u/bin"),
                ("--ro-bind-try", "/home/u/.gitconfig"),
                ("--bind-try", "/etc/claude-cfg"),
                ("--bind-try", "/home/u/.claude.json"),
                ("--bind-try", "/home/u/.cache/pip"),
                ("--bind-try", "/srv/cache"),
                ("--bind", "/work/wt-1"),
            ]
            .map(|(a, b)| (a.to_string(), b.to_string()))
        );
        assert!(
            text.ends_with("--chdir /work/wt-1 --setenv TMPDIR /tmp"),
            "{text}"
        );
    }

    /// A checkout under /tmp with its agent CLIs in `.tools/` (bwrap's /tmp is empty otherwise).
    #[test]
    fn path_entries_under_tmp_come_back_read_only() {
        let mut env = env();
        env[1].1 = "/tmp/sv/.tools/agents/node_modules/.bin:/tmp/sv/.tools/venv/bin:/tmp/cli:/tmp:/usr/bin"
            .into();
        let args = sandbox().arguments(&Confinement {
            cwd: Path::new("/tmp/wt-1"),
            read_only_tree: false,
            backend: &Backend::Claude,
            env: &env,
        });
        let binds = binds(&args);
        for dir in [
            "/tmp/sv/.tools/agents/node_modules",
            "/tmp/sv/.tools/venv",
            "/tmp/cli",
        ] {
            assert!(
                binds.contains(&("--ro-bind-try".to_string(), dir.to_string())),
                "{dir}: {binds:?}"
            );
        }
        assert!(
            !binds.iter().any(|(_, p)| p == "/tmp"),
            "/tmp itself stays empty: {binds:?}"
        );
        let text = args.join(" ");
        let pos = |s: &str| text.find(s).unwrap_or_else(|| panic!("{s} in {text}"));
        assert!(pos("--tmpfs /tmp") < pos("--ro-bind-try /tmp/sv/.tools/venv"));
    }

    #[test]
    fn read_only_roles_get_a_read_only_tree_and_each_cli_its_own_configuration() {
        let env = env();
        let of = |backend: &Backend, ro: bool| {
            binds(&sandbox().arguments(&Confinement {
                cwd: Path::new("/work/wt-1"),
                read_only_tree: ro,
                backend,
                env: &env,
            }))
        };
        let last = of(&Backend::Pi, true).pop().unwrap();
        assert_eq!(last, ("--ro-bind".into(), "/work/wt-1".into()));
        assert!(of(&Backend::Pi, false).contains(&("--bind-try".into(), "/home/u/.pi".into())));
        assert!(
            of(&Backend::Codex, false).contains(&("--bind-try".into(), "/home/u/.codex".into()))
        );
        assert!(
            !of(&Backend::Codex, false)
                .iter()
                .any(|(_, p)| p.contains("claude"))
        );
    }

    #[test]
    fn a_missing_bwrap_is_an_error_that_says_what_to_do() {
        let s = Sandbox {
            program: None,
            ..sandbox()
        };
        let env = env();
        let err = s
            .wrap(
                Launch::new("pi", vec![]),
                &Confinement {
                    cwd: Path::new("/w"),
                    read_only_tree: false,
                    backend: &Backend::Pi,
                    env: &env,
                },
            )
            .unwrap_err();
        assert!(err.contains("bwrap is not on supervisor's PATH"), "{err}");
        assert!(err.contains("apt-get install bubblewrap"), "{err}");
        let wrapped = sandbox()
            .wrap(
                Launch::new("pi", vec!["-p".into()]).with_stdin("task"),
                &Confinement {
                    cwd: Path::new("/w"),
                    read_only_tree: false,
                    backend: &Backend::Pi,
                    env: &env,
                },
            )
            .unwrap();
        assert_eq!(wrapped.program, Path::new("/usr/bin/bwrap"));
        assert_eq!(wrapped.args[wrapped.args.len() - 3..], ["--", "pi", "-p"]);
        assert_eq!(wrapped.stdin.as_deref(), Some("task"));
    }
}
