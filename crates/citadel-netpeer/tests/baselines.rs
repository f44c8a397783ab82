//! The server → client rules of §6.2 one at a time: full first, deltas
//! against the last acked state, the pending and collection caps and the
//! ack timeout forcing full bunches, the ack rules, relevance with
//! hysteresis, COND masking and the kind-15 table.

mod common;

use std::collections::BTreeMap;

use citadel_netpeer::class::{Cond, FieldSpec};
use citadel_netpeer::{Authority, AuthorityConfig, ClassSpec, Evolution, NetworkPeerSession};
use citadel_wire::netpeer::{
    BunchBase, DeltaBunch, FieldCodec, FieldValue, RepAck, RepAckEntry, RepId,
};
use common::*;

fn server(config: AuthorityConfig) -> Authority {
    let mut s = Authority::new(config).expect("config");
    s.register_class(ship_spec()).expect("class");
    s
}

fn drain(s: &mut Authority) -> Vec<Vec<u8>> {
    std::iter::from_fn(|| s.poll_output())
        .map(|o| o.body().to_vec())
        .collect()
}

fn base_of(s: &Authority, class: u32, body: &[u8]) -> BunchBase {
    DeltaBunch::decode(body, s.class(class).expect("class").current())
        .expect("server bunch decodes")
        .base
}

fn ack(object_id: u32, token: u64) -> Vec<u8> {
    let mut b = Vec::new();
    RepAck {
        entries: vec![RepAckEntry {
            object_id,
            acked_result_id: token,
            history: 0,
        }],
    }
    .encode_into(&mut b);
    b
}

fn token_of(body: &[u8], s: &Authority) -> u64 {
    DeltaBunch::decode(body, s.class(SHIP).expect("class").current())
        .expect("decodes")
        .result_id
}

#[test]
fn full_first_then_deltas_against_the_acked_state() -> TestResult {
    let mut s = server(AuthorityConfig::default());
    s.connect(1, false, 0);
    let o = s.spawn(SHIP, 0, None, false)?;
    s.tick(0);
    let out = drain(&mut s);
    assert_eq!(out.len(), 1);
    assert_eq!(base_of(&s, SHIP, &out[0]), BunchBase::Full);
    let t1 = token_of(&out[0], &s);
    s.tick(50);
    assert!(drain(&mut s).is_empty(), "nothing changed, nothing sent");
    // Unacked: the change waits for the full's ack (no second full).
    s.set(o, HEALTH, &FieldValue::Int(5))?;
    s.tick(100);
    assert!(
        drain(&mut s).is_empty(),
        "the first full is still in flight"
    );
    // Acking t1 makes t1 the base: the waiting change goes as a delta.
    assert_eq!(s.handle_ack(1, &ack(o, t1)), 1);
    s.tick(150);
    let out = drain(&mut s);
    assert_eq!(base_of(&s, SHIP, &out[0]), BunchBase::Delta(t1));
    let t2 = token_of(&out[0], &s);
    assert!(t2 > t1);
    // t2 unacked: the next delta is cumulative against t1, only health.
    s.set(o, HEALTH, &FieldValue::Int(6))?;
    s.tick(200);
    let out = drain(&mut s);
    assert_eq!(base_of(&s, SHIP, &out[0]), BunchBase::Delta(t1));
    let t3 = token_of(&out[0], &s);
    assert!(t3 > t2);
    let d = DeltaBunch::decode(&out[0], s.class(SHIP).expect("class").current())?;
    assert_eq!(d.values, vec![(HEALTH, FieldValue::Int(6))]);
    // A later ack of t3 advances; t1 again does not regress.
    assert_eq!(s.handle_ack(1, &ack(o, t3)), 1);
    assert_eq!(s.handle_ack(1, &ack(o, t1)), 0, "older token ignored");
    assert_eq!(s.handle_ack(1, &ack(o, t3)), 0, "same token is not newer");
    assert_eq!(s.handle_ack(1, &ack(o, t3 + 1000)), 0, "never issued");
    assert_eq!(s.handle_ack(1, &ack(o + 1, t3)), 0, "unknown pair");
    assert_eq!(s.handle_ack(1, &[0xff]), 0, "malformed");
    s.set(o, HEALTH, &FieldValue::Int(7))?;
    s.tick(250);
    let out = drain(&mut s);
    assert_eq!(base_of(&s, SHIP, &out[0]), BunchBase::Delta(t3));
    let k = s.counters();
    assert_eq!((k.acks_malformed, k.acks_advanced), (1, 2));
    Ok(())
}

#[test]
fn the_pending_cap_forces_a_full_bunch_and_clears_pending() -> TestResult {
    let mut s = server(AuthorityConfig {
        ack_timeout_ms: 600_000,
        ..AuthorityConfig::default()
    });
    s.connect(1, false, 0);
    let o = s.spawn(SHIP, 0, None, false)?;
    s.tick(0);
    let full = drain(&mut s);
    s.handle_ack(1, &ack(o, token_of(&full[0], &s)));
    let mut kinds = Vec::new();
    for i in 0..70 {
        s.set(o, HEALTH, &FieldValue::Int(i % 100))?;
        s.tick(50 * (i as u64 + 1));
        for b in drain(&mut s) {
            kinds.push(base_of(&s, SHIP, &b) == BunchBase::Full);
        }
    }
    // 64 deltas fill the pending window, the 65th send is full, and with no
    // acked base everything after it is full too.
    assert!(kinds[..64].iter().all(|full| !full));
    assert!(kinds[64..].iter().all(|full| *full));
    assert_eq!(s.counters().full_pending_cap, 1);
    Ok(())
}

fn crate_spec(max_items: u32) -> ClassSpec {
    ClassSpec {
        class_id: 9,
        layout_version: 1,
        fields: vec![FieldSpec::new(
            "crates",
            FieldCodec::Collection {
                item: Box::new(FieldCodec::Bool),
                max_items,
            },
        )],
        evolution: Evolution::Strict,
        position_field: None,
    }
}

fn items(n: u32, value: bool) -> BTreeMap<RepId, (u64, FieldValue)> {
    (0..n)
        .map(|i| {
            (
                RepId {
                    index: i,
                    generation: 0,
                },
                (u64::from(i), FieldValue::Bool(value)),
            )
        })
        .collect()
}

#[test]
fn the_collection_cap_forces_a_full_bunch() -> TestResult {
    let mut s = Authority::new(AuthorityConfig::default()).expect("config");
    s.register_class(crate_spec(10_000))?;
    let mut session = NetworkPeerSession::default();
    session.register(s.class(9).expect("class").current().clone());
    s.connect(1, false, 0);
    let o = s.spawn(9, 0, None, false)?;
    let mut step = |s: &mut Authority, now: u64| -> Vec<BunchBase> {
        s.tick(now);
        let out = drain(s);
        for b in &out {
            session.handle_bunch(b).expect("applies");
        }
        while let Some(a) = session.poll_ack() {
            s.handle_ack(1, &a);
        }
        out.iter().map(|b| base_of(s, 9, b)).collect()
    };
    assert_eq!(step(&mut s, 0), vec![BunchBase::Full]);
    s.set_items(o, 0, items(4_096, false))?;
    assert!(
        matches!(step(&mut s, 50)[..], [BunchBase::Delta(_)]),
        "4 096 ops: delta"
    );
    s.set_items(o, 0, items(4_097, true))?;
    assert_eq!(step(&mut s, 100), vec![BunchBase::Full], "4 097 ops: full");
    assert_eq!(s.counters().full_collection_cap, 1);
    let state = session.state(o).expect("held");
    assert_eq!(state[0], Some(s.values(o).expect("object")[0].clone()));
    Ok(())
}

#[test]
fn the_ack_timeout_rebaselines_with_a_full_bunch() -> TestResult {
    let mut s = server(AuthorityConfig {
        ack_timeout_ms: 1_000,
        ..AuthorityConfig::default()
    });
    s.connect(1, false, 0);
    s.spawn(SHIP, 0, None, false)?;
    s.tick(0);
    assert_eq!(drain(&mut s).len(), 1);
    s.tick(999);
    assert!(drain(&mut s).is_empty());
    s.tick(1_000);
    let out = drain(&mut s);
    assert_eq!(out.len(), 1);
    assert_eq!(base_of(&s, SHIP, &out[0]), BunchBase::Full);
    assert_eq!(s.counters().full_ack_timeout, 1);
    Ok(())
}

#[test]
fn relevance_enters_within_inner_leaves_beyond_outer_and_reenters_full() -> TestResult {
    let mut s = server(AuthorityConfig::default());
    s.connect(1, false, 0);
    let o = s.spawn(SHIP, 0, None, false)?;
    s.set(o, POS, &FieldValue::Vector3([0.0, 0.0, 0.0]))?;
    s.set_viewer(1, Some([150.0, 0.0, 0.0]))?;
    s.tick(0);
    assert!(s.relevant(1).is_empty(), "150 > inner 100");
    s.set_viewer(1, Some([90.0, 0.0, 0.0]))?;
    s.tick(50);
    assert_eq!(s.relevant(1), vec![o]);
    let first = drain(&mut s);
    s.handle_ack(1, &ack(o, token_of(&first[0], &s)));
    s.set_viewer(1, Some([120.0, 0.0, 0.0]))?;
    s.tick(100);
    assert_eq!(s.relevant(1), vec![o], "hysteresis: 120 ≤ outer 125");
    s.set_viewer(1, Some([190.0, 0.0, 0.0]))?;
    s.tick(150);
    assert!(s.relevant(1).is_empty(), "beyond outer: baseline dropped");
    s.set_viewer(1, Some([10.0, 0.0, 0.0]))?;
    s.tick(200);
    let again = drain(&mut s);
    assert_eq!(again.len(), 1);
    assert_eq!(
        base_of(&s, SHIP, &again[0]),
        BunchBase::Full,
        "re-entry is full"
    );
    // The owner always sees its own object, wherever it looks.
    s.set_owner(o, Some(1))?;
    s.set_viewer(1, Some([900.0, 900.0, 0.0]))?;
    s.tick(250);
    assert_eq!(s.relevant(1), vec![o]);
    Ok(())
}

fn cond_spec() -> ClassSpec {
    let conds = [
        Cond::None,
        Cond::OwnerOnly,
        Cond::SkipOwner,
        Cond::InitialOnly,
        Cond::SimulatedOnly,
        Cond::AutonomousOnly,
        Cond::Custom,
        Cond::Never,
    ];
    ClassSpec {
        class_id: 3,
        layout_version: 1,
        fields: conds
            .iter()
            .enumerate()
            .map(|(i, c)| {
                FieldSpec::new(format!("f{i}"), FieldCodec::IntRange { min: 0, max: 9 }).cond(*c)
            })
            .collect(),
        evolution: Evolution::Strict,
        position_field: None,
    }
}

#[test]
fn cond_masking_per_receiver() -> TestResult {
    let mut s = Authority::new(AuthorityConfig::default()).expect("config");
    s.register_class(cond_spec())?;
    let mut sessions: Vec<NetworkPeerSession> = (0..2)
        .map(|_| {
            let mut x = NetworkPeerSession::default();
            x.register(s.class(3).expect("class").current().clone());
            x
        })
        .collect();
    s.connect(1, false, 0);
    s.connect(2, false, 0);
    let o = s.spawn(3, 0, Some(1), false)?;
    for f in 0..8 {
        s.set(o, f, &FieldValue::Int(1))?;
    }
    let mut now = 0;
    let mut round = |s: &mut Authority, sessions: &mut Vec<NetworkPeerSession>| {
        s.tick(now);
        now += 50;
        while let Some(out) = s.poll_output() {
            let x = &mut sessions[(out.conn - 1) as usize];
            x.handle_bunch(out.body()).expect("applies");
            while let Some(a) = x.poll_ack() {
                s.handle_ack(out.conn, &a);
            }
        }
    };
    round(&mut s, &mut sessions);
    let seen = |x: &NetworkPeerSession| -> Vec<Option<i64>> {
        x.state(o)
            .expect("held")
            .iter()
            .map(|v| match v {
                Some(citadel_netpeer::Value::Plain(FieldValue::Int(i))) => Some(*i),
                _ => None,
            })
            .collect()
    };
    //                          None     Owner    Skip     Init     Sim      Auto     Custom Never
    assert_eq!(
        seen(&sessions[0]),
        [Some(1), Some(1), None, Some(1), None, Some(1), None, None]
    );
    assert_eq!(
        seen(&sessions[1]),
        [Some(1), None, Some(1), Some(1), Some(1), None, None, None]
    );
    // InitialOnly changes do not travel in deltas.
    for f in 0..8 {
        s.set(o, f, &FieldValue::Int(2))?;
    }
    round(&mut s, &mut sessions);
    assert_eq!(
        seen(&sessions[0]),
        [Some(2), Some(2), None, Some(1), None, Some(2), None, None]
    );
    assert_eq!(
        seen(&sessions[1]),
        [Some(2), None, Some(2), Some(1), Some(2), None, None, None]
    );
    Ok(())
}

#[test]
fn the_schema_table_names_every_class() -> TestResult {
    let s = server(AuthorityConfig::default());
    let known = ship_session(&s);
    let checks = known.handle_schema_table(&s.schema_table())?;
    assert_eq!(checks.len(), 1);
    assert_eq!((checks[0].class_id, checks[0].known), (SHIP, true));
    let unknown = NetworkPeerSession::default();
    assert!(!unknown.handle_schema_table(&s.schema_table())?[0].known);
    Ok(())
}

/// One tick's output grouped by receiver, with each body's token.
fn tick_out(s: &mut Authority, now: u64) -> BTreeMap<u64, Vec<bytes::Bytes>> {
    s.tick(now);
    let mut by_conn: BTreeMap<u64, Vec<bytes::Bytes>> = BTreeMap::new();
    while let Some(o) = s.poll_output() {
        by_conn.entry(o.conn).or_default().push(o.body_bytes());
    }
    by_conn
}

/// Applies every body to its receiver's session; acks reach the server
/// only from `acking` (the others' acks are lost).
fn deliver(
    s: &mut Authority,
    sessions: &mut [NetworkPeerSession],
    out: &BTreeMap<u64, Vec<bytes::Bytes>>,
    acking: &[u64],
) -> TestResult {
    for (&conn, bodies) in out {
        let session = &mut sessions[(conn - 1) as usize];
        for b in bodies {
            session.handle_bunch(b)?;
        }
        while let Some(a) = session.poll_ack() {
            if acking.contains(&conn) {
                s.handle_ack(conn, &a);
            }
        }
    }
    Ok(())
}

#[test]
fn receivers_with_equal_bases_share_one_bunch_and_late_acks_reconverge() -> TestResult {
    for shared in [false, true] {
        let mut s = server(AuthorityConfig {
            shared_quantized_state: shared,
            ..AuthorityConfig::default()
        });
        for c in 1..=3 {
            s.connect(c, false, 0);
        }
        let o = s.spawn(SHIP, 0, None, false)?;
        let mut sessions: Vec<NetworkPeerSession> = (0..3).map(|_| ship_session(&s)).collect();
        // Bootstrap: one full, minted once, the same Bytes for everyone.
        let out = tick_out(&mut s, 0);
        let bodies: Vec<&bytes::Bytes> = out.values().flatten().collect();
        assert_eq!(bodies.len(), 3);
        assert!(bodies.iter().all(|b| b.as_ptr() == bodies[0].as_ptr()));
        assert_eq!(s.counters().tokens_issued, 1);
        let t_full = token_of(bodies[0], &s);
        deliver(&mut s, &mut sessions, &out, &[1, 2, 3])?;
        // Equal bases again: one delta for all; conn 2's ack is lost.
        s.set(o, HEALTH, &FieldValue::Int(40))?;
        let out = tick_out(&mut s, 50);
        let bodies: Vec<&bytes::Bytes> = out.values().flatten().collect();
        assert!(bodies.iter().all(|b| b.as_ptr() == bodies[0].as_ptr()));
        assert_eq!(base_of(&s, SHIP, bodies[0]), BunchBase::Delta(t_full));
        let t2 = token_of(bodies[0], &s);
        deliver(&mut s, &mut sessions, &out, &[1, 3])?;
        // Two bases now: conns 1 and 3 share a delta on t2, conn 2 gets its
        // own cumulative delta on the full. All three reach the same state,
        // so they get the same result token.
        s.set(o, TAG, &FieldValue::Bytes(b"two".to_vec()))?;
        let out = tick_out(&mut s, 100);
        let one = out.get(&1).ok_or("conn 1")?;
        let two = out.get(&2).ok_or("conn 2")?;
        let three = out.get(&3).ok_or("conn 3")?;
        assert_eq!(one[0].as_ptr(), three[0].as_ptr(), "shared by equal bases");
        assert_eq!(base_of(&s, SHIP, &one[0]), BunchBase::Delta(t2));
        assert_eq!(base_of(&s, SHIP, &two[0]), BunchBase::Delta(t_full));
        let lagging = DeltaBunch::decode(&two[0], s.class(SHIP).ok_or("class")?.current())?;
        let fields: Vec<u16> = lagging.values.iter().map(|(f, _)| *f).collect();
        assert_eq!(fields, vec![HEALTH, TAG], "cumulative against its own base");
        assert_ne!(one[0].as_ptr(), two[0].as_ptr(), "a different base");
        let t3 = token_of(&one[0], &s);
        assert!(t3 > t2);
        assert_eq!(token_of(&two[0], &s), t3, "one token per result state");
        assert_eq!(s.counters().tokens_issued, 3);
        deliver(&mut s, &mut sessions, &out, &[1, 2, 3])?;
        for (i, session) in sessions.iter().enumerate() {
            assert_converged(&s, i as u64 + 1, session);
        }
        // Everyone acked t3: one shared bunch again, on the same base.
        s.set(o, HEALTH, &FieldValue::Int(41))?;
        let out = tick_out(&mut s, 150);
        let bodies: Vec<&bytes::Bytes> = out.values().flatten().collect();
        assert_eq!(bodies.len(), 3);
        assert!(bodies.iter().all(|b| b.as_ptr() == bodies[0].as_ptr()));
        assert_eq!(base_of(&s, SHIP, bodies[0]), BunchBase::Delta(t3));
        assert_eq!(s.counters().tokens_issued, 4);
        deliver(&mut s, &mut sessions, &out, &[1, 2, 3])?;
        for (i, session) in sessions.iter().enumerate() {
            assert_converged(&s, i as u64 + 1, session);
        }
    }
    Ok(())
}

#[test]
fn owner_and_peers_get_their_own_bunches() -> TestResult {
    let mut s = server(AuthorityConfig::default());
    for c in 1..=3 {
        s.connect(c, false, 0);
    }
    let o = s.spawn(SHIP, 0, Some(1), false)?;
    s.set(o, AMMO, &FieldValue::Int(9))?;
    let out = tick_out(&mut s, 0);
    let (own, p2, p3) = (&out[&1][0], &out[&2][0], &out[&3][0]);
    assert_eq!(p2.as_ptr(), p3.as_ptr(), "peers share");
    assert_ne!(own, p2, "the owner's view differs (OwnerOnly ammo)");
    let mut sessions: Vec<NetworkPeerSession> = (0..3).map(|_| ship_session(&s)).collect();
    deliver(&mut s, &mut sessions, &out, &[1, 2, 3])?;
    for (i, session) in sessions.iter().enumerate() {
        assert_converged(&s, i as u64 + 1, session);
    }
    Ok(())
}

#[test]
fn objects_spawned_or_moved_in_after_a_tick_reach_viewerless_receivers() -> TestResult {
    let mut s = server(AuthorityConfig::default());
    s.connect(1, false, 0);
    s.tick(0);
    assert!(drain(&mut s).is_empty(), "nothing to send yet");
    // A spawn after the connection's first relevance pass still enters.
    let o = s.spawn(SHIP, 0, None, false)?;
    s.tick(50);
    assert_eq!(drain(&mut s).len(), 1);
    assert_eq!(s.relevant(1), vec![o]);
    // So does an object moved into the match later.
    let p = s.spawn(SHIP, 5, None, false)?;
    s.tick(100);
    assert!(drain(&mut s).is_empty(), "another match");
    s.move_object(p, 0)?;
    s.tick(150);
    assert_eq!(drain(&mut s).len(), 1);
    assert_eq!(s.relevant(1), vec![o, p]);
    Ok(())
}

/// A change reverted before its delta is acked: the planner finds nothing
/// new against the acked base, but the receiver applies the outstanding
/// delta, so the server must follow up once that delta is acked.
#[test]
fn a_change_reverted_before_its_ack_is_followed_up() -> TestResult {
    let mut s = server(AuthorityConfig::default());
    let mut session = ship_session(&s);
    s.connect(1, false, 0);
    let o = s.spawn(SHIP, 0, None, false)?;
    s.tick(0);
    for body in drain(&mut s) {
        session.handle_bunch(&body)?;
    }
    let full = session.poll_ack().expect("ack of the full");
    s.handle_ack(1, &full);
    s.set(o, HEALTH, &FieldValue::Int(40))?;
    s.tick(50);
    let delta = drain(&mut s);
    assert_eq!(delta.len(), 1);
    // Reverted before the delta's ack: nothing differs from the acked base.
    s.set(o, HEALTH, &FieldValue::Int(0))?;
    s.tick(100);
    assert!(drain(&mut s).is_empty());
    // The receiver applies the outstanding delta and acks it.
    session.handle_bunch(&delta[0])?;
    let ack = session.poll_ack().expect("ack of the delta");
    assert_eq!(s.handle_ack(1, &ack), 1);
    s.tick(150);
    let out = drain(&mut s);
    assert_eq!(out.len(), 1, "the revert follows the acked delta");
    session.handle_bunch(&out[0])?;
    assert_converged(&s, 1, &session);
    Ok(())
}

#[test]
fn jittered_acks_keep_the_distinct_bunches_per_tick_bounded() -> TestResult {
    // 12 receivers whose acks each arrive 0 to 3 ticks late, at random. A
    // token names the result state, so receivers that acked the same
    // revision share a base: the bunches per tick stay bounded by how many
    // recent revisions can be someone's base, not by the receiver count.
    let mut s = server(AuthorityConfig::default());
    let receivers = 12u64;
    for c in 1..=receivers {
        s.connect(c, false, 0);
    }
    let o = s.spawn(SHIP, 0, None, false)?;
    let mut sessions: Vec<NetworkPeerSession> = (0..receivers).map(|_| ship_session(&s)).collect();
    let mut rng = citadel_testkit::TestRng::new(0x5eed);
    let mut in_flight: Vec<(u64, u64, Vec<u8>)> = Vec::new();
    let mut most_bodies = 0;
    let mut most_tokens = 0;
    for tick in 0..80u64 {
        let now = tick * 50;
        let (arrived, later): (Vec<_>, Vec<_>) =
            in_flight.drain(..).partition(|(at, _, _)| *at <= tick);
        in_flight = later;
        for (_, conn, a) in arrived {
            s.handle_ack(conn, &a);
        }
        s.set(o, HEALTH, &FieldValue::Int(tick as i64 % 90))?;
        let before = s.counters().tokens_issued;
        let out = tick_out(&mut s, now);
        let mut bodies: Vec<*const u8> = out.values().flatten().map(|b| b.as_ptr()).collect();
        bodies.sort();
        bodies.dedup();
        if tick >= 10 {
            most_bodies = most_bodies.max(bodies.len());
            most_tokens = most_tokens.max(s.counters().tokens_issued - before);
        }
        for (&conn, list) in &out {
            let session = &mut sessions[(conn - 1) as usize];
            for b in list {
                session.handle_bunch(b)?;
            }
            while let Some(a) = session.poll_ack() {
                in_flight.push((tick + 1 + rng.below(4), conn, a));
            }
        }
    }
    assert!(
        most_bodies <= 5,
        "distinct bunches in one tick: {most_bodies}"
    );
    assert!(most_tokens <= 2, "tokens minted in one tick: {most_tokens}");
    for (_, conn, a) in in_flight.drain(..) {
        s.handle_ack(conn, &a);
    }
    let out = tick_out(&mut s, 80 * 50);
    deliver(&mut s, &mut sessions, &out, &[])?;
    for (i, session) in sessions.iter().enumerate() {
        assert_converged(&s, i as u64 + 1, session);
    }
    Ok(())
}

/// What each drain of a tick handed over: (receiver, frame).
type Drains = Vec<Vec<(u64, bytes::Bytes)>>;

#[test]
fn envelopes_come_framed_and_a_draining_tick_hands_them_over_receiver_by_receiver() -> TestResult {
    let run = |draining: bool, packing: bool| -> Result<Drains, Box<dyn std::error::Error>> {
        let mut s = server(AuthorityConfig::default());
        if packing {
            s.set_output_packing(Some(16 * 1024));
        }
        for c in 1..=3 {
            s.connect(c, false, 0);
        }
        for _ in 0..4 {
            s.spawn(SHIP, 0, None, false)?;
        }
        let mut drains: Drains = Vec::new();
        let mut take = |s: &mut Authority| {
            let got: Vec<_> = std::iter::from_fn(|| s.poll_output())
                .map(|o| (o.conn, o.frame))
                .collect();
            if !got.is_empty() {
                drains.push(got);
            }
        };
        if draining {
            s.tick_draining(0, &mut take);
        } else {
            s.tick(0);
            take(&mut s);
        }
        Ok(drains)
    };
    let whole = run(false, false)?;
    let by_receiver = run(true, false)?;
    assert_eq!(whole.len(), 1, "a plain tick queues everything");
    assert_eq!(by_receiver.len(), 3, "one drain per receiver");
    for d in &by_receiver {
        assert_eq!(d.len(), 4, "each receiver's four fulls");
        assert!(
            d.iter().all(|(c, _)| *c == d[0].0),
            "one receiver per drain"
        );
    }
    // Same envelopes, same order, whichever way the tick was drained.
    assert_eq!(whole[0], by_receiver.concat());
    // Each is a framed kind-13 envelope whose body is the bunch; receivers
    // of the same bunch share one frame.
    for (_, frame) in &whole[0] {
        let mut buf = bytes::BytesMut::from(&frame[..]);
        let env = citadel_wire::decode_framed(&mut buf)?.ok_or("a whole frame")?;
        assert!(buf.is_empty());
        assert_eq!(env.kind, citadel_wire::protocol::KIND_REP_DELTA);
        assert_eq!(
            base_of(&server(AuthorityConfig::default()), SHIP, &env.body),
            BunchBase::Full
        );
    }
    let (a, b) = (&whole[0][0].1, &whole[0][4].1);
    assert_eq!(
        a, b,
        "receivers 1 and 2 get the same full of the first object"
    );
    assert_eq!(a.as_ptr(), b.as_ptr(), "and share its frame");
    // Packed: one output per receiver holding its four envelopes back to
    // back, byte for byte the unpacked ones.
    let packed = run(true, true)?;
    assert_eq!(packed.len(), 3);
    for (d, unpacked) in packed.iter().zip(&by_receiver) {
        assert_eq!(d.len(), 1, "one burst per receiver");
        assert_eq!(d[0].0, unpacked[0].0);
        assert_eq!(
            d[0].1,
            unpacked
                .iter()
                .flat_map(|(_, f)| f.to_vec())
                .collect::<Vec<u8>>()
        );
    }
    Ok(())
}
