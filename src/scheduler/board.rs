//! What a poll (or a webhook's card) means, decided without I/O: which cards just arrived in a
//! trigger column, which queued ones are still due, and what to do with a live run whose card a
//! human moved.

use std::collections::BTreeMap;

use crate::config::Workflow;
use crate::github::Card;

/// The board as last seen: issue → column (`None`: no column).
pub type Columns = BTreeMap<u64, Option<String>>;

/// Whether `card` asks for a run: it is open, in a trigger column, and was not in that column
/// when the board was last seen (`previous` is `None` before the first poll ever: every card in
/// a trigger column is then new).
pub fn arrived(card: &Card, previous: Option<&Columns>, triggers: &[String]) -> bool {
    let Some(column) = &card.column else {
        return false;
    };
    if !card.open || !triggers.iter().any(|t| t == column) {
        return false;
    }
    match previous {
        None => true,
        Some(seen) => seen.get(&card.issue) != Some(&card.column),
    }
}

/// Whether a start queued by its card's arrival in `column` is still due, with the card as now
/// read (`None`: not on the board): a card moved out of that column (or closed) before its run
/// started was taken back by whoever moved it.
pub fn still_due(column: &str, card: Option<&Card>) -> bool {
    card.is_some_and(|c| c.open && c.column.as_deref() == Some(column))
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
    card: Option<&Card>,
    workflow: &Workflow,
    moved_by: Option<&str>,
) -> Verdict {
    let by = moved_by.map(|l| format!(" by @{l}")).unwrap_or_default();
    let Some(card) = card else {
        return Verdict::Stop(format!("the card was taken off the board{by}"));
    };
    if !card.open {
        return Verdict::Stop(format!("issue #{} was closed{by}", card.issue));
    }
    let Some(column) = &card.column else {
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

    fn card(issue: u64, column: Option<&str>, open: bool) -> Card {
        Card {
            item_id: format!("PVTI_{issue}"),
            issue,
            issue_node_id: format!("I_{issue}"),
            column: column.map(str::to_string),
            open,
            labels: Vec::new(),
        }
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
