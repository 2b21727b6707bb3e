//! GitHub webhook payloads → [`Event`]s. Call only on a body whose signature was verified.
//!
//! Read: `projects_v2_item` (`edited`: a card's column changed), `issue_comment` (`created`,
//! `edited`: commands; on pull requests also conversation comments), `issues` (`labeled` with the
//! trigger label), `pull_request_review` (`submitted`), `pull_request_review_comment` (`created`)
//! and `ping`. Other actions of these events are ignored with a reason; other event types are
//! unknown.

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::command::{Command, CommandError, CommandSyntax};
use super::{
    Actor, AuthorAssociation, BoardRef, CardMoved, Column, ColumnChange, CommentCommand, Event,
    FieldRef, IssueLabeled, IssueRef, Origin, Ping, ReviewActivity, ReviewKind, ReviewState,
    Target,
};
use crate::config::RepoSlug;

/// What payloads are read against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookOptions {
    pub commands: CommandSyntax,
    /// The board's single-select field holding the column (`Status`).
    pub status_field: String,
    /// Adding this label to an issue asks for a run; `None`: labels ask for nothing.
    pub trigger_label: Option<String>,
    /// Adding this label to an issue asks for it to be planned as an epic (`epic.label`).
    pub epic_label: Option<String>,
}

impl Default for WebhookOptions {
    fn default() -> Self {
        WebhookOptions {
            commands: CommandSyntax::default(),
            status_field: "Status".to_string(),
            trigger_label: None,
            epic_label: None,
        }
    }
}

/// What a delivery asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Parsed {
    /// Events, in the order the payload gives them (a comment may hold several commands).
    Events(Vec<Event>),
    /// An event supervisor reads, but this one asks for nothing; the reason says why.
    Ignored(String),
    /// An event type supervisor does not read.
    UnknownEventType,
}

/// A payload that is not what GitHub sends for its event.
#[derive(Debug, thiserror::Error)]
pub enum PayloadError {
    #[error("the `{event}` payload cannot be read: {source}")]
    Json {
        event: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("the `{event}` payload {problem}")]
    Invalid { event: String, problem: String },
}

/// Read the body of a delivery of `event_type` (its `X-GitHub-Event` header) whose
/// `X-GitHub-Delivery` id is `delivery`.
pub fn parse_webhook(
    event_type: &str,
    delivery: &str,
    body: &[u8],
    options: &WebhookOptions,
) -> Result<Parsed, PayloadError> {
    let delivery = Delivery {
        event: event_type,
        body,
        origin: Origin::Webhook {
            delivery: delivery.to_string(),
        },
        options,
    };
    match event_type {
        "projects_v2_item" => delivery.read(&["edited"], card_moved),
        "issue_comment" => delivery.read(&["created", "edited"], issue_comment),
        "issues" => delivery.read(&["labeled"], issue_labeled),
        "pull_request_review" => delivery.read(&["submitted"], review::<Review>),
        "pull_request_review_comment" => delivery.read(&["created"], review::<ReviewComment>),
        "ping" => delivery.read(&[], ping),
        _ => Ok(Parsed::UnknownEventType),
    }
}

/// Makes the events of one event type's payload.
type Maker<P> = fn(P, &str, Origin, &WebhookOptions) -> Result<Parsed, PayloadError>;

/// A verified delivery of a known event type.
struct Delivery<'a> {
    event: &'a str,
    body: &'a [u8],
    origin: Origin,
    options: &'a WebhookOptions,
}

impl Delivery<'_> {
    /// One way for every event type: pass over actions not read (none listed: the event has no
    /// actions), read the payload, make its events.
    fn read<P: DeserializeOwned>(
        self,
        actions: &[&str],
        make: Maker<P>,
    ) -> Result<Parsed, PayloadError> {
        if !actions.is_empty() {
            let Action { action } = read(self.event, self.body)?;
            if !actions.contains(&action.as_str()) {
                let read: Vec<String> = actions.iter().map(|a| format!("`{a}`")).collect();
                return ignored(format!(
                    "{} `{action}`: only {} is read",
                    self.event,
                    read.join(" and ")
                ));
            }
        }
        let payload = read(self.event, self.body)?;
        make(payload, self.event, self.origin, self.options)
    }
}

#[derive(Deserialize)]
struct Action {
    action: String,
}

fn read<T: DeserializeOwned>(event: &str, body: &[u8]) -> Result<T, PayloadError> {
    serde_json::from_slice(body).map_err(|source| PayloadError::Json {
        event: event.to_string(),
        source,
    })
}

fn ignored(reason: impl Into<String>) -> Result<Parsed, PayloadError> {
    Ok(Parsed::Ignored(reason.into()))
}

#[derive(Deserialize)]
struct User {
    login: String,
    #[serde(rename = "type", default)]
    kind: Option<String>,
}

impl User {
    fn actor(self, association: Option<AuthorAssociation>) -> Actor {
        Actor {
            is_bot: self.kind.as_deref() == Some("Bot"),
            login: self.login,
            association,
        }
    }
}

/// An account GitHub no longer knows (a deleted user) appears as `null`.
fn actor_or_ghost(user: Option<User>, association: Option<AuthorAssociation>) -> Actor {
    match user {
        Some(user) => user.actor(association),
        None => Actor {
            login: "ghost".to_string(),
            association,
            is_bot: false,
        },
    }
}

#[derive(Deserialize)]
struct Repository {
    full_name: String,
}

impl Repository {
    fn slug(&self, event: &str) -> Result<RepoSlug, PayloadError> {
        RepoSlug::parse(&self.full_name).ok_or_else(|| PayloadError::Invalid {
            event: event.to_string(),
            problem: "names a repository that is not of the form owner/name".to_string(),
        })
    }
}

// --- projects_v2_item -------------------------------------------------------------------------

#[derive(Deserialize)]
struct ItemPayload {
    projects_v2_item: Item,
    changes: Option<ItemChanges>,
    organization: Option<Organization>,
    sender: User,
}

#[derive(Deserialize)]
struct Item {
    node_id: String,
    project_node_id: String,
    content_node_id: String,
    content_type: String,
}

#[derive(Deserialize)]
struct Organization {
    login: String,
}

#[derive(Deserialize)]
struct ItemChanges {
    field_value: Option<FieldValue>,
}

#[derive(Deserialize)]
struct FieldValue {
    field_node_id: String,
    field_type: Option<String>,
    field_name: Option<String>,
    project_number: Option<u64>,
    /// Absent in older payloads; `null` when the field had (or now has) no value.
    #[serde(default, deserialize_with = "present")]
    from: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    to: Option<Value>,
}

/// Tells a key given as `null` (`Some(Value::Null)`) from an absent one (`None`).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// A single-select option (`{ "id", "name", … }`) or `null`; anything else is not a column.
fn column(value: &Value) -> Result<Option<Column>, ()> {
    match value {
        Value::Null => Ok(None),
        Value::Object(option) => match (option.get("id"), option.get("name")) {
            (Some(Value::String(id)), Some(Value::String(name))) => Ok(Some(Column {
                option_id: id.clone(),
                name: name.clone(),
            })),
            _ => Err(()),
        },
        _ => Err(()),
    }
}

fn card_moved(
    payload: ItemPayload,
    _: &str,
    origin: Origin,
    options: &WebhookOptions,
) -> Result<Parsed, PayloadError> {
    let Some(field) = payload.changes.and_then(|c| c.field_value) else {
        return ignored("projects_v2_item `edited` without a field change (a draft issue's text)");
    };
    match (&field.field_name, field.field_type.as_deref()) {
        (Some(name), _) if name != &options.status_field => {
            return ignored(format!(
                "projects_v2_item: field `{name}` changed, not `{}`",
                options.status_field
            ));
        }
        (None, Some(kind)) if kind != "single_select" => {
            return ignored(format!(
                "projects_v2_item: a {kind} field changed, not the single-select status field"
            ));
        }
        _ => {}
    }
    let item = payload.projects_v2_item;
    if item.content_type != "Issue" {
        return ignored(format!(
            "projects_v2_item: the card holds a {}, not an issue",
            item.content_type
        ));
    }
    let columns = match (&field.from, &field.to) {
        (Some(from), Some(to)) => match (column(from), column(to)) {
            (Ok(from), Ok(to)) => ColumnChange::Known { from, to },
            _ => ColumnChange::NeedsLookup,
        },
        _ => ColumnChange::NeedsLookup,
    };
    Ok(Parsed::Events(vec![Event::CardMoved(CardMoved {
        origin,
        item_node_id: item.node_id,
        board: BoardRef {
            node_id: item.project_node_id,
            number: field.project_number,
            owner: payload.organization.map(|o| o.login),
        },
        issue: IssueRef {
            node_id: item.content_node_id,
            number: None,
        },
        field: FieldRef {
            node_id: field.field_node_id,
            name: field.field_name,
        },
        columns,
        moved_by: payload.sender.actor(None),
    })]))
}

// --- issue_comment ----------------------------------------------------------------------------

#[derive(Deserialize)]
struct CommentPayload {
    action: String,
    issue: CommentedIssue,
    comment: Comment,
    changes: Option<CommentChanges>,
    repository: Repository,
    sender: User,
}

#[derive(Deserialize)]
struct CommentedIssue {
    number: u64,
    /// Present when the "issue" is a pull request's conversation.
    pull_request: Option<Value>,
}

#[derive(Deserialize)]
struct Comment {
    pub id: u64,
    pub body: Option<String>,
    user: Option<User>,
    author_association: Option<AuthorAssociation>,
}

#[derive(Deserialize)]
struct CommentChanges {
    body: Option<BodyChange>,
}

#[derive(Deserialize)]
struct BodyChange {
    from: Option<String>,
}

fn issue_comment(
    payload: CommentPayload,
    _: &str,
    origin: Origin,
    options: &WebhookOptions,
) -> Result<Parsed, PayloadError> {
    let edited = payload.action == "edited";
    let repository = payload.repository.slug("issue_comment")?;
    let number = payload.issue.number;
    let target = match payload.issue.pull_request {
        Some(Value::Null) | None => Target::Issue(number),
        Some(_) => Target::PullRequest(number),
    };
    let body = payload.comment.body.unwrap_or_default();
    let mut commands = options.commands.parse(&body);
    if edited {
        // Only commands the edit added: fixing a typo elsewhere in a comment runs nothing again.
        let before = match payload.changes.and_then(|c| c.body) {
            Some(change) => options.commands.parse(&change.from.unwrap_or_default()),
            None => commands.clone(),
        };
        commands = without(commands, before);
    }
    let association = payload.comment.author_association;
    let author = actor_or_ghost(payload.comment.user, association);
    if commands.is_empty() {
        return match (target, edited) {
            (Target::PullRequest(pull_request), false) => {
                Ok(Parsed::Events(vec![Event::Review(ReviewActivity {
                    origin,
                    repository,
                    pull_request,
                    author,
                    kind: ReviewKind::Conversation {
                        comment_id: payload.comment.id,
                    },
                    body: Some(body),
                })]))
            }
            _ if edited => ignored("issue_comment `edited` added no command"),
            _ => ignored("issue_comment without a command"),
        };
    }
    let sender = payload.sender.actor(None);
    let events = commands
        .into_iter()
        .map(|command| {
            Event::Command(CommentCommand {
                origin: origin.clone(),
                repository: repository.clone(),
                target,
                comment_id: payload.comment.id,
                author: author.clone(),
                sender: sender.clone(),
                edited,
                command,
            })
        })
        .collect();
    Ok(Parsed::Events(events))
}

/// `now` less one occurrence of each of `before`.
fn without(
    now: Vec<Result<Command, CommandError>>,
    mut before: Vec<Result<Command, CommandError>>,
) -> Vec<Result<Command, CommandError>> {
    now.into_iter()
        .filter(|command| match before.iter().position(|b| b == command) {
            Some(i) => {
                let _ = before.swap_remove(i);
                false
            }
            None => true,
        })
        .collect()
}

// --- issues -----------------------------------------------------------------------------------

#[derive(Deserialize)]
struct IssuesPayload {
    issue: LabeledIssue,
    label: Option<Label>,
    repository: Repository,
    sender: User,
}

#[derive(Deserialize)]
struct LabeledIssue {
    number: u64,
    node_id: String,
    user: Option<User>,
    author_association: Option<AuthorAssociation>,
}

#[derive(Deserialize)]
struct Label {
    name: String,
}

fn issue_labeled(
    payload: IssuesPayload,
    _: &str,
    origin: Origin,
    options: &WebhookOptions,
) -> Result<Parsed, PayloadError> {
    let Some(label) = payload.label else {
        return ignored("issues `labeled` without a label");
    };
    // GitHub treats label names without regard to case.
    let is = |l: &Option<String>| {
        l.as_ref()
            .is_some_and(|l| label.name.eq_ignore_ascii_case(l))
    };
    if !is(&options.trigger_label) && !is(&options.epic_label) {
        return ignored(match &options.trigger_label {
            None => format!(
                "issues `labeled` `{}`: no trigger label is configured",
                label.name
            ),
            Some(trigger) => format!(
                "issues `labeled` `{}`, not the trigger label `{trigger}`",
                label.name
            ),
        });
    }
    let repository = payload.repository.slug("issues")?;
    Ok(Parsed::Events(vec![Event::IssueLabeled(IssueLabeled {
        origin,
        repository,
        issue: payload.issue.number,
        issue_node_id: payload.issue.node_id,
        label: label.name,
        labeled_by: payload.sender.actor(None),
        issue_author: actor_or_ghost(payload.issue.user, payload.issue.author_association),
    })]))
}

// --- pull_request_review, pull_request_review_comment -----------------------------------------

/// A `pull_request_review` or `pull_request_review_comment` payload: its `review` or `comment`.
#[derive(Deserialize)]
struct PullRequestPayload<T> {
    #[serde(alias = "review", alias = "comment")]
    item: T,
    pull_request: PullRequest,
    repository: Repository,
}

#[derive(Deserialize)]
struct PullRequest {
    pub number: u64,
}

/// What a review or a review comment says, and who wrote it.
struct Written {
    user: Option<User>,
    author_association: Option<AuthorAssociation>,
    body: Option<String>,
    kind: ReviewKind,
}

#[derive(Deserialize)]
struct Review {
    pub id: u64,
    user: Option<User>,
    pub body: Option<String>,
    pub state: ReviewState,
    author_association: Option<AuthorAssociation>,
}

impl From<Review> for Written {
    fn from(review: Review) -> Written {
        Written {
            user: review.user,
            author_association: review.author_association,
            body: review.body,
            kind: ReviewKind::Review {
                review_id: review.id,
                state: review.state,
            },
        }
    }
}

#[derive(Deserialize)]
struct ReviewComment {
    pub id: u64,
    user: Option<User>,
    pub body: Option<String>,
    author_association: Option<AuthorAssociation>,
    pub path: String,
    pub line: Option<u64>,
    pull_request_review_id: Option<u64>,
}

impl From<ReviewComment> for Written {
    fn from(comment: ReviewComment) -> Written {
        Written {
            user: comment.user,
            author_association: comment.author_association,
            body: comment.body,
            kind: ReviewKind::ReviewComment {
                comment_id: comment.id,
                review_id: comment.pull_request_review_id,
                path: comment.path,
                line: comment.line,
            },
        }
    }
}

/// A review or a review comment.
fn review<T: Into<Written>>(
    payload: PullRequestPayload<T>,
    event: &str,
    origin: Origin,
    _: &WebhookOptions,
) -> Result<Parsed, PayloadError> {
    let written: Written = payload.item.into();
    Ok(Parsed::Events(vec![Event::Review(ReviewActivity {
        origin,
        repository: payload.repository.slug(event)?,
        pull_request: payload.pull_request.number,
        author: actor_or_ghost(written.user, written.author_association),
        kind: written.kind,
        body: written.body,
    })]))
}

// --- ping -------------------------------------------------------------------------------------

#[derive(Deserialize)]
struct PingPayload {
    hook_id: Option<u64>,
    hook: Option<Hook>,
}

#[derive(Deserialize)]
struct Hook {
    #[serde(default)]
    events: Vec<String>,
}

fn ping(
    payload: PingPayload,
    _: &str,
    origin: Origin,
    _: &WebhookOptions,
) -> Result<Parsed, PayloadError> {
    Ok(Parsed::Events(vec![Event::Ping(Ping {
        origin,
        hook_id: payload.hook_id,
        events: payload.hook.map(|h| h.events).unwrap_or_default(),
    })]))
}

#[cfg(test)]
mod tests;
