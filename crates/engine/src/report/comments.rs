//! Texts posted on GitHub: stage comments, score-gate rejections, stops, closures and the PR body.
//! Hidden idempotency markers are added by the GitHub layer when posting, not here.

use crate::verify::ProofTable;
use std::fmt::Write;

use crate::agent::{AuditFinding, Severity};
use crate::audit::AuditScore;
use crate::config::Dimension;
use crate::pipeline::{PrRequest, RunFacts, Text};

/// The Markdown of a comment the pipeline posts.
pub fn comment_text(text: &Text) -> String {
    match text {
        Text::Stage {
            body,
            findings,
            facts,
            note,
        } => {
            let body = if findings.is_empty() {
                body.clone()
            } else {
                format!(
                    "{}\n\n### Findings\n\n{}",
                    body.trim_end(),
                    findings_list(findings)
                )
            };
            stage_comment(&body, facts, note.as_deref())
        }
        Text::Gates { reports } => super::gates::combined_gate_note(reports),
        Text::ScoreGate { score, findings } => score_gate_comment(score, findings),
        Text::Stopped { stage, reason }
            if stage == crate::pipeline::decide::revision::REVISION_STAGE =>
        {
            format!(
                "## Revision Stopped\n\nsupervisor stopped revising this pull request: {reason}.\n"
            )
        }
        Text::Stopped { stage, reason } => stopped_comment(
            stage,
            reason.as_str(),
            "The card stays in its column. Fix the cause, then run supervisor again: it resumes from the board.",
        ),
        Text::Resolved {
            branch,
            base,
            proof,
        } => already_resolved_comment(branch, base, proof.as_ref()),
        Text::ThreadAnswer { sha } => format!("Addressed in {sha}."),
        Text::Revised {
            round,
            sha,
            threads,
            general,
            score,
            left_out,
        } => revised_comment(*round, sha, threads, *general, score.as_deref(), left_out),
    }
}

/// The comment that closes a revision; its hidden head line is what the next revision checks the
/// branch against.
fn revised_comment(
    round: u32,
    sha: &str,
    threads: &[(String, Option<u64>)],
    general: usize,
    score: Option<&AuditScore>,
    left_out: &[String],
) -> String {
    let mut out = format!("## Revision {round}\n\nPushed {sha}, addressing ");
    let mut parts = Vec::new();
    if !threads.is_empty() {
        parts.push(format!(
            "{} review thread{}",
            threads.len(),
            if threads.len() == 1 { "" } else { "s" }
        ));
    }
    if general > 0 {
        parts.push(format!(
            "{general} review comment{}",
            if general == 1 { "" } else { "s" }
        ));
    }
    out.push_str(&parts.join(" and "));
    out.push_str(".\n\n");
    for (path, line) in threads {
        match line {
            Some(l) => {
                let _ = writeln!(out, "- `{path}` line {l}");
            }
            None => {
                let _ = writeln!(out, "- `{path}`");
            }
        }
    }
    if let Some(score) = score {
        let _ = writeln!(
            out,
            "\nAudit: {}/{} ({:.2}); the pull request's description shows the new audit.",
            score.passing,
            score.total,
            score.ratio()
        );
    }
    if !left_out.is_empty() {
        let _ = writeln!(out, "\nNot taken in: {}.", left_out.join("; "));
    }
    out.push('\n');
    out.push_str(&crate::pipeline::decide::revision::head_note(sha));
    out
}

/// The title and body of the pull request the pipeline opens.
pub fn pull_request_text(pr: &PrRequest) -> (String, String) {
    let gate_table = if pr.gates.is_empty() {
        String::new()
    } else {
        super::gates::gate_summary_table(&pr.gates)
    };
    let proof = match (&pr.proof, &pr.kept_proof) {
        (Some(proof), _) => Some(proof_markdown(proof)),
        (None, kept) => kept.clone(),
    };
    let body = pr_body(&PrBodyInput {
        issue: pr.issue,
        audit_comment: &pr.audit_comment,
        score: &pr.score,
        findings: &pr.findings,
        gate_table: &gate_table,
        proof: proof.as_deref(),
        auditor_pr_body: pr.auditor_body.as_deref(),
        rejections: pr.rejections,
        gate_bounces: pr.gate_bounces,
    });
    // The head supervisor pushed goes hidden before the closing line (which stays last).
    let extra = match (&pr.head_sha, pr.revision) {
        (Some(sha), 0) => crate::pipeline::decide::revision::head_note(sha),
        (Some(sha), n) => format!(
            "_Revised after review ({n} revision{})._\n\n{}",
            if n == 1 { "" } else { "s" },
            crate::pipeline::decide::revision::head_note(sha)
        ),
        (None, _) => String::new(),
    };
    let closes = format!("Closes #{}", pr.issue);
    let body = match body.rfind(&closes) {
        Some(at) if !extra.is_empty() => format!("{}{extra}\n\n{}", &body[..at], &body[at..]),
        _ => body,
    };
    let title = pr
        .title
        .clone()
        .unwrap_or_else(|| default_pr_title(pr.issue, &pr.issue_title));
    (title, body)
}

pub fn human_duration(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0 => format!("{ms} ms"),
        1..=59 => format!("{s}s"),
        60..=3599 => format!("{}m {:02}s", s / 60, s % 60),
        _ => format!("{}h {:02}m", s / 3600, (s % 3600) / 60),
    }
}

pub fn human_tokens(n: u64) -> String {
    match n {
        0..=999 => n.to_string(),
        1_000..=999_999 => format!("{:.1}k", n as f64 / 1000.0),
        _ => format!("{:.2}M", n as f64 / 1_000_000.0),
    }
}

/// An agent's comment with a one-line footer naming who produced it.
pub fn stage_comment(body: &str, facts: &RunFacts, note: Option<&str>) -> String {
    let mut out = String::new();
    if let Some(note) = note {
        let _ = writeln!(out, "> **Note:** {note}\n");
    }
    out.push_str(body.trim());
    let _ = write!(
        out,
        "\n\n<sub>supervisor · {}{} · {} · {} tokens · {} tool call{}{}</sub>",
        facts.agent,
        if facts.attempt > 1 {
            format!(" (attempt {})", facts.attempt)
        } else {
            String::new()
        },
        human_duration(facts.duration_ms),
        human_tokens(facts.tokens),
        facts.tool_calls,
        if facts.tool_calls == 1 { "" } else { "s" },
        facts
            .model
            .as_deref()
            .map(|m| format!(" · {m}"))
            .unwrap_or_default()
    );
    out
}

/// One Markdown table row per dimension, with its worst finding.
pub fn dimension_table(score: &AuditScore, findings: &[AuditFinding]) -> String {
    let mut out = String::from("| Dimension | Result | Findings |\n|---|---|---|\n");
    for d in Dimension::ALL {
        let count = findings.iter().filter(|f| f.dimension == d).count();
        let _ = writeln!(out, "| {d} | {} | {count} |", dimension_result(score, d));
    }
    out
}

/// `excluded`, `❌ fail` or `✅ pass`: how a dimension counted in the score.
pub(super) fn dimension_result(score: &AuditScore, d: Dimension) -> &'static str {
    if score.excluded.contains(&d) {
        "excluded"
    } else if score.failing.contains(&d) {
        "❌ fail"
    } else {
        "✅ pass"
    }
}

/// Findings as a Markdown list, most severe first.
pub fn findings_list(findings: &[AuditFinding]) -> String {
    if findings.is_empty() {
        return "_No findings._\n".into();
    }
    let mut sorted: Vec<&AuditFinding> = findings.iter().collect();
    sorted.sort_by_key(|f| f.severity);
    let mut out = String::new();
    for f in sorted {
        let icon = match f.severity {
            Severity::Critical => "🔴",
            Severity::Warning => "🟠",
            Severity::Suggestion => "🔵",
        };
        let loc = match (&f.file, f.line) {
            (Some(file), Some(line)) if line > 0 => format!(" `{file}:{line}`"),
            (Some(file), _) => format!(" `{file}`"),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "- {icon} **{}** · {}{loc} — {}",
            f.severity.name(),
            f.dimension,
            f.message.trim()
        );
    }
    out
}

/// The score line: `6/8 (0.75) — threshold 0.75: passed`.
pub fn score_line(score: &AuditScore) -> String {
    format!(
        "{}/{} ({:.2}) against the threshold {} — {}",
        score.passing,
        score.total,
        score.ratio(),
        score.threshold,
        match (score.passed, score.meets_threshold()) {
            (true, _) => "passed",
            (false, true) => "not met: a critical finding is never approved",
            (false, false) => "not met",
        }
    )
}

/// Posted when the auditor approved but the computed score missed the threshold.
pub fn score_gate_comment(score: &AuditScore, findings: &[AuditFinding]) -> String {
    let mut out = String::from("## Audit Score Gate Rejected\n\n");
    let _ = writeln!(
        out,
        "The auditor approved, but the score computed from its findings is {}. The issue returns to \
         Implementation; the findings below go to the developer.\n",
        score_line(score)
    );
    if let Some(claim) = &score.claimed {
        let _ = writeln!(
            out,
            "The auditor claimed {}/{}; supervisor computes the score from the findings.\n",
            claim.passing, claim.total
        );
    }
    out.push_str(&dimension_table(score, findings));
    out.push_str("\n### Findings\n\n");
    out.push_str(&findings_list(findings));
    out
}

/// Posted when the pipeline stops before Done and a human is needed.
pub fn stopped_comment(stage: &str, reason: &str, next: &str) -> String {
    format!("## Pipeline Stopped\n\nsupervisor stopped in **{stage}**: {reason}.\n\n{next}\n")
}

/// Posted when the developer made no commits: the issue is closed as already resolved.
pub fn already_resolved_comment(branch: &str, base: &str, proof: Option<&ProofTable>) -> String {
    let mut out = format!(
        "## Already Resolved\n\nThe developer changed nothing, and every test designed for this issue passes on \
         `{base}`: the work it asks for is in place already, and the audit agreed, so the issue is closed. The \
         tests are on branch `{branch}`. Reopen the issue and move it back to Backlog if something is still \
         missing.\n"
    );
    if let Some(p) = proof {
        out.push('\n');
        out.push_str(&proof_markdown(p));
    }
    out
}

/// A table cell: one line, pipes escaped, at most 120 characters.
fn cell(text: &str) -> String {
    let one: String = text
        .lines()
        .next()
        .unwrap_or_default()
        .chars()
        .take(120)
        .collect();
    one.replace('|', "\\|")
}

/// The Proof table: criterion → test → on the base → on the head, and the suite's totals.
pub(crate) fn proof_markdown(p: &ProofTable) -> String {
    use crate::verify::Outcome;
    let mark = |o: &Option<(Outcome, Option<String>)>| match o {
        None => "—".to_string(),
        Some((Outcome::Pass, _)) => "✔ pass".to_string(),
        Some((Outcome::Skipped, _)) => "⏭ skipped".to_string(),
        Some((o, first)) => {
            let word = if *o == Outcome::Fail { "fail" } else { "error" };
            match first {
                Some(f) => format!("✖ {word}: {}", cell(f)),
                None => format!("✖ {word}"),
            }
        }
    };
    let mut out = String::from("## Proof\n\n");
    if p.already_resolved {
        out.push_str(
            "The designated tests pass on the base: the issue was already resolved there.\n\n",
        );
    }
    out.push_str("| Criterion | Test | On the base | On the head |\n|---|---|---|---|\n");
    for l in &p.lines {
        let _ = writeln!(
            out,
            "| {} | `{}` | {} | {} |",
            cell(&l.criterion),
            cell(&l.test).replace('`', "'"),
            mark(&l.base),
            mark(&l.head)
        );
    }
    let totals = |t: &Option<crate::verify::Totals>| match t {
        Some(t) => format!(
            "{} passed, {} failed, {} errors, {} skipped",
            t.passed, t.failed, t.errors, t.skipped
        ),
        None => "not run".to_string(),
    };
    let _ = writeln!(
        out,
        "\nWhole suite ({}): on the base {}; on the head {}.",
        if p.runner.is_empty() {
            "tests"
        } else {
            &p.runner
        },
        totals(&p.base),
        totals(&p.head)
    );
    out
}

/// Inputs of the pull request body.
#[derive(Debug, Clone)]
pub struct PrBodyInput<'a> {
    pub(crate) issue: u64,
    pub(crate) audit_comment: &'a str,
    pub(crate) score: &'a AuditScore,
    pub(crate) findings: &'a [AuditFinding],
    pub(crate) gate_table: &'a str,
    /// The Proof section (`## Proof` …), when the oracle ran.
    pub(crate) proof: Option<&'a str>,
    pub(crate) auditor_pr_body: Option<&'a str>,
    pub(crate) rejections: u32,
    pub(crate) gate_bounces: u32,
}

/// The PR body: the audit report, the score, the gates, and `Closes #N`.
pub fn pr_body(input: &PrBodyInput<'_>) -> String {
    let mut out = String::new();
    if let Some(body) = input.auditor_pr_body {
        // Only supervisor ends a Proof section.
        out.push_str(
            body.replace(crate::pipeline::decide::revision::PROOF_END, "")
                .trim(),
        );
        out.push_str("\n\n");
    }
    out.push_str("## Audit Report\n\n");
    out.push_str(demote_headings(input.audit_comment.trim()).trim());
    let _ = write!(
        out,
        "\n\n### Audit Score\n\n{}\n\n",
        score_line(input.score)
    );
    out.push_str(&dimension_table(input.score, input.findings));
    if !input.findings.is_empty() {
        out.push_str("\n### Findings\n\n");
        out.push_str(&findings_list(input.findings));
    }
    if !input.gate_table.trim().is_empty() {
        out.push_str("\n### Quality Gates\n\n");
        out.push_str(input.gate_table.trim());
        out.push('\n');
    }
    if let Some(proof) = input.proof {
        let _ = write!(
            out,
            "\n{}\n{}\n",
            proof.trim(),
            crate::pipeline::decide::revision::PROOF_END
        );
    }
    let _ = write!(
        out,
        "\n_Reviewed by supervisor after {} rejection{} and {} gate bounce{}._\n\nCloses #{}\n",
        input.rejections,
        if input.rejections == 1 { "" } else { "s" },
        input.gate_bounces,
        if input.gate_bounces == 1 { "" } else { "s" },
        input.issue
    );
    out
}

/// Push `##` headings of an embedded comment one level down so they nest under ours.
fn demote_headings(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    let mut in_fence = false;
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with("```") || t.starts_with("~~~") {
            in_fence = !in_fence;
        }
        if !in_fence && t.starts_with('#') && t.trim_start_matches('#').starts_with(' ') {
            let hashes = t.chars().take_while(|&c| c == '#').count();
            if hashes < 6 {
                out.push('#');
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The default PR title when the auditor gave none.
pub fn default_pr_title(issue: u64, title: &str) -> String {
    let t = title.trim();
    let lower = t.to_ascii_lowercase();
    let kind = if lower.starts_with("fix") || lower.contains("bug") || lower.contains("crash") {
        "fix"
    } else if lower.starts_with("doc") {
        "docs"
    } else {
        "feat"
    };
    format!("{kind}(#{issue}): {t}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::score;

    fn finding(sev: Severity, dim: &str, msg: &str, file: Option<(&str, u32)>) -> AuditFinding {
        AuditFinding {
            severity: sev,
            dimension: Dimension::parse(dim).unwrap(),
            message: msg.into(),
            file: file.map(|f| f.0.to_string()),
            line: file.map(|f| f.1),
        }
    }

    #[test]
    fn durations_and_tokens() {
        assert_eq!(human_duration(850), "850 ms");
        assert_eq!(human_duration(42_000), "42s");
        assert_eq!(human_duration(133_000), "2m 13s");
        assert_eq!(human_duration(3_725_000), "1h 02m");
        assert_eq!(human_tokens(950), "950");
        assert_eq!(human_tokens(45_230), "45.2k");
        assert_eq!(human_tokens(2_500_000), "2.50M");
    }

    #[test]
    fn stage_comment_footer() {
        let facts = RunFacts {
            agent: "researcher".into(),
            attempt: 2,
            duration_ms: 133_000,
            tokens: 45_230,
            tool_calls: 1,
            model: Some("anthropic/claude-sonnet-4-5".into()),
        };
        let text = stage_comment(
            "## Research Findings\n\nAll good.\n",
            &facts,
            Some("partial: token budget reached"),
        );
        insta::assert_snapshot!(text, @r"
        > **Note:** partial: token budget reached

        ## Research Findings

        All good.

        <sub>supervisor · researcher (attempt 2) · 2m 13s · 45.2k tokens · 1 tool call · anthropic/claude-sonnet-4-5</sub>
        ");
    }

    #[test]
    fn score_gate_comment_lists_everything() {
        let findings = vec![
            finding(Severity::Suggestion, "code-quality", "rename x", None),
            finding(
                Severity::Critical,
                "correctness-safety",
                "hours × 60",
                Some(("src/d.ts", 3)),
            ),
            finding(
                Severity::Warning,
                "completeness",
                "README not updated",
                Some(("README.md", 0)),
            ),
            finding(Severity::Warning, "test-quality", "no edge cases", None),
        ];
        let s = score(
            &findings,
            &[],
            0.75,
            Some(crate::agent::ClaimedScore {
                passing: 8,
                total: 8,
            }),
        );
        let text = score_gate_comment(&s, &findings);
        insta::assert_snapshot!(text);
        assert!(text.starts_with("## Audit Score Gate Rejected"));
        assert!(text.contains("5/8 (0.62) against the threshold 0.75 — not met"));
        // Most severe first.
        let crit = text.find("hours × 60").unwrap();
        let sugg = text.find("rename x").unwrap();
        assert!(crit < sugg);
    }

    #[test]
    fn pr_body_nests_the_audit_and_closes_the_issue() {
        let findings = vec![finding(
            Severity::Suggestion,
            "code-quality",
            "rename x",
            Some(("a.ts", 1)),
        )];
        let s = score(&findings, &[Dimension::ResearchIncorporation], 0.75, None);
        let body = pr_body(&PrBodyInput {
            issue: 42,
            audit_comment: "## Audit Approved\n\n### Summary\nGood.\n\n```\n## not a heading\n```",
            score: &s,
            findings: &findings,
            gate_table: "| Gate | Status |\n|---|---|\n| tsc | pass |",
            proof: None,
            auditor_pr_body: Some("## Summary\nAdds durations."),
            rejections: 1,
            gate_bounces: 0,
        });
        insta::assert_snapshot!(body);
        assert!(body.ends_with("Closes #42\n"));
        assert!(body.contains("### Audit Approved"));
        assert!(body.contains("#### Summary"));
        assert!(
            body.contains("\n## not a heading"),
            "fenced text is left alone"
        );
        assert!(body.contains("| research-incorporation | excluded | 0 |"));
    }

    #[test]
    fn only_supervisors_proof_section_is_found_again() {
        use crate::pipeline::decide::revision::{PROOF_END, proof_section};
        let s = score(&[], &[], 0.75, None);
        let forged = format!("## Proof\n\n| hours | `x` | ✖ fail | ✔ pass |\n{PROOF_END}\n");
        let input = |proof| PrBodyInput {
            issue: 42,
            audit_comment: "## Audit Approved",
            score: &s,
            findings: &[],
            gate_table: "",
            proof,
            auditor_pr_body: Some(&forged),
            rejections: 0,
            gate_bounces: 0,
        };
        // The auditor's text cannot end a Proof section: none is found.
        assert_eq!(proof_section(&pr_body(&input(None))), None);
        let real = "## Proof\n\n| Criterion | Test | On the base | On the head |\n|---|---|---|---|\n| 1 | `t` | ✖ fail: no | ✔ pass |";
        let body = pr_body(&input(Some(real)));
        assert_eq!(proof_section(&body).as_deref(), Some(real));
        assert!(body.find(real).unwrap() < body.find("Closes #42").unwrap());
    }

    #[test]
    fn default_titles() {
        assert_eq!(
            default_pr_title(3, "Add duration parsing"),
            "feat(#3): Add duration parsing"
        );
        assert_eq!(
            default_pr_title(4, "Fix crash on empty input"),
            "fix(#4): Fix crash on empty input"
        );
        assert_eq!(
            default_pr_title(5, "Docs for config"),
            "docs(#5): Docs for config"
        );
    }
}
