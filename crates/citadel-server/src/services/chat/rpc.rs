//! The `chat.*` RPCs (`services.md` §5.2) and the operations of Lua
//! `citadel.chat_call`: JSON in, JSON out, one dispatch.
//!
//! Parsing order: a JSON object (else `invalid JSON body`) → the old
//! `{channel, channel_type}` payload, or a `target` on anything but join,
//! is `CHAT_PROTOCOL_UPGRADE_REQUIRED` → unknown fields are `invalid JSON
//! body` → required fields (`missing string field: <name>`). The actor is
//! always the connection's account (guests were refused by the registry).

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{Map, Value};

use super::{Caller, ChatError, ChatService};
use crate::rpc::{RpcContext, RpcError, RpcRegistry};

/// One chat method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// `chat.join`.
    Join,
    /// `chat.leave`.
    Leave,
    /// `chat.typing`.
    Typing,
    /// `chat.send`.
    Send,
    /// `chat.history`.
    History,
    /// `chat.edit`.
    Edit,
    /// `chat.delete`.
    Delete,
    /// `chat.moderate`.
    Moderate,
}

impl Method {
    /// Every method with its name.
    pub const ALL: [(&'static str, Method); 8] = [
        ("join", Method::Join),
        ("leave", Method::Leave),
        ("typing", Method::Typing),
        ("send", Method::Send),
        ("history", Method::History),
        ("edit", Method::Edit),
        ("delete", Method::Delete),
        ("moderate", Method::Moderate),
    ];

    fn fields(self) -> &'static [&'static str] {
        match self {
            Method::Join => &["target"],
            Method::Leave => &["channel_id"],
            Method::Typing => &["channel_id", "typing"],
            Method::Send => &["channel_id", "content"],
            Method::History => &[
                "channel_id",
                "limit",
                "before_message_id",
                "acknowledge_watermark",
            ],
            Method::Edit => &["channel_id", "message_id", "content"],
            Method::Delete | Method::Moderate => &["channel_id", "message_id"],
        }
    }
}

/// A payload as a JSON object; empty is `{}`.
fn object(payload: &[u8]) -> Result<Map<String, Value>, ChatError> {
    if payload.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice(payload) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(ChatError::InvalidJson),
    }
}

fn string(map: &Map<String, Value>, name: &'static str) -> Result<String, ChatError> {
    match map.get(name) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        _ => Err(ChatError::MissingString(name)),
    }
}

/// Content may be empty on the wire (then the content rule refuses it).
fn content(map: &Map<String, Value>) -> Result<String, ChatError> {
    match map.get("content") {
        Some(Value::String(s)) => Ok(s.clone()),
        _ => Err(ChatError::MissingString("content")),
    }
}

fn integer(map: &Map<String, Value>, name: &'static str) -> Result<u64, ChatError> {
    map.get(name)
        .and_then(Value::as_u64)
        .ok_or(ChatError::MissingInteger(name))
}

fn optional(map: &Map<String, Value>, name: &'static str) -> Result<Option<u64>, ChatError> {
    match map.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_u64().map(Some).ok_or(ChatError::InvalidJson),
    }
}

/// Parses and runs one method for `caller`.
pub async fn dispatch(
    service: &ChatService,
    caller: &Caller,
    method: Method,
    payload: &[u8],
) -> Result<Value, ChatError> {
    let map = object(payload)?;
    if map.contains_key("channel") || map.contains_key("channel_type") {
        return Err(ChatError::UpgradeRequired);
    }
    if method != Method::Join && map.contains_key("target") {
        return Err(ChatError::UpgradeRequired);
    }
    let fields = method.fields();
    if map.keys().any(|k| !fields.contains(&k.as_str())) {
        return Err(ChatError::InvalidJson);
    }
    if method == Method::Join {
        let target = map
            .get("target")
            .ok_or(ChatError::MissingString("target"))?;
        return service.join(caller, target).await;
    }
    let channel_id = string(&map, "channel_id")?;
    let channel = channel_id.as_str();
    match method {
        Method::Join => Err(ChatError::InvalidJson),
        Method::Leave => Ok(service.leave(caller, channel)),
        Method::Typing => match map.get("typing") {
            Some(Value::Bool(typing)) => service.typing(caller, channel, *typing).await,
            _ => Err(ChatError::MissingBool("typing")),
        },
        Method::Send => service.send(caller, channel, &content(&map)?).await,
        Method::History => {
            let limit = optional(&map, "limit")?;
            let before = optional(&map, "before_message_id")?;
            let ack = optional(&map, "acknowledge_watermark")?;
            service.history(caller, channel, limit, before, ack).await
        }
        Method::Edit => {
            let id = integer(&map, "message_id")?;
            service.edit(caller, channel, id, &content(&map)?).await
        }
        Method::Delete => {
            service
                .delete(caller, channel, integer(&map, "message_id")?)
                .await
        }
        Method::Moderate => {
            service
                .moderate(caller, channel, integer(&map, "message_id")?)
                .await
        }
    }
}

impl ChatService {
    /// `citadel.chat_call(actor, operation, payload_json)`: a trusted
    /// `send`, `history`, `edit`, `delete` or `moderate` acting as `actor`
    /// on a stored direct or group channel (room channels are refused:
    /// they belong to a connection). No subscription is needed; the actor
    /// is still re-authorised, and the per-channel limits apply.
    pub async fn trusted(
        &self,
        actor: &str,
        operation: &str,
        payload: &[u8],
    ) -> Result<Value, ChatError> {
        let method = match operation {
            "send" => Method::Send,
            "history" => Method::History,
            "edit" => Method::Edit,
            "delete" => Method::Delete,
            "moderate" => Method::Moderate,
            _ => return Err(ChatError::UnknownOperation),
        };
        let caller = Caller {
            user: actor.to_owned(),
            participant: None,
            place: None,
        };
        dispatch(self, &caller, method, payload).await
    }
}

/// One `chat.*` call of an authenticated player.
async fn call(
    service: Arc<ChatService>,
    method: Method,
    ctx: RpcContext,
    payload: Bytes,
) -> Result<Value, RpcError> {
    let user = ctx
        .user_id
        .ok_or(ChatError::AuthenticationRequired.into_rpc())?;
    let caller = Caller {
        user,
        participant: Some(ctx.participant_id),
        place: Some(ctx.place),
    };
    dispatch(&service, &caller, method, &payload)
        .await
        .map_err(ChatError::into_rpc)
}

/// Registers the `chat.*` methods.
pub fn register(registry: &RpcRegistry, service: &Arc<ChatService>) {
    let methods = Method::ALL.map(|(name, method)| (format!("chat.{name}"), method));
    crate::services::register_json_methods(registry, service, methods, call);
}
