//! Traceability gate: does the change match the issue? Deterministic checks, all reported to the
//! auditor as warnings (never blocking):
//! 1. checklist coverage — each `- [ ]`/`- [x]` item outside Prerequisites/Setup/Reproduction sections has
//!    a keyword in the changed files;
//! 2. test-file parity — changed sources come with changed tests, by the conventions of TS/JS, Python,
//!    Rust and Go;
//! 3. imperative verb direction — a title that says add/implement/create grows the code, one that says
//!    remove/delete shrinks it, one that says migrate/replace removes something;
//! 4. file-count sanity — some files changed, and not more than `gates.maxChangedFiles`;
//! 5. comment referencing — the branch's commits mention the issue;
//!
//! plus references left behind to files the change deleted.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;

use super::changes::{ChangeSet, FileStatus};
use super::{
    Finding, FindingSeverity, FnGate, GateContext, GateOutcome, GateStatus, IssueText, extension_of,
};
use crate::config::GateKind;

/// Findings of the deleted-file check kept at most.
const MAX_STALE_REFERENCES: usize = 50;

pub(crate) static GATE: FnGate = FnGate {
    kind: GateKind::Traceability,
    run: |_hook, ctx| Box::pin(run(ctx)),
};

/// The checks read many files: off the async threads.
async fn run(ctx: &GateContext) -> GateOutcome {
    let ctx = ctx.clone();
    tokio::task::spawn_blocking(move || check_all(&ctx))
        .await
        .unwrap_or_else(|e| GateOutcome::not_run(format!("the checks crashed: {e}")))
}

fn warning(file: Option<String>, line: Option<u32>, rule: &str, message: String) -> Finding {
    Finding {
        file,
        line,
        rule: rule.into(),
        message,
        severity: FindingSeverity::Warning,
    }
}

fn check_all(ctx: &GateContext) -> GateOutcome {
    let mut findings = Vec::new();
    let mut notes = Vec::new();

    match &ctx.issue {
        Some(issue) => {
            let contents = changed_contents(ctx);
            let (f, note) = checklist_coverage(issue, &contents);
            findings.extend(f);
            notes.push(note);
            let (f, note) = verb_direction(&issue.title, &ctx.changes);
            findings.extend(f);
            notes.push(note);
            let (f, note) = commit_references(issue.number, &ctx.changes);
            findings.extend(f);
            notes.push(note);
        }
        None => {
            findings.push(Finding {
                file: None,
                line: None,
                rule: "issue-unavailable".into(),
                message: "no issue text: checklist coverage, verb direction and commit references were not checked".into(),
                severity: FindingSeverity::Info,
            });
            notes.push("no issue text (3 checks skipped)".into());
        }
    }
    // Where the oracle proved tests red on the base, they stand for the change: file names add
    // nothing to that.
    match oracle_tests(ctx) {
        Some(n) => notes.push(format!(
            "test parity: {n} designated test(s) failed on the base before the change (red)"
        )),
        None => {
            let (f, note) = test_parity(&ctx.changes, |p| ctx.read_text(p));
            findings.extend(f);
            notes.push(note);
        }
    }
    let (f, note) = file_count(&ctx.changes, ctx.settings.max_changed_files);
    findings.extend(f);
    notes.push(note);
    let (f, note) = stale_references(ctx);
    findings.extend(f);
    notes.push(note);

    let status = if findings.is_empty() {
        GateStatus::Pass
    } else {
        GateStatus::Warn
    };
    GateOutcome::new(status, findings, notes.join("; "))
}

/// How many designated tests the oracle's `red` saw failing on the base, when it ran.
fn oracle_tests(ctx: &GateContext) -> Option<usize> {
    let base = ctx.proof.as_ref()?.base.as_ref()?;
    let failed = base
        .designated
        .iter()
        .filter(|r| r.outcome.is_failure())
        .count();
    (failed > 0).then_some(failed)
}

/// Lower-cased path and content of each changed file that exists.
fn changed_contents(ctx: &GateContext) -> Vec<(String, String)> {
    ctx.changes
        .existing()
        .map(|f| {
            let text = ctx.read_text(&f.path).unwrap_or_default();
            (f.path.to_lowercase(), text.to_lowercase())
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// 1. Checklist coverage

/// A checklist item of the issue body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ChecklistItem {
    pub(crate) text: String,
    pub(crate) checked: bool,
    /// 1-based line in the body.
    pub(crate) line: usize,
}

static CHECKBOX: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\s*(?:[-*+]|\d+[.)])\s+\[([ xX])\]\s+(.+?)\s*$").expect("valid")
});
static HEADING: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\s{0,3}(?:#{1,6}\s+(.+?)\s*#*\s*$|\*\*(.+?)\*\*:?\s*$)").expect("valid")
});
static CODE_SPAN: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"`([^`]+)`").expect("valid"));

/// Sections whose checklists describe the situation, not the work.
fn is_context_section(heading: &str) -> bool {
    let h = heading.to_lowercase();
    [
        "prerequisite",
        "prereq",
        "setup",
        "set up",
        "set-up",
        "reproduc",
        "repro steps",
        "steps to repro",
    ]
    .iter()
    .any(|k| h.contains(k))
}

/// Checklist items outside Prerequisites/Setup/Reproduction sections (fenced code skipped).
pub(crate) fn checklist_items(body: &str) -> Vec<ChecklistItem> {
    let mut items = Vec::new();
    let mut skip_section = false;
    let mut fence: Option<&str> = None;
    for (i, line) in body.lines().enumerate() {
        let trimmed = line.trim_start();
        if let Some(f) = fence {
            if trimmed.starts_with(f) {
                fence = None;
            }
            continue;
        }
        if trimmed.starts_with("```") {
            fence = Some("```");
            continue;
        }
        if trimmed.starts_with("~~~") {
            fence = Some("~~~");
            continue;
        }
        if let Some(c) = CHECKBOX.captures(line) {
            if !skip_section {
                items.push(ChecklistItem {
                    text: c[2].to_string(),
                    checked: &c[1] != " ",
                    line: i + 1,
                });
            }
            continue;
        }
        if let Some(c) = HEADING.captures(line) {
            let text = c.get(1).or_else(|| c.get(2)).map_or("", |m| m.as_str());
            skip_section = is_context_section(text);
        }
    }
    items
}

const STOPWORDS: &[&str] = &[
    "add",
    "all",
    "and",
    "any",
    "are",
    "but",
    "can",
    "for",
    "get",
    "has",
    "how",
    "its",
    "may",
    "new",
    "not",
    "now",
    "off",
    "one",
    "our",
    "out",
    "own",
    "per",
    "see",
    "set",
    "the",
    "too",
    "use",
    "via",
    "was",
    "way",
    "who",
    "why",
    "yet",
    "you",
    "able",
    "about",
    "above",
    "across",
    "actually",
    "added",
    "adding",
    "adds",
    "after",
    "again",
    "against",
    "allow",
    "allows",
    "also",
    "always",
    "another",
    "anything",
    "around",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "case",
    "cases",
    "change",
    "changes",
    "check",
    "code",
    "could",
    "does",
    "doing",
    "done",
    "each",
    "either",
    "else",
    "ensure",
    "every",
    "example",
    "file",
    "files",
    "from",
    "further",
    "have",
    "having",
    "here",
    "into",
    "itself",
    "just",
    "keep",
    "like",
    "made",
    "make",
    "makes",
    "many",
    "more",
    "most",
    "much",
    "must",
    "need",
    "needs",
    "never",
    "other",
    "only",
    "over",
    "same",
    "should",
    "show",
    "some",
    "such",
    "sure",
    "than",
    "that",
    "their",
    "them",
    "then",
    "there",
    "these",
    "they",
    "thing",
    "things",
    "this",
    "those",
    "through",
    "test",
    "tests",
    "under",
    "until",
    "update",
    "upon",
    "used",
    "uses",
    "using",
    "very",
    "want",
    "well",
    "were",
    "what",
    "when",
    "where",
    "whether",
    "which",
    "while",
    "will",
    "with",
    "within",
    "without",
    "work",
    "works",
    "would",
    "your",
    "implement",
    "support",
    "supports",
    "handle",
    "handles",
    "new",
    "properly",
    "correctly",
];

/// A light stem, so `amounts` finds `amount` and `exporting` finds `export`.
fn stem_word(w: &str) -> String {
    let n = w.chars().count();
    if n > 5 && w.ends_with("ing") {
        w[..w.len() - 3].to_string()
    } else if n > 4 && w.ends_with("ed") {
        w[..w.len() - 2].to_string()
    } else if n > 3 && w.ends_with('s') && !w.ends_with("ss") {
        w[..w.len() - 1].to_string()
    } else {
        w.to_string()
    }
}

/// Keywords of an item: its code spans (whole, lower-cased), then its significant words (stemmed).
pub(crate) fn item_keywords(text: &str) -> (Vec<String>, Vec<String>) {
    let spans: Vec<String> = CODE_SPAN
        .captures_iter(text)
        .map(|c| c[1].trim().to_lowercase())
        .filter(|s| !s.is_empty())
        .collect();
    let without_spans = CODE_SPAN.replace_all(text, " ");
    let mut words = BTreeSet::new();
    for w in without_spans.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
        let w = w.to_lowercase();
        if w.chars().count() >= 3
            && !w.chars().all(|c| c.is_ascii_digit())
            && !STOPWORDS.contains(&w.as_str())
        {
            words.insert(stem_word(&w));
        }
    }
    (spans, words.into_iter().collect())
}

fn checklist_coverage(issue: &IssueText, contents: &[(String, String)]) -> (Vec<Finding>, String) {
    let items = checklist_items(&issue.body);
    if items.is_empty() {
        return (Vec::new(), "checklist: no items".into());
    }
    let found = |k: &str| contents.iter().any(|(p, c)| p.contains(k) || c.contains(k));
    let mut findings = Vec::new();
    let mut untraceable = 0;
    for item in &items {
        let (spans, words) = item_keywords(&item.text);
        // A code span names the thing itself; plain words need at least half to be found.
        let covered = if !spans.is_empty() {
            spans.iter().any(|s| found(s))
        } else if !words.is_empty() {
            2 * words.iter().filter(|w| found(w)).count() >= words.len()
        } else {
            untraceable += 1;
            continue;
        };
        if !covered {
            let looked: Vec<&String> = spans.iter().chain(words.iter()).take(8).collect();
            findings.push(warning(
                None,
                None,
                "checklist-uncovered",
                format!(
                    "issue checklist item (body line {}) has no trace in the changed files: \"{}\" (looked for {})",
                    item.line,
                    item.text,
                    looked
                        .iter()
                        .map(|k| format!("`{k}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
    }
    let covered = items.len() - findings.len() - untraceable;
    let mut note = format!("checklist: {covered}/{} items traced", items.len());
    if untraceable > 0 {
        note.push_str(&format!(" ({untraceable} without keywords)"));
    }
    (findings, note)
}

// ---------------------------------------------------------------------------------------------
// 2. Test-file parity

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lang {
    JsTs,
    Python,
    Rust,
    Go,
}

fn lang_of(path: &str) -> Option<Lang> {
    match extension_of(path).as_str() {
        "ts" | "tsx" | "mts" | "cts" | "js" | "jsx" | "mjs" | "cjs" => Some(Lang::JsTs),
        "py" => Some(Lang::Python),
        "rs" => Some(Lang::Rust),
        "go" => Some(Lang::Go),
        _ => None,
    }
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

fn dir_of(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(d, _)| d)
}

/// The name without its last extension (`orders.test` for `orders.test.ts`).
fn stem(path: &str) -> &str {
    let name = file_name(path);
    name.rsplit_once('.').map_or(name, |(s, _)| s)
}

fn in_dir_named(path: &str, names: &[&str]) -> bool {
    path.split('/')
        .rev()
        .skip(1)
        .any(|segment| names.contains(&segment))
}

fn is_test_file(path: &str, lang: Lang) -> bool {
    let name = file_name(path);
    match lang {
        Lang::JsTs => {
            name.contains(".test.")
                || name.contains(".spec.")
                || in_dir_named(path, &["__tests__", "test", "tests", "__mocks__"])
        }
        Lang::Python => {
            name.starts_with("test_")
                || stem(path).ends_with("_test")
                || name == "conftest.py"
                || in_dir_named(path, &["tests", "test"])
        }
        Lang::Rust => in_dir_named(path, &["tests", "benches"]),
        Lang::Go => name.ends_with("_test.go"),
    }
}

/// Sources that carry no logic worth a test of their own. An `index` module is exempt only while
/// it merely re-exports: an entry point with code of its own is a source like any other.
fn exempt(path: &str, lang: Lang, read: &impl Fn(&str) -> Option<String>) -> bool {
    let name = file_name(path);
    match lang {
        Lang::JsTs => {
            name.ends_with(".d.ts")
                || name.contains(".config.")
                || name.contains(".stories.")
                || (stem(path) == "index" && read(path).is_some_and(|t| only_reexports(&t)))
        }
        Lang::Python => matches!(
            name,
            "__init__.py" | "setup.py" | "__main__.py" | "conftest.py"
        ),
        Lang::Rust => matches!(name, "build.rs" | "main.rs") || in_dir_named(path, &["examples"]),
        Lang::Go => matches!(name, "doc.go" | "main.go"),
    }
}

/// Whether a JS/TS module holds nothing but imports, re-exports and comments (a barrel file).
fn only_reexports(text: &str) -> bool {
    let mut statement = String::new();
    let mut in_block_comment = false;
    for line in text.lines() {
        let mut line = line.trim();
        if in_block_comment {
            match line.find("*/") {
                Some(end) => {
                    in_block_comment = false;
                    line = line[end + 2..].trim();
                }
                None => continue,
            }
        }
        if line.starts_with("/*") {
            if !line.contains("*/") {
                in_block_comment = true;
            }
            continue;
        }
        if line.is_empty() || line.starts_with("//") {
            continue;
        }
        statement.push_str(line);
        statement.push(' ');
        // A statement may span lines (`export {\n a,\n b\n} from "./x";`): judge it once complete.
        if !(line.ends_with(';') || line.contains(" from ") || line.starts_with("import \"")) {
            continue;
        }
        let s = statement.trim_start();
        let reexport = (s.starts_with("export ") && s.contains(" from "))
            || s.starts_with("import ")
            || s.starts_with("export type {");
        if !reexport {
            return false;
        }
        statement.clear();
    }
    statement.trim().is_empty()
}

/// The module specifiers a JS/TS file imports: `import … from "x"`, `export … from "x"`,
/// `import "x"`, `require("x")`, `import("x")`.
fn js_imports(text: &str) -> Vec<String> {
    static IMPORT: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let re = IMPORT.get_or_init(|| {
        regex::Regex::new(
            r#"(?:\bfrom\s*|\bimport\s*|\brequire\s*\(\s*|\bimport\s*\(\s*)["']([^"'\n]+)["']"#,
        )
        .expect("a valid pattern")
    });
    re.captures_iter(text).map(|c| c[1].to_string()).collect()
}

/// The repository path a relative JS/TS specifier in the file at `from` names, trying the file
/// extensions and `index` files module resolution tries; `None` for a package name or a path
/// that is not there (`exists` tells).
fn resolve_js(from: &str, spec: &str, exists: &impl Fn(&str) -> bool) -> Option<String> {
    if !spec.starts_with('.') {
        return None;
    }
    let mut parts: Vec<&str> = dir_of(from).split('/').filter(|p| !p.is_empty()).collect();
    for part in spec.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            other => parts.push(other),
        }
    }
    let base = parts.join("/");
    let stripped = base
        .strip_suffix(".js")
        .or_else(|| base.strip_suffix(".mjs"))
        .unwrap_or(&base)
        .to_string();
    const EXTS: [&str; 8] = ["ts", "tsx", "mts", "cts", "js", "jsx", "mjs", "cjs"];
    std::iter::once(base.clone())
        .chain(EXTS.iter().map(|e| format!("{stripped}.{e}")))
        .chain(EXTS.iter().map(|e| format!("{base}/index.{e}")))
        .find(|candidate| exists(candidate))
}

/// Whether the JS/TS test at `test` imports the module `source`, directly or through modules that
/// re-export it (a package entry re-exporting its parts), up to three re-exports deep.
fn js_test_imports(test: &str, source: &str, read: &impl Fn(&str) -> Option<String>) -> bool {
    let exists = |p: &str| read(p).is_some();
    let mut frontier = vec![test.to_string()];
    let mut seen: Vec<String> = Vec::new();
    for depth in 0..4 {
        let mut next = Vec::new();
        for file in &frontier {
            let Some(text) = read(file) else { continue };
            for spec in js_imports(&text) {
                let Some(module) = resolve_js(file, &spec, &exists) else {
                    continue;
                };
                if module == source {
                    return true;
                }
                // Past the test itself, only re-exports lead on.
                let reexports = depth == 0 || only_reexports(&read(&module).unwrap_or_default());
                if reexports && !seen.contains(&module) {
                    seen.push(module.clone());
                    next.push(module);
                }
            }
        }
        frontier = next;
    }
    false
}

/// Whether the Python test at `test` imports the module at `source` (`import a.b`, `from a.b import
/// c`, `from a import b`), the module named by its path from the repository root or from a `src/`
/// directory.
fn py_test_imports(test: &str, source: &str, read: &impl Fn(&str) -> Option<String>) -> bool {
    let Some(text) = read(test) else {
        return false;
    };
    let path = source.strip_suffix(".py").unwrap_or(source);
    let path = path.strip_suffix("/__init__").unwrap_or(path);
    let dotted: Vec<String> = std::iter::once(path)
        .chain(path.split_once("src/").map(|(_, rest)| rest))
        .map(|p| p.replace('/', "."))
        .collect();
    text.lines().map(str::trim).any(|line| {
        let named: Vec<String> = if let Some(rest) = line.strip_prefix("from ") {
            let Some((module, names)) = rest.split_once(" import ") else {
                return false;
            };
            let module = module.trim();
            let mut all = vec![module.to_string()];
            all.extend(
                names
                    .trim_matches(|c| c == '(' || c == ')')
                    .split(',')
                    .map(|n| n.split_whitespace().next().unwrap_or_default())
                    .filter(|n| !n.is_empty())
                    .map(|n| format!("{module}.{n}")),
            );
            all
        } else if let Some(rest) = line.strip_prefix("import ") {
            rest.split(',')
                .map(|m| m.split_whitespace().next().unwrap_or_default().to_string())
                .collect()
        } else {
            return false;
        };
        named.iter().any(|n| dotted.iter().any(|d| d == n))
    })
}

/// Changed sources without a changed test, by each language's convention or by a changed test that
/// imports them.
pub(crate) fn test_parity(
    changes: &ChangeSet,
    read: impl Fn(&str) -> Option<String>,
) -> (Vec<Finding>, String) {
    let existing: Vec<&str> = changes.existing().map(|f| f.path.as_str()).collect();
    let tests: Vec<&str> = existing
        .iter()
        .copied()
        .filter(|p| lang_of(p).is_some_and(|l| is_test_file(p, l)))
        .collect();
    let sources: Vec<(&str, Lang)> = existing
        .iter()
        .filter_map(|p| lang_of(p).map(|l| (*p, l)))
        .filter(|(p, l)| !is_test_file(p, *l) && !exempt(p, *l, &read))
        .collect();
    if sources.is_empty() {
        return (Vec::new(), "tests: no source files changed".into());
    }
    let mut findings = Vec::new();
    for (path, lang) in &sources {
        let s = stem(path);
        let (has_test, expected) = match lang {
            Lang::JsTs => (
                tests.iter().any(|t| {
                    let name = file_name(t);
                    name.starts_with(&format!("{s}.test."))
                        || name.starts_with(&format!("{s}.spec."))
                        || (in_dir_named(t, &["__tests__", "test", "tests"])
                            && (stem(t) == s || name.starts_with(&format!("{s}."))))
                        || js_test_imports(t, path, &read)
                }),
                format!(
                    "{s}.test.* / {s}.spec.* or __tests__/{s}.* (TS/JS convention), or a changed test importing it"
                ),
            ),
            Lang::Python => (
                tests.iter().any(|t| {
                    let name = file_name(t);
                    name == format!("test_{s}.py")
                        || name == format!("{s}_test.py")
                        || py_test_imports(t, path, &read)
                }),
                format!(
                    "test_{s}.py or {s}_test.py (pytest convention), or a changed test importing it"
                ),
            ),
            Lang::Go => (
                tests
                    .iter()
                    .any(|t| t.ends_with("_test.go") && dir_of(t) == dir_of(path)),
                format!(
                    "a *_test.go in {} (Go convention)",
                    if dir_of(path).is_empty() {
                        "."
                    } else {
                        dir_of(path)
                    }
                ),
            ),
            Lang::Rust => {
                let inline =
                    read(path).is_some_and(|t| t.contains("#[cfg(test)]") || t.contains("#[test]"));
                let crate_root = path.split("/src/").next().filter(|r| *r != *path);
                let integration =
                    tests
                        .iter()
                        .filter(|t| t.ends_with(".rs"))
                        .any(|t| match crate_root {
                            Some(root) => t.starts_with(&format!("{root}/tests/")),
                            None => t.starts_with("tests/"),
                        });
                (
                    inline || integration,
                    "a #[cfg(test)] module in the file or a changed tests/*.rs (Rust convention)"
                        .to_string(),
                )
            }
        };
        if !has_test {
            findings.push(warning(
                Some(path.to_string()),
                None,
                "test-parity",
                format!("`{path}` changed without a changed test: expected {expected}"),
            ));
        }
    }
    let note = format!(
        "tests: {}/{} changed sources have a changed test",
        sources.len() - findings.len(),
        sources.len()
    );
    (findings, note)
}

// ---------------------------------------------------------------------------------------------
// 3. Imperative verb direction

/// What the title's leading verb promises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
    Grow,
    Shrink,
    Replace,
}

/// The title's first word (after `[tags]`, `feat(scope):`-style prefixes and punctuation), lower-cased.
pub(crate) fn leading_verb(title: &str) -> Option<String> {
    let mut t = title.trim();
    loop {
        let before = t;
        if t.starts_with('[') {
            if let Some(end) = t.find(']') {
                t = t[end + 1..].trim_start();
            }
        }
        // Conventional-commit prefix: `feat:`, `fix(parser)!:`.
        if let Some((head, rest)) = t.split_once(':') {
            if !head.contains(' ')
                && head
                    .chars()
                    .all(|c| c.is_alphanumeric() || "()!-_/".contains(c))
            {
                t = rest.trim_start();
            }
        }
        t = t.trim_start_matches(|c: char| !c.is_alphanumeric());
        if t == before {
            break;
        }
    }
    t.split(|c: char| !c.is_alphanumeric())
        .next()
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
}

pub(crate) fn direction_of(verb: &str) -> Option<Direction> {
    Some(match verb {
        "add" | "adds" | "implement" | "implements" | "create" | "creates" | "introduce"
        | "build" | "support" | "enable" | "expose" | "provide" | "write" | "generate"
        | "extend" | "allow" => Direction::Grow,
        "remove" | "removes" | "delete" | "deletes" | "drop" | "eliminate" | "purge" | "prune"
        | "strip" => Direction::Shrink,
        "migrate" | "replace" | "move" | "rename" | "port" | "switch" => Direction::Replace,
        _ => return None,
    })
}

fn verb_direction(title: &str, changes: &ChangeSet) -> (Vec<Finding>, String) {
    let Some(verb) = leading_verb(title) else {
        return (Vec::new(), "verb: title has no leading word".into());
    };
    let Some(direction) = direction_of(&verb) else {
        return (Vec::new(), format!("verb: “{verb}” implies no direction"));
    };
    let (add, del) = (changes.total_additions(), changes.total_deletions());
    let problem = match direction {
        Direction::Grow if del > add => Some(format!(
            "the title says “{verb}” but the change removes more than it adds (+{add}/−{del})"
        )),
        Direction::Shrink if del == 0 || add > del => Some(format!(
            "the title says “{verb}” but the change adds more than it removes (+{add}/−{del})"
        )),
        Direction::Replace if del == 0 => Some(format!(
            "the title says “{verb}” but the change removes nothing of the old (+{add}/−{del})"
        )),
        _ => None,
    };
    let note = format!("verb: “{verb}” vs +{add}/−{del}");
    match problem {
        Some(p) => (vec![warning(None, None, "verb-direction", p)], note),
        None => (Vec::new(), note),
    }
}

// ---------------------------------------------------------------------------------------------
// 4. File-count sanity

fn file_count(changes: &ChangeSet, max: usize) -> (Vec<Finding>, String) {
    let n = changes.files.len();
    let finding = if n == 0 {
        Some("the change touches no files".to_string())
    } else if n > max {
        Some(format!(
            "the change touches {n} files, more than gates.maxChangedFiles ({max}): check that it stays within the issue"
        ))
    } else {
        None
    };
    let note = format!("files: {n} changed (max {max})");
    match finding {
        Some(m) => (vec![warning(None, None, "file-count", m)], note),
        None => (Vec::new(), note),
    }
}

// ---------------------------------------------------------------------------------------------
// 5. Comment referencing

/// Whether a commit message refers to issue `n` (`#12`, `GH-12`, `issues/12`, `issue-12`).
pub(crate) fn references_issue(message: &str, n: u64) -> bool {
    let re = Regex::new(&format!(
        r"(?i)(?:#|\bgh-|issues/|\bissue[-_ ]?#?){n}(?:\D|$)"
    ));
    re.is_ok_and(|re| re.is_match(message))
}

fn commit_references(n: u64, changes: &ChangeSet) -> (Vec<Finding>, String) {
    if changes.commits.is_empty() {
        return (
            vec![warning(
                None,
                None,
                "commit-reference",
                format!("no commits on the branch yet, so none references #{n}"),
            )],
            "commits: none yet".into(),
        );
    }
    let missing: Vec<String> = changes
        .commits
        .iter()
        .filter(|c| !references_issue(&c.message, n))
        .map(|c| {
            format!(
                "{} “{}”",
                c.sha.chars().take(8).collect::<String>(),
                c.message.lines().next().unwrap_or_default()
            )
        })
        .collect();
    let total = changes.commits.len();
    let note = format!("commits: {}/{total} reference #{n}", total - missing.len());
    if missing.is_empty() {
        return (Vec::new(), note);
    }
    let shown: Vec<&String> = missing.iter().take(5).collect();
    let more = missing.len().saturating_sub(shown.len());
    (
        vec![warning(
            None,
            None,
            "commit-reference",
            format!(
                "{} of {total} commits do not reference #{n}: {}{}",
                missing.len(),
                shown
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join("; "),
                if more > 0 {
                    format!(" (+{more} more)")
                } else {
                    String::new()
                }
            ),
        )],
        note,
    )
}

// ---------------------------------------------------------------------------------------------
// Deleted files still referenced

/// Patterns that reference a deleted file: its path anywhere, and its module name in import-like lines.
fn reference_patterns(deleted: &str) -> Vec<Regex> {
    let mut out = Vec::new();
    if let Ok(re) = Regex::new(&regex::escape(deleted)) {
        out.push(re);
    }
    let s = regex::escape(stem(deleted));
    if s.is_empty() {
        return out;
    }
    let specific = match lang_of(deleted) {
        Some(Lang::JsTs) => Some(format!(
            r#"(?:\bimport\b|\bfrom\b|\brequire\s*\(|\bexport\b).*["'`](?:[^"'`\n]*/)?{s}(?:\.(?:ts|tsx|js|jsx|mjs|cjs|mts|cts))?["'`]"#
        )),
        Some(Lang::Python) => Some(format!(
            r"^\s*(?:from\s+[\w.]*\b{s}\b\s+import|import\s+(?:[\w.]+\s*,\s*)*[\w.]*\b{s}\b)"
        )),
        Some(Lang::Rust) => Some(format!(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+{s}\s*;")),
        _ => None,
    };
    if let Some(p) = specific.and_then(|p| Regex::new(&p).ok()) {
        out.push(p);
    }
    out
}

fn stale_references(ctx: &GateContext) -> (Vec<Finding>, String) {
    let deleted: Vec<String> = ctx
        .changes
        .files
        .iter()
        .filter_map(|f| match &f.status {
            FileStatus::Deleted => Some(f.path.clone()),
            FileStatus::Renamed { from } => Some(from.clone()),
            _ => None,
        })
        .collect();
    if deleted.is_empty() {
        return (Vec::new(), "deleted files: none".into());
    }
    let patterns: Vec<(String, Vec<Regex>)> = deleted
        .iter()
        .map(|d| (d.clone(), reference_patterns(d)))
        .collect();
    let mut files: BTreeSet<String> = tracked_files(ctx);
    files.extend(ctx.changes.existing().map(|f| f.path.clone()));
    for d in &deleted {
        files.remove(d);
    }
    let mut findings = Vec::new();
    'files: for rel in &files {
        if rel.ends_with("package-lock.json")
            || rel.ends_with("yarn.lock")
            || rel.ends_with("pnpm-lock.yaml")
            || rel.ends_with("Cargo.lock")
            || rel.starts_with("node_modules/")
            || !ctx.dir.join(rel).is_file()
        {
            continue;
        }
        let Some(text) = ctx.read_text(rel) else {
            continue;
        };
        for (i, line) in text.lines().enumerate() {
            for (deleted, res) in &patterns {
                if res.iter().any(|re| re.is_match(line)) {
                    findings.push(warning(
                        Some(rel.clone()),
                        u32::try_from(i + 1).ok(),
                        "stale-reference",
                        format!("still refers to deleted `{deleted}`: {}", line.trim()),
                    ));
                    if findings.len() >= MAX_STALE_REFERENCES {
                        break 'files;
                    }
                }
            }
        }
    }
    let note = format!(
        "deleted files: {} deleted, {} leftover reference{}",
        deleted.len(),
        findings.len(),
        if findings.len() == 1 { "" } else { "s" }
    );
    (findings, note)
}

/// Paths in the repository's index.
fn tracked_files(ctx: &GateContext) -> BTreeSet<String> {
    let Ok(repo) = git2::Repository::discover(&ctx.dir) else {
        return BTreeSet::new();
    };
    let Ok(index) = repo.index() else {
        return BTreeSet::new();
    };
    index
        .iter()
        .map(|e| String::from_utf8_lossy(&e.path).into_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gates::{ChangedFile, CommitInfo};

    fn change(files: &[(&str, FileStatus, usize, usize)]) -> ChangeSet {
        ChangeSet {
            base: "main".into(),
            merge_base: None,
            files: files
                .iter()
                .map(|(p, s, a, d)| ChangedFile {
                    path: p.to_string(),
                    status: s.clone(),
                    additions: *a,
                    deletions: *d,
                })
                .collect(),
            commits: Vec::new(),
        }
    }

    #[test]
    fn checklist_items_skip_context_sections_and_code() {
        let body = "Intro\n\n## Prerequisites\n- [ ] Node 20 installed\n\n## Tasks\n- [ ] Add `--json` flag\n* [x] Export totals as CSV\n1. [ ] Document it\n```\n- [ ] not an item\n```\n### Steps to reproduce\n- [ ] run it\n**Setup**\n- [ ] clone\n## Acceptance\n- [X] Tests pass for invoices\n";
        let items = checklist_items(body);
        let texts: Vec<&str> = items.iter().map(|i| i.text.as_str()).collect();
        assert_eq!(
            texts,
            vec![
                "Add `--json` flag",
                "Export totals as CSV",
                "Document it",
                "Tests pass for invoices"
            ]
        );
        assert!(items[1].checked && !items[0].checked && items[3].checked);
        assert_eq!(items[0].line, 7);
    }

    #[test]
    fn keywords() {
        let (spans, words) =
            item_keywords("Add `--json` flag to the Report command when exporting");
        assert_eq!(spans, vec!["--json"]);
        assert_eq!(words, vec!["command", "export", "flag", "report"]);
    }

    #[test]
    fn checklist_coverage_flags_untraced_items() {
        let issue = IssueText {
            number: 7,
            title: "Add invoices".into(),
            body: "- [ ] Compute `invoiceTotal`\n- [ ] Round amounts to cents\n- [ ] Produce a PDF summary\n- [ ] do it\n".into(),
        };
        let contents = vec![(
            "src/invoices.ts".to_string(),
            "function invoicetotal() { return math.round(x * 100) / 100; } // amounts".to_string(),
        )];
        let (findings, note) = checklist_coverage(&issue, &contents);
        assert_eq!(findings.len(), 1, "{findings:?}");
        assert!(findings[0].message.contains("Produce a PDF summary"));
        assert!(findings[0].message.contains("`produce`, `summary`"));
        assert_eq!(note, "checklist: 2/4 items traced (1 without keywords)");
    }

    #[test]
    fn parity_by_language_convention() {
        let c = change(&[
            ("src/orders.ts", FileStatus::Modified, 5, 1),
            ("src/orders.test.ts", FileStatus::Modified, 5, 0),
            ("src/invoices.ts", FileStatus::Added, 20, 0),
            ("src/index.ts", FileStatus::Modified, 1, 0),
            ("src/types.d.ts", FileStatus::Modified, 1, 0),
            ("app/billing.py", FileStatus::Modified, 3, 0),
            ("tests/test_billing.py", FileStatus::Added, 9, 0),
            ("app/tax.py", FileStatus::Modified, 3, 0),
            ("pkg/calc/calc.go", FileStatus::Modified, 2, 0),
            ("pkg/calc/calc_test.go", FileStatus::Modified, 2, 0),
            ("pkg/fmt/fmt.go", FileStatus::Modified, 2, 0),
            ("crates/a/src/lib2.rs", FileStatus::Modified, 2, 0),
            ("crates/a/tests/it.rs", FileStatus::Modified, 2, 0),
            ("src/inline.rs", FileStatus::Modified, 2, 0),
            ("src/bare.rs", FileStatus::Modified, 2, 0),
            ("src/gone.ts", FileStatus::Deleted, 0, 9),
        ]);
        let read = |p: &str| match p {
            "src/inline.rs" => Some("#[cfg(test)]\nmod tests {}".to_string()),
            "src/index.ts" => Some("// the package's entry\nexport * from './orders';\n".into()),
            _ => None,
        };
        let (findings, note) = test_parity(&c, read);
        let flagged: Vec<&str> = findings.iter().filter_map(|f| f.file.as_deref()).collect();
        assert_eq!(
            flagged,
            vec![
                "src/invoices.ts",
                "app/tax.py",
                "pkg/fmt/fmt.go",
                "src/bare.rs"
            ]
        );
        assert!(findings[0].message.contains("invoices.test.*"));
        assert!(findings[1].message.contains("test_tax.py"));
        assert_eq!(note, "tests: 5/9 changed sources have a changed test");
    }

    /// unjs/ufo: `src/utils.ts` is tested by `test/utilities.test.ts`, which imports the package's
    /// entry (`../src`), which re-exports `./utils`; a Python test importing its module by path.
    #[test]
    fn a_changed_test_importing_the_source_counts_whatever_its_name() {
        let c = change(&[
            ("src/utils.ts", FileStatus::Modified, 5, 1),
            ("test/utilities.test.ts", FileStatus::Modified, 9, 0),
            ("src/encoding.ts", FileStatus::Modified, 2, 0),
            ("src/pkg/billing.py", FileStatus::Modified, 3, 0),
            ("tests/test_invoices.py", FileStatus::Modified, 9, 0),
            ("src/pkg/tax.py", FileStatus::Modified, 3, 0),
        ]);
        let read = |p: &str| -> Option<String> {
            Some(
                match p {
                    "test/utilities.test.ts" => {
                        "import { describe, it } from \"vitest\";\nimport { withQuery } from \"../src\";\n"
                    }
                    "src/index.ts" => "export * from \"./utils\";\nexport * from \"./parse\";\n",
                    "src/utils.ts" | "src/parse.ts" | "src/encoding.ts" => "export const x = 1;\n",
                    "tests/test_invoices.py" => {
                        "import pytest\nfrom pkg.billing import total, tax_rate\n"
                    }
                    "src/pkg/billing.py" | "src/pkg/tax.py" => "X = 1\n",
                    _ => return None,
                }
                .to_string(),
            )
        };
        let (findings, _) = test_parity(&c, read);
        let flagged: Vec<&str> = findings.iter().filter_map(|f| f.file.as_deref()).collect();
        assert_eq!(flagged, vec!["src/encoding.ts", "src/pkg/tax.py"]);
        assert!(js_test_imports(
            "test/utilities.test.ts",
            "src/utils.ts",
            &read
        ));
        assert!(!js_test_imports(
            "test/utilities.test.ts",
            "src/encoding.ts",
            &read
        ));
        assert_eq!(
            js_imports(
                "const a = require('./a'); export { b } from \"../b\"; await import('./c');"
            ),
            ["./a", "../b", "./c"]
        );
    }

    #[test]
    fn an_index_with_code_needs_a_test_and_a_barrel_does_not() {
        let c = change(&[
            ("src/index.ts", FileStatus::Modified, 4, 0),
            ("lib/index.ts", FileStatus::Modified, 3, 0),
        ]);
        let read = |p: &str| {
            match p {
            "src/index.ts" => Some(
                "import { parse } from './parse';\nexport function main(argv: string[]) {\n  return parse(argv[2]);\n}\n".into(),
            ),
            "lib/index.ts" => Some(
                "/* barrel */\nexport {\n  a,\n  b,\n} from './ab';\nexport type { T } from './t';\nimport './side-effect';\n".into(),
            ),
            _ => None,
        }
        };
        let (findings, note) = test_parity(&c, read);
        let flagged: Vec<&str> = findings.iter().filter_map(|f| f.file.as_deref()).collect();
        assert_eq!(flagged, vec!["src/index.ts"]);
        assert!(findings[0].message.contains("index.test.*"), "{findings:?}");
        assert_eq!(note, "tests: 0/1 changed sources have a changed test");
    }

    #[test]
    fn verbs() {
        assert_eq!(leading_verb("Add CSV export").as_deref(), Some("add"));
        assert_eq!(
            leading_verb("feat(cli)!: Remove the old flag").as_deref(),
            Some("remove")
        );
        assert_eq!(
            leading_verb("[gates] 🚀 Implement tsc").as_deref(),
            Some("implement")
        );
        assert_eq!(
            leading_verb("Bug: crash on start").as_deref(),
            Some("crash")
        );
        assert_eq!(leading_verb("  "), None);
        let grow = change(&[("a.ts", FileStatus::Modified, 2, 30)]);
        let (f, _) = verb_direction("Add a cache", &grow);
        assert_eq!(f.len(), 1);
        assert!(f[0].message.contains("+2/−30"));
        let (f, _) = verb_direction("Remove the cache", &grow);
        assert!(f.is_empty());
        let shrink_nothing = change(&[("a.ts", FileStatus::Modified, 10, 0)]);
        assert_eq!(
            verb_direction("Delete dead code", &shrink_nothing).0.len(),
            1
        );
        assert_eq!(verb_direction("Migrate to ESM", &shrink_nothing).0.len(), 1);
        assert!(
            verb_direction("Fix the parser", &shrink_nothing)
                .0
                .is_empty()
        );
    }

    #[test]
    fn file_counts() {
        assert_eq!(file_count(&change(&[]), 50).0.len(), 1);
        let many: Vec<(String, FileStatus, usize, usize)> = (0..4)
            .map(|i| (format!("f{i}.ts"), FileStatus::Added, 1, 0))
            .collect();
        let refs: Vec<(&str, FileStatus, usize, usize)> = many
            .iter()
            .map(|(p, s, a, d)| (p.as_str(), s.clone(), *a, *d))
            .collect();
        let (f, note) = file_count(&change(&refs), 3);
        assert!(
            f[0].message
                .contains("4 files, more than gates.maxChangedFiles (3)")
        );
        assert_eq!(note, "files: 4 changed (max 3)");
        assert!(file_count(&change(&refs), 4).0.is_empty());
    }

    #[test]
    fn commit_references_name_the_unreferencing_commits() {
        assert!(references_issue("Fix totals (#12)", 12));
        assert!(references_issue("closes GH-12", 12));
        assert!(references_issue("see owner/repo/issues/12.", 12));
        assert!(references_issue("worktree for issue-12", 12));
        assert!(!references_issue("Fix totals (#123)", 12));
        assert!(!references_issue("bump to 12", 12));
        let mut c = change(&[("a.ts", FileStatus::Added, 1, 0)]);
        assert_eq!(commit_references(12, &c).0.len(), 1, "no commits yet");
        c.commits = vec![
            CommitInfo {
                sha: "aaaaaaaaaa".into(),
                message: "Add totals (#12)".into(),
            },
            CommitInfo {
                sha: "bbbbbbbbbb".into(),
                message: "wip\n\nmore".into(),
            },
        ];
        let (f, note) = commit_references(12, &c);
        assert_eq!(note, "commits: 1/2 reference #12");
        assert!(f[0].message.contains("bbbbbbbb “wip”"), "{}", f[0].message);
        c.commits.pop();
        assert!(commit_references(12, &c).0.is_empty());
    }

    proptest::proptest! {
        #[test]
        fn issue_text_never_panics(body in "\\PC*", title in "\\PC*", path in "[a-z/._-]{0,30}") {
            for item in checklist_items(&body) {
                let _ = item_keywords(&item.text);
            }
            let _ = leading_verb(&title);
            let _ = references_issue(&title, 7);
            let _ = reference_patterns(&path);
        }
    }

    #[test]
    fn reference_patterns_match_imports_of_the_deleted_file() {
        let ts = reference_patterns("src/util/format.ts");
        let hit = |res: &[Regex], l: &str| res.iter().any(|r| r.is_match(l));
        assert!(hit(&ts, r#"import { fmt } from "./util/format";"#));
        assert!(hit(&ts, r#"const f = require('../format.js')"#));
        assert!(hit(&ts, "see src/util/format.ts for details"));
        assert!(!hit(&ts, r#"import { format } from "date-fns";"#));
        assert!(!hit(&ts, "const format = 1;"));
        let py = reference_patterns("app/helpers.py");
        assert!(hit(&py, "from app.helpers import x"));
        assert!(hit(&py, "import app.helpers"));
        assert!(!hit(&py, "helpers = []"));
        let rs = reference_patterns("src/old.rs");
        assert!(hit(&rs, "pub(crate) mod old;"));
        assert!(!hit(&rs, "let old = 1;"));
    }
}
