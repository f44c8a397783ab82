//! Smallest-three quaternion compression (codec ids 4, 5, 6).
//!
//! Layout: `index:2` (the dropped component, 0=x 1=y 2=z 3=w) then the three
//! kept components, `n` bits each, in ascending source-index order. Encoding
//! maps non-finite or near-zero input to identity, drops the largest
//! magnitude (ties to the lowest index), flips signs so the dropped component
//! is non-negative. Decoding never fails on values (realtime-wire §3.6).

use crate::bits::{BitReader, BitWriter};
use crate::error::{CodecError, DecodeError};

const SQRT_HALF: f64 = std::f64::consts::FRAC_1_SQRT_2;

/// Bits per kept component.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum QuatMode {
    /// 9 bits per component, 29 bits total (codec id 4).
    Bits9,
    /// 10 bits per component, 32 bits total (codec id 5, the default).
    #[default]
    Bits10,
    /// 15 bits per component, 47 bits total (codec id 6).
    Bits15,
}

impl QuatMode {
    /// The HELLO `quat_mode` byte (9, 10 or 15).
    pub fn wire_byte(self) -> u8 {
        match self {
            QuatMode::Bits9 => 9,
            QuatMode::Bits10 => 10,
            QuatMode::Bits15 => 15,
        }
    }

    /// Parses a HELLO `quat_mode` byte.
    pub fn from_wire_byte(b: u8) -> Result<Self, CodecError> {
        match b {
            9 => Ok(QuatMode::Bits9),
            10 => Ok(QuatMode::Bits10),
            15 => Ok(QuatMode::Bits15),
            _ => Err(CodecError::QuatMode),
        }
    }

    /// Schema codec id (4, 5 or 6).
    pub fn codec_id(self) -> u16 {
        match self {
            QuatMode::Bits9 => 4,
            QuatMode::Bits10 => 5,
            QuatMode::Bits15 => 6,
        }
    }

    /// Bits per kept component.
    pub fn component_bits(self) -> u32 {
        u32::from(self.wire_byte())
    }

    /// Total encoded width.
    pub fn total_bits(self) -> u32 {
        2 + 3 * self.component_bits()
    }

    fn max_code(self) -> u64 {
        (1u64 << self.component_bits()) - 1
    }
}

/// A compressed quaternion: dropped index and the three kept codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PackedQuat {
    /// Dropped component (0=x, 1=y, 2=z, 3=w).
    pub dropped_index: u8,
    /// Kept component codes in ascending source-index order.
    pub codes: [u32; 3],
}

/// Compresses `q` (x, y, z, w).
pub fn encode_quat(mode: QuatMode, q: [f32; 4]) -> PackedQuat {
    let mut v = if q.iter().all(|c| c.is_finite()) {
        q.map(f64::from)
    } else {
        [0.0, 0.0, 0.0, 1.0]
    };
    let norm = v.iter().map(|c| c * c).sum::<f64>().sqrt();
    if !norm.is_finite() || norm < 1e-6 {
        let code = round_code(0.0, mode);
        return PackedQuat {
            dropped_index: 3,
            codes: [code; 3],
        };
    }
    for c in &mut v {
        *c /= norm;
    }
    let mut dropped = 0usize;
    for i in 1..4 {
        if v[i].abs() > v[dropped].abs() {
            dropped = i;
        }
    }
    let flip = v[dropped] < 0.0;
    let codes = KEPT_INDICES[dropped].map(|i| {
        let c = v[i];
        round_code(if flip { -c } else { c }, mode)
    });
    PackedQuat {
        dropped_index: dropped as u8,
        codes,
    }
}

/// The source indices of the three kept components, by dropped index.
const KEPT_INDICES: [[usize; 3]; 4] = [[1, 2, 3], [0, 2, 3], [0, 1, 3], [0, 1, 2]];

/// `clamp(floor((c + √½) / (2√½) · max + 0.5), 0, max)` without a floor:
/// the cast to `i64` truncates toward zero, which is floor for non-negative
/// values; a negative value truncates to at most 0 and NaN casts to 0, so
/// after the clamp every input gets the literal formula's code.
#[inline]
fn round_code(c: f64, mode: QuatMode) -> u32 {
    let max = mode.max_code();
    let scaled = (c + SQRT_HALF) / (2.0 * SQRT_HALF) * max as f64 + 0.5;
    (scaled as i64).clamp(0, max as i64) as u32
}

/// Reconstructs a unit quaternion (x, y, z, w). Never fails: index and codes
/// are masked to their widths.
pub fn decode_quat(mode: QuatMode, packed: PackedQuat) -> [f32; 4] {
    let max = mode.max_code();
    let index = usize::from(packed.dropped_index & 3);
    let kept = packed.codes.map(|code| {
        let code = u64::from(code) & max;
        match mode {
            QuatMode::Bits9 => KEPT_BITS9.get(code as usize).copied(),
            QuatMode::Bits10 => KEPT_BITS10.get(code as usize).copied(),
            QuatMode::Bits15 => None,
        }
        .unwrap_or_else(|| kept_component(code, max))
    });
    let sum_sq: f64 = kept.iter().map(|c| c * c).sum();
    let dropped = (1.0 - sum_sq).max(0.0).sqrt();
    let mut v = [0.0f64; 4];
    v[index] = dropped;
    for (i, value) in KEPT_INDICES[index].into_iter().zip(kept) {
        v[i] = value;
    }
    let norm = v.iter().map(|c| c * c).sum::<f64>().sqrt();
    if !norm.is_finite() || norm < 1e-6 {
        return [0.0, 0.0, 0.0, 1.0];
    }
    if norm == 1.0 {
        // `c / 1.0 == c` exactly; the common case skips four divisions.
        return v.map(|c| c as f32);
    }
    v.map(|c| (c / norm) as f32)
}

/// A kept component's value for `code`: `code / max · 2√½ − √½`.
const fn kept_component(code: u64, max: u64) -> f64 {
    code as f64 / max as f64 * (2.0 * SQRT_HALF) - SQRT_HALF
}

/// [`kept_component`] for every code of a mode, evaluated at compile time
/// (IEEE arithmetic, the same bits as at run time). The 15-bit mode has no
/// table: 256 KiB would cost more in cache misses than the division saves.
const fn kept_table<const N: usize>() -> [f64; N] {
    let mut table = [0.0; N];
    let mut code = 0;
    while code < N {
        table[code] = kept_component(code as u64, N as u64 - 1);
        code += 1;
    }
    table
}

static KEPT_BITS9: [f64; 512] = kept_table::<512>();
static KEPT_BITS10: [f64; 1024] = kept_table::<1024>();

/// Writes a packed quaternion.
pub fn write_packed(w: &mut BitWriter, mode: QuatMode, packed: PackedQuat) {
    w.write_bits(u64::from(packed.dropped_index & 3), 2);
    for code in packed.codes {
        w.write_bits(u64::from(code), mode.component_bits());
    }
}

/// Reads a packed quaternion.
pub fn read_packed(r: &mut BitReader<'_>, mode: QuatMode) -> Result<PackedQuat, DecodeError> {
    if r.remaining_bits() < mode.total_bits() as usize {
        return Err(DecodeError::Truncated);
    }
    let dropped_index = r.read_bits(2)? as u8;
    let mut codes = [0u32; 3];
    for c in &mut codes {
        *c = r.read_bits(mode.component_bits())? as u32;
    }
    Ok(PackedQuat {
        dropped_index,
        codes,
    })
}

/// Compresses and writes `q`.
pub fn write_quat(w: &mut BitWriter, mode: QuatMode, q: [f32; 4]) {
    write_packed(w, mode, encode_quat(mode, q));
}

/// Reads and reconstructs a quaternion.
pub fn read_quat(r: &mut BitReader<'_>, mode: QuatMode) -> Result<[f32; 4], DecodeError> {
    Ok(decode_quat(mode, read_packed(r, mode)?))
}

/// Value after a compression round trip.
pub fn quantize_quat(mode: QuatMode, q: [f32; 4]) -> [f32; 4] {
    decode_quat(mode, encode_quat(mode, q))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_anchor_bits10() {
        let mut w = BitWriter::new();
        write_quat(&mut w, QuatMode::Bits10, [0.0, 0.0, 0.0, 1.0]);
        assert_eq!(w.into_bytes(), vec![0xE0, 0x08, 0x02, 0x00]);
    }

    #[test]
    fn round_code_is_floor_then_clamp() {
        for mode in [QuatMode::Bits9, QuatMode::Bits10, QuatMode::Bits15] {
            let max = mode.max_code() as f64;
            let mut c = -0.75f64;
            while c <= 0.75 {
                for x in [c, -c, c + 1e-17, f64::NAN, f64::INFINITY, -1.0e300] {
                    let literal = ((x + SQRT_HALF) / (2.0 * SQRT_HALF) * max + 0.5)
                        .floor()
                        .clamp(0.0, max) as u32;
                    assert_eq!(round_code(x, mode), literal, "{mode:?} {x}");
                }
                c += 0.000_137;
            }
        }
    }

    #[test]
    fn kept_tables_match_the_formula() {
        for (mode, table) in [
            (QuatMode::Bits9, &KEPT_BITS9[..]),
            (QuatMode::Bits10, &KEPT_BITS10[..]),
        ] {
            let max = mode.max_code();
            assert_eq!(table.len() as u64, max + 1);
            for (code, value) in table.iter().enumerate() {
                let runtime = std::hint::black_box(code as u64) as f64 / max as f64
                    * (2.0 * SQRT_HALF)
                    - SQRT_HALF;
                assert_eq!(value.to_bits(), runtime.to_bits(), "{mode:?} code {code}");
            }
        }
    }

    #[test]
    fn degenerate_inputs_become_identity() {
        for q in [
            [f32::NAN, 0.0, 0.0, 1.0],
            [0.0; 4],
            [f32::INFINITY, 0.0, 0.0, 0.0],
        ] {
            let p = encode_quat(QuatMode::Bits10, q);
            assert_eq!(p, encode_quat(QuatMode::Bits10, [0.0, 0.0, 0.0, 1.0]));
        }
    }
}
