//! NetworkPeer kinds 13-15. The first byte picks the kind (`13 + byte % 3`),
//! the rest is the body.
//!
//! A kind-13 body's schema-free header (`BunchHeader::peek`) never panics
//! and agrees with the full decode whenever that succeeds.
//!
//! Kinds 14 and 15 are strict bitstreams: an accepted body re-encodes to
//! exactly the input. Kind 13 is decoded against the schema below (the
//! fixtures' example schema plus a collection field, same stand-in identity
//! 00..0f, layout 1). It re-encodes exactly unless it carries a quaternion,
//! whose re-compression may pick another dropped component; then only the
//! length must match, and decoding the re-encoding must give the same bunch
//! with the quaternion within 2e-3 per component (up to sign).
#![no_main]

mod common;

use std::sync::LazyLock;

use citadel_wire::netpeer::{
    BunchBase, BunchHeader, ClassSchema, DeltaBunch, FieldCodec, FieldValue, HeaderBase, RepAck,
    RepSchema,
};
use citadel_wire::quant::{ScalarCodec, Vector3Codec};
use citadel_wire::quat::QuatMode;
use libfuzzer_sys::fuzz_target;

static SCHEMA: LazyLock<ClassSchema> = LazyLock::new(|| {
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
});

fn quats(bunch: &DeltaBunch) -> impl Iterator<Item = [f32; 4]> + '_ {
    bunch.values.iter().filter_map(|(_, v)| match v {
        FieldValue::Quat(q) => Some(*q),
        _ => None,
    })
}

/// The bunch with every quaternion zeroed (presence kept).
fn without_quats(bunch: &DeltaBunch) -> DeltaBunch {
    let mut b = bunch.clone();
    for (_, v) in &mut b.values {
        if let FieldValue::Quat(q) = v {
            *q = [0.0; 4];
        }
    }
    b
}

/// The schema-free header agrees with every bunch that decodes.
fn header_agrees(body: &[u8], decoded: &DeltaBunch) {
    let header = BunchHeader::peek(body).expect("a decodable bunch has a header");
    assert_eq!(header.object_id, decoded.object_id);
    assert_eq!(header.result_id, decoded.result_id);
    match (header.base, decoded.base) {
        (HeaderBase::Full { schema_hash, .. }, BunchBase::Full) => {
            assert_eq!(&schema_hash, SCHEMA.schema_hash());
        }
        (HeaderBase::Delta(a), BunchBase::Delta(b)) => assert_eq!(a, b),
        (h, d) => panic!("header {h:?} against bunch {d:?}"),
    }
}

fn delta_bunch(body: &[u8]) {
    let peeked = BunchHeader::peek(body);
    let Ok(decoded) = DeltaBunch::decode(body, &SCHEMA) else {
        return;
    };
    assert!(peeked.is_ok());
    header_agrees(body, &decoded);
    let out = decoded.encode(&SCHEMA).expect("a decoded bunch re-encodes");
    if quats(&decoded).next().is_none() {
        assert_eq!(out, body);
        return;
    }
    assert_eq!(out.len(), body.len(), "re-encoded length");
    let back = DeltaBunch::decode(&out, &SCHEMA).expect("a re-encoded bunch decodes");
    assert_eq!(without_quats(&back), without_quats(&decoded));
    for (qa, qb) in quats(&decoded).zip(quats(&back)) {
        assert!(common::same_rotation(qa, qb), "{qa:?} came back as {qb:?}");
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    match 13 + selector % 3 {
        13 => delta_bunch(body),
        14 => common::exact::<RepAck>(body),
        _ => common::exact::<RepSchema>(body),
    }
});
