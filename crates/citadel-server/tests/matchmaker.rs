//! The ticket matchmaker over real sockets (services.md §3): accounts only,
//! validation messages, mutual queries, counts, the handoff (MATCHED, a
//! closed room, one-time tokens, accept then ROOM_JOINED), status after a
//! reconnect, TTL expiry, disconnect removal and the rate limit. The queue
//! is in memory; accounts live in a real SQLite file.

mod common;

use std::time::Duration;

use citadel_client::wire::protocol::{
    KIND_MATCHMAKER_MATCHED, KIND_ROOM_JOINED, KIND_RPC_RESPONSE, RPC_STATUS_OK, RpcRequest,
    RpcResponse,
};
use citadel_client::wire::room::RoomJoined;
use citadel_client::wire::service::MatchmakerMatched;
use citadel_client::wire::{Envelope, WireBody};
use citadel_server::config::Config;
use citadel_server::{NodeBuilder, RunningNode};
use common::*;
use serde_json::{Value, json};

fn config() -> Config {
    let mut config = test_config();
    config.matchmaker.tick_ms = 20;
    config.matchmaker.calls_per_second = 1_000;
    config.matchmaker.call_burst = 1_000;
    config
}

async fn start_with(config: Config) -> RunningNode {
    NodeBuilder::new(config).start().await.expect("node starts")
}

struct Player {
    id: String,
    token: String,
    client: TestClient,
}

async fn player(node: &RunningNode, name: &str) -> Player {
    let (id, token) = device_account(node, name).await;
    let client = login(node, &token).await;
    Player { id, token, client }
}

use common::call_json as call;

fn ticket(query: &str, props: Value, min: u64, max: u64) -> Value {
    json!({"query": query, "properties": props, "min_count": min, "max_count": max, "ttl_ms": 60_000})
}

async fn add(p: &mut Player, body: Value) -> Result<String, String> {
    let r = call(&mut p.client, "matchmaker.add", body).await?;
    Ok(r["ticket_id"].as_str().unwrap().to_owned())
}

async fn status(p: &mut Player, id: &str) -> Result<Value, String> {
    call(&mut p.client, "matchmaker.status", json!({"ticket_id": id})).await
}

async fn matched(client: &mut TestClient) -> MatchmakerMatched {
    MatchmakerMatched::decode(&recv_kind(client, KIND_MATCHMAKER_MATCHED).await.body).unwrap()
}

#[tokio::test]
async fn accounts_only_and_request_validation() {
    let node = start_with(config()).await;
    let mut visitor = guest(&node, Transport::Ws).await;
    let mut visitor2 = guest(&node, Transport::Ws).await;
    for g in [&mut visitor, &mut visitor2] {
        assert_eq!(
            call(g, "matchmaker.add", ticket("", json!({}), 2, 2)).await,
            Err("authentication required".into())
        );
        assert_eq!(
            call(g, "party.create", json!({})).await,
            Err("authentication required".into())
        );
    }
    let mut ann = player(&node, "mm-val-ann").await;
    assert_eq!(
        call(&mut ann.client, "matchmaker.nope", json!({})).await,
        Err("unknown domain method".into())
    );
    assert_eq!(
        call(&mut ann.client, "party.nope", json!({})).await,
        Err("unknown domain method".into())
    );
    let cases = [
        (
            json!({"min_count": 1, "max_count": 2, "ttl_ms": 1}),
            "min_count must be at least 2",
        ),
        (
            json!({"min_count": 3, "max_count": 2, "ttl_ms": 1}),
            "max_count must be greater than or equal to min_count",
        ),
        (
            json!({"min_count": 2, "max_count": 2, "count_multiple": 0, "ttl_ms": 1}),
            "count_multiple must be greater than zero",
        ),
        (
            json!({"min_count": 2, "max_count": 2, "ttl_ms": 0}),
            "ttl_ms must be greater than zero",
        ),
        (
            json!({"min_count": 2, "max_count": 2, "ttl_ms": 1, "properties": {"bad key": 1}}),
            "invalid property name: bad key",
        ),
        (
            json!({"min_count": 2, "max_count": 2, "ttl_ms": 1, "properties": {"k": true}}),
            "property k must be a string or a number",
        ),
        (
            json!({"min_count": 2, "max_count": 2, "ttl_ms": 1, "query": "skill >= \"x\""}),
            "invalid match query: at byte 9: `>=` cannot compare strings (only == and !=)",
        ),
        (
            json!({"min_count": 2, "max_count": 2, "ttl_ms": 1, "query": "(a == 1"}),
            "invalid match query: at byte 7: expected `)`, found the end of the query",
        ),
        (
            json!({"min_count": 2, "max_count": 256, "ttl_ms": 1}),
            "max_count must be at most 255",
        ),
        (
            json!({"max_count": 2, "ttl_ms": 1}),
            "missing integer field: min_count",
        ),
        (
            json!({"min_count": 2, "max_count": 2, "ttl_ms": 1, "sender": "x"}),
            "invalid JSON body",
        ),
    ];
    for (body, message) in cases {
        assert_eq!(
            call(&mut ann.client, "matchmaker.add", body.clone()).await,
            Err(message.into()),
            "{body}"
        );
    }
    assert_eq!(status(&mut ann, "nope").await, Err("unknown ticket".into()));
    assert_eq!(
        status(&mut ann, "bad id!").await,
        Err("invalid ticket id".into())
    );
    assert_eq!(
        call(&mut ann.client, "matchmaker.status", json!({})).await,
        Err("missing string field: ticket_id".into())
    );
    // One queued ticket per participant; ids are 24 base64url characters.
    let id = add(&mut ann, ticket("x == 1", json!({}), 2, 2))
        .await
        .unwrap();
    assert_eq!(id.len(), 24);
    assert!(
        id.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    );
    assert_eq!(
        add(&mut ann, ticket("x == 1", json!({}), 2, 2)).await,
        Err("participant already has a queued ticket".into())
    );
    // Cancel: a stranger gets false (no leak), the owner true, then false.
    let mut ben = player(&node, "mm-val-ben").await;
    let cancel = json!({"ticket_id": id});
    assert_eq!(
        call(&mut ben.client, "matchmaker.cancel", cancel.clone()).await,
        Ok(json!({"cancelled": false}))
    );
    assert_eq!(status(&mut ben, &id).await, Err("unknown ticket".into()));
    assert_eq!(status(&mut ann, &id).await, Ok(json!({"state": "queued"})));
    assert_eq!(
        call(&mut ann.client, "matchmaker.cancel", cancel.clone()).await,
        Ok(json!({"cancelled": true}))
    );
    assert_eq!(
        call(&mut ann.client, "matchmaker.cancel", cancel).await,
        Ok(json!({"cancelled": false}))
    );
    assert_eq!(status(&mut ann, &id).await, Ok(json!({"state": "removed"})));
    let services = status_json(&node).await["service_events"].clone();
    assert_eq!(services["matchmaker_tickets_cancelled"], 1);
    assert_eq!(services["matchmaker_queued"], 0);
    assert!(services["matchmaker_refused"].as_u64().unwrap() >= 12);
}

#[tokio::test]
async fn mutual_queries_and_the_full_handoff() {
    let node = start_with(config()).await;
    let ranked = r#"mode == "ranked" AND skill >= 1200"#;
    let mut low = player(&node, "mm-mut-low").await;
    let mut high = player(&node, "mm-mut-high").await;
    let mut mid = player(&node, "mm-mut-mid").await;
    let low_id = add(
        &mut low,
        ticket(ranked, json!({"mode": "ranked", "skill": 1000}), 2, 2),
    )
    .await
    .unwrap();
    let high_id = add(
        &mut high,
        ticket(ranked, json!({"mode": "ranked", "skill": 1500}), 2, 2),
    )
    .await
    .unwrap();
    // low accepts high, high does not accept low: no match.
    assert_silent(&mut high.client, Duration::from_millis(200)).await;
    assert_eq!(
        status(&mut high, &high_id).await,
        Ok(json!({"state": "queued"}))
    );
    let mid_id = add(
        &mut mid,
        ticket(ranked, json!({"mode": "ranked", "skill": 1300}), 2, 2),
    )
    .await
    .unwrap();
    let to_high = matched(&mut high.client).await;
    let to_mid = matched(&mut mid.client).await;
    assert_eq!(to_high.ticket_id, high_id);
    assert_eq!(to_mid.ticket_id, mid_id);
    assert_eq!(to_high.match_id, to_mid.match_id);
    assert_ne!(to_high.join_token, to_mid.join_token);
    assert_eq!(
        status(&mut low, &low_id).await,
        Ok(json!({"state": "queued"}))
    );
    let s = status(&mut high, &high_id).await.unwrap();
    assert_eq!(s["state"], "matched");
    assert_eq!(s["match"]["join_token"], to_high.join_token.as_str());
    assert_eq!(s["match"]["match_id"], to_high.match_id);

    // The room is closed: a raw ROOM_JOIN with the match id is refused.
    high.client.join_room(to_high.match_id).await.unwrap();
    assert_silent(&mut high.client, Duration::from_millis(200)).await;
    let rooms = status_json(&node).await["rooms"].clone();
    let room = rooms
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == to_high.match_id)
        .unwrap()
        .clone();
    assert_eq!(room["map"], "default");
    assert_eq!(room["mode"], "matchmaker");
    assert_eq!(room["open"], false);

    // Someone else's token, or a token for someone else's ticket, fails.
    let steal = json!({"ticket_id": mid_id, "join_token": to_mid.join_token});
    assert_eq!(
        call(&mut high.client, "matchmaker.accept", steal).await,
        Err("invalid join token".into())
    );
    let wrong = json!({"ticket_id": high_id, "join_token": to_mid.join_token});
    assert_eq!(
        call(&mut high.client, "matchmaker.accept", wrong).await,
        Err("invalid join token".into())
    );

    // Accept: the reply first, then ROOM_JOINED, on the reliable lane.
    let accept = json!({"ticket_id": high_id, "join_token": to_high.join_token});
    let request = RpcRequest {
        request_id: 9_001,
        method: "matchmaker.accept".into(),
        payload: accept.to_string().into_bytes().into(),
    };
    high.client.send(&request.to_envelope()).await.unwrap();
    let first: Envelope = recv(&mut high.client).await;
    assert_eq!(first.kind, KIND_RPC_RESPONSE);
    let reply = RpcResponse::decode(&first.body).unwrap();
    assert_eq!(reply.request_id, 9_001);
    assert_eq!(reply.status, RPC_STATUS_OK);
    let body: Value = serde_json::from_slice(&reply.payload).unwrap();
    assert_eq!(
        body,
        json!({"accepted": true, "match_id": to_high.match_id})
    );
    let second = recv(&mut high.client).await;
    assert_eq!(second.kind, KIND_ROOM_JOINED);
    let joined = RoomJoined::decode(&second.body).unwrap();
    assert_eq!(joined.room_id, to_high.match_id);
    assert_eq!(
        (joined.map.as_str(), joined.mode.as_str()),
        ("default", "matchmaker")
    );

    // Redeeming twice fails.
    assert_eq!(
        call(&mut high.client, "matchmaker.accept", accept).await,
        Err("join token already used".into())
    );
    let accept_mid = json!({"ticket_id": mid_id, "join_token": to_mid.join_token});
    assert_eq!(
        call(&mut mid.client, "matchmaker.accept", accept_mid)
            .await
            .unwrap()["match_id"],
        to_mid.match_id
    );
    let joined =
        RoomJoined::decode(&recv_kind(&mut mid.client, KIND_ROOM_JOINED).await.body).unwrap();
    assert_eq!(joined.room_id, to_mid.match_id);
    let services = status_json(&node).await["service_events"].clone();
    assert_eq!(services["matchmaker_matches_formed"], 1);
    assert_eq!(services["matchmaker_tickets_formed"], 2);
    assert_eq!(services["matchmaker_accepted"], 2);
    assert_eq!(services["matchmaker_queued"], 1);
    assert!(services["matchmaker_evaluations"].as_u64().unwrap() >= 1);
    let (code, text) = http_get(&node, "/metrics").await;
    assert_eq!(code, 200);
    assert!(
        text.contains("citadel_matchmaker_queued_tickets 1"),
        "{text}"
    );
}

#[tokio::test]
async fn counts_multiples_and_oldest_first() {
    let node = start_with(config()).await;
    let mut ps = Vec::new();
    for i in 0..5 {
        ps.push(player(&node, &format!("mm-cnt-{i}")).await);
    }
    let trio = |i: usize| json!({"min_count": 3, "max_count": 4, "count_multiple": 3, "ttl_ms": 60_000, "properties": {"n": i}});
    let a = add(&mut ps[0], trio(0)).await.unwrap();
    let b = add(&mut ps[1], trio(1)).await.unwrap();
    assert_silent(&mut ps[0].client, Duration::from_millis(150)).await;
    let c = add(&mut ps[2], trio(2)).await.unwrap();
    let ids: Vec<String> = {
        let mut out = Vec::new();
        for p in ps.iter_mut().take(3) {
            out.push(matched(&mut p.client).await.ticket_id);
        }
        out
    };
    assert_eq!(ids, [a, b, c]);
    // Multiples: min 2 max 4 multiple 2 forms at 2, not earlier.
    let pair = json!({"min_count": 2, "max_count": 4, "count_multiple": 2, "ttl_ms": 60_000});
    add(&mut ps[3], pair.clone()).await.unwrap();
    add(&mut ps[4], pair).await.unwrap();
    let m3 = matched(&mut ps[3].client).await;
    let m4 = matched(&mut ps[4].client).await;
    assert_eq!(m3.match_id, m4.match_id);
}

#[tokio::test]
async fn ttl_expiry_disconnect_and_handoff_expiry() {
    let mut cfg = config();
    cfg.matchmaker.handoff_ttl_ms = 400;
    let node = start_with(cfg).await;
    let mut ann = player(&node, "mm-ttl-ann").await;
    let mut ben = player(&node, "mm-ttl-ben").await;
    // TTL: removed by the tick.
    let body = json!({"query": "x == 1", "min_count": 2, "max_count": 2, "ttl_ms": 100});
    let id = add(&mut ann, body).await.unwrap();
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert_eq!(status(&mut ann, &id).await, Ok(json!({"state": "removed"})));
    assert_eq!(
        status_json(&node).await["service_events"]["matchmaker_tickets_expired"],
        1
    );

    // Disconnect: the queued ticket goes with the connection.
    add(&mut ann, ticket("", json!({}), 2, 2)).await.unwrap();
    ann.client.close().await.unwrap();
    let shared = node.shared().clone();
    eventually("ticket removed on disconnect", || {
        shared.matchmaker.queued() == 0
    })
    .await;
    let ben_id = add(&mut ben, ticket("", json!({}), 2, 2)).await.unwrap();
    assert_silent(&mut ben.client, Duration::from_millis(150)).await;
    assert_eq!(
        status(&mut ben, &ben_id).await,
        Ok(json!({"state": "queued"}))
    );
    assert_eq!(
        status_json(&node).await["service_events"]["matchmaker_tickets_disconnected"],
        1
    );

    // Reconnect with the same account: status returns the same handoff.
    ann.client = login(&node, &ann.token).await;
    let ann_id = add(&mut ann, ticket("", json!({}), 2, 2)).await.unwrap();
    let delivered = matched(&mut ann.client).await;
    ann.client.close().await.unwrap();
    ann.client = login(&node, &ann.token).await;
    let s = status(&mut ann, &ann_id).await.unwrap();
    assert_eq!(s["state"], "matched");
    assert_eq!(s["match"]["join_token"], delivered.join_token.as_str());
    assert_eq!(s["match"]["expires_at"], delivered.expires_at);
    let accept = json!({"ticket_id": ann_id, "join_token": delivered.join_token});
    assert_eq!(
        call(&mut ann.client, "matchmaker.accept", accept)
            .await
            .unwrap()["accepted"],
        true
    );
    recv_kind(&mut ann.client, KIND_ROOM_JOINED).await;

    // Expired token.
    let ben_match = matched(&mut ben.client).await;
    tokio::time::sleep(Duration::from_millis(450)).await;
    let late = json!({"ticket_id": ben_id, "join_token": ben_match.join_token});
    assert_eq!(
        call(&mut ben.client, "matchmaker.accept", late).await,
        Err("join token expired".into())
    );
    assert!(!ben.id.is_empty());
}

#[tokio::test]
async fn an_early_leaver_does_not_take_the_match_away() {
    let mut cfg = config();
    cfg.matchmaker.handoff_ttl_ms = 1_500;
    let node = start_with(cfg).await;
    let mut ann = player(&node, "mm-early-ann").await;
    let mut ben = player(&node, "mm-early-ben").await;
    let ann_id = add(&mut ann, ticket("", json!({}), 2, 2)).await.unwrap();
    let ben_id = add(&mut ben, ticket("", json!({}), 2, 2)).await.unwrap();
    let (ann_match, ben_match) = (
        matched(&mut ann.client).await,
        matched(&mut ben.client).await,
    );
    let accept = json!({"ticket_id": ann_id, "join_token": ann_match.join_token});
    call(&mut ann.client, "matchmaker.accept", accept)
        .await
        .unwrap();
    recv_kind(&mut ann.client, KIND_ROOM_JOINED).await;
    // Ann leaves the match at once; the room is empty but Ben's token is live.
    ann.client.close().await.unwrap();
    let shared = node.shared().clone();
    let room = citadel_server::place::RoomId::new(ann_match.match_id).unwrap();
    eventually("ann detached", || {
        let rooms = shared.realm.rooms();
        rooms.iter().any(|r| r.id == room.get() && r.members == 0)
    })
    .await;
    assert!(shared.realm.room_exists(room), "held while tokens are live");
    let accept = json!({"ticket_id": ben_id, "join_token": ben_match.join_token});
    assert_eq!(
        call(&mut ben.client, "matchmaker.accept", accept)
            .await
            .unwrap()["accepted"],
        true
    );
    let joined = recv_kind(&mut ben.client, KIND_ROOM_JOINED).await;
    assert!(!joined.body.is_empty());
    // After the tokens expire the hold is released: Ben's leave removes it.
    tokio::time::sleep(Duration::from_millis(1_600)).await;
    assert!(shared.realm.room_exists(room), "occupied rooms stay");
    ben.client.close().await.unwrap();
    eventually("emptied room removed after expiry", || {
        !shared.realm.room_exists(room)
    })
    .await;
}

#[tokio::test]
async fn unaccepted_matches_are_pruned_and_the_rate_limit_holds() {
    let mut cfg = config();
    cfg.matchmaker.handoff_ttl_ms = 100;
    cfg.matchmaker.calls_per_second = 1;
    cfg.matchmaker.call_burst = 3;
    let node = start_with(cfg).await;
    let mut ann = player(&node, "mm-rl-ann").await;
    let mut ben = player(&node, "mm-rl-ben").await;
    add(&mut ann, ticket("", json!({}), 2, 2)).await.unwrap();
    add(&mut ben, ticket("", json!({}), 2, 2)).await.unwrap();
    let m = matched(&mut ann.client).await;
    let shared = node.shared().clone();
    assert!(
        shared
            .realm
            .room_exists(citadel_server::place::RoomId::new(m.match_id).unwrap())
    );
    eventually("unused matched room pruned", || {
        shared.realm.room_count() == 0
    })
    .await;
    // Spam: the burst passes, then the matchmaker limit answers.
    let mut refused = 0;
    for _ in 0..6 {
        let r = call(
            &mut ann.client,
            "matchmaker.cancel",
            json!({"ticket_id": "abc"}),
        )
        .await;
        if r == Err("matchmaker rate limit exceeded".into()) {
            refused += 1;
        }
    }
    assert!(refused >= 3, "{refused}");
    assert!(
        status_json(&node).await["service_events"]["matchmaker_rate_limited"]
            .as_u64()
            .unwrap()
            >= 3
    );
}

/// A node running `main_lua` as its script.
async fn start_lua(main_lua: &str) -> RunningNode {
    let dir = std::path::PathBuf::from(test_data_dir()).join("scripts");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("main.lua"), main_lua).unwrap();
    let mut cfg = config();
    cfg.runtime.scripts_dir = dir.display().to_string();
    cfg.runtime.deadline_ms = 200;
    start_with(cfg).await
}

async fn pair_label(node: &RunningNode, tag: &str, props: Value) -> (String, String, u64) {
    let mut ann = player(node, &format!("mm-lua-{tag}-a")).await;
    let mut ben = player(node, &format!("mm-lua-{tag}-b")).await;
    add(&mut ann, ticket("", props.clone(), 2, 2))
        .await
        .unwrap();
    add(&mut ben, ticket("", props, 2, 2)).await.unwrap();
    let m = matched(&mut ann.client).await;
    let rooms = status_json(node).await["rooms"].clone();
    let room = rooms
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == m.match_id)
        .unwrap()
        .clone();
    assert_eq!(room["open"], false, "always closed");
    (
        room["map"].as_str().unwrap().to_owned(),
        room["mode"].as_str().unwrap().to_owned(),
        room["max_players"].as_u64().unwrap(),
    )
}

#[tokio::test]
async fn lua_chooses_the_match_label_and_failures_fall_back() {
    let node = start_lua(
        r#"
        citadel.on_matchmaker_matched(function(ctx, match)
          local t = match.tickets[1]
          if t.properties.mode == "boom" then error("hook failed") end
          if t.properties.mode == "slow" then while true do end end
          if t.properties.mode == "plain" then return "arena" end
          return { map = t.properties.mode .. "-" .. #match.tickets .. "-" .. #t.user_ids,
                   mode = t.query == "" and "open" or "q", max_players = 4, open = true }
        end)
        "#,
    )
    .await;
    assert_eq!(
        pair_label(&node, "table", json!({"mode": "dust"})).await,
        ("dust-2-1".into(), "open".into(), 4)
    );
    assert_eq!(
        pair_label(&node, "string", json!({"mode": "plain"})).await,
        ("arena".into(), "matchmaker".into(), 2)
    );
    assert_eq!(
        pair_label(&node, "error", json!({"mode": "boom"})).await,
        ("default".into(), "matchmaker".into(), 2)
    );
    assert_eq!(
        pair_label(&node, "timeout", json!({"mode": "slow"})).await,
        ("default".into(), "matchmaker".into(), 2)
    );
}

/// The "complete Rust client" of docs/matchmaking.md (its `WireBody`
/// import is this file's).
async fn find_match(url: &str, token: &str) -> Result<u64, Box<dyn std::error::Error>> {
    use citadel_client::wire::protocol::KIND_MATCHMAKER_MATCHED;
    use citadel_client::wire::service::MatchmakerMatched;
    use citadel_client::{ClientError, WsClient};
    use serde_json::{Value, json};

    let (mut client, _outcome) = WsClient::connect_with_token(url, token).await?;

    // 1. Queue a ticket.
    let ticket = json!({
        "query": r#"mode == "ranked" AND skill >= 1000 AND skill <= 1600"#,
        "properties": { "mode": "ranked", "skill": 1300, "region": "eu" },
        "min_count": 2,
        "max_count": 2,
        "ttl_ms": 60_000
    });
    let reply: Value = match client
        .call_rpc("matchmaker.add", ticket.to_string().as_bytes())
        .await
    {
        Ok(bytes) => serde_json::from_slice(&bytes)?,
        Err(ClientError::Rpc { message, .. }) => return Err(message.into()), // e.g. a bad query
        Err(other) => return Err(other.into()),
    };
    let ticket_id = reply["ticket_id"].as_str().unwrap_or_default().to_owned();

    // 2. Wait for the handoff (kind 26). After a reconnect, ask
    //    matchmaker.status instead: it returns the same handoff.
    let envelope = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        client.wait_for_kind(KIND_MATCHMAKER_MATCHED),
    )
    .await??;
    let matched = MatchmakerMatched::decode(&envelope.body)?;
    assert_eq!(matched.ticket_id, ticket_id);

    // 3. Redeem the token before `expires_at`; the reply comes first,
    //    then ROOM_JOINED.
    let accept = json!({ "ticket_id": matched.ticket_id, "join_token": matched.join_token });
    client
        .call_rpc("matchmaker.accept", accept.to_string().as_bytes())
        .await?;
    let room = client.wait_for_room_joined().await?;
    // Load room.map / room.mode, then tell the room you are ready.
    client.send_map_ready(room.room_id).await?;
    Ok(room.room_id)
}

#[tokio::test]
async fn the_documented_client_finds_a_match() {
    let node = start_with(config()).await;
    let url = node.ws_url().unwrap();
    let ann = player(&node, "mm-doc-ann").await;
    let ben = player(&node, "mm-doc-ben").await;
    let (a, b) = tokio::join!(
        tokio::time::timeout(STEP, find_match(&url, &ann.token)),
        tokio::time::timeout(STEP, find_match(&url, &ben.token)),
    );
    let (a, b) = (a.unwrap().unwrap(), b.unwrap().unwrap());
    assert_eq!(a, b, "both in the same match room");
}
