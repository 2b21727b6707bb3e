//! What a run shows inside GitHub Actions: the job summary (Markdown for `$GITHUB_STEP_SUMMARY`),
//! the gate findings as workflow-command annotations, and the step outputs for `$GITHUB_OUTPUT`.

use std::fmt::Write as _;

use super::comments::{dimension_result, human_duration, human_tokens, score_line};
use super::gates::{cell, gate_summary_table};
use super::summary::{cost, headline, run_map};
use crate::config::Dimension;
use crate::gates::{FindingSeverity, GateReport, GateStatus, verdict};
use crate::pipeline::{RunEnd, RunSummary};

/// Annotations of one level a step shows (GitHub keeps 10 errors and 10 warnings per step).
const ANNOTATIONS_PER_LEVEL: usize = 10;

/// The run as Markdown for the job summary: how it ended, the agents, the gate history and the
/// latest gate table, the audit score, the run map (mermaid) and the warnings.
pub fn job_summary(s: &RunSummary) -> String {
    let mut out = String::new();
    let _ = match s.title.trim().is_empty() {
        true => writeln!(out, "## supervisor · {}#{}\n", s.repo, s.issue),
        false => writeln!(
            out,
            "## supervisor · {}#{} — {}\n",
            s.repo,
            s.issue,
            one_line(&s.title)
        ),
    };
    let _ = writeln!(out, "**{}**\n", one_line(&headline(&s.end)));
    if let RunEnd::PullRequest { number, url, .. } = &s.end {
        let _ = writeln!(out, "Pull request: [#{number}]({url})\n");
    }
    if let RunEnd::DryRun { plan } = &s.end {
        for step in plan {
            let _ = writeln!(out, "- {}", one_line(step));
        }
        out.push('\n');
    }
    table(
        &mut out,
        &["run", "duration", "tokens", "rejections", "gate bounces"],
        [vec![
            format!("`{}`", cell(&s.run_id)),
            human_duration(s.duration_ms),
            format!(
                "{}{}",
                human_tokens(s.total_tokens()),
                cost(s).map(|c| format!(" ({c})")).unwrap_or_default()
            ),
            s.rejections.to_string(),
            s.gate_bounces.to_string(),
        ]],
    );
    if !s.agents.is_empty() {
        out.push_str("### Agents\n\n");
        let rows = s.agents.iter().map(|a| {
            vec![
                cell(&a.stage),
                cell(&a.agent),
                a.attempt.to_string(),
                human_duration(a.duration_ms),
                human_tokens(a.tokens),
                a.tool_calls.to_string(),
                cell(a.model.as_deref().unwrap_or("-")),
                cell(&a.exit),
            ]
        });
        let headers = [
            "stage",
            "agent",
            "try",
            "time",
            "tokens",
            "tool calls",
            "model",
            "exit",
        ];
        table(&mut out, &headers, rows);
    }
    if !s.gate_rounds.is_empty() {
        out.push_str("### Gates\n\n");
        let rows = s.gate_rounds.iter().map(|g| {
            vec![
                cell(&g.stage),
                g.attempt.to_string(),
                g.verdict.to_string(),
                cell(&g.failing.join(", ")),
                cell(&g.not_run.join(", ")),
                cell(&g.warnings.join(", ")),
            ]
        });
        let headers = [
            "stage", "attempt", "result", "failing", "not run", "warnings",
        ];
        table(&mut out, &headers, rows);
    }
    if !s.gates.is_empty() {
        out.push_str("#### Latest gate run\n\n");
        out.push_str(&gate_summary_table(&s.gates));
        out.push('\n');
    }
    if let Some(score) = &s.score {
        out.push_str("### Audit score\n\n");
        let _ = writeln!(out, "{}\n", score_line(score));
        let rows = Dimension::ALL
            .iter()
            .map(|d| vec![d.to_string(), dimension_result(score, *d).to_string()]);
        table(&mut out, &["dimension", "result"], rows);
    }
    if !s.transitions.is_empty() {
        out.push_str("### Run map\n\n```mermaid\n");
        out.push_str(&run_map(&s.transitions));
        out.push_str("```\n\n");
    }
    if !s.warnings.is_empty() {
        out.push_str("### Warnings\n\n");
        for w in &s.warnings {
            let _ = writeln!(out, "- {}", one_line(w));
        }
        out.push('\n');
    }
    if !s.journal.is_empty() {
        let _ = writeln!(out, "<sub>journal: `{}`</sub>", cell(&s.journal));
    }
    out
}

/// A Markdown table (cells already escaped) and a blank line.
fn table(out: &mut String, headers: &[&str], rows: impl IntoIterator<Item = Vec<String>>) {
    let _ = writeln!(out, "| {} |", headers.join(" | "));
    let _ = writeln!(out, "|{}", "---|".repeat(headers.len()));
    for row in rows {
        let _ = writeln!(out, "| {} |", row.join(" | "));
    }
    out.push('\n');
}

/// The job summary of a run that could not start (configuration, credentials, GitHub).
pub fn error_job_summary(issue: u64, message: &str) -> String {
    format!(
        "## supervisor · issue #{issue}\n\n**✖ supervisor could not run:** {}\n",
        one_line(message)
    )
}

/// The gate findings of the latest gate run as workflow commands: each finding of a blocking gate
/// is an `::error` (its warnings `::warning`), a blocking gate without an error finding is one
/// `::error` naming it, and the other gates' warnings and "not run" are `::warning`s. At most 10 of
/// each level; the tenth says how many more there are.
pub fn annotations(s: &RunSummary) -> Vec<String> {
    let mut errors: Vec<Annotation> = Vec::new();
    let mut warnings: Vec<Annotation> = Vec::new();
    for r in &s.gates {
        let blocks = r.blocks();
        let mut reported_error = false;
        for f in &r.findings {
            let level = match f.severity {
                FindingSeverity::Error if blocks => Level::Error,
                FindingSeverity::Error | FindingSeverity::Warning => Level::Warning,
                FindingSeverity::Info => continue,
            };
            let a = Annotation {
                level,
                file: f.file.clone(),
                line: f.line.filter(|l| *l > 0),
                title: format!("supervisor {}: {}", r.name, f.rule),
                message: f.message.trim().to_string(),
            };
            match level {
                Level::Error => {
                    reported_error = true;
                    errors.push(a);
                }
                Level::Warning => warnings.push(a),
            }
        }
        let whole = |level| Annotation {
            level,
            file: None,
            line: None,
            title: format!("supervisor {}", r.name),
            message: gate_line(r),
        };
        if blocks && !reported_error {
            errors.push(whole(Level::Error));
        } else if !blocks
            && r.findings.is_empty()
            && matches!(r.status, GateStatus::Warn | GateStatus::NotRun { .. })
        {
            warnings.push(whole(Level::Warning));
        }
    }
    let mut lines = capped(errors);
    lines.extend(capped(warnings));
    lines
}

/// The step outputs: `end`, `pr-url`, `score`, `verdict`, `journal` and `summary` (JSON).
pub fn action_outputs(s: &RunSummary) -> Vec<(&'static str, String)> {
    let end = s.end.kind().to_string();
    let pr_url = match &s.end {
        RunEnd::PullRequest { url, .. } | RunEnd::Revised { url, .. } => url.clone(),
        _ => String::new(),
    };
    let score = s
        .score
        .as_ref()
        .map(|sc| format!("{:.2}", sc.ratio()))
        .unwrap_or_default();
    let verdict = if s.gates.is_empty() {
        String::new()
    } else {
        serde_json::to_value(verdict(&s.gates))
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default()
    };
    vec![
        ("end", end),
        ("pr-url", pr_url),
        ("score", score),
        ("verdict", verdict),
        ("journal", s.journal.clone()),
        (
            "summary",
            serde_json::to_string(s).unwrap_or_else(|_| "{}".into()),
        ),
    ]
}

/// The step outputs of a run that could not start: `end` is `error`.
pub fn error_outputs(message: &str) -> Vec<(&'static str, String)> {
    vec![
        ("end", "error".into()),
        ("pr-url", String::new()),
        ("score", String::new()),
        ("verdict", String::new()),
        ("journal", String::new()),
        (
            "summary",
            serde_json::json!({ "ok": false, "error": message }).to_string(),
        ),
    ]
}

/// Outputs in `$GITHUB_OUTPUT`'s multiline form (`name<<DELIMITER`, the value, `DELIMITER`).
/// `delimiter` must not be a line of any value: see [`delimiter_fits`].
pub fn github_output(outputs: &[(&str, String)], delimiter: &str) -> String {
    let mut out = String::new();
    for (name, value) in outputs {
        let _ = writeln!(out, "{name}<<{delimiter}\n{value}\n{delimiter}");
    }
    out
}

/// Whether `delimiter` can close every one of `outputs` (it is none of their lines).
pub fn delimiter_fits(outputs: &[(&str, String)], delimiter: &str) -> bool {
    !delimiter.is_empty()
        && outputs
            .iter()
            .all(|(_, v)| v.lines().all(|l| l.trim_end_matches('\r') != delimiter))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    Error,
    Warning,
}

struct Annotation {
    level: Level,
    file: Option<String>,
    line: Option<u32>,
    title: String,
    message: String,
}

impl Annotation {
    /// `::error file=…,line=…,title=…::message`, escaped by GitHub's rules.
    fn command(&self) -> String {
        let mut props = Vec::new();
        if let Some(f) = &self.file {
            props.push(format!("file={}", escape_property(f)));
            if let Some(l) = self.line {
                props.push(format!("line={l}"));
            }
        }
        props.push(format!("title={}", escape_property(&self.title)));
        format!(
            "::{} {}::{}",
            match self.level {
                Level::Error => "error",
                Level::Warning => "warning",
            },
            props.join(","),
            escape_data(&self.message)
        )
    }
}

/// At most [`ANNOTATIONS_PER_LEVEL`] lines; the last one counts what was left out.
fn capped(list: Vec<Annotation>) -> Vec<String> {
    if list.len() <= ANNOTATIONS_PER_LEVEL {
        return list.iter().map(Annotation::command).collect();
    }
    let level = list[0].level;
    let left = list.len() - (ANNOTATIONS_PER_LEVEL - 1);
    let mut lines: Vec<String> = list
        .iter()
        .take(ANNOTATIONS_PER_LEVEL - 1)
        .map(Annotation::command)
        .collect();
    lines.push(
        Annotation {
            level,
            file: None,
            line: None,
            title: "supervisor".into(),
            message: format!(
                "{left} more gate finding{} of this level: see the issue's gate comment and the run journal",
                if left == 1 { "" } else { "s" }
            ),
        }
        .command(),
    );
    lines
}

/// `tsc: fail — 2 type errors`.
fn gate_line(r: &GateReport) -> String {
    let status = match &r.status {
        GateStatus::NotRun { reason, .. } if r.required => format!("not run (required): {reason}"),
        other => other.label(),
    };
    if r.summary.trim().is_empty() {
        format!("{}: {status}", r.name)
    } else {
        format!("{}: {status} — {}", r.name, r.summary.trim())
    }
}

/// A workflow command's message: `%`, CR and LF escaped, so the text stays on its line.
pub fn escape_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// A workflow command's property value: as [`escape_data`], and `:` and `,` too.
pub fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// Text kept to one Markdown line.
fn one_line(s: &str) -> String {
    s.split(['\r', '\n'])
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::AuditScore;
    use crate::gates::Finding;
    use crate::pipeline::{AgentLine, GateRound, Transition, TransitionKind};

    fn finding(
        file: &str,
        line: u32,
        rule: &str,
        message: &str,
        severity: FindingSeverity,
    ) -> Finding {
        Finding {
            file: Some(file.into()),
            line: Some(line),
            rule: rule.into(),
            message: message.into(),
            severity,
        }
    }

    fn report(
        gate: &str,
        status: GateStatus,
        required: bool,
        findings: Vec<Finding>,
    ) -> GateReport {
        let kind = crate::config::GateKind::parse(gate).unwrap_or(crate::config::GateKind::Command);
        GateReport {
            findings,
            duration_ms: 1500,
            required,
            summary: format!("{gate} checked"),
            ..GateReport::new(kind, gate, status)
        }
    }

    fn round(failing: &[&str], not_run: &[&str]) -> GateRound {
        let names = |l: &[&str]| l.iter().map(|n| n.to_string()).collect();
        GateRound {
            stage: "Implementation".into(),
            attempt: 1,
            verdict: crate::gates::Verdict::NotBlocked,
            failing: names(failing),
            not_run: names(not_run),
            warnings: Vec::new(),
        }
    }

    fn summary() -> RunSummary {
        use TransitionKind::*;
        let t = |a: &str, b: &str, k| Transition::new(a, b, k, "r");
        RunSummary {
            run_id: crate::ids::RunId::new("1-20261123T100000Z"),
            repo: "acme/widgets".into(),
            issue: 1,
            title: "Accept hours\nin parseDuration".into(),
            end: RunEnd::PullRequest {
                number: 2,
                url: "http://127.0.0.1:1/acme/widgets/pull/2".into(),
                created: true,
            },
            agents: vec![AgentLine {
                stage: "Implementation".into(),
                agent: "developer".into(),
                attempt: 2,
                backend: "scripted".into(),
                duration_ms: 65_000,
                tokens: 3500,
                cost_usd: 0.0,
                tool_calls: 3,
                model: None,
                exit: "completed".into(),
            }],
            transitions: vec![
                t("Implementation", "Implementation", GateBounce),
                t("Implementation", "Audit", Forward),
                t("Audit", "Done", Forward),
            ],
            gate_rounds: vec![GateRound {
                verdict: crate::gates::Verdict::Blocked,
                ..round(&["tsc"], &["lsp"])
            }],
            gates: vec![
                report(
                    "tsc",
                    GateStatus::Fail,
                    false,
                    vec![finding(
                        "src/a, b.ts",
                        2,
                        "TS2322",
                        "100% wrong:\nType 'string' is not assignable",
                        FindingSeverity::Error,
                    )],
                ),
                report("lsp", GateStatus::not_run("pylsp not found"), false, vec![]),
                report("ci", GateStatus::not_run("no token"), true, vec![]),
                report(
                    "traceability",
                    GateStatus::Warn,
                    false,
                    vec![
                        finding(
                            "src/a.ts",
                            0,
                            "test-parity",
                            "no test touches src/a.ts",
                            FindingSeverity::Warning,
                        ),
                        finding(
                            "src/a.ts",
                            1,
                            "note",
                            "informational",
                            FindingSeverity::Info,
                        ),
                    ],
                ),
            ],
            rejections: 0,
            gate_bounces: 1,
            score: Some(AuditScore {
                passing: 7,
                total: 8,
                threshold: 0.75,
                passed: true,
                failing: vec![Dimension::TestQuality],
                excluded: vec![],
                critical: vec![],
                claimed: None,
            }),
            warnings: vec!["setup: npm ci failed".into()],
            journal: ".supervisor/runs/1-20261123T100000Z/events.jsonl".into(),
            duration_ms: 4200,
        }
    }

    #[test]
    fn job_summary_has_every_part() {
        let md = job_summary(&summary());
        insta::assert_snapshot!(md);
        assert!(md.starts_with("## supervisor · acme/widgets#1 — Accept hours in parseDuration\n"));
        assert!(
            md.contains("| Implementation | developer | 2 | 1m 05s | 3.5k | 3 | - | completed |")
        );
        assert!(md.contains("| Implementation | 1 | blocked | tsc | lsp |  |"));
        assert!(md.contains("| test-quality | ❌ fail |"));
        assert!(md.contains("```mermaid\nflowchart LR\n"));
        assert!(md.contains("Pull request: [#2](http://127.0.0.1:1/acme/widgets/pull/2)"));
        assert!(md.contains("Verdict: **blocked**"));
    }

    #[test]
    fn annotations_follow_githubs_escaping() {
        let lines = annotations(&summary());
        assert_eq!(
            lines,
            [
                "::error file=src/a%2C b.ts,line=2,title=supervisor tsc%3A TS2322::100%25 wrong:%0AType 'string' is not assignable",
                "::error title=supervisor ci::ci: not run (required): no token — ci checked",
                "::warning title=supervisor lsp::lsp: not run: pylsp not found — lsp checked",
                "::warning file=src/a.ts,title=supervisor traceability%3A test-parity::no test touches src/a.ts",
            ]
        );
        for l in &lines {
            assert!(!l.contains('\n') && !l.contains('\r'));
        }
    }

    #[test]
    fn annotations_are_capped_per_level_with_a_count() {
        let mut s = summary();
        s.gates = vec![report(
            "tsc",
            GateStatus::Fail,
            false,
            (1..=25)
                .map(|i| finding("src/a.ts", i, "TS1", "bad", FindingSeverity::Error))
                .collect(),
        )];
        let lines = annotations(&s);
        assert_eq!(lines.len(), 10);
        assert!(lines[8].starts_with("::error file=src/a.ts,line=9,"));
        assert_eq!(
            lines[9],
            "::error title=supervisor::16 more gate findings of this level: see the issue's gate comment and the run journal"
        );
    }

    #[test]
    fn outputs_name_the_end_score_verdict_and_summary() {
        let s = summary();
        let out = action_outputs(&s);
        let get = |k: &str| out.iter().find(|(n, _)| *n == k).unwrap().1.clone();
        assert_eq!(get("end"), "pull-request");
        assert_eq!(get("pr-url"), "http://127.0.0.1:1/acme/widgets/pull/2");
        assert_eq!(get("score"), "0.88");
        assert_eq!(get("verdict"), "blocked");
        let json: serde_json::Value = serde_json::from_str(&get("summary")).unwrap();
        assert_eq!(json["issue"], 1);

        let mut stopped = s.clone();
        stopped.end = RunEnd::Stopped {
            stage: "Audit".into(),
            reason: "too many rejections".into(),
        };
        stopped.score = None;
        stopped.gates.clear();
        let out = action_outputs(&stopped);
        assert_eq!(out[0], ("end", "stopped".to_string()));
        assert!(
            out.iter()
                .all(|(n, v)| !matches!(*n, "pr-url" | "score" | "verdict") || v.is_empty())
        );
        assert_eq!(error_outputs("no token")[0].1, "error");
    }

    #[test]
    fn output_file_entries_use_a_delimiter_no_value_contains() {
        let outputs = vec![
            ("summary", "{\n\"a\": 1\n}".to_string()),
            ("end", "stopped".into()),
        ];
        assert_eq!(
            github_output(&outputs, "EOF_1"),
            "summary<<EOF_1\n{\n\"a\": 1\n}\nEOF_1\nend<<EOF_1\nstopped\nEOF_1\n"
        );
        assert!(delimiter_fits(&outputs, "EOF_1"));
        let clash = vec![("summary", "x\nEOF_1\ny".to_string())];
        assert!(!delimiter_fits(&clash, "EOF_1"));
        assert!(delimiter_fits(&clash, "EOF_2"));
    }
}
