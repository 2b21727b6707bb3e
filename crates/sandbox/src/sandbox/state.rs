//! The sandbox's world: what it is seeded with, what it changes, what it dumps. JSON or YAML.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::SandboxError;

/// The first comment id the sandbox assigns.
pub const FIRST_COMMENT_ID: u64 = 2_250_077_004;

/// Whether a login is a person or an organization.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum OwnerType {
    #[default]
    Organization,
    User,
}

/// The one repository the sandbox serves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RepoSeed {
    pub owner: String,
    pub name: String,
    #[serde(default = "default_branch")]
    pub(crate) default_branch: String,
    /// Bare git repository standing for GitHub's copy: branches for pull requests and
    /// `mergeable`, commits for check runs. Relative paths are relative to the state file. When
    /// absent, a temporary bare repository with one commit on `default_branch` is made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_dir: Option<PathBuf>,
    #[serde(default)]
    pub owner_type: OwnerType,
    #[serde(default)]
    pub private: bool,
}

fn default_branch() -> String {
    "main".into()
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserSeed {
    pub login: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// How GitHub relates the user to the repository in `author_association` (`MEMBER`,
    /// `COLLABORATOR`, `CONTRIBUTOR`, …). Absent: `OWNER` for the owner of a user-owned repository,
    /// `NONE` for anyone else.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub association: Option<String>,
    /// The user's role on the repository: `read`, `triage`, `write`, `maintain` or `admin`.
    /// Absent: `admin` for an `OWNER`, `write` for a `MEMBER` or `COLLABORATOR`, `read` for
    /// anyone else.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission: Option<String>,
}

/// A token the sandbox accepts, the user it stands for and what it may do.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenSeed {
    pub token: String,
    pub login: String,
    /// OAuth scopes of a classic token (`repo`, `project`, …), reported in `X-OAuth-Scopes`.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// Repository permissions of a fine-grained token or an App installation (`issues: write`,
    /// `checks: read`, …). When present, every REST endpoint needs its permission as on GitHub
    /// (reads of a public repository excepted) and answers 403 naming it otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permissions: Option<BTreeMap<String, String>>,
    /// When the token stops working (App installation tokens live an hour).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
}

impl TokenSeed {
    /// A classic token of `login` with `scopes`.
    pub fn classic(token: &str, login: &str, scopes: &[&str]) -> TokenSeed {
        TokenSeed {
            token: token.into(),
            login: login.into(),
            scopes: scopes.iter().map(|s| s.to_string()).collect(),
            ..TokenSeed::default()
        }
    }
}

/// A GitHub App installed on the repository.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppSeed {
    pub app_id: u64,
    pub installation_id: u64,
    /// The bot's login is `<slug>[bot]`.
    pub slug: String,
    /// RSA public key (PEM) that the App's JWTs are checked with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_key_pem: Option<String>,
    /// File holding it, relative to the state file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_key_path: Option<PathBuf>,
    /// What installation tokens may do on GraphQL, as OAuth scopes (`repo`, `project`).
    #[serde(default)]
    pub scopes: Vec<String>,
    /// Repository permissions of its installation tokens; absent: issues, pull requests and
    /// contents write, checks and metadata read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permissions: Option<BTreeMap<String, String>>,
    /// Seconds an installation token lives (GitHub: 3600).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_lifetime_secs: Option<u64>,
}

impl AppSeed {
    /// The permissions its installation tokens carry.
    pub(crate) fn token_permissions(&self) -> BTreeMap<String, String> {
        self.permissions.clone().unwrap_or_else(|| {
            [
                ("issues", "write"),
                ("pull_requests", "write"),
                ("contents", "write"),
                ("checks", "read"),
                ("metadata", "read"),
                ("organization_projects", "write"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
        })
    }

    /// `<slug>[bot]`, the login its installation tokens act as.
    pub(crate) fn bot_login(&self) -> String {
        format!("{}[bot]", self.slug)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SeedState {
    #[default]
    Open,
    Closed,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommentSeed {
    /// Assigned when absent (0), above 2^31 as on github.com.
    #[serde(default)]
    pub id: u64,
    pub author: String,
    pub body: String,
    /// Who last edited the body, when someone did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub editor: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<DateTime<Utc>>,
    /// Last change; the creation time until an edit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<DateTime<Utc>>,
}

impl CommentSeed {
    pub fn new(author: &str, body: &str) -> CommentSeed {
        CommentSeed {
            author: author.into(),
            body: body.into(),
            ..CommentSeed::default()
        }
    }
}

/// A change of an issue's title (GitHub's `renamed` event, GraphQL `RenamedTitleEvent`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RenameSeed {
    pub actor: String,
    pub from: String,
    pub to: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IssueSeed {
    pub number: u64,
    pub title: String,
    #[serde(default)]
    pub body: String,
    pub author: String,
    #[serde(default)]
    pub labels: Vec<String>,
    #[serde(default)]
    pub state: SeedState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_reason: Option<String>,
    /// Issues this one is blocked by (GitHub's issue dependencies).
    #[serde(default)]
    pub blocked_by: Vec<u64>,
    /// Its sub-issues, in order (GitHub's sub-issues; an issue has at most one parent).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sub_issues: Vec<u64>,
    #[serde(default)]
    pub comments: Vec<CommentSeed>,
    /// Who last edited the body, when someone did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub editor: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<DateTime<Utc>>,
    /// Last change; the creation time until one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<DateTime<Utc>>,
    /// Title changes, oldest first, with who made them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub renames: Vec<RenameSeed>,
}

impl IssueSeed {
    /// An open issue with no labels, comments or blockers.
    pub fn new(number: u64, title: &str, body: &str, author: &str) -> IssueSeed {
        IssueSeed {
            number,
            title: title.into(),
            body: body.into(),
            author: author.into(),
            ..IssueSeed::default()
        }
    }
}

/// The Projects (v2) board: its single-select status field and where each card is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BoardSeed {
    pub owner: String,
    #[serde(default)]
    pub owner_type: OwnerType,
    pub number: u64,
    #[serde(default = "default_board_title")]
    pub title: String,
    #[serde(default = "default_status_field")]
    pub status_field: String,
    /// The columns, in order.
    pub options: Vec<String>,
    /// Issue or pull request number → column (`null`: on the board with no status).
    #[serde(default, deserialize_with = "numbered_map")]
    pub items: BTreeMap<u64, Option<String>>,
}

/// A map keyed by issue numbers, written as numbers (YAML) or numeric strings (JSON, quoted YAML).
fn numbered_map<'de, D, V>(d: D) -> Result<BTreeMap<u64, V>, D::Error>
where
    D: serde::Deserializer<'de>,
    V: Deserialize<'de>,
{
    #[derive(Deserialize, PartialEq, Eq, PartialOrd, Ord)]
    #[serde(untagged)]
    enum Key {
        Number(u64),
        Text(String),
    }
    let raw = BTreeMap::<Key, V>::deserialize(d)?;
    raw.into_iter()
        .map(|(k, v)| match k {
            Key::Number(n) => Ok((n, v)),
            Key::Text(t) => t
                .trim()
                .parse()
                .map(|n| (n, v))
                .map_err(|_| serde::de::Error::custom(format!("`{t}` is not an issue number"))),
        })
        .collect()
}

fn default_board_title() -> String {
    "Board".into()
}

fn default_status_field() -> String {
    "Status".into()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckRunSeed {
    pub name: String,
    #[serde(default = "default_check_status")]
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conclusion: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub html_url: Option<String>,
}

fn default_check_status() -> String {
    "completed".into()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PullSeed {
    pub number: u64,
    pub head: String,
    pub base: String,
    pub title: String,
    #[serde(default)]
    pub body: String,
    #[serde(default)]
    pub state: SeedState,
    #[serde(default)]
    pub draft: bool,
    #[serde(default)]
    pub merged: bool,
    pub author: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<DateTime<Utc>>,
    /// Who last edited the body, when someone did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub editor: Option<String>,
    /// The conversation (issue comments on the pull request).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub comments: Vec<CommentSeed>,
    /// Submitted reviews.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reviews: Vec<ReviewSeed>,
    /// Line comments: a comment without `in_reply_to` starts a review thread, replies join it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub review_comments: Vec<ReviewCommentSeed>,
    /// Reads left that answer `mergeable: null`, as GitHub does while it computes mergeability in
    /// the background; a new pull request starts with the state's `mergeable_unknown_reads`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub mergeable_pending: u32,
    /// How it was merged, once it was through the API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) merge: Option<MergeSeed>,
}

/// A pull request's merge: the commit its base moved to, who merged it, when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergeSeed {
    pub(crate) sha: String,
    pub(crate) by: String,
    pub(crate) at: DateTime<Utc>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Reads of a new pull request answering `mergeable: null` unless the state says otherwise.
pub(crate) const DEFAULT_MERGEABLE_UNKNOWN_READS: u32 = 1;

fn default_mergeable_unknown_reads() -> u32 {
    DEFAULT_MERGEABLE_UNKNOWN_READS
}

fn is_default_mergeable_reads(n: &u32) -> bool {
    *n == DEFAULT_MERGEABLE_UNKNOWN_READS
}

impl PullSeed {
    /// A new open pull request with no conversation yet.
    pub fn new(number: u64, head: &str, base: &str, title: &str, body: &str, author: &str) -> Self {
        PullSeed {
            number,
            head: head.into(),
            base: base.into(),
            title: title.into(),
            body: body.into(),
            state: SeedState::Open,
            draft: false,
            merged: false,
            author: author.into(),
            created_at: Some(Utc::now()),
            editor: None,
            comments: Vec::new(),
            reviews: Vec::new(),
            review_comments: Vec::new(),
            mergeable_pending: 0,
            merge: None,
        }
    }

    /// The first comment of the thread `id` belongs to.
    pub fn thread_root(&self, id: u64) -> Option<&ReviewCommentSeed> {
        let mut c = self.review_comments.iter().find(|c| c.id == id)?;
        while let Some(parent) = c.in_reply_to {
            c = self.review_comments.iter().find(|p| p.id == parent)?;
        }
        Some(c)
    }

    /// The comments of the thread started by `root`, oldest first.
    pub fn thread(&self, root: u64) -> Vec<&ReviewCommentSeed> {
        self.review_comments
            .iter()
            .filter(|c| self.thread_root(c.id).is_some_and(|r| r.id == root))
            .collect()
    }
}

/// A submitted pull request review.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReviewSeed {
    /// Assigned when absent (0).
    #[serde(default)]
    pub id: u64,
    pub author: String,
    /// `APPROVED`, `CHANGES_REQUESTED`, `COMMENTED`, `DISMISSED` or `PENDING`.
    pub state: String,
    #[serde(default)]
    pub body: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub editor: Option<String>,
    /// The head commit the review was made on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submitted_at: Option<DateTime<Utc>>,
}

/// A line comment of a pull request review.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReviewCommentSeed {
    /// Assigned when absent (0).
    #[serde(default)]
    pub id: u64,
    /// The review it belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review_id: Option<u64>,
    pub author: String,
    pub body: String,
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    #[serde(default)]
    pub diff_hunk: String,
    /// The comment this one answers (same thread).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_reply_to: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub editor: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<DateTime<Utc>>,
    /// Who resolved the thread this comment starts (thread roots only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_by: Option<String>,
}

/// Everything the sandbox knows. The seed format and the dump format are the same.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxState {
    pub repo: RepoSeed,
    #[serde(default)]
    pub users: Vec<UserSeed>,
    /// Accepted tokens. When empty, any token (and none) is accepted as `repo.owner` with every scope.
    #[serde(default)]
    pub tokens: Vec<TokenSeed>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub apps: Vec<AppSeed>,
    #[serde(default)]
    pub issues: Vec<IssueSeed>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub board: Option<BoardSeed>,
    /// Commit sha (or branch name) → its check runs.
    #[serde(default)]
    pub check_runs: BTreeMap<String, Vec<CheckRunSeed>>,
    /// Check runs reported for every commit that has none of its own: a CI that checks each push.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub auto_check_runs: Vec<CheckRunSeed>,
    #[serde(default)]
    pub pulls: Vec<PullSeed>,
    /// Workflow runs asked for through `POST …/actions/workflows/{id}/dispatches`, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dispatches: Vec<DispatchSeed>,
    /// The URL clients reach the sandbox at when it is not the listening address (behind a proxy):
    /// `Link` headers and `url` fields use it. Absent: the request's `Host`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_url: Option<String>,
    /// Reads of a newly opened pull request that answer `mergeable: null` (GitHub computes it in the
    /// background after `POST /pulls`).
    #[serde(
        default = "default_mergeable_unknown_reads",
        skip_serializing_if = "is_default_mergeable_reads"
    )]
    pub mergeable_unknown_reads: u32,
}

/// A `workflow_dispatch` the sandbox received.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DispatchSeed {
    /// The workflow's file name or id, as the path named it.
    pub workflow: String,
    #[serde(rename = "ref")]
    pub git_ref: String,
    #[serde(default)]
    pub inputs: BTreeMap<String, String>,
    /// Who asked for it.
    pub(crate) actor: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) created_at: Option<DateTime<Utc>>,
}

impl SandboxState {
    /// A state with just a repository; build the rest in code.
    pub fn new(owner: &str, name: &str) -> SandboxState {
        SandboxState {
            repo: RepoSeed {
                owner: owner.into(),
                name: name.into(),
                default_branch: default_branch(),
                git_dir: None,
                owner_type: OwnerType::Organization,
                private: false,
            },
            users: Vec::new(),
            tokens: Vec::new(),
            apps: Vec::new(),
            issues: Vec::new(),
            board: None,
            check_runs: BTreeMap::new(),
            auto_check_runs: Vec::new(),
            pulls: Vec::new(),
            dispatches: Vec::new(),
            public_url: None,
            mergeable_unknown_reads: DEFAULT_MERGEABLE_UNKNOWN_READS,
        }
    }

    /// Read a state file (`.yaml`/`.yml` as YAML, anything else as JSON). Relative paths in it are
    /// made relative to the file's directory.
    pub fn load(path: &Path) -> Result<SandboxState, SandboxError> {
        let text = std::fs::read_to_string(path).map_err(|e| SandboxError::State {
            path: path.to_path_buf(),
            problem: format!("cannot read it ({})", e.kind()),
        })?;
        let yaml = matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("yaml" | "yml")
        );
        let parsed = if yaml {
            serde_norway::from_str(&text).map_err(|e| e.to_string())
        } else {
            serde_json::from_str(&text).map_err(|e| e.to_string())
        };
        let mut state: SandboxState = parsed.map_err(|problem| SandboxError::State {
            path: path.to_path_buf(),
            problem,
        })?;
        let dir = path.parent().unwrap_or(Path::new("."));
        let anchor = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = dir.join(&*p);
            }
        };
        if let Some(git) = state.repo.git_dir.as_mut() {
            anchor(git);
        }
        for app in &mut state.apps {
            if let Some(p) = app.public_key_path.as_mut() {
                anchor(p);
            }
        }
        Ok(state)
    }

    /// Write the state as JSON, or YAML for `.yaml`/`.yml` paths.
    pub fn save(&self, path: &Path) -> Result<(), SandboxError> {
        let yaml = matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("yaml" | "yml")
        );
        let text = if yaml {
            self.to_yaml()?
        } else {
            self.to_json()
        };
        std::fs::write(path, text).map_err(|e| SandboxError::State {
            path: path.to_path_buf(),
            problem: format!("cannot write it: {e}"),
        })
    }

    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).unwrap_or_else(|_| "{}".into());
        s.push('\n');
        s
    }

    pub fn to_yaml(&self) -> Result<String, SandboxError> {
        serde_norway::to_string(self).map_err(|e| SandboxError::State {
            path: PathBuf::from("<dump>"),
            problem: e.to_string(),
        })
    }

    /// Check the seed and fill in what it may leave out (comment ids and times).
    pub fn normalize(&mut self) -> Result<(), String> {
        const ROLES: [&str; 5] = ["read", "triage", "write", "maintain", "admin"];
        for u in &self.users {
            if let Some(p) = u
                .permission
                .as_deref()
                .filter(|p| !ROLES.contains(&p.to_ascii_lowercase().as_str()))
            {
                return Err(format!(
                    "user {} has permission `{p}`; it is one of {}",
                    u.login,
                    ROLES.join(", ")
                ));
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        for n in self
            .issues
            .iter()
            .map(|i| i.number)
            .chain(self.pulls.iter().map(|p| p.number))
        {
            if n == 0 {
                return Err("issue and pull request numbers start at 1".into());
            }
            if !seen.insert(n) {
                return Err(format!(
                    "number {n} is used twice: issues and pull requests share one sequence"
                ));
            }
        }
        if let Some(board) = &self.board {
            if board.options.is_empty() {
                return Err("board.options is empty: list the columns".into());
            }
            for (n, col) in &board.items {
                if !seen.contains(n) {
                    return Err(format!(
                        "board.items has #{n}, which is no issue or pull request"
                    ));
                }
                if let Some(c) = col {
                    if !board.options.contains(c) {
                        return Err(format!(
                            "board.items puts #{n} in `{c}`, which is not one of board.options"
                        ));
                    }
                }
            }
        }
        for issue in &self.issues {
            for b in &issue.blocked_by {
                if !self.issues.iter().any(|i| i.number == *b) {
                    return Err(format!(
                        "issue #{} is blocked_by #{b}, which is not an issue",
                        issue.number
                    ));
                }
            }
            for s in &issue.sub_issues {
                if !self.issues.iter().any(|i| i.number == *s) || *s == issue.number {
                    return Err(format!(
                        "issue #{} has sub-issue #{s}, which is not another issue",
                        issue.number
                    ));
                }
                if let Some(other) = self
                    .issues
                    .iter()
                    .find(|i| i.number != issue.number && i.sub_issues.contains(s))
                {
                    return Err(format!(
                        "issue #{s} is a sub-issue of both #{} and #{}: an issue has one parent",
                        issue.number, other.number
                    ));
                }
            }
        }
        for app in &self.apps {
            if app.public_key_pem.is_none() && app.public_key_path.is_none() {
                return Err(format!(
                    "app {} needs public_key_pem or public_key_path to check its JWTs",
                    app.app_id
                ));
            }
        }
        let mut next = self.next_comment_id();
        let now = Utc::now();
        // An id for what has none, and a time (which it returns).
        let mut fill = |id: &mut u64, at: &mut Option<DateTime<Utc>>| {
            if *id == 0 {
                *id = next;
                next += 1;
            }
            *at.get_or_insert(now)
        };
        for issue in &mut self.issues {
            let created = *issue.created_at.get_or_insert(now);
            issue.updated_at.get_or_insert(created);
            for c in &mut issue.comments {
                let created = fill(&mut c.id, &mut c.created_at);
                c.updated_at.get_or_insert(created);
            }
        }
        for p in &mut self.pulls {
            p.created_at.get_or_insert(now);
            for c in &mut p.comments {
                let created = fill(&mut c.id, &mut c.created_at);
                c.updated_at.get_or_insert(created);
            }
            for r in &mut p.reviews {
                fill(&mut r.id, &mut r.submitted_at);
            }
            for c in &mut p.review_comments {
                fill(&mut c.id, &mut c.created_at);
            }
            let ids: Vec<u64> = p.review_comments.iter().map(|c| c.id).collect();
            if let Some(c) = p
                .review_comments
                .iter()
                .find(|c| c.in_reply_to.is_some_and(|r| !ids.contains(&r)))
            {
                return Err(format!(
                    "pull request #{}: review comment {} is in_reply_to {}, which is no review comment of it",
                    p.number,
                    c.id,
                    c.in_reply_to.unwrap_or_default()
                ));
            }
        }
        Ok(())
    }

    /// The id the next comment (or review, or review comment: one sequence here) gets: above
    /// 2^31 like github.com's (whose comment ids passed it in 2024), so that a client reading them
    /// as 32-bit integers fails here as it would there.
    pub(crate) fn next_comment_id(&self) -> u64 {
        let issues = self
            .issues
            .iter()
            .flat_map(|i| i.comments.iter().map(|c| c.id));
        let pulls = self.pulls.iter().flat_map(|p| {
            p.comments
                .iter()
                .map(|c| c.id)
                .chain(p.reviews.iter().map(|r| r.id))
                .chain(p.review_comments.iter().map(|c| c.id))
        });
        issues
            .chain(pulls)
            .max()
            .unwrap_or(0)
            .max(FIRST_COMMENT_ID - 1)
            + 1
    }

    /// The number a new issue or pull request gets.
    pub(crate) fn next_number(&self) -> u64 {
        self.issues
            .iter()
            .map(|i| i.number)
            .chain(self.pulls.iter().map(|p| p.number))
            .max()
            .unwrap_or(0)
            + 1
    }

    pub fn issue(&self, number: u64) -> Option<&IssueSeed> {
        self.issues.iter().find(|i| i.number == number)
    }

    /// The issue whose database id is `id`.
    pub(crate) fn issue_by_id(&self, id: u64) -> Option<&IssueSeed> {
        self.issues
            .iter()
            .find(|i| super::ids::issue_id(i.number) == id)
    }

    /// The issue `number` is a sub-issue of.
    pub fn parent_of(&self, number: u64) -> Option<u64> {
        self.issues
            .iter()
            .find(|i| i.sub_issues.contains(&number))
            .map(|i| i.number)
    }

    pub fn issue_mut(&mut self, number: u64) -> Option<&mut IssueSeed> {
        self.issues.iter_mut().find(|i| i.number == number)
    }

    /// Make issue `child` a sub-issue of `parent` (both existing issues), as GitHub does for the
    /// REST route and the `addSubIssue` mutation alike: an issue has one parent (`replace` moves
    /// it from the one it has), is not its own sub-issue and does not go below one of its own
    /// sub-issues. `Err` says why not.
    pub(crate) fn add_sub_issue(
        &mut self,
        parent: u64,
        child: u64,
        replace: bool,
    ) -> Result<(), String> {
        if child == parent {
            return Err("an issue cannot be its own sub-issue".into());
        }
        // The parent may not sit below its new child.
        let mut up = Some(parent);
        while let Some(n) = up {
            if n == child {
                return Err(format!("#{child} is above #{parent}"));
            }
            up = self.parent_of(n);
        }
        match self.parent_of(child) {
            Some(p) if p == parent => {
                return Err(format!("#{child} is already a sub-issue of #{parent}"));
            }
            Some(p) if !replace => {
                return Err(format!(
                    "Sub issue may only have one parent: #{child} has #{p} (replacing the parent moves it)"
                ));
            }
            Some(p) => {
                if let Some(old) = self.issue_mut(p) {
                    old.sub_issues.retain(|s| *s != child);
                }
            }
            None => {}
        }
        let issue = self
            .issue_mut(parent)
            .ok_or_else(|| format!("#{parent} is not an issue"))?;
        issue.sub_issues.push(child);
        issue.updated_at = Some(Utc::now());
        Ok(())
    }

    /// Take issue `child` from under `parent`; `Err` when it is not one of its sub-issues.
    pub(crate) fn remove_sub_issue(&mut self, parent: u64, child: u64) -> Result<(), String> {
        let issue = self
            .issue_mut(parent)
            .filter(|i| i.sub_issues.contains(&child))
            .ok_or_else(|| format!("#{child} is not a sub-issue of #{parent}"))?;
        issue.sub_issues.retain(|s| *s != child);
        issue.updated_at = Some(Utc::now());
        Ok(())
    }

    pub fn pull(&self, number: u64) -> Option<&PullSeed> {
        self.pulls.iter().find(|p| p.number == number)
    }

    pub fn pull_mut(&mut self, number: u64) -> Option<&mut PullSeed> {
        self.pulls.iter_mut().find(|p| p.number == number)
    }

    /// Comments of an issue or a pull request's conversation, oldest first (none for an unknown
    /// number).
    pub fn comments_of(&self, number: u64) -> &[CommentSeed] {
        match (self.issue(number), self.pull(number)) {
            (Some(i), _) => i.comments.as_slice(),
            (None, Some(p)) => p.comments.as_slice(),
            (None, None) => &[],
        }
    }

    /// The conversation comments of an issue or pull request, to change.
    pub fn comments_mut(&mut self, number: u64) -> Option<&mut Vec<CommentSeed>> {
        if self.issue(number).is_some() {
            return self.issue_mut(number).map(|i| &mut i.comments);
        }
        self.pull_mut(number).map(|p| &mut p.comments)
    }

    /// The issue or pull request holding conversation comment `id`, and its position there.
    pub(crate) fn find_comment(&self, id: u64) -> Option<(u64, usize)> {
        let numbers = self
            .issues
            .iter()
            .map(|i| i.number)
            .chain(self.pulls.iter().map(|p| p.number));
        numbers
            .into_iter()
            .find_map(|n| Some((n, self.comments_of(n).iter().position(|c| c.id == id)?)))
    }

    /// The pull request holding review comment `id`.
    pub(crate) fn pull_of_review_comment(&self, id: u64) -> Option<&PullSeed> {
        self.pulls
            .iter()
            .find(|p| p.review_comments.iter().any(|c| c.id == id))
    }

    /// The card's column; `None` when not on the board or with no status.
    pub fn column_of(&self, number: u64) -> Option<&str> {
        self.board.as_ref()?.items.get(&number)?.as_deref()
    }

    pub fn on_board(&self, number: u64) -> bool {
        self.board
            .as_ref()
            .is_some_and(|b| b.items.contains_key(&number))
    }

    pub fn pulls(&self) -> &[PullSeed] {
        &self.pulls
    }

    /// Logins that are organizations.
    /// GitHub's `author_association` of `login` on the repository.
    pub(crate) fn association(&self, login: &str) -> &str {
        if let Some(a) = self
            .users
            .iter()
            .find(|u| u.login.eq_ignore_ascii_case(login))
            .and_then(|u| u.association.as_deref())
        {
            return a;
        }
        if self.repo.owner_type == OwnerType::User && self.repo.owner.eq_ignore_ascii_case(login) {
            "OWNER"
        } else {
            "NONE"
        }
    }

    /// `login`'s role on the repository (`read`, `triage`, `write`, `maintain`, `admin`).
    pub(crate) fn permission(&self, login: &str) -> String {
        let set = self
            .users
            .iter()
            .find(|u| u.login.eq_ignore_ascii_case(login))
            .and_then(|u| u.permission.as_deref());
        match (set, self.association(login)) {
            (Some(p), _) => p.to_ascii_lowercase(),
            (None, "OWNER") => "admin".into(),
            (None, "MEMBER" | "COLLABORATOR") => "write".into(),
            _ => "read".into(),
        }
    }

    pub(crate) fn is_org(&self, login: &str) -> bool {
        (self.repo.owner.eq_ignore_ascii_case(login)
            && self.repo.owner_type == OwnerType::Organization)
            || self.board.as_ref().is_some_and(|b| {
                b.owner.eq_ignore_ascii_case(login) && b.owner_type == OwnerType::Organization
            })
    }

    /// Logins that are people (or bots): users, token holders, authors, and user-type owners.
    pub(crate) fn is_user(&self, login: &str) -> bool {
        if self.is_org(login) {
            return false;
        }
        let eq = |l: &str| l.eq_ignore_ascii_case(login);
        self.users.iter().any(|u| eq(&u.login))
            || self.tokens.iter().any(|t| eq(&t.login))
            || self
                .issues
                .iter()
                .any(|i| eq(&i.author) || i.comments.iter().any(|c| eq(&c.author)))
            || self.pulls.iter().any(|p| {
                eq(&p.author)
                    || p.comments.iter().any(|c| eq(&c.author))
                    || p.reviews.iter().any(|r| eq(&r.author))
                    || p.review_comments.iter().any(|c| eq(&c.author))
            })
            || eq(&self.repo.owner)
            || self.board.as_ref().is_some_and(|b| eq(&b.owner))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> SandboxState {
        let mut s = SandboxState::new("acme", "widgets");
        let mut issue = IssueSeed::new(1, "t", "", "alice");
        issue.comments = vec![CommentSeed::new("bob", "hi")];
        s.issues.push(issue);
        s.board = Some(BoardSeed {
            owner: "acme".into(),
            owner_type: OwnerType::Organization,
            number: 1,
            title: "B".into(),
            status_field: "Status".into(),
            options: vec!["Todo".into(), "Done".into()],
            items: BTreeMap::from([(1, Some("Todo".into()))]),
        });
        s
    }

    #[test]
    fn normalize_assigns_ids_and_checks_references() {
        let mut s = sample();
        s.normalize().unwrap();
        assert_eq!(s.comments_of(1)[0].id, FIRST_COMMENT_ID);
        assert!(FIRST_COMMENT_ID > i32::MAX as u64);
        assert_eq!(s.column_of(1), Some("Todo"));
        assert_eq!(s.next_number(), 2);
        let mut bad = sample();
        bad.board
            .as_mut()
            .unwrap()
            .items
            .insert(1, Some("Nope".into()));
        assert!(bad.normalize().unwrap_err().contains("Nope"));
        let mut bad = sample();
        bad.board.as_mut().unwrap().items.insert(9, None);
        assert!(bad.normalize().is_err());
        let mut bad = sample();
        bad.issues[0].blocked_by.push(5);
        assert!(bad.normalize().is_err());
    }

    #[test]
    fn json_and_yaml_round_trip() {
        let mut s = sample();
        s.normalize().unwrap();
        let back: SandboxState = serde_json::from_str(&s.to_json()).unwrap();
        assert_eq!(back, s);
        let back: SandboxState = serde_norway::from_str(&s.to_yaml().unwrap()).unwrap();
        assert_eq!(back, s);
    }

    #[test]
    fn board_items_take_numbers_or_numeric_strings() {
        let yaml = "repo: {owner: a, name: b}\nboard: {owner: a, number: 1, options: [X], items: {1: X, '2': null}}\n";
        let s: SandboxState = serde_norway::from_str(yaml).unwrap();
        assert_eq!(s.board.unwrap().items.len(), 2);
        let json = r#"{"repo": {"owner": "a", "name": "b"}, "board": {"owner": "a", "number": 1, "options": ["X"], "items": {"x": "X"}}}"#;
        let e = serde_json::from_str::<SandboxState>(json)
            .unwrap_err()
            .to_string();
        assert!(e.contains("not an issue number"), "{e}");
    }

    #[test]
    fn load_anchors_relative_paths() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = sample();
        s.repo.git_dir = Some("remote.git".into());
        let path = dir.path().join("state.yaml");
        std::fs::write(&path, s.to_yaml().unwrap()).unwrap();
        let loaded = SandboxState::load(&path).unwrap();
        assert_eq!(loaded.repo.git_dir, Some(dir.path().join("remote.git")));
        std::fs::write(&path, "repo: {owner: a}").unwrap();
        let e = SandboxState::load(&path).unwrap_err().to_string();
        assert!(e.contains("state.yaml"), "{e}");
    }

    #[test]
    fn logins() {
        let s = sample();
        assert!(s.is_org("ACME"));
        assert!(!s.is_user("acme"));
        assert!(s.is_user("bob"));
        assert!(!s.is_user("nobody"));
    }
}
