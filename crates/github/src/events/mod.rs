//! Every way work arrives, as one [`Event`]: verified webhook deliveries, board polls and commands
//! typed on the command line. Pure: signatures are checked and payloads parsed here; receiving,
//! queueing and acting on events belong to the rooms above.
//!
//! Events say where they came from and who caused them, with GitHub's own word on how that person
//! relates to the repository. They decide nothing about trust: whoever acts on an event checks its
//! people against the codeowners first, and text from anyone else never reaches an agent.

mod command;
mod signature;
mod webhook;

use std::fmt;

use serde::Serialize;

use crate::config::RepoSlug;

pub use command::{
    Command, CommandError, CommandSyntax, CommandSyntaxError, MAX_COMMANDS_PER_COMMENT,
    MAX_COMMENT_BYTES,
};
pub use signature::{
    LEGACY_SIGNATURE_HEADER, MIN_SECRET_BYTES, SIGNATURE_HEADER, SecretError, Signature,
    SignatureError, Verifier, WebhookSecret, verify_signature,
};
pub use webhook::{Parsed, PayloadError, WebhookOptions, parse_webhook};

/// Something that may start, stop or steer work.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Event {
    /// A card's column (the board's status field) changed.
    CardMoved(CardMoved),
    /// A command line in an issue or pull-request comment.
    Command(CommentCommand),
    /// A label was added to an issue.
    IssueLabeled(IssueLabeled),
    /// A review, review comment or conversation comment on a pull request.
    Review(ReviewActivity),
    /// GitHub's hello when a webhook is created: asks for nothing.
    Ping(Ping),
    /// A command given on supervisor's own command line.
    Cli(CliCommand),
}

impl Event {
    /// Where the event came from.
    pub fn origin(&self) -> Origin {
        match self {
            Event::CardMoved(e) => e.origin.clone(),
            Event::Command(e) => e.origin.clone(),
            Event::IssueLabeled(e) => e.origin.clone(),
            Event::Review(e) => e.origin.clone(),
            Event::Ping(e) => e.origin.clone(),
            Event::Cli(_) => Origin::Cli,
        }
    }

    /// The event's kind, as in its JSON form: `card_moved`, `command`, ….
    pub fn kind(&self) -> &'static str {
        match self {
            Event::CardMoved(_) => "card_moved",
            Event::Command(_) => "command",
            Event::IssueLabeled(_) => "issue_labeled",
            Event::Review(_) => "review",
            Event::Ping(_) => "ping",
            Event::Cli(_) => "cli",
        }
    }
}

/// Where an event came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "via", rename_all = "snake_case")]
pub enum Origin {
    /// A webhook delivery whose signature was verified; `delivery` is its `X-GitHub-Delivery` id.
    Webhook { delivery: String },
    /// A poll of the board saw the change.
    BoardPoll,
    /// supervisor's command line, run by whoever runs supervisor.
    Cli,
}

/// A GitHub account that caused an event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Actor {
    pub login: String,
    /// GitHub's `author_association` of the account with the repository, where the payload gives
    /// one (comments, reviews, issues). It is not trust: codeowners are.
    pub association: Option<AuthorAssociation>,
    /// A GitHub App or other bot account.
    pub is_bot: bool,
}

impl Actor {
    /// GitHub says the account is an OWNER, MEMBER or COLLABORATOR of the repository.
    pub fn is_owner_member_or_collaborator(&self) -> bool {
        self.association
            .as_ref()
            .is_some_and(AuthorAssociation::is_owner_member_or_collaborator)
    }
}

impl fmt::Display for Actor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.login)?;
        if let Some(association) = &self.association {
            write!(f, " ({association})")?;
        }
        Ok(())
    }
}

/// GitHub's `author_association`: how an account relates to a repository.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum AuthorAssociation {
    Owner,
    Member,
    Collaborator,
    Contributor,
    FirstTimer,
    FirstTimeContributor,
    Mannequin,
    None,
    /// A value GitHub added after this was written.
    #[serde(other)]
    Unknown,
}

impl AuthorAssociation {
    pub(crate) fn is_owner_member_or_collaborator(&self) -> bool {
        matches!(
            self,
            AuthorAssociation::Owner | AuthorAssociation::Member | AuthorAssociation::Collaborator
        )
    }

    /// GitHub's spelling: `OWNER`, `FIRST_TIME_CONTRIBUTOR`, ….
    pub(crate) fn as_str(&self) -> &'static str {
        match self {
            AuthorAssociation::Owner => "OWNER",
            AuthorAssociation::Member => "MEMBER",
            AuthorAssociation::Collaborator => "COLLABORATOR",
            AuthorAssociation::Contributor => "CONTRIBUTOR",
            AuthorAssociation::FirstTimer => "FIRST_TIMER",
            AuthorAssociation::FirstTimeContributor => "FIRST_TIME_CONTRIBUTOR",
            AuthorAssociation::Mannequin => "MANNEQUIN",
            AuthorAssociation::None => "NONE",
            AuthorAssociation::Unknown => "UNKNOWN",
        }
    }
}

impl fmt::Display for AuthorAssociation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The issue or pull request a comment belongs to (they share one number sequence).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "type", content = "number", rename_all = "snake_case")]
pub enum Target {
    Issue(u64),
    PullRequest(u64),
}

impl Target {
    pub fn number(&self) -> u64 {
        match self {
            Target::Issue(n) | Target::PullRequest(n) => *n,
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Issue(n) => write!(f, "issue #{n}"),
            Target::PullRequest(n) => write!(f, "pull request #{n}"),
        }
    }
}

/// A card's column changed on a Projects (v2) board.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CardMoved {
    pub origin: Origin,
    /// The card (`PVTI_…`).
    pub item_node_id: String,
    pub board: BoardRef,
    /// The issue on the card.
    pub issue: IssueRef,
    /// The single-select field that changed: the status field, unless only its node says so.
    pub field: FieldRef,
    pub columns: ColumnChange,
    /// Who moved the card.
    pub moved_by: Actor,
}

/// An issue as the source names it: a webhook by its node (`I_…`), a poll also by number.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IssueRef {
    pub node_id: String,
    pub number: Option<u64>,
}

/// A board field as a payload names it (`PVTSSF_…`). Without a name, the payload did not say
/// which field changed: compare the node with the board's status field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldRef {
    pub node_id: String,
    pub name: Option<String>,
}

/// A Projects (v2) board as an event names it: by its node (`PVT_…`), and by its number and the
/// organization owning it when the payload carries them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BoardRef {
    pub node_id: String,
    pub number: Option<u64>,
    pub owner: Option<String>,
}

/// Which columns a card moved between.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "columns", rename_all = "snake_case")]
pub enum ColumnChange {
    /// The payload names them. `None` is "no column" (the status was empty, or was cleared).
    Known {
        from: Option<Column>,
        to: Option<Column>,
    },
    /// The payload does not say (older payloads carry only the field): read the card's column
    /// from the board.
    NeedsLookup,
}

/// A column: an option of the board's status field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Column {
    pub(crate) option_id: String,
    pub name: String,
}

/// A command line in a comment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CommentCommand {
    pub origin: Origin,
    pub repository: RepoSlug,
    pub target: Target,
    pub comment_id: u64,
    /// Who wrote the comment.
    pub author: Actor,
    /// Who caused this delivery: the author for a new comment, whoever edited it for an edit.
    pub sender: Actor,
    /// The command appeared by an edit of an existing comment.
    pub edited: bool,
    #[serde(serialize_with = "command_result")]
    pub command: Result<Command, CommandError>,
}

fn command_result<S: serde::Serializer>(
    command: &Result<Command, CommandError>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match command {
        Ok(command) => command.serialize(s),
        Err(error) => {
            use serde::ser::SerializeMap;
            let mut map = s.serialize_map(Some(2))?;
            map.serialize_entry("invalid", &error)?;
            map.serialize_entry("message", &error.to_string())?;
            map.end()
        }
    }
}

/// A label added to an issue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IssueLabeled {
    pub origin: Origin,
    pub repository: RepoSlug,
    pub issue: u64,
    pub issue_node_id: String,
    pub label: String,
    pub labeled_by: Actor,
    /// Who opened the issue, with their association.
    pub issue_author: Actor,
}

/// Activity on a pull request that a review loop reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReviewActivity {
    pub(crate) origin: Origin,
    pub repository: RepoSlug,
    pub pull_request: u64,
    pub author: Actor,
    pub kind: ReviewKind,
    /// The text, as written by `author`: only a codeowner's may ever reach an agent.
    pub(crate) body: Option<String>,
}

/// What kind of review activity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ReviewKind {
    /// A review was submitted.
    Review { review_id: u64, state: ReviewState },
    /// A comment on a line of the diff.
    ReviewComment {
        comment_id: u64,
        review_id: Option<u64>,
        path: String,
        line: Option<u64>,
    },
    /// A comment in the pull request's conversation.
    Conversation { comment_id: u64 },
}

pub use crate::github::ReviewState;

/// A command given on supervisor's command line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CliCommand {
    pub issue: u64,
    pub command: Command,
}

/// GitHub's hello to a new webhook.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Ping {
    pub(crate) origin: Origin,
    /// The events the webhook is subscribed to (`*`: all).
    pub events: Vec<String>,
    pub hook_id: Option<u64>,
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Names, numbers and verdicts only: never someone's free text.
        match self {
            Event::CardMoved(e) => {
                // A webhook names the issue by its node only: its number is read from the board
                // when the event is taken, and said then.
                let issue = match e.issue.number {
                    Some(n) => format!("issue #{n}"),
                    None => "an issue".to_string(),
                };
                let board = match e.board.number {
                    Some(n) => format!("board #{n}"),
                    None => format!("board {}", e.board.node_id),
                };
                match &e.columns {
                    ColumnChange::Known { from, to } => {
                        let name = |c: &Option<Column>| {
                            c.as_ref()
                                .map_or("no column".to_string(), |c| c.name.clone())
                        };
                        write!(
                            f,
                            "card of {issue} moved from {} to {} on {board} by {}",
                            name(from),
                            name(to),
                            e.moved_by
                        )
                    }
                    ColumnChange::NeedsLookup => write!(
                        f,
                        "card of {issue} moved on {board} by {} (its column is to be read from the board)",
                        e.moved_by
                    ),
                }
            }
            Event::Command(e) => {
                let edited = if e.edited { " (edited in)" } else { "" };
                match &e.command {
                    Ok(command) => write!(
                        f,
                        "command `{command}` on {} in {} by {}{edited}",
                        e.target, e.repository, e.author
                    ),
                    Err(error) => write!(
                        f,
                        "invalid command on {} in {} by {}{edited}: {error}",
                        e.target, e.repository, e.author
                    ),
                }
            }
            Event::IssueLabeled(e) => write!(
                f,
                "issue #{} in {} labeled `{}` by {}",
                e.issue, e.repository, e.label, e.labeled_by
            ),
            Event::Review(e) => {
                let what = match &e.kind {
                    ReviewKind::Review { state, .. } => format!("review ({state:?})"),
                    ReviewKind::ReviewComment { path, .. } => format!("review comment on {path}"),
                    ReviewKind::Conversation { .. } => "comment".to_string(),
                };
                write!(
                    f,
                    "{what} on pull request #{} in {} by {}",
                    e.pull_request, e.repository, e.author
                )
            }
            Event::Ping(e) => match e.hook_id {
                Some(id) => write!(f, "ping from webhook {id}"),
                None => f.write_str("ping"),
            },
            Event::Cli(e) => write!(
                f,
                "command `{}` for issue #{} from the command line",
                e.command, e.issue
            ),
        }
    }
}
