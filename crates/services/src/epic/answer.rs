//! What the planner and the reviewer answer, read from an agent's final text the way the agent
//! protocol reads the stages' answers: the last JSON object that is the answer (a fenced ```json
//! block first, else a bare `{…}`), repaired where it is near-JSON. An answer that cannot be read
//! is an error naming what was expected — never an empty plan, never an acceptance.

use serde_json::{Map, Value};

use super::machine::Verdict;
use super::plan::{Plan, PlanError};
use crate::agent::{balanced_objects, fenced_json_blocks, repair_json};

/// The last object in `text` that has `key`: from the fenced blocks, else the bare objects.
fn last_object_with(text: &str, key: &str) -> Option<Map<String, Value>> {
    let parse = |s: &str| -> Option<Map<String, Value>> {
        let value = serde_json::from_str::<Value>(s)
            .or_else(|_| serde_json::from_str::<Value>(&repair_json(s)))
            .ok()?;
        match value {
            Value::Object(m) if m.contains_key(key) => Some(m),
            _ => None,
        }
    };
    let fenced = fenced_json_blocks(text);
    fenced
        .iter()
        .rev()
        .find_map(|b| parse(b))
        .or_else(|| balanced_objects(text).iter().rev().find_map(|b| parse(b)))
}

/// The planner's plan, checked (at most `max_tasks` tasks).
pub fn read_plan(text: &str, max_tasks: usize) -> Result<Plan, Vec<PlanError>> {
    let Some(answer) = last_object_with(text, "tasks") else {
        return Err(vec![PlanError::Unreadable(
            "no JSON object with `tasks` in the planner's answer".into(),
        )]);
    };
    let json = Value::Object(answer).to_string();
    Plan::parse(&json, max_tasks)
}

/// The reviewer's verdict: `{"verdict": "accepted"}`, `{"verdict": "needs-revision", "feedback":
/// "…"}`, `{"verdict": "escalate", "reason": "…"}` or `{"verdict": "replan", "reason": "…"}`.
pub fn read_verdict(text: &str) -> Result<Verdict, String> {
    const EXPECTED: &str = "answer {\"verdict\": \"accepted\"}, {\"verdict\": \"needs-revision\", \"feedback\": \"…\"}, {\"verdict\": \"escalate\", \"reason\": \"…\"} or {\"verdict\": \"replan\", \"reason\": \"…\"}";
    let Some(answer) = last_object_with(text, "verdict") else {
        return Err(format!("no verdict in the reviewer's answer: {EXPECTED}"));
    };
    let words = |key: &str| {
        answer
            .get(key)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    match words("verdict").as_deref() {
        Some("accepted") => Ok(Verdict::Accepted),
        Some("needs-revision") => match words("feedback") {
            Some(feedback) => Ok(Verdict::NeedsRevision { feedback }),
            None => Err(format!(
                "a needs-revision verdict without feedback says nothing to change: {EXPECTED}"
            )),
        },
        Some("escalate") => match words("reason") {
            Some(reason) => Ok(Verdict::Escalate { reason }),
            None => Err(format!("an escalation without a reason: {EXPECTED}")),
        },
        Some("replan") => match words("reason") {
            Some(reason) => Ok(Verdict::Replan { reason }),
            None => Err(format!(
                "a replan verdict without a reason says nothing the planner can change: {EXPECTED}"
            )),
        },
        Some(other) => Err(format!(
            "unknown verdict `{}`: {EXPECTED}",
            other.chars().take(40).collect::<String>()
        )),
        None => Err(format!("the verdict is not a word: {EXPECTED}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::{AgentDefinition, DEFAULT_AGENTS};

    /// The prompt of built-in role `role`, as an agent receives it.
    fn prompt(role: &str) -> String {
        let (_, text) = DEFAULT_AGENTS.iter().find(|(n, _)| *n == role).unwrap();
        let (def, _) = AgentDefinition::parse(std::path::Path::new(role), role, text).unwrap();
        def.prompt
    }

    #[test]
    fn the_plan_the_planners_prompt_shows_is_one_its_reader_takes() {
        let prompt = prompt("planner");
        assert_eq!(fenced_json_blocks(&prompt).len(), 1, "one example");
        let plan = read_plan(&prompt, 8).unwrap();
        assert!(plan.tasks().len() >= 2, "{plan:?}");
        assert!(
            plan.tasks().iter().any(|t| !t.depends_on.is_empty()),
            "the example shows a dependency"
        );
        for task in plan.tasks() {
            assert!(task.body.contains("- [ ] "), "{}: a checklist", task.id);
            assert!(
                task.body.contains("Tests first"),
                "{}: tests first",
                task.id
            );
        }
        // The rules it states are those the plan is checked against.
        let id_rule = format!(
            "letters, digits, `-` and `_` only, at most {} characters",
            super::super::plan::MAX_ID
        );
        assert!(prompt.contains(&id_rule), "{id_rule}");
        for rule in [
            "no cycle",
            "non-empty",
            "`dependsOn`",
            "at most the number of tasks",
        ] {
            assert!(prompt.contains(rule), "{rule}");
        }
        let default_limit = format!(
            "`epic.maxTasks`, {} unless configured",
            crate::config::EpicSettings::default().max_tasks
        );
        assert!(prompt.contains(&default_limit), "{default_limit}");
        assert!(
            read_plan(&prompt, 1).is_err(),
            "and held to the limit given"
        );
    }

    #[test]
    fn each_verdict_the_reviewers_prompt_shows_is_one_its_reader_takes() {
        let prompt = prompt("reviewer");
        let verdicts: Vec<Verdict> = fenced_json_blocks(&prompt)
            .into_iter()
            .map(|block| read_verdict(block).unwrap_or_else(|e| panic!("{block}: {e}")))
            .collect();
        assert!(
            matches!(
                &verdicts[..],
                [
                    Verdict::Accepted,
                    Verdict::NeedsRevision { .. },
                    Verdict::Escalate { .. },
                    Verdict::Replan { .. }
                ]
            ),
            "{verdicts:?}"
        );
        assert!(prompt.contains("review criteria"));
        assert_eq!(
            read_verdict(&prompt).ok(),
            verdicts.last().cloned(),
            "the last block counts"
        );
    }

    #[test]
    fn the_planners_last_plan_is_read_from_its_text() {
        let text = "I looked around.\n\n```json\n{\"tasks\": [{\"id\": \"old\", \"title\": \"Old\", \"body\": \"x\"}]}\n```\n\
                    On second thought:\n\n```json\n{\"tasks\": [\n  {\"id\": \"units\", \"title\": \"Units\", \"body\": \"- [ ] d\",},\n  \
                    {\"id\": \"docs\", \"title\": \"Docs\", \"body\": \"- [ ] README\", \"dependsOn\": [\"units\"]}\n]}\n```\nDone.";
        let plan = read_plan(text, 8).unwrap();
        let ids: Vec<&str> = plan.tasks().iter().map(|t| t.id.as_str()).collect();
        assert_eq!(
            ids,
            ["units", "docs"],
            "the last block, its trailing comma repaired"
        );
        let bare = "Plan: {\"tasks\": [{\"id\": \"a\", \"title\": \"A\", \"body\": \"b\"}]} — that is all.";
        assert_eq!(read_plan(bare, 8).unwrap().tasks().len(), 1);
    }

    #[test]
    fn a_planner_without_a_plan_or_with_a_bad_one_is_refused_with_the_reason() {
        let none = read_plan("I could not decide.", 8).unwrap_err();
        assert!(matches!(&none[..], [PlanError::Unreadable(_)]), "{none:?}");
        let cycle = "```json\n{\"tasks\": [{\"id\": \"a\", \"title\": \"A\", \"body\": \"b\", \"dependsOn\": [\"a\"]}]}\n```";
        let errors = read_plan(cycle, 8).unwrap_err();
        assert!(
            matches!(&errors[..], [PlanError::Cycle { .. }]),
            "{errors:?}"
        );
        let empty = read_plan("```json\n{\"tasks\": []}\n```", 8).unwrap_err();
        assert_eq!(empty, [PlanError::Empty]);
    }

    #[test]
    fn a_verdict_is_read_and_nothing_unclear_is_an_acceptance() {
        assert_eq!(
            read_verdict("Looks right.\n```json\n{\"verdict\": \"accepted\"}\n```"),
            Ok(Verdict::Accepted)
        );
        assert_eq!(
            read_verdict("{\"verdict\": \"needs-revision\", \"feedback\": \"handle 0\"}"),
            Ok(Verdict::NeedsRevision {
                feedback: "handle 0".into()
            })
        );
        assert_eq!(
            read_verdict("{\"verdict\": \"escalate\", \"reason\": \"needs a product call\"}"),
            Ok(Verdict::Escalate {
                reason: "needs a product call".into()
            })
        );
        assert_eq!(
            read_verdict(
                "{\"verdict\": \"replan\", \"reason\": \"the units task must come first\"}"
            ),
            Ok(Verdict::Replan {
                reason: "the units task must come first".into()
            })
        );
        for unclear in [
            "Accepted!",
            "{\"verdict\": \"approved\"}",
            "{\"verdict\": \"ACCEPTED \"}",
            "{\"verdict\": true}",
            "{\"verdict\": \"needs-revision\"}",
            "{\"verdict\": \"escalate\", \"reason\": \"  \"}",
            "{\"verdict\": \"replan\"}",
            "{\"verdict\": \"re-plan\", \"reason\": \"x\"}",
            "```json\n{\"verdict\": \"accepted\"}\n```\nActually:\n```json\n{\"verdict\": \"maybe\"}\n```",
        ] {
            assert!(read_verdict(unclear).is_err(), "{unclear}");
        }
    }
}
