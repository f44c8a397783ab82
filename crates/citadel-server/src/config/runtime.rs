//! `[runtime]`: the embedded Lua runtime's switches and budgets (see
//! `docs/scripting.md`).
//!
//! What it is not: the runtime (`crate::runtime`). Call order: parsed as
//! part of [`super::Config`], then [`RuntimeConfig::validate`]; the worker
//! reads [`RuntimeConfig::effective_tick_deadline_ms`].

use serde::{Deserialize, Serialize};

use super::{ConfigError, at_least, invalid};

/// `[runtime]`: the embedded Lua runtime (see `docs/scripting.md`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RuntimeConfig {
    /// Run `<scripts_dir>/main.lua` when it exists (false forces the built-in relay).
    pub enabled: bool,
    /// Directory holding `main.lua` and the modules `require` may load.
    pub scripts_dir: String,
    /// Deadline of one invocation (RPC, message, join/leave, room hooks), ms.
    pub deadline_ms: u64,
    /// `on_tick` rate (0 = off).
    pub tick_hz: u32,
    /// Deadline of one tick invocation, ms; unset = `min(50, period / 2)`, at least 1.
    pub tick_deadline_ms: Option<u64>,
    /// Memory cap of the Lua VM, MiB.
    pub memory_limit_mb: u64,
    /// Reload `main.lua` when its mtime or size changes.
    pub hot_reload: bool,
    /// How often `main.lua` is polled for changes, ms.
    pub hot_reload_poll_ms: u64,
    /// Calls waiting for the VM; a full queue fails the call at once.
    pub queue_capacity: usize,
    /// Run budget of one `on_input` invocation (one input bundle), ms.
    pub on_input_budget_ms: u64,
    /// Longest a connection waits for its `on_input` verdicts (queue wait
    /// plus run), ms; past it the built-in integration applies.
    pub on_input_wait_ms: u64,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            enabled: true,
            scripts_dir: "./game".into(),
            deadline_ms: 100,
            tick_hz: 0,
            tick_deadline_ms: None,
            memory_limit_mb: 64,
            hot_reload: false,
            hot_reload_poll_ms: 500,
            queue_capacity: 4096,
            on_input_budget_ms: 2,
            on_input_wait_ms: 10,
        }
    }
}

impl RuntimeConfig {
    /// The effective tick deadline (ms): configured, else `min(50, period / 2)`, at least 1.
    pub fn effective_tick_deadline_ms(&self) -> u64 {
        match self.tick_deadline_ms {
            Some(ms) => ms,
            None if self.tick_hz == 0 => 50,
            None => (500 / u64::from(self.tick_hz)).clamp(1, 50),
        }
    }

    /// Checks `runtime.*`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        at_least("runtime.deadline_ms", self.deadline_ms as usize, 1)?;
        if self.tick_hz > 1000 {
            return Err(invalid("runtime.tick_hz", "must not exceed 1000"));
        }
        if self.tick_deadline_ms == Some(0) {
            return Err(invalid(
                "runtime.tick_deadline_ms",
                "must be at least 1 (leave it unset for the automatic value)",
            ));
        }
        at_least("runtime.memory_limit_mb", self.memory_limit_mb as usize, 1)?;
        if self.memory_limit_mb > 65_536 {
            return Err(invalid("runtime.memory_limit_mb", "must not exceed 65536"));
        }
        at_least(
            "runtime.hot_reload_poll_ms",
            self.hot_reload_poll_ms as usize,
            10,
        )?;
        at_least("runtime.queue_capacity", self.queue_capacity, 1)?;
        at_least(
            "runtime.on_input_budget_ms",
            self.on_input_budget_ms as usize,
            1,
        )?;
        if self.on_input_budget_ms > 1_000 {
            return Err(invalid(
                "runtime.on_input_budget_ms",
                "must not exceed 1000",
            ));
        }
        if self.on_input_wait_ms < self.on_input_budget_ms || self.on_input_wait_ms > 5_000 {
            return Err(invalid(
                "runtime.on_input_wait_ms",
                "must be at least runtime.on_input_budget_ms and at most 5000",
            ));
        }
        if self.scripts_dir.trim().is_empty() {
            return Err(invalid("runtime.scripts_dir", "must not be empty"));
        }
        Ok(())
    }
}
