//! Lean relay bots: one WebSocket per bot, spoken directly over a TCP
//! socket, with no per-message allocation, for the relay-fanout scenario.
//!
//! What it is: the RFC 6455 client codec ([`ws`]), the in-place splitters
//! of Citadel envelopes and Colyseus messages ([`frames`]), the shared
//! socket a reader task and the send wheel both use ([`socket`]), and the
//! dialers that open, upgrade, authenticate and join a room with the same
//! wire formats as `citadel-client` and the Colyseus connector ([`dial`]).
//! [`Reader`] joins a WebSocket reader and the dialect's splitter. A bot
//! reads into one 4 KiB buffer it allocated once, parses in place, and
//! hands out only what a relay bot measures (kind and body prefix);
//! sending is a masked frame written with one non-blocking `write`.
//! What it is not: a client SDK (see `citadel-client`), or a general
//! WebSocket client (no TLS, no extensions).
//!
//! Call order: `dial::citadel` / `dial::colyseus` → [`Dialed`] → the
//! fan-out engine (`bots::fanout::lean`) feeds reads to [`Reader::feed`]
//! and writes through [`socket::LeanSocket::write`].

pub mod dial;
pub mod frames;
pub mod socket;
pub mod ws;

use std::sync::Arc;

use citadel_wire::envelope::WireError;

use self::frames::{MessagePrefix, Splitter};
use self::socket::LeanSocket;
use self::ws::{Event, FrameReader, WsError};

/// Largest WebSocket message a lean bot accepts (Citadel's own frame bound
/// plus room for coalescing); bytes are streamed, never held.
pub const MAX_MESSAGE_BYTES: u64 = 64 * 1024 * 1024;

/// Body bytes a relay bot keeps per envelope: the 8-byte sender id of
/// PEER_POSITION plus the 16-byte payload header.
pub const RELAY_CAPTURE: usize = 8 + 16;

/// Why a lean connection ended badly.
#[derive(Debug, thiserror::Error)]
pub enum LeanError {
    /// The server broke RFC 6455 (or sent text).
    #[error("websocket: {0}")]
    Ws(#[from] WsError),
    /// The server broke Citadel framing.
    #[error("citadel framing: {0}")]
    Wire(#[from] WireError),
    /// The socket failed.
    #[error("socket: {0}")]
    Io(#[from] std::io::Error),
}

/// Which protocol runs inside the WebSocket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// Citadel framing (Citadel and the raw relay).
    Citadel,
    /// Colyseus 0.18 room protocol.
    Colyseus,
}

/// What a lean reader hands out.
#[derive(Debug, PartialEq, Eq)]
pub enum Item<'a> {
    /// A Citadel envelope: kind and the first captured body bytes.
    Envelope {
        /// Kind.
        kind: u16,
        /// The captured prefix of its body.
        prefix: &'a [u8],
    },
    /// A Colyseus message: its captured prefix.
    Message(&'a [u8]),
    /// A ping payload to answer with a pong.
    Ping(&'a [u8]),
    /// The server's close frame.
    Close(Option<u16>),
}

enum Split {
    Citadel(Splitter),
    Colyseus(MessagePrefix),
}

/// A WebSocket reader plus the dialect's splitter.
pub struct Reader {
    ws: FrameReader,
    split: Split,
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader").finish_non_exhaustive()
    }
}

impl Reader {
    /// A reader for `dialect` keeping `capture` bytes per envelope/message.
    pub fn new(dialect: Dialect, capture: usize) -> Self {
        Reader {
            ws: FrameReader::new(MAX_MESSAGE_BYTES),
            split: match dialect {
                Dialect::Citadel => Split::Citadel(Splitter::new(capture)),
                Dialect::Colyseus => Split::Colyseus(MessagePrefix::new(capture)),
            },
        }
    }

    /// Keeps `capture` bytes per item from now on (Citadel; Colyseus keeps
    /// its first setting).
    pub fn set_capture(&mut self, capture: usize) {
        if let Split::Citadel(s) = &mut self.split {
            s.set_capture(capture);
        }
    }

    /// Feeds bytes read from the socket; `on` sees every item in order.
    pub fn feed(
        &mut self,
        input: &[u8],
        mut on: impl FnMut(Item<'_>) -> Result<(), LeanError>,
    ) -> Result<(), LeanError> {
        let Reader { ws, split } = self;
        ws.feed(input, |event| match event {
            Event::Data { bytes, start, end } => match split {
                Split::Citadel(s) => s.feed(bytes, |f| {
                    on(Item::Envelope {
                        kind: f.kind,
                        prefix: f.prefix,
                    })
                }),
                Split::Colyseus(m) => match m.chunk(bytes, start, end) {
                    Some(prefix) => on(Item::Message(prefix)),
                    None => Ok(()),
                },
            },
            Event::Ping(payload) => on(Item::Ping(payload)),
            Event::Pong => Ok(()),
            Event::Close(code) => on(Item::Close(code)),
        })
    }
}

/// A connected, authenticated bot in its room.
#[derive(Debug)]
pub struct Dialed {
    /// The socket (shared by the reader task and the send wheel).
    pub socket: Arc<LeanSocket>,
    /// The reader state, mid-stream (bytes after the join may follow).
    pub reader: Reader,
    /// Its protocol.
    pub dialect: Dialect,
}
