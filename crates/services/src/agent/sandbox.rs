//! `agentSandbox: "bwrap"`: every agent runs inside bubblewrap. It gets PID, IPC and UTS namespaces
//! of its own and a /proc that shows only its own processes (so supervisor's `/proc/<pid>/environ`,
//! `cmdline` and `mem` are out of reach), a mount namespace in which the whole file system is
//! read-only, HOME and /tmp are empty and private, and only the worktree (read-only for a
//! `readOnly` role) and the CLI's configuration directory are writable. The network stays shared.
//!
//! Inside HOME only what a CLI needs comes back: the installations of the directories on the agents'
//! PATH that lie under HOME (see [`installation_of`]), the CLI's configuration, the repository's git
//! directory when it is there, and the paths the settings add.
//!
//! Gate tools run in the same sandbox (`backend: None`): no CLI configuration, their own installation
//! visible and only the directories they write their caches and reports to writable.

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
    pub(crate) cwd: &'a Path,
    /// The worktree is mounted read-only (a `readOnly` role, an analysis tool).
    pub(crate) read_only_tree: bool,
    /// The agent CLI started, whose configuration stays writable; `None` for a gate's process.
    pub(crate) backend: Option<&'a Backend>,
    /// The process's environment (its PATH, HOME and the CLIs' configuration variables).
    pub(crate) env: &'a [(String, String)],
    /// More paths visible read-only, mounted before the worktree (a gate tool's installation).
    pub(crate) readable: &'a [PathBuf],
    /// More writable paths, mounted after the worktree (where a gate tool keeps its cache or writes
    /// its report, even inside a read-only worktree).
    pub(crate) writable: &'a [PathBuf],
}

impl<'a> Confinement<'a> {
    /// An agent CLI's confinement: the worktree at `cwd`, the CLI's configuration writable.
    pub(crate) fn agent(
        cwd: &'a Path,
        read_only_tree: bool,
        backend: &'a Backend,
        env: &'a [(String, String)],
    ) -> Confinement<'a> {
        Confinement {
            cwd,
            read_only_tree,
            backend: Some(backend),
            env,
            readable: &[],
            writable: &[],
        }
    }
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
    pub(crate) fn missing(&self) -> Option<String> {
        self.program.is_none().then(|| {
            format!(
                "agentSandbox is \"bwrap\" but bwrap is not on supervisor's PATH; {INSTALL_HINT}"
            )
        })
    }

    /// `launch` run inside bwrap as `c` says, or why it cannot be.
    pub(crate) fn wrap(&self, launch: Launch, c: &Confinement<'_>) -> Result<Launch, String> {
        let (bwrap, mut args) = self.command_line(c)?;
        args.push(launch.program.display().to_string());
        args.extend(launch.args);
        Ok(Launch {
            program: bwrap,
            args,
            ..launch
        })
    }

    /// The bwrap program and its arguments up to and including `--`, after which the confined
    /// program and its arguments follow; or why bwrap cannot be run.
    pub(crate) fn command_line(
        &self,
        c: &Confinement<'_>,
    ) -> Result<(PathBuf, Vec<String>), String> {
        if let Some(problem) = self.missing() {
            return Err(problem);
        }
        let mut args = self.arguments(c);
        args.push("--".into());
        Ok((self.program.clone().unwrap_or_default(), args))
    }

    /// The bwrap arguments before `--` (mounts in order: a later one covers an earlier one).
    pub(crate) fn arguments(&self, c: &Confinement<'_>) -> Vec<String> {
        self.mounts(c).args
    }

    /// Whether the file at `path` (absolute, symbolic links resolved) is there inside the sandbox
    /// `c` describes: what supervisor reads on behalf of a confined process reaches no further.
    pub(crate) fn shows(&self, c: &Confinement<'_>, path: &Path) -> bool {
        let covers = |mount: &Path| {
            path.starts_with(mount) || mount.canonicalize().is_ok_and(|m| path.starts_with(m))
        };
        self.mounts(c)
            .views
            .iter()
            .rev()
            .find(|(mount, _)| covers(mount))
            .is_some_and(|(_, shown)| *shown)
    }

    fn mounts(&self, c: &Confinement<'_>) -> Mounts {
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
        ]);
        a.bind("--ro-bind", Path::new("/"));
        a.cover("--dev", Path::new("/dev"));
        a.cover("--proc", Path::new("/proc"));
        a.cover("--tmpfs", Path::new(TMP));
        if let Some(home) = &home {
            a.cover("--tmpfs", home);
        }
        // What the two empty file systems hide comes back read-only where the agents' PATH points
        // into it: an agent CLI installed under HOME or under /tmp must still start.
        let hidden: Vec<&Path> = home
            .as_deref()
            .into_iter()
            .chain([Path::new(TMP)])
            .collect();
        for dir in var("PATH").unwrap_or("").split(':').map(Path::new) {
            let real = dir.canonicalize().ok();
            for dir in std::iter::once(dir).chain(real.as_deref()) {
                let hidden_here = hidden
                    .iter()
                    .any(|h| dir.is_absolute() && dir.starts_with(h) && dir != *h);
                if let Some(keep) = installation_of(dir, home.as_deref()).filter(|_| hidden_here) {
                    a.bind("--ro-bind-try", &keep);
                }
            }
        }
        if home.is_some() {
            for p in self.read_only.iter().filter_map(|p| expand(p)) {
                a.bind("--ro-bind-try", &p);
            }
        }
        if let Some(backend) = c.backend {
            for p in config_homes(backend, var, home.as_deref()) {
                a.bind("--bind-try", &p);
            }
        }
        for p in self.writable.iter().filter_map(|p| expand(p)) {
            a.bind("--bind-try", &p);
        }
        if let Some(Backend::Scripted { script, program }) = c.backend {
            a.bind("--ro-bind-try", script);
            a.bind("--ro-bind-try", program);
        }
        // Resolved: bwrap cannot create a mount point through a link on the read-only root.
        let resolved = |p: &PathBuf| p.canonicalize().unwrap_or_else(|_| p.clone());
        for p in c.readable.iter().map(resolved) {
            a.bind("--ro-bind-try", &p);
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
        for p in c.writable.iter().map(resolved) {
            a.bind("--bind", &p);
        }
        a.flags(&["--chdir", &c.cwd.display().to_string()]);
        a.flags(&["--setenv", "TMPDIR", TMP]);
        a
    }

    /// Whether bwrap can create its namespaces here: runs `true` inside the sandbox a dispatch in
    /// `cwd` would get. `Ok` carries bwrap's version.
    pub(crate) async fn probe(
        &self,
        env: &[(String, String)],
        cwd: &Path,
    ) -> Result<String, String> {
        if let Some(problem) = self.missing() {
            return Err(problem);
        }
        let bwrap = self.program.clone().unwrap_or_default();
        let version = run(&bwrap, &["--version".to_string()], env, cwd)
            .await
            .map(|out| out.trim().to_string())?;
        let mut args = self.arguments(&Confinement {
            cwd,
            read_only_tree: true,
            backend: None,
            env,
            readable: &[],
            writable: &[],
        });
        args.extend(["--".into(), "true".into()]);
        run(&bwrap, &args, env, cwd).await.map_err(|e| {
            format!("bwrap cannot create the agents' sandbox here: {e}; allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, or on Ubuntu an AppArmor profile for bwrap), or set supervisor.agentSandbox to \"none\"")
        })?;
        Ok(version)
    }
}

/// The private /tmp of the sandbox.
const TMP: &str = "/tmp";

/// bwrap's arguments, and what each mount shows: a path bound in, or one covered by an empty or
/// private file system (`--tmpfs`, `--dev`, `--proc`), in order.
#[derive(Default)]
struct Mounts {
    args: Vec<String>,
    views: Vec<(PathBuf, bool)>,
}

impl Mounts {
    fn flags(&mut self, f: &[&str]) {
        self.args.extend(f.iter().map(|s| s.to_string()));
    }

    fn bind(&mut self, how: &str, path: &Path) {
        let p = path.display().to_string();
        self.args.extend([how.to_string(), p.clone(), p]);
        self.views.push((path.to_path_buf(), true));
    }

    fn cover(&mut self, how: &str, path: &Path) {
        self.args
            .extend([how.to_string(), path.display().to_string()]);
        self.views.push((path.to_path_buf(), false));
    }
}

/// What to keep visible for a program in `dir` (absolute): the whole `node_modules` it lies in (an
/// npm package needs its dependencies beside it), else the parent of a `bin` (where a Node, Python
/// or native installer keeps the rest), else `dir` itself. Never HOME, /tmp or a directory holding
/// either (which would bring back what the sandbox hides); `None` when `dir` is one of those.
pub(crate) fn installation_of(dir: &Path, home: Option<&Path>) -> Option<PathBuf> {
    let hidden = [home, Some(Path::new(TMP))];
    let allowed = |p: &Path| !hidden.iter().flatten().any(|h| h.starts_with(p));
    let modules = dir
        .ancestors()
        .find(|a| a.file_name().is_some_and(|n| n == "node_modules"));
    let bin_parent = dir
        .parent()
        .filter(|_| dir.file_name().is_some_and(|n| n == "bin"));
    [modules, bin_parent, Some(dir)]
        .into_iter()
        .flatten()
        .find(|p| allowed(p))
        .map(Path::to_path_buf)
}

/// The directories a program at `program` (absolute) needs visible to run: the installation of its
/// directory, of the file it links to, and of the interpreter its `#!` line names (`/usr/bin/env`
/// finds its interpreter on PATH, whose directories are bound already).
pub fn installation(program: &Path, home: Option<&Path>) -> Vec<PathBuf> {
    let mut files = vec![program.to_path_buf()];
    files.extend(program.canonicalize().ok());
    if let Some(interpreter) = interpreter_of(program) {
        files.extend(interpreter.canonicalize().ok());
        files.push(interpreter);
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    for dir in files.iter().filter_map(|f| f.parent()) {
        if let Some(keep) = installation_of(dir, home) {
            if !dirs.contains(&keep) {
                dirs.push(keep);
            }
        }
    }
    dirs
}

/// The interpreter a script's `#!` line names, unless it is `env`.
fn interpreter_of(program: &Path) -> Option<PathBuf> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(program).ok()?.read(&mut head).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = String::from_utf8_lossy(line);
    let first = line.lines().next()?.split_whitespace().next()?;
    let interpreter = PathBuf::from(first);
    (interpreter.is_absolute() && interpreter.file_name().is_some_and(|n| n != "env"))
        .then_some(interpreter)
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
        let args = sandbox().arguments(&Confinement::agent(
            Path::new("/work/wt-1"),
            false,
            &Backend::Claude,
            &env,
        ));
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
            backend: Some(&Backend::Claude),
            env: &env,
            readable: &[],
            writable: &[],
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
            binds(&sandbox().arguments(&Confinement::agent(
                Path::new("/work/wt-1"),
                ro,
                backend,
                &env,
            )))
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
    fn a_gate_tool_gets_no_cli_configuration_its_installation_and_its_outputs() {
        let env = env();
        let (readable, writable) = (
            [PathBuf::from("/opt/gate-tools/node_modules")],
            [PathBuf::from("/work/wt-1/.supervisor/gates/session-1/tsc")],
        );
        let c = Confinement {
            cwd: Path::new("/work/wt-1"),
            read_only_tree: true,
            backend: None,
            env: &env,
            readable: &readable,
            writable: &writable,
        };
        let b = binds(&sandbox().arguments(&c));
        assert!(!b.iter().any(|(_, p)| p.contains("claude")), "{b:?}");
        let at = |bind: (&str, &str)| {
            b.iter()
                .position(|(h, p)| h == bind.0 && p == bind.1)
                .unwrap_or_else(|| panic!("{bind:?} in {b:?}"))
        };
        // The installation under the tree, the outputs over it (writable in a read-only tree).
        let tree = at(("--ro-bind", "/work/wt-1"));
        assert!(at(("--ro-bind-try", "/opt/gate-tools/node_modules")) < tree);
        assert_eq!(
            at(("--bind", "/work/wt-1/.supervisor/gates/session-1/tsc")),
            tree + 1
        );
    }

    #[test]
    fn an_installation_is_its_node_modules_or_prefix_never_home_or_tmp() {
        let home = Some(Path::new("/home/u"));
        let cases: &[(&str, Option<&str>)] = &[
            (
                "/home/u/p/node_modules/.bin",
                Some("/home/u/p/node_modules"),
            ),
            (
                "/home/u/p/node_modules/typescript/bin",
                Some("/home/u/p/node_modules"),
            ),
            (
                "/home/u/.nvm/versions/node/v20/bin",
                Some("/home/u/.nvm/versions/node/v20"),
            ),
            ("/home/u/bin", Some("/home/u/bin")),
            ("/tmp/bin", Some("/tmp/bin")),
            ("/opt/x/lib", Some("/opt/x/lib")),
            ("/home/u", None),
            ("/tmp", None),
            ("/", None),
        ];
        for (dir, kept) in cases {
            assert_eq!(
                installation_of(Path::new(dir), home).as_deref(),
                kept.map(Path::new),
                "{dir}"
            );
        }
        // A script's interpreter comes with it.
        let tmp = tempfile::tempdir().unwrap();
        let bin = tmp.path().join("venv/bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::write(bin.join("pylsp"), "#!/opt/py/bin/python3 -u\nimport x\n").unwrap();
        let dirs = installation(&bin.join("pylsp"), home);
        assert!(dirs.contains(&tmp.path().join("venv")), "{dirs:?}");
        assert!(dirs.contains(&PathBuf::from("/opt/py")), "{dirs:?}");
    }

    #[test]
    fn shows_answers_as_the_mounts_do() {
        let env = env();
        let writable = [PathBuf::from("/tmp/jscpd-report")];
        let c = Confinement {
            cwd: Path::new("/work/wt-1"),
            read_only_tree: true,
            backend: None,
            env: &env,
            readable: &[],
            writable: &writable,
        };
        let s = sandbox();
        for (path, shown) in [
            ("/usr/lib/x.so", true),
            ("/work/wt-1/src/a.ts", true),
            ("/home/u/.ssh/id_rsa", false),
            ("/home/u/.local/lib/node", true),
            ("/home/u/.gitconfig", true),
            ("/tmp/secret", false),
            ("/tmp/jscpd-report/jscpd-report.json", true),
            ("/proc/1/environ", false),
        ] {
            assert_eq!(s.shows(&c, Path::new(path)), shown, "{path}");
        }
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
                &Confinement::agent(Path::new("/w"), false, &Backend::Pi, &env),
            )
            .unwrap_err();
        assert!(err.contains("bwrap is not on supervisor's PATH"), "{err}");
        assert!(err.contains("apt-get install bubblewrap"), "{err}");
        let wrapped = sandbox()
            .wrap(
                Launch::new("pi", vec!["-p".into()]).with_stdin("task"),
                &Confinement::agent(Path::new("/w"), false, &Backend::Pi, &env),
            )
            .unwrap();
        assert_eq!(wrapped.program, Path::new("/usr/bin/bwrap"));
        assert_eq!(wrapped.args[wrapped.args.len() - 3..], ["--", "pi", "-p"]);
        assert_eq!(wrapped.stdin.as_deref(), Some("task"));
    }
}
