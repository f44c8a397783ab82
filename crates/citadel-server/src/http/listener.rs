//! The HTTP accept loop and the life of one HTTP/1.1 connection, with the
//! bounds that keep one client from holding the listener:
//! `http.max_connections` and `http.max_connections_per_ip` (checked at
//! accept; a connection past either is closed at once and counted),
//! `http.max_header_bytes` (hyper's read buffer: a longer head is answered
//! 431 and counted), and the header read, body read and keep-alive idle
//! timeouts (a per-connection watchdog drops the connection when its
//! deadline passes, and counts why).
//!
//! Call order: [`serve`] until shutdown; per accepted socket it takes the
//! permits, then [`serve_connection`] runs hyper's HTTP/1.1 server over the
//! socket with the router as the service, the peer address inserted as
//! `ConnectInfo` and the body wrapped so the watchdog sees when it is
//! complete. On shutdown the loop stops accepting and every connection
//! finishes its request in flight (bounded by `shutdown.grace_ms`).
//! What it is not: routing (the router in [`super::router`]) or body size
//! limits (the extractors enforce `MAX_BODY_BYTES`).

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
use axum::body::{Bytes, HttpBody};
use axum::extract::ConnectInfo;
use axum::response::Response;
use hyper::Request;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_util::task::TaskTracker;

use tokio_util::sync::CancellationToken;

use crate::config::HttpConfig;
use crate::conn_limits::{AcceptBackoff, AddressLimit, AddressPermit};
use crate::metrics::{Metrics, RefuseReason};

/// The listener's bounds: `[http]` and how long an in-flight request may
/// finish after shutdown (`shutdown.grace_ms`).
#[derive(Debug, Clone)]
pub struct ListenerSettings {
    /// `[http]`.
    pub http: HttpConfig,
    /// `shutdown.grace_ms`.
    pub grace: Duration,
}

/// Accepts HTTP connections until shutdown, then waits for the open ones.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    settings: ListenerSettings,
    shutdown: CancellationToken,
    metrics: Arc<Metrics>,
) {
    let settings = Arc::new(settings);
    let cfg = &settings.http;
    let slots = Arc::new(Semaphore::new(cfg.max_connections));
    let per_address = AddressLimit::new(cfg.max_connections_per_ip);
    let connections = TaskTracker::new();
    let mut backoff = AcceptBackoff::default();
    loop {
        let accepted = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => {
                backoff.succeeded();
                accepted
            }
            Err(err) => {
                let pause = backoff.failed(&err, &metrics, "http");
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    _ = tokio::time::sleep(pause) => continue,
                }
            }
        };
        // Dropping the stream closes it: nothing is read or answered.
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            metrics.refused(RefuseReason::HttpMaxConnections);
            tracing::debug!(%peer, "http connection refused: http.max_connections");
            continue;
        };
        let Some(address) = per_address.try_acquire(peer.ip()) else {
            metrics.refused(RefuseReason::HttpPerAddress);
            tracing::debug!(%peer, "http connection refused: http.max_connections_per_ip");
            continue;
        };
        let permits = Permits::new(slot, address, metrics.clone());
        connections.spawn(serve_connection(
            stream,
            peer,
            app.clone(),
            Watch {
                settings: settings.clone(),
                shutdown: shutdown.clone(),
                metrics: metrics.clone(),
            },
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

/// What a connection's watchdog reads.
struct Watch {
    settings: Arc<ListenerSettings>,
    shutdown: CancellationToken,
    metrics: Arc<Metrics>,
}

/// Serves one connection until the client closes, a deadline passes, or
/// shutdown finishes it.
async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    app: Router,
    watch: Watch,
    _permits: Permits,
) {
    let _ = stream.set_nodelay(true);
    let Watch {
        settings,
        shutdown,
        metrics,
    } = watch;
    let cfg = &settings.http;
    let limits = Deadlines {
        head: Duration::from_millis(cfg.header_read_timeout_ms),
        body: Duration::from_millis(cfg.body_read_timeout_ms),
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
    // The watchdog below owns the timeouts; hyper's own header timer is
    // off (it would also need a timer and cannot tell idle from slow). The
    // read buffer is the head limit: it bounds the memory of
    // `http.max_connections` slow clients to that many bytes each instead
    // of hyper's ~400 KiB default.
    let connection = hyper::server::conn::http1::Builder::new()
        .header_read_timeout(None)
        .max_buf_size(cfg.max_header_bytes)
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
                    if err.is_parse_too_large() {
                        // hyper has answered 431 already.
                        metrics.refused(RefuseReason::HttpHeaderTooLarge);
                    }
                    tracing::debug!(%peer, error = %err, "http connection ended with an error");
                }
                return;
            }
            _ = clock.changed.notified() => {}
            _ = shutdown.cancelled(), if grace_end.is_none() => {
                connection.as_mut().graceful_shutdown();
                grace_end = Some(Instant::now() + settings.grace);
            }
            _ = tokio::time::sleep_until(wake.unwrap_or_else(Instant::now)), if wake.is_some() => {
                let now = Instant::now();
                if grace_end.is_some_and(|end| end <= now) {
                    return;
                }
                // Re-read the state: activity may have moved the deadline.
                match clock.deadline(limits) {
                    Some((at, Expiry::Head)) if at <= now => {
                        metrics.refused(RefuseReason::HttpHeaderTimeout);
                        tracing::debug!(%peer, "http connection closed: header read timeout");
                        return;
                    }
                    Some((at, Expiry::Body)) if at <= now => {
                        metrics.refused(RefuseReason::HttpBodyTimeout);
                        tracing::debug!(%peer, "http connection closed: body read timeout");
                        return;
                    }
                    Some((at, Expiry::Idle)) if at <= now => {
                        metrics.http_keep_alive_closes.fetch_add(1, Ordering::Relaxed);
                        tracing::debug!(%peer, "http connection closed: keep-alive timeout");
                        return;
                    }
                    _ => {}
                }
            }
        }
    }
}

/// The per-connection timeouts.
#[derive(Debug, Clone, Copy)]
struct Deadlines {
    head: Duration,
    body: Duration,
    idle: Duration,
}

/// Which timeout a deadline belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expiry {
    Head,
    Body,
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
/// service (request start and end) and request body (complete), and read
/// by its watchdog.
struct Clock {
    state: Mutex<State>,
    changed: Notify,
}

/// A phase, plus when the body of the request in flight started to be
/// awaited (`None`: no body, or all of it read).
#[derive(Debug, Clone, Copy)]
struct State {
    phase: Phase,
    body_since: Option<Instant>,
}

impl Clock {
    fn new() -> Self {
        Clock {
            state: Mutex::new(State {
                phase: Phase::Head(Instant::now()),
                body_since: None,
            }),
            changed: Notify::new(),
        }
    }

    fn update(&self, next: impl FnOnce(Phase) -> Option<Phase>) {
        self.update_state(|state| {
            next(state.phase).map(|phase| State {
                phase,
                body_since: state.body_since,
            })
        });
    }

    fn update_state(&self, next: impl FnOnce(State) -> Option<State>) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(new) = next(*state) {
            *state = new;
            drop(state);
            self.changed.notify_one();
        }
    }

    /// A request head was read and a body is to follow.
    fn body_started(&self) {
        self.update_state(|state| {
            Some(State {
                body_since: Some(Instant::now()),
                ..state
            })
        });
    }

    /// The body was read to its end, failed, or was dropped unread.
    fn body_finished(&self) {
        self.update_state(|state| {
            state.body_since.map(|_| State {
                body_since: None,
                ..state
            })
        });
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
        self.update_state(|state| {
            Some(match state.phase {
                Phase::Busy(n) if n > 1 => State {
                    phase: Phase::Busy(n - 1),
                    ..state
                },
                _ => State {
                    phase: Phase::Idle(Instant::now()),
                    body_since: None,
                },
            })
        });
    }

    /// When the connection must close, and why (`None` while busy with a
    /// complete body: the handler's own time is not bounded here).
    fn deadline(&self, limits: Deadlines) -> Option<(Instant, Expiry)> {
        let state = *self.state.lock().unwrap_or_else(|p| p.into_inner());
        match state.phase {
            Phase::Head(since) => Some((since + limits.head, Expiry::Head)),
            Phase::Idle(since) => Some((since + limits.idle, Expiry::Idle)),
            Phase::Busy(_) => state
                .body_since
                .map(|since| (since + limits.body, Expiry::Body)),
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
        let request = request.map(|body| WatchedBody::new(body, self.clock.clone()));
        let mut app = self.app.clone();
        Box::pin(async move {
            let response = tower_service::Service::call(&mut app, request).await;
            drop(busy);
            response
        })
    }
}

/// A request body, reporting to the clock when it is complete (its end
/// read, an error, or dropped unread); until then the body read timeout
/// runs.
struct WatchedBody {
    inner: Incoming,
    clock: Arc<Clock>,
    pending: bool,
}

impl WatchedBody {
    fn new(inner: Incoming, clock: Arc<Clock>) -> Self {
        let pending = !inner.is_end_stream();
        if pending {
            clock.body_started();
        }
        WatchedBody {
            inner,
            clock,
            pending,
        }
    }

    fn finish(&mut self) {
        if std::mem::take(&mut self.pending) {
            self.clock.body_finished();
        }
    }
}

impl Drop for WatchedBody {
    fn drop(&mut self) {
        self.finish();
    }
}

impl HttpBody for WatchedBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        let ended = match &polled {
            Poll::Ready(None | Some(Err(_))) => true,
            Poll::Ready(Some(Ok(_))) => this.inner.is_end_stream(),
            Poll::Pending => false,
        };
        if ended {
            this.finish();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
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
        body: Duration::from_secs(5),
        idle: Duration::from_secs(60),
    };

    /// On paused time: the 20 ms between two requests is advanced, not slept.
    #[tokio::test(start_paused = true)]
    async fn phases_move_the_deadline() {
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
        assert!(
            clock.deadline(LIMITS).is_none(),
            "handler time is unbounded"
        );
        clock.body_started();
        let (body_at, why) = clock.deadline(LIMITS).unwrap();
        assert_eq!(why, Expiry::Body, "a body is awaited");
        assert!(body_at <= Instant::now() + LIMITS.body);
        clock.bytes_read();
        assert_eq!(
            clock.deadline(LIMITS).unwrap().0,
            body_at,
            "pace is no excuse"
        );
        clock.body_finished();
        assert!(clock.deadline(LIMITS).is_none(), "body complete");
        clock.body_started();
        clock.request_done();
        let (idle_at, why) = clock.deadline(LIMITS).unwrap();
        assert_eq!(why, Expiry::Idle);
        let idle_since = idle_at - LIMITS.idle;
        tokio::time::advance(Duration::from_millis(20)).await;
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
