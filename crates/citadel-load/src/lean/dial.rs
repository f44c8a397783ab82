//! Opening a lean bot: TCP from a chosen source address, the WebSocket
//! upgrade, then the target's own join, with the wire formats the other
//! connectors use.
//!
//! What it is: [`citadel`] (KIND_AUTH with an empty body for a guest or the
//! access token, wait for KIND_AUTH_RESULT; ROOM_CREATE with the room key,
//! wait for ROOM_JOINED, answer ROOM_MAP_READY: the same envelopes
//! `citadel-client` sends, built with citadel-wire) and [`colyseus`] (seat
//! reservation over HTTP, the upgrade to the seat's path, JOIN_ROOM and its
//! one-byte acknowledgement). What it is not: bounded in time by itself
//! (callers wrap it in `bots::CONNECT_TIMEOUT`); errors never carry tokens.
//!
//! Call order: `citadel(..)` / `colyseus(..)` → [`Dialed`], then the
//! fan-out engine owns it.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use anyhow::{Context, bail};
use citadel_wire::protocol::{
    AuthResult, KIND_AUTH, KIND_AUTH_RESULT, KIND_ROOM_JOINED, MAX_FRAME_BODY_BYTES,
};
use citadel_wire::room::{RoomCreate, RoomJoined, RoomMapReady};
use citadel_wire::{Envelope, WireBody};

use super::socket::LeanSocket;
use super::ws::{self, OP_BINARY, OP_PONG};
use super::{Dialect, Dialed, Item, RELAY_CAPTURE, Reader};
#[cfg(test)]
use super::{LeanError, ws::WsError};
use crate::targets::colyseus::{ERROR, JOIN_ROOM, reserve_seat};

/// Read buffer of the handshake (and, as the same size, of the bots).
pub const READ_BUFFER_BYTES: usize = 4 * 1024;

/// Body bytes kept per envelope during the handshake (its replies are
/// read whole; anything longer is refused).
const HANDSHAKE_CAPTURE: usize = 64 * 1024;

/// Opens a Citadel-framed bot (Citadel or the raw relay) at `addr`,
/// authenticated with `token` (None: guest) and in room `room`.
pub async fn citadel(
    source: Ipv4Addr,
    addr: SocketAddr,
    token: Option<&str>,
    room: &str,
    seed: u64,
) -> anyhow::Result<Dialed> {
    let socket = LeanSocket::connect(source, addr, seed).await?;
    let mut buf = vec![0u8; READ_BUFFER_BYTES];
    let mut reader = Reader::new(Dialect::Citadel, HANDSHAKE_CAPTURE);
    let early = upgrade(&socket, &addr.to_string(), "/", seed, &mut buf).await?;
    let mut scratch = Vec::new();
    let auth = Envelope::new(KIND_AUTH, token.unwrap_or_default().as_bytes().to_vec());
    send_envelope(&socket, &mut scratch, &auth)?;
    let mut wait = Wait {
        socket: &socket,
        reader: &mut reader,
        buf: &mut buf,
        scratch: &mut scratch,
        early,
    };
    let envelope_of = |want: u16| move |item: &Item<'_>| matches!(item, Item::Envelope { kind, .. } if *kind == want);
    let body = wait.until(envelope_of(KIND_AUTH_RESULT)).await?;
    let result = AuthResult::decode(&body).context("kind-6 auth result")?;
    if !result.is_accepted() {
        bail!(
            "handshake refused (reason class {:?})",
            result.reason_class()
        );
    }
    let create = RoomCreate {
        params: room.as_bytes().to_vec(),
    };
    send_envelope(&socket, wait.scratch, &create.to_envelope())?;
    let body = wait.until(envelope_of(KIND_ROOM_JOINED)).await?;
    let joined = RoomJoined::decode(&body).context("kind-23 room joined")?;
    let ready = RoomMapReady {
        room_id: joined.room_id,
    };
    send_envelope(&socket, wait.scratch, &ready.to_envelope())?;
    reader.set_capture(RELAY_CAPTURE);
    Ok(Dialed {
        socket: Arc::new(socket),
        reader,
        dialect: Dialect::Citadel,
    })
}

/// Opens a Colyseus bot in the relay room keyed `room`, keeping `capture`
/// bytes of each message.
pub async fn colyseus(
    source: Ipv4Addr,
    addr: SocketAddr,
    room: &str,
    capture: usize,
    seed: u64,
) -> anyhow::Result<Dialed> {
    let path = reserve_seat(source, addr, room).await?;
    let socket = LeanSocket::connect(source, addr, seed).await?;
    let mut buf = vec![0u8; READ_BUFFER_BYTES];
    let mut reader = Reader::new(Dialect::Colyseus, capture.max(1));
    // Colyseus speaks first: JOIN_ROOM may share a segment with the 101.
    let early = upgrade(&socket, &addr.to_string(), &path, seed, &mut buf).await?;
    let mut scratch = Vec::new();
    let first = Wait {
        socket: &socket,
        reader: &mut reader,
        buf: &mut buf,
        scratch: &mut scratch,
        early,
    }
    .until(|item| matches!(item, Item::Message([b, ..]) if *b == JOIN_ROOM || *b == ERROR))
    .await?;
    if first.first() == Some(&ERROR) {
        bail!("colyseus refused the join");
    }
    socket.send(&mut scratch, OP_BINARY, &[&[JOIN_ROOM]])?;
    Ok(Dialed {
        socket: Arc::new(socket),
        reader,
        dialect: Dialect::Colyseus,
    })
}

fn send_envelope(
    socket: &LeanSocket,
    scratch: &mut Vec<u8>,
    envelope: &Envelope,
) -> anyhow::Result<()> {
    if envelope.body.len() + 2 > MAX_FRAME_BODY_BYTES {
        bail!(
            "envelope of {} bytes is over the frame limit",
            envelope.body.len()
        );
    }
    let framed = envelope.encode_framed();
    socket
        .send(scratch, OP_BINARY, &[&framed])
        .context("websocket send")
}

/// The upgrade: request, response head (bounded), the digest check.
/// Returns the bytes that followed the head (the server may speak first).
async fn upgrade(
    socket: &LeanSocket,
    host: &str,
    path: &str,
    seed: u64,
    buf: &mut [u8],
) -> anyhow::Result<Vec<u8>> {
    let mut nonce = [0u8; 16];
    nonce[..8].copy_from_slice(&seed.to_le_bytes());
    nonce[8..].copy_from_slice(
        &seed
            .rotate_left(29)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .to_le_bytes(),
    );
    let key = ws::key_from_nonce(nonce);
    socket
        .write_all(ws::upgrade_request(host, path, &key).as_bytes())
        .await
        .context("upgrade request")?;
    let mut head = Vec::with_capacity(256);
    let end = loop {
        let n = socket.read(buf).await.context("upgrade response")?;
        if n == 0 {
            bail!("closed during the websocket upgrade");
        }
        head.extend_from_slice(&buf[..n]);
        if let Some(end) = ws::head_end(&head) {
            break end;
        }
        if head.len() > ws::MAX_HEAD_BYTES {
            bail!("upgrade response head over {} bytes", ws::MAX_HEAD_BYTES);
        }
    };
    ws::check_upgrade(&head[..end], &key)?;
    Ok(head.split_off(end))
}

/// The handshake's reads: bytes already received first, then the socket.
struct Wait<'a> {
    socket: &'a LeanSocket,
    reader: &'a mut Reader,
    buf: &'a mut [u8],
    scratch: &'a mut Vec<u8>,
    early: Vec<u8>,
}

impl Wait<'_> {
    /// Reads until an item satisfies `wanted`; returns its captured bytes.
    /// Pings are answered; a close or the end of the stream is an error.
    async fn until(&mut self, wanted: impl Fn(&Item<'_>) -> bool) -> anyhow::Result<Vec<u8>> {
        loop {
            let early = std::mem::take(&mut self.early);
            let input: &[u8] = if early.is_empty() {
                let n = self.socket.read(self.buf).await.context("websocket read")?;
                if n == 0 {
                    bail!("closed during the join");
                }
                &self.buf[..n]
            } else {
                &early
            };
            let mut found = None;
            let mut closed = None;
            let (socket, scratch) = (self.socket, &mut *self.scratch);
            self.reader.feed(input, |item| {
                if found.is_none() && wanted(&item) {
                    found = Some(match item {
                        Item::Envelope { prefix, .. } | Item::Message(prefix) => prefix.to_vec(),
                        _ => Vec::new(),
                    });
                }
                match item {
                    Item::Ping(payload) => socket.send(scratch, OP_PONG, &[payload])?,
                    Item::Close(code) => closed = Some(code),
                    _ => {}
                }
                Ok(())
            })?;
            if let Some(body) = found {
                return Ok(body);
            }
            if let Some(code) = closed {
                bail!("closed by the server during the join (code {code:?})");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! The lean client against a real RFC 6455 server (tokio-tungstenite)
    //! on a loopback socket: the upgrade, the join, pings, fragmented and
    //! oversized frames, and a text message.

    use std::time::Duration;

    use bytes::{Bytes, BytesMut};
    use citadel_wire::protocol::{
        KIND_PEER_POSITION, KIND_POSITION, KIND_ROOM_CREATE, KIND_ROOM_MAP_READY,
    };
    use futures_util::{SinkExt, StreamExt};
    use tokio::net::TcpListener;
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::protocol::frame::Frame;
    use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};

    use super::*;

    type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

    fn framed(kind: u16, body: &[u8]) -> Vec<u8> {
        Envelope::new(kind, body.to_vec()).encode_framed().to_vec()
    }

    /// What the server saw from the client, for the assertions.
    #[derive(Debug, Default)]
    struct Seen {
        kinds: Vec<u16>,
        pong: Option<Vec<u8>>,
        position: Option<Vec<u8>>,
    }

    /// A Citadel-like server: answers the join, then sends a ping, a
    /// fragmented message holding a frame that spans fragments, one
    /// envelope larger than the read buffer, and finally `last`.
    async fn serve(listener: TcpListener, last: Message) -> Result<Seen, String> {
        let (tcp, _) = listener.accept().await.map_err(|e| e.to_string())?;
        let mut ws = tokio_tungstenite::accept_async(tcp)
            .await
            .map_err(|e| e.to_string())?;
        let mut seen = Seen::default();
        let mut inbound = BytesMut::new();
        while seen.position.is_none() || seen.pong.is_none() {
            match ws.next().await {
                Some(Ok(Message::Binary(b))) => {
                    inbound.extend_from_slice(&b);
                    while let Ok(Some(env)) = citadel_wire::decode_framed(&mut inbound) {
                        seen.kinds.push(env.kind);
                        match env.kind {
                            KIND_AUTH => {
                                let mut body = Vec::new();
                                AuthResult::Guest.encode_into(&mut body);
                                let reply = framed(KIND_AUTH_RESULT, &body);
                                ws.send(Message::Binary(reply.into()))
                                    .await
                                    .map_err(|e| e.to_string())?;
                            }
                            KIND_ROOM_CREATE => {
                                let mut body = Vec::new();
                                RoomJoined {
                                    room_id: 7,
                                    map: "m".into(),
                                    mode: String::new(),
                                }
                                .encode_into(&mut body);
                                // the reply split over two messages
                                let reply = framed(KIND_ROOM_JOINED, &body);
                                let (a, b) = reply.split_at(5);
                                ws.send(Message::Binary(a.to_vec().into()))
                                    .await
                                    .map_err(|e| e.to_string())?;
                                ws.send(Message::Binary(b.to_vec().into()))
                                    .await
                                    .map_err(|e| e.to_string())?;
                            }
                            KIND_ROOM_MAP_READY => {
                                ws.send(Message::Ping(Bytes::from_static(b"hb")))
                                    .await
                                    .map_err(|e| e.to_string())?;
                                let mut stream = framed(KIND_PEER_POSITION, &[1u8; 24]);
                                stream.extend(framed(KIND_PEER_POSITION, &[2u8; 24]));
                                let (a, b) = stream.split_at(20);
                                let first =
                                    Frame::message(a.to_vec(), OpCode::Data(Data::Binary), false);
                                let rest =
                                    Frame::message(b.to_vec(), OpCode::Data(Data::Continue), true);
                                ws.send(Message::Frame(first))
                                    .await
                                    .map_err(|e| e.to_string())?;
                                ws.send(Message::Frame(rest))
                                    .await
                                    .map_err(|e| e.to_string())?;
                                let big =
                                    framed(KIND_PEER_POSITION, &vec![3u8; 3 * READ_BUFFER_BYTES]);
                                ws.send(Message::Binary(big.into()))
                                    .await
                                    .map_err(|e| e.to_string())?;
                                ws.send(last.clone()).await.map_err(|e| e.to_string())?;
                            }
                            KIND_POSITION => seen.position = Some(env.body.to_vec()),
                            _ => {}
                        }
                    }
                }
                Some(Ok(Message::Pong(p))) => seen.pong = Some(p.to_vec()),
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e.to_string()),
                None => return Err("client left".into()),
            }
        }
        Ok(seen)
    }

    /// Reads items until `n` PEER_POSITIONs or an error; answers pings.
    async fn read_positions(d: &mut Dialed, n: usize) -> Result<Vec<Vec<u8>>, LeanError> {
        let mut buf = vec![0u8; READ_BUFFER_BYTES];
        let mut scratch = Vec::new();
        let mut got = Vec::new();
        while got.len() < n {
            let len = d.socket.read(&mut buf).await?;
            if len == 0 {
                break;
            }
            let socket = d.socket.clone();
            d.reader.feed(&buf[..len], |item| {
                match item {
                    Item::Envelope {
                        kind: KIND_PEER_POSITION,
                        prefix,
                    } => got.push(prefix.to_vec()),
                    Item::Ping(p) => socket.send(&mut scratch, OP_PONG, &[p])?,
                    _ => {}
                }
                Ok(())
            })?;
        }
        Ok(got)
    }

    async fn rig(
        last: Message,
    ) -> Result<
        (Dialed, tokio::task::JoinHandle<Result<Seen, String>>),
        Box<dyn std::error::Error + Send + Sync>,
    > {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let server = tokio::spawn(serve(listener, last));
        let d = tokio::time::timeout(
            Duration::from_secs(10),
            citadel(Ipv4Addr::LOCALHOST, addr, None, "room-a", 42),
        )
        .await??;
        Ok((d, server))
    }

    #[tokio::test]
    async fn joins_reads_fragmented_and_oversized_frames_and_answers_pings() -> TestResult {
        let (mut d, server) = rig(Message::Binary(
            framed(KIND_PEER_POSITION, &[4u8; 24]).into(),
        ))
        .await?;
        let got =
            tokio::time::timeout(Duration::from_secs(10), read_positions(&mut d, 4)).await??;
        assert_eq!(got.len(), 4);
        assert_eq!(got[0], vec![1u8; 24]);
        assert_eq!(got[1], vec![2u8; 24]);
        assert_eq!(
            got[2],
            vec![3u8; RELAY_CAPTURE],
            "oversized body: only the prefix is kept"
        );
        assert_eq!(got[3], vec![4u8; 24]);
        // a position as the wheel sends it, masked
        let mut scratch = Vec::new();
        let head = [0, 0, 0, 18, 0, 1];
        d.socket
            .send(&mut scratch, OP_BINARY, &[&head, &[9u8; 16]])?;
        let seen = tokio::time::timeout(Duration::from_secs(10), server).await??;
        let seen = seen.map_err(|e| format!("server: {e}"))?;
        assert_eq!(
            &seen.kinds[..3],
            &[KIND_AUTH, KIND_ROOM_CREATE, KIND_ROOM_MAP_READY]
        );
        assert_eq!(seen.pong.as_deref(), Some(&b"hb"[..]));
        assert_eq!(seen.position.as_deref(), Some(&[9u8; 16][..]));
        Ok(())
    }

    #[tokio::test]
    async fn a_text_message_is_an_error() -> TestResult {
        let (mut d, server) = rig(Message::Text("no".into())).await?;
        let got = tokio::time::timeout(Duration::from_secs(10), read_positions(&mut d, 10)).await?;
        assert!(
            matches!(got, Err(LeanError::Ws(WsError::TextMessage))),
            "{got:?}"
        );
        server.abort();
        Ok(())
    }
}
