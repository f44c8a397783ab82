//! `[matchmaker]`: the bounds of the ticket queue and of the handoff.

use serde::{Deserialize, Serialize};

use crate::config::ConfigError;

/// `[matchmaker]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MatchmakerConfig {
    /// Queued tickets this node holds; past it `matchmaker.add` answers
    /// `matchmaker queue full`.
    pub max_tickets: usize,
    /// Properties one ticket may carry.
    pub max_properties: usize,
    /// Longest string property value, in bytes.
    pub max_property_value_bytes: usize,
    /// Longest query text, in bytes.
    pub max_query_bytes: usize,
    /// Deepest parenthesis nesting of a query.
    pub max_query_depth: usize,
    /// Lifetime of a join token (and of the `status` record of a formed
    /// ticket), in milliseconds.
    pub handoff_ttl_ms: u64,
    /// Period of the lifecycle tick that expires tickets.
    pub tick_ms: u64,
    /// `matchmaker.add` / `cancel` calls per second one connection may make
    /// (on top of `transport.limits`).
    pub calls_per_second: u32,
    /// Burst of such calls.
    pub call_burst: u32,
}

impl Default for MatchmakerConfig {
    fn default() -> Self {
        MatchmakerConfig {
            max_tickets: 100_000,
            max_properties: 32,
            max_property_value_bytes: 256,
            max_query_bytes: 1024,
            max_query_depth: 16,
            handoff_ttl_ms: 30_000,
            tick_ms: 250,
            calls_per_second: 5,
            call_burst: 10,
        }
    }
}

impl MatchmakerConfig {
    /// Every bound must be positive.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let positive = [
            ("matchmaker.max_tickets", self.max_tickets as u64),
            ("matchmaker.max_properties", self.max_properties as u64),
            (
                "matchmaker.max_property_value_bytes",
                self.max_property_value_bytes as u64,
            ),
            ("matchmaker.max_query_bytes", self.max_query_bytes as u64),
            ("matchmaker.max_query_depth", self.max_query_depth as u64),
            ("matchmaker.handoff_ttl_ms", self.handoff_ttl_ms),
            ("matchmaker.tick_ms", self.tick_ms),
            (
                "matchmaker.calls_per_second",
                u64::from(self.calls_per_second),
            ),
            ("matchmaker.call_burst", u64::from(self.call_burst)),
        ];
        for (key, value) in positive {
            if value == 0 {
                return Err(ConfigError::Invalid {
                    key: key.into(),
                    message: "must be at least 1".into(),
                });
            }
        }
        if self.max_query_depth > 64 {
            return Err(ConfigError::Invalid {
                key: "matchmaker.max_query_depth".into(),
                message: "must be at most 64".into(),
            });
        }
        Ok(())
    }
}
