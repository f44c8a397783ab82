//! The queue's secondary index: which queued tickets could be compatible
//! with an arriving one, without scanning the whole queue.
//!
//! Forward side: each ticket's properties by value (string equality sets,
//! ordered number sets), so an arriving query's most selective comparison
//! names a small candidate set. Reverse side: each ticket's query by one
//! string equality it requires (`open` holds queries with none), so an
//! arriving ticket with an empty query still finds only the tickets whose
//! queries could accept its properties. Candidates are a superset: the
//! caller still evaluates both queries. What it is not: it never decides a
//! match and holds no ticket data beyond sequence numbers.

use std::collections::{BTreeSet, HashMap};
use std::ops::Bound;

use super::query::{Expr, Op, Props, Value};

/// A total order on finite numbers, for range lookups.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Key(f64);

impl Eq for Key {}
impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Key {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// The index key of `n`: -0.0 and 0.0 are one key, as `==` says.
fn num_key(n: f64) -> Key {
    Key(if n == 0.0 { 0.0 } else { n })
}

type Seqs = BTreeSet<u64>;

/// Candidates for one arriving ticket, in queue (age) order.
#[derive(Debug)]
pub enum Candidates<'a> {
    /// No useful constraint: walk the whole queue.
    All,
    /// One borrowed set.
    Set(&'a Seqs),
    /// A merged, sorted, de-duplicated list.
    List(Vec<u64>),
}

/// Where a query can look.
enum Plan<'a> {
    All,
    Set(&'a Seqs),
    Range(&'a BTreeSet<(Key, u64)>, Bound<Key>, Bound<Key>),
    Union(Vec<Plan<'a>>),
    Nothing,
}

impl Plan<'_> {
    /// Upper bound on the candidates, `usize::MAX` for everything.
    fn size(&self) -> usize {
        match self {
            Plan::All => usize::MAX,
            Plan::Nothing => 0,
            Plan::Set(s) => s.len(),
            Plan::Range(r, ..) => r.len(),
            Plan::Union(parts) => parts
                .iter()
                .map(Plan::size)
                .fold(0usize, usize::saturating_add),
        }
    }

    fn collect(&self, out: &mut Vec<u64>) {
        match self {
            Plan::All | Plan::Nothing => {}
            Plan::Set(s) => out.extend(s.iter().copied()),
            Plan::Range(r, lo, hi) => {
                let lo = match lo {
                    Bound::Included(k) => Bound::Included((*k, 0)),
                    Bound::Excluded(k) => Bound::Excluded((*k, u64::MAX)),
                    Bound::Unbounded => Bound::Unbounded,
                };
                let hi = match hi {
                    Bound::Included(k) => Bound::Included((*k, u64::MAX)),
                    Bound::Excluded(k) => Bound::Excluded((*k, 0)),
                    Bound::Unbounded => Bound::Unbounded,
                };
                out.extend(r.range((lo, hi)).map(|(_, seq)| *seq));
            }
            Plan::Union(parts) => parts.iter().for_each(|p| p.collect(out)),
        }
    }
}

/// The index. Every method is O(log n) per touched entry.
#[derive(Debug, Default)]
pub struct Index {
    strings: HashMap<String, HashMap<String, Seqs>>,
    numbers: HashMap<String, BTreeSet<(Key, u64)>>,
    required: HashMap<String, HashMap<String, Seqs>>,
    open: Seqs,
}

/// One string equality a query cannot match without, if any.
fn requirement(expr: Option<&Expr>) -> Option<(&str, &str)> {
    match expr? {
        Expr::Cmp {
            key,
            op: Op::Eq,
            value: Value::Str(v),
        } => Some((key, v)),
        Expr::And(children) => children.iter().find_map(|c| requirement(Some(c))),
        _ => None,
    }
}

fn set_remove(map: &mut HashMap<String, HashMap<String, Seqs>>, key: &str, val: &str, seq: u64) {
    if let Some(by_val) = map.get_mut(key) {
        if let Some(set) = by_val.get_mut(val) {
            set.remove(&seq);
            if set.is_empty() {
                by_val.remove(val);
            }
        }
        if by_val.is_empty() {
            map.remove(key);
        }
    }
}

impl Index {
    /// Indexes a queued ticket.
    pub fn insert(&mut self, seq: u64, props: &Props, query: Option<&Expr>) {
        for (key, value) in props {
            match value {
                Value::Str(s) => {
                    self.strings
                        .entry(key.clone())
                        .or_default()
                        .entry(s.clone())
                        .or_default()
                        .insert(seq);
                }
                Value::Num(n) => {
                    self.numbers
                        .entry(key.clone())
                        .or_default()
                        .insert((num_key(*n), seq));
                }
            }
        }
        match requirement(query) {
            Some((key, val)) => {
                self.required
                    .entry(key.to_owned())
                    .or_default()
                    .entry(val.to_owned())
                    .or_default()
                    .insert(seq);
            }
            None => {
                self.open.insert(seq);
            }
        }
    }

    /// Forgets a ticket (the same arguments as its `insert`).
    pub fn remove(&mut self, seq: u64, props: &Props, query: Option<&Expr>) {
        for (key, value) in props {
            match value {
                Value::Str(s) => set_remove(&mut self.strings, key, s, seq),
                Value::Num(n) => {
                    if let Some(set) = self.numbers.get_mut(key) {
                        set.remove(&(num_key(*n), seq));
                        if set.is_empty() {
                            self.numbers.remove(key);
                        }
                    }
                }
            }
        }
        match requirement(query) {
            Some((key, val)) => set_remove(&mut self.required, key, val, seq),
            None => {
                self.open.remove(&seq);
            }
        }
    }

    fn plan(&self, expr: &Expr) -> Plan<'_> {
        match expr {
            Expr::Cmp { key, op, value } => match (op, value) {
                (Op::Eq, Value::Str(v)) => self
                    .strings
                    .get(key)
                    .and_then(|m| m.get(v))
                    .map_or(Plan::Nothing, Plan::Set),
                (Op::Ne, _) => Plan::All,
                (op, Value::Num(n)) => {
                    let Some(set) = self.numbers.get(key) else {
                        return Plan::Nothing;
                    };
                    let k = num_key(*n);
                    let (lo, hi) = match op {
                        Op::Eq => (Bound::Included(k), Bound::Included(k)),
                        Op::Lt => (Bound::Unbounded, Bound::Excluded(k)),
                        Op::Le => (Bound::Unbounded, Bound::Included(k)),
                        Op::Gt => (Bound::Excluded(k), Bound::Unbounded),
                        _ => (Bound::Included(k), Bound::Unbounded),
                    };
                    Plan::Range(set, lo, hi)
                }
                // Strings never compare with ordering operators (the parser
                // refuses them); nothing can match.
                _ => Plan::Nothing,
            },
            Expr::And(children) => children
                .iter()
                .map(|c| self.plan(c))
                .min_by_key(Plan::size)
                .unwrap_or(Plan::All),
            Expr::Or(children) => {
                let parts: Vec<Plan<'_>> = children.iter().map(|c| self.plan(c)).collect();
                if parts.iter().any(|p| matches!(p, Plan::All)) {
                    Plan::All
                } else {
                    Plan::Union(parts)
                }
            }
        }
    }

    /// Tickets whose queries could accept `props` (reverse side), and how
    /// many at most.
    fn accepting(&self, props: &Props) -> Plan<'_> {
        let mut parts = vec![Plan::Set(&self.open)];
        for (key, value) in props {
            if let Value::Str(s) = value
                && let Some(set) = self.required.get(key).and_then(|m| m.get(s))
            {
                parts.push(Plan::Set(set));
            }
        }
        Plan::Union(parts)
    }

    /// A superset of the queued tickets compatible with a ticket of
    /// `props` and `query`, taken from the smaller side; `queued` is the
    /// queue length.
    pub fn candidates(&self, props: &Props, query: Option<&Expr>, queued: usize) -> Candidates<'_> {
        let forward = query.map_or(Plan::All, |q| self.plan(q));
        let reverse = self.accepting(props);
        let plan = if reverse.size() < forward.size() {
            reverse
        } else {
            forward
        };
        match plan {
            Plan::Nothing => Candidates::List(Vec::new()),
            Plan::Set(s) => Candidates::Set(s),
            p if p.size() >= queued => Candidates::All,
            p => {
                let mut out = Vec::with_capacity(p.size().min(queued));
                p.collect(&mut out);
                out.sort_unstable();
                out.dedup();
                Candidates::List(out)
            }
        }
    }
}
