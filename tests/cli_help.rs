//! What the command line says about itself: every argument described, the environment and the exit
//! codes in `--help`, shell completions and the man page, all from the one clap definition.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use clap::CommandFactory;
use supervisor::cli::Cli;

fn supervisor(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_supervisor"))
        .args(args)
        .output()
        .expect("supervisor runs")
}

fn stdout(out: &Output) -> String {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).expect("UTF-8 output")
}

/// Every command, `supervisor` first, with its full name (`supervisor sandbox serve`).
fn commands() -> Vec<(String, clap::Command)> {
    fn walk(prefix: &str, cmd: &clap::Command, out: &mut Vec<(String, clap::Command)>) {
        let name = if prefix.is_empty() {
            cmd.get_name().to_string()
        } else {
            format!("{prefix} {}", cmd.get_name())
        };
        out.push((name.clone(), cmd.clone()));
        for sub in cmd.get_subcommands() {
            walk(&name, sub, out);
        }
    }
    let mut cli = Cli::command();
    cli.build();
    let mut out = Vec::new();
    walk("", &cli, &mut out);
    out
}

/// The commands a user sees (not the scripted agent's own, nor clap's `help`).
fn visible_commands() -> Vec<String> {
    Cli::command()
        .get_subcommands()
        .filter(|c| !c.is_hide_set())
        .map(|c| c.get_name().to_string())
        .collect()
}

#[test]
fn every_argument_of_every_command_is_described() {
    let mut bare = Vec::new();
    for (name, cmd) in commands() {
        if cmd.get_about().is_none() && cmd.get_long_about().is_none() {
            bare.push(format!("{name} (the command itself)"));
        }
        for arg in cmd.get_arguments() {
            if arg.get_help().is_none() && arg.get_long_help().is_none() {
                let flag = arg
                    .get_long()
                    .map(|l| format!("--{l}"))
                    .unwrap_or_else(|| arg.get_id().to_string().to_uppercase());
                bare.push(format!("{name} {flag}"));
            }
        }
    }
    assert!(bare.is_empty(), "arguments without a description: {bare:?}");
}

/// The variables supervisor reads, as its source names them: `"GH_TOKEN"`, `"SUPERVISOR_APP_ID"`,
/// `"RUST_LOG"`... in code outside tests.
fn variables_read() -> std::collections::BTreeSet<String> {
    let names = regex::Regex::new(r#""((?:GH|GITHUB|SUPERVISOR)_[A-Z_]+|RUST_LOG|NO_COLOR)""#)
        .expect("a valid pattern");
    // Set by supervisor for the processes it starts (the git credential helper, pi's limits
    // extension), not read from the user.
    let set_for_children = [
        "SUPERVISOR_GIT_TOKEN",
        "SUPERVISOR_GIT_HOST",
        "SUPERVISOR_GIT_PROTOCOL",
        "SUPERVISOR_LIMIT_TOOL_CALLS",
        "SUPERVISOR_LIMIT_TOKENS",
    ];
    // The settings' overrides are SUPERVISOR_<SETTING>, one line for all of them.
    use supervisor::config::schema::Block;
    let overrides: Vec<String> = supervisor::config::Settings::FIELDS
        .iter()
        .map(|f| supervisor::config::env_name(f.key))
        .collect();
    let mut found = std::collections::BTreeSet::new();
    let mut stack = vec![
        Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/base/src"),
        Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/github/src"),
        Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/services/src"),
        Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/sandbox/src"),
        Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/engine/src"),
    ];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap_or_default();
            for c in names.captures_iter(code) {
                let name = c[1].to_string();
                if name.ends_with('_')
                    || set_for_children.contains(&name.as_str())
                    || overrides.contains(&name)
                {
                    continue;
                }
                found.insert(name);
            }
        }
    }
    found
}

#[test]
fn the_long_help_names_every_variable_read_and_the_exit_codes() {
    let help = Cli::command().render_long_help().to_string();
    let vars = variables_read();
    assert!(
        vars.contains("GH_TOKEN") && vars.contains("GITHUB_API_URL") && vars.len() > 10,
        "{vars:?}"
    );
    let missing: Vec<&String> = vars.iter().filter(|v| !help.contains(v.as_str())).collect();
    assert!(missing.is_empty(), "not in --help: {missing:?}\n{help}");
    assert!(help.contains("SUPERVISOR_<SETTING>"), "{help}");
    let codes = help
        .split("Exit codes:")
        .nth(1)
        .unwrap_or_else(|| panic!("no exit codes in:\n{help}"));
    for code in 0..=3 {
        assert!(
            codes
                .lines()
                .any(|l| l.trim_start().starts_with(&format!("{code}  "))),
            "exit code {code} is not explained:\n{codes}"
        );
    }
    // The binary's own `--help` is the same text.
    let printed = stdout(&supervisor(&["--help"]));
    assert!(printed.contains("Environment:") && printed.contains("GITHUB_API_URL"));
}

#[test]
fn completions_are_printed_for_every_shell() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = stdout(&supervisor(&["completions", shell]));
        for name in visible_commands() {
            assert!(script.contains(&name), "{shell}: no {name}");
        }
        assert!(script.contains("repo-root"), "{shell}");
    }
    let out = supervisor(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bash"));
}

/// Runs `script` in bash after sourcing the completion script; its stdout.
fn in_bash(completion: &str, script: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("supervisor.bash");
    std::fs::write(&file, completion).unwrap();
    let out = Command::new("bash")
        .arg("--norc")
        .arg("--noprofile")
        .arg("-c")
        .arg(format!("source '{}'\n{script}", file.display()))
        .stdin(Stdio::null())
        .output()
        .expect("bash runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The candidates bash offers for the words of `line` (the last one being completed).
fn complete(completion: &str, line: &str) -> Vec<String> {
    let words: Vec<&str> = line.split(' ').collect();
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let script = format!(
        "COMP_WORDS=({words}); COMP_CWORD={cword}; COMP_LINE='{line}'; COMP_POINT={point}\n\
         _supervisor supervisor '{cur}' '{prev}'\n\
         printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        words = quoted.join(" "),
        cword = words.len() - 1,
        point = line.len(),
        cur = words[words.len() - 1],
        prev = words[words.len() - 2],
    );
    in_bash(completion, &script)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn bash_completes_commands_and_flags() {
    let completion = stdout(&supervisor(&["completions", "bash"]));
    // bash reads the script.
    let check = Command::new("bash")
        .arg("-n")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child
                .stdin
                .take()
                .unwrap()
                .write_all(completion.as_bytes())?;
            child.wait_with_output()
        })
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    // It registers itself for `supervisor`.
    assert!(
        in_bash(&completion, "complete -p supervisor").contains("_supervisor"),
        "no completion registered"
    );
    let mut got = complete(&completion, "supervisor ru");
    got.sort();
    assert_eq!(got, ["run", "runs"]);
    let got = complete(&completion, "supervisor gates --");
    for flag in ["--in", "--base", "--only", "--json"] {
        assert!(got.iter().any(|g| g == flag), "{flag} not in {got:?}");
    }
    let got = complete(&completion, "supervisor completions ");
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        assert!(got.iter().any(|g| g == shell), "{shell} not in {got:?}");
    }
}

/// Whether `program` can be run here.
fn have(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// `text` through `program args…`: (status, stdout, stderr).
fn through(program: &str, args: &[&str], text: &str) -> (bool, String, String) {
    let mut child = Command::new(program)
        .args(args)
        .env("MANWIDTH", "100")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Formatted text without its emphasis: off a terminal, groff and man embolden and underline by
/// overstriking (a character, a backspace, then the character again or `_`).
fn plain(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c == '\u{8}' {
            out.pop();
        } else {
            out.push(c);
        }
    }
    out
}

#[test]
fn the_man_page_lists_every_command_and_renders() {
    let page = stdout(&supervisor(&["man"]));
    // Structurally a man page: its title, then its sections.
    assert!(
        page.lines().any(|l| l.starts_with(".TH supervisor 1")),
        "{page}"
    );
    for section in [".SH NAME", ".SH SYNOPSIS", ".SH OPTIONS", ".SH SUBCOMMANDS"] {
        assert!(page.contains(section), "no {section} in:\n{page}");
    }
    for name in visible_commands() {
        assert!(
            page.contains(&format!("supervisor\\-{}(1)", name.replace('-', "\\-"))),
            "{name} is not listed"
        );
    }
    assert!(
        !page.contains("agent\\-script"),
        "a hidden command is listed"
    );
    assert!(page.contains("Exit codes"), "{page}");
    // Each listed command has its own page.
    for name in visible_commands() {
        let sub = stdout(&supervisor(&["man", &name]));
        assert!(
            sub.lines()
                .any(|l| l.starts_with(&format!(".TH supervisor-{name} 1"))),
            "{name}: {sub}"
        );
    }
    let out = supervisor(&["man", "nope"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("`nope` is not a command"));

    // groff reads it without a warning, and so does man.
    if have("groff") {
        let (ok, text, warnings) = through("groff", &["-man", "-Tutf8", "-ww", "-z"], &page);
        assert!(ok && warnings.is_empty(), "{warnings}{text}");
        let (ok, text, _) = through("groff", &["-man", "-Tutf8"], &page);
        assert!(ok && plain(&text).contains("SUBCOMMANDS"), "{text}");
        let run = stdout(&supervisor(&["man", "gates"]));
        let (ok, text, warnings) = through("groff", &["-man", "-Tutf8", "-ww"], &run);
        assert!(ok && warnings.is_empty(), "{warnings}");
        assert!(plain(&text).contains("--base <BRANCH>"), "{text}");
    }
    if have("man") {
        let (ok, text, warnings) = through("man", &["-l", "-"], &page);
        assert!(ok, "{warnings}");
        let plain = plain(&text);
        assert!(plain.contains("supervisor-gates(1)"), "{plain}");
    }
}
