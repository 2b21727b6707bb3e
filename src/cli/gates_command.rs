//! `supervisor gates`: the quality gates on any checkout, as the pipeline runs them before the audit.

use std::path::Path;
use std::time::Duration;

use crate::agent::Sandbox;
use crate::config::{GateKind, GateSettings, Hook, SETTINGS_PATHS, Workflow};
use crate::gates::{
    ChangeSet, CiContext, GateContext, GateError, GateReport, GateSession, NoCiConnection, ToolEnv,
    Verdict, default_hook, run_gates_reporting, verdict, worktree_root,
};
use crate::pipeline::{Project, process_env};
use crate::report;
use crate::workspace::Shutdown;

use super::output::{err, errln, out, outln};
use super::{EXIT_GITHUB as EXIT_RESUMABLE, EXIT_OK, EXIT_STOPPED, EXIT_USAGE};

/// What the repository's configuration says about its gates.
struct GatePlan {
    hooks: Vec<Hook>,
    /// Stage whose hooks these are.
    stage: Option<String>,
    base: String,
    settings: GateSettings,
    ci_timeout_sec: u64,
    /// What gate tools see: the agents' environment allowlist.
    env: ToolEnv,
    /// Where gate tools run: the agents' sandbox (`agentSandbox`), if any.
    sandbox: Option<Sandbox>,
}

/// The hooks of the first stage that has any (experimental ones only when enabled), leaving out the
/// oracle's: they prove a run's designated tests, which only a run's test designer names.
fn stage_hooks(workflow: &Workflow, experimental: bool) -> (Vec<Hook>, Option<String>) {
    use crate::config::GateKind as K;
    for stage in &workflow.stages {
        let hooks: Vec<Hook> = stage
            .hooks
            .iter()
            .filter(|h| experimental || !h.experimental)
            .filter(|h| !matches!(h.gate, K::Red | K::Green | K::Frozen | K::Contract))
            .cloned()
            .collect();
        if !hooks.is_empty() {
            return (hooks, Some(stage.status.clone()));
        }
    }
    (Vec::new(), None)
}

fn plan(root: &Path) -> Result<GatePlan, u8> {
    if !SETTINGS_PATHS.iter().any(|p| root.join(p).is_file()) {
        let (hooks, stage) = stage_hooks(&Workflow::builtin(&Default::default()), false);
        return Ok(GatePlan {
            hooks,
            stage,
            base: "main".into(),
            settings: GateSettings::default(),
            ci_timeout_sec: 300,
            env: ToolEnv::base(),
            sandbox: None,
        });
    }
    match Project::load(root, &process_env) {
        Ok(project) => {
            let (hooks, stage) = stage_hooks(
                &project.workflow,
                project.settings.enable_experimental_features,
            );
            Ok(GatePlan {
                hooks,
                stage,
                base: project.settings.default_branch.clone(),
                settings: project.settings.gates.clone(),
                ci_timeout_sec: project.settings.ci_gating_timeout_sec,
                env: ToolEnv::for_settings(&project.settings, None),
                sandbox: Sandbox::from_settings(&project.settings),
            })
        }
        Err(e) => {
            err!("{}", report::errors_text(&e, false));
            Err(EXIT_USAGE)
        }
    }
}

/// Keep the hooks `only` names (hook names or gate kinds); a kind the workflow lacks runs with
/// default options.
fn select(hooks: Vec<Hook>, only: &[String]) -> Result<Vec<Hook>, String> {
    if only.is_empty() {
        return Ok(hooks);
    }
    let mut selected: Vec<Hook> = Vec::new();
    for name in only.iter().map(|n| n.trim()).filter(|n| !n.is_empty()) {
        let kind = GateKind::parse(name);
        let matching: Vec<&Hook> = hooks
            .iter()
            .filter(|h| h.name == name || Some(h.gate) == kind)
            .collect();
        if !matching.is_empty() {
            for h in matching {
                if !selected.iter().any(|s| s.name == h.name) {
                    selected.push(h.clone());
                }
            }
        } else if let Some(kind) = kind.filter(|k| *k != GateKind::Command) {
            selected.push(default_hook(kind));
        } else {
            let known: Vec<&str> = GateKind::ALL
                .iter()
                .filter(|k| **k != GateKind::Command)
                .map(|k| k.name())
                .chain(hooks.iter().map(|h| h.name.as_str()))
                .collect();
            return Err(format!(
                "--only: `{name}` is neither a gate nor a hook of this workflow (known: {})",
                known.join(", ")
            ));
        }
    }
    Ok(selected)
}

pub(super) fn gates_command(dir: &Path, base: Option<String>, only: &[String], json: bool) -> u8 {
    let root = match worktree_root(dir) {
        Ok(r) => r,
        Err(
            e @ (GateError::Missing { .. }
            | GateError::NotADirectory { .. }
            | GateError::NotARepository { .. }
            | GateError::Bare { .. }),
        ) => {
            errln!(
                "supervisor gates: {e}: run it inside a git checkout, or pass --in DIR with the checkout's directory"
            );
            return EXIT_USAGE;
        }
        Err(e) => {
            errln!("supervisor gates: {e}");
            return EXIT_USAGE;
        }
    };
    let plan = match plan(&root) {
        Ok(p) => p,
        Err(code) => return code,
    };
    let hooks = match select(plan.hooks, only) {
        Ok(h) => h,
        Err(e) => {
            errln!("supervisor gates: {e}");
            return EXIT_USAGE;
        }
    };
    let base = base.unwrap_or(plan.base);
    let changes = match ChangeSet::compute(&root, &base) {
        Ok(c) => c,
        Err(e) => {
            errln!("supervisor gates: {e}");
            return EXIT_USAGE;
        }
    };
    // No GitHub connection here: the CI gate says so (or is disabled by configuration).
    let ci = (plan.ci_timeout_sec == 0).then(|| CiContext {
        head_sha: String::new(),
        timeout: Duration::ZERO,
        interval: Duration::from_secs(plan.settings.ci_poll_interval_sec.max(1)),
        source: std::sync::Arc::new(NoCiConnection("no GitHub connection".into())),
    });
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            errln!("supervisor gates: cannot start the async runtime: {e}");
            return EXIT_STOPPED;
        }
    };
    // SIGINT/SIGTERM stop the gates: their tools' process groups are killed, the round is not a
    // verdict (a second signal exits at once).
    let shutdown = match runtime.block_on(async { Shutdown::install() }) {
        Ok(s) => s,
        Err(e) => {
            errln!("supervisor gates: cannot install signal handlers: {e}");
            return EXIT_STOPPED;
        }
    };
    let state_dir = root.join(".supervisor/gates");
    let session = GateSession::for_checkout(&root, &state_dir, plan.env)
        .with_sandbox(plan.sandbox)
        .with_cancel(shutdown.token());
    let ctx = GateContext {
        state_dir,
        dir: root.clone(),
        changes,
        issue: None,
        settings: plan.settings,
        ci,
        search_path: None,
        session,
        proof: None,
    };
    if !json {
        errln!(
            "gates{} on {} against {} ({} changed file{}, {} commit{}):",
            plan.stage
                .as_deref()
                .map(|s| format!(" of {s}"))
                .unwrap_or_default(),
            root.display(),
            base,
            ctx.changes.files.len(),
            if ctx.changes.files.len() == 1 {
                ""
            } else {
                "s"
            },
            ctx.changes.commits.len(),
            if ctx.changes.commits.len() == 1 {
                ""
            } else {
                "s"
            },
        );
    }
    // Each gate as it finishes, as `supervisor run` shows it; the full report follows.
    let colour = report::colour_on_stderr();
    let tell = |_: usize, r: &GateReport| {
        if !json {
            errln!("{}", report::gate_finished_line(r, colour));
        }
    };
    let reports = runtime.block_on(async {
        let reports = run_gates_reporting(&hooks, &ctx, tell).await;
        ctx.session.shutdown().await;
        reports
    });
    if shutdown.requested() {
        errln!("supervisor gates: stopped before the gates finished; no verdict");
        return EXIT_RESUMABLE;
    }
    let v = verdict(&reports);
    if json {
        let doc = serde_json::json!({
            "dir": root,
            "base": base,
            "mergeBase": ctx.changes.merge_base,
            "changedFiles": ctx.changes.files.len(),
            "verdict": v,
            "reports": reports,
        });
        outln!(
            "{}",
            serde_json::to_string_pretty(&doc)
                .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
        );
    } else {
        out!("{}", report::gate_reports_text(&reports));
    }
    if v == Verdict::Blocked {
        EXIT_STOPPED
    } else {
        EXIT_OK
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hooks() -> Vec<Hook> {
        let mut tests = default_hook(GateKind::Command);
        tests.name = "unit tests".into();
        tests.run = Some("cargo test".into());
        vec![
            default_hook(GateKind::Tsc),
            default_hook(GateKind::Lsp),
            tests,
        ]
    }

    #[test]
    fn only_selects_by_kind_name_or_alias() {
        let names = |h: Vec<Hook>| h.into_iter().map(|h| h.name).collect::<Vec<_>>();
        assert_eq!(
            names(select(hooks(), &["lsp".into(), "typescript".into()]).unwrap()),
            vec!["lsp", "tsc"]
        );
        assert_eq!(
            names(select(hooks(), &["unit tests".into(), "command".into()]).unwrap()),
            vec!["unit tests"]
        );
        // A gate the workflow lacks runs with its defaults.
        assert_eq!(
            names(select(hooks(), &["knip".into()]).unwrap()),
            vec!["dead-code"]
        );
        let err = select(hooks(), &["lint".into()]).unwrap_err();
        assert!(err.contains("`lint` is neither a gate nor a hook"), "{err}");
        assert_eq!(select(hooks(), &[]).unwrap().len(), 3);
    }
}
