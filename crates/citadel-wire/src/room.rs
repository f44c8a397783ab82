//! Room bodies, kinds 21-25 (big-endian; strings are `u16` length + UTF-8).
//!
//! Decoders reject truncation and invalid UTF-8 and ignore extra trailing
//! bytes (existing clients rely on that leniency); encoders clamp strings to
//! 65 535 bytes at a character boundary and never emit extras.

use crate::body::{ByteReader, put_string_u16, wire_body};
use crate::error::DecodeError;
use crate::protocol::{
    KIND_ROOM_CREATE, KIND_ROOM_JOIN, KIND_ROOM_JOINED, KIND_ROOM_LEAVE, KIND_ROOM_MAP_READY,
};

/// Kind 21: create a named room or join its existing instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoomCreate {
    /// Opaque params; SDKs send the UTF-8 room name (the join-or-create key).
    pub params: Vec<u8>,
}

impl RoomCreate {
    /// Params as a room name, if they are UTF-8.
    pub fn name(&self) -> Option<&str> {
        std::str::from_utf8(&self.params).ok()
    }
    /// Appends the body (params clamped to 65 535 bytes).
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        let params = &self.params[..self.params.len().min(usize::from(u16::MAX))];
        out.extend_from_slice(&(params.len() as u16).to_be_bytes());
        out.extend_from_slice(params);
    }
    /// Decodes; a length that overruns the body is truncated.
    pub fn decode(body: &[u8]) -> Result<Self, DecodeError> {
        let mut r = ByteReader::new(body);
        let len = usize::from(r.u16()?);
        Ok(RoomCreate {
            params: r.take(len)?.to_vec(),
        })
    }
}
wire_body!(RoomCreate, KIND_ROOM_CREATE);

macro_rules! room_id_body {
    ($(#[$doc:meta])* $name:ident, $kind:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub struct $name {
            /// The room.
            pub room_id: u64,
        }

        impl $name {
            /// Appends the 8-byte body.
            pub fn encode_into(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.room_id.to_be_bytes());
            }
            /// Decodes; shorter than 8 bytes is truncated.
            pub fn decode(body: &[u8]) -> Result<Self, DecodeError> {
                Ok($name { room_id: ByteReader::new(body).u64()? })
            }
        }
        wire_body!($name, $kind);
    };
}

room_id_body!(
    /// Kind 22: join a known room by id.
    RoomJoin,
    KIND_ROOM_JOIN
);
room_id_body!(
    /// Kind 24: leave request (client) or removal notice (server).
    RoomLeave,
    KIND_ROOM_LEAVE
);
room_id_body!(
    /// Kind 25: the client opened the map named by kind 23.
    RoomMapReady,
    KIND_ROOM_MAP_READY
);

/// Kind 23: admission with the server-chosen map and mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoomJoined {
    /// The room.
    pub room_id: u64,
    /// Level to load.
    pub map: String,
    /// Game mode (may be empty).
    pub mode: String,
}

impl RoomJoined {
    /// Appends the body.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.room_id.to_be_bytes());
        put_string_u16(out, &self.map);
        put_string_u16(out, &self.mode);
    }
    /// Decodes; truncation or invalid UTF-8 is rejected.
    pub fn decode(body: &[u8]) -> Result<Self, DecodeError> {
        let mut r = ByteReader::new(body);
        Ok(RoomJoined {
            room_id: r.u64()?,
            map: r.string_u16()?,
            mode: r.string_u16()?,
        })
    }
}
wire_body!(RoomJoined, KIND_ROOM_JOINED);

#[cfg(test)]
mod tests {
    use super::*;
    type TestResult = Result<(), Box<dyn std::error::Error>>;

    #[test]
    fn seed_example_layout() -> TestResult {
        let body = RoomCreate {
            params: b"lobby".to_vec(),
        }
        .encode();
        assert_eq!(body, [0, 5, b'l', b'o', b'b', b'b', b'y']);
        assert_eq!(RoomCreate::decode(&body[..6]), Err(DecodeError::Truncated));
        let joined = RoomJoined {
            room_id: 3,
            map: "Forest".into(),
            mode: String::new(),
        };
        assert_eq!(RoomJoined::decode(&joined.encode())?, joined);
        assert_eq!(RoomJoin::decode(&[0; 7]), Err(DecodeError::Truncated));
        Ok(())
    }
}
