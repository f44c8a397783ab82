//! The reader core every realtime transport shares: one frame loop that
//! feeds a [`Connection`], racing the handshake (or heartbeat) deadline,
//! node shutdown with its grace period, and the connection's own abort.
//!
//! What it is: [`LinkSettings`] (the lane limits, batch size, inbound frame
//! limit and deadlines of one connection, built from the transport's section
//! and the keys common to all transports), the [`Source`] trait a transport
//! implements to hand over what it read ([`Inbound`]), and [`drive`], which
//! owns the connection from accept to disconnect. Stream bytes go through
//! one [`FrameDecoder`] per connection (length checked before buffering);
//! datagrams are decoded here too.
//!
//! What it is not: it writes nothing (each transport's writer drains the
//! [`Outbound`]) and knows no kinds (the gateway's connection does).
//!
//! Call order: the transport accepts and upgrades, takes its slot, builds
//! the [`Outbound`] from [`LinkSettings::lanes`], spawns its writer, then
//! awaits [`drive`] with its [`Source`]; `drive` returns the close reason
//! after the connection was told of the disconnect and the lanes closed.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use citadel_wire::{Envelope, FrameDecoder};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::{Config, LaneConfig};
use crate::gateway::connection::{Connection, ConnectionDeps, Flow};
use crate::gateway::outbound::{LaneLimits, Outbound};
use crate::metrics::{CloseReason, DropReason, Metrics};

/// The bounds and deadlines of one realtime connection.
#[derive(Debug, Clone, Copy)]
pub struct LinkSettings {
    /// The outbound lanes (`outbound_queue_capacity`,
    /// `unreliable_queue_capacity`, `outbound_queue_max_bytes`).
    pub lanes: LaneLimits,
    /// Most bytes of frames in one write (`max_coalesced_bytes`).
    pub max_coalesced_bytes: usize,
    /// Largest declared inbound frame
    /// (`transport.limits.max_inbound_frame_bytes`).
    pub max_inbound_frame_bytes: usize,
    /// Time from accept to a live connection
    /// (`transport.auth.handshake_timeout_ms`).
    pub handshake_timeout: Duration,
    /// How long a live connection may stay silent (`None`: no limit here).
    pub idle_timeout: Option<Duration>,
    /// How long a connection may flush after shutdown (`shutdown.grace_ms`).
    pub shutdown_grace: Duration,
}

impl LinkSettings {
    /// The settings of a transport whose section holds `lanes`, under the
    /// node-wide keys of `config`; no idle limit.
    pub fn new(lanes: &LaneConfig, config: &Config) -> Self {
        LinkSettings {
            lanes: LaneLimits {
                reliable_capacity: lanes.outbound_queue_capacity,
                unreliable_capacity: lanes.unreliable_queue_capacity,
                max_bytes: lanes.outbound_queue_max_bytes,
            },
            max_coalesced_bytes: lanes.max_coalesced_bytes,
            max_inbound_frame_bytes: config.transport.limits.max_inbound_frame_bytes,
            handshake_timeout: Duration::from_millis(config.transport.auth.handshake_timeout_ms),
            idle_timeout: None,
            shutdown_grace: Duration::from_millis(config.shutdown.grace_ms),
        }
    }

    /// The same settings, closing a live connection silent for `timeout`.
    pub fn with_idle_timeout(self, timeout: Option<Duration>) -> Self {
        LinkSettings {
            idle_timeout: timeout,
            ..self
        }
    }

    /// Empty lanes for a new connection.
    pub fn outbound(&self, metrics: Arc<Metrics>) -> Outbound {
        Outbound::new(self.lanes, metrics)
    }
}

/// What a transport read.
#[derive(Debug)]
pub enum Inbound {
    /// Bytes of the connection's framed stream (a WebSocket binary
    /// message); decoded here, counted in `bytes_in`.
    Stream(Bytes),
    /// An envelope a stream reader task already decoded (and counted).
    Envelope(Envelope),
    /// One datagram payload (kind + body); counted in `bytes_in`.
    Datagram(Bytes),
    /// Traffic that carries no envelope (a ping or pong): the peer is alive.
    Activity,
    /// A round trip the transport measured (WebSocket ping/pong, QUIC path
    /// statistics), for lag compensation. `heard` is whether it came with
    /// traffic from the peer (a pong) rather than from local statistics,
    /// which never keep a silent connection alive.
    RoundTrip {
        /// The measured round-trip time.
        rtt: Duration,
        /// Whether the peer sent something.
        heard: bool,
    },
    /// The input is over, for this reason.
    End(CloseReason),
}

/// Where a connection's input comes from.
pub trait Source: Send {
    /// The next input. Must be cancel-safe: it is raced against deadlines,
    /// and a dropped call must lose nothing.
    fn next(&mut self) -> impl Future<Output = Inbound> + Send;
}

/// Runs one connection: feeds `source` to a new [`Connection`] until the
/// peer leaves, a deadline passes, the lanes abort or shutdown's grace ends;
/// then tells the connection it is gone and closes the lanes with the
/// reason, which it returns.
pub async fn drive(
    source: &mut impl Source,
    deps: &Arc<ConnectionDeps>,
    outbound: &Outbound,
    settings: &LinkSettings,
    shutdown: &CancellationToken,
) -> CloseReason {
    let mut connection = Connection::new(deps.clone(), outbound.clone());
    let reason = read_loop(
        source,
        &mut connection,
        outbound,
        settings,
        shutdown,
        &deps.metrics,
    )
    .await;
    connection.handle_disconnect();
    outbound.close(reason);
    reason
}

/// The frame loop: returns why the connection ends.
async fn read_loop(
    source: &mut impl Source,
    connection: &mut Connection,
    outbound: &Outbound,
    settings: &LinkSettings,
    shutdown: &CancellationToken,
    metrics: &Metrics,
) -> CloseReason {
    let handshake_deadline = Instant::now() + settings.handshake_timeout;
    let aborted = outbound.aborted();
    let mut decoder = FrameDecoder::new(settings.max_inbound_frame_bytes);
    let mut last_heard = Instant::now();
    // Set once shutdown began: new input is no longer processed, and the
    // connection is cut when the grace period ends.
    let mut draining: Option<Instant> = None;
    // The waits are created once, not once per message: a fresh
    // cancellation future or timer per envelope costs a registration and
    // a removal each time. The one timer is armed at or before the next
    // deadline (handshake, silence, or the end of the grace); when it fires
    // early (the peer spoke meanwhile) it is moved to the real deadline.
    let aborted_wait = aborted.cancelled();
    tokio::pin!(aborted_wait);
    let shutdown_wait = shutdown.cancelled();
    tokio::pin!(shutdown_wait);
    let timer = tokio::time::sleep_until(handshake_deadline);
    tokio::pin!(timer);
    let mut armed = Some(handshake_deadline);
    loop {
        let live = connection.is_live();
        let deadline = match (draining, live, settings.idle_timeout) {
            (Some(end), _, _) => Some(end),
            (None, false, _) => Some(handshake_deadline),
            (None, true, Some(timeout)) => Some(last_heard + timeout),
            (None, true, None) => None,
        };
        if let Some(d) = deadline
            && armed.is_none_or(|a| d < a)
        {
            timer.as_mut().reset(d);
            armed = Some(d);
        }
        let inbound = tokio::select! {
            _ = &mut aborted_wait => {
                return outbound.close_reason().unwrap_or(CloseReason::TransportError);
            }
            _ = &mut shutdown_wait, if draining.is_none() => {
                outbound.close(CloseReason::Shutdown);
                draining = Some(Instant::now() + settings.shutdown_grace);
                continue;
            }
            _ = &mut timer, if armed.is_some() => {
                armed = None;
                match deadline {
                    Some(d) if d <= Instant::now() => {
                        if draining.is_some() {
                            outbound.abort(CloseReason::Shutdown);
                            return CloseReason::Shutdown;
                        }
                        return if live { CloseReason::HeartbeatTimeout } else { CloseReason::HandshakeTimeout };
                    }
                    Some(d) => {
                        timer.as_mut().reset(d);
                        armed = Some(d);
                    }
                    None => {}
                }
                continue;
            }
            inbound = source.next() => inbound,
        };
        if let Inbound::RoundTrip { rtt, heard } = inbound {
            connection.handle_round_trip(rtt);
            if !heard {
                continue;
            }
        }
        if settings.idle_timeout.is_some() {
            last_heard = Instant::now();
        }
        let flow = match inbound {
            Inbound::End(reason) => return reason,
            _ if draining.is_some() => continue,
            Inbound::Activity | Inbound::RoundTrip { .. } => continue,
            Inbound::Stream(bytes) => {
                metrics
                    .bytes_in
                    .fetch_add(bytes.len() as u64, Ordering::Relaxed);
                decoder.handle_bytes(&bytes);
                loop {
                    match decoder.poll_envelope() {
                        Ok(Some(envelope)) => {
                            if let Flow::Close(reason) = connection.handle_envelope(envelope).await
                            {
                                return reason;
                            }
                        }
                        Ok(None) => break Flow::Continue,
                        Err(_) => return CloseReason::FramingError,
                    }
                }
            }
            Inbound::Envelope(envelope) => connection.handle_envelope(envelope).await,
            Inbound::Datagram(datagram) => {
                metrics
                    .bytes_in
                    .fetch_add(datagram.len() as u64, Ordering::Relaxed);
                match citadel_wire::decode_datagram_bytes(datagram) {
                    Ok(envelope) => connection.handle_datagram(envelope).await,
                    Err(_) => {
                        metrics.dropped(DropReason::MalformedDatagram);
                        Flow::Continue
                    }
                }
            }
        };
        if let Flow::Close(reason) = flow {
            return reason;
        }
    }
}

#[cfg(test)]
mod tests {
    //! The reader core over a scripted source and paused time: deadlines
    //! are asserted on the virtual clock, no socket is involved.

    use citadel_wire::protocol::{KIND_AUTH, KIND_AUTH_RESULT};
    use tokio::sync::mpsc;
    use tokio::task::JoinHandle;

    use super::*;
    use crate::gateway::connection::tests::{TEST_LANES, decoded, deps_with};
    use crate::realm::Places;
    use crate::router::LocalRouter;

    /// Hands out what the test sends, then waits forever.
    struct Scripted(mpsc::Receiver<Inbound>);

    impl Source for Scripted {
        async fn next(&mut self) -> Inbound {
            match self.0.recv().await {
                Some(inbound) => inbound,
                None => std::future::pending().await,
            }
        }
    }

    const SETTINGS: LinkSettings = LinkSettings {
        lanes: TEST_LANES,
        max_coalesced_bytes: 64 * 1024,
        max_inbound_frame_bytes: 1024,
        handshake_timeout: Duration::from_secs(5),
        idle_timeout: None,
        shutdown_grace: Duration::from_secs(2),
    };

    struct Rig {
        input: mpsc::Sender<Inbound>,
        deps: Arc<ConnectionDeps>,
        outbound: Outbound,
        shutdown: CancellationToken,
        started: Instant,
        reader: JoinHandle<CloseReason>,
    }

    fn start(settings: LinkSettings) -> Rig {
        let router = Arc::new(LocalRouter::new(Arc::new(Places::default())));
        let deps = deps_with(router);
        let outbound = settings.outbound(deps.metrics.clone());
        let shutdown = CancellationToken::new();
        let (input, rx) = mpsc::channel(16);
        let reader = {
            let (deps, outbound, shutdown) = (deps.clone(), outbound.clone(), shutdown.clone());
            tokio::spawn(async move {
                drive(&mut Scripted(rx), &deps, &outbound, &settings, &shutdown).await
            })
        };
        Rig {
            input,
            deps,
            outbound,
            shutdown,
            started: Instant::now(),
            reader,
        }
    }

    impl Rig {
        async fn send(&self, inbound: Inbound) {
            if self.input.send(inbound).await.is_err() {
                panic!("the reader stopped early");
            }
        }

        /// Sends a guest AUTH as stream bytes and waits for its reply.
        async fn go_live(&self) {
            let auth = Envelope::new(KIND_AUTH, Bytes::new()).encode_framed();
            self.send(Inbound::Stream(auth)).await;
            tokio::time::sleep(Duration::from_millis(1)).await;
            let (reliable, _) = self.outbound.drain();
            assert_eq!(reliable.len(), 1, "one AUTH_RESULT");
            assert_eq!(decoded(&reliable[0]).kind, KIND_AUTH_RESULT);
        }

        /// The close reason and when (since start) the reader returned.
        async fn end(self) -> (CloseReason, Duration) {
            let reason = match self.reader.await {
                Ok(reason) => reason,
                Err(err) => panic!("the reader panicked: {err}"),
            };
            (reason, self.started.elapsed())
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_peer_is_closed_at_the_handshake_deadline() {
        let rig = start(SETTINGS);
        let outbound = rig.outbound.clone();
        let (reason, at) = rig.end().await;
        assert_eq!(reason, CloseReason::HandshakeTimeout);
        assert!(at >= SETTINGS.handshake_timeout, "{at:?}");
        assert!(at < SETTINGS.handshake_timeout + Duration::from_millis(10));
        assert_eq!(outbound.close_reason(), Some(CloseReason::HandshakeTimeout));
    }

    #[tokio::test(start_paused = true)]
    async fn a_live_connection_is_held_to_the_idle_limit_from_its_last_input() {
        let idle = Duration::from_secs(3);
        let rig = start(SETTINGS.with_idle_timeout(Some(idle)));
        rig.go_live().await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        rig.send(Inbound::Activity).await;
        let (reason, at) = rig.end().await;
        assert_eq!(reason, CloseReason::HeartbeatTimeout);
        // The ping at 2 s moved the deadline to 5 s; the handshake deadline
        // (also 5 s) no longer applies to a live connection.
        let expected = Duration::from_secs(2) + idle;
        assert!(
            at >= expected && at < expected + Duration::from_millis(20),
            "{at:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn without_an_idle_limit_a_live_connection_waits_for_its_peer() {
        let rig = start(SETTINGS);
        rig.go_live().await;
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(!rig.reader.is_finished(), "no deadline once live");
        rig.send(Inbound::End(CloseReason::ClientClosed)).await;
        let (reason, _) = rig.end().await;
        assert_eq!(reason, CloseReason::ClientClosed);
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_stops_reading_then_cuts_the_connection_after_the_grace() {
        let rig = start(SETTINGS);
        rig.go_live().await;
        rig.shutdown.cancel();
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert_eq!(rig.outbound.close_reason(), Some(CloseReason::Shutdown));
        // Input while draining is not processed (nor counted).
        let again = Envelope::new(KIND_AUTH, Bytes::new()).encode_framed();
        rig.send(Inbound::Stream(again)).await;
        let outbound = rig.outbound.clone();
        let metrics = rig.deps.metrics.clone();
        let (reason, at) = rig.end().await;
        assert_eq!(reason, CloseReason::Shutdown);
        let grace_end = Duration::from_millis(1) + SETTINGS.shutdown_grace;
        assert!(
            at >= grace_end && at < grace_end + Duration::from_millis(20),
            "{at:?}"
        );
        assert!(outbound.aborted().is_cancelled(), "the writer is cut too");
        assert_eq!(
            metrics.bytes_in.load(Ordering::Relaxed),
            6,
            "the first AUTH only"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn frames_before_an_oversized_prefix_are_handled_then_it_closes() {
        let rig = start(SETTINGS);
        let mut chunk = Envelope::new(KIND_AUTH, Bytes::new())
            .encode_framed()
            .to_vec();
        chunk.extend_from_slice(&1025u32.to_be_bytes());
        chunk.extend_from_slice(&[0; 64]);
        let len = chunk.len() as u64;
        rig.send(Inbound::Stream(chunk.into())).await;
        let metrics = rig.deps.metrics.clone();
        let outbound = rig.outbound.clone();
        let (reason, _) = rig.end().await;
        assert_eq!(reason, CloseReason::FramingError);
        let (reliable, _) = outbound.drain();
        assert_eq!(decoded(&reliable[0]).kind, KIND_AUTH_RESULT, "AUTH handled");
        assert_eq!(metrics.bytes_in.load(Ordering::Relaxed), len);
    }

    #[tokio::test(start_paused = true)]
    async fn datagrams_are_decoded_and_malformed_ones_counted() {
        let rig = start(SETTINGS);
        rig.go_live().await;
        rig.send(Inbound::Datagram(Bytes::from_static(&[7]))).await;
        // Kind 1 with an 8-byte position: relayed to nobody, no error.
        rig.send(Inbound::Datagram(Bytes::from_static(&[
            0, 1, 0, 0, 0, 0, 0, 0, 0, 0,
        ])))
        .await;
        rig.send(Inbound::End(CloseReason::ClientClosed)).await;
        let metrics = rig.deps.metrics.clone();
        let (reason, _) = rig.end().await;
        assert_eq!(reason, CloseReason::ClientClosed);
        assert_eq!(metrics.drops(DropReason::MalformedDatagram), 1);
        assert_eq!(
            metrics.bytes_in.load(Ordering::Relaxed) as usize,
            6 + 1 + 10
        );
    }
}
