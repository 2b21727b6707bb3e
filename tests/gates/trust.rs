//! Gate tools come only from trusted places and see only the agents' environment allowlist: a tool the
//! agent planted in its worktree never runs, and no token reaches a gate process.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use supervisor::config::{Expect, GateKind, Hook, RepoSlug, Settings};
use supervisor::gates::{GateSession, GateStatus, ToolEnv, default_hook, run_gate};

use crate::common::{Fixture, context_for, run_bounded, tools_available, tools_path};

const TOKEN: &str = "ghp_plantedTokenValue0123456789";

fn executable(path: &Path, text: &str) {
    write_file(path, text);
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// A linked worktree of the fixture on a new branch `agent` from `main`, as the pipeline makes one.
fn agent_worktree(f: &Fixture) -> PathBuf {
    let main = f
        .repo
        .find_branch("main", git2::BranchType::Local)
        .expect("main")
        .get()
        .peel_to_commit()
        .expect("main commit");
    let branch = f.repo.branch("agent", &main, false).expect("branch");
    let path = f.dir.parent().expect("temp dir").join("agent-worktree");
    let mut opts = git2::WorktreeAddOptions::new();
    opts.reference(Some(branch.get()));
    f.repo
        .worktree("agent", &path, Some(&opts))
        .expect("worktree");
    path.canonicalize().expect("canonical worktree")
}

/// What an agent plants: tools that report a clean pass and save their environment.
fn plant_tools(wt: &Path) {
    let leak = |name: &str| {
        format!(
            "#!/bin/sh\nenv > \"{}/PLANTED-{name}\"\nexit 0\n",
            wt.display()
        )
    };
    executable(&wt.join("node_modules/.bin/tsc"), &leak("tsc"));
    executable(
        &wt.join("node_modules/.bin/typescript-language-server"),
        &leak("tls"),
    );
    // typescript-language-server prefers the workspace's TypeScript unless told otherwise.
    write_file(
        &wt.join("node_modules/typescript/package.json"),
        "{\"name\": \"typescript\", \"version\": \"5.9.3\"}\n",
    );
    write_file(
        &wt.join("node_modules/typescript/lib/tsserver.js"),
        &format!(
            "require('fs').writeFileSync('{}/PLANTED-tsserver', JSON.stringify(process.env));\n",
            wt.display()
        ),
    );
    executable(&wt.join(".venv/bin/pylsp"), &leak("pylsp"));
    std::fs::write(
        wt.join(".gitignore"),
        "node_modules/\n.venv/\n.supervisor/\n",
    )
    .expect("write");
}

fn write_file(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

fn planted(wt: &Path) -> Vec<String> {
    std::fs::read_dir(wt)
        .expect("worktree")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("PLANTED-"))
        .collect()
}

/// Every readable file below `dir` that contains `needle`.
fn files_containing(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            found.extend(files_containing(&path, needle));
        } else if kind.is_file() {
            if let Ok(bytes) = std::fs::read(&path) {
                if String::from_utf8_lossy(&bytes).contains(needle) {
                    found.push(path);
                }
            }
        }
    }
    found
}

#[test]
fn tools_planted_in_the_worktree_never_run_and_no_token_reaches_anything() {
    if !tools_available(&["tsc", "typescript-language-server"]) {
        return;
    }
    let f = Fixture::new("ts-base");
    let wt = agent_worktree(&f);
    // The developer agent's work: a type error, and tools that would call it clean.
    std::fs::copy(
        crate::common::fixture_dir("ts-type-error/src/index.ts"),
        wt.join("src/index.ts"),
    )
    .expect("copy");
    plant_tools(&wt);

    let mut cmd = Command::new(env!("CARGO_BIN_EXE_supervisor"));
    cmd.args(["gates", "--in"])
        .arg(&wt)
        .args(["--only", "tsc,lsp", "--json"])
        .env("PATH", tools_path())
        .env("GH_TOKEN", TOKEN)
        .env("GITHUB_TOKEN", TOKEN);
    for (k, _) in std::env::vars() {
        if k.starts_with("SUPERVISOR_") {
            cmd.env_remove(k);
        }
    }
    let out = cmd.output().expect("supervisor runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    let doc: serde_json::Value = serde_json::from_str(&stdout).expect("JSON");
    for (i, gate) in ["tsc", "lsp"].iter().enumerate() {
        let report = &doc["reports"][i];
        assert_eq!(report["kind"], *gate, "{report:#}");
        assert_eq!(report["status"], "fail", "{report:#}");
        assert_eq!(report["findings"][0]["file"], "src/index.ts", "{report:#}");
        assert_eq!(report["findings"][0]["line"], 4, "{report:#}");
    }
    assert_eq!(planted(&wt), Vec::<String>::new(), "a planted tool ran");
    assert!(!stdout.contains(TOKEN) && !stderr.contains(TOKEN));
    assert_eq!(files_containing(&wt, TOKEN), Vec::<PathBuf>::new());
    assert_eq!(files_containing(&f.dir, TOKEN), Vec::<PathBuf>::new());
}

#[test]
fn a_planted_tool_is_skipped_even_when_gates_tool_paths_points_into_the_worktree() {
    if !tools_available(&["tsc"]) {
        return;
    }
    let f = Fixture::new("ts-base");
    let wt = agent_worktree(&f);
    std::fs::copy(
        crate::common::fixture_dir("ts-type-error/src/index.ts"),
        wt.join("src/index.ts"),
    )
    .expect("copy");
    plant_tools(&wt);
    let session = GateSession::for_checkout(&wt, &wt.join(".supervisor/gates"), ToolEnv::base());
    assert_eq!(session.main_checkout(), Some(f.dir.as_path()));
    let mut ctx = context_for(&wt, &session);
    ctx.settings.tool_paths = vec![wt.join("node_modules/.bin")];
    let r = run_bounded(120, async {
        run_gate(&default_hook(GateKind::Tsc), &ctx).await
    });
    assert_eq!(r.status, GateStatus::Fail, "{r:#?}");
    assert_eq!(r.findings[0].location(), "src/index.ts:4");
    assert_eq!(planted(&wt), Vec::<String>::new());
}

#[test]
fn gate_tools_and_command_gates_see_only_the_agent_allowlist() {
    let f = Fixture::new("py-base");
    // A trusted language server from gates.toolPaths that saves the environment it got.
    let tools = tempfile::tempdir().expect("tools dir");
    let script = std::fs::read_to_string(crate::common::fixture_dir("fake-lsp/server.py"))
        .expect("fake server");
    executable(
        &tools.path().join("pylsp"),
        &format!("#!/usr/bin/env python3\n{script}"),
    );
    f.write(
        ".gitignore",
        ".fake-lsp-starts\n.fake-lsp-env\ncommand-env\n.supervisor/\n",
    );
    f.write("app/greet.py", "print('changed')\n");

    let path = tools_path().to_string_lossy().into_owned();
    let lookup = |k: &str| match k {
        "PATH" => Some(path.clone()),
        "HOME" => std::env::var("HOME").ok(),
        "GITHUB_TOKEN" | "GH_TOKEN" => Some(TOKEN.to_string()),
        "OPENAI_API_KEY" => Some("sk-provider".to_string()),
        "ANTHROPIC_BASE_URL" => Some(format!("https://x/{TOKEN}")),
        _ => None,
    };
    let mut settings =
        Settings::minimal(RepoSlug::parse("o/r").expect("slug"), 1, vec!["a".into()]);
    // Even when agents may have the token, gate processes may not.
    settings.pass_github_token = true;
    settings.agent_env = vec![
        "OPENAI_API_KEY".into(),
        "GITHUB_TOKEN".into(),
        "ANTHROPIC_BASE_URL".into(),
    ];
    let env = ToolEnv::for_settings_from(&settings, Some(TOKEN), &lookup);
    let session = GateSession::for_checkout(&f.dir, &f.dir.join(".supervisor/gates"), env);
    let mut ctx = context_for(&f.dir, &session);
    ctx.settings.tool_paths = vec![tools.path().to_path_buf()];

    let lsp = run_bounded(60, async {
        run_gate(&default_hook(GateKind::Lsp), &ctx).await
    });
    assert_eq!(lsp.status, GateStatus::Fail, "{lsp:#?}");
    assert_eq!(lsp.findings[0].rule, "fake(E1)", "the configured tool ran");
    let command = Hook {
        run: Some("env > command-env".into()),
        expect: Expect::Pass,
        ..default_hook(GateKind::Command)
    };
    let cmd = run_bounded(60, async { run_gate(&command, &ctx).await });
    assert_eq!(cmd.status, GateStatus::Pass, "{cmd:#?}");

    for file in [".fake-lsp-env", "command-env"] {
        let seen = std::fs::read_to_string(f.dir.join(file)).expect("environment saved");
        let names: Vec<&str> = seen
            .lines()
            .filter_map(|l| l.split_once('=').map(|(k, _)| k))
            .collect();
        assert!(!seen.contains(TOKEN), "{file}: {seen}");
        assert!(names.contains(&"OPENAI_API_KEY"), "{file}: {names:?}");
        assert!(
            names.contains(&"PATH") && names.contains(&"HOME"),
            "{names:?}"
        );
        for name in &names {
            assert!(
                [
                    "PATH",
                    "HOME",
                    "OPENAI_API_KEY",
                    "NO_COLOR",
                    "FORCE_COLOR",
                    // Set by the shell or Python themselves.
                    "PWD",
                    "SHLVL",
                    "_",
                    "LC_CTYPE",
                ]
                .contains(name),
                "{file}: {name} is not on the allowlist ({names:?})"
            );
        }
    }
}

#[test]
fn a_main_checkout_tool_that_changed_after_the_session_began_is_not_run() {
    let f = Fixture::new("ts-base");
    f.apply("ts-type-error");
    f.write(".gitignore", "node_modules/\n.supervisor/\n");
    let tsc = f.dir.join("node_modules/.bin/tsc");
    executable(
        &tsc,
        "#!/bin/sh\necho \"src/index.ts(4,27): error TS2345: recorded tool\"\nexit 2\n",
    );
    let session =
        GateSession::for_checkout(&f.dir, &f.dir.join(".supervisor/gates"), ToolEnv::base());
    let ctx = f.context_in(&session);
    let r = run_bounded(60, async {
        run_gate(&default_hook(GateKind::Tsc), &ctx).await
    });
    assert_eq!(r.status, GateStatus::Fail, "{r:#?}");
    assert_eq!(r.findings[0].message, "recorded tool");

    // Rewritten after the session began (by an agent, say): not run, and not replaced silently.
    executable(&tsc, "#!/bin/sh\nexit 0\n");
    let ctx = f.context_in(&session);
    let r = run_bounded(60, async {
        run_gate(&default_hook(GateKind::Tsc), &ctx).await
    });
    let GateStatus::NotRun { reason, .. } = &r.status else {
        panic!("{r:#?}")
    };
    assert!(
        reason.contains("changed since the gate session began"),
        "{reason}"
    );

    // Installed only after the session began: not used; the trusted one on PATH answers.
    let knip = f.dir.join("node_modules/.bin/knip");
    executable(&knip, "#!/bin/sh\necho '{\"issues\":[]}'\nexit 0\n");
    if tools_available(&["knip"]) {
        f.apply("ts-unused-export");
        let ctx = f.context_in(&session);
        let r = run_bounded(120, async {
            run_gate(&default_hook(GateKind::DeadCode), &ctx).await
        });
        assert_eq!(r.status, GateStatus::Fail, "{r:#?}");
        assert_eq!(r.findings[0].location(), "src/math.ts:5");
    }
}
