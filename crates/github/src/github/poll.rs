//! Reading a whole board, for the board-driven modes: every card's column and the issue on it, a
//! page of 100 cards per GraphQL request, with the cost GitHub charged; and one card by its node id,
//! as a webhook names it.

use serde::Serialize;

use crate::ids::BoardOption;

use super::graphql::{BoardCard, BoardItems, board_card, board_items};
use super::types::BoardRef;
use super::{GitHub, GitHubError};

/// A card holding an issue of the repository.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Card {
    /// The card (`PVTI_…`).
    pub item_id: String,
    pub issue: u64,
    /// The issue (`I_…`).
    pub issue_node_id: String,
    /// `None`: the status field has no value.
    pub column: Option<BoardOption>,
    pub open: bool,
    pub labels: Vec<String>,
}

impl Card {
    /// GitHub's name for the card's column.
    pub fn column_name(&self) -> Option<&str> {
        self.column.as_ref().map(BoardOption::as_str)
    }
}

/// What GitHub charged for a query.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RateLimit {
    /// Points this poll cost, summed over its pages.
    pub cost: u64,
    /// Points left in the hour after the last page.
    pub remaining: Option<u64>,
    pub reset_at: Option<String>,
}

/// One full read of the board.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct BoardPoll {
    /// The board's node (`PVT_…`).
    pub project_id: String,
    pub cards: Vec<Card>,
    /// Cards left out: drafts, pull requests, other repositories' issues, archived cards.
    pub skipped: usize,
    pub pages: u32,
    pub rate: RateLimit,
    /// The login the token acts as.
    pub viewer: Option<String>,
}

/// A card found by its node id, and the board it is on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundCard {
    pub project_id: String,
    pub project_number: u64,
    /// `None`: the card holds no issue of the repository (a draft, a pull request, another
    /// repository's issue).
    pub card: Option<Card>,
}

/// Most pages one poll reads (100 cards each): GitHub's boards hold at most 50,000 items.
const MAX_PAGES: u32 = 500;

/// The card fields both operations read, as plain data.
struct Polled {
    id: String,
    archived: bool,
    column: Option<String>,
    issue: Option<(String, u64, bool, String, Vec<String>)>,
}

macro_rules! polled_reader {
    ($m:ident) => {
        impl From<&$m::PolledItem> for Polled {
            fn from(p: &$m::PolledItem) -> Polled {
                use $m::PolledItemContent as C;
                use $m::PolledItemFieldValueByName as V;
                let column = match &p.field_value_by_name {
                    Some(V::ProjectV2ItemFieldSingleSelectValue(s)) => s.name.clone(),
                    _ => None,
                };
                let issue = match &p.content {
                    Some(C::Issue(i)) => Some((
                        i.id.clone(),
                        i.number.max(0) as u64,
                        matches!(i.state, $m::IssueState::OPEN),
                        i.repository.name_with_owner.clone(),
                        i.labels
                            .as_ref()
                            .and_then(|l| l.nodes.as_ref())
                            .map(|n| n.iter().flatten().map(|l| l.name.clone()).collect())
                            .unwrap_or_default(),
                    )),
                    _ => None,
                };
                Polled {
                    id: p.id.clone(),
                    archived: p.is_archived,
                    column,
                    issue,
                }
            }
        }
    };
}

polled_reader!(board_items);
polled_reader!(board_card);

impl Polled {
    /// The card, when it holds an issue of `repo` and is not archived.
    fn card(self, repo: &str) -> Option<Card> {
        let (node, number, open, repository, labels) = self.issue?;
        (!self.archived && repository.eq_ignore_ascii_case(repo)).then_some(Card {
            item_id: self.id,
            issue: number,
            issue_node_id: node,
            column: self.column.map(BoardOption::new),
            open,
            labels,
        })
    }
}

impl GitHub {
    /// Every card of `board` holding an issue of this repository, with its column.
    pub async fn poll_board(&self, board: &BoardRef) -> Result<BoardPoll, GitHubError> {
        let repo = self.repo().to_string();
        let mut poll = BoardPoll::default();
        let mut after: Option<String> = None;
        loop {
            let (data, errors) = self
                .graphql::<BoardItems>(
                    board_items::Variables {
                        login: board.owner.clone(),
                        number: board.number as i64,
                        status_field: board.status_field.clone(),
                        after: after.clone(),
                    },
                    "BoardItems",
                    false,
                )
                .await?;
            let missing = || GitHubError::BoardNotFound {
                owner: board.owner.clone(),
                number: board.number,
            };
            if let Some(e) = self.graphql_error("BoardItems", &errors, |_| Some(missing())) {
                return Err(e);
            }
            let data = data.ok_or_else(missing)?;
            if let Some(rate) = &data.rate_limit {
                poll.rate.cost += rate.cost.max(0) as u64;
                poll.rate.remaining = Some(rate.remaining.max(0) as u64);
                poll.rate.reset_at = Some(rate.reset_at.clone());
            }
            poll.viewer = Some(data.viewer.login.clone());
            use board_items::BoardItemsRepositoryOwner as Owner;
            let project = data
                .repository_owner
                .and_then(|o| match o {
                    Owner::User(u) => u.project_v2,
                    Owner::Organization(o) => o.project_v2,
                })
                .ok_or_else(missing)?;
            if project.field.is_none() {
                return Err(GitHubError::StatusFieldNotFound {
                    project: board.number,
                    field: board.status_field.clone(),
                });
            }
            poll.project_id = project.id.clone();
            poll.pages += 1;
            for node in project.items.nodes.iter().flatten().flatten() {
                match Polled::from(node).card(&repo) {
                    Some(card) => poll.cards.push(card),
                    None => poll.skipped += 1,
                }
            }
            let page = project.items.page_info;
            if !page.has_next_page || page.end_cursor.is_none() || poll.pages >= MAX_PAGES {
                return Ok(poll);
            }
            after = page.end_cursor;
        }
    }

    /// The card `item_id` (`PVTI_…`); `None` when GitHub knows no such card.
    pub async fn board_card(
        &self,
        item_id: &str,
        status_field: &str,
    ) -> Result<Option<FoundCard>, GitHubError> {
        let (data, errors) = self
            .graphql::<BoardCard>(
                board_card::Variables {
                    id: item_id.to_string(),
                    status_field: status_field.to_string(),
                },
                "BoardCard",
                false,
            )
            .await?;
        if let Some(e) = self.graphql_error("BoardCard", &errors, |_| None) {
            // A card deleted since the event names a node GitHub no longer resolves.
            if matches!(&e, GitHubError::GraphQl { kind: Some(k), .. } if k == "NOT_FOUND") {
                return Ok(None);
            }
            return Err(e);
        }
        use board_card::BoardCardNode as Node;
        let Some(Node::ProjectV2Item(item)) = data.and_then(|d| d.node) else {
            return Ok(None);
        };
        let project_id = item.project.id.clone();
        let project_number = item.project.number.max(0) as u64;
        let repo = self.repo().to_string();
        Ok(Some(FoundCard {
            project_id,
            project_number,
            card: Polled::from(&item.polled_item).card(&repo),
        }))
    }
}
