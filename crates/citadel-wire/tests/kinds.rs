//! Checks every case of `tests/vectors/kinds.json` (self-derived from the
//! spec by an independent Python implementation, `gen_kinds.py`): valid
//! bodies decode field by field to the listed values and re-encode to the
//! same bytes; malformed bodies fail with the listed error code.

use citadel_wire::actor::{NaDespawn, NaPresence, NaSpawn, NaSpawnBatch, NaState, NaTransform};
use citadel_wire::netpeer::{
    BunchBase, ClassSchema, DeltaBunch, FieldCodec, FieldValue, RepAck, RepSchema,
};
use citadel_wire::protocol::{
    AuthRequest, AuthResult, PeerPosition, Position, RpcRequest, RpcResponse,
};
use citadel_wire::quant::{ScalarCodec, Vector3Codec};
use citadel_wire::quat::QuatMode;
use citadel_wire::room::{RoomCreate, RoomJoin, RoomJoined, RoomLeave, RoomMapReady};
use citadel_wire::service::{ChatEvent, MatchmakerMatched, Notification};
use citadel_wire::tsync::{
    HelloParams, InputBundle, Rewind, RoleChange, Snapshot, TransformCodec, TsyncAck,
};
use citadel_wire::{DecodeError, WireBody};
use serde_json::{Value, json};

fn fixture() -> Value {
    let text = include_str!("vectors/kinds.json");
    serde_json::from_str(text).unwrap()
}

fn f32s(v: &Value) -> Vec<f32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect()
}

fn arr<const N: usize>(v: &Value) -> [f32; N] {
    f32s(v).try_into().unwrap()
}

fn codec_from(v: &Value) -> TransformCodec {
    HelloParams {
        position_min: arr(&v["pos_min"]),
        position_max: arr(&v["pos_max"]),
        position_values_per_unit: v["pos_vpu"].as_u64().unwrap() as u32,
        velocity_min: arr(&v["vel_min"]),
        velocity_max: arr(&v["vel_max"]),
        velocity_values_per_unit: v["vel_vpu"].as_u64().unwrap() as u32,
        quat_mode: QuatMode::from_wire_byte(v["quat_mode"].as_u64().unwrap() as u8).unwrap(),
        ..HelloParams::default()
    }
    .codec()
    .unwrap()
}

fn field_codec(v: &Value) -> FieldCodec {
    match v["codec"].as_str().unwrap() {
        "bool" => FieldCodec::Bool,
        "int_range" => FieldCodec::IntRange {
            min: v["min"].as_i64().unwrap(),
            max: v["max"].as_i64().unwrap(),
        },
        "scalar" => FieldCodec::Scalar(
            ScalarCodec::new(
                v["min"].as_f64().unwrap() as f32,
                v["max"].as_f64().unwrap() as f32,
                v["values_per_unit"].as_u64().unwrap() as u32,
            )
            .unwrap(),
        ),
        "vector3" => FieldCodec::Vector3(
            Vector3Codec::new(
                arr(&v["min"]),
                arr(&v["max"]),
                v["values_per_unit"].as_u64().unwrap() as u32,
            )
            .unwrap(),
        ),
        "quat" => {
            FieldCodec::Quat(QuatMode::from_wire_byte(v["mode"].as_u64().unwrap() as u8).unwrap())
        }
        "bytes" => FieldCodec::Bytes {
            max_len: v["max_len"].as_u64().unwrap() as u32,
        },
        other => panic!("unknown codec {other}"),
    }
}

fn schema_from(v: &Value) -> ClassSchema {
    let fields = v["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(field_codec)
        .collect();
    let hash: [u8; 16] = hex::decode(v["schema_hash_hex"].as_str().unwrap())
        .unwrap()
        .try_into()
        .unwrap();
    ClassSchema::new(fields, hash, v["layout_version"].as_u64().unwrap() as u32).unwrap()
}

fn h(bytes: &[u8]) -> String {
    hex::encode(bytes)
}

fn transform(t: &NaTransform) -> Value {
    json!({"position": t.position, "rotation": t.rotation, "velocity": t.velocity})
}

fn spawn(s: &NaSpawn) -> Value {
    json!({"object_id": s.object_id, "archetype_id": s.archetype_id, "owner": s.owner, "transform": transform(&s.transform)})
}

fn field_value(v: &FieldValue) -> Value {
    match v {
        FieldValue::Bool(b) => json!(b),
        FieldValue::Int(i) => json!(i),
        FieldValue::Scalar(s) => json!(s),
        FieldValue::Vector3(v) => json!(v),
        FieldValue::Quat(q) => json!(q),
        FieldValue::Bytes(b) => json!(h(b)),
        FieldValue::Collection(_) => panic!("no collection in the fixture schema"),
    }
}

fn simple<T: WireBody>(
    body: &[u8],
    f: impl Fn(&T) -> Value,
) -> Result<(Value, Vec<u8>), DecodeError> {
    let decoded = T::decode_body(body)?;
    Ok((f(&decoded), decoded.to_bytes()))
}

/// Decodes `body` as `kind` into the fixture's field shape and re-encodes it.
fn decode(
    kind: u64,
    body: &[u8],
    codec: &TransformCodec,
    schema: &ClassSchema,
) -> Result<(Value, Vec<u8>), DecodeError> {
    match kind {
        1 => simple(body, |p: &Position| json!({"x": p.x, "y": p.y})),
        2 => simple(
            body,
            |p: &PeerPosition| json!({"sender_id": p.sender_id, "payload_hex": h(&p.payload)}),
        ),
        3 => simple(
            body,
            |r: &RpcRequest| json!({"request_id": r.request_id, "method": r.method, "payload_hex": h(&r.payload)}),
        ),
        4 => simple(
            body,
            |r: &RpcResponse| json!({"request_id": r.request_id, "status": r.status, "payload_hex": h(&r.payload)}),
        ),
        5 => simple(body, |a: &AuthRequest| json!({"token": a.token})),
        6 => simple(
            body,
            |a: &AuthResult| json!({"status": a.status(), "user_id": a.user_id(), "reason": a.reason_class()}),
        ),
        7 => simple(body, |p: &HelloParams| {
            json!({
                "pos_min": p.position_min, "pos_max": p.position_max, "pos_vpu": p.position_values_per_unit,
                "vel_min": p.velocity_min, "vel_max": p.velocity_max, "vel_vpu": p.velocity_values_per_unit,
                "quat_mode": p.quat_mode.wire_byte(), "send_rate_hz": p.send_rate_hz, "sim_rate_hz": p.sim_rate_hz,
            })
        }),
        8 => {
            let s = Snapshot::decode(body, codec)?;
            let updates: Vec<Value> = s
                .updates
                .iter()
                .map(|u| {
                    json!({"object_id": u.object_id, "gen_epoch": u.gen_epoch, "position": u.position,
                           "rotation": u.rotation, "velocity": u.velocity, "last_input_seq": u.last_input_seq})
                })
                .collect();
            let v = json!({"server_tick": s.server_tick, "snapshot_id": s.snapshot_id,
                           "base_snapshot_id": s.base_snapshot_id, "send_rate_hz": s.send_rate_hz,
                           "removed": s.removed, "updates": updates});
            Ok((v, s.encode(codec).unwrap()))
        }
        9 => simple(body, |b: &InputBundle| {
            let frames: Vec<Value> = b
                .frames
                .iter()
                .map(|f| {
                    json!({"input_seq": f.input_seq, "sim_tick": f.sim_tick, "dt": f.dt, "object_id": f.object_id,
                           "ownership_epoch": f.ownership_epoch, "move_velocity": f.move_velocity, "flags": f.flags,
                           "payload_hex": h(&f.payload),
                           "fire": f.fire.map(|x| json!({"origin": x.origin, "direction": x.direction}))})
                })
                .collect();
            json!({"acked_snapshot_id": b.acked_snapshot_id, "last_seen_snapshot_id": b.last_seen_snapshot_id, "frames": frames})
        }),
        10 => simple(
            body,
            |a: &TsyncAck| json!({"acked_snapshot_id": a.acked_snapshot_id, "history": a.history}),
        ),
        11 => simple(body, |r: &RoleChange| {
            json!({"object_id": r.object_id, "role": r.role as u8, "owner": r.owner,
                   "ownership_epoch": r.ownership_epoch, "gen_epoch": r.gen_epoch, "event": r.event as u8})
        }),
        12 => simple(body, |r: &Rewind| {
            json!({"input_seq": r.input_seq, "flags": r.flags, "object_id": r.object_id,
                   "hit_point": r.hit_point, "rewind_tick": r.rewind_tick})
        }),
        13 => {
            let b = DeltaBunch::decode(body, schema)?;
            let (is_full, base_id) = match b.base {
                BunchBase::Full => (true, None),
                BunchBase::Delta(id) => (false, Some(id)),
            };
            let values: serde_json::Map<String, Value> = b
                .values
                .iter()
                .map(|(id, v)| (id.to_string(), field_value(v)))
                .collect();
            let v = json!({"object_id": b.object_id, "is_full": is_full, "result_id": b.result_id,
                "base_id": base_id,
                "schema_hash_hex": is_full.then(|| h(schema.schema_hash())),
                "layout_version": is_full.then(|| schema.layout_version()),
                "values": values});
            Ok((v, b.encode(schema).unwrap()))
        }
        14 => simple(body, |a: &RepAck| {
            let e: Vec<Value> = a
                .entries
                .iter()
                .map(|e| json!({"object_id": e.object_id, "acked_result_id": e.acked_result_id, "history": e.history}))
                .collect();
            json!({"entries": e})
        }),
        15 => simple(body, |s: &RepSchema| {
            let e: Vec<Value> = s
                .entries
                .iter()
                .map(|e| json!({"class_id": e.class_id, "schema_hash_hex": h(&e.schema_hash), "layout_version": e.layout_version}))
                .collect();
            json!({"entries": e})
        }),
        16 => simple(
            body,
            |p: &NaPresence| json!({"archetype_id": p.archetype_id, "transform": transform(&p.transform)}),
        ),
        17 => simple(body, spawn),
        18 => simple(
            body,
            |b: &NaSpawnBatch| json!({"spawns": b.spawns.iter().map(spawn).collect::<Vec<_>>()}),
        ),
        19 => simple(body, |d: &NaDespawn| json!({"object_id": d.object_id})),
        20 => simple(
            body,
            |s: &NaState| json!({"object_id": s.object_id, "transform": transform(&s.transform)}),
        ),
        21 => simple(body, |c: &RoomCreate| json!({"params_hex": h(&c.params)})),
        22 => simple(body, |r: &RoomJoin| json!({"room_id": r.room_id})),
        23 => simple(
            body,
            |r: &RoomJoined| json!({"room_id": r.room_id, "map": r.map, "mode": r.mode}),
        ),
        24 => simple(body, |r: &RoomLeave| json!({"room_id": r.room_id})),
        25 => simple(body, |r: &RoomMapReady| json!({"room_id": r.room_id})),
        26 => simple(body, |m: &MatchmakerMatched| {
            serde_json::to_value(m).unwrap()
        }),
        27 => simple(body, |n: &Notification| serde_json::to_value(n).unwrap()),
        28 => simple(body, |c: &ChatEvent| {
            serde_json::from_slice(&c.to_bytes()).unwrap()
        }),
        other => panic!("unexpected kind {other}"),
    }
}

/// JSON equality where numbers compare as f64 (our f32 widen exactly).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            match (x.as_i64(), y.as_i64(), x.as_u64(), y.as_u64()) {
                (Some(p), Some(q), _, _) => p == q,
                (_, _, Some(p), Some(q)) => p == q,
                // Fixture floats are f32 values widened to JSON doubles.
                _ => x.as_f64().map(|v| v as f32) == y.as_f64().map(|v| v as f32),
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

#[test]
fn every_kind_has_valid_and_malformed_cases() {
    let f = fixture();
    let kinds: Vec<u64> = f["kinds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["kind"].as_u64().unwrap())
        .collect();
    assert_eq!(kinds, (1..=28).collect::<Vec<_>>());
    for k in f["kinds"].as_array().unwrap() {
        assert!(
            !k["valid"].as_array().unwrap().is_empty(),
            "kind {} has no valid case",
            k["kind"]
        );
        assert!(
            !k["malformed"].as_array().unwrap().is_empty(),
            "kind {} has no malformed case",
            k["kind"]
        );
    }
}

#[test]
fn valid_cases_decode_field_by_field_and_re_encode() {
    let f = fixture();
    let codec = codec_from(&f["codec"]);
    let schema = schema_from(&f["schemas"]["example"]);
    let mut checked = 0;
    for k in f["kinds"].as_array().unwrap() {
        let kind = k["kind"].as_u64().unwrap();
        for case in k["valid"].as_array().unwrap() {
            let name = case["name"].as_str().unwrap();
            let body = hex::decode(case["hex"].as_str().unwrap()).unwrap();
            let (fields, re_encoded) = decode(kind, &body, &codec, &schema)
                .unwrap_or_else(|e| panic!("kind {kind} `{name}`: {e:?}"));
            let mut want = case["fields"].clone();
            if (26..=27).contains(&kind) && name.starts_with("decode-only:") {
                // Unknown fields are tolerated and dropped: compare the known ones.
                if let (Some(w), Some(got)) = (want.as_object_mut(), fields.as_object()) {
                    w.retain(|k, _| got.contains_key(k));
                }
            }
            assert!(
                same(&fields, &want),
                "kind {kind} `{name}`:\n got {fields}\nwant {want}"
            );
            if name.starts_with("decode-only:") {
                continue;
            }
            if (26..=28).contains(&kind) {
                let a: Value = serde_json::from_slice(&re_encoded).unwrap();
                let b: Value = serde_json::from_slice(&body).unwrap();
                assert!(same(&a, &b), "kind {kind} `{name}` JSON round trip");
            } else {
                assert_eq!(h(&re_encoded), h(&body), "kind {kind} `{name}` re-encode");
            }
            checked += 1;
        }
    }
    assert!(checked > 80, "only {checked} cases re-encoded");
}

#[test]
fn malformed_cases_fail_with_their_error_code() {
    let f = fixture();
    let codec = codec_from(&f["codec"]);
    let schema = schema_from(&f["schemas"]["example"]);
    for k in f["kinds"].as_array().unwrap() {
        let kind = k["kind"].as_u64().unwrap();
        for case in k["malformed"].as_array().unwrap() {
            let name = case["name"].as_str().unwrap();
            let body = hex::decode(case["hex"].as_str().unwrap()).unwrap();
            let want = case["error"].as_str().unwrap();
            match decode(kind, &body, &codec, &schema) {
                Ok((fields, _)) => panic!("kind {kind} `{name}` decoded as {fields}, want {want}"),
                Err(e) => assert_eq!(e.code(), want, "kind {kind} `{name}`: {e:?}"),
            }
        }
    }
}

/// Found by the `service_json` fuzz target: a large number inside a
/// notification's `content` must survive decode → encode → decode exactly
/// (serde_json's `float_roundtrip` parser).
#[test]
fn notification_numbers_round_trip_exactly() {
    let body = br#"{"id":"","code":0,"subject":"","content":33333333333333333333333333333300,"sender":"","created_at_unix_ms":0,"read_at_unix_ms":null}"#;
    let first = Notification::decode(body).unwrap();
    let again = Notification::decode(&first.encode()).unwrap();
    assert_eq!(first, again);
}
