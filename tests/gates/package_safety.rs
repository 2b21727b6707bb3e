//! Package safety against a local stub of the npm registry: the publish date of the version that will
//! be installed is what counts; lookups that fail are flagged as unknown.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use chrono::{Duration, Utc};
use serde_json::{Value, json};
use supervisor::config::GateKind;
use supervisor::gates::{GateReport, GateStatus, default_hook, run_gate};

use crate::common::{Fixture, run_bounded};

#[derive(Clone, Default)]
struct Registry {
    docs: Arc<HashMap<String, Value>>,
    requests: Arc<Mutex<Vec<String>>>,
}

fn days_ago(d: i64) -> String {
    (Utc::now() - Duration::days(d)).to_rfc3339()
}

/// A packument: `versions` maps version → age in days; `latest` is the dist-tag.
fn packument(name: &str, versions: &[(&str, i64)], latest: &str) -> Value {
    let mut time = serde_json::Map::new();
    time.insert("created".into(), json!(days_ago(2000)));
    let mut vs = serde_json::Map::new();
    for (v, age) in versions {
        time.insert((*v).into(), json!(days_ago(*age)));
        vs.insert((*v).into(), json!({"name": name, "version": v}));
    }
    json!({"name": name, "dist-tags": {"latest": latest}, "versions": vs, "time": time})
}

fn registry() -> Registry {
    let mut docs = HashMap::new();
    docs.insert(
        "/left-pad".to_string(),
        packument("left-pad", &[("1.0.0", 900), ("1.2.0", 3)], "1.2.0"),
    );
    docs.insert(
        "/@acme%2fwidgets".to_string(),
        packument("@acme/widgets", &[("2.0.0", 400), ("2.1.0", 100)], "2.1.0"),
    );
    docs.insert(
        "/old-lib".to_string(),
        packument("old-lib", &[("3.0.0", 1000)], "3.0.0"),
    );
    Registry {
        docs: Arc::new(docs),
        requests: Arc::default(),
    }
}

async fn serve(reg: Registry) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = Router::new().fallback(move |uri: Uri| {
        let reg = reg.clone();
        async move {
            let path = uri.path().to_string();
            reg.requests.lock().unwrap().push(path.clone());
            let resp: Response = match reg.docs.get(&path) {
                Some(doc) => axum::Json(doc.clone()).into_response(),
                None => (StatusCode::NOT_FOUND, "{\"error\":\"Not found\"}").into_response(),
            };
            resp
        }
    });
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    format!("http://{addr}")
}

fn manifest(deps: &[(&str, &str)]) -> String {
    let body = deps
        .iter()
        .map(|(n, v)| format!("    \"{n}\": \"{v}\""))
        .collect::<Vec<_>>()
        .join(",\n");
    format!(
        "{{\n  \"name\": \"gate-fixture\",\n  \"version\": \"1.0.0\",\n  \"private\": true,\n  \"dependencies\": {{\n{body}\n  }}\n}}\n"
    )
}

/// Run the gate on `f` against a fresh stub registry; returns the report and the paths requested.
fn check(f: &Fixture, blocking: bool) -> (GateReport, Vec<String>) {
    let reg = registry();
    let requests = Arc::clone(&reg.requests);
    let mut ctx = f.context();
    ctx.settings.package_safety_blocking = blocking;
    let report = run_bounded(30, async move {
        ctx.settings.npm_registry = serve(reg).await;
        run_gate(&default_hook(GateKind::PackageSafety), &ctx).await
    });
    let requested = requests.lock().unwrap().clone();
    (report, requested)
}

fn base_with(deps: &[(&str, &str)]) -> Fixture {
    let f = Fixture::new("ts-base");
    f.write("package.json", &manifest(deps));
    f.commit_all("Dependencies on main");
    // Commit on main, not on the feature branch: move both to this commit.
    {
        let head = f.repo.head().unwrap().peel_to_commit().unwrap();
        f.repo.branch("main", &head, true).unwrap();
    }
    f
}

#[test]
fn the_installed_version_is_young_even_though_the_package_is_old() {
    let f = base_with(&[("old-lib", "^3.0.0")]);
    f.write(
        "package.json",
        &manifest(&[("old-lib", "^3.0.0"), ("left-pad", "^1.0.0")]),
    );
    let (r, requested) = check(&f, false);
    assert_eq!(r.status, GateStatus::Warn, "{r:#?}");
    assert_eq!(r.findings.len(), 1);
    let finding = &r.findings[0];
    assert_eq!(finding.rule, "young-package");
    assert_eq!(finding.location(), "package.json:7");
    assert!(
        finding.message.contains("`left-pad@1.2.0`"),
        "{}",
        finding.message
    );
    assert!(
        finding.message.contains("published 3 days ago"),
        "{}",
        finding.message
    );
    // The unchanged dependency is not looked up.
    assert_eq!(requested, vec!["/left-pad"]);
    assert!(!r.blocks());
}

#[test]
fn the_lockfile_pins_the_version_that_counts() {
    let f = base_with(&[]);
    f.write("package.json", &manifest(&[("left-pad", "^1.0.0")]));
    f.write(
        "package-lock.json",
        r#"{"lockfileVersion": 3, "packages": {"": {}, "node_modules/left-pad": {"version": "1.0.0"}}}"#,
    );
    let (r, _) = check(&f, false);
    assert_eq!(r.status, GateStatus::Pass, "{r:#?}");
    assert!(
        r.summary.contains("left-pad@1.0.0 (900 d)"),
        "{}",
        r.summary
    );
}

#[test]
fn scoped_names_are_encoded_and_exact_versions_resolved() {
    let f = base_with(&[]);
    f.write("package.json", &manifest(&[("@acme/widgets", "2.0.0")]));
    let (r, requested) = check(&f, false);
    assert_eq!(r.status, GateStatus::Pass, "{r:#?}");
    assert_eq!(requested, vec!["/@acme%2fwidgets"]);
    assert!(r.summary.contains("@acme/widgets@2.0.0"), "{}", r.summary);
}

#[test]
fn failed_lookups_and_unverifiable_specs_are_flagged_unknown() {
    let f = base_with(&[]);
    f.write(
        "package.json",
        &manifest(&[
            ("no-such-package", "^1.0.0"),
            ("forked", "github:someone/forked"),
            ("left-pad", "^9.0.0"),
        ]),
    );
    let (r, _) = check(&f, false);
    assert_eq!(r.status, GateStatus::Warn, "{r:#?}");
    let unknown: Vec<&str> = r
        .findings
        .iter()
        .filter(|x| x.rule == "package-age-unknown")
        .map(|x| x.message.as_str())
        .collect();
    assert_eq!(unknown.len(), 3, "{unknown:?}");
    assert!(
        unknown
            .iter()
            .any(|m| m.contains("no-such-package") && m.contains("HTTP 404"))
    );
    assert!(
        unknown
            .iter()
            .any(|m| m.contains("forked") && m.contains("not a registry version"))
    );
    assert!(
        unknown.iter().any(
            |m| m.contains("left-pad") && m.contains("no published version satisfies `^9.0.0`")
        )
    );
}

#[test]
fn an_unreachable_registry_is_unknown_not_safe() {
    let f = base_with(&[]);
    f.write("package.json", &manifest(&[("left-pad", "^1.0.0")]));
    let mut ctx = f.context();
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    ctx.settings.npm_registry = format!("http://127.0.0.1:{port}");
    let r = run_bounded(30, async {
        run_gate(&default_hook(GateKind::PackageSafety), &ctx).await
    });
    assert_eq!(r.status, GateStatus::Warn, "{r:#?}");
    assert_eq!(r.findings[0].rule, "package-age-unknown");
    assert!(
        r.findings[0].message.contains("could not be reached"),
        "{:?}",
        r.findings
    );
}

#[test]
fn blocking_setting_turns_flags_into_a_failure() {
    let f = base_with(&[]);
    f.write("package.json", &manifest(&[("left-pad", "^1.0.0")]));
    let (r, _) = check(&f, true);
    assert_eq!(r.status, GateStatus::Fail, "{r:#?}");
    assert!(r.blocks());
    assert!(r.summary.contains("blocking (gates.packageSafetyBlocking)"));
}

#[test]
fn no_manifest_change_is_not_applicable() {
    let f = Fixture::new("ts-base");
    f.apply("ts-clean");
    let (r, requested) = check(&f, false);
    assert_eq!(r.status, GateStatus::NotApplicable);
    assert!(requested.is_empty());
}
