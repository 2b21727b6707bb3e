//! cargo's test output, read strictly: libtest's stable text (`test NAME ... ok|FAILED|ignored`,
//! each binary's `test result:` summary) under cargo's `Running FILE (BINARY)` headings, and the
//! JSON messages of `cargo build --tests --message-format=json` for what did not compile.
//!
//! Each test binary's section must hold as many result lines as its `running N tests` announces and
//! as its summary counts: anything else (output mixed into the result lines, a summary that does not
//! add up) makes the output unreadable rather than guessed at. A binary that died before its summary
//! is an error of its target file.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::LazyLock;

use regex::Regex;
use serde::Deserialize;

use super::model::{Location, Outcome, TestId, TestResult, merge_by_id};
use super::text::{first_line, json_lines, project_relative};

static RUNNING: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\s*Running (?:unittests )?(\S.*?) \(.*\)\s*$").expect("valid"));
static DOC_TESTS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\s*Doc-tests (\S+)\s*$").expect("valid"));
static COUNT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^running (\d+) tests?$").expect("valid"));
static RESULT_LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^test (.+?)(?: - should panic)? \.\.\. (ok|FAILED|ignored(?:, (.*))?)$")
        .expect("valid")
});
static SUMMARY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^test result: (?:ok|FAILED)\. (\d+) passed; (\d+) failed; (\d+) ignored; (\d+) measured; (\d+) filtered out",
    )
    .expect("valid")
});
static FAILURE_HEADING: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^---- (.+?) stdout ----$").expect("valid"));
/// `thread 'name' (123) panicked at src/lib.rs:8:18:` (Rust 1.73+; the thread id since 1.89).
static PANICKED_AT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^thread '.*?'(?: \(\d+\))? panicked at (.+?):(\d+):\d+:$").expect("valid")
});
/// `thread 'name' panicked at 'message', src/lib.rs:8:5` (before Rust 1.73).
static PANICKED_OLD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^thread '.*?' panicked at '(.*)', (.+?):(\d+):\d+$").expect("valid")
});

/// One test binary's section being read.
#[derive(Debug)]
struct Section {
    file: String,
    announced: Option<usize>,
    lines: usize,
    summarised: bool,
}

/// Read the merged output (stdout and stderr in order) of `cargo test`, relative to `root`.
pub(crate) fn parse_test_output(text: &str, root: &Path) -> Result<Vec<TestResult>, String> {
    let root = root.to_string_lossy().into_owned();
    let mut results: Vec<TestResult> = Vec::new();
    let mut section: Option<Section> = None;
    let mut sections = 0usize;
    let mut failures: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    let mut failure: Option<(String, String)> = None;
    let mut crashed: Vec<(String, String)> = Vec::new();
    for raw in text.lines() {
        let line = raw.trim_end_matches('\r');
        let heading = RUNNING
            .captures(line)
            .map(|c| project_relative(&c[1], &root).unwrap_or_else(|| c[1].to_string()))
            .or_else(|| {
                DOC_TESTS
                    .captures(line)
                    .map(|c| format!("doc-tests {}", &c[1]))
            });
        if let Some(file) = heading {
            if let Some(s) = section.take() {
                close(s, &mut crashed, None);
            }
            section = Some(Section {
                file,
                announced: None,
                lines: 0,
                summarised: false,
            });
            failure = None;
            sections += 1;
            continue;
        }
        let Some(s) = section.as_mut() else {
            continue;
        };
        if let Some(c) = COUNT.captures(line) {
            if s.announced.is_some() {
                return Err(format!("{}: a second `running N tests` line", s.file));
            }
            s.announced = c[1].parse().ok();
            continue;
        }
        if let Some(c) = SUMMARY.captures(line) {
            let count = |i: usize| c[i].parse::<usize>().unwrap_or(usize::MAX);
            let counted = [1, 2, 3, 4]
                .iter()
                .try_fold(0usize, |sum, i| sum.checked_add(count(*i)));
            if counted != s.announced || Some(s.lines) != s.announced {
                return Err(format!(
                    "{}: `running {}` tests, {} result lines, and a summary counting {}: the output does not add up",
                    s.file,
                    s.announced.map_or("?".to_string(), |n| n.to_string()),
                    s.lines,
                    counted.map_or("?".to_string(), |n| n.to_string()),
                ));
            }
            s.summarised = true;
            failure = None;
            continue;
        }
        if let Some(c) = RESULT_LINE.captures(line) {
            if s.summarised || s.announced.is_none() {
                return Err(format!(
                    "{}: a result line outside a test run: {line}",
                    s.file
                ));
            }
            let outcome = match &c[2] {
                "ok" => Outcome::Pass,
                "FAILED" => Outcome::Fail,
                _ => Outcome::Skipped,
            };
            let mut r = TestResult::new(TestId::new(&s.file, &c[1]), outcome);
            r.message = c.get(3).and_then(|m| first_line(m.as_str()));
            results.push(r);
            s.lines += 1;
            continue;
        }
        if let Some(c) = FAILURE_HEADING.captures(line) {
            let key = (s.file.clone(), c[1].to_string());
            failures.entry(key.clone()).or_default();
            failure = Some(key);
            continue;
        }
        if line == "failures:" || line == "successes:" {
            failure = None;
            continue;
        }
        if let Some(key) = &failure {
            failures
                .entry(key.clone())
                .or_default()
                .push(line.to_string());
        } else if line.contains("process didn't exit successfully") && !s.summarised {
            let s = section.take().expect("a section is open");
            close(s, &mut crashed, Some(line.trim()));
        }
    }
    if let Some(s) = section.take() {
        close(s, &mut crashed, None);
    }
    if sections == 0 {
        return Err("no test binary ran (no `Running …` section in cargo's output)".into());
    }
    for r in &mut results {
        if r.outcome != Outcome::Fail {
            continue;
        }
        if let Some(lines) = failures.get(&(r.id.file.clone(), r.id.name.clone())) {
            let (message, location) = panic_of(lines, &root);
            r.message = message;
            r.location = location;
        }
    }
    for (file, why) in crashed {
        results.push(
            TestResult::new(TestId::file_itself(file), Outcome::Error).with_message(Some(why)),
        );
    }
    Ok(merge_by_id(results))
}

/// A section ends: one whose binary gave no summary died (a crash, an abort, a signal).
fn close(s: Section, crashed: &mut Vec<(String, String)>, why: Option<&str>) {
    if s.summarised {
        return;
    }
    let why = why
        .map(str::to_string)
        .unwrap_or_else(|| "the test binary ended before its summary".into());
    crashed.push((s.file, first_line(&why).unwrap_or(why)));
}

/// The panic message and place of a failed test's captured output.
fn panic_of(lines: &[String], root: &str) -> (Option<String>, Option<Location>) {
    for (i, line) in lines.iter().enumerate() {
        if let Some(c) = PANICKED_AT.captures(line) {
            let message = lines[i + 1..].iter().find_map(|l| first_line(l));
            return (message, place(&c[1], &c[2], root));
        }
        if let Some(c) = PANICKED_OLD.captures(line) {
            return (first_line(&c[1]), place(&c[2], &c[3], root));
        }
    }
    // A test returning `Err`: libtest prints `Error: …`.
    (lines.iter().find_map(|l| first_line(l)), None)
}

fn place(file: &str, line: &str, root: &str) -> Option<Location> {
    Some(Location {
        file: project_relative(file, root)?,
        line: line.parse().ok()?,
    })
}

/// What `cargo build --tests --message-format=json` says.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Build {
    /// Test targets that compiled: what `cargo test` takes to run each (`--lib`, `--test NAME`,
    /// `--bin NAME`) and its root file relative to the project.
    pub(crate) targets: Vec<(Vec<String>, String)>,
    /// Test targets that did not compile: their root file's error entry, with the first error.
    pub(crate) errors: Vec<TestResult>,
    /// cargo's `build-finished` verdict, when it came.
    pub(crate) success: Option<bool>,
}

#[derive(Debug, Deserialize)]
struct Message {
    reason: String,
    #[serde(default)]
    target: Option<Target>,
    #[serde(default)]
    profile: Option<Profile>,
    #[serde(default)]
    message: Option<Diagnostic>,
    #[serde(default)]
    success: Option<bool>,
}

#[derive(Debug, Deserialize)]
struct Target {
    kind: Vec<String>,
    name: String,
    src_path: String,
}

#[derive(Debug, Deserialize)]
struct Profile {
    test: bool,
}

#[derive(Debug, Deserialize)]
struct Diagnostic {
    message: String,
    level: String,
    #[serde(default)]
    spans: Vec<Span>,
}

#[derive(Debug, Deserialize)]
struct Span {
    file_name: String,
    line_start: u32,
    is_primary: bool,
}

/// Read the JSON lines of `cargo build --tests --message-format=json`, relative to `root`.
pub(crate) fn parse_build(stream: &str, root: &Path) -> Result<Build, String> {
    let root = root.to_string_lossy().into_owned();
    let mut build = Build::default();
    let messages: Vec<Message> = json_lines(stream, "a cargo JSON message")?;
    if messages.is_empty() {
        return Err("cargo printed no JSON messages".into());
    }
    for m in messages {
        match m.reason.as_str() {
            "compiler-artifact" => {
                let (Some(t), Some(p)) = (m.target, m.profile) else {
                    continue;
                };
                if !p.test {
                    continue;
                }
                let Some(flag) = target_flag(&t) else {
                    continue;
                };
                let file = project_relative(&t.src_path, &root).unwrap_or(t.src_path);
                if !build.targets.iter().any(|(f, _)| *f == flag) {
                    build.targets.push((flag, file));
                }
            }
            "compiler-message" => {
                let (Some(t), Some(d)) = (m.target, m.message) else {
                    continue;
                };
                if d.level != "error" {
                    continue;
                }
                let file = project_relative(&t.src_path, &root).unwrap_or(t.src_path);
                let id = TestId::file_itself(file);
                if build.errors.iter().any(|e| e.id == id) {
                    continue;
                }
                let mut r =
                    TestResult::new(id, Outcome::Error).with_message(first_line(&d.message));
                r.location = d
                    .spans
                    .iter()
                    .find(|s| s.is_primary)
                    .and_then(|s| place(&s.file_name, &s.line_start.to_string(), &root));
                build.errors.push(r);
            }
            "build-finished" => build.success = m.success,
            _ => {}
        }
    }
    Ok(build)
}

/// How `cargo test` selects a target of this kind (`None`: not run as tests).
fn target_flag(t: &Target) -> Option<Vec<String>> {
    let kind = t.kind.first().map(String::as_str)?;
    match kind {
        "lib" | "rlib" | "dylib" | "cdylib" | "staticlib" | "proc-macro" => {
            Some(vec!["--lib".into()])
        }
        "bin" => Some(vec!["--bin".into(), t.name.clone()]),
        "test" => Some(vec!["--test".into(), t.name.clone()]),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::model::testing::{assert_refused, detail, outcomes};

    fn root() -> &'static Path {
        Path::new("/work/c")
    }

    const OUTPUT: &str = "   Compiling fx v0.1.0 (/work/c)
    Finished `test` profile [unoptimized + debuginfo] target(s) in 0.5s
     Running unittests src/lib.rs (target/debug/deps/fx-4a99a53287a4b62f)

running 3 tests
test tests::skipped ... ignored, not today
test tests::adds ... ok
test tests::wrong ... FAILED

failures:

---- tests::wrong stdout ----

thread 'tests::wrong' (24357) panicked at src/lib.rs:8:18:
assertion `left == right` failed: two and two
  left: 4
 right: 5
note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace


failures:
    tests::wrong

test result: FAILED. 1 passed; 1 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.16s

error: test failed, to rerun pass `--lib`
     Running tests/math.rs (target/debug/deps/math-064292bf87f83e26)

running 3 tests
test outer_adds ... ok
test old_style ... FAILED
test panics - should panic ... ok

failures:

---- old_style stdout ----
thread 'old_style' panicked at 'boom', tests/math.rs:4:15

failures:
    old_style

test result: FAILED. 2 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.07s

error: test failed, to rerun pass `--test math`
     Running tests/crash.rs (target/debug/deps/crash-0123)

running 2 tests
test first ... ok
error: test failed, to rerun pass `--test crash`

Caused by:
  process didn't exit successfully: `/work/c/target/debug/deps/crash-0123` (signal: 6, SIGABRT: process abort signal)
   Doc-tests fx

running 1 test
test src/lib.rs - add (line 3) ... ok

test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.01s

error: 2 targets failed:
    `--lib`
    `--test math`
";

    #[test]
    fn sections_results_and_panics() {
        let r = parse_test_output(OUTPUT, root()).unwrap();
        assert_eq!(
            outcomes(&r),
            [
                (
                    "doc-tests fx::src/lib.rs - add (line 3)".to_string(),
                    Outcome::Pass
                ),
                ("src/lib.rs::tests::adds".into(), Outcome::Pass),
                ("src/lib.rs::tests::skipped".into(), Outcome::Skipped),
                ("src/lib.rs::tests::wrong".into(), Outcome::Fail),
                ("tests/crash.rs".into(), Outcome::Error),
                ("tests/crash.rs::first".into(), Outcome::Pass),
                ("tests/math.rs::old_style".into(), Outcome::Fail),
                ("tests/math.rs::outer_adds".into(), Outcome::Pass),
                ("tests/math.rs::panics".into(), Outcome::Pass),
            ]
        );
        assert_eq!(detail(&r[2]), (Some("not today"), None));
        assert_eq!(
            detail(&r[3]),
            (
                Some("assertion `left == right` failed: two and two"),
                Some("src/lib.rs:8".into())
            )
        );
        assert!(
            r[4].message
                .as_deref()
                .unwrap()
                .contains("process didn't exit successfully"),
            "{:?}",
            r[4].message
        );
        assert_eq!(
            detail(&r[6]),
            (Some("boom"), Some("tests/math.rs:4".into()))
        );
    }

    #[test]
    fn output_that_does_not_add_up_is_unreadable() {
        let cases = [
            ("", "no test binary ran"),
            ("error: could not find `Cargo.toml`", "no test binary ran"),
            (
                "     Running tests/a.rs (x)\nrunning 2 tests\ntest a ... ok\ntest result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0s\n",
                "does not add up",
            ),
            (
                "     Running tests/a.rs (x)\nrunning 1 test\ntest a ... ok\ntest result: ok. 2 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0s\n",
                "does not add up",
            ),
            (
                "     Running tests/a.rs (x)\ntest a ... ok\n",
                "outside a test run",
            ),
            (
                "     Running tests/a.rs (x)\nrunning 1 test\nrunning 1 test\n",
                "second `running N tests`",
            ),
        ];
        assert_refused(&cases, |text| parse_test_output(text, root()));
        // A binary whose section ends without a summary died.
        let died =
            parse_test_output("     Running tests/a.rs (x)\nrunning 1 test\n", root()).unwrap();
        assert_eq!(died[0].id, TestId::file_itself("tests/a.rs"));
        assert_eq!(died[0].outcome, Outcome::Error);
    }

    #[test]
    fn build_messages() {
        let stream = r#"{"reason":"compiler-artifact","package_id":"fx","target":{"kind":["lib"],"crate_types":["lib"],"name":"fx","src_path":"/work/c/src/lib.rs"},"profile":{"test":false},"executable":null}
{"reason":"compiler-message","package_id":"fx","target":{"kind":["test"],"name":"broken","src_path":"/work/c/tests/broken.rs"},"message":{"message":"cannot find function `nothing_here` in this scope","level":"error","spans":[{"file_name":"tests/broken.rs","line_start":2,"is_primary":true}]}}
{"reason":"compiler-message","package_id":"fx","target":{"kind":["test"],"name":"broken","src_path":"/work/c/tests/broken.rs"},"message":{"message":"second error","level":"error","spans":[]}}
{"reason":"compiler-message","package_id":"fx","target":{"kind":["lib"],"name":"fx","src_path":"/work/c/src/lib.rs"},"message":{"message":"unused variable","level":"warning","spans":[]}}
{"reason":"compiler-artifact","package_id":"fx","target":{"kind":["lib"],"name":"fx","src_path":"/work/c/src/lib.rs"},"profile":{"test":true},"executable":"/work/c/target/debug/deps/fx-1"}
{"reason":"compiler-artifact","package_id":"fx","target":{"kind":["test"],"name":"math","src_path":"/work/c/tests/math.rs"},"profile":{"test":true},"executable":"/work/c/target/debug/deps/math-1"}
{"reason":"compiler-artifact","package_id":"fx","target":{"kind":["example"],"name":"demo","src_path":"/work/c/examples/demo.rs"},"profile":{"test":true},"executable":null}
{"reason":"build-finished","success":false}
"#;
        let b = parse_build(stream, root()).unwrap();
        assert_eq!(
            b.targets,
            [
                (vec!["--lib".to_string()], "src/lib.rs".to_string()),
                (vec!["--test".into(), "math".into()], "tests/math.rs".into()),
            ]
        );
        assert_eq!(b.errors.len(), 1);
        assert_eq!(b.errors[0].id, TestId::file_itself("tests/broken.rs"));
        let broken = "cannot find function `nothing_here` in this scope";
        assert_eq!(
            detail(&b.errors[0]),
            (Some(broken), Some("tests/broken.rs:2".into()))
        );
        assert_eq!(b.success, Some(false));
        assert!(parse_build("", root()).unwrap_err().contains("no JSON"));
        assert!(
            parse_build("error: manifest\n", root())
                .unwrap_err()
                .contains("line 1")
        );
    }

    proptest::proptest! {
        #[test]
        fn never_panics(text in "\\PC{0,400}") {
            let _ = parse_test_output(&text, root());
            let _ = parse_build(&text, root());
        }

        #[test]
        fn never_panics_on_output_like_lines(
            lines in proptest::collection::vec(proptest::sample::select(vec![
                "     Running tests/a.rs (x)", "   Doc-tests fx", "running 1 test", "running 18446744073709551616 tests",
                "test a ... ok", "test a ... FAILED", "test b ... ignored, why",
                "test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0s",
                "test result: FAILED. 99999999999999999999 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out",
                "---- a stdout ----", "thread 'a' panicked at src/a.rs:1:1:", "thread 'a' panicked at 'x', a.rs:1:1",
                "failures:", "process didn't exit successfully: x", "",
            ]), 0..24)
        ) {
            let _ = parse_test_output(&lines.join("\n"), root());
        }
    }
}
