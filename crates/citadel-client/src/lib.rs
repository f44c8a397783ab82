//! # citadel-client
//!
//! The Rust client SDK for Citadel's realtime server: a WebSocket
//! connection ([`WsClient`]) and a QUIC connection ([`QuicClient`], feature
//! `quic`, on by default, with an unreliable datagram path), both the one
//! generic [`Client`] core over their transport, that perform the authenticated handshake
//! (kinds 5/6), correlates RPCs (kinds 3/4), drives the room workflow
//! (kinds 21-25), reports positions (kind 1) and hands every other inbound
//! envelope to the caller, raw ([`Envelope`]) or decoded ([`ClientEvent`]).
//! Body layouts come from [`citadel_wire`], re-exported as [`wire`].
//!
//! ## What it is not
//!
//! No WebTransport client (browsers have their own), no HTTP API client,
//! no `wss://` (TLS is not enabled for WebSocket), no background task, reconnect or reply timeouts (wrap awaits in
//! `tokio::time::timeout`), and no token storage: tokens are caller-owned and
//! never logged.
//!
//! ## Call order
//!
//! One owner drives a connection through `&mut self`:
//! connect → authenticate (always the first frame) → room / RPC / send /
//! receive in any order → close. Envelopes that arrive while a helper waits
//! for a specific reply are kept and returned later by [`WsClient::recv`];
//! the caller must keep draining them (see [`MAX_BUFFERED_ENVELOPES`]).
//!
//! ## Quickstart
//!
//! ```no_run
//! use citadel_client::{AuthOutcome, ClientError, ClientEvent, WsClient};
//!
//! # async fn run() -> Result<(), ClientError> {
//! let (mut client, outcome) = WsClient::connect_as_guest("ws://127.0.0.1:7352/").await?;
//! assert!(matches!(outcome, AuthOutcome::Authenticated { .. } | AuthOutcome::Guest));
//!
//! client.join_or_create_room("lobby").await?;
//! let room = client.wait_for_room_joined().await?;
//! // ... load `room.map`, then:
//! client.send_map_ready(room.room_id).await?;
//!
//! client.send_position(125.0, 64.0).await?;
//! let reply = client.call_rpc("ping", b"").await?;
//! println!("ping replied {} bytes", reply.len());
//!
//! while let Some(event) = client.recv_event().await? {
//!     if let ClientEvent::PeerPosition(peer) = event {
//!         println!("peer {} at {:?}", peer.sender_id, peer.position());
//!     }
//! }
//! client.close().await?;
//! # Ok(())
//! # }
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod actors;
pub mod error;
pub mod event;
mod link;
#[cfg(feature = "quic")]
pub mod quic;
pub mod ws;

/// The NetworkPeer client session (kinds 13-15): apply bunches, ack, propose.
pub use citadel_netpeer::session as netpeer;
pub use citadel_wire::{self as wire, Envelope};
pub use error::{ClientError, ClientResult};
pub use event::{AuthOutcome, ClientEvent};
pub use link::{Client, MAX_BUFFERED_ENVELOPES, Transport};
#[cfg(feature = "quic")]
pub use quic::{QuicClient, ServerTrust};
pub use ws::{CLOSE_HANDSHAKE_TIMEOUT, WsClient};
