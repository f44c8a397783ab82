//! Groups as storage sees them: a group row, and one standing per (group,
//! user). Every change of standing is a compare-and-set checked, with the
//! bounds it touches, inside one transaction.
//!
//! What it is not: the role rules (who may change whom) live in
//! `crate::services::groups`; the store only enforces what must hold under
//! concurrency (the expected standing, the acting user's rank, the member
//! cap, the per-user cap and "a group always keeps a superadmin").

use crate::util::BoxFuture;

use super::StoreResult;

/// A user's standing in a group: a pending admission or a role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Standing {
    /// Asked to join a closed group.
    JoinRequest,
    /// Invited by an admin.
    Invited,
    /// A member.
    Member,
    /// Manages members.
    Admin,
    /// Manages admins, deletes the group, transfers ownership.
    Superadmin,
}

impl Standing {
    /// The stored and wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Standing::JoinRequest => "join_request",
            Standing::Invited => "invited",
            Standing::Member => "member",
            Standing::Admin => "admin",
            Standing::Superadmin => "superadmin",
        }
    }

    /// The inverse of [`Standing::as_str`].
    pub fn parse(text: &str) -> Option<Standing> {
        Some(match text {
            "join_request" => Standing::JoinRequest,
            "invited" => Standing::Invited,
            "member" => Standing::Member,
            "admin" => Standing::Admin,
            "superadmin" => Standing::Superadmin,
            _ => return None,
        })
    }

    /// A role (member or above), not a pending admission.
    pub fn is_member(self) -> bool {
        self >= Standing::Member
    }
}

/// A group's stored fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupRecord {
    /// Random id in `1..=2^53 - 1`, stored as its decimal text.
    pub group_id: u64,
    /// Unique display name.
    pub name: String,
    /// Free text.
    pub description: String,
    /// Anyone may join (else a join becomes a request).
    pub open: bool,
    /// Cap on members (roles, not pending admissions).
    pub max_members: u32,
    /// A JSON object, as text.
    pub metadata: String,
    /// Who created it.
    pub creator_id: String,
    /// Unix ms.
    pub created_at: i64,
    /// Unix ms.
    pub updated_at: i64,
    /// Current members (roles only).
    pub member_count: u32,
}

/// One row of a member list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberRecord {
    /// The account.
    pub user_id: String,
    /// Its username.
    pub username: String,
    /// Its display name.
    pub display_name: Option<String>,
    /// Its standing.
    pub standing: Standing,
    /// Last change, Unix ms.
    pub updated_at: i64,
}

/// The editable fields of a group; `None` keeps the stored value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupUpdate {
    /// New unique name.
    pub name: Option<String>,
    /// New description.
    pub description: Option<String>,
    /// New openness.
    pub open: Option<bool>,
    /// New member cap (not below the current count).
    pub max_members: Option<u32>,
    /// New metadata object, as text.
    pub metadata: Option<String>,
}

/// One compare-and-set of a standing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StandingChange {
    /// The group.
    pub group_id: u64,
    /// Whose standing changes.
    pub user_id: String,
    /// What it must be now (`None`: no row).
    pub expected: Option<Standing>,
    /// What it becomes (`None`: the row goes).
    pub next: Option<Standing>,
    /// The acting user and the least standing they must hold, checked in
    /// the same transaction; `None` for a change on one's own behalf.
    pub authority: Option<(String, Standing)>,
    /// Cap on the rows one user may hold across groups.
    pub max_groups_per_user: u32,
    /// Unix ms.
    pub now: i64,
}

/// What a store operation on a group found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupOutcome {
    /// Done.
    Applied,
    /// No such group.
    NoGroup,
    /// The target's standing is not the expected one (changed meanwhile).
    Stale,
    /// The acting user lacks the standing the change needs.
    Unauthorized,
    /// The group is at `max_members`.
    Full,
    /// The user holds `max_groups_per_user` rows already.
    UserLimit,
    /// The change would leave the group without a superadmin.
    LastSuperadmin,
    /// The name is taken by another group.
    NameTaken,
    /// The new group's id is taken (the caller draws another).
    IdTaken,
    /// `max_members` below the current member count.
    BelowCount,
}

/// A group with the listing user's standing in it.
pub type ListedGroup = (GroupRecord, Option<Standing>);

/// Durable groups.
pub trait GroupStore: Send + Sync {
    /// Inserts `group` with `creator` as its superadmin. `IdTaken`,
    /// `NameTaken` or `UserLimit` refuse it.
    fn group_create(
        &self,
        group: GroupRecord,
        max_groups_per_user: u32,
    ) -> BoxFuture<StoreResult<GroupOutcome>>;
    /// The group and its member count.
    fn group_get(&self, group_id: u64) -> BoxFuture<StoreResult<Option<GroupRecord>>>;
    /// Groups ordered by name after `after`, at most `limit`; only names
    /// starting with `prefix` when given; only groups where `member` holds a
    /// row when given (with that standing).
    fn group_list(
        &self,
        prefix: Option<String>,
        member: Option<String>,
        after: Option<String>,
        limit: u32,
    ) -> BoxFuture<StoreResult<Vec<ListedGroup>>>;
    /// Applies `update` when `actor` is at least admin. `NoGroup`,
    /// `Unauthorized`, `NameTaken` or `BelowCount` refuse it.
    fn group_update(
        &self,
        group_id: u64,
        actor: &str,
        update: GroupUpdate,
        now: i64,
    ) -> BoxFuture<StoreResult<GroupOutcome>>;
    /// Deletes the group and every standing when `actor` is a superadmin.
    fn group_delete(&self, group_id: u64, actor: &str) -> BoxFuture<StoreResult<GroupOutcome>>;
    /// `user`'s standing in the group (`None`: no row).
    fn group_standing(&self, group_id: u64, user: &str)
    -> BoxFuture<StoreResult<Option<Standing>>>;
    /// Rows of the group ordered by user id after `after`, at most
    /// `limit`; pending admissions only when `pending` is true.
    fn group_members(
        &self,
        group_id: u64,
        pending: bool,
        after: Option<String>,
        limit: u32,
    ) -> BoxFuture<StoreResult<Vec<MemberRecord>>>;
    /// One compare-and-set of a standing (see [`StandingChange`]).
    fn group_change(&self, change: StandingChange) -> BoxFuture<StoreResult<GroupOutcome>>;
    /// `from` (a superadmin) hands the group to `to` (a member): `to`
    /// becomes superadmin and `from` admin, in one transaction.
    fn group_transfer(
        &self,
        group_id: u64,
        from: &str,
        to: &str,
        now: i64,
    ) -> BoxFuture<StoreResult<GroupOutcome>>;
}
