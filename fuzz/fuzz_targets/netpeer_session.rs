//! The NetworkPeer client session's bunch apply and the authority's
//! proposal pipeline on arbitrary bytes. The first byte picks the side
//! (even: session, odd: server), the rest is a kind-13 body.
//!
//! Session: two objects are held (42 with bases 3 and 7, 5 with base 128,
//! the fixtures' ids) under the fixtures' example schema plus a collection
//! field. Whatever the body, the call returns; a rejection or "needs full"
//! leaves every held state as it was and queues no ack, and an applied
//! bunch leaves an ack that decodes.
//!
//! Server: the body is proposed by the owner of object 1 (a ClientOwned
//! Vector3 and IntRange, a ServerOnly field); a rejection changes no value.
#![no_main]

use citadel_netpeer::class::FieldSpec;
use citadel_netpeer::{
    Authority, AuthorityConfig, ClassSpec, Evolution, NetworkPeerSession, NoVeto, Outcome,
};
use citadel_wire::netpeer::{BunchBase, ClassSchema, DeltaBunch, FieldCodec, FieldValue, RepAck};
use citadel_wire::quant::{ScalarCodec, Vector3Codec};
use citadel_wire::quat::QuatMode;
use libfuzzer_sys::fuzz_target;

fn schema() -> ClassSchema {
    let fields = vec![
        FieldCodec::Bool,
        FieldCodec::IntRange { min: 0, max: 100 },
        FieldCodec::Scalar(ScalarCodec::new(-1000.0, 1000.0, 4).expect("scalar codec")),
        FieldCodec::Vector3(Vector3Codec::new([-1000.0; 3], [1000.0; 3], 4).expect("vector codec")),
        FieldCodec::Quat(QuatMode::Bits10),
        FieldCodec::Bytes { max_len: 32 },
        FieldCodec::Collection {
            item: Box::new(FieldCodec::IntRange { min: 0, max: 1000 }),
            max_items: 64,
        },
    ];
    ClassSchema::new(fields, std::array::from_fn(|i| i as u8), 1).expect("valid schema")
}

fn session_side(body: &[u8]) {
    let schema = schema();
    let mut s = NetworkPeerSession::default();
    s.register(schema.clone());
    for (object_id, result_id) in [(42, 3), (42, 7), (5, 128)] {
        let seed = DeltaBunch {
            object_id,
            result_id,
            base: BunchBase::Full,
            values: vec![(1, FieldValue::Int(9))],
        }
        .encode(&schema)
        .expect("seed encodes");
        s.handle_bunch(&seed).expect("seed applies");
    }
    while s.poll_ack().is_some() {}
    let before: Vec<_> = s.objects().map(|o| (o, s.state(o).cloned())).collect();
    match s.handle_bunch(body) {
        Ok(Outcome::Applied { .. }) => {
            let ack = s.poll_ack().expect("an applied bunch is acknowledged");
            RepAck::decode(&ack).expect("the session's ack decodes");
        }
        Ok(Outcome::NeedsFull { .. }) | Err(_) => {
            let after: Vec<_> = s.objects().map(|o| (o, s.state(o).cloned())).collect();
            assert_eq!(before, after, "a refused bunch changes nothing");
            assert!(s.poll_ack().is_none(), "a refused bunch is not acknowledged");
        }
        Ok(Outcome::Duplicate) => {}
    }
}

fn server_side(body: &[u8]) {
    let mut server = Authority::new(AuthorityConfig::default()).expect("config");
    let vec3 = Vector3Codec::new([-1000.0; 3], [1000.0; 3], 4).expect("vector codec");
    server
        .register_class(ClassSpec {
            class_id: 1,
            layout_version: 1,
            fields: vec![
                FieldSpec::new("pos", FieldCodec::Vector3(vec3)).client_owned(),
                FieldSpec::new("hp", FieldCodec::IntRange { min: 0, max: 100 }).client_owned(),
                FieldSpec::new("gold", FieldCodec::IntRange { min: 0, max: 100 }),
            ],
            evolution: Evolution::Strict,
            position_field: Some(0),
        })
        .expect("class");
    server.connect(1, false, 0);
    let object = server.spawn(1, 0, Some(1), false).expect("spawn");
    let before = server.values(object).expect("object").to_vec();
    if server.handle_proposal(1, body, 0, &mut NoVeto).is_err() {
        assert_eq!(server.values(object).expect("object"), &before[..]);
    }
    server.tick(0);
    while server.poll_output().is_some() {}
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    if selector % 2 == 0 {
        session_side(body);
    } else {
        server_side(body);
    }
});
