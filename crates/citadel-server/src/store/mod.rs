//! Durable storage: one async trait per domain (accounts, sessions, rate
//! limits, notification inboxes, the friend graph, durable chat) and one implementation over sqlx that runs on an embedded SQLite
//! file (default) or PostgreSQL (selected by a `postgres://` URL).
//!
//! What it is not: no business rules (validation, token minting, policy) —
//! those live in `crate::services`. Call order: [`SqlStore::connect`] (creates
//! and migrates), then the domain traits. Every query is written once in
//! portable SQL (`$n` placeholders in ascending order, which SQLite also
//! accepts) and run on whichever pool is configured.

pub mod chat;
pub mod friends;
pub mod groups;
pub mod notifications;
mod sql;

pub use chat::{
    AuditRecord, ChannelRecord, ChatChange, ChatCommit, ChatStore, Committed, EventType,
    HistoryPage, MessageRecord, ModerationAudit,
};
pub use friends::{AddOutcome, FriendRecord, FriendState, FriendStore};
pub use groups::{
    GroupOutcome, GroupRecord, GroupStore, GroupUpdate, MemberRecord, Standing, StandingChange,
};
pub use notifications::{Inserted, NewNotification, NotificationRecord, NotificationStore};
pub use sql::{PoolSettings, SqlStore, is_postgres_url};

use crate::util::BoxFuture;

/// A storage failure. Never carries secrets; `Conflict` is the only variant
/// callers branch on.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A uniqueness constraint (e.g. a taken username).
    #[error("conflict: {0}")]
    Conflict(&'static str),
    /// The database failed or is unreachable.
    #[error("database error: {0}")]
    Database(String),
    /// The configured URL is not usable.
    #[error("invalid database configuration: {0}")]
    Config(String),
}

impl From<sqlx::Error> for StoreError {
    fn from(err: sqlx::Error) -> Self {
        if let sqlx::Error::Database(db) = &err
            && db.is_unique_violation()
        {
            return StoreError::Conflict("unique constraint");
        }
        StoreError::Database(err.to_string())
    }
}

/// Result alias.
pub type StoreResult<T> = Result<T, StoreError>;

/// An account with its credential's stored secret (email verifier).
pub type AccountWithSecret = (AccountRecord, Option<String>);

/// One account as stored.
#[derive(Clone, PartialEq, Eq)]
pub struct AccountRecord {
    /// Stable id (`user-…`).
    pub user_id: String,
    /// Unique handle.
    pub username: String,
    /// Optional human name.
    pub display_name: Option<String>,
    /// JSON object text.
    pub metadata: String,
    /// Disabled by an operator.
    pub disabled: bool,
    /// Unix ms.
    pub created_at: i64,
}

impl std::fmt::Debug for AccountRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccountRecord")
            .field("user_id", &"<redacted>")
            .field("disabled", &self.disabled)
            .finish_non_exhaustive()
    }
}

/// How an account signs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CredentialKind {
    /// `POST /v1/auth/device`.
    Device,
    /// `POST /v1/auth/custom`.
    Custom,
    /// `POST /v1/auth/email`.
    Email,
}

impl CredentialKind {
    /// Stored discriminator.
    pub fn as_str(self) -> &'static str {
        match self {
            CredentialKind::Device => "device",
            CredentialKind::Custom => "custom",
            CredentialKind::Email => "email",
        }
    }
}

/// A new account with its first credential.
#[derive(Clone)]
pub struct NewAccount {
    /// Fresh id.
    pub user_id: String,
    /// Requested username.
    pub username: String,
    /// Optional display name.
    pub display_name: Option<String>,
    /// JSON object text.
    pub metadata: String,
    /// Credential kind.
    pub kind: CredentialKind,
    /// Device id, custom id or normalised email.
    pub credential: String,
    /// Argon2 PHC string for email accounts.
    pub secret: Option<String>,
    /// Unix ms.
    pub now: i64,
}

/// One session row (token hashes only; secrets are never stored).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRecord {
    /// Loggable handle (`tref-…`).
    pub session_id: String,
    /// Owner account.
    pub user_id: String,
    /// Access expiry, Unix ms.
    pub access_expires_at: i64,
    /// Refresh expiry, Unix ms.
    pub refresh_expires_at: i64,
    /// Issuing node.
    pub owner_node: String,
    /// Revocation time, if revoked.
    pub revoked_at: Option<i64>,
}

/// Hashes of a freshly minted token pair.
#[derive(Clone)]
pub struct TokenHashes {
    /// SHA-256 of the access secret (hex).
    pub access_hash: String,
    /// SHA-256 of the refresh secret (hex).
    pub refresh_hash: String,
    /// Access expiry, Unix ms.
    pub access_expires_at: i64,
    /// Refresh expiry, Unix ms.
    pub refresh_expires_at: i64,
}

/// Profile changes (`None` = unchanged; `Some(None)` clears the display name).
#[derive(Debug, Clone, Default)]
pub struct AccountUpdate {
    /// New username.
    pub username: Option<String>,
    /// New display name, or clear.
    pub display_name: Option<Option<String>>,
}

/// One fixed-window rule to charge.
#[derive(Debug, Clone)]
pub struct RateCharge {
    /// SHA-256 of the rule name and key (hex).
    pub key_hash: String,
    /// Window start, Unix ms.
    pub window_start: i64,
    /// Allowed per window.
    pub limit: u32,
}

/// Accounts and their credentials.
pub trait AccountStore: Send + Sync {
    /// The account holding a credential.
    fn find_by_credential(
        &self,
        kind: CredentialKind,
        credential: &str,
    ) -> BoxFuture<StoreResult<Option<AccountWithSecret>>>;
    /// Inserts an account and its credential atomically. `Conflict` if the
    /// username or the credential is taken.
    fn create_account(&self, account: NewAccount) -> BoxFuture<StoreResult<AccountRecord>>;
    /// One account by id.
    fn account(&self, user_id: &str) -> BoxFuture<StoreResult<Option<AccountRecord>>>;
    /// Applies a profile update; `Conflict` on a taken username.
    fn update_account(
        &self,
        user_id: &str,
        update: AccountUpdate,
        now: i64,
    ) -> BoxFuture<StoreResult<Option<AccountRecord>>>;
    /// Enabled accounts matching ids or usernames exactly.
    fn lookup(
        &self,
        user_ids: Vec<String>,
        usernames: Vec<String>,
    ) -> BoxFuture<StoreResult<Vec<AccountRecord>>>;
    /// Disables or re-enables an account (operator action).
    fn set_disabled(&self, user_id: &str, disabled: bool, now: i64)
    -> BoxFuture<StoreResult<bool>>;
}

/// Sessions and their token hashes.
pub trait SessionStore: Send + Sync {
    /// Stores a new session.
    fn create_session(
        &self,
        session_id: &str,
        user_id: &str,
        tokens: TokenHashes,
        owner_node: &str,
        now: i64,
    ) -> BoxFuture<StoreResult<()>>;
    /// The live session whose access token hashes to `access_hash`
    /// (unrevoked, unexpired, account enabled).
    fn session_by_access(
        &self,
        access_hash: &str,
        now: i64,
    ) -> BoxFuture<StoreResult<Option<SessionRecord>>>;
    /// Atomically replaces the pair of the session holding `refresh_hash`
    /// (unrevoked, unexpired, account enabled). `None` if no such session:
    /// the used refresh token dies with the first successful rotation.
    fn rotate(
        &self,
        refresh_hash: &str,
        tokens: TokenHashes,
        now: i64,
    ) -> BoxFuture<StoreResult<Option<SessionRecord>>>;
    /// The session id holding either hash (revoked or not).
    fn session_id_by_hash(
        &self,
        access_hash: Option<&str>,
        refresh_hash: Option<&str>,
    ) -> BoxFuture<StoreResult<(Option<String>, Option<String>)>>;
    /// Revokes one session; idempotent. True if it was live.
    fn revoke(&self, session_id: &str, reason: &str, now: i64) -> BoxFuture<StoreResult<bool>>;
    /// Of `session_ids`, those no longer valid (revoked, expired, account
    /// disabled, or gone).
    fn invalid_sessions(
        &self,
        session_ids: Vec<String>,
        now: i64,
    ) -> BoxFuture<StoreResult<Vec<String>>>;
}

/// Durable fixed-window counters shared by every node on the database.
pub trait RateLimitStore: Send + Sync {
    /// Charges every rule or none: if any would exceed its limit nothing is
    /// consumed and `false` is returned.
    fn charge_all(&self, charges: Vec<RateCharge>) -> BoxFuture<StoreResult<bool>>;
}

/// Everything the services need from storage.
pub trait Store:
    AccountStore
    + SessionStore
    + RateLimitStore
    + NotificationStore
    + FriendStore
    + GroupStore
    + ChatStore
{
    /// `sqlite` or `postgres` (for `/status`; never the URL).
    fn backend(&self) -> &'static str;
}
