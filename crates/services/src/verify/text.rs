//! Reading failure texts: the first line that says something, and the `file:line` it points at.

use std::borrow::Cow;
use std::path::Path;
use std::sync::LazyLock;

use regex::Regex;

use super::model::Location;
use crate::gates::truncate_chars;

/// A failure's first line is cut to this many characters.
const MAX_LINE: usize = 300;

static ANSI: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\x1b\[[0-9;?]*[ -/]*[@-~]").expect("valid"));

/// `path:line` with an extension on the file name; `file://` is taken off first.
static PLACE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:^|[^\w@.+\-/])(/?[\w@.+\-][\w@.+\-/]*\.[A-Za-z0-9]+):(\d+)").expect("valid")
});

/// Python's `File "path", line N`.
static PYTHON_PLACE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"File "([^"]+)", line (\d+)"#).expect("valid"));

/// `text` without ANSI colour sequences (vitest colours some messages even under `NO_COLOR`).
pub(crate) fn strip_ansi(text: &str) -> Cow<'_, str> {
    ANSI.replace_all(text, "")
}

/// Lines that head a failure without saying what failed.
fn is_heading(line: &str) -> bool {
    let bare = line.trim_start_matches(['●', '×', '✗', ' ']);
    bare == "Test suite failed to run"
        || bare.starts_with("Traceback (most recent call last)")
        || line.chars().all(|c| !c.is_alphanumeric())
}

/// The first line of `text` that says something, trimmed and cut to a sane width.
pub(crate) fn first_line(text: &str) -> Option<String> {
    strip_ansi(text)
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !is_heading(l))
        .map(|l| truncate_chars(l, MAX_LINE))
}

/// The place `text` points at: the first `path:line` naming `file` (the test's own file), else —
/// where `file` is unknown or not named — the first naming a file of the project that is not a
/// dependency. Absolute paths under `root` are made relative to it; other absolute paths are not
/// the project's.
pub(crate) fn location_in(text: &str, file: &str, root: &Path) -> Option<Location> {
    let text = strip_ansi(text).replace("file://", "");
    let text = PYTHON_PLACE.replace_all(&text, " $1:$2");
    let root = root.to_string_lossy();
    let root = root.trim_end_matches('/');
    let mut fallback = None;
    for c in PLACE.captures_iter(&text) {
        let Ok(line) = c[2].parse::<u32>() else {
            continue;
        };
        let Some(path) = project_relative(&c[1], root) else {
            continue;
        };
        if !file.is_empty() && (path == file || file.ends_with(&format!("/{path}"))) {
            return Some(Location {
                file: file.to_string(),
                line,
            });
        }
        if fallback.is_none() && !is_dependency(&path) {
            fallback = Some(Location { file: path, line });
        }
    }
    fallback
}

/// `path` relative to the project at `root`, `None` when it is outside it.
pub(crate) fn project_relative(path: &str, root: &str) -> Option<String> {
    if let Some(abs) = path.strip_prefix('/') {
        let root = root.trim_start_matches('/');
        let rest = abs.strip_prefix(root)?.strip_prefix('/')?;
        return Some(rest.to_string());
    }
    let rel = path.trim_start_matches("./");
    (!rel.starts_with("../")).then(|| rel.to_string())
}

/// Each non-blank line of `stream` as a JSON `T`; the first line that is not one makes the whole
/// stream unreadable (`what` names what each line should be).
pub(crate) fn json_lines<T: serde::de::DeserializeOwned>(
    stream: &str,
    what: &str,
) -> Result<Vec<T>, String> {
    stream
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(n, line)| {
            serde_json::from_str(line).map_err(|e| {
                format!(
                    "line {} is not {what} ({e}): {}",
                    n + 1,
                    truncate_chars(line, 120)
                )
            })
        })
        .collect()
}

fn is_dependency(path: &str) -> bool {
    [
        "node_modules/",
        "site-packages/",
        ".cargo/registry/",
        "/rustc/",
    ]
    .iter()
    .any(|d| path.contains(d))
        || path.starts_with("node:")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_lines() {
        let cases = [
            (
                "expected 4 to be 5 // Object.is equality",
                Some("expected 4 to be 5 // Object.is equality"),
            ),
            (
                "\n\n  ● Test suite failed to run\n\n    Cannot find module './nope'\n",
                Some("Cannot find module './nope'"),
            ),
            (
                "\x1b[31m[PARSE_ERROR]\x1b[0m Expected `}`",
                Some("[PARSE_ERROR] Expected `}`"),
            ),
            ("⎯⎯⎯⎯\nreal line", Some("real line")),
            ("", None),
            ("   \n  ", None),
        ];
        for (text, want) in cases {
            assert_eq!(first_line(text).as_deref(), want, "{text:?}");
        }
        let long = "x".repeat(1000);
        assert_eq!(first_line(&long).unwrap().chars().count(), MAX_LINE);
    }

    #[test]
    fn locations_prefer_the_tests_own_file() {
        let root = Path::new("/tmp/p");
        let cases = [
            // vitest
            (
                " ❯ tests/math.test.ts:5:55",
                "tests/math.test.ts",
                Some(("tests/math.test.ts", 5)),
            ),
            // jest: a dependency frame first, then the test's file, absolute
            (
                "at x (/tmp/p/node_modules/jest/a.js:1:2)\n at Object.toBe (/tmp/p/tests/m.test.js:6:41)",
                "tests/m.test.js",
                Some(("tests/m.test.js", 6)),
            ),
            // node --test: a file URL, no file known for the test
            (
                "at TestContext.<anonymous> (file:///tmp/p/test/math.test.js:5:30)\n at node:internal/x:1:1",
                "",
                Some(("test/math.test.js", 5)),
            ),
            // pytest: the test's file, as the last line names it
            (
                "E assert 4 == 5\n\ntests/test_math.py:10: AssertionError",
                "tests/test_math.py",
                Some(("tests/test_math.py", 10)),
            ),
            // cargo: the target root is src/lib.rs, the panic in a module file
            (
                "panicked at src/util.rs:8:18:",
                "src/lib.rs",
                Some(("src/util.rs", 8)),
            ),
            // Python's own form
            (
                "E     File \"/tmp/p/tests/test_s.py\", line 3\nE   SyntaxError",
                "tests/test_s.py",
                Some(("tests/test_s.py", 3)),
            ),
            // outside the project only
            ("at /usr/lib/node/x.js:3:1", "", None),
            ("no place here", "a.py", None),
        ];
        for (text, file, want) in cases {
            let got = location_in(text, file, root);
            let want = want.map(|(f, l)| Location {
                file: f.to_string(),
                line: l,
            });
            assert_eq!(got, want, "{text:?}");
        }
    }
}
