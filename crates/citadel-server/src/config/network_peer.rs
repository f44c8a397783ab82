//! `[transport.network_peer]`: NetworkPeer replication (kinds 13-15).
//!
//! The spec's keys (`enabled`, `shared_quantized_state`,
//! `interest_cell_size`, `interest_inner`, `interest_outer`) plus the
//! bounds the authority enforces, each with the default of
//! realtime-behaviour §6: the replication caps, the ack timeout, the
//! authority tick rate and the per-connection proposal limits, and the
//! Lua veto hook's budget and per-connection in-flight bound.
//!
//! What it is not: the driver (`crate::netpeer`). Call order: parsed with
//! the rest of `[transport]`, then [`NetworkPeerConfig::validate`]; the
//! driver builds its core from [`NetworkPeerConfig::authority`].

use citadel_netpeer::{AuthorityConfig, InterestConfig, Limits};
use serde::{Deserialize, Serialize};

use super::{ConfigError, invalid};

/// `[transport.network_peer]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NetworkPeerConfig {
    /// Serve kinds 13/14 (off: they are counted as unsupported and dropped).
    pub enabled: bool,
    /// Share one quantized values section among receivers with the same
    /// plan (§6.5; the bytes are identical either way).
    pub shared_quantized_state: bool,
    /// Interest grid cell edge (world units).
    pub interest_cell_size: f32,
    /// Enter radius.
    pub interest_inner: f32,
    /// Exit radius.
    pub interest_outer: f32,
    /// Authority ticks per second (each sends what changed).
    pub tick_hz: u32,
    /// Unacked states per (object, receiver) before a full bunch is forced.
    pub pending_cap: usize,
    /// Collection operations in one delta before a full bunch is forced.
    pub collection_cap: usize,
    /// Age of the oldest unacked send that re-baselines the pair (ms).
    pub ack_timeout_ms: u64,
    /// Most full bunches one connection is sent per tick (bootstrap,
    /// relevance entry, re-baselines); the rest wait, nearest first.
    pub bootstrap_per_tick: usize,
    /// Proposal bunches per second per connection.
    pub max_bunches_per_sec: u32,
    /// Proposal bytes per second per connection (also the rebroadcast budget).
    pub max_bytes_per_sec: u32,
    /// Changed fields per second per connection.
    pub max_fields_per_sec: u32,
    /// Collection items per second per connection (reserved).
    pub max_collection_items_per_sec: u32,
    /// Largest kind-13 body a client may send.
    pub max_bunch_bytes: u32,
    /// Most changed fields in one proposal.
    pub max_fields_per_bunch: u32,
    /// Default per-field cooldown between accepted proposals (ms).
    pub field_cooldown_ms: u64,
    /// Longest a proposal waits for the Lua `netpeer_on_proposal` verdict,
    /// from the hand-off to the script thread (queue wait included); past
    /// it the proposal is vetoed (ms).
    pub veto_budget_ms: u64,
    /// Proposals of one connection waiting for a Lua verdict at most; one
    /// more is dropped.
    pub veto_max_in_flight: usize,
    /// Reliable-lane slots a tick leaves free for a receiver's other
    /// traffic: a receiver is sent at most its lane's free slots minus this
    /// many bunches per tick, and the rest wait (deltas are cumulative, so
    /// nothing is lost) instead of overflowing the lane and closing the
    /// connection as a slow consumer.
    pub lane_reserve: usize,
}

impl Default for NetworkPeerConfig {
    fn default() -> Self {
        let core = AuthorityConfig::default();
        let l = core.limits;
        NetworkPeerConfig {
            enabled: false,
            shared_quantized_state: core.shared_quantized_state,
            interest_cell_size: core.interest.cell_size,
            interest_inner: core.interest.inner,
            interest_outer: core.interest.outer,
            tick_hz: 20,
            pending_cap: core.pending_cap,
            collection_cap: core.collection_cap,
            ack_timeout_ms: core.ack_timeout_ms,
            bootstrap_per_tick: core.bootstrap_per_tick,
            max_bunches_per_sec: l.bunches_per_sec,
            max_bytes_per_sec: l.bytes_per_sec,
            max_fields_per_sec: l.fields_per_sec,
            max_collection_items_per_sec: l.collection_items_per_sec,
            max_bunch_bytes: l.max_bunch_bytes,
            max_fields_per_bunch: l.max_fields_per_bunch,
            field_cooldown_ms: l.cooldown_ms,
            veto_budget_ms: 5,
            veto_max_in_flight: 16,
            lane_reserve: 64,
        }
    }
}

impl NetworkPeerConfig {
    /// The authority's settings.
    pub fn authority(&self) -> AuthorityConfig {
        AuthorityConfig {
            shared_quantized_state: self.shared_quantized_state,
            pending_cap: self.pending_cap,
            collection_cap: self.collection_cap,
            ack_timeout_ms: self.ack_timeout_ms,
            bootstrap_per_tick: self.bootstrap_per_tick,
            interest: InterestConfig {
                cell_size: self.interest_cell_size,
                inner: self.interest_inner,
                outer: self.interest_outer,
            },
            limits: Limits {
                bunches_per_sec: self.max_bunches_per_sec,
                bytes_per_sec: self.max_bytes_per_sec,
                fields_per_sec: self.max_fields_per_sec,
                collection_items_per_sec: self.max_collection_items_per_sec,
                max_bunch_bytes: self.max_bunch_bytes,
                max_fields_per_bunch: self.max_fields_per_bunch,
                cooldown_ms: self.field_cooldown_ms,
            },
        }
    }

    /// Checks every key; the error names the full dotted key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=1_000).contains(&self.tick_hz) {
            return Err(invalid(
                "transport.network_peer.tick_hz",
                "must be 1..=1000",
            ));
        }
        if !(1..=1_000).contains(&self.veto_budget_ms) {
            return Err(invalid(
                "transport.network_peer.veto_budget_ms",
                "must be 1..=1000",
            ));
        }
        if self.lane_reserve > 65_536 {
            return Err(invalid(
                "transport.network_peer.lane_reserve",
                "must be 0..=65536",
            ));
        }
        if !(1..=4_096).contains(&self.veto_max_in_flight) {
            return Err(invalid(
                "transport.network_peer.veto_max_in_flight",
                "must be 1..=4096",
            ));
        }
        self.authority().validate().map_err(|key| {
            invalid(
                &format!("transport.network_peer.{key}"),
                "out of range (docs/networkpeer.md lists the bounds)",
            )
        })
    }
}
