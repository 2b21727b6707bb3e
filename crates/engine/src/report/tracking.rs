//! The tracking comment: one issue comment showing where a run stands, edited as it moves.

use std::fmt::Write;

use super::comments::{human_duration, human_tokens};
use super::summary::public_headline;
use crate::pipeline::{Progress, StageMark};

/// Links the tracking comment shows besides the pull request.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct TrackingLinks {
    /// The GitHub Actions run doing the work, when there is one.
    pub(crate) workflow_run: Option<String>,
}

/// The tracking comment's Markdown (without its marker). `working_ms`: how long the current agent
/// has been at work.
pub(crate) fn tracking_text(
    p: &Progress,
    working_ms: Option<u64>,
    links: &TrackingLinks,
) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "### supervisor · run `{}`\n", p.run_id);
    for s in &p.stages {
        let icon = match s.mark {
            StageMark::Done => "✅",
            StageMark::Current => "🔄",
            StageMark::Pending => "⬜",
            StageMark::Stopped => "❌",
            StageMark::Paused => "⏸️",
        };
        let mut line = format!("{icon} {} · {}", s.stage, s.agent);
        if let Some(w) = p.current.as_ref().filter(|w| w.stage == s.stage) {
            line = format!(
                "{icon} **{}** · {}, attempt {}",
                s.stage, w.agent, w.attempt
            );
            if let Some(ms) = working_ms {
                let _ = write!(line, " — working for {}", human_duration(ms));
            }
        }
        let _ = writeln!(out, "{line}  ");
    }
    let mut facts = vec![format!("tokens so far: {}", human_tokens(p.tokens))];
    if p.cost_usd > 0.0 {
        facts.push(format!("cost ${:.4}", p.cost_usd));
    }
    if let Some(g) = &p.gates {
        facts.push(format!(
            "latest gates: **{}** ({}, attempt {})",
            g.verdict.as_str(),
            g.stage,
            g.attempt
        ));
    }
    let _ = writeln!(out, "\n{}", facts.join(" · "));
    if let Some(end) = &p.end {
        let _ = writeln!(out, "\n{}", public_headline(end));
    } else if let Some(pr) = &p.pr {
        let _ = writeln!(out, "\npull request: {pr}");
    }
    if let Some(url) = &links.workflow_run {
        let _ = writeln!(out, "\n[workflow run]({url})");
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::pipeline::{CurrentWork, RunEnd, StageMark};

    /// A run of three stages, at `at`, ended with `end`.
    pub(crate) fn progress(at: Option<&str>, end: Option<RunEnd>) -> Progress {
        let stages = [
            ("Research", "researcher"),
            ("Implementation", "developer"),
            ("Audit", "auditor"),
        ]
        .map(|(s, a)| (s.to_string(), Some(a.to_string())));
        let (here, rest) = match end {
            None => (StageMark::Current, StageMark::Pending),
            Some(_) => (StageMark::Done, StageMark::Done),
        };
        Progress {
            run_id: crate::ids::RunId::new("7-x"),
            issue: 7,
            stages: Progress::marks(&stages, at, here, rest),
            current: at.map(|s| CurrentWork {
                stage: s.into(),
                agent: "developer".into(),
                attempt: 2,
            }),
            tokens: 12_300,
            cost_usd: 0.0,
            gates: None,
            pr: None,
            end,
            rejections: Vec::new(),
        }
    }

    #[test]
    fn the_current_stage_shows_its_agent_attempt_and_time() {
        let text = tracking_text(
            &progress(Some("Implementation"), None),
            Some(192_000),
            &TrackingLinks {
                workflow_run: Some("https://github.com/o/r/actions/runs/9".into()),
            },
        );
        assert!(text.contains("✅ Research · researcher"), "{text}");
        assert!(
            text.contains("🔄 **Implementation** · developer, attempt 2 — working for 3m 12s"),
            "{text}"
        );
        assert!(text.contains("⬜ Audit · auditor"), "{text}");
        assert!(text.contains("tokens so far: 12.3k"), "{text}");
        assert!(
            text.contains("[workflow run](https://github.com/o/r/actions/runs/9)"),
            "{text}"
        );
    }

    #[test]
    fn an_ended_run_says_how_with_every_stage_done() {
        let end = RunEnd::PullRequest {
            number: 2,
            url: "https://github.com/o/r/pull/2".into(),
            created: true,
        };
        let text = tracking_text(&progress(None, Some(end)), None, &TrackingLinks::default());
        assert_eq!(text.matches("✅").count(), 3, "{text}");
        assert!(
            text.contains("pull request opened: https://github.com/o/r/pull/2"),
            "{text}"
        );
        assert!(!text.contains("🔄"), "{text}");
    }
}
