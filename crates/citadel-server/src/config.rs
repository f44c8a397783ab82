//! Node configuration: built-in defaults < TOML file < `CITADEL_*`
//! environment < CLI flags, validated before anything binds.
//!
//! What it is not: it never reads secrets into logs and never opens a
//! socket. Call order: [`Config::load`] (or [`Config::from_toml_str`] in
//! tests), then [`Config::validate`]. Every key is optional; an unknown key
//! is an error naming it. Environment overrides follow the key path:
//! `transport.auth.allow_guests` is `CITADEL_TRANSPORT_AUTH_ALLOW_GUESTS`;
//! `CITADEL_LOG_LEVEL`, `CITADEL_NODE_ID`, `CITADEL_PUBLIC_ADDR` and
//! `CITADEL_HTTP_BIND` are kept as short aliases. Unknown `CITADEL_*`
//! variables are ignored.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// A configuration problem, always naming the offending key or file.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// TOML syntax error or an unknown/mistyped key.
    #[error("invalid config{origin}: {message}")]
    Parse {
        /// Where the bad value came from.
        origin: String,
        /// The parser's message (names the key).
        message: String,
    },
    /// A value outside its allowed range.
    #[error("invalid config key `{key}`: {message}")]
    Invalid {
        /// Dotted key path.
        key: String,
        /// What is wrong.
        message: String,
    },
}

fn invalid(key: &str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key: key.to_owned(),
        message: message.into(),
    }
}

/// The whole configuration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// `[server]`.
    pub server: ServerConfig,
    /// `[http]`.
    pub http: HttpConfig,
    /// `[logging]`.
    pub logging: LoggingConfig,
    /// `[transport]`.
    pub transport: TransportConfig,
    /// `[rooms]`.
    pub rooms: RoomsConfig,
    /// `[shutdown]`.
    pub shutdown: ShutdownConfig,
    /// `[runtime]`: the embedded Lua runtime.
    pub runtime: RuntimeConfig,
    /// `[database]`.
    pub database: DatabaseConfig,
    /// `[authentication]`.
    pub authentication: AuthenticationConfig,
    /// `[transform_sync]` (also accepted as `[transport.transform_sync]`).
    pub transform_sync: TransformSyncConfig,
    /// `[notifications]`: durable inbox bounds.
    pub notifications: crate::services::notifications::NotificationsConfig,
    /// `[friends]`: friend graph bounds.
    pub friends: crate::services::friends::FriendsConfig,
    /// `[groups]`: group bounds.
    pub groups: crate::services::groups::GroupsConfig,
    /// `[matchmaker]`: ticket queue and handoff bounds.
    pub matchmaker: crate::services::matchmaker::MatchmakerConfig,
    /// `[party]`: party size.
    pub party: crate::services::party::PartyConfig,
}

/// `[transform_sync]`: networked actors and snapshot replication.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TransformSyncConfig {
    /// Serve HELLO, networked actors and snapshots.
    pub enabled: bool,
    /// Snapshots per second to each opted-in client (1..=255).
    pub send_rate_hz: u8,
    /// Simulation ticks per second (1..=255).
    pub sim_hz: u8,
    /// Most object entries per snapshot (0 = only the 1 200-byte datagram bounds it).
    pub budget: u32,
    /// Position bounds (cm) and resolution (codes per cm).
    pub position_min: [f32; 3],
    /// Upper position bounds (cm).
    pub position_max: [f32; 3],
    /// Position codes per cm.
    pub position_values_per_unit: u32,
    /// Velocity bounds (cm/s).
    pub velocity_min: [f32; 3],
    /// Upper velocity bounds (cm/s).
    pub velocity_max: [f32; 3],
    /// Velocity codes per cm/s.
    pub velocity_values_per_unit: u32,
    /// Quaternion bits per component: 9, 10 or 15.
    pub quat_mode: u8,
    /// Archetypes that use validated input instead of relay (they refuse NA_STATE).
    pub predicted_authoritative_archetypes: Vec<u16>,
    /// Area of interest; off = each client sees its whole room.
    pub interest_enabled: bool,
    /// AOI grid cell (cm).
    pub interest_cell_size: f32,
    /// AOI enter radius (cm).
    pub interest_inner: f32,
    /// AOI exit radius (cm).
    pub interest_outer: f32,
    /// Reference demo feature; only 0 is supported.
    pub demo_movers: u32,
    /// Reference demo feature; only 0 is supported.
    pub player_slots: u32,
}

impl Default for TransformSyncConfig {
    fn default() -> Self {
        let hello = citadel_wire::tsync::HelloParams::default();
        TransformSyncConfig {
            enabled: true,
            send_rate_hz: hello.send_rate_hz,
            sim_hz: hello.sim_rate_hz,
            budget: 0,
            position_min: hello.position_min,
            position_max: hello.position_max,
            position_values_per_unit: hello.position_values_per_unit,
            velocity_min: hello.velocity_min,
            velocity_max: hello.velocity_max,
            velocity_values_per_unit: hello.velocity_values_per_unit,
            quat_mode: hello.quat_mode.wire_byte(),
            predicted_authoritative_archetypes: Vec::new(),
            interest_enabled: false,
            interest_cell_size: 5_000.0,
            interest_inner: 10_000.0,
            interest_outer: 12_500.0,
            demo_movers: 0,
            player_slots: 0,
        }
    }
}

impl TransformSyncConfig {
    /// The HELLO this configuration advertises.
    pub fn hello(&self) -> Result<citadel_wire::tsync::HelloParams, ConfigError> {
        let quat_mode = citadel_wire::quat::QuatMode::from_wire_byte(self.quat_mode)
            .map_err(|_| invalid("transform_sync.quat_mode", "must be 9, 10 or 15"))?;
        let hello = citadel_wire::tsync::HelloParams {
            position_min: self.position_min,
            position_max: self.position_max,
            position_values_per_unit: self.position_values_per_unit,
            velocity_min: self.velocity_min,
            velocity_max: self.velocity_max,
            velocity_values_per_unit: self.velocity_values_per_unit,
            quat_mode,
            send_rate_hz: self.send_rate_hz,
            sim_rate_hz: self.sim_hz,
        };
        hello
            .codec()
            .map_err(|e| invalid("transform_sync.position_*/velocity_*", e.to_string()))?;
        Ok(hello)
    }
}

/// Moves `[transport.transform_sync]` (the reference's spelling) to the
/// top-level table; setting both is an error.
fn relocate_transform_sync(table: &mut toml::Table) -> Result<(), ConfigError> {
    let nested = table
        .get_mut("transport")
        .and_then(|t| t.as_table_mut())
        .and_then(|t| t.remove("transform_sync"));
    if let Some(nested) = nested {
        if table.contains_key("transform_sync") {
            return Err(invalid(
                "transport.transform_sync",
                "set either [transform_sync] or [transport.transform_sync], not both",
            ));
        }
        table.insert("transform_sync".into(), nested);
    }
    Ok(())
}

/// `[database]`: where accounts and sessions live.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DatabaseConfig {
    /// `sqlite://path/to/file.sqlite` (created on first start), `sqlite::memory:`,
    /// or `postgres://user@host/db`. Secret: never logged.
    pub url: String,
    /// Pool size.
    pub max_connections: u32,
    /// Deadline to connect or to acquire a pooled connection.
    pub acquire_timeout_ms: u64,
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        DatabaseConfig {
            url: "sqlite://data/citadel.sqlite".into(),
            max_connections: 10,
            acquire_timeout_ms: 5_000,
        }
    }
}

/// One fixed-window admission rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateRule {
    /// Requests allowed per window (1..=1,000,000).
    pub limit: u32,
    /// Window length (1..=86,400,000 ms).
    pub window_ms: u64,
}

/// `[authentication.limits]`: admission limits of the auth routes, durable
/// and shared by every node on the same database.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthLimitsConfig {
    /// Per client IP (the TCP peer; X-Forwarded-For is ignored).
    pub source: RateRule,
    /// Per normalised email (email route only).
    pub email: RateRule,
    /// Per client IP, only for `create: true`.
    pub registration_source: RateRule,
}

impl Default for AuthLimitsConfig {
    fn default() -> Self {
        AuthLimitsConfig {
            source: RateRule {
                limit: 30,
                window_ms: 60_000,
            },
            email: RateRule {
                limit: 10,
                window_ms: 900_000,
            },
            registration_source: RateRule {
                limit: 10,
                window_ms: 3_600_000,
            },
        }
    }
}

/// `[authentication]`: token lifetimes and admission limits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthenticationConfig {
    /// Access token lifetime.
    pub access_token_ttl_secs: u64,
    /// Refresh token lifetime (renewed by every refresh).
    pub refresh_token_ttl_secs: u64,
    /// Admission limits.
    pub limits: AuthLimitsConfig,
}

impl Default for AuthenticationConfig {
    fn default() -> Self {
        AuthenticationConfig {
            access_token_ttl_secs: 3_600,
            refresh_token_ttl_secs: 30 * 24 * 3_600,
            limits: AuthLimitsConfig::default(),
        }
    }
}

/// `[server]`: identity of this node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// Node id shown in the banner, `/status` and logs.
    pub node_id: String,
    /// Address clients are told to use.
    pub public_addr: String,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            node_id: "dev-1".into(),
            public_addr: "127.0.0.1:7350".into(),
        }
    }
}

/// `[http]`: the HTTP listener (`/health`, `/status`, `/metrics`, `/v1`)
/// and the bounds that keep one client from holding it (docs/operations.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpConfig {
    /// Listen address.
    pub bind: String,
    /// Origins allowed to call the `/v1` API from a browser (CORS): `"*"`
    /// (default: tokens travel in headers, never cookies), exact origins
    /// such as `"https://game.example"`, or empty for no CORS headers.
    pub cors_allowed_origins: Vec<String>,
    /// A connection whose request head (request line and headers) is not
    /// complete this long after the connection opened, or after the first
    /// byte of a later request, is closed.
    pub header_read_timeout_ms: u64,
    /// The largest request head (request line and headers) one connection
    /// buffers, in bytes (8,192..=1,048,576); a longer head is answered 431.
    pub max_header_bytes: usize,
    /// A request body not complete this long after its head was read
    /// closes the connection, whatever its pace.
    pub body_read_timeout_ms: u64,
    /// A keep-alive connection with no request for this long is closed.
    pub keep_alive_timeout_ms: u64,
    /// Open HTTP connections; past it new ones are closed at once.
    pub max_connections: usize,
    /// Open HTTP connections from one source address (0 = no cap; behind a
    /// reverse proxy every connection comes from the proxy).
    pub max_connections_per_ip: usize,
}

/// Most entries in `http.cors_allowed_origins`.
pub const MAX_CORS_ORIGINS: usize = 64;

/// Smallest `http.max_header_bytes` (hyper's minimum read buffer).
pub const MIN_HEADER_BYTES: usize = 8 * 1024;

/// Largest `http.max_header_bytes` (each open connection may buffer it).
pub const MAX_HEADER_BYTES: usize = 1024 * 1024;

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            bind: "127.0.0.1:7350".into(),
            cors_allowed_origins: vec!["*".into()],
            header_read_timeout_ms: 10_000,
            max_header_bytes: 32 * 1024,
            body_read_timeout_ms: 10_000,
            keep_alive_timeout_ms: 60_000,
            max_connections: 4_096,
            max_connections_per_ip: 256,
        }
    }
}

impl HttpConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        const KEY: &str = "http.cors_allowed_origins";
        if self.cors_allowed_origins.len() > MAX_CORS_ORIGINS {
            return Err(invalid(KEY, "lists more than 64 origins"));
        }
        for origin in &self.cors_allowed_origins {
            let scheme_ok = origin.starts_with("http://") || origin.starts_with("https://");
            let host = origin.split_once("://").map_or("", |(_, h)| h);
            let well_formed = origin == "*"
                || (scheme_ok
                    && !host.is_empty()
                    && !host.contains('/')
                    && origin.len() <= 256
                    && origin.bytes().all(|b| b.is_ascii_graphic()));
            if !well_formed {
                return Err(invalid(
                    KEY,
                    "entries must be \"*\" or an origin like \"https://game.example:8443\" (no path)",
                ));
            }
        }
        Ok(())
    }
}

/// `[logging]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LoggingConfig {
    /// A tracing filter directive (`info`, `citadel_server=debug`, …).
    pub level: String,
    /// `pretty` or `json`.
    pub format: String,
}

impl Default for LoggingConfig {
    fn default() -> Self {
        LoggingConfig {
            level: "info".into(),
            format: "pretty".into(),
        }
    }
}

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
        }
    }
}

/// `transport.quic.bind` when unset.
pub const QUIC_DEFAULT_BIND: &str = "127.0.0.1:7351";
/// `transport.webtransport.bind` when unset.
pub const WEBTRANSPORT_DEFAULT_BIND: &str = "127.0.0.1:7353";

/// `[transport.websocket]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WebSocketConfig {
    /// Serve WebSocket realtime.
    pub enabled: bool,
    /// Listen address.
    pub bind: String,
    /// Reliable lane capacity in envelopes; full closes the slow client.
    pub outbound_queue_capacity: usize,
    /// Unreliable lane capacity in envelopes; full drops the oldest.
    pub unreliable_queue_capacity: usize,
    /// Byte cap over both lanes; a reliable envelope past it closes the client.
    pub outbound_queue_max_bytes: usize,
    /// Largest WebSocket message the writer builds when coalescing.
    pub max_coalesced_bytes: usize,
    /// Largest inbound WebSocket message (it may hold several frames);
    /// larger closes the connection.
    pub max_message_bytes: usize,
    /// Ping interval after authentication (0 disables).
    pub heartbeat_interval_ms: u64,
    /// Close a connection silent for this long (0 disables).
    pub heartbeat_timeout_ms: u64,
}

impl Default for WebSocketConfig {
    fn default() -> Self {
        WebSocketConfig {
            enabled: true,
            bind: "127.0.0.1:7352".into(),
            outbound_queue_capacity: 1024,
            unreliable_queue_capacity: 256,
            outbound_queue_max_bytes: 4 * 1024 * 1024,
            max_coalesced_bytes: 64 * 1024,
            max_message_bytes: 2 * 1024 * 1024,
            heartbeat_interval_ms: 15_000,
            heartbeat_timeout_ms: 45_000,
        }
    }
}

/// `[transport.quic]` / `[transport.webtransport]`: the UDP transports.
/// Reliable frames travel on QUIC streams, unreliable ones as datagrams.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DatagramTransportConfig {
    /// Serve this transport.
    pub enabled: bool,
    /// UDP listen address; empty = the transport's standard address
    /// ([`QUIC_DEFAULT_BIND`], [`WEBTRANSPORT_DEFAULT_BIND`]).
    pub bind: String,
    /// Reliable lane capacity in envelopes; full closes the slow client.
    pub outbound_queue_capacity: usize,
    /// Unreliable lane capacity in envelopes; full drops the oldest.
    pub unreliable_queue_capacity: usize,
    /// Byte cap over both lanes; a reliable envelope past it closes the client.
    pub outbound_queue_max_bytes: usize,
    /// Most bytes the writer puts on one server-opened stream (one batch).
    pub max_coalesced_bytes: usize,
    /// Streams a client may have open at once (per direction kind). High
    /// enough for browser clients that open one unidirectional stream per
    /// reliable envelope (hundreds of concurrent RPCs); the bytes those
    /// streams can make the server hold stay bounded by the connection
    /// receive window (4 MiB), whatever the count.
    pub max_client_streams: u32,
    /// Close a connection silent for this long (QUIC idle timeout).
    pub idle_timeout_ms: u64,
    /// Server keep-alive interval (0 disables); must be below the idle timeout.
    pub keep_alive_interval_ms: u64,
    /// Outbound datagram bytes a connection queues before sending; past it
    /// the oldest queued datagrams are dropped (metric
    /// `datagram_send_buffer_full`).
    pub datagram_send_buffer_bytes: usize,
    /// Inbound datagram bytes a connection holds until the node reads them;
    /// past it new ones are dropped (metric `datagram_receive_buffer_full`).
    pub datagram_receive_buffer_bytes: usize,
    /// WebTransport only: the session path a browser must open.
    pub path: String,
}

impl DatagramTransportConfig {
    fn with_bind(bind: &str) -> Self {
        DatagramTransportConfig {
            enabled: false,
            bind: bind.into(),
            outbound_queue_capacity: 1024,
            unreliable_queue_capacity: 256,
            outbound_queue_max_bytes: 4 * 1024 * 1024,
            max_coalesced_bytes: 64 * 1024,
            max_client_streams: 1024,
            idle_timeout_ms: 30_000,
            keep_alive_interval_ms: 10_000,
            datagram_send_buffer_bytes: 256 * 1024,
            datagram_receive_buffer_bytes: 256 * 1024,
            path: "/citadel".into(),
        }
    }

    /// The bind address, or `fallback` when unset.
    pub fn bind_or<'a>(&'a self, fallback: &'a str) -> &'a str {
        if self.bind.trim().is_empty() {
            fallback
        } else {
            &self.bind
        }
    }

    fn validate(&self, section: &str, fallback: &str) -> Result<(), ConfigError> {
        let key = |k: &str| format!("transport.{section}.{k}");
        parse_addr(&key("bind"), self.bind_or(fallback))?;
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
        at_least(&key("max_coalesced_bytes"), self.max_coalesced_bytes, 1024)?;
        // One maximum-size datagram must fit.
        at_least(
            &key("datagram_send_buffer_bytes"),
            self.datagram_send_buffer_bytes,
            1500,
        )?;
        at_least(
            &key("datagram_receive_buffer_bytes"),
            self.datagram_receive_buffer_bytes,
            1500,
        )?;
        at_least(
            &key("max_client_streams"),
            self.max_client_streams as usize,
            1,
        )?;
        at_least(&key("idle_timeout_ms"), self.idle_timeout_ms as usize, 100)?;
        if self.keep_alive_interval_ms >= self.idle_timeout_ms {
            return Err(invalid(
                &key("keep_alive_interval_ms"),
                "must be below idle_timeout_ms (or 0 to disable)",
            ));
        }
        if !self.path.starts_with('/') {
            return Err(invalid(&key("path"), "must start with '/'"));
        }
        Ok(())
    }
}

impl Default for DatagramTransportConfig {
    /// Every key at its default and `bind` unset (the section's standard
    /// address applies).
    fn default() -> Self {
        Self::with_bind("")
    }
}

/// `[transport.tls]`: the certificate QUIC and WebTransport present.
///
/// Both files empty (the default): a self-signed development certificate
/// (ECDSA P-256, valid 13 days, SAN localhost + 127.0.0.1) is generated in
/// `data_dir` at first start, reused across restarts and regenerated before
/// it expires. Both set: PEM chain and key are loaded from them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TlsConfig {
    /// PEM certificate chain (leaf first); empty = development certificate.
    pub certificate_file: String,
    /// PEM private key (PKCS#8, SEC1 or PKCS#1); empty = development certificate.
    pub private_key_file: String,
    /// Where the development certificate is kept.
    pub data_dir: String,
}

impl Default for TlsConfig {
    fn default() -> Self {
        TlsConfig {
            certificate_file: String::new(),
            private_key_file: String::new(),
            data_dir: "./data".into(),
        }
    }
}

impl TlsConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        match (
            self.certificate_file.is_empty(),
            self.private_key_file.is_empty(),
        ) {
            (true, false) => Err(invalid(
                "transport.tls.certificate_file",
                "must be set when private_key_file is set",
            )),
            (false, true) => Err(invalid(
                "transport.tls.private_key_file",
                "must be set when certificate_file is set",
            )),
            (true, true) if self.data_dir.trim().is_empty() => Err(invalid(
                "transport.tls.data_dir",
                "must not be empty when no certificate file is configured",
            )),
            _ => Ok(()),
        }
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

/// `[rooms]`: the built-in room policy and bounds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RoomsConfig {
    /// `max_players` of rooms created without a script label (0 = unlimited).
    pub default_max_players: u32,
    /// Most rooms alive at once; creating past it is refused.
    pub max_rooms: usize,
    /// Longest room name (ROOM_CREATE params) accepted.
    pub max_name_bytes: usize,
}

impl Default for RoomsConfig {
    fn default() -> Self {
        RoomsConfig {
            default_max_players: 0,
            max_rooms: 10_000,
            max_name_bytes: 128,
        }
    }
}

/// `[shutdown]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ShutdownConfig {
    /// How long queued envelopes may flush after SIGINT/SIGTERM.
    pub grace_ms: u64,
}

impl Default for ShutdownConfig {
    fn default() -> Self {
        ShutdownConfig { grace_ms: 5_000 }
    }
}

// ---- [runtime] (Lua runtime) ----

/// `[runtime]`: the embedded Lua runtime (see `docs/scripting.md`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RuntimeConfig {
    /// Run `<scripts_dir>/main.lua` when it exists (false forces the built-in relay).
    pub enabled: bool,
    /// Directory holding `main.lua` and the modules `require` may load.
    pub scripts_dir: String,
    /// Deadline of one invocation (RPC, message, join/leave, room hooks), ms.
    pub deadline_ms: u64,
    /// `on_tick` rate (0 = off).
    pub tick_hz: u32,
    /// Deadline of one tick invocation, ms; unset = `min(50, period / 2)`, at least 1.
    pub tick_deadline_ms: Option<u64>,
    /// Memory cap of the Lua VM, MiB.
    pub memory_limit_mb: u64,
    /// Reload `main.lua` when its mtime or size changes.
    pub hot_reload: bool,
    /// How often `main.lua` is polled for changes, ms.
    pub hot_reload_poll_ms: u64,
    /// Calls waiting for the VM; a full queue fails the call at once.
    pub queue_capacity: usize,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            enabled: true,
            scripts_dir: "./game".into(),
            deadline_ms: 100,
            tick_hz: 0,
            tick_deadline_ms: None,
            memory_limit_mb: 64,
            hot_reload: false,
            hot_reload_poll_ms: 500,
            queue_capacity: 4096,
        }
    }
}

impl RuntimeConfig {
    /// The effective tick deadline (ms): configured, else `min(50, period / 2)`, at least 1.
    pub fn effective_tick_deadline_ms(&self) -> u64 {
        match self.tick_deadline_ms {
            Some(ms) => ms,
            None if self.tick_hz == 0 => 50,
            None => (500 / u64::from(self.tick_hz)).clamp(1, 50),
        }
    }

    fn validate(&self) -> Result<(), ConfigError> {
        at_least("runtime.deadline_ms", self.deadline_ms as usize, 1)?;
        if self.tick_hz > 1000 {
            return Err(invalid("runtime.tick_hz", "must not exceed 1000"));
        }
        if self.tick_deadline_ms == Some(0) {
            return Err(invalid(
                "runtime.tick_deadline_ms",
                "must be at least 1 (leave it unset for the automatic value)",
            ));
        }
        at_least("runtime.memory_limit_mb", self.memory_limit_mb as usize, 1)?;
        if self.memory_limit_mb > 65_536 {
            return Err(invalid("runtime.memory_limit_mb", "must not exceed 65536"));
        }
        at_least(
            "runtime.hot_reload_poll_ms",
            self.hot_reload_poll_ms as usize,
            10,
        )?;
        at_least("runtime.queue_capacity", self.queue_capacity, 1)?;
        if self.scripts_dir.trim().is_empty() {
            return Err(invalid("runtime.scripts_dir", "must not be empty"));
        }
        Ok(())
    }
}

// ---- end [runtime] ----

/// Short environment aliases kept from the reference implementation.
const ENV_ALIASES: [(&str, &str); 5] = [
    ("CITADEL_DATABASE_URL", "database.url"),
    ("CITADEL_LOG_LEVEL", "logging.level"),
    ("CITADEL_NODE_ID", "server.node_id"),
    ("CITADEL_PUBLIC_ADDR", "server.public_addr"),
    ("CITADEL_HTTP_BIND", "http.bind"),
];

/// Overrides given on the command line (highest precedence).
#[derive(Debug, Clone, Default)]
pub struct CliOverrides {
    /// `--log-level`.
    pub log_level: Option<String>,
    /// `--bind` (HTTP).
    pub http_bind: Option<String>,
    /// `--node-id`.
    pub node_id: Option<String>,
}

/// Where the configuration came from (for the banner and `citadel check`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigSource {
    /// An explicit or discovered file.
    File(PathBuf),
    /// Built-in defaults (no file).
    Defaults,
}

impl Config {
    /// Resolves the configuration: `explicit` file, else `./citadel.toml` if
    /// present, else defaults; then `env`, then `cli`; then validates.
    pub fn load(
        explicit: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
        cli: &CliOverrides,
    ) -> Result<(Config, ConfigSource), ConfigError> {
        let (text, source) = match explicit {
            Some(path) => (read(path)?, ConfigSource::File(path.to_path_buf())),
            None => {
                let path = PathBuf::from("citadel.toml");
                if path.is_file() {
                    (read(&path)?, ConfigSource::File(path))
                } else {
                    (String::new(), ConfigSource::Defaults)
                }
            }
        };
        let origin = match &source {
            ConfigSource::File(p) => format!(" in {}", p.display()),
            ConfigSource::Defaults => String::new(),
        };
        let mut table: toml::Table = toml::from_str(&text).map_err(|e| ConfigError::Parse {
            origin: origin.clone(),
            message: e.to_string(),
        })?;
        relocate_transform_sync(&mut table)?;
        apply_env(&mut table, env)?;
        let mut config: Config =
            Config::deserialize(toml::Value::Table(table)).map_err(|e| ConfigError::Parse {
                origin,
                message: e.to_string(),
            })?;
        if let Some(level) = &cli.log_level {
            config.logging.level = level.clone();
        }
        if let Some(bind) = &cli.http_bind {
            config.http.bind = bind.clone();
        }
        if let Some(id) = &cli.node_id {
            config.server.node_id = id.clone();
        }
        config.validate()?;
        Ok((config, source))
    }

    /// Parses a TOML document (no environment, no validation).
    pub fn from_toml_str(text: &str) -> Result<Config, ConfigError> {
        let parse = |e: &dyn std::fmt::Display| ConfigError::Parse {
            origin: String::new(),
            message: e.to_string(),
        };
        let mut table: toml::Table = toml::from_str(text).map_err(|e| parse(&e))?;
        relocate_transform_sync(&mut table)?;
        Config::deserialize(toml::Value::Table(table)).map_err(|e| parse(&e))
    }

    /// Checks every range; the error names the key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.server.node_id.trim().is_empty() {
            return Err(invalid("server.node_id", "must not be empty"));
        }
        self.notifications.validate()?;
        self.friends.validate()?;
        self.groups.validate()?;
        self.matchmaker.validate()?;
        self.party.validate()?;
        parse_addr("http.bind", &self.http.bind)?;
        self.http.validate()?;
        let http = &self.http;
        at_least(
            "http.header_read_timeout_ms",
            http.header_read_timeout_ms as usize,
            1,
        )?;
        at_least(
            "http.keep_alive_timeout_ms",
            http.keep_alive_timeout_ms as usize,
            1,
        )?;
        at_least(
            "http.body_read_timeout_ms",
            http.body_read_timeout_ms as usize,
            1,
        )?;
        // hyper refuses a read buffer under 8 KiB.
        if !(MIN_HEADER_BYTES..=MAX_HEADER_BYTES).contains(&http.max_header_bytes) {
            return Err(invalid(
                "http.max_header_bytes",
                "must be between 8192 and 1048576",
            ));
        }
        at_least("http.max_connections", http.max_connections, 1)?;
        parse_addr("transport.websocket.bind", &self.transport.websocket.bind)?;
        self.transport.quic.validate("quic", QUIC_DEFAULT_BIND)?;
        self.transport
            .webtransport
            .validate("webtransport", WEBTRANSPORT_DEFAULT_BIND)?;
        self.transport.tls.validate()?;
        if !matches!(self.logging.format.as_str(), "pretty" | "json") {
            return Err(invalid("logging.format", "must be \"pretty\" or \"json\""));
        }
        if tracing_subscriber::EnvFilter::try_new(&self.logging.level).is_err() {
            return Err(invalid("logging.level", "is not a valid log filter"));
        }
        let ws = &self.transport.websocket;
        at_least(
            "transport.websocket.outbound_queue_capacity",
            ws.outbound_queue_capacity,
            1,
        )?;
        at_least(
            "transport.websocket.unreliable_queue_capacity",
            ws.unreliable_queue_capacity,
            1,
        )?;
        at_least(
            "transport.websocket.outbound_queue_max_bytes",
            ws.outbound_queue_max_bytes,
            1024,
        )?;
        at_least(
            "transport.websocket.max_coalesced_bytes",
            ws.max_coalesced_bytes,
            1024,
        )?;
        at_least(
            "transport.websocket.max_message_bytes",
            ws.max_message_bytes,
            1024,
        )?;
        if ws.heartbeat_timeout_ms != 0 && ws.heartbeat_timeout_ms <= ws.heartbeat_interval_ms {
            return Err(invalid(
                "transport.websocket.heartbeat_timeout_ms",
                "must exceed heartbeat_interval_ms (or be 0 to disable)",
            ));
        }
        let auth = &self.transport.auth;
        at_least(
            "transport.auth.handshake_timeout_ms",
            auth.handshake_timeout_ms as usize,
            1,
        )?;
        at_least("transport.auth.max_token_bytes", auth.max_token_bytes, 1)?;
        at_least(
            "transport.auth.revocation_poll_ms",
            auth.revocation_poll_ms as usize,
            10,
        )?;
        if self.database.url.trim().is_empty() {
            return Err(invalid("database.url", "must not be empty"));
        }
        at_least(
            "database.max_connections",
            self.database.max_connections as usize,
            1,
        )?;
        at_least(
            "database.acquire_timeout_ms",
            self.database.acquire_timeout_ms as usize,
            1,
        )?;
        let ts = &self.transform_sync;
        at_least("transform_sync.send_rate_hz", ts.send_rate_hz as usize, 1)?;
        at_least("transform_sync.sim_hz", ts.sim_hz as usize, 1)?;
        ts.hello()?;
        if ts.demo_movers != 0 || ts.player_slots != 0 {
            return Err(invalid(
                "transform_sync.demo_movers/player_slots",
                "reference demo features are not supported; use networked actors or Lua NPCs",
            ));
        }
        if ts.interest_enabled
            && !(ts.interest_cell_size > 0.0
                && ts.interest_inner >= 0.0
                && ts.interest_outer >= 0.0)
        {
            return Err(invalid(
                "transform_sync.interest_*",
                "cell size must be > 0 and radii >= 0",
            ));
        }
        let a = &self.authentication;
        at_least(
            "authentication.access_token_ttl_secs",
            a.access_token_ttl_secs as usize,
            1,
        )?;
        at_least(
            "authentication.refresh_token_ttl_secs",
            a.refresh_token_ttl_secs as usize,
            1,
        )?;
        for (name, rule) in [
            ("source", &a.limits.source),
            ("email", &a.limits.email),
            ("registration_source", &a.limits.registration_source),
        ] {
            if !(1..=1_000_000).contains(&rule.limit) {
                return Err(invalid(
                    &format!("authentication.limits.{name}.limit"),
                    "must be 1..=1000000",
                ));
            }
            if !(1..=86_400_000).contains(&rule.window_ms) {
                return Err(invalid(
                    &format!("authentication.limits.{name}.window_ms"),
                    "must be 1..=86400000",
                ));
            }
        }
        let limits = &self.transport.limits;
        at_least(
            "transport.limits.max_connections",
            limits.max_connections,
            1,
        )?;
        at_least(
            "transport.limits.max_inbound_frame_bytes",
            limits.max_inbound_frame_bytes,
            64,
        )?;
        if limits.max_inbound_frame_bytes > citadel_wire::protocol::MAX_FRAME_BODY_BYTES {
            return Err(invalid(
                "transport.limits.max_inbound_frame_bytes",
                "must not exceed 8388608 (the wire maximum)",
            ));
        }
        at_least(
            "transport.limits.messages_per_second",
            limits.messages_per_second as usize,
            1,
        )?;
        at_least(
            "transport.limits.message_burst",
            limits.message_burst as usize,
            1,
        )?;
        at_least(
            "transport.limits.rpc_max_in_flight",
            limits.rpc_max_in_flight,
            1,
        )?;
        at_least(
            "transport.limits.rpc_timeout_ms",
            limits.rpc_timeout_ms as usize,
            1,
        )?;
        at_least("rooms.max_rooms", self.rooms.max_rooms, 1)?;
        at_least("rooms.max_name_bytes", self.rooms.max_name_bytes, 1)?;
        if self.rooms.max_name_bytes > usize::from(u16::MAX) {
            return Err(invalid("rooms.max_name_bytes", "must not exceed 65535"));
        }
        self.runtime.validate()?;
        Ok(())
    }

    /// The HTTP listen address (validated).
    pub fn http_addr(&self) -> Result<SocketAddr, ConfigError> {
        parse_addr("http.bind", &self.http.bind)
    }

    /// The WebSocket listen address (validated).
    pub fn websocket_addr(&self) -> Result<SocketAddr, ConfigError> {
        parse_addr("transport.websocket.bind", &self.transport.websocket.bind)
    }

    /// The QUIC UDP address.
    pub fn quic_addr(&self) -> Result<SocketAddr, ConfigError> {
        parse_addr(
            "transport.quic.bind",
            self.transport.quic.bind_or(QUIC_DEFAULT_BIND),
        )
    }

    /// The WebTransport UDP address.
    pub fn webtransport_addr(&self) -> Result<SocketAddr, ConfigError> {
        parse_addr(
            "transport.webtransport.bind",
            self.transport
                .webtransport
                .bind_or(WEBTRANSPORT_DEFAULT_BIND),
        )
    }
}

fn read(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn parse_addr(key: &str, value: &str) -> Result<SocketAddr, ConfigError> {
    value
        .parse()
        .map_err(|_| invalid(key, format!("`{value}` is not an ip:port socket address")))
}

fn at_least(key: &str, value: usize, min: usize) -> Result<(), ConfigError> {
    if value < min {
        return Err(invalid(key, format!("must be at least {min}")));
    }
    Ok(())
}

/// Every leaf key path of the defaults, with its default value (the type
/// template for parsing environment strings).
fn leaf_paths() -> Vec<(String, toml::Value)> {
    fn walk(prefix: &str, value: &toml::Value, out: &mut Vec<(String, toml::Value)>) {
        match value {
            toml::Value::Table(t) => {
                for (k, v) in t {
                    let path = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    walk(&path, v, out);
                }
            }
            leaf => out.push((prefix.to_owned(), leaf.clone())),
        }
    }
    let mut out = Vec::new();
    if let Ok(defaults) = toml::Value::try_from(Config::default()) {
        walk("", &defaults, &mut out);
    }
    out
}

/// The environment variable that overrides `path`.
pub fn env_name(path: &str) -> String {
    format!("CITADEL_{}", path.replace('.', "_").to_ascii_uppercase())
}

fn apply_env(
    table: &mut toml::Table,
    env: impl IntoIterator<Item = (String, String)>,
) -> Result<(), ConfigError> {
    let leaves = leaf_paths();
    for (name, raw) in env {
        if !name.starts_with("CITADEL_") {
            continue;
        }
        let path = ENV_ALIASES
            .iter()
            .find(|(alias, _)| *alias == name)
            .map(|(_, path)| (*path).to_owned())
            .or_else(|| {
                leaves
                    .iter()
                    .find(|(path, _)| env_name(path) == name)
                    .map(|(path, _)| path.clone())
            });
        let Some(path) = path else { continue };
        let template = leaves
            .iter()
            .find(|(p, _)| *p == path)
            .map(|(_, v)| v.clone())
            .unwrap_or(toml::Value::String(String::new()));
        let value = parse_env_value(&template, &raw).map_err(|message| ConfigError::Parse {
            origin: format!(" in environment variable {name}"),
            message,
        })?;
        set_path(table, &path, value);
    }
    Ok(())
}

fn parse_env_value(template: &toml::Value, raw: &str) -> Result<toml::Value, String> {
    match template {
        toml::Value::Boolean(_) => match raw.trim().to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" | "on" => Ok(toml::Value::Boolean(true)),
            "false" | "0" | "no" | "off" => Ok(toml::Value::Boolean(false)),
            _ => Err(format!("expected a boolean, got `{raw}`")),
        },
        toml::Value::Integer(_) => raw
            .trim()
            .parse::<i64>()
            .map(toml::Value::Integer)
            .map_err(|_| format!("expected an integer, got `{raw}`")),
        toml::Value::Float(_) => raw
            .trim()
            .parse::<f64>()
            .map(toml::Value::Float)
            .map_err(|_| format!("expected a number, got `{raw}`")),
        _ => Ok(toml::Value::String(raw.to_owned())),
    }
}

fn set_path(table: &mut toml::Table, path: &str, value: toml::Value) {
    let mut parts: Vec<&str> = path.split('.').collect();
    let Some(last) = parts.pop() else { return };
    let mut cursor = table;
    for part in parts {
        let entry = cursor
            .entry(part.to_owned())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        if !entry.is_table() {
            *entry = toml::Value::Table(toml::Table::new());
        }
        let toml::Value::Table(next) = entry else {
            return;
        };
        cursor = next;
    }
    cursor.insert(last.to_owned(), value);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str, env: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let dir = std::env::temp_dir().join(format!("citadel-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|source| ConfigError::Read {
            path: dir.clone(),
            source,
        })?;
        // One file per call: tests run in parallel in one process.
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let file = dir.join(format!("{n}.toml"));
        std::fs::write(&file, text).map_err(|source| ConfigError::Read {
            path: file.clone(),
            source,
        })?;
        let env = env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned()));
        Config::load(Some(&file), env, &CliOverrides::default()).map(|(c, _)| c)
    }

    #[test]
    fn transform_sync_accepts_both_spellings_but_not_both_at_once() {
        let top = load("[transform_sync]\nsend_rate_hz = 30\n", &[]).unwrap();
        assert_eq!(top.transform_sync.send_rate_hz, 30);
        let nested = load("[transport.transform_sync]\nsend_rate_hz = 31\npredicted_authoritative_archetypes = [3]\n", &[]).unwrap();
        assert_eq!(nested.transform_sync.send_rate_hz, 31);
        assert_eq!(
            nested.transform_sync.predicted_authoritative_archetypes,
            vec![3]
        );
        let both = load(
            "[transform_sync]\nsim_hz = 30\n[transport.transform_sync]\nsim_hz = 30\n",
            &[],
        )
        .unwrap_err();
        assert!(
            both.to_string().contains("transport.transform_sync"),
            "{both}"
        );
        let bad = load("[transform_sync]\nquat_mode = 11\n", &[]).unwrap_err();
        assert!(
            bad.to_string().contains("transform_sync.quat_mode"),
            "{bad}"
        );
    }

    #[test]
    fn defaults_are_valid() {
        Config::default().validate().unwrap();
        assert_eq!(Config::from_toml_str("").unwrap(), Config::default());
    }

    #[test]
    fn unknown_keys_are_named() {
        let err = load("[transport.websocket]\nbindd = \"x\"\n", &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("bindd"), "{err}");
        let err = load("[nope]\n", &[]).unwrap_err().to_string();
        assert!(err.contains("nope"), "{err}");
    }

    #[test]
    fn ranges_are_named() {
        let err = load("[transport.limits]\nmessages_per_second = 0\n", &[])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("transport.limits.messages_per_second"),
            "{err}"
        );
        let err = load("[http]\nbind = \"localhost\"\n", &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("http.bind"), "{err}");
    }

    #[test]
    fn udp_transport_and_tls_keys_are_validated_by_name() {
        let c = load("[transport.webtransport]\nenabled = true\n", &[]).unwrap();
        assert_eq!(
            c.webtransport_addr().unwrap().port(),
            7353,
            "section default"
        );
        assert_eq!(c.quic_addr().unwrap().port(), 7351);
        for (toml, key) in [
            (
                "[transport.quic]\nkeep_alive_interval_ms = 40000\n",
                "transport.quic.keep_alive_interval_ms",
            ),
            (
                "[transport.webtransport]\npath = \"citadel\"\n",
                "transport.webtransport.path",
            ),
            (
                "[transport.quic]\nmax_client_streams = 0\n",
                "transport.quic.max_client_streams",
            ),
            (
                "[http]\ncors_allowed_origins = [\"https://game.example/path\"]\n",
                "http.cors_allowed_origins",
            ),
            (
                "[http]\ncors_allowed_origins = [\"game.example\"]\n",
                "http.cors_allowed_origins",
            ),
            (
                "[transport.quic]\ndatagram_send_buffer_bytes = 1000\n",
                "transport.quic.datagram_send_buffer_bytes",
            ),
            (
                "[transport.webtransport]\ndatagram_receive_buffer_bytes = 0\n",
                "transport.webtransport.datagram_receive_buffer_bytes",
            ),
            (
                "[transport.tls]\ncertificate_file = \"c.pem\"\n",
                "transport.tls.private_key_file",
            ),
            (
                "[transport.tls]\ndata_dir = \"\"\n",
                "transport.tls.data_dir",
            ),
        ] {
            let err = load(toml, &[]).unwrap_err().to_string();
            assert!(err.contains(key), "{toml}: {err}");
        }
    }

    #[test]
    fn runtime_keys_are_validated_by_name() {
        let c = load("[runtime]\ntick_hz = 30\nhot_reload = true\n", &[]).unwrap();
        assert_eq!(c.runtime.tick_hz, 30);
        assert_eq!(c.runtime.effective_tick_deadline_ms(), 16);
        for (text, key) in [
            ("[runtime]\ndeadline_ms = 0\n", "runtime.deadline_ms"),
            (
                "[runtime]\ntick_deadline_ms = 0\n",
                "runtime.tick_deadline_ms",
            ),
            (
                "[runtime]\nmemory_limit_mb = 0\n",
                "runtime.memory_limit_mb",
            ),
            ("[runtime]\nqueue_capacity = 0\n", "runtime.queue_capacity"),
            (
                "[runtime]\nhot_reload_poll_ms = 1\n",
                "runtime.hot_reload_poll_ms",
            ),
            ("[runtime]\nscripts = \"x\"\n", "scripts"),
        ] {
            let err = load(text, &[]).unwrap_err().to_string();
            assert!(err.contains(key), "{err}");
        }
        let c = load("", &[("CITADEL_RUNTIME_TICK_HZ", "20")]).unwrap();
        assert_eq!(c.runtime.tick_hz, 20);
    }

    #[test]
    fn connection_limits_have_defaults_and_are_checked() {
        let c = load("", &[]).unwrap();
        assert_eq!(c.http.header_read_timeout_ms, 10_000);
        assert_eq!(c.http.max_header_bytes, 32_768);
        assert_eq!(c.http.body_read_timeout_ms, 10_000);
        assert_eq!(c.http.max_connections_per_ip, 256);
        assert_eq!(c.transport.limits.max_connections_per_ip, 0);
        let c = load(
            "[http]\nmax_connections_per_ip = 0\n[transport.limits]\nmax_connections_per_ip = 8\n",
            &[("CITADEL_HTTP_MAX_CONNECTIONS", "64")],
        )
        .unwrap();
        assert_eq!(c.http.max_connections, 64);
        assert_eq!(c.http.max_connections_per_ip, 0);
        assert_eq!(c.transport.limits.max_connections_per_ip, 8);
        for bad in [
            "[http]\nmax_connections = 0\n",
            "[http]\nheader_read_timeout_ms = 0\n",
            "[http]\nkeep_alive_timeout_ms = 0\n",
            "[http]\nbody_read_timeout_ms = 0\n",
            "[http]\nmax_header_bytes = 8191\n",
            "[http]\nmax_header_bytes = 1048577\n",
        ] {
            let err = load(bad, &[]).unwrap_err().to_string();
            let key = bad.lines().nth(1).unwrap().split(' ').next().unwrap();
            assert!(err.contains(&format!("http.{key}")), "{err}");
        }
    }

    #[test]
    fn env_overrides_file_and_aliases_work() {
        let c = load(
            "[transport.auth]\nallow_guests = true\n",
            &[
                ("CITADEL_TRANSPORT_AUTH_ALLOW_GUESTS", "false"),
                ("CITADEL_NODE_ID", "node-7"),
                ("CITADEL_TRANSPORT_LIMITS_MAX_CONNECTIONS", "12"),
                ("CITADEL_REQUIRE_SERVICES", "1"),
            ],
        )
        .unwrap();
        assert!(!c.transport.auth.allow_guests);
        assert_eq!(c.server.node_id, "node-7");
        assert_eq!(c.transport.limits.max_connections, 12);
        let err = load("", &[("CITADEL_TRANSPORT_LIMITS_MAX_CONNECTIONS", "many")]).unwrap_err();
        assert!(
            err.to_string()
                .contains("CITADEL_TRANSPORT_LIMITS_MAX_CONNECTIONS"),
            "{err}"
        );
    }
}
