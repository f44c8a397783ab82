//! Host functions that reach the player services from a script:
//! `citadel.notifications_send`, `notifications_list`,
//! `notifications_mark_read`, `groups_call` and `chat_call`
//! (runtime-and-config.md §3).
//!
//! What it is: a synchronous bridge. The VM thread hands the service call
//! to the node's async runtime and waits for its answer, at most until the
//! invocation's deadline; the call's effect (a commit) may still complete
//! after a timeout, exactly like a client that gave up waiting. What it is
//! not: delivery or validation, which stay in the services. Before the node
//! installs [`HostServices`] (unit tests, `citadel check`) the functions
//! raise "not available".

use std::sync::Arc;
use std::time::{Duration, Instant};

use citadel_wire::service::Notification;
use mlua::{Lua, Table, Value};

use super::api::Invocation;
use crate::services::groups::GroupService;
use crate::services::notifications::{NotificationService, Outgoing};

/// What the host functions call; installed into every VM (and every hot
/// reload) by the worker.
#[derive(Clone)]
pub struct HostServices {
    /// Durable notifications.
    pub notifications: Arc<NotificationService>,
    /// Groups (trusted operations).
    pub groups: Arc<GroupService>,
    /// Durable chat (trusted operations).
    pub chat: Arc<crate::services::chat::ChatService>,
    /// The node's async runtime.
    pub handle: tokio::runtime::Handle,
}

impl std::fmt::Debug for HostServices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostServices").finish_non_exhaustive()
    }
}

/// Longest wait when no invocation deadline is known.
const FALLBACK_WAIT: Duration = Duration::from_secs(5);

/// Runs `call` on the node's runtime and waits for it within the current
/// invocation's deadline.
fn run<T, F>(lua: &Lua, call: impl FnOnce(HostServices) -> F) -> mlua::Result<T>
where
    F: Future<Output = Result<T, String>> + Send + 'static,
    T: Send + 'static,
{
    let host = lua
        .app_data_ref::<HostServices>()
        .map(|h| h.clone())
        .ok_or_else(|| mlua::Error::runtime("player services are not available here"))?;
    let deadline = lua
        .app_data_ref::<Invocation>()
        .and_then(|inv| inv.deadline)
        .unwrap_or_else(|| Instant::now() + FALLBACK_WAIT);
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let handle = host.handle.clone();
    let future = call(host);
    handle.spawn(async move {
        let _ = tx.send(future.await);
    });
    match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        Ok(result) => result.map_err(mlua::Error::runtime),
        Err(_) => Err(mlua::Error::runtime("player service call timed out")),
    }
}

fn notification_table(lua: &Lua, n: &Notification) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set("id", n.id.as_str())?;
    t.set("code", n.code)?;
    t.set("subject", n.subject.as_str())?;
    t.set("content", n.content.to_string())?;
    t.set("sender", n.sender.as_str())?;
    t.set("created_at_unix_ms", n.created_at_unix_ms)?;
    t.set("read_at_unix_ms", n.read_at_unix_ms)?;
    Ok(t)
}

fn json_arg(text: &str) -> mlua::Result<serde_json::Value> {
    serde_json::from_str(text).map_err(|_| mlua::Error::runtime("content_json is not valid JSON"))
}

/// Installs the service host functions into the `citadel` table.
pub fn install(lua: &Lua, citadel: &Table) -> mlua::Result<()> {
    type SendArgs = (String, i64, String, String, Option<String>, Option<String>);
    citadel.set(
        "notifications_send",
        lua.create_function(
            |lua, (recipient, code, subject, content, sender, key): SendArgs| {
                let outgoing = Outgoing {
                    recipient,
                    code,
                    subject,
                    content: json_arg(&content)?,
                    sender,
                    delivery_key: key,
                };
                let sent = run(lua, |host| async move {
                    host.notifications
                        .send(outgoing)
                        .await
                        .map_err(|e| e.to_string())
                })?;
                notification_table(lua, &sent)
            },
        )?,
    )?;
    citadel.set(
        "notifications_list",
        lua.create_function(
            |lua, (recipient, limit, cursor): (String, Option<i64>, Option<String>)| {
                let (items, next) = run(lua, |host| async move {
                    host.notifications
                        .list(&recipient, limit, cursor.as_deref())
                        .await
                        .map_err(|e| e.to_string())
                })?;
                let out = lua.create_table()?;
                let list = lua.create_table()?;
                for (i, n) in items.iter().enumerate() {
                    list.set(i + 1, notification_table(lua, n)?)?;
                }
                out.set("items", list)?;
                out.set("next_cursor", next)?;
                Ok(out)
            },
        )?,
    )?;
    citadel.set(
        "notifications_mark_read",
        lua.create_function(|lua, (recipient, ids): (String, Table)| {
            let ids: Vec<String> = ids
                .sequence_values::<Value>()
                .map(|v| match v? {
                    Value::String(s) => Ok(s.to_str()?.to_owned()),
                    _ => Err(mlua::Error::runtime("ids must be strings")),
                })
                .collect::<mlua::Result<_>>()?;
            let changed = run(lua, |host| async move {
                host.notifications
                    .mark_read(&recipient, ids)
                    .await
                    .map_err(|e| e.to_string())
            })?;
            lua.create_sequence_from(changed)
        })?,
    )?;
    // Refusals (a role rule, a bound) are answers, not failures: they come
    // back as `nil, message`; only a misuse or an unavailable service raises.
    citadel.set(
        "groups_call",
        lua.create_function(
            |lua, (actor, operation, payload): (String, String, Option<String>)| {
                let reply = run(lua, |host| async move {
                    Ok(host
                        .groups
                        .trusted(&actor, &operation, payload.unwrap_or_default().as_bytes())
                        .await)
                })?;
                answer(reply, "groups_call")
            },
        )?,
    )?;
    // The same answer convention; room targets are refused (a script has
    // no gateway room), and no subscription is needed.
    citadel.set(
        "chat_call",
        lua.create_function(
            |lua, (actor, operation, payload): (String, String, Option<String>)| {
                let reply = run(lua, |host| async move {
                    Ok(host
                        .chat
                        .trusted(&actor, &operation, payload.unwrap_or_default().as_bytes())
                        .await
                        .map_err(crate::services::chat::ChatError::into_rpc))
                })?;
                answer(reply, "chat_call")
            },
        )?,
    )?;
    Ok(())
}

/// A service answer as Lua sees it: `(json, nil)` or `(nil, message)`.
fn answer(
    reply: Result<serde_json::Value, crate::rpc::RpcError>,
    what: &str,
) -> mlua::Result<(Option<String>, Option<String>)> {
    match reply {
        Ok(value) => Ok((Some(value.to_string()), None)),
        Err(err) => {
            if let crate::rpc::RpcError::Internal(detail) = &err {
                tracing::warn!(error = %detail, call = what, "service call failed");
            }
            let text = String::from_utf8_lossy(&err.client_message()).into_owned();
            Ok((None, Some(text)))
        }
    }
}
