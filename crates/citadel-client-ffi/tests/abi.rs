//! The C ABI driven from Rust, as foreign code would call it: argument
//! checks, handle lifetime, the handshake outcomes, the poll loop
//! (ordering, truncation, end of connection) and the per-thread and
//! per-handle error messages. The server is `support/fake_server.rs` on
//! 127.0.0.1; the real node is exercised by the C and C# tests
//! (scripts/test-ffi).

#![allow(unsafe_code, clippy::undocumented_unsafe_blocks)]

#[path = "support/fake_server.rs"]
mod fake_server;

use std::ffi::{CString, c_char};
use std::ptr;
use std::time::{Duration, Instant};

use citadel_ffi::abi::*;
use citadel_ffi::{
    CITADEL_FFI_ABI_VERSION, CITADEL_MAX_BODY_BYTES, CitadelAuthStatus, CitadelStatus,
};

fn last_error() -> String {
    let mut buf = [0u8; 256];
    let n = unsafe { citadel_last_error_message(buf.as_mut_ptr().cast(), buf.len()) };
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

fn handle_error(h: *mut CitadelClient) -> String {
    let mut buf = [0u8; 256];
    let n = unsafe { citadel_client_last_error(h, buf.as_mut_ptr().cast(), buf.len()) };
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

fn connect(url: &str) -> *mut CitadelClient {
    let url = CString::new(url).unwrap();
    let mut h = ptr::null_mut();
    let status = unsafe { citadel_client_connect_websocket(url.as_ptr(), &mut h) };
    assert_eq!(status, CitadelStatus::Ok, "{}", last_error());
    assert!(!h.is_null());
    h
}

fn guest(h: *mut CitadelClient) {
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
    assert_eq!(status, CitadelStatus::Ok, "{}", last_error());
    assert_eq!(auth, CitadelAuthStatus::Guest);
}

fn send(h: *mut CitadelClient, kind: u16, body: &[u8]) -> CitadelStatus {
    unsafe { citadel_client_send(h, kind, body.as_ptr(), body.len(), true) }
}

struct Polled {
    status: CitadelStatus,
    kind: u16,
    len: usize,
    truncated: bool,
    body: Vec<u8>,
}

fn poll_once(h: *mut CitadelClient, cap: usize) -> Polled {
    let mut buf = vec![0u8; cap];
    let (mut kind, mut len, mut truncated) = (0u16, 0usize, false);
    let ptr = if cap == 0 {
        ptr::null_mut()
    } else {
        buf.as_mut_ptr()
    };
    let status = unsafe { citadel_client_poll(h, &mut kind, ptr, cap, &mut len, &mut truncated) };
    buf.truncate(len.min(cap));
    Polled {
        status,
        kind,
        len,
        truncated,
        body: buf,
    }
}

/// Polls until something other than AGAIN, for at most 5 s.
fn poll_wait(h: *mut CitadelClient, cap: usize) -> Polled {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let polled = poll_once(h, cap);
        if polled.status != CitadelStatus::Again || Instant::now() > deadline {
            return polled;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn version_matches_the_header_constant() {
    assert_eq!(citadel_client_abi_version(), CITADEL_FFI_ABI_VERSION);
    assert_eq!(CITADEL_FFI_ABI_VERSION, 2);
}

#[test]
fn null_and_invalid_arguments_are_error_codes() {
    let mut h = ptr::null_mut();
    let url = CString::new("ws://127.0.0.1:1/").unwrap();
    unsafe {
        assert_eq!(
            citadel_client_connect_websocket(ptr::null(), &mut h),
            CitadelStatus::InvalidArgument
        );
        assert!(last_error().contains("url is null"));
        assert_eq!(
            citadel_client_connect_websocket(url.as_ptr(), ptr::null_mut()),
            CitadelStatus::InvalidArgument
        );
        let not_utf8 = [0xffu8, 0xfe, 0];
        assert_eq!(
            citadel_client_connect_websocket(not_utf8.as_ptr().cast::<c_char>(), &mut h),
            CitadelStatus::InvalidArgument
        );
        assert!(h.is_null(), "failed connects leave the out-pointer alone");

        let forged = 0x1234usize as *mut CitadelClient;
        for handle in [ptr::null_mut(), forged] {
            assert_eq!(send(handle, 100, b"x"), CitadelStatus::InvalidArgument);
            assert_eq!(poll_once(handle, 16).status, CitadelStatus::InvalidArgument);
            assert_eq!(handle_error(handle), "");
        }
        assert!(last_error().contains("unknown or already freed handle"));
        assert_eq!(citadel_client_free(ptr::null_mut()), CitadelStatus::Ok);
        assert_eq!(citadel_client_free(forged), CitadelStatus::InvalidArgument);
        assert_eq!(citadel_last_error_message(ptr::null_mut(), 16), 0);
        assert_eq!(citadel_last_error_message(ptr::null_mut(), 0), 0);

        let addr = CString::new("127.0.0.1:1").unwrap();
        let other = CString::new("example.com").unwrap();
        assert_eq!(
            citadel_client_connect_quic(addr.as_ptr(), other.as_ptr(), true, &mut h),
            CitadelStatus::InvalidArgument
        );
        let pem = b"not a certificate";
        assert_eq!(
            citadel_client_connect_quic_pinned(addr.as_ptr(), pem.as_ptr(), pem.len(), &mut h),
            CitadelStatus::InvalidArgument
        );
        assert!(last_error().contains("no certificate"));
        assert_eq!(
            citadel_client_connect_quic_pinned(addr.as_ptr(), ptr::null(), 5, &mut h),
            CitadelStatus::InvalidArgument
        );
        assert!(h.is_null());
    }
}

#[test]
fn refused_connect_is_a_connect_error_with_a_message() {
    // A port nothing listens on: bind, read the port, close.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = CString::new(format!("ws://127.0.0.1:{port}/")).unwrap();
    let mut h = ptr::null_mut();
    let status = unsafe { citadel_client_connect_websocket(url.as_ptr(), &mut h) };
    assert_eq!(status, CitadelStatus::Connect);
    assert!(h.is_null());
    assert!(
        last_error().starts_with("connect failed"),
        "{}",
        last_error()
    );
}

#[test]
fn handshake_outcomes_and_user_id_copy() {
    let url = fake_server::start();
    let h = connect(&url);
    guest(h);
    assert_eq!(citadel_client_free(h), CitadelStatus::Ok);

    let h = connect(&url);
    let (mut auth, mut len, mut reason) = (CitadelAuthStatus::Rejected, 0usize, 9u8);
    let mut user = [0xffu8; 5];
    let token = b"good";
    let status = unsafe {
        citadel_client_authenticate(
            h,
            token.as_ptr(),
            token.len(),
            &mut auth,
            user.as_mut_ptr(),
            user.len(),
            &mut len,
            &mut reason,
        )
    };
    assert_eq!(status, CitadelStatus::Ok);
    assert_eq!(auth, CitadelAuthStatus::Authenticated);
    assert_eq!(len, 7, "full length of user-42");
    assert_eq!(&user, b"user-", "truncated to the buffer, no NUL room");
    assert_eq!(citadel_client_free(h), CitadelStatus::Ok);

    let h = connect(&url);
    let token = b"wrong";
    let status = unsafe {
        citadel_client_authenticate(
            h,
            token.as_ptr(),
            token.len(),
            &mut auth,
            ptr::null_mut(),
            0,
            ptr::null_mut(),
            &mut reason,
        )
    };
    assert_eq!(status, CitadelStatus::Ok);
    assert_eq!((auth, reason), (CitadelAuthStatus::Rejected, 0));
    let bad = [0xffu8, 0xfe];
    let status = unsafe {
        citadel_client_authenticate(
            h,
            bad.as_ptr(),
            bad.len(),
            &mut auth,
            ptr::null_mut(),
            0,
            ptr::null_mut(),
            ptr::null_mut(),
        )
    };
    assert_eq!(
        status,
        CitadelStatus::InvalidArgument,
        "token must be UTF-8"
    );
    let status = unsafe {
        citadel_client_authenticate(
            h,
            ptr::null(),
            0,
            ptr::null_mut(),
            ptr::null_mut(),
            0,
            ptr::null_mut(),
            ptr::null_mut(),
        )
    };
    assert_eq!(
        status,
        CitadelStatus::InvalidArgument,
        "out_status is required"
    );
    assert_eq!(citadel_client_free(h), CitadelStatus::Ok);
}

#[test]
fn poll_hands_out_envelopes_in_order_and_keeps_truncated_ones() {
    let url = fake_server::start();
    let h = connect(&url);
    guest(h);
    assert_eq!(poll_once(h, 64).status, CitadelStatus::Again);
    for i in 0..50u8 {
        assert_eq!(send(h, 100 + u16::from(i % 3), &[i; 10]), CitadelStatus::Ok);
    }
    for i in 0..50u8 {
        let p = poll_wait(h, 64);
        assert_eq!(p.status, CitadelStatus::Ok);
        assert_eq!(
            (p.kind, p.len, p.truncated),
            (100 + u16::from(i % 3), 10, false)
        );
        assert_eq!(p.body, vec![i; 10]);
    }
    assert_eq!(
        send(h, 120, &[]),
        CitadelStatus::Ok,
        "empty body with null data"
    );
    assert_eq!(
        unsafe { citadel_client_send(h, 121, ptr::null(), 0, false) },
        CitadelStatus::Ok
    );
    let (a, b) = (poll_wait(h, 0), poll_wait(h, 0));
    assert_eq!((a.status, a.kind, a.len), (CitadelStatus::Ok, 120, 0));
    assert_eq!((b.status, b.kind, b.len), (CitadelStatus::Ok, 121, 0));

    let big: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
    assert_eq!(send(h, 130, &big), CitadelStatus::Ok);
    let peek = poll_wait(h, 0);
    assert_eq!(
        (peek.status, peek.kind, peek.len, peek.truncated),
        (CitadelStatus::Ok, 130, 1000, true)
    );
    let part = poll_once(h, 100);
    assert!(part.truncated);
    assert_eq!(
        part.body,
        big[..100].to_vec(),
        "the first cap bytes are copied"
    );
    let whole = poll_once(h, 1000);
    assert_eq!((whole.kind, whole.truncated), (130, false));
    assert_eq!(
        whole.body, big,
        "the truncated envelope was kept, then handed out whole"
    );
    assert_eq!(poll_once(h, 10).status, CitadelStatus::Again);

    let mut kind = 0u16;
    let status = unsafe {
        citadel_client_poll(
            h,
            &mut kind,
            ptr::null_mut(),
            0,
            ptr::null_mut(),
            ptr::null_mut(),
        )
    };
    assert_eq!(
        status,
        CitadelStatus::InvalidArgument,
        "out_len is required"
    );
    let mut len = 0usize;
    let status =
        unsafe { citadel_client_poll(h, &mut kind, ptr::null_mut(), 8, &mut len, ptr::null_mut()) };
    assert_eq!(
        status,
        CitadelStatus::InvalidArgument,
        "null buf with a capacity"
    );
    assert_eq!(
        unsafe { citadel_client_send(h, 100, ptr::null(), 3, true) },
        CitadelStatus::InvalidArgument
    );
    let huge = vec![0u8; CITADEL_MAX_BODY_BYTES + 1];
    assert_eq!(send(h, 100, &huge), CitadelStatus::InvalidArgument);
    assert!(handle_error(h).contains("exceeds"), "{}", handle_error(h));
    assert_eq!(citadel_client_free(h), CitadelStatus::Ok);
}

#[test]
fn server_close_drains_then_disconnects_and_handles_free_once() {
    let url = fake_server::start();
    let h = connect(&url);
    guest(h);
    assert_eq!(send(h, 100, b"before"), CitadelStatus::Ok);
    assert_eq!(send(h, fake_server::KIND_CLOSE_ME, b""), CitadelStatus::Ok);
    let p = poll_wait(h, 64);
    assert_eq!(
        (p.status, p.kind, &p.body[..]),
        (CitadelStatus::Ok, 100, &b"before"[..])
    );
    let end = poll_wait(h, 64);
    assert_eq!(end.status, CitadelStatus::Disconnected);
    assert_eq!(
        poll_once(h, 64).status,
        CitadelStatus::Disconnected,
        "sticky"
    );
    assert!(handle_error(h).contains("4000"), "{}", handle_error(h));
    assert!(last_error().contains("4000"), "{}", last_error());
    assert_eq!(send(h, 100, b"after"), CitadelStatus::Disconnected);
    let mut auth = CitadelAuthStatus::Guest;
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
    assert_eq!(status, CitadelStatus::Disconnected);

    assert_eq!(citadel_client_free(h), CitadelStatus::Ok);
    assert_eq!(
        citadel_client_free(h),
        CitadelStatus::InvalidArgument,
        "second free"
    );
    assert_eq!(
        send(h, 100, b"x"),
        CitadelStatus::InvalidArgument,
        "use after free"
    );
    assert_eq!(poll_once(h, 8).status, CitadelStatus::InvalidArgument);
}

#[test]
fn handles_are_distinct_and_usable_from_another_thread() {
    let url = fake_server::start();
    let a = connect(&url);
    let b = connect(&url);
    assert_ne!(a, b);
    guest(a);
    guest(b);
    let b_id = b as usize;
    let worker = std::thread::spawn(move || {
        let b = b_id as *mut CitadelClient;
        assert_eq!(send(b, 100, b"from thread"), CitadelStatus::Ok);
        let p = poll_wait(b, 64);
        // This thread's failure does not touch the main thread's message.
        assert_eq!(
            send(ptr::null_mut(), 1, b""),
            CitadelStatus::InvalidArgument
        );
        (p.status, p.body)
    });
    let (status, body) = worker.join().unwrap();
    assert_eq!(
        (status, &body[..]),
        (CitadelStatus::Ok, &b"from thread"[..])
    );
    assert_eq!(
        poll_once(a, 64).status,
        CitadelStatus::Again,
        "a saw nothing of b"
    );
    assert_eq!(citadel_client_free(a), CitadelStatus::Ok);
    assert_eq!(citadel_client_free(b), CitadelStatus::Ok);
}
