//! Relay benchmark on loopback: round-trip latency (p50/p99) of a relayed
//! position between two clients over WebSocket and over QUIC, and datagram
//! relay throughput over QUIC.
//!
//! Run: `cargo bench -p citadel-server --bench relay`. A plain binary
//! (harness = false), not criterion: the figures are percentiles of a
//! relayed round trip, which criterion does not report. What it is not: a
//! load test (two clients, one node, one process).

use std::time::{Duration, Instant};

use citadel_client::wire::protocol::KIND_PEER_POSITION;
use citadel_client::{QuicClient, ServerTrust, WsClient};
use citadel_server::config::Config;
use citadel_server::{NodeBuilder, RunningNode};

const ROUND_TRIPS: usize = 2_000;
const THROUGHPUT_WINDOW: Duration = Duration::from_secs(3);

async fn node() -> RunningNode {
    let mut config = Config::default();
    config.http.bind = "127.0.0.1:0".into();
    config.transport.websocket.bind = "127.0.0.1:0".into();
    config.transport.quic.enabled = true;
    config.transport.quic.bind = "127.0.0.1:0".into();
    config.transport.tls.data_dir = std::env::temp_dir()
        .join(format!("citadel-bench-{}", std::process::id()))
        .display()
        .to_string();
    config.transport.limits.messages_per_second = 10_000_000;
    config.transport.limits.message_burst = 10_000_000;
    NodeBuilder::new(config).start().await.expect("node")
}

enum C {
    Ws(WsClient),
    Quic(QuicClient),
}

impl C {
    async fn position(&mut self, x: f32, unreliable: bool) {
        match self {
            C::Ws(c) => c.send_position(x, 0.0).await.expect("send"),
            C::Quic(c) if unreliable => c.send_position_unreliable(x, 0.0).expect("send"),
            C::Quic(c) => c.send_position(x, 0.0).await.expect("send"),
        }
    }
    async fn peer_position(&mut self) {
        let env = match self {
            C::Ws(c) => c.wait_for_kind(KIND_PEER_POSITION).await,
            C::Quic(c) => c.wait_for_kind(KIND_PEER_POSITION).await,
        };
        env.expect("peer position");
    }
}

async fn pair(node: &RunningNode, quic: bool) -> (C, C) {
    let mut out = Vec::new();
    for _ in 0..2 {
        let c = if quic {
            let (c, _) = QuicClient::connect_as_guest(
                &node.quic_url().expect("quic"),
                ServerTrust::InsecureDev,
            )
            .await
            .expect("quic client");
            C::Quic(c)
        } else {
            let (c, _) = WsClient::connect_as_guest(&node.ws_url().expect("ws"))
                .await
                .expect("ws client");
            C::Ws(c)
        };
        out.push(c);
    }
    let b = out.pop().expect("b");
    let a = out.pop().expect("a");
    (a, b)
}

/// A sends a position, B receives the PEER_POSITION and sends one back, A
/// receives it: one relayed round trip. A lost datagram is retried after
/// 100 ms and that sample counts the wait.
async fn round_trips(a: &mut C, b: &mut C, unreliable: bool) -> Vec<Duration> {
    let mut samples = Vec::with_capacity(ROUND_TRIPS);
    for i in 0..ROUND_TRIPS {
        let start = Instant::now();
        loop {
            a.position(i as f32, unreliable).await;
            if tokio::time::timeout(Duration::from_millis(100), b.peer_position())
                .await
                .is_ok()
            {
                break;
            }
        }
        loop {
            b.position(i as f32, unreliable).await;
            if tokio::time::timeout(Duration::from_millis(100), a.peer_position())
                .await
                .is_ok()
            {
                break;
            }
        }
        samples.push(start.elapsed());
    }
    samples.sort();
    samples
}

fn pct(samples: &[Duration], p: f64) -> Duration {
    let i = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples.get(i).copied().unwrap_or_default()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let node = node().await;
    for (label, quic, unreliable) in [
        ("websocket", false, false),
        ("quic reliable (streams)", true, false),
        ("quic unreliable (datagrams)", true, true),
    ] {
        let (mut a, mut b) = pair(&node, quic).await;
        let _ = round_trips(&mut a, &mut b, unreliable).await; // warm-up
        let s = round_trips(&mut a, &mut b, unreliable).await;
        println!(
            "relayed position round trip, {label}: p50 {:?} p99 {:?} (n={ROUND_TRIPS})",
            pct(&s, 0.50),
            pct(&s, 0.99)
        );
    }
    // Datagram relay throughput: A sends unreliable positions as fast as the
    // connection accepts them; B counts what arrives.
    let (mut a, mut b) = pair(&node, true).await;
    let (C::Quic(sender), C::Quic(receiver)) = (&mut a, &mut b) else {
        return;
    };
    let deadline = Instant::now() + THROUGHPUT_WINDOW;
    let mut sent = 0u64;
    let mut received = 0u64;
    while Instant::now() < deadline {
        for _ in 0..64 {
            if sender.send_position_unreliable(sent as f32, 0.0).is_ok() {
                sent += 1;
            }
        }
        while let Ok(Ok(Some(_))) =
            tokio::time::timeout(Duration::from_micros(200), receiver.recv()).await
        {
            received += 1;
        }
    }
    while let Ok(Ok(Some(_))) =
        tokio::time::timeout(Duration::from_millis(200), receiver.recv()).await
    {
        received += 1;
    }
    let secs = THROUGHPUT_WINDOW.as_secs_f64();
    println!(
        "datagram relay throughput: sent {:.0}/s, delivered {:.0}/s ({:.1}% delivered)",
        sent as f64 / secs,
        received as f64 / secs,
        100.0 * received as f64 / sent.max(1) as f64
    );
    node.shutdown();
}
