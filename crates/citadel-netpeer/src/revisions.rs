//! A tick's object revisions in ascending object id: what the per-tick scan
//! compares every pair against.
//!
//! What it is: a dense, sorted copy of (object id, current revision), built
//! once per tick. Most pairs have nothing to send, and deciding that needs
//! only the object's revision. Read from the object map, that is a hash
//! probe into a 120-byte entry and a pointer chase into the object's
//! snapshot for every pair of every receiver; at a few hundred receivers
//! both miss the cache (the scan streams every receiver's pairs through it
//! between two visits of the same object). This table is 16 bytes per
//! object and is walked forward in the pairs' own order, so it stays hot.
//!
//! What it is not: the objects. A pair that may send still looks its object
//! up. The table is a snapshot: it is right only while no object is written,
//! which holds inside a tick (trusted writes and proposals happen between
//! ticks).
//!
//! Call order: [`Revisions::rebuild`] at the start of a tick, then one
//! [`Cursor`] per receiver scan, asked in ascending object id (any other
//! order is answered too, by binary search).

/// Entries probed linearly before a cursor falls back to binary search.
const LINEAR_PROBE: usize = 8;

/// The sorted (object id, revision) table of one tick.
#[derive(Default)]
pub(crate) struct Revisions {
    entries: Vec<(u32, u64)>,
}

impl Revisions {
    /// Replaces the table with `objects` (unique ids, any order); keeps the
    /// allocation for the next tick.
    pub(crate) fn rebuild(&mut self, objects: impl Iterator<Item = (u32, u64)>) {
        self.entries.clear();
        self.entries.extend(objects);
        self.entries.sort_unstable_by_key(|&(id, _)| id);
    }

    /// A cursor at the start of the table.
    pub(crate) fn cursor(&self) -> Cursor<'_> {
        Cursor {
            entries: &self.entries,
            next: 0,
        }
    }
}

/// A forward walk over a [`Revisions`] table.
pub(crate) struct Cursor<'a> {
    entries: &'a [(u32, u64)],
    /// Where the next lookup probes first: one past the last id found.
    next: usize,
}

impl Cursor<'_> {
    /// The revision of object `id`, `None` if it does not exist. Probes the
    /// few entries from the last hit on (where the next id of an ascending
    /// walk is), then falls back to a binary search of the whole table, so
    /// any order is answered and an ascending one costs O(1) a lookup.
    pub(crate) fn rev_of(&mut self, id: u32) -> Option<u64> {
        let ahead = self.entries.get(self.next..).unwrap_or_default();
        let probed = ahead
            .iter()
            .take(LINEAR_PROBE)
            .take_while(|&&(k, _)| k <= id)
            .position(|&(k, _)| k == id)
            .map(|i| self.next + i);
        let at = probed.or_else(|| self.entries.binary_search_by_key(&id, |&(k, _)| k).ok())?;
        self.next = at + 1;
        self.entries.get(at).map(|&(_, rev)| rev)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(ids: &[u32]) -> Revisions {
        let mut r = Revisions::default();
        r.rebuild(ids.iter().map(|&id| (id, u64::from(id) * 10)));
        r
    }

    #[test]
    fn ascending_walks_find_every_present_id_and_no_absent_one() {
        let ids: Vec<u32> = (1..200).map(|i| i * 3).collect();
        let r = table(&ids);
        let mut c = r.cursor();
        for id in 0..700 {
            let expect = (id % 3 == 0 && (3..600).contains(&id)).then(|| u64::from(id) * 10);
            assert_eq!(c.rev_of(id), expect, "id {id}");
        }
    }

    #[test]
    fn any_order_matches_a_plain_lookup() {
        // Unsorted input, then ids asked in a scrambled order with repeats,
        // wrap-arounds and gaps larger than the linear probe.
        let ids = [50u32, 7, 1_000, 3, 999, 64, 65, 66, 400, 12];
        let r = table(&ids);
        let mut c = r.cursor();
        let mut x = 17u32;
        for _ in 0..5_000 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            let id = (x >> 8) % 1_100;
            let expect = ids.contains(&id).then(|| u64::from(id) * 10);
            assert_eq!(c.rev_of(id), expect, "id {id}");
        }
    }

    #[test]
    fn a_scan_that_wraps_around_finds_both_halves() {
        let ids: Vec<u32> = (1..=100).collect();
        let r = table(&ids);
        let mut c = r.cursor();
        for id in (60..=100).chain(1..60) {
            assert_eq!(c.rev_of(id), Some(u64::from(id) * 10));
        }
        assert_eq!(c.rev_of(60), Some(600), "the same id twice in a row");
        assert_eq!(c.rev_of(60), Some(600));
    }

    #[test]
    fn an_empty_table_has_nothing() {
        let r = Revisions::default();
        let mut c = r.cursor();
        assert_eq!(c.rev_of(0), None);
        assert_eq!(c.rev_of(u32::MAX), None);
    }

    #[test]
    fn rebuild_replaces_the_previous_tick() {
        let mut r = table(&[1, 2, 3]);
        r.rebuild([(2u32, 99u64)].into_iter());
        let mut c = r.cursor();
        assert_eq!(c.rev_of(1), None);
        assert_eq!(c.rev_of(2), Some(99));
        assert_eq!(c.rev_of(3), None);
    }
}
