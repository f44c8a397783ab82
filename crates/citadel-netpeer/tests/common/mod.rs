//! Shared test fixtures: one class touching every codec and condition, and
//! helpers to compare a session's state with the server's.
#![allow(dead_code)]

use std::collections::BTreeMap;

use citadel_netpeer::class::{Cond, FieldSpec};
use citadel_netpeer::{Authority, ClassSpec, ConnId, Evolution, NetworkPeerSession, Value};
use citadel_testkit::TestRng;
use citadel_wire::netpeer::{FieldCodec, FieldValue, RepId};
use citadel_wire::quant::{ScalarCodec, Vector3Codec};
use citadel_wire::quat::{QuatMode, quantize_quat};

pub type TestResult = Result<(), Box<dyn std::error::Error>>;

pub const SHIP: u32 = 7;
pub const POS: u16 = 0;
pub const ROT: u16 = 1;
pub const HEALTH: u16 = 2;
pub const AMMO: u16 = 3;
pub const SPEED: u16 = 4;
pub const TEAM: u16 = 5;
pub const TAG: u16 = 6;
pub const CARGO: u16 = 7;
pub const SECRET: u16 = 8;

pub fn ship_spec() -> ClassSpec {
    let vec3 = Vector3Codec::new([-1000.0; 3], [1000.0; 3], 8).expect("vector codec");
    let scalar = ScalarCodec::new(-100.0, 100.0, 4).expect("scalar codec");
    ClassSpec {
        class_id: SHIP,
        layout_version: 1,
        fields: vec![
            FieldSpec::new("pos", FieldCodec::Vector3(vec3)).client_owned(),
            FieldSpec::new("rot", FieldCodec::Quat(QuatMode::Bits10)).client_owned(),
            FieldSpec::new("health", FieldCodec::IntRange { min: 0, max: 100 }),
            FieldSpec::new("ammo", FieldCodec::IntRange { min: 0, max: 255 })
                .cond(Cond::OwnerOnly)
                .client_owned(),
            FieldSpec::new("speed", FieldCodec::Scalar(scalar)).cond(Cond::SkipOwner),
            FieldSpec::new("team", FieldCodec::IntRange { min: 0, max: 7 }).cond(Cond::InitialOnly),
            FieldSpec::new("tag", FieldCodec::Bytes { max_len: 16 }),
            FieldSpec::new(
                "cargo",
                FieldCodec::Collection {
                    item: Box::new(FieldCodec::IntRange { min: 0, max: 1000 }),
                    max_items: 64,
                },
            ),
            FieldSpec::new("secret", FieldCodec::Bool).cond(Cond::Never),
        ],
        evolution: Evolution::Strict,
        position_field: Some(POS),
    }
}

/// A session that knows the ship class's current schema.
pub fn ship_session(server: &Authority) -> NetworkPeerSession {
    let mut s = NetworkPeerSession::default();
    let class = server.class(SHIP).expect("ship registered");
    for v in class.versions() {
        s.register(v.schema.clone());
    }
    s
}

/// Random in-bounds change of one field (never TEAM, the InitialOnly one,
/// nor SECRET).
pub fn random_change(rng: &mut TestRng, server: &mut Authority, object: u32) {
    let field = *rng.pick(&[POS, ROT, HEALTH, AMMO, SPEED, TAG, CARGO]);
    let f = |rng: &mut TestRng, r: f32| rng.signed_unit_f32() * r;
    let r = match field {
        POS => server.set(
            object,
            POS,
            &FieldValue::Vector3([f(rng, 300.0), f(rng, 300.0), f(rng, 20.0)]),
        ),
        ROT => server.set(
            object,
            ROT,
            &FieldValue::Quat([f(rng, 1.0), f(rng, 1.0), f(rng, 1.0), f(rng, 1.0)]),
        ),
        HEALTH => server.set(object, HEALTH, &FieldValue::Int(rng.below(101) as i64)),
        AMMO => server.set(object, AMMO, &FieldValue::Int(rng.below(256) as i64)),
        SPEED => server.set(object, SPEED, &FieldValue::Scalar(f(rng, 100.0))),
        TAG => {
            let mut b = vec![0u8; rng.below(17) as usize];
            rng.fill_bytes(&mut b);
            server.set(object, TAG, &FieldValue::Bytes(b))
        }
        _ => {
            let mut items = BTreeMap::new();
            for _ in 0..rng.below(6) {
                let id = RepId {
                    index: rng.below(10) as u32,
                    generation: rng.below(3) as u32,
                };
                items.insert(
                    id,
                    (rng.below(1000), FieldValue::Int(rng.below(1001) as i64)),
                );
            }
            server.set_items(object, CARGO, items)
        }
    };
    r.expect("in-bounds change");
}

/// A value as a receiver decodes it. Smallest-three re-compression is not
/// always idempotent (two near-equal largest components may swap), so a
/// quaternion is compared through one wire round trip; every other codec's
/// stored value already is its own round trip.
pub fn wire(v: &Value) -> Value {
    match v {
        Value::Plain(FieldValue::Quat(q)) => {
            Value::Plain(FieldValue::Quat(quantize_quat(QuatMode::Bits10, *q)))
        }
        other => other.clone(),
    }
}

/// Asserts `session` holds exactly what `conn` may see of every object the
/// server considers relevant to it: visible fields equal, hidden ones
/// absent.
pub fn assert_converged(server: &Authority, conn: ConnId, session: &NetworkPeerSession) {
    let class = server.class(SHIP).expect("ship");
    for object in server.relevant(conn) {
        let values = server.values(object).expect("object");
        let owner = server.owner_of(object) == Some(conn);
        let state = session
            .state(object)
            .unwrap_or_else(|| panic!("conn {conn}: object {object} never arrived"));
        for (i, spec) in class.fields().iter().enumerate() {
            let want: Option<Value> = spec.cond.visible(owner, true).then(|| wire(&values[i]));
            assert_eq!(
                state[i], want,
                "conn {conn}, object {object}, field {} ({:?})",
                spec.name, spec.cond
            );
        }
    }
}
