//! MSB-first bit packing used by the bitstream kinds (8, 13, 14, 15) and the
//! quantized codecs.
//!
//! Rules (realtime-wire §3.1): an N-bit value is written from its top bit
//! down, most significant bit first inside each byte; the last partial byte
//! is zero-filled. A reader checks the remaining length before consuming (a
//! failed read does not move the cursor) and [`BitReader::finish`] accepts
//! only fewer than 8 remaining bits, all zero.
//!
//! Not here: field layouts. Call order: `BitWriter::new`, `write_*`,
//! `into_bytes`; `BitReader::new`, `read_*`, `finish`.

use crate::error::DecodeError;

/// Appends bit fields to a byte buffer, most significant bit first.
///
/// Bits collect in a left-aligned 64-bit accumulator and move to the buffer
/// a whole byte run at a time.
#[derive(Debug, Default, Clone)]
pub struct BitWriter {
    bytes: Vec<u8>,
    /// Pending bits, left-aligned: the top `used` bits are valid.
    acc: u64,
    used: u32,
}

impl BitWriter {
    /// An empty writer.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty writer with room for `bytes` bytes.
    pub fn with_capacity(bytes: usize) -> Self {
        BitWriter {
            bytes: Vec::with_capacity(bytes),
            acc: 0,
            used: 0,
        }
    }

    /// Writes the low `bits` bits of `value` (0..=64; higher bits of `value`
    /// are ignored). Zero bits writes nothing.
    #[inline]
    pub fn write_bits(&mut self, value: u64, bits: u32) {
        let bits = bits.min(64);
        if bits == 0 {
            return;
        }
        if bits > 32 {
            self.push_chunk(value >> 32, bits - 32);
            self.push_chunk(value & 0xFFFF_FFFF, 32);
        } else {
            self.push_chunk(value, bits);
        }
    }

    /// Appends `bits` (1..=32) low bits of `value`.
    #[inline]
    fn push_chunk(&mut self, value: u64, bits: u32) {
        if self.used + bits > 64 {
            self.flush_whole_bytes();
        }
        let value = value & ((1u64 << bits) - 1);
        self.acc |= value << (64 - self.used - bits);
        self.used += bits;
    }

    #[inline]
    fn flush_whole_bytes(&mut self) {
        let whole = (self.used / 8) as usize;
        // A fixed 8-byte append compiles to one store; the tail past the
        // whole bytes is cut off again.
        let keep = self.bytes.len() + whole;
        self.bytes.extend_from_slice(&self.acc.to_be_bytes());
        self.bytes.truncate(keep);
        self.acc = if whole >= 8 {
            0
        } else {
            self.acc << (whole * 8)
        };
        self.used -= (whole * 8) as u32;
    }

    /// Writes one bit.
    pub fn write_bool(&mut self, value: bool) {
        self.write_bits(u64::from(value), 1);
    }

    /// Writes whole bytes as 8-bit fields.
    pub fn write_bytes(&mut self, bytes: &[u8]) {
        if self.used == 0 {
            self.bytes.extend_from_slice(bytes);
        } else {
            for &b in bytes {
                self.push_chunk(u64::from(b), 8);
            }
        }
    }

    /// Bits written so far.
    pub fn bit_len(&self) -> usize {
        self.bytes.len() * 8 + self.used as usize
    }

    /// Finishes with zero padding to a byte boundary.
    pub fn into_bytes(mut self) -> Vec<u8> {
        let tail = self.used.div_ceil(8) as usize;
        let be = self.acc.to_be_bytes();
        self.bytes.extend_from_slice(&be[..tail]);
        self.bytes
    }
}

/// Reads MSB-first bit fields from a byte slice.
#[derive(Debug, Clone)]
pub struct BitReader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> BitReader<'a> {
    /// A reader positioned at the first bit of `data`.
    pub fn new(data: &'a [u8]) -> Self {
        BitReader { data, pos: 0 }
    }

    /// Bits not yet consumed.
    #[inline]
    pub fn remaining_bits(&self) -> usize {
        self.data.len() * 8 - self.pos
    }

    /// Bits consumed so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// The 8 bytes starting at byte `index`, zero-padded past the end.
    #[inline]
    fn window(&self, index: usize) -> u64 {
        if let Some(chunk) = self
            .data
            .get(index..)
            .and_then(|rest| rest.first_chunk::<8>())
        {
            return u64::from_be_bytes(*chunk);
        }
        let mut buf = [0u8; 8];
        if let Some(rest) = self.data.get(index..) {
            let take = rest.len().min(8);
            if let (Some(dst), Some(src)) = (buf.get_mut(..take), rest.get(..take)) {
                dst.copy_from_slice(src);
            }
        }
        u64::from_be_bytes(buf)
    }

    /// Reads `bits` bits (0..=64) as an unsigned value. Fails with
    /// [`DecodeError::Truncated`] without moving if too few bits remain.
    #[inline]
    pub fn read_bits(&mut self, bits: u32) -> Result<u64, DecodeError> {
        if bits > 64 {
            return Err(DecodeError::InvalidValue("bit width above 64"));
        }
        if bits as usize > self.remaining_bits() {
            return Err(DecodeError::Truncated);
        }
        if bits == 0 {
            return Ok(0);
        }
        if bits > 56 {
            let high = self.read_bits(bits - 32)?;
            let low = self.read_bits(32)?;
            return Ok((high << 32) | low);
        }
        let offset = (self.pos % 8) as u32;
        let window = self.window(self.pos / 8);
        self.pos += bits as usize;
        Ok((window << offset) >> (64 - bits))
    }

    /// Reads one bit.
    #[inline]
    pub fn read_bool(&mut self) -> Result<bool, DecodeError> {
        Ok(self.read_bits(1)? == 1)
    }

    /// Reads a 32-bit field.
    #[inline]
    pub fn read_u32(&mut self) -> Result<u32, DecodeError> {
        Ok(self.read_bits(32)? as u32)
    }

    /// Reads a 16-bit field.
    #[inline]
    pub fn read_u16(&mut self) -> Result<u16, DecodeError> {
        Ok(self.read_bits(16)? as u16)
    }

    /// Reads `n` whole bytes as 8-bit fields (checked before allocating).
    pub fn read_bytes(&mut self, n: usize) -> Result<Vec<u8>, DecodeError> {
        if n.checked_mul(8)
            .is_none_or(|bits| bits > self.remaining_bits())
        {
            return Err(DecodeError::Truncated);
        }
        if self.pos.is_multiple_of(8) {
            let start = self.pos / 8;
            let slice = self
                .data
                .get(start..start + n)
                .ok_or(DecodeError::Truncated)?;
            self.pos += n * 8;
            return Ok(slice.to_vec());
        }
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(self.read_bits(8)? as u8);
        }
        Ok(out)
    }

    /// Reads exactly `N` bytes into an array.
    pub fn read_array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        if N * 8 > self.remaining_bits() {
            return Err(DecodeError::Truncated);
        }
        let mut out = [0u8; N];
        for b in &mut out {
            *b = self.read_bits(8)? as u8;
        }
        Ok(out)
    }

    /// Accepts the end of the stream: fewer than 8 bits may remain and all
    /// must be zero.
    pub fn finish(&self) -> Result<(), DecodeError> {
        let rest = self.remaining_bits();
        if rest >= 8 {
            return Err(DecodeError::TrailingBytes);
        }
        if rest == 0 {
            return Ok(());
        }
        let last = *self.data.last().ok_or(DecodeError::Truncated)?;
        if last & ((1u8 << rest) - 1) != 0 {
            return Err(DecodeError::NonZeroPadding);
        }
        Ok(())
    }
}

/// Integer `ceil(log2(n))`, with `ceil_log2(0) = ceil_log2(1) = 0`.
pub fn ceil_log2(n: u128) -> u32 {
    if n <= 1 {
        0
    } else {
        128 - (n - 1).leading_zeros()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    type TestResult = Result<(), Box<dyn std::error::Error>>;

    #[test]
    fn spec_examples() {
        let mut w = BitWriter::new();
        w.write_bits(1, 1);
        assert_eq!(w.into_bytes(), vec![0x80]);
        let mut w = BitWriter::new();
        w.write_bits(0xA, 4);
        w.write_bits(0x5, 4);
        assert_eq!(w.into_bytes(), vec![0xA5]);
    }

    #[test]
    fn u32_on_a_byte_boundary_is_big_endian() -> TestResult {
        let mut w = BitWriter::new();
        w.write_bits(0x0102_0304, 32);
        w.write_bits(u64::MAX, 64);
        let bytes = w.into_bytes();
        assert_eq!(&bytes[..4], &[1, 2, 3, 4]);
        let mut r = BitReader::new(&bytes);
        assert_eq!(r.read_bits(32)?, 0x0102_0304);
        assert_eq!(r.read_bits(64)?, u64::MAX);
        r.finish()?;
        Ok(())
    }

    #[test]
    fn failed_read_does_not_move() -> TestResult {
        let data = [0xFF];
        let mut r = BitReader::new(&data);
        assert_eq!(r.read_bits(3)?, 7);
        assert_eq!(r.read_bits(6), Err(DecodeError::Truncated));
        assert_eq!(r.position(), 3);
        assert_eq!(r.read_bits(5)?, 31);
        Ok(())
    }

    #[test]
    fn finish_rules() -> TestResult {
        let data = [0b1010_0000];
        let mut r = BitReader::new(&data);
        r.read_bits(3)?;
        assert_eq!(r.finish(), Ok(()));
        let data = [0b1010_0001];
        let mut r = BitReader::new(&data);
        r.read_bits(3)?;
        assert_eq!(r.finish(), Err(DecodeError::NonZeroPadding));
        let data = [0, 0];
        let r = BitReader::new(&data);
        assert_eq!(r.finish(), Err(DecodeError::TrailingBytes));
        Ok(())
    }

    #[test]
    fn unaligned_round_trip() -> TestResult {
        let mut w = BitWriter::new();
        let fields: [(u64, u32); 6] = [
            (5, 3),
            (0x1_2345_6789, 37),
            (0, 0),
            (1, 1),
            (u64::MAX, 64),
            (0x3FF, 10),
        ];
        for (v, b) in fields {
            w.write_bits(v, b);
        }
        let bits = w.bit_len();
        let bytes = w.into_bytes();
        assert_eq!(bytes.len(), bits.div_ceil(8));
        let mut r = BitReader::new(&bytes);
        for (v, b) in fields {
            assert_eq!(r.read_bits(b)?, v);
        }
        r.finish()?;
        Ok(())
    }

    #[test]
    fn ceil_log2_values() {
        assert_eq!(ceil_log2(0), 0);
        assert_eq!(ceil_log2(1), 0);
        assert_eq!(ceil_log2(2), 1);
        assert_eq!(ceil_log2(5), 3);
        assert_eq!(ceil_log2(4_194_305), 23);
        assert_eq!(ceil_log2(1u128 << 64), 64);
    }
}
