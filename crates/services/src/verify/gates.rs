//! The oracle's gates: `red` after TestDesign (the designated tests fail on the base code),
//! `green` before Audit (they pass on the head, twice, and nothing that passed on the base fails),
//! `frozen` (the designated tests are as TestDesign committed them) and `contract` (every checklist
//! item of the issue maps to a designated test, or is listed as not testable).
//!
//! Their runs go through [`crate::verify`]: a runner that is missing, or a report that cannot be
//! read, is `not run` — never a pass. What `red` and `green` saw is kept with their reports
//! ([`TestEvidence`]): `green` compares with `red`'s, and the pull request's Proof table shows both.

use crate::verify::proof::TestEvidenceExt;
use std::path::Path;

use globset::{Glob, GlobSet, GlobSetBuilder};

use crate::config::{GateKind, Unverifiable};
use crate::gates::{Finding, FindingSeverity, FnGate, Gate, GateContext, GateOutcome, GateStatus};
use crate::verify::{
    self, Mapping, Problem, Project, ProofInput, Selection, TestEvidence, TestSelector,
};

/// The gate of `kind`: the oracle's here, every other one `gates`'.
pub fn gate_for(kind: GateKind) -> &'static dyn Gate {
    match kind {
        GateKind::Red => &RED,
        GateKind::Green => &GREEN,
        GateKind::Frozen => &FROZEN,
        GateKind::Contract => &CONTRACT,
        other => crate::gates::gate_for(other),
    }
}

pub(crate) static RED: FnGate = FnGate {
    kind: GateKind::Red,
    run: |_hook, ctx| Box::pin(red(ctx)),
};

pub(crate) static GREEN: FnGate = FnGate {
    kind: GateKind::Green,
    run: |_hook, ctx| Box::pin(green(ctx)),
};

pub(crate) static FROZEN: FnGate = FnGate {
    kind: GateKind::Frozen,
    run: |_hook, ctx| Box::pin(async move { frozen(ctx) }),
};

pub(crate) static CONTRACT: FnGate = FnGate {
    kind: GateKind::Contract,
    run: |_hook, ctx| Box::pin(async move { contract(ctx) }),
};

/// What the run gave the gate, or why it cannot run.
fn input(ctx: &GateContext) -> Result<&ProofInput, GateOutcome> {
    ctx.proof.as_deref().ok_or_else(|| {
        GateOutcome::not_run(
            "no designated tests: this gate runs in a workflow whose TestDesign stage writes tests (\"writes\": [\"tests\"])",
        )
    })
}

fn project(ctx: &GateContext, input: &ProofInput) -> Result<Project, GateOutcome> {
    Project::new(&ctx.dir, input.verify.as_ref()).map_err(|e| GateOutcome::not_run(format!("{e}")))
}

fn finding(p: &Problem) -> Finding {
    Finding {
        file: p.at.as_ref().map(|(f, _)| f.clone()).or_else(|| {
            p.test
                .as_ref()
                .map(|t| t.file.clone())
                .filter(|f| !f.is_empty())
        }),
        line: p.at.as_ref().map(|(_, l)| *l),
        rule: p.rule.to_string(),
        message: p.message.clone(),
        severity: if p.blocking {
            FindingSeverity::Error
        } else {
            FindingSeverity::Warning
        },
    }
}

fn outcome_of(problems: &[Problem], pass: String, evidence: TestEvidence) -> GateOutcome {
    let blocking = problems.iter().filter(|p| p.blocking).count();
    let findings: Vec<Finding> = problems.iter().map(finding).collect();
    let mut out = if blocking > 0 {
        let n = blocking;
        GateOutcome::new(
            GateStatus::Fail,
            findings,
            format!(
                "{n} problem{} with the designated tests",
                if n == 1 { "" } else { "s" }
            ),
        )
    } else {
        GateOutcome::new(GateStatus::Pass, findings, pass)
    };
    out.evidence = Some(Box::new(evidence));
    out
}

fn globs(patterns: &[String]) -> GlobSet {
    let mut b = GlobSetBuilder::new();
    for p in patterns {
        if let Ok(g) = Glob::new(p) {
            b.add(g);
        }
    }
    b.build().unwrap_or_else(|_| GlobSet::empty())
}

fn error(rule: &str, file: Option<String>, message: String) -> Finding {
    Finding {
        file,
        line: None,
        rule: rule.into(),
        message,
        severity: FindingSeverity::Error,
    }
}

/// RED: the designated tests at the test designer's commit, on the base code.
async fn red(ctx: &GateContext) -> GateOutcome {
    let input = match input(ctx) {
        Ok(i) => i,
        Err(o) => return o,
    };
    if !input.outside.is_empty() {
        let findings = input
            .outside
            .iter()
            .map(|f| {
                error(
                    "outside-test-paths",
                    Some(f.clone()),
                    format!("{f} is outside the test paths; the change was undone: TestDesign writes tests only"),
                )
            })
            .collect();
        return GateOutcome::new(
            GateStatus::Fail,
            findings,
            "TestDesign changed files outside the test paths (undone)",
        );
    }
    if input.designated.is_empty() {
        return GateOutcome::new(
            GateStatus::Fail,
            vec![error(
                "no-designated-tests",
                None,
                "TestDesign designated no test: write the tests and list them in the answer's `tests` and `contract`".into(),
            )],
            "no designated tests",
        );
    }
    let project = match project(ctx, input) {
        Ok(p) => p,
        Err(o) => return o,
    };
    // After a loop-back the branch holds the developer's work too: RED runs the tests on the
    // base code, so every other file is put back to the base while it runs.
    let swapped = match BaseCode::put_in_place(ctx, &globs(&input.test_paths)) {
        Ok(s) => s,
        Err(e) => {
            return GateOutcome::not_run(format!("could not put the base code in place: {e}"));
        }
    };
    let selection = Selection::Only(input.designated.clone());
    let designated_run = verify::run(ctx, &project, &selection).await;
    let mut problems = Vec::new();
    let mut suite = None;
    if let Ok(run) = &designated_run {
        problems = verify::judge_red(run, &input.designated, input.already_resolved);
        if problems.is_empty() {
            match verify::run(ctx, &project, &Selection::All).await {
                Ok(s) => {
                    let tests = globs(&input.test_paths);
                    let changed: Vec<String> = ctx
                        .changes
                        .files
                        .iter()
                        .filter(|f| tests.is_match(&f.path))
                        .map(|f| f.path.clone())
                        .collect();
                    problems.extend(verify::judge_base_suite(&s, &input.designated, &changed));
                    suite = Some(s);
                }
                Err(e) => {
                    drop(swapped);
                    return GateOutcome::not_run_because(
                        e.cause,
                        format!("the whole suite on the base: {}", e.reason),
                    );
                }
            }
        }
    }
    if let Err(e) = swapped.restore() {
        return GateOutcome::not_run(format!(
            "could not put the branch's files back after the run: {e}"
        ));
    }
    let run = match designated_run {
        Ok(r) => r,
        Err(e) => return GateOutcome::not_run_because(e.cause, e.reason),
    };
    let evidence = TestEvidence::of(&run, suite.as_ref(), &input.designated, Vec::new());
    let n = input.designated.len();
    let pass = if input.already_resolved {
        format!(
            "all {n} designated test(s) pass on the base: the issue is already resolved, if the audit agrees"
        )
    } else {
        format!(
            "all {n} designated test(s) fail on the base code ({})",
            run.runner
        )
    };
    outcome_of(&problems, pass, evidence)
}

/// GREEN: the designated tests pass on the head in two runs, and the whole suite has no test
/// failing that passed on the base.
async fn green(ctx: &GateContext) -> GateOutcome {
    let empty = ProofInput::default();
    let input = ctx.proof.as_deref().unwrap_or(&empty);
    let project = match project(ctx, input) {
        Ok(p) => p,
        Err(o) => return o,
    };
    let suite = match verify::run(ctx, &project, &Selection::All).await {
        Ok(s) => s,
        Err(e) => return GateOutcome::not_run_because(e.cause, e.reason),
    };
    let mut flaky = Vec::new();
    if !input.designated.is_empty() {
        let again =
            match verify::run(ctx, &project, &Selection::Only(input.designated.clone())).await {
                Ok(s) => s,
                Err(e) => return GateOutcome::not_run_because(e.cause, e.reason),
            };
        let first = designated_part(&suite, &input.designated);
        flaky = verify::flaky(&first, &again);
    }
    let problems = verify::judge_green(&suite, &input.designated, input.base.as_ref(), &flaky);
    let evidence = TestEvidence::of(&suite, Some(&suite), &input.designated, flaky);
    let t = suite.totals;
    let pass = format!(
        "{} designated test(s) pass on the head, twice; the suite: {} passed, {} failed, {} errors, {} skipped ({})",
        input.designated.len(),
        t.passed,
        t.failed,
        t.errors,
        t.skipped,
        suite.runner
    );
    if input.designated.is_empty() && suite.totals.passed == 0 {
        return GateOutcome::new(
            GateStatus::Fail,
            problems.iter().map(finding).collect(),
            "no test passed on the head: nothing shows that the change works",
        );
    }
    outcome_of(&problems, pass, evidence)
}

/// The designated tests' part of a whole-suite run, as a run of its own.
fn designated_part(suite: &verify::TestRun, designated: &[TestSelector]) -> verify::TestRun {
    let selection = Selection::Only(designated.to_vec());
    let results: Vec<_> = suite
        .results
        .iter()
        .filter(|r| selection.keeps(&r.id))
        .cloned()
        .collect();
    verify::TestRun {
        totals: verify::Totals::of(&results),
        results,
        selection,
        ..suite.clone()
    }
}

/// FROZEN: each designated file at the head against the test designer's commit.
fn frozen(ctx: &GateContext) -> GateOutcome {
    let input = match input(ctx) {
        Ok(i) => i,
        Err(o) => return o,
    };
    let Some(commit) = &input.tests_commit else {
        return GateOutcome::not_applicable("TestDesign committed no tests");
    };
    let repo = match git2::Repository::open(&ctx.dir) {
        Ok(r) => r,
        Err(e) => {
            return GateOutcome::not_run(format!("cannot open the worktree's repository: {e}"));
        }
    };
    let tree = match repo
        .revparse_single(commit)
        .and_then(|o| o.peel_to_commit())
        .and_then(|c| c.tree())
    {
        Ok(t) => t,
        Err(e) => {
            return GateOutcome::not_run(format!("cannot read TestDesign's commit {commit}: {e}"));
        }
    };
    let mut files: Vec<(&str, Vec<String>)> = Vec::new();
    for s in &input.designated {
        let Some(file) = s.file.as_deref() else {
            continue;
        };
        let names = match files.iter_mut().find(|(f, _)| *f == file) {
            Some((_, names)) => names,
            None => {
                files.push((file, Vec::new()));
                &mut files.last_mut().expect("just pushed").1
            }
        };
        if let Some(n) = &s.name {
            names.push(n.clone());
        }
    }
    let mut findings = Vec::new();
    for (file, names) in &files {
        let Some(before) = blob_text(&repo, &tree, file) else {
            continue;
        };
        let after = ctx.read_text(file);
        for v in verify::weakenings(file, &before, after.as_deref(), names) {
            findings.push(error(
                "designated-test-changed",
                Some(v.file.clone()),
                v.message(),
            ));
        }
    }
    if findings.is_empty() {
        return GateOutcome::pass(format!(
            "the designated tests of {} file(s) are as TestDesign committed them",
            files.len()
        ));
    }
    let n = findings.len();
    GateOutcome::new(
        GateStatus::Fail,
        findings,
        format!(
            "{n} designated test change(s): only TestDesign changes its tests (answer with the FEEDBACK_TESTS marker to send them back)"
        ),
    )
}

fn blob_text(repo: &git2::Repository, tree: &git2::Tree, file: &str) -> Option<String> {
    let entry = tree.get_path(Path::new(file)).ok()?;
    let blob = repo.find_blob(entry.id()).ok()?;
    std::str::from_utf8(blob.content()).ok().map(str::to_string)
}

/// CONTRACT: the issue's checklist against TestDesign's mapping.
fn contract(ctx: &GateContext) -> GateOutcome {
    let input = match input(ctx) {
        Ok(i) => i,
        Err(o) => return o,
    };
    let items = ctx
        .issue
        .as_ref()
        .map(|i| verify::checklist(&i.body))
        .unwrap_or_default();
    if items.is_empty() {
        let untested: Vec<&str> = input
            .criteria
            .iter()
            .filter(|c| c.tests.is_empty() && c.untestable.is_none())
            .map(|c| c.criterion.as_str())
            .collect();
        if !untested.is_empty() {
            return GateOutcome::new(
                GateStatus::Fail,
                untested
                    .iter()
                    .map(|c| {
                        error(
                            "criterion-unmapped",
                            None,
                            format!(
                                "criterion `{c}` names no test and no reason it cannot be tested"
                            ),
                        )
                    })
                    .collect(),
                "criteria without tests",
            );
        }
        return GateOutcome::pass(format!(
            "the issue has no checklist; TestDesign's {} criteria each name tests or why none can",
            input.criteria.len()
        ));
    }
    let mut findings = Vec::new();
    let mut untestable = Vec::new();
    for (n, item, mapping) in verify::map_checklist(&items, &input.criteria) {
        match mapping {
            Mapping::Tested(_) => {}
            Mapping::Untestable(why) => untestable.push(format!("{n}. {item} (TestDesign: {why})")),
            Mapping::Unmapped => findings.push(error(
                "criterion-unmapped",
                None,
                format!(
                    "checklist item {n}, `{item}`, maps to no designated test and is not listed as untestable: add a test, or a contract entry with \"untestable\": \"why\""
                ),
            )),
        }
    }
    if !findings.is_empty() {
        let n = findings.len();
        return GateOutcome::new(
            GateStatus::Fail,
            findings,
            format!("{n} checklist item(s) with no test"),
        );
    }
    if untestable.is_empty() {
        return GateOutcome::pass(format!(
            "all {} checklist item(s) map to designated tests",
            items.len()
        ));
    }
    match input.unverifiable {
        Unverifiable::Warn => GateOutcome::new(
            GateStatus::Warn,
            untestable
                .iter()
                .map(|u| Finding {
                    file: None,
                    line: None,
                    rule: "criterion-not-testable".into(),
                    message: format!("not verified by a test: {u}"),
                    severity: FindingSeverity::Warning,
                })
                .collect(),
            format!(
                "{} checklist item(s) no test can check; the audit checks them by reading",
                untestable.len()
            ),
        ),
        Unverifiable::Stop => GateOutcome::not_run_because(
            crate::gates::NotRunCause::Setup,
            format!(
                "no test can check {}; a codeowner decides: make the item testable in the issue, or set \"contract\": {{\"unverifiable\": \"warn\"}} in the workflow, then post `/supervisor run`",
                untestable.join("; ")
            ),
        ),
    }
}

/// The files of the change outside the test paths, put back to the base for a RED run, and back
/// to the branch's after it (also when the run is dropped: a stop).
struct BaseCode {
    dir: std::path::PathBuf,
    /// `(path, the branch's bytes or None where the base has the file and the branch not)`.
    saved: Vec<(String, Option<Vec<u8>>)>,
    done: bool,
}

impl BaseCode {
    fn put_in_place(ctx: &GateContext, tests: &GlobSet) -> Result<BaseCode, String> {
        let mut swapped = BaseCode {
            dir: ctx.dir.clone(),
            saved: Vec::new(),
            done: false,
        };
        let others: Vec<&str> = ctx
            .changes
            .files
            .iter()
            .filter(|f| !tests.is_match(&f.path))
            .map(|f| f.path.as_str())
            .collect();
        if others.is_empty() {
            swapped.done = true;
            return Ok(swapped);
        }
        let Some(base) = &ctx.changes.merge_base else {
            return Err("the branch shares no history with the base".into());
        };
        let repo = git2::Repository::open(&ctx.dir).map_err(|e| e.to_string())?;
        let tree = repo
            .revparse_single(base)
            .and_then(|o| o.peel_to_commit())
            .and_then(|c| c.tree())
            .map_err(|e| e.to_string())?;
        for path in others {
            let full = ctx.dir.join(path);
            let mine = std::fs::read(&full).ok();
            let base_bytes = tree
                .get_path(Path::new(path))
                .ok()
                .and_then(|e| repo.find_blob(e.id()).ok())
                .map(|b| b.content().to_vec());
            swapped.saved.push((path.to_string(), mine));
            match base_bytes {
                Some(bytes) => {
                    if let Some(parent) = full.parent() {
                        std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
                    }
                    std::fs::write(&full, bytes).map_err(|e| format!("{path}: {e}"))?;
                }
                None => {
                    let _ = std::fs::remove_file(&full);
                }
            }
        }
        Ok(swapped)
    }

    fn restore(mut self) -> Result<(), String> {
        self.put_back()
    }

    fn put_back(&mut self) -> Result<(), String> {
        if self.done {
            return Ok(());
        }
        self.done = true;
        let mut errors = Vec::new();
        for (path, bytes) in &self.saved {
            let full = self.dir.join(path);
            let result = match bytes {
                Some(b) => std::fs::write(&full, b),
                None => std::fs::remove_file(&full).or_else(|e| {
                    if e.kind() == std::io::ErrorKind::NotFound {
                        Ok(())
                    } else {
                        Err(e)
                    }
                }),
            };
            if let Err(e) = result {
                errors.push(format!("{path}: {e}"));
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("; "))
        }
    }
}

impl Drop for BaseCode {
    fn drop(&mut self) {
        let _ = self.put_back();
    }
}
