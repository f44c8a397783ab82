//! The actor server over simulated links with explicit time (§3.2, §3.5,
//! §3.6, §3.9, §5): presence ids and delivery order, repeated presence,
//! the ownership check of NA_STATE, roles and epochs, piggybacked acks,
//! place scoping and despawns, NPC patrols, interest transitions, and
//! snapshot ticks that never go backwards; validated owner input in
//! `input.rs`, its two-phase form for a movement hook in `movement.rs`.

mod fire;
mod handoff;
mod harness;
mod input;
mod movement;
mod predict;

use citadel_netcode::actors::{
    ActorServer, Message, NpcSpawn, Patrol, Refusal, StateRefusal, Tick, WorldKey,
};
use citadel_netcode::interest::InterestConfig;
use citadel_netcode::sim::LinkConfig;
use citadel_wire::actor::{NaDespawn, NaSpawn, NaSpawnBatch};
use citadel_wire::actor::{NaPresence, NaState};
use citadel_wire::protocol::{
    KIND_NA_DESPAWN, KIND_NA_SPAWN, KIND_NA_SPAWN_BATCH, KIND_TSYNC_HELLO, KIND_TSYNC_ROLE,
    KIND_TSYNC_SNAPSHOT,
};
use citadel_wire::tsync::{InputBundle, InputFrame, Role, RoleChange, RoleEvent, Snapshot};
use harness::{Stage, Zone, at, clean, config};

const PREDICTED: u16 = 7;

fn lossy() -> LinkConfig {
    LinkConfig {
        latency_ms: 40.0,
        jitter_ms: 30.0,
        loss: 0.15,
        duplicate: 0.05,
    }
}

fn predicted_config() -> citadel_netcode::actors::ActorConfig {
    citadel_netcode::actors::ActorConfig {
        predicted_archetypes: vec![PREDICTED],
        ..config()
    }
}

#[test]
fn presence_delivers_self_spawn_then_batch_then_role_then_the_peers_spawn() {
    let mut stage = Stage::with_clients(
        predicted_config(),
        clean(30.0),
        &[(1, Zone::Lobby), (2, Zone::Lobby), (3, Zone::Arena)],
    );
    let npc = stage
        .npc(NpcSpawn {
            archetype: 40,
            position: [0.0, 900.0, 0.0],
            world: WorldKey::Global,
            patrol: None,
        })
        .unwrap();
    stage.settle();
    for pid in [1, 2, 3] {
        assert_eq!(
            stage.peer(pid).take_kinds(),
            vec![KIND_TSYNC_HELLO, KIND_NA_SPAWN],
            "HELLO, then the global NPC's spawn for {pid}"
        );
    }
    // A relay avatar: lowest free id after the NPC, own spawn, then a batch
    // with what it can see (the global NPC), no ROLE.
    let a = stage.presence(1, 0, at(0.0, 0.0)).unwrap();
    assert_eq!((npc, a), (1, 2));
    stage.settle();
    assert_eq!(stage.peer(2).take_kinds(), vec![KIND_NA_SPAWN], "B hears A");
    let log = stage.peer(1).take_reliable();
    let kinds: Vec<u16> = log.iter().map(|e| e.kind).collect();
    assert_eq!(kinds, vec![KIND_NA_SPAWN, KIND_NA_SPAWN_BATCH]);
    let own = NaSpawn::decode(&log[0].body).unwrap();
    assert_eq!(
        (own.object_id, own.owner),
        (a, 1),
        "owner field latches the id"
    );
    let batch = NaSpawnBatch::decode(&log[1].body).unwrap();
    assert_eq!(
        batch.spawns.iter().map(|s| s.object_id).collect::<Vec<_>>(),
        vec![npc]
    );
    // A predicted avatar: own spawn, batch (A, then the NPC), ROLE Assign.
    let b = stage.presence(2, PREDICTED, at(100.0, 0.0)).unwrap();
    assert_eq!(b, 3);
    stage.settle();
    let log = stage.peer(2).take_reliable();
    let kinds: Vec<u16> = log.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        vec![KIND_NA_SPAWN, KIND_NA_SPAWN_BATCH, KIND_TSYNC_ROLE],
        "reliable order"
    );
    let batch = NaSpawnBatch::decode(&log[1].body).unwrap();
    let ids: Vec<u32> = batch.spawns.iter().map(|s| s.object_id).collect();
    assert_eq!(
        ids,
        vec![a, npc],
        "the place's actors, then the global ones"
    );
    let role = RoleChange::decode(&log[2].body).unwrap();
    assert_eq!(
        (role.object_id, role.role, role.owner, role.event),
        (b, Role::OwnerPredicted, 2, RoleEvent::Assign)
    );
    assert_eq!((role.ownership_epoch, role.gen_epoch), (1, 0));
    // Peers in the same place hear the newcomer; another place does not.
    assert_eq!(stage.peer(1).take_kinds(), vec![KIND_NA_SPAWN]);
    assert!(stage.peer(1).known.contains(&b));
    assert!(!stage.peer(3).known.contains(&a) && !stage.peer(3).known.contains(&b));
    assert!(stage.peer(3).known.contains(&npc));
}

#[test]
fn presence_needs_hello_and_a_finite_transform() {
    let mut stage = Stage::new(config(), clean(10.0));
    assert_eq!(stage.presence(1, 0, at(0.0, 0.0)), Err(Refusal::NotOptedIn));
    stage.hello(1, Zone::Lobby);
    assert_eq!(
        stage.presence(1, 0, at(f32::NAN, 0.0)),
        Err(Refusal::Malformed)
    );
    assert_eq!(stage.server.actor_count(), 0);
    assert_eq!(stage.presence(1, 0, at(0.0, 0.0)), Ok(1));
}

#[test]
fn a_repeated_presence_keeps_the_id_and_refreshes_mode_and_transform() {
    let mut stage = Stage::with_clients(
        predicted_config(),
        clean(20.0),
        &[(1, Zone::Lobby), (2, Zone::Lobby)],
    );
    let a = stage.presence(1, 0, at(0.0, 0.0)).unwrap();
    stage.settle();
    stage.peer(1).take_log();
    stage.peer(2).take_log();
    // Same place: same id, own spawn again and now a ROLE (predicted), no
    // batch; the peer hears the refreshed spawn.
    assert_eq!(stage.presence(1, PREDICTED, at(500.0, 0.0)), Ok(a));
    stage.settle();
    let log = stage.peer(1).take_reliable();
    let kinds: Vec<u16> = log.iter().map(|e| e.kind).collect();
    assert_eq!(kinds, vec![KIND_NA_SPAWN, KIND_TSYNC_ROLE]);
    let spawn = NaSpawn::decode(&log[0].body).unwrap();
    assert_eq!(
        (
            spawn.object_id,
            spawn.archetype_id,
            spawn.transform.position[0]
        ),
        (a, PREDICTED, 500.0)
    );
    assert_eq!(stage.peer(2).take_kinds(), vec![KIND_NA_SPAWN]);
    // The refreshed mode holds: relay state is refused now.
    assert_eq!(
        stage.state(1, a, at(9.0, 9.0)),
        Err(Refusal::State(StateRefusal::Predicted))
    );
    assert_eq!(stage.server.actor_count(), 1);
}

#[test]
fn na_state_moves_only_the_senders_relay_object_and_peers_see_it_through_snapshots() {
    let mut stage = Stage::with_clients(
        predicted_config(),
        lossy(),
        &[(1, Zone::Lobby), (2, Zone::Lobby), (3, Zone::Lobby)],
    );
    let a = stage.presence(1, 0, at(0.0, 0.0)).unwrap();
    let b = stage.presence(2, 0, at(50.0, 0.0)).unwrap();
    let p = stage.presence(3, PREDICTED, at(-50.0, 0.0)).unwrap();
    stage.hello(4, Zone::Lobby);
    assert_eq!(
        stage.state(4, a, at(1.0, 1.0)),
        Err(Refusal::State(StateRefusal::NoPresence))
    );
    assert_eq!(
        stage.state(2, a, at(-9_000.0, 0.0)),
        Err(Refusal::State(StateRefusal::NotOwner))
    );
    assert_eq!(
        stage.state(3, p, at(5_000.0, 0.0)),
        Err(Refusal::State(StateRefusal::Predicted))
    );
    assert_eq!(
        stage.state(1, a, at(f32::INFINITY, 0.0)),
        Err(Refusal::State(StateRefusal::NonFinite))
    );
    // The owner walks; over a lossy link the peer converges on the last
    // position, and the forged one never shows.
    for step in 0..30 {
        stage
            .state(1, a, at(100.0 + step as f32 * 10.0, 30.0))
            .unwrap();
        stage.run(2);
        if step % 10 == 0 {
            let _ = stage.state(2, a, at(-9_000.0, 0.0));
        }
    }
    stage.run(60);
    let seen = stage.peer(2).position(a).unwrap();
    assert!(
        (seen[0] - 390.0).abs() < 0.2 && (seen[1] - 30.0).abs() < 0.2,
        "{seen:?}"
    );
    let own = stage.peer(2).position(b).unwrap();
    assert!((own[0] - 50.0).abs() < 0.2);
    let predicted = stage.peer(1).position(p).unwrap();
    assert!(
        (predicted[0] + 50.0).abs() < 0.2,
        "the predicted avatar stayed put"
    );
}

#[test]
fn the_owner_holds_its_role_and_its_snapshots_carry_last_input_seq() {
    let mut stage = Stage::with_clients(
        predicted_config(),
        clean(25.0),
        &[(1, Zone::Lobby), (2, Zone::Lobby)],
    );
    let p = stage.presence(1, PREDICTED, at(0.0, 0.0)).unwrap();
    let r = stage.presence(2, 0, at(70.0, 0.0)).unwrap();
    stage.run(30);
    let roles = stage.peer(1).roles();
    assert_eq!(roles.len(), 1, "one Assign, nothing for the relay peer");
    assert_eq!(
        (roles[0].object_id, roles[0].event, roles[0].ownership_epoch),
        (p, RoleEvent::Assign, 1)
    );
    assert!(
        stage.peer(2).roles().is_empty(),
        "relay presences get no ROLE"
    );
    // Nothing moves, yet every snapshot to the owner carries its own
    // object with the input watermark; the peer's never do.
    let own = stage.peer(1).snapshots();
    assert!(own.len() >= 8);
    for snapshot in &own {
        let entry = snapshot.updates.iter().find(|u| u.object_id == p).unwrap();
        assert_eq!(entry.last_input_seq, Some(0));
    }
    let peer = stage.peer(2).snapshots();
    assert!(
        peer.iter()
            .flat_map(|s| &s.updates)
            .all(|u| u.last_input_seq.is_none())
    );
    assert!(
        peer.iter()
            .flat_map(|s| &s.updates)
            .any(|u| u.object_id == p)
    );
    assert_eq!(stage.server.presence_of(2), Some(r));
}

#[test]
fn acks_move_the_base_and_a_repeated_hello_starts_over_from_a_full_snapshot() {
    let mut stage = Stage::new(config(), clean(20.0));
    stage.hello(1, Zone::Lobby);
    let a = stage.presence(1, 0, at(0.0, 0.0)).unwrap();
    for step in 0..10 {
        stage.state(1, a, at(step as f32 * 10.0, 0.0)).unwrap();
        stage.run(3);
    }
    let snapshots = stage.peer(1).snapshots();
    assert_eq!(snapshots[0].base_snapshot_id, 0);
    assert!(
        snapshots.last().unwrap().base_snapshot_id > 0,
        "kind-10 acks confirmed a base"
    );
    stage.peer(1).take_log();
    // A repeated HELLO: the next snapshot is against base 0 again.
    stage.hello(1, Zone::Lobby);
    stage.state(1, a, at(10.0, 0.0)).unwrap();
    stage.run(8);
    assert_eq!(stage.peer(1).log[0].kind, KIND_TSYNC_HELLO);
    // (A snapshot sent before the HELLO may still arrive after it.)
    let after = stage.peer(1).snapshots();
    let reset = after
        .iter()
        .find(|s| s.base_snapshot_id == 0)
        .expect("baselines forgotten: a full snapshot follows the HELLO");
    assert!(
        reset
            .updates
            .iter()
            .any(|u| u.object_id == a && u.rotation.is_some())
    );
}

/// The snapshot bodies a server queued, draining every output.
fn snapshot_bases(server: &mut ActorServer<Zone>) -> Vec<u32> {
    let codec = server.config().hello.codec().unwrap();
    let mut bases = Vec::new();
    while let Some(out) = server.poll_output() {
        if let Message::Snapshot(body) = out.message {
            bases.push(Snapshot::decode(&body, &codec).unwrap().base_snapshot_id);
        }
    }
    bases
}

#[test]
fn the_ack_inside_an_input_bundle_confirms_a_base_and_the_frames_are_unserved() {
    // No kind-10 acks at all: only the bundle's ack can confirm a base.
    let mut server = ActorServer::new(config()).unwrap();
    server.handle_hello(1, Zone::Lobby, Tick(0));
    let presence = NaPresence {
        archetype_id: 0,
        transform: at(0.0, 0.0),
    };
    let a = server.handle_presence(1, &presence, Tick(0)).unwrap();
    let walk = |server: &mut ActorServer<Zone>, x: f32, tick: u64| {
        let state = NaState {
            object_id: a,
            transform: at(x, 0.0),
        };
        server.handle_state(1, &state, Tick(tick - 1)).unwrap();
        server.handle_tick(Tick(tick));
        snapshot_bases(server)
    };
    assert_eq!(walk(&mut server, 10.0, 3), vec![0], "snapshot 1, full");
    assert_eq!(
        walk(&mut server, 20.0, 6),
        vec![0],
        "snapshot 2, still full"
    );
    let bundle = |acked: u32, frames: usize| InputBundle {
        acked_snapshot_id: acked,
        last_seen_snapshot_id: acked,
        frames: vec![InputFrame::default(); frames],
    };
    let outcome = server.handle_input(1, &bundle(2, 2), Tick(6));
    assert!(outcome.acked);
    assert_eq!(
        outcome.refused(citadel_netcode::actors::InputRefusal::NotOwner),
        2,
        "frames for object 0, which 1 does not own, are refused"
    );
    assert_eq!(outcome.unserved, 2);
    assert!(
        !server.handle_input(9, &bundle(2, 0), Tick(6)).acked,
        "not opted in"
    );
    assert!(
        !server.handle_input(1, &bundle(0, 1), Tick(6)).acked,
        "0 is no ack"
    );
    assert_eq!(
        walk(&mut server, 30.0, 9),
        vec![2],
        "a delta against snapshot 2"
    );
}

/// Reliable kinds and their object ids (spawns, despawns) from a log.
fn reliable(log: &[citadel_wire::Envelope]) -> Vec<(u16, u32)> {
    log.iter()
        .filter_map(|e| match e.kind {
            KIND_NA_SPAWN => Some((e.kind, NaSpawn::decode(&e.body).unwrap().object_id)),
            KIND_NA_DESPAWN => Some((e.kind, NaDespawn::decode(&e.body).unwrap().object_id)),
            KIND_NA_SPAWN_BATCH => Some((e.kind, 0)),
            _ => None,
        })
        .collect()
}

#[test]
fn leaving_a_place_and_disconnecting_despawn_for_exactly_the_peers_that_saw_it() {
    let mut stage = Stage::with_clients(
        config(),
        clean(30.0),
        &[(1, Zone::Arena), (2, Zone::Arena), (3, Zone::Lobby)],
    );
    let a = stage.presence(1, 0, at(0.0, 0.0)).unwrap();
    let b = stage.presence(2, 0, at(10.0, 0.0)).unwrap();
    let c = stage.presence(3, 0, at(20.0, 0.0)).unwrap();
    assert_eq!((a, b, c), (1, 2, 3), "lowest free ids");
    stage.settle();
    for pid in [1, 2, 3] {
        stage.peer(pid).take_log();
    }
    // A moves to the lobby: B drops A; A drops itself and B (the old
    // place's actors); the lobby hears nothing until A announces again.
    stage.place_change(1, Zone::Lobby);
    stage.settle();
    assert_eq!(
        reliable(&stage.peer(1).take_log()),
        vec![(KIND_NA_DESPAWN, a), (KIND_NA_DESPAWN, b)]
    );
    assert_eq!(
        reliable(&stage.peer(2).take_log()),
        vec![(KIND_NA_DESPAWN, a)]
    );
    assert!(reliable(&stage.peer(3).take_log()).is_empty());
    assert!(stage.peer(1).known.is_empty());
    // Announcing in the lobby reuses the freed lowest id; the batch has C.
    assert_eq!(stage.presence(1, 0, at(0.0, 0.0)), Ok(a));
    stage.settle();
    assert_eq!(
        reliable(&stage.peer(1).take_log()),
        vec![(KIND_NA_SPAWN, a), (KIND_NA_SPAWN_BATCH, 0)]
    );
    assert_eq!(stage.peer(1).known, [a, c].into());
    assert_eq!(
        reliable(&stage.peer(3).take_log()),
        vec![(KIND_NA_SPAWN, a)]
    );
    // Snapshots follow the place: A now holds C and never B.
    stage.run(20);
    assert!(stage.peer(1).position(c).is_some());
    assert!(stage.peer(1).position(b).is_none());
    // Disconnect: only the lobby peer hears the despawn.
    stage.disconnect(1);
    stage.settle();
    assert_eq!(
        reliable(&stage.peer(3).take_log()),
        vec![(KIND_NA_DESPAWN, a)]
    );
    assert!(reliable(&stage.peer(2).take_log()).is_empty());
    stage.run(20);
    assert!(
        stage.peer(3).position(a).is_none(),
        "removed from snapshots"
    );
    assert_eq!(stage.server.client_count(), 2);
    assert_eq!(stage.server.actor_count(), 2);
}

#[test]
fn a_patrol_walks_its_loop_at_its_speed_and_clients_see_it() {
    let mut stage = Stage::new(config(), lossy());
    stage.hello(1, Zone::Lobby);
    let patrol = Patrol {
        waypoints: vec![[0.0, 0.0, 0.0], [600.0, 0.0, 0.0], [600.0, 600.0, 0.0]],
        speed: 300.0,
    };
    let spawn = |patrol| NpcSpawn {
        archetype: 3,
        position: [0.0, 0.0, 0.0],
        world: WorldKey::Global,
        patrol,
    };
    let npc = stage.npc(spawn(Some(patrol))).unwrap();
    let idle = stage
        .npc(spawn(Some(Patrol {
            waypoints: vec![[900.0, 0.0, 0.0]],
            speed: f32::NAN,
        })))
        .unwrap();
    let nan = NpcSpawn {
        position: [f32::NAN, 0.0, 0.0],
        ..spawn(None)
    };
    assert_eq!(stage.npc(nan), None);
    let x = |stage: &Stage| stage.server.npc_transform(npc).unwrap().position;
    // Tick 1 reaches the first waypoint (it starts there); then 300 cm/s.
    stage.run(1);
    stage.run(60);
    assert!((x(&stage)[0] - 300.0).abs() < 0.5, "{:?}", x(&stage));
    stage.run(60);
    assert!((x(&stage)[0] - 600.0).abs() < 0.5 && x(&stage)[1].abs() < 6.0);
    stage.run(61);
    let at_corner = x(&stage);
    assert!((at_corner[0] - 600.0).abs() < 0.5 && (at_corner[1] - 300.0).abs() < 6.0);
    let velocity = stage.server.npc_transform(npc).unwrap().velocity;
    assert!(
        (velocity[1] - 300.0).abs() < 0.01,
        "velocity replicated: {velocity:?}"
    );
    // The loop closes: from the last corner back toward the first waypoint.
    stage.run(60 + 85);
    let back = x(&stage);
    assert!(
        (200.0..400.0).contains(&back[0]) && (200.0..400.0).contains(&back[1]),
        "halfway home on the diagonal: {back:?}"
    );
    // A NaN speed is no patrol: that NPC never moved.
    assert_eq!(stage.server.npc_transform(idle).unwrap().position, [0.0; 3]);
    // The client follows the patrol over the lossy link (a few snapshots
    // behind at most).
    let seen = stage.peer(1).position(npc).unwrap();
    let truth = x(&stage);
    let drift = (seen[0] - truth[0]).abs() + (seen[1] - truth[1]).abs();
    assert!(drift < 200.0, "seen {seen:?}, server {truth:?}");
    // Moves and despawns by game logic; a still NPC converges exactly.
    assert!(
        stage
            .server
            .handle_npc_move(idle, [5.0, 5.0, 0.0], None, stage.now)
    );
    stage.run(60);
    let still = stage.peer(1).position(idle).unwrap();
    assert!((still[0] - 5.0).abs() < 0.2 && (still[1] - 5.0).abs() < 0.2);
    assert!(
        !stage
            .server
            .handle_npc_move(idle, [f32::NAN, 0.0, 0.0], None, stage.now)
    );
    assert!(!stage.server.handle_npc_move(99, [0.0; 3], None, stage.now));
    assert!(stage.server.handle_npc_despawn(npc, stage.now));
    assert!(!stage.server.handle_npc_despawn(npc, stage.now));
    stage.route();
    stage.settle();
    assert!(!stage.peer(1).known.contains(&npc));
    assert!(stage.peer(1).known.contains(&idle));
}

#[test]
fn interest_sends_enter_before_the_full_entry_and_exit_with_the_removal() {
    let aoi = citadel_netcode::actors::ActorConfig {
        interest: Some(InterestConfig {
            cell_size: 500.0,
            inner: 1_000.0,
            outer: 1_500.0,
        }),
        ..config()
    };
    let mut stage = Stage::new(aoi, clean(25.0));
    stage.hello(1, Zone::Lobby);
    let me = stage.presence(1, 0, at(0.0, 0.0)).unwrap();
    // A guard pacing between 500 cm and 3 000 cm at 1 000 cm/s.
    let guard = stage
        .npc(NpcSpawn {
            archetype: 9,
            position: [500.0, 0.0, 0.0],
            world: WorldKey::Place(Zone::Lobby),
            patrol: Some(Patrol {
                waypoints: vec![[500.0, 0.0, 0.0], [3_000.0, 0.0, 0.0]],
                speed: 1_000.0,
            }),
        })
        .unwrap();
    // Record, per tick, the relevancy events and whether the guard is held.
    let mut events: Vec<(u32, RoleEvent)> = Vec::new();
    let mut held = Vec::new();
    for _ in 0..400 {
        stage.step();
        let log = stage.peer(1).take_log();
        for (i, e) in log.iter().enumerate() {
            if e.kind != KIND_TSYNC_ROLE {
                continue;
            }
            let role = RoleChange::decode(&e.body).unwrap();
            events.push((role.object_id, role.event));
            if role.object_id == guard && role.event == RoleEvent::RelevancyEnter {
                // The entry that follows is full (position and rotation).
                let codec = stage.server.config().hello.codec().unwrap();
                let next = log[i + 1..]
                    .iter()
                    .find(|n| n.kind == KIND_TSYNC_SNAPSHOT)
                    .expect("the snapshot arrives with its ROLE");
                let snap = Snapshot::decode(&next.body, &codec).unwrap();
                let entry = snap.updates.iter().find(|u| u.object_id == guard).unwrap();
                assert!(entry.position.is_some() && entry.rotation.is_some());
                assert_eq!(role.role, Role::ServerSimulated);
            }
            if role.event == RoleEvent::RelevancyExit {
                let codec = stage.server.config().hello.codec().unwrap();
                let next = log[i + 1..]
                    .iter()
                    .find(|n| n.kind == KIND_TSYNC_SNAPSHOT)
                    .expect("the snapshot arrives with its ROLE");
                let snap = Snapshot::decode(&next.body, &codec).unwrap();
                assert!(snap.removed.contains(&role.object_id));
            }
        }
        held.push(stage.peer(1).position(guard).is_some());
    }
    assert_eq!(
        events[0],
        (me, RoleEvent::RelevancyEnter),
        "own object, pinned"
    );
    let guard_events: Vec<RoleEvent> = events
        .iter()
        .filter(|(id, _)| *id == guard)
        .map(|(_, e)| *e)
        .collect();
    assert!(guard_events.len() >= 3, "{guard_events:?}");
    for (i, e) in guard_events.iter().enumerate() {
        let expected = if i % 2 == 0 {
            RoleEvent::RelevancyEnter
        } else {
            RoleEvent::RelevancyExit
        };
        assert_eq!(*e, expected, "enter and exit alternate: {guard_events:?}");
    }
    assert!(held.contains(&true) && held.contains(&false));
    assert!(
        !events
            .iter()
            .any(|(id, e)| *id == me && *e == RoleEvent::RelevancyExit)
    );
}

#[test]
fn snapshot_ticks_never_go_backwards_when_the_last_actor_despawns() {
    let mut stage = Stage::new(config(), clean(10.0));
    stage.hello(1, Zone::Lobby);
    let npc = stage
        .npc(NpcSpawn {
            archetype: 1,
            position: [0.0; 3],
            world: WorldKey::Place(Zone::Lobby),
            patrol: Some(Patrol {
                waypoints: vec![[0.0; 3], [400.0, 0.0, 0.0]],
                speed: 200.0,
            }),
        })
        .unwrap();
    stage.run(30);
    assert!(stage.peer(1).position(npc).is_some());
    // The place's world goes away with its last actor; the removal-only
    // snapshot keeps the newest tick.
    assert!(stage.server.handle_npc_despawn(npc, stage.now));
    stage.route();
    stage.run(12);
    assert!(stage.peer(1).position(npc).is_none());
    let ticks = &stage.peer(1).ticks;
    assert!(ticks.len() >= 5);
    assert!(ticks.windows(2).all(|w| w[0] <= w[1]), "{ticks:?}");
}
