//! What browser clients need from the node: CORS on the `/v1`
//! API (default any origin, an explicit list, preflights), the base64
//! certificate hash of `/v1/webtransport`, the `/demo` page and its bundle,
//! and inbound datagrams counted in `envelopes_in`. The SDK's own tests
//! (Node and headless Chromium) live in `sdk/js` and run from
//! `scripts/test-js`.

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use base64::Engine;
use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A raw HTTP/1.1 request with extra header lines; returns (status, head, body).
async fn request(
    node: &citadel_server::RunningNode,
    method: &str,
    path: &str,
    headers: &[&str],
) -> (u16, String, String) {
    let mut stream = tokio::net::TcpStream::connect(node.http_addr)
        .await
        .expect("http connect");
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
    for h in headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str("Content-Length: 0\r\n\r\n");
    stream.write_all(req.as_bytes()).await.expect("write");
    let mut raw = Vec::new();
    tokio::time::timeout(STEP, stream.read_to_end(&mut raw))
        .await
        .expect("http in time")
        .expect("read");
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or_default();
    (status, head.to_ascii_lowercase(), body.to_owned())
}

#[tokio::test]
async fn the_v1_api_answers_cors_for_any_origin_by_default() {
    let node = start_default().await;
    let origin = "Origin: https://game.example";
    let (code, head, _) = request(&node, "GET", "/v1/webtransport", &[origin]).await;
    assert_eq!(code, 200);
    assert!(head.contains("access-control-allow-origin: *"), "{head}");
    assert!(
        head.contains("access-control-expose-headers: retry-after"),
        "{head}"
    );
    assert!(!head.contains("access-control-allow-credentials"), "{head}");
    // Errors carry the header too, so a page can read the {code, message} body.
    let (code, head, body) = request(&node, "GET", "/v1/account", &[origin]).await;
    assert_eq!(code, 401, "{body}");
    assert!(head.contains("access-control-allow-origin: *"), "{head}");
    // A preflight for a JSON POST with a bearer token.
    let (code, head, _) = request(
        &node,
        "OPTIONS",
        "/v1/auth/device",
        &[
            origin,
            "Access-Control-Request-Method: POST",
            "Access-Control-Request-Headers: authorization, content-type",
        ],
    )
    .await;
    assert_eq!(code, 204);
    assert!(
        head.contains("access-control-allow-methods: get, post, patch, options"),
        "{head}"
    );
    assert!(
        head.contains("access-control-allow-headers: authorization, content-type"),
        "{head}"
    );
    // Operations endpoints are not part of the API.
    let (_, head, _) = request(&node, "GET", "/status", &[origin]).await;
    assert!(!head.contains("access-control-allow-origin"), "{head}");
}

#[tokio::test]
async fn an_origin_list_admits_only_those_origins_and_an_empty_list_none() {
    let mut config = test_config();
    config.http.cors_allowed_origins = vec!["https://game.example".into()];
    let node = start(config).await;
    let (_, head, _) = request(
        &node,
        "GET",
        "/v1/webtransport",
        &["Origin: https://game.example"],
    )
    .await;
    assert!(
        head.contains("access-control-allow-origin: https://game.example"),
        "{head}"
    );
    assert!(head.contains("vary: origin"), "{head}");
    let (_, head, _) = request(
        &node,
        "GET",
        "/v1/webtransport",
        &["Origin: https://evil.example"],
    )
    .await;
    assert!(!head.contains("access-control-allow-origin"), "{head}");

    let mut config = test_config();
    config.http.cors_allowed_origins = vec![];
    let node = start(config).await;
    let (_, head, _) = request(
        &node,
        "GET",
        "/v1/webtransport",
        &["Origin: https://game.example"],
    )
    .await;
    assert!(!head.contains("access-control-allow-origin"), "{head}");
}

#[tokio::test]
async fn the_webtransport_route_also_publishes_the_hash_in_base64() {
    let node = start_default().await;
    let (code, body) = http_get(&node, "/v1/webtransport").await;
    assert_eq!(code, 200, "{body}");
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    let b64 = json["certificate_hash"]["base64"]
        .as_str()
        .expect("base64 field");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .expect("standard base64");
    assert_eq!(bytes, node.shared().tls().unwrap().leaf_sha256);
}

#[tokio::test]
async fn the_demo_page_and_bundle_are_served_with_the_websocket_url() {
    let node = start_default().await;
    let (code, head, body) = request(&node, "GET", "/demo", &[]).await;
    assert_eq!(code, 200);
    assert!(head.contains("content-type: text/html"), "{head}");
    let ws = node.ws_addr.expect("websocket on");
    assert!(
        body.contains(&format!(
            "\"webSocketUrl\":\"ws://127.0.0.1:{}/\"",
            ws.port()
        )),
        "{body}"
    );
    assert!(body.contains("\"webTransportEnabled\":true"), "{body}");
    assert!(!body.contains("__CITADEL_DEMO_CONFIG__"));
    let (code, head, body) = request(&node, "GET", "/demo/demo.js", &[]).await;
    assert_eq!(code, 200);
    assert!(head.contains("content-type: text/javascript"), "{head}");
    assert!(body.contains("citadelDemo"));
}

#[tokio::test]
async fn inbound_datagrams_count_in_envelopes_in() {
    let node = start_default().await;
    let mut client = guest(&node, Transport::Quic).await;
    join(&mut client, "datagrams").await;
    let metrics = node.shared().metrics.clone();
    let before = metrics.envelopes_in.load(Ordering::Relaxed);
    for i in 0..20 {
        client
            .quic()
            .send_position_unreliable(i as f32, 0.0)
            .unwrap();
    }
    // Loopback datagrams arrive; wait (bounded) until they are counted.
    let mut after = before;
    for _ in 0..100 {
        after = metrics.envelopes_in.load(Ordering::Relaxed);
        if after >= before + 20 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(after > before, "datagrams counted: {before} -> {after}");
}
