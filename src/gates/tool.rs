//! Finding a gate's tool and running it as a child process in its own process group, with a timeout
//! that kills the whole group. A tool that is missing, crashes or times out is reported with a reason;
//! it never reads as "no findings".

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::process::Command;

use super::GateContext;

/// Where a tool comes from when it is not installed in the project.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ecosystem {
    /// npm package: `node_modules/.bin`, PATH, then (when allowed) `npx --package <pkg>@<version>`.
    Npm,
    /// PyPI package: the project's `.venv/bin`, then PATH.
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
    pub package: &'static str,
    /// Pinned version (npm tools: used with npx).
    pub version: &'static str,
    pub ecosystem: Ecosystem,
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

pub const TSC: ToolSpec = ToolSpec::new("tsc", "typescript", "5.9.3", Ecosystem::Npm);
pub const TYPESCRIPT_LANGUAGE_SERVER: ToolSpec = ToolSpec::new(
    "typescript-language-server",
    "typescript-language-server",
    "5.1.2",
    Ecosystem::Npm,
);
pub const KNIP: ToolSpec = ToolSpec::new("knip", "knip", "6.44.2", Ecosystem::Npm);
pub const JSCPD: ToolSpec = ToolSpec::new("jscpd", "jscpd", "4.3.0", Ecosystem::Npm);
pub const PYLSP: ToolSpec = ToolSpec::new(
    "pylsp",
    "python-lsp-server[pyflakes]",
    "1.15.0",
    Ecosystem::Python,
);
pub const GOPLS: ToolSpec = ToolSpec::new("gopls", "gopls", "", Ecosystem::System);
pub const RUST_ANALYZER: ToolSpec =
    ToolSpec::new("rust-analyzer", "rust-analyzer", "", Ecosystem::System);

/// A located tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolLocation {
    /// The project's own copy (`node_modules/.bin`, `.venv/bin`).
    Project(PathBuf),
    /// Found on PATH.
    Path(PathBuf),
    /// Run through npx at the pinned version.
    Npx { npx: PathBuf, package: String },
}

/// A tool ready to run.
#[derive(Debug, Clone)]
pub struct Tool {
    pub spec: ToolSpec,
    pub location: ToolLocation,
    /// PATH given to the child (the context's search path, when set).
    search_path: Option<OsString>,
}

impl Tool {
    /// A command running the tool in `dir` with `args`.
    pub fn command<I, S>(&self, dir: &Path, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = match &self.location {
            ToolLocation::Project(p) | ToolLocation::Path(p) => Command::new(p),
            ToolLocation::Npx { npx, package } => {
                let mut c = Command::new(npx);
                c.arg("--yes")
                    .arg(format!("--package={package}"))
                    .arg("--")
                    .arg(self.spec.bin);
                c
            }
        };
        cmd.args(args).current_dir(dir);
        if let Some(path) = &self.search_path {
            cmd.env("PATH", path);
        }
        // Plain output: no colours, no spinners.
        cmd.env("NO_COLOR", "1").env("FORCE_COLOR", "0");
        cmd
    }

    /// Where it was found, for summaries.
    pub fn describe(&self) -> String {
        match &self.location {
            ToolLocation::Project(p) | ToolLocation::Path(p) => p.display().to_string(),
            ToolLocation::Npx { package, .. } => format!("npx {package}"),
        }
    }
}

/// Find a tool: the project's own copy, then PATH, then (npm tools, when `gates.allowNpx`) npx at the
/// pinned version. The error says where it looked and what to do.
pub fn locate(spec: ToolSpec, ctx: &GateContext) -> Result<Tool, String> {
    locate_from(spec, ctx, &ctx.dir)
}

/// [`locate`] for a project inside the worktree: npm tools are looked for in `node_modules/.bin` of
/// `start` and each directory above it up to the worktree root, as npm resolves binaries.
pub fn locate_from(spec: ToolSpec, ctx: &GateContext, start: &Path) -> Result<Tool, String> {
    let search_path = ctx.search_path.clone();
    let path_var = search_path.clone().or_else(|| std::env::var_os("PATH"));
    let tool = |location| Tool {
        spec,
        location,
        search_path: search_path.clone(),
    };
    let project_dirs: Vec<PathBuf> = match spec.ecosystem {
        Ecosystem::Npm => start
            .ancestors()
            .take_while(|d| d.starts_with(&ctx.dir))
            .map(|d| d.join("node_modules/.bin"))
            .collect(),
        Ecosystem::Python => vec![ctx.dir.join(".venv/bin")],
        Ecosystem::System => Vec::new(),
    };
    if let Some(found) = project_dirs
        .iter()
        .map(|d| d.join(spec.bin))
        .find(|p| is_executable(p))
    {
        return Ok(tool(ToolLocation::Project(found)));
    }
    if let Some(found) = find_on_path(spec.bin, path_var.as_deref()) {
        return Ok(tool(ToolLocation::Path(found)));
    }
    let looked = match spec.ecosystem {
        Ecosystem::Npm => "node_modules/.bin or PATH",
        Ecosystem::Python => ".venv/bin or PATH",
        Ecosystem::System => "PATH",
    };
    if spec.ecosystem == Ecosystem::Npm {
        if ctx.settings.allow_npx {
            return match find_on_path("npx", path_var.as_deref()) {
                Some(npx) => Ok(tool(ToolLocation::Npx {
                    npx,
                    package: format!("{}@{}", spec.package, spec.version),
                })),
                None => Err(format!(
                    "{} not found in {looked}, and npx is not on PATH either (install {} or Node.js)",
                    spec.bin, spec.package
                )),
            };
        }
        return Err(format!(
            "{} not found in {looked} (install {}, or set gates.allowNpx)",
            spec.bin, spec.package
        ));
    }
    Err(format!(
        "{} not found in {looked} (install {})",
        spec.bin, spec.package
    ))
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
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    pub duration: Duration,
}

impl ProcessOutput {
    /// `exit status 2`, `killed by signal 9`.
    pub fn status_text(&self) -> String {
        status_text(self.status)
    }

    /// What stderr (else stdout) says, in one line, for "why did it fail" messages.
    pub fn complaint(&self) -> String {
        let text = if self.stderr.trim().is_empty() {
            &self.stdout
        } else {
            &self.stderr
        };
        brief(text)
    }
}

pub fn status_text(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => "an unknown exit status".into(),
    }
}

/// The last `n` non-empty lines of `text`, each cut to a sane width.
pub fn tail_lines(text: &str, n: usize) -> String {
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
}

impl RunError {
    /// A NotRun reason naming the tool.
    pub fn reason(&self, what: &str) -> String {
        match self {
            RunError::Spawn(e) => format!("{what} could not be started: {e}"),
            RunError::TimedOut(d) => format!(
                "{what} did not finish within {} s and was killed (raise gates.toolTimeoutSec if it needs longer)",
                d.as_secs()
            ),
            RunError::Io(e) => format!("{what}'s output could not be read: {e}"),
        }
    }
}

/// Kills a process group when dropped (a timed-out or abandoned tool leaves nothing behind).
pub struct ProcessGroupGuard {
    pgid: Option<i32>,
}

impl ProcessGroupGuard {
    pub fn new(pid: Option<u32>) -> Self {
        ProcessGroupGuard {
            pgid: pid.and_then(|p| i32::try_from(p).ok()).filter(|p| *p > 0),
        }
    }

    /// Kill the group now.
    pub fn kill(&mut self) {
        if let Some(pgid) = self.pgid.take() {
            // SAFETY: killpg only sends a signal; the group was created for this child
            // (process_group(0)) and its leader has not been reaped yet.
            unsafe {
                libc::killpg(pgid, libc::SIGKILL);
            }
        }
    }

    /// The leader exited normally and was reaped: do not signal a group id that may be reused.
    pub fn disarm(&mut self) {
        self.pgid = None;
    }
}

impl Drop for ProcessGroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Prepare `cmd` to run in its own process group, killed when dropped.
pub fn isolate(cmd: &mut Command) {
    cmd.process_group(0).kill_on_drop(true);
}

/// Run `cmd` to completion with captured output, killing its process group after `timeout`.
pub async fn run_captured(mut cmd: Command, timeout: Duration) -> Result<ProcessOutput, RunError> {
    isolate(&mut cmd);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = std::time::Instant::now();
    let child = cmd.spawn().map_err(|e| RunError::Spawn(e.to_string()))?;
    let mut guard = ProcessGroupGuard::new(child.id());
    match tokio::time::timeout(timeout, child.wait_with_output()).await {
        Ok(Ok(out)) => {
            guard.disarm();
            Ok(ProcessOutput {
                status: out.status,
                stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
                duration: started.elapsed(),
            })
        }
        Ok(Err(e)) => Err(RunError::Io(e.to_string())),
        Err(_) => {
            guard.kill();
            Err(RunError::TimedOut(timeout))
        }
    }
}

/// The per-tool timeout of the gate settings.
pub fn tool_timeout(ctx: &GateContext) -> Duration {
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

    pub fn path(&self) -> &Path {
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
        let script = include_str!("../../scripts/install-tools.sh");
        for spec in [TSC, TYPESCRIPT_LANGUAGE_SERVER, KNIP, JSCPD] {
            let pin = format!("\"{}@{}\"", spec.package, spec.version);
            assert!(script.contains(&pin), "install-tools.sh lacks {pin}");
        }
        let pin = format!("\"{}=={}\"", PYLSP.package, PYLSP.version);
        assert!(script.contains(&pin), "install-tools.sh lacks {pin}");
    }

    #[tokio::test]
    async fn timeout_kills_the_process_group() {
        let mut cmd = Command::new("sh");
        // The grandchild would outlive a plain kill of `sh`.
        cmd.arg("-c").arg("sleep 30 & wait");
        let started = std::time::Instant::now();
        let err = run_captured(cmd, Duration::from_millis(200))
            .await
            .unwrap_err();
        assert_eq!(err, RunError::TimedOut(Duration::from_millis(200)));
        assert!(started.elapsed() < Duration::from_secs(10));
        assert!(err.reason("sleep").contains("did not finish within"));
    }

    #[tokio::test]
    async fn spawn_failure_is_reported() {
        let cmd = Command::new("/nonexistent/tool");
        let err = run_captured(cmd, Duration::from_secs(5)).await.unwrap_err();
        assert!(matches!(err, RunError::Spawn(_)), "{err:?}");
    }
}
