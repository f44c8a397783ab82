//! Durable chat (kind 28) over real WebSocket sockets, on SQLite and on
//! PostgreSQL: the common service answers, room, direct and group channels
//! with their authorisation and revocation, every RPC body, the exact key
//! set of every event type, edit/delete windows and tombstones, group
//! moderation with its redacted audit, the rate limits (durable, shared by
//! two nodes on one database, failing closed), Lua `citadel.chat_call`, the
//! lossless resync path (`chat/lossless.rs`), SIGKILL durability
//! (`chat/crash.rs`), immediate revocation (`chat/revocation.rs`) and chat
//! over QUIC (`chat/quic.rs`).

mod common;

#[path = "chat/crash.rs"]
mod crash;
#[path = "chat/lossless.rs"]
mod lossless;
#[path = "chat/quic.rs"]
mod quic;
#[path = "chat/revocation.rs"]
mod revocation;
#[path = "chat/support.rs"]
mod support;

use std::time::Duration;

use citadel_server::config::Config;
use serde_json::{Value, json};

use common::*;
use support::*;

async fn room_rules(url: &str, tag: &str) {
    let node = start_on(url, roomy).await;
    let mut a = player(&node, &format!("a-{tag}")).await;
    let mut b = player(&node, &format!("b-{tag}")).await;
    let mut c = player(&node, &format!("c-{tag}")).await;
    let mut visitor = guest(&node, Transport::Ws).await;

    // The common answers (services.md §1).
    assert_eq!(
        call_json(&mut visitor, "chat.join", json!({"target": ROOM()})).await,
        Err("authentication required".into())
    );
    assert_eq!(
        a.rpc("chat.nope", json!({})).await,
        Err("unknown domain method".into())
    );
    assert_eq!(
        a.rpc("chat.join", json!([1])).await,
        Err("invalid JSON body".into())
    );
    assert_eq!(
        a.rpc("chat.join", json!({})).await,
        Err("missing string field: target".into())
    );
    assert_eq!(
        a.rpc("chat.join", json!({"target": ROOM(), "x": 1})).await,
        Err("invalid JSON body".into())
    );
    assert_eq!(
        a.rpc("chat.send", json!({"content": "x"})).await,
        Err("missing string field: channel_id".into())
    );
    // The old payload.
    assert_eq!(
        a.rpc(
            "chat.join",
            json!({"channel": "lobby", "channel_type": "room"})
        )
        .await,
        Err("CHAT_PROTOCOL_UPGRADE_REQUIRED".into())
    );
    // Unavailable targets all look the same.
    for target in [ROOM(), json!({"kind": "planet"})] {
        assert_eq!(
            a.rpc("chat.join", json!({ "target": target })).await,
            Err("CHAT_UNAVAILABLE".into()),
            "{target}"
        );
    }
    assert_eq!(
        a.rpc("chat.send", json!({"channel_id": "ch_0", "content": "x"}))
            .await,
        Err("CHAT_NOT_SUBSCRIBED".into())
    );

    // Join: both in the same gateway room; c is elsewhere.
    let room = join(&mut a.client, &format!("hall-{tag}")).await.room_id;
    join(&mut b.client, &format!("hall-{tag}")).await;
    let ja = a.rpc("chat.join", json!({"target": ROOM()})).await.unwrap();
    assert_keys(
        &ja,
        &[
            "channel_id",
            "channel_type",
            "presence",
            "subscription",
            "watermark_event_id",
        ],
    );
    assert_eq!(ja["channel_type"], "room");
    assert_eq!(ja["watermark_event_id"], 0);
    assert!(ja["subscription"].as_str().unwrap().starts_with("sub_"));
    let ch = ja["channel_id"].as_str().unwrap().to_owned();
    assert!(ch.starts_with("ch_"));
    let jb = b.rpc("chat.join", json!({"target": ROOM()})).await.unwrap();
    assert_eq!(jb["channel_id"], ch.as_str());
    assert_eq!(jb["presence"].as_array().unwrap().len(), 2);
    let joined = a.event("presence.join").await;
    assert_event_keys(&joined, &["channel_type", "presence"]);
    assert_eq!(joined["channel_type"], "room");
    assert_keys(&joined["presence"], &["presence_id", "user_id"]);
    assert_eq!(joined["presence"]["user_id"], b.id.as_str());
    let b_presence = joined["presence"].clone();
    assert!(
        b_presence["presence_id"]
            .as_str()
            .unwrap()
            .starts_with("pr_")
    );
    // A re-join is idempotent: the same subscription, no second presence.
    let again = b.rpc("chat.join", json!({"target": ROOM()})).await.unwrap();
    assert_eq!(again["subscription"], jb["subscription"]);
    assert_silent(&mut a.client, Duration::from_millis(200)).await;
    assert_eq!(
        c.rpc("chat.join", json!({"target": ROOM()})).await,
        Err("CHAT_UNAVAILABLE".into())
    );
    assert_eq!(
        c.rpc("chat.send", json!({"channel_id": ch, "content": "x"}))
            .await,
        Err("CHAT_NOT_SUBSCRIBED".into()),
        "a channel id grants nothing"
    );
    assert_eq!(
        a.rpc(
            "chat.send",
            json!({"channel_id": ch, "target": ROOM(), "content": "x"})
        )
        .await,
        Err("CHAT_PROTOCOL_UPGRADE_REQUIRED".into()),
        "a target after join"
    );

    // Content rules.
    for bad in [String::new(), "tab\there".into(), "é".repeat(1025)] {
        assert_eq!(
            a.rpc("chat.send", json!({"channel_id": ch, "content": bad}))
                .await,
            Err("CHAT_INVALID_CONTENT".into())
        );
    }

    // Send: the reply and one message.create on every subscriber.
    let sent = a
        .rpc(
            "chat.send",
            json!({"channel_id": ch, "content": "hello\nworld"}),
        )
        .await
        .unwrap();
    assert_keys(&sent, &["event_id", "message"]);
    let m = &sent["message"];
    assert_keys(m, &MESSAGE_KEYS);
    assert_eq!(m["last_event_id"], sent["event_id"]);
    assert_eq!(
        (m["revision"].as_u64(), m["deleted"].as_bool()),
        (Some(1), Some(false))
    );
    assert_eq!(m["sender"], a.id.as_str());
    for p in [&mut a, &mut b] {
        let e = p.event("message.create").await;
        assert_event_keys(&e, &["event_id", "message"]);
        assert_eq!(e["message"], *m);
        assert_eq!(e["event_id"], sent["event_id"]);
    }
    let first = m["id"].as_u64().unwrap();

    // Typing: to the others, with its deadline.
    let t = b
        .rpc("chat.typing", json!({"channel_id": ch, "typing": true}))
        .await
        .unwrap();
    assert_keys(&t, &["expires_at", "typing"]);
    let typing = a.event("typing").await;
    assert_event_keys(&typing, &["expires_at", "presence", "typing"]);
    assert_eq!(typing["presence"], b_presence);
    assert_eq!(typing["expires_at"], t["expires_at"]);
    assert!(
        t["expires_at"].as_u64().unwrap() > now_ms() + 3_000,
        "5 s TTL"
    );
    assert_eq!(
        b.rpc("chat.typing", json!({"channel_id": ch})).await,
        Err("missing boolean field: typing".into())
    );

    // Edit: author only; message.update with the next event id.
    assert_eq!(
        b.edit(&ch, first, "mine").await,
        Err("CHAT_NOT_AUTHOR".into())
    );
    let edited = a
        .rpc(
            "chat.edit",
            json!({"channel_id": ch, "message_id": first, "content": "hello again"}),
        )
        .await
        .unwrap();
    assert_keys(&edited, &["event_id", "message"]);
    assert_eq!(edited["message"]["revision"], 2);
    assert!(edited["event_id"].as_u64() > sent["event_id"].as_u64());
    for p in [&mut a, &mut b] {
        let e = p.event("message.update").await;
        assert_event_keys(&e, &["event_id", "message"]);
        assert_eq!(e["message"], edited["message"]);
    }
    assert_eq!(
        a.edit(&ch, 999_999, "x").await,
        Err("CHAT_MESSAGE_NOT_FOUND".into())
    );
    assert_eq!(
        a.rpc("chat.edit", json!({"channel_id": ch, "content": "x"}))
            .await,
        Err("missing integer field: message_id".into())
    );

    // Delete: a tombstone, message.remove, then nothing more to change.
    assert_eq!(b.delete(&ch, first).await, Err("CHAT_NOT_AUTHOR".into()));
    let deleted = a
        .rpc(
            "chat.delete",
            json!({"channel_id": ch, "message_id": first}),
        )
        .await
        .unwrap();
    assert_keys(&deleted, &["deleted", "event_id", "message_id"]);
    assert_eq!(
        (deleted["deleted"].as_bool(), deleted["message_id"].as_u64()),
        (Some(true), Some(first))
    );
    for p in [&mut a, &mut b] {
        let e = p.event("message.remove").await;
        assert_event_keys(&e, &["event_id", "message"]);
        assert_eq!(e["message"]["deleted"], true);
        assert_eq!(e["message"]["content"], "");
        assert_eq!(e["message"]["revision"], 3);
        assert_eq!(e["event_id"], deleted["event_id"]);
    }
    assert_eq!(
        a.edit(&ch, first, "x").await,
        Err("CHAT_MESSAGE_DELETED".into())
    );
    assert_eq!(
        a.delete(&ch, first).await,
        Err("CHAT_MESSAGE_DELETED".into())
    );
    assert_eq!(
        a.rpc(
            "chat.moderate",
            json!({"channel_id": ch, "message_id": first})
        )
        .await,
        Err("CHAT_FORBIDDEN".into()),
        "room moderation is operator-only"
    );

    // History: newest first, paged, tombstones included.
    let mut ids = vec![first];
    for i in 0..3 {
        let r = b
            .rpc(
                "chat.send",
                json!({"channel_id": ch, "content": format!("m{i}")}),
            )
            .await
            .unwrap();
        ids.push(r["message"]["id"].as_u64().unwrap());
    }
    let last_event = ids[3];
    let page = a
        .rpc("chat.history", json!({"channel_id": ch, "limit": 2}))
        .await
        .unwrap();
    assert_keys(&page, &["items", "watermark_event_id"]);
    assert_eq!(page["watermark_event_id"], last_event);
    let got: Vec<u64> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_u64().unwrap())
        .collect();
    assert_eq!(got, vec![ids[3], ids[2]]);
    let rest = a
        .rpc(
            "chat.history",
            json!({"channel_id": ch, "before_message_id": ids[2]}),
        )
        .await
        .unwrap();
    let items = rest["items"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    assert_eq!(items[0]["id"], ids[1]);
    assert_eq!(items[1]["deleted"], true);
    assert_keys(&items[1], &MESSAGE_KEYS);
    let one = a
        .rpc("chat.history", json!({"channel_id": ch, "limit": 0}))
        .await
        .unwrap();
    assert_eq!(
        one["items"].as_array().unwrap().len(),
        1,
        "limit clamps to 1"
    );
    assert_eq!(
        a.rpc("chat.history", json!({"channel_id": ch, "limit": "x"}))
            .await,
        Err("invalid JSON body".into())
    );
    a.drain_chat(3).await;
    b.drain_chat(3).await;

    // Leave: presence.leave to the others; idempotent.
    let left = b
        .rpc("chat.leave", json!({"channel_id": ch}))
        .await
        .unwrap();
    assert_eq!(left, json!({"left": true}));
    let gone = a.event("presence.leave").await;
    assert_event_keys(&gone, &["presence"]);
    assert_eq!(gone["presence"], b_presence);
    assert_eq!(
        b.rpc("chat.leave", json!({"channel_id": ch})).await,
        Ok(json!({"left": false}))
    );
    assert_eq!(
        b.rpc("chat.send", json!({"channel_id": ch, "content": "x"}))
            .await,
        Err("CHAT_NOT_SUBSCRIBED".into())
    );

    // Leaving the gateway room revokes: access.revoked, then presence.leave.
    let rejoined = b.rpc("chat.join", json!({"target": ROOM()})).await.unwrap();
    let p = a.event("presence.join").await["presence"].clone();
    b.client.leave_room(room).await.unwrap();
    let revoked = b.event("access.revoked").await;
    assert_event_keys(&revoked, &["presence"]);
    assert_eq!(revoked["presence"], p);
    assert_eq!(revoked["channel_id"], rejoined["channel_id"]);
    assert_eq!(a.event("presence.leave").await["presence"], p);
    assert_eq!(
        b.rpc("chat.send", json!({"channel_id": ch, "content": "x"}))
            .await,
        Err("CHAT_NOT_SUBSCRIBED".into())
    );

    // Disconnect: the others see presence.leave.
    join(&mut c.client, &format!("hall-{tag}")).await;
    c.rpc("chat.join", json!({"target": ROOM()})).await.unwrap();
    let cp = a.event("presence.join").await["presence"].clone();
    c.client.close().await.unwrap();
    assert_eq!(a.event("presence.leave").await["presence"], cp);
    node.shutdown();
    node.wait().await;
}

async fn direct_and_group_rules(url: &str, tag: &str) {
    let node = start_on(url, roomy).await;
    let mut a = player(&node, &format!("da-{tag}")).await;
    let mut b = player(&node, &format!("db-{tag}")).await;
    let direct = |other: &str| json!({"target": {"kind": "direct", "other_user_id": other}});

    // Direct: a mutual friendship, and no block.
    for target in [direct(&b.id), direct(&a.id), direct("user-nobody")] {
        assert_eq!(
            a.rpc("chat.join", target).await,
            Err("CHAT_UNAVAILABLE".into())
        );
    }
    assert_eq!(
        a.rpc("chat.join", json!({"target": {"kind": "direct"}}))
            .await,
        Err("missing string field: other_user_id".into())
    );
    a.rpc("friends.add", json!({"other": b.id})).await.unwrap();
    assert_eq!(
        a.rpc("chat.join", direct(&b.id)).await,
        Err("CHAT_UNAVAILABLE".into()),
        "an invitation is not a friendship"
    );
    b.rpc("friends.add", json!({"other": a.id})).await.unwrap();
    let ja = a.rpc("chat.join", direct(&b.id)).await.unwrap();
    let jb = b.rpc("chat.join", direct(&a.id)).await.unwrap();
    assert_eq!(ja["channel_type"], "direct");
    assert_eq!(ja["channel_id"], jb["channel_id"]);
    let dm = ja["channel_id"].as_str().unwrap().to_owned();
    a.event("presence.join").await;
    a.rpc("chat.send", json!({"channel_id": dm, "content": "psst"}))
        .await
        .unwrap();
    assert_eq!(
        b.event("message.create").await["message"]["content"],
        "psst"
    );
    a.event("message.create").await;

    // Lua: trusted calls on a stored channel; room targets refused.
    let by_script = b
        .script("send", json!({"channel_id": dm, "content": "from lua"}))
        .await
        .unwrap();
    assert_eq!(by_script["message"]["sender"], b.id.as_str());
    assert_eq!(
        a.event("message.create").await["message"]["content"],
        "from lua"
    );
    b.event("message.create").await;
    let history = a
        .script("history", json!({"channel_id": dm}))
        .await
        .unwrap();
    assert_eq!(history["items"].as_array().unwrap().len(), 2);
    assert_eq!(
        b.script("poke", json!({})).await,
        Err("unknown chat operation".into())
    );
    assert_eq!(
        b.script("send", json!({"channel_id": "ch_0", "content": "x"}))
            .await,
        Err("CHAT_UNAVAILABLE".into())
    );

    // A block revokes both subscriptions (the re-authorisation sweep).
    b.rpc("friends.block", json!({"other": a.id}))
        .await
        .unwrap();
    for p in [&mut a, &mut b] {
        let revoked = p.until("access.revoked").await;
        assert_event_keys(&revoked, &["presence"]);
        assert_eq!(revoked["channel_id"], dm.as_str());
    }
    assert_eq!(
        a.rpc("chat.send", json!({"channel_id": dm, "content": "x"}))
            .await,
        Err("CHAT_NOT_SUBSCRIBED".into())
    );
    assert_eq!(
        a.rpc("chat.join", direct(&b.id)).await,
        Err("CHAT_UNAVAILABLE".into())
    );
    assert_eq!(
        a.script("send", json!({"channel_id": dm, "content": "x"}))
            .await,
        Err("CHAT_UNAVAILABLE".into()),
        "scripts are re-authorised too"
    );

    // An unfriend revokes too (b lifts the block, both befriend again).
    b.rpc("friends.remove", json!({"other": a.id}))
        .await
        .unwrap();
    a.rpc("friends.add", json!({"other": b.id})).await.unwrap();
    b.rpc("friends.add", json!({"other": a.id})).await.unwrap();
    assert_eq!(
        a.rpc("chat.join", direct(&b.id)).await.unwrap()["channel_id"],
        dm.as_str()
    );
    a.rpc("friends.remove", json!({"other": b.id}))
        .await
        .unwrap();
    assert_eq!(a.until("access.revoked").await["channel_id"], dm.as_str());

    // Groups: current membership; moderation by role.
    let mut owner = player(&node, &format!("go-{tag}")).await;
    let mut adm = player(&node, &format!("ga-{tag}")).await;
    let mut mem = player(&node, &format!("gm-{tag}")).await;
    let created = owner
        .rpc("groups.create", json!({"name": format!("Chatters {tag}")}))
        .await
        .unwrap();
    // The id is a JSON integer, and the group target takes it as one.
    assert!(created["group_id"].is_u64(), "{created}");
    let g = created["group_id"].as_u64().unwrap();
    let target = json!({"target": {"kind": "group", "group_id": g}});
    assert_eq!(
        mem.rpc("chat.join", target.clone()).await,
        Err("CHAT_UNAVAILABLE".into())
    );
    let group = |id: Value| json!({"target": {"kind": "group", "group_id": id}});
    assert_eq!(
        mem.rpc("chat.join", group(json!(9_007_199_254_740_993_u64)))
            .await,
        Err("CHAT_UNAVAILABLE".into()),
        "a well-formed unknown id"
    );
    for bad in [json!(g.to_string()), json!(0), json!(-1), json!(1.5)] {
        assert_eq!(
            owner.rpc("chat.join", group(bad.clone())).await,
            Err("missing integer field: group_id".into()),
            "{bad}"
        );
    }
    for p in [&adm.id, &mem.id] {
        owner
            .rpc("groups.add_member", json!({"group_id": g, "user_id": p}))
            .await
            .unwrap();
    }
    owner
        .rpc("groups.promote", json!({"group_id": g, "user_id": adm.id}))
        .await
        .unwrap();
    let gj = owner.rpc("chat.join", target.clone()).await.unwrap();
    assert_eq!(gj["channel_type"], "group");
    let gc = gj["channel_id"].as_str().unwrap().to_owned();
    adm.rpc("chat.join", target.clone()).await.unwrap();
    mem.rpc("chat.join", target.clone()).await.unwrap();
    let mut sent = Vec::new();
    for p in [&mut mem, &mut adm, &mut owner] {
        let r = p
            .rpc(
                "chat.send",
                json!({"channel_id": gc, "content": format!("by {}", p.id)}),
            )
            .await
            .unwrap();
        sent.push(r["message"]["id"].as_u64().unwrap());
    }
    let (m1, a1, o1) = (sent[0], sent[1], sent[2]);
    let moderate = |id: u64| json!({"channel_id": gc, "message_id": id});
    assert_eq!(
        mem.rpc("chat.moderate", moderate(a1)).await,
        Err("CHAT_FORBIDDEN".into())
    );
    assert_eq!(
        adm.rpc("chat.moderate", moderate(o1)).await,
        Err("CHAT_FORBIDDEN".into())
    );
    assert_eq!(
        adm.rpc("chat.moderate", moderate(a1)).await,
        Err("CHAT_FORBIDDEN".into()),
        "admins' messages are the superadmin's"
    );
    let done = adm.rpc("chat.moderate", moderate(m1)).await.unwrap();
    assert_keys(&done, &["deleted", "event_id", "message_id"]);
    owner.rpc("chat.moderate", moderate(a1)).await.unwrap();
    assert_eq!(
        owner.rpc("chat.moderate", moderate(a1)).await,
        Err("CHAT_MESSAGE_DELETED".into())
    );
    let audit = node
        .shared()
        .accounts
        .store()
        .chat_audit(&gc)
        .await
        .unwrap();
    assert_eq!(audit.len(), 2);
    assert_eq!(
        (audit[0].message_id, audit[0].actor_role.as_str()),
        (m1, "admin")
    );
    assert_eq!(
        (audit[1].message_id, audit[1].actor_role.as_str()),
        (a1, "superadmin")
    );
    assert_eq!(audit[0].author_id, mem.id);
    assert_eq!(audit[0].actor_id, adm.id);
    assert_eq!(
        audit[0].content_sha256,
        citadel_server::services::tokens::sha256_hex(&format!("by {}", mem.id)),
        "the audit keeps a hash, never the content"
    );
    let history = owner
        .rpc("chat.history", json!({"channel_id": gc}))
        .await
        .unwrap();
    let items = history["items"].as_array().unwrap();
    assert_eq!(items.len(), 3);
    assert_eq!(
        (items[1]["deleted"].as_bool(), items[2]["deleted"].as_bool()),
        (Some(true), Some(true))
    );
    assert_eq!(items[1]["content"], "");

    // A kick revokes the member.
    owner
        .rpc("groups.kick", json!({"group_id": g, "user_id": mem.id}))
        .await
        .unwrap();
    let revoked = mem.until("access.revoked").await;
    assert_eq!(revoked["channel_id"], gc.as_str());
    assert_eq!(
        mem.rpc("chat.send", json!({"channel_id": gc, "content": "x"}))
            .await,
        Err("CHAT_NOT_SUBSCRIBED".into())
    );
    assert_eq!(
        mem.rpc("chat.join", target).await,
        Err("CHAT_UNAVAILABLE".into())
    );
    node.shutdown();
    node.wait().await;
}

async fn limits_and_windows(url: &str, tag: &str) {
    let tight = |c: &mut Config| {
        c.chat.limits.send_user.limit = 3;
        c.chat.limits.send_user.window_ms = 60_000;
        c.chat.edit_window_ms = 1;
        c.chat.delete_window_ms = 1;
        c.chat.reauthorize_interval_ms = 100;
    };
    let one = start_on(url, tight).await;
    let two = start_on(url, tight).await;
    let (id, token) = device_account(&one, &format!("lim-{tag}")).await;
    let mut here = Player {
        id: id.clone(),
        client: login(&one, &token).await,
    };
    let mut there = Player {
        id,
        client: login(&two, &token).await,
    };
    join(&mut here.client, "lim").await;
    join(&mut there.client, "lim").await;
    let ch1 = here.join_room().await;
    let ch2 = there.join_room().await;
    assert_ne!(ch1, ch2, "room channels belong to their node");
    let mut first = 0;
    for i in 0..2 {
        let r = here
            .rpc(
                "chat.send",
                json!({"channel_id": ch1, "content": format!("{i}")}),
            )
            .await
            .unwrap();
        first = r["message"]["id"].as_u64().unwrap();
    }
    there
        .rpc("chat.send", json!({"channel_id": ch2, "content": "third"}))
        .await
        .unwrap();
    // The per-user window is shared through the database.
    for (p, ch) in [(&mut here, &ch1), (&mut there, &ch2)] {
        assert_eq!(
            p.rpc("chat.send", json!({"channel_id": ch, "content": "fourth"}))
                .await,
            Err("CHAT_RATE_LIMITED".into())
        );
    }
    assert!(
        one.shared()
            .metrics
            .service_events(citadel_server::metrics::ServiceEvent::ChatRateLimited)
            >= 1
    );

    // Windows (1 ms here).
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(
        here.edit(&ch1, first, "late").await,
        Err("CHAT_EDIT_WINDOW_CLOSED".into())
    );
    assert_eq!(
        here.delete(&ch1, first).await,
        Err("CHAT_DELETE_WINDOW_CLOSED".into())
    );

    // A storage failure of the limits fails closed.
    break_rate_limits(url).await;
    assert_eq!(
        here.rpc("chat.typing", json!({"channel_id": ch1, "typing": true}))
            .await,
        Err("CHAT_RATE_LIMITED".into())
    );
    // chat.send charges inside its commit transaction: refused, nothing kept.
    let stored = || async {
        let store = two.shared().accounts.store();
        store
            .chat_history(&ch2, None, 200)
            .await
            .unwrap()
            .items
            .len()
    };
    let before = stored().await;
    let failed = || {
        two.shared()
            .metrics
            .service_events(citadel_server::metrics::ServiceEvent::ChatRateLimitStorageFailed)
    };
    let failures = failed();
    assert_eq!(
        there
            .rpc("chat.send", json!({"channel_id": ch2, "content": "no"}))
            .await,
        Err("CHAT_RATE_LIMITED".into())
    );
    assert_eq!(stored().await, before);
    assert_eq!(failed(), failures + 1, "refused for the storage failure");
    assert!(
        one.shared()
            .metrics
            .service_events(citadel_server::metrics::ServiceEvent::ChatRateLimitStorageFailed)
            >= 1
    );
    one.shutdown();
    one.wait().await;
    two.shutdown();
    two.wait().await;
}

/// Every `[chat.limits]` rule trips (all at 1 per minute, join at 2), and
/// the subscription bound.
async fn each_rule_trips(url: &str, tag: &str) {
    let node = start_on(url, |c| {
        let l = &mut c.chat.limits;
        for rule in every_rule(l) {
            rule.limit = 1;
            rule.window_ms = 60_000;
        }
        l.join.limit = 2;
        c.chat.max_subscriptions_per_connection = 1;
    })
    .await;
    let mut o = player(&node, &format!("ro-{tag}")).await;
    let mut m = player(&node, &format!("rm-{tag}")).await;
    let g = o
        .rpc("groups.create", json!({"name": format!("Rules {tag}")}))
        .await
        .unwrap()["group_id"]
        .as_u64()
        .unwrap();
    o.rpc("groups.add_member", json!({"group_id": g, "user_id": m.id}))
        .await
        .unwrap();
    join(&mut o.client, "rules").await;
    let target = json!({"target": {"kind": "group", "group_id": g}});
    let ch = o.rpc("chat.join", target.clone()).await.unwrap()["channel_id"]
        .as_str()
        .unwrap()
        .to_owned();
    m.rpc("chat.join", target).await.unwrap();
    let limited = || Err::<serde_json::Value, String>("CHAT_RATE_LIMITED".into());
    assert_eq!(
        o.rpc("chat.join", json!({"target": ROOM()})).await,
        Err("CHAT_SUBSCRIPTION_LIMIT".into())
    );
    assert_eq!(
        o.rpc("chat.join", json!({"target": ROOM()})).await,
        limited(),
        "join"
    );
    let history = json!({"channel_id": ch});
    o.rpc("chat.history", history.clone()).await.unwrap();
    assert_eq!(o.rpc("chat.history", history).await, limited(), "history");
    let typing = json!({"channel_id": ch, "typing": true});
    o.rpc("chat.typing", typing.clone()).await.unwrap();
    assert_eq!(o.rpc("chat.typing", typing).await, limited(), "typing");
    let send = json!({"channel_id": ch, "content": "one"});
    let id = m.rpc("chat.send", send.clone()).await.unwrap()["message"]["id"]
        .as_u64()
        .unwrap();
    assert_eq!(
        m.rpc("chat.send", send.clone()).await,
        limited(),
        "send_user"
    );
    assert_eq!(o.rpc("chat.send", send).await, limited(), "send_channel");
    let one = json!({"channel_id": ch, "message_id": id});
    m.edit(&ch, id, "1").await.unwrap();
    assert_eq!(
        m.rpc("chat.delete", one.clone()).await,
        limited(),
        "mutation"
    );
    o.rpc("chat.moderate", one.clone()).await.unwrap();
    assert_eq!(o.rpc("chat.moderate", one).await, limited(), "moderation");
    node.shutdown();
    node.wait().await;
}

/// Concurrent senders share group commits: every send gets its own id,
/// and every subscriber sees the events in strictly increasing order.
async fn concurrent_sends(url: &str, tag: &str) {
    const SENDERS: usize = 6;
    const EACH: usize = 40;
    let node = start_on(url, |c| {
        roomy(c);
        c.transport.limits.messages_per_second = 1_000_000;
        c.transport.limits.message_burst = 1_000_000;
    })
    .await;
    let mut watcher = player(&node, &format!("cw-{tag}")).await;
    join(&mut watcher.client, "busy").await;
    let ch = watcher.join_room().await;
    let mut senders = Vec::new();
    for s in 0..SENDERS {
        let mut p = player(&node, &format!("cs{s}-{tag}")).await;
        join(&mut p.client, "busy").await;
        p.rpc("chat.join", json!({"target": ROOM()})).await.unwrap();
        senders.push(p);
    }
    let tasks: Vec<_> = senders
        .into_iter()
        .map(|mut p| {
            let ch = ch.clone();
            tokio::spawn(async move {
                let mut ids = Vec::new();
                for i in 0..EACH {
                    let r = p
                        .rpc(
                            "chat.send",
                            json!({"channel_id": ch, "content": format!("{i}")}),
                        )
                        .await
                        .unwrap();
                    assert_eq!(r["message"]["id"], r["event_id"]);
                    ids.push(r["event_id"].as_u64().unwrap());
                }
                ids
            })
        })
        .collect();
    let mut sent = Vec::new();
    for t in tasks {
        sent.extend(t.await.unwrap());
    }
    sent.sort_unstable();
    sent.dedup();
    assert_eq!(sent.len(), SENDERS * EACH, "one id per send");
    let mut seen = Vec::new();
    while seen.len() < SENDERS * EACH {
        let e = watcher.next_event().await;
        if e["type"] == "message.create" {
            seen.push(e["event_id"].as_u64().unwrap());
        }
    }
    assert!(
        seen.windows(2).all(|w| w[0] < w[1]),
        "delivered in event order"
    );
    let mut ordered = seen.clone();
    ordered.sort_unstable();
    assert_eq!(ordered, sent);
    let grouped = node
        .shared()
        .metrics
        .service_events(citadel_server::metrics::ServiceEvent::ChatCommitsGrouped);
    eprintln!(
        "{tag}: {grouped} of {} sends shared a group commit",
        SENDERS * EACH
    );
    node.shutdown();
    node.wait().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_sends_on_every_backend() {
    for backend in backends::all().await {
        concurrent_sends(&backend.url, backend.name).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_rule_trips_on_every_backend() {
    for backend in backends::all().await {
        each_rule_trips(&backend.url, backend.name).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn room_channels_on_every_backend() {
    for backend in backends::all().await {
        room_rules(&backend.url, backend.name).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn direct_and_group_channels_on_every_backend() {
    for backend in backends::all().await {
        direct_and_group_rules(&backend.url, backend.name).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_and_windows_on_every_backend() {
    for backend in backends::all().await {
        limits_and_windows(&backend.url, backend.name).await;
    }
}

#[test]
fn chat_config_keys_parse_and_validate() {
    let config = Config::from_toml_str(
        "[chat]\ntyping_ttl_ms = 2000\n[chat.limits.send_user]\nlimit = 5\nwindow_ms = 1000\n",
    )
    .unwrap();
    assert_eq!(config.chat.typing_ttl_ms, 2_000);
    assert_eq!(config.chat.limits.send_user.limit, 5);
    assert_eq!(config.chat.limits.join.limit, 12, "defaults stay");
    config.validate().unwrap();
    let bad = Config::from_toml_str("[chat.limits.join]\nlimit = 0\nwindow_ms = 1000\n").unwrap();
    assert!(
        bad.validate()
            .unwrap_err()
            .to_string()
            .contains("chat.limits.join.limit")
    );
    assert!(Config::from_toml_str("[chat]\nnope = 1\n").is_err());
}
