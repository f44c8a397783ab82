//! Operations endpoints: `/health` (liveness), `/status` (JSON snapshot of
//! the node) and `/metrics` (Prometheus text). No authentication; they never
//! expose host resources or secrets.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::get;
use serde_json::json;

use super::HttpState;
use crate::actors::TransformHub;
use crate::config::{QUIC_DEFAULT_BIND, TransportConfig, WEBTRANSPORT_DEFAULT_BIND};
use crate::metrics::Metrics;
use crate::realm::Realm;

/// What the operations endpoints read: the node's identity, fixed at
/// start, and the live counters and registries.
pub struct OpsView {
    /// `server.node_id`.
    pub node_id: String,
    /// When the node started.
    pub started: Instant,
    /// The store backend (`sqlite`, `postgres`).
    pub backend: &'static str,
    /// The `transports` object of `/status` (from the config).
    pub transports: serde_json::Value,
    /// Rooms and the default dimension.
    pub realm: Arc<Realm>,
    /// Networked actors.
    pub hub: Arc<TransformHub>,
    /// Counters.
    pub metrics: Arc<Metrics>,
}

impl OpsView {
    /// The `transports` object of `/status` for `[transport]`.
    pub fn transports_json(cfg: &TransportConfig) -> serde_json::Value {
        json!({
            "websocket": { "enabled": cfg.websocket.enabled, "bind": cfg.websocket.bind },
            "quic": { "enabled": cfg.quic.enabled, "bind": cfg.quic.bind_or(QUIC_DEFAULT_BIND) },
            "webtransport": {
                "enabled": cfg.webtransport.enabled,
                "bind": cfg.webtransport.bind_or(WEBTRANSPORT_DEFAULT_BIND),
                "path": cfg.webtransport.path,
            },
        })
    }
}

/// The operations routes.
pub fn routes() -> Router<HttpState> {
    Router::new()
        .route("/health", get(health))
        .route("/status", get(status))
        .route("/metrics", get(metrics))
}

async fn health(State(ops): State<Arc<OpsView>>) -> Json<serde_json::Value> {
    Json(json!({
        "status": "healthy",
        "node_id": ops.node_id,
        "version": env!("CARGO_PKG_VERSION"),
    }))
}

async fn status(State(ops): State<Arc<OpsView>>) -> Json<serde_json::Value> {
    let m = &ops.metrics;
    let rooms = ops.realm.rooms();
    Json(json!({
        "status": "healthy",
        "node_id": ops.node_id,
        "version": env!("CARGO_PKG_VERSION"),
        "uptime_seconds": ops.started.elapsed().as_secs(),
        "backend": ops.backend,
        "transports": ops.transports,
        "connections": m.connections_open.load(Ordering::Relaxed),
        "participants": m.participants.load(Ordering::Relaxed),
        "default_dimension_participants": ops.realm.lobby_count(),
        "rooms": rooms,
        "transform_sync": {
            "enabled": ops.hub.enabled(),
            "clients": ops.hub.client_count(),
            "actors": ops.hub.actor_count(),
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

async fn metrics(State(ops): State<Arc<OpsView>>) -> Response {
    let body = ops.metrics.render_prometheus(ops.realm.room_count());
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
