//! Networked-actor bodies, kinds 16-20 (all big-endian).
//!
//! The 40-byte transform is raw `f32`: position[3] (cm), rotation[4] (x, y,
//! z, w), velocity[3] (cm/s). Decoders reject bodies shorter than the layout
//! and ignore extra trailing bytes (compatibility with existing clients);
//! encoders never emit extra bytes.

use crate::body::{ByteReader, put_f32s, wire_body};
use crate::error::DecodeError;
use crate::protocol::{
    KIND_NA_DESPAWN, KIND_NA_PRESENCE, KIND_NA_SPAWN, KIND_NA_SPAWN_BATCH, KIND_NA_STATE,
};

/// Size of the raw transform.
pub const NA_TRANSFORM_BYTES: usize = 40;
/// Size of a kind-16 body.
pub const NA_PRESENCE_BYTES: usize = 2 + NA_TRANSFORM_BYTES;
/// Size of a kind-17 body (and of one kind-18 entry).
pub const NA_SPAWN_BYTES: usize = 4 + 2 + 8 + NA_TRANSFORM_BYTES;
/// Size of a kind-19 body.
pub const NA_DESPAWN_BYTES: usize = 4;
/// Size of a kind-20 body.
pub const NA_STATE_BYTES: usize = 4 + NA_TRANSFORM_BYTES;

/// Raw actor transform.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct NaTransform {
    /// Position in cm.
    pub position: [f32; 3],
    /// Rotation quaternion, x y z w.
    pub rotation: [f32; 4],
    /// Velocity in cm/s.
    pub velocity: [f32; 3],
}

impl NaTransform {
    /// Identity rotation at the origin, at rest.
    pub const IDENTITY: NaTransform = NaTransform {
        position: [0.0; 3],
        rotation: [0.0, 0.0, 0.0, 1.0],
        velocity: [0.0; 3],
    };

    /// Appends the 40 bytes.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        put_f32s(out, &self.position);
        put_f32s(out, &self.rotation);
        put_f32s(out, &self.velocity);
    }

    /// Reads the 40 bytes.
    pub fn read(r: &mut ByteReader<'_>) -> Result<Self, DecodeError> {
        Ok(NaTransform {
            position: r.vec3()?,
            rotation: r.vec4()?,
            velocity: r.vec3()?,
        })
    }

    /// Whether every component is finite.
    pub fn is_finite(&self) -> bool {
        self.position
            .iter()
            .chain(&self.rotation)
            .chain(&self.velocity)
            .all(|v| v.is_finite())
    }
}

/// Kind 16: a client announces its avatar.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NaPresence {
    /// Registered archetype.
    pub archetype_id: u16,
    /// Initial transform.
    pub transform: NaTransform,
}

impl NaPresence {
    /// Appends the 42-byte body.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.archetype_id.to_be_bytes());
        self.transform.encode_into(out);
    }
    /// Decodes; shorter than 42 bytes is truncated.
    pub fn decode(body: &[u8]) -> Result<Self, DecodeError> {
        let mut r = ByteReader::new(body);
        Ok(NaPresence {
            archetype_id: r.u16()?,
            transform: NaTransform::read(&mut r)?,
        })
    }
}
wire_body!(NaPresence, KIND_NA_PRESENCE);

/// Kind 17: one actor appears.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NaSpawn {
    /// Server-assigned object id.
    pub object_id: u32,
    /// Registered archetype.
    pub archetype_id: u16,
    /// Owning participant (0 = server-owned).
    pub owner: u64,
    /// Transform at spawn.
    pub transform: NaTransform,
}

impl NaSpawn {
    /// Appends the 54-byte body.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.object_id.to_be_bytes());
        out.extend_from_slice(&self.archetype_id.to_be_bytes());
        out.extend_from_slice(&self.owner.to_be_bytes());
        self.transform.encode_into(out);
    }
    fn read(r: &mut ByteReader<'_>) -> Result<Self, DecodeError> {
        Ok(NaSpawn {
            object_id: r.u32()?,
            archetype_id: r.u16()?,
            owner: r.u64()?,
            transform: NaTransform::read(r)?,
        })
    }
    /// Decodes; shorter than 54 bytes is truncated.
    pub fn decode(body: &[u8]) -> Result<Self, DecodeError> {
        Self::read(&mut ByteReader::new(body))
    }
}
wire_body!(NaSpawn, KIND_NA_SPAWN);

/// Kind 18: every actor already visible, sent to a joining client.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NaSpawnBatch {
    /// The spawns (at most 65 535 are encoded).
    pub spawns: Vec<NaSpawn>,
}

impl NaSpawnBatch {
    /// Largest batch one envelope can count.
    pub const MAX_ENTRIES: usize = u16::MAX as usize;

    /// Appends the body; entries past [`Self::MAX_ENTRIES`] are not written
    /// (split larger sets into several batches).
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        let count = self.spawns.len().min(Self::MAX_ENTRIES);
        out.reserve(2 + count * NA_SPAWN_BYTES);
        out.extend_from_slice(&(count as u16).to_be_bytes());
        for spawn in &self.spawns[..count] {
            spawn.encode_into(out);
        }
    }
    /// Decodes; a count whose entries overrun the body is truncated.
    pub fn decode(body: &[u8]) -> Result<Self, DecodeError> {
        let mut r = ByteReader::new(body);
        let count = usize::from(r.u16()?);
        if r.remaining() < count * NA_SPAWN_BYTES {
            return Err(DecodeError::Truncated);
        }
        let spawns = (0..count)
            .map(|_| NaSpawn::read(&mut r))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(NaSpawnBatch { spawns })
    }
}
wire_body!(NaSpawnBatch, KIND_NA_SPAWN_BATCH);

/// Kind 19: an actor disappears.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NaDespawn {
    /// The removed object.
    pub object_id: u32,
}

impl NaDespawn {
    /// Appends the 4-byte body.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.object_id.to_be_bytes());
    }
    /// Decodes; shorter than 4 bytes is truncated.
    pub fn decode(body: &[u8]) -> Result<Self, DecodeError> {
        Ok(NaDespawn {
            object_id: ByteReader::new(body).u32()?,
        })
    }
}
wire_body!(NaDespawn, KIND_NA_DESPAWN);

/// Kind 20: an owner reports its transform (relay mode).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NaState {
    /// The owner's object.
    pub object_id: u32,
    /// Its current transform.
    pub transform: NaTransform,
}

impl NaState {
    /// Appends the 44-byte body.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.object_id.to_be_bytes());
        self.transform.encode_into(out);
    }
    /// Decodes; shorter than 44 bytes is truncated.
    pub fn decode(body: &[u8]) -> Result<Self, DecodeError> {
        let mut r = ByteReader::new(body);
        Ok(NaState {
            object_id: r.u32()?,
            transform: NaTransform::read(&mut r)?,
        })
    }
}
wire_body!(NaState, KIND_NA_STATE);

#[cfg(test)]
mod tests {
    use super::*;
    type TestResult = Result<(), Box<dyn std::error::Error>>;

    #[test]
    fn sizes_match_the_spec() {
        let t = NaTransform::IDENTITY;
        assert_eq!(
            NaPresence {
                archetype_id: 1,
                transform: t
            }
            .encode()
            .len(),
            42
        );
        let spawn = NaSpawn {
            object_id: 1,
            archetype_id: 2,
            owner: 3,
            transform: t,
        };
        assert_eq!(spawn.encode().len(), 54);
        assert_eq!(
            NaSpawnBatch {
                spawns: vec![spawn; 2]
            }
            .encode()
            .len(),
            2 + 108
        );
        assert_eq!(NaDespawn { object_id: 1 }.encode().len(), 4);
        assert_eq!(
            NaState {
                object_id: 1,
                transform: t
            }
            .encode()
            .len(),
            44
        );
    }

    #[test]
    fn batch_overrun_is_rejected_and_empty_is_valid() -> TestResult {
        assert_eq!(NaSpawnBatch::decode(&[0, 0])?.spawns.len(), 0);
        let mut body = vec![0, 2];
        body.extend_from_slice(&[0; 54]);
        assert_eq!(NaSpawnBatch::decode(&body), Err(DecodeError::Truncated));
        assert_eq!(
            NaSpawnBatch::decode(&[0, 0xFF, 0xFF]),
            Err(DecodeError::Truncated)
        );
        Ok(())
    }
}
