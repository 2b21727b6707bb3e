//! `supervisor runs replay`: real runs' journals (the demo's, and a scripted world's run through the
//! real `supervisor run`) taken again with today's configuration or other files, with nothing to
//! talk to: no sandbox, no token, no PATH.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use supervisor::demo::{World, answer};

#[path = "support/specs.rs"]
mod specs;

const BIN: &str = env!("CARGO_BIN_EXE_supervisor");

/// `supervisor ARGS` in `dir` with nothing to reach: no token, a GitHub API nobody serves, and no
/// PATH, so that no agent, git or gate tool could be started.
fn isolated(dir: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", "")
        .env("HOME", dir)
        .env("GITHUB_API_URL", "http://127.0.0.1:9")
        .stdin(Stdio::null());
    cmd.output().expect("supervisor runs")
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn json_of(out: &Output) -> Value {
    let (stdout, stderr) = text(out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// The lines of `after` that differ from `before`.
fn changed(before: &str, after: &str) -> Vec<String> {
    let (b, a): (Vec<&str>, Vec<&str>) = (before.lines().collect(), after.lines().collect());
    let mut out: Vec<String> = b
        .iter()
        .filter(|l| !a.contains(l))
        .map(|l| format!("- {l}"))
        .collect();
    out.extend(
        a.iter()
            .filter(|l| !b.contains(l))
            .map(|l| format!("+ {l}")),
    );
    out
}

/// Everything git knows of the repository, and every file under it with its size and time.
fn git_state(repo: &Path) -> String {
    let git = |args: &[&str]| {
        // No optional locks: `status` leaves the index as it is.
        let out = Command::new("git")
            .arg("--no-optional-locks")
            .args(args)
            .current_dir(repo)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let mut files = Vec::new();
    let mut stack = vec![repo.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let meta = e.metadata().unwrap();
            if meta.is_dir() {
                stack.push(e.path());
            } else {
                files.push(format!(
                    "{} {} {:?}",
                    e.path().display(),
                    meta.len(),
                    meta.modified().ok()
                ));
            }
        }
    }
    files.sort();
    [
        git(&["status", "--porcelain", "--ignored"]),
        git(&["for-each-ref"]),
        git(&["worktree", "list", "--porcelain"]),
        git(&["stash", "list"]),
        files.join("\n"),
    ]
    .join("\n--\n")
}

/// The settings file of the repository (where `supervisor` reads it).
fn settings_file(repo: &Path) -> PathBuf {
    supervisor::config::SETTINGS_PATHS
        .iter()
        .map(|p| repo.join(p))
        .find(|p| p.is_file())
        .expect("the repository has a settings file")
}

fn run_ids(repo: &Path) -> Vec<String> {
    let mut ids: Vec<String> = std::fs::read_dir(repo.join(".supervisor/runs"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().join("events.jsonl").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    ids.sort();
    ids
}

/// The demo, run by the real binary to its end: its repository holds the run of issue 1 and the
/// revision of its pull request.
fn demo(dir: &Path) -> PathBuf {
    let out = Command::new(BIN)
        .args(["demo", "--json", "--dir"])
        .arg(dir.join("demo"))
        .env_remove("GH_TOKEN")
        .env_remove("GITHUB_TOKEN")
        .env_remove("GITHUB_API_URL")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let repo = dir.join("demo/repo");
    assert!(repo.join(".supervisor/runs").is_dir(), "{stderr}");
    repo
}

#[test]
fn the_demos_runs_replay_with_the_same_settings_without_a_difference_and_touch_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let repo = demo(dir.path());
    let ids = run_ids(&repo);
    assert!(ids.len() >= 2, "the run and its revision: {ids:?}");
    let before = git_state(&repo);

    // One run: every decision replayed, none differs.
    let out = isolated(&repo, &["runs", "replay", &ids[0]]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains(": 0 differ, "), "{stdout}");
    let report = json_of(&isolated(&repo, &["runs", "replay", &ids[0], "--json"]));
    let replayed = report["replay"]["replayed"].as_u64().unwrap();
    // Research, architecture, test design, the gate bounce, the rejection, the approval…
    assert!(replayed >= 8, "{report}");
    assert_eq!(report["replay"]["differences"], json!([]), "{report}");
    assert_eq!(
        report["config"]["settings"],
        json!(settings_file(&repo.canonicalize().unwrap()))
    );

    // Every run: a summary naming none as different.
    let all = json_of(&isolated(&repo, &["runs", "replay", "--all", "--json"]));
    assert_eq!(all["summary"]["replayed"], json!(ids.len()), "{all}");
    assert_eq!(all["summary"]["withDifferences"], json!([]), "{all}");
    assert_eq!(all["summary"]["notReplayable"], json!([]), "{all}");
    let out = isolated(&repo, &["runs", "replay", "--all"]);
    let (stdout, _) = text(&out);
    assert!(
        stdout.starts_with(&format!(
            "{} runs replayed with the settings in {}",
            ids.len(),
            settings_file(&repo.canonicalize().unwrap()).display()
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains(": 0 with differences, 0 not replayable"),
        "{stdout}"
    );
    // --last 1: the latest run only.
    let last = json_of(&isolated(
        &repo,
        &["runs", "replay", "--all", "--last", "1", "--json"],
    ));
    assert_eq!(last["runs"].as_array().unwrap().len(), 1, "{last}");

    // Replaying read the journals and nothing else: no GitHub, no PATH, the repository untouched.
    assert_eq!(changed(&before, &git_state(&repo)), Vec::<String>::new());
}

#[test]
fn unknown_runs_and_damaged_journals_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let repo = demo(dir.path());
    let ids = run_ids(&repo);

    let out = isolated(&repo, &["runs", "replay", "no-such-run"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stdout}\n{stderr}");
    assert!(stderr.contains("no run `no-such-run`"), "{stderr}");
    assert!(stderr.contains("`supervisor runs` lists them"), "{stderr}");

    // Neither a run nor --all; a missing settings file.
    let out = isolated(&repo, &["runs", "replay"]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("or pass --all"), "{stderr}");
    let out = isolated(&repo, &["runs", "replay", &ids[0], "--last", "1"]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--last N goes with --all"), "{stderr}");
    let out = isolated(
        &repo,
        &["runs", "replay", &ids[0], "--settings", "nope.json"],
    );
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--settings") && stderr.contains("nope.json"),
        "{stderr}"
    );

    // A copy of the first run with a line in its middle cut short.
    let runs = repo.join(".supervisor/runs");
    let damaged = format!("{}-copy", ids[0]);
    std::fs::create_dir(runs.join(&damaged)).unwrap();
    let journal = std::fs::read_to_string(runs.join(&ids[0]).join("events.jsonl")).unwrap();
    let mut lines: Vec<&str> = journal.lines().collect();
    let cut = &lines[3][..lines[3].len() / 2];
    lines[3] = cut;
    let path = runs.join(&damaged).join("events.jsonl");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();

    let out = isolated(&repo, &["runs", "replay", &damaged]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(stderr.contains("line 4"), "{stderr}");
    assert!(stderr.contains("damaged"), "{stderr}");
    assert!(stderr.contains("events.jsonl"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");

    // --all replays the others and names the damaged one.
    let all = json_of(&isolated(&repo, &["runs", "replay", "--all", "--json"]));
    assert_eq!(all["summary"]["replayed"], json!(ids.len()), "{all}");
    let not = all["summary"]["notReplayable"].as_array().unwrap();
    assert_eq!(not.len(), 1, "{all}");
    assert_eq!(not[0]["runId"], json!(damaged));
    assert!(not[0]["why"].as_str().unwrap().contains("line 4"), "{all}");
    let (stdout, _) = text(&isolated(&repo, &["runs", "replay", "--all"]));
    assert!(stdout.contains("1 not replayable"), "{stdout}");
    assert!(
        stdout.contains(&format!("not replayable  {damaged}: ")),
        "{stdout}"
    );
}

/// A world whose developer adds a dependency the package-safety gate cannot vouch for (its
/// registry answers nothing: a warning, not blocking), and whose auditor approves with one
/// warning: 7/8 against the threshold 0.75.
fn scored_spec() -> supervisor::demo::WorldSpec {
    let mut spec = specs::spec();
    spec.workflow = Some(specs::workflow_with_hooks(json!([
        "traceability",
        "package-safety"
    ])));
    spec.settings.insert(
        "gates".into(),
        json!({ "npmRegistry": "http://127.0.0.1:9", "toolTimeoutSec": 5 }),
    );
    let package = r#"{ "name": "durations", "version": "1.0.0", "private": true, "type": "module",
  "dependencies": { "left-pad": "1.3.0" }, "devDependencies": { "vitest": "4.1.12" } }
"#;
    spec.script["developer"] = json!([[
        { "write": { "path": "src/hours.ts", "content": specs::GOOD_CODE } },
        { "write": { "path": "package.json", "content": package } },
        { "final": answer("Done.", json!({ "action": "COMPLETE", "agentName": "developer", "summary": "hours" })) }
    ]]);
    spec.script["auditor"] = json!([specs::approve(json!([{
        "severity": "warning", "dimension": "code-quality", "message": "a long function"
    }]))]);
    spec
}

/// The settings file of `repo` with `change` made to its `supervisor` block, written to `path`.
fn settings_with(repo: &Path, path: &Path, change: impl FnOnce(&mut Value)) -> PathBuf {
    let text = std::fs::read_to_string(settings_file(repo)).unwrap();
    let mut doc: Value = serde_json::from_str(&text).unwrap();
    change(&mut doc["supervisor"]);
    std::fs::write(path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    path.to_path_buf()
}

/// What `runs replay ID --settings FILE` prints.
fn replay_text(repo: &Path, id: &str, settings: &Path) -> String {
    let args = [
        "runs",
        "replay",
        id,
        "--settings",
        settings.to_str().unwrap(),
    ];
    text(&isolated(repo, &args)).0
}

/// `runs replay ID FLAG FILE --json`: the one difference it reports, at `stage`'s attempt 1.
fn the_difference(repo: &Path, id: &str, flag: &str, file: &Path, stage: &str) -> Value {
    let args = ["runs", "replay", id, flag, file.to_str().unwrap(), "--json"];
    let report = json_of(&isolated(repo, &args));
    let diffs = report["replay"]["differences"].as_array().unwrap();
    assert_eq!(diffs.len(), 1, "{report}");
    let d = diffs[0].clone();
    assert_eq!(
        (d["stage"].as_str(), d["attempt"].as_u64()),
        (Some(stage), Some(1)),
        "{d}"
    );
    d
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_settings_show_the_approval_refused_and_the_warning_gate_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let world = World::build(dir.path(), scored_spec()).await.unwrap();
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.args(["run", "1", "--json", "--repo-root"])
        .arg(&world.repo)
        .env_remove("GH_TOKEN")
        .env_remove("GITHUB_TOKEN")
        .envs(world.env())
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(120), cmd.output())
        .await
        .expect("the run finished within 120 s")
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let summary: Value = serde_json::from_str(&stdout).unwrap();
    let gate = summary["gates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["kind"] == "package-safety")
        .unwrap_or_else(|| panic!("{summary}"));
    assert_eq!(gate["status"], "warn", "{gate}");
    // The sandbox goes: replay has nothing to talk to.
    let repo = world.repo.clone();
    drop(world);
    let id = run_ids(&repo).remove(0);
    let before = git_state(&repo);

    // The same settings: nothing differs.
    let same = json_of(&isolated(&repo, &["runs", "replay", "1", "--json"]));
    assert_eq!(same["replay"]["differences"], json!([]), "{same}");

    // auditScoreThreshold 1.0: the approval at 7/8 is a score-gate refusal.
    let strict = settings_with(&repo, &dir.path().join("strict.json"), |s| {
        s["auditScoreThreshold"] = json!(1.0)
    });
    let d = the_difference(&repo, &id, "--settings", &strict, "Audit");
    assert_eq!(d["recorded"]["transition"], "forward", "{d}");
    assert_eq!(d["recorded"]["to"], "Done", "{d}");
    assert_eq!(d["recorded"]["score"]["threshold"], json!(0.75), "{d}");
    assert_eq!(d["recorded"]["score"]["passed"], json!(true), "{d}");
    assert_eq!(d["replayed"]["transition"], "score-gate", "{d}");
    assert_eq!(d["replayed"]["to"], "Implementation", "{d}");
    assert_eq!(d["replayed"]["score"]["threshold"], json!(1.0), "{d}");
    assert_eq!(d["replayed"]["score"]["passed"], json!(false), "{d}");
    assert_eq!(
        (
            d["replayed"]["score"]["passing"].as_u64(),
            d["replayed"]["score"]["total"].as_u64()
        ),
        (Some(7), Some(8))
    );
    let stdout = replay_text(&repo, &id, &strict);
    assert!(stdout.contains(": 1 differs, "), "{stdout}");
    assert!(stdout.contains("Audit, attempt 1"), "{stdout}");
    assert!(
        stdout.contains(
            "score     recorded 7/8 (0.88) against the threshold 0.75: passes; replayed 7/8 (0.88) against the threshold 1: fails"
        ),
        "{stdout}"
    );

    // --all with those settings names the run, and the command that shows its difference.
    let all = isolated(
        &repo,
        &[
            "runs",
            "replay",
            "--all",
            "--settings",
            strict.to_str().unwrap(),
        ],
    );
    let (stdout, _) = text(&all);
    assert_eq!(all.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("1 run replayed with the settings in "),
        "{stdout}"
    );
    assert!(
        stdout.contains(": 1 with differences, 0 not replayable"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "differs         {id} (1 difference; `supervisor runs replay {id} --settings {}` shows them)",
            strict.display()
        )),
        "{stdout}"
    );

    // packageSafetyBlocking: the gate that warned blocks, and the developer gets the work back.
    let blocking = settings_with(&repo, &dir.path().join("blocking.json"), |s| {
        s["gates"]["packageSafetyBlocking"] = json!(true)
    });
    let d = the_difference(&repo, &id, "--settings", &blocking, "Implementation");
    assert_eq!(d["gates"]["recorded"], "not-blocked", "{d}");
    assert_eq!(d["gates"]["replayed"], "blocked", "{d}");
    assert_eq!(d["gates"]["recordedBlocking"], json!([]), "{d}");
    assert_eq!(
        d["gates"]["replayedBlocking"],
        json!(["package-safety (fail)"]),
        "{d}"
    );
    assert_eq!(d["recorded"]["to"], "Audit", "{d}");
    assert_eq!(d["replayed"]["transition"], "gate-bounce", "{d}");
    assert_eq!(d["replayed"]["to"], "Implementation", "{d}");
    let stdout = replay_text(&repo, &id, &blocking);
    assert!(
        stdout.contains("gates     recorded not-blocked (none blocking), replayed blocked (blocking: package-safety (fail))"),
        "{stdout}"
    );

    // A workflow whose Implementation runs a gate this run never ran: not replayable, not guessed.
    let wf = specs::workflow_with_hooks(json!(["traceability", "package-safety", "tsc"]));
    let wf_path = dir.path().join("workflow.json");
    std::fs::write(&wf_path, wf.to_string()).unwrap();
    let report = json_of(&isolated(
        &repo,
        &[
            "runs",
            "replay",
            &id,
            "--workflow",
            wf_path.to_str().unwrap(),
            "--json",
        ],
    ));
    let not = report["replay"]["notReplayable"].as_array().unwrap();
    assert!(
        not.iter().any(|n| n["stage"] == "Implementation"
            && n["why"].as_str().unwrap().contains("tsc")
            && n["why"].as_str().unwrap().contains("not in the journal")),
        "{report}"
    );
    assert_eq!(report["replay"]["differences"], json!([]), "{report}");

    assert_eq!(
        changed(&before, &git_state(&repo)),
        Vec::<String>::new(),
        "replay changed the repository"
    );
}
