//! The driver task: the one place a connection's transport is touched.
//!
//! What it is: [`Transport`] (a `WsClient` or a `QuicClient` behind one
//! surface) and [`run`], a task on the handle's private runtime that writes
//! the envelopes the application queued ([`Command::Send`]; sends already
//! waiting are coalesced into one WebSocket message, up to 256 envelopes or
//! 64 KiB of bodies, keeping their order; a lone send first yields a few
//! times so the rest of a burst joins it), performs the
//! handshake on request, and reads inbound envelopes into the bounded
//! inbound queue the poll loop drains. When the queue is full it stops
//! reading, so memory stays bounded and the server sees back-pressure.
//!
//! What it is not: it never calls foreign code and never blocks a foreign
//! thread; the ABI side only uses non-blocking channel operations, except
//! for connect, the handshake and free, which wait with a timeout.
//!
//! Call order: `client::Client` creates the channels, spawns [`run`], sends
//! commands; the task ends on [`Command::Close`] or when the handle's
//! command sender is dropped.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use citadel_client::{AuthOutcome, ClientError, ClientResult, Envelope, QuicClient, WsClient};
use tokio::sync::{mpsc, oneshot};

/// A connected transport.
pub enum Transport {
    /// WebSocket: every send is reliable and ordered.
    Ws(WsClient),
    /// QUIC: reliable sends on the stream, unreliable ones as datagrams.
    Quic(QuicClient),
}

impl Transport {
    async fn recv(&mut self) -> ClientResult<Option<Envelope>> {
        match self {
            Transport::Ws(c) => c.recv().await,
            Transport::Quic(c) => c.recv().await,
        }
    }

    /// Writes `batch` in order: one WebSocket message for the whole batch,
    /// or one stream write / datagram per envelope on QUIC.
    async fn send_all(&mut self, batch: &[(Envelope, bool)]) -> ClientResult<()> {
        match self {
            Transport::Ws(c) => {
                if let [(envelope, _)] = batch {
                    return c.send(envelope).await;
                }
                let envelopes: Vec<Envelope> = batch.iter().map(|(e, _)| e.clone()).collect();
                c.send_batch(&envelopes).await
            }
            Transport::Quic(c) => {
                for (envelope, reliable) in batch {
                    if *reliable {
                        c.send(envelope).await?;
                    } else {
                        c.send_unreliable(envelope)?;
                    }
                }
                Ok(())
            }
        }
    }

    async fn authenticate(&mut self, token: Option<&str>) -> ClientResult<AuthOutcome> {
        match self {
            Transport::Ws(c) => c.authenticate(token).await,
            Transport::Quic(c) => c.authenticate(token).await,
        }
    }

    async fn close(&mut self) {
        // A close error is not actionable: the handle is going away and the
        // connection is closed either way.
        let _ = match self {
            Transport::Ws(c) => c.close().await,
            Transport::Quic(c) => c.close().await,
        };
    }

    fn close_reason(&self) -> Option<(u16, String)> {
        match self {
            Transport::Ws(c) => c.close_reason(),
            Transport::Quic(c) => c.close_reason(),
        }
    }
}

/// What the application asks the driver to do.
pub enum Command {
    /// Write one envelope.
    Send {
        /// The envelope (body already copied from the caller).
        envelope: Envelope,
        /// Stream (true) or datagram (false, QUIC only).
        reliable: bool,
    },
    /// Send KIND_AUTH and wait for KIND_AUTH_RESULT.
    Authenticate {
        /// The session token; `None` asks for a guest session.
        token: Option<String>,
        /// Where the outcome goes.
        reply: oneshot::Sender<ClientResult<AuthOutcome>>,
    },
    /// Close gracefully, then end the task.
    Close {
        /// Signalled once closed.
        reply: oneshot::Sender<()>,
    },
}

/// What the poll loop receives.
pub enum Inbound {
    /// A received envelope.
    Envelope(Envelope),
    /// The connection ended, with a human-readable reason; nothing follows.
    Ended(String),
}

/// State shared between the driver and the handle.
#[derive(Default)]
pub struct Shared {
    /// Set once the connection has ended; sends then fail at once.
    pub ended: AtomicBool,
    /// The handle's last error (failures of queued sends land here too).
    pub last_error: Mutex<String>,
}

impl Shared {
    /// Records `message` as the handle's last error.
    pub fn record(&self, message: &str) {
        let mut slot = self.last_error.lock().unwrap_or_else(|e| e.into_inner());
        slot.clear();
        slot.push_str(message);
    }
}

/// Drives `transport` until closed; see the module documentation.
pub async fn run(
    mut transport: Transport,
    mut commands: mpsc::Receiver<Command>,
    inbound: mpsc::Sender<Inbound>,
    shared: Arc<Shared>,
) {
    let mut batch = Vec::new();
    let reason = 'driving: loop {
        tokio::select! {
            biased;
            command = commands.recv() => match command {
                None => {
                    transport.close().await;
                    return;
                }
                Some(command) => {
                    let mut next = Some(command);
                    while let Some(command) = next.take() {
                        match command {
                            Command::Send { envelope, reliable } => {
                                batch.push((envelope, reliable));
                                next = gather(&mut commands, &mut batch);
                                if next.is_none() && batch.len() == 1 {
                                    next = linger(&mut commands, &mut batch).await;
                                }
                                let sent = transport.send_all(&batch).await;
                                batch.clear();
                                match sent {
                                    Ok(()) => {}
                                    Err(ClientError::Closed) => {
                                        break 'driving ended_reason(&transport, None);
                                    }
                                    Err(e) => shared.record(&e.to_string()),
                                }
                            }
                            Command::Authenticate { token, reply } => {
                                let _ = reply.send(transport.authenticate(token.as_deref()).await);
                            }
                            Command::Close { reply } => {
                                transport.close().await;
                                shared.ended.store(true, Ordering::Release);
                                let _ = reply.send(());
                                return;
                            }
                        }
                    }
                }
            },
            received = transport.recv() => match received {
                Ok(Some(envelope)) => {
                    if inbound.send(Inbound::Envelope(envelope)).await.is_err() {
                        transport.close().await;
                        return;
                    }
                }
                Ok(None) => break ended_reason(&transport, None),
                Err(e) => break ended_reason(&transport, Some(e)),
            },
        }
    };
    shared.record(&reason);
    shared.ended.store(true, Ordering::Release);
    let _ = inbound.send(Inbound::Ended(reason)).await;
    // Keep answering until the handle is freed.
    while let Some(command) = commands.recv().await {
        match command {
            Command::Send { .. } => {}
            Command::Authenticate { reply, .. } => {
                let _ = reply.send(Err(ClientError::Closed));
            }
            Command::Close { reply } => {
                transport.close().await;
                let _ = reply.send(());
                return;
            }
        }
    }
}

/// Most envelopes, and bytes of bodies, one write coalesces.
const MAX_BATCH: usize = 256;
const MAX_BATCH_BYTES: usize = 64 * 1024;

/// Moves the sends already queued behind the first one into `batch` (up to
/// [`MAX_BATCH`] envelopes / [`MAX_BATCH_BYTES`]); returns the first
/// non-send command met, which must be handled after the batch.
fn gather(
    commands: &mut mpsc::Receiver<Command>,
    batch: &mut Vec<(Envelope, bool)>,
) -> Option<Command> {
    let mut bytes: usize = batch.iter().map(|(e, _)| e.body.len()).sum();
    while batch.len() < MAX_BATCH && bytes < MAX_BATCH_BYTES {
        match commands.try_recv() {
            Ok(Command::Send { envelope, reliable }) => {
                bytes += envelope.body.len();
                batch.push((envelope, reliable));
            }
            Ok(other) => return Some(other),
            Err(_) => break,
        }
    }
    None
}

/// How many times a lone send yields before it is written, to pick up the
/// sends the game thread is still making in the same burst.
const LINGER_YIELDS: usize = 4;

/// A lone send: yields to the scheduler a few times (a few microseconds,
/// no sleep) so that a burst in progress on the game thread is coalesced
/// and, above all, so that those sends find this task awake instead of
/// paying the cross-thread wake-up each.
async fn linger(
    commands: &mut mpsc::Receiver<Command>,
    batch: &mut Vec<(Envelope, bool)>,
) -> Option<Command> {
    for _ in 0..LINGER_YIELDS {
        tokio::task::yield_now().await;
        let next = gather(commands, batch);
        if next.is_some() {
            return next;
        }
    }
    None
}

fn ended_reason(transport: &Transport, error: Option<ClientError>) -> String {
    match (error, transport.close_reason()) {
        (Some(e), _) => format!("connection lost: {e}"),
        (None, Some((code, reason))) if reason.is_empty() => {
            format!("closed by the server (code {code})")
        }
        (None, Some((code, reason))) => format!("closed by the server (code {code}: {reason})"),
        (None, None) => "connection closed".to_owned(),
    }
}
