//! NetworkPeer (kinds 13-15) through a real node: a class registered from
//! Lua, objects spawned and written by the script, `citadel-client`
//! sessions over real sockets (WebSocket and QUIC on 127.0.0.1).
//!
//! The happy path: a Lua-spawned object reaches two sessions as a full
//! bunch, a Lua write arrives as a delta both apply and acknowledge, and an
//! owner proposal is applied and rebroadcast to the peer. The trust
//! boundary: for each §6.3 rule a client breaks it, the rejection counter
//! of that reason moves, and the server state (read back through Lua) and
//! the honest peer's view stay unchanged.

mod common;
#[path = "netpeer/lua.rs"]
mod lua;

use std::time::Duration;

use citadel_client::Envelope;
use citadel_client::netpeer::{NetworkPeerSession, Outcome};
use citadel_netpeer::{Class, ClassSpec, Cond, FieldSpec, Rejection, Value};
use citadel_server::RunningNode;
use citadel_server::metrics::CloseReason::SlowConsumer;
use citadel_wire::netpeer::{BunchBase, ClassSchema, DeltaBunch, FieldCodec, FieldValue};
use citadel_wire::protocol::{KIND_REP_ACK, KIND_REP_DELTA};
use citadel_wire::quant::ScalarCodec;
use common::{STEP, TestClient, Transport};

const SCRIPT: &str = r#"
local CLASS = 7
HASH = citadel.netpeer_register_class{
  class_id = CLASS,
  name = "Ship",
  layout_version = 1,
  fields = {
    { name = "hp", type = "int", min = 0, max = 100 },
    { name = "speed", type = "scalar", min = 0, max = 10, values_per_unit = 100, client_owned = true },
    { name = "ammo", type = "int", min = 0, max = 100, client_owned = true },
    { name = "secret", type = "int", min = 0, max = 1000, cond = "owner_only" },
  },
}
citadel.on_rpc("np", function(ctx, body)
  local op, arg = body:match("^(%w+)|?(.*)$")
  if op == "hash" then return HASH end
  if op == "spawn" then
    local id = citadel.netpeer_spawn(CLASS, {
      owner = ctx.sender, persistent = (arg == "persistent"),
      values = { hp = 50, secret = 7 },
    })
    return tostring(id)
  end
  if op == "hp" then
    local id, v = arg:match("(%d+),(%d+)")
    citadel.netpeer_set_field(tonumber(id), "hp", tonumber(v))
    return "ok"
  end
  if op == "get" then
    local o = citadel.netpeer_get(tonumber(arg))
    if o == nil then return "none" end
    local f = o.fields
    return string.format("%d,%.2f,%d,%d,%d", f.hp, f.speed, f.ammo, f.secret, o.owner)
  end
  if op == "bad" then
    local ok, e = pcall(citadel.netpeer_set_field, tonumber(arg), "nope", 1)
    local ok2, e2 = pcall(citadel.netpeer_set_field, tonumber(arg), "hp", "x")
    local ok3, e3 = pcall(citadel.netpeer_spawn, 99)
    return tostring(e) .. "|" .. tostring(e2) .. "|" .. tostring(e3)
  end
  return "?"
end)
"#;

/// The class as a client compiles it (must hash like the Lua one).
fn spec(ammo_max: i64) -> ClassSpec {
    let speed = match ScalarCodec::new(0.0, 10.0, 100) {
        Ok(c) => c,
        Err(e) => panic!("codec: {e}"),
    };
    ClassSpec {
        class_id: 7,
        layout_version: 1,
        fields: vec![
            FieldSpec::new("hp", FieldCodec::IntRange { min: 0, max: 100 }),
            FieldSpec::new("speed", FieldCodec::Scalar(speed)).client_owned(),
            FieldSpec::new(
                "ammo",
                FieldCodec::IntRange {
                    min: 0,
                    max: ammo_max,
                },
            )
            .client_owned(),
            FieldSpec::new("secret", FieldCodec::IntRange { min: 0, max: 1000 })
                .cond(Cond::OwnerOnly),
        ],
        evolution: Default::default(),
        position_field: None,
    }
}

fn schema(ammo_max: i64) -> ClassSchema {
    match Class::compile(spec(ammo_max)) {
        Ok(c) => c.current().clone(),
        Err(e) => panic!("class compiles: {e}"),
    }
}

fn session() -> NetworkPeerSession {
    let mut s = NetworkPeerSession::default();
    s.register(schema(100));
    s
}

async fn node_with(
    script: &str,
    tweak: impl FnOnce(&mut citadel_server::config::Config),
) -> RunningNode {
    common::start_scripted(&common::temp_sqlite_url(), "netpeer", script, |c| {
        c.transport.network_peer.enabled = true;
        tweak(c);
    })
    .await
}

async fn np(client: &mut TestClient, body: &str) -> String {
    rpc(client, "np", body).await
}

async fn rpc(client: &mut TestClient, method: &str, body: &str) -> String {
    let bytes = tokio::time::timeout(STEP, client.call_rpc(method, body.as_bytes()))
        .await
        .expect("reply in time")
        .expect("script answers");
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Receives kind-13 bunches into `s` (acking each applied one) until
/// `done` holds.
async fn pump(
    client: &mut TestClient,
    s: &mut NetworkPeerSession,
    done: impl Fn(&NetworkPeerSession) -> bool,
) {
    let deadline = tokio::time::Instant::now() + STEP;
    while !done(s) {
        let env = tokio::time::timeout_at(deadline, client.recv())
            .await
            .expect("bunch in time")
            .expect("recv ok")
            .expect("not closed");
        if env.kind == KIND_REP_DELTA {
            let outcome = s.handle_bunch(&env.body);
            assert!(outcome.is_ok(), "bunch applies: {outcome:?}");
            if let Some(ack) = s.poll_ack() {
                send(client, KIND_REP_ACK, ack).await;
            }
        }
    }
}

/// Asserts no kind-13 arrives for `wait` (acking nothing).
async fn no_bunch(client: &mut TestClient, wait: Duration) {
    let deadline = tokio::time::Instant::now() + wait;
    while let Ok(got) = tokio::time::timeout_at(deadline, client.recv()).await {
        let env = got.expect("recv ok").expect("not closed");
        assert_ne!(env.kind, KIND_REP_DELTA, "unexpected bunch");
    }
}

async fn send(client: &mut TestClient, kind: u16, body: Vec<u8>) {
    let env = Envelope {
        kind,
        body: body.into(),
    };
    client.send(&env).await.expect("send");
}

fn int(s: &NetworkPeerSession, object: u32, field: usize) -> Option<i64> {
    match s.state(object)?.get(field)? {
        Some(Value::Plain(FieldValue::Int(v))) => Some(*v),
        _ => None,
    }
}

fn scalar(s: &NetworkPeerSession, object: u32, field: usize) -> Option<f32> {
    match s.state(object)?.get(field)? {
        Some(Value::Plain(FieldValue::Scalar(v))) => Some(*v),
        _ => None,
    }
}

/// Two guests (owner A, peer B) holding one Lua-spawned object of A.
struct World {
    node: RunningNode,
    a: TestClient,
    b: TestClient,
    sa: NetworkPeerSession,
    sb: NetworkPeerSession,
    object: u32,
}

async fn world(
    t: Transport,
    tweak: impl FnOnce(&mut citadel_server::config::Config),
    spawn: &str,
) -> World {
    world_with(SCRIPT, t, tweak, spawn).await
}

async fn world_with(
    script: &str,
    t: Transport,
    tweak: impl FnOnce(&mut citadel_server::config::Config),
    spawn: &str,
) -> World {
    let node = node_with(script, tweak).await;
    let mut a = common::guest(&node, t).await;
    let mut b = common::guest(&node, t).await;
    let object: u32 = np(&mut a, spawn).await.parse().expect("object id");
    let (mut sa, mut sb) = (session(), session());
    pump(&mut a, &mut sa, |s| int(s, object, 3) == Some(7)).await;
    pump(&mut b, &mut sb, |s| int(s, object, 0) == Some(50)).await;
    World {
        node,
        a,
        b,
        sa,
        sb,
        object,
    }
}

fn rejected(node: &RunningNode, why: Rejection) -> u64 {
    node.shared().metrics.netpeer.rejected(why)
}

/// Sends `body` from `who` and checks that exactly the `why` counter moved
/// and neither the server (Lua read) nor the peer B changed.
async fn refused(w: &mut World, from_b: bool, body: Vec<u8>, why: Rejection) {
    let before = np(&mut w.a, &format!("get|{}", w.object)).await;
    let count = rejected(&w.node, why);
    let client = if from_b { &mut w.b } else { &mut w.a };
    send(client, KIND_REP_DELTA, body).await;
    let node = &w.node;
    common::eventually("rejection counted", || rejected(node, why) > count).await;
    assert_eq!(np(&mut w.a, &format!("get|{}", w.object)).await, before);
    no_bunch(&mut w.b, Duration::from_millis(300)).await;
}

async fn replicates_writes_and_proposals(t: Transport) {
    let mut w = world(t, |_| {}, "spawn").await;
    let o = w.object;
    // The Lua registration's hash is the one this client compiled.
    let hash: String = schema(100)
        .schema_hash()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(np(&mut w.a, "hash").await, hash);
    // Full bootstrap: hp for both, the OwnerOnly secret only for the owner.
    assert_eq!(int(&w.sa, o, 0), Some(50));
    assert_eq!(int(&w.sb, o, 0), Some(50));
    assert_eq!(int(&w.sa, o, 3), Some(7));
    assert_eq!(w.sb.state(o).and_then(|s| s.get(3).cloned()), Some(None));
    // A Lua write arrives as a delta both apply and acknowledge.
    assert_eq!(np(&mut w.a, &format!("hp|{o},61")).await, "ok");
    pump(&mut w.a, &mut w.sa, |s| int(s, o, 0) == Some(61)).await;
    pump(&mut w.b, &mut w.sb, |s| int(s, o, 0) == Some(61)).await;
    let stats = &w.node.shared().metrics.netpeer;
    common::eventually("acks advanced", || stats.event("acks_advanced") >= 4).await;
    assert!(stats.event("deltas") >= 1);
    // The owner proposes speed and ammo; B gets the rebroadcast.
    let body =
        w.sa.propose(o, &[(1, FieldValue::Scalar(2.5)), (2, FieldValue::Int(9))])
            .expect("proposal encodes");
    send(&mut w.a, KIND_REP_DELTA, body).await;
    pump(&mut w.b, &mut w.sb, |s| int(s, o, 2) == Some(9)).await;
    assert_eq!(scalar(&w.sb, o, 1), Some(2.5));
    assert_eq!(
        np(&mut w.a, &format!("get|{o}")).await,
        format!("61,2.50,9,7,{}", owner_of(&w))
    );
    // A later delta proposal is accepted too.
    let body =
        w.sa.propose(o, &[(2, FieldValue::Int(8))])
            .expect("encodes");
    send(&mut w.a, KIND_REP_DELTA, body).await;
    pump(&mut w.b, &mut w.sb, |s| int(s, o, 2) == Some(8)).await;
    assert_eq!(stats.event("proposals_applied"), 2);
    // Errors reach Lua as clear messages.
    let errors = np(&mut w.a, &format!("bad|{o}")).await;
    assert!(errors.contains("unknown field `nope`"), "{errors}");
    assert!(errors.contains("field `hp`: wrong value type"), "{errors}");
    assert!(errors.contains("netpeer: unknown class"), "{errors}");
    // /metrics shows every reason.
    let (_, text) = common::http_get(&w.node, "/metrics").await;
    for r in Rejection::ALL {
        assert!(
            text.contains(&format!(
                "citadel_netpeer_rejected_total{{reason=\"{}\"}}",
                r.as_str()
            )),
            "{}",
            r.as_str()
        );
    }
}

fn owner_of(w: &World) -> u64 {
    w.node
        .shared()
        .netpeer
        .object(w.object)
        .and_then(|o| o.owner)
        .unwrap_or(0)
}

async fn non_owner_is_refused(t: Transport) {
    let mut w = world(t, |_| {}, "spawn").await;
    let body =
        w.sb.propose(w.object, &[(2, FieldValue::Int(1))])
            .expect("encodes");
    refused(&mut w, true, body, Rejection::NotOwner).await;
}

async fn server_only_field_is_refused(t: Transport) {
    let mut w = world(t, |_| {}, "spawn").await;
    let body =
        w.sa.propose(w.object, &[(0, FieldValue::Int(99))])
            .expect("encodes");
    refused(&mut w, false, body, Rejection::NotClientOwned).await;
}

fn bunch(
    object: u32,
    result_id: u64,
    base: BunchBase,
    values: Vec<(u16, FieldValue)>,
    ammo_max: i64,
) -> Vec<u8> {
    DeltaBunch {
        object_id: object,
        result_id,
        base,
        values,
    }
    .encode(&schema(ammo_max))
    .expect("encodes")
}

async fn delta_without_binding_is_refused(t: Transport) {
    let mut w = world(t, |_| {}, "spawn").await;
    let body = bunch(
        w.object,
        3,
        BunchBase::Delta(2),
        vec![(2, FieldValue::Int(5))],
        100,
    );
    refused(&mut w, false, body, Rejection::NoBinding).await;
}

async fn stale_result_id_is_refused(t: Transport) {
    let mut w = world(t, |_| {}, "spawn").await;
    let o = w.object;
    let full = bunch(o, 10, BunchBase::Full, vec![(2, FieldValue::Int(4))], 100);
    send(&mut w.a, KIND_REP_DELTA, full).await;
    pump(&mut w.b, &mut w.sb, |s| int(s, o, 2) == Some(4)).await;
    let again = bunch(
        o,
        10,
        BunchBase::Delta(9),
        vec![(2, FieldValue::Int(6))],
        100,
    );
    refused(&mut w, false, again, Rejection::StaleResultId).await;
    let older = bunch(
        o,
        7,
        BunchBase::Delta(6),
        vec![(2, FieldValue::Int(6))],
        100,
    );
    refused(&mut w, false, older, Rejection::StaleResultId).await;
}

async fn out_of_bounds_value_is_refused(t: Transport) {
    let mut w = world(t, |_| {}, "spawn").await;
    let o = w.object;
    let full = bunch(o, 1, BunchBase::Full, vec![(2, FieldValue::Int(4))], 100);
    send(&mut w.a, KIND_REP_DELTA, full).await;
    pump(&mut w.b, &mut w.sb, |s| int(s, o, 2) == Some(4)).await;
    // Same 7-bit width, but a code above the server's max of 100.
    let cheat = bunch(
        o,
        2,
        BunchBase::Delta(1),
        vec![(2, FieldValue::Int(120))],
        127,
    );
    refused(&mut w, false, cheat, Rejection::OutOfBounds).await;
}

async fn oversize_bunch_is_refused(t: Transport) {
    let mut w = world(t, |_| {}, "spawn").await;
    let mut body = bunch(
        w.object,
        1,
        BunchBase::Full,
        vec![(2, FieldValue::Int(4))],
        100,
    );
    body.resize(65_537, 0);
    refused(&mut w, false, body, Rejection::Oversize).await;
}

async fn guest_on_persistent_object_is_refused(t: Transport) {
    let mut w = world(t, |_| {}, "spawn|persistent").await;
    let body =
        w.sa.propose(w.object, &[(2, FieldValue::Int(3))])
            .expect("encodes");
    refused(&mut w, false, body, Rejection::GuestPersistent).await;
}

async fn rate_flood_is_cut(t: Transport) {
    let mut w = world(
        t,
        |c| {
            c.transport.network_peer.max_bunches_per_sec = 5;
        },
        "spawn",
    )
    .await;
    let o = w.object;
    for i in 0..40 {
        let body =
            w.sa.propose(o, &[(2, FieldValue::Int(i % 100))])
                .expect("encodes");
        send(&mut w.a, KIND_REP_DELTA, body).await;
    }
    let node = &w.node;
    common::eventually("flood counted", || {
        rejected(node, Rejection::RateBunches)
            + node.shared().metrics.netpeer.event("proposals_applied")
            >= 40
    })
    .await;
    let applied = w.node.shared().metrics.netpeer.event("proposals_applied");
    assert!(
        (5..=7).contains(&applied),
        "applied {applied} of 40 with a 5/s bucket"
    );
    assert!(rejected(&w.node, Rejection::RateBunches) >= 33);
    // The server holds the last applied value, not the flood's last one.
    let got = np(&mut w.a, &format!("get|{o}")).await;
    let ammo: i64 = got
        .split(',')
        .nth(2)
        .and_then(|v| v.parse().ok())
        .expect("ammo");
    assert!(ammo < 10, "ammo {ammo} from a refused proposal");
}

async fn disabled_kinds_are_dropped(t: Transport) {
    let node =
        common::start_scripted(&common::temp_sqlite_url(), "netpeer-off", SCRIPT, |_| {}).await;
    let mut a = common::guest(&node, t).await;
    let m = &node.shared().metrics;
    let before = m.drops(citadel_server::metrics::DropReason::UnsupportedKind);
    send(&mut a, KIND_REP_DELTA, vec![0, 0, 0, 1, 0x80]).await;
    send(&mut a, KIND_REP_ACK, vec![0]).await;
    common::eventually("dropped as unsupported", || {
        m.drops(citadel_server::metrics::DropReason::UnsupportedKind) >= before + 2
    })
    .await;
    // Lua registration still works; spawning answers but nothing is sent.
    let id = np(&mut a, "spawn").await;
    assert!(id.parse::<u32>().is_ok(), "{id}");
    no_bunch(&mut a, Duration::from_millis(300)).await;
    assert_eq!(m.netpeer.event("fulls"), 0);
}

/// Spawns `n` objects of the script's class from Rust (the script runs
/// first, so the class is registered) and connects a joining guest.
async fn crowded(
    t: Transport,
    n: usize,
    tweak: impl FnOnce(&mut citadel_server::config::Config),
) -> (RunningNode, TestClient, TestClient, Vec<u32>) {
    let node = node_with(SCRIPT, tweak).await;
    let mut early = common::guest(&node, t).await;
    assert_eq!(np(&mut early, "hash").await.len(), 32, "class registered");
    let netpeer = node.shared().netpeer.clone();
    let ids: Vec<u32> = (0..n)
        .map(|_| netpeer.spawn(7, 0, None, false).expect("spawn"))
        .collect();
    let joiner = common::guest(&node, t).await;
    (node, early, joiner, ids)
}

/// 3 000 relevant objects with the default reliable queue (1 024
/// envelopes): the full bunches are paced (`bootstrap_per_tick`, 256), so
/// neither the connection that was there when they spawned nor the one
/// joining afterwards is closed, and both converge, including writes made
/// while their bootstrap was still going.
async fn bootstrap_of_3000_objects_is_paced(t: Transport) {
    let (node, mut early, mut joiner, ids) = crowded(t, 3_000, |c| {
        assert_eq!(c.transport.websocket.lanes.outbound_queue_capacity, 1_024);
        assert_eq!(c.transport.quic.lanes.outbound_queue_capacity, 1_024);
        assert_eq!(c.transport.network_peer.bootstrap_per_tick, 256);
    })
    .await;
    let netpeer = node.shared().netpeer.clone();
    for &id in ids.iter().step_by(3) {
        netpeer
            .set_fields(id, &[(0, FieldValue::Int(77))])
            .expect("write");
    }
    let want = |s: &NetworkPeerSession| {
        ids.iter()
            .enumerate()
            .all(|(i, &id)| int(s, id, 0) == Some(if i % 3 == 0 { 77 } else { 0 }))
    };
    let (mut se, mut sj) = (session(), session());
    pump(&mut joiner, &mut sj, want).await;
    pump(&mut early, &mut se, want).await;
    let stats = &node.shared().metrics.netpeer;
    assert!(stats.event("full_deferred") > 0, "fulls were paced");
    assert_eq!(
        stats.undelivered.load(std::sync::atomic::Ordering::Relaxed),
        0,
        "every bunch was queued"
    );
    common::eventually("nothing waits", || stats.fulls_waiting() == 0).await;
    // The gauge is per tick: on a loaded machine late acks can trip the ack
    // timeout and make it non-zero again for a tick, so /metrics is read
    // until it shows 0 (bounded).
    let deadline = tokio::time::Instant::now() + STEP;
    let text = loop {
        let (_, text) = common::http_get(&node, "/metrics").await;
        if text.contains("citadel_netpeer_fulls_waiting 0") {
            break text;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "fulls_waiting never 0 in /metrics: {text}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(text.contains("citadel_netpeer_events_total{event=\"full_deferred\"}"));
    // Both connections are still open: a write reaches both.
    netpeer
        .set_fields(ids[1], &[(0, FieldValue::Int(5))])
        .expect("write");
    pump(&mut joiner, &mut sj, |s| int(s, ids[1], 0) == Some(5)).await;
    pump(&mut early, &mut se, |s| int(s, ids[1], 0) == Some(5)).await;
    assert_eq!(node.shared().metrics.closes(SlowConsumer), 0);
}

/// The same match without pacing (`bootstrap_per_tick` at its maximum):
/// 3 000 full bunches at once would overflow the default reliable queue
/// (1 024) and close the joiner as a slow consumer; the lane room bound
/// (`lane_reserve`) sends each receiver only what its lane can take, so
/// the rest waits a tick and the joiner converges with no close.
async fn unpaced_bootstrap_is_bounded_by_lane_room(t: Transport) {
    let (node, _early, mut joiner, ids) = crowded(t, 3_000, |c| {
        c.transport.network_peer.bootstrap_per_tick = 65_536;
        assert_eq!(c.transport.network_peer.lane_reserve, 64);
    })
    .await;
    let mut sj = session();
    pump(&mut joiner, &mut sj, |s| {
        ids.iter().all(|&id| int(s, id, 0) == Some(0))
    })
    .await;
    let m = &node.shared().metrics;
    assert!(
        m.netpeer.event("lane_deferred") > 0,
        "the lane bounded a tick"
    );
    assert_eq!(
        m.netpeer.event("full_deferred"),
        0,
        "no pacing at this budget"
    );
    assert_eq!(m.closes(SlowConsumer), 0);
    let (_, text) = common::http_get(&node, "/metrics").await;
    assert!(text.contains("citadel_netpeer_events_total{event=\"lane_deferred\"}"));
}

/// A delta whose base the session does not hold reports "needs full".
#[test]
fn unknown_base_needs_full() {
    let mut s = session();
    let body = bunch(
        3,
        5,
        BunchBase::Delta(4),
        vec![(0, FieldValue::Int(1))],
        100,
    );
    assert_eq!(
        s.handle_bunch(&body),
        Ok(Outcome::NeedsFull { object_id: 3 })
    );
    assert!(s.poll_ack().is_none());
}

both_transports!(
    replicates_writes_and_proposals,
    non_owner_is_refused,
    server_only_field_is_refused,
    delta_without_binding_is_refused,
    stale_result_id_is_refused,
    out_of_bounds_value_is_refused,
    oversize_bunch_is_refused,
    guest_on_persistent_object_is_refused,
    rate_flood_is_cut,
    disabled_kinds_are_dropped,
    bootstrap_of_3000_objects_is_paced,
    unpaced_bootstrap_is_bounded_by_lane_room,
);
