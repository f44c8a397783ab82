//! [`OpenConnection`]: one realtime connection's slot under
//! `transport.limits.max_connections` and its open/closed accounting, shared
//! by every transport.
//!
//! Call order: [`OpenConnection::try_open`] right after the transport-level
//! handshake (`None`: the node is full, already counted as `server_full`;
//! the caller closes with that reason's code) → [`OpenConnection::finish`]
//! with the final close reason. What it is not: it closes no socket.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::sync::OwnedSemaphorePermit;

use crate::metrics::{CloseReason, Metrics, RefuseReason};
use crate::node::NodeShared;

/// A held connection slot; counted in `connections_open` until finished.
#[derive(Debug)]
pub struct OpenConnection {
    metrics: Arc<Metrics>,
    _slot: OwnedSemaphorePermit,
}

impl OpenConnection {
    /// Takes a slot, or counts a `server_full` close and returns `None`.
    pub fn try_open(shared: &NodeShared) -> Option<Self> {
        let Ok(slot) = shared.connection_slots.clone().try_acquire_owned() else {
            shared.metrics.closed(CloseReason::ServerFull);
            shared.metrics.refused(RefuseReason::RealtimeMaxConnections);
            return None;
        };
        let metrics = shared.metrics.clone();
        metrics.connections_open.fetch_add(1, Ordering::Relaxed);
        metrics.connections_total.fetch_add(1, Ordering::Relaxed);
        Some(OpenConnection {
            metrics,
            _slot: slot,
        })
    }

    /// Counts the close and frees the slot.
    pub fn finish(self, reason: CloseReason) {
        self.metrics.closed(reason);
        self.metrics
            .connections_open
            .fetch_sub(1, Ordering::Relaxed);
        tracing::debug!(reason = reason.label(), "connection closed");
    }
}
