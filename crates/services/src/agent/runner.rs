//! Runs one agent dispatch: starts the CLI in its own process group, reads its output as it arrives,
//! enforces the timeout, the stall limit (no output for too long), the token budget and the tool-call
//! cap (inside the CLI too, before a tool runs, where the CLI allows it: pi), honours cancellation,
//! and stops the whole group (SIGTERM, then SIGKILL after a grace period) whenever it ends early. A
//! CLI that reports no cost is priced from its usage.

use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::process::{Child, Command};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::backend::Invocation;
use super::dispatch::{AgentRequest, system_prompt};
use super::prices::Prices;
use super::run::{AgentRun, ExitReason, Limits, Usage};
use super::sandbox::Confinement;
use super::stream::{
    DEFAULT_LINE_CAP, LineReader, Pulse, StreamParser, Tail, Tally, TranscriptLine, event_type,
};
use super::transcript::Transcript;
use crate::process::{GroupGuard, process_group_alive, signal_group};

/// How much of the agent's stderr is kept in the run.
const STDERR_TAIL: usize = 8 * 1024;
/// How often a stopping process group is checked for survivors.
const GROUP_POLL: Duration = Duration::from_millis(20);

/// Run one agent dispatch to its end. Never fails: a CLI that cannot start, crashes or is stopped
/// still yields an [`AgentRun`] saying why. Cancelling `cancel` stops the agent
/// ([`ExitReason::Interrupted`]).
pub async fn run_agent(req: AgentRequest<'_>, cancel: CancellationToken) -> AgentRun {
    let started = Instant::now();
    let system = system_prompt(req.role);
    let inv = Invocation {
        role: req.role,
        system_prompt: &system,
        task: &req.task,
        attempt: req.attempt,
        revision: req.revision,
        subject: req.subject.as_deref(),
        env: &req.env,
    };
    let (mut launch, mut parser) = req.backend.with_cli(|cli| (cli.launch(&inv), cli.parser()));
    let mut run = AgentRun {
        role: req.role.name.clone(),
        backend: req.backend.name(),
        final_text: String::new(),
        tool_calls: 0,
        usage: Usage::default(),
        duration: Duration::ZERO,
        model: launch.model.clone(),
        exit: ExitReason::Completed,
        stderr_tail: String::new(),
        transcript: req.transcript.clone(),
        keep_partial: req.keep_partial_on_budget,
    };
    let finish = |mut run: AgentRun, exit: ExitReason| {
        run.exit = exit;
        run.duration = started.elapsed();
        run
    };
    if cancel.is_cancelled() {
        return finish(run, ExitReason::Interrupted);
    }
    if !req.cwd.is_dir() {
        let msg = format!("the working directory {} does not exist", req.cwd.display());
        return finish(run, ExitReason::SpawnFailed(msg));
    }
    // Limits the CLI enforces itself, before a tool runs; the checks below stay as the backstop.
    let guard = match req
        .backend
        .with_cli(|cli| cli.guard(&mut launch, &req.limits))
    {
        Ok(g) => g,
        Err(msg) => return finish(run, ExitReason::SpawnFailed(msg)),
    };
    let guard_dir: Vec<PathBuf> = guard.iter().map(|g| g.dir().to_path_buf()).collect();
    let launch = match &req.sandbox {
        None => launch,
        Some(sandbox) => {
            let mut confinement =
                Confinement::agent(&req.cwd, req.role.read_only, &req.backend, &req.env);
            confinement.readable = &guard_dir;
            match sandbox.wrap(launch, &confinement) {
                Ok(l) => l,
                Err(msg) => return finish(run, ExitReason::SpawnFailed(msg)),
            }
        }
    };
    let mut transcript =
        match Transcript::open(req.transcript.as_deref(), req.limits.transcript_cap) {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!("agent transcript not written: {e}");
                run.transcript = None;
                Transcript::default()
            }
        };

    let mut cmd = Command::new(&launch.program);
    cmd.args(&launch.args)
        .current_dir(&req.cwd)
        .env_clear()
        .envs(req.env.iter().map(|(k, v)| (k, v)))
        .envs(launch.env.iter().map(|(k, v)| (k, v)))
        .stdin(if launch.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    crate::process::lead_own_group(&mut cmd);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let hint = if e.kind() == std::io::ErrorKind::NotFound {
                " (is it installed and on the PATH given to agents?)"
            } else {
                ""
            };
            let msg = format!("{}: {e}{hint}", launch.program.display());
            return finish(run, ExitReason::SpawnFailed(msg));
        }
    };
    let Some(pgid) = child.id().map(|id| id as i32) else {
        return finish(
            run,
            ExitReason::SpawnFailed("the process vanished at start".into()),
        );
    };
    // Whatever happens to this future, the group does not outlive it.
    let mut group = GroupGuard::new(pgid);
    if let (Some(text), Some(mut stdin)) = (launch.stdin, child.stdin.take()) {
        tokio::spawn(async move {
            // A CLI that exits without reading its stdin is not an error of ours.
            let _ = stdin.write_all(text.as_bytes()).await;
            let _ = stdin.shutdown().await;
        });
    }
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        terminate_group(pgid, req.limits.kill_grace, &mut child).await;
        return finish(run, ExitReason::SpawnFailed("no output pipes".into()));
    };

    widen_pipe(&stdout);
    let mut out = LineReader::new(stdout, DEFAULT_LINE_CAP).with_skip(parser.skip_probe());
    let mut err = LineReader::new(stderr, DEFAULT_LINE_CAP);
    let mut stderr_tail = Tail::new(STDERR_TAIL);
    let mut tally = Tally::default();
    let mut status: Option<ExitStatus> = None;
    let mut stop: Option<ExitReason> = None;
    let (mut out_open, mut err_open) = (true, true);
    let deadline = req.limits.timeout.map(|t| Instant::now() + t);
    let mut last_output = Instant::now();
    // Over the tool-call cap with the CLI guarding it: until then, its refusal of the call is
    // awaited (the call did not run); past it, the backstop stops the agent.
    let mut refusal_due: Option<Instant> = None;
    let check = |tally: &Tally, refusal_due: &mut Option<Instant>| match limit_check(
        tally,
        &req.limits,
        guard.is_some(),
    ) {
        Check::Within => None,
        Check::Stop(reason) => Some(reason),
        Check::AwaitRefusal => {
            refusal_due.get_or_insert_with(|| Instant::now() + REFUSAL_WAIT);
            None
        }
    };

    while stop.is_none() && (out_open || err_open || status.is_none()) {
        let stall_at = req.limits.stall.map(|s| last_output + s);
        tokio::select! {
            r = out.next_line(), if out_open => match r {
                Ok(true) => {
                    last_output = Instant::now();
                    stdout_line(&out, parser.as_mut(), &mut tally, &mut transcript);
                    stop = check(&tally, &mut refusal_due);
                    send_pulse(req.pulse.as_ref(), &tally);
                }
                _ => out_open = false,
            },
            r = err.next_line(), if err_open => match r {
                Ok(true) => {
                    last_output = Instant::now();
                    transcript.stderr(err.line());
                    let line = String::from_utf8_lossy(err.line());
                    if !parser.stderr_line(&line, &mut tally) {
                        stderr_tail.push_line(&line);
                    }
                    stop = check(&tally, &mut refusal_due);
                    send_pulse(req.pulse.as_ref(), &tally);
                }
                _ => err_open = false,
            },
            s = child.wait(), if status.is_none() => {
                status = s.ok();
                // The leader is gone; anything it left running in its group goes too, so pipes close.
                stop_survivors(pgid, req.limits.kill_grace).await;
            },
            _ = sleep_until(deadline), if deadline.is_some() && status.is_none() => {
                stop = req.limits.timeout.map(ExitReason::TimedOut);
            },
            _ = sleep_until(stall_at), if stall_at.is_some() && status.is_none() => {
                stop = req.limits.stall.map(ExitReason::Stalled);
            },
            _ = sleep_until(refusal_due), if refusal_due.is_some() => {
                stop = over_budget(&tally, &req.limits);
                refusal_due = None;
            },
            _ = cancel.cancelled() => stop = Some(ExitReason::Interrupted),
        }
    }
    if stop.is_none() && (tally.refused || refusal_due.is_some()) {
        // The CLI stopped itself at a limit (or ended while its refusal was awaited).
        stop = refusal_stop(&tally, &req.limits).or_else(|| over_budget(&tally, &req.limits));
    }
    if stop.is_some() {
        if status.is_none() {
            status = terminate_group(pgid, req.limits.kill_grace, &mut child).await;
        } else {
            stop_survivors(pgid, req.limits.kill_grace).await;
        }
    }
    group.armed = false;
    drop(guard);
    transcript.finish();

    let success = status.is_some_and(|s| s.success());
    parser.end(&mut tally, success);
    run.tool_calls = tally.tool_calls;
    run.usage = tally.usage;
    if tally.model.is_some() {
        run.model = tally.model.clone();
    }
    run.stderr_tail = stderr_tail.text().to_string();
    price_if_unreported(&mut run, &req.prices);
    let exit = match stop {
        Some(reason) => {
            run.final_text = tally.answer();
            reason
        }
        None => {
            run.final_text = tally.answer();
            exit_reason(status, &tally, &run.stderr_tail)
        }
    };
    finish(run, exit)
}

/// Let the agent's stdout pipe hold 1 MiB: a CLI streaming fast (pi's repeated partial messages)
/// then wakes the reader far less often. Best effort: the default size works, only slower.
fn widen_pipe(pipe: &impl std::os::fd::AsRawFd) {
    // SAFETY: fcntl on a descriptor we own; F_SETPIPE_SZ only resizes the pipe's buffer.
    unsafe {
        libc::fcntl(pipe.as_raw_fd(), libc::F_SETPIPE_SZ, 1 << 20);
    }
}

/// One stdout line: into the transcript (as the parser says) and the tally.
fn stdout_line<R: tokio::io::AsyncRead + Unpin>(
    out: &LineReader<R>,
    parser: &mut dyn StreamParser,
    tally: &mut Tally,
    transcript: &mut Transcript,
) {
    tally.lines += 1;
    if out.skipped() {
        let head = String::from_utf8_lossy(out.line());
        let kind = event_type(&head).unwrap_or_default();
        transcript.stdout_dropped(&kind, out.len());
        return;
    }
    if out.truncated() {
        tally.skipped_lines += 1;
    }
    let line = String::from_utf8_lossy(out.line());
    match parser.transcript(&line) {
        TranscriptLine::Keep => transcript.stdout(out.line()),
        TranscriptLine::Drop => {
            let kind = event_type(&line).unwrap_or_default();
            transcript.stdout_dropped(&kind, out.len());
        }
        TranscriptLine::Replace(short) => {
            let kind = event_type(&line).unwrap_or_default();
            transcript.stdout_replaced(&kind, out.len(), &short);
        }
    }
    parser.line(&line, tally);
}

/// Tell a live view the tally's counters when they changed.
fn send_pulse(to: Option<&tokio::sync::watch::Sender<Pulse>>, tally: &Tally) {
    if let Some(tx) = to {
        let now = tally.pulse();
        tx.send_if_modified(|seen| {
            let changed = *seen != now;
            if changed {
                *seen = now;
            }
            changed
        });
    }
}

/// How long a refusal by the CLI's own guard is awaited once a tool call went over the cap.
const REFUSAL_WAIT: Duration = Duration::from_secs(3);

/// What the limits say about the stream so far.
#[derive(Debug, PartialEq)]
enum Check {
    Within,
    Stop(ExitReason),
    /// Over the cap, with the CLI guarding it: its refusal of the call is expected.
    AwaitRefusal,
}

/// The limits against the tally. With a `guarded` CLI (one that refuses the tool call crossing a
/// limit before it runs), the call over the cap is not taken as run until the CLI's refusal says it
/// was not: the report counts what ran. A budget crossed at a model call's end stops at once: that
/// call's tools have not started.
fn limit_check(tally: &Tally, limits: &Limits, guarded: bool) -> Check {
    if let Some(reason) = refusal_stop(tally, limits) {
        return Check::Stop(reason);
    }
    match over_budget(tally, limits) {
        Some(ExitReason::ToolCallCap { .. }) if guarded => Check::AwaitRefusal,
        Some(reason) => Check::Stop(reason),
        None => Check::Within,
    }
}

/// The stop after the CLI refused a tool call at a limit: the budget when the tokens are over it,
/// else the cap (the refused call was the one over it).
fn refusal_stop(tally: &Tally, limits: &Limits) -> Option<ExitReason> {
    if !tally.refused {
        return None;
    }
    if let Some(reason @ ExitReason::TokenBudget { .. }) = over_budget(tally, limits) {
        return Some(reason);
    }
    Some(ExitReason::ToolCallCap {
        calls: tally.tool_calls + 1,
        cap: limits.max_tool_calls,
    })
}

/// A run whose CLI reported no cost: its usage at its model's prices, when the table knows it.
fn price_if_unreported(run: &mut AgentRun, prices: &Prices) {
    if run.usage.cost_usd > 0.0 || run.usage.total == 0 {
        return;
    }
    let cost = run
        .model
        .as_deref()
        .and_then(|model| prices.cost(model, &run.usage));
    if let Some(cost) = cost {
        run.usage.cost_usd = cost;
        run.usage.cost_estimated = true;
    }
}

/// The budget a tally has gone over, if any.
fn over_budget(tally: &Tally, limits: &Limits) -> Option<ExitReason> {
    if limits.token_budget > 0 && tally.usage.total > limits.token_budget {
        return Some(ExitReason::TokenBudget {
            used: tally.usage.total,
            budget: limits.token_budget,
        });
    }
    if limits.max_tool_calls > 0 && tally.tool_calls > limits.max_tool_calls {
        return Some(ExitReason::ToolCallCap {
            calls: tally.tool_calls,
            cap: limits.max_tool_calls,
        });
    }
    None
}

/// How a run that nobody stopped ended.
fn exit_reason(status: Option<ExitStatus>, tally: &Tally, stderr_tail: &str) -> ExitReason {
    use std::os::unix::process::ExitStatusExt;
    let last_stderr = failure_line(stderr_tail).unwrap_or("");
    let Some(status) = status else {
        return ExitReason::Failed("the agent's exit status is unknown".into());
    };
    if !status.success() {
        let how = match (status.code(), status.signal()) {
            (Some(code), _) => format!("exited with status {code}"),
            (None, Some(sig)) => format!("was killed by signal {sig}"),
            _ => "failed".into(),
        };
        let detail = tally
            .error
            .clone()
            .or_else(|| (!last_stderr.is_empty()).then(|| last_stderr.to_string()));
        return ExitReason::Failed(match detail {
            Some(d) => format!("the agent {how}: {d}"),
            None => format!("the agent {how}"),
        });
    }
    match &tally.error {
        Some(e) => ExitReason::Failed(e.clone()),
        None => ExitReason::Completed,
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// Stop a running agent: SIGTERM to its group, SIGKILL to whatever is left after `grace`.
/// Returns the leader's exit status.
async fn terminate_group(pgid: i32, grace: Duration, child: &mut Child) -> Option<ExitStatus> {
    signal_group(pgid, libc::SIGTERM);
    let deadline = Instant::now() + grace;
    let status = tokio::time::timeout_at(deadline, child.wait()).await.ok();
    stop_survivors_until(pgid, deadline).await;
    match status {
        Some(Ok(s)) => Some(s),
        _ => child.wait().await.ok(),
    }
}

/// After the leader exited: SIGTERM the rest of its group, SIGKILL after `grace`.
async fn stop_survivors(pgid: i32, grace: Duration) {
    if process_group_alive(pgid) {
        signal_group(pgid, libc::SIGTERM);
        stop_survivors_until(pgid, Instant::now() + grace).await;
    }
}

async fn stop_survivors_until(pgid: i32, deadline: Instant) {
    while process_group_alive(pgid) {
        if Instant::now() >= deadline {
            signal_group(pgid, libc::SIGKILL);
            return;
        }
        tokio::time::sleep(GROUP_POLL).await;
    }
}

/// The stderr line that says what went wrong: the last line reading like an error, skipping stack
/// frames, hints, paths and log lines below warning level; else the last line that is not such noise;
/// else the last line. The whole tail stays in the run and the transcript.
pub fn failure_line(stderr: &str) -> Option<&str> {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let noise = |l: &str| {
        let lower = l.to_ascii_lowercase();
        NOISE_PREFIXES.iter().any(|p| lower.starts_with(p))
            || is_quiet_log_line(l)
            || l.chars().all(|c| !c.is_alphanumeric())
    };
    lines
        .iter()
        .rev()
        .find(|l| !noise(l) && reads_like_an_error(l))
        .or_else(|| lines.iter().rev().find(|l| !noise(l)))
        .or_else(|| lines.last())
        .copied()
}

/// Starts of stderr lines that are context rather than the problem: stack frames, paths, links,
/// hints (compared in lower case).
const NOISE_PREFIXES: [&str; 14] = [
    "at ",
    "/",
    "~/",
    "http://",
    "https://",
    "file://",
    "see ",
    "use ",
    "hint:",
    "help:",
    "note:",
    "for more information",
    "run with",
    "node.js v",
];

/// A log line at info/debug/trace level (`2026-… INFO target: …`, `[DEBUG] …`).
fn is_quiet_log_line(l: &str) -> bool {
    l.split_whitespace().take(3).any(|w| {
        matches!(
            w.trim_matches(|c| c == '[' || c == ']' || c == ':'),
            "INFO" | "DEBUG" | "TRACE"
        )
    })
}

fn reads_like_an_error(l: &str) -> bool {
    static PATTERN: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    PATTERN
        .get_or_init(|| {
            regex::Regex::new(
                r"(?i)\b(error|errors|failed|failure|fatal|panic|panicked|exception|cannot|can't|could not|couldn't|unable|not found|no such|denied|forbidden|unauthori[sz]ed|invalid|missing|refused|timed out|timeout|aborted|rejected|exceeded|not allowed|overloaded|rate limit|quota|unknown)\b|\bno\b.*\bfound\b|\b[45]\d\d\b",
            )
            .expect("valid pattern")
        })
        .is_match(l)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tally(tool_calls: u64, tokens: u64) -> Tally {
        let mut t = Tally {
            tool_calls,
            ..Tally::default()
        };
        t.usage.total = tokens;
        t
    }

    fn limits(cap: u64, budget: u64) -> Limits {
        Limits {
            max_tool_calls: cap,
            token_budget: budget,
            ..Limits::default()
        }
    }

    #[test]
    fn a_guarded_cap_waits_for_the_refusal_and_counts_what_ran() {
        let l = limits(3, 0);
        assert_eq!(limit_check(&tally(3, 0), &l, true), Check::Within);
        // The 4th call started: unguarded, stop now; guarded, the CLI is about to refuse it.
        let over = ExitReason::ToolCallCap { calls: 4, cap: 3 };
        assert_eq!(
            limit_check(&tally(4, 0), &l, false),
            Check::Stop(over.clone())
        );
        assert_eq!(limit_check(&tally(4, 0), &l, true), Check::AwaitRefusal);
        // Its refusal: the call is taken back, the stop names the call that was refused.
        let mut t = tally(4, 0);
        t.refused_tool();
        assert_eq!(t.tool_calls, 3);
        assert_eq!(limit_check(&t, &l, true), Check::Stop(over));
    }

    #[test]
    fn a_budget_stops_at_once_and_a_refusal_over_it_names_the_budget() {
        let l = limits(10, 1000);
        let over = ExitReason::TokenBudget {
            used: 1230,
            budget: 1000,
        };
        assert_eq!(
            limit_check(&tally(2, 1230), &l, true),
            Check::Stop(over.clone())
        );
        let mut t = tally(3, 1230);
        t.refused_tool();
        assert_eq!(refusal_stop(&t, &l), Some(over));
        assert_eq!(refusal_stop(&tally(3, 1230), &l), None, "no refusal seen");
    }

    #[test]
    fn the_clis_own_cost_is_kept_and_a_missing_one_priced() {
        let mut run = AgentRun {
            role: "developer".into(),
            backend: "claude".into(),
            final_text: String::new(),
            tool_calls: 0,
            usage: Usage {
                input: 1_000_000,
                output: 100_000,
                ..Usage::default()
            }
            .with_computed_total(),
            duration: Duration::ZERO,
            model: Some("claude-sonnet-4-5-20250929".into()),
            exit: ExitReason::Completed,
            stderr_tail: String::new(),
            transcript: None,
            keep_partial: false,
        };
        let prices = Prices::default();
        let mut reported = run.clone();
        reported.usage.cost_usd = 0.5;
        price_if_unreported(&mut reported, &prices);
        assert_eq!(reported.usage.cost_usd, 0.5, "the CLI's figure wins");
        assert!(!reported.usage.cost_estimated);
        price_if_unreported(&mut run, &prices);
        assert!((run.usage.cost_usd - 4.5).abs() < 1e-9, "{:?}", run.usage);
        assert!(run.usage.cost_estimated);
        assert!(run.summary().contains("cost ~$4.5000"), "{}", run.summary());
        let mut unknown = run.clone();
        unknown.usage.cost_usd = 0.0;
        unknown.usage.cost_estimated = false;
        unknown.model = Some("some-local-model".into());
        price_if_unreported(&mut unknown, &prices);
        assert_eq!(
            unknown.usage.cost_usd, 0.0,
            "an unknown model stays unpriced"
        );
    }
}
