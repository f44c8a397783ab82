//! RPC method registry: built-in namespaces first, script handlers second.
//!
//! Built-in namespaces (`matchmaker.*`, `notifications.*`, `chat.*`,
//! `party.*`, `friends.*`, `groups.*`, `leaderboards.*`, `wallet.*`,
//! `citadel.*`) can never be shadowed by a script. A handler's failure is
//! answered with a short generic message; internal detail never reaches
//! the client. What it is not: it does not parse KIND_RPC_REQUEST or write
//! responses (the connection does), and it enforces no deadline itself.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, RwLock};

use bytes::Bytes;

use crate::util::BoxFuture;

/// Namespaces reserved for built-in services.
pub const RESERVED_PREFIXES: [&str; 9] = [
    "matchmaker.",
    "notifications.",
    "chat.",
    "party.",
    "friends.",
    "groups.",
    "leaderboards.",
    "wallet.",
    "citadel.",
];

/// Whether `method` lies in a built-in namespace.
pub fn is_reserved_method(method: &str) -> bool {
    RESERVED_PREFIXES.iter().any(|p| method.starts_with(p))
}

/// Namespaces of the built-in player services (`services.md` §1): guests
/// are refused in them, and an unrouted method in them is an unknown
/// domain method rather than an unknown RPC method.
pub const SERVICE_PREFIXES: [&str; 6] = [
    "matchmaker.",
    "party.",
    "friends.",
    "groups.",
    "notifications.",
    "chat.",
];

/// Whether `method` belongs to a built-in player service.
pub fn is_service_method(method: &str) -> bool {
    SERVICE_PREFIXES.iter().any(|p| method.starts_with(p))
}

/// Answer to a guest calling a service method.
pub const AUTHENTICATION_REQUIRED: &str = "authentication required";
/// Answer to an unrouted method in a service namespace.
pub const UNKNOWN_DOMAIN_METHOD: &str = "unknown domain method";
/// Answer to a payload that is not the JSON a service expects.
pub const INVALID_JSON_BODY: &str = "invalid JSON body";

/// Generic message for an unknown method.
pub const UNKNOWN_METHOD: &str = "unknown RPC method";
/// Generic message for a failed handler.
pub const HANDLER_ERROR: &str = "RPC handler error";
/// Generic message for a handler past its deadline.
pub const HANDLER_TIMEOUT: &str = "RPC handler timed out";

/// Who is calling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcContext {
    /// The caller's participant id.
    pub participant_id: u64,
    /// The caller's account, `None` for guests.
    pub user_id: Option<String>,
    /// Where the caller was when it called.
    pub place: crate::place::Place,
    /// The method name.
    pub method: String,
}

/// A handler failure. Only `Client` messages reach the caller verbatim; they
/// must be short, stable and free of internals.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RpcError {
    /// A documented, client-safe message (e.g. `authentication required`).
    #[error("{0}")]
    Client(&'static str),
    /// A client-safe message built per call (e.g. which bound a request
    /// broke); it must never carry secrets or internals.
    #[error("{0}")]
    Invalid(String),
    /// Anything else; logged server-side, answered as [`HANDLER_ERROR`].
    #[error("internal: {0}")]
    Internal(String),
}

impl RpcError {
    /// The message sent to the caller.
    pub fn client_message(&self) -> Bytes {
        match self {
            RpcError::Client(m) => Bytes::from_static(m.as_bytes()),
            RpcError::Invalid(m) => Bytes::copy_from_slice(m.as_bytes()),
            RpcError::Internal(_) => Bytes::from_static(HANDLER_ERROR.as_bytes()),
        }
    }
}

/// An RPC implementation.
pub trait RpcHandler: Send + Sync + 'static {
    /// Handles one call.
    fn call(&self, ctx: RpcContext, payload: Bytes) -> BoxFuture<Result<Bytes, RpcError>>;

    /// Runs once the success reply of `call` is queued on the caller's
    /// reliable lane, so what it sends arrives after the reply (the
    /// matchmaker forms a match after `add`, and sends ROOM_JOINED after
    /// `accept`). Default: nothing.
    fn after_reply(&self, _ctx: &RpcContext) {}
}

impl<F, Fut> RpcHandler for F
where
    F: Fn(RpcContext, Bytes) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Bytes, RpcError>> + Send + 'static,
{
    fn call(&self, ctx: RpcContext, payload: Bytes) -> BoxFuture<Result<Bytes, RpcError>> {
        Box::pin(self(ctx, payload))
    }
}

/// Why a registration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// Scripts may not register in a built-in namespace.
    #[error("`{0}` is in a reserved built-in namespace")]
    Reserved(String),
    /// Empty or over-long method names.
    #[error("invalid method name")]
    InvalidName,
}

/// Resolves method names to handlers.
#[derive(Default)]
pub struct RpcRegistry {
    builtin: RwLock<HashMap<String, Arc<dyn RpcHandler>>>,
    script: RwLock<HashMap<String, Arc<dyn RpcHandler>>>,
}

impl std::fmt::Debug for RpcRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RpcRegistry").finish_non_exhaustive()
    }
}

fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 128
}

impl RpcRegistry {
    /// Registers a built-in (or embedder-provided) method; replaces any
    /// previous handler of that name.
    pub fn register_builtin(
        &self,
        method: &str,
        handler: Arc<dyn RpcHandler>,
    ) -> Result<(), RegistryError> {
        if !valid_name(method) {
            return Err(RegistryError::InvalidName);
        }
        self.builtin
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(method.to_owned(), handler);
        Ok(())
    }

    /// Registers a script method; refused in reserved namespaces.
    pub fn register_script(
        &self,
        method: &str,
        handler: Arc<dyn RpcHandler>,
    ) -> Result<(), RegistryError> {
        if !valid_name(method) {
            return Err(RegistryError::InvalidName);
        }
        if is_reserved_method(method) {
            return Err(RegistryError::Reserved(method.to_owned()));
        }
        self.script
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(method.to_owned(), handler);
        Ok(())
    }

    /// Replaces all script methods at once (hot reload).
    pub fn clear_script(&self) {
        self.script
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }

    /// The handler for a call of `method` by `user_id` (`None`: a guest),
    /// or the client message refusing it: service namespaces refuse guests
    /// and answer unrouted names with [`UNKNOWN_DOMAIN_METHOD`]; anything
    /// else unknown is [`UNKNOWN_METHOD`].
    pub fn route(
        &self,
        method: &str,
        user_id: Option<&str>,
    ) -> Result<Arc<dyn RpcHandler>, &'static str> {
        if is_service_method(method) {
            if user_id.is_none() {
                return Err(AUTHENTICATION_REQUIRED);
            }
            return self.resolve(method).ok_or(UNKNOWN_DOMAIN_METHOD);
        }
        self.resolve(method).ok_or(UNKNOWN_METHOD)
    }

    /// The handler for `method`: built-ins win over scripts.
    pub fn resolve(&self, method: &str) -> Option<Arc<dyn RpcHandler>> {
        if let Some(h) = self
            .builtin
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(method)
        {
            return Some(h.clone());
        }
        if is_reserved_method(method) {
            return None;
        }
        self.script
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(method)
            .cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(text: &'static str) -> Arc<dyn RpcHandler> {
        Arc::new(move |_ctx: RpcContext, _p: Bytes| async move {
            Ok(Bytes::from_static(text.as_bytes()))
        })
    }

    #[tokio::test]
    async fn builtins_cannot_be_shadowed() {
        let reg = RpcRegistry::default();
        reg.register_builtin("chat.join", reply("builtin")).unwrap();
        assert_eq!(
            reg.register_script("chat.join", reply("script")),
            Err(RegistryError::Reserved("chat.join".into()))
        );
        assert_eq!(
            reg.register_script("wallet.new", reply("script")),
            Err(RegistryError::Reserved("wallet.new".into()))
        );
        reg.register_script("echo", reply("script")).unwrap();
        let ctx = RpcContext {
            participant_id: 1,
            user_id: None,
            place: crate::place::Place::Default,
            method: "echo".into(),
        };
        let out = reg
            .resolve("echo")
            .unwrap()
            .call(ctx.clone(), Bytes::new())
            .await
            .unwrap();
        assert_eq!(&out[..], b"script");
        let out = reg
            .resolve("chat.join")
            .unwrap()
            .call(ctx, Bytes::new())
            .await
            .unwrap();
        assert_eq!(&out[..], b"builtin");
        assert!(reg.resolve("missing").is_none());
        assert!(reg.resolve("chat.unknown").is_none());
    }

    #[test]
    fn internal_errors_stay_generic() {
        assert_eq!(
            RpcError::Internal("db password wrong at line 3".into()).client_message(),
            HANDLER_ERROR
        );
        assert_eq!(
            RpcError::Client("authentication required").client_message(),
            "authentication required"
        );
    }

    #[test]
    fn service_namespaces_refuse_guests_and_name_unrouted_methods() {
        let reg = RpcRegistry::default();
        reg.register_builtin("notifications.list", reply("inbox"))
            .unwrap();
        reg.register_script("friends.list", reply("script"))
            .unwrap_err();
        for method in ["notifications.list", "chat.send", "party.create"] {
            assert_eq!(
                reg.route(method, None).err(),
                Some(AUTHENTICATION_REQUIRED),
                "{method}"
            );
        }
        assert!(reg.route("notifications.list", Some("user-1")).is_ok());
        assert_eq!(
            reg.route("notifications.nope", Some("user-1")).err(),
            Some(UNKNOWN_DOMAIN_METHOD)
        );
        assert_eq!(
            reg.route("wallet.balances", Some("user-1")).err(),
            Some(UNKNOWN_METHOD),
            "reserved but not a player service"
        );
        assert_eq!(reg.route("nope", None).err(), Some(UNKNOWN_METHOD));
    }
}
