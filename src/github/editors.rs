//! Who last edited an issue and its comments, so that text changed by anyone but a codeowner can be
//! kept away from agents. One GraphQL request.

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
            let Some(id) = node.database_id.and_then(|i| u64::try_from(i).ok()) else {
                continue;
            };
            editors.checked.push(id);
            if let Some(e) = node.editor {
                editors.comments.insert(id, e.login);
            }
        }
        Ok(editors)
    }
}
