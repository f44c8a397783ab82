//! One transform world (a room, or the default dimension, or the global NPC
//! space): its objects and the fixed simulation step.
//!
//! Call order per server tick: mutate (spawn, despawn, owner state, script
//! moves) → [`World::handle_sim_tick`] → [`World::latch`]. Ids come from a
//! caller-supplied allocator so ids stay unique across every world a client
//! can see.

use std::collections::BTreeMap;

use citadel_wire::actor::NaTransform;
use citadel_wire::tsync::Role;

/// How an object moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Motion {
    /// Integrated by the sim tick (position += velocity × dt).
    Simulated,
    /// Moved only by its owner (relay NA_STATE or validated input); the sim
    /// tick never integrates it.
    OwnerDriven,
}

/// One replicated object.
#[derive(Debug, Clone, PartialEq)]
pub struct Object {
    /// Object id (non-zero).
    pub id: u32,
    /// Engine class id.
    pub archetype: u16,
    /// Owning participant (0 = server).
    pub owner: u64,
    /// Replication role.
    pub role: Role,
    /// Bumped when an id is respawned.
    pub gen_epoch: u16,
    /// Bumped on every ownership assignment (first is 1).
    pub ownership_epoch: u32,
    /// Current transform (cm, quaternion, cm/s).
    pub transform: NaTransform,
    /// Whether velocity is replicated.
    pub replicate_velocity: bool,
    /// How it moves.
    pub motion: Motion,
    /// Highest contiguous applied owner input (predicted mode).
    pub last_input_seq: u32,
}

/// Lowest-free id allocation shared by every world of a node.
#[derive(Debug, Default, Clone)]
pub struct IdAllocator {
    used: std::collections::BTreeSet<u32>,
}

impl IdAllocator {
    /// Takes the lowest free positive id (`None` if all 2^32-1 are used).
    pub fn allocate(&mut self) -> Option<u32> {
        let mut candidate = 1u32;
        for &id in &self.used {
            if id > candidate {
                break;
            }
            candidate = id.checked_add(1)?;
        }
        self.used.insert(candidate);
        Some(candidate)
    }
    /// Returns an id.
    pub fn release(&mut self, id: u32) {
        self.used.remove(&id);
    }
    /// Ids in use.
    pub fn len(&self) -> usize {
        self.used.len()
    }
    /// Whether none are in use.
    pub fn is_empty(&self) -> bool {
        self.used.is_empty()
    }
}

/// A world of objects stepped at a fixed rate.
#[derive(Debug, Clone)]
pub struct World {
    objects: BTreeMap<u32, Object>,
    tick: u32,
    dt: f32,
}

impl World {
    /// An empty world stepping at `sim_rate_hz` (at least 1).
    pub fn new(sim_rate_hz: u8) -> Self {
        World {
            objects: BTreeMap::new(),
            tick: 0,
            dt: 1.0 / f32::from(sim_rate_hz.max(1)),
        }
    }

    /// Completed simulation ticks (wrapping).
    pub fn tick(&self) -> u32 {
        self.tick
    }

    /// Inserts (or replaces, bumping `gen_epoch`) an object.
    pub fn insert(&mut self, mut object: Object) {
        if let Some(old) = self.objects.get(&object.id) {
            object.gen_epoch = old.gen_epoch.wrapping_add(1);
        }
        self.objects.insert(object.id, object);
    }

    /// Removes an object.
    pub fn remove(&mut self, id: u32) -> Option<Object> {
        self.objects.remove(&id)
    }

    /// One object.
    pub fn get(&self, id: u32) -> Option<&Object> {
        self.objects.get(&id)
    }

    /// One object, mutably.
    pub fn get_mut(&mut self, id: u32) -> Option<&mut Object> {
        self.objects.get_mut(&id)
    }

    /// All objects in id order.
    pub fn objects(&self) -> impl Iterator<Item = &Object> {
        self.objects.values()
    }

    /// Number of objects.
    pub fn len(&self) -> usize {
        self.objects.len()
    }

    /// Whether the world is empty.
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// One fixed step: integrates every simulated object and advances the
    /// tick.
    pub fn handle_sim_tick(&mut self) {
        let dt = self.dt;
        for object in self.objects.values_mut() {
            if object.motion == Motion::Simulated {
                let t = &mut object.transform;
                for axis in 0..3 {
                    let next = t.position[axis] + t.velocity[axis] * dt;
                    t.position[axis] = if next.is_finite() {
                        next
                    } else {
                        t.position[axis]
                    };
                }
            }
        }
        self.tick = self.tick.wrapping_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(id: u32, motion: Motion, vx: f32) -> Object {
        Object {
            id,
            archetype: 0,
            owner: 0,
            role: Role::ServerSimulated,
            gen_epoch: 0,
            ownership_epoch: 0,
            transform: NaTransform {
                velocity: [vx, 0.0, 0.0],
                ..NaTransform::IDENTITY
            },
            replicate_velocity: true,
            motion,
            last_input_seq: 0,
        }
    }

    #[test]
    fn only_simulated_objects_are_integrated() {
        let mut w = World::new(10);
        w.insert(object(1, Motion::Simulated, 100.0));
        w.insert(object(2, Motion::OwnerDriven, 100.0));
        w.handle_sim_tick();
        assert!((w.get(1).unwrap().transform.position[0] - 10.0).abs() < 1e-4);
        assert_eq!(w.get(2).unwrap().transform.position[0], 0.0);
        assert_eq!(w.tick(), 1);
        w.insert(object(1, Motion::Simulated, 0.0));
        assert_eq!(w.get(1).unwrap().gen_epoch, 1, "respawn bumps gen_epoch");
    }

    #[test]
    fn lowest_free_ids() {
        let mut ids = IdAllocator::default();
        assert_eq!(
            (ids.allocate(), ids.allocate(), ids.allocate()),
            (Some(1), Some(2), Some(3))
        );
        ids.release(2);
        assert_eq!(ids.allocate(), Some(2));
        assert_eq!(ids.allocate(), Some(4));
    }
}
