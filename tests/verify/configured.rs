//! A project's own command and report (`verify.command`, `verify.report`), and runs that give no
//! readable report.

use supervisor::verify::{ReportSpec, Runner, VerifyConfig};

use super::*;

/// An empty project whose tests are `command`, read from `report`.
fn configured(command: &str, report: &str) -> (Copy, Project) {
    let copy = Copy::of("typescript");
    let config = VerifyConfig {
        command: command.into(),
        report: ReportSpec::parse(report).expect("a report spec"),
        timeout_sec: Some(60),
    };
    let project = Project::new(&copy.dir, Some(&config)).expect("configured");
    assert_eq!(project.runner, Runner::Command(config));
    (copy, project)
}

fn run(copy: &Copy, project: &Project, selection: &Selection) -> Result<TestRun, NotRun> {
    let ctx = copy.context();
    common::run_bounded(120, verify::run(&ctx, project, selection))
}

const REPORT: &str = r#"<testsuites><testsuite name="s"><testcase classname="pkg" name="works" file="src/a.rs"/><testcase name="breaks" file="src/a.rs"><failure message="boom"/></testcase></testsuite></testsuites>"#;

#[test]
fn the_results_come_from_the_report_not_the_exit_status() {
    let script = format!("printf '%s' '{REPORT}' > out/junit.xml; exit 3");
    let (copy, project) = configured(&format!("mkdir -p out; {script}"), "junit:out/junit.xml");
    let run = run(&copy, &project, &Selection::All).expect("the report was read");
    assert_eq!(
        outcomes(&run),
        [
            ("src/a.rs::breaks".to_string(), Outcome::Fail),
            ("src/a.rs::works".into(), Outcome::Pass),
        ]
    );
    assert_eq!(
        result(&run, "src/a.rs", "breaks").message.as_deref(),
        Some("boom")
    );
    // A selection keeps the designated tests of the whole run.
    let one = run_selected(&copy, &project);
    assert_eq!(
        outcomes(&one),
        [("src/a.rs::works".to_string(), Outcome::Pass)]
    );
}

fn run_selected(copy: &Copy, project: &Project) -> TestRun {
    run(
        copy,
        project,
        &only(&[TestSelector::test("src/a.rs", "works")]),
    )
    .expect("ran")
}

#[test]
fn a_garbled_report_is_not_run() {
    let (copy, project) = configured(
        "printf '<testsuites><testcase name=\"a\">' > junit.xml",
        "junit:junit.xml",
    );
    let err = run(&copy, &project, &Selection::All).expect_err("unreadable");
    assert!(
        err.reason.contains("report is unreadable") && err.reason.contains("cut short"),
        "{err}"
    );
}

#[test]
fn a_missing_report_is_not_run_and_a_stale_one_is_never_read() {
    let (copy, project) = configured("exit 0", "junit:junit.xml");
    copy.write("junit.xml", REPORT);
    let err = run(&copy, &project, &Selection::All).expect_err("nothing written this time");
    assert!(err.reason.contains("junit.xml was not written"), "{err}");
    assert!(err.reason.contains("exit status 0"), "{err}");
}

#[test]
fn a_report_linked_out_of_the_project_is_not_read() {
    let outside = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(outside.path(), REPORT).unwrap();
    let (copy, project) = configured(
        &format!("ln -s '{}' junit.xml", outside.path().display()),
        "junit:junit.xml",
    );
    let err = run(&copy, &project, &Selection::All).expect_err("a link is not followed");
    assert!(err.reason.contains("not followed"), "{err}");
}

#[test]
fn a_clean_exit_with_an_empty_output_is_not_green() {
    let (copy, project) = configured("echo all good", "go-test-json");
    let err = run(&copy, &project, &Selection::All).expect_err("no events");
    assert!(err.reason.contains("not a go test -json event"), "{err}");
    let (copy, project) = configured("true", "libtest");
    let err = run(&copy, &project, &Selection::All).expect_err("no test binary");
    assert!(err.reason.contains("no test binary ran"), "{err}");
}

#[test]
fn without_go_a_go_project_is_not_run() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("go.mod"),
        "module example.com/m\n\ngo 1.22\n",
    )
    .unwrap();
    let project = Project::new(dir.path(), None).expect("go.mod");
    assert_eq!(project.runner, Runner::GoTest);
    let copy = Copy::of("python");
    let mut ctx = copy.context_with(common::path_without(&["go"]));
    ctx.dir = dir.path().to_path_buf();
    let err = common::run_bounded(60, verify::run(&ctx, &project, &Selection::All))
        .expect_err("no go anywhere");
    assert!(err.reason.contains("go not found"), "{err}");
}
