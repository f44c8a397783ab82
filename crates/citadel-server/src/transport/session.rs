//! [`Session`]: what the QUIC-family driver ([`super::udp_conn`]) needs from
//! one accepted connection, implemented for native QUIC (quinn) and for a
//! WebTransport session (wtransport).
//!
//! What it is: a thin, cloneable adapter (streams in, one uni stream per
//! reliable batch out, datagrams both ways, close with a code). What it is
//! not: it holds no protocol state and decodes nothing.
//!
//! Call order: the driver clones the session into its reader and writer
//! tasks; `accept_*` / `read_datagram` until they return `None` (the
//! connection is gone); `send_stream` in send order; `close` once.

use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::AsyncRead;

/// A datagram the connection took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DatagramQueued {
    /// Queued with room to spare.
    Queued,
    /// Queued, but the connection's datagram send buffer was full: it
    /// dropped its oldest queued datagram(s) to make room.
    DisplacedOlder,
}

/// Why a datagram was not handed to the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DatagramRefused {
    /// Larger than the current maximum datagram size (or datagrams are
    /// unsupported by the peer).
    TooLarge,
    /// The connection is gone.
    Closed,
}

/// One accepted QUIC or WebTransport connection.
pub trait Session: Clone + Send + Sync + 'static {
    /// A client-opened stream's receiving half.
    type Recv: AsyncRead + Unpin + Send + 'static;
    /// A finished server-opened stream, kept to wait for its acknowledgement.
    type Sent: Send + 'static;

    /// Next client-opened unidirectional stream, in stream-id order; `None`
    /// once the connection is gone.
    fn accept_uni(&self) -> impl Future<Output = Option<Self::Recv>> + Send;
    /// Next client-opened bidirectional stream (its receiving half; the
    /// server never writes to it); `None` once the connection is gone.
    fn accept_bi(&self) -> impl Future<Output = Option<Self::Recv>> + Send;
    /// Next datagram payload; `None` once the connection is gone.
    fn read_datagram(&self) -> impl Future<Output = Option<Bytes>> + Send;
    /// Hands one datagram to the connection (never blocks).
    fn send_datagram(&self, datagram: Bytes) -> Result<DatagramQueued, DatagramRefused>;
    /// QUIC DATAGRAM frames this connection has received so far, read by
    /// the node or not (the difference is what its receive buffer dropped).
    fn datagrams_received(&self) -> u64;
    /// Opens a unidirectional stream, writes `bytes`, finishes it. `None`
    /// when the connection is gone. Waiting here is the flow-control
    /// backpressure of a slow reader.
    fn send_stream(&self, bytes: Bytes) -> impl Future<Output = Option<Self::Sent>> + Send;
    /// Resolves when the peer acknowledged everything on `sent` (or the
    /// stream/connection ended).
    fn wait_acked(sent: Self::Sent) -> impl Future<Output = ()> + Send;
    /// Closes the connection with an application code and reason.
    fn close(&self, code: u32, reason: &[u8]);
    /// The path's current smoothed round-trip estimate.
    fn rtt(&self) -> Duration;
}
