//! The per-connection outbound queue: two bounded lanes drained by one
//! writer task.
//!
//! - Reliable lane: envelopes that must arrive (room frames, RPC replies,
//!   relayed application kinds). An entry is one framed envelope or a
//!   packed burst of several (a NetworkPeer tick's deltas for this
//!   connection); the envelope capacity counts each envelope. Full, or past
//!   the byte cap → the client is too slow: the connection is closed with
//!   `SlowConsumer`.
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
use citadel_wire::{Envelope, framed_len};
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

/// One reliable queue entry: a framed envelope, or several concatenated
/// (a packed burst, [`Outbound::send_reliable_packed`]), and how many.
#[derive(Debug)]
struct Reliable {
    frames: Bytes,
    envelopes: usize,
}

#[derive(Debug, Default)]
struct LaneState {
    reliable: VecDeque<Reliable>,
    /// Envelopes in `reliable` (a packed entry counts each of its own):
    /// what the lane's envelope capacity bounds.
    reliable_envelopes: usize,
    unreliable: VecDeque<Bytes>,
    bytes: usize,
    close: Option<CloseReason>,
}

impl LaneState {
    /// Moves reliable envelopes into `out`, in order, while `out` stays
    /// within `max_bytes` (at least one envelope when `count` is 0, however
    /// long), adding them to `count`. A packed entry that does not fit
    /// whole gives the whole envelopes from its front that do, so a write
    /// is never longer than `max_bytes` because of packing. Returns whether
    /// the reliable lane was emptied (budget left for other frames).
    fn take_reliable(&mut self, out: &mut BytesMut, max_bytes: usize, count: &mut usize) -> bool {
        while let Some(front) = self.reliable.front_mut() {
            let room = max_bytes.saturating_sub(out.len());
            let whole = front.frames.len() <= room || (*count == 0 && front.envelopes == 1);
            if !whole {
                let (taken, envelopes) = front.split_front(room, *count == 0);
                if front.envelopes == 0 {
                    self.reliable.pop_front();
                }
                self.bytes -= taken.len();
                self.reliable_envelopes -= envelopes;
                out.extend_from_slice(&taken);
                *count += envelopes;
                return false;
            }
            let Some(entry) = self.reliable.pop_front() else {
                break;
            };
            self.bytes -= entry.frames.len();
            self.reliable_envelopes -= entry.envelopes;
            out.extend_from_slice(&entry.frames);
            *count += entry.envelopes;
        }
        true
    }
}

impl Reliable {
    /// Splits off the whole envelopes at the front that fit in `room`
    /// bytes (at least one if `at_least_one`), leaving the rest; returns
    /// them and how many. A packed entry is concatenated framed envelopes,
    /// each led by its length prefix.
    fn split_front(&mut self, room: usize, at_least_one: bool) -> (Bytes, usize) {
        let mut end = 0;
        let mut n = 0;
        while n < self.envelopes {
            let rest = self.frames.get(end..).unwrap_or_default();
            // A malformed tail (never built here) counts as one envelope
            // reaching the end.
            let next = framed_len(rest).map_or(self.frames.len(), |len| {
                end.saturating_add(len).min(self.frames.len())
            });
            if next > room && !(at_least_one && n == 0) {
                break;
            }
            end = next;
            n += 1;
        }
        if n == self.envelopes || end == self.frames.len() {
            // All of it (or a malformed tail, which goes with the rest).
            let all = std::mem::take(&mut self.frames);
            let taken = std::mem::take(&mut self.envelopes);
            return (all, taken);
        }
        self.envelopes -= n;
        (self.frames.split_to(end), n)
    }
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
        match self.push_reliable(frame, 1, 1) {
            Push::Queued => true,
            Push::Closing => false,
            Push::Full => {
                self.shared.metrics.dropped(DropReason::ConnectionClosed);
                self.abort(CloseReason::SlowConsumer);
                false
            }
        }
    }

    /// Queues `envelopes` framed envelopes, concatenated in order in
    /// `packed`, on the reliable lane as one entry: one lock, one wake-up,
    /// and none of the per-envelope queue work (what a producer with a
    /// burst for one connection, a NetworkPeer tick, uses instead of a push
    /// per frame). The lane's envelope capacity counts each of them. All
    /// or nothing: a burst that does not fit closes the connection as a
    /// slow consumer, and its envelopes count as `connection_closed` (as
    /// they would pushed one by one, since the close discards what the
    /// burst had queued). Returns how many were queued.
    pub fn send_reliable_packed(&self, packed: Bytes, envelopes: usize) -> usize {
        if envelopes == 0 {
            return 0;
        }
        match self.push_reliable(packed, envelopes, 1) {
            Push::Queued => envelopes,
            Push::Closing => 0,
            Push::Full => {
                self.shared
                    .metrics
                    .drop_n(DropReason::ConnectionClosed, envelopes as u64);
                self.abort(CloseReason::SlowConsumer);
                0
            }
        }
    }

    /// Offers a framed envelope to the reliable lane without risking the
    /// connection: it is queued only while the lane holds less than half
    /// its envelope and byte capacity (the rest stays free for replies and
    /// other reliable traffic); otherwise it is dropped, counted as
    /// `reliable_offer_dropped`, and false is returned.
    pub fn offer_reliable(&self, frame: Bytes) -> bool {
        match self.push_reliable(frame, 1, 2) {
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

    /// The one reliable push: queues `frames` (holding `envelopes` framed
    /// envelopes) while the lane stays within `1/share` of its envelope and
    /// byte capacity; a closing lane counts them as `connection_closed`
    /// here, a full one is left to the caller.
    fn push_reliable(&self, frames: Bytes, envelopes: usize, share: usize) -> Push {
        let mut st = self.lock();
        if st.close.is_some() {
            drop(st);
            self.shared
                .metrics
                .drop_n(DropReason::ConnectionClosed, envelopes as u64);
            return Push::Closing;
        }
        if !self.fits_reliable(&st, frames.len(), envelopes, share) {
            return Push::Full;
        }
        st.bytes += frames.len();
        st.reliable_envelopes += envelopes;
        st.reliable.push_back(Reliable { frames, envelopes });
        drop(st);
        self.shared.wake.notify_one();
        Push::Queued
    }

    /// Whether `envelopes` more reliable envelopes of `len` bytes in all
    /// stay within `1/share` of the lane's envelope and byte capacity.
    fn fits_reliable(&self, st: &LaneState, len: usize, envelopes: usize, share: usize) -> bool {
        let limits = &self.shared.limits;
        st.reliable_envelopes + envelopes <= limits.reliable_capacity / share
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
        let discarded = st.reliable_envelopes + st.unreliable.len();
        st.reliable.clear();
        st.reliable_envelopes = 0;
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
        st.reliable_envelopes = 0;
        (
            st.reliable.drain(..).map(|r| r.frames).collect(),
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
            .saturating_sub(st.reliable_envelopes)
    }

    /// Envelopes currently queued (both lanes).
    pub fn queued(&self) -> usize {
        let st = self.lock();
        st.reliable_envelopes + st.unreliable.len()
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
        st.take_reliable(&mut out, max_bytes, &mut batch.reliable_count);
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
        // Reliable first, then unreliable, while the budget lasts.
        if st.take_reliable(&mut out, max_bytes, &mut count) {
            while let Some(len) = st.unreliable.front().map(Bytes::len) {
                if count > 0 && out.len() + len > max_bytes {
                    break;
                }
                let Some(frame) = st.unreliable.pop_front() else {
                    break;
                };
                st.bytes -= frame.len();
                out.extend_from_slice(&frame);
                count += 1;
            }
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
    async fn a_packed_burst_counts_each_envelope_and_overflows_as_a_whole() {
        let (out, metrics) = lanes(3, 2, 1 << 20);
        assert_eq!(out.send_reliable_packed(Bytes::from_static(b"ab"), 2), 2);
        assert_eq!((out.reliable_room(), out.queued()), (1, 2));
        assert_eq!(out.send_reliable_packed(Bytes::new(), 0), 0, "nothing");
        let batch = out.next_batch(1024).await;
        assert_eq!((&batch.frames[..], batch.count), (&b"ab"[..], 2));
        assert_eq!(out.reliable_room(), 3);
        // Capacity 3: one queued plus a burst of 3 does not fit. The
        // connection closes as a slow consumer; the burst's 3 and the 1
        // the close discards count as dropped, as 4 single pushes would.
        assert!(out.send_reliable(Bytes::from_static(b"c")));
        assert_eq!(out.send_reliable_packed(Bytes::from_static(b"def"), 3), 0);
        assert_eq!(out.close_reason(), Some(CloseReason::SlowConsumer));
        assert!(out.aborted().is_cancelled());
        assert_eq!(metrics.drops(DropReason::ConnectionClosed), 4);
        assert_eq!(out.reliable_room(), 0);
        assert_eq!(out.send_reliable_packed(Bytes::from_static(b"gh"), 2), 0);
        assert_eq!(metrics.drops(DropReason::ConnectionClosed), 6);
    }

    /// `n` framed envelopes of kind 13 with `len`-byte bodies, packed.
    fn packed(n: usize, len: usize) -> Bytes {
        let one = Envelope::new(13, vec![7; len]).encode_framed();
        Bytes::from(one.repeat(n))
    }

    #[tokio::test]
    async fn a_packed_burst_is_cut_between_envelopes_to_keep_writes_within_the_budget() {
        let (out, _) = lanes(64, 2, 1 << 20);
        // Ten envelopes of 10 framed bytes each (4 + 2 + 4).
        out.send_reliable(Bytes::from_static(b"r1"));
        out.send_reliable_packed(packed(10, 4), 10);
        let batch = out.next_batch(25).await;
        assert_eq!(
            (batch.frames.len(), batch.count),
            (22, 3),
            "r1 and two whole envelopes"
        );
        assert_eq!((out.queued(), out.reliable_room()), (8, 56));
        let batch = out.next_batch(25).await;
        assert_eq!((batch.frames.len(), batch.count), (20, 2));
        // A budget below one envelope still takes one.
        let batch = out.next_split_batch(3, 8).await;
        assert_eq!((batch.reliable.len(), batch.reliable_count), (10, 1));
        let batch = out.next_batch(1 << 20).await;
        assert_eq!((batch.frames.len(), batch.count), (50, 5));
        assert_eq!((out.queued(), out.reliable_room()), (0, 64));
        let mut rest = BytesMut::from(&batch.frames[..]);
        let mut decoded = 0;
        while let Ok(Some(env)) = citadel_wire::decode_framed(&mut rest) {
            assert_eq!((env.kind, &env.body[..]), (13, &[7u8; 4][..]));
            decoded += 1;
        }
        assert_eq!(decoded, 5, "cut only between whole envelopes");
    }

    #[tokio::test]
    async fn a_packed_burst_goes_whole_into_a_split_batch() {
        let (out, _) = lanes(8, 2, 1 << 20);
        out.send_reliable(Bytes::from_static(b"r1"));
        out.send_reliable_packed(Bytes::from_static(b"p1p2p3"), 3);
        out.send_reliable(Bytes::from_static(b"r2"));
        // Within the byte budget a packed entry goes whole.
        let batch = out.next_split_batch(1024, 8).await;
        assert_eq!(&batch.reliable[..], b"r1p1p2p3r2");
        assert_eq!(batch.reliable_count, 5);
        assert_eq!(out.queued(), 0);
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
