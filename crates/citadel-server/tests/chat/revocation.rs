//! Immediate revocation (`services::chat::revocations`): with the
//! re-authorisation sweep pushed out to a minute, an unfriend, a block, a
//! group kick, a leave and a group deletion still revoke at once. After the
//! revoking call returns, each affected subscriber's next chat events are
//! at most `presence.leave`s and then `access.revoked`, and no
//! `message.create` sent afterwards ever reaches it.

use std::time::Duration;

use serde_json::{Value, json};

use super::support::*;
use crate::common::*;

/// Longest wait for the revocation notice: far below the sweep's minute.
const PROMPT: Duration = Duration::from_secs(2);

/// Silence long enough for a stray delivery to show up.
const QUIET: Duration = Duration::from_millis(300);

/// The subscriber's next events: `presence.leave`s, then `access.revoked`
/// of `channel` (exact keys), within [`PROMPT`].
async fn revoked_next(p: &mut Player, channel: &str) {
    loop {
        let e = tokio::time::timeout(PROMPT, p.next_event())
            .await
            .expect("access.revoked at once, not by the sweep");
        match e["type"].as_str() {
            Some("presence.leave") => continue,
            Some("access.revoked") => {
                assert_event_keys(&e, &["presence"]);
                assert_eq!(e["channel_id"], channel);
                assert_eq!(e["presence"]["user_id"], p.id.as_str());
                return;
            }
            _ => panic!("{} got {e} before access.revoked", p.id),
        }
    }
}

/// `p`'s subscription to `target`; the channel id.
async fn subscribe(p: &mut Player, target: &Value) -> String {
    p.rpc("chat.join", json!({ "target": target }))
        .await
        .unwrap()["channel_id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// `a` and `b` befriend each other, then both join their direct channel.
async fn direct_pair(a: &mut Player, b: &mut Player) -> String {
    a.rpc("friends.add", json!({"other": b.id})).await.unwrap();
    b.rpc("friends.add", json!({"other": a.id})).await.unwrap();
    let dm = subscribe(a, &json!({"kind": "direct", "other_user_id": b.id})).await;
    assert_eq!(
        subscribe(b, &json!({"kind": "direct", "other_user_id": a.id})).await,
        dm
    );
    a.event("presence.join").await;
    dm
}

/// `sender` sends in `channel`; `witness` (still subscribed) receives it,
/// and by then `revoked` has received nothing.
async fn send_past(sender: &mut Player, witness: &mut Player, revoked: &mut Player, ch: &str) {
    let content = format!("after revoking {}", revoked.id);
    sender
        .rpc("chat.send", json!({"channel_id": ch, "content": content}))
        .await
        .unwrap();
    for p in [sender, witness] {
        let got = p.until("message.create").await;
        assert_eq!(got["message"]["content"], content.as_str());
    }
    assert_silent(&mut revoked.client, QUIET).await;
    assert_eq!(
        revoked
            .rpc("chat.send", json!({"channel_id": ch, "content": "x"}))
            .await,
        Err("CHAT_NOT_SUBSCRIBED".into())
    );
}

async fn immediate(url: &str, tag: &str) {
    let node = start_on(url, |c| {
        roomy(c);
        c.chat.reauthorize_interval_ms = 60_000;
    })
    .await;
    let mut a = player(&node, &format!("ra-{tag}")).await;
    let mut b = player(&node, &format!("rb-{tag}")).await;

    // Unfriend: both sides of the direct channel.
    let dm = direct_pair(&mut a, &mut b).await;
    a.rpc("friends.remove", json!({"other": b.id}))
        .await
        .unwrap();
    revoked_next(&mut a, &dm).await;
    revoked_next(&mut b, &dm).await;
    for p in [&mut a, &mut b] {
        assert_eq!(
            p.rpc("chat.send", json!({"channel_id": dm, "content": "x"}))
                .await,
            Err("CHAT_NOT_SUBSCRIBED".into())
        );
        assert_silent(&mut p.client, QUIET).await;
    }

    // Block: both sides again.
    assert_eq!(direct_pair(&mut a, &mut b).await, dm);
    b.rpc("friends.block", json!({"other": a.id}))
        .await
        .unwrap();
    revoked_next(&mut b, &dm).await;
    revoked_next(&mut a, &dm).await;

    // Groups: the kicked and the leaving member only; deletion everyone.
    let mut owner = player(&node, &format!("ro-{tag}")).await;
    let g = owner
        .rpc("groups.create", json!({"name": format!("Revoked {tag}")}))
        .await
        .unwrap()["group_id"]
        .as_u64()
        .unwrap();
    for p in [&a.id, &b.id] {
        owner
            .rpc("groups.add_member", json!({"group_id": g, "user_id": p}))
            .await
            .unwrap();
    }
    let target = json!({"kind": "group", "group_id": g});
    let gc = subscribe(&mut owner, &target).await;
    subscribe(&mut a, &target).await;
    subscribe(&mut b, &target).await;
    owner.drain_chat(2).await;
    a.event("presence.join").await;

    owner
        .rpc("groups.kick", json!({"group_id": g, "user_id": a.id}))
        .await
        .unwrap();
    revoked_next(&mut a, &gc).await;
    send_past(&mut owner, &mut b, &mut a, &gc).await;

    b.rpc("groups.leave", json!({"group_id": g})).await.unwrap();
    revoked_next(&mut b, &gc).await;
    owner
        .rpc("chat.send", json!({"channel_id": gc, "content": "alone"}))
        .await
        .unwrap();
    owner.until("message.create").await;
    assert_silent(&mut b.client, QUIET).await;

    owner
        .rpc("groups.delete", json!({"group_id": g}))
        .await
        .unwrap();
    revoked_next(&mut owner, &gc).await;
    assert_eq!(
        owner
            .rpc("chat.send", json!({"channel_id": gc, "content": "x"}))
            .await,
        Err("CHAT_NOT_SUBSCRIBED".into())
    );
    node.shutdown();
    node.wait().await;
}

#[tokio::test]
async fn unfriend_block_kick_leave_delete_revoke_at_once_on_every_backend() {
    for backend in backends::all().await {
        immediate(&backend.url, backend.name).await;
    }
}
