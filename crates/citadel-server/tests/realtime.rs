//! The node's realtime rules over real connections on 127.0.0.1: handshake,
//! relay, rooms, RPC. Every body runs once per transport (`ws::*` and
//! `quic::*`, see `both_transports!`).

mod common;

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use citadel_client::wire::protocol::{
    self, AUTH_REASON_AUTH_FAILED, AUTH_REASON_AUTH_REQUIRED, AUTH_REASON_PROTOCOL, KIND_AUTH,
    KIND_AUTH_RESULT, KIND_PEER_POSITION, KIND_POSITION, KIND_ROOM_LEAVE,
};
use citadel_client::wire::room::{RoomCreate, RoomJoined};
use citadel_client::wire::{Envelope, WireBody};
use citadel_client::{AuthOutcome, ClientError};
use citadel_server::realm::{PolicyContext, RoomLabel, RoomPolicy};
use common::*;

async fn guests_are_accepted_and_get_distinct_nonzero_ids(t: Transport) {
    let node = start_default().await;
    let mut a = guest(&node, t).await;
    let mut b = guest(&node, t).await;
    let c = guest(&node, t).await;
    a.call_rpc("whoami", b"").await.unwrap();
    let ids: BTreeSet<String> = [
        a.call_rpc("whoami", b"").await.unwrap(),
        b.call_rpc("whoami", b"").await.unwrap(),
    ]
    .into_iter()
    .map(|r| String::from_utf8(r.to_vec()).unwrap())
    .collect();
    assert_eq!(ids.len(), 2);
    assert!(ids.iter().all(|id| !id.starts_with("0:")));
    drop(c);
}

async fn tokens_are_rejected_until_accounts_exist_and_the_connection_closes(t: Transport) {
    let node = start_default().await;
    let mut client = connect(&node, t).await;
    let outcome = client
        .authenticate(Some("some-session-token"))
        .await
        .unwrap();
    assert_eq!(
        outcome,
        AuthOutcome::Rejected {
            reason_class: AUTH_REASON_AUTH_FAILED
        }
    );
    let (code, _) = closed(&mut client).await.expect("close frame");
    assert_eq!(code, 1008);
}

async fn require_auth_refuses_guests_with_auth_required(t: Transport) {
    let mut config = test_config();
    config.transport.auth.require_auth = true;
    let node = start(config).await;
    let mut client = connect(&node, t).await;
    let outcome = client.authenticate(None).await.unwrap();
    assert_eq!(
        outcome,
        AuthOutcome::Rejected {
            reason_class: AUTH_REASON_AUTH_REQUIRED
        }
    );
    closed(&mut client).await;
}

async fn raw_first_frame(
    node: &citadel_server::RunningNode,
    t: Transport,
    first: Envelope,
) -> (TestClient, Envelope) {
    let mut client = connect(node, t).await;
    client.send(&first).await.unwrap();
    let result = recv(&mut client).await;
    (client, result)
}

async fn protocol_violations_in_the_handshake_are_rejected_then_closed(t: Transport) {
    let node = start_default().await;
    // A first frame that is not KIND_AUTH.
    let (mut client, result) =
        raw_first_frame(&node, t, Envelope::new(KIND_POSITION, vec![0; 8])).await;
    assert_eq!(result.kind, KIND_AUTH_RESULT);
    assert_eq!(
        protocol::decode_auth_result(&result.body)
            .unwrap()
            .reason_class(),
        Some(AUTH_REASON_PROTOCOL)
    );
    closed(&mut client).await;
    // An oversized token.
    let huge = vec![b'x'; node.shared().config.transport.auth.max_token_bytes + 1];
    let (mut client, result) = raw_first_frame(&node, t, Envelope::new(KIND_AUTH, huge)).await;
    assert_eq!(
        protocol::decode_auth_result(&result.body)
            .unwrap()
            .reason_class(),
        Some(AUTH_REASON_PROTOCOL)
    );
    closed(&mut client).await;
    // A duplicate KIND_AUTH after acceptance.
    let mut client = guest(&node, t).await;
    client
        .send(&Envelope::new(KIND_AUTH, Vec::new()))
        .await
        .unwrap();
    let result = recv(&mut client).await;
    assert_eq!(
        protocol::decode_auth_result(&result.body)
            .unwrap()
            .reason_class(),
        Some(AUTH_REASON_PROTOCOL)
    );
    let (code, reason) = closed(&mut client).await.expect("close frame");
    assert_eq!((code, reason.as_str()), (1008, "duplicate KIND_AUTH"));
}

async fn a_silent_connection_is_closed_after_the_handshake_timeout(t: Transport) {
    let mut config = test_config();
    config.transport.auth.handshake_timeout_ms = 200;
    let node = start(config).await;
    let mut client = connect(&node, t).await;
    let (code, reason) = closed(&mut client).await.expect("close frame");
    assert_eq!(code, 1008);
    assert!(reason.contains("handshake timeout"), "{reason}");
}

async fn frames_after_auth_in_the_same_message_wait_for_the_result(t: Transport) {
    let node = start_default().await;
    let mut peer = guest(&node, t).await;
    let mut client = connect(&node, t).await;
    client
        .send_batch(&[
            Envelope::new(KIND_AUTH, Vec::new()),
            Envelope::new(KIND_POSITION, protocol::encode_position(1.0, 2.0).to_vec()),
            Envelope::new(
                protocol::KIND_RPC_REQUEST,
                protocol::encode_rpc_request(7, "echo", b"hi"),
            ),
        ])
        .await
        .unwrap();
    let first = recv(&mut client).await;
    assert_eq!(first.kind, KIND_AUTH_RESULT, "AUTH_RESULT comes first");
    let reply = recv(&mut client).await;
    let reply = protocol::decode_rpc_response(&reply.body).unwrap();
    assert_eq!((reply.request_id, &reply.payload[..]), (7, &b"hi"[..]));
    let relayed = recv_kind(&mut peer, KIND_PEER_POSITION).await;
    assert_eq!(
        protocol::decode_position(&split(&relayed).1),
        Some((1.0, 2.0))
    );
}

async fn positions_reach_every_other_roomless_participant_but_never_the_sender(t: Transport) {
    let node = start_default().await;
    let mut a = guest(&node, t).await;
    let mut b = guest(&node, t).await;
    let mut c = guest(&node, t).await;
    a.send_position(125.0, 64.0).await.unwrap();
    for peer in [&mut b, &mut c] {
        let env = recv_kind(peer, KIND_PEER_POSITION).await;
        let (sender, payload) = split(&env);
        assert_ne!(sender, 0);
        assert_eq!(payload, protocol::encode_position(125.0, 64.0).to_vec());
    }
    assert_silent(&mut a, Duration::from_millis(300)).await;
}

async fn fifty_clients_in_five_rooms_relay_to_exactly_their_room(t: Transport) {
    let node = start_default().await;
    let mut clients = Vec::new();
    let mut room_of = Vec::new();
    for i in 0..50usize {
        let mut client = guest(&node, t).await;
        let room = format!("room-{}", i % 5);
        join(&mut client, &room).await;
        clients.push(client);
        room_of.push(i % 5);
    }
    // Every client learns its sender id through one relay round; then each
    // client sends one position carrying its index.
    let mut sender_index: HashMap<u64, usize> = HashMap::new();
    for (i, client) in clients.iter_mut().enumerate() {
        client.send_position(i as f32, 0.0).await.unwrap();
    }
    let mut received: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); 50];
    for (i, client) in clients.iter_mut().enumerate() {
        for _ in 0..9 {
            let env = recv_kind(client, KIND_PEER_POSITION).await;
            let (sender, payload) = split(&env);
            let (x, _) = protocol::decode_position(&payload).unwrap();
            let from = x as usize;
            sender_index.insert(sender, from);
            assert!(received[i].insert(from), "duplicate delivery");
        }
    }
    for i in 0..50 {
        let expected: BTreeSet<usize> = (0..50)
            .filter(|j| *j != i && room_of[*j] == room_of[i])
            .collect();
        assert_eq!(received[i], expected, "client {i}");
        assert_silent(&mut clients[i], Duration::from_millis(20)).await;
    }
    assert_eq!(sender_index.len(), 50, "50 distinct participant ids");
    let status = status_json(&node).await;
    assert_eq!(status["rooms"].as_array().unwrap().len(), 5);
    assert!(
        status["rooms"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["members"] == 10)
    );
}

async fn application_kinds_relay_reliably_and_server_kinds_are_dropped(t: Transport) {
    let node = start_default().await;
    let mut a = guest(&node, t).await;
    let mut b = guest(&node, t).await;
    a.send(&Envelope::new(100, b"chat-line".to_vec()))
        .await
        .unwrap();
    for kind in [2u16, 4, 6, 17, 18, 19, 23, 26, 27, 28, 0, 29, 99] {
        a.send(&Envelope::new(kind, vec![0; 16])).await.unwrap();
    }
    a.send(&Envelope::new(4242, b"after".to_vec()))
        .await
        .unwrap();
    let first = recv(&mut b).await;
    assert_eq!(first.kind, 100);
    assert_eq!(split(&first).1, b"chat-line");
    let second = recv(&mut b).await;
    assert_eq!((second.kind, split(&second).1), (4242, b"after".to_vec()));
    assert_silent(&mut b, Duration::from_millis(200)).await;
    let status = status_json(&node).await;
    assert_eq!(status["drops"]["server_only_kind"], 10);
    assert_eq!(status["drops"]["reserved_kind"], 3);
}

async fn rooms_join_leave_ready_and_pruning(t: Transport) {
    let node = start_default().await;
    let mut a = guest(&node, t).await;
    let mut b = guest(&node, t).await;
    let joined = join(&mut a, "lobby").await;
    assert_eq!((joined.map.as_str(), joined.mode.as_str()), ("lobby", ""));
    // Join by id lands in the same room.
    b.join_room(joined.room_id).await.unwrap();
    let b_joined = b.wait_for_room_joined().await.unwrap();
    assert_eq!(b_joined, joined);
    // MAP_READY: a stale id changes nothing, the right one counts.
    a.send_map_ready(joined.room_id + 1000).await.unwrap();
    a.send_map_ready(joined.room_id).await.unwrap();
    a.call_rpc("echo", b"sync").await.unwrap();
    let status = status_json(&node).await;
    let room = &status["rooms"][0];
    assert_eq!(
        (room["members"].as_u64(), room["ready"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(status["drops"]["stale_room_id"], 1);
    // Relay is room-scoped: a room-less client does not hear the room.
    let mut outsider = guest(&node, t).await;
    a.send_position(5.0, 5.0).await.unwrap();
    recv_kind(&mut b, KIND_PEER_POSITION).await;
    assert_silent(&mut outsider, Duration::from_millis(200)).await;
    // One room per participant: joining another leaves the first (notice first).
    let other = join(&mut b, "arena").await;
    assert_ne!(other.room_id, joined.room_id);
    // The leave notice for the old room arrived before the new JOINED.
    // (wait_for_room_joined buffered it.)
    let leave = recv_kind(&mut b, KIND_ROOM_LEAVE).await;
    assert_eq!(
        citadel_client::wire::room::RoomLeave::decode(&leave.body)
            .unwrap()
            .room_id,
        joined.room_id
    );
    // Voluntary leave is confirmed; the empty room is pruned and its name freed.
    a.leave_room(joined.room_id).await.unwrap();
    let notice = recv_kind(&mut a, KIND_ROOM_LEAVE).await;
    assert_eq!(
        citadel_client::wire::room::RoomLeave::decode(&notice.body)
            .unwrap()
            .room_id,
        joined.room_id
    );
    a.call_rpc("echo", b"sync").await.unwrap();
    let status = status_json(&node).await;
    let names: Vec<&str> = status["rooms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["arena"]);
    let again = join(&mut a, "lobby").await;
    assert!(
        again.room_id > other.room_id,
        "a fresh room, ids never reused"
    );
    // Disconnect removes presence immediately.
    drop(b);
    for _ in 0..50 {
        let status = status_json(&node).await;
        if status["rooms"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["name"] != "arena")
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("room of a disconnected member was not pruned");
}

struct ClosedAfterTwo;
impl RoomPolicy for ClosedAfterTwo {
    fn on_room_create(
        &self,
        _ctx: PolicyContext,
        params: bytes::Bytes,
    ) -> citadel_server::util::BoxFuture<RoomLabel> {
        let name = String::from_utf8_lossy(&params).into_owned();
        Box::pin(async move {
            RoomLabel {
                map: format!("{name}-map"),
                mode: "ffa".into(),
                max_players: 2,
                open: name != "closed",
            }
        })
    }
    fn on_room_join(
        &self,
        ctx: PolicyContext,
        _room_id: citadel_server::place::RoomId,
    ) -> citadel_server::util::BoxFuture<bool> {
        Box::pin(async move { ctx.participant_id != 0 })
    }
}

async fn policy_labels_max_players_and_open_are_enforced(t: Transport) {
    let node = common::builder(test_config())
        .room_policy(std::sync::Arc::new(ClosedAfterTwo))
        .start()
        .await
        .unwrap();
    let mut a = guest(&node, t).await;
    let mut b = guest(&node, t).await;
    let mut c = guest(&node, t).await;
    let joined = join(&mut a, "duel").await;
    assert_eq!(
        (joined.map.as_str(), joined.mode.as_str()),
        ("duel-map", "ffa")
    );
    assert_eq!(join(&mut b, "duel").await.room_id, joined.room_id);
    // Full: no success frame for the third.
    c.join_or_create_room("duel").await.unwrap();
    c.join_room(joined.room_id).await.unwrap();
    assert_silent(&mut c, Duration::from_millis(300)).await;
    // A closed room admits only its creator.
    let closed_room = join(&mut c, "closed").await;
    a.join_room(closed_room.room_id).await.unwrap();
    assert_silent(&mut a, Duration::from_millis(300)).await;
    assert_eq!(
        status_json(&node).await["rooms"][1]["members"],
        1,
        "closed room admits only its creator"
    );
    let status = status_json(&node).await;
    assert!(status["drops"]["room_join_refused"].as_u64().unwrap() >= 3);
}

async fn malformed_room_frames_change_nothing(t: Transport) {
    let node = start_default().await;
    let mut a = guest(&node, t).await;
    a.send(&Envelope::new(protocol::KIND_ROOM_CREATE, vec![0, 9, b'x']))
        .await
        .unwrap();
    a.send(&Envelope::new(protocol::KIND_ROOM_JOIN, vec![1, 2, 3]))
        .await
        .unwrap();
    a.send(&RoomCreate { params: Vec::new() }.to_envelope())
        .await
        .unwrap();
    let reply = a.call_rpc("echo", b"alive").await.unwrap();
    assert_eq!(&reply[..], b"alive");
    let status = status_json(&node).await;
    assert_eq!(status["rooms"].as_array().unwrap().len(), 0);
    assert_eq!(status["drops"]["malformed_body"], 2);
    assert_eq!(status["drops"]["bad_room_name"], 1);
    let _ = RoomJoined::decode(&[]).is_err();
}

async fn rpc_replies_go_to_the_caller_only_with_generic_errors(t: Transport) {
    let mut config = test_config();
    config.transport.limits.rpc_timeout_ms = 200;
    let node = start(config).await;
    let mut a = guest(&node, t).await;
    let mut b = guest(&node, t).await;
    assert_eq!(
        &a.call_rpc("echo", b"payload").await.unwrap()[..],
        b"payload"
    );
    match a.call_rpc("no.such.method", b"").await {
        Err(ClientError::Rpc { message, .. }) => assert_eq!(message, "unknown RPC method"),
        other => panic!("{other:?}"),
    }
    match a.call_rpc("fail", b"").await {
        Err(ClientError::Rpc { message, .. }) => assert_eq!(message, "RPC handler error"),
        other => panic!("{other:?}"),
    }
    match a.call_rpc("slow", b"").await {
        Err(ClientError::Rpc { message, .. }) => assert_eq!(message, "RPC handler timed out"),
        other => panic!("{other:?}"),
    }
    // Unparseable requests are dropped; the connection lives on.
    a.send(&Envelope::new(protocol::KIND_RPC_REQUEST, vec![0, 0, 0]))
        .await
        .unwrap();
    let mut bad_method = protocol::encode_rpc_request(99, "ab", b"");
    bad_method[10] = 0xFF;
    a.send(&Envelope::new(protocol::KIND_RPC_REQUEST, bad_method))
        .await
        .unwrap();
    assert_eq!(
        &a.call_rpc("echo", b"still here").await.unwrap()[..],
        b"still here"
    );
    assert_silent(&mut b, Duration::from_millis(200)).await;
    let status = status_json(&node).await;
    assert_eq!(status["drops"]["malformed_body"], 2);
    assert_eq!(status["metrics"]["rpc_errors_total"], 3);
}

both_transports!(
    guests_are_accepted_and_get_distinct_nonzero_ids,
    tokens_are_rejected_until_accounts_exist_and_the_connection_closes,
    require_auth_refuses_guests_with_auth_required,
    protocol_violations_in_the_handshake_are_rejected_then_closed,
    a_silent_connection_is_closed_after_the_handshake_timeout,
    frames_after_auth_in_the_same_message_wait_for_the_result,
    positions_reach_every_other_roomless_participant_but_never_the_sender,
    fifty_clients_in_five_rooms_relay_to_exactly_their_room,
    application_kinds_relay_reliably_and_server_kinds_are_dropped,
    rooms_join_leave_ready_and_pruning,
    policy_labels_max_players_and_open_are_enforced,
    malformed_room_frames_change_nothing,
    rpc_replies_go_to_the_caller_only_with_generic_errors,
);
