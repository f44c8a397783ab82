//! The seed's constant table and helpers (`citadel_wire::protocol`): kinds,
//! handshake and RPC status codes, widths, and the session bodies of kinds
//! 1-6 (relay, RPC, handshake).
//!
//! Names and signatures follow the published catalog exactly so existing
//! Rust code compiles unchanged. Kinds 29-99 are reserved and deliberately
//! absent; applications use kinds >= [`FIRST_APPLICATION_KIND`].

mod auth;
mod relay;
mod rpc;

pub use auth::{
    AuthRequest, AuthResult, decode_auth_result, encode_auth_authenticated, encode_auth_guest,
    encode_auth_rejected,
};
pub use relay::{
    PeerPosition, Position, decode_position, encode_position, framed_with_sender, split_sender,
    tag_with_sender,
};
pub use rpc::{
    RpcRequest, RpcResponse, decode_rpc_request, decode_rpc_response, encode_rpc_request,
    encode_rpc_response,
};

/// Largest framed body (kind + payload); larger prefixes are rejected.
pub const MAX_FRAME_BODY_BYTES: usize = 8 * 1024 * 1024;
/// Width of the framed length prefix.
pub const LENGTH_PREFIX_BYTES: usize = 4;
/// Width of the sender participant-id prefix in relayed bodies.
pub const SENDER_ID_BYTES: usize = 8;
/// Width of the RPC correlation id.
pub const RPC_REQUEST_ID_BYTES: usize = 8;
/// Width of the RPC method-length field.
pub const RPC_METHOD_LEN_BYTES: usize = 2;
/// Size of the canonical kind-1 body (two little-endian `f32`).
pub const POSITION_BYTES: usize = 8;

/// Legacy position report (client → server).
pub const KIND_POSITION: u16 = 1;
/// Server-tagged peer position (server → client).
pub const KIND_PEER_POSITION: u16 = 2;
/// RPC request (client → server).
pub const KIND_RPC_REQUEST: u16 = 3;
/// RPC response (server → caller).
pub const KIND_RPC_RESPONSE: u16 = 4;
/// Handshake request, the first frame of a connection.
pub const KIND_AUTH: u16 = 5;
/// Handshake result.
pub const KIND_AUTH_RESULT: u16 = 6;
/// Transform-sync negotiation.
pub const KIND_TSYNC_HELLO: u16 = 7;
/// Transform snapshot.
pub const KIND_TSYNC_SNAPSHOT: u16 = 8;
/// Owner input bundle.
pub const KIND_TSYNC_INPUT: u16 = 9;
/// Snapshot acknowledgement.
pub const KIND_TSYNC_ACK: u16 = 10;
/// Role or relevancy transition.
pub const KIND_TSYNC_ROLE: u16 = 11;
/// Rewind hit result.
pub const KIND_TSYNC_REWIND: u16 = 12;
/// NetworkPeer DeltaBunch.
pub const KIND_REP_DELTA: u16 = 13;
/// NetworkPeer baseline acknowledgement.
pub const KIND_REP_ACK: u16 = 14;
/// NetworkPeer schema table.
pub const KIND_REP_SCHEMA: u16 = 15;
/// Networked-actor presence.
pub const KIND_NA_PRESENCE: u16 = 16;
/// One networked-actor spawn.
pub const KIND_NA_SPAWN: u16 = 17;
/// Batch of existing actors for a joining client.
pub const KIND_NA_SPAWN_BATCH: u16 = 18;
/// Networked-actor removal.
pub const KIND_NA_DESPAWN: u16 = 19;
/// Relay-mode owner state.
pub const KIND_NA_STATE: u16 = 20;
/// Room create or join-by-name.
pub const KIND_ROOM_CREATE: u16 = 21;
/// Join a room by id.
pub const KIND_ROOM_JOIN: u16 = 22;
/// Room admission with map and mode.
pub const KIND_ROOM_JOINED: u16 = 23;
/// Leave request or removal notice.
pub const KIND_ROOM_LEAVE: u16 = 24;
/// Level-load acknowledgement.
pub const KIND_ROOM_MAP_READY: u16 = 25;
/// Matchmaker handoff (JSON).
pub const KIND_MATCHMAKER_MATCHED: u16 = 26;
/// Durable notification live delivery (JSON).
pub const KIND_NOTIFICATION: u16 = 27;
/// Chat event (JSON, closed schema v1).
pub const KIND_CHAT_EVENT: u16 = 28;

/// Handshake accepted with a resolved account.
pub const AUTH_STATUS_AUTHENTICATED: u8 = 0;
/// Handshake accepted as a guest.
pub const AUTH_STATUS_GUEST: u8 = 1;
/// Handshake refused.
pub const AUTH_STATUS_REJECTED: u8 = 2;
/// Invalid, expired, revoked or malformed token (deliberately one class).
pub const AUTH_REASON_AUTH_FAILED: u8 = 0;
/// A guest was refused because a token is required.
pub const AUTH_REASON_AUTH_REQUIRED: u8 = 1;
/// The handshake itself broke the protocol.
pub const AUTH_REASON_PROTOCOL: u8 = 2;

/// RPC succeeded; the payload is the reply.
pub const RPC_STATUS_OK: u8 = 0;
/// RPC failed; the payload is a short generic UTF-8 message.
pub const RPC_STATUS_ERROR: u8 = 1;

/// Transform-sync kinds.
pub const TSYNC_KINDS: std::ops::RangeInclusive<u16> = KIND_TSYNC_HELLO..=KIND_TSYNC_REWIND;
/// NetworkPeer kinds.
pub const REP_KINDS: std::ops::RangeInclusive<u16> = KIND_REP_DELTA..=KIND_REP_SCHEMA;
/// Networked-actor kinds.
pub const NA_KINDS: std::ops::RangeInclusive<u16> = KIND_NA_PRESENCE..=KIND_NA_STATE;
/// Room kinds.
pub const ROOM_KINDS: std::ops::RangeInclusive<u16> = KIND_ROOM_CREATE..=KIND_ROOM_MAP_READY;
/// Highest kind this crate assigns.
pub const LAST_ASSIGNED_KIND: u16 = KIND_CHAT_EVENT;
/// Platform-reserved kinds that are not assigned yet (never implement them).
pub const RESERVED_KINDS: std::ops::RangeInclusive<u16> = 29..=99;
/// First kind an application may use for its own envelopes.
pub const FIRST_APPLICATION_KIND: u16 = 100;

/// Which side may originate a kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Only clients send it.
    ClientToServer,
    /// Only the server sends it.
    ServerToClient,
    /// Both sides send it.
    Both,
}

/// Direction of an assigned kind (`None` for reserved or application kinds).
pub fn kind_direction(kind: u16) -> Option<Direction> {
    use Direction::*;
    Some(match kind {
        KIND_POSITION | KIND_RPC_REQUEST | KIND_AUTH | KIND_TSYNC_INPUT | KIND_TSYNC_ACK
        | KIND_REP_ACK | KIND_NA_PRESENCE | KIND_NA_STATE | KIND_ROOM_CREATE | KIND_ROOM_JOIN
        | KIND_ROOM_MAP_READY => ClientToServer,
        KIND_TSYNC_HELLO | KIND_REP_DELTA | KIND_ROOM_LEAVE => Both,
        KIND_PEER_POSITION..=LAST_ASSIGNED_KIND => ServerToClient,
        _ => return None,
    })
}

/// The seed's name of an assigned kind (without the `KIND_` prefix).
pub fn kind_name(kind: u16) -> Option<&'static str> {
    const NAMES: [&str; 28] = [
        "POSITION",
        "PEER_POSITION",
        "RPC_REQUEST",
        "RPC_RESPONSE",
        "AUTH",
        "AUTH_RESULT",
        "TSYNC_HELLO",
        "TSYNC_SNAPSHOT",
        "TSYNC_INPUT",
        "TSYNC_ACK",
        "TSYNC_ROLE",
        "TSYNC_REWIND",
        "REP_DELTA",
        "REP_ACK",
        "REP_SCHEMA",
        "NA_PRESENCE",
        "NA_SPAWN",
        "NA_SPAWN_BATCH",
        "NA_DESPAWN",
        "NA_STATE",
        "ROOM_CREATE",
        "ROOM_JOIN",
        "ROOM_JOINED",
        "ROOM_LEAVE",
        "ROOM_MAP_READY",
        "MATCHMAKER_MATCHED",
        "NOTIFICATION",
        "CHAT_EVENT",
    ];
    NAMES.get(usize::from(kind).checked_sub(1)?).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_assigned_kind_has_a_name_and_direction() {
        for kind in 1..=LAST_ASSIGNED_KIND {
            assert!(kind_name(kind).is_some(), "{kind}");
            assert!(kind_direction(kind).is_some(), "{kind}");
        }
        for kind in [0, 29, 99, 100] {
            assert!(kind_name(kind).is_none());
            assert!(kind_direction(kind).is_none());
        }
        assert_eq!(
            kind_direction(KIND_NA_SPAWN),
            Some(Direction::ServerToClient)
        );
        assert_eq!(
            kind_direction(KIND_ROOM_MAP_READY),
            Some(Direction::ClientToServer)
        );
    }
}
