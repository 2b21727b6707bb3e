//! The webhook receiver of `supervisor serve`: `POST /webhook` verifies a delivery's signature,
//! refuses oversized bodies, recognises redeliveries, reads the payload into [`Event`]s and puts
//! them on a bounded queue, answering at once. It never does work on the request path: whatever
//! holds the queue's receiving end (the scheduler) does. `GET /healthz` answers while it serves;
//! `GET /status` reports the queue, the deliveries and the last event, plus any sections the
//! queue's consumer adds.

mod deliveries;

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::events::{
    Event, LEGACY_SIGNATURE_HEADER, Parsed, Ping, SIGNATURE_HEADER, Signature, SignatureError,
    WebhookOptions, WebhookSecret, parse_webhook,
};
use deliveries::RecentDeliveries;

/// GitHub caps payloads at 25 MB.
pub const MAX_BODY_BYTES: usize = 25 * 1024 * 1024;

/// Events GitHub must send for the board-driven modes to see everything they act on.
pub const SUBSCRIBED_EVENTS: [&str; 5] = [
    "projects_v2_item",
    "issue_comment",
    "issues",
    "pull_request_review",
    "pull_request_review_comment",
];

/// Longest `X-GitHub-Delivery` id taken (GitHub's are 36-character GUIDs).
const MAX_DELIVERY_ID_BYTES: usize = 128;

/// A part of `GET /status` that the queue's consumer provides (its live runs, say).
pub type StatusSection = Arc<dyn Fn() -> Value + Send + Sync>;

/// How the receiver is set up.
pub struct ReceiverConfig {
    pub secret: WebhookSecret,
    pub webhook: WebhookOptions,
    /// Events the queue holds before deliveries are refused (503) until the consumer catches up.
    pub queue_capacity: usize,
    /// `X-GitHub-Delivery` ids remembered to recognise redeliveries.
    pub remembered_deliveries: usize,
    /// Bodies larger than this are refused (413).
    pub max_body_bytes: usize,
    sections: Vec<(String, StatusSection)>,
}

impl ReceiverConfig {
    pub const DEFAULT_QUEUE_CAPACITY: usize = 1024;
    pub const DEFAULT_REMEMBERED_DELIVERIES: usize = 10_000;

    pub fn new(secret: WebhookSecret, webhook: WebhookOptions) -> ReceiverConfig {
        ReceiverConfig {
            secret,
            webhook,
            queue_capacity: Self::DEFAULT_QUEUE_CAPACITY,
            remembered_deliveries: Self::DEFAULT_REMEMBERED_DELIVERIES,
            max_body_bytes: MAX_BODY_BYTES,
            sections: Vec::new(),
        }
    }

    /// Add `name` to `GET /status`, its value computed by `section` at each request. The
    /// receiver's own section is `receiver`.
    pub fn status_section(
        mut self,
        name: &str,
        section: impl Fn() -> Value + Send + Sync + 'static,
    ) -> ReceiverConfig {
        self.sections.push((name.to_string(), Arc::new(section)));
        self
    }
}

/// The webhook receiver.
pub struct Receiver;

impl Receiver {
    /// The receiver's routes, and the receiving end of its queue of events (pings are answered,
    /// not queued).
    // Made together, the two ends are the whole receiver: no other value is needed.
    #[allow(clippy::new_ret_no_self)]
    pub fn new(config: ReceiverConfig) -> (Router, mpsc::Receiver<Event>) {
        // A comment holds at most this many commands, all queued or none.
        let capacity = config
            .queue_capacity
            .max(crate::events::MAX_COMMANDS_PER_COMMENT);
        let (queue, events) = mpsc::channel(capacity);
        let shared = Arc::new(Shared {
            secret: config.secret,
            webhook: config.webhook,
            max_body_bytes: config.max_body_bytes,
            queue,
            deliveries: Mutex::new(RecentDeliveries::new(config.remembered_deliveries)),
            stats: Mutex::new(Stats::default()),
            sections: config.sections,
            started_at: chrono::Utc::now(),
        });
        let router = Router::new()
            .route("/webhook", post(webhook))
            .route("/healthz", get(|| async { "ok\n" }))
            .route("/status", get(status))
            .with_state(shared);
        (router, events)
    }
}

struct Shared {
    secret: WebhookSecret,
    webhook: WebhookOptions,
    max_body_bytes: usize,
    queue: mpsc::Sender<Event>,
    deliveries: Mutex<RecentDeliveries>,
    stats: Mutex<Stats>,
    sections: Vec<(String, StatusSection)>,
    started_at: chrono::DateTime<chrono::Utc>,
}

impl Shared {
    fn stats(&self) -> MutexGuard<'_, Stats> {
        // The counters stay meaningful even if a holder panicked.
        self.stats.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn deliveries(&self) -> MutexGuard<'_, RecentDeliveries> {
        self.deliveries.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[derive(Debug, Default)]
struct Stats {
    /// Verified deliveries, redeliveries not counted again.
    seen: u64,
    redeliveries: u64,
    events_queued: u64,
    ignored: u64,
    unknown_event_types: u64,
    malformed: u64,
    bad_signature: u64,
    too_large: u64,
    queue_full: u64,
    /// Unknown event types already logged: each is logged once.
    unknown_logged: HashSet<String>,
    last_event: Option<Value>,
}

/// An answer: the status and a small JSON body saying what happened.
fn answer(status: StatusCode, body: Value) -> Response {
    (status, axum::Json(body)).into_response()
}

fn refuse(status: StatusCode, message: impl Into<String>) -> Response {
    answer(status, json!({ "error": message.into() }))
}

async fn webhook(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Body) -> Response {
    let text = |name: &str| headers.get(name).map(|v| v.as_bytes());

    // Nothing is read, let alone parsed, before the signature header is known to be usable.
    let signature =
        match Signature::from_headers(text(SIGNATURE_HEADER), text(LEGACY_SIGNATURE_HEADER)) {
            Ok(signature) => signature,
            Err(e) => return unauthorized(&shared, e),
        };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > shared.max_body_bytes as u64) {
        return too_large(&shared);
    }
    let body = match axum::body::to_bytes(body, shared.max_body_bytes).await {
        Ok(body) => body,
        Err(e) => {
            let over_limit = std::error::Error::source(&e)
                .is_some_and(|s| s.is::<http_body_util::LengthLimitError>());
            if over_limit {
                return too_large(&shared);
            }
            tracing::warn!("webhook delivery: reading the body failed: {e}");
            return refuse(StatusCode::BAD_REQUEST, "the body could not be read");
        }
    };
    if let Err(e) = signature.verify(&shared.secret, &body) {
        return unauthorized(&shared, e);
    }

    // Authentic from here on.
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"));
    if !is_json {
        shared.stats().malformed += 1;
        tracing::warn!(
            "webhook delivery refused: its content type is not application/json; set the webhook's content type to application/json in GitHub"
        );
        return refuse(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "set the webhook's content type to application/json",
        );
    }
    let Some(event_type) = headers.get("x-github-event").and_then(|v| v.to_str().ok()) else {
        shared.stats().malformed += 1;
        tracing::warn!("webhook delivery refused: no X-GitHub-Event header");
        return refuse(StatusCode::BAD_REQUEST, "no X-GitHub-Event header");
    };
    let delivery = match headers.get("x-github-delivery").map(|v| v.to_str()) {
        None => None,
        Some(Ok(id)) if !id.is_empty() && id.len() <= MAX_DELIVERY_ID_BYTES => Some(id),
        Some(_) => {
            shared.stats().malformed += 1;
            tracing::warn!("webhook delivery refused: unreadable X-GitHub-Delivery header");
            return refuse(
                StatusCode::BAD_REQUEST,
                "unreadable X-GitHub-Delivery header",
            );
        }
    };
    match delivery {
        Some(id) if !shared.deliveries().insert(id) => {
            shared.stats().redeliveries += 1;
            tracing::info!(
                delivery = id,
                event = event_type,
                "redelivery: already taken"
            );
            return answer(StatusCode::OK, json!({ "redelivery": id }));
        }
        Some(_) => {}
        None => tracing::warn!(
            event = event_type,
            "webhook delivery without X-GitHub-Delivery: a redelivery of it cannot be recognised"
        ),
    }
    shared.stats().seen += 1;
    let response = take(&shared, event_type, delivery.unwrap_or(""), &body);
    if !response.status().is_success() {
        // Only what was answered 2xx counts as taken: a redelivery of it gets another chance.
        if let Some(id) = delivery {
            shared.deliveries().forget(id);
        }
    }
    response
}

fn unauthorized(shared: &Shared, e: SignatureError) -> Response {
    shared.stats().bad_signature += 1;
    tracing::warn!("webhook delivery refused: {e}");
    refuse(StatusCode::UNAUTHORIZED, e.to_string())
}

fn too_large(shared: &Shared) -> Response {
    shared.stats().too_large += 1;
    tracing::warn!(
        "webhook delivery refused: the body is larger than {} bytes",
        shared.max_body_bytes
    );
    refuse(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("bodies over {} bytes are refused", shared.max_body_bytes),
    )
}

/// Read a verified delivery and queue its events.
fn take(shared: &Shared, event_type: &str, delivery: &str, body: &[u8]) -> Response {
    let events = match parse_webhook(event_type, delivery, body, &shared.webhook) {
        Ok(Parsed::Events(events)) => events,
        Ok(Parsed::Ignored(reason)) => {
            shared.stats().ignored += 1;
            tracing::info!(delivery, event = event_type, "ignored: {reason}");
            return answer(StatusCode::OK, json!({ "ignored": reason }));
        }
        Ok(Parsed::UnknownEventType) => {
            let mut stats = shared.stats();
            stats.unknown_event_types += 1;
            if stats.unknown_logged.insert(event_type.to_string()) {
                tracing::warn!(
                    "webhook event `{event_type}` is not read by supervisor (logged once): unsubscribe the webhook from it"
                );
            }
            return answer(
                StatusCode::OK,
                json!({ "ignored": format!("event `{event_type}` is not read") }),
            );
        }
        Err(e) => {
            shared.stats().malformed += 1;
            tracing::warn!(delivery, "webhook delivery refused: {e}");
            return refuse(StatusCode::BAD_REQUEST, e.to_string());
        }
    };
    let (pings, work): (Vec<Event>, Vec<Event>) = events
        .into_iter()
        .partition(|e| matches!(e, Event::Ping(_)));
    for ping in &pings {
        if let Event::Ping(ping) = ping {
            greet(ping);
        }
        shared.stats().last_event = Some(summary(ping, delivery));
    }
    if work.is_empty() {
        return answer(StatusCode::OK, json!({ "queued": 0 }));
    }
    let permits = match shared.queue.try_reserve_many(work.len()) {
        Ok(permits) => permits,
        Err(e) => {
            shared.stats().queue_full += 1;
            let why = match e {
                mpsc::error::TrySendError::Full(()) => "the event queue is full",
                mpsc::error::TrySendError::Closed(()) => "events are no longer taken",
            };
            tracing::error!(delivery, event = event_type, "delivery not queued: {why}");
            return refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("{why}: redeliver it later"),
            );
        }
    };
    let queued = work.len();
    let last = work.last().map(|e| summary(e, delivery));
    for (permit, event) in permits.zip(work) {
        tracing::debug!(delivery, "queued: {event}");
        permit.send(event);
    }
    let mut stats = shared.stats();
    stats.events_queued += queued as u64;
    stats.last_event = last;
    answer(StatusCode::ACCEPTED, json!({ "queued": queued }))
}

/// Log a ping, and which needed events the webhook is not subscribed to.
fn greet(ping: &Ping) {
    let all = ping.events.iter().any(|e| e == "*");
    let missing: Vec<&str> = SUBSCRIBED_EVENTS
        .iter()
        .copied()
        .filter(|needed| !all && !ping.events.iter().any(|e| e == needed))
        .collect();
    tracing::info!(hook = ping.hook_id, "ping: the webhook reaches supervisor");
    if !missing.is_empty() {
        tracing::warn!(
            hook = ping.hook_id,
            "the webhook is not subscribed to {}: those events will not reach supervisor",
            missing.join(", ")
        );
    }
}

/// The last event, as `GET /status` shows it: names and numbers, never anyone's text.
fn summary(event: &Event, delivery: &str) -> Value {
    json!({
        "kind": event.kind(),
        "summary": event.to_string(),
        "delivery": delivery,
        "at": chrono::Utc::now().to_rfc3339(),
    })
}

async fn status(State(shared): State<Arc<Shared>>) -> Response {
    let capacity = shared.queue.max_capacity();
    let depth = capacity - shared.queue.capacity();
    let remembered = shared.deliveries().len();
    let receiver = {
        let stats = shared.stats();
        json!({
            "started_at": shared.started_at.to_rfc3339(),
            "queue": { "depth": depth, "capacity": capacity },
            "deliveries": {
                "seen": stats.seen,
                "redeliveries": stats.redeliveries,
                "ignored": stats.ignored,
                "unknown_event_types": stats.unknown_event_types,
                "malformed": stats.malformed,
                "bad_signature": stats.bad_signature,
                "too_large": stats.too_large,
                "queue_full": stats.queue_full,
                "remembered_ids": remembered,
            },
            "events_queued": stats.events_queued,
            "last_event": stats.last_event,
        })
    };
    let mut body = serde_json::Map::new();
    body.insert("receiver".to_string(), receiver);
    for (name, section) in &shared.sections {
        body.insert(name.clone(), section());
    }
    answer(StatusCode::OK, Value::Object(body))
}
