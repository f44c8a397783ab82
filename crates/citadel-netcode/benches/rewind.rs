//! Rewind ray tests per second on one core: one `rewind::resolve` (rewind
//! tick interpolation in each ring, ray vs sphere, nearest forward hit)
//! against 256 hit-eligible objects with a full one-second ring (60 ticks)
//! each, at a fractional tick between samples. Reported per shot: 1 / time
//! is the fire commands one core resolves per second; × 256 the ray-sphere
//! tests.
//!
//! Also: one simulated second of the actor server core as the node runs
//! it with 500 predicted owners in one room (default config: no AOI, the
//! 1 200-byte datagram bounds each snapshot). Per 60 Hz tick every owner's
//! kind-9 body (its 4 newest frames, moving on a circle, and the ack of the
//! newest snapshot it received) is decoded and handed to `handle_input`
//! (ownership, epoch and sequence checks, clamped integration); every
//! object is hit-eligible, so each tick records 500 history samples; on the
//! 20 Hz send ticks every owner gets its own delta snapshot against its
//! acknowledged base, carrying its own `last_input_seq`; every output is
//! turned into its envelope once, as the driver does. Only the server's
//! side is timed (the clients' encoding of their bundles is not): the time
//! is the core's CPU per second of play, so under 1 s is under one core.
//!
//! Run: `cargo bench -p citadel-netcode --bench rewind`.

use std::hint::black_box;

use citadel_netcode::actors::{ActorConfig, ActorServer, Audience, Message, Tick};
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

/// What one owner's client holds between ticks: the newest snapshot id it
/// received (acknowledged in its next bundle) and its next input sequence.
#[derive(Default, Clone, Copy)]
struct Owner {
    object_id: u32,
    last_snapshot: u32,
    seq: u32,
}

/// The snapshot id of a kind-8 body: bytes 4..8 of the header.
fn snapshot_id(body: &[u8]) -> u32 {
    body.get(4..8)
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .map_or(0, u32::from_be_bytes)
}

/// One client's encoded kind-9 body: its 4 newest frames (the redundancy
/// a client sends against loss) and the ack of the newest snapshot.
fn bundle_bytes(owner: &Owner, tick: u64, out: &mut Vec<u8>) {
    let frames = (owner.seq.saturating_sub(3)..=owner.seq)
        .filter(|s| *s > 0)
        .map(|s| InputFrame {
            input_seq: s,
            sim_tick: s,
            dt: 1.0 / 60.0,
            object_id: owner.object_id,
            ownership_epoch: 1,
            // Circles, so every object changes every snapshot.
            move_velocity: [
                300.0 * ((tick + u64::from(owner.object_id)) as f32 * 0.05).cos(),
                300.0 * ((tick + u64::from(owner.object_id)) as f32 * 0.05).sin(),
                0.0,
            ],
            ..InputFrame::default()
        })
        .collect();
    let bundle = InputBundle {
        acked_snapshot_id: owner.last_snapshot,
        last_seen_snapshot_id: owner.last_snapshot,
        frames,
    };
    out.clear();
    bundle.encode_into(out);
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
    let mut owners = Vec::new();
    for pid in 1..=OWNERS {
        server.handle_hello(pid, 0, Tick(0));
        let presence = NaPresence {
            archetype_id: 7,
            transform: NaTransform {
                position: [(pid % 25) as f32 * 400.0, (pid / 25) as f32 * 400.0, 0.0],
                ..NaTransform::IDENTITY
            },
        };
        let object_id = server.handle_presence(pid, &presence, Tick(0)).unwrap();
        server
            .handle_hit_eligible(object_id, true, Tick(0))
            .unwrap();
        server.handle_lag(pid, 80.0, Tick(0));
        owners.push(Owner {
            object_id,
            ..Owner::default()
        });
    }
    while server.poll_output().is_some() {}
    let mut tick = 0u64;
    let mut bodies: Vec<Vec<u8>> = vec![Vec::new(); owners.len()];
    let mut group = c.benchmark_group("actor_core");
    group.sample_size(10);
    group.bench_function("one_second_500_predicted_owners", |b| {
        b.iter_custom(|seconds| {
            let mut spent = std::time::Duration::ZERO;
            for _ in 0..seconds * 60 {
                tick += 1;
                // The clients' side (not timed): each encodes its bundle.
                for (owner, body) in owners.iter_mut().zip(bodies.iter_mut()) {
                    owner.seq += 1;
                    bundle_bytes(owner, tick, body);
                }
                let started = std::time::Instant::now();
                for (i, body) in bodies.iter().enumerate() {
                    let Ok(bundle) = InputBundle::decode(body) else {
                        panic!("a bundle the bench encoded decodes");
                    };
                    let outcome = server.handle_input(i as u64 + 1, &bundle, Tick(tick));
                    black_box(&outcome);
                }
                server.handle_tick(Tick(tick));
                let mut delivered = Vec::new();
                while let Some(out) = server.poll_output() {
                    if let (Message::Snapshot(body), Audience::One(pid)) = (&out.message, &out.to) {
                        delivered.push((*pid, snapshot_id(body)));
                    }
                    // The driver encodes each output once.
                    black_box(out.message.to_envelope());
                }
                spent += started.elapsed();
                for (pid, id) in delivered {
                    if let Some(owner) = owners.get_mut(pid as usize - 1) {
                        owner.last_snapshot = id;
                    }
                }
            }
            spent
        })
    });
    group.finish();
}

criterion_group!(benches, bench, owners);
criterion_main!(benches);
