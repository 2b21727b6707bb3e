//! An issue with its card, its parent, and who last edited it and its comments and who renamed it
//! (so that text changed by anyone but a codeowner can be kept away from agents). One GraphQL
//! request.
//!
//! Comments are matched to the REST API's ids through `fullDatabaseId` (a `BigInt` string):
//! github.com's comment ids passed 2^31 in 2024, and `databaseId` is a 32-bit `Int`.

use std::collections::BTreeMap;

use super::graphql::{IssueContext as IssueContextQuery, Viewer, issue_context, viewer};
use super::types::{BoardItem, BoardRef, Issue, IssueState};
use super::{GitHub, GitHubError};

/// Editors of an issue's body and of its most recent comments.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Editors {
    /// Who last edited the issue's body, when anyone did.
    pub issue: Option<String>,
    /// Comment id → who last edited it, for edited comments among the most recent 100.
    pub comments: BTreeMap<u64, String>,
    /// Ids of the comments whose editors are known (edited or not).
    pub checked: Vec<u64>,
    /// The issue's title changes, oldest first, among the most recent 100.
    pub renames: Vec<TitleRename>,
    /// The issue has more renames than `renames` lists.
    pub renames_truncated: bool,
}

/// One change of an issue's title (a timeline `RenamedTitleEvent`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TitleRename {
    /// Who made it (`ghost` for a deleted account).
    pub actor: String,
    pub from: String,
    pub to: String,
}

/// Whether, and by whom, a comment was edited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommentEdit<'a> {
    Unedited,
    EditedBy(&'a str),
    /// Too old for the check (beyond the most recent 100 comments).
    Unknown,
}

impl Editors {
    /// What is known about edits of comment `id`.
    pub fn comment(&self, id: u64) -> CommentEdit<'_> {
        match self.comments.get(&id) {
            Some(editor) => CommentEdit::EditedBy(editor),
            None if self.checked.contains(&id) => CommentEdit::Unedited,
            None => CommentEdit::Unknown,
        }
    }
}

/// The issue a sub-issue belongs to, as GitHub has it (in this repository).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParentIssue {
    pub number: u64,
    /// Login of its author.
    pub author: String,
    pub labels: Vec<String>,
    pub state: IssueState,
}

/// What one GraphQL request tells of an issue: the issue, its card on the board, who edited it,
/// and the issue it is a sub-issue of.
#[derive(Debug, Clone)]
pub struct IssueContext {
    /// The issue as this answer has it (what it is blocked by is not counted).
    pub issue: Issue,
    /// Its card on the board asked about, with the board's columns; `None` when it has none.
    pub board: Option<BoardItem>,
    pub editors: Editors,
    /// The issue it is a sub-issue of, when that is an issue of this repository.
    pub parent: Option<ParentIssue>,
}

type Read = issue_context::IssueContextRepositoryIssue;

impl GitHub {
    /// Issue `number` with its card on `board`, who last edited its body and its most recent 100
    /// comments and who renamed it, and its parent: one request.
    pub async fn issue_context(
        &self,
        board: &BoardRef,
        number: u64,
    ) -> Result<IssueContext, GitHubError> {
        let repo = self.repo().clone();
        let (data, errors) = self
            .graphql::<IssueContextQuery>(
                issue_context::Variables {
                    owner: repo.owner.clone(),
                    name: repo.name.clone(),
                    number: number as i64,
                    status_field: board.status_field.clone(),
                },
                "IssueContext",
                false,
            )
            .await?;
        let missing = || GitHubError::IssueNotFound {
            repo: repo.clone(),
            number,
        };
        if let Some(e) = self.graphql_error("IssueContext", &errors, |e| {
            if e.path_is(&["repository", "issue"]) {
                Some(missing())
            } else if e.path_is(&["repository"]) {
                Some(GitHubError::RepoNotFound { repo: repo.clone() })
            } else {
                None
            }
        }) {
            return Err(e);
        }
        let repository = data
            .and_then(|d| d.repository)
            .ok_or_else(|| GitHubError::RepoNotFound { repo: repo.clone() })?;
        let read = repository.issue.ok_or_else(missing)?;
        let board = self.card_on(board, number, &read.project_items).await?;
        let editors = editors_of(&read)?;
        let parent = (read.parent.as_ref())
            .filter(|p| {
                p.repository
                    .name_with_owner
                    .eq_ignore_ascii_case(&format!("{}/{}", repo.owner, repo.name))
            })
            .map(|p| owner_of(&p.issue_owner));
        let own = owner_of(&read.issue_owner);
        let issue = Issue {
            id: (read.full_database_id.as_deref())
                .and_then(|id| id.trim().parse().ok())
                .unwrap_or(0),
            number,
            node_id: read.id.clone(),
            title: read.title.clone(),
            body: read.body.clone(),
            author: own.author,
            labels: own.labels,
            state: own.state,
            html_url: read.url.clone(),
            is_pull_request: false,
            comments: Some(read.comments.total_count.max(0) as u64),
            blocked_by_total: None,
        };
        Ok(IssueContext {
            issue,
            board,
            editors,
            parent,
        })
    }

    /// The login the token acts as, from GraphQL's `viewer` (which installation tokens may read).
    pub(super) async fn graphql_viewer(&self) -> Result<String, GitHubError> {
        let (data, errors) = self
            .graphql::<Viewer>(viewer::Variables {}, "Viewer", false)
            .await?;
        if let Some(e) = self.graphql_error("Viewer", &errors, |_| None) {
            return Err(e);
        }
        data.map(|d| d.viewer.login)
            .ok_or_else(|| GitHubError::InvalidResponse {
                route: "POST /graphql Viewer".into(),
                detail: "GitHub named no viewer for the token".into(),
            })
    }
}

/// The login GitHub names, or `ghost` for a deleted account.
fn login_of(login: Option<&str>) -> String {
    login.unwrap_or("ghost").to_string()
}

/// An issue's number, author, labels and state, as the fragment `IssueOwner` reads them.
fn owner_of(o: &issue_context::IssueOwner) -> ParentIssue {
    ParentIssue {
        number: o.number.max(0) as u64,
        author: login_of(o.author.as_ref().map(|a| a.login.as_str())),
        labels: (o.labels.iter())
            .flat_map(|l| l.nodes.iter().flatten().flatten())
            .map(|l| l.name.clone())
            .collect(),
        state: match o.state {
            issue_context::IssueState::CLOSED => IssueState::Closed,
            _ => IssueState::Open,
        },
    }
}

/// Who last edited the issue's body and its most recent 100 comments, and who renamed it.
fn editors_of(issue: &Read) -> Result<Editors, GitHubError> {
    let mut editors = Editors {
        issue: issue.editor.as_ref().map(|e| e.login.clone()),
        ..Editors::default()
    };
    for node in (issue.comments.nodes.iter()).flatten().flatten() {
        let Some(raw) = &node.full_database_id else {
            continue;
        };
        let id = raw.trim().parse::<u64>().map_err(|_| GitHubError::InvalidResponse {
            route: "POST /graphql IssueContext".into(),
            detail: format!(
                "comment `fullDatabaseId` is `{raw}`, not a whole number: GitHub's BigInt ids are strings of digits"
            ),
        })?;
        editors.checked.push(id);
        if let Some(e) = &node.editor {
            editors.comments.insert(id, e.login.clone());
        }
    }
    use issue_context::IssueContextRepositoryIssueTimelineItemsNodes as Item;
    let timeline = &issue.timeline_items;
    for node in (timeline.nodes.iter()).flatten().flatten() {
        if let Item::RenamedTitleEvent(event) = node {
            editors.renames.push(TitleRename {
                actor: login_of(event.actor.as_ref().map(|a| a.login.as_str())),
                from: event.previous_title.clone(),
                to: event.current_title.clone(),
            });
        }
    }
    editors.renames_truncated = timeline.total_count.max(0) as usize > editors.renames.len();
    Ok(editors)
}
