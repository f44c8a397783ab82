//! [`TestClient`]: the integration tests' one client surface over
//! `WsClient` and `QuicClient`, and [`both_transports!`], which turns one
//! `async fn body(t: Transport)` into a test per transport.
//!
//! What it is not: an SDK; it only forwards. `send_batch` writes several
//! frames in one WebSocket message or one QUIC stream write.

use bytes::{Bytes, BytesMut};
use citadel_client::wire::room::RoomJoined;
use citadel_client::{AuthOutcome, ClientResult, Envelope, QuicClient, ServerTrust, WsClient};
use citadel_server::RunningNode;

/// Which transport a test body runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// WebSocket.
    Ws,
    /// Native QUIC.
    Quic,
}

/// Runs each named `async fn(Transport)` as `ws::name` and `quic::name`.
#[macro_export]
macro_rules! both_transports {
    ($($(#[$attr:meta])* $name:ident),* $(,)?) => {
        mod ws {
            $( $(#[$attr])* #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name($crate::common::Transport::Ws).await } )*
        }
        mod quic {
            $( $(#[$attr])* #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name($crate::common::Transport::Quic).await } )*
        }
    };
}

/// A WebSocket or QUIC client with the common surface.
#[derive(Debug)]
pub enum TestClient {
    /// Over WebSocket.
    Ws(WsClient),
    /// Over QUIC.
    Quic(QuicClient),
}

macro_rules! forward {
    ($self:ident, $c:ident => $e:expr) => {
        match $self {
            TestClient::Ws($c) => $e,
            TestClient::Quic($c) => $e,
        }
    };
}

/// The certificate the node presents, pinned.
pub fn node_trust(node: &RunningNode) -> ServerTrust {
    let tls = node.shared().tls().expect("tls enabled");
    ServerTrust::Pinned(tls.chain.clone())
}

impl TestClient {
    /// Connects without sending anything.
    pub async fn connect(node: &RunningNode, t: Transport) -> ClientResult<Self> {
        Ok(match t {
            Transport::Ws => TestClient::Ws(WsClient::connect(&node.ws_url().expect("ws")).await?),
            Transport::Quic => TestClient::Quic(
                QuicClient::connect(&node.quic_url().expect("quic"), node_trust(node)).await?,
            ),
        })
    }

    pub async fn authenticate(&mut self, token: Option<&str>) -> ClientResult<AuthOutcome> {
        forward!(self, c => c.authenticate(token).await)
    }
    pub async fn send(&mut self, envelope: &Envelope) -> ClientResult<()> {
        forward!(self, c => c.send(envelope).await)
    }
    /// Several frames in one message / one stream write.
    pub async fn send_batch(&mut self, envelopes: &[Envelope]) -> ClientResult<()> {
        match self {
            TestClient::Ws(c) => c.send_batch(envelopes).await,
            TestClient::Quic(c) => {
                let mut out = BytesMut::new();
                for e in envelopes {
                    e.encode_framed_into(&mut out);
                }
                c.send_raw_stream(&out).await
            }
        }
    }
    /// Raw bytes on the reliable path (a binary message / the stream).
    pub async fn send_raw(&mut self, bytes: Vec<u8>) -> ClientResult<()> {
        match self {
            TestClient::Ws(c) => {
                c.send_ws_message(tokio_tungstenite::tungstenite::Message::Binary(
                    bytes.into(),
                ))
                .await
            }
            TestClient::Quic(c) => c.send_raw_stream(&bytes).await,
        }
    }
    pub async fn send_position(&mut self, x: f32, y: f32) -> ClientResult<()> {
        forward!(self, c => c.send_position(x, y).await)
    }
    pub async fn call_rpc(&mut self, method: &str, payload: &[u8]) -> ClientResult<Bytes> {
        forward!(self, c => c.call_rpc(method, payload).await)
    }
    pub async fn recv(&mut self) -> ClientResult<Option<Envelope>> {
        forward!(self, c => c.recv().await)
    }
    pub async fn wait_for_kind(&mut self, kind: u16) -> ClientResult<Envelope> {
        forward!(self, c => c.wait_for_kind(kind).await)
    }
    pub async fn join_or_create_room(&mut self, name: &str) -> ClientResult<()> {
        forward!(self, c => c.join_or_create_room(name).await)
    }
    pub async fn join_room(&mut self, room_id: u64) -> ClientResult<()> {
        forward!(self, c => c.join_room(room_id).await)
    }
    pub async fn leave_room(&mut self, room_id: u64) -> ClientResult<()> {
        forward!(self, c => c.leave_room(room_id).await)
    }
    pub async fn send_map_ready(&mut self, room_id: u64) -> ClientResult<()> {
        forward!(self, c => c.send_map_ready(room_id).await)
    }
    pub async fn wait_for_room_joined(&mut self) -> ClientResult<RoomJoined> {
        forward!(self, c => c.wait_for_room_joined().await)
    }
    pub async fn close(&mut self) -> ClientResult<()> {
        forward!(self, c => c.close().await)
    }
    pub fn close_reason(&self) -> Option<(u16, String)> {
        forward!(self, c => c.close_reason())
    }
    /// The QUIC client (panics on WebSocket: test helper).
    pub fn quic(&mut self) -> &mut QuicClient {
        match self {
            TestClient::Quic(c) => c,
            TestClient::Ws(_) => panic!("not a QUIC client"),
        }
    }
}

/// What [`crate::common::closed`] needs: any client of any transport.
#[allow(async_fn_in_trait)]
pub trait AnyClient {
    /// The next envelope (`Ok(None)` once closed).
    async fn next_envelope(&mut self) -> ClientResult<Option<Envelope>>;
    /// The server's close code and reason.
    fn server_close(&self) -> Option<(u16, String)>;
}

impl AnyClient for TestClient {
    async fn next_envelope(&mut self) -> ClientResult<Option<Envelope>> {
        self.recv().await
    }
    fn server_close(&self) -> Option<(u16, String)> {
        self.close_reason()
    }
}

impl AnyClient for WsClient {
    async fn next_envelope(&mut self) -> ClientResult<Option<Envelope>> {
        self.recv().await
    }
    fn server_close(&self) -> Option<(u16, String)> {
        self.close_reason()
    }
}

impl AnyClient for QuicClient {
    async fn next_envelope(&mut self) -> ClientResult<Option<Envelope>> {
        self.recv().await
    }
    fn server_close(&self) -> Option<(u16, String)> {
        self.close_reason()
    }
}
