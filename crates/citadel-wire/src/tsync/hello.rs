//! Kind 7: transform-sync negotiation and the codec it defines.
//!
//! The client opts in with an empty body (the server ignores whatever a
//! client sends). The server answers with 59 big-endian bytes: position
//! bounds and resolution, velocity bounds and resolution, `quat_mode`,
//! `send_rate_hz`, `sim_rate_hz`. Decoding checks length and quat mode and
//! ignores trailing bytes; building the codec checks the bounds.

use crate::body::{ByteReader, put_f32s, wire_body};
use crate::error::{CodecError, DecodeError};
use crate::protocol::KIND_TSYNC_HELLO;
use crate::quant::Vector3Codec;
use crate::quat::QuatMode;

/// Size of the server's negotiation body.
pub const HELLO_BYTES: usize = 59;

/// The negotiated transform-sync parameters (server → client HELLO).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HelloParams {
    /// Position lower bounds (cm).
    pub position_min: [f32; 3],
    /// Position upper bounds (cm).
    pub position_max: [f32; 3],
    /// Position codes per cm.
    pub position_values_per_unit: u32,
    /// Velocity lower bounds (cm/s).
    pub velocity_min: [f32; 3],
    /// Velocity upper bounds (cm/s).
    pub velocity_max: [f32; 3],
    /// Velocity codes per cm/s.
    pub velocity_values_per_unit: u32,
    /// Quaternion mode.
    pub quat_mode: QuatMode,
    /// Snapshots per second.
    pub send_rate_hz: u8,
    /// Server simulation ticks per second.
    pub sim_rate_hz: u8,
}

impl Default for HelloParams {
    fn default() -> Self {
        HelloParams {
            position_min: [-262_144.0, -262_144.0, -32_768.0],
            position_max: [262_144.0, 262_144.0, 32_768.0],
            position_values_per_unit: 8,
            velocity_min: [-32_768.0; 3],
            velocity_max: [32_768.0; 3],
            velocity_values_per_unit: 4,
            quat_mode: QuatMode::Bits10,
            send_rate_hz: 20,
            sim_rate_hz: 60,
        }
    }
}

impl HelloParams {
    /// Appends the 59-byte body.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        put_f32s(out, &self.position_min);
        put_f32s(out, &self.position_max);
        out.extend_from_slice(&self.position_values_per_unit.to_be_bytes());
        put_f32s(out, &self.velocity_min);
        put_f32s(out, &self.velocity_max);
        out.extend_from_slice(&self.velocity_values_per_unit.to_be_bytes());
        out.push(self.quat_mode.wire_byte());
        out.push(self.send_rate_hz);
        out.push(self.sim_rate_hz);
    }

    /// Decodes; fewer than 59 bytes or an unknown quat mode is invalid.
    pub fn decode(body: &[u8]) -> Result<Self, DecodeError> {
        let mut r = ByteReader::new(body);
        if r.remaining() < HELLO_BYTES {
            return Err(DecodeError::Truncated);
        }
        let position_min = r.vec3()?;
        let position_max = r.vec3()?;
        let position_values_per_unit = r.u32()?;
        let velocity_min = r.vec3()?;
        let velocity_max = r.vec3()?;
        let velocity_values_per_unit = r.u32()?;
        let quat_mode = QuatMode::from_wire_byte(r.u8()?)
            .map_err(|_| DecodeError::InvalidValue("quat_mode must be 9, 10 or 15"))?;
        Ok(HelloParams {
            position_min,
            position_max,
            position_values_per_unit,
            velocity_min,
            velocity_max,
            velocity_values_per_unit,
            quat_mode,
            send_rate_hz: r.u8()?,
            sim_rate_hz: r.u8()?,
        })
    }

    /// Builds the codec these parameters describe.
    pub fn codec(&self) -> Result<TransformCodec, CodecError> {
        Ok(TransformCodec {
            position: Vector3Codec::new(
                self.position_min,
                self.position_max,
                self.position_values_per_unit,
            )?,
            velocity: Vector3Codec::new(
                self.velocity_min,
                self.velocity_max,
                self.velocity_values_per_unit,
            )?,
            quat_mode: self.quat_mode,
        })
    }
}
wire_body!(HelloParams, KIND_TSYNC_HELLO);

/// The quantizers a snapshot is encoded with.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TransformCodec {
    /// Position quantizer.
    pub position: Vector3Codec,
    /// Velocity quantizer.
    pub velocity: Vector3Codec,
    /// Rotation compression.
    pub quat_mode: QuatMode,
}

#[cfg(test)]
mod tests {
    use super::*;
    type TestResult = Result<(), Box<dyn std::error::Error>>;

    #[test]
    fn default_body_matches_the_spec() -> TestResult {
        let hex = "c8800000c8800000c700000048800000488000004700000000000008\
                   c7000000c7000000c7000000470000004700000047000000000000040a143c";
        let body = HelloParams::default().encode();
        assert_eq!(body.len(), HELLO_BYTES);
        let expect: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16))
            .collect::<Result<Vec<_>, _>>()?;
        assert_eq!(body, expect);
        assert_eq!(HelloParams::decode(&body)?, HelloParams::default());
        Ok(())
    }

    #[test]
    fn validation() {
        let mut body = HelloParams::default().encode();
        assert_eq!(
            HelloParams::decode(&body[..58]),
            Err(DecodeError::Truncated)
        );
        body.push(0xEE);
        assert!(HelloParams::decode(&body).is_ok());
        body[56] = 11;
        assert!(matches!(
            HelloParams::decode(&body),
            Err(DecodeError::InvalidValue(_))
        ));
        let mut p = HelloParams::default();
        p.position_max[0] = p.position_min[0];
        assert_eq!(p.codec(), Err(CodecError::EmptyRange));
    }
}
