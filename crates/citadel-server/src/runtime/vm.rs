//! One Lua VM: loading `main.lua` and running each hook as one budgeted
//! invocation that yields a typed [`Outcome`].
//!
//! Every invocation gets a fresh [`Invocation`] (deadline, command queue);
//! an error, a timeout (instruction hook) or an out-of-memory error fails
//! that invocation only and discards its commands; the VM stays usable.
//! What it is not: it owns no thread, queue or connection (see `worker.rs`)
//! and it never formats errors for clients. Call order: [`Vm::load`], then
//! any number of invocations, all on one thread at a time.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use mlua::{Lua, Table, Value};

use super::api::{self, ActorIds, Command, Invocation};
use super::hooks::{self, Hook, Registered};
use super::sandbox;
use crate::place::{Place, RoomId};
use crate::services::matchmaker::label::MatchInfo;
use crate::services::matchmaker::query::Value as PropValue;

/// The load / reload deadline (fixed by the spec).
pub const LOAD_DEADLINE: Duration = Duration::from_millis(5_000);

/// Budgets of one VM.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Deadline of RPC, message, join/leave and room-hook invocations.
    pub deadline: Duration,
    /// Deadline of one tick invocation.
    pub tick_deadline: Duration,
    /// Memory cap of the VM, bytes.
    pub memory_bytes: usize,
    /// Where `main.lua` and required modules live.
    pub scripts_dir: PathBuf,
}

/// Who an invocation is about (the `ctx` table is built from it per hook).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The participant id (`ctx.sender`).
    pub participant_id: u64,
    /// Its account, absent for guests (`ctx.user_id`).
    pub user_id: Option<String>,
    /// Where it was at the time of the call (`ctx.room_id`, nil in the
    /// default dimension).
    pub place: Place,
}

/// Why an invocation failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The handler raised (or returned the wrong type); the text is for logs only.
    Error(String),
    /// The deadline passed.
    Timeout,
    /// The memory cap was hit.
    OutOfMemory,
}

/// The result of one invocation plus the commands it queued (empty on failure).
#[derive(Debug)]
pub struct Outcome<T> {
    /// What the handler produced.
    pub result: Result<T, Failure>,
    /// Commands to apply (only when `result` is `Ok`).
    pub commands: Vec<Command>,
    /// Commands dropped by the count cap.
    pub dropped_commands: u64,
    /// Commands dropped by the byte cap.
    pub dropped_bytes: u64,
}

/// An RPC invocation's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RpcReply {
    /// The handler's reply bytes.
    Reply(Bytes),
    /// No handler for the method.
    UnknownMethod,
}

/// What `on_room_create` returned (a string is `map` only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelSpec {
    /// Map; `None` = the create params.
    pub map: Option<String>,
    /// Mode (default empty).
    pub mode: String,
    /// Member cap (default 0 = unlimited).
    pub max_players: u32,
    /// Open to joins (default true).
    pub open: bool,
}

/// Why a script could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    /// The entry file could not be read.
    #[error("cannot read {path}: {message}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        message: String,
    },
    /// Syntax error.
    #[error("syntax error: {0}")]
    Parse(String),
    /// The top-level chunk raised.
    #[error("error while loading: {0}")]
    Runtime(String),
    /// The top-level chunk ran past the load deadline.
    #[error("load deadline of 5000 ms exceeded")]
    Timeout,
    /// The top-level chunk hit the memory cap.
    #[error("memory limit exceeded while loading")]
    OutOfMemory,
    /// The script registered no handler at all.
    #[error("the script registers no handler")]
    Empty,
}

/// A loaded VM.
pub struct Vm {
    lua: Lua,
    limits: Limits,
    registered: Registered,
}

impl std::fmt::Debug for Vm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vm")
            .field("registered", &self.registered)
            .finish_non_exhaustive()
    }
}

fn is_memory_error(err: &mlua::Error) -> bool {
    match err {
        mlua::Error::MemoryError(_) => true,
        mlua::Error::CallbackError { cause, .. } => is_memory_error(cause),
        _ => false,
    }
}

fn classify(err: &mlua::Error, timed_out: bool) -> Failure {
    if timed_out {
        Failure::Timeout
    } else if is_memory_error(err) {
        Failure::OutOfMemory
    } else {
        Failure::Error(err.to_string())
    }
}

impl Vm {
    /// Loads `entry` (normally `<scripts_dir>/main.lua`) under the load deadline.
    pub fn load(limits: &Limits, entry: &Path) -> Result<Vm, LoadError> {
        let source = std::fs::read(entry).map_err(|e| LoadError::Read {
            path: entry.display().to_string(),
            message: e.to_string(),
        })?;
        Self::load_source(limits, &source, "@main.lua")
    }

    /// Loads a chunk given as bytes (tests, `load`).
    pub fn load_source(limits: &Limits, source: &[u8], name: &str) -> Result<Vm, LoadError> {
        let setup = |e: mlua::Error| LoadError::Runtime(e.to_string());
        let lua = sandbox::new_state(&limits.scripts_dir).map_err(setup)?;
        lua.set_app_data(ActorIds::default());
        let citadel = lua.create_table().map_err(setup)?;
        hooks::install(&lua, &citadel).map_err(setup)?;
        api::install(&lua, &citadel).map_err(setup)?;
        super::services::install(&lua, &citadel).map_err(setup)?;
        super::transform::install(&lua, &citadel).map_err(setup)?;
        super::netpeer::install(&lua, &citadel).map_err(setup)?;
        super::movement::install(&lua).map_err(setup)?;
        lua.globals().set("citadel", citadel).map_err(setup)?;
        let chunk = lua
            .load(source)
            .set_name(name)
            .into_function()
            .map_err(|e| LoadError::Parse(e.to_string()))?;
        lua.set_memory_limit(limits.memory_bytes).map_err(setup)?;
        let mut vm = Vm {
            lua,
            limits: limits.clone(),
            registered: Registered::default(),
        };
        // Commands queued by the top-level chunk are discarded: nothing is
        // connected to this VM yet.
        let outcome = vm.invoke(LOAD_DEADLINE, |_| chunk.call::<()>(()));
        match outcome.result {
            Ok(()) => {}
            Err(Failure::Timeout) => return Err(LoadError::Timeout),
            Err(Failure::OutOfMemory) => return Err(LoadError::OutOfMemory),
            Err(Failure::Error(e)) => return Err(LoadError::Runtime(e)),
        }
        vm.registered = hooks::registered(&vm.lua).map_err(setup)?;
        Ok(vm)
    }

    /// Connects the service host functions (`notifications_*`) to the node.
    pub fn install_host(&self, host: super::HostServices) {
        self.lua.set_app_data(host);
    }

    /// What `citadel.rewind_query` reads (every VM, every reload).
    pub fn install_transform(&self, host: super::transform::TransformHost) {
        self.lua.set_app_data(host);
    }

    /// Connects `citadel.netpeer_*` to the node's driver and registers the
    /// classes the load declared (every VM, every reload).
    pub fn install_netpeer(&self, node: std::sync::Arc<crate::netpeer::NetPeerNode>) {
        super::netpeer::attach(&self.lua, node);
    }

    /// What the script registered.
    pub fn registered(&self) -> &Registered {
        &self.registered
    }

    /// A new snapshot if a handler was registered since the last one.
    pub fn refresh_registered(&mut self) -> Option<&Registered> {
        if !hooks::is_dirty(&self.lua) {
            return None;
        }
        self.registered = hooks::registered(&self.lua).ok()?;
        Some(&self.registered)
    }

    /// Bytes the VM uses now.
    pub fn used_memory(&self) -> usize {
        self.lua.used_memory()
    }

    pub(super) fn invoke<T>(
        &self,
        budget: Duration,
        f: impl FnOnce(&Lua) -> mlua::Result<T>,
    ) -> Outcome<T> {
        self.lua.set_app_data(Invocation {
            deadline: Some(Instant::now() + budget),
            ..Invocation::default()
        });
        let result = f(&self.lua);
        let inv = self.lua.remove_app_data::<Invocation>().unwrap_or_default();
        match result {
            Ok(value) => Outcome {
                result: Ok(value),
                commands: inv.commands,
                dropped_commands: inv.dropped_commands,
                dropped_bytes: inv.dropped_bytes,
            },
            Err(err) => {
                let failure = classify(&err, inv.timed_out);
                if failure == Failure::OutOfMemory {
                    // Reclaim what the failed call left unreachable.
                    let _ = self.lua.gc_collect();
                }
                Outcome {
                    result: Err(failure),
                    commands: Vec::new(),
                    dropped_commands: inv.dropped_commands,
                    dropped_bytes: inv.dropped_bytes,
                }
            }
        }
    }

    fn ctx(&self, caller: &Caller) -> mlua::Result<Table> {
        let ctx = self.lua.create_table()?;
        ctx.set("sender", caller.participant_id)?;
        if let Some(user) = &caller.user_id {
            ctx.set("user_id", user.as_str())?;
        }
        Ok(ctx)
    }

    /// [`Vm::ctx`] plus `room_id` when the caller is in a room.
    fn room_ctx(&self, caller: &Caller) -> mlua::Result<Table> {
        let ctx = self.ctx(caller)?;
        if let Some(room) = caller.place.room() {
            ctx.set("room_id", room.get())?;
        }
        Ok(ctx)
    }

    /// `on_rpc` handler of `method`: `fn(ctx, body) -> string`.
    pub fn rpc(&self, caller: &Caller, method: &str, payload: &[u8]) -> Outcome<RpcReply> {
        self.invoke(self.limits.deadline, |lua| {
            let Some(f) = hooks::rpc_fn(lua, method)? else {
                return Ok(RpcReply::UnknownMethod);
            };
            let ctx = self.ctx(caller)?;
            ctx.set("method", method)?;
            match f.call::<Value>((ctx, lua.create_string(payload)?))? {
                Value::String(s) => Ok(RpcReply::Reply(Bytes::copy_from_slice(&s.as_bytes()))),
                _ => Err(mlua::Error::runtime("RPC handler must return a string")),
            }
        })
    }

    /// `on_message(kind)` handler: `fn(ctx, body)`; `Ok(false)` = no handler.
    pub fn message(&self, caller: &Caller, kind: u16, body: &[u8]) -> Outcome<bool> {
        self.invoke(self.limits.deadline, |lua| {
            let Some(f) = hooks::message_fn(lua, kind)? else {
                return Ok(false);
            };
            let ctx = self.room_ctx(caller)?;
            ctx.set("kind", kind)?;
            f.call::<()>((ctx, lua.create_string(body)?))?;
            Ok(true)
        })
    }

    /// `on_join` / `on_leave`: `fn(ctx)`; `Ok(false)` = no handler.
    pub fn presence(&self, hook: Hook, caller: &Caller) -> Outcome<bool> {
        self.invoke(self.limits.deadline, |lua| {
            let Some(f) = hooks::hook_fn(lua, hook)? else {
                return Ok(false);
            };
            f.call::<()>(self.ctx(caller)?)?;
            Ok(true)
        })
    }

    /// `on_tick`: `fn(dt)` server-wide or `fn(dt, room_id)` for a room.
    pub fn tick(&self, dt: f64, room_id: Option<RoomId>) -> Outcome<bool> {
        self.invoke(self.limits.tick_deadline, |lua| {
            let Some(f) = hooks::hook_fn(lua, Hook::Tick)? else {
                return Ok(false);
            };
            match room_id {
                Some(room) => f.call::<()>((dt, room.get()))?,
                None => f.call::<()>(dt)?,
            }
            Ok(true)
        })
    }

    /// `on_room_create`: `fn(ctx, params)`; `Ok(None)` = no handler or nil.
    pub fn room_create(&self, caller: &Caller, params: &[u8]) -> Outcome<Option<LabelSpec>> {
        self.invoke(self.limits.deadline, |lua| {
            let Some(f) = hooks::hook_fn(lua, Hook::RoomCreate)? else {
                return Ok(None);
            };
            let ctx = self.ctx(caller)?;
            ctx.set("method", "room.create")?;
            let value = f.call::<Value>((ctx, lua.create_string(params)?))?;
            parse_label(value)
        })
    }

    /// `on_matchmaker_matched`: `fn(ctx, match)`, returning a label like
    /// `on_room_create`; `Ok(None)` = no handler or nil. `match.tickets`
    /// lists `{ticket_id, user_ids, properties, query}`.
    pub fn matchmaker_matched(&self, info: &MatchInfo) -> Outcome<Option<LabelSpec>> {
        self.invoke(self.limits.deadline, |lua| {
            let Some(f) = hooks::hook_fn(lua, Hook::MatchmakerMatched)? else {
                return Ok(None);
            };
            let ctx = lua.create_table()?;
            ctx.set("method", "matchmaker.matched")?;
            let tickets = lua.create_table()?;
            for (i, t) in info.tickets.iter().enumerate() {
                let entry = lua.create_table()?;
                entry.set("ticket_id", t.ticket_id.as_str())?;
                entry.set(
                    "user_ids",
                    lua.create_sequence_from(t.user_ids.iter().map(String::as_str))?,
                )?;
                let props = lua.create_table()?;
                for (k, v) in &t.properties {
                    match v {
                        PropValue::Str(s) => props.set(k.as_str(), s.as_str())?,
                        PropValue::Num(n) => props.set(k.as_str(), *n)?,
                    }
                }
                entry.set("properties", props)?;
                entry.set("query", t.query.as_str())?;
                tickets.set(i + 1, entry)?;
            }
            let matched = lua.create_table()?;
            matched.set("tickets", tickets)?;
            parse_label(f.call::<Value>((ctx, matched))?)
        })
    }

    /// `on_input` over one staged bundle (`movement.rs`), under `budget`;
    /// a bad return discards the invocation's commands like an error.
    pub fn on_input(
        &self,
        caller: &Caller,
        batch: &citadel_netcode::actors::MovementBatch,
        budget: Duration,
    ) -> Outcome<super::movement::Judged> {
        let mut out = self.invoke(budget, |lua| {
            super::movement::judge(lua, self.room_ctx(caller)?, batch)
        });
        if matches!(out.result, Ok(Err(_))) {
            out.commands.clear();
        }
        out
    }

    /// `on_room_join`: `fn(ctx, room_id) -> bool`; `Ok(None)` = no handler.
    pub fn room_join(&self, caller: &Caller, room_id: RoomId) -> Outcome<Option<bool>> {
        self.invoke(self.limits.deadline, |lua| {
            let Some(f) = hooks::hook_fn(lua, Hook::RoomJoin)? else {
                return Ok(None);
            };
            let ctx = self.ctx(caller)?;
            ctx.set("method", "room.join")?;
            // Fail closed: only a literal `true` admits.
            Ok(Some(matches!(
                f.call::<Value>((ctx, room_id.get()))?,
                Value::Boolean(true)
            )))
        })
    }
}

fn parse_label(value: Value) -> mlua::Result<Option<LabelSpec>> {
    match value {
        Value::Nil => Ok(None),
        Value::String(s) => Ok(Some(LabelSpec {
            map: Some(s.to_str()?.to_owned()),
            mode: String::new(),
            max_players: 0,
            open: true,
        })),
        Value::Table(t) => {
            let max = t.get::<Option<i64>>("max_players")?.unwrap_or(0);
            Ok(Some(LabelSpec {
                map: t.get("map")?,
                mode: t.get::<Option<String>>("mode")?.unwrap_or_default(),
                max_players: u32::try_from(max.max(0)).unwrap_or(u32::MAX),
                open: t.get::<Option<bool>>("open")?.unwrap_or(true),
            }))
        }
        _ => Err(mlua::Error::runtime(
            "on_room_create must return a string, a table or nil",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::api::{ActorSpawn, FIRST_ACTOR_ID, MAX_COMMANDS};

    fn limits() -> Limits {
        Limits {
            deadline: Duration::from_millis(100),
            tick_deadline: Duration::from_millis(20),
            memory_bytes: 16 * 1024 * 1024,
            scripts_dir: PathBuf::from("."),
        }
    }

    fn vm(src: &str) -> Vm {
        Vm::load_source(&limits(), src.as_bytes(), "=test").unwrap()
    }

    fn caller() -> Caller {
        Caller {
            participant_id: 7,
            user_id: None,
            place: Place::Default,
        }
    }

    #[test]
    fn actor_functions_queue_typed_commands() {
        let vm = vm(r#"
            citadel.on_tick(function(dt)
                local id = citadel.spawn_actor{ archetype = 3, x = 1, y = 2, z = 302,
                    ai = "patrol", map = "arena", speed = 250,
                    waypoints = { {0, 0, 302}, {500, 0, 302} } }
                local plain = citadel.spawn_actor{}
                citadel.move_actor(id, 10, 20, 30, 1, 2, 3)
                citadel.move_actor(plain, 4, 5, 6)
                citadel.despawn_actor(plain)
            end)
        "#);
        let out = vm.tick(0.05, None);
        assert_eq!(out.result, Ok(true));
        assert_eq!(
            out.commands,
            vec![
                Command::SpawnActor(ActorSpawn {
                    id: FIRST_ACTOR_ID,
                    archetype: 3,
                    position: [1.0, 2.0, 302.0],
                    ai: Some("patrol".into()),
                    map: Some("arena".into()),
                    waypoints: vec![[0.0, 0.0, 302.0], [500.0, 0.0, 302.0]],
                    speed: Some(250.0),
                    room: None,
                }),
                Command::SpawnActor(ActorSpawn {
                    id: FIRST_ACTOR_ID + 1,
                    archetype: 0,
                    position: [0.0; 3],
                    ai: None,
                    map: None,
                    waypoints: vec![],
                    speed: None,
                    room: None,
                }),
                Command::MoveActor {
                    id: FIRST_ACTOR_ID,
                    position: [10.0, 20.0, 30.0],
                    velocity: [1.0, 2.0, 3.0],
                },
                Command::MoveActor {
                    id: FIRST_ACTOR_ID + 1,
                    position: [4.0, 5.0, 6.0],
                    velocity: [0.0; 3],
                },
                Command::DespawnActor {
                    id: FIRST_ACTOR_ID + 1
                },
            ]
        );
        // Ids keep counting across invocations.
        let again = vm.tick(0.05, RoomId::new(1));
        assert!(matches!(
            again.commands.first(),
            Some(Command::SpawnActor(ActorSpawn { id, .. })) if *id == FIRST_ACTOR_ID + 2
        ));
    }

    #[test]
    fn caps_drop_raise_and_failures_discard() {
        let vm = vm(r#"
            citadel.on_rpc("many", function(ctx, body)
                for i = 1, 2000 do citadel.send(ctx.sender, 100, "x") end
                return "ok"
            end)
            citadel.on_rpc("bytes", function(ctx, body)
                local chunk = string.rep("b", 60000)
                for i = 1, 40 do citadel.broadcast(100, chunk) end
                return "ok"
            end)
            citadel.on_rpc("huge", function(ctx, body)
                citadel.broadcast(100, string.rep("h", 65537))
                return "ok"
            end)
            citadel.on_rpc("raise_after_send", function(ctx, body)
                citadel.broadcast(100, "lost")
                error("boom")
            end)
            citadel.on_rpc("not_a_string", function() return {} end)
        "#);
        let many = vm.rpc(&caller(), "many", b"");
        assert_eq!(many.commands.len(), MAX_COMMANDS);
        assert_eq!(many.dropped_commands, 2000 - MAX_COMMANDS as u64);
        let bytes = vm.rpc(&caller(), "bytes", b"");
        assert_eq!(bytes.commands.len(), 17, "1 MiB / 60000 bytes");
        assert_eq!(bytes.dropped_bytes, 23);
        assert!(matches!(
            vm.rpc(&caller(), "huge", b"").result,
            Err(Failure::Error(_))
        ));
        let raised = vm.rpc(&caller(), "raise_after_send", b"");
        assert!(matches!(raised.result, Err(Failure::Error(_))));
        assert!(raised.commands.is_empty());
        assert!(matches!(
            vm.rpc(&caller(), "not_a_string", b"").result,
            Err(Failure::Error(_))
        ));
        assert_eq!(
            vm.rpc(&caller(), "missing", b"").result,
            Ok(RpcReply::UnknownMethod)
        );
    }

    #[test]
    fn timeouts_and_oom_are_classified_and_the_vm_recovers() {
        let vm = vm(r#"
            citadel.on_rpc("spin", function() while true do end end)
            citadel.on_rpc("sneaky", function()
                while true do pcall(function() while true do end end) end
            end)
            citadel.on_rpc("hog", function()
                local t = {}
                for i = 1, 1e9 do t[i] = string.rep("m", 1024 * 1024) .. i end
            end)
            citadel.on_rpc("ok", function(ctx, body) return "still " .. body end)
        "#);
        let started = Instant::now();
        assert_eq!(vm.rpc(&caller(), "spin", b"").result, Err(Failure::Timeout));
        assert_eq!(
            vm.rpc(&caller(), "sneaky", b"").result,
            Err(Failure::Timeout)
        );
        assert!(started.elapsed() < Duration::from_millis(1_000));
        assert_eq!(
            vm.rpc(&caller(), "hog", b"").result,
            Err(Failure::OutOfMemory)
        );
        assert_eq!(
            vm.rpc(&caller(), "ok", b"here").result,
            Ok(RpcReply::Reply(Bytes::from_static(b"still here")))
        );
    }

    #[test]
    fn room_labels_parse_and_join_fails_closed() {
        let vm = vm(r#"
            citadel.on_room_create(function(ctx, name)
                if name == "short" then return "Forest" end
                if name == "nil" then return nil end
                if name == "bad" then return 42 end
                return { map = "Arena", mode = "ffa", max_players = 8, open = false }
            end)
            citadel.on_room_join(function(ctx, room_id)
                if room_id == 1 then return true end
                if room_id == 2 then return "yes" end
                return false
            end)
        "#);
        assert_eq!(
            vm.room_create(&caller(), b"short").result,
            Ok(Some(LabelSpec {
                map: Some("Forest".into()),
                mode: String::new(),
                max_players: 0,
                open: true
            }))
        );
        assert_eq!(vm.room_create(&caller(), b"nil").result, Ok(None));
        assert!(vm.room_create(&caller(), b"bad").result.is_err());
        assert_eq!(
            vm.room_create(&caller(), b"full").result,
            Ok(Some(LabelSpec {
                map: Some("Arena".into()),
                mode: "ffa".into(),
                max_players: 8,
                open: false
            }))
        );
        assert_eq!(
            vm.room_join(&caller(), RoomId::new(1).unwrap()).result,
            Ok(Some(true))
        );
        assert_eq!(
            vm.room_join(&caller(), RoomId::new(2).unwrap()).result,
            Ok(Some(false))
        );
        assert_eq!(
            vm.room_join(&caller(), RoomId::new(3).unwrap()).result,
            Ok(Some(false))
        );
    }

    #[test]
    fn load_rejections_are_typed() {
        let l = limits();
        assert!(matches!(
            Vm::load_source(&l, b"this is not lua", "=t"),
            Err(LoadError::Parse(_))
        ));
        assert!(matches!(
            Vm::load_source(&l, b"error('nope')", "=t"),
            Err(LoadError::Runtime(_))
        ));
        assert!(matches!(
            Vm::load_source(&l, b"citadel.on_rpc('chat.x', function() end)", "=t"),
            Err(LoadError::Runtime(_))
        ));
        let empty = Vm::load_source(&l, b"local x = 1", "=t").unwrap();
        assert!(empty.registered().is_empty());
        let veto_only = Vm::load_source(
            &l,
            b"citadel.netpeer_on_proposal(function() return true end)",
            "=t",
        )
        .unwrap();
        assert!(!veto_only.registered().is_empty());
        assert!(
            veto_only
                .registered()
                .hooks
                .contains(super::hooks::NETPEER_VETO)
        );
    }

    #[test]
    fn scoped_require_loads_caches_and_refuses_escapes() {
        let dir = std::env::temp_dir().join(format!("citadel-require-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("lib")).unwrap();
        std::fs::write(
            dir.join("lib").join("util.lua"),
            "counter = (counter or 0) + 1\nreturn { twice = function(s) return s .. s end }",
        )
        .unwrap();
        std::fs::write(dir.join("empty.lua"), "local x = 1").unwrap();
        std::fs::write(dir.join("cycle_a.lua"), "return require('cycle_b')").unwrap();
        std::fs::write(dir.join("cycle_b.lua"), "return require('cycle_a')").unwrap();
        let l = Limits {
            scripts_dir: dir.clone(),
            ..limits()
        };
        let vm = Vm::load_source(
            &l,
            br#"
            local util = require("lib.util")
            local again = require("lib.util")
            assert(util == again and counter == 1)
            assert(require("empty") == true)
            assert(not pcall(require, "../secret"))
            assert(not pcall(require, "/etc/passwd"))
            assert(not pcall(require, "missing"))
            local ok, err = pcall(require, "cycle_a")
            assert(not ok and string.find(tostring(err), "cyclic require detected"))
            citadel.on_rpc("twice", function(ctx, body) return util.twice(body) end)
            "#,
            "=t",
        )
        .unwrap();
        assert_eq!(
            vm.rpc(&caller(), "twice", b"ab").result,
            Ok(RpcReply::Reply(Bytes::from_static(b"abab")))
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}
