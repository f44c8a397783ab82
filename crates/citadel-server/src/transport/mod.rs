//! Transports adapt bytes to envelopes and back. They know framing, not
//! kinds: every decoded envelope goes to the gateway's connection, every
//! outbound batch comes from its lanes.
//!
//! - [`link`]: the reader core all of them share (the frame loop, the
//!   select over handshake deadline, shutdown and abort, the lane limits
//!   built from the keys common to every transport).
//! - [`ws`]: WebSocket (TCP), reliable only.
//! - [`quic`] and [`webtransport`]: UDP transports with a reliable path
//!   (streams) and an unreliable one (datagrams), both driven by
//!   [`udp_conn`] through the [`session::Session`] adapter.
//! - [`tls`]: the certificate both UDP transports present; [`renew`] rotates
//!   the development certificate while the node runs.
//! - [`slot`]: the connection caps and open/close accounting every
//!   transport shares.
//!
//! Each listener is built with [`TransportDeps`] and its own settings, not
//! with the whole node.

pub mod link;
pub mod quic;
pub mod renew;
pub mod session;
pub mod slot;
pub mod tls;
pub mod udp_conn;
pub mod webtransport;
pub mod ws;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::gateway::connection::ConnectionDeps;
use crate::metrics::Metrics;

/// The handles every realtime listener and its connections use.
#[derive(Clone)]
pub struct TransportDeps {
    /// What each connection's protocol state is built with.
    pub gateway: Arc<ConnectionDeps>,
    /// Counters.
    pub metrics: Arc<Metrics>,
    /// Connection slots and the per-address cap, over every transport.
    pub admission: Arc<slot::Admission>,
    /// Cancelled when the node shuts down.
    pub shutdown: CancellationToken,
    /// Where connection tasks run (awaited at shutdown).
    pub tasks: TaskTracker,
}
