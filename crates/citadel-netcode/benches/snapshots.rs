//! Per-client snapshot cost: one `poll_snapshot` (relevance, deltas against
//! the confirmed base, priority, fitting, encoding) for a room of 50 moving
//! actors and for 256 moving objects, plus latching a 50-object frame.
//!
//! Run: `cargo bench -p citadel-netcode --bench snapshots`.

use std::hint::black_box;

use citadel_netcode::frame::Frame;
use citadel_netcode::receiver::SnapshotReceiver;
use citadel_netcode::sender::{SenderConfig, SnapshotSender};
use citadel_netcode::world::{Motion, Object, World};
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

criterion_group!(benches, bench);
criterion_main!(benches);
