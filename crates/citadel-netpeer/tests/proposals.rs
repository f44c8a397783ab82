//! The trust boundary (§6.3): each pipeline rule has a proposal that breaks
//! it; the drop is silent (no output), counted under its reason, and the
//! server state is unchanged. Then the accepted path: veto and correction,
//! a panicking hook, the rebroadcast and its byte budget, and compatible
//! schema evolution.

mod common;

use citadel_netpeer::class::FieldSpec;
use citadel_netpeer::{
    Authority, AuthorityConfig, ClassSpec, Evolution, Limits, NetworkPeerSession, NoVeto, Proposal,
    Rejection, Value, VetoHook,
};
use citadel_wire::bits::BitWriter;
use citadel_wire::netpeer::{BunchBase, DeltaBunch, FieldCodec, FieldValue};
use citadel_wire::varint::write_varint;
use common::*;

const OWNER: u64 = 1;
const PEER: u64 = 2;
const GUEST: u64 = 3;

struct World {
    s: Authority,
    session: NetworkPeerSession,
    obj: u32,
    now: u64,
}

/// Owner 1 and peer 2 in match 0, a guest 3 owning a persistent object,
/// an object in match 1; the owner's session holds its object.
fn world(config: AuthorityConfig) -> World {
    let mut s = Authority::new(config).expect("config");
    s.register_class(ship_spec()).expect("class");
    s.connect(OWNER, false, 0);
    s.connect(PEER, false, 0);
    s.connect(GUEST, true, 0);
    let obj = s.spawn(SHIP, 0, Some(OWNER), false).expect("spawn");
    let mut session = ship_session(&s);
    s.tick(0);
    while let Some(out) = s.poll_output() {
        if out.conn == OWNER {
            session.handle_bunch(out.body()).expect("applies");
        }
    }
    World {
        s,
        session,
        obj,
        now: 0,
    }
}

impl World {
    fn propose(&mut self, conn: u64, body: &[u8]) -> Result<citadel_netpeer::Applied, Rejection> {
        let r = self.s.handle_proposal(conn, body, self.now, &mut NoVeto);
        // Accepted proposals rebroadcast; keep the queue for the next check.
        while self.s.poll_output().is_some() {}
        r
    }

    /// [`Self::rejects`] of a full bunch (result id 1) of `values`.
    fn rejects_full(
        &mut self,
        conn: u64,
        object_id: u32,
        values: Vec<(u16, FieldValue)>,
        why: Rejection,
    ) {
        let body = bunch(object_id, 1, BunchBase::Full, values, &self.s);
        self.rejects(conn, &body, why);
    }

    /// Asserts `body` from `conn` is dropped for `why` with nothing changed
    /// and nothing sent.
    fn rejects(&mut self, conn: u64, body: &[u8], why: Rejection) {
        let before: Vec<Vec<Value>> = (1..=3)
            .filter_map(|o| self.s.values(o).map(<[Value]>::to_vec))
            .collect();
        let count = self.s.counters().rejected[why as usize];
        assert_eq!(
            self.s.handle_proposal(conn, body, self.now, &mut NoVeto),
            Err(why)
        );
        let after: Vec<Vec<Value>> = (1..=3)
            .filter_map(|o| self.s.values(o).map(<[Value]>::to_vec))
            .collect();
        assert_eq!(before, after, "{why:?}: state unchanged");
        assert!(self.s.poll_output().is_none(), "{why:?}: silent");
        assert_eq!(self.s.counters().rejected[why as usize], count + 1);
    }

    fn pos(&self) -> Value {
        self.s.values(self.obj).expect("object")[usize::from(POS)].clone()
    }
}

fn pos(x: f32) -> (u16, FieldValue) {
    (POS, FieldValue::Vector3([x, 0.0, 0.0]))
}

fn bunch(
    object_id: u32,
    result_id: u64,
    base: BunchBase,
    values: Vec<(u16, FieldValue)>,
    s: &Authority,
) -> Vec<u8> {
    DeltaBunch {
        object_id,
        result_id,
        base,
        values,
    }
    .encode(s.class(SHIP).expect("class").current())
    .expect("encodes")
}

#[test]
fn size_rate_and_addressing_rules() -> TestResult {
    let mut w = world(AuthorityConfig::default());
    let good = w.session.propose(w.obj, &[pos(1.0)])?;
    w.rejects(99, &good, Rejection::UnknownConnection);
    w.rejects(OWNER, &vec![0u8; 65_537], Rejection::Oversize);
    w.rejects(OWNER, &[0, 0, 1], Rejection::Malformed);
    w.rejects_full(OWNER, 999, vec![pos(1.0)], Rejection::UnknownObject);
    let elsewhere = w.s.spawn(SHIP, 1, Some(OWNER), false)?;
    w.rejects_full(OWNER, elsewhere, vec![pos(1.0)], Rejection::CrossMatch);
    // A full bunch naming another identity.
    let mut wrong = good.clone();
    wrong[6] ^= 0x10;
    w.rejects(OWNER, &wrong, Rejection::Schema);
    // 240 bunches per second: the 241st in the same instant is refused.
    let mut w = world(AuthorityConfig::default());
    for _ in 0..240 {
        assert_eq!(w.propose(OWNER, &[0, 0, 0]), Err(Rejection::Malformed));
    }
    let good = w.session.propose(w.obj, &[pos(1.0)])?;
    w.rejects(OWNER, &good, Rejection::RateBunches);
    w.now = 1_000;
    assert!(w.propose(OWNER, &good).is_ok(), "the bucket refilled");
    // Byte budget.
    let mut w = world(AuthorityConfig {
        limits: Limits {
            bytes_per_sec: 40,
            ..Limits::default()
        },
        ..AuthorityConfig::default()
    });
    let body = w.session.propose(w.obj, &[pos(1.0)])?;
    assert!(body.len() <= 40);
    assert!(w.propose(OWNER, &body).is_ok());
    let body = w.session.propose(w.obj, &[pos(2.0)])?;
    w.rejects(OWNER, &body, Rejection::RateBytes);
    Ok(())
}

#[test]
fn ownership_and_authority_rules() -> TestResult {
    let mut w = world(AuthorityConfig {
        limits: Limits {
            max_fields_per_bunch: 2,
            ..Limits::default()
        },
        ..AuthorityConfig::default()
    });
    let obj = w.obj;
    w.rejects_full(PEER, obj, vec![pos(1.0)], Rejection::NotOwner);
    w.rejects_full(
        OWNER,
        obj,
        vec![(HEALTH, FieldValue::Int(1))],
        Rejection::NotClientOwned,
    );
    w.rejects_full(
        OWNER,
        obj,
        vec![(CARGO, FieldValue::Collection(Default::default()))],
        Rejection::NotClientOwned,
    );
    w.rejects_full(
        OWNER,
        obj,
        vec![
            pos(1.0),
            (ROT, FieldValue::Quat([0.0, 0.0, 0.0, 1.0])),
            (AMMO, FieldValue::Int(3)),
        ],
        Rejection::TooManyFields,
    );
    let persistent = w.s.spawn(SHIP, 0, Some(GUEST), true)?;
    w.rejects_full(
        GUEST,
        persistent,
        vec![pos(1.0)],
        Rejection::GuestPersistent,
    );
    let guest_own = w.s.spawn(SHIP, 0, Some(GUEST), false)?;
    assert!(
        w.propose(
            GUEST,
            &bunch(guest_own, 1, BunchBase::Full, vec![pos(1.0)], &w.s)
        )
        .is_ok()
    );
    Ok(())
}

#[test]
fn binding_and_result_id_rules() -> TestResult {
    let mut w = world(AuthorityConfig::default());
    let obj = w.obj;
    w.rejects(
        OWNER,
        &bunch(obj, 2, BunchBase::Delta(1), vec![pos(1.0)], &w.s),
        Rejection::NoBinding,
    );
    assert!(
        w.propose(OWNER, &bunch(obj, 5, BunchBase::Full, vec![pos(1.0)], &w.s))
            .is_ok()
    );
    w.rejects(
        OWNER,
        &bunch(obj, 5, BunchBase::Delta(4), vec![pos(2.0)], &w.s),
        Rejection::StaleResultId,
    );
    w.rejects(
        OWNER,
        &bunch(obj, 3, BunchBase::Delta(2), vec![pos(2.0)], &w.s),
        Rejection::StaleResultId,
    );
    w.rejects(
        OWNER,
        &bunch(obj, 5, BunchBase::Full, vec![pos(2.0)], &w.s),
        Rejection::StaleResultId,
    );
    assert!(
        w.propose(
            OWNER,
            &bunch(obj, 6, BunchBase::Delta(5), vec![pos(2.0)], &w.s)
        )
        .is_ok()
    );
    // An owner change drops the binding: the new epoch needs a full bunch.
    w.s.set_owner(obj, Some(OWNER))?;
    w.rejects(
        OWNER,
        &bunch(obj, 7, BunchBase::Delta(6), vec![pos(3.0)], &w.s),
        Rejection::NoBinding,
    );
    Ok(())
}

/// A full bunch of the ship whose only value is the raw `code` of AMMO's
/// neighbour-free field: built bit by bit so it can break a bound.
fn raw_full(s: &Authority, obj: u32, field: u16, value_bits: &[(u64, u32)]) -> Vec<u8> {
    let schema = s.class(SHIP).expect("class").current();
    let mut w = BitWriter::new();
    w.write_bits(u64::from(obj), 32);
    w.write_bool(true);
    write_varint(&mut w, 1);
    w.write_bytes(schema.schema_hash());
    w.write_bits(u64::from(schema.layout_version()), 32);
    for i in 0..schema.fields().len() {
        w.write_bool(i == usize::from(field));
    }
    for &(v, n) in value_bits {
        w.write_bits(v, n);
    }
    w.into_bytes()
}

#[test]
fn bounds_field_rate_and_cooldown_rules() -> TestResult {
    let mut w = world(AuthorityConfig {
        limits: Limits {
            fields_per_sec: 3,
            cooldown_ms: 0,
            ..Limits::default()
        },
        ..AuthorityConfig::default()
    });
    let obj = w.obj;
    // POS x: 14 bits for 16 001 codes; 16 383 is past the range.
    let oob = raw_full(&w.s, obj, POS, &[(16_383, 14), (0, 14), (0, 14)]);
    w.rejects(OWNER, &oob, Rejection::OutOfBounds);
    let ok = raw_full(&w.s, obj, POS, &[(8_000, 14), (8_000, 14), (8_000, 14)]);
    assert!(w.propose(OWNER, &ok).is_ok());
    // 3 fields per second: the oob one, the ok one, then one more.
    let next = bunch(obj, 2, BunchBase::Delta(1), vec![pos(5.0)], &w.s);
    assert!(w.propose(OWNER, &next).is_ok());
    w.rejects(
        OWNER,
        &bunch(obj, 3, BunchBase::Delta(2), vec![pos(6.0)], &w.s),
        Rejection::RateFields,
    );

    // Cooldown on one field.
    let mut spec = ship_spec();
    spec.fields[usize::from(POS)] = spec.fields[usize::from(POS)].clone().cooldown_ms(1_000);
    let mut s = Authority::new(AuthorityConfig::default()).expect("config");
    s.register_class(spec)?;
    s.connect(OWNER, false, 0);
    let obj = s.spawn(SHIP, 0, Some(OWNER), false)?;
    let mut w = World {
        session: ship_session(&s),
        s,
        obj,
        now: 0,
    };
    assert!(
        w.propose(OWNER, &bunch(obj, 1, BunchBase::Full, vec![pos(1.0)], &w.s))
            .is_ok()
    );
    w.now = 500;
    w.rejects(
        OWNER,
        &bunch(obj, 2, BunchBase::Delta(1), vec![pos(2.0)], &w.s),
        Rejection::Cooldown,
    );
    w.now = 1_000;
    assert!(
        w.propose(
            OWNER,
            &bunch(obj, 3, BunchBase::Delta(1), vec![pos(3.0)], &w.s)
        )
        .is_ok()
    );
    Ok(())
}

struct VetoAmmo;
impl VetoHook for VetoAmmo {
    fn veto(&mut self, p: &Proposal<'_>) -> Vec<u16> {
        p.fields
            .iter()
            .map(|(f, _)| *f)
            .filter(|f| *f == AMMO)
            .collect()
    }
}

struct Panics;
impl VetoHook for Panics {
    fn veto(&mut self, _: &Proposal<'_>) -> Vec<u16> {
        panic!("hook bug")
    }
}

#[test]
fn veto_corrects_the_owner_and_a_panicking_hook_vetoes_everything() -> TestResult {
    let mut w = world(AuthorityConfig::default());
    let obj = w.obj;
    let body = w
        .session
        .propose(obj, &[pos(7.0), (AMMO, FieldValue::Int(9))])?;
    let r =
        w.s.handle_proposal(OWNER, &body, 0, &mut VetoAmmo)
            .map_err(|e| format!("{e:?}"))?;
    assert_eq!((r.applied, r.vetoed), (vec![POS], vec![AMMO]));
    assert_eq!(
        w.s.values(obj).expect("object")[usize::from(AMMO)],
        Value::Plain(FieldValue::Int(0))
    );
    let out: Vec<_> = std::iter::from_fn(|| w.s.poll_output()).collect();
    let correction = out
        .iter()
        .find(|o| o.conn == OWNER)
        .expect("a correction to the owner");
    assert_eq!(correction.body()[4] & 0x80, 0x80, "a full server bunch");
    assert!(
        out.iter().any(|o| o.conn == PEER),
        "the accepted part is rebroadcast"
    );
    assert_eq!(w.s.counters().full_correction, 1);

    let before = w.pos();
    let body = w.session.propose(obj, &[pos(8.0)])?;
    let r =
        w.s.handle_proposal(OWNER, &body, 0, &mut Panics)
            .map_err(|e| format!("{e:?}"))?;
    assert!(r.applied.is_empty());
    assert_eq!(w.pos(), before);
    Ok(())
}

/// Asserts the commit of `pending` is dropped as stale with `obj` unchanged.
fn commit_is_stale(w: &mut World, pending: citadel_netpeer::Pending, obj: u32) {
    let before = w.s.values(obj).map(<[Value]>::to_vec);
    let stale = w.s.counters().rejected[Rejection::Stale as usize];
    assert_eq!(
        w.s.commit_proposal(pending, &[], w.now),
        Err(Rejection::Stale)
    );
    assert_eq!(w.s.values(obj).map(<[Value]>::to_vec), before);
    assert_eq!(
        w.s.counters().rejected[Rejection::Stale as usize],
        stale + 1
    );
    while w.s.poll_output().is_some() {}
    // Nothing was bound: the session's next proposal starts with a full.
    w.session.rebind(obj);
}

#[test]
fn two_phase_validates_without_applying_and_commit_rechecks_the_state() -> TestResult {
    let mut w = world(AuthorityConfig::default());
    let obj = w.obj;
    let before = w.pos();
    // Validation applies nothing, sends nothing, counts nothing but buckets.
    let body = w
        .session
        .propose(obj, &[pos(3.0), (AMMO, FieldValue::Int(5))])?;
    let pending =
        w.s.validate_proposal(OWNER, &body, 0)
            .map_err(|e| format!("{e:?}"))?;
    let seen = pending.proposal();
    assert_eq!(
        (seen.conn, seen.object_id, seen.class_id),
        (OWNER, obj, SHIP)
    );
    assert_eq!(seen.fields.len(), 2);
    assert_eq!(pending.field_ids(), vec![POS, AMMO]);
    assert_eq!(w.pos(), before);
    assert!(w.s.poll_output().is_none());
    assert_eq!(w.s.counters().proposals_applied, 0);
    // A rule broken at validation is counted there, as in handle_proposal.
    assert_eq!(
        w.s.validate_proposal(PEER, &body, 0),
        Err(Rejection::NotOwner)
    );
    assert_eq!(w.s.counters().rejected[Rejection::NotOwner as usize], 1);
    // The verdict vetoes AMMO: POS applies, the owner gets a correction.
    let r =
        w.s.commit_proposal(pending, &[AMMO], 0)
            .map_err(|e| format!("{e:?}"))?;
    assert_eq!((r.applied, r.vetoed), (vec![POS], vec![AMMO]));
    assert_ne!(w.pos(), before);
    assert_eq!(w.s.counters().full_correction, 1);
    assert_eq!(w.s.counters().proposals_applied, 1);
    while w.s.poll_output().is_some() {}

    // Each change between the phases makes the commit stale.
    let body = w.session.propose(obj, &[pos(4.0)])?;
    let pending =
        w.s.validate_proposal(OWNER, &body, 0)
            .map_err(|e| format!("{e:?}"))?;
    w.s.set_owner(obj, Some(PEER))?;
    commit_is_stale(&mut w, pending, obj);
    w.s.set_owner(obj, Some(OWNER))?;

    let body = w.session.propose(obj, &[pos(5.0)])?;
    let pending =
        w.s.validate_proposal(OWNER, &body, 0)
            .map_err(|e| format!("{e:?}"))?;
    w.s.move_connection(OWNER, 1)?;
    commit_is_stale(&mut w, pending, obj);
    w.s.move_connection(OWNER, 0)?;

    // Two proposals validated against the same binding: the second one's
    // result_id is no longer above the applied one.
    let body = w.session.propose(obj, &[pos(6.0)])?;
    let first =
        w.s.validate_proposal(OWNER, &body, 0)
            .map_err(|e| format!("{e:?}"))?;
    let again =
        w.s.validate_proposal(OWNER, &body, 0)
            .map_err(|e| format!("{e:?}"))?;
    assert!(w.s.commit_proposal(first, &[], 0).is_ok());
    commit_is_stale(&mut w, again, obj);

    let body = w.session.propose(obj, &[pos(7.0)])?;
    let pending =
        w.s.validate_proposal(OWNER, &body, 0)
            .map_err(|e| format!("{e:?}"))?;
    assert!(w.s.despawn(obj));
    commit_is_stale(&mut w, pending, obj);
    Ok(())
}

#[test]
fn rebroadcast_reaches_relevant_peers_within_the_byte_budget() -> TestResult {
    let mut s = Authority::new(AuthorityConfig {
        limits: Limits {
            bytes_per_sec: 60,
            ..Limits::default()
        },
        ..AuthorityConfig::default()
    })
    .expect("config");
    s.register_class(ship_spec())?;
    for c in 1..=5 {
        s.connect(c, false, 0);
    }
    let obj = s.spawn(SHIP, 0, Some(OWNER), false)?;
    let mut sessions: Vec<_> = (1..=5).map(|_| ship_session(&s)).collect();
    s.tick(0);
    // Every receiver applies and acks its full, so the change goes as
    // deltas (a pair whose full is unacked waits for that ack).
    while let Some(out) = s.poll_output() {
        sessions[(out.conn - 1) as usize].handle_bunch(out.body())?;
    }
    for (i, session) in sessions.iter_mut().enumerate() {
        while let Some(a) = session.poll_ack() {
            s.handle_ack(i as u64 + 1, &a);
        }
    }
    let session = &mut sessions[(OWNER - 1) as usize];
    let body = session.propose(obj, &[pos(4.0)])?;
    let r = s
        .handle_proposal(OWNER, &body, 0, &mut NoVeto)
        .map_err(|e| format!("{e:?}"))?;
    let out: Vec<_> = std::iter::from_fn(|| s.poll_output()).collect();
    assert!(out.iter().all(|o| o.conn != OWNER), "never to the proposer");
    assert_eq!(out.len(), r.rebroadcast);
    assert!(
        r.rebroadcast >= 1 && r.rebroadcast < 4,
        "budget cut it short: {}",
        r.rebroadcast
    );
    assert_eq!(s.counters().rebroadcast_budget_stops, 1);
    // The peers it did not reach get the change with the next tick.
    s.tick(50);
    let rest: Vec<_> = std::iter::from_fn(|| s.poll_output()).collect();
    assert_eq!(
        rest.iter().filter(|o| o.conn != OWNER).count(),
        4 - r.rebroadcast
    );
    Ok(())
}

fn evolving(version: u32, older: Vec<(u32, usize)>, min_version: u32) -> ClassSpec {
    let f = |n: &str| FieldSpec::new(n, FieldCodec::IntRange { min: 0, max: 50 }).client_owned();
    ClassSpec {
        class_id: 40,
        layout_version: version,
        fields: vec![f("a"), f("b"), f("c")],
        evolution: if older.is_empty() {
            Evolution::Strict
        } else {
            Evolution::Compatible { older, min_version }
        },
        position_field: None,
    }
}

#[test]
fn compatible_evolution_accepts_listed_prefix_versions_above_the_floor() -> TestResult {
    let mut s = Authority::new(AuthorityConfig::default()).expect("config");
    s.register_class(evolving(3, vec![(2, 2), (1, 1)], 2))?;
    let v2 = s.class(40).expect("class").versions()[1].schema.clone();
    let v1 = s.class(40).expect("class").versions()[2].schema.clone();
    assert_eq!(v2.fields().len(), 2);
    s.connect(OWNER, false, 0);
    s.set_client_version(OWNER, 40, 2)?;
    let obj = s.spawn(40, 0, Some(OWNER), false)?;
    s.set(obj, 2, &FieldValue::Int(33))?;
    let mut old = NetworkPeerSession::default();
    old.register(v2.clone());
    s.tick(0);
    while let Some(out) = s.poll_output() {
        old.handle_bunch(out.body())?;
    }
    assert_eq!(
        old.state(obj).expect("held").len(),
        2,
        "decoded with v2's exact schema"
    );
    let body = old.propose(obj, &[(1, FieldValue::Int(20))])?;
    s.handle_proposal(OWNER, &body, 0, &mut NoVeto)
        .map_err(|e| format!("{e:?}"))?;
    let vals = s.values(obj).expect("object");
    assert_eq!(vals[1], Value::Plain(FieldValue::Int(20)));
    assert_eq!(
        vals[2],
        Value::Plain(FieldValue::Int(33)),
        "omitted field keeps the server value"
    );
    // Below the floor: v1 is listed but refused.
    let below = DeltaBunch {
        object_id: obj,
        result_id: 9,
        base: BunchBase::Full,
        values: vec![(0, FieldValue::Int(1))],
    }
    .encode(&v1)?;
    assert_eq!(
        s.handle_proposal(OWNER, &below, 0, &mut NoVeto),
        Err(Rejection::Schema)
    );
    // Strict classes accept only the current version.
    let mut strict = Authority::new(AuthorityConfig::default()).expect("config");
    strict.register_class(evolving(3, Vec::new(), 3))?;
    strict.connect(OWNER, false, 0);
    let obj = strict.spawn(40, 0, Some(OWNER), false)?;
    let v2_body = DeltaBunch {
        object_id: obj,
        result_id: 1,
        base: BunchBase::Full,
        values: vec![(0, FieldValue::Int(1))],
    }
    .encode(&v2)?;
    assert_eq!(
        strict.handle_proposal(OWNER, &v2_body, 0, &mut NoVeto),
        Err(Rejection::Schema)
    );
    Ok(())
}
