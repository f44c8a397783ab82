//! [`WsClient`]: one Citadel realtime connection over WebSocket (reliable,
//! ordered), carrying length-prefixed envelope frames in binary messages.
//!
//! What it is: [`WsLink`], the WebSocket transport under the shared
//! [`Client`] core (handshake, RPC correlation, room helpers, raw
//! `send`/`recv`: one body for every transport, in `link.rs`), plus what
//! only a WebSocket does (`send_batch`, `send_ws_message`). Inbound bytes
//! go through citadel-wire's `FrameDecoder`, so one binary message may
//! carry several frames and one frame may span several messages.
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
use citadel_wire::protocol::MAX_FRAME_BODY_BYTES;
use citadel_wire::{Envelope, FrameDecoder};
use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream, connect_async_with_config};

use crate::error::{ClientError, ClientResult};
use crate::event::AuthOutcome;
use crate::link::{Client, check_fits, ended_inside_frame, next_buffered, sealed};

/// How long [`WsClient::close`] waits for the server's close reply before it
/// gives up and treats the connection as closed.
pub const CLOSE_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// Close code reported by [`WsClient::close_reason`] when the server's close
/// frame carried no status (RFC 6455 "no status received").
const CLOSE_CODE_NO_STATUS: u16 = 1005;

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// A Citadel realtime connection over WebSocket: the shared [`Client`]
/// core over [`WsLink`]. See the module documentation for the call order;
/// one owner drives it through `&mut self`.
pub type WsClient = Client<WsLink>;

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

/// The WebSocket transport of a [`WsClient`]: the socket, frame
/// reassembly and the close handshake.
pub struct WsLink {
    socket: Socket,
    /// Inbound bytes not yet decoded into envelopes (frame reassembly).
    inbound: FrameDecoder,
    state: State,
    close_reason: Option<(u16, String)>,
}

impl fmt::Debug for WsLink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WsLink")
            .field("state", &self.state)
            .field("inbound_bytes", &self.inbound.buffered())
            .field("close_reason", &self.close_reason)
            .finish_non_exhaustive()
    }
}

impl Client<WsLink> {
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
        Client::over(WsLink {
            socket,
            inbound: FrameDecoder::new(MAX_FRAME_BODY_BYTES),
            state: State::Open,
            close_reason: None,
        })
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
        self.link.send_message(Message::Binary(out.freeze())).await
    }

    /// Sends a raw WebSocket message as is (escape hatch for tests: text
    /// frames, garbage bytes, hand-made frames). Sending a close message
    /// puts the client in the closing state, like [`WsClient::close`]
    /// without the wait.
    pub async fn send_ws_message(&mut self, msg: Message) -> ClientResult<()> {
        self.link.send_message(msg).await
    }
}

impl WsLink {
    async fn send_message(&mut self, msg: Message) -> ClientResult<()> {
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

    /// Next envelope from the reassembly buffer, reading the socket as
    /// needed. `Ok(None)` once closed. WebSocket pings are answered while
    /// reading.
    async fn read_wire(&mut self) -> ClientResult<Option<Envelope>> {
        loop {
            if let Some(envelope) = next_buffered(&mut self.inbound)? {
                return Ok(Some(envelope));
            }
            match self.state {
                State::Open | State::CloseSent => {}
                State::Closed if self.inbound.buffered() == 0 => return Ok(None),
                State::Closed => {
                    return Err(ended_inside_frame(&mut self.inbound, "connection closed"));
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
            Message::Binary(data) => self.inbound.handle_bytes(&data),
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

impl sealed::Wire for WsLink {
    async fn send_frames(&mut self, frames: Bytes) -> ClientResult<()> {
        self.send_message(Message::Binary(frames)).await
    }

    async fn read_envelope(&mut self) -> ClientResult<Option<Envelope>> {
        self.read_wire().await
    }

    async fn close(&mut self) -> ClientResult<()> {
        if self.state != State::Open {
            return Ok(());
        }
        let frame = CloseFrame {
            code: CloseCode::Normal,
            reason: "".into(),
        };
        // Even if writing the close frame failed, read what is left so data
        // already received is still handed out by `recv`.
        let sent = self.send_message(Message::Close(Some(frame))).await;
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

    fn close_reason(&self) -> Option<(u16, String)> {
        self.close_reason.clone()
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
            let MaybeTlsStream::Plain(tcp) = client.link.socket.get_ref() else {
                return Err("expected a plain TCP stream".into());
            };
            assert!(tcp.nodelay()?, "TCP_NODELAY is off");
        }
        server.await??;
        Ok(())
    }
}
