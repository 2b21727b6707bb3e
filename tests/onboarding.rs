//! A newcomer's first runs: what `supervisor run` leaves behind in the repository, boards that
//! were not set up for supervisor, and the preflight that refuses before anything is written.

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use supervisor::demo::{World, WorldSpec, git};

#[path = "support/specs.rs"]
mod specs;
use specs::*;

const BIN: &str = env!("CARGO_BIN_EXE_supervisor");

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn summary(r: &Run) -> Value {
    serde_json::from_str(&r.stdout).unwrap_or(Value::Null)
}

async fn supervisor(world: &World, args: &[&str]) -> Run {
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.args(args)
        .current_dir(&world.repo)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (k, _) in std::env::vars() {
        if k.starts_with("SUPERVISOR_")
            || k == "GH_TOKEN"
            || k == "GITHUB_TOKEN"
            || k == "GITHUB_API_URL"
        {
            cmd.env_remove(k);
        }
    }
    cmd.envs(world.env());
    let out = tokio::time::timeout(Duration::from_secs(120), cmd.output())
        .await
        .expect("supervisor finished within 120 s")
        .expect("supervisor ran");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

async fn world(spec: WorldSpec) -> (tempfile::TempDir, World) {
    let dir = tempfile::tempdir().unwrap();
    let world = World::build(dir.path(), spec).await.expect("world builds");
    (dir, world)
}

/// A repository whose `.gitignore` says nothing about supervisor.
fn plain_gitignore(spec: &mut WorldSpec) {
    spec.files.retain(|(p, _)| p != ".gitignore");
    spec.files
        .push((".gitignore".into(), "node_modules/\n".into()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_leaves_nothing_untracked_in_the_repository() {
    let mut spec = spec();
    plain_gitignore(&mut spec);
    let (_d, world) = world(spec).await;
    let r = supervisor(&world, &["run", "1", "--json"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(summary(&r)["end"]["kind"], "pull-request");
    assert!(world.runs_dir().is_dir());
    let status = git(&world.repo, &["status", "--porcelain", "--untracked-files=all"]).unwrap();
    assert_eq!(status, "", "the run left files for git to see");
}
