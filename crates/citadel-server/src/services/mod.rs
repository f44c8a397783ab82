//! Plain async services over the store, with no transport knowledge:
//! accounts and sessions (`accounts`), token formats (`tokens`), field
//! rules (`validation`), the live-connection index used for revocation
//! (`live`), durable player notifications (`notifications`), the friend graph
//! (`friends`), groups and their roles (`groups`), durable chat (`chat`). HTTP handlers and the realtime handshake call into them;
//! `register_json_methods` binds a service's JSON RPC methods.

pub mod accounts;
pub mod chat;
pub mod friends;
pub mod groups;
pub mod live;
pub mod matchmaker;
pub mod notifications;
pub mod party;
pub mod revocation;
pub mod tokens;
pub mod validation;

pub use accounts::{AccountService, ServiceError, TokenPair};

/// Registers one built-in RPC per `(name, method)` of a service: a call runs
/// `run(service, method, ctx, payload)` and answers its JSON reply as text.
/// A name that cannot be registered is logged, not fatal.
pub(crate) fn register_json_methods<S, M, N, F, Fut>(
    registry: &crate::rpc::RpcRegistry,
    service: &std::sync::Arc<S>,
    methods: impl IntoIterator<Item = (N, M)>,
    run: F,
) where
    S: Send + Sync + 'static,
    M: Copy + Send + Sync + 'static,
    N: AsRef<str>,
    F: Fn(std::sync::Arc<S>, M, crate::rpc::RpcContext, bytes::Bytes) -> Fut
        + Copy
        + Send
        + Sync
        + 'static,
    Fut: std::future::Future<Output = Result<serde_json::Value, crate::rpc::RpcError>>
        + Send
        + 'static,
{
    for (name, method) in methods {
        let service = service.clone();
        let handler = move |ctx: crate::rpc::RpcContext, payload: bytes::Bytes| {
            let reply = run(service.clone(), method, ctx, payload);
            async move { Ok(bytes::Bytes::from(reply.await?.to_string())) }
        };
        let name = name.as_ref();
        if let Err(err) = registry.register_builtin(name, std::sync::Arc::new(handler)) {
            tracing::warn!(method = name, error = %err, "built-in RPC not registered");
        }
    }
}
