//! The scheduler's scenarios in-process: a fake world answers the core's actions (admissions,
//! claims, card reads, dispatches) from tables, runs end when a test says so, and the clock is
//! the test's. Each decision of `tests/watch.rs` is here, in milliseconds.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::TimeZone;

use super::*;
use crate::config::Settings;
use crate::events::{
    Actor, BoardRef as EventBoard, CliCommand, ColumnChange, CommentCommand, FieldRef,
    IssueLabeled, IssueRef,
};
use crate::github::RateLimit;
use crate::scheduler::Notice;

/// The world the core's actions reach, and what it asked for.
struct Fake {
    core: Core,
    tracker: Tracker,
    now: Now,
    /// The board as GitHub has it: issue → (column, open).
    board: BTreeMap<u64, (Option<String>, bool)>,
    refused: BTreeMap<u64, String>,
    /// Issues another watcher holds.
    taken: BTreeSet<u64>,
    /// Every action, in order.
    log: Vec<Action>,
}

fn project(configure: impl FnOnce(&mut Settings)) -> (tempfile::TempDir, Arc<Project>) {
    let dir = tempfile::tempdir().unwrap();
    let mut settings = Settings::minimal(slug("acme/widgets"), 1, vec!["alice".to_string()]);
    configure(&mut settings);
    let project = Project::from_settings(dir.path(), settings).expect("the settings are valid");
    (dir, Arc::new(project))
}

fn slug(s: &str) -> RepoSlug {
    RepoSlug::parse(s).unwrap()
}

fn config(max: usize) -> SchedulerConfig {
    SchedulerConfig {
        max_concurrent: max,
        poll_interval: Duration::from_secs(30),
        once: false,
        mode: Mode::Local,
    }
}

impl Fake {
    fn new(project: Arc<Project>, config: SchedulerConfig, state: WatchState) -> Fake {
        let tracker = Tracker::new(project.settings.watch.column_limits.clone());
        Fake {
            core: Core::new(project, config, tracker.clone(), state),
            tracker,
            now: Now {
                wall: Utc.with_ymd_and_hms(2026, 11, 27, 9, 0, 0).unwrap(),
                mono: Instant::now(),
            },
            board: BTreeMap::new(),
            refused: BTreeMap::new(),
            taken: BTreeSet::new(),
            log: Vec::new(),
        }
    }

    fn card(&mut self, issue: u64, column: &str) {
        self.board.insert(issue, (Some(column.to_string()), true));
    }

    fn cards(&mut self, issues: &[u64], column: &str) {
        for issue in issues {
            self.card(*issue, column);
        }
    }

    fn tick(&mut self, secs: i64) {
        self.now.wall += chrono::Duration::seconds(secs);
    }

    /// Feed `input` and answer every action that asks something, as the driver does: the
    /// actions it all led to.
    fn feed(&mut self, input: Input) -> Vec<Action> {
        let mut all = Vec::new();
        let mut pending = std::collections::VecDeque::from([input]);
        while let Some(input) = pending.pop_front() {
            for action in self.core.on(input, self.now) {
                if let Some(answer) = self.answer(&action) {
                    pending.push_back(answer);
                }
                all.push(action);
            }
        }
        self.log.extend(all.iter().cloned());
        all
    }

    fn answer(&self, action: &Action) -> Option<Input> {
        match action {
            Action::Admit(key) => Some(Input::Admission {
                key: *key,
                answer: match self.refused.get(&key.number()) {
                    Some(reason) => Admission::Refused(reason.clone()),
                    None => Admission::Admit,
                },
            }),
            Action::Claim(issue) => Some(Input::Claimed {
                issue: *issue,
                answer: if self.taken.contains(issue) {
                    ClaimAnswer::Taken {
                        holder: "elsewhere-1".into(),
                        until: "2026-11-27T10:00:00Z".into(),
                    }
                } else {
                    ClaimAnswer::Ours(Held {
                        comment_id: 1000 + issue,
                    })
                },
            }),
            Action::Dispatch {
                issue, workflow, ..
            } => Some(Input::Dispatched {
                issue: *issue,
                workflow: workflow.clone(),
                result: Ok(()),
            }),
            Action::ReadCard(moved) => {
                let issue = moved.issue.number.unwrap();
                let found = self.board.get(&issue).map(|(column, open)| FoundCard {
                    project_id: "PVT_1".into(),
                    project_number: 1,
                    card: Some(card(issue, column.as_deref(), *open)),
                });
                Some(Input::CardRead {
                    moved: moved.clone(),
                    found: Ok(found),
                })
            }
            _ => None,
        }
    }

    fn poll(&mut self) -> Vec<Action> {
        let cards = self
            .board
            .iter()
            .map(|(issue, (column, open))| card(*issue, column.as_deref(), *open))
            .collect();
        let poll = BoardPoll {
            project_id: "PVT_1".into(),
            cards,
            skipped: 0,
            pages: 1,
            rate: RateLimit::default(),
            viewer: Some("supervisor-bot".into()),
        };
        self.feed(Input::Polled {
            poll,
            read_at: Instant::now(),
            duration_ms: 5,
        })
    }

    fn end(&mut self, key: WorkKey, end: RunEnd) -> Vec<Action> {
        self.feed(Input::RunEnded {
            key,
            result: Ok(summary(key.number(), end)),
        })
    }

    /// The run moves its card, as its hooks tell the tracker.
    fn run_moves(&mut self, issue: u64, column: &str) {
        futures_util::FutureExt::now_or_never(crate::runtime::RunHooks::moving(
            &self.tracker,
            issue,
            column,
        ))
        .expect("the column has room");
        crate::runtime::RunHooks::moved(&self.tracker, issue, column);
        self.card(issue, column);
    }
}

fn card(issue: u64, column: Option<&str>, open: bool) -> Card {
    Card {
        item_id: format!("PVTI_{issue}"),
        issue,
        issue_node_id: format!("I_{issue}"),
        column: column.map(crate::ids::BoardOption::new),
        open,
        labels: Vec::new(),
    }
}

fn summary(issue: u64, end: RunEnd) -> RunSummary {
    let run_id = format!("{issue}-20261127T090000.000Z");
    RunSummary::bare(
        crate::ids::RunId::new(run_id),
        "acme/widgets".into(),
        issue,
        end,
    )
}

/// The start of issue `issue`'s run with its claim, its card last seen in `column`.
fn start(issue: u64, column: &str) -> Action {
    Action::Start {
        key: WorkKey::Issue(issue),
        held: Some(Held {
            comment_id: 1000 + issue,
        }),
        column: Some(column.into()),
    }
}

fn pr(issue: u64) -> RunEnd {
    RunEnd::PullRequest {
        url: format!("https://github.com/acme/widgets/pull/{}", 100 + issue),
        number: 100 + issue,
        created: true,
    }
}

fn actor(login: &str) -> Actor {
    Actor {
        login: login.into(),
        association: None,
        is_bot: false,
    }
}

fn comment(
    issue: u64,
    by: &str,
    id: u64,
    command: Result<Command, CommandError>,
) -> CommentCommand {
    CommentCommand {
        origin: Origin::Webhook {
            delivery: format!("d-{id}"),
        },
        repository: slug("acme/widgets"),
        target: Target::Issue(issue),
        comment_id: id,
        author: actor(by),
        sender: actor(by),
        edited: false,
        command,
    }
}

fn moved(issue: u64, by: &str) -> CardMoved {
    CardMoved {
        origin: Origin::Webhook {
            delivery: format!("m-{issue}"),
        },
        item_node_id: format!("PVTI_{issue}"),
        board: EventBoard {
            node_id: "PVT_1".into(),
            number: Some(1),
            owner: Some("acme".into()),
        },
        issue: IssueRef {
            node_id: format!("I_{issue}"),
            number: Some(issue),
        },
        field: FieldRef {
            node_id: "PVTSSF_1".into(),
            name: Some("Status".into()),
        },
        columns: ColumnChange::NeedsLookup,
        moved_by: actor(by),
    }
}

fn started(actions: &[Action]) -> Vec<u64> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Start { key, .. } => Some(key.number()),
            _ => None,
        })
        .collect()
}

fn notices<'a>(actions: &'a [Action], kind: &str) -> Vec<&'a Notice> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Notice(n) => Some(n),
            _ => None,
        })
        .filter(|n| serde_json::to_value(n).unwrap()["kind"].as_str() == Some(kind))
        .collect()
}

fn posts(actions: &[Action]) -> Vec<(u64, &Marker, &str)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Post {
                issue,
                marker,
                body,
                ..
            } => Some((*issue, marker, body.as_str())),
            _ => None,
        })
        .collect()
}

fn begun(project: Arc<Project>, config: SchedulerConfig, state: WatchState) -> Fake {
    let mut w = Fake::new(project, config, state);
    w.feed(Input::Begin {
        leftovers: Vec::new(),
        paid: BTreeSet::new(),
    });
    w
}

/// A begun scheduler of the default project, with a fresh watch state.
fn fresh(config: SchedulerConfig) -> (tempfile::TempDir, Fake) {
    let (dir, project) = project(|_| {});
    (dir, begun(project, config, WatchState::default()))
}

fn once(max: usize) -> SchedulerConfig {
    SchedulerConfig {
        once: true,
        ..config(max)
    }
}

#[test]
fn a_card_arriving_in_the_trigger_column_is_admitted_claimed_and_started() {
    let (_d, mut w) = fresh(config(2));
    w.card(1, "Research");
    let actions = w.poll();
    let asked: Vec<&Action> = actions
        .iter()
        .filter(|a| {
            matches!(
                a,
                Action::Admit(_) | Action::Claim(_) | Action::Start { .. }
            )
        })
        .collect();
    assert_eq!(
        asked,
        [
            &Action::Admit(WorkKey::Issue(1)),
            &Action::Claim(1),
            &start(1, "Research"),
        ]
    );
    // The board as seen and the run owed are saved together.
    assert!(actions.contains(&Action::SaveState));
    assert_eq!(w.core.state().owed.len(), 1);
    // The same card seen again starts nothing more.
    assert!(started(&w.poll()).is_empty());
    // Its end releases the claim and pays the debt.
    let end = w.end(WorkKey::Issue(1), pr(1));
    assert!(end.contains(&Action::Release {
        issue: 1,
        held: Held { comment_id: 1001 }
    }));
    assert!(w.core.state().owed.is_empty());
    assert_eq!(notices(&end, "finished").len(), 1);
}

#[test]
fn nothing_starts_before_the_first_poll_says_where_the_cards_are() {
    let (_d, project) = project(|_| {});
    let state = WatchState {
        watcher: "w-1".into(),
        resume: [4].into(),
        ..WatchState::default()
    };
    let mut w = Fake::new(project, config(2), state);
    let begin = w.feed(Input::Begin {
        leftovers: vec![WorkKey::Issue(5)],
        paid: BTreeSet::new(),
    });
    assert_eq!(notices(&begin, "queued").len(), 2, "{begin:#?}");
    assert!(started(&begin).is_empty());
    w.card(4, "Implementation");
    w.card(5, "TestDesign");
    let poll = w.poll();
    assert_eq!(started(&poll), [4, 5]);
    // Each starts with its card where the poll read it.
    assert!(poll.contains(&start(4, "Implementation")));
}

#[test]
fn with_max_concurrent_1_the_second_card_waits_for_the_first_to_end() {
    let (_d, mut w) = fresh(config(1));
    w.cards(&[1, 2], "Research");
    let poll = w.poll();
    assert_eq!(started(&poll), [1]);
    assert_eq!(w.core.queued(), [2]);
    assert_eq!(started(&w.end(WorkKey::Issue(1), pr(1))), [2]);
}

#[test]
fn a_full_column_holds_a_start_whose_card_is_there() {
    let (_d, project) = project(|s| {
        s.watch.column_limits = [("Research".to_string(), 1)].into();
    });
    let mut w = begun(project, config(3), WatchState::default());
    w.cards(&[1, 2], "Research");
    assert_eq!(started(&w.poll()), [1]);
    // The first run moves on: Research has room again.
    w.run_moves(1, "TestDesign");
    assert_eq!(started(&w.poll()), [2]);
}

/// Issue 1's run moves its card to `run_column`, then alice drags it to `to`: what that asks
/// (a stop, checked).
fn dragged(w: &mut Fake, run_column: &str, to: &str) -> Vec<Action> {
    w.card(1, "Research");
    w.poll();
    w.run_moves(1, run_column);
    w.card(1, to);
    let seen = w.feed(Input::Event(Event::CardMoved(moved(1, "alice"))));
    assert!(seen.contains(&Action::Stop(WorkKey::Issue(1))), "{seen:#?}");
    seen
}

#[test]
fn a_card_dragged_back_stops_its_run_with_one_comment_and_no_restart() {
    let (_d, mut w) = fresh(config(2));
    let seen = dragged(&mut w, "TestDesign", "Backlog");
    let stopping = notices(&seen, "stopping");
    assert_eq!(stopping.len(), 1);
    // The redelivered move asks for nothing more.
    let again = w.feed(Input::Event(Event::CardMoved(moved(1, "alice"))));
    assert!(!again.contains(&Action::Stop(WorkKey::Issue(1))));
    let end = w.end(WorkKey::Issue(1), RunEnd::Interrupted);
    let comments = posts(&end);
    assert_eq!(comments.len(), 1, "{end:#?}");
    assert!(
        comments[0].2.starts_with("## Run Stopped"),
        "{}",
        comments[0].2
    );
    assert!(comments[0].2.contains("by @alice"), "{}", comments[0].2);
    assert!(started(&end).is_empty());
    assert!(w.core.state().owed.is_empty());
}

#[test]
fn a_card_moved_back_into_an_earlier_agent_column_restarts_its_run_from_there() {
    let (_d, mut w) = fresh(config(2));
    dragged(&mut w, "Implementation", "TestDesign");
    let end = w.end(WorkKey::Issue(1), RunEnd::Interrupted);
    assert!(posts(&end)[0].2.contains("It starts again from there."));
    // Queued again at once, asked for by name; it starts with the card in TestDesign.
    assert!(end.contains(&start(1, "TestDesign")));
}

#[test]
fn a_poll_read_before_the_runs_own_move_does_not_stop_it() {
    let (_d, mut w) = fresh(config(2));
    w.card(1, "Research");
    w.poll();
    let read_at = Instant::now();
    std::thread::sleep(Duration::from_millis(2));
    w.run_moves(1, "TestDesign");
    // A poll whose reading began before the move shows the card where it was.
    let cards = vec![card(1, Some("Research"), true)];
    let stale = w.feed(Input::Polled {
        poll: BoardPoll {
            project_id: "PVT_1".into(),
            cards,
            ..BoardPoll::default()
        },
        read_at,
        duration_ms: 1,
    });
    assert!(
        !stale.contains(&Action::Stop(WorkKey::Issue(1))),
        "{stale:#?}"
    );
    // A later one that still shows it elsewhere does.
    w.card(1, "Done");
    assert!(w.poll().contains(&Action::Stop(WorkKey::Issue(1))));
}

#[test]
fn a_start_queued_by_a_cards_arrival_is_dropped_when_the_card_leaves_first() {
    let (_d, mut w) = fresh(config(1));
    w.cards(&[1, 2], "Research");
    w.poll();
    w.card(2, "Backlog");
    let seen = w.feed(Input::Event(Event::CardMoved(moved(2, "alice"))));
    assert_eq!(notices(&seen, "dequeued").len(), 1, "{seen:#?}");
    assert!(w.core.queued().is_empty());
    assert!(started(&w.end(WorkKey::Issue(1), pr(1))).is_empty());
}

#[test]
fn what_was_owed_before_a_restart_waits_for_its_card_and_what_was_paid_is_forgotten() {
    let (_d, project) = project(|_| {});
    let at = Utc.with_ymd_and_hms(2026, 11, 27, 8, 0, 0).unwrap();
    let owed = |n: u64, column: Option<&str>| {
        Owed::new(
            n,
            false,
            "the card arrived in Research",
            column.map(String::from),
            at,
        )
    };
    let state = WatchState {
        watcher: "w-1".into(),
        owed: vec![
            owed(1, Some("Research")),
            owed(2, Some("Research")),
            owed(3, None),
            owed(4, Some("Research")),
        ],
        board: Some(BTreeMap::new()),
        ..WatchState::default()
    };
    let mut w = Fake::new(project, config(5), state);
    let begin = w.feed(Input::Begin {
        leftovers: Vec::new(),
        // Issue 4's run ended after it was asked for: only the record was lost.
        paid: [WorkKey::Issue(4)].into(),
    });
    assert_eq!(notices(&begin, "queued").len(), 3);
    assert!(w.core.state().owed.iter().all(|o| o.number != 4));
    // A person took card 2 back meanwhile.
    w.card(1, "Research");
    w.card(2, "Backlog");
    w.card(3, "Implementation");
    let poll = w.poll();
    assert_eq!(started(&poll), [1, 3]);
    assert_eq!(notices(&poll, "dequeued").len(), 1);
}

#[test]
fn a_drain_stops_taking_work_keeps_the_queue_owed_and_resumes_the_live_runs_next_time() {
    let (_d, mut w) = fresh(config(1));
    w.cards(&[1, 2], "Research");
    w.poll();
    let drain = w.feed(Input::Shutdown);
    assert_eq!(notices(&drain, "draining").len(), 1);
    assert!(drain.contains(&Action::SaveState));
    assert!(w.core.draining());
    assert!(!w.core.done(), "the live run has not ended");
    // Cards and commands are no longer taken.
    w.card(3, "Research");
    assert!(started(&w.poll()).is_empty());
    let end = w.end(WorkKey::Issue(1), RunEnd::Interrupted);
    assert!(started(&end).is_empty());
    assert!(w.core.done());
    let state = w.core.state().clone();
    assert_eq!(state.resume, [1].into());
    let owed: Vec<u64> = state.owed.iter().map(|o| o.number).collect();
    assert_eq!(owed, [1, 2]);
    // The next start resumes issue 1 first, then the queued card.
    let mut next = Fake::new(w.core.project.clone(), config(1), state);
    let begin = next.feed(Input::Begin {
        leftovers: Vec::new(),
        paid: BTreeSet::new(),
    });
    let queued = notices(&begin, "queued");
    assert_eq!(queued.len(), 2, "{begin:#?}");
    next.card(1, "Implementation");
    next.card(2, "Research");
    assert_eq!(started(&next.poll()), [1]);
}

#[test]
fn an_issue_the_run_would_refuse_or_another_watcher_holds_gets_nothing() {
    let (_d, mut w) = fresh(config(3));
    w.cards(&[1, 2], "Research");
    w.refused.insert(1, "issue #1 is blocked by #9".into());
    w.taken.insert(2);
    let poll = w.poll();
    assert!(started(&poll).is_empty(), "{poll:#?}");
    // A refusal writes nothing: no claim was asked.
    assert!(!poll.contains(&Action::Claim(1)));
    assert_eq!(notices(&poll, "refused").len(), 1);
    assert_eq!(notices(&poll, "claimed").len(), 1);
    assert!(posts(&poll).is_empty());
    assert!(w.core.state().owed.is_empty());
}

#[test]
fn github_trouble_at_admission_tries_again_at_the_next_poll() {
    let (_d, mut w) = fresh(config(1));
    w.card(1, "Research");
    let first = w.core.on(
        Input::Polled {
            poll: BoardPoll {
                project_id: "PVT_1".into(),
                cards: vec![card(1, Some("Research"), true)],
                ..BoardPoll::default()
            },
            read_at: Instant::now(),
            duration_ms: 1,
        },
        w.now,
    );
    assert!(first.contains(&Action::Admit(WorkKey::Issue(1))));
    let unknown = w.core.on(
        Input::Admission {
            key: WorkKey::Issue(1),
            answer: Admission::Unknown("502 Bad Gateway".into()),
        },
        w.now,
    );
    assert!(started(&unknown).is_empty());
    // Still owed, and the next poll queues it again.
    assert_eq!(w.core.state().owed.len(), 1);
    assert_eq!(started(&w.poll()), [1]);
}

#[test]
fn a_run_paused_by_github_is_queued_again_at_the_next_poll() {
    let (_d, mut w) = fresh(config(1));
    w.card(1, "Research");
    w.poll();
    let end = w.end(
        WorkKey::Issue(1),
        RunEnd::Paused {
            reason: "GitHub is unavailable".into(),
        },
    );
    assert!(started(&end).is_empty());
    assert_eq!(w.core.state().owed.len(), 1, "still owed");
    assert_eq!(started(&w.poll()), [1]);
}

#[test]
fn once_polls_starts_what_is_due_and_is_done_when_those_runs_end() {
    let (_d, mut w) = fresh(once(2));
    assert!(!w.core.done(), "not polled yet");
    w.card(1, "Research");
    w.poll();
    assert!(!w.core.done());
    // Cards arriving after the one poll are for the next start.
    w.card(2, "Research");
    let later = w.feed(Input::Event(Event::CardMoved(moved(2, "alice"))));
    assert!(started(&later).is_empty());
    w.end(WorkKey::Issue(1), pr(1));
    assert!(w.core.done());
}

#[test]
fn once_whose_one_poll_failed_is_done_with_nothing_started() {
    let (_d, mut w) = fresh(once(2));
    let failed = w.feed(Input::PollFailed("502 Bad Gateway".into()));
    assert_eq!(notices(&failed, "poll_failed").len(), 1);
    assert!(w.core.done());
    assert!(w.core.outcome().never_polled);
}

/// A begun scheduler of the default project that dispatches its runs to GitHub Actions.
fn in_actions_mode(once: bool) -> (tempfile::TempDir, Fake) {
    let (dir, project) = project(|_| {});
    let mode = Mode::Actions {
        workflow: "supervisor.yml".into(),
        git_ref: "main".into(),
    };
    let config = SchedulerConfig {
        mode,
        once,
        ..config(1)
    };
    (dir, begun(project, config, WatchState::default()))
}

#[test]
fn in_actions_mode_each_ready_card_becomes_one_dispatch() {
    let (_d, mut w) = in_actions_mode(true);
    w.cards(&[1, 2, 3], "Research");
    let poll = w.poll();
    let dispatched: Vec<u64> = poll
        .iter()
        .filter_map(|a| match a {
            Action::Dispatch { issue, .. } => Some(*issue),
            _ => None,
        })
        .collect();
    // Not bounded by max_concurrent: the runs happen elsewhere.
    assert_eq!(dispatched, [1, 2, 3]);
    assert!(started(&poll).is_empty());
    assert_eq!(w.core.outcome().dispatched, [1, 2, 3]);
    assert!(w.core.state().owed.is_empty());
    assert!(w.core.done());
}

#[test]
fn commands_are_taken_from_codeowners_only_and_a_malformed_one_gets_its_help_once() {
    let (_d, mut w) = fresh(config(2));
    w.card(7, "Backlog");
    w.poll();
    // A stranger's command, well formed or not, gets nothing at all.
    for command in [Ok(Command::Run), Err(CommandError::Missing)] {
        let seen = w.feed(Input::Event(Event::Command(comment(
            7, "mallory", 1, command,
        ))));
        assert!(started(&seen).is_empty());
        assert!(posts(&seen).is_empty(), "{seen:#?}");
        assert_eq!(notices(&seen, "ignored").len(), 1);
    }
    // An edit by a stranger of a codeowner's comment is a stranger's.
    let mut edited = comment(7, "alice", 2, Ok(Command::Run));
    edited.sender = actor("mallory");
    let seen = w.feed(Input::Event(Event::Command(edited)));
    assert!(started(&seen).is_empty());
    // A codeowner's malformed command: the error and the commands, once per comment.
    let typo = || {
        Event::Command(comment(
            7,
            "alice",
            3,
            Err(CommandError::Unknown {
                word: "strat".into(),
            }),
        ))
    };
    let seen = w.feed(Input::Event(typo()));
    let replies = posts(&seen);
    assert_eq!(replies.len(), 1);
    let (issue, marker, body) = replies[0];
    assert_eq!(issue, 7);
    assert!(body.contains("unknown command `strat`"), "{body}");
    assert!(body.contains("`/supervisor run`"), "{body}");
    let again = w.feed(Input::Event(typo()));
    // The same comment again is answered under the same marker (posted once by the driver).
    assert_eq!(posts(&again)[0].1, marker);
    // A command of another repository is not taken.
    let mut elsewhere = comment(7, "alice", 4, Ok(Command::Run));
    elsewhere.repository = slug("acme/other");
    assert!(started(&w.feed(Input::Event(Event::Command(elsewhere)))).is_empty());
    // The codeowner's `run` starts it.
    let run = w.feed(Input::Event(Event::Command(comment(
        7,
        "alice",
        5,
        Ok(Command::Run),
    ))));
    assert_eq!(started(&run), [7]);
}

#[test]
fn run_of_a_live_issue_is_answered_and_stop_and_status_act_on_it() {
    let (_d, mut w) = fresh(config(2));
    w.card(1, "Research");
    w.poll();
    let run = w.feed(Input::Event(Event::Command(comment(
        1,
        "alice",
        9,
        Ok(Command::Run),
    ))));
    assert_eq!(
        run,
        [Action::AlreadyRunning {
            issue: 1,
            by: Some("alice".into()),
            column: Some("Research".into()),
            comment: Some(9),
        }]
    );
    let status = w.feed(Input::Event(Event::Command(comment(
        1,
        "alice",
        10,
        Ok(Command::Status),
    ))));
    let body = posts(&status)[0].2;
    assert!(body.contains("A run is live since 2026-11-27T09:00:00Z with the card in Research."));
    let stop = w.feed(Input::Event(Event::Cli(CliCommand {
        issue: 1,
        command: Command::Stop,
    })));
    assert!(stop.contains(&Action::Stop(WorkKey::Issue(1))));
    let end = w.end(WorkKey::Issue(1), RunEnd::Interrupted);
    assert!(
        posts(&end)[0]
            .2
            .contains("Stopped from supervisor's command line"),
        "{}",
        posts(&end)[0].2
    );
}

#[test]
fn a_codeowners_label_queues_the_issue_and_a_strangers_does_not() {
    let (_d, mut w) = fresh(config(2));
    w.poll();
    let label = |by: &str| {
        Event::IssueLabeled(IssueLabeled {
            origin: Origin::Webhook {
                delivery: "l".into(),
            },
            repository: slug("acme/widgets"),
            issue: 3,
            issue_node_id: "I_3".into(),
            label: "supervisor".into(),
            labeled_by: actor(by),
            issue_author: actor("alice"),
        })
    };
    assert!(started(&w.feed(Input::Event(label("mallory")))).is_empty());
    assert_eq!(started(&w.feed(Input::Event(label("alice")))), [3]);
}

/// What the watch state owes: numbers, and whether each is a revision.
fn owed(w: &Fake) -> Vec<(u64, bool)> {
    let state = w.core.state();
    state.owed.iter().map(|o| (o.number, o.revision)).collect()
}

#[test]
fn a_revision_is_work_of_its_own_kind_and_never_the_issue_of_the_same_number() {
    let (_d, mut w) = fresh(config(3));
    w.card(5, "Research");
    w.poll();
    let mut revise = comment(
        5,
        "alice",
        11,
        Ok(Command::Revise {
            note: "rename it".into(),
        }),
    );
    revise.target = Target::PullRequest(5);
    let seen = w.feed(Input::Event(Event::Command(revise)));
    // Issue #5 is live; pull request #5 (a number GitHub never gives both, here typed apart)
    // starts its own revision, with no claim and no admission by the scheduler.
    assert!(
        seen.contains(&Action::Start {
            key: WorkKey::Revision(5),
            held: None,
            column: None,
        }),
        "{seen:#?}"
    );
    assert!(!seen.contains(&Action::Admit(WorkKey::Revision(5))));
    assert_eq!(owed(&w), [(5, false), (5, true)]);
    // The revision's end pays its debt only.
    w.end(
        WorkKey::Revision(5),
        RunEnd::Revised {
            url: "https://github.com/acme/widgets/pull/5".into(),
            number: 5,
            round: 1,
            sha: "abc".into(),
        },
    );
    assert_eq!(owed(&w), [(5, false)]);
}

#[test]
fn a_board_with_mapped_column_names_drives_the_workflows_stages() {
    let (_d, project) = project(|s| {
        s.columns = [("Research".to_string(), "🔎 Investigating".to_string())].into();
    });
    let mut w = begun(project, config(2), WatchState::default());
    w.card(1, "🔎 Investigating");
    let poll = w.poll();
    assert!(poll.contains(&start(1, "Research")));
}

#[test]
fn the_status_is_typed_and_names_the_live_runs_and_the_queue() {
    let (_d, mut w) = fresh(config(1));
    w.cards(&[1, 2], "Research");
    w.tick(60);
    w.poll();
    let status = serde_json::to_value(w.core.status()).unwrap();
    assert_eq!(status["mode"], "local");
    assert_eq!(status["live"][0]["issue"], 1);
    assert_eq!(status["live"][0]["column"], "Research");
    assert_eq!(status["live"][0]["since"], "2026-11-27T09:01:00+00:00");
    assert_eq!(status["queue"], serde_json::json!([2]));
    assert_eq!(status["last_poll"]["poll"]["kind"], "polled");
}

#[test]
fn authorise_names_the_repository_or_the_stranger() {
    let (_d, project) = project(|_| {});
    let here = slug("acme/widgets");
    assert_eq!(authorise(&project, &here, &["Alice"], "a command"), Ok(()));
    assert_eq!(
        authorise(&project, &here, &["alice", "mallory"], "a command"),
        Err("@mallory is not a codeowner".to_string())
    );
    let there = slug("acme/other");
    assert_eq!(
        authorise(&project, &there, &["alice"], "a command"),
        Err("a command in acme/other, not acme/widgets".to_string())
    );
}

fn labeled(issue: u64, label: &str, by: &str) -> Event {
    Event::IssueLabeled(IssueLabeled {
        origin: Origin::Webhook {
            delivery: format!("l-{issue}-{label}"),
        },
        repository: slug("acme/widgets"),
        issue,
        issue_node_id: format!("I_{issue}"),
        label: label.into(),
        labeled_by: actor(by),
        issue_author: actor("alice"),
    })
}

fn epic_started(actions: &[Action]) -> Vec<(WorkKey, Option<String>)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Start { key, column, .. } => Some((*key, column.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn a_codeowners_epic_label_or_command_plans_the_epic_and_a_strangers_does_nothing() {
    // Planning takes a slot like a run (its planner is an agent).
    let (_d, mut w) = fresh(config(3));
    w.card(7, "Research");
    w.poll();
    // The epic's label by a stranger: nothing; by a codeowner: the epic is planned, not run,
    // and its card (it has one) is not the planning's.
    assert!(
        w.feed(Input::Event(labeled(9, "supervisor:epic", "mallory")))
            .iter()
            .all(|a| !matches!(a, Action::Admit(_) | Action::Start { .. }))
    );
    let actions = w.feed(Input::Event(labeled(9, "Supervisor:Epic", "alice")));
    assert!(
        actions.contains(&Action::Admit(WorkKey::Epic(9))),
        "{actions:?}"
    );
    assert!(actions.contains(&Action::Claim(9)), "{actions:?}");
    assert_eq!(epic_started(&actions), [(WorkKey::Epic(9), None)]);
    assert!(w.core.state().owed.iter().any(|o| o.number == 9 && o.epic));
    // `/supervisor epic` by a codeowner on another issue; a stranger's is not taken.
    let by =
        |who: &str, id: u64| Input::Event(Event::Command(comment(11, who, id, Ok(Command::Epic))));
    assert!(epic_started(&w.feed(by("mallory", 1))).is_empty());
    assert_eq!(
        epic_started(&w.feed(by("alice", 2))),
        [(WorkKey::Epic(11), None)]
    );
    // Planned: the claim is released, the end said, nothing owed; an issue run of the same
    // number is still work of its own kind.
    let tasks = vec![("units".to_string(), 12), ("docs".to_string(), 13)];
    let ended = w.feed(Input::RunEnded {
        key: WorkKey::Epic(9),
        result: Ok(summary(9, RunEnd::Planned { tasks })),
    });
    assert!(
        ended
            .iter()
            .any(|a| matches!(a, Action::Release { issue: 9, .. })),
        "{ended:?}"
    );
    let finished = notices(&ended, "finished");
    assert_eq!(serde_json::to_value(finished[0]).unwrap()["end"], "planned");
    assert!(w.core.state().owed.iter().all(|o| o.number != 9));
    assert_eq!(
        epic_started(&w.feed(Input::Event(labeled(9, "supervisor", "alice")))),
        [(WorkKey::Issue(9), None)]
    );
}

#[test]
fn an_epic_is_planned_by_the_watcher_itself_in_actions_mode() {
    let (_d, mut w) = in_actions_mode(false);
    w.poll();
    let actions = w.feed(Input::Event(labeled(9, "supervisor:epic", "alice")));
    assert_eq!(epic_started(&actions), [(WorkKey::Epic(9), None)]);
    assert!(
        !actions.iter().any(|a| matches!(a, Action::Dispatch { .. })),
        "{actions:?}"
    );
}

/// With `epic.column`, a card arriving there has its issue planned and worked as an epic (not
/// run); a card already there at the previous poll asks for nothing again, and the trigger
/// columns still start runs.
#[test]
fn a_card_arriving_in_the_epic_column_works_its_issue_as_an_epic() {
    let (dir, project) = project(|s| s.epic.column = Some("Epics".into()));
    let mut w = begun(project, config(3), WatchState::default());
    w.card(5, "Backlog");
    w.card(6, "Research");
    let first = w.poll();
    assert_eq!(
        epic_started(&first),
        [(WorkKey::Issue(6), Some("Research".into()))]
    );
    w.card(5, "Epics");
    let moved = w.poll();
    assert_eq!(
        epic_started(&moved),
        [(WorkKey::Epic(5), None)],
        "{moved:?}"
    );
    assert!(w.poll().iter().all(|a| !matches!(a, Action::Start { .. })));
    drop(dir);
}
