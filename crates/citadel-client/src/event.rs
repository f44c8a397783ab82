//! Typed views of what the server tells a client: the handshake outcome
//! ([`AuthOutcome`]) and the decoded form of common inbound envelopes
//! ([`ClientEvent`]).
//!
//! What it is: pure mapping from `citadel_wire` bodies, no I/O. What it is
//! not: a full dispatcher; kinds without a dedicated variant (transform sync,
//! replication, actors, services, application kinds) stay raw in
//! [`ClientEvent::Other`] for the caller to decode with `citadel_wire`.
//!
//! Call order: `WsClient::authenticate` yields an [`AuthOutcome`]; after it,
//! `WsClient::recv_event` (or [`ClientEvent::from_envelope`] on the result of
//! `WsClient::recv`) yields events.

use citadel_wire::Envelope;
use citadel_wire::protocol::{
    AuthResult, KIND_PEER_POSITION, KIND_ROOM_JOINED, KIND_ROOM_LEAVE, KIND_RPC_RESPONSE,
    PeerPosition, RpcResponse,
};
use citadel_wire::room::{RoomJoined, RoomLeave};

/// The result of the realtime handshake (kind 6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthOutcome {
    /// Accepted with a resolved account.
    Authenticated {
        /// The account's user id.
        user_id: String,
    },
    /// Accepted as a guest.
    Guest,
    /// Refused; the server closes the connection afterwards.
    Rejected {
        /// Coarse reason, one of `citadel_wire::protocol::AUTH_REASON_*`.
        reason_class: u8,
    },
}

impl AuthOutcome {
    /// Whether the connection may carry gameplay (authenticated or guest).
    pub fn is_accepted(&self) -> bool {
        !matches!(self, AuthOutcome::Rejected { .. })
    }
}

impl From<AuthResult> for AuthOutcome {
    /// Maps the wire's decoded kind-6 body one to one.
    fn from(result: AuthResult) -> Self {
        match result {
            AuthResult::Authenticated { user_id } => AuthOutcome::Authenticated { user_id },
            AuthResult::Guest => AuthOutcome::Guest,
            AuthResult::Rejected { reason_class } => AuthOutcome::Rejected { reason_class },
        }
    }
}

/// An inbound envelope, decoded when its kind has a dedicated variant.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientEvent {
    /// Kind 23: admitted to a room; load `map`, then send map-ready.
    RoomJoined(RoomJoined),
    /// Kind 24 from the server: removed from (or left) the room.
    RoomLeft {
        /// The room left.
        room_id: u64,
    },
    /// Kind 2: another participant's relayed position.
    PeerPosition(PeerPosition),
    /// Kind 4 not consumed by `call_rpc` (for example a stale response).
    RpcResponse(RpcResponse),
    /// Any other kind, or a known kind whose body failed to decode.
    Other(Envelope),
}

impl ClientEvent {
    /// Decodes `env`; a body that does not decode as its kind yields
    /// [`ClientEvent::Other`] with the envelope unchanged.
    pub fn from_envelope(env: Envelope) -> ClientEvent {
        let decoded = match env.kind {
            KIND_ROOM_JOINED => RoomJoined::decode(&env.body)
                .ok()
                .map(ClientEvent::RoomJoined),
            KIND_ROOM_LEAVE => {
                RoomLeave::decode(&env.body)
                    .ok()
                    .map(|leave| ClientEvent::RoomLeft {
                        room_id: leave.room_id,
                    })
            }
            KIND_PEER_POSITION => PeerPosition::decode(&env.body)
                .ok()
                .map(ClientEvent::PeerPosition),
            KIND_RPC_RESPONSE => RpcResponse::decode(&env.body)
                .ok()
                .map(ClientEvent::RpcResponse),
            _ => None,
        };
        decoded.unwrap_or(ClientEvent::Other(env))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests fail loudly by design
mod tests {
    use super::*;
    use bytes::Bytes;
    use citadel_wire::WireBody;

    #[test]
    fn known_kinds_decode_and_bad_bodies_stay_raw() {
        let joined = RoomJoined {
            room_id: 9,
            map: "Forest".into(),
            mode: "ctf".into(),
        };
        assert_eq!(
            ClientEvent::from_envelope(joined.to_envelope()),
            ClientEvent::RoomJoined(joined)
        );
        let leave = Envelope::new(KIND_ROOM_LEAVE, vec![0, 0, 0, 0, 0, 0, 1, 2]);
        assert_eq!(
            ClientEvent::from_envelope(leave),
            ClientEvent::RoomLeft { room_id: 0x0102 }
        );
        let peer = Envelope::new(KIND_PEER_POSITION, vec![0, 0, 0, 0, 0, 0, 0, 7, 1, 2]);
        assert_eq!(
            ClientEvent::from_envelope(peer),
            ClientEvent::PeerPosition(PeerPosition {
                sender_id: 7,
                payload: Bytes::from_static(&[1, 2]),
            })
        );
        let rpc = Envelope::new(KIND_RPC_RESPONSE, vec![0, 0, 0, 0, 0, 0, 0, 3, 1, b'x']);
        match ClientEvent::from_envelope(rpc) {
            ClientEvent::RpcResponse(r) => {
                assert_eq!((r.request_id, r.status, &r.payload[..]), (3, 1, &b"x"[..]));
            }
            other => panic!("unexpected {other:?}"),
        }
        for bad in [
            Envelope::new(KIND_ROOM_JOINED, vec![0; 9]),
            Envelope::new(KIND_ROOM_LEAVE, vec![0; 7]),
            Envelope::new(KIND_PEER_POSITION, vec![0; 7]),
            Envelope::new(KIND_RPC_RESPONSE, vec![0; 8]),
            Envelope::new(100, vec![1, 2, 3]),
        ] {
            assert_eq!(
                ClientEvent::from_envelope(bad.clone()),
                ClientEvent::Other(bad)
            );
        }
    }

    #[test]
    fn auth_outcome_maps_and_reports_acceptance() {
        let a = AuthOutcome::from(AuthResult::Authenticated {
            user_id: "u-1".into(),
        });
        assert_eq!(
            a,
            AuthOutcome::Authenticated {
                user_id: "u-1".into()
            }
        );
        assert!(a.is_accepted());
        assert!(AuthOutcome::from(AuthResult::Guest).is_accepted());
        let r = AuthOutcome::from(AuthResult::Rejected { reason_class: 2 });
        assert_eq!(r, AuthOutcome::Rejected { reason_class: 2 });
        assert!(!r.is_accepted());
    }
}
