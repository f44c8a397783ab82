//! The notification inbox as storage sees it: rows, the insert that is
//! idempotent by `(recipient, delivery_key)` and bounds the inbox, newest-
//! first pages by sequence, and marking read.
//!
//! What it is not: no validation, id minting or delivery (see
//! `crate::services::notifications`). Every operation is one transaction.

use crate::util::BoxFuture;

use super::StoreResult;

/// A notification to store.
#[derive(Debug, Clone)]
pub struct NewNotification {
    /// Fresh opaque id.
    pub id: String,
    /// Recipient account.
    pub recipient: String,
    /// Application category code.
    pub code: i64,
    /// Short title.
    pub subject: String,
    /// JSON text of the payload.
    pub content: String,
    /// Free text, e.g. `server`.
    pub sender: String,
    /// Idempotency key, unique per recipient.
    pub delivery_key: Option<String>,
    /// Unix ms.
    pub now: i64,
    /// Inbox bound: after the insert, the recipient keeps at most this many
    /// items (oldest read items are removed first, then the oldest unread).
    pub max_inbox: u32,
}

/// One stored notification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotificationRecord {
    /// Insertion order (the list cursor).
    pub seq: i64,
    /// Opaque id.
    pub id: String,
    /// Application category code.
    pub code: i64,
    /// Short title.
    pub subject: String,
    /// JSON text of the payload.
    pub content: String,
    /// Free text.
    pub sender: String,
    /// Unix ms.
    pub created_at: i64,
    /// Unix ms, once read.
    pub read_at: Option<i64>,
}

/// What an insert did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inserted {
    /// A new item; `pruned` older items were removed to keep the bound.
    Created {
        /// The new row.
        record: NotificationRecord,
        /// Items removed by the inbox bound.
        pruned: u64,
    },
    /// The recipient already had an item with this delivery key.
    Existing(NotificationRecord),
    /// No such account.
    UnknownRecipient,
}

/// Durable inboxes.
pub trait NotificationStore: Send + Sync {
    /// Inserts (or finds by delivery key) one notification.
    fn insert_notification(&self, new: NewNotification) -> BoxFuture<StoreResult<Inserted>>;
    /// Up to `limit` of `recipient`'s items with `seq < before` (all when
    /// `None`), newest first.
    fn list_notifications(
        &self,
        recipient: &str,
        before: Option<i64>,
        limit: u32,
    ) -> BoxFuture<StoreResult<Vec<NotificationRecord>>>;
    /// Marks the recipient's unread items among `ids` read at `now`;
    /// returns the ids it changed.
    fn mark_notifications_read(
        &self,
        recipient: &str,
        ids: Vec<String>,
        now: i64,
    ) -> BoxFuture<StoreResult<Vec<String>>>;
}
