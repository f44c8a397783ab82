//! Durability: a registration storm against a `citadel` process killed with
//! SIGKILL; after restart on the same SQLite file every account whose 201
//! the clients received exists. Also the operator CLI (`migrate`,
//! `account disable/enable`).

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use citadel_server::store::{AccountStore, CredentialKind, PoolSettings, SqlStore};
use common::*;
use serde_json::json;

fn write_config(url: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("citadel-crash-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!(
        "{}.toml",
        url.len() + url.bytes().map(usize::from).sum::<usize>()
    ));
    std::fs::write(
        &path,
        format!(
            "[http]\nbind = \"127.0.0.1:0\"\n[transport.websocket]\nbind = \"127.0.0.1:0\"\n[database]\nurl = \"{url}\"\n\
             [authentication.limits.source]\nlimit = 1000000\nwindow_ms = 60000\n\
             [authentication.limits.registration_source]\nlimit = 1000000\nwindow_ms = 60000\n"
        ),
    )
    .unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_registrations_survive_sigkill() {
    let url = temp_sqlite_url();
    let config = write_config(&url);
    let (mut child, banner) = tokio::task::spawn_blocking(move || spawn_citadel(serve(&config)))
        .await
        .unwrap();
    let http_addr = banner.http;
    let acknowledged = Arc::new(Mutex::new(Vec::new()));
    let mut workers = Vec::new();
    for w in 0..8 {
        let acknowledged = acknowledged.clone();
        workers.push(tokio::spawn(async move {
            for i in 0..10_000 {
                let id = format!("storm-{w}-{i}");
                let body = json!({"id": id, "create": true, "username": id}).to_string();
                let Ok(r) =
                    tokio::time::timeout(Duration::from_secs(2), try_http(http_addr, &body)).await
                else {
                    return;
                };
                match r {
                    Some(201) => acknowledged.lock().unwrap().push(id),
                    Some(_) => {}
                    None => return, // server gone
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    for w in workers {
        let _ = w.await;
    }
    let acknowledged = acknowledged.lock().unwrap().clone();
    assert!(
        acknowledged.len() > 20,
        "the storm did register accounts ({})",
        acknowledged.len()
    );
    let store = SqlStore::connect(
        &url,
        &PoolSettings {
            max_connections: 2,
            acquire_timeout: Duration::from_secs(5),
            ..PoolSettings::default()
        },
    )
    .await
    .unwrap();
    for id in &acknowledged {
        assert!(
            store
                .find_by_credential(CredentialKind::Device, id)
                .await
                .unwrap()
                .is_some(),
            "acknowledged account {id} lost"
        );
    }
    eprintln!(
        "{} acknowledged registrations all present after SIGKILL",
        acknowledged.len()
    );
}

/// POST a device registration; `None` if the server is unreachable.
async fn try_http(addr: std::net::SocketAddr, body: &str) -> Option<u16> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
    let request = format!(
        "POST /v1/auth/device HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.ok()?;
    let text = String::from_utf8_lossy(&raw);
    text.split(' ').nth(1)?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_cli_migrates_and_disables_accounts() {
    let url = temp_sqlite_url();
    let config = write_config(&url);
    let out = citadel()
        .args(["migrate", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("database migrated (sqlite)"));
    let mut cfg = test_config();
    cfg.database.url = url.clone();
    let node = start(cfg).await;
    let pair = http(
        node.http_addr,
        "POST",
        "/v1/auth/device",
        None,
        Some(r#"{"id":"op-1","create":true,"username":"op"}"#),
    )
    .await
    .json();
    let user_id = pair["user_id"].as_str().unwrap().to_owned();
    let out = citadel()
        .args(["account", "disable", &user_id, "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        http(
            node.http_addr,
            "POST",
            "/v1/auth/device",
            None,
            Some(r#"{"id":"op-1"}"#)
        )
        .await
        .status,
        401
    );
    let out = citadel()
        .args(["account", "enable", &user_id, "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        http(
            node.http_addr,
            "POST",
            "/v1/auth/device",
            None,
            Some(r#"{"id":"op-1"}"#)
        )
        .await
        .status,
        200
    );
    let out = citadel()
        .args(["account", "disable", "user-nobody", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no such account"));
}
