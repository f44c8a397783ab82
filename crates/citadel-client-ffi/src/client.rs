//! [`Client`]: the safe core behind one `CitadelClient*` handle.
//!
//! What it is: the handle's private tokio runtime (one worker thread named
//! `citadel-ffi`), the driver task's channels and the poll state (an
//! envelope kept back after a truncated poll, the end reason). Every method
//! is synchronous: `send` and `poll` never block (bounded channels, `try_*`
//! operations); `connect`, `authenticate` and `close` wait with a timeout.
//!
//! What it is not: pointer handling (see `abi.rs`) or transport logic (see
//! `driver.rs`). It must not be used from inside another tokio runtime's
//! context (blocking calls would panic; the ABI reports that as
//! `CITADEL_STATUS_INTERNAL`).
//!
//! Call order: `connect_*` → `authenticate` → `send` / `poll` → `close`.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use citadel_client::{AuthOutcome, ClientError, Envelope, QuicClient, ServerTrust, WsClient};
use tokio::runtime::Runtime;
use tokio::sync::mpsc::error::{TryRecvError, TrySendError};
use tokio::sync::{mpsc, oneshot};

use crate::driver::{self, Command, Inbound, Shared, Transport};
use crate::status::{CitadelStatus, Failure};
use crate::{
    CITADEL_BLOCKING_TIMEOUT_MS, CITADEL_CLOSE_TIMEOUT_MS, CITADEL_INBOUND_QUEUE_CAPACITY,
    CITADEL_MAX_BODY_BYTES, CITADEL_OUTBOUND_QUEUE_CAPACITY,
};

/// How a connection must be verified for QUIC.
pub enum QuicTrust {
    /// Accept only these DER certificates as the server's leaf.
    Pinned(Vec<rustls_pki_types::CertificateDer<'static>>),
    /// Accept any certificate (development only).
    Insecure,
    /// Verify the chain to the platform's trusted roots and the host name.
    SystemRoots,
}

/// The result of one poll.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Polled {
    /// Nothing received yet.
    Empty,
    /// An envelope of `kind` whose body is `len` bytes; when `truncated`,
    /// only the buffer's length was copied and the envelope stays queued.
    Envelope {
        /// The envelope's kind.
        kind: u16,
        /// The full body length.
        len: usize,
        /// Whether the buffer was too small.
        truncated: bool,
    },
    /// The connection has ended and every received envelope was handed out.
    Ended,
}

/// One connection; see the module documentation.
pub struct Client {
    runtime: Option<Runtime>,
    commands: mpsc::Sender<Command>,
    inbound: mpsc::Receiver<Inbound>,
    /// An envelope a too-small buffer could not take; handed out next.
    head: Option<Envelope>,
    /// Set once the driver reported the end of the connection.
    ended: Option<String>,
    shared: Arc<Shared>,
}

fn blocking_timeout() -> Duration {
    Duration::from_millis(CITADEL_BLOCKING_TIMEOUT_MS)
}

fn new_runtime() -> Result<Runtime, Failure> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("citadel-ffi")
        .enable_all()
        .build()
        .map_err(|e| Failure::new(CitadelStatus::Internal, format!("runtime: {e}")))
}

/// Runs `connect` on a fresh runtime (bounded by the blocking timeout) and
/// starts the driver on success.
fn start<F>(connect: F) -> Result<Client, Failure>
where
    F: Future<Output = Result<Transport, ClientError>>,
{
    let runtime = new_runtime()?;
    let transport = runtime
        .block_on(async { tokio::time::timeout(blocking_timeout(), connect).await })
        .map_err(|_| {
            Failure::new(
                CitadelStatus::Connect,
                format!("connect timed out after {CITADEL_BLOCKING_TIMEOUT_MS} ms"),
            )
        })?
        .map_err(Failure::from)?;
    let (commands, command_rx) = mpsc::channel(CITADEL_OUTBOUND_QUEUE_CAPACITY);
    let (inbound_tx, inbound) = mpsc::channel(CITADEL_INBOUND_QUEUE_CAPACITY);
    let shared = Arc::new(Shared::default());
    runtime.spawn(driver::run(
        transport,
        command_rx,
        inbound_tx,
        shared.clone(),
    ));
    Ok(Client {
        runtime: Some(runtime),
        commands,
        inbound,
        head: None,
        ended: None,
        shared,
    })
}

impl Client {
    /// Opens a WebSocket to `url` (`ws://host:port/`).
    pub fn connect_websocket(url: &str) -> Result<Client, Failure> {
        let url = url.to_owned();
        start(async move { WsClient::connect(&url).await.map(Transport::Ws) })
    }

    /// Opens a QUIC connection to `addr` (`host:port`, the host is also the
    /// TLS server name) verified as `trust` says.
    pub fn connect_quic(addr: &str, trust: QuicTrust) -> Result<Client, Failure> {
        let trust = match trust {
            QuicTrust::Pinned(certs) => ServerTrust::Pinned(certs),
            QuicTrust::Insecure => ServerTrust::InsecureDev,
            QuicTrust::SystemRoots => ServerTrust::SystemRoots,
        };
        let addr = addr.to_owned();
        start(async move { QuicClient::connect(&addr, trust).await.map(Transport::Quic) })
    }

    /// The handle's last error message (empty when none).
    pub fn last_error(&self) -> String {
        self.shared
            .last_error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Records `failure` as the handle's last error and returns it.
    pub fn fail(&self, failure: Failure) -> Failure {
        self.shared.record(&failure.message);
        failure
    }

    fn runtime(&self) -> Result<&Runtime, Failure> {
        self.runtime
            .as_ref()
            .ok_or_else(|| Failure::new(CitadelStatus::Internal, "runtime already shut down"))
    }

    /// Performs the handshake (`None` = guest) and waits for its outcome.
    pub fn authenticate(&mut self, token: Option<String>) -> Result<AuthOutcome, Failure> {
        if self.ended.is_some() || self.shared.ended.load(Ordering::Acquire) {
            return Err(self.fail(Failure::new(
                CitadelStatus::Disconnected,
                "the connection has ended",
            )));
        }
        let (reply, outcome) = oneshot::channel();
        self.commands
            .try_send(Command::Authenticate { token, reply })
            .map_err(|e| self.fail(queue_failure(&e)))?;
        let waited = self
            .runtime()?
            .block_on(async { tokio::time::timeout(blocking_timeout(), outcome).await });
        match waited {
            Ok(Ok(Ok(outcome))) => Ok(outcome),
            Ok(Ok(Err(e))) => Err(self.fail(Failure::from(e))),
            Ok(Err(_)) => Err(self.fail(Failure::new(
                CitadelStatus::Disconnected,
                "the connection has ended",
            ))),
            Err(_) => Err(self.fail(Failure::new(
                CitadelStatus::Connect,
                format!("handshake timed out after {CITADEL_BLOCKING_TIMEOUT_MS} ms"),
            ))),
        }
    }

    /// Queues one envelope (the body is copied). `Again` when the outbound
    /// queue is full.
    pub fn send(&mut self, kind: u16, body: &[u8], reliable: bool) -> Result<(), Failure> {
        if body.len() > CITADEL_MAX_BODY_BYTES {
            return Err(self.fail(Failure::invalid(format!(
                "body of {} bytes exceeds the {CITADEL_MAX_BODY_BYTES}-byte limit",
                body.len()
            ))));
        }
        if self.ended.is_some() || self.shared.ended.load(Ordering::Acquire) {
            return Err(Failure::new(
                CitadelStatus::Disconnected,
                "the connection has ended",
            ));
        }
        let envelope = Envelope::new(kind, Bytes::copy_from_slice(body));
        self.commands
            .try_send(Command::Send { envelope, reliable })
            .map_err(|e| queue_failure(&e))
    }

    /// Takes the next received envelope into `buf` without blocking; see
    /// [`Polled`] for the outcomes.
    pub fn poll(&mut self, buf: &mut [u8]) -> Polled {
        let envelope = match self.head.take() {
            Some(envelope) => envelope,
            None if self.ended.is_some() => return Polled::Ended,
            None => match self.inbound.try_recv() {
                Ok(Inbound::Envelope(envelope)) => envelope,
                Ok(Inbound::Ended(reason)) => {
                    self.ended = Some(reason);
                    return Polled::Ended;
                }
                Err(TryRecvError::Empty) => return Polled::Empty,
                Err(TryRecvError::Disconnected) => {
                    self.ended = Some("connection closed".into());
                    return Polled::Ended;
                }
            },
        };
        let len = envelope.body.len();
        let kind = envelope.kind;
        let copied = len.min(buf.len());
        buf[..copied].copy_from_slice(&envelope.body[..copied]);
        let truncated = copied < len;
        if truncated {
            self.head = Some(envelope);
        }
        Polled::Envelope {
            kind,
            len,
            truncated,
        }
    }

    /// Why the connection ended, once `poll` reported it.
    pub fn end_reason(&self) -> Option<&str> {
        self.ended.as_deref()
    }

    /// Closes gracefully (bounded by [`CITADEL_CLOSE_TIMEOUT_MS`]), then
    /// stops the runtime and its thread.
    pub fn close(&mut self) {
        let Some(runtime) = self.runtime.take() else {
            return;
        };
        let (reply, closed) = oneshot::channel();
        // A full command queue: the runtime shutdown below still ends the
        // connection, without the close handshake.
        if self.commands.try_send(Command::Close { reply }).is_ok() {
            let timeout = Duration::from_millis(CITADEL_CLOSE_TIMEOUT_MS);
            let _ = runtime.block_on(async { tokio::time::timeout(timeout, closed).await });
        }
        runtime.shutdown_timeout(Duration::from_millis(500));
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.close();
    }
}

fn queue_failure<T>(err: &TrySendError<T>) -> Failure {
    match err {
        TrySendError::Full(_) => Failure::new(
            CitadelStatus::Again,
            format!(
                "send queue full ({CITADEL_OUTBOUND_QUEUE_CAPACITY} envelopes): poll and retry"
            ),
        ),
        TrySendError::Closed(_) => {
            Failure::new(CitadelStatus::Disconnected, "the connection has ended")
        }
    }
}
