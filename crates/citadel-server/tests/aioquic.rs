//! Interoperability with an independent QUIC implementation: Python
//! `aioquic` (installed by `scripts/test`) runs `tests/aioquic_client.py`
//! against the node: guest handshake, room join, a POSITION datagram relayed
//! to a Rust QUIC peer and one back, and the `echo` RPC.

mod common;

use std::time::Duration;

use citadel_client::wire::protocol::{self, KIND_PEER_POSITION};
use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aioquic_completes_the_handshake_relays_a_position_and_calls_an_rpc() {
    let present = std::process::Command::new("python3")
        .args(["-c", "import aioquic"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        present,
        "python3 with aioquic is required (scripts/test installs it)"
    );
    let node = start_default().await;
    let mut peer = guest(&node, Transport::Quic).await;
    join(&mut peer, "py").await;
    let addr = node.quic_addr.expect("quic");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/aioquic_client.py");
    let child = tokio::process::Command::new("python3")
        .arg(script)
        .arg(addr.ip().to_string())
        .arg(addr.port().to_string())
        .kill_on_drop(true)
        .output();
    let peer_side = async {
        let env = recv_kind(&mut peer, KIND_PEER_POSITION).await;
        assert_eq!(
            protocol::decode_position(&split(&env).1),
            Some((1.5, 2.5)),
            "python's datagram relayed"
        );
        // Answer until python has seen it (datagrams may be lost).
        for _ in 0..40 {
            let _ = peer.quic().send_position_unreliable(3.0, 4.0);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let (output, ()) = tokio::join!(
        async { tokio::time::timeout(Duration::from_secs(30), child).await },
        peer_side
    );
    let output = output.expect("python in time").expect("python runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "python failed: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON line");
    assert_eq!(result["auth_status"], 1, "guest");
    assert_eq!(result["peer_position"], serde_json::json!([3.0, 4.0]));
    assert_eq!(result["peer_position_path"], "datagram");
    assert_eq!(
        result["rpc"],
        serde_json::json!({"id": 7, "status": 0, "payload": "from-python"})
    );
}
