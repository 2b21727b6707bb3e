//! A gate's kind decides how it is treated, its name only how it is shown: a hook the workflow renamed
//! is still its kind, and a command gate named like a built-in gate is still a command.

use supervisor::config::{GateKind, Hook};
use supervisor::gates::{GateReport, dead_code_requires_uncommit, default_hook, run_gates};
use supervisor::report::gate_findings_for_auditor;

use crate::common::{Fixture, run_bounded};

fn command(name: &str, run: &str) -> Hook {
    let mut hook = default_hook(GateKind::Command);
    hook.name = name.into();
    hook.run = Some(run.into());
    hook
}

fn run(f: &Fixture, hooks: &[Hook]) -> Vec<GateReport> {
    let ctx = f.context_with_issue(4, "Add a helper", "- [ ] Add a helper\n");
    run_bounded(60, async { run_gates(hooks, &ctx).await })
}

#[test]
fn a_failing_command_gate_named_knip_never_undoes_the_commit() {
    let f = Fixture::new("ts-base");
    f.write("src/helper.ts", "export const helper = 1;\n");
    f.commit_all("Add a helper (#4)");
    let reports = run(&f, &[command("knip", "exit 1")]);
    assert!(
        reports[0].blocks(),
        "the command gate fails: {:#?}",
        reports[0]
    );
    assert!(
        !dead_code_requires_uncommit(&reports),
        "only the dead-code gate undoes the developer's commit, whatever a command gate is called"
    );
}

#[test]
fn renamed_gates_reach_the_auditor_under_their_kind() {
    let f = Fixture::new("ts-base");
    f.write("src/helper.ts", "export const helper = 1;\n");
    f.commit_all("Add a helper (#4)");
    let mut trace = default_hook(GateKind::Traceability);
    trace.name = "requirements check".into();
    let reports = run(&f, &[trace, command("duplicates", "true")]);
    let text = gate_findings_for_auditor(&reports);
    assert!(
        !text.contains("The traceability gate did not run"),
        "the renamed traceability gate ran: {text}"
    );
    let section = |title: &str| {
        let start = text
            .find(&format!("### {title}"))
            .unwrap_or_else(|| panic!("no {title} section: {text}"));
        let rest = &text[start + 4..];
        rest[..rest.find("\n### ").unwrap_or(rest.len())].to_string()
    };
    assert!(
        section("Requirements traceability").contains("checklist"),
        "the traceability section shows the renamed gate's result: {text}"
    );
    assert!(
        section("Duplicate code").contains("The duplicates gate did not run"),
        "a command gate named `duplicates` is not the duplicates gate: {text}"
    );
    assert!(
        section("Other gates").contains("**duplicates**"),
        "the command gate is listed with the other gates under its name: {text}"
    );
}
