//! The HTTP accept loop and the life of one HTTP/1.1 connection, with the
//! bounds that keep one client from holding the listener:
//! `http.max_connections` and `http.max_connections_per_ip` (checked at
//! accept; a connection past either is closed at once and counted), the
//! header read timeout and the keep-alive idle timeout (a per-connection
//! watchdog drops the connection when its deadline passes).
//!
//! Call order: [`serve`] until shutdown; per accepted socket it takes the
//! permits, then [`serve_connection`] runs hyper's HTTP/1.1 server over the
//! socket with the router as the service, the peer address inserted as
//! `ConnectInfo`. On shutdown the loop stops accepting and every connection
//! finishes its request in flight (bounded by `shutdown.grace_ms`).
//! What it is not: routing (the router in [`super::router`]) or body limits
//! (the extractors enforce `MAX_BODY_BYTES`).

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use axum::response::Response;
use hyper::Request;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_util::task::TaskTracker;

use crate::conn_limits::{AcceptBackoff, AddressLimit, AddressPermit};
use crate::metrics::{Metrics, RefuseReason};
use crate::node::NodeShared;

/// The most one connection buffers while reading (the request head must
/// fit; a longer head is answered 431). Bounds the memory of
/// `http.max_connections` slow clients to this many bytes each instead of
/// hyper's ~400 KiB default.
pub const MAX_READ_BUFFER_BYTES: usize = 32 * 1024;

/// Accepts HTTP connections until shutdown, then waits for the open ones.
pub async fn serve(listener: TcpListener, shared: Arc<NodeShared>, app: Router) {
    let cfg = &shared.config.http;
    let slots = Arc::new(Semaphore::new(cfg.max_connections));
    let per_address = AddressLimit::new(cfg.max_connections_per_ip);
    let connections = TaskTracker::new();
    let mut backoff = AcceptBackoff::default();
    loop {
        let accepted = tokio::select! {
            _ = shared.shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => {
                backoff.succeeded();
                accepted
            }
            Err(err) => {
                let pause = backoff.failed(&err, &shared.metrics, "http");
                tokio::select! {
                    _ = shared.shutdown.cancelled() => break,
                    _ = tokio::time::sleep(pause) => continue,
                }
            }
        };
        // Dropping the stream closes it: nothing is read or answered.
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            shared.metrics.refused(RefuseReason::HttpMaxConnections);
            tracing::debug!(%peer, "http connection refused: http.max_connections");
            continue;
        };
        let Some(address) = per_address.try_acquire(peer.ip()) else {
            shared.metrics.refused(RefuseReason::HttpPerAddress);
            tracing::debug!(%peer, "http connection refused: http.max_connections_per_ip");
            continue;
        };
        let permits = Permits::new(slot, address, shared.metrics.clone());
        connections.spawn(serve_connection(
            stream,
            peer,
            app.clone(),
            shared.clone(),
            permits,
        ));
    }
    connections.close();
    connections.wait().await;
}

/// What one connection holds for its whole life.
struct Permits {
    _slot: OwnedSemaphorePermit,
    _address: AddressPermit,
    metrics: Arc<Metrics>,
}

impl Permits {
    fn new(slot: OwnedSemaphorePermit, address: AddressPermit, metrics: Arc<Metrics>) -> Self {
        metrics
            .http_connections_open
            .fetch_add(1, Ordering::Relaxed);
        Permits {
            _slot: slot,
            _address: address,
            metrics,
        }
    }
}

impl Drop for Permits {
    fn drop(&mut self) {
        self.metrics
            .http_connections_open
            .fetch_sub(1, Ordering::Relaxed);
    }
}

/// Serves one connection until the client closes, a deadline passes, or
/// shutdown finishes it.
async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    app: Router,
    shared: Arc<NodeShared>,
    _permits: Permits,
) {
    let _ = stream.set_nodelay(true);
    let cfg = &shared.config.http;
    let limits = Deadlines {
        head: Duration::from_millis(cfg.header_read_timeout_ms),
        idle: Duration::from_millis(cfg.keep_alive_timeout_ms),
    };
    let clock = Arc::new(Clock::new());
    let io = TokioIo::new(Watched {
        inner: stream,
        clock: clock.clone(),
    });
    let service = RouterService {
        app,
        peer,
        clock: clock.clone(),
    };
    // The watchdog below owns both timeouts; hyper's own header timer is
    // off (it would also need a timer and cannot tell idle from slow).
    let connection = hyper::server::conn::http1::Builder::new()
        .header_read_timeout(None)
        .max_buf_size(MAX_READ_BUFFER_BYTES)
        .serve_connection(io, service);
    tokio::pin!(connection);
    let mut grace_end: Option<Instant> = None;
    loop {
        let deadline = clock.deadline(limits);
        let wake = match (deadline, grace_end) {
            (Some((at, _)), Some(end)) => Some(at.min(end)),
            (Some((at, _)), None) => Some(at),
            (None, end) => end,
        };
        tokio::select! {
            result = connection.as_mut() => {
                if let Err(err) = result {
                    tracing::debug!(%peer, error = %err, "http connection ended with an error");
                }
                return;
            }
            _ = clock.changed.notified() => {}
            _ = shared.shutdown.cancelled(), if grace_end.is_none() => {
                connection.as_mut().graceful_shutdown();
                grace_end = Some(Instant::now() + Duration::from_millis(shared.config.shutdown.grace_ms));
            }
            _ = tokio::time::sleep_until(wake.unwrap_or_else(Instant::now)), if wake.is_some() => {
                let now = Instant::now();
                if grace_end.is_some_and(|end| end <= now) {
                    return;
                }
                // Re-read the state: activity may have moved the deadline.
                match clock.deadline(limits) {
                    Some((at, Expiry::Head)) if at <= now => {
                        shared.metrics.refused(RefuseReason::HttpHeaderTimeout);
                        tracing::debug!(%peer, "http connection closed: header read timeout");
                        return;
                    }
                    Some((at, Expiry::Idle)) if at <= now => {
                        shared.metrics.http_keep_alive_closes.fetch_add(1, Ordering::Relaxed);
                        tracing::debug!(%peer, "http connection closed: keep-alive timeout");
                        return;
                    }
                    _ => {}
                }
            }
        }
    }
}

/// The two per-connection timeouts.
#[derive(Debug, Clone, Copy)]
struct Deadlines {
    head: Duration,
    idle: Duration,
}

/// Which timeout a deadline belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expiry {
    Head,
    Idle,
}

/// Where a connection is between requests.
#[derive(Debug, Clone, Copy)]
enum Phase {
    /// Waiting for (or reading) a request head since this instant: from
    /// accept for the first request, from the first byte for later ones.
    Head(Instant),
    /// This many requests are being handled.
    Busy(u32),
    /// The last response was produced at this instant; nothing read since.
    Idle(Instant),
}

/// The phase of one connection, moved by its socket (bytes read), its
/// service (request start and end) and read by its watchdog.
struct Clock {
    phase: Mutex<Phase>,
    changed: Notify,
}

impl Clock {
    fn new() -> Self {
        Clock {
            phase: Mutex::new(Phase::Head(Instant::now())),
            changed: Notify::new(),
        }
    }

    fn update(&self, next: impl FnOnce(Phase) -> Option<Phase>) {
        let mut phase = self.phase.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(new) = next(*phase) {
            *phase = new;
            drop(phase);
            self.changed.notify_one();
        }
    }

    /// Bytes arrived: an idle connection starts reading a request head.
    fn bytes_read(&self) {
        self.update(|phase| match phase {
            Phase::Idle(_) => Some(Phase::Head(Instant::now())),
            _ => None,
        });
    }

    fn request_started(&self) {
        self.update(|phase| match phase {
            Phase::Busy(n) => Some(Phase::Busy(n.saturating_add(1))),
            _ => Some(Phase::Busy(1)),
        });
    }

    fn request_done(&self) {
        self.update(|phase| match phase {
            Phase::Busy(n) if n > 1 => Some(Phase::Busy(n - 1)),
            _ => Some(Phase::Idle(Instant::now())),
        });
    }

    /// When the connection must close, and why (`None` while busy).
    fn deadline(&self, limits: Deadlines) -> Option<(Instant, Expiry)> {
        match *self.phase.lock().unwrap_or_else(|p| p.into_inner()) {
            Phase::Head(since) => Some((since + limits.head, Expiry::Head)),
            Phase::Idle(since) => Some((since + limits.idle, Expiry::Idle)),
            Phase::Busy(_) => None,
        }
    }
}

/// Marks a request as handled when dropped (also when the connection is
/// dropped with the request in flight).
struct Busy(Arc<Clock>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.request_done();
    }
}

/// The router as a hyper service: adds `ConnectInfo` and tracks the phase.
#[derive(Clone)]
struct RouterService {
    app: Router,
    peer: SocketAddr,
    clock: Arc<Clock>,
}

type ResponseFuture = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

impl hyper::service::Service<Request<Incoming>> for RouterService {
    type Response = Response;
    type Error = Infallible;
    type Future = ResponseFuture;

    fn call(&self, mut request: Request<Incoming>) -> Self::Future {
        request.extensions_mut().insert(ConnectInfo(self.peer));
        self.clock.request_started();
        let busy = Busy(self.clock.clone());
        let mut app = self.app.clone();
        Box::pin(async move {
            let response = tower_service::Service::call(&mut app, request).await;
            drop(busy);
            response
        })
    }
}

/// The socket, reporting to the clock when bytes arrive.
struct Watched {
    inner: TcpStream,
    clock: Arc<Clock>,
}

impl AsyncRead for Watched {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.clock.bytes_read();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Deadlines = Deadlines {
        head: Duration::from_secs(10),
        idle: Duration::from_secs(60),
    };

    #[test]
    fn phases_move_the_deadline() {
        let clock = Clock::new();
        let (at, why) = clock.deadline(LIMITS).unwrap();
        assert_eq!(why, Expiry::Head, "a new connection must send a head");
        assert!(at <= Instant::now() + LIMITS.head);
        clock.request_started();
        clock.request_started();
        assert!(clock.deadline(LIMITS).is_none(), "no timeout while busy");
        clock.request_done();
        assert!(clock.deadline(LIMITS).is_none(), "one still in flight");
        clock.bytes_read();
        assert!(clock.deadline(LIMITS).is_none(), "reading a body is busy");
        clock.request_done();
        let (idle_at, why) = clock.deadline(LIMITS).unwrap();
        assert_eq!(why, Expiry::Idle);
        let idle_since = idle_at - LIMITS.idle;
        std::thread::sleep(Duration::from_millis(20));
        clock.bytes_read();
        let (head_at, why) = clock.deadline(LIMITS).unwrap();
        assert_eq!(why, Expiry::Head, "first byte of the next request");
        assert!(head_at >= idle_since + Duration::from_millis(20) + LIMITS.head);
        clock.bytes_read();
        assert_eq!(
            clock.deadline(LIMITS).unwrap().0,
            head_at,
            "more bytes keep it"
        );
    }
}
