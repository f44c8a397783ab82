//! The issue-18 scenario against the sans-IO authority: 200 clients in one
//! match (no viewer, so every object is relevant to every client: the worst
//! case), 1 000 server-owned objects of 8 fields, 10 % of all fields (800)
//! changing every tick at 20 Hz. Every client is a real
//! `NetworkPeerSession` that applies what it receives and acknowledges it
//! before the next tick (instant delivery).
//!
//! Criterion times one server tick: handling the previous tick's acks, the
//! tick itself (relevance, planning, encoding, tokens) and draining the
//! output, with `shared_quantized_state` off and on. Before that, a 100-tick
//! (5 s) run prints the bytes each client received per second against
//! sending every object's full bunch every tick, and the wall time of the
//! tick and of the whole change→applied cycle (p50/p99).
//!
//! Run: `cargo bench -p citadel-netpeer --bench replication`.

use std::time::{Duration, Instant};

use citadel_netpeer::class::FieldSpec;
use citadel_netpeer::encode::{Planned, encode_direct, plan};
use citadel_netpeer::{Authority, AuthorityConfig, ClassSpec, Evolution, NetworkPeerSession};
use citadel_testkit::TestRng;
use citadel_wire::netpeer::{BunchBase, FieldCodec, FieldValue};
use citadel_wire::quant::{ScalarCodec, Vector3Codec};
use citadel_wire::quat::QuatMode;
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};

const CLIENTS: u64 = 200;
const OBJECTS: usize = 1_000;
const FIELDS: u16 = 8;
const CHANGES_PER_TICK: usize = 800;
const TICK_MS: u64 = 50;
/// Envelope framing per kind-13 body on a stream transport (length + kind).
const FRAMING: usize = 6;

fn spec() -> ClassSpec {
    let pos = Vector3Codec::new(
        [-262_144.0, -262_144.0, -32_768.0],
        [262_144.0, 262_144.0, 32_768.0],
        8,
    )
    .expect("position codec");
    let vel = Vector3Codec::new([-32_768.0; 3], [32_768.0; 3], 4).expect("velocity codec");
    let heading = ScalarCodec::new(-180.0, 180.0, 10).expect("heading codec");
    ClassSpec {
        class_id: 1,
        layout_version: 1,
        fields: vec![
            FieldSpec::new("position", FieldCodec::Vector3(pos)),
            FieldSpec::new("rotation", FieldCodec::Quat(QuatMode::Bits10)),
            FieldSpec::new("velocity", FieldCodec::Vector3(vel)),
            FieldSpec::new("health", FieldCodec::IntRange { min: 0, max: 100 }),
            FieldSpec::new("ammo", FieldCodec::IntRange { min: 0, max: 255 }),
            FieldSpec::new("heading", FieldCodec::Scalar(heading)),
            FieldSpec::new("alive", FieldCodec::Bool),
            FieldSpec::new(
                "score",
                FieldCodec::IntRange {
                    min: 0,
                    max: 1_000_000,
                },
            ),
        ],
        evolution: Evolution::Strict,
        position_field: None,
    }
}

fn change(rng: &mut TestRng, s: &mut Authority, object: u32, field: u16) {
    let f = |rng: &mut TestRng, r: f32| rng.signed_unit_f32() * r;
    let v = match field {
        0 => FieldValue::Vector3([f(rng, 5_000.0), f(rng, 5_000.0), f(rng, 500.0)]),
        1 => FieldValue::Quat([f(rng, 1.0), f(rng, 1.0), f(rng, 1.0), f(rng, 1.0)]),
        2 => FieldValue::Vector3([f(rng, 800.0), f(rng, 800.0), f(rng, 100.0)]),
        3 => FieldValue::Int(rng.below(101) as i64),
        4 => FieldValue::Int(rng.below(256) as i64),
        5 => FieldValue::Scalar(f(rng, 180.0)),
        6 => FieldValue::Bool(rng.below(2) == 1),
        _ => FieldValue::Int(rng.below(1_000_001) as i64),
    };
    s.set(object, field, &v).expect("in-bounds change");
}

struct Scenario {
    server: Authority,
    sessions: Vec<NetworkPeerSession>,
    objects: Vec<u32>,
    inbox: Vec<Vec<bytes::Bytes>>,
    acks: Vec<Vec<u8>>,
    rng: TestRng,
    now: u64,
}

impl Scenario {
    fn new(shared: bool) -> Scenario {
        let mut server = Authority::new(AuthorityConfig {
            shared_quantized_state: shared,
            ..AuthorityConfig::default()
        })
        .expect("config");
        server.register_class(spec()).expect("class");
        let schema = server.class(1).expect("class").current().clone();
        let sessions = (1..=CLIENTS)
            .map(|c| {
                server.connect(c, false, 0);
                let mut s = NetworkPeerSession::default();
                s.register(schema.clone());
                s
            })
            .collect();
        let objects = (0..OBJECTS)
            .map(|_| server.spawn(1, 0, None, false).expect("spawn"))
            .collect();
        let mut sc = Scenario {
            server,
            sessions,
            objects,
            inbox: vec![Vec::new(); CLIENTS as usize],
            acks: Vec::new(),
            rng: TestRng::new(18),
            now: 0,
        };
        // Bootstrap (every pair's full bunch) and settle into deltas.
        for _ in 0..20 {
            sc.mutate();
            sc.server_tick();
            sc.clients_apply();
        }
        sc
    }

    fn mutate(&mut self) {
        for _ in 0..CHANGES_PER_TICK {
            let o = self.objects[self.rng.below(OBJECTS as u64) as usize];
            let f = self.rng.below(u64::from(FIELDS)) as u16;
            change(&mut self.rng, &mut self.server, o, f);
        }
    }

    /// The timed part: last tick's acks, the tick, draining the output.
    fn server_tick(&mut self) -> usize {
        for (i, ack) in self.acks.drain(..).enumerate() {
            if !ack.is_empty() {
                self.server.handle_ack(1 + i as u64, &ack);
            }
        }
        self.server.tick(self.now);
        self.now += TICK_MS;
        let mut bytes = 0;
        while let Some(out) = self.server.poll_output() {
            bytes += out.body.len() + FRAMING;
            self.inbox[(out.conn - 1) as usize].push(out.body);
        }
        bytes
    }

    /// Clients apply and acknowledge (not part of the server's cost).
    fn clients_apply(&mut self) {
        let mut acks = vec![Vec::new(); CLIENTS as usize];
        for (i, (session, inbox)) in self.sessions.iter_mut().zip(&mut self.inbox).enumerate() {
            for body in inbox.drain(..) {
                session.handle_bunch(&body).expect("applies");
            }
            if let Some(a) = session.poll_ack() {
                acks[i] = a;
            }
        }
        // One ack body per client, in client order (index = client - 1).
        self.acks = acks;
    }

    /// Bytes of one full bunch of every object (what "full state every
    /// time" would send each client each tick), with current-size tokens.
    fn full_state_bytes(&self) -> usize {
        let class = self.server.class(1).expect("class");
        let token = self.server.counters().tokens_issued.max(1);
        self.objects
            .iter()
            .map(|&o| {
                let values = self.server.values(o).expect("object").to_vec();
                let snap = citadel_netpeer::encode::Snapshot { rev: 1, values };
                let Planned::Send(p) = plan(class.fields(), 8, None, &snap, false, 4_096) else {
                    return 0;
                };
                encode_direct(class.current(), o, token, BunchBase::Full, &p, &snap)
                    .expect("encodes")
                    .len()
                    + FRAMING
            })
            .sum()
    }
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn report(shared: bool) {
    let mut sc = Scenario::new(shared);
    let ticks = 100;
    let (mut sent, mut full) = (0usize, 0usize);
    let mut tick_times = Vec::new();
    let mut cycle_times = Vec::new();
    for _ in 0..ticks {
        sc.mutate();
        let t0 = Instant::now();
        sent += sc.server_tick();
        let t1 = Instant::now();
        sc.clients_apply();
        cycle_times.push(t0.elapsed());
        tick_times.push(t1 - t0);
        full += sc.full_state_bytes();
    }
    tick_times.sort();
    cycle_times.sort();
    let secs = ticks as f64 * TICK_MS as f64 / 1_000.0;
    let per_client = sent as f64 / CLIENTS as f64 / secs;
    let full_per_client = full as f64 / secs;
    let mean: Duration = tick_times.iter().sum::<Duration>() / ticks;
    println!(
        "netpeer shared_quantized_state={shared}: {CLIENTS} clients, {OBJECTS} objects x {FIELDS} fields, \
         {CHANGES_PER_TICK} field changes per {TICK_MS} ms tick"
    );
    println!(
        "  bytes/client/s: {:.0} sent vs {:.0} full state every tick ({:.1}x fewer), framing included",
        per_client,
        full_per_client,
        full_per_client / per_client
    );
    println!(
        "  server tick (acks + tick + drain): mean {:?}, p50 {:?}, p99 {:?} -> {:.2} cores at 20 Hz",
        mean,
        pct(&tick_times, 0.5),
        pct(&tick_times, 0.99),
        mean.as_secs_f64() * 20.0
    );
    println!(
        "  change -> all 200 sessions applied (in-process, no network): p50 {:?}, p99 {:?}",
        pct(&cycle_times, 0.5),
        pct(&cycle_times, 0.99)
    );
    let k = sc.server.counters();
    println!(
        "  counters: fulls {} deltas {} acks advanced {} ignored {}",
        k.fulls, k.deltas, k.acks_advanced, k.acks_ignored
    );
}

fn tick(c: &mut Criterion) {
    report(false);
    report(true);
    let mut group = c.benchmark_group("netpeer_tick_200x1000x8");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    for shared in [false, true] {
        let mut sc = Scenario::new(shared);
        group.bench_function(BenchmarkId::new("shared_quantized_state", shared), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    sc.mutate();
                    let t = Instant::now();
                    std::hint::black_box(sc.server_tick());
                    total += t.elapsed();
                    sc.clients_apply();
                }
                total
            });
        });
    }
    group.finish();
}

criterion_group!(benches, tick);
criterion_main!(benches);
