//! `[authentication]`: token lifetimes and the durable admission limits
//! of the auth routes (`[authentication.limits]`).
//!
//! What it is not: the accounts service (`crate::services::accounts`),
//! which applies these. Call order: parsed as part of [`super::Config`],
//! then [`AuthenticationConfig::validate`].

use serde::{Deserialize, Serialize};

use super::{ConfigError, at_least, invalid};

/// One fixed-window admission rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateRule {
    /// Requests allowed per window (1..=1,000,000).
    pub limit: u32,
    /// Window length (1..=86,400,000 ms).
    pub window_ms: u64,
}

/// `[authentication.limits]`: admission limits of the auth routes, durable
/// and shared by every node on the same database.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthLimitsConfig {
    /// Per client IP (the TCP peer; X-Forwarded-For is ignored).
    pub source: RateRule,
    /// Per normalised email (email route only).
    pub email: RateRule,
    /// Per client IP, only for `create: true`.
    pub registration_source: RateRule,
}

impl Default for AuthLimitsConfig {
    fn default() -> Self {
        AuthLimitsConfig {
            source: RateRule {
                limit: 30,
                window_ms: 60_000,
            },
            email: RateRule {
                limit: 10,
                window_ms: 900_000,
            },
            registration_source: RateRule {
                limit: 10,
                window_ms: 3_600_000,
            },
        }
    }
}

/// `[authentication]`: token lifetimes and admission limits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthenticationConfig {
    /// Access token lifetime.
    pub access_token_ttl_secs: u64,
    /// Refresh token lifetime (renewed by every refresh).
    pub refresh_token_ttl_secs: u64,
    /// Admission limits.
    pub limits: AuthLimitsConfig,
}

impl Default for AuthenticationConfig {
    fn default() -> Self {
        AuthenticationConfig {
            access_token_ttl_secs: 3_600,
            refresh_token_ttl_secs: 30 * 24 * 3_600,
            limits: AuthLimitsConfig::default(),
        }
    }
}

impl AuthenticationConfig {
    /// Checks `authentication.*`, each limit by its own key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        at_least(
            "authentication.access_token_ttl_secs",
            self.access_token_ttl_secs as usize,
            1,
        )?;
        at_least(
            "authentication.refresh_token_ttl_secs",
            self.refresh_token_ttl_secs as usize,
            1,
        )?;
        let limits = &self.limits;
        for (name, rule) in [
            ("source", &limits.source),
            ("email", &limits.email),
            ("registration_source", &limits.registration_source),
        ] {
            rule.validate(&format!("authentication.limits.{name}"))?;
        }
        Ok(())
    }
}

impl RateRule {
    /// Checks one rule; `key` is its dotted section (`authentication.limits.email`).
    pub(crate) fn validate(&self, key: &str) -> Result<(), ConfigError> {
        if !(1..=1_000_000).contains(&self.limit) {
            return Err(invalid(&format!("{key}.limit"), "must be 1..=1000000"));
        }
        if !(1..=86_400_000).contains(&self.window_ms) {
            return Err(invalid(&format!("{key}.window_ms"), "must be 1..=86400000"));
        }
        Ok(())
    }
}
