//! What people read about gate runs: the one combined "gates blocked" comment, the summary table for
//! the auditor and the PR body, the findings the auditor weighs, and the `supervisor gates` output.

use std::fmt::Write as _;

use crate::config::GateKind;
use crate::gates::{Finding, GateReport, GateStatus, Verdict, verdict};

/// Findings listed per gate before the rest is counted.
const MAX_FINDINGS_SHOWN: usize = 50;

fn icon(r: &GateReport) -> &'static str {
    match &r.status {
        GateStatus::Pass => "✅",
        GateStatus::Fail => "❌",
        GateStatus::Warn => "⚠️",
        GateStatus::NotApplicable => "➖",
        GateStatus::NotRun { .. } => "⛔",
    }
}

/// `fail`, `not run (required): reason`.
fn status_text(r: &GateReport) -> String {
    match &r.status {
        GateStatus::NotRun { reason, .. } if r.required => format!("not run (required): {reason}"),
        other => other.label(),
    }
}

pub(super) fn duration_text(ms: u64) -> String {
    if ms < 60_000 {
        format!("{:.1} s", ms as f64 / 1000.0)
    } else {
        format!("{} min {} s", ms / 60_000, (ms % 60_000) / 1000)
    }
}

/// Text safe inside a Markdown table cell.
pub(super) fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace(['\r', '\n'], " ")
}

/// A fence longer than any backtick run in `text`.
fn fence_for(text: &str) -> String {
    let longest = text
        .split(|c| c != '`')
        .map(str::len)
        .max()
        .unwrap_or(0)
        .max(2);
    "`".repeat(longest + 1)
}

/// One finding as a Markdown list item; extra message lines go in a code block beneath it.
fn finding_item(f: &Finding, out: &mut String) {
    let loc = f.location();
    let mut lines = f.message.lines();
    let first = lines.next().unwrap_or_default();
    let rest: Vec<&str> = lines.collect();
    let _ = match loc.is_empty() {
        true => writeln!(out, "- **{}** {first}", f.rule),
        false => writeln!(out, "- `{loc}` **{}** {first}", f.rule),
    };
    if !rest.is_empty() {
        let body = rest.join("\n");
        let fence = fence_for(&body);
        let _ = writeln!(out, "\n  {fence}text");
        for l in body.lines() {
            let _ = writeln!(out, "  {l}");
        }
        let _ = writeln!(out, "  {fence}");
    }
}

fn findings_list(r: &GateReport, out: &mut String) {
    for f in r.findings.iter().take(MAX_FINDINGS_SHOWN) {
        finding_item(f, out);
    }
    if r.findings.len() > MAX_FINDINGS_SHOWN {
        let _ = writeln!(
            out,
            "- … and {} more",
            r.findings.len() - MAX_FINDINGS_SHOWN
        );
    }
}

/// The one "gates blocked — returning to developer" comment: every blocking gate with its findings
/// (`file:line`), then the gates that warned or did not run, then the summary table.
pub fn combined_gate_note(reports: &[GateReport]) -> String {
    let mut out = String::new();
    let blocking: Vec<&GateReport> = reports.iter().filter(|r| r.blocks()).collect();
    let _ = writeln!(
        out,
        "## 🔴 Pre-transition gates blocked — returning to developer\n"
    );
    if blocking.is_empty() {
        let _ = writeln!(
            out,
            "No gate blocks. (This note is only posted when one does.)\n"
        );
    } else {
        let names = blocking
            .iter()
            .map(|r| format!("**{}** ({})", r.name, short_status(r)))
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(
            out,
            "{} of {} gates block: {names}. Everything is listed below so it can be fixed in one go; a gate bounce does not count as a rejection.\n",
            blocking.len(),
            reports.len()
        );
    }
    for r in &blocking {
        let heading = match &r.status {
            GateStatus::NotRun { .. } => "not run (required)".to_string(),
            other => other.label(),
        };
        let _ = writeln!(out, "### {} {} — {heading}\n", icon(r), r.name);
        let body = match (&r.status, r.summary.is_empty()) {
            (GateStatus::NotRun { reason, .. }, true) => reason.as_str(),
            _ => r.summary.as_str(),
        };
        if !body.is_empty() {
            let _ = writeln!(out, "{body}\n");
        }
        if matches!(r.status, GateStatus::NotRun { .. }) {
            let _ = writeln!(
                out,
                "This gate is required and could not run, so it cannot vouch for the change: make its tool available or fix what stopped it.\n"
            );
        }
        if !r.findings.is_empty() {
            findings_list(r, &mut out);
            out.push('\n');
        }
    }
    let others: Vec<&GateReport> = reports
        .iter()
        .filter(|r| !r.blocks() && matches!(r.status, GateStatus::Warn | GateStatus::NotRun { .. }))
        .collect();
    if !others.is_empty() {
        let _ = writeln!(out, "### Also reported (not blocking)\n");
        for r in others {
            let _ = writeln!(out, "{}", one_line(r));
        }
        out.push('\n');
    }
    let _ = writeln!(out, "<details><summary>All gates</summary>\n");
    out.push_str(&gate_summary_table(reports));
    let _ = writeln!(out, "\n</details>");
    out
}

/// `- ⚠️ **gate** — status: summary` (a not-run gate's reason is its status).
fn one_line(r: &GateReport) -> String {
    let summary = match (&r.status, r.summary.is_empty()) {
        (GateStatus::NotRun { .. }, _) | (_, true) => String::new(),
        _ => format!(": {}", r.summary),
    };
    format!("- {} **{}** — {}{summary}", icon(r), r.name, status_text(r))
}

fn short_status(r: &GateReport) -> String {
    match &r.status {
        GateStatus::NotRun { .. } => "not run, required".into(),
        other => other.label(),
    }
}

/// A Markdown table: gate, status, findings, duration.
pub fn gate_summary_table(reports: &[GateReport]) -> String {
    let mut out = String::from("| gate | status | findings | duration |\n|---|---|---|---|\n");
    for r in reports {
        let _ = writeln!(
            out,
            "| {} | {} {} | {} | {} |",
            cell(&r.name),
            icon(r),
            cell(&status_text(r)),
            r.findings.len(),
            duration_text(r.duration_ms)
        );
    }
    let v = verdict(reports);
    let _ = writeln!(out, "\nVerdict: **{v}** — {}", v.meaning());
    out
}

/// `not-blocked — nothing blocks, but gates warned or did not run`: the verdict's word and meaning.
pub fn verdict_text(v: Verdict) -> String {
    format!("{v} — {}", v.meaning())
}

/// Duplicates (with their clone types), traceability and package-safety findings in full, for the
/// auditor's prompt; the other gates as a table.
pub fn gate_findings_for_auditor(reports: &[GateReport]) -> String {
    let mut out = String::from("## Quality gate findings\n\n");
    let sections = [
        (GateKind::Duplicates, "Duplicate code"),
        (GateKind::Traceability, "Requirements traceability"),
        (GateKind::PackageSafety, "Package safety"),
    ];
    for (kind, title) in sections {
        let matching: Vec<&GateReport> = reports.iter().filter(|r| r.kind == kind).collect();
        let _ = writeln!(out, "### {title}\n");
        if matching.is_empty() {
            let _ = writeln!(
                out,
                "The {} gate did not run in this transition.\n",
                kind.name()
            );
            continue;
        }
        for r in matching {
            let _ = writeln!(
                out,
                "{} **{}** {}: {}\n",
                icon(r),
                r.name,
                status_text(r),
                r.summary
            );
            if r.findings.is_empty() {
                let _ = writeln!(out, "No findings.\n");
            } else {
                for f in &r.findings {
                    finding_item(f, &mut out);
                }
                out.push('\n');
            }
        }
    }
    let others: Vec<&GateReport> = reports
        .iter()
        .filter(|r| !sections.iter().any(|(kind, _)| r.kind == *kind))
        .collect();
    if !others.is_empty() {
        let _ = writeln!(out, "### Other gates\n");
        for r in others {
            let _ = writeln!(out, "{}", one_line(r));
        }
        out.push('\n');
    }
    let _ = writeln!(out, "### All gates\n");
    out.push_str(&gate_summary_table(reports));
    out
}

/// `supervisor gates` human output: each report with its findings, then the verdict.
pub fn gate_reports_text(reports: &[GateReport]) -> String {
    let mut out = String::new();
    let width = reports
        .iter()
        .map(|r| r.name.chars().count())
        .max()
        .unwrap_or(4);
    for r in reports {
        let label = match &r.status {
            GateStatus::NotRun { .. } if r.required => "not run (required)".to_string(),
            GateStatus::NotRun { .. } => "not run".to_string(),
            other => other.label(),
        };
        let _ = writeln!(
            out,
            "{} {:width$}  {:<18} {:>8}  {}",
            icon(r),
            r.name,
            label,
            duration_text(r.duration_ms),
            r.summary.lines().next().unwrap_or_default()
        );
        for f in r.findings.iter().take(MAX_FINDINGS_SHOWN) {
            let loc = f.location();
            let mut lines = f.message.lines();
            let first = lines.next().unwrap_or_default();
            if loc.is_empty() {
                let _ = writeln!(out, "    {} {first}", f.rule);
            } else {
                let _ = writeln!(out, "    {loc}: {} {first}", f.rule);
            }
            for l in lines {
                let _ = writeln!(out, "      | {l}");
            }
        }
        if r.findings.len() > MAX_FINDINGS_SHOWN {
            let _ = writeln!(
                out,
                "    … and {} more",
                r.findings.len() - MAX_FINDINGS_SHOWN
            );
        }
    }
    let v = verdict(reports);
    let blocking: Vec<&str> = reports
        .iter()
        .filter(|r| r.blocks())
        .map(|r| r.name.as_str())
        .collect();
    let _ = match v {
        Verdict::Blocked => writeln!(out, "verdict: {v} by {}", blocking.join(", ")),
        other => writeln!(out, "verdict: {}", verdict_text(other)),
    };
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gates::FindingSeverity;

    fn finding(file: Option<&str>, line: Option<u32>, rule: &str, message: &str) -> Finding {
        Finding {
            file: file.map(str::to_string),
            line,
            rule: rule.into(),
            message: message.into(),
            severity: FindingSeverity::Error,
        }
    }

    fn report(
        kind: GateKind,
        status: GateStatus,
        required: bool,
        findings: Vec<Finding>,
        summary: &str,
        ms: u64,
    ) -> GateReport {
        GateReport {
            findings,
            duration_ms: ms,
            required,
            summary: summary.into(),
            ..GateReport::new(kind, kind.name(), status)
        }
    }

    fn sample() -> Vec<GateReport> {
        vec![
            report(
                GateKind::Ci,
                GateStatus::Pass,
                false,
                vec![],
                "all 2 checks passed on 0123456789",
                1200,
            ),
            report(
                GateKind::Tsc,
                GateStatus::Fail,
                false,
                vec![finding(
                    Some("src/index.ts"),
                    Some(3),
                    "TS2345",
                    "Argument of type 'string' is not assignable to parameter of type 'number'.",
                )],
                "1 type error (1 in changed files) in .; trend: regression (+1 since the previous run: 0 → 1)",
                3100,
            ),
            report(
                GateKind::Lsp,
                GateStatus::not_run(
                    "typescript-language-server not found in node_modules/.bin or PATH (install typescript-language-server, or set gates.allowNpx)",
                ),
                true,
                vec![],
                "TypeScript/JavaScript: not run — typescript-language-server not found in node_modules/.bin or PATH (install typescript-language-server, or set gates.allowNpx)",
                5,
            ),
            report(
                GateKind::DeadCode,
                GateStatus::Fail,
                false,
                vec![finding(
                    Some("src/math.ts"),
                    Some(5),
                    "unused-export",
                    "unused export: `unusedHelper`",
                )],
                "1 unused export/file/dependency finding in the changed files; the pipeline undoes its last commit so the fix lands cleanly",
                800,
            ),
            report(
                GateKind::Duplicates,
                GateStatus::Warn,
                false,
                vec![Finding {
                    severity: FindingSeverity::Warning,
                    ..finding(
                        Some("src/renamed.ts"),
                        Some(7),
                        "type-2-clone",
                        "Type 2 (renamed identifiers/literals) clone of src/orders.ts:7-16 (lines 7-16 here; 10 lines, 106 tokens)",
                    )
                }],
                "clones touching changed files: 0 Type 1, 1 Type 2, 0 Type 3 (for the auditor; not blocking)",
                600,
            ),
            report(
                GateKind::Traceability,
                GateStatus::Pass,
                false,
                vec![],
                "checklist: 3/3 items traced; tests: 1/1 changed sources have a changed test",
                20,
            ),
            report(
                GateKind::PackageSafety,
                GateStatus::NotApplicable,
                false,
                vec![],
                "no package.json in the change",
                1,
            ),
            GateReport {
                name: "tests".into(),
                ..report(
                    GateKind::Command,
                    GateStatus::Fail,
                    true,
                    vec![finding(
                        None,
                        None,
                        "command",
                        "`cargo test` ended with exit status 101; expected exit status 0. Last output:\ntest totals ... FAILED\nerror: test failed, to rerun pass `--lib`",
                    )],
                    "`cargo test` ended with exit status 101 after 12.0 s; expected exit status 0",
                    75_000,
                )
            },
        ]
    }

    #[test]
    fn combined_note_lists_every_blocking_gate_with_locations() {
        let note = combined_gate_note(&sample());
        insta::assert_snapshot!("combined_gate_note", note);
        assert!(note.contains("`src/index.ts:3` **TS2345**"));
        assert!(note.contains("`src/math.ts:5` **unused-export**"));
        assert!(note.contains("### ⛔ lsp — not run (required)"));
        assert!(
            !note.contains("### ⚠️ duplicates"),
            "warnings are not blocking sections"
        );
    }

    #[test]
    fn summary_table() {
        insta::assert_snapshot!("gate_summary_table", gate_summary_table(&sample()));
        let all_pass = [report(
            GateKind::Tsc,
            GateStatus::Pass,
            true,
            vec![],
            "ok",
            10,
        )];
        assert!(gate_summary_table(&all_pass).contains("Verdict: **pass**"));
        let not_run = [report(
            GateKind::Lsp,
            GateStatus::not_run("pylsp missing"),
            false,
            vec![],
            "",
            1,
        )];
        let table = gate_summary_table(&not_run);
        assert!(
            table.contains(
                "Verdict: **not-blocked** — nothing blocks, but gates warned or did not run"
            ),
            "the PR body's word is the JSON's: {table}"
        );
        assert!(gate_reports_text(&not_run).contains("verdict: not-blocked"));
    }

    #[test]
    fn auditor_findings() {
        let text = gate_findings_for_auditor(&sample());
        insta::assert_snapshot!("gate_findings_for_auditor", text);
        assert!(text.contains("Type 2 (renamed identifiers/literals) clone"));
        assert!(!text.contains("The package-safety gate did not run"));
    }

    #[test]
    fn cli_text() {
        insta::assert_snapshot!("gate_reports_text", gate_reports_text(&sample()));
    }

    #[test]
    fn fences_outgrow_backticks_in_the_body() {
        assert_eq!(fence_for("plain"), "```");
        assert_eq!(fence_for("has ```` four"), "`````");
        assert_eq!(cell("a|b\nc"), "a\\|b c");
        assert_eq!(duration_text(75_000), "1 min 15 s");
    }
}
