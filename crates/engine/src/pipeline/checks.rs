//! The adapter between the CI gate and the GitHub client.

use tokio_util::sync::CancellationToken;

use crate::gates::{self, CiError, CiSource};
use crate::github::{GitHub, GitHubError};
use crate::workspace::{PushAuth, Worktree};

/// The CI gate's view of GitHub: check runs of the pushed head, and a push when the head is missing.
pub struct GitHubChecks {
    gh: GitHub,
    wt: Worktree,
    auth: PushAuth,
    /// The run's stop request: a push under way is killed.
    cancel: CancellationToken,
}

impl GitHubChecks {
    pub fn new(
        gh: GitHub,
        wt: Worktree,
        auth: PushAuth,
        cancel: CancellationToken,
    ) -> GitHubChecks {
        GitHubChecks {
            gh,
            wt,
            auth,
            cancel,
        }
    }
}

/// What the CI gate needs to know of a GitHub error: whether to ask again, to stop until later, or
/// which permission a 403 means (`permission` is the one the failed request needs).
fn ci_error(e: GitHubError, permission: &str) -> CiError {
    if matches!(e, GitHubError::RateLimited { .. }) {
        return CiError::RateLimited(e.to_string());
    }
    if e.is_transient() {
        return CiError::Transient(e.to_string());
    }
    match e.status() {
        Some(403) => CiError::PermissionDenied {
            permission: permission.to_string(),
            detail: e.to_string(),
        },
        Some(404) => CiError::NotFound(e.to_string()),
        _ => CiError::Other(e.to_string()),
    }
}

impl CiSource for GitHubChecks {
    fn check_runs<'a>(
        &'a self,
        sha: &'a str,
        etag: Option<&'a str>,
    ) -> gates::BoxFuture<'a, Result<gates::CiPoll, CiError>> {
        Box::pin(async move {
            match self.gh.check_runs(sha, etag).await {
                Ok(crate::github::Conditional::NotModified) => Ok(gates::CiPoll::NotModified),
                Ok(crate::github::Conditional::Modified { value, etag }) => {
                    Ok(gates::CiPoll::Runs {
                        runs: value
                            .into_iter()
                            .map(|r| gates::CiRun {
                                name: r.name,
                                status: r.status,
                                conclusion: r.conclusion,
                                url: r.html_url,
                            })
                            .collect(),
                        etag,
                    })
                }
                // GitHub's answer for a sha it does not have: 422 "No commit found for SHA".
                Err(e) if e.status() == Some(422) => Err(CiError::CommitMissing(e.to_string())),
                Err(e) => Err(ci_error(e, "Checks: read")),
            }
        })
    }

    fn commit_visible<'a>(&'a self, sha: &'a str) -> gates::BoxFuture<'a, Result<bool, CiError>> {
        Box::pin(async move {
            self.gh
                .commit_exists(sha)
                .await
                .map_err(|e| ci_error(e, "Contents: read"))
        })
    }

    fn push<'a>(&'a self) -> gates::BoxFuture<'a, Result<(), CiError>> {
        Box::pin(async move {
            let (wt, auth) = (self.wt.clone(), self.auth.clone());
            // git runs off the async threads, and is killed when the run stops.
            crate::process::spawn_blocking(Some(self.cancel.clone()), move || wt.push(&auth))
                .await
                .map_err(|e| CiError::Other(format!("the push task failed: {e}")))?
                .map_err(|e| CiError::Other(format!("pushing the branch failed: {e}")))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gates::NotRunCause;

    fn api(status: u16) -> GitHubError {
        GitHubError::Api {
            status,
            route: "GET /repos/{owner}/{repo}/commits/{ref}/check-runs".into(),
            message: "Resource not accessible by integration".into(),
            documentation_url: None,
        }
    }

    #[test]
    fn github_errors_keep_their_kind() {
        let limited = GitHubError::RateLimited {
            route: "GET /repos/{owner}/{repo}/commits/{ref}/check-runs".into(),
            secondary: true,
            reset_at: None,
            retry_after: Some(std::time::Duration::from_secs(3600)),
        };
        let e = ci_error(limited, "Checks: read");
        assert!(matches!(e, CiError::RateLimited(_)), "{e:?}");
        assert_eq!(e.cause(), NotRunCause::Transient);

        let e = ci_error(api(502), "Checks: read");
        assert!(matches!(e, CiError::Transient(_)), "{e:?}");
        assert_eq!(e.cause(), NotRunCause::Transient);

        let e = ci_error(api(403), "Checks: read");
        assert_eq!(e.cause(), NotRunCause::Denied);
        let text = e.to_string();
        assert!(text.contains("\"Checks: read\" permission"), "{text}");
        assert!(
            text.contains("Resource not accessible by integration"),
            "{text}"
        );

        let e = ci_error(api(404), "Checks: read");
        assert!(matches!(e, CiError::NotFound(_)), "{e:?}");
        assert_eq!(e.cause(), NotRunCause::Setup);

        let e = ci_error(api(422), "Checks: read");
        assert!(matches!(e, CiError::Other(_)), "{e:?}");
    }
}
