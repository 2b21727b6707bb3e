//! `supervisor serve`: the webhook receiver on a port, its events consumed by the scheduler (with a
//! slow board poll as a safety net), until Ctrl-C or SIGTERM, which drain. Each event it queues is
//! printed (on stderr, or as a JSON line on stdout with `--json`).

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use tokio::sync::mpsc;

use super::number::{PORT, number};
use super::output::{errln, outln};
use super::watch::{Engine, exit_code};
use super::{EXIT_STOPPED, EXIT_USAGE};
use crate::events::{CommandSyntax, WebhookOptions, WebhookSecret};
use crate::pipeline::Project;
use crate::scheduler::{Mode, Outcome, SchedulerConfig};
use crate::serve::dashboard::{self, Dashboard, StatusFile, is_loopback, token_from_env};
use crate::serve::{Receiver, ReceiverConfig};

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The environment variable holding the webhook's secret (as set in GitHub's webhook settings).
    #[arg(long, value_name = "NAME")]
    pub webhook_secret_env: String,
    /// Port to listen on; 0 picks a free one.
    #[arg(long, default_value_t = 8080, value_parser = number::<u16>(PORT))]
    pub port: u16,
    /// Address to listen on: 0.0.0.0 to take deliveries from other machines directly.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1")]
    pub bind: IpAddr,
    /// Repository root (default: the current directory).
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub repo_root: PathBuf,
    /// Print each queued event as a JSON line on stdout.
    #[arg(long)]
    pub json: bool,
    /// The environment variable holding the dashboard's token [default:
    /// watch.dashboardTokenEnv]; without one, the dashboard and `/metrics` are served on
    /// loopback only.
    #[arg(long, value_name = "NAME")]
    pub dashboard_token_env: Option<String>,
}

pub(super) fn run(args: ServeArgs) -> u8 {
    let project = match Engine::load(&args.repo_root) {
        Ok(project) => project,
        Err(code) => return code,
    };
    let settings = &project.settings;
    let value = crate::process::secret(&args.webhook_secret_env).map(str::to_owned);
    let secret = match value
        .ok_or(())
        .or_else(|_| std::env::var(&args.webhook_secret_env))
    {
        Ok(value) => match WebhookSecret::new(value) {
            Ok(secret) => secret,
            Err(e) => {
                errln!("supervisor serve: ${}: {e}", args.webhook_secret_env);
                return EXIT_USAGE;
            }
        },
        Err(_) => {
            errln!(
                "supervisor serve: the environment variable {} is not set (or not UTF-8): put the webhook's secret in it",
                args.webhook_secret_env
            );
            return EXIT_USAGE;
        }
    };
    let commands = match CommandSyntax::new(&settings.watch.command_prefix) {
        Ok(syntax) => syntax,
        Err(e) => {
            errln!("supervisor serve: watch.commandPrefix: {e}");
            return EXIT_USAGE;
        }
    };
    let webhook = WebhookOptions {
        commands,
        status_field: settings.status_field.clone(),
        trigger_label: settings.watch.trigger_label.clone(),
        epic_label: Some(settings.epic.label.clone()),
    };
    let config = ReceiverConfig::new(secret, webhook);
    let runtime = match super::run::runtime("serve") {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    runtime.block_on(serve(config, project, &args))
}

async fn serve(config: ReceiverConfig, project: Project, args: &ServeArgs) -> u8 {
    let engine = match Engine::connect("serve", project, true).await {
        Ok(e) => e,
        Err(code) => return code,
    };
    let addr = SocketAddr::new(args.bind, args.port);
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => {
            errln!(
                "supervisor serve: cannot listen on {addr}: {e}: choose another --port or --bind"
            );
            return EXIT_USAGE;
        }
    };
    let local = listener.local_addr().unwrap_or(addr);
    let watch = &engine.project.settings.watch;
    let scheduler = engine.scheduler(
        SchedulerConfig {
            max_concurrent: watch.max_concurrent,
            poll_interval: Duration::from_secs(watch.serve_poll_interval_sec),
            once: false,
            mode: Mode::Local,
        },
        args.json,
    );
    let config = config.status_section("scheduler", scheduler.status());
    let (router, mut received) = Receiver::new(config);
    let stop = engine.shutdown.token();
    let token_env = args
        .dashboard_token_env
        .as_deref()
        .or(watch.dashboard_token_env.as_deref());
    let token = match token_env.map(token_from_env).transpose() {
        Ok(token) => token,
        Err(e) => {
            errln!("supervisor serve: {e}");
            return EXIT_USAGE;
        }
    };
    let dashboard = token.is_some() || is_loopback(args.bind);
    let router = if dashboard {
        router.merge(dashboard::routes(Dashboard {
            monitor: scheduler.monitor(),
            repo_root: engine.project.root.clone(),
            token: token.clone(),
            stop: stop.clone(),
        }))
    } else {
        router
    };
    let _status_file = if dashboard {
        published(&engine.project.root, "serve", local, token_env)
    } else {
        None
    };
    // Each event is shown, then handed to the scheduler.
    let (to_scheduler, events) = mpsc::channel(ReceiverConfig::DEFAULT_QUEUE_CAPACITY);
    let json = args.json;
    let forward = tokio::spawn(async move {
        while let Some(event) = received.recv().await {
            if json {
                match serde_json::to_string(&event) {
                    Ok(line) => outln!("{line}"),
                    Err(e) => errln!("event not printable as JSON: {e}"),
                }
            } else {
                errln!("event: {event}");
            }
            if to_scheduler.send(event).await.is_err() {
                break;
            }
        }
    });
    errln!("supervisor serve: listening on http://{local}");
    errln!(
        "  webhook URL: http(s)://<this host>/webhook (content type application/json, the secret, events: {})",
        crate::serve::SUBSCRIBED_EVENTS.join(", ")
    );
    errln!("  GET /healthz, GET /status");
    if !dashboard {
        errln!(
            "  no dashboard nor /metrics: on {} they need a token (--dashboard-token-env or watch.dashboardTokenEnv)",
            args.bind
        );
    }
    let scheduling = tokio::spawn(scheduler.run(Some(events), stop.clone()));
    let served = axum::serve(listener, router)
        .with_graceful_shutdown(async move { stop.cancelled().await })
        .await;
    // The router and its queue's sending end are gone: the forwarder ends, the scheduler drains.
    let _ = forward.await;
    let outcome = scheduling.await.unwrap_or_default();
    match served {
        Ok(()) => {
            errln!("supervisor serve: stopped");
            exit_code(&Outcome {
                never_polled: false,
                ..outcome
            })
        }
        Err(e) => {
            errln!("supervisor serve: {e}");
            EXIT_STOPPED
        }
    }
}

/// Say where the dashboard is: on stderr, and in `.supervisor/watch/status.json` (for
/// `supervisor status`) until the returned guard is dropped. `token_env`: the variable holding
/// the token it asks for.
pub(super) fn published(
    repo_root: &std::path::Path,
    command: &str,
    local: SocketAddr,
    token_env: Option<&str>,
) -> Option<dashboard::StatusGuard> {
    errln!(
        "  dashboard: {}/dashboard{}; GET /metrics, GET /api/state (`supervisor status`)",
        StatusFile::url_of(local),
        if token_env.is_some() {
            " (with its token)"
        } else {
            ""
        }
    );
    let file = StatusFile {
        url: StatusFile::url_of(local),
        pid: std::process::id(),
        command: command.to_string(),
        started_at: chrono::Utc::now().to_rfc3339(),
        token_env: token_env.map(str::to_string),
    };
    match file.write(repo_root) {
        Ok(guard) => Some(guard),
        Err(e) => {
            errln!(
                "warning: cannot write {}: {e}; `supervisor status` needs --url",
                StatusFile::path(repo_root).display()
            );
            None
        }
    }
}
