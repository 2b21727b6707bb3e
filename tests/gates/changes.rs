//! ChangeSet on real repositories: committed, staged, unstaged and untracked work; renames and
//! deletions; a stale local base next to origin/<base>; a base that does not exist.

use supervisor::gates::{ChangeSet, FileStatus, GateError};

use crate::common::Fixture;

fn paths(c: &ChangeSet) -> Vec<(&str, &FileStatus)> {
    c.files
        .iter()
        .map(|f| (f.path.as_str(), &f.status))
        .collect()
}

#[test]
fn committed_and_uncommitted_work_both_count() {
    let f = Fixture::new("ts-base");
    f.write("src/committed.ts", "export const a = 1;\n");
    f.commit_all("Add a (#1)");
    f.write(
        "src/untracked.ts",
        "export const b = 2;\nexport const c = 3;\n",
    );
    f.write(
        "src/math.ts",
        "export function add(a: number, b: number): number {\n  return b + a;\n}\n",
    );
    f.remove("src/orders.ts");
    let c = ChangeSet::compute(&f.dir, "main").unwrap();
    assert_eq!(
        paths(&c),
        vec![
            ("src/committed.ts", &FileStatus::Added),
            ("src/math.ts", &FileStatus::Modified),
            ("src/orders.ts", &FileStatus::Deleted),
            ("src/untracked.ts", &FileStatus::Added),
        ]
    );
    let untracked = c.get("src/untracked.ts").unwrap();
    assert_eq!((untracked.additions, untracked.deletions), (2, 0));
    let math = c.get("src/math.ts").unwrap();
    assert_eq!((math.additions, math.deletions), (1, 1));
    assert_eq!(c.get("src/orders.ts").unwrap().deletions, 16);
    assert_eq!(c.commits.len(), 1);
    assert_eq!(c.commits[0].message, "Add a (#1)");
    assert!(c.merge_base.is_some());
    assert!(c.touches("./src/math.ts"));
    assert!(
        !c.touches("src/orders.ts"),
        "deleted files are not touched files"
    );
}

#[test]
fn renames_are_detected() {
    let f = Fixture::new("ts-base");
    let text = std::fs::read_to_string(f.dir.join("src/orders.ts")).unwrap();
    f.remove("src/orders.ts");
    f.write("src/order-math.ts", &text);
    f.commit_all("Move orders (#2)");
    let c = ChangeSet::compute(&f.dir, "main").unwrap();
    assert_eq!(
        paths(&c),
        vec![(
            "src/order-math.ts",
            &FileStatus::Renamed {
                from: "src/orders.ts".into()
            }
        )]
    );
}

#[test]
fn the_newer_of_base_and_origin_base_is_used() {
    let f = Fixture::new("ts-base");
    // origin/main moved on; the feature branch starts from it; the local main is stale.
    let stale_main = f.repo.head().unwrap().peel_to_commit().unwrap().id();
    f.write("src/upstream.ts", "export const u = 1;\n");
    let upstream = f.commit_all("Upstream work");
    f.repo
        .reference("refs/remotes/origin/main", upstream, true, "fetch")
        .unwrap();
    f.write("src/feature.ts", "export const x = 1;\n");
    f.commit_all("Feature (#4)");
    assert_ne!(stale_main, upstream);

    let c = ChangeSet::compute(&f.dir, "main").unwrap();
    assert_eq!(c.merge_base.as_deref(), Some(upstream.to_string().as_str()));
    assert_eq!(paths(&c), vec![("src/feature.ts", &FileStatus::Added)]);
    assert_eq!(c.commits.len(), 1);

    let explicit = ChangeSet::compute(&f.dir, "origin/main").unwrap();
    assert_eq!(explicit.files, c.files);
}

#[test]
fn an_unknown_base_is_an_error_that_says_what_to_do() {
    let f = Fixture::new("ts-base");
    let err = ChangeSet::compute(&f.dir, "develop").unwrap_err();
    assert!(matches!(err, GateError::BaseNotFound { .. }));
    assert!(
        err.to_string().contains("pass another base (--base)"),
        "{err}"
    );
    let tmp = tempfile::tempdir().unwrap();
    let err = ChangeSet::compute(tmp.path(), "main").unwrap_err();
    assert!(
        err.to_string().contains("not inside a git repository"),
        "{err}"
    );
}

#[test]
fn gate_state_files_stay_out_of_the_change() {
    let f = Fixture::new("ts-base");
    f.write("src/new.ts", "export const n = 1;\n");
    let ctx = f.context();
    std::fs::create_dir_all(ctx.state_dir.clone()).unwrap();
    std::fs::write(ctx.state_dir.join(".gitignore"), "*\n").unwrap();
    std::fs::write(ctx.state_dir.join("tsc.json"), "{}").unwrap();
    let c = ChangeSet::compute(&f.dir, "main").unwrap();
    assert_eq!(paths(&c), vec![("src/new.ts", &FileStatus::Added)]);
}

/// `gates.exclude` with brace alternatives and character classes, as any glob user writes them.
#[test]
fn exclude_globs_with_braces_and_classes_leave_the_change() {
    use supervisor::config::GateKind;
    use supervisor::gates::{default_hook, run_gates};

    let f = Fixture::new("ts-base");
    f.write("src/helper.ts", "export const helper = 1;\n");
    f.write("dist/bundle.js", "export const bundle = 1;\n");
    f.write("build/out.js", "export const out = 1;\n");
    f.write("src/gen1.ts", "export const gen = 1;\n");
    f.commit_all("Add a helper (#4)");
    let mut ctx = f.context_with_issue(4, "Add a helper", "- [ ] Add a helper\n");
    ctx.settings.exclude = vec!["{dist,build}/**".into(), "src/gen[0-9].ts".into()];
    let hooks = [default_hook(GateKind::Traceability)];
    let reports = crate::common::run_bounded(60, async { run_gates(&hooks, &ctx).await });
    let named: Vec<&str> = reports[0]
        .findings
        .iter()
        .filter_map(|f| f.file.as_deref())
        .collect();
    assert!(
        named.contains(&"src/helper.ts"),
        "the kept file is checked: {:#?}",
        reports[0]
    );
    for excluded in ["dist/bundle.js", "build/out.js", "src/gen1.ts"] {
        assert!(
            !named.contains(&excluded),
            "{excluded} is excluded: {:#?}",
            reports[0]
        );
    }
}
