//! A server world and several clients in one thread over simulated links
//! with latency, jitter, loss (up to 20%), duplication and reordering: every
//! client's reconstruction converges to the server's quantized state, every
//! snapshot fits a 1 200-byte datagram, and nobody starves.

use std::collections::BTreeMap;

use citadel_netcode::MAX_SNAPSHOT_DATAGRAM;
use citadel_netcode::frame::Frame;
use citadel_netcode::receiver::SnapshotReceiver;
use citadel_netcode::sender::{SenderConfig, SnapshotSender};
use citadel_netcode::sim::{LinkConfig, SimLink};
use citadel_netcode::world::{IdAllocator, Motion, Object, World};
use citadel_testkit::TestRng;
use citadel_wire::actor::NaTransform;
use citadel_wire::quat::decode_quat;
use citadel_wire::tsync::{HelloParams, Role, TransformCodec, TsyncAck};

/// Per object: position, rotation, velocity.
type Held = BTreeMap<u32, ([f32; 3], [f32; 4], Option<[f32; 3]>)>;

/// The test RNG, drawing in `[-1, 1)`.
struct Rng(TestRng);
impl Rng {
    fn f(&mut self) -> f32 {
        self.0.signed_unit_f32()
    }
}

fn object(id: u32, rng: &mut Rng) -> Object {
    let yaw = rng.f() * 3.0;
    Object {
        id,
        archetype: 0,
        owner: 0,
        role: Role::ServerSimulated,
        gen_epoch: 0,
        ownership_epoch: 0,
        transform: NaTransform {
            position: [rng.f() * 20_000.0, rng.f() * 20_000.0, rng.f() * 500.0],
            rotation: [0.0, 0.0, (yaw / 2.0).sin(), (yaw / 2.0).cos()],
            velocity: [rng.f() * 400.0, rng.f() * 400.0, 0.0],
        },
        replicate_velocity: true,
        motion: Motion::Simulated,
        last_input_seq: 0,
    }
}

/// What a client should hold for the current frame (decoded codes).
fn expected(frame: &Frame, codec: &TransformCodec) -> Held {
    frame
        .objects
        .iter()
        .map(|o| {
            (
                o.id,
                (
                    codec.position.decode(o.position_codes).unwrap(),
                    decode_quat(codec.quat_mode, o.rotation),
                    o.velocity_codes.map(|c| codec.velocity.decode(c).unwrap()),
                ),
            )
        })
        .collect()
}

struct Client {
    sender: SnapshotSender,
    receiver: SnapshotReceiver,
    down: SimLink,
    up: SimLink,
    applied: u64,
}

fn run(loss: f64, clients: usize, objects: u32, seed: u64) {
    let codec = HelloParams::default().codec().unwrap();
    let mut rng = Rng(TestRng::new(seed));
    let mut ids = IdAllocator::default();
    let mut world = World::new(60);
    for _ in 0..objects {
        let id = ids.allocate().unwrap();
        world.insert(object(id, &mut rng));
    }
    let link = LinkConfig {
        latency_ms: 40.0,
        jitter_ms: 35.0,
        loss,
        duplicate: 0.05,
    };
    let mut cs: Vec<Client> = (0..clients)
        .map(|i| Client {
            sender: SnapshotSender::new(100 + i as u64, codec, SenderConfig::default()),
            receiver: SnapshotReceiver::new(codec),
            down: SimLink::new(link, seed ^ (i as u64 * 7919 + 1)),
            up: SimLink::new(link, seed ^ (i as u64 * 104_729 + 3)),
            applied: 0,
        })
        .collect();
    let mut frame = Frame::latch(&world, &codec);
    let mut max_datagram = 0;
    // 60 Hz sim, 20 Hz snapshots, 1 ms steps, 12 s. Movement and churn stop
    // at 7 s; the last 5 s let every client converge.
    for ms in 0..12_000u32 {
        let now = f64::from(ms);
        if ms % 50 == 0 && ms < 7_000 {
            // Churn: retarget, despawn and spawn a few objects.
            for o in 1..=3u32 {
                let id = (rng.f().abs() * objects as f32) as u32 + o;
                if let Some(obj) = world.get_mut(id) {
                    obj.transform.velocity = [rng.f() * 400.0, rng.f() * 400.0, 0.0];
                }
            }
            if ms % 500 == 0 {
                let gone = (rng.f().abs() * objects as f32) as u32 + 1;
                if world.remove(gone).is_some() {
                    ids.release(gone);
                }
                let id = ids.allocate().unwrap();
                world.insert(object(id, &mut rng));
            }
        }
        if ms == 7_000 {
            let moving: Vec<u32> = world.objects().map(|o| o.id).collect();
            for id in moving {
                if let Some(o) = world.get_mut(id) {
                    o.transform.velocity = [0.0; 3];
                }
            }
        }
        if ms % 16 == 0 {
            world.handle_sim_tick();
            frame = Frame::latch(&world, &codec);
        }
        for c in &mut cs {
            if ms % 50 == 0
                && let Some(out) = c.sender.poll_snapshot(&[&frame], None, None, 20)
            {
                {
                    assert!(
                        out.body.len() + 2 <= MAX_SNAPSHOT_DATAGRAM,
                        "{} bytes",
                        out.body.len() + 2
                    );
                    max_datagram = max_datagram.max(out.body.len() + 2);
                    if !out.body.is_empty() {
                        c.down.send(now, out.body);
                    }
                }
            }
            for body in c.down.poll(now) {
                if c.receiver.handle_snapshot(&body).is_ok() {
                    c.applied += 1;
                }
            }
            if let Some(ack) = c.receiver.poll_ack() {
                c.up.send(now, ack.encode());
            }
            for body in c.up.poll(now) {
                let ack = TsyncAck::decode(&body).unwrap();
                c.sender.handle_ack(&ack.window().unwrap());
            }
        }
    }
    let want = expected(&frame, &codec);
    for (i, c) in cs.iter().enumerate() {
        let got = c.receiver.latest().expect("something applied");
        let got: Held = got
            .iter()
            .map(|(id, v)| (*id, (v.position, v.rotation, v.velocity)))
            .collect();
        assert_eq!(
            got.keys().collect::<Vec<_>>(),
            want.keys().collect::<Vec<_>>(),
            "client {i} ids (loss {loss})"
        );
        for (id, w) in &want {
            assert_eq!(got.get(id), Some(w), "client {i} object {id} (loss {loss})");
        }
        assert!(c.applied > 50, "client {i} applied {}", c.applied);
    }
    eprintln!(
        "loss {loss}: {clients} clients x {} objects converged; largest datagram {max_datagram} bytes; dropped {} of {} downlink packets",
        want.len(),
        cs.iter().map(|c| c.down.dropped).sum::<u64>(),
        cs.iter().map(|c| c.down.sent).sum::<u64>()
    );
}

#[test]
fn converges_on_a_clean_link() {
    run(0.0, 3, 120, 11);
}

#[test]
fn converges_with_ten_percent_loss_jitter_duplication_and_reordering() {
    run(0.10, 6, 200, 23);
}

#[test]
fn converges_with_twenty_percent_loss() {
    run(0.20, 4, 300, 37);
}

#[test]
fn nobody_starves_when_more_changes_than_fit() {
    let codec = HelloParams::default().codec().unwrap();
    let mut rng = Rng(TestRng::new(5));
    let mut world = World::new(60);
    for id in 1..=600 {
        world.insert(object(id, &mut rng));
    }
    let mut sender = SnapshotSender::new(1, codec, SenderConfig::default());
    let mut receiver = SnapshotReceiver::new(codec);
    let mut last_seen: BTreeMap<u32, u32> = BTreeMap::new();
    let mut worst_gap = 0;
    for round in 0..200u32 {
        for _ in 0..3 {
            world.handle_sim_tick();
        }
        let frame = Frame::latch(&world, &codec);
        let out = sender
            .poll_snapshot(&[&frame], None, Some([0.0; 3]), 20)
            .unwrap();
        assert!(out.body.len() + 2 <= MAX_SNAPSHOT_DATAGRAM);
        let snap = citadel_wire::tsync::Snapshot::decode(&out.body, &codec).unwrap();
        for u in &snap.updates {
            if let Some(prev) = last_seen.insert(u.object_id, round) {
                worst_gap = worst_gap.max(round - prev);
            }
        }
        receiver.handle_snapshot(&out.body).unwrap();
        sender.handle_ack(&receiver.poll_ack().unwrap().window().unwrap());
    }
    assert_eq!(last_seen.len(), 600, "every object was sent");
    // ~600 changed objects, ~70 fit per datagram: each is refreshed within a
    // bounded number of rounds.
    assert!(worst_gap <= 30, "worst refresh gap {worst_gap} snapshots");
    eprintln!("600 moving objects: worst refresh gap {worst_gap} snapshots");
}

#[test]
fn the_owners_input_ack_is_in_every_snapshot_even_when_most_objects_wait() {
    let codec = HelloParams::default().codec().unwrap();
    let mut rng = Rng(TestRng::new(11));
    let mut world = World::new(60);
    for id in 1..=500 {
        world.insert(object(id, &mut rng));
    }
    // Object 1 is this client's predicted avatar.
    if let Some(own) = world.get_mut(1) {
        own.owner = 1;
        own.role = Role::OwnerPredicted;
    }
    let mut sender = SnapshotSender::new(1, codec, SenderConfig::default());
    let mut receiver = SnapshotReceiver::new(codec);
    let mut missing = 0;
    for round in 1..=100u32 {
        for _ in 0..3 {
            world.handle_sim_tick();
        }
        if let Some(own) = world.get_mut(1) {
            own.last_input_seq = round;
        }
        let frame = Frame::latch(&world, &codec);
        let out = sender
            .poll_snapshot(&[&frame], None, Some([0.0; 3]), 20)
            .unwrap();
        assert!(out.deferred > 0, "more changed than fits");
        let snap = citadel_wire::tsync::Snapshot::decode(&out.body, &codec).unwrap();
        let acked = snap
            .updates
            .iter()
            .find(|u| u.object_id == 1)
            .and_then(|u| u.last_input_seq);
        // Full entries go first (§3.4 step 7): until every object has
        // been sent once the newcomer's baselines come first. Afterwards
        // the owner's ack must be in every snapshot.
        if round > 20 && acked != Some(round) {
            missing += 1;
        }
        receiver.handle_snapshot(&out.body).unwrap();
        sender.handle_ack(&receiver.poll_ack().unwrap().window().unwrap());
    }
    assert_eq!(
        missing, 0,
        "of 80 snapshots, without the owner's last_input_seq"
    );
}

#[test]
fn a_repeated_hello_resets_to_a_full_baseline_and_unchanged_objects_cost_nothing() {
    let codec = HelloParams::default().codec().unwrap();
    let mut rng = Rng(TestRng::new(9));
    let mut world = World::new(60);
    for id in 1..=10 {
        let mut o = object(id, &mut rng);
        o.transform.velocity = [0.0; 3];
        world.insert(o);
    }
    let frame = Frame::latch(&world, &codec);
    let mut sender = SnapshotSender::new(1, codec, SenderConfig::default());
    let mut receiver = SnapshotReceiver::new(codec);
    let first = sender.poll_snapshot(&[&frame], None, None, 20).unwrap();
    assert_eq!((first.base_snapshot_id, first.updates), (0, 10));
    // Unacknowledged: the next one is again full against base 0.
    let second = sender.poll_snapshot(&[&frame], None, None, 20).unwrap();
    assert_eq!((second.base_snapshot_id, second.updates), (0, 10));
    receiver.handle_snapshot(&second.body).unwrap();
    sender.handle_ack(&receiver.poll_ack().unwrap().window().unwrap());
    assert_eq!(sender.confirmed_base(), second.snapshot_id);
    assert!(
        sender.poll_snapshot(&[&frame], None, None, 20).is_none(),
        "nothing changed, nothing sent"
    );
    sender.reset();
    let after_reset = sender.poll_snapshot(&[&frame], None, None, 20).unwrap();
    assert_eq!((after_reset.base_snapshot_id, after_reset.updates), (0, 10));
    // A forged ack for an id never sent changes nothing.
    let mut forged = citadel_wire::ack::AckWindow::new();
    forged.ack(9_999);
    sender.handle_ack(&forged);
    assert_eq!(sender.confirmed_base(), 0);
}
