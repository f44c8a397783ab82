//! Host functions scripts call (`citadel.broadcast`, `citadel.send`,
//! `citadel.log`, `citadel.spawn_actor`, `citadel.move_actor`,
//! `citadel.despawn_actor`) and the typed [`Command`]s they queue.
//!
//! What it is: argument checking plus a per-invocation queue with the
//! spec's caps (1024 commands, 64 KiB per body which *raises*, 1 MiB per
//! invocation which silently drops). What it is not: nothing here touches a
//! connection; the worker applies the queue after the invocation succeeded
//! (a failed invocation's queue is discarded). Call order: [`install`] once
//! per VM; the VM resets [`Invocation`] before each call and takes it after.

use std::time::Instant;

use bytes::Bytes;
use mlua::{Lua, Table, Value};

/// Commands one invocation may queue; more are dropped (logged once).
pub const MAX_COMMANDS: usize = 1024;
/// Largest body of one `broadcast` / `send`; larger raises a Lua error.
pub const MAX_BODY_BYTES: usize = 64 * 1024;
/// Outbound bytes one invocation may queue; more are dropped (logged once).
pub const MAX_TOTAL_BYTES: usize = 1024 * 1024;
/// First server-owned actor id; ids wrap back here after `u32::MAX`.
pub const FIRST_ACTOR_ID: u32 = 0x4000_0000;

/// A server-owned actor to spawn (replication lands with transform sync).
#[derive(Debug, Clone, PartialEq)]
pub struct ActorSpawn {
    /// Assigned object id (`>= FIRST_ACTOR_ID`).
    pub id: u32,
    /// Client archetype.
    pub archetype: u16,
    /// World position, cm.
    pub position: [f32; 3],
    /// Optional AI (`"patrol"`).
    pub ai: Option<String>,
    /// Optional cooked map name (for `ai = "patrol"`).
    pub map: Option<String>,
    /// Optional patrol waypoints.
    pub waypoints: Vec<[f32; 3]>,
    /// Optional patrol speed, cm/s.
    pub speed: Option<f32>,
    /// Room the NPC belongs to (`None` = global: every client sees it).
    pub room: Option<u64>,
}

/// One effect a script asked for.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// `citadel.broadcast`: to the invocation's scope (see `docs/scripting.md`).
    Broadcast {
        /// Envelope kind.
        kind: u16,
        /// Body bytes.
        body: Bytes,
        /// Unreliable lane.
        unreliable: bool,
    },
    /// `citadel.send`: to one participant.
    Send {
        /// Recipient participant id.
        to: u64,
        /// Envelope kind.
        kind: u16,
        /// Body bytes.
        body: Bytes,
        /// Unreliable lane.
        unreliable: bool,
    },
    /// `citadel.spawn_actor`.
    SpawnActor(ActorSpawn),
    /// `citadel.move_actor`.
    MoveActor {
        /// Object id.
        id: u32,
        /// Position, cm.
        position: [f32; 3],
        /// Velocity, cm/s.
        velocity: [f32; 3],
    },
    /// `citadel.despawn_actor`.
    DespawnActor {
        /// Object id.
        id: u32,
    },
    /// `citadel.set_owner` (`transform.rs`).
    SetOwner {
        /// Object id (a script actor id or a hub id).
        id: u32,
        /// New owner (0 = the server).
        owner: u64,
    },
    /// `citadel.set_hit_eligible` (`transform.rs`).
    SetHitEligible {
        /// Object id (a script actor id or a hub id).
        id: u32,
        /// Opt in or out.
        eligible: bool,
    },
}

impl Command {
    /// Whether this is a networked-actor command.
    pub fn is_actor(&self) -> bool {
        matches!(
            self,
            Command::SpawnActor(_)
                | Command::MoveActor { .. }
                | Command::DespawnActor { .. }
                | Command::SetOwner { .. }
                | Command::SetHitEligible { .. }
        )
    }
}

/// Per-invocation state, stored as the VM's app data.
#[derive(Debug, Default)]
pub struct Invocation {
    /// Queued commands.
    pub commands: Vec<Command>,
    /// Bytes of queued bodies.
    pub bytes: usize,
    /// Commands dropped by the count cap.
    pub dropped_commands: u64,
    /// Commands dropped by the byte cap.
    pub dropped_bytes: u64,
    /// When the invocation must stop.
    pub deadline: Option<Instant>,
    /// Set by the instruction hook when the deadline passed.
    pub timed_out: bool,
}

/// Actor id allocation, kept across invocations (reset with the VM).
#[derive(Debug)]
pub struct ActorIds {
    next: u32,
}

impl Default for ActorIds {
    fn default() -> Self {
        ActorIds {
            next: FIRST_ACTOR_ID,
        }
    }
}

impl ActorIds {
    /// The next id: starts at `FIRST_ACTOR_ID`, wraps back to it.
    pub fn allocate(&mut self) -> u32 {
        let id = self.next;
        self.next = if id == u32::MAX {
            FIRST_ACTOR_ID
        } else {
            id + 1
        };
        id
    }
}

pub(super) fn push(lua: &Lua, command: Command, bytes: usize) -> mlua::Result<()> {
    let mut inv = lua
        .app_data_mut::<Invocation>()
        .ok_or_else(|| mlua::Error::runtime("no invocation in progress"))?;
    if inv.commands.len() >= MAX_COMMANDS {
        if inv.dropped_commands == 0 {
            tracing::warn!(
                cap = MAX_COMMANDS,
                "script command cap reached; extra commands dropped"
            );
        }
        inv.dropped_commands += 1;
        return Ok(());
    }
    if inv.bytes + bytes > MAX_TOTAL_BYTES {
        if inv.dropped_bytes == 0 {
            tracing::warn!(
                cap = MAX_TOTAL_BYTES,
                "script outbound byte cap reached; extra commands dropped"
            );
        }
        inv.dropped_bytes += 1;
        return Ok(());
    }
    inv.bytes += bytes;
    inv.commands.push(command);
    Ok(())
}

fn kind_arg(value: i64) -> mlua::Result<u16> {
    u16::try_from(value)
        .ok()
        .filter(|k| *k != 0)
        .ok_or_else(|| mlua::Error::runtime("kind must be an integer in 1..=65535"))
}

fn body_arg(body: &mlua::LuaString) -> mlua::Result<Bytes> {
    let bytes = body.as_bytes();
    if bytes.len() > MAX_BODY_BYTES {
        return Err(mlua::Error::runtime(format!(
            "body of {} bytes exceeds the {MAX_BODY_BYTES}-byte limit",
            bytes.len()
        )));
    }
    Ok(Bytes::copy_from_slice(&bytes))
}

fn actor_id_arg(value: i64) -> mlua::Result<u32> {
    u32::try_from(value).map_err(|_| mlua::Error::runtime("actor id must be a u32"))
}

fn field_f32(t: &Table, key: &str) -> mlua::Result<f32> {
    Ok(t.get::<Option<f64>>(key)?.unwrap_or(0.0) as f32)
}

fn logs(message: &str, level: Option<&str>) {
    match level.map(str::to_ascii_lowercase).as_deref() {
        Some("trace") => tracing::trace!(target: "citadel::script", "{message}"),
        Some("debug") => tracing::debug!(target: "citadel::script", "{message}"),
        Some("warn") => tracing::warn!(target: "citadel::script", "{message}"),
        Some("error") => tracing::error!(target: "citadel::script", "{message}"),
        _ => tracing::info!(target: "citadel::script", "{message}"),
    }
}

/// Installs the host functions into the `citadel` table.
pub fn install(lua: &Lua, citadel: &Table) -> mlua::Result<()> {
    citadel.set(
        "broadcast",
        lua.create_function(
            |lua, (kind, body, unreliable): (i64, mlua::LuaString, Option<bool>)| {
                let kind = kind_arg(kind)?;
                let body = body_arg(&body)?;
                let len = body.len();
                let command = Command::Broadcast {
                    kind,
                    body,
                    unreliable: unreliable.unwrap_or(false),
                };
                push(lua, command, len)
            },
        )?,
    )?;
    citadel.set(
        "send",
        lua.create_function(
            |lua, (to, kind, body, unreliable): (i64, i64, mlua::LuaString, Option<bool>)| {
                let to = u64::try_from(to)
                    .ok()
                    .filter(|t| *t != 0)
                    .ok_or_else(|| mlua::Error::runtime("participant id must be positive"))?;
                let kind = kind_arg(kind)?;
                let body = body_arg(&body)?;
                let len = body.len();
                let command = Command::Send {
                    to,
                    kind,
                    body,
                    unreliable: unreliable.unwrap_or(false),
                };
                push(lua, command, len)
            },
        )?,
    )?;
    citadel.set(
        "log",
        lua.create_function(|_, (message, level): (Value, Option<String>)| {
            let text = match &message {
                Value::String(s) => s.to_string_lossy(),
                other => other.to_string().unwrap_or_else(|_| "<value>".into()),
            };
            logs(&text, level.as_deref());
            Ok(())
        })?,
    )?;
    citadel.set(
        "spawn_actor",
        lua.create_function(|lua, spec: Table| {
            let archetype = u16::try_from(spec.get::<Option<i64>>("archetype")?.unwrap_or(0))
                .map_err(|_| mlua::Error::runtime("archetype must be a u16"))?;
            let position = [
                field_f32(&spec, "x")?,
                field_f32(&spec, "y")?,
                field_f32(&spec, "z")?,
            ];
            let mut waypoints = Vec::new();
            if let Some(list) = spec.get::<Option<Table>>("waypoints")? {
                for point in list.sequence_values::<Table>() {
                    let point = point?;
                    waypoints.push([
                        point.get::<Option<f64>>(1)?.unwrap_or(0.0) as f32,
                        point.get::<Option<f64>>(2)?.unwrap_or(0.0) as f32,
                        point.get::<Option<f64>>(3)?.unwrap_or(0.0) as f32,
                    ]);
                }
            }
            let id = lua
                .app_data_mut::<ActorIds>()
                .ok_or_else(|| mlua::Error::runtime("actor ids unavailable"))?
                .allocate();
            let spawn = ActorSpawn {
                id,
                archetype,
                position,
                ai: spec.get("ai")?,
                map: spec.get("map")?,
                waypoints,
                speed: spec.get::<Option<f64>>("speed")?.map(|s| s as f32),
                room: spec.get::<Option<u64>>("room")?,
            };
            push(lua, Command::SpawnActor(spawn), 0)?;
            Ok(id)
        })?,
    )?;
    citadel.set(
        "move_actor",
        lua.create_function(
            |lua,
             (id, x, y, z, vx, vy, vz): (
                i64,
                f64,
                f64,
                f64,
                Option<f64>,
                Option<f64>,
                Option<f64>,
            )| {
                let command = Command::MoveActor {
                    id: actor_id_arg(id)?,
                    position: [x as f32, y as f32, z as f32],
                    velocity: [
                        vx.unwrap_or(0.0) as f32,
                        vy.unwrap_or(0.0) as f32,
                        vz.unwrap_or(0.0) as f32,
                    ],
                };
                push(lua, command, 0)
            },
        )?,
    )?;
    citadel.set(
        "despawn_actor",
        lua.create_function(|lua, id: i64| {
            let command = Command::DespawnActor {
                id: actor_id_arg(id)?,
            };
            push(lua, command, 0)
        })?,
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actor_ids_start_at_base_and_wrap() {
        let mut ids = ActorIds::default();
        assert_eq!(ids.allocate(), FIRST_ACTOR_ID);
        assert_eq!(ids.allocate(), FIRST_ACTOR_ID + 1);
        ids.next = u32::MAX;
        assert_eq!(ids.allocate(), u32::MAX);
        assert_eq!(ids.allocate(), FIRST_ACTOR_ID);
    }

    #[test]
    fn kinds_are_checked() {
        assert!(kind_arg(0).is_err());
        assert!(kind_arg(65_536).is_err());
        assert_eq!(kind_arg(100).ok(), Some(100));
    }
}
