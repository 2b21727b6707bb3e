//! LSP gate: real language servers report diagnostics for the files the change touched.
//!
//! Files are grouped by language (.ts/.tsx/.js → typescript-language-server, .py → pylsp, .go → gopls,
//! .rs → rust-analyzer). A file counts as checked only once its server has said it finished the file:
//! the server's answer to `textDocument/diagnostic` (LSP 3.17 pull diagnostics) where it offers that;
//! for typescript-language-server, tsserver's own answers to `syntacticDiagnosticsSync` and
//! `semanticDiagnosticsSync` (its published diagnostics carry no version and arrive syntax first,
//! semantics later, so silence after the first publish proves nothing); otherwise diagnostics the
//! server published for the very document version sent. Anything less is "not run: diagnostics
//! incomplete", never "0 errors".
//!
//! Servers stay warm for the gate session (the pipeline run): the next round sends `didChange`,
//! `didOpen` and `didClose` instead of starting cold. Starting a server is tried up to three times; a
//! server that crashes or hangs while checking is restarted once, then the language is not run. A
//! change to the project's configuration or installed dependencies starts the server afresh, so a warm
//! round answers what a cold one would.

use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use lsp_types::{Diagnostic, DiagnosticSeverity, NumberOrString};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::lsp_client::{LspServer, TSSERVER_REQUEST, Unfinished};
use super::tool::{self, GOPLS, PYLSP, RUST_ANALYZER, TSC, TYPESCRIPT_LANGUAGE_SERVER, ToolSpec};
use super::{Finding, FindingSeverity, FnGate, GateContext, GateOutcome, GateStatus, join_all};
use crate::config::GateKind;

/// Attempts at starting a language server.
const ATTEMPTS: u32 = 3;
/// tsserver's heap limit (MB): warm servers stay within it.
const TSSERVER_MAX_MEMORY_MB: u64 = 3072;

pub(crate) static GATE: FnGate = FnGate {
    kind: GateKind::Lsp,
    run: |_hook, ctx| Box::pin(run(ctx)),
};

/// A language and the server that checks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Language {
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

    /// Files whose change alters what the server knows beyond the open documents (configuration,
    /// manifests, lockfiles): a changed one starts the server afresh.
    fn is_project_file(self, name: &str) -> bool {
        match self {
            Language::TypeScript => {
                matches!(
                    name,
                    "package.json"
                        | "package-lock.json"
                        | "npm-shrinkwrap.json"
                        | "yarn.lock"
                        | "pnpm-lock.yaml"
                        | "jsconfig.json"
                ) || (name.starts_with("tsconfig") && name.ends_with(".json"))
            }
            Language::Python => matches!(
                name,
                "pyproject.toml" | "setup.cfg" | "setup.py" | "tox.ini" | ".flake8" | ".pylsp.toml"
            ),
            Language::Go => matches!(name, "go.mod" | "go.sum" | "go.work" | "go.work.sum"),
            Language::Rust => matches!(name, "Cargo.toml" | "Cargo.lock"),
        }
    }
}

/// What happened to one language.
#[derive(Debug)]
enum LanguageResult {
    /// Diagnostics per file (relative path) the server finished; the files it did not finish.
    Checked {
        diagnostics: BTreeMap<String, Vec<Diagnostic>>,
        unfinished: Vec<(String, Unfinished)>,
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
                unfinished,
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
                if !unfinished.is_empty() {
                    let reason = format!(
                        "{}: diagnostics incomplete: {}",
                        lang.name(),
                        unfinished_text(&unfinished, tool::tool_timeout(ctx))
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
        GateOutcome::new(GateStatus::not_run(not_run.join("; ")), findings, summary)
    } else {
        GateOutcome::new(GateStatus::Pass, findings, summary)
    }
}

/// Why files were not finished, grouped by what the server did.
fn unfinished_text(unfinished: &[(String, Unfinished)], budget: Duration) -> String {
    let files = |pick: &dyn Fn(&Unfinished) -> bool| -> Vec<&str> {
        unfinished
            .iter()
            .filter(|(_, u)| pick(u))
            .map(|(f, _)| f.as_str())
            .collect()
    };
    let mut parts = Vec::new();
    let silent = files(&|u| *u == Unfinished::Silent);
    if !silent.is_empty() {
        parts.push(format!(
            "the server published no diagnostics for {} within {} s",
            silent.join(", "),
            budget.as_secs()
        ));
    }
    let unversioned = files(&|u| *u == Unfinished::Unversioned);
    if !unversioned.is_empty() {
        parts.push(format!(
            "the server published diagnostics for {} without a document version and offers no other way to say it finished them",
            unversioned.join(", ")
        ));
    }
    let stale: Vec<String> = unfinished
        .iter()
        .filter_map(|(f, u)| match u {
            Unfinished::Stale { published, current } => Some(format!(
                "{f} (version {published} published, version {current} sent)"
            )),
            _ => None,
        })
        .collect();
    if !stale.is_empty() {
        parts.push(format!(
            "the server did not publish diagnostics for the current text of {} within {} s",
            stale.join(", "),
            budget.as_secs()
        ));
    }
    parts.join("; ")
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

/// A changed file to check: relative path, absolute path, current text.
struct Document {
    rel: String,
    abs: PathBuf,
    text: String,
}

/// Check the language's files with its warm server (started when there is none, or when the project
/// changed under it); a server that fails while checking is restarted once.
async fn check_language(ctx: &GateContext, lang: Language, files: &[String]) -> LanguageResult {
    let (spec, args) = lang.server();
    let server_tool = match tool::locate(spec, ctx).await {
        Ok(t) => t,
        Err(reason) => return LanguageResult::NotRun(reason),
    };
    let (server_tool, options) = match lang {
        Language::TypeScript => match typescript_options(ctx, &server_tool).await {
            // The server loads that TypeScript: in the sandbox it must be there too.
            Ok((tsserver, o)) => (server_tool.also_reading(&tsserver), Some(o)),
            Err(reason) => return LanguageResult::NotRun(reason),
        },
        // gopls offers pull diagnostics (its completion signal) only when asked to.
        Language::Go => (server_tool, Some(json!({ "pullDiagnostics": true }))),
        _ => (server_tool, None),
    };
    let root = ctx.dir.canonicalize().unwrap_or_else(|_| ctx.dir.clone());
    let mut documents = Vec::new();
    for rel in files {
        let abs = root.join(rel);
        // The server gets the text from us: no more than a confined server could read itself.
        if !ctx.shows(&abs) {
            return LanguageResult::NotRun(format!(
                "{rel} could not be read: it leads out of what the sandbox shows (agentSandbox \"bwrap\")"
            ));
        }
        match std::fs::read_to_string(&abs) {
            Ok(text) => documents.push(Document {
                rel: rel.clone(),
                abs,
                text,
            }),
            Err(e) => {
                return LanguageResult::NotRun(format!("{rel} could not be read: {e}"));
            }
        }
    }
    let budget = tool::tool_timeout(ctx);
    let identity = format!("{} {args:?} {options:?}", server_tool.describe());
    let project = project_fingerprint(ctx, lang);
    let slot = ctx.session.servers().slot(lang, &root);
    let mut held = slot.warm.lock().await;
    if let Some(warm) = held.take() {
        if warm.identity == identity && warm.project == project {
            *held = Some(warm);
        } else {
            tracing::debug!(
                server = spec.bin,
                "project changed: starting the language server afresh"
            );
            slot.set_group(None);
            warm.server.shutdown().await;
        }
    }
    let mut restarted = false;
    let result = loop {
        if held.is_none() {
            match start(&server_tool, args, &root, options.clone(), budget).await {
                Ok(server) => {
                    slot.set_group(server.process_group());
                    *held = Some(Warm {
                        server,
                        identity: identity.clone(),
                        project: project.clone(),
                        documents: HashMap::new(),
                    });
                }
                Err(reason) => break LanguageResult::NotRun(reason),
            }
        }
        let warm = held.as_mut().expect("a server was just started");
        let deadline = Instant::now() + budget;
        match warm.check(&documents, deadline).await {
            Ok(checked) => break checked,
            Err(e) => {
                tracing::info!(server = spec.bin, error = %e, restarted, "language server failed while checking");
                slot.set_group(None);
                drop(held.take());
                if restarted || ctx.session.is_closed() {
                    break LanguageResult::NotRun(format!(
                        "{} failed while checking{}: {e}",
                        spec.bin,
                        if restarted { " after a restart" } else { "" }
                    ));
                }
                restarted = true;
            }
        }
    };
    // A session that ended meanwhile keeps no server.
    if ctx.session.is_closed() {
        if let Some(warm) = held.take() {
            slot.set_group(None);
            warm.server.shutdown().await;
        }
    }
    result
}

/// Start a server and initialize it, up to [`ATTEMPTS`] times.
async fn start(
    server_tool: &tool::Tool,
    args: &[&str],
    root: &Path,
    options: Option<Value>,
    budget: Duration,
) -> Result<LspServer, String> {
    let bin = server_tool.spec.bin;
    let mut last_error = String::new();
    for attempt in 1..=ATTEMPTS {
        let started = Instant::now();
        let mut server = match LspServer::start(server_tool, args, root) {
            Ok(s) => s,
            Err(e) => {
                last_error = e;
                continue;
            }
        };
        match server
            .initialize(root, options.clone(), started + budget)
            .await
        {
            Ok(()) => {
                tracing::debug!(server = bin, attempt, elapsed = ?started.elapsed(), "initialized");
                return Ok(server);
            }
            Err(e) => {
                tracing::info!(server = bin, attempt, error = %e, "language server attempt failed");
                last_error = e;
            }
        }
    }
    Err(format!("{bin} failed {ATTEMPTS} times; last: {last_error}"))
}

/// What a server knows beyond its open documents: the content of changed project files (manifests,
/// configuration, lockfiles) and the state of installed dependencies.
fn project_fingerprint(ctx: &GateContext, lang: Language) -> String {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for f in &ctx.changes.files {
        let name = Path::new(&f.path)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if lang.is_project_file(&name) {
            f.path.hash(&mut hasher);
            std::fs::read(ctx.dir.join(&f.path)).ok().hash(&mut hasher);
        }
    }
    if lang == Language::TypeScript {
        let marker = ctx.dir.join("node_modules/.package-lock.json");
        if let Ok(meta) = std::fs::metadata(marker) {
            meta.len().hash(&mut hasher);
            meta.modified().ok().hash(&mut hasher);
        }
    }
    format!("{:016x}", hasher.finish())
}

/// typescript-language-server's options: the trusted TypeScript (never the checkout's own
/// `node_modules/typescript`, which the server would otherwise prefer), no automatic typings
/// downloads, a bounded tsserver heap.
async fn typescript_options(
    ctx: &GateContext,
    server: &tool::Tool,
) -> Result<(PathBuf, Value), String> {
    let mut candidates = Vec::new();
    if let Ok(tsc) = tool::locate(TSC, ctx).await {
        if let Some(pkg) = package_of_bin(tsc.program()) {
            candidates.push(pkg);
        }
    }
    if let Some(pkg) = package_of_bin(server.program()) {
        if let Some(modules) = pkg.parent() {
            candidates.push(modules.join("typescript"));
        }
        candidates.push(pkg.join("node_modules/typescript"));
    }
    let tsserver = candidates
        .iter()
        .filter(|p| !super::trust::is_inside(p, &ctx.dir))
        .find_map(|p| tsserver_of(p))
        .ok_or_else(|| {
            format!(
                "no trusted TypeScript with lib/tsserver.js beside tsc or {} (install typescript 5 with the gate tools; the checkout's own copy is never run)",
                server.describe()
            )
        })?;
    let options = json!({
        "tsserver": { "path": tsserver, "fallbackPath": tsserver },
        "disableAutomaticTypingAcquisition": true,
        "maxTsServerMemory": TSSERVER_MAX_MEMORY_MB,
    });
    Ok((tsserver, options))
}

/// The package directory of an npm executable (`…/node_modules/.bin/tsc` → `…/node_modules/typescript`).
fn package_of_bin(bin: &Path) -> Option<PathBuf> {
    let target = bin.canonicalize().ok()?;
    target
        .ancestors()
        .find(|d| d.join("package.json").is_file())
        .map(Path::to_path_buf)
}

/// `<pkg>/lib/tsserver.js` when `pkg` is a TypeScript installation that has one.
fn tsserver_of(pkg: &Path) -> Option<PathBuf> {
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(pkg.join("package.json")).ok()?).ok()?;
    let named = manifest.get("name").and_then(Value::as_str) == Some("typescript");
    let versioned = manifest.get("version").and_then(Value::as_str).is_some();
    let tsserver = pkg.join("lib/tsserver.js");
    (named && versioned && tsserver.is_file()).then_some(tsserver)
}

/// Warm language servers of a gate session: one per language and checkout.
#[derive(Default)]
pub(super) struct ServerPool {
    slots: std::sync::Mutex<HashMap<(Language, PathBuf), Arc<Slot>>>,
}

pub(super) struct Slot {
    warm: tokio::sync::Mutex<Option<Warm>>,
    /// The running server's process group, readable while a gate holds `warm`.
    group: AtomicI32,
}

impl Slot {
    fn set_group(&self, pgid: Option<i32>) {
        self.group.store(pgid.unwrap_or(0), Ordering::SeqCst);
    }
}

impl ServerPool {
    fn slot(&self, lang: Language, root: &Path) -> Arc<Slot> {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        Arc::clone(slots.entry((lang, root.to_path_buf())).or_insert_with(|| {
            Arc::new(Slot {
                warm: tokio::sync::Mutex::new(None),
                group: AtomicI32::new(0),
            })
        }))
    }

    /// Process groups of the servers alive now.
    pub(super) fn live_groups(&self) -> Vec<i32> {
        let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        let mut groups: Vec<i32> = slots
            .values()
            .map(|s| s.group.load(Ordering::SeqCst))
            .filter(|g| *g > 0)
            .collect();
        groups.sort_unstable();
        groups
    }

    /// Shut every server down: politely when no gate is using it and `polite`, at once (its process
    /// group killed) otherwise — a gate using it then reports the language as not run.
    pub(super) async fn shutdown(&self, polite: bool) {
        let slots: Vec<Arc<Slot>> = {
            let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            slots.drain().map(|(_, s)| s).collect()
        };
        let mut goodbyes = Vec::new();
        for slot in slots {
            match slot.warm.try_lock() {
                Ok(mut held) => {
                    slot.set_group(None);
                    // Dropping a server kills its process group.
                    if let Some(warm) = held.take().filter(|_| polite) {
                        goodbyes.push(warm.server.shutdown());
                    }
                }
                Err(_) => crate::process::signal_group(
                    slot.group.swap(0, Ordering::SeqCst),
                    libc::SIGKILL,
                ),
            }
        }
        join_all(goodbyes).await;
    }
}

/// A running server and the documents it has open.
struct Warm {
    server: LspServer,
    /// The tool and options it was started with.
    identity: String,
    /// [`project_fingerprint`] when it started.
    project: String,
    documents: HashMap<PathBuf, OpenDocument>,
}

struct OpenDocument {
    version: i32,
    text_hash: u64,
}

fn text_hash(text: &str) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut hasher);
    hasher.finish()
}

/// How the server says it finished a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Completion {
    Pull,
    Tsserver,
    VersionedPublish,
}

impl Warm {
    fn completion(&self) -> Completion {
        if self.server.supports_pull_diagnostics() {
            Completion::Pull
        } else if self.server.supports_command(TSSERVER_REQUEST) {
            Completion::Tsserver
        } else {
            Completion::VersionedPublish
        }
    }

    /// Bring the server's documents in line with `documents` (open new ones, change edited ones,
    /// close those no longer in the change), then collect each file's finished diagnostics. Errors
    /// mean the server died, hung or spoke nonsense.
    async fn check(
        &mut self,
        documents: &[Document],
        deadline: Instant,
    ) -> Result<LanguageResult, String> {
        if !self.server.is_alive() {
            return Err("the warm server is no longer running".into());
        }
        let stale: Vec<PathBuf> = self
            .documents
            .keys()
            .filter(|p| !documents.iter().any(|d| &d.abs == *p))
            .cloned()
            .collect();
        for path in stale {
            self.documents.remove(&path);
            self.server.close(&path).await?;
        }
        for doc in documents {
            let hash = text_hash(&doc.text);
            match self.documents.get_mut(&doc.abs) {
                Some(open) if open.text_hash == hash => {}
                Some(open) => {
                    open.version += 1;
                    open.text_hash = hash;
                    self.server
                        .change(&doc.abs, open.version, &doc.text)
                        .await?;
                }
                None => {
                    let ext = super::extension_of(&doc.rel);
                    self.server
                        .open(&doc.abs, Language::language_id(&ext), 1, &doc.text)
                        .await?;
                    self.documents.insert(
                        doc.abs.clone(),
                        OpenDocument {
                            version: 1,
                            text_hash: hash,
                        },
                    );
                }
            }
        }
        let completion = self.completion();
        let mut diagnostics = BTreeMap::new();
        let mut unfinished = Vec::new();
        for doc in documents {
            let found = match completion {
                Completion::Pull => Ok(self.server.pull_diagnostics(&doc.abs, deadline).await?),
                Completion::Tsserver => {
                    Ok(self.server.tsserver_diagnostics(&doc.abs, deadline).await?)
                }
                Completion::VersionedPublish => {
                    let version = self.documents.get(&doc.abs).map_or(1, |d| d.version);
                    self.server
                        .published_for(&doc.abs, version, deadline)
                        .await?
                }
            };
            match found {
                Ok(d) => {
                    diagnostics.insert(doc.rel.clone(), d);
                }
                Err(u) => unfinished.push((doc.rel.clone(), u)),
            }
        }
        Ok(LanguageResult::Checked {
            diagnostics,
            unfinished,
        })
    }
}
