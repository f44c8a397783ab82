//! The Lua NetworkPeer veto hook: `citadel.netpeer_on_proposal(fn(ctx,
//! proposal))`, judged on the VM thread as one budgeted call.
//!
//! What it is: the registration function (the handler lives in the VM's
//! registry; registering or clearing it tells the node's driver at once
//! whether proposals take the veto path), [`ScriptVeto`] (the driver's
//! [`VetoCaller`]: a non-blocking `try_send` of a typed call into the
//! runtime's bounded queue, the verdict back on a oneshot), and
//! [`Vm::netpeer_veto`], which runs the handler with the request's deadline
//! as its budget. `ctx` has `sender`, `user_id` (nil for guests),
//! `object_id`, `class_id` and `class` (the `name` given at registration,
//! if any); `proposal` maps each changed field name to its proposed value
//! in Lua types. `true` or nil allows, `false` vetoes, and
//! `{ veto = { "ammo", ... } }` refuses the named fields and lets the rest
//! apply ([`Verdict::Refuse`]; names the class has but the proposal does
//! not change are ignored, an empty list allows). Any other value, a
//! malformed table, a name the class does not have, an error or the
//! deadline vetoes everything (fail closed, decided in the driver).
//!
//! What it is not: the wait or the apply (`crate::netpeer` validates,
//! awaits and commits with no lock held while Lua runs). Call order:
//! [`install`] once per VM (from `netpeer::install`); [`attach`] with the
//! node on every VM and reload; [`connect`] once when the worker starts.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Instant;

use citadel_netpeer::class::MAX_CLASS_FIELDS;
use mlua::{Function, Lua, Table, Value as LuaValue};
use tokio::sync::oneshot;

use super::netpeer::{NetpeerHost, lua_of_plain};
use super::vm::{Failure, Outcome, Vm};
use super::{Call, Inner, Runtime};
use crate::netpeer::{NetPeerNode, Verdict, VetoCaller, VetoRequest};

const HANDLER: &str = "citadel.netpeer_on_proposal";
const CLASS_NAMES: &str = "citadel.netpeer_class_names";

/// Installs `citadel.netpeer_on_proposal(fn or nil)`.
pub fn install(lua: &Lua, citadel: &Table) -> mlua::Result<()> {
    lua.set_named_registry_value(CLASS_NAMES, lua.create_table()?)?;
    citadel.set(
        "netpeer_on_proposal",
        lua.create_function(|lua, f: Option<Function>| {
            let active = f.is_some();
            lua.set_named_registry_value(HANDLER, f)?;
            if let Some(host) = lua.app_data_ref::<NetpeerHost>() {
                host.0.set_lua_veto_active(active);
            }
            Ok(())
        })?,
    )
}

/// Whether this VM has a `netpeer_on_proposal` handler.
pub(super) fn has_handler(lua: &Lua) -> bool {
    lua.named_registry_value::<Option<Function>>(HANDLER)
        .ok()
        .flatten()
        .is_some()
}

/// Tells the node whether this VM has a handler (every VM, every reload).
pub fn attach(lua: &Lua, node: &NetPeerNode) {
    node.set_lua_veto_active(has_handler(lua));
}

/// Keeps a class's registration `name` for `ctx.class`.
pub fn remember_class_name(lua: &Lua, class_id: u32, name: &str) -> mlua::Result<()> {
    lua.named_registry_value::<Table>(CLASS_NAMES)?
        .set(class_id, name)
}

/// Installs the runtime as the node's verdict source.
pub(super) fn connect(node: &NetPeerNode, runtime: &Weak<Inner>) {
    node.set_veto_caller(Some(Arc::new(ScriptVeto {
        inner: runtime.clone(),
    })));
}

/// The driver's [`VetoCaller`]: queues the request for the VM thread.
pub struct ScriptVeto {
    inner: Weak<Inner>,
}

impl VetoCaller for ScriptVeto {
    fn submit(&self, request: VetoRequest) -> Option<oneshot::Receiver<Verdict>> {
        let inner = self.inner.upgrade()?;
        let (reply, rx) = oneshot::channel();
        Runtime { inner }
            .submit(Call::NetpeerVeto { request, reply })
            .then_some(rx)
    }
}

/// The verdict of a finished invocation.
pub(super) fn verdict_of(result: Result<Verdict, Failure>) -> Verdict {
    match result {
        Ok(verdict) => verdict,
        Err(Failure::Timeout) => Verdict::Timeout,
        Err(Failure::Error(_) | Failure::OutOfMemory) => Verdict::Error,
    }
}

const SHAPE: &str =
    "netpeer_on_proposal must return true, false, nil or { veto = { field names } }";

fn shape() -> mlua::Error {
    mlua::Error::runtime(SHAPE)
}

/// The handler's return value as a verdict; an error for anything else.
fn verdict_of_return(lua: &Lua, request: &VetoRequest, value: LuaValue) -> mlua::Result<Verdict> {
    match value {
        LuaValue::Nil | LuaValue::Boolean(true) => Ok(Verdict::Allow),
        LuaValue::Boolean(false) => Ok(Verdict::Veto),
        LuaValue::Table(t) => refusal_of(lua, request, &t),
        _ => Err(shape()),
    }
}

/// `{ veto = { name, ... } }` (raw reads: no metamethod runs) as the
/// positions of the named fields in the request. A name the proposal does
/// not change but the class has is ignored; one the class lacks is an
/// error.
fn refusal_of(lua: &Lua, request: &VetoRequest, reply: &Table) -> mlua::Result<Verdict> {
    let mut list = None;
    for pair in reply.pairs::<LuaValue, LuaValue>() {
        match pair? {
            (LuaValue::String(k), LuaValue::Table(v)) if k.as_bytes() == b"veto" => list = Some(v),
            _ => return Err(shape()),
        }
    }
    let names = names_of(&list.ok_or_else(shape)?)?;
    if names.is_empty() {
        return Ok(Verdict::Allow);
    }
    let proposed: HashMap<&str, usize> = request
        .fields
        .iter()
        .enumerate()
        .map(|(i, (name, _))| (name.as_str(), i))
        .collect();
    let mut positions = Vec::new();
    let mut elsewhere = Vec::new();
    for name in &names {
        match proposed.get(name.as_str()) {
            Some(&at) => positions.push(at),
            None => elsewhere.push(name.as_str()),
        }
    }
    if let Some(name) = super::netpeer::first_unknown_field(lua, request.class_id, &elsewhere)? {
        return Err(mlua::Error::runtime(format!(
            "netpeer_on_proposal: veto names unknown field `{name}`"
        )));
    }
    if positions.is_empty() {
        return Ok(Verdict::Allow);
    }
    Ok(Verdict::Refuse(positions))
}

/// A plain list of strings (keys exactly `1..=n`), at most one name per
/// possible class field.
fn names_of(list: &Table) -> mlua::Result<Vec<String>> {
    let len = list.raw_len();
    if len > MAX_CLASS_FIELDS {
        return Err(mlua::Error::runtime(format!(
            "netpeer_on_proposal: a veto list holds at most {MAX_CLASS_FIELDS} names"
        )));
    }
    let mut names = Vec::with_capacity(len);
    for i in 1..=len {
        match list.raw_get::<LuaValue>(i)? {
            LuaValue::String(s) => names.push(s.to_str().map_err(|_| shape())?.to_owned()),
            _ => return Err(shape()),
        }
    }
    // Any key besides 1..=len (a hole-free sequence has exactly len).
    if list.pairs::<LuaValue, LuaValue>().nth(len).is_some() {
        return Err(shape());
    }
    Ok(names)
}

impl Vm {
    /// `netpeer_on_proposal`: `fn(ctx, proposal) -> true | false | nil |
    /// { veto = { names } }`. `None` when the deadline passed before the
    /// call started (the driver has stopped waiting); no handler allows.
    pub fn netpeer_veto(&self, request: &VetoRequest) -> Option<Outcome<Verdict>> {
        let budget = request.deadline.checked_duration_since(Instant::now())?;
        if budget.is_zero() {
            return None;
        }
        Some(self.invoke(budget, |lua| {
            let Some(f) = lua.named_registry_value::<Option<Function>>(HANDLER)? else {
                return Ok(Verdict::Allow);
            };
            let ctx = lua.create_table()?;
            ctx.set("sender", request.participant_id)?;
            if let Some(user) = &request.user_id {
                ctx.set("user_id", user.as_str())?;
            }
            ctx.set("object_id", request.object_id)?;
            ctx.set("class_id", request.class_id)?;
            let name: Option<String> = lua
                .named_registry_value::<Table>(CLASS_NAMES)?
                .get(request.class_id)?;
            ctx.set("class", name)?;
            let proposal = lua.create_table()?;
            for (name, value) in &request.fields {
                proposal.set(name.as_str(), lua_of_plain(lua, value)?)?;
            }
            let value = f.call::<LuaValue>((ctx, proposal))?;
            verdict_of_return(lua, request, value)
        }))
    }
}

#[cfg(test)]
mod tests;
