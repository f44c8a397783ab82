//! Bounded fixed-point quantizers: the scalar codec (codec id 2) and the
//! three-axis Vector3 codec (codec id 3).
//!
//! All arithmetic happens in `f64` after widening the `f32` parameters, with
//! `round(x) = floor(x + 0.5)` (realtime-wire §3.4). Encoding clamps into the
//! bounds (infinities saturate, NaN is an error); decoding refuses a code
//! above `steps` instead of clamping it.

use crate::bits::{BitReader, BitWriter, ceil_log2};
use crate::error::{CodecError, DecodeError, EncodeError};

/// Codec id of the scalar quantizer in schema identities.
pub const CODEC_ID_SCALAR: u16 = 2;
/// Codec id of the Vector3 quantizer in schema identities.
pub const CODEC_ID_VECTOR3: u16 = 3;

/// `floor(x + 0.5)`, the contract's rounding.
#[inline]
pub(crate) fn round_half_up(x: f64) -> f64 {
    floor(x + 0.5)
}

/// `f64::floor` without the libm call (the baseline x86-64 target has no
/// rounding instruction): exact for every finite value, NaN stays NaN.
#[inline]
pub(crate) fn floor(x: f64) -> f64 {
    // At or beyond 2^52 every f64 is already an integer (this also passes
    // infinities and NaN through unchanged).
    if x.is_nan() || x.abs() >= 4_503_599_627_370_496.0 || x == 0.0 {
        return x; // also keeps the sign of -0.0
    }
    let t = x as i64 as f64;
    if t > x { t - 1.0 } else { t }
}

/// A bounded scalar quantizer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScalarCodec {
    min: f32,
    max: f32,
    values_per_unit: u32,
    steps: u64,
    bits: u32,
    /// `1 / values_per_unit` when that is exact (a power of two): decoding
    /// then multiplies, which gives the same bits as dividing.
    exact_reciprocal: Option<f64>,
}

impl ScalarCodec {
    /// Builds the codec; fails for non-finite bounds, `max <= min`, zero
    /// resolution, or a range needing more than 64 bits.
    pub fn new(min: f32, max: f32, values_per_unit: u32) -> Result<Self, CodecError> {
        if !min.is_finite() || !max.is_finite() {
            return Err(CodecError::NonFiniteBounds);
        }
        if max <= min {
            return Err(CodecError::EmptyRange);
        }
        if values_per_unit == 0 {
            return Err(CodecError::ZeroResolution);
        }
        let span = (f64::from(max) - f64::from(min)) * f64::from(values_per_unit);
        let steps_f = round_half_up(span).max(1.0);
        // 2^64 - 1 codes at most; an f64 at or above 2^64 cannot be a u64.
        if steps_f >= 18_446_744_073_709_551_615.0 {
            return Err(CodecError::TooWide);
        }
        let steps = steps_f as u64;
        let bits = ceil_log2(u128::from(steps) + 1);
        Ok(ScalarCodec {
            min,
            max,
            values_per_unit,
            steps,
            bits,
            exact_reciprocal: values_per_unit
                .is_power_of_two()
                .then(|| 1.0 / f64::from(values_per_unit)),
        })
    }

    /// Lower bound.
    pub fn min(&self) -> f32 {
        self.min
    }
    /// Upper bound.
    pub fn max(&self) -> f32 {
        self.max
    }
    /// Codes per unit.
    pub fn values_per_unit(&self) -> u32 {
        self.values_per_unit
    }
    /// Highest valid code.
    pub fn steps(&self) -> u64 {
        self.steps
    }
    /// Number of valid codes (`steps + 1`).
    pub fn code_count(&self) -> u128 {
        u128::from(self.steps) + 1
    }
    /// Width of one code in bits.
    pub fn bits(&self) -> u32 {
        self.bits
    }
    /// Largest decode error for an in-range value (`0.5 / vpu`).
    pub fn error_max(&self) -> f64 {
        0.5 / f64::from(self.values_per_unit)
    }

    /// Quantizes `value` (clamped into the bounds).
    #[inline]
    pub fn encode(&self, value: f32) -> Result<u64, EncodeError> {
        if value.is_nan() {
            return Err(EncodeError::NotANumber);
        }
        let v = f64::from(value).clamp(f64::from(self.min), f64::from(self.max));
        // `round_half_up` then a saturating cast: after the clamp the sum is
        // never below 0.5, and for non-negative values the truncating
        // `as u64` is exactly `floor` (saturating at the top), so no
        // separate floor step is needed.
        let code = ((v - f64::from(self.min)) * f64::from(self.values_per_unit) + 0.5) as u64;
        Ok(code.min(self.steps))
    }

    /// Turns a code back into a value; a code above `steps` is invalid.
    #[inline]
    pub fn decode(&self, code: u64) -> Result<f32, DecodeError> {
        if code > self.steps {
            return Err(DecodeError::InvalidValue("quantized code above the range"));
        }
        let offset = match self.exact_reciprocal {
            Some(reciprocal) => code as f64 * reciprocal,
            None => code as f64 / f64::from(self.values_per_unit),
        };
        Ok((f64::from(self.min) + offset) as f32)
    }

    /// Encodes and writes `value`.
    pub fn write(&self, w: &mut BitWriter, value: f32) -> Result<(), EncodeError> {
        w.write_bits(self.encode(value)?, self.bits);
        Ok(())
    }

    /// Reads and decodes one value.
    #[inline]
    pub fn read(&self, r: &mut BitReader<'_>) -> Result<f32, DecodeError> {
        let code = r.read_bits(self.bits)?;
        self.decode(code)
    }

    /// Value after a quantization round trip (what a receiver reconstructs).
    pub fn quantize(&self, value: f32) -> Result<f32, EncodeError> {
        let code = self.encode(value)?;
        self.decode(code)
            .map_err(|_| EncodeError::InvalidValue("code out of range"))
    }
}

/// Three independent scalar axes sharing one resolution, written x, y, z.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Vector3Codec {
    axes: [ScalarCodec; 3],
}

impl Vector3Codec {
    /// Builds the per-axis codecs.
    pub fn new(min: [f32; 3], max: [f32; 3], values_per_unit: u32) -> Result<Self, CodecError> {
        Ok(Vector3Codec {
            axes: [
                ScalarCodec::new(min[0], max[0], values_per_unit)?,
                ScalarCodec::new(min[1], max[1], values_per_unit)?,
                ScalarCodec::new(min[2], max[2], values_per_unit)?,
            ],
        })
    }

    /// The per-axis codecs.
    pub fn axes(&self) -> &[ScalarCodec; 3] {
        &self.axes
    }
    /// Lower bounds.
    pub fn min(&self) -> [f32; 3] {
        self.axes.map(|a| a.min())
    }
    /// Upper bounds.
    pub fn max(&self) -> [f32; 3] {
        self.axes.map(|a| a.max())
    }
    /// Shared resolution.
    pub fn values_per_unit(&self) -> u32 {
        self.axes[0].values_per_unit()
    }
    /// Total width in bits.
    pub fn bits(&self) -> u32 {
        self.axes.iter().map(ScalarCodec::bits).sum()
    }

    /// Quantizes all three axes.
    pub fn encode(&self, v: [f32; 3]) -> Result<[u64; 3], EncodeError> {
        Ok([
            self.axes[0].encode(v[0])?,
            self.axes[1].encode(v[1])?,
            self.axes[2].encode(v[2])?,
        ])
    }

    /// Decodes three codes.
    pub fn decode(&self, codes: [u64; 3]) -> Result<[f32; 3], DecodeError> {
        Ok([
            self.axes[0].decode(codes[0])?,
            self.axes[1].decode(codes[1])?,
            self.axes[2].decode(codes[2])?,
        ])
    }

    /// Writes already-quantized codes.
    pub fn write_codes(&self, w: &mut BitWriter, codes: [u64; 3]) {
        for (axis, code) in self.axes.iter().zip(codes) {
            w.write_bits(code, axis.bits());
        }
    }

    /// Encodes and writes a vector.
    pub fn write(&self, w: &mut BitWriter, v: [f32; 3]) -> Result<(), EncodeError> {
        self.write_codes(w, self.encode(v)?);
        Ok(())
    }

    /// Reads and decodes a vector.
    pub fn read(&self, r: &mut BitReader<'_>) -> Result<[f32; 3], DecodeError> {
        Ok([
            self.axes[0].read(r)?,
            self.axes[1].read(r)?,
            self.axes[2].read(r)?,
        ])
    }

    /// Value after a quantization round trip.
    pub fn quantize(&self, v: [f32; 3]) -> Result<[f32; 3], EncodeError> {
        Ok([
            self.axes[0].quantize(v[0])?,
            self.axes[1].quantize(v[1])?,
            self.axes[2].quantize(v[2])?,
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    type TestResult = Result<(), Box<dyn std::error::Error>>;

    #[test]
    fn floor_matches_the_standard_library() {
        for x in [
            0.0,
            -0.0,
            0.5,
            -0.5,
            1.0,
            -1.0,
            2.999_999,
            -2.000_001,
            1e15 + 0.5,
            -1e15 - 0.5,
            4.5e15,
            -4.5e15,
            f64::MAX,
            f64::MIN,
        ] {
            assert_eq!(floor(x).to_bits(), x.floor().to_bits(), "{x}");
        }
        assert!(floor(f64::NAN).is_nan());
        assert_eq!(floor(f64::INFINITY), f64::INFINITY);
        let mut v = 1.0f64;
        for _ in 0..2000 {
            v = v * -1.013 + 0.37;
            assert_eq!(floor(v).to_bits(), v.floor().to_bits(), "{v}");
        }
    }

    /// The contract's formulas written the slow, literal way.
    fn reference_encode(c: &ScalarCodec, value: f32) -> u64 {
        let v = f64::from(value).clamp(f64::from(c.min), f64::from(c.max));
        let scaled = ((v - f64::from(c.min)) * f64::from(c.values_per_unit) + 0.5).floor();
        if scaled <= 0.0 {
            0
        } else {
            (scaled as u64).min(c.steps)
        }
    }

    fn reference_decode(c: &ScalarCodec, code: u64) -> f32 {
        (f64::from(c.min) + code as f64 / f64::from(c.values_per_unit)) as f32
    }

    #[test]
    fn fast_paths_give_the_literal_formulas_bits() -> TestResult {
        let codecs = [
            ScalarCodec::new(-262_144.0, 262_144.0, 8)?,
            ScalarCodec::new(-32_768.0, 32_768.0, 4)?,
            ScalarCodec::new(-1000.0, 1000.0, 100)?,
            ScalarCodec::new(-7.25, 3.5, 3)?,
            ScalarCodec::new(0.0, 1.0, 1 << 31)?,
        ];
        // Raw f32 bit patterns plus in-range values, from the shared test RNG.
        let mut rng = citadel_testkit::TestRng::new(0x9E37_79B9_7F4A_7C15);
        let mut next = move || rng.next_u64();
        for codec in &codecs {
            for _ in 0..20_000 {
                let raw = f32::from_bits(next() as u32);
                let span = f64::from(codec.max) - f64::from(codec.min);
                let inside = (f64::from(codec.min)
                    + (next() % 1_000_001) as f64 / 1_000_000.0 * span)
                    as f32;
                for value in [raw, inside] {
                    if value.is_nan() {
                        continue;
                    }
                    let code = codec.encode(value)?;
                    assert_eq!(code, reference_encode(codec, value), "{value:?}");
                    let back = codec.decode(code)?;
                    assert_eq!(
                        back.to_bits(),
                        reference_decode(codec, code).to_bits(),
                        "{code}"
                    );
                }
            }
        }
        Ok(())
    }

    #[test]
    fn default_bit_budgets() -> TestResult {
        let pos = Vector3Codec::new(
            [-262_144.0, -262_144.0, -32_768.0],
            [262_144.0, 262_144.0, 32_768.0],
            8,
        )?;
        assert_eq!(pos.bits(), 66);
        let vel = Vector3Codec::new([-32_768.0; 3], [32_768.0; 3], 4)?;
        assert_eq!(vel.bits(), 57);
        Ok(())
    }

    #[test]
    fn rejects_bad_parameters() {
        assert_eq!(
            ScalarCodec::new(f32::NAN, 1.0, 1),
            Err(CodecError::NonFiniteBounds)
        );
        assert_eq!(ScalarCodec::new(1.0, 1.0, 1), Err(CodecError::EmptyRange));
        assert_eq!(
            ScalarCodec::new(0.0, 1.0, 0),
            Err(CodecError::ZeroResolution)
        );
        assert_eq!(
            ScalarCodec::new(-f32::MAX, f32::MAX, u32::MAX),
            Err(CodecError::TooWide)
        );
    }

    #[test]
    fn nan_is_an_error_and_infinities_saturate() -> TestResult {
        let c = ScalarCodec::new(0.0, 4.0, 1)?;
        assert_eq!(c.encode(f32::NAN), Err(EncodeError::NotANumber));
        assert_eq!(c.encode(f32::INFINITY), Ok(4));
        assert_eq!(c.encode(f32::NEG_INFINITY), Ok(0));
        assert!(c.decode(5).is_err());
        Ok(())
    }
}
