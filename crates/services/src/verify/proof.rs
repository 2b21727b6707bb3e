//! What the pipeline proves with the oracle: the acceptance contract (each criterion of the issue →
//! the tests that check it), what the oracle's gates are given by the run ([`ProofInput`]) and what
//! they keep of their runs ([`TestEvidence`]), and the judgements on those runs — pure functions,
//! so that every verdict can be checked without a runner.

use std::collections::BTreeSet;

use super::compare::Flaky;
use super::model::{Outcome, TestId, TestResult, TestRun, TestSelector};
pub use crate::evidence::{Criterion, ProofInput, ProofLine, ProofTable, TestEvidence};

/// The designated tests of an answer: its `tests` and every test its contract names, each once.
pub fn designated_of(tests: &[TestSelector], criteria: &[Criterion]) -> Vec<TestSelector> {
    let mut seen = BTreeSet::new();
    tests
        .iter()
        .chain(criteria.iter().flat_map(|c| &c.tests))
        .filter(|s| s.file.is_some() || s.name.is_some())
        .filter(|s| seen.insert((*s).clone()))
        .cloned()
        .collect()
}

/// The acceptance checklist of an issue body: each `- [ ]` / `- [x]` / `* [ ]` item, in order,
/// outside fenced code.
pub fn checklist(body: &str) -> Vec<String> {
    let mut items = Vec::new();
    let mut fenced = false;
    for line in body.lines() {
        let t = line.trim_start();
        if t.starts_with("```") || t.starts_with("~~~") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let Some(rest) = t.strip_prefix("- ").or_else(|| t.strip_prefix("* ")) else {
            continue;
        };
        let rest = rest.trim_start();
        let item = ["[ ]", "[x]", "[X]"]
            .iter()
            .find_map(|b| rest.strip_prefix(b))
            .map(str::trim);
        if let Some(item) = item.filter(|i| !i.is_empty()) {
            items.push(item.to_string());
        }
    }
    items
}

/// Text compared without case, punctuation or Markdown.
fn words(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                ' '
            }
        })
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Where a checklist item stands in the contract.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mapping {
    Tested(Vec<TestSelector>),
    Untestable(String),
    Unmapped,
}

/// Each checklist item (numbered from 1) with its mapping: a criterion whose text is the item's
/// (compared without case and punctuation, either containing the other) or its number.
pub fn map_checklist(items: &[String], criteria: &[Criterion]) -> Vec<(usize, String, Mapping)> {
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let n = i + 1;
            let w = words(item);
            let matching: Vec<&Criterion> = criteria
                .iter()
                .filter(|c| {
                    let given = c.criterion.trim().trim_start_matches('#').trim();
                    if given.parse::<usize>().is_ok() {
                        return given == n.to_string();
                    }
                    let cw = words(&c.criterion);
                    let (pw, pcw) = (format!(" {w} "), format!(" {cw} "));
                    !cw.is_empty() && (pw.contains(&pcw) || pcw.contains(&pw))
                })
                .collect();
            let tests: Vec<TestSelector> = matching.iter().flat_map(|c| c.tests.clone()).collect();
            let mapping = if !tests.is_empty() {
                Mapping::Tested(tests)
            } else if let Some(why) = matching.iter().find_map(|c| c.untestable.clone()) {
                Mapping::Untestable(why)
            } else {
                Mapping::Unmapped
            };
            (n, item.clone(), mapping)
        })
        .collect()
}

/// Whether an error is the test file's own syntax error: such a test checks nothing yet, so it is
/// no RED (an import of what does not exist yet is).
pub fn is_syntax_error(message: &str) -> bool {
    const SIGNS: [&str; 7] = [
        "SyntaxError",
        "IndentationError",
        "TabError",
        "Unexpected token",
        "ParseError",
        "Parse error",
        "expected one of",
    ];
    SIGNS.iter().any(|s| message.contains(s))
}

/// A problem a RED or GREEN judgement found, about one test (or the run).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub(crate) test: Option<TestId>,
    pub(crate) rule: &'static str,
    pub(crate) message: String,
    /// The place the runner gave (`file`, `line`).
    pub(crate) at: Option<(String, u32)>,
    /// Blocks the move (else it is only reported).
    pub(crate) blocking: bool,
}

fn problem(r: &TestResult, rule: &'static str, message: String, blocking: bool) -> Problem {
    Problem {
        test: Some(r.id.clone()),
        rule,
        message,
        at: r.location.as_ref().map(|l| (l.file.clone(), l.line)),
        blocking,
    }
}

fn first_line(r: &TestResult) -> String {
    r.message
        .as_deref()
        .and_then(|m| m.lines().next())
        .map(|l| format!(": {l}"))
        .unwrap_or_default()
}

/// RED on the designated run at the test designer's commit (the base code with its tests): every
/// designated test must fail, a failure or an error that is not a syntax error of the test itself.
/// With `already_resolved`, the other way round: every one must pass.
pub fn judge_red(
    run: &TestRun,
    designated: &[TestSelector],
    already_resolved: bool,
) -> Vec<Problem> {
    let mut problems = Vec::new();
    let d = super::designated(run, designated);
    for s in &d.missing {
        problems.push(Problem {
            test: None,
            rule: "designated-test-missing",
            message: format!("the designated test {s} is not in the run: no such test"),
            at: None,
            blocking: true,
        });
    }
    for r in run
        .results
        .iter()
        .filter(|r| designated.iter().any(|s| s.matches(&r.id)))
    {
        let wanted = if already_resolved {
            r.outcome == Outcome::Pass
        } else {
            match r.outcome {
                Outcome::Fail => true,
                Outcome::Error => !r.message.as_deref().is_some_and(is_syntax_error),
                Outcome::Pass | Outcome::Skipped => false,
            }
        };
        if wanted {
            continue;
        }
        let (rule, message) = match (already_resolved, r.outcome) {
            (true, _) => (
                "not-resolved-on-base",
                format!(
                    "{} {} on the base, so the issue is not already resolved{}",
                    r.id,
                    verb(r.outcome),
                    first_line(r)
                ),
            ),
            (false, Outcome::Pass) => (
                "passes-on-base",
                format!(
                    "{} passes on the base code: it checks nothing the issue asks for",
                    r.id
                ),
            ),
            (false, Outcome::Skipped) => (
                "skipped-on-base",
                format!("{} is skipped: a skipped test proves nothing", r.id),
            ),
            (false, _) => (
                "syntax-error",
                format!(
                    "{} does not load: a syntax error in the test itself{}",
                    r.id,
                    first_line(r)
                ),
            ),
        };
        problems.push(problem(r, rule, message, true));
    }
    problems
}

fn verb(o: Outcome) -> &'static str {
    match o {
        Outcome::Pass => "passes",
        Outcome::Fail => "fails",
        Outcome::Error => "does not run",
        Outcome::Skipped => "is skipped",
    }
}

/// RED on the whole suite at the test designer's commit: a test that is not designated and fails
/// in a file the test designer changed is one it broke (blocking); one failing elsewhere failed
/// before it (reported).
pub fn judge_base_suite(
    suite: &TestRun,
    designated: &[TestSelector],
    changed_tests: &[String],
) -> Vec<Problem> {
    suite
        .results
        .iter()
        .filter(|r| r.outcome.is_failure() && !designated.iter().any(|s| s.matches(&r.id)))
        .map(|r| {
            if changed_tests.contains(&r.id.file) {
                problem(
                    r,
                    "existing-test-broken",
                    format!(
                        "{} {} after the test designer's change to {}{}",
                        r.id,
                        verb(r.outcome),
                        r.id.file,
                        first_line(r)
                    ),
                    true,
                )
            } else {
                problem(
                    r,
                    "fails-on-base",
                    format!(
                        "{} already {} on the base{}",
                        r.id,
                        verb(r.outcome),
                        first_line(r)
                    ),
                    false,
                )
            }
        })
        .collect()
}

/// GREEN on the head: every designated test passes (in both runs: a test whose outcome changed is
/// flaky and never green), and no test that passed on the base fails. A failing test the base
/// never ran is new, and blocks too; one that failed on the base as well is reported.
pub fn judge_green(
    suite: &TestRun,
    designated: &[TestSelector],
    base: Option<&TestEvidence>,
    flaky: &[Flaky],
) -> Vec<Problem> {
    let mut problems = Vec::new();
    for f in flaky {
        problems.push(Problem {
            test: Some(f.id.clone()),
            rule: "flaky",
            message: format!(
                "{} is flaky: {} in one run, {} in the other; a flaky test never counts as green",
                f.id,
                f.first.map_or("absent", Outcome::as_str),
                f.second.map_or("absent", Outcome::as_str)
            ),
            at: None,
            blocking: true,
        });
    }
    for s in &super::designated(suite, designated).missing {
        problems.push(Problem {
            test: None,
            rule: "designated-test-missing",
            message: format!(
                "the designated test {s} is not in the run on the head: it was removed or renamed"
            ),
            at: None,
            blocking: true,
        });
    }
    let on_base = |id: &TestId| {
        base.and_then(|b| {
            if b.passing.contains(id) {
                Some(true)
            } else if b.failing.contains(id) {
                Some(false)
            } else {
                None
            }
        })
    };
    for r in &suite.results {
        if designated.iter().any(|s| s.matches(&r.id)) {
            if r.outcome != Outcome::Pass {
                problems.push(problem(
                    r,
                    "designated-not-passing",
                    format!("{} {} on the head{}", r.id, verb(r.outcome), first_line(r)),
                    true,
                ));
            }
            continue;
        }
        if !r.outcome.is_failure() {
            continue;
        }
        let (rule, message, blocking) = match on_base(&r.id) {
            Some(true) => (
                "regression",
                format!(
                    "{} passed on the base and {} on the head{}",
                    r.id,
                    verb(r.outcome),
                    first_line(r)
                ),
                true,
            ),
            Some(false) => (
                "fails-on-base",
                format!(
                    "{} {} on the head, as on the base{}",
                    r.id,
                    verb(r.outcome),
                    first_line(r)
                ),
                false,
            ),
            None => (
                "fails-on-head",
                format!("{} {} on the head{}", r.id, verb(r.outcome), first_line(r)),
                true,
            ),
        };
        problems.push(problem(r, rule, message, blocking));
    }
    problems
}

/// What `TestEvidence` (a type of a crate below) gets from this room.
pub(crate) trait TestEvidenceExt {
    /// What to keep of a designated run (and the whole suite's run, when there was one).
    fn of(
        designated_run: &TestRun,
        suite: Option<&TestRun>,
        designated: &[TestSelector],
        flaky: Vec<Flaky>,
    ) -> TestEvidence;
}

impl TestEvidenceExt for TestEvidence {
    fn of(
        designated_run: &TestRun,
        suite: Option<&TestRun>,
        designated: &[TestSelector],
        flaky: Vec<Flaky>,
    ) -> TestEvidence {
        let ids = |keep: fn(Outcome) -> bool| -> Vec<TestId> {
            suite
                .map(|s| {
                    s.results
                        .iter()
                        .filter(|r| keep(r.outcome))
                        .map(|r| r.id.clone())
                        .collect()
                })
                .unwrap_or_default()
        };
        TestEvidence {
            runner: designated_run.runner.clone(),
            command: designated_run.command.clone(),
            designated: designated_run
                .results
                .iter()
                .filter(|r| designated.iter().any(|s| s.matches(&r.id)))
                .cloned()
                .collect(),
            passing: ids(|o| o == Outcome::Pass),
            failing: ids(Outcome::is_failure),
            totals: suite.map(|s| s.totals),
            flaky,
            duration_ms: designated_run.duration_ms + suite.map_or(0, |s| s.duration_ms),
        }
    }
}

/// The Proof table's rows: each criterion's tests (a test of no criterion under `—`), with the
/// outcomes RED saw on the base and GREEN on the head; an untestable criterion gets a row of its
/// own with its reason as the test.
pub fn proof_lines(
    criteria: &[Criterion],
    designated: &[TestSelector],
    base: Option<&TestEvidence>,
    head: Option<&TestEvidence>,
) -> Vec<ProofLine> {
    let outcome = |e: Option<&TestEvidence>, s: &TestSelector| {
        e.and_then(|e| {
            e.designated
                .iter()
                .find(|r| s.matches(&r.id) && !r.id.is_file_itself())
                .or_else(|| e.designated.iter().find(|r| s.matches(&r.id)))
                .map(|r| {
                    (
                        r.outcome,
                        r.message
                            .as_deref()
                            .and_then(|m| m.lines().next())
                            .map(str::to_string),
                    )
                })
        })
    };
    let mut lines = Vec::new();
    let mut covered = BTreeSet::new();
    for c in criteria {
        if let Some(why) = &c.untestable {
            if c.tests.is_empty() {
                lines.push(ProofLine {
                    criterion: c.criterion.clone(),
                    test: format!("not testable: {why}"),
                    base: None,
                    head: None,
                });
                continue;
            }
        }
        for s in &c.tests {
            covered.insert(s.clone());
            lines.push(ProofLine {
                criterion: c.criterion.clone(),
                test: s.to_string(),
                base: outcome(base, s),
                head: outcome(head, s),
            });
        }
    }
    for s in designated.iter().filter(|s| !covered.contains(*s)) {
        lines.push(ProofLine {
            criterion: "—".into(),
            test: s.to_string(),
            base: outcome(base, s),
            head: outcome(head, s),
        });
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::model::Location;

    fn result(file: &str, name: &str, outcome: Outcome, message: Option<&str>) -> TestResult {
        let mut r = TestResult::new(TestId::new(file, name), outcome);
        r.message = message.map(str::to_string);
        r.location = message.map(|_| Location {
            file: file.to_string(),
            line: 7,
        });
        r
    }

    use crate::verify::model::testing::run_of as run;

    fn rules(problems: &[Problem]) -> Vec<(&'static str, bool)> {
        problems.iter().map(|p| (p.rule, p.blocking)).collect()
    }

    #[test]
    fn the_checklist_is_read_outside_code_and_mapped_by_text_or_number() {
        let body = "Intro\n\n- [ ] `parseDuration` accepts hours: `2h` → 7200\n* [x] an unknown unit is rejected\n```\n- [ ] not an item\n```\n- [ ] the README documents every unit\n- plain bullet\n";
        let items = checklist(body);
        assert_eq!(
            items,
            vec![
                "`parseDuration` accepts hours: `2h` → 7200",
                "an unknown unit is rejected",
                "the README documents every unit"
            ]
        );
        let criteria = vec![
            Criterion {
                criterion: "parseDuration accepts hours: 2h → 7200".into(),
                tests: vec![TestSelector::test("src/d.test.ts", "hours")],
                untestable: None,
            },
            Criterion {
                criterion: "#2".into(),
                tests: vec![TestSelector::test("src/d.test.ts", "unknown")],
                untestable: None,
            },
            Criterion {
                criterion: "README documents every unit".into(),
                tests: vec![],
                untestable: Some("prose".into()),
            },
        ];
        let mapped = map_checklist(&items, &criteria);
        assert!(matches!(&mapped[0].2, Mapping::Tested(t) if t.len() == 1));
        assert!(
            matches!(&mapped[1].2, Mapping::Tested(t) if t[0].name.as_deref() == Some("unknown"))
        );
        assert_eq!(mapped[2].2, Mapping::Untestable("prose".into()));
        assert_eq!(
            map_checklist(&items, &criteria[..1])[1].2,
            Mapping::Unmapped
        );
    }

    #[test]
    fn red_wants_failures_and_load_errors_but_not_passes_skips_or_syntax_errors() {
        let d = vec![
            TestSelector::test("a.test.ts", "fails"),
            TestSelector::test("a.test.ts", "passes"),
            TestSelector::file("b.test.ts"),
            TestSelector::file("c.test.ts"),
            TestSelector::test("a.test.ts", "skipped"),
            TestSelector::test("a.test.ts", "gone"),
        ];
        let r = run(vec![
            result(
                "a.test.ts",
                "fails",
                Outcome::Fail,
                Some("expected 7200, got NaN"),
            ),
            result("a.test.ts", "passes", Outcome::Pass, None),
            result("a.test.ts", "skipped", Outcome::Skipped, None),
            result(
                "b.test.ts",
                "",
                Outcome::Error,
                Some("Error: Cannot find module './hours'"),
            ),
            result(
                "c.test.ts",
                "",
                Outcome::Error,
                Some("SyntaxError: Unexpected token ')'"),
            ),
        ]);
        let p = judge_red(&r, &d, false);
        assert_eq!(
            rules(&p),
            vec![
                ("designated-test-missing", true),
                ("passes-on-base", true),
                ("skipped-on-base", true),
                ("syntax-error", true),
            ]
        );
        assert!(
            p[1].message.contains("checks nothing the issue asks for"),
            "{}",
            p[1].message
        );
        // Already resolved: the other way round.
        let only_pass = vec![TestSelector::test("a.test.ts", "passes")];
        assert!(judge_red(&r, &only_pass, true).is_empty());
        assert_eq!(
            rules(&judge_red(&r, &d[..1], true)),
            vec![("not-resolved-on-base", true)]
        );
    }

    #[test]
    fn a_test_broken_by_the_test_designer_blocks_an_old_failure_does_not() {
        let d = vec![TestSelector::test("new.test.ts", "hours")];
        let suite = run(vec![
            result("new.test.ts", "hours", Outcome::Fail, Some("x")),
            result("old.test.ts", "minutes", Outcome::Fail, Some("changed")),
            result(
                "other.test.ts",
                "flaky net",
                Outcome::Error,
                Some("ECONNREFUSED"),
            ),
            result("other.test.ts", "fine", Outcome::Pass, None),
        ]);
        let p = judge_base_suite(&suite, &d, &["new.test.ts".into(), "old.test.ts".into()]);
        assert_eq!(
            rules(&p),
            vec![("existing-test-broken", true), ("fails-on-base", false)]
        );
    }

    #[test]
    fn green_blocks_regressions_new_failures_flaky_and_missing_tests_not_old_failures() {
        let d = vec![
            TestSelector::test("new.test.ts", "hours"),
            TestSelector::test("new.test.ts", "renamed away"),
        ];
        let base_suite = run(vec![
            result("new.test.ts", "hours", Outcome::Fail, Some("x")),
            result("old.test.ts", "minutes", Outcome::Pass, None),
            result("old.test.ts", "broken before", Outcome::Fail, Some("y")),
        ]);
        let base = TestEvidence::of(&base_suite, Some(&base_suite), &d, Vec::new());
        assert_eq!(base.passing, vec![TestId::new("old.test.ts", "minutes")]);
        let head = run(vec![
            result("new.test.ts", "hours", Outcome::Pass, None),
            result(
                "old.test.ts",
                "minutes",
                Outcome::Fail,
                Some("expected 900"),
            ),
            result("old.test.ts", "broken before", Outcome::Fail, Some("y")),
            result("dev.test.ts", "added", Outcome::Fail, Some("z")),
        ]);
        let flaky = vec![Flaky {
            id: TestId::new("new.test.ts", "hours"),
            first: Some(Outcome::Pass),
            second: Some(Outcome::Fail),
        }];
        let p = judge_green(&head, &d, Some(&base), &flaky);
        assert_eq!(
            rules(&p),
            vec![
                ("flaky", true),
                ("designated-test-missing", true),
                ("fails-on-head", true),
                ("fails-on-base", false),
                ("regression", true),
            ]
        );
        // All well: nothing at all.
        let good = run(vec![
            result("new.test.ts", "hours", Outcome::Pass, None),
            result("new.test.ts", "renamed away", Outcome::Pass, None),
            result("old.test.ts", "minutes", Outcome::Pass, None),
        ]);
        assert!(judge_green(&good, &d, Some(&base), &[]).is_empty());
    }

    #[test]
    fn the_proof_lines_follow_the_contract_then_the_other_designated_tests() {
        let hours = TestSelector::test("d.test.ts", "hours");
        let extra = TestSelector::test("d.test.ts", "extra");
        let criteria = vec![
            Criterion {
                criterion: "hours".into(),
                tests: vec![hours.clone()],
                untestable: None,
            },
            Criterion {
                criterion: "README".into(),
                tests: vec![],
                untestable: Some("prose".into()),
            },
        ];
        let designated = designated_of(std::slice::from_ref(&extra), &criteria);
        assert_eq!(designated, vec![extra.clone(), hours.clone()]);
        let base_run = run(vec![
            result(
                "d.test.ts",
                "hours",
                Outcome::Fail,
                Some("expected 7200, got NaN\nat x"),
            ),
            result("d.test.ts", "extra", Outcome::Fail, Some("no")),
        ]);
        let head_run = run(vec![
            result("d.test.ts", "hours", Outcome::Pass, None),
            result("d.test.ts", "extra", Outcome::Pass, None),
        ]);
        let base = TestEvidence::of(&base_run, None, &designated, Vec::new());
        let head = TestEvidence::of(&head_run, None, &designated, Vec::new());
        let lines = proof_lines(&criteria, &designated, Some(&base), Some(&head));
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0].test, "d.test.ts::hours");
        assert_eq!(
            lines[0].base,
            Some((Outcome::Fail, Some("expected 7200, got NaN".into())))
        );
        assert_eq!(lines[0].head.as_ref().map(|h| h.0), Some(Outcome::Pass));
        assert_eq!(lines[1].test, "not testable: prose");
        assert_eq!(lines[2].criterion, "—");
    }
}
