//! Kinds 5 and 6: the realtime handshake request and its single result.
//!
//! Kind 5 carries the UTF-8 session token (empty = guest). Kind 6 is
//! `status u8` then a trailer: the user id for Authenticated, nothing for
//! Guest, one reason byte for Rejected (a missing reason reads as 0).

use super::{
    AUTH_REASON_AUTH_FAILED, AUTH_STATUS_AUTHENTICATED, AUTH_STATUS_GUEST, AUTH_STATUS_REJECTED,
    KIND_AUTH, KIND_AUTH_RESULT,
};
use crate::body::wire_body;
use crate::error::DecodeError;

/// A kind-5 body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthRequest {
    /// The session access token; empty asks for a guest session.
    pub token: String,
}

impl AuthRequest {
    /// Appends the token bytes.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.token.as_bytes());
    }

    /// Decodes; a non-UTF-8 token is invalid.
    pub fn decode(body: &[u8]) -> Result<Self, DecodeError> {
        let token = std::str::from_utf8(body).map_err(|_| DecodeError::InvalidUtf8)?;
        Ok(AuthRequest {
            token: token.to_owned(),
        })
    }

    /// Whether this asks for a guest session.
    pub fn is_guest(&self) -> bool {
        self.token.is_empty()
    }
}
wire_body!(AuthRequest, KIND_AUTH);

impl std::fmt::Display for AuthRequest {
    /// Never shows the token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_guest() {
            f.write_str("AuthRequest(guest)")
        } else {
            write!(f, "AuthRequest(token of {} bytes)", self.token.len())
        }
    }
}

/// A decoded kind-6 body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthResult {
    /// Accepted with a resolved account id.
    Authenticated {
        /// The account's user id.
        user_id: String,
    },
    /// Accepted as a guest.
    Guest,
    /// Refused with a coarse reason class.
    Rejected {
        /// One of the `AUTH_REASON_*` constants.
        reason_class: u8,
    },
}

impl AuthResult {
    /// Accepted with an account.
    pub fn is_authenticated(&self) -> bool {
        matches!(self, AuthResult::Authenticated { .. })
    }
    /// Accepted as guest.
    pub fn is_guest(&self) -> bool {
        matches!(self, AuthResult::Guest)
    }
    /// Refused.
    pub fn is_rejected(&self) -> bool {
        matches!(self, AuthResult::Rejected { .. })
    }
    /// Accepted either way.
    pub fn is_accepted(&self) -> bool {
        !self.is_rejected()
    }
    /// The user id of an authenticated result.
    pub fn user_id(&self) -> Option<&str> {
        match self {
            AuthResult::Authenticated { user_id } => Some(user_id),
            _ => None,
        }
    }
    /// The reason class of a rejection.
    pub fn reason_class(&self) -> Option<u8> {
        match self {
            AuthResult::Rejected { reason_class } => Some(*reason_class),
            _ => None,
        }
    }
    /// The status byte.
    pub fn status(&self) -> u8 {
        match self {
            AuthResult::Authenticated { .. } => AUTH_STATUS_AUTHENTICATED,
            AuthResult::Guest => AUTH_STATUS_GUEST,
            AuthResult::Rejected { .. } => AUTH_STATUS_REJECTED,
        }
    }

    /// Appends the body.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        out.push(self.status());
        match self {
            AuthResult::Authenticated { user_id } => out.extend_from_slice(user_id.as_bytes()),
            AuthResult::Guest => {}
            AuthResult::Rejected { reason_class } => out.push(*reason_class),
        }
    }

    /// Decodes; empty, unknown status and a non-UTF-8 user id are invalid.
    pub fn decode(body: &[u8]) -> Result<Self, DecodeError> {
        let (&status, rest) = body.split_first().ok_or(DecodeError::Truncated)?;
        match status {
            AUTH_STATUS_AUTHENTICATED => {
                let user_id = std::str::from_utf8(rest).map_err(|_| DecodeError::InvalidUtf8)?;
                Ok(AuthResult::Authenticated {
                    user_id: user_id.to_owned(),
                })
            }
            AUTH_STATUS_GUEST => Ok(AuthResult::Guest),
            AUTH_STATUS_REJECTED => Ok(AuthResult::Rejected {
                reason_class: rest.first().copied().unwrap_or(AUTH_REASON_AUTH_FAILED),
            }),
            _ => Err(DecodeError::InvalidValue("unknown auth status")),
        }
    }
}
wire_body!(AuthResult, KIND_AUTH_RESULT);

/// Kind-6 body for an authenticated connection.
pub fn encode_auth_authenticated(user_id: &str) -> Vec<u8> {
    AuthResult::Authenticated {
        user_id: user_id.to_owned(),
    }
    .encode()
}

/// Kind-6 body for a guest connection.
pub fn encode_auth_guest() -> Vec<u8> {
    vec![AUTH_STATUS_GUEST]
}

/// Kind-6 body for a rejection with `reason_class`.
pub fn encode_auth_rejected(reason_class: u8) -> Vec<u8> {
    vec![AUTH_STATUS_REJECTED, reason_class]
}

/// Decodes a kind-6 body; `None` if it is malformed.
pub fn decode_auth_result(body: &[u8]) -> Option<AuthResult> {
    AuthResult::decode(body).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::AUTH_REASON_PROTOCOL;

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    #[test]
    fn helpers_round_trip() -> TestResult {
        let a = decode_auth_result(&encode_auth_authenticated("u-1"))
            .ok_or("authenticated result did not decode")?;
        assert!(a.is_authenticated());
        assert_eq!(a.user_id(), Some("u-1"));
        assert!(
            decode_auth_result(&encode_auth_guest())
                .ok_or("guest result did not decode")?
                .is_guest()
        );
        let r = decode_auth_result(&encode_auth_rejected(AUTH_REASON_PROTOCOL))
            .ok_or("rejected result did not decode")?;
        assert_eq!(r.reason_class(), Some(AUTH_REASON_PROTOCOL));
        assert_eq!(
            decode_auth_result(&[2])
                .ok_or("reasonless rejection did not decode")?
                .reason_class(),
            Some(0)
        );
        assert!(decode_auth_result(&[]).is_none());
        assert!(decode_auth_result(&[0, 0xFF]).is_none());
        assert!(decode_auth_result(&[3]).is_none());
        Ok(())
    }

    #[test]
    fn display_never_shows_the_token() {
        let req = AuthRequest {
            token: "secret-token-value".into(),
        };
        assert!(!format!("{req}").contains("secret"));
    }
}
