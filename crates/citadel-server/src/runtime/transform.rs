//! Host functions for ownership and hit validation:
//! `citadel.set_owner(object_id, participant_id)`,
//! `citadel.set_hit_eligible(object_id, eligible)` and the read-only
//! `citadel.rewind_query(participant_id, origin, direction, tick)`.
//!
//! What it is: `set_owner` and `set_hit_eligible` queue [`Command`]s like
//! the other actor commands (applied after the invocation succeeded; a
//! failed invocation changes nothing). `rewind_query` answers at once: it
//! reads the transform hub (one short lock) and changes nothing. Object
//! ids are script actor ids for NPCs the script spawned, the hub's ids
//! otherwise (players' avatars); answers name script actors by their
//! script id.
//!
//! What it is not: the rules (epochs, ROLE audiences, rewind clamps live
//! in citadel-netcode). Call order: [`install`] once per VM; the worker
//! installs a [`TransformHost`] into every VM (and every hot reload).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use mlua::{Lua, Table, Value};

use super::api::{Command, push};
use crate::actors::TransformHub;

/// Script actor id → hub object id of the NPCs scripts spawned, shared by
/// the worker (which fills it) and the host functions.
pub type ScriptActors = Arc<Mutex<HashMap<u32, u32>>>;

/// What `rewind_query` reads; installed into every VM by the worker.
#[derive(Clone)]
pub struct TransformHost {
    /// The node's transform-sync hub.
    pub hub: Arc<TransformHub>,
    /// The script's NPC ids.
    pub actors: ScriptActors,
}

impl TransformHost {
    /// The hub id a script names (`id` itself when not a script actor).
    pub fn hub_id(&self, id: u32) -> u32 {
        lock(&self.actors).get(&id).copied().unwrap_or(id)
    }

    /// The id a script knows a hub object by.
    pub(super) fn script_id(&self, hub_id: u32) -> u32 {
        lock(&self.actors)
            .iter()
            .find(|(_, h)| **h == hub_id)
            .map_or(hub_id, |(script, _)| *script)
    }
}

/// The map, whatever a panicking holder left (it holds plain ids).
pub fn lock(actors: &ScriptActors) -> std::sync::MutexGuard<'_, HashMap<u32, u32>> {
    actors.lock().unwrap_or_else(|p| p.into_inner())
}

fn id_arg(value: i64, what: &str) -> mlua::Result<u32> {
    u32::try_from(value)
        .ok()
        .filter(|v| *v != 0)
        .ok_or_else(|| mlua::Error::runtime(format!("{what} must be a positive u32")))
}

/// A vector argument: `{x = …, y = …, z = …}` or `{…, …, …}`.
fn vec3(value: &Table) -> mlua::Result<[f32; 3]> {
    let mut out = [0.0f32; 3];
    for (i, key) in ["x", "y", "z"].into_iter().enumerate() {
        let named = value.get::<Option<f64>>(key)?;
        let indexed = value.get::<Option<f64>>(i + 1)?;
        out[i] = named.or(indexed).unwrap_or(0.0) as f32;
    }
    Ok(out)
}

/// Installs the functions into the `citadel` table.
pub fn install(lua: &Lua, citadel: &Table) -> mlua::Result<()> {
    citadel.set(
        "set_owner",
        lua.create_function(|lua, (object_id, owner): (i64, i64)| {
            let owner = u64::try_from(owner)
                .map_err(|_| mlua::Error::runtime("participant id must be >= 0 (0 = server)"))?;
            let command = Command::SetOwner {
                id: id_arg(object_id, "object id")?,
                owner,
            };
            push(lua, command, 0)
        })?,
    )?;
    citadel.set(
        "set_hit_eligible",
        lua.create_function(|lua, (object_id, eligible): (i64, bool)| {
            let command = Command::SetHitEligible {
                id: id_arg(object_id, "object id")?,
                eligible,
            };
            push(lua, command, 0)
        })?,
    )?;
    citadel.set(
        "rewind_query",
        lua.create_function(
            |lua, (participant, origin, direction, tick): (i64, Table, Table, Option<i64>)| {
                let host = lua
                    .app_data_ref::<TransformHost>()
                    .map(|h| h.clone())
                    .ok_or_else(|| mlua::Error::runtime("transform sync is not available here"))?;
                let participant = u64::try_from(participant)
                    .ok()
                    .filter(|p| *p != 0)
                    .ok_or_else(|| mlua::Error::runtime("participant id must be positive"))?;
                let tick = tick
                    .map(|t| {
                        u64::try_from(t).map_err(|_| mlua::Error::runtime("tick must be >= 0"))
                    })
                    .transpose()?;
                let Some(answer) =
                    host.hub
                        .rewind_query(participant, vec3(&origin)?, vec3(&direction)?, tick)
                else {
                    return Ok(Value::Nil);
                };
                let t = lua.create_table()?;
                t.set("tick", answer.tick)?;
                t.set("hit", answer.hit.is_some())?;
                if let Some(hit) = answer.hit {
                    t.set("object_id", host.script_id(hit.object_id))?;
                    t.set("x", hit.point[0])?;
                    t.set("y", hit.point[1])?;
                    t.set("z", hit.point[2])?;
                    t.set("distance", hit.distance)?;
                }
                Ok(Value::Table(t))
            },
        )?,
    )?;
    Ok(())
}
