//! One client must not lock every player out. Over real sockets
//! on 127.0.0.1 (127.0.0.2 and 127.0.0.3 as other source addresses): the
//! HTTP header read and keep-alive timeouts, the HTTP caps per address and
//! in total, a saturated HTTP listener that still lets a new player log in
//! and connect, the realtime per-address cap on WebSocket, QUIC and
//! WebTransport, the body cap, the head size limit and body read timeout,
//! and the binary under a descriptor limit
//! too small for its caps (banner warning, EMFILE backoff, recovery).

mod common;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use citadel_client::{AuthOutcome, QuicClient, WsClient};
use citadel_server::config::Config;
use citadel_server::metrics::RefuseReason;
use common::{HttpResponse, STEP, eventually, node_trust, start, test_config};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

const SOURCE_A: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 1);
const SOURCE_B: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);
const SOURCE_C: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 3);

/// A partial request: the head never ends (no blank line).
const PARTIAL: &[u8] = b"GET /health HTTP/1.1\r\nHost: x\r\n";

/// A TCP connection to `to` from the local address `from`.
async fn connect_from(from: Ipv4Addr, to: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().expect("socket");
    socket
        .bind(SocketAddr::new(IpAddr::V4(from), 0))
        .expect("bind source");
    tokio::time::timeout(STEP, socket.connect(to))
        .await
        .expect("connect in time")
        .expect("connect")
}

/// Whether the server closes `stream` within `wait` (EOF or reset) without
/// answering anything.
async fn closed_within(stream: &mut TcpStream, wait: Duration) -> bool {
    let mut buf = [0u8; 512];
    match tokio::time::timeout(wait, stream.read(&mut buf)).await {
        Err(_) => false,
        Ok(Ok(0)) | Ok(Err(_)) => true,
        Ok(Ok(n)) => panic!(
            "expected a silent close, got {:?}",
            String::from_utf8_lossy(&buf[..n])
        ),
    }
}

/// Opens `count` connections from `from` that each sent a partial head.
async fn hold_partial(from: Ipv4Addr, to: SocketAddr, count: usize) -> Vec<TcpStream> {
    let mut held = Vec::with_capacity(count);
    for _ in 0..count {
        let mut stream = connect_from(from, to).await;
        stream.write_all(PARTIAL).await.expect("write partial");
        held.push(stream);
    }
    held
}

/// One request on `stream` (keep-alive unless `close`), read by its
/// Content-Length.
async fn request_on(
    stream: &mut TcpStream,
    method: &str,
    path: &str,
    body: &str,
    close: bool,
) -> HttpResponse {
    let connection = if close { "close" } else { "keep-alive" };
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: {connection}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.expect("write");
    read_response(stream).await
}

/// One response from `stream`, read by its Content-Length.
async fn read_response(stream: &mut TcpStream) -> HttpResponse {
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    let response = tokio::time::timeout(STEP, async {
        loop {
            let n = stream.read(&mut buf).await.expect("read");
            assert!(n > 0, "closed before a full response: {raw:?}");
            raw.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&raw).into_owned();
            if let Some((head, rest)) = text.split_once("\r\n\r\n") {
                let length = head
                    .lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.eq_ignore_ascii_case("content-length")
                            .then(|| v.trim().parse::<usize>().ok())?
                    })
                    .expect("content-length");
                if rest.len() >= length {
                    return HttpResponse {
                        status: head.split(' ').nth(1).unwrap().parse().unwrap(),
                        headers: head.to_owned(),
                        body: rest.to_owned(),
                    };
                }
            }
        }
    })
    .await;
    response.expect("response in time")
}

/// One request on a fresh connection from `from`.
async fn request_from(
    from: Ipv4Addr,
    to: SocketAddr,
    method: &str,
    path: &str,
    body: &str,
) -> HttpResponse {
    let mut stream = connect_from(from, to).await;
    request_on(&mut stream, method, path, body, true).await
}

fn refusals(node: &citadel_server::RunningNode, reason: RefuseReason) -> u64 {
    node.shared().metrics.refusals(reason)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partial_requests_close_at_the_header_timeout() {
    let mut config = test_config();
    config.http.header_read_timeout_ms = 300;
    config.http.keep_alive_timeout_ms = 60_000;
    let node = start(config).await;
    let addr = node.http_addr;
    let started = tokio::time::Instant::now();
    let mut held = hold_partial(SOURCE_A, addr, 5).await;
    // One that sends nothing at all is held to the same deadline.
    held.push(connect_from(SOURCE_A, addr).await);
    for stream in &mut held {
        assert!(closed_within(stream, STEP).await, "closed at the timeout");
    }
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "not closed before the timeout"
    );
    eventually("header timeouts counted", || {
        refusals(&node, RefuseReason::HttpHeaderTimeout) >= 6
    })
    .await;
    // A head sent in pieces within the timeout is answered.
    let mut slow = connect_from(SOURCE_A, addr).await;
    slow.write_all(PARTIAL).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    slow.write_all(b"Connection: close\r\n\r\n").await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(STEP, slow.read_to_end(&mut out))
        .await
        .expect("answered in time")
        .unwrap();
    assert!(
        out.starts_with(b"HTTP/1.1 200"),
        "{:?}",
        String::from_utf8_lossy(&out)
    );
    // On a keep-alive connection the header timer starts at the first byte
    // of the next request, not when the previous response left: an idle
    // gap longer than the header timeout is fine.
    let mut keep = connect_from(SOURCE_A, addr).await;
    let first = request_on(&mut keep, "GET", "/health", "", false).await;
    assert_eq!(first.status, 200);
    tokio::time::sleep(Duration::from_millis(700)).await;
    let second = request_on(&mut keep, "GET", "/health", "", false).await;
    assert_eq!(second.status, 200, "idle gap is not a header timeout");
    let text = common::http_get(&node, "/metrics").await.1;
    assert!(
        text.contains("citadel_connections_refused_total{reason=\"http_header_timeout\"}"),
        "{text}"
    );
    let status = common::status_json(&node).await;
    assert!(status["refused"]["http_header_timeout"].as_u64().unwrap() >= 6);
    node.shutdown();
    node.wait().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_keep_alive_connections_close_at_the_keep_alive_timeout() {
    let mut config = test_config();
    config.http.keep_alive_timeout_ms = 300;
    let node = start(config).await;
    let mut keep = connect_from(SOURCE_A, node.http_addr).await;
    let r = request_on(&mut keep, "GET", "/health", "", false).await;
    assert_eq!(r.status, 200);
    assert!(
        closed_within(&mut keep, STEP).await,
        "idle connection closed"
    );
    eventually("keep-alive close counted", || {
        node.shared()
            .metrics
            .http_keep_alive_closes
            .load(std::sync::atomic::Ordering::Relaxed)
            == 1
    })
    .await;
    assert_eq!(refusals(&node, RefuseReason::HttpHeaderTimeout), 0);
    let status = common::status_json(&node).await;
    assert_eq!(status["metrics"]["http_keep_alive_closes_total"], 1);
    node.shutdown();
    node.wait().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_past_its_cap_is_closed_while_another_is_served() {
    let mut config = test_config();
    config.http.max_connections_per_ip = 4;
    config.http.header_read_timeout_ms = 60_000;
    let node = start(config).await;
    let addr = node.http_addr;
    let held = hold_partial(SOURCE_A, addr, 4).await;
    eventually("four held", || {
        node.shared()
            .metrics
            .http_connections_open
            .load(std::sync::atomic::Ordering::Relaxed)
            == 4
    })
    .await;
    for _ in 0..3 {
        let mut extra = connect_from(SOURCE_A, addr).await;
        assert!(
            closed_within(&mut extra, STEP).await,
            "an extra connection from the capped address is closed at once"
        );
    }
    assert_eq!(refusals(&node, RefuseReason::HttpPerAddress), 3);
    let r = request_from(SOURCE_B, addr, "GET", "/health", "").await;
    assert_eq!(r.status, 200, "another address is served");
    let r = request_from(SOURCE_B, addr, "GET", "/status", "").await;
    assert_eq!(r.json()["refused"]["http_per_address"], 3);
    drop(held);
    let deadline = tokio::time::Instant::now() + STEP;
    loop {
        let mut again = connect_from(SOURCE_A, addr).await;
        let _ = again
            .write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await;
        let mut out = Vec::new();
        let _ = tokio::time::timeout(STEP, again.read_to_end(&mut out)).await;
        if out.starts_with(b"HTTP/1.1 200") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "address A served again"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    node.shutdown();
    node.wait().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_global_http_cap_holds() {
    let mut config = test_config();
    config.http.max_connections = 6;
    config.http.max_connections_per_ip = 0;
    config.http.header_read_timeout_ms = 60_000;
    let node = start(config).await;
    let addr = node.http_addr;
    let mut held = hold_partial(SOURCE_A, addr, 3).await;
    held.extend(hold_partial(SOURCE_B, addr, 3).await);
    let open = || {
        node.shared()
            .metrics
            .http_connections_open
            .load(std::sync::atomic::Ordering::Relaxed)
    };
    eventually("six held", || open() == 6).await;
    for from in [SOURCE_A, SOURCE_B, SOURCE_C] {
        let mut extra = connect_from(from, addr).await;
        assert!(closed_within(&mut extra, STEP).await, "closed at the cap");
    }
    assert_eq!(refusals(&node, RefuseReason::HttpMaxConnections), 3);
    assert_eq!(open(), 6, "the cap holds");
    // A freed slot serves the next client.
    held.pop();
    eventually("a slot is free", || open() == 5).await;
    let r = request_from(SOURCE_C, addr, "GET", "/metrics", "").await;
    assert_eq!(r.status, 200);
    assert!(
        r.body
            .contains("citadel_connections_refused_total{reason=\"http_max_connections\"} 3"),
        "{}",
        r.body
    );
    node.shutdown();
    node.wait().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saturating_address_does_not_lock_out_a_new_player() {
    let config = test_config();
    // Both ends of 300+ connections live in this process.
    let _ = citadel_server::fdlimit::prepare(&config);
    let per_ip = config.http.max_connections_per_ip;
    assert_eq!(per_ip, 256, "the default");
    let node = start(config).await;
    let addr = node.http_addr;
    let _held = hold_partial(SOURCE_A, addr, per_ip).await;
    let mut extra = hold_partial(SOURCE_A, addr, 20).await;
    for stream in &mut extra {
        assert!(closed_within(stream, STEP).await);
    }
    assert_eq!(refusals(&node, RefuseReason::HttpPerAddress), 20);
    // The new player, from another address: device login, then WebSocket.
    let login = request_from(
        SOURCE_B,
        addr,
        "POST",
        "/v1/auth/device",
        r#"{"id":"device-of-a-new-player","create":true,"username":"newcomer"}"#,
    )
    .await;
    assert_eq!(login.status, 201, "{login:?}");
    let token = login.json()["token"].as_str().unwrap().to_owned();
    let ws_addr = node.ws_addr.unwrap();
    let stream = connect_from(SOURCE_B, ws_addr).await;
    let mut client = WsClient::connect_over(stream, &node.ws_url().unwrap())
        .await
        .expect("websocket handshake");
    let outcome = tokio::time::timeout(STEP, client.authenticate(Some(&token)))
        .await
        .expect("auth in time")
        .expect("auth");
    assert!(
        matches!(outcome, AuthOutcome::Authenticated { .. }),
        "{outcome:?}"
    );
    node.shutdown();
    node.wait().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_declared_as_100_mib_is_answered_400_unread() {
    let node = start(test_config()).await;
    let mut stream = connect_from(SOURCE_A, node.http_addr).await;
    stream
        .write_all(
            b"POST /v1/auth/device HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
              Content-Length: 104857600\r\n\r\n{\"id\":",
        )
        .await
        .unwrap();
    let mut buf = [0u8; 1024];
    let n = tokio::time::timeout(STEP, stream.read(&mut buf))
        .await
        .expect("answered without the body")
        .unwrap();
    let text = String::from_utf8_lossy(&buf[..n]);
    assert!(text.starts_with("HTTP/1.1 400"), "{text}");
    assert!(text.contains("too large"), "{text}");
    node.shutdown();
    node.wait().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_request_head_is_refused_not_buffered() {
    let node = start(test_config()).await;
    let mut stream = connect_from(SOURCE_A, node.http_addr).await;
    let filler = "a".repeat(1024);
    let mut head = String::from("GET /health HTTP/1.1\r\nHost: x\r\n");
    for i in 0..64 {
        head.push_str(&format!("X-Filler-{i}: {filler}\r\n"));
    }
    head.push_str("\r\n");
    // The server may stop reading (and close) before the whole head is sent.
    let _ = stream.write_all(head.as_bytes()).await;
    let mut out = Vec::new();
    let _ = tokio::time::timeout(STEP, stream.read_to_end(&mut out))
        .await
        .expect("answered or closed in time");
    let text = String::from_utf8_lossy(&out);
    assert!(
        text.is_empty() || text.starts_with("HTTP/1.1 431"),
        "a 64 KiB head is not served: {text}"
    );
    let (code, _) = common::http_get(&node, "/health").await;
    assert_eq!(code, 200);
    node.shutdown();
    node.wait().await;
}

/// A `GET /health` head of about `kib` KiB (filler headers), closing.
fn padded_head(kib: usize) -> String {
    let filler = "a".repeat(1000);
    let mut head = String::from("GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n");
    for i in 0..kib {
        head.push_str(&format!("X-Filler-{i}: {filler}\r\n"));
    }
    head.push_str("\r\n");
    head
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_header_size_limit_is_configurable_and_counted() {
    let mut config = test_config();
    config.http.max_header_bytes = 8192;
    let node = start(config).await;
    // Under the limit: served.
    let mut stream = connect_from(SOURCE_A, node.http_addr).await;
    stream.write_all(padded_head(6).as_bytes()).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(STEP, stream.read_to_end(&mut out))
        .await
        .expect("answered in time")
        .unwrap();
    let text = String::from_utf8_lossy(&out);
    assert!(
        text.starts_with("HTTP/1.1 200"),
        "a 6 KiB head is served: {text}"
    );
    // Over it (but well under the 32 KiB default): refused and counted.
    let mut stream = connect_from(SOURCE_A, node.http_addr).await;
    let _ = stream.write_all(padded_head(12).as_bytes()).await;
    let mut out = Vec::new();
    let _ = tokio::time::timeout(STEP, stream.read_to_end(&mut out))
        .await
        .expect("answered or closed in time");
    let text = String::from_utf8_lossy(&out);
    assert!(
        text.is_empty() || text.starts_with("HTTP/1.1 431"),
        "a 12 KiB head is not served: {text}"
    );
    eventually("oversized head counted", || {
        refusals(&node, RefuseReason::HttpHeaderTooLarge) == 1
    })
    .await;
    let text = common::http_get(&node, "/metrics").await.1;
    assert!(
        text.contains("citadel_connections_refused_total{reason=\"http_header_too_large\"} 1"),
        "{text}"
    );
    let status = common::status_json(&node).await;
    assert_eq!(status["refused"]["http_header_too_large"], 1);
    node.shutdown();
    node.wait().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_trickles_in_closes_at_the_body_timeout() {
    let mut config = test_config();
    config.http.body_read_timeout_ms = 300;
    config.http.header_read_timeout_ms = 60_000;
    config.http.keep_alive_timeout_ms = 60_000;
    let node = start(config).await;
    let addr = node.http_addr;
    // Complete headers, then 63 bytes of a 64-byte body, one every 50 ms:
    // each byte is quick, the body never ends, so only the body read
    // timeout can close the connection.
    let stream = connect_from(SOURCE_A, addr).await;
    let (mut reader, mut writer) = stream.into_split();
    writer
        .write_all(
            b"POST /v1/auth/device HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
              Content-Length: 64\r\n\r\n",
        )
        .await
        .unwrap();
    let started = tokio::time::Instant::now();
    let trickle = tokio::spawn(async move {
        for _ in 0..63 {
            tokio::time::sleep(Duration::from_millis(50)).await;
            if writer.write_all(b" ").await.is_err() {
                return;
            }
        }
    });
    let mut buf = [0u8; 512];
    let read = tokio::time::timeout(STEP, reader.read(&mut buf))
        .await
        .expect("closed in time");
    match read {
        Ok(0) | Err(_) => {}
        Ok(n) => panic!(
            "expected a silent close, got {:?}",
            String::from_utf8_lossy(&buf[..n])
        ),
    }
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "not closed before the timeout"
    );
    trickle.abort();
    eventually("body timeout counted", || {
        refusals(&node, RefuseReason::HttpBodyTimeout) == 1
    })
    .await;
    // A body sent in two pieces within the timeout is answered, and the
    // connection then outlives the body timeout while idle.
    let mut keep = connect_from(SOURCE_A, addr).await;
    keep.write_all(
        b"POST /v1/auth/device HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
          Content-Length: 57\r\n\r\n{\"id\":\"trickle-1\",",
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    keep.write_all(b"\"create\":true,\"username\":\"trickle1\"}   ")
        .await
        .unwrap();
    let created = read_response(&mut keep).await;
    assert_eq!(created.status, 201, "{created:?}");
    tokio::time::sleep(Duration::from_millis(600)).await;
    let again = request_on(&mut keep, "GET", "/health", "", false).await;
    assert_eq!(again.status, 200, "an idle gap is not a body timeout");
    assert_eq!(refusals(&node, RefuseReason::HttpBodyTimeout), 1);
    let text = common::http_get(&node, "/metrics").await.1;
    assert!(
        text.contains("citadel_connections_refused_total{reason=\"http_body_timeout\"} 1"),
        "{text}"
    );
    let status = common::status_json(&node).await;
    assert_eq!(status["refused"]["http_body_timeout"], 1);
    node.shutdown();
    node.wait().await;
}

async fn ws_guest_from(node: &citadel_server::RunningNode, from: Ipv4Addr) -> Option<WsClient> {
    let stream = connect_from(from, node.ws_addr.unwrap()).await;
    let mut client = WsClient::connect_over(stream, &node.ws_url().unwrap())
        .await
        .ok()?;
    match tokio::time::timeout(STEP, client.authenticate(None)).await {
        Ok(Ok(AuthOutcome::Guest)) => Some(client),
        _ => None,
    }
}

/// A WebTransport session to the node from 127.0.0.1 (the certificate is
/// pinned by its hash, as a browser page does).
async fn webtransport_session(
    node: &citadel_server::RunningNode,
) -> Option<wtransport::Connection> {
    let hash = node.shared().tls().unwrap().leaf_sha256;
    let config = wtransport::ClientConfig::builder()
        .with_bind_address("127.0.0.1:0".parse().unwrap())
        .with_server_certificate_hashes([wtransport::tls::Sha256Digest::new(hash)])
        .build();
    let endpoint = wtransport::Endpoint::client(config).ok()?;
    tokio::time::timeout(STEP, endpoint.connect(node.webtransport_url().unwrap()))
        .await
        .ok()?
        .ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_realtime_per_address_cap_when_set() {
    let mut config = test_config();
    config.transport.limits.max_connections_per_ip = 2;
    let node = start(config).await;
    let first = ws_guest_from(&node, SOURCE_A).await.expect("first");
    // Under the cap a WebTransport session opens (the refusal below is the
    // cap, not this client).
    let session = webtransport_session(&node)
        .await
        .expect("second, over WebTransport");
    assert!(
        ws_guest_from(&node, SOURCE_A).await.is_none(),
        "a third WebSocket from the same address is refused"
    );
    assert_eq!(refusals(&node, RefuseReason::RealtimePerAddress), 1);
    // The budget is shared by every transport.
    let quic = tokio::time::timeout(
        STEP,
        QuicClient::connect(&node.quic_url().unwrap(), node_trust(&node)),
    )
    .await
    .expect("quic attempt ends in time");
    assert!(quic.is_err(), "QUIC from the same address is refused");
    assert!(
        webtransport_session(&node).await.is_none(),
        "WebTransport from the same address is refused"
    );
    assert_eq!(refusals(&node, RefuseReason::RealtimePerAddress), 3);
    let other = ws_guest_from(&node, SOURCE_B).await;
    assert!(other.is_some(), "another address connects");
    // A closed connection frees its share.
    drop(first);
    let deadline = tokio::time::Instant::now() + STEP;
    let again = loop {
        let attempt = tokio::time::timeout(
            STEP,
            QuicClient::connect(&node.quic_url().unwrap(), node_trust(&node)),
        )
        .await
        .expect("quic attempt ends in time");
        if let Ok(mut client) = attempt {
            let outcome = client.authenticate(None).await.expect("auth");
            assert_eq!(outcome, AuthOutcome::Guest);
            break client;
        }
        assert!(tokio::time::Instant::now() < deadline, "slot freed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let status = common::status_json(&node).await;
    assert!(status["refused"]["realtime_per_address"].as_u64().unwrap() >= 3);
    drop((session, again, other));
    node.shutdown();
    node.wait().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_realtime_cap_one_address_opens_many() {
    let node = start(test_config()).await;
    let mut clients = Vec::new();
    for _ in 0..20 {
        clients.push(ws_guest_from(&node, SOURCE_A).await.expect("connects"));
    }
    assert_eq!(refusals(&node, RefuseReason::RealtimePerAddress), 0);
    drop(clients);
    node.shutdown();
    node.wait().await;
}

/// The `citadel` binary under `ulimit -n {limit}`: its stdout (banner) and
/// HTTP address.
fn spawn_limited(
    limit: u32,
    config: &std::path::Path,
) -> (std::process::Child, String, SocketAddr) {
    let mut command = std::process::Command::new("sh");
    command
        .arg("-c")
        .arg(format!(
            "ulimit -n {limit} && exec \"$0\" serve --config \"$1\""
        ))
        .arg(env!("CARGO_BIN_EXE_citadel"))
        .arg(config)
        .env("CITADEL_LOG_LEVEL", "warn")
        .stderr(std::process::Stdio::piped());
    let (child, banner) = common::spawn_citadel(command);
    (child, banner.text, banner.http)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_descriptors_the_node_warns_backs_off_and_recovers() {
    let dir = std::path::PathBuf::from(common::test_data_dir());
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("citadel.toml");
    std::fs::write(
        &path,
        format!(
            "[http]\nbind = \"127.0.0.1:0\"\n[transport.websocket]\nbind = \"127.0.0.1:0\"\n\
             [database]\nurl = \"{}\"\n[runtime]\nscripts_dir = \"{}\"\n",
            common::temp_sqlite_url(),
            dir.display()
        ),
    )
    .unwrap();
    let (mut child, banner, http) = spawn_limited(96, &path);
    let defaults = citadel_server::fdlimit::FdBudget::of(&Config::default()).total();
    assert!(banner.contains("Files     limit 96"), "{banner}");
    assert!(
        banner.contains(&format!(
            "WARNING   too few file descriptors; raise to {defaults}"
        )),
        "{banner}"
    );
    // Fill the descriptor table with partial requests; the rest wait in the
    // listen backlog while the accept loop backs off.
    let mut held = Vec::new();
    for _ in 0..150 {
        let mut stream = connect_from(SOURCE_A, http).await;
        let _ = stream.write_all(PARTIAL).await;
        held.push(stream);
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    drop(held);
    // Recovery: once the attacker lets go, /health answers again.
    let deadline = tokio::time::Instant::now() + STEP;
    let metrics = loop {
        let mut stream = connect_from(SOURCE_B, http).await;
        let _ = stream
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await;
        let mut out = Vec::new();
        let _ = tokio::time::timeout(STEP, stream.read_to_end(&mut out)).await;
        let text = String::from_utf8_lossy(&out).into_owned();
        if text.starts_with("HTTP/1.1 200") {
            break text;
        }
        assert!(tokio::time::Instant::now() < deadline, "node recovers");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let errors: u64 = metrics
        .lines()
        .find_map(|l| {
            l.strip_prefix("citadel_accept_errors_total{reason=\"descriptors_exhausted\"} ")
        })
        .expect("accept error metric")
        .parse()
        .unwrap();
    // Backing off (10 ms doubling to 1 s) makes a handful of attempts in
    // two seconds; a spinning loop would make millions.
    assert!(
        (1..=100).contains(&errors),
        "descriptor errors counted: {errors}"
    );
    let _ = child.kill();
    let mut stderr = String::new();
    let _ = std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr);
    let _ = child.wait();
    assert!(stderr.contains("file descriptor limit 96"), "{stderr}");
    assert!(stderr.contains("out of file descriptors"), "{stderr}");
}
