//! `supervisor run <issue>`: the pipeline for one issue against GitHub (or any API the environment names).

use std::path::{Path, PathBuf};

use clap::Args;

use super::actions::ActionsOutput;
use super::number::number;
use super::output::{err, errln, outln};
use super::{EXIT_GITHUB, EXIT_STOPPED, EXIT_USAGE};
use crate::config::RepoSlug;
use crate::github::{ClientConfig, GitCredentials, GitHub, GitHubError, Token};
use crate::ids::{IssueNumber, RunId};
use crate::pipeline::{Project, RunEnd, RunOptions, RunSummary, process_env};
use crate::report;
use crate::runtime::{ProgressMode, Services, run_issue, run_revision};
use crate::workspace::{PushAuth, Shutdown, WorkspaceConfig};

/// What `run` and `revise` share.
#[derive(Debug, Args)]
pub struct RunFlags {
    /// Repository root (default: the current directory).
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub repo_root: PathBuf,
    /// Keep the worktree however the run ends.
    #[arg(long)]
    pub debug: bool,
    /// Show what would be done without writing to GitHub or pushing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print the summary as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// How to show progress while the run moves: `auto` (a live line on a terminal, plain lines
    /// otherwise), `plain`, `jsonl` (the journal's events on stdout as they are recorded), `none`.
    #[arg(long, value_name = "MODE", value_parser = parse_progress)]
    pub progress: Option<ProgressMode>,
    /// Refuse the run unless LOGIN is a codeowner: the person who asked for it (a commenter, the
    /// actor of a workflow).
    #[arg(long, value_name = "LOGIN")]
    pub requested_by: Option<String>,
    /// Append the run summary as Markdown to FILE [default: $GITHUB_STEP_SUMMARY when set].
    #[arg(long, value_name = "FILE")]
    pub step_summary: Option<PathBuf>,
    /// Write the step outputs (end, pr-url, score, verdict, journal, summary) to FILE
    /// [default: $GITHUB_OUTPUT when set].
    #[arg(long, value_name = "FILE")]
    pub github_output: Option<PathBuf>,
    /// Print the gate findings as GitHub Actions annotations [default: on when GITHUB_ACTIONS=true].
    #[arg(long)]
    pub annotations: bool,
}

fn parse_progress(text: &str) -> Result<ProgressMode, String> {
    match text {
        "auto" => Ok(ProgressMode::for_stderr()),
        "plain" => Ok(ProgressMode::Plain),
        "jsonl" => Ok(ProgressMode::Jsonl),
        "none" => Ok(ProgressMode::Off),
        _ => Err(format!(
            "`{text}` is not a progress mode: use auto, plain, jsonl or none"
        )),
    }
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Issue number.
    #[arg(value_parser = number::<u64>("an issue number"))]
    pub issue: u64,
    #[command(flatten)]
    pub flags: RunFlags,
    /// Add the issue to the board's Backlog when it is not on the board, instead of stopping.
    #[arg(long)]
    pub add_to_board: bool,
    /// Revise this pull request instead (`supervisor revise`); `issue` is then its number too.
    #[arg(skip)]
    pub revise: Option<u64>,
}

#[derive(Debug, Args)]
pub struct ReviseArgs {
    /// Pull request number.
    #[arg(value_parser = number::<u64>("a pull request number"))]
    pub pr: u64,
    #[command(flatten)]
    pub flags: RunFlags,
}

impl ReviseArgs {
    /// The same run, revising the pull request.
    pub fn into_run(self) -> RunArgs {
        RunArgs {
            issue: self.pr,
            flags: self.flags,
            add_to_board: false,
            revise: Some(self.pr),
        }
    }
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

pub(super) fn run(args: RunArgs) -> u8 {
    if args.flags.json && args.flags.progress == Some(ProgressMode::Jsonl) {
        errln!(
            "supervisor run: --json and --progress jsonl both write to stdout; choose one (the \
             journal's last events, `finished` and `pull-request`, carry the outcome)"
        );
        return EXIT_USAGE;
    }
    let mut actions = ActionsOutput::new(
        args.flags.step_summary.clone(),
        args.flags.github_output.clone(),
        args.flags.annotations,
        &process_env,
    );
    actions.begin();
    match runtime("run") {
        Ok(rt) => rt.block_on(run_async(args, &mut actions)),
        Err(code) => {
            actions.failed(args.issue, "cannot start the async runtime");
            code
        }
    }
}

pub(super) fn canonical(dir: &Path) -> PathBuf {
    dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf())
}

async fn run_async(args: RunArgs, actions: &mut ActionsOutput) -> u8 {
    let root = canonical(&args.flags.repo_root);
    let project = match Project::load(&root, &process_env) {
        Ok(p) => p,
        Err(e) => {
            let text = report::errors_text(&e, false);
            err!("{text}");
            actions.failed(args.issue, &text);
            return EXIT_USAGE;
        }
    };
    for w in &project.warnings {
        errln!("warning: {w}");
    }
    if let Some(login) = &args.flags.requested_by {
        if let Some(summary) = refuse_requester(&project, args.issue, login) {
            let code = present(&summary, args.flags.json, false);
            actions.finished(&summary);
            return code;
        }
    }
    // The client is built (the system's root certificates read) while the agent CLIs are checked;
    // it sends nothing until they can run. A token's pushes need no client: once the agents can
    // run, the push probe starts beside the rest of the client's making.
    let repo = project.settings.repo.clone();
    let (token_tx, token_rx) = tokio::sync::oneshot::channel();
    let connecting = tokio::task::spawn_blocking(move || connect_to(repo, Some(token_tx)));
    if let Err(code) = agents_can_run(&project, args.flags.json, args.issue, actions).await {
        return code;
    }
    let early_push = token_rx.await.ok().map(|token| {
        let has_token = token.is_some();
        let auth = push_auth_with(GitCredentials::fixed(token), has_token);
        crate::doctor::start_push_check(
            WorkspaceConfig::from_settings(&project.root, &project.settings),
            auth,
        )
    });
    let connected = connecting.await.unwrap_or_else(|e| {
        Err(GitHubError::Config(format!(
            "building the GitHub client failed: {e}"
        )))
    });
    let gh = match connected {
        Ok(gh) => gh,
        Err(e) => return github_failure(&e, args.flags.json, args.issue, actions),
    };
    let credentials = super::doctor::credentials(&project);
    let shutdown = match Shutdown::install() {
        Ok(s) => s,
        Err(e) => {
            let message = format!("cannot install signal handlers: {e}");
            errln!("supervisor run: {message}");
            actions.failed(args.issue, &message);
            return EXIT_STOPPED;
        }
    };
    let token = match gh.access_token().await {
        Ok(t) => t,
        Err(e) => return github_failure(&e, args.flags.json, args.issue, actions),
    };
    if let Some(t) = &token {
        actions.add_secret(t.expose());
    }
    let push_auth = match push_auth(&gh, token.is_some()).await {
        Ok(auth) => auth,
        Err(e) => return github_failure(&e, args.flags.json, args.issue, actions),
    };
    let preflight =
        super::doctor::preflight(&project, &gh, credentials, &push_auth, early_push).await;
    if let Some(findings) = preflight {
        if args.flags.json {
            outln!(
                "{}",
                serde_json::json!({ "ok": false, "error": "preflight failed", "checks": findings.checks })
            );
        }
        let failed: Vec<String> = findings
            .failures()
            .map(|c| format!("{}: {}", c.name, c.detail))
            .collect();
        actions.failed(
            args.issue,
            &format!("preflight failed: {}", failed.join("; ")),
        );
        return if findings.github_failed() {
            EXIT_GITHUB
        } else {
            EXIT_USAGE
        };
    }
    let services = Services::command(
        gh,
        push_auth,
        token.as_ref(),
        &project.settings,
        shutdown.token(),
        args.flags.progress.unwrap_or_else(ProgressMode::for_stderr),
    );
    let opts = RunOptions {
        issue: IssueNumber::new(args.issue),
        debug: args.flags.debug,
        dry_run: args.flags.dry_run,
        add_to_board: args.add_to_board,
        revise: None,
        epic_task: false,
    };
    let bell = project.settings.bell_on_complete;
    let project = std::sync::Arc::new(project);
    let result = match args.revise {
        Some(pr) => run_revision(project, services, pr, opts).await,
        None => run_issue(project, services, opts).await,
    };
    match result {
        Ok(summary) => {
            let code = present(&summary, args.flags.json, bell);
            actions.finished(&summary);
            code
        }
        Err(e) => {
            let code = e.exit_code();
            if args.flags.json {
                outln!(
                    "{}",
                    serde_json::json!({ "ok": false, "error": e.to_string() })
                );
            }
            errln!("supervisor run: {e}");
            if code == EXIT_STOPPED || e.is_resumable() {
                errln!("the run can be resumed: run the same command again");
            }
            actions.failed(args.issue, &e.to_string());
            code
        }
    }
}

/// Before anything is written: every agent CLI the workflow uses (and the agents' sandbox, when one
/// is asked for) can run. Prints the problems and gives the exit code when one cannot.
/// How pushes authenticate: they ask for a token each time, since a GitHub App's installation
/// token expires within the hour. `PushAuth::None` when there is no token.
pub(super) async fn push_auth(gh: &GitHub, has_token: bool) -> Result<PushAuth, GitHubError> {
    Ok(push_auth_with(gh.git_credentials().await?, has_token))
}

/// Pushes that ask `creds` for their token; `PushAuth::None` when there is no token.
fn push_auth_with(creds: GitCredentials, has_token: bool) -> PushAuth {
    if !has_token {
        return PushAuth::None;
    }
    PushAuth::provider(move || match creds.token() {
        Ok(Some(t)) => Ok(t.expose().to_string()),
        Ok(None) => Err("no GitHub token to push with".to_string()),
        Err(e) => Err(e.to_string()),
    })
}

/// `Err(text)` when the workflow's agent CLIs cannot run, or would find no provider credentials;
/// warnings are printed.
pub(super) async fn agent_problems(project: &Project) -> Result<(), String> {
    let pf = crate::agent::preflight(&project.settings, &project.roles, &project.root).await;
    for w in &pf.warnings {
        errln!("warning: {w}");
    }
    // A missing provider key is found here, before any card moves, not by the first agent.
    let mut problems = pf.problems();
    problems.extend(pf.keys.iter().cloned());
    if problems.is_empty() {
        return Ok(());
    }
    Err(format!(
        "agents cannot run, so nothing was started (`supervisor check` shows the set-up):\n  {}",
        problems.join("\n  ")
    ))
}

async fn agents_can_run(
    project: &Project,
    json: bool,
    issue: u64,
    actions: &mut ActionsOutput,
) -> Result<(), u8> {
    let Err(text) = agent_problems(project).await else {
        return Ok(());
    };
    if json {
        outln!("{}", serde_json::json!({ "ok": false, "error": text }));
    }
    errln!("supervisor run: {text}");
    actions.failed(issue, &text);
    Err(EXIT_USAGE)
}

/// A summary refusing the run when `login`, who asked for it, is not a codeowner; `None` when they are.
fn refuse_requester(project: &Project, issue: u64, login: &str) -> Option<RunSummary> {
    let reason = requester_refusal(project, login)?;
    Some(RunSummary::bare(
        RunId::default(),
        project.settings.repo.to_string(),
        issue,
        RunEnd::Refused { reason },
    ))
}

/// Why `--requested-by LOGIN` refuses what was asked: LOGIN is not a codeowner (or is no one).
pub(super) fn requester_refusal(project: &Project, login: &str) -> Option<String> {
    let login = login.trim().trim_start_matches('@');
    if !login.is_empty() && project.settings.is_codeowner(login) {
        return None;
    }
    Some(if login.is_empty() {
        "--requested-by names no one; give the login of the person who asked for the run"
            .to_string()
    } else {
        format!(
            "@{login} asked for this run but is not a codeowner ({}); only codeowners can start supervisor, \
             so add them to `codeowners` or ask a codeowner to start it",
            project.settings.codeowners.join(", ")
        )
    })
}

/// The GitHub client of a project, from the environment's credentials and API URL.
pub(super) fn connect(project: &Project) -> Result<GitHub, GitHubError> {
    connect_to(project.settings.repo.clone(), None)
}

/// A client for `repo` with the credentials and API URL of the environment. When the credentials
/// are a token (not a GitHub App), it goes to `token` first, before the client is built.
fn connect_to(
    repo: RepoSlug,
    token: Option<tokio::sync::oneshot::Sender<Option<Token>>>,
) -> Result<GitHub, GitHubError> {
    let cfg = ClientConfig::from_env(repo, &process_env)?;
    if !cfg.has_credentials() {
        return Err(GitHubError::NoCredentials);
    }
    if let (Some(tx), None) = (token, &cfg.app) {
        let _ = tx.send(cfg.token.clone());
    }
    GitHub::new(cfg)
}

fn github_failure(e: &GitHubError, json: bool, issue: u64, actions: &ActionsOutput) -> u8 {
    if json {
        outln!(
            "{}",
            serde_json::json!({ "ok": false, "error": e.to_string() })
        );
    }
    errln!("supervisor run: {e}");
    actions.failed(issue, &e.to_string());
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
