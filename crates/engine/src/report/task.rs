//! The task each agent receives: the issue, what earlier stages wrote, why the work came back, and
//! (for review stages) the gate reports.
//!
//! Trust boundary: callers pass only trusted texts (see `pipeline::TrustedNote`); nothing here fetches
//! anything.

use std::fmt::Write;

use super::comments::{findings_list, score_gate_comment};
use super::gates::{combined_gate_note, gate_findings_for_auditor, gate_summary_table};
use crate::agent::AuditFinding;
use crate::config::{Stage, Workflow};
use crate::gates::GateReport;
use crate::github::ReviewState;
use crate::pipeline::decide::revision::RevisionFeedback;
use crate::pipeline::{Dispatch, IssueContext, NoteKind, Return, TrustedNote, has_heading};

/// Longest text taken from any one note; agents can read the issue on GitHub for the rest.
pub const MAX_NOTE_CHARS: usize = 24_000;

/// Everything a task is built from.
#[derive(Debug, Clone)]
pub struct TaskInput<'a> {
    pub(crate) workflow: &'a Workflow,
    pub stage: &'a Stage,
    pub(crate) issue: &'a IssueContext,
    /// Trusted comments, oldest first.
    pub(crate) notes: &'a [TrustedNote],
    pub attempt: u32,
    pub(crate) returned: Option<&'a Return>,
    /// The gate reports a review stage weighs.
    pub(crate) gates: Option<&'a [GateReport]>,
    /// (branch, base) of the worktree.
    pub(crate) worktree: Option<(&'a str, &'a str)>,
    /// Review feedback on the pull request, when the work revises one.
    pub revision: Option<&'a RevisionFeedback>,
    /// The designated tests on the base and on the head, so far.
    pub(crate) proof: Option<&'a crate::verify::ProofTable>,
}

fn clip(text: &str) -> String {
    let t = text.trim();
    if t.chars().count() <= MAX_NOTE_CHARS {
        return t.to_string();
    }
    let cut: String = t.chars().take(MAX_NOTE_CHARS).collect();
    format!(
        "{cut}\n\n[… truncated: {} more characters; read the full comment on the issue]",
        t.chars().count() - MAX_NOTE_CHARS
    )
}

/// Strip the hidden markers and footers supervisor adds, so agents read only the content.
fn content(body: &str) -> String {
    body.lines()
        .filter(|l| {
            let t = l.trim();
            !(t.starts_with("<!-- supervisor:") || t.starts_with("<sub>supervisor ·"))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The stage a note belongs to: its marker's stage, or the stage whose skip heading it carries.
fn note_stage<'w>(workflow: &'w Workflow, note: &TrustedNote) -> Option<&'w Stage> {
    if let Some(s) = &note.stage {
        return workflow.stage(s);
    }
    workflow.stages.iter().find(|st| {
        st.skip_when_heading
            .as_deref()
            .is_some_and(|h| has_heading(&note.body, h))
    })
}

/// Why the work is back, and what to do about it.
fn returned_text(returned: &Return) -> String {
    match returned {
        Return::LoopBack { from, note } => format!(
            "The {from} stage sent this issue back to you. Address what it asks for:\n\n{}\n\n",
            clip(&content(note))
        ),
        Return::Rejected {
            from,
            note,
            findings,
        } => format!(
            "The {from} stage REJECTED the previous implementation. Resolve every critical and warning finding \
             below, and say in your summary how each was addressed:\n\n{}\n\n",
            clip(&with_findings(&content(note), findings))
        ),
        Return::ScoreGate { score, findings } => format!(
            "The previous implementation was approved, but its audit score missed the threshold. Resolve the \
             findings of the failing dimensions:\n\n{}\n\n",
            clip(&score_gate_comment(score, findings))
        ),
        Return::Unusable { problem } => format!(
            "Your previous answer could not be used: {problem}. Answer again: finish the stage's work \
             if it is not done, and end with the fenced JSON block your instructions describe.\n\n"
        ),
        Return::GatesBlocked { reports } => format!(
            "The quality gates blocked the previous implementation. Fix every finding below; the gates run again \
             before the audit:\n\n{}\n\n",
            clip(&combined_gate_note(reports))
        ),
    }
}

/// The latest note of every earlier stage, in workflow order, then maintainers' own remarks that
/// belong to no stage.
fn earlier_text(workflow: &Workflow, stage: &Stage, notes: &[TrustedNote]) -> String {
    let mut out = String::new();
    let here = workflow.index(&stage.status).unwrap_or(0);
    let mut earlier = String::new();
    for (i, st) in workflow.stages.iter().enumerate() {
        if i >= here || st.built_in.is_some() {
            continue;
        }
        let latest = notes
            .iter()
            .rev()
            .filter(|n| matches!(n.kind, NoteKind::Stage | NoteKind::Human))
            .find(|n| note_stage(workflow, n).is_some_and(|s| s.status == st.status));
        if let Some(n) = latest {
            let _ = writeln!(
                earlier,
                "### From {} ({})\n\n{}\n",
                st.status,
                st.agent.as_deref().unwrap_or("maintainer"),
                clip(&content(&n.body))
            );
        }
    }
    if !earlier.is_empty() {
        let _ = writeln!(out, "## What earlier stages wrote\n\n{earlier}");
    }

    // Maintainers' own remarks that belong to no stage.
    let remarks: Vec<&TrustedNote> = notes
        .iter()
        .filter(|n| n.kind == NoteKind::Human && note_stage(workflow, n).is_none())
        .collect();
    if !remarks.is_empty() {
        let _ = writeln!(out, "## Comments from maintainers\n");
        for n in remarks {
            let _ = writeln!(out, "@{} wrote:\n\n{}\n", n.author, clip(&n.body));
        }
    }

    out
}

/// Build the task text for one dispatch.
pub fn build_task(input: &TaskInput<'_>) -> String {
    let TaskInput {
        workflow,
        stage,
        issue,
        notes,
        attempt,
        returned,
        gates,
        worktree,
        revision,
        proof,
    } = input;
    let mut out = String::new();
    let _ = writeln!(out, "# Issue #{}: {}\n", issue.number, issue.title.trim());
    let _ = writeln!(out, "Opened by @{} · {}\n", issue.author, issue.url);
    let body = clip(&issue.body);
    out.push_str(if body.is_empty() {
        "_(no description)_"
    } else {
        &body
    });
    out.push_str("\n\n");

    let agent = stage.agent.as_deref().unwrap_or("agent");
    let _ = writeln!(
        out,
        "## Your stage: {}{}\n",
        stage.status,
        if *attempt > 1 {
            format!(" (attempt {attempt})")
        } else {
            String::new()
        }
    );
    if let Some(r) = returned {
        out.push_str(&returned_text(r));
    }
    out.push_str(&earlier_text(workflow, stage, notes));
    if let Some(f) = revision {
        out.push_str(&revision_text(f));
    }
    if let Some(reports) = gates {
        let _ = writeln!(
            out,
            "## Quality gates\n\n{}\n\n{}\n",
            gate_summary_table(reports).trim(),
            gate_findings_for_auditor(reports).trim()
        );
    }
    if let Some(p) = proof {
        let _ = writeln!(
            out,
            "{}\nThese designated tests were written first and failed on the base. They must pass on the \
             head; only the test designer changes them (a wrong test is sent back to it with its \
             loop-back marker, never edited, skipped or deleted).\n",
            super::comments::proof_markdown(p).trim_end()
        );
    }
    if let Some(globs) = &stage.writes {
        let _ = writeln!(
            out,
            "## Where you write\n\nOnly these paths: {}. A change anywhere else is undone before the \
             commit, and the work comes back to you.\n",
            globs
                .iter()
                .map(|g| format!("`{g}`"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if let Some((branch, base)) = worktree {
        let _ = writeln!(
            out,
            "## Working copy\n\nYou are in a git worktree on branch `{branch}`, created from `{base}`. \
             `git diff {base}...HEAD` shows the change so far.\n"
        );
    }
    let _ = writeln!(
        out,
        "## Answer\n\nEnd your final message with the fenced JSON block your instructions describe \
         (\"agentName\": \"{agent}\")."
    );
    out
}

/// The task of `dispatch` under `workflow`, as the agent reads it.
pub fn task_text(workflow: &Workflow, dispatch: &Dispatch) -> String {
    let stage = workflow
        .stage(&dispatch.stage)
        .expect("dispatches name a workflow stage");
    let spec = &dispatch.task;
    build_task(&TaskInput {
        workflow,
        stage,
        issue: &spec.issue,
        notes: &spec.notes,
        attempt: dispatch.attempt,
        returned: spec.returned.as_ref(),
        gates: spec.gates.as_deref(),
        worktree: Some((&spec.worktree.0, &spec.worktree.1)),
        revision: spec.revision.as_ref(),
        proof: spec.proof.as_ref(),
    })
}

/// How a revision's task introduces the review feedback.
pub const REVISION_TASK_HEADING: &str = "## Review feedback (pull request #";

/// The review feedback a revision works on: what reviewers asked in general, then the line
/// comments grouped by file, each under the diff hunk it was written on.
pub(crate) fn revision_text(f: &RevisionFeedback) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}{}, revision {})\n\nThe pull request {} was reviewed. Change the branch so that every \
         point below is addressed; keep what the review did not question.\n",
        REVISION_TASK_HEADING, f.pr, f.round, f.url
    );
    if let Some(audit) = &f.approved_audit {
        let _ = writeln!(out, "### The approved audit\n\n{}\n", clip(audit).trim());
    }
    for g in &f.general {
        let what = match g.review {
            Some(ReviewState::ChangesRequested) => "requested changes",
            Some(ReviewState::Commented) => "reviewed",
            _ => "asked",
        };
        let _ = writeln!(out, "@{} {what}:\n\n{}\n", g.author, g.body.trim());
    }
    for file in &f.files {
        let _ = writeln!(out, "### `{}`\n", file.path);
        for t in &file.threads {
            if let Some(line) = t.line {
                let _ = writeln!(out, "Line {line}:\n");
            }
            if !t.diff_hunk.trim().is_empty() {
                let _ = writeln!(out, "```diff\n{}\n```\n", t.diff_hunk.trim_end());
            }
            for (author, body) in &t.comments {
                let _ = writeln!(out, "@{author}: {}\n", body.trim());
            }
        }
    }
    if !f.left_out.is_empty() {
        let _ = writeln!(out, "_Not included: {}._\n", f.left_out.join("; "));
    }
    out
}

/// A reviewer's comment followed by its findings.
fn with_findings(note: &str, findings: &[AuditFinding]) -> String {
    if findings.is_empty() || note.contains("### Findings") {
        return note.to_string();
    }
    format!(
        "{}\n\n### Findings\n\n{}",
        note.trim_end(),
        findings_list(findings)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn issue() -> IssueContext {
        IssueContext {
            number: 42,
            title: "Parse durations".into(),
            body: "We need `2h` to work.\n\n- [ ] hours\n- [ ] minutes".into(),
            author: "alice".into(),
            url: "https://github.com/acme/widgets/issues/42".into(),
        }
    }

    fn note(stage: Option<&str>, kind: &str, body: &str) -> TrustedNote {
        TrustedNote {
            stage: stage.map(String::from),
            kind: if kind == "human" {
                NoteKind::Human
            } else {
                NoteKind::from_marker(
                    crate::github::MarkerKind::parse(kind).expect("a marker kind"),
                )
            },
            author: if kind == "human" {
                "alice".into()
            } else {
                "supervisor-bot".into()
            },
            body: body.into(),
        }
    }

    #[test]
    fn developer_task_after_gate_bounce() {
        let wf = Workflow::builtin(&BTreeMap::new());
        let notes = vec![
            note(
                Some("Research"),
                "stage",
                "## Research Findings\n\nold findings\n<sub>supervisor · researcher</sub>\n<!-- supervisor:run=1 stage=Research attempt=1 kind=stage -->",
            ),
            note(
                Some("Research"),
                "stage",
                "## Research Findings\n\nnew findings",
            ),
            note(Some("Architecture"), "stage", "## Architecture\n\nplan"),
            note(None, "human", "Please keep the API stable."),
            note(Some("TestDesign"), "stage", "## Test Plan\n\ncases"),
            note(
                Some("Audit"),
                "stage",
                "## Audit Rejected\n\nlater stage text must not leak forward",
            ),
        ];
        let ret = Return::GatesBlocked {
            reports: vec![GateReport {
                findings: vec![crate::gates::Finding {
                    file: Some("src/a.ts".into()),
                    line: Some(3),
                    rule: "TS2345".into(),
                    message:
                        "Argument of type 'string' is not assignable to parameter of type 'number'."
                            .into(),
                    severity: crate::gates::FindingSeverity::Error,
                }],
                duration_ms: 10,
                required: true,
                summary: "1 error".into(),
                ..GateReport::new(
                    crate::config::GateKind::Tsc,
                    "tsc",
                    crate::gates::GateStatus::Fail,
                )
            }],
        };
        let task = build_task(&TaskInput {
            workflow: &wf,
            stage: wf.stage("Implementation").unwrap(),
            issue: &issue(),
            notes: &notes,
            attempt: 2,
            returned: Some(&ret),
            gates: None,
            worktree: Some(("worktree-git-issue-42", "main")),
            revision: None,
            proof: None,
        });
        insta::assert_snapshot!(task);
        assert!(
            !task.contains("old findings"),
            "only the latest note per stage"
        );
        assert!(!task.contains("<!-- supervisor"), "markers are stripped");
        assert!(
            !task.contains("must not leak"),
            "later stages are not shown"
        );
    }

    #[test]
    fn human_research_heading_counts_as_research() {
        let wf = Workflow::builtin(&BTreeMap::new());
        let notes = vec![note(
            None,
            "human",
            "### Research Findings\n\nI already looked: use chrono.",
        )];
        let task = build_task(&TaskInput {
            workflow: &wf,
            stage: wf.stage("Architecture").unwrap(),
            issue: &issue(),
            notes: &notes,
            attempt: 1,
            returned: None,
            gates: None,
            worktree: None,
            revision: None,
            proof: None,
        });
        assert!(task.contains("### From Research (researcher)\n\n### Research Findings"));
        assert!(!task.contains("Comments from maintainers"));
    }

    #[test]
    fn long_notes_are_clipped() {
        let long = "x".repeat(MAX_NOTE_CHARS + 10);
        let clipped = clip(&long);
        assert!(
            clipped
                .ends_with("[… truncated: 10 more characters; read the full comment on the issue]")
        );
    }

    #[test]
    fn headings() {
        assert!(has_heading(
            "intro\n## Research Findings\nx",
            "Research Findings"
        ));
        assert!(has_heading("# research findings #", "Research Findings"));
        assert!(!has_heading("Research Findings", "Research Findings"));
        assert!(!has_heading(
            "```\n## Research Findings\n```",
            "Research Findings"
        ));
        assert!(!has_heading(
            "## Research Findings Draft",
            "Research Findings"
        ));
    }
}
