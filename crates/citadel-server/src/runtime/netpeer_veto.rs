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
//! in Lua types. `true` or nil allows, `false` vetoes; any other value, an
//! error or the deadline vetoes too (fail closed, decided in the driver).
//!
//! What it is not: the wait or the apply (`crate::netpeer` validates,
//! awaits and commits with no lock held while Lua runs). Call order:
//! [`install`] once per VM (from `netpeer::install`); [`attach`] with the
//! node on every VM and reload; [`connect`] once when the worker starts.

use std::sync::{Arc, Weak};
use std::time::Instant;

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
pub(super) fn verdict_of(result: Result<bool, Failure>) -> Verdict {
    match result {
        Ok(true) => Verdict::Allow,
        Ok(false) => Verdict::Veto,
        Err(Failure::Timeout) => Verdict::Timeout,
        Err(Failure::Error(_) | Failure::OutOfMemory) => Verdict::Error,
    }
}

impl Vm {
    /// `netpeer_on_proposal`: `fn(ctx, proposal) -> true | false | nil`.
    /// `None` when the deadline passed before the call started (the
    /// driver has stopped waiting); no handler allows.
    pub fn netpeer_veto(&self, request: &VetoRequest) -> Option<Outcome<bool>> {
        let budget = request.deadline.checked_duration_since(Instant::now())?;
        if budget.is_zero() {
            return None;
        }
        Some(self.invoke(budget, |lua| {
            let Some(f) = lua.named_registry_value::<Option<Function>>(HANDLER)? else {
                return Ok(true);
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
            match f.call::<LuaValue>((ctx, proposal))? {
                LuaValue::Nil | LuaValue::Boolean(true) => Ok(true),
                LuaValue::Boolean(false) => Ok(false),
                _ => Err(mlua::Error::runtime(
                    "netpeer_on_proposal must return true, false or nil",
                )),
            }
        }))
    }
}
