//! The realtime handshake: the first frame must be KIND_AUTH; exactly one
//! KIND_AUTH_RESULT answers it.
//!
//! Typed phases: a connection starts in [`AwaitingAuth`]; handling the first
//! frame consumes it and yields a [`HandshakeDecision`]; there is no way
//! back. Rejections are coarse on purpose: invalid, expired, revoked and
//! malformed tokens are all `AUTH_FAILED`. What it is not: it does not touch
//! sockets or timers (the connection applies the handshake timeout) and it
//! never logs or stores the token.

use citadel_wire::Envelope;
use citadel_wire::protocol::{
    AUTH_REASON_AUTH_FAILED, AUTH_REASON_AUTH_REQUIRED, AUTH_REASON_PROTOCOL, AuthResult, KIND_AUTH,
};

use crate::config::AuthConfig;

/// The old path of [`crate::util::BoxFuture`], kept so code written against
/// it still builds; new code imports `crate::util::BoxFuture`.
pub use crate::util::BoxFuture;

/// The account behind a valid session token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionIdentity {
    /// The account's user id (sent in AUTHENTICATED).
    pub user_id: String,
    /// The session the token belongs to (for revocation).
    pub session_id: String,
}

/// Validates realtime session tokens. The node uses the accounts service's
/// `StoreSessionValidator` (tokens checked against the store) unless the
/// builder is given another; [`RejectAllTokens`] refuses every token.
pub trait SessionValidator: Send + Sync + 'static {
    /// `Some` for a valid, unexpired, unrevoked access token.
    fn validate(&self, token: &str) -> BoxFuture<Option<SessionIdentity>>;
}

/// A validator that refuses every token, so only guests get in
/// (`NodeBuilder::reject_all_tokens`; also the connection's unit tests).
#[derive(Debug, Default, Clone, Copy)]
pub struct RejectAllTokens;

impl SessionValidator for RejectAllTokens {
    fn validate(&self, _token: &str) -> BoxFuture<Option<SessionIdentity>> {
        Box::pin(async { None })
    }
}

/// Who an accepted connection is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    /// A validated session.
    Authenticated(SessionIdentity),
    /// A guest.
    Guest,
}

impl Identity {
    /// The account id, if authenticated.
    pub fn user_id(&self) -> Option<&str> {
        match self {
            Identity::Authenticated(s) => Some(&s.user_id),
            Identity::Guest => None,
        }
    }
}

/// The outcome of the first frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HandshakeDecision {
    /// Register the connection.
    Accept(Identity),
    /// Answer with REJECTED and close.
    Reject {
        /// `AUTH_REASON_*`.
        reason_class: u8,
        /// Short text for logs and metrics (never the token).
        why: &'static str,
    },
}

impl HandshakeDecision {
    /// The KIND_AUTH_RESULT answering this decision.
    pub fn result(&self) -> AuthResult {
        match self {
            HandshakeDecision::Accept(Identity::Authenticated(s)) => AuthResult::Authenticated {
                user_id: s.user_id.clone(),
            },
            HandshakeDecision::Accept(Identity::Guest) => AuthResult::Guest,
            HandshakeDecision::Reject { reason_class, .. } => AuthResult::Rejected {
                reason_class: *reason_class,
            },
        }
    }
}

fn reject(reason_class: u8, why: &'static str) -> HandshakeDecision {
    HandshakeDecision::Reject { reason_class, why }
}

/// A connection that has not authenticated yet.
#[derive(Debug)]
pub struct AwaitingAuth<'a> {
    policy: &'a AuthConfig,
}

impl<'a> AwaitingAuth<'a> {
    /// Starts the handshake under `policy`.
    pub fn new(policy: &'a AuthConfig) -> Self {
        AwaitingAuth { policy }
    }

    /// Decides on the first reliable frame. Consumes the phase.
    pub async fn handle_first_frame(
        self,
        first: &Envelope,
        validator: &dyn SessionValidator,
    ) -> HandshakeDecision {
        if first.kind != KIND_AUTH {
            return reject(AUTH_REASON_PROTOCOL, "first frame was not KIND_AUTH");
        }
        if first.body.len() > self.policy.max_token_bytes {
            return reject(
                AUTH_REASON_PROTOCOL,
                "token larger than transport.auth.max_token_bytes",
            );
        }
        if first.body.is_empty() {
            if self.policy.require_auth || !self.policy.allow_guests {
                return reject(AUTH_REASON_AUTH_REQUIRED, "guest refused");
            }
            return HandshakeDecision::Accept(Identity::Guest);
        }
        let Ok(token) = std::str::from_utf8(&first.body) else {
            return reject(AUTH_REASON_AUTH_FAILED, "token is not UTF-8");
        };
        match validator.validate(token).await {
            Some(identity) => HandshakeDecision::Accept(Identity::Authenticated(identity)),
            None => reject(AUTH_REASON_AUTH_FAILED, "token not valid"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use citadel_wire::protocol::KIND_POSITION;

    struct OneToken;
    impl SessionValidator for OneToken {
        fn validate(&self, token: &str) -> BoxFuture<Option<SessionIdentity>> {
            let ok = token == "good";
            Box::pin(async move {
                ok.then(|| SessionIdentity {
                    user_id: "u1".into(),
                    session_id: "s1".into(),
                })
            })
        }
    }

    async fn decide(policy: &AuthConfig, kind: u16, body: &[u8]) -> HandshakeDecision {
        AwaitingAuth::new(policy)
            .handle_first_frame(&Envelope::new(kind, body.to_vec()), &OneToken)
            .await
    }

    fn reason(d: &HandshakeDecision) -> Option<u8> {
        d.result().reason_class()
    }

    #[tokio::test]
    async fn decision_table() {
        let default = AuthConfig::default();
        assert_eq!(
            decide(&default, KIND_AUTH, b"").await,
            HandshakeDecision::Accept(Identity::Guest)
        );
        assert!(matches!(
            decide(&default, KIND_AUTH, b"good").await,
            HandshakeDecision::Accept(Identity::Authenticated(_))
        ));
        assert_eq!(
            reason(&decide(&default, KIND_AUTH, b"bad").await),
            Some(AUTH_REASON_AUTH_FAILED)
        );
        assert_eq!(
            reason(&decide(&default, KIND_AUTH, &[0xFF, 0xFE]).await),
            Some(AUTH_REASON_AUTH_FAILED)
        );
        assert_eq!(
            reason(&decide(&default, KIND_POSITION, b"").await),
            Some(AUTH_REASON_PROTOCOL)
        );
        let huge = vec![b'a'; default.max_token_bytes + 1];
        assert_eq!(
            reason(&decide(&default, KIND_AUTH, &huge).await),
            Some(AUTH_REASON_PROTOCOL)
        );
        let strict = AuthConfig {
            require_auth: true,
            ..AuthConfig::default()
        };
        assert_eq!(
            reason(&decide(&strict, KIND_AUTH, b"").await),
            Some(AUTH_REASON_AUTH_REQUIRED)
        );
        assert!(matches!(
            decide(&strict, KIND_AUTH, b"good").await,
            HandshakeDecision::Accept(_)
        ));
        let no_guests = AuthConfig {
            allow_guests: false,
            ..AuthConfig::default()
        };
        assert_eq!(
            reason(&decide(&no_guests, KIND_AUTH, b"").await),
            Some(AUTH_REASON_AUTH_REQUIRED)
        );
        assert_eq!(reason(&decide(&default, KIND_AUTH, b"good").await), None);
    }
}
