//! Kinds 1 and 2: the legacy position report and its sender-tagged relay.
//!
//! The canonical kind-1 body is two little-endian `f32` (x, y), exactly 8
//! bytes; the relay itself treats bodies as opaque. Kind 2 prefixes the
//! original body with the sender's participant id, big-endian.

use bytes::Bytes;

use super::{KIND_PEER_POSITION, KIND_POSITION, POSITION_BYTES, SENDER_ID_BYTES};
use crate::body::wire_body;
use crate::error::DecodeError;

/// Prefixes `payload` with the big-endian sender id.
pub fn tag_with_sender(sender_id: u64, payload: &[u8]) -> Vec<u8> {
    [&sender_id.to_be_bytes()[..], payload].concat()
}

/// The framed envelope of `kind` whose body is [`tag_with_sender`]`(sender_id,
/// payload)`, written in one buffer: how a relay tags a frame with its
/// origin and encodes it once for every recipient.
pub fn framed_with_sender(kind: u16, sender_id: u64, payload: &[u8]) -> Bytes {
    crate::envelope::encode_framed_parts(kind, &[&sender_id.to_be_bytes(), payload])
}

/// Splits a kind-2 body into sender id and original payload; `None` if the
/// body is shorter than the 8-byte prefix.
pub fn split_sender(body: &[u8]) -> Option<(u64, &[u8])> {
    let (id, rest) = body.split_first_chunk::<SENDER_ID_BYTES>()?;
    Some((u64::from_be_bytes(*id), rest))
}

/// Encodes the canonical kind-1 body.
pub fn encode_position(x: f32, y: f32) -> [u8; POSITION_BYTES] {
    let mut out = [0u8; POSITION_BYTES];
    out[..4].copy_from_slice(&x.to_le_bytes());
    out[4..].copy_from_slice(&y.to_le_bytes());
    out
}

/// Decodes a canonical kind-1 body; `None` unless exactly 8 bytes.
pub fn decode_position(body: &[u8]) -> Option<(f32, f32)> {
    Position::decode(body).ok().map(|p| (p.x, p.y))
}

/// The canonical kind-1 body.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Position {
    /// X coordinate.
    pub x: f32,
    /// Y coordinate.
    pub y: f32,
}

impl Position {
    /// Appends the 8-byte body.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&encode_position(self.x, self.y));
    }

    /// Strict decode: exactly 8 bytes.
    pub fn decode(body: &[u8]) -> Result<Self, DecodeError> {
        match body.len() {
            n if n < POSITION_BYTES => Err(DecodeError::Truncated),
            POSITION_BYTES => {
                let (x, y) = body.split_at(4);
                let x = f32::from_le_bytes(x.try_into().map_err(|_| DecodeError::Truncated)?);
                let y = f32::from_le_bytes(y.try_into().map_err(|_| DecodeError::Truncated)?);
                Ok(Position { x, y })
            }
            _ => Err(DecodeError::TrailingBytes),
        }
    }
}
wire_body!(Position, KIND_POSITION);

/// A kind-2 body: sender id plus the original (opaque) kind-1 body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerPosition {
    /// Participant id of the sender.
    pub sender_id: u64,
    /// The original body, unchanged.
    pub payload: Bytes,
}

impl PeerPosition {
    /// Appends the tagged body.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.sender_id.to_be_bytes());
        out.extend_from_slice(&self.payload);
    }

    /// Decodes; shorter than 8 bytes is truncated.
    pub fn decode(body: &[u8]) -> Result<Self, DecodeError> {
        let (sender_id, rest) = split_sender(body).ok_or(DecodeError::Truncated)?;
        Ok(PeerPosition {
            sender_id,
            payload: Bytes::copy_from_slice(rest),
        })
    }

    /// The payload as a canonical position, if it is one.
    pub fn position(&self) -> Option<(f32, f32)> {
        decode_position(&self.payload)
    }
}
wire_body!(PeerPosition, KIND_PEER_POSITION);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn position_is_little_endian_and_strict() {
        let body = encode_position(125.0, 64.0);
        assert_eq!(body, [0, 0, 0xFA, 0x42, 0, 0, 0x80, 0x42]);
        assert_eq!(decode_position(&body), Some((125.0, 64.0)));
        assert_eq!(Position::decode(&body[..7]), Err(DecodeError::Truncated));
        assert_eq!(Position::decode(&[0; 9]), Err(DecodeError::TrailingBytes));
    }

    #[test]
    fn sender_tag_is_big_endian() {
        let tagged = tag_with_sender(0x0102, b"xy");
        assert_eq!(tagged, vec![0, 0, 0, 0, 0, 0, 1, 2, b'x', b'y']);
        assert_eq!(split_sender(&tagged), Some((0x0102, &b"xy"[..])));
        assert_eq!(split_sender(&[0; 7]), None);
    }

    #[test]
    fn the_framed_tag_is_the_framed_envelope_of_the_tag() {
        let framed = framed_with_sender(KIND_PEER_POSITION, 0x0102, b"xy");
        let expected = crate::Envelope::new(KIND_PEER_POSITION, tag_with_sender(0x0102, b"xy"));
        assert_eq!(framed, expected.encode_framed());
    }
}
