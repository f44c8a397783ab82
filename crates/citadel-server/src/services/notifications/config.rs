//! `[notifications]`: bounds of the durable inbox.

use serde::{Deserialize, Serialize};

use crate::config::ConfigError;

/// `[notifications]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NotificationsConfig {
    /// Longest `subject`, in bytes.
    pub max_subject_bytes: usize,
    /// Longest `content` (its JSON text), in bytes.
    pub max_content_bytes: usize,
    /// Longest `sender`, in bytes.
    pub max_sender_bytes: usize,
    /// Longest `delivery_key`, in bytes.
    pub max_delivery_key_bytes: usize,
    /// Items one user keeps; past it the oldest read items are removed
    /// first, then the oldest unread.
    pub max_inbox: u32,
}

impl Default for NotificationsConfig {
    fn default() -> Self {
        NotificationsConfig {
            max_subject_bytes: 256,
            max_content_bytes: 16 * 1024,
            max_sender_bytes: 128,
            max_delivery_key_bytes: 256,
            max_inbox: 1_000,
        }
    }
}

impl NotificationsConfig {
    /// Every bound must be positive.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let positive = [
            ("notifications.max_subject_bytes", self.max_subject_bytes),
            ("notifications.max_content_bytes", self.max_content_bytes),
            ("notifications.max_sender_bytes", self.max_sender_bytes),
            (
                "notifications.max_delivery_key_bytes",
                self.max_delivery_key_bytes,
            ),
            ("notifications.max_inbox", self.max_inbox as usize),
        ];
        for (key, value) in positive {
            if value == 0 {
                return Err(ConfigError::Invalid {
                    key: key.into(),
                    message: "must be at least 1".into(),
                });
            }
        }
        Ok(())
    }
}
