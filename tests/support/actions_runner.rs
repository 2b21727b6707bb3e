//! A small stand-in for the GitHub Actions runner, enough to run `action.yml` as written: its steps
//! are read from the file (never copied), `${{ }}` expressions are evaluated over `inputs`,
//! `github`, `runner`, `env` and `steps`, `if:` conditions decide which steps run, `run:` steps run
//! with `bash --noprofile --norc -eo pipefail` like the runner's, with fresh `GITHUB_OUTPUT` files
//! per step and the job's `GITHUB_ENV`, `GITHUB_PATH` and `GITHUB_STEP_SUMMARY`. A `uses:` step (the
//! cache) is not run: it answers as a cache miss. An expression it does not understand fails the
//! test, naming it.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

/// A value of GitHub's expression language.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum V {
    Null,
    Bool(bool),
    Num(f64),
    Str(String),
}

impl V {
    fn truthy(&self) -> bool {
        match self {
            V::Null => false,
            V::Bool(b) => *b,
            V::Num(n) => *n != 0.0 && !n.is_nan(),
            V::Str(s) => !s.is_empty(),
        }
    }

    fn num(&self) -> f64 {
        match self {
            V::Null => 0.0,
            V::Bool(b) => f64::from(u8::from(*b)),
            V::Num(n) => *n,
            V::Str(s) if s.trim().is_empty() => 0.0,
            V::Str(s) => s.trim().parse().unwrap_or(f64::NAN),
        }
    }

    pub(crate) fn text(&self) -> String {
        match self {
            V::Null => String::new(),
            V::Bool(b) => b.to_string(),
            V::Num(n) => n.to_string(),
            V::Str(s) => s.clone(),
        }
    }

    fn equals(&self, other: &V) -> bool {
        match (self, other) {
            (V::Str(a), V::Str(b)) => a.eq_ignore_ascii_case(b),
            (V::Bool(a), V::Bool(b)) => a == b,
            (V::Null, V::Null) => true,
            // Different types are compared as numbers.
            _ => self.num() == other.num(),
        }
    }
}

/// The contexts an expression reads.
#[derive(Debug, Default, Clone)]
pub(crate) struct Contexts {
    pub inputs: BTreeMap<String, String>,
    pub github: BTreeMap<String, String>,
    pub runner: BTreeMap<String, String>,
    pub env: BTreeMap<String, String>,
    /// step id → output name → value.
    pub steps: BTreeMap<String, BTreeMap<String, String>>,
    /// A step of the job failed.
    pub failed: bool,
}

impl Contexts {
    fn lookup(&self, path: &[String]) -> V {
        let map_get = |m: &BTreeMap<String, String>, k: &str| {
            m.get(k).map(|v| V::Str(v.clone())).unwrap_or(V::Null)
        };
        match path
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .as_slice()
        {
            ["inputs", k] => map_get(&self.inputs, k),
            ["github", k] => map_get(&self.github, k),
            ["runner", k] => map_get(&self.runner, k),
            ["env", k] => map_get(&self.env, k),
            ["steps", id, "outputs", k] => self
                .steps
                .get(*id)
                .map(|o| map_get(o, k))
                .unwrap_or(V::Null),
            other => panic!("the test runner does not know the context {other:?}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Str(String),
    Num(f64),
    Ident(String),
    Dot,
    LParen,
    RParen,
    Comma,
    Not,
    Eq,
    Ne,
    And,
    Or,
}

fn tokens(expr: &str) -> Vec<Tok> {
    let chars: Vec<char> = expr.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
        match c {
            ' ' | '\t' | '\n' | '\r' => i += 1,
            '\'' => {
                let mut s = String::new();
                i += 1;
                loop {
                    assert!(i < chars.len(), "unterminated string in `{expr}`");
                    if chars[i] == '\'' {
                        if chars.get(i + 1) == Some(&'\'') {
                            s.push('\'');
                            i += 2;
                            continue;
                        }
                        i += 1;
                        break;
                    }
                    s.push(chars[i]);
                    i += 1;
                }
                out.push(Tok::Str(s));
            }
            _ if two == "==" => {
                out.push(Tok::Eq);
                i += 2;
            }
            _ if two == "!=" => {
                out.push(Tok::Ne);
                i += 2;
            }
            _ if two == "&&" => {
                out.push(Tok::And);
                i += 2;
            }
            _ if two == "||" => {
                out.push(Tok::Or);
                i += 2;
            }
            '!' => {
                out.push(Tok::Not);
                i += 1;
            }
            '.' => {
                out.push(Tok::Dot);
                i += 1;
            }
            '(' => {
                out.push(Tok::LParen);
                i += 1;
            }
            ')' => {
                out.push(Tok::RParen);
                i += 1;
            }
            ',' => {
                out.push(Tok::Comma);
                i += 1;
            }
            c if c.is_ascii_digit() => {
                let start = i;
                while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
                    i += 1;
                }
                let s: String = chars[start..i].iter().collect();
                out.push(Tok::Num(s.parse().unwrap()));
            }
            c if c.is_ascii_alphabetic() || c == '_' => {
                let start = i;
                while i < chars.len()
                    && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == '-')
                {
                    i += 1;
                }
                out.push(Tok::Ident(chars[start..i].iter().collect()));
            }
            other => panic!("the test runner cannot read `{other}` in `{expr}`"),
        }
    }
    out
}

struct Parser<'a> {
    toks: Vec<Tok>,
    pos: usize,
    cx: &'a Contexts,
    expr: &'a str,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }

    fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.pos).cloned();
        self.pos += 1;
        t
    }

    fn or(&mut self) -> V {
        let mut v = self.and();
        while self.peek() == Some(&Tok::Or) {
            self.pos += 1;
            let rhs = self.and();
            if !v.truthy() {
                v = rhs;
            }
        }
        v
    }

    fn and(&mut self) -> V {
        let mut v = self.cmp();
        while self.peek() == Some(&Tok::And) {
            self.pos += 1;
            let rhs = self.cmp();
            if v.truthy() {
                v = rhs;
            }
        }
        v
    }

    fn cmp(&mut self) -> V {
        let lhs = self.unary();
        match self.peek() {
            Some(Tok::Eq) => {
                self.pos += 1;
                V::Bool(lhs.equals(&self.unary()))
            }
            Some(Tok::Ne) => {
                self.pos += 1;
                V::Bool(!lhs.equals(&self.unary()))
            }
            _ => lhs,
        }
    }

    fn unary(&mut self) -> V {
        if self.peek() == Some(&Tok::Not) {
            self.pos += 1;
            return V::Bool(!self.unary().truthy());
        }
        self.primary()
    }

    fn primary(&mut self) -> V {
        match self.next() {
            Some(Tok::Str(s)) => V::Str(s),
            Some(Tok::Num(n)) => V::Num(n),
            Some(Tok::LParen) => {
                let v = self.or();
                assert_eq!(
                    self.next(),
                    Some(Tok::RParen),
                    "`)` expected in `{}`",
                    self.expr
                );
                v
            }
            Some(Tok::Ident(id)) => match id.as_str() {
                "true" => V::Bool(true),
                "false" => V::Bool(false),
                "null" => V::Null,
                "success" | "always" | "failure" if self.peek() == Some(&Tok::LParen) => {
                    self.pos += 1;
                    assert_eq!(self.next(), Some(Tok::RParen));
                    V::Bool(match id.as_str() {
                        "success" => !self.cx.failed,
                        "failure" => self.cx.failed,
                        _ => true,
                    })
                }
                _ => {
                    let mut path = vec![id];
                    while self.peek() == Some(&Tok::Dot) {
                        self.pos += 1;
                        match self.next() {
                            Some(Tok::Ident(p)) => path.push(p),
                            other => panic!("property expected in `{}`, got {other:?}", self.expr),
                        }
                    }
                    assert_ne!(
                        self.peek(),
                        Some(&Tok::LParen),
                        "the test runner knows no function {path:?} (in `{}`)",
                        self.expr
                    );
                    self.cx.lookup(&path)
                }
            },
            other => panic!("unexpected {other:?} in `{}`", self.expr),
        }
    }
}

/// Evaluate one expression (the text inside `${{ }}`, or an `if:`).
pub(crate) fn eval(expr: &str, cx: &Contexts) -> V {
    let mut p = Parser {
        toks: tokens(expr),
        pos: 0,
        cx,
        expr,
    };
    let v = p.or();
    assert!(p.pos == p.toks.len(), "trailing tokens in `{expr}`");
    v
}

/// A string with its `${{ }}` expressions replaced by their values.
pub(crate) fn interpolate(text: &str, cx: &Contexts) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 3..];
        let end = after
            .find("}}")
            .unwrap_or_else(|| panic!("unterminated expression in `{text}`"));
        out.push_str(&eval(&after[..end], cx).text());
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    out
}

/// `name=value` lines and `name<<DELIMITER` blocks, as the runner reads them.
pub(crate) fn parse_file_commands(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.is_empty() {
            continue;
        }
        let eq = line.find('=');
        let heredoc = line.find("<<");
        match (eq, heredoc) {
            (Some(e), h) if h.is_none_or(|h| e < h) => {
                out.push((line[..e].to_string(), line[e + 1..].to_string()));
            }
            (_, Some(h)) => {
                let name = line[..h].to_string();
                let delimiter = &line[h + 2..];
                let mut value = Vec::new();
                loop {
                    let l = lines
                        .next()
                        .unwrap_or_else(|| panic!("{name}: no closing {delimiter}"));
                    if l == delimiter {
                        break;
                    }
                    value.push(l);
                }
                out.push((name, value.join("\n")));
            }
            _ => panic!("not a file command line: {line:?}"),
        }
    }
    out
}

/// What one step did.
#[derive(Debug, Clone)]
pub(crate) struct StepRun {
    pub name: String,
    pub id: Option<String>,
    /// `skipped`, `success`, `failure`, or `uses` (not run: answered as a cache miss).
    pub outcome: &'static str,
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    /// Time from the start of the action to the start of this step.
    pub started_after: Duration,
    pub with: BTreeMap<String, String>,
}

/// What the whole action did.
#[derive(Debug)]
pub(crate) struct ActionRun {
    pub steps: Vec<StepRun>,
    pub outputs: BTreeMap<String, String>,
    pub summary: String,
    pub failed: bool,
}

impl ActionRun {
    pub(crate) fn step(&self, name: &str) -> &StepRun {
        self.steps
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no step {name:?}: {:?}", self.names()))
    }

    pub(crate) fn names(&self) -> Vec<(String, &'static str)> {
        self.steps
            .iter()
            .map(|s| (s.name.clone(), s.outcome))
            .collect()
    }

    /// Every line the steps printed, stdout then stderr per step.
    pub(crate) fn log(&self) -> String {
        self.steps
            .iter()
            .map(|s| format!("{}{}", s.stdout, s.stderr))
            .collect()
    }
}

/// Where and how the action runs.
pub(crate) struct Runner {
    pub action_path: PathBuf,
    pub workspace: PathBuf,
    pub temp: PathBuf,
    pub github: BTreeMap<String, String>,
    /// The calling step's `env:` (e.g. an API key for the agents), and the job's environment.
    pub env: BTreeMap<String, String>,
    /// Directories put first on PATH (fake tools).
    pub path_prefix: Vec<PathBuf>,
}

/// The machine's environment without anything that would point supervisor elsewhere, and without
/// the gate tools of `.tools/` (the action is to bring them).
pub(crate) fn clean_env() -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = std::env::vars()
        .filter(|(k, _)| {
            !(k.starts_with("SUPERVISOR_")
                || k.starts_with("GITHUB_")
                || k.starts_with("RUNNER_")
                || k.starts_with("GIT_")
                || k == "GH_TOKEN"
                || k == "CI")
        })
        .collect();
    let path = env.get("PATH").cloned().unwrap_or_default();
    let kept: Vec<&str> = path
        .split(':')
        .filter(|p| !p.contains("/.tools/"))
        .collect();
    env.insert("PATH".into(), kept.join(":"));
    env
}

impl Runner {
    /// Run `action.yml` of `action_path` with `inputs`.
    pub(crate) async fn run(&self, inputs: &[(&str, &str)]) -> ActionRun {
        let text = std::fs::read_to_string(self.action_path.join("action.yml")).unwrap();
        let action: Value = serde_norway::from_str(&text).expect("action.yml parses");
        assert_eq!(action["runs"]["using"], "composite");

        let mut cx = Contexts::default();
        for (name, spec) in action["inputs"].as_object().expect("inputs") {
            if let Some(d) = spec.get("default") {
                cx.inputs.insert(name.clone(), yaml_text(d));
            }
        }
        for (k, v) in inputs {
            assert!(
                action["inputs"].get(*k).is_some(),
                "action.yml has no input {k}"
            );
            cx.inputs.insert(k.to_string(), v.to_string());
        }
        for (name, spec) in action["inputs"].as_object().unwrap() {
            if spec.get("required").and_then(Value::as_bool) == Some(true) {
                assert!(
                    cx.inputs.contains_key(name),
                    "required input {name} missing"
                );
            }
        }
        cx.github = self.github.clone();
        cx.github
            .insert("action_path".into(), self.action_path.display().to_string());
        cx.runner = BTreeMap::from([
            ("os".to_string(), "Linux".to_string()),
            ("arch".to_string(), runner_arch().to_string()),
            ("temp".to_string(), self.temp.display().to_string()),
        ]);

        let files = self.temp.join("_runner_files");
        std::fs::create_dir_all(&files).unwrap();
        let summary_file = files.join("step_summary.md");
        let env_file = files.join("github_env");
        let path_file = files.join("github_path");
        for f in [&summary_file, &env_file, &path_file] {
            std::fs::write(f, "").unwrap();
        }

        let started = Instant::now();
        let mut runs = Vec::new();
        let mut added_paths: Vec<String> = Vec::new();
        let mut job_env: BTreeMap<String, String> = BTreeMap::new();
        for (i, step) in action["runs"]["steps"]
            .as_array()
            .expect("steps")
            .iter()
            .enumerate()
        {
            let name = step["name"].as_str().unwrap_or("(unnamed)").to_string();
            let id = step["id"].as_str().map(String::from);
            let cond = step.get("if").map(yaml_text);
            let wants_status = cond
                .as_deref()
                .is_some_and(|c| c.contains("always()") || c.contains("failure()"));
            let runs_now = match &cond {
                _ if cx.failed && !wants_status => false,
                Some(c) => eval(strip_template(c), &cx).truthy(),
                None => true,
            };
            let mut run = StepRun {
                name: name.clone(),
                id: id.clone(),
                outcome: "skipped",
                code: None,
                stdout: String::new(),
                stderr: String::new(),
                started_after: started.elapsed(),
                with: BTreeMap::new(),
            };
            if !runs_now {
                runs.push(run);
                continue;
            }
            if let Some(uses) = step.get("uses").and_then(Value::as_str) {
                assert!(
                    uses.starts_with("actions/cache@"),
                    "the test runner only stands in for actions/cache, not {uses}"
                );
                for (k, v) in step["with"].as_object().into_iter().flatten() {
                    run.with.insert(k.clone(), interpolate(&yaml_text(v), &cx));
                }
                run.outcome = "uses";
                if let Some(id) = &id {
                    cx.steps.insert(id.clone(), BTreeMap::new());
                }
                runs.push(run);
                continue;
            }
            assert_eq!(step["shell"], "bash", "step {name}: shell: bash");
            let script = step["run"].as_str().expect("run: script");
            let output_file = files.join(format!("output_{i}"));
            std::fs::write(&output_file, "").unwrap();
            let script_file = files.join(format!("step_{i}.sh"));
            // The runner puts the script in a file as it is; expressions in it would be pasted in.
            std::fs::write(&script_file, interpolate(script, &cx)).unwrap();

            let mut env = clean_env();
            env.extend(self.env.clone());
            env.extend(job_env.clone());
            let mut path: Vec<String> = added_paths.iter().rev().cloned().collect();
            path.extend(self.path_prefix.iter().map(|p| p.display().to_string()));
            path.push(env.get("PATH").cloned().unwrap_or_default());
            env.insert("PATH".into(), path.join(":"));
            for (k, v) in [
                ("CI", "true".to_string()),
                ("GITHUB_ACTIONS", "true".to_string()),
                ("RUNNER_OS", "Linux".to_string()),
                ("RUNNER_ARCH", runner_arch().to_string()),
                ("RUNNER_TEMP", self.temp.display().to_string()),
                ("GITHUB_WORKSPACE", self.workspace.display().to_string()),
                ("GITHUB_ACTION_PATH", self.action_path.display().to_string()),
                ("GITHUB_STEP_SUMMARY", summary_file.display().to_string()),
                ("GITHUB_ENV", env_file.display().to_string()),
                ("GITHUB_PATH", path_file.display().to_string()),
                ("GITHUB_OUTPUT", output_file.display().to_string()),
            ] {
                env.insert(k.into(), v);
            }
            for (k, v) in &self.github {
                let var = match k.as_str() {
                    "server_url" => "GITHUB_SERVER_URL",
                    "api_url" => "GITHUB_API_URL",
                    "repository" => "GITHUB_REPOSITORY",
                    _ => continue,
                };
                env.insert(var.into(), v.clone());
            }
            for (k, v) in step["env"].as_object().into_iter().flatten() {
                env.insert(k.clone(), interpolate(&yaml_text(v), &cx));
            }
            let child = tokio::process::Command::new("bash")
                .args(["--noprofile", "--norc", "-eo", "pipefail"])
                .arg(&script_file)
                .current_dir(&self.workspace)
                .env_clear()
                .envs(&env)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .unwrap();
            let out = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
                .await
                .unwrap_or_else(|_| panic!("step {name} finished within 120 s"))
                .unwrap();
            run.code = out.status.code();
            run.stdout = String::from_utf8_lossy(&out.stdout).into_owned();
            run.stderr = String::from_utf8_lossy(&out.stderr).into_owned();
            run.outcome = if out.status.success() {
                "success"
            } else {
                "failure"
            };
            if !out.status.success() {
                cx.failed = true;
            }
            let outputs: BTreeMap<String, String> =
                parse_file_commands(&std::fs::read_to_string(&output_file).unwrap())
                    .into_iter()
                    .collect();
            if let Some(id) = &id {
                cx.steps.insert(id.clone(), outputs);
            }
            for (k, v) in parse_file_commands(&std::fs::read_to_string(&env_file).unwrap()) {
                job_env.insert(k, v);
            }
            std::fs::write(&env_file, "").unwrap();
            for p in std::fs::read_to_string(&path_file).unwrap().lines() {
                if !p.trim().is_empty() {
                    added_paths.push(p.trim().to_string());
                }
            }
            std::fs::write(&path_file, "").unwrap();
            runs.push(run);
        }
        let mut outputs = BTreeMap::new();
        for (name, spec) in action["outputs"].as_object().into_iter().flatten() {
            outputs.insert(
                name.clone(),
                interpolate(spec["value"].as_str().unwrap_or_default(), &cx),
            );
        }
        ActionRun {
            steps: runs,
            outputs,
            summary: std::fs::read_to_string(&summary_file).unwrap(),
            failed: cx.failed,
        }
    }
}

/// `if:` may be written with or without `${{ }}`.
fn strip_template(cond: &str) -> &str {
    let c = cond.trim();
    c.strip_prefix("${{")
        .and_then(|c| c.strip_suffix("}}"))
        .unwrap_or(c)
}

/// A YAML scalar as the runner reads it (booleans and numbers as their text).
fn yaml_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// `runner.arch` of this machine.
pub(crate) fn runner_arch() -> &'static str {
    match std::env::consts::ARCH {
        "aarch64" => "ARM64",
        "x86_64" => "X64",
        "arm" => "ARM",
        _ => "X86",
    }
}

/// The release target the action picks for this machine.
pub(crate) fn release_target() -> &'static str {
    match std::env::consts::ARCH {
        "aarch64" => "aarch64-unknown-linux-musl",
        _ => "x86_64-unknown-linux-musl",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expressions_follow_githubs_rules() {
        let mut cx = Contexts::default();
        cx.inputs.insert("binary".into(), String::new());
        cx.inputs.insert("install-gate-tools".into(), "true".into());
        cx.steps.insert(
            "download".into(),
            BTreeMap::from([("bin".into(), "/b".into())]),
        );
        assert!(eval("inputs.binary == ''", &cx).truthy());
        assert!(
            eval("steps.source.outputs.bin == ''", &cx).truthy(),
            "missing is ''"
        );
        assert!(eval("inputs.install-gate-tools == 'TRUE'", &cx).truthy());
        assert_eq!(
            eval("inputs.binary || steps.download.outputs.bin || 'x'", &cx),
            V::Str("/b".into())
        );
        assert_eq!(eval("inputs.binary != ''", &cx), V::Bool(false));
        assert!(eval("!(inputs.binary != '') && success()", &cx).truthy());
        assert_eq!(
            interpolate("a ${{ inputs.install-gate-tools }} b", &cx),
            "a true b"
        );
    }

    #[test]
    fn file_commands_read_both_forms() {
        assert_eq!(
            parse_file_commands("a=1\nb<<EOF\nx\ny=z\nEOF\nc=d<<e\n"),
            [
                ("a".to_string(), "1".to_string()),
                ("b".to_string(), "x\ny=z".to_string()),
                ("c".to_string(), "d<<e".to_string()),
            ]
        );
    }
}
