//! What an agent's task is made of: the issue, trusted notes, why the work came back. `report`
//! renders it.
//!
//! Trust boundary: only trusted texts become a `TrustedNote` — the issue of a codeowner, comments by
//! codeowners and supervisor's own comments. Why the work came back is taken from the journal (the
//! outcome, gate reports and score that sent it back), never from comment text.

use crate::agent::AuditFinding;
use crate::audit::AuditScore;
use crate::gates::GateReport;
use crate::github::MarkerKind;

/// The issue, as a codeowner wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IssueContext {
    pub(crate) number: u64,
    pub(crate) title: String,
    pub(crate) body: String,
    pub(crate) author: String,
    pub(crate) url: String,
}

/// What a trusted comment is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NoteKind {
    /// A stage agent's comment.
    Stage,
    /// The combined note of a gate round that blocked.
    Gates,
    /// An approval whose score missed the threshold.
    ScoreGate,
    /// Any other comment supervisor posts (stops, closures).
    Other,
    /// A codeowner's own comment.
    Human,
}

impl NoteKind {
    /// The kind of a supervisor comment from its marker's kind.
    pub(crate) fn from_marker(kind: MarkerKind) -> NoteKind {
        match kind {
            MarkerKind::Stage => NoteKind::Stage,
            MarkerKind::Gates => NoteKind::Gates,
            MarkerKind::ScoreGate => NoteKind::ScoreGate,
            _ => NoteKind::Other,
        }
    }
}

/// A trusted comment: by a codeowner, or posted by supervisor (then `stage` says which stage wrote it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TrustedNote {
    pub stage: Option<String>,
    pub(crate) kind: NoteKind,
    pub(crate) author: String,
    pub(crate) body: String,
}

/// Why the work is back in this stage.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Return {
    /// A later stage sent it back with this text (architect → research).
    LoopBack { from: String, note: String },
    /// The reviewer rejected it: its comment and findings.
    Rejected {
        from: String,
        note: String,
        findings: Vec<AuditFinding>,
    },
    /// The approval missed the score threshold (or held a critical finding).
    ScoreGate {
        score: AuditScore,
        findings: Vec<AuditFinding>,
    },
    /// Blocking gates: their reports.
    GatesBlocked { reports: Vec<GateReport> },
    /// The agent's previous answer broke the output protocol.
    Unusable { problem: String },
}

/// Whether `text` has a Markdown heading (any level) whose title is `title`.
pub(crate) fn has_heading(text: &str, title: &str) -> bool {
    let mut in_fence = false;
    text.lines().any(|line| {
        let t = line.trim();
        if t.starts_with("```") || t.starts_with("~~~") {
            in_fence = !in_fence;
            return false;
        }
        if in_fence || !t.starts_with('#') {
            return false;
        }
        let hashes = t.chars().take_while(|&c| c == '#').count();
        hashes <= 6
            && t[hashes..]
                .trim()
                .trim_end_matches('#')
                .trim()
                .eq_ignore_ascii_case(title)
    })
}
