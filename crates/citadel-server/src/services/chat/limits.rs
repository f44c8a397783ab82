//! The `[chat.limits]` fixed windows, charged through the store's durable
//! `chat_rate_windows` (one row per hashed rule and key, shared by every
//! node on the database). Keys are hashed with
//! their rule name. All rules of one action are charged together or not at
//! all; a storage failure refuses the action (fail closed). `chat.send`'s
//! rules are charged inside the message's commit transaction
//! ([`Limiter::charges`] → the group committer), every other action's in
//! one statement of its own ([`Limiter::charge`]).
//!
//! What it is not: no in-memory fallback, and no retry hint.

use std::sync::Arc;

use super::ChatError;
use super::config::ChatLimits;
use crate::config::RateRule;
use crate::metrics::{Metrics, ServiceEvent};
use crate::services::tokens::sha256_hex;
use crate::store::{RateCharge, Store};

/// What is being charged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// `chat.join`.
    Join,
    /// `chat.history`.
    History,
    /// `chat.send`.
    Send,
    /// `chat.typing`.
    Typing,
    /// `chat.edit` and `chat.delete`.
    Mutation,
    /// `chat.moderate`.
    Moderation,
}

/// Charges the rules of an action.
pub struct Limiter {
    store: Arc<dyn Store>,
    limits: ChatLimits,
    metrics: Arc<Metrics>,
}

/// Whom a rule is keyed by.
enum Key {
    User,
    UserChannel,
    Channel,
}

impl Limiter {
    /// Limits over `store`.
    pub fn new(store: Arc<dyn Store>, limits: ChatLimits, metrics: Arc<Metrics>) -> Self {
        Limiter {
            store,
            limits,
            metrics,
        }
    }

    fn rules(&self, action: Action) -> Vec<(&'static str, &RateRule, Key)> {
        let l = &self.limits;
        match action {
            Action::Join => vec![("join", &l.join, Key::User)],
            Action::History => vec![("history", &l.history, Key::User)],
            Action::Send => vec![
                ("send_user", &l.send_user, Key::User),
                ("send_user_channel", &l.send_user_channel, Key::UserChannel),
                ("send_channel", &l.send_channel, Key::Channel),
            ],
            Action::Typing => vec![
                ("typing_user", &l.typing_user, Key::User),
                (
                    "typing_user_channel",
                    &l.typing_user_channel,
                    Key::UserChannel,
                ),
            ],
            Action::Mutation => vec![
                ("mutation_user", &l.mutation_user, Key::User),
                (
                    "mutation_user_channel",
                    &l.mutation_user_channel,
                    Key::UserChannel,
                ),
            ],
            Action::Moderation => vec![
                ("moderation_operator", &l.moderation_operator, Key::User),
                ("moderation_channel", &l.moderation_channel, Key::Channel),
            ],
        }
    }

    /// The windows `action` charges for `user` (`None`: a trusted script,
    /// charged only the per-channel rules) in `channel` at `now` (Unix ms).
    pub fn charges(
        &self,
        action: Action,
        user: Option<&str>,
        channel: &str,
        now: i64,
    ) -> Vec<RateCharge> {
        self.rules(action)
            .into_iter()
            .filter_map(|(name, rule, key)| {
                let key = match (key, user) {
                    (Key::Channel, _) => format!("c\u{0}{channel}"),
                    (Key::User, Some(u)) => format!("u\u{0}{u}"),
                    (Key::UserChannel, Some(u)) => format!("uc\u{0}{u}\u{0}{channel}"),
                    (_, None) => return None,
                };
                let window = rule.window_ms.max(1) as i64;
                Some(RateCharge {
                    key_hash: sha256_hex(&format!("chat.{name}\u{0}{key}")),
                    window_start: now - now.rem_euclid(window),
                    limit: rule.limit,
                })
            })
            .collect()
    }

    /// Charges `action` now, in its own statement (see [`Self::charges`]).
    pub async fn charge(
        &self,
        action: Action,
        user: Option<&str>,
        channel: &str,
        now: i64,
    ) -> Result<(), ChatError> {
        let charges = self.charges(action, user, channel, now);
        if charges.is_empty() {
            return Ok(());
        }
        match self.store.chat_charge(charges).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(self.limited()),
            Err(err) => {
                tracing::warn!(error = %err, "chat rate limit storage failed; refusing");
                Err(self.unavailable())
            }
        }
    }

    /// A window at its limit (counted).
    pub fn limited(&self) -> ChatError {
        self.metrics.service_event(ServiceEvent::ChatRateLimited);
        ChatError::RateLimited
    }

    /// The windows' storage failed: refused (counted).
    pub fn unavailable(&self) -> ChatError {
        self.metrics
            .service_event(ServiceEvent::ChatRateLimitStorageFailed);
        ChatError::RateLimited
    }
}
