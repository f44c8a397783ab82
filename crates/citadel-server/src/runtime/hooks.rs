//! Hook registration (`citadel.on_rpc`, `on_message`, `on_join`,
//! `on_leave`, `on_tick`, `on_room_create`, `on_room_join`,
//! `on_matchmaker_matched`, `on_input`) and the
//! [`Registered`] snapshot the node reads without touching the VM.
//!
//! Handlers live in a Lua table kept in the VM's registry (never in Rust
//! app data, so a dropped VM is freed). What it is not: it does not call
//! handlers (the VM does). Call order: [`install`] once per VM, then
//! [`registered`] after the load and after any invocation that registered
//! something (the `Dirty` marker says so).

use std::collections::BTreeSet;

use mlua::{Function, Lua, Table};

use crate::rpc::is_reserved_method;

const HANDLERS: &str = "citadel.handlers";

/// The key [`Registered::hooks`] lists `netpeer_on_proposal` under.
pub const NETPEER_VETO: &str = "netpeer_on_proposal";

/// Set in app data when a registration happened (the snapshot is stale).
#[derive(Debug, Default)]
pub struct Dirty(pub bool);

/// The single-handler hooks (last registration wins).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    /// `on_join`.
    Join,
    /// `on_leave`.
    Leave,
    /// `on_tick`.
    Tick,
    /// `on_room_create`.
    RoomCreate,
    /// `on_room_join`.
    RoomJoin,
    /// `on_matchmaker_matched`.
    MatchmakerMatched,
    /// `on_input` (predicted movement, `movement.rs`).
    Input,
}

impl Hook {
    const ALL: [Hook; 7] = [
        Hook::Join,
        Hook::Leave,
        Hook::Tick,
        Hook::RoomCreate,
        Hook::RoomJoin,
        Hook::MatchmakerMatched,
        Hook::Input,
    ];

    fn key(self) -> &'static str {
        match self {
            Hook::Join => "join",
            Hook::Leave => "leave",
            Hook::Tick => "tick",
            Hook::RoomCreate => "room_create",
            Hook::RoomJoin => "room_join",
            Hook::MatchmakerMatched => "matchmaker_matched",
            Hook::Input => "input",
        }
    }
}

/// What a script registered: read by the gateway to route without the VM.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Registered {
    /// RPC method names.
    pub rpc: BTreeSet<String>,
    /// Message kinds with an `on_message` handler.
    pub message: BTreeSet<u16>,
    /// Single hooks present.
    pub hooks: BTreeSet<&'static str>,
}

impl Registered {
    /// Whether `hook` has a handler.
    pub fn has(&self, hook: Hook) -> bool {
        self.hooks.contains(hook.key())
    }

    /// No handler at all (a reload that registers nothing is rejected).
    pub fn is_empty(&self) -> bool {
        self.rpc.is_empty() && self.message.is_empty() && self.hooks.is_empty()
    }
}

fn handlers(lua: &Lua) -> mlua::Result<Table> {
    lua.named_registry_value(HANDLERS)
}

fn mark_dirty(lua: &Lua) {
    if let Some(mut d) = lua.app_data_mut::<Dirty>() {
        d.0 = true;
    }
}

/// Creates the handler table and the `on_*` registration functions.
pub fn install(lua: &Lua, citadel: &Table) -> mlua::Result<()> {
    let table = lua.create_table()?;
    table.set("rpc", lua.create_table()?)?;
    table.set("message", lua.create_table()?)?;
    lua.set_named_registry_value(HANDLERS, table)?;
    lua.set_app_data(Dirty(false));

    citadel.set(
        "on_rpc",
        lua.create_function(|lua, (method, f): (String, Function)| {
            if method.is_empty() || method.len() > 128 {
                return Err(mlua::Error::runtime("on_rpc: method must be 1..=128 bytes"));
            }
            if is_reserved_method(&method) {
                return Err(mlua::Error::runtime(format!(
                    "on_rpc: `{method}` is in a reserved built-in namespace"
                )));
            }
            handlers(lua)?.get::<Table>("rpc")?.set(method, f)?;
            mark_dirty(lua);
            Ok(())
        })?,
    )?;
    citadel.set(
        "on_message",
        lua.create_function(|lua, (kind, f): (i64, Function)| {
            let kind = u16::try_from(kind)
                .ok()
                .filter(|k| *k != 0)
                .ok_or_else(|| mlua::Error::runtime("on_message: kind must be in 1..=65535"))?;
            handlers(lua)?.get::<Table>("message")?.set(kind, f)?;
            mark_dirty(lua);
            Ok(())
        })?,
    )?;
    for hook in Hook::ALL {
        let name = format!("on_{}", hook.key());
        citadel.set(
            name,
            lua.create_function(move |lua, f: Function| {
                handlers(lua)?.set(hook.key(), f)?;
                mark_dirty(lua);
                Ok(())
            })?,
        )?;
    }
    Ok(())
}

/// The handler of `hook`, if registered.
pub fn hook_fn(lua: &Lua, hook: Hook) -> mlua::Result<Option<Function>> {
    handlers(lua)?.get(hook.key())
}

/// The handler of RPC `method`, if registered.
pub fn rpc_fn(lua: &Lua, method: &str) -> mlua::Result<Option<Function>> {
    handlers(lua)?.get::<Table>("rpc")?.get(method)
}

/// The `on_message` handler of `kind`, if registered.
pub fn message_fn(lua: &Lua, kind: u16) -> mlua::Result<Option<Function>> {
    handlers(lua)?.get::<Table>("message")?.get(kind)
}

/// A fresh snapshot of what is registered.
pub fn registered(lua: &Lua) -> mlua::Result<Registered> {
    let table = handlers(lua)?;
    let mut out = Registered::default();
    for pair in table.get::<Table>("rpc")?.pairs::<String, Function>() {
        out.rpc.insert(pair?.0);
    }
    for pair in table.get::<Table>("message")?.pairs::<i64, Function>() {
        if let Ok(kind) = u16::try_from(pair?.0) {
            out.message.insert(kind);
        }
    }
    for hook in Hook::ALL {
        if table.get::<Option<Function>>(hook.key())?.is_some() {
            out.hooks.insert(hook.key());
        }
    }
    // Kept beside the others so a script whose only handler is the
    // NetworkPeer veto is not "empty" (its own registry slot: the driver
    // is told directly when it changes).
    if super::netpeer_veto::has_handler(lua) {
        out.hooks.insert(NETPEER_VETO);
    }
    if let Some(mut d) = lua.app_data_mut::<Dirty>() {
        d.0 = false;
    }
    Ok(out)
}

/// Whether a registration happened since the last snapshot.
pub fn is_dirty(lua: &Lua) -> bool {
    lua.app_data_ref::<Dirty>().is_some_and(|d| d.0)
}
