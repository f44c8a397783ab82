//! The connection driver shared by QUIC and WebTransport: client streams and
//! datagrams in, server-opened uni streams and datagrams out.
//!
//! Per accepted [`Session`]:
//! - stream readers decode framed envelopes from every client-opened stream
//!   (unidirectional ones are read one after the other in stream-id order,
//!   so a client that sends one uni stream per envelope keeps its order;
//!   each bidirectional stream gets its own reader) and pass them through a
//!   bounded channel;
//! - this task feeds them to [`Connection::handle_envelope`] and datagrams
//!   to [`Connection::handle_datagram`];
//! - the writer task drains the [`Outbound`]: reliable frames as one
//!   server-opened unidirectional stream per batch, opened, written and
//!   finished one after another by this single task (so stream ids grow in
//!   send order and a client that reads streams in id order sees the send
//!   order); unreliable frames as one datagram each (datagram form =
//!   `frame[4..]`), counted and skipped when over the current maximum
//!   datagram size.
//!
//! What it is not: it routes nothing itself and knows no kinds.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use citadel_wire::Envelope;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::config::DatagramTransportConfig;
use crate::gateway::connection::{Connection, Flow};
use crate::gateway::outbound::{LaneLimits, Outbound};
use crate::metrics::{CloseReason, DropReason, Metrics};
use crate::node::NodeShared;
use crate::transport::session::{DatagramQueued, DatagramRefused, Session};
use crate::transport::slot::OpenConnection;

/// Decoded envelopes waiting for the connection task, per connection.
const INBOUND_CHANNEL: usize = 64;
/// Datagrams the writer sends per wake-up before looking at the lanes again.
const DATAGRAMS_PER_BATCH: usize = 64;
/// How long the last stream may take to be acknowledged before the close.
const CLOSE_FLUSH: Duration = Duration::from_secs(1);

enum Inbound {
    Frame(Envelope),
    Bad(CloseReason),
}

/// Serves one accepted session until it ends.
pub async fn handle_session<S: Session>(
    session: S,
    shared: Arc<NodeShared>,
    cfg: DatagramTransportConfig,
) {
    let Some(open) = OpenConnection::try_open(&shared) else {
        let (code, text) = CloseReason::ServerFull.quic_close();
        session.close(code, text.as_bytes());
        return;
    };
    let metrics = shared.metrics.clone();
    let outbound = Outbound::new(
        LaneLimits {
            reliable_capacity: cfg.outbound_queue_capacity,
            unreliable_capacity: cfg.unreliable_queue_capacity,
            max_bytes: cfg.outbound_queue_max_bytes,
        },
        metrics.clone(),
    );
    let writer = tokio::spawn(run_writer(
        session.clone(),
        outbound.clone(),
        shared.clone(),
        cfg.max_coalesced_bytes,
    ));
    let (tx, rx) = mpsc::channel(INBOUND_CHANNEL);
    let max_frame = shared.config.transport.limits.max_inbound_frame_bytes;
    let mut readers = JoinSet::new();
    readers.spawn(read_uni_streams(
        session.clone(),
        tx.clone(),
        max_frame,
        metrics.clone(),
    ));
    readers.spawn(read_bi_streams(
        session.clone(),
        tx,
        max_frame,
        metrics.clone(),
    ));
    let mut connection = Connection::new(shared.gateway.clone(), outbound.clone());
    let mut datagrams_read = 0;
    let reason = run_reader(
        &session,
        rx,
        &mut connection,
        &outbound,
        &shared,
        &mut datagrams_read,
    )
    .await;
    connection.handle_disconnect();
    outbound.close(reason);
    readers.abort_all();
    let _ = writer.await;
    let unread = session.datagrams_received().saturating_sub(datagrams_read);
    metrics.drop_n(DropReason::DatagramReceiveBufferFull, unread);
    open.finish(outbound.close_reason().unwrap_or(reason));
}

/// Feeds streams and datagrams to the connection (counting the datagrams
/// it reads in `datagrams_read`); returns why it ended.
async fn run_reader<S: Session>(
    session: &S,
    mut rx: mpsc::Receiver<Inbound>,
    connection: &mut Connection,
    outbound: &Outbound,
    shared: &Arc<NodeShared>,
    datagrams_read: &mut u64,
) -> CloseReason {
    let handshake_deadline =
        Instant::now() + Duration::from_millis(shared.config.transport.auth.handshake_timeout_ms);
    let grace = Duration::from_millis(shared.config.shutdown.grace_ms);
    let aborted = outbound.aborted();
    let mut shutdown_deadline: Option<Instant> = None;
    loop {
        let live = connection.is_live();
        tokio::select! {
            _ = aborted.cancelled() => {
                return outbound.close_reason().unwrap_or(CloseReason::TransportError);
            }
            _ = shared.shutdown.cancelled(), if shutdown_deadline.is_none() => {
                outbound.close(CloseReason::Shutdown);
                shutdown_deadline = Some(Instant::now() + grace);
            }
            _ = tokio::time::sleep_until(shutdown_deadline.unwrap_or(handshake_deadline)), if shutdown_deadline.is_some() => {
                outbound.abort(CloseReason::Shutdown);
                return CloseReason::Shutdown;
            }
            _ = tokio::time::sleep_until(handshake_deadline), if !live && shutdown_deadline.is_none() => {
                return CloseReason::HandshakeTimeout;
            }
            inbound = rx.recv() => {
                let envelope = match inbound {
                    None => return CloseReason::ClientClosed,
                    Some(Inbound::Bad(reason)) => return reason,
                    Some(Inbound::Frame(envelope)) => envelope,
                };
                if shutdown_deadline.is_some() {
                    continue; // draining: new input is not processed
                }
                if let Flow::Close(reason) = connection.handle_envelope(envelope).await {
                    return reason;
                }
            }
            datagram = session.read_datagram() => {
                let Some(datagram) = datagram else {
                    return CloseReason::ClientClosed;
                };
                *datagrams_read += 1;
                if shutdown_deadline.is_some() {
                    continue;
                }
                shared.metrics.bytes_in.fetch_add(datagram.len() as u64, Ordering::Relaxed);
                match citadel_wire::decode_datagram_bytes(datagram) {
                    Err(_) => shared.metrics.dropped(DropReason::MalformedDatagram),
                    Ok(envelope) => {
                        if let Flow::Close(reason) = connection.handle_datagram(envelope).await {
                            return reason;
                        }
                    }
                }
            }
        }
    }
}

/// Reads client-opened unidirectional streams one after the other.
async fn read_uni_streams<S: Session>(
    session: S,
    tx: mpsc::Sender<Inbound>,
    max_frame: usize,
    metrics: Arc<Metrics>,
) {
    while let Some(stream) = session.accept_uni().await {
        if let Err(reason) = read_stream(stream, &tx, max_frame, &metrics).await {
            let _ = tx.send(Inbound::Bad(reason)).await;
            return;
        }
    }
}

/// Accepts client-opened bidirectional streams, one reader each.
async fn read_bi_streams<S: Session>(
    session: S,
    tx: mpsc::Sender<Inbound>,
    max_frame: usize,
    metrics: Arc<Metrics>,
) {
    let mut streams = JoinSet::new();
    while let Some(stream) = session.accept_bi().await {
        let tx = tx.clone();
        let metrics = metrics.clone();
        streams.spawn(async move {
            if let Err(reason) = read_stream(stream, &tx, max_frame, &metrics).await {
                let _ = tx.send(Inbound::Bad(reason)).await;
            }
        });
        while streams.try_join_next().is_some() {}
    }
}

/// Decodes every frame of one stream; a frame over the inbound limit, a bad
/// length or a stream that ends inside a frame is a framing error.
async fn read_stream<R: AsyncRead + Unpin>(
    mut stream: R,
    tx: &mpsc::Sender<Inbound>,
    max_frame: usize,
    metrics: &Metrics,
) -> Result<(), CloseReason> {
    let mut buf = BytesMut::new();
    loop {
        buf.reserve(16 * 1024);
        let n = match stream.read_buf(&mut buf).await {
            Ok(n) => n,
            Err(_) => return Ok(()), // reset or connection gone
        };
        metrics.bytes_in.fetch_add(n as u64, Ordering::Relaxed);
        loop {
            match citadel_wire::peek_frame_len(&buf) {
                Err(_) => return Err(CloseReason::FramingError),
                Ok(Some(len)) if len > max_frame => return Err(CloseReason::FramingError),
                _ => {}
            }
            match citadel_wire::decode_framed(&mut buf) {
                Ok(Some(envelope)) => {
                    if tx.send(Inbound::Frame(envelope)).await.is_err() {
                        return Ok(());
                    }
                }
                Ok(None) => break,
                Err(_) => return Err(CloseReason::FramingError),
            }
        }
        if n == 0 {
            return if buf.is_empty() {
                Ok(())
            } else {
                Err(CloseReason::FramingError)
            };
        }
    }
}

/// Drains the lanes: datagrams for the unreliable lane, one finished uni
/// stream per reliable batch; closes the session with the reason's code.
async fn run_writer<S: Session>(
    session: S,
    outbound: Outbound,
    shared: Arc<NodeShared>,
    max_batch: usize,
) {
    let aborted = outbound.aborted();
    let metrics = &shared.metrics;
    let mut last: Option<S::Sent> = None;
    let reason = loop {
        let batch = tokio::select! {
            _ = aborted.cancelled() => break outbound.close_reason().unwrap_or(CloseReason::TransportError),
            batch = outbound.next_split_batch(max_batch, DATAGRAMS_PER_BATCH) => batch,
        };
        for frame in batch.unreliable {
            let Some(datagram) = datagram_form(&frame) else {
                continue;
            };
            let len = datagram.len() as u64;
            match session.send_datagram(datagram) {
                Ok(queued) => {
                    if queued == DatagramQueued::DisplacedOlder {
                        metrics.dropped(DropReason::DatagramSendBufferFull);
                    }
                    metrics.envelopes_out.fetch_add(1, Ordering::Relaxed);
                    metrics.bytes_out.fetch_add(len, Ordering::Relaxed);
                }
                Err(DatagramRefused::TooLarge) => metrics.dropped(DropReason::DatagramTooLarge),
                Err(DatagramRefused::Closed) => metrics.dropped(DropReason::ConnectionClosed),
            }
        }
        if batch.reliable_count > 0 {
            let len = batch.reliable.len() as u64;
            let sent = tokio::select! {
                _ = aborted.cancelled() => break outbound.close_reason().unwrap_or(CloseReason::TransportError),
                sent = session.send_stream(batch.reliable) => sent,
            };
            let Some(sent) = sent else {
                break CloseReason::TransportError;
            };
            last = Some(sent);
            metrics
                .envelopes_out
                .fetch_add(batch.reliable_count as u64, Ordering::Relaxed);
            metrics.bytes_out.fetch_add(len, Ordering::Relaxed);
        }
        if let Some(reason) = batch.close {
            // Closing discards unacknowledged stream data: let the last
            // stream (e.g. a rejection's AUTH_RESULT) arrive first.
            if let Some(sent) = last.take() {
                let _ = tokio::time::timeout(CLOSE_FLUSH, S::wait_acked(sent)).await;
            }
            break reason;
        }
    };
    let (code, text) = reason.quic_close();
    session.close(code, text.as_bytes());
    aborted.cancel();
}

/// The datagram form of a framed envelope (kind + body, no length prefix).
fn datagram_form(frame: &Bytes) -> Option<Bytes> {
    (frame.len() >= citadel_wire::protocol::LENGTH_PREFIX_BYTES + 2)
        .then(|| frame.slice(citadel_wire::protocol::LENGTH_PREFIX_BYTES..))
}
