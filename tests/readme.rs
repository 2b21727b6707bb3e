//! The README's shell blocks, run as written. Each block carries a hidden mark before it,
//! `<!-- readme-test: MODE — why -->`: `demo` runs its demo line, `world` runs every line in a
//! clone of a repository whose GitHub is the sandbox, `sandbox` runs the block as a script from
//! this checkout, `skip` says why it cannot run here (it reaches GitHub itself, or needs real
//! agent CLIs). `supervisor` is the binary these tests build, first on `PATH`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use supervisor::demo::{World, WorldSpec, git};

#[path = "support/specs.rs"]
mod specs;

const BIN: &str = env!("CARGO_BIN_EXE_supervisor");
const MODES: [&str; 4] = ["demo", "world", "sandbox", "skip"];

#[derive(Debug)]
struct Block {
    mode: String,
    why: String,
    /// 1-based line of the opening fence.
    line: usize,
    code: String,
}

fn readme() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap()
}

/// Every fenced shell block with the mark before it (an empty mode when it has none).
fn blocks(text: &str) -> Vec<Block> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let fence = lines[i].trim_start();
        let indent = lines[i].len() - fence.len();
        if !matches!(fence, "```sh" | "```bash" | "```shell" | "```console") {
            i += 1;
            continue;
        }
        let mark = lines[..i]
            .iter()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map(|l| l.trim())
            .and_then(|l| l.strip_prefix("<!-- readme-test:"))
            .and_then(|l| l.strip_suffix("-->"))
            .unwrap_or("")
            .trim();
        let (mode, why) = mark.split_once(" — ").unwrap_or((mark, ""));
        let mut code = String::new();
        let start = i;
        i += 1;
        while i < lines.len() && lines[i].trim() != "```" {
            code.push_str(lines[i].get(indent..).unwrap_or(lines[i].trim_start()));
            code.push('\n');
            i += 1;
        }
        out.push(Block {
            mode: mode.trim().to_string(),
            why: why.trim().to_string(),
            line: start + 1,
            code,
        });
        i += 1;
    }
    out
}

fn of_mode(mode: &str) -> Vec<Block> {
    blocks(&readme())
        .into_iter()
        .filter(|b| b.mode == mode)
        .collect()
}

/// A directory holding `supervisor`, the binary under test.
fn bin_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(BIN, dir.path().join("supervisor")).unwrap();
    dir
}

/// `bash` running `script` in `cwd`, with `supervisor` first on PATH and none of the caller's
/// GitHub or supervisor settings.
fn bash(script: &str, cwd: &Path, bin: &Path, env: &[(String, String)]) -> (i32, String) {
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = Command::new("bash");
    cmd.args(["-euo", "pipefail", "-c", script])
        .current_dir(cwd)
        .env("PATH", path)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null());
    for (k, _) in std::env::vars() {
        if k.starts_with("SUPERVISOR_")
            || [
                "GH_TOKEN",
                "GITHUB_TOKEN",
                "GITHUB_API_URL",
                "CARGO_TARGET_DIR",
            ]
            .contains(&k.as_str())
        {
            cmd.env_remove(k);
        }
    }
    cmd.envs(env.iter().map(|(k, v)| (k, v)));
    let out = cmd.output().expect("bash runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// Each command line of a block (comments dropped, continuation lines joined).
fn commands(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut pending = String::new();
    for line in code.lines() {
        let line = line.trim();
        if let Some(more) = line.strip_suffix('\\') {
            pending.push_str(more);
            continue;
        }
        pending.push_str(line);
        let command = pending.trim().to_string();
        pending.clear();
        if !command.is_empty() && !command.starts_with('#') {
            out.push(command);
        }
    }
    out
}

#[test]
fn every_shell_block_says_whether_and_how_it_runs() {
    let all = blocks(&readme());
    assert!(all.len() >= 8, "{all:#?}");
    for b in &all {
        assert!(
            MODES.contains(&b.mode.as_str()),
            "README line {}: the block needs a mark `<!-- readme-test: {} — why -->` before it, got {:?}",
            b.line,
            MODES.join("|"),
            b.mode
        );
        if b.mode == "skip" {
            assert!(
                b.why.len() > 10,
                "README line {}: say why it is not run",
                b.line
            );
        }
    }
    for mode in ["demo", "world", "sandbox"] {
        assert!(all.iter().any(|b| b.mode == mode), "no {mode} block");
    }
}

/// The README's first command: the demo, from this checkout, as `cargo run -- demo` runs it.
#[test]
fn the_opening_demo_runs() {
    let bin = bin_dir();
    let tmp = tempfile::tempdir().unwrap();
    let env = [("TMPDIR".to_string(), tmp.path().display().to_string())];
    let mut ran = 0;
    for b in of_mode("demo") {
        for line in commands(&b.code).iter().filter(|l| l.contains(" demo")) {
            let line = line
                .split(" #")
                .next()
                .unwrap()
                .replace("cargo run --", "supervisor");
            let (code, out) = bash(
                &line,
                Path::new(env!("CARGO_MANIFEST_DIR")),
                bin.path(),
                &env,
            );
            assert_eq!(code, 0, "README line {}: `{line}`\n{out}", b.line);
            assert!(out.contains("pull request"), "{out}");
            ran += 1;
        }
    }
    assert_eq!(ran, 1);
}

/// Getting started: `init --create-board`, `doctor`, `run 42 --add-to-board`, as written, in a
/// clone whose `origin` is on GitHub and whose token belongs to the author of issue 42.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn getting_started_runs_as_written() {
    let mut spec: WorldSpec = specs::spec();
    spec.issue.number = 42;
    spec.issue.column = None;
    spec.bot = spec.codeowner.clone();
    spec.files.retain(|(p, _)| p != ".gitignore");
    spec.files
        .push((".gitignore".into(), "node_modules/\n".into()));
    let dir = tempfile::tempdir().unwrap();
    let world = World::build(dir.path(), spec).await.expect("world builds");
    world.sandbox.with_state(|s| s.board = None);
    git(
        &world.repo,
        &[
            "remote",
            "set-url",
            "origin",
            "https://github.com/demo-org/durations.git",
        ],
    )
    .unwrap();
    let bin = bin_dir();
    let blocks = of_mode("world");
    assert_eq!(blocks.len(), 1, "{blocks:#?}");
    let lines = commands(&blocks[0].code);
    assert!(lines.len() >= 3, "{lines:?}");
    for line in &lines {
        let (code, out) = {
            let line = line.clone();
            let repo = world.repo.clone();
            let bin: PathBuf = bin.path().into();
            let env = world.env();
            tokio::task::spawn_blocking(move || bash(&line, &repo, &bin, &env))
                .await
                .unwrap()
        };
        assert_eq!(code, 0, "README line {}: `{line}`\n{out}", blocks[0].line);
    }
    world.sandbox.with_state(|s| {
        assert_eq!(s.pulls().len(), 1, "the run opened its pull request");
        assert_eq!(s.column_of(42), Some("Done"));
    });
    world.sandbox.shutdown().await;
}

/// The sandbox GitHub's block: served, then asked over REST and GraphQL with curl.
#[test]
fn the_sandbox_block_runs() {
    let blocks = of_mode("sandbox");
    assert_eq!(blocks.len(), 1, "{blocks:#?}");
    let bin = bin_dir();
    // Whatever happens, the server the block starts in the background does not outlive it.
    let script = format!(
        "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n{}",
        blocks[0].code
    );
    let (code, out) = bash(
        &script,
        Path::new(env!("CARGO_MANIFEST_DIR")),
        bin.path(),
        &[],
    );
    assert_eq!(code, 0, "README line {}\n{out}", blocks[0].line);
    assert!(out.contains("\"title\""), "the issue: {out}");
    assert!(
        out.contains("{\"data\":{\"repository\":{\"issue\":{\"projectItems\":{\"nodes\":[{\"fieldValueByName\":{\"name\":\"Backlog\"}}]}}}}}"),
        "the card's column: {out}"
    );
}

/// The gate tools the README tells a user to install are the versions the tests pin.
#[test]
fn the_readmes_tool_versions_are_the_pinned_ones() {
    let pins = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/install-tools.sh"),
    )
    .unwrap();
    let text = readme().replace('\n', " ");
    let install = text
        .split("npm install --global typescript@")
        .nth(1)
        .expect("the README names the gate tools to install");
    let words: Vec<String> = format!("typescript@{install}")
        .split_whitespace()
        .take(4)
        .map(|w| w.trim_matches('`').to_string())
        .collect();
    for word in &words {
        assert!(
            pins.contains(&format!("\"{word}\"")),
            "README names {word}, scripts/install-tools.sh does not pin it"
        );
    }
    let pip = text
        .split("pip install \"")
        .nth(1)
        .and_then(|t| t.split('"').next())
        .expect("the README names the Python gate tool");
    assert!(pins.contains(&format!("\"{pip}\"")), "{pip}");
}
