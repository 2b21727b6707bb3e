//! Setting a repository up for supervisor: who the token is and what it may do, who owns a login,
//! whether codeowners exist, and creating, linking and shaping a board (`supervisor init`,
//! `supervisor doctor`).

use super::graphql::{
    CreateBoard, LinkBoard, OwnerBoards, OwnerKind, RepositorySetup, SetStatusOptions, UserExists,
    create_board, link_board, owner_boards, owner_kind, repository_setup, set_status_options,
    user_exists,
};
use super::retry::ApiRequest;
use super::types::ColumnOption;
use super::{GitHub, GitHubError};

/// The account behind the credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Viewer {
    pub login: String,
    /// A classic token's scopes (`X-OAuth-Scopes`); `None` for fine-grained tokens and Apps,
    /// whose permissions GitHub does not list in a header.
    pub scopes: Option<Vec<String>>,
}

/// Whether a login is a user or an organization.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccountKind {
    User,
    Organization,
}

/// The repository as its setup needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepositoryInfo {
    pub node_id: String,
    /// `ADMIN`, `MAINTAIN`, `WRITE`, `TRIAGE` or `READ`; `None` when GitHub does not say.
    pub permission: Option<String>,
    /// Who asked: the token's login and, for a classic token, its scopes.
    pub viewer: Viewer,
}

/// A `RepositoryPermission` as GitHub spells it: `ADMIN`, `WRITE`, ….
pub(super) fn permission_name(p: &impl std::fmt::Debug) -> String {
    format!("{p:?}")
        .trim_start_matches("Other(\"")
        .trim_end_matches("\")")
        .to_uppercase()
}

/// A classic token's scopes, from the `X-OAuth-Scopes` header GitHub sends with every answer.
pub(super) fn scopes_of(resp: &super::retry::ApiResponse) -> Option<Vec<String>> {
    resp.header("x-oauth-scopes").map(|s| {
        s.split(',')
            .map(|p| p.trim().to_string())
            .filter(|p| !p.is_empty())
            .collect()
    })
}

/// A board created by [`GitHub::create_board`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewBoard {
    pub(crate) id: String,
    pub number: u64,
    pub url: String,
}

impl GitHub {
    /// Remember `login` (a token's, from a GraphQL `viewer`) as the one this client posts as. An
    /// App's JWT client posts as its bot, which [`GitHub::viewer_login`] finds itself.
    pub(super) fn remember_viewer(&self, login: &str) {
        if !self.t.is_app() && !login.trim().is_empty() {
            let _ = self.viewer.set(login.to_string());
        }
    }

    /// `GET /user`: the login, and the scopes of a classic token.
    pub async fn viewer(&self) -> Result<Viewer, GitHubError> {
        #[derive(serde::Deserialize)]
        struct User {
            login: String,
        }
        let resp = self
            .t
            .send(&ApiRequest::get("/user".into(), "/user"))
            .await?;
        let user: User = resp.json()?;
        if !self.t.is_app() {
            // The login this client posts as: asked once per client.
            let _ = self.viewer.set(user.login.clone());
        }
        Ok(Viewer {
            login: user.login,
            scopes: scopes_of(&resp),
        })
    }

    /// Whether `login` is a user or an organization, with its node id; `None` when neither.
    pub async fn account(&self, login: &str) -> Result<Option<(AccountKind, String)>, GitHubError> {
        let (data, errors) = self
            .graphql::<OwnerKind>(
                owner_kind::Variables {
                    login: login.to_string(),
                },
                "OwnerKind",
                false,
            )
            .await?;
        if let Some(e) = self.graphql_error("OwnerKind", &errors, |_| None) {
            return Err(e);
        }
        use owner_kind::OwnerKindRepositoryOwnerOn as On;
        Ok(data.and_then(|d| d.repository_owner).map(|o| {
            let kind = match o.on {
                On::Organization => AccountKind::Organization,
                _ => AccountKind::User,
            };
            (kind, o.id)
        }))
    }

    /// The open boards of `owner` (its first 20): number and title.
    pub async fn boards_of(&self, owner: &str) -> Result<Vec<(u64, String)>, GitHubError> {
        let (data, errors) = self
            .graphql::<OwnerBoards>(
                owner_boards::Variables {
                    login: owner.to_string(),
                },
                "OwnerBoards",
                false,
            )
            .await?;
        if let Some(e) = self.graphql_error("OwnerBoards", &errors, |_| None) {
            return Err(e);
        }
        use owner_boards::OwnerBoardsRepositoryOwner as Owner;
        let open = |closed: bool, number: i64, title: String| {
            (!closed).then(|| (number.max(0) as u64, title))
        };
        Ok(match data.and_then(|d| d.repository_owner) {
            Some(Owner::Organization(o)) => (o.projects_v2.nodes.into_iter().flatten().flatten())
                .filter_map(|b| open(b.closed, b.number, b.title))
                .collect(),
            Some(Owner::User(u)) => (u.projects_v2.nodes.into_iter().flatten().flatten())
                .filter_map(|b| open(b.closed, b.number, b.title))
                .collect(),
            _ => Vec::new(),
        })
    }

    /// Whether `login` is a GitHub user.
    pub async fn user_exists(&self, login: &str) -> Result<bool, GitHubError> {
        let (data, errors) = self
            .graphql::<UserExists>(
                user_exists::Variables {
                    login: login.to_string(),
                },
                "UserExists",
                false,
            )
            .await?;
        // GitHub answers an unknown login with NOT_FOUND on `user`.
        if let Some(e) = self.graphql_error("UserExists", &errors, |_| None) {
            if errors
                .iter()
                .all(|e| e.kind.as_deref() == Some("NOT_FOUND"))
            {
                return Ok(false);
            }
            return Err(e);
        }
        Ok(data.and_then(|d| d.user).is_some())
    }

    /// The repository's node id, the caller's permission on it and who the caller is. The login
    /// is remembered as the one this client posts as ([`GitHub::viewer_login`] asks no more).
    pub async fn repository_info(&self) -> Result<RepositoryInfo, GitHubError> {
        let repo = self.t.repo.clone();
        let (data, errors, scopes) = self
            .graphql_with_scopes::<RepositorySetup>(
                repository_setup::Variables {
                    owner: repo.owner.clone(),
                    name: repo.name.clone(),
                },
                "RepositorySetup",
                false,
            )
            .await?;
        if let Some(e) = self.graphql_error("RepositorySetup", &errors, |_| {
            Some(GitHubError::RepoNotFound { repo: repo.clone() })
        }) {
            return Err(e);
        }
        let data = data.ok_or(GitHubError::RepoNotFound { repo: repo.clone() })?;
        let login = data.viewer.login;
        let r = data.repository.ok_or(GitHubError::RepoNotFound { repo })?;
        self.remember_viewer(&login);
        Ok(RepositoryInfo {
            viewer: Viewer { login, scopes },
            node_id: r.id,
            permission: r.viewer_permission.as_ref().map(permission_name),
        })
    }

    /// Create a board titled `title` under the account `owner_id`, linked to the repository.
    pub async fn create_board(
        &self,
        owner_id: &str,
        repository_id: &str,
        title: &str,
    ) -> Result<NewBoard, GitHubError> {
        let (data, errors) = self
            .graphql::<CreateBoard>(
                create_board::Variables {
                    owner_id: owner_id.to_string(),
                    repository_id: repository_id.to_string(),
                    title: title.to_string(),
                },
                "CreateBoard",
                true,
            )
            .await?;
        if let Some(e) = self.graphql_error("CreateBoard", &errors, |_| None) {
            return Err(e);
        }
        let p = data
            .and_then(|d| d.create_project_v2)
            .and_then(|p| p.project_v2)
            .ok_or_else(|| invalid("CreateBoard", "no project in the answer"))?;
        Ok(NewBoard {
            id: p.id,
            number: p.number.max(0) as u64,
            url: p.url,
        })
    }

    /// Link the board `project_id` to the repository.
    pub async fn link_board(
        &self,
        project_id: &str,
        repository_id: &str,
    ) -> Result<(), GitHubError> {
        let (_, errors) = self
            .graphql::<LinkBoard>(
                link_board::Variables {
                    project_id: project_id.to_string(),
                    repository_id: repository_id.to_string(),
                },
                "LinkBoard",
                true,
            )
            .await?;
        match self.graphql_error("LinkBoard", &errors, |_| None) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Replace the options of the status field `field_id` with `names`, in order. GitHub replaces
    /// the whole list: cards in an option that is not in `names` lose their column.
    pub async fn set_status_options(
        &self,
        field_id: &str,
        names: &[String],
    ) -> Result<Vec<ColumnOption>, GitHubError> {
        use set_status_options::{
            ProjectV2SingleSelectFieldOptionColor as Color,
            ProjectV2SingleSelectFieldOptionInput as OptionInput,
            SetStatusOptionsUpdateProjectV2FieldProjectV2Field as FieldOut,
        };
        let options = names
            .iter()
            .map(|n| OptionInput {
                name: n.clone(),
                color: Color::GRAY,
                description: String::new(),
            })
            .collect();
        let (data, errors) = self
            .graphql::<SetStatusOptions>(
                set_status_options::Variables {
                    field_id: field_id.to_string(),
                    options,
                },
                "SetStatusOptions",
                true,
            )
            .await?;
        if let Some(e) = self.graphql_error("SetStatusOptions", &errors, |_| None) {
            return Err(e);
        }
        match data
            .and_then(|d| d.update_project_v2_field)
            .and_then(|p| p.project_v2_field)
        {
            Some(FieldOut::ProjectV2SingleSelectField(f)) => Ok(f
                .options
                .into_iter()
                .map(|o| ColumnOption {
                    id: o.id,
                    name: o.name,
                })
                .collect()),
            _ => Err(invalid(
                "SetStatusOptions",
                "the field in the answer is not single-select",
            )),
        }
    }
}

fn invalid(operation: &str, detail: &str) -> GitHubError {
    GitHubError::InvalidResponse {
        route: format!("POST /graphql {operation}"),
        detail: detail.into(),
    }
}
