//! Kinds 10, 11 and 12: the snapshot acknowledgement (8 bytes), the role or
//! relevancy transition (20 bytes) and the rewind hit result (25 bytes), all
//! big-endian fixed layouts that ignore extra trailing bytes.

use crate::ack::AckWindow;
use crate::body::{ByteReader, put_f32s, wire_body};
use crate::error::DecodeError;
use crate::protocol::{KIND_TSYNC_ACK, KIND_TSYNC_REWIND, KIND_TSYNC_ROLE};

/// Size of a kind-10 body.
pub const TSYNC_ACK_BYTES: usize = 8;
/// Size of a kind-11 body.
pub const ROLE_BYTES: usize = 20;
/// Size of a kind-12 body.
pub const REWIND_BYTES: usize = 25;

/// Kind 10: newest applied snapshot plus 32 bits of history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TsyncAck {
    /// Newest applied snapshot (0 = none).
    pub acked_snapshot_id: u32,
    /// Older applied snapshots relative to `acked_snapshot_id`.
    pub history: u32,
}

impl TsyncAck {
    /// Appends the 8-byte body.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.acked_snapshot_id.to_be_bytes());
        out.extend_from_slice(&self.history.to_be_bytes());
    }
    /// Decodes; short bodies and a history without a latest id are invalid.
    pub fn decode(body: &[u8]) -> Result<Self, DecodeError> {
        let mut r = ByteReader::new(body);
        let ack = TsyncAck {
            acked_snapshot_id: r.u32()?,
            history: r.u32()?,
        };
        ack.window()?;
        Ok(ack)
    }
    /// The acknowledgement as a window.
    pub fn window(&self) -> Result<AckWindow, DecodeError> {
        AckWindow::from_wire(u64::from(self.acked_snapshot_id), self.history)
    }
    /// Builds the body from a client's window (ids above `u32::MAX` cannot
    /// occur for snapshots).
    pub fn from_window(window: &AckWindow) -> Self {
        TsyncAck {
            acked_snapshot_id: u32::try_from(window.latest()).unwrap_or(u32::MAX),
            history: window.history(),
        }
    }
}
wire_body!(TsyncAck, KIND_TSYNC_ACK);

/// Replication role of an object for one client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// One client owns and predicts it; the server stays authoritative.
    OwnerPredicted = 0,
    /// Rendered in the past by everyone.
    RemoteInterpolated = 1,
    /// Driven by the server; never predicted.
    ServerSimulated = 2,
    /// Rare updates; a dormancy candidate.
    StaticReplicated = 3,
}

impl Role {
    /// Parses the role byte.
    pub fn from_byte(b: u8) -> Result<Self, DecodeError> {
        Ok(match b {
            0 => Role::OwnerPredicted,
            1 => Role::RemoteInterpolated,
            2 => Role::ServerSimulated,
            3 => Role::StaticReplicated,
            _ => return Err(DecodeError::InvalidValue("unknown role")),
        })
    }
}

/// Why a role message was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RoleEvent {
    /// First assignment.
    Assign = 0,
    /// Ownership moved.
    Handoff = 1,
    /// Entered the receiver's interest; a full baseline follows.
    RelevancyEnter = 2,
    /// Left the receiver's interest.
    RelevancyExit = 3,
}

impl RoleEvent {
    /// Parses the event byte.
    pub fn from_byte(b: u8) -> Result<Self, DecodeError> {
        Ok(match b {
            0 => RoleEvent::Assign,
            1 => RoleEvent::Handoff,
            2 => RoleEvent::RelevancyEnter,
            3 => RoleEvent::RelevancyExit,
            _ => return Err(DecodeError::InvalidValue("unknown role event")),
        })
    }
}

/// Kind 11: a role assignment, handoff or relevancy transition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RoleChange {
    /// The object.
    pub object_id: u32,
    /// Its role for the receiver.
    pub role: Role,
    /// Owning participant (0 = none/server).
    pub owner: u64,
    /// Monotonic per object; the first assignment is 1.
    pub ownership_epoch: u32,
    /// Generation epoch of the object.
    pub gen_epoch: u16,
    /// What happened.
    pub event: RoleEvent,
}

impl RoleChange {
    /// Appends the 20-byte body.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.object_id.to_be_bytes());
        out.push(self.role as u8);
        out.extend_from_slice(&self.owner.to_be_bytes());
        out.extend_from_slice(&self.ownership_epoch.to_be_bytes());
        out.extend_from_slice(&self.gen_epoch.to_be_bytes());
        out.push(self.event as u8);
    }
    /// Decodes; short bodies or unknown role/event bytes are invalid.
    pub fn decode(body: &[u8]) -> Result<Self, DecodeError> {
        let mut r = ByteReader::new(body);
        if r.remaining() < ROLE_BYTES {
            return Err(DecodeError::Truncated);
        }
        Ok(RoleChange {
            object_id: r.u32()?,
            role: Role::from_byte(r.u8()?)?,
            owner: r.u64()?,
            ownership_epoch: r.u32()?,
            gen_epoch: r.u16()?,
            event: RoleEvent::from_byte(r.u8()?)?,
        })
    }
}
wire_body!(RoleChange, KIND_TSYNC_ROLE);

/// Kind 12: the server's resolution of a fire command.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Rewind {
    /// Input sequence of the frame that carried the fire.
    pub input_seq: u32,
    /// Bit 0 = hit.
    pub flags: u8,
    /// Hit object (0 on a miss).
    pub object_id: u32,
    /// Hit point in cm (zeros on a miss).
    pub hit_point: [f32; 3],
    /// Server-computed rewind tick (for transparency only).
    pub rewind_tick: u32,
}

impl Rewind {
    /// Whether the shot hit.
    pub fn is_hit(&self) -> bool {
        self.flags & 1 != 0
    }
    /// Appends the 25-byte body.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.input_seq.to_be_bytes());
        out.push(self.flags);
        out.extend_from_slice(&self.object_id.to_be_bytes());
        put_f32s(out, &self.hit_point);
        out.extend_from_slice(&self.rewind_tick.to_be_bytes());
    }
    /// Decodes; shorter than 25 bytes is truncated.
    pub fn decode(body: &[u8]) -> Result<Self, DecodeError> {
        let mut r = ByteReader::new(body);
        Ok(Rewind {
            input_seq: r.u32()?,
            flags: r.u8()?,
            object_id: r.u32()?,
            hit_point: r.vec3()?,
            rewind_tick: r.u32()?,
        })
    }
}
wire_body!(Rewind, KIND_TSYNC_REWIND);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_validation() {
        let role = RoleChange {
            object_id: 1,
            role: Role::OwnerPredicted,
            owner: 2,
            ownership_epoch: 1,
            gen_epoch: 0,
            event: RoleEvent::Assign,
        };
        let mut body = role.encode();
        assert_eq!(body.len(), ROLE_BYTES);
        body[4] = 4;
        assert!(RoleChange::decode(&body).is_err());
        assert_eq!(Rewind::default().encode().len(), REWIND_BYTES);
        assert!(TsyncAck::decode(&[0, 0, 0, 0, 0, 0, 0, 1]).is_err());
        assert_eq!(TsyncAck::decode(&[0; 7]), Err(DecodeError::Truncated));
    }
}
