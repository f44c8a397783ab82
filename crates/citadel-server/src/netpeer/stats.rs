//! The NetworkPeer counters as `/metrics` shows them: the authority's
//! [`Counters`] copied into atomics after every driven call (the core's
//! counters are cumulative, so a copy is the whole state), rendered as
//! `citadel_netpeer_rejected_total{reason=…}` (one line per §6.3 rejection
//! reason) and `citadel_netpeer_events_total{event=…}` (fulls by cause,
//! deltas, acks, caps tripping, relevance), plus the driver's own Lua veto
//! outcomes as `citadel_netpeer_veto_total{outcome=…}`.
//!
//! What it is not: a second source of truth; the core counts, this shows.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use super::VetoOutcome;
use crate::metrics::labeled_counters;
use citadel_netpeer::{Counters, Rejection};

/// One event counter: its label and where the core keeps it.
type Event = (&'static str, fn(&Counters) -> u64);

/// Every event counter, in render order.
const EVENTS: [Event; 17] = [
    ("fulls", |c| c.fulls),
    ("full_pending_cap", |c| c.full_pending_cap),
    ("full_collection_cap", |c| c.full_collection_cap),
    ("full_ack_timeout", |c| c.full_ack_timeout),
    ("full_correction", |c| c.full_correction),
    ("deltas", |c| c.deltas),
    ("bunch_bytes", |c| c.bunch_bytes),
    ("acks_advanced", |c| c.acks_advanced),
    ("acks_ignored", |c| c.acks_ignored),
    ("acks_malformed", |c| c.acks_malformed),
    ("proposals_applied", |c| c.proposals_applied),
    ("rebroadcast_budget_stops", |c| c.rebroadcast_budget_stops),
    ("tokens_exhausted", |c| c.tokens_exhausted),
    ("relevance_enter", |c| c.relevance_enter),
    ("relevance_exit", |c| c.relevance_exit),
    ("full_deferred", |c| c.full_deferred),
    ("lane_deferred", |c| c.lane_deferred),
];

/// The published copy.
#[derive(Debug)]
pub struct NetpeerStats {
    rejected: [AtomicU64; Rejection::ALL.len()],
    events: [AtomicU64; EVENTS.len()],
    /// Gauge `citadel_netpeer_fulls_waiting`: pairs whose full bunch the
    /// last tick deferred (`bootstrap_per_tick`).
    fulls_waiting: AtomicU64,
    /// Bunches the router could not queue (the connection was gone or its
    /// reliable lane refused them).
    pub undelivered: AtomicU64,
    /// Lua veto outcomes (the driver counts these, not the core).
    veto: [AtomicU64; VetoOutcome::ALL.len()],
}

impl Default for NetpeerStats {
    fn default() -> Self {
        NetpeerStats {
            rejected: std::array::from_fn(|_| AtomicU64::new(0)),
            events: std::array::from_fn(|_| AtomicU64::new(0)),
            fulls_waiting: AtomicU64::new(0),
            undelivered: AtomicU64::new(0),
            veto: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl NetpeerStats {
    /// Copies the core's counters.
    pub fn publish(&self, counters: &Counters) {
        for (slot, v) in self.rejected.iter().zip(counters.rejected.iter()) {
            slot.store(*v, Ordering::Relaxed);
        }
        for (slot, (_, get)) in self.events.iter().zip(EVENTS.iter()) {
            slot.store(get(counters), Ordering::Relaxed);
        }
        self.fulls_waiting
            .store(counters.fulls_waiting, Ordering::Relaxed);
    }

    /// Pairs whose full bunch the last tick deferred (`bootstrap_per_tick`).
    pub fn fulls_waiting(&self) -> u64 {
        self.fulls_waiting.load(Ordering::Relaxed)
    }

    /// Rejections so far for `reason`.
    pub fn rejected(&self, reason: Rejection) -> u64 {
        self.rejected
            .get(reason as usize)
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }

    /// An event counter by its label (0 for an unknown label).
    pub fn event(&self, label: &str) -> u64 {
        EVENTS
            .iter()
            .position(|(l, _)| *l == label)
            .and_then(|i| self.events.get(i))
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }

    /// Counts one proposal that went through the Lua veto path.
    pub fn count_veto(&self, outcome: VetoOutcome) {
        if let Some(c) = self.veto.get(outcome as usize) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Lua veto outcomes so far.
    pub fn veto(&self, outcome: VetoOutcome) -> u64 {
        self.veto
            .get(outcome as usize)
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }

    /// Appends the Prometheus lines.
    pub fn render(&self, out: &mut String) {
        labeled_counters(
            out,
            "citadel_netpeer_rejected_total",
            "NetworkPeer proposals dropped, by reason.",
            "reason",
            Rejection::ALL
                .into_iter()
                .map(|r| (r.as_str(), self.rejected(r))),
        );
        labeled_counters(
            out,
            "citadel_netpeer_events_total",
            "NetworkPeer replication events, by event.",
            "event",
            EVENTS
                .iter()
                .zip(self.events.iter())
                .map(|((label, _), c)| (*label, c.load(Ordering::Relaxed))),
        );
        let _ = writeln!(
            out,
            "# HELP citadel_netpeer_fulls_waiting NetworkPeer full bunches the last tick deferred (bootstrap_per_tick).\n# TYPE citadel_netpeer_fulls_waiting gauge\ncitadel_netpeer_fulls_waiting {}",
            self.fulls_waiting()
        );
        let _ = writeln!(
            out,
            "# HELP citadel_netpeer_undelivered_total NetworkPeer bunches the router could not queue.\n# TYPE citadel_netpeer_undelivered_total counter\ncitadel_netpeer_undelivered_total {}",
            self.undelivered.load(Ordering::Relaxed)
        );
        labeled_counters(
            out,
            "citadel_netpeer_veto_total",
            "NetworkPeer proposals judged by the Lua veto hook, by outcome.",
            "outcome",
            VetoOutcome::ALL
                .into_iter()
                .map(|o| (o.as_str(), self.veto(o))),
        );
    }
}
