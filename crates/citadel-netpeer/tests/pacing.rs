//! Pacing of full bunches (`bootstrap_per_tick`) over citadel-netcode's
//! SimLink. A receiver joining a match of 5 000 changing objects over a
//! lossy, reordering, duplicating link is never sent more than N full
//! bunches in a tick, gets no delta for an object before that object's full
//! bunch, and converges exactly; ack-timeout re-baselines of every pair at
//! once are paced the same way; the nearest objects go first, and leaving
//! relevance while waiting cancels the full.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use citadel_netcode::sim::{LinkConfig, SimLink};
use citadel_netpeer::{Authority, AuthorityConfig, NetworkPeerSession, Outcome};
use citadel_testkit::TestRng;
use citadel_wire::netpeer::{BunchBase, DeltaBunch, FieldValue};
use common::*;

const TICK_MS: u64 = 50;

fn server(bootstrap_per_tick: usize) -> Authority {
    let config = AuthorityConfig {
        bootstrap_per_tick,
        ..AuthorityConfig::default()
    };
    let mut server = Authority::new(config).expect("config");
    server.register_class(ship_spec()).expect("class");
    server
}

fn lossy(seed: u64) -> SimLink {
    let config = LinkConfig {
        latency_ms: 40.0,
        jitter_ms: 120.0,
        loss: 0.2,
        duplicate: 0.1,
    };
    SimLink::new(config, seed)
}

struct Receiver {
    conn: u64,
    session: NetworkPeerSession,
    down: SimLink,
    up: SimLink,
    /// Objects this receiver was sent a full bunch of.
    had_full: BTreeSet<u32>,
    /// Late deltas onto a base the session already replaced.
    needs_full: u64,
}

impl Receiver {
    fn new(server: &mut Authority, conn: u64, now: u64, seed: u64) -> Self {
        server.connect(conn, false, now);
        Receiver {
            conn,
            session: ship_session(server),
            down: lossy(seed ^ conn.wrapping_mul(7_919)),
            up: lossy(seed ^ conn.wrapping_mul(104_729)),
            had_full: BTreeSet::new(),
            needs_full: 0,
        }
    }

    /// Delivers what arrived by `now` and sends the acks back.
    fn exchange(&mut self, server: &mut Authority, now: u64) {
        for body in self.down.poll(now as f64) {
            match self.session.handle_bunch(&body) {
                Ok(Outcome::NeedsFull { .. }) => self.needs_full += 1,
                Ok(_) => {}
                Err(e) => panic!("a server bunch was rejected: {e}"),
            }
        }
        while let Some(ack) = self.session.poll_ack() {
            self.up.send(now as f64, ack);
        }
        for body in self.up.poll(now as f64) {
            server.handle_ack(self.conn, &body);
        }
    }
}

/// Ticks the server and hands every body to its receiver's downlink;
/// returns the full bunches per receiver of this tick. A delta for an
/// object the receiver was never sent a full of fails the test.
fn tick(server: &mut Authority, rx: &mut [Receiver], now: u64) -> BTreeMap<u64, usize> {
    server.tick(now);
    let mut fulls = BTreeMap::new();
    while let Some(out) = server.poll_output() {
        let schema = server.class(SHIP).expect("class").current();
        let bunch = DeltaBunch::decode(out.body(), schema).expect("server bunch decodes");
        let r = rx
            .iter_mut()
            .find(|r| r.conn == out.conn)
            .expect("known receiver");
        if bunch.base == BunchBase::Full {
            *fulls.entry(out.conn).or_insert(0) += 1;
            r.had_full.insert(bunch.object_id);
        } else {
            assert!(
                r.had_full.contains(&bunch.object_id),
                "conn {}: delta for object {} before its full bunch",
                r.conn,
                bunch.object_id
            );
        }
        r.down.send(now as f64, out.body().to_vec());
    }
    fulls
}

#[test]
fn a_receiver_joining_5000_objects_is_paced_and_converges() {
    const N: usize = 64;
    let mut server = server(N);
    let mut rng = TestRng::new(42);
    let objects: Vec<u32> = (0..5_000)
        .map(|_| server.spawn(SHIP, 0, None, false).expect("spawn"))
        .collect();
    let mut rx = vec![Receiver::new(&mut server, 1, 0, 42)];
    let (join_at, change_until, end) = (3_000, 9_000, 30_000);
    let mut max_fulls = 0;
    let mut joiner_ticks_with_fulls = 0;
    let mut now = 0;
    while now <= end {
        if now == join_at {
            rx.push(Receiver::new(&mut server, 2, now, 42));
        }
        if now < change_until {
            for _ in 0..100 {
                let o = *rng.pick(&objects);
                random_change(&mut rng, &mut server, o);
            }
        }
        let fulls = tick(&mut server, &mut rx, now);
        for (&conn, &n) in &fulls {
            assert!(n <= N, "conn {conn}: {n} full bunches at {now} ms");
            max_fulls = max_fulls.max(n);
        }
        if now == join_at && N < 5_000 {
            assert_eq!(fulls.get(&2), Some(&N), "the first tick fills the budget");
            assert!(server.counters().fulls_waiting > 0);
        }
        if fulls.contains_key(&2) {
            joiner_ticks_with_fulls += 1;
        }
        for r in &mut rx {
            r.exchange(&mut server, now);
        }
        now += TICK_MS;
    }
    assert_eq!(max_fulls, N.min(5_000));
    assert!(
        joiner_ticks_with_fulls >= 5_000 / N,
        "{joiner_ticks_with_fulls} ticks"
    );
    let k = server.counters();
    assert!(N >= 5_000 || k.full_deferred > 0, "{k:?}");
    assert_eq!(k.fulls_waiting, 0, "everyone bootstrapped: {k:?}");
    assert!(k.full_ack_timeout > 0, "losses were repaired: {k:?}");
    for r in &rx {
        assert_eq!(server.relevant(r.conn).len(), 5_000);
        assert_converged(&server, r.conn, &r.session);
    }
}

#[test]
fn ack_timeout_re_baselines_of_every_pair_are_paced() {
    const N: usize = 50;
    let mut server = server(N);
    let objects: Vec<u32> = (0..1_000)
        .map(|_| server.spawn(SHIP, 0, None, false).expect("spawn"))
        .collect();
    let mut session = ship_session(&server);
    server.connect(1, false, 0);
    let mut now = 0;
    let deliver = |server: &mut Authority, session: &mut NetworkPeerSession, pass: bool| {
        let mut fulls = 0;
        while let Some(out) = server.poll_output() {
            let schema = server.class(SHIP).expect("class").current();
            let bunch = DeltaBunch::decode(out.body(), schema).expect("decodes");
            fulls += usize::from(bunch.base == BunchBase::Full);
            if pass {
                session.handle_bunch(out.body()).expect("applies");
            }
        }
        if let Some(ack) = session.poll_ack() {
            server.handle_ack(1, &ack);
        }
        fulls
    };
    // Bootstrap over a perfect link: 1 000 / 50 ticks.
    let mut ticks = 0;
    while server.counters().fulls < 1_000 || server.counters().fulls_waiting > 0 {
        server.tick(now);
        assert!(deliver(&mut server, &mut session, true) <= N);
        ticks += 1;
        now += TICK_MS;
    }
    assert_eq!(ticks, 1_000 / N);
    // Every object changes, and the link goes dark past the ack timeout.
    for &o in &objects {
        server
            .set(o, HEALTH, &FieldValue::Int(i64::from(o % 100)))
            .expect("set");
    }
    let dark_until = now + 1_500;
    while now < dark_until {
        server.tick(now);
        assert!(deliver(&mut server, &mut session, false) <= N);
        now += TICK_MS;
    }
    let k = server.counters().clone();
    assert!(k.full_ack_timeout > 0 && k.fulls_waiting > 0, "{k:?}");
    // The link comes back: the paced re-baselines repair everything.
    for _ in 0..(1_000 / N + 30) {
        server.tick(now);
        assert!(deliver(&mut server, &mut session, true) <= N);
        now += TICK_MS;
    }
    assert_eq!(server.counters().fulls_waiting, 0);
    assert_converged(&server, 1, &session);
}

#[test]
fn nearest_first_and_leaving_relevance_cancels_the_wait() {
    const N: usize = 10;
    let mut server = server(N);
    let mut order: Vec<u32> = (0..300)
        .map(|_| server.spawn(SHIP, 0, None, false).expect("spawn"))
        .collect();
    // Spawn order is not distance order: the k-th of a shuffle sits k/4
    // units from the origin (exact at the codec's 8 steps per unit, all
    // within `inner`).
    let mut rng = TestRng::new(9);
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i as u64 + 1) as usize);
    }
    for (k, &id) in order.iter().enumerate() {
        let pos = FieldValue::Vector3([k as f32 / 4.0, 0.0, 0.0]);
        server.set(id, POS, &pos).expect("pos");
    }
    server.connect(1, false, 0);
    server.set_viewer(1, Some([0.0; 3])).expect("viewer");
    server.tick(0);
    let schema = server.class(SHIP).expect("class").current().clone();
    let mut sent = Vec::new();
    while let Some(out) = server.poll_output() {
        sent.push(
            DeltaBunch::decode(out.body(), &schema)
                .expect("decodes")
                .object_id,
        );
    }
    assert_eq!(sent, order[..N].to_vec(), "the nearest ten, nearest first");
    assert_eq!(server.counters().fulls_waiting, 290);
    // The viewer leaves before the rest went: their fulls are cancelled.
    server
        .set_viewer(1, Some([5_000.0, 5_000.0, 0.0]))
        .expect("viewer");
    server.tick(TICK_MS);
    assert!(server.poll_output().is_none(), "nothing sent after leaving");
    assert!(server.relevant(1).is_empty());
    let k = server.counters();
    assert_eq!((k.fulls, k.fulls_waiting), (N as u64, 0), "{k:?}");
}
