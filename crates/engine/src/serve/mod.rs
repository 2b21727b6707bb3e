//! The webhook receiver of `supervisor serve`: `POST /webhook` verifies a delivery's signature
//! while its body arrives, refuses oversized, slow and (over a memory budget) surplus bodies,
//! recognises redeliveries, reads the payload into [`Event`]s and puts them on a bounded queue,
//! answering at once. It never does work on the request path: whatever holds the queue's
//! receiving end (the scheduler) does. `GET /healthz` answers while it serves; `GET /status`
//! reports the queue, the deliveries, the bodies being received and the last event, plus any
//! sections the queue's consumer adds.

mod body;
pub mod dashboard;
mod deliveries;
mod refusals;

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

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
use body::{BodyBudget, IN_MEMORY_ALL, IN_MEMORY_EACH, Unread};
use deliveries::RecentDeliveries;
use refusals::{Refusal, RefusalLog};

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
pub(crate) type StatusSection = Arc<dyn Fn() -> Value + Send + Sync>;

/// How the receiver is set up.
pub struct ReceiverConfig {
    pub(crate) secret: WebhookSecret,
    pub(crate) webhook: WebhookOptions,
    /// Events the queue holds before deliveries are refused (503) until the consumer catches up.
    pub queue_capacity: usize,
    /// `X-GitHub-Delivery` ids remembered to recognise redeliveries.
    pub(crate) remembered_deliveries: usize,
    /// Bodies larger than this are refused (413).
    pub(crate) max_body_bytes: usize,
    /// Room for the bodies being received at once, in bytes: each reserves its declared
    /// length (`max_body_bytes` when it declares none) until it is answered, and one that does
    /// not fit is refused unread (503 with `Retry-After`). Never less than `max_body_bytes`.
    /// Until its signature is known, a body is held in memory only while it is within 1 MiB and
    /// those so held come to at most 4 MiB; any other waits in an unnamed temporary file (in
    /// `std::env::temp_dir()`).
    pub(crate) body_budget_bytes: usize,
    /// Time for a body to arrive once its headers have; a slower one is refused (408).
    pub(crate) body_timeout: Duration,
    /// Refusals of deliveries not known to be GitHub's are logged as one summary line per
    /// this interval (the first of a kind after a quiet interval at once); at least a second.
    pub refusal_log_interval: Duration,
    sections: Vec<(String, StatusSection)>,
}

impl ReceiverConfig {
    pub const DEFAULT_QUEUE_CAPACITY: usize = 1024;
    pub(crate) const DEFAULT_REMEMBERED_DELIVERIES: usize = 10_000;
    /// One body of GitHub's largest size, or many of the small ones deliveries usually are.
    pub(crate) const DEFAULT_BODY_BUDGET_BYTES: usize = MAX_BODY_BYTES;
    /// GitHub gives up on a delivery after 10 seconds.
    pub(crate) const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(10);
    pub(crate) const DEFAULT_REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(60);

    pub fn new(secret: WebhookSecret, webhook: WebhookOptions) -> ReceiverConfig {
        ReceiverConfig {
            secret,
            webhook,
            queue_capacity: Self::DEFAULT_QUEUE_CAPACITY,
            remembered_deliveries: Self::DEFAULT_REMEMBERED_DELIVERIES,
            max_body_bytes: MAX_BODY_BYTES,
            body_budget_bytes: Self::DEFAULT_BODY_BUDGET_BYTES,
            body_timeout: Self::DEFAULT_BODY_TIMEOUT,
            refusal_log_interval: Self::DEFAULT_REFUSAL_LOG_INTERVAL,
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
    /// not queued). Made within a Tokio runtime, it logs refusal summaries on a timer; outside
    /// one, at the next refusal after each interval and when it is dropped.
    // Made together, the two ends are the whole receiver: no other value is needed.
    #[allow(clippy::new_ret_no_self)]
    pub fn new(config: ReceiverConfig) -> (Router, mpsc::Receiver<Event>) {
        // A comment holds at most this many commands, all queued or none.
        let capacity = config
            .queue_capacity
            .max(crate::events::MAX_COMMANDS_PER_COMMENT);
        let (queue, events) = mpsc::channel(capacity);
        // A timer needs a period.
        let refusal_log_interval = config.refusal_log_interval.max(Duration::from_secs(1));
        let shared = Arc::new(Shared {
            secret: config.secret,
            webhook: config.webhook,
            max_body_bytes: config.max_body_bytes,
            bodies: BodyBudget::new(
                config.body_budget_bytes.max(config.max_body_bytes),
                IN_MEMORY_EACH,
                IN_MEMORY_ALL,
            ),
            body_timeout: config.body_timeout,
            queue,
            deliveries: Mutex::new(RecentDeliveries::new(config.remembered_deliveries)),
            stats: Mutex::new(Stats::default()),
            refusals: Mutex::new(RefusalLog::new(refusal_log_interval, Instant::now())),
            sections: config.sections,
            started_at: chrono::Utc::now(),
        });
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(summarise_refusals(
                Arc::downgrade(&shared),
                refusal_log_interval,
            ));
        }
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
    bodies: BodyBudget,
    body_timeout: Duration,
    queue: mpsc::Sender<Event>,
    deliveries: Mutex<RecentDeliveries>,
    stats: Mutex<Stats>,
    refusals: Mutex<RefusalLog>,
    sections: Vec<(String, StatusSection)>,
    started_at: chrono::DateTime<chrono::Utc>,
}

/// Log the summary of each interval's refusals, until the receiver is gone.
async fn summarise_refusals(shared: Weak<Shared>, every: Duration) {
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    loop {
        ticks.tick().await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let summary = shared.refusals().tick(Instant::now());
        if let Some(summary) = summary {
            tracing::warn!("{summary}");
        }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        let refusals = self.refusals.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some(summary) = refusals.finish(Instant::now()) {
            tracing::warn!("{summary}");
        }
    }
}

impl Shared {
    fn stats(&self) -> MutexGuard<'_, Stats> {
        // The counters stay meaningful even if a holder panicked.
        self.stats.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn deliveries(&self) -> MutexGuard<'_, RecentDeliveries> {
        self.deliveries.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn refusals(&self) -> MutexGuard<'_, RefusalLog> {
        self.refusals.lock().unwrap_or_else(|e| e.into_inner())
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
    /// Refused unread: the body budget was taken.
    busy: u64,
    too_slow: u64,
    unreadable: u64,
    /// Bodies that could not be kept in, or read back from, their temporary file.
    unstored: u64,
    queue_full: u64,
    /// Unknown event types already logged: each is logged once.
    unknown_logged: HashSet<String>,
    last_event: Option<Value>,
}

/// Count a delivery answered with `outcome` in the metrics.
fn delivered(outcome: &str) {
    crate::metrics::metrics().delivery(outcome);
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
    let declared = match declared.map(usize::try_from) {
        Some(Ok(n)) if n <= shared.max_body_bytes => Some(n),
        Some(_) => return too_large(&shared),
        None => None,
    };
    // Room for the body before a byte of it is read; held until the answer is made.
    let Some(reserved) = shared
        .bodies
        .reserve(declared.unwrap_or(shared.max_body_bytes))
    else {
        return busy(&shared);
    };
    let mut verifier = signature.verifier(&shared.secret);
    let body = match body::read(
        body,
        &mut verifier,
        shared.max_body_bytes,
        declared,
        reserved.in_memory(),
        shared.body_timeout,
    )
    .await
    {
        Ok(body) => body,
        Err(Unread::TooLarge) => return too_large(&shared),
        Err(Unread::TooSlow) => {
            let secs = shared.body_timeout.as_secs_f64();
            return refused(
                &shared,
                Refusal::TooSlow,
                StatusCode::REQUEST_TIMEOUT,
                format!("the body did not arrive within {secs} s"),
            );
        }
        Err(Unread::Broken(e)) => {
            return refused(
                &shared,
                Refusal::Unreadable,
                StatusCode::BAD_REQUEST,
                format!("the body could not be read: {e}"),
            );
        }
        Err(Unread::Unstored(e)) => {
            let response = refused(
                &shared,
                Refusal::Unstored,
                StatusCode::SERVICE_UNAVAILABLE,
                format!("the body could not be stored in a temporary file: {e}"),
            );
            return retry_later(&shared, response);
        }
    };
    if let Err(e) = verifier.finish() {
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
        delivered("malformed");
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
        delivered("malformed");
        tracing::warn!("webhook delivery refused: no X-GitHub-Event header");
        return refuse(StatusCode::BAD_REQUEST, "no X-GitHub-Event header");
    };
    let delivery = match headers.get("x-github-delivery").map(|v| v.to_str()) {
        None => None,
        Some(Ok(id)) if !id.is_empty() && id.len() <= MAX_DELIVERY_ID_BYTES => Some(id),
        Some(_) => {
            shared.stats().malformed += 1;
            delivered("malformed");
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
            delivered("redelivery");
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
    let response = match body.into_bytes().await {
        Ok(body) => take(&shared, event_type, delivery.unwrap_or(""), &body),
        Err(e) => {
            shared.stats().unstored += 1;
            delivered("unstored");
            tracing::error!(
                delivery,
                event = event_type,
                "delivery not taken: its body could not be read back from its temporary file: {e}"
            );
            refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                "the body could not be read back: redeliver it later",
            )
        }
    };
    if !response.status().is_success() {
        // Only what was answered 2xx counts as taken: a redelivery of it gets another chance.
        if let Some(id) = delivery {
            shared.deliveries().forget(id);
        }
    }
    response
}

fn unauthorized(shared: &Shared, e: SignatureError) -> Response {
    refused(
        shared,
        Refusal::BadSignature,
        StatusCode::UNAUTHORIZED,
        e.to_string(),
    )
}

fn too_large(shared: &Shared) -> Response {
    let limit = shared.max_body_bytes;
    refused(
        shared,
        Refusal::TooLarge,
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("bodies over {limit} bytes are refused"),
    )
}

/// Over the body budget: refused unread, to come again once the bodies now being received are
/// answered, which takes at most their time.
fn busy(shared: &Shared) -> Response {
    let secs = retry_after(shared);
    let response = refused(
        shared,
        Refusal::Busy,
        StatusCode::SERVICE_UNAVAILABLE,
        format!("too many deliveries are being received at once: retry after {secs} s"),
    );
    retry_later(shared, response)
}

/// Seconds until the bodies being received now have been answered.
fn retry_after(shared: &Shared) -> u64 {
    shared.body_timeout.as_secs().max(1)
}

/// `response` with a `Retry-After` of [`retry_after`].
fn retry_later(shared: &Shared, mut response: Response) -> Response {
    response.headers_mut().insert(
        header::RETRY_AFTER,
        header::HeaderValue::from(retry_after(shared)),
    );
    response
}

/// Refuse a delivery not known to be GitHub's: counted exactly, logged as [`RefusalLog`] says.
fn refused(shared: &Shared, kind: Refusal, status: StatusCode, message: String) -> Response {
    delivered(kind.outcome());
    {
        let mut stats = shared.stats();
        *match kind {
            Refusal::BadSignature => &mut stats.bad_signature,
            Refusal::TooLarge => &mut stats.too_large,
            Refusal::Busy => &mut stats.busy,
            Refusal::TooSlow => &mut stats.too_slow,
            Refusal::Unreadable => &mut stats.unreadable,
            Refusal::Unstored => &mut stats.unstored,
        } += 1;
    }
    let (to_log, every) = {
        let mut refusals = shared.refusals();
        (refusals.refused(kind, Instant::now()), refusals.interval())
    };
    if let Some(summary) = to_log.summary {
        tracing::warn!("{summary}");
    }
    if to_log.at_once {
        tracing::warn!(
            "webhook delivery refused ({}): {message} (more refusals like it are summarised every {} s)",
            status.as_u16(),
            every.as_secs()
        );
    }
    refuse(status, message)
}

/// Read a verified delivery and queue its events.
fn take(shared: &Shared, event_type: &str, delivery: &str, body: &[u8]) -> Response {
    let events = match parse_webhook(event_type, delivery, body, &shared.webhook) {
        Ok(Parsed::Events(events)) => events,
        Ok(Parsed::Ignored(reason)) => {
            shared.stats().ignored += 1;
            delivered("ignored");
            tracing::info!(delivery, event = event_type, "ignored: {reason}");
            return answer(StatusCode::OK, json!({ "ignored": reason }));
        }
        Ok(Parsed::UnknownEventType) => {
            let mut stats = shared.stats();
            stats.unknown_event_types += 1;
            delivered("unknown-event");
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
            delivered("malformed");
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
        delivered("ping");
        return answer(StatusCode::OK, json!({ "queued": 0 }));
    }
    let permits = match shared.queue.try_reserve_many(work.len()) {
        Ok(permits) => permits,
        Err(e) => {
            shared.stats().queue_full += 1;
            delivered("queue-full");
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
    delivered("queued");
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
    let bodies = &shared.bodies;
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
                "busy": stats.busy,
                "too_slow": stats.too_slow,
                "unreadable": stats.unreadable,
                "unstored": stats.unstored,
                "queue_full": stats.queue_full,
                "remembered_ids": remembered,
            },
            "bodies": {
                "in_flight": bodies.bodies(),
                "bytes_reserved": bodies.reserved(),
                "bytes_budget": bodies.total(),
                "memory_reserved": bodies.in_memory_reserved(),
                "memory_budget": bodies.in_memory_all(),
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
