//! Status codes, the thread-local last error and the panic guard.
//!
//! What it is: [`CitadelStatus`] / [`CitadelAuthStatus`] (values fixed by
//! `sdk-surface.md` §3.2), the [`Failure`] every internal function returns,
//! and [`guard`], which every exported function runs its body in: it catches
//! panics (reported as `CITADEL_STATUS_INTERNAL`) and records the failure's
//! message for `citadel_last_error_message` on the calling thread.
//!
//! What it is not: logging. Messages are short, never contain a token, and
//! are only stored for the caller to read.
//!
//! Call order: an exported function calls `guard(|| ...)`; the closure
//! returns `Ok(status)` or `Err(Failure)`.

use std::cell::RefCell;
use std::panic::{AssertUnwindSafe, catch_unwind};

use citadel_client::ClientError;

/// The result of every ABI call.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CitadelStatus {
    /// Success.
    Ok = 0,
    /// Nothing to poll right now, or the send queue is full: try again on a
    /// later frame.
    Again = 1,
    /// The connection has ended (closed by either side or lost); the handle
    /// must still be freed.
    Disconnected = 2,
    /// A null, unknown or already freed handle, a null pointer with a
    /// non-zero length, non-UTF-8 text, or a value out of range.
    InvalidArgument = 3,
    /// The connection could not be established (address, TLS, handshake
    /// timeout).
    Connect = 4,
    /// An envelope could not be written.
    Send = 5,
    /// Reading failed or the server sent bytes that are not Citadel framing.
    Receive = 6,
    /// A bug in the library, including a caught panic.
    Internal = 7,
}

/// The outcome of the realtime handshake (`citadel_client_authenticate`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CitadelAuthStatus {
    /// Accepted with an account; the user id was written.
    Authenticated = 0,
    /// Accepted as a guest.
    Guest = 1,
    /// Refused; the reason class was written and the server closes the
    /// connection.
    Rejected = 2,
}

/// A failed call: its status and the message for the last-error slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The code returned to the caller.
    pub status: CitadelStatus,
    /// A short, token-free description.
    pub message: String,
}

impl Failure {
    /// A failure with `status` and `message`.
    pub fn new(status: CitadelStatus, message: impl Into<String>) -> Self {
        Failure {
            status,
            message: message.into(),
        }
    }

    /// `CITADEL_STATUS_INVALID_ARGUMENT` with `message`.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(CitadelStatus::InvalidArgument, message)
    }
}

impl From<ClientError> for Failure {
    /// Maps the Rust client's error onto the ABI's codes.
    fn from(err: ClientError) -> Self {
        let status = match &err {
            ClientError::Connect(_) => CitadelStatus::Connect,
            ClientError::Send(_) => CitadelStatus::Send,
            ClientError::Receive(_) | ClientError::Decode(_) => CitadelStatus::Receive,
            ClientError::Config(_) => CitadelStatus::InvalidArgument,
            ClientError::Closed => CitadelStatus::Disconnected,
            _ => CitadelStatus::Internal,
        };
        Failure::new(status, err.to_string())
    }
}

thread_local! {
    static LAST_ERROR: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Records `message` as the calling thread's last error.
pub fn set_last_error(message: &str) {
    LAST_ERROR.with(|slot| {
        let mut slot = slot.borrow_mut();
        slot.clear();
        slot.push_str(message);
    });
}

/// The calling thread's last error message (empty when none).
pub fn last_error() -> String {
    LAST_ERROR.with(|slot| slot.borrow().clone())
}

/// Runs `body`, turning a panic into `CITADEL_STATUS_INTERNAL` and recording
/// any failure's message on this thread. Successful calls leave the last
/// error untouched.
pub fn guard(body: impl FnOnce() -> Result<CitadelStatus, Failure>) -> CitadelStatus {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(status)) => status,
        Ok(Err(failure)) => {
            set_last_error(&failure.message);
            failure.status
        }
        Err(_) => {
            set_last_error("internal error: a panic was caught at the C ABI boundary");
            CitadelStatus::Internal
        }
    }
}

/// Copies `text` into the caller's buffer as a NUL-terminated string,
/// truncated at a UTF-8 boundary to fit `cap - 1` bytes; returns the bytes
/// written, excluding the NUL (0 when `out` is empty).
pub fn copy_c_string(text: &str, out: &mut [u8]) -> usize {
    let Some(room) = out.len().checked_sub(1) else {
        return 0;
    };
    let mut len = text.len().min(room);
    while !text.is_char_boundary(len) {
        len -= 1;
    }
    out[..len].copy_from_slice(&text.as_bytes()[..len]);
    out[len] = 0;
    len
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guard_catches_panics_and_records_failures() {
        let status = guard(|| panic!("boom"));
        assert_eq!(status, CitadelStatus::Internal);
        assert!(last_error().contains("panic"));
        let status = guard(|| Err(Failure::invalid("bad handle")));
        assert_eq!(status, CitadelStatus::InvalidArgument);
        assert_eq!(last_error(), "bad handle");
        assert_eq!(guard(|| Ok(CitadelStatus::Again)), CitadelStatus::Again);
        assert_eq!(last_error(), "bad handle", "success keeps the last error");
    }

    #[test]
    fn last_error_is_per_thread() {
        set_last_error("main thread");
        let other = std::thread::spawn(|| {
            set_last_error("other");
            last_error()
        })
        .join()
        .expect("thread");
        assert_eq!(other, "other");
        assert_eq!(last_error(), "main thread");
    }

    #[test]
    fn c_strings_are_terminated_and_cut_at_char_boundaries() {
        let mut buf = [0xffu8; 6];
        assert_eq!(copy_c_string("héllo!", &mut buf), 5, "é is 2 bytes");
        assert_eq!(&buf, b"h\xc3\xa9ll\0");
        let mut tiny = [0xffu8; 3];
        assert_eq!(copy_c_string("hé", &mut tiny), 1, "é would not fit whole");
        assert_eq!(tiny[..2], [b'h', 0]);
        assert_eq!(copy_c_string("x", &mut []), 0);
        let mut one = [0xffu8; 1];
        assert_eq!(copy_c_string("x", &mut one), 0);
        assert_eq!(one[0], 0);
    }

    #[test]
    fn client_errors_map_to_codes() {
        let cases = [
            (ClientError::Connect("x".into()), CitadelStatus::Connect),
            (ClientError::Send("x".into()), CitadelStatus::Send),
            (ClientError::Receive("x".into()), CitadelStatus::Receive),
            (ClientError::Decode("x".into()), CitadelStatus::Receive),
            (
                ClientError::Config("x".into()),
                CitadelStatus::InvalidArgument,
            ),
            (ClientError::Closed, CitadelStatus::Disconnected),
        ];
        for (err, status) in cases {
            assert_eq!(Failure::from(err).status, status);
        }
    }
}
