//! Per-envelope cost through the C ABI, against the Rust client it wraps.
//!
//! Each loop sends 64 envelopes (32-byte bodies) to a loopback echo server
//! (`tests/support/fake_server.rs`, which echoes each inbound WebSocket
//! message as one message) and takes the 64 echoes back:
//! `rust_client` with `WsClient::send` per envelope and `recv`, on a
//! current-thread runtime; `rust_client_send_batch` with one
//! `WsClient::send_batch` (what the ABI's driver does with sends already
//! queued); `c_abi` with `citadel_client_send` / `citadel_client_poll` as
//! foreign code calls them (the driver thread does the I/O);
//! `c_abi_call_cost` the same loop timing only the C calls that moved an
//! envelope (the sends and the successful polls). Throughput is
//! in envelopes; the per-envelope difference to the Rust client is the
//! ABI's cost (target: under 1 µs). Run:
//! `cargo bench -p citadel-client-ffi --bench envelope`.

#![allow(unsafe_code, clippy::undocumented_unsafe_blocks, missing_docs)]

#[path = "../tests/support/fake_server.rs"]
mod fake_server;

use std::ffi::CString;
use std::ptr;
use std::time::{Duration, Instant};

use citadel_client::{Envelope, WsClient};
use citadel_ffi::abi::*;
use citadel_ffi::{CitadelAuthStatus, CitadelStatus};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

const BATCH: usize = 64;
const KIND: u16 = 100;

fn bench(c: &mut Criterion) {
    let url = fake_server::start();
    let body = [7u8; 32];
    let mut group = c.benchmark_group("envelope_round_trip");
    group.throughput(Throughput::Elements(BATCH as u64));

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut rust = runtime.block_on(async {
        let (client, _) = WsClient::connect_as_guest(&url).await.expect("connect");
        client
    });
    let envelope = Envelope::new(KIND, body.to_vec());
    group.bench_function("rust_client", |b| {
        b.iter(|| {
            runtime.block_on(async {
                for _ in 0..BATCH {
                    rust.send(&envelope).await.expect("send");
                }
                for _ in 0..BATCH {
                    rust.recv().await.expect("recv").expect("open");
                }
            })
        })
    });

    let batch: Vec<Envelope> = (0..BATCH).map(|_| envelope.clone()).collect();
    group.bench_function("rust_client_send_batch", |b| {
        b.iter(|| {
            runtime.block_on(async {
                rust.send_batch(&batch).await.expect("send");
                for _ in 0..BATCH {
                    rust.recv().await.expect("recv").expect("open");
                }
            })
        })
    });

    let curl = CString::new(url).expect("url");
    let mut h = ptr::null_mut();
    assert_eq!(
        unsafe { citadel_client_connect_websocket(curl.as_ptr(), &mut h) },
        CitadelStatus::Ok
    );
    let mut auth = CitadelAuthStatus::Rejected;
    let status = unsafe {
        citadel_client_authenticate(
            h,
            ptr::null(),
            0,
            &mut auth,
            ptr::null_mut(),
            0,
            ptr::null_mut(),
            ptr::null_mut(),
        )
    };
    assert_eq!(
        (status, auth),
        (CitadelStatus::Ok, CitadelAuthStatus::Guest)
    );
    let mut buf = [0u8; 256];
    group.bench_function("c_abi", |b| {
        b.iter(|| {
            for _ in 0..BATCH {
                let s = unsafe { citadel_client_send(h, KIND, body.as_ptr(), body.len(), true) };
                assert_eq!(s, CitadelStatus::Ok);
            }
            let mut received = 0;
            while received < BATCH {
                let (mut kind, mut len, mut truncated) = (0u16, 0usize, false);
                let s = unsafe {
                    citadel_client_poll(
                        h,
                        &mut kind,
                        buf.as_mut_ptr(),
                        buf.len(),
                        &mut len,
                        &mut truncated,
                    )
                };
                match s {
                    CitadelStatus::Ok => received += 1,
                    CitadelStatus::Again => std::thread::yield_now(),
                    other => panic!("poll: {other:?}"),
                }
            }
        })
    });
    // The same loop, but timing only the C calls that move an envelope
    // (every send, and the polls that returned one): the cost the ABI adds
    // per envelope, without the wait for the network.
    group.bench_function("c_abi_call_cost", |b| {
        b.iter_custom(|iters| {
            let mut spent = Duration::ZERO;
            for _ in 0..iters {
                let start = Instant::now();
                for _ in 0..BATCH {
                    let s =
                        unsafe { citadel_client_send(h, KIND, body.as_ptr(), body.len(), true) };
                    assert_eq!(s, CitadelStatus::Ok);
                }
                spent += start.elapsed();
                let mut received = 0;
                while received < BATCH {
                    let (mut kind, mut len, mut truncated) = (0u16, 0usize, false);
                    let start = Instant::now();
                    let s = unsafe {
                        citadel_client_poll(
                            h,
                            &mut kind,
                            buf.as_mut_ptr(),
                            buf.len(),
                            &mut len,
                            &mut truncated,
                        )
                    };
                    match s {
                        CitadelStatus::Ok => {
                            spent += start.elapsed();
                            received += 1;
                        }
                        CitadelStatus::Again => std::thread::yield_now(),
                        other => panic!("poll: {other:?}"),
                    }
                }
            }
            spent
        })
    });
    group.finish();
    assert_eq!(citadel_client_free(h), CitadelStatus::Ok);
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30);
    targets = bench
}
criterion_main!(benches);
