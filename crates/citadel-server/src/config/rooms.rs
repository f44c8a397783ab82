//! `[rooms]` and `[shutdown]`: the built-in room policy's bounds and the
//! shutdown grace.
//!
//! What it is not: the realm (`crate::realm`) or the shutdown sequence
//! (`crate::node`). Call order: parsed as part of [`super::Config`], then
//! [`RoomsConfig::validate`] (the grace has no invalid value).

use serde::{Deserialize, Serialize};

use super::{ConfigError, at_least, invalid};

/// `[rooms]`: the built-in room policy and bounds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RoomsConfig {
    /// `max_players` of rooms created without a script label (0 = unlimited).
    pub default_max_players: u32,
    /// Most rooms alive at once; creating past it is refused.
    pub max_rooms: usize,
    /// Longest room name (ROOM_CREATE params) accepted.
    pub max_name_bytes: usize,
}

impl Default for RoomsConfig {
    fn default() -> Self {
        RoomsConfig {
            default_max_players: 0,
            max_rooms: 10_000,
            max_name_bytes: 128,
        }
    }
}

impl RoomsConfig {
    /// Checks `rooms.*`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        at_least("rooms.max_rooms", self.max_rooms, 1)?;
        at_least("rooms.max_name_bytes", self.max_name_bytes, 1)?;
        if self.max_name_bytes > usize::from(u16::MAX) {
            return Err(invalid("rooms.max_name_bytes", "must not exceed 65535"));
        }
        Ok(())
    }
}

/// `[shutdown]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ShutdownConfig {
    /// How long queued envelopes may flush after SIGINT/SIGTERM.
    pub grace_ms: u64,
}

impl Default for ShutdownConfig {
    fn default() -> Self {
        ShutdownConfig { grace_ms: 5_000 }
    }
}
