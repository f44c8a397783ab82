//! The client's error type, [`ClientError`], and its [`ClientResult`] alias.
//!
//! What it is: one flat, `#[non_exhaustive]` enum shared by every client
//! operation, carrying human-readable strings (never a session token, never
//! a raw server stack trace). What it is not: a retry policy or a
//! classification of server-side failures; an RPC error only relays the
//! server's short generic message.
//!
//! Call order: every fallible `WsClient` method returns [`ClientResult`];
//! match on the variant to decide whether the connection is still usable
//! (see each variant's documentation).

use thiserror::Error;

/// Result alias used by every client operation.
pub type ClientResult<T> = Result<T, ClientError>;

/// Everything a client operation can fail with.
#[non_exhaustive]
#[derive(Debug, Error)]
pub enum ClientError {
    /// The TCP connection or the WebSocket upgrade failed (the client was
    /// never created).
    #[error("connect failed: {0}")]
    Connect(String),
    /// Writing a message to the socket failed; the connection is probably
    /// gone and the next receive will report how it ended.
    #[error("send failed: {0}")]
    Send(String),
    /// Reading from the socket failed (transport error or reset), or the
    /// pending-envelope buffer is full (`"client buffer full"`, see
    /// [`crate::MAX_BUFFERED_ENVELOPES`]; the connection is still usable once
    /// the caller drains it with `recv`).
    #[error("receive failed: {0}")]
    Receive(String),
    /// The server sent bytes that are not valid Citadel framing (a length
    /// prefix out of bounds, a text message, a frame cut by the close) or a
    /// body that does not decode as its kind. A framing error cannot be
    /// resynchronised: every later receive reports it again.
    #[error("decode failed: {0}")]
    Decode(String),
    /// A caller argument or URL was refused before anything was sent (bad
    /// URL, envelope or name larger than the wire allows).
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The server answered the RPC with an error status.
    #[error("rpc {request_id} failed: {message}")]
    Rpc {
        /// The correlation id of the failed call.
        request_id: u64,
        /// The server's short, generic UTF-8 message.
        message: String,
    },
    /// An HTTP API call failed (reserved for the HTTP client surface; the
    /// WebSocket client never returns it).
    #[error("http request failed (status {status:?}, code {code}): {message}")]
    Http {
        /// The HTTP status, if a response was received.
        status: Option<u16>,
        /// A stable machine-readable error code.
        code: String,
        /// A human-readable message.
        message: String,
    },
    /// The connection is closed (or closing) and cannot carry the
    /// operation, or it closed before the awaited reply arrived.
    #[error("connection closed")]
    Closed,
}
