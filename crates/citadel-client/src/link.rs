//! [`Client`]: the one body of every client method both transports share
//! (the handshake, RPC correlation, the pending queue, waiting for a kind,
//! the room and position helpers, `recv`, `close`). [`crate::WsClient`] and
//! [`crate::QuicClient`] are this type over their transport; a feature both
//! should have is one method here, written once.
//!
//! What it is: the generic core plus the sealed [`Transport`] trait a
//! transport implements with four primitives (send one framed envelope on
//! the reliable path, read the next envelope from the wire, close, report
//! the server's close reason). What it is not: a transport; what only one
//! transport can do (WebSocket batches and raw messages, QUIC datagrams and
//! raw streams) stays in `ws.rs` / `quic.rs`, in their own `impl` blocks.
//!
//! Call order: connect (per transport) → [`Client::authenticate`] (first
//! frame) → any of the methods below from the one owner → [`Client::close`].

use std::collections::VecDeque;
use std::fmt;

use bytes::Bytes;
use citadel_wire::protocol::{
    AuthResult, KIND_AUTH, KIND_AUTH_RESULT, KIND_POSITION, KIND_ROOM_JOINED, KIND_RPC_RESPONSE,
    MAX_FRAME_BODY_BYTES, RpcRequest, RpcResponse, encode_position,
};
use citadel_wire::room::{RoomCreate, RoomJoin, RoomJoined, RoomLeave, RoomMapReady};
use citadel_wire::{Envelope, FrameDecoder, WireBody};

use crate::error::{ClientError, ClientResult};
use crate::event::{AuthOutcome, ClientEvent};

/// Most envelopes a client keeps for a later `recv` while a helper
/// (`call_rpc`, `authenticate`, `wait_for_*`) waits for its reply.
///
/// Draining the queue with `recv` is the caller's duty. When it is full the
/// waiting helper stops *before* reading more from the connection and
/// returns `ClientError::Receive("client buffer full")`; nothing is
/// dropped, and the connection stays usable once the caller drains it (a
/// reply that arrives later is then returned by `recv` like any other
/// envelope).
pub const MAX_BUFFERED_ENVELOPES: usize = 65_536;

pub(crate) mod sealed {
    use std::future::Future;

    use bytes::Bytes;
    use citadel_wire::Envelope;

    use crate::error::ClientResult;

    /// The primitives a transport gives the core. Not implementable
    /// outside this crate.
    pub trait Wire: Send {
        /// Writes one framed envelope (or several, coalesced) on the
        /// reliable path, in call order.
        fn send_frames(&mut self, frames: Bytes) -> impl Future<Output = ClientResult<()>> + Send;
        /// Next envelope from the wire; `Ok(None)` once closed.
        fn read_envelope(&mut self) -> impl Future<Output = ClientResult<Option<Envelope>>> + Send;
        /// Closes gracefully; idempotent.
        fn close(&mut self) -> impl Future<Output = ClientResult<()>> + Send;
        /// The server's close code and reason, once it closed.
        fn close_reason(&self) -> Option<(u16, String)>;
    }
}

/// A client transport ([`crate::ws::WsLink`], [`crate::quic::QuicLink`]).
/// Sealed: its methods are internal.
pub trait Transport: sealed::Wire {}

impl<T: sealed::Wire> Transport for T {}

/// One Citadel realtime connection over transport `T`, driven by one owner
/// through `&mut self`. Envelopes that arrive while a helper waits for a
/// specific reply are kept, in arrival order, and handed out by
/// [`Client::recv`] later; nothing is dropped.
pub struct Client<T> {
    pub(crate) link: T,
    /// Envelopes read while a helper waited, in arrival order.
    pending: VecDeque<Envelope>,
    next_request_id: u64,
}

impl<T: fmt::Debug> fmt::Debug for Client<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("link", &self.link)
            .field("pending", &self.pending.len())
            .finish_non_exhaustive()
    }
}

impl<T: Transport> Client<T> {
    /// A client over a connected transport (no frame sent yet).
    pub(crate) fn over(link: T) -> Self {
        Client {
            link,
            pending: VecDeque::new(),
            next_request_id: 1,
        }
    }

    /// Sends KIND_AUTH (empty body for None) as the first frame and waits
    /// for KIND_AUTH_RESULT.
    ///
    /// Must be the first frame of the connection (the server processes
    /// nothing before it). Envelopes other than kind 6 that arrive meanwhile
    /// are kept for [`Client::recv`]. A kind-6 body that does not decode is
    /// [`ClientError::Decode`]; a close before the result is
    /// [`ClientError::Closed`]. A rejection is returned as
    /// [`AuthOutcome::Rejected`], not as an error. The token is neither
    /// stored nor logged.
    pub async fn authenticate(&mut self, token: Option<&str>) -> ClientResult<AuthOutcome> {
        let body = Bytes::copy_from_slice(token.unwrap_or_default().as_bytes());
        self.send(&Envelope::new(KIND_AUTH, body)).await?;
        let reply = self.wait_for_kind(KIND_AUTH_RESULT).await?;
        let result = AuthResult::decode(&reply.body)
            .map_err(|e| ClientError::Decode(format!("kind-6 auth result: {e}")))?;
        let outcome = AuthOutcome::from(result);
        tracing::debug!(
            accepted = outcome.is_accepted(),
            "citadel handshake finished"
        );
        Ok(outcome)
    }

    /// Sends one framed envelope on the reliable path (a WebSocket: one
    /// binary message; QUIC: the client's long-lived stream), ordered with
    /// every other reliable send of this client.
    ///
    /// A body too large for a frame ([`MAX_FRAME_BODY_BYTES`]) is refused
    /// with [`ClientError::Config`] before anything is written; after a close
    /// the result is [`ClientError::Closed`].
    pub async fn send(&mut self, envelope: &Envelope) -> ClientResult<()> {
        check_fits(envelope)?;
        self.link.send_frames(envelope.encode_framed()).await
    }

    /// Next envelope: first any envelopes buffered while `call_rpc` /
    /// `wait_*` waited, then the wire.
    ///
    /// Frames are reassembled whatever the transport split them into.
    /// Returns `Ok(None)` once the connection closed cleanly (after every
    /// complete frame received before the close was returned). Errors: a
    /// framing error is [`ClientError::Decode`] (it repeats on every later
    /// call: the stream cannot be resynchronised; over WebSocket a text
    /// message is one too); a transport error is [`ClientError::Receive`],
    /// after which calls return [`ClientError::Closed`] (WebSocket) or
    /// `Ok(None)` (QUIC).
    pub async fn recv(&mut self) -> ClientResult<Option<Envelope>> {
        if let Some(envelope) = self.pending.pop_front() {
            return Ok(Some(envelope));
        }
        self.link.read_envelope().await
    }

    /// [`Client::recv`], decoded with [`ClientEvent::from_envelope`].
    pub async fn recv_event(&mut self) -> ClientResult<Option<ClientEvent>> {
        Ok(self.recv().await?.map(ClientEvent::from_envelope))
    }

    /// Calls the server RPC `method` with `payload` and waits for its reply.
    ///
    /// Uses a monotonic request id starting at 1, sends KIND_RPC_REQUEST and
    /// waits for the KIND_RPC_RESPONSE with the same id. Envelopes that
    /// arrive meanwhile (including stale responses with other ids) are kept,
    /// in order, for later [`Client::recv`], never dropped. Returns the
    /// reply bytes on `RPC_STATUS_OK`, [`ClientError::Rpc`] with the server's
    /// message on any other status, [`ClientError::Closed`] if the connection
    /// closes first, and [`ClientError::Config`] for a method longer than
    /// 65 535 bytes. No timeout: wrap the call in `tokio::time::timeout` (a
    /// reply that arrives after a cancelled call is returned by `recv`).
    pub async fn call_rpc(&mut self, method: &str, payload: &[u8]) -> ClientResult<Bytes> {
        if method.len() > usize::from(u16::MAX) {
            return Err(ClientError::Config(format!(
                "rpc method of {} bytes exceeds 65535",
                method.len()
            )));
        }
        let request_id = self.next_id();
        let request = RpcRequest {
            request_id,
            method: method.to_owned(),
            payload: Bytes::copy_from_slice(payload),
        };
        self.send(&request.to_envelope()).await?;
        let reply = self
            .wait_matching(|env| {
                env.kind == KIND_RPC_RESPONSE && rpc_response_id(&env.body) == Some(request_id)
            })
            .await?;
        let response = RpcResponse::decode(&reply.body)
            .map_err(|e| ClientError::Decode(format!("kind-4 rpc response: {e}")))?;
        if response.is_ok() {
            Ok(response.payload)
        } else {
            Err(ClientError::Rpc {
                request_id,
                message: response.error_message().unwrap_or_default(),
            })
        }
    }

    /// Creates the room named `name` or joins its existing instance (kind 21
    /// with the UTF-8 name as params). The admission arrives as kind 23: see
    /// [`Client::wait_for_room_joined`]. A name over 65 535 bytes is
    /// [`ClientError::Config`].
    pub async fn join_or_create_room(&mut self, name: &str) -> ClientResult<()> {
        if name.len() > usize::from(u16::MAX) {
            return Err(ClientError::Config(format!(
                "room name of {} bytes exceeds 65535",
                name.len()
            )));
        }
        let create = RoomCreate {
            params: name.as_bytes().to_vec(),
        };
        self.send(&create.to_envelope()).await
    }

    /// Joins a known room by id (kind 22). Success arrives as kind 23; a
    /// refusal produces no reply.
    pub async fn join_room(&mut self, room_id: u64) -> ClientResult<()> {
        self.send(&RoomJoin { room_id }.to_envelope()).await
    }

    /// Leaves the room (kind 24).
    pub async fn leave_room(&mut self, room_id: u64) -> ClientResult<()> {
        self.send(&RoomLeave { room_id }.to_envelope()).await
    }

    /// Acknowledges that the map named by kind 23 is loaded (kind 25).
    pub async fn send_map_ready(&mut self, room_id: u64) -> ClientResult<()> {
        self.send(&RoomMapReady { room_id }.to_envelope()).await
    }

    /// Reports the local position reliably (kind 1, canonical body: `x`,
    /// `y` as little-endian `f32`). The server relays it to room peers as
    /// kind 2.
    pub async fn send_position(&mut self, x: f32, y: f32) -> ClientResult<()> {
        self.send(&position(x, y)).await
    }

    /// Waits for the next KIND_ROOM_JOINED, buffering everything else for
    /// [`Client::recv`].
    ///
    /// Same rules as [`Client::wait_for_kind`]; a kind-23 body that does
    /// not decode is [`ClientError::Decode`].
    pub async fn wait_for_room_joined(&mut self) -> ClientResult<RoomJoined> {
        let envelope = self.wait_for_kind(KIND_ROOM_JOINED).await?;
        RoomJoined::decode(&envelope.body)
            .map_err(|e| ClientError::Decode(format!("kind-23 room joined: {e}")))
    }

    /// Generic: waits for the next envelope of `kind`, buffering everything else.
    ///
    /// The pending queue is searched first (an envelope of `kind` buffered
    /// by an earlier helper is the next one in arrival order), then the
    /// wire. Other envelopes stay queued, in order, for [`Client::recv`].
    /// [`ClientError::Closed`] if the connection closes first;
    /// `Receive("client buffer full")` past [`MAX_BUFFERED_ENVELOPES`]. No
    /// timeout.
    pub async fn wait_for_kind(&mut self, kind: u16) -> ClientResult<Envelope> {
        if let Some(index) = self.pending.iter().position(|env| env.kind == kind)
            && let Some(envelope) = self.pending.remove(index)
        {
            return Ok(envelope);
        }
        self.wait_matching(|env| env.kind == kind).await
    }

    /// Closes the connection gracefully; idempotent.
    ///
    /// WebSocket: sends a normal (1000) close frame, then reads until the
    /// server's close reply or [`crate::CLOSE_HANDSHAKE_TIMEOUT`]; binary
    /// data that arrives meanwhile is kept, so [`Client::recv`] still
    /// returns it before `Ok(None)`. If writing the close frame fails the
    /// error is returned, but the client is closed anyway. QUIC: finishes
    /// the reliable stream, waits (bounded) for it to be acknowledged, then
    /// closes with code 1000.
    pub async fn close(&mut self) -> ClientResult<()> {
        self.link.close().await
    }

    /// The server's close code and reason, once the server closed the
    /// connection (None otherwise; the reply to our own [`Client::close`]
    /// is not reported). WebSocket: a close frame without a status reports
    /// code 1005 and an empty reason. QUIC: the application close code,
    /// the same numbers as the WebSocket close codes.
    pub fn close_reason(&self) -> Option<(u16, String)> {
        self.link.close_reason()
    }

    /// A monotonic, non-zero request id.
    fn next_id(&mut self) -> u64 {
        let id = self.next_request_id;
        self.next_request_id = self.next_request_id.wrapping_add(1).max(1);
        id
    }

    /// Reads until an envelope satisfies `matches`, queueing the others.
    async fn wait_matching(
        &mut self,
        mut matches: impl FnMut(&Envelope) -> bool + Send,
    ) -> ClientResult<Envelope> {
        loop {
            if self.pending.len() >= MAX_BUFFERED_ENVELOPES {
                return Err(ClientError::Receive("client buffer full".into()));
            }
            match self.link.read_envelope().await? {
                Some(envelope) if matches(&envelope) => return Ok(envelope),
                Some(envelope) => self.pending.push_back(envelope),
                None => return Err(ClientError::Closed),
            }
        }
    }
}

/// Kind 1 with the canonical `x`, `y` little-endian `f32` body.
pub(crate) fn position(x: f32, y: f32) -> Envelope {
    Envelope::new(
        KIND_POSITION,
        Bytes::copy_from_slice(&encode_position(x, y)),
    )
}

/// The next complete envelope `decoder` holds; a framing error (sticky) is
/// [`ClientError::Decode`].
pub(crate) fn next_buffered(decoder: &mut FrameDecoder) -> ClientResult<Option<Envelope>> {
    decoder
        .poll_envelope()
        .map_err(|e| ClientError::Decode(e.to_string()))
}

/// The error for input that ended (`what`) inside a frame; forgets the
/// partial frame, so the next read starts clean.
pub(crate) fn ended_inside_frame(decoder: &mut FrameDecoder, what: &str) -> ClientError {
    let left = decoder.buffered();
    decoder.reset();
    ClientError::Decode(format!("{what} inside a frame ({left} bytes left)"))
}

/// Refuses an envelope whose frame would exceed [`MAX_FRAME_BODY_BYTES`].
pub(crate) fn check_fits(envelope: &Envelope) -> ClientResult<()> {
    if envelope.fits_frame() {
        Ok(())
    } else {
        Err(ClientError::Config(format!(
            "kind {} body of {} bytes exceeds the {MAX_FRAME_BODY_BYTES}-byte frame limit",
            envelope.kind,
            envelope.body.len()
        )))
    }
}

/// The request id of a well-formed kind-4 body (at least the 9-byte header).
fn rpc_response_id(body: &[u8]) -> Option<u64> {
    if body.len() < 9 {
        return None;
    }
    body.first_chunk::<8>().map(|id| u64::from_be_bytes(*id))
}
