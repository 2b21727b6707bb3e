//! LSP gate: real language servers report diagnostics for the files the change touched.
//!
//! Files are grouped by language (.ts/.tsx/.js → typescript-language-server, .py → pylsp, .go → gopls,
//! .rs → rust-analyzer); each server is started on the worktree, the files are opened and their
//! published diagnostics collected. A server that fails to start or answer is retried up to three
//! times; a language whose server cannot be had is reported as not run, by name.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use lsp_types::{Diagnostic, DiagnosticSeverity, NumberOrString};
use tokio::time::Instant;

use super::lsp_client::LspServer;
use super::tool::{self, GOPLS, PYLSP, RUST_ANALYZER, TYPESCRIPT_LANGUAGE_SERVER, ToolSpec};
use super::{Finding, FindingSeverity, FnGate, GateContext, GateOutcome, GateStatus, join_all};
use crate::config::GateKind;

/// Attempts per language server.
const ATTEMPTS: u32 = 3;

pub static GATE: FnGate = FnGate {
    kind: GateKind::Lsp,
    run: |_hook, ctx| Box::pin(run(ctx)),
};

/// A language and the server that checks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Language {
    TypeScript,
    Python,
    Go,
    Rust,
}

impl Language {
    fn of_extension(ext: &str) -> Option<Language> {
        Some(match ext {
            "ts" | "tsx" | "mts" | "cts" | "js" | "jsx" | "mjs" | "cjs" => Language::TypeScript,
            "py" | "pyi" => Language::Python,
            "go" => Language::Go,
            "rs" => Language::Rust,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Language::TypeScript => "TypeScript/JavaScript",
            Language::Python => "Python",
            Language::Go => "Go",
            Language::Rust => "Rust",
        }
    }

    fn server(self) -> (ToolSpec, &'static [&'static str]) {
        match self {
            Language::TypeScript => (TYPESCRIPT_LANGUAGE_SERVER, &["--stdio"]),
            Language::Python => (PYLSP, &[]),
            Language::Go => (GOPLS, &[]),
            Language::Rust => (RUST_ANALYZER, &[]),
        }
    }

    fn language_id(ext: &str) -> &'static str {
        match ext {
            "ts" | "mts" | "cts" => "typescript",
            "tsx" => "typescriptreact",
            "jsx" => "javascriptreact",
            "js" | "mjs" | "cjs" => "javascript",
            "py" | "pyi" => "python",
            "go" => "go",
            "rs" => "rust",
            _ => "plaintext",
        }
    }
}

/// What happened to one language.
#[derive(Debug)]
enum LanguageResult {
    /// Diagnostics per file (relative path); `silent`: files the server published nothing for.
    Checked {
        diagnostics: BTreeMap<String, Vec<Diagnostic>>,
        silent: Vec<String>,
    },
    NotRun(String),
}

async fn run(ctx: &GateContext) -> GateOutcome {
    let mut groups: BTreeMap<Language, Vec<String>> = BTreeMap::new();
    for f in ctx.changes.existing() {
        if let Some(lang) = Language::of_extension(&f.extension()) {
            groups.entry(lang).or_default().push(f.path.clone());
        }
    }
    if groups.is_empty() {
        return GateOutcome::not_applicable(
            "no changed files of a language with a server (.ts/.tsx/.js, .py, .go, .rs)",
        );
    }

    // Languages run concurrently; each has its own server.
    let tasks = groups
        .iter()
        .map(|(lang, files)| async move { (*lang, check_language(ctx, *lang, files).await) });
    let results = join_all(tasks).await;

    let mut findings = Vec::new();
    let mut parts = Vec::new();
    let mut not_run = Vec::new();
    let mut errors_total = 0usize;
    for (lang, result) in results {
        match result {
            LanguageResult::Checked {
                diagnostics: per_file,
                silent,
            } => {
                let mut errors = 0;
                let mut warnings = 0;
                for (file, diagnostics) in &per_file {
                    for d in diagnostics {
                        match d.severity {
                            Some(DiagnosticSeverity::ERROR) => {
                                errors += 1;
                                findings.push(finding(file, d));
                            }
                            Some(DiagnosticSeverity::WARNING) => warnings += 1,
                            _ => {}
                        }
                    }
                }
                errors_total += errors;
                parts.push(format!(
                    "{}: {} file{}, {errors} error{}, {warnings} warning{}",
                    lang.name(),
                    per_file.len(),
                    plural(per_file.len()),
                    plural(errors),
                    plural(warnings)
                ));
                if !silent.is_empty() {
                    let reason = format!(
                        "{}: the server published no diagnostics for {} within {} s",
                        lang.name(),
                        silent.join(", "),
                        tool::tool_timeout(ctx).as_secs()
                    );
                    parts.push(reason.clone());
                    not_run.push(reason);
                }
            }
            LanguageResult::NotRun(reason) => {
                parts.push(format!("{}: not run — {reason}", lang.name()));
                not_run.push(format!("{}: {reason}", lang.name()));
            }
        }
    }
    findings.sort_by(|a, b| (&a.file, a.line).cmp(&(&b.file, b.line)));
    let summary = parts.join("; ");
    if errors_total > 0 {
        GateOutcome::new(GateStatus::Fail, findings, summary)
    } else if !not_run.is_empty() {
        GateOutcome::new(GateStatus::NotRun(not_run.join("; ")), findings, summary)
    } else {
        GateOutcome::new(GateStatus::Pass, findings, summary)
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

fn finding(file: &str, d: &Diagnostic) -> Finding {
    let code = match &d.code {
        Some(NumberOrString::Number(n)) => Some(n.to_string()),
        Some(NumberOrString::String(s)) => Some(s.clone()),
        None => None,
    };
    let rule = match (&d.source, code) {
        (Some(src), Some(code)) => format!("{src}({code})"),
        (Some(src), None) => src.clone(),
        (None, Some(code)) => code,
        (None, None) => "lsp".into(),
    };
    Finding {
        file: Some(file.to_string()),
        line: Some(d.range.start.line.saturating_add(1)),
        rule,
        message: d.message.lines().collect::<Vec<_>>().join(" "),
        severity: FindingSeverity::Error,
    }
}

/// Start the language's server (up to [`ATTEMPTS`] times), open the files, collect diagnostics.
async fn check_language(ctx: &GateContext, lang: Language, files: &[String]) -> LanguageResult {
    let (spec, args) = lang.server();
    let server_tool = match tool::locate(spec, ctx) {
        Ok(t) => t,
        Err(reason) => return LanguageResult::NotRun(reason),
    };
    let root = ctx.dir.canonicalize().unwrap_or_else(|_| ctx.dir.clone());
    let mut opened = Vec::new();
    for rel in files {
        let abs = root.join(rel);
        match std::fs::read_to_string(&abs) {
            Ok(text) => opened.push((rel.clone(), abs, text)),
            Err(e) => {
                return LanguageResult::NotRun(format!("{rel} could not be read: {e}"));
            }
        }
    }
    let budget = tool::tool_timeout(ctx);
    let mut last_error = String::new();
    for attempt in 1..=ATTEMPTS {
        match attempt_once(&server_tool, args, &root, &opened, budget).await {
            Ok(checked) => return checked,
            Err(e) => {
                tracing::info!(server = spec.bin, attempt, error = %e, "language server attempt failed");
                last_error = e;
            }
        }
    }
    LanguageResult::NotRun(format!(
        "{} failed {ATTEMPTS} times; last: {last_error}",
        spec.bin
    ))
}

async fn attempt_once(
    server_tool: &tool::Tool,
    args: &[&str],
    root: &std::path::Path,
    opened: &[(String, PathBuf, String)],
    budget: Duration,
) -> Result<LanguageResult, String> {
    let started = Instant::now();
    let deadline = started + budget;
    let bin = server_tool.spec.bin;
    let mut server = LspServer::start(server_tool, args, root)?;
    let result = async {
        server.initialize(root, deadline).await?;
        tracing::debug!(server = bin, elapsed = ?started.elapsed(), "initialized");
        for (rel, abs, text) in opened {
            let ext = super::extension_of(rel);
            server
                .open(abs, Language::language_id(&ext), text.clone())
                .await?;
        }
        let paths: Vec<PathBuf> = opened.iter().map(|(_, abs, _)| abs.clone()).collect();
        let collected = server.collect_diagnostics(&paths, deadline).await;
        tracing::debug!(server = bin, elapsed = ?started.elapsed(), "diagnostics collected");
        collected
    }
    .await;
    server.shutdown().await;
    tracing::debug!(server = bin, elapsed = ?started.elapsed(), "shut down");
    // A server that started, answered and stays silent about some files is not retried: it would
    // only stay silent again.
    let collected = result?;
    let mut diagnostics = BTreeMap::new();
    let mut silent = Vec::new();
    for (rel, abs, _) in opened {
        match collected.diagnostics.get(abs) {
            Some(d) => {
                diagnostics.insert(rel.clone(), d.clone());
            }
            None => silent.push(rel.clone()),
        }
    }
    Ok(LanguageResult::Checked {
        diagnostics,
        silent,
    })
}
