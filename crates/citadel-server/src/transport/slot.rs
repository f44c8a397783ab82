//! Admission of realtime connections, shared by every transport:
//! [`Admission`] holds the node-wide slots (`transport.limits.max_connections`)
//! and the per-address cap (`transport.limits.max_connections_per_ip`, over
//! WebSocket, QUIC and WebTransport together); [`OpenConnection`] is one
//! connection's slot and its open/closed accounting.
//!
//! Call order: [`Admission::try_address`] at accept (before any handshake;
//! `None` is already counted) → [`Admission::try_open`] right after the
//! transport-level handshake (`None`: the node is full, already counted as
//! `server_full`; the caller closes with that reason's code) →
//! [`OpenConnection::finish`] with the final close reason. What it is not:
//! it closes no socket.

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::conn_limits::{AddressLimit, AddressPermit};
use crate::metrics::{CloseReason, Metrics, RefuseReason};

/// The realtime connection caps of one node.
#[derive(Debug)]
pub struct Admission {
    slots: Arc<Semaphore>,
    per_address: Arc<AddressLimit>,
    metrics: Arc<Metrics>,
}

impl Admission {
    /// `max_connections` slots and at most `max_per_address` connections
    /// from one source address (0 = no cap).
    pub fn new(max_connections: usize, max_per_address: usize, metrics: Arc<Metrics>) -> Self {
        Admission {
            slots: Arc::new(Semaphore::new(max_connections)),
            per_address: AddressLimit::new(max_per_address),
            metrics,
        }
    }

    /// A permit for one more connection from `ip`, or `None` (counted as
    /// `realtime_per_address`).
    pub fn try_address(&self, ip: IpAddr) -> Option<AddressPermit> {
        let permit = self.per_address.try_acquire(ip);
        if permit.is_none() {
            self.metrics.refused(RefuseReason::RealtimePerAddress);
        }
        permit
    }

    /// Takes a slot, or counts a `server_full` close and returns `None`.
    pub fn try_open(&self) -> Option<OpenConnection> {
        let Ok(slot) = self.slots.clone().try_acquire_owned() else {
            self.metrics.closed(CloseReason::ServerFull);
            self.metrics.refused(RefuseReason::RealtimeMaxConnections);
            return None;
        };
        let metrics = self.metrics.clone();
        metrics.connections_open.fetch_add(1, Ordering::Relaxed);
        metrics.connections_total.fetch_add(1, Ordering::Relaxed);
        Some(OpenConnection {
            metrics,
            _slot: slot,
        })
    }
}

/// A held connection slot; counted in `connections_open` until finished.
#[derive(Debug)]
pub struct OpenConnection {
    metrics: Arc<Metrics>,
    _slot: OwnedSemaphorePermit,
}

impl OpenConnection {
    /// Counts the close and frees the slot.
    pub fn finish(self, reason: CloseReason) {
        self.metrics.closed(reason);
        self.metrics
            .connections_open
            .fetch_sub(1, Ordering::Relaxed);
        tracing::debug!(reason = reason.label(), "connection closed");
    }
}
