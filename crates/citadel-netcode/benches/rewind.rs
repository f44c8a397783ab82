//! Rewind ray tests per second on one core: one `rewind::resolve` (rewind
//! tick interpolation in each ring, ray vs sphere, nearest forward hit)
//! against 256 hit-eligible objects with a full one-second ring (60 ticks)
//! each, at a fractional tick between samples. Reported per shot: 1 / time
//! is the fire commands one core resolves per second; × 256 the ray-sphere
//! tests.
//!
//! Also: one simulated second of the actor server core with 500
//! predicted owners (one input frame each per 60 Hz tick, every owner's
//! bundle carrying its 4 newest frames, snapshots at 20 Hz to all 500):
//! the time is the core's CPU per second of play (no sockets, no
//! encoding of envelopes beyond the snapshot bodies the core builds).
//!
//! Run: `cargo bench -p citadel-netcode --bench rewind`.

use std::hint::black_box;

use citadel_netcode::actors::{ActorConfig, ActorServer, Tick};
use citadel_netcode::rewind::{History, RewindParams, resolve};
use citadel_testkit::TestRng;
use citadel_wire::actor::{NaPresence, NaTransform};
use citadel_wire::tsync::{HelloParams, InputBundle, InputFrame};
use criterion::{Criterion, criterion_group, criterion_main};

fn bench(c: &mut Criterion) {
    let mut rng = TestRng::new(17);
    let rings: Vec<(u32, History)> = (1..=256u32)
        .map(|id| {
            let mut h = History::new(60);
            let base = [
                (rng.unit_f64() as f32 - 0.5) * 20_000.0,
                (rng.unit_f64() as f32 - 0.5) * 20_000.0,
                0.0,
            ];
            for t in 0..60u64 {
                h.record(1_000 + t, [base[0] + t as f32 * 8.3, base[1], base[2]]);
            }
            (id, h)
        })
        .collect();
    let shots: Vec<[f32; 3]> = (0..64)
        .map(|_| {
            [
                rng.unit_f64() as f32 - 0.5,
                rng.unit_f64() as f32 - 0.5,
                0.01,
            ]
        })
        .collect();
    let mut i = 0;
    c.bench_function("rewind_resolve_256_objects", |b| {
        b.iter(|| {
            i = (i + 1) % shots.len();
            let targets = rings.iter().map(|(id, h)| (*id, h));
            black_box(resolve(
                targets,
                0,
                [0.0; 3],
                black_box(shots[i]),
                black_box(1_041.4),
                50.0,
            ))
        })
    });
}

fn owners(c: &mut Criterion) {
    const OWNERS: u64 = 500;
    let config = ActorConfig {
        hello: HelloParams::default(),
        budget: 0,
        interest: None,
        predicted_archetypes: vec![7],
        input_max_speed: 2_000.0,
        input_max_dt: 0.1,
        rewind_history_ticks: 0,
        rewind: RewindParams::default(),
    };
    let mut server = ActorServer::<u8>::new(config).unwrap();
    let mut ids = Vec::new();
    for pid in 1..=OWNERS {
        server.handle_hello(pid, 0, Tick(0));
        let presence = NaPresence {
            archetype_id: 7,
            transform: NaTransform {
                position: [pid as f32 * 300.0, 0.0, 0.0],
                ..NaTransform::IDENTITY
            },
        };
        ids.push(server.handle_presence(pid, &presence, Tick(0)).unwrap());
    }
    while server.poll_output().is_some() {}
    let mut tick = 0u64;
    let mut seq = 0u32;
    let mut group = c.benchmark_group("actor_core");
    group.sample_size(10);
    group.bench_function("one_second_500_predicted_owners", |b| {
        b.iter(|| {
            for _ in 0..60 {
                tick += 1;
                seq += 1;
                for (i, &object_id) in ids.iter().enumerate() {
                    let frames = (seq.saturating_sub(3)..=seq)
                        .filter(|s| *s > 0)
                        .map(|s| InputFrame {
                            input_seq: s,
                            sim_tick: s,
                            dt: 1.0 / 60.0,
                            object_id,
                            ownership_epoch: 1,
                            move_velocity: [300.0, 100.0, 0.0],
                            ..InputFrame::default()
                        })
                        .collect();
                    let bundle = InputBundle {
                        acked_snapshot_id: 0,
                        last_seen_snapshot_id: 0,
                        frames,
                    };
                    let outcome = server.handle_input(i as u64 + 1, &bundle, Tick(tick));
                    black_box(&outcome);
                }
                server.handle_tick(Tick(tick));
                while let Some(out) = server.poll_output() {
                    black_box(out);
                }
            }
        })
    });
    group.finish();
}

criterion_group!(benches, bench, owners);
criterion_main!(benches);
