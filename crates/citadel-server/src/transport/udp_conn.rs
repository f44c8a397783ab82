//! The connection driver shared by QUIC and WebTransport: client streams and
//! datagrams in, server-opened uni streams and datagrams out.
//!
//! Per accepted [`Session`]:
//! - stream readers decode framed envelopes from every client-opened stream
//!   (unidirectional ones are read one after the other in stream-id order,
//!   so a client that sends one uni stream per envelope keeps its order;
//!   each bidirectional stream gets its own reader) and pass them through a
//!   bounded channel;
//! - this task runs the shared reader core ([`super::link::drive`]) over
//!   [`SessionSource`]: decoded stream envelopes and the session's
//!   datagrams, fed to the gateway's connection, plus the path's
//!   round-trip estimate once a second (lag compensation);
//! - the writer task drains the [`Outbound`]: reliable frames as one
//!   server-opened unidirectional stream per batch, opened, written and
//!   finished one after another by this single task (so stream ids grow in
//!   send order and a client that reads streams in id order sees the send
//!   order); unreliable frames as one datagram each (datagram form =
//!   [`framed_to_datagram`]), counted and skipped when over the current maximum
//!   datagram size.
//!
//! What it is not: it routes nothing itself and knows no kinds.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use citadel_wire::{Envelope, FrameDecoder, framed_to_datagram};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::gateway::outbound::Outbound;
use crate::metrics::{CloseReason, DropReason, Metrics};
use crate::transport::TransportDeps;
use crate::transport::link::{Inbound, LinkSettings, Source, drive};
use crate::transport::session::{DatagramQueued, DatagramRefused, Session};

/// Decoded envelopes waiting for the connection task, per connection.
const INBOUND_CHANNEL: usize = 64;
/// Datagrams the writer sends per wake-up before looking at the lanes again.
const DATAGRAMS_PER_BATCH: usize = 64;
/// How long the last stream may take to be acknowledged before the close.
const CLOSE_FLUSH: Duration = Duration::from_secs(1);
/// Bytes read from a client stream at once.
const STREAM_READ_CHUNK: usize = 16 * 1024;
/// How often the path's round-trip estimate feeds lag compensation.
const RTT_SAMPLE_EVERY: Duration = Duration::from_secs(1);

enum StreamInput {
    Frame(Envelope),
    Bad(CloseReason),
}

/// Serves one accepted session until it ends.
pub async fn handle_session<S: Session>(session: S, deps: TransportDeps, settings: LinkSettings) {
    let Some(open) = deps.admission.try_open() else {
        let (code, text) = CloseReason::ServerFull.quic_close();
        session.close(code, text.as_bytes());
        return;
    };
    let metrics = deps.metrics.clone();
    let outbound = settings.outbound(metrics.clone());
    let writer = tokio::spawn(run_writer(
        session.clone(),
        outbound.clone(),
        metrics.clone(),
        settings.max_coalesced_bytes,
    ));
    let (tx, rx) = mpsc::channel(INBOUND_CHANNEL);
    let max_frame = settings.max_inbound_frame_bytes;
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
    let mut source = SessionSource {
        session: &session,
        streams: rx,
        datagrams_read: 0,
        rtt_samples: tokio::time::interval(RTT_SAMPLE_EVERY),
    };
    let reason = drive(
        &mut source,
        &deps.gateway,
        &outbound,
        &settings,
        &deps.shutdown,
    )
    .await;
    readers.abort_all();
    let _ = writer.await;
    let unread = session
        .datagrams_received()
        .saturating_sub(source.datagrams_read);
    metrics.drop_n(DropReason::DatagramReceiveBufferFull, unread);
    open.finish(outbound.close_reason().unwrap_or(reason));
}

/// Envelopes from the stream readers and the session's datagrams, as the
/// reader core sees them (counting the datagrams read).
struct SessionSource<'a, S> {
    session: &'a S,
    streams: mpsc::Receiver<StreamInput>,
    datagrams_read: u64,
    /// When to read the path's round-trip estimate next (first at once).
    rtt_samples: tokio::time::Interval,
}

impl<S: Session> Source for SessionSource<'_, S> {
    async fn next(&mut self) -> Inbound {
        tokio::select! {
            input = self.streams.recv() => match input {
                None => Inbound::End(CloseReason::ClientClosed),
                Some(StreamInput::Bad(reason)) => Inbound::End(reason),
                Some(StreamInput::Frame(envelope)) => Inbound::Envelope(envelope),
            },
            datagram = self.session.read_datagram() => match datagram {
                None => Inbound::End(CloseReason::ClientClosed),
                Some(datagram) => {
                    self.datagrams_read += 1;
                    Inbound::Datagram(datagram)
                }
            },
            _ = self.rtt_samples.tick() => Inbound::RoundTrip {
                rtt: self.session.rtt(),
                heard: false,
            },
        }
    }
}

/// Reads client-opened unidirectional streams one after the other.
async fn read_uni_streams<S: Session>(
    session: S,
    tx: mpsc::Sender<StreamInput>,
    max_frame: usize,
    metrics: Arc<Metrics>,
) {
    while let Some(stream) = session.accept_uni().await {
        if let Err(reason) = read_stream(stream, &tx, max_frame, &metrics).await {
            let _ = tx.send(StreamInput::Bad(reason)).await;
            return;
        }
    }
}

/// Accepts client-opened bidirectional streams, one reader each.
async fn read_bi_streams<S: Session>(
    session: S,
    tx: mpsc::Sender<StreamInput>,
    max_frame: usize,
    metrics: Arc<Metrics>,
) {
    let mut streams = JoinSet::new();
    while let Some(stream) = session.accept_bi().await {
        let tx = tx.clone();
        let metrics = metrics.clone();
        streams.spawn(async move {
            if let Err(reason) = read_stream(stream, &tx, max_frame, &metrics).await {
                let _ = tx.send(StreamInput::Bad(reason)).await;
            }
        });
        while streams.try_join_next().is_some() {}
    }
}

/// Decodes every frame of one stream; a frame over the inbound limit, a bad
/// length or a stream that ends inside a frame is a framing error.
async fn read_stream<R: AsyncRead + Unpin>(
    mut stream: R,
    tx: &mpsc::Sender<StreamInput>,
    max_frame: usize,
    metrics: &Metrics,
) -> Result<(), CloseReason> {
    let mut decoder = FrameDecoder::new(max_frame);
    let mut chunk = vec![0u8; STREAM_READ_CHUNK];
    loop {
        let n = match stream.read(&mut chunk).await {
            Ok(n) => n,
            Err(_) => return Ok(()), // reset or connection gone
        };
        metrics.bytes_in.fetch_add(n as u64, Ordering::Relaxed);
        decoder.handle_bytes(&chunk[..n]);
        loop {
            match decoder.poll_envelope() {
                Ok(Some(envelope)) => {
                    if tx.send(StreamInput::Frame(envelope)).await.is_err() {
                        return Ok(());
                    }
                }
                Ok(None) => break,
                Err(_) => return Err(CloseReason::FramingError),
            }
        }
        if n == 0 {
            return if decoder.buffered() == 0 {
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
    metrics: Arc<Metrics>,
    max_batch: usize,
) {
    let aborted = outbound.aborted();
    let mut last: Option<S::Sent> = None;
    let reason = loop {
        let batch = tokio::select! {
            _ = aborted.cancelled() => break outbound.close_reason().unwrap_or(CloseReason::TransportError),
            batch = outbound.next_split_batch(max_batch, DATAGRAMS_PER_BATCH) => batch,
        };
        for frame in batch.unreliable {
            let Some(datagram) = framed_to_datagram(&frame) else {
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
