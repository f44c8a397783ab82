//! The sqlx implementation of the store traits for SQLite and PostgreSQL.
//!
//! One query text per operation, run on whichever pool the URL selected
//! (`with_pool!` expands the same code for both drivers). SQLite runs in WAL
//! mode with `synchronous = NORMAL`: a committed transaction survives a
//! process crash. Migrations are embedded per backend and applied by
//! [`SqlStore::connect`] (and `citadel migrate`).
//!
//! SQLite has one writer at a time, so the store keeps one connection for
//! every write and transaction (`with_pool!`): writers queue in the pool in
//! arrival order instead of retrying a busy lock with sleeps, and that
//! connection's page cache stays warm. Single-statement reads
//! (`with_read_pool!`) use a separate pool of `database.max_connections`
//! connections and never wait behind a write. PostgreSQL uses one pool for
//! both.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use super::{
    AccountRecord, AccountStore, AccountUpdate, AccountWithSecret, CredentialKind, NewAccount,
    RateCharge, RateLimitStore, SessionRecord, SessionStore, Store, StoreError, StoreResult,
    TokenHashes,
};
use crate::util::BoxFuture;

#[derive(Clone, Debug)]
enum Pool {
    Sqlite {
        /// The one connection that writes (and runs every transaction).
        writer: SqlitePool,
        /// Connections for single-statement reads (the writer itself for
        /// an in-memory database, which a second pool could not see).
        reader: SqlitePool,
    },
    Postgres(PgPool),
}

/// Runs `$body` with `$p` bound to the pool that may write.
macro_rules! with_pool {
    ($pool:expr, $p:ident => $body:expr) => {
        match $pool {
            Pool::Sqlite { writer: $p, .. } => $body,
            Pool::Postgres($p) => $body,
        }
    };
}

/// Runs `$body` with `$p` bound to a pool for one read-only statement.
macro_rules! with_read_pool {
    ($pool:expr, $p:ident => $body:expr) => {
        match $pool {
            Pool::Sqlite { reader: $p, .. } => $body,
            Pool::Postgres($p) => $body,
        }
    };
}

// After the macro: the per-domain files use it.
mod chat;
mod friends;
mod groups;
mod notifications;

/// Connection settings (from `[database]`).
#[derive(Debug, Clone)]
pub struct PoolSettings {
    /// Pool size.
    pub max_connections: u32,
    /// Connect / acquire deadline.
    pub acquire_timeout: Duration,
    /// SQLite only: how often a background task copies the write-ahead log
    /// into the database file (`None`: SQLite does it itself, inside the
    /// commit that crosses 1000 log pages).
    pub wal_checkpoint_interval: Option<Duration>,
}

impl Default for PoolSettings {
    fn default() -> Self {
        PoolSettings {
            max_connections: 10,
            acquire_timeout: Duration::from_secs(5),
            wal_checkpoint_interval: Some(Duration::from_millis(200)),
        }
    }
}

/// The store over one SQLite file or one PostgreSQL database.
#[derive(Clone, Debug)]
pub struct SqlStore {
    pool: Pool,
}

type AccountRow = (String, String, Option<String>, String, bool, i64);
type SessionRow = (String, String, i64, i64, String, Option<i64>);

const ACCOUNT_COLUMNS: &str = "user_id, username, display_name, metadata, disabled, created_at";
const SESSION_COLUMNS: &str =
    "session_id, user_id, access_expires_at, refresh_expires_at, owner_node, revoked_at";

fn account(row: AccountRow) -> AccountRecord {
    AccountRecord {
        user_id: row.0,
        username: row.1,
        display_name: row.2,
        metadata: row.3,
        disabled: row.4,
        created_at: row.5,
    }
}

fn session(row: SessionRow) -> SessionRecord {
    SessionRecord {
        session_id: row.0,
        user_id: row.1,
        access_expires_at: row.2,
        refresh_expires_at: row.3,
        owner_node: row.4,
        revoked_at: row.5,
    }
}

/// Whether `url` selects PostgreSQL.
pub fn is_postgres_url(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

impl SqlStore {
    /// Connects (creating a SQLite file and its directory if missing) and
    /// applies the backend's migrations.
    pub async fn connect(url: &str, settings: &PoolSettings) -> StoreResult<Self> {
        let store = Self::connect_without_migrating(url, settings).await?;
        store.migrate().await?;
        Ok(store)
    }

    /// Connects without touching the schema.
    pub async fn connect_without_migrating(
        url: &str,
        settings: &PoolSettings,
    ) -> StoreResult<Self> {
        let pool = if is_postgres_url(url) {
            let pool = PgPoolOptions::new()
                .max_connections(settings.max_connections)
                .acquire_timeout(settings.acquire_timeout)
                .connect(url)
                .await
                .map_err(|e| {
                    StoreError::Database(format!("cannot connect to PostgreSQL: {}", redact(e)))
                })?;
            Pool::Postgres(pool)
        } else {
            let path = url
                .strip_prefix("sqlite://")
                .or_else(|| url.strip_prefix("sqlite:"))
                .unwrap_or(url);
            let in_memory = path == ":memory:";
            if !in_memory
                && let Some(dir) = Path::new(path).parent()
                && !dir.as_os_str().is_empty()
            {
                std::fs::create_dir_all(dir).map_err(|e| {
                    StoreError::Config(format!("cannot create {}: {e}", dir.display()))
                })?;
            }
            let options = SqliteConnectOptions::from_str(&format!("sqlite:{path}"))
                .map_err(|e| StoreError::Config(e.to_string()))?
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Normal)
                .busy_timeout(Duration::from_secs(10))
                .foreign_keys(true);
            // A checkpoint inside a commit stalls every writer queued behind
            // it (tens of ms); the background checkpointer takes that work
            // off the commit path.
            let checkpointer = settings.wal_checkpoint_interval.filter(|_| !in_memory);
            let options = match checkpointer {
                Some(_) => options.pragma("wal_autocheckpoint", "0"),
                None => options,
            };
            let open = |max: u32| {
                SqlitePoolOptions::new()
                    .max_connections(max)
                    .acquire_timeout(settings.acquire_timeout)
                    .connect_with(options.clone())
            };
            let failed =
                |e: sqlx::Error| StoreError::Database(format!("cannot open SQLite database: {e}"));
            let writer = open(1).await.map_err(failed)?;
            let reader = if in_memory {
                writer.clone()
            } else {
                open(settings.max_connections).await.map_err(failed)?
            };
            if let Some(every) = checkpointer {
                tokio::spawn(checkpoint_wal(reader.clone(), every));
            }
            Pool::Sqlite { writer, reader }
        };
        Ok(SqlStore { pool })
    }

    /// Applies pending migrations.
    pub async fn migrate(&self) -> StoreResult<()> {
        match &self.pool {
            Pool::Sqlite { writer: p, .. } => sqlx::migrate!("./migrations/sqlite").run(p).await,
            Pool::Postgres(p) => sqlx::migrate!("./migrations/postgres").run(p).await,
        }
        .map_err(|e| StoreError::Database(format!("migration failed: {e}")))
    }

    /// Closes the pool.
    pub async fn close(&self) {
        match &self.pool {
            Pool::Sqlite { writer, reader } => {
                reader.close().await;
                writer.close().await;
            }
            Pool::Postgres(p) => p.close().await,
        }
    }
}

/// Copies the write-ahead log into the database file every `every`, from a
/// reader connection, so commits never run a checkpoint themselves. A
/// PASSIVE checkpoint waits for nobody: writers go on appending while it
/// copies, and the log restarts from its beginning once it has been copied
/// whole. Ends when the store closes.
async fn checkpoint_wal(pool: SqlitePool, every: Duration) {
    let mut ticker = tokio::time::interval(every);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        if pool.is_closed() {
            return;
        }
        if let Err(e) = sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
            .execute(&pool)
            .await
        {
            if pool.is_closed() {
                return;
            }
            tracing::warn!(error = %e, "SQLite checkpoint failed; retrying");
        }
    }
}

/// Database errors can echo connection strings; keep only the kind.
fn redact(err: sqlx::Error) -> String {
    match err {
        sqlx::Error::Configuration(_) => "invalid connection configuration".into(),
        sqlx::Error::Io(e) => format!("I/O error: {}", e.kind()),
        sqlx::Error::Database(db) => format!(
            "database refused the connection ({})",
            db.code().unwrap_or_default()
        ),
        sqlx::Error::PoolTimedOut => "timed out".into(),
        _ => "connection failed".into(),
    }
}

impl AccountStore for SqlStore {
    fn find_by_credential(
        &self,
        kind: CredentialKind,
        credential: &str,
    ) -> BoxFuture<StoreResult<Option<AccountWithSecret>>> {
        let pool = self.pool.clone();
        let credential = credential.to_owned();
        Box::pin(async move {
            let sql = "SELECT a.user_id, a.username, a.display_name, a.metadata, a.disabled, a.created_at, c.secret \
                       FROM credentials c JOIN accounts a ON a.user_id = c.user_id \
                       WHERE c.kind = $1 AND c.credential = $2";
            type Row = (
                String,
                String,
                Option<String>,
                String,
                bool,
                i64,
                Option<String>,
            );
            let row: Option<Row> = with_read_pool!(&pool, p => sqlx::query_as(sql).bind(kind.as_str()).bind(&credential).fetch_optional(p).await)?;
            Ok(row.map(|r| (account((r.0, r.1, r.2, r.3, r.4, r.5)), r.6)))
        })
    }

    fn create_account(&self, new: NewAccount) -> BoxFuture<StoreResult<AccountRecord>> {
        let pool = self.pool.clone();
        Box::pin(async move {
            with_pool!(&pool, p => {
                let mut tx = p.begin().await?;
                sqlx::query("INSERT INTO accounts (user_id, username, display_name, metadata, disabled, created_at, updated_at) VALUES ($1, $2, $3, $4, FALSE, $5, $5)")
                    .bind(&new.user_id).bind(&new.username).bind(&new.display_name).bind(&new.metadata).bind(new.now)
                    .execute(&mut *tx).await?;
                sqlx::query("INSERT INTO credentials (kind, credential, user_id, secret, created_at) VALUES ($1, $2, $3, $4, $5)")
                    .bind(new.kind.as_str()).bind(&new.credential).bind(&new.user_id).bind(&new.secret).bind(new.now)
                    .execute(&mut *tx).await?;
                tx.commit().await?;
            });
            Ok(AccountRecord {
                user_id: new.user_id,
                username: new.username,
                display_name: new.display_name,
                metadata: new.metadata,
                disabled: false,
                created_at: new.now,
            })
        })
    }

    fn account(&self, user_id: &str) -> BoxFuture<StoreResult<Option<AccountRecord>>> {
        let pool = self.pool.clone();
        let user_id = user_id.to_owned();
        Box::pin(async move {
            let sql = format!("SELECT {ACCOUNT_COLUMNS} FROM accounts WHERE user_id = $1");
            let row: Option<AccountRow> = with_read_pool!(&pool, p => sqlx::query_as(sqlx::AssertSqlSafe(sql.clone())).bind(&user_id).fetch_optional(p).await)?;
            Ok(row.map(account))
        })
    }

    fn update_account(
        &self,
        user_id: &str,
        update: AccountUpdate,
        now: i64,
    ) -> BoxFuture<StoreResult<Option<AccountRecord>>> {
        let pool = self.pool.clone();
        let user_id = user_id.to_owned();
        Box::pin(async move {
            let set_name = update.display_name.is_some();
            let display = update.display_name.flatten();
            let sql = "UPDATE accounts SET username = COALESCE($1, username), \
                       display_name = CASE WHEN $2 THEN $3 ELSE display_name END, updated_at = $4 \
                       WHERE user_id = $5 AND disabled = FALSE";
            let done = with_pool!(&pool, p => sqlx::query(sql).bind(&update.username).bind(set_name).bind(&display).bind(now).bind(&user_id).execute(p).await.map(|r| r.rows_affected()))?;
            if done == 0 {
                return Ok(None);
            }
            let sql = format!("SELECT {ACCOUNT_COLUMNS} FROM accounts WHERE user_id = $1");
            let row: Option<AccountRow> = with_read_pool!(&pool, p => sqlx::query_as(sqlx::AssertSqlSafe(sql.clone())).bind(&user_id).fetch_optional(p).await)?;
            Ok(row.map(account))
        })
    }

    fn lookup(
        &self,
        user_ids: Vec<String>,
        usernames: Vec<String>,
    ) -> BoxFuture<StoreResult<Vec<AccountRecord>>> {
        let pool = self.pool.clone();
        Box::pin(async move {
            let mut out: Vec<AccountRecord> = Vec::new();
            for (column, keys) in [("user_id", user_ids), ("username", usernames)] {
                for key in keys {
                    let sql = format!(
                        "SELECT {ACCOUNT_COLUMNS} FROM accounts WHERE {column} = $1 AND disabled = FALSE"
                    );
                    let row: Option<AccountRow> = with_read_pool!(&pool, p => sqlx::query_as(sqlx::AssertSqlSafe(sql.clone())).bind(&key).fetch_optional(p).await)?;
                    if let Some(row) = row
                        && !out.iter().any(|a| a.user_id == row.0)
                    {
                        out.push(account(row));
                    }
                }
            }
            Ok(out)
        })
    }

    fn set_disabled(
        &self,
        user_id: &str,
        disabled: bool,
        now: i64,
    ) -> BoxFuture<StoreResult<bool>> {
        let pool = self.pool.clone();
        let user_id = user_id.to_owned();
        Box::pin(async move {
            let done = with_pool!(&pool, p => sqlx::query("UPDATE accounts SET disabled = $1, updated_at = $2 WHERE user_id = $3")
                .bind(disabled).bind(now).bind(&user_id).execute(p).await.map(|r| r.rows_affected()))?;
            Ok(done == 1)
        })
    }
}

impl SessionStore for SqlStore {
    fn create_session(
        &self,
        session_id: &str,
        user_id: &str,
        tokens: TokenHashes,
        owner_node: &str,
        now: i64,
    ) -> BoxFuture<StoreResult<()>> {
        let pool = self.pool.clone();
        let (session_id, user_id, owner_node) = (
            session_id.to_owned(),
            user_id.to_owned(),
            owner_node.to_owned(),
        );
        Box::pin(async move {
            let sql = "INSERT INTO sessions (session_id, user_id, access_hash, refresh_hash, access_expires_at, refresh_expires_at, owner_node, created_at) \
                       VALUES ($1, $2, $3, $4, $5, $6, $7, $8)";
            let _ = with_pool!(&pool, p => sqlx::query(sql)
                .bind(&session_id).bind(&user_id).bind(&tokens.access_hash).bind(&tokens.refresh_hash)
                .bind(tokens.access_expires_at).bind(tokens.refresh_expires_at).bind(&owner_node).bind(now)
                .execute(p).await.map(|r| r.rows_affected()))?;
            Ok(())
        })
    }

    fn session_by_access(
        &self,
        access_hash: &str,
        now: i64,
    ) -> BoxFuture<StoreResult<Option<SessionRecord>>> {
        let pool = self.pool.clone();
        let access_hash = access_hash.to_owned();
        Box::pin(async move {
            let sql = "SELECT s.session_id, s.user_id, s.access_expires_at, s.refresh_expires_at, s.owner_node, s.revoked_at \
                       FROM sessions s JOIN accounts a ON a.user_id = s.user_id \
                       WHERE s.access_hash = $1 AND s.revoked_at IS NULL AND s.access_expires_at > $2 AND a.disabled = FALSE";
            let row: Option<SessionRow> = with_read_pool!(&pool, p => sqlx::query_as(sql).bind(&access_hash).bind(now).fetch_optional(p).await)?;
            Ok(row.map(session))
        })
    }

    fn rotate(
        &self,
        refresh_hash: &str,
        tokens: TokenHashes,
        now: i64,
    ) -> BoxFuture<StoreResult<Option<SessionRecord>>> {
        let pool = self.pool.clone();
        let refresh_hash = refresh_hash.to_owned();
        Box::pin(async move {
            let sql = format!(
                "UPDATE sessions SET access_hash = $1, refresh_hash = $2, access_expires_at = $3, refresh_expires_at = $4 \
                 WHERE refresh_hash = $5 AND revoked_at IS NULL AND refresh_expires_at > $6 \
                 AND user_id IN (SELECT user_id FROM accounts WHERE disabled = FALSE) \
                 RETURNING {SESSION_COLUMNS}"
            );
            let row: Option<SessionRow> = with_pool!(&pool, p => sqlx::query_as(sqlx::AssertSqlSafe(sql.clone()))
                .bind(&tokens.access_hash).bind(&tokens.refresh_hash).bind(tokens.access_expires_at)
                .bind(tokens.refresh_expires_at).bind(&refresh_hash).bind(now)
                .fetch_optional(p).await)?;
            Ok(row.map(session))
        })
    }

    fn session_id_by_hash(
        &self,
        access_hash: Option<&str>,
        refresh_hash: Option<&str>,
    ) -> BoxFuture<StoreResult<(Option<String>, Option<String>)>> {
        let pool = self.pool.clone();
        let (access_hash, refresh_hash) = (
            access_hash.map(str::to_owned),
            refresh_hash.map(str::to_owned),
        );
        Box::pin(async move {
            let mut found = (None, None);
            if let Some(h) = access_hash {
                let row: Option<(String,)> = with_pool!(&pool, p => sqlx::query_as("SELECT session_id FROM sessions WHERE access_hash = $1").bind(&h).fetch_optional(p).await)?;
                found.0 = row.map(|r| r.0);
            }
            if let Some(h) = refresh_hash {
                let row: Option<(String,)> = with_pool!(&pool, p => sqlx::query_as("SELECT session_id FROM sessions WHERE refresh_hash = $1").bind(&h).fetch_optional(p).await)?;
                found.1 = row.map(|r| r.0);
            }
            Ok(found)
        })
    }

    fn revoke(&self, session_id: &str, reason: &str, now: i64) -> BoxFuture<StoreResult<bool>> {
        let pool = self.pool.clone();
        let (session_id, reason) = (session_id.to_owned(), reason.to_owned());
        Box::pin(async move {
            let done = with_pool!(&pool, p => sqlx::query("UPDATE sessions SET revoked_at = $1, revoked_reason = $2 WHERE session_id = $3 AND revoked_at IS NULL")
                .bind(now).bind(&reason).bind(&session_id).execute(p).await.map(|r| r.rows_affected()))?;
            Ok(done == 1)
        })
    }

    fn invalid_sessions(
        &self,
        session_ids: Vec<String>,
        _now: i64,
    ) -> BoxFuture<StoreResult<Vec<String>>> {
        let pool = self.pool.clone();
        Box::pin(async move {
            let mut valid = std::collections::HashSet::new();
            for chunk in session_ids.chunks(200) {
                let placeholders: Vec<String> =
                    (1..=chunk.len()).map(|i| format!("${i}")).collect();
                let sql = format!(
                    "SELECT s.session_id FROM sessions s JOIN accounts a ON a.user_id = s.user_id \
                     WHERE s.session_id IN ({}) AND s.revoked_at IS NULL AND a.disabled = FALSE",
                    placeholders.join(", ")
                );
                let rows: Vec<(String,)> = with_pool!(&pool, p => {
                    let mut q = sqlx::query_as(sqlx::AssertSqlSafe(sql.clone()));
                    for id in chunk {
                        q = q.bind(id);
                    }
                    q.fetch_all(p).await
                })?;
                valid.extend(rows.into_iter().map(|r| r.0));
            }
            Ok(session_ids
                .into_iter()
                .filter(|id| !valid.contains(id))
                .collect())
        })
    }
}

/// `(key_hash = $a AND window_start = $b) OR …` over `charges`, binding
/// from `$first`.
fn window_match(charges: &[&RateCharge], first: usize) -> String {
    (0..charges.len())
        .map(|k| {
            format!(
                "(key_hash = ${} AND window_start = ${})",
                first + 2 * k,
                first + 2 * k + 1
            )
        })
        .collect::<Vec<_>>()
        .join(" OR ")
}

/// Several distinct rules in one autocommit upsert (the chat actions charge
/// two or three per call): every count is bumped and returned at once; if
/// any exceeds its limit, one statement gives all of them back, so a
/// refused charge still consumes nothing. Older windows of keys whose
/// window just started are deleted in one more statement.
async fn charge_many(pool: &Pool, charges: &[RateCharge]) -> StoreResult<bool> {
    let values: Vec<String> = (0..charges.len())
        .map(|k| format!("(${}, ${}, 1)", 2 * k + 1, 2 * k + 2))
        .collect();
    let upsert = format!(
        "INSERT INTO rate_limits (key_hash, window_start, count) VALUES {} \
         ON CONFLICT (key_hash, window_start) DO UPDATE SET count = rate_limits.count + 1 \
         RETURNING key_hash, window_start, count",
        values.join(", ")
    );
    let rows: Vec<(String, i64, i64)> = with_pool!(pool, p => {
        let mut q = sqlx::query_as(sqlx::AssertSqlSafe(upsert.clone()));
        for c in charges {
            q = q.bind(&c.key_hash).bind(c.window_start);
        }
        q.fetch_all(p).await
    })?;
    let count_of = |c: &RateCharge| {
        rows.iter()
            .find(|r| r.0 == c.key_hash && r.1 == c.window_start)
            .map_or(0, |r| r.2)
    };
    let all: Vec<&RateCharge> = charges.iter().collect();
    if charges.iter().any(|c| count_of(c) > i64::from(c.limit)) {
        let undo = format!(
            "UPDATE rate_limits SET count = count - 1 WHERE {}",
            window_match(&all, 1)
        );
        with_pool!(pool, p => {
            let mut q = sqlx::query(sqlx::AssertSqlSafe(undo.clone()));
            for c in &all {
                q = q.bind(&c.key_hash).bind(c.window_start);
            }
            q.execute(p).await.map(|_| ())
        })?;
        return Ok(false);
    }
    let fresh: Vec<&RateCharge> = charges.iter().filter(|c| count_of(c) == 1).collect();
    if !fresh.is_empty() {
        let conditions: Vec<String> = (0..fresh.len())
            .map(|k| {
                format!(
                    "(key_hash = ${} AND window_start < ${})",
                    2 * k + 1,
                    2 * k + 2
                )
            })
            .collect();
        let prune = format!("DELETE FROM rate_limits WHERE {}", conditions.join(" OR "));
        with_pool!(pool, p => {
            let mut q = sqlx::query(sqlx::AssertSqlSafe(prune.clone()));
            for c in &fresh {
                q = q.bind(&c.key_hash).bind(c.window_start);
            }
            q.execute(p).await.map(|_| ())
        })?;
    }
    Ok(true)
}

impl RateLimitStore for SqlStore {
    fn charge_all(&self, charges: Vec<RateCharge>) -> BoxFuture<StoreResult<bool>> {
        let pool = self.pool.clone();
        Box::pin(async move {
            if let [charge] = charges.as_slice() {
                // One rule (the common login path): a single autocommit
                // statement; a refused charge is given back at once, so it
                // still consumes nothing.
                let count: i64 = with_pool!(&pool, p => sqlx::query_as::<_, (i64,)>(
                        "INSERT INTO rate_limits (key_hash, window_start, count) VALUES ($1, $2, 1) \
                         ON CONFLICT (key_hash, window_start) DO UPDATE SET count = rate_limits.count + 1 \
                         RETURNING count",
                    )
                    .bind(&charge.key_hash)
                    .bind(charge.window_start)
                    .fetch_one(p)
                    .await)?
                .0;
                if count > i64::from(charge.limit) {
                    with_pool!(&pool, p => sqlx::query(
                            "UPDATE rate_limits SET count = count - 1 WHERE key_hash = $1 AND window_start = $2",
                        )
                        .bind(&charge.key_hash)
                        .bind(charge.window_start)
                        .execute(p)
                        .await
                        .map(|_| ()))?;
                    return Ok(false);
                }
                if count == 1 {
                    with_pool!(&pool, p => sqlx::query("DELETE FROM rate_limits WHERE key_hash = $1 AND window_start < $2")
                        .bind(&charge.key_hash)
                        .bind(charge.window_start)
                        .execute(p)
                        .await
                        .map(|_| ()))?;
                }
                return Ok(true);
            }
            let distinct = {
                let mut keys: Vec<(&str, i64)> = charges
                    .iter()
                    .map(|c| (c.key_hash.as_str(), c.window_start))
                    .collect();
                keys.sort_unstable();
                keys.windows(2).all(|w| w[0] != w[1])
            };
            if distinct && !charges.is_empty() {
                return charge_many(&pool, &charges).await;
            }
            with_pool!(&pool, p => {
                let mut tx = p.begin().await?;
                for charge in &charges {
                    let (count,): (i64,) = sqlx::query_as(
                        "INSERT INTO rate_limits (key_hash, window_start, count) VALUES ($1, $2, 1) \
                         ON CONFLICT (key_hash, window_start) DO UPDATE SET count = rate_limits.count + 1 \
                         RETURNING count",
                    )
                    .bind(&charge.key_hash)
                    .bind(charge.window_start)
                    .fetch_one(&mut *tx)
                    .await?;
                    if count > i64::from(charge.limit) {
                        tx.rollback().await?;
                        return Ok(false);
                    }
                    if count == 1 {
                        // First hit of a new window: older windows of this key
                        // are dead. Cleaning only here keeps steady-state
                        // charges at one statement per rule.
                        sqlx::query("DELETE FROM rate_limits WHERE key_hash = $1 AND window_start < $2")
                            .bind(&charge.key_hash)
                            .bind(charge.window_start)
                            .execute(&mut *tx)
                            .await?;
                    }
                }
                tx.commit().await?;
            });
            Ok(true)
        })
    }
}

impl Store for SqlStore {
    fn backend(&self) -> &'static str {
        match self.pool {
            Pool::Sqlite { .. } => "sqlite",
            Pool::Postgres(_) => "postgres",
        }
    }
}
