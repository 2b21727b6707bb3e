//! The webhook receiver (`supervisor serve`) as GitHub reaches it: signed deliveries of GitHub's
//! published example payloads (tests/fixtures/webhooks) sent to the router in-process, over
//! loopback, and to the `supervisor serve` binary.

use std::path::Path;
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
    use std::sync::mpsc as std_mpsc;
    use std::time::Duration;

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

    fn post(addr: &str, body: &[u8]) -> String {
        let mut stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let head = format!(
            "POST /webhook HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nX-GitHub-Event: issue_comment\r\nX-GitHub-Delivery: cli-1\r\nX-Hub-Signature-256: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            secret().sign(body),
            body.len()
        );
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(body).unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        answer
    }

    #[test]
    fn serve_prints_each_queued_event_and_stops_on_sigterm() {
        let dir = settings_dir();
        let (_rt, github) = github();
        let mut child = serve(dir.path(), Some(SECRET))
            .env("GITHUB_API_URL", github.url())
            .env("GH_TOKEN", "sandbox-token")
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let server = Server(child);
        let (tx, rx) = std_mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let next = || {
            rx.recv_timeout(Duration::from_secs(30))
                .expect("a line within 30 s")
        };
        let addr = loop {
            let line = next();
            assert!(
                !line.contains(SECRET),
                "the secret is never printed: {line}"
            );
            if let Some(at) = line.find("listening on http://") {
                break line[at + "listening on http://".len()..].trim().to_string();
            }
        };
        let answer = post(&addr, &comment("/supervisor run"));
        assert!(answer.starts_with("HTTP/1.1 202"), "{answer}");
        let event = loop {
            let line = next();
            assert!(
                !line.contains(SECRET),
                "the secret is never printed: {line}"
            );
            if line.starts_with("event: ") {
                break line;
            }
        };
        assert_eq!(
            event,
            "event: command `run` on issue #1 in Codertocat/Hello-World by Codertocat (OWNER)"
        );
        let mut health = TcpStream::connect(&addr).unwrap();
        health
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut answer = String::new();
        health.read_to_string(&mut answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");

        let mut server = server;
        let pid = server.0.id() as libc::pid_t;
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
        let status = server.0.wait().unwrap();
        assert_eq!(status.code(), Some(0));
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
