//! SIGKILL durability: a burst of `chat.send` from four connections into a
//! direct channel of a `citadel` process that is killed mid-burst; after a
//! restart on the same database, history holds every message whose send
//! was answered with success, with its content.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use citadel_client::WsClient;
use serde_json::{Value, json};

use crate::common::*;

fn write_config(url: &str, tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("citadel-chat-crash-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{tag}.toml"));
    let mut text = format!(
        "[http]\nbind = \"127.0.0.1:0\"\n[transport.websocket]\nbind = \"127.0.0.1:0\"\n\
         [transport.limits]\nmessages_per_second = 100000\nmessage_burst = 100000\n\
         [database]\nurl = \"{url}\"\n\
         [authentication.limits.source]\nlimit = 1000000\nwindow_ms = 60000\n\
         [authentication.limits.registration_source]\nlimit = 1000000\nwindow_ms = 60000\n"
    );
    for rule in [
        "join",
        "history",
        "send_user",
        "send_user_channel",
        "send_channel",
    ] {
        text.push_str(&format!(
            "[chat.limits.{rule}]\nlimit = 1000000\nwindow_ms = 60000\n"
        ));
    }
    std::fs::write(&path, text).unwrap();
    path
}

async fn token(http: std::net::SocketAddr, name: &str) -> (String, String) {
    let body = json!({"id": format!("dev-{name}"), "create": true, "username": name});
    let r = http_post(http, &body.to_string()).await;
    let pair = r.json();
    (
        pair["user_id"].as_str().unwrap().to_owned(),
        pair["token"].as_str().unwrap().to_owned(),
    )
}

async fn http_post(http: std::net::SocketAddr, body: &str) -> HttpResponse {
    let r = crate::common::http(http, "POST", "/v1/auth/device", None, Some(body)).await;
    assert!(r.status == 200 || r.status == 201, "{r:?}");
    r
}

async fn client(ws: &str, token: &str) -> TestClient {
    let mut c = TestClient::Ws(WsClient::connect(ws).await.unwrap());
    c.authenticate(Some(token)).await.unwrap();
    c
}

fn direct(other: &str) -> Value {
    json!({"target": {"kind": "direct", "other_user_id": other}})
}

async fn crash_on(url: &str, tag: &str) {
    let config = write_config(url, tag);
    let first = config.clone();
    let (mut child, banner) = tokio::task::spawn_blocking(move || spawn_citadel(serve(&first)))
        .await
        .unwrap();
    let (alice, alice_token) = token(banner.http, &format!("ca-{tag}")).await;
    let (bob, bob_token) = token(banner.http, &format!("cb-{tag}")).await;
    let ws = banner.ws_url().to_owned();
    let mut b = client(&ws, &bob_token).await;
    let mut a = client(&ws, &alice_token).await;
    call_json(&mut a, "friends.add", json!({"other": bob}))
        .await
        .unwrap();
    call_json(&mut b, "friends.add", json!({"other": alice}))
        .await
        .unwrap();
    let ch = call_json(&mut a, "chat.join", direct(&bob)).await.unwrap()["channel_id"]
        .as_str()
        .unwrap()
        .to_owned();

    let acknowledged = Arc::new(Mutex::new(BTreeMap::new()));
    let mut workers = Vec::new();
    for w in 0..4 {
        let (ws, token, bob, ch) = (ws.clone(), alice_token.clone(), bob.clone(), ch.clone());
        let acknowledged = acknowledged.clone();
        workers.push(tokio::spawn(async move {
            let mut c = client(&ws, &token).await;
            call_json(&mut c, "chat.join", direct(&bob)).await.unwrap();
            for i in 0..100_000 {
                let content = format!("w{w}-{i}");
                let payload = json!({"channel_id": ch, "content": content}).to_string();
                let reply = tokio::time::timeout(
                    Duration::from_secs(2),
                    c.call_rpc("chat.send", payload.as_bytes()),
                )
                .await;
                match reply {
                    Ok(Ok(bytes)) => {
                        let r: Value = serde_json::from_slice(&bytes).unwrap();
                        let id = r["message"]["id"].as_u64().unwrap();
                        acknowledged.lock().unwrap().insert(id, content);
                    }
                    _ => return, // the server is gone
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    for w in workers {
        let _ = w.await;
    }
    let acknowledged = acknowledged.lock().unwrap().clone();
    assert!(
        acknowledged.len() > 20,
        "the burst sent messages ({})",
        acknowledged.len()
    );

    let again = config.clone();
    let (mut child, banner) = tokio::task::spawn_blocking(move || spawn_citadel(serve(&again)))
        .await
        .unwrap();
    let mut a = client(banner.ws_url(), &alice_token).await;
    let rejoined = call_json(&mut a, "chat.join", direct(&bob)).await.unwrap();
    assert_eq!(
        rejoined["channel_id"],
        ch.as_str(),
        "direct channels are durable"
    );
    let mut stored = BTreeMap::new();
    let mut before: Option<u64> = None;
    loop {
        let mut request = json!({"channel_id": ch, "limit": 200});
        if let Some(b) = before {
            request["before_message_id"] = json!(b);
        }
        let page = call_json(&mut a, "chat.history", request).await.unwrap();
        let items = page["items"].as_array().unwrap().clone();
        for m in &items {
            stored.insert(
                m["id"].as_u64().unwrap(),
                m["content"].as_str().unwrap().to_owned(),
            );
        }
        if items.len() < 200 {
            break;
        }
        before = items.last().and_then(|m| m["id"].as_u64());
    }
    assert!(
        rejoined["watermark_event_id"].as_u64().unwrap() >= *acknowledged.keys().last().unwrap()
    );
    for (id, content) in &acknowledged {
        assert_eq!(
            stored.get(id),
            Some(content),
            "acknowledged message {id} lost"
        );
    }
    eprintln!(
        "{tag}: {} acknowledged chat messages all in history after SIGKILL ({} stored)",
        acknowledged.len(),
        stored.len()
    );
    child.kill().unwrap();
    child.wait().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_sends_survive_sigkill() {
    for backend in backends::all().await {
        crash_on(&backend.url, backend.name).await;
    }
}
