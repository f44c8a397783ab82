//! The server authority: registered classes, objects in matches, connected
//! receivers, and the server → client state flow of §6.2.
//!
//! Per (object, receiver) pair: the last acked state (token + shared
//! snapshot) and the pending sends keyed by `result_id` (tokens from the one
//! global allocator). A pair with no acked base gets a full bunch; later
//! sends are the cumulative delta against the acked state. Reaching the
//! pending cap, a collection delta over the collection cap, or the oldest
//! pending send outliving the ack timeout re-baselines the pair (acked and
//! pending dropped, full bunch). Acks advance a pair only to an outstanding,
//! strictly newer token. Relevance comes from the grid (`interest`);
//! leaving it drops the pair.
//!
//! Full bunches are paced (`pacing`): a receiver is sent at most
//! `bootstrap_per_tick` of them per tick (bootstrap, relevance entry and
//! every re-baseline alike), its own objects and the nearest first; the
//! others wait for later ticks with no delta meanwhile, and their full is
//! built from the state at the tick it goes.
//!
//! Fan-out encodes once: within a tick, the receivers of an object whose
//! pairs have the same acked base token, visibility (owner or peer) and
//! layout version need the same bunch, so it is planned, encoded and
//! framed once and its frame shared (with output packing on, small frames
//! are copied into each receiver's burst instead; see `out`). Tokens name
//! result states, not bunches: every pair that reaches an object revision
//! (with the same visibility, layout version and full-or-delta) gets that
//! revision's one token, whatever base its bunch was encoded against. So
//! receivers whose acks came at different times share a base again as
//! soon as they ack the same revision, and the number of distinct
//! bunches per object stays small instead of growing with every late ack.
//! Tokens are never minted twice;
//! every receiver gets strictly increasing tokens per object (a cached
//! bunch or token is reused for a pair only if it is newer than the pair's
//! last token, and both live one tick). With `shared_quantized_state` the values
//! section of each (object revision, base revision, visibility, version) is
//! encoded once per tick and spliced after each receiver's own header
//! (`encode`); the bytes equal the default path's.
//!
//! What it is not: IO, clocks or Lua (the node drives it with `now_ms`), or
//! the proposal pipeline (`proposal`). Call order: `register_class`,
//! `connect`, `spawn`/`set`/… (trusted), `handle_ack`/`handle_proposal`
//! (untrusted input), `tick(now_ms)`, then `poll_output` until `None`
//! (or `tick_draining`, which drains after each receiver).

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use bytes::Bytes;
use citadel_wire::ack::AckWindow;
use citadel_wire::baseline::TokenAllocator;
use citadel_wire::encode_framed_parts;
use citadel_wire::netpeer::{BunchBase, FieldValue, RepAck, RepSchema, RepSchemaEntry};
use citadel_wire::protocol::{KIND_REP_DELTA, KIND_REP_SCHEMA};

use crate::class::{Class, ClassError, ClassSpec};
use crate::encode::{
    Planned, SharedValues, Snapshot, assemble, encode_direct, plan, values_section,
};
use crate::interest::{Grid, dist2, normalized};
use crate::limits::{AuthorityConfig, Bucket};
use crate::out::{FRAME_HEADER, OutQueue, Outgoing};
use crate::pacing::{Waiting, take_first};
use crate::pairs::{PairMut, Pairs};
use crate::revisions::Revisions;
use crate::value::{Items, Value, ValueError, default_value, quantize, quantize_items};

/// A multiply-rotate hasher for the hot `u32`-keyed maps: fixed (so
/// iteration order, and thus output order, is reproducible) and cheap.
/// Keys are server-chosen object ids, never attacker-chosen.
#[derive(Default)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u16(&mut self, v: u16) {
        self.write_u64(u64::from(v));
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

pub(crate) type IdMap<V> = HashMap<u32, V, BuildHasherDefault<IdHasher>>;

/// A connection id chosen by the driver.
pub type ConnId = u64;

/// Frames `body` as an envelope of `kind`.
fn framed(kind: u16, body: &[u8]) -> Bytes {
    encode_framed_parts(kind, &[body])
}

/// Why a trusted call was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiError {
    /// No such class.
    UnknownClass,
    /// No such object.
    UnknownObject,
    /// No such field in the class.
    UnknownField,
    /// No such connection.
    UnknownConnection,
    /// The value does not fit the field.
    Value(ValueError),
    /// Object ids are exhausted.
    IdsExhausted,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = match self {
            ApiError::UnknownClass => "unknown class",
            ApiError::UnknownObject => "unknown object",
            ApiError::UnknownField => "unknown field",
            ApiError::UnknownConnection => "unknown connection",
            ApiError::Value(ValueError::Type) => "value type does not match the field",
            ApiError::Value(ValueError::Domain) => "value outside the field's domain",
            ApiError::IdsExhausted => "object ids exhausted",
        };
        f.write_str(s)
    }
}

impl std::error::Error for ApiError {}

/// Counters for `/metrics`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    /// Full bunches sent (every cause).
    pub fulls: u64,
    /// Fulls forced by the pending cap.
    pub full_pending_cap: u64,
    /// Fulls forced by the collection cap.
    pub full_collection_cap: u64,
    /// Fulls forced by the ack timeout.
    pub full_ack_timeout: u64,
    /// Correction fulls sent to vetoed owners.
    pub full_correction: u64,
    /// Delta bunches sent.
    pub deltas: u64,
    /// Kind-13 body bytes sent.
    pub bunch_bytes: u64,
    /// Ack entries that advanced a baseline.
    pub acks_advanced: u64,
    /// Ack entries ignored (unknown pair, stale, not outstanding).
    pub acks_ignored: u64,
    /// Kind-14 bodies that failed to decode.
    pub acks_malformed: u64,
    /// Proposals applied (possibly partly vetoed).
    pub proposals_applied: u64,
    /// Proposal rejections per reason (index = `Rejection as usize`).
    pub rejected: [u64; crate::proposal::Rejection::ALL.len()],
    /// Rebroadcasts cut short by the proposer's byte budget.
    pub rebroadcast_budget_stops: u64,
    /// Sends skipped because the token space is exhausted.
    pub tokens_exhausted: u64,
    /// Tokens minted: one per result state (object revision, visibility,
    /// layout version, full or delta), shared by every receiver reaching
    /// it; re-minted only for a pair already sent a newer token.
    pub tokens_issued: u64,
    /// Pairs created by relevance entry.
    pub relevance_enter: u64,
    /// Pairs dropped by relevance exit.
    pub relevance_exit: u64,
    /// Full bunches deferred to a later tick by `bootstrap_per_tick` (one
    /// per pair and tick it waited).
    pub full_deferred: u64,
    /// Gauge: pairs whose full bunch the last tick deferred (0 once every
    /// receiver is bootstrapped).
    pub fulls_waiting: u64,
    /// Sends held back by a receiver's lane room (`set_lane_room`), one per
    /// pair and tick it waited.
    pub lane_deferred: u64,
}

/// A plan and its shared values section (`shared_quantized_state`), per
/// (base revision, visibility, layout version) of one object revision.
pub(crate) struct ValuesEntry {
    base_rev: u64,
    owner: bool,
    version: usize,
    planned: Planned,
    shared: Option<SharedValues>,
}

/// What identifies one encoded bunch of an object revision: receivers with
/// the same key get the same body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BunchKey {
    /// The acked base token (`None`: a full bunch).
    base: Option<u64>,
    owner: bool,
    version: usize,
}

pub(crate) enum Bunch {
    /// No visible field differs from the base.
    Nothing,
    /// One encoded bunch, framed, and the token it carries.
    Body {
        token: u64,
        full: bool,
        /// A full forced by the collection cap.
        forced: bool,
        frame: Bytes,
    },
}

pub(crate) struct BunchEntry {
    key: BunchKey,
    bunch: Bunch,
}

/// The token naming one result state of an object revision: what a
/// receiver holds after applying it, given its visibility, layout version
/// and whether the bunch was full (a full also refreshes InitialOnly
/// fields). Every pair that reaches that state gets this token, whatever
/// base its bunch was encoded against.
pub(crate) struct ResultEntry {
    owner: bool,
    version: usize,
    full: bool,
    token: u64,
}

impl BunchEntry {
    /// Whether a pair last sent `last_token` may be sent this entry.
    fn usable_after(&self, last_token: u64) -> bool {
        match self.bunch {
            Bunch::Nothing => true,
            Bunch::Body { token, .. } => token > last_token,
        }
    }
}

pub(crate) struct Object {
    pub class: u32,
    pub match_id: u32,
    pub owner: Option<ConnId>,
    pub owner_epoch: u32,
    pub persistent: bool,
    pub cur: Arc<Snapshot>,
    pub published: bool,
    pub position: [f32; 3],
    /// Plans and values sections of the current revision (shared path).
    pub values: Vec<ValuesEntry>,
    /// Bunches encoded this tick for the current revision.
    pub bunches: Vec<BunchEntry>,
    /// Result tokens of the current revision minted this tick.
    pub results: Vec<ResultEntry>,
}

impl Object {
    fn write(&mut self) -> &mut Snapshot {
        if self.published {
            let snap = Arc::make_mut(&mut self.cur);
            snap.rev += 1;
            self.published = false;
            self.values.clear();
            self.bunches.clear();
            self.results.clear();
            snap
        } else {
            Arc::make_mut(&mut self.cur)
        }
    }
}

pub(crate) struct Binding {
    pub version: usize,
    pub last_result: u64,
    pub owner_epoch: u32,
}

pub(crate) struct Buckets {
    pub bunches: Bucket,
    pub bytes: Bucket,
    pub fields: Bucket,
}

pub(crate) struct Conn {
    pub match_id: u32,
    pub guest: bool,
    pub viewer: Option<[f32; 3]>,
    pub pairs: Pairs,
    /// Membership epoch last seen by a viewer-less relevance pass.
    pub seen_membership: u64,
    pub bindings: BTreeMap<u32, Binding>,
    pub cooldowns: BTreeMap<(u32, u16), u64>,
    /// Layout version index per class this client was built with.
    pub class_versions: BTreeMap<u32, usize>,
    pub buckets: Buckets,
    /// Full bunches this receiver may still be sent until the next tick.
    pub fulls_left: usize,
    /// Bunches the next tick may send this receiver at most (`None`: no
    /// bound); set by the driver from its outbound lane, consumed by a tick.
    pub lane_room: Option<usize>,
    /// Where the next tick starts visiting pairs (round robin when the lane
    /// room runs out).
    pub cursor: usize,
}

/// Why a pair is sent now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cause {
    Normal,
    Timeout,
    Correction,
}

/// The NetworkPeer authority of one node.
pub struct Authority {
    pub(crate) config: AuthorityConfig,
    pub(crate) classes: BTreeMap<u32, Class>,
    pub(crate) objects: IdMap<Object>,
    /// Bumped whenever which objects a viewer-less connection sees may
    /// change (spawn, despawn, moves, owners).
    membership: u64,
    pub(crate) conns: BTreeMap<ConnId, Conn>,
    pub(crate) tokens: TokenAllocator,
    next_object: Option<u32>,
    pub(crate) out: OutQueue,
    pub(crate) counters: Counters,
    /// Scratch for `tick`: the objects' revisions, sorted (kept between
    /// ticks for its allocation only).
    revisions: Revisions,
    /// Scratch for `handle_ack` (kept for its allocation only).
    ack_scratch: Vec<(u32, AckWindow)>,
}

/// What `send_pair` needs besides the pair and object.
pub(crate) struct SendCtx<'a> {
    pub config: &'a AuthorityConfig,
    pub tokens: &'a mut TokenAllocator,
    pub counters: &'a mut Counters,
    pub out: &'a mut OutQueue,
}

/// The parts of an [`Authority`] that sending a pair borrows at once.
pub(crate) struct SendParts<'a> {
    pub classes: &'a BTreeMap<u32, Class>,
    pub objects: &'a mut IdMap<Object>,
    pub conns: &'a mut BTreeMap<ConnId, Conn>,
    pub ctx: SendCtx<'a>,
}

impl Authority {
    /// Splits the borrows that sending a pair needs.
    pub(crate) fn send_parts(&mut self) -> SendParts<'_> {
        SendParts {
            classes: &self.classes,
            objects: &mut self.objects,
            conns: &mut self.conns,
            ctx: SendCtx {
                config: &self.config,
                tokens: &mut self.tokens,
                counters: &mut self.counters,
                out: &mut self.out,
            },
        }
    }

    /// An authority; `config` must validate.
    pub fn new(config: AuthorityConfig) -> Result<Self, &'static str> {
        config.validate()?;
        Ok(Authority {
            config,
            classes: BTreeMap::new(),
            objects: IdMap::default(),
            membership: 0,
            conns: BTreeMap::new(),
            tokens: TokenAllocator::new(),
            next_object: Some(1),
            out: OutQueue::default(),
            counters: Counters::default(),
            revisions: Revisions::default(),
            ack_scratch: Vec::new(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &AuthorityConfig {
        &self.config
    }
    /// Counters so far.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    // ---- trusted API ------------------------------------------------------

    /// Registers a class (trusted code only).
    pub fn register_class(&mut self, spec: ClassSpec) -> Result<(), ClassError> {
        if self.classes.contains_key(&spec.class_id) {
            return Err(ClassError::Duplicate);
        }
        let class = Class::compile(spec)?;
        self.classes.insert(class.id(), class);
        Ok(())
    }

    /// A registered class.
    pub fn class(&self, class_id: u32) -> Option<&Class> {
        self.classes.get(&class_id)
    }

    /// Spawns an object with default values in `match_id`.
    pub fn spawn(
        &mut self,
        class_id: u32,
        match_id: u32,
        owner: Option<ConnId>,
        persistent: bool,
    ) -> Result<u32, ApiError> {
        let class = self.classes.get(&class_id).ok_or(ApiError::UnknownClass)?;
        let id = self.next_object.ok_or(ApiError::IdsExhausted)?;
        self.next_object = id.checked_add(1);
        self.membership += 1;
        let values = class
            .fields()
            .iter()
            .map(|f| default_value(&f.codec))
            .collect();
        self.objects.insert(
            id,
            Object {
                class: class_id,
                match_id,
                owner,
                owner_epoch: u32::from(owner.is_some()),
                persistent,
                cur: Arc::new(Snapshot { rev: 1, values }),
                published: false,
                position: [0.0; 3],
                values: Vec::new(),
                bunches: Vec::new(),
                results: Vec::new(),
            },
        );
        Ok(id)
    }

    /// Removes an object and every baseline of it. Kinds 13-15 carry no
    /// removal: the game tells clients through its own messages.
    pub fn despawn(&mut self, object_id: u32) -> bool {
        if self.objects.remove(&object_id).is_none() {
            return false;
        }
        self.membership += 1;
        for conn in self.conns.values_mut() {
            conn.pairs.remove(object_id);
            conn.bindings.remove(&object_id);
            conn.cooldowns.retain(|(o, _), _| *o != object_id);
        }
        true
    }

    fn field_codec(
        &self,
        object_id: u32,
        field: u16,
    ) -> Result<&citadel_wire::netpeer::FieldCodec, ApiError> {
        let obj = self
            .objects
            .get(&object_id)
            .ok_or(ApiError::UnknownObject)?;
        let class = self.classes.get(&obj.class).ok_or(ApiError::UnknownClass)?;
        class
            .fields()
            .get(usize::from(field))
            .map(|f| &f.codec)
            .ok_or(ApiError::UnknownField)
    }

    /// Writes a plain field (quantized to what receivers reconstruct).
    pub fn set(&mut self, object_id: u32, field: u16, value: &FieldValue) -> Result<(), ApiError> {
        let v = quantize(self.field_codec(object_id, field)?, value).map_err(ApiError::Value)?;
        self.put(object_id, field, v)
    }

    /// Replaces a collection field's items.
    pub fn set_items(&mut self, object_id: u32, field: u16, items: Items) -> Result<(), ApiError> {
        let v =
            quantize_items(self.field_codec(object_id, field)?, items).map_err(ApiError::Value)?;
        self.put(object_id, field, v)
    }

    pub(crate) fn put(&mut self, object_id: u32, field: u16, v: Value) -> Result<(), ApiError> {
        let obj = self
            .objects
            .get_mut(&object_id)
            .ok_or(ApiError::UnknownObject)?;
        if obj.cur.values[usize::from(field)].same(&v) {
            return Ok(());
        }
        obj.write().values[usize::from(field)] = v;
        Ok(())
    }

    /// The object's current values (field order).
    pub fn values(&self, object_id: u32) -> Option<&[Value]> {
        self.objects.get(&object_id).map(|o| &o.cur.values[..])
    }

    /// The object's class id.
    pub fn class_of(&self, object_id: u32) -> Option<u32> {
        self.objects.get(&object_id).map(|o| o.class)
    }

    /// The recorded owner.
    pub fn owner_of(&self, object_id: u32) -> Option<ConnId> {
        self.objects.get(&object_id).and_then(|o| o.owner)
    }

    /// Assigns (or clears) the owner; bumps the owner epoch, drops the old
    /// owner's proposal binding and re-baselines both owners' pairs (their
    /// visible field sets change).
    pub fn set_owner(&mut self, object_id: u32, owner: Option<ConnId>) -> Result<(), ApiError> {
        let obj = self
            .objects
            .get_mut(&object_id)
            .ok_or(ApiError::UnknownObject)?;
        let old = obj.owner;
        obj.owner = owner;
        self.membership += 1;
        obj.owner_epoch = obj.owner_epoch.wrapping_add(1);
        for c in [old, owner].into_iter().flatten() {
            if let Some(conn) = self.conns.get_mut(&c) {
                conn.bindings.remove(&object_id);
                if let Some(mut p) = conn.pairs.get_mut(object_id) {
                    p.reset();
                }
            }
        }
        Ok(())
    }

    /// Sets the interest position of an object whose class has no position
    /// field.
    pub fn set_position(&mut self, object_id: u32, position: [f32; 3]) -> Result<(), ApiError> {
        let obj = self
            .objects
            .get_mut(&object_id)
            .ok_or(ApiError::UnknownObject)?;
        obj.position = position;
        Ok(())
    }

    /// Moves an object to another match (its pairs leave with the next tick).
    pub fn move_object(&mut self, object_id: u32, match_id: u32) -> Result<(), ApiError> {
        let obj = self
            .objects
            .get_mut(&object_id)
            .ok_or(ApiError::UnknownObject)?;
        obj.match_id = match_id;
        self.membership += 1;
        Ok(())
    }

    /// Admits a connection into match 0; its first tick bootstraps full
    /// baselines of everything relevant.
    pub fn connect(&mut self, conn: ConnId, guest: bool, now_ms: u64) {
        let l = &self.config.limits;
        self.conns.insert(
            conn,
            Conn {
                match_id: 0,
                guest,
                viewer: None,
                pairs: Pairs::default(),
                seen_membership: u64::MAX,
                bindings: BTreeMap::new(),
                cooldowns: BTreeMap::new(),
                class_versions: BTreeMap::new(),
                buckets: Buckets {
                    bunches: Bucket::new(l.bunches_per_sec, now_ms),
                    bytes: Bucket::new(l.bytes_per_sec, now_ms),
                    fields: Bucket::new(l.fields_per_sec, now_ms),
                },
                fulls_left: self.config.bootstrap_per_tick,
                lane_room: None,
                cursor: 0,
            },
        );
    }

    /// Connected receivers, in no particular order.
    pub fn conn_ids(&self) -> impl Iterator<Item = ConnId> + '_ {
        self.conns.keys().copied()
    }

    /// Backpressure from the transport: the next tick sends `conn` at most
    /// `room` bunches (`None`: unbounded). Pairs over the room keep their
    /// state and wait (a later delta is cumulative against the acked base,
    /// so nothing is lost); the next tick starts where this one ran out of
    /// room (round robin), so no object starves.
    /// Timeouts of waiting pairs wait too, so a backed-up receiver is not
    /// re-baselined into sending more. Applies to one tick only.
    pub fn set_lane_room(&mut self, conn: ConnId, room: Option<usize>) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.lane_room = room;
        }
    }

    /// Forgets a connection (its objects keep their recorded owner until
    /// trusted code reassigns them).
    pub fn disconnect(&mut self, conn: ConnId) -> bool {
        self.conns.remove(&conn).is_some()
    }

    /// Moves a connection to another match: every baseline and binding is
    /// dropped, the new match's objects arrive as full bunches.
    pub fn move_connection(&mut self, conn: ConnId, match_id: u32) -> Result<(), ApiError> {
        let c = self
            .conns
            .get_mut(&conn)
            .ok_or(ApiError::UnknownConnection)?;
        c.match_id = match_id;
        c.seen_membership = u64::MAX;
        c.pairs.clear();
        c.bindings.clear();
        c.cooldowns.clear();
        Ok(())
    }

    /// Declares the layout version of `class_id` a connection's client was
    /// built with (compatible classes, §6.4): its bunches of that class use
    /// that version's exact schema. A full proposal at another accepted
    /// version rebinds it.
    pub fn set_client_version(
        &mut self,
        conn: ConnId,
        class_id: u32,
        layout_version: u32,
    ) -> Result<(), ApiError> {
        let idx = self
            .classes
            .get(&class_id)
            .ok_or(ApiError::UnknownClass)?
            .version_index(layout_version)
            .ok_or(ApiError::Value(ValueError::Domain))?;
        let c = self
            .conns
            .get_mut(&conn)
            .ok_or(ApiError::UnknownConnection)?;
        c.class_versions.insert(class_id, idx);
        let objects = &self.objects;
        c.pairs.for_each_mut(|mut pair| {
            if objects
                .get(&pair.hot().object_id())
                .is_some_and(|o| o.class == class_id)
            {
                pair.rebind_version(idx);
            }
        });
        Ok(())
    }

    /// Sets the viewer position of a connection (`None`: no interest
    /// filter, the whole match is relevant).
    pub fn set_viewer(&mut self, conn: ConnId, viewer: Option<[f32; 3]>) -> Result<(), ApiError> {
        let c = self
            .conns
            .get_mut(&conn)
            .ok_or(ApiError::UnknownConnection)?;
        c.viewer = viewer;
        c.seen_membership = u64::MAX;
        Ok(())
    }

    /// The objects a connection currently holds a baseline pair for.
    pub fn relevant(&self, conn: ConnId) -> Vec<u32> {
        self.conns
            .get(&conn)
            .map(|c| {
                // Ascending already (the pairs' order).
                c.pairs.ids().collect()
            })
            .unwrap_or_default()
    }

    /// The optional kind-15 table of every registered class (current
    /// versions). The node does not send it by default (the reference
    /// server never does); full bunches carry the identity.
    pub fn schema_table(&self) -> Bytes {
        let table = RepSchema {
            entries: self
                .classes
                .values()
                .map(|c| RepSchemaEntry {
                    class_id: c.id(),
                    schema_hash: *c.current().schema_hash(),
                    layout_version: c.current().layout_version(),
                })
                .collect(),
        };
        let mut body = Vec::new();
        table.encode_into(&mut body);
        Bytes::from(body)
    }

    /// Queues the schema table for a connection (kind 15).
    pub fn send_schema_table(&mut self, conn: ConnId) {
        let frame = framed(KIND_REP_SCHEMA, &self.schema_table());
        self.out.push(conn, KIND_REP_SCHEMA, &frame);
    }

    // ---- untrusted input: acks ---------------------------------------------

    /// Handles a kind-14 body: each entry advances its pair only to an
    /// outstanding, strictly newer token. Returns the entries that advanced.
    pub fn handle_ack(&mut self, conn: ConnId, body: &[u8]) -> usize {
        let Some(c) = self.conns.get_mut(&conn) else {
            return 0;
        };
        let Ok(ack) = RepAck::decode(body) else {
            self.counters.acks_malformed += 1;
            return 0;
        };
        let entries = ack.entries.iter().map(|e| {
            let window = AckWindow::from_wire(e.acked_result_id, e.history).ok();
            (e.object_id, window)
        });
        let (advanced, ignored) = c.pairs.ack_all(entries, &mut self.ack_scratch);
        self.counters.acks_ignored += ignored as u64;
        self.counters.acks_advanced += advanced as u64;
        advanced
    }

    // ---- the tick ----------------------------------------------------------

    /// Updates relevance and sends every pair whose object changed since
    /// its last send, or whose oldest pending send timed out.
    pub fn tick(&mut self, now_ms: u64) {
        self.tick_draining(now_ms, |_| {});
    }

    /// [`Authority::tick`], calling `drain` after each receiver's bunches
    /// are queued. A driver that empties the queue there
    /// ([`Authority::poll_output`]) hands each receiver's bunches on while
    /// they are still in the cache, and the queue never holds more than
    /// one receiver's share of a tick (at 200 receivers of 600 changed
    /// objects, 600 entries instead of 120 000).
    pub fn tick_draining(&mut self, now_ms: u64, mut drain: impl FnMut(&mut Self)) {
        let (cell, inner, outer) = normalized(&self.config.interest);
        let mut grids: BTreeMap<u32, Grid> = BTreeMap::new();
        {
            let mut by_match: BTreeMap<u32, Vec<(u32, [f32; 3])>> = BTreeMap::new();
            for (&id, o) in &self.objects {
                by_match
                    .entry(o.match_id)
                    .or_default()
                    .push((id, self.position_of(o)));
            }
            for (m, list) in by_match {
                grids.insert(m, Grid::build(cell, list.into_iter()));
            }
        }
        // Bunches and result tokens live for one tick, so every token a
        // pair gets this tick is newer than any it got before (re-entry
        // included: a dropped pair forgets its last token).
        for o in self.objects.values_mut() {
            o.bunches.clear();
            o.results.clear();
        }
        // No object is written during a tick, so one sorted copy of the
        // revisions serves every receiver's scan.
        let mut revisions = std::mem::take(&mut self.revisions);
        revisions.rebuild(self.objects.iter().map(|(&id, o)| (id, o.cur.rev)));
        let conn_ids: Vec<ConnId> = self.conns.keys().copied().collect();
        let mut candidates = Vec::new();
        let mut candidates_to_send = Vec::new();
        let mut waiting = 0;
        for conn_id in conn_ids {
            self.update_relevance(conn_id, &grids, inner, outer, &mut candidates);
            waiting += self.send_conn(conn_id, now_ms, &revisions, &mut candidates_to_send);
            drain(self);
        }
        self.revisions = revisions;
        self.counters.fulls_waiting = waiting;
    }

    fn position_of(&self, o: &Object) -> [f32; 3] {
        position(&self.classes, o)
    }

    fn update_relevance(
        &mut self,
        conn_id: ConnId,
        grids: &BTreeMap<u32, Grid>,
        inner: f32,
        outer: f32,
        candidates: &mut Vec<u32>,
    ) {
        let Some(conn) = self.conns.get(&conn_id) else {
            return;
        };
        let (match_id, viewer) = (conn.match_id, conn.viewer);
        if viewer.is_none() && conn.seen_membership == self.membership {
            return;
        }
        let mut exits = Vec::new();
        for id in conn.pairs.ids() {
            let keep = self.objects.get(&id).is_some_and(|o| {
                o.match_id == match_id
                    && (o.owner == Some(conn_id)
                        || viewer.is_none_or(|v| dist2(v, self.position_of(o)) <= outer * outer))
            });
            if !keep {
                exits.push(id);
            }
        }
        let mut enters = Vec::new();
        match viewer {
            None => enters.extend(
                self.objects
                    .iter()
                    .filter(|(id, o)| o.match_id == match_id && !conn.pairs.contains(**id))
                    .map(|(id, _)| *id),
            ),
            Some(v) => {
                if let Some(grid) = grids.get(&match_id) {
                    grid.candidates(v, candidates);
                    for &id in candidates.iter() {
                        if conn.pairs.contains(id) {
                            continue;
                        }
                        if let Some(o) = self.objects.get(&id)
                            && dist2(v, self.position_of(o)) <= inner * inner
                        {
                            enters.push(id);
                        }
                    }
                }
                enters.extend(
                    self.objects
                        .iter()
                        .filter(|(id, o)| {
                            o.match_id == match_id
                                && o.owner == Some(conn_id)
                                && !conn.pairs.contains(**id)
                        })
                        .map(|(id, _)| *id),
                );
            }
        }
        let Some(conn) = self.conns.get_mut(&conn_id) else {
            return;
        };
        conn.seen_membership = if viewer.is_none() {
            self.membership
        } else {
            u64::MAX
        };
        let enters: Vec<(u32, usize)> = enters
            .into_iter()
            .map(|id| {
                let class = self.objects.get(&id).map_or(0, |o| o.class);
                let version = conn
                    .bindings
                    .get(&id)
                    .map(|b| b.version)
                    .or_else(|| conn.class_versions.get(&class).copied())
                    .unwrap_or(0);
                (id, version)
            })
            .collect();
        self.counters.relevance_exit += exits.len() as u64;
        self.counters.relevance_enter += conn.pairs.apply(&exits, enters) as u64;
    }

    /// Sends one receiver's changed and timed-out pairs: deltas at once,
    /// full bunches within its per-tick budget (`pacing`), all of it within
    /// the lane room the driver set (`set_lane_room`). Returns the number of
    /// full bunches deferred.
    ///
    /// Three passes over the pairs: the scan decides which may send from
    /// each pair's hot summary and the object's revision alone (most have
    /// nothing to send); their cold state, which a send reads first and
    /// which usually misses the cache, is then touched in a loop of
    /// independent loads so the misses overlap; then they are sent, in the
    /// scan's order. `candidates` is scratch.
    fn send_conn(
        &mut self,
        conn_id: ConnId,
        now_ms: u64,
        revisions: &Revisions,
        candidates: &mut Vec<(u32, u64, bool)>,
    ) -> u64 {
        let SendParts {
            classes,
            objects,
            conns,
            mut ctx,
        } = self.send_parts();
        let Some(conn) = conns.get_mut(&conn_id) else {
            return 0;
        };
        let config = ctx.config;
        conn.fulls_left = config.bootstrap_per_tick;
        // Pairs are visited from the cursor on, wrapping around. When the
        // lane room runs out, the rest wait and the next tick starts at the
        // first that waited: round robin under steady congestion.
        let mut room = conn.lane_room.take().unwrap_or(usize::MAX);
        let len = conn.pairs.len();
        let start = conn.cursor.checked_rem(len).unwrap_or(0);
        let mut first_waiting = None;
        let mut waiting = Vec::new();
        let viewer = conn.viewer;
        let pairs = &mut conn.pairs;
        let fulls_left = &mut conn.fulls_left;
        // A send in flight since at or before this has timed out.
        let cutoff = now_ms.checked_sub(config.ack_timeout_ms);
        // Pass 1. Pairs are in ascending object id, and so is the table:
        // the cursor walks forward (and finds its place by binary search
        // once, where the scan wraps around).
        candidates.clear();
        let mut revs = revisions.cursor();
        for pos in (start..len).chain(0..start) {
            let Some(hot) = pairs.hot_at(pos).filter(|h| !h.is_dead()) else {
                continue;
            };
            let Some(rev) = revs.rev_of(hot.object_id()) else {
                continue;
            };
            let timed_out = cutoff.is_some_and(|c| hot.sent_at_or_before(c));
            if timed_out || (rev > hot.last_sent_rev() && !hot.awaiting_first_ack()) {
                // Positions fit u32 (see `Pairs::apply`).
                candidates.push((pos as u32, rev, timed_out));
            }
        }
        // Pass 2.
        pairs.touch_cold(candidates.iter().map(|&(pos, ..)| pos as usize));
        // Pass 3: the object, the rest of the pair and the class are read
        // only for a pair that may send.
        let mut visit = |pos: usize, rev: u64, timed_out: bool| {
            let Some(id) = pairs.hot_at(pos).map(|h| h.object_id()) else {
                return;
            };
            let cause = if timed_out {
                let Some(mut pair) = pairs.at_mut(pos) else {
                    return;
                };
                let in_sync = pair.acked().is_some_and(|(_, s)| s.rev == rev);
                if in_sync {
                    pair.clear_in_flight();
                    return;
                }
                Cause::Timeout
            } else {
                Cause::Normal
            };
            let Some(obj) = objects.get_mut(&id) else {
                return;
            };
            let (Some(class), Some(pair)) = (classes.get(&obj.class), pairs.at_mut(pos)) else {
                return;
            };
            if needs_full(config, &pair, cause) {
                waiting.push(Waiting {
                    object_id: id,
                    cause,
                    owned: obj.owner == Some(conn_id),
                    dist2: viewer.map_or(0.0, |v| dist2(v, position(classes, obj))),
                });
                return;
            }
            if room == 0 {
                ctx.counters.lane_deferred += 1;
                first_waiting.get_or_insert(pos);
                return;
            }
            room -= 1;
            send_pair(
                &mut ctx,
                class,
                obj,
                id,
                conn_id,
                (pair, &mut *fulls_left),
                now_ms,
                cause,
            );
        };
        for &(pos, rev, timed_out) in candidates.iter() {
            visit(pos as usize, rev, timed_out);
        }
        if let Some(pos) = first_waiting {
            conn.cursor = pos;
        }
        let paced = waiting.len().min(conn.fulls_left);
        let n = take_first(&mut waiting, paced.min(room));
        ctx.counters.lane_deferred += (paced - n) as u64;
        for w in waiting.iter().take(n) {
            let (Some(obj), Some(pair)) = (
                objects.get_mut(&w.object_id),
                conn.pairs.get_mut(w.object_id),
            ) else {
                continue;
            };
            let Some(class) = classes.get(&obj.class) else {
                continue;
            };
            send_pair(
                &mut ctx,
                class,
                obj,
                w.object_id,
                conn_id,
                (pair, &mut conn.fulls_left),
                now_ms,
                w.cause,
            );
        }
        ctx.counters.full_deferred += (waiting.len() - paced) as u64;
        (waiting.len() - n) as u64
    }

    /// Next addressed envelope (or packed burst of them), in queue order.
    pub fn poll_output(&mut self) -> Option<Outgoing> {
        self.out.pop()
    }

    /// Packs consecutive small envelopes for one receiver into one
    /// [`Outgoing`] of at most `max_bytes` (`None`, the default: one
    /// envelope each). See `out`.
    pub fn set_output_packing(&mut self, max_bytes: Option<usize>) {
        self.out.set_packing(max_bytes);
    }
}

/// Whether sending `pair` now for `cause` is a full bunch (known before
/// planning; a collection-cap full is only known after).
/// A pair whose full bunch is still in flight (no acked base yet) waits for
/// its ack (then a delta carries what changed meanwhile) or its ack
/// timeout (then a new full): another full per change while the first is
/// outstanding would only multiply fulls whenever acks are slow.
pub(crate) fn needs_full(config: &AuthorityConfig, pair: &PairMut<'_>, cause: Cause) -> bool {
    cause != Cause::Normal || pair.acked().is_none() || pair.in_flight() >= config.pending_cap
}

/// The interest position of an object: its class's position field, else
/// the position trusted code set.
fn position(classes: &BTreeMap<u32, Class>, o: &Object) -> [f32; 3] {
    let field = classes.get(&o.class).and_then(|c| c.spec().position_field);
    match field.and_then(|f| o.cur.values.get(usize::from(f))) {
        Some(Value::Plain(FieldValue::Vector3(p))) => *p,
        _ => o.position,
    }
}

/// Sends one pair's bunch now; returns the body length (0 = nothing sent).
///
/// `receiver` is the pair and its receiver's full-bunch budget for this
/// tick: a full bunch (other than a correction, which answers a proposal at
/// once) is deferred when the budget is spent, and every full sent spends
/// one. A deferred pair is left needing a full (a collection-cap full
/// resets it), so the next tick picks it up.
///
/// The bunch comes from the object's per-tick bunch cache when another
/// receiver with the same acked base token, visibility and layout version
/// was already served: the same body (header, token and values) is shared
/// by reference. A cached token is reused for a pair only if it is newer
/// than every token that pair was sent, so each receiver still sees
/// strictly increasing `result_id`s per object.
#[allow(clippy::too_many_arguments)]
pub(crate) fn send_pair(
    ctx: &mut SendCtx<'_>,
    class: &Class,
    obj: &mut Object,
    object_id: u32,
    conn_id: ConnId,
    receiver: (PairMut<'_>, &mut usize),
    now_ms: u64,
    cause: Cause,
) -> usize {
    let (mut pair, fulls_left) = receiver;
    let paced = cause != Cause::Correction;
    if paced && *fulls_left == 0 && needs_full(ctx.config, &pair, cause) {
        ctx.counters.full_deferred += 1;
        return 0;
    }
    if cause != Cause::Normal || pair.in_flight() >= ctx.config.pending_cap {
        match cause {
            Cause::Timeout => ctx.counters.full_ack_timeout += 1,
            Cause::Correction => ctx.counters.full_correction += 1,
            Cause::Normal => ctx.counters.full_pending_cap += 1,
        }
        pair.reset();
    }
    let key = BunchKey {
        base: pair.acked().map(|(t, _)| *t),
        owner: obj.owner == Some(conn_id),
        version: pair.version().min(class.versions().len().saturating_sub(1)),
    };
    let found = obj.bunches.iter().position(|e| e.key == key);
    let idx = match found {
        Some(i)
            if obj
                .bunches
                .get(i)
                .is_some_and(|e| e.usable_after(pair.last_token())) =>
        {
            i
        }
        _ => {
            let Some(entry) = build_bunch(ctx, class, obj, object_id, key, &pair) else {
                return 0;
            };
            // A stale entry (its token not newer than this pair's last) is
            // replaced, so later receivers share the newer bunch.
            replace_or_push(&mut obj.bunches, found, entry)
        }
    };
    obj.published = true;
    let Some(entry) = obj.bunches.get(idx) else {
        return 0;
    };
    let (token, full, forced, frame) = match &entry.bunch {
        Bunch::Nothing => {
            // Nothing this receiver can see differs from its acked state.
            // With no send outstanding its acked token stands for the
            // current state. With one outstanding (a change reverted before
            // its ack) the receiver may end on that send's state, so the
            // pair is looked at again next tick: after the ack its base
            // differs and a delta goes, after the timeout a full.
            if pair.in_flight() == 0 {
                pair.mark_unchanged(&obj.cur);
            }
            return 0;
        }
        Bunch::Body {
            token,
            full,
            forced,
            frame,
        } => (*token, *full, *forced, frame),
    };
    if forced {
        ctx.counters.full_collection_cap += 1;
        pair.reset();
        if paced && *fulls_left == 0 {
            ctx.counters.full_deferred += 1;
            return 0;
        }
    }
    if full {
        ctx.counters.fulls += 1;
        *fulls_left = fulls_left.saturating_sub(1);
    } else {
        ctx.counters.deltas += 1;
    }
    let len = frame.len().saturating_sub(FRAME_HEADER);
    ctx.counters.bunch_bytes += len as u64;
    pair.record_send(token, obj.cur.clone(), now_ms);
    ctx.out.push(conn_id, KIND_REP_DELTA, frame);
    len
}

/// Plans, mints and encodes the bunch of `key` for `obj`'s current state
/// (`pair` supplies the acked base). `None`: the token space is exhausted
/// or the values do not encode (nothing is sent, nothing cached).
fn build_bunch(
    ctx: &mut SendCtx<'_>,
    class: &Class,
    obj: &mut Object,
    object_id: u32,
    key: BunchKey,
    pair: &PairMut<'_>,
) -> Option<BunchEntry> {
    let schema = &class.versions().get(key.version)?.schema;
    let base_snap = pair.acked().map(|(_, s)| &**s);
    let base_rev = base_snap.map_or(0, |s| s.rev);
    let shared = ctx.config.shared_quantized_state;
    let planned = |obj: &Object| {
        plan(
            class.fields(),
            schema.fields().len(),
            base_snap,
            &obj.cur,
            key.owner,
            ctx.config.collection_cap,
        )
    };
    // With shared values, the plan and its values section are kept per
    // (base revision, visibility, version) across base tokens.
    let values_idx = if shared {
        let found = obj.values.iter().position(|e| {
            e.base_rev == base_rev && e.owner == key.owner && e.version == key.version
        });
        Some(match found {
            Some(i) => i,
            None => {
                let p = planned(obj);
                let section = match &p {
                    Planned::Send(p) | Planned::ForcedFull(p) => {
                        values_section(schema, p.clone(), &obj.cur).ok()
                    }
                    Planned::Nothing => None,
                };
                obj.values.push(ValuesEntry {
                    base_rev,
                    owner: key.owner,
                    version: key.version,
                    planned: p,
                    shared: section,
                });
                obj.values.len() - 1
            }
        })
    } else {
        None
    };
    let own_plan;
    let (p, forced, section) = match values_idx.and_then(|i| obj.values.get(i)) {
        Some(e) => match &e.planned {
            Planned::Nothing => return Some(nothing(key)),
            Planned::Send(p) => (p, false, e.shared.as_ref()),
            Planned::ForcedFull(p) => (p, true, e.shared.as_ref()),
        },
        None => {
            own_plan = planned(obj);
            match &own_plan {
                Planned::Nothing => return Some(nothing(key)),
                Planned::Send(p) => (p, false, None),
                Planned::ForcedFull(p) => (p, true, None),
            }
        }
    };
    let base = match (key.base, p.full) {
        (Some(t), false) => BunchBase::Delta(t),
        _ => BunchBase::Full,
    };
    let result = (key.owner, key.version, base == BunchBase::Full);
    let token = result_token(ctx, &mut obj.results, result, pair.last_token())?;
    let body = match section {
        Some(sv) => assemble(schema, object_id, token, base, sv),
        None if shared => return None,
        None => encode_direct(schema, object_id, token, base, p, &obj.cur).ok()?,
    };
    Some(BunchEntry {
        key,
        bunch: Bunch::Body {
            token,
            full: base == BunchBase::Full,
            forced,
            frame: framed(KIND_REP_DELTA, &body),
        },
    })
}

/// The token of `result` (visibility, version, full) for the current
/// revision: the one already minted when it is newer than every token this
/// pair was sent (`last_token`), else a fresh one that replaces it, so each
/// receiver still sees strictly increasing tokens per object. `None`: the
/// token space is exhausted.
fn result_token(
    ctx: &mut SendCtx<'_>,
    results: &mut Vec<ResultEntry>,
    (owner, version, full): (bool, usize, bool),
    last_token: u64,
) -> Option<u64> {
    let found = results
        .iter()
        .position(|e| e.owner == owner && e.version == version && e.full == full);
    if let Some(e) = found.and_then(|i| results.get(i))
        && e.token > last_token
    {
        return Some(e.token);
    }
    let Some(token) = ctx.tokens.issue() else {
        ctx.counters.tokens_exhausted += 1;
        return None;
    };
    ctx.counters.tokens_issued += 1;
    let entry = ResultEntry {
        owner,
        version,
        full,
        token,
    };
    replace_or_push(results, found, entry);
    Some(token)
}

/// Puts `entry` in a per-tick cache: over the stale one at `found`, else
/// at the end. Returns its index.
fn replace_or_push<T>(cache: &mut Vec<T>, found: Option<usize>, entry: T) -> usize {
    match found.and_then(|i| cache.get_mut(i).map(|slot| (i, slot))) {
        Some((i, slot)) => {
            *slot = entry;
            i
        }
        None => {
            cache.push(entry);
            cache.len() - 1
        }
    }
}

fn nothing(key: BunchKey) -> BunchEntry {
    BunchEntry {
        key,
        bunch: Bunch::Nothing,
    }
}
