//! Command gate: a shell command declared in the workflow (`cargo test`, `pytest`, a build oracle),
//! judged by `expect` — `pass` (exit 0), `fail` (non-zero) or `contains:TEXT` — with a timeout and the
//! tail of its output kept for the developer.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::LazyLock;
use std::time::Duration;

use regex::Regex;

use super::tool::{self, tail_lines};
use super::{Finding, FindingSeverity, FnGate, GateContext, GateOutcome, GateStatus};
use crate::config::{Expect, GateKind, Hook};

/// Output lines kept in the report.
const TAIL_LINES: usize = 30;
/// `file:line` locations lifted from the output at most.
const MAX_LOCATIONS: usize = 20;

pub(crate) static GATE: FnGate = FnGate {
    kind: GateKind::Command,
    run: |hook, ctx| Box::pin(run(hook, ctx)),
};

async fn run(hook: &Hook, ctx: &GateContext) -> GateOutcome {
    let Some(script) = hook.run.as_deref().filter(|s| !s.trim().is_empty()) else {
        return GateOutcome::not_run(format!(
            "command gate `{}` has no \"run\" command",
            hook.name
        ));
    };
    let timeout = hook
        .timeout_sec
        .map(|s| Duration::from_secs(s.max(1)))
        .unwrap_or_else(|| tool::tool_timeout(ctx));
    // An absolute shell, the agents' environment allowlist (never a token) and a PATH without
    // entries inside the checkout; in the agents' sandbox when there is one. The checkout stays
    // writable there: builds and test runs write into it (target/, caches, coverage), and the code
    // they run is the agent's, which could already write it.
    let launcher = tool::Launcher::of(ctx);
    if let Err(reason) = launcher.ready(&ctx.session, &ctx.dir).await {
        return GateOutcome::not_run(reason);
    }
    let reach = tool::Reach {
        tree_writable: true,
        ..tool::Reach::default()
    };
    let cmd = match launcher.command(Path::new("/bin/sh"), ["-c", script], &ctx.dir, &reach) {
        Ok(cmd) => cmd,
        Err(reason) => return GateOutcome::not_run(reason),
    };
    let out = match tool::run_captured(cmd, timeout, ctx.session.cancel()).await {
        Ok(out) => out,
        Err(e) => return GateOutcome::not_run(e.reason(&format!("`{script}`"))),
    };
    // bwrap that fails to set up (out of namespaces, a mount refused) exits 1 with its own
    // complaint: not the command's answer, whatever `expect` says.
    if launcher.is_confined() && out.status.code() == Some(1) {
        if let Some(complaint) = out
            .stderr
            .lines()
            .next()
            .filter(|l| l.starts_with("bwrap: "))
        {
            return GateOutcome::not_run(format!(
                "`{script}` did not run: its sandbox could not be set up ({})",
                complaint.trim()
            ));
        }
    }
    let output = format!("{}{}", out.stdout, out.stderr);
    let tail = tail_lines(&output, TAIL_LINES);
    let code = out.status.code();
    let status_text = out.status_text();
    let secs = out.duration.as_secs_f64();

    let (ok, expectation) = match &hook.expect {
        // A process killed by a signal did not give the answer asked for, whatever was expected.
        _ if code.is_none() => (false, "a normal exit".to_string()),
        Expect::Pass => (code == Some(0), "exit status 0".to_string()),
        Expect::Fail => (code != Some(0), "a non-zero exit status".to_string()),
        Expect::Contains(text) => (
            output.contains(text.as_str()),
            format!("output containing “{text}”"),
        ),
    };
    if ok {
        return GateOutcome::pass(format!(
            "`{script}` ended with {status_text} after {secs:.1} s, as expected ({expectation})"
        ));
    }
    let mut findings = vec![Finding {
        file: None,
        line: None,
        rule: "command".into(),
        message: format!(
            "`{script}` ended with {status_text}; expected {expectation}. Last output:\n{tail}"
        ),
        severity: FindingSeverity::Error,
    }];
    findings.extend(locations(&output, ctx));
    GateOutcome::new(
        GateStatus::Fail,
        findings,
        format!("`{script}` ended with {status_text} after {secs:.1} s; expected {expectation}"),
    )
}

static LOCATION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:^|[\s(\[`'])(?:\./)?([\w@.\-/]+\.[A-Za-z0-9]{1,6}):(\d+)(?::\d+)?")
        .expect("valid")
});

/// `path:line` mentions of files that exist in the worktree, as findings (compiler and test-runner
/// output names the places to fix).
fn locations(output: &str, ctx: &GateContext) -> Vec<Finding> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for line in output.lines() {
        for c in LOCATION.captures_iter(line) {
            let path = c[1].trim_start_matches("./").to_string();
            let Ok(n) = c[2].parse::<u32>() else { continue };
            if path.starts_with('/') || path.contains("..") || !ctx.dir.join(&path).is_file() {
                continue;
            }
            if !seen.insert((path.clone(), n)) {
                continue;
            }
            out.push(Finding {
                file: Some(path),
                line: Some(n),
                rule: "command-output".into(),
                message: tool::truncate_chars(line.trim(), 300),
                severity: FindingSeverity::Error,
            });
            if out.len() >= MAX_LOCATIONS {
                return out;
            }
        }
    }
    out
}
