//! The tool gates against the real tools on small projects: broken variants fail with `file:line`,
//! clean variants pass.

use supervisor::config::GateKind;
use supervisor::gates::{GateReport, GateStatus, default_hook, run_gate};

use crate::common::{Fixture, run_bounded, tools_available};

fn run(kind: GateKind, fixture: &Fixture) -> GateReport {
    let ctx = fixture.context();
    run_bounded(240, async { run_gate(&default_hook(kind), &ctx).await })
}

fn locations(r: &GateReport) -> Vec<String> {
    r.findings.iter().map(|f| f.location()).collect()
}

fn assert_status(r: &GateReport, status: GateStatus) {
    assert_eq!(r.status, status, "{r:#?}");
}

#[test]
fn tsc_fails_on_a_type_error_with_file_and_line() {
    if !tools_available(&["tsc"]) {
        return;
    }
    let f = Fixture::new("ts-base");
    f.apply("ts-type-error");
    f.commit_all("Break the sum (#3)");
    let r = run(GateKind::Tsc, &f);
    assert_status(&r, GateStatus::Fail);
    assert_eq!(locations(&r), vec!["src/index.ts:4"]);
    assert_eq!(r.findings[0].rule, "TS2345");
    assert!(
        r.summary.contains("1 type error (1 in changed files)"),
        "{}",
        r.summary
    );
    assert!(r.summary.contains("trend: first run"), "{}", r.summary);
}

#[test]
fn tsc_passes_a_clean_change_and_records_the_trend() {
    if !tools_available(&["tsc"]) {
        return;
    }
    let f = Fixture::new("ts-base");
    f.apply("ts-type-error");
    let broken = run(GateKind::Tsc, &f);
    assert_status(&broken, GateStatus::Fail);

    // The same tree again comes from the cache.
    let again = run(GateKind::Tsc, &f);
    assert_status(&again, GateStatus::Fail);
    assert!(again.summary.contains("cached"), "{}", again.summary);

    f.apply("ts-clean");
    let fixed = run(GateKind::Tsc, &f);
    assert_status(&fixed, GateStatus::Pass);
    assert!(
        fixed
            .summary
            .contains("improvement (−1 since the previous run: 1 → 0)"),
        "{}",
        fixed.summary
    );
    // The cache lives outside the change.
    let ctx = f.context();
    assert!(
        ctx.changes
            .files
            .iter()
            .all(|c| !c.path.starts_with(".supervisor")),
        "{:?}",
        ctx.changes.files
    );
}

#[test]
fn tsc_is_not_applicable_without_typescript_changes() {
    let f = Fixture::new("ts-base");
    f.write("README.md", "docs only\n");
    let r = run(GateKind::Tsc, &f);
    assert_status(&r, GateStatus::NotApplicable);
    assert!(r.summary.contains("no TypeScript"), "{}", r.summary);
}

#[test]
fn lsp_reports_the_typescript_error() {
    if !tools_available(&["typescript-language-server", "tsc"]) {
        return;
    }
    let f = Fixture::new("ts-base");
    f.apply("ts-type-error");
    let r = run(GateKind::Lsp, &f);
    assert_status(&r, GateStatus::Fail);
    assert_eq!(locations(&r), vec!["src/index.ts:4"]);
    assert!(
        r.findings[0].message.contains("not assignable"),
        "{:?}",
        r.findings
    );
    assert!(
        r.summary.contains("TypeScript/JavaScript: 1 file, 1 error"),
        "{}",
        r.summary
    );
}

#[test]
fn lsp_passes_clean_typescript() {
    if !tools_available(&["typescript-language-server", "tsc"]) {
        return;
    }
    let f = Fixture::new("ts-base");
    f.apply("ts-clean");
    let r = run(GateKind::Lsp, &f);
    assert_status(&r, GateStatus::Pass);
    assert!(r.findings.is_empty(), "{:?}", r.findings);
    assert!(r.summary.contains("2 files, 0 errors"), "{}", r.summary);
}

/// The pi extension `init --slash-commands` writes type-checks under the project's own lsp gate,
/// in a project that has neither pi's nor Node's type packages.
#[test]
fn the_pi_extension_init_writes_passes_the_lsp_gate() {
    if !tools_available(&["typescript-language-server", "tsc"]) {
        return;
    }
    let f = Fixture::new("ts-base");
    f.write(
        ".pi/extensions/supervisor/index.ts",
        include_str!("../../config/slash-commands/pi-supervisor.ts"),
    );
    f.commit_all("Install /supervisor for pi");
    let r = run(GateKind::Lsp, &f);
    assert_status(&r, GateStatus::Pass);
    assert!(r.findings.is_empty(), "{:?}", r.findings);
    assert!(r.summary.contains("1 file, 0 errors"), "{}", r.summary);
}

#[test]
fn lsp_reports_the_python_error() {
    if !tools_available(&["pylsp"]) {
        return;
    }
    let f = Fixture::new("py-base");
    f.apply("py-error");
    let r = run(GateKind::Lsp, &f);
    assert_status(&r, GateStatus::Fail);
    assert_eq!(locations(&r), vec!["app/greet.py:2"]);
    assert!(
        r.findings[0].message.contains("undefined name 'nme'"),
        "{:?}",
        r.findings
    );
    assert_eq!(r.findings[0].rule, "pyflakes");
}

#[test]
fn lsp_passes_clean_python() {
    if !tools_available(&["pylsp"]) {
        return;
    }
    let f = Fixture::new("py-base");
    f.apply("py-clean");
    let r = run(GateKind::Lsp, &f);
    assert_status(&r, GateStatus::Pass);
    assert!(
        r.summary.contains("Python: 1 file, 0 errors"),
        "{}",
        r.summary
    );
}

#[test]
fn knip_fails_on_an_unused_export_in_a_changed_file() {
    if !tools_available(&["knip"]) {
        return;
    }
    let f = Fixture::new("ts-base");
    f.apply("ts-unused-export");
    let r = run(GateKind::DeadCode, &f);
    assert_status(&r, GateStatus::Fail);
    assert_eq!(locations(&r), vec!["src/math.ts:5"]);
    assert_eq!(r.findings[0].rule, "unused-export");
    assert!(r.findings[0].message.contains("subtract"));
    assert!(
        r.summary.contains("undoes its last commit"),
        "{}",
        r.summary
    );
}

#[test]
fn knip_passes_a_clean_change() {
    if !tools_available(&["knip"]) {
        return;
    }
    let f = Fixture::new("ts-base");
    f.apply("ts-clean");
    let r = run(GateKind::DeadCode, &f);
    assert_status(&r, GateStatus::Pass);
}

#[test]
fn jscpd_classifies_an_exact_and_a_renamed_copy() {
    if !tools_available(&["jscpd"]) {
        return;
    }
    let f = Fixture::new("ts-base");
    f.apply("ts-duplicates");
    let r = run(GateKind::Duplicates, &f);
    assert_status(&r, GateStatus::Warn);
    let by_file: Vec<(String, String)> = r
        .findings
        .iter()
        .map(|x| (x.location(), x.rule.clone()))
        .collect();
    assert!(
        by_file.contains(&("src/orders-copy.ts:1".into(), "type-1-clone".into())),
        "{by_file:?}"
    );
    let renamed = r
        .findings
        .iter()
        .find(|x| x.file.as_deref() == Some("src/orders-renamed.ts"))
        .unwrap_or_else(|| panic!("no clone reported for the renamed copy: {by_file:?}"));
    assert_eq!(renamed.rule, "type-2-clone", "{renamed:?}");
    assert!(renamed.message.contains("src/orders.ts"), "{renamed:?}");
    assert!(!r.blocks());
}

/// A repository whose files are all shorter than jscpd's minimum: jscpd compares nothing and
/// writes no report, which is n/a, not a jscpd that failed.
#[test]
fn jscpd_with_no_file_long_enough_to_compare_is_not_applicable() {
    if !tools_available(&["jscpd"]) {
        return;
    }
    let f = Fixture::new("py-base");
    f.write("app/hello.py", "def hello():\n    return 'hi'\n");
    let r = run(GateKind::Duplicates, &f);
    assert_status(&r, GateStatus::NotApplicable);
    assert_eq!(
        r.summary,
        "jscpd found no file to compare: every file in a format it reads is shorter than 5 lines or over its size limits"
    );
}

#[test]
fn jscpd_passes_new_code_that_repeats_nothing() {
    if !tools_available(&["jscpd"]) {
        return;
    }
    let f = Fixture::new("ts-base");
    f.apply("ts-unique");
    let r = run(GateKind::Duplicates, &f);
    assert_status(&r, GateStatus::Pass);
}
