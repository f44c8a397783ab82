//! Kind 8: the authoritative transform snapshot, an MSB-first bitstream.
//!
//! Header: `server_tick:32 | snapshot_id:32 | base_snapshot_id:32 |
//! send_rate_hz:8 | removed_count:16 | update_count:16`, then the removed
//! object ids (32 bits each), then per update `object_id:32 | gen_epoch:16 |
//! changed:4` and the fields the mask selects, always in the order position,
//! rotation, velocity, `last_input_seq:32`. The mask is 4 bits wide as
//! existing clients read it (8 = last_input_seq, 4 = position, 2 = rotation,
//! 1 = velocity); the older docs' "3-bit mask" is not what is on the wire.
//! Canonical end: only zero padding to a byte boundary.

use crate::bits::{BitReader, BitWriter};
use crate::error::{DecodeError, EncodeError};
use crate::quat::{PackedQuat, encode_quat, read_quat, write_packed};
use crate::tsync::TransformCodec;

/// Mask bit: `last_input_seq` present.
pub const CHANGED_LAST_INPUT_SEQ: u8 = 8;
/// Mask bit: position present.
pub const CHANGED_POSITION: u8 = 4;
/// Mask bit: rotation present.
pub const CHANGED_ROTATION: u8 = 2;
/// Mask bit: velocity present.
pub const CHANGED_VELOCITY: u8 = 1;
/// Width of the fixed header.
pub const SNAPSHOT_HEADER_BITS: usize = 32 + 32 + 32 + 8 + 16 + 16;
const UPDATE_MIN_BITS: usize = 32 + 16 + 4;

/// Which fields an entry carries (shared by the float and code forms).
#[derive(Clone, Copy)]
struct Fields {
    position: bool,
    rotation: bool,
    velocity: bool,
    seq: bool,
}

impl Fields {
    fn of(position: bool, rotation: bool, velocity: bool, seq: bool) -> Self {
        Fields {
            position,
            rotation,
            velocity,
            seq,
        }
    }

    fn mask(self) -> u8 {
        (u8::from(self.seq) * CHANGED_LAST_INPUT_SEQ)
            | (u8::from(self.position) * CHANGED_POSITION)
            | (u8::from(self.rotation) * CHANGED_ROTATION)
            | (u8::from(self.velocity) * CHANGED_VELOCITY)
    }

    fn bits(self, codec: &TransformCodec) -> usize {
        let on = |flag: bool, bits: u32| if flag { bits as usize } else { 0 };
        UPDATE_MIN_BITS
            + on(self.position, codec.position.bits())
            + on(self.rotation, codec.quat_mode.total_bits())
            + on(self.velocity, codec.velocity.bits())
            + on(self.seq, 32)
    }
}

/// One object's entry in a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SnapshotUpdate {
    /// The object.
    pub object_id: u32,
    /// Generation epoch; a different epoch than the base makes it a full entry.
    pub gen_epoch: u16,
    /// Position (cm), when changed or full.
    pub position: Option<[f32; 3]>,
    /// Rotation (x y z w), when changed or full.
    pub rotation: Option<[f32; 4]>,
    /// Velocity (cm/s), when changed or full and replicated.
    pub velocity: Option<[f32; 3]>,
    /// Highest contiguous applied input (owner's snapshot only).
    pub last_input_seq: Option<u32>,
}

impl SnapshotUpdate {
    /// The 4-bit changed mask this update encodes with.
    pub fn changed_mask(&self) -> u8 {
        Fields::of(
            self.position.is_some(),
            self.rotation.is_some(),
            self.velocity.is_some(),
            self.last_input_seq.is_some(),
        )
        .mask()
    }

    /// Encoded size in bits under `codec`.
    pub fn bit_len(&self, codec: &TransformCodec) -> usize {
        Fields::of(
            self.position.is_some(),
            self.rotation.is_some(),
            self.velocity.is_some(),
            self.last_input_seq.is_some(),
        )
        .bits(codec)
    }

    /// Quantizes this update with `codec`.
    pub fn quantize(&self, codec: &TransformCodec) -> Result<QuantizedUpdate, EncodeError> {
        Ok(QuantizedUpdate {
            object_id: self.object_id,
            gen_epoch: self.gen_epoch,
            position: self
                .position
                .map(|p| codec.position.encode(p))
                .transpose()?,
            rotation: self.rotation.map(|q| encode_quat(codec.quat_mode, q)),
            velocity: self
                .velocity
                .map(|v| codec.velocity.encode(v))
                .transpose()?,
            last_input_seq: self.last_input_seq,
        })
    }

    /// Writes this update.
    pub fn write(&self, w: &mut BitWriter, codec: &TransformCodec) -> Result<(), EncodeError> {
        self.quantize(codec)?.write(w, codec);
        Ok(())
    }

    fn read(r: &mut BitReader<'_>, codec: &TransformCodec) -> Result<Self, DecodeError> {
        let object_id = r.read_u32()?;
        let gen_epoch = r.read_u16()?;
        let changed = r.read_bits(4)? as u8;
        let position = if changed & CHANGED_POSITION != 0 {
            Some(codec.position.read(r)?)
        } else {
            None
        };
        let rotation = if changed & CHANGED_ROTATION != 0 {
            Some(read_quat(r, codec.quat_mode)?)
        } else {
            None
        };
        let velocity = if changed & CHANGED_VELOCITY != 0 {
            Some(codec.velocity.read(r)?)
        } else {
            None
        };
        let last_input_seq = if changed & CHANGED_LAST_INPUT_SEQ != 0 {
            Some(r.read_u32()?)
        } else {
            None
        };
        Ok(SnapshotUpdate {
            object_id,
            gen_epoch,
            position,
            rotation,
            velocity,
            last_input_seq,
        })
    }
}

/// One object's entry as quantization codes: what a server computes once
/// per tick and reuses for every recipient (re-quantizing decoded floats is
/// not idempotent for quaternions, so servers keep codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct QuantizedUpdate {
    /// The object.
    pub object_id: u32,
    /// Generation epoch.
    pub gen_epoch: u16,
    /// Position codes (x, y, z).
    pub position: Option<[u64; 3]>,
    /// Packed rotation.
    pub rotation: Option<PackedQuat>,
    /// Velocity codes (x, y, z).
    pub velocity: Option<[u64; 3]>,
    /// Highest contiguous applied input (owner's snapshot only).
    pub last_input_seq: Option<u32>,
}

impl QuantizedUpdate {
    fn fields(&self) -> Fields {
        Fields::of(
            self.position.is_some(),
            self.rotation.is_some(),
            self.velocity.is_some(),
            self.last_input_seq.is_some(),
        )
    }

    /// The 4-bit changed mask.
    pub fn changed_mask(&self) -> u8 {
        self.fields().mask()
    }

    /// Encoded size in bits under `codec`.
    pub fn bit_len(&self, codec: &TransformCodec) -> usize {
        self.fields().bits(codec)
    }

    /// Writes the entry.
    pub fn write(&self, w: &mut BitWriter, codec: &TransformCodec) {
        w.write_bits(u64::from(self.object_id), 32);
        w.write_bits(u64::from(self.gen_epoch), 16);
        w.write_bits(u64::from(self.changed_mask()), 4);
        if let Some(codes) = self.position {
            codec.position.write_codes(w, codes);
        }
        if let Some(packed) = self.rotation {
            write_packed(w, codec.quat_mode, packed);
        }
        if let Some(codes) = self.velocity {
            codec.velocity.write_codes(w, codes);
        }
        if let Some(seq) = self.last_input_seq {
            w.write_bits(u64::from(seq), 32);
        }
    }
}

/// The header of a kind-8 body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SnapshotHeader {
    /// Completed simulation tick.
    pub server_tick: u32,
    /// Id of this snapshot.
    pub snapshot_id: u32,
    /// Baseline id (0 = full).
    pub base_snapshot_id: u32,
    /// Effective send rate.
    pub send_rate_hz: u8,
}

/// Encodes a kind-8 body from quantized entries; more than 65 535 removals
/// or updates is refused.
pub fn encode_quantized(
    header: SnapshotHeader,
    removed: &[u32],
    updates: &[QuantizedUpdate],
    codec: &TransformCodec,
) -> Result<Vec<u8>, EncodeError> {
    let bits = SNAPSHOT_HEADER_BITS
        + 32 * removed.len()
        + updates.iter().map(|u| u.bit_len(codec)).sum::<usize>();
    let mut w = start_body(header, removed, updates.len(), bits)?;
    for update in updates {
        update.write(&mut w, codec);
    }
    Ok(w.into_bytes())
}

/// Checks the counts, sizes the writer for `bits` and writes the header and
/// the removed ids; the caller appends `update_count` entries.
fn start_body(
    header: SnapshotHeader,
    removed: &[u32],
    update_count: usize,
    bits: usize,
) -> Result<BitWriter, EncodeError> {
    let max = usize::from(u16::MAX);
    for (what, count) in [
        ("snapshot removals", removed.len()),
        ("snapshot updates", update_count),
    ] {
        if count > max {
            return Err(EncodeError::TooMany { what, count, max });
        }
    }
    let mut w = BitWriter::with_capacity(bits.div_ceil(8));
    w.write_bits(u64::from(header.server_tick), 32);
    w.write_bits(u64::from(header.snapshot_id), 32);
    w.write_bits(u64::from(header.base_snapshot_id), 32);
    w.write_bits(u64::from(header.send_rate_hz), 8);
    w.write_bits(removed.len() as u64, 16);
    w.write_bits(update_count as u64, 16);
    for &id in removed {
        w.write_bits(u64::from(id), 32);
    }
    Ok(w)
}

/// A decoded kind-8 body.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Snapshot {
    /// Completed simulation tick of the latched frame.
    pub server_tick: u32,
    /// Absolute id of this snapshot (minted from 1 upward).
    pub snapshot_id: u32,
    /// Id of the baseline it is diffed against; 0 = full.
    pub base_snapshot_id: u32,
    /// Effective snapshot rate for this client.
    pub send_rate_hz: u8,
    /// Objects removed since the base.
    pub removed: Vec<u32>,
    /// Objects new or changed since the base.
    pub updates: Vec<SnapshotUpdate>,
}

impl Snapshot {
    /// Encoded size in bits under `codec` (before padding).
    pub fn bit_len(&self, codec: &TransformCodec) -> usize {
        SNAPSHOT_HEADER_BITS
            + 32 * self.removed.len()
            + self.updates.iter().map(|u| u.bit_len(codec)).sum::<usize>()
    }

    /// Encodes the body; more than 65 535 removals or updates, or a NaN
    /// coordinate, is refused.
    pub fn encode(&self, codec: &TransformCodec) -> Result<Vec<u8>, EncodeError> {
        let header = SnapshotHeader {
            server_tick: self.server_tick,
            snapshot_id: self.snapshot_id,
            base_snapshot_id: self.base_snapshot_id,
            send_rate_hz: self.send_rate_hz,
        };
        // Quantize and write entry by entry: no intermediate list of codes.
        let mut w = start_body(
            header,
            &self.removed,
            self.updates.len(),
            self.bit_len(codec),
        )?;
        for update in &self.updates {
            update.write(&mut w, codec)?;
        }
        Ok(w.into_bytes())
    }

    /// Decodes a body with the negotiated codec. Counts are checked against
    /// the remaining bits before anything is allocated.
    pub fn decode(body: &[u8], codec: &TransformCodec) -> Result<Self, DecodeError> {
        let mut r = BitReader::new(body);
        let server_tick = r.read_u32()?;
        let snapshot_id = r.read_u32()?;
        let base_snapshot_id = r.read_u32()?;
        let send_rate_hz = r.read_bits(8)? as u8;
        let removed_count = usize::from(r.read_u16()?);
        let update_count = usize::from(r.read_u16()?);
        if removed_count * 32 + update_count * UPDATE_MIN_BITS > r.remaining_bits() {
            return Err(DecodeError::Truncated);
        }
        let mut removed = Vec::with_capacity(removed_count);
        for _ in 0..removed_count {
            removed.push(r.read_u32()?);
        }
        let mut updates = Vec::with_capacity(update_count);
        for _ in 0..update_count {
            updates.push(SnapshotUpdate::read(&mut r, codec)?);
        }
        r.finish()?;
        Ok(Snapshot {
            server_tick,
            snapshot_id,
            base_snapshot_id,
            send_rate_hz,
            removed,
            updates,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tsync::HelloParams;
    type TestResult = Result<(), Box<dyn std::error::Error>>;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn worked_examples_from_the_spec() -> TestResult {
        let codec = HelloParams::default().codec()?;
        let empty = Snapshot {
            server_tick: 1,
            snapshot_id: 1,
            send_rate_hz: 30,
            ..Default::default()
        };
        assert_eq!(empty.bit_len(&codec), 136);
        assert_eq!(
            hex(&empty.encode(&codec)?),
            "0000000100000001000000001e00000000"
        );

        let full = Snapshot {
            server_tick: 123,
            snapshot_id: 5,
            base_snapshot_id: 0,
            send_rate_hz: 20,
            removed: vec![],
            updates: vec![SnapshotUpdate {
                object_id: 1,
                gen_epoch: 0,
                position: Some([100.0, -200.5, 30.0]),
                rotation: Some([0.0, 0.0, 0.0, 1.0]),
                velocity: Some([10.0, 0.0, 0.0]),
                last_input_seq: None,
            }],
        };
        assert_eq!(full.bit_len(&codec), 343);
        assert_eq!(
            hex(&full.encode(&codec)?),
            "0000007b0000000500000000140000000100000001000074006407fe6f1003c38020080100142000040000"
        );

        let h = std::f32::consts::FRAC_1_SQRT_2;
        let delta = Snapshot {
            server_tick: 200,
            snapshot_id: 9,
            base_snapshot_id: 5,
            send_rate_hz: 20,
            removed: vec![77],
            updates: vec![SnapshotUpdate {
                object_id: 3,
                gen_epoch: 2,
                rotation: Some([0.0, h, 0.0, h]),
                ..Default::default()
            }],
        };
        assert_eq!(delta.bit_len(&codec), 252);
        let bytes = delta.encode(&codec)?;
        assert_eq!(
            hex(&bytes),
            "000000c8000000090000000514000100010000004d0000000300022600803ff0"
        );
        let back = Snapshot::decode(&bytes, &codec)?;
        assert_eq!(back.removed, vec![77]);
        assert_eq!(back.updates[0].changed_mask(), CHANGED_ROTATION);
        Ok(())
    }

    #[test]
    fn huge_counts_fail_before_allocating() -> TestResult {
        let codec = HelloParams::default().codec()?;
        let mut body = vec![0u8; 17];
        body[13] = 0xFF;
        body[14] = 0xFF;
        assert_eq!(Snapshot::decode(&body, &codec), Err(DecodeError::Truncated));
        Ok(())
    }
}
