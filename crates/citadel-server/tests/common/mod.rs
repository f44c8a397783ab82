//! Shared helpers for the node's integration tests: a node on ephemeral
//! 127.0.0.1 ports (WebSocket, QUIC and WebTransport) with test RPC
//! methods, [`TestClient`] (one surface over `WsClient` and `QuicClient` so
//! one test body runs on every transport), a tiny HTTP GET, and the
//! `citadel` binary with its banner (`binary`).
#![allow(dead_code)]

mod binary;
mod client;
#[allow(unused_imports)]
pub use binary::{Banner, citadel, serve, spawn as spawn_citadel};
#[allow(unused_imports)]
pub use client::{AnyClient, TestClient, Transport, node_trust};

use std::time::Duration;

use bytes::Bytes;
use citadel_client::{AuthOutcome, Envelope};
use citadel_server::config::Config;
use citadel_server::rpc::{RpcContext, RpcError};
use citadel_server::{NodeBuilder, RunningNode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Generous bound for any single await in a test (never a performance bound).
pub mod backends;

pub const STEP: Duration = Duration::from_secs(10);

/// A fresh SQLite file path for one test.
pub fn temp_sqlite_url() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("citadel-test-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    format!("sqlite://{}/db-{n}.sqlite", dir.display())
}

pub fn test_config() -> Config {
    let mut config = Config::default();
    config.database.url = temp_sqlite_url();
    config.http.bind = "127.0.0.1:0".into();
    config.transport.websocket.bind = "127.0.0.1:0".into();
    config.transport.quic.enabled = true;
    config.transport.quic.bind = "127.0.0.1:0".into();
    config.transport.webtransport.enabled = true;
    config.transport.webtransport.bind = "127.0.0.1:0".into();
    config.transport.tls.data_dir = test_data_dir();
    config.shutdown.grace_ms = 1_000;
    config
}

/// A fresh data directory per node (the dev certificate lives there).
pub fn test_data_dir() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    std::env::temp_dir()
        .join(format!("citadel-test-{}-{n}", std::process::id()))
        .display()
        .to_string()
}

pub fn builder(config: Config) -> NodeBuilder {
    NodeBuilder::new(config)
        .rpc("echo", |_ctx: RpcContext, payload: Bytes| async move {
            Ok(payload)
        })
        .rpc("whoami", |ctx: RpcContext, _p: Bytes| async move {
            Ok(Bytes::from(format!(
                "{}:{}",
                ctx.participant_id,
                ctx.user_id.unwrap_or_default()
            )))
        })
        .rpc("fail", |_ctx: RpcContext, _p: Bytes| async move {
            Err(RpcError::Internal(
                "secret-internal-detail at /srv/game.lua:12".into(),
            ))
        })
        .rpc("slow", |_ctx: RpcContext, _p: Bytes| async move {
            tokio::time::sleep(Duration::from_secs(30)).await;
            Ok(Bytes::new())
        })
}

pub async fn start(config: Config) -> RunningNode {
    builder(config).start().await.expect("node starts")
}

pub async fn start_default() -> RunningNode {
    start(test_config()).await
}

pub async fn guest(node: &RunningNode, t: Transport) -> TestClient {
    let mut client = connect(node, t).await;
    let outcome = tokio::time::timeout(STEP, client.authenticate(None))
        .await
        .expect("auth in time")
        .expect("auth");
    assert_eq!(outcome, AuthOutcome::Guest);
    client
}

/// A connected client that has not sent anything yet.
pub async fn connect(node: &RunningNode, t: Transport) -> TestClient {
    tokio::time::timeout(STEP, TestClient::connect(node, t))
        .await
        .expect("connect in time")
        .expect("connect")
}

pub async fn recv(client: &mut TestClient) -> Envelope {
    tokio::time::timeout(STEP, client.recv())
        .await
        .expect("envelope in time")
        .expect("recv ok")
        .expect("not closed")
}

/// Receives until `kind` arrives (other kinds are skipped).
pub async fn recv_kind(client: &mut TestClient, kind: u16) -> Envelope {
    tokio::time::timeout(STEP, client.wait_for_kind(kind))
        .await
        .expect("envelope in time")
        .expect("wait ok")
}

/// Asserts nothing arrives within `wait`.
pub async fn assert_silent(client: &mut TestClient, wait: Duration) {
    if let Ok(got) = tokio::time::timeout(wait, client.recv()).await {
        panic!("expected silence, got {got:?}");
    }
}

/// Waits for the server to close the connection; returns the close code
/// and reason (the same numbers on every transport).
pub async fn closed<C: AnyClient>(client: &mut C) -> Option<(u16, String)> {
    let deadline = tokio::time::Instant::now() + STEP;
    loop {
        match tokio::time::timeout_at(deadline, client.next_envelope()).await {
            Err(_) => panic!("connection not closed in time"),
            Ok(Ok(Some(_))) => continue,
            Ok(_) => return client.server_close(),
        }
    }
}

/// Waits (up to [`STEP`]) until `condition` holds: for server-side counters
/// that are updated after the client already saw the effect (a close is
/// counted when the connection's tasks finish, after the close frame left).
pub async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + STEP;
    while !condition() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not in time: {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

pub async fn join(client: &mut TestClient, name: &str) -> citadel_client::wire::room::RoomJoined {
    client.join_or_create_room(name).await.expect("send create");
    tokio::time::timeout(STEP, client.wait_for_room_joined())
        .await
        .expect("joined in time")
        .expect("joined")
}

/// Minimal HTTP/1.1 GET against the node; returns (status, body).
pub async fn http_get(node: &RunningNode, path: &str) -> (u16, String) {
    let r = http(node.http_addr, "GET", path, None, None).await;
    (r.status, r.body)
}

/// A response from [`http`].
#[derive(Debug, Clone)]
pub struct HttpResponse {
    pub status: u16,
    pub headers: String,
    pub body: String,
}

impl HttpResponse {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or(serde_json::Value::Null)
    }
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_owned())
        })
    }
}

/// Minimal HTTP/1.1 request with an optional bearer token and body.
pub async fn http(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    bearer: Option<&str>,
    body: Option<&str>,
) -> HttpResponse {
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .expect("http connect");
    let mut request =
        format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
    if let Some(token) = bearer {
        request.push_str(&format!("Authorization: Bearer {token}\r\n"));
    }
    let body = body.unwrap_or("");
    request.push_str(&format!(
        "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    ));
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut raw = Vec::new();
    tokio::time::timeout(STEP, stream.read_to_end(&mut raw))
        .await
        .expect("http in time")
        .expect("read");
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let (headers, body) = text
        .split_once("\r\n\r\n")
        .map(|(h, b)| (h.to_owned(), b.to_owned()))
        .unwrap_or_default();
    let chunked = headers
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    HttpResponse {
        status,
        headers,
        body: if chunked { dechunk(&body) } else { body },
    }
}

fn dechunk(body: &str) -> String {
    // axum may answer with chunked encoding; undo it when present.
    let mut out = String::new();
    let mut rest = body;
    loop {
        let Some((size, tail)) = rest.split_once("\r\n") else {
            return body.to_owned();
        };
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            return body.to_owned();
        };
        if n == 0 {
            return out;
        }
        if tail.len() < n {
            return body.to_owned();
        }
        out.push_str(&tail[..n]);
        rest = tail[n..].trim_start_matches("\r\n");
    }
}

/// A fresh account from a device login (`dev-<name>`, username `name`):
/// (user id, access token).
pub async fn device_account(node: &RunningNode, name: &str) -> (String, String) {
    let body = serde_json::json!({"id": format!("dev-{name}"), "create": true, "username": name});
    let r = http(
        node.http_addr,
        "POST",
        "/v1/auth/device",
        None,
        Some(&body.to_string()),
    )
    .await;
    assert!(r.status == 200 || r.status == 201, "{r:?}");
    let pair = r.json();
    (
        pair["user_id"].as_str().unwrap().to_owned(),
        pair["token"].as_str().unwrap().to_owned(),
    )
}

/// A WebSocket client authenticated with `token`.
pub async fn login(node: &RunningNode, token: &str) -> TestClient {
    let mut client = connect(node, Transport::Ws).await;
    client.authenticate(Some(token)).await.unwrap();
    client
}

/// One RPC with a JSON payload: the reply as JSON, or the server's error
/// message.
pub async fn call_json(
    client: &mut TestClient,
    method: &str,
    payload: serde_json::Value,
) -> Result<serde_json::Value, String> {
    match tokio::time::timeout(
        STEP,
        client.call_rpc(method, payload.to_string().as_bytes()),
    )
    .await
    .expect("reply in time")
    {
        Ok(bytes) => Ok(serde_json::from_slice(&bytes).unwrap()),
        Err(citadel_client::ClientError::Rpc { message, .. }) => Err(message),
        Err(other) => panic!("{other:?}"),
    }
}

pub async fn status_json(node: &RunningNode) -> serde_json::Value {
    let (code, body) = http_get(node, "/status").await;
    assert_eq!(code, 200);
    serde_json::from_str(&body).expect("status is JSON")
}

/// Reads a sender-tagged body: (sender, payload).
pub fn split(env: &Envelope) -> (u64, Vec<u8>) {
    let (sender, payload) =
        citadel_client::wire::protocol::split_sender(&env.body).expect("tagged body");
    (sender, payload.to_vec())
}

static NEXT_SCRIPT_DIR: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A fresh scripts folder (`citadel-<prefix>-<pid>-<n>`) whose `main.lua`
/// is `script`.
pub fn script_dir(prefix: &str, script: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "citadel-{prefix}-{}-{}",
        std::process::id(),
        NEXT_SCRIPT_DIR.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("main.lua"), script).unwrap();
    dir
}

/// A node on the database at `url` running `script` (in a fresh folder
/// named after `prefix`), after `tweak` has adjusted the test config.
pub async fn start_scripted(
    url: &str,
    prefix: &str,
    script: &str,
    tweak: impl FnOnce(&mut Config),
) -> RunningNode {
    let mut config = test_config();
    config.database.url = url.to_owned();
    config.runtime.scripts_dir = script_dir(prefix, script).display().to_string();
    tweak(&mut config);
    NodeBuilder::new(config).start().await.expect("node starts")
}

/// A logged-in account of a service test.
pub struct Player {
    pub id: String,
    pub client: TestClient,
}

/// A fresh device account `name`, logged in over WebSocket.
pub async fn player(node: &RunningNode, name: &str) -> Player {
    let (id, token) = device_account(node, name).await;
    Player {
        id,
        client: login(node, &token).await,
    }
}

/// Runs `op` with `payload` through the script RPC `method` (which takes
/// `op|payload` and answers the reply, or `error:<message>`).
pub async fn script_call(
    client: &mut TestClient,
    method: &str,
    op: &str,
    payload: &serde_json::Value,
) -> Result<serde_json::Value, String> {
    let body = format!("{op}|{payload}");
    let bytes = tokio::time::timeout(STEP, client.call_rpc(method, body.as_bytes()))
        .await
        .expect("reply in time")
        .expect("script answers");
    let text = String::from_utf8(bytes.to_vec()).unwrap();
    match text.strip_prefix("error:") {
        Some(err) => Err(err.to_owned()),
        None => Ok(serde_json::from_str(&text).unwrap()),
    }
}
