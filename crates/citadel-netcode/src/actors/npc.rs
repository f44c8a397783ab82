//! Server-owned actors (owner 0): spawned, moved and despawned by game
//! logic, optionally walking a waypoint loop at a fixed speed on the
//! server tick without script code.
//!
//! An NPC spawned into a place's world is seen only by participants there;
//! one in the [`WorldKey::Global`] world is seen by every client. Spawns
//! reach the opted-in clients that see the world at once; later arrivals
//! get it in their presence batch. Patrols advance in the first phase of
//! [`ActorServer::handle_tick`], before the worlds step.

use citadel_wire::actor::{NaSpawn, NaTransform};
use citadel_wire::tsync::Role;

use super::{ActorServer, Message, PlaceKey, Tick, WorldKey};
use crate::world::{Motion, Object};

/// A waypoint loop.
#[derive(Debug, Clone, PartialEq)]
pub struct Patrol {
    /// Points visited in order, then from the first again (cm).
    pub waypoints: Vec<[f32; 3]>,
    /// Walking speed (cm/s).
    pub speed: f32,
}

/// A spawn request from game logic.
#[derive(Debug, Clone, PartialEq)]
pub struct NpcSpawn<P> {
    /// Engine class id.
    pub archetype: u16,
    /// Start position (cm).
    pub position: [f32; 3],
    /// The world it lives in: a place's, or the global one.
    pub world: WorldKey<P>,
    /// Optional patrol (ignored without waypoints or with a non-finite
    /// speed).
    pub patrol: Option<Patrol>,
}

#[derive(Debug, Clone)]
pub(super) struct Npc<P> {
    pub(super) world: WorldKey<P>,
    /// The loop and the index of the waypoint it walks to.
    patrol: Option<(Patrol, usize)>,
}

fn finite(values: &[f32]) -> bool {
    values.iter().all(|v| v.is_finite())
}

impl<P: PlaceKey> ActorServer<P> {
    /// Spawns a server-owned actor and announces it; returns its id, or
    /// `None` if ids are exhausted or the position is not finite.
    pub fn handle_npc_spawn(&mut self, spawn: NpcSpawn<P>, now: Tick) -> Option<u32> {
        self.advance(now);
        if !finite(&spawn.position) {
            return None;
        }
        let patrol = spawn
            .patrol
            .filter(|p| !p.waypoints.is_empty() && p.speed.is_finite());
        let id = self.ids.allocate()?;
        let object = Object {
            id,
            archetype: spawn.archetype,
            owner: 0,
            role: Role::ServerSimulated,
            gen_epoch: 0,
            ownership_epoch: 0,
            transform: NaTransform {
                position: spawn.position,
                ..NaTransform::IDENTITY
            },
            replicate_velocity: true,
            // Patrols and script moves set the position explicitly.
            motion: Motion::OwnerDriven,
            last_input_seq: 0,
        };
        let announce = NaSpawn {
            object_id: id,
            archetype_id: object.archetype,
            owner: 0,
            transform: object.transform,
        };
        self.world_mut(spawn.world).insert(object);
        self.npcs.insert(
            id,
            Npc {
                world: spawn.world,
                patrol: patrol.map(|p| (p, 0)),
            },
        );
        let audience = self.audience_of(spawn.world, None);
        self.emit_many(audience, Message::Spawn(announce));
        Some(id)
    }

    /// Sets an NPC's position and velocity (for smooth interpolation);
    /// false for an unknown id or non-finite values.
    pub fn handle_npc_move(
        &mut self,
        object_id: u32,
        position: [f32; 3],
        velocity: Option<[f32; 3]>,
        now: Tick,
    ) -> bool {
        self.advance(now);
        let velocity = velocity.unwrap_or([0.0; 3]);
        if !finite(&position) || !finite(&velocity) {
            return false;
        }
        let Some(key) = self.npcs.get(&object_id).map(|n| n.world) else {
            return false;
        };
        match self.worlds.get_mut(&key).and_then(|w| w.get_mut(object_id)) {
            Some(o) => {
                o.transform.position = position;
                o.transform.velocity = velocity;
                true
            }
            None => false,
        }
    }

    /// Removes an NPC everywhere it is visible; false for an unknown id.
    pub fn handle_npc_despawn(&mut self, object_id: u32, now: Tick) -> bool {
        self.advance(now);
        let Some(npc) = self.npcs.remove(&object_id) else {
            return false;
        };
        self.despawn(object_id, npc.world, None);
        true
    }

    /// Tick phase 1: every patrolling NPC walks `dt` seconds toward its
    /// waypoint; on arrival (within one step, or 1 cm) it snaps to it and
    /// turns to the next.
    pub(super) fn step_patrols(&mut self, dt: f32) {
        let ActorServer { npcs, worlds, .. } = self;
        for (&id, npc) in npcs.iter_mut() {
            let Some((patrol, next)) = &mut npc.patrol else {
                continue;
            };
            let Some(object) = worlds
                .get_mut(&npc.world)
                .and_then(|w| w.get_mut(id))
                .filter(|o| o.owner == 0)
            else {
                // Missing, or handed to a participant: its patrol pauses.
                continue;
            };
            walk(patrol, next, object, dt);
        }
    }
}

/// One patrol step of `object` toward `patrol.waypoints[*next]`.
fn walk(patrol: &Patrol, next: &mut usize, object: &mut Object, dt: f32) {
    let Some(target) = patrol.waypoints.get(*next).copied() else {
        return;
    };
    let pos = object.transform.position;
    let d = [target[0] - pos[0], target[1] - pos[1], target[2] - pos[2]];
    let dist = (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt();
    let step = patrol.speed.max(0.0) * dt;
    if dist <= step.max(1.0) {
        object.transform.position = target;
        *next = (*next + 1) % patrol.waypoints.len().max(1);
        return;
    }
    let u = [d[0] / dist, d[1] / dist, d[2] / dist];
    object.transform.position = [
        pos[0] + u[0] * step,
        pos[1] + u[1] * step,
        pos[2] + u[2] * step,
    ];
    object.transform.velocity = [
        u[0] * patrol.speed,
        u[1] * patrol.speed,
        u[2] * patrol.speed,
    ];
}
