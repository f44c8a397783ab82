//! The `party.*` RPCs (`services.md` §6): JSON in, JSON out. The caller is
//! the connection's account; the matchmaker tells whether a party's ticket
//! is queued (membership frozen).

use std::sync::Arc;

use bytes::Bytes;
use serde::Deserialize;
use serde_json::json;

use super::Parties;
use crate::rpc::{AUTHENTICATION_REQUIRED, RpcContext, RpcError, RpcHandler, RpcRegistry};
use crate::services::matchmaker::Matchmaker;
use crate::services::notifications::rpc::parse_payload;
use crate::util::BoxFuture;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Request {
    party_id: Option<serde_json::Value>,
    target_user_id: Option<serde_json::Value>,
}

fn string_field(
    value: Option<serde_json::Value>,
    missing: &'static str,
) -> Result<String, RpcError> {
    match value {
        Some(serde_json::Value::String(s)) if !s.is_empty() && s.len() <= 128 => Ok(s),
        _ => Err(RpcError::Client(missing)),
    }
}

#[derive(Clone, Copy)]
enum Method {
    Create,
    Invite,
    Accept,
    Leave,
    Promote,
    Remove,
    Close,
    Status,
}

struct Handler {
    parties: Arc<Parties>,
    matchmaker: Arc<Matchmaker>,
    method: Method,
}

impl Handler {
    fn run(&self, user: &str, payload: &[u8]) -> Result<serde_json::Value, RpcError> {
        let request: Request = parse_payload(payload)?;
        let p = &self.parties;
        let queued = |id: &str| self.matchmaker.party_queued(id);
        let id = || string_field(request.party_id.clone(), "missing string field: party_id");
        let target = || {
            string_field(
                request.target_user_id.clone(),
                "missing string field: target_user_id",
            )
        };
        let out = match self.method {
            Method::Create => p.create(user),
            Method::Invite => p.invite(user, &id()?, &target()?, &queued),
            Method::Accept => p.accept(user, &id()?, &queued),
            Method::Leave => p
                .leave(user, &id()?, &queued)
                .map(|()| json!({ "left": true })),
            Method::Promote => p.promote(user, &id()?, &target()?, &queued),
            Method::Remove => p.remove(user, &id()?, &target()?, &queued),
            Method::Close => p
                .close(user, &id()?, &queued)
                .map(|()| json!({ "closed": true })),
            Method::Status => p.status(user, &id()?),
        };
        out.map_err(RpcError::Client)
    }
}

impl RpcHandler for Handler {
    fn call(&self, ctx: RpcContext, payload: Bytes) -> BoxFuture<Result<Bytes, RpcError>> {
        let result = match ctx.user_id {
            None => Err(RpcError::Client(AUTHENTICATION_REQUIRED)),
            Some(user) => self.run(&user, &payload),
        };
        Box::pin(async move { result.map(|v| Bytes::from(v.to_string())) })
    }
}

/// Registers the `party.*` methods.
pub fn register(registry: &RpcRegistry, parties: &Arc<Parties>, matchmaker: &Arc<Matchmaker>) {
    for (name, method) in [
        ("party.create", Method::Create),
        ("party.invite", Method::Invite),
        ("party.accept", Method::Accept),
        ("party.leave", Method::Leave),
        ("party.promote", Method::Promote),
        ("party.remove", Method::Remove),
        ("party.close", Method::Close),
        ("party.status", Method::Status),
    ] {
        let handler = Arc::new(Handler {
            parties: parties.clone(),
            matchmaker: matchmaker.clone(),
            method,
        });
        if let Err(err) = registry.register_builtin(name, handler) {
            tracing::warn!(method = name, error = %err, "built-in RPC not registered");
        }
    }
}
