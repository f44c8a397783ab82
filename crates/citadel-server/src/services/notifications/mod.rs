//! Durable player notifications (seed 000 kind 27, `services.md` §4).
//!
//! What it is: [`NotificationService`], the one producer path (Lua
//! `citadel.notifications_send` and the operator CLI call it; clients
//! cannot) and the reads behind `notifications.list` / `mark_read`. Order of
//! a send: validate the bounds → commit through the store (idempotent by
//! `(recipient, delivery_key)`, inbox bounded) → only for a NEW item, one
//! reliable KIND_NOTIFICATION to every live session of the recipient
//! through the router. A live copy that cannot be queued is dropped and
//! counted; the inbox item stays, and clients reconcile with `list`.
//!
//! What it is not: no transport or JSON-RPC parsing (see [`rpc`]), and no
//! cross-node delivery (a cluster router can wrap the router it is given).

pub mod config;
pub mod rpc;

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use citadel_wire::WireBody;
use citadel_wire::service::Notification;

pub use config::NotificationsConfig;

use crate::metrics::{Metrics, ServiceEvent};
use crate::router::{Lane, Router, frame};
use crate::services::accounts::now_ms;
use crate::store::{Inserted, NewNotification, NotificationRecord, Store, StoreError};

/// Longest page of `list`.
pub const MAX_PAGE: u32 = 100;
/// Page size when the caller names none.
pub const DEFAULT_PAGE: u32 = 50;
/// Most ids one `mark_read` takes.
pub const MAX_MARK_IDS: usize = 100;

/// A notification to create (trusted producers only).
#[derive(Debug, Clone)]
pub struct Outgoing {
    /// Recipient user id.
    pub recipient: String,
    /// Application category code.
    pub code: i64,
    /// Short title.
    pub subject: String,
    /// Payload: any JSON value (an object in every known producer).
    pub content: serde_json::Value,
    /// Free text; `server` when absent.
    pub sender: Option<String>,
    /// Idempotency key, unique per recipient.
    pub delivery_key: Option<String>,
}

/// Why a notification operation failed. Messages are safe to show to the
/// trusted producer (script, operator) or, for `Invalid`, to a client.
#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    /// A bound or shape rule; the text says which.
    #[error("{0}")]
    Invalid(String),
    /// No such account.
    #[error("unknown recipient")]
    UnknownRecipient,
    /// Storage failed; the send did not happen.
    #[error("notification storage failed")]
    Store(#[from] StoreError),
}

/// The notification service.
#[derive(Clone)]
pub struct NotificationService {
    store: Arc<dyn Store>,
    router: Arc<dyn Router>,
    config: NotificationsConfig,
    metrics: Arc<Metrics>,
}

impl std::fmt::Debug for NotificationService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NotificationService")
            .finish_non_exhaustive()
    }
}

fn new_id() -> Result<String, NotifyError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)
        .map_err(|e| NotifyError::Store(StoreError::Database(format!("no randomness: {e}"))))?;
    Ok(format!("ntf-{}", URL_SAFE_NO_PAD.encode(bytes)))
}

fn to_wire(record: NotificationRecord) -> Notification {
    Notification {
        id: record.id,
        code: record.code,
        subject: record.subject,
        // Stored text is JSON this service serialised; fall back to a string.
        content: serde_json::from_str(&record.content)
            .unwrap_or(serde_json::Value::String(record.content)),
        sender: record.sender,
        created_at_unix_ms: u64::try_from(record.created_at).unwrap_or(0),
        read_at_unix_ms: record.read_at.and_then(|t| u64::try_from(t).ok()),
    }
}

/// The opaque list cursor: where the next page starts.
fn encode_cursor(seq: i64) -> String {
    URL_SAFE_NO_PAD.encode(format!("n1:{seq}"))
}

fn decode_cursor(cursor: &str) -> Option<i64> {
    let raw = URL_SAFE_NO_PAD.decode(cursor).ok()?;
    let text = std::str::from_utf8(&raw).ok()?;
    text.strip_prefix("n1:")?.parse().ok().filter(|s| *s > 0)
}

impl NotificationService {
    /// A service over `store`, delivering live copies through `router`.
    pub fn new(
        store: Arc<dyn Store>,
        router: Arc<dyn Router>,
        config: NotificationsConfig,
        metrics: Arc<Metrics>,
    ) -> Self {
        NotificationService {
            store,
            router,
            config,
            metrics,
        }
    }

    fn check(&self, out: &Outgoing, content: &str) -> Result<(), NotifyError> {
        let c = &self.config;
        let too_long = |what: &str, len: usize, max: usize| {
            (len > max).then(|| NotifyError::Invalid(format!("{what} exceeds {max} bytes")))
        };
        let sender_len = out.sender.as_deref().map_or(0, str::len);
        let key_len = out.delivery_key.as_deref().map_or(0, str::len);
        if let Some(err) = too_long("subject", out.subject.len(), c.max_subject_bytes)
            .or_else(|| too_long("content", content.len(), c.max_content_bytes))
            .or_else(|| too_long("sender", sender_len, c.max_sender_bytes))
            .or_else(|| too_long("delivery_key", key_len, c.max_delivery_key_bytes))
        {
            return Err(err);
        }
        if out.recipient.is_empty() {
            return Err(NotifyError::UnknownRecipient);
        }
        if out.delivery_key.as_deref() == Some("") {
            return Err(NotifyError::Invalid(
                "delivery_key must not be empty".into(),
            ));
        }
        Ok(())
    }

    /// Commits one notification, then (for a new item) sends it live to
    /// every session of the recipient. A repeated delivery key returns the
    /// existing item and sends nothing.
    pub async fn send(&self, out: Outgoing) -> Result<Notification, NotifyError> {
        let content = out.content.to_string();
        if let Err(err) = self.check(&out, &content) {
            self.metrics
                .service_event(ServiceEvent::NotificationsRefused);
            return Err(err);
        }
        let new = NewNotification {
            id: new_id()?,
            recipient: out.recipient.clone(),
            code: out.code,
            subject: out.subject,
            content,
            sender: out.sender.unwrap_or_else(|| "server".into()),
            delivery_key: out.delivery_key,
            now: now_ms(),
            max_inbox: self.config.max_inbox,
        };
        match self.store.insert_notification(new).await? {
            Inserted::UnknownRecipient => {
                self.metrics
                    .service_event(ServiceEvent::NotificationsRefused);
                Err(NotifyError::UnknownRecipient)
            }
            Inserted::Existing(record) => {
                self.metrics
                    .service_event(ServiceEvent::NotificationsDeduplicated);
                Ok(to_wire(record))
            }
            Inserted::Created { record, pruned } => {
                let m = &self.metrics;
                m.service_event(ServiceEvent::NotificationsCreated);
                m.service_n(ServiceEvent::NotificationsPruned, pruned);
                let notification = to_wire(record);
                // Committed above: a lost live copy never loses the item.
                let fanout = self.router.to_account(
                    &out.recipient,
                    Lane::Reliable,
                    frame(&notification.to_envelope()),
                );
                m.service_n(ServiceEvent::NotificationsLiveQueued, fanout.queued as u64);
                m.service_n(
                    ServiceEvent::NotificationsLiveDropped,
                    fanout.refused as u64,
                );
                Ok(notification)
            }
        }
    }

    /// One page of `user`'s inbox, newest first, and the cursor of the next
    /// page (`None` at the end). `limit` is clamped to 1–100 (default 50).
    pub async fn list(
        &self,
        user: &str,
        limit: Option<i64>,
        cursor: Option<&str>,
    ) -> Result<(Vec<Notification>, Option<String>), NotifyError> {
        let limit = limit.map_or(DEFAULT_PAGE, |l| l.clamp(1, i64::from(MAX_PAGE)) as u32);
        let before = match cursor {
            None => None,
            Some(c) => Some(
                decode_cursor(c).ok_or_else(|| NotifyError::Invalid("invalid cursor".into()))?,
            ),
        };
        let records = self.store.list_notifications(user, before, limit).await?;
        let next = (records.len() == limit as usize)
            .then(|| records.last().map(|r| encode_cursor(r.seq)))
            .flatten();
        Ok((records.into_iter().map(to_wire).collect(), next))
    }

    /// Marks `user`'s unread items among `ids` read; returns those changed.
    pub async fn mark_read(
        &self,
        user: &str,
        ids: Vec<String>,
    ) -> Result<Vec<String>, NotifyError> {
        if ids.len() > MAX_MARK_IDS {
            return Err(NotifyError::Invalid(format!(
                "too many ids (at most {MAX_MARK_IDS})"
            )));
        }
        Ok(self
            .store
            .mark_notifications_read(user, ids, now_ms())
            .await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_reject_garbage() {
        assert_eq!(decode_cursor(&encode_cursor(42)), Some(42));
        for bad in ["", "bjE6", "not base64!", &URL_SAFE_NO_PAD.encode("n1:-3")] {
            assert_eq!(decode_cursor(bad), None, "{bad}");
        }
    }
}
