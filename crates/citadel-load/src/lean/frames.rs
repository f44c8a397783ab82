//! Streaming splitters of the bytes inside WebSocket messages: Citadel's
//! length-prefixed envelopes (a byte stream across messages), and
//! Colyseus' one-protocol-message-per-WebSocket-message.
//!
//! What it is: [`Splitter`] checks each Citadel length prefix with
//! citadel-wire's [`peek_frame_len`] (the same bound as every decoder) and
//! hands out, per envelope, its kind, its body length and the first
//! `capture` bytes of its body (a relay bot needs 24: sender id and the
//! payload's send time), skipping the rest without buffering it;
//! [`MessagePrefix`] does the same for whole messages. The captured bytes
//! live in one reused `Vec` whose capacity is set once, so steady-state
//! traffic allocates nothing. What it is not: an envelope decoder (bodies
//! are not kept; the handshake raises `capture` for the few replies it
//! reads whole).
//!
//! Call order: [`Splitter::new`] → [`Splitter::feed`] with every data
//! chunk of every message, in order; [`Splitter::set_capture`] between
//! feeds.

use citadel_wire::envelope::{KIND_BYTES, WireError, peek_frame_len};
use citadel_wire::protocol::LENGTH_PREFIX_BYTES;

/// Length prefix plus kind.
const HEAD: usize = LENGTH_PREFIX_BYTES + KIND_BYTES;

/// One envelope as the splitter saw it.
#[derive(Debug, PartialEq, Eq)]
pub struct Frame<'a> {
    /// Its kind.
    pub kind: u16,
    /// Its whole body length.
    pub body_len: usize,
    /// The first `min(body_len, capture)` bytes of the body.
    pub prefix: &'a [u8],
}

/// Streaming splitter of Citadel framed envelopes.
#[derive(Debug)]
pub struct Splitter {
    head: [u8; HEAD],
    head_len: usize,
    kind: u16,
    body_len: usize,
    body_seen: usize,
    capture: usize,
    captured: Vec<u8>,
    failed: Option<WireError>,
}

impl Splitter {
    /// A splitter keeping the first `capture` body bytes of each envelope.
    pub fn new(capture: usize) -> Self {
        Splitter {
            head: [0; HEAD],
            head_len: 0,
            kind: 0,
            body_len: 0,
            body_seen: 0,
            capture,
            captured: Vec::with_capacity(capture),
            failed: None,
        }
    }

    /// Keeps the first `capture` body bytes from the next envelope on.
    pub fn set_capture(&mut self, capture: usize) {
        self.capture = capture;
        self.captured.reserve(capture);
    }

    /// Feeds stream bytes; calls `on` for every complete envelope. A framing
    /// error (a length over citadel-wire's bound or under the kind) sticks.
    pub fn feed<E: From<WireError>>(
        &mut self,
        mut input: &[u8],
        mut on: impl FnMut(Frame<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        if let Some(e) = self.failed {
            return Err(e.into());
        }
        loop {
            if self.head_len < HEAD {
                let take = (HEAD - self.head_len).min(input.len());
                self.head[self.head_len..self.head_len + take].copy_from_slice(&input[..take]);
                input = &input[take..];
                let before = self.head_len;
                self.head_len += take;
                if before < LENGTH_PREFIX_BYTES && self.head_len >= LENGTH_PREFIX_BYTES {
                    match peek_frame_len(&self.head[..LENGTH_PREFIX_BYTES]) {
                        Ok(Some(len)) => self.body_len = len - KIND_BYTES,
                        Ok(None) => {}
                        Err(e) => {
                            self.failed = Some(e);
                            return Err(e.into());
                        }
                    }
                }
                if self.head_len < HEAD {
                    return Ok(());
                }
                self.kind = u16::from_be_bytes([self.head[4], self.head[5]]);
                self.body_seen = 0;
                self.captured.clear();
            }
            let take = (self.body_len - self.body_seen).min(input.len());
            let (chunk, rest) = input.split_at(take);
            input = rest;
            let room = self.capture.saturating_sub(self.captured.len());
            self.captured
                .extend_from_slice(&chunk[..room.min(chunk.len())]);
            self.body_seen += take;
            if self.body_seen < self.body_len {
                return Ok(());
            }
            self.head_len = 0;
            on(Frame {
                kind: self.kind,
                body_len: self.body_len,
                prefix: &self.captured,
            })?;
            if input.is_empty() {
                return Ok(());
            }
        }
    }
}

/// The first `capture` bytes of each WebSocket message (Colyseus: one
/// protocol message per WebSocket message).
#[derive(Debug)]
pub struct MessagePrefix {
    capture: usize,
    captured: Vec<u8>,
}

impl MessagePrefix {
    /// Keeps the first `capture` bytes of each message.
    pub fn new(capture: usize) -> Self {
        MessagePrefix {
            capture,
            captured: Vec::with_capacity(capture),
        }
    }

    /// One data chunk; returns the message's prefix when `end`.
    pub fn chunk(&mut self, bytes: &[u8], start: bool, end: bool) -> Option<&[u8]> {
        if start {
            self.captured.clear();
        }
        let room = self.capture.saturating_sub(self.captured.len());
        self.captured
            .extend_from_slice(&bytes[..room.min(bytes.len())]);
        end.then_some(&self.captured[..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use citadel_wire::Envelope;

    fn collect(
        s: &mut Splitter,
        input: &[u8],
        split: usize,
    ) -> Result<Vec<(u16, usize, Vec<u8>)>, WireError> {
        let mut out = Vec::new();
        for piece in input.chunks(split.max(1)) {
            s.feed(piece, |f| {
                out.push((f.kind, f.body_len, f.prefix.to_vec()));
                Ok::<(), WireError>(())
            })?;
        }
        Ok(out)
    }

    #[test]
    fn envelopes_split_anywhere_come_out_whole_with_their_prefix() -> Result<(), WireError> {
        let mut stream = BytesMut::new();
        let big: Vec<u8> = (0..5_000u32).map(|i| i as u8).collect();
        for env in [
            Envelope::new(2, vec![9u8; 24]),
            Envelope::new(6, Vec::new()),
            Envelope::new(23, big.clone()),
            Envelope::new(2, vec![1u8; 3]),
        ] {
            env.encode_framed_into(&mut stream);
        }
        for split in [1, 5, 6, 7, 100, 1 << 20] {
            let mut s = Splitter::new(24);
            let got = collect(&mut s, &stream, split)?;
            assert_eq!(
                got,
                vec![
                    (2, 24, vec![9u8; 24]),
                    (6, 0, vec![]),
                    (23, 5_000, big[..24].to_vec()),
                    (2, 3, vec![1u8; 3]),
                ],
                "split {split}"
            );
            assert!(s.captured.capacity() < 64, "capture stays bounded");
        }
        Ok(())
    }

    #[test]
    fn bad_lengths_are_citadel_wire_errors_and_stick() {
        let mut s = Splitter::new(24);
        assert_eq!(
            collect(&mut s, &[0, 0, 0, 1, 0, 0], 1),
            Err(WireError::FrameTooSmall { len: 1 })
        );
        assert!(collect(&mut s, &[0, 0, 0, 2, 0, 2], 6).is_err(), "sticky");
        let mut s = Splitter::new(24);
        assert_eq!(
            collect(&mut s, &[0xff, 0xff, 0xff, 0xff], 4),
            Err(WireError::FrameTooLarge { len: u32::MAX })
        );
    }

    #[test]
    fn message_prefixes_are_cut_to_the_capture() {
        let mut m = MessagePrefix::new(4);
        assert_eq!(m.chunk(b"ab", true, false), None);
        assert_eq!(m.chunk(b"cdef", false, true), Some(&b"abcd"[..]));
        assert_eq!(m.chunk(b"", true, true), Some(&b""[..]));
    }
}
