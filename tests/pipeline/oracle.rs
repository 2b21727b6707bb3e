//! The oracle in whole runs: TestDesign writes the tests, `red` runs them on the base with the real
//! vitest, `green` on the change, `frozen` and `contract` hold the developer and the test designer
//! to them.

use super::*;

/// The designated tests: hours (fails on the base: `2h` is not a duration there) and the unknown
/// unit's own message (the base says "not a duration").
const TESTS: &str = r#"import { describe, expect, it } from "vitest";
import { parseDuration } from "./duration";

describe("parseDuration", () => {
  it("accepts hours", () => {
    expect(parseDuration("2h")).toBe(7200);
  });
  it("names an unknown unit", () => {
    expect(() => parseDuration("3d")).toThrow(/unknown unit d in 3d/);
  });
});
"#;

/// An existing test of the project, passing on the base.
const OLD_TEST: &str = r#"import { expect, it } from "vitest";
import { parseDuration } from "./duration";

it("reads minutes", () => {
  expect(parseDuration("15m")).toBe(900);
});
"#;

const CODE: &str = r#"const SECONDS_PER_UNIT: Record<string, number> = { s: 1, m: 60, h: 3600 };

/** Parses a duration such as "90s", "15m" or "2h" into seconds. */
export function parseDuration(text: string): number {
  const match = /^(\d+)([a-z]+)$/.exec(text.trim());
  if (!match) {
    throw new Error(`not a duration: ${text}`);
  }
  const factor = SECONDS_PER_UNIT[match[2]];
  if (factor === undefined) {
    throw new Error(`unknown unit ${match[2]} in ${text}`);
  }
  return Number(match[1]) * factor;
}
"#;

fn designated() -> Value {
    json!([
        { "file": "src/duration.test.ts", "name": "parseDuration > accepts hours" },
        { "file": "src/duration.test.ts", "name": "parseDuration > names an unknown unit" }
    ])
}

fn test_designer(files: &[(&str, &str)], extra: Value) -> Value {
    let mut steps: Vec<Value> = files
        .iter()
        .map(|(path, content)| json!({ "write": { "path": path, "content": content } }))
        .collect();
    let mut outcome = json!({
        "action": "COMPLETE", "agentName": "test-designer",
        "commentBody": "## Test Plan\n\nhours and the unknown unit, in src/duration.test.ts",
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
        vec![test_designer(&[("src/duration.test.ts", TESTS)], json!({}))],
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
                "parseDuration > names an unknown unit".to_string(),
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
        vec!["src/duration.test.ts"]
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
                    ("src/duration.test.ts", &checks_nothing),
                    ("src/duration.ts", CODE),
                ],
                json!({}),
            ),
            test_designer(&[("src/duration.test.ts", TESTS)], json!({})),
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
            test_designer(&[("src/duration.test.ts", &checks_nothing)], json!({})),
            test_designer(&[("src/duration.test.ts", TESTS)], json!({})),
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
                ("src/duration.test.ts", &weakened),
            ]),
            developer(&[
                ("src/duration.test.ts", TESTS),
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
            &[("src/duration.test.ts", TESTS)],
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
            &[("src/duration.test.ts", TESTS)],
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

    let mut spec = oracle_spec();
    spec.files.retain(|(p, _)| p != "package.json");
    let (_d, world) = super::world(spec).await;
    let r = run(&world, &[]).await;
    assert_eq!(r.code, 1, "{}\n{}", r.stderr, r.summary);
    let red = gate_reports(&world, "red");
    assert!(red[0]["status"].as_str() == Some("not-run"), "{}", red[0]);
    assert!(
        red[0].to_string().contains("no test runner found"),
        "{}",
        red[0]
    );
    assert_eq!(starts(&world, "Implementation"), 0);
    assert!(pulls(&world).is_empty());
}
