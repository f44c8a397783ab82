//! The transport-independent half of a realtime connection: handshake
//! phases, inbound dispatch, outbound lanes, rate limiting.
//!
//! Transports (see `crate::transport`) turn bytes into envelopes and feed
//! them to [`connection::Connection`]; they drain its [`outbound::Outbound`]
//! into the socket. Nothing here knows about WebSocket or QUIC.

pub mod connection;
pub mod handshake;
pub mod outbound;
pub mod ratelimit;
