//! Durable notifications (kind 27) over real sockets, on SQLite and on
//! PostgreSQL: the Lua producer, live delivery to every session of the
//! recipient and no one else, delivery-key idempotence, `list` paging and
//! `mark_read`, the bounds, the inbox limit, the service-namespace answers,
//! and survival across a restart on the same SQLite file.

mod common;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use citadel_client::wire::protocol::KIND_NOTIFICATION;
use citadel_server::config::Config;
use citadel_server::{NodeBuilder, RunningNode};
use common::*;
use serde_json::{Value, json};

/// `notify` takes `recipient|subject|delivery_key` and answers the new
/// item's id, or `error:<message>`; `inbox` lists through Lua.
const SCRIPT: &str = r#"
citadel.on_rpc("notify", function(ctx, body)
    local recipient, subject, key = body:match("^([^|]*)|([^|]*)|(.*)$")
    if key == "" then key = nil end
    local ok, n = pcall(citadel.notifications_send, recipient, 7, subject,
        '{"gift":"sword","count":2}', "server", key)
    if not ok then return "error:" .. tostring(n) end
    return n.id .. "|" .. n.content .. "|" .. tostring(n.read_at_unix_ms)
end)
citadel.on_rpc("inbox", function(ctx, recipient)
    local page = citadel.notifications_list(recipient, 10)
    local ids = {}
    for i, n in ipairs(page.items) do ids[i] = n.id end
    local marked = citadel.notifications_mark_read(recipient, { ids[1] })
    return table.concat(ids, ",") .. "|" .. tostring(#marked)
end)
"#;

static NEXT_DIR: AtomicU64 = AtomicU64::new(0);

fn script_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "citadel-notify-{}-{}",
        std::process::id(),
        NEXT_DIR.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("main.lua"), SCRIPT).unwrap();
    dir
}

fn config(url: &str) -> Config {
    let mut config = test_config();
    config.database.url = url.to_owned();
    config.runtime.scripts_dir = script_dir().display().to_string();
    config
}

async fn start_on(config: Config) -> RunningNode {
    NodeBuilder::new(config).start().await.expect("node starts")
}

// A fresh account (device login): (user_id, access token).
use common::device_account as account;
use common::login as session;

async fn rpc(client: &mut TestClient, method: &str, payload: &str) -> Result<String, String> {
    match tokio::time::timeout(STEP, client.call_rpc(method, payload.as_bytes()))
        .await
        .expect("reply in time")
    {
        Ok(bytes) => Ok(String::from_utf8(bytes.to_vec()).unwrap()),
        Err(citadel_client::ClientError::Rpc { message, .. }) => Err(message),
        Err(other) => panic!("{other:?}"),
    }
}

async fn notify(client: &mut TestClient, recipient: &str, subject: &str, key: &str) -> String {
    let reply = rpc(client, "notify", &format!("{recipient}|{subject}|{key}"))
        .await
        .unwrap();
    assert!(!reply.starts_with("error:"), "{reply}");
    reply.split('|').next().unwrap().to_owned()
}

fn list_json(reply: &str) -> Value {
    serde_json::from_str(reply).unwrap()
}

const NOTIFICATION_KEYS: [&str; 7] = [
    "code",
    "content",
    "created_at_unix_ms",
    "id",
    "read_at_unix_ms",
    "sender",
    "subject",
];

fn assert_shape(n: &Value) {
    let mut keys: Vec<&str> = n.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, NOTIFICATION_KEYS, "{n}");
}

async fn delivery_and_inbox(url: String, backend: &str) {
    let node = start_on(config(&url)).await;
    let (alice, alice_token) = account(&node, &format!("alice-{backend}")).await;
    let (_bob, bob_token) = account(&node, &format!("bob-{backend}")).await;
    let mut phone = session(&node, &alice_token).await;
    let (_, second_token) = account(&node, &format!("alice-{backend}")).await;
    let mut laptop = session(&node, &second_token).await;
    let mut bob = session(&node, &bob_token).await;
    let mut visitor = guest(&node, Transport::Ws).await;

    // The common service answers.
    assert_eq!(
        rpc(&mut visitor, "notifications.list", "{}").await,
        Err("authentication required".into())
    );
    assert_eq!(
        rpc(&mut bob, "notifications.delete", "{}").await,
        Err("unknown domain method".into())
    );
    assert_eq!(
        rpc(&mut bob, "notifications.list", "[1]").await,
        Err("invalid JSON body".into())
    );

    // Commit, then one live copy on every session of the recipient only.
    let reply = rpc(&mut bob, "notify", &format!("{alice}|welcome|gift-1"))
        .await
        .unwrap();
    let mut parts = reply.split('|');
    let id = parts.next().unwrap().to_owned();
    assert_eq!(parts.next(), Some(r#"{"count":2,"gift":"sword"}"#));
    assert_eq!(parts.next(), Some("nil"), "unread on creation");
    for client in [&mut phone, &mut laptop] {
        let live = recv_kind(client, KIND_NOTIFICATION).await;
        let n: Value = serde_json::from_slice(&live.body).unwrap();
        assert_shape(&n);
        assert_eq!(n["id"], id.as_str());
        assert_eq!(n["code"], 7);
        assert_eq!(n["subject"], "welcome");
        assert_eq!(n["content"], json!({"gift": "sword", "count": 2}));
        assert_eq!(n["sender"], "server");
        assert!(n["read_at_unix_ms"].is_null());
    }
    assert_silent(&mut bob, Duration::from_millis(200)).await;
    assert_silent(&mut visitor, Duration::from_millis(50)).await;

    // The same delivery key: the same item, and no second envelope.
    assert_eq!(
        notify(&mut bob, &alice, "welcome again", "gift-1").await,
        id
    );
    assert_silent(&mut phone, Duration::from_millis(200)).await;

    // Inbox reads: only the caller's items.
    let mine = list_json(&rpc(&mut phone, "notifications.list", "").await.unwrap());
    assert_eq!(mine["notifications"].as_array().unwrap().len(), 1);
    assert_shape(&mine["notifications"][0]);
    assert!(mine["cursor"].is_null());
    let theirs = list_json(&rpc(&mut bob, "notifications.list", "{}").await.unwrap());
    assert_eq!(theirs["notifications"], json!([]));
    let ids = json!({ "ids": [id] }).to_string();
    assert_eq!(
        rpc(&mut bob, "notifications.mark_read", &ids).await,
        Ok(r#"{"read_ids":[]}"#.into()),
        "someone else's item is not touched"
    );
    assert_eq!(
        rpc(&mut phone, "notifications.mark_read", &ids).await,
        Ok(json!({ "read_ids": [id] }).to_string())
    );
    assert_eq!(
        rpc(&mut laptop, "notifications.mark_read", &ids).await,
        Ok(r#"{"read_ids":[]}"#.into()),
        "idempotent"
    );
    let read = list_json(&rpc(&mut phone, "notifications.list", "{}").await.unwrap());
    assert!(
        read["notifications"][0]["read_at_unix_ms"]
            .as_u64()
            .unwrap()
            > 0
    );

    // Newest first, clamped limits, and a cursor that is stable while new
    // items arrive.
    let mut sent = vec![id.clone()];
    for i in 0..5 {
        sent.push(notify(&mut bob, &alice, &format!("n{i}"), "").await);
    }
    sent.reverse();
    let mut seen = Vec::new();
    let mut cursor = Value::Null;
    loop {
        let request = match &cursor {
            Value::String(c) => json!({ "limit": 2, "cursor": c }),
            _ => json!({ "limit": 2 }),
        };
        let page = list_json(
            &rpc(&mut phone, "notifications.list", &request.to_string())
                .await
                .unwrap(),
        );
        if seen.is_empty() {
            // Arrives after the first page: must not appear on later pages.
            notify(&mut bob, &alice, "late", "").await;
        }
        for n in page["notifications"].as_array().unwrap() {
            seen.push(n["id"].as_str().unwrap().to_owned());
        }
        cursor = page["cursor"].clone();
        if cursor.is_null() {
            break;
        }
    }
    assert_eq!(seen, sent, "no gap, no duplicate, newest first");
    let all = list_json(
        &rpc(&mut phone, "notifications.list", r#"{"limit":1000}"#)
            .await
            .unwrap(),
    );
    assert_eq!(all["notifications"].as_array().unwrap().len(), 7);
    let one = list_json(
        &rpc(&mut phone, "notifications.list", r#"{"limit":0}"#)
            .await
            .unwrap(),
    );
    assert_eq!(one["notifications"].as_array().unwrap().len(), 1, "clamped");
    assert_eq!(
        rpc(&mut phone, "notifications.list", r#"{"cursor":"junk"}"#).await,
        Err("invalid cursor".into())
    );

    // Lua reads and marks too.
    let inbox = rpc(&mut bob, "inbox", &alice).await.unwrap();
    let (ids, marked) = inbox.split_once('|').unwrap();
    assert_eq!(ids.split(',').count(), 7);
    assert_eq!(marked, "1");

    // Bounds and unknown recipients are clear errors for the producer.
    let long = "s".repeat(300);
    let refused = rpc(&mut bob, "notify", &format!("{alice}|{long}|"))
        .await
        .unwrap();
    assert!(refused.contains("subject exceeds 256 bytes"), "{refused}");
    let nobody = rpc(&mut bob, "notify", "user-nobody|hi|").await.unwrap();
    assert!(nobody.contains("unknown recipient"), "{nobody}");
    node.shutdown();
    node.wait().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_on_every_backend() {
    for backend in backends::all().await {
        delivery_and_inbox(backend.url.clone(), backend.name).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inbox_keeps_its_bound_dropping_read_items_first() {
    for backend in backends::all().await {
        let mut config = config(&backend.url);
        config.notifications.max_inbox = 3;
        let node = start_on(config).await;
        let (carol, token) = account(&node, "carol").await;
        let mut client = session(&node, &token).await;
        let first = notify(&mut client, &carol, "1", "").await;
        let second = notify(&mut client, &carol, "2", "").await;
        let third = notify(&mut client, &carol, "3", "").await;
        let ids = json!({ "ids": [second] }).to_string();
        rpc(&mut client, "notifications.mark_read", &ids)
            .await
            .unwrap();
        let fourth = notify(&mut client, &carol, "4", "").await;
        let page = list_json(&rpc(&mut client, "notifications.list", "").await.unwrap());
        let kept: Vec<&str> = page["notifications"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["id"].as_str().unwrap())
            .collect();
        assert_eq!(kept, [&fourth, &third, &first], "{}", backend.name);
        let fifth = notify(&mut client, &carol, "5", "").await;
        let page = list_json(&rpc(&mut client, "notifications.list", "").await.unwrap());
        let kept: Vec<&str> = page["notifications"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["id"].as_str().unwrap())
            .collect();
        assert_eq!(kept, [&fifth, &fourth, &third], "then the oldest unread");
        node.shutdown();
        node.wait().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notification_survives_a_restart_on_the_same_sqlite_file() {
    let url = temp_sqlite_url();
    let node = start_on(config(&url)).await;
    let (dave, token) = account(&node, "dave").await;
    let mut client = session(&node, &token).await;
    let id = notify(&mut client, &dave, "kept", "").await;
    node.shutdown();
    node.wait().await;

    let node = start_on(config(&url)).await;
    let (_, token) = account(&node, "dave").await;
    let mut client = session(&node, &token).await;
    let page = list_json(&rpc(&mut client, "notifications.list", "").await.unwrap());
    assert_eq!(page["notifications"][0]["id"], id.as_str());
    node.shutdown();
    node.wait().await;
}

/// The `citadel` binary serving `config`; returns the child and its HTTP
/// and WebSocket addresses read from the banner.
fn spawn_binary(config: &std::path::Path) -> (std::process::Child, String, String) {
    let (child, banner) = spawn_citadel(serve(config));
    let ws = banner.ws_url().to_owned();
    (child, banner.http.to_string(), ws)
}

async fn login(http_addr: &str, name: &str) -> (String, String) {
    let body = json!({"id": format!("dev-{name}"), "create": true, "username": name});
    let r = http(
        http_addr.parse().unwrap(),
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notification_whose_send_returned_survives_sigkill_and_the_cli_stores_one() {
    use citadel_client::WsClient;
    let url = temp_sqlite_url();
    let dir = script_dir();
    let config_path = dir.join("citadel.toml");
    std::fs::write(
        &config_path,
        format!(
            "[http]\nbind = \"127.0.0.1:0\"\n[transport.websocket]\nbind = \"127.0.0.1:0\"\n\
             [database]\nurl = \"{url}\"\n[runtime]\nscripts_dir = \"{}\"\n",
            dir.display()
        ),
    )
    .unwrap();
    let (mut child, http_addr, ws_url) = spawn_binary(&config_path);
    let (erin, token) = login(&http_addr, "erin").await;
    let (mut client, _) = WsClient::connect_with_token(&ws_url, &token).await.unwrap();
    let reply = client
        .call_rpc("notify", format!("{erin}|before the crash|").as_bytes())
        .await
        .unwrap();
    // Killed the moment the send returned: no graceful shutdown.
    child.kill().unwrap();
    child.wait().unwrap();
    let id = String::from_utf8(reply.to_vec()).unwrap();
    let id = id.split('|').next().unwrap().to_owned();

    // The operator CLI stores into the same inbox while the node is down.
    let cli = citadel()
        .args([
            "notification",
            "send",
            &erin,
            "--code",
            "9",
            "--subject",
            "maintenance",
        ])
        .args(["--content", r#"{"minutes":5}"#, "--config"])
        .arg(&config_path)
        .output()
        .unwrap();
    assert!(cli.status.success(), "{cli:?}");
    let printed: Value = serde_json::from_slice(&cli.stdout).unwrap();
    assert_shape(&printed);
    assert_eq!(printed["content"], json!({"minutes": 5}));
    let bad = citadel()
        .args([
            "notification",
            "send",
            "user-nobody",
            "--code",
            "1",
            "--subject",
            "x",
        ])
        .args(["--content", "{}", "--config"])
        .arg(&config_path)
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown recipient"));

    let (mut child, http_addr, ws_url) = spawn_binary(&config_path);
    let (_, token) = login(&http_addr, "erin").await;
    let (mut client, _) = WsClient::connect_with_token(&ws_url, &token).await.unwrap();
    let page = client.call_rpc("notifications.list", b"").await.unwrap();
    let page: Value = serde_json::from_slice(&page).unwrap();
    assert_eq!(page["notifications"][0]["id"], printed["id"]);
    assert_eq!(page["notifications"][1]["id"], id.as_str());
    child.kill().unwrap();
    child.wait().unwrap();
}
