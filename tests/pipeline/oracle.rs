//! The oracle in whole runs: TestDesign writes the tests, `red` runs them on the base with the real
//! vitest, `green` on the change, `frozen` and `contract` hold the developer and the test designer
//! to them.

use super::*;

/// The designated tests, the demo's: hours (fails on the base: `2h` is not a duration there) and
/// the unknown unit's own message (the base says "not a duration").
const TESTS: &str = supervisor::demo::DURATION_TEST;
/// An existing test of the project, passing on the base.
const OLD_TEST: &str = r#"import { expect, it } from "vitest";
import { parseDuration } from "./duration";

it("reads minutes", () => {
  expect(parseDuration("15m")).toBe(900);
});
"#;

/// The demo's change: a unit table, and an error naming an unknown unit.
const CODE: &str = supervisor::demo::DURATION_V2;

fn designated() -> Value {
    json!([
        { "file": "src/duration.test.js", "name": "parseDuration > accepts hours" },
        { "file": "src/duration.test.js", "name": "parseDuration > names an unknown unit and the input" }
    ])
}

fn test_designer(files: &[(&str, &str)], extra: Value) -> Value {
    let mut steps: Vec<Value> = files
        .iter()
        .map(|(path, content)| json!({ "write": { "path": path, "content": content } }))
        .collect();
    let mut outcome = json!({
        "action": "COMPLETE", "agentName": "test-designer",
        "commentBody": "## Test Plan\n\nhours and the unknown unit, in src/duration.test.js",
        "tests": designated(),
        "contract": [
            { "criterion": "1", "tests": [designated()[0].clone()] },
            { "criterion": "an unknown unit is rejected with an error naming the input", "tests": [designated()[1].clone()] },
            { "criterion": "3", "untestable": "README wording: the auditor reads it" }
        ]
    });
    if let (Some(o), Some(e)) = (outcome.as_object_mut(), extra.as_object()) {
        o.extend(e.clone());
    }
    steps.push(json!({ "final": answer("Tests written.", outcome) }));
    Value::Array(steps)
}

fn developer(files: &[(&str, &str)]) -> Value {
    let mut steps: Vec<Value> = files
        .iter()
        .map(|(path, content)| json!({ "write": { "path": path, "content": content } }))
        .collect();
    steps.push(json!({ "final": answer("Done.", json!({
        "action": "COMPLETE", "agentName": "developer", "summary": "units table"
    })) }));
    Value::Array(steps)
}

/// The demo project with vitest as its runner and the oracle's workflow (unverifiable criteria
/// go on with a warning); `OLD_TEST` passing on the base.
fn oracle_spec() -> WorldSpec {
    let mut spec = spec();
    let mut wf: Value = serde_json::from_str(supervisor::config::DEFAULT_WORKFLOW).unwrap();
    for stage in wf["stages"].as_array_mut().unwrap() {
        if stage["status"] == "Implementation" {
            stage["hooks"] = json!([{ "gate": "frozen", "required": true }, { "gate": "green", "required": true }]);
        }
    }
    wf["contract"] = json!({ "unverifiable": "warn" });
    spec.workflow = Some(wf);
    spec.files.push((
        "package.json".into(),
        r#"{ "name": "durations", "private": true, "type": "module", "scripts": { "test": "vitest run" } }"#.into(),
    ));
    spec.files
        .push(("src/minutes.test.ts".into(), OLD_TEST.into()));
    set_role(
        &mut spec,
        "test-designer",
        vec![test_designer(&[("src/duration.test.js", TESTS)], json!({}))],
    );
    set_role(
        &mut spec,
        "developer",
        vec![developer(&[("src/duration.ts", CODE)])],
    );
    spec
}

fn gate_reports(world: &World, kind: &str) -> Vec<Value> {
    journal(world)
        .iter()
        .filter_map(|e| match &e.event {
            Event::GatesFinished { reports, .. } => Some(reports.clone()),
            _ => None,
        })
        .flatten()
        .map(|r| serde_json::to_value(r).unwrap())
        .filter(|r| r["kind"] == kind)
        .collect()
}

fn tree_of(world: &World, rev: &str) -> Vec<String> {
    let out = std::process::Command::new("git")
        .args(["diff", "--name-only", &format!("{rev}~1"), rev])
        .current_dir(&world.remote)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(String::from)
        .collect()
}

#[tokio::test]
async fn tests_written_first_fail_on_the_base_pass_on_the_change_and_the_pr_shows_it() {
    let (_d, world) = world(oracle_spec()).await;
    let r = run(&world, &[]).await;
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.summary);
    let red = gate_reports(&world, "red");
    assert_eq!(red.len(), 1, "{red:?}");
    assert_eq!(red[0]["status"], "pass", "{}", red[0]);
    let base: Vec<(String, String)> = red[0]["evidence"]["designated"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["id"]["name"].as_str().unwrap().to_string(),
                t["outcome"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        base,
        vec![
            (
                "parseDuration > accepts hours".to_string(),
                "fail".to_string()
            ),
            (
                "parseDuration > names an unknown unit and the input".to_string(),
                "fail".to_string()
            )
        ]
    );
    assert!(
        red[0]["evidence"]["passing"]
            .to_string()
            .contains("reads minutes"),
        "the base suite's passing tests are kept: {}",
        red[0]
    );
    let green = gate_reports(&world, "green");
    assert_eq!(green.last().unwrap()["status"], "pass", "{green:?}");
    // TestDesign's commit holds its test only.
    let log = std::process::Command::new("git")
        .args(["log", "--format=%H %s", "main..worktree-git-issue-1"])
        .current_dir(&world.remote)
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&log.stdout).to_string();
    let td = log
        .lines()
        .find(|l| l.contains("test-designer"))
        .unwrap_or_else(|| panic!("a commit of the test designer: {log}"));
    assert_eq!(
        tree_of(&world, td.split(' ').next().unwrap()),
        vec!["src/duration.test.js"]
    );
    let (_, _, body) = pulls(&world).into_iter().next().expect("a pull request");
    assert!(body.contains("## Proof"), "{body}");
    let hours = body
        .lines()
        .find(|l| l.contains("accepts hours"))
        .unwrap_or_else(|| panic!("{body}"));
    assert!(
        hours.contains("✖ fail") && hours.contains("✔ pass"),
        "{hours}"
    );
    assert!(body.contains("not testable: README wording"), "{body}");
    assert!(body.contains("Whole suite (vitest)"), "{body}");
    // The auditor saw the same table.
    let audit = prompts(&world)
        .into_iter()
        .find(|(name, _)| name.starts_with("Audit-"))
        .map(|(_, p)| p)
        .expect("an auditor prompt");
    assert!(
        audit.contains("## Proof") && audit.contains("accepts hours"),
        "{audit}"
    );
}

#[tokio::test]
async fn a_test_passing_on_the_base_and_a_change_outside_the_tests_go_back_to_test_design() {
    let mut spec = oracle_spec();
    let checks_nothing = TESTS.replace(
        "parseDuration(\"2h\")).toBe(7200)",
        "parseDuration(\"90s\")).toBe(90)",
    );
    set_role(
        &mut spec,
        "test-designer",
        vec![
            test_designer(
                &[
                    ("src/duration.test.js", &checks_nothing),
                    ("src/duration.ts", CODE),
                ],
                json!({}),
            ),
            test_designer(&[("src/duration.test.js", TESTS)], json!({})),
        ],
    );
    let (_d, world) = super::world(spec).await;
    let r = run(&world, &[]).await;
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.summary);
    assert_eq!(starts(&world, "TestDesign"), 2);
    let red = gate_reports(&world, "red");
    assert_eq!(red[0]["status"], "fail", "{}", red[0]);
    let first = red[0].to_string();
    assert!(
        first.contains("outside-test-paths") && first.contains("src/duration.ts"),
        "{first}"
    );
    // The bounce counted like a rejection.
    assert_eq!(r.summary["rejections"], 1, "{}", r.summary);
    // The developer found the base code: the test designer's change to it was undone.
    let mut designer_prompts: Vec<(String, String)> = prompts(&world)
        .into_iter()
        .filter(|(name, _)| name.contains("test-designer") || name.contains("TestDesign"))
        .collect();
    designer_prompts.sort();
    let second_prompt = designer_prompts
        .into_iter()
        .nth(1)
        .map(|(_, p)| p)
        .expect("a second test-designer prompt");
    assert!(
        second_prompt.contains("outside the test paths"),
        "{second_prompt}"
    );
    assert!(
        second_prompt.contains("## Where you write"),
        "{second_prompt}"
    );

    // A test that passes on the base checks nothing: sent back, counted.
    let mut spec = oracle_spec();
    set_role(
        &mut spec,
        "test-designer",
        vec![
            test_designer(&[("src/duration.test.js", &checks_nothing)], json!({})),
            test_designer(&[("src/duration.test.js", TESTS)], json!({})),
        ],
    );
    let (_d, world) = super::world(spec).await;
    let r = run(&world, &[]).await;
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.summary);
    let red = gate_reports(&world, "red");
    assert!(
        red[0]
            .to_string()
            .contains("checks nothing the issue asks for"),
        "{}",
        red[0]
    );
    assert_eq!(red.last().unwrap()["status"], "pass");
    assert_eq!(r.summary["rejections"], 1, "{}", r.summary);
}

#[tokio::test]
async fn a_developer_weakening_a_designated_test_or_breaking_another_is_sent_back() {
    let mut spec = oracle_spec();
    let weakened = TESTS.replace("it(\"accepts hours\"", "it.skip(\"accepts hours\"");
    let broken_minutes = CODE.replace("m: 60", "m: 61");
    set_role(
        &mut spec,
        "developer",
        vec![
            developer(&[
                ("src/duration.ts", CODE),
                ("src/duration.test.js", &weakened),
            ]),
            developer(&[
                ("src/duration.test.js", TESTS),
                ("src/duration.ts", &broken_minutes),
            ]),
            developer(&[("src/duration.ts", CODE)]),
        ],
    );
    let (_d, world) = super::world(spec).await;
    let r = run(&world, &[]).await;
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.summary);
    assert_eq!(starts(&world, "Implementation"), 3);
    let frozen = gate_reports(&world, "frozen");
    assert_eq!(frozen[0]["status"], "fail", "{}", frozen[0]);
    assert!(
        frozen[0].to_string().contains("accepts hours"),
        "{}",
        frozen[0]
    );
    let green = gate_reports(&world, "green");
    // Skipped, the hours test does not pass on the head either.
    assert_eq!(green[0]["status"], "fail");
    // The second attempt breaks a test that passed on the base.
    let second = green[1].to_string();
    assert_eq!(green[1]["status"], "fail", "{second}");
    assert!(
        second.contains("regression") && second.contains("reads minutes"),
        "{second}"
    );
    assert_eq!(green[2]["status"], "pass");
    // Gate bounces of the developer are not rejections.
    assert_eq!(r.summary["rejections"], 0, "{}", r.summary);
}

#[tokio::test]
async fn already_resolved_needs_the_tests_passing_on_the_base_and_the_audit() {
    let mut spec = oracle_spec();
    spec.files.push(("src/duration.ts".into(), CODE.into()));
    set_role(
        &mut spec,
        "test-designer",
        vec![test_designer(
            &[("src/duration.test.js", TESTS)],
            json!({ "alreadyResolved": true }),
        )],
    );
    set_role(
        &mut spec,
        "developer",
        vec![complete(
            "developer",
            "## Implementation\n\nNothing to change: the tests pass.",
        )],
    );
    let (_d, world) = super::world(spec).await;
    let r = run(&world, &[]).await;
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.summary);
    assert_eq!(issue_state(&world), SeedState::Closed);
    assert!(pulls(&world).is_empty());
    let closing = comments(&world)
        .into_iter()
        .map(|(_, b)| b)
        .find(|b| b.contains("## Already Resolved"))
        .expect("the closing comment");
    assert!(closing.contains("## Proof"), "{closing}");
    let hours = closing
        .lines()
        .find(|l| l.contains("accepts hours"))
        .unwrap();
    assert!(hours.matches("✔ pass").count() == 2, "{hours}");
    assert_eq!(starts(&world, "Audit"), 1, "closed only after the audit");

    // Said without proof (the tests fail on the base), it is no resolution.
    let mut spec = oracle_spec();
    set_role(
        &mut spec,
        "test-designer",
        vec![test_designer(
            &[("src/duration.test.js", TESTS)],
            json!({ "alreadyResolved": true }),
        )],
    );
    spec.settings.insert("maxRejections".into(), json!(0));
    let (_d, world) = super::world(spec).await;
    let r = run(&world, &[]).await;
    assert_eq!(r.code, 1, "{}\n{}", r.stderr, r.summary);
    assert_eq!(issue_state(&world), SeedState::Open);
    let red = gate_reports(&world, "red");
    assert!(
        red[0].to_string().contains("not already resolved"),
        "{}",
        red[0]
    );
}

#[tokio::test]
async fn an_untestable_criterion_stops_for_a_codeowner_and_a_missing_runner_is_never_green() {
    let mut spec = oracle_spec();
    spec.workflow.as_mut().unwrap()["contract"] = json!({ "unverifiable": "stop" });
    let designer = test_designer(&[("src/duration.test.js", TESTS)], json!({}));
    set_role(&mut spec, "test-designer", vec![designer.clone(), designer]);
    let (_d, world) = super::world(spec).await;
    let r = run(&world, &[]).await;
    assert_eq!(r.code, 1, "{}\n{}", r.stderr, r.summary);
    let why = r.summary["end"]["reason"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        why.contains("README wording") && why.contains("codeowner"),
        "{why}"
    );
    assert_eq!(starts(&world, "Implementation"), 0);
    assert!(
        comments(&world)
            .iter()
            .any(|(_, b)| b.contains("README wording") && b.contains("/supervisor run")),
        "one comment asks a codeowner"
    );
    // The codeowner drops the item no test can check and runs it again: it goes on.
    world.sandbox.with_state(|s| {
        let issue = s.issue_mut(1).unwrap();
        issue.body = issue
            .body
            .replace("- [ ] the README documents every accepted unit", "");
    });
    let r = run(&world, &[]).await;
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.summary);
    assert_eq!(pulls(&world).len(), 1);

    // No runner at all: refused before anything is written, naming the fix.
    let mut spec = oracle_spec();
    spec.files.retain(|(p, _)| p != "package.json");
    let (_d, world) = super::world(spec).await;
    let before = comments(&world).len();
    let r = run(&world, &[]).await;
    assert_ne!(r.code, 0, "{}\n{}", r.stderr, r.summary);
    assert!(
        r.stderr.contains("test runner") && r.stderr.contains("no test runner found"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("workflow-without-oracle"), "{}", r.stderr);
    assert_eq!(comments(&world).len(), before);
    assert_eq!(starts(&world, "TestDesign"), 0);

    // A configured command that leaves no report: red is not run, and never green.
    let mut spec = oracle_spec();
    spec.workflow.as_mut().unwrap()["verify"] =
        json!({ "command": "true", "report": "junit:reports/tests.xml" });
    let (_d, world) = super::world(spec).await;
    let r = run(&world, &[]).await;
    assert_eq!(r.code, 1, "{}\n{}", r.stderr, r.summary);
    let red = gate_reports(&world, "red");
    assert!(red[0]["status"].as_str() == Some("not-run"), "{}", red[0]);
    assert!(
        red[0].to_string().contains("reports/tests.xml"),
        "{}",
        red[0]
    );
    assert_eq!(starts(&world, "Implementation"), 0);
    assert!(pulls(&world).is_empty());
}

/// The designated tests, with a `beforeAll` that, in the phase `phase` ("red": hours do not work
/// yet; "green": they do), says it is running and waits for `<dir>/go`.
fn tests_waiting_in(phase: &str, dir: &std::path::Path) -> String {
    let hook = format!(
        r#"import {{ beforeAll }} from "vitest";
import {{ existsSync, writeFileSync }} from "node:fs";

beforeAll(async () => {{
  let phase = "green";
  try {{
    parseDuration("2h");
  }} catch {{
    phase = "red";
  }}
  if (phase === "{phase}") {{
    writeFileSync("{dir}/{phase}.running", "");
    while (!existsSync("{dir}/go")) {{
      await new Promise((r) => setTimeout(r, 50));
    }}
  }}
}});
"#,
        dir = dir.display()
    );
    format!("{TESTS}{hook}")
}

/// Kill -9 of supervisor while the oracle runs `phase`, then a resume: the same verdicts, the
/// pull request once, no comment twice.
async fn killed_during(phase: &str) {
    let outside = tempfile::tempdir().unwrap();
    let dir = outside.path().canonicalize().unwrap();
    let mut spec = oracle_spec();
    let tests = tests_waiting_in(phase, &dir);
    set_role(
        &mut spec,
        "test-designer",
        vec![test_designer(
            &[("src/duration.test.js", &tests)],
            json!({}),
        )],
    );
    let (_d, world) = super::world(spec).await;
    let mut child = command(&world, 1, &[]).spawn().unwrap();
    let running = dir.join(format!("{phase}.running"));
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    while !running.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the {phase} run never started"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    std::fs::write(dir.join("go"), "").unwrap();
    let r = run(&world, &[]).await;
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.summary);
    for kind in ["red", "green"] {
        let reports = gate_reports(&world, kind);
        assert_eq!(
            reports.len(),
            1,
            "one {kind} verdict, recorded once: {reports:?}"
        );
        assert_eq!(reports[0]["status"], "pass", "{}", reports[0]);
    }
    assert_eq!(pulls(&world).len(), 1);
    let mut markers: Vec<String> = comments(&world)
        .iter()
        .flat_map(|(_, b)| {
            b.lines()
                .filter(|l| l.starts_with("<!-- supervisor:"))
                .map(String::from)
                .collect::<Vec<_>>()
        })
        .collect();
    let all = markers.len();
    markers.sort();
    markers.dedup();
    assert_eq!(markers.len(), all, "a comment posted twice: {markers:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_during_red_then_a_resume_gives_the_same_verdict_once() {
    killed_during("red").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_during_green_then_a_resume_gives_the_same_verdict_once() {
    killed_during("green").await;
}

/// A project of another language: its files, the test designer's test file and designated names,
/// the developer's change, and an edit of the developer that deletes an assertion.
struct Language {
    files: Vec<(&'static str, &'static str)>,
    test_file: &'static str,
    tests: &'static str,
    names: [&'static str; 2],
    code: (&'static str, &'static str),
    weakened: fn(&str) -> String,
    /// The tests with the hours test checking what the base already does.
    checks_nothing: fn(&str) -> String,
    /// The change, breaking minutes (which a test of the base checks).
    breaking: fn(&str) -> String,
}

fn language_spec(l: &Language) -> WorldSpec {
    let mut spec = oracle_spec();
    spec.files = l
        .files
        .iter()
        .map(|(p, c)| (p.to_string(), c.to_string()))
        .collect();
    let designated = json!([
        { "file": l.test_file, "name": l.names[0] },
        { "file": l.test_file, "name": l.names[1] }
    ]);
    let answer_json = json!({
        "action": "COMPLETE", "agentName": "test-designer",
        "commentBody": "## Test Plan\n\nhours and the unknown unit",
        "tests": designated,
        "contract": [
            { "criterion": "1", "tests": [designated[0].clone()] },
            { "criterion": "2", "tests": [designated[1].clone()] },
            { "criterion": "3", "untestable": "README wording" }
        ]
    });
    let designer = |tests: &str| {
        json!([
            { "write": { "path": l.test_file, "content": tests } },
            { "final": answer("Tests written.", answer_json.clone()) }
        ])
    };
    set_role(
        &mut spec,
        "test-designer",
        vec![designer(&(l.checks_nothing)(l.tests)), designer(l.tests)],
    );
    let weakened = (l.weakened)(l.tests);
    let broken = (l.breaking)(l.code.1);
    set_role(
        &mut spec,
        "developer",
        vec![
            developer(&[l.code, (l.test_file, &weakened)]),
            developer(&[(l.code.0, &broken), (l.test_file, l.tests)]),
            developer(&[l.code]),
        ],
    );
    spec
}

async fn red_green_and_frozen_on(l: Language) {
    let (_d, world) = super::world(language_spec(&l)).await;
    let r = run(&world, &[]).await;
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.summary);
    // The first tests checked nothing: back to the test designer.
    let red = gate_reports(&world, "red");
    assert_eq!(red.len(), 2, "{red:?}");
    assert_eq!(red[0]["status"], "fail", "{}", red[0]);
    assert!(
        red[0]
            .to_string()
            .contains("checks nothing the issue asks for"),
        "{}",
        red[0]
    );
    assert_eq!(red[1]["status"], "pass", "{}", red[1]);
    let outcomes: Vec<&str> = red[1]["evidence"]["designated"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["fail", "fail"], "{}", red[1]);
    // The developer's first attempt deleted an assertion of a designated test: sent back.
    let frozen = gate_reports(&world, "frozen");
    assert_eq!(frozen[0]["status"], "fail", "{}", frozen[0]);
    assert!(frozen[0].to_string().contains(l.names[0]), "{}", frozen[0]);
    assert_eq!(frozen.last().unwrap()["status"], "pass");
    // The second broke minutes, which passed on the base: a regression.
    let green = gate_reports(&world, "green");
    assert_eq!(green.len(), 3, "{green:?}");
    let second = green[1].to_string();
    assert!(
        second.contains("regression") && second.contains("minutes"),
        "{second}"
    );
    assert_eq!(green[2]["status"], "pass", "{}", green[2]);
    let (_, _, body) = pulls(&world).into_iter().next().expect("a pull request");
    let row = body
        .lines()
        .find(|l2| l2.contains(l.names[0]))
        .unwrap_or_else(|| panic!("{body}"));
    assert!(row.contains("✖ fail") && row.contains("✔ pass"), "{row}");
}

#[tokio::test]
async fn pytest_red_green_and_frozen() {
    red_green_and_frozen_on(Language {
        files: vec![
            ("pyproject.toml", "[project]\nname = \"durations\"\nversion = \"0.1.0\"\n\n[tool.pytest.ini_options]\ntestpaths = [\"tests\"]\npythonpath = [\".\"]\n"),
            (".gitignore", "__pycache__/\n.pytest_cache/\n"),
            ("durations.py", "def parse(text):\n    n, unit = int(text[:-1]), text[-1]\n    return n * {\"s\": 1, \"m\": 60}[unit]\n"),
            ("tests/test_minutes.py", "from durations import parse\n\n\ndef test_minutes():\n    assert parse(\"15m\") == 900\n"),
        ],
        test_file: "tests/test_duration.py",
        tests: "import pytest\n\nfrom durations import parse\n\n\ndef test_hours():\n    assert parse(\"2h\") == 7200\n    assert parse(\"1h\") == 3600\n\n\ndef test_unknown_unit():\n    with pytest.raises(ValueError, match=\"unknown unit d in 3d\"):\n        parse(\"3d\")\n",
        names: ["test_hours", "test_unknown_unit"],
        code: (
            "durations.py",
            "UNITS = {\"s\": 1, \"m\": 60, \"h\": 3600}\n\n\ndef parse(text):\n    n, unit = int(text[:-1]), text[-1]\n    if unit not in UNITS:\n        raise ValueError(f\"unknown unit {unit} in {text}\")\n    return n * UNITS[unit]\n",
        ),
        weakened: |t| t.replace("    assert parse(\"1h\") == 3600\n", ""),
        checks_nothing: |t| {
            t.replace(
                "    assert parse(\"2h\") == 7200\n    assert parse(\"1h\") == 3600\n",
                "    assert parse(\"15m\") == 900\n",
            )
        },
        breaking: |c| c.replace("\"m\": 60", "\"m\": 61"),
    })
    .await;
}

#[tokio::test]
async fn cargo_test_red_green_and_frozen() {
    red_green_and_frozen_on(Language {
        files: vec![
            ("Cargo.toml", "[package]\nname = \"durations\"\nversion = \"0.1.0\"\nedition = \"2021\"\npublish = false\n\n[workspace]\n"),
            (".gitignore", "target/\nCargo.lock\n"),
            ("src/lib.rs", "/// Seconds in `text`: `90s`, `15m`.\npub fn parse(text: &str) -> Result<u64, String> {\n    let (n, unit) = text.split_at(text.len() - 1);\n    let n: u64 = n.parse().map_err(|_| format!(\"not a duration: {text}\"))?;\n    match unit {\n        \"s\" => Ok(n),\n        \"m\" => Ok(n * 60),\n        _ => Err(format!(\"not a duration: {text}\")),\n    }\n}\n"),
            ("tests/minutes.rs", "#[test]\nfn minutes() {\n    assert_eq!(durations::parse(\"15m\"), Ok(900));\n}\n"),
        ],
        test_file: "tests/duration.rs",
        tests: "#[test]\nfn hours() {\n    assert_eq!(durations::parse(\"2h\"), Ok(7200));\n    assert_eq!(durations::parse(\"1h\"), Ok(3600));\n}\n\n#[test]\nfn unknown_unit() {\n    assert_eq!(durations::parse(\"3d\"), Err(\"unknown unit d in 3d\".to_string()));\n}\n",
        names: ["hours", "unknown_unit"],
        code: (
            "src/lib.rs",
            "/// Seconds in `text`: `90s`, `15m`, `2h`.\npub fn parse(text: &str) -> Result<u64, String> {\n    let (n, unit) = text.split_at(text.len() - 1);\n    let n: u64 = n.parse().map_err(|_| format!(\"not a duration: {text}\"))?;\n    match unit {\n        \"s\" => Ok(n),\n        \"m\" => Ok(n * 60),\n        \"h\" => Ok(n * 3600),\n        _ => Err(format!(\"unknown unit {unit} in {text}\")),\n    }\n}\n",
        ),
        weakened: |t| t.replace("    assert_eq!(durations::parse(\"1h\"), Ok(3600));\n", ""),
        checks_nothing: |t| {
            t.replace(
                "    assert_eq!(durations::parse(\"2h\"), Ok(7200));\n    assert_eq!(durations::parse(\"1h\"), Ok(3600));\n",
                "    assert_eq!(durations::parse(\"15m\"), Ok(900));\n",
            )
        },
        breaking: |c| c.replace("Ok(n * 60)", "Ok(n * 61)"),
    })
    .await;
}

#[tokio::test]
async fn a_flaky_designated_test_is_never_green() {
    let outside = tempfile::tempdir().unwrap();
    let flip = outside.path().join("flip");
    // Hours are right in one run and wrong in the next.
    let flaky = CODE.replacen(
        "const SECONDS_PER_UNIT",
        &format!(
            "import {{ existsSync, rmSync, writeFileSync }} from \"node:fs\";\n\nfunction flip(): boolean {{\n  if (existsSync(\"{0}\")) {{\n    rmSync(\"{0}\");\n    return true;\n  }}\n  writeFileSync(\"{0}\", \"\");\n  return false;\n}}\n\nconst SECONDS_PER_UNIT",
            flip.display()
        ),
        1,
    )
    .replace(
        "return Number(match[1]) * factor;",
        "return Number(match[1]) * factor + (match[2] === \"h\" && flip() ? 1 : 0);",
    );
    let mut spec = oracle_spec();
    set_role(
        &mut spec,
        "developer",
        vec![
            developer(&[("src/duration.ts", &flaky)]),
            developer(&[("src/duration.ts", CODE)]),
        ],
    );
    let (_d, world) = super::world(spec).await;
    let r = run(&world, &[]).await;
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.summary);
    let green = gate_reports(&world, "green");
    assert_eq!(green[0]["status"], "fail", "{}", green[0]);
    let first = green[0].to_string();
    assert!(
        first.contains("flaky") && first.contains("accepts hours"),
        "{first}"
    );
    assert_eq!(green[1]["status"], "pass", "{}", green[1]);
    assert_eq!(starts(&world, "Implementation"), 2);
}

/// A developer who finds a designated test wrong sends it back to the test designer; the new
/// tests are proven red on the base code although the branch already holds the developer's work.
#[tokio::test]
async fn a_designated_test_sent_back_by_the_developer_is_proven_red_on_the_base_again() {
    let mut spec = oracle_spec();
    let wrong = TESTS.replace("toBe(7200)", "toBe(7201)");
    set_role(
        &mut spec,
        "test-designer",
        vec![
            test_designer(&[("src/duration.test.js", &wrong)], json!({})),
            test_designer(&[("src/duration.test.js", TESTS)], json!({})),
        ],
    );
    let send_back = json!([
        { "write": { "path": "src/duration.ts", "content": CODE } },
        { "final": answer("The hours test is wrong.", json!({
            "action": "COMPLETE", "agentName": "developer", "targetStatus": "TestDesign",
            "commentBody": "## Back to the tests\n\n`accepts hours` expects 7201 seconds in 2h; it is 7200."
        })) }
    ]);
    set_role(
        &mut spec,
        "developer",
        vec![send_back, developer(&[("src/duration.ts", CODE)])],
    );
    let (_d, world) = super::world(spec).await;
    let r = run(&world, &[]).await;
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.summary);
    assert_eq!(starts(&world, "TestDesign"), 2);
    let red = gate_reports(&world, "red");
    assert_eq!(red.len(), 2, "{red:?}");
    // The second RED ran with the developer's src/duration.ts put back to the base's: its tests
    // fail there, as they must.
    assert_eq!(red[1]["status"], "pass", "{}", red[1]);
    let outcomes: Vec<&str> = red[1]["evidence"]["designated"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["fail", "fail"], "{}", red[1]);
    // ... and the developer's work is back in place after it.
    let head = std::process::Command::new("git")
        .args(["show", "worktree-git-issue-1:src/duration.ts"])
        .current_dir(&world.remote)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&head.stdout), CODE);
    let designer = prompt(&world, "TestDesign-2.md");
    assert!(designer.contains("it is 7200"), "{designer}");
}
