//! WebSocket transport: binary messages carry framed envelopes.
//!
//! Per accepted socket: a reader (this task) reassembles frames that span
//! messages and splits messages holding several frames, feeding each
//! envelope to the [`Connection`]; a writer task drains the connection's
//! [`Outbound`] and coalesces a batch of frames into one binary message.
//! Text messages and framing errors close the connection with a reason.
//! What it is not: it routes nothing itself.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::BytesMut;
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};

use crate::conn_limits::{AcceptBackoff, AddressPermit};
use crate::gateway::connection::{Connection, Flow};
use crate::gateway::outbound::{LaneLimits, Outbound};
use crate::metrics::{CloseReason, RefuseReason};
use crate::node::NodeShared;
use crate::transport::slot::OpenConnection;

type Sink = SplitSink<WebSocketStream<TcpStream>, Message>;
type Stream = SplitStream<WebSocketStream<TcpStream>>;

/// How long a closing connection waits for the peer's close reply.
const CLOSE_LINGER: Duration = Duration::from_secs(1);

/// Accepts WebSocket connections until shutdown. A source address past
/// `transport.limits.max_connections_per_ip` is closed at once (counted);
/// a failed accept pauses the loop ([`AcceptBackoff`]).
pub async fn serve(listener: TcpListener, shared: Arc<NodeShared>) {
    let mut backoff = AcceptBackoff::default();
    loop {
        let accepted = tokio::select! {
            _ = shared.shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, peer)) => {
                backoff.succeeded();
                let Some(address) = shared.realtime_per_address.try_acquire(peer.ip()) else {
                    shared.metrics.refused(RefuseReason::RealtimePerAddress);
                    tracing::debug!(%peer, "websocket connection refused: max_connections_per_ip");
                    continue;
                };
                let _ = stream.set_nodelay(true);
                shared
                    .tasks
                    .spawn(handle_socket(stream, peer, shared.clone(), address));
            }
            Err(err) => {
                let pause = backoff.failed(&err, &shared.metrics, "websocket");
                tokio::select! {
                    _ = shared.shutdown.cancelled() => break,
                    _ = tokio::time::sleep(pause) => {}
                }
            }
        }
    }
}

/// Per-connection WebSocket read buffer (tungstenite's default is 128 KiB).
const WS_READ_BUFFER_BYTES: usize = 4 * 1024;

fn close_message(reason: CloseReason) -> Message {
    let (code, text) = reason.websocket_close();
    Message::Close(Some(CloseFrame {
        code: CloseCode::from(code),
        reason: text.into(),
    }))
}

async fn handle_socket(
    stream: TcpStream,
    peer: SocketAddr,
    shared: Arc<NodeShared>,
    _address: AddressPermit,
) {
    let max_message = shared.config.transport.websocket.max_message_bytes;
    // tungstenite zero-fills its whole read buffer before each read, so the
    // 128 KiB default costs 128 KiB of RSS per idle connection (measured by
    // citadel-load idle-capacity); frames larger than the buffer still
    // arrive (the buffer grows to the frame), only idle memory shrinks.
    let ws_config = WebSocketConfig::default()
        .read_buffer_size(WS_READ_BUFFER_BYTES)
        .max_message_size(Some(max_message))
        .max_frame_size(Some(max_message));
    let handshake_timeout =
        Duration::from_millis(shared.config.transport.auth.handshake_timeout_ms);
    let upgraded = tokio::time::timeout(
        handshake_timeout,
        tokio_tungstenite::accept_async_with_config(stream, Some(ws_config)),
    )
    .await;
    let mut ws = match upgraded {
        Ok(Ok(ws)) => ws,
        Ok(Err(err)) => {
            tracing::debug!(%peer, error = %err, "websocket upgrade failed");
            return;
        }
        Err(_) => {
            tracing::debug!(%peer, "websocket upgrade timed out");
            return;
        }
    };
    let Some(open) = OpenConnection::try_open(&shared) else {
        let _ = tokio::time::timeout(
            Duration::from_secs(1),
            ws.send(close_message(CloseReason::ServerFull)),
        )
        .await;
        return;
    };
    let ws_cfg = &shared.config.transport.websocket;
    let outbound = Outbound::new(
        LaneLimits {
            reliable_capacity: ws_cfg.outbound_queue_capacity,
            unreliable_capacity: ws_cfg.unreliable_queue_capacity,
            max_bytes: ws_cfg.outbound_queue_max_bytes,
        },
        shared.metrics.clone(),
    );
    let (sink, mut stream) = ws.split();
    let writer = tokio::spawn(run_writer(sink, outbound.clone(), shared.clone()));
    let mut connection = Connection::new(shared.gateway.clone(), outbound.clone());
    let reason = run_reader(&mut stream, &mut connection, &outbound, &shared).await;
    connection.handle_disconnect();
    outbound.close(reason);
    // The writer flushes what is queued and sends the close frame (bounded
    // by the abort token, which the grace handling or a slow client trips).
    let _ = writer.await;
    // Keep reading until the peer answers the close (or a short linger
    // ends): dropping a socket with unread input turns the close into a
    // reset, and the peer would lose the close frame and anything before it.
    let _ = tokio::time::timeout(CLOSE_LINGER, async {
        while let Some(Ok(message)) = stream.next().await {
            if matches!(message, Message::Close(_)) {
                break;
            }
        }
    })
    .await;
    tracing::debug!(%peer, "websocket connection ends");
    open.finish(outbound.close_reason().unwrap_or(reason));
}

/// Reads until the client leaves or the connection must close; returns why.
async fn run_reader(
    stream: &mut Stream,
    connection: &mut Connection,
    outbound: &Outbound,
    shared: &Arc<NodeShared>,
) -> CloseReason {
    let ws_cfg = &shared.config.transport.websocket;
    let max_frame = shared.config.transport.limits.max_inbound_frame_bytes;
    let handshake_deadline =
        Instant::now() + Duration::from_millis(shared.config.transport.auth.handshake_timeout_ms);
    let idle_timeout = (ws_cfg.heartbeat_timeout_ms > 0)
        .then(|| Duration::from_millis(ws_cfg.heartbeat_timeout_ms));
    let grace = Duration::from_millis(shared.config.shutdown.grace_ms);
    let aborted = outbound.aborted();
    let mut buf = BytesMut::new();
    let mut last_heard = Instant::now();
    let mut shutdown_deadline: Option<Instant> = None;
    loop {
        let idle_deadline = match (connection.is_live(), idle_timeout) {
            (false, _) => handshake_deadline,
            (true, Some(t)) => last_heard + t,
            (true, None) => Instant::now() + Duration::from_secs(86_400),
        };
        let message = tokio::select! {
            _ = aborted.cancelled() => return outbound.close_reason().unwrap_or(CloseReason::TransportError),
            _ = shared.shutdown.cancelled(), if shutdown_deadline.is_none() => {
                outbound.close(CloseReason::Shutdown);
                shutdown_deadline = Some(Instant::now() + grace);
                continue;
            }
            _ = tokio::time::sleep_until(shutdown_deadline.unwrap_or(idle_deadline)), if shutdown_deadline.is_some() => {
                outbound.abort(CloseReason::Shutdown);
                return CloseReason::Shutdown;
            }
            _ = tokio::time::sleep_until(idle_deadline), if shutdown_deadline.is_none() => {
                return if connection.is_live() { CloseReason::HeartbeatTimeout } else { CloseReason::HandshakeTimeout };
            }
            message = stream.next() => message,
        };
        last_heard = Instant::now();
        let data = match message {
            None | Some(Ok(Message::Close(_))) => return CloseReason::ClientClosed,
            Some(Err(err)) => {
                tracing::debug!(error = %err, "websocket read failed");
                return match err {
                    tokio_tungstenite::tungstenite::Error::Capacity(_)
                    | tokio_tungstenite::tungstenite::Error::Protocol(_) => {
                        CloseReason::FramingError
                    }
                    _ => CloseReason::TransportError,
                };
            }
            Some(Ok(Message::Text(_))) => return CloseReason::TextMessage,
            Some(Ok(Message::Binary(data))) => data,
            Some(Ok(_)) => continue, // ping, pong, raw frames
        };
        if shutdown_deadline.is_some() {
            continue; // draining: new input is not processed
        }
        shared
            .metrics
            .bytes_in
            .fetch_add(data.len() as u64, Ordering::Relaxed);
        buf.extend_from_slice(&data);
        loop {
            match citadel_wire::peek_frame_len(&buf) {
                Err(_) => return CloseReason::FramingError,
                Ok(Some(len)) if len > max_frame => return CloseReason::FramingError,
                _ => {}
            }
            let envelope = match citadel_wire::decode_framed(&mut buf) {
                Ok(Some(envelope)) => envelope,
                Ok(None) => break,
                Err(_) => return CloseReason::FramingError,
            };
            if let Flow::Close(reason) = connection.handle_envelope(envelope).await {
                return reason;
            }
        }
    }
}

/// Drains the lanes into the socket, coalescing frames, pinging when idle.
async fn run_writer(mut sink: Sink, outbound: Outbound, shared: Arc<NodeShared>) {
    let ws_cfg = &shared.config.transport.websocket;
    let max_batch = ws_cfg.max_coalesced_bytes;
    let ping_every = (ws_cfg.heartbeat_interval_ms > 0)
        .then(|| Duration::from_millis(ws_cfg.heartbeat_interval_ms));
    let aborted = outbound.aborted();
    let mut next_ping = ping_every.map(|p| Instant::now() + p);
    loop {
        let batch = tokio::select! {
            _ = aborted.cancelled() => break,
            _ = tokio::time::sleep_until(next_ping.unwrap_or_else(Instant::now)), if next_ping.is_some() => {
                next_ping = ping_every.map(|p| Instant::now() + p);
                if send_or_abort(&mut sink, Message::Ping(Default::default()), &outbound).await.is_err() {
                    break;
                }
                continue;
            }
            batch = outbound.next_batch(max_batch) => batch,
        };
        if batch.count > 0 {
            let len = batch.frames.len() as u64;
            if send_or_abort(&mut sink, Message::Binary(batch.frames), &outbound)
                .await
                .is_err()
            {
                break;
            }
            shared
                .metrics
                .envelopes_out
                .fetch_add(batch.count as u64, Ordering::Relaxed);
            shared.metrics.bytes_out.fetch_add(len, Ordering::Relaxed);
        }
        if let Some(reason) = batch.close {
            let _ = tokio::time::timeout(Duration::from_secs(1), sink.send(close_message(reason)))
                .await;
            break;
        }
    }
    // Tell the reader the connection is over.
    aborted.cancel();
}

async fn send_or_abort(sink: &mut Sink, message: Message, outbound: &Outbound) -> Result<(), ()> {
    let aborted = outbound.aborted();
    tokio::select! {
        _ = aborted.cancelled() => Err(()),
        result = sink.send(message) => result.map_err(|_| ()),
    }
}
