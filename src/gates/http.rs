//! A small HTTP GET for JSON documents (the npm registry), on the hyper stack octocrab already brings.

use std::time::Duration;

use http_body_util::{BodyExt, Empty, Limited};
use hyper::body::Bytes;
use hyper::{Request, StatusCode, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

/// Largest document read (full npm packuments of busy packages run to tens of MB).
const MAX_BODY: usize = 128 * 1024 * 1024;
const MAX_REDIRECTS: usize = 3;

/// GET `url` and parse the body as JSON. Errors are sentences naming what failed.
pub async fn get_json(url: &str, timeout: Duration) -> Result<serde_json::Value, String> {
    match tokio::time::timeout(timeout, get_following_redirects(url)).await {
        Ok(Ok(bytes)) => serde_json::from_slice(&bytes)
            .map_err(|e| format!("{url} did not answer with JSON: {e}")),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(format!(
            "{url} did not answer within {} s",
            timeout.as_secs()
        )),
    }
}

async fn get_following_redirects(url: &str) -> Result<Bytes, String> {
    let mut current = url.to_string();
    for _ in 0..=MAX_REDIRECTS {
        let uri: Uri = current
            .parse()
            .map_err(|e| format!("`{current}` is not a valid URL: {e}"))?;
        let (status, location, body) = match uri.scheme_str() {
            Some("http") => send(Client::builder(TokioExecutor::new()).build_http(), uri).await?,
            Some("https") => {
                let https = hyper_rustls::HttpsConnectorBuilder::new()
                    .with_native_roots()
                    .map_err(|e| format!("no TLS root certificates available: {e}"))?
                    .https_only()
                    .enable_http1()
                    .build();
                send(Client::builder(TokioExecutor::new()).build(https), uri).await?
            }
            _ => return Err(format!("`{current}` is neither an http nor an https URL")),
        };
        if status.is_redirection() {
            let Some(next) = location else {
                return Err(format!("{current} redirected without a Location"));
            };
            current = if next.starts_with('/') {
                let base: Uri = current.parse().map_err(|e| format!("{e}"))?;
                format!(
                    "{}://{}{next}",
                    base.scheme_str().unwrap_or("https"),
                    base.authority().map(|a| a.as_str()).unwrap_or_default()
                )
            } else {
                next
            };
            continue;
        }
        if status == StatusCode::OK {
            return Ok(body);
        }
        return Err(format!("{current} answered HTTP {}", status.as_u16()));
    }
    Err(format!("{url} redirected more than {MAX_REDIRECTS} times"))
}

async fn send<C>(
    client: Client<C, Empty<Bytes>>,
    uri: Uri,
) -> Result<(StatusCode, Option<String>, Bytes), String>
where
    C: hyper_util::client::legacy::connect::Connect + Clone + Send + Sync + 'static,
{
    let shown = uri.to_string();
    let request = Request::get(uri)
        .header("accept", "application/json")
        .header(
            "user-agent",
            concat!("supervisor/", env!("CARGO_PKG_VERSION")),
        )
        .body(Empty::<Bytes>::new())
        .map_err(|e| format!("could not build the request for {shown}: {e}"))?;
    let response = client
        .request(request)
        .await
        .map_err(|e| format!("{shown} could not be reached: {}", error_chain(&e)))?;
    let status = response.status();
    let location = response
        .headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    if status != StatusCode::OK {
        return Ok((status, location, Bytes::new()));
    }
    let body = Limited::new(response.into_body(), MAX_BODY)
        .collect()
        .await
        .map_err(|e| format!("reading {shown} failed: {e}"))?
        .to_bytes();
    Ok((status, location, body))
}

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
