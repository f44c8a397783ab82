//! Bit-varint: LEB128 groups written into a bitstream (NetworkPeer kinds).
//!
//! Each group is `more:1` then `data:7`, least significant group first, at
//! most 10 groups; the 10th group may only carry 0 or 1 and never sets
//! `more`; a multi-group value whose last group is zero is overlong and
//! rejected. Byte-aligned, this is plain LEB128 (300 → `ac 02`).

use crate::bits::{BitReader, BitWriter};
use crate::error::DecodeError;

/// Maximum number of 7-bit groups of a `u64`.
pub const MAX_VARINT_GROUPS: u32 = 10;

/// Writes `value` as a bit-varint.
pub fn write_varint(w: &mut BitWriter, mut value: u64) {
    loop {
        let data = value & 0x7F;
        value >>= 7;
        let more = value != 0;
        w.write_bits((u64::from(more) << 7) | data, 8);
        if !more {
            break;
        }
    }
}

/// Number of bits [`write_varint`] uses for `value`.
pub fn varint_bits(value: u64) -> usize {
    let significant = 64 - value.leading_zeros() as usize;
    significant.div_ceil(7).max(1) * 8
}

/// Reads a canonical bit-varint.
pub fn read_varint(r: &mut BitReader<'_>) -> Result<u64, DecodeError> {
    let mut value: u64 = 0;
    for group in 0..MAX_VARINT_GROUPS {
        // One read per group: the continuation bit, then 7 data bits.
        let byte = r.read_bits(8)?;
        let more = byte & 0x80 != 0;
        let data = byte & 0x7F;
        let shift = group * 7;
        if group == MAX_VARINT_GROUPS - 1 && (data > 1 || more) {
            return Err(DecodeError::Varint);
        }
        value |= data << shift;
        if !more {
            if group > 0 && data == 0 {
                return Err(DecodeError::Varint);
            }
            return Ok(value);
        }
    }
    Err(DecodeError::Varint)
}

/// Reads a bit-varint that must fit `u32` (collection index, generation).
pub fn read_varint_u32(r: &mut BitReader<'_>) -> Result<u32, DecodeError> {
    u32::try_from(read_varint(r)?).map_err(|_| DecodeError::Varint)
}

#[cfg(test)]
mod tests {
    use super::*;
    type TestResult = Result<(), Box<dyn std::error::Error>>;

    fn encode(v: u64) -> Vec<u8> {
        let mut w = BitWriter::new();
        write_varint(&mut w, v);
        assert_eq!(w.bit_len(), varint_bits(v));
        w.into_bytes()
    }

    #[test]
    fn byte_aligned_matches_leb128() {
        assert_eq!(encode(0), vec![0x00]);
        assert_eq!(encode(127), vec![0x7F]);
        assert_eq!(encode(128), vec![0x80, 0x01]);
        assert_eq!(encode(300), vec![0xAC, 0x02]);
        assert_eq!(encode(u64::MAX).len(), 10);
    }

    #[test]
    fn round_trip_edges() -> TestResult {
        for v in [
            0,
            1,
            127,
            128,
            16_383,
            16_384,
            u64::from(u32::MAX),
            u64::MAX - 1,
            u64::MAX,
        ] {
            let bytes = encode(v);
            let mut r = BitReader::new(&bytes);
            assert_eq!(read_varint(&mut r)?, v);
            r.finish()?;
        }
        Ok(())
    }

    #[test]
    fn rejects_overlong_and_overflow() {
        let mut r = BitReader::new(&[0x80, 0x00]);
        assert_eq!(read_varint(&mut r), Err(DecodeError::Varint));
        let mut overflow = vec![0xFF; 9];
        overflow.push(0x02);
        let mut r = BitReader::new(&overflow);
        assert_eq!(read_varint(&mut r), Err(DecodeError::Varint));
        let mut eleven = vec![0xFF; 10];
        eleven.push(0x01);
        let mut r = BitReader::new(&eleven);
        assert_eq!(read_varint(&mut r), Err(DecodeError::Varint));
        let mut r = BitReader::new(&[0x80]);
        assert_eq!(read_varint(&mut r), Err(DecodeError::Truncated));
    }

    #[test]
    fn unaligned_values_round_trip_and_a_cut_group_is_truncated() -> TestResult {
        for lead in 1..8u32 {
            for v in [0, 1, 127, 128, 300, 2_097_151, 2_097_152, u64::MAX] {
                let mut w = BitWriter::new();
                w.write_bits(0, lead);
                write_varint(&mut w, v);
                w.write_bits(1, 1);
                let bytes = w.into_bytes();
                let mut r = BitReader::new(&bytes);
                r.read_bits(lead)?;
                assert_eq!(read_varint(&mut r)?, v, "lead {lead}");
                assert!(r.read_bool()?, "the bit after the varint");
                // The whole bytes before the varint's last bit: its last
                // group is cut, whichever bit it is cut at.
                let end = (lead as usize + varint_bits(v) - 1) / 8;
                let mut r = BitReader::new(&bytes[..end]);
                r.read_bits(lead)?;
                assert_eq!(
                    read_varint(&mut r),
                    Err(DecodeError::Truncated),
                    "lead {lead}, {v}"
                );
            }
        }
        Ok(())
    }
}
