//! Networked actors and transform sync over real WebSocket connections:
//! the seed 004 flow (own spawn first, then the batch, then others' spawn),
//! relay-mode movement seen through snapshots, the ownership check, room
//! scoping, despawn on disconnect and on room leave, predicted archetypes,
//! malformed bodies, server-owned NPCs (global, room-bound, patrolling);
//! on WebSocket and QUIC: a predicted avatar driven by validated input
//! (zero correction), its ROLE Assign and Handoff, the measured round trip
//! and kind-12 fire results (a hit and a miss); an avatar plus an object
//! handed over by Lua `citadel.set_owner`, both driven by one bundle per
//! step; that avatar judged by a Lua `citadel.on_input` (veto, correction,
//! a raising hook, a hook past its budget). On WebSocket: a shot from
//! beyond `fire_origin_tolerance` answered as a miss and counted in
//! /metrics.

mod common;

use std::time::{Duration, Instant};

use citadel_client::actors::{self, ActorEvent, ActorView};
use citadel_client::wire::Envelope;
use citadel_client::wire::actor::NaTransform;
use citadel_client::wire::protocol::{
    KIND_NA_SPAWN, KIND_NA_SPAWN_BATCH, KIND_TSYNC_HELLO, KIND_TSYNC_ROLE,
};
use citadel_client::wire::tsync::FireCommand;
use citadel_server::RunningNode;
use citadel_server::actors::{NpcSpawn, Patrol, WorldKey};
use citadel_server::metrics::DropReason;
use citadel_server::place::{Place, RoomId};
use common::*;

struct Player {
    client: TestClient,
    view: ActorView,
    events: Vec<ActorEvent>,
}

impl Player {
    async fn join(node: &RunningNode) -> Player {
        Player::join_on(node, Transport::Ws).await
    }

    async fn join_on(node: &RunningNode, transport: Transport) -> Player {
        let mut client = guest(node, transport).await;
        client.send(&actors::hello()).await.unwrap();
        let mut view = ActorView::new();
        let reply = recv_kind(&mut client, KIND_TSYNC_HELLO).await;
        let events = view.handle_envelope(&reply);
        assert!(matches!(events[0], ActorEvent::Negotiated(_)));
        Player {
            client,
            view,
            events: Vec::new(),
        }
    }

    async fn announce(&mut self, archetype: u16, x: f32) {
        let env = self.view.announce(archetype, at(x, 0.0));
        self.client.send(&env).await.unwrap();
    }

    /// Receives for `wait`, feeding the view and acknowledging snapshots.
    async fn pump(&mut self, wait: Duration) -> Vec<Envelope> {
        let deadline = Instant::now() + wait;
        let mut seen = Vec::new();
        while let Ok(Ok(Some(env))) = tokio::time::timeout(
            deadline.saturating_duration_since(Instant::now()),
            self.client.recv(),
        )
        .await
        {
            self.events.extend(self.view.handle_envelope(&env));
            if let Some(ack) = self.view.poll_ack() {
                self.client.send(&ack).await.unwrap();
            }
            seen.push(env);
        }
        seen
    }

    async fn pump_until(&mut self, what: &str, mut done: impl FnMut(&Player) -> bool) {
        let deadline = Instant::now() + STEP;
        while !done(self) {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            self.pump(Duration::from_millis(50)).await;
        }
    }

    fn position_of(&self, object_id: u32) -> Option<[f32; 3]> {
        self.view
            .latest()
            .and_then(|s| s.get(&object_id))
            .map(|v| v.position)
    }

    fn knows(&self, object_id: u32) -> bool {
        self.view.actors().any(|a| a.object_id == object_id)
    }
}

fn at(x: f32, y: f32) -> NaTransform {
    NaTransform {
        position: [x, y, 100.0],
        ..NaTransform::IDENTITY
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_004_flow_relay_movement_and_despawn() {
    let node = start_default().await;
    let mut a = Player::join(&node).await;
    a.announce(0, 100.0).await;
    // The owner's own spawn first, then the (empty) batch.
    let first = recv(&mut a.client).await;
    assert_eq!(first.kind, KIND_NA_SPAWN);
    a.events.extend(a.view.handle_envelope(&first));
    let batch = recv(&mut a.client).await;
    assert_eq!(batch.kind, KIND_NA_SPAWN_BATCH);
    a.events.extend(a.view.handle_envelope(&batch));
    let a_id = a
        .view
        .local_object()
        .expect("own object latched from the spawn before the batch");
    let mut b = Player::join(&node).await;
    b.announce(0, 200.0).await;
    let own = recv(&mut b.client).await;
    assert_eq!(own.kind, KIND_NA_SPAWN);
    b.view.handle_envelope(&own);
    let batch = recv(&mut b.client).await;
    assert_eq!(batch.kind, KIND_NA_SPAWN_BATCH);
    b.view.handle_envelope(&batch);
    let b_id = b.view.local_object().unwrap();
    assert_ne!(a_id, b_id);
    assert!(b.knows(a_id), "B's batch carries A's actor");
    // A hears B's spawn.
    a.pump_until("B's spawn", |p| p.knows(b_id)).await;
    assert!(
        !a.view
            .actors()
            .find(|x| x.object_id == b_id)
            .unwrap()
            .is_local
    );
    // A moves by relay; B sees it through snapshots.
    for step in 0..10 {
        a.client
            .send(&actors::state(a_id, at(100.0 + step as f32 * 50.0, 30.0)))
            .await
            .unwrap();
        a.pump(Duration::from_millis(20)).await;
    }
    b.pump_until("A's new position", |p| {
        p.position_of(a_id)
            .is_some_and(|pos| (pos[0] - 550.0).abs() < 0.2 && (pos[1] - 30.0).abs() < 0.2)
    })
    .await;
    // A forged NA_STATE (B moving A's object) changes nothing and is counted.
    let before = node.shared().metrics.drops(DropReason::ActorStateRefused);
    b.client
        .send(&actors::state(a_id, at(-9_000.0, 0.0)))
        .await
        .unwrap();
    b.pump(Duration::from_millis(300)).await;
    assert!((b.position_of(a_id).unwrap()[0] - 550.0).abs() < 0.2);
    assert_eq!(
        node.shared().metrics.drops(DropReason::ActorStateRefused),
        before + 1
    );
    // Malformed bodies are rejected and counted.
    b.client
        .send(&Envelope::new(
            citadel_client::wire::protocol::KIND_NA_PRESENCE,
            vec![0; 41],
        ))
        .await
        .unwrap();
    b.client
        .send(&Envelope::new(
            citadel_client::wire::protocol::KIND_NA_STATE,
            vec![0; 10],
        ))
        .await
        .unwrap();
    b.pump(Duration::from_millis(100)).await;
    assert!(node.shared().metrics.drops(DropReason::MalformedBody) >= 2);
    // Disconnect: A's actor despawns for B.
    drop(a);
    b.pump_until("A's despawn", |p| !p.knows(a_id)).await;
    b.pump_until("A removed from snapshots", |p| {
        p.position_of(a_id).is_none()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actors_are_room_scoped_and_leaving_the_room_despawns() {
    let node = start_default().await;
    let mut a = Player::join(&node).await;
    let mut b = Player::join(&node).await;
    let mut outsider = Player::join(&node).await;
    join(&mut a.client, "arena").await;
    join(&mut b.client, "arena").await;
    a.announce(0, 0.0).await;
    a.pump_until("own spawn", |p| p.view.local_object().is_some())
        .await;
    let a_id = a.view.local_object().unwrap();
    b.announce(0, 50.0).await;
    b.pump_until("A in B's batch", |p| p.knows(a_id)).await;
    outsider.announce(0, 0.0).await;
    outsider.pump(Duration::from_millis(400)).await;
    assert!(!outsider.knows(a_id), "another room's actor is invisible");
    assert!(outsider.position_of(a_id).is_none());
    // Leaving the room despawns A everywhere it was visible.
    let status = status_json(&node).await;
    let room_id = status["rooms"][0]["id"].as_u64().unwrap();
    a.client.leave_room(room_id).await.unwrap();
    b.pump_until("A's despawn after leave", |p| !p.knows(a_id))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn predicted_archetypes_get_their_role_and_refuse_relay_state() {
    let mut config = test_config();
    config.transform_sync.predicted_authoritative_archetypes = vec![7];
    let node = start(config).await;
    let mut a = Player::join(&node).await;
    a.announce(7, 0.0).await;
    let own = recv(&mut a.client).await;
    assert_eq!(own.kind, KIND_NA_SPAWN);
    a.view.handle_envelope(&own);
    let batch = recv(&mut a.client).await;
    assert_eq!(batch.kind, KIND_NA_SPAWN_BATCH);
    a.view.handle_envelope(&batch);
    let id = a.view.local_object().unwrap();
    let role = recv(&mut a.client).await;
    assert_eq!(role.kind, KIND_TSYNC_ROLE, "ROLE follows the self-spawn");
    let role = citadel_client::wire::tsync::RoleChange::decode(&role.body).unwrap();
    assert_eq!(
        (role.object_id, role.role, role.event),
        (
            id,
            citadel_client::wire::tsync::Role::OwnerPredicted,
            citadel_client::wire::tsync::RoleEvent::Assign
        )
    );
    let before = node.shared().metrics.drops(DropReason::ActorStateRefused);
    a.client
        .send(&actors::state(id, at(5_000.0, 0.0)))
        .await
        .unwrap();
    a.pump(Duration::from_millis(300)).await;
    assert_eq!(
        node.shared().metrics.drops(DropReason::ActorStateRefused),
        before + 1
    );
    assert!(
        (a.position_of(id).unwrap()[0]).abs() < 0.2,
        "position unchanged"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_owned_npcs_global_room_bound_and_patrolling() {
    let node = start_default().await;
    let hub = node.shared().hub.clone();
    let mut lobby = Player::join(&node).await;
    let mut roomie = Player::join(&node).await;
    join(&mut roomie.client, "dungeon").await;
    let room_id = status_json(&node).await["rooms"][0]["id"].as_u64().unwrap();
    // Late joiners get live NPCs in their batch; spawns reach present clients.
    let global = hub
        .spawn_npc(NpcSpawn {
            archetype: 0,
            position: [0.0, 0.0, 302.0],
            world: WorldKey::Global,
            patrol: Some(Patrol {
                waypoints: vec![
                    [0.0, 0.0, 302.0],
                    [500.0, 0.0, 302.0],
                    [500.0, 500.0, 302.0],
                ],
                speed: 250.0,
            }),
        })
        .unwrap();
    let boss = hub
        .spawn_npc(NpcSpawn {
            archetype: 1,
            position: [10.0, 10.0, 0.0],
            world: WorldKey::Place(Place::Room(RoomId::new(room_id).unwrap())),
            patrol: None,
        })
        .unwrap();
    lobby
        .pump_until("global NPC spawn", |p| p.knows(global))
        .await;
    roomie
        .pump_until("global and room NPC", |p| p.knows(global) && p.knows(boss))
        .await;
    lobby.pump(Duration::from_millis(200)).await;
    assert!(!lobby.knows(boss), "room NPC stays in its room");
    // The patrol moves without script code; both clients see it move.
    let start = lobby.position_of(global).map_or(0.0, |p| p[0]);
    lobby
        .pump_until("patrol progress", |p| {
            p.position_of(global).is_some_and(|q| q[0] > start + 100.0)
        })
        .await;
    roomie
        .pump_until("patrol progress (room)", |p| {
            p.position_of(global).is_some_and(|q| q[0] > 100.0)
        })
        .await;
    assert!(hub.move_npc(boss, [700.0, 0.0, 0.0], Some([10.0, 0.0, 0.0])));
    roomie
        .pump_until("boss moved", |p| {
            p.position_of(boss).is_some_and(|q| q[0] > 690.0)
        })
        .await;
    assert!(hub.despawn_npc(global));
    lobby
        .pump_until("global NPC despawn", |p| !p.knows(global))
        .await;
    roomie
        .pump_until("global NPC despawn (room)", |p| !p.knows(global))
        .await;
}

/// The player's own avatar, once a ROLE made it predicted.
fn predicted_avatar(p: &Player) -> Option<u32> {
    p.view.local_object().filter(|id| p.view.is_predicted(*id))
}

/// A player with a predicted avatar (archetype 7) at `spawn`, once its
/// ROLE Assign arrived; with its avatar's object id.
async fn predicted_player(node: &RunningNode, t: Transport, spawn: NaTransform) -> (Player, u32) {
    let mut p = Player::join_on(node, t).await;
    let env = p.view.announce(7, spawn);
    p.client.send(&env).await.unwrap();
    p.pump_until("the avatar's prediction", |p| predicted_avatar(p).is_some())
        .await;
    let id = predicted_avatar(&p).unwrap();
    (p, id)
}

/// One local step of each `(object, velocity)`, sent as one bundle.
async fn step(p: &mut Player, moves: &[(u32, [f32; 3])], fire: Option<FireCommand>) {
    for &(object_id, velocity) in moves {
        assert!(p.view.handle_input(object_id, 1.0 / 60.0, velocity, fire));
    }
    let bundle = p.view.poll_input().expect("unacknowledged input");
    p.client.send(&bundle).await.unwrap();
    p.pump(Duration::from_millis(16)).await;
}

fn corrections(p: &Player, object_id: u32) -> Vec<f32> {
    p.events
        .iter()
        .filter_map(|e| match e {
            ActorEvent::Corrected(c) if c.object_id == object_id => Some(c.magnitude),
            _ => None,
        })
        .collect()
}

/// The participant id of a player (the owner field of its own spawn).
fn participant_of(p: &Player) -> u64 {
    p.view
        .actors()
        .find(|a| a.is_local)
        .map(|a| a.owner)
        .expect("own actor spawned")
}

fn fire_results(p: &Player) -> Vec<citadel_client::wire::tsync::Rewind> {
    p.events
        .iter()
        .filter_map(|e| match e {
            ActorEvent::FireResult(r) => Some(*r),
            _ => None,
        })
        .collect()
}

async fn a_predicted_avatar_moves_by_input_and_its_shots_are_resolved(t: Transport) {
    use citadel_client::wire::tsync::{Role, RoleEvent};
    let mut config = test_config();
    config.transform_sync.predicted_authoritative_archetypes = vec![7];
    config.transport.websocket.heartbeat_interval_ms = 200;
    let node = start(config).await;
    let hub = node.shared().hub.clone();
    let (mut target, target_id) = predicted_player(&node, t, at(0.0, 0.0)).await;
    let (mut shooter, me) = predicted_player(&node, t, at(0.0, -1_000.0)).await;
    assert!(shooter.events.iter().any(|e| matches!(
        e,
        ActorEvent::Role(r) if r.object_id == me && r.role == Role::OwnerPredicted && r.event == RoleEvent::Assign
    )));

    // 30 inputs at 1 200 cm/s along x, one per 1/60 s: predicted at once,
    // applied by the server, acknowledged with zero correction.
    for _ in 0..30 {
        step(&mut shooter, &[(me, [1_200.0, 0.0, 0.0])], None).await;
    }
    shooter
        .pump_until("every input acknowledged", |p| {
            p.view.prediction(me).is_some_and(|q| q.acked() == 30)
        })
        .await;
    let predicted = shooter.view.prediction(me).unwrap().position();
    assert!((predicted[0] - 600.0).abs() < 0.01, "{predicted:?}");
    let server = shooter.position_of(me).unwrap();
    assert!(
        (server[0] - 600.0).abs() < 0.2,
        "the server moved it: {server:?}"
    );
    let corrections = corrections(&shooter, me);
    assert!(!corrections.is_empty() && corrections.iter().all(|m| *m == 0.0));

    // The transport measured the shooter's round trip.
    let pid = participant_of(&shooter);
    shooter
        .pump_until("a measured round trip", |_| hub.lag_of(pid).rtt_ms > 0.0)
        .await;
    assert!(hub.lag_of(pid).rtt_ms < 220.0);

    // The target opts in; a shot at it hits, one away from it misses.
    assert!(hub.set_hit_eligible(target_id, true));
    shooter.pump(Duration::from_millis(300)).await;
    let origin = [600.0, -1_000.0, 100.0];
    let at_target = FireCommand {
        origin,
        direction: [0.0 - 600.0, 1_000.0, 0.0],
    };
    let away = FireCommand {
        origin,
        direction: [0.0, -1.0, 0.0],
    };
    for fire in [at_target, away] {
        step(&mut shooter, &[(me, [0.0; 3])], Some(fire)).await;
    }
    shooter
        .pump_until("two fire results", |p| fire_results(p).len() >= 2)
        .await;
    let results = fire_results(&shooter);
    assert_eq!((results[0].input_seq, results[1].input_seq), (31, 32));
    assert!(results[0].is_hit() && results[0].object_id == target_id);
    assert!(!results[1].is_hit() && results[1].object_id == 0);
    assert!(
        results[0].hit_point[1] > -60.0 && results[0].hit_point[1] < 0.0,
        "the hit point is on the target's sphere: {:?}",
        results[0].hit_point
    );
    assert!(
        target
            .pump(Duration::from_millis(100))
            .await
            .iter()
            .all(|e| { e.kind != citadel_client::wire::protocol::KIND_TSYNC_REWIND }),
        "only the shooter hears its result"
    );

    // Game logic hands the target's avatar to the shooter: both hear the
    // Handoff; the shooter predicts it beside its own, the target stops.
    hub.set_owner(target_id, pid).unwrap();
    shooter
        .pump_until("the handoff", |p| p.view.is_predicted(target_id))
        .await;
    assert!(
        shooter.view.is_predicted(me),
        "its own avatar still predicted"
    );
    target
        .pump_until("the target's handoff", |p| {
            p.view.predicted_objects().next().is_none()
        })
        .await;
    let handoff = |p: &Player| {
        p.events.iter().any(|e| {
            matches!(
                e,
                ActorEvent::Role(r) if r.object_id == target_id && r.event == RoleEvent::Handoff
                    && r.owner == pid && r.ownership_epoch == 2
            )
        })
    };
    assert!(handoff(&shooter) && handoff(&target));
    assert_eq!(hub.owner_of(target_id), Some(pid));
}

/// Hands the caller a global cart spawned by the script (`cart`, then
/// `give`).
const CART_SCRIPT: &str = r#"
local cart
citadel.on_rpc("cart", function()
    cart = citadel.spawn_actor{ archetype = 5, x = 0, y = 500, z = 100 }
    return tostring(cart)
end)
citadel.on_rpc("give", function(ctx) citadel.set_owner(cart, ctx.sender) return "ok" end)
"#;

async fn an_avatar_and_a_handed_object_move_by_one_bundle_per_step(t: Transport) {
    let mut config = test_config();
    config.transform_sync.predicted_authoritative_archetypes = vec![7];
    config.runtime.scripts_dir = script_dir("view-cart", CART_SCRIPT).display().to_string();
    let node = start(config).await;
    let (mut p, me) = predicted_player(&node, t, at(0.0, 0.0)).await;
    let pid = participant_of(&p);
    p.client.call_rpc("cart", b"").await.unwrap();
    p.pump_until("the cart's spawn", |p| {
        p.view.actors().any(|a| a.archetype_id == 5)
    })
    .await;
    let cart = p
        .view
        .actors()
        .find(|a| a.archetype_id == 5)
        .unwrap()
        .object_id;
    p.client.call_rpc("give", b"").await.unwrap();
    p.pump_until("the cart's handoff", |p| p.view.is_predicted(cart))
        .await;
    assert!(p.view.is_predicted(me), "the avatar stays predicted");
    assert_eq!(node.shared().hub.owner_of(cart), Some(pid));
    // 30 steps, each one bundle with a frame for both objects.
    for _ in 0..30 {
        step(
            &mut p,
            &[(me, [1_200.0, 0.0, 0.0]), (cart, [0.0, -600.0, 0.0])],
            None,
        )
        .await;
    }
    p.pump_until("both objects' inputs acknowledged", |p| {
        [me, cart]
            .iter()
            .all(|id| p.view.prediction(*id).is_some_and(|q| q.acked() == 30))
    })
    .await;
    for (id, want) in [(me, [600.0, 0.0, 100.0]), (cart, [0.0, 200.0, 100.0])] {
        let server = p.position_of(id).unwrap();
        assert!(
            (0..3).all(|a| (server[a] - want[a]).abs() < 0.2),
            "the server moved {id}: {server:?}"
        );
        let predicted = p.view.prediction(id).unwrap().position();
        assert!(
            (0..3).all(|a| (predicted[a] - want[a]).abs() < 0.01),
            "{predicted:?}"
        );
        let c = corrections(&p, id);
        assert!(!c.is_empty() && c.iter().all(|m| *m == 0.0), "{id}: {c:?}");
    }
}

/// A movement hook: +x is vetoed, +y is corrected to a fixed point, -x
/// raises, +z spins past the budget, -y hands the object to the server
/// while correcting; `seen` reports the last ctx/frame.
const MOVEMENT_HOOK: &str = r#"
local seen = "none"
citadel.on_input(function(ctx, frame)
    seen = string.format("%d:%d:%d:%d:%.1f", ctx.sender, ctx.object_id, ctx.tick,
        frame.seq, frame.previous.position.x)
    local m = frame.move
    if m.x > 0 then return false end
    if m.y > 0 then return { position = { x = 1234, y = 567, z = 100 } } end
    if m.x < 0 then error("no walking backwards") end
    if m.z > 0 then while true do end end
    if m.y < 0 then
        citadel.set_owner(ctx.object_id, 0)
        return { position = { x = 0, y = 0, z = 100 } }
    end
    return true
end)
citadel.on_rpc("seen", function() return seen end)
"#;

async fn a_movement_hook_vetoes_corrects_and_falls_back(t: Transport) {
    use citadel_server::metrics::ServiceEvent;
    let mut config = test_config();
    config.transform_sync.predicted_authoritative_archetypes = vec![7];
    config.runtime.scripts_dir = script_dir("on-input", MOVEMENT_HOOK).display().to_string();
    // A generous wait, so a busy debug build still sees the 2 ms budget trip.
    config.runtime.on_input_wait_ms = 500;
    let node = start(config).await;
    let metrics = node.shared().metrics.clone();
    let mut p = Player::join_on(&node, t).await;
    p.announce(7, 0.0).await;
    p.pump_until("prediction", |p| {
        p.view.predicted_objects().next().is_some()
    })
    .await;
    let me = p.view.predicted_objects().next().unwrap();
    let pid = participant_of(&p);
    let mut sent = 0;
    let mut drive = async |p: &mut Player, n: u32, v: [f32; 3]| {
        for _ in 0..n {
            let env = p.view.input(me, 1.0 / 60.0, v, None).unwrap();
            p.client.send(&env).await.unwrap();
            p.pump(Duration::from_millis(16)).await;
        }
        sent += n;
        let want = sent;
        p.pump_until("every input acknowledged", |p| {
            p.view.prediction(me).is_some_and(|q| q.acked() == want)
        })
        .await;
        p.pump(Duration::from_millis(150)).await;
        p.position_of(me).unwrap()
    };
    let near =
        |got: [f32; 3], want: [f32; 3]| got.iter().zip(want).all(|(g, w)| (g - w).abs() < 0.5);

    // (a) Vetoed: consumed (acknowledged) but the avatar stays put.
    let at = drive(&mut p, 10, [1_200.0, 0.0, 0.0]).await;
    assert!(
        near(at, [0.0, 0.0, 100.0]),
        "vetoed frames moved it: {at:?}"
    );
    assert!(metrics.service_events(ServiceEvent::InputHookVetoed) >= 10);
    assert!(metrics.service_events(ServiceEvent::InputHookCalls) >= 1);
    let seen = p.client.call_rpc("seen", b"").await.unwrap();
    let seen = String::from_utf8(seen.to_vec()).unwrap();
    let fields: Vec<&str> = seen.split(':').collect();
    assert_eq!(fields[..2], [pid.to_string(), me.to_string()], "{seen}");
    assert_eq!((fields[3], fields[4]), ("10", "0.0"), "{seen}");
    assert!(
        fields[2].parse::<u64>().unwrap() > 0,
        "the server tick: {seen}"
    );

    // (b) Corrected: the snapshot shows the hook's position.
    let at = drive(&mut p, 1, [0.0, 500.0, 0.0]).await;
    assert!(near(at, [1_234.0, 567.0, 100.0]), "corrected to {at:?}");
    assert!(metrics.service_events(ServiceEvent::InputHookCorrected) >= 1);

    // (c) A raising hook: the built-in integration applies, counted.
    let errors = metrics.service_events(ServiceEvent::InputHookFallbackError);
    let at = drive(&mut p, 6, [-600.0, 0.0, 0.0]).await;
    assert!(
        near(at, [1_174.0, 567.0, 100.0]),
        "built-in after errors: {at:?}"
    );
    assert!(metrics.service_events(ServiceEvent::InputHookFallbackError) > errors);

    // (d) A hook past its budget: the built-in integration applies, counted.
    let at = drive(&mut p, 3, [0.0, 0.0, 600.0]).await;
    assert!(
        near(at, [1_174.0, 567.0, 130.0]),
        "built-in after timeouts: {at:?}"
    );
    assert!(metrics.service_events(ServiceEvent::InputHookFallbackTimeout) >= 1);
    // The spinning hook was stopped each time; the VM still serves.
    let seen = p.client.call_rpc("seen", b"").await.unwrap();
    let seen = String::from_utf8(seen.to_vec()).unwrap();
    assert_eq!(seen.split(':').nth(3), Some("20"), "{seen}");

    // (e) The hook hands the object away while judging: its verdict is
    // stale, discarded, and the object stays where it was.
    let hub = node.shared().hub.clone();
    let env = p
        .view
        .input(me, 1.0 / 60.0, [0.0, -600.0, 0.0], None)
        .unwrap();
    p.client.send(&env).await.unwrap();
    p.pump_until("the handoff to the server", |_| {
        hub.owner_of(me) == Some(0) && metrics.service_events(ServiceEvent::InputHookStale) == 1
    })
    .await;
    p.pump(Duration::from_millis(150)).await;
    let at = p.position_of(me).unwrap();
    assert!(
        near(at, [1_174.0, 567.0, 130.0]),
        "a stale verdict moved it: {at:?}"
    );
}

both_transports!(
    a_predicted_avatar_moves_by_input_and_its_shots_are_resolved,
    an_avatar_and_a_handed_object_move_by_one_bundle_per_step,
    a_movement_hook_vetoes_corrects_and_falls_back,
);

/// The `/metrics` value of one player-service event.
async fn service_metric(node: &RunningNode, event: &str) -> u64 {
    let text = http_get(node, "/metrics").await.1;
    let line = format!("citadel_service_events_total{{event=\"{event}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&line))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{line} in /metrics"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shot_from_beyond_the_origin_tolerance_is_a_counted_miss() {
    let mut config = test_config();
    config.transform_sync.predicted_authoritative_archetypes = vec![7];
    config.transform_sync.fire_origin_tolerance = 100.0;
    let node = start(config).await;
    let (_target, target_id) = predicted_player(&node, Transport::Ws, at(0.0, 0.0)).await;
    let (mut shooter, me) = predicted_player(&node, Transport::Ws, at(0.0, -1_000.0)).await;
    assert!(node.shared().hub.set_hit_eligible(target_id, true));
    shooter.pump(Duration::from_millis(300)).await;
    // Both rays point straight at the target; the first starts 500 cm in
    // front of the shooter, the second 50 cm above its position.
    let toward = [0.0, 1.0, 0.0];
    let far = FireCommand {
        origin: [0.0, -500.0, 100.0],
        direction: toward,
    };
    let near = FireCommand {
        origin: [0.0, -1_000.0, 150.0],
        direction: toward,
    };
    for fire in [far, near] {
        step(&mut shooter, &[(me, [0.0; 3])], Some(fire)).await;
    }
    shooter
        .pump_until("two fire results", |p| fire_results(p).len() >= 2)
        .await;
    let results = fire_results(&shooter);
    assert!(
        !results[0].is_hit() && results[0].object_id == 0,
        "refused: {:?}",
        results[0]
    );
    assert!(
        results[1].is_hit() && results[1].object_id == target_id,
        "within tolerance: {:?}",
        results[1]
    );
    assert_eq!(service_metric(&node, "fire_origin_refused").await, 1);
    assert_eq!(service_metric(&node, "fire_resolved").await, 2);
    assert_eq!(service_metric(&node, "fire_hits").await, 1);
}
