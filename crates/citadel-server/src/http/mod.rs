//! The HTTP listener: operations endpoints (`ops`), the player API for
//! accounts and sessions (`auth`), the WebTransport discovery route
//! (`webtransport`), the browser demo (`demo`), CORS for `/v1` (`cors`),
//! with one error type mapped to the
//! `{code, message}` body in one place (`error`).
//!
//! The accept loop and the per-connection bounds (connection caps, header
//! read and keep-alive timeouts) are in `listener`.
//!
//! What it is not: no realtime traffic (that is the WebSocket, QUIC and
//! WebTransport listeners).
//! Every request counts toward `http_requests_total`.

mod auth;
mod cors;
mod demo;
mod error;
mod listener;
mod ops;
mod webtransport;

pub use error::ApiError;

use std::sync::Arc;

use axum::Router;
use tokio::net::TcpListener;

use crate::node::NodeShared;

/// Largest request body accepted by the player routes.
pub const MAX_BODY_BYTES: usize = 16 * 1024;

/// Serves HTTP until shutdown (see `listener` for the bounds).
pub async fn serve(listener: TcpListener, shared: Arc<NodeShared>) {
    let app = router(shared.clone());
    listener::serve(listener, shared, app).await;
}

/// All routes.
pub fn router(shared: Arc<NodeShared>) -> Router {
    ops::routes()
        .merge(auth::routes())
        .merge(webtransport::routes())
        .merge(demo::routes())
        .fallback(ops::not_found)
        .layer(axum::middleware::from_fn_with_state(
            shared.clone(),
            cors::layer,
        ))
        .with_state(shared)
}
