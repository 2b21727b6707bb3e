//! What the GitHub layer hands to the rest of supervisor: plain data, independent of GitHub's JSON.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::config::Settings;
use crate::ids::BoardOption;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IssueState {
    #[default]
    Open,
    Closed,
}

impl IssueState {
    pub(crate) fn parse(s: &str) -> IssueState {
        if s.eq_ignore_ascii_case("closed") {
            IssueState::Closed
        } else {
            IssueState::Open
        }
    }
}

/// Why an issue was closed (GitHub's `state_reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CloseReason {
    /// Done: what GitHub assumes when no reason is given.
    Completed,
    /// Dropped: it will not be done.
    NotPlanned,
}

impl CloseReason {
    /// GitHub's spelling (`completed`, `not_planned`).
    pub fn as_str(self) -> &'static str {
        match self {
            CloseReason::Completed => "completed",
            CloseReason::NotPlanned => "not_planned",
        }
    }
}

/// An issue (or a pull request seen through the issues API).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Issue {
    /// GitHub's database id (what linking sub-issues and dependencies names); 0 when unknown.
    pub id: u64,
    pub number: u64,
    /// GraphQL id, needed to put the issue on a board.
    pub node_id: String,
    pub title: String,
    pub body: String,
    /// Login of the author.
    pub author: String,
    pub labels: Vec<String>,
    pub state: IssueState,
    pub html_url: String,
    /// The number belongs to a pull request.
    pub is_pull_request: bool,
    /// Its comments, as GitHub counted them when it was read; `None` when not known.
    #[serde(default)]
    pub comments: Option<u64>,
    /// The issues it is blocked by (GitHub's issue dependencies, open or closed), as GitHub
    /// counted them when it was read; `None` when not known.
    #[serde(default)]
    pub blocked_by_total: Option<u64>,
}

/// A comment on an issue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Comment {
    pub id: u64,
    pub author: String,
    pub body: String,
    pub created_at: DateTime<Utc>,
    pub html_url: String,
}

/// The result of [`GitHub::post_once`](super::GitHub::post_once).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Posted {
    pub comment: Comment,
    /// `false` when a comment with the marker was already there.
    pub created: bool,
}

/// How a blocker was declared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockerKind {
    /// GitHub's issue dependencies ("blocked by").
    Native,
    /// "Depends on #N" / "Blocked by #N" in the issue body.
    BodyReference,
}

/// An open issue or pull request the issue waits for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Blocker {
    pub number: u64,
    pub title: String,
    pub state: IssueState,
    pub kind: BlockerKind,
    pub url: String,
}

/// A check run on a commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckRun {
    pub name: String,
    /// `queued`, `in_progress`, `completed`, …
    pub status: String,
    /// `success`, `failure`, `neutral`, `cancelled`, `skipped`, `timed_out`, `action_required`, … once completed.
    pub conclusion: Option<String>,
    pub html_url: Option<String>,
}

/// The answer to a conditional (ETag) request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Conditional<T> {
    /// Changed since the ETag given (or none was given).
    Modified { value: T, etag: Option<String> },
    /// Unchanged; this answer did not count against the rate limit.
    NotModified,
}

/// A pull request to open.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewPullRequest {
    /// Branch in the repository.
    pub head: String,
    pub base: String,
    pub title: String,
    pub body: String,
    pub draft: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PullRequest {
    pub number: u64,
    pub html_url: String,
    /// `open` or `closed`.
    pub state: String,
    /// Head branch name.
    pub head: String,
    pub head_sha: String,
    /// Base branch name.
    pub base: String,
    /// The base branch's head as GitHub saw it for this answer.
    #[serde(default)]
    pub base_sha: String,
    pub title: String,
    pub body: String,
    pub draft: bool,
    pub merged: bool,
    /// `None` while GitHub is still computing it.
    pub mergeable: Option<bool>,
    /// `clean`, `dirty` (conflicts), `blocked`, `behind`, `unstable`, `unknown`, …
    pub mergeable_state: Option<String>,
}

/// Which board, and its column field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoardRef {
    /// Login of the user or organization owning the board.
    pub owner: String,
    pub number: u64,
    /// The single-select field whose options are the columns, usually `Status`.
    pub status_field: String,
}

impl BoardRef {
    pub fn from_settings(settings: &Settings) -> BoardRef {
        BoardRef {
            owner: settings.board_owner().to_string(),
            number: settings.project_number,
            status_field: settings.status_field.clone(),
        }
    }
}

/// One column of the board: an option of the status field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColumnOption {
    pub id: String,
    pub name: String,
}

/// The issue's card on the board.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoardItem {
    /// The issue the card stands for.
    pub issue: u64,
    pub project_id: String,
    pub project_number: u64,
    pub item_id: String,
    pub field_id: String,
    pub field_name: String,
    pub options: Vec<ColumnOption>,
    /// The card's column; `None` when its status is empty.
    pub column: Option<BoardOption>,
}

impl BoardItem {
    /// GitHub's name for the card's column.
    pub fn column_name(&self) -> Option<&str> {
        self.column.as_ref().map(BoardOption::as_str)
    }

    /// The option named `column`: exact match first, then ignoring case.
    pub(crate) fn option(&self, column: &str) -> Option<&ColumnOption> {
        self.options.iter().find(|o| o.name == column).or_else(|| {
            self.options
                .iter()
                .find(|o| o.name.eq_ignore_ascii_case(column))
        })
    }
}
