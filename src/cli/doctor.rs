//! `supervisor doctor`: every check a run needs, one line each with its fix; and the same checks as
//! `supervisor run`'s preflight.

use std::path::PathBuf;

use clap::Args;

use super::output::{err, errln, out, outln};
use super::run::{canonical, runtime};
use super::{EXIT_OK, EXIT_USAGE};
use crate::doctor::{Credentials, Findings, PushCheck, Subject, TokenKind, examine};
use crate::github::{ClientConfig, GitHub};
use crate::pipeline::{Project, process_env};
use crate::report;
use crate::workspace::PushAuth;

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Repository root (default: the current directory).
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub repo_root: PathBuf,
    /// Print the checks as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

pub(super) fn run(args: DoctorArgs) -> u8 {
    let root = canonical(&args.repo_root);
    let project = match Project::load(&root, &process_env) {
        Ok(p) => p,
        Err(e) => {
            if args.json {
                outln!("{}", report::errors_text(&e, true));
            } else {
                err!("{}", report::errors_text(&e, false));
                errln!(
                    "✖ settings  fix the configuration above (`supervisor init` writes a working one)"
                );
            }
            return EXIT_USAGE;
        }
    };
    let rt = match runtime("doctor") {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let findings = rt.block_on(async {
        let (github, credentials) = client(&project);
        let push_auth = match &github {
            Some(gh) => push_auth(gh).await,
            None => PushAuth::None,
        };
        examine(
            &subject(&project, github.as_ref(), credentials, &push_auth, true),
            None,
        )
        .await
    });
    if args.json {
        outln!(
            "{}",
            serde_json::json!({ "ok": findings.passed(), "checks": findings.checks })
        );
    } else {
        out!("{}", findings.text());
        if findings.passed() {
            outln!("ready: `supervisor run ISSUE` can start");
        }
    }
    if findings.passed() {
        EXIT_OK
    } else {
        EXIT_USAGE
    }
}

/// The GitHub client the environment's credentials make, and what those credentials are.
pub(super) fn client(project: &Project) -> (Option<GitHub>, Credentials) {
    let Ok(cfg) = ClientConfig::from_env(project.settings.repo.clone(), &process_env) else {
        return (None, Credentials::None);
    };
    let credentials = credentials_of(&cfg);
    if credentials == Credentials::None {
        return (None, credentials);
    }
    (GitHub::new(cfg).ok(), credentials)
}

/// What the environment's credentials are, without a client (which loads the system's roots).
pub(super) fn credentials(project: &Project) -> Credentials {
    ClientConfig::from_env(project.settings.repo.clone(), &process_env)
        .map_or(Credentials::None, |cfg| credentials_of(&cfg))
}

fn credentials_of(cfg: &ClientConfig) -> Credentials {
    if cfg.app.is_some() {
        Credentials::App
    } else if let Some(t) = &cfg.token {
        Credentials::Token {
            source: t.source().to_string(),
            kind: TokenKind::of(t.expose()),
        }
    } else {
        Credentials::None
    }
}

async fn push_auth(gh: &GitHub) -> PushAuth {
    match gh.access_token().await {
        Ok(Some(t)) => PushAuth::Token(t.expose().to_string()),
        _ => PushAuth::None,
    }
}

/// What the checks run against.
pub(super) fn subject<'a>(
    project: &'a Project,
    github: Option<&'a GitHub>,
    credentials: Credentials,
    push_auth: &'a PushAuth,
    full: bool,
) -> Subject<'a> {
    Subject {
        project,
        github,
        credentials,
        push_auth,
        agent_env: crate::agent::agent_env_from(&project.settings, None, &process_env),
        codeowners: full,
        agents: full,
    }
}

/// `run`'s preflight: the failures, printed with their fixes; `None` when the run may start.
pub(super) async fn preflight(
    project: &Project,
    github: &GitHub,
    credentials: Credentials,
    push_auth: &PushAuth,
    started_push: Option<PushCheck>,
) -> Option<Findings> {
    let findings = examine(
        &subject(project, Some(github), credentials, push_auth, false),
        started_push,
    )
    .await;
    if findings.passed() {
        return None;
    }
    errln!(
        "supervisor run: refused before writing anything; `supervisor doctor` shows every check:"
    );
    for c in findings.failures() {
        errln!("✖ {}  {}", c.name, c.detail);
        if let Some(fix) = &c.fix {
            errln!("    fix: {fix}");
        }
    }
    Some(findings)
}
