//! A real browser over WebTransport: headless Chromium (Debian `chromium`,
//! installed by `scripts/test`) loads `tests/browser/page.html` from a tiny
//! HTTP server run by this test, reads the URL and certificate hash the node
//! publishes at `/v1/webtransport`, connects with `serverCertificateHashes`,
//! completes a guest handshake, joins a room and exchanges POSITION
//! datagrams with a Rust QUIC client; the page POSTs its result back.

mod common;

use std::time::Duration;

use citadel_client::wire::protocol::{self, KIND_PEER_POSITION};
use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

const PAGE: &str = include_str!("browser/page.html");

fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|bin| {
            std::process::Command::new(bin)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
}

/// Serves `page` at `/` and forwards the body of `POST /result`.
async fn serve_page(listener: TcpListener, page: String, results: mpsc::Sender<String>) {
    loop {
        let Ok((mut stream, _)) = listener.accept().await else {
            return;
        };
        let page = page.clone();
        let results = results.clone();
        tokio::spawn(async move {
            let mut raw = Vec::new();
            let mut buf = [0u8; 8192];
            // Read the head, then the body by Content-Length.
            let (head_end, body_len) = loop {
                let Ok(n) = stream.read(&mut buf).await else {
                    return;
                };
                if n == 0 {
                    return;
                }
                raw.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&raw).into_owned();
                if let Some(end) = text.find("\r\n\r\n") {
                    let len = text[..end]
                        .lines()
                        .find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case("content-length")
                                .then(|| v.trim().parse::<usize>().ok())?
                        })
                        .unwrap_or(0);
                    break (end + 4, len);
                }
            };
            while raw.len() < head_end + body_len {
                let Ok(n) = stream.read(&mut buf).await else {
                    return;
                };
                if n == 0 {
                    break;
                }
                raw.extend_from_slice(&buf[..n]);
            }
            let head = String::from_utf8_lossy(&raw[..head_end]).into_owned();
            let (status, body) = if head.starts_with("GET / ") {
                ("200 OK", page)
            } else if head.starts_with("POST /result") {
                let body = String::from_utf8_lossy(&raw[head_end..]).into_owned();
                let _ = results.send(body).await;
                ("200 OK", String::new())
            } else {
                ("404 Not Found", String::new())
            };
            let response = format!(
                "HTTP/1.1 {status}\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(response.as_bytes()).await;
        });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chromium_handshakes_over_webtransport_and_exchanges_datagrams_with_a_quic_client() {
    let browser = chromium().expect("chromium is required (scripts/test installs it)");
    let node = start_default().await;
    let (code, info) = http_get(&node, "/v1/webtransport").await;
    assert_eq!(code, 200, "{info}");
    let mut peer = guest(&node, Transport::Quic).await;
    join(&mut peer, "web").await;

    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let page_url = format!("http://{}/", listener.local_addr().unwrap());
    let (tx, mut results) = mpsc::channel(1);
    tokio::spawn(serve_page(listener, PAGE.replace("__INFO__", &info), tx));
    let profile = std::env::temp_dir().join(format!("citadel-chromium-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&profile);
    let mut child = tokio::process::Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(&page_url)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("chromium starts");

    // The browser's position arrives as a datagram relayed to the QUIC peer;
    // the peer answers with datagrams until the page reports.
    let peer_side = async {
        let env = recv_kind_within(&mut peer, KIND_PEER_POSITION, Duration::from_secs(60)).await;
        assert_eq!(
            protocol::decode_position(&split(&env).1),
            Some((7.5, 8.5)),
            "the browser's datagram was relayed"
        );
        let datagrams = peer.quic().datagrams_received();
        for _ in 0..200 {
            let _ = peer.quic().send_position_unreliable(1.25, 2.25);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        datagrams
    };
    let report = async {
        tokio::time::timeout(Duration::from_secs(60), results.recv())
            .await
            .expect("the page reports in time")
            .expect("a result")
    };
    let (report, peer_datagrams) = tokio::select! {
        report = report => (report, None),
        datagrams = peer_side => (
            tokio::time::timeout(Duration::from_secs(20), results.recv())
                .await
                .expect("the page reports in time")
                .expect("a result"),
            Some(datagrams),
        ),
    };
    let _ = child.kill().await;
    let _ = std::fs::remove_dir_all(&profile);
    let result: serde_json::Value = serde_json::from_str(&report).expect("JSON result");
    assert_eq!(result["error"], serde_json::Value::Null, "{result}");
    assert_eq!(result["ready"], true, "{result}");
    assert_eq!(result["auth_status"], 1, "guest accepted: {result}");
    assert_eq!(result["joined"], true, "{result}");
    assert_eq!(
        result["peer_position"],
        serde_json::json!([1.25, 2.25]),
        "{result}"
    );
    assert_eq!(result["peer_path"], "datagram", "{result}");
    if let Some(datagrams) = peer_datagrams {
        assert!(datagrams >= 1, "the QUIC peer got a datagram");
    }
}

async fn recv_kind_within(
    client: &mut TestClient,
    kind: u16,
    wait: Duration,
) -> citadel_client::Envelope {
    tokio::time::timeout(wait, client.wait_for_kind(kind))
        .await
        .expect("envelope in time")
        .expect("wait ok")
}
