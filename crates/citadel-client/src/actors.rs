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
//! What it is not: no engine objects. It reports spawns and despawns as
//! [`ActorEvent`]s. The server sends the owner its own spawn immediately
//! followed by the batch of existing actors; another client's spawn can
//! cross the announcement in flight, so after announcing, spawns are held
//! until the batch arrives and the one right before it is the local actor.

use std::collections::BTreeMap;
use std::sync::Arc;

use citadel_netcode::interp::{Interpolator, Rendered};
use citadel_netcode::receiver::{SnapshotReceiver, ViewState};
use citadel_wire::actor::{NaDespawn, NaPresence, NaSpawn, NaSpawnBatch, NaState, NaTransform};
use citadel_wire::protocol::{
    KIND_NA_DESPAWN, KIND_NA_SPAWN, KIND_NA_SPAWN_BATCH, KIND_TSYNC_HELLO, KIND_TSYNC_ROLE,
    KIND_TSYNC_SNAPSHOT,
};
use citadel_wire::tsync::{HelloParams, RoleChange};
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
                    self.interp.handle_applied(&applied);
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
                }
            }
            KIND_TSYNC_ROLE => {
                if let Ok(role) = RoleChange::decode(&envelope.body) {
                    events.push(ActorEvent::Role(role));
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
