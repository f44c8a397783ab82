//! The common shape of a typed body, and the byte cursor the fixed-layout
//! (big-endian) bodies decode with.
//!
//! Every body type has inherent `encode`/`decode` methods (so the seed's
//! `RoomCreate { params }.encode()` works without imports) and implements
//! [`WireBody`] so generic code (tests, fuzzers, SDK helpers) can treat all
//! kinds alike. Bodies that need a codec or schema to decode (kinds 8, 13)
//! have their own signatures instead.

use bytes::Bytes;

use crate::envelope::Envelope;
use crate::error::DecodeError;

/// A body with a fixed kind and context-free codec.
pub trait WireBody: Sized {
    /// The envelope kind carrying this body.
    const KIND: u16;

    /// Appends the encoded body to `out`.
    fn encode_into(&self, out: &mut Vec<u8>);

    /// Decodes a body, never panicking on any input.
    fn decode_body(body: &[u8]) -> Result<Self, DecodeError>;

    /// Encodes to a fresh buffer.
    fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode_into(&mut out);
        out
    }

    /// Wraps the encoded body in an envelope of [`WireBody::KIND`].
    fn to_envelope(&self) -> Envelope {
        Envelope::new(Self::KIND, Bytes::from(self.to_bytes()))
    }
}

/// Implements [`WireBody`] by delegating to inherent `encode_into`/`decode`.
macro_rules! wire_body {
    ($ty:ty, $kind:expr) => {
        impl $crate::body::WireBody for $ty {
            const KIND: u16 = $kind;
            fn encode_into(&self, out: &mut Vec<u8>) {
                <$ty>::encode_into(self, out)
            }
            fn decode_body(body: &[u8]) -> Result<Self, $crate::error::DecodeError> {
                <$ty>::decode(body)
            }
        }
        impl $ty {
            /// Encodes the body to a fresh buffer.
            pub fn encode(&self) -> Vec<u8> {
                let mut out = Vec::new();
                self.encode_into(&mut out);
                out
            }
        }
    };
}
pub(crate) use wire_body;

/// A bounds-checked big-endian cursor over a body. Every read checks the
/// remaining length first and fails with [`DecodeError::Truncated`].
#[derive(Debug, Clone)]
pub struct ByteReader<'a> {
    data: &'a [u8],
}

impl<'a> ByteReader<'a> {
    /// A cursor at the start of `data`.
    pub fn new(data: &'a [u8]) -> Self {
        ByteReader { data }
    }

    /// Bytes not yet consumed.
    pub fn remaining(&self) -> usize {
        self.data.len()
    }

    /// Consumes `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.data.len() {
            return Err(DecodeError::Truncated);
        }
        let (head, tail) = self.data.split_at(n);
        self.data = tail;
        Ok(head)
    }

    /// Consumes a fixed-size array.
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let (head, tail) = self
            .data
            .split_first_chunk::<N>()
            .ok_or(DecodeError::Truncated)?;
        self.data = tail;
        Ok(*head)
    }

    /// Reads a `u8`.
    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.array::<1>()?[0])
    }
    /// Reads a big-endian `u16`.
    pub fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.array()?))
    }
    /// Reads a big-endian `u32`.
    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.array()?))
    }
    /// Reads a big-endian `u64`.
    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_be_bytes(self.array()?))
    }
    /// Reads a big-endian `f32`.
    pub fn f32(&mut self) -> Result<f32, DecodeError> {
        Ok(f32::from_be_bytes(self.array()?))
    }
    /// Reads three big-endian `f32`.
    pub fn vec3(&mut self) -> Result<[f32; 3], DecodeError> {
        Ok([self.f32()?, self.f32()?, self.f32()?])
    }
    /// Reads four big-endian `f32`.
    pub fn vec4(&mut self) -> Result<[f32; 4], DecodeError> {
        Ok([self.f32()?, self.f32()?, self.f32()?, self.f32()?])
    }
    /// Reads a `u16`-length-prefixed UTF-8 string.
    pub fn string_u16(&mut self) -> Result<String, DecodeError> {
        let len = usize::from(self.u16()?);
        let bytes = self.take(len)?;
        std::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|_| DecodeError::InvalidUtf8)
    }
    /// Consumes everything left.
    pub fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.data)
    }
}

/// Appends big-endian `f32`s.
pub(crate) fn put_f32s(out: &mut Vec<u8>, values: &[f32]) {
    for v in values {
        out.extend_from_slice(&v.to_be_bytes());
    }
}

/// Longest prefix of `s` that fits `max` bytes and ends on a char boundary.
pub(crate) fn clamp_utf8(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Appends a `u16`-length-prefixed UTF-8 string, clamped at a char boundary
/// to 65 535 bytes so the length always matches.
pub(crate) fn put_string_u16(out: &mut Vec<u8>, s: &str) {
    let s = clamp_utf8(s, usize::from(u16::MAX));
    out.extend_from_slice(&(s.len() as u16).to_be_bytes());
    out.extend_from_slice(s.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clamp_respects_char_boundaries() {
        assert_eq!(clamp_utf8("héllo", 2), "h");
        assert_eq!(clamp_utf8("héllo", 3), "hé");
        assert_eq!(clamp_utf8("abc", 10), "abc");
    }

    #[test]
    fn reader_fails_without_consuming_on_short_input() {
        let mut r = ByteReader::new(&[1, 2, 3]);
        assert_eq!(r.u32(), Err(DecodeError::Truncated));
        assert_eq!(r.u16(), Ok(0x0102));
        assert_eq!(r.remaining(), 1);
    }
}
