//! What can go wrong talking to GitHub, with messages that say what to do.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::config::RepoSlug;

/// How to give a token the `project` scope, for every kind of credential.
pub const PROJECT_SCOPE_HINT: &str = "moving cards on a Projects (v2) board needs it. \
gh CLI token: run `gh auth refresh -s project`; classic personal access token: tick the `project` scope at \
https://github.com/settings/tokens; fine-grained token or GitHub App: grant Projects read and write on the \
board's owner (organization permission \"Projects\", or the user's projects). The GITHUB_TOKEN of GitHub \
Actions cannot reach Projects (v2) at all: use a GitHub App (SUPERVISOR_APP_ID + SUPERVISOR_APP_PRIVATE_KEY) \
or a personal access token";

/// An error from the GitHub layer.
#[derive(Debug, thiserror::Error)]
pub enum GitHubError {
    #[error(
        "Issue #{number} does not exist in {repo} (or the token cannot read it): check the number"
    )]
    IssueNotFound { repo: RepoSlug, number: u64 },

    #[error("Pull request #{number} not found in {repo}")]
    PullNotFound { repo: RepoSlug, number: u64 },

    #[error(
        "Repository {repo} not found: check `repo` in the settings and that the token can read it"
    )]
    RepoNotFound { repo: RepoSlug },

    #[error("GitHub token missing '{scope}' scope: {hint}")]
    MissingScope { scope: String, hint: String },

    #[error(
        "Issue #{issue} is not on project board #{project}: add the issue to the board, or run again with --add-to-board (supervisor adds it to Backlog)"
    )]
    NotOnBoard { issue: u64, project: u64 },

    #[error(
        "Project board #{number} of {owner} not found: check `projectNumber`/`projectOwner` in the settings and that the token can see the board"
    )]
    BoardNotFound { owner: String, number: u64 },

    #[error(
        "Project board #{project} has no single-select field named `{field}`: set `statusField` in the settings to the board's column field"
    )]
    StatusFieldNotFound { project: u64, field: String },

    #[error("Column `{column}` is not an option of field `{field}` on the board; its options are: {}", .options.join(", "))]
    UnknownColumn {
        column: String,
        field: String,
        options: Vec<String>,
    },

    #[error("{}", rate_limit_text(.route, *.secondary, .reset_at, .retry_after))]
    RateLimited {
        route: String,
        /// A secondary (abuse) limit rather than the hourly quota.
        secondary: bool,
        /// When the hourly quota resets, if GitHub said.
        reset_at: Option<DateTime<Utc>>,
        /// How long GitHub asked us to wait, if it said.
        retry_after: Option<Duration>,
    },

    #[error(
        "GitHub refused the credentials ({message}) on {route}: check GH_TOKEN / GITHUB_TOKEN or `gh auth status`; the token may have expired or been revoked"
    )]
    Unauthorized { route: String, message: String },

    #[error(
        "No GitHub credentials: set GH_TOKEN or GITHUB_TOKEN, log in with `gh auth login`, or configure a GitHub App (SUPERVISOR_APP_ID and SUPERVISOR_APP_PRIVATE_KEY)"
    )]
    NoCredentials,

    #[error("GitHub App authentication failed: {detail}")]
    AppAuth { detail: String },

    #[error(
        "GitHub refused {route}: the token lacks the `{permission}` permission. A fine-grained token or a GitHub App needs `{permission}` granted on the repository (token settings, or the App's permissions and an accepted update of its installation); a classic token needs the `repo` scope"
    )]
    MissingPermission {
        route: String,
        /// As GitHub's settings name it: `Checks: read`, `Issues: write`, …
        permission: String,
    },

    #[error(
        "Project board #{number} belongs to the user {owner}, and GitHub Apps cannot reach Projects (v2) boards owned by users (only organizations' boards): use a classic personal access token with the `project` scope (GH_TOKEN), or move the board to an organization"
    )]
    AppCannotReachUserBoard { owner: String, number: u64 },

    #[error("GitHub API error {status} on {route}: {message}")]
    Api {
        status: u16,
        route: String,
        message: String,
        documentation_url: Option<String>,
    },

    #[error("GitHub GraphQL error in {operation}: {message}")]
    GraphQl {
        operation: String,
        /// GitHub's error `type`, e.g. `NOT_FOUND`, `FORBIDDEN`.
        kind: Option<String>,
        message: String,
    },

    #[error("Network error talking to GitHub ({route}): {detail}")]
    Network {
        route: String,
        detail: String,
        timed_out: bool,
    },

    #[error("Unexpected response from GitHub for {route}: {detail}")]
    InvalidResponse { route: String, detail: String },

    #[error("Invalid GitHub configuration: {0}")]
    Config(String),

    #[error(
        "`{branch}` is not a safe branch name, so it was not sent to GitHub: use letters, digits, `-`, `_`, `.` and `/`, without `..`, `//` or `@{{`, not starting with `-`, `/` or `.` and not ending with `/`, `.` or `.lock`"
    )]
    UnsafeBranch { branch: String },
}

fn rate_limit_text(
    route: &str,
    secondary: bool,
    reset_at: &Option<DateTime<Utc>>,
    retry_after: &Option<Duration>,
) -> String {
    let what = if secondary {
        "GitHub's secondary rate limit"
    } else {
        "GitHub's API rate limit"
    };
    let when = match (retry_after, reset_at) {
        (Some(d), _) => format!("GitHub asked to wait {} s", d.as_secs()),
        (None, Some(t)) => format!("the quota resets at {}", t.format("%Y-%m-%d %H:%M:%S UTC")),
        (None, None) => "GitHub gave no reset time".to_string(),
    };
    format!(
        "{what} was hit on {route} and {when}, longer than this run waits: nothing was lost; run the same command again after that to resume"
    )
}

impl GitHubError {
    /// The same request may succeed if simply sent again soon (network trouble, GitHub 5xx).
    pub fn is_transient(&self) -> bool {
        match self {
            GitHubError::Network { .. } => true,
            GitHubError::Api { status, .. } => *status >= 500,
            _ => false,
        }
    }

    /// The run can stop here and be resumed later unchanged: nothing is wrong with the request,
    /// the credentials or the configuration.
    pub fn is_resumable(&self) -> bool {
        self.is_transient() || matches!(self, GitHubError::RateLimited { .. })
    }

    /// Whether the spec lets the pipeline go on with a warning when this happens mid-flight (posting a
    /// comment, polling CI): only trouble that is GitHub's or the network's. Credentials, scopes,
    /// missing issues or boards and configuration errors stop the run.
    pub fn tolerable_mid_flight(&self) -> bool {
        match self {
            GitHubError::Network { .. }
            | GitHubError::InvalidResponse { .. }
            | GitHubError::GraphQl { .. } => true,
            GitHubError::Api { status, .. } => *status >= 500 || *status == 422 || *status == 409,
            _ => false,
        }
    }

    /// HTTP status behind the error, when there was one.
    pub fn status(&self) -> Option<u16> {
        match self {
            GitHubError::Api { status, .. } => Some(*status),
            GitHubError::Unauthorized { .. } => Some(401),
            GitHubError::MissingPermission { .. } => Some(403),
            GitHubError::IssueNotFound { .. }
            | GitHubError::PullNotFound { .. }
            | GitHubError::RepoNotFound { .. } => Some(404),
            _ => None,
        }
    }

    /// GitHub's `X-Accepted-GitHub-Permissions` value (`checks=read`, alternatives separated by
    /// `;`) as its settings name it: `Checks: read`.
    pub(crate) fn permission_name(header: &str) -> String {
        header
            .split(';')
            .map(|alt| {
                alt.split(',')
                    .filter_map(|p| {
                        let (name, level) = p.trim().split_once('=')?;
                        let name = name.trim().replace('_', " ");
                        let mut chars = name.chars();
                        let first = chars.next()?.to_uppercase();
                        Some(format!("{}{}: {}", first, chars.as_str(), level.trim()))
                    })
                    .collect::<Vec<_>>()
                    .join(" and ")
            })
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(" or ")
    }

    /// The missing-`project`-scope error with its how-to.
    pub(crate) fn missing_project_scope() -> GitHubError {
        GitHubError::MissingScope {
            scope: "project".into(),
            hint: PROJECT_SCOPE_HINT.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_start_with_the_spec_text() {
        let repo = RepoSlug::parse("o/r").unwrap();
        let e = GitHubError::IssueNotFound { repo, number: 7 };
        assert!(e.to_string().starts_with("Issue #7 does not exist in o/r"));
        let e = GitHubError::missing_project_scope();
        assert!(
            e.to_string()
                .starts_with("GitHub token missing 'project' scope")
        );
        assert!(e.to_string().contains("gh auth refresh -s project"));
        let e = GitHubError::NotOnBoard {
            issue: 3,
            project: 9,
        };
        assert!(
            e.to_string()
                .starts_with("Issue #3 is not on project board #9: add the issue to the board, or run again with --add-to-board")
        );
    }

    #[test]
    fn classification() {
        let net = GitHubError::Network {
            route: "GET /x".into(),
            detail: "reset".into(),
            timed_out: false,
        };
        assert!(net.is_transient() && net.is_resumable() && net.tolerable_mid_flight());
        let limited = GitHubError::RateLimited {
            route: "GET /x".into(),
            secondary: false,
            reset_at: None,
            retry_after: Some(Duration::from_secs(90)),
        };
        assert!(!limited.is_transient() && limited.is_resumable());
        assert!(limited.to_string().contains("90 s"));
        assert!(!GitHubError::missing_project_scope().is_resumable());
        let api = |status| GitHubError::Api {
            status,
            route: "GET /x".into(),
            message: "m".into(),
            documentation_url: None,
        };
        assert!(api(502).is_transient());
        assert!(!api(404).is_transient());
        assert!(!api(403).tolerable_mid_flight());
    }

    #[test]
    fn permissions_are_named_as_in_the_settings() {
        assert_eq!(GitHubError::permission_name("checks=read"), "Checks: read");
        assert_eq!(
            GitHubError::permission_name("pull_requests=write; issues=write"),
            "Pull requests: write or Issues: write"
        );
        assert_eq!(
            GitHubError::permission_name("contents=read,metadata=read"),
            "Contents: read and Metadata: read"
        );
        let e = GitHubError::MissingPermission {
            route: "GET /repos/{owner}/{repo}/commits/{ref}/check-runs".into(),
            permission: "Checks: read".into(),
        };
        assert!(
            e.to_string()
                .contains("lacks the `Checks: read` permission"),
            "{e}"
        );
        assert!(!e.tolerable_mid_flight() && !e.is_resumable());
    }

    #[test]
    fn unknown_column_lists_options() {
        let e = GitHubError::UnknownColumn {
            column: "Doing".into(),
            field: "Status".into(),
            options: vec!["Todo".into(), "Done".into()],
        };
        assert_eq!(
            e.to_string(),
            "Column `Doing` is not an option of field `Status` on the board; its options are: Todo, Done"
        );
    }
}
