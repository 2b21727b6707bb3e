//! `supervisor run <issue>`: the pipeline for one issue against GitHub (or any API the environment names).

use std::path::{Path, PathBuf};

use clap::Args;

use super::{EXIT_GITHUB, EXIT_STOPPED, EXIT_USAGE};
use crate::github::{ClientConfig, GitHub, GitHubError};
use crate::pipeline::{Project, RunOptions, Services, exit_code, process_env, run_issue};
use crate::report::{self, RunSummary};
use crate::workspace::{PushAuth, Shutdown};

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Issue number.
    pub issue: u64,
    /// Repository root (default: the current directory).
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub repo_root: PathBuf,
    /// Keep the worktree when PR creation fails.
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
            eprintln!("supervisor {what}: cannot start the async runtime: {e}");
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
            eprint!("{}", report::errors_text(&e, false));
            return EXIT_USAGE;
        }
    };
    for w in &project.warnings {
        eprintln!("warning: {w}");
    }
    let gh = match connect(&project) {
        Ok(gh) => gh,
        Err(e) => return github_failure(&e, args.json),
    };
    let shutdown = match Shutdown::install() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("supervisor run: cannot install signal handlers: {e}");
            return EXIT_STOPPED;
        }
    };
    let token = match gh.access_token().await {
        Ok(t) => t,
        Err(e) => return github_failure(&e, args.json),
    };
    // Pushes ask for a token each time: a GitHub App's installation token expires within the hour.
    let push_auth = match gh.git_credentials().await {
        Ok(creds) if token.is_some() => PushAuth::provider(move || match creds.token() {
            Ok(Some(t)) => Ok(t.expose().to_string()),
            Ok(None) => Err("no GitHub token to push with".to_string()),
            Err(e) => Err(e.to_string()),
        }),
        Ok(_) => PushAuth::None,
        Err(e) => return github_failure(&e, args.json),
    };
    let services = Services {
        github: gh,
        push_auth,
        github_token: token
            .filter(|_| project.settings.pass_github_token)
            .map(|t| t.expose().to_string()),
        scripted_program: None,
        cancel: shutdown.subscribe(),
    };
    let opts = RunOptions {
        issue: args.issue,
        debug: args.debug,
        dry_run: args.dry_run,
        add_to_board: args.add_to_board,
    };
    match run_issue(&project, services, opts).await {
        Ok(summary) => present(&summary, args.json, project.settings.bell_on_complete),
        Err(e) => {
            let code = e.exit_code();
            if args.json {
                println!(
                    "{}",
                    serde_json::json!({ "ok": false, "error": e.to_string() })
                );
            }
            eprintln!("supervisor run: {e}");
            if code == EXIT_STOPPED || e.is_resumable() {
                eprintln!("the run can be resumed: run the same command again");
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
        println!(
            "{}",
            serde_json::json!({ "ok": false, "error": e.to_string() })
        );
    }
    eprintln!("supervisor run: {e}");
    EXIT_GITHUB
}

/// Print a run's summary; the exit code it maps to.
pub(super) fn present(summary: &RunSummary, json: bool, bell: bool) -> u8 {
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(summary).expect("summaries serialise")
        );
    }
    eprint!("{}", report::summary_text(summary));
    if bell {
        eprint!("\x07");
    }
    exit_code(&summary.end)
}
