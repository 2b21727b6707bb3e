//! The adapter between the CI gate and the GitHub client.

use crate::gates::{self, CiSource};
use crate::github::GitHub;
use crate::workspace::{PushAuth, Worktree};

/// The CI gate's view of GitHub: check runs of the pushed head, and a push when the head is missing.
pub struct GitHubChecks {
    gh: GitHub,
    wt: Worktree,
    auth: PushAuth,
}

impl GitHubChecks {
    pub fn new(gh: GitHub, wt: Worktree, auth: PushAuth) -> GitHubChecks {
        GitHubChecks { gh, wt, auth }
    }
}

impl CiSource for GitHubChecks {
    fn check_runs<'a>(
        &'a self,
        sha: &'a str,
        etag: Option<&'a str>,
    ) -> gates::BoxFuture<'a, Result<gates::CiPoll, String>> {
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
                Err(e) => Err(e.to_string()),
            }
        })
    }

    fn commit_visible<'a>(&'a self, sha: &'a str) -> gates::BoxFuture<'a, Result<bool, String>> {
        Box::pin(async move { self.gh.commit_exists(sha).await.map_err(|e| e.to_string()) })
    }

    fn push<'a>(&'a self) -> gates::BoxFuture<'a, Result<(), String>> {
        Box::pin(async move { self.wt.push(&self.auth).map_err(|e| e.to_string()) })
    }
}
