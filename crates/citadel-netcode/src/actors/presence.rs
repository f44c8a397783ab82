//! A participant's side of transform sync: opting in (kind 7),
//! acknowledgements (kind 10 and the ack inside kind 9), presence (16),
//! relay state (20), place changes and disconnects (§3.2, §3.5, §3.9).
//!
//! Presence delivery order, all reliable: the owner's own spawn (owner
//! field = its participant id), then one or more batches with every other
//! actor it can see (even when empty), then the ROLE Assign for a
//! predicted archetype, then the spawn to the other opted-in clients of
//! the same place. A repeated presence keeps the object id, refreshes
//! archetype, mode and transform, resends the own spawn (and ROLE) but no
//! batch.

use citadel_wire::ack::AckWindow;
use citadel_wire::actor::{NaDespawn, NaPresence, NaSpawn, NaSpawnBatch, NaState};
use citadel_wire::tsync::{FireCommand, InputBundle, InputFrame, RoleEvent, TsyncAck};

use super::fire::Shot;
use super::ownership::role_of;
use super::{
    ActorServer, Client, Control, InputRefusal, Message, Owned, PlaceKey, Presence, Refusal,
    StateRefusal, Tick, WorldKey,
};
use crate::input::{InputParams, InputQueue};
use crate::rewind::RewindBound;
use crate::sender::SnapshotSender;
use crate::world::{Motion, Object, World};

/// What [`ActorServer::handle_input`] did with one bundle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[must_use]
pub struct InputOutcome {
    /// Whether the piggybacked ack reached an opted-in client's sender.
    pub acked: bool,
    /// Frames accepted into the sender's queue (applied now or buffered
    /// until the missing earlier ones arrive).
    pub accepted: usize,
    /// Frames released and integrated into the object by this bundle.
    pub applied: usize,
    /// Frames not applied: the sum of [`InputOutcome::refused`].
    pub unserved: usize,
    /// Fire commands resolved (each answered with kind 12).
    pub fired: usize,
    /// Of those, hits.
    pub hits: usize,
    /// Fire commands whose rewind `max_unlag` clamped.
    pub unlag_clamped: usize,
    /// Fire commands resolved without compensation (RTT over the cutoff).
    pub uncompensated: usize,
    /// Fire commands refused (answered as a miss, not ray-tested): the
    /// origin was farther than `origin_tolerance` from the shooter.
    pub origin_refused: usize,
    refused: [usize; InputRefusal::ALL.len()],
}

impl InputOutcome {
    /// Frames refused for `reason`.
    pub fn refused(&self, reason: InputRefusal) -> usize {
        self.refused[reason as usize]
    }

    /// Every reason with a nonzero count, in [`InputRefusal::ALL`] order.
    pub fn refusals(&self) -> impl Iterator<Item = (InputRefusal, usize)> + '_ {
        InputRefusal::ALL
            .into_iter()
            .map(|r| (r, self.refused(r)))
            .filter(|&(_, n)| n > 0)
    }

    fn refuse(&mut self, reason: InputRefusal) {
        self.refused[reason as usize] += 1;
        self.unserved += 1;
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

impl<P: PlaceKey> ActorServer<P> {
    /// Kind 7: registers `participant_id` (in `place`) for snapshots, or
    /// on a repeat forgets its baselines so the next snapshot is full;
    /// answers with HELLO either way.
    pub fn handle_hello(&mut self, participant_id: u64, place: P, now: Tick) {
        self.advance(now);
        let (codec, config) = (self.codec, self.sender_config);
        self.clients
            .entry(participant_id)
            .and_modify(|c| c.sender.reset())
            .or_insert_with(|| Client {
                place,
                sender: SnapshotSender::new(participant_id, codec, config),
            });
        self.emit(participant_id, Message::Hello(self.config.hello));
    }

    /// Kind 10: the newest acknowledged snapshot still held becomes the
    /// client's base.
    pub fn handle_ack(
        &mut self,
        participant_id: u64,
        ack: &TsyncAck,
        now: Tick,
    ) -> Result<(), Refusal> {
        self.advance(now);
        let window = ack.window().map_err(|_| Refusal::Malformed)?;
        let client = self
            .clients
            .get_mut(&participant_id)
            .ok_or(Refusal::NotOptedIn)?;
        client.sender.handle_ack(&window);
        Ok(())
    }

    /// Kind 9: the piggybacked ack (when nonzero) is applied with history
    /// 0. Each frame for the sender's predicted presence object is offered
    /// to its input queue (ownership, then epoch, then sequence rules); the
    /// contiguous run released is integrated into the object's position
    /// and velocity, and its `last_input_seq` advances. Every other frame
    /// is refused and counted in the outcome; refusals are silent on the
    /// wire. Each released frame's fire command is resolved once against
    /// the rewound hit-eligible objects, and the shooter gets a kind-12
    /// answer.
    pub fn handle_input(
        &mut self,
        participant_id: u64,
        bundle: &InputBundle,
        now: Tick,
    ) -> InputOutcome {
        let mut outcome = InputOutcome::default();
        let owned = self.offer_bundle(participant_id, bundle, now, &mut outcome);
        for &object_id in &owned {
            self.release_input(participant_id, object_id, &mut outcome);
        }
        self.offered = owned;
        outcome
    }

    /// The first half of kind 9, shared with the staged path
    /// (`movement.rs`): advances to `now`, applies the piggybacked ack and
    /// offers every frame, counting into `outcome`; the objects whose
    /// queues took a frame, in bundle order. The list is the reused
    /// `offered` buffer: the caller puts it back when done with it.
    pub(super) fn offer_bundle(
        &mut self,
        participant_id: u64,
        bundle: &InputBundle,
        now: Tick,
        outcome: &mut InputOutcome,
    ) -> Vec<u32> {
        self.advance(now);
        if bundle.acked_snapshot_id != 0
            && let Some(c) = self.clients.get_mut(&participant_id)
        {
            let mut window = AckWindow::new();
            window.ack(u64::from(bundle.acked_snapshot_id));
            c.sender.handle_ack(&window);
            outcome.acked = true;
        }
        // A bundle may carry frames for several owned objects (at most 32).
        let mut owned = std::mem::take(&mut self.offered);
        owned.clear();
        for frame in &bundle.frames {
            match self.offer_input(participant_id, frame) {
                Ok(object_id) => {
                    outcome.accepted += 1;
                    if !owned.contains(&object_id) {
                        owned.push(object_id);
                    }
                }
                Err(reason) => outcome.refuse(reason),
            }
        }
        owned
    }

    /// Offers one frame; the object id it was buffered for, or why not.
    /// The sender must be the object's current owner (its presence object,
    /// or one handed to it) and the object owner-predicted.
    fn offer_input(
        &mut self,
        participant_id: u64,
        frame: &InputFrame,
    ) -> Result<u32, InputRefusal> {
        let id = frame.object_id;
        let ActorServer { inputs, worlds, .. } = self;
        let owned = inputs.get_mut(&id).filter(|o| {
            worlds
                .get(&o.world)
                .and_then(|w| w.get(id))
                .is_some_and(|obj| obj.owner == participant_id)
        });
        let Some(owned) = owned else {
            return Err(self.input_refusal(participant_id, id));
        };
        match InputRefusal::of_offer(owned.queue.handle_frame(frame)) {
            None => Ok(id),
            Some(reason) => Err(reason),
        }
    }

    /// Why a frame for `object_id` that the sender does not drive by input
    /// is refused: no presence (and nothing handed to it), its own relayed
    /// avatar, or someone else's object.
    fn input_refusal(&self, participant_id: u64, object_id: u32) -> InputRefusal {
        match self.presences.get(&participant_id) {
            None => InputRefusal::NoPresence,
            Some(p) if p.object_id == object_id && !self.inputs.contains_key(&object_id) => {
                InputRefusal::Relay
            }
            Some(_) => InputRefusal::NotOwner,
        }
    }

    /// Integrates every frame the queue of `object_id` releases into the
    /// object, publishes its watermark and resolves the fire commands of
    /// the released frames in order (§3.7 steps 6-9), counting both in
    /// `outcome`.
    fn release_input(&mut self, participant_id: u64, object_id: u32, outcome: &mut InputOutcome) {
        let ActorServer { inputs, worlds, .. } = self;
        let Some(owned) = inputs.get_mut(&object_id) else {
            return;
        };
        let Some(object) = worlds
            .get_mut(&owned.world)
            .and_then(|w| w.get_mut(object_id))
        else {
            return;
        };
        let t = &mut object.transform;
        let mut applied = 0;
        let mut fires = Vec::new();
        while let Some(released) = owned.queue.poll_released(&mut t.position, &mut t.velocity) {
            applied += 1;
            if let Some(fire) = released.fire {
                fires.push((released.input_seq, fire, released.position));
            }
        }
        object.last_input_seq = owned.queue.last_input_seq();
        let world = owned.world;
        outcome.applied += applied;
        self.resolve_fires(participant_id, object_id, world, fires, outcome);
    }

    /// Resolves released fire commands in order (`(input_seq, fire, the
    /// shooter's position after that input)`), counting into `outcome`.
    pub(super) fn resolve_fires(
        &mut self,
        participant_id: u64,
        object_id: u32,
        world: WorldKey<P>,
        fires: Vec<(u32, FireCommand, [f32; 3])>,
        outcome: &mut InputOutcome,
    ) {
        for (input_seq, fire, at) in fires {
            let shot = Shot {
                input_seq,
                fire,
                shooter_at: at,
            };
            let fired = self.resolve_fire(participant_id, object_id, world, shot);
            outcome.origin_refused += usize::from(fired.origin_refused);
            outcome.fired += 1;
            outcome.hits += usize::from(fired.hit);
            match fired.bound {
                Some(RewindBound::MaxUnlag) => outcome.unlag_clamped += 1,
                Some(RewindBound::OverCutoff) => outcome.uncompensated += 1,
                None => {}
            }
        }
    }

    /// Kind 16: spawns (or refreshes) the sender's avatar in its place and
    /// returns its object id. See the module docs for the delivery order.
    pub fn handle_presence(
        &mut self,
        participant_id: u64,
        presence: &NaPresence,
        now: Tick,
    ) -> Result<u32, Refusal> {
        self.advance(now);
        let place = self
            .clients
            .get(&participant_id)
            .map(|c| c.place)
            .ok_or(Refusal::NotOptedIn)?;
        if !presence.transform.is_finite() {
            return Err(Refusal::Malformed);
        }
        let control = if self
            .config
            .predicted_archetypes
            .contains(&presence.archetype_id)
        {
            Control::Predicted
        } else {
            Control::Relay
        };
        let existing = self.presences.get(&participant_id).copied();
        if let Some(p) = existing
            && p.place == place
            && self
                .owner_of(p.object_id)
                .is_some_and(|o| o != participant_id)
        {
            // Handed away by game logic: only its current owner moves it.
            return Err(Refusal::State(StateRefusal::NotOwner));
        }
        let repeat = existing.is_some();
        let object_id = match existing {
            Some(p) if p.place == place => p.object_id,
            Some(p) => {
                // A stale presence from another place: retire it first.
                self.despawn(p.object_id, WorldKey::Place(p.place), Some(participant_id));
                self.ids.allocate().ok_or(Refusal::IdsExhausted)?
            }
            None => self.ids.allocate().ok_or(Refusal::IdsExhausted)?,
        };
        let object = self.place_avatar(participant_id, place, object_id, presence, control);
        self.assign_input_queue(&object, place, control);
        self.presences
            .insert(participant_id, Presence { object_id, place });
        let own_spawn = spawn_of(&object);
        self.emit(participant_id, Message::Spawn(own_spawn));
        if !repeat {
            self.send_batch(participant_id, place, object_id);
        }
        if control == Control::Predicted {
            self.emit(
                participant_id,
                Message::Role(role_of(&object, RoleEvent::Assign)),
            );
        }
        let peers = self.audience_of(WorldKey::Place(place), Some(participant_id));
        self.emit_many(peers, Message::Spawn(own_spawn));
        Ok(object_id)
    }

    /// A predicted presence object gets an input queue for its ownership
    /// epoch (a refresh under the same epoch keeps the queue and its
    /// watermark); a relayed one has none.
    fn assign_input_queue(&mut self, object: &Object, place: P, control: Control) {
        if control != Control::Predicted {
            self.inputs.remove(&object.id);
            return;
        }
        self.drive_by_input(object.id, WorldKey::Place(place), object.ownership_epoch);
    }

    /// `object_id` (in `world`) now moves by the input of its owner under
    /// `epoch`: a queue is created, or an existing one restarts when the
    /// epoch changed (sequence from 1, buffered input discarded).
    pub(super) fn drive_by_input(&mut self, object_id: u32, world: WorldKey<P>, epoch: u32) {
        let params = InputParams {
            max_speed: self.config.input_max_speed,
            max_dt: self.config.input_max_dt,
            ..InputParams::from_hello(&self.config.hello)
        };
        let owned = self.inputs.entry(object_id).or_insert_with(|| Owned {
            world,
            queue: InputQueue::new(params, epoch),
        });
        owned.world = world;
        if owned.queue.epoch() != epoch {
            owned.queue.handle_epoch(epoch);
        }
    }

    /// Writes the avatar object into its place's world (keeping its
    /// generation and, on a refresh, its ownership epoch) and returns it.
    fn place_avatar(
        &mut self,
        participant_id: u64,
        place: P,
        object_id: u32,
        presence: &NaPresence,
        control: Control,
    ) -> Object {
        let world = self.world_mut(WorldKey::Place(place));
        let held = world.get(object_id);
        let object = Object {
            id: object_id,
            archetype: presence.archetype_id,
            owner: participant_id,
            role: control.role(),
            gen_epoch: held.map_or(0, |o| o.gen_epoch),
            // Ownership is assigned once per presence object (epoch 1); a
            // refresh keeps the epoch the owner already holds.
            ownership_epoch: held.map_or(1, |o| o.ownership_epoch.max(1)),
            transform: presence.transform,
            replicate_velocity: true,
            motion: Motion::OwnerDriven,
            last_input_seq: match (held, control) {
                (Some(o), Control::Predicted) => o.last_input_seq,
                _ => 0,
            },
        };
        match world.get_mut(object_id) {
            Some(o) => *o = object.clone(),
            None => world.insert(object.clone()),
        }
        object
    }

    /// Kind 18 to a newcomer: everything it can see but its own object
    /// (its place's world, then the global one), split at the batch limit;
    /// one empty batch when there is nothing.
    fn send_batch(&mut self, participant_id: u64, place: P, own: u32) {
        let spawns: Vec<NaSpawn> = [WorldKey::Place(place), WorldKey::Global]
            .into_iter()
            .filter_map(|key| self.worlds.get(&key))
            .flat_map(World::objects)
            .filter(|o| o.id != own)
            .map(spawn_of)
            .collect();
        if spawns.is_empty() {
            self.emit(participant_id, Message::SpawnBatch(NaSpawnBatch::default()));
        }
        for chunk in spawns.chunks(NaSpawnBatch::MAX_ENTRIES) {
            let batch = NaSpawnBatch {
                spawns: chunk.to_vec(),
            };
            self.emit(participant_id, Message::SpawnBatch(batch));
        }
    }

    /// Kind 20: the owner's relay-mode transform, copied verbatim after
    /// the ownership check; observers see it through snapshots.
    pub fn handle_state(
        &mut self,
        participant_id: u64,
        state: &NaState,
        now: Tick,
    ) -> Result<(), Refusal> {
        self.advance(now);
        let (object, control) = self.owned_object(participant_id, state.object_id)?;
        if control == Control::Predicted {
            return Err(Refusal::State(StateRefusal::Predicted));
        }
        if !state.transform.is_finite() {
            return Err(Refusal::State(StateRefusal::NonFinite));
        }
        object.transform = state.transform;
        Ok(())
    }

    /// The participant moved to `new_place` (room join or leave): its
    /// avatar despawns everywhere it was visible, it is told to drop the
    /// old place's actors, and its snapshots switch to the new place. It
    /// appears there when it announces presence again.
    pub fn handle_place_change(&mut self, participant_id: u64, new_place: P, now: Tick) {
        self.advance(now);
        if let Some(p) = self.presences.get(&participant_id).copied()
            && p.place != new_place
        {
            self.presences.remove(&participant_id);
            self.despawn(p.object_id, WorldKey::Place(p.place), None);
        }
        let Some(old_place) = self.clients.get(&participant_id).map(|c| c.place) else {
            return;
        };
        if old_place == new_place {
            return;
        }
        self.return_owned(participant_id);
        let stale: Vec<u32> = self
            .worlds
            .get(&WorldKey::Place(old_place))
            .map(|w| w.objects().map(|o| o.id).collect())
            .unwrap_or_default();
        if let Some(c) = self.clients.get_mut(&participant_id) {
            c.place = new_place;
        }
        for object_id in stale {
            self.emit(participant_id, Message::Despawn(NaDespawn { object_id }));
        }
    }

    /// The participant left: its avatar despawns for the peers that saw
    /// it, and its sync state is dropped.
    pub fn handle_disconnect(&mut self, participant_id: u64, now: Tick) {
        self.advance(now);
        self.clients.remove(&participant_id);
        self.lag.remove(&participant_id);
        self.return_owned(participant_id);
        if let Some(p) = self.presences.remove(&participant_id) {
            self.despawn(p.object_id, WorldKey::Place(p.place), Some(participant_id));
        }
    }
}
