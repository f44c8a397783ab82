//! The envelope and its two encodings: length-prefixed frames for streams and
//! WebSocket messages, bare datagrams for QUIC/WebTransport datagrams.
//!
//! What it is not: it knows nothing of kinds beyond carrying the `u16`; body
//! layouts live in the per-family modules. Call order on a stream: append
//! received bytes to a `BytesMut`, then call [`decode_framed`] until it
//! returns `Ok(None)`; any `Err` means the stream cannot be resynchronised.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use thiserror::Error;

use crate::protocol::{LENGTH_PREFIX_BYTES, MAX_FRAME_BODY_BYTES};

/// Width of the kind header inside a frame or datagram.
pub const KIND_BYTES: usize = 2;

/// One realtime message: a kind discriminant plus an opaque body.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Envelope {
    /// Message-family discriminant (see [`crate::protocol`]).
    pub kind: u16,
    /// Opaque payload, shared without copying.
    pub body: Bytes,
}

/// Framing errors. A stream that produced one cannot be resynchronised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum WireError {
    /// The declared length exceeds [`MAX_FRAME_BODY_BYTES`].
    #[error("frame length {len} exceeds the maximum of {MAX_FRAME_BODY_BYTES}")]
    FrameTooLarge {
        /// Declared length (kind + payload).
        len: u32,
    },
    /// The declared length exceeds the reader's configured limit (at most
    /// [`MAX_FRAME_BODY_BYTES`]; see [`crate::FrameDecoder::new`]).
    #[error("frame length {len} exceeds the limit of {max}")]
    FrameOverLimit {
        /// Declared length (kind + payload).
        len: u32,
        /// The limit in force.
        max: usize,
    },
    /// The declared length is below 2 and cannot hold the kind.
    #[error("frame length {len} cannot hold the 2-byte kind")]
    FrameTooSmall {
        /// Declared length.
        len: u32,
    },
    /// A datagram shorter than the 2-byte kind.
    #[error("datagram of {len} bytes cannot hold the 2-byte kind")]
    DatagramTooSmall {
        /// Datagram length.
        len: usize,
    },
}

impl Envelope {
    /// Builds an envelope from anything convertible to `Bytes`.
    pub fn new(kind: u16, body: impl Into<Bytes>) -> Self {
        Envelope {
            kind,
            body: body.into(),
        }
    }

    /// Size of the framed form: 4-byte length, 2-byte kind, body.
    pub fn framed_len(&self) -> usize {
        LENGTH_PREFIX_BYTES + KIND_BYTES + self.body.len()
    }

    /// Size of the datagram form: 2-byte kind, body.
    pub fn datagram_len(&self) -> usize {
        KIND_BYTES + self.body.len()
    }

    /// Encodes the framed form. A body larger than [`MAX_FRAME_BODY_BYTES`]
    /// minus the kind is the caller's error and will be refused by every
    /// decoder; senders check [`Envelope::fits_frame`] first.
    pub fn encode_framed(&self) -> Bytes {
        let mut out = BytesMut::with_capacity(self.framed_len());
        self.encode_framed_into(&mut out);
        out.freeze()
    }

    /// Appends the framed form to `out` (used to coalesce several envelopes
    /// into one write).
    pub fn encode_framed_into(&self, out: &mut BytesMut) {
        let len = u32::try_from(KIND_BYTES + self.body.len()).unwrap_or(u32::MAX);
        out.reserve(self.framed_len());
        out.put_u32(len);
        out.put_u16(self.kind);
        out.put_slice(&self.body);
    }

    /// Whether the framed form is within [`MAX_FRAME_BODY_BYTES`].
    pub fn fits_frame(&self) -> bool {
        KIND_BYTES + self.body.len() <= MAX_FRAME_BODY_BYTES
    }

    /// Encodes the datagram form (no length prefix).
    pub fn encode_datagram(&self) -> Bytes {
        let mut out = BytesMut::with_capacity(self.datagram_len());
        out.put_u16(self.kind);
        out.put_slice(&self.body);
        out.freeze()
    }
}

/// Encodes the framed form of an envelope of `kind` whose body is the
/// concatenation of `parts`, in one buffer (no intermediate body copy): how
/// a body made of a header and a payload is framed without assembling it
/// first. The same size rule as [`Envelope::encode_framed`] applies.
pub fn encode_framed_parts(kind: u16, parts: &[&[u8]]) -> Bytes {
    let body_len: usize = parts.iter().map(|p| p.len()).sum();
    let len = u32::try_from(KIND_BYTES + body_len).unwrap_or(u32::MAX);
    let mut out = BytesMut::with_capacity(LENGTH_PREFIX_BYTES + KIND_BYTES + body_len);
    out.put_u32(len);
    out.put_u16(kind);
    for part in parts {
        out.put_slice(part);
    }
    out.freeze()
}

/// Decodes one framed envelope from the front of `buf`.
///
/// Returns `Ok(None)` while the buffer does not yet hold a complete frame
/// (nothing is consumed). The declared length is checked before any
/// allocation; on success exactly one frame is consumed and the body shares
/// the buffer's memory.
pub fn decode_framed(buf: &mut BytesMut) -> Result<Option<Envelope>, WireError> {
    let Some(len) = peek_frame_len(buf)? else {
        return Ok(None);
    };
    let total = LENGTH_PREFIX_BYTES + len;
    if buf.len() < total {
        return Ok(None);
    }
    let mut frame = buf.split_to(total).freeze();
    frame.advance(LENGTH_PREFIX_BYTES);
    let kind = frame.get_u16();
    Ok(Some(Envelope { kind, body: frame }))
}

/// Reads and validates the length prefix at the front of `buf` without
/// consuming anything. `Ok(None)` if fewer than 4 bytes are buffered.
/// Returns the declared length (kind + payload) as `usize`.
pub fn peek_frame_len(buf: &[u8]) -> Result<Option<usize>, WireError> {
    let Some(prefix) = buf.first_chunk::<LENGTH_PREFIX_BYTES>() else {
        return Ok(None);
    };
    let len = u32::from_be_bytes(*prefix);
    if len as usize > MAX_FRAME_BODY_BYTES {
        return Err(WireError::FrameTooLarge { len });
    }
    if (len as usize) < KIND_BYTES {
        return Err(WireError::FrameTooSmall { len });
    }
    Ok(Some(len as usize))
}

/// The whole length (prefix included) of the framed envelope at the front
/// of `buf`, if its prefix is there and valid ([`peek_frame_len`]); how a
/// run of concatenated frames is cut into envelopes. The frame itself may
/// extend past `buf`.
pub fn framed_len(buf: &[u8]) -> Option<usize> {
    let declared = peek_frame_len(buf).ok()??;
    Some(LENGTH_PREFIX_BYTES + declared)
}

/// Decodes a datagram (one envelope, no length prefix). The body is copied;
/// use [`decode_datagram_bytes`] to share an owned buffer instead.
pub fn decode_datagram(datagram: &[u8]) -> Result<Envelope, WireError> {
    decode_datagram_bytes(Bytes::copy_from_slice(datagram))
}

/// Decodes a datagram held in `Bytes` without copying its body.
pub fn decode_datagram_bytes(mut datagram: Bytes) -> Result<Envelope, WireError> {
    if datagram.len() < KIND_BYTES {
        return Err(WireError::DatagramTooSmall {
            len: datagram.len(),
        });
    }
    let kind = datagram.get_u16();
    Ok(Envelope {
        kind,
        body: datagram,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    type TestResult = Result<(), Box<dyn std::error::Error>>;

    #[test]
    fn framed_layout_is_length_kind_body() {
        let env = Envelope::new(3, vec![0xAA, 0xBB]);
        assert_eq!(&env.encode_framed()[..], &[0, 0, 0, 4, 0, 3, 0xAA, 0xBB]);
        assert_eq!(&env.encode_datagram()[..], &[0, 3, 0xAA, 0xBB]);
    }

    #[test]
    fn framed_len_reads_a_valid_prefix_only() {
        let frame = Envelope::new(3, vec![0xAA, 0xBB]).encode_framed();
        assert_eq!(framed_len(&frame), Some(frame.len()));
        assert_eq!(framed_len(&frame[..4]), Some(frame.len()), "prefix only");
        assert_eq!(framed_len(&frame[..3]), None);
        assert_eq!(framed_len(&[0, 0, 0, 1, 9]), None, "shorter than a kind");
        assert_eq!(framed_len(&[0xFF; 4]), None, "over the frame bound");
    }

    #[test]
    fn framed_parts_equal_the_framed_concatenation() {
        let whole = Envelope::new(2, vec![1, 2, 3, 4, 5]).encode_framed();
        assert_eq!(encode_framed_parts(2, &[&[1, 2], &[], &[3, 4, 5]]), whole);
        assert_eq!(
            encode_framed_parts(9, &[]),
            Envelope::new(9, Vec::new()).encode_framed()
        );
    }

    #[test]
    fn incomplete_frames_wait_and_consume_nothing() {
        let full = Envelope::new(7, vec![1, 2, 3]).encode_framed();
        for cut in 0..full.len() {
            let mut buf = BytesMut::from(&full[..cut]);
            assert_eq!(decode_framed(&mut buf), Ok(None));
            assert_eq!(buf.len(), cut);
        }
    }

    #[test]
    fn several_frames_decode_in_order() -> TestResult {
        let mut buf = BytesMut::new();
        Envelope::new(1, vec![9; 8]).encode_framed_into(&mut buf);
        Envelope::new(2, Vec::new()).encode_framed_into(&mut buf);
        buf.extend_from_slice(&[0, 0]);
        let a = decode_framed(&mut buf)?.ok_or("first frame missing")?;
        let b = decode_framed(&mut buf)?.ok_or("second frame missing")?;
        assert_eq!((a.kind, a.body.len()), (1, 8));
        assert_eq!((b.kind, b.body.len()), (2, 0));
        assert_eq!(decode_framed(&mut buf), Ok(None));
        assert_eq!(buf.len(), 2);
        Ok(())
    }

    #[test]
    fn length_bounds_are_checked_before_waiting_for_data() {
        let mut too_large = BytesMut::from(&[0x00, 0x80, 0x00, 0x01][..]);
        assert_eq!(
            decode_framed(&mut too_large),
            Err(WireError::FrameTooLarge { len: 0x0080_0001 })
        );
        let mut max = BytesMut::from(&[0x00, 0x80, 0x00, 0x00][..]);
        assert_eq!(decode_framed(&mut max), Ok(None));
        for len in [0u8, 1] {
            let mut small = BytesMut::from(&[0, 0, 0, len][..]);
            assert_eq!(
                decode_framed(&mut small),
                Err(WireError::FrameTooSmall { len: len.into() })
            );
        }
    }

    #[test]
    fn datagram_needs_a_kind() -> TestResult {
        assert_eq!(
            decode_datagram(&[7]),
            Err(WireError::DatagramTooSmall { len: 1 })
        );
        let env = decode_datagram(&[0, 8])?;
        assert_eq!((env.kind, env.body.len()), (8, 0));
        Ok(())
    }
}
