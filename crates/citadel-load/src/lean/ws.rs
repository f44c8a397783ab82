//! The client side of RFC 6455, sans IO: the upgrade request and the check
//! of its answer, masked client frames, and a streaming reader of server
//! frames that never buffers a payload.
//!
//! What it is: [`upgrade_request`] / [`check_upgrade`] (status 101 and the
//! `Sec-WebSocket-Accept` digest), [`encode_frame`] (one masked frame,
//! appended to a reused buffer), and [`FrameReader`], which takes bytes in
//! any split and hands out data chunks with their message boundaries, plus
//! whole control frames (at most 125 bytes, held in a fixed array). Memory
//! is bounded whatever the input: a payload is passed through as it
//! arrives, never collected, and a message longer than the reader's limit
//! is an error. What it is not: a server, an extension (compression)
//! negotiator, or a TLS client; it never reads a clock or a socket.
//!
//! Call order: send [`upgrade_request`], read until [`head_end`], then
//! [`check_upgrade`]; afterwards [`encode_frame`] for every send and
//! [`FrameReader::feed`] for every read (the bytes after the response head
//! first).

use std::fmt::Write as _;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;

/// Continuation frame.
pub const OP_CONTINUATION: u8 = 0;
/// Text frame.
pub const OP_TEXT: u8 = 1;
/// Binary frame.
pub const OP_BINARY: u8 = 2;
/// Close frame.
pub const OP_CLOSE: u8 = 8;
/// Ping frame.
pub const OP_PING: u8 = 9;
/// Pong frame.
pub const OP_PONG: u8 = 10;

/// Longest control-frame payload (RFC 6455 §5.5).
pub const MAX_CONTROL_PAYLOAD: usize = 125;

/// Longest upgrade response head accepted.
pub const MAX_HEAD_BYTES: usize = 8 * 1024;

/// The GUID of RFC 6455 §1.3.
const ACCEPT_GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// What a server sent that this client refuses. Any of them ends the
/// connection (the stream cannot be resynchronised).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WsError {
    /// A server frame carried a mask (§5.1: the client must fail).
    #[error("server frame is masked")]
    MaskedFrame,
    /// A reserved bit was set without a negotiated extension.
    #[error("reserved bits set")]
    ReservedBits,
    /// An opcode RFC 6455 does not define.
    #[error("unknown opcode {0}")]
    UnknownOpcode(u8),
    /// A control frame over 125 bytes or fragmented.
    #[error("malformed control frame")]
    BadControlFrame,
    /// A continuation outside a message, or a new message inside one.
    #[error("fragmentation out of order")]
    BadFragmentation,
    /// A text message (Citadel and the peers speak binary only).
    #[error("text message")]
    TextMessage,
    /// A 64-bit length with its top bit set, or a message over the limit.
    #[error("message longer than {0} bytes")]
    TooLong(u64),
}

/// `Sec-WebSocket-Key` from 16 bytes of nonce.
pub fn key_from_nonce(nonce: [u8; 16]) -> String {
    BASE64.encode(nonce)
}

/// The `Sec-WebSocket-Accept` value a server must answer `key` with.
pub fn accept_for(key: &str) -> String {
    let mut input = String::with_capacity(key.len() + ACCEPT_GUID.len());
    input.push_str(key);
    input.push_str(ACCEPT_GUID);
    let digest = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, input.as_bytes());
    BASE64.encode(digest.as_ref())
}

/// The HTTP/1.1 upgrade request for `path` on `host`.
pub fn upgrade_request(host: &str, path: &str, key: &str) -> String {
    let mut out = String::with_capacity(160 + path.len());
    let _ = write!(
        out,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
    );
    out
}

/// Where the response head ends (the index after `\r\n\r\n`), if it did.
pub fn head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

/// Checks a response head (through the blank line): status 101 and the
/// accept digest of `key`. Errors quote the status line only.
pub fn check_upgrade(head: &[u8], key: &str) -> anyhow::Result<()> {
    let text = std::str::from_utf8(head)
        .map_err(|_| anyhow::anyhow!("upgrade response head is not UTF-8"))?;
    let mut lines = text.split("\r\n");
    let status = lines.next().unwrap_or_default();
    let code = status.split_whitespace().nth(1).unwrap_or_default();
    if code != "101" {
        let shown: String = status.chars().take(80).collect();
        anyhow::bail!("websocket upgrade refused: {shown:?}");
    }
    let want = accept_for(key);
    let accepted = lines.any(|line| {
        line.split_once(':').is_some_and(|(name, value)| {
            name.trim().eq_ignore_ascii_case("sec-websocket-accept") && value.trim() == want
        })
    });
    if !accepted {
        anyhow::bail!("websocket upgrade answered without the right Sec-WebSocket-Accept");
    }
    Ok(())
}

/// Appends one final, masked client frame of `opcode` whose payload is the
/// concatenation of `parts` (so a header and a body need no joining first).
pub fn encode_frame(out: &mut Vec<u8>, opcode: u8, mask: [u8; 4], parts: &[&[u8]]) {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    out.reserve(14 + len);
    out.push(0x80 | (opcode & 0x0f));
    if len < 126 {
        out.push(0x80 | len as u8);
    } else if let Ok(short) = u16::try_from(len) {
        out.push(0x80 | 126);
        out.extend_from_slice(&short.to_be_bytes());
    } else {
        out.push(0x80 | 127);
        out.extend_from_slice(&(len as u64).to_be_bytes());
    }
    out.extend_from_slice(&mask);
    let mut i = 0usize;
    for part in parts {
        for &b in *part {
            out.push(b ^ mask[i & 3]);
            i += 1;
        }
    }
}

/// One thing the server sent.
#[derive(Debug, PartialEq, Eq)]
pub enum Event<'a> {
    /// Payload bytes of a binary message, in order. `start`: the first
    /// chunk of a message; `end`: its last (both may hold for one chunk;
    /// an empty message is one empty chunk with both set).
    Data {
        /// The bytes (borrowed from the input).
        bytes: &'a [u8],
        /// First chunk of the message.
        start: bool,
        /// Last chunk of the message.
        end: bool,
    },
    /// A ping with its payload (answer with a pong carrying it).
    Ping(&'a [u8]),
    /// A pong.
    Pong,
    /// A close frame, with its status code if it carried one.
    Close(Option<u16>),
}

/// Streaming reader of server frames; see the module documentation.
#[derive(Debug)]
pub struct FrameReader {
    head: [u8; 10],
    head_len: usize,
    /// Payload bytes of the current frame not yet seen (valid once the
    /// head is complete, i.e. `head_len == 0` and `in_frame`).
    remaining: u64,
    in_frame: bool,
    opcode: u8,
    fin: bool,
    /// Inside a fragmented data message.
    in_message: bool,
    /// The next data chunk starts a message.
    at_message_start: bool,
    message_len: u64,
    max_message: u64,
    control: [u8; MAX_CONTROL_PAYLOAD],
    control_len: usize,
    failed: Option<WsError>,
}

impl FrameReader {
    /// A reader refusing messages over `max_message` bytes.
    pub fn new(max_message: u64) -> Self {
        FrameReader {
            head: [0; 10],
            head_len: 0,
            remaining: 0,
            in_frame: false,
            opcode: 0,
            fin: false,
            in_message: false,
            at_message_start: true,
            message_len: 0,
            max_message,
            control: [0; MAX_CONTROL_PAYLOAD],
            control_len: 0,
            failed: None,
        }
    }

    /// Feeds bytes as they arrived; calls `on` for every event, in order.
    /// The first error (the reader's, or one `on` returns) stops the feed;
    /// a reader error repeats on every later call.
    pub fn feed<E: From<WsError>>(
        &mut self,
        mut input: &[u8],
        mut on: impl FnMut(Event<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        if let Some(e) = self.failed {
            return Err(e.into());
        }
        while !input.is_empty() || (self.in_frame && self.remaining == 0) {
            if !self.in_frame {
                match self.take_head(&mut input) {
                    Ok(true) => {}
                    Ok(false) => return Ok(()),
                    Err(e) => {
                        self.failed = Some(e);
                        return Err(e.into());
                    }
                }
            }
            let take = usize::try_from(self.remaining)
                .unwrap_or(usize::MAX)
                .min(input.len());
            let (chunk, rest) = input.split_at(take);
            input = rest;
            self.remaining -= take as u64;
            let done = self.remaining == 0;
            if self.opcode >= OP_CLOSE {
                let at = self.control_len;
                self.control[at..at + chunk.len()].copy_from_slice(chunk);
                self.control_len += chunk.len();
                if done {
                    self.in_frame = false;
                    let payload = &self.control[..self.control_len];
                    let event = match self.opcode {
                        OP_PING => Event::Ping(payload),
                        OP_PONG => Event::Pong,
                        _ => Event::Close(
                            payload
                                .first_chunk::<2>()
                                .map(|code| u16::from_be_bytes(*code)),
                        ),
                    };
                    on(event)?;
                }
            } else {
                if !chunk.is_empty() || done {
                    let start = self.at_message_start;
                    self.at_message_start = false;
                    on(Event::Data {
                        bytes: chunk,
                        start,
                        end: done && self.fin,
                    })?;
                }
                if done {
                    self.in_frame = false;
                    if self.fin {
                        self.at_message_start = true;
                        self.message_len = 0;
                    }
                }
            }
        }
        Ok(())
    }

    /// Collects and validates a frame head from `input`; true once the
    /// frame's payload may be read.
    fn take_head(&mut self, input: &mut &[u8]) -> Result<bool, WsError> {
        let need = |head: &[u8], have: usize| -> usize {
            if have < 2 {
                return 2;
            }
            match head[1] & 0x7f {
                126 => 4,
                127 => 10,
                _ => 2,
            }
        };
        loop {
            let want = need(&self.head, self.head_len);
            if self.head_len >= want {
                break;
            }
            let Some((&b, rest)) = input.split_first() else {
                return Ok(false);
            };
            *input = rest;
            self.head[self.head_len] = b;
            self.head_len += 1;
            if self.head_len == 2 {
                self.check_first_two()?;
            }
        }
        let len = match self.head[1] & 0x7f {
            126 => u64::from(u16::from_be_bytes([self.head[2], self.head[3]])),
            127 => {
                let mut b = [0u8; 8];
                b.copy_from_slice(&self.head[2..10]);
                let len = u64::from_be_bytes(b);
                if len >> 63 != 0 {
                    return Err(WsError::TooLong(self.max_message));
                }
                len
            }
            short => u64::from(short),
        };
        self.head_len = 0;
        if self.opcode < OP_CLOSE {
            self.message_len = self.message_len.saturating_add(len);
            if self.message_len > self.max_message {
                return Err(WsError::TooLong(self.max_message));
            }
        } else {
            self.control_len = 0;
        }
        self.remaining = len;
        self.in_frame = true;
        Ok(true)
    }

    fn check_first_two(&mut self) -> Result<(), WsError> {
        let (b0, b1) = (self.head[0], self.head[1]);
        if b0 & 0x70 != 0 {
            return Err(WsError::ReservedBits);
        }
        if b1 & 0x80 != 0 {
            return Err(WsError::MaskedFrame);
        }
        let opcode = b0 & 0x0f;
        let fin = b0 & 0x80 != 0;
        match opcode {
            OP_CLOSE | OP_PING | OP_PONG => {
                if !fin || usize::from(b1 & 0x7f) > MAX_CONTROL_PAYLOAD {
                    return Err(WsError::BadControlFrame);
                }
            }
            OP_TEXT => return Err(WsError::TextMessage),
            OP_BINARY => {
                if self.in_message {
                    return Err(WsError::BadFragmentation);
                }
                self.in_message = !fin;
            }
            OP_CONTINUATION => {
                if !self.in_message {
                    return Err(WsError::BadFragmentation);
                }
                self.in_message = !fin;
            }
            other => return Err(WsError::UnknownOpcode(other)),
        }
        self.opcode = opcode;
        if opcode < OP_CLOSE {
            self.fin = fin;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server frame (unmasked) for the tests.
    fn server_frame(first: u8, payload: &[u8]) -> Vec<u8> {
        let mut out = vec![first];
        let len = payload.len();
        if len < 126 {
            out.push(len as u8);
        } else if len <= 0xffff {
            out.push(126);
            out.extend_from_slice(&(len as u16).to_be_bytes());
        } else {
            out.push(127);
            out.extend_from_slice(&(len as u64).to_be_bytes());
        }
        out.extend_from_slice(payload);
        out
    }

    #[derive(Debug, PartialEq)]
    enum Got {
        Data(Vec<u8>, bool, bool),
        Ping(Vec<u8>),
        Pong,
        Close(Option<u16>),
    }

    fn run(reader: &mut FrameReader, input: &[u8], split: usize) -> Result<Vec<Got>, WsError> {
        let mut got = Vec::new();
        for piece in input.chunks(split.max(1)) {
            reader.feed(piece, |ev| {
                got.push(match ev {
                    Event::Data { bytes, start, end } => Got::Data(bytes.to_vec(), start, end),
                    Event::Ping(p) => Got::Ping(p.to_vec()),
                    Event::Pong => Got::Pong,
                    Event::Close(code) => Got::Close(code),
                });
                Ok::<(), WsError>(())
            })?;
        }
        Ok(got)
    }

    /// Joins the data chunks back into messages.
    fn messages(got: &[Got]) -> Vec<Vec<u8>> {
        let mut out: Vec<Vec<u8>> = Vec::new();
        for g in got {
            if let Got::Data(bytes, start, _) = g {
                if *start {
                    out.push(Vec::new());
                }
                if let Some(last) = out.last_mut() {
                    last.extend_from_slice(bytes);
                }
            }
        }
        out
    }

    #[test]
    fn accept_digest_matches_the_rfc_example() {
        // RFC 6455 §1.3
        assert_eq!(
            accept_for("dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
    }

    #[test]
    fn upgrade_check_needs_101_and_the_digest() {
        let key = "dGhlIHNhbXBsZSBub25jZQ==";
        let good = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\
                     sec-websocket-accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n";
        assert!(check_upgrade(good, key).is_ok());
        assert_eq!(head_end(good), Some(good.len()));
        let wrong = b"HTTP/1.1 101 OK\r\nSec-WebSocket-Accept: AAAA\r\n\r\n";
        assert!(check_upgrade(wrong, key).is_err());
        let refused = b"HTTP/1.1 403 Forbidden\r\n\r\n";
        assert!(check_upgrade(refused, key).is_err());
        assert!(check_upgrade(&[0xff, 0xfe], key).is_err());
    }

    #[test]
    fn client_frames_are_masked_and_unmask_to_the_payload() {
        for len in [0usize, 1, 125, 126, 300, 70_000] {
            let body: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let mut out = Vec::new();
            let mask = [0x11, 0x22, 0x33, 0x44];
            encode_frame(
                &mut out,
                OP_BINARY,
                mask,
                &[&body[..len / 2], &body[len / 2..]],
            );
            assert_eq!(out[0], 0x82);
            assert!(out[1] & 0x80 != 0, "mask bit");
            let (plen, at) = match out[1] & 0x7f {
                126 => (usize::from(u16::from_be_bytes([out[2], out[3]])), 4),
                127 => (
                    u64::from_be_bytes(out[2..10].try_into().unwrap_or_default()) as usize,
                    10,
                ),
                n => (usize::from(n), 2),
            };
            assert_eq!(plen, len);
            assert_eq!(&out[at..at + 4], &mask);
            let unmasked: Vec<u8> = out[at + 4..]
                .iter()
                .enumerate()
                .map(|(i, b)| b ^ mask[i % 4])
                .collect();
            assert_eq!(unmasked, body);
        }
    }

    #[test]
    fn any_split_yields_the_same_messages_and_controls() -> Result<(), WsError> {
        let mut stream = server_frame(0x82, b"hello");
        stream.extend(server_frame(0x02, b"frag")); // binary, not final
        stream.extend(server_frame(0x89, b"pp")); // ping inside the message
        stream.extend(server_frame(0x00, b"men")); // continuation, not final
        stream.extend(server_frame(0x80, b"ted")); // final continuation
        stream.extend(server_frame(0x82, b"")); // empty message
        stream.extend(server_frame(0x82, &[7u8; 70_000])); // 64-bit length
        stream.extend(server_frame(0x8a, b""));
        stream.extend(server_frame(0x88, &[0x03, 0xe8]));
        let expect = vec![
            b"hello".to_vec(),
            b"fragmented".to_vec(),
            Vec::new(),
            vec![7u8; 70_000],
        ];
        for split in [1, 2, 3, 7, 64, 4096, usize::MAX] {
            let mut reader = FrameReader::new(1 << 20);
            let got = run(&mut reader, &stream, split)?;
            assert_eq!(messages(&got), expect, "split {split}");
            assert!(got.contains(&Got::Ping(b"pp".to_vec())));
            assert!(got.contains(&Got::Pong));
            assert_eq!(got.last(), Some(&Got::Close(Some(1000))));
        }
        Ok(())
    }

    #[test]
    fn protocol_violations_are_errors_that_stick() {
        let cases: Vec<(Vec<u8>, WsError)> = vec![
            (vec![0x82, 0x81, 1, 2, 3, 4, 0], WsError::MaskedFrame),
            (vec![0xc2, 0x00], WsError::ReservedBits),
            (vec![0x83, 0x00], WsError::UnknownOpcode(3)),
            (vec![0x81, 0x00], WsError::TextMessage),
            (vec![0x09, 0x00], WsError::BadControlFrame), // fragmented ping
            (vec![0x89, 126, 0, 200], WsError::BadControlFrame),
            (vec![0x80, 0x00], WsError::BadFragmentation),
            (vec![0x02, 0x00, 0x82, 0x00], WsError::BadFragmentation),
            (
                vec![0x82, 127, 0x80, 0, 0, 0, 0, 0, 0, 1],
                WsError::TooLong(1 << 16),
            ),
            (
                vec![0x82, 127, 0, 0, 0, 0, 0, 1, 0, 1],
                WsError::TooLong(1 << 16),
            ),
        ];
        for (input, want) in cases {
            let mut reader = FrameReader::new(1 << 16);
            assert_eq!(run(&mut reader, &input, 1), Err(want), "{input:?}");
            assert_eq!(run(&mut reader, &[0x82, 0x00], 1), Err(want), "sticky");
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        // a cheap deterministic generator: no byte sequence may panic
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..2_000 {
            let len = (x % 64) as usize;
            let input: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            let mut reader = FrameReader::new(1 << 12);
            let _ = run(&mut reader, &input, 3);
        }
    }
}
