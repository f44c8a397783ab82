//! Area of interest through the snapshot builder: entering sends
//! RelevancyEnter then a full entry; leaving sends RelevancyExit and a
//! removal; hysteresis keeps objects between the radii; the client's own
//! object is always relevant. Plus the interpolation buffer end to end.

use citadel_netcode::frame::Frame;
use citadel_netcode::interest::{FrameIndex, InterestConfig};
use citadel_netcode::interp::Interpolator;
use citadel_netcode::receiver::SnapshotReceiver;
use citadel_netcode::sender::{SenderConfig, SnapshotSender};
use citadel_netcode::world::{Motion, Object, World};
use citadel_testkit::TestRng;
use citadel_wire::actor::NaTransform;
use citadel_wire::tsync::{HelloParams, Role, RoleEvent, Snapshot};

fn at(id: u32, x: f32, owner: u64, role: Role) -> Object {
    Object {
        id,
        archetype: 0,
        owner,
        role,
        gen_epoch: 0,
        ownership_epoch: 1,
        transform: NaTransform {
            position: [x, 0.0, 0.0],
            ..NaTransform::IDENTITY
        },
        replicate_velocity: false,
        motion: Motion::OwnerDriven,
        last_input_seq: 0,
    }
}

#[test]
fn enter_and_exit_with_hysteresis() {
    let codec = HelloParams::default().codec().unwrap();
    let config = SenderConfig {
        interest: Some(InterestConfig {
            cell_size: 500.0,
            inner: 1_000.0,
            outer: 1_500.0,
        }),
        ..SenderConfig::default()
    };
    let mut world = World::new(60);
    world.insert(at(1, 0.0, 7, Role::OwnerPredicted)); // the client's own object
    world.insert(at(2, 900.0, 0, Role::ServerSimulated)); // inside inner
    world.insert(at(3, 1_200.0, 0, Role::ServerSimulated)); // between radii: not yet
    world.insert(at(4, 50_000.0, 0, Role::ServerSimulated)); // far away
    let mut sender = SnapshotSender::new(7, codec, config);
    let mut receiver = SnapshotReceiver::new(codec);
    let step = |world: &World, sender: &mut SnapshotSender, receiver: &mut SnapshotReceiver| {
        let frame = Frame::latch(world, &codec);
        let index = FrameIndex::build(&frame.objects, 500.0);
        let out = sender
            .poll_snapshot(&[&frame], Some(&[&index]), Some([0.0; 3]), 20)
            .unwrap();
        let snap = if out.body.is_empty() {
            None
        } else {
            Some(Snapshot::decode(&out.body, &codec).unwrap())
        };
        if !out.body.is_empty() {
            receiver.handle_snapshot(&out.body).unwrap();
            sender.handle_ack(&receiver.poll_ack().unwrap().window().unwrap());
        }
        (out, snap)
    };
    let (out, snap) = step(&world, &mut sender, &mut receiver);
    let entered: Vec<(u32, RoleEvent)> = out.roles.iter().map(|r| (r.object_id, r.event)).collect();
    assert_eq!(
        entered,
        vec![
            (1, RoleEvent::RelevancyEnter),
            (2, RoleEvent::RelevancyEnter)
        ]
    );
    assert_eq!(out.roles[0].role, Role::OwnerPredicted);
    let ids: Vec<u32> = snap.unwrap().updates.iter().map(|u| u.object_id).collect();
    assert_eq!(ids, vec![1, 2], "full entries follow the enter");
    // Object 2 drifts to 1 200 cm: inside the outer radius, it stays.
    world.get_mut(2).unwrap().transform.position[0] = 1_200.0;
    let (out, _) = step(&world, &mut sender, &mut receiver);
    assert!(out.roles.is_empty());
    // Beyond the outer radius: exit plus removal.
    world.get_mut(2).unwrap().transform.position[0] = 1_600.0;
    let (out, snap) = step(&world, &mut sender, &mut receiver);
    assert_eq!(
        out.roles
            .iter()
            .map(|r| (r.object_id, r.event))
            .collect::<Vec<_>>(),
        vec![(2, RoleEvent::RelevancyExit)]
    );
    assert_eq!(snap.unwrap().removed, vec![2]);
    // Object 3 comes inside inner: enter.
    world.get_mut(3).unwrap().transform.position[0] = 800.0;
    let (out, snap) = step(&world, &mut sender, &mut receiver);
    assert_eq!(
        out.roles
            .iter()
            .map(|r| (r.object_id, r.event))
            .collect::<Vec<_>>(),
        vec![(3, RoleEvent::RelevancyEnter)]
    );
    assert!(
        snap.unwrap()
            .updates
            .iter()
            .any(|u| u.object_id == 3 && u.position.is_some() && u.rotation.is_some())
    );
    let held: Vec<u32> = receiver.latest().unwrap().keys().copied().collect();
    assert_eq!(held, vec![1, 3]);
}

#[test]
fn interpolation_renders_in_the_past_and_extrapolates_briefly() {
    let codec = HelloParams::default().codec().unwrap();
    let mut world = World::new(60);
    let mut o = at(1, 0.0, 0, Role::ServerSimulated);
    o.motion = Motion::Simulated;
    o.replicate_velocity = true;
    o.transform.velocity = [600.0, 0.0, 0.0];
    world.insert(o);
    let mut sender = SnapshotSender::new(9, codec, SenderConfig::default());
    let mut receiver = SnapshotReceiver::new(codec);
    let mut interp = Interpolator::new(60);
    for _ in 0..20 {
        for _ in 0..3 {
            world.handle_sim_tick();
        }
        let frame = Frame::latch(&world, &codec);
        let out = sender.poll_snapshot(&[&frame], None, None, 20).unwrap();
        let applied = receiver.handle_snapshot(&out.body).unwrap();
        interp.handle_applied(&applied);
        sender.handle_ack(&receiver.poll_ack().unwrap().window().unwrap());
    }
    let newest = f64::from(world.tick());
    let render_tick = interp.render_tick(newest);
    assert!(render_tick < newest);
    let x = interp.sample(render_tick)[&1].position[0];
    let expected = (render_tick / 60.0 * 600.0) as f32;
    assert!((x - expected).abs() < 1.0, "rendered {x}, true {expected}");
    let ahead = interp.sample(newest + 600.0)[&1].position[0];
    let cap = (newest / 60.0 * 600.0 + 0.25 * 600.0) as f32;
    assert!(
        (ahead - cap).abs() < 1.0,
        "extrapolation capped at 0.25 s: {ahead} vs {cap}"
    );
}

/// The broad phase changes the cost, never the answer: a sender using a
/// [`FrameIndex`] emits byte-identical snapshots and roles to one scanning
/// every object, for a viewer crossing a field of scattered objects (with
/// its own object far away, which must stay pinned).
#[test]
fn the_frame_index_gives_the_same_snapshots_as_a_full_scan() {
    let codec = HelloParams::default().codec().unwrap();
    let config = SenderConfig {
        interest: Some(InterestConfig {
            cell_size: 700.0,
            inner: 1_500.0,
            outer: 2_000.0,
        }),
        ..SenderConfig::default()
    };
    let mut world = World::new(60);
    let mut rng = TestRng::new(0x2545_f491_4f6c_dd1d);
    let mut next = move || rng.below(40_000) as f32 - 20_000.0;
    for id in 1..=400 {
        let mut o = at(id, next(), 0, Role::ServerSimulated);
        o.transform.position[1] = next();
        world.insert(o);
    }
    world.insert(at(401, 19_000.0, 7, Role::OwnerPredicted));
    let mut indexed = SnapshotSender::new(7, codec, config);
    let mut scanning = SnapshotSender::new(7, codec, config);
    let (mut rx_a, mut rx_b) = (SnapshotReceiver::new(codec), SnapshotReceiver::new(codec));
    let mut seen = 0;
    for step in 0..60 {
        let viewer = [-20_000.0 + step as f32 * 700.0, 0.0, 0.0];
        world.handle_sim_tick();
        let frame = Frame::latch(&world, &codec);
        let index = FrameIndex::build(&frame.objects, 700.0);
        let a = indexed.poll_snapshot(&[&frame], Some(&[&index]), Some(viewer), 20);
        let b = scanning.poll_snapshot(&[&frame], None, Some(viewer), 20);
        assert_eq!(a.is_some(), b.is_some(), "step {step}");
        let (Some(a), Some(b)) = (a, b) else { continue };
        assert_eq!(a.body, b.body, "step {step}");
        assert_eq!(a.roles, b.roles, "step {step}");
        if !a.body.is_empty() {
            seen += a.updates;
            rx_a.handle_snapshot(&a.body).unwrap();
            rx_b.handle_snapshot(&b.body).unwrap();
            indexed.handle_ack(&rx_a.poll_ack().unwrap().window().unwrap());
            scanning.handle_ack(&rx_b.poll_ack().unwrap().window().unwrap());
        }
        assert!(
            rx_a.latest().is_none_or(|held| held.contains_key(&401)),
            "the own object stays pinned"
        );
    }
    assert!(seen > 50, "the viewer met many objects on the way ({seen})");
}

/// A snapshot that only removes objects carries the latest tick, not the
/// tick 0 of an empty frame: ticks never go backwards for a client.
#[test]
fn snapshot_ticks_never_go_backwards() {
    let codec = HelloParams::default().codec().unwrap();
    let mut world = World::new(60);
    world.insert(at(1, 0.0, 0, Role::ServerSimulated));
    world.handle_sim_tick();
    world.handle_sim_tick();
    let mut sender = SnapshotSender::new(9, codec, SenderConfig::default());
    let mut receiver = SnapshotReceiver::new(codec);
    let frame = Frame::latch(&world, &codec);
    let first = sender.poll_snapshot(&[&frame], None, None, 20).unwrap();
    let first_tick = Snapshot::decode(&first.body, &codec).unwrap().server_tick;
    assert!(first_tick >= 2);
    receiver.handle_snapshot(&first.body).unwrap();
    sender.handle_ack(&receiver.poll_ack().unwrap().window().unwrap());
    // The last actor despawns: the place's frame is empty (tick 0).
    let empty = Frame::default();
    let removal = sender.poll_snapshot(&[&empty], None, None, 20).unwrap();
    let snap = Snapshot::decode(&removal.body, &codec).unwrap();
    assert_eq!(snap.removed, vec![1]);
    assert_eq!(snap.server_tick, first_tick);
}
