//! Rewind ray tests per second on one core: one `rewind::resolve` (rewind
//! tick interpolation in each ring, ray vs sphere, nearest forward hit)
//! against 256 hit-eligible objects with a full one-second ring (60 ticks)
//! each, at a fractional tick between samples. Reported per shot: 1 / time
//! is the fire commands one core resolves per second; × 256 the ray-sphere
//! tests.
//!
//! Run: `cargo bench -p citadel-netcode --bench rewind`.

use std::hint::black_box;

use citadel_netcode::rewind::{History, resolve};
use citadel_testkit::TestRng;
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

criterion_group!(benches, bench);
criterion_main!(benches);
