//! The `groups.*` client RPCs and the payload reader they share with the
//! trusted operations.
//!
//! A payload is a JSON object (empty means `{}`) whose keys must be among
//! the method's; anything else is `invalid JSON body`. A required user id
//! that is absent, empty or not a string is `missing string field: <name>`;
//! a `group_id` that is absent or not a positive integer is `missing
//! integer field: group_id`. The caller is the connection's account; no
//! field names the actor.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{Map, Value};

use super::GroupService;
use crate::rpc::{AUTHENTICATION_REQUIRED, INVALID_JSON_BODY, RpcContext, RpcError, RpcRegistry};

/// A parsed payload object.
#[derive(Debug, Clone, Default)]
pub struct Fields(Map<String, Value>);

impl Fields {
    /// Parses `payload`, refusing keys outside `allowed`.
    pub fn parse(payload: &[u8], allowed: &[&str]) -> Result<Fields, RpcError> {
        if payload.iter().all(u8::is_ascii_whitespace) {
            return Ok(Fields::default());
        }
        match serde_json::from_slice::<Value>(payload) {
            Ok(Value::Object(map)) if map.keys().all(|k| allowed.contains(&k.as_str())) => {
                Ok(Fields(map))
            }
            _ => Err(RpcError::Client(INVALID_JSON_BODY)),
        }
    }

    /// The raw value of a key.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.0.get(name)
    }

    /// A required non-empty string.
    pub fn string(&self, name: &str) -> Result<String, RpcError> {
        match self.0.get(name) {
            Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
            _ => Err(RpcError::Invalid(format!("missing string field: {name}"))),
        }
    }

    /// The required `group_id`: a positive JSON integer (u64).
    pub fn group_id(&self) -> Result<u64, RpcError> {
        positive_id(self.0.get("group_id"))
            .ok_or_else(|| RpcError::Invalid("missing integer field: group_id".into()))
    }

    /// An optional string (`null` is absent).
    pub fn opt_string(&self, name: &str) -> Result<Option<String>, RpcError> {
        match self.0.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(RpcError::Invalid(format!("{name} must be a string"))),
        }
    }

    /// An optional boolean.
    pub fn opt_bool(&self, name: &str) -> Result<Option<bool>, RpcError> {
        match self.0.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(RpcError::Invalid(format!("{name} must be a boolean"))),
        }
    }

    /// An optional unsigned 32-bit integer.
    pub fn opt_u32(&self, name: &str) -> Result<Option<u32>, RpcError> {
        match self.0.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .map(Some)
                .ok_or_else(|| RpcError::Invalid(format!("{name} must be a non-negative integer"))),
        }
    }
}

/// A group id on the wire: a positive JSON integer that fits a u64 (a
/// string, a fraction, zero or a negative number is not one).
pub fn positive_id(value: Option<&Value>) -> Option<u64> {
    value.and_then(Value::as_u64).filter(|&id| id > 0)
}

#[derive(Clone, Copy)]
enum Method {
    Create,
    List,
    Get,
    Update,
    Delete,
    AddMember,
    Leave,
    Kick,
    Promote,
    Demote,
}

const EDITABLE: &[&str] = &[
    "group_id",
    "name",
    "description",
    "open",
    "max_members",
    "metadata",
];
const TARGET: &[&str] = &["group_id", "user_id"];

impl Method {
    fn keys(self) -> &'static [&'static str] {
        match self {
            Method::Create => &EDITABLE[1..],
            Method::Update => EDITABLE,
            Method::List => &["name_prefix", "mine", "limit", "cursor"],
            Method::Get => &["group_id", "limit", "cursor"],
            Method::Delete | Method::Leave => &["group_id"],
            Method::AddMember | Method::Kick | Method::Promote | Method::Demote => TARGET,
        }
    }
}

/// One `groups.*` client call of an authenticated player.
async fn call(
    service: Arc<GroupService>,
    method: Method,
    ctx: RpcContext,
    payload: Bytes,
) -> Result<Value, RpcError> {
    let actor = ctx
        .user_id
        .ok_or(RpcError::Client(AUTHENTICATION_REQUIRED))?;
    let fields = Fields::parse(&payload, method.keys())?;
    let s = &service;
    let reply = match method {
        Method::Create => s.create(&actor, fields).await?,
        Method::List => s.list(&actor, fields).await?,
        Method::Get => s.get(&actor, fields).await?,
        Method::Update => s.update(&actor, fields).await?,
        Method::Delete => s.delete(&actor, fields).await?,
        Method::AddMember => s.add_member(&actor, fields).await?,
        Method::Leave => s.leave(&actor, fields).await?,
        Method::Kick => s.kick(&actor, fields).await?,
        Method::Promote => s.promote(&actor, fields).await?,
        Method::Demote => s.demote(&actor, fields).await?,
    };
    Ok(reply)
}

/// Registers the `groups.*` client methods.
pub fn register(registry: &RpcRegistry, service: &Arc<GroupService>) {
    let methods = [
        ("groups.create", Method::Create),
        ("groups.list", Method::List),
        ("groups.get", Method::Get),
        ("groups.update", Method::Update),
        ("groups.delete", Method::Delete),
        ("groups.add_member", Method::AddMember),
        ("groups.leave", Method::Leave),
        ("groups.kick", Method::Kick),
        ("groups.promote", Method::Promote),
        ("groups.demote", Method::Demote),
    ];
    crate::services::register_json_methods(registry, service, methods, call);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_are_objects_with_known_keys() {
        assert!(Fields::parse(b"", &["a"]).unwrap().get("a").is_none());
        assert!(Fields::parse(br#"{"a":"x"}"#, &["a"]).is_ok());
        for bad in [&b"[1]"[..], b"{\"b\":1}", b"nope", b"\"a\""] {
            assert!(
                matches!(
                    Fields::parse(bad, &["a"]),
                    Err(RpcError::Client(INVALID_JSON_BODY))
                ),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn field_types_are_checked() {
        let f = Fields::parse(
            br#"{"s":"", "n":5, "b":true, "neg":-1, "big":5000000000}"#,
            &["s", "n", "b", "neg", "big"],
        )
        .unwrap();
        assert_eq!(
            f.string("s").unwrap_err().client_message(),
            "missing string field: s"
        );
        assert_eq!(
            f.string("n").unwrap_err().client_message(),
            "missing string field: n"
        );
        assert_eq!(f.opt_u32("n").unwrap(), Some(5));
        let ids = Fields::parse(br#"{"group_id":9007199254740991}"#, &["group_id"]).unwrap();
        assert_eq!(ids.group_id().unwrap(), (1 << 53) - 1);
        for bad in [
            &br#"{"group_id":"7"}"#[..],
            br#"{"group_id":0}"#,
            br#"{"group_id":-3}"#,
            br#"{"group_id":1.5}"#,
            br#"{"group_id":null}"#,
            b"{}",
        ] {
            let f = Fields::parse(bad, &["group_id"]).unwrap();
            assert_eq!(
                f.group_id().unwrap_err().client_message(),
                "missing integer field: group_id",
                "{bad:?}"
            );
        }
        assert!(f.opt_u32("neg").is_err());
        assert!(f.opt_u32("big").is_err());
        assert_eq!(f.opt_bool("b").unwrap(), Some(true));
        assert!(f.opt_bool("n").is_err());
        assert_eq!(f.opt_string("absent").unwrap(), None);
    }
}
