//! `GET /v1/webtransport`: what a browser page needs to open a WebTransport
//! session without a trusted CA — the session URL and the SHA-256 of the
//! certificate in use, in hex (`value`) and standard base64 (`base64`), for
//! `serverCertificateHashes` (browsers accept it
//! only for certificates valid under 14 days, i.e. the development
//! certificate, which is renewed while the node runs).
//!
//! What it is not: authenticated, or a way to fetch the key. 404
//! `webtransport_disabled` when WebTransport is off.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Json, Response};
use axum::routing::get;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::json;

use super::HttpState;
use crate::transport::tls::CurrentTls;

/// What the route reports.
#[derive(Debug)]
pub struct WebTransportInfo {
    /// The bound endpoint (`None`: WebTransport is off).
    pub addr: Option<SocketAddr>,
    /// `transport.webtransport.path`.
    pub path: String,
    /// The certificate in use (renewed while the node runs).
    pub tls: Arc<CurrentTls>,
}

/// The route.
pub fn routes() -> Router<HttpState> {
    Router::new().route("/v1/webtransport", get(webtransport))
}

async fn webtransport(State(info): State<Arc<WebTransportInfo>>) -> Response {
    let (Some(addr), Some(tls)) = (info.addr, info.tls.get()) else {
        return (
            StatusCode::NOT_FOUND,
            Json(
                json!({"code": "webtransport_disabled", "message": "WebTransport is not enabled"}),
            ),
        )
            .into_response();
    };
    let path = &info.path;
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
