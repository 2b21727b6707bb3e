//! Dead-code gate: `knip --reporter json` over the whole project, findings kept for the changed files.
//!
//! Unused exports, files and dependencies, unresolved imports… introduced by the change fail the gate;
//! the pipeline then undoes its last commit in the worktree so the developer's fix lands cleanly.
//!
//! Within a gate session knip keeps its own cache (per worktree and dependency state, in the session's
//! scratch directory), so the next round re-analyses only the files that changed. knip's analysis
//! is whole-project (an export is unused only if no file anywhere imports it), so that is all it
//! allows: the findings are those of a full run.

use serde_json::Value;

use super::package_safety::dependency_changes;
use super::tool::{self, KNIP};
use super::{Finding, FindingSeverity, FnGate, GateContext, GateOutcome, GateStatus};
use crate::config::GateKind;

/// Files whose change makes knip's answer relevant.
const JS_EXTENSIONS: [&str; 12] = [
    "ts", "tsx", "mts", "cts", "js", "jsx", "mjs", "cjs", "vue", "svelte", "astro", "json",
];

pub(crate) static GATE: FnGate = FnGate {
    kind: GateKind::DeadCode,
    run: |_hook, ctx| Box::pin(run(ctx)),
};

/// knip's issue categories and the rule each becomes.
fn rule_for(category: &str) -> String {
    match category {
        "files" => "unused-file".into(),
        "dependencies" => "unused-dependency".into(),
        "devDependencies" => "unused-dev-dependency".into(),
        "optionalPeerDependencies" => "unused-optional-peer-dependency".into(),
        "unlisted" => "unlisted-dependency".into(),
        "binaries" => "unlisted-binary".into(),
        "unresolved" => "unresolved-import".into(),
        "exports" => "unused-export".into(),
        "nsExports" => "unused-namespace-export".into(),
        "types" => "unused-type".into(),
        "nsTypes" => "unused-namespace-type".into(),
        "enumMembers" => "unused-enum-member".into(),
        "classMembers" => "unused-class-member".into(),
        "namespaceMembers" => "unused-namespace-member".into(),
        "duplicates" => "duplicate-export".into(),
        "catalog" => "unused-catalog-entry".into(),
        other => format!("knip-{other}"),
    }
}

fn describe(rule: &str, name: &str) -> String {
    match rule {
        "unused-file" => format!("`{name}` is not imported anywhere"),
        "duplicate-export" => format!("exported more than once: {name}"),
        _ => format!("{}: `{name}`", rule.replace('-', " ")),
    }
}

/// One knip finding before filtering: (file, line, rule, name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KnipIssue {
    pub(crate) file: String,
    pub(crate) line: Option<u32>,
    pub(crate) rule: String,
    pub name: String,
}

/// Parse knip 6's JSON report: `{"issues": [{"file", "<category>": [{"name","line","col"}…]…}]}`
/// (the `duplicates` category holds arrays of such objects). Unknown shapes are errors.
pub(crate) fn parse_knip_report(text: &str) -> Result<Vec<KnipIssue>, String> {
    let doc: Value = serde_json::from_str(text.trim())
        .map_err(|e| format!("knip printed something that is not its JSON report ({e})"))?;
    let issues = doc
        .get("issues")
        .and_then(Value::as_array)
        .ok_or("knip's report has no \"issues\" list")?;
    let mut out = Vec::new();
    for issue in issues {
        let file = issue
            .get("file")
            .and_then(Value::as_str)
            .ok_or("a knip issue has no \"file\"")?
            .trim_start_matches("./")
            .to_string();
        let Some(map) = issue.as_object() else {
            continue;
        };
        for (category, items) in map {
            let Some(items) = items.as_array() else {
                continue;
            };
            let rule = rule_for(category);
            for item in items {
                let members: Vec<&Value> = match item {
                    Value::Array(group) => group.iter().collect(),
                    other => vec![other],
                };
                let names: Vec<&str> = members
                    .iter()
                    .filter_map(|m| m.get("name").and_then(Value::as_str))
                    .collect();
                if names.is_empty() {
                    continue;
                }
                let line = members
                    .iter()
                    .find_map(|m| m.get("line").and_then(Value::as_u64))
                    .and_then(|l| u32::try_from(l).ok());
                out.push(KnipIssue {
                    file: file.clone(),
                    line,
                    rule: rule.clone(),
                    name: names.join(", "),
                });
            }
        }
    }
    Ok(out)
}

async fn run(ctx: &GateContext) -> GateOutcome {
    if !ctx.dir.join("package.json").is_file() {
        return GateOutcome::not_applicable(
            "no package.json at the repository root: knip analyses JavaScript/TypeScript projects",
        );
    }
    let relevant = ctx
        .changes
        .files
        .iter()
        .any(|f| JS_EXTENSIONS.contains(&f.extension().as_str()));
    if !relevant {
        return GateOutcome::not_applicable(
            "no JavaScript/TypeScript files or package manifests in the change",
        );
    }
    let knip = match tool::locate(KNIP, ctx).await {
        Ok(t) => t,
        Err(reason) => return GateOutcome::not_run(reason),
    };
    let mut args: Vec<std::ffi::OsString> =
        ["--reporter", "json", "--no-progress", "--no-config-hints"]
            .iter()
            .map(Into::into)
            .collect();
    let cache = cache_dir(ctx);
    if let Some(cache) = &cache {
        args.push("--cache".into());
        args.push("--cache-location".into());
        args.push(cache.clone().into_os_string());
    }
    let cmd = match knip.command(
        &ctx.dir,
        args,
        &cache.as_deref().into_iter().collect::<Vec<_>>(),
    ) {
        Ok(cmd) => cmd,
        Err(reason) => return GateOutcome::not_run(reason),
    };
    let out = match tool::run_captured(cmd, tool::tool_timeout(ctx), ctx.session.cancel()).await {
        Ok(out) => out,
        Err(e) => return GateOutcome::not_run(e.reason("knip")),
    };
    // 0: no issues, 1: issues found; anything else (2: bad config, crash) is not an answer.
    if !matches!(out.status.code(), Some(0 | 1)) {
        return GateOutcome::not_run(format!(
            "knip ended with {}: {}",
            out.status_text(),
            out.complaint()
        ));
    }
    let issues = match parse_knip_report(&out.stdout) {
        Ok(i) => i,
        Err(e) => {
            return GateOutcome::not_run(format!("{e}; {}", out.complaint()));
        }
    };
    if out.status.code() == Some(1) && issues.is_empty() {
        return GateOutcome::not_run(
            "knip reported failure but listed no issues: its report could not be interpreted",
        );
    }
    let total = issues.len();

    // Dependency issues in package.json count when the change added or changed that dependency.
    let changed_deps: Vec<String> = dependency_changes(ctx)
        .map(|d| d.into_iter().map(|c| c.name).collect())
        .unwrap_or_default();
    let findings: Vec<Finding> = issues
        .into_iter()
        .filter(|i| {
            if i.file.ends_with("package.json") && i.rule.contains("dependency") {
                ctx.changes.touches(&i.file)
                    && i.name
                        .split(", ")
                        .any(|n| changed_deps.iter().any(|d| d == n))
            } else {
                ctx.changes.touches(&i.file)
            }
        })
        .map(|i| Finding {
            message: describe(&i.rule, &i.name),
            file: Some(i.file),
            line: i.line,
            rule: i.rule,
            severity: FindingSeverity::Error,
        })
        .collect();
    if findings.is_empty() {
        return GateOutcome::pass(format!(
            "no unused code in the changed files ({total} issue{} elsewhere in the project)",
            if total == 1 { "" } else { "s" }
        ));
    }
    let n = findings.len();
    GateOutcome::new(
        GateStatus::Fail,
        findings,
        format!(
            "{n} unused export{}/file/dependency finding{} in the changed files; the pipeline undoes its last commit so the fix lands cleanly",
            if n == 1 { "" } else { "s" },
            if n == 1 { "" } else { "s" }
        ),
    )
}

/// knip's cache for this worktree and dependency state, in the session's scratch directory. A
/// change of manifests, lockfiles or installed dependencies gets a fresh cache: knip keys cached files
/// by their own size and time only.
fn cache_dir(ctx: &GateContext) -> Option<std::path::PathBuf> {
    let mut key = format!("{}\n", ctx.dir.display());
    for name in [
        "package.json",
        "package-lock.json",
        "npm-shrinkwrap.json",
        "yarn.lock",
        "pnpm-lock.yaml",
    ] {
        if let Ok(bytes) = std::fs::read(ctx.dir.join(name)) {
            key.push_str(&format!(
                "{name} {}\n",
                git2::Oid::hash_object(git2::ObjectType::Blob, &bytes)
                    .map(|o| o.to_string())
                    .unwrap_or_default()
            ));
        }
    }
    for f in &ctx.changes.files {
        if f.path.ends_with("package.json")
            || f.path.starts_with("knip")
            || f.path.contains("/knip")
            || f.path.starts_with(".knip")
        {
            let bytes = std::fs::read(ctx.dir.join(&f.path)).unwrap_or_default();
            key.push_str(&format!(
                "{} {}\n",
                f.path,
                git2::Oid::hash_object(git2::ObjectType::Blob, &bytes)
                    .map(|o| o.to_string())
                    .unwrap_or_default()
            ));
        }
    }
    if let Ok(meta) = std::fs::metadata(ctx.dir.join("node_modules/.package-lock.json")) {
        key.push_str(&format!("deps {} {:?}\n", meta.len(), meta.modified().ok()));
    }
    let id = git2::Oid::hash_object(git2::ObjectType::Blob, key.as_bytes())
        .ok()?
        .to_string();
    // Made now: in the sandbox it is bound in, the one place knip may write.
    let made = ctx.session.scratch_dir("knip").and_then(|dir| {
        let cache = dir.join(&id[..16]);
        std::fs::create_dir_all(&cache).map(|()| cache)
    });
    match made {
        Ok(cache) => Some(cache),
        Err(e) => {
            tracing::warn!(error = %e, "no scratch directory for knip's cache; analysing cold");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_knip_six() {
        let text = r#"{"issues":[
          {"file":"src/math.ts","dependencies":[],"exports":[{"name":"unusedHelper","line":5,"col":17,"pos":87}],"files":[],"duplicates":[[{"name":"a","line":1},{"name":"b","line":2}]]},
          {"file":"src/orphan.ts","files":[{"name":"src/orphan.ts"}],"exports":[]},
          {"file":"package.json","dependencies":[{"name":"left-pad"}]}
        ]}"#;
        let issues = parse_knip_report(text).unwrap();
        assert_eq!(issues.len(), 4);
        assert!(issues.contains(&KnipIssue {
            file: "src/math.ts".into(),
            line: Some(5),
            rule: "unused-export".into(),
            name: "unusedHelper".into()
        }));
        assert!(
            issues
                .iter()
                .any(|i| i.rule == "duplicate-export" && i.name == "a, b")
        );
        assert!(
            issues
                .iter()
                .any(|i| i.rule == "unused-file" && i.line.is_none())
        );
        assert!(
            issues
                .iter()
                .any(|i| i.rule == "unused-dependency" && i.name == "left-pad")
        );
        assert_eq!(parse_knip_report(r#"{"issues":[]}"#).unwrap(), vec![]);
    }

    proptest::proptest! {
        #[test]
        fn parser_never_panics(text in "\\PC*") {
            let _ = parse_knip_report(&text);
        }
    }

    #[test]
    fn rejects_what_is_not_a_report() {
        assert!(parse_knip_report("").is_err());
        assert!(parse_knip_report("Unable to find package.json").is_err());
        assert!(parse_knip_report(r#"{"files":[]}"#).is_err());
    }
}
