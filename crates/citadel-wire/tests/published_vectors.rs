//! The published bit-exact vectors (`tests/vectors/wire_vectors.json`, a copy
//! of the cross-SDK fixture): scalar, vector, quaternion, ack window and
//! schema hash, plus the negative anchors listed in the fixture notes.

use citadel_wire::DecodeError;
use citadel_wire::ack::AckWindow;
use citadel_wire::bits::{BitReader, BitWriter};
use citadel_wire::quant::{ScalarCodec, Vector3Codec};
use citadel_wire::quat::{QuatMode, decode_quat, encode_quat, read_packed, write_packed};
use citadel_wire::schema::{SchemaFieldIdentity, schema_hash};
use citadel_wire::tsync::TsyncAck;
use citadel_wire::varint::read_varint;
use serde_json::Value;

fn vectors() -> Value {
    serde_json::from_str(include_str!("vectors/wire_vectors.json")).unwrap()
}

fn num(v: &Value) -> f32 {
    v.as_f64().map(|x| x as f32).unwrap_or(f32::NAN)
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap()
}

#[test]
fn scalar_vectors() {
    let all = vectors();
    let cases = all["scalar"].as_array().unwrap();
    assert_eq!(cases.len(), 11);
    for c in cases {
        let codec = ScalarCodec::new(
            num(&c["min"]),
            num(&c["max"]),
            u(&c["values_per_unit"]) as u32,
        )
        .unwrap();
        assert_eq!(u64::from(codec.bits()), u(&c["bits"]));
        assert_eq!(codec.code_count(), u128::from(u(&c["code_count"])));
        let value = num(&c["value"]);
        let code = codec.encode(value).unwrap();
        assert_eq!(code, u(&c["code"]), "{c}");
        let mut w = BitWriter::new();
        codec.write(&mut w, value).unwrap();
        assert_eq!(w.bit_len() as u64, u(&c["bit_len"]));
        let bytes = w.into_bytes();
        assert_eq!(hex::encode(&bytes), c["bytes_hex"].as_str().unwrap());
        let mut r = BitReader::new(&bytes);
        let decoded = codec.read(&mut r).unwrap();
        r.finish().unwrap();
        assert_eq!(decoded, num(&c["decoded"]));
        if value >= codec.min() && value <= codec.max() {
            assert!(
                (f64::from(decoded) - f64::from(value)).abs()
                    <= c["error_max"].as_f64().unwrap() + 1e-6
            );
        }
    }
}

#[test]
fn vector_vectors() {
    let all = vectors();
    let cases = all["vector"].as_array().unwrap();
    assert_eq!(cases.len(), 4);
    for c in cases {
        let arr = |k: &str| -> [f32; 3] {
            c[k].as_array()
                .unwrap()
                .iter()
                .map(num)
                .collect::<Vec<_>>()
                .try_into()
                .unwrap()
        };
        let codec = Vector3Codec::new(
            arr("bounds_min"),
            arr("bounds_max"),
            u(&c["values_per_unit"]) as u32,
        )
        .unwrap();
        assert_eq!(u64::from(codec.bits()), u(&c["bits"]));
        let mut w = BitWriter::new();
        codec.write(&mut w, arr("position")).unwrap();
        assert_eq!(w.bit_len() as u64, u(&c["bit_len"]));
        let bytes = w.into_bytes();
        assert_eq!(hex::encode(&bytes), c["bytes_hex"].as_str().unwrap());
        let mut r = BitReader::new(&bytes);
        assert_eq!(codec.read(&mut r).unwrap(), arr("decoded"));
        r.finish().unwrap();
    }
}

#[test]
fn quat_vectors() {
    let all = vectors();
    let cases = all["quat"].as_array().unwrap();
    assert_eq!(cases.len(), 11);
    for c in cases {
        let mode = match c["mode"].as_str().unwrap() {
            "Bits9" => QuatMode::Bits9,
            "Bits10" => QuatMode::Bits10,
            "Bits15" => QuatMode::Bits15,
            m => panic!("mode {m}"),
        };
        assert_eq!(u64::from(mode.codec_id()), u(&c["codec_id"]));
        assert_eq!(u64::from(mode.total_bits()), u(&c["total_bits"]));
        let input: [f32; 4] = c["input"]
            .as_array()
            .unwrap()
            .iter()
            .map(num)
            .collect::<Vec<_>>()
            .try_into()
            .unwrap();
        let packed = encode_quat(mode, input);
        assert_eq!(
            u64::from(packed.dropped_index),
            u(&c["dropped_index"]),
            "{c}"
        );
        let codes: Vec<u64> = c["component_codes"]
            .as_array()
            .unwrap()
            .iter()
            .map(u)
            .collect();
        assert_eq!(packed.codes.map(u64::from).to_vec(), codes, "{c}");
        let mut w = BitWriter::new();
        write_packed(&mut w, mode, packed);
        assert_eq!(w.bit_len() as u64, u(&c["bit_len"]));
        let bytes = w.into_bytes();
        assert_eq!(hex::encode(&bytes), c["bytes_hex"].as_str().unwrap());
        let mut r = BitReader::new(&bytes);
        let back = decode_quat(mode, read_packed(&mut r, mode).unwrap());
        r.finish().unwrap();
        let want: Vec<f32> = c["decoded"].as_array().unwrap().iter().map(num).collect();
        assert_eq!(back.to_vec(), want, "{c}");
    }
}

#[test]
fn ack_vectors() {
    let all = vectors();
    let cases = all["ack"].as_array().unwrap();
    assert_eq!(cases.len(), 6);
    for c in cases {
        let mut w = AckWindow::new();
        for id in c["acks"].as_array().unwrap() {
            w.ack(u(id));
        }
        assert_eq!(w.latest(), u(&c["latest"]));
        assert_eq!(u64::from(w.history()), u(&c["history"]));
        assert_eq!(
            format!("{:08x}", w.history()),
            c["history_hex"].as_str().unwrap()
        );
        let wire = TsyncAck::from_window(&w);
        let back = TsyncAck::decode(&wire.encode()).unwrap().window().unwrap();
        assert_eq!(back, w);
    }
}

#[test]
fn schema_hash_vectors() {
    let all = vectors();
    assert_eq!(
        all["schema_hash"]["algorithm"],
        "blake3-128/citadel.schema.v1"
    );
    let cases = all["schema_hash"]["vectors"].as_array().unwrap();
    assert_eq!(cases.len(), 3);
    for c in cases {
        let fields: Vec<SchemaFieldIdentity> = c["fields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| SchemaFieldIdentity {
                field_id: u(&f["field_id"]) as u16,
                type_tag: u(&f["type_tag"]) as u16,
                codec_id: u(&f["codec_id"]) as u16,
                cond: u(&f["cond"]) as u8,
                authority: u(&f["authority"]) as u8,
                bounds_shape: u(&f["bounds_shape"]),
            })
            .collect();
        let digest = schema_hash(u(&c["layout_version"]) as u32, &fields).unwrap();
        assert_eq!(hex::encode(digest), c["digest_hex"].as_str().unwrap());
    }
}

#[test]
fn negative_anchors() {
    // A read past the end fails without moving the cursor.
    let mut r = BitReader::new(&[0xAB]);
    assert_eq!(r.read_bits(9), Err(DecodeError::Truncated));
    assert_eq!(r.position(), 0);
    // A non-zero pad bit fails `finish`.
    let mut r = BitReader::new(&[0b1000_0001]);
    r.read_bits(3).unwrap();
    assert_eq!(r.finish(), Err(DecodeError::NonZeroPadding));
    // Codes 5, 6 and 7 are invalid for the 0..4 codec.
    let codec = ScalarCodec::new(0.0, 4.0, 1).unwrap();
    for code in 5..=7 {
        assert!(codec.decode(code).is_err());
    }
    // Overlong varints: `80 00` as bytes, and two bit-groups ending in zero.
    let mut r = BitReader::new(&[0x80, 0x00]);
    assert_eq!(read_varint(&mut r), Err(DecodeError::Varint));
    let mut w = BitWriter::new();
    w.write_bits(1, 3);
    w.write_bits(0x85, 8);
    w.write_bits(0x00, 8);
    let bytes = w.into_bytes();
    let mut r = BitReader::new(&bytes);
    r.read_bits(3).unwrap();
    assert_eq!(read_varint(&mut r), Err(DecodeError::Varint));
}
