//! A project's own test command (`verify.command`, `verify.report`), for projects whose runner the
//! oracle (`src/verify/`) does not detect or that run their tests their own way. Here, beside the
//! workflow, so that the workflow can carry it.

use std::fmt;
use std::path::{Component, Path};

use serde::{Deserialize, Serialize};

/// `verify`: the command that runs the project's tests and the report it leaves.
///
/// ```json
/// "verify": { "command": "make test-ci", "report": "junit:build/test-results.xml" }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VerifyConfig {
    /// Run with `/bin/sh -c` in the project directory, with the gates' environment allowlist and
    /// trusted PATH. It runs the whole suite: a selection keeps the designated tests' results.
    pub command: String,
    /// Where its results are read from.
    pub report: ReportSpec,
    /// How long the command may run, in seconds (default: the oracle's, 20 minutes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_sec: Option<u64>,
}

/// A report format and where the configured command leaves it, written as one string:
/// - `junit:PATH` — a JUnit XML file at PATH, relative to the project directory (removed before each
///   run, so that a stale report is never read);
/// - `go-test-json` — `go test -json` events on the command's standard output;
/// - `libtest` — cargo test's text output on its standard output and standard error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum ReportSpec {
    Junit(String),
    GoTestJson,
    Libtest,
}

impl TryFrom<String> for ReportSpec {
    type Error = String;

    fn try_from(s: String) -> Result<ReportSpec, String> {
        ReportSpec::parse(&s)
    }
}

impl From<ReportSpec> for String {
    fn from(r: ReportSpec) -> String {
        r.to_string()
    }
}

impl ReportSpec {
    /// Read `junit:PATH`, `go-test-json` or `libtest`; the error says what is accepted.
    pub fn parse(s: &str) -> Result<ReportSpec, String> {
        let s = s.trim();
        match s {
            "go-test-json" => return Ok(ReportSpec::GoTestJson),
            "libtest" => return Ok(ReportSpec::Libtest),
            _ => {}
        }
        let Some(path) = s.strip_prefix("junit:") else {
            return Err(format!(
                "verify.report `{s}` is not a report the oracle reads: write `junit:PATH` (a JUnit XML file the command writes, relative to the project), `go-test-json` or `libtest` (the command's output)"
            ));
        };
        let p = Path::new(path);
        let inside = !path.is_empty()
            && p.components()
                .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
        if !inside {
            return Err(format!(
                "verify.report `{s}`: the JUnit file must be a relative path inside the project without `..`"
            ));
        }
        Ok(ReportSpec::Junit(path.to_string()))
    }
}

impl fmt::Display for ReportSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReportSpec::Junit(path) => write!(f, "junit:{path}"),
            ReportSpec::GoTestJson => f.write_str("go-test-json"),
            ReportSpec::Libtest => f.write_str("libtest"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_workflow_form() {
        let c: VerifyConfig = serde_json::from_value(serde_json::json!({
            "command": "make test-ci",
            "report": "junit:build/results.xml",
            "timeoutSec": 600
        }))
        .unwrap();
        assert_eq!(c.report, ReportSpec::Junit("build/results.xml".into()));
        assert_eq!(c.timeout_sec, Some(600));
        let back = serde_json::to_value(&c).unwrap();
        assert_eq!(back["report"], "junit:build/results.xml");
        for (text, want) in [
            ("go-test-json", ReportSpec::GoTestJson),
            ("libtest", ReportSpec::Libtest),
        ] {
            assert_eq!(ReportSpec::parse(text), Ok(want.clone()));
            assert_eq!(want.to_string(), text);
        }
    }

    #[test]
    fn rejects_what_it_cannot_read_with_the_field_named() {
        for (text, want) in [
            ("junit:", "relative path inside the project"),
            ("junit:/etc/passwd", "relative path inside the project"),
            ("junit:../out.xml", "without `..`"),
            ("tap:out.tap", "not a report the oracle reads"),
            ("", "not a report the oracle reads"),
        ] {
            let err = ReportSpec::parse(text).unwrap_err();
            assert!(
                err.contains(want) && err.contains("verify.report"),
                "{text}: {err}"
            );
        }
        let unknown = serde_json::from_value::<VerifyConfig>(serde_json::json!({
            "command": "x", "report": "libtest", "reporter": "junit"
        }))
        .unwrap_err();
        assert!(unknown.to_string().contains("reporter"), "{unknown}");
        let bad = serde_json::from_value::<VerifyConfig>(serde_json::json!({
            "command": "x", "report": "tap"
        }))
        .unwrap_err();
        assert!(bad.to_string().contains("verify.report"), "{bad}");
    }
}
