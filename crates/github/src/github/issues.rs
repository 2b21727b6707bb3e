//! Issues, comments and blockers (REST).

use chrono::{DateTime, Utc};
use http::Method;
use serde::Deserialize;
use serde_json::json;

use super::retry::{ApiRequest, ApiResponse};
use super::types::{Blocker, BlockerKind, CloseReason, Comment, Issue, IssueState, Posted};
use super::{GitHub, GitHubError, MAX_BODY_CHARS, Marker, body_blockers, fit_body};

/// Pages followed at most, against a server that keeps answering "next".
const MAX_PAGES: usize = 200;

#[derive(Deserialize)]
pub(crate) struct WireUser {
    pub(crate) login: String,
}

/// Labels come as objects from the issues API, as plain names in some payloads.
#[derive(Deserialize)]
#[serde(untagged)]
enum WireLabel {
    Object { name: String },
    Name(String),
}

#[derive(Deserialize)]
pub(crate) struct WireIssue {
    #[serde(default)]
    id: u64,
    number: u64,
    #[serde(default)]
    node_id: String,
    #[serde(default)]
    title: String,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    user: Option<WireUser>,
    #[serde(default)]
    labels: Vec<WireLabel>,
    state: String,
    #[serde(default)]
    html_url: String,
    #[serde(default)]
    pull_request: Option<serde_json::Value>,
    #[serde(default)]
    comments: Option<u64>,
    #[serde(default)]
    issue_dependencies_summary: Option<WireDependencies>,
}

/// GitHub's `issue_dependencies_summary` of an issue: what it is blocked by and blocks.
#[derive(Debug, Deserialize)]
struct WireDependencies {
    total_blocked_by: u64,
}

impl WireIssue {
    fn into_issue(self) -> Issue {
        Issue {
            id: self.id,
            number: self.number,
            node_id: self.node_id,
            title: self.title,
            body: self.body.unwrap_or_default(),
            author: author(self.user),
            labels: self
                .labels
                .into_iter()
                .map(|l| match l {
                    WireLabel::Object { name } | WireLabel::Name(name) => name,
                })
                .collect(),
            state: IssueState::parse(&self.state),
            html_url: self.html_url,
            is_pull_request: self.pull_request.is_some(),
            comments: self.comments,
            blocked_by_total: (self.issue_dependencies_summary).map(|d| d.total_blocked_by),
        }
    }
}

/// A deleted account shows as `ghost` on GitHub.
pub(crate) fn author(user: Option<WireUser>) -> String {
    user.map_or_else(|| "ghost".to_string(), |u| u.login)
}

#[derive(Deserialize)]
struct WireComment {
    id: u64,
    #[serde(default)]
    user: Option<WireUser>,
    #[serde(default)]
    body: Option<String>,
    created_at: DateTime<Utc>,
    #[serde(default)]
    html_url: String,
}

impl WireComment {
    fn into_comment(self) -> Comment {
        Comment {
            id: self.id,
            author: author(self.user),
            body: self.body.unwrap_or_default(),
            created_at: self.created_at,
            html_url: self.html_url,
        }
    }
}

fn comment_of(resp: &ApiResponse) -> Result<Comment, GitHubError> {
    resp.json::<WireComment>().map(WireComment::into_comment)
}

impl GitHub {
    /// Every page of a list, following `Link: rel="next"`.
    pub(crate) async fn get_all<T: serde::de::DeserializeOwned>(
        &self,
        first: String,
        route: &str,
    ) -> Result<Vec<T>, GitHubError> {
        let mut items = Vec::new();
        let mut path = Some(first);
        let mut seen = Vec::new();
        while let Some(p) = path.take() {
            if seen.len() >= MAX_PAGES || seen.contains(&p) {
                return Err(GitHubError::InvalidResponse {
                    route: format!("GET {route}"),
                    detail: "pagination does not end (a `next` link repeats)".into(),
                });
            }
            let resp = self.t.send(&ApiRequest::get(p.clone(), route)).await?;
            items.extend(resp.json::<Vec<T>>()?);
            path = resp.next_page(&self.t.base)?;
            seen.push(p);
        }
        Ok(items)
    }

    /// Map a 404/410 on an issue route to [`GitHubError::IssueNotFound`].
    pub(super) fn issue_missing(&self, number: u64) -> impl Fn(GitHubError) -> GitHubError + '_ {
        move |e| match e.status() {
            Some(404 | 410) => GitHubError::IssueNotFound {
                repo: self.t.repo.clone(),
                number,
            },
            _ => e,
        }
    }

    /// Title, body, author, labels and state of an issue (or of a pull request, by its number).
    pub async fn get_issue(&self, number: u64) -> Result<Issue, GitHubError> {
        let req = ApiRequest::get(
            self.repo_path(&format!("/issues/{number}")),
            "/repos/{owner}/{repo}/issues/{number}",
        );
        let resp = self
            .t
            .send(&req)
            .await
            .map_err(self.issue_missing(number))?;
        Ok(resp.json::<WireIssue>()?.into_issue())
    }

    /// All comments of an issue, oldest first, every page.
    pub async fn list_comments(&self, number: u64) -> Result<Vec<Comment>, GitHubError> {
        let wire: Vec<WireComment> = self
            .get_all(
                self.repo_path(&format!("/issues/{number}/comments?per_page=100")),
                "/repos/{owner}/{repo}/issues/{number}/comments",
            )
            .await
            .map_err(self.issue_missing(number))?;
        Ok(wire.into_iter().map(WireComment::into_comment).collect())
    }

    /// Post a comment. When `body` carries a [`Marker`], a failure GitHub may have applied is
    /// checked before the comment is sent again; without one it is not sent again.
    pub async fn create_comment(&self, number: u64, body: &str) -> Result<Comment, GitHubError> {
        let req = ApiRequest::write(
            Method::POST,
            self.repo_path(&format!("/issues/{number}/comments")),
            "/repos/{owner}/{repo}/issues/{number}/comments",
            json!({ "body": body }),
            false,
        );
        let sent = match Marker::parse_all(body).into_iter().next() {
            Some(marker) => {
                self.t
                    .create(&req, comment_of, || async {
                        Ok(marker.find_in(&self.list_comments(number).await?).cloned())
                    })
                    .await
            }
            None => self.t.send(&req).await.and_then(|r| comment_of(&r)),
        };
        sent.map_err(self.issue_missing(number))
    }

    /// Replace a comment's body.
    pub async fn update_comment(
        &self,
        comment_id: u64,
        body: &str,
    ) -> Result<Comment, GitHubError> {
        let req = ApiRequest::write(
            Method::PATCH,
            self.repo_path(&format!("/issues/comments/{comment_id}")),
            "/repos/{owner}/{repo}/issues/comments/{comment_id}",
            json!({ "body": body }),
            true,
        );
        comment_of(&self.t.send(&req).await?)
    }

    /// Post `body` stamped with `marker` unless a comment already carries the marker: among `known`
    /// when given (supervisor's own comments; then exactly one request, or none), else among the
    /// issue's comments on GitHub written by the login this client posts as (anyone can type a
    /// marker).
    pub async fn post_once(
        &self,
        number: u64,
        marker: &Marker,
        body: &str,
        known: Option<&[Comment]>,
    ) -> Result<Posted, GitHubError> {
        let existing = match known {
            Some(known) => marker.find_in(known).cloned(),
            None => marker.find_in(&self.own_comments(number).await?).cloned(),
        };
        if let Some(comment) = existing {
            tracing::debug!(issue = number, marker = %marker, "comment already posted");
            return Ok(Posted {
                comment,
                created: false,
            });
        }
        let comment = self
            .create_comment(number, &stamp_fitted(marker, body))
            .await?;
        Ok(Posted {
            comment,
            created: true,
        })
    }

    /// Say `body` in the issue's comment stamped with `marker`: edit that comment in place when
    /// one of the login this client posts as carries it (text already there is not written
    /// again), else post it.
    pub async fn post_or_edit(
        &self,
        number: u64,
        marker: &Marker,
        body: &str,
    ) -> Result<Posted, GitHubError> {
        let text = stamp_fitted(marker, body);
        let comment = match marker.find_in(&self.own_comments(number).await?) {
            Some(c) if c.body == text => c.clone(),
            Some(c) => self.update_comment(c.id, &text).await?,
            None => {
                let comment = self.create_comment(number, &text).await?;
                return Ok(Posted {
                    comment,
                    created: true,
                });
            }
        };
        Ok(Posted {
            comment,
            created: false,
        })
    }

    /// The issue's comments written by the login this client posts as (anyone can type a
    /// marker).
    /// The comments on issue (or pull request) `number` by the login this client posts as.
    pub async fn own_comments(&self, number: u64) -> Result<Vec<Comment>, GitHubError> {
        let me = self.viewer_login().await?;
        let mut own = self.list_comments(number).await?;
        own.retain(|c| c.author.eq_ignore_ascii_case(&me));
        Ok(own)
    }

    /// Close an issue as completed, after posting `comment` (once, by its marker) when given.
    pub async fn close_issue(
        &self,
        number: u64,
        comment: Option<(&Marker, &str)>,
    ) -> Result<(), GitHubError> {
        self.close_issue_as(number, CloseReason::Completed, comment)
            .await
    }

    /// Close an issue for `reason` (GitHub's `state_reason`), after posting `comment` (once, by
    /// its marker) when given.
    pub async fn close_issue_as(
        &self,
        number: u64,
        reason: CloseReason,
        comment: Option<(&Marker, &str)>,
    ) -> Result<(), GitHubError> {
        if let Some((marker, body)) = comment {
            self.post_once(number, marker, body, None).await?;
        }
        self.patch_issue(
            number,
            json!({ "state": "closed", "state_reason": reason.as_str() }),
        )
        .await?;
        Ok(())
    }

    /// Replace an issue's title and body; the edit is made by the login this client acts as.
    pub async fn update_issue(
        &self,
        number: u64,
        title: &str,
        body: &str,
    ) -> Result<Issue, GitHubError> {
        let resp = self
            .patch_issue(number, json!({ "title": title, "body": body }))
            .await?;
        Ok(resp.json::<WireIssue>()?.into_issue())
    }

    /// `PATCH` an issue with `fields` (setting them again changes nothing, so it may be resent).
    async fn patch_issue(
        &self,
        number: u64,
        fields: serde_json::Value,
    ) -> Result<ApiResponse, GitHubError> {
        let req = ApiRequest::write(
            Method::PATCH,
            self.repo_path(&format!("/issues/{number}")),
            "/repos/{owner}/{repo}/issues/{number}",
            fields,
            true,
        );
        self.t.send(&req).await.map_err(self.issue_missing(number))
    }

    /// Open a new issue, authored by whoever the client acts as. Not resent after a failure
    /// GitHub may have applied: a caller that must not open it twice looks for its marker first
    /// (an epic, among its sub-issues).
    pub async fn create_issue(
        &self,
        title: &str,
        body: &str,
        labels: &[String],
    ) -> Result<Issue, GitHubError> {
        let req = ApiRequest::write(
            Method::POST,
            self.repo_path("/issues"),
            "/repos/{owner}/{repo}/issues",
            json!({ "title": title, "body": body, "labels": labels }),
            false,
        );
        Ok(self.t.send(&req).await?.json::<WireIssue>()?.into_issue())
    }

    /// The latest issues `creator` opened (open or closed, newest first, pull requests left out):
    /// up to the last 100 — where a caller looks for one it may have opened just before a crash.
    pub async fn latest_issues_by(&self, creator: &str) -> Result<Vec<Issue>, GitHubError> {
        let creator: String = url::form_urlencoded::byte_serialize(creator.as_bytes()).collect();
        let req = ApiRequest::get(
            self.repo_path(&format!(
                "/issues?creator={creator}&state=all&sort=created&direction=desc&per_page=100"
            )),
            "/repos/{owner}/{repo}/issues",
        );
        let list = self.t.send(&req).await?.json::<Vec<WireIssue>>()?;
        Ok(list
            .into_iter()
            .map(WireIssue::into_issue)
            .filter(|i| !i.is_pull_request)
            .collect())
    }

    /// The sub-issues of `parent`, in GitHub's order.
    pub async fn sub_issues(&self, parent: u64) -> Result<Vec<Issue>, GitHubError> {
        let list: Vec<WireIssue> = self
            .get_all(
                self.repo_path(&format!("/issues/{parent}/sub_issues?per_page=100")),
                "/repos/{owner}/{repo}/issues/{number}/sub_issues",
            )
            .await
            .map_err(self.issue_missing(parent))?;
        Ok(list.into_iter().map(WireIssue::into_issue).collect())
    }

    /// Make the issue of database id `child` (GitHub names sub-issues by it) a sub-issue of
    /// `parent`.
    pub async fn add_sub_issue(&self, parent: u64, child: u64) -> Result<(), GitHubError> {
        let req = ApiRequest::write(
            Method::POST,
            self.repo_path(&format!("/issues/{parent}/sub_issues")),
            "/repos/{owner}/{repo}/issues/{number}/sub_issues",
            json!({ "sub_issue_id": child }),
            false,
        );
        self.t
            .send(&req)
            .await
            .map_err(self.issue_missing(parent))?;
        Ok(())
    }

    /// Record that issue `number` is blocked by `blocker` (a native dependency).
    /// (`blocker`: the blocking issue's database id, which GitHub names it by.)
    pub async fn add_blocked_by(&self, number: u64, blocker: u64) -> Result<(), GitHubError> {
        let req = ApiRequest::write(
            Method::POST,
            self.repo_path(&format!("/issues/{number}/dependencies/blocked_by")),
            "/repos/{owner}/{repo}/issues/{number}/dependencies/blocked_by",
            json!({ "issue_id": blocker }),
            false,
        );
        self.t
            .send(&req)
            .await
            .map_err(self.issue_missing(number))?;
        Ok(())
    }

    /// Record that issue `number` is no longer blocked by `blocker` (the blocking issue's
    /// database id). A dependency that is not there (already removed, or a server without issue
    /// dependencies, which answers 404 too) is no error; an issue `number` that does not exist is.
    pub async fn remove_blocked_by(&self, number: u64, blocker: u64) -> Result<(), GitHubError> {
        let mut req = ApiRequest::write(
            Method::DELETE,
            self.repo_path(&format!(
                "/issues/{number}/dependencies/blocked_by/{blocker}"
            )),
            "/repos/{owner}/{repo}/issues/{number}/dependencies/blocked_by/{issue_id}",
            serde_json::Value::Null,
            true,
        );
        req.body = None;
        match self.t.send(&req).await {
            Ok(_) => Ok(()),
            Err(e) if e.status() == Some(404) => {
                // Tell a missing issue from a missing dependency.
                self.get_issue(number).await?;
                tracing::info!(
                    issue = number,
                    blocker,
                    "no such dependency to remove (or issue dependencies are not available on this server)"
                );
                Ok(())
            }
            Err(e) => Err(self.issue_missing(number)(e)),
        }
    }

    /// The issues `number` is blocked by (GitHub's native dependencies), open or closed; none on
    /// a server without issue dependencies.
    pub async fn blocked_by(&self, number: u64) -> Result<Vec<Issue>, GitHubError> {
        let native: Vec<WireIssue> = match self
            .get_all(
                self.repo_path(&format!(
                    "/issues/{number}/dependencies/blocked_by?per_page=100"
                )),
                "/repos/{owner}/{repo}/issues/{number}/dependencies/blocked_by",
            )
            .await
        {
            Ok(list) => list,
            // Servers without issue dependencies (older GitHub Enterprise Server) answer 404.
            Err(e) if e.status() == Some(404) => {
                tracing::info!(
                    issue = number,
                    "issue dependencies not available on this server"
                );
                Vec::new()
            }
            Err(e) => return Err(e),
        };
        Ok(native.into_iter().map(WireIssue::into_issue).collect())
    }

    /// Open issues and pull requests `issue` waits for: GitHub's native "blocked by" dependencies,
    /// then "Depends on #N" / "Blocked by #N" references in its body.
    pub async fn open_blockers(&self, issue: &Issue) -> Result<Vec<Blocker>, GitHubError> {
        // An issue GitHub counted no dependencies of has none to list.
        let native = match issue.blocked_by_total {
            Some(0) => Vec::new(),
            _ => self.blocked_by(issue.number).await?,
        };
        let mut blockers: Vec<Blocker> = native
            .iter()
            .filter(|i| i.state == IssueState::Open)
            .map(|i| blocker(i, BlockerKind::Native))
            .collect();
        for number in body_blockers(&issue.body, &self.t.repo) {
            if number == issue.number || native.iter().any(|i| i.number == number) {
                continue;
            }
            match self.get_issue(number).await {
                Ok(i) if i.state == IssueState::Open => {
                    blockers.push(blocker(&i, BlockerKind::BodyReference))
                }
                Ok(_) => {}
                Err(GitHubError::IssueNotFound { .. }) => {
                    tracing::warn!(
                        issue = issue.number,
                        reference = number,
                        "the body depends on an issue that does not exist; ignored"
                    );
                }
                Err(e) => return Err(e),
            }
        }
        Ok(blockers)
    }
}

fn blocker(issue: &Issue, kind: BlockerKind) -> Blocker {
    Blocker {
        number: issue.number,
        title: issue.title.clone(),
        state: issue.state,
        kind,
        url: issue.html_url.clone(),
    }
}

/// `body` cut to fit GitHub's limit with `marker` stamped on it (the marker survives the cut).
fn stamp_fitted(marker: &Marker, body: &str) -> String {
    let room = MAX_BODY_CHARS - marker.render().chars().count() - 2;
    marker.stamp(&fit_body(body, room))
}

#[cfg(test)]
mod tests {
    use super::WireIssue;

    fn read(extra: serde_json::Value) -> super::Issue {
        let mut v = serde_json::json!({ "number": 7, "state": "open" });
        v.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        serde_json::from_value::<WireIssue>(v).unwrap().into_issue()
    }

    #[test]
    fn the_counts_of_comments_and_dependencies_are_known_only_when_given() {
        let issue = read(serde_json::json!({
            "comments": 0,
            "issue_dependencies_summary": {
                "blocked_by": 0, "blocking": 1, "total_blocked_by": 2, "total_blocking": 1
            },
        }));
        assert_eq!((issue.comments, issue.blocked_by_total), (Some(0), Some(2)));
        let bare = read(serde_json::json!({}));
        assert_eq!((bare.comments, bare.blocked_by_total), (None, None));
    }
}
