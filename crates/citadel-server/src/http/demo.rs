//! `GET /demo`: the browser demo page (a canvas arena built on the
//! JavaScript SDK, docs/demo.md) and `GET /demo/demo.js`, its bundle. Both
//! are compiled into the binary (the bundle is built from `sdk/js` and
//! committed under `crates/citadel-server/demo/`), so `cargo run` needs no
//! Node. The page learns the WebSocket URL from a small JSON block the
//! route fills in (the request's host name plus the bound WebSocket port)
//! and the WebTransport URL and certificate hash from `/v1/webtransport`.
//!
//! What it is not: a static file server, or part of the `/v1` API.

use std::net::SocketAddr;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::json;

use super::HttpState;

/// The bound realtime addresses the page points at.
#[derive(Debug, Clone, Copy, Default)]
pub struct DemoAddrs {
    /// The WebSocket listener, if enabled.
    pub websocket: Option<SocketAddr>,
    /// The WebTransport endpoint, if enabled.
    pub webtransport: Option<SocketAddr>,
}

const PAGE: &str = include_str!("../../demo/index.html");
const BUNDLE: &str = include_str!("../../demo/demo.js");
/// Replaced in the page by the JSON configuration.
const CONFIG_MARKER: &str = "__CITADEL_DEMO_CONFIG__";
/// Longest Host header value used to build the WebSocket URL.
const MAX_HOST_BYTES: usize = 255;

/// The routes.
pub fn routes() -> Router<HttpState> {
    Router::new()
        .route("/demo", get(page))
        .route("/demo/", get(page))
        .route("/demo/demo.js", get(bundle))
}

async fn page(State(addrs): State<DemoAddrs>, headers: HeaderMap) -> Response {
    let host = host_name(&headers);
    let ws_url = addrs
        .websocket
        .map(|addr| format!("ws://{host}:{}/", addr.port()));
    let config = json!({
        "webSocketUrl": ws_url,
        "webTransportEnabled": addrs.webtransport.is_some(),
    });
    // `<` escaped so the JSON can never close the script element.
    let config = config.to_string().replace('<', "\\u003c");
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        PAGE.replace(CONFIG_MARKER, &config),
    )
        .into_response()
}

async fn bundle() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        BUNDLE,
    )
        .into_response()
}

/// The host name the browser used (without port), if it is a plain name
/// or address; `127.0.0.1` otherwise.
fn host_name(headers: &HeaderMap) -> String {
    let raw = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    let name = if let Some(rest) = raw.strip_prefix('[') {
        rest.split_once(']').map(|(ip, _)| format!("[{ip}]"))
    } else {
        raw.split(':').next().map(str::to_owned)
    };
    match name {
        Some(n)
            if !n.is_empty()
                && n.len() <= MAX_HOST_BYTES
                && n.bytes().all(|b| {
                    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']')
                }) =>
        {
            n
        }
        _ => "127.0.0.1".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(value: &str) -> String {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, value.parse().unwrap());
        host_name(&headers)
    }

    #[test]
    fn host_names_are_taken_without_port_and_odd_values_fall_back() {
        assert_eq!(host("127.0.0.1:7350"), "127.0.0.1");
        assert_eq!(host("localhost"), "localhost");
        assert_eq!(host("[::1]:7350"), "[::1]");
        assert_eq!(host("evil\"><script>"), "127.0.0.1");
        assert_eq!(host_name(&HeaderMap::new()), "127.0.0.1");
    }

    #[test]
    fn the_page_has_the_config_marker_and_loads_the_bundle() {
        assert!(PAGE.contains(CONFIG_MARKER));
        assert!(PAGE.contains("/demo/demo.js"));
        assert!(!BUNDLE.is_empty());
    }
}
