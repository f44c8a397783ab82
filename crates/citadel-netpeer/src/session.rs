//! The client half: [`NetworkPeerSession`] keeps, per object, the state of
//! every applied `result_id` (until a newer base makes it useless), applies
//! each kind-13 body onto the state its `base_id` names, and acknowledges
//! with kind 14 only what it applied.
//!
//! Rules (§6.2 client obligations): a full bunch must name a registered
//! schema identity (hash + layout version); any decode or apply error
//! rejects the whole bunch with the session unchanged; a delta whose base
//! is not held (or whose object is unknown) is reported as
//! [`Outcome::NeedsFull`] with no ack and no state invented (recovery is
//! the server's full re-baseline). The optional kind-15 table is only
//! checked against the registered identities; full bunches stay the gate.
//! Proposals start with a full bunch and use strictly increasing nonzero
//! `result_id`s.
//!
//! What it is not: IO or interpolation. Call order: `register`, then
//! `handle_bunch` / `handle_schema_table` per inbound body, `poll_ack`
//! after each batch, `state` to read, `propose` to write ClientOwned fields.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use citadel_wire::DecodeError;
use citadel_wire::ack::AckWindow;
use citadel_wire::netpeer::{
    BunchBase, BunchHeader, ClassSchema, DeltaBunch, FieldCodec, FieldValue, HeaderBase,
    MAX_TABLE_ENTRIES, RepAck, RepAckEntry, RepSchema,
};
use citadel_wire::schema::SCHEMA_HASH_BYTES;
use smallvec::SmallVec;

use crate::value::{Items, Value, apply_collection};

/// Client-side bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionLimits {
    /// Objects held at once; a full bunch of a new object past it is
    /// rejected.
    pub max_objects: usize,
    /// Applied states kept per object (above the server's pending cap of 64
    /// so every base the server may name is still held).
    pub max_states_per_object: usize,
}

impl Default for SessionLimits {
    fn default() -> Self {
        SessionLimits {
            max_objects: 65_536,
            max_states_per_object: 128,
        }
    }
}

/// One object's state: a value per field, `None` where this receiver was
/// never sent the field.
pub type State = Vec<Option<Value>>;

/// Why a bunch was rejected as a whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionError {
    /// The body does not decode against the schema.
    Decode(DecodeError),
    /// A full bunch names an identity this client was not built with.
    UnknownSchema,
    /// A collection block does not apply onto the base.
    Collection(&'static str),
    /// The object table is full.
    TooManyObjects,
}

impl std::fmt::Display for SessionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SessionError::Decode(e) => write!(f, "bunch does not decode: {e}"),
            SessionError::UnknownSchema => f.write_str("unknown schema identity"),
            SessionError::Collection(why) => write!(f, "collection block: {why}"),
            SessionError::TooManyObjects => f.write_str("object table full"),
        }
    }
}

impl std::error::Error for SessionError {}

/// What a bunch did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Applied; it will be acknowledged.
    Applied {
        /// Object.
        object_id: u32,
        /// Its token.
        result_id: u64,
        /// Whether it was a full bunch.
        full: bool,
    },
    /// Already applied (acknowledged again).
    Duplicate,
    /// Its base is not held: nothing applied, nothing acknowledged.
    NeedsFull {
        /// Object.
        object_id: u32,
    },
}

/// Why a proposal could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProposeError {
    /// No full bunch of the object was applied yet (its schema is unknown).
    UnknownObject,
    /// The values do not fit the schema.
    Encode(citadel_wire::EncodeError),
}

impl std::fmt::Display for ProposeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProposeError::UnknownObject => f.write_str("object not held yet"),
            ProposeError::Encode(e) => write!(f, "proposal does not encode: {e}"),
        }
    }
}

impl std::error::Error for ProposeError {}

/// One entry of a received kind-15 table, checked locally.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchemaCheck {
    /// Server class id.
    pub class_id: u32,
    /// Whether this client was built with that identity.
    pub known: bool,
}

/// The applied states of one object, ascending by token. A handful at a
/// time (the acked base plus what is in flight), so a sorted inline vector:
/// no allocation or tree node per applied bunch.
#[derive(Default)]
struct States(SmallVec<[(u64, Arc<State>); 4]>);

impl States {
    fn get(&self, token: u64) -> Option<&Arc<State>> {
        let i = self.0.binary_search_by_key(&token, |e| e.0).ok()?;
        self.0.get(i).map(|e| &e.1)
    }

    fn contains(&self, token: u64) -> bool {
        self.get(token).is_some()
    }

    fn insert(&mut self, token: u64, state: Arc<State>) {
        match self.0.binary_search_by_key(&token, |e| e.0) {
            Ok(i) => {
                if let Some(e) = self.0.get_mut(i) {
                    e.1 = state;
                }
            }
            Err(i) => self.0.insert(i, (token, state)),
        }
    }

    /// Drops every state older than `token`.
    fn keep_from(&mut self, token: u64) {
        let older = self.0.partition_point(|e| e.0 < token);
        self.0.drain(..older);
    }

    /// Drops the oldest states beyond `cap`.
    fn trim(&mut self, cap: usize) {
        let over = self.0.len().saturating_sub(cap);
        self.0.drain(..over);
    }

    fn newest(&self) -> Option<&(u64, Arc<State>)> {
        self.0.last()
    }
}

struct Held {
    schema: Arc<ClassSchema>,
    states: States,
    ack: AckWindow,
    next_proposal: u64,
    bound: bool,
}

/// The client session.
pub struct NetworkPeerSession {
    limits: SessionLimits,
    schemas: BTreeMap<([u8; SCHEMA_HASH_BYTES], u32), Arc<ClassSchema>>,
    objects: BTreeMap<u32, Held>,
    ack_dirty: BTreeSet<u32>,
}

impl Default for NetworkPeerSession {
    fn default() -> Self {
        Self::new(SessionLimits::default())
    }
}

impl NetworkPeerSession {
    /// An empty session.
    pub fn new(limits: SessionLimits) -> Self {
        NetworkPeerSession {
            limits,
            schemas: BTreeMap::new(),
            objects: BTreeMap::new(),
            ack_dirty: BTreeSet::new(),
        }
    }

    /// Registers a schema this client was compiled with.
    pub fn register(&mut self, schema: ClassSchema) {
        self.schemas.insert(
            (*schema.schema_hash(), schema.layout_version()),
            Arc::new(schema),
        );
    }

    /// Applies one kind-13 body.
    pub fn handle_bunch(&mut self, body: &[u8]) -> Result<Outcome, SessionError> {
        let BunchHeader {
            object_id,
            result_id,
            base,
        } = BunchHeader::peek(body).map_err(SessionError::Decode)?;
        let (schema, base_state) = match base {
            HeaderBase::Full {
                schema_hash,
                layout_version,
            } => {
                let schema = self
                    .schemas
                    .get(&(schema_hash, layout_version))
                    .cloned()
                    .ok_or(SessionError::UnknownSchema)?;
                (schema, None)
            }
            HeaderBase::Delta(base_id) => {
                let Some(held) = self.objects.get(&object_id) else {
                    return Ok(Outcome::NeedsFull { object_id });
                };
                let Some(base) = held.states.get(base_id) else {
                    if held.states.contains(result_id) {
                        return Ok(Outcome::Duplicate);
                    }
                    return Ok(Outcome::NeedsFull { object_id });
                };
                (held.schema.clone(), Some((base_id, base.clone())))
            }
        };
        if let Some(held) = self.objects.get(&object_id)
            && held.states.contains(result_id)
            && Arc::ptr_eq(&held.schema, &schema)
        {
            self.ack_dirty.insert(object_id);
            return Ok(Outcome::Duplicate);
        }
        let bunch = DeltaBunch::decode(body, &schema).map_err(SessionError::Decode)?;
        let full = bunch.base == BunchBase::Full;
        let mut state: State = match &base_state {
            Some((_, s)) => (**s).clone(),
            None => vec![None; schema.fields().len()],
        };
        for (f, v) in bunch.values {
            let i = usize::from(f);
            state[i] = Some(match (v, &schema.fields()[i]) {
                (FieldValue::Collection(delta), FieldCodec::Collection { max_items, .. }) => {
                    let empty = Items::new();
                    let base = match &state[i] {
                        Some(Value::Collection(items)) => &**items,
                        _ => &empty,
                    };
                    let items = apply_collection(base, &delta, *max_items)
                        .map_err(SessionError::Collection)?;
                    Value::Collection(Arc::new(items))
                }
                (v, _) => Value::Plain(v),
            });
        }
        let replace = full
            && self
                .objects
                .get(&object_id)
                .is_some_and(|h| !Arc::ptr_eq(&h.schema, &schema));
        if replace {
            self.objects.remove(&object_id);
        }
        if !self.objects.contains_key(&object_id) {
            if self.objects.len() >= self.limits.max_objects {
                return Err(SessionError::TooManyObjects);
            }
            self.objects.insert(
                object_id,
                Held {
                    schema,
                    states: States::default(),
                    ack: AckWindow::new(),
                    next_proposal: 1,
                    bound: false,
                },
            );
        }
        let cap = self.limits.max_states_per_object.max(1);
        if let Some(held) = self.objects.get_mut(&object_id) {
            held.states.insert(result_id, Arc::new(state));
            if let Some((base_id, _)) = base_state {
                // The server never names a base older than one it used.
                held.states.keep_from(base_id);
            }
            held.states.trim(cap);
            held.ack.ack(result_id);
        }
        self.ack_dirty.insert(object_id);
        Ok(Outcome::Applied {
            object_id,
            result_id,
            full,
        })
    }

    /// The kind-14 body acknowledging everything applied since the last
    /// call (at most 8 192 entries per body; call again for the rest).
    pub fn poll_ack(&mut self) -> Option<Vec<u8>> {
        if self.ack_dirty.is_empty() {
            return None;
        }
        let mut ack = RepAck::default();
        while ack.entries.len() < MAX_TABLE_ENTRIES {
            let Some(id) = self.ack_dirty.pop_first() else {
                break;
            };
            if let Some(h) = self.objects.get(&id) {
                ack.entries.push(RepAckEntry {
                    object_id: id,
                    acked_result_id: h.ack.latest(),
                    history: h.ack.history(),
                });
            }
        }
        let mut body = Vec::new();
        ack.encode_into(&mut body);
        Some(body)
    }

    /// Checks a kind-15 table against the registered identities.
    pub fn handle_schema_table(&self, body: &[u8]) -> Result<Vec<SchemaCheck>, DecodeError> {
        let table = RepSchema::decode(body)?;
        Ok(table
            .entries
            .iter()
            .map(|e| SchemaCheck {
                class_id: e.class_id,
                known: self
                    .schemas
                    .contains_key(&(e.schema_hash, e.layout_version)),
            })
            .collect())
    }

    /// The newest applied state of an object.
    pub fn state(&self, object_id: u32) -> Option<&State> {
        self.objects
            .get(&object_id)
            .and_then(|h| h.states.newest())
            .map(|(_, s)| &**s)
    }

    /// The newest applied token of an object.
    pub fn latest_result(&self, object_id: u32) -> Option<u64> {
        self.objects
            .get(&object_id)
            .and_then(|h| h.states.newest())
            .map(|(t, _)| *t)
    }

    /// Objects held.
    pub fn objects(&self) -> impl Iterator<Item = u32> + '_ {
        self.objects.keys().copied()
    }

    /// Drops an object (the game signalled its removal).
    pub fn forget(&mut self, object_id: u32) {
        self.objects.remove(&object_id);
        self.ack_dirty.remove(&object_id);
    }

    /// Builds a proposal of ClientOwned fields: a full bunch first (and
    /// after [`NetworkPeerSession::rebind`]), deltas after it.
    pub fn propose(
        &mut self,
        object_id: u32,
        values: &[(u16, FieldValue)],
    ) -> Result<Vec<u8>, ProposeError> {
        let held = self
            .objects
            .get_mut(&object_id)
            .ok_or(ProposeError::UnknownObject)?;
        let mut values = values.to_vec();
        values.sort_by_key(|(f, _)| *f);
        values.dedup_by_key(|(f, _)| *f);
        let result_id = held.next_proposal;
        let base = if held.bound {
            BunchBase::Delta(result_id - 1)
        } else {
            BunchBase::Full
        };
        let body = DeltaBunch {
            object_id,
            result_id,
            base,
            values,
        }
        .encode(&held.schema)
        .map_err(ProposeError::Encode)?;
        held.next_proposal += 1;
        held.bound = true;
        Ok(body)
    }

    /// Makes the next proposal of `object_id` a full bunch (after an owner
    /// change or a match move the server dropped the binding).
    pub fn rebind(&mut self, object_id: u32) {
        if let Some(h) = self.objects.get_mut(&object_id) {
            h.bound = false;
        }
    }
}
