//! The rooms of `src/` form layers: each may use only the rooms below it. This test reads every
//! source file and fails on a `crate::<room>` path that crosses a layer upwards (or a room that is
//! not in the table), so the layering holds the way a workspace of crates would make it hold.

use std::collections::BTreeMap;
use std::path::Path;

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

fn files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let p = entry.path();
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn every_room_uses_only_the_rooms_below_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let table = allowed();
    let mut all = Vec::new();
    files(&src, &mut all);
    let path = regex::Regex::new(r"crate::([a-z_]+)").unwrap();
    let mut violations = Vec::new();
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
                "{}: room `{room}` is not in the layer table",
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
                        "{}:{}: `{room}` uses `{used}`",
                        rel.display(),
                        n + 1
                    ));
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
