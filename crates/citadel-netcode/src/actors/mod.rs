//! The server half of networked actors and transform sync (kinds 7-11 and
//! 16-20) as a sans-IO state machine.
//!
//! What it is: [`ActorServer`] owns every transform world (one per place,
//! plus the [`WorldKey::Global`] world of server-owned actors without a
//! place), each opted-in client's [`SnapshotSender`], the presence table
//! (one avatar per participant, its [`Control`] mode and ownership), the
//! server-owned NPCs with their patrols, and the id allocator shared by all
//! of them. It decides who is told what and in which order.
//!
//! What it is not: no sockets, no clock, no locks, no async runtime, no
//! metrics. It neither decodes envelopes (the driver hands typed bodies in)
//! nor frames them: every output is a typed [`Message`] with its
//! [`Audience`], and the driver encodes each output once and shares the
//! bytes with every recipient. Places are an opaque key `P` (the node's
//! place type); the core only compares them.
//!
//! Method kinds, as on the type: getters (`&self`); `handle_*` inputs, each
//! taking `now`, the driver's gameplay clock ([`Tick`]), which never goes
//! backwards; and [`ActorServer::poll_output`], drained after every input
//! until it returns `None`. Outputs come out in the order the protocol
//! requires (for one presence: the owner's own spawn, the batch, the ROLE,
//! then the spawn to the peers), so a driver that delivers them in poll
//! order on one reliable stream per participant keeps that order.
//!
//! Call order:
//! 1. [`ActorServer::handle_hello`] on kind 7 (opt in, or reset baselines);
//!    then kinds 9, 10, 16 and 20 go to [`ActorServer::handle_input`],
//!    [`ActorServer::handle_ack`], [`ActorServer::handle_presence`] and
//!    [`ActorServer::handle_state`]; game logic calls
//!    [`ActorServer::handle_npc_spawn`], [`ActorServer::handle_npc_move`]
//!    and [`ActorServer::handle_npc_despawn`];
//!    [`ActorServer::handle_place_change`] when a participant changes place
//!    and [`ActorServer::handle_disconnect`] when it leaves.
//! 2. [`ActorServer::handle_tick`] once per simulation step with the next
//!    tick. Its phases, in order: patrols walk, worlds step, (the place
//!    where per-tick rewind history is recorded, after the step and before
//!    the latch), and on send ticks one latched [`Frame`] and AOI index per
//!    world, then each client's snapshot (its ROLE transitions first).
//! 3. [`ActorServer::poll_output`] until `None` after each of the above.
//!
//! The validated-input path: every [`Control::Predicted`] presence object
//! has one [`InputQueue`] (created with the presence, epoch = its
//! ownership epoch, dropped with the object). Frames of kind 9 reach
//! [`ActorServer::handle_input`], which checks ownership with
//! `owned_object` (`ownership.rs`), offers each frame to the queue,
//! integrates the released run into the object's transform and publishes
//! its `last_input_seq`; every frame not applied is counted per
//! [`InputRefusal`] in the [`InputOutcome`]. When game logic judges
//! movement (a Lua `on_input` hook), the driver calls
//! [`ActorServer::handle_input_staged`] instead and applies the verdicts
//! with [`ActorServer::handle_movement`] (`movement.rs`). Ownership moves go through the
//! one role builder (`ownership.rs`) and [`Audience::Many`] (old owner, new
//! owner, the peers that see the object); history rings are recorded in
//! the tick phase named above.

mod error;
mod fire;
mod handoff;
mod movement;
mod npc;
mod output;
mod ownership;
mod presence;
mod tick;

pub use error::{InputRefusal, OwnerRefusal, Refusal, StateRefusal};
pub use fire::RewindQuery;
pub use movement::{Kinematics, MovementBatch, MovementOutcome, StagedFrame, Verdict};
pub use npc::{NpcSpawn, Patrol};
pub use output::{Audience, Delivery, Message, Output};
pub use ownership::Control;
pub use presence::InputOutcome;

use crate::input::InputQueue;
use crate::rewind::{History, LagProfile, RewindParams};

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt::Debug;
use std::hash::Hash;

use citadel_wire::CodecError;
use citadel_wire::actor::NaTransform;
use citadel_wire::tsync::{HelloParams, TransformCodec};

use crate::interest::InterestConfig;
use crate::sender::{SenderConfig, SnapshotSender};
use crate::world::{IdAllocator, World};

/// The gameplay clock: completed simulation steps. A `u64` that never
/// wraps (at 255 Hz it lasts two billion years); the driver owns it and
/// passes it to every input. Distinct from wire sequence numbers, which
/// wrap.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Tick(pub u64);

impl Tick {
    /// The following step (saturating).
    pub fn next(self) -> Tick {
        Tick(self.0.saturating_add(1))
    }
}

/// What a place key must be: small, comparable, hashable.
pub trait PlaceKey: Copy + Eq + Hash + Debug {}

impl<T: Copy + Eq + Hash + Debug> PlaceKey for T {}

/// Which transform world an actor lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WorldKey<P> {
    /// The world of one place: only participants there see it.
    Place(P),
    /// Server-owned actors spawned without a place: every client sees them.
    Global,
}

/// The server's transform-sync settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ActorConfig {
    /// What HELLO advertises: codec bounds, quaternion mode, send and
    /// simulation rates.
    pub hello: HelloParams,
    /// Most object entries per snapshot (0 = only the datagram bounds it).
    pub budget: usize,
    /// Area of interest (None = each client sees its whole place).
    pub interest: Option<InterestConfig>,
    /// Archetypes whose presence is predicted-authoritative (validated
    /// input, ROLE Assign); all others relay NA_STATE.
    pub predicted_archetypes: Vec<u16>,
    /// The speed (cm/s) and step (s) clamps of validated input; the
    /// position bounds come from [`ActorConfig::hello`].
    pub input_max_speed: f32,
    /// See [`ActorConfig::input_max_speed`].
    pub input_max_dt: f32,
    /// Samples kept per hit-eligible object (ticks; 0 = `sim_rate_hz`,
    /// about one second).
    pub rewind_history_ticks: u32,
    /// The fire-resolution numbers (§3.8): `max_unlag`, RTT cutoff, radius.
    pub rewind: RewindParams,
}

impl ActorConfig {
    /// The history ring length in ticks: the configured one, or one
    /// second's worth of ticks when 0.
    pub fn history_ticks(&self) -> u32 {
        match self.rewind_history_ticks {
            0 => u32::from(self.hello.sim_rate_hz.max(1)),
            n => n,
        }
    }
}

/// The input queue of one owner-predicted object and the world it is in.
#[derive(Debug, Clone)]
struct Owned<P> {
    world: WorldKey<P>,
    queue: InputQueue,
}

/// The rewind ring of one hit-eligible object and the world it is in.
#[derive(Debug, Clone)]
struct Tracked<P> {
    world: WorldKey<P>,
    history: History,
}

#[derive(Debug)]
struct Client<P> {
    place: P,
    sender: SnapshotSender,
}

#[derive(Debug, Clone, Copy)]
struct Presence<P> {
    object_id: u32,
    place: P,
}

/// The server half of transform sync for one node. See the module docs
/// for the call order.
#[derive(Debug)]
pub struct ActorServer<P> {
    config: ActorConfig,
    codec: TransformCodec,
    sender_config: SenderConfig,
    now: Tick,
    ids: IdAllocator,
    worlds: HashMap<WorldKey<P>, World>,
    clients: BTreeMap<u64, Client<P>>,
    presences: HashMap<u64, Presence<P>>,
    /// The in-order input queue of each owner-predicted object, by id.
    inputs: HashMap<u32, Owned<P>>,
    /// The rewind rings of hit-eligible objects, by id (ordered, so hit
    /// resolution is deterministic).
    tracked: BTreeMap<u32, Tracked<P>>,
    /// Each participant's measured lag (absent = zero lag).
    lag: HashMap<u64, LagProfile>,
    npcs: BTreeMap<u32, npc::Npc<P>>,
    outputs: VecDeque<Output>,
    /// Scratch for `offer_bundle`: the objects one kind-9 bundle offered
    /// frames to, reused across bundles (at most one per frame of the
    /// largest bundle seen; the wire caps a bundle at 32 frames).
    offered: Vec<u32>,
}

impl<P: PlaceKey> ActorServer<P> {
    /// A server for `config`; fails if HELLO's bounds make no codec.
    pub fn new(config: ActorConfig) -> Result<Self, CodecError> {
        let codec = config.hello.codec()?;
        let sender_config = SenderConfig {
            max_objects: config.budget,
            max_datagram: crate::MAX_SNAPSHOT_DATAGRAM,
            interest: config.interest,
        };
        Ok(ActorServer {
            config,
            codec,
            sender_config,
            now: Tick::default(),
            ids: IdAllocator::default(),
            worlds: HashMap::new(),
            clients: BTreeMap::new(),
            presences: HashMap::new(),
            inputs: HashMap::new(),
            tracked: BTreeMap::new(),
            lag: HashMap::new(),
            npcs: BTreeMap::new(),
            outputs: VecDeque::new(),
            offered: Vec::new(),
        })
    }

    /// The settings it runs with.
    pub fn config(&self) -> &ActorConfig {
        &self.config
    }

    /// The newest tick any input carried.
    pub fn now(&self) -> Tick {
        self.now
    }

    /// Live actors in every world.
    pub fn actor_count(&self) -> usize {
        self.worlds.values().map(World::len).sum()
    }

    /// Opted-in clients.
    pub fn client_count(&self) -> usize {
        self.clients.len()
    }

    /// The object id of a participant's avatar, if it announced one.
    pub fn presence_of(&self, participant_id: u64) -> Option<u32> {
        self.presences.get(&participant_id).map(|p| p.object_id)
    }

    /// The current transform of an NPC.
    pub fn npc_transform(&self, object_id: u32) -> Option<NaTransform> {
        let key = self.npcs.get(&object_id)?.world;
        self.worlds.get(&key)?.get(object_id).map(|o| o.transform)
    }

    /// The next output, oldest first; `None` once drained.
    #[must_use]
    pub fn poll_output(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }

    /// Records `now`; a tick older than one already seen changes nothing
    /// (the clock never goes backwards).
    fn advance(&mut self, now: Tick) {
        self.now = self.now.max(now);
    }

    fn world_mut(&mut self, key: WorldKey<P>) -> &mut World {
        let sim_hz = self.config.hello.sim_rate_hz;
        self.worlds.entry(key).or_insert_with(|| World::new(sim_hz))
    }

    /// Queues `message` for one participant.
    fn emit(&mut self, participant_id: u64, message: Message) {
        self.outputs.push_back(Output {
            to: Audience::One(participant_id),
            message,
        });
    }

    /// Queues `message` for several participants (nothing if none).
    fn emit_many(&mut self, participants: Vec<u64>, message: Message) {
        if let Some(to) = Audience::of(participants) {
            self.outputs.push_back(Output { to, message });
        }
    }

    /// Opted-in clients that see world `key` (every client sees the global
    /// world), except `skip`, in participant order.
    fn audience_of(&self, key: WorldKey<P>, skip: Option<u64>) -> Vec<u64> {
        self.clients
            .iter()
            .filter(|(pid, c)| {
                Some(**pid) != skip && (key == WorldKey::Global || key == WorldKey::Place(c.place))
            })
            .map(|(pid, _)| *pid)
            .collect()
    }

    /// Removes `object_id` from world `key`, frees its id and tells every
    /// opted-in client that sees that world (except `skip`). A place world
    /// left empty is dropped.
    fn despawn(&mut self, object_id: u32, key: WorldKey<P>, skip: Option<u64>) {
        if let Some(world) = self.worlds.get_mut(&key) {
            world.remove(object_id);
            if world.is_empty() && key != WorldKey::Global {
                self.worlds.remove(&key);
            }
        }
        self.inputs.remove(&object_id);
        self.tracked.remove(&object_id);
        self.ids.release(object_id);
        let audience = self.audience_of(key, skip);
        self.emit_many(
            audience,
            Message::Despawn(citadel_wire::actor::NaDespawn { object_id }),
        );
    }
}
