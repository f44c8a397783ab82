//! WebSocket transport: binary messages carry framed envelopes.
//!
//! Per accepted socket: the shared reader core ([`super::link::drive`])
//! reads messages through [`WsSource`] (a frame may span messages and a
//! message may hold several frames) and feeds each envelope to the gateway's
//! connection; a writer task drains the connection's [`Outbound`] and
//! coalesces a batch of frames into one binary message (at most one write
//! per `flush_delay_us`: frames arriving sooner after a write wait for the
//! gap to end and share the next message), pinging when idle
//! (at least every 2 s while heartbeats are on); each ping carries a stamp
//! and its pong becomes the connection's round trip (lag compensation).
//! Text messages and framing errors close the connection with a reason.
//! What it is not: it routes nothing itself.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig as WsProtocolConfig};

use tokio_util::sync::WaitForCancellationFuture;

use crate::config::{Config, WebSocketConfig};
use crate::conn_limits::{AcceptBackoff, AddressPermit};
use crate::gateway::outbound::Outbound;
use crate::metrics::{CloseReason, Metrics};
use crate::transport::TransportDeps;
use crate::transport::link::{Inbound, LinkSettings, Source, drive};

type Sink = SplitSink<WebSocketStream<TcpStream>, Message>;
type Stream = SplitStream<WebSocketStream<TcpStream>>;

/// How long a closing connection waits for the peer's close reply.
const CLOSE_LINGER: Duration = Duration::from_secs(1);

/// Per-connection WebSocket read buffer (tungstenite's default is 128 KiB).
const WS_READ_BUFFER_BYTES: usize = 4 * 1024;

/// Longest gap between pings while heartbeats are on, so lag compensation
/// follows the round trip even under a long `heartbeat_interval_ms`.
const RTT_PING_EVERY: Duration = Duration::from_secs(2);

/// The round-trip clock of one socket: the writer stamps each ping with
/// the microseconds since `origin`, the reader turns the matching pong
/// into a round trip. Only the newest outstanding stamp is accepted, once,
/// so a client cannot invent round trips with unsolicited pongs (it can
/// only delay its answer, which lag compensation bounds by `max_unlag`
/// and the RTT cutoff).
#[derive(Debug)]
struct PingClock {
    origin: Instant,
    outstanding: std::sync::atomic::AtomicU64,
}

impl PingClock {
    fn new() -> Self {
        PingClock {
            origin: Instant::now(),
            outstanding: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// The payload of the next ping (never 0, which means "none").
    fn stamp(&self) -> [u8; 8] {
        let micros = (self.origin.elapsed().as_micros() as u64).max(1);
        self.outstanding.store(micros, Ordering::Relaxed);
        micros.to_be_bytes()
    }

    /// The round trip a pong with `payload` closes, if it answers the
    /// outstanding ping.
    fn pong(&self, payload: &[u8]) -> Option<Duration> {
        let stamp = u64::from_be_bytes(payload.try_into().ok()?);
        if stamp == 0 {
            return None;
        }
        self.outstanding
            .compare_exchange(stamp, 0, Ordering::Relaxed, Ordering::Relaxed)
            .ok()?;
        let now = self.origin.elapsed().as_micros() as u64;
        Some(Duration::from_micros(now.saturating_sub(stamp)))
    }
}

/// What every WebSocket connection of a node is built with.
#[derive(Debug, Clone)]
pub struct WsSettings {
    /// The bounds and deadlines shared with the other transports (idle
    /// limit: `heartbeat_timeout_ms`).
    pub link: LinkSettings,
    /// Largest inbound message (`max_message_bytes`).
    pub max_message_bytes: usize,
    /// Ping interval once idle (`heartbeat_interval_ms`; `None`: off).
    pub ping_every: Option<Duration>,
    /// Shortest gap between two writes of a connection; frames arriving
    /// within it gather for the next write (`flush_delay_us`; zero: at
    /// once).
    pub flush_delay: Duration,
}

impl WsSettings {
    /// From `[transport.websocket]` and the node-wide keys of `config`.
    pub fn new(ws: &WebSocketConfig, config: &Config) -> Self {
        let millis = |ms: u64| (ms > 0).then(|| Duration::from_millis(ms));
        WsSettings {
            link: LinkSettings::new(&ws.lanes, config)
                .with_idle_timeout(millis(ws.heartbeat_timeout_ms)),
            max_message_bytes: ws.max_message_bytes,
            ping_every: millis(ws.heartbeat_interval_ms),
            flush_delay: Duration::from_micros(ws.flush_delay_us),
        }
    }
}

/// Accepts WebSocket connections until shutdown. A source address past
/// `transport.limits.max_connections_per_ip` is closed at once (counted);
/// a failed accept pauses the loop ([`AcceptBackoff`]).
pub async fn serve(listener: TcpListener, deps: TransportDeps, settings: WsSettings) {
    let settings = Arc::new(settings);
    let mut backoff = AcceptBackoff::default();
    loop {
        let accepted = tokio::select! {
            _ = deps.shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, peer)) => {
                backoff.succeeded();
                let Some(address) = deps.admission.try_address(peer.ip()) else {
                    tracing::debug!(%peer, "websocket connection refused: max_connections_per_ip");
                    continue;
                };
                let _ = stream.set_nodelay(true);
                deps.tasks.spawn(handle_socket(
                    stream,
                    peer,
                    deps.clone(),
                    settings.clone(),
                    address,
                ));
            }
            Err(err) => {
                let pause = backoff.failed(&err, &deps.metrics, "websocket");
                tokio::select! {
                    _ = deps.shutdown.cancelled() => break,
                    _ = tokio::time::sleep(pause) => {}
                }
            }
        }
    }
}

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
    deps: TransportDeps,
    settings: Arc<WsSettings>,
    _address: AddressPermit,
) {
    // tungstenite zero-fills its whole read buffer before each read, so the
    // 128 KiB default costs 128 KiB of RSS per idle connection (measured by
    // citadel-load idle-capacity); frames larger than the buffer still
    // arrive (the buffer grows to the frame), only idle memory shrinks.
    let ws_config = WsProtocolConfig::default()
        .read_buffer_size(WS_READ_BUFFER_BYTES)
        .max_message_size(Some(settings.max_message_bytes))
        .max_frame_size(Some(settings.max_message_bytes));
    let upgraded = tokio::time::timeout(
        settings.link.handshake_timeout,
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
    let Some(open) = deps.admission.try_open() else {
        let _ = tokio::time::timeout(
            Duration::from_secs(1),
            ws.send(close_message(CloseReason::ServerFull)),
        )
        .await;
        return;
    };
    let outbound = settings.link.outbound(deps.metrics.clone());
    let (sink, stream) = ws.split();
    let clock = Arc::new(PingClock::new());
    let writer = tokio::spawn(run_writer(
        sink,
        outbound.clone(),
        deps.metrics.clone(),
        settings.clone(),
        clock.clone(),
    ));
    let mut source = WsSource { stream, clock };
    let reason = drive(
        &mut source,
        &deps.gateway,
        &outbound,
        &settings.link,
        &deps.shutdown,
    )
    .await;
    // The writer flushes what is queued and sends the close frame (bounded
    // by the abort token, which the grace handling or a slow client trips).
    let _ = writer.await;
    // Keep reading until the peer answers the close (or a short linger
    // ends): dropping a socket with unread input turns the close into a
    // reset, and the peer would lose the close frame and anything before it.
    let _ = tokio::time::timeout(CLOSE_LINGER, async {
        while let Some(Ok(message)) = source.stream.next().await {
            if matches!(message, Message::Close(_)) {
                break;
            }
        }
    })
    .await;
    tracing::debug!(%peer, "websocket connection ends");
    open.finish(outbound.close_reason().unwrap_or(reason));
}

/// The reading half of a WebSocket, as the reader core sees it.
struct WsSource {
    stream: Stream,
    clock: Arc<PingClock>,
}

impl Source for WsSource {
    async fn next(&mut self) -> Inbound {
        match self.stream.next().await {
            None | Some(Ok(Message::Close(_))) => Inbound::End(CloseReason::ClientClosed),
            Some(Err(err)) => {
                tracing::debug!(error = %err, "websocket read failed");
                Inbound::End(match err {
                    tokio_tungstenite::tungstenite::Error::Capacity(_)
                    | tokio_tungstenite::tungstenite::Error::Protocol(_) => {
                        CloseReason::FramingError
                    }
                    _ => CloseReason::TransportError,
                })
            }
            Some(Ok(Message::Text(_))) => Inbound::End(CloseReason::TextMessage),
            Some(Ok(Message::Binary(data))) => Inbound::Stream(data),
            Some(Ok(Message::Pong(payload))) => match self.clock.pong(&payload[..]) {
                Some(rtt) => Inbound::RoundTrip { rtt, heard: true },
                None => Inbound::Activity,
            },
            Some(Ok(_)) => Inbound::Activity, // ping, raw frames
        }
    }
}

/// Drains the lanes into the socket, coalescing frames, pinging when idle.
async fn run_writer(
    mut sink: Sink,
    outbound: Outbound,
    metrics: Arc<Metrics>,
    settings: Arc<WsSettings>,
    clock: Arc<PingClock>,
) {
    let max_batch = settings.link.max_coalesced_bytes;
    let ping_every = settings.ping_every.map(|p| p.min(RTT_PING_EVERY));
    let flush_delay = settings.flush_delay;
    // At most one write per flush delay: work arriving sooner after a write
    // waits for this instant (and gathers what follows it).
    let mut next_write: Option<Instant> = None;
    let aborted = outbound.aborted();
    let aborted_wait = aborted.cancelled();
    tokio::pin!(aborted_wait);
    // One timer for the connection's pings, reset when it fires (not a new
    // one per batch).
    let ping = tokio::time::sleep(ping_every.unwrap_or(Duration::from_secs(365 * 86_400)));
    tokio::pin!(ping);
    loop {
        // Batches first: when one is ready the other waits are not polled
        // (an abort also empties the lanes and ends the batch wait).
        let batch = tokio::select! {
            biased;
            batch = outbound.next_batch_not_before(max_batch, next_write) => batch,
            _ = &mut aborted_wait => break,
            _ = &mut ping, if ping_every.is_some() => {
                if let Some(p) = ping_every {
                    ping.as_mut().reset(Instant::now() + p);
                }
                let stamp = clock.stamp().to_vec();
                if send_or_abort(&mut sink, Message::Ping(stamp.into()), aborted_wait.as_mut()).await.is_err() {
                    break;
                }
                continue;
            }
        };
        if batch.count > 0 {
            let len = batch.frames.len() as u64;
            if send_or_abort(
                &mut sink,
                Message::Binary(batch.frames),
                aborted_wait.as_mut(),
            )
            .await
            .is_err()
            {
                break;
            }
            if !flush_delay.is_zero() {
                next_write = Some(Instant::now() + flush_delay);
            }
            metrics
                .envelopes_out
                .fetch_add(batch.count as u64, Ordering::Relaxed);
            metrics.bytes_out.fetch_add(len, Ordering::Relaxed);
        }
        if let Some(reason) = batch.close {
            if aborted.is_cancelled() {
                break; // cut at once: no close frame after an abort
            }
            let _ = tokio::time::timeout(Duration::from_secs(1), sink.send(close_message(reason)))
                .await;
            break;
        }
    }
    // Tell the reader the connection is over.
    aborted.cancel();
}

async fn send_or_abort(
    sink: &mut Sink,
    message: Message,
    aborted: std::pin::Pin<&mut WaitForCancellationFuture<'_>>,
) -> Result<(), ()> {
    tokio::select! {
        biased;
        result = sink.send(message) => result.map_err(|_| ()),
        _ = aborted => Err(()),
    }
}
