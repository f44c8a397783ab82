//! One realtime connection's protocol state and THE place inbound kinds are
//! routed (dispatch).
//!
//! Call order (the transport drives it): [`Connection::new`] →
//! [`Connection::handle_envelope`] for every decoded reliable envelope (the
//! first one runs the handshake) and [`Connection::handle_datagram`] for
//! unreliable ones → [`Connection::handle_disconnect`] once. Phases are
//! typed: `AwaitingAuth` → `Live` or `Rejected`; a rejection sticks.
//! Replies to the connection's own requests go to its own [`Outbound`];
//! everything addressed to others (relay) goes through the [`Router`].
//! What it is not: it reads no socket; its dependencies are the handles in
//! [`ConnectionDeps`], so its dispatch is tested without one.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use bytes::Bytes;
use citadel_wire::actor::{NaPresence, NaState};
use citadel_wire::protocol::{
    self, AUTH_REASON_PROTOCOL, AuthResult, FIRST_APPLICATION_KIND, KIND_AUTH, KIND_POSITION,
    KIND_ROOM_CREATE, KIND_ROOM_JOIN, KIND_ROOM_LEAVE, KIND_ROOM_MAP_READY, KIND_RPC_REQUEST,
    RPC_STATUS_ERROR, RPC_STATUS_OK, RpcRequest,
};
use citadel_wire::protocol::{
    KIND_NA_PRESENCE, KIND_NA_STATE, KIND_REP_ACK, KIND_REP_DELTA, KIND_TSYNC_ACK,
    KIND_TSYNC_HELLO, KIND_TSYNC_INPUT,
};
use citadel_wire::room::{RoomCreate, RoomJoin, RoomLeave, RoomMapReady};
use citadel_wire::tsync::{InputBundle, TsyncAck};
use citadel_wire::{Envelope, WireBody};
use tokio::sync::Semaphore;
use tokio_util::task::TaskTracker;

use crate::actors::TransformHub;
use crate::config::{AuthConfig, LimitsConfig};
use crate::gateway::handshake::{AwaitingAuth, HandshakeDecision, Identity, SessionValidator};
use crate::gateway::outbound::Outbound;
use crate::gateway::ratelimit::TokenBucket;
use crate::metrics::{CloseReason, DropReason, HandshakeOutcome, Metrics};
use crate::place::RoomId;
use crate::realm::{JoinRefused, Realm, Seat};
use crate::router::{Lane, Recipient, Router, tagged_frame};
use crate::rpc::{self, RpcContext, RpcRegistry};
use crate::runtime::{Caller, Runtime};
use crate::services::live::LiveSessions;

/// Participant ids: non-zero, never reused while the process lives.
#[derive(Debug)]
pub struct ParticipantIds(AtomicU64);

impl Default for ParticipantIds {
    fn default() -> Self {
        ParticipantIds(AtomicU64::new(1))
    }
}

impl ParticipantIds {
    /// The next id.
    pub fn next(&self) -> u64 {
        self.0.fetch_add(1, Ordering::Relaxed)
    }
}

/// The handles a connection uses, and nothing else of the node.
#[derive(Clone)]
pub struct ConnectionDeps {
    /// `[transport.auth]`: the handshake policy.
    pub auth: AuthConfig,
    /// `[transport.limits]`: rate limit and RPC bounds.
    pub limits: LimitsConfig,
    /// Counters.
    pub metrics: Arc<Metrics>,
    /// Rooms and membership.
    pub realm: Arc<Realm>,
    /// Delivery to other connections.
    pub router: Arc<dyn Router>,
    /// RPC methods.
    pub rpc: Arc<RpcRegistry>,
    /// Session-token validation.
    pub validator: Arc<dyn SessionValidator>,
    /// The Lua runtime, if any.
    pub runtime: Option<Runtime>,
    /// Live authenticated connections (revocation, one per user).
    pub live: Arc<LiveSessions>,
    /// Networked actors and snapshots.
    pub hub: Arc<TransformHub>,
    /// NetworkPeer replication (kinds 13/14 when enabled).
    pub netpeer: Arc<crate::netpeer::NetPeerNode>,
    /// Where RPC tasks are spawned (awaited at shutdown).
    pub tasks: TaskTracker,
    /// Participant id allocator.
    pub participant_ids: Arc<ParticipantIds>,
    /// The matchmaker (presence of accounts, queued tickets on disconnect).
    pub matchmaker: Arc<crate::services::matchmaker::Matchmaker>,
    /// Durable chat (room moves and disconnects revoke subscriptions).
    pub chat: Option<Arc<crate::services::chat::ChatService>>,
}

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
    seat: Seat,
    bucket: TokenBucket,
}

impl Live {
    fn caller(&self) -> Caller {
        Caller {
            participant_id: self.participant_id,
            user_id: self.identity.user_id().map(str::to_owned),
            place: self.seat.place(),
        }
    }
}

/// The protocol state of one connection.
#[derive(Debug)]
pub struct Connection {
    deps: Arc<ConnectionDeps>,
    outbound: Outbound,
    phase: Phase,
    rpc_slots: Arc<Semaphore>,
}

impl std::fmt::Debug for ConnectionDeps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectionDeps").finish_non_exhaustive()
    }
}

impl Connection {
    /// A connection awaiting its KIND_AUTH.
    pub fn new(deps: Arc<ConnectionDeps>, outbound: Outbound) -> Self {
        let slots = deps.limits.rpc_max_in_flight;
        Connection {
            deps,
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

    /// The transport measured a round trip: a live participant's lag
    /// profile for fire resolution follows it (nothing before the
    /// handshake).
    pub fn handle_round_trip(&self, rtt: std::time::Duration) {
        if let Phase::Live(live) = &self.phase {
            self.deps.hub.handle_round_trip(live.participant_id, rtt);
        }
    }

    /// Handles one reliable inbound envelope.
    pub async fn handle_envelope(&mut self, envelope: Envelope) -> Flow {
        self.deps
            .metrics
            .envelopes_in
            .fetch_add(1, Ordering::Relaxed);
        match &mut self.phase {
            Phase::AwaitingAuth => self.handle_first_frame(envelope).await,
            Phase::Rejected => Flow::Close(CloseReason::AuthRejected),
            Phase::Closed => Flow::Close(CloseReason::ClientClosed),
            Phase::Live(_) => self.handle_live(envelope).await,
        }
    }

    /// Handles an unreliable (datagram) envelope: dropped before the
    /// handshake; KIND_AUTH on this path is a protocol violation. Counted in
    /// `envelopes_in` like reliable ones (outbound datagrams are counted in
    /// `envelopes_out`).
    pub async fn handle_datagram(&mut self, envelope: Envelope) -> Flow {
        self.deps
            .metrics
            .envelopes_in
            .fetch_add(1, Ordering::Relaxed);
        match self.phase {
            Phase::Live(_) if envelope.kind == KIND_AUTH => {
                self.reject_duplicate_auth();
                Flow::Close(CloseReason::DuplicateAuth)
            }
            Phase::Live(_) => self.handle_live(envelope).await,
            _ => {
                self.deps.metrics.dropped(DropReason::PreAuth);
                Flow::Continue
            }
        }
    }

    async fn handle_first_frame(&mut self, envelope: Envelope) -> Flow {
        let deps = self.deps.clone();
        let decision = AwaitingAuth::new(&deps.auth)
            .handle_first_frame(&envelope, deps.validator.as_ref())
            .await;
        self.outbound
            .send_envelope(&decision.result().to_envelope());
        match decision {
            HandshakeDecision::Reject { why, reason_class } => {
                tracing::info!(reason_class, why, "realtime handshake rejected");
                deps.metrics.handshake(HandshakeOutcome::Rejected);
                self.phase = Phase::Rejected;
                Flow::Close(CloseReason::AuthRejected)
            }
            HandshakeDecision::Accept(identity) => {
                let participant_id = deps.participant_ids.next();
                deps.metrics.handshake(match identity {
                    Identity::Authenticated(_) => HandshakeOutcome::Authenticated,
                    Identity::Guest => HandshakeOutcome::Guest,
                });
                deps.metrics.participants.fetch_add(1, Ordering::Relaxed);
                let user_id = identity.user_id().map(str::to_owned);
                deps.router.attach(Recipient {
                    participant_id,
                    user_id: user_id.clone(),
                    outbound: self.outbound.clone(),
                });
                let seat = deps
                    .realm
                    .register(participant_id, user_id, self.outbound.clone());
                if let Identity::Authenticated(session) = &identity {
                    deps.matchmaker.connected(participant_id, &session.user_id);
                    deps.live.register(
                        &session.session_id,
                        &session.user_id,
                        participant_id,
                        self.outbound.clone(),
                        deps.auth.single_connection_per_user,
                    );
                }
                tracing::debug!(
                    participant_id,
                    guest = identity.user_id().is_none(),
                    "participant joined"
                );
                let limits = &deps.limits;
                let live = Live {
                    participant_id,
                    identity,
                    seat,
                    bucket: TokenBucket::new(
                        limits.messages_per_second,
                        limits.message_burst,
                        Instant::now(),
                    ),
                };
                deps.netpeer
                    .handle_connect(participant_id, live.identity.user_id().is_none());
                if let Some(rt) = &deps.runtime {
                    rt.join(live.caller());
                }
                self.phase = Phase::Live(live);
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
            self.deps.metrics.dropped(DropReason::RateLimited);
            return Flow::Continue;
        }
        let participant_id = live.participant_id;
        match envelope.kind {
            KIND_POSITION => {
                self.relay(
                    protocol::KIND_PEER_POSITION,
                    &envelope.body,
                    Lane::Unreliable,
                );
            }
            KIND_RPC_REQUEST => self.handle_rpc(&envelope.body).await,
            KIND_ROOM_CREATE => match RoomCreate::decode(&envelope.body) {
                Ok(create) => {
                    let result = self
                        .deps
                        .realm
                        .join_or_create(participant_id, Bytes::from(create.params))
                        .await;
                    self.count_join(result);
                }
                Err(_) => self.deps.metrics.dropped(DropReason::MalformedBody),
            },
            KIND_ROOM_JOIN => match RoomJoin::decode(&envelope.body) {
                Ok(join) => {
                    let result = match RoomId::new(join.room_id) {
                        Some(room) => self.deps.realm.join_by_id(participant_id, room).await,
                        None => Err(JoinRefused::NoSuchRoom),
                    };
                    self.count_join(result);
                }
                Err(_) => self.deps.metrics.dropped(DropReason::MalformedBody),
            },
            KIND_ROOM_LEAVE => match RoomLeave::decode(&envelope.body) {
                Ok(leave) => {
                    let left = RoomId::new(leave.room_id)
                        .is_some_and(|room| self.deps.realm.leave(participant_id, room));
                    if left {
                        self.sync_place();
                    } else {
                        self.deps.metrics.dropped(DropReason::StaleRoomId);
                    }
                }
                Err(_) => self.deps.metrics.dropped(DropReason::MalformedBody),
            },
            KIND_ROOM_MAP_READY => match RoomMapReady::decode(&envelope.body) {
                Ok(ready) => {
                    let marked = RoomId::new(ready.room_id)
                        .is_some_and(|room| self.deps.realm.map_ready(participant_id, room));
                    if !marked {
                        self.deps.metrics.dropped(DropReason::StaleRoomId);
                    }
                }
                Err(_) => self.deps.metrics.dropped(DropReason::MalformedBody),
            },
            KIND_TSYNC_HELLO | KIND_TSYNC_ACK | KIND_TSYNC_INPUT | KIND_NA_PRESENCE
            | KIND_NA_STATE
                if self.deps.hub.enabled() =>
            {
                self.handle_transform_sync(envelope.kind, &envelope.body)
                    .await;
            }
            // Kinds 13/14: the NetworkPeer driver owns them; rejections are
            // silent drops counted by reason there.
            KIND_REP_DELTA if self.deps.netpeer.enabled() => {
                self.deps.netpeer.handle_proposal_from(
                    participant_id,
                    live.identity.user_id(),
                    envelope.body,
                );
            }
            KIND_REP_ACK if self.deps.netpeer.enabled() => {
                self.deps.netpeer.handle_ack(participant_id, &envelope.body);
            }
            kind if kind >= FIRST_APPLICATION_KIND => {
                match self.deps.runtime.as_ref() {
                    // A script `on_message(kind)` handler owns the kind.
                    Some(rt) if rt.handles_message(kind) => {
                        rt.message(live.caller(), kind, envelope.body);
                    }
                    // No handler: relay under its own kind, reliably.
                    _ => self.relay(kind, &envelope.body, Lane::Reliable),
                }
            }
            kind => {
                let reason = match protocol::kind_direction(kind) {
                    Some(protocol::Direction::ServerToClient) => DropReason::ServerOnlyKind,
                    Some(_) => DropReason::UnsupportedKind,
                    None => DropReason::ReservedKind,
                };
                self.deps.metrics.dropped(reason);
            }
        }
        Flow::Continue
    }

    /// Kinds 7, 9, 10, 16, 20: the transform hub owns them. Kind 9 waits
    /// for the script's verdicts when it registered `on_input`.
    async fn handle_transform_sync(&self, kind: u16, body: &[u8]) {
        let Phase::Live(live) = &self.phase else {
            return;
        };
        let hub = &self.deps.hub;
        let pid = live.participant_id;
        let malformed = || self.deps.metrics.dropped(DropReason::MalformedBody);
        match kind {
            KIND_TSYNC_HELLO => hub.handle_hello(pid, live.seat.place()),
            KIND_TSYNC_ACK => match TsyncAck::decode(body) {
                Ok(ack) => hub.handle_ack(pid, &ack),
                Err(_) => malformed(),
            },
            KIND_TSYNC_INPUT => match InputBundle::decode(body) {
                Ok(bundle) => match self.deps.runtime.as_ref().filter(|rt| rt.handles_input()) {
                    Some(rt) => hub.handle_input_judged(rt, live.caller(), &bundle).await,
                    None => hub.handle_input(pid, &bundle),
                },
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
            self.deps
                .hub
                .handle_place_change(live.participant_id, live.seat.place());
            if let Some(chat) = &self.deps.chat {
                chat.handle_place_change(live.participant_id, live.seat.place());
            }
        }
    }

    fn count_join(&self, result: Result<RoomId, JoinRefused>) {
        self.sync_place();
        match result {
            Ok(_) => {}
            Err(JoinRefused::RoomLimit) => self.deps.metrics.dropped(DropReason::RoomLimit),
            Err(JoinRefused::BadName) => self.deps.metrics.dropped(DropReason::BadRoomName),
            Err(_) => self.deps.metrics.dropped(DropReason::RoomJoinRefused),
        }
    }

    /// Sends `payload` tagged with the sender to every other member of the
    /// sender's place (room or default dimension), encoded once.
    fn relay(&self, kind: u16, payload: &[u8], lane: Lane) {
        let Phase::Live(live) = &self.phase else {
            return;
        };
        let frame = tagged_frame(kind, live.participant_id, payload);
        self.deps
            .router
            .to_place(live.seat.place(), Some(live.participant_id), lane, frame);
    }

    async fn handle_rpc(&mut self, body: &[u8]) {
        let Phase::Live(live) = &self.phase else {
            return;
        };
        let Ok(request) = RpcRequest::decode(body) else {
            self.deps.metrics.dropped(DropReason::MalformedBody);
            return;
        };
        let ctx = RpcContext {
            participant_id: live.participant_id,
            user_id: live.identity.user_id().map(str::to_owned),
            place: live.seat.place(),
            method: request.method.clone(),
        };
        // Waiting for a slot is the backpressure on a client that floods RPCs.
        let Ok(permit) = self.rpc_slots.clone().acquire_owned().await else {
            return;
        };
        let deps = self.deps.clone();
        let outbound = self.outbound.clone();
        let deadline = std::time::Duration::from_millis(deps.limits.rpc_timeout_ms);
        let handler = deps.rpc.route(&request.method, ctx.user_id.as_deref());
        let tasks = deps.tasks.clone();
        tasks.spawn(async move {
            let _permit = permit;
            let mut after = None;
            let (status, payload) = match handler {
                Err(refusal) => (RPC_STATUS_ERROR, Bytes::from_static(refusal.as_bytes())),
                Ok(handler) => match tokio::time::timeout(deadline, handler.call(ctx.clone(), request.payload)).await {
                    Ok(Ok(reply)) => {
                        after = Some(handler);
                        (RPC_STATUS_OK, reply)
                    }
                    Ok(Err(err)) => {
                        tracing::warn!(method = %request.method, error = %err, "RPC handler failed");
                        (RPC_STATUS_ERROR, err.client_message())
                    }
                    Err(_) => {
                        tracing::warn!(method = %request.method, "RPC handler timed out");
                        (RPC_STATUS_ERROR, Bytes::from_static(rpc::HANDLER_TIMEOUT.as_bytes()))
                    }
                },
            };
            deps.metrics.rpc_calls.fetch_add(1, Ordering::Relaxed);
            if status != RPC_STATUS_OK {
                deps.metrics.rpc_errors.fetch_add(1, Ordering::Relaxed);
            }
            let response = protocol::RpcResponse {
                request_id: request.request_id,
                status,
                payload,
            };
            outbound.send_envelope(&response.to_envelope());
            if let Some(handler) = after {
                handler.after_reply(&ctx);
            }
        });
    }

    /// Removes the participant from the realm (idempotent).
    pub fn handle_disconnect(&mut self) {
        if let Phase::Live(live) = &self.phase {
            let caller = live.caller();
            self.deps.hub.handle_disconnect(live.participant_id);
            self.deps.netpeer.handle_disconnect(live.participant_id);
            if let Identity::Authenticated(session) = &live.identity {
                self.deps
                    .live
                    .unregister(&session.session_id, live.participant_id);
            }
            self.deps.matchmaker.disconnected(live.participant_id);
            if let Some(chat) = &self.deps.chat {
                chat.handle_disconnect(live.participant_id);
            }
            self.deps.realm.unregister(live.participant_id);
            self.deps.router.detach(live.participant_id);
            if let Some(rt) = &self.deps.runtime {
                rt.leave(caller);
            }
            self.deps
                .metrics
                .participants
                .fetch_sub(1, Ordering::Relaxed);
            tracing::debug!(participant_id = live.participant_id, "participant left");
        }
        self.phase = Phase::Closed;
    }
}

#[cfg(test)]
pub(crate) mod tests;
