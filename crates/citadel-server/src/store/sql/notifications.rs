//! [`NotificationStore`] over SQLite and PostgreSQL: the same statements on
//! both, each operation in one transaction.

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

/// One attempt at the insert transaction: four statements (begin, insert
/// guarded by the recipient's existence, prune, commit), plus one lookup
/// when a delivery key is given.
async fn insert_once(pool: &Pool, new: &NewNotification) -> StoreResult<Inserted> {
    let insert = format!(
        "INSERT INTO notifications (id, recipient, code, subject, content, sender, delivery_key, created_at) \
         SELECT $1, $2, $3, $4, $5, $6, $7, $8 FROM accounts WHERE user_id = $2 RETURNING {COLUMNS}"
    );
    // Past the bound, read items go first, then the oldest unread; the
    // excess is computed in the same statement.
    let prune = "DELETE FROM notifications WHERE seq IN (SELECT seq FROM notifications \
                 WHERE recipient = $1 ORDER BY CASE WHEN read_at IS NULL THEN 1 ELSE 0 END, seq \
                 LIMIT (SELECT CASE WHEN COUNT(*) > $2 THEN COUNT(*) - $2 ELSE 0 END \
                        FROM notifications WHERE recipient = $1))";
    with_pool!(pool, p => {
        let mut tx = p.begin().await?;
        if let Some(key) = &new.delivery_key {
            let existing: Option<Row> = sqlx::query_as(sqlx::AssertSqlSafe(by_key_sql()))
                .bind(&new.recipient)
                .bind(key)
                .fetch_optional(&mut *tx)
                .await?;
            if let Some(row) = existing {
                return Ok(Inserted::Existing(record(row)));
            }
        }
        let row: Option<Row> = sqlx::query_as(sqlx::AssertSqlSafe(insert))
            .bind(&new.id)
            .bind(&new.recipient)
            .bind(new.code)
            .bind(&new.subject)
            .bind(&new.content)
            .bind(&new.sender)
            .bind(&new.delivery_key)
            .bind(new.now)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(row) = row else {
            return Ok(Inserted::UnknownRecipient);
        };
        let pruned = sqlx::query(prune)
            .bind(&new.recipient)
            .bind(i64::from(new.max_inbox.max(1)))
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(Inserted::Created {
            record: record(row),
            pruned,
        })
    })
}

fn by_key_sql() -> String {
    format!("SELECT {COLUMNS} FROM notifications WHERE recipient = $1 AND delivery_key = $2")
}

impl NotificationStore for SqlStore {
    fn insert_notification(&self, new: NewNotification) -> BoxFuture<StoreResult<Inserted>> {
        let pool = self.pool.clone();
        Box::pin(async move {
            match insert_once(&pool, &new).await {
                // Two producers raced on one delivery key: the loser answers
                // with the winner's row.
                Err(StoreError::Conflict(_)) if new.delivery_key.is_some() => {
                    let row: Option<Row> = with_pool!(&pool, p => sqlx::query_as(sqlx::AssertSqlSafe(by_key_sql()))
                        .bind(&new.recipient)
                        .bind(&new.delivery_key)
                        .fetch_optional(p)
                        .await)?;
                    row.map(|r| Inserted::Existing(record(r)))
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
            let rows: Vec<Row> = with_pool!(&pool, p => sqlx::query_as(sqlx::AssertSqlSafe(sql.clone()))
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
