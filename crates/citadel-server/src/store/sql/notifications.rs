//! [`NotificationStore`] over SQLite and PostgreSQL: the same statements on
//! both; an insert is one statement (plus an inbox trim when the bound is
//! reached).

use super::{Pool, SqlStore};
use crate::store::notifications::{
    Inserted, NewNotification, NotificationRecord, NotificationStore,
};
use crate::store::{StoreError, StoreResult};
use crate::util::BoxFuture;

type Row = (i64, String, i64, String, String, String, i64, Option<i64>);

const COLUMNS: &str = "seq, id, code, subject, content, sender, created_at, read_at";

fn record(row: Row) -> NotificationRecord {
    NotificationRecord {
        seq: row.0,
        id: row.1,
        code: row.2,
        subject: row.3,
        content: row.4,
        sender: row.5,
        created_at: row.6,
        read_at: row.7,
    }
}

/// One insert: a single autocommit statement that checks the recipient,
/// skips a repeated delivery key and reports how many items the inbox held
/// before it. Only when that count reaches the bound does a second statement
/// trim the inbox (read items first, then the oldest unread); it computes
/// its own excess, so a trim that never ran (a crash between the two) is
/// caught up by the next insert.
async fn insert_once(pool: &Pool, new: &NewNotification) -> StoreResult<Inserted> {
    let insert = format!(
        "INSERT INTO notifications (id, recipient, code, subject, content, sender, delivery_key, created_at) \
         SELECT $1, $2, $3, $4, $5, $6, $7, $8 FROM accounts WHERE user_id = $2 \
         ON CONFLICT (recipient, delivery_key) WHERE delivery_key IS NOT NULL DO NOTHING \
         RETURNING {COLUMNS}, (SELECT COUNT(*) FROM notifications older \
                    WHERE older.recipient = notifications.recipient AND older.seq < notifications.seq)"
    );
    let prune = "DELETE FROM notifications WHERE seq IN (SELECT seq FROM notifications \
                 WHERE recipient = $1 ORDER BY CASE WHEN read_at IS NULL THEN 1 ELSE 0 END, seq \
                 LIMIT (SELECT CASE WHEN COUNT(*) > $2 THEN COUNT(*) - $2 ELSE 0 END \
                        FROM notifications WHERE recipient = $1))";
    type Returned = (
        i64,
        String,
        i64,
        String,
        String,
        String,
        i64,
        Option<i64>,
        i64,
    );
    let returned: Option<Returned> = with_pool!(pool, p => sqlx::query_as(sqlx::AssertSqlSafe(insert))
        .bind(&new.id)
        .bind(&new.recipient)
        .bind(new.code)
        .bind(&new.subject)
        .bind(&new.content)
        .bind(&new.sender)
        .bind(&new.delivery_key)
        .bind(new.now)
        .fetch_optional(p)
        .await)?;
    let Some(r) = returned else {
        // Nothing inserted: a repeated delivery key, or no such account.
        return match &new.delivery_key {
            Some(key) => Ok(by_key(pool, &new.recipient, key)
                .await?
                .map_or(Inserted::UnknownRecipient, Inserted::Existing)),
            None => Ok(Inserted::UnknownRecipient),
        };
    };
    let (row, held_before) = ((r.0, r.1, r.2, r.3, r.4, r.5, r.6, r.7), r.8);
    let max_inbox = i64::from(new.max_inbox.max(1));
    let pruned = if held_before + 1 > max_inbox {
        with_pool!(pool, p => sqlx::query(prune)
            .bind(&new.recipient)
            .bind(max_inbox)
            .execute(p)
            .await
            .map(|done| done.rows_affected()))?
    } else {
        0
    };
    Ok(Inserted::Created {
        record: record(row),
        pruned,
    })
}

async fn by_key(
    pool: &Pool,
    recipient: &str,
    key: &str,
) -> StoreResult<Option<NotificationRecord>> {
    let row: Option<Row> = with_read_pool!(pool, p => sqlx::query_as(sqlx::AssertSqlSafe(by_key_sql()))
        .bind(recipient)
        .bind(key)
        .fetch_optional(p)
        .await)?;
    Ok(row.map(record))
}

fn by_key_sql() -> String {
    format!("SELECT {COLUMNS} FROM notifications WHERE recipient = $1 AND delivery_key = $2")
}

impl NotificationStore for SqlStore {
    fn insert_notification(&self, new: NewNotification) -> BoxFuture<StoreResult<Inserted>> {
        let pool = self.pool.clone();
        Box::pin(async move {
            match insert_once(&pool, &new).await {
                // Two producers raced on one delivery key past the insert's
                // own conflict check: the loser answers with the winner's row.
                Err(StoreError::Conflict(_)) if new.delivery_key.is_some() => {
                    let key = new.delivery_key.as_deref().unwrap_or_default();
                    by_key(&pool, &new.recipient, key)
                        .await?
                        .map(Inserted::Existing)
                        .ok_or(StoreError::Conflict("delivery key"))
                }
                other => other,
            }
        })
    }

    fn list_notifications(
        &self,
        recipient: &str,
        before: Option<i64>,
        limit: u32,
    ) -> BoxFuture<StoreResult<Vec<NotificationRecord>>> {
        let pool = self.pool.clone();
        let recipient = recipient.to_owned();
        Box::pin(async move {
            let sql = format!(
                "SELECT {COLUMNS} FROM notifications WHERE recipient = $1 AND seq < $2 \
                 ORDER BY seq DESC LIMIT $3"
            );
            let rows: Vec<Row> = with_read_pool!(&pool, p => sqlx::query_as(sqlx::AssertSqlSafe(sql.clone()))
                .bind(&recipient)
                .bind(before.unwrap_or(i64::MAX))
                .bind(i64::from(limit))
                .fetch_all(p)
                .await)?;
            Ok(rows.into_iter().map(record).collect())
        })
    }

    fn mark_notifications_read(
        &self,
        recipient: &str,
        ids: Vec<String>,
        now: i64,
    ) -> BoxFuture<StoreResult<Vec<String>>> {
        let pool = self.pool.clone();
        let recipient = recipient.to_owned();
        Box::pin(async move {
            if ids.is_empty() {
                return Ok(Vec::new());
            }
            let placeholders: Vec<String> = (0..ids.len()).map(|i| format!("${}", i + 3)).collect();
            let sql = format!(
                "UPDATE notifications SET read_at = $1 WHERE recipient = $2 AND read_at IS NULL \
                 AND id IN ({}) RETURNING id",
                placeholders.join(", ")
            );
            let rows: Vec<(String,)> = with_pool!(&pool, p => {
                let mut q = sqlx::query_as(sqlx::AssertSqlSafe(sql.clone()))
                    .bind(now)
                    .bind(&recipient);
                for id in &ids {
                    q = q.bind(id);
                }
                q.fetch_all(p).await
            })?;
            // Answer in the caller's order.
            let changed: std::collections::HashSet<String> =
                rows.into_iter().map(|r| r.0).collect();
            Ok(ids.into_iter().filter(|id| changed.contains(id)).collect())
        })
    }
}
