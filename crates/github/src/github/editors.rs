//! Who last edited an issue and its comments, and who renamed it, so that text changed by anyone but
//! a codeowner can be kept away from agents. One GraphQL request.
//!
//! Comments are matched to the REST API's ids through `fullDatabaseId` (a `BigInt` string):
//! github.com's comment ids passed 2^31 in 2024, and `databaseId` is a 32-bit `Int`.

use std::collections::BTreeMap;

use super::graphql::{IssueEditors, Viewer, issue_editors, viewer};
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

impl GitHub {
    /// Who last edited the issue's body and its most recent 100 comments, and who renamed it.
    pub async fn issue_editors(&self, number: u64) -> Result<Editors, GitHubError> {
        let repo = self.repo().clone();
        let (data, errors) = self
            .graphql::<IssueEditors>(
                issue_editors::Variables {
                    owner: repo.owner.clone(),
                    name: repo.name.clone(),
                    number: number as i64,
                },
                "IssueEditors",
                false,
            )
            .await?;
        if let Some(e) = self.graphql_error("IssueEditors", &errors, |e| {
            e.path_is(&["repository", "issue"])
                .then(|| GitHubError::IssueNotFound {
                    repo: repo.clone(),
                    number,
                })
        }) {
            return Err(e);
        }
        let issue = data
            .and_then(|d| d.repository)
            .and_then(|r| r.issue)
            .ok_or(GitHubError::IssueNotFound {
                repo: repo.clone(),
                number,
            })?;
        let mut editors = Editors {
            issue: issue.editor.map(|e| e.login),
            ..Editors::default()
        };
        for node in issue
            .comments
            .nodes
            .unwrap_or_default()
            .into_iter()
            .flatten()
        {
            let Some(raw) = node.full_database_id else {
                continue;
            };
            let id = raw.trim().parse::<u64>().map_err(|_| GitHubError::InvalidResponse {
                route: "POST /graphql IssueEditors".into(),
                detail: format!(
                    "comment `fullDatabaseId` is `{raw}`, not a whole number: GitHub's BigInt ids are strings of digits"
                ),
            })?;
            editors.checked.push(id);
            if let Some(e) = node.editor {
                editors.comments.insert(id, e.login);
            }
        }
        use super::graphql::issue_editors::IssueEditorsRepositoryIssueTimelineItemsNodes as Item;
        let timeline = issue.timeline_items;
        for node in timeline.nodes.unwrap_or_default().into_iter().flatten() {
            if let Item::RenamedTitleEvent(event) = node {
                editors.renames.push(TitleRename {
                    actor: event.actor.map_or_else(|| "ghost".to_string(), |a| a.login),
                    from: event.previous_title,
                    to: event.current_title,
                });
            }
        }
        editors.renames_truncated = timeline.total_count.max(0) as usize > editors.renames.len();
        Ok(editors)
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
