//! A place's members, kept so that a join or a leave does not copy the whole
//! list: the writer side ([`MemberSet`], owned under the realm lock) stores
//! members in fixed-size chunks shared by reference, and publishes an
//! immutable [`MemberList`] that fan-out reads without any lock.
//!
//! A change copies one chunk (at most [`CHUNK`] members) and the list of
//! chunk pointers (members / [`CHUNK`]), so the default dimension with
//! 20,000 room-less participants costs a few hundred pointer copies per
//! connect instead of 20,000 member clones. Not here: who may join (the
//! realm) or what is sent (the gateway). Call order: `insert` / `remove`
//! as membership changes, then `snapshot` to publish.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use super::Member;

/// Members per chunk.
pub const CHUNK: usize = 256;

/// An immutable snapshot of a place's members (cheap to clone).
#[derive(Debug, Clone, Default)]
pub struct MemberList {
    chunks: Arc<[Arc<[Member]>]>,
    len: usize,
}

impl MemberList {
    /// Every member, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &Member> {
        self.chunks.iter().flat_map(|chunk| chunk.iter())
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// The mutable side of a place's membership.
#[derive(Debug, Default)]
pub struct MemberSet {
    chunks: Vec<Arc<[Member]>>,
    /// Participant → index of the chunk holding it.
    chunk_of: HashMap<u64, usize>,
    /// Chunks with room for another member, lowest first (keeps the list
    /// dense: an emptied chunk is refilled before a new one is added).
    open: BTreeSet<usize>,
}

impl MemberSet {
    /// Adds `member`; `false` (no change) if it is already in.
    pub fn insert(&mut self, member: Member) -> bool {
        if self.chunk_of.contains_key(&member.participant_id) {
            return false;
        }
        let index = match self.open.first() {
            Some(&index) => index,
            None => {
                self.chunks.push(Arc::from(Vec::new()));
                self.chunks.len() - 1
            }
        };
        let Some(chunk) = self.chunks.get_mut(index) else {
            return false; // `open` only names existing chunks
        };
        self.chunk_of.insert(member.participant_id, index);
        let mut grown = Vec::with_capacity(chunk.len() + 1);
        grown.extend(chunk.iter().cloned());
        grown.push(member);
        if grown.len() >= CHUNK {
            self.open.remove(&index);
        } else {
            self.open.insert(index);
        }
        *chunk = Arc::from(grown);
        true
    }

    /// Removes `participant_id`; `false` if it was not in.
    pub fn remove(&mut self, participant_id: u64) -> bool {
        let Some(index) = self.chunk_of.remove(&participant_id) else {
            return false;
        };
        let Some(chunk) = self.chunks.get_mut(index) else {
            return false;
        };
        let kept: Vec<Member> = chunk
            .iter()
            .filter(|m| m.participant_id != participant_id)
            .cloned()
            .collect();
        *chunk = Arc::from(kept);
        self.open.insert(index);
        // Trailing empty chunks go, so a place that shrank stays small.
        while self.chunks.last().is_some_and(|c| c.is_empty()) {
            self.chunks.pop();
            self.open.remove(&self.chunks.len());
        }
        true
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.chunk_of.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.chunk_of.is_empty()
    }

    /// The current members as an immutable list for readers.
    pub fn snapshot(&self) -> MemberList {
        MemberList {
            chunks: Arc::from(
                self.chunks
                    .iter()
                    .filter(|c| !c.is_empty())
                    .cloned()
                    .collect::<Vec<_>>(),
            ),
            len: self.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::outbound::{LaneLimits, Outbound};
    use crate::metrics::Metrics;
    use std::collections::BTreeSet;

    fn member(participant_id: u64) -> Member {
        let limits = LaneLimits {
            reliable_capacity: 4,
            unreliable_capacity: 4,
            max_bytes: 1024,
        };
        Member {
            participant_id,
            outbound: Outbound::new(limits, Arc::new(Metrics::default())),
        }
    }

    fn ids(list: &MemberList) -> BTreeSet<u64> {
        list.iter().map(|m| m.participant_id).collect()
    }

    #[test]
    fn snapshots_follow_inserts_and_removes_and_never_change_afterwards() {
        let mut set = MemberSet::default();
        let mut model = BTreeSet::new();
        let mut old = Vec::new();
        // Deterministic churn across several chunks.
        let mut x = 7u64;
        for step in 0..5_000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let id = (x >> 33) % 1_500;
            if x.is_multiple_of(3) {
                assert_eq!(set.remove(id), model.remove(&id));
            } else {
                assert_eq!(set.insert(member(id)), model.insert(id));
            }
            assert_eq!(set.len(), model.len());
            if step % 500 == 0 {
                old.push((set.snapshot(), model.clone()));
            }
        }
        let now = set.snapshot();
        assert_eq!(ids(&now), model);
        assert_eq!(now.len(), model.len());
        assert_eq!(now.iter().count(), model.len(), "no duplicates");
        for (snapshot, at_the_time) in old {
            assert_eq!(ids(&snapshot), at_the_time, "published lists are immutable");
            assert_eq!(snapshot.len(), at_the_time.len());
        }
    }

    #[test]
    fn chunks_stay_bounded_and_emptied_ones_are_reused_or_dropped() {
        let mut set = MemberSet::default();
        for id in 0..(3 * CHUNK as u64) {
            assert!(set.insert(member(id)));
        }
        assert!(!set.insert(member(5)), "already in");
        assert_eq!(set.chunks.len(), 3);
        assert!(set.chunks.iter().all(|c| c.len() == CHUNK));
        // Empty the first chunk: new members refill it before a 4th is made.
        for id in 0..CHUNK as u64 {
            assert!(set.remove(id));
        }
        assert!(!set.remove(0), "already gone");
        for id in 10_000..10_000 + CHUNK as u64 {
            set.insert(member(id));
        }
        assert_eq!(set.chunks.len(), 3);
        // Emptying everything leaves no chunks behind.
        let all: Vec<u64> = set.snapshot().iter().map(|m| m.participant_id).collect();
        for id in all {
            assert!(set.remove(id));
        }
        assert!(set.is_empty());
        assert!(set.chunks.is_empty());
        assert!(set.snapshot().is_empty());
    }
}
