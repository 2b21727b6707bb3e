//! Claims on GitHub, so that two watchers never run the same issue: a claim comment holding the
//! watcher's id and an expiry (edited to refresh it while the run lives), and a label that shows
//! the claim on the board. The claim comment with the lowest id among the live ones wins: a
//! watcher that posted a later one at the same time gives its own up. A claim not refreshed
//! before its expiry is stale and is taken over.
//!
//! Only claim comments by a codeowner or by the account this watcher posts as count: anyone else
//! typing one blocks nothing.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use regex::Regex;

use crate::github::{Comment, GitHub, GitHubError, Marker};

/// A claim this watcher holds: the comment that carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    pub(crate) comment_id: u64,
}

/// What claiming an issue gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claimed {
    Ours(Held),
    /// Someone else holds a live claim.
    Taken {
        holder: String,
        until: DateTime<Utc>,
    },
}

/// A claim comment as read back.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ClaimNote {
    comment_id: u64,
    author: String,
    holder: String,
    expires: DateTime<Utc>,
}

/// Claims of one watcher.
#[derive(Clone)]
pub struct Claims {
    gh: GitHub,
    label: String,
    ttl: Duration,
    /// This watcher's id (kept across restarts, so a restarted watcher knows its claims).
    holder: String,
    is_codeowner: Arc<dyn Fn(&str) -> bool + Send + Sync>,
    /// The login this watcher posts as, once a claim comment told.
    login: Arc<Mutex<Option<String>>>,
}

fn pattern() -> &'static Regex {
    static RE: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"<!-- supervisor:claim holder=([A-Za-z0-9_.:-]+) expires=(\S+) -->")
            .expect("the claim pattern compiles")
    })
}

impl Claims {
    pub fn new(
        gh: GitHub,
        label: String,
        ttl: Duration,
        holder: String,
        is_codeowner: Arc<dyn Fn(&str) -> bool + Send + Sync>,
    ) -> Claims {
        Claims {
            gh,
            label,
            ttl,
            holder,
            is_codeowner,
            login: Arc::default(),
        }
    }

    pub fn holder(&self) -> &str {
        &self.holder
    }

    pub(crate) fn ttl(&self) -> Duration {
        self.ttl
    }

    /// The login this watcher posts as (its claim comments count).
    pub(crate) fn set_login(&self, login: &str) {
        if let Ok(mut l) = self.login.lock() {
            *l = Some(login.to_string());
        }
    }

    fn login(&self) -> Option<String> {
        self.login.lock().ok().and_then(|l| l.clone())
    }

    fn body(&self, expires: DateTime<Utc>, released: bool) -> String {
        let when = expires.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let text = if released {
            format!(
                "🔓 supervisor (watcher `{}`) released this issue.",
                self.holder
            )
        } else {
            format!(
                "🔒 supervisor (watcher `{}`) is running this issue; the claim holds until {when} and is renewed while the run lives.",
                self.holder
            )
        };
        // The standard marker keeps the note out of agents' prompts.
        let marker = Marker::new("claim", "claim", 0, crate::github::MarkerKind::Claim);
        format!(
            "{text}\n\n<!-- supervisor:claim holder={} expires={when} -->\n{}",
            self.holder,
            marker.render()
        )
    }

    /// The claim notes that count, oldest first.
    fn notes(&self, comments: &[Comment]) -> Vec<ClaimNote> {
        let login = self.login();
        comments
            .iter()
            .filter(|c| {
                (self.is_codeowner)(&c.author)
                    || login
                        .as_deref()
                        .is_some_and(|l| l.eq_ignore_ascii_case(&c.author))
            })
            .filter_map(|c| {
                let caps = pattern().captures(&c.body)?;
                let expires = DateTime::parse_from_rfc3339(&caps[2]).ok()?.to_utc();
                Some(ClaimNote {
                    comment_id: c.id,
                    author: c.author.clone(),
                    holder: caps[1].to_string(),
                    expires,
                })
            })
            .collect()
    }

    /// Claim `issue`: keep this watcher's live claim, or post one and keep it when no earlier
    /// live claim beats it.
    pub(crate) async fn claim(&self, issue: u64) -> Result<Claimed, GitHubError> {
        let now = Utc::now();
        let comments = self.gh.list_comments(issue).await?;
        let live: Vec<ClaimNote> = self
            .notes(&comments)
            .into_iter()
            .filter(|n| n.expires > now)
            .collect();
        if let Some(first) = live.first() {
            if first.holder != self.holder {
                return Ok(Claimed::Taken {
                    holder: first.holder.clone(),
                    until: first.expires,
                });
            }
            let held = Held {
                comment_id: first.comment_id,
            };
            self.refresh(held).await?;
            self.gh.add_label(issue, &self.label).await?;
            return Ok(Claimed::Ours(held));
        }
        let stale = self.notes(&comments);
        let taking_over = stale.last().is_some_and(|old| old.holder != self.holder);
        if let Some(old) = stale.last() {
            tracing::debug!(
                issue,
                holder = %old.holder,
                "the earlier claim ended at {}: claiming afresh",
                old.expires
            );
        }
        let posted = self
            .gh
            .create_comment(issue, &self.body(self.expiry(), false))
            .await?;
        if let Ok(mut login) = self.login.lock() {
            login.get_or_insert_with(|| posted.author.clone());
        }
        let held = Held {
            comment_id: posted.id,
        };
        // Whoever posted first among the live claims wins.
        let now = Utc::now();
        let comments = self.gh.list_comments(issue).await?;
        let winner = self
            .notes(&comments)
            .into_iter()
            .find(|n| n.expires > now || n.comment_id == posted.id);
        match winner {
            Some(w) if w.comment_id != posted.id && w.holder != self.holder => {
                self.give_up(held).await?;
                Ok(Claimed::Taken {
                    holder: w.holder,
                    until: w.expires,
                })
            }
            _ => {
                self.gh.add_label(issue, &self.label).await?;
                if taking_over {
                    crate::metrics::metrics().claims_taken_over.inc();
                }
                Ok(Claimed::Ours(held))
            }
        }
    }

    fn expiry(&self) -> DateTime<Utc> {
        Utc::now() + chrono::Duration::from_std(self.ttl).unwrap_or(chrono::Duration::minutes(10))
    }

    /// Push the claim's expiry out by the claim's lifetime.
    pub(crate) async fn refresh(&self, held: Held) -> Result<(), GitHubError> {
        self.gh
            .update_comment(held.comment_id, &self.body(self.expiry(), false))
            .await
            .map(|_| ())
    }

    async fn give_up(&self, held: Held) -> Result<(), GitHubError> {
        self.gh
            .update_comment(held.comment_id, &self.body(Utc::now(), true))
            .await
            .map(|_| ())
    }

    /// Give the claim up: its comment says so and the label goes.
    pub(crate) async fn release(&self, issue: u64, held: Held) -> Result<(), GitHubError> {
        self.give_up(held).await?;
        self.gh.remove_label(issue, &self.label).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn claim_notes_are_read_back_and_forged_ones_do_not_count() {
        let gh = GitHub::new(crate::github::ClientConfig::new(
            "http://127.0.0.1:9",
            None,
            crate::config::RepoSlug::parse("o/r").unwrap(),
        ))
        .unwrap();
        let owner: Arc<dyn Fn(&str) -> bool + Send + Sync> = Arc::new(|l: &str| l == "alice");
        let claims = Claims::new(
            gh,
            "supervisor:running".into(),
            Duration::from_secs(600),
            "w-1".into(),
            owner,
        );
        let body = claims.body(Utc::now() + chrono::Duration::minutes(5), false);
        let comment = |id, author: &str| Comment {
            id,
            author: author.into(),
            body: body.clone(),
            created_at: Utc::now(),
            html_url: String::new(),
        };
        let notes = claims.notes(&[comment(1, "mallory"), comment(2, "alice")]);
        assert_eq!(notes.len(), 1, "mallory's copy does not count");
        assert_eq!(notes[0].holder, "w-1");
        assert_eq!(notes[0].author, "alice");
        assert!(notes[0].expires > Utc::now());
        // The note carries a standard marker, so it never reaches a prompt as a human's text.
        assert_eq!(
            Marker::parse_all(&body)[0].kind,
            crate::github::MarkerKind::Claim
        );
    }
}
