//! [`WsClient`]: one Citadel realtime connection over WebSocket (reliable,
//! ordered), carrying length-prefixed envelope frames in binary messages.
//!
//! What it is: a single-owner (`&mut self`) connection with the handshake,
//! RPC correlation and room helpers, plus raw `send`/`recv` for everything
//! else. Inbound bytes go through a reassembly buffer, so one binary message
//! may carry several frames and one frame may span several messages.
//! Envelopes that arrive while a helper waits for a specific reply are kept
//! in a pending queue and handed out by [`WsClient::recv`] later, in arrival
//! order; nothing is dropped.
//!
//! What it is not: it has no background task, no reconnect, no timeouts on
//! replies (wrap calls in `tokio::time::timeout`), no token storage, and it
//! does not support `wss://` (the TLS features of `tokio-tungstenite` are not
//! enabled). It never logs tokens or URLs.
//!
//! Call order: [`WsClient::connect`] → [`WsClient::authenticate`] (first
//! frame; or use [`WsClient::connect_as_guest`] /
//! [`WsClient::connect_with_token`]) → room helpers / `send` / `call_rpc` /
//! `recv` in any order from the one owner → [`WsClient::close`].

use std::fmt;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use citadel_wire::room::{RoomJoin, RoomJoined, RoomLeave, RoomMapReady};
use citadel_wire::{Envelope, WireBody, decode_framed};
use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream, connect_async_with_config};

use crate::error::{ClientError, ClientResult};
use crate::event::{AuthOutcome, ClientEvent};
use crate::link::{self, Inbox, Link, check_fits};

/// How long [`WsClient::close`] waits for the server's close reply before it
/// gives up and treats the connection as closed.
pub const CLOSE_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// Close code reported by [`WsClient::close_reason`] when the server's close
/// frame carried no status (RFC 6455 "no status received").
const CLOSE_CODE_NO_STATUS: u16 = 1005;

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Both directions usable.
    Open,
    /// We sent a close frame; only reading the rest is possible.
    CloseSent,
    /// The close handshake finished or the stream ended cleanly.
    Closed,
    /// A transport error ended the connection.
    Broken,
}

/// A Citadel realtime connection over WebSocket. See the module
/// documentation for the call order; one owner drives it through `&mut self`.
pub struct WsClient {
    socket: Socket,
    /// Inbound bytes not yet decoded into envelopes (frame reassembly).
    inbound: BytesMut,
    /// Envelopes read while a helper waited, in arrival order.
    inbox: Inbox,
    state: State,
    close_reason: Option<(u16, String)>,
}

impl fmt::Debug for WsClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WsClient")
            .field("state", &self.state)
            .field("pending", &self.inbox.pending.len())
            .field("inbound_bytes", &self.inbound.len())
            .field("close_reason", &self.close_reason)
            .finish_non_exhaustive()
    }
}

impl WsClient {
    /// Opens a WebSocket to `url` (e.g. `ws://127.0.0.1:7352/`). No frame is
    /// sent; call [`WsClient::authenticate`] next. Nagle's algorithm is off
    /// (`TCP_NODELAY`): small realtime frames leave at once instead of
    /// waiting up to a delayed-ACK period (40 ms on Linux) behind the
    /// previous one.
    pub async fn connect(url: &str) -> ClientResult<Self> {
        let (socket, _response) = connect_async_with_config(url, None, true)
            .await
            .map_err(connect_error)?;
        Ok(Self::from_socket(socket))
    }

    /// Opens a WebSocket to `url` over an already connected TCP `stream`
    /// (for example one bound to a chosen local address, as load generators
    /// do to spread connections over several source addresses). No frame is
    /// sent; call [`WsClient::authenticate`] next. The stream's peer should
    /// be the host named by `url` (it is used for the `Host` header only).
    pub async fn connect_over(stream: TcpStream, url: &str) -> ClientResult<Self> {
        stream
            .set_nodelay(true)
            .map_err(|e| ClientError::Connect(format!("TCP_NODELAY: {e}")))?;
        let (socket, _response) =
            tokio_tungstenite::client_async(url, MaybeTlsStream::Plain(stream))
                .await
                .map_err(connect_error)?;
        Ok(Self::from_socket(socket))
    }

    fn from_socket(socket: Socket) -> Self {
        tracing::debug!("citadel websocket connected");
        WsClient {
            socket,
            inbound: BytesMut::new(),
            inbox: Inbox::default(),
            state: State::Open,
            close_reason: None,
        }
    }

    /// Connects, then handshakes with an empty token (guest request). A
    /// rejection is returned as [`AuthOutcome::Rejected`], not as an error.
    pub async fn connect_as_guest(url: &str) -> ClientResult<(Self, AuthOutcome)> {
        let mut client = Self::connect(url).await?;
        let outcome = client.authenticate(None).await?;
        Ok((client, outcome))
    }

    /// Connects, then handshakes with the session access `token`. A
    /// rejection is returned as [`AuthOutcome::Rejected`], not as an error.
    pub async fn connect_with_token(url: &str, token: &str) -> ClientResult<(Self, AuthOutcome)> {
        let mut client = Self::connect(url).await?;
        let outcome = client.authenticate(Some(token)).await?;
        Ok((client, outcome))
    }

    /// Sends KIND_AUTH (empty body for None) as the first frame and waits for KIND_AUTH_RESULT.
    ///
    /// Must be the first frame of the connection (the server processes
    /// nothing before it). Envelopes other than kind 6 that arrive meanwhile
    /// are kept for [`WsClient::recv`]. A kind-6 body that does not decode is
    /// [`ClientError::Decode`]; a close before the result is
    /// [`ClientError::Closed`]. The token is neither stored nor logged.
    pub async fn authenticate(&mut self, token: Option<&str>) -> ClientResult<AuthOutcome> {
        link::authenticate(self, token).await
    }

    /// Sends one framed envelope as one binary message.
    ///
    /// A body too large for a frame ([`citadel_wire::protocol::MAX_FRAME_BODY_BYTES`]) is refused
    /// with [`ClientError::Config`] before anything is written; after a close
    /// the result is [`ClientError::Closed`].
    pub async fn send(&mut self, envelope: &Envelope) -> ClientResult<()> {
        check_fits(envelope)?;
        self.send_ws_message(Message::Binary(envelope.encode_framed()))
            .await
    }

    /// Sends several framed envelopes coalesced into ONE binary message, in
    /// slice order. An empty slice sends nothing. Every envelope is checked
    /// as in [`WsClient::send`] before anything is written.
    pub async fn send_batch(&mut self, envelopes: &[Envelope]) -> ClientResult<()> {
        if envelopes.is_empty() {
            return Ok(());
        }
        let mut out = BytesMut::with_capacity(envelopes.iter().map(Envelope::framed_len).sum());
        for envelope in envelopes {
            check_fits(envelope)?;
            envelope.encode_framed_into(&mut out);
        }
        self.send_ws_message(Message::Binary(out.freeze())).await
    }

    /// Sends a raw WebSocket message as is (escape hatch for tests: text
    /// frames, garbage bytes, hand-made frames). Sending a close message
    /// puts the client in the closing state, like [`WsClient::close`]
    /// without the wait.
    pub async fn send_ws_message(&mut self, msg: Message) -> ClientResult<()> {
        if self.state != State::Open {
            return Err(ClientError::Closed);
        }
        let is_close = matches!(msg, Message::Close(_));
        let result = self.socket.send(msg).await;
        if is_close {
            self.state = State::CloseSent;
        }
        match result {
            Ok(()) => Ok(()),
            Err(tungstenite::Error::ConnectionClosed | tungstenite::Error::AlreadyClosed) => {
                Err(ClientError::Closed)
            }
            // The state is left as is: the next receive reports how the
            // connection ended (e.g. the server's close frame).
            Err(e) => Err(ClientError::Send(e.to_string())),
        }
    }

    /// Next envelope: first any envelopes buffered while call_rpc/wait_* waited, then the socket.
    ///
    /// A binary message may hold several frames and a frame may span
    /// messages; both are reassembled. Returns `Ok(None)` once the
    /// connection closed cleanly (after every complete frame received before
    /// the close was returned). WebSocket pings are answered while reading.
    /// Errors: a framing error or a text message is [`ClientError::Decode`]
    /// (framing errors repeat on every later call: the stream cannot be
    /// resynchronised); a transport error is [`ClientError::Receive`], after
    /// which calls return [`ClientError::Closed`].
    pub async fn recv(&mut self) -> ClientResult<Option<Envelope>> {
        link::recv(self).await
    }

    /// [`WsClient::recv`], decoded with [`ClientEvent::from_envelope`].
    pub async fn recv_event(&mut self) -> ClientResult<Option<ClientEvent>> {
        Ok(self.recv().await?.map(ClientEvent::from_envelope))
    }

    /// Calls the server RPC `method` with `payload` and waits for its reply.
    ///
    /// Uses a monotonic request id starting at 1, sends KIND_RPC_REQUEST and
    /// waits for the KIND_RPC_RESPONSE with the same id. Envelopes that
    /// arrive meanwhile (including stale responses with other ids) are kept,
    /// in order, for later [`WsClient::recv`], never dropped. Returns the
    /// reply bytes on `RPC_STATUS_OK`, [`ClientError::Rpc`] with the server's
    /// message on any other status, [`ClientError::Closed`] if the connection
    /// closes first, and [`ClientError::Config`] for a method longer than
    /// 65 535 bytes. No timeout: wrap the call in `tokio::time::timeout` (a
    /// reply that arrives after a cancelled call is returned by `recv`).
    pub async fn call_rpc(&mut self, method: &str, payload: &[u8]) -> ClientResult<Bytes> {
        link::call_rpc(self, method, payload).await
    }

    /// Creates the room named `name` or joins its existing instance (kind 21
    /// with the UTF-8 name as params). The admission arrives as kind 23: see
    /// [`WsClient::wait_for_room_joined`]. A name over 65 535 bytes is
    /// [`ClientError::Config`].
    pub async fn join_or_create_room(&mut self, name: &str) -> ClientResult<()> {
        let envelope = link::room_create(name)?;
        self.send(&envelope).await
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

    /// Reports the local position (kind 1, canonical body: `x`, `y` as
    /// little-endian `f32`). The server relays it to room peers as kind 2.
    pub async fn send_position(&mut self, x: f32, y: f32) -> ClientResult<()> {
        self.send(&link::position(x, y)).await
    }

    /// Waits for the next KIND_ROOM_JOINED, buffering everything else for recv().
    ///
    /// Same rules as [`WsClient::wait_for_kind`]; a kind-23 body that does
    /// not decode is [`ClientError::Decode`].
    pub async fn wait_for_room_joined(&mut self) -> ClientResult<RoomJoined> {
        link::wait_for_room_joined(self).await
    }

    /// Generic: waits for the next envelope of `kind`, buffering everything else.
    ///
    /// The pending queue is searched first (an envelope of `kind` buffered
    /// by an earlier helper is the next one in arrival order), then the
    /// socket. Other envelopes stay queued, in order, for
    /// [`WsClient::recv`]. [`ClientError::Closed`] if the connection closes
    /// first; `Receive("client buffer full")` past
    /// [`crate::MAX_BUFFERED_ENVELOPES`]. No timeout.
    pub async fn wait_for_kind(&mut self, kind: u16) -> ClientResult<Envelope> {
        link::wait_for_kind(self, kind).await
    }

    /// Closes the connection gracefully: sends a normal (1000) close frame,
    /// then reads until the server's close reply or
    /// [`CLOSE_HANDSHAKE_TIMEOUT`]. Binary data that arrives meanwhile is
    /// kept, so [`WsClient::recv`] still returns it before `Ok(None)`.
    /// Closing an already closed connection is a no-op. If writing the close
    /// frame fails the error is returned, but the client is closed anyway.
    pub async fn close(&mut self) -> ClientResult<()> {
        if self.state != State::Open {
            return Ok(());
        }
        let frame = CloseFrame {
            code: CloseCode::Normal,
            reason: "".into(),
        };
        // Even if writing the close frame failed, read what is left so data
        // already received is still handed out by `recv`.
        let sent = self.send_ws_message(Message::Close(Some(frame))).await;
        if tokio::time::timeout(CLOSE_HANDSHAKE_TIMEOUT, self.drain_until_closed())
            .await
            .is_err()
        {
            tracing::debug!("citadel websocket close reply timed out");
        }
        self.state = State::Closed;
        match sent {
            Ok(()) | Err(ClientError::Closed) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The close frame's code and reason if the server closed the connection (None otherwise).
    ///
    /// Set once a receive observed a server-initiated close; a close frame
    /// without a status reports code 1005 and an empty reason. The server's
    /// reply to our own [`WsClient::close`] is not reported.
    pub fn close_reason(&self) -> Option<(u16, String)> {
        self.close_reason.clone()
    }

    /// Next envelope from the reassembly buffer, reading the socket as
    /// needed (the pending queue is not consulted). `Ok(None)` once closed.
    async fn read_wire(&mut self) -> ClientResult<Option<Envelope>> {
        loop {
            if let Some(envelope) =
                decode_framed(&mut self.inbound).map_err(|e| ClientError::Decode(e.to_string()))?
            {
                return Ok(Some(envelope));
            }
            match self.state {
                State::Open | State::CloseSent => {}
                State::Closed if self.inbound.is_empty() => return Ok(None),
                State::Closed => {
                    let left = self.inbound.len();
                    self.inbound.clear();
                    return Err(ClientError::Decode(format!(
                        "connection closed inside a frame ({left} bytes left)"
                    )));
                }
                State::Broken => return Err(ClientError::Closed),
            }
            match self.socket.next().await {
                None => self.state = State::Closed,
                Some(Ok(msg)) => self.absorb(msg).await?,
                Some(Err(e)) => {
                    self.state = State::Broken;
                    return Err(ClientError::Receive(e.to_string()));
                }
            }
        }
    }

    /// Applies one inbound WebSocket message to the client state.
    async fn absorb(&mut self, msg: Message) -> ClientResult<()> {
        match msg {
            Message::Binary(data) => self.inbound.extend_from_slice(&data),
            Message::Text(text) => {
                return Err(ClientError::Decode(format!(
                    "unexpected text message of {} bytes (Citadel frames are binary)",
                    text.len()
                )));
            }
            Message::Ping(_) => {
                // tungstenite queued the pong; push it out now rather than on
                // the next read. A failure surfaces on the next read.
                if let Err(e) = self.socket.flush().await {
                    tracing::debug!(error = %e, "flushing pong failed");
                }
            }
            Message::Pong(_) | Message::Frame(_) => {}
            Message::Close(frame) => {
                if self.state == State::Open {
                    let reason = frame.map_or((CLOSE_CODE_NO_STATUS, String::new()), |f| {
                        (u16::from(f.code), f.reason.to_string())
                    });
                    tracing::debug!(code = reason.0, "citadel server closed the connection");
                    self.close_reason = Some(reason);
                }
                // Sends tungstenite's queued close reply; the peer may
                // already be gone, which is fine at this point.
                if let Err(e) = self.socket.flush().await {
                    tracing::debug!(error = %e, "flushing close reply failed");
                }
                self.state = State::Closed;
            }
        }
        Ok(())
    }

    /// After our close frame: keep reading (and keeping binary data) until
    /// the close reply or the end of the stream.
    async fn drain_until_closed(&mut self) {
        while self.state == State::CloseSent {
            match self.socket.next().await {
                Some(Ok(msg)) => {
                    if let Err(e) = self.absorb(msg).await {
                        tracing::debug!(error = %e, "ignored while closing");
                    }
                }
                None | Some(Err(_)) => self.state = State::Closed,
            }
        }
    }
}

impl Link for WsClient {
    fn inbox(&mut self) -> &mut Inbox {
        &mut self.inbox
    }

    async fn send_reliable(&mut self, envelope: &Envelope) -> ClientResult<()> {
        self.send(envelope).await
    }

    async fn read_envelope(&mut self) -> ClientResult<Option<Envelope>> {
        self.read_wire().await
    }
}

/// Maps a connect failure; the message never contains the URL.
fn connect_error(err: tungstenite::Error) -> ClientError {
    match err {
        tungstenite::Error::Url(e) => ClientError::Config(format!("invalid websocket url: {e}")),
        tungstenite::Error::Http(response) => ClientError::Connect(format!(
            "websocket upgrade refused with HTTP {}",
            response.status()
        )),
        other => ClientError::Connect(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    /// Both ways of connecting leave Nagle's algorithm off.
    #[tokio::test]
    async fn connections_set_tcp_nodelay() -> Result<(), Box<dyn std::error::Error>> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let server = tokio::spawn(async move {
            for _ in 0..2 {
                let (tcp, _) = listener.accept().await?;
                tokio::spawn(tokio_tungstenite::accept_async(tcp));
            }
            Ok::<_, std::io::Error>(())
        });
        let url = format!("ws://{addr}/");
        let direct = WsClient::connect(&url).await?;
        let stream = TcpStream::connect(addr).await?;
        let over = WsClient::connect_over(stream, &url).await?;
        for client in [&direct, &over] {
            let MaybeTlsStream::Plain(tcp) = client.socket.get_ref() else {
                return Err("expected a plain TCP stream".into());
            };
            assert!(tcp.nodelay()?, "TCP_NODELAY is off");
        }
        server.await??;
        Ok(())
    }
}
