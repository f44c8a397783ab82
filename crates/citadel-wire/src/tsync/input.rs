//! Kind 9: the redundant owner input bundle (big-endian bytes).
//!
//! `acked_snapshot_id u32 | last_seen_snapshot_id u32 | frame_count u8`, then
//! up to 32 frames oldest first, each `input_seq u32 | sim_tick u32 | dt f32 |
//! object_id u32 | ownership_epoch u32 | move_velocity[3] f32 | flags u8 |
//! payload_len u16 | payload`, plus `origin[3] | direction[3]` when flags bit
//! 0 (fire) is set. A truncated or over-counted bundle is rejected whole;
//! bytes after the last frame are not checked.

use bytes::Bytes;

use crate::body::{ByteReader, put_f32s, wire_body};
use crate::error::DecodeError;
use crate::protocol::KIND_TSYNC_INPUT;

/// Most frames one bundle may carry.
pub const MAX_INPUT_FRAMES: usize = 32;
/// Flags bit: a fire command follows the payload.
pub const INPUT_FLAG_FIRE: u8 = 1;
const FRAME_FIXED_BYTES: usize = 35;
const FIRE_BYTES: usize = 24;

/// A fire command carried by an input frame.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct FireCommand {
    /// Ray origin (cm).
    pub origin: [f32; 3],
    /// Ray direction.
    pub direction: [f32; 3],
}

/// One sequenced input frame.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct InputFrame {
    /// Per-object input sequence (0 is reserved for "none").
    pub input_seq: u32,
    /// Fixed-step tick the input was produced for.
    pub sim_tick: u32,
    /// Seconds covered.
    pub dt: f32,
    /// The owned object.
    pub object_id: u32,
    /// Ownership epoch the client believed current.
    pub ownership_epoch: u32,
    /// Movement intent (cm/s).
    pub move_velocity: [f32; 3],
    /// Flag bits as sent (bit 0 mirrors `fire`; other bits are carried).
    pub flags: u8,
    /// Opaque game bytes (at most 65 535 are encoded).
    pub payload: Bytes,
    /// Fire command, present exactly when flags bit 0 is set.
    pub fire: Option<FireCommand>,
}

impl InputFrame {
    fn encode_into(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.input_seq.to_be_bytes());
        out.extend_from_slice(&self.sim_tick.to_be_bytes());
        out.extend_from_slice(&self.dt.to_be_bytes());
        out.extend_from_slice(&self.object_id.to_be_bytes());
        out.extend_from_slice(&self.ownership_epoch.to_be_bytes());
        put_f32s(out, &self.move_velocity);
        let flags = (self.flags & !INPUT_FLAG_FIRE) | u8::from(self.fire.is_some());
        out.push(flags);
        let payload = &self.payload[..self.payload.len().min(usize::from(u16::MAX))];
        out.extend_from_slice(&(payload.len() as u16).to_be_bytes());
        out.extend_from_slice(payload);
        if let Some(fire) = &self.fire {
            put_f32s(out, &fire.origin);
            put_f32s(out, &fire.direction);
        }
    }

    fn read(r: &mut ByteReader<'_>) -> Result<Self, DecodeError> {
        if r.remaining() < FRAME_FIXED_BYTES {
            return Err(DecodeError::Truncated);
        }
        let input_seq = r.u32()?;
        let sim_tick = r.u32()?;
        let dt = r.f32()?;
        let object_id = r.u32()?;
        let ownership_epoch = r.u32()?;
        let move_velocity = r.vec3()?;
        let flags = r.u8()?;
        let len = usize::from(r.u16()?);
        let payload = Bytes::copy_from_slice(r.take(len)?);
        let fire = if flags & INPUT_FLAG_FIRE != 0 {
            if r.remaining() < FIRE_BYTES {
                return Err(DecodeError::Truncated);
            }
            Some(FireCommand {
                origin: r.vec3()?,
                direction: r.vec3()?,
            })
        } else {
            None
        };
        Ok(InputFrame {
            input_seq,
            sim_tick,
            dt,
            object_id,
            ownership_epoch,
            move_velocity,
            flags,
            payload,
            fire,
        })
    }
}

/// A decoded kind-9 body.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct InputBundle {
    /// Piggybacked acknowledgement (0 = none; history treated as 0).
    pub acked_snapshot_id: u32,
    /// Newest snapshot seen; a hint, never authority.
    pub last_seen_snapshot_id: u32,
    /// Frames, oldest first.
    pub frames: Vec<InputFrame>,
}

impl InputBundle {
    /// Appends the body. Only the newest 32 frames are written and payloads
    /// are clamped to 65 535 bytes, as the layout requires.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        let skip = self.frames.len().saturating_sub(MAX_INPUT_FRAMES);
        let frames = &self.frames[skip..];
        out.extend_from_slice(&self.acked_snapshot_id.to_be_bytes());
        out.extend_from_slice(&self.last_seen_snapshot_id.to_be_bytes());
        out.push(frames.len() as u8);
        for frame in frames {
            frame.encode_into(out);
        }
    }

    /// Decodes; fewer than 9 bytes, more than 32 frames or any truncated
    /// frame rejects the whole bundle.
    pub fn decode(body: &[u8]) -> Result<Self, DecodeError> {
        let mut r = ByteReader::new(body);
        let acked_snapshot_id = r.u32()?;
        let last_seen_snapshot_id = r.u32()?;
        let count = usize::from(r.u8()?);
        if count > MAX_INPUT_FRAMES {
            return Err(DecodeError::CountTooLarge {
                count: count as u64,
                max: MAX_INPUT_FRAMES as u64,
            });
        }
        let frames = (0..count)
            .map(|_| InputFrame::read(&mut r))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(InputBundle {
            acked_snapshot_id,
            last_seen_snapshot_id,
            frames,
        })
    }
}
wire_body!(InputBundle, KIND_TSYNC_INPUT);

#[cfg(test)]
mod tests {
    use super::*;
    type TestResult = Result<(), Box<dyn std::error::Error>>;

    #[test]
    fn frame_sizes_and_limits() -> TestResult {
        let frame = InputFrame {
            input_seq: 1,
            payload: Bytes::from_static(b"ab"),
            fire: Some(FireCommand::default()),
            ..Default::default()
        };
        let bundle = InputBundle {
            frames: vec![frame.clone()],
            ..Default::default()
        };
        let body = bundle.encode();
        assert_eq!(body.len(), 9 + 35 + 2 + 24);
        let back = InputBundle::decode(&body)?;
        assert_eq!(back.frames[0].flags, INPUT_FLAG_FIRE);
        assert_eq!(
            InputBundle::decode(&body[..body.len() - 1]),
            Err(DecodeError::Truncated)
        );
        let mut over = body.clone();
        over[8] = 33;
        assert!(matches!(
            InputBundle::decode(&over),
            Err(DecodeError::CountTooLarge { .. })
        ));
        let many = InputBundle {
            frames: vec![frame; 40],
            ..Default::default()
        };
        assert_eq!(InputBundle::decode(&many.encode())?.frames.len(), 32);
        Ok(())
    }
}
