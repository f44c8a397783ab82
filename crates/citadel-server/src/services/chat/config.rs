//! `[chat]` and `[chat.limits]`: bounds of durable chat and its fixed-window
//! rate limits (`services.md` §5.3), with their defaults and validation.

use serde::{Deserialize, Serialize};

use crate::config::{ConfigError, RateRule};

/// `[chat.limits]`: every rule is a durable fixed window shared by the
/// nodes on one database.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ChatLimits {
    /// `chat.join` per user.
    pub join: RateRule,
    /// `chat.history` per user.
    pub history: RateRule,
    /// `chat.send` per user.
    pub send_user: RateRule,
    /// `chat.send` per user and channel.
    pub send_user_channel: RateRule,
    /// `chat.send` per channel.
    pub send_channel: RateRule,
    /// `chat.typing` per user.
    pub typing_user: RateRule,
    /// `chat.typing` per user and channel.
    pub typing_user_channel: RateRule,
    /// `chat.edit` / `chat.delete` per user.
    pub mutation_user: RateRule,
    /// `chat.edit` / `chat.delete` per user and channel.
    pub mutation_user_channel: RateRule,
    /// `chat.moderate` per moderator.
    pub moderation_operator: RateRule,
    /// `chat.moderate` per channel.
    pub moderation_channel: RateRule,
}

const fn rule(limit: u32, window_ms: u64) -> RateRule {
    RateRule { limit, window_ms }
}

impl Default for ChatLimits {
    fn default() -> Self {
        ChatLimits {
            join: rule(12, 60_000),
            history: rule(60, 60_000),
            send_user: rule(8, 10_000),
            send_user_channel: rule(12, 10_000),
            send_channel: rule(160, 10_000),
            typing_user: rule(20, 10_000),
            typing_user_channel: rule(12, 10_000),
            mutation_user: rule(4, 60_000),
            mutation_user_channel: rule(8, 60_000),
            moderation_operator: rule(30, 60_000),
            moderation_channel: rule(60, 60_000),
        }
    }
}

impl ChatLimits {
    fn rules(&self) -> [(&'static str, &RateRule); 11] {
        [
            ("join", &self.join),
            ("history", &self.history),
            ("send_user", &self.send_user),
            ("send_user_channel", &self.send_user_channel),
            ("send_channel", &self.send_channel),
            ("typing_user", &self.typing_user),
            ("typing_user_channel", &self.typing_user_channel),
            ("mutation_user", &self.mutation_user),
            ("mutation_user_channel", &self.mutation_user_channel),
            ("moderation_operator", &self.moderation_operator),
            ("moderation_channel", &self.moderation_channel),
        ]
    }
}

/// `[chat]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ChatConfig {
    /// Longest message content, in bytes (1..=65536).
    pub max_content_bytes: usize,
    /// How long a `typing: true` state lasts unless renewed (100..=60000 ms).
    pub typing_ttl_ms: u64,
    /// Edit window after creation (ms).
    pub edit_window_ms: u64,
    /// Delete window after creation (ms).
    pub delete_window_ms: u64,
    /// Retry window of an outbox row (ms): after it, history is the only
    /// recovery path.
    pub outbox_retry_ms: u64,
    /// Undelivered outbox rows at most (all channels); a commit past it is
    /// refused.
    pub max_outbox_rows: u32,
    /// Channels one connection may subscribe to.
    pub max_subscriptions_per_connection: usize,
    /// Live subscriptions one channel may hold on this node.
    pub max_subscribers_per_channel: usize,
    /// How often direct, group and room subscriptions are re-authorised
    /// (an unfriend, a block, a kick or a move elsewhere revokes them).
    pub reauthorize_interval_ms: u64,
    /// The rate limits.
    pub limits: ChatLimits,
}

impl Default for ChatConfig {
    fn default() -> Self {
        ChatConfig {
            max_content_bytes: 2_048,
            typing_ttl_ms: 5_000,
            edit_window_ms: 5 * 60_000,
            delete_window_ms: 24 * 3_600_000,
            outbox_retry_ms: 30_000,
            max_outbox_rows: 10_000,
            max_subscriptions_per_connection: 32,
            max_subscribers_per_channel: 1_000,
            reauthorize_interval_ms: 1_000,
            limits: ChatLimits::default(),
        }
    }
}

fn within(key: &str, value: u64, min: u64, max: u64) -> Result<(), ConfigError> {
    if !(min..=max).contains(&value) {
        return Err(ConfigError::Invalid {
            key: format!("chat.{key}"),
            message: format!("must be {min}..={max}"),
        });
    }
    Ok(())
}

impl ChatConfig {
    /// Checks every key; the error names it.
    pub fn validate(&self) -> Result<(), ConfigError> {
        within(
            "max_content_bytes",
            self.max_content_bytes as u64,
            1,
            65_536,
        )?;
        within("typing_ttl_ms", self.typing_ttl_ms, 100, 60_000)?;
        within("edit_window_ms", self.edit_window_ms, 1, 86_400_000 * 365)?;
        within(
            "delete_window_ms",
            self.delete_window_ms,
            1,
            86_400_000 * 365,
        )?;
        within("outbox_retry_ms", self.outbox_retry_ms, 1_000, 3_600_000)?;
        within(
            "max_outbox_rows",
            u64::from(self.max_outbox_rows),
            1,
            10_000_000,
        )?;
        within(
            "max_subscriptions_per_connection",
            self.max_subscriptions_per_connection as u64,
            1,
            10_000,
        )?;
        within(
            "max_subscribers_per_channel",
            self.max_subscribers_per_channel as u64,
            1,
            1_000_000,
        )?;
        within(
            "reauthorize_interval_ms",
            self.reauthorize_interval_ms,
            10,
            60_000,
        )?;
        for (name, rule) in self.limits.rules() {
            rule.validate(&format!("chat.limits.{name}"))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_bad_keys_are_named() {
        assert!(ChatConfig::default().validate().is_ok());
        let mut c = ChatConfig::default();
        c.limits.send_channel.limit = 0;
        let err = c.validate().unwrap_err().to_string();
        assert!(err.contains("chat.limits.send_channel.limit"), "{err}");
        let c = ChatConfig {
            typing_ttl_ms: 10,
            ..ChatConfig::default()
        };
        assert!(
            c.validate()
                .unwrap_err()
                .to_string()
                .contains("chat.typing_ttl_ms")
        );
    }
}
