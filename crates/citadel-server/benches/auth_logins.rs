//! Device-auth logins per second from 32 concurrent HTTP clients, on SQLite
//! and (when reachable) PostgreSQL. Each login is a full `POST
//! /v1/auth/device` for an existing id: admission-limit charge, credential
//! lookup, session insert, token pair. Admission limits are raised so the
//! single loopback source IP is not throttled. Each client keeps one
//! HTTP/1.1 keep-alive connection.
//!
//! Run: `cargo bench -p citadel-server --bench auth_logins`
//! (optional `CITADEL_BENCH_SECS`, default 5).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use citadel_server::{Config, NodeBuilder};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const CLIENTS: usize = 32;

async fn post(addr: std::net::SocketAddr, body: &str) -> Option<u16> {
    let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
    post_on(&mut stream, body, true).await
}

/// One request on an open connection; reads exactly the response (headers
/// plus Content-Length bytes) so the connection can be reused.
async fn post_on(stream: &mut tokio::net::TcpStream, body: &str, close: bool) -> Option<u16> {
    let connection = if close { "close" } else { "keep-alive" };
    let request = format!(
        "POST /v1/auth/device HTTP/1.1\r\nHost: x\r\nConnection: {connection}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut raw = Vec::with_capacity(1024);
    let mut buf = [0u8; 2048];
    let header_end = loop {
        let n = stream.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        raw.extend_from_slice(&buf[..n]);
        if let Some(pos) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos + 4;
        }
    };
    let head = String::from_utf8_lossy(&raw[..header_end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while raw.len() < header_end + length {
        let n = stream.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        raw.extend_from_slice(&buf[..n]);
    }
    head.split(' ').nth(1)?.parse().ok()
}

async fn run(name: &str, url: &str, secs: u64) {
    let mut config = Config::default();
    config.http.bind = "127.0.0.1:0".into();
    config.transport.websocket.bind = "127.0.0.1:0".into();
    config.database.url = url.to_owned();
    config.database.max_connections = 16;
    config.authentication.limits.source.limit = 1_000_000;
    config.authentication.limits.registration_source.limit = 1_000_000;
    let node = match NodeBuilder::new(config).start().await {
        Ok(node) => node,
        Err(err) => {
            println!("{name}: skipped ({err})");
            return;
        }
    };
    let addr = node.http_addr;
    for i in 0..CLIENTS {
        let body = format!(r#"{{"id":"bench-{i}","create":true,"username":"bench-{i}"}}"#);
        assert!(matches!(post(addr, &body).await, Some(200 | 201)));
    }
    let ok = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let deadline = started + Duration::from_secs(secs);
    let mut tasks = Vec::new();
    for i in 0..CLIENTS {
        let (ok, failed) = (ok.clone(), failed.clone());
        tasks.push(tokio::spawn(async move {
            let body = format!(r#"{{"id":"bench-{i}"}}"#);
            // Each client keeps its HTTP/1.1 connection open, as real clients do.
            let mut conn = None;
            while Instant::now() < deadline {
                if conn.is_none() {
                    conn = tokio::net::TcpStream::connect(addr).await.ok();
                }
                let Some(stream) = conn.as_mut() else {
                    failed.fetch_add(1, Ordering::Relaxed);
                    continue;
                };
                match post_on(stream, &body, false).await {
                    Some(200) => {
                        ok.fetch_add(1, Ordering::Relaxed);
                    }
                    _ => {
                        failed.fetch_add(1, Ordering::Relaxed);
                        conn = None;
                    }
                }
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let n = ok.load(Ordering::Relaxed);
    println!(
        "{name}: {:.0} logins/s ({n} in {elapsed:.1}s, {CLIENTS} clients, {} failed)",
        n as f64 / elapsed,
        failed.load(Ordering::Relaxed)
    );
    node.shutdown();
    node.wait().await;
}

fn main() {
    let secs = std::env::var("CITADEL_BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let dir = std::env::temp_dir().join(format!("citadel-bench-{}", std::process::id()));
        run(
            "sqlite",
            &format!("sqlite://{}/auth.sqlite", dir.display()),
            secs,
        )
        .await;
        // PostgreSQL: a fresh database created for the run and dropped after.
        use sqlx::Connection;
        let admin = "postgres://postgres@127.0.0.1:5432/test";
        match sqlx::PgConnection::connect(admin).await {
            Ok(mut conn) => {
                let _ = sqlx::query("DROP DATABASE IF EXISTS citadel_bench WITH (FORCE)")
                    .execute(&mut conn)
                    .await;
                if sqlx::query("CREATE DATABASE citadel_bench")
                    .execute(&mut conn)
                    .await
                    .is_ok()
                {
                    run(
                        "postgres",
                        "postgres://postgres@127.0.0.1:5432/citadel_bench",
                        secs,
                    )
                    .await;
                    let _ = sqlx::query("DROP DATABASE IF EXISTS citadel_bench WITH (FORCE)")
                        .execute(&mut conn)
                        .await;
                }
            }
            Err(err) => println!("postgres: skipped ({err})"),
        }
        let _ = std::fs::remove_dir_all(dir);
    });
}
