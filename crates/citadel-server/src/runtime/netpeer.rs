//! Host functions for NetworkPeer replication (trusted code only):
//! `citadel.netpeer_register_class{...}`, `netpeer_spawn`,
//! `netpeer_despawn`, `netpeer_set_field`, `netpeer_set_fields`,
//! `netpeer_item_set`, `netpeer_item_remove` (keyed collection items),
//! `netpeer_set_owner`, `netpeer_set_position`, `netpeer_move_object`,
//! `netpeer_move_connection`, `netpeer_set_viewer` and the read
//! `netpeer_get`.
//!
//! What it is: argument conversion (Lua tables ↔ [`ClassSpec`] and
//! [`FieldValue`]) and direct calls into the node's [`NetPeerNode`], which
//! apply at once under its short lock and answer (an object id, a schema
//! hash) or raise a clear message. Unlike the queued actor commands they
//! are not rolled back when the invocation later fails. Registration works
//! while `main.lua` loads, before the node is attached: the class is
//! compiled (errors raise) and kept in [`PendingClasses`] until
//! [`attach`] registers it. The driver never calls into Lua, so the VM
//! thread and the driver cannot wait on each other.
//!
//! What it is not: the rules (citadel-netpeer) or a client path.
//! Call order: [`install`] once per VM; the worker calls [`attach`] with
//! the node's driver (every VM, every hot reload).

use std::sync::Arc;

use citadel_netpeer::class::Class;
use citadel_netpeer::{ClassSpec, Cond, Evolution, FieldSpec, TypeTag, Value};
use citadel_wire::netpeer::{FieldCodec, FieldValue};
use citadel_wire::quant::{ScalarCodec, Vector3Codec};
use citadel_wire::quat::QuatMode;
use mlua::{Lua, Table, Value as LuaValue};

use crate::netpeer::NetPeerNode;

/// The driver the functions call; installed by the worker.
#[derive(Clone)]
pub struct NetpeerHost(pub Arc<NetPeerNode>);

/// Classes registered before the node was attached (while loading).
#[derive(Default)]
pub struct PendingClasses(pub Vec<ClassSpec>);

fn err(message: impl Into<String>) -> mlua::Error {
    mlua::Error::runtime(message.into())
}

fn host(lua: &Lua) -> mlua::Result<Arc<NetPeerNode>> {
    lua.app_data_ref::<NetpeerHost>()
        .map(|h| h.0.clone())
        .ok_or_else(|| err("netpeer: the node is not attached yet (call from a hook)"))
}

/// Registers what the load queued, then makes the functions live.
pub fn attach(lua: &Lua, node: Arc<NetPeerNode>) {
    let pending = lua
        .remove_app_data::<PendingClasses>()
        .map(|p| p.0)
        .unwrap_or_default();
    for spec in pending {
        let class_id = spec.class_id;
        if let Err(e) = node.register_class(spec) {
            tracing::warn!(class_id, error = %e, "netpeer class not registered");
        }
    }
    super::netpeer_veto::attach(lua, &node);
    lua.set_app_data(NetpeerHost(node));
}

fn u32_arg(v: i64, what: &str) -> mlua::Result<u32> {
    u32::try_from(v).map_err(|_| err(format!("netpeer: {what} must be a u32")))
}

fn f32_of(t: &Table, key: &str) -> mlua::Result<Option<f32>> {
    Ok(t.get::<Option<f64>>(key)?.map(|v| v as f32))
}

fn vec3_of(v: &LuaValue, what: &str) -> mlua::Result<[f32; 3]> {
    match v {
        LuaValue::Integer(n) => Ok([*n as f32; 3]),
        LuaValue::Number(n) => Ok([*n as f32; 3]),
        LuaValue::Table(t) => {
            let mut out = [0.0f32; 3];
            for (i, key) in ["x", "y", "z"].into_iter().enumerate() {
                let named = t.get::<Option<f64>>(key)?;
                let indexed = t.get::<Option<f64>>(i + 1)?;
                let Some(c) = named.or(indexed) else {
                    return Err(err(format!("netpeer: {what} needs x, y and z")));
                };
                if let Some(slot) = out.get_mut(i) {
                    *slot = c as f32;
                }
            }
            Ok(out)
        }
        _ => Err(err(format!("netpeer: {what} must be a vector table"))),
    }
}

fn codec_of(f: &Table, name: &str) -> mlua::Result<FieldCodec> {
    let kind: String = f
        .get::<Option<String>>("type")?
        .ok_or_else(|| err(format!("netpeer: field `{name}` needs a type")))?;
    let bad = |e: citadel_wire::error::CodecError| err(format!("netpeer: field `{name}`: {e}"));
    Ok(match kind.as_str() {
        "bool" => FieldCodec::Bool,
        "int" | "uint" | "enum" => {
            let min: i64 = f.get::<Option<i64>>("min")?.unwrap_or(0);
            let max: i64 = f
                .get::<Option<i64>>("max")?
                .ok_or_else(|| err(format!("netpeer: int field `{name}` needs max")))?;
            if min > max {
                return Err(err(format!("netpeer: field `{name}`: min > max")));
            }
            FieldCodec::IntRange { min, max }
        }
        "scalar" => {
            let min = f32_of(f, "min")?.unwrap_or(0.0);
            let max = f32_of(f, "max")?
                .ok_or_else(|| err(format!("netpeer: scalar field `{name}` needs max")))?;
            let vpu = f.get::<Option<u32>>("values_per_unit")?.unwrap_or(100);
            FieldCodec::Scalar(ScalarCodec::new(min, max, vpu).map_err(bad)?)
        }
        "vector3" => {
            let min = vec3_of(&f.get::<LuaValue>("min")?, "min")?;
            let max = vec3_of(&f.get::<LuaValue>("max")?, "max")?;
            let vpu = f.get::<Option<u32>>("values_per_unit")?.unwrap_or(100);
            FieldCodec::Vector3(Vector3Codec::new(min, max, vpu).map_err(bad)?)
        }
        "quat" => {
            let mode = f.get::<Option<u8>>("mode")?.unwrap_or(10);
            FieldCodec::Quat(QuatMode::from_wire_byte(mode).map_err(bad)?)
        }
        "bytes" => FieldCodec::Bytes {
            max_len: f
                .get::<Option<u32>>("max_len")?
                .ok_or_else(|| err(format!("netpeer: bytes field `{name}` needs max_len")))?,
        },
        "collection" => {
            let item = collection_item(f, name)?;
            let max_items = f.get::<Option<u32>>("max_items")?.ok_or_else(|| {
                err(format!(
                    "netpeer: collection field `{name}` needs max_items"
                ))
            })?;
            FieldCodec::Collection {
                item: Box::new(codec_of(&item, name)?),
                max_items,
            }
        }
        other => {
            return Err(err(format!(
                "netpeer: field `{name}`: unknown type `{other}` (bool, int, uint, enum, scalar, vector3, quat, bytes, collection)"
            )));
        }
    })
}

/// The `item` table of a collection field (any type but a collection).
fn collection_item(f: &Table, name: &str) -> mlua::Result<Table> {
    let item: Table = f.get::<Option<Table>>("item")?.ok_or_else(|| {
        err(format!(
            "netpeer: collection field `{name}` needs an item table"
        ))
    })?;
    if item.get::<Option<String>>("type")?.as_deref() == Some("collection") {
        return Err(err(format!(
            "netpeer: field `{name}`: collections cannot nest"
        )));
    }
    Ok(item)
}

fn cond_of(s: Option<String>, name: &str) -> mlua::Result<Cond> {
    Ok(match s.as_deref().unwrap_or("none") {
        "none" => Cond::None,
        "owner_only" => Cond::OwnerOnly,
        "skip_owner" => Cond::SkipOwner,
        "initial_only" => Cond::InitialOnly,
        "simulated_only" => Cond::SimulatedOnly,
        "autonomous_only" => Cond::AutonomousOnly,
        "custom" => Cond::Custom,
        "never" => Cond::Never,
        other => {
            return Err(err(format!(
                "netpeer: field `{name}`: unknown cond `{other}`"
            )));
        }
    })
}

fn field_of(f: &Table) -> mlua::Result<FieldSpec> {
    let name: String = f
        .get::<Option<String>>("name")?
        .ok_or_else(|| err("netpeer: every field needs a name"))?;
    let mut spec =
        FieldSpec::new(name.clone(), codec_of(f, &name)?).cond(cond_of(f.get("cond")?, &name)?);
    // A collection's identity carries its item's type tag.
    let tagged = match f.get::<Option<String>>("type")?.as_deref() {
        Some("collection") => collection_item(f, &name)?.get::<Option<String>>("type")?,
        other => other.map(str::to_owned),
    };
    match tagged.as_deref() {
        Some("uint") => spec = spec.type_tag(TypeTag::Uint),
        Some("enum") => spec = spec.type_tag(TypeTag::Enum),
        _ => {}
    }
    if f.get::<Option<bool>>("client_owned")?.unwrap_or(false) {
        spec = spec.client_owned();
    }
    if let Some(ms) = f.get::<Option<u64>>("cooldown_ms")? {
        spec = spec.cooldown_ms(ms);
    }
    Ok(spec)
}

/// A `ClassSpec` from the registration table.
fn class_of(t: &Table) -> mlua::Result<ClassSpec> {
    let class_id = u32_arg(
        t.get::<Option<i64>>("class_id")?
            .ok_or_else(|| err("netpeer: class_id is required"))?,
        "class_id",
    )?;
    let layout_version = u32_arg(
        t.get::<Option<i64>>("layout_version")?.unwrap_or(1),
        "layout_version",
    )?;
    let list: Table = t
        .get::<Option<Table>>("fields")?
        .ok_or_else(|| err("netpeer: fields is required"))?;
    let mut fields = Vec::new();
    for f in list.sequence_values::<Table>() {
        fields.push(field_of(&f?)?);
    }
    let position_field = match t.get::<Option<String>>("position_field")? {
        Some(name) => Some(
            fields
                .iter()
                .position(|f| f.name == name)
                .and_then(|i| u16::try_from(i).ok())
                .ok_or_else(|| err(format!("netpeer: position_field `{name}` is not a field")))?,
        ),
        None => None,
    };
    let evolution = match t.get::<Option<Table>>("compatible")? {
        None => Evolution::Strict,
        Some(c) => {
            let mut older = Vec::new();
            if let Some(list) = c.get::<Option<Table>>("older")? {
                for v in list.sequence_values::<Table>() {
                    let v = v?;
                    let version = u32_arg(v.get("version")?, "older version")?;
                    let count: usize = v.get("fields")?;
                    older.push((version, count));
                }
            }
            Evolution::Compatible {
                older,
                min_version: u32_arg(
                    c.get::<Option<i64>>("min_version")?.unwrap_or(0),
                    "min_version",
                )?,
            }
        }
    };
    Ok(ClassSpec {
        class_id,
        layout_version,
        fields,
        evolution,
        position_field,
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn api(e: citadel_netpeer::ApiError) -> mlua::Error {
    err(format!("netpeer: {e}"))
}

/// A field value from Lua, typed by the field's codec.
fn value_of(codec: &FieldCodec, v: &LuaValue, name: &str) -> mlua::Result<FieldValue> {
    let mismatch = || err(format!("netpeer: field `{name}`: wrong value type"));
    Ok(match (codec, v) {
        (FieldCodec::Bool, LuaValue::Boolean(b)) => FieldValue::Bool(*b),
        (FieldCodec::IntRange { .. }, LuaValue::Integer(n)) => FieldValue::Int(*n),
        (FieldCodec::IntRange { .. }, LuaValue::Number(n)) if n.fract() == 0.0 => {
            FieldValue::Int(*n as i64)
        }
        (FieldCodec::Scalar(_), LuaValue::Integer(n)) => FieldValue::Scalar(*n as f32),
        (FieldCodec::Scalar(_), LuaValue::Number(n)) => FieldValue::Scalar(*n as f32),
        (FieldCodec::Vector3(_), v) => FieldValue::Vector3(vec3_of(v, name)?),
        (FieldCodec::Quat(_), LuaValue::Table(t)) => {
            let mut q = [0.0f32; 4];
            for (i, key) in ["x", "y", "z", "w"].into_iter().enumerate() {
                let c = t
                    .get::<Option<f64>>(key)?
                    .or(t.get::<Option<f64>>(i + 1)?)
                    .ok_or_else(mismatch)?;
                if let Some(slot) = q.get_mut(i) {
                    *slot = c as f32;
                }
            }
            FieldValue::Quat(q)
        }
        (FieldCodec::Bytes { .. }, LuaValue::String(s)) => FieldValue::Bytes(s.as_bytes().to_vec()),
        _ => return Err(mismatch()),
    })
}

pub(super) fn lua_of(lua: &Lua, v: &Value) -> mlua::Result<LuaValue> {
    Ok(match v {
        Value::Plain(v) => lua_of_plain(lua, v)?,
        Value::Collection(items) => {
            let t = lua.create_table()?;
            for (key, v) in items.values() {
                let key =
                    i64::try_from(*key).map_or(LuaValue::Number(*key as f64), LuaValue::Integer);
                t.raw_set(key, lua_of_plain(lua, v)?)?;
            }
            LuaValue::Table(t)
        }
    })
}

/// One plain value as Lua (a wire collection, never stored, is nil).
pub(super) fn lua_of_plain(lua: &Lua, v: &FieldValue) -> mlua::Result<LuaValue> {
    let vec = |c: &[f32]| -> mlua::Result<LuaValue> {
        let t = lua.create_table()?;
        for (i, x) in c.iter().enumerate() {
            t.raw_set(i + 1, f64::from(*x))?;
        }
        Ok(LuaValue::Table(t))
    };
    Ok(match v {
        FieldValue::Bool(b) => LuaValue::Boolean(*b),
        FieldValue::Int(n) => LuaValue::Integer(*n),
        FieldValue::Scalar(x) => LuaValue::Number(f64::from(*x)),
        FieldValue::Vector3(c) => vec(c)?,
        FieldValue::Quat(c) => vec(c)?,
        FieldValue::Bytes(b) => LuaValue::String(lua.create_string(b)?),
        FieldValue::Collection(_) => LuaValue::Nil,
    })
}

/// The first of `names` that class `class_id` has no field for (`None`
/// when it has them all; nothing to look up takes no lock).
pub(super) fn first_unknown_field<'a>(
    lua: &Lua,
    class_id: u32,
    names: &[&'a str],
) -> mlua::Result<Option<&'a str>> {
    if names.is_empty() {
        return Ok(None);
    }
    let node = host(lua)?;
    Ok(node.inspect(|core| {
        let known: std::collections::HashSet<&str> = core
            .class(class_id)
            .map(|c| c.fields().iter().map(|f| f.name.as_str()).collect())
            .unwrap_or_default();
        names.iter().copied().find(|n| !known.contains(n))
    }))
}

/// `(name, codec)` of each field of an object's class, in id order.
fn fields_of(node: &NetPeerNode, object_id: u32) -> mlua::Result<Vec<(String, FieldCodec)>> {
    node.inspect(|core| {
        let class_id = core.class_of(object_id)?;
        Some(
            core.class(class_id)
                .map(|c| {
                    c.fields()
                        .iter()
                        .map(|f| (f.name.clone(), f.codec.clone()))
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default(),
        )
    })
    .ok_or_else(|| err("netpeer: unknown object"))
}

/// The id and codec of field `name` of an object's class, in one locked
/// read that copies only that field's codec.
fn object_field(node: &NetPeerNode, object_id: u32, name: &str) -> mlua::Result<(u16, FieldCodec)> {
    let found = node
        .inspect(|core| {
            let class_id = core.class_of(object_id)?;
            Some(core.class(class_id).and_then(|c| {
                c.fields()
                    .iter()
                    .enumerate()
                    .find(|(_, f)| f.name == name)
                    .map(|(i, f)| (i, f.codec.clone()))
            }))
        })
        .ok_or_else(|| err("netpeer: unknown object"))?;
    let (i, codec) = found.ok_or_else(|| err(format!("netpeer: unknown field `{name}`")))?;
    let id = u16::try_from(i).map_err(|_| err("netpeer: field id out of range"))?;
    Ok((id, codec))
}

/// The id and codec of field `name`.
fn field_named(fields: &[(String, FieldCodec)], name: &str) -> mlua::Result<(u16, FieldCodec)> {
    let (i, (_, codec)) = fields
        .iter()
        .enumerate()
        .find(|(_, (n, _))| n == name)
        .ok_or_else(|| err(format!("netpeer: unknown field `{name}`")))?;
    let id = u16::try_from(i).map_err(|_| err("netpeer: field id out of range"))?;
    Ok((id, codec.clone()))
}

/// `{name = value, ...}` of an object, resolved against its class.
fn values_arg(
    node: &NetPeerNode,
    object_id: u32,
    values: &Table,
) -> mlua::Result<Vec<(u16, FieldValue)>> {
    let fields = fields_of(node, object_id)?;
    let mut out = Vec::new();
    for pair in values.pairs::<String, LuaValue>() {
        let (name, v) = pair?;
        let (id, codec) = field_named(&fields, &name)?;
        out.push((id, value_of(&codec, &v, &name)?));
    }
    Ok(out)
}

/// The id and item codec of collection field `name`, and the key.
fn item_args(
    node: &NetPeerNode,
    object_id: u32,
    name: &str,
    key: i64,
) -> mlua::Result<(u16, FieldCodec, u64)> {
    let (id, codec) = object_field(node, object_id, name)?;
    let FieldCodec::Collection { item, .. } = codec else {
        return Err(err(format!("netpeer: field `{name}` is not a collection")));
    };
    let key = u64::try_from(key).map_err(|_| err("netpeer: an item key must be >= 0"))?;
    Ok((id, *item, key))
}

fn owner_arg(owner: Option<i64>) -> mlua::Result<Option<u64>> {
    match owner {
        None | Some(0) => Ok(None),
        Some(p) => u64::try_from(p)
            .map(Some)
            .map_err(|_| err("netpeer: owner must be a participant id (0 = none)")),
    }
}

/// Installs the functions into the `citadel` table.
pub fn install(lua: &Lua, citadel: &Table) -> mlua::Result<()> {
    super::netpeer_veto::install(lua, citadel)?;
    citadel.set(
        "netpeer_register_class",
        lua.create_function(|lua, t: Table| {
            let spec = class_of(&t)?;
            let class = Class::compile(spec.clone()).map_err(|e| err(format!("netpeer: {e}")))?;
            let hash = hex(class.current().schema_hash());
            let name = t.get::<Option<String>>("name")?;
            let class_id = spec.class_id;
            match lua.app_data_ref::<NetpeerHost>().map(|h| h.0.clone()) {
                Some(node) => node
                    .register_class(spec)
                    .map_err(|e| err(format!("netpeer: {e}")))?,
                None => {
                    let mut pending: PendingClasses =
                        lua.remove_app_data::<PendingClasses>().unwrap_or_default();
                    if pending.0.iter().any(|p| p.class_id == spec.class_id) {
                        return Err(err("netpeer: class id already registered"));
                    }
                    pending.0.push(spec);
                    lua.set_app_data(pending);
                }
            }
            if let Some(name) = name {
                super::netpeer_veto::remember_class_name(lua, class_id, &name)?;
            }
            Ok(hash)
        })?,
    )?;
    citadel.set(
        "netpeer_spawn",
        lua.create_function(|lua, (class_id, opts): (i64, Option<Table>)| {
            let node = host(lua)?;
            let class_id = u32_arg(class_id, "class_id")?;
            let (match_id, owner, persistent) = match &opts {
                Some(o) => (
                    u32_arg(o.get::<Option<i64>>("match")?.unwrap_or(0), "match")?,
                    owner_arg(o.get("owner")?)?,
                    o.get::<Option<bool>>("persistent")?.unwrap_or(false),
                ),
                None => (0, None, false),
            };
            let id = node
                .spawn(class_id, match_id, owner, persistent)
                .map_err(api)?;
            if let Some(o) = &opts {
                let set = (|| -> mlua::Result<()> {
                    if let Some(values) = o.get::<Option<Table>>("values")? {
                        let values = values_arg(&node, id, &values)?;
                        node.set_fields(id, &values).map_err(api)?;
                    }
                    if let Some(p) = o.get::<Option<LuaValue>>("position")? {
                        node.set_position(id, vec3_of(&p, "position")?)
                            .map_err(api)?;
                    }
                    Ok(())
                })();
                if let Err(e) = set {
                    node.despawn(id);
                    return Err(e);
                }
            }
            Ok(id)
        })?,
    )?;
    citadel.set(
        "netpeer_despawn",
        lua.create_function(|lua, id: i64| Ok(host(lua)?.despawn(u32_arg(id, "object id")?)))?,
    )?;
    citadel.set(
        "netpeer_set_field",
        lua.create_function(|lua, (id, name, value): (i64, String, LuaValue)| {
            let node = host(lua)?;
            let id = u32_arg(id, "object id")?;
            let t = lua.create_table()?;
            t.set(name, value)?;
            let values = values_arg(&node, id, &t)?;
            node.set_fields(id, &values).map_err(api)
        })?,
    )?;
    citadel.set(
        "netpeer_set_fields",
        lua.create_function(|lua, (id, values): (i64, Table)| {
            let node = host(lua)?;
            let id = u32_arg(id, "object id")?;
            let values = values_arg(&node, id, &values)?;
            node.set_fields(id, &values).map_err(api)
        })?,
    )?;
    citadel.set(
        "netpeer_item_set",
        lua.create_function(
            |lua, (id, name, key, value): (i64, String, i64, LuaValue)| {
                let node = host(lua)?;
                let id = u32_arg(id, "object id")?;
                let (field, item, key) = item_args(&node, id, &name, key)?;
                let value = value_of(&item, &value, &name)?;
                node.upsert_item(id, field, key, value).map_err(api)
            },
        )?,
    )?;
    citadel.set(
        "netpeer_item_remove",
        lua.create_function(|lua, (id, name, key): (i64, String, i64)| {
            let node = host(lua)?;
            let id = u32_arg(id, "object id")?;
            let (field, _, key) = item_args(&node, id, &name, key)?;
            node.remove_item(id, field, key).map_err(api)
        })?,
    )?;
    citadel.set(
        "netpeer_set_owner",
        lua.create_function(|lua, (id, owner): (i64, i64)| {
            host(lua)?
                .set_owner(u32_arg(id, "object id")?, owner_arg(Some(owner))?)
                .map_err(api)
        })?,
    )?;
    citadel.set(
        "netpeer_set_position",
        lua.create_function(|lua, (id, position): (i64, LuaValue)| {
            host(lua)?
                .set_position(u32_arg(id, "object id")?, vec3_of(&position, "position")?)
                .map_err(api)
        })?,
    )?;
    citadel.set(
        "netpeer_move_object",
        lua.create_function(|lua, (id, match_id): (i64, i64)| {
            host(lua)?
                .move_object(u32_arg(id, "object id")?, u32_arg(match_id, "match")?)
                .map_err(api)
        })?,
    )?;
    citadel.set(
        "netpeer_move_connection",
        lua.create_function(|lua, (pid, match_id): (i64, i64)| {
            let pid = u64::try_from(pid).map_err(|_| err("netpeer: bad participant id"))?;
            host(lua)?
                .move_connection(pid, u32_arg(match_id, "match")?)
                .map_err(api)
        })?,
    )?;
    citadel.set(
        "netpeer_set_viewer",
        lua.create_function(|lua, (pid, position): (i64, LuaValue)| {
            let pid = u64::try_from(pid).map_err(|_| err("netpeer: bad participant id"))?;
            let viewer = match position {
                LuaValue::Nil => None,
                p => Some(vec3_of(&p, "viewer")?),
            };
            host(lua)?.set_viewer(pid, viewer).map_err(api)
        })?,
    )?;
    citadel.set(
        "netpeer_get",
        lua.create_function(|lua, id: i64| {
            let node = host(lua)?;
            let id = u32_arg(id, "object id")?;
            let Some(view) = node.object(id) else {
                return Ok(LuaValue::Nil);
            };
            let names: Vec<String> = node.inspect(|core| {
                core.class(view.class_id)
                    .map(|c| c.fields().iter().map(|f| f.name.clone()).collect())
                    .unwrap_or_default()
            });
            let out = lua.create_table()?;
            out.set("class_id", view.class_id)?;
            out.set("owner", view.owner.unwrap_or(0))?;
            let fields = lua.create_table()?;
            for (name, v) in names.iter().zip(view.values.iter()) {
                fields.set(name.as_str(), lua_of(lua, v)?)?;
            }
            out.set("fields", fields)?;
            Ok(LuaValue::Table(out))
        })?,
    )?;
    Ok(())
}
