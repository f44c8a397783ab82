//! Durable chat as storage sees it: channel rows with their per-channel
//! event counter, messages (with server-side revision history), the event
//! log, the bounded delivery outbox and the moderation audit.
//!
//! What it is not: no authorisation, content or window rule (see
//! `crate::services::chat`). Call order: [`ChatStore::chat_open_channel`]
//! once per join → [`ChatStore::chat_commit`] per mutation (the rate
//! windows it carries, the message, its event and outbox row in ONE
//! transaction) → [`ChatStore::chat_ack_outbox`] once
//! delivered; [`ChatStore::chat_expire_outbox`] drops rows past their
//! retry window.

use crate::util::BoxFuture;

use super::StoreResult;

/// A channel as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelRecord {
    /// Opaque id (`ch_…`).
    pub channel_id: String,
    /// `room`, `direct` or `group`.
    pub kind: String,
    /// Room: the room key; direct: the smaller user id; group: the group id.
    pub target_a: String,
    /// Direct: the larger user id; otherwise empty.
    pub target_b: String,
}

/// One message's full state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageRecord {
    /// Per-channel increasing id (the event id of its creation).
    pub message_id: u64,
    /// Author.
    pub sender: String,
    /// Text; empty once tombstoned.
    pub content: String,
    /// Unix ms.
    pub created_at: u64,
    /// Unix ms.
    pub updated_at: u64,
    /// 1, bumped by every edit and the tombstone.
    pub revision: u64,
    /// Event id of the latest mutation.
    pub last_event_id: u64,
    /// Tombstone flag.
    pub deleted: bool,
}

/// Which durable event a commit writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// `message.create`.
    Create,
    /// `message.update`.
    Update,
    /// `message.remove`.
    Remove,
}

impl EventType {
    /// The wire `type`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Create => "message.create",
            EventType::Update => "message.update",
            EventType::Remove => "message.remove",
        }
    }
}

/// The redacted audit row of a moderation tombstone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModerationAudit {
    /// Who moderated.
    pub actor_id: String,
    /// Their role then (`superadmin`, `admin`, `script`).
    pub actor_role: String,
    /// SHA-256 (hex) of the content the tombstone removes (the content
    /// itself is never copied into the audit).
    pub content_sha256: String,
}

/// What a commit changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChatChange {
    /// A new message.
    Create {
        /// Author.
        sender: String,
        /// Validated text.
        content: String,
    },
    /// New content, if the message is still at `expected_revision`.
    Edit {
        /// Target.
        message_id: u64,
        /// Compare-and-set guard.
        expected_revision: u64,
        /// Validated text.
        content: String,
    },
    /// A tombstone, if the message is still at `expected_revision`.
    Tombstone {
        /// Target.
        message_id: u64,
        /// Compare-and-set guard.
        expected_revision: u64,
        /// Set for moderation: written in the same transaction.
        audit: Option<ModerationAudit>,
    },
}

/// Builds the event JSON from the channel id, the type, the event id and
/// the message state (the service's closed-schema encoder).
pub type EventEncoder = fn(&str, EventType, u64, &MessageRecord) -> String;

/// One mutation to commit.
#[derive(Debug, Clone)]
pub struct ChatCommit {
    /// The channel.
    pub channel_id: String,
    /// The change.
    pub change: ChatChange,
    /// Unix ms.
    pub now: u64,
    /// Unix ms after which the outbox row is dropped undelivered.
    pub outbox_expires_at: u64,
    /// Outbox bound: the commit is refused when this many rows are pending.
    pub max_outbox_rows: u32,
    /// The event JSON encoder.
    pub encode: EventEncoder,
    /// `[chat.limits]` windows charged in the commit's own transaction
    /// (all or none, and only if the change commits); empty for changes
    /// the service charged beforehand.
    pub charges: Vec<super::RateCharge>,
}

/// What a commit did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Committed {
    /// Committed: the event id, the new message state and the event JSON.
    Done {
        /// The channel's new event id.
        event_id: u64,
        /// The message after the change.
        message: MessageRecord,
        /// The event JSON, as stored in the event log and the outbox.
        payload: String,
    },
    /// No such channel, or no such message.
    Missing,
    /// The message changed meanwhile (revision) or is already a tombstone.
    Stale,
    /// The outbox holds `max_outbox_rows` undelivered rows.
    OutboxFull,
    /// A window of [`ChatCommit::charges`] is at its limit; nothing was
    /// charged or committed.
    RateLimited,
    /// The windows of [`ChatCommit::charges`] could not be read or written;
    /// nothing was committed (the action fails closed).
    RateUnavailable,
}

/// One page of history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryPage {
    /// The channel's event counter, read before the messages.
    pub watermark: u64,
    /// Newest first.
    pub items: Vec<MessageRecord>,
}

/// Durable chat.
pub trait ChatStore: Send + Sync {
    /// Creates the channel row if missing; returns its event counter.
    fn chat_open_channel(&self, channel: ChannelRecord, now: u64) -> BoxFuture<StoreResult<u64>>;
    /// One channel row.
    fn chat_channel(&self, channel_id: &str) -> BoxFuture<StoreResult<Option<ChannelRecord>>>;
    /// Commits one mutation, its event and its outbox row atomically.
    fn chat_commit(&self, commit: ChatCommit) -> BoxFuture<StoreResult<Committed>>;
    /// Commits several at once (group commit): the new messages together
    /// in ONE transaction (each still with its own event and outbox row),
    /// edits and tombstones one transaction each. One answer per commit,
    /// in order; a failed group transaction fails every commit in it.
    fn chat_commit_batch(&self, commits: Vec<ChatCommit>)
    -> BoxFuture<Vec<StoreResult<Committed>>>;
    /// One message.
    fn chat_message(
        &self,
        channel_id: &str,
        message_id: u64,
    ) -> BoxFuture<StoreResult<Option<MessageRecord>>>;
    /// Up to `limit` messages with ids below `before` (all when `None`),
    /// newest first, with the watermark read first.
    fn chat_history(
        &self,
        channel_id: &str,
        before: Option<u64>,
        limit: u32,
    ) -> BoxFuture<StoreResult<HistoryPage>>;
    /// Acknowledges delivered outbox rows.
    fn chat_ack_outbox(&self, rows: Vec<(String, u64)>) -> BoxFuture<StoreResult<u64>>;
    /// Drops rows whose retry window ended before `now`; returns how many.
    fn chat_expire_outbox(&self, now: u64) -> BoxFuture<StoreResult<u64>>;
    /// Charges every `[chat.limits]` window or none (`chat_rate_windows`):
    /// false, consuming nothing, if any would pass its limit.
    fn chat_charge(&self, charges: Vec<super::RateCharge>) -> BoxFuture<StoreResult<bool>>;
    /// Moderation audit rows of a channel: (message id, actor, role,
    /// author, content SHA-256), oldest first (operators and tests).
    fn chat_audit(&self, channel_id: &str) -> BoxFuture<StoreResult<Vec<AuditRecord>>>;
}

/// One moderation audit row (no content, only its hash).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRecord {
    /// The tombstoned message.
    pub message_id: u64,
    /// Who moderated.
    pub actor_id: String,
    /// Their role.
    pub actor_role: String,
    /// The message's author.
    pub author_id: String,
    /// SHA-256 (hex) of the removed content.
    pub content_sha256: String,
}
