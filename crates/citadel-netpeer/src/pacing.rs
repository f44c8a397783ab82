//! Pacing of full bunches: which of a receiver's pairs that need a full
//! bunch this tick get one, when more need one than
//! `AuthorityConfig::bootstrap_per_tick` allows.
//!
//! A full bunch is needed by a pair with no acked base (bootstrap, relevance
//! entry, any re-baseline) and by one the pending cap or the ack timeout
//! re-baselines. The tick first sends every delta, collecting these pairs as
//! [`Waiting`]; when more wait than the budget `n`, [`take_first`] picks and
//! orders the first `n` (the receiver's own objects, then nearest to its
//! viewer, then lowest object id) and the tick sends those. The others send nothing and stay as they are: a pair with no
//! base never gets a delta, and its full bunch, when it goes, is built from
//! the object's state at that tick, so changes made while it waited are in
//! it. A pair that leaves relevance while waiting is dropped with the rest of
//! the pair, which cancels its full.
//!
//! What it is not: the budget itself (a per-receiver count kept by the
//! authority, reset every tick, spent by every full bunch sent, corrections
//! included) or the send path (`server::send_pair`). Call order: the tick
//! pushes [`Waiting`] entries, calls [`take_first`] with the budget left,
//! sends that prefix and counts the rest as deferred.

use std::cmp::Ordering;

use crate::server::Cause;

/// A pair that needs a full bunch this tick.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Waiting {
    /// The object (pairs are keyed by it within one receiver).
    pub object_id: u32,
    /// Why it is sent (timeout re-baselines keep their cause).
    pub cause: Cause,
    /// The receiver owns the object.
    pub owned: bool,
    /// Squared distance to the receiver's viewer (0 without one).
    pub dist2: f32,
}

fn priority(a: &Waiting, b: &Waiting) -> Ordering {
    b.owned
        .cmp(&a.owned)
        .then(a.dist2.total_cmp(&b.dist2))
        .then(a.object_id.cmp(&b.object_id))
}

/// Moves the `n` most relevant entries to the front, in priority order, and
/// returns how many that is (`min(n, len)`). When all fit, nothing is
/// reordered (they all go this tick). Linear in `waiting.len()` plus
/// `n log n`.
pub(crate) fn take_first(waiting: &mut [Waiting], n: usize) -> usize {
    if n >= waiting.len() {
        return waiting.len();
    }
    if n == 0 {
        return 0;
    }
    waiting.select_nth_unstable_by(n - 1, priority);
    if let Some(head) = waiting.get_mut(..n) {
        head.sort_unstable_by(priority);
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(object_id: u32, owned: bool, dist2: f32) -> Waiting {
        Waiting {
            object_id,
            cause: Cause::Normal,
            owned,
            dist2,
        }
    }

    #[test]
    fn own_objects_then_nearest_then_lowest_id() {
        let mut list = vec![
            w(9, false, 4.0),
            w(3, false, 1.0),
            w(5, true, 100.0),
            w(2, false, 1.0),
            w(7, false, 0.5),
            w(1, false, 50.0),
        ];
        assert_eq!(take_first(&mut list, 4), 4);
        let head: Vec<u32> = list[..4].iter().map(|e| e.object_id).collect();
        assert_eq!(head, vec![5, 7, 2, 3]);
        let mut rest: Vec<u32> = list[4..].iter().map(|e| e.object_id).collect();
        rest.sort_unstable();
        assert_eq!(rest, vec![1, 9]);
    }

    #[test]
    fn budget_larger_than_the_list_takes_all_in_place() {
        let mut list = vec![w(4, false, 0.0), w(2, false, 0.0)];
        assert_eq!(take_first(&mut list, 10), 2);
        assert_eq!(list[0].object_id, 4);
        assert_eq!(take_first(&mut list, 1), 1);
        assert_eq!(list[0].object_id, 2);
        assert_eq!(take_first(&mut list, 0), 0);
        assert_eq!(take_first(&mut [], 3), 0);
    }
}
