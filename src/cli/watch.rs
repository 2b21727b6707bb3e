//! `supervisor watch`: the board-driven bot, polling. Also the scheduler set-up `serve` shares.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, ValueEnum};

use super::number::{PORT, number};
use super::output::{err, errln, outln};
use super::run::{agent_problems, canonical, connect, push_auth};
use super::{EXIT_GITHUB, EXIT_OK, EXIT_STOPPED, EXIT_USAGE};
use crate::pipeline::{Project, process_env};
use crate::report;
use crate::scheduler::{Access, Mode, Notice, NoticeSink, Outcome, Scheduler, SchedulerConfig};
use crate::workspace::{PushAuth, Shutdown};

/// Where ready cards are worked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DispatchTarget {
    /// One `workflow_dispatch` of `watch.dispatchWorkflow` per ready card.
    Actions,
}

#[derive(Debug, Args)]
pub struct WatchArgs {
    /// Time between board polls: `30s`, `2m`, `500ms` (a bare number is seconds)
    /// [default: watch.pollIntervalSec].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub interval: Option<Duration>,
    /// Poll once, start what is due, wait for those runs, exit (cron, a scheduled workflow).
    #[arg(long)]
    pub once: bool,
    /// Runs live at once [default: watch.maxConcurrent].
    #[arg(long, value_name = "N", value_parser = number::<u64>("a number of runs, 1 or more").at_least(1))]
    pub max_concurrent: Option<u64>,
    /// Instead of running here, start one GitHub Actions workflow run per ready card.
    #[arg(long, value_name = "WHERE", value_enum)]
    pub dispatch: Option<DispatchTarget>,
    /// The branch the dispatched workflow runs on [default: defaultBranch].
    #[arg(long, value_name = "REF", requires = "dispatch")]
    pub dispatch_ref: Option<String>,
    /// Repository root (default: the current directory).
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub repo_root: PathBuf,
    /// Print what happens as JSON lines on stdout.
    #[arg(long)]
    pub json: bool,
    /// Serve the live dashboard, `/metrics` and `/api/state` on this port (0 picks a free one;
    /// the URL is printed and written to .supervisor/watch/status.json for `supervisor status`).
    #[arg(long, value_name = "PORT", value_parser = number::<u16>(PORT))]
    pub dashboard: Option<u16>,
    /// The address the dashboard listens on; any but loopback needs a token.
    #[arg(
        long,
        value_name = "ADDR",
        default_value = "127.0.0.1",
        requires = "dashboard"
    )]
    pub dashboard_bind: IpAddr,
    /// The environment variable holding the dashboard's token [default: watch.dashboardTokenEnv].
    #[arg(long, value_name = "NAME", requires = "dashboard")]
    pub dashboard_token_env: Option<String>,
}

/// `30s`, `2m`, `1h`, `500ms`, or seconds.
pub(super) fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("`{text}` is not a duration: use 30s, 2m, 1h or 500ms"))?;
    let d = match unit {
        "" | "s" => Duration::from_secs(n),
        "ms" => Duration::from_millis(n),
        "m" => Duration::from_secs(n * 60),
        "h" => Duration::from_secs(n * 3600),
        _ => {
            return Err(format!(
                "`{text}`: unknown unit `{unit}`; use ms, s, m or h"
            ));
        }
    };
    if d.is_zero() {
        return Err("the interval must be longer than 0".to_string());
    }
    Ok(d)
}

pub(super) fn run(args: WatchArgs) -> u8 {
    match super::run::runtime("watch") {
        Ok(rt) => rt.block_on(watch(args)),
        Err(code) => code,
    }
}

/// A loaded project, its GitHub client and the shutdown switch: what a scheduler needs.
pub(super) struct Engine {
    pub project: Arc<Project>,
    pub gh: crate::github::GitHub,
    pub push_auth: PushAuth,
    pub token: Option<String>,
    pub shutdown: Shutdown,
}

impl Engine {
    /// Load the project and connect; `local`: runs happen here, so the agent CLIs must be able to run.
    pub(super) async fn start(command: &str, repo_root: &Path, local: bool) -> Result<Engine, u8> {
        Self::connect(command, Self::load(repo_root)?, local).await
    }

    /// The project at `repo_root`, checked as `supervisor check` checks it: its errors (and
    /// warnings) are printed.
    pub(super) fn load(repo_root: &Path) -> Result<Project, u8> {
        let project = match Project::load(&canonical(repo_root), &process_env) {
            Ok(p) => p,
            Err(e) => {
                err!("{}", report::errors_text(&e, false));
                return Err(EXIT_USAGE);
            }
        };
        for w in &project.warnings {
            errln!("warning: {w}");
        }
        Ok(project)
    }

    /// Connect a loaded project to GitHub; `local` as for [`Engine::start`].
    pub(super) async fn connect(
        command: &str,
        project: Project,
        local: bool,
    ) -> Result<Engine, u8> {
        if local {
            agent_problems(&project).await.map_err(|text| {
                errln!("supervisor {command}: {text}");
                EXIT_USAGE
            })?;
        }
        let github_failed = |e: crate::github::GitHubError| {
            errln!("supervisor {command}: {e}");
            EXIT_GITHUB
        };
        let gh = connect(&project).map_err(github_failed)?;
        let token = gh.access_token().await.map_err(github_failed)?;
        let push_auth = push_auth(&gh, token.is_some())
            .await
            .map_err(github_failed)?;
        let shutdown = Shutdown::install().map_err(|e| {
            errln!("supervisor {command}: cannot install signal handlers: {e}");
            EXIT_STOPPED
        })?;
        Ok(Engine {
            project: Arc::new(project),
            gh,
            push_auth,
            token: token.map(|t| t.expose().to_string()),
            shutdown,
        })
    }

    pub(super) fn scheduler(&self, config: SchedulerConfig, json: bool) -> Scheduler {
        let access = Access {
            gh: self.gh.clone(),
            push_auth: self.push_auth.clone(),
            github_token: self.token.clone(),
        };
        Scheduler::new(self.project.clone(), access, config, printer(json))
    }
}

/// Notices on stderr, or as JSON lines on stdout.
/// On stderr a poll is shown at most once a minute (`--json` shows every one).
pub(super) fn printer(json: bool) -> NoticeSink {
    let last_poll = std::sync::Mutex::new(None::<std::time::Instant>);
    Arc::new(move |n: &Notice| {
        if json {
            if let Ok(line) = serde_json::to_string(n) {
                outln!("{line}");
            }
            return;
        }
        if let Notice::Polled { .. } = n {
            let mut last = last_poll.lock().unwrap_or_else(|e| e.into_inner());
            if last.is_some_and(|t| t.elapsed() < Duration::from_secs(60)) {
                return;
            }
            *last = Some(std::time::Instant::now());
        }
        errln!("{}", notice_text(n));
    })
}

fn notice_text(n: &Notice) -> String {
    match n {
        Notice::Polled {
            cards,
            pages,
            cost,
            remaining,
            duration_ms,
            ..
        } => format!(
            "polled the board: {cards} card(s), {pages} page(s) in {duration_ms} ms, {cost} GraphQL point(s){}",
            remaining
                .map(|r| format!(", {r} left this hour"))
                .unwrap_or_default()
        ),
        Notice::PollFailed { error } => format!("board poll failed: {error}"),
        Notice::Queued { issue, reason } => format!("#{issue} queued: {reason}"),
        Notice::Dequeued { issue, reason } => format!("#{issue} no longer queued: {reason}"),
        Notice::Refused { issue, reason } => format!("#{issue} not started: {reason}"),
        Notice::Started { issue, column } => format!(
            "#{issue} started{}",
            column
                .as_ref()
                .map(|c| format!(" in {c}"))
                .unwrap_or_default()
        ),
        Notice::Claimed {
            issue,
            holder,
            until,
        } => format!("#{issue} is claimed by watcher {holder} until {until}: left alone"),
        Notice::Stopping { issue, reason } => format!("#{issue} stopping: {reason}"),
        Notice::Finished {
            issue, end, pr_url, ..
        } => format!(
            "#{issue} finished: {end}{}",
            pr_url.as_ref().map(|u| format!(" {u}")).unwrap_or_default()
        ),
        Notice::Failed {
            issue,
            error,
            resumable,
        } => format!(
            "#{issue} failed: {error}{}",
            if *resumable {
                " (tried again at the next poll)"
            } else {
                ""
            }
        ),
        Notice::Dispatched { issue, workflow } => {
            format!("#{issue} dispatched to {workflow}")
        }
        Notice::Ignored { event, reason } => format!("{event} ignored: {reason}"),
        Notice::Draining { live } if live.is_empty() => "stopping".to_string(),
        Notice::Silent { issue, minutes, .. } => format!(
            "#{issue} has journalled nothing for {minutes} min: its agent or a gate may hang"
        ),
        Notice::Draining { live } => format!(
            "stopping: {} live run(s) stop at their next safe point and start again next time",
            live.len()
        ),
    }
}

async fn watch(args: WatchArgs) -> u8 {
    let engine = match Engine::start("watch", &args.repo_root, args.dispatch.is_none()).await {
        Ok(e) => e,
        Err(code) => return code,
    };
    let watch = &engine.project.settings.watch;
    let mode = match args.dispatch {
        None => Mode::Local,
        Some(DispatchTarget::Actions) => Mode::Actions {
            workflow: watch.dispatch_workflow.clone(),
            git_ref: args
                .dispatch_ref
                .clone()
                .unwrap_or_else(|| engine.project.settings.default_branch.clone()),
        },
    };
    let config = SchedulerConfig {
        max_concurrent: args
            .max_concurrent
            .map_or(watch.max_concurrent, |n| n as usize),
        poll_interval: args
            .interval
            .unwrap_or(Duration::from_secs(watch.poll_interval_sec)),
        once: args.once,
        mode,
    };
    errln!(
        "supervisor watch: board #{} of {}, trigger column(s) {}, up to {} run(s) at once",
        engine.project.settings.project_number,
        engine.project.settings.board_owner(),
        engine.project.trigger_columns().join(", "),
        config.max_concurrent
    );
    let scheduler = engine.scheduler(config, args.json);
    let served = match args.dashboard {
        Some(port) => match serve_dashboard(&engine, &scheduler, &args, port).await {
            Ok(served) => Some(served),
            Err(code) => return code,
        },
        None => None,
    };
    let outcome = scheduler.run(None, engine.shutdown.token()).await;
    if let Some(served) = served {
        served.stop.cancel();
        let _ = served.server.await;
    }
    exit_code(&outcome)
}

/// The dashboard of `watch --dashboard`, being served.
struct ServedDashboard {
    /// Ends the serving.
    stop: tokio_util::sync::CancellationToken,
    server: tokio::task::JoinHandle<()>,
    /// Removes the status file when dropped.
    _status_file: Option<crate::serve::dashboard::StatusGuard>,
}

/// The dashboard of `watch --dashboard PORT`, served until its `stop` is cancelled.
async fn serve_dashboard(
    engine: &Engine,
    scheduler: &Scheduler,
    args: &WatchArgs,
    port: u16,
) -> Result<ServedDashboard, u8> {
    use crate::serve::dashboard::{self, Dashboard, is_loopback, token_from_env};
    let bind = args.dashboard_bind;
    let token_env = args.dashboard_token_env.as_deref().or(engine
        .project
        .settings
        .watch
        .dashboard_token_env
        .as_deref());
    let token = match token_env {
        Some(name) => Some(token_from_env(name).map_err(|e| {
            errln!("supervisor watch: {e}");
            EXIT_USAGE
        })?),
        None if is_loopback(bind) => None,
        None => {
            errln!(
                "supervisor watch: the dashboard on {bind} would be open to other machines: name the environment variable holding its token with --dashboard-token-env (or watch.dashboardTokenEnv), or leave --dashboard-bind at 127.0.0.1"
            );
            return Err(EXIT_USAGE);
        }
    };
    let addr = SocketAddr::new(bind, port);
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
        errln!("supervisor watch: cannot serve the dashboard on {addr}: {e}: choose another --dashboard port or --dashboard-bind");
        EXIT_USAGE
    })?;
    let local = listener.local_addr().unwrap_or(addr);
    let stop = engine.shutdown.token().child_token();
    let router = dashboard::routes(Dashboard {
        monitor: scheduler.monitor(),
        repo_root: engine.project.root.clone(),
        token,
        stop: stop.clone(),
    })
    .route("/healthz", axum::routing::get(|| async { "ok\n" }));
    errln!("supervisor watch: serving the dashboard");
    let status_file = super::serve::published(&engine.project.root, "watch", local, token_env);
    let until = stop.clone();
    let server = tokio::spawn(async move {
        let served = axum::serve(listener, router)
            .with_graceful_shutdown(async move { until.cancelled().await })
            .await;
        if let Err(e) = served {
            errln!("supervisor watch: the dashboard stopped: {e}");
        }
    });
    Ok(ServedDashboard {
        stop,
        server,
        _status_file: status_file,
    })
}

/// 0 when the scheduler ended well; 3 when no poll ever succeeded; 1 when a run failed.
pub(super) fn exit_code(outcome: &Outcome) -> u8 {
    if outcome.never_polled && !outcome.drained {
        return EXIT_GITHUB;
    }
    if outcome.runs.iter().any(|(_, end)| end == "error") {
        return EXIT_STOPPED;
    }
    EXIT_OK
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("30"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("fast").unwrap_err().contains("30s"));
        assert!(parse_duration("3d").unwrap_err().contains("unknown unit"));
    }
}
