//! Kind 28: the chat event, a closed version-1 JSON schema.
//!
//! Every event has `version` (1), `type` and `channel_id`; each type allows
//! exactly its own extra fields (services.md §5.5). Decoding rejects unknown
//! or duplicate fields, fields that belong to another type, unknown
//! versions or types, wrong numeric types and inconsistent message state
//! (a durable event's `message.last_event_id` must equal its `event_id`, a
//! removal is a tombstone, live messages are not).

use serde::{Deserialize, Serialize};

use super::{parse_json, write_json};
use crate::body::wire_body;
use crate::error::DecodeError;
use crate::protocol::KIND_CHAT_EVENT;

/// The only schema version.
pub const CHAT_EVENT_VERSION: u64 = 1;

/// Kind of channel a presence joined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChatChannelType {
    /// Between two friends.
    Direct,
    /// A group's channel.
    Group,
    /// The caller's current room.
    Room,
}

/// One subscription's presence in a channel.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChatPresence {
    /// Presence id (one per connection and channel).
    pub presence_id: String,
    /// Account id.
    pub user_id: String,
}

/// Full state of one message.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChatMessage {
    /// Per-channel increasing id (> 0).
    pub id: u64,
    /// Author user id.
    pub sender: String,
    /// Text; empty when deleted.
    pub content: String,
    /// Creation time, Unix ms.
    pub created_at_unix_ms: u64,
    /// Last change, Unix ms (>= created).
    pub updated_at_unix_ms: u64,
    /// Bumped by edit/delete (>= 1).
    pub revision: u64,
    /// Event id of the latest mutation (>= 1).
    pub last_event_id: u64,
    /// Tombstone flag.
    pub deleted: bool,
}

impl ChatMessage {
    fn validate(&self) -> Result<(), DecodeError> {
        let bad = |m: &str| Err(DecodeError::Json(format!("inconsistent message: {m}")));
        if self.id == 0 {
            return bad("id must be positive");
        }
        if self.revision == 0 || self.last_event_id == 0 {
            return bad("revision and last_event_id must be positive");
        }
        if self.updated_at_unix_ms < self.created_at_unix_ms {
            return bad("updated before created");
        }
        if self.deleted && !self.content.is_empty() {
            return bad("a tombstone has no content");
        }
        Ok(())
    }
}

/// What happened in the channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChatEventKind {
    /// `presence.join`.
    PresenceJoin {
        /// Channel kind.
        channel_type: ChatChannelType,
        /// Who joined.
        presence: ChatPresence,
    },
    /// `presence.leave`.
    PresenceLeave {
        /// Who left.
        presence: ChatPresence,
    },
    /// `typing` (ephemeral, no event id).
    Typing {
        /// Who is typing.
        presence: ChatPresence,
        /// Typing state.
        typing: bool,
        /// Clear a true state at this Unix ms deadline.
        expires_at: u64,
    },
    /// `message.create`.
    MessageCreate {
        /// Durable event id.
        event_id: u64,
        /// The new message.
        message: ChatMessage,
    },
    /// `message.update`.
    MessageUpdate {
        /// Durable event id.
        event_id: u64,
        /// The edited message.
        message: ChatMessage,
    },
    /// `message.remove`.
    MessageRemove {
        /// Durable event id.
        event_id: u64,
        /// The tombstoned message.
        message: ChatMessage,
    },
    /// `access.revoked` (terminal until a fresh join).
    AccessRevoked {
        /// The revoked presence.
        presence: ChatPresence,
    },
    /// `resync_required`.
    ResyncRequired {
        /// Durable history watermark to reconcile from.
        watermark_event_id: u64,
        /// Optional scopes.
        scopes: Option<Vec<String>>,
    },
}

/// A decoded kind-28 body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatEvent {
    /// Opaque channel id.
    pub channel_id: String,
    /// The event.
    pub kind: ChatEventKind,
}

/// The flat wire shape: every field optional, checked per type.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireEvent {
    version: u64,
    #[serde(rename = "type")]
    event_type: String,
    channel_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    channel_type: Option<ChatChannelType>,
    #[serde(skip_serializing_if = "Option::is_none")]
    presence: Option<ChatPresence>,
    #[serde(skip_serializing_if = "Option::is_none")]
    typing: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    expires_at: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    event_id: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<ChatMessage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    watermark_event_id: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    scopes: Option<Vec<String>>,
}

impl WireEvent {
    /// Names of the optional fields that are present.
    fn present(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        let fields: [(&'static str, bool); 8] = [
            ("channel_type", self.channel_type.is_some()),
            ("presence", self.presence.is_some()),
            ("typing", self.typing.is_some()),
            ("expires_at", self.expires_at.is_some()),
            ("event_id", self.event_id.is_some()),
            ("message", self.message.is_some()),
            ("watermark_event_id", self.watermark_event_id.is_some()),
            ("scopes", self.scopes.is_some()),
        ];
        for (name, here) in fields {
            if here {
                out.push(name);
            }
        }
        out
    }
}

fn json_err(msg: &str) -> DecodeError {
    DecodeError::Json(msg.to_owned())
}

impl ChatEvent {
    /// The `type` string of this event.
    pub fn type_name(&self) -> &'static str {
        match self.kind {
            ChatEventKind::PresenceJoin { .. } => "presence.join",
            ChatEventKind::PresenceLeave { .. } => "presence.leave",
            ChatEventKind::Typing { .. } => "typing",
            ChatEventKind::MessageCreate { .. } => "message.create",
            ChatEventKind::MessageUpdate { .. } => "message.update",
            ChatEventKind::MessageRemove { .. } => "message.remove",
            ChatEventKind::AccessRevoked { .. } => "access.revoked",
            ChatEventKind::ResyncRequired { .. } => "resync_required",
        }
    }

    /// The durable event id, for deduplication by `(channel_id, event_id)`.
    pub fn event_id(&self) -> Option<u64> {
        match &self.kind {
            ChatEventKind::MessageCreate { event_id, .. }
            | ChatEventKind::MessageUpdate { event_id, .. }
            | ChatEventKind::MessageRemove { event_id, .. } => Some(*event_id),
            _ => None,
        }
    }

    fn to_wire(&self) -> WireEvent {
        let mut w = WireEvent {
            version: CHAT_EVENT_VERSION,
            event_type: self.type_name().to_owned(),
            channel_id: self.channel_id.clone(),
            ..Default::default()
        };
        match &self.kind {
            ChatEventKind::PresenceJoin {
                channel_type,
                presence,
            } => {
                w.channel_type = Some(*channel_type);
                w.presence = Some(presence.clone());
            }
            ChatEventKind::PresenceLeave { presence }
            | ChatEventKind::AccessRevoked { presence } => {
                w.presence = Some(presence.clone());
            }
            ChatEventKind::Typing {
                presence,
                typing,
                expires_at,
            } => {
                w.presence = Some(presence.clone());
                w.typing = Some(*typing);
                w.expires_at = Some(*expires_at);
            }
            ChatEventKind::MessageCreate { event_id, message }
            | ChatEventKind::MessageUpdate { event_id, message }
            | ChatEventKind::MessageRemove { event_id, message } => {
                w.event_id = Some(*event_id);
                w.message = Some(message.clone());
            }
            ChatEventKind::ResyncRequired {
                watermark_event_id,
                scopes,
            } => {
                w.watermark_event_id = Some(*watermark_event_id);
                w.scopes = scopes.clone();
            }
        }
        w
    }

    /// Appends the JSON body.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        write_json(&self.to_wire(), out);
    }

    /// Decodes and validates the closed schema.
    pub fn decode(body: &[u8]) -> Result<Self, DecodeError> {
        let w: WireEvent = parse_json(body, &["presence", "message"])?;
        if w.version != CHAT_EVENT_VERSION {
            return Err(json_err("unsupported chat event version"));
        }
        let (allowed, optional): (&[&str], &[&str]) = match w.event_type.as_str() {
            "presence.join" => (&["channel_type", "presence"], &[]),
            "presence.leave" | "access.revoked" => (&["presence"], &[]),
            "typing" => (&["presence", "typing", "expires_at"], &[]),
            "message.create" | "message.update" | "message.remove" => {
                (&["event_id", "message"], &[])
            }
            "resync_required" => (&["watermark_event_id"], &["scopes"]),
            _ => return Err(json_err("unknown chat event type")),
        };
        let present = w.present();
        if let Some(extra) = present
            .iter()
            .find(|f| !allowed.contains(f) && !optional.contains(f))
        {
            return Err(DecodeError::Json(format!(
                "field `{extra}` is not allowed for this type"
            )));
        }
        if let Some(missing) = allowed.iter().find(|f| !present.contains(f)) {
            return Err(DecodeError::Json(format!("missing field `{missing}`")));
        }
        let missing = || json_err("missing field");
        let kind = match w.event_type.as_str() {
            "presence.join" => ChatEventKind::PresenceJoin {
                channel_type: w.channel_type.ok_or_else(missing)?,
                presence: w.presence.ok_or_else(missing)?,
            },
            "presence.leave" => ChatEventKind::PresenceLeave {
                presence: w.presence.ok_or_else(missing)?,
            },
            "access.revoked" => ChatEventKind::AccessRevoked {
                presence: w.presence.ok_or_else(missing)?,
            },
            "typing" => ChatEventKind::Typing {
                presence: w.presence.ok_or_else(missing)?,
                typing: w.typing.ok_or_else(missing)?,
                expires_at: w.expires_at.ok_or_else(missing)?,
            },
            "resync_required" => ChatEventKind::ResyncRequired {
                watermark_event_id: w.watermark_event_id.ok_or_else(missing)?,
                scopes: w.scopes,
            },
            durable => {
                let event_id = w.event_id.ok_or_else(missing)?;
                let message = w.message.ok_or_else(missing)?;
                if event_id == 0 {
                    return Err(json_err("event_id must be positive"));
                }
                message.validate()?;
                if message.last_event_id != event_id {
                    return Err(json_err("message.last_event_id must equal event_id"));
                }
                match durable {
                    "message.create" | "message.update" if message.deleted => {
                        return Err(json_err("a live message cannot be deleted"));
                    }
                    "message.remove" if !message.deleted => {
                        return Err(json_err("message.remove must carry a tombstone"));
                    }
                    _ => {}
                }
                match durable {
                    "message.create" => ChatEventKind::MessageCreate { event_id, message },
                    "message.update" => ChatEventKind::MessageUpdate { event_id, message },
                    _ => ChatEventKind::MessageRemove { event_id, message },
                }
            }
        };
        Ok(ChatEvent {
            channel_id: w.channel_id,
            kind,
        })
    }
}
wire_body!(ChatEvent, KIND_CHAT_EVENT);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closed_schema_rules() {
        let ok = br#"{"version":1,"type":"presence.leave","channel_id":"ch_1","presence":{"presence_id":"pr_1","user_id":"u"}}"#;
        assert!(ChatEvent::decode(ok).is_ok());
        let dup = br#"{"version":1,"type":"presence.leave","channel_id":"ch_1","channel_id":"ch_2","presence":{"presence_id":"pr_1","user_id":"u"}}"#;
        assert!(ChatEvent::decode(dup).is_err());
        let unknown = br#"{"version":1,"type":"presence.leave","channel_id":"ch_1","x":1,"presence":{"presence_id":"pr_1","user_id":"u"}}"#;
        assert!(ChatEvent::decode(unknown).is_err());
        let foreign = br#"{"version":1,"type":"presence.leave","channel_id":"ch_1","typing":true,"presence":{"presence_id":"pr_1","user_id":"u"}}"#;
        assert!(ChatEvent::decode(foreign).is_err());
        let v2 = br#"{"version":2,"type":"presence.leave","channel_id":"ch_1","presence":{"presence_id":"pr_1","user_id":"u"}}"#;
        assert!(ChatEvent::decode(v2).is_err());
    }
}
