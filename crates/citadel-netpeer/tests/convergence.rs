//! Convergence over citadel-netcode's SimLink: 20 % loss, reordering
//! (jitter larger than the tick) and duplication in both directions. The
//! server keeps changing objects (every codec, owners, OwnerOnly and
//! SkipOwner fields, collections), viewers move through the grid so pairs
//! leave and re-enter relevance; after the changes stop, every receiver
//! must hold exactly the server's state as it may see it. The shared
//! values path (§6.5) must produce the very same bytes as the default one.
//! Receivers whose acked bases are equal share one bunch (and token), the
//! others get their own; every receiver sees strictly increasing tokens
//! per object.

mod common;

use std::collections::BTreeMap;

use citadel_netcode::sim::{LinkConfig, SimLink};
use citadel_netpeer::{Authority, AuthorityConfig, NetworkPeerSession, Outcome};
use citadel_testkit::TestRng;
use citadel_wire::netpeer::DeltaBunch;
use common::*;

const TICK_MS: u64 = 50;

struct Client {
    conn: u64,
    session: NetworkPeerSession,
    down: SimLink,
    up: SimLink,
    needs_full: u64,
}

struct Run {
    server: Authority,
    clients: Vec<Client>,
    /// Every body the server sent, in order.
    stream: Vec<(u64, Vec<u8>)>,
}

fn lossy() -> LinkConfig {
    LinkConfig {
        latency_ms: 40.0,
        jitter_ms: 120.0,
        loss: 0.2,
        duplicate: 0.1,
    }
}

fn run(shared: bool, seed: u64, viewers: bool) -> Run {
    let config = AuthorityConfig {
        shared_quantized_state: shared,
        ..AuthorityConfig::default()
    };
    let mut server = Authority::new(config).expect("config");
    server.register_class(ship_spec()).expect("class");
    let mut rng = TestRng::new(seed);
    let mut clients: Vec<Client> = (1..=6u64)
        .map(|conn| {
            server.connect(conn, false, 0);
            Client {
                conn,
                session: ship_session(&server),
                down: SimLink::new(lossy(), seed ^ (conn * 7919)),
                up: SimLink::new(lossy(), seed ^ (conn * 104_729)),
                needs_full: 0,
            }
        })
        .collect();
    let objects: Vec<u32> = (0..40)
        .map(|i| {
            let owner = (i % 3 == 0).then_some(1 + (i as u64 % 6));
            server.spawn(SHIP, 0, owner, false).expect("spawn")
        })
        .collect();
    let mut stream = Vec::new();
    let mut last_token: BTreeMap<(u64, u32), u64> = BTreeMap::new();
    let change_until = 8_000;
    let end = 30_000;
    let mut now = 0;
    while now <= end {
        if now < change_until {
            for _ in 0..12 {
                let o = *rng.pick(&objects);
                random_change(&mut rng, &mut server, o);
            }
            if now % 1_000 == 0 {
                let o = *rng.pick(&objects);
                let owner = (rng.below(3) > 0).then(|| 1 + rng.below(6));
                server.set_owner(o, owner).expect("owner");
            }
            if viewers && now % 500 == 0 {
                for c in &clients {
                    let v = [
                        rng.signed_unit_f32() * 300.0,
                        rng.signed_unit_f32() * 300.0,
                        0.0,
                    ];
                    server.set_viewer(c.conn, Some(v)).expect("viewer");
                }
            }
        }
        server.tick(now);
        while let Some(out) = server.poll_output() {
            let schema = server.class(SHIP).expect("class").current();
            let bunch = DeltaBunch::decode(out.body(), schema).expect("server bunch decodes");
            let last = last_token.insert((out.conn, bunch.object_id), bunch.result_id);
            assert!(
                last.is_none_or(|t| t < bunch.result_id),
                "tokens strictly increase per receiver and object"
            );
            stream.push((out.conn, out.body().to_vec()));
            let c = &mut clients[(out.conn - 1) as usize];
            c.down.send(now as f64, out.body().to_vec());
        }
        for c in &mut clients {
            for body in c.down.poll(now as f64) {
                match c.session.handle_bunch(&body) {
                    Ok(Outcome::NeedsFull { .. }) => c.needs_full += 1,
                    Ok(_) => {}
                    Err(e) => panic!("a server bunch was rejected: {e}"),
                }
            }
            while let Some(ack) = c.session.poll_ack() {
                c.up.send(now as f64, ack);
            }
            for body in c.up.poll(now as f64) {
                server.handle_ack(c.conn, &body);
            }
        }
        now += TICK_MS;
    }
    Run {
        server,
        clients,
        stream,
    }
}

#[test]
fn every_receiver_converges_over_a_lossy_reordering_duplicating_link() {
    for seed in [1, 2, 3] {
        let r = run(false, seed, false);
        for c in &r.clients {
            assert_eq!(
                r.server.relevant(c.conn).len(),
                40,
                "no viewer: whole match"
            );
            assert_converged(&r.server, c.conn, &c.session);
        }
        let k = r.server.counters();
        assert!(k.deltas > k.fulls, "deltas dominate: {k:?}");
        assert!(
            k.full_ack_timeout > 0,
            "losses were repaired by timeouts: {k:?}"
        );
        assert!(r.clients[0].down.dropped > 0);
        assert!(
            k.tokens_issued < k.fulls + k.deltas,
            "receivers with equal bases shared bunches: {k:?}"
        );
    }
}

#[test]
fn receivers_converge_while_relevance_changes() {
    for seed in [11, 12] {
        let r = run(false, seed, true);
        let k = r.server.counters();
        assert!(
            k.relevance_exit > 0 && k.relevance_enter > k.relevance_exit,
            "{k:?}"
        );
        for c in &r.clients {
            assert_converged(&r.server, c.conn, &c.session);
        }
    }
}

#[test]
fn shared_values_are_byte_identical_to_the_default_path() {
    for (seed, viewers) in [(5, false), (6, true)] {
        let plain = run(false, seed, viewers);
        let shared = run(true, seed, viewers);
        assert_eq!(plain.stream.len(), shared.stream.len());
        assert!(plain.stream == shared.stream, "same bodies, same order");
        for c in &shared.clients {
            assert_converged(&shared.server, c.conn, &c.session);
        }
    }
}
