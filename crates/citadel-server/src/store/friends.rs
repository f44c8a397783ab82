//! The friend graph as storage sees it: one row per direction holding the
//! state its owner sees, changed in one transaction per operation.
//!
//! What it is not: no rule about who may do what beyond the state machine
//! itself (see `crate::services::friends`).

use crate::util::BoxFuture;

use super::StoreResult;

/// A relation as one side sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FriendState {
    /// This side asked; the other has not answered.
    InvitedSent,
    /// The other side asked.
    InvitedReceived,
    /// Mutual.
    Friend,
    /// This side blocked the other.
    Blocked,
}

impl FriendState {
    /// The stored and wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            FriendState::InvitedSent => "invited_sent",
            FriendState::InvitedReceived => "invited_received",
            FriendState::Friend => "friend",
            FriendState::Blocked => "blocked",
        }
    }

    /// The inverse of [`FriendState::as_str`].
    pub fn parse(text: &str) -> Option<FriendState> {
        Some(match text {
            "invited_sent" => FriendState::InvitedSent,
            "invited_received" => FriendState::InvitedReceived,
            "friend" => FriendState::Friend,
            "blocked" => FriendState::Blocked,
            _ => return None,
        })
    }
}

/// What an add did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddOutcome {
    /// The actor's side is now in this state.
    State(FriendState),
    /// Unknown user, or a block either way: one answer for both.
    Unavailable,
    /// The actor has `max` relations already.
    Limit,
}

/// One entry of a friend list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FriendRecord {
    /// The other account.
    pub user_id: String,
    /// Its username.
    pub username: String,
    /// Its display name.
    pub display_name: Option<String>,
    /// The state as the lister sees it.
    pub state: FriendState,
    /// Last change, Unix ms.
    pub updated_at: i64,
}

/// The friend graph.
pub trait FriendStore: Send + Sync {
    /// `actor` adds `target`: accepts an incoming invitation, or sends one.
    /// Refused when either side blocked the other or `target` is unknown;
    /// `max` bounds the relations (blocks included) of both: a full actor
    /// gets `Limit`, a full target is `Unavailable`.
    fn friend_add(
        &self,
        actor: &str,
        target: &str,
        max: u32,
        now: i64,
    ) -> BoxFuture<StoreResult<AddOutcome>>;
    /// Removes any relation between the two that `actor` may remove
    /// (friendship or invitation either way, or the actor's own block).
    /// True if something was removed.
    fn friend_remove(&self, actor: &str, target: &str) -> BoxFuture<StoreResult<bool>>;
    /// `actor` blocks `target`: any friendship or invitation between them
    /// is removed. False for an unknown target.
    fn friend_block(&self, actor: &str, target: &str, now: i64) -> BoxFuture<StoreResult<bool>>;
    /// `actor`'s relations with a user id greater than `after`, ordered by
    /// user id, at most `limit`; only `state` when given.
    fn friend_list(
        &self,
        actor: &str,
        state: Option<FriendState>,
        after: Option<String>,
        limit: u32,
    ) -> BoxFuture<StoreResult<Vec<FriendRecord>>>;
    /// The state `actor` sees toward `other` (`None`: no relation).
    fn friend_state(&self, actor: &str, other: &str)
    -> BoxFuture<StoreResult<Option<FriendState>>>;
}
