//! Operations endpoints: `/health` (liveness), `/status` (JSON snapshot of
//! the node) and `/metrics` (Prometheus text). No authentication; they never
//! expose host resources or secrets.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::get;
use serde_json::json;

use crate::node::NodeShared;

/// The operations routes.
pub fn routes() -> Router<Arc<NodeShared>> {
    Router::new()
        .route("/health", get(health))
        .route("/status", get(status))
        .route("/metrics", get(metrics))
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
        "backend": shared.accounts.store().backend(),
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
        "transform_sync": {
            "enabled": shared.hub.enabled(),
            "clients": shared.hub.client_count(),
            "actors": shared.hub.actor_count(),
        },
        "envelopes_in": m.envelopes_in.load(Ordering::Relaxed),
        "envelopes_out": m.envelopes_out.load(Ordering::Relaxed),
        "drops": m.drops_json(),
        "closes": m.closes_json(),
        "refused": m.refused_json(),
        "accept_errors": m.accept_errors_json(),
        "http_connections": m.http_connections_open.load(Ordering::Relaxed),
        "runtime_events": m.runtime_json(),
        "service_events": m.services_json(),
        "metrics": {
            "http_requests_total": m.http_requests.load(Ordering::Relaxed),
            "http_keep_alive_closes_total": m.http_keep_alive_closes.load(Ordering::Relaxed),
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

/// 404 with the standard error body.
pub async fn not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        Json(json!({"code": "not_found", "message": "no such route"})),
    )
        .into_response()
}
