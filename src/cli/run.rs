//! `supervisor run <issue>`: the pipeline for one issue against GitHub (or any API the environment names).

use std::path::{Path, PathBuf};

use clap::Args;

use super::output::{err, errln, outln};
use super::{EXIT_GITHUB, EXIT_STOPPED, EXIT_USAGE};
use crate::github::{ClientConfig, GitHub, GitHubError};
use crate::pipeline::{Project, RunOptions, RunSummary, process_env};
use crate::report;
use crate::runtime::{Services, run_issue};
use crate::workspace::{PushAuth, Shutdown};

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Issue number.
    pub issue: u64,
    /// Repository root (default: the current directory).
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub repo_root: PathBuf,
    /// Keep the worktree however the run ends.
    #[arg(long)]
    pub debug: bool,
    /// Show what would be done without writing to GitHub or pushing.
    #[arg(long)]
    pub dry_run: bool,
    /// Add the issue to the board's Backlog when it is not on the board, instead of stopping.
    #[arg(long)]
    pub add_to_board: bool,
    /// Print the summary as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

pub(super) fn runtime(what: &str) -> Result<tokio::runtime::Runtime, u8> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| {
            errln!("supervisor {what}: cannot start the async runtime: {e}");
            EXIT_STOPPED
        })
}

pub fn run(args: RunArgs) -> u8 {
    match runtime("run") {
        Ok(rt) => rt.block_on(run_async(args)),
        Err(code) => code,
    }
}

fn canonical(dir: &Path) -> PathBuf {
    dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf())
}

async fn run_async(args: RunArgs) -> u8 {
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
    let gh = match connect(&project) {
        Ok(gh) => gh,
        Err(e) => return github_failure(&e, args.json),
    };
    let shutdown = match Shutdown::install() {
        Ok(s) => s,
        Err(e) => {
            errln!("supervisor run: cannot install signal handlers: {e}");
            return EXIT_STOPPED;
        }
    };
    let token = match gh.access_token().await {
        Ok(t) => t,
        Err(e) => return github_failure(&e, args.json),
    };
    let push_auth = match &token {
        Some(t) => PushAuth::Token(t.expose().to_string()),
        None => PushAuth::None,
    };
    let services = Services {
        github: gh,
        push_auth,
        github_token: token
            .filter(|_| project.settings.pass_github_token)
            .map(|t| t.expose().to_string()),
        scripted_program: None,
        cancel: shutdown.token(),
    };
    let opts = RunOptions {
        issue: args.issue,
        debug: args.debug,
        dry_run: args.dry_run,
        add_to_board: args.add_to_board,
    };
    let bell = project.settings.bell_on_complete;
    match run_issue(std::sync::Arc::new(project), services, opts).await {
        Ok(summary) => present(&summary, args.json, bell),
        Err(e) => {
            let code = e.exit_code();
            if args.json {
                outln!(
                    "{}",
                    serde_json::json!({ "ok": false, "error": e.to_string() })
                );
            }
            errln!("supervisor run: {e}");
            if code == EXIT_STOPPED || e.is_resumable() {
                errln!("the run can be resumed: run the same command again");
            }
            code
        }
    }
}

/// The GitHub client of a project, from the environment's credentials and API URL.
pub(super) fn connect(project: &Project) -> Result<GitHub, GitHubError> {
    let cfg = ClientConfig::from_env(project.settings.repo.clone(), &process_env)?;
    if !cfg.has_credentials() {
        return Err(GitHubError::NoCredentials);
    }
    GitHub::new(cfg)
}

fn github_failure(e: &GitHubError, json: bool) -> u8 {
    if json {
        outln!(
            "{}",
            serde_json::json!({ "ok": false, "error": e.to_string() })
        );
    }
    errln!("supervisor run: {e}");
    EXIT_GITHUB
}

/// Print a run's summary; the exit code it maps to.
pub(super) fn present(summary: &RunSummary, json: bool, bell: bool) -> u8 {
    if json {
        outln!(
            "{}",
            serde_json::to_string_pretty(summary).expect("summaries serialise")
        );
    }
    err!("{}", report::summary_text(summary));
    if bell {
        err!("\x07");
    }
    summary.end.exit_code()
}
