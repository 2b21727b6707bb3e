//! Faults injected into the sandbox: wrong status codes, rate-limit headers, delays.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// What the next matching request(s) get instead of (or on top of) the real answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fault {
    /// A route as counted (`GET /repos/{owner}/{repo}/issues/{number}`, `POST /graphql
    /// UpdateItemStatus`), a prefix of one followed by a space (`POST /graphql` matches every
    /// GraphQL operation), or `*` for every request.
    pub(crate) route: String,
    /// Answer with this status instead of the real answer; `None` keeps the real answer (a delay,
    /// or headers only).
    #[serde(default)]
    pub(crate) status: Option<u16>,
    /// Headers added to the answer (`retry-after`, `x-ratelimit-remaining`, …).
    #[serde(default)]
    pub(crate) headers: BTreeMap<String, String>,
    /// Body of the fault answer; a GitHub-style `{message, documentation_url, status}` when absent.
    #[serde(default)]
    pub body: Option<Value>,
    /// Wait this long before answering.
    #[serde(default)]
    pub(crate) delay_ms: u64,
    /// How many matching requests it applies to.
    #[serde(default = "one")]
    pub(crate) times: u32,
    /// Matching requests let through before it applies (`1` on a paged read: its second page).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(crate) skip: u32,
    /// Let the request take effect, then replace the answer: a write GitHub applied but reported
    /// as failed.
    #[serde(default)]
    pub(crate) after_handler: bool,
}

fn one() -> u32 {
    1
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Fault {
    /// Answer `status` once on `route`.
    pub fn status(route: impl Into<String>, status: u16) -> Fault {
        Fault {
            route: route.into(),
            status: Some(status),
            headers: BTreeMap::new(),
            body: None,
            delay_ms: 0,
            times: 1,
            skip: 0,
            after_handler: false,
        }
    }

    /// Delay the real answer once.
    pub fn delay(route: impl Into<String>, delay: Duration) -> Fault {
        Fault {
            status: None,
            delay_ms: delay.as_millis() as u64,
            ..Fault::status(route, 200)
        }
    }

    /// GitHub's secondary rate limit: 403 with `retry-after`.
    pub fn secondary_limit(route: impl Into<String>, retry_after_secs: u64) -> Fault {
        Fault::status(route, 403)
            .header("retry-after", retry_after_secs.to_string())
            .with_body(json!({
                "message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. If you reach out to GitHub Support for help, please include the request ID.",
                "documentation_url": "https://docs.github.com/free-pro-team@latest/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits",
                "status": "403"
            }))
    }

    /// The primary (hourly) quota used up until `reset` (Unix seconds): 403 with
    /// `x-ratelimit-remaining: 0`.
    pub fn quota_exhausted(route: impl Into<String>, reset: i64) -> Fault {
        Fault::status(route, 403)
            .header("x-ratelimit-limit", "5000")
            .header("x-ratelimit-remaining", "0")
            .header("x-ratelimit-used", "5000")
            .header("x-ratelimit-reset", reset.to_string())
            .with_body(json!({
                "message": "API rate limit exceeded for user ID 1. If you reach out to GitHub Support for help, please include the request ID.",
                "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api",
                "status": "403"
            }))
    }

    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Fault {
        self.headers.insert(name.into(), value.into());
        self
    }

    pub fn with_body(mut self, body: Value) -> Fault {
        self.body = Some(body);
        self
    }

    /// Let `n` matching requests through first.
    pub fn skipping(mut self, n: u32) -> Fault {
        self.skip = n;
        self
    }

    pub fn times(mut self, n: u32) -> Fault {
        self.times = n.max(1);
        self
    }

    /// Apply the request, then answer with the fault.
    pub fn after_handler(mut self) -> Fault {
        self.after_handler = true;
        self
    }

    pub(crate) fn matches(&self, route: &str) -> bool {
        self.route == "*"
            || self.route == route
            || route
                .strip_prefix(self.route.as_str())
                .is_some_and(|rest| rest.starts_with(' '))
    }

    /// The body of the fault answer.
    pub(crate) fn answer_body(&self) -> Value {
        self.body.clone().unwrap_or_else(|| {
            let status = self.status.unwrap_or(500);
            let reason = http::StatusCode::from_u16(status)
                .ok()
                .and_then(|s| s.canonical_reason())
                .unwrap_or("Error");
            json!({
                "message": reason,
                "documentation_url": "https://docs.github.com/rest",
                "status": status.to_string(),
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_matching() {
        let f = Fault::status("POST /graphql", 502);
        assert!(f.matches("POST /graphql UpdateItemStatus"));
        assert!(f.matches("POST /graphql"));
        assert!(!f.matches("POST /graphqlx"));
        let f = Fault::status("GET /repos/{owner}/{repo}/issues/{number}", 404);
        assert!(!f.matches("GET /repos/{owner}/{repo}/issues/{number}/comments"));
        assert!(Fault::status("*", 500).matches("anything"));
    }

    #[test]
    fn faults_read_from_json() {
        let f: Fault = serde_json::from_str(
            r#"{"route":"GET /user","status":502,"times":2,"headers":{"retry-after":"1"}}"#,
        )
        .unwrap();
        assert_eq!(f.times, 2);
        assert_eq!(f.answer_body()["message"], "Bad Gateway");
        assert!(serde_json::from_str::<Fault>(r#"{"route":"x","stauts":1}"#).is_err());
    }
}
