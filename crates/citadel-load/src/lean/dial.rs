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
    upgrade(&socket, &addr.to_string(), "/", seed, &mut buf, &mut reader).await?;
    let mut scratch = Vec::new();
    let auth = Envelope::new(KIND_AUTH, token.unwrap_or_default().as_bytes().to_vec());
    send_envelope(&socket, &mut scratch, &auth)?;
    let body = wait_for(
        &socket,
        &mut reader,
        &mut buf,
        &mut scratch,
        |item| match item {
            Item::Envelope { kind, .. } => *kind == KIND_AUTH_RESULT,
            _ => false,
        },
    )
    .await?;
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
    send_envelope(&socket, &mut scratch, &create.to_envelope())?;
    let body = wait_for(
        &socket,
        &mut reader,
        &mut buf,
        &mut scratch,
        |item| match item {
            Item::Envelope { kind, .. } => *kind == KIND_ROOM_JOINED,
            _ => false,
        },
    )
    .await?;
    let joined = RoomJoined::decode(&body).context("kind-23 room joined")?;
    let ready = RoomMapReady {
        room_id: joined.room_id,
    };
    send_envelope(&socket, &mut scratch, &ready.to_envelope())?;
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
    upgrade(
        &socket,
        &addr.to_string(),
        &path,
        seed,
        &mut buf,
        &mut reader,
    )
    .await?;
    let mut scratch = Vec::new();
    let first = wait_for(
        &socket,
        &mut reader,
        &mut buf,
        &mut scratch,
        |item| matches!(item, Item::Message([b, ..]) if *b == JOIN_ROOM || *b == ERROR),
    )
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

/// The upgrade: request, response head (bounded), the digest check; bytes
/// after the head go to `reader` (nothing is expected there yet).
async fn upgrade(
    socket: &LeanSocket,
    host: &str,
    path: &str,
    seed: u64,
    buf: &mut [u8],
    reader: &mut Reader,
) -> anyhow::Result<()> {
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
    if end < head.len() {
        // Nothing may be lost: the server could speak first.
        let mut stray = Vec::new();
        reader.feed(&head[end..], |item| {
            stray.push(format!("{item:?}"));
            Ok(())
        })?;
        if !stray.is_empty() {
            bail!(
                "the server sent {} item(s) before the client spoke",
                stray.len()
            );
        }
    }
    Ok(())
}

/// Reads until an item satisfies `wanted`; returns its captured bytes.
/// Pings are answered; a close or the end of the stream is an error.
async fn wait_for(
    socket: &LeanSocket,
    reader: &mut Reader,
    buf: &mut [u8],
    scratch: &mut Vec<u8>,
    wanted: impl Fn(&Item<'_>) -> bool,
) -> anyhow::Result<Vec<u8>> {
    loop {
        let n = socket.read(buf).await.context("websocket read")?;
        if n == 0 {
            bail!("closed during the join");
        }
        let mut found = None;
        let mut closed = None;
        reader.feed(&buf[..n], |item| {
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
