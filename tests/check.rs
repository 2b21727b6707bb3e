//! `supervisor check` on fixture repositories: the valid one prints the workflow, each broken one exits 2
//! naming the file and the field.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/check")
        .join(name)
}

/// A directory of stand-in agent CLIs that answer `--version` as the real ones do (pi on stderr).
fn stand_in_clis() -> &'static Path {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        for (name, script) in [
            ("pi", "echo 0.73.1 >&2"),
            ("claude", "echo '2.1.330 (Claude Code)'"),
            ("codex", "echo 'codex-cli 0.169.0'"),
        ] {
            let path = dir.path().join(name);
            std::fs::write(&path, format!("#!/bin/sh\n{script}\n")).unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        dir
    })
    .path()
}

/// `supervisor check` with the stand-in CLIs first on PATH and no `SUPERVISOR_*` variables.
fn supervisor_check(root: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_supervisor"));
    cmd.arg("check").arg("--repo-root").arg(root);
    cmd.env(
        "PATH",
        format!("{}:/usr/bin:/bin", stand_in_clis().display()),
    );
    for (k, _) in std::env::vars() {
        if k.starts_with("SUPERVISOR_") {
            cmd.env_remove(k);
        }
    }
    cmd
}

fn check(name: &str, json: bool) -> Output {
    let mut cmd = supervisor_check(&fixture(name));
    if json {
        cmd.arg("--json");
    }
    cmd.output().expect("supervisor runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The report is the command's output: on stdout, with nothing on stderr.
#[test]
fn valid_repository_prints_the_loaded_workflow() {
    let out = check("valid", false);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}{}", stderr(&out));
    assert_eq!(stderr(&out), "", "the report is on stdout");
    for expected in [
        "acme/widgets",
        "project #4 of acme",
        "alice, bob",
        "Backlog",
        "Research        researcher → Architecture",
        "Architecture    architect → TestDesign; may go back to Research",
        "Implementation  developer (commits) → Audit",
        "gates before leaving: ci, tsc, lsp, dead-code, duplicates, traceability, package-safety",
        "Audit           auditor (review) → Done; may go back to Implementation; max rejections 3",
        "FEEDBACK_RESEARCH → Research",
        "developer 30 min",
        // The repository's researcher override is used, with its own backend.
        "researcher     ",
        "backend claude; model anthropic/claude-sonnet-4-5",
        // The unknown key is a warning with a suggestion, not an error.
        "`supervisor.maxRejection`: is not a known setting — did you mean \"maxRejections\"?",
        // The agent CLIs the workflow uses, found on the agents' PATH, with their versions.
        "agent CLIs (on the agents' PATH)",
        "claude         2.1.330 (Claude Code) at ",
        "(roles: researcher)",
        "pi             0.73.1 at ",
        "(roles: architect, auditor, developer, test-designer)",
        "ok: configuration is valid (1 warning)",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
}

#[test]
fn valid_repository_as_json() {
    let out = check("valid", true);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    assert_eq!(v["ok"], true);
    assert_eq!(v["settings"]["repo"], "acme/widgets");
    assert_eq!(v["workflow"]["stages"].as_array().unwrap().len(), 7);
    assert_eq!(v["agents"]["researcher"]["backend"], "claude");
    assert_eq!(v["warnings"][0]["field"], "supervisor.maxRejection");
    assert_eq!(v["backends"][0]["name"], "claude");
    assert_eq!(v["backends"][0]["version"], "2.1.330 (Claude Code)");
    assert_eq!(v["backends"][1]["version"], "0.73.1");
    let env = v["agentEnv"]["names"].as_array().unwrap();
    assert!(env.iter().any(|n| n == "ANTHROPIC_API_KEY") && env.iter().any(|n| n == "PATH"));
}

/// A workflow whose agent CLI is not installed fails `check` (exit 2) naming the CLI and its roles,
/// before any run could move a card.
#[test]
fn a_missing_agent_cli_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".supervisor/agents")).unwrap();
    std::fs::write(
        dir.path().join(".supervisor/settings.json"),
        r#"{ "supervisor": { "repo": "o/r", "projectNumber": 1, "codeowners": ["a"],
             "agentBackend": "codex", "agentEnv": ["CLAUDE_CONFIG_DIR", "MY_TOOL_HOME"] } }"#,
    )
    .unwrap();
    std::fs::write(
        dir.path().join(".supervisor/agents/auditor.md"),
        "---\nbackend: claude\nmodel: openai/gpt-5\n---\nReview.\n",
    )
    .unwrap();
    let out = supervisor_check(dir.path())
        .env("PATH", "/usr/bin:/bin")
        .env("ANTHROPIC_API_KEY", "sk-not-shown")
        .env_remove("OPENAI_API_KEY")
        .output()
        .unwrap();
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(
        text.contains("claude (auditor): `claude` is not on the agents' PATH (/usr/bin:/bin)"),
        "{text}"
    );
    assert!(
        text.contains("codex (architect, developer, researcher, test-designer)"),
        "{text}"
    );
    assert!(text.contains("error: configuration is valid"), "{text}");
    // agentEnv adds to the defaults; the effective list is shown by name, never by value.
    let env_line = text.lines().find(|l| l.contains("agent env")).unwrap();
    for name in [
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "CODEX_HOME",
        "MY_TOOL_HOME",
    ] {
        assert!(env_line.contains(name), "{env_line}");
    }
    let set_now = env_line.split("set now: ").nth(1).unwrap();
    let set_now = set_now.split("; not set").next().unwrap();
    assert!(set_now.contains("ANTHROPIC_API_KEY"), "{env_line}");
    assert!(!set_now.contains("OPENAI_API_KEY"), "{env_line}");
    assert!(!text.contains("sk-not-shown") && !stderr(&out).contains("sk-not-shown"));
    // A model whose provider the backend does not serve is a warning.
    assert!(
        text.contains(
            "role `auditor` (backend claude): model `openai/gpt-5` names provider `openai`"
        ),
        "{text}"
    );

    let out = supervisor_check(dir.path())
        .arg("--json")
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["ok"], false);
    assert!(
        v["backends"][0]["problem"]
            .as_str()
            .unwrap()
            .contains("not on the agents' PATH")
    );
}

/// (fixture, file suffix, field, words of the problem)
const BROKEN: [(&str, &str, &str, &str); 7] = [
    (
        "no-settings",
        ".supervisor/settings.json",
        "supervisor",
        "no settings file found",
    ),
    (
        "no-repo",
        ".pi/settings.json",
        "supervisor.repo",
        "is missing",
    ),
    (
        "no-codeowners",
        ".pi/settings.json",
        "supervisor.codeowners",
        "is missing",
    ),
    (
        "threshold",
        ".pi/settings.json:6",
        "supervisor.auditScoreThreshold",
        "is 1.5, outside (0, 1]",
    ),
    (
        "bad-marker",
        ".supervisor/workflow.json:4",
        "stages[1] (Implementation).markerMap.IMPLEMENTATION_COMPLETE",
        "points to unknown status `Reveiw`",
    ),
    (
        "forward-loop",
        ".supervisor/workflow.json:4",
        "stages[1] (Research).canLoopBackTo",
        "must point backwards",
    ),
    (
        "bad-yaml",
        ".supervisor/agents/architect.md:",
        "frontmatter",
        "is not valid YAML",
    ),
];

#[test]
fn broken_repositories_exit_2_naming_file_and_field() {
    for (name, file, field, problem) in BROKEN {
        let out = check(name, false);
        let text = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{name}: {text}");
        let line = text
            .lines()
            .find(|l| l.contains(&format!("`{field}`")))
            .unwrap_or_else(|| panic!("{name}: no line names `{field}` in:\n{text}"));
        assert!(line.contains(file), "{name}: {line:?} does not name {file}");
        assert!(
            line.contains(problem),
            "{name}: {line:?} does not say {problem:?}"
        );
        assert!(line.contains(" — "), "{name}: {line:?} gives no fix");
    }
}

#[test]
fn broken_repositories_as_json() {
    for (name, _, field, _) in BROKEN {
        let out = check(name, true);
        assert_eq!(out.status.code(), Some(2), "{name}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
        assert_eq!(v["ok"], false);
        assert!(
            v["errors"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["field"] == field),
            "{name}: {v}"
        );
    }
}

#[test]
fn bad_yaml_points_at_a_frontmatter_line() {
    let text = stderr(&check("bad-yaml", false));
    let line = text.lines().find(|l| l.contains("architect.md:")).unwrap();
    let n: usize = line
        .split("architect.md:")
        .nth(1)
        .and_then(|r| r.split(':').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no line number in {line:?}"));
    assert!((2..=5).contains(&n), "line {n} is outside the frontmatter");
}

#[test]
fn environment_overrides_apply_and_bad_ones_are_named() {
    let out = supervisor_check(&fixture("no-repo"))
        .env("SUPERVISOR_REPO", "acme/from-env")
        .output()
        .unwrap();
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}{}", stderr(&out));
    assert!(text.contains("acme/from-env"));
    assert!(text.contains("from env     repo"));

    let out = supervisor_check(&fixture("valid"))
        .env("SUPERVISOR_AUDIT_SCORE_THRESHOLD", "abc")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("$SUPERVISOR_AUDIT_SCORE_THRESHOLD"));
}

/// Issue 30: every agent has a time limit unless the settings remove it, and removing it is a
/// warning.
#[test]
fn agents_without_a_time_limit_are_a_warning() {
    let out = check("valid", false);
    let text = stdout(&out);
    assert!(
        text.contains("timeout 60 min (developer 30 min); stalled after 600 s without output"),
        "{text}"
    );
    assert!(!text.contains("no time limit"), "{text}");

    let out = supervisor_check(&fixture("valid"))
        .env("SUPERVISOR_AGENT_TIMEOUT_MIN", "0")
        .env("SUPERVISOR_AGENT_STALL_SEC", "0")
        .output()
        .unwrap();
    let text = stdout(&out);
    assert_eq!(
        out.status.code(),
        Some(0),
        "a warning, not an error: {text}"
    );
    assert!(text.contains("timeout none (developer 30 min)"), "{text}");
    assert!(
        text.contains("stalled after never (agentStallSec 0)"),
        "{text}"
    );
    assert!(
        text.contains(
            "`supervisor.agentTimeoutMin`: is 0: agent dispatches have no time limit (except the 1 agent(s) agentTimeoutsMin names), and agentStallSec is 0, so an agent that hangs is never stopped"
        ),
        "{text}"
    );
    assert!(
        text.contains("ok: configuration is valid (2 warnings)"),
        "{text}"
    );
}

/// A repository in a temporary directory with `settings` as its `.pi/settings.json`.
fn repo_with_settings(settings: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".pi")).unwrap();
    std::fs::write(dir.path().join(".pi/settings.json"), settings).unwrap();
    dir
}

fn supervisor_in(dir: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_supervisor"));
    cmd.current_dir(dir);
    for (k, _) in std::env::vars() {
        if k.starts_with("SUPERVISOR_") || k.starts_with("GH_") || k.starts_with("GITHUB_") {
            cmd.env_remove(k);
        }
    }
    cmd
}

#[test]
fn a_typo_of_a_required_field_is_named_beside_the_missing_error() {
    let dir = repo_with_settings(
        "{ \"supervisor\": {\n  \"repo\": \"acme/app\",\n  \"projectNumber\": 1,\n  \"codeowner\": [\"alice\"]\n} }\n",
    );
    let out = supervisor_in(dir.path()).arg("check").output().unwrap();
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    let line = text
        .lines()
        .find(|l| l.contains("`supervisor.codeowners`"))
        .unwrap_or_else(|| panic!("no line names codeowners in:\n{text}"));
    assert!(line.contains(".pi/settings.json:4"), "{line}");
    assert!(
        line.contains("rename \"codeowner\" to \"codeowners\""),
        "{line}"
    );

    // Unknown keys that are not the cause stay warnings, shown beside the errors.
    let dir = repo_with_settings(
        r#"{ "supervisor": { "repo": "acme/app", "projectNumber": 0, "codeowners": ["alice"], "maxRejection": 2 } }"#,
    );
    let out = supervisor_in(dir.path())
        .args(["check", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["errors"][0]["field"], "supervisor.projectNumber");
    assert_eq!(v["warnings"][0]["field"], "supervisor.maxRejection");
    assert_eq!(v["warnings"][0]["fix"], "did you mean \"maxRejections\"?");
}

/// `agentBackend: "command"` names no command line: `check` says so and how to define one, and a
/// command line defined under `backends` (even one called `command`) is accepted.
#[test]
fn an_agent_backend_without_a_command_line_is_a_configuration_error() {
    let dir = repo_with_settings(
        r#"{ "supervisor": { "repo": "acme/app", "projectNumber": 1, "codeowners": ["alice"], "agentBackend": "command" } }"#,
    );
    let out = supervisor_in(dir.path())
        .args(["check", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let errors = v["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1, "one error, not one per role: {v}");
    assert_eq!(errors[0]["field"], "supervisor.agentBackend");
    assert!(
        errors[0]["fix"].as_str().unwrap().contains("\"backends\""),
        "{v}"
    );

    let dir = repo_with_settings(
        r#"{ "supervisor": { "repo": "acme/app", "projectNumber": 1, "codeowners": ["alice"], "agentBackend": "command",
             "backends": { "command": { "command": ["true", "{prompt}"], "promptVia": "arg" } } } }"#,
    );
    let out = supervisor_in(dir.path()).arg("check").output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// `passGitHubToken`, spelt as the README spells it, hands the token to the agent process.
#[test]
fn pass_github_token_reaches_the_agent_environment() {
    for (pass, expected) in [(true, "tok-123"), (false, "")] {
        let dir = repo_with_settings(&format!(
            r#"{{ "supervisor": {{ "repo": "acme/app", "projectNumber": 1, "codeowners": ["alice"],
                 "agentBackend": "scripted", "agentScript": "agents.yaml", "passGitHubToken": {pass} }} }}"#
        ));
        std::fs::write(
            dir.path().join("agents.yaml"),
            "researcher:\n  - - run: \"printf '%s' \\\"$GH_TOKEN\\\" > seen-token\"\n    - final: done\n",
        )
        .unwrap();
        let out = supervisor_in(dir.path())
            .args(["agent", "researcher", "--task", "look", "--in", "."])
            .env("GH_TOKEN", "tok-123")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let seen = std::fs::read_to_string(dir.path().join("seen-token")).unwrap();
        assert_eq!(seen, expected, "passGitHubToken: {pass}");
    }
}

/// A pipe whose reading end is already closed: every write to it fails with EPIPE.
fn closed_pipe() -> std::process::Stdio {
    use std::os::fd::FromRawFd;
    let mut fds = [0; 2];
    // SAFETY: pipe(2) fills the two descriptors; each is then owned exactly once.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: fds[0] is a fresh descriptor owned here and closed at once.
    drop(unsafe { std::os::fd::OwnedFd::from_raw_fd(fds[0]) });
    // SAFETY: fds[1] is a fresh descriptor handed to the child.
    std::process::Stdio::from(unsafe { std::os::fd::OwnedFd::from_raw_fd(fds[1]) })
}

/// `supervisor check --json | head -c 10` and friends: output into a closed pipe ends the program
/// quietly, never with a panic (exit 101).
#[test]
fn a_closed_output_pipe_ends_every_command_quietly() {
    let valid = fixture("valid");
    let broken = fixture("no-repo");
    let dir = tempfile::tempdir().unwrap();
    let dirs = dir.path().to_str().unwrap();
    // (arguments, directory, whether stdout (else stderr) is the closed pipe, exit status)
    let cases: [(&[&str], &Path, bool, i32); 8] = [
        (&["check", "--json"], &valid, true, 0),
        (&["check", "--json"], &broken, true, 2),
        (&["check"], &valid, true, 0),
        (&["check"], &broken, false, 2),
        (
            &["agent", "nobody", "--task", "x", "--in", "."],
            &valid,
            false,
            2,
        ),
        (
            &["gates", "--in", dirs, "--only", "nonsense"],
            &valid,
            false,
            2,
        ),
        (
            &["sandbox", "serve", "--state", "missing.json"],
            &valid,
            false,
            2,
        ),
        (&["--version"], &valid, true, 0),
    ];
    for (args, cwd, closed_stdout, status) in cases {
        let mut cmd = supervisor_in(cwd);
        cmd.args(args).env("RUST_LOG", "debug");
        let out = if closed_stdout {
            cmd.stdout(closed_pipe()).output().unwrap()
        } else {
            cmd.stderr(closed_pipe()).output().unwrap()
        };
        let panic_text = stderr(&out);
        assert!(!panic_text.contains("panicked"), "{args:?}: {panic_text}");
        // The command's usual status: the closed pipe changes nothing but what is seen.
        assert_eq!(out.status.code(), Some(status), "{args:?}: {panic_text}");
    }
}

/// A settings file, a workflow and an agent definition with mistakes of every kind: of types, of
/// ranges and backends, of globs, of columns the workflow lacks, of the workflow's own keys and
/// targets, of an agent's frontmatter.
const MANY_MISTAKES: [(&str, &str); 3] = [
    (
        ".supervisor/settings.json",
        r#"{
  "supervisor": {
    "repo": "acme/app",
    "projectNumber": "4",
    "codeowners": ["alice", "bad login"],
    "maxRejections": "three",
    "auditScoreThreshold": 1.5,
    "agentBackend": "aider",
    "workflow": ".supervisor/workflow.json",
    "statusMapping": { "Reserch": "researcher" },
    "columns": { "Reveiw": "In review" },
    "gates": { "exclude": ["dist/", "src/[ab.ts"], "ciPollIntervalSec": 0 },
    "watch": { "triggerColumns": ["Research", "Triage"], "maxConcurrent": 0 }
  }
}
"#,
    ),
    (
        ".supervisor/workflow.json",
        r#"{
  "stages": [
    { "status": "Backlog", "builtIn": "backlog" },
    { "status": "Research", "agentName": "researcher", "markerMap": { "DONE": "Reveiw" }, "maxRejections": "2" },
    { "status": "Build", "agentName": "developer", "commits": true, "hooks": ["tsc", "lnit"], "nxet": "Done" },
    { "status": "Done", "builtIn": "done" }
  ],
  "revision": { "start": "Nowhere" }
}
"#,
    ),
    (
        ".supervisor/agents/developer.md",
        "---\nmodel: [unclosed\n---\nWrite the code.\n",
    ),
];

/// (file, line, field) of every mistake in [`MANY_MISTAKES`].
const EVERY_MISTAKE: [(&str, usize, &str); 17] = [
    ("settings.json", 4, "supervisor.projectNumber"),
    ("settings.json", 5, "supervisor.codeowners[1]"),
    ("settings.json", 6, "supervisor.maxRejections"),
    ("settings.json", 7, "supervisor.auditScoreThreshold"),
    ("settings.json", 8, "supervisor.agentBackend"),
    ("settings.json", 10, "supervisor.statusMapping.Reserch"),
    ("settings.json", 11, "supervisor.columns.Reveiw"),
    ("settings.json", 12, "supervisor.gates.exclude[1]"),
    ("settings.json", 12, "supervisor.gates.ciPollIntervalSec"),
    ("settings.json", 13, "supervisor.watch.triggerColumns[1]"),
    ("settings.json", 13, "supervisor.watch.maxConcurrent"),
    ("workflow.json", 4, "stages[1].maxRejections"),
    ("workflow.json", 4, "stages[1] (Research).markerMap.DONE"),
    ("workflow.json", 5, "stages[2] (Build).hooks[1]"),
    ("workflow.json", 5, "stages[2].nxet"),
    ("workflow.json", 8, "revision.start"),
    ("developer.md", 3, "frontmatter"),
];

fn repo_with(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    dir
}

/// One `check` names every mistake of every file, each at its file, line and column with its field
/// and fix; nothing waits for another round.
#[test]
fn one_check_names_every_mistake_at_once() {
    let dir = repo_with(&MANY_MISTAKES);
    let out = supervisor_check(dir.path()).output().unwrap();
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(
        text.starts_with(&format!("{} configuration errors:", EVERY_MISTAKE.len())),
        "{text}"
    );
    for (file, line, field) in EVERY_MISTAKE {
        let said = text
            .lines()
            .find(|l| l.contains(&format!("`{field}`")))
            .unwrap_or_else(|| panic!("no error names `{field}` in:\n{text}"));
        let at = format!("{file}:{line}:");
        assert!(said.contains(&at), "{said:?} is not at {at}");
        assert!(said.contains(" — "), "{said:?} gives no fix");
    }
    // Where the file is JSON, the column is known too: the key's or the item's.
    assert!(
        text.contains(
            "settings.json:12:37: `supervisor.gates.exclude[1]`: `src/[ab.ts` is not a valid glob"
        ),
        "{text}"
    );
    assert!(
        text.contains("settings.json:13:47: `supervisor.watch.triggerColumns[1]`: `Triage` is not a column of the workflow"),
        "{text}"
    );

    // `--json` carries the same list.
    let out = supervisor_check(dir.path()).arg("--json").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    let errors = v["errors"].as_array().unwrap();
    assert_eq!(errors.len(), EVERY_MISTAKE.len(), "{v}");
    for (file, line, field) in EVERY_MISTAKE {
        let e = errors
            .iter()
            .find(|e| e["field"] == field)
            .unwrap_or_else(|| panic!("no error for {field} in {v}"));
        assert!(e["file"].as_str().unwrap().ends_with(file), "{e}");
        assert_eq!(e["line"], line, "{e}");
        assert!(!e["fix"].as_str().unwrap().is_empty(), "{e}");
    }
    let glob = errors
        .iter()
        .find(|e| e["field"] == "supervisor.gates.exclude[1]")
        .unwrap();
    assert_eq!(glob["column"], 37, "{glob}");
}

/// A `--repo-root`, `--in` or `--state` that names nothing usable is said as such, naming the
/// argument and what to pass, never with the system's error text.
#[test]
fn paths_that_name_nothing_are_said_plainly() {
    let file = tempfile::NamedTempFile::new().unwrap();
    let file = file.path().to_str().unwrap();
    let cases: [(&[&str], &str); 8] = [
        (
            &["check", "--repo-root", "/nonexistent"],
            "/nonexistent: `(repository root)`: does not exist — run supervisor in the repository's directory, or pass --repo-root DIR",
        ),
        (
            &["check", "--repo-root", file],
            "`(repository root)`: is not a directory",
        ),
        (
            &["run", "1", "--repo-root", "/nonexistent"],
            "`(repository root)`: does not exist",
        ),
        (
            &["runs", "--repo-root", "/nonexistent"],
            "supervisor runs: --repo-root /nonexistent: does not exist; pass --repo-root DIR",
        ),
        (
            &["init", "--repo-root", "/nonexistent"],
            "supervisor init: --repo-root /nonexistent: does not exist; pass --repo-root DIR",
        ),
        (
            &["agent", "researcher", "--task", "x", "--in", "/nonexistent"],
            "supervisor agent: --in /nonexistent: does not exist; pass --in DIR",
        ),
        (
            &["sandbox", "serve", "--state", "/nonexistent.json"],
            "supervisor sandbox serve: --state /nonexistent.json: does not exist; give the sandbox's state file",
        ),
        (&["demo", "--dir", file], "supervisor demo: --dir "),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (args, said) in cases {
        let out = supervisor_in(dir.path()).args(args).output().unwrap();
        let text = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {text}");
        assert!(text.contains(said), "{args:?}: {text}");
        assert!(!text.contains("os error"), "{args:?}: {text}");
        assert!(!text.contains("no settings file"), "{args:?}: {text}");
    }
}

/// `doctor`'s checks are its report: on stdout, each with its fix; exit 2 when one fails.
#[test]
fn doctor_prints_its_checks_on_stdout() {
    let out = supervisor_in(&fixture("valid"))
        .arg("doctor")
        .env("PATH", stand_in_clis())
        .output()
        .unwrap();
    let (text, diagnostics) = (stdout(&out), stderr(&out));
    assert_eq!(out.status.code(), Some(2), "{text}{diagnostics}");
    assert!(text.contains("✖ token"), "{text}");
    assert!(text.contains("fix:"), "{text}");
    assert!(!diagnostics.contains("✖"), "{diagnostics}");
}
