//! [`FrameDecoder`]: the one reader of a stream of framed envelopes, for
//! every transport (WebSocket messages, QUIC and WebTransport streams) on
//! both sides, plus the helpers that turn a frame into its datagram form.
//!
//! What it is: a sans-IO reassembly buffer. Bytes go in with
//! [`FrameDecoder::handle_bytes`] in the order they arrived; envelopes come
//! out with [`FrameDecoder::poll_envelope`]. Each length prefix is checked
//! against the decoder's limit as soon as its four bytes are known, before
//! any byte of that frame is buffered, so a peer cannot make it hold more
//! than one frame of at most the limit plus what it already sent. A frame
//! may span calls and a call may carry several frames.
//!
//! What it is not: it reads no socket, keeps no clock and knows no kinds.
//!
//! Call order: `handle_bytes` with each chunk read → `poll_envelope` until
//! `Ok(None)` → read more. A framing error is sticky: frames completed
//! before the bad prefix are still returned, then every later poll returns
//! the same error and further input is ignored (a stream cannot be
//! resynchronised). At the end of a stream, [`FrameDecoder::buffered`] > 0
//! means it ended inside a frame.

use bytes::{Buf, Bytes, BytesMut};

use crate::envelope::{Envelope, KIND_BYTES, WireError};
use crate::protocol::{LENGTH_PREFIX_BYTES, MAX_FRAME_BODY_BYTES};

/// Reassembles framed envelopes from a byte stream.
#[derive(Debug)]
pub struct FrameDecoder {
    /// Validated bytes not yet returned: whole frames, then at most one
    /// partial frame (its header complete and checked) or partial header.
    buf: BytesMut,
    /// Largest declared length (kind + payload) accepted.
    max_len: usize,
    /// Bytes of the frame being buffered that have not arrived yet.
    body_left: usize,
    /// Bytes of the next header already buffered (0-3).
    header_fill: usize,
    /// The framing error seen, if any; `buf` then holds only the whole
    /// frames that preceded it.
    failed: Option<WireError>,
}

impl FrameDecoder {
    /// A decoder refusing any frame whose declared length (kind + payload)
    /// exceeds `max_len` (itself capped at [`MAX_FRAME_BODY_BYTES`]).
    pub fn new(max_len: usize) -> Self {
        FrameDecoder {
            buf: BytesMut::new(),
            max_len: max_len.min(MAX_FRAME_BODY_BYTES),
            body_left: 0,
            header_fill: 0,
            failed: None,
        }
    }

    /// The largest declared length this decoder accepts.
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// Bytes buffered and not yet returned as envelopes (after the last
    /// complete frame was polled: those of an unfinished frame).
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Whether a framing error was seen (polls report it once the frames
    /// before it are out).
    pub fn has_failed(&self) -> bool {
        self.failed.is_some()
    }

    /// Forgets everything buffered and any error: the next bytes start a
    /// new stream.
    pub fn reset(&mut self) {
        self.buf.clear();
        self.body_left = 0;
        self.header_fill = 0;
        self.failed = None;
    }

    fn check(&self, prefix: [u8; LENGTH_PREFIX_BYTES]) -> Result<usize, WireError> {
        let len = u32::from_be_bytes(prefix);
        let declared = len as usize;
        if declared > MAX_FRAME_BODY_BYTES {
            return Err(WireError::FrameTooLarge { len });
        }
        if declared > self.max_len {
            return Err(WireError::FrameOverLimit {
                len,
                max: self.max_len,
            });
        }
        if declared < KIND_BYTES {
            return Err(WireError::FrameTooSmall { len });
        }
        Ok(declared)
    }

    /// Takes the next bytes of the stream. Every length prefix they
    /// complete is checked first; the bytes of a refused frame (and
    /// everything after it) are not buffered.
    pub fn handle_bytes(&mut self, mut input: &[u8]) {
        if self.failed.is_some() {
            return;
        }
        // Finish the frame or header that an earlier call left open.
        if self.body_left > 0 {
            let n = self.body_left.min(input.len());
            self.buf.extend_from_slice(&input[..n]);
            self.body_left -= n;
            input = &input[n..];
        }
        if self.header_fill > 0 && !input.is_empty() {
            let n = (LENGTH_PREFIX_BYTES - self.header_fill).min(input.len());
            self.buf.extend_from_slice(&input[..n]);
            self.header_fill += n;
            input = &input[n..];
            if self.header_fill < LENGTH_PREFIX_BYTES {
                return;
            }
            self.header_fill = 0;
            let start = self.buf.len() - LENGTH_PREFIX_BYTES;
            let mut prefix = [0u8; LENGTH_PREFIX_BYTES];
            prefix.copy_from_slice(&self.buf[start..]);
            match self.check(prefix) {
                Ok(len) => {
                    let n = len.min(input.len());
                    self.buf.extend_from_slice(&input[..n]);
                    self.body_left = len - n;
                    input = &input[n..];
                }
                Err(error) => {
                    self.buf.truncate(start);
                    self.failed = Some(error);
                    return;
                }
            }
        }
        if input.is_empty() {
            return;
        }
        // Aligned on a frame boundary: check every header the input holds,
        // then buffer the accepted part in one copy.
        let mut at = 0;
        let mut refused = None;
        while let Some(prefix) = input
            .get(at..)
            .and_then(|rest| rest.first_chunk::<LENGTH_PREFIX_BYTES>())
        {
            match self.check(*prefix) {
                Ok(len) => at += LENGTH_PREFIX_BYTES + len,
                Err(error) => {
                    refused = Some(error);
                    break;
                }
            }
        }
        match refused {
            Some(error) => {
                self.buf.extend_from_slice(&input[..at]);
                self.failed = Some(error);
            }
            None if at > input.len() => {
                self.buf.extend_from_slice(input);
                self.body_left = at - input.len();
            }
            None => {
                self.buf.extend_from_slice(input);
                self.header_fill = input.len() - at;
            }
        }
    }

    /// The next complete envelope, `Ok(None)` while more bytes are needed,
    /// or the framing error once the frames before it were returned. The
    /// body shares the buffer's memory.
    pub fn poll_envelope(&mut self) -> Result<Option<Envelope>, WireError> {
        let Some(prefix) = self.buf.first_chunk::<LENGTH_PREFIX_BYTES>() else {
            return self.failed.map_or(Ok(None), Err);
        };
        // Every buffered prefix was checked when it arrived.
        let total = LENGTH_PREFIX_BYTES + u32::from_be_bytes(*prefix) as usize;
        if self.buf.len() < total {
            return self.failed.map_or(Ok(None), Err);
        }
        let mut frame = self.buf.split_to(total).freeze();
        frame.advance(LENGTH_PREFIX_BYTES);
        let kind = frame.get_u16();
        Ok(Some(Envelope { kind, body: frame }))
    }
}

/// The datagram form of a framed envelope (kind + body, no length prefix),
/// sharing the frame's memory; `None` if `frame` is shorter than a header.
pub fn framed_to_datagram(frame: &Bytes) -> Option<Bytes> {
    (frame.len() >= LENGTH_PREFIX_BYTES + KIND_BYTES).then(|| frame.slice(LENGTH_PREFIX_BYTES..))
}

#[cfg(test)]
mod tests {
    use super::*;

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    fn frames(envelopes: &[Envelope]) -> Vec<u8> {
        let mut out = BytesMut::new();
        for e in envelopes {
            e.encode_framed_into(&mut out);
        }
        out.to_vec()
    }

    fn drain(decoder: &mut FrameDecoder) -> Result<Vec<Envelope>, WireError> {
        let mut out = Vec::new();
        while let Some(e) = decoder.poll_envelope()? {
            out.push(e);
        }
        Ok(out)
    }

    fn sample() -> Vec<Envelope> {
        vec![
            Envelope::new(1, vec![9; 8]),
            Envelope::new(2, Vec::new()),
            Envelope::new(300, vec![7; 1000]),
        ]
    }

    #[test]
    fn every_split_of_a_stream_yields_the_same_envelopes() -> TestResult {
        let want = sample();
        let bytes = frames(&want);
        for cut in 0..=bytes.len() {
            let mut decoder = FrameDecoder::new(4096);
            decoder.handle_bytes(&bytes[..cut]);
            let mut got = drain(&mut decoder)?;
            decoder.handle_bytes(&bytes[cut..]);
            got.extend(drain(&mut decoder)?);
            assert_eq!(got, want, "cut at {cut}");
            assert_eq!(decoder.buffered(), 0);
        }
        Ok(())
    }

    #[test]
    fn byte_by_byte_input_yields_the_same_envelopes() -> TestResult {
        let want = sample();
        let mut decoder = FrameDecoder::new(4096);
        let mut got = Vec::new();
        for b in frames(&want) {
            decoder.handle_bytes(&[b]);
            got.extend(drain(&mut decoder)?);
        }
        assert_eq!(got, want);
        Ok(())
    }

    #[test]
    fn an_oversized_prefix_is_refused_before_its_body_is_buffered() {
        let mut decoder = FrameDecoder::new(64);
        // Declares 65 bytes, then sends a megabyte of "body".
        decoder.handle_bytes(&[0, 0, 0, 65]);
        decoder.handle_bytes(&vec![0xAA; 1 << 20]);
        assert_eq!(
            decoder.buffered(),
            0,
            "nothing of the refused frame is held"
        );
        assert_eq!(
            decoder.poll_envelope(),
            Err(WireError::FrameOverLimit { len: 65, max: 64 })
        );
        // Sticky: later input is ignored, the same error repeats.
        decoder.handle_bytes(&frames(&[Envelope::new(1, vec![1])]));
        assert_eq!(decoder.buffered(), 0);
        assert_eq!(
            decoder.poll_envelope(),
            Err(WireError::FrameOverLimit { len: 65, max: 64 })
        );
    }

    #[test]
    fn a_prefix_split_across_calls_is_checked_when_complete() {
        let mut decoder = FrameDecoder::new(64);
        decoder.handle_bytes(&[0, 0]);
        assert_eq!(decoder.poll_envelope(), Ok(None));
        decoder.handle_bytes(&[1, 0, 0xFF, 0xFF]);
        assert_eq!(decoder.buffered(), 0);
        assert_eq!(
            decoder.poll_envelope(),
            Err(WireError::FrameOverLimit { len: 256, max: 64 })
        );
    }

    #[test]
    fn frames_before_a_bad_prefix_are_still_returned() -> TestResult {
        let good = vec![Envelope::new(5, vec![1, 2, 3]), Envelope::new(6, vec![4])];
        let mut bytes = frames(&good);
        bytes.extend_from_slice(&[0, 0, 0, 1, 0xEE]);
        let mut decoder = FrameDecoder::new(1024);
        decoder.handle_bytes(&bytes);
        assert!(decoder.has_failed());
        assert_eq!(decoder.poll_envelope()?, Some(good[0].clone()));
        assert_eq!(decoder.poll_envelope()?, Some(good[1].clone()));
        assert_eq!(
            decoder.poll_envelope(),
            Err(WireError::FrameTooSmall { len: 1 })
        );
        Ok(())
    }

    #[test]
    fn hostile_prefixes_map_to_their_errors() {
        let cases: [([u8; 4], WireError); 4] = [
            ([0, 0, 0, 0], WireError::FrameTooSmall { len: 0 }),
            ([0, 0, 0, 1], WireError::FrameTooSmall { len: 1 }),
            (
                [0xFF, 0xFF, 0xFF, 0xFF],
                WireError::FrameTooLarge { len: u32::MAX },
            ),
            (
                [0x00, 0x80, 0x00, 0x01],
                WireError::FrameTooLarge { len: 0x0080_0001 },
            ),
        ];
        for (prefix, error) in cases {
            let mut decoder = FrameDecoder::new(usize::MAX);
            decoder.handle_bytes(&prefix);
            assert_eq!(decoder.poll_envelope(), Err(error), "{prefix:?}");
        }
        // The limit is capped at the wire maximum, which itself is accepted.
        let mut decoder = FrameDecoder::new(usize::MAX);
        assert_eq!(decoder.max_len(), MAX_FRAME_BODY_BYTES);
        decoder.handle_bytes(&[0x00, 0x80, 0x00, 0x00]);
        assert_eq!(decoder.poll_envelope(), Ok(None));
    }

    #[test]
    fn the_limit_is_inclusive() -> TestResult {
        let at_limit = Envelope::new(9, vec![0; 62]);
        let mut decoder = FrameDecoder::new(64);
        decoder.handle_bytes(&at_limit.encode_framed());
        assert_eq!(decoder.poll_envelope()?, Some(at_limit));
        Ok(())
    }

    #[test]
    fn a_stream_cut_inside_a_frame_leaves_bytes_buffered_until_reset() {
        let bytes = frames(&sample());
        let mut decoder = FrameDecoder::new(4096);
        decoder.handle_bytes(&bytes[..bytes.len() - 3]);
        let _ = drain(&mut decoder);
        assert!(decoder.buffered() > 0, "mid-frame at the end of the stream");
        decoder.reset();
        assert_eq!(decoder.buffered(), 0);
        decoder.handle_bytes(&[0, 0, 0, 2, 0, 8]);
        assert_eq!(
            decoder.poll_envelope(),
            Ok(Some(Envelope::new(8, Vec::new())))
        );
    }

    #[test]
    fn the_datagram_form_drops_only_the_prefix() {
        let frame = Envelope::new(3, vec![0xAA, 0xBB]).encode_framed();
        let datagram = framed_to_datagram(&frame);
        assert_eq!(datagram.as_deref(), Some(&[0, 3, 0xAA, 0xBB][..]));
        assert_eq!(
            framed_to_datagram(&Bytes::from_static(&[0, 0, 0, 2, 0])),
            None
        );
    }
}
