//! `matchmaker.add`, `cancel`, `status` and `accept` (`services.md`
//! §3.1–3.2): request validation with the documented messages, and the
//! after-reply steps (formation after `add`, entering the room after
//! `accept`). The caller is the connection's account; no payload field
//! names another user.

use std::sync::Arc;

use bytes::Bytes;
use serde::Deserialize;
use serde_json::json;

use super::Matchmaker;
use super::query::{Props, Value};
use super::service::{Request, Status};
use crate::rpc::{AUTHENTICATION_REQUIRED, RpcContext, RpcError, RpcHandler, RpcRegistry};
use crate::services::notifications::rpc::parse_payload;
use crate::util::BoxFuture;

type Json = serde_json::Value;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AddBody {
    query: Option<Json>,
    properties: Option<Json>,
    min_count: Option<Json>,
    max_count: Option<Json>,
    count_multiple: Option<Json>,
    party_id: Option<Json>,
    ttl_ms: Option<Json>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TicketBody {
    ticket_id: Option<Json>,
    join_token: Option<Json>,
}

fn invalid(message: impl Into<String>) -> RpcError {
    RpcError::Invalid(message.into())
}

/// An optional non-negative integer field.
fn integer(value: Option<&Json>, name: &str) -> Result<Option<u64>, RpcError> {
    match value {
        None | Some(Json::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| invalid(format!("{name} must be a non-negative integer"))),
    }
}

fn count(value: Option<&Json>, name: &str) -> Result<Option<u32>, RpcError> {
    match integer(value, name)? {
        Some(n) if n > 255 => Err(invalid(format!("{name} must be at most 255"))),
        other => Ok(other.map(|n| n as u32)),
    }
}

fn valid_key(key: &str) -> bool {
    (1..=64).contains(&key.len())
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.')
}

/// At most 64 characters of a refused key, for the message.
fn shown(key: &str) -> String {
    key.chars().take(64).collect()
}

fn properties(value: Option<Json>, mm: &Matchmaker) -> Result<Props, RpcError> {
    let map = match value {
        None | Some(Json::Null) => return Ok(Props::new()),
        Some(Json::Object(map)) => map,
        Some(_) => return Err(invalid("properties must be an object")),
    };
    let cfg = mm.config();
    if map.len() > cfg.max_properties {
        return Err(invalid(format!(
            "too many properties (at most {})",
            cfg.max_properties
        )));
    }
    let mut out = Props::new();
    for (key, value) in map {
        if !valid_key(&key) {
            return Err(invalid(format!("invalid property name: {}", shown(&key))));
        }
        let value = match value {
            Json::String(s) if s.len() > cfg.max_property_value_bytes => {
                return Err(invalid(format!(
                    "property {key} exceeds {} bytes",
                    cfg.max_property_value_bytes
                )));
            }
            Json::String(s) => Value::Str(s),
            Json::Number(n) => match n.as_f64() {
                Some(f) if f.is_finite() => Value::Num(f),
                _ => return Err(invalid(format!("property {key} must be finite"))),
            },
            _ => {
                return Err(invalid(format!(
                    "property {key} must be a string or a number"
                )));
            }
        };
        out.insert(key, value);
    }
    Ok(out)
}

/// Checks a `matchmaker.add` body (§3.2), in the order of the table.
pub fn parse_add(payload: &[u8], mm: &Matchmaker) -> Result<Request, RpcError> {
    let body: AddBody = parse_payload(payload)?;
    let query = match body.query {
        None | Some(Json::Null) => String::new(),
        Some(Json::String(s)) => s,
        Some(_) => return Err(invalid("query must be a string")),
    };
    let properties = properties(body.properties, mm)?;
    let min_count = count(body.min_count.as_ref(), "min_count")?
        .ok_or_else(|| invalid("missing integer field: min_count"))?;
    if min_count < 2 {
        return Err(invalid("min_count must be at least 2"));
    }
    let max_count = count(body.max_count.as_ref(), "max_count")?
        .ok_or_else(|| invalid("missing integer field: max_count"))?;
    if max_count < min_count {
        return Err(invalid(
            "max_count must be greater than or equal to min_count",
        ));
    }
    let count_multiple = count(body.count_multiple.as_ref(), "count_multiple")?.unwrap_or(1);
    if count_multiple == 0 {
        return Err(invalid("count_multiple must be greater than zero"));
    }
    let party_id = match body.party_id {
        None | Some(Json::Null) => None,
        Some(Json::String(s)) if !s.is_empty() && s.len() <= 128 => Some(s),
        Some(_) => return Err(invalid("party_id must be a non-empty string")),
    };
    let ttl_ms = integer(body.ttl_ms.as_ref(), "ttl_ms")?
        .ok_or_else(|| invalid("missing integer field: ttl_ms"))?;
    if ttl_ms == 0 {
        return Err(invalid("ttl_ms must be greater than zero"));
    }
    Ok(Request {
        query,
        properties,
        min_count,
        max_count,
        count_multiple,
        party_id,
        ttl_ms,
    })
}

/// A ticket id field: 1–128 of `[A-Za-z0-9_-]` (§3.4).
fn ticket_id(value: Option<Json>, missing: &'static str) -> Result<String, RpcError> {
    match value {
        Some(Json::String(s))
            if (1..=128).contains(&s.len())
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') =>
        {
            Ok(s)
        }
        Some(Json::String(_)) => Err(invalid("invalid ticket id")),
        _ => Err(RpcError::Client(missing)),
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Method {
    Add,
    Cancel,
    Status,
    Accept,
}

struct Handler {
    mm: Arc<Matchmaker>,
    method: Method,
}

impl Handler {
    fn run(&self, ctx: &RpcContext, user: &str, payload: &[u8]) -> Result<Json, RpcError> {
        let mm = &self.mm;
        match self.method {
            Method::Add => {
                mm.admit_call(ctx.participant_id)
                    .map_err(RpcError::Client)?;
                let request = parse_add(payload, mm).inspect_err(|_| mm.refused())?;
                let id = mm
                    .add(ctx.participant_id, user, request)
                    .map_err(RpcError::Invalid)?;
                Ok(json!({ "ticket_id": id }))
            }
            Method::Cancel => {
                mm.admit_call(ctx.participant_id)
                    .map_err(RpcError::Client)?;
                let body: TicketBody = parse_payload(payload)?;
                let id = ticket_id(body.ticket_id, "missing string field: ticket_id")?;
                Ok(json!({ "cancelled": mm.cancel(user, &id) }))
            }
            Method::Status => {
                let body: TicketBody = parse_payload(payload)?;
                let id = ticket_id(body.ticket_id, "missing string field: ticket_id")?;
                Ok(match mm.status(user, &id).map_err(RpcError::Client)? {
                    Status::Queued => json!({ "state": "queued" }),
                    Status::Removed => json!({ "state": "removed" }),
                    Status::Matched(handoff) => json!({ "state": "matched", "match": handoff }),
                })
            }
            Method::Accept => {
                let body: TicketBody = parse_payload(payload)?;
                let id = ticket_id(body.ticket_id, "missing string field: ticket_id")?;
                let token = match body.join_token {
                    Some(Json::String(s)) if !s.is_empty() && s.len() <= 128 => s,
                    _ => return Err(RpcError::Client("missing string field: join_token")),
                };
                let match_id = mm
                    .accept(ctx.participant_id, user, &id, &token)
                    .map_err(RpcError::Client)?;
                Ok(json!({ "accepted": true, "match_id": match_id }))
            }
        }
    }
}

impl RpcHandler for Handler {
    fn call(&self, ctx: RpcContext, payload: Bytes) -> BoxFuture<Result<Bytes, RpcError>> {
        let result = match &ctx.user_id {
            None => Err(RpcError::Client(AUTHENTICATION_REQUIRED)),
            Some(user) => self.run(&ctx, user, &payload),
        };
        Box::pin(async move { result.map(|v| Bytes::from(v.to_string())) })
    }

    fn after_reply(&self, ctx: &RpcContext) {
        match self.method {
            Method::Add => {
                let Some(id) = self.mm.queued_ticket(ctx.participant_id) else {
                    return;
                };
                let mm = self.mm.clone();
                tokio::spawn(async move {
                    mm.form(&id).await;
                });
            }
            Method::Accept => self.mm.enter(ctx.participant_id),
            Method::Cancel | Method::Status => {}
        }
    }
}

/// Registers the `matchmaker.*` methods.
pub fn register(registry: &RpcRegistry, mm: &Arc<Matchmaker>) {
    for (name, method) in [
        ("matchmaker.add", Method::Add),
        ("matchmaker.cancel", Method::Cancel),
        ("matchmaker.status", Method::Status),
        ("matchmaker.accept", Method::Accept),
    ] {
        let handler = Arc::new(Handler {
            mm: mm.clone(),
            method,
        });
        if let Err(err) = registry.register_builtin(name, handler) {
            tracing::warn!(method = name, error = %err, "built-in RPC not registered");
        }
    }
}
