//! The node's counters and gauges, rendered for `/status` (JSON) and
//! `/metrics` (Prometheus text format 0.0.4).
//!
//! Plain atomics owned by one `Metrics` value shared through `Arc`; every
//! drop and every close has a named reason so an operator can see which
//! bound tripped. Not a general metrics registry.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

macro_rules! reasons {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident => $label:literal,)* }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name { $($(#[$vdoc])* $variant,)* }
        impl $name {
            /// Every reason, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)*];
            /// The stable label used in metrics.
            pub fn label(self) -> &'static str {
                match self { $($name::$variant => $label,)* }
            }
        }
    };
}

reasons!(
    /// Why an inbound or outbound envelope was not delivered.
    DropReason {
        /// The connection's inbound token bucket was empty.
        RateLimited => "rate_limited",
        /// A client sent a kind only the server may send.
        ServerOnlyKind => "server_only_kind",
        /// A reserved (29-99) or zero kind.
        ReservedKind => "reserved_kind",
        /// A client kind whose feature this node does not serve.
        UnsupportedKind => "unsupported_kind",
        /// A body that did not decode (RPC, rooms).
        MalformedBody => "malformed_body",
        /// An envelope sent before the handshake finished (datagrams).
        PreAuth => "pre_auth",
        /// The unreliable lane was full: the oldest envelope was dropped.
        UnreliableLaneFull => "unreliable_lane_full",
        /// A room request that named a room the sender is not in.
        StaleRoomId => "stale_room_id",
        /// A join refused by policy, capacity, `open`, or a missing room.
        RoomJoinRefused => "room_join_refused",
        /// A create refused because `rooms.max_rooms` is reached.
        RoomLimit => "room_limit",
        /// A room name that is empty or too long.
        BadRoomName => "bad_room_name",
        /// Envelopes still queued when their connection closed.
        ConnectionClosed => "connection_closed",
        /// An offered reliable envelope (chat events) refused because the
        /// reliable lane was half full; the connection stays open.
        ReliableOfferDropped => "reliable_offer_dropped",
        /// An outbound datagram larger than the connection's current maximum
        /// datagram size (or a peer that refused datagrams): not sent.
        DatagramTooLarge => "datagram_too_large",
        /// An outbound datagram found the QUIC connection's datagram send
        /// buffer (`datagram_send_buffer_bytes`) full: it was queued and the
        /// connection dropped its oldest queued datagram(s) to make room.
        DatagramSendBufferFull => "datagram_send_buffer_full",
        /// Inbound datagrams the QUIC connection dropped because its receive
        /// buffer (`datagram_receive_buffer_bytes`) was full, or that were
        /// still unread when it closed; counted when the connection ends.
        DatagramReceiveBufferFull => "datagram_receive_buffer_full",
        /// An inbound datagram shorter than the 2-byte kind.
        MalformedDatagram => "malformed_datagram",
        /// NA_STATE for an object the sender does not own, or for a
        /// predicted-authoritative archetype, or with a non-finite transform.
        ActorStateRefused => "actor_state_refused",
        /// Transform-sync frames from a client that has not sent HELLO.
        NotOptedIn => "not_opted_in",
        /// Owner input frames not applied: no presence, not the sender's
        /// object, a relayed object, another ownership epoch, sequence 0,
        /// already applied or buffered, or more than 256 ahead.
        ActorInputRefused => "actor_input_refused",
    }
);

reasons!(
    /// Why the server closed a connection.
    CloseReason {
        /// The client disconnected or closed normally.
        ClientClosed => "client_closed",
        /// The handshake was rejected.
        AuthRejected => "auth_rejected",
        /// No first frame within the handshake timeout.
        HandshakeTimeout => "handshake_timeout",
        /// A framing error or a frame over the inbound limit.
        FramingError => "framing_error",
        /// A text WebSocket message.
        TextMessage => "text_message",
        /// A second KIND_AUTH after acceptance.
        DuplicateAuth => "duplicate_auth",
        /// The reliable lane or byte cap overflowed (the client reads too slowly).
        SlowConsumer => "slow_consumer",
        /// No traffic within the heartbeat timeout.
        HeartbeatTimeout => "heartbeat_timeout",
        /// `transport.limits.max_connections` reached.
        ServerFull => "server_full",
        /// The node is shutting down.
        Shutdown => "shutdown",
        /// A transport error.
        TransportError => "transport_error",
        /// The session was revoked (logout, account disabled).
        SessionRevoked => "session_revoked",
        /// A newer connection of the same account replaced it.
        Replaced => "replaced",
    }
);

impl CloseReason {
    /// WebSocket close code and the human-readable reason sent with it.
    pub fn websocket_close(self) -> (u16, &'static str) {
        match self {
            CloseReason::ClientClosed => (1000, "closed"),
            CloseReason::AuthRejected => (1008, "authentication rejected"),
            CloseReason::HandshakeTimeout => {
                (1008, "handshake timeout: first frame must be KIND_AUTH")
            }
            CloseReason::FramingError => (1002, "invalid frame"),
            CloseReason::TextMessage => {
                (1003, "text messages are not supported; send binary frames")
            }
            CloseReason::DuplicateAuth => (1008, "duplicate KIND_AUTH"),
            CloseReason::SlowConsumer => (1008, "outbound queue full: client reads too slowly"),
            CloseReason::HeartbeatTimeout => (1001, "heartbeat timeout"),
            CloseReason::ServerFull => (1013, "server full, try again later"),
            CloseReason::Shutdown => (1001, "server shutting down"),
            CloseReason::TransportError => (1011, "transport error"),
            CloseReason::SessionRevoked => (1008, "session revoked"),
            CloseReason::Replaced => (1008, "replaced by a newer connection of this account"),
        }
    }
}

impl CloseReason {
    /// QUIC / WebTransport application close code and reason: the same
    /// numbers as the WebSocket close codes, so every transport reports a
    /// close the same way (docs/protocol.md lists them).
    pub fn quic_close(self) -> (u32, &'static str) {
        let (code, text) = self.websocket_close();
        (u32::from(code), text)
    }
}
reasons!(
    /// Lua runtime events; every runtime bound that trips has one.
    RuntimeEvent {
        /// Invocations run (RPC, message, join/leave, room hooks, ticks).
        Invocations => "invocations",
        /// Invocations that raised an error.
        Errors => "errors",
        /// Invocations stopped at their deadline.
        Timeouts => "timeouts",
        /// Invocations that hit `runtime.memory_limit_mb`.
        OutOfMemory => "out_of_memory",
        /// Calls refused because the runtime queue was full.
        QueueFull => "queue_full",
        /// Commands past the 1024-per-invocation cap (dropped).
        CommandsDropped => "commands_dropped",
        /// Commands past the 1 MiB-per-invocation byte cap (dropped).
        BytesDropped => "bytes_dropped",
        /// `citadel.send` to a participant that is not connected.
        UnknownRecipient => "unknown_recipient",
        /// `on_tick` invocations (server-wide and per room).
        Ticks => "ticks",
        /// Ticks skipped because the VM was busy past the next tick.
        TicksLate => "ticks_late",
        /// Hot reloads that swapped in a new VM.
        Reloads => "reloads",
        /// Hot reloads rejected (old VM kept).
        ReloadFailures => "reload_failures",
        /// Networked-actor commands queued by scripts.
        ActorCommands => "actor_commands",
    }
);

reasons!(
    /// Events of the built-in player services.
    ServiceEvent {
        /// Notifications committed.
        NotificationsCreated => "notifications_created",
        /// Sends answered with the existing item of a delivery key.
        NotificationsDeduplicated => "notifications_deduplicated",
        /// Live KIND_NOTIFICATION copies queued on a recipient's lane.
        NotificationsLiveQueued => "notifications_live_queued",
        /// Live copies not queued because a recipient's lane refused them
        /// (the item stays in the inbox).
        NotificationsLiveDropped => "notifications_live_dropped",
        /// Items removed by the per-user inbox bound.
        NotificationsPruned => "notifications_pruned",
        /// Sends refused (bounds, unknown recipient).
        NotificationsRefused => "notifications_refused",
        /// Tickets queued by `matchmaker.add`.
        MatchmakerTicketsAdded => "matchmaker_tickets_added",
        /// `matchmaker.add` calls refused (a bound, a bad query, a queued
        /// participant, a full queue).
        MatchmakerRefused => "matchmaker_refused",
        /// `add` / `cancel` calls held by `matchmaker.calls_per_second`.
        MatchmakerRateLimited => "matchmaker_rate_limited",
        /// Candidate tickets examined while forming cohorts.
        MatchmakerEvaluations => "matchmaker_evaluations",
        /// Time spent forming cohorts under the queue lock, microseconds.
        MatchmakerEvaluationMicros => "matchmaker_evaluation_us",
        /// Matches formed (rooms created).
        MatchmakerMatchesFormed => "matchmaker_matches_formed",
        /// Tickets that left the queue in a formed match.
        MatchmakerTicketsFormed => "matchmaker_tickets_formed",
        /// Tickets cancelled by their owner.
        MatchmakerTicketsCancelled => "matchmaker_tickets_cancelled",
        /// Tickets removed by their TTL.
        MatchmakerTicketsExpired => "matchmaker_tickets_expired",
        /// Tickets removed because a member disconnected.
        MatchmakerTicketsDisconnected => "matchmaker_tickets_disconnected",
        /// Cohorts whose room could not be created (`rooms.max_rooms`).
        MatchmakerFormationFailed => "matchmaker_formation_failed",
        /// Join tokens redeemed by `matchmaker.accept`.
        MatchmakerAccepted => "matchmaker_accepted",
        /// `friends.add` refused by `friends.max_relations`.
        FriendsLimitRefused => "friends_limit_refused",
        /// Groups created.
        GroupsCreated => "groups_created",
        /// Groups deleted.
        GroupsDeleted => "groups_deleted",
        /// Admissions refused by a group's `max_members`.
        GroupsFullRefused => "groups_full_refused",
        /// Creations and admissions refused by `groups.max_groups_per_user`.
        GroupsUserLimitRefused => "groups_user_limit_refused",
        /// Chat mutations committed (send, edit, delete, moderate).
        ChatCommitted => "chat_committed",
        /// Chat actions refused by a `[chat.limits]` rule.
        ChatRateLimited => "chat_rate_limited",
        /// Chat actions refused because the rate-limit storage failed.
        ChatRateLimitStorageFailed => "chat_rate_limit_storage_failed",
        /// Commits that shared a group-commit store call with others.
        ChatCommitsGrouped => "chat_commits_grouped",
        /// Commits refused because `chat.max_outbox_rows` rows are pending.
        ChatOutboxFull => "chat_outbox_full",
        /// Outbox rows acknowledged after delivery.
        ChatOutboxAcked => "chat_outbox_acked",
        /// Outbox rows dropped past their retry window.
        ChatOutboxExpired => "chat_outbox_expired",
        /// Durable chat events queued on a subscriber's lane.
        ChatLiveQueued => "chat_live_queued",
        /// Durable chat events a subscriber's lane dropped (the
        /// subscription is flagged for `resync_required`).
        ChatLiveDropped => "chat_live_dropped",
        /// `resync_required` notices queued.
        ChatResyncSent => "chat_resync_sent",
        /// Subscriptions revoked (room exit, unfriend, block, group exit).
        ChatRevoked => "chat_revoked",
        /// Joins refused by `chat.max_subscriptions_per_connection` or
        /// `chat.max_subscribers_per_channel`.
        ChatSubscriptionLimit => "chat_subscription_limit",
        /// Fire commands resolved with rewind (each answered with kind 12).
        FireResolved => "fire_resolved",
        /// Of those, hits.
        FireHits => "fire_hits",
        /// Fire commands whose rewind `transform_sync.rewind_max_unlag` clamped.
        FireUnlagClamped => "fire_unlag_clamped",
        /// Fire commands resolved uncompensated (RTT over
        /// `transform_sync.lag_comp_rtt_cutoff_ms`).
        FireUncompensated => "fire_uncompensated",
        /// Fire commands refused unresolved: the origin was farther than
        /// `transform_sync.fire_origin_tolerance` from the shooter.
        FireOriginRefused => "fire_origin_refused",
        /// Ownership changes by game logic (`citadel.set_owner`).
        OwnershipHandoffs => "ownership_handoffs",
        /// Input bundles whose `on_input` verdicts were applied.
        InputHookCalls => "input_hook_calls",
        /// Input frames `on_input` vetoed (consumed without moving).
        InputHookVetoed => "input_hook_vetoed",
        /// Input frames `on_input` corrected.
        InputHookCorrected => "input_hook_corrected",
        /// Judged bundles discarded because ownership moved meanwhile.
        InputHookStale => "input_hook_stale",
        /// Built-in movement kept: `on_input` raised.
        InputHookFallbackError => "input_hook_fallback_error",
        /// Built-in movement kept: `on_input` ran past
        /// `runtime.on_input_budget_ms`.
        InputHookFallbackTimeout => "input_hook_fallback_timeout",
        /// Built-in movement kept: `on_input` hit `runtime.memory_limit_mb`.
        InputHookFallbackMemory => "input_hook_fallback_memory",
        /// Built-in movement kept: no verdicts within
        /// `runtime.on_input_wait_ms` (the VM was busy).
        InputHookFallbackWait => "input_hook_fallback_wait",
        /// Built-in movement kept: the runtime queue was full.
        InputHookFallbackQueueFull => "input_hook_fallback_queue_full",
        /// Built-in movement kept: `on_input` returned something other
        /// than nil, a boolean or a `{position, velocity}` table.
        InputHookFallbackBadReturn => "input_hook_fallback_bad_return",
        /// Built-in movement kept: the runtime stopped, or a reload
        /// dropped the handler.
        InputHookFallbackUnavailable => "input_hook_fallback_unavailable",
    }
);

reasons!(
    /// Why a listener turned a connection away, or closed it before it
    /// sent a complete request (docs/operations.md).
    RefuseReason {
        /// `http.max_connections` reached: closed at accept.
        HttpMaxConnections => "http_max_connections",
        /// `http.max_connections_per_ip` reached for the source address.
        HttpPerAddress => "http_per_address",
        /// The request head did not arrive within `http.header_read_timeout_ms`.
        HttpHeaderTimeout => "http_header_timeout",
        /// The request head outgrew `http.max_header_bytes`: answered 431
        /// and closed.
        HttpHeaderTooLarge => "http_header_too_large",
        /// The request body was not complete within
        /// `http.body_read_timeout_ms` of its head: closed without an answer.
        HttpBodyTimeout => "http_body_timeout",
        /// `transport.limits.max_connections` reached (also counted as the
        /// `server_full` close).
        RealtimeMaxConnections => "realtime_max_connections",
        /// `transport.limits.max_connections_per_ip` reached for the source
        /// address: closed at accept (WebSocket) or refused before the
        /// handshake (QUIC, WebTransport).
        RealtimePerAddress => "realtime_per_address",
    }
);

reasons!(
    /// Failed `accept` calls on the TCP listeners (HTTP, WebSocket).
    AcceptError {
        /// EMFILE or ENFILE: the process or the system is out of file
        /// descriptors; the accept loop backs off.
        DescriptorsExhausted => "descriptors_exhausted",
        /// Any other accept error.
        Other => "other",
    }
);

/// Handshake outcomes, counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandshakeOutcome {
    /// Token accepted.
    Authenticated,
    /// Guest accepted.
    Guest,
    /// Rejected (any reason).
    Rejected,
}

/// All counters of one node.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Open realtime connections (including handshaking ones).
    pub connections_open: AtomicI64,
    /// Connections accepted since start.
    pub connections_total: AtomicU64,
    /// Authenticated participants online.
    pub participants: AtomicI64,
    /// Envelopes received from clients (after framing; reliable frames and
    /// datagrams alike, as `envelopes_out` counts both).
    pub envelopes_in: AtomicU64,
    /// Envelopes written to clients.
    pub envelopes_out: AtomicU64,
    /// Bytes received on realtime connections.
    pub bytes_in: AtomicU64,
    /// Bytes written on realtime connections.
    pub bytes_out: AtomicU64,
    /// Handshakes accepted with a token.
    pub auth_authenticated: AtomicU64,
    /// Handshakes accepted as guests.
    pub auth_guest: AtomicU64,
    /// Handshakes rejected.
    pub auth_rejected: AtomicU64,
    /// RPC requests answered.
    pub rpc_calls: AtomicU64,
    /// RPC requests answered with an error.
    pub rpc_errors: AtomicU64,
    /// HTTP requests served.
    pub http_requests: AtomicU64,
    /// Open HTTP connections.
    pub http_connections_open: AtomicI64,
    /// HTTP keep-alive connections closed after `http.keep_alive_timeout_ms`
    /// without a request.
    pub http_keep_alive_closes: AtomicU64,
    refused: [AtomicU64; RefuseReason::ALL.len()],
    accept_errors: [AtomicU64; AcceptError::ALL.len()],
    drops: [AtomicU64; DropReason::ALL.len()],
    closes: [AtomicU64; CloseReason::ALL.len()],
    runtime: [AtomicU64; RuntimeEvent::ALL.len()],
    services: Counters<{ ServiceEvent::ALL.len() }>,
    /// Tickets queued in the matchmaker now.
    pub matchmaker_queued: AtomicI64,
    /// NetworkPeer rejections per reason and replication events.
    pub netpeer: crate::netpeer::NetpeerStats,
}

/// A fixed array of counters (`Default` for any length).
#[derive(Debug)]
struct Counters<const N: usize>([AtomicU64; N]);

impl<const N: usize> Default for Counters<N> {
    fn default() -> Self {
        Counters(std::array::from_fn(|_| AtomicU64::new(0)))
    }
}

impl<const N: usize> std::ops::Deref for Counters<N> {
    type Target = [AtomicU64; N];
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

/// Appends one labelled Prometheus counter family: the HELP and TYPE lines,
/// then `name{key="label"} value` per item.
pub(crate) fn labeled_counters<'a>(
    out: &mut String,
    name: &str,
    help: &str,
    key: &str,
    items: impl IntoIterator<Item = (&'a str, u64)>,
) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
    for (label, value) in items {
        let _ = writeln!(out, "{name}{{{key}=\"{label}\"}} {value}");
    }
}

fn index_of<T: PartialEq>(all: &[T], item: &T) -> usize {
    all.iter().position(|x| x == item).unwrap_or(0)
}

impl Metrics {
    /// Counts `n` drops for `reason`.
    pub fn drop_n(&self, reason: DropReason, n: u64) {
        if let Some(c) = self.drops.get(index_of(DropReason::ALL, &reason)) {
            c.fetch_add(n, Ordering::Relaxed);
        }
    }
    /// Counts one drop.
    pub fn dropped(&self, reason: DropReason) {
        self.drop_n(reason, 1);
    }
    /// Drops so far for `reason`.
    pub fn drops(&self, reason: DropReason) -> u64 {
        self.drops
            .get(index_of(DropReason::ALL, &reason))
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }
    /// Counts a close.
    pub fn closed(&self, reason: CloseReason) {
        if let Some(c) = self.closes.get(index_of(CloseReason::ALL, &reason)) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }
    /// Closes so far for `reason`.
    pub fn closes(&self, reason: CloseReason) -> u64 {
        self.closes
            .get(index_of(CloseReason::ALL, &reason))
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }
    /// Counts `n` runtime events.
    pub fn runtime_n(&self, event: RuntimeEvent, n: u64) {
        if let Some(c) = self.runtime.get(index_of(RuntimeEvent::ALL, &event)) {
            c.fetch_add(n, Ordering::Relaxed);
        }
    }
    /// Counts one runtime event.
    pub fn runtime_event(&self, event: RuntimeEvent) {
        self.runtime_n(event, 1);
    }
    /// Runtime events so far.
    pub fn runtime_events(&self, event: RuntimeEvent) -> u64 {
        self.runtime
            .get(index_of(RuntimeEvent::ALL, &event))
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }
    /// Runtime events as a JSON object.
    pub fn runtime_json(&self) -> serde_json::Value {
        RuntimeEvent::ALL
            .iter()
            .map(|r| {
                (
                    r.label().to_owned(),
                    serde_json::json!(self.runtime_events(*r)),
                )
            })
            .collect::<serde_json::Map<_, _>>()
            .into()
    }
    /// Counts `n` service events.
    pub fn service_n(&self, event: ServiceEvent, n: u64) {
        if let Some(c) = self.services.get(index_of(ServiceEvent::ALL, &event)) {
            c.fetch_add(n, Ordering::Relaxed);
        }
    }
    /// Counts one service event.
    pub fn service_event(&self, event: ServiceEvent) {
        self.service_n(event, 1);
    }
    /// Service events so far.
    pub fn service_events(&self, event: ServiceEvent) -> u64 {
        self.services
            .get(index_of(ServiceEvent::ALL, &event))
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }
    /// Every service event count, by label (for `/status`).
    pub fn services_json(&self) -> serde_json::Value {
        let mut map = ServiceEvent::ALL
            .iter()
            .map(|e| {
                (
                    e.label().to_owned(),
                    serde_json::json!(self.service_events(*e)),
                )
            })
            .collect::<serde_json::Map<_, _>>();
        map.insert(
            "matchmaker_queued".into(),
            serde_json::json!(self.matchmaker_queued.load(Ordering::Relaxed)),
        );
        map.into()
    }
    /// Counts a refused connection.
    pub fn refused(&self, reason: RefuseReason) {
        if let Some(c) = self.refused.get(index_of(RefuseReason::ALL, &reason)) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }
    /// Refused connections so far for `reason`.
    pub fn refusals(&self, reason: RefuseReason) -> u64 {
        self.refused
            .get(index_of(RefuseReason::ALL, &reason))
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }
    /// Refused connections by reason, as a JSON object.
    pub fn refused_json(&self) -> serde_json::Value {
        RefuseReason::ALL
            .iter()
            .map(|r| (r.label().to_owned(), serde_json::json!(self.refusals(*r))))
            .collect::<serde_json::Map<_, _>>()
            .into()
    }
    /// Counts a failed accept.
    pub fn accept_failed(&self, error: AcceptError) {
        if let Some(c) = self.accept_errors.get(index_of(AcceptError::ALL, &error)) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }
    /// Failed accepts so far of this kind.
    pub fn accept_errors(&self, error: AcceptError) -> u64 {
        self.accept_errors
            .get(index_of(AcceptError::ALL, &error))
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }
    /// Failed accepts by kind, as a JSON object.
    pub fn accept_errors_json(&self) -> serde_json::Value {
        AcceptError::ALL
            .iter()
            .map(|e| {
                (
                    e.label().to_owned(),
                    serde_json::json!(self.accept_errors(*e)),
                )
            })
            .collect::<serde_json::Map<_, _>>()
            .into()
    }

    /// Counts a handshake outcome.
    pub fn handshake(&self, outcome: HandshakeOutcome) {
        let c = match outcome {
            HandshakeOutcome::Authenticated => &self.auth_authenticated,
            HandshakeOutcome::Guest => &self.auth_guest,
            HandshakeOutcome::Rejected => &self.auth_rejected,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// Drops by reason as a JSON object.
    pub fn drops_json(&self) -> serde_json::Value {
        DropReason::ALL
            .iter()
            .map(|r| (r.label().to_owned(), serde_json::json!(self.drops(*r))))
            .collect::<serde_json::Map<_, _>>()
            .into()
    }

    /// Closes by reason as a JSON object.
    pub fn closes_json(&self) -> serde_json::Value {
        CloseReason::ALL
            .iter()
            .map(|r| (r.label().to_owned(), serde_json::json!(self.closes(*r))))
            .collect::<serde_json::Map<_, _>>()
            .into()
    }

    /// Prometheus text exposition.
    pub fn render_prometheus(&self, rooms: usize) -> String {
        let mut out = String::with_capacity(4096);
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let gauge = |out: &mut String, name: &str, help: &str, v: i64| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
        };
        let counter = |out: &mut String, name: &str, help: &str, v: u64| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}"
            );
        };
        gauge(
            &mut out,
            "citadel_connections_open",
            "Open realtime connections.",
            self.connections_open.load(Ordering::Relaxed),
        );
        gauge(
            &mut out,
            "citadel_participants",
            "Authenticated participants online.",
            self.participants.load(Ordering::Relaxed),
        );
        gauge(&mut out, "citadel_rooms", "Live rooms.", rooms as i64);
        gauge(
            &mut out,
            "citadel_matchmaker_queued_tickets",
            "Tickets queued in the matchmaker.",
            self.matchmaker_queued.load(Ordering::Relaxed),
        );
        counter(
            &mut out,
            "citadel_connections_total",
            "Realtime connections accepted.",
            load(&self.connections_total),
        );
        counter(
            &mut out,
            "citadel_envelopes_in_total",
            "Envelopes received from clients.",
            load(&self.envelopes_in),
        );
        counter(
            &mut out,
            "citadel_envelopes_out_total",
            "Envelopes written to clients.",
            load(&self.envelopes_out),
        );
        counter(
            &mut out,
            "citadel_bytes_in_total",
            "Realtime bytes received.",
            load(&self.bytes_in),
        );
        counter(
            &mut out,
            "citadel_bytes_out_total",
            "Realtime bytes written.",
            load(&self.bytes_out),
        );
        counter(
            &mut out,
            "citadel_rpc_calls_total",
            "RPC requests answered.",
            load(&self.rpc_calls),
        );
        counter(
            &mut out,
            "citadel_rpc_errors_total",
            "RPC requests answered with an error.",
            load(&self.rpc_errors),
        );
        counter(
            &mut out,
            "citadel_http_requests_total",
            "HTTP requests served.",
            load(&self.http_requests),
        );
        gauge(
            &mut out,
            "citadel_http_connections_open",
            "Open HTTP connections.",
            self.http_connections_open.load(Ordering::Relaxed),
        );
        counter(
            &mut out,
            "citadel_http_keep_alive_closes_total",
            "HTTP keep-alive connections closed for idleness.",
            load(&self.http_keep_alive_closes),
        );
        labeled_counters(
            &mut out,
            "citadel_connections_refused_total",
            "Connections turned away by a limit, by reason.",
            "reason",
            RefuseReason::ALL
                .iter()
                .map(|r| (r.label(), self.refusals(*r))),
        );
        labeled_counters(
            &mut out,
            "citadel_accept_errors_total",
            "Failed accepts on the TCP listeners, by kind.",
            "reason",
            AcceptError::ALL
                .iter()
                .map(|e| (e.label(), self.accept_errors(*e))),
        );
        labeled_counters(
            &mut out,
            "citadel_handshakes_total",
            "Realtime handshakes by outcome.",
            "outcome",
            [
                ("authenticated", &self.auth_authenticated),
                ("guest", &self.auth_guest),
                ("rejected", &self.auth_rejected),
            ]
            .into_iter()
            .map(|(label, c)| (label, load(c))),
        );
        labeled_counters(
            &mut out,
            "citadel_drops_total",
            "Envelopes not delivered, by reason.",
            "reason",
            DropReason::ALL.iter().map(|r| (r.label(), self.drops(*r))),
        );
        labeled_counters(
            &mut out,
            "citadel_closes_total",
            "Connections closed by the server, by reason.",
            "reason",
            CloseReason::ALL
                .iter()
                .map(|r| (r.label(), self.closes(*r))),
        );
        labeled_counters(
            &mut out,
            "citadel_runtime_events_total",
            "Lua runtime events, by event.",
            "event",
            RuntimeEvent::ALL
                .iter()
                .map(|r| (r.label(), self.runtime_events(*r))),
        );
        labeled_counters(
            &mut out,
            "citadel_service_events_total",
            "Player-service events, by event.",
            "event",
            ServiceEvent::ALL
                .iter()
                .map(|e| (e.label(), self.service_events(*e))),
        );
        self.netpeer.render(&mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays_cover_every_reason() {
        let m = Metrics::default();
        assert_eq!(m.drops.len(), DropReason::ALL.len());
        assert_eq!(m.closes.len(), CloseReason::ALL.len());
        assert_eq!(m.runtime.len(), RuntimeEvent::ALL.len());
        assert_eq!(m.services.len(), ServiceEvent::ALL.len());
        assert_eq!(m.refused.len(), RefuseReason::ALL.len());
        assert_eq!(m.accept_errors.len(), AcceptError::ALL.len());
        m.refused(RefuseReason::HttpPerAddress);
        m.accept_failed(AcceptError::DescriptorsExhausted);
        assert_eq!(m.refusals(RefuseReason::HttpPerAddress), 1);
        assert_eq!(m.refusals(RefuseReason::HttpHeaderTimeout), 0);
        m.dropped(DropReason::ConnectionClosed);
        m.closed(CloseReason::TransportError);
        assert_eq!(m.drops(DropReason::ConnectionClosed), 1);
        assert_eq!(m.closes(CloseReason::TransportError), 1);
        let text = m.render_prometheus(0);
        assert!(text.contains("citadel_drops_total{reason=\"connection_closed\"} 1"));
        assert!(text.contains("citadel_connections_refused_total{reason=\"http_per_address\"} 1"));
        assert!(text.contains("citadel_accept_errors_total{reason=\"descriptors_exhausted\"} 1"));
    }
}
