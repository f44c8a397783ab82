//! The bot transport seam: what a bot needs from a connection, whatever the
//! server and the wire.
//!
//! What it is: [`Connector`] opens one authenticated connection (the
//! implementations speak WebSocket, to Citadel, the raw relay and Colyseus,
//! and native QUIC to Citadel over `citadel_client::QuicClient` with
//! `--transport quic`; no bot speaks WebTransport),
//! [`BotTransport`] is that connection as a bot uses it (join a room, send a
//! relay payload, send an RPC, receive), and [`AuthMode`] says how bots
//! authenticate. What it is not: a client SDK; implementations live in
//! `targets/` and delegate to `citadel-client` where one exists.
//!
//! Lean relay bots (`crate::lean`) are opened through
//! [`Connector::connect_lean`] and driven by the fan-out engine instead.
//!
//! Call order: `Connector::connect` → `BotTransport::join_room` (optional)
//! → `send_relay` / `send_rpc` / `recv` in any order → `close`.
//! `recv` must be cancel-safe: bots race it against their send timer.

use std::future::Future;
use std::net::Ipv4Addr;

use bytes::Bytes;

/// How bots authenticate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthMode {
    /// An empty KIND_AUTH: a guest session.
    Guest,
    /// A device account per bot: `POST /v1/auth/device` with
    /// `{"id": "<prefix>-<n>", "create": true, "username": <id>}` on the server's HTTP
    /// listener, then the access token as the KIND_AUTH body. Citadel only.
    Device {
        /// Unique per run, so every run registers fresh accounts.
        prefix: String,
    },
}

/// What a bot can receive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inbound {
    /// Another member's relay payload, exactly as it was sent.
    Relay(Bytes),
    /// The reply to `send_rpc(id, ..)`; `ok` is false for an error status.
    RpcReply {
        /// Correlation id given to `send_rpc`.
        id: u64,
        /// Whether the server answered with a success status.
        ok: bool,
    },
    /// Anything else (ignored by the workloads).
    Other,
}

/// Opens authenticated bot connections for one target.
pub trait Connector: Send + Sync + 'static {
    /// The connection type.
    type Transport: BotTransport;

    /// Whether a connection exists before `join_room` (false for Colyseus,
    /// where the socket is opened by joining).
    fn connects_before_join(&self) -> bool {
        true
    }

    /// Opens a connection from the local address `source` and authenticates
    /// it as `auth` says. Errors are human-readable and never carry tokens.
    fn connect(
        &self,
        source: Ipv4Addr,
        auth: &AuthMode,
    ) -> impl Future<Output = anyhow::Result<Self::Transport>> + Send;

    /// Opens a lean relay bot (`crate::lean`) from `source`, authenticated
    /// as `auth` says and in the room keyed `room`; `seed` varies its
    /// WebSocket key and masks. `None`: this target has no lean bots.
    fn connect_lean(
        &self,
        source: Ipv4Addr,
        auth: &AuthMode,
        room: &str,
        seed: u64,
    ) -> impl Future<Output = Option<anyhow::Result<crate::lean::Dialed>>> + Send {
        let _ = (source, auth, room, seed);
        async { None }
    }
}

/// One bot connection.
pub trait BotTransport: Send + 'static {
    /// Joins (or creates) the room keyed `room` and waits for admission.
    fn join_room(&mut self, room: &str) -> impl Future<Output = anyhow::Result<()>> + Send;

    /// Sends `payload` for relay to the other members of the room.
    fn send_relay(&mut self, payload: &[u8]) -> impl Future<Output = anyhow::Result<()>> + Send;

    /// Sends RPC `method` with correlation `id`; the reply arrives via `recv`.
    fn send_rpc(
        &mut self,
        id: u64,
        method: &str,
        payload: &[u8],
    ) -> impl Future<Output = anyhow::Result<()>> + Send;

    /// Next inbound item; `Ok(None)` once the server closed the connection.
    /// Cancel-safe.
    fn recv(&mut self) -> impl Future<Output = anyhow::Result<Option<Inbound>>> + Send;

    /// Closes gracefully (bounded by the implementation's close timeout).
    fn close(self) -> impl Future<Output = ()> + Send;
}
