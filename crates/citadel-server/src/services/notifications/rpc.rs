//! `notifications.list` and `notifications.mark_read` (`services.md` §4.1):
//! JSON in, JSON out. The caller is the authenticated account of the
//! connection (the registry already refused guests); no payload field can
//! name another user.

use std::sync::Arc;

use bytes::Bytes;
use serde::Deserialize;
use serde_json::json;

use super::{NotificationService, NotifyError};
use crate::rpc::{
    AUTHENTICATION_REQUIRED, INVALID_JSON_BODY, RpcContext, RpcError, RpcHandler, RpcRegistry,
};
use crate::util::BoxFuture;

/// Parses a JSON object payload; an empty payload is `{}`.
pub fn parse_payload<T: for<'de> Deserialize<'de>>(payload: &[u8]) -> Result<T, RpcError> {
    let text: &[u8] = if payload.iter().all(u8::is_ascii_whitespace) {
        b"{}"
    } else {
        payload
    };
    serde_json::from_slice(text).map_err(|_| RpcError::Client(INVALID_JSON_BODY))
}

fn reply(value: serde_json::Value) -> Result<Bytes, RpcError> {
    Ok(Bytes::from(value.to_string()))
}

fn failed(err: NotifyError) -> RpcError {
    match err {
        NotifyError::Invalid(message) => RpcError::Invalid(message),
        other => RpcError::Internal(other.to_string()),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListRequest {
    limit: Option<i64>,
    cursor: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MarkReadRequest {
    ids: Vec<String>,
}

struct List(Arc<NotificationService>);
struct MarkRead(Arc<NotificationService>);

impl RpcHandler for List {
    fn call(&self, ctx: RpcContext, payload: Bytes) -> BoxFuture<Result<Bytes, RpcError>> {
        let service = self.0.clone();
        Box::pin(async move {
            let user = ctx
                .user_id
                .ok_or(RpcError::Client(AUTHENTICATION_REQUIRED))?;
            let request: ListRequest = parse_payload(&payload)?;
            let (items, cursor) = service
                .list(&user, request.limit, request.cursor.as_deref())
                .await
                .map_err(failed)?;
            reply(json!({ "notifications": items, "cursor": cursor }))
        })
    }
}

impl RpcHandler for MarkRead {
    fn call(&self, ctx: RpcContext, payload: Bytes) -> BoxFuture<Result<Bytes, RpcError>> {
        let service = self.0.clone();
        Box::pin(async move {
            let user = ctx
                .user_id
                .ok_or(RpcError::Client(AUTHENTICATION_REQUIRED))?;
            let request: MarkReadRequest = parse_payload(&payload)?;
            let read = service
                .mark_read(&user, request.ids)
                .await
                .map_err(failed)?;
            reply(json!({ "read_ids": read }))
        })
    }
}

/// Registers the `notifications.*` methods.
pub fn register(registry: &RpcRegistry, service: &Arc<NotificationService>) {
    let handlers: [(&str, Arc<dyn RpcHandler>); 2] = [
        ("notifications.list", Arc::new(List(service.clone()))),
        (
            "notifications.mark_read",
            Arc::new(MarkRead(service.clone())),
        ),
    ];
    for (method, handler) in handlers {
        if let Err(err) = registry.register_builtin(method, handler) {
            tracing::warn!(method, error = %err, "built-in RPC not registered");
        }
    }
}
