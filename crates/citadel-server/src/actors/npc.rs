//! Server-owned actors (owner 0): spawned, moved and despawned by game logic
//! (Lua `spawn_actor` / `move_actor` / `despawn_actor`), optionally walking a
//! waypoint loop at a fixed speed on the server tick without script code.
//!
//! An NPC spawned with a room lives in that place's world (only
//! participants there see it); without one it lives in the
//! [`WorldKey::Global`] world every client sees.

use citadel_netcode::world::{Motion, Object, World};
use citadel_wire::WireBody;
use citadel_wire::actor::{NaSpawn, NaTransform};
use citadel_wire::tsync::Role;

use super::{HubState, TransformHub, WorldKey};

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
pub struct NpcSpawn {
    /// Engine class id.
    pub archetype: u16,
    /// Start position (cm).
    pub position: [f32; 3],
    /// The world it lives in: a place's, or the global one.
    pub world: WorldKey,
    /// Optional patrol.
    pub patrol: Option<Patrol>,
}

#[derive(Debug, Clone)]
pub(super) struct Npc {
    world: WorldKey,
    patrol: Option<(Patrol, usize)>,
}

/// Advances every patrolling NPC by one tick of `dt` seconds.
pub(super) fn step_patrols(st: &mut HubState, dt: f32) {
    let ids: Vec<u32> = st
        .npcs
        .iter()
        .filter(|(_, n)| n.patrol.is_some())
        .map(|(id, _)| *id)
        .collect();
    for id in ids {
        let Some(npc) = st.npcs.get(&id).cloned() else {
            continue;
        };
        let Some((patrol, idx)) = npc.patrol else {
            continue;
        };
        let Some(object) = st.worlds.get_mut(&npc.world).and_then(|w| w.get_mut(id)) else {
            continue;
        };
        let Some(target) = patrol.waypoints.get(idx).copied() else {
            continue;
        };
        let pos = object.transform.position;
        let d = [target[0] - pos[0], target[1] - pos[1], target[2] - pos[2]];
        let dist = (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt();
        let step = patrol.speed.max(0.0) * dt;
        let mut next_idx = idx;
        if dist <= step.max(1.0) {
            object.transform.position = target;
            next_idx = (idx + 1) % patrol.waypoints.len().max(1);
        } else {
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
        if let Some(n) = st.npcs.get_mut(&id) {
            n.patrol = Some((patrol, next_idx));
        }
    }
}

impl TransformHub {
    /// Spawns a server-owned actor; returns its id, or `None` if ids are
    /// exhausted or the position is not finite.
    pub fn spawn_npc(&self, spawn: NpcSpawn) -> Option<u32> {
        if !spawn.position.iter().all(|v| v.is_finite()) {
            return None;
        }
        let patrol = spawn
            .patrol
            .filter(|p| !p.waypoints.is_empty() && p.speed.is_finite());
        let mut st = self.lock();
        let id = st.ids.allocate()?;
        let object = Object {
            id,
            archetype: spawn.archetype,
            owner: 0,
            role: Role::ServerSimulated,
            gen_epoch: 0,
            ownership_epoch: 0,
            transform: Self::npc_transform(spawn.position[0], spawn.position[1], spawn.position[2]),
            replicate_velocity: true,
            // Patrols and script moves set position explicitly each tick.
            motion: Motion::OwnerDriven,
            last_input_seq: 0,
        };
        let announce = NaSpawn {
            object_id: id,
            archetype_id: object.archetype,
            owner: 0,
            transform: object.transform,
        }
        .to_envelope();
        let sim_hz = self.config.hello.sim_rate_hz;
        st.worlds
            .entry(spawn.world)
            .or_insert_with(|| World::new(sim_hz))
            .insert(object);
        st.npcs.insert(
            id,
            Npc {
                world: spawn.world,
                patrol: patrol.map(|p| (p, 0)),
            },
        );
        self.send_to_clients(&st, &announce, |_, c| {
            spawn.world == WorldKey::Global || spawn.world == WorldKey::Place(c.place)
        });
        Some(id)
    }

    /// Sets an NPC's position (and velocity, for smooth interpolation).
    pub fn move_npc(&self, id: u32, position: [f32; 3], velocity: Option<[f32; 3]>) -> bool {
        if !position
            .iter()
            .chain(velocity.iter().flatten())
            .all(|v| v.is_finite())
        {
            return false;
        }
        let mut st = self.lock();
        let Some(key) = st.npcs.get(&id).map(|n| n.world) else {
            return false;
        };
        match st.worlds.get_mut(&key).and_then(|w| w.get_mut(id)) {
            Some(o) => {
                o.transform.position = position;
                o.transform.velocity = velocity.unwrap_or([0.0; 3]);
                true
            }
            None => false,
        }
    }

    /// Removes an NPC everywhere it is visible.
    pub fn despawn_npc(&self, id: u32) -> bool {
        let mut st = self.lock();
        let Some(npc) = st.npcs.remove(&id) else {
            return false;
        };
        self.despawn_locked(&mut st, id, npc.world, None);
        true
    }

    /// Every NPC's transform (tests, status).
    pub fn npc_transform_of(&self, id: u32) -> Option<NaTransform> {
        let st = self.lock();
        let key = st.npcs.get(&id)?.world;
        st.worlds.get(&key)?.get(id).map(|o| o.transform)
    }
}
