//! [`FriendStore`] over SQLite and PostgreSQL: the same statements on both,
//! each operation in one transaction.

use super::{Pool, SqlStore};
use crate::store::StoreResult;
use crate::store::friends::{AddOutcome, FriendRecord, FriendState, FriendStore};
use crate::util::BoxFuture;

const UPSERT: &str = "INSERT INTO friendships (user_id, other_id, state, updated_at) VALUES ($1, $2, $3, $4) \
                      ON CONFLICT (user_id, other_id) DO UPDATE SET state = $3, updated_at = $4";
const DELETE_PAIR: &str = "DELETE FROM friendships WHERE (user_id = $1 AND other_id = $2) OR (user_id = $2 AND other_id = $1)";

fn state(text: Option<(String,)>) -> Option<FriendState> {
    text.and_then(|(s,)| FriendState::parse(&s))
}

impl FriendStore for SqlStore {
    fn friend_add(
        &self,
        actor: &str,
        target: &str,
        max: u32,
        now: i64,
    ) -> BoxFuture<StoreResult<AddOutcome>> {
        let pool = self.pool.clone();
        let (actor, target) = (actor.to_owned(), target.to_owned());
        Box::pin(async move {
            let select = "SELECT state FROM friendships WHERE user_id = $1 AND other_id = $2";
            with_pool!(&pool, p => {
                let mut tx = p.begin().await?;
                let known: Option<(String,)> =
                    sqlx::query_as("SELECT user_id FROM accounts WHERE user_id = $1 AND disabled = FALSE")
                        .bind(&target)
                        .fetch_optional(&mut *tx)
                        .await?;
                if known.is_none() {
                    return Ok(AddOutcome::Unavailable);
                }
                let mine = state(sqlx::query_as(select).bind(&actor).bind(&target).fetch_optional(&mut *tx).await?);
                let theirs = state(sqlx::query_as(select).bind(&target).bind(&actor).fetch_optional(&mut *tx).await?);
                let outcome = match (mine, theirs) {
                    (Some(FriendState::Blocked), _) | (_, Some(FriendState::Blocked)) => {
                        AddOutcome::Unavailable
                    }
                    (Some(FriendState::Friend), _) => AddOutcome::State(FriendState::Friend),
                    (Some(FriendState::InvitedSent), _) => {
                        AddOutcome::State(FriendState::InvitedSent)
                    }
                    (Some(FriendState::InvitedReceived), _) => {
                        for (a, b) in [(&actor, &target), (&target, &actor)] {
                            sqlx::query(UPSERT)
                                .bind(a)
                                .bind(b)
                                .bind(FriendState::Friend.as_str())
                                .bind(now)
                                .execute(&mut *tx)
                                .await?;
                        }
                        AddOutcome::State(FriendState::Friend)
                    }
                    (None, _) => {
                        let count = "SELECT COUNT(*) FROM friendships WHERE user_id = $1";
                        let (mine,): (i64,) =
                            sqlx::query_as(count).bind(&actor).fetch_one(&mut *tx).await?;
                        let (theirs,): (i64,) =
                            sqlx::query_as(count).bind(&target).fetch_one(&mut *tx).await?;
                        if mine >= i64::from(max) {
                            AddOutcome::Limit
                        } else if theirs >= i64::from(max) {
                            // A full inbox of relations looks like any other
                            // unavailable user.
                            AddOutcome::Unavailable
                        } else {
                            for (a, b, s) in [
                                (&actor, &target, FriendState::InvitedSent),
                                (&target, &actor, FriendState::InvitedReceived),
                            ] {
                                sqlx::query(UPSERT)
                                    .bind(a)
                                    .bind(b)
                                    .bind(s.as_str())
                                    .bind(now)
                                    .execute(&mut *tx)
                                    .await?;
                            }
                            AddOutcome::State(FriendState::InvitedSent)
                        }
                    }
                };
                tx.commit().await?;
                Ok(outcome)
            })
        })
    }

    fn friend_remove(&self, actor: &str, target: &str) -> BoxFuture<StoreResult<bool>> {
        let pool = self.pool.clone();
        let (actor, target) = (actor.to_owned(), target.to_owned());
        Box::pin(async move {
            // A block by the other side is theirs: it stays.
            let sql = "DELETE FROM friendships WHERE (user_id = $1 AND other_id = $2) \
                       OR (user_id = $2 AND other_id = $1 AND state <> 'blocked')";
            let removed = with_pool!(&pool, p => sqlx::query(sql).bind(&actor).bind(&target).execute(p).await.map(|r| r.rows_affected()))?;
            Ok(removed > 0)
        })
    }

    fn friend_block(&self, actor: &str, target: &str, now: i64) -> BoxFuture<StoreResult<bool>> {
        let pool = self.pool.clone();
        let (actor, target) = (actor.to_owned(), target.to_owned());
        Box::pin(async move {
            with_pool!(&pool, p => {
                let mut tx = p.begin().await?;
                let known: Option<(String,)> =
                    sqlx::query_as("SELECT user_id FROM accounts WHERE user_id = $1")
                        .bind(&target)
                        .fetch_optional(&mut *tx)
                        .await?;
                if known.is_none() {
                    return Ok(false);
                }
                let theirs = state(
                    sqlx::query_as("SELECT state FROM friendships WHERE user_id = $1 AND other_id = $2")
                        .bind(&target)
                        .bind(&actor)
                        .fetch_optional(&mut *tx)
                        .await?,
                );
                sqlx::query(DELETE_PAIR).bind(&actor).bind(&target).execute(&mut *tx).await?;
                if theirs == Some(FriendState::Blocked) {
                    // Both blocked each other: each keeps its own block.
                    sqlx::query(UPSERT)
                        .bind(&target)
                        .bind(&actor)
                        .bind(FriendState::Blocked.as_str())
                        .bind(now)
                        .execute(&mut *tx)
                        .await?;
                }
                sqlx::query(UPSERT)
                    .bind(&actor)
                    .bind(&target)
                    .bind(FriendState::Blocked.as_str())
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(true)
            })
        })
    }

    fn friend_list(
        &self,
        actor: &str,
        state_filter: Option<FriendState>,
        after: Option<String>,
        limit: u32,
    ) -> BoxFuture<StoreResult<Vec<FriendRecord>>> {
        let pool = self.pool.clone();
        let actor = actor.to_owned();
        Box::pin(async move {
            let sql = "SELECT f.other_id, a.username, a.display_name, f.state, f.updated_at \
                       FROM friendships f JOIN accounts a ON a.user_id = f.other_id \
                       WHERE f.user_id = $1 AND f.other_id > $2 AND ($3 = '' OR f.state = $3) \
                       ORDER BY f.other_id LIMIT $4";
            type Row = (String, String, Option<String>, String, i64);
            let rows: Vec<Row> = with_read_pool!(&pool, p => sqlx::query_as(sql)
                .bind(&actor)
                .bind(after.as_deref().unwrap_or(""))
                .bind(state_filter.map_or("", FriendState::as_str))
                .bind(i64::from(limit))
                .fetch_all(p)
                .await)?;
            Ok(rows
                .into_iter()
                .filter_map(|r| {
                    Some(FriendRecord {
                        state: FriendState::parse(&r.3)?,
                        user_id: r.0,
                        username: r.1,
                        display_name: r.2,
                        updated_at: r.4,
                    })
                })
                .collect())
        })
    }

    fn friend_state(
        &self,
        actor: &str,
        other: &str,
    ) -> BoxFuture<StoreResult<Option<FriendState>>> {
        let pool = self.pool.clone();
        let (actor, other) = (actor.to_owned(), other.to_owned());
        Box::pin(async move {
            let row: Option<(String,)> = with_read_pool!(&pool, p => sqlx::query_as(
                    "SELECT state FROM friendships WHERE user_id = $1 AND other_id = $2",
                )
                .bind(&actor)
                .bind(&other)
                .fetch_optional(p)
                .await)?;
            Ok(state(row))
        })
    }
}
