//! Channel targets (`services.md` §5.1) and their authorisation.
//!
//! A target names a channel: `room` (the caller's current gateway room),
//! `direct` (two users with a mutual friendship and no block either way) or
//! `group` (current members of a group). Its channel id is derived from it
//! (`ch_` + 32 hex digits of a hash), so the id itself grants nothing: every
//! call re-runs [`Authority::allows`]. Room channels are keyed by this
//! node's id and a per-process nonce (room ids restart with the process).
//!
//! What it is not: no subscription state (see `registry`).

use std::sync::Arc;

use citadel_wire::service::ChatChannelType;
use serde_json::Value;

use super::ChatError;
use crate::place::{Place, RoomId};
use crate::realm::Realm;
use crate::services::groups::rpc::positive_id;
use crate::services::tokens::sha256_hex;
use crate::store::{ChannelRecord, FriendState, Standing, Store, StoreError};

/// What a channel is bound to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Target {
    /// A room on this node.
    Room(RoomId),
    /// Two users, the smaller id first.
    Direct(String, String),
    /// A group id.
    Group(u64),
}

impl Target {
    /// The wire channel type.
    pub fn channel_type(&self) -> ChatChannelType {
        match self {
            Target::Room(_) => ChatChannelType::Room,
            Target::Direct(..) => ChatChannelType::Direct,
            Target::Group(_) => ChatChannelType::Group,
        }
    }

    /// The stored row; `room_key` is this process's room namespace.
    pub fn record(&self, room_key: &str) -> ChannelRecord {
        let (kind, a, b) = match self {
            Target::Room(room) => ("room", format!("{room_key}:{}", room.get()), String::new()),
            Target::Direct(a, b) => ("direct", a.clone(), b.clone()),
            Target::Group(g) => ("group", g.to_string(), String::new()),
        };
        let digest = sha256_hex(&format!("{kind}\u{0}{a}\u{0}{b}"));
        ChannelRecord {
            channel_id: format!("ch_{}", &digest[..32]),
            kind: kind.to_owned(),
            target_a: a,
            target_b: b,
        }
    }

    /// The target of a stored direct or group channel (room channels
    /// belong to a process and are never resolved from storage).
    pub fn from_record(record: &ChannelRecord) -> Option<Target> {
        match record.kind.as_str() {
            "direct" => Some(Target::Direct(
                record.target_a.clone(),
                record.target_b.clone(),
            )),
            "group" => record.target_a.parse().ok().map(Target::Group),
            _ => None,
        }
    }

    /// The direct target between `a` and `b`.
    pub fn direct(a: &str, b: &str) -> Target {
        if a <= b {
            Target::Direct(a.to_owned(), b.to_owned())
        } else {
            Target::Direct(b.to_owned(), a.to_owned())
        }
    }
}

fn string_field<'a>(
    object: &'a serde_json::Map<String, Value>,
    name: &'static str,
) -> Option<&'a str> {
    object
        .get(name)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// Parses a join `target` for `user` standing in `place`. Unknown kinds,
/// a room target outside a room and a direct target naming oneself are
/// all `CHAT_UNAVAILABLE`; a group target's `group_id` must be a positive
/// JSON integer (else `missing integer field: group_id`), and an unknown
/// one is refused later, by [`Authority::allows`].
pub fn parse_target(value: &Value, user: &str, place: Option<Place>) -> Result<Target, ChatError> {
    let Some(object) = value.as_object() else {
        return Err(ChatError::InvalidJson);
    };
    let kind = string_field(object, "kind").ok_or(ChatError::MissingString("kind"))?;
    let allowed: &[&str] = match kind {
        "room" => &["kind"],
        "direct" => &["kind", "other_user_id"],
        "group" => &["kind", "group_id"],
        _ => return Err(ChatError::Unavailable),
    };
    if object.keys().any(|k| !allowed.contains(&k.as_str())) {
        return Err(ChatError::InvalidJson);
    }
    match kind {
        "room" => match place {
            Some(Place::Room(room)) => Ok(Target::Room(room)),
            _ => Err(ChatError::Unavailable),
        },
        "direct" => {
            let other = string_field(object, "other_user_id")
                .ok_or(ChatError::MissingString("other_user_id"))?;
            if other == user {
                return Err(ChatError::Unavailable);
            }
            Ok(Target::direct(user, other))
        }
        _ => positive_id(object.get("group_id"))
            .map(Target::Group)
            .ok_or(ChatError::MissingInteger("group_id")),
    }
}

/// Decides whether a user may use a target, now.
pub struct Authority {
    realm: Arc<Realm>,
    store: Arc<dyn Store>,
}

impl Authority {
    /// Over the realm (rooms) and the store (friends, groups).
    pub fn new(realm: Arc<Realm>, store: Arc<dyn Store>) -> Self {
        Authority { realm, store }
    }

    /// Whether `user` (on connection `participant`, `None` for a trusted
    /// script) may use `target`.
    pub async fn allows(
        &self,
        target: &Target,
        user: &str,
        participant: Option<u64>,
    ) -> Result<bool, StoreError> {
        match target {
            Target::Room(room) => {
                Ok(participant.is_some_and(|pid| self.realm.room_of(pid) == Some(*room)))
            }
            Target::Direct(a, b) => {
                let other = if user == a {
                    b
                } else if user == b {
                    a
                } else {
                    return Ok(false);
                };
                let mine = self.store.friend_state(user, other).await?;
                let theirs = self.store.friend_state(other, user).await?;
                Ok(mine == Some(FriendState::Friend) && theirs == Some(FriendState::Friend))
            }
            Target::Group(group) => Ok(self
                .role(*group, user)
                .await?
                .is_some_and(Standing::is_member)),
        }
    }

    /// `user`'s standing in `group`.
    pub async fn role(&self, group: u64, user: &str) -> Result<Option<Standing>, StoreError> {
        self.store.group_standing(group, user).await
    }
}
