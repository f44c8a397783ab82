//! Groups (`services.md` §7): named groups with the roles `member`, `admin`
//! and `superadmin`, and the pending admissions `join_request` and
//! `invited`.
//!
//! Rules: admins add, admit and kick members; only a superadmin promotes,
//! demotes or kicks admins, deletes the group or transfers ownership; a
//! group always keeps a superadmin (the last one cannot leave or step down
//! without a successor). Client RPCs are in [`rpc`]; the trusted operations
//! (`join`, `invite`, `approve_request`, `accept_invitation`,
//! `cancel_admission`, `transfer_ownership`) are reached only from Lua
//! through [`GroupService::trusted`].
//!
//! Every change is one compare-and-set in the store that re-checks the
//! actor's rank and the bounds in the same transaction, so a concurrent
//! demotion or a full group cannot be raced past. What it is not: no
//! delivery (group chat reads [`GroupService::is_member`]).

pub mod rpc;

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::metrics::{Metrics, ServiceEvent};
use crate::rpc::RpcError;
use crate::services::accounts::now_ms;
use crate::services::chat::revocations::{self, ChatRevocations};
use crate::store::{
    GroupOutcome, GroupRecord, GroupUpdate, Standing, StandingChange, Store, StoreError,
};
use rpc::Fields;

/// Messages of the group RPCs (docs/social.md lists them).
pub mod message {
    /// No such group.
    pub const NOT_FOUND: &str = "group not found";
    /// The actor's role does not allow the operation.
    pub const PERMISSION_DENIED: &str = "permission denied";
    /// The target holds no role in the group.
    pub const NOT_A_MEMBER: &str = "not a member";
    /// The target already holds a role.
    pub const ALREADY_MEMBER: &str = "already a member";
    /// `max_members` reached.
    pub const FULL: &str = "group full";
    /// The user holds `groups.max_groups_per_user` groups and admissions.
    pub const USER_LIMIT: &str = "group limit reached";
    /// The change would leave no superadmin.
    pub const LAST_SUPERADMIN: &str = "last superadmin needs a successor";
    /// Another group has the name.
    pub const NAME_TAKEN: &str = "group name taken";
    /// `max_members` below the current member count.
    pub const BELOW_COUNT: &str = "max_members below member count";
    /// Unknown target account.
    pub const USER_UNAVAILABLE: &str = "user unavailable";
    /// The actor named themself where that makes no sense.
    pub const SELF_TARGET: &str = "cannot target yourself";
    /// Promote on a superadmin.
    pub const TOP_ROLE: &str = "cannot promote further";
    /// Demote on a member.
    pub const BOTTOM_ROLE: &str = "cannot demote further";
    /// `approve_request` without a request.
    pub const NO_REQUEST: &str = "no pending request";
    /// `accept_invitation` without an invitation.
    pub const NO_INVITATION: &str = "no pending invitation";
    /// `cancel_admission` without a request or invitation.
    pub const NO_ADMISSION: &str = "no pending admission";
    /// The target's standing changed while the call ran.
    pub const CHANGED: &str = "group changed; try again";
    /// An unknown `groups_call` operation.
    pub const UNKNOWN_OPERATION: &str = "unknown group operation";
}

/// Longest group name, in characters.
pub const MAX_NAME_CHARS: usize = 64;
/// Longest description, in bytes.
pub const MAX_DESCRIPTION_BYTES: usize = 256;
/// Longest page of `groups.list` and of a member list.
pub const MAX_PAGE: u32 = 100;

/// `[groups]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GroupsConfig {
    /// Upper bound (and default) of a group's `max_members`.
    pub max_members: u32,
    /// Groups and pending admissions one account may hold.
    pub max_groups_per_user: u32,
    /// Largest `metadata` object, serialised, in bytes.
    pub max_metadata_bytes: u32,
}

impl Default for GroupsConfig {
    fn default() -> Self {
        GroupsConfig {
            max_members: 100,
            max_groups_per_user: 100,
            max_metadata_bytes: 4_096,
        }
    }
}

impl GroupsConfig {
    /// Every bound must be positive.
    pub fn validate(&self) -> Result<(), crate::config::ConfigError> {
        for (key, value) in [
            ("groups.max_members", self.max_members),
            ("groups.max_groups_per_user", self.max_groups_per_user),
            ("groups.max_metadata_bytes", self.max_metadata_bytes),
        ] {
            if value == 0 {
                return Err(crate::config::ConfigError::Invalid {
                    key: key.into(),
                    message: "must be at least 1".into(),
                });
            }
        }
        Ok(())
    }
}

/// The group service.
pub struct GroupService {
    store: Arc<dyn Store>,
    config: GroupsConfig,
    metrics: Arc<Metrics>,
    revocations: Arc<dyn ChatRevocations>,
}

impl std::fmt::Debug for GroupService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupService").finish_non_exhaustive()
    }
}

fn storage(err: StoreError) -> RpcError {
    RpcError::Internal(err.to_string())
}

/// Largest group id: ids stay exact in a JavaScript number.
pub const MAX_GROUP_ID: u64 = (1 << 53) - 1;

/// Draws for a new group id before `groups.create` gives up (each draw
/// collides with probability groups / 2^53).
const ID_DRAWS: usize = 4;

/// A random id in `1..=MAX_GROUP_ID`.
fn new_id() -> Result<u64, RpcError> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).map_err(|e| RpcError::Internal(format!("no randomness: {e}")))?;
    Ok(u64::from_le_bytes(bytes) % MAX_GROUP_ID + 1)
}

/// The JSON of a group.
pub fn group_json(g: &GroupRecord) -> Value {
    json!({
        "group_id": g.group_id,
        "name": g.name,
        "description": g.description,
        "open": g.open,
        "max_members": g.max_members,
        "member_count": g.member_count,
        "metadata": serde_json::from_str::<Value>(&g.metadata).unwrap_or_else(|_| json!({})),
        "creator_id": g.creator_id,
        "created_at_unix_ms": g.created_at,
        "updated_at_unix_ms": g.updated_at,
    })
}

fn standing_json(group_id: u64, user_id: &str, standing: Option<Standing>) -> Value {
    json!({
        "group_id": group_id,
        "user_id": user_id,
        "state": standing.map(Standing::as_str),
    })
}

impl GroupService {
    /// A service over `store`.
    pub fn new(store: Arc<dyn Store>, config: GroupsConfig, metrics: Arc<Metrics>) -> Self {
        GroupService {
            store,
            config,
            metrics,
            revocations: revocations::none(),
        }
    }

    /// Reports every kick, leave and deletion to chat before the call
    /// returns.
    pub fn with_revocations(mut self, revocations: Arc<dyn ChatRevocations>) -> Self {
        self.revocations = revocations;
        self
    }

    /// Whether `user` holds a role (not a pending admission) in the group.
    pub async fn is_member(&self, group_id: u64, user: &str) -> Result<bool, StoreError> {
        Ok(self
            .store
            .group_standing(group_id, user)
            .await?
            .is_some_and(Standing::is_member))
    }

    /// Maps a refused store outcome to its message, counting bound trips.
    fn refused(&self, outcome: GroupOutcome) -> RpcError {
        let text = match outcome {
            GroupOutcome::Applied => return RpcError::Internal("applied is not a refusal".into()),
            GroupOutcome::NoGroup => message::NOT_FOUND,
            GroupOutcome::Stale => message::CHANGED,
            GroupOutcome::Unauthorized => message::PERMISSION_DENIED,
            GroupOutcome::Full => {
                self.metrics.service_event(ServiceEvent::GroupsFullRefused);
                message::FULL
            }
            GroupOutcome::UserLimit => {
                self.metrics
                    .service_event(ServiceEvent::GroupsUserLimitRefused);
                message::USER_LIMIT
            }
            GroupOutcome::LastSuperadmin => message::LAST_SUPERADMIN,
            GroupOutcome::NameTaken => message::NAME_TAKEN,
            GroupOutcome::IdTaken => return RpcError::Internal("group id taken".into()),
            GroupOutcome::BelowCount => message::BELOW_COUNT,
        };
        RpcError::Client(text)
    }

    fn applied(&self, outcome: GroupOutcome) -> Result<(), RpcError> {
        match outcome {
            GroupOutcome::Applied => Ok(()),
            other => Err(self.refused(other)),
        }
    }

    async fn standing(&self, group_id: u64, user: &str) -> Result<Option<Standing>, RpcError> {
        self.store
            .group_standing(group_id, user)
            .await
            .map_err(storage)
    }

    async fn group(&self, group_id: u64) -> Result<GroupRecord, RpcError> {
        self.store
            .group_get(group_id)
            .await
            .map_err(storage)?
            .ok_or(RpcError::Client(message::NOT_FOUND))
    }

    async fn require_account(&self, user_id: &str) -> Result<(), RpcError> {
        match self.store.account(user_id).await.map_err(storage)? {
            Some(a) if !a.disabled => Ok(()),
            _ => Err(RpcError::Client(message::USER_UNAVAILABLE)),
        }
    }

    /// One compare-and-set from `expected` to `next`; returns the change.
    async fn change(
        &self,
        group_id: u64,
        user_id: &str,
        expected: Option<Standing>,
        next: Option<Standing>,
        authority: Option<(&str, Standing)>,
    ) -> Result<Value, RpcError> {
        let outcome = self
            .store
            .group_change(StandingChange {
                group_id,
                user_id: user_id.to_owned(),
                expected,
                next,
                authority: authority.map(|(a, s)| (a.to_owned(), s)),
                max_groups_per_user: self.config.max_groups_per_user,
                now: now_ms(),
            })
            .await
            .map_err(storage)?;
        self.applied(outcome)?;
        Ok(standing_json(group_id, user_id, next))
    }

    /// Checks and normalises the editable fields shared by create and update.
    fn edits(&self, fields: &Fields) -> Result<GroupUpdate, RpcError> {
        let name = match fields.opt_string("name")? {
            Some(n) => {
                let n = n.trim().to_owned();
                if n.is_empty()
                    || n.chars().count() > MAX_NAME_CHARS
                    || n.chars().any(char::is_control)
                {
                    return Err(RpcError::Invalid(format!(
                        "name must be 1 to {MAX_NAME_CHARS} printable characters"
                    )));
                }
                Some(n)
            }
            None => None,
        };
        let description = fields.opt_string("description")?;
        if description
            .as_ref()
            .is_some_and(|d| d.len() > MAX_DESCRIPTION_BYTES)
        {
            return Err(RpcError::Invalid(format!(
                "description longer than {MAX_DESCRIPTION_BYTES} bytes"
            )));
        }
        let max_members = fields.opt_u32("max_members")?;
        if max_members.is_some_and(|m| m == 0 || m > self.config.max_members) {
            return Err(RpcError::Invalid(format!(
                "max_members must be 1 to {}",
                self.config.max_members
            )));
        }
        let metadata = match fields.get("metadata") {
            None | Some(Value::Null) => None,
            Some(v @ Value::Object(_)) => {
                let text = v.to_string();
                if text.len() > self.config.max_metadata_bytes as usize {
                    return Err(RpcError::Invalid(format!(
                        "metadata longer than {} bytes",
                        self.config.max_metadata_bytes
                    )));
                }
                Some(text)
            }
            Some(_) => return Err(RpcError::Invalid("metadata must be an object".into())),
        };
        Ok(GroupUpdate {
            name,
            description,
            open: fields.opt_bool("open")?,
            max_members,
            metadata,
        })
    }

    /// `groups.create`: the caller becomes the superadmin.
    pub async fn create(&self, actor: &str, fields: Fields) -> Result<Value, RpcError> {
        fields.string("name")?;
        let edits = self.edits(&fields)?;
        let now = now_ms();
        let mut record = GroupRecord {
            group_id: new_id()?,
            name: edits.name.unwrap_or_default(),
            description: edits.description.unwrap_or_default(),
            open: edits.open.unwrap_or(false),
            max_members: edits.max_members.unwrap_or(self.config.max_members),
            metadata: edits.metadata.unwrap_or_else(|| "{}".into()),
            creator_id: actor.to_owned(),
            created_at: now,
            updated_at: now,
            member_count: 1,
        };
        for _ in 0..ID_DRAWS {
            let outcome = self
                .store
                .group_create(record.clone(), self.config.max_groups_per_user)
                .await
                .map_err(storage)?;
            if outcome != GroupOutcome::IdTaken {
                self.applied(outcome)?;
                self.metrics.service_event(ServiceEvent::GroupsCreated);
                return Ok(group_json(&record));
            }
            record.group_id = new_id()?;
        }
        Err(RpcError::Internal("no free group id".into()))
    }

    /// `groups.list`: by name, optionally by prefix or the caller's own.
    pub async fn list(&self, actor: &str, fields: Fields) -> Result<Value, RpcError> {
        let mine = fields.opt_bool("mine")?.unwrap_or(false);
        let limit = fields
            .opt_u32("limit")?
            .map_or(MAX_PAGE, |l| l.clamp(1, MAX_PAGE));
        let rows = self
            .store
            .group_list(
                fields.opt_string("name_prefix")?,
                mine.then(|| actor.to_owned()),
                fields.opt_string("cursor")?,
                limit,
            )
            .await
            .map_err(storage)?;
        let cursor = (rows.len() == limit as usize)
            .then(|| rows.last().map(|(g, _)| g.name.clone()))
            .flatten();
        let groups: Vec<Value> = rows
            .iter()
            .map(|(g, standing)| {
                let mut v = group_json(g);
                if mine {
                    v["state"] = json!(standing.map(Standing::as_str));
                }
                v
            })
            .collect();
        Ok(json!({ "groups": groups, "cursor": cursor }))
    }

    /// `groups.get`: the group, the caller's standing and a page of members
    /// (pending admissions too when the caller is an admin).
    pub async fn get(&self, actor: &str, fields: Fields) -> Result<Value, RpcError> {
        let group_id = fields.group_id()?;
        let group = self.group(group_id).await?;
        let mine = self.standing(group_id, actor).await?;
        let limit = fields
            .opt_u32("limit")?
            .map_or(MAX_PAGE, |l| l.clamp(1, MAX_PAGE));
        let members = self
            .store
            .group_members(
                group_id,
                mine >= Some(Standing::Admin),
                fields.opt_string("cursor")?,
                limit,
            )
            .await
            .map_err(storage)?;
        let cursor = (members.len() == limit as usize)
            .then(|| members.last().map(|m| m.user_id.clone()))
            .flatten();
        let members: Vec<Value> = members
            .into_iter()
            .map(|m| {
                json!({
                    "user_id": m.user_id,
                    "username": m.username,
                    "display_name": m.display_name,
                    "state": m.standing.as_str(),
                    "updated_at_unix_ms": m.updated_at,
                })
            })
            .collect();
        Ok(json!({
            "group": group_json(&group),
            "state": mine.map(Standing::as_str),
            "members": members,
            "cursor": cursor,
        }))
    }

    /// `groups.update`: admins and superadmins.
    pub async fn update(&self, actor: &str, fields: Fields) -> Result<Value, RpcError> {
        let group_id = fields.group_id()?;
        let edits = self.edits(&fields)?;
        let outcome = self
            .store
            .group_update(group_id, actor, edits, now_ms())
            .await
            .map_err(storage)?;
        self.applied(outcome)?;
        Ok(group_json(&self.group(group_id).await?))
    }

    /// `groups.delete`: superadmins only.
    pub async fn delete(&self, actor: &str, fields: Fields) -> Result<Value, RpcError> {
        let group_id = fields.group_id()?;
        let outcome = self
            .store
            .group_delete(group_id, actor)
            .await
            .map_err(storage)?;
        self.applied(outcome)?;
        self.revocations.group_deleted(group_id);
        self.metrics.service_event(ServiceEvent::GroupsDeleted);
        Ok(json!({ "group_id": group_id, "deleted": true }))
    }

    /// `groups.add_member`: an admin makes a user a member at once (a
    /// pending request or invitation is admitted).
    pub async fn add_member(&self, actor: &str, fields: Fields) -> Result<Value, RpcError> {
        let (group_id, user_id) = (fields.group_id()?, fields.string("user_id")?);
        self.group(group_id).await?;
        self.require_account(&user_id).await?;
        let current = self.standing(group_id, &user_id).await?;
        if current.is_some_and(Standing::is_member) {
            return Err(RpcError::Client(message::ALREADY_MEMBER));
        }
        self.change(
            group_id,
            &user_id,
            current,
            Some(Standing::Member),
            Some((actor, Standing::Admin)),
        )
        .await
    }

    /// `groups.leave`: drops the caller's role or pending admission.
    pub async fn leave(&self, actor: &str, fields: Fields) -> Result<Value, RpcError> {
        let group_id = fields.group_id()?;
        self.group(group_id).await?;
        let current = self.standing(group_id, actor).await?;
        if current.is_none() {
            return Err(RpcError::Client(message::NOT_A_MEMBER));
        }
        let left = self.change(group_id, actor, current, None, None).await?;
        self.revocations.membership_ended(group_id, actor);
        Ok(left)
    }

    /// `groups.kick`: admins remove members and pending admissions;
    /// removing an admin takes a superadmin; superadmins cannot be kicked.
    pub async fn kick(&self, actor: &str, fields: Fields) -> Result<Value, RpcError> {
        let (group_id, user_id) = (fields.group_id()?, fields.string("user_id")?);
        if user_id == actor {
            return Err(RpcError::Client(message::SELF_TARGET));
        }
        self.group(group_id).await?;
        let current = self.standing(group_id, &user_id).await?;
        let needed = match current {
            None => return Err(RpcError::Client(message::NOT_A_MEMBER)),
            Some(Standing::Superadmin) => return Err(RpcError::Client(message::PERMISSION_DENIED)),
            Some(Standing::Admin) => Standing::Superadmin,
            Some(_) => Standing::Admin,
        };
        let kicked = self
            .change(group_id, &user_id, current, None, Some((actor, needed)))
            .await?;
        self.revocations.membership_ended(group_id, &user_id);
        Ok(kicked)
    }

    /// `groups.promote` (superadmins): member to admin, admin to superadmin.
    pub async fn promote(&self, actor: &str, fields: Fields) -> Result<Value, RpcError> {
        let (group_id, user_id) = (fields.group_id()?, fields.string("user_id")?);
        self.group(group_id).await?;
        let current = self.standing(group_id, &user_id).await?;
        let next = match current {
            Some(Standing::Member) => Standing::Admin,
            Some(Standing::Admin) => Standing::Superadmin,
            Some(Standing::Superadmin) => return Err(RpcError::Client(message::TOP_ROLE)),
            _ => return Err(RpcError::Client(message::NOT_A_MEMBER)),
        };
        self.change(
            group_id,
            &user_id,
            current,
            Some(next),
            Some((actor, Standing::Superadmin)),
        )
        .await
    }

    /// `groups.demote` (superadmins): superadmin to admin (never the last
    /// one), admin to member.
    pub async fn demote(&self, actor: &str, fields: Fields) -> Result<Value, RpcError> {
        let (group_id, user_id) = (fields.group_id()?, fields.string("user_id")?);
        self.group(group_id).await?;
        let current = self.standing(group_id, &user_id).await?;
        let next = match current {
            Some(Standing::Superadmin) => Standing::Admin,
            Some(Standing::Admin) => Standing::Member,
            Some(Standing::Member) => return Err(RpcError::Client(message::BOTTOM_ROLE)),
            _ => return Err(RpcError::Client(message::NOT_A_MEMBER)),
        };
        self.change(
            group_id,
            &user_id,
            current,
            Some(next),
            Some((actor, Standing::Superadmin)),
        )
        .await
    }

    /// The trusted operations of `citadel.groups_call(actor, operation,
    /// payload_json)`; `actor` is the account acting.
    pub async fn trusted(
        &self,
        actor: &str,
        operation: &str,
        payload: &[u8],
    ) -> Result<Value, RpcError> {
        match operation {
            "join" => {
                self.join(actor, Fields::parse(payload, &["group_id"])?)
                    .await
            }
            "invite" => {
                self.invite(actor, Fields::parse(payload, &["group_id", "user_id"])?)
                    .await
            }
            "approve_request" => {
                self.approve(actor, Fields::parse(payload, &["group_id", "user_id"])?)
                    .await
            }
            "accept_invitation" => {
                self.accept(actor, Fields::parse(payload, &["group_id"])?)
                    .await
            }
            "cancel_admission" => {
                self.cancel(actor, Fields::parse(payload, &["group_id", "user_id"])?)
                    .await
            }
            "transfer_ownership" => {
                self.transfer(actor, Fields::parse(payload, &["group_id", "user_id"])?)
                    .await
            }
            _ => Err(RpcError::Client(message::UNKNOWN_OPERATION)),
        }
    }

    /// `join`: an open group admits at once, a closed one records a
    /// request; a pending invitation is accepted. Repeating a request is
    /// harmless.
    async fn join(&self, actor: &str, fields: Fields) -> Result<Value, RpcError> {
        let group_id = fields.group_id()?;
        let group = self.group(group_id).await?;
        let current = self.standing(group_id, actor).await?;
        let next = match current {
            Some(s) if s.is_member() => return Err(RpcError::Client(message::ALREADY_MEMBER)),
            Some(Standing::JoinRequest) => return Ok(standing_json(group_id, actor, current)),
            Some(_) => Standing::Member,
            None if group.open => Standing::Member,
            None => Standing::JoinRequest,
        };
        self.change(group_id, actor, current, Some(next), None)
            .await
    }

    /// `invite`: an admin invites a user; a pending request is admitted.
    async fn invite(&self, actor: &str, fields: Fields) -> Result<Value, RpcError> {
        let (group_id, user_id) = (fields.group_id()?, fields.string("user_id")?);
        self.group(group_id).await?;
        self.require_account(&user_id).await?;
        let current = self.standing(group_id, &user_id).await?;
        let next = match current {
            Some(s) if s.is_member() => return Err(RpcError::Client(message::ALREADY_MEMBER)),
            Some(Standing::JoinRequest) => Standing::Member,
            _ => Standing::Invited,
        };
        self.change(
            group_id,
            &user_id,
            current,
            Some(next),
            Some((actor, Standing::Admin)),
        )
        .await
    }

    /// `approve_request`: an admin admits a join request.
    async fn approve(&self, actor: &str, fields: Fields) -> Result<Value, RpcError> {
        let (group_id, user_id) = (fields.group_id()?, fields.string("user_id")?);
        self.group(group_id).await?;
        if self.standing(group_id, &user_id).await? != Some(Standing::JoinRequest) {
            return Err(RpcError::Client(message::NO_REQUEST));
        }
        self.change(
            group_id,
            &user_id,
            Some(Standing::JoinRequest),
            Some(Standing::Member),
            Some((actor, Standing::Admin)),
        )
        .await
    }

    /// `accept_invitation`: the invited actor becomes a member.
    async fn accept(&self, actor: &str, fields: Fields) -> Result<Value, RpcError> {
        let group_id = fields.group_id()?;
        self.group(group_id).await?;
        if self.standing(group_id, actor).await? != Some(Standing::Invited) {
            return Err(RpcError::Client(message::NO_INVITATION));
        }
        self.change(
            group_id,
            actor,
            Some(Standing::Invited),
            Some(Standing::Member),
            None,
        )
        .await
    }

    /// `cancel_admission`: withdraws a request or invitation; the actor's
    /// own by default, anyone's for an admin (`user_id`).
    async fn cancel(&self, actor: &str, fields: Fields) -> Result<Value, RpcError> {
        let group_id = fields.group_id()?;
        let user_id = fields
            .opt_string("user_id")?
            .unwrap_or_else(|| actor.to_owned());
        self.group(group_id).await?;
        let current = self.standing(group_id, &user_id).await?;
        if !matches!(current, Some(Standing::JoinRequest | Standing::Invited)) {
            return Err(RpcError::Client(message::NO_ADMISSION));
        }
        let authority = (user_id != actor).then_some((actor, Standing::Admin));
        self.change(group_id, &user_id, current, None, authority)
            .await
    }

    /// `transfer_ownership`: a superadmin hands the group to a member and
    /// becomes an admin.
    async fn transfer(&self, actor: &str, fields: Fields) -> Result<Value, RpcError> {
        let (group_id, user_id) = (fields.group_id()?, fields.string("user_id")?);
        if user_id == actor {
            return Err(RpcError::Client(message::SELF_TARGET));
        }
        let outcome = self
            .store
            .group_transfer(group_id, actor, &user_id, now_ms())
            .await
            .map_err(storage)?;
        match outcome {
            GroupOutcome::Stale => Err(RpcError::Client(message::NOT_A_MEMBER)),
            other => self.applied(other),
        }?;
        Ok(json!({
            "group_id": group_id,
            "user_id": user_id,
            "state": Standing::Superadmin.as_str(),
            "previous_owner": actor,
        }))
    }
}
