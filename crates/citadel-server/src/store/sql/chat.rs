//! [`ChatStore`] over SQLite and PostgreSQL: the same statements on both.
//! A commit is one transaction that first bumps the channel's event counter
//! (which also serialises the channel's writers on PostgreSQL), then writes
//! the message (and the replaced revision), the event log row, the bounded
//! outbox row and, for moderation, the audit row.

use std::collections::BTreeMap;

use super::{Pool, SqlStore};
use crate::store::chat::{
    AuditRecord, ChannelRecord, ChatChange, ChatCommit, ChatStore, Committed, EventType,
    HistoryPage, MessageRecord,
};
use crate::store::{RateCharge, StoreError, StoreResult};
use crate::util::BoxFuture;

type Row = (i64, String, String, i64, i64, i64, i64, bool);

const COLUMNS: &str =
    "message_id, sender, content, created_at, updated_at, revision, last_event_id, deleted";

fn record(r: Row) -> MessageRecord {
    let u = |v: i64| u64::try_from(v).unwrap_or(0);
    MessageRecord {
        message_id: u(r.0),
        sender: r.1,
        content: r.2,
        created_at: u(r.3),
        updated_at: u(r.4),
        revision: u(r.5),
        last_event_id: u(r.6),
        deleted: r.7,
    }
}

fn i(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// Binds the nine `chat_messages` columns of message `$m` of channel
/// `$channel_id` to query `$q`, in the insert order.
macro_rules! bind_message {
    ($q:expr, $channel_id:expr, $m:expr) => {
        $q.bind($channel_id)
            .bind(i($m.message_id))
            .bind(&$m.sender)
            .bind(&$m.content)
            .bind(i($m.created_at))
            .bind(i($m.updated_at))
            .bind(i($m.revision))
            .bind(i($m.last_event_id))
            .bind($m.deleted)
    };
}

/// What a commit needs besides the counter: the message row to write, the
/// content it replaces (for the revision history) and the event type.
struct Plan {
    message: MessageRecord,
    replaced: Option<String>,
    event: EventType,
}

/// Why a plan cannot apply (mapped to [`Committed`]).
#[derive(Debug, Clone, Copy)]
enum Refused {
    Missing,
    Stale,
}

/// Decides the new message state from the stored one; `Err` is the refusal.
fn plan(
    change: &ChatChange,
    event_id: u64,
    now: u64,
    stored: Option<MessageRecord>,
) -> Result<Plan, Refused> {
    match change {
        ChatChange::Create { sender, content } => Ok(Plan {
            message: MessageRecord {
                message_id: event_id,
                sender: sender.clone(),
                content: content.clone(),
                created_at: now,
                updated_at: now,
                revision: 1,
                last_event_id: event_id,
                deleted: false,
            },
            replaced: None,
            event: EventType::Create,
        }),
        ChatChange::Edit {
            expected_revision,
            content,
            ..
        } => revise(stored, *expected_revision, event_id, now, content, false),
        ChatChange::Tombstone {
            expected_revision, ..
        } => revise(stored, *expected_revision, event_id, now, "", true),
    }
}

/// An edit (`deleted` false) or a tombstone of the stored message.
fn revise(
    stored: Option<MessageRecord>,
    expected_revision: u64,
    event_id: u64,
    now: u64,
    content: &str,
    deleted: bool,
) -> Result<Plan, Refused> {
    let old = stored.ok_or(Refused::Missing)?;
    if old.deleted || old.revision != expected_revision {
        return Err(Refused::Stale);
    }
    Ok(Plan {
        replaced: Some(old.content.clone()),
        message: MessageRecord {
            content: content.to_owned(),
            updated_at: now.max(old.created_at),
            revision: old.revision + 1,
            last_event_id: event_id,
            deleted,
            ..old
        },
        event: if deleted {
            EventType::Remove
        } else {
            EventType::Update
        },
    })
}

fn target_of(change: &ChatChange) -> Option<u64> {
    match change {
        ChatChange::Create { .. } => None,
        ChatChange::Edit { message_id, .. } | ChatChange::Tombstone { message_id, .. } => {
            Some(*message_id)
        }
    }
}

/// The `[chat.limits]` windows of one transaction's commits, as that
/// transaction found them: each distinct key once, in key order (one lock
/// order for every node), at the newest window start any commit named.
#[derive(Debug, Default)]
struct Windows {
    /// key → (window start, count, charged by this transaction).
    keys: BTreeMap<String, (i64, i64, bool)>,
}

impl Windows {
    /// The keys `commits` charge (none: nothing to read).
    fn of<'a>(commits: impl IntoIterator<Item = &'a ChatCommit>) -> Self {
        let mut keys: BTreeMap<String, (i64, i64, bool)> = BTreeMap::new();
        for charge in commits.into_iter().flat_map(|c| &c.charges) {
            let entry =
                keys.entry(charge.key_hash.clone())
                    .or_insert((charge.window_start, 0, false));
            entry.0 = entry.0.max(charge.window_start);
        }
        Windows { keys }
    }

    /// Applies the counts the upsert returned.
    fn found(&mut self, rows: Vec<(String, i64)>) {
        for (key, count) in rows {
            if let Some(entry) = self.keys.get_mut(&key) {
                entry.1 = count;
            }
        }
    }

    /// Counts `charges` if every one stays within its limit; else counts
    /// none and answers false.
    fn admit(&mut self, charges: &[RateCharge]) -> bool {
        let fits = charges.iter().all(|c| {
            self.keys
                .get(&c.key_hash)
                .is_some_and(|e| e.1 < i64::from(c.limit))
        });
        if fits {
            for c in charges {
                if let Some(entry) = self.keys.get_mut(&c.key_hash) {
                    entry.1 += 1;
                    entry.2 = true;
                }
            }
        }
        fits
    }

    /// Creates missing rows and restarts those whose window is older (count
    /// 0), locking them until the transaction ends; returns every count.
    fn read_sql(&self) -> String {
        let values: Vec<String> = (0..self.keys.len())
            .map(|k| format!("(${}, ${}, 0)", 2 * k + 1, 2 * k + 2))
            .collect();
        format!(
            "INSERT INTO chat_rate_windows (key_hash, window_start, count) VALUES {} \
             ON CONFLICT (key_hash) DO UPDATE SET \
             count = CASE WHEN chat_rate_windows.window_start = excluded.window_start \
                          THEN chat_rate_windows.count ELSE 0 END, \
             window_start = excluded.window_start \
             RETURNING key_hash, count",
            values.join(", ")
        )
    }

    /// The charged keys with their new counts.
    fn charged(&self) -> Vec<(&str, i64)> {
        self.keys
            .iter()
            .filter(|(_, e)| e.2)
            .map(|(k, e)| (k.as_str(), e.1))
            .collect()
    }

    /// Writes the counts of `charged` keys.
    fn write_sql(charged: usize) -> String {
        let cases: Vec<String> = (0..charged)
            .map(|k| format!("WHEN ${} THEN ${}", 2 * k + 1, 2 * k + 2))
            .collect();
        let keys: Vec<String> = (0..charged)
            .map(|k| format!("${}", 2 * charged + k + 1))
            .collect();
        format!(
            "UPDATE chat_rate_windows SET count = CASE key_hash {} ELSE count END \
             WHERE key_hash IN ({})",
            cases.join(" "),
            keys.join(", ")
        )
    }
}

/// Reads (and locks) the windows of `$w` in transaction `$tx`; a storage
/// failure rolls back and returns `$refused` from the enclosing function.
macro_rules! read_windows {
    ($tx:expr, $w:expr, $refused:expr) => {
        if !$w.keys.is_empty() {
            let sql = $w.read_sql();
            let mut q = sqlx::query_as(sqlx::AssertSqlSafe(sql));
            for (key, entry) in &$w.keys {
                q = q.bind(key.clone()).bind(entry.0);
            }
            match q.fetch_all(&mut *$tx).await {
                Ok(rows) => $w.found(rows),
                Err(err) => {
                    tracing::warn!(error = %err, "chat rate windows unavailable; refusing");
                    $tx.rollback().await?;
                    return Ok($refused);
                }
            }
        }
    };
}

/// Writes the counts `$w` charged, in transaction `$tx`.
macro_rules! write_windows {
    ($tx:expr, $w:expr) => {
        let charged = $w.charged();
        if !charged.is_empty() {
            let mut q = sqlx::query(sqlx::AssertSqlSafe(Windows::write_sql(charged.len())));
            for (key, count) in &charged {
                q = q.bind(key.to_string()).bind(*count);
            }
            for (key, _) in &charged {
                q = q.bind(key.to_string());
            }
            q.execute(&mut *$tx).await?;
        }
    };
}

/// The one commit transaction (see the module doc).
async fn commit(pool: &Pool, c: &ChatCommit) -> StoreResult<Committed> {
    let select =
        format!("SELECT {COLUMNS} FROM chat_messages WHERE channel_id = $1 AND message_id = $2");
    let target = target_of(&c.change);
    let audit = match &c.change {
        ChatChange::Tombstone { audit, .. } => audit.clone(),
        _ => None,
    };
    let mut windows = Windows::of([c]);
    let done = with_pool!(pool, p => {
        let mut tx = p.begin().await?;
        read_windows!(tx, windows, Committed::RateUnavailable);
        if !windows.admit(&c.charges) {
            tx.rollback().await?;
            return Ok(Committed::RateLimited);
        }
        write_windows!(tx, windows);
        let bumped: Option<(i64,)> = sqlx::query_as(
            "UPDATE chat_channels SET last_event_id = last_event_id + 1 \
             WHERE channel_id = $1 RETURNING last_event_id",
        )
        .bind(&c.channel_id)
        .fetch_optional(&mut *tx)
        .await?;
        let Some((event_id,)) = bumped else {
            tx.rollback().await?;
            return Ok(Committed::Missing);
        };
        let event_id = u64::try_from(event_id).unwrap_or(0);
        let stored: Option<Row> = match target {
            Some(id) => {
                sqlx::query_as(sqlx::AssertSqlSafe(select.clone()))
                    .bind(&c.channel_id)
                    .bind(i(id))
                    .fetch_optional(&mut *tx)
                    .await?
            }
            None => None,
        };
        let plan = match plan(&c.change, event_id, c.now, stored.map(record)) {
            Ok(plan) => plan,
            Err(refused) => {
                tx.rollback().await?;
                return Ok(match refused {
                    Refused::Missing => Committed::Missing,
                    Refused::Stale => Committed::Stale,
                });
            }
        };
        let m = &plan.message;
        let payload = (c.encode)(&c.channel_id, plan.event, event_id, m);
        match &plan.replaced {
            Some(old) => {
                sqlx::query(
                    "INSERT INTO chat_revisions (channel_id, message_id, revision, content, replaced_at) \
                     VALUES ($1, $2, $3, $4, $5)",
                )
                .bind(&c.channel_id)
                .bind(i(m.message_id))
                .bind(i(m.revision - 1))
                .bind(old)
                .bind(i(c.now))
                .execute(&mut *tx)
                .await?;
                sqlx::query(
                    "UPDATE chat_messages SET content = $1, updated_at = $2, revision = $3, \
                     last_event_id = $4, deleted = $5 WHERE channel_id = $6 AND message_id = $7",
                )
                .bind(&m.content)
                .bind(i(m.updated_at))
                .bind(i(m.revision))
                .bind(i(m.last_event_id))
                .bind(m.deleted)
                .bind(&c.channel_id)
                .bind(i(m.message_id))
                .execute(&mut *tx)
                .await?;
            }
            None => {
                let q = sqlx::query(
                    "INSERT INTO chat_messages (channel_id, message_id, sender, content, created_at, \
                     updated_at, revision, last_event_id, deleted) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                );
                bind_message!(q, &c.channel_id, m)
                    .execute(&mut *tx)
                    .await?;
            }
        }
        sqlx::query(
            "INSERT INTO chat_events (channel_id, event_id, event_type, message_id, payload, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&c.channel_id)
        .bind(i(event_id))
        .bind(plan.event.as_str())
        .bind(i(m.message_id))
        .bind(&payload)
        .bind(i(c.now))
        .execute(&mut *tx)
        .await?;
        let queued = sqlx::query(
            "INSERT INTO chat_outbox (channel_id, event_id, payload, expires_at) \
             SELECT $1, $2, $3, $4 WHERE (SELECT COUNT(*) FROM chat_outbox) < $5",
        )
        .bind(&c.channel_id)
        .bind(i(event_id))
        .bind(&payload)
        .bind(i(c.outbox_expires_at))
        .bind(i64::from(c.max_outbox_rows))
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if queued == 0 {
            tx.rollback().await?;
            return Ok(Committed::OutboxFull);
        }
        if let Some(a) = &audit {
            sqlx::query(
                "INSERT INTO chat_moderation (channel_id, message_id, actor_id, actor_role, author_id, \
                 content_sha256, event_id, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            )
            .bind(&c.channel_id)
            .bind(i(m.message_id))
            .bind(&a.actor_id)
            .bind(&a.actor_role)
            .bind(&m.sender)
            .bind(&a.content_sha256)
            .bind(i(event_id))
            .bind(i(c.now))
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Committed::Done {
            event_id,
            message: plan.message,
            payload,
        }
    });
    Ok(done)
}

/// New messages of several commits in ONE transaction: the outbox bound is
/// read once, each channel's counter is bumped once by its number of new
/// messages, then messages, events and outbox rows are each one multi-row
/// insert.
async fn commit_creates(pool: &Pool, commits: &[&ChatCommit]) -> StoreResult<Vec<Committed>> {
    let mut result: Vec<Committed> = vec![Committed::Missing; commits.len()];
    let mut rows: Vec<(usize, u64, Plan, String)> = Vec::new();
    let mut windows = Windows::of(commits.iter().copied());
    let done = with_pool!(pool, p => {
        let mut tx = p.begin().await?;
        read_windows!(tx, windows, vec![Committed::RateUnavailable; commits.len()]);
        let (pending,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM chat_outbox")
            .fetch_one(&mut *tx)
            .await?;
        let mut room = i64::from(commits[0].max_outbox_rows) - pending;
        // Channels in first-seen order, with the commits of each; a commit
        // is charged only if it commits.
        let mut channels: Vec<(&str, Vec<usize>)> = Vec::new();
        for (k, c) in commits.iter().enumerate() {
            if room <= 0 {
                result[k] = Committed::OutboxFull;
                continue;
            }
            if !windows.admit(&c.charges) {
                result[k] = Committed::RateLimited;
                continue;
            }
            room -= 1;
            match channels.iter_mut().find(|(id, _)| *id == c.channel_id) {
                Some((_, ks)) => ks.push(k),
                None => channels.push((&c.channel_id, vec![k])),
            }
        }
        write_windows!(tx, windows);
        for (channel_id, ks) in &channels {
            let bumped: Option<(i64,)> = sqlx::query_as(
                "UPDATE chat_channels SET last_event_id = last_event_id + $1 \
                 WHERE channel_id = $2 RETURNING last_event_id",
            )
            .bind(ks.len() as i64)
            .bind(*channel_id)
            .fetch_optional(&mut *tx)
            .await?;
            let Some((top,)) = bumped else { continue };
            let first = u64::try_from(top).unwrap_or(0) + 1 - ks.len() as u64;
            for (n, k) in ks.iter().enumerate() {
                let c = commits[*k];
                let event_id = first + n as u64;
                if let Ok(plan) = plan(&c.change, event_id, c.now, None) {
                    let payload = (c.encode)(&c.channel_id, plan.event, event_id, &plan.message);
                    rows.push((*k, event_id, plan, payload));
                }
            }
        }
        if !rows.is_empty() {
            let list = |width: usize| {
                (0..rows.len())
                    .map(|r| {
                        let cells: Vec<String> =
                            (1..=width).map(|c| format!("${}", r * width + c)).collect();
                        format!("({})", cells.join(", "))
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let messages = format!(
                "INSERT INTO chat_messages (channel_id, message_id, sender, content, created_at, \
                 updated_at, revision, last_event_id, deleted) VALUES {}",
                list(9)
            );
            let mut q = sqlx::query(sqlx::AssertSqlSafe(messages));
            for (k, _, plan, _) in &rows {
                let m = &plan.message;
                q = bind_message!(q, &commits[*k].channel_id, m);
            }
            q.execute(&mut *tx).await?;
            let events = format!(
                "INSERT INTO chat_events (channel_id, event_id, event_type, message_id, payload, created_at) \
                 VALUES {}",
                list(6)
            );
            let mut q = sqlx::query(sqlx::AssertSqlSafe(events));
            for (k, event_id, plan, payload) in &rows {
                q = q
                    .bind(&commits[*k].channel_id)
                    .bind(i(*event_id))
                    .bind(plan.event.as_str())
                    .bind(i(plan.message.message_id))
                    .bind(payload)
                    .bind(i(commits[*k].now));
            }
            q.execute(&mut *tx).await?;
            let outbox = format!(
                "INSERT INTO chat_outbox (channel_id, event_id, payload, expires_at) VALUES {}",
                list(4)
            );
            let mut q = sqlx::query(sqlx::AssertSqlSafe(outbox));
            for (k, event_id, _, payload) in &rows {
                q = q
                    .bind(&commits[*k].channel_id)
                    .bind(i(*event_id))
                    .bind(payload)
                    .bind(i(commits[*k].outbox_expires_at));
            }
            q.execute(&mut *tx).await?;
        }
        tx.commit().await?;
        true
    });
    debug_assert!(done);
    for (k, event_id, plan, payload) in rows {
        result[k] = Committed::Done {
            event_id,
            message: plan.message,
            payload,
        };
    }
    Ok(result)
}

/// One autocommit upsert bumps every window (a row whose window is older
/// restarts at 1); if any count passes its limit, one statement gives them
/// all back, so a refusal consumes nothing.
async fn charge(pool: &Pool, charges: &[RateCharge]) -> StoreResult<bool> {
    if charges.is_empty() {
        return Ok(true);
    }
    let values: Vec<String> = (0..charges.len())
        .map(|k| format!("(${}, ${}, 1)", 2 * k + 1, 2 * k + 2))
        .collect();
    let upsert = format!(
        "INSERT INTO chat_rate_windows (key_hash, window_start, count) VALUES {} \
         ON CONFLICT (key_hash) DO UPDATE SET \
         count = CASE WHEN chat_rate_windows.window_start = excluded.window_start \
                      THEN chat_rate_windows.count + 1 ELSE 1 END, \
         window_start = excluded.window_start \
         RETURNING key_hash, count",
        values.join(", ")
    );
    let rows: Vec<(String, i64)> = with_pool!(pool, p => {
        let mut q = sqlx::query_as(sqlx::AssertSqlSafe(upsert.clone()));
        for c in charges {
            q = q.bind(&c.key_hash).bind(c.window_start);
        }
        q.fetch_all(p).await
    })?;
    let over = charges.iter().any(|c| {
        rows.iter()
            .find(|r| r.0 == c.key_hash)
            .is_some_and(|r| r.1 > i64::from(c.limit))
    });
    if !over {
        return Ok(true);
    }
    let conditions: Vec<String> = (0..charges.len())
        .map(|k| {
            format!(
                "(key_hash = ${} AND window_start = ${})",
                2 * k + 1,
                2 * k + 2
            )
        })
        .collect();
    let undo = format!(
        "UPDATE chat_rate_windows SET count = count - 1 WHERE {}",
        conditions.join(" OR ")
    );
    with_pool!(pool, p => {
        let mut q = sqlx::query(sqlx::AssertSqlSafe(undo.clone()));
        for c in charges {
            q = q.bind(&c.key_hash).bind(c.window_start);
        }
        q.execute(p).await.map(|_| ())
    })?;
    Ok(false)
}

fn channel(row: (String, String, String, String)) -> ChannelRecord {
    ChannelRecord {
        channel_id: row.0,
        kind: row.1,
        target_a: row.2,
        target_b: row.3,
    }
}

impl ChatStore for SqlStore {
    fn chat_open_channel(&self, ch: ChannelRecord, now: u64) -> BoxFuture<StoreResult<u64>> {
        let pool = self.pool.clone();
        Box::pin(async move {
            let read = "SELECT last_event_id FROM chat_channels WHERE channel_id = $1";
            let found: Option<(i64,)> = with_read_pool!(&pool, p => sqlx::query_as(read)
                .bind(&ch.channel_id)
                .fetch_optional(p)
                .await)?;
            if let Some((last,)) = found {
                return Ok(u64::try_from(last).unwrap_or(0));
            }
            with_pool!(&pool, p => sqlx::query(
                    "INSERT INTO chat_channels (channel_id, kind, target_a, target_b, last_event_id, created_at) \
                     VALUES ($1, $2, $3, $4, 0, $5) ON CONFLICT (channel_id) DO NOTHING",
                )
                .bind(&ch.channel_id)
                .bind(&ch.kind)
                .bind(&ch.target_a)
                .bind(&ch.target_b)
                .bind(i(now))
                .execute(p)
                .await
                .map(|_| ()))?;
            let (last,): (i64,) = with_pool!(&pool, p => sqlx::query_as(read)
                .bind(&ch.channel_id)
                .fetch_one(p)
                .await)?;
            Ok(u64::try_from(last).unwrap_or(0))
        })
    }

    fn chat_channel(&self, channel_id: &str) -> BoxFuture<StoreResult<Option<ChannelRecord>>> {
        let pool = self.pool.clone();
        let channel_id = channel_id.to_owned();
        Box::pin(async move {
            let row: Option<(String, String, String, String)> = with_read_pool!(&pool, p => sqlx::query_as(
                    "SELECT channel_id, kind, target_a, target_b FROM chat_channels WHERE channel_id = $1",
                )
                .bind(&channel_id)
                .fetch_optional(p)
                .await)?;
            Ok(row.map(channel))
        })
    }

    fn chat_commit(&self, commit_: ChatCommit) -> BoxFuture<StoreResult<Committed>> {
        let pool = self.pool.clone();
        Box::pin(async move { commit(&pool, &commit_).await })
    }

    fn chat_commit_batch(
        &self,
        commits: Vec<ChatCommit>,
    ) -> BoxFuture<Vec<StoreResult<Committed>>> {
        let pool = self.pool.clone();
        Box::pin(async move {
            let mut out: Vec<Option<StoreResult<Committed>>> =
                commits.iter().map(|_| None).collect();
            let creates: Vec<usize> = (0..commits.len())
                .filter(|k| matches!(commits[*k].change, ChatChange::Create { .. }))
                .collect();
            if creates.len() > 1 {
                let batch: Vec<&ChatCommit> = creates.iter().map(|k| &commits[*k]).collect();
                match commit_creates(&pool, &batch).await {
                    Ok(done) => {
                        for (k, d) in creates.iter().zip(done) {
                            out[*k] = Some(Ok(d));
                        }
                    }
                    Err(err) => {
                        let text = err.to_string();
                        for k in &creates {
                            out[*k] = Some(Err(StoreError::Database(text.clone())));
                        }
                    }
                }
            }
            for (k, c) in commits.iter().enumerate() {
                if out[k].is_none() {
                    out[k] = Some(commit(&pool, c).await);
                }
            }
            out.into_iter()
                .map(|r| r.unwrap_or_else(|| Err(StoreError::Database("not committed".into()))))
                .collect()
        })
    }

    fn chat_message(
        &self,
        channel_id: &str,
        message_id: u64,
    ) -> BoxFuture<StoreResult<Option<MessageRecord>>> {
        let pool = self.pool.clone();
        let channel_id = channel_id.to_owned();
        Box::pin(async move {
            let sql = format!(
                "SELECT {COLUMNS} FROM chat_messages WHERE channel_id = $1 AND message_id = $2"
            );
            let row: Option<Row> = with_read_pool!(&pool, p => sqlx::query_as(sqlx::AssertSqlSafe(sql.clone()))
                .bind(&channel_id)
                .bind(i(message_id))
                .fetch_optional(p)
                .await)?;
            Ok(row.map(record))
        })
    }

    fn chat_history(
        &self,
        channel_id: &str,
        before: Option<u64>,
        limit: u32,
    ) -> BoxFuture<StoreResult<HistoryPage>> {
        let pool = self.pool.clone();
        let channel_id = channel_id.to_owned();
        Box::pin(async move {
            // The watermark first: every event up to it is reflected in the
            // messages read after it.
            let watermark: Option<(i64,)> = with_read_pool!(&pool, p => sqlx::query_as(
                    "SELECT last_event_id FROM chat_channels WHERE channel_id = $1",
                )
                .bind(&channel_id)
                .fetch_optional(p)
                .await)?;
            let sql = format!(
                "SELECT {COLUMNS} FROM chat_messages WHERE channel_id = $1 AND message_id < $2 \
                 ORDER BY message_id DESC LIMIT $3"
            );
            let rows: Vec<Row> = with_read_pool!(&pool, p => sqlx::query_as(sqlx::AssertSqlSafe(sql.clone()))
                .bind(&channel_id)
                .bind(before.map_or(i64::MAX, i))
                .bind(i64::from(limit))
                .fetch_all(p)
                .await)?;
            Ok(HistoryPage {
                watermark: watermark.map_or(0, |w| u64::try_from(w.0).unwrap_or(0)),
                items: rows.into_iter().map(record).collect(),
            })
        })
    }

    fn chat_ack_outbox(&self, rows: Vec<(String, u64)>) -> BoxFuture<StoreResult<u64>> {
        let pool = self.pool.clone();
        Box::pin(async move {
            let mut done = 0;
            for chunk in rows.chunks(200) {
                let pairs: Vec<String> = (0..chunk.len())
                    .map(|k| {
                        format!(
                            "(channel_id = ${} AND event_id = ${})",
                            2 * k + 1,
                            2 * k + 2
                        )
                    })
                    .collect();
                let sql = format!("DELETE FROM chat_outbox WHERE {}", pairs.join(" OR "));
                done += with_pool!(&pool, p => {
                    let mut q = sqlx::query(sqlx::AssertSqlSafe(sql.clone()));
                    for (channel_id, event_id) in chunk {
                        q = q.bind(channel_id).bind(i(*event_id));
                    }
                    q.execute(p).await.map(|r| r.rows_affected())
                })?;
            }
            Ok(done)
        })
    }

    fn chat_expire_outbox(&self, now: u64) -> BoxFuture<StoreResult<u64>> {
        let pool = self.pool.clone();
        Box::pin(async move {
            Ok(
                with_pool!(&pool, p => sqlx::query("DELETE FROM chat_outbox WHERE expires_at < $1")
                .bind(i(now))
                .execute(p)
                .await
                .map(|r| r.rows_affected()))?,
            )
        })
    }

    fn chat_charge(&self, charges: Vec<RateCharge>) -> BoxFuture<StoreResult<bool>> {
        let pool = self.pool.clone();
        Box::pin(async move { charge(&pool, &charges).await })
    }

    fn chat_audit(&self, channel_id: &str) -> BoxFuture<StoreResult<Vec<AuditRecord>>> {
        let pool = self.pool.clone();
        let channel_id = channel_id.to_owned();
        Box::pin(async move {
            let rows: Vec<(i64, String, String, String, String)> = with_read_pool!(&pool, p => sqlx::query_as(
                    "SELECT message_id, actor_id, actor_role, author_id, content_sha256 \
                     FROM chat_moderation WHERE channel_id = $1 ORDER BY audit_id",
                )
                .bind(&channel_id)
                .fetch_all(p)
                .await)?;
            Ok(rows
                .into_iter()
                .map(|r| AuditRecord {
                    message_id: u64::try_from(r.0).unwrap_or(0),
                    actor_id: r.1,
                    actor_role: r.2,
                    author_id: r.3,
                    content_sha256: r.4,
                })
                .collect())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn charge(key: &str, window_start: i64, limit: u32) -> RateCharge {
        RateCharge {
            key_hash: key.to_owned(),
            window_start,
            limit,
        }
    }

    /// In commit order: a commit is counted only if every window has room;
    /// a refused one counts nothing; only charged keys are written.
    #[test]
    fn windows_admit_all_or_none_in_order() {
        let mut w = Windows::default();
        for (key, start) in [("user", 10), ("user", 20), ("chan", 20), ("idle", 20)] {
            let entry = w.keys.entry(key.to_owned()).or_insert((start, 0, false));
            entry.0 = entry.0.max(start);
        }
        assert_eq!(w.keys.get("user").map(|e| e.0), Some(20));
        w.found(vec![
            ("user".into(), 1),
            ("chan".into(), 2),
            ("idle".into(), 0),
        ]);
        let first = [charge("user", 20, 3), charge("chan", 20, 3)];
        assert!(w.admit(&first));
        // chan is now at 3 of 3: refused, and user stays at 2.
        assert!(!w.admit(&first));
        assert!(w.admit(&[charge("user", 20, 3)]));
        assert!(!w.admit(&[charge("user", 20, 3)]));
        // A key the transaction did not read is never admitted.
        assert!(!w.admit(&[charge("unknown", 20, 100)]));
        assert!(w.admit(&[]));
        assert_eq!(w.charged(), vec![("chan", 3), ("user", 3)]);
        let sql = Windows::write_sql(2);
        assert!(sql.contains("WHEN $1 THEN $2 WHEN $3 THEN $4"), "{sql}");
        assert!(sql.ends_with("IN ($5, $6)"), "{sql}");
    }
}
