//! Quality gates between Implementation and Audit.
//!
//! One [`Gate`] per file, each returning a [`GateReport`]. All gates of a transition run concurrently
//! ([`run_gates`]); a gate that could not run — tool missing, crashed, timed out, panicked — reports
//! `NotRun` with the reason, which is never a pass, and blocks when its hook is `required`.

mod changes;
mod ci;
mod command;
mod dead_code;
mod duplicates;
mod http;
mod links;
mod lsp;
mod lsp_client;
mod oracle;
mod package_safety;
mod report;
mod session;
mod tool;
mod traceability;
mod trust;
mod tsc;

use std::ffi::OsString;
use std::fmt;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::Instrument;

use crate::config::{GateKind, GateSettings, Hook};

pub use changes::{
    ChangeSet, ChangedFile, CommitInfo, ExcludeError, ExcludeGlobs, FileStatus, current_branch,
    extension_of, worktree_root,
};
pub use ci::{CiContext, CiError, CiPoll, CiRun, CiSource, NoCiConnection};
pub use duplicates::{CloneType, classify_clone};
pub use package_safety::flagged_status;
pub use report::{Finding, FindingSeverity, GateReport, GateStatus, NotRunCause, Verdict, verdict};
pub use session::GateSession;
pub use tool::{
    CARGO, GO, JEST, Launcher, NODE, PYTEST, ProcessOutput, Reach, RunError, ScratchDir, Tool,
    ToolLocation, ToolSpec, VITEST, apply_env, brief, find_on_path, install_hint, locate_from,
    run_captured, tool_path, truncate_chars,
};
pub use trust::{ToolEnv, main_checkout_of};

/// The tools a gate of `kind` runs, each with where it was found in `ctx` or why it was not:
/// `(tool, Ok(where) | Err(why))`. Gates that run no tool of their own give an empty list.
pub async fn gate_tools(
    kind: crate::config::GateKind,
    ctx: &GateContext,
) -> Vec<(ToolSpec, Result<String, String>)> {
    let mut found = Vec::new();
    for spec in tool_specs(kind) {
        found.push((*spec, tool::locate(*spec, ctx).await.map(|t| t.describe())));
    }
    found
}

/// The tools a gate of `kind` runs (besides the project's own commands and test runners).
pub(crate) fn tool_specs(kind: crate::config::GateKind) -> &'static [ToolSpec] {
    use crate::config::GateKind as K;
    match kind {
        K::Tsc => &[tool::TSC],
        K::Lsp => &[tool::TYPESCRIPT_LANGUAGE_SERVER, tool::PYLSP],
        K::DeadCode => &[tool::KNIP],
        K::Duplicates => &[tool::JSCPD],
        K::Ci | K::Traceability | K::PackageSafety | K::Command => &[],
        K::Red | K::Green | K::Frozen | K::Contract => &[],
    }
}

/// The tools a gate of `kind` may need: its own, and for the oracle's gates the test runners they
/// fall back to when the project has none installed.
fn needed_tools(kind: crate::config::GateKind) -> impl Iterator<Item = &'static ToolSpec> {
    use crate::config::GateKind as K;
    let runners: &[ToolSpec] = match kind {
        K::Red | K::Green => &[tool::VITEST, tool::JEST, tool::PYTEST],
        _ => &[],
    };
    tool_specs(kind).iter().chain(runners)
}

/// The tools whose absence kept gates of `reports` from running (their reasons say `<tool> not
/// found`), in report order.
pub fn missing_tools(reports: &[GateReport]) -> Vec<ToolSpec> {
    let mut missing: Vec<ToolSpec> = Vec::new();
    for r in reports {
        let GateStatus::NotRun { reason, .. } = &r.status else {
            continue;
        };
        for spec in needed_tools(r.kind) {
            if reason.contains(&format!("{} not found", spec.bin)) && !missing.contains(spec) {
                missing.push(*spec);
            }
        }
    }
    missing
}

/// Await futures concurrently, results in order (the language servers of the lsp gate).
pub(crate) use futures_util::future::join_all;

/// A boxed, sendable future (no async-trait dependency).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Why the gates could not be set up at all (as opposed to one gate not running).
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error("`{}` does not exist", dir.display())]
    Missing { dir: PathBuf },
    #[error("`{}` is not a directory", dir.display())]
    NotADirectory { dir: PathBuf },
    #[error("`{}` is not inside a git repository", dir.display())]
    NotARepository { dir: PathBuf },
    #[error("the git repository of `{}` cannot be opened: {}", dir.display(), source.message())]
    Unreadable { dir: PathBuf, source: git2::Error },
    #[error("{} is a bare repository; the gates need a working tree", dir.display())]
    Bare { dir: PathBuf },
    #[error(
        "base `{base}` is neither a local branch, origin/{base}, nor a revision of this repository; fetch it or pass another base (--base)"
    )]
    BaseNotFound { base: String },
    #[error("git failed while {context}: {}", source.message())]
    Git {
        context: String,
        source: git2::Error,
    },
}

/// The issue the change is for (trusted text only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssueText {
    pub number: u64,
    pub title: String,
    pub body: String,
}

/// Everything a gate may look at.
#[derive(Clone)]
pub struct GateContext {
    /// Root of the working tree under review.
    pub dir: PathBuf,
    pub changes: ChangeSet,
    pub issue: Option<IssueText>,
    pub settings: GateSettings,
    /// How to reach CI; `None` when there is no GitHub connection.
    pub ci: Option<CiContext>,
    /// Where gates keep state between runs (tsc cache and trend), e.g. `<repo>/.supervisor/gates`.
    pub state_dir: PathBuf,
    /// PATH used to find tools and given to them; `None` = the session environment's PATH. Relative
    /// entries and entries inside the checkout are never used.
    pub search_path: Option<OsString>,
    /// The run's gate session: trusted tools, their environment, warm language servers, incremental
    /// state.
    pub session: GateSession,
    /// What the oracle's gates are given by the run (designated tests, contract, RED's record).
    pub proof: Option<Arc<crate::evidence::ProofInput>>,
}

impl fmt::Debug for GateContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GateContext")
            .field("dir", &self.dir)
            .field("changes", &self.changes)
            .field("issue", &self.issue.as_ref().map(|i| i.number))
            .field("settings", &self.settings)
            .field("ci", &self.ci)
            .field("state_dir", &self.state_dir)
            .field("session", &self.session)
            .finish_non_exhaustive()
    }
}

impl GateContext {
    /// A context for the checkout at `dir` against `base`, with default gate settings, no issue and no
    /// CI connection; state kept in `<dir>/.supervisor/gates`, tools run with the agents' base
    /// environment allowlist in a session of their own.
    pub fn for_checkout(dir: &Path, base: &str) -> Result<GateContext, GateError> {
        let root = worktree_root(dir)?;
        let changes = ChangeSet::compute(&root, base)?;
        let state_dir = root.join(".supervisor/gates");
        let session = GateSession::for_checkout(&root, &state_dir, ToolEnv::base());
        Ok(GateContext {
            state_dir,
            dir: root,
            changes,
            issue: None,
            settings: GateSettings::default(),
            ci: None,
            search_path: None,
            session,
            proof: None,
        })
    }

    /// The context the gates see: the change without the files `gates.exclude` names.
    pub(crate) fn effective(&self) -> Result<GateContext, ExcludeError> {
        let mut ctx = self.clone();
        if !ctx.settings.exclude.is_empty() {
            ctx.changes = ctx
                .changes
                .without(&ExcludeGlobs::new(&ctx.settings.exclude)?);
        }
        Ok(ctx)
    }

    /// Read a changed (or any) file of the working tree as text; `None` when absent, binary, huge
    /// or out of what the sandbox shows.
    pub(crate) fn read_text(&self, rel: &str) -> Option<String> {
        let path = self.dir.join(rel);
        self.shows(&path).then(|| read_text_file(&path)).flatten()
    }

    /// Whether the file at `path` is there for a process confined to the checkout (always without
    /// `agentSandbox`): what a gate reads itself of the agent's files reaches no further than that.
    pub(crate) fn shows(&self, path: &Path) -> bool {
        tool::Launcher::of(self).shows(&self.dir, path)
    }
}

/// Text files up to this size are read by gates that search content.
pub(crate) const MAX_TEXT_FILE: u64 = 1024 * 1024;

pub(crate) fn read_text_file(path: &Path) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > MAX_TEXT_FILE {
        return None;
    }
    let bytes = std::fs::read(path).ok()?;
    if bytes.contains(&0) {
        return None;
    }
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// What a gate returns; [`run_gates`] adds the name, timing and `required`.
#[derive(Debug, Clone, PartialEq)]
pub struct GateOutcome {
    pub status: GateStatus,
    pub(crate) findings: Vec<Finding>,
    pub(crate) summary: String,
    /// What an oracle gate ran and saw.
    pub(crate) evidence: Option<Box<crate::evidence::TestEvidence>>,
}

impl GateOutcome {
    pub fn new(status: GateStatus, findings: Vec<Finding>, summary: impl Into<String>) -> Self {
        GateOutcome {
            status,
            findings,
            summary: summary.into(),
            evidence: None,
        }
    }

    /// Record why the gate did not run (changes only a `NotRun` status).
    pub(crate) fn because(mut self, why: NotRunCause) -> Self {
        if let GateStatus::NotRun { cause, .. } = &mut self.status {
            *cause = why;
        }
        self
    }

    pub(crate) fn pass(summary: impl Into<String>) -> Self {
        Self::new(GateStatus::Pass, Vec::new(), summary)
    }

    /// Nothing to check; `why` says what was looked for.
    pub(crate) fn not_applicable(why: impl Into<String>) -> Self {
        Self::new(GateStatus::NotApplicable, Vec::new(), why)
    }

    /// The gate could not run for a set-up reason (tool missing, crashed, timed out); the reason is
    /// both the status and the summary.
    pub(crate) fn not_run(reason: impl Into<String>) -> Self {
        Self::not_run_because(NotRunCause::Setup, reason)
    }

    /// The gate could not run, for `cause`; the reason is both the status and the summary.
    pub(crate) fn not_run_because(cause: NotRunCause, reason: impl Into<String>) -> Self {
        let reason = reason.into();
        Self::new(
            GateStatus::not_run_because(cause, reason.clone()),
            Vec::new(),
            reason,
        )
    }
}

/// A quality gate. Implementations live one per file and never turn a failure to run into a pass.
pub trait Gate: Send + Sync {
    fn kind(&self) -> GateKind;
    /// Run the gate for `hook` (its `run`/`expect`/`timeoutSec` matter to the command gate).
    fn run<'a>(&'a self, hook: &'a Hook, ctx: &'a GateContext) -> BoxFuture<'a, GateOutcome>;
}

/// A gate that is its kind and an async function — what every built-in gate is.
pub(crate) struct FnGate {
    pub(crate) kind: GateKind,
    pub run: for<'a> fn(&'a Hook, &'a GateContext) -> BoxFuture<'a, GateOutcome>,
}

impl Gate for FnGate {
    fn kind(&self) -> GateKind {
        self.kind
    }

    fn run<'a>(&'a self, hook: &'a Hook, ctx: &'a GateContext) -> BoxFuture<'a, GateOutcome> {
        (self.run)(hook, ctx)
    }
}

/// The gate implementing `kind`.
pub(crate) fn gate_for(kind: GateKind) -> &'static dyn Gate {
    match kind {
        GateKind::Ci => &ci::GATE,
        GateKind::Tsc => &tsc::GATE,
        GateKind::Lsp => &lsp::GATE,
        GateKind::DeadCode => &dead_code::GATE,
        GateKind::Duplicates => &duplicates::GATE,
        GateKind::Traceability => &traceability::GATE,
        GateKind::PackageSafety => &package_safety::GATE,
        GateKind::Command => &command::GATE,
        GateKind::Red => &oracle::RED,
        GateKind::Green => &oracle::GREEN,
        GateKind::Frozen => &oracle::FROZEN,
        GateKind::Contract => &oracle::CONTRACT,
    }
}

/// A hook with default options for `kind` (the CLI and tests use these).
pub fn default_hook(kind: GateKind) -> Hook {
    Hook {
        gate: kind,
        name: kind.name().to_string(),
        required: false,
        run: None,
        expect: crate::config::Expect::Pass,
        timeout_sec: None,
        experimental: false,
    }
}

/// Run every hook's gate concurrently; reports come back in hook order. A gate that panics, is
/// cancelled or overruns its deadline is `NotRun`, never `Pass`.
pub async fn run_gates(hooks: &[Hook], ctx: &GateContext) -> Vec<GateReport> {
    run_gates_reporting(hooks, ctx, |_, _| {}).await
}

/// [`run_gates`], telling `finished` of each gate as it finishes (its index in `hooks` and its
/// report), in the order they finish: every hook once, before the reports come back.
pub async fn run_gates_reporting(
    hooks: &[Hook],
    ctx: &GateContext,
    finished: impl FnMut(usize, &GateReport) + Send,
) -> Vec<GateReport> {
    run_gates_with(hooks, ctx, gate_for, finished).await
}

/// [`run_gates_reporting`] with the gate of each kind chosen by `resolve`: the pipeline's
/// resolver adds the oracle's gates (`verify::gate_for`); tests substitute misbehaving gates.
pub async fn run_gates_with(
    hooks: &[Hook],
    ctx: &GateContext,
    resolve: fn(GateKind) -> &'static dyn Gate,
    mut finished: impl FnMut(usize, &GateReport) + Send,
) -> Vec<GateReport> {
    let shared = match ctx.effective() {
        Ok(ctx) => Arc::new(ctx),
        Err(e) => {
            let reports: Vec<GateReport> = hooks
                .iter()
                .map(|hook| unusable_exclude(hook, &e))
                .collect();
            reports.iter().enumerate().for_each(|(i, r)| finished(i, r));
            return reports;
        }
    };
    // Whatever `gates.exclude` leaves out: a link out of the worktree is never read.
    let links = links::leaving(&ctx.changes, &ctx.dir);
    if !links.is_empty() {
        let reports = refused_for_links(hooks, links);
        reports.iter().enumerate().for_each(|(i, r)| finished(i, r));
        return reports;
    }
    // Gates run side by side; dropping this future (a stop) aborts every one of them, and their
    // child process groups stay recorded with the run's.
    let mut set = tokio::task::JoinSet::new();
    let mut ids = std::collections::HashMap::new();
    for (i, hook) in hooks.iter().enumerate() {
        let hook = hook.clone();
        let ctx = Arc::clone(&shared);
        let task = crate::process::in_this_run(async move {
            run_gate_with(&hook, &ctx, resolve(hook.gate)).await
        });
        ids.insert(set.spawn(task).id(), i);
    }
    let started = Instant::now();
    let mut done: Vec<Option<GateReport>> = vec![None; hooks.len()];
    while let Some(joined) = set.join_next_with_id().await {
        let (i, report) = match joined {
            Ok((id, report)) => (ids[&id], report),
            Err(e) => {
                let i = ids[&e.id()];
                let hook = &hooks[i];
                let reason = if e.is_panic() {
                    format!("the gate crashed: {}", panic_message(e.into_panic()))
                } else {
                    "the gate was cancelled before it finished".to_string()
                };
                tracing::error!(gate = %hook.name, %reason, "gate did not finish");
                let report = report_from(hook, GateOutcome::not_run(reason), started.elapsed());
                (i, report)
            }
        };
        finished(i, &report);
        done[i] = Some(report);
    }
    done.into_iter().flatten().collect()
}

/// Run one hook's gate with its deadline (not concurrently with others).
pub async fn run_gate(hook: &Hook, ctx: &GateContext) -> GateReport {
    match ctx.effective() {
        Ok(ctx) => run_gate_with(hook, &ctx, gate_for(hook.gate)).await,
        Err(e) => unusable_exclude(hook, &e),
    }
}

/// With a `gates.exclude` that cannot be read, no gate knows which files to check: none runs.
fn unusable_exclude(hook: &Hook, e: &ExcludeError) -> GateReport {
    report_from(hook, GateOutcome::not_run(e.to_string()), Duration::ZERO)
}

/// Every hook's report when the change holds links out of the worktree: failed without running,
/// the links named once (in the first report), so the round blocks and goes back to the agent.
fn refused_for_links(hooks: &[Hook], links: Vec<Finding>) -> Vec<GateReport> {
    let names: Vec<&str> = links.iter().filter_map(|f| f.file.as_deref()).collect();
    let summary = format!(
        "not run: the change holds a link out of the worktree ({}); no gate reads it until the link is gone",
        names.join(", ")
    );
    let mut links = Some(links);
    hooks
        .iter()
        .map(|hook| {
            let findings = links.take().unwrap_or_default();
            report_from(
                hook,
                GateOutcome::new(GateStatus::Fail, findings, summary.clone()),
                Duration::ZERO,
            )
        })
        .collect()
}

async fn run_gate_with(hook: &Hook, ctx: &GateContext, gate: &dyn Gate) -> GateReport {
    let started = Instant::now();
    let deadline = gate_deadline(hook, ctx);
    let span = tracing::info_span!("gate", gate = %hook.name);
    let gate = gate.run(hook, ctx).instrument(span);
    let outcome = tokio::select! {
        outcome = tokio::time::timeout(deadline, gate) => match outcome {
            Ok(outcome) => outcome,
            Err(_) => GateOutcome::not_run(format!(
                "the gate did not finish within {} s",
                deadline.as_secs()
            )),
        },
        () = ctx.session.cancel().cancelled() => GateOutcome::not_run_because(
            NotRunCause::Cancelled,
            "stopped before it finished: a stop was asked for (its tools were killed)",
        ),
    };
    tracing::debug!(gate = %hook.name, status = %outcome.status, "gate finished");
    let mut outcome = outcome;
    for finding in &mut outcome.findings {
        links::confine(finding, &ctx.dir);
    }
    report_from(hook, outcome, started.elapsed())
}

/// The whole-gate backstop: tools have their own timeouts, which give better reasons.
fn gate_deadline(hook: &Hook, ctx: &GateContext) -> Duration {
    let tool = Duration::from_secs(ctx.settings.tool_timeout_sec.max(1));
    match hook.gate {
        GateKind::Command => hook
            .timeout_sec
            .map(Duration::from_secs)
            .unwrap_or(tool)
            .saturating_add(Duration::from_secs(10)),
        GateKind::Ci => ctx
            .ci
            .as_ref()
            .map(|c| c.timeout.saturating_add(c.interval.saturating_mul(4)))
            .unwrap_or_default()
            .saturating_add(Duration::from_secs(120)),
        // Up to three attempts per language server.
        GateKind::Lsp => tool.saturating_mul(4),
        // Up to three test runs, each with the oracle's own timeout.
        GateKind::Red | GateKind::Green => hook
            .timeout_sec
            .map(Duration::from_secs)
            .unwrap_or(crate::evidence::TEST_RUN_TIMEOUT.saturating_mul(3)),
        _ => hook
            .timeout_sec
            .map(Duration::from_secs)
            .unwrap_or(tool.saturating_mul(2)),
    }
}

fn report_from(hook: &Hook, outcome: GateOutcome, elapsed: Duration) -> GateReport {
    GateReport {
        kind: hook.gate,
        name: hook.name.clone(),
        status: outcome.status,
        findings: outcome.findings,
        duration_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
        required: hook.required,
        summary: outcome.summary,
        evidence: outcome.evidence,
    }
}

fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-text payload".into()
    }
}

/// Whether the dead-code gate failed, so the pipeline undoes its last commit in the worktree (the spec:
/// "Dead code: found → block + uncommit") before handing the work back to the developer.
pub fn dead_code_requires_uncommit(reports: &[GateReport]) -> bool {
    reports
        .iter()
        .any(|r| r.kind == GateKind::DeadCode && r.status == GateStatus::Fail)
}

/// Write `text` to `path` atomically (temp file + rename), creating the directory.
pub(crate) fn write_state_file(path: &Path, text: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
        // Keep gate state out of `git status` (and so out of the next ChangeSet).
        let ignore = dir.join(".gitignore");
        if !ignore.exists() {
            std::fs::write(&ignore, "*\n")?;
        }
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_its_gate() {
        for kind in GateKind::ALL {
            assert_eq!(gate_for(kind).kind(), kind);
        }
    }

    struct Panicking;
    impl Gate for Panicking {
        fn kind(&self) -> GateKind {
            GateKind::Tsc
        }
        fn run<'a>(&'a self, _: &'a Hook, _: &'a GateContext) -> BoxFuture<'a, GateOutcome> {
            Box::pin(async { panic!("index out of bounds in the parser") })
        }
    }

    struct Passing;
    impl Gate for Passing {
        fn kind(&self) -> GateKind {
            GateKind::Traceability
        }
        fn run<'a>(&'a self, _: &'a Hook, _: &'a GateContext) -> BoxFuture<'a, GateOutcome> {
            Box::pin(async { GateOutcome::pass("fine") })
        }
    }

    fn test_context() -> GateContext {
        GateContext {
            dir: PathBuf::from("/nonexistent"),
            changes: ChangeSet::default(),
            issue: None,
            settings: GateSettings::default(),
            ci: None,
            state_dir: PathBuf::from("/nonexistent/state"),
            search_path: None,
            session: GateSession::new(None, Path::new("/nonexistent/state"), ToolEnv::base()),
            proof: None,
        }
    }

    /// No gate can hold a run for ever: with the default settings every gate has a deadline, at
    /// most an hour (the oracle's three test runs of 20 minutes each).
    #[test]
    fn every_gate_has_a_finite_deadline_by_default() {
        let ctx = test_context();
        for kind in GateKind::ALL {
            let deadline = gate_deadline(&default_hook(kind), &ctx);
            assert!(
                deadline > Duration::ZERO && deadline <= Duration::from_secs(3600),
                "{kind:?}: {deadline:?}"
            );
        }
    }

    #[tokio::test]
    async fn a_panicking_gate_is_not_run_and_the_others_still_report() {
        fn resolve(kind: GateKind) -> &'static dyn Gate {
            match kind {
                GateKind::Tsc => &Panicking,
                _ => &Passing,
            }
        }
        let mut tsc = default_hook(GateKind::Tsc);
        tsc.required = true;
        let hooks = vec![tsc, default_hook(GateKind::Traceability)];
        let mut told = Vec::new();
        let reports = run_gates_with(&hooks, &test_context(), resolve, |i, r: &GateReport| {
            told.push((i, r.clone()))
        })
        .await;
        assert_eq!(reports.len(), 2);
        // Each gate is told as it finishes, the crashed one as not run.
        told.sort_by_key(|(i, _)| *i);
        assert_eq!(told, vec![(0, reports[0].clone()), (1, reports[1].clone())]);
        assert_eq!(
            reports[0].status,
            GateStatus::not_run("the gate crashed: index out of bounds in the parser")
        );
        assert!(reports[0].required && reports[0].blocks());
        assert_eq!(reports[1].status, GateStatus::Pass);
        assert_eq!(reports[0].not_run_cause(), Some(NotRunCause::Setup));
        assert_eq!(reports[1].kind, GateKind::Traceability);
        assert_eq!(reports[1].name, "traceability");
        assert_eq!(verdict(&reports), Verdict::Blocked);
    }

    /// Fails whatever it is asked to check.
    struct Failing;
    impl Gate for Failing {
        fn kind(&self) -> GateKind {
            GateKind::DeadCode
        }
        fn run<'a>(&'a self, _: &'a Hook, _: &'a GateContext) -> BoxFuture<'a, GateOutcome> {
            Box::pin(async { GateOutcome::new(GateStatus::Fail, Vec::new(), "found something") })
        }
    }

    #[tokio::test]
    async fn the_hook_kind_not_its_name_decides_the_uncommit() {
        fn resolve(_: GateKind) -> &'static dyn Gate {
            &Failing
        }
        let mut renamed = default_hook(GateKind::DeadCode);
        renamed.name = "unused code".into();
        let reports = run_gates_with(&[renamed], &test_context(), resolve, |_, _| {}).await;
        assert_eq!(reports[0].status, GateStatus::Fail);
        assert!(
            dead_code_requires_uncommit(&reports),
            "a dead-code gate with a custom name still undoes the commit"
        );

        let mut knip = default_hook(GateKind::Command);
        knip.name = "knip".into();
        knip.run = Some("npx knip".into());
        let reports = run_gates_with(&[knip], &test_context(), resolve, |_, _| {}).await;
        assert_eq!(reports[0].status, GateStatus::Fail);
        assert!(
            !dead_code_requires_uncommit(&reports),
            "a command gate named knip never undoes the commit"
        );
    }

    #[tokio::test]
    async fn an_exclude_pattern_that_is_not_a_glob_runs_no_gate() {
        fn resolve(_: GateKind) -> &'static dyn Gate {
            &Passing
        }
        let mut ctx = test_context();
        ctx.settings.exclude = vec!["src/[ab.ts".into()];
        let mut required = default_hook(GateKind::Traceability);
        required.required = true;
        let mut told = Vec::new();
        let reports = run_gates_with(&[required.clone()], &ctx, resolve, |i, r: &GateReport| {
            told.push((i, r.status.clone()))
        })
        .await;
        assert_eq!(told, vec![(0, reports[0].status.clone())]);
        let single = run_gate(&required, &ctx).await;
        for r in [&reports[0], &single] {
            let GateStatus::NotRun { reason, .. } = &r.status else {
                panic!("{r:?}")
            };
            assert!(
                reason.starts_with("gates.exclude: `src/[ab.ts` is not a valid glob"),
                "{reason}"
            );
            assert!(r.blocks());
            assert_eq!(r.not_run_cause(), Some(NotRunCause::Setup));
        }
    }

    #[test]
    fn uncommit_only_on_dead_code_failure() {
        let report = |kind: GateKind, status| GateReport::new(kind, kind.name(), status);
        assert!(dead_code_requires_uncommit(&[report(
            GateKind::DeadCode,
            GateStatus::Fail
        )]));
        assert!(!dead_code_requires_uncommit(&[report(
            GateKind::DeadCode,
            GateStatus::not_run("knip missing")
        )]));
        assert!(!dead_code_requires_uncommit(&[report(
            GateKind::Tsc,
            GateStatus::Fail
        )]));
    }
}
