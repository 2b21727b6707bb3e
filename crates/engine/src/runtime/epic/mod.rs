//! Planning an epic: the planner's tasks become sub-issues of the epic, each sealed (so it runs as
//! supervisor's own, [`crate::epic::Seal`]), linked under the epic, blocked by the tasks it depends
//! on and put on the board; then the plan is posted on the epic.
//!
//! Every step is journaled (`.supervisor/runs/epics/<n>/events.jsonl`) after GitHub confirmed it, and
//! the next step is decided from the journal alone ([`Epic::next`]), so a planning stopped at any
//! point — a crash, a signal — goes on where it stopped when run again. A step whose write reached
//! GitHub before the crash but not the journal is found again rather than repeated: a sub-issue by
//! its seal among the epic's sub-issues and the issues supervisor opened last, a link among the
//! epic's sub-issues, a dependency among the issue's blockers, the plan's comment by its marker.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::agent::{self, AgentRequest, ExitReason, RoleSet};
use crate::epic::{Epic, Happened, Limits, Seal, Step, read_plan};
use crate::github::{BoardRef, GitHub, Issue, Marker, MarkerKind};
use crate::ids::BoardOption;
use crate::pipeline::decide::admission::{TitleTrust, refuse_context, refuse_issue, trusted_title};
use crate::pipeline::{Project, RunError};
use crate::workspace::CHECKPOINT_DIR;

use super::Services;

mod work;

pub use work::{EpicEnd, TaskOutcome, epic_branch, run_epic};

/// What planning an epic came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Planned {
    /// Every task is a sub-issue of the epic, linked, blocked as planned and on the board, and
    /// the plan is posted: task id → sub-issue number, in the plan's order.
    Ready { tasks: Vec<(String, u64)> },
    /// The epic may not be planned (a stranger's issue, an untrusted edit, closed): nothing was
    /// written.
    Refused { reason: String },
    /// The planner's answer was refused (a cycle, too many tasks, none, unreadable, or the
    /// planner failed): said on the epic, nothing else written.
    PlanRefused { errors: Vec<String> },
    /// Stopped by a signal; running again goes on.
    Interrupted,
}

/// One journaled step.
#[derive(Debug, Serialize, Deserialize)]
struct Line {
    at: chrono::DateTime<chrono::Utc>,
    #[serde(flatten)]
    happened: Happened,
}

/// An epic's journal: what happened to it, one JSON line each, appended and synced.
struct EpicJournal {
    path: PathBuf,
    /// Held while this process works the epic: another is refused meanwhile.
    _lock: std::fs::File,
    happened: Vec<Happened>,
    /// When its first line was written.
    started: Option<chrono::DateTime<chrono::Utc>>,
}

impl EpicJournal {
    fn dir(root: &Path, epic: u64) -> PathBuf {
        root.join(CHECKPOINT_DIR)
            .join("epics")
            .join(epic.to_string())
    }

    /// The journal of `epic`, read back (a last line cut short by a crash is left out: its step
    /// is found again on GitHub), and held by this process: `Busy` when another process works
    /// the epic.
    fn open(root: &Path, epic: u64) -> Result<EpicJournal, RunError> {
        let dir = EpicJournal::dir(root, epic);
        std::fs::create_dir_all(&dir)
            .map_err(|e| journal_error(format!("{}: {e}", dir.display())))?;
        let path = dir.join("lock");
        let Some(mut lock) = crate::workspace::lock_file(&path, false)? else {
            let pid = std::fs::read_to_string(&path).unwrap_or_default();
            return Err(RunError::Busy {
                pid: pid.trim().parse().unwrap_or_default(),
                issue: epic,
            });
        };
        // Who holds it, for the process refused.
        let _ = lock
            .set_len(0)
            .and_then(|()| write!(lock, "{}", std::process::id()));
        let lines = EpicJournal::lines(root, epic).map_err(journal_error)?;
        let started = lines.first().map(|l| l.at);
        let happened = lines.into_iter().map(|l| l.happened).collect();
        Ok(EpicJournal {
            _lock: lock,
            started,
            path: dir.join("events.jsonl"),
            happened,
        })
    }

    /// What the journal of `epic` holds (nothing when there is none).
    fn read(root: &Path, epic: u64) -> Result<Vec<Happened>, String> {
        Ok((EpicJournal::lines(root, epic)?)
            .into_iter()
            .map(|l| l.happened)
            .collect())
    }

    /// When the first step was journaled.
    fn started(&self) -> Option<chrono::DateTime<chrono::Utc>> {
        self.started
    }

    fn lines(root: &Path, epic: u64) -> Result<Vec<Line>, String> {
        let path = EpicJournal::dir(root, epic).join("events.jsonl");
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        let complete = match text.rfind('\n') {
            Some(end) => &text[..end],
            None => "",
        };
        let mut happened = Vec::new();
        for (n, line) in complete
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let line: Line = serde_json::from_str(line).map_err(|e| {
                format!(
                    "{} line {}: {e}; move the file away to plan the epic afresh",
                    path.display(),
                    n + 1
                )
            })?;
            happened.push(line);
        }
        Ok(happened)
    }

    fn record(&mut self, happened: Happened) -> Result<(), String> {
        let line = Line {
            at: chrono::Utc::now(),
            happened,
        };
        let text = serde_json::to_string(&line).map_err(|e| e.to_string())?;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .map_err(|e| format!("{}: {e}", self.path.display()))?;
        // The sync holds up no other work of the runtime (the tasks' runs beside it).
        crate::pipeline::off_the_runtime(|| {
            file.write_all(format!("{text}\n").as_bytes())
                .and_then(|()| file.sync_data())
        })
        .map_err(|e| format!("{}: {e}", self.path.display()))?;
        self.started.get_or_insert(line.at);
        self.happened.push(line.happened);
        Ok(())
    }
}

/// An epic as its journal tells it, for listings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EpicRecord {
    pub epic: u64,
    /// The plan's tasks in order: id and sub-issue (once opened).
    pub tasks: Vec<EpicTask>,
    /// The plan is posted: the epic is planned.
    pub planned: bool,
    /// Its work is done: the summary is posted.
    pub finished: bool,
    /// The epic's pull request, once open.
    #[serde(rename = "pullRequest")]
    pub pull_request: Option<u64>,
    /// Why the journal could not be read, when it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unreadable: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EpicTask {
    pub task: String,
    pub issue: Option<u64>,
    pub(crate) depends_on: Vec<String>,
    /// Where the epic's work has it: `waiting`, `running`, `in review`, `sent back`, `accepted`,
    /// `merged`, `escalated` or `closed`.
    pub stage: &'static str,
}

/// Where the epic's work has a task.
fn task_stage(t: &crate::epic::TaskState) -> &'static str {
    match t {
        t if t.dropped || t.dropping => "dropped",
        t if t.escalated.is_some() => "escalated",
        t if t.closed_by_hand => "closed",
        t if t.merged => "merged",
        t if t.accepted => "accepted",
        t if t.running => "running",
        t if t.awaiting_review => "in review",
        t if t.feedback.is_some() => "sent back",
        _ => "waiting",
    }
}

/// Every epic planned (or being planned) in the repository at `root`, by number.
pub fn read_epics(root: &Path) -> std::io::Result<Vec<EpicRecord>> {
    let dir = root.join(CHECKPOINT_DIR).join("epics");
    let listing = match std::fs::read_dir(&dir) {
        Ok(l) => l,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut epics = Vec::new();
    for entry in listing {
        let Some(epic) = entry?.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        let record = match EpicJournal::read(root, epic) {
            Ok(happened) => {
                let state = Epic::fold(&happened);
                let mut tasks: Vec<EpicTask> = (state.plan.as_ref())
                    .map(|p| p.order())
                    .unwrap_or_default()
                    .into_iter()
                    .map(|t| EpicTask {
                        task: t.id.clone(),
                        issue: state.tasks.get(&t.id).and_then(|s| s.issue).map(|i| i.0),
                        depends_on: t.depends_on.clone(),
                        stage: state.tasks.get(&t.id).map_or("waiting", task_stage),
                    })
                    .collect();
                // Tasks a new plan dropped, after the plan's.
                tasks.extend(dropped_tasks(&state).map(|(id, t)| EpicTask {
                    task: id.clone(),
                    issue: t.issue.map(|i| i.0),
                    depends_on: Vec::new(),
                    stage: task_stage(t),
                }));
                EpicRecord {
                    epic,
                    tasks,
                    planned: state.plan_posted,
                    finished: state.finished,
                    pull_request: state.epic_pr,
                    unreadable: None,
                }
            }
            Err(e) => EpicRecord {
                epic,
                tasks: Vec::new(),
                planned: false,
                finished: false,
                pull_request: None,
                unreadable: Some(e),
            },
        };
        epics.push(record);
    }
    epics.sort_by_key(|e| e.epic);
    Ok(epics)
}

/// The tasks a new plan dropped (no longer in the plan), by id.
fn dropped_tasks(state: &Epic) -> impl Iterator<Item = (&String, &crate::epic::TaskState)> {
    let plan = state.plan.as_ref();
    (state.tasks.iter()).filter(move |(id, _)| plan.is_some_and(|p| p.task(id).is_none()))
}

fn journal_error(e: String) -> RunError {
    RunError::Unfinished(format!("the epic's journal: {e}"))
}

/// Plan epic `number`: its planner's tasks as sealed sub-issues on the board, then the plan on
/// the epic. Running it again after a stop goes on where it stopped; after it finished it only
/// reports the tasks.
pub async fn plan_epic(
    project: Arc<Project>,
    svc: &Services,
    number: u64,
) -> Result<Planned, RunError> {
    let (mut planner, mut journal) = match open_epic(project, svc, number).await? {
        Ok(opened) => opened,
        Err(reason) => return Ok(Planned::Refused { reason }),
    };
    planner.plan_all(&mut journal).await
}

/// The epic's planner and journal, or why the epic may not be planned (nothing written).
async fn open_epic(
    project: Arc<Project>,
    svc: &Services,
    number: u64,
) -> Result<Result<(Planner<'_>, EpicJournal), String>, RunError> {
    let gh = &svc.github;
    let (epic, refusal) = read_epic(&project, gh, number).await?;
    if let Some(reason) = refusal {
        return Ok(Err(reason));
    }
    let journal = EpicJournal::open(&project.root, number)?;
    let viewer = gh.viewer_login().await?;
    let limits = epic_limits(&project.settings);
    Ok(Ok((
        Planner {
            project,
            svc,
            epic,
            viewer,
            plans: 0,
            opened: BTreeMap::new(),
            found: None,
            limits,
        },
        journal,
    )))
}

/// The limits an epic is worked under: its settings', its tasks being runs of this process, never
/// more at once than `watch.maxConcurrent`.
fn epic_limits(settings: &crate::config::Settings) -> Limits {
    let mut limits = Limits::from(&settings.epic);
    limits.max_concurrency = (limits.max_concurrency).min(settings.watch.max_concurrent);
    limits
}

/// The tasks of a planned epic with their sub-issues, in the plan's order.
fn planned_tasks(state: &Epic) -> Vec<(String, u64)> {
    (state.plan.as_ref())
        .map(|p| p.order())
        .unwrap_or_default()
        .into_iter()
        .filter_map(|t| {
            let n = state.tasks.get(&t.id)?.issue?.0;
            Some((t.id.clone(), n))
        })
        .collect()
}

/// The epic, and why it may not be planned when it may not: a stranger's issue, a description or
/// title someone else set, a closed one.
async fn read_epic(
    project: &Project,
    gh: &GitHub,
    number: u64,
) -> Result<(Issue, Option<String>), RunError> {
    let settings = &project.settings;
    let epic = gh.get_issue(number).await?;
    let board = BoardRef::from_settings(settings);
    let editors = gh.issue_context(&board, number).await?.editors;
    let refusal = refuse_issue(settings, &epic)
        .or_else(|| refuse_context(settings, &epic, &[], &editors, false))
        .or(match trusted_title(settings, &epic, &editors) {
            TitleTrust::Refused(reason) => Some(reason),
            _ => None,
        });
    Ok((epic, refusal))
}

/// Why epic `number` may not be planned, asked before anything is written (`None`: it may).
pub async fn epic_refusal(
    project: &Project,
    gh: &GitHub,
    number: u64,
) -> Result<Option<String>, RunError> {
    Ok(read_epic(project, gh, number).await?.1)
}

/// Plan and work epic `number` as a run of the scheduler: its end as a run's summary.
pub async fn run_epic_run(
    project: Arc<Project>,
    svc: Services,
    number: u64,
) -> Result<crate::pipeline::RunSummary, RunError> {
    use crate::pipeline::{RunEnd, RunSummary, UserText};
    let end = match run_epic(project.clone(), &svc, number).await? {
        EpicEnd::Finished {
            tasks,
            pull_request,
        } => RunEnd::EpicFinished {
            tasks: (tasks.into_iter())
                .map(|t| (t.task, t.issue, t.outcome.to_string()))
                .collect(),
            pull_request,
        },
        EpicEnd::Waiting { pulls } => RunEnd::Paused {
            reason: waiting_text(&pulls),
        },
        EpicEnd::Paused { reason } => RunEnd::Paused { reason },
        EpicEnd::Refused { reason } => RunEnd::Refused { reason },
        EpicEnd::PlanRefused { errors } => RunEnd::Stopped {
            stage: "planning".into(),
            reason: UserText::ours(format!(
                "the planner's plan was refused (said on the epic): {}",
                errors.join("; ")
            )),
        },
        EpicEnd::Interrupted => RunEnd::Interrupted,
    };
    Ok(RunSummary::bare(
        crate::ids::RunId::new(format!("epic-{number}")),
        project.settings.repo.to_string(),
        number,
        end,
    ))
}

/// What an epic waits for when it waits on people merging its tasks' pull requests.
pub fn waiting_text(pulls: &[u64]) -> String {
    let list: Vec<String> = pulls.iter().map(|n| format!("#{n}")).collect();
    format!(
        "waiting for {} to be merged (`epic.integration` is `independent`): the tasks that depend \
         on them start then",
        list.join(", ")
    )
}

/// What performs the planning steps.
struct Planner<'s> {
    project: Arc<Project>,
    svc: &'s Services,
    epic: Issue,
    /// The login supervisor posts and opens issues as.
    viewer: String,
    /// Plans asked for in this process.
    plans: u32,
    /// The sub-issues this process opened (not found again), by task: what it holds of them
    /// needs no reading back.
    opened: BTreeMap<String, Issue>,
    /// The sub-issues of the epic's tasks opened before this process (before a crash, or a
    /// stop): looked for once, when the first is to be opened.
    found: Option<Vec<Issue>>,
    limits: Limits,
}

impl Planner<'_> {
    fn gh(&self) -> &GitHub {
        &self.svc.github
    }

    /// Take the planning steps (the plan, the sub-issues, their links and blockers, the plan's
    /// comment) until the epic is planned.
    async fn plan_all(&mut self, journal: &mut EpicJournal) -> Result<Planned, RunError> {
        loop {
            if self.svc.cancel.is_cancelled() {
                return Ok(Planned::Interrupted);
            }
            let state = Epic::fold(&journal.happened);
            let happened = match state.next(self.limits).into_iter().next() {
                Some(Step::Plan) => match self.plan().await? {
                    Ok(happened) => happened,
                    Err(outcome) => return Ok(outcome),
                },
                Some(Step::CreateSubIssue { task }) => self.sub_issue(&state, &task).await?,
                Some(Step::Link { task, number }) => self.link(&state, &task, number).await?,
                Some(Step::Block { task, on }) => self.block(&state, &task, &on, true).await?,
                Some(Step::PostPlan) => self.post_plan(&state).await?,
                // Planned: what comes next is the tasks' work.
                _ => {
                    return Ok(Planned::Ready {
                        tasks: planned_tasks(&state),
                    });
                }
            };
            journal.record(happened).map_err(journal_error)?;
        }
    }

    /// The planner's plan, or why it was refused (said on the epic).
    async fn plan(&mut self) -> Result<Result<Happened, Planned>, RunError> {
        self.plans += 1;
        let settings = &self.project.settings;
        let label = &settings.epic.label;
        if !self
            .epic
            .labels
            .iter()
            .any(|l| l.eq_ignore_ascii_case(label))
        {
            // The label says which issues are epics: their sub-issues run as supervisor's own.
            self.gh().add_label(self.epic.number, label).await?;
        }
        let errors: Vec<String> = match self.run_planner().await {
            Err(e) => vec![format!("the planner's definition: {e}")],
            Ok(run) if run.exit == ExitReason::Interrupted => return Ok(Err(Planned::Interrupted)),
            // What its CLI said stays in its transcript and the log.
            Ok(run) if !run.succeeded() => vec![format!(
                "the planner {}; `supervisor agent planner` runs it alone to see why",
                match &run.exit {
                    ExitReason::SpawnFailed(_) => "could not be started".to_string(),
                    ExitReason::Failed(_) => "failed".to_string(),
                    other => other.describe(),
                }
            )],
            Ok(run) => match read_plan(&run.final_text, settings.epic.max_tasks) {
                Ok(plan) => return Ok(Ok(Happened::Planned { plan })),
                Err(errors) => errors.iter().map(ToString::to_string).collect(),
            },
        };
        let marker = self.marker("plan", MarkerKind::EpicRefused);
        let body = format!(
            "## Epic Plan Refused\n\nThe planner's plan for this epic was not used, and nothing else \
             was written:\n\n{}\n\nEdit the epic (as a codeowner) to make the work clearer, or \
             change `epic.maxTasks`, then run `supervisor epic {}` again.",
            errors
                .iter()
                .map(|e| format!("- {e}"))
                .collect::<Vec<_>>()
                .join("\n"),
            self.epic.number
        );
        self.gh()
            .post_once(self.epic.number, &marker, &body, None)
            .await?;
        Ok(Err(Planned::PlanRefused { errors }))
    }

    /// Run the planner in the repository with the epic as its task.
    async fn run_planner(&self) -> Result<agent::AgentRun, String> {
        let p = &self.project;
        let task = planner_task(&self.epic, p.settings.epic.max_tasks);
        let dispatch = Dispatch {
            role: "planner",
            task,
            cwd: p.root.clone(),
            attempt: self.plans,
            subject: None,
            transcript: format!("planner-{}.jsonl", self.plans),
        };
        self.run_role(dispatch).await
    }

    async fn run_role(&self, d: Dispatch) -> Result<agent::AgentRun, String> {
        run_role(&self.project, self.svc, self.epic.number, d).await
    }

    fn marker(&self, stage: &str, kind: MarkerKind) -> Marker {
        Marker::new(format!("epic-{}", self.epic.number), stage, 0, kind)
    }

    /// The sealed body of `task`'s sub-issue.
    fn sealed_body(&self, task: &crate::epic::Task) -> String {
        let seal = Seal {
            epic: self.epic.number,
            task: task.id.clone(),
        };
        seal.stamp(&format!(
            "{}\n\nTask `{}` of epic #{}.",
            task.body.trim_end(),
            task.id,
            self.epic.number
        ))
    }

    /// `task`'s sub-issue: found (opened before a crash, or before a stop) or opened now.
    async fn sub_issue(&mut self, state: &Epic, id: &str) -> Result<Happened, RunError> {
        let task = state
            .plan
            .as_ref()
            .and_then(|p| p.task(id))
            .ok_or_else(|| RunError::Unfinished(format!("the plan has no task `{id}`")))?;
        let body = self.sealed_body(task);
        let epic = self.epic.number;
        let ours = |i: &Issue| {
            i.author.eq_ignore_ascii_case(&self.viewer)
                && Seal::verify(&i.body, epic).is_ok_and(|s| s.task == id)
        };
        // Looked for once in a process: what it opens later is in `opened`.
        if self.found.is_none() {
            let mut found = self.gh().sub_issues(epic).await?;
            found.extend(self.gh().latest_issues_by(&self.viewer).await?);
            found.retain(|i| {
                i.author.eq_ignore_ascii_case(&self.viewer) && Seal::verify(&i.body, epic).is_ok()
            });
            self.found = Some(found);
        }
        let found = (self.found.iter().flatten()).find(|i| ours(i)).cloned();
        let issue = match found {
            Some(issue) => issue,
            None => {
                let opened = self.gh().create_issue(&task.title, &body, &[]).await?;
                self.opened.insert(id.to_string(), opened.clone());
                opened
            }
        };
        Ok(Happened::SubIssueCreated {
            task: id.to_string(),
            number: issue.number,
            id: issue.id,
        })
    }

    /// `task`'s sub-issue linked under the epic and on the board, in Backlog: the epic's work
    /// starts its run when the tasks it depends on are done, and the run moves its card.
    async fn link(&self, state: &Epic, id: &str, number: u64) -> Result<Happened, RunError> {
        let epic = self.epic.number;
        let db = state.tasks.get(id).and_then(|t| t.issue).map_or(0, |i| i.1);
        // Opened by this process just now: it is the task's, and linked nowhere yet.
        let fresh = (self.opened.get(id)).filter(|i| i.number == number && i.id == db);
        let issue = match fresh {
            Some(issue) => {
                let issue = issue.clone();
                self.gh().add_sub_issue(epic, db).await?;
                issue
            }
            None => {
                // The journal lies in the checkout, where an agent could write: what it names is
                // linked (and, later, made a blocker) only when it is the sub-issue supervisor
                // opened for `id`.
                let issue = self.gh().get_issue(number).await?;
                let sealed = Seal::verify(&issue.body, epic).is_ok_and(|s| s.task == id);
                if !issue.author.eq_ignore_ascii_case(&self.viewer) || !sealed || issue.id != db {
                    return Err(RunError::Unfinished(format!(
                        "the epic's journal names #{number} as task `{id}`'s sub-issue, which \
                         supervisor did not open for it; move {} away to plan the epic afresh",
                        EpicJournal::dir(&self.project.root, epic).display()
                    )));
                }
                let linked = self.gh().sub_issues(epic).await?;
                if !linked.iter().any(|i| i.number == number) {
                    self.gh().add_sub_issue(epic, db).await?;
                }
                issue
            }
        };
        let p = &self.project;
        let option = p.settings.board_option(&p.workflow.backlog().id());
        self.place(&issue, &option).await?;
        Ok(Happened::Linked {
            task: id.to_string(),
        })
    }

    /// `issue`'s card on the board in column `option` (put on the board when it is not: GitHub
    /// answers an add with the card already there, as it is).
    async fn place(&self, issue: &Issue, option: &BoardOption) -> Result<(), RunError> {
        let board = BoardRef::from_settings(&self.project.settings);
        let item = self.gh().add_to_board(&board, issue).await?;
        if item.column.as_ref() != Some(option) {
            self.gh().move_card(&item, option).await?;
        }
        Ok(())
    }

    /// The epic's own card: in `epic.column` (when set) while it is worked, in Done once its
    /// work is done.
    async fn place_epic(&self, done: bool) -> Result<(), RunError> {
        let p = &self.project;
        let option = match (done, &p.settings.epic.column) {
            (true, _) => p.settings.board_option(&p.workflow.done().id()),
            (false, Some(column)) => BoardOption::new(column),
            (false, None) => return Ok(()),
        };
        self.place(&self.epic, &option).await
    }

    /// `task`'s sub-issue blocked by the sub-issue of `on` (`blocked`), or no longer.
    async fn block(
        &self,
        state: &Epic,
        id: &str,
        on: &str,
        blocked: bool,
    ) -> Result<Happened, RunError> {
        let issue_of = |t: &str| state.tasks.get(t).and_then(|t| t.issue);
        let (Some((number, _)), Some((blocker, blocker_id))) = (issue_of(id), issue_of(on)) else {
            return Err(RunError::Unfinished(format!(
                "task `{id}` or `{on}` has no sub-issue yet"
            )));
        };
        // A sub-issue this process opened is blocked by nothing it did not journal.
        let fresh = blocked && self.opened.get(id).is_some_and(|i| i.number == number);
        let is_blocked = !fresh
            && (self.gh().blocked_by(number).await?)
                .iter()
                .any(|i| i.number == blocker);
        let (task, on) = (id.to_string(), on.to_string());
        if !blocked {
            if is_blocked {
                self.gh().remove_blocked_by(number, blocker_id).await?;
            }
            return Ok(Happened::Unblocked { task, on });
        }
        if !is_blocked {
            self.gh().add_blocked_by(number, blocker_id).await?;
        }
        Ok(Happened::Blocked { task, on })
    }

    /// `task`'s sub-issue says (and is sealed for) the task's text in the current plan.
    async fn reseal(&self, state: &Epic, id: &str, number: u64) -> Result<Happened, RunError> {
        let task = (state.plan.as_ref())
            .and_then(|p| p.task(id))
            .ok_or_else(|| RunError::Unfinished(format!("the plan has no task `{id}`")))?;
        // Its text may have been changed since: it is written again.
        let issue = self.own_sub_issue(number, id).await?;
        let body = self.sealed_body(task);
        if issue.title != task.title || issue.body.replace("\r\n", "\n") != body {
            self.gh().update_issue(number, &task.title, &body).await?;
        }
        Ok(Happened::Resealed {
            task: id.to_string(),
        })
    }

    /// Issue `number`, when it is the sub-issue supervisor opened for task `id` (its seal names
    /// the epic and the task, verified or not). The journal lies in the checkout, where an agent
    /// could write: an issue it names is rewritten or closed only then.
    async fn own_sub_issue(&self, number: u64, id: &str) -> Result<Issue, RunError> {
        let epic = self.epic.number;
        let issue = self.gh().get_issue(number).await?;
        let claimed = Seal::read(&issue.body).is_some_and(|s| s.epic == epic && s.task == id);
        if !issue.author.eq_ignore_ascii_case(&self.viewer) || !claimed || issue.is_pull_request {
            return Err(RunError::Unfinished(format!(
                "the epic's journal names #{number} as task `{id}`'s sub-issue, which supervisor \
                 did not open for it; move {} away to plan the epic afresh",
                EpicJournal::dir(&self.project.root, epic).display()
            )));
        }
        Ok(issue)
    }

    /// A new plan, as `task`'s review asked (`reason`): the planner given the plan so far and
    /// where each task stands. `Err` with why the work pauses (the planner failed: running
    /// again asks it again); `Ok(None)`: interrupted.
    async fn replan(
        &mut self,
        state: &Epic,
        task: &str,
        reason: &str,
    ) -> Result<Result<Option<Happened>, String>, RunError> {
        let p = self.project.clone();
        let max_tasks = p.settings.epic.max_tasks;
        let attempt = state.replans + 2;
        let dispatch = Dispatch {
            role: "planner",
            task: replanner_task(&self.epic, state, task, reason, max_tasks),
            cwd: p.root.clone(),
            attempt,
            subject: None,
            transcript: format!("planner-{attempt}.jsonl"),
        };
        let errors: Vec<String> = match self.run_role(dispatch).await {
            Err(e) => return Ok(Err(format!("the planner's definition: {e}"))),
            Ok(run) if run.exit == ExitReason::Interrupted => return Ok(Ok(None)),
            Ok(run) if !run.succeeded() => {
                return Ok(Err(format!(
                    "the planner, asked for a new plan, {}; `supervisor agent planner` runs it \
                     alone to see why",
                    match &run.exit {
                        ExitReason::SpawnFailed(_) => "could not be started".to_string(),
                        ExitReason::Failed(_) => "failed".to_string(),
                        other => other.describe(),
                    }
                )));
            }
            Ok(run) => match read_plan(&run.final_text, max_tasks)
                .and_then(|answer| state.revise(&answer, task, reason, max_tasks))
            {
                Ok(replanned) => return Ok(Ok(Some(replanned))),
                Err(errors) => errors.iter().map(ToString::to_string).collect(),
            },
        };
        let marker = Marker::new(
            format!("epic-{}", self.epic.number),
            "replan",
            attempt,
            MarkerKind::EpicRefused,
        );
        let body = format!(
            "## Epic New Plan Refused\n\nThe review of task `{task}` asked for a new plan; the \
             planner's was not used, and nothing else was written:\n\n{}\n\nTask `{task}` is \
             handed to the codeowners.",
            errors
                .iter()
                .map(|e| format!("- {e}"))
                .collect::<Vec<_>>()
                .join("\n"),
        );
        self.gh()
            .post_once(self.epic.number, &marker, &body, None)
            .await?;
        Ok(Ok(Some(Happened::ReplanRefused {
            task: task.to_string(),
            errors,
        })))
    }

    /// The plan on the epic: its tasks, their sub-issues and the order they run in.
    async fn post_plan(&self, state: &Epic) -> Result<Happened, RunError> {
        self.say_plan(state, None).await?;
        Ok(Happened::PlanPosted)
    }

    /// The plan's comment — one, edited as the plan changes: the plan, what new plans changed,
    /// and once the work is done, `done` (how each task ended).
    async fn say_plan(&self, state: &Epic, done: Option<&str>) -> Result<(), RunError> {
        let Some(plan) = &state.plan else {
            return Err(RunError::Unfinished("the epic has no plan".into()));
        };
        let issues: BTreeMap<String, u64> = (state.tasks.iter())
            .filter_map(|(id, t)| Some((id.clone(), t.issue?.0)))
            .collect();
        let done = done
            .map(|table| format!("\n\n### Done\n\n{table}"))
            .unwrap_or_default();
        let body = format!(
            "## Epic Plan\n\n{}\n\nEach task is a sub-issue of this epic, written by supervisor: it \
             runs through the pipeline like any issue once the tasks it depends on are done.{}{done}",
            plan.render(&issues),
            revisions_text(&state.revisions)
        );
        let marker = self.marker("plan", MarkerKind::EpicPlan);
        self.gh()
            .post_or_edit(self.epic.number, &marker, &body)
            .await?;
        Ok(())
    }
}

/// Run one of epic `epic`'s roles; `Err` when its definition does not load.
async fn run_role(
    p: &Project,
    svc: &Services,
    epic: u64,
    d: Dispatch,
) -> Result<agent::AgentRun, String> {
    let loaded = RoleSet::load_epic(&p.root, &p.settings, &p.settings_path);
    let role = match loaded.map(|mut r| r.agents.remove(d.role)) {
        Ok(Some(role)) => role,
        Ok(None) => return Err("it did not load".into()),
        Err(e) => return Err(e.to_string()),
    };
    let token = svc.github_token.as_deref();
    let mut req =
        match AgentRequest::for_role(&p.settings, &p.root, &role, d.task, d.cwd, None, token) {
            Ok(r) => r,
            Err(e) => {
                let exit = ExitReason::SpawnFailed(e.to_string());
                return Ok(agent::AgentRun::not_started(&role, exit));
            }
        };
    if let (agent::Backend::Scripted { program, .. }, Some(path)) =
        (&mut req.backend, &svc.scripted_program)
    {
        *program = path.clone();
    }
    req.attempt = d.attempt;
    req.subject = d.subject;
    req.transcript = Some(
        EpicJournal::dir(&p.root, epic)
            .join("transcripts")
            .join(d.transcript),
    );
    Ok(agent::run_agent(req, svc.cancel.clone()).await)
}

/// One dispatch of an epic's role.
struct Dispatch {
    role: &'static str,
    task: String,
    cwd: PathBuf,
    attempt: u32,
    subject: Option<String>,
    /// The transcript's file name in the epic's `transcripts/`.
    transcript: String,
}

/// What each new plan changed, as the plan's comment lists it (nothing before the first).
fn revisions_text(revisions: &[crate::epic::Revision]) -> String {
    let mut out = String::new();
    for (n, r) in revisions.iter().enumerate() {
        if n == 0 {
            out.push_str("\n\n### Changes");
        }
        let list = |what: &str, ids: &[String]| {
            (!ids.is_empty()).then(|| {
                let ids: Vec<String> = ids.iter().map(|id| format!("`{id}`")).collect();
                format!("{what} {}", ids.join(", "))
            })
        };
        let changes: Vec<String> = [
            list("added", &r.added),
            list("changed", &r.changed),
            list("dropped", &r.dropped),
            list("kept as they were (done with)", &r.kept),
        ]
        .into_iter()
        .flatten()
        .collect();
        let changes = if changes.is_empty() {
            "no task changed".to_string()
        } else {
            changes.join("; ")
        };
        out.push_str(&format!(
            "\n\n{}. New plan, asked by the review of `{}`: {}.\n   {changes}.",
            n + 1,
            r.task,
            r.reason.split_whitespace().collect::<Vec<_>>().join(" ")
        ));
    }
    out
}

/// The planner's task when a review asks for a new plan: the epic, the plan so far with where
/// each task stands and its text, and the review's reason.
fn replanner_task(
    epic: &Issue,
    state: &Epic,
    task: &str,
    reason: &str,
    max_tasks: usize,
) -> String {
    let mut tasks = String::new();
    for t in state.plan.as_ref().map(|p| p.order()).unwrap_or_default() {
        let Some(s) = state.tasks.get(&t.id) else {
            continue;
        };
        let issue = s.issue.map(|i| format!(" (#{})", i.0)).unwrap_or_default();
        let pr =
            s.pr.map(|n| format!(", pull request #{n}"))
                .unwrap_or_default();
        let deps = if t.depends_on.is_empty() {
            String::new()
        } else {
            format!(", depends on {}", t.depends_on.join(", "))
        };
        let done = if s.settled() {
            " — kept as it is"
        } else {
            ""
        };
        tasks.push_str(&format!(
            "\n## Task `{}`{issue}: {}\n\n{}{pr}{deps}{done}\n\n{}\n",
            t.id,
            t.title,
            task_stage(s),
            t.body.trim()
        ));
    }
    let dropped: Vec<String> = dropped_tasks(state)
        .map(|(id, _)| format!("`{id}`"))
        .collect();
    let dropped = if dropped.is_empty() {
        String::new()
    } else {
        format!(
            "\nDropped by earlier plans (their ids are taken): {}.\n",
            dropped.join(", ")
        )
    };
    format!(
        "Plan epic #{} again, at most {max_tasks} tasks: the review of task `{task}` asks for a \
         new plan.\n\n# Why\n\n{}\n\n# The epic: {}\n\n{}\n\n# The plan so far\n{tasks}{dropped}\n\
         Answer with the whole new plan. Tasks done with stay as they are whatever you answer; \
         keep an id to keep its task (changed as needed), add tasks under new ids, and leave out \
         the tasks to drop.\n",
        epic.number,
        reason.trim(),
        epic.title,
        epic.body.trim_end()
    )
}

/// The planner's task: the epic as its codeowner wrote it, and the limits of a plan.
fn planner_task(epic: &Issue, max_tasks: usize) -> String {
    format!(
        "Split epic #{} into tasks, at most {max_tasks}.\n\n# {}\n\n{}\n",
        epic.number,
        epic.title,
        epic.body.trim_end()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::epic::{Plan, Revision, Task};

    #[test]
    fn an_epics_tasks_never_outnumber_the_runs_the_process_runs_at_once() {
        let mut settings = crate::config::Settings::minimal(
            crate::config::RepoSlug::parse("o/r").unwrap(),
            1,
            vec!["alice".into()],
        );
        settings.epic.max_concurrency = 4;
        settings.watch.max_concurrent = 2;
        assert_eq!(epic_limits(&settings).max_concurrency, 2);
        settings.watch.max_concurrent = 8;
        assert_eq!(epic_limits(&settings).max_concurrency, 4);
    }

    fn task(id: &str, deps: &[&str]) -> Task {
        Task {
            id: id.into(),
            title: format!("Task {id}"),
            body: format!("- [ ] {id} done"),
            depends_on: deps.iter().map(|d| d.to_string()).collect(),
        }
    }

    #[test]
    fn the_planner_asked_again_reads_the_plan_so_far_where_each_task_stands_and_why() {
        let plan = Plan::check(
            vec![
                task("units", &[]),
                task("format", &["units"]),
                task("old", &[]),
            ],
            8,
        )
        .unwrap();
        let mut happened = vec![Happened::Planned { plan }];
        for (n, id) in ["units", "format", "old"].iter().enumerate() {
            happened.push(Happened::SubIssueCreated {
                task: id.to_string(),
                number: 2 + n as u64,
                id: 100 + n as u64,
            });
        }
        happened.push(Happened::Started {
            task: "units".into(),
        });
        happened.push(Happened::RunEnded {
            task: "units".into(),
            pr: Some(9),
            reason: None,
            tokens: 0,
            score: None,
        });
        happened.push(Happened::Reviewed {
            task: "units".into(),
            verdict: crate::epic::Verdict::Accepted,
        });
        let state = Epic::fold(&happened);
        let answer = Plan::check(vec![task("units", &[]), task("format", &[])], 8).unwrap();
        happened.push(state.revise(&answer, "format", "why", 8).unwrap());
        happened.push(Happened::Dropped { task: "old".into() });
        let state = Epic::fold(&happened);
        let epic = Issue {
            number: 1,
            title: "Durations".into(),
            body: "Support days.".into(),
            author: "alice".into(),
            ..Issue::default()
        };
        let text = replanner_task(&epic, &state, "format", "labels are missing", 8);
        for said in [
            "Plan epic #1 again, at most 8 tasks",
            "the review of task `format` asks",
            "labels are missing",
            "Support days.",
            "## Task `units` (#2): Task units",
            "accepted, pull request #9 — kept as it is",
            "## Task `format` (#3)",
            "- [ ] format done",
            "Dropped by earlier plans (their ids are taken): `old`.",
        ] {
            assert!(text.contains(said), "{said}:\n{text}");
        }
    }

    #[test]
    fn the_plans_comment_lists_what_each_new_plan_changed() {
        assert_eq!(revisions_text(&[]), "");
        let text = revisions_text(&[
            Revision {
                task: "format".into(),
                reason: "labels\nare missing".into(),
                added: vec!["labels".into()],
                changed: vec!["format".into()],
                dropped: vec!["extra".into(), "more".into()],
                kept: vec!["docs".into()],
            },
            Revision {
                task: "docs".into(),
                reason: "again".into(),
                ..Revision::default()
            },
        ]);
        assert_eq!(
            text,
            "\n\n### Changes\n\n1. New plan, asked by the review of `format`: labels are missing.\n   \
             added `labels`; changed `format`; dropped `extra`, `more`; kept as they were (done \
             with) `docs`.\n\n2. New plan, asked by the review of `docs`: again.\n   no task changed."
        );
    }
}
