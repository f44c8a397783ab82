//! [`GroupStore`] over SQLite and PostgreSQL: the same statements on both.
//!
//! Every mutation of a group first touches its row (`UPDATE groups ... `),
//! which takes PostgreSQL's row lock and SQLite's write lock, so the checks
//! that follow (standings, counts) and the write they guard see no
//! concurrent change of the same group.

use super::{Pool, SqlStore};
use crate::store::groups::{
    GroupOutcome, GroupRecord, GroupStore, GroupUpdate, ListedGroup, MemberRecord, Standing,
    StandingChange,
};
use crate::store::{StoreError, StoreResult};
use crate::util::BoxFuture;

/// The columns of a [`GroupRow`] (a macro so queries stay `&'static str`).
macro_rules! group_columns {
    () => {
        "g.group_id, g.name, g.description, g.open, g.max_members, g.metadata, \
     g.creator_id, g.created_at, g.updated_at, \
     (SELECT COUNT(*) FROM group_members c WHERE c.group_id = g.group_id \
      AND c.state IN ('member', 'admin', 'superadmin'))"
    };
}
const TOUCH: &str = "UPDATE groups SET updated_at = updated_at WHERE group_id = $1";
const STANDING: &str = "SELECT state FROM group_members WHERE group_id = $1 AND user_id = $2";
const UPSERT: &str = "INSERT INTO group_members (group_id, user_id, state, updated_at) VALUES ($1, $2, $3, $4) \
                      ON CONFLICT (group_id, user_id) DO UPDATE SET state = $3, updated_at = $4";
const COUNT_MEMBERS: &str = "SELECT COUNT(*) FROM group_members WHERE group_id = $1 \
                             AND state IN ('member', 'admin', 'superadmin')";
const COUNT_SUPERADMINS: &str =
    "SELECT COUNT(*) FROM group_members WHERE group_id = $1 AND state = 'superadmin'";
const COUNT_OF_USER: &str = "SELECT COUNT(*) FROM group_members WHERE user_id = $1";

type GroupRow = (
    String,
    String,
    String,
    bool,
    i64,
    String,
    String,
    i64,
    i64,
    i64,
);

/// The record of a row; `None` for an id that is not canonical decimal
/// text (no such row is ever written; see docs/social.md).
fn group(row: GroupRow) -> Option<GroupRecord> {
    Some(GroupRecord {
        group_id: row
            .0
            .parse::<u64>()
            .ok()
            .filter(|id| id.to_string() == row.0)?,
        name: row.1,
        description: row.2,
        open: row.3,
        max_members: u32::try_from(row.4).unwrap_or(u32::MAX),
        metadata: row.5,
        creator_id: row.6,
        created_at: row.7,
        updated_at: row.8,
        member_count: u32::try_from(row.9).unwrap_or(u32::MAX),
    })
}

fn standing(row: Option<(String,)>) -> Option<Standing> {
    row.and_then(|(s,)| Standing::parse(&s))
}

/// A unique violation on the group name becomes `NameTaken`.
fn name_taken<T>(result: Result<T, sqlx::Error>) -> StoreResult<Result<T, GroupOutcome>> {
    match result.map_err(StoreError::from) {
        Ok(v) => Ok(Ok(v)),
        Err(StoreError::Conflict(_)) => Ok(Err(GroupOutcome::NameTaken)),
        Err(e) => Err(e),
    }
}

impl GroupStore for SqlStore {
    fn group_create(
        &self,
        g: GroupRecord,
        max_groups_per_user: u32,
    ) -> BoxFuture<StoreResult<GroupOutcome>> {
        let pool = self.pool.clone();
        let gid = g.group_id.to_string();
        Box::pin(async move {
            with_pool!(&pool, p => {
                let mut tx = p.begin().await?;
                let (held,): (i64,) = sqlx::query_as(COUNT_OF_USER)
                    .bind(&g.creator_id)
                    .fetch_one(&mut *tx)
                    .await?;
                if held >= i64::from(max_groups_per_user) {
                    return Ok(GroupOutcome::UserLimit);
                }
                let (taken,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM groups WHERE group_id = $1")
                    .bind(&gid)
                    .fetch_one(&mut *tx)
                    .await?;
                if taken > 0 {
                    return Ok(GroupOutcome::IdTaken);
                }
                let inserted = sqlx::query(
                    "INSERT INTO groups (group_id, name, description, open, max_members, metadata, \
                     creator_id, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)",
                )
                .bind(&gid)
                .bind(&g.name)
                .bind(&g.description)
                .bind(g.open)
                .bind(i64::from(g.max_members))
                .bind(&g.metadata)
                .bind(&g.creator_id)
                .bind(g.created_at)
                .execute(&mut *tx)
                .await;
                if let Err(outcome) = name_taken(inserted)? {
                    return Ok(outcome);
                }
                sqlx::query(UPSERT)
                    .bind(&gid)
                    .bind(&g.creator_id)
                    .bind(Standing::Superadmin.as_str())
                    .bind(g.created_at)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(GroupOutcome::Applied)
            })
        })
    }

    fn group_get(&self, group_id: u64) -> BoxFuture<StoreResult<Option<GroupRecord>>> {
        let pool = self.pool.clone();
        let group_id = group_id.to_string();
        Box::pin(async move {
            let sql = concat!(
                "SELECT ",
                group_columns!(),
                " FROM groups g WHERE g.group_id = $1"
            );
            let row: Option<GroupRow> = with_read_pool!(&pool, p => sqlx::query_as(sql)
                .bind(&group_id)
                .fetch_optional(p)
                .await)?;
            Ok(row.and_then(group))
        })
    }

    fn group_list(
        &self,
        prefix: Option<String>,
        member: Option<String>,
        after: Option<String>,
        limit: u32,
    ) -> BoxFuture<StoreResult<Vec<ListedGroup>>> {
        let pool = self.pool.clone();
        Box::pin(async move {
            let sql = concat!(
                "SELECT ",
                group_columns!(),
                ", m.state FROM groups g \
                 LEFT JOIN group_members m ON m.group_id = g.group_id AND m.user_id = $1 \
                 WHERE g.name > $2 AND ($3 = '' OR substr(g.name, 1, length($3)) = $3) \
                 AND ($1 = '' OR m.user_id IS NOT NULL) \
                 ORDER BY g.name LIMIT $4"
            );
            type Row = (
                String,
                String,
                String,
                bool,
                i64,
                String,
                String,
                i64,
                i64,
                i64,
                Option<String>,
            );
            let rows: Vec<Row> = with_read_pool!(&pool, p => sqlx::query_as(sql)
                .bind(member.as_deref().unwrap_or(""))
                .bind(after.as_deref().unwrap_or(""))
                .bind(prefix.as_deref().unwrap_or(""))
                .bind(i64::from(limit))
                .fetch_all(p)
                .await)?;
            Ok(rows
                .into_iter()
                .filter_map(|r| {
                    let state = r.10.as_deref().and_then(Standing::parse);
                    Some((
                        group((r.0, r.1, r.2, r.3, r.4, r.5, r.6, r.7, r.8, r.9))?,
                        state,
                    ))
                })
                .collect())
        })
    }

    fn group_update(
        &self,
        group_id: u64,
        actor: &str,
        update: GroupUpdate,
        now: i64,
    ) -> BoxFuture<StoreResult<GroupOutcome>> {
        let pool = self.pool.clone();
        let (group_id, actor) = (group_id.to_string(), actor.to_owned());
        Box::pin(async move {
            with_pool!(&pool, p => {
                let mut tx = p.begin().await?;
                if sqlx::query(TOUCH).bind(&group_id).execute(&mut *tx).await?.rows_affected() == 0 {
                    return Ok(GroupOutcome::NoGroup);
                }
                let mine = standing(sqlx::query_as(STANDING).bind(&group_id).bind(&actor).fetch_optional(&mut *tx).await?);
                if mine < Some(Standing::Admin) {
                    return Ok(GroupOutcome::Unauthorized);
                }
                if let Some(max) = update.max_members {
                    let (count,): (i64,) = sqlx::query_as(COUNT_MEMBERS).bind(&group_id).fetch_one(&mut *tx).await?;
                    if count > i64::from(max) {
                        return Ok(GroupOutcome::BelowCount);
                    }
                }
                let updated = sqlx::query(
                    "UPDATE groups SET name = COALESCE($1, name), description = COALESCE($2, description), \
                     open = COALESCE($3, open), max_members = COALESCE($4, max_members), \
                     metadata = COALESCE($5, metadata), updated_at = $6 WHERE group_id = $7",
                )
                .bind(update.name.as_deref())
                .bind(update.description.as_deref())
                .bind(update.open)
                .bind(update.max_members.map(i64::from))
                .bind(update.metadata.as_deref())
                .bind(now)
                .bind(&group_id)
                .execute(&mut *tx)
                .await;
                if let Err(outcome) = name_taken(updated)? {
                    return Ok(outcome);
                }
                tx.commit().await?;
                Ok(GroupOutcome::Applied)
            })
        })
    }

    fn group_delete(&self, group_id: u64, actor: &str) -> BoxFuture<StoreResult<GroupOutcome>> {
        let pool = self.pool.clone();
        let (group_id, actor) = (group_id.to_string(), actor.to_owned());
        Box::pin(async move {
            with_pool!(&pool, p => {
                let mut tx = p.begin().await?;
                if sqlx::query(TOUCH).bind(&group_id).execute(&mut *tx).await?.rows_affected() == 0 {
                    return Ok(GroupOutcome::NoGroup);
                }
                let mine = standing(sqlx::query_as(STANDING).bind(&group_id).bind(&actor).fetch_optional(&mut *tx).await?);
                if mine != Some(Standing::Superadmin) {
                    return Ok(GroupOutcome::Unauthorized);
                }
                sqlx::query("DELETE FROM group_members WHERE group_id = $1").bind(&group_id).execute(&mut *tx).await?;
                sqlx::query("DELETE FROM groups WHERE group_id = $1").bind(&group_id).execute(&mut *tx).await?;
                tx.commit().await?;
                Ok(GroupOutcome::Applied)
            })
        })
    }

    fn group_standing(
        &self,
        group_id: u64,
        user: &str,
    ) -> BoxFuture<StoreResult<Option<Standing>>> {
        let pool = self.pool.clone();
        let (group_id, user) = (group_id.to_string(), user.to_owned());
        Box::pin(async move {
            let row: Option<(String,)> = with_read_pool!(&pool, p => sqlx::query_as(STANDING)
                .bind(&group_id)
                .bind(&user)
                .fetch_optional(p)
                .await)?;
            Ok(standing(row))
        })
    }

    fn group_members(
        &self,
        group_id: u64,
        pending: bool,
        after: Option<String>,
        limit: u32,
    ) -> BoxFuture<StoreResult<Vec<MemberRecord>>> {
        let pool = self.pool.clone();
        let group_id = group_id.to_string();
        Box::pin(async move {
            let sql = "SELECT m.user_id, a.username, a.display_name, m.state, m.updated_at \
                       FROM group_members m JOIN accounts a ON a.user_id = m.user_id \
                       WHERE m.group_id = $1 AND m.user_id > $2 \
                       AND ($3 OR m.state IN ('member', 'admin', 'superadmin')) \
                       ORDER BY m.user_id LIMIT $4";
            type Row = (String, String, Option<String>, String, i64);
            let rows: Vec<Row> = with_read_pool!(&pool, p => sqlx::query_as(sql)
                .bind(&group_id)
                .bind(after.as_deref().unwrap_or(""))
                .bind(pending)
                .bind(i64::from(limit))
                .fetch_all(p)
                .await)?;
            Ok(rows
                .into_iter()
                .filter_map(|r| {
                    Some(MemberRecord {
                        standing: Standing::parse(&r.3)?,
                        user_id: r.0,
                        username: r.1,
                        display_name: r.2,
                        updated_at: r.4,
                    })
                })
                .collect())
        })
    }

    fn group_change(&self, c: StandingChange) -> BoxFuture<StoreResult<GroupOutcome>> {
        let pool = self.pool.clone();
        let gid = c.group_id.to_string();
        Box::pin(async move {
            with_pool!(&pool, p => {
                let mut tx = p.begin().await?;
                if sqlx::query(TOUCH).bind(&gid).execute(&mut *tx).await?.rows_affected() == 0 {
                    return Ok(GroupOutcome::NoGroup);
                }
                if let Some((actor, least)) = &c.authority {
                    let held = standing(sqlx::query_as(STANDING).bind(&gid).bind(actor).fetch_optional(&mut *tx).await?);
                    if held < Some(*least) {
                        return Ok(GroupOutcome::Unauthorized);
                    }
                }
                let current = standing(sqlx::query_as(STANDING).bind(&gid).bind(&c.user_id).fetch_optional(&mut *tx).await?);
                if current != c.expected {
                    return Ok(GroupOutcome::Stale);
                }
                if current == Some(Standing::Superadmin) && c.next != Some(Standing::Superadmin) {
                    let (supers,): (i64,) = sqlx::query_as(COUNT_SUPERADMINS).bind(&gid).fetch_one(&mut *tx).await?;
                    if supers <= 1 {
                        return Ok(GroupOutcome::LastSuperadmin);
                    }
                }
                let joins = c.next.is_some_and(Standing::is_member)
                    && !current.is_some_and(Standing::is_member);
                if joins {
                    let (max,): (i64,) = sqlx::query_as("SELECT max_members FROM groups WHERE group_id = $1")
                        .bind(&gid)
                        .fetch_one(&mut *tx)
                        .await?;
                    let (count,): (i64,) = sqlx::query_as(COUNT_MEMBERS).bind(&gid).fetch_one(&mut *tx).await?;
                    if count >= max {
                        return Ok(GroupOutcome::Full);
                    }
                }
                if current.is_none() && c.next.is_some() {
                    let (held,): (i64,) = sqlx::query_as(COUNT_OF_USER).bind(&c.user_id).fetch_one(&mut *tx).await?;
                    if held >= i64::from(c.max_groups_per_user) {
                        return Ok(GroupOutcome::UserLimit);
                    }
                }
                match c.next {
                    Some(next) => {
                        sqlx::query(UPSERT)
                            .bind(&gid)
                            .bind(&c.user_id)
                            .bind(next.as_str())
                            .bind(c.now)
                            .execute(&mut *tx)
                            .await?;
                    }
                    None => {
                        sqlx::query("DELETE FROM group_members WHERE group_id = $1 AND user_id = $2")
                            .bind(&gid)
                            .bind(&c.user_id)
                            .execute(&mut *tx)
                            .await?;
                    }
                }
                tx.commit().await?;
                Ok(GroupOutcome::Applied)
            })
        })
    }

    fn group_transfer(
        &self,
        group_id: u64,
        from: &str,
        to: &str,
        now: i64,
    ) -> BoxFuture<StoreResult<GroupOutcome>> {
        let pool = self.pool.clone();
        let (group_id, from, to) = (group_id.to_string(), from.to_owned(), to.to_owned());
        Box::pin(async move {
            with_pool!(&pool, p => {
                let mut tx = p.begin().await?;
                if sqlx::query(TOUCH).bind(&group_id).execute(&mut *tx).await?.rows_affected() == 0 {
                    return Ok(GroupOutcome::NoGroup);
                }
                let giver = standing(sqlx::query_as(STANDING).bind(&group_id).bind(&from).fetch_optional(&mut *tx).await?);
                if giver != Some(Standing::Superadmin) {
                    return Ok(GroupOutcome::Unauthorized);
                }
                let taker = standing(sqlx::query_as(STANDING).bind(&group_id).bind(&to).fetch_optional(&mut *tx).await?);
                if from == to || !taker.is_some_and(Standing::is_member) {
                    return Ok(GroupOutcome::Stale);
                }
                for (user, next) in [(&to, Standing::Superadmin), (&from, Standing::Admin)] {
                    sqlx::query(UPSERT)
                        .bind(&group_id)
                        .bind(user)
                        .bind(next.as_str())
                        .bind(now)
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await?;
                Ok(GroupOutcome::Applied)
            })
        })
    }
}
