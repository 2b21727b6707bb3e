//! Who last edited an issue and its comments, and who renamed it, so that text changed by anyone but
//! a codeowner can be kept away from agents. One GraphQL request.
//!
//! Comments are matched to the REST API's ids through `fullDatabaseId` (a `BigInt` string):
//! github.com's comment ids passed 2^31 in 2024, and `databaseId` is a 32-bit `Int`.

use std::collections::BTreeMap;

use super::graphql::{IssueEditors, issue_editors};
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
    /// Who changed the issue's title, oldest first, one entry per rename (`ghost` for a deleted
    /// account), among the most recent 100 renames.
    pub title_renamers: Vec<String>,
    /// The issue has more renames than `title_renamers` lists.
    pub renames_truncated: bool,
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
                editors
                    .title_renamers
                    .push(event.actor.map_or_else(|| "ghost".to_string(), |a| a.login));
            }
        }
        editors.renames_truncated =
            timeline.total_count.max(0) as usize > editors.title_renamers.len();
        Ok(editors)
    }

    /// Who renamed the issue, oldest first (see [`Editors::title_renamers`]); the same request as
    /// [`GitHub::issue_editors`], which the pipeline already makes.
    pub async fn title_renamers(&self, number: u64) -> Result<Vec<String>, GitHubError> {
        Ok(self.issue_editors(number).await?.title_renamers)
    }
}
