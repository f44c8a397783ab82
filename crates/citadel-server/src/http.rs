//! The HTTP listener: `/health` (liveness), `/status` (JSON snapshot of the
//! node), `/metrics` (Prometheus text) and `/v1/webtransport` (session URL
//! and certificate hash for browsers).
//!
//! What it is not: the auth and account routes arrive with the accounts
//! service. Every response counts toward `http_requests_total`.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::get;
use serde_json::json;
use tokio::net::TcpListener;

use crate::node::NodeShared;

/// Serves HTTP until shutdown.
pub async fn serve(listener: TcpListener, shared: Arc<NodeShared>) {
    let shutdown = shared.shutdown.clone();
    let app = router(shared);
    if let Err(err) = axum::serve(listener, app)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
    {
        tracing::error!(error = %err, "HTTP server failed");
    }
}

/// The routes.
pub fn router(shared: Arc<NodeShared>) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/status", get(status))
        .route("/metrics", get(metrics))
        .route("/v1/webtransport", get(webtransport))
        .fallback(not_found)
        .with_state(shared)
}

async fn health(State(shared): State<Arc<NodeShared>>) -> Json<serde_json::Value> {
    shared.metrics.http_requests.fetch_add(1, Ordering::Relaxed);
    Json(json!({
        "status": "healthy",
        "node_id": shared.config.server.node_id,
        "version": env!("CARGO_PKG_VERSION"),
    }))
}

async fn status(State(shared): State<Arc<NodeShared>>) -> Json<serde_json::Value> {
    let m = &shared.metrics;
    m.http_requests.fetch_add(1, Ordering::Relaxed);
    let cfg = &shared.config.transport;
    let rooms = shared.realm.rooms();
    Json(json!({
        "status": "healthy",
        "node_id": shared.config.server.node_id,
        "version": env!("CARGO_PKG_VERSION"),
        "uptime_seconds": shared.started.elapsed().as_secs(),
        "transports": {
            "websocket": { "enabled": cfg.websocket.enabled, "bind": cfg.websocket.bind },
            "quic": { "enabled": cfg.quic.enabled, "bind": cfg.quic.bind_or(crate::config::QUIC_DEFAULT_BIND) },
            "webtransport": {
                "enabled": cfg.webtransport.enabled,
                "bind": cfg.webtransport.bind_or(crate::config::WEBTRANSPORT_DEFAULT_BIND),
                "path": cfg.webtransport.path,
            },
        },
        "connections": m.connections_open.load(Ordering::Relaxed),
        "participants": m.participants.load(Ordering::Relaxed),
        "default_dimension_participants": shared.realm.lobby_count(),
        "rooms": rooms,
        "envelopes_in": m.envelopes_in.load(Ordering::Relaxed),
        "envelopes_out": m.envelopes_out.load(Ordering::Relaxed),
        "drops": m.drops_json(),
        "closes": m.closes_json(),
        "metrics": {
            "http_requests_total": m.http_requests.load(Ordering::Relaxed),
            "connections_total": m.connections_total.load(Ordering::Relaxed),
            "rpc_calls_total": m.rpc_calls.load(Ordering::Relaxed),
            "rpc_errors_total": m.rpc_errors.load(Ordering::Relaxed),
            "handshakes": {
                "authenticated": m.auth_authenticated.load(Ordering::Relaxed),
                "guest": m.auth_guest.load(Ordering::Relaxed),
                "rejected": m.auth_rejected.load(Ordering::Relaxed),
            },
        },
    }))
}

async fn metrics(State(shared): State<Arc<NodeShared>>) -> Response {
    shared.metrics.http_requests.fetch_add(1, Ordering::Relaxed);
    let body = shared.metrics.render_prometheus(shared.realm.room_count());
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body).into_response()
}

/// What a browser page needs to open a WebTransport session without a
/// trusted CA: the URL and the SHA-256 of the certificate in use (for
/// `serverCertificateHashes`; only a development certificate qualifies).
async fn webtransport(State(shared): State<Arc<NodeShared>>) -> Response {
    shared.metrics.http_requests.fetch_add(1, Ordering::Relaxed);
    let (Some(addr), Some(tls)) = (shared.webtransport_addr, shared.tls()) else {
        return (
            StatusCode::NOT_FOUND,
            Json(
                json!({"code": "webtransport_disabled", "message": "WebTransport is not enabled"}),
            ),
        )
            .into_response();
    };
    let path = &shared.config.transport.webtransport.path;
    Json(json!({
        "url": format!("https://{addr}{path}"),
        "port": addr.port(),
        "path": path,
        "certificate_hash": {
            "algorithm": "sha-256",
            "value": tls.leaf_sha256_hex(),
        },
        "development_certificate": tls.dev_not_after.is_some(),
    }))
    .into_response()
}

async fn not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        Json(json!({"code": "not_found", "message": "no such route"})),
    )
        .into_response()
}
