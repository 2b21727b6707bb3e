//! The GitHub Action as users run it: the shell steps of `action.yml`, read from the file, run by a
//! small stand-in for the Actions runner (tests/support/actions_runner.rs) against the sandbox GitHub
//! with scripted agents, temporary `GITHUB_STEP_SUMMARY`, `GITHUB_OUTPUT` and `GITHUB_ENV`, a
//! loopback release host and the already-built binary. Also: supervisor's push through a
//! checkout-style persisted credentials header, and the hardening of every workflow file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use supervisor::demo::{World, WorldSpec};

#[path = "support/actions_runner.rs"]
mod actions_runner;
#[path = "support/http_servers.rs"]
mod http_servers;
#[path = "support/specs.rs"]
mod specs;

use actions_runner::{ActionRun, Runner, release_target};
use http_servers::{GitServer, ReleaseServer, basic};
use specs::*;

const BIN: &str = env!("CARGO_BIN_EXE_supervisor");
const ACTION_DIR: &str = env!("CARGO_MANIFEST_DIR");
/// The release the tests' action ref names.
const TAG: &str = "v9.9.9";

async fn world(spec: WorldSpec) -> (tempfile::TempDir, World) {
    let dir = tempfile::tempdir().unwrap();
    let world = World::build(dir.path(), spec).await.expect("world builds");
    world
        .sandbox
        .check_conformance()
        .expect("the vendored description compiles");
    (dir, world)
}

/// The pinned gate tools of scripts/install-tools.sh are in `.tools/`; a CI run must have them.
fn gate_tools_installed() -> bool {
    let root = Path::new(ACTION_DIR).join(".tools");
    let ok = root.join("installed").is_file() && root.join("bin/tsc").exists();
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "the gate tools are missing from .tools/: run scripts/install-tools.sh"
        );
        eprintln!(
            "skipped: the install-gate-tools part (no .tools/; run scripts/install-tools.sh)"
        );
    }
    ok
}

/// The release assets of `TAG`: a tarball holding `supervisor` (a wrapper that runs the built
/// binary) and its `.sha256`, under the release host's paths.
fn release_files(dir: &Path, sha_of_other_file: bool) -> BTreeMap<String, Vec<u8>> {
    let stage = dir.join("release-stage");
    std::fs::create_dir_all(&stage).unwrap();
    let wrapper = stage.join("supervisor");
    std::fs::write(&wrapper, format!("#!/bin/sh\nexec '{BIN}' \"$@\"\n")).unwrap();
    chmod_x(&wrapper);
    let asset = format!("supervisor-{}.tar.gz", release_target());
    let tarball = dir.join(&asset);
    let ok = Command::new("tar")
        .arg("-czf")
        .arg(&tarball)
        .arg("-C")
        .arg(&stage)
        .arg("supervisor")
        .status()
        .unwrap()
        .success();
    assert!(ok, "tar");
    let hashed = if sha_of_other_file {
        &wrapper
    } else {
        &tarball
    };
    let sum = Command::new("sha256sum").arg(hashed).output().unwrap();
    let hex = String::from_utf8_lossy(&sum.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    let base = format!("acme/supervisor/releases/download/{TAG}");
    BTreeMap::from([
        (format!("{base}/{asset}"), std::fs::read(&tarball).unwrap()),
        (
            format!("{base}/{asset}.sha256"),
            format!("{hex}  {asset}\n").into_bytes(),
        ),
    ])
}

fn chmod_x(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn runner(world: &World, dir: &Path, server_url: &str) -> Runner {
    let temp = dir.join("runner-temp");
    std::fs::create_dir_all(&temp).unwrap();
    Runner {
        action_path: PathBuf::from(ACTION_DIR),
        workspace: world.repo.clone(),
        temp,
        github: BTreeMap::from([
            ("server_url".to_string(), server_url.to_string()),
            ("api_url".to_string(), world.sandbox.url()),
            ("repository".to_string(), "acme/widgets".to_string()),
            (
                "action_repository".to_string(),
                "acme/supervisor".to_string(),
            ),
            ("action_ref".to_string(), TAG.to_string()),
        ]),
        env: BTreeMap::new(),
        path_prefix: Vec::new(),
    }
}

/// The lines of the run step's log after supervisor switched workflow commands back on, checking
/// that it switched them off first and that no annotation came before.
fn annotations_after_resume(run: &ActionRun) -> Vec<String> {
    let log = &run.step("Run the pipeline").stderr;
    let lines: Vec<&str> = log.lines().collect();
    let token = lines
        .first()
        .and_then(|l| l.strip_prefix("::stop-commands::"))
        .unwrap_or_else(|| panic!("workflow commands are switched off first:\n{log}"));
    assert!(token.len() >= 20, "an unguessable resume token: {token}");
    let resume = lines
        .iter()
        .position(|l| *l == format!("::{token}::"))
        .unwrap_or_else(|| panic!("commands are switched back on:\n{log}"));
    for l in &lines[1..resume] {
        assert!(
            !l.starts_with("::error") && !l.starts_with("::warning"),
            "annotation before the resume: {l}"
        );
    }
    lines[resume + 1..].iter().map(|l| l.to_string()).collect()
}

/// Every exchange with the sandbox conformed to GitHub's published descriptions.
fn assert_conformant(world: &World) {
    if let Err(report) = world.sandbox.conformance_report() {
        panic!("{report}");
    }
}

fn assert_no_token(world: &World, run: &ActionRun) {
    for (what, text) in [
        ("the job summary", run.summary.clone()),
        ("the log", run.log()),
        ("the outputs", format!("{:?}", run.outputs)),
    ] {
        assert!(!text.contains(&world.token), "the token reached {what}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_action_downloads_its_release_runs_the_issue_and_reports() {
    let with_tools = gate_tools_installed();
    let mut spec = spec();
    if with_tools {
        spec.workflow = Some(workflow_with_hooks(json!(["ci", "traceability", "tsc"])));
    }
    let (dir, world) = world(spec).await;
    let releases = ReleaseServer::start(release_files(dir.path(), false)).await;
    let r = runner(&world, dir.path(), &releases.url);
    if with_tools {
        // The action's tool directory already holds the pinned tools: the script's stamp check
        // passes and nothing is downloaded.
        let tools = Path::new(ACTION_DIR).join(".tools").canonicalize().unwrap();
        std::os::unix::fs::symlink(tools, r.temp.join("supervisor-gate-tools")).unwrap();
    }
    let run = r
        .run(&[
            ("issue", "1"),
            ("github-token", &world.token),
            (
                "install-gate-tools",
                if with_tools { "true" } else { "false" },
            ),
        ])
        .await;
    assert!(!run.failed, "{:?}\n{}", run.names(), run.log());

    // The release binary, checked, instead of a build.
    let asset = format!("supervisor-{}.tar.gz", release_target());
    let asked = releases.requests();
    assert!(
        asked.iter().any(|p| p.ends_with(&format!("{TAG}/{asset}"))),
        "{asked:?}"
    );
    assert!(
        asked
            .iter()
            .any(|p| p.ends_with(&format!("{asset}.sha256"))),
        "{asked:?}"
    );
    assert!(
        run.step("Download supervisor")
            .stdout
            .contains("supervisor 0.1.0")
    );
    for skipped in [
        "Prepare the source build",
        "Cache the source build",
        "Build supervisor from source",
    ] {
        assert_eq!(run.step(skipped).outcome, "skipped", "{skipped}");
    }
    eprintln!(
        "supervisor ready {:?} into the action (checks, loopback download, checksum)",
        run.step("Run the pipeline").started_after
    );

    // Outputs.
    let summary: Value = serde_json::from_str(&run.outputs["summary"]).expect("summary is JSON");
    assert_eq!(run.outputs["end"], "pull-request");
    assert_eq!(summary["end"]["kind"], "pull-request");
    let pr_number = world.sandbox.with_state(|s| s.pulls()[0].number);
    let slug = format!("{}/{}", world.spec.owner, world.spec.name);
    assert!(
        run.outputs["pr-url"].ends_with(&format!("/{slug}/pull/{pr_number}")),
        "{}",
        run.outputs["pr-url"]
    );
    assert_eq!(summary["end"]["url"], run.outputs["pr-url"]);
    assert_eq!(run.outputs["score"], "1.00");
    let gates = summary["gates"].as_array().expect("latest gate reports");
    let clean = gates
        .iter()
        .all(|g| matches!(g["status"].as_str(), Some("pass" | "not-applicable")));
    assert_eq!(
        run.outputs["verdict"],
        if clean { "pass" } else { "not-blocked" }
    );
    assert!(world.repo.join(&run.outputs["journal"]).is_file());
    if with_tools {
        let tsc = gates.iter().find(|g| g["kind"] == "tsc").expect("tsc ran");
        assert_eq!(tsc["status"], "pass", "the installed tsc ran: {tsc}");
    }
    assert_eq!(
        world
            .sandbox
            .with_state(|s| s.column_of(1).map(String::from)),
        Some("Done".into())
    );

    // The job summary.
    let md = &run.summary;
    for part in [
        &format!("## supervisor · {slug}#1 — "),
        "**✔ approved — pull request opened",
        &format!("Pull request: [#{pr_number}]({})", run.outputs["pr-url"]),
        "### Agents",
        "| Research | researcher | 1 |",
        "| Implementation | developer | 1 |",
        "### Gates",
        "#### Latest gate run",
        "### Audit score",
        "8/8 (1.00) against the threshold 0.75 — passed",
        "### Run map\n\n```mermaid\nflowchart LR\n",
    ] {
        assert!(md.contains(part), "job summary lacks {part:?}:\n{md}");
    }

    // Annotations: one per warning finding with a file, after commands are back on.
    let annotations = annotations_after_resume(&run);
    for g in gates {
        for f in g["findings"].as_array().into_iter().flatten() {
            if f["severity"] == "warning" && f["file"].is_string() {
                let prefix = format!("::warning file={}", f["file"].as_str().unwrap());
                assert!(
                    annotations.iter().any(|a| a.starts_with(&prefix)),
                    "{prefix} in {annotations:?}"
                );
            }
        }
    }
    assert!(
        annotations.iter().all(|a| !a.starts_with("::error")),
        "{annotations:?}"
    );
    assert_no_token(&world, &run);
    assert_conformant(&world);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_release_the_action_builds_from_source_and_reports_a_stop() {
    let mut spec = spec();
    spec.workflow = Some(workflow_with_hooks(json!([
        "traceability",
        { "gate": "command", "name": "slow-tests", "run": "sleep 10", "timeoutSec": 1, "required": true }
    ])));
    let (dir, world) = world(spec).await;
    let releases = ReleaseServer::start(BTreeMap::new()).await;
    // cargo stands in for the build: it records its arguments and installs the built binary.
    let fake = dir.path().join("fake-bin");
    std::fs::create_dir_all(&fake).unwrap();
    let cargo_log = dir.path().join("cargo.log");
    std::fs::write(
        fake.join("cargo"),
        format!(
            "#!/bin/sh\necho \"$@\" > '{}'\nroot=''\nprev=''\nfor a in \"$@\"; do [ \"$prev\" = --root ] && root=$a; prev=$a; done\n\
             mkdir -p \"$root/bin\"\nprintf '#!/bin/sh\\nexec %s \"$@\"\\n' \"'{BIN}'\" > \"$root/bin/supervisor\"\nchmod +x \"$root/bin/supervisor\"\n",
            cargo_log.display()
        ),
    )
    .unwrap();
    chmod_x(&fake.join("cargo"));
    let mut r = runner(&world, dir.path(), &releases.url);
    r.path_prefix.push(fake);
    let run = r
        .run(&[("issue", "1"), ("github-token", &world.token)])
        .await;

    let download = run.step("Download supervisor");
    assert_eq!(download.outcome, "success", "{}", download.stderr);
    assert!(
        download.stdout.contains(&format!(
            "::notice title=supervisor::release {TAG} has no supervisor-{}.tar.gz",
            release_target()
        )),
        "{}",
        download.stdout
    );
    let cache = run.step("Cache the source build");
    assert_eq!(cache.outcome, "uses");
    let root = r.temp.join("supervisor-source");
    assert_eq!(cache.with["path"], root.display().to_string());
    assert!(
        cache.with["key"].starts_with("supervisor-source-Linux-"),
        "{:?}",
        cache.with
    );
    assert_eq!(run.step("Build supervisor from source").outcome, "success");
    assert_eq!(
        std::fs::read_to_string(&cargo_log).unwrap().trim(),
        format!(
            "install --locked --quiet --path {ACTION_DIR} --root {}",
            root.display()
        )
    );

    // The required gate could not run: the run stops, the step fails, the outputs say why.
    let step = run.step("Run the pipeline");
    assert_eq!(
        (step.outcome, step.code),
        ("failure", Some(1)),
        "{}",
        step.stderr
    );
    assert!(run.failed);
    assert_eq!(run.outputs["end"], "stopped");
    assert_eq!(run.outputs["pr-url"], "");
    assert_eq!(run.outputs["verdict"], "blocked");
    assert!(
        run.summary.contains("**✖ stopped in Implementation"),
        "{}",
        run.summary
    );
    let annotations = annotations_after_resume(&run);
    assert!(
        annotations.iter().any(|a| a
            .starts_with("::error title=supervisor slow-tests::slow-tests%3A")
            || a.starts_with(
                "::error title=supervisor slow-tests::slow-tests: not run (required)"
            )),
        "{annotations:?}"
    );
    assert_no_token(&world, &run);
    assert_conformant(&world);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_action_refuses_bad_inputs_a_bad_checksum_and_a_non_codeowner() {
    let (dir, world) = world(spec()).await;
    let releases = ReleaseServer::start(release_files(dir.path(), true)).await;
    let r = runner(&world, dir.path(), &releases.url);
    let token = world.token.clone();

    // An issue "number" that would run a command if it were pasted into the script.
    let marker = dir.path().join("injected");
    let evil = format!("1$(touch {})", marker.display());
    let run = r.run(&[("issue", &evil), ("github-token", &token)]).await;
    assert!(run.failed);
    let check = run.step("Check inputs");
    assert_eq!(check.outcome, "failure");
    assert!(
        check.stdout.contains("::error title=supervisor::input 'issue' must be an issue number such as 42, got '1??touch ?"),
        "{}",
        check.stdout
    );
    assert!(!marker.exists(), "the input ran as a command");
    assert!(
        run.steps[1..].iter().all(|s| s.outcome == "skipped"),
        "{:?}",
        run.names()
    );

    for (inputs, message) in [
        (
            vec![
                ("issue", "1"),
                ("github-token", token.as_str()),
                ("install-gate-tools", "yes"),
            ],
            "input 'install-gate-tools' must be true or false, got 'yes'",
        ),
        (vec![("issue", "1")], "no credentials: give github-token"),
        (
            vec![
                ("issue", "1"),
                ("github-token", token.as_str()),
                ("version", "../../evil"),
            ],
            "input 'version' must be a release tag such as v0.2.0",
        ),
    ] {
        let run = r.run(&inputs).await;
        assert!(run.failed);
        assert!(
            run.step("Check inputs").stdout.contains(message),
            "{message}: {}",
            run.log()
        );
    }

    // A release whose checksum does not match is never run, nor replaced by a build.
    let run = r.run(&[("issue", "1"), ("github-token", &token)]).await;
    let download = run.step("Download supervisor");
    assert_eq!(download.outcome, "failure");
    assert!(
        download
            .stdout
            .contains("checksum mismatch for supervisor-"),
        "{}",
        download.stdout
    );
    assert_eq!(run.step("Run the pipeline").outcome, "skipped");
    assert_eq!(run.step("Build supervisor from source").outcome, "skipped");

    // Someone who is not a codeowner asked (a /supervisor comment): refused before any GitHub call.
    let requests_before = world.sandbox.request_total();
    let run = r
        .run(&[
            ("issue", "1"),
            ("github-token", &token),
            ("binary", BIN),
            ("requested-by", "mallory"),
        ])
        .await;
    assert_eq!(run.step("Download supervisor").outcome, "skipped");
    let step = run.step("Run the pipeline");
    assert_eq!(step.code, Some(1), "{}", step.stderr);
    assert_eq!(run.outputs["end"], "refused");
    assert!(
        run.summary
            .contains("@mallory asked for this run but is not a codeowner (alice)"),
        "{}",
        run.summary
    );
    assert_eq!(
        world.sandbox.request_total(),
        requests_before,
        "nothing reached GitHub"
    );
    assert_no_token(&world, &run);
    assert_conformant(&world);
}

#[tokio::test]
async fn the_action_plans_an_epic_for_a_codeowner_only() {
    let mut s = spec();
    let plan = json!({ "tasks": [
        { "id": "units", "title": "Parse d, w and y", "body": "- [ ] weeks", "dependsOn": [] },
        { "id": "docs", "title": "Document them", "body": "- [ ] README", "dependsOn": ["units"] }
    ]});
    s.script["planner"] = json!([[{ "final": format!("```json\n{plan}\n```") }]]);
    let (dir, world) = world(s).await;
    let r = runner(&world, dir.path(), "http://127.0.0.1:9");
    let token = world.token.clone();
    let subs = || {
        world
            .sandbox
            .with_state(|s| s.issue(1).unwrap().sub_issues.len())
    };
    let epic_asked_by = |login: &'static str| {
        [
            ("issue", "1"),
            ("command", "epic"),
            ("args", "--plan-only"),
            ("github-token", token.as_str()),
            ("binary", BIN),
            ("requested-by", login),
        ]
    };
    // Someone who is not a codeowner asked: refused before any GitHub call.
    let before = world.sandbox.request_total();
    let run = r.run(&epic_asked_by("mallory")).await;
    let step = run.step("Run the pipeline");
    assert_eq!(step.code, Some(1), "{}", step.stderr);
    assert!(
        step.stderr
            .contains("@mallory asked for this run but is not a codeowner")
    );
    assert_eq!(
        world.sandbox.request_total(),
        before,
        "nothing reached GitHub"
    );
    assert_eq!(subs(), 0);
    let run = r.run(&epic_asked_by("alice")).await;
    let step = run.step("Run the pipeline");
    assert_eq!(step.code, Some(0), "{}", run.log());
    assert!(
        step.stderr
            .contains("epic #1: planned 2 task(s) as sub-issues"),
        "{}",
        step.stderr
    );
    assert_eq!(subs(), 2);
    assert_no_token(&world, &run);
    assert_conformant(&world);
}

/// actions/checkout leaves the workflow's token as an `extraheader` (in .git/config up to v5, in
/// an included file since v6): git would send it and never ask supervisor's credential helper, but
/// supervisor's push reads no repository configuration.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_push_carries_supervisors_token_not_the_checkout_header() {
    let (dir, world) = world(spec()).await;
    let server = GitServer::start(dir.path().to_path_buf()).await;
    let url = format!("{}/remote.git", server.url);
    let header_token = "ghs_checkoutWorkflowToken0123";
    let header = format!(
        "AUTHORIZATION: basic {}",
        http_servers::base64(format!("x-access-token:{header_token}").as_bytes())
    );
    let git = |args: &[&str]| supervisor::demo::git(&world.repo, args).unwrap();
    git(&["remote", "set-url", "origin", &url]);
    let origin = format!("http.{}/.extraheader", server.url);
    git(&["config", &origin, &header]);
    let included = dir.path().join("git-credentials-0000.config");
    std::fs::write(
        &included,
        format!("[http \"{}/\"]\n\textraheader = {header}\n", server.url),
    )
    .unwrap();
    let gitdir = world.repo.join(".git").display().to_string();
    for key in [
        format!("includeIf.gitdir:{gitdir}.path"),
        format!("includeIf.gitdir:{gitdir}/worktrees/*.path"),
    ] {
        git(&["config", &key, &included.display().to_string()]);
    }

    let out = tokio::process::Command::new(BIN)
        .args(["run", "1", "--json"])
        .current_dir(&world.repo)
        .env_clear()
        .envs(actions_runner::clean_env())
        .envs(world.env())
        .env("SUPERVISOR_GIT_URL", &url)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(std::time::Duration::from_secs(120), out)
        .await
        .expect("supervisor run finished within 120 s")
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");

    let supervisors = basic("x-access-token", &world.token);
    let requests = server.requests();
    let pushes: Vec<_> = requests
        .iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/git-receive-pack"))
        .collect();
    assert!(!pushes.is_empty(), "{requests:?}");
    for r in &pushes {
        assert_eq!(
            r.authorization.as_deref(),
            Some(supervisors.as_str()),
            "{r:?}"
        );
    }
    for r in &requests {
        assert!(
            r.authorization.is_none() || r.authorization.as_deref() == Some(supervisors.as_str()),
            "a request carried other credentials: {r:?}"
        );
    }
    let branch = supervisor::demo::git(
        &world.remote,
        &["ls-tree", "-r", "--name-only", "worktree-git-issue-1"],
    )
    .unwrap();
    assert!(branch.lines().any(|f| f == "src/hours.ts"), "{branch}");
    assert!(!stderr.contains(&world.token) && !stderr.contains(header_token));
    assert_conformant(&world);
}

/// Every workflow, example and the action: minimal `permissions:`, third-party actions pinned to
/// commits, checkouts without persisted credentials, inputs never pasted into scripts; the action's
/// scripts pass ShellCheck; the examples cover the triggers; the gate tools come from one script.
#[test]
fn workflows_and_the_action_are_hardened() {
    let root = Path::new(ACTION_DIR);
    let read = |p: &Path| -> Value {
        serde_norway::from_str(&std::fs::read_to_string(p).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    };
    let mut files: Vec<PathBuf> = Vec::new();
    for d in [".github/workflows", ".github/examples"] {
        for e in std::fs::read_dir(root.join(d)).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "yml" || x == "yaml") {
                files.push(p);
            }
        }
    }
    files.sort();
    let pinned = regex::Regex::new(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_./-]+@[0-9a-f]{40}$").unwrap();
    let mut triggers = Vec::new();
    for f in &files {
        let wf = read(f);
        let name = f.display();
        assert!(
            wf.get("permissions").is_some(),
            "{name}: a top-level permissions block"
        );
        triggers.push(wf["on"].clone());
        for (job_name, job) in wf["jobs"].as_object().unwrap() {
            assert!(
                job.get("permissions").is_some() || wf["permissions"].is_object(),
                "{name} {job_name}: permissions"
            );
            for step in job["steps"].as_array().into_iter().flatten() {
                let Some(uses) = step.get("uses").and_then(Value::as_str) else {
                    assert!(
                        !step["run"].as_str().unwrap_or_default().contains("${{"),
                        "{name} {job_name}: an expression pasted into a script: {step}"
                    );
                    continue;
                };
                let ours = f.starts_with(root.join(".github/examples"))
                    && uses.starts_with("your-org/supervisor@");
                assert!(
                    ours || pinned.is_match(uses),
                    "{name}: `{uses}` is not pinned to a commit"
                );
                if uses.starts_with("actions/checkout@") {
                    assert_eq!(
                        step["with"]["persist-credentials"],
                        Value::Bool(false),
                        "{name}: checkout persists the job token"
                    );
                }
            }
        }
    }
    let on = serde_json::to_string(&triggers).unwrap();
    for trigger in [
        "\"issues\"",
        "\"issue_comment\"",
        "\"workflow_dispatch\"",
        "\"push\"",
    ] {
        assert!(on.contains(trigger), "no workflow triggered by {trigger}");
    }
    let comment =
        std::fs::read_to_string(root.join(".github/examples/supervisor-comment.yml")).unwrap();
    assert!(comment.contains("github.event.comment.author_association"));
    assert!(comment.contains("requested-by: ${{ github.event.comment.user.login }}"));

    let action = read(&root.join("action.yml"));
    let steps = action["runs"]["steps"].as_array().unwrap();
    let shellcheck = root.join(".tools/bin/shellcheck");
    let check_scripts = shellcheck.exists();
    if !check_scripts {
        assert!(
            std::env::var_os("CI").is_none(),
            "ShellCheck missing: run scripts/install-tools.sh"
        );
    }
    let tmp = tempfile::tempdir().unwrap();
    for (i, step) in steps.iter().enumerate() {
        if let Some(uses) = step.get("uses").and_then(Value::as_str) {
            assert!(
                pinned.is_match(uses),
                "action.yml: `{uses}` is not pinned to a commit"
            );
            continue;
        }
        let script = step["run"].as_str().unwrap();
        assert!(
            !script.contains("${{"),
            "action.yml: an expression pasted into a script: {script}"
        );
        if check_scripts {
            let file = tmp.path().join(format!("step{i}.sh"));
            std::fs::write(&file, format!("#!/usr/bin/env bash\n{script}")).unwrap();
            let out = Command::new(&shellcheck).arg(&file).output().unwrap();
            assert!(
                out.status.success(),
                "ShellCheck on the step {}: {}",
                step["name"],
                String::from_utf8_lossy(&out.stdout)
            );
        }
    }
    let install = steps
        .iter()
        .find(|s| s["name"] == "Install the gate tools")
        .expect("a gate tools step");
    assert!(
        install["run"]
            .as_str()
            .unwrap()
            .contains("scripts/install-tools.sh\" --gates"),
        "the action installs the gate tools through scripts/install-tools.sh, the one list of pins"
    );
}

/// The comment workflow starts a job only for what supervisor itself reads as the job's command
/// (`src/events/command.rs`): `run` on an issue, `revise` on a pull request. Every example job whose
/// `if:` reads the comment's body is evaluated, by a small evaluator of the expression syntax the
/// examples use, for each comment of a table on an issue and on a pull request.
#[test]
fn the_comment_workflow_starts_only_for_a_run_or_a_revise_command() {
    use supervisor::events::{Command as Cmd, CommandSyntax};

    let root = Path::new(ACTION_DIR).join(".github/examples");
    let mut jobs = Vec::new();
    for e in std::fs::read_dir(&root).unwrap() {
        let path = e.unwrap().path();
        let wf: Value = serde_norway::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        for (name, job) in wf["jobs"].as_object().unwrap() {
            for step in job["steps"].as_array().into_iter().flatten() {
                let step_if = step["if"].as_str().unwrap_or_default();
                assert!(
                    !step_if.contains("github.event.comment.body"),
                    "{file} {name}: a step's `if:` reads the comment; this test knows job conditions only"
                );
            }
            let Some(cond) = job["if"].as_str() else {
                continue;
            };
            if !cond.contains("github.event.comment.body") {
                continue;
            }
            let command = job["steps"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|s| {
                    s["uses"]
                        .as_str()
                        .is_some_and(|u| u.starts_with("your-org/supervisor@"))
                })
                .map(|s| s["with"]["command"].as_str().unwrap_or("run").to_string())
                .unwrap_or_else(|| {
                    panic!("{file} {name}: reads the comment but runs no supervisor")
                });
            jobs.push((format!("{file} {name}"), cond.to_string(), command));
        }
    }
    let commands: Vec<&str> = jobs.iter().map(|(_, _, c)| c.as_str()).collect();
    assert!(
        commands.contains(&"run") && commands.contains(&"revise"),
        "the comment example runs and revises: {jobs:?}"
    );

    // Comments supervisor reads as a command that an expression cannot see (it reads no
    // Markdown): the workflow takes `/supervisor run` alone, and a revise note on its first line.
    const MISSED: &[&str] = &[
        "/supervisor run\n",
        "  /supervisor run",
        "Thanks!\n/supervisor run",
        "/supervisor revise\nUse the builder.",
    ];
    // A revise note of blanks alone: the job starts, and the revision reads the pull request's
    // feedback itself (reviews; a `/supervisor revise` line asks it), or ends with nothing to do.
    const LOOSE: &[&str] = &["/supervisor revise  "];
    let bodies = [
        "/supervisor run",
        "/supervisor stop",
        "/Supervisor RUN",
        "/supervisor run 4",
        "/supervisor running",
        "/supervisor revise",
        "/supervisor revise also handle negative numbers",
        "/SUPERVISOR Revise rename `foo` to bar\nand add a test.",
        "/supervisor status",
        "/supervisor",
        "/supervisor frobnicate",
        "please /supervisor run",
        "/supervisorrun",
        "/supervisor-run",
        "`/supervisor run`",
        "> /supervisor run",
        "```\n/supervisor run\n```",
        "",
    ]
    .into_iter()
    .chain(MISSED.iter().copied())
    .chain(LOOSE.iter().copied());

    let syntax = CommandSyntax::default();
    let mut seen = Vec::new();
    for body in bodies {
        let parsed = syntax.parse(body);
        for on_pull in [false, true] {
            let event = comment_event(body, on_pull, "MEMBER");
            for (job, cond, command) in &jobs {
                let starts = github_expr::truthy(&github_expr::eval(cond, &event));
                let wanted = parsed.iter().any(|c| match (c, command.as_str()) {
                    (Ok(Cmd::Run), "run") => !on_pull,
                    (Ok(Cmd::Revise { .. }), "revise") => on_pull,
                    _ => false,
                });
                let on = if on_pull {
                    "a pull request"
                } else {
                    "an issue"
                };
                match (starts, wanted) {
                    (true, false) => {
                        assert!(
                            command == "revise" && LOOSE.contains(&body),
                            "{job} starts `{command}` for {body:?} on {on}, which supervisor reads as {parsed:?}"
                        );
                        seen.push(body);
                    }
                    (false, true) => {
                        assert!(
                            MISSED.contains(&body),
                            "{job} does not start `{command}` for {body:?} on {on}"
                        );
                        seen.push(body);
                    }
                    _ => {}
                }
            }
        }
    }
    for listed in MISSED.iter().chain(LOOSE) {
        assert!(seen.contains(listed), "{listed:?} is no exception any more");
    }
    // Someone without write access starts nothing.
    for (job, cond, _) in &jobs {
        for (body, on_pull) in [("/supervisor run", false), ("/supervisor revise x", true)] {
            let event = comment_event(body, on_pull, "NONE");
            assert!(
                !github_expr::truthy(&github_expr::eval(cond, &event)),
                "{job}: {body:?} by a stranger"
            );
        }
    }
}

/// The `github` context of an `issue_comment` event, as much of it as the examples read.
fn comment_event(body: &str, on_pull: bool, association: &str) -> Value {
    let mut issue = json!({ "number": 4 });
    if on_pull {
        issue["pull_request"] = json!({ "url": "https://api.github.com/repos/o/r/pulls/4" });
    }
    json!({
        "event": {
            "issue": issue,
            "comment": {
                "body": body,
                "author_association": association,
                "user": { "login": "maintainer" }
            }
        }
    })
}

/// GitHub Actions expressions, the part the examples use: string literals, `true`/`false`/`null`,
/// `github.…` properties, `!`, `==`, `!=`, `&&`, `||`, parentheses, `startsWith`, `contains` and
/// `fromJSON`. Anything else panics, so an example using more fails the test rather than passing
/// unread. Comparisons of strings ignore case, as GitHub's do.
mod github_expr {
    use serde_json::Value;

    /// Properties an event may lack (GitHub reads a missing one as null).
    const OPTIONAL: &[&str] = &["github.event.issue.pull_request"];

    #[derive(Debug, Clone, PartialEq)]
    enum Tok {
        Str(String),
        Ident(String),
        Open,
        Close,
        Comma,
        Dot,
        Not,
        Eq,
        Ne,
        And,
        Or,
    }

    fn lex(s: &str) -> Vec<Tok> {
        let chars: Vec<char> = s.chars().collect();
        let mut out = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            let next = chars.get(i + 1).copied();
            let (tok, len) = match (c, next) {
                (c, _) if c.is_whitespace() => {
                    i += 1;
                    continue;
                }
                ('\'', _) => {
                    let mut text = String::new();
                    let mut j = i + 1;
                    loop {
                        match (chars.get(j), chars.get(j + 1)) {
                            (Some('\''), Some('\'')) => {
                                text.push('\'');
                                j += 2;
                            }
                            (Some('\''), _) => break,
                            (Some(&c), _) => {
                                text.push(c);
                                j += 1;
                            }
                            (None, _) => panic!("unterminated string in {s:?}"),
                        }
                    }
                    (Tok::Str(text), j + 1 - i)
                }
                ('=', Some('=')) => (Tok::Eq, 2),
                ('!', Some('=')) => (Tok::Ne, 2),
                ('&', Some('&')) => (Tok::And, 2),
                ('|', Some('|')) => (Tok::Or, 2),
                ('!', _) => (Tok::Not, 1),
                ('(', _) => (Tok::Open, 1),
                (')', _) => (Tok::Close, 1),
                (',', _) => (Tok::Comma, 1),
                ('.', _) => (Tok::Dot, 1),
                (c, _) if c.is_ascii_alphabetic() || c == '_' => {
                    let len = chars[i..]
                        .iter()
                        .take_while(|c| c.is_ascii_alphanumeric() || **c == '_' || **c == '-')
                        .count();
                    (Tok::Ident(chars[i..i + len].iter().collect()), len)
                }
                _ => panic!(
                    "unknown expression syntax at {:?}",
                    chars[i..].iter().collect::<String>()
                ),
            };
            out.push(tok);
            i += len;
        }
        out
    }

    struct Parser<'a> {
        toks: Vec<Tok>,
        at: usize,
        github: &'a Value,
    }

    /// The value of expression `expr` (an `if:`, with or without `${{ }}`) in context `github`.
    pub(crate) fn eval(expr: &str, github: &Value) -> Value {
        let expr = expr.trim();
        let expr = match expr.strip_prefix("${{").and_then(|e| e.strip_suffix("}}")) {
            Some(inner) => inner,
            None => expr,
        };
        let mut p = Parser {
            toks: lex(expr),
            at: 0,
            github,
        };
        let v = p.or();
        assert_eq!(p.at, p.toks.len(), "trailing tokens in {expr:?}");
        v
    }

    pub(crate) fn truthy(v: &Value) -> bool {
        match v {
            Value::Null => false,
            Value::Bool(b) => *b,
            Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
            Value::String(s) => !s.is_empty(),
            Value::Array(_) | Value::Object(_) => true,
        }
    }

    fn text(v: &Value) -> &str {
        v.as_str()
            .unwrap_or_else(|| panic!("a string expected, not {v}"))
    }

    fn equal(a: &Value, b: &Value) -> bool {
        match (a, b) {
            (Value::String(x), Value::String(y)) => x.to_lowercase() == y.to_lowercase(),
            (Value::Null, Value::Null) => true,
            (Value::Bool(x), Value::Bool(y)) => x == y,
            _ => panic!("comparing {a} with {b}: not a comparison the examples make"),
        }
    }

    impl Parser<'_> {
        fn peek(&self) -> Option<&Tok> {
            self.toks.get(self.at)
        }

        fn eat(&mut self, t: &Tok) -> bool {
            let hit = self.peek() == Some(t);
            if hit {
                self.at += 1;
            }
            hit
        }

        fn expect(&mut self, t: Tok) {
            assert!(self.eat(&t), "{t:?} expected at token {}", self.at);
        }

        fn or(&mut self) -> Value {
            let mut v = self.and();
            while self.eat(&Tok::Or) {
                let rhs = self.and();
                if !truthy(&v) {
                    v = rhs;
                }
            }
            v
        }

        fn and(&mut self) -> Value {
            let mut v = self.comparison();
            while self.eat(&Tok::And) {
                let rhs = self.comparison();
                if truthy(&v) {
                    v = rhs;
                }
            }
            v
        }

        fn comparison(&mut self) -> Value {
            let v = self.unary();
            if self.eat(&Tok::Eq) {
                return Value::Bool(equal(&v, &self.unary()));
            }
            if self.eat(&Tok::Ne) {
                return Value::Bool(!equal(&v, &self.unary()));
            }
            v
        }

        fn unary(&mut self) -> Value {
            if self.eat(&Tok::Not) {
                return Value::Bool(!truthy(&self.unary()));
            }
            self.primary()
        }

        fn primary(&mut self) -> Value {
            let tok = self.toks.get(self.at).cloned();
            self.at += 1;
            match tok {
                Some(Tok::Open) => {
                    let v = self.or();
                    self.expect(Tok::Close);
                    v
                }
                Some(Tok::Str(s)) => Value::String(s),
                Some(Tok::Ident(name)) if self.peek() == Some(&Tok::Open) => {
                    self.at += 1;
                    let mut args = Vec::new();
                    if !self.eat(&Tok::Close) {
                        loop {
                            args.push(self.or());
                            if self.eat(&Tok::Close) {
                                break;
                            }
                            self.expect(Tok::Comma);
                        }
                    }
                    call(&name, &args)
                }
                Some(Tok::Ident(name)) => match name.as_str() {
                    "true" => Value::Bool(true),
                    "false" => Value::Bool(false),
                    "null" => Value::Null,
                    "github" => {
                        let mut path = name;
                        while self.eat(&Tok::Dot) {
                            match self.toks.get(self.at).cloned() {
                                Some(Tok::Ident(key)) => {
                                    self.at += 1;
                                    path = format!("{path}.{key}");
                                }
                                other => panic!(
                                    "a property name expected after `{path}.`, not {other:?}"
                                ),
                            }
                        }
                        self.property(&path)
                    }
                    _ => panic!("unknown context or literal `{name}`"),
                },
                other => panic!("unexpected {other:?} in the expression"),
            }
        }

        fn property(&self, path: &str) -> Value {
            let mut v = self.github;
            for key in path.split('.').skip(1) {
                match v.get(key) {
                    Some(inner) => v = inner,
                    None if OPTIONAL.contains(&path) => return Value::Null,
                    None => panic!("`{path}` is not in the event this test knows"),
                }
            }
            v.clone()
        }
    }

    fn call(name: &str, args: &[Value]) -> Value {
        match (name, args) {
            ("startsWith", [a, b]) => {
                Value::Bool(text(a).to_lowercase().starts_with(&text(b).to_lowercase()))
            }
            ("contains", [Value::Array(items), item]) => {
                Value::Bool(items.iter().any(|x| equal(x, item)))
            }
            ("contains", [a, b]) => {
                Value::Bool(text(a).to_lowercase().contains(&text(b).to_lowercase()))
            }
            ("fromJSON", [a]) => {
                serde_json::from_str(text(a)).unwrap_or_else(|e| panic!("fromJSON({a}): {e}"))
            }
            _ => panic!("unknown function `{name}` with {} arguments", args.len()),
        }
    }
}

/// `action.yml`'s outputs say what the README's output table says, and `end` names every way a
/// run ends (`RunEnd::KINDS`) and `error`, in both.
#[test]
fn the_actions_outputs_are_described_as_the_readme_describes_them() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let action: Value =
        serde_norway::from_str(&std::fs::read_to_string(root.join("action.yml")).unwrap()).unwrap();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let row = |name: &str| {
        readme
            .lines()
            .find(|l| l.starts_with(&format!("| `{name}` |")))
            .unwrap_or_else(|| panic!("the README's output table has no `{name}` row"))
            .to_string()
    };
    let described = |name: &str| {
        action["outputs"][name]["description"]
            .as_str()
            .unwrap_or_else(|| panic!("action.yml has no output {name}"))
            .to_string()
    };
    for kind in supervisor::pipeline::RunEnd::KINDS.iter().chain(&["error"]) {
        assert!(
            described("end").contains(kind),
            "action.yml's end lacks {kind}"
        );
        assert!(
            row("end").contains(&format!("`{kind}`")),
            "the README's end lacks {kind}"
        );
    }
    // The pull request of a revision is the output too (`report::actions::action_outputs`).
    for (name, words) in [
        ("pr-url", &["opened", "revised"][..]),
        ("score", &["0.88"][..]),
        ("verdict", &["pass", "not-blocked", "blocked"][..]),
        ("journal", &["events.jsonl"][..]),
        ("summary", &["JSON"][..]),
    ] {
        for word in words {
            assert!(
                described(name).contains(word),
                "action.yml's {name}: {word}"
            );
            assert!(row(name).contains(word), "the README's {name}: {word}");
        }
    }
}
