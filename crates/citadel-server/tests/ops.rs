//! Operations: HTTP endpoints, graceful shutdown, and the `citadel` CLI
//! (check, version, serve with a signal).

mod common;

use std::process::Command;
use std::time::Duration;

use citadel_client::WsClient;
use citadel_client::wire::Envelope;
use common::*;

#[tokio::test]
async fn health_status_and_metrics() {
    let node = start_default().await;
    let mut a = guest(&node, Transport::Ws).await;
    let _b = guest(&node, Transport::Ws).await;
    join(&mut a, "lobby").await;
    let (code, body) = http_get(&node, "/health").await;
    assert_eq!(code, 200);
    let health: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(health["status"], "healthy");
    assert_eq!(health["node_id"], "dev-1");
    let status = status_json(&node).await;
    for key in [
        "version",
        "node_id",
        "uptime_seconds",
        "connections",
        "participants",
        "rooms",
        "envelopes_in",
        "envelopes_out",
        "drops",
    ] {
        assert!(status.get(key).is_some(), "missing {key}");
    }
    assert_eq!(status["connections"], 2);
    assert_eq!(status["participants"], 2);
    assert_eq!(status["default_dimension_participants"], 1);
    assert_eq!(status["rooms"][0]["name"], "lobby");
    assert_eq!(status["rooms"][0]["members"], 1);
    let (code, text) = http_get(&node, "/metrics").await;
    assert_eq!(code, 200);
    assert!(text.contains("citadel_participants 2"), "{text}");
    assert!(text.contains("citadel_rooms 1"));
    assert!(
        text.contains("citadel_drops_total{reason=\"slow_consumer\"}")
            || text.contains("citadel_closes_total{reason=\"slow_consumer\"} 0")
    );
    let (code, body) = http_get(&node, "/nope").await;
    assert_eq!(code, 404);
    assert!(body.contains("not_found"));
}

#[tokio::test]
async fn shutdown_flushes_queued_envelopes_then_closes_going_away() {
    let node = start_default().await;
    let mut a = guest(&node, Transport::Ws).await;
    let mut b = guest(&node, Transport::Ws).await;
    for i in 0..50u8 {
        a.send(&Envelope::new(500, vec![i])).await.unwrap();
    }
    a.call_rpc("echo", b"sync").await.unwrap();
    node.shutdown();
    let mut got = Vec::new();
    while let Ok(Some(env)) = tokio::time::timeout(STEP, b.recv())
        .await
        .expect("closes in time")
    {
        got.push(split(&env).1[0]);
    }
    assert_eq!(
        got,
        (0..50).collect::<Vec<u8>>(),
        "everything queued was delivered first"
    );
    let (code, reason) = b.close_reason().expect("close frame");
    assert_eq!((code, reason.as_str()), (1001, "server shutting down"));
    tokio::time::timeout(STEP, node.wait())
        .await
        .expect("node stops within the grace");
    assert!(
        WsClient::connect_as_guest("ws://127.0.0.1:1/")
            .await
            .is_err()
    );
}

fn temp_file(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("citadel-ops-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn check_names_the_bad_key_and_version_prints() {
    let good = temp_file("good.toml", "[server]\nnode_id = \"n1\"\n");
    let out = citadel()
        .args(["check", "--config"])
        .arg(&good)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("config ok: node_id=n1"));
    let bad = temp_file("bad.toml", "[transport.websocket]\nqueue_size = 3\n");
    let out = citadel()
        .args(["check", "--config"])
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("queue_size"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let range = temp_file("range.toml", "[transport.auth]\nhandshake_timeout_ms = 0\n");
    let out = citadel()
        .args(["check", "--config"])
        .arg(&range)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("transport.auth.handshake_timeout_ms"));
    let out = citadel().arg("version").output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("citadel "));
    // The shipped example config is valid.
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../citadel.toml");
    let out = citadel()
        .args(["check", "--config", example])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_prints_a_banner_and_exits_cleanly_on_sigterm() {
    let config = temp_file(
        "serve.toml",
        &format!(
            "[http]\nbind = \"127.0.0.1:0\"\n[transport.websocket]\nbind = \"127.0.0.1:0\"\n[shutdown]\ngrace_ms = 500\n[database]\nurl = \"{}\"\n",
            temp_sqlite_url()
        ),
    );
    let (mut child, banner) = tokio::task::spawn_blocking(move || spawn_citadel(serve(&config)))
        .await
        .unwrap();
    let (client, _) = WsClient::connect_as_guest(banner.ws_url()).await.unwrap();
    let mut client = TestClient::Ws(client);
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let mut seen = Vec::new();
    loop {
        match tokio::time::timeout(STEP, client.recv()).await {
            Ok(Ok(Some(env))) => seen.push(format!("env {}", env.kind)),
            other => {
                seen.push(format!("{other:?}"));
                break;
            }
        }
    }
    let (code, _) = client
        .close_reason()
        .unwrap_or_else(|| panic!("no close frame: {seen:?}"));
    assert_eq!(code, 1001);
    let exit = tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap();
    assert!(exit.success(), "{exit:?}");
    let _ = Duration::ZERO;
}

#[test]
fn check_builds_the_lua_script() {
    let game = concat!(env!("CARGO_MANIFEST_DIR"), "/../../game");
    let good = temp_file(
        "lua-good.toml",
        &format!("[runtime]\nscripts_dir = \"{game}\"\n"),
    );
    let out = citadel()
        .args(["check", "--config"])
        .arg(&good)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("script ok"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let broken_dir = std::env::temp_dir().join(format!("citadel-ops-lua-{}", std::process::id()));
    std::fs::create_dir_all(&broken_dir).unwrap();
    std::fs::write(broken_dir.join("main.lua"), "this is not lua").unwrap();
    let bad = temp_file(
        "lua-bad.toml",
        &format!("[runtime]\nscripts_dir = \"{}\"\n", broken_dir.display()),
    );
    let out = citadel()
        .args(["check", "--config"])
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("syntax error"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
