//! Kind 27: one committed player notification (also the item shape of
//! `notifications.list`). Clients deduplicate by `id`.

use serde::{Deserialize, Serialize};

use super::{parse_json, write_json};
use crate::body::wire_body;
use crate::error::DecodeError;
use crate::protocol::KIND_NOTIFICATION;

/// A durable notification.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Notification {
    /// Opaque stable id (dedupe key).
    pub id: String,
    /// Application category code.
    pub code: i64,
    /// Short title.
    pub subject: String,
    /// Payload (an object in every known producer).
    pub content: serde_json::Value,
    /// Free text, e.g. `"server"`.
    pub sender: String,
    /// Creation time, Unix milliseconds.
    pub created_at_unix_ms: u64,
    /// When it was marked read (null while unread).
    pub read_at_unix_ms: Option<u64>,
}

impl Notification {
    /// Appends the JSON body.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        write_json(self, out);
    }
    /// Decodes the JSON body. `read_at_unix_ms` must be present (null when
    /// unread).
    pub fn decode(body: &[u8]) -> Result<Self, DecodeError> {
        #[derive(Deserialize)]
        struct Wire {
            id: String,
            code: i64,
            subject: String,
            content: serde_json::Value,
            sender: String,
            created_at_unix_ms: u64,
            read_at_unix_ms: serde_json::Value,
        }
        let w: Wire = parse_json(body, &[])?;
        let read_at_unix_ms = match w.read_at_unix_ms {
            serde_json::Value::Null => None,
            serde_json::Value::Number(n) => Some(
                n.as_u64()
                    .ok_or_else(|| DecodeError::Json("read_at_unix_ms must be a u64".into()))?,
            ),
            _ => {
                return Err(DecodeError::Json(
                    "read_at_unix_ms must be a u64 or null".into(),
                ));
            }
        };
        Ok(Notification {
            id: w.id,
            code: w.code,
            subject: w.subject,
            content: w.content,
            sender: w.sender,
            created_at_unix_ms: w.created_at_unix_ms,
            read_at_unix_ms,
        })
    }
}
wire_body!(Notification, KIND_NOTIFICATION);
