//! Running a project's tests: the runner's command with the selection's own filters, in a process
//! group of its own with a timeout and the run's stop request, and its report read back.
//!
//! Runners are found and run under the gates' trust rules ([`crate::gates::locate_from`]): the
//! project's own installed copy in the main checkout as recorded when the gate session began,
//! `gates.toolPaths`, the trusted PATH (never a directory inside the checkout), or the pinned npm
//! version through npx where allowed; with the gates' environment allowlist. Built-in runners write
//! their reports into a scratch directory outside the checkout.

use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use tokio::process::Command;

use super::detect::{DetectError, Runner, runner_for};
use super::junit::{self, Dialect};
use super::model::{NotRun, Outcome, Selection, TestId, TestResult, TestRun, Totals};
use super::{gotest, libtest};
use crate::config::{ReportSpec, VerifyConfig};
use crate::gates::{
    CARGO, GO, GateContext, JEST, Launcher, NODE, NotRunCause, PYTEST, ProcessOutput, Reach,
    RunError, ScratchDir, VITEST, brief, locate_from, run_captured,
};

/// How long a project's tests may run unless configured otherwise.
pub const DEFAULT_TIMEOUT: Duration = crate::evidence::TEST_RUN_TIMEOUT;

/// A report larger than this is not read.
const MAX_REPORT: u64 = 64 * 1024 * 1024;

/// A project whose tests the oracle runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Project {
    /// The project's directory (inside the checkout the gate context is about). Test ids are
    /// relative to it.
    pub(crate) dir: PathBuf,
    pub runner: Runner,
    /// How long one run may take, all of it (cargo's build and test together).
    pub(crate) timeout: Duration,
}

impl Project {
    /// The project at `dir` with the runner `configured` names (its `timeoutSec` too), else the one
    /// detected there.
    pub fn new(dir: &Path, configured: Option<&VerifyConfig>) -> Result<Project, DetectError> {
        let runner = runner_for(dir, configured)?;
        let timeout = configured
            .and_then(|c| c.timeout_sec)
            .map(|s| Duration::from_secs(s.max(1)))
            .unwrap_or(DEFAULT_TIMEOUT);
        Ok(Project {
            dir: dir.to_path_buf(),
            runner,
            timeout,
        })
    }
}

/// Where a run's results are read from.
enum Report {
    /// A JUnit file; `in_checkout` for a configured command's own file (checked before reading).
    Junit {
        path: PathBuf,
        dialect: Dialect,
        in_checkout: bool,
    },
    /// `go test -json` on stdout.
    GoJson,
    /// cargo test's text on stdout (stderr merged into it).
    Libtest,
}

/// A command ready to run and how to read what it leaves.
struct Plan {
    cmd: Command,
    shown: String,
    report: Report,
    /// pytest's "no tests were collected" is an answer, not a failure of the run.
    quiet_exit: Option<i32>,
}

/// Run the `selection` of `project`'s tests under `ctx` (trust rules, environment, stop request
/// of its gate session). `Ok` only with a readable report; a runner that is missing, could not
/// start, timed out or was stopped, or whose report is missing or unreadable, is [`NotRun`].
pub async fn run(
    ctx: &GateContext,
    project: &Project,
    selection: &Selection,
) -> Result<TestRun, NotRun> {
    let started = Instant::now();
    let root = project.dir.canonicalize().map_err(|e| {
        NotRun::setup(format!(
            "the project directory {} cannot be read: {e}",
            project.dir.display()
        ))
    })?;
    let scratch = ScratchDir::new("supervisor-verify")
        .map_err(|e| NotRun::setup(format!("no scratch directory for the report: {e}")))?;
    let deadline = started + project.timeout;
    let (shown, mut results) = match &project.runner {
        Runner::Cargo => cargo(ctx, &root, selection, deadline).await?,
        runner => {
            let files = existing_files(runner, &root, selection);
            if files.as_ref().is_some_and(Vec::is_empty) {
                // Every designated file is missing: nothing to run; the selection's tests are
                // missing from the run, which is what it reports.
                return Ok(finish(
                    runner.name(),
                    "(no designated file exists)".into(),
                    selection,
                    Vec::new(),
                    started,
                ));
            }
            let plan = plan(
                ctx,
                runner,
                &root,
                selection,
                files.unwrap_or_default(),
                scratch.path(),
            )
            .await?;
            execute(ctx, runner.name(), plan, &root, deadline).await?
        }
    };
    results.retain(|r| selection.keeps(&r.id));
    Ok(finish(
        project.runner.name(),
        shown,
        selection,
        results,
        started,
    ))
}

fn finish(
    runner: &str,
    command: String,
    selection: &Selection,
    results: Vec<TestResult>,
    started: Instant,
) -> TestRun {
    TestRun {
        runner: runner.to_string(),
        command,
        selection: selection.clone(),
        totals: Totals::of(&results),
        results,
        duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
    }
}

/// For runners given test files as arguments: the selection's files that exist in the project
/// (`Some(empty)` when it names files and none exists); `None` when the selection names no files or
/// the runner takes no file arguments.
fn existing_files(runner: &Runner, root: &Path, selection: &Selection) -> Option<Vec<String>> {
    let by_file = matches!(
        runner,
        Runner::Vitest | Runner::Jest | Runner::NodeTest { .. } | Runner::Pytest
    );
    let files = selection.files();
    if !by_file || files.is_empty() {
        return None;
    }
    Some(
        files
            .into_iter()
            // A designated file comes from an agent: never an option, never outside the project.
            .filter(|f| !f.starts_with(['/', '-']) && !f.split('/').any(|p| p == ".."))
            .filter(|f| root.join(f).is_file())
            .map(str::to_string)
            .collect(),
    )
}

/// The command of a built-in runner (or the configured one) for `selection`.
async fn plan(
    ctx: &GateContext,
    runner: &Runner,
    root: &Path,
    selection: &Selection,
    files: Vec<String>,
    scratch: &Path,
) -> Result<Plan, NotRun> {
    let spec = match runner {
        Runner::Vitest => VITEST,
        Runner::Jest => JEST,
        Runner::NodeTest { .. } => NODE,
        Runner::Pytest => PYTEST,
        Runner::GoTest => GO,
        Runner::Command(config) => return configured(ctx, config, root).await,
        Runner::Cargo => return Err(NotRun::setup("cargo runs in two steps, not one command")),
    };
    let tool = locate_from(spec, ctx, root).await.map_err(NotRun::setup)?;
    let junit = scratch.join("junit.xml");
    let names = selection.names();
    let mut args: Vec<String> = Vec::new();
    let mut env: Vec<(&str, String)> = Vec::new();
    let report = match runner {
        Runner::Vitest => {
            args.extend([
                "run".into(),
                "--reporter=junit".into(),
                format!("--outputFile={}", junit.display()),
            ]);
            if !names.is_empty() {
                // vitest matches `-t` against the names joined by spaces.
                args.extend([
                    "-t".into(),
                    name_pattern(&names, |n| vec![n.replace(" > ", " ")]),
                ]);
            }
            args.extend(files);
            junit_report(junit, Dialect::Vitest)
        }
        Runner::Jest => {
            let reporter = jest_junit_beside(tool.program()).ok_or_else(|| {
                NotRun::setup(format!(
                    "jest ({}) has no jest-junit installed beside it; install it in the project (npm i -D jest-junit), or set verify.command and verify.report",
                    tool.describe()
                ))
            })?;
            args.extend(["--ci".into(), format!("--reporters={}", reporter.display())]);
            if !names.is_empty() {
                args.extend([
                    "-t".into(),
                    name_pattern(&names, |n| vec![n.replace(" > ", " ")]),
                ]);
            }
            // jest takes patterns: each file, exactly.
            args.extend(files.iter().map(|f| format!("{}$", regex::escape(f))));
            env.extend([
                ("JEST_JUNIT_OUTPUT_FILE", junit.display().to_string()),
                ("JEST_JUNIT_ADD_FILE_ATTRIBUTE", "true".into()),
                ("JEST_JUNIT_CLASSNAME", "{classname}".into()),
                ("JEST_JUNIT_TITLE", "{title}".into()),
                ("JEST_JUNIT_ANCESTOR_SEPARATOR", " > ".into()),
                ("JEST_JUNIT_REPORT_TEST_SUITE_ERRORS", "true".into()),
            ]);
            junit_report(junit, Dialect::Jest)
        }
        Runner::NodeTest { paths } => {
            args.extend([
                "--test".into(),
                "--test-reporter=junit".into(),
                format!("--test-reporter-destination={}", junit.display()),
            ]);
            if !names.is_empty() {
                // Node 22 matches the names joined by spaces, Node 20 each test's own name.
                let pattern = name_pattern(&names, |n| {
                    let leaf = n.rsplit(" > ").next().unwrap_or(n).to_string();
                    vec![n.replace(" > ", " "), leaf]
                });
                args.push(format!("--test-name-pattern={pattern}"));
            }
            if files.is_empty() {
                args.extend(paths.iter().cloned());
            } else {
                args.extend(files);
            }
            junit_report(junit, Dialect::NodeTest)
        }
        Runner::Pytest => {
            args.extend([
                "-p".into(),
                "no:cacheprovider".into(),
                "--continue-on-collection-errors".into(),
                "-o".into(),
                "junit_family=xunit1".into(),
                format!("--junitxml={}", junit.display()),
                format!("--rootdir={}", root.display()),
                "-q".into(),
            ]);
            // Whole files: a node id that names no test makes pytest run nothing at all. The
            // designated tests' results are kept afterwards.
            args.extend(files);
            env.push(("PYTHONDONTWRITEBYTECODE", "1".into()));
            junit_report(junit, Dialect::Pytest)
        }
        Runner::GoTest => {
            args.extend(["test".into(), "-json".into(), "-count=1".into()]);
            if !names.is_empty() {
                // Top-level tests; their subtests all run and are kept as selected.
                args.push(format!(
                    "-run={}",
                    name_pattern(&names, |n| vec![n.split('/').next().unwrap_or(n).into()])
                ));
            }
            let packages = go_packages(selection);
            if packages.is_empty() {
                args.push("./...".into());
            } else {
                args.extend(packages);
            }
            Report::GoJson
        }
        Runner::Command(_) | Runner::Cargo => {
            return Err(NotRun::setup("cargo runs in two steps, not one command"));
        }
    };
    let mut cmd = tool
        .runner_command(root, &[], &args, &[scratch])
        .map_err(NotRun::setup)?;
    for (k, v) in env {
        cmd.env(k, v);
    }
    let shown = format!("{} {}", tool.describe(), shell_words(&args));
    let quiet_exit = (spec == PYTEST).then_some(5);
    Ok(Plan {
        cmd,
        shown,
        report,
        quiet_exit,
    })
}

fn junit_report(path: PathBuf, dialect: Dialect) -> Report {
    Report::Junit {
        path,
        dialect,
        in_checkout: false,
    }
}

/// The configured command under `/bin/sh -c`, with the gates' environment and trusted PATH.
async fn configured(ctx: &GateContext, config: &VerifyConfig, root: &Path) -> Result<Plan, NotRun> {
    let (script, report) = match &config.report {
        ReportSpec::Junit(path) => (
            config.command.clone(),
            Report::Junit {
                path: root.join(path),
                dialect: Dialect::Generic,
                in_checkout: true,
            },
        ),
        ReportSpec::GoTestJson => (config.command.clone(), Report::GoJson),
        // Headings go to stderr, results to stdout: one stream keeps them in order.
        ReportSpec::Libtest => (format!("exec 2>&1\n{}", config.command), Report::Libtest),
    };
    // The project's own command, run as a `command` gate is: in the agents' sandbox when there is
    // one, the checkout writable.
    let launcher = Launcher::of(ctx);
    launcher
        .ready(&ctx.session, root)
        .await
        .map_err(NotRun::setup)?;
    let reach = Reach {
        tree_writable: true,
        ..Reach::default()
    };
    let cmd = launcher
        .command(Path::new("/bin/sh"), ["-c", &script], root, &reach)
        .map_err(NotRun::setup)?;
    Ok(Plan {
        cmd,
        shown: config.command.clone(),
        report,
        quiet_exit: None,
    })
}

/// Run a plan and read its report: the results before selection, and what ran.
async fn execute(
    ctx: &GateContext,
    runner: &str,
    plan: Plan,
    root: &Path,
    deadline: Instant,
) -> Result<(String, Vec<TestResult>), NotRun> {
    let Plan {
        cmd,
        shown,
        report,
        quiet_exit,
    } = plan;
    if let Report::Junit {
        path,
        in_checkout: true,
        ..
    } = &report
    {
        // A report left by an earlier run must never be read as this run's.
        match std::fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(NotRun::setup(format!(
                    "the old report {} cannot be removed before the run: {e}",
                    path.display()
                )));
            }
        }
    }
    let out = run_until(ctx, cmd, runner, deadline).await?;
    let parsed = match &report {
        Report::Junit {
            path,
            dialect,
            in_checkout,
        } => {
            let xml = read_report(path, *in_checkout, root).map_err(|why| {
                NotRun::setup(format!(
                    "{runner} left no readable report: {why} ({}: {})",
                    out.status_text(),
                    out.complaint()
                ))
            })?;
            junit::parse(&xml, *dialect, root)
        }
        Report::GoJson => gotest::parse(&out.stdout, root),
        Report::Libtest => libtest::parse_test_output(&out.stdout, root),
    };
    let mut results = parsed.map_err(|why| {
        NotRun::setup(format!(
            "{runner}'s report is unreadable: {why} ({}: {})",
            out.status_text(),
            out.complaint()
        ))
    })?;
    check_exit(runner, &out, quiet_exit, &mut results);
    Ok((shown, results))
}

/// Run `cmd` with what is left of the run's time.
async fn run_until(
    ctx: &GateContext,
    cmd: Command,
    runner: &str,
    deadline: Instant,
) -> Result<ProcessOutput, NotRun> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(NotRun::setup(format!(
            "{runner} had no time left to run (raise verify.timeoutSec)"
        )));
    }
    run_captured(cmd, left, ctx.session.cancel())
        .await
        .map_err(|e| NotRun {
            cause: match e {
                RunError::Cancelled => NotRunCause::Cancelled,
                _ => NotRunCause::Setup,
            },
            reason: match e {
                RunError::TimedOut(d) => format!(
                    "{runner} did not finish within {} s and was killed with its process group (raise verify.timeoutSec if the tests need longer)",
                    d.as_secs()
                ),
                other => other.reason(runner),
            },
        })
}

/// A runner that ended badly while its report shows nothing failing did not tell the whole story:
/// the run itself is an error (an unhandled error between tests, a crash after the report).
fn check_exit(
    runner: &str,
    out: &ProcessOutput,
    quiet_exit: Option<i32>,
    results: &mut Vec<TestResult>,
) {
    let status: ExitStatus = out.status;
    let ok = status.success() || (quiet_exit.is_some() && status.code() == quiet_exit);
    if ok || results.iter().any(|r| r.outcome.is_failure()) {
        return;
    }
    results.push(
        TestResult::new(TestId::whole_run(), Outcome::Error).with_message(Some(format!(
            "{runner} ended with {} though its report shows no failure: {}",
            out.status_text(),
            out.complaint()
        ))),
    );
}

/// Read a report file: a regular file of sane size; a configured one must stay in the project.
fn read_report(path: &Path, in_checkout: bool, root: &Path) -> Result<String, String> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!("{} was not written", path.display()),
        _ => format!("{}: {e}", path.display()),
    })?;
    if !meta.is_file() {
        return Err(format!(
            "{} is not a regular file{}",
            path.display(),
            if meta.file_type().is_symlink() {
                " (a link; not followed)"
            } else {
                ""
            }
        ));
    }
    if in_checkout && !path.canonicalize().is_ok_and(|p| p.starts_with(root)) {
        return Err(format!("{} is outside the project", path.display()));
    }
    if meta.len() > MAX_REPORT {
        return Err(format!(
            "{} is larger than {} MiB",
            path.display(),
            MAX_REPORT / 1024 / 1024
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// A regular expression matching exactly the names (each turned into the runner's forms by
/// `forms`).
fn name_pattern(names: &[&str], forms: impl Fn(&str) -> Vec<String>) -> String {
    let mut alternatives: Vec<String> = Vec::new();
    for n in names {
        for form in forms(n) {
            let escaped = regex::escape(&form);
            if !alternatives.contains(&escaped) {
                alternatives.push(escaped);
            }
        }
    }
    format!("^(?:{})$", alternatives.join("|"))
}

/// The go packages a selection names: a `.go` file's directory, a `./dir`, or an import path.
fn go_packages(selection: &Selection) -> Vec<String> {
    let mut packages: Vec<String> = Vec::new();
    for f in selection.files() {
        let package = if f.ends_with(".go") {
            match Path::new(f)
                .parent()
                .map(|p| p.to_string_lossy().into_owned())
            {
                Some(dir) if !dir.is_empty() => format!("./{}", dir.trim_start_matches("./")),
                _ => ".".into(),
            }
        } else {
            f.to_string()
        };
        if !packages.contains(&package) {
            packages.push(package);
        }
    }
    packages
}

/// The jest-junit package installed with the `jest` at `program` (the `node_modules` that holds
/// jest, or one above it).
fn jest_junit_beside(program: &Path) -> Option<PathBuf> {
    let real = program.canonicalize().ok()?;
    real.ancestors()
        .filter(|d| d.file_name().is_some_and(|n| n == "node_modules"))
        .map(|d| d.join("jest-junit"))
        .find(|d| d.join("package.json").is_file())
}

/// Words for display, quoted where they hold spaces.
fn shell_words(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            if a.is_empty() || a.contains([' ', '\'', '"', '$', '(', ')', '|', '*', '?']) {
                format!("'{}'", a.replace('\'', r"'\''"))
            } else {
                a.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// cargo in two steps: `cargo build --tests --keep-going --message-format=json` to learn which test
/// targets compile (a target that does not is an error of its root file), then `cargo test
/// --no-fail-fast` on the targets that compiled (and that the selection names), its output read as
/// libtest text.
async fn cargo(
    ctx: &GateContext,
    root: &Path,
    selection: &Selection,
    deadline: Instant,
) -> Result<(String, Vec<TestResult>), NotRun> {
    let tool = locate_from(CARGO, ctx, root).await.map_err(NotRun::setup)?;
    let build_args = ["build", "--tests", "--keep-going", "--message-format=json"];
    let build = tool
        .runner_command(root, &[], build_args, &[])
        .map_err(NotRun::setup)?;
    let out = run_until(ctx, build, "cargo build", deadline).await?;
    let build = libtest::parse_build(&out.stdout, root).map_err(|why| {
        NotRun::setup(format!(
            "cargo could not build the tests: {why} ({}: {})",
            out.status_text(),
            brief(&out.stderr)
        ))
    })?;
    if !out.status.success() && build.errors.is_empty() {
        return Err(NotRun::setup(format!(
            "cargo could not build the tests ({}): {}",
            out.status_text(),
            brief(&out.stderr)
        )));
    }
    let mut shown = format!("{} {}", tool.describe(), build_args.join(" "));
    let files = selection.files();
    let targets: Vec<&(Vec<String>, String)> = build
        .targets
        .iter()
        .filter(|(_, file)| files.is_empty() || files.contains(&file.as_str()))
        .collect();
    let mut results = build.errors;
    if targets.is_empty() {
        return Ok((shown, results));
    }
    let mut args: Vec<String> = vec!["test".into(), "--no-fail-fast".into()];
    for (flags, _) in &targets {
        args.extend(flags.iter().cloned());
    }
    let names = selection.names();
    // libtest would read a name starting with `-` as one of its options (`--include-ignored`):
    // then no name filter, and the selection's tests are kept afterwards.
    if !names.is_empty() && !names.iter().any(|n| n.starts_with('-')) {
        args.extend(["--".into(), "--exact".into()]);
        args.extend(names.iter().map(|n| n.to_string()));
    }
    // `Running …` headings go to stderr, results to stdout: one stream keeps them in order.
    let cmd = tool
        .runner_command(
            root,
            &["/bin/sh", "-c", "exec \"$0\" \"$@\" 2>&1"],
            &args,
            &[],
        )
        .map_err(NotRun::setup)?;
    let out = run_until(ctx, cmd, "cargo test", deadline).await?;
    shown = format!("{shown} && {} {}", tool.describe(), shell_words(&args));
    let mut ran = libtest::parse_test_output(&out.stdout, root).map_err(|why| {
        NotRun::setup(format!(
            "cargo test's output is unreadable: {why} ({})",
            out.status_text()
        ))
    })?;
    check_exit("cargo test", &out, None, &mut ran);
    results.extend(ran);
    Ok((shown, super::model::merge_by_id(results)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::model::TestSelector;

    #[test]
    fn name_patterns_match_exactly() {
        let p = name_pattern(&["add > adds (1+1)", "b"], |n| vec![n.replace(" > ", " ")]);
        assert_eq!(p, r"^(?:add adds \(1\+1\)|b)$");
        let re = regex::Regex::new(&p).unwrap();
        assert!(re.is_match("add adds (1+1)") && re.is_match("b"));
        assert!(!re.is_match("add adds (1+1) more") && !re.is_match("bb"));
    }

    #[test]
    fn go_packages_from_files_dirs_and_import_paths() {
        let sel = Selection::Only(vec![
            TestSelector::test("pkg/a/math_test.go", "TestAdd"),
            TestSelector::file("pkg/a/other_test.go"),
            TestSelector::file("root_test.go"),
            TestSelector::file("example.com/m/b"),
        ]);
        assert_eq!(go_packages(&sel), ["./pkg/a", ".", "example.com/m/b"]);
    }

    #[test]
    fn designated_files_are_existing_files_of_the_project_never_options() {
        let dir = tempfile::tempdir().unwrap();
        for f in ["a.test.ts", "--config=evil.js"] {
            std::fs::write(dir.path().join(f), "").unwrap();
        }
        let sel = Selection::Only(vec![
            TestSelector::file("a.test.ts"),
            TestSelector::file("--config=evil.js"),
            TestSelector::file("missing.test.ts"),
            TestSelector::file("../a.test.ts"),
            TestSelector::file("/etc/passwd"),
        ]);
        assert_eq!(
            existing_files(&Runner::Vitest, dir.path(), &sel),
            Some(vec!["a.test.ts".to_string()])
        );
        let none = Selection::Only(vec![TestSelector::file("missing.test.ts")]);
        assert_eq!(
            existing_files(&Runner::Pytest, dir.path(), &none),
            Some(vec![])
        );
        assert_eq!(existing_files(&Runner::Cargo, dir.path(), &sel), None);
        assert_eq!(
            existing_files(&Runner::Vitest, dir.path(), &Selection::All),
            None
        );
    }

    #[test]
    fn display_quotes_what_a_shell_would_split() {
        let args = [
            "run".to_string(),
            "-t".into(),
            "^(?:a b)$".into(),
            "it's".into(),
        ];
        assert_eq!(shell_words(&args), r"run -t '^(?:a b)$' 'it'\''s'");
    }

    #[test]
    fn a_bad_exit_without_a_failure_is_an_error_of_the_run() {
        use std::os::unix::process::ExitStatusExt;
        let out = |code: i32| ProcessOutput {
            status: ExitStatus::from_raw(code << 8),
            stdout: String::new(),
            stderr: "Unhandled error between tests".into(),
            duration: Duration::ZERO,
        };
        let pass = TestResult::new(TestId::new("a", "b"), Outcome::Pass);
        let mut results = vec![pass.clone()];
        check_exit("vitest", &out(1), None, &mut results);
        assert_eq!(results.len(), 2);
        assert_eq!(results[1].id, TestId::whole_run());
        assert_eq!(
            results[1].message.as_deref(),
            Some(
                "vitest ended with exit status 1 though its report shows no failure: Unhandled error between tests"
            )
        );
        let mut quiet = vec![pass.clone()];
        check_exit("pytest", &out(5), Some(5), &mut quiet);
        assert_eq!(quiet.len(), 1, "pytest's 5: no tests collected");
        let mut explained = vec![pass, TestResult::new(TestId::new("a", "c"), Outcome::Fail)];
        check_exit("vitest", &out(1), None, &mut explained);
        assert_eq!(explained.len(), 2, "the failure explains the exit status");
        let mut clean = Vec::new();
        check_exit("vitest", &out(0), None, &mut clean);
        assert!(clean.is_empty());
    }
}
