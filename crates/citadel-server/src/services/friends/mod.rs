//! Friends (`services.md` §7): `friends.add`, `remove`, `block` and `list`
//! with the states `invited_sent`, `invited_received`, `friend`, `blocked`.
//!
//! Rules: adding a user who invited you makes both of you friends; adding
//! anyone else sends an invitation; a block removes any friendship or
//! invitation and stops invitations both ways until the blocker removes it.
//! An unknown user and a user behind a block get the same answer (`user
//! unavailable`), so user ids cannot be probed. What it is not: no
//! presence and no delivery (chat and parties read [`FriendService::are_friends`]).

use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::metrics::{Metrics, ServiceEvent};
use crate::rpc::{AUTHENTICATION_REQUIRED, RpcContext, RpcError, RpcRegistry};
use crate::services::accounts::now_ms;
use crate::services::chat::revocations::{self, ChatRevocations};
use crate::services::notifications::rpc::parse_payload;
use crate::store::{AddOutcome, FriendState, Store, StoreError};

/// The one answer for an unknown user and a block either way.
pub const UNAVAILABLE: &str = "user unavailable";
/// A request naming the caller.
pub const SELF_TARGET: &str = "cannot target yourself";
/// `friends.max_relations` reached.
pub const LIMIT: &str = "friend limit reached";
/// Longest page of `friends.list`.
pub const MAX_PAGE: u32 = 100;

/// `[friends]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FriendsConfig {
    /// Relations (friends, invitations, blocks) one account may hold.
    pub max_relations: u32,
}

impl Default for FriendsConfig {
    fn default() -> Self {
        FriendsConfig {
            max_relations: 1_000,
        }
    }
}

impl FriendsConfig {
    /// The bound must be positive.
    pub fn validate(&self) -> Result<(), crate::config::ConfigError> {
        if self.max_relations == 0 {
            return Err(crate::config::ConfigError::Invalid {
                key: "friends.max_relations".into(),
                message: "must be at least 1".into(),
            });
        }
        Ok(())
    }
}

/// The friend graph service.
#[derive(Clone)]
pub struct FriendService {
    store: Arc<dyn Store>,
    config: FriendsConfig,
    metrics: Arc<Metrics>,
    revocations: Arc<dyn ChatRevocations>,
}

impl std::fmt::Debug for FriendService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FriendService").finish_non_exhaustive()
    }
}

fn storage(err: StoreError) -> RpcError {
    RpcError::Internal(err.to_string())
}

impl FriendService {
    /// A service over `store`.
    pub fn new(store: Arc<dyn Store>, config: FriendsConfig, metrics: Arc<Metrics>) -> Self {
        FriendService {
            store,
            config,
            metrics,
            revocations: revocations::none(),
        }
    }

    /// Reports every unfriend and block to chat before the call returns.
    pub fn with_revocations(mut self, revocations: Arc<dyn ChatRevocations>) -> Self {
        self.revocations = revocations;
        self
    }

    /// Whether `a` and `b` are friends and neither blocks the other.
    pub async fn are_friends(&self, a: &str, b: &str) -> Result<bool, StoreError> {
        let mine = self.store.friend_state(a, b).await?;
        let theirs = self.store.friend_state(b, a).await?;
        Ok(mine == Some(FriendState::Friend) && theirs == Some(FriendState::Friend))
    }

    async fn add(&self, actor: &str, other: &str) -> Result<serde_json::Value, RpcError> {
        if actor == other {
            return Err(RpcError::Client(SELF_TARGET));
        }
        match self
            .store
            .friend_add(actor, other, self.config.max_relations, now_ms())
            .await
            .map_err(storage)?
        {
            AddOutcome::State(state) => Ok(json!({ "user_id": other, "state": state.as_str() })),
            AddOutcome::Unavailable => Err(RpcError::Client(UNAVAILABLE)),
            AddOutcome::Limit => {
                self.metrics
                    .service_event(ServiceEvent::FriendsLimitRefused);
                Err(RpcError::Client(LIMIT))
            }
        }
    }

    async fn remove(&self, actor: &str, other: &str) -> Result<serde_json::Value, RpcError> {
        let removed = self
            .store
            .friend_remove(actor, other)
            .await
            .map_err(storage)?;
        if removed {
            self.revocations.friendship_ended(actor, other);
        }
        Ok(json!({ "user_id": other, "removed": removed }))
    }

    async fn block(&self, actor: &str, other: &str) -> Result<serde_json::Value, RpcError> {
        if actor == other {
            return Err(RpcError::Client(SELF_TARGET));
        }
        if !self
            .store
            .friend_block(actor, other, now_ms())
            .await
            .map_err(storage)?
        {
            return Err(RpcError::Client(UNAVAILABLE));
        }
        self.revocations.friendship_ended(actor, other);
        Ok(json!({ "user_id": other, "state": FriendState::Blocked.as_str() }))
    }

    async fn list(&self, actor: &str, request: ListRequest) -> Result<serde_json::Value, RpcError> {
        let limit = request
            .limit
            .map_or(MAX_PAGE, |l| l.clamp(1, i64::from(MAX_PAGE)) as u32);
        let state = match request.state.as_deref() {
            None => None,
            Some(s) => Some(
                FriendState::parse(s)
                    .ok_or_else(|| RpcError::Invalid(format!("unknown state: {s}")))?,
            ),
        };
        let rows = self
            .store
            .friend_list(actor, state, request.cursor, limit)
            .await
            .map_err(storage)?;
        let cursor = (rows.len() == limit as usize)
            .then(|| rows.last().map(|r| r.user_id.clone()))
            .flatten();
        let friends: Vec<serde_json::Value> = rows
            .into_iter()
            .map(|r| {
                json!({
                    "user_id": r.user_id,
                    "username": r.username,
                    "display_name": r.display_name,
                    "state": r.state.as_str(),
                    "updated_at_unix_ms": r.updated_at,
                })
            })
            .collect();
        Ok(json!({ "friends": friends, "cursor": cursor }))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TargetRequest {
    other: Option<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListRequest {
    limit: Option<i64>,
    cursor: Option<String>,
    state: Option<String>,
}

/// The `other` field: a non-empty string, else the common message.
fn other_of(payload: &[u8]) -> Result<String, RpcError> {
    let request: TargetRequest = parse_payload(payload)?;
    match request.other {
        Some(serde_json::Value::String(s)) if !s.is_empty() => Ok(s),
        _ => Err(RpcError::Client("missing string field: other")),
    }
}

#[derive(Clone, Copy)]
enum Method {
    Add,
    Remove,
    Block,
    List,
}

/// One `friends.*` call of an authenticated player.
async fn call(
    service: Arc<FriendService>,
    method: Method,
    ctx: RpcContext,
    payload: Bytes,
) -> Result<serde_json::Value, RpcError> {
    let actor = ctx
        .user_id
        .ok_or(RpcError::Client(AUTHENTICATION_REQUIRED))?;
    match method {
        Method::Add => service.add(&actor, &other_of(&payload)?).await,
        Method::Remove => service.remove(&actor, &other_of(&payload)?).await,
        Method::Block => service.block(&actor, &other_of(&payload)?).await,
        Method::List => service.list(&actor, parse_payload(&payload)?).await,
    }
}

/// Registers the `friends.*` methods.
pub fn register(registry: &RpcRegistry, service: &Arc<FriendService>) {
    let methods = [
        ("friends.add", Method::Add),
        ("friends.remove", Method::Remove),
        ("friends.block", Method::Block),
        ("friends.list", Method::List),
    ];
    crate::services::register_json_methods(registry, service, methods, call);
}
