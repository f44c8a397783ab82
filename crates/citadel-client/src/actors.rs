//! The client half of networked actors and transform sync, transport
//! independent: feed it every received envelope, send what it asks for,
//! render what it holds.
//!
//! Call order: send [`hello`] (kind 7) and, once the reply arrived, the
//! envelope from [`ActorView::announce`] (kind 16); pass each received envelope to
//! [`ActorView::handle_envelope`] (it reacts to kinds 7, 8, 11, 17, 18, 19
//! and ignores the rest); after each call send the acknowledgement from
//! [`ActorView::poll_ack`]; send your own transform with [`state`] at a
//! steady rate (relay mode). [`ActorView::render`] gives every remote
//! actor's interpolated transform.
//!
//! Predicted mode: every object a ROLE OwnerPredicted names this client
//! the owner of (its avatar by Assign, anything game logic hands it by
//! Handoff; at most [`MAX_PREDICTED`]) is predicted on its own, and a ROLE
//! naming another owner (or the server), or a despawn, stops only that
//! object's prediction. Once per local simulation step call
//! [`ActorView::handle_input`] for each owned object you move, with the
//! move intent and an optional fire command, then send the one kind-9
//! envelope [`ActorView::poll_input`] returns (unreliably where possible):
//! it carries the unacknowledged frames of every owned object. With one
//! object, [`ActorView::input`] does both. The input is applied at once
//! ([`ActorView::predicted_position`] draws an object, smoothed); every
//! snapshot carrying an object's `last_input_seq` reconciles that object
//! ([`ActorEvent::Corrected`] with its id and the correction magnitude)
//! and every kind-12 answer becomes [`ActorEvent::FireResult`]. The
//! client never decides a hit.
//!
//! What it is not: no engine objects. It reports spawns and despawns as
//! [`ActorEvent`]s. The server sends the owner its own spawn immediately
//! followed by the batch of existing actors; another client's spawn can
//! cross the announcement in flight, so after announcing, spawns are held
//! until the batch arrives and the one right before it is the local actor.

use std::collections::BTreeMap;
use std::sync::Arc;

use citadel_netcode::input::InputParams;
use citadel_netcode::interp::{Interpolator, Rendered};
use citadel_netcode::predict::{Correction, Predictor};
pub use citadel_netcode::predictions::MAX_PREDICTED;
use citadel_netcode::predictions::Predictions;
use citadel_netcode::receiver::{SnapshotReceiver, ViewState};
use citadel_wire::actor::{NaDespawn, NaPresence, NaSpawn, NaSpawnBatch, NaState, NaTransform};
use citadel_wire::protocol::{
    KIND_NA_DESPAWN, KIND_NA_SPAWN, KIND_NA_SPAWN_BATCH, KIND_TSYNC_HELLO, KIND_TSYNC_REWIND,
    KIND_TSYNC_ROLE, KIND_TSYNC_SNAPSHOT,
};
use citadel_wire::tsync::{FireCommand, HelloParams, Rewind, RoleChange};
use citadel_wire::{Envelope, WireBody};

/// The opt-in HELLO (empty body).
pub fn hello() -> Envelope {
    Envelope::new(KIND_TSYNC_HELLO, Vec::new())
}

/// Announce this client's avatar.
pub fn presence(archetype_id: u16, transform: NaTransform) -> Envelope {
    NaPresence {
        archetype_id,
        transform,
    }
    .to_envelope()
}

/// The owner's relay-mode transform report (send unreliably where possible).
pub fn state(object_id: u32, transform: NaTransform) -> Envelope {
    NaState {
        object_id,
        transform,
    }
    .to_envelope()
}

/// One actor this client knows about.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Actor {
    /// Object id.
    pub object_id: u32,
    /// Engine class id.
    pub archetype_id: u16,
    /// Owning participant (0 = server-owned).
    pub owner: u64,
    /// Whether this is the local player's own actor.
    pub is_local: bool,
    /// Transform at spawn.
    pub spawn: NaTransform,
}

/// What changed.
#[derive(Debug, Clone, PartialEq)]
pub enum ActorEvent {
    /// HELLO answered: snapshots can now be decoded.
    Negotiated(HelloParams),
    /// An actor appeared.
    Spawned(Actor),
    /// An actor disappeared.
    Despawned(u32),
    /// A role or relevancy transition.
    Role(RoleChange),
    /// A snapshot acknowledged this client's input on one of its predicted
    /// objects (`object_id`) and that prediction was reconciled (magnitude
    /// 0 when it matched).
    Corrected(Correction),
    /// The server resolved one of this client's fire commands (kind 12).
    FireResult(Rewind),
}

/// The client's view of actors.
#[derive(Debug)]
pub struct ActorView {
    params: Option<HelloParams>,
    receiver: Option<SnapshotReceiver>,
    interp: Interpolator,
    actors: BTreeMap<u32, Actor>,
    local: Option<u32>,
    newest_tick: u32,
    pending_ack: Option<Envelope>,
    expecting_own: bool,
    held_spawns: Vec<NaSpawn>,
    /// This client's participant id (the owner field of its own spawn).
    me: Option<u64>,
    newest_snapshot: u32,
    input_params: Option<InputParams>,
    predictions: Predictions,
}

impl Default for ActorView {
    fn default() -> Self {
        ActorView {
            params: None,
            receiver: None,
            interp: Interpolator::new(60),
            actors: BTreeMap::new(),
            local: None,
            newest_tick: 0,
            pending_ack: None,
            expecting_own: false,
            held_spawns: Vec::new(),
            me: None,
            newest_snapshot: 0,
            input_params: None,
            predictions: Predictions::new(),
        }
    }
}

impl ActorView {
    /// An empty view (send [`hello`] to start).
    pub fn new() -> Self {
        Self::default()
    }

    /// The local player's own object id, once spawned.
    pub fn local_object(&self) -> Option<u32> {
        self.local
    }

    /// Every known actor.
    pub fn actors(&self) -> impl Iterator<Item = &Actor> {
        self.actors.values()
    }

    /// The newest reconstructed snapshot state.
    pub fn latest(&self) -> Option<&Arc<ViewState>> {
        self.receiver.as_ref().and_then(SnapshotReceiver::latest)
    }

    /// Interpolated transforms of every object, rendered in the past by the
    /// adaptive delay.
    pub fn render(&self) -> BTreeMap<u32, Rendered> {
        self.interp
            .sample(self.interp.render_tick(f64::from(self.newest_tick)))
    }

    /// Handles one received envelope; returns what changed.
    pub fn handle_envelope(&mut self, envelope: &Envelope) -> Vec<ActorEvent> {
        let mut events = Vec::new();
        match envelope.kind {
            KIND_TSYNC_HELLO => {
                if let Ok(params) = HelloParams::decode(&envelope.body)
                    && let Ok(codec) = params.codec()
                {
                    self.receiver = Some(SnapshotReceiver::new(codec));
                    self.interp = Interpolator::new(params.sim_rate_hz);
                    self.params = Some(params);
                    events.push(ActorEvent::Negotiated(params));
                }
            }
            KIND_TSYNC_SNAPSHOT => {
                if let Some(receiver) = &mut self.receiver
                    && let Ok(applied) = receiver.handle_snapshot(&envelope.body)
                {
                    self.newest_tick = applied.server_tick;
                    self.newest_snapshot = applied.snapshot_id;
                    self.interp.handle_applied(&applied);
                    let corrected = self.predictions.handle_applied(&applied);
                    events.extend(corrected.into_iter().map(ActorEvent::Corrected));
                    if let Some(ack) = receiver.poll_ack() {
                        self.pending_ack = Some(ack.to_envelope());
                    }
                }
            }
            KIND_NA_SPAWN => {
                if let Ok(spawn) = NaSpawn::decode(&envelope.body) {
                    if self.expecting_own {
                        // Another client's spawn may cross our announcement in
                        // flight; ours is the one right before the batch.
                        self.held_spawns.push(spawn);
                    } else {
                        events.push(self.spawned(spawn, false));
                    }
                }
            }
            KIND_NA_SPAWN_BATCH => {
                if let Ok(batch) = NaSpawnBatch::decode(&envelope.body) {
                    if self.expecting_own {
                        self.expecting_own = false;
                        let held = std::mem::take(&mut self.held_spawns);
                        let own = held.len().checked_sub(1);
                        for (i, spawn) in held.into_iter().enumerate() {
                            let is_own = Some(i) == own;
                            if is_own {
                                self.local = Some(spawn.object_id);
                                self.me = Some(spawn.owner);
                            }
                            events.push(self.spawned(spawn, is_own));
                        }
                    }
                    for spawn in batch.spawns {
                        events.push(self.spawned(spawn, false));
                    }
                }
            }
            KIND_NA_DESPAWN => {
                if let Ok(d) = NaDespawn::decode(&envelope.body) {
                    if self.actors.remove(&d.object_id).is_some() {
                        events.push(ActorEvent::Despawned(d.object_id));
                    }
                    if self.local == Some(d.object_id) {
                        self.local = None;
                    }
                    self.predictions.handle_forget(d.object_id);
                }
            }
            KIND_TSYNC_ROLE => {
                if let Ok(role) = RoleChange::decode(&envelope.body) {
                    self.handle_role(&role);
                    events.push(ActorEvent::Role(role));
                }
            }
            KIND_TSYNC_REWIND => {
                if let Ok(result) = Rewind::decode(&envelope.body) {
                    events.push(ActorEvent::FireResult(result));
                }
            }
            _ => {}
        }
        events
    }

    /// Builds the presence announcement and remembers that the next spawn
    /// is this client's own actor.
    pub fn announce(&mut self, archetype_id: u16, transform: NaTransform) -> Envelope {
        self.expecting_own = self.local.is_none();
        presence(archetype_id, transform)
    }

    fn spawned(&mut self, spawn: NaSpawn, own: bool) -> ActorEvent {
        let actor = Actor {
            object_id: spawn.object_id,
            archetype_id: spawn.archetype_id,
            owner: spawn.owner,
            is_local: own || self.local == Some(spawn.object_id),
            spawn: spawn.transform,
        };
        self.actors.insert(spawn.object_id, actor);
        ActorEvent::Spawned(actor)
    }

    /// Starts, restarts or stops predicting one object on a role
    /// transition: an OwnerPredicted role naming this client predicts it (a
    /// new epoch restarts its sequence); any other owner stops it; a role
    /// older than the predicted epoch is ignored; the other predicted
    /// objects are untouched.
    fn handle_role(&mut self, role: &RoleChange) {
        let mine = self.me.is_some_and(|me| me != 0 && me == role.owner);
        let start = self.position_of(role.object_id);
        let tolerance = self
            .params
            .map_or(0.125, |h| 1.0 / h.position_values_per_unit.max(1) as f32);
        let params = self.input_params();
        let _ = self
            .predictions
            .handle_role(role, mine, start, params, tolerance);
    }

    /// Where the client holds `object_id` now: the newest snapshot, else
    /// its spawn transform, else the origin.
    fn position_of(&self, object_id: u32) -> [f32; 3] {
        self.latest()
            .and_then(|s| s.get(&object_id))
            .map(|v| v.position)
            .or_else(|| self.actors.get(&object_id).map(|a| a.spawn.position))
            .unwrap_or([0.0; 3])
    }

    fn input_params(&self) -> InputParams {
        self.input_params.unwrap_or_else(|| {
            self.params
                .as_ref()
                .map_or_else(InputParams::default, InputParams::from_hello)
        })
    }

    /// The server's input clamps when they differ from the spec's
    /// (`transform_sync.input_max_speed` / `input_max_dt`); the position
    /// bounds come from HELLO. Prediction matches the server only with the
    /// same clamps.
    pub fn set_input_clamps(&mut self, max_speed: f32, max_dt: f32) {
        let base = self.input_params();
        self.input_params = Some(InputParams {
            max_speed,
            max_dt,
            ..base
        });
    }

    /// The objects this client predicts (ROLE made it their owner), in id
    /// order.
    pub fn predicted_objects(&self) -> impl Iterator<Item = u32> + '_ {
        self.predictions.objects()
    }

    /// Whether this client predicts `object_id`.
    pub fn is_predicted(&self, object_id: u32) -> bool {
        self.predictions.get(object_id).is_some()
    }

    /// The prediction of `object_id` (position, unacknowledged inputs, the
    /// last correction).
    pub fn prediction(&self, object_id: u32) -> Option<&Predictor> {
        self.predictions.get(object_id)
    }

    /// Objects handed to this client that it does not predict because it
    /// predicted [`MAX_PREDICTED`] already (ROLE frames ignored); they are
    /// drawn from snapshots and stay still until input moves them.
    pub fn predictions_refused(&self) -> u64 {
        self.predictions.refused()
    }

    /// One local simulation step of the predicted `object_id`: `dt`
    /// seconds at `move_velocity` (cm/s), optionally firing a ray from
    /// `origin` along `direction` (cm). Applied locally at once; send
    /// [`ActorView::poll_input`] after the step. `false` (nothing done)
    /// when the object is not predicted.
    pub fn handle_input(
        &mut self,
        object_id: u32,
        dt: f32,
        move_velocity: [f32; 3],
        fire: Option<FireCommand>,
    ) -> bool {
        let tick = self.newest_tick;
        self.predictions
            .handle_input(object_id, tick, dt, move_velocity, fire)
            .is_some()
    }

    /// The kind-9 envelope to send after a step: every predicted object's
    /// unacknowledged inputs (oldest first, each object's fair share of
    /// the bundle), with the newest snapshot acknowledged; `None` when
    /// everything is acknowledged.
    pub fn poll_input(&self) -> Option<Envelope> {
        self.predictions
            .poll_bundle(self.newest_snapshot)
            .map(|b| b.to_envelope())
    }

    /// [`ActorView::handle_input`] then [`ActorView::poll_input`]: one
    /// step of one object (the single-avatar case). `None` when the
    /// object is not predicted.
    pub fn input(
        &mut self,
        object_id: u32,
        dt: f32,
        move_velocity: [f32; 3],
        fire: Option<FireCommand>,
    ) -> Option<Envelope> {
        if !self.handle_input(object_id, dt, move_velocity, fire) {
            return None;
        }
        self.poll_input()
    }

    /// Where to draw the predicted `object_id` this frame (the prediction
    /// plus a decaying correction offset); call once per rendered frame
    /// per object. `None` when it is not predicted.
    pub fn predicted_position(&mut self, object_id: u32) -> Option<[f32; 3]> {
        self.predictions.poll_render(object_id)
    }

    /// The acknowledgement to send after the last applied snapshot.
    pub fn poll_ack(&mut self) -> Option<Envelope> {
        self.pending_ack.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spawn(object_id: u32, owner: u64) -> Envelope {
        NaSpawn {
            object_id,
            archetype_id: 0,
            owner,
            transform: NaTransform::IDENTITY,
        }
        .to_envelope()
    }

    #[test]
    fn a_spawn_crossing_the_announcement_is_not_taken_for_ours() {
        let mut view = ActorView::new();
        let _ = view.announce(0, NaTransform::IDENTITY);
        // Another player's spawn was already in flight, then ours, then the batch.
        assert!(
            view.handle_envelope(&spawn(1, 10)).is_empty(),
            "held until the batch"
        );
        assert!(view.handle_envelope(&spawn(2, 20)).is_empty());
        let events = view.handle_envelope(
            &NaSpawnBatch {
                spawns: vec![NaSpawn {
                    object_id: 1,
                    archetype_id: 0,
                    owner: 10,
                    transform: NaTransform::IDENTITY,
                }],
            }
            .to_envelope(),
        );
        assert_eq!(view.local_object(), Some(2));
        let local: Vec<(u32, bool)> = events
            .iter()
            .filter_map(|e| match e {
                ActorEvent::Spawned(a) => Some((a.object_id, a.is_local)),
                _ => None,
            })
            .collect();
        assert_eq!(local, vec![(1, false), (2, true), (1, false)]);
        // Later spawns are remote and emitted at once.
        assert_eq!(view.handle_envelope(&spawn(3, 30)).len(), 1);
        let despawn = NaDespawn { object_id: 2 }.to_envelope();
        assert_eq!(
            view.handle_envelope(&despawn),
            vec![ActorEvent::Despawned(2)]
        );
        assert_eq!(view.local_object(), None);
    }
}
