//! `[transform_sync]`: networked actors and snapshot replication.
//!
//! What it is not: the transform hub (`crate::actors`). Call order:
//! [`relocate`] moves the `[transport.transform_sync]` spelling to the top
//! level before parsing (both set is an error); then
//! [`TransformSyncConfig::validate`].

use serde::{Deserialize, Serialize};

use super::{ConfigError, at_least, invalid};

/// `[transform_sync]`: networked actors and snapshot replication.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TransformSyncConfig {
    /// Serve HELLO, networked actors and snapshots.
    pub enabled: bool,
    /// Snapshots per second to each opted-in client (1..=255).
    pub send_rate_hz: u8,
    /// Simulation ticks per second (1..=255).
    pub sim_hz: u8,
    /// Most object entries per snapshot (0 = only the 1 200-byte datagram bounds it).
    pub budget: u32,
    /// Position bounds (cm) and resolution (codes per cm).
    pub position_min: [f32; 3],
    /// Upper position bounds (cm).
    pub position_max: [f32; 3],
    /// Position codes per cm.
    pub position_values_per_unit: u32,
    /// Velocity bounds (cm/s).
    pub velocity_min: [f32; 3],
    /// Upper velocity bounds (cm/s).
    pub velocity_max: [f32; 3],
    /// Velocity codes per cm/s.
    pub velocity_values_per_unit: u32,
    /// Quaternion bits per component: 9, 10 or 15.
    pub quat_mode: u8,
    /// Archetypes that use validated input instead of relay (they refuse NA_STATE).
    pub predicted_authoritative_archetypes: Vec<u16>,
    /// Area of interest; off = each client sees its whole room.
    pub interest_enabled: bool,
    /// AOI grid cell (cm).
    pub interest_cell_size: f32,
    /// AOI enter radius (cm).
    pub interest_inner: f32,
    /// AOI exit radius (cm).
    pub interest_outer: f32,
    /// Reference demo feature; only 0 is supported.
    pub demo_movers: u32,
    /// Reference demo feature; only 0 is supported.
    pub player_slots: u32,
}

impl Default for TransformSyncConfig {
    fn default() -> Self {
        let hello = citadel_wire::tsync::HelloParams::default();
        TransformSyncConfig {
            enabled: true,
            send_rate_hz: hello.send_rate_hz,
            sim_hz: hello.sim_rate_hz,
            budget: 0,
            position_min: hello.position_min,
            position_max: hello.position_max,
            position_values_per_unit: hello.position_values_per_unit,
            velocity_min: hello.velocity_min,
            velocity_max: hello.velocity_max,
            velocity_values_per_unit: hello.velocity_values_per_unit,
            quat_mode: hello.quat_mode.wire_byte(),
            predicted_authoritative_archetypes: Vec::new(),
            interest_enabled: false,
            interest_cell_size: 5_000.0,
            interest_inner: 10_000.0,
            interest_outer: 12_500.0,
            demo_movers: 0,
            player_slots: 0,
        }
    }
}

impl TransformSyncConfig {
    /// The HELLO this configuration advertises.
    pub fn hello(&self) -> Result<citadel_wire::tsync::HelloParams, ConfigError> {
        let quat_mode = citadel_wire::quat::QuatMode::from_wire_byte(self.quat_mode)
            .map_err(|_| invalid("transform_sync.quat_mode", "must be 9, 10 or 15"))?;
        let hello = citadel_wire::tsync::HelloParams {
            position_min: self.position_min,
            position_max: self.position_max,
            position_values_per_unit: self.position_values_per_unit,
            velocity_min: self.velocity_min,
            velocity_max: self.velocity_max,
            velocity_values_per_unit: self.velocity_values_per_unit,
            quat_mode,
            send_rate_hz: self.send_rate_hz,
            sim_rate_hz: self.sim_hz,
        };
        hello
            .codec()
            .map_err(|e| invalid("transform_sync.position_*/velocity_*", e.to_string()))?;
        Ok(hello)
    }

    /// Checks `transform_sync.*`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        at_least("transform_sync.send_rate_hz", self.send_rate_hz as usize, 1)?;
        at_least("transform_sync.sim_hz", self.sim_hz as usize, 1)?;
        self.hello()?;
        if self.demo_movers != 0 || self.player_slots != 0 {
            return Err(invalid(
                "transform_sync.demo_movers/player_slots",
                "reference demo features are not supported; use networked actors or Lua NPCs",
            ));
        }
        if self.interest_enabled
            && !(self.interest_cell_size > 0.0
                && self.interest_inner >= 0.0
                && self.interest_outer >= 0.0)
        {
            return Err(invalid(
                "transform_sync.interest_*",
                "cell size must be > 0 and radii >= 0",
            ));
        }
        Ok(())
    }
}

/// Moves `[transport.transform_sync]` (the reference's spelling) to the
/// top-level table; setting both is an error.
pub(super) fn relocate(table: &mut toml::Table) -> Result<(), ConfigError> {
    let nested = table
        .get_mut("transport")
        .and_then(|t| t.as_table_mut())
        .and_then(|t| t.remove("transform_sync"));
    if let Some(nested) = nested {
        if table.contains_key("transform_sync") {
            return Err(invalid(
                "transport.transform_sync",
                "set either [transform_sync] or [transport.transform_sync], not both",
            ));
        }
        table.insert("transform_sync".into(), nested);
    }
    Ok(())
}
