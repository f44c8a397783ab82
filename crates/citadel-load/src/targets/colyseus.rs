//! The Colyseus target: spawn the Node peer and speak Colyseus 0.18's own
//! matchmaking + room protocol, so the same bots run against it.
//!
//! Protocol (read from `@colyseus/core` 0.18 `Protocol.mjs`, `Room.mjs`,
//! `RoomMessages.mjs` and `@colyseus/sdk` `Client.mjs`, `Room.mjs`):
//! 1. `POST /matchmake/joinOrCreate/relay` with JSON options
//!    `{"room": KEY}` → `{"name","sessionId","roomId","processId"}`
//!    (or `{"code","error"}`).
//! 2. WebSocket `ws://HOST:PORT/<processId>/<roomId>?sessionId=<sessionId>`.
//! 3. Server → `[10 JOIN_ROOM][len][reconnectionToken][len][serializerId]…`;
//!    the client acknowledges with the single byte `[10]`.
//! 4. Client → `[13 ROOM_DATA][type][msgpack payload]`; the type "p" is
//!    `a1 70` (schema string encoding = msgpack fixstr) and the payload a
//!    msgpack bin. The room rebroadcasts the Uint8Array it unpacked, which
//!    Colyseus sends as `[17 ROOM_DATA_BYTES][a1 70][raw bytes]`; `[13 …]`
//!    with a msgpack bin is accepted as well. Codes are the low 5 bits of
//!    the first byte; the TIMED modifier (bit 7) prefixes 8 bytes.
//! 5. Leave: `[12 LEAVE_ROOM]`, then the WebSocket close.
//!
//! What it is not: a general Colyseus client (no state sync, schema
//! decoding, reconnection, or RPC: `send_rpc` is an error), and Colyseus
//! has no guest handshake (the seat reservation is its authentication).
//!
//! Call order: `spawn` → `ColyseusConnector::new(url)` → `connect` (no
//! I/O) → `join_room` (matchmake + socket + JOIN ack) → relay traffic.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use serde::Deserialize;
use tokio::net::TcpStream;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;

use super::citadel::tcp_from;
use super::{ServerHandle, StartOptions, free_port, spawn_and_wait};
use crate::transport::{AuthMode, BotTransport, Connector, Inbound};

/// Server → client: the join is accepted (the client answers `[10]`).
pub const JOIN_ROOM: u8 = 10;
/// Server → client: an error.
pub const ERROR: u8 = 11;
/// Client → server: leaving the room.
pub const LEAVE_ROOM: u8 = 12;
const ROOM_DATA: u8 = 13;
const ROOM_DATA_BYTES: u8 = 17;
const CODE_MASK: u8 = 31;
const TIMED: u8 = 128;
/// Message type "p" in schema/msgpack fixstr encoding.
const TYPE_P: [u8; 2] = [0xa1, b'p'];

/// Starts `node server.js` in the peer directory.
pub fn spawn(opts: &StartOptions) -> anyhow::Result<ServerHandle> {
    let dir = &opts.colyseus_dir;
    if !dir.join("node_modules/@colyseus/core").is_dir() {
        bail!(
            "{}/node_modules is missing: run bench/peers/colyseus/install.sh first",
            dir.display()
        );
    }
    let port = free_port()?;
    let mut cmd = super::command(Path::new("node"), opts.server_cpus.as_deref());
    cmd.arg("server.js")
        .current_dir(dir)
        .env("PORT", port.to_string())
        .env("HOST", "127.0.0.1");
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    spawn_and_wait(
        cmd,
        addr,
        format!("http://127.0.0.1:{port}"),
        Duration::from_secs(30),
        Vec::new(),
    )
}

/// Creates Colyseus bots (the socket opens on `join_room`).
#[derive(Debug, Clone)]
pub struct ColyseusConnector {
    addr: SocketAddr,
}

impl ColyseusConnector {
    /// For the server at `url` (http://127.x.y.z:port).
    pub fn new(url: &str) -> anyhow::Result<Self> {
        Ok(ColyseusConnector {
            addr: super::addr_of_url(url)?,
        })
    }
}

impl Connector for ColyseusConnector {
    type Transport = ColyseusBot;

    fn connects_before_join(&self) -> bool {
        false
    }

    async fn connect(&self, source: Ipv4Addr, auth: &AuthMode) -> anyhow::Result<ColyseusBot> {
        if let AuthMode::Device { .. } = auth {
            bail!("device auth is a Citadel feature: the colyseus target connects as guests only");
        }
        Ok(ColyseusBot {
            source,
            addr: self.addr,
            ws: None,
        })
    }

    async fn connect_lean(
        &self,
        source: Ipv4Addr,
        auth: &AuthMode,
        room: &str,
        seed: u64,
    ) -> Option<anyhow::Result<crate::lean::Dialed>> {
        if let AuthMode::Device { .. } = auth {
            return Some(Err(anyhow::anyhow!(
                "device auth is a Citadel feature: the colyseus target connects as guests only"
            )));
        }
        Some(crate::lean::dial::colyseus(source, self.addr, room, LEAN_CAPTURE, seed).await)
    }
}

/// Bytes a lean bot keeps of each message: the code, a TIMED stamp, the
/// type, a msgpack bin head and the 16-byte payload header, with room.
const LEAN_CAPTURE: usize = 48;

/// One Colyseus bot.
#[derive(Debug)]
pub struct ColyseusBot {
    source: Ipv4Addr,
    addr: SocketAddr,
    ws: Option<WebSocketStream<TcpStream>>,
}

/// The seat reservation.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Reservation {
    session_id: String,
    room_id: String,
    process_id: String,
}

/// Skips a schema-encoded message type (string or number) at `at`.
fn skip_type(buf: &[u8], at: usize) -> Option<usize> {
    let b = *buf.get(at)?;
    Some(match b {
        0x00..=0x7f | 0xe0..=0xff => at + 1,         // fixint
        0xa0..=0xbf => at + 1 + (b & 0x1f) as usize, // fixstr
        0xd9 => at + 2 + *buf.get(at + 1)? as usize,
        0xcc | 0xd0 => at + 2,
        0xcd | 0xd1 => at + 3,
        0xce | 0xd2 | 0xca => at + 5,
        0xcf | 0xd3 | 0xcb => at + 9,
        _ => return None,
    })
}

/// The bytes of a msgpack bin (or str) value at `at`.
fn msgpack_bin(buf: &[u8], at: usize) -> Option<&[u8]> {
    let b = *buf.get(at)?;
    let (start, len) = match b {
        0xc4 | 0xd9 => (at + 2, *buf.get(at + 1)? as usize),
        0xc5 | 0xda => (
            at + 3,
            u16::from_be_bytes([*buf.get(at + 1)?, *buf.get(at + 2)?]) as usize,
        ),
        0xc6 | 0xdb => (
            at + 5,
            u32::from_be_bytes(buf.get(at + 1..at + 5)?.try_into().ok()?) as usize,
        ),
        0xa0..=0xbf => (at + 1, (b & 0x1f) as usize),
        _ => return None,
    };
    buf.get(start..start.checked_add(len)?)
}

/// Matchmakes a seat in the relay room keyed `room` and returns the
/// WebSocket path that claims it (`/<processId>/<roomId>?sessionId=…`).
pub async fn reserve_seat(
    source: Ipv4Addr,
    addr: SocketAddr,
    room: &str,
) -> anyhow::Result<String> {
    let body = serde_json::json!({ "room": room }).to_string();
    let (status, reply) =
        super::http::post_json(source, addr, "/matchmake/joinOrCreate/relay", &body).await?;
    if status != 200 {
        bail!(
            "matchmake refused with HTTP {status}: {}",
            String::from_utf8_lossy(&reply)
                .chars()
                .take(200)
                .collect::<String>()
        );
    }
    let seat: Reservation =
        serde_json::from_slice(&reply).context("matchmake reply is not a seat reservation")?;
    Ok(format!(
        "/{}/{}?sessionId={}",
        seat.process_id, seat.room_id, seat.session_id
    ))
}

/// The relay payload of a server message (ROOM_DATA_BYTES, or ROOM_DATA
/// with a msgpack bin), borrowed from `buf`.
pub fn relay_payload(buf: &[u8]) -> Option<&[u8]> {
    let first = *buf.first()?;
    let at = if first & TIMED != 0 { 9 } else { 1 };
    match first & CODE_MASK {
        ROOM_DATA_BYTES => skip_type(buf, at).and_then(|p| buf.get(p..)),
        ROOM_DATA => skip_type(buf, at).and_then(|p| msgpack_bin(buf, p)),
        _ => None,
    }
}

/// Decodes one server message into an inbound item.
pub fn decode_message(buf: &[u8]) -> Inbound {
    match relay_payload(buf) {
        Some(payload) => Inbound::Relay(Bytes::copy_from_slice(payload)),
        None => Inbound::Other,
    }
}

/// Writes the head of a relay message, `[13][a1 'p'][msgpack bin header]`,
/// for a payload of `len` bytes into `out`; returns its length.
pub fn relay_head(len: usize, out: &mut [u8; 8]) -> usize {
    out[0] = ROOM_DATA;
    out[1..3].copy_from_slice(&TYPE_P);
    if len < 256 {
        out[3] = 0xc4;
        out[4] = len as u8;
        5
    } else if let Ok(l) = u16::try_from(len) {
        out[3] = 0xc5;
        out[4..6].copy_from_slice(&l.to_be_bytes());
        6
    } else {
        out[3] = 0xc6;
        out[4..8].copy_from_slice(&(len as u32).to_be_bytes());
        8
    }
}

/// `[13][a1 'p'][msgpack bin payload]`.
pub fn encode_relay(payload: &[u8]) -> Vec<u8> {
    let mut head = [0u8; 8];
    let n = relay_head(payload.len(), &mut head);
    let mut out = Vec::with_capacity(n + payload.len());
    out.extend_from_slice(&head[..n]);
    out.extend_from_slice(payload);
    out
}

impl ColyseusBot {
    fn socket(&mut self) -> anyhow::Result<&mut WebSocketStream<TcpStream>> {
        self.ws
            .as_mut()
            .context("colyseus bot has not joined a room")
    }
}

impl BotTransport for ColyseusBot {
    async fn join_room(&mut self, room: &str) -> anyhow::Result<()> {
        let url = format!(
            "ws://{}{}",
            self.addr,
            reserve_seat(self.source, self.addr, room).await?
        );
        let stream = tcp_from(self.source, self.addr).await?;
        let (mut ws, _) = tokio_tungstenite::client_async(url, stream)
            .await
            .context("colyseus websocket upgrade")?;
        for _ in 0..64 {
            match ws.next().await {
                Some(Ok(Message::Binary(b))) if b.first() == Some(&JOIN_ROOM) => {
                    ws.send(Message::Binary(Bytes::from_static(&[JOIN_ROOM])))
                        .await
                        .context("colyseus join ack")?;
                    self.ws = Some(ws);
                    return Ok(());
                }
                Some(Ok(Message::Binary(b))) if b.first() == Some(&ERROR) => {
                    bail!("colyseus refused the join ({} bytes of error)", b.len())
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => bail!("colyseus socket: {e}"),
                None => bail!("colyseus closed before JOIN_ROOM"),
            }
        }
        bail!("no JOIN_ROOM within 64 messages")
    }

    async fn send_relay(&mut self, payload: &[u8]) -> anyhow::Result<()> {
        let msg = Message::Binary(Bytes::from(encode_relay(payload)));
        self.socket()?.send(msg).await.context("colyseus send")
    }

    async fn send_rpc(&mut self, _id: u64, _method: &str, _payload: &[u8]) -> anyhow::Result<()> {
        bail!("the colyseus target has no RPC equivalent (rpc-echo runs against citadel and raw)")
    }

    async fn recv(&mut self) -> anyhow::Result<Option<Inbound>> {
        let ws = self.socket()?;
        loop {
            match ws.next().await {
                Some(Ok(Message::Binary(b))) => return Ok(Some(decode_message(&b))),
                Some(Ok(Message::Close(_))) | None => return Ok(None),
                Some(Ok(_)) => {}
                Some(Err(e)) => bail!("colyseus receive: {e}"),
            }
        }
    }

    async fn close(mut self) {
        if let Some(mut ws) = self.ws.take() {
            let _ = tokio::time::timeout(Duration::from_secs(2), async {
                let _ = ws
                    .send(Message::Binary(Bytes::from_static(&[LEAVE_ROOM])))
                    .await;
                let _ = ws.close(None).await;
                while let Some(Ok(_)) = ws.next().await {}
            })
            .await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relay_frames_round_trip() {
        let payload = [7u8; 16];
        let sent = encode_relay(&payload);
        assert_eq!(&sent[..5], &[13, 0xa1, b'p', 0xc4, 16]);
        assert_eq!(
            decode_message(&sent),
            Inbound::Relay(Bytes::copy_from_slice(&payload))
        );
        let mut bytes_msg = vec![ROOM_DATA_BYTES, 0xa1, b'p'];
        bytes_msg.extend_from_slice(&payload);
        assert_eq!(
            decode_message(&bytes_msg),
            Inbound::Relay(Bytes::copy_from_slice(&payload))
        );
        let big = encode_relay(&[1u8; 300]);
        assert_eq!(
            decode_message(&big),
            Inbound::Relay(Bytes::from(vec![1u8; 300]))
        );
    }

    #[test]
    fn garbage_is_other_never_a_panic() {
        for bad in [
            &[][..],
            &[13],
            &[13, 0xa5, b'p'],
            &[17, 0xc1],
            &[13, 0xa1, b'p', 0xc4, 9, 1],
            &[0xff; 3],
        ] {
            assert_eq!(decode_message(bad), Inbound::Other, "{bad:?}");
        }
    }
}
