//! JUnit XML reports (vitest `--reporter=junit`, jest-junit, `node --test --test-reporter=junit`,
//! pytest `--junitxml`, and any runner a project configures), read with quick-xml.
//!
//! Every runner writes the format its own way; the [`Dialect`] says where each puts a test's file
//! and full name, and how it reports a test file that did not load:
//! - vitest: `classname` is the file, `name` the full name (`describe > test`); a file that did not
//!   load is a test case named like its file;
//! - jest-junit (as the oracle configures it): `file` is the file, `classname` the enclosing
//!   describes (`a > b`), `name` the test; a file that did not load is a case named like its file;
//! - `node --test`: test cases nest in suites named by their `describe`s; `file` only from Node 22;
//!   a file that did not load is a case named by its absolute path;
//! - pytest (`junit_family=xunit1`): `file` is the file, `classname` the module path and class, a
//!   collection error a case with an empty `classname`.
//!
//! `<error>` marks a test that could not run (set-up, collection), `<failure>` one that failed,
//! `<skipped>` one that was skipped. A document that is not JUnit, is cut short or is not
//! well-formed is an error: the run did not report.

use std::path::Path;

use quick_xml::Reader;
use quick_xml::events::{BytesStart, Event};

use super::model::{Outcome, TestId, TestResult, merge_by_id};
use super::text::{first_line, location_in, project_relative, strip_ansi};

/// How a runner lays out its JUnit report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    Vitest,
    Jest,
    NodeTest,
    Pytest,
    /// A configured runner: `file` (else `classname`) is the file, `name` the test.
    Generic,
}

/// A `<testcase>` being read.
#[derive(Debug, Default)]
struct Case {
    name: String,
    classname: String,
    file: String,
    time: Option<f64>,
    /// Enclosing `<testsuite>` names, outermost first.
    suites: Vec<String>,
    outcome: Option<Outcome>,
    /// The `message` attribute of the failure, error or skip.
    message: Option<String>,
    /// The text of the failure or error element.
    body: String,
}

/// The element whose text is being collected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Capture {
    None,
    Outcome,
}

/// Read a JUnit XML report of `dialect`; paths are made relative to the project at `root`. The
/// results come sorted by id, one per id (the worst outcome where a test is reported twice).
pub(crate) fn parse(xml: &str, dialect: Dialect, root: &Path) -> Result<Vec<TestResult>, String> {
    let mut reader = Reader::from_str(xml);
    let mut depth = 0usize;
    let mut root_seen = false;
    let mut closed = false;
    let mut suites: Vec<String> = Vec::new();
    let mut case: Option<Case> = None;
    let mut capture = Capture::None;
    let mut results = Vec::new();
    let root_text = root.to_string_lossy().into_owned();
    loop {
        let event = reader.read_event().map_err(|e| {
            format!(
                "not well-formed XML at byte {}: {e}",
                reader.error_position()
            )
        })?;
        match event {
            Event::Start(e) | Event::Empty(e) if closed => {
                return Err(format!(
                    "an element <{}> after the report's root element",
                    tag(&e)
                ));
            }
            Event::Start(ref e) | Event::Empty(ref e) => {
                let empty = matches!(event, Event::Empty(_));
                let name = tag(e);
                if depth == 0 {
                    if name != "testsuites" && name != "testsuite" {
                        return Err(format!(
                            "not a JUnit report: its root element is <{name}>, not <testsuites> or <testsuite>"
                        ));
                    }
                    root_seen = true;
                }
                match name.as_str() {
                    "testsuite" if !empty => suites.push(attr(e, "name").unwrap_or_default()),
                    "testcase" => {
                        if case.is_some() {
                            return Err("a <testcase> inside another <testcase>".into());
                        }
                        let Some(test_name) = attr(e, "name") else {
                            return Err("a <testcase> without a name".into());
                        };
                        let c = Case {
                            name: test_name,
                            classname: attr(e, "classname").unwrap_or_default(),
                            file: attr(e, "file").unwrap_or_default(),
                            time: attr(e, "time").and_then(|t| t.trim().parse().ok()),
                            suites: suites.clone(),
                            ..Case::default()
                        };
                        if empty {
                            results.push(finish(c, dialect, &root_text));
                        } else {
                            case = Some(c);
                        }
                    }
                    "failure" | "error" | "skipped" => {
                        if let Some(c) = case.as_mut() {
                            let outcome = match name.as_str() {
                                "failure" => Outcome::Fail,
                                "error" => Outcome::Error,
                                _ => Outcome::Skipped,
                            };
                            // Two elements in one case (jest-junit's error and failure): the worse.
                            if c.outcome.is_none_or(|o| outcome.rank() > o.rank()) {
                                c.outcome = Some(outcome);
                                c.message = attr(e, "message");
                                c.body.clear();
                                if !empty {
                                    capture = Capture::Outcome;
                                }
                            }
                        }
                    }
                    _ => {}
                }
                if !empty {
                    depth += 1;
                } else if depth == 0 {
                    closed = true;
                }
            }
            Event::End(e) => {
                depth = depth.saturating_sub(1);
                let name = tag_name(e.local_name().as_ref());
                match name.as_str() {
                    "testsuite" => {
                        suites.pop();
                    }
                    "testcase" => {
                        if let Some(c) = case.take() {
                            results.push(finish(c, dialect, &root_text));
                        }
                    }
                    "failure" | "error" | "skipped" => capture = Capture::None,
                    _ => {}
                }
                if depth == 0 {
                    closed = true;
                }
            }
            Event::Text(t) if depth == 0 && !t.xml10_content().trim().is_empty() => {
                return Err("not a JUnit report: text outside the root element".into());
            }
            Event::Text(t) if capture == Capture::Outcome => {
                if let Some(c) = case.as_mut() {
                    c.body.push_str(&t.xml10_content());
                }
            }
            Event::CData(t) if capture == Capture::Outcome => {
                if let Some(c) = case.as_mut() {
                    c.body.push_str(&t);
                }
            }
            Event::GeneralRef(r) if capture == Capture::Outcome => {
                let text = match r.resolve_char_ref() {
                    Ok(Some(ch)) => ch.to_string(),
                    Ok(None) => quick_xml::escape::resolve_predefined_entity(&r)
                        .ok_or_else(|| format!("an unknown entity &{};", &*r))?
                        .to_string(),
                    Err(e) => return Err(format!("a bad character reference: {e}")),
                };
                if let Some(c) = case.as_mut() {
                    c.body.push_str(&text);
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    if !root_seen {
        return Err("empty: no <testsuites> or <testsuite> element".into());
    }
    if !closed || depth != 0 {
        return Err("cut short: the report ends inside an element".into());
    }
    Ok(merge_by_id(results))
}

/// The local name of an element.
fn tag(e: &BytesStart<'_>) -> String {
    tag_name(e.local_name().as_ref())
}

fn tag_name(name: &str) -> String {
    name.to_string()
}

/// The unescaped value of attribute `name`; `None` when absent or unreadable.
fn attr(e: &BytesStart<'_>, name: &str) -> Option<String> {
    e.attributes()
        .flatten()
        .find(|a| {
            let key: &str = a.key.as_ref();
            key == name
        })
        .and_then(|a| {
            a.normalized_value(quick_xml::XmlVersion::Implicit1_0)
                .ok()
                .map(|v| v.into_owned())
        })
}

/// A finished test case as a result: its id in `dialect`, its outcome, first line and place.
fn finish(c: Case, dialect: Dialect, root: &str) -> TestResult {
    let rel = |p: &str| project_relative(p, root).unwrap_or_else(|| p.to_string());
    let (file, name, file_itself) = match dialect {
        Dialect::Vitest => {
            let itself = c.name == c.classname;
            (c.classname.clone(), c.name.clone(), itself)
        }
        Dialect::Jest => {
            let itself = c.name == c.file;
            let name = if c.classname.is_empty() {
                c.name.clone()
            } else {
                format!("{} > {}", c.classname, c.name)
            };
            (c.file.clone(), name, itself)
        }
        Dialect::NodeTest => {
            if c.name.starts_with('/') {
                (rel(&c.name), String::new(), true)
            } else {
                let mut parts = c.suites.clone();
                // The root <testsuites> is not a suite; a `testsuite` named "root" is node's own.
                if parts.first().is_some_and(|p| p == "root") {
                    parts.remove(0);
                }
                parts.push(c.name.clone());
                (rel(&c.file), parts.join(" > "), false)
            }
        }
        Dialect::Pytest => {
            let file = rel(&c.file);
            if c.classname.is_empty() {
                (file, String::new(), true)
            } else {
                (
                    file.clone(),
                    pytest_name(&file, &c.classname, &c.name),
                    false,
                )
            }
        }
        Dialect::Generic => {
            let file = if c.file.is_empty() {
                c.classname.clone()
            } else {
                rel(&c.file)
            };
            let itself = c.name == file;
            (file, c.name.clone(), itself)
        }
    };
    let mut outcome = c.outcome.unwrap_or(Outcome::Pass);
    if file_itself && outcome.is_failure() {
        outcome = Outcome::Error;
    }
    let id = if file_itself {
        TestId::file_itself(file)
    } else {
        TestId::new(file, name)
    };
    let detail = format!("{}\n{}", c.message.as_deref().unwrap_or(""), c.body);
    let message = match outcome {
        Outcome::Pass => None,
        Outcome::Skipped => c.message.as_deref().and_then(first_line),
        _ => match dialect {
            // pytest's own lines start with `E`; its message attribute for a collection error
            // says only "collection failure".
            Dialect::Pytest => pytest_error_line(&c.body, outcome)
                .or_else(|| c.message.as_deref().and_then(first_line))
                .or_else(|| first_line(&c.body)),
            _ => c
                .message
                .as_deref()
                .and_then(first_line)
                .or_else(|| first_line(&c.body)),
        },
    };
    let location = outcome
        .is_failure()
        .then(|| location_in(&detail, &id.file, Path::new(root)))
        .flatten();
    TestResult {
        id,
        outcome,
        message,
        location,
        duration_ms: c
            .time
            .filter(|t| t.is_finite() && *t >= 0.0)
            .map(|t| (t * 1000.0).round() as u64),
    }
}

/// pytest's full name from `classname` (`tests.test_math.TestGroup`) and `name`: the class path
/// after the module's (`TestGroup::test_inner`), as in a node id.
fn pytest_name(file: &str, classname: &str, name: &str) -> String {
    let module = file.trim_end_matches(".py").replace('/', ".");
    let classes = classname
        .strip_prefix(&module)
        .map(|rest| rest.trim_start_matches('.'))
        .unwrap_or_else(|| {
            // A rootdir other than the project's: the module is the last dotted part naming the
            // file's stem; what follows are classes (which start with an upper-case letter).
            let stem = Path::new(file)
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            match classname.split('.').position(|p| p == stem) {
                Some(i) => {
                    let skip: usize = classname.split('.').take(i + 1).map(|p| p.len() + 1).sum();
                    classname.get(skip..).unwrap_or("")
                }
                None => "",
            }
        });
    classes
        .split('.')
        .filter(|p| !p.is_empty())
        .chain(std::iter::once(name))
        .collect::<Vec<_>>()
        .join("::")
}

/// The `E   …` line of a pytest failure text that says what went wrong: a failure's first (the
/// assertion; what follows explains it), an error's last (a syntax error's `File "…", line 1` and
/// its caret come before `SyntaxError: …`).
fn pytest_error_line(body: &str, outcome: Outcome) -> Option<String> {
    let text = strip_ansi(body);
    let mut lines = text
        .lines()
        .filter_map(|l| l.strip_prefix("E "))
        .filter_map(first_line);
    match outcome {
        Outcome::Error => lines.next_back(),
        _ => lines.next(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::model::testing::{assert_refused, detail, outcomes};

    fn root() -> &'static Path {
        Path::new("/work/p")
    }

    const VITEST: &str = r#"<?xml version="1.0" encoding="UTF-8" ?>
<testsuites name="vitest tests" tests="5" failures="2" errors="0" time="0.01">
    <testsuite name="tests/broken.test.ts" tests="1" failures="1" errors="0" skipped="0" time="0">
        <testcase classname="tests/broken.test.ts" name="tests/broken.test.ts" time="0">
            <failure message="Cannot find module &apos;./nope&apos; imported from /work/p/tests/broken.test.ts" type="Error">
Error: Cannot find module &apos;./nope&apos;
 ❯ tests/broken.test.ts:2:1
            </failure>
        </testcase>
    </testsuite>
    <testsuite name="tests/math.test.ts" tests="3" failures="1" errors="0" skipped="1" time="0.008">
        <testcase classname="tests/math.test.ts" name="add &gt; adds" time="0.0015">
        </testcase>
        <testcase classname="tests/math.test.ts" name="add &gt; is wrong" time="0.005">
            <failure message="expected 4 to be 5 // Object.is equality" type="AssertionError">
AssertionError: expected 4 to be 5 // Object.is equality
 ❯ tests/math.test.ts:5:55
            </failure>
        </testcase>
        <testcase classname="tests/math.test.ts" name="add &gt; is skipped" time="0">
            <skipped/>
        </testcase>
    </testsuite>
</testsuites>"#;

    #[test]
    fn vitest_reports() {
        let r = parse(VITEST, Dialect::Vitest, root()).unwrap();
        assert_eq!(
            outcomes(&r),
            [
                ("tests/broken.test.ts".to_string(), Outcome::Error),
                ("tests/math.test.ts::add > adds".into(), Outcome::Pass),
                (
                    "tests/math.test.ts::add > is skipped".into(),
                    Outcome::Skipped
                ),
                ("tests/math.test.ts::add > is wrong".into(), Outcome::Fail),
            ]
        );
        let broken = "Cannot find module './nope' imported from /work/p/tests/broken.test.ts";
        assert_eq!(
            detail(&r[0]),
            (Some(broken), Some("tests/broken.test.ts:2".into()))
        );
        let wrong = "expected 4 to be 5 // Object.is equality";
        assert_eq!(
            detail(&r[3]),
            (Some(wrong), Some("tests/math.test.ts:5".into()))
        );
        assert_eq!(r[3].duration_ms, Some(5));
        assert_eq!(r[1].duration_ms, Some(2));
        assert_eq!(r[1].message, None);
    }

    #[test]
    fn jest_junit_reports() {
        let xml = r#"<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="jest tests" tests="4" failures="1" errors="2" time="0.593">
  <testsuite name="add" errors="0" failures="1" skipped="1" time="0.28" tests="4">
    <testcase classname="add &gt; inner" name="adds" time="0.002" file="tests/math.test.js"></testcase>
    <testcase classname="add" name="wrong" time="0.002" file="tests/math.test.js">
      <failure>Error: expect(received).toBe(expected) // Object.is equality

Expected: 5
    at Object.toBe (/work/p/tests/math.test.js:6:41)</failure>
    </testcase>
    <testcase classname="" name="top level" time="0" file="tests/math.test.js"/>
  </testsuite>
  <testsuite name="tests/broken.test.js" errors="1" failures="0" skipped="0" time="0" tests="0">
    <testcase classname="Test suite failed to run" name="tests/broken.test.js" time="0" file="tests/broken.test.js">
      <error>  ● Test suite failed to run

    Cannot find module &apos;./nope&apos; from &apos;tests/broken.test.js&apos;
      at Object.require (tests/broken.test.js:1:11)
</error>
    </testcase>
    <testcase classname="Test suite failed to run" name="tests/broken.test.js" time="0" file="tests/broken.test.js">
      <failure>{&quot;code&quot;:&quot;MODULE_NOT_FOUND&quot;}</failure>
    </testcase>
  </testsuite>
</testsuites>"#;
        let r = parse(xml, Dialect::Jest, root()).unwrap();
        assert_eq!(
            outcomes(&r),
            [
                ("tests/broken.test.js".to_string(), Outcome::Error),
                (
                    "tests/math.test.js::add > inner > adds".into(),
                    Outcome::Pass
                ),
                ("tests/math.test.js::add > wrong".into(), Outcome::Fail),
                ("tests/math.test.js::top level".into(), Outcome::Pass),
            ]
        );
        let broken = "Cannot find module './nope' from 'tests/broken.test.js'";
        assert_eq!(
            detail(&r[0]),
            (Some(broken), Some("tests/broken.test.js:1".into()))
        );
        assert_eq!(
            detail(&r[2]),
            (
                Some("Error: expect(received).toBe(expected) // Object.is equality"),
                Some("tests/math.test.js:6".into())
            )
        );
    }

    #[test]
    fn node_test_reports() {
        let xml = r#"<?xml version="1.0" encoding="utf-8"?>
<testsuites>
	<testcase name="/work/p/test/broken.test.js" time="0.195294" classname="test" failure="test failed">
		<failure type="testCodeFailure" message="test failed">
[Error: test failed] { code: 'ERR_TEST_FAILURE' }
		</failure>
	</testcase>
	<testsuite name="add" time="0.002879" disabled="0" errors="0" tests="3" failures="1" skipped="1">
		<testcase name="adds" time="0.000632" classname="test"/>
		<testcase name="wrong" time="0.001032" classname="test" failure="Expected values to be strictly equal:4 !== 5">
			<failure type="testCodeFailure" message="Expected values to be strictly equal:&#10;&#10;4 !== 5&#10;">
      at TestContext.&lt;anonymous> (file:///work/p/test/math.test.js:5:30)
			</failure>
		</testcase>
		<testcase name="skipped" time="0.000152" classname="test">
			<skipped type="skipped" message="not today"/>
		</testcase>
	</testsuite>
	<testcase name="top" time="0.1" classname="test" file="/work/p/test/top.test.js"/>
	<!-- tests 5 -->
</testsuites>"#;
        let r = parse(xml, Dialect::NodeTest, root()).unwrap();
        assert_eq!(
            outcomes(&r),
            [
                ("add > adds".to_string(), Outcome::Pass),
                ("add > skipped".into(), Outcome::Skipped),
                ("add > wrong".into(), Outcome::Fail),
                ("test/broken.test.js".into(), Outcome::Error),
                ("test/top.test.js::top".into(), Outcome::Pass),
            ]
        );
        assert_eq!(detail(&r[1]), (Some("not today"), None));
        let wrong = "Expected values to be strictly equal:";
        assert_eq!(
            detail(&r[2]),
            (Some(wrong), Some("test/math.test.js:5".into()))
        );
        assert_eq!(detail(&r[3]), (Some("test failed"), None));
    }

    #[test]
    fn pytest_reports() {
        let xml = r#"<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests"><testsuite name="pytest" errors="2" failures="1" skipped="1" tests="6" time="0.262"><testcase classname="" name="tests.test_broken" file="tests/test_broken.py" time="0.000"><error message="collection failure">ImportError while importing test module '/work/p/tests/test_broken.py'.
Traceback:
tests/test_broken.py:1: in &lt;module&gt;
    import does_not_exist
E   ModuleNotFoundError: No module named 'does_not_exist'</error></testcase><testcase classname="" name="tests.test_syntax" file="tests/test_syntax.py" time="0.000"><error message="collection failure">/usr/lib/python3.11/ast.py:50: in parse
    return compile(source, filename, mode, flags,
E     File &quot;/work/p/tests/test_syntax.py&quot;, line 1
E       def test_x(:
E                  ^
E   SyntaxError: invalid syntax</error></testcase><testcase classname="tests.test_math" name="test_adds" file="tests/test_math.py" line="5" time="0.005" /><testcase classname="tests.test_math" name="test_wrong" file="tests/test_math.py" line="8" time="0.001"><failure message="assert 4 == 5&#10; +  where 4 = add(2, 2)">def test_wrong():
&gt;       assert add(2, 2) == 5
E       assert 4 == 5

tests/test_math.py:10: AssertionError</failure></testcase><testcase classname="tests.test_math" name="test_skipped" file="tests/test_math.py" line="11" time="0.000"><skipped type="pytest.skip" message="not today">/work/p/tests/test_math.py:12: not today</skipped></testcase><testcase classname="tests.test_math.TestGroup" name="test_inner[1-2]" file="tests/test_math.py" line="16" time="0.000" /><testcase classname="tests.test_math" name="test_fixture_error" file="tests/test_math.py" line="23" time="0.000"><error message="failed on setup with &quot;RuntimeError: fixture broke&quot;">@pytest.fixture
E       RuntimeError: fixture broke

tests/test_math.py:21: RuntimeError</error></testcase></testsuite></testsuites>"#;
        let r = parse(xml, Dialect::Pytest, root()).unwrap();
        assert_eq!(
            outcomes(&r),
            [
                ("tests/test_broken.py".to_string(), Outcome::Error),
                (
                    "tests/test_math.py::TestGroup::test_inner[1-2]".into(),
                    Outcome::Pass
                ),
                ("tests/test_math.py::test_adds".into(), Outcome::Pass),
                (
                    "tests/test_math.py::test_fixture_error".into(),
                    Outcome::Error
                ),
                ("tests/test_math.py::test_skipped".into(), Outcome::Skipped),
                ("tests/test_math.py::test_wrong".into(), Outcome::Fail),
                ("tests/test_syntax.py".into(), Outcome::Error),
            ]
        );
        assert_eq!(
            detail(&r[6]),
            (
                Some("SyntaxError: invalid syntax"),
                Some("tests/test_syntax.py:1".into())
            )
        );
        let broken = "ModuleNotFoundError: No module named 'does_not_exist'";
        assert_eq!(
            detail(&r[0]),
            (Some(broken), Some("tests/test_broken.py:1".into()))
        );
        let fixture = "RuntimeError: fixture broke";
        assert_eq!(
            detail(&r[3]),
            (Some(fixture), Some("tests/test_math.py:21".into()))
        );
        assert_eq!(
            detail(&r[5]),
            (Some("assert 4 == 5"), Some("tests/test_math.py:10".into()))
        );
        assert_eq!(detail(&r[4]), (Some("not today"), None));
    }

    #[test]
    fn pytest_names_from_another_rootdir() {
        assert_eq!(
            pytest_name("tests/test_m.py", "tests.test_m.TestA.TestB", "test_x"),
            "TestA::TestB::test_x"
        );
        assert_eq!(
            pytest_name("tests/test_m.py", "pkg.tests.test_m.TestA", "test_x"),
            "TestA::test_x"
        );
        assert_eq!(
            pytest_name("tests/test_m.py", "elsewhere", "test_x"),
            "test_x"
        );
    }

    #[test]
    fn generic_reports_and_a_lone_testsuite_root() {
        let xml = r#"<testsuite name="s"><testcase classname="pkg.Math" name="adds"/><testcase classname="pkg.Math" name="fails" file="/work/p/src/math.rs"><failure message="boom"/></testcase><testcase name="x"><error><![CDATA[crashed <hard> at src/a.rs:3]]></error></testcase></testsuite>"#;
        let r = parse(xml, Dialect::Generic, root()).unwrap();
        assert_eq!(
            outcomes(&r),
            [
                ("x".to_string(), Outcome::Error),
                ("pkg.Math::adds".into(), Outcome::Pass),
                ("src/math.rs::fails".into(), Outcome::Fail),
            ]
        );
        assert_eq!(detail(&r[2]), (Some("boom"), None));
        let crashed = "crashed <hard> at src/a.rs:3";
        assert_eq!(detail(&r[0]), (Some(crashed), Some("src/a.rs:3".into())));
    }

    #[test]
    fn what_is_not_a_report_is_an_error() {
        let cases = [
            ("", "empty"),
            ("   \n", "empty"),
            ("<html><body>500</body></html>", "not a JUnit report"),
            (
                "<testsuites><testsuite name=\"a\"><testcase name=\"t\">",
                "cut short",
            ),
            (
                "<testsuites><testcase name=\"t\"></testsuite></testsuites>",
                "not well-formed",
            ),
            (
                "<testsuites><testcase classname=\"x\"/></testsuites>",
                "without a name",
            ),
            ("<testsuites/><testsuites/>", "after the report's root"),
            (
                "<testsuites><testcase name=\"a\"><failure>&bogus;</failure></testcase></testsuites>",
                "unknown entity",
            ),
            ("{\"tests\": []}", "text outside the root element"),
            ("<testsuites/>trailing", "text outside the root element"),
        ];
        assert_refused(&cases, |xml| parse(xml, Dialect::Generic, root()));
        // An empty suite is a report, with no tests in it.
        let empty = parse(
            "<testsuites name=\"pytest tests\"><testsuite name=\"pytest\" tests=\"0\" /></testsuites>",
            Dialect::Pytest,
            root(),
        );
        assert_eq!(empty, Ok(Vec::new()));
    }

    proptest::proptest! {
        #[test]
        fn never_panics(text in "\\PC{0,400}") {
            for dialect in [Dialect::Vitest, Dialect::Jest, Dialect::NodeTest, Dialect::Pytest, Dialect::Generic] {
                let _ = parse(&text, dialect, root());
            }
        }

        #[test]
        fn never_panics_on_report_like_text(
            parts in proptest::collection::vec(proptest::sample::select(vec![
                "<testsuites>", "</testsuites>", "<testsuite name=\"a\">", "</testsuite>",
                "<testcase name=\"/x\" classname=\"/x\" file=\"f\">", "<testcase name=\"t\"/>",
                "</testcase>", "<failure message=\"m\">", "</failure>", "<error>", "</error>",
                "<skipped/>", "&lt;", "&#0;", "&#x1F600;", "<![CDATA[x]]>", "text", "\u{1b}[31m",
                " ❯ a.ts:3:1", "E   boom",
            ]), 0..24)
        ) {
            let text = parts.concat();
            for dialect in [Dialect::Vitest, Dialect::Jest, Dialect::NodeTest, Dialect::Pytest, Dialect::Generic] {
                let _ = parse(&text, dialect, root());
            }
        }
    }
}
