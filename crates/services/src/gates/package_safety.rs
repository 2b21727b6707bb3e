//! Package-safety gate: dependencies the change adds or changes in a package.json, checked against the
//! registry's publish date of the version that will actually be installed — the lockfile's, else the
//! highest version satisfying the range — not the package's first release. Versions younger than
//! `gates.minPackageAgeDays` are flagged, and so is every dependency whose age cannot be established.
//! Flagged packages warn (the auditor weighs them) unless `gates.packageSafetyBlocking` is set.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures_util::{StreamExt, stream};
use nodejs_semver::{Range, Version};
use serde_json::Value;

use super::changes::content_at_base;
use super::{Finding, FindingSeverity, FnGate, GateContext, GateOutcome, GateStatus};
use crate::config::GateKind;

/// Manifest sections whose packages get installed.
const SECTIONS: [&str; 4] = [
    "dependencies",
    "devDependencies",
    "optionalDependencies",
    "peerDependencies",
];
/// Registry lookups in flight at once.
const CONCURRENT_LOOKUPS: usize = 8;

pub(crate) static GATE: FnGate = FnGate {
    kind: GateKind::PackageSafety,
    run: |_hook, ctx| Box::pin(run(ctx)),
};

/// A dependency the change added or whose spec it changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DependencyChange {
    /// The manifest, relative to the root.
    pub(crate) manifest: String,
    pub(crate) section: String,
    /// The name used in the manifest.
    pub name: String,
    /// The spec as written now (`^1.2.0`, `npm:other@^2`, `github:a/b`…).
    pub(crate) spec: String,
    /// The spec before the change (`None`: added).
    pub(crate) previous: Option<String>,
}

/// Dependencies added or changed in every package.json of the change.
pub(crate) fn dependency_changes(ctx: &GateContext) -> Result<Vec<DependencyChange>, String> {
    let mut out = Vec::new();
    for f in ctx.changes.existing() {
        if f.path != "package.json" && !f.path.ends_with("/package.json") {
            continue;
        }
        let text = ctx
            .read_text(&f.path)
            .ok_or_else(|| format!("{} could not be read", f.path))?;
        let now: Value = serde_json::from_str(&text)
            .map_err(|e| format!("{} is not valid JSON: {e}", f.path))?;
        let before: Value = content_at_base(&ctx.dir, &ctx.changes, &f.path)
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or(Value::Null);
        for section in SECTIONS {
            let Some(deps) = now.get(section).and_then(Value::as_object) else {
                continue;
            };
            for (name, spec) in deps {
                let spec = spec.as_str().unwrap_or_default().to_string();
                let previous = before
                    .get(section)
                    .and_then(|s| s.get(name))
                    .and_then(Value::as_str)
                    .map(str::to_string);
                if previous.as_deref() != Some(spec.as_str()) {
                    out.push(DependencyChange {
                        manifest: f.path.clone(),
                        section: section.to_string(),
                        name: name.clone(),
                        spec,
                        previous,
                    });
                }
            }
        }
    }
    Ok(out)
}

/// What a dependency resolves to in the registry.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Verdict {
    /// Old enough.
    Ok { version: String, age_days: i64 },
    /// Published too recently.
    Young {
        version: String,
        age_days: i64,
        published: String,
    },
    /// Its age could not be established.
    Unknown(String),
}

async fn run(ctx: &GateContext) -> GateOutcome {
    let touched = ctx
        .changes
        .existing()
        .any(|f| f.path == "package.json" || f.path.ends_with("/package.json"));
    if !touched {
        return GateOutcome::not_applicable("no package.json in the change");
    }
    let changes = match dependency_changes(ctx) {
        Ok(c) => c,
        Err(e) => return GateOutcome::not_run(e),
    };
    if changes.is_empty() {
        return GateOutcome::pass("package.json changed, but no dependency was added or changed");
    }
    let timeout = Duration::from_secs(ctx.settings.tool_timeout_sec.clamp(1, 60));
    // At most CONCURRENT_LOOKUPS at once, answers in order. (Collected first: a lazy `map` closure
    // held across the await would make the gate's future lose its `Send` proof.)
    let lookups: Vec<_> = changes.iter().map(|c| check(ctx, c, timeout)).collect();
    let verdicts: Vec<Verdict> = stream::iter(lookups)
        .buffered(CONCURRENT_LOOKUPS)
        .collect()
        .await;

    let min_days = ctx.settings.min_package_age_days;
    let blocking = ctx.settings.package_safety_blocking;
    let severity = if blocking {
        FindingSeverity::Error
    } else {
        FindingSeverity::Warning
    };
    let mut findings = Vec::new();
    let mut checked = Vec::new();
    for (change, verdict) in changes.iter().zip(verdicts) {
        let line = key_line(ctx, &change.manifest, &change.name);
        let at = |rule: &str, message: String| Finding {
            file: Some(change.manifest.clone()),
            line,
            rule: rule.into(),
            message,
            severity,
        };
        match verdict {
            Verdict::Ok { version, age_days } => {
                checked.push(format!("{}@{version} ({age_days} d)", change.name));
            }
            Verdict::Young {
                version,
                age_days,
                published,
            } => findings.push(at(
                "young-package",
                format!(
                    "`{}@{version}` (spec `{}`) was published {age_days} day{} ago ({published}); versions younger than {min_days} days are flagged",
                    change.name,
                    change.spec,
                    if age_days == 1 { "" } else { "s" }
                ),
            )),
            Verdict::Unknown(why) => findings.push(at(
                "package-age-unknown",
                format!(
                    "`{}` (spec `{}`): publish date unknown — {why}",
                    change.name, change.spec
                ),
            )),
        }
    }
    let n = changes.len();
    if findings.is_empty() {
        return GateOutcome::pass(format!(
            "{n} added/changed dependenc{} checked, all at least {min_days} days old: {}",
            if n == 1 { "y" } else { "ies" },
            checked.join(", ")
        ));
    }
    let status = flagged_status(blocking);
    let flagged = findings.len();
    GateOutcome::new(
        status,
        findings,
        format!(
            "{flagged} of {n} added/changed dependencies flagged (younger than {min_days} days or unverifiable){}",
            if blocking {
                "; blocking (gates.packageSafetyBlocking)"
            } else {
                "; for the auditor"
            }
        ),
    )
}

/// How flagged packages end the gate: they block with `gates.packageSafetyBlocking`, else they warn.
pub fn flagged_status(blocking: bool) -> GateStatus {
    if blocking {
        GateStatus::Fail
    } else {
        GateStatus::Warn
    }
}

/// The 1-based line of `"name":` in the manifest.
fn key_line(ctx: &GateContext, manifest: &str, name: &str) -> Option<u32> {
    let text = ctx.read_text(manifest)?;
    let needle = format!("\"{name}\"");
    text.lines()
        .position(|l| {
            l.find(&needle)
                .is_some_and(|i| l[i + needle.len()..].trim_start().starts_with(':'))
        })
        .and_then(|i| u32::try_from(i + 1).ok())
}

async fn check(ctx: &GateContext, change: &DependencyChange, timeout: Duration) -> Verdict {
    // `npm:real-name@range` installs another package under this name.
    let (package, spec) = match change.spec.strip_prefix("npm:") {
        Some(alias) => match alias.rfind('@').filter(|&i| i > 0) {
            Some(i) => (alias[..i].to_string(), alias[i + 1..].to_string()),
            None => (alias.to_string(), "*".to_string()),
        },
        None => (change.name.clone(), change.spec.clone()),
    };
    if is_non_registry(&spec) {
        return Verdict::Unknown(format!(
            "`{spec}` is not a registry version, so its publish date cannot be checked"
        ));
    }
    let locked = locked_version(ctx, &change.manifest, &change.name);
    let url = format!(
        "{}/{}",
        ctx.settings.npm_registry.trim_end_matches('/'),
        encode_name(&package)
    );
    let doc = match super::http::get_json(&url, timeout).await {
        Ok(d) => d,
        Err(e) => return Verdict::Unknown(format!("registry lookup failed: {e}")),
    };
    let version = match resolve_version(&doc, &spec, locked.as_deref()) {
        Ok(v) => v,
        Err(e) => return Verdict::Unknown(e),
    };
    let Some(published) = doc
        .get("time")
        .and_then(|t| t.get(&version))
        .and_then(Value::as_str)
    else {
        return Verdict::Unknown(format!(
            "the registry lists no publish time for {package}@{version}"
        ));
    };
    let Ok(when) = DateTime::parse_from_rfc3339(published) else {
        return Verdict::Unknown(format!(
            "the registry's publish time `{published}` is not a date"
        ));
    };
    let age_days = (Utc::now() - when.with_timezone(&Utc)).num_days();
    let min = i64::try_from(ctx.settings.min_package_age_days).unwrap_or(i64::MAX);
    if age_days < min {
        Verdict::Young {
            version,
            age_days,
            published: when.format("%Y-%m-%d").to_string(),
        }
    } else {
        Verdict::Ok { version, age_days }
    }
}

fn is_non_registry(spec: &str) -> bool {
    let s = spec.trim();
    ["file:", "link:", "git", "github:", "gitlab:", "bitbucket:", "http:", "https:", "workspace:", "portal:", "patch:"]
        .iter()
        .any(|p| s.starts_with(p))
        // `owner/repo` is a GitHub shorthand.
        || (s.contains('/') && !s.starts_with('@'))
}

/// `@scope/name` → `@scope%2fname`.
pub(crate) fn encode_name(name: &str) -> String {
    name.replace('/', "%2f")
}

/// The version the project's package-lock.json pins for `name` (v2/v3 `packages`, v1 `dependencies`).
fn locked_version(ctx: &GateContext, manifest: &str, name: &str) -> Option<String> {
    let dir = manifest
        .strip_suffix("package.json")
        .unwrap_or_default()
        .trim_end_matches('/');
    let mut candidates = Vec::new();
    if !dir.is_empty() {
        candidates.push((format!("{dir}/package-lock.json"), String::new()));
    }
    // A workspace's dependencies live in the root lockfile, nested or hoisted.
    candidates.push((
        "package-lock.json".to_string(),
        if dir.is_empty() {
            String::new()
        } else {
            format!("{dir}/")
        },
    ));
    for (lockfile, prefix) in candidates {
        // Lockfiles outgrow the text-file limit of other gates: read them whole.
        let path = ctx.dir.join(&lockfile);
        let Some(text) = ctx
            .shows(&path)
            .then(|| std::fs::read_to_string(&path).ok())
            .flatten()
        else {
            continue;
        };
        let Ok(lock) = serde_json::from_str::<Value>(&text) else {
            continue;
        };
        let packages = lock.get("packages");
        for key in [
            format!("{prefix}node_modules/{name}"),
            format!("node_modules/{name}"),
        ] {
            if let Some(v) = packages
                .and_then(|p| p.get(&key))
                .and_then(|p| p.get("version"))
                .and_then(Value::as_str)
            {
                return Some(v.to_string());
            }
        }
        if let Some(v) = lock
            .get("dependencies")
            .and_then(|d| d.get(name))
            .and_then(|d| d.get("version"))
            .and_then(Value::as_str)
        {
            return Some(v.to_string());
        }
    }
    None
}

/// The version npm installs: the locked one when it satisfies the spec; else a dist-tag's target;
/// else `latest` when it satisfies the range; else the highest satisfying version.
fn resolve_version(doc: &Value, spec: &str, locked: Option<&str>) -> Result<String, String> {
    let tags: BTreeMap<String, String> = doc
        .get("dist-tags")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                .collect()
        })
        .unwrap_or_default();
    let spec = spec.trim();
    // A dist-tag (`latest`, `next`).
    if let Some(target) = tags.get(spec) {
        return Ok(locked.unwrap_or(target).to_string());
    }
    let range =
        Range::parse(spec).map_err(|e| format!("unsupported version spec `{spec}`: {e}"))?;
    if let Some(v) = locked.and_then(|l| Version::parse(l).ok()) {
        if range.satisfies(&v) {
            return Ok(v.to_string());
        }
    }
    let versions: Vec<Version> = doc
        .get("versions")
        .and_then(Value::as_object)
        .map(|m| m.keys().filter_map(|k| Version::parse(k).ok()).collect())
        .unwrap_or_default();
    if versions.is_empty() {
        return Err("the registry lists no versions".into());
    }
    if let Some(latest) = tags.get("latest").and_then(|l| Version::parse(l).ok()) {
        if range.satisfies(&latest) && versions.contains(&latest) {
            return Ok(latest.to_string());
        }
    }
    range
        .max_satisfying(&versions)
        .map(|v| v.to_string())
        .ok_or_else(|| format!("no published version satisfies `{spec}`"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc() -> Value {
        json!({
            "dist-tags": {"latest": "1.3.0", "next": "2.0.0-beta.1"},
            "versions": {"1.0.0": {}, "1.3.0": {}, "1.4.0": {}, "2.0.0-beta.1": {}},
            "time": {"created": "2020-01-01T00:00:00Z"}
        })
    }

    #[test]
    fn resolution_prefers_lock_then_tags_then_latest_then_highest() {
        assert_eq!(
            resolve_version(&doc(), "^1.0.0", Some("1.0.0")).unwrap(),
            "1.0.0"
        );
        // A lock entry outside the range (stale) is ignored.
        assert_eq!(
            resolve_version(&doc(), "^1.0.0", Some("0.9.0")).unwrap(),
            "1.3.0"
        );
        assert_eq!(
            resolve_version(&doc(), "next", None).unwrap(),
            "2.0.0-beta.1"
        );
        assert_eq!(resolve_version(&doc(), "^1.0.0", None).unwrap(), "1.3.0");
        assert_eq!(
            resolve_version(&doc(), ">=1.3.1 <2", None).unwrap(),
            "1.4.0"
        );
        assert_eq!(resolve_version(&doc(), "1.0.0", None).unwrap(), "1.0.0");
        assert!(resolve_version(&doc(), "^3", None).is_err());
        assert!(resolve_version(&doc(), "canary", None).is_err());
    }

    #[test]
    fn non_registry_specs() {
        for s in [
            "file:../x",
            "github:a/b",
            "a/b",
            "git+https://x",
            "workspace:*",
            "https://x/y.tgz",
        ] {
            assert!(is_non_registry(s), "{s}");
        }
        for s in ["^1.0.0", "latest", "1.x"] {
            assert!(!is_non_registry(s), "{s}");
        }
        assert_eq!(encode_name("@types/node"), "@types%2fnode");
    }
}

/// The npm range cases the gate relies on, checked against the crate (and, when they were written,
/// against node's own `semver` package).
#[cfg(test)]
mod npm_ranges {
    use nodejs_semver::{Range, Version};

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    fn sat(range: &str, version: &str) -> bool {
        Range::parse(range).unwrap().satisfies(&v(version))
    }

    #[test]
    fn version_order() {
        assert!(v("1.0.0-alpha") < v("1.0.0-alpha.1"));
        assert!(v("1.0.0-alpha.1") < v("1.0.0-alpha.beta"));
        assert!(v("1.0.0-beta.2") < v("1.0.0-beta.11"));
        assert!(v("1.0.0-rc.1") < v("1.0.0"));
        assert!(v("1.10.0") > v("1.9.9"));
        assert_eq!(v("v1.2.3+build.5"), v("1.2.3"));
        assert!(Version::parse("1.2").is_err());
    }

    #[test]
    fn npm_range_table() {
        let table: &[(&str, &str, bool)] = &[
            ("1.2.3", "1.2.3", true),
            ("1.2.3", "1.2.4", false),
            ("=1.2.3", "1.2.3", true),
            ("^1.2.3", "1.9.0", true),
            ("^1.2.3", "2.0.0", false),
            ("^1.2.3", "1.2.2", false),
            ("^0.2.3", "0.2.9", true),
            ("^0.2.3", "0.3.0", false),
            ("^0.0.3", "0.0.3", true),
            ("^0.0.3", "0.0.4", false),
            ("^1.2", "1.5.0", true),
            ("^0.0", "0.0.9", true),
            ("^0.0", "0.1.0", false),
            ("^1.x", "1.0.0", true),
            ("~1.2.3", "1.2.9", true),
            ("~1.2.3", "1.3.0", false),
            ("~1.2", "1.2.0", true),
            ("~1", "1.9.9", true),
            ("~1", "2.0.0", false),
            ("1.x", "1.4.0", true),
            ("1.2.x", "1.3.0", false),
            ("1", "1.0.1", true),
            ("*", "3.0.0", true),
            ("", "0.0.1", true),
            (">=1.2.3", "1.2.3", true),
            (">=1.2.3", "1.2.2", false),
            (">1.2.3", "1.2.3", false),
            (">1.2", "1.2.9", false),
            (">1.2", "1.3.0", true),
            ("<1.2.3", "1.2.2", true),
            ("<1.2", "1.1.9", true),
            ("<1.2", "1.2.0", false),
            ("<=1.2", "1.2.9", true),
            ("<=1.2", "1.3.0", false),
            (">= 1.0.0 < 2", "1.5.0", true),
            (">=1.0.0 <2.0.0", "2.0.0", false),
            ("1.2.3 - 2.3.4", "2.3.4", true),
            ("1.2.3 - 2.3.4", "2.3.5", false),
            ("1.2 - 2.3", "2.3.9", true),
            ("1.2 - 2.3", "2.4.0", false),
            ("1.2.3 - 2", "2.9.9", true),
            ("^1.0.0 || ^3.0.0", "3.1.0", true),
            ("^1.0.0 || ^3.0.0", "2.1.0", false),
            // Prereleases only where the range names one of the same release.
            ("^1.2.3", "1.3.0-beta.1", false),
            ("^1.2.3-beta.1", "1.2.3-beta.2", true),
            ("^1.2.3-beta.1", "1.2.4-beta.1", false),
            ("*", "1.0.0-rc.1", false),
        ];
        for (range, version, expected) in table {
            assert_eq!(sat(range, version), *expected, "{range} ∋ {version}");
        }
    }

    #[test]
    fn specs_that_are_not_ranges_are_refused() {
        for bad in [
            "latest",
            "next",
            "file:../x",
            "github:a/b",
            "workspace:*",
            "^",
            ">=abc",
        ] {
            assert!(Range::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn max_satisfying_picks_the_highest_release() {
        let versions: Vec<Version> = ["1.0.0", "1.2.0", "1.10.1", "2.0.0", "1.11.0-beta.1"]
            .iter()
            .map(|s| v(s))
            .collect();
        let r = Range::parse("^1.0.0").unwrap();
        assert_eq!(r.max_satisfying(&versions), Some(&v("1.10.1")));
        assert_eq!(Range::parse("^3").unwrap().max_satisfying(&versions), None);
    }

    proptest::proptest! {
        #[test]
        fn parsing_never_panics(s in "\\PC*") {
            if let Ok(r) = Range::parse(&s) {
                let _ = r.satisfies(&Version::from((1, 2, 3)));
            }
            let _ = Version::parse(&s);
        }
    }
}
