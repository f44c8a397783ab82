//! Rules that only exist where there is a datagram path (QUIC), and the
//! mix of transports: datagram relay, mixed rooms, the unreliable-path
//! handshake rules, datagram size bound, server stream ordering, clients
//! that open one uni stream per envelope, `/v1/webtransport`, certificate
//! pinning.

mod common;

use std::time::Duration;

use citadel_client::wire::Envelope;
use citadel_client::wire::protocol::{
    self, AUTH_REASON_PROTOCOL, KIND_AUTH, KIND_AUTH_RESULT, KIND_PEER_POSITION, KIND_POSITION,
};
use citadel_client::{ClientError, QuicClient, ServerTrust};
use citadel_server::metrics::DropReason;
use common::*;

#[tokio::test]
async fn an_unreliable_position_is_a_datagram_to_quic_peers_and_reliable_to_websocket_peers() {
    let node = start_default().await;
    let mut sender = guest(&node, Transport::Quic).await;
    let mut quic_peer = guest(&node, Transport::Quic).await;
    let mut ws_peer = guest(&node, Transport::Ws).await;
    for c in [&mut sender, &mut quic_peer, &mut ws_peer] {
        join(c, "mixed").await;
    }
    // Datagrams may be lost: send until one arrives (loopback: the first).
    let mut got = None;
    for i in 0..50 {
        sender
            .quic()
            .send_position_unreliable(i as f32, 2.0)
            .unwrap();
        if let Ok(env) = tokio::time::timeout(
            Duration::from_millis(200),
            quic_peer.wait_for_kind(KIND_PEER_POSITION),
        )
        .await
        {
            got = Some(env.unwrap());
            break;
        }
    }
    let env = got.expect("a relayed datagram");
    assert!(protocol::decode_position(&split(&env).1).is_some());
    assert!(
        quic_peer.quic().datagrams_received() >= 1,
        "arrived as a datagram"
    );
    // The WebSocket peer gets it on its reliable socket.
    let ws_env = recv_kind(&mut ws_peer, KIND_PEER_POSITION).await;
    assert_eq!(split(&ws_env).0, split(&env).0, "same sender id");
    assert_silent(&mut sender, Duration::from_millis(200)).await;
}

#[tokio::test]
async fn a_mixed_room_relays_both_ways_between_websocket_and_quic() {
    let node = start_default().await;
    let mut ws = guest(&node, Transport::Ws).await;
    let mut quic = guest(&node, Transport::Quic).await;
    let room = join(&mut ws, "both").await;
    assert_eq!(join(&mut quic, "both").await.room_id, room.room_id);
    ws.send(&Envelope::new(100, b"from-ws".to_vec()))
        .await
        .unwrap();
    let env = recv_kind(&mut quic, 100).await;
    assert_eq!(split(&env).1, b"from-ws");
    quic.send(&Envelope::new(100, b"from-quic".to_vec()))
        .await
        .unwrap();
    let env = recv_kind(&mut ws, 100).await;
    assert_eq!(split(&env).1, b"from-quic");
    quic.send_position(3.0, 4.0).await.unwrap();
    let env = recv_kind(&mut ws, KIND_PEER_POSITION).await;
    assert_eq!(protocol::decode_position(&split(&env).1), Some((3.0, 4.0)));
    ws.send_position(5.0, 6.0).await.unwrap();
    let env = recv_kind(&mut quic, KIND_PEER_POSITION).await;
    assert_eq!(protocol::decode_position(&split(&env).1), Some((5.0, 6.0)));
}

#[tokio::test]
async fn pre_auth_datagrams_are_dropped_and_auth_on_a_datagram_is_a_protocol_rejection() {
    let node = start_default().await;
    let mut peer = guest(&node, Transport::Quic).await;
    let mut client = connect(&node, Transport::Quic).await;
    client
        .quic()
        .send_unreliable(&Envelope::new(KIND_POSITION, vec![0; 8]))
        .unwrap();
    client
        .quic()
        .send_unreliable(&Envelope::new(KIND_AUTH, Vec::new()))
        .unwrap();
    let metrics = node.shared().metrics.clone();
    for _ in 0..100 {
        if metrics.drops(DropReason::PreAuth) >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(metrics.drops(DropReason::PreAuth), 2);
    assert_silent(&mut peer, Duration::from_millis(100)).await;
    // The handshake still works on the reliable path...
    assert!(client.authenticate(None).await.unwrap().is_accepted());
    // ...and KIND_AUTH on a datagram after it is a PROTOCOL rejection.
    client
        .quic()
        .send_unreliable(&Envelope::new(KIND_AUTH, Vec::new()))
        .unwrap();
    let result = recv_kind(&mut client, KIND_AUTH_RESULT).await;
    assert_eq!(
        protocol::decode_auth_result(&result.body)
            .unwrap()
            .reason_class(),
        Some(AUTH_REASON_PROTOCOL)
    );
    let (code, reason) = closed(&mut client).await.expect("close code");
    assert_eq!((code, reason.as_str()), (1008, "duplicate KIND_AUTH"));
}

#[tokio::test]
async fn datagrams_over_the_maximum_size_are_not_sent_but_counted() {
    let node = start_default().await;
    let mut a = guest(&node, Transport::Quic).await;
    let mut b = guest(&node, Transport::Quic).await;
    let max = b.quic().max_datagram_size().expect("datagrams");
    // A reliable POSITION whose relayed datagram form exceeds the maximum.
    a.send(&Envelope::new(KIND_POSITION, vec![1; max + 100]))
        .await
        .unwrap();
    a.send(&Envelope::new(100, b"marker".to_vec()))
        .await
        .unwrap();
    let env = recv(&mut b).await;
    assert_eq!(env.kind, 100, "the oversized datagram was skipped");
    let metrics = node.shared().metrics.clone();
    assert_eq!(metrics.drops(DropReason::DatagramTooLarge), 1);
    // The client refuses an oversized datagram before sending.
    let own_max = a.quic().max_datagram_size().expect("datagrams");
    assert!(matches!(
        a.quic()
            .send_unreliable(&Envelope::new(KIND_POSITION, vec![0; own_max + 1])),
        Err(ClientError::Config(_))
    ));
}

fn unlimited(mut config: citadel_server::Config) -> citadel_server::Config {
    config.transport.limits.messages_per_second = 1_000_000;
    config.transport.limits.message_burst = 1_000_000;
    config
}

#[tokio::test]
async fn a_full_datagram_send_buffer_drops_the_oldest_and_counts() {
    let mut config = unlimited(test_config());
    config.transport.quic.datagram_send_buffer_bytes = 1_500; // one datagram
    let node = start(config).await;
    let mut a = guest(&node, Transport::Ws).await;
    let mut b = guest(&node, Transport::Quic).await;
    join(&mut a, "burst").await;
    join(&mut b, "burst").await;
    // 200 positions of ~1 KiB in one message: the writer hands them to the
    // connection faster than it can send them.
    let mut batch: Vec<Envelope> = (0..200)
        .map(|_| Envelope::new(KIND_POSITION, vec![5; 1024]))
        .collect();
    batch.push(Envelope::new(4002, Vec::new()));
    a.send_batch(&batch).await.unwrap();
    recv_kind(&mut b, 4002).await;
    let metrics = node.shared().metrics.clone();
    eventually("send-buffer drops counted", || {
        metrics.drops(DropReason::DatagramSendBufferFull) > 0
    })
    .await;
    assert!(metrics.drops(DropReason::DatagramSendBufferFull) <= 200);
    assert_eq!(metrics.drops(DropReason::UnreliableLaneFull), 0);
}

#[tokio::test]
async fn a_full_datagram_receive_buffer_drops_and_counts_when_the_connection_ends() {
    let mut config = unlimited(test_config());
    config.transport.quic.datagram_receive_buffer_bytes = 1_500; // one datagram
    let node = start(config).await;
    let mut a = guest(&node, Transport::Quic).await;
    let mut b = guest(&node, Transport::Ws).await;
    join(&mut a, "burst").await;
    join(&mut b, "burst").await;
    let sent = 300u64;
    for _ in 0..sent {
        a.quic()
            .send_unreliable(&Envelope::new(KIND_POSITION, vec![6; 1000]))
            .unwrap();
    }
    // Count what the WebSocket peer gets until the burst has drained (a
    // close sent into a still-flooded UDP socket can be lost, which leaves
    // the connection to the idle timeout).
    let mut relayed = 0u64;
    while let Ok(env) = tokio::time::timeout(Duration::from_millis(500), recv(&mut b)).await {
        if env.kind == KIND_PEER_POSITION {
            relayed += 1;
        }
    }
    a.close().await.unwrap();
    drop(a);
    let metrics = node.shared().metrics.clone();
    eventually("the sender's connection ended", || {
        metrics
            .connections_open
            .load(std::sync::atomic::Ordering::Relaxed)
            == 1
    })
    .await;
    let dropped = metrics.drops(DropReason::DatagramReceiveBufferFull);
    assert!(
        dropped > 0,
        "a 1,500-byte buffer cannot hold a burst of {sent}"
    );
    // Every datagram that reached the connection was either relayed or
    // counted (loopback may still lose some before the connection).
    assert!(
        relayed + dropped <= sent,
        "{relayed} relayed + {dropped} dropped"
    );
}

#[tokio::test]
async fn reliable_frames_reach_a_quic_client_in_send_order() {
    let mut config = test_config();
    config.transport.limits.messages_per_second = 1_000_000;
    config.transport.limits.message_burst = 1_000_000;
    let node = start(config).await;
    let mut a = guest(&node, Transport::Ws).await;
    let mut b = guest(&node, Transport::Quic).await;
    let n = 2_000u32;
    for chunk in (0..n).collect::<Vec<_>>().chunks(100) {
        let batch: Vec<Envelope> = chunk
            .iter()
            .map(|i| Envelope::new(100, i.to_be_bytes().to_vec()))
            .collect();
        a.send_batch(&batch).await.unwrap();
        for i in chunk {
            let env = recv_kind(&mut b, 100).await;
            assert_eq!(split(&env).1, i.to_be_bytes().to_vec(), "frame {i}");
        }
    }
}

#[tokio::test]
async fn a_client_that_sends_one_uni_stream_per_envelope_keeps_its_order() {
    let node = start_default().await;
    let mut peer = guest(&node, Transport::Ws).await;
    let mut client = connect(&node, Transport::Quic).await;
    let quic = client.quic();
    quic.send_raw_uni_stream(&Envelope::new(KIND_AUTH, Vec::new()).encode_framed())
        .await
        .unwrap();
    for i in 0..50u32 {
        quic.send_raw_uni_stream(&Envelope::new(100, i.to_be_bytes().to_vec()).encode_framed())
            .await
            .unwrap();
    }
    let result = recv_kind(&mut client, KIND_AUTH_RESULT).await;
    assert!(
        protocol::decode_auth_result(&result.body)
            .unwrap()
            .is_guest()
    );
    for i in 0..50u32 {
        let env = recv_kind(&mut peer, 100).await;
        assert_eq!(split(&env).1, i.to_be_bytes().to_vec());
    }
}

#[tokio::test]
async fn a_partial_frame_at_the_end_of_a_stream_or_an_oversized_frame_closes() {
    let mut config = test_config();
    config.transport.limits.max_inbound_frame_bytes = 4096;
    let node = start(config).await;
    let mut client = guest(&node, Transport::Quic).await;
    client.send_raw(vec![0, 0, 0x10, 0x01]).await.unwrap();
    let (code, _) = closed(&mut client).await.expect("close code");
    assert_eq!(code, 1002);
    let mut client = guest(&node, Transport::Quic).await;
    client
        .quic()
        .send_raw_uni_stream(&[0, 0, 0, 9, 0, 100])
        .await
        .unwrap();
    let (code, _) = closed(&mut client).await.expect("close code");
    assert_eq!(code, 1002);
}

#[tokio::test]
async fn the_webtransport_endpoint_reports_url_and_certificate_hash() {
    let node = start_default().await;
    let (code, body) = http_get(&node, "/v1/webtransport").await;
    assert_eq!(code, 200, "{body}");
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(json["url"].as_str(), node.webtransport_url().as_deref());
    let tls = node.shared().tls().unwrap();
    assert_eq!(json["certificate_hash"]["algorithm"], "sha-256");
    assert_eq!(json["certificate_hash"]["value"], tls.leaf_sha256_hex());
    assert_eq!(json["development_certificate"], true);
    // Without WebTransport the route says so.
    let mut config = test_config();
    config.transport.webtransport.enabled = false;
    let node = start(config).await;
    let (code, _) = http_get(&node, "/v1/webtransport").await;
    assert_eq!(code, 404);
}

#[tokio::test]
async fn a_pinned_client_refuses_another_certificate_and_the_dev_certificate_is_reused() {
    let node_a = start_default().await;
    let node_b = start_default().await;
    let wrong = node_trust(&node_b);
    let err = QuicClient::connect(&node_a.quic_url().unwrap(), wrong)
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::Connect(_)), "{err:?}");
    let (_, outcome) =
        QuicClient::connect_as_guest(&node_a.quic_url().unwrap(), ServerTrust::InsecureDev)
            .await
            .unwrap();
    assert!(outcome.is_accepted());
    // A restart on the same data directory presents the same certificate.
    let dir = node_a.shared().config.transport.tls.data_dir.clone();
    let mut config = test_config();
    config.transport.tls.data_dir = dir;
    let again = start(config).await;
    assert_eq!(
        again.shared().tls().unwrap().leaf_sha256,
        node_a.shared().tls().unwrap().leaf_sha256
    );
}

#[tokio::test]
async fn a_development_certificate_near_expiry_is_renewed_while_running() {
    let node = start_default().await;
    let old = node.shared().tls().unwrap();
    let soon = std::time::SystemTime::now() + Duration::from_secs(11 * 24 * 3600);
    assert!(
        !node
            .renew_certificate_if_due(std::time::SystemTime::now())
            .unwrap()
    );
    assert!(node.renew_certificate_if_due(soon).unwrap());
    let new = node.shared().tls().unwrap();
    assert_ne!(new.leaf_sha256, old.leaf_sha256);
    let (_, body) = http_get(&node, "/v1/webtransport").await;
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(json["certificate_hash"]["value"], new.leaf_sha256_hex());
    // New handshakes present the new certificate.
    let addr = node.quic_url().unwrap();
    let pinned_new = ServerTrust::Pinned(new.chain.clone());
    let (_, outcome) = QuicClient::connect_as_guest(&addr, pinned_new)
        .await
        .unwrap();
    assert!(outcome.is_accepted());
    let pinned_old = ServerTrust::Pinned(old.chain.clone());
    assert!(QuicClient::connect(&addr, pinned_old).await.is_err());
}
