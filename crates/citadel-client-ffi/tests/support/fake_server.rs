//! A minimal Citadel-speaking WebSocket server on 127.0.0.1 for the ABI
//! tests and the envelope benchmark: it answers KIND_AUTH (empty token:
//! guest; "good": authenticated as `user-42`; anything else: rejected with
//! reason 0), echoes every other envelope back unchanged in one message per
//! inbound message, and on kind [`KIND_CLOSE_ME`] closes with code 4000.
//!
//! It is not the real node (the C and C# tests use the `citadel` binary);
//! it isolates the ABI's own behaviour and cost. It runs on its own thread
//! and runtime because the ABI's blocking calls may not run inside one.

#![allow(dead_code)]

use std::net::SocketAddr;

use bytes::BytesMut;
use citadel_wire::protocol::{AuthResult, KIND_AUTH};
use citadel_wire::{WireBody, decode_framed};
use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;

/// An envelope of this kind makes the server close the connection.
pub const KIND_CLOSE_ME: u16 = 250;

/// Starts the server; returns its `ws://` URL. The thread lives until the
/// process exits.
pub fn start() -> String {
    let (tx, rx) = std::sync::mpsc::channel::<SocketAddr>();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async move {
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            tx.send(listener.local_addr().expect("addr"))
                .expect("send addr");
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let _ = stream.set_nodelay(true);
                tokio::spawn(serve(stream));
            }
        });
    });
    let addr = rx.recv().expect("server address");
    format!("ws://{addr}/")
}

async fn serve(stream: tokio::net::TcpStream) {
    let Ok(mut socket) = tokio_tungstenite::accept_async(stream).await else {
        return;
    };
    let mut inbound = BytesMut::new();
    while let Some(Ok(message)) = socket.next().await {
        let Message::Binary(data) = message else {
            continue;
        };
        inbound.extend_from_slice(&data);
        let mut out = BytesMut::new();
        while let Ok(Some(envelope)) = decode_framed(&mut inbound) {
            match envelope.kind {
                KIND_AUTH => {
                    let result = match &envelope.body[..] {
                        b"" => AuthResult::Guest,
                        b"good" => AuthResult::Authenticated {
                            user_id: "user-42".into(),
                        },
                        _ => AuthResult::Rejected { reason_class: 0 },
                    };
                    result.to_envelope().encode_framed_into(&mut out);
                }
                KIND_CLOSE_ME => {
                    let frame = CloseFrame {
                        code: 4000.into(),
                        reason: "bye".into(),
                    };
                    if !out.is_empty() {
                        let _ = socket.send(Message::Binary(out.split().freeze())).await;
                    }
                    let _ = socket.send(Message::Close(Some(frame))).await;
                    return;
                }
                _ => envelope.encode_framed_into(&mut out),
            }
        }
        if !out.is_empty() && socket.send(Message::Binary(out.freeze())).await.is_err() {
            return;
        }
    }
}
