//! Which runner a project's tests use: configured (`verify.command`/`verify.report`), or detected
//! from the project's files.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::config::VerifyConfig;

/// A project's test runner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "runner", rename_all = "kebab-case")]
pub enum Runner {
    /// `vitest run`, JUnit report.
    Vitest,
    /// `jest` with the jest-junit reporter installed beside it.
    Jest,
    /// `node --test`, JUnit report; `paths` are what the test script names (none: node's default
    /// test file patterns).
    NodeTest { paths: Vec<String> },
    /// `pytest`, JUnit report.
    Pytest,
    /// `go test -json`.
    GoTest,
    /// `cargo test` (its stable text output; doc-tests are not run).
    Cargo,
    /// The project's own command and report.
    Command(VerifyConfig),
}

impl Runner {
    /// `vitest`, `jest`, `node --test`, `pytest`, `go test`, `cargo test` or `verify.command`.
    pub fn name(&self) -> &'static str {
        match self {
            Runner::Vitest => "vitest",
            Runner::Jest => "jest",
            Runner::NodeTest { .. } => "node --test",
            Runner::Pytest => "pytest",
            Runner::GoTest => "go test",
            Runner::Cargo => "cargo test",
            Runner::Command(_) => "verify.command",
        }
    }
}

/// Why no runner was found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DetectError {
    #[error(
        "{}: no test runner found (looked for package.json's test script, pytest.ini, pyproject.toml's [tool.pytest], setup.cfg, tox.ini, test_*.py files, go.mod and Cargo.toml); set verify.command and verify.report",
        dir.display()
    )]
    NoRunner { dir: PathBuf },
    #[error(
        "{}: package.json's test script `{script}` runs none of the runners the oracle runs itself (vitest, jest, node --test); set verify.command and verify.report",
        dir.display()
    )]
    UnknownScript { dir: PathBuf, script: String },
    #[error("{}: package.json cannot be read ({reason}); fix it, or set verify.command and verify.report", dir.display())]
    BadPackageJson { dir: PathBuf, reason: String },
}

/// The runner of the project at `dir`: `configured` when given, else detected ([`detect`]).
pub fn runner_for(dir: &Path, configured: Option<&VerifyConfig>) -> Result<Runner, DetectError> {
    match configured {
        Some(c) => Ok(Runner::Command(c.clone())),
        None => detect(dir),
    }
}

/// Detect the runner of the project at `dir`, in this order: package.json's `test` script (vitest,
/// jest, `node --test`), pytest's configuration files, go.mod, Cargo.toml, then `test_*.py` or
/// `*_test.py` files up to three directories deep.
pub fn detect(dir: &Path) -> Result<Runner, DetectError> {
    let mut unknown_script = None;
    let package = dir.join("package.json");
    if package.is_file() {
        let text = std::fs::read_to_string(&package).map_err(|e| DetectError::BadPackageJson {
            dir: dir.to_path_buf(),
            reason: e.to_string(),
        })?;
        let json: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| DetectError::BadPackageJson {
                dir: dir.to_path_buf(),
                reason: e.to_string(),
            })?;
        if let Some(script) = json.pointer("/scripts/test").and_then(|s| s.as_str()) {
            match runner_of_script(script) {
                Some(r) => return Ok(r),
                None => unknown_script = Some(script.to_string()),
            }
        }
    }
    let has = |name: &str| dir.join(name).is_file();
    let mentions = |name: &str, needle: &str| {
        std::fs::read_to_string(dir.join(name)).is_ok_and(|t| t.contains(needle))
    };
    if has("pytest.ini")
        || mentions("pyproject.toml", "[tool.pytest")
        || mentions("setup.cfg", "[tool:pytest]")
        || mentions("tox.ini", "[pytest]")
    {
        return Ok(Runner::Pytest);
    }
    if has("go.mod") {
        return Ok(Runner::GoTest);
    }
    if has("Cargo.toml") {
        return Ok(Runner::Cargo);
    }
    if has_python_tests(dir, 3) {
        return Ok(Runner::Pytest);
    }
    Err(match unknown_script {
        Some(script) => DetectError::UnknownScript {
            dir: dir.to_path_buf(),
            script,
        },
        None => DetectError::NoRunner {
            dir: dir.to_path_buf(),
        },
    })
}

/// node options whose value is the next word.
const NODE_VALUE_OPTIONS: [&str; 12] = [
    "--test-reporter",
    "--test-reporter-destination",
    "--test-name-pattern",
    "--test-skip-pattern",
    "--test-concurrency",
    "--test-timeout",
    "--test-shard",
    "--import",
    "--require",
    "-r",
    "--loader",
    "--experimental-loader",
];

/// The runner a package.json `test` script runs: the first command of the script (split at `&&`,
/// `||`, `;`) that names vitest, jest, or node with `--test`.
fn runner_of_script(script: &str) -> Option<Runner> {
    let commands = script
        .split(['&', '|', ';'])
        .filter(|c| !c.trim().is_empty());
    for command in commands {
        let words: Vec<&str> = command.split_whitespace().collect();
        let program = |w: &&str| w.rsplit('/').next().unwrap_or(w).to_string();
        if words.iter().any(|w| program(w) == "vitest") {
            return Some(Runner::Vitest);
        }
        if words.iter().any(|w| program(w) == "jest") {
            return Some(Runner::Jest);
        }
        let Some(node) = words.iter().position(|w| program(w) == "node") else {
            continue;
        };
        let rest = &words[node + 1..];
        if !rest.contains(&"--test") {
            continue;
        }
        let mut paths = Vec::new();
        let mut skip_value = false;
        for w in rest {
            if skip_value {
                skip_value = false;
            } else if NODE_VALUE_OPTIONS.contains(w) {
                skip_value = true;
            } else if !w.starts_with('-') {
                paths.push(w.trim_matches(['"', '\'']).to_string());
            }
        }
        return Some(Runner::NodeTest { paths });
    }
    None
}

/// Whether `dir` holds pytest-style test files within `depth` directories (hidden directories,
/// virtual environments and dependencies aside).
fn has_python_tests(dir: &Path, depth: usize) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    let mut subdirs = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_file()
            && name.ends_with(".py")
            && (name.starts_with("test_") || name.ends_with("_test.py"))
        {
            return true;
        }
        let skipped = name.starts_with('.')
            || ["node_modules", "venv", "__pycache__", "target"].contains(&name.as_str());
        if kind.is_dir() && !skipped {
            subdirs.push(entry.path());
        }
    }
    depth > 0 && subdirs.iter().any(|d| has_python_tests(d, depth - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_scripts() {
        let cases = [
            ("vitest run", Some(Runner::Vitest)),
            ("npx vitest --run", Some(Runner::Vitest)),
            (
                "tsc -p . && ./node_modules/.bin/vitest",
                Some(Runner::Vitest),
            ),
            ("jest --coverage", Some(Runner::Jest)),
            ("node --test", Some(Runner::NodeTest { paths: vec![] })),
            (
                "node --test --test-reporter spec test/ 'lib/**/*.test.mjs'",
                Some(Runner::NodeTest {
                    paths: vec!["test/".into(), "lib/**/*.test.mjs".into()],
                }),
            ),
            (
                "node build.js && node --test",
                Some(Runner::NodeTest { paths: vec![] }),
            ),
            ("node build.js", None),
            ("mocha", None),
            ("echo \"Error: no test specified\" && exit 1", None),
        ];
        for (script, want) in cases {
            assert_eq!(runner_of_script(script), want, "{script}");
        }
    }

    #[test]
    fn runners_serialise_by_name() {
        let configured = Runner::Command(VerifyConfig {
            command: "make test".into(),
            report: crate::config::ReportSpec::Junit("out/junit.xml".into()),
            timeout_sec: None,
        });
        let node = Runner::NodeTest {
            paths: vec!["test/".into()],
        };
        for (runner, json) in [
            (Runner::Vitest, serde_json::json!({"runner": "vitest"})),
            (
                node,
                serde_json::json!({"runner": "node-test", "paths": ["test/"]}),
            ),
            (
                configured,
                serde_json::json!({"runner": "command", "command": "make test", "report": "junit:out/junit.xml"}),
            ),
        ] {
            assert_eq!(serde_json::to_value(&runner).unwrap(), json);
            assert_eq!(serde_json::from_value::<Runner>(json).unwrap(), runner);
        }
    }

    #[test]
    fn detection_order_and_errors() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        assert!(matches!(detect(d), Err(DetectError::NoRunner { .. })));
        std::fs::create_dir_all(d.join("pkg/tests")).unwrap();
        std::fs::write(d.join("pkg/tests/test_x.py"), "").unwrap();
        assert_eq!(detect(d), Ok(Runner::Pytest), "a test_*.py file");
        std::fs::write(d.join("Cargo.toml"), "[package]").unwrap();
        assert_eq!(
            detect(d),
            Ok(Runner::Cargo),
            "Cargo.toml before loose test files"
        );
        std::fs::write(d.join("go.mod"), "module m").unwrap();
        assert_eq!(detect(d), Ok(Runner::GoTest));
        std::fs::write(d.join("setup.cfg"), "[tool:pytest]\n").unwrap();
        assert_eq!(detect(d), Ok(Runner::Pytest));
        std::fs::write(d.join("package.json"), r#"{"scripts":{"test":"mocha"}}"#).unwrap();
        assert_eq!(
            detect(d),
            Ok(Runner::Pytest),
            "an unknown script: on to the others"
        );
        std::fs::write(d.join("package.json"), r#"{"scripts":{"test":"vitest"}}"#).unwrap();
        assert_eq!(detect(d), Ok(Runner::Vitest));
        std::fs::write(d.join("package.json"), "{").unwrap();
        let err = detect(d).unwrap_err();
        assert!(matches!(err, DetectError::BadPackageJson { .. }), "{err}");

        let only_node = tempfile::tempdir().unwrap();
        std::fs::write(
            only_node.path().join("package.json"),
            r#"{"scripts":{"test":"mocha"}}"#,
        )
        .unwrap();
        let err = detect(only_node.path()).unwrap_err();
        assert!(
            err.to_string().contains("`mocha`") && err.to_string().contains("verify.command"),
            "{err}"
        );
        let configured = VerifyConfig {
            command: "make test".into(),
            report: crate::config::ReportSpec::Libtest,
            timeout_sec: None,
        };
        assert_eq!(
            runner_for(only_node.path(), Some(&configured)),
            Ok(Runner::Command(configured.clone()))
        );
    }
}
