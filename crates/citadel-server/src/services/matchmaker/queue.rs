//! The queue of one node's tickets and cohort formation (`services.md`
//! §3.4), as plain data with no locks, clocks or I/O.
//!
//! Tickets carry a monotonically increasing sequence (age). When a ticket
//! arrives, [`Queue::preview`] builds the smallest valid cohort that
//! contains it: the arriving ticket first, then the index's candidates
//! oldest first, each added when it is mutually compatible with every
//! member so far and keeps the total under every member's `max_count`,
//! stopping as soon as the cohort is valid. [`Queue::commit`] then removes
//! the cohort in one step, failing closed if any member left meanwhile.
//! What it is not: it sends nothing and assigns no rooms (the service
//! does); expiry only reports what is due ([`Queue::due`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::index::{Candidates, Index};
use super::query::{Expr, Props};

/// One account in a ticket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// The account.
    pub user_id: String,
    /// Its connection that queued (the leader's, or the member's own).
    pub participant_id: u64,
}

/// A queued ticket.
#[derive(Debug, Clone)]
pub struct Ticket {
    /// Public id (18 random bytes, base64url).
    pub id: String,
    /// Everyone the ticket counts; a party ticket lists all its members.
    pub members: Vec<Member>,
    /// Smallest acceptable match size.
    pub min_count: u32,
    /// Largest acceptable match size.
    pub max_count: u32,
    /// The final size must be a multiple of it.
    pub count_multiple: u32,
    /// Parsed query (`None`: accepts anyone).
    pub query: Option<Expr>,
    /// The query as submitted (shown to the Lua hook).
    pub query_text: String,
    /// Properties other tickets' queries read.
    pub properties: Props,
    /// When it expires, Unix ms.
    pub expires_at: u64,
    /// The party it speaks for, if any.
    pub party_id: Option<String>,
}

impl Ticket {
    /// Members it counts.
    pub fn count(&self) -> u32 {
        self.members.len() as u32
    }

    /// Each query accepts the other's properties.
    pub fn compatible(&self, other: &Ticket) -> bool {
        let accepts = |t: &Ticket, props: &Props| t.query.as_ref().is_none_or(|q| q.matches(props));
        accepts(self, &other.properties) && accepts(other, &self.properties)
    }
}

/// A cohort found by [`Queue::preview`]: sequences, arriving ticket first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cohort(pub Vec<u64>);

/// The queue and its index.
#[derive(Debug, Default)]
pub struct Queue {
    by_seq: BTreeMap<u64, Ticket>,
    by_id: HashMap<String, u64>,
    expiry: BTreeSet<(u64, u64)>,
    index: Index,
    next_seq: u64,
    /// Tickets looked at by previews (the `evaluations` counter).
    pub evaluated: u64,
}

/// Whether `total` members fit every ticket's bounds.
fn valid(total: u32, members: &[&Ticket]) -> bool {
    total >= 2
        && members.iter().all(|t| {
            total >= t.min_count
                && total <= t.max_count
                && total.is_multiple_of(t.count_multiple.max(1))
        })
}

impl Queue {
    /// Queued tickets.
    pub fn len(&self) -> usize {
        self.by_seq.len()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.by_seq.is_empty()
    }

    /// The queued ticket `id`.
    pub fn get(&self, id: &str) -> Option<&Ticket> {
        self.by_id.get(id).and_then(|seq| self.by_seq.get(seq))
    }

    /// The sequence of queued ticket `id`.
    pub fn seq_of(&self, id: &str) -> Option<u64> {
        self.by_id.get(id).copied()
    }

    /// The id of the queued ticket at `seq`.
    pub fn id_of(&self, seq: u64) -> Option<&str> {
        self.by_seq.get(&seq).map(|t| t.id.as_str())
    }

    /// Queues `ticket`; returns its sequence.
    pub fn insert(&mut self, ticket: Ticket) -> u64 {
        self.next_seq += 1;
        let seq = self.next_seq;
        self.index
            .insert(seq, &ticket.properties, ticket.query.as_ref());
        self.by_id.insert(ticket.id.clone(), seq);
        self.expiry.insert((ticket.expires_at, seq));
        self.by_seq.insert(seq, ticket);
        seq
    }

    /// Removes ticket `id`.
    pub fn remove(&mut self, id: &str) -> Option<Ticket> {
        let seq = *self.by_id.get(id)?;
        self.remove_seq(seq)
    }

    fn remove_seq(&mut self, seq: u64) -> Option<Ticket> {
        let ticket = self.by_seq.remove(&seq)?;
        self.by_id.remove(&ticket.id);
        self.expiry.remove(&(ticket.expires_at, seq));
        self.index
            .remove(seq, &ticket.properties, ticket.query.as_ref());
        Some(ticket)
    }

    /// Ids of tickets whose expiry is at or before `now_ms`.
    pub fn due(&self, now_ms: u64) -> Vec<String> {
        self.expiry
            .range(..(now_ms, u64::MAX))
            .filter_map(|(_, seq)| self.by_seq.get(seq).map(|t| t.id.clone()))
            .collect()
    }

    /// The smallest valid cohort containing the ticket at `seq`, if any.
    /// Reads only; [`Queue::commit`] removes it.
    pub fn preview(&mut self, seq: u64) -> Option<Cohort> {
        let seed = self.by_seq.get(&seq)?;
        let mut members: Vec<&Ticket> = vec![seed];
        let mut seqs = vec![seq];
        let mut total = seed.count();
        let mut cap = seed.max_count;
        if valid(total, &members) {
            return Some(Cohort(seqs));
        }
        let by_seq = &self.by_seq;
        let lookup = move |s: &u64| by_seq.get(s).map(|t| (*s, t));
        let candidates = self
            .index
            .candidates(&seed.properties, seed.query.as_ref(), by_seq.len());
        let walk: Box<dyn Iterator<Item = (u64, &Ticket)> + '_> = match &candidates {
            Candidates::All => Box::new(by_seq.iter().map(|(s, t)| (*s, t))),
            Candidates::Set(set) => Box::new(set.iter().filter_map(lookup)),
            Candidates::List(list) => Box::new(list.iter().filter_map(lookup)),
        };
        let mut looked = 0u64;
        let mut found = false;
        for (cand, ticket) in walk {
            looked += 1;
            let grown = total + ticket.count();
            if cand == seq || grown > cap.min(ticket.max_count) {
                continue;
            }
            if !members.iter().all(|m| m.compatible(ticket)) {
                continue;
            }
            members.push(ticket);
            seqs.push(cand);
            total = grown;
            cap = cap.min(ticket.max_count);
            if valid(total, &members) {
                found = true;
                break;
            }
        }
        self.evaluated += looked;
        found.then_some(Cohort(seqs))
    }

    /// Removes every ticket of `cohort` at once, or none if any of them is
    /// no longer queued (fails closed).
    pub fn commit(&mut self, cohort: &Cohort) -> Option<Vec<Ticket>> {
        if !cohort.0.iter().all(|s| self.by_seq.contains_key(s)) {
            return None;
        }
        Some(
            cohort
                .0
                .iter()
                .filter_map(|s| self.remove_seq(*s))
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::super::query::{Limits, Value, parse};
    use super::*;
    use proptest::prelude::*;

    const LIMITS: Limits = Limits {
        max_bytes: 4096,
        max_depth: 16,
    };

    fn ticket(id: &str, members: u32, query: &str, props: &[(&str, Value)]) -> Ticket {
        Ticket {
            id: id.into(),
            members: (0..members)
                .map(|i| Member {
                    user_id: format!("{id}-{i}"),
                    participant_id: 0,
                })
                .collect(),
            min_count: 2,
            max_count: 2,
            count_multiple: 1,
            query: parse(query, LIMITS).unwrap(),
            query_text: query.into(),
            properties: props
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect(),
            expires_at: 1_000,
            party_id: None,
        }
    }

    fn counts(mut t: Ticket, min: u32, max: u32, multiple: u32) -> Ticket {
        t.min_count = min;
        t.max_count = max;
        t.count_multiple = multiple;
        t
    }

    fn s(v: &str) -> Value {
        Value::Str(v.into())
    }

    /// Queues `t` and forms what it can, like the service does.
    fn arrive(q: &mut Queue, t: Ticket) -> Option<Vec<String>> {
        let seq = q.insert(t);
        let cohort = q.preview(seq)?;
        Some(q.commit(&cohort)?.into_iter().map(|t| t.id).collect())
    }

    #[test]
    fn mutual_queries_only() {
        let mut q = Queue::default();
        let ranked = r#"mode == "ranked" AND skill >= 1200"#;
        // a accepts b, but b's query rejects a: no match.
        assert_eq!(
            arrive(
                &mut q,
                ticket(
                    "a",
                    1,
                    ranked,
                    &[("mode", s("ranked")), ("skill", Value::Num(1000.0))]
                )
            ),
            None
        );
        assert_eq!(
            arrive(
                &mut q,
                ticket(
                    "b",
                    1,
                    ranked,
                    &[("mode", s("ranked")), ("skill", Value::Num(1500.0))]
                )
            ),
            None
        );
        assert_eq!(
            arrive(
                &mut q,
                ticket(
                    "c",
                    1,
                    ranked,
                    &[("mode", s("ranked")), ("skill", Value::Num(1300.0))]
                )
            ),
            Some(vec!["c".into(), "b".into()])
        );
        assert_eq!(q.len(), 1);
        assert!(q.get("a").is_some());
    }

    #[test]
    fn oldest_compatible_first_and_counts() {
        let mut q = Queue::default();
        for id in ["a", "b", "c"] {
            assert_eq!(
                arrive(&mut q, counts(ticket(id, 1, "", &[]), 4, 4, 1)),
                None
            );
        }
        // d makes four: the three oldest join it.
        assert_eq!(
            arrive(&mut q, counts(ticket("d", 1, "", &[]), 2, 6, 2)),
            Some(vec!["d".into(), "a".into(), "b".into(), "c".into()])
        );
        // Multiples: 3 is never valid with count_multiple 2.
        let mut q = Queue::default();
        assert_eq!(
            arrive(&mut q, counts(ticket("p", 3, "", &[]), 2, 6, 2)),
            None
        );
        assert_eq!(
            arrive(&mut q, counts(ticket("x", 1, "", &[]), 2, 6, 2)),
            Some(vec!["x".into(), "p".into()])
        );
        // A party already inside its bounds forms alone.
        assert_eq!(
            arrive(&mut q, counts(ticket("duo", 2, "", &[]), 2, 2, 1)),
            Some(vec!["duo".into()])
        );
    }

    #[test]
    fn party_of_three_and_two_solos_make_five() {
        let mut q = Queue::default();
        let five = |t| counts(t, 5, 5, 1);
        assert_eq!(arrive(&mut q, five(ticket("party", 3, "", &[]))), None);
        assert_eq!(arrive(&mut q, five(ticket("solo1", 1, "", &[]))), None);
        assert_eq!(
            arrive(&mut q, five(ticket("solo2", 1, "", &[]))),
            Some(vec!["solo2".into(), "party".into(), "solo1".into()])
        );
        assert!(q.is_empty());
    }

    #[test]
    fn a_cohort_larger_than_a_max_is_skipped_and_commit_fails_closed() {
        let mut q = Queue::default();
        q.insert(counts(ticket("big", 3, "", &[]), 2, 8, 1));
        let seq = q.insert(counts(ticket("small", 1, "", &[]), 2, 3, 1));
        // big (3) would make 4 > small's max of 3.
        assert_eq!(q.preview(seq), None);
        let seq2 = q.insert(counts(ticket("other", 1, "", &[]), 2, 2, 1));
        let cohort = q.preview(seq2).unwrap();
        assert_eq!(cohort.0, vec![seq2, seq]);
        q.remove("small");
        assert!(q.commit(&cohort).is_none());
        assert!(q.get("other").is_some(), "nothing removed");
    }

    #[test]
    fn expiry_reports_due_tickets() {
        let mut q = Queue::default();
        let mut t = ticket("a", 1, "x == 1", &[]);
        t.expires_at = 50;
        q.insert(t);
        q.insert(ticket("b", 1, "x == 1", &[]));
        assert_eq!(q.due(49), Vec::<String>::new());
        assert_eq!(q.due(50), vec!["a".to_owned()]);
        q.remove("a");
        assert!(q.due(5_000).contains(&"b".to_owned()));
    }

    #[test]
    fn the_index_narrows_candidates() {
        let mut q = Queue::default();
        for i in 0..1_000 {
            let region = if i % 10 == 0 { "jp" } else { "eu" };
            q.insert(ticket(
                &format!("t{i}"),
                1,
                r#"side == "b""#,
                &[
                    ("side", s("a")),
                    ("region", s(region)),
                    ("n", Value::Num(f64::from(i))),
                ],
            ));
        }
        let seq = q.insert(ticket(
            "probe",
            1,
            r#"side == "a" AND region == "jp" AND n >= 995"#,
            &[("side", s("b"))],
        ));
        q.evaluated = 0;
        assert_eq!(q.preview(seq), None, "no jp ticket has n >= 995");
        assert!(q.evaluated <= 100, "looked at {} tickets", q.evaluated);
        let seq = q.insert(ticket(
            "probe2",
            1,
            r#"n > 500 AND n < 503"#,
            &[("side", s("b"))],
        ));
        let cohort = q.preview(seq).unwrap();
        assert_eq!(q.commit(&cohort).unwrap()[1].id, "t501");
    }

    fn value() -> impl Strategy<Value = Value> {
        prop_oneof![
            prop::sample::select(vec!["eu", "us", "jp"]).prop_map(|v| Value::Str(v.into())),
            (-3i32..4).prop_map(|n| Value::Num(f64::from(n))),
            Just(Value::Num(-0.0)),
        ]
    }

    fn props() -> impl Strategy<Value = Props> {
        prop::collection::btree_map(
            prop::sample::select(vec!["a", "b", "c"]).prop_map(String::from),
            value(),
            0..3,
        )
    }

    fn query() -> impl Strategy<Value = String> {
        let leaf = (
            prop::sample::select(vec!["a", "b", "c"]),
            prop::sample::select(vec!["==", "!=", "<", "<=", ">", ">="]),
            value(),
        )
            .prop_map(|(k, op, v)| match v {
                Value::Str(s) => format!("{k} {} \"{s}\"", if op == "!=" { "!=" } else { "==" }),
                Value::Num(n) => format!("{k} {op} {n}"),
            });
        leaf.prop_recursive(3, 12, 3, |inner| {
            prop::collection::vec(inner, 2..4).prop_flat_map(|parts| {
                prop::sample::select(vec![" AND ", " OR "])
                    .prop_map(move |sep| format!("({})", parts.join(sep)))
            })
        })
        .boxed()
        .prop_union(Just(String::new()).boxed())
    }

    proptest! {
        /// Compatibility is mutual, and the index never hides a compatible
        /// ticket: a finds b exactly when b finds a, exactly when both
        /// queries accept the other's properties.
        #[test]
        fn compatibility_is_mutual(
            a in (query(), props()),
            b in (query(), props()),
            others in prop::collection::vec((query(), props()), 0..6),
        ) {
            let make = |id: &str, (q, p): &(String, Props)| {
                let mut t = ticket(id, 1, q, &[]);
                t.properties = p.clone();
                t
            };
            let ta = make("a", &a);
            let tb = make("b", &b);
            prop_assert_eq!(ta.compatible(&tb), tb.compatible(&ta));
            let expected = ta.compatible(&tb);
            for order in [false, true] {
                let mut q = Queue::default();
                // Others are made unmatchable so only a and b can pair.
                for (i, o) in others.iter().enumerate() {
                    let mut t = make(&format!("o{i}"), o);
                    t.max_count = 1;
                    q.insert(t);
                }
                let (first, second) = if order { (&tb, &ta) } else { (&ta, &tb) };
                let s1 = q.insert(first.clone());
                prop_assert_eq!(q.preview(s1), None);
                let s2 = q.insert(second.clone());
                let found = q.preview(s2);
                prop_assert_eq!(found.is_some(), expected);
                if let Some(c) = found {
                    prop_assert_eq!(c.0, vec![s2, s1]);
                }
            }
        }
    }
}
