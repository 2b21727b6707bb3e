//! The Projects (v2) board, through GraphQL: find the issue's card and column, add it, move it.

use graphql_client::GraphQLQuery;
use serde::Deserialize;

use crate::ids::BoardOption;

use super::graphql::{
    AddToBoard, ProjectBoard, UpdateItemStatus, add_to_board, issue_context, project_board,
    update_item_status,
};
use super::retry::ApiRequest;
use super::setup::{RepositoryInfo, Viewer, permission_name};
use super::types::{BoardItem, BoardRef, ColumnOption, Issue};
use super::{GitHub, GitHubError};

/// A board's project id and its status field's id and options, in order.
pub(crate) type BoardFieldResult = Result<(String, String, Vec<ColumnOption>), GitHubError>;

/// One entry of a GraphQL `errors` list; GitHub adds a `type` beside the standard fields.
#[derive(Debug, Deserialize)]
pub(crate) struct GqlError {
    #[serde(default)]
    message: String,
    #[serde(rename = "type", default)]
    pub(super) kind: Option<String>,
    #[serde(default)]
    path: Vec<serde_json::Value>,
}

impl GqlError {
    pub(super) fn path_is(&self, want: &[&str]) -> bool {
        self.path.len() == want.len()
            && self
                .path
                .iter()
                .zip(want)
                .all(|(p, w)| p.as_str() == Some(*w))
    }
}

#[derive(Deserialize)]
struct Envelope<T> {
    #[serde(default = "none")]
    data: Option<T>,
    #[serde(default)]
    errors: Vec<GqlError>,
}

fn none<T>() -> Option<T> {
    None
}

/// The board's status field, as the fragment `StatusField` reads it.
struct FieldShape {
    project_id: String,
    project_number: u64,
    field: Field,
}

enum Field {
    Missing,
    NotSingleSelect,
    SingleSelect {
        id: String,
        name: String,
        options: Vec<ColumnOption>,
    },
}

/// Turn each operation's copy of the `StatusField` / `StatusValue` fragments into plain data.
macro_rules! fragment_readers {
    ($m:ident) => {
        impl From<&$m::StatusField> for FieldShape {
            fn from(f: &$m::StatusField) -> FieldShape {
                use $m::StatusFieldField as F;
                FieldShape {
                    project_id: f.id.clone(),
                    project_number: f.number.max(0) as u64,
                    field: match &f.field {
                        None => Field::Missing,
                        Some(F::ProjectV2SingleSelectField(s)) => Field::SingleSelect {
                            id: s.id.clone(),
                            name: s.name.clone(),
                            options: s
                                .options
                                .iter()
                                .map(|o| ColumnOption {
                                    id: o.id.clone(),
                                    name: o.name.clone(),
                                })
                                .collect(),
                        },
                        Some(_) => Field::NotSingleSelect,
                    },
                }
            }
        }
    };
}

macro_rules! value_reader {
    ($m:ident) => {
        /// Item id and column of a `StatusValue` fragment.
        pub(super) fn item_column(v: &$m::StatusValue) -> (String, Option<String>) {
            use $m::StatusValueFieldValueByName as V;
            let column = match &v.field_value_by_name {
                Some(V::ProjectV2ItemFieldSingleSelectValue(s)) => s.name.clone(),
                _ => None,
            };
            (v.id.clone(), column)
        }
    };
}

fragment_readers!(issue_context);
fragment_readers!(project_board);
fragment_readers!(add_to_board);

mod issue_items {
    use super::issue_context;
    value_reader!(issue_context);
    pub(super) use item_column as read;
}

mod added {
    use super::add_to_board;
    value_reader!(add_to_board);
    pub(super) use item_column as read;
}

/// The ids of the boards a client has added cards to, by owner and number: a board keeps its id
/// for as long as it exists.
#[derive(Debug, Default)]
pub(super) struct BoardIds(std::sync::Mutex<std::collections::HashMap<(String, u64), String>>);

impl BoardIds {
    fn key(board: &BoardRef) -> (String, u64) {
        (board.owner.to_ascii_lowercase(), board.number)
    }

    fn ids(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<(String, u64), String>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn known(&self, board: &BoardRef) -> Option<String> {
        self.ids().get(&Self::key(board)).cloned()
    }

    fn remember(&self, board: &BoardRef, id: &str) {
        self.ids().insert(Self::key(board), id.to_string());
    }

    fn forget(&self, board: &BoardRef) {
        self.ids().remove(&Self::key(board));
    }
}

impl GitHub {
    /// Send one graphql_client operation; the envelope's `data` and `errors`.
    pub(super) async fn graphql<Q: GraphQLQuery>(
        &self,
        variables: Q::Variables,
        operation: &str,
        mutation: bool,
    ) -> Result<(Option<Q::ResponseData>, Vec<GqlError>), GitHubError> {
        let (data, errors, _) = self
            .graphql_with_scopes::<Q>(variables, operation, mutation)
            .await?;
        Ok((data, errors))
    }

    /// [`GitHub::graphql`], with a classic token's scopes (`X-OAuth-Scopes`, sent with every answer).
    pub(super) async fn graphql_with_scopes<Q: GraphQLQuery>(
        &self,
        variables: Q::Variables,
        operation: &str,
        mutation: bool,
    ) -> Result<(Option<Q::ResponseData>, Vec<GqlError>, Option<Vec<String>>), GitHubError> {
        let encode = |detail: String| GitHubError::InvalidResponse {
            route: format!("POST /graphql {operation}"),
            detail,
        };
        let built = Q::build_query(variables);
        // graphql_client embeds the whole `.graphql` file; GitHub gets only this operation.
        let document = super::graphql::operation_document(built.query, built.operation_name)
            .map_err(encode)?;
        let mut body = serde_json::to_value(&built)
            .map_err(|e| encode(format!("cannot encode the query: {e}")))?;
        body["query"] = serde_json::Value::String(document.to_string());
        let req = ApiRequest {
            method: http::Method::POST,
            path: "/graphql".into(),
            route: format!("POST /graphql {operation}"),
            body: Some(body),
            if_none_match: None,
            accept: None,
            mutation,
            // Both mutations used here are idempotent: setting a value, adding an item (GitHub
            // answers with the existing card when it is already on the board).
            repeatable: true,
        };
        let resp = self.t.send(&req).await?;
        let envelope: Envelope<Q::ResponseData> = resp.json()?;
        Ok((
            envelope.data,
            envelope.errors,
            super::setup::scopes_of(&resp),
        ))
    }

    /// The first error, as the most specific [`GitHubError`]: scopes, then `not_found`'s reading of a
    /// `NOT_FOUND`, then a generic GraphQL error.
    pub(super) fn graphql_error(
        &self,
        operation: &str,
        errors: &[GqlError],
        not_found: impl Fn(&GqlError) -> Option<GitHubError>,
    ) -> Option<GitHubError> {
        if let Some(e) = errors
            .iter()
            .find(|e| e.kind.as_deref() == Some("INSUFFICIENT_SCOPES"))
        {
            return Some(scope_error(&e.message));
        }
        if let Some(e) = errors.iter().find(|e| {
            e.kind.as_deref() == Some("FORBIDDEN")
                && e.message.contains("Resource not accessible by")
        }) {
            tracing::debug!(operation, message = %e.message, "Projects access refused");
            return Some(GitHubError::missing_project_scope());
        }
        if let Some(mapped) = errors
            .iter()
            .filter(|e| e.kind.as_deref() == Some("NOT_FOUND"))
            .find_map(&not_found)
        {
            return Some(mapped);
        }
        errors.first().map(|e| GitHubError::GraphQl {
            operation: operation.to_string(),
            kind: e.kind.clone(),
            message: e.message.clone(),
        })
    }

    /// The issue's card on `board`, with the board's columns; `None` when the issue is not on it.
    pub async fn board_item(
        &self,
        board: &BoardRef,
        issue: u64,
    ) -> Result<Option<BoardItem>, GitHubError> {
        Ok(self.issue_context(board, issue).await?.board)
    }

    /// Which of an issue's cards (`items`, as [`GitHub::issue_context`] read them) is on `board`.
    pub(super) async fn card_on(
        &self,
        board: &BoardRef,
        issue: u64,
        items: &issue_context::IssueContextRepositoryIssueProjectItems,
    ) -> Result<Option<BoardItem>, GitHubError> {
        let Some(node) = (items.nodes.iter()).flatten().flatten().find(|n| {
            use issue_context::IssueContextRepositoryIssueProjectItemsNodesProjectOwner as Owner;
            let login = match &n.project.owner {
                Owner::User(u) => Some(u.login.as_str()),
                Owner::Organization(o) => Some(o.login.as_str()),
                _ => None,
            };
            n.project.status_field.number.max(0) as u64 == board.number
                && login.is_some_and(|l| l.eq_ignore_ascii_case(&board.owner))
        }) else {
            // An App sees no cards of a user's board: tell that from "not on the board".
            if self.t.is_app() {
                self.project(board).await?;
            }
            return Ok(None);
        };
        let (item_id, column) = issue_items::read(&node.status_value);
        board_item(
            board,
            issue,
            FieldShape::from(&node.project.status_field),
            item_id,
            column.map(BoardOption::new),
        )
        .map(Some)
    }

    /// The board's project id and status field.
    async fn project(&self, board: &BoardRef) -> Result<FieldShape, GitHubError> {
        self.project_and_repository(board).await?.0
    }

    /// The board's project id and status field and, from the same request, the caller's login,
    /// scopes and permission on the repository (`None` when GitHub did not answer that part).
    async fn project_and_repository(
        &self,
        board: &BoardRef,
    ) -> Result<(Result<FieldShape, GitHubError>, Option<RepositoryInfo>), GitHubError> {
        let repo = self.t.repo.clone();
        let (data, errors, scopes) = self
            .graphql_with_scopes::<ProjectBoard>(
                project_board::Variables {
                    login: board.owner.clone(),
                    number: board.number as i64,
                    status_field: board.status_field.clone(),
                    owner: repo.owner.clone(),
                    name: repo.name.clone(),
                },
                "ProjectBoard",
                false,
            )
            .await?;
        // Errors about the repository or the viewer are not the board's.
        let (others, board_errors): (Vec<GqlError>, Vec<GqlError>) =
            errors.into_iter().partition(|e| {
                e.path
                    .first()
                    .and_then(|p| p.as_str())
                    .is_some_and(|p| p == "repository" || p == "viewer")
            });
        let repository = match &data {
            Some(d) if others.is_empty() => d.repository.as_ref().map(|r| {
                let viewer = Viewer {
                    login: d.viewer.login.clone(),
                    scopes: scopes.clone(),
                };
                self.remember_viewer(&viewer.login);
                RepositoryInfo {
                    node_id: r.id.clone(),
                    permission: r.viewer_permission.as_ref().map(permission_name),
                    viewer,
                }
            }),
            _ => None,
        };
        let owner = data.and_then(|d| d.repository_owner);
        Ok((self.board_of(board, owner, &board_errors), repository))
    }

    /// The board from the `repositoryOwner` part of a `ProjectBoard` answer.
    fn board_of(
        &self,
        board: &BoardRef,
        owner: Option<project_board::ProjectBoardRepositoryOwner>,
        errors: &[GqlError],
    ) -> Result<FieldShape, GitHubError> {
        let board_missing = || GitHubError::BoardNotFound {
            owner: board.owner.clone(),
            number: board.number,
        };
        use project_board::ProjectBoardRepositoryOwner as Owner;
        // GitHub Apps cannot reach boards owned by users, whatever their permissions: GitHub
        // answers as if the board were missing or forbidden. Say so rather than blame the scopes.
        let user_owned = owner.as_ref().is_some_and(|o| matches!(o, Owner::User(_)));
        let reached = owner.as_ref().is_some_and(|o| match o {
            Owner::User(u) => u.project_v2.is_some(),
            Owner::Organization(o) => o.project_v2.is_some(),
        });
        if self.t.is_app() && user_owned && !reached {
            return Err(GitHubError::AppCannotReachUserBoard {
                owner: board.owner.clone(),
                number: board.number,
            });
        }
        if let Some(e) = self.graphql_error("ProjectBoard", errors, |_| Some(board_missing())) {
            return Err(e);
        }
        let project = owner
            .and_then(|o| match o {
                Owner::User(u) => u.project_v2,
                Owner::Organization(o) => o.project_v2,
            })
            .ok_or_else(board_missing)?;
        Ok(FieldShape::from(&project))
    }

    /// The board's project id, its status field's id and options, and from the same request the
    /// caller's login, scopes and permission on the repository (`None` when GitHub left that part
    /// out, e.g. the repository is not found: [`GitHub::repository_info`] says why).
    pub async fn board_and_repository(
        &self,
        board: &BoardRef,
    ) -> Result<(BoardFieldResult, Option<RepositoryInfo>), GitHubError> {
        let (shape, repository) = self.project_and_repository(board).await?;
        let field = shape.and_then(|shape| {
            let project_id = shape.project_id.clone();
            single_select(board, shape.field)
                .map(|(field, _, options)| (project_id, field, options))
        });
        Ok((field, repository))
    }

    /// The board's project id and its status field's id and options, in order.
    pub async fn board_field(&self, board: &BoardRef) -> BoardFieldResult {
        self.board_and_repository(board).await?.0
    }

    /// The board's columns: the options of its status field, in order.
    pub async fn board_columns(&self, board: &BoardRef) -> Result<Vec<ColumnOption>, GitHubError> {
        let shape = self.project(board).await?;
        single_select(board, shape.field).map(|(_, _, options)| options)
    }

    /// Put `issue` on `board` (GitHub returns the existing card when it is already there). The
    /// board's id is read once per client (a board keeps its id); its status field comes with
    /// the card, as it is now.
    pub async fn add_to_board(
        &self,
        board: &BoardRef,
        issue: &Issue,
    ) -> Result<BoardItem, GitHubError> {
        let project_id = match self.board_ids.known(board) {
            Some(id) => id,
            None => {
                let id = self.project(board).await?.project_id;
                self.board_ids.remember(board, &id);
                id
            }
        };
        let added = self.add_item(board, issue, project_id).await;
        if added.is_err() {
            // A board deleted (or moved) since: the next add reads it again.
            self.board_ids.forget(board);
        }
        added
    }

    async fn add_item(
        &self,
        board: &BoardRef,
        issue: &Issue,
        project_id: String,
    ) -> Result<BoardItem, GitHubError> {
        let (data, errors) = self
            .graphql::<AddToBoard>(
                add_to_board::Variables {
                    project_id,
                    content_id: issue.node_id.clone(),
                    status_field: board.status_field.clone(),
                },
                "AddToBoard",
                true,
            )
            .await?;
        if let Some(e) = self.graphql_error("AddToBoard", &errors, |_| None) {
            return Err(e);
        }
        let item = data
            .and_then(|d| d.add_project_v2_item_by_id)
            .and_then(|p| p.item)
            .ok_or_else(|| no_item("AddToBoard"))?;
        let (item_id, column) = added::read(&item.status_value);
        board_item(
            board,
            issue.number,
            FieldShape::from(&item.project),
            item_id,
            column.map(BoardOption::new),
        )
    }

    /// Move the card to `column`. An unknown column is an error listing the field's options.
    pub async fn move_card(
        &self,
        item: &BoardItem,
        column: &BoardOption,
    ) -> Result<(), GitHubError> {
        let option = item
            .option(column.as_str())
            .ok_or_else(|| GitHubError::UnknownColumn {
                column: column.to_string(),
                field: item.field_name.clone(),
                options: item.options.iter().map(|o| o.name.clone()).collect(),
            })?;
        let (data, errors) = self
            .graphql::<UpdateItemStatus>(
                update_item_status::Variables {
                    project_id: item.project_id.clone(),
                    item_id: item.item_id.clone(),
                    field_id: item.field_id.clone(),
                    option_id: option.id.clone(),
                },
                "UpdateItemStatus",
                true,
            )
            .await?;
        if let Some(e) = self.graphql_error("UpdateItemStatus", &errors, |_| {
            Some(GitHubError::NotOnBoard {
                issue: item.issue,
                project: item.project_number,
            })
        }) {
            return Err(e);
        }
        data.and_then(|d| d.update_project_v2_item_field_value)
            .and_then(|p| p.project_v2_item)
            .map(|_| ())
            .ok_or_else(|| no_item("UpdateItemStatus"))
    }
}

fn no_item(operation: &str) -> GitHubError {
    GitHubError::InvalidResponse {
        route: format!("POST /graphql {operation}"),
        detail: "no item in the answer".into(),
    }
}

fn board_item(
    board: &BoardRef,
    issue: u64,
    shape: FieldShape,
    item_id: String,
    column: Option<BoardOption>,
) -> Result<BoardItem, GitHubError> {
    let (field_id, field_name, options) = single_select(board, shape.field)?;
    Ok(BoardItem {
        issue,
        project_id: shape.project_id,
        project_number: shape.project_number,
        item_id,
        field_id,
        field_name,
        options,
        column,
    })
}

/// The status field's id, name and options, or why the board has no usable status field.
fn single_select(
    board: &BoardRef,
    field: Field,
) -> Result<(String, String, Vec<ColumnOption>), GitHubError> {
    match field {
        Field::SingleSelect { id, name, options } => Ok((id, name, options)),
        Field::NotSingleSelect => Err(GitHubError::StatusFieldNotFound {
            project: board.number,
            field: format!(
                "{} (it exists but is not single-select)",
                board.status_field
            ),
        }),
        Field::Missing => Err(GitHubError::StatusFieldNotFound {
            project: board.number,
            field: board.status_field.clone(),
        }),
    }
}

/// `INSUFFICIENT_SCOPES`: name the scope GitHub asks for; for anything about projects, `project`.
fn scope_error(message: &str) -> GitHubError {
    let wanted = message
        .split("scopes: [")
        .nth(1)
        .and_then(|rest| rest.split(']').next())
        .map(|list| {
            list.split(',')
                .map(|s| s.trim().trim_matches(['\'', '"']).to_string())
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    if wanted.is_empty() || wanted.iter().any(|s| s.contains("project")) {
        return GitHubError::missing_project_scope();
    }
    let scope = wanted.join("' or '");
    GitHubError::MissingScope {
        hint: format!(
            "GitHub says: {message} — gh CLI token: `gh auth refresh -s {}`; classic token: add the scope at https://github.com/settings/tokens",
            wanted[0]
        ),
        scope,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scope_messages() {
        let m = "Your token has not been granted the required scopes to execute this query. The 'projectItems' field requires one of the following scopes: ['read:project'], but your token has only been granted the: ['repo'] scopes.";
        assert!(
            matches!(scope_error(m), GitHubError::MissingScope { scope, .. } if scope == "project")
        );
        let m = "The 'x' field requires one of the following scopes: ['read:org'], but …";
        let e = scope_error(m);
        assert!(
            e.to_string()
                .starts_with("GitHub token missing 'read:org' scope"),
            "{e}"
        );
        assert!(
            matches!(scope_error("odd"), GitHubError::MissingScope { scope, .. } if scope == "project")
        );
    }
}
