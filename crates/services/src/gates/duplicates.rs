//! Duplicates gate: jscpd over the worktree, clones touching the changed files, each classified by
//! comparing its two fragments: Type 1 (identical but for layout and comments), Type 2 (identical once
//! identifiers and literals are renamed) or Type 3 (near-miss). Never blocks: the auditor weighs it.

use std::collections::HashSet;

use serde::Deserialize;

use super::tool::{self, JSCPD, ScratchDir};
use super::{Finding, FindingSeverity, FnGate, GateContext, GateOutcome, GateStatus};
use crate::config::GateKind;

/// Changed files with these extensions make the gate applicable (jscpd's common formats).
const SOURCE_EXTENSIONS: [&str; 36] = [
    "ts", "tsx", "mts", "cts", "js", "jsx", "mjs", "cjs", "vue", "svelte", "py", "go", "rs",
    "java", "kt", "kts", "scala", "rb", "php", "cs", "c", "h", "cc", "cpp", "cxx", "hpp", "swift",
    "m", "dart", "lua", "sh", "css", "scss", "less", "sql", "ex",
];
/// Paths jscpd never scans.
const IGNORED: &str = "**/node_modules/**,**/.git/**,**/dist/**,**/build/**,**/target/**,**/coverage/**,**/.supervisor/**,**/.venv/**,**/vendor/**";
pub(crate) const MIN_LINES: u32 = 5;
pub(crate) const MIN_TOKENS: u32 = 30;

pub(crate) static GATE: FnGate = FnGate {
    kind: GateKind::Duplicates,
    run: |_hook, ctx| Box::pin(run(ctx)),
};

/// The classic clone taxonomy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum CloneType {
    /// Identical apart from whitespace, layout and comments.
    Type1,
    /// Identical once identifiers and literals are normalised (renamed copy).
    Type2,
    /// Similar, with statements changed, added or removed (near-miss).
    Type3,
}

impl CloneType {
    pub(crate) fn rule(self) -> &'static str {
        match self {
            CloneType::Type1 => "type-1-clone",
            CloneType::Type2 => "type-2-clone",
            CloneType::Type3 => "type-3-clone",
        }
    }

    pub(crate) fn label(self) -> &'static str {
        match self {
            CloneType::Type1 => "Type 1 (identical)",
            CloneType::Type2 => "Type 2 (renamed identifiers/literals)",
            CloneType::Type3 => "Type 3 (near-miss)",
        }
    }
}

#[derive(Debug, Deserialize)]
struct Report {
    duplicates: Vec<Duplicate>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Duplicate {
    #[serde(default)]
    format: String,
    #[serde(default)]
    lines: u32,
    #[serde(default)]
    tokens: u32,
    first_file: Location,
    second_file: Location,
}

#[derive(Debug, Deserialize)]
struct Location {
    name: String,
    start: u32,
    end: u32,
}

impl Location {
    /// The line range; jscpd 4 sometimes reports an end before the start for chained clones within
    /// one file, in which case the clone's length from the start is the best estimate.
    fn span(&self, lines: u32) -> (u32, u32) {
        let start = self.start.max(1);
        if self.end >= start {
            (start, self.end)
        } else {
            (start, start + lines.saturating_sub(1))
        }
    }
}

async fn run(ctx: &GateContext) -> GateOutcome {
    let sources: Vec<&str> = ctx.changes.existing_with_extension(&SOURCE_EXTENSIONS);
    if sources.is_empty() {
        return GateOutcome::not_applicable("no changed source files to look for clones of");
    }
    let jscpd = match tool::locate(JSCPD, ctx).await {
        Ok(t) => t,
        Err(reason) => return GateOutcome::not_run(reason),
    };
    let scratch = match ScratchDir::new("supervisor-jscpd") {
        Ok(s) => s,
        Err(e) => return GateOutcome::not_run(format!("no temporary directory for jscpd: {e}")),
    };
    let min_lines = MIN_LINES.to_string();
    let min_tokens = MIN_TOKENS.to_string();
    let args: Vec<&std::ffi::OsStr> = vec![
        "--reporters".as_ref(),
        "json".as_ref(),
        "--output".as_ref(),
        scratch.path().as_os_str(),
        "--min-lines".as_ref(),
        min_lines.as_ref(),
        "--min-tokens".as_ref(),
        min_tokens.as_ref(),
        "--ignore".as_ref(),
        IGNORED.as_ref(),
        "--silent".as_ref(),
        ".".as_ref(),
    ];
    // Its report directory is the one place it writes (in the sandbox, a /tmp of its own would
    // swallow it).
    let cmd = match jscpd.command(&ctx.dir, args.clone(), &[scratch.path()]) {
        Ok(cmd) => cmd,
        Err(reason) => return GateOutcome::not_run(reason),
    };
    let out = match tool::run_captured(cmd, tool::tool_timeout(ctx), ctx.session.cancel()).await {
        Ok(out) => out,
        Err(e) => return GateOutcome::not_run(e.reason("jscpd")),
    };
    if !out.status.success() {
        return GateOutcome::not_run(format!(
            "jscpd ended with {}: {}",
            out.status_text(),
            out.complaint()
        ));
    }
    let report_path = scratch.path().join("jscpd-report.json");
    let text = match std::fs::read_to_string(&report_path) {
        Ok(t) => t,
        Err(e) => {
            if found_no_files(&jscpd, ctx, args, &scratch).await {
                return GateOutcome::not_applicable(format!(
                    "jscpd found no file to compare: every file in a format it reads is shorter than {MIN_LINES} lines or over its size limits"
                ));
            }
            return GateOutcome::not_run(format!(
                "jscpd exited successfully but wrote no jscpd-report.json ({e}): {}",
                out.complaint()
            ));
        }
    };
    let report: Report = match serde_json::from_str(&text) {
        Ok(r) => r,
        Err(e) => return GateOutcome::not_run(format!("jscpd-report.json is not readable: {e}")),
    };

    let changed: HashSet<&str> = sources.iter().copied().collect();
    let mut findings = Vec::new();
    let mut counts = [0usize; 3];
    for dup in &report.duplicates {
        let a = normalise(&dup.first_file.name);
        let b = normalise(&dup.second_file.name);
        let (mine, other) = match (changed.contains(a.as_str()), changed.contains(b.as_str())) {
            (true, _) => ((&a, &dup.first_file), (&b, &dup.second_file)),
            (false, true) => ((&b, &dup.second_file), (&a, &dup.first_file)),
            (false, false) => continue,
        };
        let mine_span = mine.1.span(dup.lines);
        let other_span = other.1.span(dup.lines);
        let kind = match (
            fragment(ctx, mine.0, mine_span),
            fragment(ctx, other.0, other_span),
        ) {
            (Some(x), Some(y)) => classify_clone(&x, &y, &dup.format),
            // A fragment we cannot read back (file changed since): the least certain class.
            _ => CloneType::Type3,
        };
        counts[kind as usize] += 1;
        findings.push(Finding {
            file: Some(mine.0.clone()),
            line: Some(mine_span.0),
            rule: kind.rule().into(),
            message: format!(
                "{} clone of {}:{}-{} (lines {}-{} here; {} lines, {} tokens)",
                kind.label(),
                other.0,
                other_span.0,
                other_span.1,
                mine_span.0,
                mine_span.1,
                dup.lines,
                dup.tokens
            ),
            severity: FindingSeverity::Warning,
        });
    }
    findings.sort_by(|x, y| (&x.file, x.line).cmp(&(&y.file, y.line)));
    findings.dedup();
    if findings.is_empty() {
        return GateOutcome::pass(format!(
            "no clones of at least {MIN_LINES} lines / {MIN_TOKENS} tokens touch the {} changed source file{} ({} elsewhere)",
            sources.len(),
            if sources.len() == 1 { "" } else { "s" },
            report.duplicates.len()
        ));
    }
    GateOutcome::new(
        GateStatus::Warn,
        findings,
        format!(
            "clones touching changed files: {} Type 1, {} Type 2, {} Type 3 (for the auditor; not blocking)",
            counts[0], counts[1], counts[2]
        ),
    )
}

/// Whether jscpd, asked for the files it would read (`--debug` lists them and detects nothing),
/// says there are none. It writes no report then, which alone is also what a broken jscpd does.
async fn found_no_files(
    jscpd: &tool::Tool,
    ctx: &GateContext,
    mut args: Vec<&std::ffi::OsStr>,
    scratch: &ScratchDir,
) -> bool {
    args.insert(args.len() - 1, "--debug".as_ref());
    let Ok(cmd) = jscpd.command(&ctx.dir, args, &[scratch.path()]) else {
        return false;
    };
    match tool::run_captured(cmd, tool::tool_timeout(ctx), ctx.session.cancel()).await {
        Ok(out) => out.status.success() && out.stdout.contains("Found 0 files to detect."),
        Err(_) => false,
    }
}

fn normalise(name: &str) -> String {
    name.trim_start_matches("./").replace('\\', "/")
}

/// Lines `start..=end` (1-based) of a file.
fn fragment(ctx: &GateContext, rel: &str, (start, end): (u32, u32)) -> Option<String> {
    let text = ctx.read_text(rel)?;
    let start = start.max(1) as usize;
    let end = (end as usize).max(start);
    let lines: Vec<&str> = text.lines().skip(start - 1).take(end - start + 1).collect();
    (!lines.is_empty()).then(|| lines.join("\n"))
}

/// Compare two fragments: Type 1 when their tokens (comments and layout aside) are identical, Type 2
/// when identical after normalising identifiers and literals, otherwise Type 3.
pub fn classify_clone(a: &str, b: &str, format: &str) -> CloneType {
    let syntax = Syntax::for_format(format);
    let ta = tokenize(a, syntax);
    let tb = tokenize(b, syntax);
    if ta == tb {
        return CloneType::Type1;
    }
    let na: Vec<Token> = ta.into_iter().map(|t| t.normalised(syntax)).collect();
    let nb: Vec<Token> = tb.into_iter().map(|t| t.normalised(syntax)).collect();
    if na == nb {
        CloneType::Type2
    } else {
        CloneType::Type3
    }
}

/// Comment conventions and keywords of a language family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Syntax {
    /// `//` and `/* */`.
    CLike,
    /// `#`.
    Hash,
}

const C_LIKE_KEYWORDS: &[&str] = &[
    "abstract",
    "as",
    "async",
    "await",
    "break",
    "case",
    "catch",
    "class",
    "const",
    "continue",
    "debugger",
    "default",
    "delete",
    "do",
    "else",
    "enum",
    "export",
    "extends",
    "false",
    "finally",
    "for",
    "fn",
    "from",
    "func",
    "function",
    "go",
    "if",
    "impl",
    "implements",
    "import",
    "in",
    "instanceof",
    "interface",
    "let",
    "loop",
    "match",
    "mod",
    "mut",
    "new",
    "null",
    "of",
    "package",
    "private",
    "protected",
    "pub",
    "public",
    "readonly",
    "return",
    "self",
    "static",
    "struct",
    "super",
    "switch",
    "this",
    "throw",
    "trait",
    "true",
    "try",
    "type",
    "typeof",
    "undefined",
    "use",
    "var",
    "void",
    "where",
    "while",
    "yield",
    "number",
    "string",
    "boolean",
    "any",
    "unknown",
    "never",
    "int",
    "float",
    "double",
    "char",
    "long",
    "short",
    "bool",
    "byte",
    "defer",
    "chan",
    "map",
    "range",
    "select",
    "unsafe",
    "dyn",
    "ref",
];
const HASH_KEYWORDS: &[&str] = &[
    "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del", "elif",
    "else", "except", "False", "finally", "for", "from", "global", "if", "import", "in", "is",
    "lambda", "None", "nonlocal", "not", "or", "pass", "raise", "return", "True", "try", "while",
    "with", "yield", "self", "end", "do", "then", "fi", "esac", "case", "function", "local",
    "module", "require", "unless", "until", "begin", "rescue", "ensure", "nil",
];

impl Syntax {
    fn for_format(format: &str) -> Syntax {
        match format {
            "python" | "ruby" | "bash" | "shell" | "sh" | "perl" | "r" | "elixir" | "yaml"
            | "coffeescript" | "crystal" | "julia" | "nim" => Syntax::Hash,
            _ => Syntax::CLike,
        }
    }

    fn keywords(self) -> &'static [&'static str] {
        match self {
            Syntax::CLike => C_LIKE_KEYWORDS,
            Syntax::Hash => HASH_KEYWORDS,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    Number(String),
    Str(String),
    Punct(char),
}

impl Token {
    fn normalised(self, syntax: Syntax) -> Token {
        match self {
            Token::Word(w) if syntax.keywords().contains(&w.as_str()) => Token::Word(w),
            Token::Word(_) => Token::Word("$id".into()),
            Token::Number(_) | Token::Str(_) => Token::Str("$lit".into()),
            p => p,
        }
    }
}

fn tokenize(text: &str, syntax: Syntax) -> Vec<Token> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c.is_whitespace() {
            i += 1;
        } else if syntax == Syntax::CLike && c == '/' && next == Some('/')
            || syntax == Syntax::Hash && c == '#'
        {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if syntax == Syntax::CLike && c == '/' && next == Some('*') {
            i += 2;
            while i < chars.len() && !(chars[i] == '*' && chars.get(i + 1) == Some(&'/')) {
                i += 1;
            }
            i += 2;
        } else if c == '"' || c == '\'' || c == '`' {
            let start = i;
            i += 1;
            while i < chars.len() && chars[i] != c {
                if chars[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i = (i + 1).min(chars.len());
            out.push(Token::Str(chars[start..i].iter().collect()));
        } else if c.is_ascii_digit() {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric() || chars[i] == '.' || chars[i] == '_')
            {
                i += 1;
            }
            out.push(Token::Number(chars[start..i].iter().collect()));
        } else if c.is_alphanumeric() || c == '_' || c == '$' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_alphanumeric() || chars[i] == '_' || chars[i] == '$')
            {
                i += 1;
            }
            out.push(Token::Word(chars[start..i].iter().collect()));
        } else {
            out.push(Token::Punct(c));
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const ORDERS: &str = "export function orderTotal(orders: Order[]): number {\n  let total = 0;\n  for (const order of orders) {\n    total += order.quantity * order.unitPrice; // sum\n  }\n  return total;\n}";

    #[test]
    fn identical_modulo_layout_and_comments_is_type_1() {
        let reformatted = "export function orderTotal(orders: Order[]): number\n{\n  let total = 0;\n  /* loop */ for (const order of orders) { total += order.quantity * order.unitPrice; }\n  return total;\n}";
        assert_eq!(
            classify_clone(ORDERS, ORDERS, "typescript"),
            CloneType::Type1
        );
        assert_eq!(
            classify_clone(ORDERS, reformatted, "typescript"),
            CloneType::Type1
        );
    }

    #[test]
    fn renamed_identifiers_and_literals_are_type_2() {
        let renamed = ORDERS
            .replace("orderTotal", "invoiceSum")
            .replace("orders", "invoices")
            .replace("order", "invoice")
            .replace("total = 0", "total = 1");
        assert_eq!(
            classify_clone(ORDERS, &renamed, "typescript"),
            CloneType::Type2
        );
        assert_eq!(
            classify_clone(
                "x = 'a'\nif x:\n  pass",
                "y = \"b\"  # note\nif y:\n  pass",
                "python"
            ),
            CloneType::Type2
        );
    }

    #[test]
    fn changed_statements_are_type_3() {
        let edited = ORDERS.replace(
            "return total;",
            "if (total > 0) { return total; }\n  return 0;",
        );
        assert_eq!(
            classify_clone(ORDERS, &edited, "typescript"),
            CloneType::Type3
        );
        // A keyword is not an identifier: `let` → `const` is a different statement.
        assert_eq!(
            classify_clone("let a = 1;", "const a = 1;", "javascript"),
            CloneType::Type3
        );
    }

    proptest::proptest! {
        #[test]
        fn classification_never_panics(a in "\\PC*", b in "\\PC*") {
            let _ = classify_clone(&a, &b, "typescript");
            let _ = classify_clone(&a, &b, "python");
        }
    }
}
