//! The oracle tests' harness (shared with `benches/oracle.rs`): fixture projects copied into
//! directories of their own, gate contexts over them, and ways to look at runs.

#![allow(dead_code)]

use std::ffi::OsString;
use std::path::PathBuf;

use supervisor::config::GateSettings;
use supervisor::gates::{ChangeSet, GateContext, GateSession, ToolEnv};
pub(crate) use supervisor::verify::{
    self, NotRun, Outcome, Project, Repeated, Selection, TestId, TestRun, TestSelector, Totals,
};

use crate::common;

/// A fixture project copied into a directory of its own (runs write counters and caches into it).
pub(crate) struct Copy {
    _tmp: tempfile::TempDir,
    pub dir: PathBuf,
}

impl Copy {
    pub(crate) fn of(name: &str) -> Copy {
        let tmp = tempfile::tempdir().expect("temp dir");
        let dir = tmp.path().join(name);
        std::fs::create_dir_all(&dir).expect("project dir");
        let fixture = common::manifest_dir()
            .join("tests/fixtures/verify")
            .join(name);
        common::copy_tree(&fixture, &dir);
        Copy {
            dir: dir.canonicalize().expect("canonical dir"),
            _tmp: tmp,
        }
    }

    pub(crate) fn write(&self, rel: &str, text: &str) {
        std::fs::write(self.dir.join(rel), text).expect("write");
    }

    /// The project, its runner detected.
    pub(crate) fn project(&self) -> Project {
        Project::new(&self.dir, None).expect("a runner is detected")
    }

    /// A gate context over the copy with `path` as the search path, in a session of its own.
    pub(crate) fn context_with(&self, path: OsString) -> GateContext {
        let state_dir = self.dir.join(".supervisor/gates");
        GateContext {
            dir: self.dir.clone(),
            changes: ChangeSet::default(),
            issue: None,
            settings: GateSettings::default(),
            ci: None,
            session: GateSession::new(None, &state_dir, ToolEnv::base()),
            state_dir,
            search_path: Some(path),
            proof: None,
        }
    }

    /// A gate context with the pinned tools on the search path.
    pub(crate) fn context(&self) -> GateContext {
        self.context_with(common::tools_path())
    }

    pub(crate) fn run(&self, selection: &Selection) -> Result<TestRun, NotRun> {
        let ctx = self.context();
        let project = self.project();
        common::run_bounded(600, verify::run(&ctx, &project, selection))
    }

    /// Run `selection` twice with the pinned tools; both runs must run.
    pub(crate) fn run_twice(&self, selection: &Selection) -> Repeated {
        let ctx = self.context();
        let project = self.project();
        common::run_bounded(600, verify::run_twice(&ctx, &project, selection))
            .expect("both runs ran")
    }
}

/// The outcome of each result, as `id → outcome` pairs in id order.
pub(crate) fn outcomes(run: &TestRun) -> Vec<(String, Outcome)> {
    run.results
        .iter()
        .map(|r| (r.id.to_string(), r.outcome))
        .collect()
}

/// The result of `file::name`, which must be there.
pub(crate) fn result<'a>(run: &'a TestRun, file: &str, name: &str) -> &'a verify::TestResult {
    let id = TestId::new(file, name);
    run.get(&id)
        .unwrap_or_else(|| panic!("{id} is not in the run: {:?}", outcomes(run)))
}

pub(crate) fn only(selectors: &[TestSelector]) -> Selection {
    Selection::Only(selectors.to_vec())
}

pub(crate) fn totals(passed: usize, failed: usize, errors: usize, skipped: usize) -> Totals {
    Totals {
        passed,
        failed,
        errors,
        skipped,
    }
}
