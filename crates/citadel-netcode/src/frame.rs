//! The latched, quantized state of a world after one tick: computed once,
//! shared (behind `Arc`) by every client's snapshot builder.

use citadel_wire::quat::{PackedQuat, encode_quat};
use citadel_wire::tsync::{Role, TransformCodec};

use crate::world::World;

/// One object as every recipient will see it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FrameObject {
    /// Object id.
    pub id: u32,
    /// Generation epoch.
    pub gen_epoch: u16,
    /// Owner participant (0 = server).
    pub owner: u64,
    /// Role.
    pub role: Role,
    /// Ownership epoch.
    pub ownership_epoch: u32,
    /// Raw position (for interest and priority).
    pub position: [f32; 3],
    /// Position codes.
    pub position_codes: [u64; 3],
    /// Packed rotation.
    pub rotation: PackedQuat,
    /// Velocity codes, when replicated.
    pub velocity_codes: Option<[u64; 3]>,
    /// Owner input watermark (attached for the owner only).
    pub last_input_seq: u32,
}

/// An immutable frame.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Frame {
    /// Completed sim tick.
    pub tick: u32,
    /// Objects in id order.
    pub objects: Vec<FrameObject>,
}

impl Frame {
    /// Quantizes `world` with `codec`. Non-finite coordinates saturate to
    /// the codec's range (NaN to the minimum) so one bad value cannot stop
    /// replication.
    pub fn latch(world: &World, codec: &TransformCodec) -> Frame {
        let objects = world
            .objects()
            .map(|o| {
                let t = &o.transform;
                FrameObject {
                    id: o.id,
                    gen_epoch: o.gen_epoch,
                    owner: o.owner,
                    role: o.role,
                    ownership_epoch: o.ownership_epoch,
                    position: t.position,
                    position_codes: codes(&codec.position, t.position),
                    rotation: encode_quat(codec.quat_mode, t.rotation),
                    velocity_codes: o
                        .replicate_velocity
                        .then(|| codes(&codec.velocity, t.velocity)),
                    last_input_seq: o.last_input_seq,
                }
            })
            .collect();
        Frame {
            tick: world.tick(),
            objects,
        }
    }
}

fn codes(codec: &citadel_wire::quant::Vector3Codec, v: [f32; 3]) -> [u64; 3] {
    let axes = codec.axes();
    let mut out = [0u64; 3];
    for i in 0..3 {
        let value = if v[i].is_nan() { axes[i].min() } else { v[i] };
        out[i] = axes[i].encode(value).unwrap_or(0);
    }
    out
}
