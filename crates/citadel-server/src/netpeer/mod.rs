//! NetworkPeer replication in the node: [`NetPeerNode`] is the thin driver
//! of [`citadel_netpeer::Authority`], the sans-IO core that owns classes,
//! objects, matches, per-(object, receiver) baselines, the proposal
//! pipeline and its rejection counters.
//!
//! What the driver does: it holds the core behind one mutex together with
//! the optional veto hook, and the monotonic epoch it derives the core's
//! explicit time (`now_ms`) from. Each call locks, hands the input and
//! `now_ms` to the core, copies the core's counters to `/metrics`
//! ([`NetpeerStats`]), then drains the core's addressed envelopes (framed
//! by the core, once per distinct body, each receiver's small ones packed
//! into one burst) into the [`Router`] on the reliable lane (kinds 13 and
//! 15 are reliable, realtime-wire §2) before unlocking, so two calls never
//! interleave their bunches; a tick drains after each receiver
//! (`Authority::tick_draining`). The lock is never held across an
//! `.await`; a router push never blocks.
//!
//! What it is not: it has no replication rules of its own (full/delta,
//! caps, acks, relevance, the §6.3 pipeline live in citadel-netpeer and are
//! tested there over `SimLink`), and it parses no TOML or Lua.
//!
//! Call order: the connection reports admissions ([`NetPeerNode::handle_connect`],
//! into match 0; the next tick sends the reliable bootstrap of full
//! baselines), routes kinds 13 and 14 to [`NetPeerNode::handle_proposal`] /
//! [`NetPeerNode::handle_ack`] and reports disconnects; trusted code
//! (Lua, `runtime::netpeer`) registers classes and spawns / writes objects;
//! the node's tick task calls [`NetPeerNode::handle_tick`] at
//! `transport.network_peer.tick_hz`. With a Lua `netpeer_on_proposal`
//! handler, kind 13 goes through `veto.rs` instead: validate under the
//! lock, await the script's verdict with no lock held, commit.

mod stats;
mod veto;

pub use stats::NetpeerStats;
pub use veto::{Verdict, VetoCaller, VetoOutcome, VetoRequest};

use std::sync::{Arc, Mutex};
use std::time::Instant;

use citadel_netpeer::{
    ApiError, Applied, Authority, ClassError, ClassSpec, ConnId, Items, NoVeto, Rejection, Value,
    VetoHook,
};
use citadel_wire::netpeer::FieldValue;

use crate::config::{ConfigError, NetworkPeerConfig};
use crate::metrics::Metrics;
use crate::router::Router;

/// The longest burst of small envelopes the core packs for one receiver:
/// about one write's worth for the WebSocket writer.
const PACK_BYTES: usize = 16 * 1024;

/// The veto hook trusted code installs (`Send`: the driver is shared).
pub type BoxedVeto = Box<dyn VetoHook + Send>;

struct Driven {
    core: Authority,
    veto: Option<BoxedVeto>,
}

/// The node's NetworkPeer driver.
pub struct NetPeerNode {
    state: Mutex<Driven>,
    enabled: bool,
    tick_hz: u32,
    /// `lane_reserve`: reliable-lane slots a tick leaves free.
    lane_reserve: usize,
    epoch: Instant,
    metrics: Arc<Metrics>,
    router: Arc<dyn Router>,
    lua_veto: veto::LuaVeto,
}

impl std::fmt::Debug for NetPeerNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NetPeerNode")
            .field("enabled", &self.enabled)
            .finish_non_exhaustive()
    }
}

impl NetPeerNode {
    /// A driver for a validated `[transport.network_peer]`, delivering
    /// through `router`.
    pub fn new(
        config: &NetworkPeerConfig,
        metrics: Arc<Metrics>,
        router: Arc<dyn Router>,
    ) -> Result<Self, ConfigError> {
        let mut core = Authority::new(config.authority()).map_err(|key| ConfigError::Invalid {
            key: format!("transport.network_peer.{key}"),
            message: "out of range".into(),
        })?;
        core.set_output_packing(Some(PACK_BYTES));
        Ok(NetPeerNode {
            state: Mutex::new(Driven { core, veto: None }),
            enabled: config.enabled,
            tick_hz: config.tick_hz.max(1),
            lane_reserve: config.lane_reserve,
            epoch: Instant::now(),
            metrics,
            router,
            lua_veto: veto::LuaVeto::new(config),
        })
    }

    /// Whether kinds 13/14 are served.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Authority ticks per second.
    pub fn tick_hz(&self) -> u32 {
        self.tick_hz
    }

    /// The core's explicit time.
    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Locks, runs `input` on the core (and the hook) at `now_ms`, publishes
    /// the counters and routes every body produced before unlocking.
    fn drive<R>(&self, input: impl FnOnce(&mut Driven, u64) -> R) -> R {
        let now = self.now_ms();
        let mut driven = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let result = input(&mut driven, now);
        self.metrics.netpeer.publish(driven.core.counters());
        self.route_output(&mut driven.core);
        result
    }

    /// Drains the core's queue into the router. The core frames each
    /// distinct body once and packs each receiver's consecutive small
    /// envelopes into one burst (`citadel_netpeer::out`, turned on in
    /// [`NetPeerNode::new`]), so a receiver's share of a tick is one router
    /// call: one lookup, one lane lock, one queue entry and one wake-up.
    /// Envelopes not queued count as undelivered.
    fn route_output(&self, core: &mut Authority) {
        while let Some(out) = core.poll_output() {
            let queued = self
                .router
                .packed_to_participant(out.conn, out.frame, out.envelopes);
            if queued < out.envelopes {
                self.metrics.netpeer.undelivered.fetch_add(
                    (out.envelopes - queued) as u64,
                    std::sync::atomic::Ordering::Relaxed,
                );
            }
        }
    }

    // ---- connections --------------------------------------------------------

    /// An admitted connection joins match 0 (no-op when disabled).
    pub fn handle_connect(&self, participant_id: u64, guest: bool) {
        if self.enabled {
            self.drive(|d, now| d.core.connect(participant_id, guest, now));
        }
    }

    /// The connection left: its baselines, bindings and buckets go.
    pub fn handle_disconnect(&self, participant_id: u64) {
        self.lua_veto.drop_lane(participant_id);
        if self.enabled {
            self.drive(|d, _| d.core.disconnect(participant_id));
        }
    }

    /// Kind 13 from a client: the §6.3 pipeline; a rejection is a silent
    /// drop counted per reason.
    pub fn handle_proposal(&self, participant_id: u64, body: &[u8]) -> Result<Applied, Rejection> {
        self.drive(|d, now| match d.veto.as_mut() {
            Some(hook) => d
                .core
                .handle_proposal(participant_id, body, now, hook.as_mut()),
            None => d
                .core
                .handle_proposal(participant_id, body, now, &mut NoVeto),
        })
    }

    /// Kind 14 from a client; returns the entries that advanced.
    pub fn handle_ack(&self, participant_id: u64, body: &[u8]) -> usize {
        self.drive(|d, _| d.core.handle_ack(participant_id, body))
    }

    /// One authority tick: relevance, then every changed or timed-out pair,
    /// each receiver sent at most what its reliable lane has room for (less
    /// `lane_reserve`); the rest waits for a later tick.
    pub fn handle_tick(&self) {
        self.drive(|d, now| {
            let ids: Vec<ConnId> = d.core.conn_ids().collect();
            for id in ids {
                let room = self
                    .router
                    .reliable_room(id)
                    .map(|free| free.saturating_sub(self.lane_reserve));
                d.core.set_lane_room(id, room);
            }
            // Each receiver's bunches go to the router as soon as they are
            // queued, while they are still in the cache.
            d.core.tick_draining(now, |core| self.route_output(core));
        });
    }

    // ---- trusted API (game logic) ------------------------------------------

    /// Registers a class; registering an identical spec again is a no-op
    /// (a hot-reloaded script re-registers its classes).
    pub fn register_class(&self, spec: ClassSpec) -> Result<(), ClassError> {
        self.drive(|d, _| match d.core.class(spec.class_id) {
            Some(existing) if *existing.spec() == spec => Ok(()),
            _ => d.core.register_class(spec),
        })
    }

    /// The current schema hash and layout version of a class.
    pub fn class_identity(&self, class_id: u32) -> Option<([u8; 16], u32)> {
        self.drive(|d, _| {
            d.core.class(class_id).map(|c| {
                let s = c.current();
                (*s.schema_hash(), s.layout_version())
            })
        })
    }

    /// Spawns an object with default values.
    pub fn spawn(
        &self,
        class_id: u32,
        match_id: u32,
        owner: Option<u64>,
        persistent: bool,
    ) -> Result<u32, ApiError> {
        self.drive(|d, _| d.core.spawn(class_id, match_id, owner, persistent))
    }

    /// Removes an object everywhere.
    pub fn despawn(&self, object_id: u32) -> bool {
        self.drive(|d, _| d.core.despawn(object_id))
    }

    /// Writes several fields at once (all checked first: one bad value
    /// writes nothing).
    pub fn set_fields(&self, object_id: u32, values: &[(u16, FieldValue)]) -> Result<(), ApiError> {
        self.drive(|d, _| {
            let Some(class) = d.core.class_of(object_id).and_then(|c| d.core.class(c)) else {
                return Err(ApiError::UnknownObject);
            };
            for (field, value) in values {
                let codec = &class
                    .fields()
                    .get(usize::from(*field))
                    .ok_or(ApiError::UnknownField)?
                    .codec;
                citadel_netpeer::value::quantize(codec, value).map_err(ApiError::Value)?;
            }
            for (field, value) in values {
                d.core.set(object_id, *field, value)?;
            }
            Ok(())
        })
    }

    /// Replaces a collection field's items.
    pub fn set_items(&self, object_id: u32, field: u16, items: Items) -> Result<(), ApiError> {
        self.drive(|d, _| d.core.set_items(object_id, field, items))
    }

    /// Inserts or updates one collection item by key (`citadel_netpeer::items`).
    pub fn upsert_item(
        &self,
        object_id: u32,
        field: u16,
        rep_key: u64,
        value: FieldValue,
    ) -> Result<(), ApiError> {
        self.drive(|d, _| {
            d.core
                .upsert_item(object_id, field, rep_key, value)
                .map(|_| ())
        })
    }

    /// Removes one collection item by key; `false` when there is none.
    pub fn remove_item(&self, object_id: u32, field: u16, rep_key: u64) -> Result<bool, ApiError> {
        self.drive(|d, _| d.core.remove_item(object_id, field, rep_key))
    }

    /// Assigns or clears the owner.
    pub fn set_owner(&self, object_id: u32, owner: Option<u64>) -> Result<(), ApiError> {
        self.drive(|d, _| d.core.set_owner(object_id, owner))
    }

    /// Sets the interest position of an object.
    pub fn set_position(&self, object_id: u32, position: [f32; 3]) -> Result<(), ApiError> {
        self.drive(|d, _| d.core.set_position(object_id, position))
    }

    /// Sets a connection's viewer position (`None`: the whole match).
    pub fn set_viewer(
        &self,
        participant_id: u64,
        viewer: Option<[f32; 3]>,
    ) -> Result<(), ApiError> {
        self.drive(|d, _| d.core.set_viewer(participant_id, viewer))
    }

    /// Moves an object to another match.
    pub fn move_object(&self, object_id: u32, match_id: u32) -> Result<(), ApiError> {
        self.drive(|d, _| d.core.move_object(object_id, match_id))
    }

    /// Moves a connection to another match.
    pub fn move_connection(&self, participant_id: u64, match_id: u32) -> Result<(), ApiError> {
        self.drive(|d, _| d.core.move_connection(participant_id, match_id))
    }

    /// Installs (or removes) the veto hook.
    pub fn set_veto(&self, hook: Option<BoxedVeto>) {
        self.drive(|d, _| d.veto = hook);
    }

    /// An object's current values, its class and its owner (reads).
    pub fn object(&self, object_id: u32) -> Option<ObjectView> {
        self.drive(|d, _| {
            Some(ObjectView {
                class_id: d.core.class_of(object_id)?,
                owner: d.core.owner_of(object_id),
                values: d.core.values(object_id)?.to_vec(),
            })
        })
    }

    /// The field id of `name` in a class.
    pub fn field_id(&self, class_id: u32, name: &str) -> Option<u16> {
        self.drive(|d, _| {
            let class = d.core.class(class_id)?;
            let i = class.fields().iter().position(|f| f.name == name)?;
            u16::try_from(i).ok()
        })
    }

    /// Runs `read` on the core (tests, status, benches).
    pub fn inspect<R>(&self, read: impl FnOnce(&Authority) -> R) -> R {
        self.drive(|d, _| read(&d.core))
    }

    /// Objects the participant holds a baseline for.
    pub fn relevant(&self, participant_id: ConnId) -> Vec<u32> {
        self.drive(|d, _| d.core.relevant(participant_id))
    }
}

/// A copy of one object's state.
#[derive(Debug, Clone)]
pub struct ObjectView {
    /// Class id.
    pub class_id: u32,
    /// Recorded owner.
    pub owner: Option<ConnId>,
    /// Values in field order.
    pub values: Vec<Value>,
}

/// A driver with the default (disabled) config, for unit tests of callers.
#[cfg(test)]
pub(crate) fn test_node(metrics: Arc<Metrics>, router: Arc<dyn Router>) -> NetPeerNode {
    let Ok(node) = NetPeerNode::new(&NetworkPeerConfig::default(), metrics, router) else {
        panic!("the default network_peer config is valid");
    };
    node
}
