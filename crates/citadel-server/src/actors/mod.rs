//! Networked actors and transform sync in the node: the [`TransformHub`]
//! owns one transform world per [`Place`] (each room, and the default
//! dimension of room-less participants) plus the [`WorldKey::Global`] world
//! of server-owned actors without a room, every opted-in client's snapshot
//! sender, and the presence table.
//!
//! Call order: the connection routes kinds 7, 9, 10, 16 and 20 to the
//! `handle_*` methods and reports place changes and disconnects; the tick
//! task calls [`TransformHub::handle_tick`] at `transform_sync.sim_hz`,
//! which steps worlds, walks patrolling NPCs, latches one quantized frame
//! per world (shared by every recipient) and, every send interval, polls
//! each client's snapshot. Every frame leaves through the [`Router`]:
//! reliable frames (HELLO, spawns, despawns, roles) on the reliable lane,
//! snapshots on the unreliable lane, each encoded once. The hub lock is
//! never held across an `.await`.

mod npc;

pub use npc::{NpcSpawn, Patrol};

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use citadel_netcode::frame::Frame;
use citadel_netcode::interest::{FrameIndex, InterestConfig};
use citadel_netcode::sender::{SenderConfig, SnapshotSender};
use citadel_netcode::world::{IdAllocator, Motion, Object, World};
use citadel_wire::Envelope;
use citadel_wire::WireBody;
use citadel_wire::ack::AckWindow;
use citadel_wire::actor::{NaDespawn, NaPresence, NaSpawn, NaSpawnBatch, NaState, NaTransform};
use citadel_wire::protocol::KIND_TSYNC_SNAPSHOT;
use citadel_wire::tsync::{InputBundle, Role, RoleChange, RoleEvent, TransformCodec, TsyncAck};

use crate::config::TransformSyncConfig;
use crate::metrics::{DropReason, Metrics};
use crate::place::Place;
use crate::router::{Lane, Router, frame};

/// Which transform world an actor lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WorldKey {
    /// The world of one place: only participants there see it.
    Place(Place),
    /// Server-owned actors spawned without a room: every client sees them.
    Global,
}

#[derive(Debug)]
struct ClientSync {
    place: Place,
    sender: SnapshotSender,
}

#[derive(Debug, Clone, Copy)]
struct Presence {
    object_id: u32,
    place: Place,
    predicted: bool,
}

/// One world's latched frame and, with AOI on, its broad-phase index;
/// built once per send tick and read by every client of that world.
#[derive(Debug, Default)]
struct Latched {
    frame: Frame,
    index: Option<FrameIndex>,
}

#[derive(Debug, Default)]
struct HubState {
    ids: IdAllocator,
    worlds: HashMap<WorldKey, World>,
    frames: HashMap<WorldKey, Arc<Latched>>,
    clients: HashMap<u64, ClientSync>,
    presences: HashMap<u64, Presence>,
    npcs: HashMap<u32, npc::Npc>,
    ticks: u64,
}

/// The node's transform-sync owner.
pub struct TransformHub {
    state: Mutex<HubState>,
    config: TransformSyncConfig,
    codec: TransformCodec,
    metrics: Arc<Metrics>,
    router: Arc<dyn Router>,
}

impl std::fmt::Debug for TransformHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransformHub").finish_non_exhaustive()
    }
}

impl TransformHub {
    /// A hub for a validated config, delivering through `router`.
    pub fn new(
        config: TransformSyncConfig,
        metrics: Arc<Metrics>,
        router: Arc<dyn Router>,
    ) -> Result<Self, crate::config::ConfigError> {
        let codec = config.codec()?;
        Ok(TransformHub {
            state: Mutex::new(HubState::default()),
            config,
            codec,
            metrics,
            router,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HubState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether transform sync is served.
    pub fn enabled(&self) -> bool {
        self.config.enabled
    }

    /// Simulation rate.
    pub fn sim_hz(&self) -> u8 {
        self.config.hello.sim_rate_hz
    }

    fn sender_config(&self) -> SenderConfig {
        SenderConfig {
            max_objects: self.config.budget as usize,
            max_datagram: citadel_netcode::MAX_SNAPSHOT_DATAGRAM,
            interest: self.config.interest_enabled.then_some(InterestConfig {
                cell_size: self.config.interest_cell_size,
                inner: self.config.interest_inner,
                outer: self.config.interest_outer,
            }),
        }
    }

    /// Kind 7: opt in (or reset baselines on a repeat) and answer with the
    /// negotiated codec.
    pub fn handle_hello(&self, participant_id: u64, place: Place) {
        let mut st = self.lock();
        let sender_config = self.sender_config();
        let codec = self.codec;
        st.clients
            .entry(participant_id)
            .and_modify(|c| c.sender.reset())
            .or_insert_with(|| ClientSync {
                place,
                sender: SnapshotSender::new(participant_id, codec, sender_config),
            });
        self.send(participant_id, &self.config.hello.to_envelope());
    }

    /// One reliable envelope to one participant.
    fn send(&self, participant_id: u64, envelope: &Envelope) {
        self.router
            .to_participant(participant_id, Lane::Reliable, frame(envelope));
    }

    /// One reliable frame to every opted-in client that `accept`s.
    fn send_to_clients(
        &self,
        st: &HubState,
        envelope: &Envelope,
        mut accept: impl FnMut(u64, &ClientSync) -> bool,
    ) {
        let frame = frame(envelope);
        for (pid, c) in &st.clients {
            if accept(*pid, c) {
                self.router
                    .to_participant(*pid, Lane::Reliable, frame.clone());
            }
        }
    }

    /// Kind 10.
    pub fn handle_ack(&self, participant_id: u64, ack: &TsyncAck) {
        let Ok(window) = ack.window() else {
            self.metrics.dropped(DropReason::MalformedBody);
            return;
        };
        if let Some(c) = self.lock().clients.get_mut(&participant_id) {
            c.sender.handle_ack(&window);
        } else {
            self.metrics.dropped(DropReason::NotOptedIn);
        }
    }

    /// Kind 9: the piggybacked ack is applied (history 0); the input frames
    /// themselves await the validated-input path and are counted.
    pub fn handle_input(&self, participant_id: u64, bundle: &InputBundle) {
        if bundle.acked_snapshot_id != 0 {
            let mut window = AckWindow::new();
            window.ack(u64::from(bundle.acked_snapshot_id));
            if let Some(c) = self.lock().clients.get_mut(&participant_id) {
                c.sender.handle_ack(&window);
            }
        }
        if !bundle.frames.is_empty() {
            self.metrics
                .drop_n(DropReason::InputNotServed, bundle.frames.len() as u64);
        }
    }

    fn spawn_of(object: &Object) -> NaSpawn {
        NaSpawn {
            object_id: object.id,
            archetype_id: object.archetype,
            owner: object.owner,
            transform: object.transform,
        }
    }

    /// Everyone a participant in `place` can see: that place's world and the
    /// global world.
    fn visible(st: &HubState, place: Place) -> impl Iterator<Item = &Object> {
        [WorldKey::Place(place), WorldKey::Global]
            .into_iter()
            .filter_map(|key| st.worlds.get(&key))
            .flat_map(World::objects)
    }

    /// Kind 16: spawn (or refresh) the sender's avatar in its place. Order:
    /// the owner's own spawn, then a batch of everything else it can see,
    /// then (predicted archetypes) its ROLE, then a spawn to every other
    /// opted-in client in the same place.
    pub fn handle_presence(&self, participant_id: u64, presence: &NaPresence) {
        let mut st = self.lock();
        let Some(place) = st.clients.get(&participant_id).map(|c| c.place) else {
            self.metrics.dropped(DropReason::NotOptedIn);
            return;
        };
        if !presence.transform.is_finite() {
            self.metrics.dropped(DropReason::MalformedBody);
            return;
        }
        let predicted = self
            .config
            .predicted_authoritative_archetypes
            .contains(&presence.archetype_id);
        let existing = st.presences.get(&participant_id).copied();
        let repeat = existing.is_some();
        let object_id = match existing {
            Some(p) if p.place == place => p.object_id,
            Some(p) => {
                // Stale presence from another place: retire it first.
                self.despawn_locked(
                    &mut st,
                    p.object_id,
                    WorldKey::Place(p.place),
                    Some(participant_id),
                );
                st.ids.allocate().unwrap_or(0)
            }
            None => st.ids.allocate().unwrap_or(0),
        };
        if object_id == 0 {
            return;
        }
        let sim_hz = self.config.hello.sim_rate_hz;
        let world = st
            .worlds
            .entry(WorldKey::Place(place))
            .or_insert_with(|| World::new(sim_hz));
        let ownership_epoch = world.get(object_id).map_or(1, |o| {
            o.ownership_epoch
                .wrapping_add(u32::from(predicted && !repeat))
                .max(1)
        });
        let object = Object {
            id: object_id,
            archetype: presence.archetype_id,
            owner: participant_id,
            role: if predicted {
                Role::OwnerPredicted
            } else {
                Role::RemoteInterpolated
            },
            gen_epoch: world.get(object_id).map_or(0, |o| o.gen_epoch),
            ownership_epoch,
            transform: presence.transform,
            replicate_velocity: true,
            motion: Motion::OwnerDriven,
            last_input_seq: 0,
        };
        if let Some(o) = world.get_mut(object_id) {
            *o = object.clone();
        } else {
            world.insert(object.clone());
        }
        st.presences.insert(
            participant_id,
            Presence {
                object_id,
                place,
                predicted,
            },
        );
        let own_spawn = Self::spawn_of(&object).to_envelope();
        self.send(participant_id, &own_spawn);
        if !repeat {
            let spawns: Vec<NaSpawn> = Self::visible(&st, place)
                .filter(|o| o.id != object_id)
                .map(Self::spawn_of)
                .collect();
            for chunk in spawns
                .chunks(NaSpawnBatch::MAX_ENTRIES)
                .chain(std::iter::once(&[][..]).filter(|_| spawns.is_empty()))
            {
                let batch = NaSpawnBatch {
                    spawns: chunk.to_vec(),
                };
                self.send(participant_id, &batch.to_envelope());
            }
        }
        if predicted {
            let role = RoleChange {
                object_id,
                role: Role::OwnerPredicted,
                owner: participant_id,
                ownership_epoch: object.ownership_epoch,
                gen_epoch: object.gen_epoch,
                event: RoleEvent::Assign,
            };
            self.send(participant_id, &role.to_envelope());
        }
        self.send_to_clients(&st, &own_spawn, |pid, c| {
            pid != participant_id && c.place == place
        });
    }

    /// Kind 20: the owner's relay-mode transform, applied verbatim after the
    /// ownership check. Returns false (and counts) when refused.
    pub fn handle_state(&self, participant_id: u64, state: &NaState) -> bool {
        let mut st = self.lock();
        let Some(p) = st.presences.get(&participant_id).copied() else {
            self.metrics.dropped(DropReason::ActorStateRefused);
            return false;
        };
        if p.object_id != state.object_id || p.predicted || !state.transform.is_finite() {
            self.metrics.dropped(DropReason::ActorStateRefused);
            return false;
        }
        match st
            .worlds
            .get_mut(&WorldKey::Place(p.place))
            .and_then(|w| w.get_mut(p.object_id))
        {
            Some(o) => {
                o.transform = state.transform;
                true
            }
            None => false,
        }
    }

    /// Removes `object_id` from world `key` and tells the opted-in clients
    /// that see that world (except `skip`).
    fn despawn_locked(&self, st: &mut HubState, object_id: u32, key: WorldKey, skip: Option<u64>) {
        if let Some(world) = st.worlds.get_mut(&key) {
            world.remove(object_id);
            if world.is_empty() && key != WorldKey::Global {
                st.worlds.remove(&key);
                st.frames.remove(&key);
            }
        }
        st.ids.release(object_id);
        self.send_to_clients(st, &NaDespawn { object_id }.to_envelope(), |pid, c| {
            Some(pid) != skip && (key == WorldKey::Global || key == WorldKey::Place(c.place))
        });
    }

    /// The participant moved to another place (room join or leave): its
    /// avatar despawns everywhere it was visible, it is told to drop the old
    /// place's actors, and its snapshots switch to the new place. It appears
    /// in the new place when it announces presence again.
    pub fn handle_place_change(&self, participant_id: u64, new_place: Place) {
        let mut st = self.lock();
        if let Some(p) = st.presences.get(&participant_id).copied()
            && p.place != new_place
        {
            st.presences.remove(&participant_id);
            self.despawn_locked(&mut st, p.object_id, WorldKey::Place(p.place), None);
        }
        let Some(old_place) = st.clients.get(&participant_id).map(|c| c.place) else {
            return;
        };
        if old_place == new_place {
            return;
        }
        let stale: Vec<u32> = st
            .worlds
            .get(&WorldKey::Place(old_place))
            .map(|w| w.objects().map(|o| o.id).collect())
            .unwrap_or_default();
        if let Some(c) = st.clients.get_mut(&participant_id) {
            c.place = new_place;
            for object_id in stale {
                self.send(participant_id, &NaDespawn { object_id }.to_envelope());
            }
        }
    }

    /// The participant left: its avatar despawns and its state is dropped.
    pub fn handle_disconnect(&self, participant_id: u64) {
        let mut st = self.lock();
        st.clients.remove(&participant_id);
        if let Some(p) = st.presences.remove(&participant_id) {
            self.despawn_locked(
                &mut st,
                p.object_id,
                WorldKey::Place(p.place),
                Some(participant_id),
            );
        }
    }

    /// One simulation step; every send interval also sends snapshots.
    pub fn handle_tick(&self) {
        let mut guard = self.lock();
        let st = &mut *guard;
        st.ticks += 1;
        let dt = 1.0 / f32::from(self.config.hello.sim_rate_hz.max(1));
        npc::step_patrols(st, dt);
        for world in st.worlds.values_mut() {
            world.handle_sim_tick();
        }
        let interval = u64::from(
            (self.config.hello.sim_rate_hz / self.config.hello.send_rate_hz.max(1)).max(1),
        );
        if !st.ticks.is_multiple_of(interval) || st.clients.is_empty() {
            return;
        }
        // Latch (and index) once per world; every client's snapshot reads
        // the shared frames.
        let cell = self
            .config
            .interest_enabled
            .then_some(self.config.interest_cell_size);
        st.frames = st
            .worlds
            .iter()
            .map(|(k, w)| {
                let frame = Frame::latch(w, &self.codec);
                let index = cell.map(|c| FrameIndex::build(&frame.objects, c));
                (*k, Arc::new(Latched { frame, index }))
            })
            .collect();
        let empty = Arc::new(Latched {
            frame: Frame::default(),
            index: cell.map(|c| FrameIndex::build(&[], c)),
        });
        let send_rate = self.config.hello.send_rate_hz;
        let HubState {
            clients,
            frames,
            presences,
            worlds,
            ..
        } = st;
        let global = frames
            .get(&WorldKey::Global)
            .cloned()
            .unwrap_or_else(|| empty.clone());
        for (pid, client) in clients.iter_mut() {
            let place = frames
                .get(&WorldKey::Place(client.place))
                .cloned()
                .unwrap_or_else(|| empty.clone());
            let viewer = presences
                .get(pid)
                .and_then(|p| {
                    worlds
                        .get(&WorldKey::Place(p.place))
                        .and_then(|w| w.get(p.object_id))
                })
                .map(|o| o.transform.position);
            let frame_list = [&place.frame, &global.frame];
            let indexes = match (&place.index, &global.index) {
                (Some(a), Some(b)) => Some([a, b]),
                _ => None,
            };
            let Some(out) = client.sender.poll_snapshot(
                &frame_list,
                indexes.as_ref().map(|x| &x[..]),
                viewer,
                send_rate,
            ) else {
                continue;
            };
            for role in &out.roles {
                self.send(*pid, &role.to_envelope());
            }
            if !out.body.is_empty() {
                let snapshot = Envelope::new(KIND_TSYNC_SNAPSHOT, out.body);
                self.router
                    .to_participant(*pid, Lane::Unreliable, frame(&snapshot));
            }
        }
    }

    /// Live actors (for `/status`).
    pub fn actor_count(&self) -> usize {
        self.lock().worlds.values().map(World::len).sum::<usize>()
    }

    /// Clients receiving snapshots.
    pub fn client_count(&self) -> usize {
        self.lock().clients.len()
    }

    /// The spawn transform helper for NPCs.
    fn npc_transform(x: f32, y: f32, z: f32) -> NaTransform {
        NaTransform {
            position: [x, y, z],
            ..NaTransform::IDENTITY
        }
    }
}
