//! HTTP GET of JSON documents (the npm registry) through one pooled reqwest client: gzip, rustls on
//! ring with the system's root certificates ([`crate::tls`]), at most a few redirects and never from
//! https to http.

use std::sync::OnceLock;
use std::time::Duration;

use reqwest::redirect::{Attempt, Policy};

/// Largest document read (full npm packuments of busy packages run to tens of MB).
const MAX_BODY: usize = 128 * 1024 * 1024;
const MAX_REDIRECTS: usize = 3;

/// The client every lookup shares, so connections (and TLS sessions) to the registry are reused.
fn client() -> Result<&'static reqwest::Client, String> {
    static CLIENT: OnceLock<Result<reqwest::Client, String>> = OnceLock::new();
    CLIENT
        .get_or_init(build_client)
        .as_ref()
        .map_err(Clone::clone)
}

fn build_client() -> Result<reqwest::Client, String> {
    let tls = crate::tls::client_config()?;
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .gzip(true)
        .redirect(Policy::custom(redirect))
        .user_agent(concat!("supervisor/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| format!("the HTTP client could not be built: {}", error_chain(&e)))
}

fn redirect(attempt: Attempt<'_>) -> reqwest::redirect::Action {
    match refuse_redirect(attempt.url(), attempt.previous()) {
        Some(why) => attempt.error(why),
        None => attempt.follow(),
    }
}

/// Why the redirect to `next` is not followed (`previous`: the URLs requested so far, the one that
/// redirected last): more than [`MAX_REDIRECTS`], or plain http once on https.
fn refuse_redirect(next: &reqwest::Url, previous: &[reqwest::Url]) -> Option<String> {
    if next.scheme() != "https" && previous.iter().any(|u| u.scheme() == "https") {
        Some(format!(
            "refusing the redirect from https to {next}: the answer could be read or changed on the way"
        ))
    } else if previous.len() > MAX_REDIRECTS {
        Some(format!("more than {MAX_REDIRECTS} redirects"))
    } else {
        None
    }
}

/// GET `url` and parse the body as JSON. Errors are sentences naming what failed.
pub(crate) async fn get_json(url: &str, timeout: Duration) -> Result<serde_json::Value, String> {
    let client = client()?;
    let parsed =
        reqwest::Url::parse(url).map_err(|e| format!("`{url}` is not a valid URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!("`{url}` is neither an http nor an https URL"));
    }
    let failed = |e: reqwest::Error| {
        if e.is_timeout() {
            format!("{url} did not answer within {} s", timeout.as_secs())
        } else if e.is_connect() {
            format!("{url} could not be reached: {}", error_chain(&e))
        } else {
            format!("{url} could not be read: {}", error_chain(&e))
        }
    };
    let mut response = client
        .get(parsed)
        .header(reqwest::header::ACCEPT, "application/json")
        .timeout(timeout)
        .send()
        .await
        .map_err(failed)?;
    let status = response.status();
    if status != reqwest::StatusCode::OK {
        return Err(format!("{url} answered HTTP {}", status.as_u16()));
    }
    if response
        .content_length()
        .is_some_and(|n| n > MAX_BODY as u64)
    {
        return Err(format!("{url} is larger than {} MB", MAX_BODY >> 20));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(failed)? {
        if body.len() + chunk.len() > MAX_BODY {
            return Err(format!("{url} is larger than {} MB", MAX_BODY >> 20));
        }
        body.extend_from_slice(&chunk);
    }
    serde_json::from_slice(&body).map_err(|e| format!("{url} did not answer with JSON: {e}"))
}

/// The error and its causes, `: `-separated (reqwest's own text stops at the outermost).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::*;

    /// `{"name":"left-pad","ok":true}`, gzip-compressed.
    const GZIPPED: [u8; 49] = [
        0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0xab, 0x56, 0xca, 0x4b, 0xcc,
        0x4d, 0x55, 0xb2, 0x52, 0xca, 0x49, 0x4d, 0x2b, 0xd1, 0x2d, 0x48, 0x4c, 0x51, 0xd2, 0x51,
        0xca, 0xcf, 0x56, 0xb2, 0x2a, 0x29, 0x2a, 0x4d, 0xad, 0x05, 0x00, 0xa0, 0x2c, 0x0f, 0x45,
        0x1d, 0x00, 0x00, 0x00,
    ];

    /// What the test server saw.
    #[derive(Default)]
    struct Seen {
        connections: usize,
        /// Request line and headers of each request, lower-cased.
        requests: Vec<String>,
    }

    /// A keep-alive HTTP/1.1 server on loopback: `/gz` answers gzipped JSON when asked for gzip,
    /// `/hop/N` redirects to `/hop/N-1` and `/hop/0` to `/gz`, `/loop` redirects to itself.
    async fn serve() -> (String, Arc<Mutex<Seen>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Seen::default()));
        let shared = Arc::clone(&seen);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                shared.lock().unwrap().connections += 1;
                tokio::spawn(connection(stream, Arc::clone(&shared)));
            }
        });
        (base, seen)
    }

    async fn connection(mut stream: TcpStream, seen: Arc<Mutex<Seen>>) {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                match stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
                continue;
            };
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            buf.drain(..end + 4);
            seen.lock().unwrap().requests.push(head.clone());
            let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
            let gzip = head.contains("accept-encoding: gzip");
            let (status, headers, body): (&str, String, Vec<u8>) = if path == "/gz" && gzip {
                (
                    "200 OK",
                    "content-encoding: gzip\r\ncontent-type: application/json\r\n".into(),
                    GZIPPED.to_vec(),
                )
            } else if path == "/gz" {
                ("406 Not Acceptable", String::new(), Vec::new())
            } else if let Some(n) = path
                .strip_prefix("/hop/")
                .and_then(|n| n.parse::<u32>().ok())
            {
                let next = if n == 0 {
                    "/gz".to_string()
                } else {
                    format!("/hop/{}", n - 1)
                };
                ("302 Found", format!("location: {next}\r\n"), Vec::new())
            } else if path == "/loop" {
                ("302 Found", "location: /loop\r\n".into(), Vec::new())
            } else {
                ("404 Not Found", String::new(), Vec::new())
            };
            let response = format!(
                "HTTP/1.1 {status}\r\n{headers}content-length: {}\r\nconnection: keep-alive\r\n\r\n",
                body.len()
            );
            if stream.write_all(response.as_bytes()).await.is_err()
                || stream.write_all(&body).await.is_err()
            {
                return;
            }
        }
    }

    const TIMEOUT: Duration = Duration::from_secs(10);

    #[tokio::test]
    async fn one_pooled_connection_and_gzip() {
        let (base, seen) = serve().await;
        for _ in 0..3 {
            let doc = get_json(&format!("{base}/gz"), TIMEOUT).await.unwrap();
            assert_eq!(doc["name"], "left-pad");
            assert_eq!(doc["ok"], true);
        }
        let seen = seen.lock().unwrap();
        assert_eq!(seen.requests.len(), 3);
        assert!(
            seen.requests
                .iter()
                .all(|r| r.contains("accept-encoding: gzip")),
            "{:?}",
            seen.requests
        );
        assert_eq!(seen.connections, 1, "the connection is reused");
    }

    #[tokio::test]
    async fn redirects_are_followed_up_to_a_limit() {
        let (base, _seen) = serve().await;
        let doc = get_json(&format!("{base}/hop/2"), TIMEOUT).await.unwrap();
        assert_eq!(doc["name"], "left-pad");
        let err = get_json(&format!("{base}/loop"), TIMEOUT)
            .await
            .unwrap_err();
        assert!(err.contains("more than 3 redirects"), "{err}");
        let err = get_json(&format!("{base}/missing"), TIMEOUT)
            .await
            .unwrap_err();
        assert!(err.ends_with("answered HTTP 404"), "{err}");
    }

    #[test]
    fn a_redirect_from_https_to_http_is_refused() {
        let url = |s: &str| reqwest::Url::parse(s).unwrap();
        let why = refuse_redirect(
            &url("http://registry.example/left-pad"),
            &[url("https://registry.example/left-pad")],
        )
        .expect("a downgrade is refused");
        assert!(
            why.contains("from https to http://registry.example/left-pad"),
            "{why}"
        );
        // Anywhere in the chain.
        assert!(
            refuse_redirect(
                &url("http://c.example/x"),
                &[url("https://a.example/x"), url("https://b.example/x")],
            )
            .is_some()
        );
        assert_eq!(
            refuse_redirect(&url("https://b.example/x"), &[url("http://a.example/x")]),
            None,
            "an upgrade is followed"
        );
        assert_eq!(
            refuse_redirect(&url("http://b.example/x"), &[url("http://a.example/x")]),
            None
        );
    }

    #[tokio::test]
    async fn bad_urls_are_named() {
        let err = get_json("ftp://registry.example/x", TIMEOUT)
            .await
            .unwrap_err();
        assert!(err.contains("neither an http nor an https URL"), "{err}");
        let err = get_json("not a url", TIMEOUT).await.unwrap_err();
        assert!(err.contains("is not a valid URL"), "{err}");
    }
}
