//! Durable chat (seed 000 kind 28, `services.md` §5): room, direct and
//! group channels, live and lossless.
//!
//! What it is: [`ChatService`], behind the `chat.*` RPCs ([`rpc`]) and Lua
//! `citadel.chat_call` (trusted send/history/edit/delete/moderate). Call
//! order of every operation: parse ([`rpc`]) → the connection's live
//! subscription (`CHAT_NOT_SUBSCRIBED`) → re-authorise the target now
//! ([`channel::Authority`]; a failure revokes the subscription and answers
//! `CHAT_UNAVAILABLE`) → validate and charge the `[chat.limits]` rules
//! ([`limits`], fail closed; `chat.send`'s are charged inside its commit
//! transaction) → the group committer (concurrent commits share one store
//! call; each mutation + its event + its outbox row are in ONE
//! transaction) → [`outbox::Outbox::dispatch`], in event order: live delivery
//! through the router to this node's subscribers, then the row's
//! acknowledgement. A dropped live copy flags the subscription for
//! `resync_required` ([`registry`]); history is the recovery path.
//! Presence and typing are node-local and never stored.
//!
//! Revocation: leaving the gateway room (the connection's place hook),
//! disconnect, the friends and groups services' immediate hooks
//! ([`revocations::ChatRevocations`]: unfriend, block, kick, leave, group
//! deletion, before their call returns), and a periodic re-authorisation
//! sweep (`chat.reauthorize_interval_ms`), the backstop that catches such a
//! change made on another node.
//!
//! What it is not: no transport, and no cross-node fan-out (the outbox's
//! [`outbox::RemoteDestinations`] seam is where the cluster adds it).

pub mod channel;
pub mod config;
pub mod events;
pub mod limits;
pub mod outbox;
pub mod registry;
pub mod revocations;
pub mod rpc;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

pub use config::{ChatConfig, ChatLimits};

use channel::{Authority, Target};
use limits::{Action, Limiter};
use outbox::{Consumer, NoRemote, Outbox, OutboxEvent, RemoteDestinations};
use registry::{JoinBounds, Registry};

use crate::metrics::{Metrics, ServiceEvent};
use crate::place::Place;
use crate::realm::Realm;
use crate::router::Router;
use crate::rpc::{AUTHENTICATION_REQUIRED, INVALID_JSON_BODY, RpcError};
use crate::services::accounts::now_ms;
use crate::services::tokens::sha256_hex;
use crate::store::{
    ChatChange, ChatCommit, Committed, MessageRecord, ModerationAudit, RateCharge, Standing, Store,
    StoreError,
};

/// Error codes of the chat RPCs (the RPC error message; docs/chat.md).
pub mod code {
    /// Unknown, unavailable or forbidden target (one answer for all).
    pub const UNAVAILABLE: &str = "CHAT_UNAVAILABLE";
    /// A `[chat.limits]` rule, or its storage failing.
    pub const RATE_LIMITED: &str = "CHAT_RATE_LIMITED";
    /// No live subscription of this connection to the channel.
    pub const NOT_SUBSCRIBED: &str = "CHAT_NOT_SUBSCRIBED";
    /// The old `{channel, channel_type}` payload, or a `target` after join.
    pub const UPGRADE_REQUIRED: &str = "CHAT_PROTOCOL_UPGRADE_REQUIRED";
    /// Empty, too long, or with control characters other than line breaks.
    pub const INVALID_CONTENT: &str = "CHAT_INVALID_CONTENT";
    /// No such message in the channel.
    pub const MESSAGE_NOT_FOUND: &str = "CHAT_MESSAGE_NOT_FOUND";
    /// The message is already a tombstone.
    pub const MESSAGE_DELETED: &str = "CHAT_MESSAGE_DELETED";
    /// Edit or delete of someone else's message.
    pub const NOT_AUTHOR: &str = "CHAT_NOT_AUTHOR";
    /// Edit more than `chat.edit_window_ms` after creation.
    pub const EDIT_WINDOW_CLOSED: &str = "CHAT_EDIT_WINDOW_CLOSED";
    /// Delete more than `chat.delete_window_ms` after creation.
    pub const DELETE_WINDOW_CLOSED: &str = "CHAT_DELETE_WINDOW_CLOSED";
    /// Moderation outside a group channel, or by a role that may not.
    pub const FORBIDDEN: &str = "CHAT_FORBIDDEN";
    /// The message changed while the call ran; read and retry.
    pub const CONFLICT: &str = "CHAT_CONFLICT";
    /// `chat.max_subscriptions_per_connection` or
    /// `chat.max_subscribers_per_channel` reached.
    pub const SUBSCRIPTION_LIMIT: &str = "CHAT_SUBSCRIPTION_LIMIT";
    /// `chat.max_outbox_rows` undelivered rows pending; retry later.
    pub const BUSY: &str = "CHAT_BUSY";
    /// An unknown `citadel.chat_call` operation.
    pub const UNKNOWN_OPERATION: &str = "unknown chat operation";
}

/// Why a chat operation failed; [`ChatError::into_rpc`] is the one mapping
/// to wire answers.
#[derive(Debug, thiserror::Error)]
pub enum ChatError {
    /// A guest.
    #[error("authentication required")]
    AuthenticationRequired,
    /// Not the JSON object the method takes (or an unknown field).
    #[error("invalid JSON body")]
    InvalidJson,
    /// A required string field is absent, empty or not a string.
    #[error("missing string field: {0}")]
    MissingString(&'static str),
    /// A required integer field is absent or not an unsigned integer.
    #[error("missing integer field: {0}")]
    MissingInteger(&'static str),
    /// A required boolean field is absent or not a boolean.
    #[error("missing boolean field: {0}")]
    MissingBool(&'static str),
    /// See [`code::UNAVAILABLE`].
    #[error("CHAT_UNAVAILABLE")]
    Unavailable,
    /// See [`code::UPGRADE_REQUIRED`].
    #[error("CHAT_PROTOCOL_UPGRADE_REQUIRED")]
    UpgradeRequired,
    /// See [`code::NOT_SUBSCRIBED`].
    #[error("CHAT_NOT_SUBSCRIBED")]
    NotSubscribed,
    /// See [`code::RATE_LIMITED`].
    #[error("CHAT_RATE_LIMITED")]
    RateLimited,
    /// See [`code::INVALID_CONTENT`].
    #[error("CHAT_INVALID_CONTENT")]
    InvalidContent,
    /// See [`code::MESSAGE_NOT_FOUND`].
    #[error("CHAT_MESSAGE_NOT_FOUND")]
    NotFound,
    /// See [`code::MESSAGE_DELETED`].
    #[error("CHAT_MESSAGE_DELETED")]
    Deleted,
    /// See [`code::NOT_AUTHOR`].
    #[error("CHAT_NOT_AUTHOR")]
    NotAuthor,
    /// See [`code::EDIT_WINDOW_CLOSED`].
    #[error("CHAT_EDIT_WINDOW_CLOSED")]
    EditWindowClosed,
    /// See [`code::DELETE_WINDOW_CLOSED`].
    #[error("CHAT_DELETE_WINDOW_CLOSED")]
    DeleteWindowClosed,
    /// See [`code::FORBIDDEN`].
    #[error("CHAT_FORBIDDEN")]
    Forbidden,
    /// See [`code::CONFLICT`].
    #[error("CHAT_CONFLICT")]
    Conflict,
    /// See [`code::SUBSCRIPTION_LIMIT`].
    #[error("CHAT_SUBSCRIPTION_LIMIT")]
    SubscriptionLimit,
    /// See [`code::BUSY`].
    #[error("CHAT_BUSY")]
    Busy,
    /// See [`code::UNKNOWN_OPERATION`].
    #[error("unknown chat operation")]
    UnknownOperation,
    /// Storage failed; nothing was committed.
    #[error("chat storage failed: {0}")]
    Store(#[from] StoreError),
}

impl ChatError {
    /// The RPC answer: documented codes verbatim, storage as the generic
    /// handler error (logged, never shown).
    pub fn into_rpc(self) -> RpcError {
        let fixed = match &self {
            ChatError::AuthenticationRequired => AUTHENTICATION_REQUIRED,
            ChatError::InvalidJson => INVALID_JSON_BODY,
            ChatError::MissingString(_)
            | ChatError::MissingInteger(_)
            | ChatError::MissingBool(_) => {
                return RpcError::Invalid(self.to_string());
            }
            ChatError::Unavailable => code::UNAVAILABLE,
            ChatError::UpgradeRequired => code::UPGRADE_REQUIRED,
            ChatError::NotSubscribed => code::NOT_SUBSCRIBED,
            ChatError::RateLimited => code::RATE_LIMITED,
            ChatError::InvalidContent => code::INVALID_CONTENT,
            ChatError::NotFound => code::MESSAGE_NOT_FOUND,
            ChatError::Deleted => code::MESSAGE_DELETED,
            ChatError::NotAuthor => code::NOT_AUTHOR,
            ChatError::EditWindowClosed => code::EDIT_WINDOW_CLOSED,
            ChatError::DeleteWindowClosed => code::DELETE_WINDOW_CLOSED,
            ChatError::Forbidden => code::FORBIDDEN,
            ChatError::Conflict => code::CONFLICT,
            ChatError::SubscriptionLimit => code::SUBSCRIPTION_LIMIT,
            ChatError::Busy => code::BUSY,
            ChatError::UnknownOperation => code::UNKNOWN_OPERATION,
            ChatError::Store(err) => return RpcError::Internal(err.to_string()),
        };
        RpcError::Client(fixed)
    }
}

/// Who acts: a client connection, or a trusted script acting for `user`.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The acting account (server-derived, never from the payload).
    pub user: String,
    /// The connection; `None` for a trusted script.
    pub participant: Option<u64>,
    /// The connection's place at the call.
    pub place: Option<Place>,
}

/// Content rule: non-empty, at most `max` bytes, no control characters
/// except line breaks.
pub fn check_content(content: &str, max: usize) -> Result<(), ChatError> {
    let bad = |c: char| c.is_control() && c != '\n' && c != '\r';
    if content.is_empty() || content.len() > max || content.chars().any(bad) {
        return Err(ChatError::InvalidContent);
    }
    Ok(())
}

fn now_u64() -> u64 {
    u64::try_from(now_ms()).unwrap_or(0)
}

/// Most commits one group transaction takes.
pub const GROUP_COMMIT_MAX: usize = 64;

/// Commits waiting for the group committer, at most (callers wait past it).
const COMMIT_QUEUE: usize = 4_096;

type PendingCommit = (ChatCommit, oneshot::Sender<Result<Committed, StoreError>>);

/// The chat service.
pub struct ChatService {
    store: Arc<dyn Store>,
    commits: mpsc::Sender<PendingCommit>,
    commit_queue: Mutex<Option<mpsc::Receiver<PendingCommit>>>,
    registry: Arc<Registry>,
    outbox: Outbox,
    consumer: Mutex<Option<Consumer>>,
    remote: Arc<dyn RemoteDestinations>,
    authority: Authority,
    limiter: Limiter,
    config: ChatConfig,
    metrics: Arc<Metrics>,
    room_key: String,
}

impl std::fmt::Debug for ChatService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatService").finish_non_exhaustive()
    }
}

fn room_namespace(node_id: &str) -> String {
    let mut nonce = [0u8; 8];
    // A clock fallback keeps ids distinct across restarts without randomness.
    if getrandom::fill(&mut nonce).is_err() {
        nonce = now_ms().to_be_bytes();
    }
    let hex: String = nonce.iter().map(|b| format!("{b:02x}")).collect();
    format!("{node_id}:{hex}")
}

impl ChatService {
    /// A service over `store`, authorising rooms through `realm` and
    /// delivering through `router`; `node_id` namespaces room channels.
    pub fn new(
        store: Arc<dyn Store>,
        realm: Arc<Realm>,
        router: Arc<dyn Router>,
        config: ChatConfig,
        metrics: Arc<Metrics>,
        node_id: &str,
    ) -> Self {
        let registry = Arc::new(Registry::new(router, metrics.clone()));
        let (outbox, consumer) = Outbox::new(registry.clone(), metrics.clone());
        let (commits, commit_queue) = mpsc::channel(COMMIT_QUEUE);
        ChatService {
            commits,
            commit_queue: Mutex::new(Some(commit_queue)),
            authority: Authority::new(realm, store.clone()),
            limiter: Limiter::new(store.clone(), config.limits.clone(), metrics.clone()),
            store,
            registry,
            outbox,
            consumer: Mutex::new(Some(consumer)),
            remote: Arc::new(NoRemote),
            config,
            metrics,
            room_key: room_namespace(node_id),
        }
    }

    /// The live subscriptions (tests, operators).
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// The connection moved (room join/leave): room subscriptions it left
    /// are revoked.
    pub fn handle_place_change(&self, participant_id: u64, place: Place) {
        self.registry.place_changed(participant_id, place);
    }

    fn revoke(&self, target: Target, user: Option<&str>) {
        let channel_id = target.record(&self.room_key).channel_id;
        self.registry.revoke_channel(&channel_id, user);
    }

    /// The connection ended: its subscriptions go.
    pub fn handle_disconnect(&self, participant_id: u64) {
        self.registry.disconnect(participant_id);
    }

    /// The channel a caller names, checked: a client needs its live
    /// subscription; everyone is re-authorised now.
    async fn access(&self, caller: &Caller, channel_id: &str) -> Result<Target, ChatError> {
        let target = match caller.participant {
            Some(pid) => {
                self.registry
                    .subscribed(channel_id, pid)
                    .ok_or(ChatError::NotSubscribed)?
                    .0
            }
            None => {
                let record = self
                    .store
                    .chat_channel(channel_id)
                    .await?
                    .ok_or(ChatError::Unavailable)?;
                Target::from_record(&record).ok_or(ChatError::Unavailable)?
            }
        };
        if !self
            .authority
            .allows(&target, &caller.user, caller.participant)
            .await?
        {
            if let Some(pid) = caller.participant {
                self.registry.remove(channel_id, pid, true);
            }
            return Err(ChatError::Unavailable);
        }
        Ok(target)
    }

    async fn charge(
        &self,
        action: Action,
        caller: &Caller,
        channel_id: &str,
    ) -> Result<(), ChatError> {
        let user = caller.participant.map(|_| caller.user.as_str());
        self.limiter
            .charge(action, user, channel_id, now_ms())
            .await
    }

    /// `chat.join {target}`.
    pub async fn join(&self, caller: &Caller, target: &Value) -> Result<Value, ChatError> {
        let pid = caller.participant.ok_or(ChatError::Unavailable)?;
        let target = channel::parse_target(target, &caller.user, caller.place)?;
        let record = target.record(&self.room_key);
        self.charge(Action::Join, caller, &record.channel_id)
            .await?;
        if !self
            .authority
            .allows(&target, &caller.user, Some(pid))
            .await?
        {
            return Err(ChatError::Unavailable);
        }
        let channel_id = record.channel_id.clone();
        let watermark = self.store.chat_open_channel(record, now_u64()).await?;
        let bounds = JoinBounds {
            per_connection: self.config.max_subscriptions_per_connection,
            per_channel: self.config.max_subscribers_per_channel,
        };
        let joined = self.registry.join(
            &channel_id,
            target.clone(),
            pid,
            &caller.user,
            watermark,
            bounds,
        )?;
        Ok(json!({
            "channel_id": channel_id,
            "channel_type": target.channel_type(),
            "presence": joined.presences,
            "watermark_event_id": watermark,
            "subscription": joined.subscription,
        }))
    }

    /// `chat.leave {channel_id}`.
    pub fn leave(&self, caller: &Caller, channel_id: &str) -> Value {
        let left = caller
            .participant
            .is_some_and(|pid| self.registry.remove(channel_id, pid, false));
        json!({ "left": left })
    }

    /// `chat.typing {channel_id, typing}`.
    pub async fn typing(
        &self,
        caller: &Caller,
        channel_id: &str,
        typing: bool,
    ) -> Result<Value, ChatError> {
        self.access(caller, channel_id).await?;
        self.charge(Action::Typing, caller, channel_id).await?;
        let now = now_u64();
        let expires_at = if typing {
            now + self.config.typing_ttl_ms
        } else {
            now
        };
        if let Some(pid) = caller.participant
            && let Some((_, presence)) = self.registry.subscribed(channel_id, pid)
        {
            let frame = events::typing(channel_id, &presence, typing, expires_at);
            self.registry.broadcast(channel_id, pid, &frame);
        }
        Ok(json!({ "typing": typing, "expires_at": expires_at }))
    }

    async fn commit(
        &self,
        channel_id: &str,
        change: ChatChange,
        charges: Vec<RateCharge>,
    ) -> Result<(u64, MessageRecord), ChatError> {
        let now = now_u64();
        let commit = ChatCommit {
            channel_id: channel_id.to_owned(),
            change,
            now,
            outbox_expires_at: now + self.config.outbox_retry_ms,
            max_outbox_rows: self.config.max_outbox_rows,
            encode: events::durable_json,
            charges,
        };
        let stopped = || ChatError::Store(StoreError::Database("chat committer stopped".into()));
        let (reply, answer) = oneshot::channel();
        self.commits
            .send((commit, reply))
            .await
            .map_err(|_| stopped())?;
        match answer.await.map_err(|_| stopped())?? {
            Committed::Done {
                event_id, message, ..
            } => Ok((event_id, message)),
            Committed::Missing => Err(ChatError::NotFound),
            Committed::Stale => Err(ChatError::Conflict),
            Committed::OutboxFull => Err(ChatError::Busy),
            Committed::RateLimited => Err(self.limiter.limited()),
            Committed::RateUnavailable => Err(self.limiter.unavailable()),
        }
    }

    /// The group committer: takes every queued commit (up to
    /// [`GROUP_COMMIT_MAX`]), commits them through the store at once, then
    /// dispatches the committed events in event order and answers each
    /// caller. Committed before live delivery; a dropped live copy never
    /// loses the item.
    async fn run_commits(&self, queue: &mut mpsc::Receiver<PendingCommit>) {
        while let Some(first) = queue.recv().await {
            let mut batch = vec![first];
            while batch.len() < GROUP_COMMIT_MAX {
                match queue.try_recv() {
                    Ok(next) => batch.push(next),
                    Err(_) => break,
                }
            }
            if batch.len() > 1 {
                self.metrics
                    .service_n(ServiceEvent::ChatCommitsGrouped, batch.len() as u64);
            }
            let (commits, replies): (Vec<ChatCommit>, Vec<_>) = batch.into_iter().unzip();
            let meta: Vec<(String, u64)> = commits
                .iter()
                .map(|c| (c.channel_id.clone(), c.outbox_expires_at))
                .collect();
            let results = self.store.chat_commit_batch(commits).await;
            for ((result, reply), (channel_id, expires_at)) in
                results.into_iter().zip(replies).zip(meta)
            {
                match &result {
                    Ok(Committed::Done {
                        event_id, payload, ..
                    }) => {
                        self.metrics.service_event(ServiceEvent::ChatCommitted);
                        self.outbox.dispatch(OutboxEvent {
                            channel_id,
                            event_id: *event_id,
                            payload: payload.clone(),
                            expires_at,
                        });
                    }
                    Ok(Committed::OutboxFull) => {
                        self.metrics.service_event(ServiceEvent::ChatOutboxFull);
                    }
                    _ => {}
                }
                let _ = reply.send(result);
            }
        }
    }

    /// `chat.send {channel_id, content}`.
    pub async fn send(
        &self,
        caller: &Caller,
        channel_id: &str,
        content: &str,
    ) -> Result<Value, ChatError> {
        self.access(caller, channel_id).await?;
        check_content(content, self.config.max_content_bytes)?;
        let user = caller.participant.map(|_| caller.user.as_str());
        let charges = self
            .limiter
            .charges(Action::Send, user, channel_id, now_ms());
        let change = ChatChange::Create {
            sender: caller.user.clone(),
            content: content.to_owned(),
        };
        self.commit_message(channel_id, change, charges).await
    }

    /// The gate of a channel operation, in this order: access, the content
    /// bound (when there is content), the rate limit of `action`.
    async fn admit(
        &self,
        caller: &Caller,
        channel_id: &str,
        content: Option<&str>,
        action: Action,
    ) -> Result<(), ChatError> {
        self.access(caller, channel_id).await?;
        if let Some(content) = content {
            check_content(content, self.config.max_content_bytes)?;
        }
        self.charge(action, caller, channel_id).await
    }

    /// Commits `change` and answers `{message, event_id}`.
    async fn commit_message(
        &self,
        channel_id: &str,
        change: ChatChange,
        charges: Vec<RateCharge>,
    ) -> Result<Value, ChatError> {
        let (event_id, message) = self.commit(channel_id, change, charges).await?;
        Ok(json!({ "message": events::message_json(&message), "event_id": event_id }))
    }

    /// `chat.history {channel_id, limit?, before_message_id?,
    /// acknowledge_watermark?}`.
    pub async fn history(
        &self,
        caller: &Caller,
        channel_id: &str,
        limit: Option<u64>,
        before: Option<u64>,
        acknowledge: Option<u64>,
    ) -> Result<Value, ChatError> {
        self.admit(caller, channel_id, None, Action::History)
            .await?;
        let limit = limit.map_or(50, |l| l.clamp(1, 200)) as u32;
        let page = self.store.chat_history(channel_id, before, limit).await?;
        if let (Some(watermark), Some(pid)) = (acknowledge, caller.participant) {
            self.registry.acknowledge(channel_id, pid, watermark);
        }
        let items: Vec<Value> = page.items.iter().map(events::message_json).collect();
        Ok(json!({ "items": items, "watermark_event_id": page.watermark }))
    }

    /// The message an author may change within `window_ms`, after the
    /// mutation gate ([`Self::admit`] with `content`).
    async fn own_message(
        &self,
        caller: &Caller,
        channel_id: &str,
        message_id: u64,
        content: Option<&str>,
        window_ms: u64,
        closed: ChatError,
    ) -> Result<MessageRecord, ChatError> {
        self.admit(caller, channel_id, content, Action::Mutation)
            .await?;
        let message = self.existing(channel_id, message_id).await?;
        if message.sender != caller.user {
            return Err(ChatError::NotAuthor);
        }
        if now_u64().saturating_sub(message.created_at) > window_ms {
            return Err(closed);
        }
        Ok(message)
    }

    async fn existing(
        &self,
        channel_id: &str,
        message_id: u64,
    ) -> Result<MessageRecord, ChatError> {
        let message = self
            .store
            .chat_message(channel_id, message_id)
            .await?
            .ok_or(ChatError::NotFound)?;
        if message.deleted {
            return Err(ChatError::Deleted);
        }
        Ok(message)
    }

    /// `chat.edit {channel_id, message_id, content}`.
    pub async fn edit(
        &self,
        caller: &Caller,
        channel_id: &str,
        message_id: u64,
        content: &str,
    ) -> Result<Value, ChatError> {
        let window = self.config.edit_window_ms;
        let closed = ChatError::EditWindowClosed;
        let old = self
            .own_message(
                caller,
                channel_id,
                message_id,
                Some(content),
                window,
                closed,
            )
            .await?;
        let change = ChatChange::Edit {
            message_id,
            expected_revision: old.revision,
            content: content.to_owned(),
        };
        self.commit_message(channel_id, change, Vec::new()).await
    }

    /// `chat.delete {channel_id, message_id}`.
    pub async fn delete(
        &self,
        caller: &Caller,
        channel_id: &str,
        message_id: u64,
    ) -> Result<Value, ChatError> {
        let window = self.config.delete_window_ms;
        let closed = ChatError::DeleteWindowClosed;
        let old = self
            .own_message(caller, channel_id, message_id, None, window, closed)
            .await?;
        self.tombstone(channel_id, &old, None).await
    }

    async fn tombstone(
        &self,
        channel_id: &str,
        old: &MessageRecord,
        audit: Option<ModerationAudit>,
    ) -> Result<Value, ChatError> {
        let change = ChatChange::Tombstone {
            message_id: old.message_id,
            expected_revision: old.revision,
            audit,
        };
        let (event_id, _) = self.commit(channel_id, change, Vec::new()).await?;
        Ok(json!({ "message_id": old.message_id, "deleted": true, "event_id": event_id }))
    }

    /// `chat.moderate {channel_id, message_id}` (group channels): a
    /// superadmin tombstones any message; an admin those of members and
    /// former members, not of admins or superadmins. A trusted script may
    /// tombstone any. Writes a redacted audit row in the same transaction.
    pub async fn moderate(
        &self,
        caller: &Caller,
        channel_id: &str,
        message_id: u64,
    ) -> Result<Value, ChatError> {
        let target = self.access(caller, channel_id).await?;
        let Target::Group(group) = &target else {
            return Err(ChatError::Forbidden);
        };
        self.charge(Action::Moderation, caller, channel_id).await?;
        let old = self.existing(channel_id, message_id).await?;
        let role = match caller.participant {
            None => "script",
            Some(_) => match self.authority.role(*group, &caller.user).await? {
                Some(Standing::Superadmin) => "superadmin",
                Some(Standing::Admin) => {
                    let author = self.authority.role(*group, &old.sender).await?;
                    if author.is_some_and(|s| s >= Standing::Admin) {
                        return Err(ChatError::Forbidden);
                    }
                    "admin"
                }
                _ => return Err(ChatError::Forbidden),
            },
        };
        let audit = ModerationAudit {
            actor_id: caller.user.clone(),
            actor_role: role.to_owned(),
            content_sha256: sha256_hex(&old.content),
        };
        self.tombstone(channel_id, &old, Some(audit)).await
    }

    /// Re-authorises every live subscription once; revokes the failures.
    async fn sweep(&self) {
        for entry in self.registry.entries() {
            let pid = entry.participant_id;
            match self
                .authority
                .allows(&entry.target, &entry.user_id, Some(pid))
                .await
            {
                Ok(true) => {}
                Ok(false) => self.registry.revoke_if(&entry),
                Err(err) => tracing::debug!(error = %err, "chat re-authorisation deferred"),
            }
        }
    }

    /// The background work until `shutdown`: the outbox consumer
    /// (acknowledgements, remote retries), pending `resync_required`
    /// notices, the re-authorisation sweep and outbox expiry.
    pub async fn run(self: Arc<Self>, shutdown: CancellationToken) {
        let Some(mut consumer) = self
            .consumer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        else {
            return;
        };
        let Some(mut queue) = self
            .commit_queue
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        else {
            return;
        };
        let committer = self.run_commits(&mut queue);
        let consume = async {
            while Outbox::consume(&mut consumer, &self.store, &self.remote, &self.metrics).await {}
        };
        let ticks = async {
            let every = |ms: u64| {
                let mut t = tokio::time::interval(Duration::from_millis(ms));
                t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                t
            };
            let mut resync = every(100);
            let mut sweep = every(self.config.reauthorize_interval_ms);
            let mut expire = every(1_000);
            loop {
                tokio::select! {
                    _ = resync.tick() => self.registry.poll_resync(),
                    _ = sweep.tick() => self.sweep().await,
                    _ = expire.tick() => match self.store.chat_expire_outbox(now_u64()).await {
                        Ok(n) => self.metrics.service_n(ServiceEvent::ChatOutboxExpired, n),
                        Err(err) => tracing::debug!(error = %err, "chat outbox expiry deferred"),
                    },
                }
            }
        };
        // Each loop owns its awaits: a tick never cancels an acknowledgement.
        tokio::select! {
            _ = shutdown.cancelled() => {}
            _ = committer => {}
            _ = consume => {}
            _ = ticks => {}
        }
    }
}

impl revocations::ChatRevocations for ChatService {
    fn friendship_ended(&self, a: &str, b: &str) {
        self.revoke(Target::direct(a, b), None);
    }

    fn membership_ended(&self, group: u64, user: &str) {
        self.revoke(Target::Group(group), Some(user));
    }

    fn group_deleted(&self, group: u64) {
        self.revoke(Target::Group(group), None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_rules() {
        assert!(check_content("hi\nthere\r\n", 2048).is_ok());
        assert!(check_content("", 2048).is_err());
        assert!(check_content("tab\there", 2048).is_err());
        assert!(check_content("bell\u{7}", 2048).is_err());
        assert!(check_content(&"é".repeat(1024), 2048).is_ok());
        assert!(check_content(&"é".repeat(1025), 2048).is_err());
    }

    #[test]
    fn storage_errors_stay_generic() {
        let err = ChatError::Store(StoreError::Database("secret dsn".into())).into_rpc();
        assert_eq!(err.client_message(), crate::rpc::HANDLER_ERROR);
        assert_eq!(
            ChatError::Unavailable.into_rpc().client_message(),
            "CHAT_UNAVAILABLE"
        );
        assert_eq!(
            ChatError::MissingString("channel_id")
                .into_rpc()
                .client_message(),
            "missing string field: channel_id"
        );
    }
}
