//! The webhooks the sandbox sends: card moves, comments, labels, closed issues, reviews and their
//! line comments — made through its API or played through `POST /_sandbox/act` — delivered to one
//! URL (an organization's, a repository's or an App's webhook), signed with the secret
//! (`X-Hub-Signature-256`), with GitHub's headers and payload shapes, one at a time in the order
//! they happened. A fault on route `WEBHOOK <event>` (`WEBHOOK` matches every event) makes a
//! delivery go out twice with the same `X-GitHub-Delivery`, as GitHub's redeliveries do.

use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::shapes::Shapes;
use super::state::SandboxState;
use super::{Origin, Shared, ids, lock};
use crate::events::WebhookSecret;

/// Where the sandbox delivers its webhooks.
pub struct WebhookTarget {
    /// The receiver's URL (`http://127.0.0.1:8080/webhook`).
    pub url: String,
    pub secret: WebhookSecret,
    /// Whose webhook it is; `None`: the organization's when an organization owns the repository,
    /// else the repository's.
    pub kind: Option<HookKind>,
}

impl WebhookTarget {
    /// A webhook of the repository's owner (see [`WebhookTarget::kind`]).
    pub fn new(url: impl Into<String>, secret: WebhookSecret) -> WebhookTarget {
        WebhookTarget {
            url: url.into(),
            secret,
            kind: None,
        }
    }
}

/// Where a webhook is set up, which decides what it receives: GitHub sends `projects_v2_item`
/// (organization boards only) to organization webhooks and GitHub Apps, never to a repository's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookKind {
    Repository,
    Organization,
    /// The webhook of a GitHub App installed on the repository (the state's first `apps` entry):
    /// its payloads name the installation.
    App,
}

impl std::str::FromStr for HookKind {
    type Err = String;

    fn from_str(s: &str) -> Result<HookKind, String> {
        match s {
            "repository" => Ok(HookKind::Repository),
            "organization" => Ok(HookKind::Organization),
            "app" => Ok(HookKind::App),
            other => Err(format!(
                "`{other}` is no webhook kind: repository, organization or app"
            )),
        }
    }
}

impl HookKind {
    /// `X-GitHub-Hook-Installation-Target-Type`.
    fn target_type(self) -> &'static str {
        match self {
            HookKind::Repository => "repository",
            HookKind::Organization => "organization",
            HookKind::App => "integration",
        }
    }
}

/// Something that happened that GitHub tells webhooks about.
#[derive(Debug, Clone)]
pub(crate) enum Hook {
    CardMoved {
        issue: u64,
        from: Option<String>,
        to: Option<String>,
        by: String,
    },
    Commented {
        issue: u64,
        comment_id: u64,
        by: String,
    },
    CommentEdited {
        issue: u64,
        comment_id: u64,
        before: String,
        by: String,
    },
    Labeled {
        issue: u64,
        label: String,
        by: String,
    },
    Unlabeled {
        issue: u64,
        label: String,
        by: String,
    },
    Closed {
        issue: u64,
        by: String,
    },
    /// A review was submitted on a pull request.
    Reviewed {
        pull: u64,
        review_id: u64,
    },
    /// A line comment was made on a pull request (in a review, alone, or as a reply).
    ReviewCommented {
        pull: u64,
        comment_id: u64,
    },
}

/// One delivery as the sandbox's log shows it (`GET /_sandbox/deliveries`).
#[derive(Debug, Clone, Serialize)]
pub struct DeliveryRecord {
    pub id: String,
    pub event: String,
    pub(crate) action: String,
    /// The receiver's status code; `None` when it could not be reached.
    pub status: Option<u16>,
    pub(crate) error: Option<String>,
    /// A second delivery of the same id.
    pub redelivery: bool,
}

struct Outgoing {
    event: &'static str,
    action: String,
    id: String,
    body: Vec<u8>,
    redeliver: bool,
}

/// The sending side: payloads are made under the state's lock and sent by one task.
pub(crate) struct Hooks {
    kind: HookKind,
    /// The App installation named in an App webhook's payloads.
    installation: Option<u64>,
    queue: mpsc::UnboundedSender<Outgoing>,
    log: Arc<Mutex<Vec<DeliveryRecord>>>,
    /// Deliveries queued and not yet answered.
    pending: Arc<std::sync::atomic::AtomicUsize>,
}

impl Hooks {
    /// Send to `target` what happens to `st`, as GitHub would to that kind of webhook.
    pub(crate) fn start(target: WebhookTarget, st: &SandboxState) -> Result<Hooks, String> {
        let owner = &st.repo.owner;
        let kind = target.kind.unwrap_or(if st.is_org(owner) {
            HookKind::Organization
        } else {
            HookKind::Repository
        });
        if kind == HookKind::Organization && !st.is_org(owner) {
            return Err(format!(
                "an organization webhook needs a repository an organization owns; {owner} is a user (use a repository webhook)"
            ));
        }
        let installation = st.apps.first().map(|a| a.installation_id);
        if kind == HookKind::App && installation.is_none() {
            return Err("an App webhook needs an App in the state's `apps`".into());
        }
        let target_id = match kind {
            HookKind::Repository => ids::REPO_ID,
            HookKind::Organization => ids::user(owner),
            HookKind::App => st.apps.first().map_or(0, |a| a.app_id),
        };
        let client = client()?;
        let (queue, mut rx) = mpsc::unbounded_channel::<Outgoing>();
        let log = Arc::new(Mutex::new(Vec::new()));
        let pending = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (task_log, task_pending) = (log.clone(), pending.clone());
        tokio::spawn(async move {
            while let Some(out) = rx.recv().await {
                let times = if out.redeliver { 2 } else { 1 };
                for n in 0..times {
                    let record = deliver(&client, &target, (kind, target_id), &out, n > 0).await;
                    lock(&task_log).push(record);
                }
                task_pending.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
            }
        });
        Ok(Hooks {
            kind,
            installation,
            queue,
            log,
            pending,
        })
    }

    pub(crate) fn log(&self) -> Vec<DeliveryRecord> {
        lock(&self.log).clone()
    }

    /// Deliveries queued and not yet answered.
    pub(crate) fn pending(&self) -> usize {
        self.pending.load(std::sync::atomic::Ordering::SeqCst)
    }
}

fn client() -> Result<reqwest::Client, String> {
    // Deliveries go to a receiver on this machine, over plain HTTP: no certificates are trusted.
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS set-up failed: {e}"))?
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .timeout(std::time::Duration::from_secs(10))
        .build()
        .map_err(|e| format!("the webhook client could not be built: {e}"))
}

async fn deliver(
    client: &reqwest::Client,
    target: &WebhookTarget,
    (kind, target_id): (HookKind, u64),
    out: &Outgoing,
    redelivery: bool,
) -> DeliveryRecord {
    let sent = client
        .post(&target.url)
        .header("content-type", "application/json")
        .header("user-agent", "GitHub-Hookshot/sandbox")
        .header("x-github-event", out.event)
        .header("x-github-delivery", &out.id)
        .header("x-github-hook-id", "1")
        .header("x-github-hook-installation-target-type", kind.target_type())
        .header(
            "x-github-hook-installation-target-id",
            target_id.to_string(),
        )
        .header(
            crate::events::SIGNATURE_HEADER,
            target.secret.sign(&out.body),
        )
        .body(out.body.clone())
        .send()
        .await;
    let (status, error) = match sent {
        Ok(resp) => (Some(resp.status().as_u16()), None),
        Err(e) => {
            tracing::warn!(delivery = %out.id, "webhook delivery failed: {e}");
            (None, Some(e.to_string()))
        }
    };
    DeliveryRecord {
        id: out.id.clone(),
        event: out.event.to_string(),
        action: out.action.clone(),
        status,
        error,
        redelivery,
    }
}

impl Shared {
    /// Queue the webhook for `hook` when the sandbox sends webhooks.
    pub(crate) fn emit(&self, st: &SandboxState, hook: Hook) {
        let Some(hooks) = &self.hooks else {
            return;
        };
        let (event, payload) = self.payload(st, &hook);
        // Board events reach organization webhooks and Apps only.
        if payload.is_null() || (event == "projects_v2_item" && hooks.kind == HookKind::Repository)
        {
            return;
        }
        let action = payload["action"].as_str().unwrap_or_default().to_string();
        let redeliver = self.take_fault(&format!("WEBHOOK {event}")).is_some();
        let out = Outgoing {
            event,
            action,
            id: delivery_id(),
            body: serde_json::to_vec(&payload).unwrap_or_default(),
            redeliver,
        };
        hooks
            .pending
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if hooks.queue.send(out).is_err() {
            hooks
                .pending
                .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// Where webhook payloads' URLs point: the state's `public_url`, else the listening address.
    fn own_origin(&self, st: &SandboxState) -> Origin {
        let web = st
            .public_url
            .as_deref()
            .unwrap_or(&self.base)
            .trim_end_matches('/')
            .to_string();
        Origin {
            api: web.clone(),
            web,
        }
    }

    fn payload(&self, st: &SandboxState, hook: &Hook) -> (&'static str, Value) {
        let origin = self.own_origin(st);
        let shapes = Shapes::for_webhooks(&origin, st);
        // A pull request's conversation comments come as `issue_comment` with the pull request
        // shown as an issue, as GitHub sends them.
        let issue = |n: u64| match (st.issue(n), st.pull(n)) {
            (Some(i), _) => shapes.issue(i),
            (None, Some(p)) => shapes.pull_as_issue(p),
            (None, None) => Value::Null,
        };
        let mut common = json!({ "repository": shapes.repository(false) });
        if st.is_org(&st.repo.owner) {
            common["organization"] = organization(&origin, &st.repo.owner);
        }
        // An App's webhooks name its installation.
        if let Some(id) = self
            .hooks
            .as_ref()
            .filter(|h| h.kind == HookKind::App)
            .and_then(|h| h.installation)
        {
            common["installation"] = json!({ "id": id, "node_id": format!("IN_{id}") });
        }
        let (event, mut payload) = match hook {
            Hook::CardMoved {
                issue,
                from,
                to,
                by,
            } => {
                let option = |c: &Option<String>| match c {
                    Some(name) => {
                        json!({ "id": ids::option(name), "name": name, "color": "GRAY", "description": "" })
                    }
                    None => Value::Null,
                };
                let board = st.board.as_ref();
                let number = board.map_or(0, |b| b.number);
                let payload = json!({
                    "action": "edited",
                    "projects_v2_item": {
                        "id": issue,
                        "node_id": ids::item(*issue),
                        "project_node_id": ids::project(number),
                        "content_node_id": ids::issue(*issue),
                        "content_type": if st.pull(*issue).is_some() { "PullRequest" } else { "Issue" },
                        "creator": shapes.user(by),
                        "created_at": super::shapes::iso(chrono::Utc::now()),
                        "updated_at": super::shapes::iso(chrono::Utc::now()),
                        "archived_at": null,
                    },
                    "changes": { "field_value": {
                        "field_node_id": ids::status_field(number),
                        "field_type": "single_select",
                        "field_name": board.map_or("Status", |b| b.status_field.as_str()),
                        "project_number": number,
                        "from": option(from),
                        "to": option(to),
                    }},
                    "sender": shapes.user(by),
                });
                // Board events carry the organization (the board's), not the repository.
                let owner = board.map_or(&st.repo.owner, |b| &b.owner);
                common = json!({
                    "organization": organization(&origin, owner),
                    "installation": common.get("installation").cloned().unwrap_or(Value::Null),
                });
                ("projects_v2_item", payload)
            }
            Hook::Commented {
                issue: n,
                comment_id,
                by,
            }
            | Hook::CommentEdited {
                issue: n,
                comment_id,
                by,
                ..
            } => {
                let comment = st
                    .comments_of(*n)
                    .iter()
                    .find(|c| c.id == *comment_id)
                    .map(|c| shapes.comment(*n, c))
                    .unwrap_or(Value::Null);
                let mut payload = json!({
                    "action": "created",
                    "issue": issue(*n),
                    "comment": comment,
                    "sender": shapes.user(by),
                });
                if let Hook::CommentEdited { before, .. } = hook {
                    payload["action"] = json!("edited");
                    payload["changes"] = json!({ "body": { "from": before } });
                }
                ("issue_comment", payload)
            }
            Hook::Labeled {
                issue: n,
                label,
                by,
            }
            | Hook::Unlabeled {
                issue: n,
                label,
                by,
            } => {
                let action = if matches!(hook, Hook::Labeled { .. }) {
                    "labeled"
                } else {
                    "unlabeled"
                };
                let payload = json!({
                    "action": action,
                    "issue": issue(*n),
                    "label": shapes.labels(std::slice::from_ref(label)).pop(),
                    "sender": shapes.user(by),
                });
                ("issues", payload)
            }
            Hook::Reviewed { pull, review_id } => {
                let Some(p) = st.pull(*pull) else {
                    return ("pull_request_review", Value::Null);
                };
                let Some(r) = p.reviews.iter().find(|r| r.id == *review_id) else {
                    return ("pull_request_review", Value::Null);
                };
                let mut review = shapes.review(*pull, r);
                // Webhooks spell review states in lower case (`changes_requested`).
                review["state"] = json!(r.state.to_ascii_lowercase());
                let payload = json!({
                    "action": "submitted",
                    "review": review,
                    "pull_request": simple_pull(shapes.pull(&self.git, p, true)),
                    "sender": shapes.user(&r.author),
                });
                ("pull_request_review", payload)
            }
            Hook::ReviewCommented { pull, comment_id } => {
                let Some(p) = st.pull(*pull) else {
                    return ("pull_request_review_comment", Value::Null);
                };
                let Some(c) = p.review_comments.iter().find(|c| c.id == *comment_id) else {
                    return ("pull_request_review_comment", Value::Null);
                };
                let payload = json!({
                    "action": "created",
                    "comment": shapes.review_comment(&self.git, p, c),
                    "pull_request": simple_pull(shapes.pull(&self.git, p, true)),
                    "sender": shapes.user(&c.author),
                });
                ("pull_request_review_comment", payload)
            }
            Hook::Closed { issue: n, by } => {
                let payload = json!({
                    "action": "closed",
                    "issue": issue(*n),
                    "sender": shapes.user(by),
                });
                ("issues", payload)
            }
        };
        if let (Some(target), Some(extra)) = (payload.as_object_mut(), common.as_object()) {
            for (k, v) in extra {
                if !v.is_null() {
                    target.insert(k.clone(), v.clone());
                }
            }
        }
        (event, payload)
    }
}

/// A pull request as review webhooks show it: without the REST API's counts and mergeability.
fn simple_pull(mut pull: Value) -> Value {
    super::shapes::remove(
        &mut pull,
        &[
            "additions",
            "changed_files",
            "comments",
            "commits",
            "deletions",
            "maintainer_can_modify",
            "mergeable",
            "mergeable_state",
            "merged",
            "merged_by",
            "rebaseable",
            "review_comments",
        ],
    );
    pull
}

/// An organization as webhook payloads show it.
fn organization(origin: &Origin, login: &str) -> Value {
    let api = format!("{}/orgs/{login}", origin.api);
    let mut org = json!({
        "login": login,
        "id": ids::user(login),
        "node_id": ids::user_node(login, "Organization"),
        "url": api,
        "avatar_url": format!("{}/avatars/{login}", origin.web),
        "description": "",
    });
    let links = [
        ("repos_url", "/repos"),
        ("events_url", "/events"),
        ("hooks_url", "/hooks"),
        ("issues_url", "/issues"),
        ("members_url", "/members{/member}"),
        ("public_members_url", "/public_members{/member}"),
    ];
    for (key, rest) in links {
        org[key] = json!(format!("{api}{rest}"));
    }
    org
}

/// A GUID, as GitHub's `X-GitHub-Delivery` ids are.
fn delivery_id() -> String {
    let r = || fastrand::u64(..);
    let (a, b) = (r(), r());
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        (b >> 48) & 0x3fff | 0x8000,
        b & 0xffff_ffff_ffff
    )
}

/// A human's action, played through `POST /_sandbox/act`:
/// `{"move": {"issue": 3, "to": "Research", "by": "alice"}}`, `{"comment": {"issue": 3, "body":
/// "/supervisor run", "by": "alice"}}`, `{"label": {"issue": 3, "name": "supervisor", "by":
/// "alice"}}`, `{"unlabel": …}`, `{"close": {"issue": 3, "by": "alice"}}`.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Act {
    /// Move the issue's card (`to: null` clears its column).
    Move {
        issue: u64,
        to: Option<String>,
        by: String,
    },
    Comment {
        issue: u64,
        body: String,
        by: String,
    },
    Label {
        issue: u64,
        name: String,
        by: String,
    },
    Unlabel {
        issue: u64,
        name: String,
        by: String,
    },
    Close {
        issue: u64,
        by: String,
    },
}
