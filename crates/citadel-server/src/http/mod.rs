//! The HTTP listener: operations endpoints (`ops`), the player API for
//! accounts and sessions (`auth`), the WebTransport discovery route
//! (`webtransport`), the browser demo (`demo`), CORS for `/v1` (`cors`),
//! with one error type mapped to the
//! `{code, message}` body in one place (`error`).
//!
//! The accept loop and the per-connection bounds (connection caps, header
//! read and keep-alive timeouts) are in `listener`.
//!
//! State: [`HttpState`] holds one handle per concern and each handler
//! extracts only the part it uses (axum sub-states, `FromRef`). Every
//! request a route answers counts toward `http_requests_total`, in one
//! middleware layer around the routes (not the 404 fallback, a 405, or a
//! CORS preflight, which the CORS layer answers before routing).
//!
//! What it is not: no realtime traffic (that is the WebSocket, QUIC and
//! WebTransport listeners).

mod auth;
mod cors;
mod demo;
mod error;
mod listener;
mod ops;
mod webtransport;

pub use cors::CorsOrigins;
pub use demo::DemoAddrs;
pub use error::ApiError;
pub use listener::ListenerSettings;
pub use ops::OpsView;
pub use webtransport::WebTransportInfo;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Router;
use axum::extract::{FromRef, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;
use crate::services::AccountService;
use crate::services::live::LiveSessions;

/// Largest request body accepted by the player routes.
pub const MAX_BODY_BYTES: usize = 16 * 1024;

/// What the routes use, one handle per concern; a handler names the part
/// it needs (`State<Arc<AccountService>>`, …) and gets only that.
#[derive(Clone, FromRef)]
pub struct HttpState {
    /// Counters (request metrics, `/metrics`).
    pub metrics: Arc<Metrics>,
    /// What `/health`, `/status` and `/metrics` report.
    pub ops: Arc<OpsView>,
    /// Accounts and sessions (the player API).
    pub accounts: Arc<AccountService>,
    /// Live connections by session (logout closes them).
    pub live: Arc<LiveSessions>,
    /// `http.cors_allowed_origins`.
    pub cors: CorsOrigins,
    /// The bound realtime addresses the demo page points at.
    pub demo: DemoAddrs,
    /// What `GET /v1/webtransport` reports.
    pub webtransport: Arc<WebTransportInfo>,
}

/// Serves HTTP until `shutdown` (see `listener` for the bounds).
pub async fn serve(
    listener: TcpListener,
    state: HttpState,
    settings: ListenerSettings,
    shutdown: CancellationToken,
) {
    let metrics = state.metrics.clone();
    listener::serve(listener, router(state), settings, shutdown, metrics).await;
}

/// All routes.
pub fn router(state: HttpState) -> Router {
    ops::routes()
        .merge(auth::routes())
        .merge(webtransport::routes())
        .merge(demo::routes())
        .route_layer(axum::middleware::from_fn_with_state(
            state.metrics.clone(),
            count_request,
        ))
        .fallback(ops::not_found)
        .layer(axum::middleware::from_fn_with_state(
            state.cors.clone(),
            cors::layer,
        ))
        .with_state(state)
}

/// The request metric: one count per request a route answers.
async fn count_request(State(metrics): State<Arc<Metrics>>, req: Request, next: Next) -> Response {
    metrics.http_requests.fetch_add(1, Ordering::Relaxed);
    next.run(req).await
}
