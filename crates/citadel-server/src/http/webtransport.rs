//! `GET /v1/webtransport`: what a browser page needs to open a WebTransport
//! session without a trusted CA — the session URL and the SHA-256 of the
//! certificate in use, in hex (`value`) and standard base64 (`base64`), for
//! `serverCertificateHashes` (browsers accept it
//! only for certificates valid under 14 days, i.e. the development
//! certificate, which is renewed while the node runs).
//!
//! What it is not: authenticated, or a way to fetch the key. 404
//! `webtransport_disabled` when WebTransport is off.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Json, Response};
use axum::routing::get;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::json;

use crate::node::NodeShared;

/// The route.
pub fn routes() -> Router<Arc<NodeShared>> {
    Router::new().route("/v1/webtransport", get(webtransport))
}

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
            "base64": STANDARD.encode(tls.leaf_sha256),
        },
        "development_certificate": tls.dev_not_after.is_some(),
    }))
    .into_response()
}
