//! The storage suite, run identically against SQLite and PostgreSQL.

mod common;

use std::sync::Arc;
use std::time::Duration;

use citadel_server::store::{
    AccountStore, AccountUpdate, CredentialKind, NewAccount, PoolSettings, RateCharge, SqlStore,
    Store, StoreError, TokenHashes,
};
use common::backends;

fn settings() -> PoolSettings {
    PoolSettings {
        max_connections: 4,
        acquire_timeout: Duration::from_secs(5),
        ..PoolSettings::default()
    }
}

fn new_account(id: &str, username: &str, credential: &str) -> NewAccount {
    NewAccount {
        user_id: id.into(),
        username: username.into(),
        display_name: None,
        metadata: "{}".into(),
        kind: CredentialKind::Device,
        credential: credential.into(),
        secret: None,
        now: 1_000,
    }
}

fn hashes(tag: &str, now: i64) -> TokenHashes {
    TokenHashes {
        access_hash: format!("a-{tag}"),
        refresh_hash: format!("r-{tag}"),
        access_expires_at: now + 1_000,
        refresh_expires_at: now + 10_000,
    }
}

async fn suite(store: Arc<dyn Store>) {
    // Accounts and credentials.
    let a = store
        .create_account(new_account("u1", "alice", "dev-a"))
        .await
        .unwrap();
    assert_eq!(a.username, "alice");
    assert!(matches!(
        store
            .create_account(new_account("u2", "alice", "dev-b"))
            .await,
        Err(StoreError::Conflict(_))
    ));
    assert!(matches!(
        store
            .create_account(new_account("u3", "other", "dev-a"))
            .await,
        Err(StoreError::Conflict(_))
    ));
    assert!(
        store.account("u2").await.unwrap().is_none(),
        "a failed create leaves nothing behind"
    );
    let (found, secret) = store
        .find_by_credential(CredentialKind::Device, "dev-a")
        .await
        .unwrap()
        .unwrap();
    assert_eq!((found.user_id.as_str(), secret), ("u1", None));
    assert!(
        store
            .find_by_credential(CredentialKind::Custom, "dev-a")
            .await
            .unwrap()
            .is_none()
    );
    store
        .create_account(new_account("u4", "bob", "dev-c"))
        .await
        .unwrap();
    let update = AccountUpdate {
        username: Some("bob".into()),
        display_name: None,
    };
    assert!(matches!(
        store.update_account("u1", update, 2_000).await,
        Err(StoreError::Conflict(_))
    ));
    let update = AccountUpdate {
        username: None,
        display_name: Some(Some("Al".into())),
    };
    assert_eq!(
        store
            .update_account("u1", update, 2_000)
            .await
            .unwrap()
            .unwrap()
            .display_name
            .as_deref(),
        Some("Al")
    );
    let found = store
        .lookup(
            vec!["u1".into(), "nobody".into()],
            vec!["bob".into(), "alice".into()],
        )
        .await
        .unwrap();
    assert_eq!(found.len(), 2);
    // Sessions: lookup, rotation kills the old refresh, revocation, disable.
    store
        .create_session("s1", "u1", hashes("1", 5_000), "node", 5_000)
        .await
        .unwrap();
    assert_eq!(
        store
            .session_by_access("a-1", 5_500)
            .await
            .unwrap()
            .unwrap()
            .session_id,
        "s1"
    );
    assert!(
        store
            .session_by_access("a-1", 6_001)
            .await
            .unwrap()
            .is_none(),
        "expired access"
    );
    let rotated = store
        .rotate("r-1", hashes("2", 6_000), 6_000)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rotated.session_id, "s1");
    assert!(
        store
            .rotate("r-1", hashes("3", 6_000), 6_000)
            .await
            .unwrap()
            .is_none(),
        "replay dies"
    );
    assert!(
        store
            .session_by_access("a-1", 6_000)
            .await
            .unwrap()
            .is_none(),
        "old access replaced"
    );
    assert!(
        store
            .session_by_access("a-2", 6_000)
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(
        store
            .session_id_by_hash(Some("a-2"), Some("r-2"))
            .await
            .unwrap(),
        (Some("s1".into()), Some("s1".into()))
    );
    store
        .create_session("s2", "u4", hashes("b", 6_000), "node", 6_000)
        .await
        .unwrap();
    assert_eq!(
        store
            .invalid_sessions(vec!["s1".into(), "s2".into(), "ghost".into()], 6_000)
            .await
            .unwrap(),
        vec!["ghost".to_string()]
    );
    assert!(store.revoke("s1", "logout", 7_000).await.unwrap());
    assert!(
        !store.revoke("s1", "logout", 7_000).await.unwrap(),
        "idempotent"
    );
    assert!(
        store
            .session_by_access("a-2", 7_000)
            .await
            .unwrap()
            .is_none()
    );
    assert!(store.set_disabled("u4", true, 7_000).await.unwrap());
    assert!(
        store
            .session_by_access("a-b", 6_500)
            .await
            .unwrap()
            .is_none(),
        "disabled account"
    );
    let mut invalid = store
        .invalid_sessions(vec!["s1".into(), "s2".into()], 7_000)
        .await
        .unwrap();
    invalid.sort();
    assert_eq!(invalid, vec!["s1".to_string(), "s2".to_string()]);
    // Rate limits: all-or-nothing charging.
    let charge = |key: &str, limit| RateCharge {
        key_hash: key.into(),
        window_start: 60_000,
        limit,
    };
    assert!(
        store
            .charge_all(vec![charge("k1", 2), charge("k2", 1)])
            .await
            .unwrap()
    );
    assert!(
        !store
            .charge_all(vec![charge("k1", 2), charge("k2", 1)])
            .await
            .unwrap(),
        "k2 is spent"
    );
    assert!(
        store.charge_all(vec![charge("k1", 2)]).await.unwrap(),
        "the refused plan consumed nothing from k1"
    );
    assert!(!store.charge_all(vec![charge("k1", 2)]).await.unwrap());
    let next_window = RateCharge {
        key_hash: "k1".into(),
        window_start: 120_000,
        limit: 2,
    };
    assert!(
        store.charge_all(vec![next_window]).await.unwrap(),
        "a new window starts fresh"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_storage_suite_passes_on_every_backend() {
    let mut ran = Vec::new();
    for backend in backends::all().await {
        let store = SqlStore::connect(&backend.url, &settings()).await.unwrap();
        assert_eq!(store.backend(), backend.name);
        suite(Arc::new(store.clone())).await;
        store.close().await;
        // Migrations are idempotent: reconnecting re-applies nothing.
        let again = SqlStore::connect(&backend.url, &settings()).await.unwrap();
        assert!(again.account("u1").await.unwrap().is_some());
        again.close().await;
        ran.push(backend.name);
    }
    eprintln!("storage suite ran on: {ran:?}");
}

#[tokio::test]
async fn an_unreachable_database_is_a_clear_error_without_the_url() {
    let url = "postgres://user:hunter2-secret@127.0.0.1:1/db";
    let err = SqlStore::connect(url, &settings())
        .await
        .unwrap_err()
        .to_string();
    assert!(!err.contains("hunter2"), "{err}");
    assert!(err.contains("PostgreSQL"), "{err}");
}

/// Writes `pages` 4 KiB blobs in one transaction on a connection that never
/// checkpoints, and returns the size of the write-ahead log afterwards.
async fn write_batch(url: &str, wal: &std::path::Path, pages: usize) -> u64 {
    use sqlx::{ConnectOptions, Connection};
    use std::str::FromStr;
    let mut conn = sqlx::sqlite::SqliteConnectOptions::from_str(url)
        .unwrap()
        .pragma("wal_autocheckpoint", "0")
        .connect()
        .await
        .unwrap();
    let mut tx = conn.begin().await.unwrap();
    for _ in 0..pages {
        sqlx::query("INSERT INTO wal_probe (data) VALUES (zeroblob(4000))")
            .execute(&mut *tx)
            .await
            .unwrap();
    }
    tx.commit().await.unwrap();
    conn.close().await.unwrap();
    std::fs::metadata(wal).map(|m| m.len()).unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_background_checkpointer_keeps_the_sqlite_log_from_growing() {
    use sqlx::Connection;
    let batch = 600;
    let mut sizes = Vec::new();
    for interval in [Some(Duration::from_millis(20)), None] {
        let url = common::temp_sqlite_url();
        let path = url.strip_prefix("sqlite://").unwrap().to_owned();
        let wal = std::path::PathBuf::from(format!("{path}-wal"));
        let store = SqlStore::connect(
            &url,
            &PoolSettings {
                wal_checkpoint_interval: interval,
                ..settings()
            },
        )
        .await
        .unwrap();
        // The store keeps its connections open, so the log is never removed.
        assert!(store.account("nobody").await.unwrap().is_none());
        sqlx::query("CREATE TABLE wal_probe (data BLOB)")
            .execute(&mut sqlx::SqliteConnection::connect(&url).await.unwrap())
            .await
            .unwrap();
        let mut last = 0;
        for _ in 0..4 {
            last = write_batch(&url, &wal, batch).await;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        sizes.push(last);
        store.close().await;
    }
    let one_batch = (batch * 4096) as u64;
    eprintln!("log sizes {sizes:?}, one batch {one_batch}");
    // With the checkpointer each batch reuses the log from its start; the
    // connections without it would append all four batches.
    assert!(sizes[0] < 2 * one_batch, "with checkpointer: {sizes:?}");
    assert!(
        sizes[1] > 3 * one_batch,
        "the probe itself grows the log: {sizes:?}"
    );
}

/// Group ids are u64 values kept as decimal text; a taken id is reported
/// as `IdTaken` (the service draws again), apart from a taken name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taken_group_id_is_told_apart_from_a_taken_name_on_every_backend() {
    use citadel_server::store::{GroupOutcome, GroupRecord, GroupStore};
    for backend in backends::all().await {
        let store = SqlStore::connect(&backend.url, &settings()).await.unwrap();
        store
            .create_account(new_account("owner", "owner", "dev-o"))
            .await
            .unwrap();
        let record = |id: u64, name: &str| GroupRecord {
            group_id: id,
            name: name.into(),
            description: String::new(),
            open: false,
            max_members: 10,
            metadata: "{}".into(),
            creator_id: "owner".into(),
            created_at: 1,
            updated_at: 1,
            member_count: 1,
        };
        let top = (1 << 53) - 1;
        for (id, name, outcome) in [
            (top, "first", GroupOutcome::Applied),
            (top, "second", GroupOutcome::IdTaken),
            (7, "first", GroupOutcome::NameTaken),
            (7, "second", GroupOutcome::Applied),
        ] {
            assert_eq!(
                store.group_create(record(id, name), 10).await.unwrap(),
                outcome,
                "{}: {id} {name}",
                backend.name
            );
        }
        let stored = store.group_get(top).await.unwrap().unwrap();
        assert_eq!((stored.group_id, stored.name.as_str()), (top, "first"));
        assert!(store.group_get(8).await.unwrap().is_none());
        let listed = store.group_list(None, None, None, 10).await.unwrap();
        let ids: Vec<u64> = listed.iter().map(|(g, _)| g.group_id).collect();
        assert_eq!(ids, [top, 7], "{}", backend.name);
        store.close().await;
    }
}
