//! Per-client snapshot cost: one `poll_snapshot` (relevance, deltas against
//! the confirmed base, priority, fitting, encoding) for a room of 50 moving
//! actors and for 256 moving objects, plus latching a 50-object frame; and
//! the area-of-interest broad phase: one send round of 500 clients over
//! 5,000 objects spread on a 2 km square (AOI on), with the shared
//! `FrameIndex` and with a full scan per client. Divide a round by 500 for
//! the cost per snapshot.
//!
//! Run: `cargo bench -p citadel-netcode --bench snapshots`.

use std::hint::black_box;

use citadel_netcode::frame::Frame;
use citadel_netcode::interest::{FrameIndex, InterestConfig};
use citadel_netcode::receiver::SnapshotReceiver;
use citadel_netcode::sender::{SenderConfig, SnapshotSender};
use citadel_netcode::world::{Motion, Object, World};
use citadel_testkit::TestRng;
use citadel_wire::actor::NaTransform;
use citadel_wire::tsync::{HelloParams, Role};
use criterion::{Criterion, criterion_group, criterion_main};

fn world(n: u32) -> World {
    let mut w = World::new(60);
    for id in 1..=n {
        let f = id as f32;
        w.insert(Object {
            id,
            archetype: 0,
            owner: u64::from(id),
            role: Role::RemoteInterpolated,
            gen_epoch: 0,
            ownership_epoch: 1,
            transform: NaTransform {
                position: [f * 130.0, -f * 70.0, 100.0],
                rotation: [0.0, 0.0, (f * 0.1).sin(), (f * 0.1).cos()],
                velocity: [300.0, 150.0 - f, 0.0],
            },
            replicate_velocity: true,
            motion: Motion::Simulated,
            last_input_seq: 0,
        });
    }
    w
}

fn bench(c: &mut Criterion) {
    let codec = HelloParams::default()
        .codec()
        .unwrap_or_else(|e| panic!("{e}"));
    for n in [50u32, 256] {
        let mut w = world(n);
        let mut sender = SnapshotSender::new(999, codec, SenderConfig::default());
        let mut receiver = SnapshotReceiver::new(codec);
        // Establish a baseline so the measured snapshots are deltas.
        let frame = Frame::latch(&w, &codec);
        if let Some(out) = sender.poll_snapshot(&[&frame], None, None, 20)
            && receiver.handle_snapshot(&out.body).is_ok()
            && let Some(ack) = receiver.poll_ack()
            && let Ok(window) = ack.window()
        {
            sender.handle_ack(&window);
        }
        for _ in 0..3 {
            w.handle_sim_tick();
        }
        let frame = Frame::latch(&w, &codec);
        c.bench_function(&format!("poll_snapshot_delta_{n}_moving"), |b| {
            b.iter(|| {
                let mut s = sender.clone();
                black_box(s.poll_snapshot(&[&frame], None, Some([0.0; 3]), 20))
            })
        });
    }
    let w = world(50);
    c.bench_function("latch_frame_50", |b| {
        b.iter(|| black_box(Frame::latch(&w, &codec)))
    });
}

/// A deterministic scatter over [-100 000, 100 000) cm.
fn scatter(rng: &mut TestRng) -> f32 {
    rng.below(200_000) as f32 - 100_000.0
}

fn aoi(c: &mut Criterion) {
    const OBJECTS: u32 = 5_000;
    const CLIENTS: u64 = 500;
    let codec = HelloParams::default()
        .codec()
        .unwrap_or_else(|e| panic!("{e}"));
    let interest = InterestConfig {
        cell_size: 2_000.0,
        inner: 3_000.0,
        outer: 4_000.0,
    };
    let config = SenderConfig {
        interest: Some(interest),
        ..SenderConfig::default()
    };
    let mut seed = TestRng::new(0x9e37_79b9_7f4a_7c15);
    let mut w = World::new(60);
    for id in 1..=OBJECTS {
        let owner = if u64::from(id) <= CLIENTS {
            u64::from(id)
        } else {
            0
        };
        w.insert(Object {
            id,
            archetype: 0,
            owner,
            role: Role::RemoteInterpolated,
            gen_epoch: 0,
            ownership_epoch: 1,
            transform: NaTransform {
                position: [scatter(&mut seed), scatter(&mut seed), 0.0],
                rotation: [0.0, 0.0, 0.0, 1.0],
                velocity: [120.0, -80.0, 0.0],
            },
            replicate_velocity: true,
            motion: Motion::Simulated,
            last_input_seq: 0,
        });
    }
    // Each client views from its own object (ids 1..=500), primed with an
    // acknowledged baseline so the measured snapshots are deltas.
    let frame = Frame::latch(&w, &codec);
    let index = FrameIndex::build(&frame.objects, interest.cell_size);
    let mut clients: Vec<(SnapshotSender, [f32; 3])> = Vec::new();
    for pid in 1..=CLIENTS {
        let at = frame.objects[(pid - 1) as usize].position;
        let mut sender = SnapshotSender::new(pid, codec, config);
        let mut receiver = SnapshotReceiver::new(codec);
        if let Some(out) = sender.poll_snapshot(&[&frame], Some(&[&index]), Some(at), 20)
            && receiver.handle_snapshot(&out.body).is_ok()
            && let Some(ack) = receiver.poll_ack()
            && let Ok(window) = ack.window()
        {
            sender.handle_ack(&window);
        }
        clients.push((sender, at));
    }
    for _ in 0..3 {
        w.handle_sim_tick();
    }
    let frame = Frame::latch(&w, &codec);
    let mut group = c.benchmark_group("aoi_5000_objects_500_clients_round");
    group.sample_size(10);
    group.bench_function("frame_index", |b| {
        b.iter(|| {
            let index = FrameIndex::build(&frame.objects, interest.cell_size);
            for (sender, at) in &clients {
                let mut s = sender.clone();
                black_box(s.poll_snapshot(&[&frame], Some(&[&index]), Some(*at), 20));
            }
        })
    });
    group.bench_function("full_scan", |b| {
        b.iter(|| {
            for (sender, at) in &clients {
                let mut s = sender.clone();
                black_box(s.poll_snapshot(&[&frame], None, Some(*at), 20));
            }
        })
    });
    group.finish();
}

criterion_group!(benches, bench, aoi);
criterion_main!(benches);
