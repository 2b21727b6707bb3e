//! Each traceability check on a real change: checklist coverage, test-file parity (TS/JS, Python, Go,
//! Rust), verb direction, file-count sanity, commit references, and references to deleted files.

use supervisor::config::GateKind;
use supervisor::gates::{Finding, GateContext, GateReport, GateStatus, default_hook, run_gate};

use crate::common::{Fixture, run_bounded};

fn trace(ctx: &GateContext) -> GateReport {
    run_bounded(30, async {
        run_gate(&default_hook(GateKind::Traceability), ctx).await
    })
}

fn with_rule<'a>(r: &'a GateReport, rule: &str) -> Vec<&'a Finding> {
    r.findings.iter().filter(|f| f.rule == rule).collect()
}

const BODY: &str = "\
## Prerequisites
- [ ] Node 20 installed

## Tasks
- [x] Add a `formatAmount` helper
- [ ] Show amounts in EUR
- [ ] Export invoices as XML

## Steps to reproduce
- [ ] open the dashboard
";

#[test]
fn a_faithful_change_passes_every_check() {
    let f = Fixture::new("ts-base");
    f.apply("ts-clean");
    f.write(
        "src/format.test.ts",
        "import { formatAmount } from \"./format\";\nconsole.assert(formatAmount(1) === \"1.00 EUR\");\n",
    );
    f.write("src/index.test.ts", "import \"./index\";\n");
    f.commit_all("Add formatAmount (#9)");
    let ctx = f.context_with_issue(
        9,
        "Add amount formatting",
        "- [ ] Add a `formatAmount` helper\n- [ ] Show amounts in EUR\n",
    );
    let r = trace(&ctx);
    assert_eq!(r.status, GateStatus::Pass, "{r:#?}");
    assert!(
        r.summary.contains("checklist: 2/2 items traced"),
        "{}",
        r.summary
    );
    assert!(
        r.summary.contains("commits: 1/1 reference #9"),
        "{}",
        r.summary
    );
}

#[test]
fn checklist_items_without_a_trace_are_flagged() {
    let f = Fixture::new("ts-base");
    f.apply("ts-clean");
    f.commit_all("Add formatAmount (#9)");
    let r = trace(&f.context_with_issue(9, "Add amount formatting", BODY));
    assert_eq!(r.status, GateStatus::Warn);
    let uncovered = with_rule(&r, "checklist-uncovered");
    assert_eq!(uncovered.len(), 1, "{uncovered:?}");
    assert!(uncovered[0].message.contains("Export invoices as XML"));
    // Prerequisites and reproduction steps are not work items.
    assert!(
        r.summary.contains("checklist: 2/3 items traced"),
        "{}",
        r.summary
    );
    assert!(!r.blocks(), "traceability only warns");
}

#[test]
fn sources_without_tests_are_flagged_per_language() {
    let f = Fixture::new("ts-base");
    f.apply("ts-clean"); // src/format.ts + src/index.ts (an entry point with code: not exempt)
    f.write("svc/billing.py", "def bill():\n    return 1\n");
    f.write("svc/test_billing.py", "from svc.billing import bill\n");
    f.write("svc/tax.py", "def tax():\n    return 2\n");
    f.write("pkg/calc/calc.go", "package calc\n");
    f.write("pkg/calc/calc_test.go", "package calc\n");
    f.write("pkg/fmt/fmt.go", "package fmt\n");
    f.write(
        "crate/src/inline.rs",
        "pub fn f() {}\n#[cfg(test)]\nmod tests {}\n",
    );
    f.write("crate/src/bare.rs", "pub fn g() {}\n");
    f.commit_all("Add things (#5)");
    let r = trace(&f.context_with_issue(5, "Add things", ""));
    let flagged: Vec<String> = with_rule(&r, "test-parity")
        .iter()
        .map(|f| f.location())
        .collect();
    assert_eq!(
        flagged,
        vec![
            "crate/src/bare.rs",
            "pkg/fmt/fmt.go",
            "src/format.ts",
            "src/index.ts",
            "svc/tax.py"
        ]
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>()
    );
}

#[test]
fn the_title_verb_must_match_the_direction_of_the_change() {
    let f = Fixture::new("ts-base");
    f.remove("src/orders.ts");
    f.write(
        "src/index.ts",
        "import { add } from \"./math\";\nconsole.log(add(1, 2));\n",
    );
    f.commit_all("Trim (#6)");
    let r = trace(&f.context_with_issue(6, "Add order totals", ""));
    let verb = with_rule(&r, "verb-direction");
    assert_eq!(verb.len(), 1, "{r:#?}");
    assert!(
        verb[0].message.contains("says “add”"),
        "{}",
        verb[0].message
    );
    let r = trace(&f.context_with_issue(6, "Remove order totals", ""));
    assert!(with_rule(&r, "verb-direction").is_empty(), "{r:#?}");

    let g = Fixture::new("ts-base");
    g.write("src/intl.ts", "export const locale = \"de-DE\";\n");
    g.commit_all("More (#6)");
    let r = trace(&g.context_with_issue(6, "Delete the formatter", ""));
    assert_eq!(with_rule(&r, "verb-direction").len(), 1);
    let r = trace(&g.context_with_issue(6, "Migrate formatting to Intl", ""));
    assert_eq!(
        with_rule(&r, "verb-direction").len(),
        1,
        "a migration that removes nothing"
    );
}

#[test]
fn file_counts_outside_the_sane_range_are_flagged() {
    let f = Fixture::new("ts-base");
    let r = trace(&f.context_with_issue(2, "Fix totals", ""));
    let count = with_rule(&r, "file-count");
    assert_eq!(count.len(), 1);
    assert_eq!(count[0].message, "the change touches no files");

    for i in 0..4 {
        f.write(&format!("docs/note{i}.md"), "note\n");
    }
    let mut ctx = f.context_with_issue(2, "Fix totals", "");
    ctx.settings.max_changed_files = 3;
    let r = trace(&ctx);
    assert!(
        with_rule(&r, "file-count")[0]
            .message
            .contains("touches 4 files, more than gates.maxChangedFiles (3)")
    );
}

#[test]
fn commits_must_reference_the_issue() {
    let f = Fixture::new("ts-base");
    f.write("docs/a.md", "a\n");
    f.commit_all("Document a (#8)");
    f.write("docs/b.md", "b\n");
    f.commit_all("Document b");
    let r = trace(&f.context_with_issue(8, "Document things", ""));
    let refs = with_rule(&r, "commit-reference");
    assert_eq!(refs.len(), 1);
    assert!(
        refs[0]
            .message
            .contains("1 of 2 commits do not reference #8"),
        "{}",
        refs[0].message
    );
    assert!(refs[0].message.contains("“Document b”"));
}

#[test]
fn references_to_deleted_files_are_found() {
    let f = Fixture::new("ts-base");
    f.remove("src/orders.ts");
    f.write("docs/orders.md", "See src/orders.ts for the rules.\n");
    f.commit_all("Drop orders (#3)");
    let r = trace(&f.context_with_issue(3, "Remove orders", ""));
    let stale: Vec<String> = with_rule(&r, "stale-reference")
        .iter()
        .map(|x| x.location())
        .collect();
    assert_eq!(stale, vec!["docs/orders.md:1", "src/index.ts:2"], "{r:#?}");
}

#[test]
fn without_the_issue_text_the_skipped_checks_are_said() {
    let f = Fixture::new("ts-base");
    f.apply("ts-clean");
    let r = trace(&f.context());
    assert_eq!(r.status, GateStatus::Warn);
    assert_eq!(with_rule(&r, "issue-unavailable").len(), 1);
    assert!(
        r.summary.contains("no issue text (3 checks skipped)"),
        "{}",
        r.summary
    );
}

#[test]
fn tests_the_oracle_proved_red_stand_in_for_file_name_parity() {
    use supervisor::evidence::{Outcome, ProofInput, TestEvidence, TestId, TestResult};
    let f = Fixture::new("ts-base");
    f.apply("ts-clean");
    f.commit_all("Add formatAmount (#9)");
    let mut ctx = f.context_with_issue(9, "Add amount formatting", "");
    let r = trace(&ctx);
    assert!(!with_rule(&r, "test-parity").is_empty(), "{r:#?}");
    // RED saw a designated test fail on the base: that is the change's test.
    let red = TestEvidence {
        runner: "vitest".into(),
        designated: vec![TestResult::new(
            TestId::new("test/amounts.test.ts", "formats EUR"),
            Outcome::Fail,
        )],
        ..TestEvidence::default()
    };
    ctx.proof = Some(std::sync::Arc::new(ProofInput {
        base: Some(red.clone()),
        ..ProofInput::default()
    }));
    let r = trace(&ctx);
    assert!(with_rule(&r, "test-parity").is_empty(), "{r:#?}");
    assert!(
        r.summary
            .contains("test parity: 1 designated test(s) failed on the base"),
        "{}",
        r.summary
    );
    // A RED whose designated tests passed proves nothing: file names count again.
    let mut passed = red;
    passed.designated[0].outcome = Outcome::Pass;
    ctx.proof = Some(std::sync::Arc::new(ProofInput {
        base: Some(passed),
        ..ProofInput::default()
    }));
    assert!(!with_rule(&trace(&ctx), "test-parity").is_empty());
}
