//! The command line. Thin: parse, call into the rooms, map results to exit codes.
//!
//! Exit codes: 0 done (or stopped cleanly by a signal), 1 pipeline stopped, 2 usage or configuration
//! error, 3 GitHub or auth error. Listings and reports (`runs`, `check`, `doctor`, `gates`) and
//! `--json` output go to stdout; progress, diagnostics and errors to stderr.

mod actions;
mod agent;
mod demo;
mod doctor;
mod epic;
mod help;
mod init;
mod init_prompt;
mod number;
mod output;
mod paths;
mod replay;
mod run;
mod runs;
mod serve;
mod status;
mod watch;

use number::{ATTEMPT, PORT, number};
use output::{err, errln, out, outln};

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::pipeline::{Project, process_env};
use crate::report;

mod gates_command;
use gates_command::gates_command;

pub const EXIT_OK: u8 = crate::pipeline::exit::OK;
pub const EXIT_STOPPED: u8 = crate::pipeline::exit::STOPPED;
pub const EXIT_USAGE: u8 = crate::pipeline::exit::USAGE;
pub const EXIT_GITHUB: u8 = crate::pipeline::exit::RESUMABLE;

#[derive(Debug, Parser)]
#[command(
    name = "supervisor",
    version,
    about = "Walks a GitHub issue across a Projects board through role agents, quality gates and a scored audit to a reviewed pull request",
    propagate_version = true,
    after_long_help = help::AFTER_LONG_HELP
)]
pub struct Cli {
    /// How log lines are written on stderr: `text` for people, `json` (one object per line, with
    /// the run, issue, stage and attempt they belong to) for log shippers.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text, value_name = "FORMAT")]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

/// The form of log lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Load and validate settings, workflow and agent definitions, and print what was found.
    Check {
        /// Repository root (default: the current directory).
        #[arg(long, value_name = "DIR", default_value = ".")]
        repo_root: PathBuf,
        /// Print JSON on stdout.
        #[arg(long)]
        json: bool,
    },
    /// Run the pipeline for one issue.
    Run(run::RunArgs),
    /// Set a repository up: settings, a board (created, or mapped), `.supervisor/runs/` ignored.
    Init(init::InitArgs),
    /// Check everything a run needs (credentials, board, columns, codeowners, push, agent CLIs,
    /// gate tools, worktrees) and print each check with its fix.
    Doctor(doctor::DoctorArgs),
    /// The run history: `runs`, `runs show RUN`, `runs why RUN`, `runs prune --older-than 30d`.
    Runs(runs::RunsArgs),
    /// Revise a pull request supervisor opened, after a codeowner's review feedback.
    Revise(run::ReviseArgs),
    /// Plan an epic: its planner's tasks as sub-issues of it on the board, each blocked by the
    /// tasks it depends on, and the plan posted on it.
    Epic(epic::EpicArgs),
    /// Run the whole pipeline against the built-in sandbox GitHub: no token, no network.
    Demo {
        /// Print the summary as JSON on stdout.
        #[arg(long)]
        json: bool,
        /// Remove the demo's directory afterwards (it is kept by default, to be looked at).
        #[arg(long)]
        clean: bool,
        /// Build the demo in this directory instead of a new temporary one.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
        /// The board-driven mode: the scheduler watches the board, a maintainer drags the card.
        #[arg(long)]
        watch: bool,
        /// An epic: issue #1 planned into three tasks that run, are reviewed (one is sent back
        /// once), merged into the epic branch and end in one pull request.
        #[arg(long, conflicts_with = "watch")]
        epic: bool,
        /// Keep the sandbox GitHub up after the run, with its web view, until Ctrl-C.
        #[arg(long, conflicts_with = "watch")]
        serve: bool,
        /// The sandbox's port (default: a free one).
        #[arg(long, value_name = "N", requires = "serve", value_parser = number::<u16>(PORT))]
        port: Option<u16>,
    },
    /// Run one role agent once in a directory, as the pipeline would.
    Agent(agent::AgentCommand),
    /// Replay a scripted agent: the process the `scripted` backend starts.
    #[command(name = "agent-script", hide = true)]
    AgentScript {
        /// The script file (`agentScript` in the settings).
        #[arg(long, value_name = "FILE")]
        script: PathBuf,
        /// The role whose steps to play.
        #[arg(long)]
        role: String,
        /// Which dispatch of the role this is.
        #[arg(long, default_value_t = 1, value_parser = number::<u32>(ATTEMPT))]
        attempt: u32,
    },
    /// Run the quality gates on a checkout.
    Gates {
        /// The checkout to check: a directory inside a git working tree.
        #[arg(long = "in", value_name = "DIR", default_value = ".")]
        dir: PathBuf,
        /// The branch or revision the change is measured against [default: the settings'
        /// `defaultBranch`, else main].
        #[arg(long, value_name = "BRANCH")]
        base: Option<String>,
        /// Run only these gates: gate names (tsc, lsp, dead-code, ...) or the workflow's hook
        /// names, comma-separated.
        #[arg(long, value_name = "NAME,...", value_delimiter = ',')]
        only: Vec<String>,
        /// Print the reports and the verdict as JSON on stdout.
        #[arg(long)]
        json: bool,
    },
    /// Receive GitHub webhook deliveries and run what they ask for (with a slow board poll as a
    /// safety net).
    Serve(serve::ServeArgs),
    /// Poll the board and run what arrives in the trigger columns; stop what a human moves away.
    Watch(watch::WatchArgs),
    /// The queue, live runs and last finished runs of the `serve` or `watch --dashboard` running
    /// for this repository, asked of it.
    Status(status::StatusArgs),
    /// The sandbox GitHub.
    Sandbox {
        #[command(subcommand)]
        command: SandboxCommand,
    },
    /// Print the completion script of a shell: `supervisor completions bash >
    /// ~/.local/share/bash-completion/completions/supervisor`.
    Completions {
        /// The shell to complete in.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff): `supervisor man | man -l -`, or one command's: `supervisor man run`.
    Man {
        /// The command whose page to print [default: supervisor's own, which lists every command].
        command: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum SandboxCommand {
    /// Serve the sandbox GitHub on 127.0.0.1.
    Serve {
        /// The state to serve: a JSON (or .yaml/.yml) file of the repository, board, issues and
        /// users, such as the one `supervisor demo --dir DIR` leaves in DIR.
        #[arg(long, value_name = "FILE")]
        state: PathBuf,
        /// Port to listen on; 0 picks a free one.
        #[arg(long, default_value_t = 0, value_parser = number::<u16>(PORT))]
        port: u16,
        /// Write the final state here (JSON, or YAML for .yaml/.yml) when stopped.
        #[arg(long, value_name = "FILE")]
        dump: Option<PathBuf>,
        /// Send webhooks (card moves, comments, labels, closed issues, reviews) to this URL.
        #[arg(long, value_name = "URL", requires = "webhook_secret")]
        webhook: Option<String>,
        /// The secret the webhooks are signed with (at least 16 bytes).
        #[arg(long, value_name = "SECRET", requires = "webhook")]
        webhook_secret: Option<String>,
        /// Whose webhook it is: `organization` and `app` receive card moves, `repository` does
        /// not (default: the organization's when one owns the repository, else the repository's).
        #[arg(long, value_name = "KIND", requires = "webhook", value_parser = ["repository", "organization", "app"])]
        webhook_kind: Option<String>,
    },
}

/// Variables holding credentials supervisor reads: kept in memory only.
const SECRET_VARS: [&str; 5] = [
    "GH_TOKEN",
    "GITHUB_TOKEN",
    "GITHUB_PAT",
    crate::github::APP_KEY_ENV,
    "SUPERVISOR_WEBHOOK_SECRET",
];

/// The variable `serve --webhook-secret-env NAME` reads its secret from: scrubbed like the others.
fn webhook_secret_var(args: impl Iterator<Item = String>) -> Option<String> {
    let mut args =
        args.skip_while(|a| a != "--webhook-secret-env" && !a.starts_with("--webhook-secret-env="));
    let flag = args.next()?;
    match flag.split_once('=') {
        Some((_, name)) => Some(name.to_owned()),
        None => args.next(),
    }
}

/// Entry point of the binary.
pub fn main() -> ExitCode {
    // Before any thread starts: tokens leave the environment (and /proc/<pid>/environ) at once.
    // The scripted agent is an agent: it keeps the environment supervisor chose to give it.
    let scripted_agent = std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == crate::agent::backend::SCRIPT_SUBCOMMAND);
    if !scripted_agent {
        let mut names: Vec<String> = SECRET_VARS.iter().map(|n| n.to_string()).collect();
        names.extend(webhook_secret_var(std::env::args()));
        crate::process::take_secrets(&names.iter().map(String::as_str).collect::<Vec<_>>());
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            init_tracing("warn", LogFormat::Text);
            let code = if e.use_stderr() { EXIT_USAGE } else { EXIT_OK };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    // A server says what it receives and why it ignores things; a command speaks up on trouble.
    init_tracing(
        match cli.command {
            Command::Serve(_) | Command::Watch(_) => "warn,supervisor=info",
            _ => "warn",
        },
        cli.log_format,
    );
    ExitCode::from(dispatch(cli))
}

/// Logs go to stderr, coloured only on a terminal and without `NO_COLOR` (text), or one JSON object
/// a line with the spans each line belongs to (json); `RUST_LOG` overrides `default`.
fn init_tracing(default: &str, format: LogFormat) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        // Around the live progress line, never into it.
        .with_writer(|| crate::runtime::LogWriter)
        .with_target(false);
    let _ = match format {
        LogFormat::Text => builder
            .with_ansi(crate::report::colour_on_stderr())
            .try_init(),
        LogFormat::Json => builder
            .json()
            .with_current_span(true)
            .with_span_list(true)
            .try_init(),
    };
}

fn dispatch(cli: Cli) -> u8 {
    match cli.command {
        Command::Check { repo_root, json } => check(repo_root, json),
        Command::Run(args) => run::run(args),
        Command::Doctor(args) => doctor::run(args),
        Command::Init(args) => init::run(args),
        Command::Runs(args) => runs::run(args),
        Command::Revise(args) => run::run(args.into_run()),
        Command::Demo {
            json,
            clean,
            dir,
            watch,
            epic,
            serve,
            port,
        } => demo::run(
            json,
            clean,
            dir,
            demo::Mode::of(watch, epic),
            serve.then(|| port.unwrap_or(0)),
        ),
        Command::Agent(args) => agent::run(args),
        Command::Epic(args) => epic::run(args),
        Command::AgentScript {
            script,
            role,
            attempt,
        } => agent_script(&script, &role, attempt),
        Command::Gates {
            dir,
            base,
            only,
            json,
        } => gates_command(&dir, base, &only, json),
        Command::Serve(args) => serve::run(args),
        Command::Watch(args) => watch::run(args),
        Command::Status(args) => status::run(args),
        Command::Completions { shell } => help::completions(shell),
        Command::Man { command } => help::man(command.as_deref()),
        Command::Sandbox {
            command:
                SandboxCommand::Serve {
                    state,
                    port,
                    dump,
                    webhook,
                    webhook_secret,
                    webhook_kind,
                },
        } => sandbox_serve(state, port, dump, webhook.zip(webhook_secret), webhook_kind),
    }
}

fn agent_script(script: &std::path::Path, role: &str, attempt: u32) -> u8 {
    let cwd = std::env::current_dir().unwrap_or_default();
    let code = crate::agent::backend::replay(
        script,
        role,
        attempt,
        &cwd,
        &mut std::io::stdout().lock(),
        &mut std::io::stderr().lock(),
    );
    code.clamp(0, 255) as u8
}

fn check(root: PathBuf, json: bool) -> u8 {
    match Project::load(&root, &process_env) {
        Ok(project) => {
            let preflight = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt.block_on(crate::agent::preflight(
                    &project.settings,
                    &project.roles,
                    &project.root,
                )),
                Err(e) => {
                    errln!("supervisor check: cannot start the async runtime: {e}");
                    return EXIT_STOPPED;
                }
            };
            if json {
                outln!("{}", report::check_json(&project, &preflight));
            } else {
                out!("{}", report::check_text(&project, &preflight));
            }
            if preflight.ok() { EXIT_OK } else { EXIT_USAGE }
        }
        Err(e) => {
            if json {
                outln!("{}", report::errors_text(&e, true));
            } else {
                err!("{}", report::errors_text(&e, false));
            }
            EXIT_USAGE
        }
    }
}

/// `supervisor sandbox serve`: serve a state file until Ctrl-C (or SIGTERM), then optionally dump it.
fn sandbox_serve(
    state: PathBuf,
    port: u16,
    dump: Option<PathBuf>,
    webhook: Option<(String, String)>,
    webhook_kind: Option<String>,
) -> u8 {
    use crate::sandbox::{Sandbox, SandboxError, SandboxState, WebhookTarget};
    let kind = match webhook_kind.map(|k| k.parse()).transpose() {
        Ok(kind) => kind,
        Err(e) => {
            errln!("supervisor sandbox serve: --webhook-kind: {e}");
            return EXIT_USAGE;
        }
    };
    let webhook = match webhook {
        Some((url, secret)) => match crate::events::WebhookSecret::new(secret) {
            Ok(secret) => Some(WebhookTarget {
                kind,
                ..WebhookTarget::new(url, secret)
            }),
            Err(e) => {
                errln!("supervisor sandbox serve: --webhook-secret: {e}");
                return EXIT_USAGE;
            }
        },
        None => None,
    };
    if !state.is_file() {
        errln!(
            "supervisor sandbox serve: --state {}: {}; give the sandbox's state file (JSON, or YAML for .yaml/.yml), such as the one `supervisor demo --dir DIR` leaves in DIR",
            state.display(),
            if state.is_dir() {
                "is a directory"
            } else {
                "does not exist"
            }
        );
        return EXIT_USAGE;
    }
    let seed = match SandboxState::load(&state) {
        Ok(seed) => seed,
        Err(e) => {
            errln!("supervisor sandbox serve: {e}");
            return EXIT_USAGE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            errln!("supervisor sandbox serve: cannot start the async runtime: {e}");
            return EXIT_STOPPED;
        }
    };
    runtime.block_on(async move {
        let sandbox = match Sandbox::start_with_webhook(seed, port, webhook).await {
            Ok(s) => s,
            Err(e @ SandboxError::Bind { .. }) => {
                errln!("supervisor sandbox serve: {e}: choose another --port");
                return EXIT_USAGE;
            }
            Err(e) => {
                errln!("supervisor sandbox serve: {e}");
                return EXIT_USAGE;
            }
        };
        // Catch the signals before saying we are ready, so an early Ctrl-C still cleans up.
        let stop = stop_signal();
        err!("{}", sandbox.banner());
        stop.await;
        let snapshot = sandbox.snapshot();
        sandbox.shutdown().await;
        if let Some(path) = dump {
            if let Err(e) = snapshot.save(&path) {
                errln!("supervisor sandbox serve: {e}");
                return EXIT_STOPPED;
            }
            errln!("sandbox state written to {}", path.display());
        }
        EXIT_OK
    })
}

/// Resolves on Ctrl-C or SIGTERM; the handlers are installed when this is called.
fn stop_signal() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let int = signal(SignalKind::interrupt());
        let term = signal(SignalKind::terminate());
        async move {
            match (int, term) {
                (Ok(mut int), Ok(mut term)) => {
                    tokio::select! {
                        _ = int.recv() => {}
                        _ = term.recv() => {}
                    }
                }
                _ => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        }
    }
    #[cfg(not(unix))]
    async {
        let _ = tokio::signal::ctrl_c().await;
    }
}
