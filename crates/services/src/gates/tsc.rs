//! tsc gate: `tsc --noEmit --pretty false` for each TypeScript project the change touches.
//!
//! Diagnostics are cached per tree state (same files → same answer, no second compile), and each run
//! records the error count so the summary can say whether the change made things worse (regression),
//! better (improvement) or neither (stable) since the previous run on the branch.
//!
//! Within a gate session tsc runs `--incremental`, its build-info file kept per worktree and project
//! in the session's scratch directory (never in the repository tree, removed with the session): the
//! next round re-checks only what the change can affect. tsc records each file's content hash and
//! diagnostics there, so the answer is the one a cold run gives.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

use super::tool::{self, TSC};
use super::{
    Finding, FindingSeverity, FnGate, GateContext, GateOutcome, GateStatus, current_branch,
    write_state_file,
};
use crate::config::GateKind;

/// Extensions tsc checks.
pub(crate) const TS_EXTENSIONS: [&str; 8] = ["ts", "tsx", "mts", "cts", "js", "jsx", "mjs", "cjs"];

/// Cached tree states kept.
const CACHE_ENTRIES: usize = 16;
/// Runs remembered per branch for the trend.
const HISTORY_ENTRIES: usize = 20;

pub(crate) static GATE: FnGate = FnGate {
    kind: GateKind::Tsc,
    run: |_hook, ctx| Box::pin(run(ctx)),
};

/// One tsc diagnostic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct TscDiagnostic {
    pub(crate) file: Option<String>,
    pub(crate) line: Option<u32>,
    pub(crate) column: Option<u32>,
    /// `error`, `warning` or `message`.
    pub(crate) category: String,
    /// `TS2345`.
    pub(crate) code: String,
    pub(crate) message: String,
}

static LOCATED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(.+?)\((\d+),(\d+)\): (error|warning|message) (TS\d+): (.*)$").expect("valid")
});
static GLOBAL: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(error|warning|message) (TS\d+): (.*)$").expect("valid"));

/// Parse `tsc --pretty false` output. Indented lines continue the previous diagnostic's message;
/// anything else that is not a diagnostic is ignored (the caller checks the exit status).
pub(crate) fn parse_tsc_output(text: &str) -> Vec<TscDiagnostic> {
    let mut out: Vec<TscDiagnostic> = Vec::new();
    for raw in text.lines() {
        let line = raw.trim_end_matches('\r');
        if let Some(c) = LOCATED.captures(line) {
            out.push(TscDiagnostic {
                file: Some(c[1].replace('\\', "/")),
                line: c[2].parse().ok(),
                column: c[3].parse().ok(),
                category: c[4].to_string(),
                code: c[5].to_string(),
                message: c[6].to_string(),
            });
        } else if let Some(c) = GLOBAL.captures(line.trim_start()) {
            out.push(TscDiagnostic {
                file: None,
                line: None,
                column: None,
                category: c[1].to_string(),
                code: c[2].to_string(),
                message: c[3].to_string(),
            });
        } else if line.starts_with(char::is_whitespace) && !line.trim().is_empty() {
            if let Some(last) = out.last_mut() {
                last.message.push(' ');
                last.message.push_str(line.trim());
            }
        }
    }
    out
}

/// The directory (relative to the root, `` for the root) of the nearest tsconfig.json above `file`.
fn project_of(root: &Path, file: &str) -> Option<String> {
    let mut dir = Path::new(file).parent();
    while let Some(d) = dir {
        if root.join(d).join("tsconfig.json").is_file() {
            return Some(d.to_string_lossy().into_owned());
        }
        dir = d.parent();
    }
    None
}

async fn run(ctx: &GateContext) -> GateOutcome {
    let ts_files: Vec<&str> = ctx.changes.existing_with_extension(&TS_EXTENSIONS);
    if ts_files.is_empty() {
        return GateOutcome::not_applicable("no TypeScript or JavaScript files in the change");
    }
    let projects: BTreeSet<String> = ts_files
        .iter()
        .filter_map(|f| project_of(&ctx.dir, f))
        .collect();
    let outside = ts_files
        .iter()
        .filter(|f| project_of(&ctx.dir, f).is_none())
        .count();
    if projects.is_empty() {
        return GateOutcome::not_applicable(format!(
            "no tsconfig.json covers the {} changed TypeScript/JavaScript files (looked from each file up to the repository root)",
            ts_files.len()
        ));
    }
    // Each project may have its own TypeScript (monorepos): resolve tsc from the project up.
    let mut tools = Vec::with_capacity(projects.len());
    for project in &projects {
        match tool::locate_from(TSC, ctx, &ctx.dir.join(project)).await {
            Ok(t) => tools.push((project.clone(), t)),
            Err(reason) => return GateOutcome::not_run(reason),
        }
    }
    let described: Vec<String> = tools.iter().map(|(_, t)| t.describe()).collect();
    let key = tree_state_key(ctx, &projects, &described.join(" "));
    let state_path = ctx.state_dir.join("tsc.json");
    let mut state = TscState::load(&state_path);
    let (diagnostics, cached) = match state.cached(&key) {
        Some(d) => (d.to_vec(), true),
        None => match compile(ctx, &tools).await {
            Ok(d) => (d, false),
            Err(reason) => return GateOutcome::not_run(reason),
        },
    };

    let errors = diagnostics.iter().filter(|d| d.category == "error").count();
    let scope = current_branch(&ctx.dir).unwrap_or_else(|| "HEAD".into());
    let trend = state.record(&key, &scope, errors, &diagnostics);
    if let Err(e) = serde_json::to_string_pretty(&state)
        .map_err(std::io::Error::other)
        .and_then(|text| write_state_file(&state_path, &text))
    {
        tracing::warn!(path = %state_path.display(), error = %e, "could not save the tsc cache");
    }

    let findings: Vec<Finding> = diagnostics
        .iter()
        .map(|d| Finding {
            file: d.file.clone(),
            line: d.line,
            rule: d.code.clone(),
            message: d.message.clone(),
            severity: match d.category.as_str() {
                "error" => FindingSeverity::Error,
                "warning" => FindingSeverity::Warning,
                _ => FindingSeverity::Info,
            },
        })
        .collect();
    let in_changed = diagnostics
        .iter()
        .filter(|d| d.category == "error")
        .filter(|d| d.file.as_deref().is_some_and(|f| ctx.changes.touches(f)))
        .count();
    let projects_text = projects
        .iter()
        .map(|p| if p.is_empty() { "." } else { p.as_str() })
        .collect::<Vec<_>>()
        .join(", ");
    let mut notes = if cached {
        " (cached for this tree state)".to_string()
    } else {
        String::new()
    };
    if outside > 0 {
        notes.push_str(&format!(
            "; {outside} changed file{} outside any tsconfig.json project not checked",
            plural(outside)
        ));
    }
    if errors > 0 {
        GateOutcome::new(
            GateStatus::Fail,
            findings,
            format!(
                "{errors} type error{} ({in_changed} in changed files) in {projects_text}; {trend}{notes}",
                plural(errors)
            ),
        )
    } else {
        GateOutcome::new(
            GateStatus::Pass,
            findings,
            format!("no type errors in {projects_text}; {trend}{notes}"),
        )
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Run tsc for each project; any run that did not produce a judgeable answer makes the gate NotRun.
async fn compile(
    ctx: &GateContext,
    projects: &[(String, tool::Tool)],
) -> Result<Vec<TscDiagnostic>, String> {
    let mut all = Vec::new();
    for (project, tsc) in projects {
        let config = if project.is_empty() {
            PathBuf::from("tsconfig.json")
        } else {
            Path::new(project).join("tsconfig.json")
        };
        let diagnostics = match build_info_file(ctx, project) {
            Some(build_info) => {
                let incremental = compile_project(ctx, tsc, &config, Some(&build_info)).await?;
                if rejects_incremental(&incremental) {
                    // A configuration that cannot build incrementally: the cold answer stands.
                    tracing::info!(project = %config.display(), "tsc refused --incremental; checking cold");
                    compile_project(ctx, tsc, &config, None).await?
                } else {
                    incremental
                }
            }
            None => compile_project(ctx, tsc, &config, None).await?,
        };
        all.extend(diagnostics);
    }
    Ok(all)
}

/// The build-info file of `project` in this worktree, in the session's scratch directory.
fn build_info_file(ctx: &GateContext, project: &str) -> Option<PathBuf> {
    match ctx.session.scratch_dir("tsc") {
        Ok(dir) => {
            let key = format!("{}\n{project}", ctx.dir.display());
            let id = git2::Oid::hash_object(git2::ObjectType::Blob, key.as_bytes())
                .map(|o| o.to_string())
                .unwrap_or_else(|_| "project".into());
            Some(dir.join(format!("{}.tsbuildinfo", &id[..16.min(id.len())])))
        }
        Err(e) => {
            tracing::warn!(error = %e, "no scratch directory for tsc's build info; checking cold");
            None
        }
    }
}

/// Whether tsc complained about the incremental options themselves.
fn rejects_incremental(diagnostics: &[TscDiagnostic]) -> bool {
    diagnostics.iter().any(|d| {
        d.category == "error"
            && (d.message.contains("incremental") || d.message.contains("tsBuildInfoFile"))
    })
}

async fn compile_project(
    ctx: &GateContext,
    tsc: &tool::Tool,
    config: &Path,
    build_info: Option<&Path>,
) -> Result<Vec<TscDiagnostic>, String> {
    let mut args: Vec<std::ffi::OsString> = vec!["--noEmit".into(), "--pretty".into()];
    args.push("false".into());
    if let Some(file) = build_info {
        args.push("--incremental".into());
        args.push("--tsBuildInfoFile".into());
        args.push(file.as_os_str().to_owned());
    }
    args.push("-p".into());
    args.push(config.as_os_str().to_owned());
    // The build-info file is all tsc writes; the checkout stays read-only in the sandbox.
    let writes: Vec<&Path> = build_info.and_then(Path::parent).into_iter().collect();
    let cmd = tsc.command(&ctx.dir, args, &writes)?;
    let out = tool::run_captured(cmd, tool::tool_timeout(ctx), ctx.session.cancel())
        .await
        .map_err(|e| e.reason("tsc"))?;
    let combined = format!("{}\n{}", out.stdout, out.stderr);
    let diagnostics = parse_tsc_output(&combined);
    match out.status.code() {
        Some(0) => {}
        // 1: errors, nothing emitted; 2: errors, output emitted (not with --noEmit, but harmless).
        Some(1 | 2) if !diagnostics.is_empty() => {}
        _ => {
            return Err(format!(
                "tsc -p {} ended with {} without diagnostics to report: {}",
                config.display(),
                out.status_text(),
                out.complaint()
            ));
        }
    }
    Ok(diagnostics)
}

/// A key for "the same files as last time": the merge base plus the content of every changed file,
/// the projects checked, the tool and the installed dependencies' lockfile.
fn tree_state_key(ctx: &GateContext, projects: &BTreeSet<String>, tool: &str) -> String {
    let mut text = format!(
        "tsc-cache-v1\nbase {}\ntool {tool}\n",
        ctx.changes.merge_base.as_deref().unwrap_or("-")
    );
    for p in projects {
        text.push_str(&format!("project {p}\n"));
    }
    for f in &ctx.changes.files {
        let content = if f.exists() {
            std::fs::read(ctx.dir.join(&f.path))
                .ok()
                .and_then(|b| git2::Oid::hash_object(git2::ObjectType::Blob, &b).ok())
                .map(|o| o.to_string())
                .unwrap_or_else(|| "unreadable".into())
        } else {
            "deleted".into()
        };
        text.push_str(&format!("file {} {content}\n", f.path));
    }
    // Installing dependencies changes what tsc sees without changing a tracked file.
    for p in projects.iter().map(String::as_str).chain([""]) {
        let marker = ctx.dir.join(p).join("node_modules/.package-lock.json");
        if let Ok(meta) = std::fs::metadata(&marker) {
            let mtime = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map(|d| d.as_nanos())
                .unwrap_or(0);
            text.push_str(&format!("deps {p} {} {mtime}\n", meta.len()));
        }
    }
    git2::Oid::hash_object(git2::ObjectType::Blob, text.as_bytes())
        .map(|o| o.to_string())
        .unwrap_or(text)
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct TscState {
    #[serde(default)]
    cache: Vec<CacheEntry>,
    /// Branch → runs, oldest first.
    #[serde(default)]
    history: BTreeMap<String, Vec<HistoryEntry>>,
}

#[derive(Debug, Serialize, Deserialize)]
struct CacheEntry {
    key: String,
    diagnostics: Vec<TscDiagnostic>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct HistoryEntry {
    key: String,
    errors: usize,
    at: String,
}

/// How the error count moved since the previous run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Trend {
    FirstRun,
    Regression { before: usize, now: usize },
    Improvement { before: usize, now: usize },
    Stable { count: usize },
}

impl std::fmt::Display for Trend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Trend::FirstRun => f.write_str("trend: first run on this branch"),
            Trend::Regression { before, now } => write!(
                f,
                "trend: regression (+{} since the previous run: {before} → {now})",
                now - before
            ),
            Trend::Improvement { before, now } => write!(
                f,
                "trend: improvement (−{} since the previous run: {before} → {now})",
                before - now
            ),
            Trend::Stable { count } => write!(f, "trend: stable ({count} as in the previous run)"),
        }
    }
}

impl TscState {
    fn load(path: &Path) -> TscState {
        std::fs::read_to_string(path)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default()
    }

    fn cached(&self, key: &str) -> Option<&[TscDiagnostic]> {
        self.cache
            .iter()
            .find(|e| e.key == key)
            .map(|e| e.diagnostics.as_slice())
    }

    /// Remember this run (once per tree state) and compare it with the previous one on the branch.
    fn record(
        &mut self,
        key: &str,
        scope: &str,
        errors: usize,
        diagnostics: &[TscDiagnostic],
    ) -> Trend {
        if self.cached(key).is_none() {
            self.cache.push(CacheEntry {
                key: key.to_string(),
                diagnostics: diagnostics.to_vec(),
            });
            let excess = self.cache.len().saturating_sub(CACHE_ENTRIES);
            self.cache.drain(..excess);
        }
        let runs = self.history.entry(scope.to_string()).or_default();
        if runs.last().is_none_or(|last| last.key != key) {
            runs.push(HistoryEntry {
                key: key.to_string(),
                errors,
                at: chrono::Utc::now().to_rfc3339(),
            });
            let excess = runs.len().saturating_sub(HISTORY_ENTRIES);
            runs.drain(..excess);
        }
        let previous = runs.iter().rev().find(|r| r.key != key).map(|r| r.errors);
        trend(previous, errors)
    }
}

pub(crate) fn trend(previous: Option<usize>, now: usize) -> Trend {
    match previous {
        None => Trend::FirstRun,
        Some(before) if now > before => Trend::Regression { before, now },
        Some(before) if now < before => Trend::Improvement { before, now },
        Some(_) => Trend::Stable { count: now },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_located_global_and_continued_diagnostics() {
        let out = "src/index.ts(3,27): error TS2345: Argument of type 'string' is not assignable to parameter of type 'number'.\n\
                   src/a b.ts(10,1): error TS2322: Type 'X' is not assignable to type 'Y'.\n  \
                     Property 'z' is missing.\n\
                   error TS18003: No inputs were found in config file 'tsconfig.json'.\n\
                   Found 2 errors.\n";
        let d = parse_tsc_output(out);
        assert_eq!(d.len(), 3);
        assert_eq!(d[0].file.as_deref(), Some("src/index.ts"));
        assert_eq!((d[0].line, d[0].column), (Some(3), Some(27)));
        assert_eq!(d[0].code, "TS2345");
        assert_eq!(d[1].file.as_deref(), Some("src/a b.ts"));
        assert!(d[1].message.ends_with("Property 'z' is missing."));
        assert_eq!(d[2].file, None);
        assert_eq!(d[2].code, "TS18003");
    }

    #[test]
    fn trends() {
        assert_eq!(trend(None, 3), Trend::FirstRun);
        assert_eq!(trend(Some(0), 2), Trend::Regression { before: 0, now: 2 });
        assert_eq!(trend(Some(5), 1), Trend::Improvement { before: 5, now: 1 });
        assert_eq!(trend(Some(1), 1), Trend::Stable { count: 1 });
        assert!(
            Trend::Regression { before: 0, now: 2 }
                .to_string()
                .contains("regression (+2")
        );
    }

    #[test]
    fn history_compares_with_the_previous_tree_state() {
        let mut s = TscState::default();
        assert_eq!(s.record("a", "br", 0, &[]), Trend::FirstRun);
        // The same tree again is not a new run.
        assert_eq!(s.record("a", "br", 0, &[]), Trend::FirstRun);
        assert_eq!(
            s.record("b", "br", 2, &[]),
            Trend::Regression { before: 0, now: 2 }
        );
        assert_eq!(
            s.record("c", "br", 1, &[]),
            Trend::Improvement { before: 2, now: 1 }
        );
        assert_eq!(s.record("d", "other", 1, &[]), Trend::FirstRun);
        assert!(s.cached("b").is_some());
    }

    proptest::proptest! {
        #[test]
        fn parser_never_panics(text in "\\PC*") {
            let _ = parse_tsc_output(&text);
        }
    }
}
