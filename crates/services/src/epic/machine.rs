//! An epic's progress as a fold of what happened to it, and the decision of what comes next —
//! without I/O, so a driver can journal each [`Happened`] before acting and resume after a crash
//! by folding its journal again: what was recorded is not done twice.
//!
//! The order: the plan; one sub-issue per task, in the plan's order (so a task's blockers exist
//! before it), each linked under the epic and blocked by the tasks it depends on; the plan posted
//! on the epic; then tasks start once every task they depend on is accepted, at most
//! `max_concurrency` at once; each pull request is reviewed — accepted (merged into the epic
//! branch with `branch` integration), sent back with feedback until `max_iterations`, or
//! escalated to a person; when every task is accepted or escalated, the epic's pull request (with
//! `branch` integration) and its summary.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::plan::{Plan, PlanError, Task};
use crate::config::{EpicIntegration, EpicSettings};

/// How the tasks' work comes together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Integration {
    /// Each task builds on an epic branch its accepted predecessors were merged into; one pull
    /// request from that branch at the end.
    Branch,
    /// Each task's pull request targets the default branch; a person merges them.
    Independent,
}

/// The limits an epic runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_concurrency: usize,
    /// Reviews a task may have before it is escalated instead of sent back again.
    pub max_iterations: u32,
    pub integration: Integration,
}

impl From<EpicIntegration> for Integration {
    fn from(integration: EpicIntegration) -> Integration {
        match integration {
            EpicIntegration::Branch => Integration::Branch,
            EpicIntegration::Independent => Integration::Independent,
        }
    }
}

/// The limits the repository's `epic` settings set.
impl From<&EpicSettings> for Limits {
    fn from(settings: &EpicSettings) -> Limits {
        Limits {
            max_concurrency: settings.max_concurrency,
            max_iterations: settings.max_iterations,
            integration: settings.integration.into(),
        }
    }
}

/// A reviewer's verdict on a task's pull request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "kebab-case")]
pub enum Verdict {
    Accepted,
    NeedsRevision {
        feedback: String,
    },
    Escalate {
        reason: String,
    },
    /// The plan is wrong for this task (a task missing, a wrong cut, a dependency it lacks): the
    /// planner plans the tasks not yet accepted again.
    Replan {
        reason: String,
    },
}

/// What a new plan changed, as the plan's comment tells it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Revision {
    /// The task whose review asked for the new plan.
    pub task: String,
    pub reason: String,
    pub added: Vec<String>,
    /// Tasks whose title or body changed.
    pub changed: Vec<String>,
    pub dropped: Vec<String>,
    /// Tasks done with (accepted, escalated, closed) that the planner's answer changed or left
    /// out: kept as they were.
    pub kept: Vec<String>,
}

/// What happened to the epic (its journal's events).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Happened {
    Planned {
        plan: Plan,
    },
    /// The planner planned again, as a review asked: the new plan and what it changed.
    Replanned {
        plan: Plan,
        revision: Revision,
    },
    /// The new plan a review asked for was refused (said on the epic): the task that asked is
    /// handed to a person.
    ReplanRefused {
        task: String,
        errors: Vec<String>,
    },
    SubIssueCreated {
        task: String,
        number: u64,
        id: u64,
    },
    Linked {
        task: String,
    },
    Blocked {
        task: String,
        on: String,
    },
    /// A dependency a new plan no longer has was taken off the task's sub-issue.
    Unblocked {
        task: String,
        on: String,
    },
    /// A task a new plan changed: its sub-issue says (and is sealed for) the new text.
    Resealed {
        task: String,
    },
    /// A task a new plan dropped: its sub-issue (and pull request) closed as not planned.
    Dropped {
        task: String,
    },
    PlanPosted,
    /// The epic branch (`epic-<n>`) exists on GitHub, made from the default branch.
    BranchCreated,
    Started {
        task: String,
    },
    /// The task's run ended: with its pull request, or without one (`reason`).
    RunEnded {
        task: String,
        pr: Option<u64>,
        reason: Option<String>,
        /// Tokens its agents used.
        #[serde(default)]
        tokens: u64,
        /// Its audit's score (`passing/total`), when its run was audited.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        score: Option<String>,
    },
    /// The commit of the task's branch its review judges, recorded before the verdict: what an
    /// acceptance merges.
    ReviewedAt {
        task: String,
        sha: String,
    },
    Reviewed {
        task: String,
        verdict: Verdict,
    },
    Merged {
        task: String,
    },
    Escalated {
        task: String,
        reason: String,
    },
    /// A person closed the task's sub-issue (done by hand) or took it off the epic.
    ClosedByHand {
        task: String,
    },
    EpicPullRequest {
        number: u64,
    },
    Finished,
}

/// What to do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Plan,
    CreateSubIssue {
        task: String,
    },
    Link {
        task: String,
        number: u64,
    },
    Block {
        task: String,
        on: String,
    },
    Unblock {
        task: String,
        on: String,
    },
    Reseal {
        task: String,
        number: u64,
    },
    Drop {
        task: String,
    },
    PostPlan,
    /// Make the epic branch the tasks' pull requests target (`branch` integration).
    CreateBranch,
    Start {
        task: String,
        number: u64,
    },
    Review {
        task: String,
        pr: u64,
    },
    Revise {
        task: String,
        pr: u64,
        feedback: String,
    },
    Escalate {
        task: String,
        reason: String,
    },
    Merge {
        task: String,
        pr: u64,
    },
    /// `independent` integration: a task others depend on waits until a person merges its pull
    /// request into the default branch.
    AwaitMerge {
        task: String,
        pr: u64,
    },
    /// Ask the planner for a new plan: `task`'s review found the plan wrong.
    Replan {
        task: String,
        reason: String,
    },
    OpenEpicPullRequest,
    Summarise,
}

/// Where one task stands.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskState {
    pub issue: Option<(u64, u64)>,
    pub linked: bool,
    pub blocked_by: BTreeSet<String>,
    pub running: bool,
    pub pr: Option<u64>,
    /// The pull request waits for its review.
    pub awaiting_review: bool,
    pub reviews: u32,
    /// Feedback not yet acted on.
    pub feedback: Option<String>,
    /// Tokens the task's runs used.
    pub tokens: u64,
    /// The latest audit score of its runs (`passing/total`).
    pub score: Option<String>,
    /// The feedback the running revision acts on (`None`: the task's first run, or nothing runs).
    pub revising: Option<String>,
    /// The commit of its branch its latest review judged (since its latest run).
    pub reviewed_at: Option<String>,
    pub accepted: bool,
    pub merged: bool,
    pub escalated: Option<String>,
    /// Why it is to be handed to a person (its run ended without a pull request, or its reviewer
    /// escalated it), until the escalation is said on GitHub.
    pub escalation: Option<String>,
    pub closed_by_hand: bool,
    /// A new plan changed its text: its sub-issue is to say the new one.
    pub changed: bool,
    /// A new plan dropped it: its sub-issue is to be closed.
    pub dropping: bool,
    pub dropped: bool,
}

impl TaskState {
    /// Nothing more will be done for it.
    pub fn settled(&self) -> bool {
        self.accepted || self.escalated.is_some() || self.closed_by_hand || self.dropped
    }
}

/// The epic, folded from what happened.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Epic {
    pub plan: Option<Plan>,
    pub tasks: BTreeMap<String, TaskState>,
    pub plan_posted: bool,
    pub branch_created: bool,
    pub epic_pr: Option<u64>,
    pub finished: bool,
    /// A review asked for a new plan: the task and why, until the planner answered.
    pub replan: Option<(String, String)>,
    /// New plans asked for (answered or refused).
    pub replans: u32,
    /// What each new plan changed, in order.
    pub revisions: Vec<Revision>,
}

impl Epic {
    pub fn fold<'h>(happened: impl IntoIterator<Item = &'h Happened>) -> Epic {
        let mut epic = Epic::default();
        for h in happened {
            epic.apply(h);
        }
        epic
    }

    pub(crate) fn apply(&mut self, h: &Happened) {
        match h {
            Happened::Planned { plan } => {
                // A new plan keeps what its tasks had; tasks it drops are forgotten unless settled.
                let ids: BTreeSet<&str> = plan.tasks().iter().map(|t| t.id.as_str()).collect();
                self.tasks
                    .retain(|id, t| ids.contains(id.as_str()) || t.settled() || t.issue.is_some());
                for t in plan.tasks() {
                    self.tasks.entry(t.id.clone()).or_default();
                }
                self.plan = Some(plan.clone());
                self.plan_posted = false;
            }
            Happened::Replanned { plan, revision } => {
                for id in &revision.dropped {
                    if let Some(t) = self.tasks.get_mut(id) {
                        t.dropping = true;
                        t.awaiting_review = false;
                        t.feedback = None;
                    }
                }
                for id in &revision.changed {
                    if let Some(t) = self.tasks.get_mut(id) {
                        t.changed = true;
                    }
                }
                for t in plan.tasks() {
                    self.tasks.entry(t.id.clone()).or_default();
                }
                // The task that asked, left as it was: its pull request is judged again under
                // the new plan.
                if let Some(t) = self.tasks.get_mut(&revision.task) {
                    if !t.settled() && !t.dropping && !t.changed && t.pr.is_some() {
                        t.awaiting_review = t.feedback.is_none();
                    }
                }
                self.plan = Some(plan.clone());
                self.plan_posted = false;
                self.replan = None;
                self.replans += 1;
                self.revisions.push(revision.clone());
            }
            Happened::ReplanRefused { task, errors } => {
                if let Some(t) = self.tasks.get_mut(task) {
                    t.escalation = Some(format!(
                        "it asked for a new plan, and the planner's was refused: {}",
                        errors.join("; ")
                    ));
                }
                self.replan = None;
                self.replans += 1;
            }
            Happened::Unblocked { task: id, on } => {
                if let Some(t) = self.tasks.get_mut(id) {
                    t.blocked_by.remove(on);
                }
            }
            Happened::Resealed { task: id } => {
                let body = (self.plan.as_ref())
                    .and_then(|p| p.task(id))
                    .map(|t| t.body.trim().to_string());
                if let Some(t) = self.tasks.get_mut(id) {
                    t.changed = false;
                    // Work already done for it is revised to the new text.
                    if let (Some(_), Some(body), false) = (t.pr, body, t.settled()) {
                        let note = format!(
                            "The epic's new plan changed this task. Its sub-issue now reads:\n\n{body}\n\nMake the pull request do what it says now."
                        );
                        t.feedback = Some(match t.feedback.take() {
                            Some(feedback) => format!("{feedback}\n\n{note}"),
                            None => note,
                        });
                    }
                }
            }
            Happened::Dropped { task: id } => {
                if let Some(t) = self.tasks.get_mut(id) {
                    t.dropping = false;
                    t.dropped = true;
                    t.running = false;
                    t.revising = None;
                }
            }
            Happened::SubIssueCreated {
                task: id,
                number,
                id: db,
            } => {
                if let Some(t) = self.tasks.get_mut(id) {
                    t.issue = Some((*number, *db));
                }
            }
            Happened::Linked { task: id } => {
                if let Some(t) = self.tasks.get_mut(id) {
                    t.linked = true;
                }
            }
            Happened::Blocked { task: id, on } => {
                if let Some(t) = self.tasks.get_mut(id) {
                    t.blocked_by.insert(on.clone());
                }
            }
            Happened::PlanPosted => self.plan_posted = true,
            Happened::BranchCreated => self.branch_created = true,
            Happened::Started { task: id } => {
                if let Some(t) = self.tasks.get_mut(id) {
                    t.running = true;
                    t.revising = t.feedback.take();
                    t.reviewed_at = None;
                }
            }
            Happened::ReviewedAt { task: id, sha } => {
                if let Some(t) = self.tasks.get_mut(id) {
                    t.reviewed_at = Some(sha.clone());
                }
            }
            Happened::RunEnded {
                task: id,
                pr,
                reason,
                tokens,
                score,
            } => {
                if let Some(t) = self.tasks.get_mut(id) {
                    t.running = false;
                    t.tokens += tokens;
                    if score.is_some() {
                        t.score = score.clone();
                    }
                    t.revising = None;
                    if pr.is_some() {
                        t.pr = *pr;
                    }
                    match (pr, reason) {
                        (Some(_), _) => t.awaiting_review = true,
                        (None, Some(reason)) => t.escalation = Some(reason.clone()),
                        (None, None) => {}
                    }
                }
            }
            Happened::Reviewed { task: id, verdict } => {
                if let Some(t) = self.tasks.get_mut(id) {
                    t.awaiting_review = false;
                    t.reviews += 1;
                    match verdict {
                        Verdict::Accepted => t.accepted = true,
                        Verdict::NeedsRevision { feedback } => t.feedback = Some(feedback.clone()),
                        Verdict::Escalate { reason } => t.escalation = Some(reason.clone()),
                        Verdict::Replan { reason } => {
                            self.replan = Some((id.clone(), reason.clone()));
                        }
                    }
                }
            }
            Happened::Merged { task: id } => {
                if let Some(t) = self.tasks.get_mut(id) {
                    t.merged = true;
                }
            }
            Happened::Escalated { task: id, reason } => {
                if let Some(t) = self.tasks.get_mut(id) {
                    t.escalated = Some(reason.clone());
                    t.escalation = None;
                    t.feedback = None;
                }
                if self.replan.as_ref().is_some_and(|(task, _)| task == id) {
                    self.replan = None;
                }
            }
            Happened::ClosedByHand { task: id } => {
                if let Some(t) = self.tasks.get_mut(id) {
                    t.closed_by_hand = true;
                    t.running = false;
                    t.revising = None;
                }
            }
            Happened::EpicPullRequest { number } => self.epic_pr = Some(*number),
            Happened::Finished => self.finished = true,
        }
    }

    /// The new plan `answer` makes of this one, asked for by `task`'s review (`reason`): tasks
    /// done with (accepted, escalated, closed) stay as they were whatever the answer says; the
    /// others are changed, added or dropped as it says. `Err`: what is wrong with it.
    pub fn revise(
        &self,
        answer: &Plan,
        task: &str,
        reason: &str,
        max_tasks: usize,
    ) -> Result<Happened, Vec<PlanError>> {
        let Some(old) = &self.plan else {
            return Err(vec![PlanError::Unreadable(
                "the epic has no plan yet".into(),
            )]);
        };
        let state = |id: &str| self.tasks.get(id);
        let settled = |id: &str| state(id).is_some_and(TaskState::settled);
        let mut kept = Vec::new();
        let mut tasks: Vec<Task> = Vec::new();
        let mut reused = Vec::new();
        for t in answer.tasks() {
            match old.task(&t.id) {
                Some(before) if settled(&t.id) => {
                    if before != t {
                        kept.push(t.id.clone());
                    }
                    tasks.push(before.clone());
                }
                None if state(&t.id).is_some() => {
                    reused.push(PlanError::Reused { id: t.id.clone() })
                }
                _ => tasks.push(t.clone()),
            }
        }
        if !reused.is_empty() {
            return Err(reused);
        }
        for before in old.tasks() {
            if settled(&before.id) && answer.task(&before.id).is_none() {
                kept.push(before.id.clone());
                tasks.push(before.clone());
            }
        }
        // What a task done with depended on no longer matters: only tasks of the plan stay.
        let ids: BTreeSet<String> = tasks.iter().map(|t| t.id.clone()).collect();
        for t in tasks.iter_mut().filter(|t| settled(&t.id)) {
            t.depends_on.retain(|d| ids.contains(d));
        }
        let plan = Plan::check(tasks, max_tasks)?;
        let revision = Revision {
            task: task.to_string(),
            reason: reason.to_string(),
            added: (plan.tasks().iter())
                .filter(|t| old.task(&t.id).is_none())
                .map(|t| t.id.clone())
                .collect(),
            changed: (plan.tasks().iter())
                .filter(|t| {
                    old.task(&t.id)
                        .is_some_and(|o| o.title != t.title || o.body != t.body)
                })
                .map(|t| t.id.clone())
                .collect(),
            dropped: (old.tasks().iter())
                .filter(|t| plan.task(&t.id).is_none())
                .map(|t| t.id.clone())
                .collect(),
            kept,
        };
        Ok(Happened::Replanned { plan, revision })
    }

    /// Whether `id` counts as done for the tasks that depend on it: accepted and merged (by
    /// supervisor into the epic branch, or by a person into the default branch), or closed by a
    /// person.
    fn done_for_dependants(&self, id: &str) -> bool {
        self.tasks
            .get(id)
            .is_some_and(|t| t.closed_by_hand || (t.accepted && t.merged))
    }

    /// What to do next, in order: every step that may be taken now (several starts at once,
    /// within the limits). Empty when the epic is finished or waits for running tasks.
    pub fn next(&self, limits: Limits) -> Vec<Step> {
        if self.finished {
            return Vec::new();
        }
        let Some(plan) = &self.plan else {
            return vec![Step::Plan];
        };
        let state = |id: &str| self.tasks.get(id).cloned().unwrap_or_default();
        // Sub-issues first, one at a time in the plan's order: a task's blockers exist before it.
        for t in plan.order() {
            let s = state(&t.id);
            let Some((number, _)) = s.issue else {
                return vec![Step::CreateSubIssue { task: t.id.clone() }];
            };
            if !s.linked {
                return vec![Step::Link {
                    task: t.id.clone(),
                    number,
                }];
            }
            if let Some(on) = t.depends_on.iter().find(|d| !s.blocked_by.contains(*d)) {
                return vec![Step::Block {
                    task: t.id.clone(),
                    on: on.clone(),
                }];
            }
            // A dependency a new plan took away would keep the sub-issue from running.
            let dropped_dependency = s.blocked_by.iter().find(|b| !t.depends_on.contains(*b));
            if let (Some(on), false) = (dropped_dependency, s.settled()) {
                return vec![Step::Unblock {
                    task: t.id.clone(),
                    on: on.clone(),
                }];
            }
            if s.changed {
                return vec![Step::Reseal {
                    task: t.id.clone(),
                    number,
                }];
            }
        }
        if let Some((id, _)) = self.tasks.iter().find(|(_, t)| t.dropping) {
            return vec![Step::Drop { task: id.clone() }];
        }
        if !self.plan_posted {
            return vec![Step::PostPlan];
        }
        if limits.integration == Integration::Branch && !self.branch_created {
            return vec![Step::CreateBranch];
        }
        let mut steps = Vec::new();
        for t in plan.order() {
            let s = state(&t.id);
            if s.settled() {
                let waited_on = || {
                    plan.tasks()
                        .iter()
                        .any(|d| d.depends_on.contains(&t.id) && !state(&d.id).settled())
                };
                // An accepted task whose merge went to a person (a conflict, a branch moved
                // since its review) is merged by nobody here.
                let merging = s.accepted && !s.merged && s.escalated.is_none();
                match (s.pr, limits.integration) {
                    (Some(pr), Integration::Branch) if merging => {
                        steps.push(Step::Merge {
                            task: t.id.clone(),
                            pr,
                        });
                    }
                    (Some(pr), Integration::Independent) if merging && waited_on() => {
                        steps.push(Step::AwaitMerge {
                            task: t.id.clone(),
                            pr,
                        });
                    }
                    _ => {}
                }
                continue;
            }
            if let Some(reason) = &s.escalation {
                steps.push(Step::Escalate {
                    task: t.id.clone(),
                    reason: reason.clone(),
                });
            } else if let (Some(pr), true) = (s.pr, s.awaiting_review) {
                steps.push(Step::Review {
                    task: t.id.clone(),
                    pr,
                });
            } else if s.feedback.is_some() && s.reviews >= limits.max_iterations {
                steps.push(Step::Escalate {
                    task: t.id.clone(),
                    reason: format!(
                        "still needs changes after {} reviews (epic.maxIterations)",
                        s.reviews
                    ),
                });
            }
        }
        let running = self.tasks.values().filter(|t| t.running).count();
        // A new plan is asked for once nothing runs and every review is in: meanwhile no work
        // starts that the new plan may change.
        if let Some((task, reason)) = &self.replan {
            if !steps.is_empty() || running > 0 {
                return steps;
            }
            if self.replans >= limits.max_iterations {
                return vec![Step::Escalate {
                    task: task.clone(),
                    reason: format!(
                        "its review asked for a new plan after {} new plans (epic.maxIterations): \
                         {reason}",
                        self.replans
                    ),
                }];
            }
            return vec![Step::Replan {
                task: task.clone(),
                reason: reason.clone(),
            }];
        }
        // Work takes a worker: a revision of a task sent back, or a task whose dependencies are
        // done; at most `max_concurrency` at once.
        let mut room = limits.max_concurrency.saturating_sub(running);
        for t in plan.order() {
            if room == 0 {
                break;
            }
            let s = state(&t.id);
            if s.running || s.settled() || s.escalation.is_some() {
                continue;
            }
            // A revision too waits for what it depends on: a new plan may have added to it.
            let ready = t.depends_on.iter().all(|d| self.done_for_dependants(d));
            let step = match (s.pr, &s.feedback, s.issue) {
                (Some(pr), Some(feedback), _) if s.reviews < limits.max_iterations && ready => {
                    Step::Revise {
                        task: t.id.clone(),
                        pr,
                        feedback: feedback.clone(),
                    }
                }
                (None, _, Some((number, _))) if ready => Step::Start {
                    task: t.id.clone(),
                    number,
                },
                _ => continue,
            };
            steps.push(step);
            room -= 1;
        }
        if !steps.is_empty() || running > 0 {
            return steps;
        }
        let all_settled = plan.tasks().iter().all(|t| state(&t.id).settled());
        if !all_settled {
            // Waiting on tasks that can never start (their blockers were escalated).
            return plan
                .order()
                .into_iter()
                .filter(|t| !state(&t.id).settled())
                .map(|t| Step::Escalate {
                    task: t.id.clone(),
                    reason: "a task it depends on was escalated".into(),
                })
                .collect();
        }
        // The epic's pull request carries what was merged into the epic branch.
        let any_merged = plan.tasks().iter().any(|t| state(&t.id).merged);
        if limits.integration == Integration::Branch && any_merged && self.epic_pr.is_none() {
            return vec![Step::OpenEpicPullRequest];
        }
        vec![Step::Summarise]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::epic::Task;

    fn plan(tasks: &[(&str, &[&str])]) -> Plan {
        Plan::check(
            tasks
                .iter()
                .map(|(id, deps)| Task {
                    id: id.to_string(),
                    title: id.to_string(),
                    body: format!("- [ ] {id}"),
                    depends_on: deps.iter().map(|d| d.to_string()).collect(),
                })
                .collect(),
            8,
        )
        .unwrap()
    }

    #[test]
    fn the_limits_are_the_epic_settings() {
        let defaults = Limits::from(&EpicSettings::default());
        assert_eq!(
            defaults,
            Limits {
                max_concurrency: 2,
                max_iterations: 3,
                integration: Integration::Branch,
            }
        );
        let settings = EpicSettings {
            max_concurrency: 5,
            max_iterations: 1,
            integration: EpicIntegration::Independent,
            ..EpicSettings::default()
        };
        assert_eq!(
            Limits::from(&settings),
            Limits {
                max_concurrency: 5,
                max_iterations: 1,
                integration: Integration::Independent,
            }
        );
    }

    const BRANCH: Limits = Limits {
        max_concurrency: 2,
        max_iterations: 2,
        integration: Integration::Branch,
    };

    /// A fake world: performs each step as the driver would, recording what happened, until
    /// the epic is finished; `review` gives each review's verdict. The steps taken, in order.
    fn drive(
        epic: &mut Vec<Happened>,
        limits: Limits,
        review: &mut dyn FnMut(&str, u32) -> Verdict,
    ) -> Vec<Step> {
        drive_with(epic, limits, review, &mut |_| {
            panic!("no new plan was asked for")
        })
    }

    /// [`drive`], with `planner` answering when a new plan is asked for.
    fn drive_with(
        epic: &mut Vec<Happened>,
        limits: Limits,
        review: &mut dyn FnMut(&str, u32) -> Verdict,
        planner: &mut dyn FnMut(&Epic) -> Plan,
    ) -> Vec<Step> {
        let mut taken = Vec::new();
        let mut next_number = 10;
        let mut most_running = 0;
        for _ in 0..200 {
            let state = Epic::fold(epic.iter());
            let running = state.tasks.values().filter(|t| t.running).count();
            most_running = most_running.max(running);
            assert!(running <= limits.max_concurrency, "{running} running");
            let steps = state.next(limits);
            if steps.is_empty() {
                // Runs end one at a time, in the plan's order.
                let id = state
                    .plan
                    .as_ref()
                    .unwrap()
                    .order()
                    .into_iter()
                    .find(|t| state.tasks[&t.id].running)
                    .map(|t| t.id.clone())
                    .expect("something runs when there is nothing to do");
                let pr = 100 + state.tasks[&id].issue.unwrap().0;
                epic.push(Happened::RunEnded {
                    task: id,
                    pr: Some(pr),
                    reason: None,
                    tokens: 0,
                    score: None,
                });
                continue;
            }
            // A review's verdict comes after the steps taken beside it (reviews run on their own).
            let (reviews, others): (Vec<Step>, Vec<Step>) =
                (steps.into_iter()).partition(|s| matches!(s, Step::Review { .. }));
            for step in others.into_iter().chain(reviews) {
                taken.push(step.clone());
                let happened = match step {
                    Step::Plan => unreachable!("planned before"),
                    Step::CreateSubIssue { task } => {
                        next_number += 1;
                        Happened::SubIssueCreated {
                            task,
                            number: next_number,
                            id: 9000 + next_number,
                        }
                    }
                    Step::Link { task, .. } => Happened::Linked { task },
                    Step::Block { task, on } => Happened::Blocked { task, on },
                    Step::Unblock { task, on } => Happened::Unblocked { task, on },
                    Step::Reseal { task, .. } => Happened::Resealed { task },
                    Step::Drop { task } => Happened::Dropped { task },
                    Step::Replan { task, reason } => {
                        let state = Epic::fold(epic.iter());
                        let answer = planner(&state);
                        state
                            .revise(&answer, &task, &reason, 8)
                            .unwrap_or_else(|errors| Happened::ReplanRefused {
                                task,
                                errors: errors.iter().map(ToString::to_string).collect(),
                            })
                    }
                    Step::PostPlan => Happened::PlanPosted,
                    Step::Start { task, .. } => Happened::Started { task },
                    Step::Review { task, .. } => {
                        let reviews = Epic::fold(epic.iter()).tasks[&task].reviews;
                        let verdict = review(&task, reviews);
                        Happened::Reviewed { task, verdict }
                    }
                    // The revision runs like the task's first run: its end is recorded later.
                    Step::Revise { task, .. } => Happened::Started { task },
                    Step::Escalate { task, reason } => Happened::Escalated { task, reason },
                    Step::Merge { task, .. } => Happened::Merged { task },
                    Step::CreateBranch => Happened::BranchCreated,
                    // A person merges the pull request.
                    Step::AwaitMerge { task, .. } => Happened::Merged { task },
                    Step::OpenEpicPullRequest => Happened::EpicPullRequest { number: 500 },
                    Step::Summarise => Happened::Finished,
                };
                epic.push(happened);
            }
            if Epic::fold(epic.iter()).finished {
                return taken;
            }
        }
        panic!("the epic never finished: {taken:#?}");
    }

    fn kinds(steps: &[Step]) -> Vec<String> {
        steps
            .iter()
            .map(|s| match s {
                Step::CreateSubIssue { task } => format!("create {task}"),
                Step::Link { task, .. } => format!("link {task}"),
                Step::Block { task, on } => format!("block {task} on {on}"),
                Step::Unblock { task, on } => format!("unblock {task} from {on}"),
                Step::Reseal { task, .. } => format!("reseal {task}"),
                Step::Drop { task } => format!("drop {task}"),
                Step::Replan { task, .. } => format!("replan for {task}"),
                Step::PostPlan => "post plan".into(),
                Step::Start { task, .. } => format!("start {task}"),
                Step::Review { task, .. } => format!("review {task}"),
                Step::Revise { task, .. } => format!("revise {task}"),
                Step::Escalate { task, .. } => format!("escalate {task}"),
                Step::Merge { task, .. } => format!("merge {task}"),
                Step::CreateBranch => "branch".into(),
                Step::AwaitMerge { task, .. } => format!("await merge of {task}"),
                Step::OpenEpicPullRequest => "epic pr".into(),
                Step::Summarise => "summary".into(),
                Step::Plan => "plan".into(),
            })
            .collect()
    }

    #[test]
    fn the_demo_epic_runs_its_tasks_in_order_sends_one_back_and_ends_with_one_pull_request() {
        let mut epic = vec![Happened::Planned {
            plan: plan(&[("units", &[]), ("format", &["units"]), ("docs", &[])]),
        }];
        assert_eq!(Epic::default().next(BRANCH), [Step::Plan]);
        let steps = drive(&mut epic, BRANCH, &mut |task, reviews| {
            if task == "format" && reviews == 0 {
                Verdict::NeedsRevision {
                    feedback: "handle 0".into(),
                }
            } else {
                Verdict::Accepted
            }
        });
        assert_eq!(
            kinds(&steps),
            [
                "create units",
                "link units",
                "create format",
                "link format",
                "block format on units",
                "create docs",
                "link docs",
                "post plan",
                "branch",
                // format waits for units; docs is independent.
                "start units",
                "start docs",
                "review units",
                "merge units",
                "start format",
                // Runs end in the plan's order here: format before docs.
                "review format",
                "revise format",
                "review format",
                "merge format",
                "review docs",
                "merge docs",
                "epic pr",
                "summary",
            ]
        );
        let done = Epic::fold(epic.iter());
        assert!(done.tasks.values().all(|t| t.accepted && t.merged));
        assert_eq!(done.tasks["format"].reviews, 2);
    }

    #[test]
    fn resuming_from_any_point_of_the_journal_repeats_nothing_recorded() {
        let mut full = vec![Happened::Planned {
            plan: plan(&[("a", &[]), ("b", &["a"]), ("c", &[])]),
        }];
        drive(&mut full, BRANCH, &mut |_, _| Verdict::Accepted);
        for cut in 1..full.len() {
            let mut resumed: Vec<Happened> = full[..cut].to_vec();
            let steps = drive(&mut resumed, BRANCH, &mut |_, _| Verdict::Accepted);
            let created: Vec<String> = resumed
                .iter()
                .filter_map(|h| match h {
                    Happened::SubIssueCreated { task, .. } => Some(task.clone()),
                    _ => None,
                })
                .collect();
            assert_eq!(created, ["a", "b", "c"], "cut at {cut}: {steps:?}");
            let prs = resumed
                .iter()
                .filter(|h| matches!(h, Happened::EpicPullRequest { .. }))
                .count();
            assert_eq!(prs, 1, "cut at {cut}");
        }
    }

    #[test]
    fn never_more_than_max_concurrency_tasks_run_at_once() {
        let six: Vec<(String, &[&str])> = (1..=6).map(|i| (format!("t{i}"), &[][..])).collect();
        let six: Vec<(&str, &[&str])> = six.iter().map(|(i, d)| (i.as_str(), *d)).collect();
        let mut epic = vec![Happened::Planned { plan: plan(&six) }];
        // `drive` asserts the bound at every step.
        let steps = drive(&mut epic, BRANCH, &mut |_, _| Verdict::Accepted);
        assert_eq!(
            kinds(&steps)
                .iter()
                .filter(|k| k.starts_with("start"))
                .count(),
            6
        );
    }

    #[test]
    fn a_task_sent_back_too_often_is_escalated_and_its_dependants_with_it() {
        let mut epic = vec![Happened::Planned {
            plan: plan(&[("a", &[]), ("b", &["a"])]),
        }];
        let steps = drive(&mut epic, BRANCH, &mut |_, _| Verdict::NeedsRevision {
            feedback: "no".into(),
        });
        let k = kinds(&steps);
        assert_eq!(k.iter().filter(|s| *s == "revise a").count(), 1, "{k:?}");
        assert!(k.contains(&"escalate a".to_string()), "{k:?}");
        assert!(k.contains(&"escalate b".to_string()), "{k:?}");
        assert!(!k.contains(&"start b".to_string()), "{k:?}");
        // Nothing was accepted: no epic pull request.
        assert!(!k.contains(&"epic pr".to_string()), "{k:?}");
        assert_eq!(k.last().unwrap(), "summary");
    }

    /// An escalation by the reviewer, or a run that ended without a pull request, is a step of
    /// its own (the label and the comment on GitHub) before the task counts as escalated.
    /// The commit a review judged is kept until the task's next run, which delivers another.
    #[test]
    fn the_reviewed_commit_is_kept_until_the_next_run() {
        let mut state = Epic::default();
        state.apply(&Happened::Planned {
            plan: plan(&[("a", &[])]),
        });
        let at = |sha: &str| Happened::ReviewedAt {
            task: "a".into(),
            sha: sha.into(),
        };
        state.apply(&at("c0ffee"));
        assert_eq!(state.tasks["a"].reviewed_at.as_deref(), Some("c0ffee"));
        state.apply(&Happened::Started { task: "a".into() });
        assert_eq!(state.tasks["a"].reviewed_at, None);
        state.apply(&at("beef"));
        assert_eq!(state.tasks["a"].reviewed_at.as_deref(), Some("beef"));
        // Journaled as `reviewed-at`, with the task and the commit.
        let line = serde_json::to_value(at("beef")).unwrap();
        assert_eq!(
            line,
            serde_json::json!({ "kind": "reviewed-at", "task": "a", "sha": "beef" })
        );
    }

    /// An accepted task that could not be merged goes to a person once, and the epic ends.
    #[test]
    fn an_accepted_task_whose_merge_escalated_is_not_merged_again() {
        let independent = Limits {
            integration: Integration::Independent,
            ..BRANCH
        };
        for limits in [BRANCH, independent] {
            let mut epic = vec![
                Happened::Planned {
                    plan: plan(&[("a", &[]), ("b", &["a"])]),
                },
                Happened::SubIssueCreated {
                    task: "a".into(),
                    number: 2,
                    id: 9,
                },
                Happened::SubIssueCreated {
                    task: "b".into(),
                    number: 3,
                    id: 10,
                },
                Happened::Linked { task: "a".into() },
                Happened::Linked { task: "b".into() },
                Happened::Blocked {
                    task: "b".into(),
                    on: "a".into(),
                },
                Happened::PlanPosted,
                Happened::BranchCreated,
                Happened::Started { task: "a".into() },
                Happened::RunEnded {
                    task: "a".into(),
                    pr: Some(5),
                    reason: None,
                    tokens: 1,
                    score: None,
                },
                Happened::Reviewed {
                    task: "a".into(),
                    verdict: Verdict::Accepted,
                },
                Happened::Escalated {
                    task: "a".into(),
                    reason: "its pull request #5 could not be merged".into(),
                },
            ];
            let k = kinds(&drive(&mut epic, limits, &mut |_, _| Verdict::Accepted));
            assert!(!k.iter().any(|s| s.contains("merge")), "{k:?}");
            assert!(k.contains(&"escalate b".to_string()), "{k:?}");
            // Nothing was merged into the epic branch: no epic pull request.
            assert!(!k.contains(&"epic pr".to_string()), "{k:?}");
            assert_eq!(k.last().unwrap(), "summary");
        }
    }

    #[test]
    fn an_escalation_is_said_before_the_task_counts_as_escalated() {
        let mut epic = vec![Happened::Planned {
            plan: plan(&[("a", &[]), ("b", &["a"]), ("c", &[])]),
        }];
        let k = kinds(&drive(&mut epic, BRANCH, &mut |task, _| {
            if task == "a" {
                Verdict::Escalate {
                    reason: "a person decides".into(),
                }
            } else {
                Verdict::Accepted
            }
        }));
        let at = |step: &str| k.iter().position(|s| s == step);
        assert!(at("review a") < at("escalate a"), "{k:?}");
        assert!(
            at("escalate b").is_some() && at("start b").is_none(),
            "{k:?}"
        );
        let done = Epic::fold(epic.iter());
        assert_eq!(
            done.tasks["a"].escalated.as_deref(),
            Some("a person decides")
        );
        assert_eq!(done.tasks["a"].escalation, None);

        let mut state = Epic::default();
        state.apply(&Happened::Planned {
            plan: plan(&[("a", &[])]),
        });
        for h in [
            Happened::SubIssueCreated {
                task: "a".into(),
                number: 2,
                id: 9,
            },
            Happened::Linked { task: "a".into() },
            Happened::PlanPosted,
            Happened::BranchCreated,
            Happened::Started { task: "a".into() },
            Happened::RunEnded {
                task: "a".into(),
                pr: None,
                reason: Some("its run stopped".into()),
                tokens: 7,
                score: Some("8/10".into()),
            },
        ] {
            state.apply(&h);
        }
        assert!(!state.tasks["a"].settled());
        assert_eq!(
            state.next(BRANCH),
            [Step::Escalate {
                task: "a".into(),
                reason: "its run stopped".into()
            }]
        );
        assert_eq!(state.tasks["a"].tokens, 7);
        assert_eq!(state.tasks["a"].score.as_deref(), Some("8/10"));
    }

    #[test]
    fn with_independent_integration_nothing_is_merged_and_no_epic_pull_request_opens() {
        let limits = Limits {
            integration: Integration::Independent,
            ..BRANCH
        };
        let mut epic = vec![Happened::Planned {
            plan: plan(&[("a", &[]), ("b", &["a"])]),
        }];
        let k = kinds(&drive(&mut epic, limits, &mut |_, _| Verdict::Accepted));
        assert!(
            !k.iter()
                .any(|s| s.starts_with("merge") || s == "epic pr" || s == "branch"),
            "{k:?}"
        );
        // b waits until a person merged a's pull request into the default branch.
        let at = |step: &str| k.iter().position(|s| s == step).unwrap();
        assert!(at("await merge of a") < at("start b"), "{k:?}");
        assert_eq!(k.last().unwrap(), "summary");
        // An accepted task nothing depends on is not waited for.
        assert!(!k.contains(&"await merge of b".to_string()), "{k:?}");
    }

    #[test]
    fn a_sub_issue_closed_by_hand_counts_as_done_for_its_dependants() {
        let mut epic = vec![Happened::Planned {
            plan: plan(&[("a", &[]), ("b", &["a"])]),
        }];
        let mut state = Epic::fold(epic.iter());
        while state.next(BRANCH)
            != [Step::Start {
                task: "a".into(),
                number: state.tasks["a"].issue.map_or(0, |i| i.0),
            }]
        {
            let h = match state.next(BRANCH).remove(0) {
                Step::CreateSubIssue { task } => Happened::SubIssueCreated {
                    number: if task == "a" { 1 } else { 2 },
                    id: 7,
                    task,
                },
                Step::Link { task, .. } => Happened::Linked { task },
                Step::Block { task, on } => Happened::Blocked { task, on },
                Step::PostPlan => Happened::PlanPosted,
                Step::CreateBranch => Happened::BranchCreated,
                other => panic!("{other:?}"),
            };
            epic.push(h);
            state = Epic::fold(epic.iter());
        }
        epic.push(Happened::ClosedByHand { task: "a".into() });
        let next = Epic::fold(epic.iter()).next(BRANCH);
        assert_eq!(
            next,
            [Step::Start {
                task: "b".into(),
                number: 2
            }]
        );
    }

    /// A plan's task with a body of its own.
    fn task(id: &str, body: &str, deps: &[&str]) -> Task {
        Task {
            id: id.into(),
            title: id.into(),
            body: body.into(),
            depends_on: deps.iter().map(|d| d.to_string()).collect(),
        }
    }

    #[test]
    fn a_review_asking_for_a_new_plan_is_answered_once_nothing_runs_and_the_plan_changes_the_work()
    {
        let mut epic = vec![Happened::Planned {
            plan: plan(&[
                ("units", &[]),
                ("format", &["units"]),
                ("docs", &[]),
                ("extra", &["docs"]),
            ]),
        }];
        let mut asked = 0;
        let steps = drive_with(
            &mut epic,
            BRANCH,
            &mut |task, reviews| match (task, reviews) {
                ("units", 0) => Verdict::Replan {
                    reason: "units must take days too; format does not need units".into(),
                },
                _ => Verdict::Accepted,
            },
            &mut |state| {
                asked += 1;
                assert!(
                    state
                        .tasks
                        .values()
                        .all(|t| !t.running && !t.awaiting_review),
                    "asked while work went on: {state:?}"
                );
                Plan::check(
                    vec![
                        task("units", "- [ ] units, with days", &[]),
                        task("format", "- [ ] format, on its own", &[]),
                        // Accepted before the new plan: its change is not taken.
                        task("docs", "- [ ] docs, rewritten", &[]),
                        task("examples", "- [ ] examples", &["docs"]),
                    ],
                    8,
                )
                .unwrap()
            },
        );
        assert_eq!(asked, 1);
        let k = kinds(&steps);
        let at = |what: &str| {
            k.iter()
                .position(|s| s == what)
                .unwrap_or_else(|| panic!("no `{what}` in {k:#?}"))
        };
        // Nothing started between the request and the new plan.
        let asked_at = epic
            .iter()
            .position(|h| {
                matches!(
                    h,
                    Happened::Reviewed {
                        verdict: Verdict::Replan { .. },
                        ..
                    }
                )
            })
            .unwrap();
        let replanned_at = (epic.iter())
            .position(|h| matches!(h, Happened::Replanned { .. }))
            .unwrap();
        assert!(
            !epic[asked_at..replanned_at]
                .iter()
                .any(|h| matches!(h, Happened::Started { .. })),
            "{:#?}",
            &epic[asked_at..replanned_at]
        );
        // The new plan's work: units says its new text and its pull request is revised to it;
        // format no longer waits on units; examples created and blocked on docs; extra dropped;
        // then the plan's comment, then the work.
        for (before, after) in [
            ("review units", "merge docs"),
            ("merge docs", "replan for units"),
            ("replan for units", "reseal units"),
            ("reseal units", "unblock format from units"),
            ("unblock format from units", "reseal format"),
            ("reseal format", "create examples"),
            ("block examples on docs", "drop extra"),
            ("replan for units", "revise units"),
            ("replan for units", "start format"),
            ("replan for units", "start examples"),
        ] {
            assert!(at(before) < at(after), "{before} before {after}: {k:#?}");
        }
        assert_eq!(k.iter().filter(|s| *s == "post plan").count(), 2);
        let plan_again = k.iter().rposition(|s| s == "post plan").unwrap();
        assert!(at("drop extra") < plan_again && plan_again < at("revise units"));
        assert!(!k.contains(&"start extra".to_string()), "{k:#?}");
        let state = Epic::fold(epic.iter());
        assert_eq!(state.replans, 1);
        assert!(state.tasks["extra"].dropped && state.tasks["extra"].pr.is_none());
        for id in ["units", "format", "docs", "examples"] {
            assert!(state.tasks[id].accepted && state.tasks[id].merged, "{id}");
        }
        assert_eq!(
            state.tasks["units"].reviews, 2,
            "revised to the new text, judged again"
        );
        assert_eq!(
            state.revisions,
            [Revision {
                task: "units".into(),
                reason: "units must take days too; format does not need units".into(),
                added: vec!["examples".into()],
                changed: vec!["units".into(), "format".into()],
                dropped: vec!["extra".into()],
                kept: vec!["docs".into()],
            }]
        );
        assert!(state.finished);
    }

    #[test]
    fn a_new_plan_keeps_tasks_done_with_and_refuses_an_id_an_earlier_plan_dropped() {
        let mut epic = vec![Happened::Planned {
            plan: plan(&[("units", &[]), ("format", &["units"]), ("docs", &[])]),
        }];
        for (n, id) in ["units", "format", "docs"].iter().enumerate() {
            let number = 10 + n as u64;
            epic.push(Happened::SubIssueCreated {
                task: id.to_string(),
                number,
                id: number,
            });
        }
        epic.push(Happened::ClosedByHand {
            task: "units".into(),
        });
        let state = Epic::fold(epic.iter());
        // The planner drops units (closed by a person) and changes format: units stays, and
        // format's dependency on it does too.
        let answer = Plan::check(vec![task("format", "- [ ] new", &["units"])], 8);
        assert!(answer.is_err(), "units is no task of the answer");
        let answer = Plan::check(vec![task("format", "- [ ] new", &[])], 8).unwrap();
        let Ok(Happened::Replanned { plan, revision }) = state.revise(&answer, "docs", "why", 8)
        else {
            panic!()
        };
        let ids: Vec<&str> = plan.tasks().iter().map(|t| t.id.as_str()).collect();
        assert_eq!(ids, ["format", "units"]);
        assert_eq!(revision.kept, ["units"]);
        assert_eq!(revision.changed, ["format"]);
        assert_eq!(revision.dropped, ["docs"]);
        // Once docs is dropped, a later plan may not bring its id back.
        let mut after = epic.clone();
        after.push(Happened::Replanned { plan, revision });
        after.push(Happened::Dropped {
            task: "docs".into(),
        });
        let state = Epic::fold(after.iter());
        let answer = Plan::check(vec![task("docs", "- [ ] again", &[])], 8).unwrap();
        assert_eq!(
            state.revise(&answer, "format", "why", 8),
            Err(vec![PlanError::Reused { id: "docs".into() }])
        );
        // Nor may it exceed the limit with the tasks kept.
        let answer = Plan::check(vec![task("a", "x", &[]), task("b", "y", &[])], 8).unwrap();
        assert!(matches!(
            &state.revise(&answer, "format", "why", 2).unwrap_err()[..],
            [PlanError::TooMany { count: 3, max: 2 }]
        ));
    }

    #[test]
    fn a_refused_new_plan_hands_the_task_that_asked_to_a_person_and_new_plans_are_bounded() {
        // A task judged again under a new plan that left it as it was.
        let mut epic = vec![Happened::Planned {
            plan: plan(&[("units", &[]), ("format", &["units"])]),
        }];
        let k = kinds(&drive_with(
            &mut epic,
            BRANCH,
            &mut |task, reviews| match (task, reviews) {
                ("units", 0) => Verdict::Replan {
                    reason: "split it".into(),
                },
                _ => Verdict::Accepted,
            },
            &mut |_| {
                Plan::check(
                    vec![
                        task("units", "- [ ] units", &[]),
                        task("format", "- [ ] format", &["units"]),
                    ],
                    8,
                )
                .unwrap()
            },
        ));
        assert!(k.contains(&"replan for units".to_string()), "{k:?}");
        let state = Epic::fold(epic.iter());
        assert_eq!(
            state.tasks["units"].reviews, 2,
            "an unchanged task is judged again"
        );
        assert!(state.tasks["units"].accepted);

        // The new plan, with the task kept, has more tasks than epic.maxTasks: refused, and the
        // task that asked is handed to a person with its dependants.
        let mut epic = vec![Happened::Planned {
            plan: plan(&[("units", &[]), ("other", &[]), ("format", &["units"])]),
        }];
        drive_with(
            &mut epic,
            BRANCH,
            &mut |task, _| match task {
                "units" => Verdict::Replan {
                    reason: "split it in eight".into(),
                },
                _ => Verdict::Accepted,
            },
            &mut |_| {
                let mut tasks = vec![task("units", "u", &[]), task("format", "f", &["units"])];
                tasks.extend((1..=6).map(|n| task(&format!("part{n}"), "p", &[])));
                Plan::check(tasks, 8).unwrap()
            },
        );
        let state = Epic::fold(epic.iter());
        let refused = epic
            .iter()
            .filter(|h| matches!(h, Happened::ReplanRefused { .. }))
            .count();
        assert_eq!(refused, 1);
        let reason = state.tasks["units"].escalated.clone().unwrap();
        assert!(
            reason.contains("refused") && reason.contains("9 tasks"),
            "{reason}"
        );
        assert!(
            state.tasks["format"].escalated.is_some(),
            "its dependant with it"
        );
        assert!(state.tasks["other"].accepted);

        // A reviewer asking again and again: at most `max_iterations` new plans.
        let mut epic = vec![Happened::Planned {
            plan: plan(&[("units", &[])]),
        }];
        drive_with(
            &mut epic,
            BRANCH,
            &mut |_, _| Verdict::Replan {
                reason: "again".into(),
            },
            &mut |_| Plan::check(vec![task("units", "- [ ] units", &[])], 8).unwrap(),
        );
        let state = Epic::fold(epic.iter());
        assert_eq!(state.replans, BRANCH.max_iterations);
        let reason = state.tasks["units"].escalated.clone().unwrap();
        assert!(reason.contains("epic.maxIterations"), "{reason}");
    }

    #[test]
    fn the_journal_of_an_epic_round_trips_as_json() {
        let events = vec![
            Happened::Planned {
                plan: plan(&[("a", &[])]),
            },
            Happened::Reviewed {
                task: "a".into(),
                verdict: Verdict::NeedsRevision {
                    feedback: "x".into(),
                },
            },
        ];
        let text = serde_json::to_string(&events).unwrap();
        assert!(text.contains(r#""kind":"reviewed""#), "{text}");
        assert!(text.contains(r#""verdict":"needs-revision""#), "{text}");
        let back: Vec<Happened> = serde_json::from_str(&text).unwrap();
        assert_eq!(back, events);
    }
}
