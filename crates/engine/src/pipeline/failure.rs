//! Why an effect failed, as the engine decides on it: a class ([`ErrorClass`]) and the detail.
//!
//! The detail (an HTTP status line, git's stderr, a URL of the API) is for the journal and the
//! logs only: what is posted on GitHub is a [`UserText`](crate::pipeline::UserText), written
//! from the class in supervisor's own words.

use std::fmt;

use crate::github::GitHubError;
use crate::workspace::WorkspaceError;

/// What kind of failure it is: what the engine does next depends on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorClass {
    /// May succeed when sent again later: network trouble, GitHub's 5xx, a rate limit.
    Transient,
    /// The credentials were refused, or they lack a permission (401, 403 that is no rate limit).
    Permission,
    /// The request collides with the state it meets (409, 422, a branch that moved).
    Conflict,
    /// What the request names is not there (404).
    NotFound,
    /// The run was asked to stop while the effect ran.
    Cancelled,
}

impl ErrorClass {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ErrorClass::Transient => "transient",
            ErrorClass::Permission => "permission",
            ErrorClass::Conflict => "conflict",
            ErrorClass::NotFound => "not-found",
            ErrorClass::Cancelled => "cancelled",
        }
    }
}

impl fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed effect: its class, the permission GitHub said was missing (when it said), and the
/// detail for the journal and the logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectError {
    pub(crate) class: ErrorClass,
    /// GitHub's name of the missing permission (`Pull requests: write`), when it named one.
    pub(crate) permission: Option<String>,
    /// GitHub did not accept the credentials at all (401: expired, revoked or none).
    pub(crate) credentials_refused: bool,
    /// The error as it was: internal, never posted.
    pub(crate) detail: String,
}

impl EffectError {
    pub fn new(class: ErrorClass, detail: impl Into<String>) -> EffectError {
        EffectError {
            class,
            permission: None,
            credentials_refused: false,
            detail: detail.into(),
        }
    }

    /// The failure of a GitHub request, classed by what GitHub answered.
    pub(crate) fn github(e: &GitHubError) -> EffectError {
        let class = match e {
            GitHubError::Unauthorized { .. }
            | GitHubError::NoCredentials
            | GitHubError::AppAuth { .. }
            | GitHubError::MissingPermission { .. }
            | GitHubError::MissingScope { .. }
            | GitHubError::AppCannotReachUserBoard { .. } => ErrorClass::Permission,
            GitHubError::IssueNotFound { .. }
            | GitHubError::PullNotFound { .. }
            | GitHubError::RepoNotFound { .. }
            | GitHubError::BoardNotFound { .. }
            | GitHubError::NotOnBoard { .. }
            | GitHubError::StatusFieldNotFound { .. }
            | GitHubError::UnknownColumn { .. } => ErrorClass::NotFound,
            GitHubError::RateLimited { .. }
            | GitHubError::Network { .. }
            | GitHubError::InvalidResponse { .. } => ErrorClass::Transient,
            // A setting GitHub cannot be asked with: running again as it is fails the same way.
            GitHubError::Config(_) | GitHubError::UnsafeBranch { .. } => ErrorClass::NotFound,
            GitHubError::Api { status, .. } => match status {
                401 | 403 => ErrorClass::Permission,
                404 | 410 => ErrorClass::NotFound,
                409 | 422 => ErrorClass::Conflict,
                _ => ErrorClass::Transient,
            },
            GitHubError::GraphQl { kind, .. } => match kind.as_deref() {
                Some("FORBIDDEN" | "INSUFFICIENT_SCOPES") => ErrorClass::Permission,
                Some("NOT_FOUND") => ErrorClass::NotFound,
                _ => ErrorClass::Transient,
            },
        };
        let permission = match e {
            GitHubError::MissingPermission { permission, .. } => Some(permission.clone()),
            GitHubError::MissingScope { scope, .. } => Some(scope.clone()),
            _ => None,
        };
        let credentials_refused = matches!(
            e,
            GitHubError::Unauthorized { .. }
                | GitHubError::NoCredentials
                | GitHubError::AppAuth { .. }
                | GitHubError::Api { status: 401, .. }
        );
        EffectError {
            class,
            permission,
            credentials_refused,
            detail: e.to_string(),
        }
    }

    /// The failure of git work in the worktree, classed by what git said.
    pub(crate) fn workspace(e: &WorkspaceError) -> EffectError {
        let class = match e {
            WorkspaceError::Git { source, .. } => git_class(source),
            WorkspaceError::GitCommand { detail, .. } => git_output_class(detail),
            WorkspaceError::Io { .. } | WorkspaceError::Task(_) => ErrorClass::Transient,
            WorkspaceError::NotARepository { .. }
            | WorkspaceError::BaseNotFound { .. }
            | WorkspaceError::NothingToUndo => ErrorClass::NotFound,
            WorkspaceError::UnsafeName { .. }
            | WorkspaceError::PathOccupied { .. }
            | WorkspaceError::BranchCheckedOutElsewhere { .. }
            | WorkspaceError::Checkpoint { .. }
            | WorkspaceError::RefuseToDelete { .. }
            | WorkspaceError::GitChanged { .. }
            | WorkspaceError::RemoteMoved { .. } => ErrorClass::Conflict,
        };
        EffectError::new(class, e.to_string())
    }

    /// The permission to name when saying what to grant: GitHub's, or `needed` (what the effect
    /// that failed needs).
    pub(crate) fn permission_or(&self, needed: &str) -> String {
        self.permission
            .clone()
            .unwrap_or_else(|| needed.to_string())
    }
}

impl fmt::Display for EffectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.detail, self.class)
    }
}

impl From<&GitHubError> for EffectError {
    fn from(e: &GitHubError) -> EffectError {
        EffectError::github(e)
    }
}

impl From<GitHubError> for EffectError {
    fn from(e: GitHubError) -> EffectError {
        EffectError::github(&e)
    }
}

impl From<WorkspaceError> for EffectError {
    fn from(e: WorkspaceError) -> EffectError {
        EffectError::workspace(&e)
    }
}

fn git_class(e: &git2::Error) -> ErrorClass {
    use git2::{ErrorClass as C, ErrorCode as K};
    match (e.code(), e.class()) {
        (K::Auth | K::Certificate, _) => ErrorClass::Permission,
        (K::NotFound, _) => ErrorClass::NotFound,
        (K::Conflict | K::MergeConflict | K::NotFastForward | K::Modified | K::Exists, _) => {
            ErrorClass::Conflict
        }
        (_, C::Http | C::Net | C::Ssh | C::Ssl) => git_output_class(e.message()),
        _ => ErrorClass::Transient,
    }
}

/// A git command's output: what the remote refused, or trouble on the way.
fn git_output_class(text: &str) -> ErrorClass {
    let t = text.to_ascii_lowercase();
    let any = |words: &[&str]| words.iter().any(|w| t.contains(w));
    if any(&[
        "authentication failed",
        "permission to",
        "permission denied",
        "403",
        "401",
        "could not read username",
        "write access to repository not granted",
    ]) {
        ErrorClass::Permission
    } else if any(&["non-fast-forward", "[rejected]", "fetch first", "conflict"]) {
        ErrorClass::Conflict
    } else if any(&[
        "repository not found",
        "not found",
        "does not appear to be a git",
    ]) {
        ErrorClass::NotFound
    } else {
        ErrorClass::Transient
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RepoSlug;

    fn api(status: u16) -> GitHubError {
        GitHubError::Api {
            status,
            route: "POST /repos/o/r/pulls".into(),
            message: "Bad".into(),
            documentation_url: None,
        }
    }

    #[test]
    fn github_errors_are_classed_by_status() {
        let class = |e: GitHubError| EffectError::github(&e).class;
        assert_eq!(
            class(GitHubError::Unauthorized {
                route: "r".into(),
                message: "Bad credentials".into()
            }),
            ErrorClass::Permission
        );
        assert_eq!(class(api(401)), ErrorClass::Permission);
        assert_eq!(class(api(403)), ErrorClass::Permission);
        assert_eq!(class(api(404)), ErrorClass::NotFound);
        assert_eq!(class(api(409)), ErrorClass::Conflict);
        assert_eq!(class(api(422)), ErrorClass::Conflict);
        for s in [500, 502, 503, 504] {
            assert_eq!(class(api(s)), ErrorClass::Transient, "{s}");
        }
        assert_eq!(
            class(GitHubError::RateLimited {
                route: "r".into(),
                secondary: true,
                reset_at: None,
                retry_after: None
            }),
            ErrorClass::Transient
        );
        assert_eq!(
            class(GitHubError::Network {
                route: "r".into(),
                detail: "reset".into(),
                timed_out: true
            }),
            ErrorClass::Transient
        );
        assert_eq!(
            class(GitHubError::PullNotFound {
                repo: RepoSlug::parse("o/r").unwrap(),
                number: 3
            }),
            ErrorClass::NotFound
        );
        let e = EffectError::github(&GitHubError::MissingPermission {
            route: "r".into(),
            permission: "Pull requests: write".into(),
        });
        assert_eq!(e.class, ErrorClass::Permission);
        assert_eq!(e.permission_or("x"), "Pull requests: write");
        assert_eq!(EffectError::github(&api(403)).permission_or("x"), "x");
        assert!(EffectError::github(&api(401)).credentials_refused);
        assert!(!EffectError::github(&api(403)).credentials_refused);
        assert!(
            !e.credentials_refused,
            "a missing permission is no refused credential"
        );
    }

    #[test]
    fn git_output_is_classed() {
        assert_eq!(
            git_output_class(
                "remote: Permission to o/r.git denied to bot.\nfatal: unable to access: The requested URL returned error: 403"
            ),
            ErrorClass::Permission
        );
        assert_eq!(
            git_output_class(" ! [rejected]        main -> main (fetch first)"),
            ErrorClass::Conflict
        );
        assert_eq!(
            git_output_class("fatal: repository 'x' not found"),
            ErrorClass::NotFound
        );
        assert_eq!(
            git_output_class("fatal: unable to access: Could not resolve host: github.com"),
            ErrorClass::Transient
        );
    }
}
