//! What a poll (or a webhook's card) means, decided without I/O: which cards just arrived in a
//! trigger column, which queued ones are still due, and what to do with a live run whose card a
//! human moved.

use std::collections::BTreeMap;

use crate::config::{Settings, Workflow};
use crate::github::Card;

/// The board as last seen: issue → where its card was (`None`: no column), in the terms of
/// [`Sighting::place`].
pub type Columns = BTreeMap<u64, Option<String>>;

/// A card as read, with where it is in the workflow's terms, resolved once when it is read: the
/// stage its board column stands for (through the settings' `columns`), else the column's own
/// name (a column that holds no stage). The card keeps GitHub's name for its column.
#[derive(Debug, Clone)]
pub struct Sighting {
    pub(crate) card: Card,
    /// `None`: the card has no column.
    pub(crate) place: Option<String>,
}

impl Sighting {
    pub fn new(card: Card, settings: &Settings, workflow: &Workflow) -> Sighting {
        let place = card.column.as_ref().map(|option| {
            settings
                .stage_at(workflow, option)
                .map_or_else(|| option.to_string(), |stage| stage.to_string())
        });
        Sighting { card, place }
    }

    pub(crate) fn issue(&self) -> u64 {
        self.card.issue
    }
}

/// Whether `card` asks for a run: it is open, in a trigger column, and was not in that column
/// when the board was last seen (`previous` is `None` before the first poll ever: every card in
/// a trigger column is then new).
pub fn arrived(seen: &Sighting, previous: Option<&Columns>, triggers: &[String]) -> bool {
    let Some(place) = &seen.place else {
        return false;
    };
    if !seen.card.open || !triggers.iter().any(|t| t == place) {
        return false;
    }
    match previous {
        None => true,
        Some(before) => before.get(&seen.issue()) != Some(&seen.place),
    }
}

/// Whether a start queued by its card's arrival in `column` is still due, with the card as now
/// read (`None`: not on the board): a card moved out of that column (or closed) before its run
/// started was taken back by whoever moved it.
pub fn still_due(column: &str, seen: Option<&Sighting>) -> bool {
    seen.is_some_and(|s| s.card.open && s.place.as_deref() == Some(column))
}

/// What to do with a live run, given where its card is now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The card is where the run put it.
    Fine,
    /// Stop the run at its next safe point; the next trigger continues it.
    Stop(String),
    /// Stop the run and start it again from the card's new column.
    Restart { column: String, reason: String },
}

/// Compare a live run (its card last moved by it to `run_column`) with the card as GitHub has it
/// now (`None`: no longer on the board).
pub fn reconcile(
    run_column: &str,
    seen: Option<&Sighting>,
    workflow: &Workflow,
    moved_by: Option<&str>,
) -> Verdict {
    let by = moved_by.map(|l| format!(" by @{l}")).unwrap_or_default();
    let Some(seen) = seen else {
        return Verdict::Stop(format!("the card was taken off the board{by}"));
    };
    if !seen.card.open {
        return Verdict::Stop(format!("issue #{} was closed{by}", seen.issue()));
    }
    let Some(column) = &seen.place else {
        return Verdict::Stop(format!("the card's column was cleared{by}"));
    };
    if column == run_column {
        return Verdict::Fine;
    }
    let stage = workflow.stages.iter().find(|s| &s.status == column);
    match stage {
        Some(s) if s.agent.is_some() && s.built_in.is_none() => Verdict::Restart {
            column: column.clone(),
            reason: format!(
                "the card was moved from {run_column} to {column}{by}: the run continues from {column}"
            ),
        },
        _ => Verdict::Stop(format!(
            "the card was moved from {run_column} to {column}{by}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn card(issue: u64, column: Option<&str>, open: bool) -> Sighting {
        let card = Card {
            item_id: format!("PVTI_{issue}"),
            issue,
            issue_node_id: format!("I_{issue}"),
            column: column.map(crate::ids::BoardOption::new),
            open,
            labels: Vec::new(),
        };
        let repo = crate::config::RepoSlug::parse("o/r").unwrap();
        let mut settings = Settings::minimal(repo, 1, vec!["o".into()]);
        settings.columns = [("TestDesign".into(), "Tests first".into())].into();
        Sighting::new(card, &settings, &Workflow::builtin(&BTreeMap::new()))
    }

    #[test]
    fn a_card_is_placed_by_the_stage_its_column_stands_for() {
        // Mapped: the board's "Tests first" holds TestDesign; the card keeps GitHub's name.
        let seen = card(1, Some("Tests first"), true);
        assert_eq!(seen.place.as_deref(), Some("TestDesign"));
        assert_eq!(seen.card.column.as_ref().unwrap().as_str(), "Tests first");
        // A column that holds no stage is named as it is.
        assert_eq!(
            card(1, Some("Triage"), true).place.as_deref(),
            Some("Triage")
        );
        assert_eq!(card(1, None, true).place, None);
    }

    fn triggers() -> Vec<String> {
        vec!["Research".to_string()]
    }

    #[test]
    fn only_cards_that_just_arrived_in_a_trigger_column_ask_for_a_run() {
        let seen: Columns = [
            (1, Some("Backlog".to_string())),
            (2, Some("Research".to_string())),
        ]
        .into();
        let t = triggers();
        // Dragged from Backlog to Research since the last poll.
        assert!(arrived(&card(1, Some("Research"), true), Some(&seen), &t));
        // Already there last time: a stopped run there is not started again by every poll.
        assert!(!arrived(&card(2, Some("Research"), true), Some(&seen), &t));
        // New on the board, straight into Research.
        assert!(arrived(&card(3, Some("Research"), true), Some(&seen), &t));
        // Not a trigger column, no column, closed.
        assert!(!arrived(&card(4, Some("Backlog"), true), Some(&seen), &t));
        assert!(!arrived(&card(5, None, true), Some(&seen), &t));
        assert!(!arrived(&card(6, Some("Research"), false), Some(&seen), &t));
        // The first poll ever: whatever waits in a trigger column is new.
        assert!(arrived(&card(2, Some("Research"), true), None, &t));
    }

    #[test]
    fn a_queued_start_is_due_only_while_its_card_waits_where_it_arrived() {
        assert!(still_due(
            "Research",
            Some(&card(1, Some("Research"), true))
        ));
        // Moved back to Backlog or on to another column, cleared, closed, taken off the board.
        assert!(!still_due(
            "Research",
            Some(&card(1, Some("Backlog"), true))
        ));
        assert!(!still_due(
            "Research",
            Some(&card(1, Some("Architecture"), true))
        ));
        assert!(!still_due("Research", Some(&card(1, None, true))));
        assert!(!still_due(
            "Research",
            Some(&card(1, Some("Research"), false))
        ));
        assert!(!still_due("Research", None));
    }

    #[test]
    fn a_human_move_stops_or_restarts_the_run() {
        let wf = Workflow::builtin(&BTreeMap::new());
        let at = |c: Option<&str>| card(1, c, true);
        assert_eq!(
            reconcile(
                "Implementation",
                Some(&at(Some("Implementation"))),
                &wf,
                None
            ),
            Verdict::Fine
        );
        match reconcile(
            "Implementation",
            Some(&at(Some("Backlog"))),
            &wf,
            Some("alice"),
        ) {
            Verdict::Stop(why) => {
                assert!(
                    why.contains("from Implementation to Backlog by @alice"),
                    "{why}"
                )
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            reconcile("Implementation", Some(&at(Some("Done"))), &wf, None),
            Verdict::Stop(_)
        ));
        assert_eq!(
            reconcile("Implementation", Some(&at(Some("Architecture"))), &wf, None),
            Verdict::Restart {
                column: "Architecture".into(),
                reason: "the card was moved from Implementation to Architecture: the run continues from Architecture".into()
            }
        );
        assert!(matches!(
            reconcile("Research", Some(&card(1, Some("Research"), false)), &wf, None),
            Verdict::Stop(why) if why.contains("closed")
        ));
        assert!(matches!(
            reconcile("Research", None, &wf, None),
            Verdict::Stop(why) if why.contains("off the board")
        ));
        assert!(matches!(
            reconcile("Research", Some(&at(None)), &wf, None),
            Verdict::Stop(why) if why.contains("cleared")
        ));
    }
}
