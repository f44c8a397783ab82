//! Database backends for tests: a fresh SQLite file, and a fresh PostgreSQL
//! database on the machine's server (127.0.0.1:5432, database `test`, trust
//! auth) created for one test and dropped after it. Without PostgreSQL the
//! tests print loudly that they skipped it, unless `CITADEL_REQUIRE_SERVICES=1`
//! (set by `.ci/run`), which turns a missing service into a failure.

use sqlx::Connection;

pub const ADMIN_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// A backend under test; dropping it drops a PostgreSQL database.
pub struct Backend {
    pub name: &'static str,
    pub url: String,
    pg_database: Option<String>,
}

impl Drop for Backend {
    fn drop(&mut self) {
        if let Some(db) = self.pg_database.take() {
            // Best effort, on a private runtime (we may be inside one).
            let _ = std::thread::spawn(move || {
                if let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    rt.block_on(async {
                        if let Ok(mut conn) = sqlx::PgConnection::connect(ADMIN_URL).await {
                            let sql = format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)");
                            let _ = sqlx::query(sqlx::AssertSqlSafe(sql))
                                .execute(&mut conn)
                                .await;
                        }
                    });
                }
            })
            .join();
        }
    }
}

fn require_services() -> bool {
    std::env::var("CITADEL_REQUIRE_SERVICES").is_ok_and(|v| v == "1")
}

pub async fn postgres() -> Option<Backend> {
    let mut conn = match sqlx::PgConnection::connect(ADMIN_URL).await {
        Ok(conn) => conn,
        Err(err) => {
            if require_services() {
                panic!(
                    "PostgreSQL at 127.0.0.1:5432 is required (CITADEL_REQUIRE_SERVICES=1): {err}"
                );
            }
            eprintln!("!!! SKIPPED the PostgreSQL backend: 127.0.0.1:5432 unreachable ({err}) !!!");
            return None;
        }
    };
    let mut bytes = [0u8; 6];
    getrandom::fill(&mut bytes).expect("random");
    let name = format!(
        "citadel_t_{}",
        bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
    );
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut conn)
        .await
        .expect("create test database");
    Some(Backend {
        name: "postgres",
        url: format!("postgres://postgres@127.0.0.1:5432/{name}"),
        pg_database: Some(name),
    })
}

pub fn sqlite() -> Backend {
    Backend {
        name: "sqlite",
        url: super::temp_sqlite_url(),
        pg_database: None,
    }
}

/// SQLite always, PostgreSQL when available (or required).
pub async fn all() -> Vec<Backend> {
    let mut out = vec![sqlite()];
    out.extend(postgres().await);
    out
}
