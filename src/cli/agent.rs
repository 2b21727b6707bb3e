//! `supervisor agent <role>`: one role agent, once, exactly as the pipeline runs it (same prompt
//! assembly, environment allowlist, budgets and signal handling), optionally in a throwaway worktree.

use std::path::{Path, PathBuf};

use crate::agent::{
    AgentRequest, AgentRun, EPIC_ROLES, ExitReason, RoleSet, parse_outcome, run_agent,
};
use crate::config::{SETTINGS_PATHS, Settings};
use crate::epic::{Verdict, read_plan, read_verdict};
use crate::pipeline::{Project, process_env};
use crate::report;
use crate::workspace::{
    PushAuth, Shutdown, WorkspaceConfig, cleanup, ensure_worktree_staged, setup_staged,
};

use super::number::{ATTEMPT, number};
use super::output::{err, errln, outln};
use super::{EXIT_OK, EXIT_STOPPED, EXIT_USAGE};

/// The arguments of `supervisor agent`.
#[derive(Debug, clap::Args)]
pub struct AgentCommand {
    /// The role agent to run (researcher, architect, test-designer, developer, auditor, planner,
    /// reviewer, ...).
    pub role: String,
    /// The directory to run in: the repository whose settings and agents are used.
    #[arg(long = "in", value_name = "DIR", default_value = ".")]
    pub dir: PathBuf,
    /// The task given to the agent.
    #[arg(
        long,
        required_unless_present = "task_file",
        conflicts_with = "task_file"
    )]
    pub task: Option<String>,
    /// A file holding the task (for tasks longer than an argument may be).
    #[arg(long, value_name = "FILE")]
    pub task_file: Option<PathBuf>,
    /// Backend to use instead of the role's (pi, claude, codex, scripted or a key of `backends`).
    #[arg(long)]
    pub backend: Option<String>,
    /// Run in a fresh worktree for this issue number, created and set up as the pipeline does,
    /// and removed afterwards.
    #[arg(long, value_name = "ISSUE", value_parser = number::<u64>("an issue number"))]
    pub worktree: Option<u64>,
    /// Keep the --worktree after the run.
    #[arg(long, requires = "worktree")]
    pub keep: bool,
    /// Which dispatch of the role this is (the scripted backend plays that attempt).
    #[arg(long, default_value_t = 1, value_parser = number::<u32>(ATTEMPT))]
    pub attempt: u32,
    /// Print the run as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Settings used when the directory has none: defaults, with `SUPERVISOR_*` overrides applied.
const FALLBACK_SETTINGS: &str = r#"{ "supervisor": { "repo": "local/agent-trial", "projectNumber": 1, "codeowners": ["local"] } }"#;

pub(super) fn run(cmd: AgentCommand) -> u8 {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            errln!("supervisor agent: cannot start the async runtime: {e}");
            return EXIT_STOPPED;
        }
    };
    rt.block_on(run_async(cmd))
}

/// The repository's configuration, or defaults with the built-in roles when it has no settings.
fn load_project(dir: &Path, json: bool) -> Result<Project, u8> {
    let has_settings = SETTINGS_PATHS.iter().any(|p| dir.join(p).is_file());
    let loaded = if has_settings {
        Project::load(dir, &process_env)
    } else {
        errln!(
            "supervisor agent: no settings in {}: using the defaults (agentBackend pi unless SUPERVISOR_AGENT_BACKEND is set) and the built-in roles",
            dir.display()
        );
        Settings::from_text(
            &dir.join(SETTINGS_PATHS[0]),
            FALLBACK_SETTINGS,
            &process_env,
        )
        .and_then(|l| Project::from_settings(dir, l.settings))
    };
    loaded.map_err(|e| {
        if json {
            outln!("{}", report::errors_text(&e, true));
        } else {
            err!("{}", report::errors_text(&e, false));
        }
        EXIT_USAGE
    })
}

async fn run_async(cmd: AgentCommand) -> u8 {
    let dir =
        match super::paths::existing_dir("--in", &cmd.dir, "the repository the agent works in") {
            Ok(d) => d,
            Err(e) => {
                errln!("supervisor agent: {e}");
                return EXIT_USAGE;
            }
        };
    let task = match (&cmd.task, &cmd.task_file) {
        (Some(t), _) => t.clone(),
        (None, Some(f)) => match std::fs::read_to_string(f) {
            Ok(t) => t,
            Err(e) => {
                errln!(
                    "supervisor agent: --task-file {}: cannot be read: {}; give a readable file, or the task itself with --task",
                    f.display(),
                    crate::config::io_reason(&e)
                );
                return EXIT_USAGE;
            }
        },
        (None, None) => {
            errln!("supervisor agent: give the task with --task or --task-file");
            return EXIT_USAGE;
        }
    };
    let project = match load_project(&dir, cmd.json) {
        Ok(p) => p,
        Err(code) => return code,
    };
    let role = match project.roles.get(&cmd.role) {
        Some(role) => role.clone(),
        // The epic's roles, which no stage names: the repository's override, else built in.
        None if EPIC_ROLES.contains(&cmd.role.as_str()) => {
            let loaded =
                RoleSet::load_epic(&project.root, &project.settings, &project.settings_path);
            match loaded.map(|mut epic| epic.agents.remove(&cmd.role)) {
                Ok(Some(role)) => role,
                Ok(None) => {
                    errln!(
                        "supervisor agent: the epic role `{}` did not load",
                        cmd.role
                    );
                    return EXIT_USAGE;
                }
                Err(e) => {
                    errln!("supervisor agent: {e}");
                    return EXIT_USAGE;
                }
            }
        }
        None => {
            let known: Vec<&str> = (project.roles.agents.keys().map(String::as_str))
                .chain(EPIC_ROLES)
                .collect();
            errln!(
                "supervisor agent: no role agent `{}` in this workflow; known roles: {}",
                cmd.role,
                known.join(", ")
            );
            return EXIT_USAGE;
        }
    };
    let shutdown = match Shutdown::install() {
        Ok(s) => s,
        Err(e) => {
            errln!("supervisor agent: cannot install signal handlers: {e}");
            return EXIT_STOPPED;
        }
    };

    let mut workspace = None;
    let cwd = match cmd.worktree {
        None => dir.clone(),
        Some(issue) => {
            let cfg = WorkspaceConfig::from_settings(&project.root, &project.settings);
            let made =
                ensure_worktree_staged(&cfg, issue, &PushAuth::None, &shutdown.token()).await;
            let (wt, staged) = match made {
                Ok(made) => made,
                Err(e) => {
                    errln!("supervisor agent: worktree: {e}");
                    return EXIT_USAGE;
                }
            };
            errln!(
                "supervisor agent: worktree {} on {} ({:?})",
                wt.path.display(),
                wt.branch,
                wt.origin
            );
            for w in setup_staged(&cfg, &wt, staged, &shutdown.token())
                .await
                .warnings
            {
                errln!("supervisor agent: warning: {w}");
            }
            let path = wt.path.clone();
            workspace = Some((cfg, wt));
            path
        }
    };

    let token = crate::pipeline::process_env("GITHUB_TOKEN")
        .or_else(|| crate::pipeline::process_env("GH_TOKEN"));
    let code = match AgentRequest::for_role(
        &project.settings,
        &project.root,
        &role,
        task,
        cwd,
        cmd.backend.as_deref(),
        token.as_deref(),
    ) {
        Err(e) => {
            errln!("supervisor agent: {e}");
            EXIT_USAGE
        }
        Ok(mut req) => {
            req.attempt = cmd.attempt.max(1);
            req.transcript = Some(transcript_path(&project.root, &role.name));
            let run = run_agent(req, shutdown.token()).await;
            print_run(&project, &run, cmd.json);
            if run.exit == ExitReason::Interrupted || run.succeeded() {
                EXIT_OK
            } else {
                EXIT_STOPPED
            }
        }
    };

    if let Some((cfg, wt)) = workspace {
        if cmd.keep && !shutdown.requested() {
            errln!("supervisor agent: worktree kept at {}", wt.path.display());
        } else if let Err(e) = cleanup(&cfg, &wt) {
            errln!("supervisor agent: cleaning the worktree failed: {e}");
            return EXIT_STOPPED;
        }
    }
    code
}

fn transcript_path(root: &Path, role: &str) -> PathBuf {
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%S");
    root.join(crate::workspace::CHECKPOINT_DIR)
        .join("agent")
        .join(format!("{role}-{stamp}-{}.jsonl", std::process::id()))
}

/// The planner's plan or the reviewer's verdict in `text`, read as an epic reads them.
fn epic_answer(project: &Project, role: &str, text: &str) -> Option<String> {
    let answer = match role {
        "planner" => match read_plan(text, project.settings.epic.max_tasks) {
            Ok(plan) => {
                let ids: Vec<&str> = plan.tasks().iter().map(|t| t.id.as_str()).collect();
                format!("plan: {} task(s): {}", ids.len(), ids.join(", "))
            }
            Err(errors) => {
                let errors: Vec<String> = errors.iter().map(ToString::to_string).collect();
                format!("plan refused: {}", errors.join("; "))
            }
        },
        "reviewer" => match read_verdict(text) {
            Ok(Verdict::Accepted) => "verdict: accepted".to_string(),
            Ok(Verdict::NeedsRevision { feedback }) => {
                format!("verdict: needs-revision: {feedback}")
            }
            Ok(Verdict::Escalate { reason }) => format!("verdict: escalate: {reason}"),
            Ok(Verdict::Replan { reason }) => format!("verdict: replan: {reason}"),
            Err(e) => format!("verdict refused: {e}"),
        },
        _ => return None,
    };
    Some(answer)
}

fn print_run(project: &Project, run: &AgentRun, json: bool) {
    if json {
        match serde_json::to_string_pretty(run) {
            Ok(text) => outln!("{text}"),
            Err(e) => errln!("supervisor agent: cannot print the run as JSON: {e}"),
        }
    }
    err!("{}", run.summary());
    let stage = project
        .workflow
        .stages
        .iter()
        .find(|s| s.agent.as_deref() == Some(run.role.as_str()));
    if let Some(stage) = stage {
        match parse_outcome(&run.final_text, stage) {
            Ok(o) => errln!(
                "  output protocol: {} via {:?}{}",
                o.action,
                o.evidence,
                o.target_status
                    .map(|t| format!(" → {t}"))
                    .unwrap_or_default()
            ),
            Err(e) => errln!("  output protocol: {e}"),
        }
    } else if let Some(answer) = epic_answer(project, &run.role, &run.final_text) {
        errln!("  {answer}");
    }
    if !json && !run.final_text.is_empty() {
        errln!("--- final text ---\n{}", run.final_text.trim_end());
    }
}
