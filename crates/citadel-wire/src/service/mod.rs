//! JSON bodies of kinds 26-28: the matchmaker handoff, a durable
//! notification, and the closed version-1 chat event.
//!
//! All three are UTF-8 JSON. Kinds 26 and 27 tolerate unknown fields (so a
//! newer server does not break older clients); kind 28 is a closed schema:
//! unknown fields, duplicate keys, unknown versions or types, wrong numeric
//! types and inconsistent message state are all rejected.

mod chat;
mod matchmaker;
mod notification;

pub use chat::{
    CHAT_EVENT_VERSION, ChatChannelType, ChatEvent, ChatEventKind, ChatMessage, ChatPresence,
};
pub use matchmaker::MatchmakerMatched;
pub use notification::Notification;

use crate::error::DecodeError;

/// Parses a JSON object body into `T`. serde would also accept a JSON array
/// for a struct (its sequence form); the wire only ever carries objects, so
/// the top level and the named nested fields must be objects.
pub(crate) fn parse_json<T: serde::de::DeserializeOwned>(
    body: &[u8],
    nested_objects: &[&str],
) -> Result<T, DecodeError> {
    let text = std::str::from_utf8(body).map_err(|_| DecodeError::InvalidUtf8)?;
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| DecodeError::Json(e.to_string()))?;
    let object = value
        .as_object()
        .ok_or_else(|| DecodeError::Json("body must be a JSON object".into()))?;
    for name in nested_objects {
        if object.get(*name).is_some_and(|v| !v.is_object()) {
            return Err(DecodeError::Json(format!("`{name}` must be a JSON object")));
        }
    }
    // Parse the text again so duplicate keys and unknown fields are seen.
    serde_json::from_str(text).map_err(|e| DecodeError::Json(e.to_string()))
}

pub(crate) fn write_json<T: serde::Serialize>(value: &T, out: &mut Vec<u8>) {
    // Serialising these plain structs cannot fail (no maps with non-string
    // keys, no custom serialisers); an empty object is the safe fallback.
    if serde_json::to_writer(&mut *out, value).is_err() {
        out.extend_from_slice(b"{}");
    }
}
