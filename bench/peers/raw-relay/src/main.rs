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
//! What it is not: a server — no authentication, no limits, no
//! backpressure (queues are unbounded), no heartbeats, no room policy. Do
//! not expose it; it binds where `--bind` says (default 127.0.0.1:7450).
//!
//! Call order: `raw-relay [--bind 127.0.0.1:PORT]` → serves until killed.

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

#[tokio::main]
async fn main() {
    let mut bind = String::from("127.0.0.1:7450");
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match (a.as_str(), args.next()) {
            ("--bind", Some(v)) => bind = v,
            _ => {
                eprintln!("usage: raw-relay [--bind 127.0.0.1:PORT]");
                std::process::exit(2);
            }
        }
    }
    let addr: SocketAddr = match bind.parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("raw-relay: bad --bind {bind:?}: {e}");
            std::process::exit(2);
        }
    };
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
                tokio::spawn(serve(relay.clone(), stream));
            }
            Err(e) => {
                eprintln!("raw-relay: accept: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
        }
    }
}

async fn serve(relay: Arc<Relay>, stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let Ok(ws) = tokio_tungstenite::accept_async(stream).await else {
        return;
    };
    let (mut sink, mut source) = ws.split();
    let (tx, mut rx) = unbounded_channel::<Bytes>();
    let writer = tokio::spawn(async move {
        while let Some(first) = rx.recv().await {
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
