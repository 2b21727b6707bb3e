//! CI gate: poll the check runs of the pushed head commit until they settle or time runs out.
//!
//! All success → Pass; any failure → Fail naming the failing checks; no checks at all → NotApplicable.
//! A CI status that cannot be established is never a verdict: still pending at the timeout, the head
//! commit never on the remote, or GitHub unreadable all make the gate NotRun, with a [`NotRunCause`]
//! that says whether running again later can help (pending, transient) or a person must act (a missing
//! permission, the set-up). An optional CI gate lets the audit proceed; a required one blocks. When the
//! head commit is not on the remote yet, the branch is pushed again and the check retried. Polls send
//! the last ETag, so unchanged answers (304) cost nothing against the rate limit.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::{
    BoxFuture, Finding, FindingSeverity, FnGate, GateContext, GateOutcome, GateStatus, NotRunCause,
};
use crate::config::GateKind;

/// One check run of a commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CiRun {
    pub name: String,
    /// `queued`, `in_progress`, `completed` (also `waiting`, `requested`, `pending`).
    pub status: String,
    /// Set when completed: `success`, `failure`, `neutral`, `cancelled`, `skipped`, `timed_out`,
    /// `action_required`, `stale`, `startup_failure`.
    pub conclusion: Option<String>,
    pub url: Option<String>,
}

/// The answer to a check-runs poll.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CiPoll {
    /// 304: nothing changed since the ETag sent.
    NotModified,
    Runs {
        runs: Vec<CiRun>,
        etag: Option<String>,
    },
}

/// Why CI could not be read. The kind decides what the gate does: wait and ask again (transient),
/// stop asking (rate limited: GitHub set the wait), or name what a person must fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CiError {
    /// Network trouble or a GitHub server error: asking again soon may work.
    #[error("{0}")]
    Transient(String),
    /// GitHub's rate limit, with a wait longer than the client takes: ask again after it.
    #[error("{0}")]
    RateLimited(String),
    /// GitHub refused access (403): the credentials lack `permission`.
    #[error(
        "{detail}: the token may not read this; give it the \"{permission}\" permission (fine-grained token or GitHub App) or the `repo` scope (classic token)"
    )]
    PermissionDenied { permission: String, detail: String },
    /// The repository is unknown to GitHub (404).
    #[error("{0}")]
    NotFound(String),
    /// GitHub does not have the commit (yet): "No commit found for SHA" (422).
    #[error("{0}")]
    CommitMissing(String),
    /// Anything else: bad credentials, an unexpected answer, a rejected push, no connection.
    #[error("{0}")]
    Other(String),
}

impl CiError {
    /// What a gate that stops on this error reports as its cause.
    pub fn cause(&self) -> NotRunCause {
        match self {
            CiError::Transient(_) | CiError::RateLimited(_) => NotRunCause::Transient,
            CiError::PermissionDenied { .. } => NotRunCause::Denied,
            CiError::CommitMissing(_) => NotRunCause::Pending,
            CiError::NotFound(_) | CiError::Other(_) => NotRunCause::Setup,
        }
    }

    /// Worth asking again within this gate run (a commit just pushed may take a moment to show).
    fn is_retryable(&self) -> bool {
        matches!(self, CiError::Transient(_) | CiError::CommitMissing(_))
    }
}

/// Where the CI gate reads check runs; the pipeline adapts its GitHub client to this.
pub trait CiSource: Send + Sync {
    /// Check runs of `sha`, conditional on `etag` when given; [`CiError::CommitMissing`] when the
    /// remote does not have the commit.
    fn check_runs<'a>(
        &'a self,
        sha: &'a str,
        etag: Option<&'a str>,
    ) -> BoxFuture<'a, Result<CiPoll, CiError>>;
    /// Whether the remote knows the commit.
    fn commit_visible<'a>(&'a self, sha: &'a str) -> BoxFuture<'a, Result<bool, CiError>>;
    /// Push the branch again.
    fn push<'a>(&'a self) -> BoxFuture<'a, Result<(), CiError>>;
}

/// How the CI gate reaches CI for this run.
#[derive(Clone)]
pub struct CiContext {
    pub head_sha: String,
    /// `ciGatingTimeoutSec`; zero disables the gate.
    pub timeout: Duration,
    /// `gates.ciPollIntervalSec`.
    pub interval: Duration,
    pub source: Arc<dyn CiSource>,
}

impl fmt::Debug for CiContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CiContext")
            .field("head_sha", &self.head_sha)
            .field("timeout", &self.timeout)
            .field("interval", &self.interval)
            .finish_non_exhaustive()
    }
}

/// A `CiSource` for runs without GitHub (`supervisor gates`): every call fails with the reason.
#[derive(Debug, Clone)]
pub struct NoCiConnection(pub String);

impl NoCiConnection {
    fn error(&self) -> CiError {
        CiError::Other(self.0.clone())
    }
}

impl CiSource for NoCiConnection {
    fn check_runs<'a>(
        &'a self,
        _sha: &'a str,
        _etag: Option<&'a str>,
    ) -> BoxFuture<'a, Result<CiPoll, CiError>> {
        Box::pin(async move { Err(self.error()) })
    }
    fn commit_visible<'a>(&'a self, _sha: &'a str) -> BoxFuture<'a, Result<bool, CiError>> {
        Box::pin(async move { Err(self.error()) })
    }
    fn push<'a>(&'a self) -> BoxFuture<'a, Result<(), CiError>> {
        Box::pin(async move { Err(self.error()) })
    }
}

/// Pushes attempted when the head commit is not on the remote.
const MAX_PUSHES: u32 = 3;
/// Consecutive transient API errors tolerated before the gate gives up (not run, transient).
const MAX_CONSECUTIVE_ERRORS: u32 = 3;
/// Polls that may see no check runs before "no checks configured" is concluded: runs appear a moment
/// after a push.
const NO_CHECKS_POLLS: u32 = 3;

pub(crate) static GATE: FnGate = FnGate {
    kind: GateKind::Ci,
    run: |_hook, ctx| Box::pin(run(ctx)),
};

async fn run(ctx: &GateContext) -> GateOutcome {
    match &ctx.ci {
        None => GateOutcome::not_run(
            "no GitHub connection: check runs cannot be read (the pipeline provides one; `supervisor gates` runs without)",
        ),
        Some(ci) if ci.timeout.is_zero() => {
            GateOutcome::not_applicable("ciGatingTimeoutSec is 0: CI is not waited for")
        }
        Some(ci) => poll_ci(ci).await,
    }
}

/// Sleep for the poll interval, but not past the deadline. Returns false when the deadline has passed.
async fn wait_interval(interval: Duration, deadline: Instant) -> bool {
    let now = Instant::now();
    if now >= deadline {
        return false;
    }
    tokio::time::sleep(interval.min(deadline - now)).await;
    true
}

/// After a failed call: whether to ask again — a transient error, within [`MAX_CONSECUTIVE_ERRORS`]
/// and the deadline — having waited the poll interval.
async fn ask_again(e: &CiError, errors: &mut u32, ci: &CiContext, deadline: Instant) -> bool {
    *errors += 1;
    e.is_retryable()
        && *errors < MAX_CONSECUTIVE_ERRORS
        && wait_interval(ci.interval, deadline).await
}

async fn poll_ci(ci: &CiContext) -> GateOutcome {
    let deadline = Instant::now() + ci.timeout;
    let short = short_sha(&ci.head_sha);

    // Asking for the check runs also tells whether the remote has the commit; only when it does not
    // is the branch pushed again (once per gate run).
    let mut ensured = false;
    let mut etag: Option<String> = None;
    let mut runs: Option<Vec<CiRun>> = None;
    let mut errors = 0u32;
    let mut empty_polls = 0u32;
    let mut polls = 0u32;
    loop {
        polls += 1;
        match ci.source.check_runs(&ci.head_sha, etag.as_deref()).await {
            Ok(CiPoll::Runs {
                runs: fresh,
                etag: e,
            }) => {
                errors = 0;
                runs = Some(fresh);
                if e.is_some() {
                    etag = e;
                }
            }
            Ok(CiPoll::NotModified) => {
                errors = 0;
                if runs.is_none() {
                    // A 304 to our very first ETag-less request cannot happen; treat it as a fresh start.
                    etag = None;
                }
            }
            Err(CiError::CommitMissing(_)) if !ensured => {
                ensured = true;
                if let Err(outcome) = ensure_visible(ci, deadline).await {
                    return outcome;
                }
                continue;
            }
            Err(e) => {
                tracing::warn!(error = %e, "reading check runs failed");
                if !ask_again(&e, &mut errors, ci, deadline).await {
                    return unknown(
                        &e,
                        "ci-api-error",
                        format!("check runs of {short} could not be read: {e}"),
                    );
                }
                continue;
            }
        }
        let current = runs.as_deref().unwrap_or_default();
        if let Some(outcome) = settled(current, &short, &mut empty_polls) {
            return outcome;
        }
        if !wait_interval(ci.interval, deadline).await {
            return pending_at_timeout(current, &short, ci.timeout, polls);
        }
    }
}

/// Make sure the remote has the head commit, pushing again (up to [`MAX_PUSHES`]) when it does not.
async fn ensure_visible(ci: &CiContext, deadline: Instant) -> Result<(), GateOutcome> {
    let short = short_sha(&ci.head_sha);
    let mut pushes = 0u32;
    let mut errors = 0u32;
    let mut last_push_error: Option<CiError> = None;
    loop {
        match ci.source.commit_visible(&ci.head_sha).await {
            Ok(true) => return Ok(()),
            Ok(false) => errors = 0,
            Err(e) => {
                tracing::warn!(error = %e, "asking whether the head commit is on the remote failed");
                if !ask_again(&e, &mut errors, ci, deadline).await {
                    return Err(unknown(
                        &e,
                        "ci-api-error",
                        format!("could not ask whether {short} is on the remote: {e}"),
                    ));
                }
                continue;
            }
        }
        if pushes >= MAX_PUSHES {
            let why = last_push_error
                .as_ref()
                .map(|e| format!(" (last push error: {e})"))
                .unwrap_or_default();
            return Err(not_pushed(
                last_push_error.as_ref(),
                &short,
                format!("{short} is not on the remote after {pushes} pushes{why}"),
            ));
        }
        pushes += 1;
        tracing::info!(sha = %short, attempt = pushes, "head commit not on the remote; pushing again");
        last_push_error = ci.source.push().await.err();
        if !wait_interval(ci.interval, deadline).await {
            return Err(not_pushed(
                last_push_error.as_ref(),
                &short,
                format!("{short} did not reach the remote before the CI timeout"),
            ));
        }
    }
}

/// The CI status is unknown because GitHub could not be read: not run, for the error's cause.
fn unknown(e: &CiError, rule: &str, message: String) -> GateOutcome {
    GateOutcome::new(
        GateStatus::not_run(format!("CI status unknown: {e}")),
        vec![warning(rule, message)],
        format!("CI status unknown: {e}"),
    )
    .because(e.cause())
}

/// The head commit never reached the remote, so CI never saw it. A failed last push says why; pushes
/// that succeeded yet left no trace on GitHub may still land.
fn not_pushed(last_push_error: Option<&CiError>, short: &str, message: String) -> GateOutcome {
    let cause = last_push_error.map_or(NotRunCause::Pending, CiError::cause);
    let reason = format!("CI not checked: {short} never reached the remote");
    GateOutcome::new(
        GateStatus::not_run(reason.clone()),
        vec![warning("ci-commit-not-pushed", message)],
        reason,
    )
    .because(cause)
}

fn warning(rule: &str, message: String) -> Finding {
    Finding {
        file: None,
        line: None,
        rule: rule.into(),
        message,
        severity: FindingSeverity::Warning,
    }
}

fn short_sha(sha: &str) -> String {
    sha.chars().take(10).collect()
}

/// Conclusions that count as green.
fn is_success(conclusion: &str) -> bool {
    matches!(conclusion, "success" | "neutral" | "skipped")
}

fn is_completed(run: &CiRun) -> bool {
    run.status == "completed" || run.conclusion.is_some()
}

fn describe(run: &CiRun) -> String {
    match &run.url {
        Some(url) => format!("{} ({url})", run.name),
        None => run.name.clone(),
    }
}

/// The outcome when the runs have settled (any failure, or all completed); `None` while pending.
fn settled(runs: &[CiRun], short: &str, empty_polls: &mut u32) -> Option<GateOutcome> {
    if runs.is_empty() {
        *empty_polls += 1;
        return (*empty_polls >= NO_CHECKS_POLLS).then(|| {
            GateOutcome::not_applicable(format!(
                "no check runs for {short}: CI is not configured for this repository"
            ))
        });
    }
    // Any completed run that did not succeed fails the gate, whatever is still pending: every
    // conclusion we do not know counts as a failure, never as a pass.
    let failed: Vec<&CiRun> = runs
        .iter()
        .filter(|r| is_completed(r) && !r.conclusion.as_deref().is_some_and(is_success))
        .collect();
    if !failed.is_empty() {
        let findings = failed
            .iter()
            .map(|r| Finding {
                file: None,
                line: None,
                rule: format!(
                    "ci-{}",
                    r.conclusion
                        .as_deref()
                        .unwrap_or("failure")
                        .replace('_', "-")
                ),
                message: format!(
                    "check `{}` concluded {}{}",
                    r.name,
                    r.conclusion.as_deref().unwrap_or("without a conclusion"),
                    r.url.as_ref().map(|u| format!(": {u}")).unwrap_or_default()
                ),
                severity: FindingSeverity::Error,
            })
            .collect();
        let names = failed
            .iter()
            .map(|r| describe(r))
            .collect::<Vec<_>>()
            .join(", ");
        return Some(GateOutcome::new(
            GateStatus::Fail,
            findings,
            format!(
                "{} of {} checks failed on {short}: {names}",
                failed.len(),
                runs.len()
            ),
        ));
    }
    if runs.iter().all(is_completed) {
        return Some(GateOutcome::pass(format!(
            "all {} checks passed on {short}",
            runs.len()
        )));
    }
    None
}

fn pending_at_timeout(runs: &[CiRun], short: &str, timeout: Duration, polls: u32) -> GateOutcome {
    if runs.is_empty() {
        return GateOutcome::not_applicable(format!(
            "no check runs appeared for {short} within {} s: CI is not configured for this repository",
            timeout.as_secs()
        ));
    }
    let pending: Vec<&CiRun> = runs.iter().filter(|r| !is_completed(r)).collect();
    let findings = pending
        .iter()
        .map(|r| {
            warning(
                "ci-pending",
                format!(
                    "check `{}` still {} after {} s{}",
                    r.name,
                    r.status.replace('_', " "),
                    timeout.as_secs(),
                    r.url.as_ref().map(|u| format!(": {u}")).unwrap_or_default()
                ),
            )
        })
        .collect();
    let reason = format!(
        "CI did not finish: {} of {} checks still pending on {short} after {} s ({polls} polls)",
        pending.len(),
        runs.len(),
        timeout.as_secs()
    );
    GateOutcome::new(GateStatus::not_run(reason.clone()), findings, reason)
        .because(NotRunCause::Pending)
}
