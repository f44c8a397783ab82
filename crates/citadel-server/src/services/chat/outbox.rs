//! After a commit: live delivery of the committed event and the
//! acknowledgement of its outbox row (`services.md` §5.6).
//!
//! Call order: the service commits (mutation + event + outbox row in one
//! transaction) → [`Outbox::dispatch`] offers the event to this node's
//! subscribers at once (source node first) and hands the row to the
//! consumer → [`Outbox::consume`] asks every [`RemoteDestinations`] for a
//! result; when all are terminal (`Delivered`, `Stale`, `Unknown`) the row is
//! acknowledged (deleted, in batches); a `Retry` keeps it until its
//! `expires_at` (after that history is the only recovery path). A row whose
//! acknowledgement is lost (crash, full queue) simply expires.
//!
//! What it is not: no remote transport. A single node has no remote
//! destinations ([`NoRemote`]); the cluster issue implements the trait
//! with generation-fenced channel leases.

use std::collections::VecDeque;
use std::sync::Arc;

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

    /// Runs one consumer step: takes what is queued (waiting for at least
    /// one row unless retries are pending), asks the remote destinations,
    /// acknowledges terminal rows and keeps retryable ones until they
    /// expire. Returns false once the queue is closed and drained.
    pub async fn consume(
        consumer: &mut Consumer,
        store: &Arc<dyn Store>,
        remote: &Arc<dyn RemoteDestinations>,
        metrics: &Metrics,
    ) -> bool {
        if !consumer.retry.is_empty() {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        let mut batch: Vec<OutboxEvent> = consumer.retry.drain(..).collect();
        if batch.is_empty() {
            match consumer.queue.recv().await {
                Some(first) => batch.push(first),
                None => return false,
            }
        }
        while batch.len() < 512 {
            match consumer.queue.try_recv() {
                Ok(next) => batch.push(next),
                Err(_) => break,
            }
        }
        let now = u64::try_from(now_ms()).unwrap_or(0);
        let mut acks = Vec::with_capacity(batch.len());
        for event in batch {
            let answers = remote.deliver(&event).await;
            if answers.iter().all(|a| a.is_terminal()) {
                acks.push((event.channel_id, event.event_id));
            } else if event.expires_at > now {
                consumer.retry.push_back(event);
            }
        }
        if !acks.is_empty() {
            match store.chat_ack_outbox(acks).await {
                Ok(n) => metrics.service_n(ServiceEvent::ChatOutboxAcked, n),
                Err(err) => {
                    tracing::warn!(error = %err, "chat outbox acknowledgement failed; rows will expire")
                }
            }
        }
        true
    }

    /// The metrics handle (for the service).
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }
}
