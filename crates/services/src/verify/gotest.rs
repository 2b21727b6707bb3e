//! `go test -json` streams: one JSON event a line (test2json's `Action`, `Package`, `Test`,
//! `Output`, `Elapsed`; Go 1.24's `build-output`/`build-fail` with `ImportPath`).
//!
//! A test's id is its package's import path and its name (`TestAdd/negative` for a subtest). A
//! package that failed without a failing test (it did not build, its `TestMain` or `init` failed)
//! is an error of the package itself; a test that started but never ended (its binary died) is an
//! error too. A line that is not such an event makes the whole stream unreadable.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::LazyLock;

use regex::Regex;
use serde::Deserialize;

use super::model::{Outcome, TestId, TestResult, merge_by_id};
use super::text::{first_line, json_lines, location_in};

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct GoEvent {
    action: String,
    #[serde(default)]
    package: Option<String>,
    #[serde(default)]
    test: Option<String>,
    #[serde(default)]
    output: Option<String>,
    #[serde(default)]
    elapsed: Option<f64>,
    #[serde(default)]
    import_path: Option<String>,
}

#[derive(Debug, Default)]
struct Seen {
    outcome: Option<Outcome>,
    output: String,
    elapsed: Option<f64>,
}

/// `    math_test.go:12: expected 5` → the message after the place.
static PLACED: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\s*[\w.\-/]+\.go:\d+(?::\d+)?: ?(.*)$").expect("valid"));

/// Read a `go test -json` stream; `root` is the module's directory (for places in build errors).
pub(crate) fn parse(stream: &str, root: &Path) -> Result<Vec<TestResult>, String> {
    let mut tests: BTreeMap<(String, String), Seen> = BTreeMap::new();
    let mut packages: BTreeMap<String, Seen> = BTreeMap::new();
    let mut builds: BTreeMap<String, String> = BTreeMap::new();
    let events: Vec<GoEvent> = json_lines(stream, "a go test -json event")?;
    if events.is_empty() {
        return Err("no go test -json events".into());
    }
    for e in events {
        if e.action.starts_with("build-") {
            // `ImportPath` is `pkg [pkg.test]` for a test binary's build.
            let path = e.import_path.as_deref().unwrap_or("");
            let pkg = path.split(" [").next().unwrap_or(path).to_string();
            builds
                .entry(pkg)
                .or_default()
                .push_str(e.output.as_deref().unwrap_or(""));
            continue;
        }
        let Some(pkg) = e.package.clone() else {
            continue;
        };
        let seen = match &e.test {
            Some(test) => tests.entry((pkg, test.clone())).or_default(),
            None => packages.entry(pkg).or_default(),
        };
        match e.action.as_str() {
            "output" => seen.output.push_str(e.output.as_deref().unwrap_or("")),
            "pass" | "fail" | "skip" => {
                seen.outcome = Some(match e.action.as_str() {
                    "pass" => Outcome::Pass,
                    "fail" => Outcome::Fail,
                    _ => Outcome::Skipped,
                });
                seen.elapsed = e.elapsed;
            }
            _ => {}
        }
    }
    let mut results = Vec::new();
    for ((pkg, test), seen) in &tests {
        let id = TestId::new(pkg, test);
        let mut r = match seen.outcome {
            Some(outcome) => TestResult::new(id, outcome),
            None => TestResult::new(id, Outcome::Error).with_message(Some(format!(
                "the test started but never ended (its test binary died){}",
                last_words(&seen.output)
            ))),
        };
        if r.outcome.is_failure() && r.message.is_none() {
            r.message = failure_line(&seen.output);
        }
        if r.outcome == Outcome::Skipped {
            r.message = failure_line(&seen.output);
        }
        if r.outcome.is_failure() {
            r.location = location_in(&seen.output, "", root);
        }
        r.duration_ms = seen.elapsed.map(seconds_to_ms);
        results.push(r);
    }
    for (pkg, seen) in &packages {
        if seen.outcome != Some(Outcome::Fail) {
            continue;
        }
        let explained = results
            .iter()
            .any(|r| r.id.file == *pkg && r.outcome.is_failure());
        if explained {
            continue;
        }
        let build = builds.get(pkg).map(String::as_str).unwrap_or("");
        let text = format!("{build}\n{}", seen.output);
        let message = build_error_line(build)
            .or_else(|| package_line(&seen.output))
            .unwrap_or_else(|| "the package failed outside its tests".into());
        let mut r = TestResult::new(TestId::file_itself(pkg), Outcome::Error);
        r.message = Some(message);
        r.location = location_in(&text, "", root);
        r.duration_ms = seen.elapsed.map(seconds_to_ms);
        results.push(r);
    }
    Ok(merge_by_id(results))
}

fn seconds_to_ms(s: f64) -> u64 {
    if s.is_finite() && s >= 0.0 {
        (s * 1000.0).round() as u64
    } else {
        0
    }
}

/// Whether a line of a test's output is go test's own framing.
fn is_framing(line: &str) -> bool {
    let t = line.trim();
    ["=== ", "--- ", "PASS", "FAIL", "ok ", "exit status"]
        .iter()
        .any(|p| t.starts_with(p))
}

/// The first line a failing or skipped test printed, without its `file.go:N:` prefix.
fn failure_line(output: &str) -> Option<String> {
    output
        .lines()
        .filter(|l| !is_framing(l))
        .find_map(|l| match PLACED.captures(l) {
            Some(c) => first_line(&c[1]),
            None => first_line(l),
        })
}

/// The first compiler line of a build's output (`# pkg` headings aside).
fn build_error_line(build: &str) -> Option<String> {
    build
        .lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(first_line)
}

/// What a package printed when it failed, its `FAIL` lines aside unless that is all there is
/// (`FAIL pkg [build failed]`, `FAIL pkg [setup failed]`).
fn package_line(output: &str) -> Option<String> {
    output
        .lines()
        .filter(|l| !is_framing(l))
        .find_map(first_line)
        .or_else(|| {
            output
                .lines()
                .find(|l| l.contains('['))
                .and_then(first_line)
        })
}

fn last_words(output: &str) -> String {
    output
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty() && !is_framing(l))
        .map(|l| format!(": {}", l.trim()))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::model::testing::{assert_refused, detail, outcomes};

    fn root() -> &'static Path {
        Path::new("/work/m")
    }

    #[test]
    fn tests_subtests_skips_and_failures() {
        let stream = r#"{"Time":"2025-01-01T00:00:00Z","Action":"start","Package":"example.com/m"}
{"Action":"run","Package":"example.com/m","Test":"TestAdd"}
{"Action":"output","Package":"example.com/m","Test":"TestAdd","Output":"=== RUN   TestAdd\n"}
{"Action":"output","Package":"example.com/m","Test":"TestAdd","Output":"--- PASS: TestAdd (0.00s)\n"}
{"Action":"pass","Package":"example.com/m","Test":"TestAdd","Elapsed":0.001}
{"Action":"run","Package":"example.com/m","Test":"TestWrong"}
{"Action":"run","Package":"example.com/m","Test":"TestWrong/negative"}
{"Action":"output","Package":"example.com/m","Test":"TestWrong/negative","Output":"    math_test.go:12: expected 5, got 4\n"}
{"Action":"output","Package":"example.com/m","Test":"TestWrong/negative","Output":"--- FAIL: TestWrong/negative (0.00s)\n"}
{"Action":"fail","Package":"example.com/m","Test":"TestWrong/negative","Elapsed":0.02}
{"Action":"fail","Package":"example.com/m","Test":"TestWrong","Elapsed":0.02}
{"Action":"run","Package":"example.com/m","Test":"TestLater"}
{"Action":"output","Package":"example.com/m","Test":"TestLater","Output":"    math_test.go:20: not today\n"}
{"Action":"skip","Package":"example.com/m","Test":"TestLater","Elapsed":0}
{"Action":"output","Package":"example.com/m","Output":"FAIL\n"}
{"Action":"fail","Package":"example.com/m","Elapsed":0.3}
"#;
        let r = parse(stream, root()).unwrap();
        assert_eq!(
            outcomes(&r),
            [
                ("example.com/m::TestAdd".to_string(), Outcome::Pass),
                ("example.com/m::TestLater".into(), Outcome::Skipped),
                ("example.com/m::TestWrong".into(), Outcome::Fail),
                ("example.com/m::TestWrong/negative".into(), Outcome::Fail),
            ]
        );
        assert_eq!(detail(&r[1]), (Some("not today"), None));
        assert_eq!(
            detail(&r[3]),
            (Some("expected 5, got 4"), Some("math_test.go:12".into()))
        );
        assert_eq!(r[3].duration_ms, Some(20));
        assert_eq!(r[0].message, None);
    }

    #[test]
    fn a_package_that_does_not_build_is_an_error_of_the_package() {
        // Go 1.24: the build's output as events of its own.
        let stream = r##"{"ImportPath":"example.com/m [example.com/m.test]","Action":"build-output","Output":"# example.com/m [example.com/m.test]\n"}
{"ImportPath":"example.com/m [example.com/m.test]","Action":"build-output","Output":"./math_test.go:7:9: undefined: nothingHere\n"}
{"ImportPath":"example.com/m [example.com/m.test]","Action":"build-fail"}
{"Action":"start","Package":"example.com/m"}
{"Action":"output","Package":"example.com/m","Output":"FAIL\texample.com/m [build failed]\n"}
{"Action":"fail","Package":"example.com/m","Elapsed":0,"FailedBuild":"example.com/m [example.com/m.test]"}
{"Action":"start","Package":"example.com/m/other"}
{"Action":"output","Package":"example.com/m/other","Output":"FAIL\texample.com/m/other [build failed]\n"}
{"Action":"fail","Package":"example.com/m/other","Elapsed":0}
"##;
        let r = parse(stream, root()).unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].id, TestId::file_itself("example.com/m"));
        assert_eq!(r[0].outcome, Outcome::Error);
        assert_eq!(
            detail(&r[0]),
            (
                Some("./math_test.go:7:9: undefined: nothingHere"),
                Some("math_test.go:7".into())
            )
        );
        // Before Go 1.24 the compiler's lines went to stderr: only the FAIL line is left.
        let other = "FAIL\texample.com/m/other [build failed]";
        assert_eq!(detail(&r[1]), (Some(other), None));
    }

    #[test]
    fn a_test_that_never_ended_is_an_error() {
        let stream = r#"{"Action":"run","Package":"p","Test":"TestHang"}
{"Action":"output","Package":"p","Test":"TestHang","Output":"panic: test timed out after 1s\n"}
{"Action":"output","Package":"p","Output":"FAIL\tp\t1.0s\n"}
{"Action":"fail","Package":"p","Elapsed":1}
"#;
        let r = parse(stream, root()).unwrap();
        assert_eq!(r.len(), 1, "the package's failure is the test's: {r:?}");
        assert_eq!(r[0].outcome, Outcome::Error);
        assert!(
            r[0].message
                .as_deref()
                .unwrap()
                .ends_with(": panic: test timed out after 1s"),
            "{:?}",
            r[0].message
        );
    }

    #[test]
    fn what_is_not_a_stream_is_an_error() {
        let cases = [
            ("", "no go test -json events"),
            ("\n\n", "no go test -json events"),
            (
                "ok  \texample.com/m\t0.01s\n",
                "line 1 is not a go test -json event",
            ),
            ("{\"Action\":\"pass\"}\ngarbage\n", "line 2"),
            ("{\"Package\":\"p\"}\n", "line 1"),
        ];
        assert_refused(&cases, |text| parse(text, root()));
    }

    proptest::proptest! {
        #[test]
        fn never_panics(text in "\\PC{0,400}") {
            let _ = parse(&text, root());
        }

        #[test]
        fn never_panics_on_event_like_lines(
            lines in proptest::collection::vec((
                proptest::sample::select(vec!["run", "pass", "fail", "skip", "output", "build-output", "pause"]),
                proptest::option::of(proptest::sample::select(vec!["p", "q"])),
                proptest::option::of(proptest::sample::select(vec!["TestA", "TestA/b"])),
                proptest::option::of("\\PC{0,30}"),
                proptest::option::of(proptest::num::f64::ANY),
            ), 0..12)
        ) {
            let text: String = lines.into_iter().map(|(action, pkg, test, output, elapsed)| {
                serde_json::json!({"Action": action, "Package": pkg, "Test": test, "Output": output, "Elapsed": elapsed, "ImportPath": pkg}).to_string() + "\n"
            }).collect();
            let _ = parse(&text, root());
        }
    }
}
