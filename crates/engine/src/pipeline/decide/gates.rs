//! A round of gate reports as a configuration weighs it: which hooks count, which are required,
//! whether flagged packages block. `run_gates` builds each report this way from the hook it ran;
//! replaying a run re-weighs the reports it recorded with today's hooks and settings.

use crate::config::{GateKind, GateSettings, Hook};
use crate::gates::{GateReport, GateStatus, flagged_status};

/// `recorded` as `hooks` and `settings` weigh it: one report per hook (the recorded report of the
/// same gate and name), each `required` as its hook says, a package-safety report that flagged
/// packages failing or warning as `gates.packageSafetyBlocking` says. A hook without a recorded
/// report has no verdict here: `Err` names those hooks.
pub(crate) fn reweigh(
    recorded: &[GateReport],
    hooks: &[Hook],
    settings: &GateSettings,
) -> Result<Vec<GateReport>, Vec<String>> {
    let mut reports = Vec::new();
    let mut missing = Vec::new();
    for hook in hooks {
        let Some(report) = recorded
            .iter()
            .find(|r| r.kind == hook.gate && r.name == hook.name)
        else {
            missing.push(hook.name.clone());
            continue;
        };
        let mut report = report.clone();
        report.required = hook.required;
        if report.kind == GateKind::PackageSafety
            && matches!(report.status, GateStatus::Warn | GateStatus::Fail)
        {
            report.status = flagged_status(settings.package_safety_blocking);
        }
        reports.push(report);
    }
    if missing.is_empty() {
        Ok(reports)
    } else {
        Err(missing)
    }
}

/// The reports that block the move, in report order.
pub(crate) fn blocking(reports: &[GateReport]) -> Vec<&GateReport> {
    reports.iter().filter(|r| r.blocks()).collect()
}

/// Each report's name with its status: `tsc (fail)`.
pub(crate) fn labels(reports: &[&GateReport]) -> Vec<String> {
    reports
        .iter()
        .map(|r| format!("{} ({})", r.name, r.status.label()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gates::default_hook;

    fn report(kind: GateKind, status: GateStatus, required: bool) -> GateReport {
        GateReport {
            required,
            ..GateReport::new(kind, kind.name(), status)
        }
    }

    #[test]
    fn hooks_decide_what_is_required_and_which_reports_count() {
        let settings = GateSettings::default();
        let recorded = [
            report(GateKind::Tsc, GateStatus::not_run("tsc not found"), false),
            report(GateKind::Lsp, GateStatus::Pass, false),
        ];
        let mut tsc = default_hook(GateKind::Tsc);
        tsc.required = true;
        let weighed = reweigh(&recorded, std::slice::from_ref(&tsc), &settings).unwrap();
        assert_eq!(
            weighed.len(),
            1,
            "the lsp hook is gone: its report does not count"
        );
        assert!(weighed[0].blocks());
        assert_eq!(
            labels(&blocking(&weighed)),
            ["tsc (not run: tsc not found)"]
        );
        assert!(blocking(&recorded).is_empty());
        let missing = reweigh(&recorded, &[default_hook(GateKind::DeadCode)], &settings);
        assert_eq!(missing.unwrap_err(), ["dead-code"]);
    }

    #[test]
    fn flagged_packages_block_only_when_the_settings_say_so() {
        let mut settings = GateSettings::default();
        let recorded = [report(GateKind::PackageSafety, GateStatus::Warn, false)];
        let hook = default_hook(GateKind::PackageSafety);
        settings.package_safety_blocking = true;
        let weighed = reweigh(&recorded, std::slice::from_ref(&hook), &settings).unwrap();
        assert_eq!(weighed[0].status, GateStatus::Fail);
        settings.package_safety_blocking = false;
        let weighed = reweigh(&weighed, &[hook], &settings).unwrap();
        assert_eq!(weighed[0].status, GateStatus::Warn);
    }
}
