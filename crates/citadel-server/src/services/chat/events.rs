//! The kind-28 event builders: every event goes through the wire crate's
//! closed version-1 schema ([`ChatEvent`]), so each type carries exactly its
//! own keys (`services.md` §5.5). Each builder encodes once; fan-out shares
//! the returned `Bytes`. Also the `Message` JSON of the RPC replies.
//!
//! What it is not: no delivery (see `outbox` and `registry`).

use bytes::Bytes;
use citadel_wire::service::{ChatChannelType, ChatEvent, ChatEventKind, ChatMessage, ChatPresence};
use citadel_wire::{Envelope, WireBody};

use crate::router::frame;
use crate::store::{EventType, MessageRecord};

/// The wire form of a stored message.
pub fn message(m: &MessageRecord) -> ChatMessage {
    ChatMessage {
        id: m.message_id,
        sender: m.sender.clone(),
        content: m.content.clone(),
        created_at_unix_ms: m.created_at,
        updated_at_unix_ms: m.updated_at,
        revision: m.revision,
        last_event_id: m.last_event_id,
        deleted: m.deleted,
    }
}

/// The `Message` object of RPC replies.
pub fn message_json(m: &MessageRecord) -> serde_json::Value {
    serde_json::to_value(message(m)).unwrap_or(serde_json::Value::Null)
}

fn body(channel_id: &str, kind: ChatEventKind) -> Vec<u8> {
    let event = ChatEvent {
        channel_id: channel_id.to_owned(),
        kind,
    };
    let mut out = Vec::new();
    event.encode_into(&mut out);
    out
}

fn framed(channel_id: &str, kind: ChatEventKind) -> Bytes {
    let event = ChatEvent {
        channel_id: channel_id.to_owned(),
        kind,
    };
    frame(&event.to_envelope())
}

/// The JSON text of a durable event (stored in the event log and the
/// outbox): the store's [`crate::store::EventEncoder`].
pub fn durable_json(
    channel_id: &str,
    event: EventType,
    event_id: u64,
    m: &MessageRecord,
) -> String {
    let message = message(m);
    let kind = match event {
        EventType::Create => ChatEventKind::MessageCreate { event_id, message },
        EventType::Update => ChatEventKind::MessageUpdate { event_id, message },
        EventType::Remove => ChatEventKind::MessageRemove { event_id, message },
    };
    String::from_utf8(body(channel_id, kind)).unwrap_or_default()
}

/// A framed kind-28 envelope around an already-encoded event JSON.
pub fn frame_payload(payload: &str) -> Bytes {
    frame(&Envelope::new(
        citadel_wire::protocol::KIND_CHAT_EVENT,
        Bytes::copy_from_slice(payload.as_bytes()),
    ))
}

/// `presence.join`.
pub fn presence_join(channel_id: &str, channel_type: ChatChannelType, p: &ChatPresence) -> Bytes {
    framed(
        channel_id,
        ChatEventKind::PresenceJoin {
            channel_type,
            presence: p.clone(),
        },
    )
}

/// `presence.leave`.
pub fn presence_leave(channel_id: &str, p: &ChatPresence) -> Bytes {
    framed(
        channel_id,
        ChatEventKind::PresenceLeave {
            presence: p.clone(),
        },
    )
}

/// `access.revoked`.
pub fn access_revoked(channel_id: &str, p: &ChatPresence) -> Bytes {
    framed(
        channel_id,
        ChatEventKind::AccessRevoked {
            presence: p.clone(),
        },
    )
}

/// `typing`.
pub fn typing(channel_id: &str, p: &ChatPresence, typing: bool, expires_at: u64) -> Bytes {
    framed(
        channel_id,
        ChatEventKind::Typing {
            presence: p.clone(),
            typing,
            expires_at,
        },
    )
}

/// `resync_required`.
pub fn resync_required(channel_id: &str, watermark_event_id: u64) -> Bytes {
    framed(
        channel_id,
        ChatEventKind::ResyncRequired {
            watermark_event_id,
            scopes: None,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durable_json_decodes_under_the_closed_schema() {
        let m = MessageRecord {
            message_id: 3,
            sender: "u".into(),
            content: String::new(),
            created_at: 1,
            updated_at: 2,
            revision: 2,
            last_event_id: 4,
            deleted: true,
        };
        let text = durable_json("ch_x", EventType::Remove, 4, &m);
        let event = ChatEvent::decode(text.as_bytes()).unwrap();
        assert_eq!(event.event_id(), Some(4));
        assert_eq!(event.type_name(), "message.remove");
    }
}
