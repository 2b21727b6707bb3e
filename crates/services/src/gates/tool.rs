//! Finding a gate's tool and running it as a child process in its own process group, with a timeout
//! that kills the whole group. A tool that is missing, crashes or times out is reported with a reason;
//! it never reads as "no findings".
//!
//! With `agentSandbox: "bwrap"` every process a gate starts on the checkout runs in the agents'
//! sandbox ([`Launcher`]): HOME and /tmp hidden, the file system read-only, the checkout read-only for
//! analysis tools, and only the tool's installation and the directories it writes to brought back.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::Duration;

use tokio::process::Command;

use super::GateContext;
use super::session::GateSession;
use super::trust::{Installed, ToolEnv, is_inside, trusted_path};
use crate::agent::{Confinement, Sandbox};

/// Where a tool comes from when it is not installed in the project.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ecosystem {
    /// npm package: the main checkout's `node_modules/.bin`, PATH, then (when allowed) the pinned
    /// version through npx.
    Npm,
    /// PyPI package: the main checkout's `.venv/bin`, then PATH.
    Python,
    /// Installed by the system package manager: PATH only.
    System,
}

/// A tool a gate runs, with the version `scripts/install-tools.sh` pins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolSpec {
    /// Executable name.
    pub bin: &'static str,
    /// Package that provides it.
    pub(crate) package: &'static str,
    /// Pinned version (npm tools: used with npx).
    pub(crate) version: &'static str,
    pub(crate) ecosystem: Ecosystem,
}

impl ToolSpec {
    const fn new(
        bin: &'static str,
        package: &'static str,
        version: &'static str,
        ecosystem: Ecosystem,
    ) -> ToolSpec {
        ToolSpec {
            bin,
            package,
            version,
            ecosystem,
        }
    }
}

impl ToolSpec {
    /// The package at its pinned version, as its installer names it: `typescript@5.9.3`,
    /// `python-lsp-server[pyflakes]==1.15.0`, or the package alone when nothing is pinned.
    pub(crate) fn pinned(&self) -> String {
        match (self.ecosystem, self.version) {
            (_, "") => self.package.to_string(),
            (Ecosystem::Npm, v) => format!("{}@{v}", self.package),
            (Ecosystem::Python, v) => format!("{}=={v}", self.package),
            (Ecosystem::System, v) => format!("{} {v}", self.package),
        }
    }
}

/// How to install `tools`: one `npm install -g …` for the npm ones, one `pip install …` for the
/// Python ones, the system's package manager for the rest; and `scripts/install-tools.sh --gates`
/// when the repository at `root` has that script (supervisor's own checkout).
pub fn install_hint(tools: &[ToolSpec], root: &Path) -> String {
    let of = |e: Ecosystem| -> Vec<String> {
        let mut names: Vec<String> = (tools.iter())
            .filter(|t| t.ecosystem == e)
            .map(ToolSpec::pinned)
            .collect();
        names.dedup();
        names
    };
    let mut ways = Vec::new();
    let npm = of(Ecosystem::Npm);
    if !npm.is_empty() {
        ways.push(format!("`npm install -g {}`", npm.join(" ")));
    }
    let python = of(Ecosystem::Python);
    if !python.is_empty() {
        let quoted: Vec<String> = python.iter().map(|p| format!("'{p}'")).collect();
        ways.push(format!("`pip install {}`", quoted.join(" ")));
    }
    let system = of(Ecosystem::System);
    if !system.is_empty() {
        ways.push(format!(
            "{} with the system's package manager",
            system.join(", ")
        ));
    }
    let mut hint = ways.join(" and ");
    if root.join("scripts/install-tools.sh").is_file() {
        hint.push_str(
            " (in this checkout, `scripts/install-tools.sh --gates` installs the pinned ones into .tools/)",
        );
    }
    hint
}

pub(crate) const TSC: ToolSpec = ToolSpec::new("tsc", "typescript", "5.9.3", Ecosystem::Npm);
pub(crate) const TYPESCRIPT_LANGUAGE_SERVER: ToolSpec = ToolSpec::new(
    "typescript-language-server",
    "typescript-language-server",
    "5.1.2",
    Ecosystem::Npm,
);
pub(crate) const KNIP: ToolSpec = ToolSpec::new("knip", "knip", "6.44.2", Ecosystem::Npm);
pub(crate) const JSCPD: ToolSpec = ToolSpec::new("jscpd", "jscpd", "4.3.0", Ecosystem::Npm);
pub(crate) const PYLSP: ToolSpec = ToolSpec::new(
    "pylsp",
    "python-lsp-server[pyflakes]",
    "1.15.0",
    Ecosystem::Python,
);
pub(crate) const GOPLS: ToolSpec = ToolSpec::new("gopls", "gopls", "", Ecosystem::System);
pub(crate) const RUST_ANALYZER: ToolSpec =
    ToolSpec::new("rust-analyzer", "rust-analyzer", "", Ecosystem::System);
// Test runners of the oracle (src/verify): the project's own installed copy when the main
// checkout has one, else the pinned one.
pub const VITEST: ToolSpec = ToolSpec::new("vitest", "vitest", "4.1.12", Ecosystem::Npm);
pub const JEST: ToolSpec = ToolSpec::new("jest", "jest", "30.5.2", Ecosystem::Npm);
pub const PYTEST: ToolSpec = ToolSpec::new("pytest", "pytest", "9.2.0", Ecosystem::Python);
pub const NODE: ToolSpec = ToolSpec::new("node", "Node.js", "", Ecosystem::System);
pub const GO: ToolSpec = ToolSpec::new("go", "Go", "", Ecosystem::System);
pub const CARGO: ToolSpec = ToolSpec::new("cargo", "Rust (rustup)", "", Ecosystem::System);

/// A located tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolLocation {
    /// A directory of `gates.toolPaths`.
    Configured(PathBuf),
    /// The main checkout's installed dependencies, unchanged since the gate session began.
    MainCheckout(PathBuf),
    /// Found on PATH.
    Path(PathBuf),
    /// The pinned version, installed by npx in its cache.
    Npx { program: PathBuf, package: String },
}

impl ToolLocation {
    /// The executable to run.
    pub(crate) fn program(&self) -> &Path {
        match self {
            ToolLocation::Configured(p) | ToolLocation::MainCheckout(p) | ToolLocation::Path(p) => {
                p
            }
            ToolLocation::Npx { program, .. } => program,
        }
    }
}

/// What a confined gate process reaches besides the file system outside HOME and /tmp.
#[derive(Debug, Clone, Default)]
pub struct Reach {
    /// The checkout is writable (a command gate's builds and tests write into it).
    pub(crate) tree_writable: bool,
    /// Visible read-only: a tool's installation.
    pub(crate) read: Vec<PathBuf>,
    /// Writable: where a tool keeps its cache or writes its report.
    pub(crate) write: Vec<PathBuf>,
}

/// How a gate starts its processes: with nothing of supervisor's environment but the allowlist and
/// the trusted PATH, inside the session's sandbox when the settings ask for one.
#[derive(Debug, Clone)]
pub struct Launcher {
    env: ToolEnv,
    path: OsString,
    sandbox: Option<Sandbox>,
}

impl Launcher {
    /// The launcher of `ctx`: its session's environment and sandbox, the PATH of [`tool_path`].
    pub fn of(ctx: &GateContext) -> Launcher {
        Launcher {
            env: ctx.session.env().clone(),
            path: tool_path(ctx),
            sandbox: ctx.session.sandbox().cloned(),
        }
    }

    /// Whether its processes run in the sandbox.
    pub(crate) fn is_confined(&self) -> bool {
        self.sandbox.is_some()
    }

    /// `Ok` when processes run unconfined or the sandbox starts for the checkout at `dir` (asked
    /// once per session); else why not, for a gate to report as not run.
    pub(crate) async fn ready(&self, session: &GateSession, dir: &Path) -> Result<(), String> {
        session.sandbox_ready(&self.vars(), dir).await
    }

    /// A command running `program args` in the checkout at `dir`, confined as `reach` says when
    /// there is a sandbox; or why the sandbox cannot be used.
    pub(crate) fn command<I, S>(
        &self,
        program: &Path,
        args: I,
        dir: &Path,
        reach: &Reach,
    ) -> Result<Command, String>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = match &self.sandbox {
            None => Command::new(program),
            Some(sandbox) => {
                let vars = self.vars();
                let (bwrap, prefix) = sandbox.command_line(&Confinement {
                    cwd: dir,
                    read_only_tree: !reach.tree_writable,
                    backend: None,
                    env: &vars,
                    readable: &reach.read,
                    writable: &reach.write,
                })?;
                let mut cmd = Command::new(bwrap);
                cmd.args(prefix).arg(program);
                cmd
            }
        };
        cmd.args(args).current_dir(dir);
        apply_env(&mut cmd, &self.env, &self.path);
        Ok(cmd)
    }

    /// Whether the file at `path` is there for a process confined to the checkout at `dir`: what a
    /// gate reads itself on a confined tool's behalf reaches no further. Always, without a sandbox.
    pub(crate) fn shows(&self, dir: &Path, path: &Path) -> bool {
        let Some(sandbox) = &self.sandbox else {
            return true;
        };
        // A path that does not resolve is left to the read, which fails on its own.
        let Ok(target) = path.canonicalize() else {
            return true;
        };
        let vars = self.vars();
        sandbox.shows(
            &Confinement {
                cwd: dir,
                read_only_tree: true,
                backend: None,
                env: &vars,
                readable: &[],
                writable: &[],
            },
            &target,
        )
    }

    /// The installation of `program`, to keep visible in the sandbox (nothing without one).
    fn installation(&self, program: &Path) -> Vec<PathBuf> {
        match &self.sandbox {
            None => Vec::new(),
            Some(_) => crate::agent::installation(program, self.env.get("HOME").map(Path::new)),
        }
    }

    /// The environment as the sandbox reads it (HOME, PATH).
    fn vars(&self) -> Vec<(String, String)> {
        let mut vars: Vec<(String, String)> = self
            .env
            .vars()
            .iter()
            .filter(|(k, _)| k != "PATH")
            .cloned()
            .collect();
        vars.push(("PATH".into(), self.path.to_string_lossy().into_owned()));
        vars
    }
}

/// A tool ready to run.
#[derive(Debug, Clone)]
pub struct Tool {
    pub(crate) spec: ToolSpec,
    pub(crate) location: ToolLocation,
    launcher: Launcher,
    /// What the tool needs visible in the sandbox: its installation.
    reads: Vec<PathBuf>,
}

impl Tool {
    /// A command running the tool in the checkout at `dir` with `args`, with nothing of this
    /// process's environment but the allowlist; in the sandbox (the checkout read-only, `writes`
    /// writable) when there is one, or why it cannot be.
    pub(crate) fn command<I, S>(
        &self,
        dir: &Path,
        args: I,
        writes: &[&Path],
    ) -> Result<Command, String>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.command_through(dir, &[], args, false, writes)
    }

    /// A command running the tool as a test runner: `wrapper` (a shell line that execs `"$0"
    /// "$@"`, or none) then the tool and `args`, with the checkout writable in the sandbox (a test
    /// run builds and caches into it, and the code it runs is the agent's, which could write it
    /// anyway) and `writes` writable too.
    pub(crate) fn runner_command<I, S>(
        &self,
        dir: &Path,
        wrapper: &[&str],
        args: I,
        writes: &[&Path],
    ) -> Result<Command, String>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.command_through(dir, wrapper, args, true, writes)
    }

    fn command_through<I, S>(
        &self,
        dir: &Path,
        wrapper: &[&str],
        args: I,
        tree_writable: bool,
        writes: &[&Path],
    ) -> Result<Command, String>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let reach = Reach {
            tree_writable,
            read: self.reads.clone(),
            write: writes.iter().map(|p| p.to_path_buf()).collect(),
        };
        let program = self.location.program();
        let made = match wrapper.split_first() {
            None => self.launcher.command(program, args, dir, &reach),
            Some((shell, rest)) => {
                let mut all: Vec<std::ffi::OsString> = rest.iter().map(Into::into).collect();
                all.push(program.as_os_str().to_os_string());
                all.extend(args.into_iter().map(|a| a.as_ref().to_os_string()));
                self.launcher.command(Path::new(shell), all, dir, &reach)
            }
        };
        made.map_err(|e| format!("{} cannot run in its sandbox: {e}", self.spec.bin))
    }

    /// The tool, with the installation of `file` (a library it loads) visible in the sandbox too.
    pub(crate) fn also_reading(mut self, file: &Path) -> Tool {
        for dir in self.launcher.installation(file) {
            if !self.reads.contains(&dir) {
                self.reads.push(dir);
            }
        }
        self
    }

    /// The executable run.
    pub(crate) fn program(&self) -> &Path {
        self.location.program()
    }

    /// Whether it runs in the sandbox.
    pub(crate) fn is_confined(&self) -> bool {
        self.launcher.is_confined()
    }

    /// Where it was found (and that it runs in the sandbox), for summaries.
    pub(crate) fn describe(&self) -> String {
        let place = match &self.location {
            ToolLocation::Npx { package, program } => {
                format!("npx {package} ({})", program.display())
            }
            other => other.program().display().to_string(),
        };
        if self.launcher.is_confined() {
            format!("{place} in bwrap")
        } else {
            place
        }
    }
}

/// Give `cmd` exactly `env` with `path` as PATH, and plain output (no colours, no spinners).
pub fn apply_env(cmd: &mut Command, env: &ToolEnv, path: &OsStr) {
    cmd.env_clear();
    for (k, v) in env.vars() {
        cmd.env(k, v);
    }
    cmd.env("PATH", path);
    cmd.env("NO_COLOR", "1").env("FORCE_COLOR", "0");
}

/// The PATH tools are found on and run with: the context's search path (else the session's PATH),
/// without relative entries or entries inside the checkout under review.
pub fn tool_path(ctx: &GateContext) -> OsString {
    let path = ctx
        .search_path
        .clone()
        .or_else(|| ctx.session.env().get("PATH").map(OsString::from))
        .unwrap_or_default();
    trusted_path(&path, &ctx.dir)
}

/// Find a tool where the agent cannot have put it: `gates.toolPaths`, the main checkout's installed
/// dependencies as recorded when the session began, PATH, then (npm tools, with `gates.allowNpx`)
/// the pinned version through npx. A copy inside the checkout under review is never used. The error
/// says where it looked and what to do.
pub(crate) async fn locate(spec: ToolSpec, ctx: &GateContext) -> Result<Tool, String> {
    locate_from(spec, ctx, &ctx.dir).await
}

/// [`locate`] for a project inside the checkout: npm tools of the main checkout are looked for in
/// `node_modules/.bin` of the project's directory and each directory above it up to the root, as npm
/// resolves binaries.
pub async fn locate_from(spec: ToolSpec, ctx: &GateContext, start: &Path) -> Result<Tool, String> {
    let launcher = Launcher::of(ctx);
    launcher.ready(&ctx.session, &ctx.dir).await?;
    let path = launcher.path.clone();
    let tool = |location: ToolLocation| Tool {
        spec,
        reads: launcher.installation(location.program()),
        location,
        launcher: launcher.clone(),
    };
    for dir in &ctx.settings.tool_paths {
        if is_inside(dir, &ctx.dir) {
            tracing::warn!(dir = %dir.display(), "gates.toolPaths entry inside the checkout under review ignored");
            continue;
        }
        let candidate = dir.join(spec.bin);
        if is_executable(&candidate) {
            return Ok(tool(ToolLocation::Configured(candidate)));
        }
    }
    if let Some(main) = ctx.session.main_checkout() {
        let rel = start.strip_prefix(&ctx.dir).unwrap_or(Path::new(""));
        let project = main.join(rel);
        let dirs: Vec<PathBuf> = match spec.ecosystem {
            Ecosystem::Npm => project
                .ancestors()
                .take_while(|d| d.starts_with(main))
                .map(|d| d.join("node_modules/.bin"))
                .collect(),
            Ecosystem::Python => vec![main.join(".venv/bin")],
            Ecosystem::System => Vec::new(),
        };
        for candidate in dirs.iter().map(|d| d.join(spec.bin)) {
            if !is_executable(&candidate) || (main != ctx.dir && is_inside(&candidate, &ctx.dir)) {
                continue;
            }
            match ctx.session.installed().check(&candidate) {
                Installed::Unchanged => return Ok(tool(ToolLocation::MainCheckout(candidate))),
                Installed::Unrecorded => continue,
                Installed::Changed(reason) => return Err(reason),
            }
        }
    }
    if let Some(found) = find_on_path(spec.bin, Some(&path)) {
        return Ok(tool(ToolLocation::Path(found)));
    }
    let looked = match spec.ecosystem {
        Ecosystem::Npm => "gates.toolPaths, the main checkout's node_modules/.bin or PATH",
        Ecosystem::Python => "gates.toolPaths, the main checkout's .venv/bin or PATH",
        Ecosystem::System => "gates.toolPaths or PATH",
    };
    if spec.ecosystem == Ecosystem::Npm {
        if ctx.settings.allow_npx {
            let package = format!("{}@{}", spec.package, spec.version);
            return npx_program(spec, &package, ctx, &path)
                .await
                .map(|program| tool(ToolLocation::Npx { program, package }))
                .map_err(|e| {
                    format!(
                        "{} not found in {looked}, and {e} (install {} or Node.js)",
                        spec.bin, spec.package
                    )
                });
        }
        return Err(format!(
            "{} not found in {looked} (install {}, or set gates.allowNpx); a copy inside the checkout is never run",
            spec.bin, spec.package
        ));
    }
    Err(format!(
        "{} not found in {looked} (install {}); a copy inside the checkout is never run",
        spec.bin, spec.package
    ))
}

/// The pinned package's executable in npx's cache. npx is asked from an empty directory outside the
/// checkout (run inside it, npx would put the checkout's `node_modules/.bin` on the tool's PATH,
/// where a planted `node` would run); the executable found is then run directly. It reads nothing of
/// the checkout and installs from the registry into its cache, so it runs outside the sandbox; the
/// tool it provides runs inside.
async fn npx_program(
    spec: ToolSpec,
    package: &str,
    ctx: &GateContext,
    path: &OsStr,
) -> Result<PathBuf, String> {
    if let Some(program) = ctx.session.npx_resolved(package) {
        return Ok(program);
    }
    let npx = find_on_path("npx", Some(path)).ok_or("npx is not on PATH either")?;
    let empty = ScratchDir::new("supervisor-npx").map_err(|e| format!("npx cannot run: {e}"))?;
    let mut cmd = Command::new(npx);
    cmd.arg("--yes")
        .arg(format!("--package={package}"))
        .arg("--")
        .arg("sh")
        .arg("-c")
        .arg(format!("command -v {}", spec.bin))
        .current_dir(empty.path());
    apply_env(&mut cmd, ctx.session.env(), path);
    let out = run_captured(cmd, tool_timeout(ctx), ctx.session.cancel())
        .await
        .map_err(|e| e.reason("npx"))?;
    let program = PathBuf::from(out.stdout.trim());
    if !out.status.success() || !program.is_absolute() || !is_executable(&program) {
        return Err(format!(
            "npx could not provide {package} ({}): {}",
            out.status_text(),
            out.complaint()
        ));
    }
    ctx.session.remember_npx(package, program.clone());
    Ok(program)
}

/// The first executable called `bin` in the directories of `path`.
pub fn find_on_path(bin: &str, path: Option<&OsStr>) -> Option<PathBuf> {
    std::env::split_paths(path?)
        .filter(|d| !d.as_os_str().is_empty())
        .map(|d| d.join(bin))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// What a finished process printed.
#[derive(Debug, Clone)]
pub struct ProcessOutput {
    pub(crate) status: ExitStatus,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
    pub(crate) duration: Duration,
}

impl ProcessOutput {
    /// `exit status 2`, `killed by signal 9`.
    pub(crate) fn status_text(&self) -> String {
        status_text(self.status)
    }

    /// What stderr (else stdout) says, in one line, for "why did it fail" messages.
    pub(crate) fn complaint(&self) -> String {
        let text = if self.stderr.trim().is_empty() {
            &self.stdout
        } else {
            &self.stderr
        };
        brief(text)
    }
}

pub(crate) fn status_text(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => "an unknown exit status".into(),
    }
}

/// The last `n` non-empty lines of `text`, each cut to a sane width.
pub(crate) fn tail_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let start = lines.len().saturating_sub(n);
    lines[start..]
        .iter()
        .map(|l| truncate_chars(l.trim_end(), 400))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A one-line digest of a program's complaint: all of it when short, else its first and last lines
/// (the error usually opens the output and a traceback's cause closes it).
pub fn brief(text: &str) -> String {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let picked: Vec<&str> = if lines.len() <= 4 {
        lines
    } else {
        let mut v = lines[..2].to_vec();
        v.push("…");
        v.extend_from_slice(&lines[lines.len() - 2..]);
        v
    };
    truncate_chars(&picked.join(" / "), 600)
}

/// `s` cut to at most `max` characters (with `…` when cut).
pub fn truncate_chars(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
        out.push('…');
        out
    }
}

/// Why a process gave no output to judge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunError {
    /// It could not be started.
    Spawn(String),
    /// It ran longer than allowed and was killed with its process group.
    TimedOut(Duration),
    /// Reading its output failed.
    Io(String),
    /// A stop was asked for while it ran; it was killed with its process group.
    Cancelled,
}

impl RunError {
    /// A NotRun reason naming the tool.
    pub(crate) fn reason(&self, what: &str) -> String {
        match self {
            RunError::Spawn(e) => format!("{what} could not be started: {e}"),
            RunError::TimedOut(d) => format!(
                "{what} did not finish within {} s and was killed (raise gates.toolTimeoutSec if it needs longer)",
                d.as_secs()
            ),
            RunError::Io(e) => format!("{what}'s output could not be read: {e}"),
            RunError::Cancelled => format!("{what} was stopped: a stop was asked for"),
        }
    }
}

/// Run `cmd` to completion with captured output: its process group is killed after `timeout`, when
/// the session's stop is asked for, or when the gate is abandoned (see [`crate::process::run_to_end`]).
pub async fn run_captured(
    mut cmd: Command,
    timeout: Duration,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<ProcessOutput, RunError> {
    use crate::process::RunFailure;
    match crate::process::run_to_end(&mut cmd, timeout, cancel).await {
        Ok(out) => Ok(ProcessOutput {
            status: out.status,
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            duration: out.duration,
        }),
        Err(RunFailure::Spawn(e)) => Err(RunError::Spawn(e.to_string())),
        Err(RunFailure::Io(e)) => Err(RunError::Io(e.to_string())),
        Err(RunFailure::TimedOut(d)) => Err(RunError::TimedOut(d)),
        Err(RunFailure::Cancelled) => Err(RunError::Cancelled),
    }
}

/// The per-tool timeout of the gate settings.
pub(crate) fn tool_timeout(ctx: &GateContext) -> Duration {
    Duration::from_secs(ctx.settings.tool_timeout_sec.max(1))
}

/// A directory under the system temp dir, removed when dropped.
pub struct ScratchDir {
    path: PathBuf,
}

impl ScratchDir {
    pub fn new(prefix: &str) -> std::io::Result<ScratchDir> {
        let base = std::env::temp_dir();
        for _ in 0..16 {
            let path = base.join(format!(
                "{prefix}-{}-{:016x}",
                std::process::id(),
                fastrand::u64(..)
            ));
            match std::fs::create_dir(&path) {
                Ok(()) => return Ok(ScratchDir { path }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
        Err(std::io::Error::other("no free temporary directory name"))
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tails_and_truncation() {
        assert_eq!(tail_lines("a\n\nb\nc\n", 2), "b\nc");
        assert_eq!(tail_lines("", 3), "");
        assert_eq!(truncate_chars("abcdef", 4), "abc…");
        assert_eq!(truncate_chars("abc", 4), "abc");
        assert_eq!(brief("a\n\nb\n"), "a / b");
        assert_eq!(brief("e1\ne2\nx\ny\nz\nlast"), "e1 / e2 / … / z / last");
    }

    #[test]
    fn pins_match_the_install_script() {
        let script = include_str!("../../../../scripts/install-tools.sh");
        for spec in [TSC, TYPESCRIPT_LANGUAGE_SERVER, KNIP, JSCPD, VITEST] {
            let pin = format!("\"{}@{}\"", spec.package, spec.version);
            assert!(script.contains(&pin), "install-tools.sh lacks {pin}");
        }
        for spec in [PYLSP, PYTEST] {
            let pin = format!("\"{}=={}\"", spec.package, spec.version);
            assert!(script.contains(&pin), "install-tools.sh lacks {pin}");
        }
    }

    #[tokio::test]
    async fn timeout_kills_the_process_group() {
        let mut cmd = Command::new("sh");
        // The grandchild would outlive a plain kill of `sh`.
        cmd.arg("-c").arg("sleep 30 & wait");
        let started = std::time::Instant::now();
        let err = run_captured(cmd, Duration::from_millis(200), &Default::default())
            .await
            .unwrap_err();
        assert_eq!(err, RunError::TimedOut(Duration::from_millis(200)));
        assert!(started.elapsed() < Duration::from_secs(10));
        assert!(err.reason("sleep").contains("did not finish within"));
    }

    #[tokio::test]
    async fn spawn_failure_is_reported() {
        let cmd = Command::new("/nonexistent/tool");
        let err = run_captured(cmd, Duration::from_secs(5), &Default::default())
            .await
            .unwrap_err();
        assert!(matches!(err, RunError::Spawn(_)), "{err:?}");
    }
}
