//! A page fetched as a browser asks for it: a plain HTTP/1.1 GET with no token (and a POST of
//! JSON, as a script in a page would send one).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// One exchange with `url` (`http://host:port/path`): `request` is given the path and the host
/// and writes the request; the answer's status, content type and body.
fn exchange(url: &str, request: impl FnOnce(&str, &str) -> String) -> (u16, String, String) {
    let rest = url.strip_prefix("http://").expect("an http:// URL");
    let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let path = if path.is_empty() { "/" } else { path };
    let mut s = TcpStream::connect(host).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request(path, host).as_bytes()).unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).expect("an answer");
    let (head, body) = raw.split_once("\r\n\r\n").expect("headers and body");
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("a status line");
    let kind = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-type")
                .then(|| value.trim().to_string())
        })
        .unwrap_or_default();
    (status, kind, body.to_string())
}

/// GET `url` (`http://host:port/path`): status, content type and body.
pub(crate) fn browse(url: &str) -> (u16, String, String) {
    exchange(url, |path, host| {
        format!(
            "GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: Mozilla/5.0\r\nAccept: text/html\r\nConnection: close\r\n\r\n"
        )
    })
}

/// POST a JSON body to `url` (no token); the status.
#[allow(dead_code)]
pub(crate) fn post(url: &str, body: &serde_json::Value) -> u16 {
    let body = body.to_string();
    let (status, _, _) = exchange(url, |path, host| {
        format!(
            "POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    });
    status
}
