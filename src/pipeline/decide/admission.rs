//! Phase 0: whether an issue may run at all. Refusals happen before anything is written.

use crate::config::{Settings, Workflow};
use crate::github::{Blocker, BoardItem, Editors, Issue, IssueState};

/// Why the issue itself may not run: an untrusted author, or closed.
pub fn refuse_issue(settings: &Settings, issue: &Issue) -> Option<String> {
    if !settings.is_codeowner(&issue.author) {
        return Some(format!(
            "issue #{} was opened by @{}, who is not a codeowner ({}); nothing was posted",
            issue.number,
            issue.author,
            settings.codeowners.join(", ")
        ));
    }
    (issue.state == IssueState::Closed).then(|| format!("issue #{} is closed", issue.number))
}

/// Why the issue may not run given its blockers and who last edited it.
pub fn refuse_context(
    settings: &Settings,
    issue: &Issue,
    blockers: &[Blocker],
    editors: &Editors,
) -> Option<String> {
    if !blockers.is_empty() {
        let names = blockers
            .iter()
            .map(|b| format!("#{} ({})", b.number, b.title))
            .collect::<Vec<_>>()
            .join(", ");
        return Some(format!(
            "blocked by open {names}; run again when they are closed"
        ));
    }
    let editor = editors.issue.as_deref()?;
    (!settings.is_codeowner(editor)).then(|| {
        format!(
            "the description of issue #{} was last edited by @{editor}, who is not a codeowner; \
             a codeowner must review it (and edit it, so the edit is theirs) before it runs; nothing was posted",
            issue.number
        )
    })
}

/// The column the run starts from: the card's, or Backlog for a card without a status.
pub fn start_column(workflow: &Workflow, board: &BoardItem) -> String {
    board
        .column
        .clone()
        .unwrap_or_else(|| workflow.backlog().status.clone())
}
