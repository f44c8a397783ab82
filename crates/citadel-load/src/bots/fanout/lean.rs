//! The lean relay-fanout engine: one reader task per bot and ONE send
//! wheel for all of them.
//!
//! What it is: [`Engine`] takes dialed bots ([`crate::lean::Dialed`]) and
//! runs them until [`Engine::stop`]. Each bot still has its own WebSocket
//! and behaves like a game client (a position at the scenario's rate, a
//! pong for every ping, a close at the end), but the work per delivery is
//! what a lean client does: a reader task waits for readability, reads
//! into its 4 KiB buffer (allocated once), takes one timestamp per read,
//! splits the bytes in place and records each PEER_POSITION's latency in
//! the shared histogram, with the window's counters added once per read.
//! Sends come from one task driving a timer wheel of one slot per
//! millisecond of the send period: every bot sits in the slot of its phase
//! (the same golden-ratio spread as the classic bots), the wheel sleeps to
//! each slot's deadline and writes that slot's frames with non-blocking
//! writes, so there is one timer for all bots instead of one per bot. A
//! wheel that falls more than a period behind skips ahead (the missed sends
//! show as sends/s under the offered rate, flagging the generator).
//! What it is not: the classic per-bot `BotTransport` loop (`fanout::bot`,
//! still used with `--bots tungstenite`).
//!
//! Call order: [`Engine::start`] → [`Engine::add`] per ramp step →
//! [`Engine::stop`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use citadel_wire::protocol::{KIND_PEER_POSITION, KIND_POSITION};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::Shared;
use crate::bots::{decode_payload, encode_payload};
use crate::lean::dial::READ_BUFFER_BYTES;
use crate::lean::socket::LeanSocket;
use crate::lean::ws::{OP_BINARY, OP_CLOSE, OP_PONG};
use crate::lean::{Dialect, Dialed, Item, Reader};
use crate::stats::Clock;
use crate::targets::colyseus::{LEAVE_ROOM, relay_head, relay_payload};

/// Longest a bot's reader waits for the server's close reply at the end.
const CLOSE_WAIT: Duration = Duration::from_secs(5);

/// One bot as the wheel sees it.
struct Sender {
    socket: Arc<LeanSocket>,
    idx: u32,
    seq: u32,
}

enum Command {
    Add(Vec<Sender>),
    Stop,
}

/// What every task of the engine shares.
#[derive(Clone)]
struct Common {
    shared: Arc<Shared>,
    clock: Clock,
    stopping: Arc<AtomicBool>,
    dialect: Dialect,
}

/// The running engine.
pub(super) struct Engine {
    common: Common,
    commands: mpsc::UnboundedSender<Command>,
    wheel: JoinHandle<()>,
    readers: Vec<JoinHandle<()>>,
}

impl Engine {
    /// Starts the send wheel (with no bots yet).
    pub(super) fn start(
        shared: Arc<Shared>,
        clock: Clock,
        period: Duration,
        payload_bytes: usize,
        peers: u64,
        dialect: Dialect,
    ) -> Self {
        let common = Common {
            shared,
            clock,
            stopping: Arc::new(AtomicBool::new(false)),
            dialect,
        };
        let (commands, rx) = mpsc::unbounded_channel();
        let wheel = tokio::spawn(run_wheel(rx, common.clone(), period, payload_bytes, peers));
        Engine {
            common,
            commands,
            wheel,
            readers: Vec::new(),
        }
    }

    /// Bots connected so far.
    pub(super) fn len(&self) -> u32 {
        self.readers.len() as u32
    }

    /// Starts `bots` (bot index, dialed connection): a reader each, and a
    /// place in the wheel.
    pub(super) fn add(&mut self, bots: Vec<(u32, Dialed)>) {
        let mut senders = Vec::with_capacity(bots.len());
        for (idx, dialed) in bots {
            senders.push(Sender {
                socket: dialed.socket.clone(),
                idx,
                seq: 0,
            });
            self.readers.push(tokio::spawn(read_loop(
                dialed.socket,
                dialed.reader,
                self.common.clone(),
            )));
        }
        let _ = self.commands.send(Command::Add(senders));
    }

    /// Stops sending, closes every bot and waits (bounded) for the server's
    /// close replies. False if some bot did not close in time.
    pub(super) async fn stop(self) -> bool {
        self.common.stopping.store(true, Ordering::SeqCst);
        let _ = self.commands.send(Command::Stop);
        let _ = self.wheel.await;
        let deadline = Instant::now() + CLOSE_WAIT;
        let mut all = true;
        for r in self.readers {
            let abort = r.abort_handle();
            if tokio::time::timeout_at(deadline, r).await.is_err() {
                abort.abort();
                all = false;
            }
        }
        all
    }
}

/// The golden-ratio phase slot of bot `idx` among `slots`.
fn slot_of(idx: u32, slots: usize) -> usize {
    let phase = (f64::from(idx) * 0.618_033_988_75).fract();
    ((phase * slots as f64) as usize).min(slots - 1)
}

async fn run_wheel(
    mut rx: mpsc::UnboundedReceiver<Command>,
    common: Common,
    period: Duration,
    payload_bytes: usize,
    peers: u64,
) {
    let slots = ((period.as_secs_f64() * 1_000.0).round() as usize).clamp(1, 1_000);
    let slot_time = period / slots as u32;
    let mut wheel: Vec<Vec<Sender>> = (0..slots).map(|_| Vec::new()).collect();
    let origin = Instant::now();
    let mut tick: u64 = 0;
    let mut out = Outgoing::new(common.dialect, payload_bytes);
    loop {
        loop {
            match rx.try_recv() {
                Ok(Command::Add(bots)) => {
                    for b in bots {
                        wheel[slot_of(b.idx, slots)].push(b);
                    }
                }
                Ok(Command::Stop) | Err(mpsc::error::TryRecvError::Disconnected) => {
                    for bot in wheel.iter().flatten() {
                        out.goodbye(&bot.socket);
                    }
                    return;
                }
                Err(mpsc::error::TryRecvError::Empty) => break,
            }
        }
        let due = origin + slot_time * (tick as u32);
        let now = Instant::now();
        if due > now {
            tokio::time::sleep_until(due).await;
        } else if now - due > period {
            // Far behind: skip the missed slots rather than burst them.
            tick = ((now - origin).as_nanos() / slot_time.as_nanos().max(1)) as u64;
        }
        let slot = &mut wheel[(tick % slots as u64) as usize];
        let mut i = 0;
        while i < slot.len() {
            if out.position(&mut slot[i], &common, peers).is_err() {
                if !common.stopping.load(Ordering::Relaxed) {
                    common.shared.lost_bots.fetch_add(1, Ordering::Relaxed);
                }
                slot.swap_remove(i);
                continue;
            }
            i += 1;
        }
        tick += 1;
    }
}

/// The wheel's reused send buffers.
struct Outgoing {
    dialect: Dialect,
    payload: Vec<u8>,
    scratch: Vec<u8>,
}

impl Outgoing {
    fn new(dialect: Dialect, payload_bytes: usize) -> Self {
        Outgoing {
            dialect,
            payload: vec![0; payload_bytes],
            scratch: Vec::with_capacity(payload_bytes + 32),
        }
    }

    /// Sends one position of `bot`, stamped now, and counts it.
    fn position(&mut self, bot: &mut Sender, common: &Common, peers: u64) -> std::io::Result<()> {
        let sh = &common.shared;
        let now = common.clock.now_ns();
        encode_payload(&mut self.payload, now, bot.idx, bot.seq);
        bot.seq = bot.seq.wrapping_add(1);
        if sh.window.contains(now) {
            sh.sent_in_window.fetch_add(1, Ordering::Relaxed);
            sh.expected.fetch_add(peers, Ordering::Relaxed);
        }
        sh.sent_total.fetch_add(1, Ordering::Relaxed);
        match self.dialect {
            Dialect::Citadel => {
                let len = (2 + self.payload.len()) as u32;
                let mut head = [0u8; 6];
                head[..4].copy_from_slice(&len.to_be_bytes());
                head[4..].copy_from_slice(&KIND_POSITION.to_be_bytes());
                bot.socket
                    .send(&mut self.scratch, OP_BINARY, &[&head, &self.payload])
            }
            Dialect::Colyseus => {
                let mut head = [0u8; 8];
                let n = relay_head(self.payload.len(), &mut head);
                bot.socket
                    .send(&mut self.scratch, OP_BINARY, &[&head[..n], &self.payload])
            }
        }
    }

    /// Leaves (Colyseus) and sends a normal close; errors do not matter
    /// any more.
    fn goodbye(&mut self, socket: &LeanSocket) {
        if self.dialect == Dialect::Colyseus {
            let _ = socket.send(&mut self.scratch, OP_BINARY, &[&[LEAVE_ROOM]]);
        }
        let _ = socket.send(&mut self.scratch, OP_CLOSE, &[&1000u16.to_be_bytes()]);
    }
}

/// One bot's reads until the server closes (or the bot is stopped).
async fn read_loop(socket: Arc<LeanSocket>, mut reader: Reader, common: Common) {
    let sh = &common.shared;
    let mut buf = vec![0u8; READ_BUFFER_BYTES];
    let mut scratch = Vec::new();
    loop {
        let n = match socket.read(&mut buf).await {
            Ok(n) if n > 0 => n,
            _ => break,
        };
        // One receive time per read: every delivery in it arrived then.
        let now = common.clock.now_ns();
        let mut received = 0u64;
        let mut in_window = 0u64;
        let mut closed = false;
        let mut record = |payload: &[u8]| {
            if let Some((sent_ns, _, _)) = decode_payload(payload) {
                received += 1;
                if sh.window.contains(sent_ns) {
                    in_window += 1;
                    sh.hist.record(now.saturating_sub(sent_ns) / 1_000);
                }
            }
        };
        let fed = reader.feed(&buf[..n], |item| {
            match item {
                Item::Envelope {
                    kind: KIND_PEER_POSITION,
                    prefix,
                } => record(prefix.get(8..).unwrap_or_default()),
                Item::Message(prefix) => record(relay_payload(prefix).unwrap_or_default()),
                Item::Ping(payload) => socket.send(&mut scratch, OP_PONG, &[payload])?,
                Item::Close(_) => closed = true,
                Item::Envelope { .. } => {}
            }
            Ok(())
        });
        if received > 0 {
            sh.received_total.fetch_add(received, Ordering::Relaxed);
        }
        if in_window > 0 {
            sh.received_in_window
                .fetch_add(in_window, Ordering::Relaxed);
        }
        if fed.is_err() || closed {
            break;
        }
    }
    if !common.stopping.load(Ordering::SeqCst) {
        sh.lost_bots.fetch_add(1, Ordering::Relaxed);
    }
}
