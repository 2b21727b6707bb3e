//! The `supervisor agent` command as a user runs it, including signals sent to a running supervisor.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use supervisor::agent::{AgentRun, ExitReason, process_group_alive};

const DEADLINE: Duration = Duration::from_secs(30);

fn supervisor() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_supervisor"));
    cmd.env_remove("SUPERVISOR_AGENT_BACKEND")
        .env_remove("SUPERVISOR_AGENT_SCRIPT")
        .env("RUST_LOG", "warn");
    cmd
}

fn git(dir: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .args([
            "-c",
            "user.name=T",
            "-c",
            "user.email=t@e",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .status()
        .unwrap()
        .success();
    assert!(ok, "git {args:?}");
}

/// Poll until `cond` holds, failing after the deadline.
fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + DEADLINE;
    while !cond() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn wait_exit(child: &mut Child) -> i32 {
    let end = Instant::now() + DEADLINE;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code().expect("exited, not killed");
        }
        if Instant::now() > end {
            let _ = child.kill();
            panic!("supervisor did not exit in time");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Collect a child's stderr as it is written.
fn capture_stderr(child: &mut Child) -> Arc<Mutex<String>> {
    let buf = Arc::new(Mutex::new(String::new()));
    let stderr = child.stderr.take().unwrap();
    let sink = buf.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let mut b = sink.lock().unwrap();
            b.push_str(&line);
            b.push('\n');
        }
    });
    buf
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
}

fn pgid_from_pid_file(file: &Path) -> i32 {
    let pid: i32 = std::fs::read_to_string(file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // SAFETY: getpgid only reads.
    let pgid = unsafe { libc::getpgid(pid) };
    assert!(pgid > 1, "the grandchild runs");
    pgid
}

/// A repository whose settings run agents from `script` (YAML), worktrees under `<tmp>/wts`.
fn repo_with_script(script: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().canonicalize().unwrap().join("repo");
    std::fs::create_dir_all(repo.join(".pi")).unwrap();
    std::fs::write(repo.join("README.md"), "# app\n").unwrap();
    std::fs::write(repo.join("agents.yaml"), script).unwrap();
    std::fs::write(
        repo.join(".pi/settings.json"),
        r#"{ "supervisor": { "repo": "acme/app", "projectNumber": 1, "codeowners": ["alice"],
             "agentBackend": "scripted", "agentScript": "agents.yaml", "worktreeRoot": "../wts" } }"#,
    )
    .unwrap();
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-qm", "initial"]);
    (tmp, repo)
}

const SLEEPER: &str = "developer:\n  - - final: halfway there\n    - run: \"sleep 300 & echo $! > grandchild.pid; wait\"\n";

#[test]
fn sigterm_stops_the_agent_group_removes_the_worktree_and_exits_0() {
    let (_tmp, repo) = repo_with_script(SLEEPER);
    let wt = repo.parent().unwrap().join("wts/worktree-git-issue-7");
    let mut child = supervisor()
        .args([
            "agent",
            "developer",
            "--task",
            "implement it",
            "--worktree",
            "7",
            "--in",
        ])
        .arg(&repo)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = capture_stderr(&mut child);
    let pid_file = wt.join("grandchild.pid");
    eventually("the agent's grandchild to start", || {
        std::fs::read_to_string(&pid_file).is_ok_and(|s| s.ends_with('\n'))
    });
    let pgid = pgid_from_pid_file(&pid_file);
    assert!(process_group_alive(pgid));

    signal(&child, libc::SIGTERM);
    let code = wait_exit(&mut child);
    let log = stderr.lock().unwrap().clone();
    assert_eq!(code, 0, "{log}");
    assert!(log.contains("interrupted"), "{log}");
    eventually("the agent's process group to be gone", || {
        !process_group_alive(pgid)
    });
    assert!(!wt.exists(), "the worktree is removed");
    let branches = Command::new("git")
        .args(["branch", "--list", "worktree-git-issue-7"])
        .current_dir(&repo)
        .output()
        .unwrap();
    assert!(branches.stdout.is_empty(), "the branch is deleted");
}

#[test]
fn a_second_signal_exits_1_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let script = tmp.path().join("agents.yaml");
    // The agent ignores SIGTERM, so supervisor is still waiting out the grace period.
    std::fs::write(
        &script,
        "developer:\n  - - run: \"trap '' TERM; sleep 300 & echo $! > grandchild.pid; wait\"\n",
    )
    .unwrap();
    let mut child = supervisor()
        .args(["agent", "developer", "--task", "x", "--in"])
        .arg(tmp.path())
        .env("SUPERVISOR_AGENT_BACKEND", "scripted")
        .env("SUPERVISOR_AGENT_SCRIPT", &script)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = capture_stderr(&mut child);
    let pid_file = tmp.path().join("grandchild.pid");
    eventually("the agent's grandchild to start", || {
        std::fs::read_to_string(&pid_file).is_ok_and(|s| s.ends_with('\n'))
    });
    let pgid = pgid_from_pid_file(&pid_file);

    signal(&child, libc::SIGTERM);
    eventually("the first signal to be handled", || {
        stderr
            .lock()
            .unwrap()
            .contains("stopping: the running agent")
    });
    let started = Instant::now();
    signal(&child, libc::SIGINT);
    let code = wait_exit(&mut child);
    assert_eq!(code, 1, "{}", stderr.lock().unwrap());
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "at once, not after the grace period"
    );
    eventually("the agent's process group to be gone", || {
        !process_group_alive(pgid)
    });
}

#[test]
fn agent_command_prints_the_run_as_json_and_sets_the_exit_status() {
    let (_tmp, repo) = repo_with_script(
        "researcher:\n  - [ {tool: read}, {usage: {input: 70, output: 30}}, {final: \"## Research Findings\\n```json\\n{\\\"action\\\": \\\"COMPLETE\\\"}\\n```\"} ]\nauditor:\n  - [ {fail: \"401 invalid api key\"} ]\n",
    );
    let out = supervisor()
        .args([
            "agent",
            "researcher",
            "--task",
            "look around",
            "--json",
            "--in",
        ])
        .arg(&repo)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let run: AgentRun = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(run.exit, ExitReason::Completed);
    assert_eq!((run.tool_calls, run.usage.total), (1, 100));
    assert!(run.final_text.starts_with("## Research Findings"));
    let transcript = run.transcript.expect("a transcript");
    assert!(transcript.starts_with(repo.join(".supervisor/runs")));
    assert!(
        std::fs::read_to_string(transcript)
            .unwrap()
            .contains("message_end")
    );
    assert!(stderr.contains("output protocol: COMPLETE"), "{stderr}");

    let out = supervisor()
        .args(["agent", "auditor", "--task", "audit", "--in"])
        .arg(&repo)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("401 invalid api key"), "{stderr}");

    let out = supervisor()
        .args(["agent", "nobody", "--task", "x", "--in"])
        .arg(&repo)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("known roles: architect"));
}

/// The epic's roles, which no stage of the workflow names, run as the others do; what they
/// answer is read as an epic reads it.
#[test]
fn the_epic_roles_run_and_their_answers_are_read() {
    let script = r#"planner:
  - - final: |
        Two tasks.
        ```json
        {"tasks": [{"id": "units", "title": "Units", "body": "- [ ] d, h"},
                   {"id": "docs", "title": "Docs", "body": "- [ ] README", "dependsOn": ["units"]}]}
        ```
  - - final: '{"tasks": [{"id": "a", "title": "A", "body": "b", "dependsOn": ["a"]}]}'
reviewer:
  - - final: '{"verdict": "needs-revision", "feedback": "handle 0"}'
"#;
    let (_tmp, repo) = repo_with_script(script);
    let run = |role: &str, attempt: &str| {
        let out = supervisor()
            .args([
                "agent",
                role,
                "--task",
                "Split #7",
                "--attempt",
                attempt,
                "--in",
            ])
            .arg(&repo)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (code, stderr) = run("planner", "1");
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("plan: 2 task(s): units, docs"), "{stderr}");
    let (code, stderr) = run("planner", "2");
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("plan refused: the tasks depend on each other in a cycle: a → a"),
        "{stderr}"
    );
    let (code, stderr) = run("reviewer", "1");
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("verdict: needs-revision: handle 0"),
        "{stderr}"
    );

    // An override in the repository is the role that runs.
    std::fs::create_dir_all(repo.join(".supervisor/agents")).unwrap();
    std::fs::write(
        repo.join(".supervisor/agents/reviewer.md"),
        "---\nreadOnly: maybe\n---\nJudge.\n",
    )
    .unwrap();
    let (code, stderr) = run("reviewer", "1");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(".supervisor/agents/reviewer.md"),
        "{stderr}"
    );

    let (code, stderr) = run("nobody", "1");
    assert_eq!(code, Some(2));
    assert!(stderr.contains("planner, reviewer"), "{stderr}");
}
