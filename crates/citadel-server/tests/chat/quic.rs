//! Chat over native QUIC: two QUIC sessions (and one WebSocket session in
//! the same room) join a room channel, see each other's presence, type,
//! send and receive `message.create`, leave, and are revoked on leaving the
//! gateway room, with the exact key set of every event.

use serde_json::json;

use super::support::*;
use crate::common::*;

/// A fresh device account `name`, logged in over QUIC.
async fn quic_player(node: &citadel_server::RunningNode, name: &str) -> Player {
    let (id, token) = device_account(node, name).await;
    let mut client = connect(node, Transport::Quic).await;
    client.authenticate(Some(&token)).await.unwrap();
    Player { id, client }
}

async fn over_quic(url: &str, tag: &str) {
    let node = start_on(url, roomy).await;
    let mut a = quic_player(&node, &format!("qa-{tag}")).await;
    let mut b = quic_player(&node, &format!("qb-{tag}")).await;
    let mut w = player(&node, &format!("qw-{tag}")).await;
    let room = join(&mut a.client, "quic-chat").await;
    join(&mut b.client, "quic-chat").await;
    join(&mut w.client, "quic-chat").await;
    let ch = a.join_room().await;
    assert_eq!(b.join_room().await, ch);
    let joined = a.event("presence.join").await;
    assert_event_keys(&joined, &["channel_type", "presence"]);
    assert_keys(&joined["presence"], &["presence_id", "user_id"]);
    assert_eq!(joined["presence"]["user_id"], b.id.as_str());
    assert_eq!(joined["channel_type"], "room");
    assert_eq!(w.join_room().await, ch);
    for p in [&mut a, &mut b] {
        let e = p.event("presence.join").await;
        assert_eq!(e["presence"]["user_id"], w.id.as_str());
    }

    a.rpc("chat.typing", json!({"channel_id": ch, "typing": true}))
        .await
        .unwrap();
    for p in [&mut b, &mut w] {
        let typing = p.event("typing").await;
        assert_event_keys(&typing, &["presence", "typing", "expires_at"]);
        assert_eq!(typing["presence"]["user_id"], a.id.as_str());
        assert_eq!(typing["typing"], true);
    }

    let sent = b
        .rpc(
            "chat.send",
            json!({"channel_id": ch, "content": "over quic"}),
        )
        .await
        .unwrap();
    let event_id = sent["event_id"].as_u64().unwrap();
    let sender = b.id.clone();
    for p in [&mut a, &mut b, &mut w] {
        let created = p.event("message.create").await;
        assert_event_keys(&created, &["event_id", "message"]);
        assert_eq!(created["event_id"], event_id);
        assert_eq!(created["message"]["content"], "over quic");
        assert_eq!(created["message"]["sender"], sender.as_str());
    }

    b.rpc("chat.leave", json!({"channel_id": ch}))
        .await
        .unwrap();
    for p in [&mut a, &mut w] {
        let gone = p.event("presence.leave").await;
        assert_event_keys(&gone, &["presence"]);
        assert_eq!(gone["presence"]["user_id"], b.id.as_str());
    }

    // Leaving the gateway room revokes the room channel.
    a.client.leave_room(room.room_id).await.unwrap();
    let revoked = a.until("access.revoked").await;
    assert_event_keys(&revoked, &["presence"]);
    assert_eq!(revoked["channel_id"], ch.as_str());
    assert_eq!(
        w.event("presence.leave").await["presence"]["user_id"],
        a.id.as_str()
    );
    node.shutdown();
    node.wait().await;
}

#[tokio::test]
async fn quic_sessions_join_type_send_receive_and_leave_on_every_backend() {
    for backend in backends::all().await {
        over_quic(&backend.url, backend.name).await;
    }
}
