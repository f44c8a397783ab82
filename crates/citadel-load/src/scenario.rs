//! Scenario files: the TOML that says what the bots do and how hard.
//!
//! What it is: one `kind` key selecting a [`Scenario`] variant plus that
//! variant's keys (unknown keys are errors, every value is range-checked by
//! [`Scenario::validate`] with a message naming the key). What it is not: a
//! workload implementation (see `bots/`) or target selection (CLI).
//!
//! Call order: [`Scenario::load`] (parse + validate) → hand the variant to
//! its runner.

use std::path::Path;

use anyhow::{Context, bail};
use serde::Deserialize;

/// Smallest relay payload: 8-byte send time, 4-byte bot index, 4-byte seq.
pub const MIN_PAYLOAD_BYTES: usize = 16;

/// A parsed, validated scenario.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Scenario {
    /// N clients in rooms of K, each relaying a position at R Hz; ramps N.
    RelayFanout(RelayFanout),
    /// Ramp to N authenticated idle connections; server RSS per connection.
    IdleCapacity(IdleCapacity),
    /// Pipelined RPC round trips.
    RpcEcho(RpcEcho),
    /// Connect, authenticate, disconnect as fast as possible.
    HandshakeStorm(HandshakeStorm),
    /// Networked actors: owners send NA_STATE, viewers get snapshots.
    ActorSync(ActorSync),
    /// Owner prediction: validated kind-9 input, input → snapshot latency.
    PredictedInput(PredictedInput),
}

/// `kind = "predicted-input"` (Citadel only): see `bots/predicted.rs`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PredictedInput {
    /// Bots, each owning one predicted avatar.
    pub clients: u32,
    /// Bots per room.
    pub room_size: u32,
    /// Kind-9 inputs per owner per second.
    pub input_hz: f64,
    /// Seconds after the connects begin before measuring.
    #[serde(default = "d_actor_warmup")]
    pub warmup_seconds: f64,
    /// Length of the measurement.
    pub measure_seconds: f64,
    /// The verdict note compares the p99 input → snapshot time with this.
    pub p99_bound_ms: f64,
    /// Concurrent connection attempts.
    #[serde(default = "d_concurrency")]
    pub connect_concurrency: u32,
    /// Source addresses 127.0.0.1 .. 127.0.0.N used round-robin.
    #[serde(default = "d_sources")]
    pub source_addresses: u8,
}

/// `kind = "relay-fanout"`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RelayFanout {
    /// Members per room (K).
    pub room_size: u32,
    /// Position sends per client per second (R).
    pub rate_hz: f64,
    /// Relay payload size in bytes (>= 16).
    #[serde(default = "d_payload")]
    pub payload_bytes: usize,
    /// Client counts to step through, ascending multiples of `room_size`.
    pub clients: Vec<u32>,
    /// Seconds of sending before each measurement window.
    #[serde(default = "d_warmup")]
    pub warmup_seconds: f64,
    /// Length of each measurement window.
    pub measure_seconds: f64,
    /// Extra time after a window for late deliveries to count.
    #[serde(default = "d_grace")]
    pub grace_seconds: f64,
    /// A step passes only if p99 one-way latency is at most this.
    pub p99_bound_ms: f64,
    /// ... and drops / expected deliveries is at most this.
    #[serde(default)]
    pub max_drop_ratio: f64,
    /// Stop at the first failing step (otherwise run every step).
    #[serde(default = "d_true")]
    pub stop_on_failure: bool,
    /// Concurrent connection attempts while ramping.
    #[serde(default = "d_concurrency")]
    pub connect_concurrency: u32,
    /// Source addresses 127.0.0.1 .. 127.0.0.N used round-robin.
    #[serde(default = "d_sources")]
    pub source_addresses: u8,
}

/// `kind = "idle-capacity"`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdleCapacity {
    /// Total authenticated connections to reach.
    pub connections: u32,
    /// Number of ramp steps (RSS is sampled after each).
    #[serde(default = "d_steps")]
    pub steps: u32,
    /// Seconds to wait after each step before sampling RSS.
    #[serde(default = "d_settle")]
    pub settle_seconds: f64,
    /// Seconds to hold every connection open at the end.
    #[serde(default = "d_settle")]
    pub hold_seconds: f64,
    /// Concurrent connection attempts.
    #[serde(default = "d_concurrency")]
    pub connect_concurrency: u32,
    /// Source addresses 127.0.0.1 .. 127.0.0.N used round-robin.
    #[serde(default = "d_sources")]
    pub source_addresses: u8,
}

/// `kind = "rpc-echo"`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RpcEcho {
    /// Connections issuing RPCs.
    pub clients: u32,
    /// RPCs in flight per connection (Citadel allows 16 by default).
    pub pipeline: u32,
    /// The RPC method name (needs a server that registers it).
    pub method: String,
    /// Request payload size in bytes.
    #[serde(default = "d_payload")]
    pub payload_bytes: usize,
    /// Seconds before measuring.
    #[serde(default = "d_warmup")]
    pub warmup_seconds: f64,
    /// Measurement length.
    pub measure_seconds: f64,
    /// Source addresses 127.0.0.1 .. 127.0.0.N used round-robin.
    #[serde(default = "d_sources")]
    pub source_addresses: u8,
}

/// `kind = "handshake-storm"`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HandshakeStorm {
    /// Concurrent connect/authenticate/disconnect loops.
    pub workers: u32,
    /// Seconds to run.
    pub duration_seconds: f64,
    /// Hard cap on handshakes in total (bounds the run by count too).
    pub max_handshakes: u64,
    /// Also join a room before disconnecting (required by Colyseus, whose
    /// connections exist only inside a room).
    #[serde(default)]
    pub join_room: bool,
    /// Source addresses 127.0.0.1 .. 127.0.0.N used round-robin.
    #[serde(default = "d_sources")]
    pub source_addresses: u8,
}

/// `kind = "actor-sync"` (Citadel only).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActorSync {
    /// Bots, each owning one avatar.
    pub clients: u32,
    /// Bots per room.
    pub room_size: u32,
    /// NA_STATE sends per owner per second.
    pub state_hz: f64,
    /// Seconds after the connects begin before measuring.
    #[serde(default = "d_actor_warmup")]
    pub warmup_seconds: f64,
    /// Length of the moving measurement.
    pub measure_seconds: f64,
    /// Length of the idle phase (one room of still avatars); 0 skips it.
    #[serde(default)]
    pub idle_seconds: f64,
    /// The verdict note compares the p99 position age with this.
    pub p99_bound_ms: f64,
    /// Concurrent connection attempts.
    #[serde(default = "d_concurrency")]
    pub connect_concurrency: u32,
    /// Source addresses 127.0.0.1 .. 127.0.0.N used round-robin.
    #[serde(default = "d_sources")]
    pub source_addresses: u8,
}

fn d_actor_warmup() -> f64 {
    3.0
}
fn d_payload() -> usize {
    MIN_PAYLOAD_BYTES
}
fn d_warmup() -> f64 {
    1.0
}
fn d_grace() -> f64 {
    1.0
}
fn d_true() -> bool {
    true
}
fn d_concurrency() -> u32 {
    64
}
fn d_sources() -> u8 {
    4
}
fn d_steps() -> u32 {
    4
}
fn d_settle() -> f64 {
    1.0
}

impl Scenario {
    /// Reads, parses and validates `path`.
    #[cfg(test)]
    pub fn load(path: &Path) -> anyhow::Result<Scenario> {
        Self::load_with(path, &[])
    }

    /// Reads `path`, applies `KEY=VALUE` overrides (VALUE is a TOML value,
    /// e.g. `connections=19700` or `clients=[400,800]`; a bare word is a
    /// string), then parses and validates.
    pub fn load_with(path: &Path, overrides: &[String]) -> anyhow::Result<Scenario> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read scenario {}", path.display()))?;
        Self::parse_with(&text, overrides).with_context(|| format!("scenario {}", path.display()))
    }

    /// Parses and validates TOML text.
    #[cfg(test)]
    pub fn parse(text: &str) -> anyhow::Result<Scenario> {
        Self::parse_with(text, &[])
    }

    /// Parses TOML text with `KEY=VALUE` overrides, then validates.
    pub fn parse_with(text: &str, overrides: &[String]) -> anyhow::Result<Scenario> {
        let mut table: toml::Table = toml::from_str(text).context("invalid scenario TOML")?;
        for o in overrides {
            let (key, value) = o
                .split_once('=')
                .with_context(|| format!("--set {o:?}: expected KEY=VALUE"))?;
            let key = key.trim();
            if key == "kind" {
                bail!("--set cannot change the scenario kind");
            }
            let value: toml::Value = match toml::from_str::<toml::Table>(&format!("v = {value}")) {
                Ok(mut t) => t.remove("v").unwrap_or(toml::Value::String(value.into())),
                Err(_) => toml::Value::String(value.trim().into()),
            };
            table.insert(key.to_owned(), value);
        }
        let scenario: Scenario = table.try_into().context("invalid scenario")?;
        scenario.validate()?;
        Ok(scenario)
    }

    /// The `kind` string.
    pub fn kind(&self) -> &'static str {
        match self {
            Scenario::RelayFanout(_) => "relay-fanout",
            Scenario::IdleCapacity(_) => "idle-capacity",
            Scenario::RpcEcho(_) => "rpc-echo",
            Scenario::HandshakeStorm(_) => "handshake-storm",
            Scenario::ActorSync(_) => "actor-sync",
            Scenario::PredictedInput(_) => "predicted-input",
        }
    }

    /// Most connections the scenario opens at once (for fd checks).
    pub fn peak_connections(&self) -> u64 {
        match self {
            Scenario::RelayFanout(s) => s.clients.iter().copied().max().unwrap_or(0).into(),
            Scenario::IdleCapacity(s) => s.connections.into(),
            Scenario::RpcEcho(s) => s.clients.into(),
            Scenario::HandshakeStorm(s) => s.workers.into(),
            Scenario::ActorSync(s) => s.clients.max(s.room_size).into(),
            Scenario::PredictedInput(s) => s.clients.into(),
        }
    }

    /// Range checks; the error names the offending key.
    pub fn validate(&self) -> anyhow::Result<()> {
        match self {
            Scenario::RelayFanout(s) => {
                range("room_size", f64::from(s.room_size), 2.0, 10_000.0)?;
                range("rate_hz", s.rate_hz, 0.1, 1_000.0)?;
                range("payload_bytes", s.payload_bytes as f64, 16.0, 60_000.0)?;
                range("warmup_seconds", s.warmup_seconds, 0.0, 600.0)?;
                range("measure_seconds", s.measure_seconds, 0.1, 3_600.0)?;
                range("grace_seconds", s.grace_seconds, 0.0, 60.0)?;
                range("p99_bound_ms", s.p99_bound_ms, 0.001, 60_000.0)?;
                range("max_drop_ratio", s.max_drop_ratio, 0.0, 1.0)?;
                connect_concurrency(s.connect_concurrency)?;
                source_addresses(s.source_addresses)?;
                if s.clients.is_empty() || s.clients.len() > 1_000 {
                    bail!("clients: give 1 to 1000 client counts");
                }
                let mut last = 0;
                for &n in &s.clients {
                    if n == 0 || !n.is_multiple_of(s.room_size) || n <= last || n > 1_000_000 {
                        bail!(
                            "clients: each count must be a positive multiple of room_size ({}), \
                             ascending, at most 1000000 (got {n})",
                            s.room_size
                        );
                    }
                    last = n;
                }
            }
            Scenario::IdleCapacity(s) => {
                range("connections", f64::from(s.connections), 1.0, 1_000_000.0)?;
                range("steps", f64::from(s.steps), 1.0, 1_000.0)?;
                range("settle_seconds", s.settle_seconds, 0.0, 600.0)?;
                range("hold_seconds", s.hold_seconds, 0.0, 3_600.0)?;
                connect_concurrency(s.connect_concurrency)?;
                source_addresses(s.source_addresses)?;
            }
            Scenario::RpcEcho(s) => {
                range("clients", f64::from(s.clients), 1.0, 100_000.0)?;
                range("pipeline", f64::from(s.pipeline), 1.0, 1_024.0)?;
                range("payload_bytes", s.payload_bytes as f64, 0.0, 60_000.0)?;
                range("warmup_seconds", s.warmup_seconds, 0.0, 600.0)?;
                range("measure_seconds", s.measure_seconds, 0.1, 3_600.0)?;
                source_addresses(s.source_addresses)?;
                if s.method.is_empty() || s.method.len() > 1_024 {
                    bail!("method: give a name of 1 to 1024 bytes");
                }
            }
            Scenario::ActorSync(s) => {
                range("clients", f64::from(s.clients), 1.0, 100_000.0)?;
                range("room_size", f64::from(s.room_size), 2.0, 1_000.0)?;
                range("state_hz", s.state_hz, 0.5, 120.0)?;
                // Positions carry their send time in ms as x, inside the
                // default ±262,144 bound.
                range("warmup_seconds", s.warmup_seconds, 0.5, 30.0)?;
                range("measure_seconds", s.measure_seconds, 0.5, 200.0)?;
                range("idle_seconds", s.idle_seconds, 0.0, 200.0)?;
                range("p99_bound_ms", s.p99_bound_ms, 1.0, 60_000.0)?;
                connect_concurrency(s.connect_concurrency)?;
                source_addresses(s.source_addresses)?;
            }
            Scenario::PredictedInput(s) => {
                range("clients", f64::from(s.clients), 1.0, 100_000.0)?;
                range("room_size", f64::from(s.room_size), 1.0, 1_000.0)?;
                range("input_hz", s.input_hz, 1.0, 240.0)?;
                range("warmup_seconds", s.warmup_seconds, 0.5, 30.0)?;
                range("measure_seconds", s.measure_seconds, 0.5, 600.0)?;
                range("p99_bound_ms", s.p99_bound_ms, 1.0, 60_000.0)?;
                connect_concurrency(s.connect_concurrency)?;
                source_addresses(s.source_addresses)?;
            }
            Scenario::HandshakeStorm(s) => {
                range("workers", f64::from(s.workers), 1.0, 10_000.0)?;
                range("duration_seconds", s.duration_seconds, 0.1, 3_600.0)?;
                range("max_handshakes", s.max_handshakes as f64, 1.0, 1e9)?;
                source_addresses(s.source_addresses)?;
            }
        }
        Ok(())
    }
}

/// The `connect_concurrency` key shared by the connecting scenarios.
fn connect_concurrency(value: u32) -> anyhow::Result<()> {
    range("connect_concurrency", f64::from(value), 1.0, 10_000.0)
}

/// The `source_addresses` key shared by every scenario.
fn source_addresses(value: u8) -> anyhow::Result<()> {
    range("source_addresses", f64::from(value), 1.0, 254.0)
}

fn range(key: &str, value: f64, low: f64, high: f64) -> anyhow::Result<()> {
    if value.is_finite() && value >= low && value <= high {
        Ok(())
    } else {
        bail!("{key} = {value} is outside {low}..={high}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_scenarios_parse() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/scenarios");
        for dir in [root.clone(), root.join("smoke")] {
            for name in [
                "relay-fanout",
                "idle-capacity",
                "rpc-echo",
                "handshake-storm",
                "actor-sync",
                "predicted-input",
            ] {
                let path = dir.join(format!("{name}.toml"));
                let s = Scenario::load(&path);
                assert!(s.is_ok(), "{}: {s:?}", path.display());
                assert!(s.is_ok_and(|s| s.kind() == name));
            }
        }
    }

    #[test]
    fn overrides_apply_and_are_checked() {
        let base = "kind = \"idle-capacity\"\nconnections = 10\n";
        let s = Scenario::parse_with(base, &["connections=20".into(), "steps = 2".into()]);
        assert!(
            matches!(s, Ok(Scenario::IdleCapacity(ref i)) if i.connections == 20 && i.steps == 2)
        );
        assert!(Scenario::parse_with(base, &["connections".into()]).is_err());
        assert!(Scenario::parse_with(base, &["connections=0".into()]).is_err());
        assert!(Scenario::parse_with(base, &["kind=rpc-echo".into()]).is_err());
        assert!(Scenario::parse_with(base, &["nope=1".into()]).is_err());
    }

    #[test]
    fn bad_input_is_a_named_error() {
        let bad = [
            ("kind = \"nope\"", "kind"),
            (
                "kind = \"rpc-echo\"\nclients = 1\npipeline = 0\nmethod = \"x\"\nmeasure_seconds = 1",
                "pipeline",
            ),
            (
                "kind = \"relay-fanout\"\nroom_size = 8\nrate_hz = 20\nclients = [12]\nmeasure_seconds = 1\np99_bound_ms = 50",
                "clients",
            ),
            (
                "kind = \"handshake-storm\"\nworkers = 1\nduration_seconds = 1\nmax_handshakes = 5\ntypo = 1",
                "typo",
            ),
        ];
        for (text, key) in bad {
            let err = Scenario::parse(text).map(|_| ()).unwrap_err();
            assert!(format!("{err:#}").contains(key), "{text}: {err:#}");
        }
    }
}
