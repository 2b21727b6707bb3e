//! The `X-GitHub-Delivery` ids seen lately, in bounded memory: GitHub's redeliveries keep the id,
//! so a redelivered event is recognised and not queued twice.

use std::collections::{HashSet, VecDeque};

/// The most recent ids, oldest forgotten first.
#[derive(Debug)]
pub(crate) struct RecentDeliveries {
    capacity: usize,
    order: VecDeque<String>,
    seen: HashSet<String>,
}

impl RecentDeliveries {
    pub(crate) fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        RecentDeliveries {
            capacity,
            order: VecDeque::with_capacity(capacity.min(4096)),
            seen: HashSet::with_capacity(capacity.min(4096)),
        }
    }

    /// Remember `id`; false when it was already remembered.
    pub(crate) fn insert(&mut self, id: &str) -> bool {
        if self.seen.contains(id) {
            return false;
        }
        if self.order.len() == self.capacity {
            if let Some(oldest) = self.order.pop_front() {
                self.seen.remove(&oldest);
            }
        }
        self.order.push_back(id.to_string());
        self.seen.insert(id.to_string());
        true
    }

    /// Forget `id`, so that a redelivery is taken (its first delivery could not be).
    pub(crate) fn forget(&mut self, id: &str) {
        if self.seen.remove(id) {
            self.order.retain(|kept| kept != id);
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.order.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_id_is_recognised_until_it_ages_out() {
        let mut recent = RecentDeliveries::new(3);
        assert!(recent.insert("a"));
        assert!(!recent.insert("a"));
        assert!(recent.insert("b"));
        assert!(recent.insert("c"));
        assert!(!recent.insert("a"), "still among the 3 most recent");
        assert!(recent.insert("d"));
        assert_eq!(recent.len(), 3, "bounded");
        assert!(recent.insert("a"), "the oldest was forgotten");
        assert!(!recent.insert("d"));
    }

    #[test]
    fn a_forgotten_id_is_taken_again() {
        let mut recent = RecentDeliveries::new(2);
        assert!(recent.insert("a"));
        assert!(recent.insert("b"));
        recent.forget("a");
        assert_eq!(recent.len(), 1);
        assert!(recent.insert("c"));
        assert!(!recent.insert("b"), "b was not evicted to make room");
        assert!(recent.insert("a"));
        recent.forget("never seen");
        assert_eq!(recent.len(), 2);
    }
}
