//! `[database]`: where accounts, sessions and every durable service keep
//! their state, and the pool that reaches it.
//!
//! What it is not: the store (`crate::store`). The URL is a secret: it is
//! never logged and no error here echoes it. Call order: parsed as part of
//! [`super::Config`], then [`DatabaseConfig::validate`].

use serde::{Deserialize, Serialize};

use super::{ConfigError, at_least, invalid};

/// `[database]`: where accounts and sessions live.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DatabaseConfig {
    /// `sqlite://path/to/file.sqlite` (created on first start), `sqlite::memory:`,
    /// or `postgres://user@host/db`. Secret: never logged.
    pub url: String,
    /// Pool size.
    pub max_connections: u32,
    /// Deadline to connect or to acquire a pooled connection.
    pub acquire_timeout_ms: u64,
    /// SQLite: how often a background task checkpoints the write-ahead log
    /// (ms); 0 leaves it to SQLite, inside the commit that crosses 1000 log
    /// pages.
    pub wal_checkpoint_interval_ms: u64,
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        DatabaseConfig {
            url: "sqlite://data/citadel.sqlite".into(),
            max_connections: 10,
            acquire_timeout_ms: 5_000,
            wal_checkpoint_interval_ms: 200,
        }
    }
}

impl DatabaseConfig {
    /// Checks `database.*`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.url.trim().is_empty() {
            return Err(invalid("database.url", "must not be empty"));
        }
        at_least("database.max_connections", self.max_connections as usize, 1)?;
        at_least(
            "database.acquire_timeout_ms",
            self.acquire_timeout_ms as usize,
            1,
        )
    }
}
