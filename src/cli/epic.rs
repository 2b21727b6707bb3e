//! `supervisor epic <issue>`: plan an epic — its planner's tasks as sealed sub-issues of it on the
//! board, blocked by the tasks they depend on, and the plan posted on it.

use std::path::PathBuf;

use clap::Args;

use super::number::number;
use super::output::{err, errln, outln};
use super::run::{canonical, connect, requester_refusal, runtime};
use super::{EXIT_GITHUB, EXIT_OK, EXIT_STOPPED, EXIT_USAGE};
use crate::pipeline::{Project, RunError, process_env};
use crate::report;
use crate::runtime::{Planned, ProgressMode, Services, plan_epic};
use crate::workspace::{PushAuth, Shutdown};

#[derive(Debug, Args)]
pub struct EpicArgs {
    /// The epic's issue number.
    #[arg(value_parser = number::<u64>("an issue number"))]
    pub issue: u64,
    /// Repository root (default: the current directory).
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub repo_root: PathBuf,
    /// Print the outcome as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Refuse unless LOGIN is a codeowner: the person who asked for it (a commenter, the actor of
    /// a workflow).
    #[arg(long, value_name = "LOGIN")]
    pub requested_by: Option<String>,
}

pub(super) fn run(args: EpicArgs) -> u8 {
    match runtime("epic") {
        Ok(rt) => rt.block_on(run_async(args)),
        Err(code) => code,
    }
}

async fn run_async(args: EpicArgs) -> u8 {
    let root = canonical(&args.repo_root);
    let project = match Project::load(&root, &process_env) {
        Ok(p) => p,
        Err(e) => {
            err!("{}", report::errors_text(&e, false));
            return EXIT_USAGE;
        }
    };
    for w in &project.warnings {
        errln!("warning: {w}");
    }
    if let Some(reason) =
        (args.requested_by.as_deref()).and_then(|l| requester_refusal(&project, l))
    {
        return present(args.issue, &Ok(Planned::Refused { reason }), args.json);
    }
    let gh = match connect(&project) {
        Ok(gh) => gh,
        Err(e) => {
            errln!("supervisor epic: {e}");
            return EXIT_GITHUB;
        }
    };
    let shutdown = match Shutdown::install() {
        Ok(s) => s,
        Err(e) => {
            errln!("supervisor epic: cannot install signal handlers: {e}");
            return EXIT_STOPPED;
        }
    };
    let token = match gh.access_token().await {
        Ok(t) => t,
        Err(e) => {
            errln!("supervisor epic: {e}");
            return EXIT_GITHUB;
        }
    };
    // Planning pushes nothing.
    let svc = Services::command(
        gh,
        PushAuth::None,
        token.as_ref(),
        &project.settings,
        shutdown.token(),
        ProgressMode::Off,
    );
    let planned = plan_epic(std::sync::Arc::new(project), &svc, args.issue).await;
    present(args.issue, &planned, args.json)
}

/// Print what planning came to; the exit code it maps to.
fn present(epic: u64, planned: &Result<Planned, RunError>, json: bool) -> u8 {
    let (code, kind, text, tasks): (u8, &str, String, Vec<(String, u64)>) = match planned {
        Ok(Planned::Ready { tasks }) => (
            EXIT_OK,
            "planned",
            format!("epic #{epic}: planned {}", report::planned_tasks(tasks)),
            tasks.clone(),
        ),
        Ok(Planned::Refused { reason }) => (
            EXIT_STOPPED,
            "refused",
            format!("epic #{epic} refused: {reason}"),
            Vec::new(),
        ),
        Ok(Planned::PlanRefused { errors }) => (
            EXIT_STOPPED,
            "plan-refused",
            format!(
                "epic #{epic}: the planner's plan was refused (said on the epic): {}",
                errors.join("; ")
            ),
            Vec::new(),
        ),
        Ok(Planned::Interrupted) => (
            EXIT_STOPPED,
            "interrupted",
            format!("epic #{epic}: stopped; run `supervisor epic {epic}` again to go on"),
            Vec::new(),
        ),
        Err(e) => (
            if e.is_resumable() {
                EXIT_GITHUB
            } else {
                EXIT_STOPPED
            },
            "error",
            format!("epic #{epic}: {e}; run `supervisor epic {epic}` again to go on"),
            Vec::new(),
        ),
    };
    if json {
        let tasks: Vec<serde_json::Value> = tasks
            .iter()
            .map(|(id, n)| serde_json::json!({ "task": id, "issue": n }))
            .collect();
        outln!(
            "{}",
            serde_json::json!({ "epic": epic, "end": kind, "message": text, "tasks": tasks })
        );
    } else {
        errln!("{text}");
    }
    code
}
