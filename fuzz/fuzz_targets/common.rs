//! Round-trip assertions shared by the per-family targets (`mod common;`).
#![allow(dead_code)]

use std::fmt::Debug;

use citadel_wire::WireBody;

/// Strict layouts: an accepted body re-encodes to exactly the input.
pub fn exact<T: WireBody>(body: &[u8]) {
    if let Ok(value) = T::decode_body(body) {
        let out = value.to_bytes();
        assert!(
            out == body,
            "kind {}: {body:02x?} re-encodes to {out:02x?}",
            T::KIND
        );
    }
}

/// Fixed layouts that ignore trailing bytes: the re-encoding is a prefix.
pub fn prefix<T: WireBody>(body: &[u8]) {
    if let Ok(value) = T::decode_body(body) {
        let out = value.to_bytes();
        assert!(
            body.starts_with(&out),
            "kind {}: {body:02x?} re-encodes to {out:02x?}",
            T::KIND
        );
    }
}

/// JSON kinds: key order and whitespace are free, so compare values:
/// decode(encode(decode(body))) must equal decode(body).
pub fn json<T: WireBody + PartialEq + Debug>(body: &[u8]) {
    if let Ok(value) = T::decode_body(body) {
        let out = value.to_bytes();
        let back = T::decode_body(&out)
            .unwrap_or_else(|e| panic!("kind {}: re-encoding {out:02x?} fails: {e}", T::KIND));
        assert_eq!(back, value, "kind {}", T::KIND);
    }
}

/// Largest per-component difference between two re-quantized quaternions.
pub const QUAT_TOLERANCE: f32 = 2e-3;

/// Whether `a` and `b` are the same rotation within [`QUAT_TOLERANCE`] per
/// component. `q` and `-q` are one rotation, and the encoder flips signs so
/// the dropped component is non-negative, so either sign may come back.
pub fn same_rotation(a: [f32; 4], b: [f32; 4]) -> bool {
    let close = |sign: f32| {
        a.iter()
            .zip(&b)
            .all(|(x, y)| (x - sign * y).abs() <= QUAT_TOLERANCE)
    };
    close(1.0) || close(-1.0)
}
