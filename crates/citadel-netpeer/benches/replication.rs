//! The issue-18 scenario against the sans-IO authority: 200 clients in one
//! match (no viewer, so every object is relevant to every client: the worst
//! case), 1 000 server-owned objects of 8 fields, 10 % of all fields (800)
//! changing every tick at 20 Hz. Every client is a real
//! `NetworkPeerSession` that applies what it receives and acknowledges it.
//!
//! Criterion times one server tick: handling the previous tick's acks, the
//! tick itself (relevance, planning, encoding, tokens) and draining the
//! output, with `shared_quantized_state` off and on. Before that, for both
//! paths, a 100-tick (5 s) run with instant delivery prints:
//! - server cores (mean tick time x 20 per second);
//! - bytes per client per second against sending every object's full
//!   bunch every tick, with the per-delta byte accounting (framing, object
//!   id, tokens, mask, values) and the same figures re-priced at 4-byte
//!   tokens (what a long-running server reaches, see the docs).
//!
//! Then one 40-tick run over `SimLink` with explicit time (changes spread
//! over the tick, 20 ms ± 10 ms per direction, 1 % loss) prints p50/p99
//! from a server change to the session applying it.
//!
//! Run: `cargo bench -p citadel-netpeer --bench replication`.

use std::time::{Duration, Instant};

use std::collections::BTreeMap;

use citadel_netcode::sim::{LinkConfig, SimLink};
use citadel_netpeer::class::FieldSpec;
use citadel_netpeer::encode::{Planned, encode_direct, plan};
use citadel_netpeer::{
    Authority, AuthorityConfig, ClassSpec, Evolution, NetworkPeerSession, Value,
};
use citadel_testkit::TestRng;
use citadel_wire::bits::BitReader;
use citadel_wire::netpeer::{BunchBase, DeltaBunch, FieldCodec, FieldValue};
use citadel_wire::quant::{ScalarCodec, Vector3Codec};
use citadel_wire::quat::QuatMode;
use citadel_wire::varint::{read_varint, varint_bits};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};

const CLIENTS: u64 = 200;
const OBJECTS: usize = 1_000;
const FIELDS: u16 = 8;
const CHANGES_PER_TICK: usize = 800;
const TICK_MS: u64 = 50;
/// Envelope framing per kind-13 body on a stream transport (length + kind).
const FRAMING: usize = 6;
/// Envelope framing of a datagram (kind only).
const DATAGRAM_FRAMING: usize = 2;

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

/// Token bytes of a varint-coded token.
fn token_len(t: u64) -> usize {
    varint_bits(t) / 8
}

/// Byte accounting of what was sent.
#[derive(Default)]
struct Tally {
    deltas: usize,
    delta_bytes: usize,
    result_bytes: usize,
    base_bytes: usize,
    fulls: usize,
    full_bytes: usize,
    /// Extra bytes had every token taken 4 varint bytes (at least).
    extra_at_4: usize,
}

impl Tally {
    fn add(&mut self, body: &[u8]) {
        let mut r = BitReader::new(body);
        let (Ok(_), Ok(full), Ok(result)) = (r.read_u32(), r.read_bool(), read_varint(&mut r))
        else {
            return;
        };
        let rl = token_len(result);
        self.extra_at_4 += 4usize.saturating_sub(rl);
        if full {
            self.fulls += 1;
            self.full_bytes += body.len() + FRAMING;
            return;
        }
        let Ok(base) = read_varint(&mut r) else {
            return;
        };
        let bl = token_len(base);
        self.extra_at_4 += 4usize.saturating_sub(bl);
        self.deltas += 1;
        self.delta_bytes += body.len() + FRAMING;
        self.result_bytes += rl;
        self.base_bytes += bl;
    }
}

struct Scenario {
    server: Authority,
    sessions: Vec<NetworkPeerSession>,
    objects: Vec<u32>,
    inbox: Vec<Vec<bytes::Bytes>>,
    acks: Vec<Vec<u8>>,
    rng: TestRng,
    now: u64,
    tally: Tally,
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
            tally: Tally::default(),
        };
        // Bootstrap (every pair's full bunch) and settle into deltas.
        for _ in 0..20 {
            sc.mutate();
            sc.server_tick();
            sc.clients_apply();
        }
        sc.tally = Tally::default();
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
        // Drained after each receiver, as the node's driver does.
        let mut bytes = 0;
        let Scenario {
            server,
            tally,
            inbox,
            now,
            ..
        } = self;
        server.tick_draining(*now, |server| {
            while let Some(out) = server.poll_output() {
                bytes += out.frame.len();
                tally.add(out.body());
                inbox[(out.conn - 1) as usize].push(out.body_bytes());
            }
        });
        self.now += TICK_MS;
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
    /// time" would send each client each tick), with tokens of `token`'s
    /// size.
    fn full_state_bytes(&self, token: u64) -> usize {
        let class = self.server.class(1).expect("class");
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
    let (mut sent, mut full, mut full4) = (0usize, 0usize, 0usize);
    let mut tick_times = Vec::new();
    for _ in 0..ticks {
        sc.mutate();
        let t0 = Instant::now();
        sent += sc.server_tick();
        tick_times.push(t0.elapsed());
        sc.clients_apply();
        full += sc.full_state_bytes(sc.server.counters().tokens_issued.max(1));
        full4 += sc.full_state_bytes(1 << 21);
    }
    tick_times.sort();
    let secs = ticks as f64 * TICK_MS as f64 / 1_000.0;
    let per_s = |bytes: usize| bytes as f64 / CLIENTS as f64 / secs;
    let (sent_s, full_s) = (per_s(sent), full as f64 / secs);
    let (sent4_s, full4_s) = (per_s(sent + sc.tally.extra_at_4), full4 as f64 / secs);
    let mean: Duration = tick_times.iter().sum::<Duration>() / ticks;
    println!(
        "netpeer shared_quantized_state={shared}: {CLIENTS} clients, {OBJECTS} objects x {FIELDS} fields, \
         {CHANGES_PER_TICK} field changes per {TICK_MS} ms tick"
    );
    println!(
        "  server tick (acks + tick + drain): mean {:?}, p50 {:?}, p99 {:?} -> {:.2} cores at 20 Hz",
        mean,
        pct(&tick_times, 0.5),
        pct(&tick_times, 0.99),
        mean.as_secs_f64() * 20.0
    );
    println!(
        "  bytes/client/s ({FRAMING}-byte framing included): {sent_s:.0} sent vs {full_s:.0} full state every tick \
         ({:.2}x fewer); tokens issued {}",
        full_s / sent_s,
        sc.server.counters().tokens_issued
    );
    println!(
        "  same stream at 4-byte tokens (>= 2^21 issued): {sent4_s:.0} vs {full4_s:.0} ({:.2}x fewer)",
        full4_s / sent4_s
    );
    // Datagram envelopes (2-byte kind, no length) instead of stream frames.
    let dgram = |bytes: f64, bodies: f64| bytes - bodies * (FRAMING - DATAGRAM_FRAMING) as f64;
    let bodies_s = per_s(sc.tally.deltas + sc.tally.fulls);
    let full_bodies_s = OBJECTS as f64 * 1_000.0 / TICK_MS as f64;
    println!(
        "  as datagrams ({DATAGRAM_FRAMING}-byte envelope): {:.0} vs {:.0} ({:.2}x); at 4-byte tokens {:.2}x",
        dgram(sent_s, bodies_s),
        dgram(full_s, full_bodies_s),
        dgram(full_s, full_bodies_s) / dgram(sent_s, bodies_s),
        dgram(full4_s, full_bodies_s) / dgram(sent4_s, bodies_s)
    );
    let t = &sc.tally;
    let per = |x: usize| x as f64 / t.deltas.max(1) as f64;
    let delta = per(t.delta_bytes);
    let (rl, bl) = (per(t.result_bytes), per(t.base_bytes));
    let mask = f64::from(FIELDS) / 8.0;
    let header = FRAMING as f64 + 4.0 + 1.0 / 8.0 + rl + bl + mask;
    println!(
        "  per delta ({} deltas, {} fulls): {delta:.2} B = framing {FRAMING} + object id 4 + is_full 1 bit \
         + result_id {rl:.2} + base_id {bl:.2} + mask {mask:.0} (header {header:.2}) + values and pad {:.2}",
        t.deltas,
        t.fulls,
        delta - header
    );
    let k = sc.server.counters();
    println!(
        "  counters: fulls {} deltas {} acks advanced {} ignored {}",
        k.fulls, k.deltas, k.acks_advanced, k.acks_ignored
    );
}

/// Per field of one object: (time of its oldest change not applied, the
/// value the receiver held before it).
type Waiting = BTreeMap<u16, (u64, Value)>;

/// Change → applied latency over `SimLink` in simulated time: changes are
/// spread over each tick (`STEP_MS` steps), bodies and acks cross a lossy
/// link, and a change counts as applied when its receiver applies a bunch
/// sent after it that carries the field (or leaves the receiver holding
/// the server's value). A change overwritten before any
/// tick is timed from the overwrite; one that was sendable and is still
/// missing keeps its time; one that returns the field to the value the
/// receiver holds is dropped (nothing to deliver).
fn latency() {
    const STEP_MS: u64 = 5;
    const TICKS: u64 = 40;
    let link = LinkConfig {
        latency_ms: 20.0,
        jitter_ms: 10.0,
        loss: 0.01,
        duplicate: 0.0,
    };
    let mut sc = Scenario::new(false);
    let schema = sc.server.class(1).expect("class").current().clone();
    let mut down: Vec<SimLink> = (0..CLIENTS).map(|c| SimLink::new(link, 100 + c)).collect();
    let mut up: Vec<SimLink> = (0..CLIENTS).map(|c| SimLink::new(link, 900 + c)).collect();
    // Per client and object.
    let mut waiting: Vec<BTreeMap<u32, Waiting>> = vec![BTreeMap::new(); CLIENTS as usize];
    let mut lat = Vec::new();
    let start = sc.now;
    let end = start + TICKS * TICK_MS;
    let mut now = start;
    let mut last_tick = 0;
    let per_step = CHANGES_PER_TICK / (TICK_MS / STEP_MS) as usize;
    while now < end + 3_000 {
        if now < end {
            for _ in 0..per_step {
                let o = sc.objects[sc.rng.below(OBJECTS as u64) as usize];
                let f = sc.rng.below(u64::from(FIELDS)) as u16;
                let before = sc.server.values(o).expect("object")[usize::from(f)].clone();
                change(&mut sc.rng, &mut sc.server, o, f);
                let after = &sc.server.values(o).expect("object")[usize::from(f)];
                if after.same(&before) {
                    continue;
                }
                for w in &mut waiting {
                    let fields = w.entry(o).or_default();
                    match fields.get(&f) {
                        // Back to what the receiver still holds: nothing to deliver.
                        Some((_, held)) if held.same(after) => {
                            fields.remove(&f);
                        }
                        // Superseded before any tick could send it: time the new value.
                        Some((t, held)) if *t > last_tick => {
                            let held = held.clone();
                            fields.insert(f, (now, held));
                        }
                        // Sendable since `t` and still not applied: keep the oldest.
                        Some(_) => {}
                        None => {
                            fields.insert(f, (now, before.clone()));
                        }
                    }
                }
            }
        }
        if (now - start).is_multiple_of(TICK_MS) {
            last_tick = now;
            sc.server.tick(now);
            while let Some(out) = sc.server.poll_output() {
                let mut packet = now.to_be_bytes().to_vec();
                packet.extend_from_slice(out.body());
                down[(out.conn - 1) as usize].send(now as f64, packet);
            }
        }
        for c in 0..CLIENTS as usize {
            for packet in down[c].poll(now as f64) {
                let (stamp, body) = packet.split_at(8);
                let sent_at = u64::from_be_bytes(stamp.try_into().expect("stamp"));
                let Ok(citadel_netpeer::Outcome::Applied { object_id, .. }) =
                    sc.sessions[c].handle_bunch(body)
                else {
                    continue;
                };
                let bunch = DeltaBunch::decode(body, &schema).expect("decodes");
                let (Some(fields), Some(state), Some(server)) = (
                    waiting[c].get_mut(&object_id),
                    sc.sessions[c].state(object_id),
                    sc.server.values(object_id),
                ) else {
                    continue;
                };
                // Applied: the bunch carries the field, or (a cumulative
                // delta on an older base) the receiver now holds the
                // server's value anyway.
                fields.retain(|f, (t, _)| {
                    let i = usize::from(*f);
                    let done = *t <= sent_at
                        && (bunch.values.iter().any(|(g, _)| g == f)
                            || state[i].as_ref().is_some_and(|v| v.same(&server[i])));
                    if done {
                        lat.push(now - *t);
                    }
                    !done
                });
            }
            while let Some(ack) = sc.sessions[c].poll_ack() {
                up[c].send(now as f64, ack);
            }
            for ack in up[c].poll(now as f64) {
                sc.server.handle_ack(1 + c as u64, &ack);
            }
        }
        now += STEP_MS;
    }
    let open: usize = waiting
        .iter()
        .flat_map(|w| w.values())
        .map(|f| f.len())
        .sum();
    lat.sort_unstable();
    let p = |q: f64| lat[((lat.len() - 1) as f64 * q).round() as usize];
    println!(
        "netpeer change -> applied over SimLink (20 +- 10 ms, 1 % loss, changes every {STEP_MS} ms, \
         {TICKS} ticks, 3 s drain): {} changes x receivers, p50 {} ms, p99 {} ms, max {} ms, not applied {open}",
        lat.len(),
        p(0.5),
        p(0.99),
        p(1.0)
    );
}

fn tick(c: &mut Criterion) {
    report(false);
    report(true);
    latency();
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
