//! # citadel-wire
//!
//! The realtime wire contract of Citadel: the envelope, its framed and
//! datagram encodings, and a typed encoder/decoder for the body of every
//! assigned kind (1-28). The server and every Rust client speak through this
//! crate, so its bytes are the bytes existing Citadel clients (Rust,
//! JavaScript, C ABI) send and expect.
//!
//! ## What it is not
//!
//! A sans-IO library: no sockets, no async runtime, no clock, no global
//! state. It does not decide *what* to send (rooms, baselines, interest,
//! authority live in `citadel-server` and `citadel-netcode`), and it never
//! logs. Kinds 29-99 are reserved and deliberately not implemented.
//!
//! ## Rules every decoder follows
//!
//! - Sizes and counts are checked before allocating; no input panics.
//! - Fixed-layout bodies ignore extra trailing bytes (existing clients rely
//!   on it); bitstream bodies (8, 13, 14, 15) and the strict kind-1 body
//!   reject them, and bitstreams reject non-zero padding.
//! - Encoders never emit extra bytes and clamp variable fields to what the
//!   layout can count.
//!
//! ## Kinds and their modules
//!
//! | Kind | Name | Body type |
//! | --- | --- | --- |
//! | 1 | POSITION | [`protocol::Position`] |
//! | 2 | PEER_POSITION | [`protocol::PeerPosition`] |
//! | 3 / 4 | RPC_REQUEST / RPC_RESPONSE | [`protocol::RpcRequest`] / [`protocol::RpcResponse`] |
//! | 5 / 6 | AUTH / AUTH_RESULT | [`protocol::AuthRequest`] / [`protocol::AuthResult`] |
//! | 7 | TSYNC_HELLO | [`tsync::HelloParams`] (client opt-in: empty body) |
//! | 8 | TSYNC_SNAPSHOT | [`tsync::Snapshot`] (needs the [`tsync::TransformCodec`]) |
//! | 9 | TSYNC_INPUT | [`tsync::InputBundle`] |
//! | 10 | TSYNC_ACK | [`tsync::TsyncAck`] |
//! | 11 | TSYNC_ROLE | [`tsync::RoleChange`] |
//! | 12 | TSYNC_REWIND | [`tsync::Rewind`] |
//! | 13 | REP_DELTA | [`netpeer::DeltaBunch`] (needs the [`netpeer::ClassSchema`]) |
//! | 14 | REP_ACK | [`netpeer::RepAck`] |
//! | 15 | REP_SCHEMA | [`netpeer::RepSchema`] |
//! | 16-20 | NA_PRESENCE … NA_STATE | [`actor`] |
//! | 21-25 | ROOM_CREATE … ROOM_MAP_READY | [`room`] |
//! | 26 | MATCHMAKER_MATCHED | [`service::MatchmakerMatched`] |
//! | 27 | NOTIFICATION | [`service::Notification`] |
//! | 28 | CHAT_EVENT | [`service::ChatEvent`] |
//!
//! ## Choices where the sources disagree
//!
//! - The snapshot's per-object changed mask is 4 bits (the fourth flags
//!   `last_input_seq`), as existing clients read it; the older docs say 3.
//! - Kind 13 carries exactly one standalone bunch; the coalesced multi-bunch
//!   framing is not used by any examined peer and is not implemented.
//! - A Rejected kind-6 body with no reason byte reads as reason 0.
//!
//! ## Primitives
//!
//! [`bits`] (MSB-first bitstream), [`varint`] (bit-varint), [`quant`]
//! (bounded scalar and Vector3), [`quat`] (smallest-three), [`ack`] (32-bit
//! ack window), [`baseline`] (baseline tokens), [`schema`] (BLAKE3-128 class
//! identity).

#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

pub mod ack;
pub mod actor;
pub mod baseline;
pub mod bits;
pub mod body;
pub mod decoder;
pub mod envelope;
pub mod error;
pub mod netpeer;
pub mod protocol;
pub mod quant;
pub mod quat;
pub mod room;
pub mod schema;
pub mod service;
pub mod tsync;
pub mod varint;

pub use body::WireBody;
pub use decoder::{FrameDecoder, framed_to_datagram};
pub use envelope::{
    Envelope, KIND_BYTES, WireError, decode_datagram, decode_datagram_bytes, decode_framed,
    encode_framed_parts, framed_len, peek_frame_len,
};
pub use error::{CodecError, DecodeError, EncodeError};
