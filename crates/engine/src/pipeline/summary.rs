//! What a run produced, as data: how it ended, its agents, its gate rounds. `report` renders it.

use serde::Serialize;

use super::decide::Transition;
use super::user_text::UserText;
use crate::audit::AuditScore;
use crate::gates::{GateReport, GateStatus, Verdict};
use crate::ids::RunId;

/// Exit status of `supervisor run` (and every command that runs the pipeline).
pub mod exit {
    /// Done: a PR opened, nothing to do, or stopped cleanly by a signal.
    pub const OK: u8 = 0;
    /// The pipeline stopped before Done; the reason was printed.
    pub const STOPPED: u8 = 1;
    /// Usage or configuration error.
    pub const USAGE: u8 = 2;
    /// A GitHub or authentication error, or a stop that running again resumes.
    pub const RESUMABLE: u8 = 3;
}

/// How the run ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum RunEnd {
    /// Approved; the pull request is open.
    PullRequest {
        number: u64,
        url: String,
        created: bool,
    },
    /// The card was already in Done: nothing to do.
    AlreadyDone,
    /// The developer changed nothing: the issue was closed as already resolved.
    ClosedAsResolved,
    /// Stopped before Done; a human is needed.
    Stopped { stage: String, reason: UserText },
    /// Refused before anything was written (untrusted author, blockers, …).
    Refused { reason: String },
    /// SIGINT/SIGTERM/SIGHUP: the agent was stopped and the worktree cleaned.
    Interrupted,
    /// Stopped short by something running again fixes (a write GitHub did not confirm, a pull
    /// request GitHub would not open yet): the journal and the worktree are kept for the rerun.
    Paused { reason: String },
    /// `--dry-run`: nothing was written.
    DryRun { plan: Vec<String> },
    /// The pull request was revised: a new commit on its branch, its threads answered.
    Revised {
        number: u64,
        url: String,
        round: u32,
        sha: String,
    },
    /// No feedback a revision could act on (none, or none from a codeowner): nothing was written.
    NothingToRevise { reason: String },
    /// An epic was planned: its tasks' sub-issues (task id, issue number), in the plan's order.
    Planned { tasks: Vec<(String, u64)> },
    /// An epic's work ended: every task accepted, escalated or closed (task id, sub-issue,
    /// outcome), and the epic's pull request when one opened.
    EpicFinished {
        tasks: Vec<(String, u64, String)>,
        pull_request: Option<u64>,
    },
}

impl RunEnd {
    /// Every end's `kind`, as `--json`, the journal and the Action's `end` output name it.
    pub const KINDS: [&'static str; 12] = [
        "pull-request",
        "already-done",
        "closed-as-resolved",
        "stopped",
        "refused",
        "interrupted",
        "paused",
        "dry-run",
        "revised",
        "nothing-to-revise",
        "planned",
        "epic-finished",
    ];

    /// This end's `kind`.
    pub(crate) fn kind(&self) -> &'static str {
        let i = match self {
            RunEnd::PullRequest { .. } => 0,
            RunEnd::AlreadyDone => 1,
            RunEnd::ClosedAsResolved => 2,
            RunEnd::Stopped { .. } => 3,
            RunEnd::Refused { .. } => 4,
            RunEnd::Interrupted => 5,
            RunEnd::Paused { .. } => 6,
            RunEnd::DryRun { .. } => 7,
            RunEnd::Revised { .. } => 8,
            RunEnd::NothingToRevise { .. } => 9,
            RunEnd::Planned { .. } => 10,
            RunEnd::EpicFinished { .. } => 11,
        };
        Self::KINDS[i]
    }

    /// The exit status this end maps to.
    pub fn exit_code(&self) -> u8 {
        match self {
            RunEnd::PullRequest { .. }
            | RunEnd::AlreadyDone
            | RunEnd::ClosedAsResolved
            | RunEnd::DryRun { .. }
            | RunEnd::Revised { .. }
            | RunEnd::NothingToRevise { .. }
            | RunEnd::Planned { .. }
            | RunEnd::EpicFinished { .. }
            | RunEnd::Interrupted => exit::OK,
            RunEnd::Stopped { .. } | RunEnd::Refused { .. } => exit::STOPPED,
            RunEnd::Paused { .. } => exit::RESUMABLE,
        }
    }

    /// Whether running the same command again continues this run.
    pub(crate) fn is_resumable(&self) -> bool {
        matches!(self, RunEnd::Paused { .. })
    }
}

/// One agent dispatch.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentLine {
    pub stage: String,
    pub(crate) agent: String,
    pub attempt: u32,
    pub(crate) backend: String,
    pub(crate) duration_ms: u64,
    pub(crate) tokens: u64,
    pub(crate) cost_usd: f64,
    pub(crate) tool_calls: u64,
    pub(crate) model: Option<String>,
    /// `completed`, `timed out after 30m`, …
    pub(crate) exit: String,
}

/// One run of the gates; gates are listed by their hooks' names.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GateRound {
    pub stage: String,
    pub attempt: u32,
    pub(crate) verdict: Verdict,
    pub failing: Vec<String>,
    pub not_run: Vec<String>,
    pub(crate) warnings: Vec<String>,
}

impl GateRound {
    /// The round of `reports`, run when leaving `stage` on its `attempt`.
    pub fn new(stage: &str, attempt: u32, reports: &[GateReport]) -> GateRound {
        let names = |keep: fn(&GateStatus) -> bool| -> Vec<String> {
            reports
                .iter()
                .filter(|r| keep(&r.status))
                .map(|r| r.name.clone())
                .collect()
        };
        GateRound {
            stage: stage.to_string(),
            attempt,
            verdict: Verdict::of(reports),
            failing: names(|s| *s == GateStatus::Fail),
            not_run: names(|s| matches!(s, GateStatus::NotRun { .. })),
            warnings: names(|s| *s == GateStatus::Warn),
        }
    }
}

/// Facts about an agent run shown under its comment.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunFacts {
    pub(crate) agent: String,
    pub attempt: u32,
    pub(crate) duration_ms: u64,
    pub(crate) tokens: u64,
    pub(crate) tool_calls: u64,
    pub(crate) model: Option<String>,
}

/// Everything the summary shows.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunSummary {
    pub(crate) run_id: RunId,
    pub(crate) repo: String,
    pub(crate) issue: u64,
    pub(crate) title: String,
    pub end: RunEnd,
    pub agents: Vec<AgentLine>,
    pub transitions: Vec<Transition>,
    pub gate_rounds: Vec<GateRound>,
    /// The latest gate round's reports, findings included.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gates: Vec<crate::gates::GateReport>,
    pub rejections: u32,
    pub gate_bounces: u32,
    pub score: Option<AuditScore>,
    pub warnings: Vec<String>,
    pub journal: String,
    pub(crate) duration_ms: u64,
}

impl RunSummary {
    /// The summary of a run that ended as `end` before it did anything (no agents, no gates,
    /// no journal).
    pub fn bare(run_id: RunId, repo: String, issue: u64, end: RunEnd) -> RunSummary {
        RunSummary {
            run_id,
            repo,
            issue,
            title: String::new(),
            end,
            agents: Vec::new(),
            transitions: Vec::new(),
            gate_rounds: Vec::new(),
            gates: Vec::new(),
            rejections: 0,
            gate_bounces: 0,
            score: None,
            warnings: Vec::new(),
            journal: String::new(),
            duration_ms: 0,
        }
    }

    pub fn total_tokens(&self) -> u64 {
        self.agents.iter().map(|a| a.tokens).sum()
    }

    pub(crate) fn total_cost(&self) -> f64 {
        self.agents.iter().map(|a| a.cost_usd).sum()
    }
}

/// Where a stage of the workflow stands in a live view of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StageMark {
    Done,
    Current,
    Pending,
    /// The run stopped here; a human is needed.
    Stopped,
    /// The run paused or was interrupted here; running again resumes it.
    Paused,
}

/// One agent stage of the workflow in a live view.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StageProgress {
    pub stage: String,
    pub(crate) agent: String,
    pub mark: StageMark,
}

/// The agent at work.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CurrentWork {
    pub stage: String,
    pub(crate) agent: String,
    pub attempt: u32,
}

/// A review stage sending the work back (the auditor's rejection, or an approval its score
/// refused), for a live view.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReviewRejection {
    pub stage: String,
    /// The score computed from the review's findings.
    pub(crate) score: Option<AuditScore>,
    /// The review's first finding that counts against the score (else its first finding).
    pub(crate) finding: Option<String>,
}

impl ReviewRejection {
    /// `t`, a rejection or score-gate refusal, with the review's findings; `None` for any other
    /// transition.
    pub fn of(t: &Transition, findings: &[crate::agent::AuditFinding]) -> Option<ReviewRejection> {
        use super::decide::TransitionKind;
        use crate::agent::Severity;
        if !matches!(
            t.kind,
            TransitionKind::Rejection | TransitionKind::ScoreGate
        ) {
            return None;
        }
        let first = |sev: Option<Severity>| {
            findings
                .iter()
                .find(|f| sev.is_none_or(|s| f.severity == s))
                .map(|f| f.message.clone())
        };
        Some(ReviewRejection {
            stage: t.from.clone(),
            score: t.score.clone(),
            finding: first(Some(Severity::Critical))
                .or_else(|| first(Some(Severity::Warning)))
                .or_else(|| first(None)),
        })
    }
}

/// The run so far, for a live view (the tracking comment): what the journal knows, no clock.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Progress {
    pub run_id: RunId,
    pub issue: u64,
    pub stages: Vec<StageProgress>,
    pub current: Option<CurrentWork>,
    pub tokens: u64,
    pub(crate) cost_usd: f64,
    pub gates: Option<GateRound>,
    /// The pull request, once open.
    pub pr: Option<String>,
    /// How the run ended, once it did.
    pub end: Option<RunEnd>,
    /// Every time a review stage sent the work back, in order.
    pub(crate) rejections: Vec<ReviewRejection>,
}

impl Progress {
    /// Mark the agent stages among `stages` (the workflow's, in order: name and agent): those
    /// before the stage named `at` done, `at` itself `here`, the rest pending (`at` = `None`:
    /// every stage `rest`).
    pub(crate) fn marks(
        stages: &[(String, Option<String>)],
        at: Option<&str>,
        here: StageMark,
        rest: StageMark,
    ) -> Vec<StageProgress> {
        let at = at.and_then(|s| stages.iter().position(|(name, _)| name == s));
        stages
            .iter()
            .enumerate()
            .filter_map(|(i, (stage, agent))| {
                Some(StageProgress {
                    stage: stage.clone(),
                    agent: agent.clone()?,
                    mark: match at {
                        Some(at) if i < at => StageMark::Done,
                        Some(at) if i == at => here,
                        Some(_) => StageMark::Pending,
                        None => rest,
                    },
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_end_is_named_as_it_is_serialized() {
        let ends = [
            RunEnd::PullRequest {
                number: 1,
                url: String::new(),
                created: true,
            },
            RunEnd::AlreadyDone,
            RunEnd::ClosedAsResolved,
            RunEnd::Stopped {
                stage: String::new(),
                reason: UserText::default(),
            },
            RunEnd::Refused {
                reason: String::new(),
            },
            RunEnd::Interrupted,
            RunEnd::Paused {
                reason: String::new(),
            },
            RunEnd::DryRun { plan: vec![] },
            RunEnd::Revised {
                number: 1,
                url: String::new(),
                round: 1,
                sha: String::new(),
            },
            RunEnd::NothingToRevise {
                reason: String::new(),
            },
            RunEnd::Planned { tasks: vec![] },
            RunEnd::EpicFinished {
                tasks: vec![],
                pull_request: None,
            },
        ];
        let kinds: Vec<&str> = ends.iter().map(RunEnd::kind).collect();
        assert_eq!(kinds, RunEnd::KINDS);
        for end in &ends {
            assert_eq!(serde_json::to_value(end).unwrap()["kind"], end.kind());
        }
    }
}
