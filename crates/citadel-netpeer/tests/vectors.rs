//! Every kind 13-15 case of citadel-wire's `kinds.json` through the SDK
//! session (and, for kind 14, the session's own ack bodies and the
//! authority's ack decoder): valid bunches apply with exactly the listed
//! values (deltas onto a held base named by their `base_id`), malformed
//! ones are rejected as a whole with the listed error and the session
//! unchanged.

use citadel_netpeer::{
    Authority, AuthorityConfig, NetworkPeerSession, Outcome, SessionError, Value,
};
use citadel_wire::bits::BitReader;
use citadel_wire::netpeer::{BunchBase, ClassSchema, DeltaBunch, FieldCodec, FieldValue};
use citadel_wire::quant::{ScalarCodec, Vector3Codec};
use citadel_wire::quat::QuatMode;
use citadel_wire::varint::read_varint;
use serde_json::Value as Json;

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn example() -> Result<ClassSchema, Box<dyn std::error::Error>> {
    Ok(ClassSchema::new(
        vec![
            FieldCodec::Bool,
            FieldCodec::IntRange { min: 0, max: 100 },
            FieldCodec::Scalar(ScalarCodec::new(-1000.0, 1000.0, 4)?),
            FieldCodec::Vector3(Vector3Codec::new([-1000.0; 3], [1000.0; 3], 4)?),
            FieldCodec::Quat(QuatMode::Bits10),
            FieldCodec::Bytes { max_len: 32 },
        ],
        std::array::from_fn(|i| i as u8),
        1,
    )?)
}

fn cases(kind: u64) -> Result<Json, Box<dyn std::error::Error>> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../citadel-wire/tests/vectors/kinds.json"
    );
    let all: Json = serde_json::from_str(&std::fs::read_to_string(path)?)?;
    all["kinds"]
        .as_array()
        .and_then(|k| k.iter().find(|e| e["kind"].as_u64() == Some(kind)))
        .cloned()
        .ok_or_else(|| format!("kind {kind} missing").into())
}

fn list<'a>(entry: &'a Json, key: &str) -> &'a [Json] {
    entry[key].as_array().map_or(&[], Vec::as_slice)
}

fn body(case: &Json) -> Result<Vec<u8>, Box<dyn std::error::Error>> {
    Ok(hex::decode(case["hex"].as_str().ok_or("hex")?)?)
}

/// `(object_id, base_id)` of a delta whose header parses.
fn delta_header(body: &[u8]) -> Option<(u32, u64)> {
    let mut r = BitReader::new(body);
    let object = r.read_u32().ok()?;
    if r.read_bool().ok()? {
        return None;
    }
    read_varint(&mut r).ok()?;
    let base = read_varint(&mut r).ok()?;
    (base != 0).then_some((object, base))
}

/// A session holding, when `body` is a delta, a full state of its object
/// under its `base_id`.
fn session_for(body: &[u8]) -> Result<NetworkPeerSession, Box<dyn std::error::Error>> {
    let schema = example()?;
    let mut s = NetworkPeerSession::default();
    s.register(schema.clone());
    if let Some((object_id, base)) = delta_header(body) {
        let seed = DeltaBunch {
            object_id,
            result_id: base,
            base: BunchBase::Full,
            values: vec![(1, FieldValue::Int(50))],
        }
        .encode(&schema)?;
        assert!(matches!(s.handle_bunch(&seed)?, Outcome::Applied { .. }));
        s.poll_ack();
    }
    Ok(s)
}

fn matches_json(v: &Value, want: &Json) -> bool {
    let f = |j: &Json| j.as_f64().map(|x| x as f32);
    match v {
        Value::Plain(FieldValue::Bool(b)) => want.as_bool() == Some(*b),
        Value::Plain(FieldValue::Int(i)) => want.as_i64() == Some(*i),
        Value::Plain(FieldValue::Scalar(x)) => f(want) == Some(*x),
        Value::Plain(FieldValue::Vector3(a)) => want
            .as_array()
            .is_some_and(|w| w.iter().map(f).eq(a.iter().map(|x| Some(*x)))),
        Value::Plain(FieldValue::Quat(a)) => want
            .as_array()
            .is_some_and(|w| w.iter().map(f).eq(a.iter().map(|x| Some(*x)))),
        Value::Plain(FieldValue::Bytes(b)) => want.as_str() == Some(hex::encode(b).as_str()),
        _ => false,
    }
}

#[test]
fn kind_13_cases_apply_or_reject_whole_in_the_session() -> TestResult {
    let entry = cases(13)?;
    let valid = list(&entry, "valid");
    assert!(valid.len() >= 6);
    for case in valid {
        let name = case["name"].as_str().unwrap_or("?");
        let bytes = body(case)?;
        let mut s = session_for(&bytes)?;
        let fields = &case["fields"];
        let object_id = fields["object_id"].as_u64().ok_or("object_id")? as u32;
        let outcome = s.handle_bunch(&bytes).map_err(|e| format!("{name}: {e}"))?;
        assert_eq!(
            outcome,
            Outcome::Applied {
                object_id,
                result_id: fields["result_id"].as_u64().ok_or("result_id")?,
                full: fields["is_full"].as_bool() == Some(true),
            },
            "{name}"
        );
        let state = s.state(object_id).ok_or("state")?;
        let values = fields["values"].as_object().ok_or("values")?;
        for (id, want) in values {
            let id: usize = id.parse()?;
            let got = state[id]
                .as_ref()
                .ok_or_else(|| format!("{name}: field {id} missing"))?;
            assert!(
                matches_json(got, want),
                "{name}: field {id}: {got:?} vs {want}"
            );
        }
        assert!(
            s.poll_ack().is_some(),
            "{name}: applied bunches are acknowledged"
        );
    }
    let malformed = list(&entry, "malformed");
    assert!(malformed.len() >= 10);
    for case in malformed {
        let name = case["name"].as_str().unwrap_or("?");
        let bytes = body(case)?;
        let mut s = session_for(&bytes)?;
        let before: Vec<_> = s.objects().map(|o| (o, s.state(o).cloned())).collect();
        let err = s.handle_bunch(&bytes).expect_err(name);
        let code = match &err {
            SessionError::Decode(e) => e.code(),
            SessionError::UnknownSchema => "schema",
            other => panic!("{name}: unexpected {other}"),
        };
        assert_eq!(Some(code), case["error"].as_str(), "{name}");
        let after: Vec<_> = s.objects().map(|o| (o, s.state(o).cloned())).collect();
        assert_eq!(before, after, "{name}: session unchanged");
        assert!(s.poll_ack().is_none(), "{name}: nothing acknowledged");
    }
    Ok(())
}

#[test]
fn a_delta_onto_a_missing_base_needs_full_and_is_not_acked() -> TestResult {
    let entry = cases(13)?;
    let delta = body(&list(&entry, "valid")[0])?;
    let mut s = NetworkPeerSession::default();
    s.register(example()?);
    assert_eq!(
        s.handle_bunch(&delta)?,
        Outcome::NeedsFull { object_id: 42 }
    );
    assert!(s.state(42).is_none(), "no state invented");
    assert!(s.poll_ack().is_none());
    Ok(())
}

#[test]
fn kind_14_cases_match_the_session_acks_and_the_authority_decoder() -> TestResult {
    let entry = cases(14)?;
    // The §6.4 example is what the session sends after applying object 1's
    // bunch 5.
    let schema = example()?;
    let mut s = NetworkPeerSession::default();
    s.register(schema.clone());
    let full = DeltaBunch {
        object_id: 1,
        result_id: 5,
        base: BunchBase::Full,
        values: vec![],
    }
    .encode(&schema)?;
    s.handle_bunch(&full)?;
    let example_case = &list(&entry, "valid")[0];
    assert_eq!(s.poll_ack(), Some(body(example_case)?));
    let mut server = Authority::new(AuthorityConfig::default()).expect("config");
    server.connect(1, false, 0);
    for case in list(&entry, "valid") {
        server.handle_ack(1, &body(case)?);
    }
    assert_eq!(server.counters().acks_malformed, 0);
    let malformed = list(&entry, "malformed");
    for case in malformed {
        server.handle_ack(1, &body(case)?);
    }
    assert_eq!(server.counters().acks_malformed, malformed.len() as u64);
    Ok(())
}

#[test]
fn kind_15_cases_are_checked_by_the_session() -> TestResult {
    let entry = cases(15)?;
    let mut s = NetworkPeerSession::default();
    s.register(example()?);
    for case in list(&entry, "valid") {
        let checks = s.handle_schema_table(&body(case)?)?;
        let want = list(&case["fields"], "entries");
        assert_eq!(checks.len(), want.len());
        for (c, w) in checks.iter().zip(want) {
            assert_eq!(Some(u64::from(c.class_id)), w["class_id"].as_u64());
            let ours = w["schema_hash_hex"].as_str() == Some("000102030405060708090a0b0c0d0e0f")
                && w["layout_version"].as_u64() == Some(1);
            assert_eq!(c.known, ours);
        }
    }
    for case in list(&entry, "malformed") {
        let err = s.handle_schema_table(&body(case)?).expect_err("malformed");
        assert_eq!(Some(err.code()), case["error"].as_str());
    }
    Ok(())
}
