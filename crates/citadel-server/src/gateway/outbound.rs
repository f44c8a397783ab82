//! The per-connection outbound queue: two bounded lanes drained by one
//! writer task.
//!
//! - Reliable lane: envelopes that must arrive (room frames, RPC replies,
//!   relayed application kinds). Full, or past the byte cap → the client is
//!   too slow: the connection is closed with `SlowConsumer`.
//! - Unreliable lane: envelopes a later one supersedes (relayed positions).
//!   Full → the oldest is dropped and counted.
//!
//! Producers (the connection itself, room fan-out, RPC tasks) never block
//! and never await: a push takes a short mutex and wakes the writer. What it
//! is not: it does not write sockets; the transport's writer calls
//! [`Outbound::next_batch`] and owns the socket.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};
use citadel_wire::Envelope;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::metrics::{CloseReason, DropReason, Metrics};

/// Bounds of one connection's lanes.
#[derive(Debug, Clone, Copy)]
pub struct LaneLimits {
    /// Reliable envelopes queued at most.
    pub reliable_capacity: usize,
    /// Unreliable envelopes queued at most.
    pub unreliable_capacity: usize,
    /// Bytes queued at most over both lanes.
    pub max_bytes: usize,
}

#[derive(Debug, Default)]
struct LaneState {
    reliable: VecDeque<Bytes>,
    unreliable: VecDeque<Bytes>,
    bytes: usize,
    close: Option<CloseReason>,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<LaneState>,
    wake: Notify,
    abort: CancellationToken,
    limits: LaneLimits,
    metrics: Arc<Metrics>,
}

/// Handle to one connection's outbound lanes (cheap to clone).
#[derive(Debug, Clone)]
pub struct Outbound {
    shared: Arc<Shared>,
}

/// What the writer should do next.
#[derive(Debug)]
pub struct Batch {
    /// Framed envelopes, concatenated (empty if none).
    pub frames: Bytes,
    /// Number of envelopes in `frames`.
    pub count: usize,
    /// Close after writing `frames`.
    pub close: Option<CloseReason>,
}

/// What a datagram-capable writer should do next.
#[derive(Debug, Default)]
pub struct SplitBatch {
    /// Reliable framed envelopes, concatenated (empty if none).
    pub reliable: Bytes,
    /// Number of envelopes in `reliable`.
    pub reliable_count: usize,
    /// Unreliable envelopes, each in framed form, oldest first.
    pub unreliable: Vec<Bytes>,
    /// Close after writing the above.
    pub close: Option<CloseReason>,
}

/// What a reliable push did.
enum Push {
    Queued,
    Closing,
    Full,
}

impl Outbound {
    /// New empty lanes.
    pub fn new(limits: LaneLimits, metrics: Arc<Metrics>) -> Self {
        Outbound {
            shared: Arc::new(Shared {
                state: Mutex::new(LaneState::default()),
                wake: Notify::new(),
                abort: CancellationToken::new(),
                limits,
                metrics,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LaneState> {
        // A poisoned lane only means a producer panicked mid-push; the queue
        // itself is still consistent (pushes are single operations).
        self.shared.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues a framed envelope on the reliable lane. Returns false if the
    /// connection is closing (or was just closed for overflowing).
    pub fn send_reliable(&self, frame: Bytes) -> bool {
        match self.push_reliable(frame, 1) {
            Push::Queued => true,
            Push::Closing => false,
            Push::Full => {
                self.shared.metrics.dropped(DropReason::ConnectionClosed);
                self.abort(CloseReason::SlowConsumer);
                false
            }
        }
    }

    /// Queues several framed envelopes on the reliable lane, in order, under
    /// one lock and with one wake-up: what a producer with a burst for one
    /// connection (a NetworkPeer tick) uses instead of a push per frame.
    /// Each frame is treated as [`Outbound::send_reliable`] would treat it:
    /// the first that does not fit closes the connection as a slow
    /// consumer, and it and every later frame count as `connection_closed`.
    /// Returns how many were queued.
    pub fn send_reliable_all(&self, frames: impl IntoIterator<Item = Bytes>) -> usize {
        let mut frames = frames.into_iter();
        let mut queued = 0;
        let overflowed = {
            let mut st = self.lock();
            let mut overflowed = false;
            if st.close.is_none() {
                for frame in frames.by_ref() {
                    if !self.fits_reliable(&st, frame.len(), 1) {
                        overflowed = true;
                        break;
                    }
                    st.bytes += frame.len();
                    st.reliable.push_back(frame);
                    queued += 1;
                }
            }
            overflowed
        };
        if queued > 0 {
            self.shared.wake.notify_one();
        }
        // What was not queued: the frame that overflowed (if any) and the
        // rest, all dropped with the connection.
        let rest = frames.count() as u64 + u64::from(overflowed);
        if rest > 0 {
            self.shared
                .metrics
                .drop_n(DropReason::ConnectionClosed, rest);
        }
        if overflowed {
            self.abort(CloseReason::SlowConsumer);
        }
        queued
    }

    /// Offers a framed envelope to the reliable lane without risking the
    /// connection: it is queued only while the lane holds less than half
    /// its envelope and byte capacity (the rest stays free for replies and
    /// other reliable traffic); otherwise it is dropped, counted as
    /// `reliable_offer_dropped`, and false is returned.
    pub fn offer_reliable(&self, frame: Bytes) -> bool {
        match self.push_reliable(frame, 2) {
            Push::Queued => true,
            Push::Closing => false,
            Push::Full => {
                self.shared
                    .metrics
                    .dropped(DropReason::ReliableOfferDropped);
                false
            }
        }
    }

    /// The one reliable push: queues `frame` while the lane holds less than
    /// `1/share` of its envelope and byte capacity; a closing lane counts
    /// the frame as `connection_closed` here, a full one is left to the caller.
    fn push_reliable(&self, frame: Bytes, share: usize) -> Push {
        let mut st = self.lock();
        if st.close.is_some() {
            drop(st);
            self.shared.metrics.dropped(DropReason::ConnectionClosed);
            return Push::Closing;
        }
        if !self.fits_reliable(&st, frame.len(), share) {
            return Push::Full;
        }
        st.bytes += frame.len();
        st.reliable.push_back(frame);
        drop(st);
        self.shared.wake.notify_one();
        Push::Queued
    }

    /// Whether one more reliable frame of `len` bytes stays within `1/share`
    /// of the lane's envelope and byte capacity.
    fn fits_reliable(&self, st: &LaneState, len: usize, share: usize) -> bool {
        let limits = &self.shared.limits;
        st.reliable.len() < limits.reliable_capacity / share
            && st.bytes + len <= limits.max_bytes / share
    }

    /// Encodes and queues an envelope on the reliable lane.
    pub fn send_envelope(&self, envelope: &Envelope) -> bool {
        self.send_reliable(envelope.encode_framed())
    }

    /// Queues a framed envelope on the unreliable lane, dropping the oldest
    /// queued ones if it is full. False if the frame itself was not queued
    /// (closing, or larger than the byte cap).
    pub fn send_unreliable(&self, frame: Bytes) -> bool {
        let mut st = self.lock();
        if st.close.is_some() {
            drop(st);
            self.shared.metrics.dropped(DropReason::ConnectionClosed);
            return false;
        }
        let limits = self.shared.limits;
        let mut dropped = 0;
        while st.unreliable.len() >= limits.unreliable_capacity
            || (st.bytes + frame.len() > limits.max_bytes && !st.unreliable.is_empty())
        {
            if let Some(old) = st.unreliable.pop_front() {
                st.bytes -= old.len();
                dropped += 1;
            }
        }
        let queued = st.bytes + frame.len() <= limits.max_bytes;
        if queued {
            st.bytes += frame.len();
            st.unreliable.push_back(frame);
        } else {
            dropped += 1;
        }
        drop(st);
        if dropped > 0 {
            self.shared
                .metrics
                .drop_n(DropReason::UnreliableLaneFull, dropped);
        }
        self.shared.wake.notify_one();
        queued
    }

    /// Asks the writer to flush what is queued, then close with `reason`.
    /// The first reason wins.
    pub fn close(&self, reason: CloseReason) {
        let mut st = self.lock();
        if st.close.is_none() {
            st.close = Some(reason);
        }
        drop(st);
        self.shared.wake.notify_one();
    }

    /// Closes at once: queued envelopes are discarded and a writer blocked on
    /// the socket is interrupted.
    pub fn abort(&self, reason: CloseReason) {
        let mut st = self.lock();
        if st.close.is_none() {
            st.close = Some(reason);
        }
        let discarded = st.reliable.len() + st.unreliable.len();
        st.reliable.clear();
        st.unreliable.clear();
        st.bytes = 0;
        drop(st);
        self.shared
            .metrics
            .drop_n(DropReason::ConnectionClosed, discarded as u64);
        self.shared.abort.cancel();
        self.shared.wake.notify_one();
    }

    /// The close reason, once a close was requested.
    pub fn close_reason(&self) -> Option<CloseReason> {
        self.lock().close
    }

    /// Cancelled when the connection must stop immediately.
    pub fn aborted(&self) -> CancellationToken {
        self.shared.abort.clone()
    }

    /// Takes every queued frame at once, lanes apart (reliable, unreliable):
    /// what unit tests read instead of a socket.
    #[cfg(test)]
    pub(crate) fn drain(&self) -> (Vec<Bytes>, Vec<Bytes>) {
        let mut st = self.lock();
        st.bytes = 0;
        (
            st.reliable.drain(..).collect(),
            st.unreliable.drain(..).collect(),
        )
    }

    /// Envelopes the reliable lane can still take (0 once closing).
    pub fn reliable_room(&self) -> usize {
        let st = self.lock();
        if st.close.is_some() {
            return 0;
        }
        self.shared
            .limits
            .reliable_capacity
            .saturating_sub(st.reliable.len())
    }

    /// Envelopes currently queued (both lanes).
    pub fn queued(&self) -> usize {
        let st = self.lock();
        st.reliable.len() + st.unreliable.len()
    }

    /// Waits for work and takes up to `max_bytes` of queued frames
    /// (reliable first; at least one frame even if it is larger).
    pub async fn next_batch(&self, max_bytes: usize) -> Batch {
        loop {
            let notified = self.shared.wake.notified();
            if let Some(batch) = self.take_batch(max_bytes) {
                return batch;
            }
            notified.await;
        }
    }

    /// Like [`Outbound::next_batch`], but never takes work before
    /// `not_before` (the writer passes its previous write plus the flush
    /// delay): work that arrives sooner waits for that instant, so the frames
    /// queued meanwhile leave in the same write; work after a quiet gap is
    /// taken at once, with no timer. So a connection gets at most one write
    /// per flush delay under load (fewer writes and wake-ups per delivery)
    /// and no added latency at light load. A close request is not delayed.
    /// Cancel-safe: nothing is taken before the wait ends.
    pub async fn next_batch_not_before(
        &self,
        max_bytes: usize,
        not_before: Option<tokio::time::Instant>,
    ) -> Batch {
        if let Some(at) = not_before {
            loop {
                if tokio::time::Instant::now() >= at {
                    break; // the gap is over: take work as it comes
                }
                let notified = self.shared.wake.notified();
                let (work, closing) = {
                    let st = self.lock();
                    (
                        !st.reliable.is_empty() || !st.unreliable.is_empty(),
                        st.close.is_some(),
                    )
                };
                if closing {
                    break;
                }
                if work {
                    tokio::time::sleep_until(at).await;
                    break;
                }
                notified.await;
            }
        }
        self.next_batch(max_bytes).await
    }

    /// Like [`Outbound::next_batch`], but keeps the lanes apart for
    /// transports with a datagram path: up to `max_bytes` of reliable frames
    /// (concatenated, at least one) and up to `max_datagrams` unreliable
    /// frames (each still framed; the datagram form is `frame.slice(4..)`).
    pub async fn next_split_batch(&self, max_bytes: usize, max_datagrams: usize) -> SplitBatch {
        loop {
            let notified = self.shared.wake.notified();
            if let Some(batch) = self.take_split_batch(max_bytes, max_datagrams) {
                return batch;
            }
            notified.await;
        }
    }

    fn take_split_batch(&self, max_bytes: usize, max_datagrams: usize) -> Option<SplitBatch> {
        let mut st = self.lock();
        if st.reliable.is_empty() && st.unreliable.is_empty() {
            return st.close.map(|close| SplitBatch {
                close: Some(close),
                ..SplitBatch::default()
            });
        }
        let mut out = BytesMut::new();
        let mut batch = SplitBatch::default();
        while let Some(len) = st.reliable.front().map(Bytes::len) {
            if batch.reliable_count > 0 && out.len() + len > max_bytes {
                break;
            }
            let Some(frame) = st.reliable.pop_front() else {
                break;
            };
            st.bytes -= frame.len();
            out.extend_from_slice(&frame);
            batch.reliable_count += 1;
        }
        while batch.unreliable.len() < max_datagrams {
            let Some(frame) = st.unreliable.pop_front() else {
                break;
            };
            st.bytes -= frame.len();
            batch.unreliable.push(frame);
        }
        batch.reliable = out.freeze();
        if st.reliable.is_empty() && st.unreliable.is_empty() {
            batch.close = st.close;
        }
        Some(batch)
    }

    fn take_batch(&self, max_bytes: usize) -> Option<Batch> {
        let mut st = self.lock();
        if st.reliable.is_empty() && st.unreliable.is_empty() {
            return st.close.map(|close| Batch {
                frames: Bytes::new(),
                count: 0,
                close: Some(close),
            });
        }
        let mut out = BytesMut::new();
        let mut count = 0;
        loop {
            let next_len = st
                .reliable
                .front()
                .or_else(|| st.unreliable.front())
                .map(Bytes::len);
            let Some(len) = next_len else { break };
            if count > 0 && out.len() + len > max_bytes {
                break;
            }
            let frame = match st.reliable.pop_front() {
                Some(f) => f,
                None => match st.unreliable.pop_front() {
                    Some(f) => f,
                    None => break,
                },
            };
            st.bytes -= frame.len();
            out.extend_from_slice(&frame);
            count += 1;
        }
        let close = if st.reliable.is_empty() && st.unreliable.is_empty() {
            st.close
        } else {
            None
        };
        Some(Batch {
            frames: out.freeze(),
            count,
            close,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lanes(reliable: usize, unreliable: usize, max_bytes: usize) -> (Outbound, Arc<Metrics>) {
        let metrics = Arc::new(Metrics::default());
        let limits = LaneLimits {
            reliable_capacity: reliable,
            unreliable_capacity: unreliable,
            max_bytes,
        };
        (Outbound::new(limits, metrics.clone()), metrics)
    }

    #[tokio::test]
    async fn unreliable_lane_drops_oldest() {
        let (out, metrics) = lanes(4, 2, 1 << 20);
        for i in 0..5u8 {
            out.send_unreliable(Bytes::from(vec![i]));
        }
        let batch = out.next_batch(1024).await;
        assert_eq!(&batch.frames[..], &[3, 4]);
        assert_eq!(metrics.drops(DropReason::UnreliableLaneFull), 3);
    }

    #[tokio::test]
    async fn reliable_overflow_closes_as_slow_consumer() {
        let (out, _) = lanes(2, 2, 1 << 20);
        assert!(out.send_reliable(Bytes::from_static(b"a")));
        assert!(out.send_reliable(Bytes::from_static(b"b")));
        assert!(!out.send_reliable(Bytes::from_static(b"c")));
        assert_eq!(out.close_reason(), Some(CloseReason::SlowConsumer));
        assert!(out.aborted().is_cancelled());
        let batch = out.next_batch(1024).await;
        assert_eq!(batch.count, 0);
        assert_eq!(batch.close, Some(CloseReason::SlowConsumer));
    }

    #[tokio::test]
    async fn a_burst_queues_in_order_and_overflows_like_single_pushes() {
        let (out, metrics) = lanes(3, 2, 1 << 20);
        let burst = |s: &'static [&'static [u8]]| s.iter().map(|b| Bytes::from_static(b));
        assert_eq!(out.send_reliable_all(burst(&[b"a", b"b"])), 2);
        let batch = out.next_batch(1024).await;
        assert_eq!((&batch.frames[..], batch.count), (&b"ab"[..], 2));
        // Capacity 3: "c", "d", "e" fit, "f" overflows; "f" and "g" are
        // dropped with the connection, like "c".."g" pushed one by one.
        assert_eq!(
            out.send_reliable_all(burst(&[b"c", b"d", b"e", b"f", b"g"])),
            3
        );
        assert_eq!(out.close_reason(), Some(CloseReason::SlowConsumer));
        assert!(out.aborted().is_cancelled());
        // The 3 queued were discarded by the close, the 2 others never queued.
        assert_eq!(metrics.drops(DropReason::ConnectionClosed), 5);
        assert_eq!(out.send_reliable_all(burst(&[b"h"])), 0);
        assert_eq!(metrics.drops(DropReason::ConnectionClosed), 6);
    }

    #[tokio::test]
    async fn offers_stop_at_half_the_lane_and_never_close() {
        let (out, metrics) = lanes(4, 2, 1 << 20);
        assert!(out.offer_reliable(Bytes::from_static(b"a")));
        assert!(out.offer_reliable(Bytes::from_static(b"b")));
        assert!(!out.offer_reliable(Bytes::from_static(b"c")));
        assert_eq!(metrics.drops(DropReason::ReliableOfferDropped), 1);
        assert_eq!(out.close_reason(), None);
        assert!(out.send_reliable(Bytes::from_static(b"reply")));
        let batch = out.next_batch(1024).await;
        assert_eq!(&batch.frames[..], b"abreply");
        assert!(out.offer_reliable(Bytes::from_static(b"d")));
    }

    #[tokio::test]
    async fn byte_cap_bounds_both_lanes() {
        let (out, _) = lanes(100, 100, 10);
        out.send_unreliable(Bytes::from(vec![0; 6]));
        out.send_unreliable(Bytes::from(vec![1; 6]));
        assert_eq!(out.queued(), 1);
        assert!(!out.send_reliable(Bytes::from(vec![2; 11])));
    }

    #[tokio::test]
    async fn close_flushes_then_closes() {
        let (out, _) = lanes(8, 8, 1 << 20);
        out.send_reliable(Bytes::from_static(b"ab"));
        out.send_unreliable(Bytes::from_static(b"c"));
        out.close(CloseReason::Shutdown);
        let batch = out.next_batch(1024).await;
        assert_eq!(&batch.frames[..], b"abc");
        assert_eq!(batch.close, Some(CloseReason::Shutdown));
        assert!(!out.send_reliable(Bytes::from_static(b"late")));
    }

    #[tokio::test]
    async fn split_batches_keep_the_lanes_apart() {
        let (out, _) = lanes(8, 8, 1 << 20);
        out.send_unreliable(Bytes::from_static(b"u1"));
        out.send_reliable(Bytes::from_static(b"r1"));
        out.send_reliable(Bytes::from_static(b"r2"));
        out.send_unreliable(Bytes::from_static(b"u2"));
        out.send_unreliable(Bytes::from_static(b"u3"));
        out.close(CloseReason::Shutdown);
        let batch = out.next_split_batch(1024, 2).await;
        assert_eq!(&batch.reliable[..], b"r1r2");
        assert_eq!(batch.reliable_count, 2);
        assert_eq!(
            batch.unreliable,
            vec![Bytes::from_static(b"u1"), Bytes::from_static(b"u2")]
        );
        assert_eq!(batch.close, None, "u3 still queued");
        let batch = out.next_split_batch(1024, 2).await;
        assert_eq!(batch.unreliable.len(), 1);
        assert_eq!(batch.close, Some(CloseReason::Shutdown));
        assert_eq!(out.queued(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn work_before_the_gap_ends_waits_and_gathers_what_arrives_meanwhile() {
        let (out, _) = lanes(8, 8, 1 << 20);
        let delay = std::time::Duration::from_millis(2);
        // After a quiet gap: taken at once.
        let previous = tokio::time::Instant::now();
        tokio::time::sleep(delay * 2).await;
        out.send_unreliable(Bytes::from_static(b"q"));
        let started = tokio::time::Instant::now();
        let batch = out
            .next_batch_not_before(1024, Some(previous + delay))
            .await;
        assert_eq!(&batch.frames[..], b"q");
        assert_eq!(started.elapsed(), std::time::Duration::ZERO, "no timer");
        // Right after a write: waits for the gap, and what arrives
        // meanwhile joins the same write.
        let written = tokio::time::Instant::now();
        let produce = async {
            tokio::task::yield_now().await;
            out.send_unreliable(Bytes::from_static(b"a"));
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            out.send_unreliable(Bytes::from_static(b"b"));
        };
        let (batch, ()) = tokio::join!(
            out.next_batch_not_before(1024, Some(written + delay)),
            produce
        );
        assert_eq!(&batch.frames[..], b"ab", "both frames in one write");
        assert_eq!(written.elapsed(), delay, "taken when the gap ended");
        // A close is not delayed.
        out.close(CloseReason::Shutdown);
        let started = tokio::time::Instant::now();
        let batch = out.next_batch_not_before(1024, Some(started + delay)).await;
        assert_eq!(batch.close, Some(CloseReason::Shutdown));
        assert_eq!(started.elapsed(), std::time::Duration::ZERO);
    }

    #[tokio::test]
    async fn batches_respect_the_coalescing_cap() {
        let (out, _) = lanes(8, 8, 1 << 20);
        for _ in 0..4 {
            out.send_reliable(Bytes::from(vec![7; 10]));
        }
        assert_eq!(out.next_batch(25).await.count, 2);
        assert_eq!(out.next_batch(25).await.count, 2);
    }
}
