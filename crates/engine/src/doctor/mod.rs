//! What a run needs, checked before anything is written: credentials and what they may do, the
//! repository, the board and its columns, the codeowners, push access, the agent CLIs, the gate
//! tools and the worktree root. `supervisor doctor` prints every check; `supervisor run` performs
//! the same checks (the codeowners aside: admission already refuses an issue nobody trusted opened)
//! and refuses with the fixes before its first write.

use std::collections::BTreeSet;
use std::path::Path;

use serde::Serialize;

use crate::config::{GateKind, Settings};
use crate::gates::{ChangeSet, GateContext, gate_tools};
use crate::github::{AccountKind, BoardRef, GitHub, GitHubError, Viewer};
use crate::pipeline::Project;
use crate::workspace::{PushAuth, WorkspaceConfig, push_probe};

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Mark {
    Ok,
    /// Works, with a caveat (a gate that will not run, a key that may be elsewhere).
    Warn,
    /// A run would fail here.
    Fail,
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub(crate) mark: Mark,
    pub detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Check {
    fn ok(name: &'static str, detail: impl Into<String>) -> Check {
        Check {
            name,
            mark: Mark::Ok,
            detail: detail.into(),
            fix: None,
        }
    }

    fn warn(name: &'static str, detail: impl Into<String>, fix: impl Into<String>) -> Check {
        Check {
            name,
            mark: Mark::Warn,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }

    fn fail(name: &'static str, detail: impl Into<String>, fix: impl Into<String>) -> Check {
        Check {
            name,
            mark: Mark::Fail,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }
}

/// Every check, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Findings {
    pub checks: Vec<Check>,
}

impl Findings {
    /// Whether nothing failed.
    pub fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.mark != Mark::Fail)
    }

    /// Whether a failure is GitHub's side (credentials, repository, board, people) rather than
    /// this machine's (agents, tools, push, worktrees).
    pub fn github_failed(&self) -> bool {
        self.failures().any(|c| {
            matches!(
                c.name,
                "token" | "scopes" | "repository" | "board" | "columns" | "codeowners"
            )
        })
    }

    pub fn failures(&self) -> impl Iterator<Item = &Check> {
        self.checks.iter().filter(|c| c.mark == Mark::Fail)
    }

    /// One line per check (✔, ! or ✖), each failure and warning followed by its fix.
    pub fn text(&self) -> String {
        let width = self.checks.iter().map(|c| c.name.len()).max().unwrap_or(0);
        let mut out = String::new();
        for c in &self.checks {
            let mark = match c.mark {
                Mark::Ok => "✔",
                Mark::Warn => "!",
                Mark::Fail => "✖",
            };
            out.push_str(&format!("{mark} {:width$}  {}\n", c.name, c.detail));
            if let Some(fix) = c.fix.as_ref().filter(|_| c.mark != Mark::Ok) {
                out.push_str(&format!("  {:width$}  fix: {fix}\n", ""));
            }
        }
        out
    }
}

/// The credentials as found in the environment (never the token itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credentials {
    None,
    /// A token: where it came from and its kind by its prefix.
    Token {
        source: String,
        kind: TokenKind,
    },
    App,
}

/// A token's kind, told by its prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    Classic,
    FineGrained,
    /// `gho_`: an OAuth token, as `gh auth login` makes.
    OAuth,
    /// `ghs_`: a GitHub App installation token.
    Installation,
    Other,
}

impl TokenKind {
    pub fn of(token: &str) -> TokenKind {
        match token {
            t if t.starts_with("ghp_") => TokenKind::Classic,
            t if t.starts_with("github_pat_") => TokenKind::FineGrained,
            t if t.starts_with("gho_") || t.starts_with("ghu_") => TokenKind::OAuth,
            t if t.starts_with("ghs_") => TokenKind::Installation,
            _ => TokenKind::Other,
        }
    }

    fn describe(self) -> &'static str {
        match self {
            TokenKind::Classic => "classic personal access token",
            TokenKind::FineGrained => "fine-grained personal access token",
            TokenKind::OAuth => "OAuth token (gh CLI)",
            TokenKind::Installation => "GitHub App installation token",
            TokenKind::Other => "token",
        }
    }
}

/// What the checks run against.
pub struct Subject<'a> {
    pub project: &'a Project,
    /// `None` when no client could be made (no credentials): the GitHub checks fail at once.
    pub github: Option<&'a GitHub>,
    pub credentials: Credentials,
    pub push_auth: &'a PushAuth,
    /// The environment agents are started with (their PATH and provider keys).
    pub agent_env: Vec<(String, String)>,
    /// Check that every codeowner exists (`doctor`; `run` leaves it to admission).
    pub codeowners: bool,
    /// Check the agent CLIs (`doctor`; `run` has checked them already, before connecting).
    pub agents: bool,
}

const TOKEN_FIX: &str = "export GH_TOKEN=<a classic token with the repo and project scopes> \
    (https://github.com/settings/tokens), or `gh auth login --scopes project`, or a GitHub App \
    (SUPERVISOR_APP_ID and SUPERVISOR_APP_PRIVATE_KEY); see the README, GitHub access";

/// Run every check; the push check is `started_push` when it was started already (see
/// [`start_push_check`]).
pub async fn examine(s: &Subject<'_>, started_push: Option<PushCheck>) -> Findings {
    let mut f = Findings::default();
    let settings = &s.project.settings;
    f.checks.push(credentials_check(&s.credentials));
    let ws = WorkspaceConfig::from_settings(&s.project.root, settings);
    // GitHub's answers, the push over the network and the tools' versions are awaited together;
    // the checks are listed in the same order whichever comes first.
    let github = async {
        let mut g = Findings::default();
        if let Some(gh) = s.github {
            github_checks(s, gh, &mut g).await;
        }
        g.checks
    };
    let agents = async {
        if s.agents {
            agent_checks(s.project).await
        } else {
            Vec::new()
        }
    };
    let push = async {
        match started_push {
            Some(started) => started.await.unwrap_or_else(|e| {
                Check::fail("push", format!("the push probe failed: {e}"), "run again")
            }),
            None => push_check(&ws, s.push_auth).await,
        }
    };
    let (github, push, agents, gates) =
        tokio::join!(github, push, agents, gate_checks(s.project, &s.agent_env));
    f.checks.extend(github);
    f.checks.push(push);
    f.checks.extend(agents);
    f.checks.extend(gates);
    f.checks.push(worktree_root_check(&ws.worktree_root));
    f
}

fn credentials_check(c: &Credentials) -> Check {
    match c {
        Credentials::None => Check::fail("token", "no GitHub credentials found", TOKEN_FIX),
        Credentials::App => Check::ok("token", "GitHub App (installation tokens minted as needed)"),
        Credentials::Token { source, kind } => {
            Check::ok("token", format!("{} from {source}", kind.describe()))
        }
    }
}

async fn github_checks(s: &Subject<'_>, gh: &GitHub, f: &mut Findings) {
    let settings = &s.project.settings;
    let app = matches!(s.credentials, Credentials::App)
        || matches!(
            s.credentials,
            Credentials::Token {
                kind: TokenKind::Installation,
                ..
            }
        );
    // One request answers who the token is, its scopes, its permission on the repository and the
    // board; the repository is asked on its own only when that answer lacks it.
    let board = BoardRef::from_settings(settings);
    let app_on_user_board = app
        && matches!(
            gh.account(&board.owner).await,
            Ok(Some((AccountKind::User, _)))
        );
    let (board_field, repository) = if app_on_user_board {
        (None, None)
    } else {
        match gh.board_and_repository(&board).await {
            Ok((field, repository)) => (Some(field), repository),
            Err(e) => (Some(Err(e)), None),
        }
    };
    let repository = match repository {
        Some(info) => Ok(info),
        None => gh.repository_info().await,
    };
    if !app {
        let viewer = match &repository {
            Ok(info) => Ok(info.viewer.clone()),
            // The repository could not be read: ask who the token is on its own.
            Err(_) => gh.viewer().await,
        };
        match viewer {
            Ok(viewer) => {
                f.checks.push(scopes_check(&viewer, uses_ci(s.project)));
                if s.codeowners {
                    f.checks.push(revise_check(settings, Some(&viewer.login)));
                }
            }
            Err(e) => f.checks.push(Check::fail(
                "scopes",
                format!("GitHub refused the token: {e}"),
                TOKEN_FIX,
            )),
        }
    } else {
        if uses_ci(s.project) {
            f.checks.push(Check::warn(
                "scopes",
                "a GitHub App's permissions are not listed to it; the reads below check most of them",
                "give the App Issues, Pull requests and Contents write, Projects read and write, and Checks read (the ci gate)",
            ));
        }
        if s.codeowners {
            f.checks.push(revise_check(settings, None));
        }
    }
    f.checks.push(match repository {
        Ok(info) => match info.permission.as_deref() {
            Some(p @ ("READ" | "TRIAGE")) => Check::fail(
                "repository",
                format!("{} reachable, but the token may only {} it", settings.repo, p.to_lowercase()),
                "use credentials with write access to the repository (contents, issues, pull requests)",
            ),
            p => Check::ok(
                "repository",
                format!("{} ({})", settings.repo, p.unwrap_or("permission not given").to_lowercase()),
            ),
        },
        Err(e) => Check::fail("repository", e.to_string(), repo_fix(&e)),
    });
    let Some(board_field) = board_field else {
        f.checks.push(Check::fail(
            "board",
            format!("the board belongs to the user {}: GitHub Apps cannot reach boards owned by a user", board.owner),
            "use a classic token with the project scope for a user's board, or move the board to an organization (and set projectOwner)",
        ));
        return board_owner_done(s, gh, f).await;
    };
    match board_field {
        Ok((_, _, options)) => {
            let names: Vec<String> = options.into_iter().map(|o| o.name).collect();
            f.checks.push(Check::ok(
                "board",
                format!(
                    "project #{} of {}, field \"{}\": {}",
                    board.number,
                    board.owner,
                    board.status_field,
                    names.join(", ")
                ),
            ));
            f.checks.push(columns_check(s.project, &names));
        }
        Err(e) => f
            .checks
            .push(Check::fail("board", e.to_string(), board_fix(&e))),
    }
    board_owner_done(s, gh, f).await;
}

/// The checks after the board: codeowners.
async fn board_owner_done(s: &Subject<'_>, gh: &GitHub, f: &mut Findings) {
    if !s.codeowners {
        return;
    }
    let mut missing = Vec::new();
    for login in &s.project.settings.codeowners {
        match gh.user_exists(login).await {
            Ok(true) => {}
            Ok(false) => missing.push(login.clone()),
            Err(e) => {
                f.checks.push(Check::fail(
                    "codeowners",
                    format!("cannot look {login} up: {e}"),
                    "check the network and the token",
                ));
                return;
            }
        }
    }
    f.checks.push(if missing.is_empty() {
        Check::ok("codeowners", s.project.settings.codeowners.join(", "))
    } else {
        Check::fail(
            "codeowners",
            format!("no GitHub user {}", missing.join(", ")),
            "list GitHub logins in codeowners (without @), e.g. the output of `gh api user --jq .login`",
        )
    })
}

/// How a codeowner asks for a revision: supervisor's pull requests are opened by the token's
/// account, and GitHub refuses a "Request changes" review of one's own pull request. `login` is the
/// token's account; `None` for a GitHub App, whose bot opens them.
fn revise_check(settings: &Settings, login: Option<&str>) -> Check {
    match login {
        None => Check::ok(
            "revise",
            "pull requests are opened by the App's bot: a codeowner's \"Request changes\" review, or `/supervisor revise <what to change>`, asks for a revision",
        ),
        Some(login) if settings.is_codeowner(login) => Check::warn(
            "revise",
            format!(
                "pull requests are opened by {login}, a codeowner: GitHub refuses {login}'s \"Request changes\" on them (\"Can not request changes on your own pull request\")"
            ),
            format!(
                "{login} asks for a revision with a comment `/supervisor revise <what to change>` (it starts one under `serve` and the Action's comment workflow) or a \"Comment\" review (read by the next `supervisor revise`); or let a GitHub App open the pull requests"
            ),
        ),
        Some(login) => Check::ok(
            "revise",
            format!(
                "pull requests are opened by {login}: a codeowner's \"Request changes\" review, or `/supervisor revise <what to change>`, asks for a revision"
            ),
        ),
    }
}

fn uses_ci(project: &Project) -> bool {
    project.settings.ci_gating_timeout_sec > 0
        && project
            .workflow
            .stages
            .iter()
            .flat_map(|s| &s.hooks)
            .any(|h| h.gate == GateKind::Ci)
}

fn scopes_check(viewer: &Viewer, ci: bool) -> Check {
    let Some(scopes) = &viewer.scopes else {
        return Check::ok(
            "scopes",
            format!(
                "signed in as {}; a fine-grained token lists no scopes: it needs Issues, Pull requests and Contents write, Projects read and write{}",
                viewer.login,
                if ci { ", Checks read" } else { "" }
            ),
        );
    };
    let has = |s: &str| scopes.iter().any(|x| x == s);
    let mut missing = Vec::new();
    if !has("repo") && !has("public_repo") {
        missing.push("repo");
    }
    if !has("project") {
        missing.push("project");
    }
    if missing.is_empty() {
        Check::ok(
            "scopes",
            format!("signed in as {}: {}", viewer.login, scopes.join(", ")),
        )
    } else {
        Check::fail(
            "scopes",
            format!(
                "signed in as {}; GitHub token missing {} scope (has: {})",
                viewer.login,
                missing
                    .iter()
                    .map(|m| format!("'{m}'"))
                    .collect::<Vec<_>>()
                    .join(" and "),
                if scopes.is_empty() {
                    "none".into()
                } else {
                    scopes.join(", ")
                }
            ),
            format!(
                "gh token: `gh auth refresh -s {}`; classic token: add the scope at https://github.com/settings/tokens",
                missing.join(",")
            ),
        )
    }
}

fn repo_fix(e: &GitHubError) -> String {
    match e {
        GitHubError::RepoNotFound { .. } => {
            "check `repo` in the settings (owner/name) and that the token can see the repository"
                .into()
        }
        _ => "check the token and GITHUB_API_URL".into(),
    }
}

fn board_fix(e: &GitHubError) -> String {
    match e {
        GitHubError::BoardNotFound { .. } => "create one with `supervisor init --create-board`, or set projectNumber (and projectOwner) to the board in its URL".into(),
        GitHubError::StatusFieldNotFound { .. } => "add a single-select field for the columns to the board, or name it in statusField".into(),
        GitHubError::MissingScope { hint, .. } => hint.clone(),
        _ => "check the token's Projects access (classic token: the project scope)".into(),
    }
}

/// Every stage of the workflow has an option of the status field to stand in.
fn columns_check(project: &Project, options: &[String]) -> Check {
    let settings: &Settings = &project.settings;
    let missing: Vec<String> = project
        .workflow
        .stages
        .iter()
        .filter(|st| !st.experimental || settings.enable_experimental_features)
        .map(|st| (st.status.as_str(), settings.board_option_name(&st.status)))
        .filter(|(_, option)| !options.iter().any(|o| o.eq_ignore_ascii_case(option)))
        .map(|(stage, option)| {
            if stage == option {
                stage.to_string()
            } else {
                format!("{stage} (mapped to \"{option}\")")
            }
        })
        .collect();
    if missing.is_empty() {
        let mapped = project
            .workflow
            .stages
            .iter()
            .filter(|st| settings.board_option_name(&st.status) != st.status)
            .map(|st| format!("{} → {}", st.status, settings.board_option_name(&st.status)))
            .collect::<Vec<_>>();
        let detail = if mapped.is_empty() {
            "every stage of the workflow has its column".to_string()
        } else {
            format!("every stage has its column ({})", mapped.join(", "))
        };
        return Check::ok("columns", detail);
    }
    Check::fail(
        "columns",
        format!("no column on the board for {}", missing.join(", ")),
        "run `supervisor init`: it maps stages to the board's columns (the `columns` setting, e.g. { \"Backlog\": \"Todo\" }) and, with --add-columns, adds the missing ones",
    )
}

/// A push check under way.
pub type PushCheck = tokio::task::JoinHandle<Check>;

/// Start the push check (`git push --dry-run`) now, to hand to [`examine`] later.
pub fn start_push_check(ws: WorkspaceConfig, auth: PushAuth) -> PushCheck {
    tokio::spawn(async move { push_check(&ws, &auth).await })
}

async fn push_check(ws: &WorkspaceConfig, auth: &PushAuth) -> Check {
    let (ws2, auth2) = (ws.clone(), auth.clone());
    let probe = tokio::task::spawn_blocking(move || push_probe(&ws2, &auth2)).await;
    match probe {
        Ok(Ok(())) => Check::ok(
            "push",
            format!("`git push --dry-run` to {} works", ws.push_url),
        ),
        Ok(Err(e)) => Check::fail(
            "push",
            format!("`git push --dry-run` to {} failed: {e}", ws.push_url),
            "check that the credentials may push there; the destination is the settings' `gitUrl`, else the repository on the GitHub host (GITHUB_SERVER_URL, GITHUB_API_URL)",
        ),
        Err(e) => Check::fail("push", format!("the push probe failed: {e}"), "run again"),
    }
}

fn env_lookup<'a>(env: &'a [(String, String)], key: &str) -> Option<&'a str> {
    env.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

/// Each agent CLI the workflow uses (the agents' own preflight): on the agents' PATH, its version,
/// and a provider key among the variables agents receive.
async fn agent_checks(project: &Project) -> Vec<Check> {
    let pf = crate::agent::preflight(&project.settings, &project.roles, &project.root).await;
    let mut checks: Vec<Check> = pf
        .backends
        .iter()
        .chain(&pf.sandbox)
        .map(|b| match b.problem() {
            Some(p) => Check::fail(
                "agent",
                format!("{} ({}): {p}", b.name, b.roles.join(", ")),
                "install the CLI where the agents' PATH finds it, or set agentBackend (or a role's backend) to one you have",
            ),
            None => Check::ok(
                "agent",
                format!(
                    "{}: {} ({})",
                    b.name,
                    b.path.as_ref().map_or("found".into(), |p| p.display().to_string()),
                    b.version().unwrap_or("version unknown")
                ),
            ),
        })
        .collect();
    for missing in &pf.keys {
        checks.push(Check::fail(
            "agent",
            missing.clone(),
            "give the agents the provider's key (or log the CLI in) as the message says; `supervisor run` refuses until then",
        ));
    }
    checks
}

/// Each gate tool the workflow runs: where it was found, or that its gate will be not run.
async fn gate_checks(project: &Project, env: &[(String, String)]) -> Vec<Check> {
    let state_dir = project.root.join(".supervisor").join("gates");
    let session = crate::gates::GateSession::new(
        Some(&project.root),
        &state_dir,
        crate::gates::ToolEnv::for_settings(&project.settings, None),
    )
    .with_sandbox(crate::agent::Sandbox::from_settings(&project.settings));
    let ctx = GateContext {
        session,
        dir: project.root.clone(),
        changes: ChangeSet::default(),
        issue: None,
        settings: project.settings.gates.clone(),
        ci: None,
        state_dir,
        search_path: env_lookup(env, "PATH").map(Into::into),
        proof: None,
    };
    let mut seen = BTreeSet::new();
    let mut checks = Vec::new();
    for hook in project.workflow.stages.iter().flat_map(|s| &s.hooks) {
        for (spec, found) in gate_tools(hook.gate, &ctx).await {
            let tool = spec.bin;
            if !seen.insert(tool) {
                continue;
            }
            let install = format!(
                "install it: {}",
                crate::gates::install_hint(&[spec], &project.root)
            );
            checks.push(match found {
                Ok(place) => Check::ok("gate tool", format!("{tool}: {place}")),
                Err(why) if hook.required => Check::fail(
                    "gate tool",
                    format!(
                        "{tool}: {why}; the required {} gate would block every run",
                        hook.name
                    ),
                    format!("{install}; or make the hook optional"),
                ),
                Err(why) => Check::warn(
                    "gate tool",
                    format!("{tool}: {why}; the {} gate will be not run", hook.name),
                    install,
                ),
            });
        }
    }
    checks.extend(runner_check(project));
    checks
}

/// The test runner the oracle's `red` and `green` will run, when the workflow has them: a
/// repository whose tests no runner reads would stop every run at TestDesign.
fn runner_check(project: &Project) -> Option<Check> {
    use crate::config::GateKind;
    let hooks: Vec<&crate::config::Hook> = project
        .workflow
        .stages
        .iter()
        .flat_map(|s| &s.hooks)
        .filter(|h| matches!(h.gate, GateKind::Red | GateKind::Green))
        .collect();
    if hooks.is_empty() {
        return None;
    }
    let fix = "name the project's test command in the workflow (\"verify\": { \"command\": …, \"report\": \"junit:PATH\" }), or use config/workflow-without-oracle.json";
    Some(
        match crate::verify::Project::new(&project.root, project.workflow.verify.as_ref()) {
            Ok(p) => Check::ok(
                "test runner",
                format!("{}: red and green run the tests with it", p.runner.name()),
            ),
            Err(e) if hooks.iter().any(|h| h.required) => Check::fail(
                "test runner",
                format!("{e}; the required red and green gates would stop every run"),
                fix,
            ),
            Err(e) => Check::warn(
                "test runner",
                format!("{e}; red and green will be not run"),
                fix,
            ),
        },
    )
}

fn worktree_root_check(root: &Path) -> Check {
    let probe = root.join(format!(".supervisor-probe-{}", std::process::id()));
    let made = std::fs::create_dir_all(root).and_then(|()| std::fs::write(&probe, b""));
    let _ = std::fs::remove_file(&probe);
    match made {
        Ok(()) => Check::ok("worktrees", format!("{} is writable", root.display())),
        Err(e) => Check::fail(
            "worktrees",
            format!("cannot write in {}: {e}", root.display()),
            "set worktreeRoot to a writable directory",
        ),
    }
}

/// How the workflow's stages sit on a board's options: `columns` (stage → option, only where the
/// names differ) and the stages no option stands for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ColumnPlan {
    pub columns: std::collections::BTreeMap<String, String>,
    pub missing: Vec<String>,
}

/// Map `stages` onto `options`: the same name (ignoring case), else GitHub's default names
/// (`Todo` for Backlog), else nothing. Each option stands for one stage at most.
pub fn map_columns(stages: &[String], options: &[String]) -> ColumnPlan {
    let mut plan = ColumnPlan::default();
    let mut taken: Vec<&str> = Vec::new();
    let find = |name: &str, taken: &[&str]| {
        options
            .iter()
            .find(|o| o.eq_ignore_ascii_case(name) && !taken.contains(&o.as_str()))
            .cloned()
    };
    // Exact names first, so a default alias never takes an option a stage is named after.
    let mut exact: Vec<Option<String>> = Vec::new();
    for stage in stages {
        let found = find(stage, &taken);
        if let Some(o) = &found {
            taken.push(
                options
                    .iter()
                    .find(|x| *x == o)
                    .map(String::as_str)
                    .unwrap_or(""),
            );
        }
        exact.push(found);
    }
    for (stage, found) in stages.iter().zip(exact) {
        let option = found.or_else(|| {
            let alias = match stage.as_str() {
                "Backlog" => "Todo",
                _ => return None,
            };
            let o = find(alias, &taken)?;
            taken.push(
                options
                    .iter()
                    .find(|x| **x == o)
                    .map(String::as_str)
                    .unwrap_or(""),
            );
            Some(o)
        });
        match option {
            Some(o) if o != *stage => {
                plan.columns.insert(stage.clone(), o);
            }
            Some(_) => {}
            None => plan.missing.push(stage.clone()),
        }
    }
    plan
}

/// The option list with the missing stages added: each goes before the option of the first
/// later stage already on the board (so Done stays last), else at the end.
pub fn with_missing(stages: &[String], options: &[String], plan: &ColumnPlan) -> Vec<String> {
    let mut out = options.to_vec();
    for (i, stage) in stages.iter().enumerate() {
        if !plan.missing.contains(stage) {
            continue;
        }
        let later = stages[i + 1..]
            .iter()
            .filter(|s| !plan.missing.contains(s))
            .map(|s| plan.columns.get(s).unwrap_or(s))
            .find_map(|o| out.iter().position(|x| x.eq_ignore_ascii_case(o)));
        match later {
            Some(at) => out.insert(at, stage.clone()),
            None => out.push(stage.clone()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn githubs_default_board_maps_backlog_and_done_and_adds_the_rest_before_done() {
        let stages: Vec<String> = crate::config::Workflow::builtin(&Default::default())
            .stages
            .into_iter()
            .map(|s| s.status)
            .collect();
        let options = names(&["Todo", "In Progress", "Done"]);
        let plan = map_columns(&stages, &options);
        assert_eq!(
            plan.columns.get("Backlog").map(String::as_str),
            Some("Todo")
        );
        assert_eq!(plan.columns.len(), 1);
        // Every stage between Backlog and Done is missing, and goes in before Done.
        let between = &stages[1..stages.len() - 1];
        assert_eq!(plan.missing, between);
        let mut expected = names(&["Todo", "In Progress"]);
        expected.extend(between.iter().cloned());
        expected.push("Done".into());
        assert_eq!(with_missing(&stages, &options, &plan), expected);
        // A board named like the workflow needs no mapping; an option is never used twice.
        let plan = map_columns(&stages, &stages);
        assert!(plan.columns.is_empty() && plan.missing.is_empty());
        let plan = map_columns(&names(&["Backlog", "Todo"]), &names(&["Todo"]));
        assert_eq!(plan.missing, names(&["Backlog"]));
    }
}
