//! An epic's plan: the tasks a planner returns, checked before anything is written (ids unique
//! and well formed, every dependency a task of the plan, no cycle, at most `max_tasks`, each task
//! with a title and a body), the order they can run in, which are ready once others are accepted,
//! and the plan as the epic's comment shows it (a table and a mermaid graph).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};

/// One task of a plan, as the planner returns it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Task {
    /// The planner's name for the task: letters, digits, `-` and `_`, at most 40 characters.
    pub id: String,
    pub title: String,
    /// The sub-issue's body, its acceptance checklist included.
    pub body: String,
    /// Ids of the tasks that must be accepted before this one starts.
    #[serde(default)]
    pub depends_on: Vec<String>,
}

/// A checked plan: its tasks in the planner's order. Read back (from a journal) it is checked
/// again, limits aside.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Wire")]
pub struct Plan {
    tasks: Vec<Task>,
}

/// Something wrong with a plan, named so the planner (or a person) can fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanError {
    /// Not the JSON of a plan.
    Unreadable(String),
    Empty,
    TooMany {
        count: usize,
        max: usize,
    },
    BadId {
        id: String,
    },
    DuplicateId {
        id: String,
    },
    NoTitle {
        id: String,
    },
    NoBody {
        id: String,
    },
    UnknownDependency {
        task: String,
        on: String,
    },
    /// The tasks of a cycle, in order (the first again at the end).
    Cycle {
        path: Vec<String>,
    },
    /// A new plan names a task an earlier plan dropped (its sub-issue is closed).
    Reused {
        id: String,
    },
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlanError::Unreadable(e) => write!(
                f,
                "the plan is not readable: {e}; return {{\"tasks\": [{{\"id\", \"title\", \"body\", \"dependsOn\"}}]}}"
            ),
            PlanError::Empty => f.write_str("the plan has no tasks"),
            PlanError::TooMany { count, max } => write!(
                f,
                "the plan has {count} tasks, more than epic.maxTasks ({max}): merge tasks, or raise the limit"
            ),
            PlanError::BadId { id } => write!(
                f,
                "task id `{}` is not a name: use letters, digits, `-` and `_` (at most {MAX_ID} characters)",
                quote(id)
            ),
            PlanError::DuplicateId { id } => write!(f, "two tasks are named `{id}`"),
            PlanError::NoTitle { id } => write!(f, "task `{id}` has no title"),
            PlanError::NoBody { id } => {
                write!(
                    f,
                    "task `{id}` has no body: say what to do and how it is accepted"
                )
            }
            PlanError::UnknownDependency { task, on } => write!(
                f,
                "task `{task}` depends on `{}`, which is no task of the plan",
                quote(on)
            ),
            PlanError::Cycle { path } => {
                write!(
                    f,
                    "the tasks depend on each other in a cycle: {}",
                    path.join(" → ")
                )
            }
            PlanError::Reused { id } => write!(
                f,
                "task `{id}` was dropped by an earlier plan of this epic (its sub-issue is closed): give the new task another id"
            ),
        }
    }
}

/// Longest task id.
pub(super) const MAX_ID: usize = 40;

/// Longest piece of the planner's text an error repeats.
const QUOTE_CHARS: usize = 40;

fn quote(s: &str) -> String {
    s.chars().take(QUOTE_CHARS).collect()
}

fn is_id(id: &str) -> bool {
    !id.is_empty()
        && id.chars().count() <= MAX_ID
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Wire {
    tasks: Vec<Task>,
}

impl TryFrom<Wire> for Plan {
    type Error = String;

    fn try_from(wire: Wire) -> Result<Plan, String> {
        Plan::check(wire.tasks, usize::MAX).map_err(|errors| {
            errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        })
    }
}

impl Plan {
    /// Read a planner's `{"tasks": […]}` and check it: every mistake found, at once.
    pub(crate) fn parse(json: &str, max_tasks: usize) -> Result<Plan, Vec<PlanError>> {
        let wire: Wire =
            serde_json::from_str(json).map_err(|e| vec![PlanError::Unreadable(e.to_string())])?;
        Plan::check(wire.tasks, max_tasks)
    }

    /// Check `tasks` as a plan: every mistake found, at once.
    pub fn check(tasks: Vec<Task>, max_tasks: usize) -> Result<Plan, Vec<PlanError>> {
        let mut errors = Vec::new();
        if tasks.is_empty() {
            errors.push(PlanError::Empty);
        }
        if tasks.len() > max_tasks {
            errors.push(PlanError::TooMany {
                count: tasks.len(),
                max: max_tasks,
            });
        }
        let mut seen = BTreeSet::new();
        for t in &tasks {
            if !is_id(&t.id) {
                errors.push(PlanError::BadId { id: t.id.clone() });
            } else if !seen.insert(t.id.as_str()) {
                errors.push(PlanError::DuplicateId { id: t.id.clone() });
            }
            if t.title.trim().is_empty() {
                errors.push(PlanError::NoTitle { id: t.id.clone() });
            }
            if t.body.trim().is_empty() {
                errors.push(PlanError::NoBody { id: t.id.clone() });
            }
        }
        for t in &tasks {
            for on in &t.depends_on {
                if !seen.contains(on.as_str()) {
                    errors.push(PlanError::UnknownDependency {
                        task: t.id.clone(),
                        on: on.clone(),
                    });
                }
            }
        }
        if errors.is_empty() {
            if let Some(path) = cycle(&tasks) {
                errors.push(PlanError::Cycle { path });
            }
        }
        if errors.is_empty() {
            Ok(Plan { tasks })
        } else {
            Err(errors)
        }
    }

    pub fn tasks(&self) -> &[Task] {
        &self.tasks
    }

    pub fn task(&self, id: &str) -> Option<&Task> {
        self.tasks.iter().find(|t| t.id == id)
    }

    /// The tasks in an order that runs each after those it depends on (the planner's order
    /// where it has a choice).
    pub fn order(&self) -> Vec<&Task> {
        let mut done: BTreeSet<&str> = BTreeSet::new();
        let mut order = Vec::with_capacity(self.tasks.len());
        while order.len() < self.tasks.len() {
            let next = self
                .tasks
                .iter()
                .find(|t| {
                    !done.contains(t.id.as_str())
                        && t.depends_on.iter().all(|d| done.contains(d.as_str()))
                })
                .expect("a checked plan has no cycle");
            done.insert(&next.id);
            order.push(next);
        }
        order
    }

    /// The tasks that may start now: not yet `started`, and every task they depend on
    /// `accepted`.
    pub fn ready<'p>(
        &'p self,
        accepted: &BTreeSet<String>,
        started: &BTreeSet<String>,
    ) -> Vec<&'p Task> {
        self.order()
            .into_iter()
            .filter(|t| !started.contains(&t.id) && !accepted.contains(&t.id))
            .filter(|t| t.depends_on.iter().all(|d| accepted.contains(d)))
            .collect()
    }

    /// The plan as the epic's comment shows it: a table (task, its sub-issue once created, what
    /// it depends on) and a mermaid graph of the dependencies. `issues`: task id → sub-issue.
    pub fn render(&self, issues: &BTreeMap<String, u64>) -> String {
        let name = |id: &str| match issues.get(id) {
            Some(n) => format!("#{n}"),
            None => "—".to_string(),
        };
        let mut out = String::from("| Task | Sub-issue | Depends on |\n|---|---|---|\n");
        for t in self.order() {
            let deps = if t.depends_on.is_empty() {
                "—".to_string()
            } else {
                t.depends_on
                    .iter()
                    .map(|d| format!("`{d}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            out.push_str(&format!(
                "| `{}` {} | {} | {deps} |\n",
                t.id,
                cell(&t.title),
                name(&t.id)
            ));
        }
        out.push_str("\n```mermaid\ngraph TD\n");
        for t in self.order() {
            let label = match issues.get(&t.id) {
                Some(n) => format!("#{n} {}", t.id),
                None => t.id.clone(),
            };
            out.push_str(&format!("  {}[\"{label}\"]\n", node(&t.id)));
            for d in &t.depends_on {
                out.push_str(&format!("  {} --> {}\n", node(d), node(&t.id)));
            }
        }
        out.push_str("```\n");
        out
    }
}

/// A task's title in a table cell: one line, no cell break, no HTML.
fn cell(s: &str) -> String {
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A mermaid node name for a task id (ids are letters, digits, `-` and `_`).
fn node(id: &str) -> String {
    format!("t_{}", id.replace('-', "_"))
}

/// A cycle among `tasks`' dependencies (every dependency names a task), if there is one.
fn cycle(tasks: &[Task]) -> Option<Vec<String>> {
    let deps: BTreeMap<&str, &[String]> = tasks
        .iter()
        .map(|t| (t.id.as_str(), t.depends_on.as_slice()))
        .collect();
    // 0: not visited, 1: on the current path, 2: done.
    let mut mark: BTreeMap<&str, u8> = BTreeMap::new();
    let mut path: Vec<&str> = Vec::new();
    fn visit<'t>(
        id: &'t str,
        deps: &BTreeMap<&'t str, &'t [String]>,
        mark: &mut BTreeMap<&'t str, u8>,
        path: &mut Vec<&'t str>,
    ) -> Option<Vec<String>> {
        match mark.get(id).copied() {
            Some(2) => return None,
            Some(1) => {
                let start = path.iter().position(|p| *p == id).unwrap_or(0);
                let mut cycle: Vec<String> = path[start..].iter().map(|s| s.to_string()).collect();
                cycle.push(id.to_string());
                return Some(cycle);
            }
            _ => {}
        }
        mark.insert(id, 1);
        path.push(id);
        for d in deps.get(id).copied().unwrap_or_default() {
            if let Some(c) = visit(d, deps, mark, path) {
                return Some(c);
            }
        }
        path.pop();
        mark.insert(id, 2);
        None
    }
    tasks
        .iter()
        .find_map(|t| visit(&t.id, &deps, &mut mark, &mut path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(id: &str, deps: &[&str]) -> Task {
        Task {
            id: id.into(),
            title: format!("Do {id}"),
            body: format!("- [ ] {id} works"),
            depends_on: deps.iter().map(|d| d.to_string()).collect(),
        }
    }

    fn ids(tasks: &[&Task]) -> Vec<String> {
        tasks.iter().map(|t| t.id.clone()).collect()
    }

    fn set(ids: &[&str]) -> BTreeSet<String> {
        ids.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_plan_runs_each_task_after_what_it_depends_on() {
        let plan = Plan::check(
            vec![
                task("docs", &["format", "units"]),
                task("format", &["units"]),
                task("units", &[]),
                task("lint", &[]),
            ],
            8,
        )
        .unwrap();
        assert_eq!(ids(&plan.order()), ["units", "format", "docs", "lint"]);
        let none = BTreeSet::new();
        assert_eq!(ids(&plan.ready(&none, &none)), ["units", "lint"]);
        assert_eq!(ids(&plan.ready(&none, &set(&["units"]))), ["lint"]);
        assert_eq!(
            ids(&plan.ready(&set(&["units"]), &set(&["units", "lint"]))),
            ["format"]
        );
        assert_eq!(
            ids(&plan.ready(
                &set(&["units", "format", "lint"]),
                &set(&["units", "format", "lint"])
            )),
            ["docs"]
        );
    }

    #[test]
    fn every_mistake_of_a_plan_is_named_at_once() {
        let mut untitled = task("b", &["nowhere"]);
        untitled.title = " ".into();
        untitled.body = String::new();
        let errors = Plan::check(
            vec![
                task("a", &[]),
                task("a", &[]),
                untitled,
                task("bad id!", &[]),
            ],
            3,
        )
        .unwrap_err();
        assert_eq!(
            errors,
            [
                PlanError::TooMany { count: 4, max: 3 },
                PlanError::DuplicateId { id: "a".into() },
                PlanError::NoTitle { id: "b".into() },
                PlanError::NoBody { id: "b".into() },
                PlanError::BadId {
                    id: "bad id!".into()
                },
                PlanError::UnknownDependency {
                    task: "b".into(),
                    on: "nowhere".into()
                },
            ]
        );
        assert_eq!(Plan::check(vec![], 3).unwrap_err(), [PlanError::Empty]);
    }

    #[test]
    fn a_cycle_is_refused_and_named() {
        let errors = Plan::check(
            vec![
                task("a", &["c"]),
                task("b", &["a"]),
                task("c", &["b"]),
                task("d", &[]),
            ],
            8,
        )
        .unwrap_err();
        assert_eq!(
            errors,
            [PlanError::Cycle {
                path: vec!["a".into(), "c".into(), "b".into(), "a".into()]
            }]
        );
        assert_eq!(
            errors[0].to_string(),
            "the tasks depend on each other in a cycle: a → c → b → a"
        );
        let selfish = Plan::check(vec![task("a", &["a"])], 8).unwrap_err();
        assert_eq!(
            selfish,
            [PlanError::Cycle {
                path: vec!["a".into(), "a".into()]
            }]
        );
    }

    #[test]
    fn a_planners_json_is_read_and_anything_else_is_refused_clearly() {
        let plan = Plan::parse(
            r#"{"tasks": [{"id": "units", "title": "Units", "body": "- [ ] d, w, y"},
                          {"id": "docs", "title": "Docs", "body": "- [ ] README", "dependsOn": ["units"]}]}"#,
            8,
        )
        .unwrap();
        assert_eq!(plan.task("docs").unwrap().depends_on, ["units"]);
        for bad in [
            "not json",
            r#"{"tasks": "many"}"#,
            r#"{"tasks": [{"id": "a", "title": "A", "body": "b", "after": ["x"]}]}"#,
        ] {
            let errors = Plan::parse(bad, 8).unwrap_err();
            assert!(
                matches!(&errors[..], [PlanError::Unreadable(_)]),
                "{bad}: {errors:?}"
            );
            assert!(errors[0].to_string().contains("dependsOn"), "{}", errors[0]);
        }
    }

    #[test]
    fn the_plan_renders_as_a_table_and_a_mermaid_graph() {
        let mut hostile = task("docs", &["units"]);
        hostile.title = "Docs | <img src=x>\nsecond line".into();
        let plan = Plan::check(vec![hostile, task("units", &[])], 8).unwrap();
        let issues: BTreeMap<String, u64> = [("units".to_string(), 12)].into();
        let text = plan.render(&issues);
        assert_eq!(
            text,
            "| Task | Sub-issue | Depends on |\n|---|---|---|\n\
             | `units` Do units | #12 | — |\n\
             | `docs` Docs \\| &lt;img src=x&gt; second line | — | `units` |\n\
             \n```mermaid\ngraph TD\n  t_units[\"#12 units\"]\n  t_docs[\"docs\"]\n  t_units --> t_docs\n```\n"
        );
    }
}
