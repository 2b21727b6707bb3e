//! What the oracle reports: tests by a stable id, their outcomes, whole runs, and which tests a run
//! was asked for.

use serde::{Deserialize, Serialize};

use crate::gates::NotRunCause;

pub use crate::evidence::{Location, Outcome, TestId, TestResult, TestSelector, Totals};

/// Which tests a run runs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "select", content = "tests", rename_all = "lowercase")]
pub enum Selection {
    /// The whole suite.
    #[default]
    All,
    /// Only these (the designated tests). The runner's own filter narrows what runs where it has
    /// one; the run's results are then kept to what the selectors match.
    Only(Vec<TestSelector>),
}

impl Selection {
    /// Whether a result with `id` belongs to the selection.
    pub(crate) fn keeps(&self, id: &TestId) -> bool {
        match self {
            Selection::All => true,
            Selection::Only(selectors) => selectors.iter().any(|s| s.matches(id)),
        }
    }

    /// The files the selection names, each once, in order (empty for the whole suite, or when a
    /// selector names no file: then every file may hold a selected test).
    pub(crate) fn files(&self) -> Vec<&str> {
        self.each_once(|s| s.file.as_deref())
    }

    /// The test names the selection names, each once — or none when a selector takes a whole file
    /// (then no name filter may narrow the run).
    pub fn names(&self) -> Vec<&str> {
        self.each_once(|s| s.name.as_deref())
    }

    /// `part` of every selector, each once in order; empty unless every selector has one.
    fn each_once<'a>(&'a self, part: impl Fn(&'a TestSelector) -> Option<&'a str>) -> Vec<&'a str> {
        let Selection::Only(selectors) = self else {
            return Vec::new();
        };
        let mut found: Vec<&str> = Vec::new();
        for s in selectors {
            match part(s) {
                None => return Vec::new(),
                Some(p) if !found.contains(&p) => found.push(p),
                Some(_) => {}
            }
        }
        found
    }
}

/// One run of a project's tests that produced a readable report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TestRun {
    /// The runner (`vitest`, `pytest`, `cargo`…).
    pub runner: String,
    /// What ran, for people (the command line; cargo's build and test commands).
    pub command: String,
    pub(crate) selection: Selection,
    /// Every result the report gave that the selection keeps, by id (one result per id).
    pub results: Vec<TestResult>,
    pub totals: Totals,
    pub(crate) duration_ms: u64,
}

impl TestRun {
    /// The result of `id`.
    pub fn get(&self, id: &TestId) -> Option<&TestResult> {
        self.results
            .binary_search_by(|r| r.id.cmp(id))
            .ok()
            .map(|i| &self.results[i])
    }

    /// The outcome of `id`.
    pub(crate) fn outcome(&self, id: &TestId) -> Option<Outcome> {
        self.get(id).map(|r| r.outcome)
    }

    /// At least one test passed and nothing failed or errored (skips aside).
    pub fn is_green(&self) -> bool {
        self.totals.passed > 0 && self.totals.failed == 0 && self.totals.errors == 0
    }
}

/// Why a run gave no answer: the runner is missing or could not start, it timed out or was
/// stopped, or its report is missing or unreadable. Never a pass.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("not run: {reason}")]
pub struct NotRun {
    pub reason: String,
    /// Whether running again unchanged may help ([`NotRunCause::is_resumable`]).
    pub cause: NotRunCause,
}

impl NotRun {
    pub(crate) fn setup(reason: impl Into<String>) -> NotRun {
        NotRun {
            reason: reason.into(),
            cause: NotRunCause::Setup,
        }
    }
}

/// Sort `results` by id and keep one result per id: the worst outcome, with its message and place.
pub(crate) fn merge_by_id(mut results: Vec<TestResult>) -> Vec<TestResult> {
    results.sort_by(|a, b| a.id.cmp(&b.id));
    let mut out: Vec<TestResult> = Vec::with_capacity(results.len());
    for r in results {
        match out.last_mut() {
            Some(last) if last.id == r.id => {
                if r.outcome.rank() > last.outcome.rank() {
                    let duration = last.duration_ms.or(r.duration_ms);
                    *last = r;
                    last.duration_ms = duration;
                }
            }
            _ => out.push(r),
        }
    }
    out
}

/// What the parsers' tests check their results with.
#[cfg(test)]
pub(crate) mod testing {
    use super::{Outcome, Selection, TestResult, TestRun, Totals};

    /// A whole-suite vitest run of `results`.
    pub(crate) fn run_of(mut results: Vec<TestResult>) -> TestRun {
        results.sort_by(|a, b| a.id.cmp(&b.id));
        TestRun {
            runner: "vitest".into(),
            command: "vitest run".into(),
            selection: Selection::All,
            totals: Totals::of(&results),
            results,
            duration_ms: 1,
        }
    }

    /// `id → outcome` of each result, in order.
    pub(crate) fn outcomes(results: &[TestResult]) -> Vec<(String, Outcome)> {
        results
            .iter()
            .map(|r| (r.id.to_string(), r.outcome))
            .collect()
    }

    /// A result's first line and place (`file:line`).
    pub(crate) fn detail(r: &TestResult) -> (Option<&str>, Option<String>) {
        (
            r.message.as_deref(),
            r.location.as_ref().map(ToString::to_string),
        )
    }

    /// Every `(input, what the error says)` case is refused, with an error saying it.
    pub(crate) fn assert_refused<T: std::fmt::Debug>(
        cases: &[(&str, &str)],
        parse: impl Fn(&str) -> Result<T, String>,
    ) {
        for (input, want) in cases {
            match parse(input) {
                Err(e) => assert!(e.contains(want), "{input:?}: {e}"),
                Ok(read) => panic!("{input:?} was read: {read:?}"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_match_the_test_its_file_entry_and_the_whole_run() {
        let one = TestSelector::test("tests/a.test.ts", "add > adds");
        let cases = [
            (TestId::new("tests/a.test.ts", "add > adds"), true),
            (TestId::new("tests/a.test.ts", "add > other"), false),
            (TestId::new("tests/b.test.ts", "add > adds"), false),
            (TestId::file_itself("tests/a.test.ts"), true),
            (TestId::file_itself("tests/b.test.ts"), false),
            (TestId::whole_run(), true),
            // The report named no file (node --test before Node 22).
            (TestId::new("", "add > adds"), true),
            (TestId::new("", "add > other"), false),
        ];
        for (id, want) in cases {
            assert_eq!(one.matches(&id), want, "{one} vs {id}");
        }
        let file = TestSelector::file("tests/a.test.ts");
        assert!(file.matches(&TestId::new("tests/a.test.ts", "anything")));
        assert!(!file.matches(&TestId::new("tests/b.test.ts", "anything")));
        let named = TestSelector::named("TestAdd");
        assert!(named.matches(&TestId::new("example.com/m", "TestAdd")));
        assert!(!named.matches(&TestId::new("example.com/m", "TestSub")));
    }

    #[test]
    fn selection_files_and_names_narrow_only_when_every_selector_says() {
        let sel = Selection::Only(vec![
            TestSelector::test("a.py", "test_x"),
            TestSelector::test("a.py", "test_y"),
            TestSelector::test("b.py", "test_x"),
        ]);
        assert_eq!(sel.files(), ["a.py", "b.py"]);
        assert_eq!(sel.names(), ["test_x", "test_y"]);
        let mixed = Selection::Only(vec![
            TestSelector::test("a.py", "test_x"),
            TestSelector::file("b.py"),
        ]);
        assert_eq!(mixed.files(), ["a.py", "b.py"]);
        assert!(mixed.names().is_empty(), "b.py is wanted whole");
        let by_name = Selection::Only(vec![TestSelector::named("test_x")]);
        assert!(by_name.files().is_empty());
        assert_eq!(by_name.names(), ["test_x"]);
        assert!(Selection::All.files().is_empty() && Selection::All.names().is_empty());
        assert!(Selection::All.keeps(&TestId::new("x", "y")));
        assert!(!sel.keeps(&TestId::new("c.py", "test_x")));
    }

    #[test]
    fn the_worst_report_of_a_test_counts() {
        let id = TestId::file_itself("tests/broken.test.js");
        let mut fail = TestResult::new(id.clone(), Outcome::Fail);
        fail.duration_ms = Some(5);
        let error = TestResult::new(id.clone(), Outcome::Error)
            .with_message(Some("Cannot find module".into()));
        let other = TestResult::new(TestId::new("a", "b"), Outcome::Pass);
        let merged = merge_by_id(vec![fail, other.clone(), error]);
        assert_eq!(merged.len(), 2);
        assert_eq!(merged[0], other);
        assert_eq!(merged[1].outcome, Outcome::Error);
        assert_eq!(merged[1].message.as_deref(), Some("Cannot find module"));
        assert_eq!(merged[1].duration_ms, Some(5));
    }

    #[test]
    fn ids_display_as_file_and_name() {
        assert_eq!(TestId::new("a.py", "T::t").to_string(), "a.py::T::t");
        assert_eq!(TestId::file_itself("a.py").to_string(), "a.py");
        assert_eq!(TestId::new("", "adds").to_string(), "adds");
        assert_eq!(TestId::whole_run().to_string(), "(the whole run)");
        let totals = Totals {
            passed: 2,
            failed: 1,
            errors: 0,
            skipped: 3,
        };
        assert_eq!(totals.total(), 6);
        assert_eq!(
            totals.to_string(),
            "2 passed, 1 failed, 0 errors, 3 skipped"
        );
    }
}
