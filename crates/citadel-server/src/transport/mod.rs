//! Transports adapt bytes to envelopes and back. They know framing, not
//! kinds: every decoded envelope goes to the gateway's connection, every
//! outbound batch comes from its lanes.
//!
//! - [`ws`]: WebSocket (TCP), reliable only.
//! - [`quic`] and [`webtransport`]: UDP transports with a reliable path
//!   (streams) and an unreliable one (datagrams), both driven by
//!   [`udp_conn`] through the [`session::Session`] adapter.
//! - [`tls`]: the certificate both UDP transports present; [`renew`] rotates
//!   the development certificate while the node runs.
//! - [`slot`]: the connection cap and open/close accounting every transport
//!   shares.

pub mod quic;
pub mod renew;
pub mod session;
pub mod slot;
pub mod tls;
pub mod udp_conn;
pub mod webtransport;
pub mod ws;
