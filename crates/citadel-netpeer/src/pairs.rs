//! The baseline pairs of one receiver: per relevant object, what it acked,
//! what is in flight to it, and what it was last sent.
//!
//! What it is: a dense store split in two arrays by access pattern. Every
//! tick visits every pair of every receiver, but most visits decide that
//! nothing goes from three facts (the revision last sent, whether anything
//! is in flight and since when, whether a base is acked). Those live in
//! [`Hot`], 24 bytes per pair, so the scan streams about 24 kB per
//! receiver of 1 000 objects instead of about 110 kB (at 200 receivers the
//! old layout was about 22 MB a tick, far beyond the L2 cache, and the scan
//! spent most of its time on that first load per pair). The acked
//! snapshot, the sends in flight and the layout version live in a parallel
//! array read only when something is sent or acked.
//!
//! What it is not: it decides nothing. The authority (`server`) chooses
//! what to send and when; this module only keeps the hot summary true to
//! the cold state: every change of the in-flight list or the acked base
//! goes through [`PairMut`], which updates both.
//!
//! Order: pairs are kept in ascending object id. Clients acknowledge in
//! ascending object id too (the SDK session and the bench's ack-only
//! clients do), so an ack's entries are found by walking the hot array
//! forward ([`Pairs::find_from`]) instead of probing a hash index and
//! missing the cache once per entry; [`Pairs::ack_all`] finds them all and
//! touches their cold state before it applies any, so the cold-state
//! misses overlap. Relevance changes arrive as one batch per receiver
//! and tick ([`Pairs::apply`], one merge pass); a despawn only marks the
//! pair dead (it is skipped, and dropped by the receiver's next relevance
//! pass), so it costs O(1) per receiver, not a shift of every later pair.

use std::sync::Arc;

use citadel_wire::ack::AckWindow;
use smallvec::SmallVec;

use crate::encode::Snapshot;
use crate::server::IdMap;

/// `oldest_sent_ms` when nothing is in flight.
const NOTHING_IN_FLIGHT: u64 = u64::MAX;

/// One bunch sent on a pair and not acked yet.
pub(crate) struct Sent {
    pub token: u64,
    pub snap: Arc<Snapshot>,
    pub sent_ms: u64,
}

/// Sends in flight, held inline: with acks on time a pair has up to about
/// (round trip + ack interval) / tick interval outstanding, three or four
/// at 20 Hz with 100 ms of queueing; a lagging receiver spills to the heap
/// up to the pending cap, and moves back inline once its acks catch up
/// (`ack`), so one burst does not leave every later ack and send of the
/// pair a pointer chase into the heap.
type InFlight = SmallVec<[Sent; INLINE_IN_FLIGHT]>;

/// Sends in flight a pair holds without a heap allocation.
const INLINE_IN_FLIGHT: usize = 4;

/// What the per-tick scan reads of a pair.
#[derive(Clone, Copy)]
pub(crate) struct Hot {
    object_id: u32,
    /// Whether a base is acked (mirrors `Cold::acked`).
    acked: bool,
    /// Removed; skipped until the next [`Pairs::apply`] drops it.
    dead: bool,
    /// The object revision last sent (or found unchanged) on this pair.
    last_sent_rev: u64,
    /// When the oldest send in flight went (mirrors `Cold::in_flight`).
    oldest_sent_ms: u64,
}

impl Hot {
    /// Whether the oldest send in flight went at or before `cutoff_ms`.
    pub(crate) fn sent_at_or_before(&self, cutoff_ms: u64) -> bool {
        self.oldest_sent_ms != NOTHING_IN_FLIGHT && self.oldest_sent_ms <= cutoff_ms
    }

    /// A pair whose first full is in flight (no acked base yet).
    pub(crate) fn awaiting_first_ack(&self) -> bool {
        !self.acked && self.oldest_sent_ms != NOTHING_IN_FLIGHT
    }

    /// Whether the pair was removed.
    pub(crate) fn is_dead(&self) -> bool {
        self.dead
    }

    pub(crate) fn object_id(&self) -> u32 {
        self.object_id
    }

    /// The object revision last sent (or found unchanged) on this pair.
    pub(crate) fn last_sent_rev(&self) -> u64 {
        self.last_sent_rev
    }

    fn new(object_id: u32) -> Self {
        Hot {
            object_id,
            acked: false,
            dead: false,
            last_sent_rev: 0,
            oldest_sent_ms: NOTHING_IN_FLIGHT,
        }
    }
}

/// The rest of a pair, read when it is sent or acked.
struct Cold {
    acked: Option<(u64, Arc<Snapshot>)>,
    in_flight: InFlight,
    /// The newest token sent on this pair (kept across re-baselines).
    last_token: u64,
    /// Index into the class's versions.
    version: usize,
}

/// One pair, borrowed for a change: the only way to change what a pair
/// acked or has in flight, so [`Hot`] always agrees with it.
pub(crate) struct PairMut<'a> {
    hot: &'a mut Hot,
    cold: &'a mut Cold,
}

impl Cold {
    fn new(version: usize) -> Self {
        Cold {
            acked: None,
            in_flight: InFlight::new(),
            last_token: 0,
            version,
        }
    }
}

impl PairMut<'_> {
    /// The scan's view of this pair.
    pub(crate) fn hot(&self) -> &Hot {
        self.hot
    }

    /// The acked base: its token and snapshot.
    pub(crate) fn acked(&self) -> Option<&(u64, Arc<Snapshot>)> {
        self.cold.acked.as_ref()
    }

    pub(crate) fn in_flight(&self) -> usize {
        self.cold.in_flight.len()
    }

    pub(crate) fn last_token(&self) -> u64 {
        self.cold.last_token
    }

    pub(crate) fn version(&self) -> usize {
        self.cold.version
    }

    /// Sets the layout version; a different one drops the baseline.
    pub(crate) fn rebind_version(&mut self, version: usize) {
        if self.cold.version != version {
            self.cold.version = version;
            self.reset();
        }
    }

    /// Records a send of `token` carrying `snap` (the pair's revision
    /// last sent becomes `snap.rev`).
    pub(crate) fn record_send(&mut self, token: u64, snap: Arc<Snapshot>, now_ms: u64) {
        // The last millisecond is the "nothing in flight" mark; a send at
        // that time counts as one millisecond earlier.
        let now_ms = now_ms.min(NOTHING_IN_FLIGHT - 1);
        if self.cold.in_flight.is_empty() {
            self.hot.oldest_sent_ms = now_ms;
        }
        self.hot.last_sent_rev = snap.rev;
        self.cold.in_flight.push(Sent {
            token,
            snap,
            sent_ms: now_ms,
        });
        self.cold.last_token = token;
    }

    /// Applies an ack window: the newest send in flight it covers becomes
    /// the acked base and every older one is dropped. Returns whether the
    /// base advanced (an ack for nothing in flight changes nothing).
    pub(crate) fn ack(&mut self, window: &AckWindow) -> bool {
        // Sends in flight are ascending and all newer than the acked base.
        let Some(i) = self
            .cold
            .in_flight
            .iter()
            .rposition(|s| window.contains(s.token))
        else {
            return false;
        };
        if let Some(s) = self.cold.in_flight.drain(..=i).next_back() {
            self.cold.acked = Some((s.token, s.snap));
            self.hot.acked = true;
        }
        if self.cold.in_flight.spilled() && self.cold.in_flight.len() <= INLINE_IN_FLIGHT {
            self.cold.in_flight.shrink_to_fit();
        }
        self.hot.oldest_sent_ms = self
            .cold
            .in_flight
            .first()
            .map_or(NOTHING_IN_FLIGHT, |s| s.sent_ms);
        true
    }

    /// Forgets the sends in flight (the receiver holds the acked state).
    pub(crate) fn clear_in_flight(&mut self) {
        self.cold.in_flight = InFlight::new();
        self.hot.oldest_sent_ms = NOTHING_IN_FLIGHT;
    }

    /// Nothing visible differs from the acked base: it now stands for
    /// `snap` too, and `snap.rev` counts as sent.
    pub(crate) fn mark_unchanged(&mut self, snap: &Arc<Snapshot>) {
        if let Some((_, s)) = self.cold.acked.as_mut() {
            *s = snap.clone();
        }
        self.hot.last_sent_rev = snap.rev;
    }

    /// Drops the baseline: the next send is a full bunch.
    pub(crate) fn reset(&mut self) {
        self.cold.acked = None;
        self.hot.acked = false;
        self.clear_in_flight();
        self.hot.last_sent_rev = 0;
    }
}

/// The pairs of one receiver, keyed by object id, in ascending id.
#[derive(Default)]
pub(crate) struct Pairs {
    /// Live pairs only (a dead one is out of the index at once).
    index: IdMap<u32>,
    hot: Vec<Hot>,
    cold: Vec<Cold>,
    dead: usize,
}

/// How far [`Pairs::find_from`] walks forward before it asks the index.
const FORWARD_PROBES: usize = 8;

impl Pairs {
    /// Positions, dead pairs included (`hot_at`, `at_mut` and the scan use
    /// positions `0..len`).
    pub(crate) fn len(&self) -> usize {
        self.hot.len()
    }

    pub(crate) fn contains(&self, object_id: u32) -> bool {
        self.index.contains_key(&object_id)
    }

    /// The live object ids, ascending.
    pub(crate) fn ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.hot.iter().filter(|h| !h.dead).map(|h| h.object_id)
    }

    /// The scan's view of one live pair.
    pub(crate) fn hot(&self, object_id: u32) -> Option<&Hot> {
        self.hot.get(*self.index.get(&object_id)? as usize)
    }

    /// The scan's view by position (dead pairs included: check
    /// [`Hot::is_dead`]).
    pub(crate) fn hot_at(&self, pos: usize) -> Option<&Hot> {
        self.hot.get(pos)
    }

    /// The position of a live pair, looking first at the few positions
    /// from `hint` on (where the next of an ascending run of lookups is),
    /// then in the index.
    pub(crate) fn find_from(&self, object_id: u32, hint: usize) -> Option<usize> {
        let ahead = self.hot.get(hint..).unwrap_or(&[]);
        for (i, h) in ahead.iter().take(FORWARD_PROBES).enumerate() {
            if h.object_id == object_id {
                return (!h.dead).then_some(hint + i);
            }
            if h.object_id > object_id {
                break;
            }
        }
        self.index.get(&object_id).map(|&p| p as usize)
    }

    /// Applies one ack message: each entry is an object id and its window
    /// (`None`: malformed on the wire). Returns (entries that advanced
    /// their pair, entries ignored). `found` is scratch (its capacity is
    /// kept by the caller).
    ///
    /// Three passes: first every entry's pair is found (in the hot array,
    /// walked forward from the previous find: clients list objects in
    /// ascending id); then the found pairs' cold state is touched
    /// ([`Pairs::touch_cold`]: most of an ack's cost is that state's cache
    /// misses, as it was last touched a tick ago); then each is applied,
    /// from the cache. On the 200-client
    /// bench this took the ack path from about 10 % to about 8.5 % of the
    /// server's core (`docs/networkpeer.md`).
    pub(crate) fn ack_all(
        &mut self,
        entries: impl Iterator<Item = (u32, Option<AckWindow>)>,
        found: &mut Vec<(u32, AckWindow)>,
    ) -> (usize, usize) {
        found.clear();
        let mut ignored = 0;
        let mut hint = 0;
        for (object_id, window) in entries {
            let pos = self.find_from(object_id, hint);
            if let Some(p) = pos {
                hint = p + 1;
            }
            match (pos, window) {
                // Positions fit u32 (see `apply`).
                (Some(p), Some(w)) => found.push((p as u32, w)),
                _ => ignored += 1,
            }
        }
        self.touch_cold(found.iter().map(|&(pos, _)| pos as usize));
        let mut advanced = 0;
        for (pos, window) in found.iter() {
            if self
                .at_mut(*pos as usize)
                .is_some_and(|mut p| p.ack(window))
            {
                advanced += 1;
            } else {
                ignored += 1;
            }
        }
        (advanced, ignored)
    }

    /// Reads the cold state of the pairs at `positions` that a send or an
    /// ack reads first (the in-flight list and its newest entry, the acked
    /// base, the last token) in a loop whose loads do not depend on each
    /// other, so their cache misses overlap before the sends or acks that
    /// follow take them one by one.
    pub(crate) fn touch_cold(&self, positions: impl Iterator<Item = usize>) {
        let mut touched = 0usize;
        for pos in positions {
            if let Some(c) = self.cold.get(pos) {
                touched = touched
                    .wrapping_add(c.in_flight.last().map_or(0, |s| s.token as usize))
                    .wrapping_add(c.acked.as_ref().map_or(0, |(t, _)| *t as usize))
                    .wrapping_add(c.last_token as usize);
            }
        }
        std::hint::black_box(touched);
    }

    pub(crate) fn get_mut(&mut self, object_id: u32) -> Option<PairMut<'_>> {
        let pos = *self.index.get(&object_id)? as usize;
        self.at_mut(pos)
    }

    /// The pair at `pos`, dead or alive.
    pub(crate) fn at_mut(&mut self, pos: usize) -> Option<PairMut<'_>> {
        Some(PairMut {
            hot: self.hot.get_mut(pos)?,
            cold: self.cold.get_mut(pos)?,
        })
    }

    /// Every live pair, for a change that may touch many (a version
    /// rebind).
    pub(crate) fn for_each_mut(&mut self, mut f: impl FnMut(PairMut<'_>)) {
        for (hot, cold) in self.hot.iter_mut().zip(self.cold.iter_mut()) {
            if !hot.dead {
                f(PairMut { hot, cold });
            }
        }
    }

    /// Marks a pair removed (O(1)); the next [`Pairs::apply`] drops it.
    pub(crate) fn remove(&mut self, object_id: u32) -> bool {
        let Some(pos) = self.index.remove(&object_id) else {
            return false;
        };
        if let Some(mut pair) = self.at_mut(pos as usize) {
            pair.reset();
            pair.hot.dead = true;
        }
        self.dead += 1;
        true
    }

    /// One receiver's relevance change: drops the `exits` and every dead
    /// pair, adds a pair with no baseline for each of `enters` (object id,
    /// layout version) not present yet, in one merge pass. Returns how many
    /// were added.
    pub(crate) fn apply(&mut self, exits: &[u32], mut enters: Vec<(u32, usize)>) -> usize {
        for &id in exits {
            self.remove(id);
        }
        enters.retain(|(id, _)| !self.index.contains_key(id));
        enters.sort_unstable_by_key(|(id, _)| *id);
        enters.dedup_by_key(|(id, _)| *id);
        if enters.is_empty() && self.dead == 0 {
            return 0;
        }
        let added = enters.len();
        // The pairs before the first dead one and the first insertion
        // point keep their positions (and index entries): only the tail
        // from there is merged.
        let first_dead = if self.dead == 0 {
            self.hot.len()
        } else {
            self.hot
                .iter()
                .position(|h| h.dead)
                .unwrap_or(self.hot.len())
        };
        let first_enter = enters.first().map_or(self.hot.len(), |(id, _)| {
            self.hot.partition_point(|h| h.object_id < *id)
        });
        let unmoved = first_dead.min(first_enter);
        let tail_hot = self.hot.split_off(unmoved);
        let tail_cold = self.cold.split_off(unmoved);
        self.hot.reserve(tail_hot.len() + added);
        self.cold.reserve(tail_cold.len() + added);
        let mut old = tail_hot
            .into_iter()
            .zip(tail_cold)
            .filter(|(h, _)| !h.dead)
            .peekable();
        let mut new = enters.into_iter().peekable();
        loop {
            let take_old = match (old.peek(), new.peek()) {
                (Some((h, _)), Some((id, _))) => h.object_id < *id,
                (Some(_), None) => true,
                (None, _) => false,
            };
            let next = if take_old {
                old.next()
            } else {
                new.next()
                    .map(|(id, version)| (Hot::new(id), Cold::new(version)))
            };
            let Some((h, c)) = next else {
                break;
            };
            self.hot.push(h);
            self.cold.push(c);
        }
        self.dead = 0;
        // Give memory back after a large exit (a match change, a viewer
        // that moved far).
        if self.hot.capacity() > 4 * self.hot.len().max(16) {
            self.hot.shrink_to_fit();
            self.cold.shrink_to_fit();
        }
        for (pos, h) in self.hot.iter().enumerate().skip(unmoved) {
            // Pair counts are bounded by the objects of one node, far
            // below u32::MAX.
            self.index.insert(h.object_id, pos as u32);
        }
        added
    }

    pub(crate) fn clear(&mut self) {
        self.index.clear();
        self.hot.clear();
        self.cold.clear();
        self.dead = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(rev: u64) -> Arc<Snapshot> {
        Arc::new(Snapshot {
            rev,
            values: Vec::new(),
        })
    }

    #[test]
    fn the_hot_summary_follows_sends_acks_and_resets() {
        let mut pairs = Pairs::default();
        assert_eq!(pairs.apply(&[], vec![(7, 0)]), 1);
        assert_eq!(pairs.apply(&[], vec![(7, 0)]), 0);
        let mut p = pairs.get_mut(7).unwrap();
        assert!(!p.hot.awaiting_first_ack());
        assert!(!p.hot.sent_at_or_before(u64::MAX - 1));
        p.record_send(5, snap(1), 100);
        p.record_send(9, snap(2), 150);
        assert!(p.hot.awaiting_first_ack());
        assert!(p.hot.sent_at_or_before(100));
        assert!(!p.hot.sent_at_or_before(99));
        assert_eq!(p.hot.last_sent_rev, 2);
        assert_eq!(p.last_token(), 9);
        // Acking the first leaves the second in flight, since 150 ms.
        let mut w = AckWindow::new();
        w.ack(5);
        assert!(p.ack(&w));
        assert!(!p.hot.awaiting_first_ack());
        assert!(!p.hot.sent_at_or_before(149));
        assert!(p.hot.sent_at_or_before(150));
        assert_eq!(p.acked().map(|(t, _)| *t), Some(5));
        assert_eq!(p.in_flight(), 1);
        // An ack covering nothing in flight changes nothing.
        assert!(!p.ack(&w));
        w.ack(9);
        assert!(p.ack(&w));
        assert_eq!(p.in_flight(), 0);
        assert!(!p.hot.sent_at_or_before(u64::MAX - 1));
        p.reset();
        assert!(p.acked().is_none());
        assert_eq!(p.hot.last_sent_rev, 0);
        assert_eq!(p.last_token(), 9, "the last token survives a re-baseline");
        // A version rebind to the same version keeps the baseline.
        p.record_send(11, snap(3), 200);
        p.rebind_version(0);
        assert_eq!(p.in_flight(), 1);
        p.rebind_version(1);
        assert_eq!(p.in_flight(), 0);
        assert_eq!(p.version(), 1);
    }

    #[test]
    fn a_burst_spills_in_flight_sends_to_the_heap_and_acks_bring_them_back() {
        let mut pairs = Pairs::default();
        pairs.apply(&[], vec![(1, 0)]);
        let mut p = pairs.get_mut(1).unwrap();
        for t in 1..=10 {
            p.record_send(t, snap(t), t * 50);
        }
        assert!(p.cold.in_flight.spilled());
        let mut w = AckWindow::new();
        w.ack(5);
        assert!(p.ack(&w));
        assert_eq!(p.in_flight(), 5);
        assert!(p.cold.in_flight.spilled(), "5 in flight do not fit inline");
        w.ack(6);
        assert!(p.ack(&w));
        assert_eq!(p.in_flight(), 4);
        assert!(!p.cold.in_flight.spilled(), "4 fit inline again");
        assert!(p.hot.sent_at_or_before(350) && !p.hot.sent_at_or_before(349));
        assert_eq!(p.acked().map(|(t, s)| (*t, s.rev)), Some((6, 6)));
    }

    #[test]
    fn pairs_stay_ascending_through_merges_removals_and_despawns() {
        let mut pairs = Pairs::default();
        assert_eq!(
            pairs.apply(&[], vec![(30, 0), (10, 0), (40, 0), (10, 0)]),
            3
        );
        assert_eq!(pairs.apply(&[], vec![(20, 0), (40, 0)]), 1);
        assert_eq!(pairs.ids().collect::<Vec<_>>(), vec![10, 20, 30, 40]);
        pairs.get_mut(40).unwrap().record_send(1, snap(4), 0);
        // A despawn marks the pair dead: gone for lookups, still a position.
        assert!(pairs.remove(20));
        assert!(!pairs.remove(20));
        assert!(!pairs.contains(20) && pairs.hot(20).is_none());
        assert_eq!(pairs.ids().collect::<Vec<_>>(), vec![10, 30, 40]);
        assert_eq!(pairs.len(), 4);
        assert!(pairs.hot_at(1).is_some_and(Hot::is_dead));
        assert_eq!(pairs.find_from(20, 0), None);
        // The next relevance pass drops it, with the exits, and merges.
        assert_eq!(pairs.apply(&[30], vec![(25, 1), (5, 0)]), 2);
        assert_eq!(pairs.ids().collect::<Vec<_>>(), vec![5, 10, 25, 40]);
        assert_eq!(pairs.len(), 4);
        assert_eq!(pairs.hot(40).map(|h| h.last_sent_rev), Some(4));
        assert_eq!(pairs.get_mut(40).map(|p| p.in_flight()), Some(1));
        assert_eq!(pairs.get_mut(25).map(|p| p.version()), Some(1));
        // Forward lookups from a hint, and the index behind them.
        assert_eq!(pairs.find_from(25, 1), Some(2));
        assert_eq!(pairs.find_from(5, 3), Some(0));
        assert_eq!(pairs.find_from(40, 0), Some(3));
        assert_eq!(pairs.find_from(41, 0), None);
        assert_eq!(pairs.find_from(41, 99), None);
        pairs.clear();
        assert_eq!(pairs.len(), 0);
        assert!(!pairs.contains(40));
    }

    #[test]
    fn a_send_in_the_last_millisecond_still_counts_as_in_flight() {
        let mut pairs = Pairs::default();
        pairs.apply(&[], vec![(1, 0)]);
        let mut p = pairs.get_mut(1).unwrap();
        p.record_send(1, snap(1), u64::MAX);
        assert!(p.hot().awaiting_first_ack());
        assert!(p.hot().sent_at_or_before(u64::MAX - 1));
    }

    /// The index agrees with the arrays, which stay strictly ascending.
    fn assert_consistent(pairs: &Pairs) {
        let live: Vec<u32> = pairs.ids().collect();
        assert!(live.windows(2).all(|w| w[0] < w[1]), "{live:?}");
        assert_eq!(pairs.index.len(), live.len());
        for (pos, h) in pairs.hot.iter().enumerate() {
            if !h.dead {
                assert_eq!(pairs.index.get(&h.object_id), Some(&(pos as u32)));
                assert_eq!(pairs.find_from(h.object_id, 0), Some(pos));
            }
        }
    }

    #[test]
    fn the_index_follows_every_merge_removal_and_compaction() {
        let mut pairs = Pairs::default();
        let mut seed = 0x2545_f491_u64;
        let mut next = |n: u64| {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            (seed >> 33) % n
        };
        for _ in 0..300 {
            let exits: Vec<u32> = (0..next(4)).map(|_| next(200) as u32).collect();
            let enters: Vec<(u32, usize)> = (0..next(6)).map(|_| (next(200) as u32, 0)).collect();
            for _ in 0..next(3) {
                pairs.remove(next(200) as u32);
            }
            pairs.apply(&exits, enters);
            assert_consistent(&pairs);
        }
    }

    #[test]
    fn an_ack_message_advances_found_pairs_and_counts_the_rest_in_any_order() {
        let mut pairs = Pairs::default();
        pairs.apply(&[], vec![(1, 0), (2, 0), (3, 0), (4, 0)]);
        for (id, token) in [(1, 10), (2, 20), (3, 30), (4, 40)] {
            if let Some(mut p) = pairs.get_mut(id) {
                p.record_send(token, snap(u64::from(id)), 0);
            }
        }
        pairs.remove(4);
        let window = |t: u64| AckWindow::from_wire(t, 0).ok();
        let mut found = Vec::new();
        let entries = [
            (3, window(30)),                      // advances
            (1, window(10)),                      // advances (out of order: found by the index)
            (2, window(99)),                      // covers nothing in flight: ignored
            (9, window(10)),                      // no such pair: ignored
            (4, window(40)),                      // dead pair: ignored
            (2, AckWindow::from_wire(0, 1).ok()), // malformed window: ignored
        ];
        assert_eq!(pairs.ack_all(entries.into_iter(), &mut found), (2, 4));
        for (id, acked) in [(1, Some(10)), (2, None), (3, Some(30))] {
            let p = pairs.get_mut(id).unwrap();
            assert_eq!(p.acked().map(|(t, _)| *t), acked, "pair {id}");
        }
        // The same message again advances nothing.
        assert_eq!(pairs.ack_all(entries.into_iter(), &mut found), (0, 6));
    }

    #[test]
    fn a_dead_pair_is_skipped_by_for_each_mut() {
        let mut pairs = Pairs::default();
        pairs.apply(&[], vec![(1, 0), (2, 0)]);
        pairs.remove(1);
        let mut seen = Vec::new();
        pairs.for_each_mut(|p| seen.push(p.hot.object_id));
        assert_eq!(seen, vec![2]);
    }
}
