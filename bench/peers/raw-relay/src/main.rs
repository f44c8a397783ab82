//! `raw-relay`: the ceiling any real server can approach on this machine.
//!
//! What it is: a minimal tokio + tokio-tungstenite WebSocket broadcast relay
//! that accepts Citadel's framed envelopes so `citadel-load`'s bots run
//! unchanged: the first frame (KIND_AUTH, whatever it carries) is answered
//! with a guest AUTH_RESULT; ROOM_CREATE puts the connection in the room
//! keyed by its params and answers ROOM_JOINED at once; POSITION is
//! relayed as PEER_POSITION (sender id prefix, as Citadel does) to the
//! other members of the room; RPC_REQUEST is answered OK with its own
//! payload (an echo). Outbound frames queue per connection and the writer
//! coalesces everything queued into one WebSocket message.
//!
//! Variants (flags, or the environment when `citadel-load` spawns it; a flag
//! wins over its variable), measured in `docs/benchmarks.md`:
//! - `--read-buffer BYTES` / `RAW_RELAY_READ_BUFFER`: tungstenite's per
//!   connection read buffer (default 4096; tungstenite's own default is
//!   131072, which it zero-fills on every read);
//! - `--runtime current|multi` / `RAW_RELAY_RUNTIME`: one current-thread
//!   tokio runtime or the multi-thread one (default `current`);
//! - `--writes coalesced|per-frame` / `RAW_RELAY_WRITES`: one WebSocket
//!   message holding every queued frame, or one message per frame with one
//!   flush per batch (default `coalesced`).
//!
//! What it is not: a server — no authentication, no limits, no
//! backpressure (queues are unbounded), no heartbeats, no room policy. Do
//! not expose it; it binds where `--bind` says (default 127.0.0.1:7450).
//!
//! Call order: `raw-relay [--bind 127.0.0.1:PORT] [variant flags]` → serves
//! until killed.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use bytes::{Bytes, BytesMut};
use citadel_wire::protocol::{
    KIND_AUTH_RESULT, KIND_PEER_POSITION, KIND_POSITION, KIND_ROOM_CREATE, KIND_RPC_REQUEST,
    KIND_RPC_RESPONSE, RPC_STATUS_OK, encode_auth_guest, encode_rpc_response, tag_with_sender,
};
use citadel_wire::room::RoomJoined;
use citadel_wire::{Envelope, WireBody, decode_framed};
use futures_util::{SinkExt, StreamExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

/// Largest WebSocket message the writer builds from queued frames.
const MAX_COALESCED: usize = 64 * 1024;

type Tx = UnboundedSender<Bytes>;

struct Room {
    id: u64,
    members: RwLock<Vec<(u64, Tx)>>,
}

#[derive(Default)]
struct Relay {
    rooms: Mutex<HashMap<Bytes, Arc<Room>>>,
    next_id: AtomicU64,
}

/// How the writer turns queued frames into WebSocket messages.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Writes {
    /// Everything queued (up to [`MAX_COALESCED`]) in one binary message.
    Coalesced,
    /// One binary message per frame, then one flush for the batch.
    PerFrame,
}

/// The variant this process runs (see the module doc).
#[derive(Debug, Clone, Copy)]
struct Variant {
    read_buffer: usize,
    multi_thread: bool,
    writes: Writes,
}

const USAGE: &str = "usage: raw-relay [--bind 127.0.0.1:PORT] [--read-buffer BYTES] \
                     [--runtime current|multi] [--writes coalesced|per-frame]";

fn fail(message: &str) -> ! {
    eprintln!("raw-relay: {message}\n{USAGE}");
    std::process::exit(2);
}

/// Applies one variant setting (from a flag or its environment variable).
fn set(variant: &mut Variant, key: &str, value: &str) {
    match (key, value) {
        ("read-buffer", v) => match v.parse::<usize>() {
            Ok(n) if (256..=1 << 20).contains(&n) => variant.read_buffer = n,
            _ => fail(&format!("--read-buffer wants 256..=1048576, got {v:?}")),
        },
        ("runtime", "current") => variant.multi_thread = false,
        ("runtime", "multi") => variant.multi_thread = true,
        ("writes", "coalesced") => variant.writes = Writes::Coalesced,
        ("writes", "per-frame") => variant.writes = Writes::PerFrame,
        (k, v) => fail(&format!("bad --{k} {v:?}")),
    }
}

fn main() {
    let mut bind = String::from("127.0.0.1:7450");
    let mut variant = Variant {
        read_buffer: 4096,
        multi_thread: false,
        writes: Writes::Coalesced,
    };
    for (key, var) in [
        ("read-buffer", "RAW_RELAY_READ_BUFFER"),
        ("runtime", "RAW_RELAY_RUNTIME"),
        ("writes", "RAW_RELAY_WRITES"),
    ] {
        if let Ok(value) = std::env::var(var) {
            set(&mut variant, key, &value);
        }
    }
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match (a.as_str(), args.next()) {
            ("--bind", Some(v)) => bind = v,
            (flag, Some(v)) if flag.starts_with("--") => set(&mut variant, &flag[2..], &v),
            _ => fail("unknown argument"),
        }
    }
    let addr: SocketAddr = match bind.parse() {
        Ok(a) => a,
        Err(e) => fail(&format!("bad --bind {bind:?}: {e}")),
    };
    let runtime = if variant.multi_thread {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    };
    let runtime = match runtime {
        Ok(r) => r,
        Err(e) => {
            eprintln!("raw-relay: cannot start the runtime: {e}");
            std::process::exit(1);
        }
    };
    runtime.block_on(accept_loop(addr, variant));
}

async fn accept_loop(addr: SocketAddr, variant: Variant) {
    let listener = match TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("raw-relay: cannot bind {addr}: {e}");
            std::process::exit(1);
        }
    };
    let relay = Arc::new(Relay::default());
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                tokio::spawn(serve(relay.clone(), stream, variant));
            }
            Err(e) => {
                eprintln!("raw-relay: accept: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
        }
    }
}

async fn serve(relay: Arc<Relay>, stream: TcpStream, variant: Variant) {
    let _ = stream.set_nodelay(true);
    let config = WebSocketConfig::default().read_buffer_size(variant.read_buffer);
    let Ok(ws) = tokio_tungstenite::accept_async_with_config(stream, Some(config)).await else {
        return;
    };
    let (mut sink, mut source) = ws.split();
    let (tx, mut rx) = unbounded_channel::<Bytes>();
    let writer = tokio::spawn(async move {
        while let Some(first) = rx.recv().await {
            if variant.writes == Writes::PerFrame {
                if write_each(&mut sink, &mut rx, first).await.is_err() {
                    break;
                }
                continue;
            }
            let mut out = BytesMut::from(&first[..]);
            while out.len() < MAX_COALESCED {
                match rx.try_recv() {
                    Ok(more) => out.extend_from_slice(&more),
                    Err(_) => break,
                }
            }
            if sink.send(Message::Binary(out.freeze())).await.is_err() {
                break;
            }
        }
    });
    let id = relay.next_id.fetch_add(1, Ordering::Relaxed) + 1;
    let mut inbound = BytesMut::new();
    let mut authed = false;
    let mut room: Option<Arc<Room>> = None;
    'read: while let Some(Ok(msg)) = source.next().await {
        let Message::Binary(data) = msg else {
            if matches!(msg, Message::Close(_)) {
                break;
            }
            continue;
        };
        inbound.extend_from_slice(&data);
        loop {
            let env = match decode_framed(&mut inbound) {
                Ok(Some(env)) => env,
                Ok(None) => break,
                Err(_) => break 'read,
            };
            if !authed {
                authed = true;
                let reply = Envelope::new(KIND_AUTH_RESULT, encode_auth_guest());
                let _ = tx.send(reply.encode_framed());
                continue;
            }
            match env.kind {
                KIND_POSITION => {
                    if let Some(r) = &room {
                        let frame =
                            Envelope::new(KIND_PEER_POSITION, tag_with_sender(id, &env.body))
                                .encode_framed();
                        if let Ok(members) = r.members.read() {
                            for (mid, mtx) in members.iter() {
                                if *mid != id {
                                    let _ = mtx.send(frame.clone());
                                }
                            }
                        }
                    }
                }
                KIND_ROOM_CREATE => {
                    leave(&relay, room.take(), id);
                    let r = join(&relay, env.body.clone(), id, tx.clone());
                    let joined = RoomJoined {
                        room_id: r.id,
                        map: String::new(),
                        mode: String::new(),
                    };
                    let _ = tx.send(joined.to_envelope().encode_framed());
                    room = Some(r);
                }
                KIND_RPC_REQUEST => {
                    if let Some(request) = citadel_wire::protocol::decode_rpc_request(&env.body) {
                        let body = encode_rpc_response(
                            request.request_id,
                            RPC_STATUS_OK,
                            &request.payload,
                        );
                        let _ = tx.send(Envelope::new(KIND_RPC_RESPONSE, body).encode_framed());
                    }
                }
                _ => {}
            }
        }
    }
    leave(&relay, room, id);
    drop(tx);
    let _ = writer.await;
}

/// The per-frame writer: one message per queued frame, one flush at the end.
async fn write_each<S>(
    sink: &mut S,
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<Bytes>,
    first: Bytes,
) -> Result<(), S::Error>
where
    S: futures_util::Sink<Message> + Unpin,
{
    sink.feed(Message::Binary(first)).await?;
    let mut queued = 0;
    while queued < MAX_COALESCED {
        match rx.try_recv() {
            Ok(more) => {
                queued += more.len();
                sink.feed(Message::Binary(more)).await?;
            }
            Err(_) => break,
        }
    }
    sink.flush().await
}

fn join(relay: &Relay, key: Bytes, id: u64, tx: Tx) -> Arc<Room> {
    let mut rooms = match relay.rooms.lock() {
        Ok(r) => r,
        Err(p) => p.into_inner(),
    };
    let next = rooms.len() as u64 + 1;
    let room = rooms
        .entry(key)
        .or_insert_with(|| {
            Arc::new(Room {
                id: next,
                members: RwLock::new(Vec::new()),
            })
        })
        .clone();
    if let Ok(mut m) = room.members.write() {
        m.push((id, tx));
    }
    room
}

fn leave(_relay: &Relay, room: Option<Arc<Room>>, id: u64) {
    if let Some(r) = room
        && let Ok(mut m) = r.members.write()
    {
        m.retain(|(mid, _)| *mid != id);
    }
}
