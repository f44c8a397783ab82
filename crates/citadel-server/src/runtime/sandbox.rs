//! The sandboxed Lua state: `string`, `table`, `math` plus the safe base
//! functions; a scoped `require`; `pcall`/`xpcall` that cannot swallow a
//! blown deadline; the instruction-count deadline hook; the memory cap.
//!
//! What it is not: it registers no hooks or host functions (see `hooks.rs`
//! and `api.rs`). Call order: [`new_state`] once per VM, before the entry
//! chunk is loaded; the memory cap is applied last so setup never trips it.

use std::path::{Path, PathBuf};
use std::time::Instant;

use mlua::{HookTriggers, Lua, LuaOptions, StdLib, Table, Value, VmState};

use super::api::Invocation;

/// VM instructions between two deadline checks (the spec's figure).
pub const HOOK_EVERY_INSTRUCTIONS: u32 = 10_000;

const MODULES: &str = "citadel.modules";
const LOADING: &str = "citadel.loading";

/// Base functions removed from the sandbox (file and bytecode access,
/// collector control).
const REMOVED_GLOBALS: [&str; 5] = ["dofile", "loadfile", "load", "collectgarbage", "print"];

/// A fresh sandboxed state for scripts under `scripts_dir`.
pub fn new_state(scripts_dir: &Path) -> mlua::Result<Lua> {
    let lua = Lua::new_with(
        StdLib::STRING | StdLib::TABLE | StdLib::MATH,
        LuaOptions::default(),
    )?;
    let globals = lua.globals();
    for name in REMOVED_GLOBALS {
        globals.raw_set(name, Value::Nil)?;
    }
    if let Some(string) = globals.get::<Option<Table>>("string")? {
        string.raw_set("dump", Value::Nil)?;
    }
    install_abort_aware_pcall(&lua)?;
    install_require(&lua, scripts_dir.to_path_buf())?;
    lua.set_hook(
        HookTriggers::new().every_nth_instruction(HOOK_EVERY_INSTRUCTIONS),
        |lua, _debug| {
            if let Some(mut inv) = lua.app_data_mut::<Invocation>()
                && inv.deadline.is_some_and(|d| Instant::now() >= d)
            {
                inv.timed_out = true;
                return Err(mlua::Error::runtime("script deadline exceeded"));
            }
            Ok(VmState::Continue)
        },
    )?;
    Ok(lua)
}

/// `pcall`/`xpcall` re-raise once the invocation is past its deadline, so a
/// script cannot loop forever around a caught timeout.
fn install_abort_aware_pcall(lua: &Lua) -> mlua::Result<()> {
    let aborted = lua.create_function(|lua, ()| {
        Ok(lua
            .app_data_ref::<Invocation>()
            .is_some_and(|inv| inv.timed_out))
    })?;
    lua.load(
        r#"
        local raw_pcall, raw_xpcall, aborted, error = ...
        local function pass(ok, ...)
            if not ok and aborted() then error((...), 0) end
            return ok, ...
        end
        pcall = function(f, ...) return pass(raw_pcall(f, ...)) end
        xpcall = function(f, h, ...) return pass(raw_xpcall(f, h, ...)) end
        "#,
    )
    .set_name("=sandbox")
    .call::<()>((
        lua.globals().get::<Value>("pcall")?,
        lua.globals().get::<Value>("xpcall")?,
        aborted,
        lua.globals().get::<Value>("error")?,
    ))
}

/// Whether `name` is a valid module name: dot-separated `[A-Za-z0-9_]+`.
pub fn valid_module_name(name: &str) -> bool {
    !name.is_empty()
        && name.split('.').all(|seg| {
            !seg.is_empty() && seg.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        })
}

/// The file `require(name)` loads.
pub fn module_path(scripts_dir: &Path, name: &str) -> PathBuf {
    let mut path = scripts_dir.to_path_buf();
    let mut segments = name.split('.').peekable();
    while let Some(seg) = segments.next() {
        if segments.peek().is_some() {
            path.push(seg);
        } else {
            path.push(format!("{seg}.lua"));
        }
    }
    path
}

fn install_require(lua: &Lua, scripts_dir: PathBuf) -> mlua::Result<()> {
    lua.set_named_registry_value(MODULES, lua.create_table()?)?;
    lua.set_named_registry_value(LOADING, lua.create_table()?)?;
    let require = lua.create_function(move |lua, name: String| {
        if !valid_module_name(&name) {
            return Err(mlua::Error::runtime(format!(
                "require: invalid module name `{name}` (dotted [A-Za-z0-9_] segments only)"
            )));
        }
        let modules: Table = lua.named_registry_value(MODULES)?;
        let cached: Value = modules.get(name.as_str())?;
        if !cached.is_nil() {
            return Ok(cached);
        }
        let loading: Table = lua.named_registry_value(LOADING)?;
        if loading.get::<bool>(name.as_str())? {
            return Err(mlua::Error::runtime("cyclic require detected"));
        }
        let path = module_path(&scripts_dir, &name);
        let source = std::fs::read(&path)
            .map_err(|_| mlua::Error::runtime(format!("require: module `{name}` not found")))?;
        loading.set(name.as_str(), true)?;
        let result = lua
            .load(source)
            .set_name(format!("@{name}.lua"))
            .call::<Value>(());
        loading.set(name.as_str(), Value::Nil)?;
        let value = match result? {
            Value::Nil => Value::Boolean(true),
            v => v,
        };
        modules.set(name.as_str(), value.clone())?;
        Ok(value)
    })?;
    lua.globals().set("require", require)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_names_follow_the_rules() {
        assert!(valid_module_name("util"));
        assert!(valid_module_name("lib.math_2"));
        for bad in [
            "",
            "..",
            "a..b",
            "/etc/passwd",
            "a/b",
            "a-b",
            ".a",
            "a.",
            "a\\b",
        ] {
            assert!(!valid_module_name(bad), "{bad}");
        }
        assert_eq!(
            module_path(Path::new("/g"), "lib.util"),
            PathBuf::from("/g/lib/util.lua")
        );
    }

    #[test]
    fn dangerous_globals_are_absent() {
        let lua = new_state(Path::new(".")).unwrap();
        for name in [
            "io",
            "os",
            "package",
            "debug",
            "coroutine",
            "dofile",
            "loadfile",
            "load",
        ] {
            let v: Value = lua.globals().get(name).unwrap();
            assert!(v.is_nil(), "{name} must not exist");
        }
        let dump: Value = lua.load("return string.dump").eval().unwrap();
        assert!(dump.is_nil());
        let n: i64 = lua
            .load("return math.max(1, #table.concat({'a','b'}))")
            .eval()
            .unwrap();
        assert_eq!(n, 2);
    }
}
