//! After a commit: live delivery of the committed event and the
//! acknowledgement of its outbox row (`services.md` §5.6).
//!
//! Call order: the service commits (mutation + event + outbox row in one
//! transaction) → [`Outbox::dispatch`] offers the event to this node's
//! subscribers at once (source node first) and hands the row to the
//! consumer → [`Outbox::consume`] asks every [`RemoteDestinations`] for a
//! result; when all are terminal (`Delivered`, `Stale`, `Unknown`) the row is
//! acknowledged (deleted, in batches coalesced over at most [`ACK_DELAY`],
//! so acknowledgements rarely compete with commits for the writer); a `Retry` keeps it until its
//! `expires_at` (after that history is the only recovery path). A row whose
//! acknowledgement is lost (crash, full queue) simply expires.
//!
//! What it is not: no remote transport. A single node has no remote
//! destinations ([`NoRemote`]); the cluster issue implements the trait
//! with generation-fenced channel leases.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use tokio::sync::mpsc;

use super::events;
use super::registry::Registry;
use crate::metrics::{Metrics, ServiceEvent};
use crate::services::accounts::now_ms;
use crate::store::Store;
use crate::util::BoxFuture;

/// One committed event awaiting its destinations.
#[derive(Debug, Clone)]
pub struct OutboxEvent {
    /// Channel.
    pub channel_id: String,
    /// Durable event id.
    pub event_id: u64,
    /// The event JSON (the remote delivery command's `payload`).
    pub payload: String,
    /// Unix ms after which the row is not retried.
    pub expires_at: u64,
}

/// A destination's answer for one event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Fanned out to its subscribers.
    Delivered,
    /// The destination's lease or epoch moved on: nothing to do there.
    Stale,
    /// The destination does not know the channel.
    Unknown,
    /// Infrastructure went away (peer down, timeout): try again later.
    Retry,
}

impl Delivery {
    /// Whether this answer ends the destination's part.
    pub fn is_terminal(self) -> bool {
        self != Delivery::Retry
    }
}

/// The current destinations of a channel beyond this node.
pub trait RemoteDestinations: Send + Sync {
    /// One typed delivery per current remote destination; one answer each.
    fn deliver(&self, event: &OutboxEvent) -> BoxFuture<Vec<Delivery>>;
}

/// A single node: no remote destination.
#[derive(Debug, Default)]
pub struct NoRemote;

impl RemoteDestinations for NoRemote {
    fn deliver(&self, _event: &OutboxEvent) -> BoxFuture<Vec<Delivery>> {
        Box::pin(async { Vec::new() })
    }
}

/// Rows the consumer queue holds at most; past it an acknowledgement is
/// skipped (the row then expires).
pub const CONSUMER_QUEUE: usize = 65_536;

/// Longest wait of a terminal row for its acknowledgement.
pub const ACK_DELAY: Duration = Duration::from_millis(50);

/// Rows one consumer step takes, and acknowledgements written at once.
pub const ACK_BATCH: usize = 512;

/// Wait before a retryable row is offered to its destinations again.
const RETRY_DELAY: Duration = Duration::from_millis(100);

/// Live delivery after commit.
pub struct Outbox {
    registry: Arc<Registry>,
    queue: mpsc::Sender<OutboxEvent>,
    metrics: Arc<Metrics>,
}

impl std::fmt::Debug for Outbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbox").finish_non_exhaustive()
    }
}

/// The consumer's end, run by [`Outbox::consume`].
pub struct Consumer {
    queue: mpsc::Receiver<OutboxEvent>,
    retry: VecDeque<OutboxEvent>,
    /// When the retryable rows are offered again.
    retry_due: Option<Instant>,
    /// Terminal rows not yet acknowledged.
    acks: Vec<(String, u64)>,
    /// When `acks` are written at the latest.
    ack_due: Option<Instant>,
}

impl Outbox {
    /// The outbox over `registry` and the consumer that acknowledges rows.
    pub fn new(registry: Arc<Registry>, metrics: Arc<Metrics>) -> (Self, Consumer) {
        let (queue, rx) = mpsc::channel(CONSUMER_QUEUE);
        (
            Outbox {
                registry,
                queue,
                metrics,
            },
            Consumer {
                queue: rx,
                retry: VecDeque::new(),
                retry_due: None,
                acks: Vec::new(),
                ack_due: None,
            },
        )
    }

    /// Offers the committed event to this node's subscribers, then queues
    /// its row for the remote destinations and the acknowledgement.
    pub fn dispatch(&self, event: OutboxEvent) {
        let frame = events::frame_payload(&event.payload);
        self.registry
            .deliver(&event.channel_id, event.event_id, &frame);
        if self.queue.try_send(event).is_err() {
            tracing::debug!("chat outbox consumer queue full; the row will expire");
        }
    }

    /// Runs one consumer step: waits for a row (or the next retry or
    /// acknowledgement deadline), asks the remote destinations about what
    /// is queued and due, keeps retryable rows until they expire, and
    /// acknowledges terminal rows in coalesced batches: the first pending
    /// acknowledgement waits at most [`ACK_DELAY`], a batch reaching
    /// [`ACK_BATCH`] goes at once, so acknowledgements take a few writer
    /// transactions a second instead of one per commit. Returns false once
    /// the queue is closed and drained (pending acknowledgements written).
    pub async fn consume(
        consumer: &mut Consumer,
        store: &Arc<dyn Store>,
        remote: &Arc<dyn RemoteDestinations>,
        metrics: &Metrics,
    ) -> bool {
        let deadline = match (consumer.retry_due, consumer.ack_due) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let mut batch = Vec::new();
        let first = match deadline {
            None => consumer.queue.recv().await.map(Some),
            Some(due) => tokio::select! {
                got = consumer.queue.recv() => got.map(Some),
                _ = tokio::time::sleep_until(due) => Some(None),
            },
        };
        match first {
            Some(Some(event)) => batch.push(event),
            Some(None) => {}
            None => {
                Self::flush(consumer, store, metrics).await;
                return false;
            }
        }
        let now = Instant::now();
        if consumer.retry_due.is_some_and(|due| due <= now) {
            consumer.retry_due = None;
            batch.extend(consumer.retry.drain(..));
        }
        while batch.len() < ACK_BATCH {
            match consumer.queue.try_recv() {
                Ok(next) => batch.push(next),
                Err(_) => break,
            }
        }
        let now_unix = u64::try_from(now_ms()).unwrap_or(0);
        for event in batch {
            let answers = remote.deliver(&event).await;
            if answers.iter().all(|a| a.is_terminal()) {
                consumer.acks.push((event.channel_id, event.event_id));
            } else if event.expires_at > now_unix {
                consumer.retry.push_back(event);
                consumer.retry_due.get_or_insert(now + RETRY_DELAY);
            }
        }
        if !consumer.acks.is_empty() {
            let due = *consumer.ack_due.get_or_insert(now + ACK_DELAY);
            if consumer.acks.len() >= ACK_BATCH || due <= Instant::now() {
                Self::flush(consumer, store, metrics).await;
            }
        }
        true
    }

    /// Writes the pending acknowledgements (one store call).
    async fn flush(consumer: &mut Consumer, store: &Arc<dyn Store>, metrics: &Metrics) {
        consumer.ack_due = None;
        if consumer.acks.is_empty() {
            return;
        }
        let acks = std::mem::take(&mut consumer.acks);
        match store.chat_ack_outbox(acks).await {
            Ok(n) => metrics.service_n(ServiceEvent::ChatOutboxAcked, n),
            Err(err) => {
                tracing::warn!(error = %err, "chat outbox acknowledgement failed; rows will expire")
            }
        }
    }

    /// The metrics handle (for the service).
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }
}
