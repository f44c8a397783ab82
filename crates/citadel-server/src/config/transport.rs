//! `[transport]`: the realtime listeners and the bounds every realtime
//! connection lives under: `[transport.websocket]`, `[transport.auth]`
//! (handshake policy) and `[transport.limits]` (per-node and
//! per-connection bounds). The QUIC-based sections are in `quic.rs`.
//!
//! What it is not: the listeners themselves (`crate::transport`) or the
//! handshake (`crate::gateway`). Call order: parsed as part of
//! [`super::Config`], then [`TransportConfig::validate`], which checks every
//! subsection and names the full dotted key it rejects.

use serde::{Deserialize, Serialize};

use super::quic::{
    DatagramTransportConfig, QUIC_DEFAULT_BIND, TlsConfig, WEBTRANSPORT_DEFAULT_BIND,
};
use super::{ConfigError, at_least, invalid, parse_addr};

/// `[transport]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TransportConfig {
    /// `[transport.websocket]`.
    pub websocket: WebSocketConfig,
    /// `[transport.quic]`.
    pub quic: DatagramTransportConfig,
    /// `[transport.webtransport]`.
    pub webtransport: DatagramTransportConfig,
    /// `[transport.tls]` (QUIC and WebTransport).
    pub tls: TlsConfig,
    /// `[transport.auth]`.
    pub auth: AuthConfig,
    /// `[transport.limits]`.
    pub limits: LimitsConfig,
    /// `[transport.network_peer]`.
    pub network_peer: super::NetworkPeerConfig,
}

impl Default for TransportConfig {
    fn default() -> Self {
        TransportConfig {
            websocket: WebSocketConfig::default(),
            quic: DatagramTransportConfig::with_bind(QUIC_DEFAULT_BIND),
            webtransport: DatagramTransportConfig::with_bind(WEBTRANSPORT_DEFAULT_BIND),
            tls: TlsConfig::default(),
            auth: AuthConfig::default(),
            limits: LimitsConfig::default(),
            network_peer: super::NetworkPeerConfig::default(),
        }
    }
}

impl TransportConfig {
    /// Checks every `transport.*` key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.websocket.validate()?;
        self.quic.validate("quic", QUIC_DEFAULT_BIND)?;
        self.webtransport
            .validate("webtransport", WEBTRANSPORT_DEFAULT_BIND)?;
        self.tls.validate()?;
        self.auth.validate()?;
        self.limits.validate()?;
        self.network_peer.validate()
    }
}

/// `[transport.websocket]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WebSocketConfig {
    /// Serve WebSocket realtime.
    pub enabled: bool,
    /// Listen address.
    pub bind: String,
    /// The outbound lane keys every transport section has.
    #[serde(flatten)]
    pub lanes: LaneConfig,
    /// Largest inbound WebSocket message (it may hold several frames);
    /// larger closes the connection.
    pub max_message_bytes: usize,
    /// Ping interval after authentication (0 disables).
    pub heartbeat_interval_ms: u64,
    /// Close a connection silent for this long (0 disables).
    pub heartbeat_timeout_ms: u64,
    /// Shortest gap between two writes of one connection, in µs (0: write
    /// at once; at most [`MAX_FLUSH_DELAY_US`]): a frame queued sooner after
    /// the previous write waits for the gap to end, and the frames queued
    /// meanwhile join its message; a frame after a quiet gap is written at
    /// once. Every delivery waits at most this long.
    pub flush_delay_us: u64,
}

/// Largest `transport.websocket.flush_delay_us` (50 ms: one 20 Hz tick).
/// Past a few ms the gap trades latency for CPU: `docs/benchmarks.md`
/// ("What the flush delay buys") measures each step of it.
pub const MAX_FLUSH_DELAY_US: u64 = 50_000;

impl Default for WebSocketConfig {
    fn default() -> Self {
        WebSocketConfig {
            enabled: true,
            bind: "127.0.0.1:7352".into(),
            lanes: LaneConfig::default(),
            max_message_bytes: 2 * 1024 * 1024,
            heartbeat_interval_ms: 15_000,
            heartbeat_timeout_ms: 45_000,
            flush_delay_us: 1_000,
        }
    }
}

impl WebSocketConfig {
    /// Checks `transport.websocket.*`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        parse_addr("transport.websocket.bind", &self.bind)?;
        self.lanes.validate("websocket")?;
        at_least(
            "transport.websocket.max_message_bytes",
            self.max_message_bytes,
            1024,
        )?;
        if self.heartbeat_timeout_ms != 0 && self.heartbeat_timeout_ms <= self.heartbeat_interval_ms
        {
            return Err(invalid(
                "transport.websocket.heartbeat_timeout_ms",
                "must exceed heartbeat_interval_ms (or be 0 to disable)",
            ));
        }
        if self.flush_delay_us > MAX_FLUSH_DELAY_US {
            return Err(invalid(
                "transport.websocket.flush_delay_us",
                format!("must be at most {MAX_FLUSH_DELAY_US} (0 writes at once)"),
            ));
        }
        Ok(())
    }
}

/// The outbound keys of every realtime transport section
/// (`[transport.websocket]`, `[transport.quic]`, `[transport.webtransport]`),
/// written flat in each section (`#[serde(flatten)]`: the sections keep
/// rejecting unknown keys). Each connection's lanes
/// (`crate::gateway::outbound::LaneLimits`) and its writer's batch size are
/// built from it, whatever the transport.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LaneConfig {
    /// Reliable lane capacity in envelopes; full closes the slow client.
    pub outbound_queue_capacity: usize,
    /// Unreliable lane capacity in envelopes; full drops the oldest.
    pub unreliable_queue_capacity: usize,
    /// Byte cap over both lanes; a reliable envelope past it closes the client.
    pub outbound_queue_max_bytes: usize,
    /// Most bytes of frames the writer puts in one write: one WebSocket
    /// message, or one server-opened QUIC / WebTransport stream.
    pub max_coalesced_bytes: usize,
}

impl Default for LaneConfig {
    fn default() -> Self {
        LaneConfig {
            outbound_queue_capacity: 1024,
            unreliable_queue_capacity: 256,
            outbound_queue_max_bytes: 4 * 1024 * 1024,
            max_coalesced_bytes: 64 * 1024,
        }
    }
}

impl LaneConfig {
    /// Checks `transport.<section>.*` for these keys.
    pub(super) fn validate(&self, section: &str) -> Result<(), ConfigError> {
        let key = |k: &str| format!("transport.{section}.{k}");
        at_least(
            &key("outbound_queue_capacity"),
            self.outbound_queue_capacity,
            1,
        )?;
        at_least(
            &key("unreliable_queue_capacity"),
            self.unreliable_queue_capacity,
            1,
        )?;
        at_least(
            &key("outbound_queue_max_bytes"),
            self.outbound_queue_max_bytes,
            1024,
        )?;
        at_least(&key("max_coalesced_bytes"), self.max_coalesced_bytes, 1024)
    }
}

/// `[transport.auth]`: the realtime handshake policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// Only valid tokens are accepted; guests get AUTH_REQUIRED.
    pub require_auth: bool,
    /// An empty KIND_AUTH is accepted as a guest.
    pub allow_guests: bool,
    /// Close a connection whose first frame does not arrive in time.
    pub handshake_timeout_ms: u64,
    /// Longest accepted token; longer is a PROTOCOL rejection.
    pub max_token_bytes: usize,
    /// A new authenticated connection closes the account's older ones.
    pub single_connection_per_user: bool,
    /// How often live sessions are re-checked for revocation (also catches
    /// revocations made by other nodes on the same database).
    pub revocation_poll_ms: u64,
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            require_auth: false,
            allow_guests: true,
            handshake_timeout_ms: 5_000,
            max_token_bytes: 4_096,
            single_connection_per_user: false,
            revocation_poll_ms: 500,
        }
    }
}

impl AuthConfig {
    /// Checks `transport.auth.*`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        at_least(
            "transport.auth.handshake_timeout_ms",
            self.handshake_timeout_ms as usize,
            1,
        )?;
        at_least("transport.auth.max_token_bytes", self.max_token_bytes, 1)?;
        at_least(
            "transport.auth.revocation_poll_ms",
            self.revocation_poll_ms as usize,
            10,
        )
    }
}

/// `[transport.limits]`: per-node and per-connection bounds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    /// Open realtime connections (including ones still handshaking).
    pub max_connections: usize,
    /// Open realtime connections from one source address, over WebSocket,
    /// QUIC and WebTransport together (0 = no cap: players behind one
    /// carrier-grade NAT share an address).
    pub max_connections_per_ip: usize,
    /// Largest inbound frame a client may send (≤ 8 MiB); larger closes it.
    pub max_inbound_frame_bytes: usize,
    /// Sustained inbound envelopes per second per connection.
    pub messages_per_second: u32,
    /// Inbound burst allowance per connection.
    pub message_burst: u32,
    /// RPCs one connection may have in flight.
    pub rpc_max_in_flight: usize,
    /// Deadline of one RPC handler.
    pub rpc_timeout_ms: u64,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            max_connections: 10_000,
            max_connections_per_ip: 0,
            max_inbound_frame_bytes: 1024 * 1024,
            messages_per_second: 200,
            message_burst: 400,
            rpc_max_in_flight: 16,
            rpc_timeout_ms: 5_000,
        }
    }
}

impl LimitsConfig {
    /// Checks `transport.limits.*`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        at_least("transport.limits.max_connections", self.max_connections, 1)?;
        at_least(
            "transport.limits.max_inbound_frame_bytes",
            self.max_inbound_frame_bytes,
            64,
        )?;
        if self.max_inbound_frame_bytes > citadel_wire::protocol::MAX_FRAME_BODY_BYTES {
            return Err(invalid(
                "transport.limits.max_inbound_frame_bytes",
                "must not exceed 8388608 (the wire maximum)",
            ));
        }
        at_least(
            "transport.limits.messages_per_second",
            self.messages_per_second as usize,
            1,
        )?;
        at_least(
            "transport.limits.message_burst",
            self.message_burst as usize,
            1,
        )?;
        at_least(
            "transport.limits.rpc_max_in_flight",
            self.rpc_max_in_flight,
            1,
        )?;
        at_least(
            "transport.limits.rpc_timeout_ms",
            self.rpc_timeout_ms as usize,
            1,
        )
    }
}
