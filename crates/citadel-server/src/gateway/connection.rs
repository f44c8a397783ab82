//! One realtime connection's protocol state and THE place inbound kinds are
//! routed (dispatch).
//!
//! Call order (the transport drives it): [`Connection::new`] →
//! [`Connection::handle_envelope`] for every decoded reliable envelope (the
//! first one runs the handshake) → [`Connection::handle_disconnect`] once.
//! Phases are typed: `AwaitingAuth` → `Live` or `Rejected`; a rejection
//! sticks. Outputs go to the connection's own [`Outbound`] (replies) or to
//! peers' outbounds (relay fan-out, encoded once and shared).

use std::sync::Arc;
use std::time::Instant;

use bytes::{BufMut, Bytes, BytesMut};
use citadel_wire::actor::{NaPresence, NaState};
use citadel_wire::protocol::{
    self, AUTH_REASON_PROTOCOL, AuthResult, FIRST_APPLICATION_KIND, KIND_AUTH, KIND_POSITION,
    KIND_ROOM_CREATE, KIND_ROOM_JOIN, KIND_ROOM_LEAVE, KIND_ROOM_MAP_READY, KIND_RPC_REQUEST,
    RPC_STATUS_ERROR, RPC_STATUS_OK, RpcRequest,
};
use citadel_wire::protocol::{
    KIND_NA_PRESENCE, KIND_NA_STATE, KIND_TSYNC_ACK, KIND_TSYNC_HELLO, KIND_TSYNC_INPUT,
};
use citadel_wire::room::{RoomCreate, RoomJoin, RoomLeave, RoomMapReady};
use citadel_wire::tsync::{InputBundle, TsyncAck};
use citadel_wire::{Envelope, WireBody};
use tokio::sync::Semaphore;

use crate::gateway::handshake::{AwaitingAuth, HandshakeDecision, Identity};
use crate::gateway::outbound::Outbound;
use crate::gateway::ratelimit::TokenBucket;
use crate::metrics::{CloseReason, DropReason, HandshakeOutcome};
use crate::node::NodeShared;
use crate::realm::{JoinRefused, Place};
use crate::rpc::{self, RpcContext};

/// What the transport should do after an envelope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Keep reading.
    Continue,
    /// Stop reading; the outbound flushes and closes with this reason.
    Close(CloseReason),
}

#[derive(Debug)]
enum Phase {
    AwaitingAuth,
    Live(Live),
    Rejected,
    Closed,
}

#[derive(Debug)]
struct Live {
    participant_id: u64,
    identity: Identity,
    place: Place,
    bucket: TokenBucket,
}

/// The protocol state of one connection.
#[derive(Debug)]
pub struct Connection {
    shared: Arc<NodeShared>,
    outbound: Outbound,
    phase: Phase,
    rpc_slots: Arc<Semaphore>,
}

/// Builds a framed envelope whose body is `sender` (u64 BE) + `payload`,
/// encoded once for every recipient.
pub fn framed_with_sender(kind: u16, sender: u64, payload: &[u8]) -> Bytes {
    let body_len = protocol::SENDER_ID_BYTES + payload.len();
    let mut out = BytesMut::with_capacity(protocol::LENGTH_PREFIX_BYTES + 2 + body_len);
    out.put_u32((2 + body_len) as u32);
    out.put_u16(kind);
    out.put_u64(sender);
    out.put_slice(payload);
    out.freeze()
}

impl Connection {
    /// A connection awaiting its KIND_AUTH.
    pub fn new(shared: Arc<NodeShared>, outbound: Outbound) -> Self {
        let slots = shared.config.transport.limits.rpc_max_in_flight;
        Connection {
            shared,
            outbound,
            phase: Phase::AwaitingAuth,
            rpc_slots: Arc::new(Semaphore::new(slots)),
        }
    }

    /// The participant id once accepted.
    pub fn participant_id(&self) -> Option<u64> {
        match &self.phase {
            Phase::Live(live) => Some(live.participant_id),
            _ => None,
        }
    }

    /// Whether the handshake has completed successfully.
    pub fn is_live(&self) -> bool {
        matches!(self.phase, Phase::Live(_))
    }

    /// Handles one reliable inbound envelope.
    pub async fn handle_envelope(&mut self, envelope: Envelope) -> Flow {
        self.shared
            .metrics
            .envelopes_in
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        match &mut self.phase {
            Phase::AwaitingAuth => self.handle_first_frame(envelope).await,
            Phase::Rejected => Flow::Close(CloseReason::AuthRejected),
            Phase::Closed => Flow::Close(CloseReason::ClientClosed),
            Phase::Live(_) => self.handle_live(envelope).await,
        }
    }

    /// Handles an unreliable (datagram) envelope: dropped before the
    /// handshake; KIND_AUTH on this path is a protocol violation.
    pub async fn handle_datagram(&mut self, envelope: Envelope) -> Flow {
        match self.phase {
            Phase::Live(_) if envelope.kind == KIND_AUTH => {
                self.reject_duplicate_auth();
                Flow::Close(CloseReason::DuplicateAuth)
            }
            Phase::Live(_) => self.handle_live(envelope).await,
            _ => {
                self.shared.metrics.dropped(DropReason::PreAuth);
                Flow::Continue
            }
        }
    }

    async fn handle_first_frame(&mut self, envelope: Envelope) -> Flow {
        let shared = self.shared.clone();
        let decision = AwaitingAuth::new(&shared.config.transport.auth)
            .handle_first_frame(&envelope, shared.validator.as_ref())
            .await;
        self.outbound
            .send_envelope(&decision.result().to_envelope());
        match decision {
            HandshakeDecision::Reject { why, reason_class } => {
                tracing::info!(reason_class, why, "realtime handshake rejected");
                shared.metrics.handshake(HandshakeOutcome::Rejected);
                self.phase = Phase::Rejected;
                Flow::Close(CloseReason::AuthRejected)
            }
            HandshakeDecision::Accept(identity) => {
                let participant_id = shared.next_participant_id();
                shared.metrics.handshake(match identity {
                    Identity::Authenticated(_) => HandshakeOutcome::Authenticated,
                    Identity::Guest => HandshakeOutcome::Guest,
                });
                shared
                    .metrics
                    .participants
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let place = shared.realm.register(
                    participant_id,
                    identity.user_id().map(str::to_owned),
                    self.outbound.clone(),
                );
                if let Identity::Authenticated(session) = &identity {
                    shared.live.register(
                        &session.session_id,
                        &session.user_id,
                        participant_id,
                        self.outbound.clone(),
                        shared.config.transport.auth.single_connection_per_user,
                    );
                }
                tracing::debug!(
                    participant_id,
                    guest = identity.user_id().is_none(),
                    "participant joined"
                );
                let limits = &shared.config.transport.limits;
                self.phase = Phase::Live(Live {
                    participant_id,
                    identity,
                    place,
                    bucket: TokenBucket::new(
                        limits.messages_per_second,
                        limits.message_burst,
                        Instant::now(),
                    ),
                });
                Flow::Continue
            }
        }
    }

    fn reject_duplicate_auth(&mut self) {
        let rejected = AuthResult::Rejected {
            reason_class: AUTH_REASON_PROTOCOL,
        };
        self.outbound.send_envelope(&rejected.to_envelope());
    }

    /// Routes one envelope of a live connection to exactly one owner.
    async fn handle_live(&mut self, envelope: Envelope) -> Flow {
        let Phase::Live(live) = &mut self.phase else {
            return Flow::Continue;
        };
        if envelope.kind == KIND_AUTH {
            self.reject_duplicate_auth();
            return Flow::Close(CloseReason::DuplicateAuth);
        }
        if !live.bucket.try_take(Instant::now()) {
            self.shared.metrics.dropped(DropReason::RateLimited);
            return Flow::Continue;
        }
        let participant_id = live.participant_id;
        match envelope.kind {
            KIND_POSITION => {
                self.relay(protocol::KIND_PEER_POSITION, &envelope.body, true);
            }
            KIND_RPC_REQUEST => self.handle_rpc(&envelope.body).await,
            KIND_ROOM_CREATE => match RoomCreate::decode(&envelope.body) {
                Ok(create) => {
                    let result = self
                        .shared
                        .realm
                        .join_or_create(participant_id, Bytes::from(create.params))
                        .await;
                    self.count_join(result);
                }
                Err(_) => self.shared.metrics.dropped(DropReason::MalformedBody),
            },
            KIND_ROOM_JOIN => match RoomJoin::decode(&envelope.body) {
                Ok(join) => {
                    let result = self
                        .shared
                        .realm
                        .join_by_id(participant_id, join.room_id)
                        .await;
                    self.count_join(result);
                }
                Err(_) => self.shared.metrics.dropped(DropReason::MalformedBody),
            },
            KIND_ROOM_LEAVE => match RoomLeave::decode(&envelope.body) {
                Ok(leave) => {
                    if self.shared.realm.leave(participant_id, leave.room_id) {
                        self.sync_place();
                    } else {
                        self.shared.metrics.dropped(DropReason::StaleRoomId);
                    }
                }
                Err(_) => self.shared.metrics.dropped(DropReason::MalformedBody),
            },
            KIND_ROOM_MAP_READY => match RoomMapReady::decode(&envelope.body) {
                Ok(ready) => {
                    if !self.shared.realm.map_ready(participant_id, ready.room_id) {
                        self.shared.metrics.dropped(DropReason::StaleRoomId);
                    }
                }
                Err(_) => self.shared.metrics.dropped(DropReason::MalformedBody),
            },
            KIND_TSYNC_HELLO | KIND_TSYNC_ACK | KIND_TSYNC_INPUT | KIND_NA_PRESENCE
            | KIND_NA_STATE
                if self.shared.hub.enabled() =>
            {
                self.handle_transform_sync(envelope.kind, &envelope.body);
            }
            kind if kind >= FIRST_APPLICATION_KIND => {
                // No script handler yet: relay under its own kind, reliably.
                self.relay(kind, &envelope.body, false);
            }
            kind => {
                let reason = match protocol::kind_direction(kind) {
                    Some(protocol::Direction::ServerToClient) => DropReason::ServerOnlyKind,
                    Some(_) => DropReason::UnsupportedKind,
                    None => DropReason::ReservedKind,
                };
                self.shared.metrics.dropped(reason);
            }
        }
        Flow::Continue
    }

    /// Kinds 7, 9, 10, 16, 20: the transform hub owns them.
    fn handle_transform_sync(&self, kind: u16, body: &[u8]) {
        let Phase::Live(live) = &self.phase else {
            return;
        };
        let hub = &self.shared.hub;
        let pid = live.participant_id;
        let malformed = || self.shared.metrics.dropped(DropReason::MalformedBody);
        match kind {
            KIND_TSYNC_HELLO => hub.handle_hello(pid, &self.outbound, live.place.scope().room_id()),
            KIND_TSYNC_ACK => match TsyncAck::decode(body) {
                Ok(ack) => hub.handle_ack(pid, &ack),
                Err(_) => malformed(),
            },
            KIND_TSYNC_INPUT => match InputBundle::decode(body) {
                Ok(bundle) => hub.handle_input(pid, &bundle),
                Err(_) => malformed(),
            },
            KIND_NA_PRESENCE => match NaPresence::decode(body) {
                Ok(presence) => hub.handle_presence(pid, &presence),
                Err(_) => malformed(),
            },
            _ => match NaState::decode(body) {
                Ok(state) => {
                    hub.handle_state(pid, &state);
                }
                Err(_) => malformed(),
            },
        }
    }

    /// Tells the transform hub where the participant is now.
    fn sync_place(&self) {
        if let Phase::Live(live) = &self.phase {
            self.shared
                .hub
                .handle_place_change(live.participant_id, live.place.scope().room_id());
        }
    }

    fn count_join(&self, result: Result<u64, JoinRefused>) {
        self.sync_place();
        match result {
            Ok(_) => {}
            Err(JoinRefused::RoomLimit) => self.shared.metrics.dropped(DropReason::RoomLimit),
            Err(JoinRefused::BadName) => self.shared.metrics.dropped(DropReason::BadRoomName),
            Err(_) => self.shared.metrics.dropped(DropReason::RoomJoinRefused),
        }
    }

    /// Sends `payload` tagged with the sender to every other member of the
    /// sender's place (room or default dimension), encoded once.
    fn relay(&self, kind: u16, payload: &[u8], unreliable: bool) {
        let Phase::Live(live) = &self.phase else {
            return;
        };
        let frame = framed_with_sender(kind, live.participant_id, payload);
        let scope = live.place.scope();
        for member in scope.members().iter() {
            if member.participant_id == live.participant_id {
                continue;
            }
            if unreliable {
                member.outbound.send_unreliable(frame.clone());
            } else {
                member.outbound.send_reliable(frame.clone());
            }
        }
    }

    async fn handle_rpc(&mut self, body: &[u8]) {
        let Phase::Live(live) = &self.phase else {
            return;
        };
        let Ok(request) = RpcRequest::decode(body) else {
            self.shared.metrics.dropped(DropReason::MalformedBody);
            return;
        };
        let ctx = RpcContext {
            participant_id: live.participant_id,
            user_id: live.identity.user_id().map(str::to_owned),
            method: request.method.clone(),
        };
        // Waiting for a slot is the backpressure on a client that floods RPCs.
        let Ok(permit) = self.rpc_slots.clone().acquire_owned().await else {
            return;
        };
        let shared = self.shared.clone();
        let outbound = self.outbound.clone();
        let deadline =
            std::time::Duration::from_millis(shared.config.transport.limits.rpc_timeout_ms);
        let handler = shared.rpc.resolve(&request.method);
        let tasks = shared.tasks.clone();
        tasks.spawn(async move {
            let _permit = permit;
            let (status, payload) = match handler {
                None => (RPC_STATUS_ERROR, Bytes::from_static(rpc::UNKNOWN_METHOD.as_bytes())),
                Some(handler) => match tokio::time::timeout(deadline, handler.call(ctx, request.payload)).await {
                    Ok(Ok(reply)) => (RPC_STATUS_OK, reply),
                    Ok(Err(err)) => {
                        tracing::warn!(method = %request.method, error = %err, "RPC handler failed");
                        (RPC_STATUS_ERROR, Bytes::from_static(err.client_message().as_bytes()))
                    }
                    Err(_) => {
                        tracing::warn!(method = %request.method, "RPC handler timed out");
                        (RPC_STATUS_ERROR, Bytes::from_static(rpc::HANDLER_TIMEOUT.as_bytes()))
                    }
                },
            };
            shared.metrics.rpc_calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if status != RPC_STATUS_OK {
                shared.metrics.rpc_errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            let response = protocol::RpcResponse {
                request_id: request.request_id,
                status,
                payload,
            };
            outbound.send_envelope(&response.to_envelope());
        });
    }

    /// Removes the participant from the realm (idempotent).
    pub fn handle_disconnect(&mut self) {
        if let Phase::Live(live) = &self.phase {
            self.shared.hub.handle_disconnect(live.participant_id);
            if let Identity::Authenticated(session) = &live.identity {
                self.shared
                    .live
                    .unregister(&session.session_id, live.participant_id);
            }
            self.shared.realm.unregister(live.participant_id);
            self.shared
                .metrics
                .participants
                .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
            tracing::debug!(participant_id = live.participant_id, "participant left");
        }
        self.phase = Phase::Closed;
    }
}
