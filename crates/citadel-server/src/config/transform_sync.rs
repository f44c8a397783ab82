//! `[transform_sync]`: networked actors and snapshot replication.
//!
//! The codec bounds, quaternion mode and rates are held once, as the
//! [`HelloParams`] the node advertises in HELLO (kind 7). The TOML keys stay
//! flat and user-facing (`sim_hz`, `quat_mode = 10`, …): a private table
//! type carries them, and parsing turns it into [`TransformSyncConfig`],
//! refusing a `quat_mode` other than 9, 10 or 15 by its key.
//!
//! What it is not: the transform hub (`crate::actors`). Call order:
//! [`relocate`] moves the `[transport.transform_sync]` spelling to the top
//! level before parsing (both set is an error); then
//! [`TransformSyncConfig::validate`]; the hub builds its codec with
//! [`TransformSyncConfig::codec`].

use citadel_wire::error::CodecError;
use citadel_wire::quant::Vector3Codec;
use citadel_wire::quat::QuatMode;
use citadel_wire::tsync::{HelloParams, TransformCodec};
use serde::{Deserialize, Serialize};

use super::{ConfigError, at_least, invalid};

/// `[transform_sync]` (also accepted as `[transport.transform_sync]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "TransformSyncTable", into = "TransformSyncTable")]
pub struct TransformSyncConfig {
    /// Serve HELLO, networked actors and snapshots.
    pub enabled: bool,
    /// What HELLO advertises: position and velocity bounds and resolution
    /// (`position_*`, `velocity_*`), `quat_mode`, `send_rate_hz` and
    /// `sim_hz` (the wire's `sim_rate_hz`), each 1..=255.
    pub hello: HelloParams,
    /// Most object entries per snapshot (0 = only the 1 200-byte datagram bounds it).
    pub budget: u32,
    /// Archetypes that use validated input instead of relay (they refuse NA_STATE).
    pub predicted_authoritative_archetypes: Vec<u16>,
    /// Fastest move a validated input frame may make (cm/s; the spec's 2 000).
    pub input_max_speed: f32,
    /// Longest step one validated input frame may cover (s; the spec's 0.1).
    pub input_max_dt: f32,
    /// Positions kept per hit-eligible object for rewind (ticks; 0 = one
    /// second's worth, `sim_hz`; at most 1 024).
    pub rewind_history_ticks: u32,
    /// Furthest a shot is rewound (ticks; the spec's 60; at most 1 024).
    pub rewind_max_unlag: u32,
    /// Lag compensation only for round trips at or below this (ms; 220).
    pub lag_comp_rtt_cutoff_ms: f32,
    /// Radius of every hit sphere (cm; 50).
    pub hit_radius: f32,
    /// Farthest a fire command's origin may be from the shooter's server
    /// position after that input (cm; 0 = unchecked, the default).
    pub fire_origin_tolerance: f32,
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
        TransformSyncConfig {
            enabled: true,
            hello: HelloParams::default(),
            budget: 0,
            predicted_authoritative_archetypes: Vec::new(),
            input_max_speed: citadel_netcode::input::DEFAULT_MAX_SPEED,
            input_max_dt: citadel_netcode::input::DEFAULT_MAX_DT,
            rewind_history_ticks: 0,
            rewind_max_unlag: citadel_netcode::rewind::DEFAULT_MAX_UNLAG,
            lag_comp_rtt_cutoff_ms: citadel_netcode::rewind::DEFAULT_RTT_CUTOFF_MS,
            hit_radius: citadel_netcode::rewind::DEFAULT_HIT_RADIUS,
            fire_origin_tolerance: 0.0,
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
    /// Checks `transform_sync.*` (the quaternion mode was checked when parsing).
    pub fn validate(&self) -> Result<(), ConfigError> {
        at_least(
            "transform_sync.send_rate_hz",
            self.hello.send_rate_hz as usize,
            1,
        )?;
        at_least("transform_sync.sim_hz", self.hello.sim_rate_hz as usize, 1)?;
        self.codec()?;
        if self.demo_movers != 0 || self.player_slots != 0 {
            return Err(invalid(
                "transform_sync.demo_movers/player_slots",
                "reference demo features are not supported; use networked actors or Lua NPCs",
            ));
        }
        positive_up_to(
            "transform_sync.input_max_speed",
            self.input_max_speed,
            1_000_000.0,
            "must be > 0 and <= 1000000 cm/s",
        )?;
        positive_up_to(
            "transform_sync.input_max_dt",
            self.input_max_dt,
            1.0,
            "must be > 0 and <= 1 s",
        )?;
        self.validate_rewind()?;
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

    /// The `rewind_*`, `lag_comp_*` and `hit_radius` keys.
    fn validate_rewind(&self) -> Result<(), ConfigError> {
        let max = citadel_netcode::rewind::MAX_HISTORY_TICKS;
        if self.rewind_history_ticks > max {
            return Err(invalid(
                "transform_sync.rewind_history_ticks",
                format!("must be <= {max} (0 = sim_hz)"),
            ));
        }
        if self.rewind_max_unlag > max {
            return Err(invalid(
                "transform_sync.rewind_max_unlag",
                format!("must be <= {max} ticks"),
            ));
        }
        if !(self.lag_comp_rtt_cutoff_ms.is_finite()
            && (0.0..=10_000.0).contains(&self.lag_comp_rtt_cutoff_ms))
        {
            return Err(invalid(
                "transform_sync.lag_comp_rtt_cutoff_ms",
                "must be >= 0 and <= 10000 ms",
            ));
        }
        positive_up_to(
            "transform_sync.hit_radius",
            self.hit_radius,
            100_000.0,
            "must be > 0 and <= 100000 cm",
        )?;
        let tolerance = self.fire_origin_tolerance;
        if !(tolerance.is_finite() && (0.0..=100_000.0).contains(&tolerance)) {
            return Err(invalid(
                "transform_sync.fire_origin_tolerance",
                "must be >= 0 and <= 100000 cm (0 = unchecked)",
            ));
        }
        Ok(())
    }

    /// The fire-resolution numbers of the core.
    pub fn rewind(&self) -> citadel_netcode::rewind::RewindParams {
        citadel_netcode::rewind::RewindParams {
            max_unlag: self.rewind_max_unlag,
            rtt_cutoff_ms: self.lag_comp_rtt_cutoff_ms,
            radius: self.hit_radius,
            origin_tolerance: self.fire_origin_tolerance,
        }
    }

    /// The codec [`Self::hello`] defines; a bad bound is named by its key.
    pub fn codec(&self) -> Result<TransformCodec, ConfigError> {
        let h = &self.hello;
        Ok(TransformCodec {
            position: vector_codec(
                "position",
                h.position_min,
                h.position_max,
                h.position_values_per_unit,
            )?,
            velocity: vector_codec(
                "velocity",
                h.velocity_min,
                h.velocity_max,
                h.velocity_values_per_unit,
            )?,
            quat_mode: h.quat_mode,
        })
    }
}

/// One bounded vector codec; the error names `transform_sync.<name>_min`,
/// `_max` or `_values_per_unit`, whichever the codec refused.
fn vector_codec(
    name: &str,
    min: [f32; 3],
    max: [f32; 3],
    values_per_unit: u32,
) -> Result<Vector3Codec, ConfigError> {
    Vector3Codec::new(min, max, values_per_unit).map_err(|e| {
        let key = match e {
            CodecError::NonFiniteBounds if min.iter().any(|v| !v.is_finite()) => "min",
            CodecError::ZeroResolution | CodecError::TooWide => "values_per_unit",
            _ => "max",
        };
        invalid(&format!("transform_sync.{name}_{key}"), e.to_string())
    })
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

/// The `[transform_sync]` table as users write it: every key flat, names
/// and defaults unchanged since the reference implementation.
#[derive(Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct TransformSyncTable {
    enabled: bool,
    send_rate_hz: u8,
    sim_hz: u8,
    budget: u32,
    position_min: [f32; 3],
    position_max: [f32; 3],
    position_values_per_unit: u32,
    velocity_min: [f32; 3],
    velocity_max: [f32; 3],
    velocity_values_per_unit: u32,
    quat_mode: u8,
    predicted_authoritative_archetypes: Vec<u16>,
    input_max_speed: f32,
    input_max_dt: f32,
    rewind_history_ticks: u32,
    rewind_max_unlag: u32,
    lag_comp_rtt_cutoff_ms: f32,
    hit_radius: f32,
    fire_origin_tolerance: f32,
    interest_enabled: bool,
    interest_cell_size: f32,
    interest_inner: f32,
    interest_outer: f32,
    demo_movers: u32,
    player_slots: u32,
}

impl Default for TransformSyncTable {
    fn default() -> Self {
        TransformSyncConfig::default().into()
    }
}

impl TryFrom<TransformSyncTable> for TransformSyncConfig {
    type Error = String;

    fn try_from(t: TransformSyncTable) -> Result<Self, String> {
        let quat_mode = QuatMode::from_wire_byte(t.quat_mode)
            .map_err(|_| "`transform_sync.quat_mode` must be 9, 10 or 15".to_owned())?;
        Ok(TransformSyncConfig {
            enabled: t.enabled,
            hello: HelloParams {
                position_min: t.position_min,
                position_max: t.position_max,
                position_values_per_unit: t.position_values_per_unit,
                velocity_min: t.velocity_min,
                velocity_max: t.velocity_max,
                velocity_values_per_unit: t.velocity_values_per_unit,
                quat_mode,
                send_rate_hz: t.send_rate_hz,
                sim_rate_hz: t.sim_hz,
            },
            budget: t.budget,
            predicted_authoritative_archetypes: t.predicted_authoritative_archetypes,
            input_max_speed: t.input_max_speed,
            input_max_dt: t.input_max_dt,
            rewind_history_ticks: t.rewind_history_ticks,
            rewind_max_unlag: t.rewind_max_unlag,
            lag_comp_rtt_cutoff_ms: t.lag_comp_rtt_cutoff_ms,
            hit_radius: t.hit_radius,
            fire_origin_tolerance: t.fire_origin_tolerance,
            interest_enabled: t.interest_enabled,
            interest_cell_size: t.interest_cell_size,
            interest_inner: t.interest_inner,
            interest_outer: t.interest_outer,
            demo_movers: t.demo_movers,
            player_slots: t.player_slots,
        })
    }
}

impl From<TransformSyncConfig> for TransformSyncTable {
    fn from(c: TransformSyncConfig) -> Self {
        let TransformSyncConfig {
            enabled,
            hello,
            budget,
            predicted_authoritative_archetypes,
            input_max_speed,
            input_max_dt,
            rewind_history_ticks,
            rewind_max_unlag,
            lag_comp_rtt_cutoff_ms,
            hit_radius,
            fire_origin_tolerance,
            interest_enabled,
            interest_cell_size,
            interest_inner,
            interest_outer,
            demo_movers,
            player_slots,
        } = c;
        TransformSyncTable {
            enabled,
            send_rate_hz: hello.send_rate_hz,
            sim_hz: hello.sim_rate_hz,
            budget,
            position_min: hello.position_min,
            position_max: hello.position_max,
            position_values_per_unit: hello.position_values_per_unit,
            velocity_min: hello.velocity_min,
            velocity_max: hello.velocity_max,
            velocity_values_per_unit: hello.velocity_values_per_unit,
            quat_mode: hello.quat_mode.wire_byte(),
            predicted_authoritative_archetypes,
            input_max_speed,
            input_max_dt,
            rewind_history_ticks,
            rewind_max_unlag,
            lag_comp_rtt_cutoff_ms,
            hit_radius,
            fire_origin_tolerance,
            interest_enabled,
            interest_cell_size,
            interest_inner,
            interest_outer,
            demo_movers,
            player_slots,
        }
    }
}

/// A finite value in (0, max], else the key's error.
fn positive_up_to(key: &str, value: f32, max: f32, message: &str) -> Result<(), ConfigError> {
    if value.is_finite() && value > 0.0 && value <= max {
        Ok(())
    } else {
        Err(invalid(key, message))
    }
}
