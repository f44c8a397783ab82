//! `[transport.quic]`, `[transport.webtransport]` and `[transport.tls]`:
//! the two QUIC-based transports (one section type, two standard
//! addresses) and the certificate both present.
//!
//! What it is not: the endpoints (`crate::transport::{quic, webtransport}`)
//! or certificate loading (`crate::transport::tls`). Call order: parsed as
//! part of [`super::TransportConfig`], which calls each `validate` with the
//! section name so errors carry the full dotted key.

use serde::{Deserialize, Serialize};

use super::transport::LaneConfig;
use super::{ConfigError, at_least, invalid, parse_addr};

/// `transport.quic.bind` when unset.
pub const QUIC_DEFAULT_BIND: &str = "127.0.0.1:7351";
/// `transport.webtransport.bind` when unset.
pub const WEBTRANSPORT_DEFAULT_BIND: &str = "127.0.0.1:7353";

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
    /// The outbound lane keys every transport section has.
    #[serde(flatten)]
    pub lanes: LaneConfig,
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
    /// QUIC only: the kernel receive and send buffer of the endpoint's UDP
    /// socket, in bytes. One socket carries every connection's packets, so
    /// while the node is busy (a NetworkPeer tick) the kernel queues them
    /// here; past it the kernel drops datagrams (system-wide counter
    /// `RcvbufErrors` in /proc/net/snmp) and QUIC has to retransmit. The
    /// kernel caps it at `net.core.rmem_max` / `wmem_max`; the node logs the
    /// size it got when that is less.
    pub udp_socket_buffer_bytes: usize,
    /// WebTransport only: the session path a browser must open.
    pub path: String,
}

impl DatagramTransportConfig {
    /// Every key at its default, listening on `bind`.
    pub(super) fn with_bind(bind: &str) -> Self {
        DatagramTransportConfig {
            enabled: false,
            bind: bind.into(),
            lanes: LaneConfig::default(),
            max_client_streams: 1024,
            idle_timeout_ms: 30_000,
            keep_alive_interval_ms: 10_000,
            datagram_send_buffer_bytes: 256 * 1024,
            datagram_receive_buffer_bytes: 256 * 1024,
            udp_socket_buffer_bytes: 4 * 1024 * 1024,
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

    /// Checks `transport.<section>.*`, with `fallback` standing for an unset bind.
    pub(super) fn validate(&self, section: &str, fallback: &str) -> Result<(), ConfigError> {
        let key = |k: &str| format!("transport.{section}.{k}");
        parse_addr(&key("bind"), self.bind_or(fallback))?;
        self.lanes.validate(section)?;
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
            &key("udp_socket_buffer_bytes"),
            self.udp_socket_buffer_bytes,
            64 * 1024,
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
    /// Checks `transport.tls.*`.
    pub fn validate(&self) -> Result<(), ConfigError> {
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
