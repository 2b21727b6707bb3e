//! What runs say together: flaky tests (two runs of one selection), regressions (a base run and a
//! head run), and where the designated tests stand (RED on the base, GREEN on the head, the proof).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::model::{Outcome, TestId, TestRun, TestSelector};

pub use crate::evidence::Flaky;

/// The tests whose outcome differs between `first` and `second` (one missing from a run counts),
/// by id.
pub fn flaky(first: &TestRun, second: &TestRun) -> Vec<Flaky> {
    let ids: BTreeSet<&TestId> = first
        .results
        .iter()
        .chain(&second.results)
        .map(|r| &r.id)
        .collect();
    ids.into_iter()
        .filter_map(|id| {
            let (a, b) = (first.outcome(id), second.outcome(id));
            (a != b).then(|| Flaky {
                id: id.clone(),
                first: a,
                second: b,
            })
        })
        .collect()
}

/// How the head's results stand against the base's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Comparison {
    /// Passed on the base; fail or error on the head — directly, or because the head's file (or
    /// whole run) that holds it did not load.
    pub regressed: Vec<TestId>,
    /// Failed or errored on the base; pass on the head.
    pub fixed: Vec<TestId>,
    /// Passed on the base; not in the head's report at all (removed or renamed).
    pub vanished: Vec<TestId>,
}

/// Compare a `base` run with a `head` run of the same selection.
pub fn compare(base: &TestRun, head: &TestRun) -> Comparison {
    let mut c = Comparison::default();
    for r in base.results.iter().filter(|r| !r.id.is_file_itself()) {
        let now = outcome_in(head, &r.id);
        match (r.outcome, now) {
            (Outcome::Pass, Some(o)) if o.is_failure() => c.regressed.push(r.id.clone()),
            (Outcome::Pass, None) => c.vanished.push(r.id.clone()),
            (o, Some(Outcome::Pass)) if o.is_failure() => c.fixed.push(r.id.clone()),
            _ => {}
        }
    }
    c
}

/// The outcome of `id` in `run`: its own result, else an error when its file (or the whole run)
/// did not load there.
fn outcome_in(run: &TestRun, id: &TestId) -> Option<Outcome> {
    run.outcome(id).or_else(|| {
        [TestId::file_itself(&id.file), TestId::whole_run()]
            .iter()
            .filter_map(|f| run.outcome(f))
            .find(|o| *o == Outcome::Error)
    })
}

/// Where a run leaves the designated tests. Every list is sorted by id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Designated {
    /// Designated tests that failed (an assertion, a panic: the test ran).
    pub(crate) failed: Vec<TestId>,
    pub(crate) passed: Vec<TestId>,
    /// Designated tests — or their files, or the whole run — that errored: the test could not run.
    pub(crate) errored: Vec<TestId>,
    pub(crate) skipped: Vec<TestId>,
    /// Selectors that matched nothing in the run: no such test.
    pub(crate) missing: Vec<TestSelector>,
}

impl Designated {
    /// RED: every designated test ran and failed — none passed, errored, was skipped or is missing.
    pub fn all_fail(&self) -> bool {
        self.all_in(&self.failed)
    }

    /// GREEN: every designated test ran and passed.
    pub fn all_pass(&self) -> bool {
        self.all_in(&self.passed)
    }

    /// Whether `list` holds every designated test (and at least one), nothing missing.
    fn all_in(&self, list: &[TestId]) -> bool {
        let found = self.failed.len() + self.passed.len() + self.errored.len() + self.skipped.len();
        !list.is_empty() && list.len() == found && self.missing.is_empty()
    }
}

/// Where `run` leaves the tests `designated` selects.
pub fn designated(run: &TestRun, designated: &[TestSelector]) -> Designated {
    let mut d = Designated::default();
    let mut seen: BTreeSet<&TestId> = BTreeSet::new();
    for selector in designated {
        let matched: Vec<_> = run
            .results
            .iter()
            .filter(|r| selector.matches(&r.id))
            .collect();
        if matched.is_empty() {
            d.missing.push(selector.clone());
        }
        for r in matched {
            if !seen.insert(&r.id) {
                continue;
            }
            let list = match r.outcome {
                Outcome::Pass => &mut d.passed,
                Outcome::Fail => &mut d.failed,
                Outcome::Error => &mut d.errored,
                Outcome::Skipped => &mut d.skipped,
            };
            list.push(r.id.clone());
        }
    }
    for list in [&mut d.failed, &mut d.passed, &mut d.errored, &mut d.skipped] {
        list.sort();
    }
    d
}

/// One designated test on the base and on the head: a row of the proof.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProofRow {
    pub(crate) test: TestId,
    /// `None`: not in that run (no such test there).
    pub(crate) base: Option<Outcome>,
    pub(crate) head: Option<Outcome>,
}

impl ProofRow {
    /// Failed (not errored) on the base and passes on the head: the change made it pass.
    pub fn is_proven(&self) -> bool {
        self.base == Some(Outcome::Fail) && self.head == Some(Outcome::Pass)
    }
}

/// The designated tests of either run, each with its outcome on the base and on the head (an error
/// where its file did not load), by id.
pub fn proof(base: &TestRun, head: &TestRun, designated: &[TestSelector]) -> Vec<ProofRow> {
    let tests: BTreeSet<&TestId> = base
        .results
        .iter()
        .chain(&head.results)
        .map(|r| &r.id)
        .filter(|id| !id.is_file_itself() && designated.iter().any(|s| s.matches(id)))
        .collect();
    tests
        .into_iter()
        .map(|id| ProofRow {
            test: id.clone(),
            base: outcome_in(base, id),
            head: outcome_in(head, id),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::model::TestResult;

    fn run(results: &[(&str, &str, Outcome)]) -> TestRun {
        crate::verify::model::testing::run_of(
            results
                .iter()
                .map(|(f, n, o)| TestResult::new(TestId::new(*f, *n), *o))
                .collect(),
        )
    }

    use Outcome::{Error, Fail, Pass, Skipped};

    #[test]
    fn flaky_tests_are_those_whose_outcome_changed() {
        let a = run(&[
            ("a", "x", Pass),
            ("a", "y", Fail),
            ("a", "z", Pass),
            ("a", "gone", Pass),
        ]);
        let b = run(&[
            ("a", "x", Pass),
            ("a", "y", Pass),
            ("a", "z", Pass),
            ("a", "new", Skipped),
        ]);
        let got: Vec<(String, Option<Outcome>, Option<Outcome>)> = flaky(&a, &b)
            .into_iter()
            .map(|f| (f.id.name, f.first, f.second))
            .collect();
        assert_eq!(
            got,
            [
                ("gone".to_string(), Some(Pass), None),
                ("new".into(), None, Some(Skipped)),
                ("y".into(), Some(Fail), Some(Pass)),
            ]
        );
        assert!(flaky(&a, &a).is_empty());
    }

    #[test]
    fn regressions_fixes_and_vanished_tests() {
        let base = run(&[
            ("a", "keeps", Pass),
            ("a", "breaks", Pass),
            ("a", "heals", Fail),
            ("a", "removed", Pass),
            ("b", "in_broken_file", Pass),
            ("c", "still_failing", Fail),
        ]);
        let head = run(&[
            ("a", "keeps", Pass),
            ("a", "breaks", Fail),
            ("a", "heals", Pass),
            ("b", "", Error),
            ("c", "still_failing", Error),
        ]);
        let c = compare(&base, &head);
        let names = |ids: &[TestId]| ids.iter().map(|i| i.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&c.regressed), ["breaks", "in_broken_file"]);
        assert_eq!(names(&c.fixed), ["heals"]);
        assert_eq!(names(&c.vanished), ["removed"]);
        assert_eq!(compare(&base, &base), Comparison::default());
    }

    #[test]
    fn designated_tests_red_and_green() {
        let sel = vec![
            TestSelector::test("t.ts", "new > works"),
            TestSelector::test("t.ts", "new > also"),
        ];
        let red = designated(
            &run(&[
                ("t.ts", "new > works", Fail),
                ("t.ts", "new > also", Fail),
                ("t.ts", "old", Pass),
            ]),
            &sel,
        );
        assert!(red.all_fail() && !red.all_pass(), "{red:?}");
        assert_eq!(red.failed.len(), 2);

        // A file that does not load is not RED: the tests never ran.
        let broken = designated(&run(&[("t.ts", "", Error)]), &sel);
        assert!(!broken.all_fail());
        assert_eq!(broken.errored, [TestId::file_itself("t.ts")]);
        assert!(
            broken.missing.is_empty(),
            "the file's entry stands for its tests"
        );

        let half = designated(&run(&[("t.ts", "new > works", Fail)]), &sel);
        assert!(!half.all_fail());
        assert_eq!(half.missing, [sel[1].clone()]);

        let green = designated(
            &run(&[("t.ts", "new > works", Pass), ("t.ts", "new > also", Pass)]),
            &sel,
        );
        assert!(green.all_pass() && !green.all_fail());
        let skipped = designated(
            &run(&[
                ("t.ts", "new > works", Pass),
                ("t.ts", "new > also", Skipped),
            ]),
            &sel,
        );
        assert!(!skipped.all_pass());
        assert!(!designated(&run(&[]), &sel).all_pass());
    }

    #[test]
    fn the_proof_has_a_row_per_designated_test() {
        let sel = vec![TestSelector::file("t.ts")];
        let base = run(&[("t.ts", "", Error), ("u.ts", "other", Pass)]);
        let head = run(&[
            ("t.ts", "a", Pass),
            ("t.ts", "b", Fail),
            ("u.ts", "other", Pass),
        ]);
        let rows = proof(&base, &head, &sel);
        assert_eq!(
            rows,
            [
                ProofRow {
                    test: TestId::new("t.ts", "a"),
                    base: Some(Error),
                    head: Some(Pass)
                },
                ProofRow {
                    test: TestId::new("t.ts", "b"),
                    base: Some(Error),
                    head: Some(Fail)
                },
            ]
        );
        assert!(
            rows.iter().all(|r| !r.is_proven()),
            "an error on the base proves nothing"
        );
        let base = run(&[("t.ts", "a", Fail)]);
        let rows = proof(&base, &head, &sel);
        assert!(rows[0].is_proven() && !rows[1].is_proven());
        assert_eq!(rows[1].base, None);
    }
}
