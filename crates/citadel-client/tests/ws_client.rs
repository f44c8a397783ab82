//! `WsClient` against a scripted WebSocket server started inside each test
//! (`tokio-tungstenite::accept_async` on 127.0.0.1:0).
//!
//! What it is: byte-exact checks of what the client writes (handshake,
//! RPC, room and position frames, batching) and of how it reads what a
//! server writes (coalesced and split frames, correlation, buffering, close,
//! pings, framing errors). What it is not: a test of the real Citadel server.
//!
//! Call order in every test: `serve(script)` spawns the server script and
//! returns the URL and its join handle; the test drives the client; then
//! `finish(handle)` returns what the script recorded (its panics fail the
//! test). Every await is bounded by `within` so a bug cannot hang the run.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::future::Future;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use citadel_client::wire::WireBody;
use citadel_client::wire::protocol::{
    AUTH_REASON_AUTH_REQUIRED, KIND_AUTH_RESULT, KIND_PEER_POSITION, KIND_POSITION,
    KIND_RPC_RESPONSE, MAX_FRAME_BODY_BYTES, PeerPosition, RPC_STATUS_ERROR, RPC_STATUS_OK,
    RpcRequest, encode_auth_authenticated, encode_auth_guest, encode_position, encode_rpc_response,
    tag_with_sender,
};
use citadel_client::wire::room::RoomJoined;
use citadel_client::{
    AuthOutcome, ClientError, ClientEvent, Envelope, MAX_BUFFERED_ENVELOPES, WsClient,
};
use futures_util::{SinkExt, StreamExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::{WebSocketStream, accept_async};

type ServerWs = WebSocketStream<TcpStream>;

const LIMIT: Duration = Duration::from_secs(10);

async fn within<F: Future>(fut: F) -> F::Output {
    tokio::time::timeout(LIMIT, fut).await.expect("timed out")
}

/// Starts a one-connection server running `script`; returns its URL.
async fn serve<T, F, Fut>(script: F) -> (String, JoinHandle<T>)
where
    T: Send + 'static,
    F: FnOnce(ServerWs) -> Fut + Send + 'static,
    Fut: Future<Output = T> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}/", listener.local_addr().unwrap());
    let handle = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let ws = accept_async(tcp).await.unwrap();
        script(ws).await
    });
    (url, handle)
}

async fn finish<T>(handle: JoinHandle<T>) -> T {
    within(handle).await.expect("server script panicked")
}

async fn next_msg(ws: &mut ServerWs) -> Message {
    ws.next()
        .await
        .expect("client went away")
        .expect("websocket error")
}

async fn next_binary(ws: &mut ServerWs) -> Bytes {
    match next_msg(ws).await {
        Message::Binary(bytes) => bytes,
        other => panic!("expected a binary message, got {other:?}"),
    }
}

/// Several envelopes framed back to back (one message's worth).
fn frames(envelopes: &[Envelope]) -> Bytes {
    let mut out = BytesMut::new();
    for envelope in envelopes {
        envelope.encode_framed_into(&mut out);
    }
    out.freeze()
}

async fn send_frames(ws: &mut ServerWs, envelopes: &[Envelope]) {
    ws.send(Message::Binary(frames(envelopes))).await.unwrap();
}

/// Reads until the client's close completes; returns every message seen.
async fn until_closed(ws: &mut ServerWs) -> Vec<Message> {
    let mut seen = Vec::new();
    while let Some(Ok(msg)) = ws.next().await {
        seen.push(msg);
    }
    seen
}

fn auth_result(body: Vec<u8>) -> Envelope {
    Envelope::new(KIND_AUTH_RESULT, body)
}

fn rpc_response(request_id: u64, status: u8, payload: &[u8]) -> Envelope {
    Envelope::new(
        KIND_RPC_RESPONSE,
        encode_rpc_response(request_id, status, payload),
    )
}

fn decode_single(bytes: &Bytes) -> Envelope {
    let mut buf = BytesMut::from(&bytes[..]);
    let envelope = citadel_client::wire::decode_framed(&mut buf)
        .unwrap()
        .expect("a complete frame");
    assert!(buf.is_empty(), "one frame per message expected");
    envelope
}

#[tokio::test]
async fn token_handshake_sends_the_token_first_and_maps_authenticated() {
    let (url, server) = serve(|mut ws| async move {
        let first = next_binary(&mut ws).await;
        send_frames(
            &mut ws,
            &[auth_result(encode_auth_authenticated("user-42"))],
        )
        .await;
        until_closed(&mut ws).await;
        first
    })
    .await;
    let (mut client, outcome) = within(WsClient::connect_with_token(&url, "tok-abc"))
        .await
        .unwrap();
    assert_eq!(
        outcome,
        AuthOutcome::Authenticated {
            user_id: "user-42".into()
        }
    );
    assert!(outcome.is_accepted());
    within(client.close()).await.unwrap();
    let first = finish(server).await;
    assert_eq!(
        &first[..],
        &[0, 0, 0, 9, 0, 5, b't', b'o', b'k', b'-', b'a', b'b', b'c']
    );
}

#[tokio::test]
async fn guest_handshake_sends_an_empty_body_and_maps_guest() {
    let (url, server) = serve(|mut ws| async move {
        let first = next_binary(&mut ws).await;
        send_frames(&mut ws, &[auth_result(encode_auth_guest())]).await;
        until_closed(&mut ws).await;
        first
    })
    .await;
    let (mut client, outcome) = within(WsClient::connect_as_guest(&url)).await.unwrap();
    assert_eq!(outcome, AuthOutcome::Guest);
    assert!(outcome.is_accepted());
    within(client.close()).await.unwrap();
    assert_eq!(&finish(server).await[..], &[0, 0, 0, 2, 0, 5]);
}

#[tokio::test]
async fn rejected_handshake_maps_the_reason_and_reports_the_close() {
    let (url, server) = serve(|mut ws| async move {
        let first = next_binary(&mut ws).await;
        send_frames(&mut ws, &[auth_result(vec![2, AUTH_REASON_AUTH_REQUIRED])]).await;
        let frame = CloseFrame {
            code: CloseCode::Policy,
            reason: "auth".into(),
        };
        ws.send(Message::Close(Some(frame))).await.unwrap();
        until_closed(&mut ws).await;
        first
    })
    .await;
    let mut client = within(WsClient::connect(&url)).await.unwrap();
    let outcome = within(client.authenticate(None)).await.unwrap();
    assert_eq!(
        outcome,
        AuthOutcome::Rejected {
            reason_class: AUTH_REASON_AUTH_REQUIRED
        }
    );
    assert!(!outcome.is_accepted());
    assert!(within(client.recv()).await.unwrap().is_none());
    assert_eq!(client.close_reason(), Some((1008, "auth".to_string())));
    assert_eq!(&finish(server).await[..], &[0, 0, 0, 2, 0, 5]);
}

#[tokio::test]
async fn malformed_auth_result_is_a_decode_error() {
    let (url, server) = serve(|mut ws| async move {
        next_binary(&mut ws).await;
        send_frames(&mut ws, &[auth_result(vec![9])]).await;
        until_closed(&mut ws).await;
    })
    .await;
    let err = within(WsClient::connect_as_guest(&url)).await.unwrap_err();
    assert!(matches!(err, ClientError::Decode(_)), "{err:?}");
    finish(server).await;
}

#[tokio::test]
async fn one_message_with_three_frames_yields_three_envelopes() {
    let sent = vec![
        Envelope::new(100, vec![1, 2, 3]),
        Envelope::new(
            KIND_PEER_POSITION,
            tag_with_sender(7, &encode_position(1.5, -2.0)),
        ),
        Envelope::new(101, Vec::new()),
    ];
    let script_frames = sent.clone();
    let (url, server) = serve(|mut ws| async move {
        send_frames(&mut ws, &script_frames).await;
        until_closed(&mut ws).await;
    })
    .await;
    let mut client = within(WsClient::connect(&url)).await.unwrap();
    for expected in &sent {
        let got = within(client.recv()).await.unwrap().expect("an envelope");
        assert_eq!(&got, expected);
    }
    within(client.close()).await.unwrap();
    assert!(within(client.recv()).await.unwrap().is_none());
    finish(server).await;
}

#[tokio::test]
async fn a_frame_split_across_messages_is_reassembled() {
    let first = Envelope::new(100, b"hello world".to_vec());
    let second = Envelope::new(102, vec![9; 4]);
    let bytes = frames(&[first.clone(), second.clone()]);
    let (url, server) = serve(|mut ws| async move {
        // Cut inside the length prefix, then inside the body.
        for part in [bytes.slice(..3), bytes.slice(3..10), bytes.slice(10..)] {
            ws.send(Message::Binary(part)).await.unwrap();
        }
        until_closed(&mut ws).await;
    })
    .await;
    let mut client = within(WsClient::connect(&url)).await.unwrap();
    assert_eq!(within(client.recv()).await.unwrap(), Some(first));
    assert_eq!(within(client.recv()).await.unwrap(), Some(second));
    within(client.close()).await.unwrap();
    finish(server).await;
}

#[tokio::test]
async fn call_rpc_correlates_by_id_and_keeps_everything_else_in_order() {
    let peer = Envelope::new(
        KIND_PEER_POSITION,
        tag_with_sender(7, &encode_position(3.0, 4.0)),
    );
    let stale = rpc_response(99, RPC_STATUS_OK, b"stale");
    let (peer_s, stale_s) = (peer.clone(), stale.clone());
    let (url, server) = serve(|mut ws| async move {
        let first = next_binary(&mut ws).await;
        let request = RpcRequest::decode(&decode_single(&first).body).unwrap();
        send_frames(&mut ws, &[peer_s]).await;
        send_frames(&mut ws, &[stale_s]).await;
        send_frames(
            &mut ws,
            &[rpc_response(request.request_id, RPC_STATUS_OK, b"pong")],
        )
        .await;
        let second = next_binary(&mut ws).await;
        let request2 = RpcRequest::decode(&decode_single(&second).body).unwrap();
        send_frames(
            &mut ws,
            &[rpc_response(request2.request_id, RPC_STATUS_OK, b"again")],
        )
        .await;
        until_closed(&mut ws).await;
        (first, request2)
    })
    .await;
    let mut client = within(WsClient::connect(&url)).await.unwrap();
    let reply = within(client.call_rpc("echo", b"hi")).await.unwrap();
    assert_eq!(&reply[..], b"pong");
    assert_eq!(within(client.recv()).await.unwrap(), Some(peer));
    assert_eq!(within(client.recv()).await.unwrap(), Some(stale));
    let reply = within(client.call_rpc("more", b"")).await.unwrap();
    assert_eq!(&reply[..], b"again");
    within(client.close()).await.unwrap();

    let (first, request2) = finish(server).await;
    assert_eq!(
        &first[..],
        &[
            0, 0, 0, 18, 0, 3, // length, kind
            0, 0, 0, 0, 0, 0, 0, 1, // request id 1
            0, 4, b'e', b'c', b'h', b'o', // method
            b'h', b'i', // payload
        ]
    );
    assert_eq!(request2.request_id, 2);
    assert_eq!(request2.method, "more");
    assert!(request2.payload.is_empty());
}

#[tokio::test]
async fn rpc_error_status_becomes_client_error_rpc() {
    let (url, server) = serve(|mut ws| async move {
        let first = next_binary(&mut ws).await;
        let request = RpcRequest::decode(&decode_single(&first).body).unwrap();
        send_frames(
            &mut ws,
            &[rpc_response(
                request.request_id,
                RPC_STATUS_ERROR,
                b"unknown method",
            )],
        )
        .await;
        until_closed(&mut ws).await;
    })
    .await;
    let mut client = within(WsClient::connect(&url)).await.unwrap();
    let err = within(client.call_rpc("nope", b"")).await.unwrap_err();
    match err {
        ClientError::Rpc {
            request_id,
            message,
        } => {
            assert_eq!(request_id, 1);
            assert_eq!(message, "unknown method");
        }
        other => panic!("expected ClientError::Rpc, got {other:?}"),
    }
    within(client.close()).await.unwrap();
    finish(server).await;
}

#[tokio::test]
async fn clean_server_close_ends_recv_and_reports_code_and_reason() {
    let last = Envelope::new(100, vec![7]);
    let last_s = last.clone();
    let (url, server) = serve(|mut ws| async move {
        send_frames(&mut ws, &[last_s]).await;
        let frame = CloseFrame {
            code: CloseCode::Library(4001),
            reason: "kicked".into(),
        };
        ws.send(Message::Close(Some(frame))).await.unwrap();
        until_closed(&mut ws).await
    })
    .await;
    let mut client = within(WsClient::connect(&url)).await.unwrap();
    assert_eq!(client.close_reason(), None);
    assert_eq!(within(client.recv()).await.unwrap(), Some(last));
    assert_eq!(within(client.recv()).await.unwrap(), None);
    assert_eq!(client.close_reason(), Some((4001, "kicked".to_string())));
    assert_eq!(within(client.recv()).await.unwrap(), None);
    let err = within(client.send(&Envelope::new(100, vec![1]))).await;
    assert!(matches!(err, Err(ClientError::Closed)), "{err:?}");
    within(client.close()).await.unwrap();
    // The server saw the client's close reply and nothing else (the later
    // close() was a no-op).
    let seen = finish(server).await;
    match seen.as_slice() {
        [Message::Close(Some(frame))] => assert_eq!(u16::from(frame.code), 4001),
        other => panic!("expected only the close reply, got {other:?}"),
    }
}

#[tokio::test]
async fn close_inside_a_frame_is_a_decode_error_then_none() {
    let (url, server) = serve(|mut ws| async move {
        let bytes = Envelope::new(100, vec![1, 2, 3]).encode_framed();
        ws.send(Message::Binary(bytes.slice(..5))).await.unwrap();
        ws.send(Message::Close(None)).await.unwrap();
        until_closed(&mut ws).await;
    })
    .await;
    let mut client = within(WsClient::connect(&url)).await.unwrap();
    let err = within(client.recv()).await.unwrap_err();
    assert!(matches!(err, ClientError::Decode(_)), "{err:?}");
    assert_eq!(within(client.recv()).await.unwrap(), None);
    assert_eq!(client.close_reason(), Some((1005, String::new())));
    finish(server).await;
}

#[tokio::test]
async fn send_batch_coalesces_frames_into_one_message() {
    let (url, server) = serve(|mut ws| async move {
        let batch = next_binary(&mut ws).await;
        let single = next_binary(&mut ws).await;
        let rest = until_closed(&mut ws).await;
        (batch, single, rest)
    })
    .await;
    let mut client = within(WsClient::connect(&url)).await.unwrap();
    let batch = [
        Envelope::new(100, vec![1]),
        Envelope::new(101, Vec::new()),
        Envelope::new(KIND_POSITION, encode_position(1.0, 2.0).to_vec()),
    ];
    within(client.send_batch(&batch)).await.unwrap();
    within(client.send_batch(&[])).await.unwrap(); // sends nothing
    within(client.send(&Envelope::new(102, Vec::new())))
        .await
        .unwrap();
    within(client.close()).await.unwrap();
    assert_eq!(client.close_reason(), None);

    let (batch, single, rest) = finish(server).await;
    assert_eq!(
        &batch[..],
        &[
            0, 0, 0, 3, 0, 100, 1, // kind 100
            0, 0, 0, 2, 0, 101, // kind 101, empty
            0, 0, 0, 10, 0, 1, 0, 0, 0x80, 0x3F, 0, 0, 0, 0x40, // kind 1
        ]
    );
    assert_eq!(&single[..], &[0, 0, 0, 2, 0, 102]);
    match rest.as_slice() {
        [Message::Close(Some(frame))] => assert_eq!(frame.code, CloseCode::Normal),
        other => panic!("expected only the close frame, got {other:?}"),
    }
}

#[tokio::test]
async fn room_helpers_write_exact_frames_and_wait_for_joined() {
    let joined = RoomJoined {
        room_id: 0x0102_0304_0506_0708,
        map: "Forest".into(),
        mode: "ffa".into(),
    };
    let peer = Envelope::new(
        KIND_PEER_POSITION,
        tag_with_sender(7, &encode_position(125.0, 64.0)),
    );
    let (joined_s, peer_s) = (joined.clone(), peer.clone());
    let (url, server) = serve(|mut ws| async move {
        let mut got = vec![next_binary(&mut ws).await];
        // The peer position arrives before the admission, in one message.
        send_frames(&mut ws, &[peer_s, joined_s.to_envelope()]).await;
        for _ in 0..4 {
            got.push(next_binary(&mut ws).await);
        }
        until_closed(&mut ws).await;
        got
    })
    .await;
    let mut client = within(WsClient::connect(&url)).await.unwrap();
    within(client.join_or_create_room("lobby")).await.unwrap();
    let room = within(client.wait_for_room_joined()).await.unwrap();
    assert_eq!(room, joined);
    within(client.send_map_ready(room.room_id)).await.unwrap();
    within(client.send_position(125.0, 64.0)).await.unwrap();
    within(client.join_room(5)).await.unwrap();
    within(client.leave_room(5)).await.unwrap();
    let event = within(client.recv_event()).await.unwrap();
    assert_eq!(
        event,
        Some(ClientEvent::PeerPosition(PeerPosition {
            sender_id: 7,
            payload: Bytes::copy_from_slice(&encode_position(125.0, 64.0)),
        }))
    );
    within(client.close()).await.unwrap();

    let got = finish(server).await;
    let expected: [&[u8]; 5] = [
        &[0, 0, 0, 9, 0, 21, 0, 5, b'l', b'o', b'b', b'b', b'y'],
        &[0, 0, 0, 10, 0, 25, 1, 2, 3, 4, 5, 6, 7, 8],
        &[0, 0, 0, 10, 0, 1, 0, 0, 0xFA, 0x42, 0, 0, 0x80, 0x42],
        &[0, 0, 0, 10, 0, 22, 0, 0, 0, 0, 0, 0, 0, 5],
        &[0, 0, 0, 10, 0, 24, 0, 0, 0, 0, 0, 0, 0, 5],
    ];
    assert_eq!(got.len(), expected.len());
    for (got, expected) in got.iter().zip(expected) {
        assert_eq!(&got[..], expected);
    }
}

#[tokio::test]
async fn wait_for_kind_finds_an_envelope_buffered_by_call_rpc() {
    let joined = RoomJoined {
        room_id: 3,
        map: "Arena".into(),
        mode: String::new(),
    };
    let after = Envelope::new(100, vec![0xAB]);
    let (joined_s, after_s) = (joined.clone(), after.clone());
    let (url, server) = serve(|mut ws| async move {
        let first = next_binary(&mut ws).await;
        let request = RpcRequest::decode(&decode_single(&first).body).unwrap();
        send_frames(
            &mut ws,
            &[
                joined_s.to_envelope(),
                after_s,
                rpc_response(request.request_id, RPC_STATUS_OK, b"ok"),
            ],
        )
        .await;
        until_closed(&mut ws).await;
    })
    .await;
    let mut client = within(WsClient::connect(&url)).await.unwrap();
    assert_eq!(&within(client.call_rpc("x", b"")).await.unwrap()[..], b"ok");
    assert_eq!(within(client.wait_for_room_joined()).await.unwrap(), joined);
    assert_eq!(within(client.recv()).await.unwrap(), Some(after));
    within(client.close()).await.unwrap();
    finish(server).await;
}

#[tokio::test]
async fn full_pending_buffer_errors_without_dropping_anything() {
    let total = MAX_BUFFERED_ENVELOPES as u32 + 1;
    let (url, server) = serve(move |mut ws| async move {
        let first = next_binary(&mut ws).await;
        let request = RpcRequest::decode(&decode_single(&first).body).unwrap();
        let mut out = BytesMut::new();
        for i in 0..total {
            Envelope::new(100, i.to_be_bytes().to_vec()).encode_framed_into(&mut out);
        }
        rpc_response(request.request_id, RPC_STATUS_OK, b"late").encode_framed_into(&mut out);
        ws.send(Message::Binary(out.freeze())).await.unwrap();
        until_closed(&mut ws).await;
    })
    .await;
    let mut client = within(WsClient::connect(&url)).await.unwrap();
    let err = within(client.call_rpc("slow", b"")).await.unwrap_err();
    assert!(
        matches!(&err, ClientError::Receive(m) if m == "client buffer full"),
        "{err:?}"
    );
    for i in 0..total {
        let envelope = within(client.recv()).await.unwrap().expect("an envelope");
        assert_eq!(envelope.kind, 100);
        assert_eq!(&envelope.body[..], &i.to_be_bytes());
    }
    // The late reply is not lost either.
    let late = within(client.recv())
        .await
        .unwrap()
        .expect("the late reply");
    assert_eq!(late, rpc_response(1, RPC_STATUS_OK, b"late"));
    within(client.close()).await.unwrap();
    finish(server).await;
}

#[tokio::test]
async fn pings_are_answered_while_receiving() {
    let (url, server) = serve(|mut ws| async move {
        ws.send(Message::Ping(Bytes::from_static(b"hb")))
            .await
            .unwrap();
        // The client must answer before it gets anything else to read.
        let pong = next_msg(&mut ws).await;
        send_frames(&mut ws, &[Envelope::new(100, vec![1])]).await;
        until_closed(&mut ws).await;
        pong
    })
    .await;
    let mut client = within(WsClient::connect(&url)).await.unwrap();
    let got = within(client.recv()).await.unwrap();
    assert_eq!(got, Some(Envelope::new(100, vec![1])));
    within(client.close()).await.unwrap();
    assert_eq!(
        finish(server).await,
        Message::Pong(Bytes::from_static(b"hb"))
    );
}

#[tokio::test]
async fn framing_errors_and_text_messages_are_decode_errors() {
    let (url, server) = serve(|mut ws| async move {
        ws.send(Message::text("hello")).await.unwrap();
        send_frames(&mut ws, &[Envelope::new(100, vec![5])]).await;
        // A length prefix above MAX_FRAME_BODY_BYTES.
        let too_large = u32::try_from(MAX_FRAME_BODY_BYTES + 1).unwrap();
        let mut bad = too_large.to_be_bytes().to_vec();
        bad.extend_from_slice(&[0, 100]);
        ws.send(Message::Binary(bad.into())).await.unwrap();
        until_closed(&mut ws).await;
    })
    .await;
    let mut client = within(WsClient::connect(&url)).await.unwrap();
    let err = within(client.recv()).await.unwrap_err();
    assert!(matches!(err, ClientError::Decode(_)), "{err:?}");
    // A text message does not break the stream.
    assert_eq!(
        within(client.recv()).await.unwrap(),
        Some(Envelope::new(100, vec![5]))
    );
    for _ in 0..2 {
        let err = within(client.recv()).await.unwrap_err();
        assert!(matches!(err, ClientError::Decode(_)), "{err:?}");
    }
    within(client.close()).await.unwrap();
    finish(server).await;
}

#[tokio::test]
async fn oversized_envelopes_are_refused_before_writing() {
    let (url, server) = serve(|mut ws| async move {
        let first = next_binary(&mut ws).await;
        until_closed(&mut ws).await;
        first
    })
    .await;
    let mut client = within(WsClient::connect(&url)).await.unwrap();
    let huge = Envelope::new(100, vec![0; MAX_FRAME_BODY_BYTES - 1]);
    let err = within(client.send(&huge)).await.unwrap_err();
    assert!(matches!(err, ClientError::Config(_)), "{err:?}");
    let err = within(client.send_batch(&[Envelope::new(101, vec![1]), huge]))
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::Config(_)), "{err:?}");
    within(client.send(&Envelope::new(100, vec![1])))
        .await
        .unwrap();
    within(client.close()).await.unwrap();
    assert_eq!(&finish(server).await[..], &[0, 0, 0, 3, 0, 100, 1]);
}
