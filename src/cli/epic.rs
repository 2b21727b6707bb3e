//! `supervisor epic <issue>`: plan an epic — its planner's tasks as sealed sub-issues of it on the
//! board, blocked by the tasks they depend on, and the plan posted on it — then work it: the tasks
//! run, are reviewed, revised, merged into the epic branch, and the epic's pull request opens.

use std::path::PathBuf;

use clap::Args;

use super::number::number;
use super::output::{err, errln, outln};
use super::run::{canonical, connect, push_auth, requester_refusal, runtime};
use super::{EXIT_GITHUB, EXIT_OK, EXIT_STOPPED, EXIT_USAGE};
use crate::pipeline::{Project, RunError, process_env};
use crate::report;
use crate::runtime::{EpicEnd, Planned, ProgressMode, Services, plan_epic, run_epic, waiting_text};
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
    /// Plan the epic (its sub-issues on the board and the plan on it) and stop there.
    #[arg(long)]
    pub plan_only: bool,
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
        let refused = Ended::Epic(EpicEnd::Refused { reason });
        return present(args.issue, &Ok(refused), args.json);
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
    // Planning pushes nothing; the tasks' runs push their branches.
    let push_auth = if args.plan_only {
        PushAuth::None
    } else {
        match push_auth(&gh, token.is_some()).await {
            Ok(auth) => auth,
            Err(e) => {
                errln!("supervisor epic: {e}");
                return EXIT_GITHUB;
            }
        }
    };
    let svc = Services::command(
        gh,
        push_auth,
        token.as_ref(),
        &project.settings,
        shutdown.token(),
        ProgressMode::Off,
    );
    let project = std::sync::Arc::new(project);
    let end = if args.plan_only {
        plan_epic(project, &svc, args.issue)
            .await
            .map(|planned| match planned {
                Planned::Ready { tasks } => Ended::Planned(tasks),
                Planned::Refused { reason } => Ended::Epic(EpicEnd::Refused { reason }),
                Planned::PlanRefused { errors } => Ended::Epic(EpicEnd::PlanRefused { errors }),
                Planned::Interrupted => Ended::Epic(EpicEnd::Interrupted),
            })
    } else {
        run_epic(project, &svc, args.issue).await.map(Ended::Epic)
    };
    present(args.issue, &end, args.json)
}

/// How `supervisor epic` ended.
enum Ended {
    /// `--plan-only`: the tasks' sub-issues.
    Planned(Vec<(String, u64)>),
    Epic(EpicEnd),
}

/// Print what the epic came to; the exit code it maps to.
fn present(epic: u64, end: &Result<Ended, RunError>, json: bool) -> u8 {
    let again = format!("run `supervisor epic {epic}` again to go on");
    let mut tasks: Vec<serde_json::Value> = Vec::new();
    let mut pull_request = None;
    let mut waiting_for: &[u64] = &[];
    let (code, kind, text) = match end {
        Ok(Ended::Planned(planned)) => {
            tasks = (planned.iter())
                .map(|(id, n)| serde_json::json!({ "task": id, "issue": n }))
                .collect();
            (
                EXIT_OK,
                "planned",
                format!("epic #{epic}: planned {}", report::planned_tasks(planned)),
            )
        }
        Ok(Ended::Epic(EpicEnd::Finished {
            tasks: outcomes,
            pull_request: pr,
        })) => {
            tasks = (outcomes.iter())
                .map(|t| serde_json::to_value(t).unwrap_or_default())
                .collect();
            pull_request = *pr;
            let list: Vec<String> = (outcomes.iter())
                .map(|t| format!("{} #{} {}", t.task, t.issue, t.outcome))
                .collect();
            (
                EXIT_OK,
                "finished",
                format!(
                    "epic #{epic}: done: {}{}",
                    list.join(", "),
                    pr.map_or(String::new(), |n| format!("; its pull request: #{n}"))
                ),
            )
        }
        Ok(Ended::Epic(EpicEnd::Waiting { pulls })) => {
            waiting_for = pulls;
            (
                EXIT_GITHUB,
                "waiting",
                format!("epic #{epic}: {}; then {again}", waiting_text(pulls)),
            )
        }
        Ok(Ended::Epic(EpicEnd::Paused { reason })) => (
            EXIT_GITHUB,
            "paused",
            format!("epic #{epic} paused: {reason}; {again}"),
        ),
        Ok(Ended::Epic(EpicEnd::Refused { reason })) => (
            EXIT_STOPPED,
            "refused",
            format!("epic #{epic} refused: {reason}"),
        ),
        Ok(Ended::Epic(EpicEnd::PlanRefused { errors })) => (
            EXIT_STOPPED,
            "plan-refused",
            format!(
                "epic #{epic}: the planner's plan was refused (said on the epic): {}",
                errors.join("; ")
            ),
        ),
        Ok(Ended::Epic(EpicEnd::Interrupted)) => (
            EXIT_STOPPED,
            "interrupted",
            format!("epic #{epic}: stopped; {again}"),
        ),
        Err(e) => (
            if e.is_resumable() {
                EXIT_GITHUB
            } else {
                EXIT_STOPPED
            },
            "error",
            format!("epic #{epic}: {e}; {again}"),
        ),
    };
    if json {
        outln!(
            "{}",
            serde_json::json!({ "epic": epic, "end": kind, "message": text, "tasks": tasks,
                "pullRequest": pull_request, "waitingFor": waiting_for })
        );
    } else {
        errln!("{text}");
    }
    code
}
