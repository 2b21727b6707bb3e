//! What `supervisor check` prints.

use std::fmt::Write;

use serde_json::json;

use crate::agent::Preflight;
use crate::config::{BuiltIn, ConfigError, ConfigIssue};
use crate::pipeline::Project;

fn unlimited(n: u64) -> String {
    if n == 0 {
        "unlimited".into()
    } else {
        n.to_string()
    }
}

/// `60 min (developer 30 min, researcher none)`.
fn timeouts(s: &crate::config::Settings) -> String {
    let minutes = |m: f64| {
        if m > 0.0 {
            format!("{m} min")
        } else {
            "none".to_string()
        }
    };
    let mut text = minutes(s.agent_timeout_min);
    if !s.agent_timeouts_min.is_empty() {
        let each: Vec<String> = (s.agent_timeouts_min.iter())
            .map(|(agent, m)| format!("{agent} {}", minutes(*m)))
            .collect();
        text.push_str(&format!(" ({})", each.join(", ")));
    }
    text
}

/// A human summary of a loaded project and of its agent CLIs.
pub fn check_text(p: &Project, pf: &Preflight) -> String {
    let s = &p.settings;
    let mut out = String::new();
    let _ = writeln!(out, "settings   {}", p.settings_path.display());
    let rows = [
        ("repo", s.repo.to_string()),
        (
            "board",
            format!(
                "project #{} of {}, column field \"{}\"",
                s.project_number,
                s.board_owner(),
                s.status_field
            ),
        ),
        ("codeowners", s.codeowners.join(", ")),
        (
            "branches",
            format!(
                "from {}; worktree branches {}<issue>",
                s.default_branch, s.branch_prefix
            ),
        ),
        (
            "audit",
            format!(
                "score threshold {}, max rejections {}",
                s.audit_score_threshold, s.max_rejections
            ),
        ),
        (
            "ci gate",
            if s.ci_gating_timeout_sec == 0 {
                "skipped (ciGatingTimeoutSec 0)".into()
            } else {
                format!(
                    "poll every {}s for up to {}s",
                    s.gates.ci_poll_interval_sec, s.ci_gating_timeout_sec
                )
            },
        ),
        (
            "agents",
            format!(
                "backend {}; token budget {}; tool calls {}; timeout {}; stalled after {}",
                s.agent_backend,
                unlimited(s.agent_token_budget),
                unlimited(s.max_tool_calls),
                timeouts(s),
                match s.agent_stall_sec {
                    0 => "never (agentStallSec 0)".to_string(),
                    n => format!("{n} s without output"),
                }
            ),
        ),
    ];
    for (k, v) in rows {
        let _ = writeln!(out, "  {k:<12} {v}");
    }
    if !p.overridden.is_empty() {
        let _ = writeln!(out, "  {:<12} {}", "from env", p.overridden.join(", "));
    }
    let names = |set: Option<bool>| {
        let list: Vec<&str> = pf
            .agent_env
            .iter()
            .filter(|(_, s)| set.is_none_or(|want| *s == want))
            .map(|(n, _)| n.as_str())
            .collect();
        if list.is_empty() {
            "none".to_string()
        } else {
            list.join(", ")
        }
    };
    let _ = writeln!(
        out,
        "  {:<12} {} (set now: {}; not set: {})",
        "agent env",
        names(None),
        names(Some(true)),
        names(Some(false))
    );

    let _ = writeln!(out, "workflow   {}", p.workflow.source);
    let width = p
        .workflow
        .stages
        .iter()
        .map(|st| st.status.len())
        .max()
        .unwrap_or(0);
    for st in &p.workflow.stages {
        let mut line = format!("  {:<width$}  ", st.status);
        match st.built_in {
            Some(BuiltIn::Backlog) => {
                let _ = write!(
                    line,
                    "(built-in) → {}",
                    st.forward.as_deref().unwrap_or("?")
                );
            }
            Some(BuiltIn::Done) => line.push_str("(built-in, final)"),
            None => {
                let _ = write!(
                    line,
                    "{}{} → {}",
                    st.agent.as_deref().unwrap_or("?"),
                    if st.review {
                        " (review)"
                    } else if st.commits {
                        " (commits)"
                    } else {
                        ""
                    },
                    st.forward.as_deref().unwrap_or("?")
                );
                if !st.can_loop_back_to.is_empty() {
                    let _ = write!(line, "; may go back to {}", st.can_loop_back_to.join(", "));
                }
                if st.review {
                    let _ = write!(
                        line,
                        "; max rejections {}",
                        st.max_rejections.unwrap_or(s.max_rejections)
                    );
                }
                if let Some(h) = &st.skip_when_heading {
                    let _ = write!(line, "; skipped when \"## {h}\" exists");
                }
                if st.experimental {
                    line.push_str("; experimental");
                }
            }
        }
        let _ = writeln!(out, "{line}");
        if !st.marker_map.is_empty() {
            let markers = st
                .marker_map
                .iter()
                .map(|(m, t)| format!("{m} → {t}"))
                .collect::<Vec<_>>()
                .join(", ");
            let _ = writeln!(out, "  {:<width$}    markers: {markers}", "");
        }
        if !st.hooks.is_empty() {
            let hooks = st
                .hooks
                .iter()
                .map(|h| {
                    let mut n = h.name.clone();
                    if h.required {
                        n.push_str(" (required)");
                    }
                    n
                })
                .collect::<Vec<_>>()
                .join(", ");
            let _ = writeln!(out, "  {:<width$}    gates before leaving: {hooks}", "");
        }
    }

    let _ = writeln!(out, "agents");
    for (name, a) in &p.roles.agents {
        let _ = writeln!(
            out,
            "  {name:<14} {}; backend {}; model {}; thinking {}; tools {}",
            a.source,
            a.backend_name(s),
            a.model.as_deref().unwrap_or("(backend default)"),
            a.thinking.as_deref().unwrap_or("(default)"),
            if a.tools.is_empty() {
                "(default)".to_string()
            } else {
                a.tools.join(", ")
            },
        );
    }
    let _ = writeln!(out, "agent CLIs (on the agents' PATH)");
    for b in &pf.backends {
        let status = match (&b.state, &b.path) {
            (Err(problem), _) => format!("NOT READY: {problem}"),
            (Ok(Some(v)), Some(path)) => format!("{v} at {}", path.display()),
            (Ok(None), Some(path)) => format!("at {}", path.display()),
            (Ok(v), None) => v.clone().unwrap_or_else(|| "ready".into()),
        };
        let _ = writeln!(
            out,
            "  {:<14} {status} (roles: {})",
            b.name,
            b.roles.join(", ")
        );
    }
    let sandbox = match &pf.sandbox {
        None => {
            "none: agents run as supervisor's user (agentSandbox \"bwrap\" confines them)".into()
        }
        Some(b) => match (&b.state, &b.path) {
            (Err(problem), _) => format!("NOT READY: {problem}"),
            (Ok(v), path) => format!(
                "{} at {}: own PID and mount namespaces, only the worktree writable, HOME hidden",
                v.as_deref().unwrap_or("bwrap"),
                path.as_deref()
                    .unwrap_or(std::path::Path::new("?"))
                    .display()
            ),
        },
    };
    let _ = writeln!(out, "agent sandbox  {sandbox}");
    let count = p.warnings.len() + pf.warnings.len();
    if count > 0 {
        let _ = writeln!(out, "warnings");
        for w in &p.warnings {
            let _ = writeln!(out, "  {w}");
        }
        for w in &pf.warnings {
            let _ = writeln!(out, "  {w}");
        }
    }
    let plural = if count == 1 { "" } else { "s" };
    if pf.ok() {
        let _ = writeln!(out, "ok: configuration is valid ({count} warning{plural})");
    } else {
        let problems = pf.problems();
        let _ = writeln!(
            out,
            "error: configuration is valid ({count} warning{plural}), but agents cannot run ({} problem{}):",
            problems.len(),
            if problems.len() == 1 { "" } else { "s" }
        );
        for problem in problems {
            let _ = writeln!(out, "  {problem}");
        }
    }
    out
}

fn issue_json(i: &ConfigIssue) -> serde_json::Value {
    json!({
        "file": i.file.display().to_string(),
        "line": i.line,
        "column": i.column,
        "field": i.field,
        "problem": i.problem,
        "fix": i.fix,
    })
}

/// Machine-readable form of a loaded project and of its agent CLIs.
pub fn check_json(p: &Project, pf: &Preflight) -> serde_json::Value {
    json!({
        "ok": pf.ok(),
        "backends": pf.backends.iter().map(|b| b.to_json()).collect::<Vec<_>>(),
        "sandbox": pf.sandbox.as_ref().map(|b| b.to_json()),
        "agentEnv": {
            "names": pf.agent_env.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            "set": pf.agent_env.iter().filter(|(_, s)| *s).map(|(n, _)| n).collect::<Vec<_>>(),
        },
        "modelWarnings": pf.warnings,
        "settingsFile": p.settings_path.display().to_string(),
        "settings": p.settings,
        "workflow": p.workflow,
        "agents": p.roles.agents,
        "warnings": p.warnings.iter().map(issue_json).collect::<Vec<_>>(),
        "overriddenFromEnv": p.overridden,
    })
}

/// Machine- and human-readable forms of configuration errors.
pub fn errors_text(e: &ConfigError, json: bool) -> String {
    if json {
        json!({
            "ok": false,
            "errors": e.issues.iter().map(issue_json).collect::<Vec<_>>(),
            "warnings": e.warnings.iter().map(issue_json).collect::<Vec<_>>(),
        })
        .to_string()
    } else {
        e.to_string()
    }
}
