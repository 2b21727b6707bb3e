//! What the oracle's runs are made of and what they prove, as data every room may hold: tests by a
//! stable id, their outcomes and results, the acceptance contract an answer maps, what the run gives
//! the oracle's gates and what they keep. The runs themselves are `verify`'s.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::config::Unverifiable;

/// How long one run of a project's tests may take, all of it, unless `verify.timeoutSec` says.
pub const TEST_RUN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(20 * 60);

/// A test, named the same way in every run of the project: by its file and its full name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TestId {
    /// The test's file relative to the project directory, with `/` separators (`tests/math.test.ts`,
    /// `tests/test_math.py`); for cargo the target's root file (`src/lib.rs`, `tests/math.rs`); for
    /// `go test` the package's import path. Empty when the report does not say (`node --test` before
    /// Node 22 names no files) — and for an entry about the whole run.
    pub file: String,
    /// The full name: the enclosing suites and the test as the runner nests them (`add > adds two`
    /// for vitest, jest and `node --test`; `TestGroup::test_inner` for pytest; `tests::adds` for
    /// cargo; `TestAdd/negative` for go). Empty for an entry about the file itself: a file that did
    /// not load (syntax or import error, collection error, compile error).
    pub name: String,
}

impl TestId {
    pub fn new(file: impl Into<String>, name: impl Into<String>) -> TestId {
        TestId {
            file: file.into(),
            name: name.into(),
        }
    }

    /// The entry of a file that did not load.
    pub fn file_itself(file: impl Into<String>) -> TestId {
        TestId::new(file, "")
    }

    /// The entry of the whole run (the runner failed without naming a test or a file).
    pub fn whole_run() -> TestId {
        TestId::new("", "")
    }

    /// An entry about a file (or the whole run) rather than one test.
    pub fn is_file_itself(&self) -> bool {
        self.name.is_empty()
    }
}

impl fmt::Display for TestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.file.is_empty(), self.name.is_empty()) {
            (true, true) => f.write_str("(the whole run)"),
            (false, true) => f.write_str(&self.file),
            (true, false) => f.write_str(&self.name),
            (false, false) => write!(f, "{}::{}", self.file, self.name),
        }
    }
}

/// How one test ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Pass,
    /// The test ran and did not pass: an assertion, a panic, an exception in its body.
    Fail,
    /// The test could not run: its file did not load (syntax or import error, compile error), its
    /// collection or set-up failed, or its process died before it reported.
    Error,
    /// Skipped, ignored or not selected by the runner's own filter.
    Skipped,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Fail => "fail",
            Outcome::Error => "error",
            Outcome::Skipped => "skipped",
        }
    }

    /// Fail or error: the test did not pass when it was meant to run.
    pub fn is_failure(self) -> bool {
        matches!(self, Outcome::Fail | Outcome::Error)
    }

    /// Which of two reports of one test counts: an error over a failure over a pass over a skip.
    pub fn rank(self) -> u8 {
        match self {
            Outcome::Skipped => 0,
            Outcome::Pass => 1,
            Outcome::Fail => 2,
            Outcome::Error => 3,
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A place in a file (`file:line`), as the report gives it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Location {
    /// Relative to the project directory where the report names a file inside it.
    pub file: String,
    pub line: u32,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// One test's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TestResult {
    pub id: TestId,
    pub outcome: Outcome,
    /// For a failure or an error, its first line (`expected 4 to be 5`, `assert 4 == 5`,
    /// `ModuleNotFoundError: No module named 'x'`); for a skip, its reason when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Where it failed, when the report says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<Location>,
    /// How long it took, when the report says (libtest's stable output does not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
}

impl TestResult {
    pub fn new(id: TestId, outcome: Outcome) -> TestResult {
        TestResult {
            id,
            outcome,
            message: None,
            location: None,
            duration_ms: None,
        }
    }

    pub fn with_message(mut self, message: Option<String>) -> TestResult {
        self.message = message;
        self
    }
}

/// Counts of a run's results by outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    pub passed: usize,
    pub failed: usize,
    pub errors: usize,
    pub skipped: usize,
}

impl Totals {
    pub fn of(results: &[TestResult]) -> Totals {
        let mut t = Totals::default();
        for r in results {
            match r.outcome {
                Outcome::Pass => t.passed += 1,
                Outcome::Fail => t.failed += 1,
                Outcome::Error => t.errors += 1,
                Outcome::Skipped => t.skipped += 1,
            }
        }
        t
    }

    pub fn total(&self) -> usize {
        self.passed + self.failed + self.errors + self.skipped
    }
}

impl fmt::Display for Totals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} passed, {} failed, {} errors, {} skipped",
            self.passed, self.failed, self.errors, self.skipped
        )
    }
}

/// One test or a group of tests a run is asked for. At least one of the two is set.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TestSelector {
    /// The file (as in [`TestId::file`]); `None`: any file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The full name (as in [`TestId::name`]); `None`: every test of the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl TestSelector {
    /// The test `name` of `file`.
    pub fn test(file: impl Into<String>, name: impl Into<String>) -> TestSelector {
        TestSelector {
            file: Some(file.into()),
            name: Some(name.into()),
        }
    }

    /// Every test of `file`.
    pub fn file(file: impl Into<String>) -> TestSelector {
        TestSelector {
            file: Some(file.into()),
            name: None,
        }
    }

    /// The tests called `name`, in whichever file.
    pub fn named(name: impl Into<String>) -> TestSelector {
        TestSelector {
            file: None,
            name: Some(name.into()),
        }
    }

    /// Whether the result `id` belongs to what this selects: the test itself, or an entry that
    /// stands for it — its file's entry when the file did not load, the whole run's entry, and
    /// (where the report names no files) a test of that name.
    pub fn matches(&self, id: &TestId) -> bool {
        let file = match &self.file {
            None => true,
            Some(f) => id.file.is_empty() || id.file == *f,
        };
        let name = match &self.name {
            None => true,
            Some(n) => id.name.is_empty() || id.name == *n,
        };
        file && name
    }
}

impl fmt::Display for TestSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.file, &self.name) {
            (Some(file), Some(name)) => write!(f, "{file}::{name}"),
            (Some(file), None) => f.write_str(file),
            (None, Some(name)) => f.write_str(name),
            (None, None) => f.write_str("(every test)"),
        }
    }
}

/// A test whose outcome differed between two runs of the same selection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Flaky {
    pub id: TestId,
    /// `None`: not in that run's report.
    pub first: Option<Outcome>,
    pub second: Option<Outcome>,
}

/// One acceptance criterion as the test designer mapped it: to the tests that check it, or to the
/// reason no test can.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Criterion {
    /// The criterion's text (a checklist item of the issue, or its number there: `"2"`).
    pub criterion: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tests: Vec<TestSelector>,
    /// Why no test can check it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub untestable: Option<String>,
}

/// What the run gives the oracle's gates: the designated tests and the contract from the test
/// designer's answer, the commit that holds its tests, and what an earlier oracle run recorded.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProofInput {
    pub designated: Vec<TestSelector>,
    pub criteria: Vec<Criterion>,
    /// The globs the test designer may write (what is a test path).
    pub test_paths: Vec<String>,
    /// The test designer's last commit.
    pub tests_commit: Option<String>,
    /// The test designer says the issue is already resolved: its tests pass on the base.
    pub already_resolved: bool,
    /// Files the test designer changed outside the test paths; undone before its commit.
    pub outside: Vec<String>,
    /// What RED recorded on the base code.
    pub base: Option<TestEvidence>,
    pub unverifiable: Unverifiable,
    /// The workflow's `verify` (else the runner is detected).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<crate::config::VerifyConfig>,
}

/// What an oracle gate ran and saw, kept with its report (so in the journal): what GREEN compares
/// with, and what the pull request's Proof table shows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TestEvidence {
    pub runner: String,
    pub command: String,
    /// The designated tests' results (the files' own entries where a file did not load).
    pub designated: Vec<TestResult>,
    /// The whole suite: the tests that passed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub passing: Vec<TestId>,
    /// The whole suite: the tests that failed or did not run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failing: Vec<TestId>,
    /// The whole suite's totals (`None`: the suite was not run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub totals: Option<Totals>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flaky: Vec<Flaky>,
    pub duration_ms: u64,
}

impl TestEvidence {
    /// The outcome of the designated test `id` (or of its file's entry when the file did not load).
    pub fn outcome(&self, id: &TestId) -> Option<&TestResult> {
        self.designated.iter().find(|r| r.id == *id).or_else(|| {
            self.designated
                .iter()
                .find(|r| r.id.is_file_itself() && (r.id.file == id.file || r.id.file.is_empty()))
        })
    }
}

/// The Proof table: rows, and the whole suite's totals on the base (RED) and on the head (GREEN).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProofTable {
    pub lines: Vec<ProofLine>,
    pub base: Option<Totals>,
    pub head: Option<Totals>,
    pub runner: String,
    /// The issue was found resolved on the base.
    pub already_resolved: bool,
}

/// One row of the Proof table: a criterion, one of its tests, and how that test ended on the base
/// and on the head.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProofLine {
    pub criterion: String,
    pub test: String,
    pub base: Option<(Outcome, Option<String>)>,
    pub head: Option<(Outcome, Option<String>)>,
}
