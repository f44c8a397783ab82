//! The exported C functions (`include/citadel.h` is generated from here).
//!
//! What it is: argument checking and marshalling around `client::Client`.
//! Every function runs inside `status::guard` (no panic crosses the
//! boundary), validates every pointer (null with a non-zero length, a null
//! out-pointer, non-UTF-8 text: `CITADEL_STATUS_INVALID_ARGUMENT`) and looks
//! its handle up in the live-handle table, so an unknown or freed handle is
//! an error code, never a crash. No function calls back into foreign code.
//!
//! Ownership, for every function: the library never keeps a caller pointer
//! past the call; input buffers are copied; output buffers are written only
//! within the stated capacity. Handles are owned by the caller from a
//! successful connect until `citadel_client_free`.
//!
//! Threading: one poll owner per handle (calls on one handle are serialised
//! by a lock if made concurrently); different handles are independent. Do not
//! call the blocking functions (connect, authenticate, free) from inside a
//! tokio runtime. Error messages are per thread (`citadel_last_error_message`)
//! and per handle (`citadel_client_last_error`).
//!
//! Call order: connect → authenticate → send / poll every frame → free.

use std::ffi::{CStr, c_char};
use std::panic::{AssertUnwindSafe, catch_unwind};

use citadel_client::AuthOutcome;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject as _;

use crate::CITADEL_FFI_ABI_VERSION;
use crate::client::{Client, Polled, QuicTrust};
use crate::registry;
use crate::status::{CitadelAuthStatus, CitadelStatus, Failure, copy_c_string, guard, last_error};

/// An opaque connection handle. Obtained from a `citadel_client_connect_*`
/// function, released by `citadel_client_free`; never dereference it (its
/// value is an id in the library's handle table, not an address).
pub struct CitadelClient {
    _opaque: (),
}

/// Reads a NUL-terminated UTF-8 string argument.
///
/// # Safety
/// `ptr` is null or points to a NUL-terminated string valid for the call.
unsafe fn text<'a>(ptr: *const c_char, what: &str) -> Result<&'a str, Failure> {
    if ptr.is_null() {
        return Err(Failure::invalid(format!("{what} is null")));
    }
    // SAFETY: non-null and NUL-terminated per the caller's contract.
    let cstr = unsafe { CStr::from_ptr(ptr) };
    cstr.to_str()
        .map_err(|_| Failure::invalid(format!("{what} is not valid UTF-8")))
}

/// Borrows `len` input bytes at `ptr` (`ptr` may be null only when `len` is 0).
///
/// # Safety
/// When non-null, `ptr` points to `len` readable bytes valid for the call.
unsafe fn input<'a>(ptr: *const u8, len: usize, what: &str) -> Result<&'a [u8], Failure> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(Failure::invalid(format!(
            "{what} is null but its length is {len}"
        )));
    }
    if len > isize::MAX as usize {
        return Err(Failure::invalid(format!(
            "{what} length {len} is out of range"
        )));
    }
    // SAFETY: non-null, `len` readable bytes per the caller's contract, and
    // `len` fits `isize`.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// Borrows `cap` writable bytes at `ptr` (`ptr` may be null only when `cap` is 0).
///
/// # Safety
/// When non-null, `ptr` points to `cap` writable bytes valid for the call,
/// not aliased by any other argument.
unsafe fn output<'a>(ptr: *mut u8, cap: usize, what: &str) -> Result<&'a mut [u8], Failure> {
    if cap == 0 {
        return Ok(&mut []);
    }
    if ptr.is_null() {
        return Err(Failure::invalid(format!(
            "{what} is null but its capacity is {cap}"
        )));
    }
    if cap > isize::MAX as usize {
        return Err(Failure::invalid(format!(
            "{what} capacity {cap} is out of range"
        )));
    }
    // SAFETY: non-null, `cap` writable unaliased bytes per the caller's
    // contract, and `cap` fits `isize`.
    Ok(unsafe { std::slice::from_raw_parts_mut(ptr, cap) })
}

/// Checks that a required out-pointer is non-null.
fn required<T>(ptr: *mut T, what: &str) -> Result<(), Failure> {
    if ptr.is_null() {
        Err(Failure::invalid(format!("{what} is null")))
    } else {
        Ok(())
    }
}

/// Writes `value` through `ptr` unless it is null.
///
/// # Safety
/// `ptr` is null or valid for a write of `T`.
unsafe fn put<T>(ptr: *mut T, value: T) {
    if !ptr.is_null() {
        // SAFETY: non-null and writable per the caller's contract.
        unsafe { ptr.write(value) };
    }
}

fn lookup(handle: *mut CitadelClient) -> Result<registry::Shared, Failure> {
    if handle.is_null() {
        return Err(Failure::invalid("handle is null"));
    }
    registry::get(handle as usize)
        .ok_or_else(|| Failure::invalid("unknown or already freed handle"))
}

/// Registers a connected client and writes its handle.
///
/// # Safety
/// `out_handle` is non-null (checked by the caller) and writable.
unsafe fn hand_out(client: Client, out_handle: *mut *mut CitadelClient) -> CitadelStatus {
    let handle = registry::insert(client) as *mut CitadelClient;
    // SAFETY: checked non-null by every caller, writable per their contract.
    unsafe { out_handle.write(handle) };
    CitadelStatus::Ok
}

/// The ABI version this library implements (`CITADEL_FFI_ABI_VERSION`).
/// Compare it with the header's constant before any other call. Never fails.
#[unsafe(no_mangle)]
pub extern "C" fn citadel_client_abi_version() -> u32 {
    CITADEL_FFI_ABI_VERSION
}

/// Opens a WebSocket connection to `url` (e.g. `"ws://127.0.0.1:7352/"`) and
/// writes a new handle to `*out_handle`. Blocks until connected or for at
/// most `CITADEL_BLOCKING_TIMEOUT_MS`. No frame is sent: call
/// `citadel_client_authenticate` next.
///
/// Ownership: `url` is read during the call only. On `CITADEL_STATUS_OK` the
/// caller owns the handle and must pass it to `citadel_client_free` exactly
/// once; on any other status `*out_handle` is left untouched and nothing
/// needs freeing.
///
/// Errors: `INVALID_ARGUMENT` (null or non-UTF-8 `url`, null `out_handle`),
/// `CONNECT` (refused, bad URL, timeout).
///
/// # Safety
/// `url` is null or a NUL-terminated string; `out_handle` is null or
/// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn citadel_client_connect_websocket(
    url: *const c_char,
    out_handle: *mut *mut CitadelClient,
) -> CitadelStatus {
    guard(|| {
        required(out_handle, "out_handle")?;
        // SAFETY: forwarded caller contract.
        let url = unsafe { text(url, "url") }?;
        let client = Client::connect_websocket(url)?;
        // SAFETY: `out_handle` checked non-null above.
        Ok(unsafe { hand_out(client, out_handle) })
    })
}

/// Opens a QUIC connection (ALPN `citadel/0`) to `addr` (`"host:port"`) and
/// writes a new handle to `*out_handle`; blocks like
/// `citadel_client_connect_websocket`.
///
/// `server_name` may be null or empty; otherwise it must equal the host part
/// of `addr` (the TLS server name is always that host). `insecure = true`
/// accepts any server certificate: development only. `insecure = false`
/// verifies the chain up to the platform's trusted roots (public CAs) and
/// the host name, as a browser does; a self-signed development certificate
/// then fails with `CONNECT` (pin it with `citadel_client_connect_quic_pinned`).
///
/// Ownership: as `citadel_client_connect_websocket`.
///
/// # Safety
/// `addr` and `server_name` are null or NUL-terminated strings;
/// `out_handle` is null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn citadel_client_connect_quic(
    addr: *const c_char,
    server_name: *const c_char,
    insecure: bool,
    out_handle: *mut *mut CitadelClient,
) -> CitadelStatus {
    guard(|| {
        required(out_handle, "out_handle")?;
        // SAFETY: forwarded caller contract.
        let addr = unsafe { text(addr, "addr") }?;
        if !server_name.is_null() {
            // SAFETY: forwarded caller contract.
            let name = unsafe { text(server_name, "server_name") }?;
            let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host);
            let host = host.trim_start_matches('[').trim_end_matches(']');
            if !name.is_empty() && name != host {
                return Err(Failure::invalid(
                    "server_name must be empty or the host part of addr",
                ));
            }
        }
        let trust = if insecure {
            QuicTrust::Insecure
        } else {
            QuicTrust::SystemRoots
        };
        let client = Client::connect_quic(addr, trust)?;
        // SAFETY: `out_handle` checked non-null above.
        Ok(unsafe { hand_out(client, out_handle) })
    })
}

/// Opens a QUIC connection to `addr` (`"host:port"`) that accepts only the
/// certificate(s) in the PEM text `cert_pem` (`cert_pem_len` bytes, e.g. the
/// contents of the node's `data/dev-cert.pem`) as the server's leaf; the TLS
/// handshake signature is still verified. Blocks like
/// `citadel_client_connect_websocket`.
///
/// Ownership: `cert_pem` is copied during the call. Handle ownership as
/// `citadel_client_connect_websocket`.
///
/// Errors: `INVALID_ARGUMENT` (null pointers, no certificate in the PEM),
/// `CONNECT` (unreachable, certificate not the pinned one, timeout).
///
/// # Safety
/// `addr` is null or NUL-terminated; `cert_pem` is null or points to
/// `cert_pem_len` readable bytes; `out_handle` is null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn citadel_client_connect_quic_pinned(
    addr: *const c_char,
    cert_pem: *const u8,
    cert_pem_len: usize,
    out_handle: *mut *mut CitadelClient,
) -> CitadelStatus {
    guard(|| {
        required(out_handle, "out_handle")?;
        // SAFETY: forwarded caller contract.
        let addr = unsafe { text(addr, "addr") }?;
        // SAFETY: forwarded caller contract.
        let pem = unsafe { input(cert_pem, cert_pem_len, "cert_pem") }?;
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem)
            .collect::<Result<_, _>>()
            .map_err(|e| Failure::invalid(format!("cert_pem: {e}")))?;
        if certs.is_empty() {
            return Err(Failure::invalid("cert_pem holds no certificate"));
        }
        let client = Client::connect_quic(addr, QuicTrust::Pinned(certs))?;
        // SAFETY: `out_handle` checked non-null above.
        Ok(unsafe { hand_out(client, out_handle) })
    })
}

/// Performs the realtime handshake: sends KIND_AUTH as the first frame and
/// waits (at most `CITADEL_BLOCKING_TIMEOUT_MS`) for KIND_AUTH_RESULT.
/// `token = NULL, token_len = 0` asks for a guest session; otherwise the
/// `token_len` UTF-8 bytes are the session access token.
///
/// On `OK`, `*out_status` is the outcome. Authenticated: the user id is
/// copied into `user_buf` (at most `user_cap` bytes; a NUL follows when it
/// fits) and its full length written to `*out_user_len`. Rejected: the
/// coarse reason class (`AUTH_REASON_*`) goes to `*out_reason` and the
/// server then closes the connection. Envelopes that arrive meanwhile are
/// kept for `citadel_client_poll`.
///
/// Ownership: the token is copied, used for this handshake only, never
/// stored or logged. `out_user_len`, `out_reason` and `user_buf` (with
/// `user_cap = 0`) may be null.
///
/// Errors: `INVALID_ARGUMENT`, `DISCONNECTED`, `CONNECT` (timeout),
/// `SEND` / `RECEIVE`.
///
/// # Safety
/// `handle` is any value; `token` is null or `token_len` readable bytes;
/// `out_status` is null or writable; `user_buf` is null or `user_cap`
/// writable bytes; `out_user_len` and `out_reason` are null or writable.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)] // fixed by sdk-surface §3.1
pub unsafe extern "C" fn citadel_client_authenticate(
    handle: *mut CitadelClient,
    token: *const u8,
    token_len: usize,
    out_status: *mut CitadelAuthStatus,
    user_buf: *mut u8,
    user_cap: usize,
    out_user_len: *mut usize,
    out_reason: *mut u8,
) -> CitadelStatus {
    guard(|| {
        required(out_status, "out_status")?;
        // SAFETY: forwarded caller contract.
        let token = unsafe { input(token, token_len, "token") }?;
        // SAFETY: forwarded caller contract.
        let user = unsafe { output(user_buf, user_cap, "user_buf") }?;
        let token = if token.is_empty() {
            None
        } else {
            Some(
                std::str::from_utf8(token)
                    .map_err(|_| Failure::invalid("token is not valid UTF-8"))?
                    .to_owned(),
            )
        };
        let shared = lookup(handle)?;
        let outcome = registry::lock(&shared).authenticate(token)?;
        let (status, user_id, reason) = match outcome {
            AuthOutcome::Authenticated { user_id } => {
                (CitadelAuthStatus::Authenticated, user_id, 0)
            }
            AuthOutcome::Guest => (CitadelAuthStatus::Guest, String::new(), 0),
            AuthOutcome::Rejected { reason_class } => {
                (CitadelAuthStatus::Rejected, String::new(), reason_class)
            }
        };
        let id = user_id.as_bytes();
        let copied = id.len().min(user.len());
        user[..copied].copy_from_slice(&id[..copied]);
        if let Some(nul) = user.get_mut(id.len()) {
            *nul = 0;
        }
        // SAFETY: each pointer is null or writable per the caller's contract.
        unsafe {
            put(out_status, status);
            put(out_user_len, id.len());
            put(out_reason, reason);
        }
        Ok(CitadelStatus::Ok)
    })
}

/// Queues one envelope of `kind` whose body is the `len` bytes at `data`
/// (`data` may be null when `len` is 0). Never blocks: the driver thread
/// writes it. `reliable` picks the QUIC stream (true) or a datagram
/// (false); WebSocket ignores it (always reliable, ordered).
///
/// Ownership: the body is copied before the call returns.
///
/// Errors: `INVALID_ARGUMENT` (bad handle, null data with `len > 0`, body
/// over `CITADEL_MAX_BODY_BYTES`), `AGAIN` (outbound queue full: poll, then
/// retry), `DISCONNECTED` (the connection has ended). A write that fails
/// later, on the driver thread, is recorded in `citadel_client_last_error`.
///
/// # Safety
/// `data` is null or points to `len` readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn citadel_client_send(
    handle: *mut CitadelClient,
    kind: u16,
    data: *const u8,
    len: usize,
    reliable: bool,
) -> CitadelStatus {
    guard(|| {
        // SAFETY: forwarded caller contract.
        let body = unsafe { input(data, len, "data") }?;
        let shared = lookup(handle)?;
        registry::lock(&shared).send(kind, body, reliable)?;
        Ok(CitadelStatus::Ok)
    })
}

/// Takes the next received envelope without blocking. This is the single
/// poll loop: call it every frame until it returns `AGAIN`; nothing is ever
/// delivered any other way.
///
/// `OK`: `*out_kind` is the kind, `*out_len` the full body length, and
/// `min(len, cap)` body bytes were copied into `buf`. If `len > cap`,
/// `*out_truncated` is true and the envelope is NOT consumed: grow the
/// buffer to `*out_len` bytes and poll again to receive it whole (so
/// `buf = NULL, cap = 0` peeks at the next size). `AGAIN`: nothing received
/// yet. `DISCONNECTED`: the connection ended and every envelope received
/// before the end was handed out; `citadel_client_last_error` says why.
///
/// Ownership: `buf` is written within `cap` bytes during the call only.
/// `out_truncated` may be null; `out_kind` and `out_len` are required.
///
/// # Safety
/// `out_kind`, `out_len`, `out_truncated` are null or writable; `buf` is null
/// or `cap` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn citadel_client_poll(
    handle: *mut CitadelClient,
    out_kind: *mut u16,
    buf: *mut u8,
    cap: usize,
    out_len: *mut usize,
    out_truncated: *mut bool,
) -> CitadelStatus {
    guard(|| {
        required(out_kind, "out_kind")?;
        required(out_len, "out_len")?;
        // SAFETY: forwarded caller contract.
        let buf = unsafe { output(buf, cap, "buf") }?;
        let shared = lookup(handle)?;
        let mut client = registry::lock(&shared);
        match client.poll(buf) {
            Polled::Empty => Ok(CitadelStatus::Again),
            Polled::Ended => {
                let reason = client
                    .end_reason()
                    .unwrap_or("connection closed")
                    .to_owned();
                Err(Failure::new(CitadelStatus::Disconnected, reason))
            }
            Polled::Envelope {
                kind,
                len,
                truncated,
            } => {
                // SAFETY: pointers checked non-null above (out_truncated may
                // be null: `put` skips it); writable per the contract.
                unsafe {
                    put(out_kind, kind);
                    put(out_len, len);
                    put(out_truncated, truncated);
                }
                Ok(CitadelStatus::Ok)
            }
        }
    })
}

/// Copies the handle's last error message (the reason the connection ended,
/// a failed queued send, a failed handshake...) into `buf` as a
/// NUL-terminated UTF-8 string of at most `cap - 1` bytes, cut at a
/// character boundary. Returns the bytes written excluding the NUL (0 for
/// no error, an unknown handle or `cap = 0`). Messages are short (a
/// 256-byte buffer holds them) and never contain a token.
///
/// # Safety
/// `buf` is null or `cap` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn citadel_client_last_error(
    handle: *mut CitadelClient,
    buf: *mut c_char,
    cap: usize,
) -> usize {
    catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: forwarded caller contract.
        let Ok(out) = (unsafe { output(buf.cast(), cap, "buf") }) else {
            return 0;
        };
        let Ok(shared) = lookup(handle) else {
            return 0;
        };
        let message = registry::lock(&shared).last_error();
        copy_c_string(&message, out)
    }))
    .unwrap_or(0)
}

/// Copies the message of the last failed call made on the calling thread
/// (any function, including connects that produced no handle) into `buf`,
/// with the same rules as `citadel_client_last_error`. Successful calls do
/// not clear it.
///
/// # Safety
/// `buf` is null or `cap` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn citadel_last_error_message(buf: *mut c_char, cap: usize) -> usize {
    catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: forwarded caller contract.
        let Ok(out) = (unsafe { output(buf.cast(), cap, "buf") }) else {
            return 0;
        };
        copy_c_string(&last_error(), out)
    }))
    .unwrap_or(0)
}

/// Closes the connection gracefully (waits at most
/// `CITADEL_CLOSE_TIMEOUT_MS`), stops its thread and releases the handle.
/// Envelopes not yet polled are dropped. A null handle is `OK` (nothing to
/// do); an unknown or already freed handle is `INVALID_ARGUMENT` and changes
/// nothing. After this call the handle value must not be used again.
#[unsafe(no_mangle)]
pub extern "C" fn citadel_client_free(handle: *mut CitadelClient) -> CitadelStatus {
    guard(|| {
        if handle.is_null() {
            return Ok(CitadelStatus::Ok);
        }
        let shared = registry::remove(handle as usize)
            .ok_or_else(|| Failure::invalid("unknown or already freed handle"))?;
        registry::lock(&shared).close();
        Ok(CitadelStatus::Ok)
    })
}
