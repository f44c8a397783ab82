//! The Lua side of NetworkPeer over real sockets: the
//! `citadel.netpeer_on_proposal` veto hook (a refused ammo increase leaves
//! the server unchanged and corrects the owner; an allowed proposal applies
//! and is rebroadcast; `{ veto = { "ammo" } }` refuses ammo, applies and
//! rebroadcasts the rest and corrects the owner; a handler that raises,
//! returns garbage or a malformed veto list, or spins past `veto_budget_ms`
//! vetoes everything, fail closed, each counted), and a class with a
//! collection registered from Lua (its hash equals the Rust class's, and
//! keyed item writes from Lua converge in a client session).

use std::time::Duration;

use citadel_client::netpeer::NetworkPeerSession;
use citadel_netpeer::{Class, ClassSpec, FieldSpec, Items, TypeTag, Value};
use citadel_server::RunningNode;
use citadel_server::netpeer::VetoOutcome;
use citadel_wire::netpeer::{ClassSchema, FieldCodec, FieldValue};
use citadel_wire::protocol::{KIND_REP_ACK, KIND_REP_DELTA};

use super::common::{self, STEP, TestClient, Transport};
use super::{SCRIPT, World, int, no_bunch, np, pump, rpc, scalar, send, world_with};

/// The veto handler and a collection class on top of the shared script.
const EXTRA: &str = r#"
MODE = "ammo"
LAST = "none"
citadel.netpeer_on_proposal(function(ctx, p)
  LAST = string.format("%d,%s,%d,%d,%s", ctx.sender, tostring(ctx.user_id),
    ctx.object_id, ctx.class_id, tostring(ctx.class))
  for k, v in pairs(p) do LAST = LAST .. "," .. k .. "=" .. tostring(v) end
  if MODE == "error" then error("veto bug") end
  if MODE == "number" then return 42 end
  if MODE == "spin" then while true do end end
  if MODE == "partial" then return { veto = { "ammo" } } end
  if MODE == "hp" then return { veto = { "hp" } } end
  if MODE == "unknown" then return { veto = { "ammo", "helth" } } end
  if MODE == "list" then return { veto = "ammo" } end
  if MODE == "other" then return { "ammo" } end
  -- Refuse ammo increases (the handler reads the object through the driver).
  if p.ammo ~= nil and p.ammo > citadel.netpeer_get(ctx.object_id).fields.ammo then
    return false
  end
end)
BAG_HASH = citadel.netpeer_register_class{
  class_id = 8,
  fields = {
    { name = "level", type = "int", min = 0, max = 10 },
    { name = "items", type = "collection", max_items = 4,
      item = { type = "uint", min = 0, max = 1000 } },
  },
}
citadel.on_rpc("veto", function(ctx, body)
  if body == "last" then return LAST end
  if body == "off" then citadel.netpeer_on_proposal(nil) return "ok" end
  MODE = body
  return "ok"
end)
citadel.on_rpc("bag", function(ctx, body)
  local op, a, b, c = body:match("^(%w+)|?(%d*),?(%d*),?(%d*)$")
  if op == "hash" then return BAG_HASH end
  if op == "spawn" then return tostring(citadel.netpeer_spawn(8)) end
  if op == "set" then
    citadel.netpeer_item_set(tonumber(a), "items", tonumber(b), tonumber(c))
    return "ok"
  end
  if op == "rm" then
    return tostring(citadel.netpeer_item_remove(tonumber(a), "items", tonumber(b)))
  end
  if op == "get" then
    local items = citadel.netpeer_get(tonumber(a)).fields.items
    local keys = {}
    for k, v in pairs(items) do keys[#keys + 1] = k .. "=" .. v end
    table.sort(keys)
    return table.concat(keys, ";")
  end
  if op == "bad" then
    local id = tonumber(a)
    local _, e1 = pcall(citadel.netpeer_item_set, id, "level", 1, 1)
    local _, e2 = pcall(citadel.netpeer_item_set, id, "items", -1, 1)
    local _, e3 = pcall(citadel.netpeer_item_set, id, "items", 99, 1)
    return tostring(e1) .. "|" .. tostring(e2) .. "|" .. tostring(e3)
  end
  return "?"
end)
"#;

/// A world whose script has the veto handler, with a budget that a loaded
/// test machine meets (the spin case still runs into it).
async fn veto_world(t: Transport) -> World {
    let script = format!("{SCRIPT}{EXTRA}");
    world_with(
        &script,
        t,
        |c| c.transport.network_peer.veto_budget_ms = 300,
        "spawn",
    )
    .await
}

fn veto(node: &RunningNode, o: VetoOutcome) -> u64 {
    node.shared().metrics.netpeer.veto(o)
}

/// Receives until a full server bunch for `object` arrives at `client`
/// (the correction), applying and acking everything.
async fn correction(client: &mut TestClient, s: &mut NetworkPeerSession) {
    let deadline = tokio::time::Instant::now() + STEP;
    loop {
        let env = tokio::time::timeout_at(deadline, client.recv())
            .await
            .expect("correction in time")
            .expect("recv ok")
            .expect("not closed");
        if env.kind != KIND_REP_DELTA {
            continue;
        }
        let full = env.body.get(4).is_some_and(|b| b & 0x80 != 0);
        assert!(s.handle_bunch(&env.body).is_ok(), "bunch applies");
        if let Some(ack) = s.poll_ack() {
            send(client, KIND_REP_ACK, ack).await;
        }
        if full {
            return;
        }
    }
}

/// `get` of the world's object through Lua.
async fn get(w: &mut World) -> String {
    np(&mut w.a, &format!("get|{}", w.object)).await
}

/// Proposes `values` from the owner; asserts the server state and the
/// peer stay unchanged and the owner gets a correction.
async fn vetoed(w: &mut World, values: &[(u16, FieldValue)]) {
    let before = get(w).await;
    let body = w.sa.propose(w.object, values).expect("encodes");
    send(&mut w.a, KIND_REP_DELTA, body).await;
    correction(&mut w.a, &mut w.sa).await;
    assert_eq!(get(w).await, before, "a vetoed proposal changes nothing");
    no_bunch(&mut w.b, Duration::from_millis(200)).await;
}

pub(super) async fn lua_veto_refuses_ammo_increases(t: Transport) {
    let mut w = veto_world(t).await;
    let o = w.object;
    // Allowed: applied and rebroadcast to the peer.
    let body =
        w.sa.propose(o, &[(1, FieldValue::Scalar(2.5))])
            .expect("encodes");
    send(&mut w.a, KIND_REP_DELTA, body).await;
    pump(&mut w.b, &mut w.sb, |s| scalar(s, o, 1) == Some(2.5)).await;
    assert_eq!(veto(&w.node, VetoOutcome::Allowed), 1);
    let pid = super::owner_of(&w);
    assert_eq!(
        rpc(&mut w.a, "veto", "last").await,
        format!("{pid},nil,{o},7,Ship,speed=2.5")
    );
    // An ammo increase is refused: state unchanged, the owner corrected.
    let corrections = w.node.shared().metrics.netpeer.event("full_correction");
    vetoed(&mut w, &[(2, FieldValue::Int(9))]).await;
    assert_eq!(veto(&w.node, VetoOutcome::Vetoed), 1);
    assert_eq!(
        w.node.shared().metrics.netpeer.event("full_correction"),
        corrections + 1
    );
    assert_eq!(int(&w.sa, o, 2), Some(0), "the correction restored ammo");
    assert!(get(&mut w).await.starts_with("50,2.50,0,"));
    let (_, text) = common::http_get(&w.node, "/metrics").await;
    assert!(
        text.contains("citadel_netpeer_veto_total{outcome=\"vetoed\"} 1"),
        "{text}"
    );
    for o in VetoOutcome::ALL {
        assert!(text.contains(&format!("outcome=\"{}\"", o.as_str())));
    }
}

pub(super) async fn lua_veto_refuses_one_field_and_applies_the_rest(t: Transport) {
    let mut w = veto_world(t).await;
    let o = w.object;
    assert_eq!(rpc(&mut w.a, "veto", "partial").await, "ok");
    let corrections = w.node.shared().metrics.netpeer.event("full_correction");
    let body =
        w.sa.propose(o, &[(1, FieldValue::Scalar(2.5)), (2, FieldValue::Int(9))])
            .expect("encodes");
    send(&mut w.a, KIND_REP_DELTA, body).await;
    // The owner is corrected: its session holds the server's ammo and the
    // applied speed.
    correction(&mut w.a, &mut w.sa).await;
    assert_eq!(int(&w.sa, o, 2), Some(0), "the correction restored ammo");
    assert_eq!(scalar(&w.sa, o, 1), Some(2.5));
    // The peer gets speed, not ammo; the server holds the same.
    pump(&mut w.b, &mut w.sb, |s| scalar(s, o, 1) == Some(2.5)).await;
    assert_eq!(int(&w.sb, o, 2), Some(0));
    assert!(get(&mut w).await.starts_with("50,2.50,0,"));
    let m = &w.node.shared().metrics.netpeer;
    assert_eq!(m.event("full_correction"), corrections + 1);
    assert_eq!(veto(&w.node, VetoOutcome::Partial), 1);
    assert_eq!(veto(&w.node, VetoOutcome::Error), 0);
    let (_, text) = common::http_get(&w.node, "/metrics").await;
    assert!(
        text.contains("citadel_netpeer_veto_total{outcome=\"partial\"} 1"),
        "{text}"
    );
    // Naming a field the proposal does not change refuses nothing.
    assert_eq!(rpc(&mut w.a, "veto", "hp").await, "ok");
    let body =
        w.sa.propose(o, &[(1, FieldValue::Scalar(3.5))])
            .expect("encodes");
    send(&mut w.a, KIND_REP_DELTA, body).await;
    pump(&mut w.b, &mut w.sb, |s| scalar(s, o, 1) == Some(3.5)).await;
    assert_eq!(veto(&w.node, VetoOutcome::Allowed), 1);
    assert_eq!(
        w.node.shared().metrics.netpeer.event("full_correction"),
        corrections + 1
    );
}

pub(super) async fn lua_veto_failures_fail_closed(t: Transport) {
    let mut w = veto_world(t).await;
    let o = w.object;
    let m = &w.node.shared().metrics;
    let timeouts = m.runtime_events(citadel_server::metrics::RuntimeEvent::Timeouts);
    for (mode, outcome, speed) in [
        ("error", VetoOutcome::Error, 1.0),
        ("number", VetoOutcome::Error, 2.0),
        ("unknown", VetoOutcome::Error, 2.5),
        ("list", VetoOutcome::Error, 3.5),
        ("other", VetoOutcome::Error, 4.5),
        ("spin", VetoOutcome::Timeout, 3.0),
    ] {
        assert_eq!(rpc(&mut w.a, "veto", mode).await, "ok");
        let before = veto(&w.node, outcome);
        // Two fields: a failure refuses both, not just the one it names.
        vetoed(
            &mut w,
            &[(1, FieldValue::Scalar(speed)), (2, FieldValue::Int(0))],
        )
        .await;
        assert_eq!(veto(&w.node, outcome), before + 1, "{mode}");
    }
    assert_eq!(veto(&w.node, VetoOutcome::Error), 5);
    assert_eq!(veto(&w.node, VetoOutcome::Partial), 0);
    let m = &w.node.shared().metrics;
    common::eventually("the spin timed out in the VM", || {
        m.runtime_events(citadel_server::metrics::RuntimeEvent::Timeouts) > timeouts
    })
    .await;
    // The VM recovered: an allowed proposal applies.
    assert_eq!(rpc(&mut w.a, "veto", "ammo").await, "ok");
    let body =
        w.sa.propose(o, &[(1, FieldValue::Scalar(4.0))])
            .expect("encodes");
    send(&mut w.a, KIND_REP_DELTA, body).await;
    pump(&mut w.b, &mut w.sb, |s| scalar(s, o, 1) == Some(4.0)).await;
    // Clearing the handler returns to the synchronous path (not judged).
    assert_eq!(rpc(&mut w.a, "veto", "off").await, "ok");
    let judged: u64 = VetoOutcome::ALL.iter().map(|o| veto(&w.node, *o)).sum();
    let body =
        w.sa.propose(o, &[(2, FieldValue::Int(70))])
            .expect("encodes");
    send(&mut w.a, KIND_REP_DELTA, body).await;
    pump(&mut w.b, &mut w.sb, |s| int(s, o, 2) == Some(70)).await;
    let after: u64 = VetoOutcome::ALL.iter().map(|o| veto(&w.node, *o)).sum();
    assert_eq!(after, judged);
}

/// The bag class as a client compiles it.
fn bag_schema() -> ClassSchema {
    let spec = ClassSpec {
        class_id: 8,
        layout_version: 1,
        fields: vec![
            FieldSpec::new("level", FieldCodec::IntRange { min: 0, max: 10 }),
            FieldSpec::new(
                "items",
                FieldCodec::Collection {
                    item: Box::new(FieldCodec::IntRange { min: 0, max: 1000 }),
                    max_items: 4,
                },
            )
            .type_tag(TypeTag::Uint),
        ],
        evolution: Default::default(),
        position_field: None,
    };
    match Class::compile(spec) {
        Ok(c) => c.current().clone(),
        Err(e) => panic!("bag compiles: {e}"),
    }
}

/// The session's items of the bag, as `key → value`.
fn items(s: &NetworkPeerSession, bag: u32) -> Vec<(u64, i64)> {
    match s.state(bag).and_then(|st| st.get(1).cloned()) {
        Some(Some(Value::Collection(items))) => items
            .values()
            .map(|(k, v)| match v {
                FieldValue::Int(n) => (*k, *n),
                other => panic!("item value {other:?}"),
            })
            .collect(),
        _ => Vec::new(),
    }
}

fn server_items(node: &RunningNode, bag: u32) -> Option<Items> {
    node.shared()
        .netpeer
        .inspect(|core| core.items(bag, 1).ok().cloned())
}

pub(super) async fn lua_collection_hashes_like_rust_and_converges(t: Transport) {
    let mut w = veto_world(t).await;
    let hash: String = bag_schema()
        .schema_hash()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(rpc(&mut w.a, "bag", "hash").await, hash);
    w.sb.register(bag_schema());
    let bag: u32 = rpc(&mut w.a, "bag", "spawn").await.parse().expect("bag id");
    pump(&mut w.b, &mut w.sb, |s| s.state(bag).is_some()).await;
    assert!(items(&w.sb, bag).is_empty());
    for (key, value) in [(5, 50), (9, 90), (700, 7)] {
        assert_eq!(
            rpc(&mut w.a, "bag", &format!("set|{bag},{key},{value}")).await,
            "ok"
        );
    }
    pump(&mut w.b, &mut w.sb, |s| items(s, bag).len() == 3).await;
    // Update one, remove one: the session follows the keyed deltas.
    assert_eq!(rpc(&mut w.a, "bag", &format!("set|{bag},5,55")).await, "ok");
    assert_eq!(rpc(&mut w.a, "bag", &format!("rm|{bag},9")).await, "true");
    assert_eq!(rpc(&mut w.a, "bag", &format!("rm|{bag},9")).await, "false");
    let want = vec![(5, 55), (700, 7)];
    pump(&mut w.b, &mut w.sb, |s| {
        let mut got = items(s, bag);
        got.sort_unstable();
        got == want
    })
    .await;
    assert_eq!(
        rpc(&mut w.a, "bag", &format!("get|{bag}")).await,
        "5=55;700=7"
    );
    // Exactly the server's items, slot for slot.
    let server = server_items(&w.node, bag).expect("bag items");
    match w.sb.state(bag).and_then(|st| st.get(1).cloned()) {
        Some(Some(Value::Collection(got))) => assert_eq!(*got, server),
        other => panic!("no collection in the session: {other:?}"),
    }
    assert!(w.node.shared().metrics.netpeer.event("deltas") >= 2);
    // Bad writes raise clear messages and change nothing.
    for key in [1, 2] {
        assert_eq!(
            rpc(&mut w.a, "bag", &format!("set|{bag},{key},1")).await,
            "ok"
        );
    }
    let errors = rpc(&mut w.a, "bag", &format!("bad|{bag}")).await;
    assert!(
        errors.contains("field `level` is not a collection"),
        "{errors}"
    );
    assert!(errors.contains("an item key must be >= 0"), "{errors}");
    assert!(errors.contains("outside the field's domain"), "{errors}");
    assert_eq!(
        rpc(&mut w.a, "bag", &format!("get|{bag}")).await,
        "1=1;2=1;5=55;700=7"
    );
}

crate::both_transports!(
    lua_veto_refuses_ammo_increases,
    lua_veto_refuses_one_field_and_applies_the_rest,
    lua_veto_failures_fail_closed,
    lua_collection_hashes_like_rust_and_converges,
);
