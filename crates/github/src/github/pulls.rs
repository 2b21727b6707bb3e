//! Pull requests, commits and check runs (REST).

use std::time::Duration;

use http::{Method, StatusCode};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::retry::{ApiRequest, ApiResponse};
use super::types::{CheckRun, Conditional, NewPullRequest, PullRequest};
use super::{GitHub, GitHubError, MAX_BODY_CHARS, fit_body, url_encode};
use crate::config::is_safe_ref_component;

#[derive(Deserialize)]
struct WireRefObject {
    sha: String,
}

#[derive(Deserialize)]
struct WireGitRef {
    object: WireRefObject,
}

/// A 422 (GitHub refused the request's content) with `hint`, what to check, after its message;
/// any other error as it is.
fn with_422_hint(e: GitHubError, hint: &str) -> GitHubError {
    match e {
        GitHubError::Api {
            status: 422,
            route,
            message,
            documentation_url,
        } => GitHubError::Api {
            status: 422,
            route,
            message: format!("{message}: {hint}"),
            documentation_url,
        },
        other => other,
    }
}

/// `branch`, when it is safe to send as a branch name.
fn safe_branch(branch: &str) -> Result<&str, GitHubError> {
    if is_safe_ref_component(branch) {
        Ok(branch)
    } else {
        Err(GitHubError::UnsafeBranch {
            branch: branch.to_string(),
        })
    }
}

#[derive(Deserialize)]
struct WireRef {
    #[serde(rename = "ref")]
    name: String,
    #[serde(default)]
    sha: String,
}

#[derive(Deserialize)]
struct WirePull {
    number: u64,
    #[serde(default)]
    html_url: String,
    state: String,
    head: WireRef,
    base: WireRef,
    #[serde(default)]
    title: String,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    draft: Option<bool>,
    #[serde(default)]
    merged: Option<bool>,
    #[serde(default)]
    mergeable: Option<bool>,
    #[serde(default)]
    mergeable_state: Option<String>,
}

impl WirePull {
    fn into_pull(self) -> PullRequest {
        PullRequest {
            number: self.number,
            html_url: self.html_url,
            state: self.state,
            head: self.head.name,
            head_sha: self.head.sha,
            base: self.base.name,
            base_sha: self.base.sha,
            title: self.title,
            body: self.body.unwrap_or_default(),
            draft: self.draft.unwrap_or(false),
            merged: self.merged.unwrap_or(false),
            mergeable: self.mergeable,
            mergeable_state: self.mergeable_state,
        }
    }
}

fn pull_of(resp: &ApiResponse) -> Result<PullRequest, GitHubError> {
    resp.json::<WirePull>().map(WirePull::into_pull)
}

#[derive(Deserialize)]
struct WireCheckRun {
    name: String,
    status: String,
    #[serde(default)]
    conclusion: Option<String>,
    #[serde(default)]
    html_url: Option<String>,
}

#[derive(Deserialize)]
struct WireCheckRuns {
    #[serde(default)]
    total_count: u64,
    check_runs: Vec<WireCheckRun>,
}

fn runs_of(page: WireCheckRuns) -> Vec<CheckRun> {
    page.check_runs
        .into_iter()
        .map(|r| CheckRun {
            name: r.name,
            status: r.status,
            conclusion: r.conclusion,
            html_url: r.html_url,
        })
        .collect()
}

/// A 403 on check runs, named: on private repositories reading them needs `Checks: read`, which
/// fine-grained tokens and GitHub Apps often lack. (Rate limits are told apart before this.)
fn checks_permission(e: GitHubError) -> GitHubError {
    match e {
        GitHubError::Api {
            status: 403, route, ..
        } => GitHubError::MissingPermission {
            route,
            permission: "Checks: read".into(),
        },
        other => other,
    }
}

/// How a pull request is merged into its base (GitHub's `merge_method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MergeMethod {
    /// A merge commit with the base and the head as its parents.
    #[default]
    Merge,
    /// The pull request's changes as one new commit on the base.
    Squash,
    /// Each commit of the pull request replayed onto the base.
    Rebase,
}

impl MergeMethod {
    /// The name GitHub's API gives it.
    pub fn name(self) -> &'static str {
        match self {
            MergeMethod::Merge => "merge",
            MergeMethod::Squash => "squash",
            MergeMethod::Rebase => "rebase",
        }
    }
}

/// What merging a pull request did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeResult {
    /// The commit the base now points at.
    pub sha: String,
    pub merged: bool,
}

/// Why a pull request was not merged.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error(
        "Pull request #{number} cannot be merged ({message}): it conflicts with its base, is a draft, closed or merged already, or a rule of the base branch (required reviews or checks) is not met yet; resolve that on GitHub, then merge again"
    )]
    NotMergeable { number: u64, message: String },

    #[error(
        "Pull request #{number} was not merged: its head is no longer {expected}, someone pushed to it since ({message}); review the new head, then merge it"
    )]
    HeadMoved {
        number: u64,
        /// The head commit the merge was asked for.
        expected: String,
        message: String,
    },

    /// Anything else GitHub or the way to it answered.
    #[error(transparent)]
    GitHub(#[from] GitHubError),
}

impl MergeError {
    /// HTTP status behind the error, when there was one.
    pub fn status(&self) -> Option<u16> {
        match self {
            MergeError::NotMergeable { .. } => Some(405),
            MergeError::HeadMoved { .. } => Some(409),
            MergeError::GitHub(e) => e.status(),
        }
    }
}

#[derive(Deserialize)]
struct WireMerge {
    sha: String,
    merged: bool,
}

/// How patiently [`GitHub::mergeable`] waits while GitHub computes a pull request's mergeability
/// in the background (right after `POST /pulls` it answers `mergeable: null`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeablePoll {
    /// Reads of the pull request, the first included.
    pub attempts: u32,
    /// Wait before the second read; doubled before each later one.
    pub first_delay: Duration,
    /// Longest single wait.
    pub max_delay: Duration,
}

impl MergeablePoll {
    /// For github.com and GitHub Enterprise Server: 6 reads over about 23 s.
    pub(crate) fn github() -> MergeablePoll {
        MergeablePoll {
            attempts: 6,
            first_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(8),
        }
    }

    /// For a server on this machine (the sandbox), which computes mergeability as it answers: 6
    /// reads over about 31 ms.
    pub fn loopback() -> MergeablePoll {
        MergeablePoll {
            attempts: 6,
            first_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(16),
        }
    }

    /// The wait before read `attempt + 1` (`attempt` from 1).
    pub(crate) fn delay(&self, attempt: u32) -> Duration {
        self.first_delay
            .saturating_mul(1u32 << attempt.saturating_sub(1).min(16))
            .min(self.max_delay)
    }
}

impl Default for MergeablePoll {
    fn default() -> Self {
        MergeablePoll::github()
    }
}

impl GitHub {
    /// The [`MergeablePoll`] that suits this client's API URL.
    pub fn mergeable_poll(&self) -> MergeablePoll {
        if super::retry::is_loopback(self.api_url()) {
            MergeablePoll::loopback()
        } else {
            MergeablePoll::github()
        }
    }

    /// Whether pull request `number` merges cleanly into its base: `Some(false)` when it conflicts.
    /// GitHub computes this in the background and answers `null` meanwhile, so the pull request is
    /// read again with back-off until the answer is known or `poll.attempts` reads were made;
    /// `Ok(None)` when it is still unknown then (or the pull request is closed).
    pub async fn mergeable(
        &self,
        number: u64,
        poll: &MergeablePoll,
    ) -> Result<Option<bool>, GitHubError> {
        Ok(self.pr_with_mergeability(number, poll).await?.mergeable)
    }

    /// Pull request `number` once GitHub knows its mergeability (see [`GitHub::mergeable`]), or as
    /// the last of `poll.attempts` reads found it.
    pub(crate) async fn pr_with_mergeability(
        &self,
        number: u64,
        poll: &MergeablePoll,
    ) -> Result<PullRequest, GitHubError> {
        let attempts = poll.attempts.max(1);
        let mut attempt = 1;
        loop {
            let pr = self.get_pr(number).await?;
            if pr.mergeable.is_some() || pr.state != "open" {
                return Ok(pr);
            }
            if attempt >= attempts {
                tracing::info!(
                    pr = number,
                    reads = attempts,
                    "GitHub had not computed the pull request's mergeability yet"
                );
                return Ok(pr);
            }
            tokio::time::sleep(poll.delay(attempt)).await;
            attempt += 1;
        }
    }

    /// Check runs of a commit. With the ETag of an earlier answer, an unchanged list comes back as
    /// [`Conditional::NotModified`], which costs no rate-limit quota.
    pub async fn check_runs(
        &self,
        sha: &str,
        etag: Option<&str>,
    ) -> Result<Conditional<Vec<CheckRun>>, GitHubError> {
        let route = "/repos/{owner}/{repo}/commits/{ref}/check-runs";
        let mut req = ApiRequest::get(
            self.repo_path(&format!(
                "/commits/{}/check-runs?per_page=100",
                url_encode(sha)
            )),
            route,
        );
        req.if_none_match = etag.map(str::to_string);
        let resp = self.t.send(&req).await.map_err(checks_permission)?;
        if resp.status == StatusCode::NOT_MODIFIED {
            return Ok(Conditional::NotModified);
        }
        let etag = resp.header("etag").map(str::to_string);
        let first = resp.json::<WireCheckRuns>()?;
        let total = first.total_count as usize;
        let mut runs = runs_of(first);
        let mut next = resp.next_page(&self.t.base)?;
        while let Some(path) = next.take() {
            if runs.len() >= total {
                break;
            }
            let page = self
                .t
                .send(&ApiRequest::get(path, route))
                .await
                .map_err(checks_permission)?;
            let before = runs.len();
            runs.extend(runs_of(page.json::<WireCheckRuns>()?));
            if runs.len() == before {
                break;
            }
            next = page.next_page(&self.t.base)?;
        }
        Ok(Conditional::Modified { value: runs, etag })
    }

    /// Whether the repository on GitHub has the commit (e.g. the push has landed).
    pub async fn commit_exists(&self, sha: &str) -> Result<bool, GitHubError> {
        let mut req = ApiRequest::get(
            self.repo_path(&format!("/commits/{}", url_encode(sha))),
            "/repos/{owner}/{repo}/commits/{ref}",
        );
        // Only the sha, not the whole diff.
        req.accept = Some("application/vnd.github.sha");
        match self.t.send(&req).await {
            Ok(_) => Ok(true),
            Err(e) if matches!(e.status(), Some(404 | 422)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The open pull request from `head_branch` of this repository, if any.
    pub async fn find_open_pr(
        &self,
        head_branch: &str,
    ) -> Result<Option<PullRequest>, GitHubError> {
        let path = self.repo_path(&format!(
            "/pulls?state=open&per_page=100&head={}",
            url_encode(&format!("{}:{}", self.t.repo.owner, head_branch))
        ));
        let resp = self
            .t
            .send(&ApiRequest::get(path, "/repos/{owner}/{repo}/pulls"))
            .await?;
        Ok(resp
            .json::<Vec<WirePull>>()?
            .into_iter()
            .map(WirePull::into_pull)
            .find(|p| p.head == head_branch))
    }

    /// The open pull request from `pr.head`, or a new one. `true` when this call opened it.
    pub async fn find_or_create_pr(
        &self,
        pr: &NewPullRequest,
    ) -> Result<(PullRequest, bool), GitHubError> {
        // Asked straight away: when the branch already has an open pull request, GitHub refuses
        // with 422 "already exists" and it is looked up below (one request less when it has none).
        let req = ApiRequest::write(
            Method::POST,
            self.repo_path("/pulls"),
            "/repos/{owner}/{repo}/pulls",
            json!({
                "title": pr.title,
                "head": pr.head,
                "base": pr.base,
                "body": fit_body(&pr.body, MAX_BODY_CHARS),
                "draft": pr.draft,
            }),
            false,
        );
        let created = self
            .t
            .create(
                &req,
                |resp| pull_of(resp).map(|p| (p, true)),
                || async { Ok(self.find_open_pr(&pr.head).await?.map(|p| (p, true))) },
            )
            .await;
        match created {
            Ok(done) => Ok(done),
            // Opened meanwhile by someone else (or an earlier attempt of ours).
            Err(GitHubError::Api {
                status: 422,
                message,
                ..
            }) if message.contains("already exists") => match self.find_open_pr(&pr.head).await? {
                Some(open) => Ok((open, false)),
                None => Err(GitHubError::Api {
                    status: 422,
                    route: req.route.clone(),
                    message,
                    documentation_url: None,
                }),
            },
            Err(e) => Err(with_422_hint(
                e,
                &format!(
                    "is branch `{}` pushed, with commits that `{}` does not have?",
                    pr.head, pr.base
                ),
            )),
        }
    }

    /// Merge pull request `number` into its base with `method`. With `expected_head_sha`, GitHub
    /// merges only while the head is that commit: what was reviewed is what is merged. Not resent
    /// after a failure GitHub may have applied: a second attempt would find it merged and answer
    /// as for one that cannot be merged, so a caller reads the pull request again instead.
    ///
    /// [`MergeError::NotMergeable`] when GitHub refuses (405: a conflict, a draft, a closed or
    /// merged pull request, a rule of the base branch), [`MergeError::HeadMoved`] when the head
    /// is no longer `expected_head_sha` (409).
    pub async fn merge_pull(
        &self,
        number: u64,
        method: MergeMethod,
        expected_head_sha: Option<&str>,
    ) -> Result<MergeResult, MergeError> {
        let mut body = json!({ "merge_method": method.name() });
        if let Some(sha) = expected_head_sha {
            body["sha"] = json!(sha);
        }
        let req = ApiRequest::write(
            Method::PUT,
            self.repo_path(&format!("/pulls/{number}/merge")),
            "/repos/{owner}/{repo}/pulls/{number}/merge",
            body,
            false,
        );
        match self.t.send(&req).await {
            Ok(resp) => {
                let merge = resp.json::<WireMerge>()?;
                Ok(MergeResult {
                    sha: merge.sha,
                    merged: merge.merged,
                })
            }
            Err(GitHubError::Api { status: 404, .. }) => Err(GitHubError::PullNotFound {
                repo: self.t.repo.clone(),
                number,
            }
            .into()),
            Err(GitHubError::Api {
                status: 405,
                message,
                ..
            }) => Err(MergeError::NotMergeable { number, message }),
            Err(GitHubError::Api {
                status: 409,
                message,
                ..
            }) => Err(MergeError::HeadMoved {
                number,
                expected: expected_head_sha
                    .unwrap_or("the commit it was at")
                    .to_string(),
                message,
            }),
            Err(e) => Err(e.into()),
        }
    }

    /// The commit branch `branch` points at on GitHub; `None` when there is no such branch.
    /// [`GitHubError::UnsafeBranch`], with nothing sent, for a name that is not a safe branch name.
    pub async fn branch_head(&self, branch: &str) -> Result<Option<String>, GitHubError> {
        let branch = safe_branch(branch)?;
        let req = ApiRequest::get(
            self.repo_path(&format!("/git/ref/heads/{branch}")),
            "/repos/{owner}/{repo}/git/ref/{ref}",
        );
        match self.t.send(&req).await {
            Ok(resp) => Ok(Some(resp.json::<WireGitRef>()?.object.sha)),
            Err(e) if e.status() == Some(404) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Create branch `branch` at commit `sha` (its 40 hex digits) on GitHub: `true` when this
    /// call created it, `false` when the branch exists already (wherever it points: read it with
    /// [`GitHub::branch_head`]). [`GitHubError::UnsafeBranch`], with nothing sent, for a name
    /// that is not a safe branch name.
    pub async fn create_branch(&self, branch: &str, sha: &str) -> Result<bool, GitHubError> {
        let branch = safe_branch(branch)?;
        let req = ApiRequest::write(
            Method::POST,
            self.repo_path("/git/refs"),
            "/repos/{owner}/{repo}/git/refs",
            json!({ "ref": format!("refs/heads/{branch}"), "sha": sha }),
            false,
        );
        // After a failure that may have landed, a branch at `sha` is this call's.
        let created = self
            .t
            .create(
                &req,
                |_| Ok(true),
                || async move {
                    let head = self.branch_head(branch).await?;
                    Ok(head.is_some_and(|h| h == sha).then_some(true))
                },
            )
            .await;
        match created {
            Ok(created) => Ok(created),
            Err(GitHubError::Api {
                status: 422,
                message,
                ..
            }) if message.contains("Reference already exists") => Ok(false),
            Err(e) => Err(with_422_hint(
                e,
                &format!(
                    "branch `{branch}` was not created; is {sha} a whole commit sha that GitHub has (pushed)?"
                ),
            )),
        }
    }

    /// A pull request by number, with its mergeability (`None` while GitHub computes it).
    pub async fn get_pr(&self, number: u64) -> Result<PullRequest, GitHubError> {
        let req = ApiRequest::get(
            self.repo_path(&format!("/pulls/{number}")),
            "/repos/{owner}/{repo}/pulls/{number}",
        );
        let resp = self.t.send(&req).await.map_err(self.pull_missing(number))?;
        pull_of(&resp)
    }

    /// Close pull request `number` without merging it (closing a closed one changes nothing).
    pub async fn close_pull(&self, number: u64) -> Result<(), GitHubError> {
        let req = ApiRequest::write(
            Method::PATCH,
            self.repo_path(&format!("/pulls/{number}")),
            "/repos/{owner}/{repo}/pulls/{number}",
            json!({ "state": "closed" }),
            true,
        );
        self.t.send(&req).await.map_err(self.pull_missing(number))?;
        Ok(())
    }

    /// Map a 404 on a pull request route to [`GitHubError::PullNotFound`].
    fn pull_missing(&self, number: u64) -> impl Fn(GitHubError) -> GitHubError + '_ {
        move |e| match e.status() {
            Some(404) => GitHubError::PullNotFound {
                repo: self.t.repo.clone(),
                number,
            },
            _ => e,
        }
    }
}
