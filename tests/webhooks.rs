//! The webhook receiver (`supervisor serve`) as GitHub reaches it: signed deliveries of GitHub's
//! published example payloads (tests/fixtures/webhooks) sent to the router in-process, over
//! loopback, and to the `supervisor serve` binary.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tower::ServiceExt;

use supervisor::events::{
    AuthorAssociation, ColumnChange, Command, Event, Origin, Target, WebhookOptions, WebhookSecret,
};
use supervisor::serve::{MAX_BODY_BYTES, Receiver, ReceiverConfig};

const SECRET: &str = "0123456789abcdef-webhook-secret";

fn secret() -> WebhookSecret {
    WebhookSecret::new(SECRET).unwrap()
}

fn options() -> WebhookOptions {
    WebhookOptions {
        trigger_label: Some("bug".into()),
        ..WebhookOptions::default()
    }
}

fn receiver() -> (Router, mpsc::Receiver<Event>) {
    Receiver::new(ReceiverConfig::new(secret(), options()))
}

/// A published example, as bytes GitHub would send.
fn fixture(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/webhooks")
        .join(name);
    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
}

/// The published issue comment, its body replaced by `body`.
fn comment(body: &str) -> Vec<u8> {
    let mut payload = fixture("issue_comment.created.0.json");
    payload["comment"]["body"] = json!(body);
    serde_json::to_vec(&payload).unwrap()
}

/// A delivery as GitHub sends it: JSON, signed with SHA-256 (and SHA-1, as GitHub also does).
fn delivery(event: &str, id: &str, body: Vec<u8>) -> Request<Body> {
    let signature = secret().sign(&body);
    Request::post("/webhook")
        .header("content-type", "application/json")
        .header("x-github-event", event)
        .header("x-github-delivery", id)
        .header("x-hub-signature-256", signature)
        .header(
            "x-hub-signature",
            "sha1=0000000000000000000000000000000000000000",
        )
        .header("content-length", body.len())
        .body(Body::from(body))
        .unwrap()
}

async fn send(router: &Router, request: Request<Body>) -> (StatusCode, Value) {
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    let body = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (status, body)
}

async fn get(router: &Router, path: &str) -> (StatusCode, Value) {
    send(router, Request::get(path).body(Body::empty()).unwrap()).await
}

fn nothing_queued(events: &mut mpsc::Receiver<Event>) {
    match events.try_recv() {
        Err(mpsc::error::TryRecvError::Empty) => {}
        other => panic!("expected an empty queue, got {other:?}"),
    }
}

#[tokio::test]
async fn a_signed_delivery_queues_its_event() {
    let (router, mut events) = receiver();
    let (status, body) = send(
        &router,
        delivery("issue_comment", "d-1", comment("/supervisor run")),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body, json!({ "queued": 1 }));
    let Ok(Event::Command(command)) = events.try_recv() else {
        panic!("a command event");
    };
    assert_eq!(command.command, Ok(Command::Run));
    assert_eq!(command.target, Target::Issue(1));
    assert_eq!(
        command.origin,
        Origin::Webhook {
            delivery: "d-1".into()
        }
    );
    nothing_queued(&mut events);
}

#[tokio::test]
async fn a_card_move_without_columns_is_queued_for_a_board_lookup() {
    let (router, mut events) = receiver();
    let mut card = fixture("projects_v2_item.edited.0.json");
    // The published example's card holds a draft issue: that is answered and not queued.
    let draft = serde_json::to_vec(&card).unwrap();
    let (status, body) = send(&router, delivery("projects_v2_item", "d-draft", draft)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body["ignored"].as_str().unwrap().contains("DraftIssue"));
    nothing_queued(&mut events);

    card["projects_v2_item"]["content_type"] = json!("Issue");
    card["projects_v2_item"]["content_node_id"] = json!("I_kwDOAWcTxs5ABCDE");
    let body = serde_json::to_vec(&card).unwrap();
    let (status, _) = send(&router, delivery("projects_v2_item", "d-card", body)).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let Ok(Event::CardMoved(moved)) = events.try_recv() else {
        panic!("a card move");
    };
    assert_eq!(moved.columns, ColumnChange::NeedsLookup);
    assert_eq!(moved.issue.node_id, "I_kwDOAWcTxs5ABCDE");
    assert_eq!(moved.moved_by.login, "wolfy1339");
}

#[tokio::test]
async fn bad_signatures_are_401_and_queue_nothing() {
    let (router, mut events) = receiver();
    let body = comment("/supervisor run");

    let mut forged = delivery("issue_comment", "d-1", body.clone());
    let other = WebhookSecret::new("not the secret, but long enough").unwrap();
    forged
        .headers_mut()
        .insert("x-hub-signature-256", other.sign(&body).parse().unwrap());
    let (status, answer) = send(&router, forged).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(answer["error"].as_str().unwrap().contains("does not match"));

    // The signature of another body.
    let mut swapped = delivery("issue_comment", "d-2", body.clone());
    swapped.headers_mut().insert(
        "x-hub-signature-256",
        secret().sign(&comment("/supervisor stop")).parse().unwrap(),
    );
    assert_eq!(send(&router, swapped).await.0, StatusCode::UNAUTHORIZED);

    let mut missing = delivery("issue_comment", "d-3", body.clone());
    missing.headers_mut().remove("x-hub-signature-256");
    missing.headers_mut().remove("x-hub-signature");
    let (status, answer) = send(&router, missing).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .contains("no X-Hub-Signature-256")
    );

    let mut malformed = delivery("issue_comment", "d-4", body.clone());
    malformed
        .headers_mut()
        .insert("x-hub-signature-256", "sha256=zz".parse().unwrap());
    assert_eq!(send(&router, malformed).await.0, StatusCode::UNAUTHORIZED);
    nothing_queued(&mut events);

    // A refused delivery's id is not taken: the genuine one still gets through.
    let (status, _) = send(&router, delivery("issue_comment", "d-1", body)).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert!(events.try_recv().is_ok());
    let (_, status) = get(&router, "/status").await;
    assert_eq!(status["receiver"]["deliveries"]["bad_signature"], 4);
}

#[tokio::test]
async fn a_sha1_signature_alone_is_401() {
    let (router, mut events) = receiver();
    let mut request = delivery("issue_comment", "d-1", comment("/supervisor run"));
    request.headers_mut().remove("x-hub-signature-256");
    let (status, answer) = send(&router, request).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(
        answer["error"].as_str().unwrap().contains("SHA-1"),
        "{answer}"
    );
    nothing_queued(&mut events);
}

#[tokio::test]
async fn bodies_over_25_mb_are_413() {
    let (router, mut events) = receiver();
    // A well-signed comment padded past GitHub's cap.
    let mut payload = fixture("issue_comment.created.0.json");
    payload["comment"]["body"] =
        json!(format!("/supervisor run\n\n{}", "x".repeat(MAX_BODY_BYTES)));
    let body = serde_json::to_vec(&payload).unwrap();
    assert!(body.len() > MAX_BODY_BYTES);

    // Declared too large: refused before the body is read (this one is short and well signed,
    // so only the declaration can refuse it).
    let mut declared = delivery("issue_comment", "d-1", comment("/supervisor run"));
    declared
        .headers_mut()
        .insert("content-length", (MAX_BODY_BYTES + 1).into());
    let (status, _) = send(&router, declared).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);

    // Not declared (as a chunked upload comes): refused once the limit is passed.
    let mut undeclared = delivery("issue_comment", "d-2", body);
    undeclared.headers_mut().remove("content-length");
    let (status, _) = send(&router, undeclared).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    nothing_queued(&mut events);

    // Exactly at the cap is read (and then refused only for its signature here).
    let at_cap = vec![b' '; MAX_BODY_BYTES];
    let mut request = delivery("issue_comment", "d-3", at_cap);
    request.headers_mut().insert(
        "x-hub-signature-256",
        secret().sign(b"other").parse().unwrap(),
    );
    assert_eq!(send(&router, request).await.0, StatusCode::UNAUTHORIZED);
}

/// A body larger than the first MiB memory holds of it waits in a temporary file until its
/// signature is checked, and is read back from there whole: declared or not, it is taken.
#[tokio::test]
async fn a_genuine_delivery_larger_than_memory_holds_is_taken() {
    let (router, mut events) = receiver();
    let text = format!("/supervisor run\n\n{}", "x".repeat(3 * 1024 * 1024));
    for (id, declared) in [("d-1", true), ("d-2", false)] {
        let mut request = delivery("issue_comment", id, comment(&text));
        if !declared {
            request.headers_mut().remove("content-length");
        }
        let (status, answer) = send(&router, request).await;
        assert_eq!(
            status,
            StatusCode::ACCEPTED,
            "declared {declared}: {answer}"
        );
        let Ok(Event::Command(command)) = events.try_recv() else {
            panic!("declared {declared}: a command is queued");
        };
        assert_eq!(command.command, Ok(Command::Run), "declared {declared}");
    }
    let (_, status) = get(&router, "/status").await;
    assert_eq!(
        status["receiver"]["bodies"],
        json!({
            "in_flight": 0,
            "bytes_reserved": 0,
            "bytes_budget": MAX_BODY_BYTES,
            "memory_reserved": 0,
            "memory_budget": 4 * 1024 * 1024,
        })
    );
}

#[tokio::test]
async fn a_redelivery_queues_one_event() {
    let (router, mut events) = receiver();
    let body = comment("/supervisor run");
    let (first, _) = send(&router, delivery("issue_comment", "7c9f-1", body.clone())).await;
    let (again, answer) = send(&router, delivery("issue_comment", "7c9f-1", body.clone())).await;
    assert_eq!(first, StatusCode::ACCEPTED);
    assert_eq!(again, StatusCode::OK, "a redelivery is answered as taken");
    assert_eq!(answer, json!({ "redelivery": "7c9f-1" }));
    assert!(events.try_recv().is_ok());
    nothing_queued(&mut events);
    // Another delivery of the same content is another event.
    let (other, _) = send(&router, delivery("issue_comment", "7c9f-2", body)).await;
    assert_eq!(other, StatusCode::ACCEPTED);
    assert!(events.try_recv().is_ok());
    let (_, status) = get(&router, "/status").await;
    assert_eq!(status["receiver"]["deliveries"]["seen"], 2);
    assert_eq!(status["receiver"]["deliveries"]["redeliveries"], 1);
}

#[tokio::test]
async fn a_strangers_command_is_queued_with_its_author_and_association() {
    let (router, mut events) = receiver();
    let mut payload = fixture("issue_comment.created.0.json");
    payload["comment"]["body"] = json!("/supervisor run");
    payload["comment"]["user"]["login"] = json!("drive-by");
    payload["comment"]["author_association"] = json!("NONE");
    payload["sender"]["login"] = json!("drive-by");
    let body = serde_json::to_vec(&payload).unwrap();
    let (status, _) = send(&router, delivery("issue_comment", "d-1", body)).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let Ok(Event::Command(command)) = events.try_recv() else {
        panic!("a command event");
    };
    assert_eq!(command.author.login, "drive-by");
    assert_eq!(command.author.association, Some(AuthorAssociation::None));
    assert!(!command.author.is_owner_member_or_collaborator());
    assert_eq!(command.sender.login, "drive-by");

    // The published example's author is the repository's owner.
    let (status, _) = send(
        &router,
        delivery("issue_comment", "d-2", comment("/supervisor run")),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let Ok(Event::Command(command)) = events.try_recv() else {
        panic!("a command event");
    };
    assert_eq!(command.author.association, Some(AuthorAssociation::Owner));
    assert!(command.author.is_owner_member_or_collaborator());
}

#[tokio::test]
async fn malformed_json_is_400_and_queues_nothing() {
    let (router, mut events) = receiver();
    let (status, answer) = send(
        &router,
        delivery(
            "issue_comment",
            "d-1",
            b"{\"action\": \"created\", ".to_vec(),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .contains("`issue_comment`"),
        "{answer}"
    );
    let (status, _) = send(&router, delivery("issues", "d-2", b"[]".to_vec())).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    nothing_queued(&mut events);

    // Signed, but sent form-encoded (the other content type GitHub offers).
    let mut form = delivery("issue_comment", "d-3", comment("/supervisor run"));
    form.headers_mut().insert(
        "content-type",
        "application/x-www-form-urlencoded".parse().unwrap(),
    );
    let (status, answer) = send(&router, form).await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .contains("application/json")
    );

    let mut no_event = delivery("issue_comment", "d-4", comment("/supervisor run"));
    no_event.headers_mut().remove("x-github-event");
    assert_eq!(send(&router, no_event).await.0, StatusCode::BAD_REQUEST);
    nothing_queued(&mut events);
}

#[tokio::test]
async fn a_ping_is_answered_and_queues_nothing() {
    let (router, mut events) = receiver();
    let ping = serde_json::to_vec(&fixture("ping.none.0.json")).unwrap();
    let (status, answer) = send(&router, delivery("ping", "d-ping", ping)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(answer, json!({ "queued": 0 }));
    nothing_queued(&mut events);
    let (_, status) = get(&router, "/status").await;
    assert_eq!(status["receiver"]["last_event"]["kind"], "ping");
    assert_eq!(status["receiver"]["last_event"]["delivery"], "d-ping");
}

#[tokio::test]
async fn unknown_events_and_ignored_actions_are_2xx_and_queue_nothing() {
    let (router, mut events) = receiver();
    let body = serde_json::to_vec(&fixture("ping.none.1.json")).unwrap();
    for (i, event) in ["push", "push", "workflow_run"].into_iter().enumerate() {
        let (status, answer) =
            send(&router, delivery(event, &format!("d-{i}"), body.clone())).await;
        assert_eq!(status, StatusCode::OK);
        assert!(
            answer["ignored"].as_str().unwrap().contains(event),
            "{answer}"
        );
    }
    let deleted = serde_json::to_vec(&fixture("issue_comment.deleted.0.json")).unwrap();
    let (status, _) = send(&router, delivery("issue_comment", "d-del", deleted)).await;
    assert_eq!(status, StatusCode::OK);
    nothing_queued(&mut events);
    let (_, status) = get(&router, "/status").await;
    assert_eq!(status["receiver"]["deliveries"]["unknown_event_types"], 3);
    assert_eq!(status["receiver"]["deliveries"]["ignored"], 1);
}

/// A request for `body`, with the headers of a delivery of `signed` declaring `declared` bytes.
fn delivery_with_body(id: &str, signed: &[u8], declared: usize, body: Body) -> Request<Body> {
    let (mut parts, _) = delivery("issue_comment", id, signed.to_vec()).into_parts();
    parts.headers.insert("content-length", declared.into());
    Request::from_parts(parts, body)
}

/// Issue 25: the bodies being received share a memory budget (GitHub's 25 MB cap). A body that
/// does not fit beside them is refused at once, unread, with 503 and Retry-After; one that fits
/// is taken; the budget comes back when a body is answered.
#[tokio::test]
async fn a_body_over_the_budget_is_503_unread_and_the_budget_comes_back() {
    const HELD: usize = 20 * 1024 * 1024;
    let (router, mut events) = receiver();

    // A forged body declared at 20 MiB, held in flight: its piece waits until released.
    let (reading, being_read) = tokio::sync::oneshot::channel();
    let (release, released) = tokio::sync::oneshot::channel::<()>();
    let held_body = Body::from_stream(futures_util::stream::once(async move {
        let _ = reading.send(());
        let _ = released.await;
        Ok::<_, std::io::Error>(axum::body::Bytes::from_static(b"{}"))
    }));
    let held = delivery_with_body("d-held", b"another body", HELD, held_body);
    let in_flight = tokio::spawn({
        let router = router.clone();
        async move { send(&router, held).await }
    });
    being_read.await.expect("the receiver reads the held body");

    // 10 MiB more does not fit: refused without a byte of it read.
    let polled = Arc::new(AtomicBool::new(false));
    let flag = polled.clone();
    let unread = Body::from_stream(futures_util::stream::once(async move {
        flag.store(true, Ordering::SeqCst);
        Ok::<_, std::io::Error>(axum::body::Bytes::from_static(b"{}"))
    }));
    let response = router
        .clone()
        .oneshot(delivery_with_body(
            "d-more",
            b"{}",
            10 * 1024 * 1024,
            unread,
        ))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        response.headers().get("retry-after").map(|v| v.as_bytes()),
        Some(&b"10"[..])
    );
    assert!(!polled.load(Ordering::SeqCst), "its body was never read");

    // A delivery of the usual size fits beside it.
    let (status, _) = send(
        &router,
        delivery("issue_comment", "d-small", comment("/supervisor run")),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert!(events.try_recv().is_ok());
    let (_, body) = get(&router, "/status").await;
    let receiver = &body["receiver"];
    assert_eq!(
        receiver["bodies"],
        json!({
            "in_flight": 1,
            "bytes_reserved": HELD,
            "bytes_budget": MAX_BODY_BYTES,
            // Memory holds at most the first MiB of it; the rest would wait in its file.
            "memory_reserved": 1024 * 1024,
            "memory_budget": 4 * 1024 * 1024,
        })
    );
    assert_eq!(receiver["deliveries"]["busy"], 1);

    release.send(()).unwrap();
    let (status, _) = in_flight.await.unwrap();
    assert_eq!(status, StatusCode::UNAUTHORIZED, "the held body was forged");
    let (_, body) = get(&router, "/status").await;
    assert_eq!(body["receiver"]["bodies"]["in_flight"], 0);
    assert_eq!(body["receiver"]["bodies"]["bytes_reserved"], 0);
    assert_eq!(body["receiver"]["deliveries"]["bad_signature"], 1);
    // The budget is free again: the 10 MiB one is read now (and verified; `{}` is no comment).
    let again = delivery_with_body("d-more", b"{}", 10 * 1024 * 1024, Body::from("{}"));
    assert_eq!(send(&router, again).await.0, StatusCode::BAD_REQUEST);
    nothing_queued(&mut events);
}

/// The log lines of the current thread, one a message.
struct LogLines(mpsc::UnboundedSender<String>);

impl std::io::Write for LogLines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let _ = self
            .0
            .send(String::from_utf8_lossy(buf).trim_end().to_string());
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Issue 25: refusals do not write a line each. The first is logged at once with its reason;
/// the others come as a summary once the interval is over, while the receiver runs on.
#[tokio::test]
async fn refused_deliveries_are_logged_once_then_summarised_each_interval() {
    let (to_log, mut lines) = mpsc::unbounded_channel();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || LogLines(to_log.clone()))
        .with_ansi(false)
        .without_time()
        .finish();
    let _logging = tracing::subscriber::set_default(subscriber);
    let mut config = ReceiverConfig::new(secret(), options());
    config.refusal_log_interval = Duration::from_secs(1);
    let (router, _events) = Receiver::new(config);

    let body = comment("/supervisor run");
    let forged = WebhookSecret::new("not the secret, but long enough")
        .unwrap()
        .sign(&body);
    for i in 0..5 {
        let mut request = delivery("issue_comment", &format!("f-{i}"), body.clone());
        request
            .headers_mut()
            .insert("x-hub-signature-256", forged.parse().unwrap());
        assert_eq!(send(&router, request).await.0, StatusCode::UNAUTHORIZED);
    }
    let mut logged = Vec::new();
    let summary = loop {
        let line = tokio::time::timeout(Duration::from_secs(30), lines.recv())
            .await
            .expect("a summary while the receiver runs")
            .unwrap();
        logged.push(line.clone());
        if line.contains("webhook deliveries refused in the last") {
            break line;
        }
    };
    assert_eq!(logged.len(), 2, "{logged:#?}");
    assert!(
        logged[0].contains("webhook delivery refused (401)")
            && logged[0].contains("does not match the body"),
        "the first is logged at once with its reason: {logged:#?}"
    );
    assert!(summary.contains(" bad signature"), "{summary}");
    let (_, status) = get(&router, "/status").await;
    assert_eq!(status["receiver"]["deliveries"]["bad_signature"], 5);
}

#[tokio::test]
async fn a_full_queue_is_503_and_the_delivery_can_come_again() {
    let mut config = ReceiverConfig::new(secret(), options());
    config.queue_capacity = 0; // raised to the least that holds one comment's commands
    let (router, mut events) = Receiver::new(config);
    let ten = "/supervisor status\n".repeat(10);
    let (status, answer) = send(&router, delivery("issue_comment", "d-1", comment(&ten))).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert_eq!(answer, json!({ "queued": 10 }));
    let (status, answer) = send(
        &router,
        delivery("issue_comment", "d-2", comment("/supervisor run")),
    )
    .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{answer}");
    for _ in 0..10 {
        assert!(events.try_recv().is_ok());
    }
    nothing_queued(&mut events);
    let (status, _) = send(
        &router,
        delivery("issue_comment", "d-2", comment("/supervisor run")),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::ACCEPTED,
        "the redelivery is taken once there is room"
    );
    let Ok(Event::Command(command)) = events.try_recv() else {
        panic!("the redelivered command");
    };
    assert_eq!(command.command, Ok(Command::Run));
}

#[tokio::test]
async fn status_and_health_report_the_receiver_and_added_sections() {
    let config = ReceiverConfig::new(secret(), options())
        .status_section("runs", || json!({ "live": [], "max_concurrent": 2 }));
    let (router, mut events) = Receiver::new(config);
    let (status, body) = get(&router, "/healthz").await;
    assert_eq!((status, body), (StatusCode::OK, json!("ok\n")));

    let labeled = serde_json::to_vec(&fixture("issues.labeled.0.json")).unwrap();
    send(&router, delivery("issues", "d-label", labeled)).await;
    send(
        &router,
        delivery("issue_comment", "d-run", comment("/supervisor run")),
    )
    .await;
    let (status, body) = get(&router, "/status").await;
    assert_eq!(status, StatusCode::OK);
    let receiver = &body["receiver"];
    assert_eq!(receiver["queue"]["depth"], 2);
    assert_eq!(
        receiver["queue"]["capacity"],
        ReceiverConfig::DEFAULT_QUEUE_CAPACITY
    );
    assert_eq!(receiver["deliveries"]["seen"], 2);
    assert_eq!(receiver["events_queued"], 2);
    assert_eq!(receiver["last_event"]["kind"], "command");
    assert_eq!(receiver["last_event"]["delivery"], "d-run");
    assert_eq!(
        receiver["last_event"]["summary"],
        "command `run` on issue #1 in Codertocat/Hello-World by Codertocat (OWNER)"
    );
    assert_eq!(body["runs"], json!({ "live": [], "max_concurrent": 2 }));
    events.recv().await.unwrap();
    let (_, body) = get(&router, "/status").await;
    assert_eq!(body["receiver"]["queue"]["depth"], 1);
}

/// Request → event in the queue, over loopback HTTP as GitHub's deliveries arrive. Prints the
/// figures; asserts only that every delivery arrived.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn figure_time_from_request_to_queued_event() {
    let (router, mut events) = receiver();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/webhook", listener.local_addr().unwrap());
    let server = tokio::spawn(async move { axum::serve(listener, router).await });
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::new();

    const N: usize = 300;
    let body = comment("/supervisor run");
    let mut times = Vec::with_capacity(N);
    for i in 0..N {
        let request = delivery("issue_comment", &format!("bench-{i}"), body.clone());
        let (parts, _) = request.into_parts();
        let request = client
            .post(&url)
            .headers(parts.headers)
            .body(body.clone())
            .build()
            .unwrap();
        let start = Instant::now();
        let response = client.execute(request).await.unwrap();
        let event = tokio::time::timeout(Duration::from_secs(10), events.recv())
            .await
            .expect("the event within 10 s")
            .expect("an event");
        times.push(start.elapsed());
        assert_eq!(response.status().as_u16(), StatusCode::ACCEPTED.as_u16());
        assert!(matches!(event, Event::Command(_)));
    }
    server.abort();
    times.sort();
    let at = |q: f64| times[((N as f64 - 1.0) * q) as usize];
    eprintln!(
        "request → queued event over loopback ({} deliveries of {} bytes): median {:?}, p95 {:?}, max {:?}",
        N,
        body.len(),
        at(0.5),
        at(0.95),
        times[N - 1]
    );
}

// --- the binary -------------------------------------------------------------------------------

mod binary {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::TcpStream;
    use std::process::{Child, Command, Stdio};
    use std::sync::Arc;
    use std::sync::mpsc as std_mpsc;
    use std::time::Duration;

    use supervisor::events::WebhookSecret;

    use super::{SECRET, comment, secret};

    struct Server(Child);

    impl Drop for Server {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    fn settings_dir() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".pi")).unwrap();
        // `serve` runs agents here, so it starts only when their CLIs can run: scripted ones.
        std::fs::write(dir.path().join("agents.script"), "[]").unwrap();
        std::fs::write(
            dir.path().join(".pi/settings.json"),
            r#"{ "supervisor": { "repo": "Codertocat/Hello-World", "projectNumber": 1,
                 "codeowners": ["Codertocat"], "watch": { "commandPrefix": "/supervisor" },
                 "agentBackend": "scripted", "agentScript": "agents.script" } }"#,
        )
        .unwrap();
        dir
    }

    /// The sandbox GitHub `serve` acts on, on its own runtime.
    fn github() -> (tokio::runtime::Runtime, supervisor::sandbox::Sandbox) {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let state = supervisor::sandbox::SandboxState::new("Codertocat", "Hello-World");
        let sandbox = rt
            .block_on(supervisor::sandbox::Sandbox::start(state, 0))
            .unwrap();
        (rt, sandbox)
    }

    fn serve(dir: &std::path::Path, secret_value: Option<&str>) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_supervisor"));
        cmd.args([
            "serve",
            "--webhook-secret-env",
            "TEST_WEBHOOK_SECRET",
            "--port",
            "0",
        ])
        .arg("--repo-root")
        .arg(dir)
        .env_remove("TEST_WEBHOOK_SECRET")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
        if let Some(value) = secret_value {
            cmd.env("TEST_WEBHOOK_SECRET", value);
        }
        cmd
    }

    /// A `supervisor serve` that has said where it listens, acting on the sandbox GitHub.
    struct Started {
        server: Server,
        addr: String,
        /// Its stderr, line by line, from after the address on.
        lines: std_mpsc::Receiver<String>,
        _github: (tokio::runtime::Runtime, supervisor::sandbox::Sandbox),
        _dir: tempfile::TempDir,
    }

    impl Started {
        fn next_line(&self) -> String {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(30))
                .expect("a line within 30 s");
            assert!(
                !line.contains(SECRET),
                "the secret is never printed: {line}"
            );
            line
        }

        /// Stop it with SIGTERM; its exit code and every line it wrote after the address.
        fn stop(self) -> (Option<i32>, Vec<String>) {
            let mut server = self.server;
            let pid = server.0.id() as libc::pid_t;
            assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
            let status = server.0.wait().unwrap();
            // The reader ends at the end of stderr: every line is in the channel.
            let lines: Vec<String> = self.lines.iter().collect();
            (status.code(), lines)
        }

        /// A figure of the `serve` process's memory from `/proc/<pid>/status` (`VmHWM`, its
        /// peak resident memory so far; `RssAnon`; `RssFile`), in MiB.
        fn memory(&self, field: &str) -> f64 {
            let status =
                std::fs::read_to_string(format!("/proc/{}/status", self.server.0.id())).unwrap();
            let kib: u64 = status
                .lines()
                .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
                .and_then(|v| v.trim().strip_suffix("kB"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or_else(|| panic!("{field} in /proc/<pid>/status"));
            kib as f64 / 1024.0
        }

        /// The files the `serve` process holds open that no longer have a name.
        fn unnamed_files(&self) -> Vec<String> {
            let fds = format!("/proc/{}/fd", self.server.0.id());
            std::fs::read_dir(fds)
                .unwrap()
                .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
                .map(|target| target.to_string_lossy().into_owned())
                .filter(|target| target.ends_with(" (deleted)"))
                .collect()
        }
    }

    fn start() -> Started {
        start_with(&[])
    }

    /// [`start`] with more environment variables.
    fn start_with(env: &[(&str, &str)]) -> Started {
        let dir = settings_dir();
        let github = github();
        let mut child = serve(dir.path(), Some(SECRET))
            .env("GITHUB_API_URL", github.1.url())
            .env("GH_TOKEN", "sandbox-token")
            .envs(env.iter().copied())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, lines) = std_mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut started = Started {
            server: Server(child),
            addr: String::new(),
            lines,
            _github: github,
            _dir: dir,
        };
        started.addr = loop {
            let line = started.next_line();
            if let Some(at) = line.find("listening on http://") {
                break line[at + "listening on http://".len()..].trim().to_string();
            }
        };
        started
    }

    /// A `GET`, answered in full.
    fn get(addr: &str, path: &str) -> String {
        let mut stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        answer
    }

    /// The head of a delivery of `len` bytes signed `signature`.
    fn delivery_head(addr: &str, id: &str, signature: &str, len: usize) -> String {
        format!(
            "POST /webhook HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nX-GitHub-Event: issue_comment\r\nX-GitHub-Delivery: {id}\r\nX-Hub-Signature-256: {signature}\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n"
        )
    }

    /// Send a delivery's head and body while reading the answer: a server may answer (and
    /// close) before it has read the body. The answer as far as it came.
    fn deliver(addr: &str, head: &str, body: Arc<Vec<u8>>) -> String {
        let mut stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        let mut writer = stream.try_clone().unwrap();
        let head = head.to_string();
        let sending = std::thread::spawn(move || {
            // A refused body may be cut off: the answer says what happened.
            let _ = writer.write_all(head.as_bytes());
            let _ = writer.write_all(&body);
        });
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer);
        sending.join().unwrap();
        String::from_utf8_lossy(&answer).into_owned()
    }

    fn post(addr: &str, body: &[u8]) -> String {
        let mut stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let head = delivery_head(addr, "cli-1", &secret().sign(body), body.len());
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(body).unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        answer
    }

    #[test]
    fn serve_prints_each_queued_event_and_stops_on_sigterm() {
        let serve = start();
        let answer = post(&serve.addr, &comment("/supervisor run"));
        assert!(answer.starts_with("HTTP/1.1 202"), "{answer}");
        let event = loop {
            let line = serve.next_line();
            if line.starts_with("event: ") {
                break line;
            }
        };
        assert_eq!(
            event,
            "event: command `run` on issue #1 in Codertocat/Hello-World by Codertocat (OWNER)"
        );
        let answer = get(&serve.addr, "/healthz");
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        let (code, _) = serve.stop();
        assert_eq!(code, Some(0));
    }

    /// Issue 25: 64 concurrent 24 MB bodies with a wrong signature. `serve` takes at most its
    /// budget of bodies, keeps no more than the first MiB of each in memory (the rest in an
    /// unnamed temporary file, never read back), refuses the rest at once (503 with
    /// Retry-After), answers `/healthz` throughout, and takes a genuine delivery afterwards.
    /// Its peak RSS stays within the issue's 64 MB.
    #[test]
    fn a_flood_of_large_forged_bodies_is_bounded_in_memory() {
        const FLOOD: usize = 64;
        const BODY: usize = 24 * 1024 * 1024;
        const PEAK_RSS_MIB: f64 = 64e6 / (1024.0 * 1024.0);
        let serve = start();
        let addr = serve.addr.clone();
        let body = Arc::new(vec![b' '; BODY]);
        // Well formed, but the signature of another body.
        let forged = secret().sign(b"another body");

        // One forged body held in flight: all but its last 4 MB sent. A refused body is not
        // read, so a sender could not get 20 MB into the kernel's buffers: the write ending
        // means the server took this body and is reading it.
        let mut held = TcpStream::connect(&addr).unwrap();
        held.set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        held.write_all(delivery_head(&addr, "held", &forged, BODY).as_bytes())
            .unwrap();
        held.write_all(&body[..BODY - 4 * 1024 * 1024]).unwrap();

        let flood: Vec<_> = (1..FLOOD)
            .map(|i| {
                let (addr, body) = (addr.clone(), body.clone());
                let head = delivery_head(&addr, &format!("flood-{i}"), &forged, BODY);
                std::thread::spawn(move || deliver(&addr, &head, body))
            })
            .collect();
        let health = get(&addr, "/healthz");
        assert!(
            health.starts_with("HTTP/1.1 200"),
            "during the flood: {health}"
        );
        let answers: Vec<String> = flood.into_iter().map(|t| t.join().unwrap()).collect();
        let health = get(&addr, "/healthz");
        assert!(
            health.starts_with("HTTP/1.1 200"),
            "with a body in flight: {health}"
        );
        // Far more of it than memory holds has arrived: the rest is in a file with no name.
        assert_eq!(
            serve.unnamed_files().len(),
            1,
            "{:?}",
            serve.unnamed_files()
        );

        held.write_all(&body[BODY - 4 * 1024 * 1024..]).unwrap();
        let mut answer = String::new();
        held.read_to_string(&mut answer).unwrap();
        assert!(
            answer.starts_with("HTTP/1.1 401"),
            "the held body: {answer}"
        );
        assert_eq!(
            serve.unnamed_files(),
            Vec::<String>::new(),
            "its file is gone with it"
        );

        let peak = serve.memory("VmHWM");
        let status = |answer: &String| answer.get(..12).unwrap_or(answer).to_string();
        let count = |code: &str| answers.iter().filter(|a| status(a) == code).count();
        // Most of what is not the bodies is the debug binary's code, mapped in (`RssFile`).
        let figures = format!(
            "{FLOOD} concurrent forged bodies of {BODY} bytes: {} answered 401, {} answered 503; serve's peak RSS (VmHWM) {peak:.1} MiB (now {:.1} MiB anonymous, {:.1} MiB file-backed)",
            count("HTTP/1.1 401") + 1,
            count("HTTP/1.1 503"),
            serve.memory("RssAnon"),
            serve.memory("RssFile"),
        );
        eprintln!("{figures}");
        assert!(peak <= PEAK_RSS_MIB, "over 64 MB: {figures}");
        for answer in &answers {
            match status(answer).as_str() {
                "HTTP/1.1 401" => {}
                "HTTP/1.1 503" => assert!(
                    answer.to_ascii_lowercase().contains("\r\nretry-after: "),
                    "{answer}"
                ),
                _ => panic!("a forged delivery is refused with 401 or 503: {answer:?}"),
            }
        }

        let answer = post(&addr, &comment("/supervisor run"));
        assert!(
            answer.starts_with("HTTP/1.1 202"),
            "after the flood: {answer}"
        );
        let (code, _) = serve.stop();
        assert_eq!(code, Some(0));
    }

    /// A body larger than memory holds of it, with no temporary directory to wait in, is
    /// refused with 503 and Retry-After (GitHub redelivers it) and logged with the reason; a
    /// delivery of the usual size is held in memory and taken.
    #[test]
    fn a_large_body_with_nowhere_to_wait_is_503() {
        let serve = start_with(&[("TMPDIR", "/nonexistent/supervisor-webhooks-test")]);
        let addr = serve.addr.clone();
        let large = comment(&format!(
            "/supervisor run\n\n{}",
            "x".repeat(2 * 1024 * 1024)
        ));
        let head = delivery_head(&addr, "large", &secret().sign(&large), large.len());
        let answer = deliver(&addr, &head, Arc::new(large));
        assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
        assert!(
            answer
                .to_ascii_lowercase()
                .contains("\r\nretry-after: 10\r\n"),
            "{answer}"
        );
        let answer = post(&addr, &comment("/supervisor run"));
        assert!(answer.starts_with("HTTP/1.1 202"), "{answer}");
        let status = get(&addr, "/status");
        assert!(status.contains("\"unstored\":1"), "{status}");
        let (code, lines) = serve.stop();
        assert_eq!(code, Some(0));
        assert!(
            lines
                .iter()
                .any(|l| l.contains("(503): the body could not be stored in a temporary file")),
            "{lines:#?}"
        );
    }

    /// Issue 25: refused deliveries do not grow the log a line each. The first is logged at
    /// once; the rest are counted in a summary (at the latest when `serve` stops).
    #[test]
    fn a_flood_of_bad_signatures_is_summarised_in_the_log() {
        const FLOOD: usize = 200;
        let serve = start();
        let body = comment("/supervisor run");
        let forged = WebhookSecret::new("not the secret, but long enough")
            .unwrap()
            .sign(&body);
        for i in 0..FLOOD {
            let head = delivery_head(&serve.addr, &format!("f-{i}"), &forged, body.len());
            let answer = deliver(&serve.addr, &head, Arc::new(body.clone()));
            assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
        }
        let status = get(&serve.addr, "/status");
        assert!(
            status.contains(&format!("\"bad_signature\":{FLOOD}")),
            "the counter stays exact: {status}"
        );
        let (code, lines) = serve.stop();
        assert_eq!(code, Some(0));
        let refusals: Vec<&String> = lines.iter().filter(|l| l.contains("refused")).collect();
        assert!(
            refusals.len() <= 2,
            "{} log lines about refusals: {refusals:#?}",
            refusals.len()
        );
        assert!(
            refusals
                .iter()
                .any(|l| l.contains(&format!(": {FLOOD} bad signature"))),
            "a summary names the count: {refusals:#?}"
        );
    }

    #[test]
    fn a_missing_or_short_secret_is_a_usage_error() {
        let dir = settings_dir();
        let out = serve(dir.path(), None).output().unwrap();
        assert_eq!(out.status.code(), Some(2));
        let text = String::from_utf8_lossy(&out.stderr);
        assert!(text.contains("TEST_WEBHOOK_SECRET is not set"), "{text}");

        let out = serve(dir.path(), Some("short-secret")).output().unwrap();
        assert_eq!(out.status.code(), Some(2));
        let text = String::from_utf8_lossy(&out.stderr);
        assert!(text.contains("12 bytes long"), "{text}");
        assert!(text.contains("at least 16"), "{text}");
        assert!(
            !text.contains("short-secret"),
            "the secret is never printed: {text}"
        );
    }
}
