//! Review feedback on a pull request (one GraphQL request: reviews, line-comment threads with
//! their diff hunks, the conversation, each with author and last editor), and what a revision
//! writes back: replies in threads, resolved threads, the pull request's body.

use chrono::{DateTime, Utc};
use http::Method;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::graphql::{PullFeedback, ResolveThread, pull_feedback, resolve_thread};
use super::retry::ApiRequest;
use super::{GitHub, GitHubError, MAX_BODY_CHARS, fit_body};

/// Most reviews, threads, comments of a thread and conversation comments read (GitHub's page
/// size); what is beyond is counted in [`PullFeedback::left_out`].
pub const FEEDBACK_PAGE: usize = 100;

/// A pull request's state as GraphQL reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PullState {
    Open,
    Closed,
    Merged,
}

/// A review's verdict: webhooks spell it `changes_requested`, GraphQL `CHANGES_REQUESTED`; both
/// read as the same state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReviewState {
    #[serde(alias = "APPROVED")]
    Approved,
    #[serde(alias = "CHANGES_REQUESTED")]
    ChangesRequested,
    #[serde(alias = "COMMENTED")]
    Commented,
    #[serde(alias = "DISMISSED")]
    Dismissed,
    #[serde(alias = "PENDING")]
    Pending,
    /// A state GitHub added later: never taken for one of the above.
    #[serde(other)]
    Unknown,
}

impl ReviewState {
    /// Whether a review in this state asks for something a revision can act on.
    pub fn asks_for_changes(self) -> bool {
        matches!(self, ReviewState::ChangesRequested | ReviewState::Commented)
    }
}

/// A submitted review.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Review {
    pub id: u64,
    pub state: ReviewState,
    pub body: String,
    pub author: String,
    pub editor: Option<String>,
    pub submitted_at: Option<DateTime<Utc>>,
}

/// A comment in a review thread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReviewComment {
    pub id: u64,
    pub author: String,
    pub editor: Option<String>,
    pub body: String,
    pub path: String,
    pub line: Option<u64>,
    pub diff_hunk: String,
    pub created_at: Option<DateTime<Utc>>,
}

/// A thread of line comments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReviewThread {
    /// GraphQL node id (what `resolveReviewThread` takes).
    pub id: String,
    pub resolved: bool,
    pub path: String,
    pub line: Option<u64>,
    /// Oldest first; the first one started the thread.
    pub comments: Vec<ReviewComment>,
}

/// A comment in the pull request's conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConversationComment {
    pub id: u64,
    pub author: String,
    pub editor: Option<String>,
    pub body: String,
    pub created_at: Option<DateTime<Utc>>,
    pub url: String,
}

/// A pull request with the feedback on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Feedback {
    pub number: u64,
    pub url: String,
    pub state: PullState,
    pub head: String,
    pub head_sha: String,
    pub base: String,
    pub body: String,
    pub author: String,
    /// Who last edited the body, when anyone did.
    pub body_editor: Option<String>,
    pub created_at: Option<DateTime<Utc>>,
    pub reviews: Vec<Review>,
    pub threads: Vec<ReviewThread>,
    pub conversation: Vec<ConversationComment>,
    /// What was beyond the page size and not read (`"3 review threads"`).
    pub left_out: Vec<String>,
}

fn time(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

fn big_id(id: Option<&str>) -> u64 {
    id.and_then(|i| i.parse().ok()).unwrap_or_default()
}

/// The nodes of one page of a connection; what the page left out (of `total`) is noted.
fn page<T>(
    nodes: Option<Vec<Option<T>>>,
    total: i64,
    what: &str,
    left_out: &mut Vec<String>,
) -> Vec<T> {
    let nodes: Vec<T> = nodes.unwrap_or_default().into_iter().flatten().collect();
    let total = usize::try_from(total).unwrap_or_default();
    if total > nodes.len() {
        left_out.push(format!("{} {what}", total - nodes.len()));
    }
    nodes
}

macro_rules! login {
    ($actor:expr) => {
        $actor
            .map(|a| a.login)
            .unwrap_or_else(|| "ghost".to_string())
    };
}

fn review_state(s: &pull_feedback::PullRequestReviewState) -> ReviewState {
    use pull_feedback::PullRequestReviewState as R;
    match s {
        R::APPROVED => ReviewState::Approved,
        R::CHANGES_REQUESTED => ReviewState::ChangesRequested,
        R::COMMENTED => ReviewState::Commented,
        R::DISMISSED => ReviewState::Dismissed,
        R::PENDING => ReviewState::Pending,
        R::Other(_) => ReviewState::Unknown,
    }
}

fn number(n: Option<i64>) -> Option<u64> {
    n.and_then(|l| u64::try_from(l).ok())
}

fn convert(pr: pull_feedback::PullFeedbackRepositoryPullRequest) -> Feedback {
    use pull_feedback::PullRequestState as S;
    let mut left_out = Vec::new();
    let (reviews, total) = pr
        .reviews
        .map(|c| (c.nodes, c.total_count))
        .unwrap_or_default();
    let reviews = page(reviews, total, "reviews", &mut left_out)
        .into_iter()
        .map(|r| Review {
            id: big_id(r.full_database_id.as_deref()),
            state: review_state(&r.state),
            body: r.body,
            author: login!(r.author),
            editor: r.editor.map(|e| e.login),
            submitted_at: r.submitted_at.as_deref().and_then(time),
        })
        .collect();
    let threads = pr.review_threads;
    let threads = page(
        threads.nodes,
        threads.total_count,
        "review threads",
        &mut left_out,
    )
    .into_iter()
    .map(|t| {
        let what = format!("comments of the thread on {}", t.path);
        let comments = page(
            t.comments.nodes,
            t.comments.total_count,
            &what,
            &mut left_out,
        );
        ReviewThread {
            id: t.id,
            resolved: t.is_resolved,
            path: t.path,
            line: number(t.line),
            comments: comments
                .into_iter()
                .map(|c| ReviewComment {
                    id: big_id(c.full_database_id.as_deref()),
                    author: login!(c.author),
                    editor: c.editor.map(|e| e.login),
                    body: c.body,
                    path: c.path,
                    line: number(c.line),
                    diff_hunk: c.diff_hunk,
                    created_at: time(&c.created_at),
                })
                .collect(),
        }
    })
    .collect();
    let conv = pr.comments;
    let conversation = page(
        conv.nodes,
        conv.total_count,
        "conversation comments",
        &mut left_out,
    )
    .into_iter()
    .map(|c| ConversationComment {
        id: big_id(c.full_database_id.as_deref()),
        author: login!(c.author),
        editor: c.editor.map(|e| e.login),
        body: c.body,
        created_at: time(&c.created_at),
        url: c.url,
    })
    .collect();
    Feedback {
        number: u64::try_from(pr.number).unwrap_or_default(),
        url: pr.url,
        state: match pr.state {
            S::MERGED => PullState::Merged,
            S::CLOSED => PullState::Closed,
            _ => PullState::Open,
        },
        head: pr.head_ref_name,
        head_sha: pr.head_ref_oid,
        base: pr.base_ref_name,
        body: pr.body,
        author: login!(pr.author),
        body_editor: pr.editor.map(|e| e.login),
        created_at: time(&pr.created_at),
        reviews,
        threads,
        conversation,
        left_out,
    }
}

impl GitHub {
    /// The pull request `number` with its reviews, review threads and conversation, and the
    /// login this client acts as.
    pub async fn pull_feedback(&self, number: u64) -> Result<(Feedback, String), GitHubError> {
        let repo = self.repo().clone();
        let missing = || GitHubError::PullNotFound {
            repo: repo.clone(),
            number,
        };
        let (data, errors) = self
            .graphql::<PullFeedback>(
                pull_feedback::Variables {
                    owner: repo.owner.clone(),
                    name: repo.name.clone(),
                    number: i64::try_from(number).unwrap_or(i64::MAX),
                },
                "PullFeedback",
                false,
            )
            .await?;
        if let Some(e) = self.graphql_error("PullFeedback", &errors, |e| {
            e.path_is(&["repository", "pullRequest"]).then(missing)
        }) {
            return Err(e);
        }
        let data = data.ok_or_else(missing)?;
        let viewer = data.viewer.login;
        let pr = data
            .repository
            .and_then(|r| r.pull_request)
            .ok_or_else(missing)?;
        Ok((convert(pr), viewer))
    }

    /// Resolve a review thread (by its GraphQL node id).
    pub async fn resolve_thread(&self, thread: &str) -> Result<(), GitHubError> {
        let (data, errors) = self
            .graphql::<ResolveThread>(
                resolve_thread::Variables {
                    thread: thread.to_string(),
                },
                "ResolveThread",
                true,
            )
            .await?;
        if let Some(e) = self.graphql_error("ResolveThread", &errors, |_| None) {
            return Err(e);
        }
        let resolved = data
            .and_then(|d| d.resolve_review_thread)
            .and_then(|p| p.thread)
            .is_some_and(|t| t.is_resolved);
        if resolved {
            Ok(())
        } else {
            Err(GitHubError::InvalidResponse {
                route: "POST /graphql ResolveThread".into(),
                detail: format!("GitHub did not report thread {thread} as resolved"),
            })
        }
    }

    /// Reply in the thread that review comment `comment` of pull request `number` starts (GitHub
    /// takes only a thread's top-level comment here, no reply); the new comment's id.
    pub async fn reply_in_thread(
        &self,
        number: u64,
        comment: u64,
        body: &str,
    ) -> Result<u64, GitHubError> {
        #[derive(Deserialize)]
        struct Created {
            id: u64,
        }
        let req = ApiRequest::write(
            Method::POST,
            self.repo_path(&format!("/pulls/{number}/comments/{comment}/replies")),
            "/repos/{owner}/{repo}/pulls/{number}/comments/{comment_id}/replies",
            json!({ "body": fit_body(body, MAX_BODY_CHARS) }),
            false,
        );
        Ok(self.t.send(&req).await?.json::<Created>()?.id)
    }

    /// Submit a review: `event` is `APPROVE`, `REQUEST_CHANGES` or `COMMENT`; `comments` are
    /// (path, line, text) of its line comments. The review's id.
    pub async fn submit_review(
        &self,
        number: u64,
        event: &str,
        body: &str,
        comments: &[(&str, u64, &str)],
    ) -> Result<u64, GitHubError> {
        #[derive(Deserialize)]
        struct Submitted {
            id: u64,
        }
        let comments: Vec<_> = comments
            .iter()
            .map(|(path, line, body)| json!({ "path": path, "line": line, "side": "RIGHT", "body": body }))
            .collect();
        let req = ApiRequest::write(
            Method::POST,
            self.repo_path(&format!("/pulls/{number}/reviews")),
            "/repos/{owner}/{repo}/pulls/{number}/reviews",
            json!({ "event": event, "body": body, "comments": comments }),
            false,
        );
        Ok(self.t.send(&req).await?.json::<Submitted>()?.id)
    }

    /// Replace the pull request's body.
    pub async fn update_pull_body(&self, number: u64, body: &str) -> Result<(), GitHubError> {
        let req = ApiRequest::write(
            Method::PATCH,
            self.repo_path(&format!("/pulls/{number}")),
            "/repos/{owner}/{repo}/pulls/{number}",
            json!({ "body": fit_body(body, MAX_BODY_CHARS) }),
            true,
        );
        self.t.send(&req).await.map(|_| ())
    }
}
