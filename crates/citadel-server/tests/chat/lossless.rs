//! The lossless path: a subscriber that stops reading while 2,000 messages
//! (with edits and tombstones) are sent overflows its lane's chat share,
//! gets `resync_required`, pages history, acknowledges the watermark and
//! ends with exactly the server's message list.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::support::*;
use crate::common::*;

const MESSAGES: usize = 2_000;

/// Keeps the "larger" state of each message (by `last_event_id`).
fn apply(state: &mut BTreeMap<u64, Value>, message: &Value) {
    let id = message["id"].as_u64().unwrap();
    let newer = state
        .get(&id)
        .is_none_or(|old| old["last_event_id"].as_u64() < message["last_event_id"].as_u64());
    if newer {
        state.insert(id, message.clone());
    }
}

/// Every message of the channel, by paging history newest first; the
/// watermark of the first page.
async fn page_all(p: &mut Player, ch: &str) -> (BTreeMap<u64, Value>, u64) {
    let mut out = BTreeMap::new();
    let mut before: Option<u64> = None;
    let mut watermark = None;
    loop {
        let mut request = json!({"channel_id": ch, "limit": 200});
        if let Some(b) = before {
            request["before_message_id"] = json!(b);
        }
        let page = p.rpc("chat.history", request).await.unwrap();
        watermark.get_or_insert(page["watermark_event_id"].as_u64().unwrap());
        let items = page["items"].as_array().unwrap();
        let mut last = before;
        for m in items {
            let id = m["id"].as_u64().unwrap();
            assert!(last.is_none_or(|l| id < l), "strictly descending ids");
            assert!(
                out.insert(id, m.clone()).is_none(),
                "no duplicate across pages"
            );
            last = Some(id);
        }
        if items.len() < 200 {
            return (out, watermark.unwrap());
        }
        before = last;
    }
}

async fn lossless_on(url: &str, tag: &str) {
    let node = start_on(url, |c| {
        roomy(c);
        c.transport.websocket.lanes.outbound_queue_capacity = 64;
        c.transport.limits.messages_per_second = 1_000_000;
        c.transport.limits.message_burst = 1_000_000;
    })
    .await;
    let mut sender = player(&node, &format!("ls-{tag}")).await;
    let (sub_id, sub_token) = device_account(&node, &format!("lr-{tag}")).await;
    let mut sub = Player {
        id: sub_id,
        client: small_buffer_login(&node, &sub_token).await,
    };
    join(&mut sender.client, "lossless").await;
    join(&mut sub.client, "lossless").await;
    let ch = sender.join_room().await;
    sub.rpc("chat.join", json!({"target": ROOM()}))
        .await
        .unwrap();

    // The subscriber reads nothing while the burst runs.
    let padding = "x".repeat(1_500);
    let mut ids = Vec::with_capacity(MESSAGES);
    let (mut edits, mut tombstones) = (0, 0);
    for i in 0..MESSAGES {
        let content = format!("{i:04} {padding}");
        let r = sender
            .rpc("chat.send", json!({"channel_id": ch, "content": content}))
            .await
            .unwrap();
        ids.push(r["message"]["id"].as_u64().unwrap());
        if i % 97 == 50 {
            let target = ids[i - 10];
            sender
                .rpc("chat.edit", json!({"channel_id": ch, "message_id": target, "content": format!("edited {i}")}))
                .await
                .unwrap();
            edits += 1;
        }
        if i % 131 == 70 {
            let target = ids[i - 20];
            sender
                .rpc(
                    "chat.delete",
                    json!({"channel_id": ch, "message_id": target}),
                )
                .await
                .unwrap();
            tombstones += 1;
        }
    }
    let chat = &node.shared().chat;
    assert_eq!(
        chat.registry().flagged(&ch),
        1,
        "the silent subscriber is flagged"
    );
    assert!(
        node.shared()
            .metrics
            .service_events(citadel_server::metrics::ServiceEvent::ChatLiveDropped)
            > 0
    );

    // The client: apply what arrived until resync_required.
    let mut state = BTreeMap::new();
    let resync = loop {
        let e = sub.next_event().await;
        match e["type"].as_str().unwrap() {
            "resync_required" => break e,
            "message.create" | "message.update" | "message.remove" => {
                apply(&mut state, &e["message"])
            }
            other => panic!("unexpected {other}"),
        }
    };
    assert_event_keys(&resync, &["watermark_event_id"]);
    assert_eq!(resync["channel_id"], ch.as_str());
    // Page history, apply it, then acknowledge the page's watermark.
    let (history, watermark) = page_all(&mut sub, &ch).await;
    assert!(watermark >= resync["watermark_event_id"].as_u64().unwrap());
    for m in history.values() {
        apply(&mut state, m);
    }
    assert_eq!(
        chat.registry().flagged(&ch),
        1,
        "receiving a page never acknowledges"
    );
    sub.rpc(
        "chat.history",
        json!({"channel_id": ch, "limit": 1, "acknowledge_watermark": watermark}),
    )
    .await
    .unwrap();
    assert_eq!(
        chat.registry().flagged(&ch),
        0,
        "the acknowledgement clears the flag"
    );

    // Exactly the server's list: no gap, no duplicate, edits and
    // tombstones applied.
    let (server, _) = page_all(&mut sender, &ch).await;
    assert_eq!(server.len(), MESSAGES);
    assert_eq!(server.keys().copied().collect::<Vec<_>>(), ids);
    assert_eq!(state, server);
    let deleted = server.values().filter(|m| m["deleted"] == true).count();
    let revised = server
        .values()
        .filter(|m| m["revision"] == 2 && m["deleted"] == false)
        .count();
    assert_eq!((deleted, revised), (tombstones, edits));
    node.shutdown();
    node.wait().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_subscriber_resyncs_to_exactly_the_server_list() {
    for backend in backends::all().await {
        lossless_on(&backend.url, backend.name).await;
    }
}
