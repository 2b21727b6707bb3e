//! The rooms of `src/` form layers: each may use only the rooms below it. The workspace's crates
//! hold the rooms, and their dependencies are the layers the compiler keeps apart: this test fails
//! on a crate depending on a crate none of whose rooms its rooms may use, on a room in no crate or
//! in two, and on a `crate::<room>` path that crosses a layer upwards inside a crate (or names a
//! room that is not in the table).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Room → the rooms it may use.
fn allowed() -> BTreeMap<&'static str, Vec<&'static str>> {
    let base = ["config", "process", "tls", "evidence", "metrics"];
    let services = [
        "agent",
        "github",
        "workspace",
        "gates",
        "verify",
        "audit",
        "epic",
    ];
    let mut t: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    t.insert("config", vec![]);
    t.insert("process", vec![]);
    t.insert("tls", vec![]);
    // The process's metrics: whatever counts, counts into them.
    t.insert("metrics", vec![]);
    t.insert("evidence", vec!["config"]);
    // An epic's plan and progress: data and decisions, its agents' answers read by their protocol,
    // its limits from the settings.
    t.insert("epic", vec!["config", "agent"]);
    t.insert("agent", base.to_vec());
    t.insert("github", vec!["config", "tls", "metrics"]);
    // Token variables to keep out of setup commands.
    t.insert("workspace", [&base[..], &["agent"]].concat());
    // The agents' environment allowlist, which gate tools get too.
    t.insert("gates", [&base[..], &["agent"]].concat());
    // The oracle: its configuration (`verify.command`, `verify.report`) lives with the workflow it
    // is part of; its runners are found and run the way gate tools are (trust rules, environment
    // allowlist, process groups, stop request), all of it through `gates`.
    t.insert("verify", vec!["config", "gates", "evidence"]);
    // Findings are the agent protocol's.
    t.insert("audit", vec!["config", "agent"]);
    t.insert("events", vec!["config", "github"]);
    // The fake GitHub shares GitHub's wire constants with the client, and signs its webhooks
    // the way the receiver checks them.
    t.insert("sandbox", vec!["github", "events"]);
    // A revision reads `/supervisor revise` commands as the webhook receiver does.
    let pipeline = [&base[..], &services[..], &["events"]].concat();
    t.insert("pipeline", pipeline.clone());
    let report = [&pipeline[..], &["pipeline"]].concat();
    t.insert("report", report.clone());
    // What a run needs, checked before its first write (`doctor`, `run`'s preflight).
    t.insert("doctor", report.clone());
    let runtime = [&report[..], &["report", "doctor"]].concat();
    t.insert("runtime", runtime.clone());
    let scheduler = [&runtime[..], &["runtime", "events"]].concat();
    t.insert("scheduler", scheduler.clone());
    // The webhook receiver hands its events to the scheduler.
    let serve = [&scheduler[..], &["scheduler"]].concat();
    t.insert("serve", serve.clone());
    let top = [&serve[..], &["serve", "sandbox"]].concat();
    t.insert("demo", top.clone());
    t.insert("cli", [&top[..], &["demo"]].concat());
    // The identities every room passes the others (issue and pull request numbers, stages and
    // board columns, run ids, commits) lie below them all.
    for uses in t.values_mut() {
        uses.push("ids");
    }
    t.insert("ids", vec![]);
    t
}

/// Crate (its directory, its package) → its rooms, bottom-up.
fn crates() -> Vec<(&'static str, &'static str, &'static [&'static str])> {
    vec![
        (
            "crates/base",
            "supervisor-base",
            &["ids", "config", "process", "tls", "metrics", "evidence"],
        ),
        ("crates/github", "supervisor-github", &["github", "events"]),
        (
            "crates/services",
            "supervisor-services",
            &["agent", "workspace", "gates", "verify", "audit", "epic"],
        ),
        ("crates/sandbox", "supervisor-sandbox", &["sandbox"]),
        (
            "crates/engine",
            "supervisor-engine",
            &[
                "pipeline",
                "report",
                "doctor",
                "runtime",
                "scheduler",
                "serve",
            ],
        ),
        (".", "supervisor", &["demo", "cli"]),
    ]
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let p = entry.path();
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The workspace packages a manifest depends on (normal and dev), read from its
/// `name = { path = … }` lines.
fn path_dependencies(manifest: &str) -> BTreeSet<String> {
    let mut section = String::new();
    let mut out = BTreeSet::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line.to_string();
        } else if section.ends_with("dependencies]")
            && !section.starts_with("[workspace")
            && let Some((name, spec)) = line.split_once('=')
            && spec
                .split(['{', ','])
                .any(|kv| kv.trim().starts_with("path"))
        {
            out.insert(name.trim().to_string());
        }
    }
    out
}

#[test]
fn every_room_is_in_one_crate() {
    let table = allowed();
    let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
    for (dir, package, rooms) in crates() {
        for room in rooms {
            assert!(
                table.contains_key(room),
                "room `{room}` of {package} is not in the layer table"
            );
            if let Some(other) = seen.insert(room, package) {
                panic!("room `{room}` is in both {other} and {package}");
            }
        }
        for entry in std::fs::read_dir(root().join(dir).join("src"))
            .unwrap()
            .flatten()
        {
            let name = entry
                .file_name()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_string();
            if ["lib", "main", "snapshots"].contains(&name.as_str()) {
                continue;
            }
            assert!(
                rooms.contains(&name.as_str()),
                "{dir}/src/{name}: room `{name}` is not listed for {package} in this test's crate table"
            );
        }
    }
    for room in table.keys() {
        assert!(
            seen.contains_key(room),
            "room `{room}` of the layer table is in no crate"
        );
    }
}

#[test]
fn each_crate_depends_only_on_crates_its_rooms_may_use() {
    let table = allowed();
    let all = crates();
    let mut violations = Vec::new();
    for (dir, package, rooms) in &all {
        let manifest = std::fs::read_to_string(root().join(dir).join("Cargo.toml")).unwrap();
        for dep in path_dependencies(&manifest) {
            let Some((_, _, below)) = all.iter().find(|(_, p, _)| *p == dep) else {
                violations.push(format!(
                    "{package} depends on `{dep}`, a path crate not in the table"
                ));
                continue;
            };
            let may = rooms
                .iter()
                .any(|r| below.iter().any(|b| table[r].contains(b)));
            if !may {
                violations.push(format!(
                    "{package} depends on {dep}, whose rooms {below:?} none of its rooms {rooms:?} may use"
                ));
            }
        }
    }
    assert!(
        violations.is_empty(),
        "crate graph violations:\n{}",
        violations.join("\n")
    );
}

#[test]
fn every_room_uses_only_the_rooms_below_it() {
    let table = allowed();
    let path = regex::Regex::new(r"crate::([a-z_]+)").unwrap();
    let mut violations = Vec::new();
    for (dir, _, _) in crates() {
        let src = root().join(dir).join("src");
        let mut all = Vec::new();
        files(&src, &mut all);
        for file in all {
            let rel = file.strip_prefix(&src).unwrap();
            let first = rel
                .components()
                .next()
                .unwrap()
                .as_os_str()
                .to_string_lossy();
            let room = first.trim_end_matches(".rs").to_string();
            if ["lib", "main"].contains(&room.as_str()) {
                continue;
            }
            let Some(may) = table.get(room.as_str()) else {
                violations.push(format!(
                    "{dir}/src/{}: room `{room}` is not in the layer table",
                    rel.display()
                ));
                continue;
            };
            let text = std::fs::read_to_string(&file).unwrap();
            for (n, line) in text.lines().enumerate() {
                for c in path.captures_iter(line) {
                    let used = &c[1];
                    if used != room && !may.contains(&used) {
                        violations.push(format!(
                            "{dir}/src/{}:{}: `{room}` uses `{used}`",
                            rel.display(),
                            n + 1
                        ));
                    }
                }
            }
        }
    }
    assert!(
        violations.is_empty(),
        "layering violations:\n{}",
        violations.join("\n")
    );
}
