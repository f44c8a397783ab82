//! Node configuration: built-in defaults < TOML file < `CITADEL_*`
//! environment < CLI flags, validated before anything binds.
//!
//! What it is not: it never reads secrets into logs and never opens a
//! socket. Call order: [`Config::load`] (or [`Config::from_toml_str`] in
//! tests), then [`Config::validate`]. Every key is optional; an unknown key
//! is an error naming it. Environment overrides follow the key path:
//! `transport.auth.allow_guests` is `CITADEL_TRANSPORT_AUTH_ALLOW_GUESTS`;
//! `CITADEL_LOG_LEVEL`, `CITADEL_NODE_ID`, `CITADEL_PUBLIC_ADDR` and
//! `CITADEL_HTTP_BIND` are kept as short aliases. Unknown `CITADEL_*`
//! variables are ignored.
//!
//! Layout: this module holds [`Config`], loading and the order sections are
//! validated in. Each section lives in its own file with its defaults and a
//! `validate` that names the full dotted key it rejects: `server.rs`
//! (`[server]`, `[http]`, `[logging]`), `transport.rs` (`[transport]`,
//! `.websocket`, `.auth`, `.limits`), `network_peer.rs`
//! (`.network_peer`), `quic.rs` (`.quic`, `.webtransport`,
//! `.tls`), `rooms.rs` (`[rooms]`, `[shutdown]`), `runtime.rs`,
//! `database.rs`, `authentication.rs`, `transform_sync.rs`. The service
//! sections (`[notifications]`, `[friends]`, `[groups]`, `[matchmaker]`,
//! `[party]`, `[chat]`) live with their services. A new section: its file, one field
//! in [`Config`], one line in [`Config::validate`].

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

mod authentication;
mod database;
mod network_peer;
mod quic;
mod rooms;
mod runtime;
mod server;
mod transform_sync;
mod transport;

pub use authentication::{AuthLimitsConfig, AuthenticationConfig, RateRule};
pub use database::DatabaseConfig;
pub use network_peer::NetworkPeerConfig;
pub use quic::{DatagramTransportConfig, QUIC_DEFAULT_BIND, TlsConfig, WEBTRANSPORT_DEFAULT_BIND};
pub use rooms::{RoomsConfig, ShutdownConfig};
pub use runtime::RuntimeConfig;
pub use server::{
    HttpConfig, LoggingConfig, MAX_CORS_ORIGINS, MAX_HEADER_BYTES, MIN_HEADER_BYTES, ServerConfig,
};
pub use transform_sync::TransformSyncConfig;
pub use transport::{AuthConfig, LaneConfig, LimitsConfig, TransportConfig, WebSocketConfig};

/// A configuration problem, always naming the offending key or file.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// TOML syntax error or an unknown/mistyped key.
    #[error("invalid config{origin}: {message}")]
    Parse {
        /// Where the bad value came from.
        origin: String,
        /// The parser's message (names the key).
        message: String,
    },
    /// A value outside its allowed range.
    #[error("invalid config key `{key}`: {message}")]
    Invalid {
        /// Dotted key path.
        key: String,
        /// What is wrong.
        message: String,
    },
}

fn invalid(key: &str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key: key.to_owned(),
        message: message.into(),
    }
}

/// The whole configuration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// `[server]`.
    pub server: ServerConfig,
    /// `[http]`.
    pub http: HttpConfig,
    /// `[logging]`.
    pub logging: LoggingConfig,
    /// `[transport]`.
    pub transport: TransportConfig,
    /// `[rooms]`.
    pub rooms: RoomsConfig,
    /// `[shutdown]`.
    pub shutdown: ShutdownConfig,
    /// `[runtime]`: the embedded Lua runtime.
    pub runtime: RuntimeConfig,
    /// `[database]`.
    pub database: DatabaseConfig,
    /// `[authentication]`.
    pub authentication: AuthenticationConfig,
    /// `[transform_sync]` (also accepted as `[transport.transform_sync]`).
    pub transform_sync: TransformSyncConfig,
    /// `[notifications]`: durable inbox bounds.
    pub notifications: crate::services::notifications::NotificationsConfig,
    /// `[friends]`: friend graph bounds.
    pub friends: crate::services::friends::FriendsConfig,
    /// `[groups]`: group bounds.
    pub groups: crate::services::groups::GroupsConfig,
    /// `[matchmaker]`: ticket queue and handoff bounds.
    pub matchmaker: crate::services::matchmaker::MatchmakerConfig,
    /// `[party]`: party size.
    pub party: crate::services::party::PartyConfig,
    /// `[chat]` and `[chat.limits]`: durable chat bounds and rate limits.
    pub chat: crate::services::chat::ChatConfig,
}

/// Short environment aliases kept from the reference implementation.
const ENV_ALIASES: [(&str, &str); 5] = [
    ("CITADEL_DATABASE_URL", "database.url"),
    ("CITADEL_LOG_LEVEL", "logging.level"),
    ("CITADEL_NODE_ID", "server.node_id"),
    ("CITADEL_PUBLIC_ADDR", "server.public_addr"),
    ("CITADEL_HTTP_BIND", "http.bind"),
];

/// Overrides given on the command line (highest precedence).
#[derive(Debug, Clone, Default)]
pub struct CliOverrides {
    /// `--log-level`.
    pub log_level: Option<String>,
    /// `--bind` (HTTP).
    pub http_bind: Option<String>,
    /// `--node-id`.
    pub node_id: Option<String>,
}

/// Where the configuration came from (for the banner and `citadel check`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigSource {
    /// An explicit or discovered file.
    File(PathBuf),
    /// Built-in defaults (no file).
    Defaults,
}

impl Config {
    /// Resolves the configuration: `explicit` file, else `./citadel.toml` if
    /// present, else defaults; then `env`, then `cli`; then validates.
    pub fn load(
        explicit: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
        cli: &CliOverrides,
    ) -> Result<(Config, ConfigSource), ConfigError> {
        let (text, source) = match explicit {
            Some(path) => (read(path)?, ConfigSource::File(path.to_path_buf())),
            None => {
                let path = PathBuf::from("citadel.toml");
                if path.is_file() {
                    (read(&path)?, ConfigSource::File(path))
                } else {
                    (String::new(), ConfigSource::Defaults)
                }
            }
        };
        let origin = match &source {
            ConfigSource::File(p) => format!(" in {}", p.display()),
            ConfigSource::Defaults => String::new(),
        };
        let mut table: toml::Table = toml::from_str(&text).map_err(|e| ConfigError::Parse {
            origin: origin.clone(),
            message: e.to_string(),
        })?;
        transform_sync::relocate(&mut table)?;
        apply_env(&mut table, env)?;
        let mut config: Config =
            Config::deserialize(toml::Value::Table(table)).map_err(|e| ConfigError::Parse {
                origin,
                message: e.to_string(),
            })?;
        if let Some(level) = &cli.log_level {
            config.logging.level = level.clone();
        }
        if let Some(bind) = &cli.http_bind {
            config.http.bind = bind.clone();
        }
        if let Some(id) = &cli.node_id {
            config.server.node_id = id.clone();
        }
        config.validate()?;
        Ok((config, source))
    }

    /// Parses a TOML document (no environment, no validation).
    pub fn from_toml_str(text: &str) -> Result<Config, ConfigError> {
        let parse = |e: &dyn std::fmt::Display| ConfigError::Parse {
            origin: String::new(),
            message: e.to_string(),
        };
        let mut table: toml::Table = toml::from_str(text).map_err(|e| parse(&e))?;
        transform_sync::relocate(&mut table)?;
        Config::deserialize(toml::Value::Table(table)).map_err(|e| parse(&e))
    }

    /// Checks every section; the error names the full dotted key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.server.validate()?;
        self.notifications.validate()?;
        self.friends.validate()?;
        self.groups.validate()?;
        self.matchmaker.validate()?;
        self.party.validate()?;
        self.chat.validate()?;
        self.http.validate()?;
        self.transport.validate()?;
        self.logging.validate()?;
        self.database.validate()?;
        self.transform_sync.validate()?;
        self.authentication.validate()?;
        self.rooms.validate()?;
        self.runtime.validate()?;
        Ok(())
    }

    /// The HTTP listen address (validated).
    pub fn http_addr(&self) -> Result<SocketAddr, ConfigError> {
        parse_addr("http.bind", &self.http.bind)
    }

    /// The WebSocket listen address (validated).
    pub fn websocket_addr(&self) -> Result<SocketAddr, ConfigError> {
        parse_addr("transport.websocket.bind", &self.transport.websocket.bind)
    }

    /// The QUIC UDP address.
    pub fn quic_addr(&self) -> Result<SocketAddr, ConfigError> {
        parse_addr(
            "transport.quic.bind",
            self.transport.quic.bind_or(QUIC_DEFAULT_BIND),
        )
    }

    /// The WebTransport UDP address.
    pub fn webtransport_addr(&self) -> Result<SocketAddr, ConfigError> {
        parse_addr(
            "transport.webtransport.bind",
            self.transport
                .webtransport
                .bind_or(WEBTRANSPORT_DEFAULT_BIND),
        )
    }
}

fn read(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn parse_addr(key: &str, value: &str) -> Result<SocketAddr, ConfigError> {
    value
        .parse()
        .map_err(|_| invalid(key, format!("`{value}` is not an ip:port socket address")))
}

fn at_least(key: &str, value: usize, min: usize) -> Result<(), ConfigError> {
    if value < min {
        return Err(invalid(key, format!("must be at least {min}")));
    }
    Ok(())
}

/// Every leaf key path of the defaults, with its default value (the type
/// template for parsing environment strings).
fn leaf_paths() -> Vec<(String, toml::Value)> {
    fn walk(prefix: &str, value: &toml::Value, out: &mut Vec<(String, toml::Value)>) {
        match value {
            toml::Value::Table(t) => {
                for (k, v) in t {
                    let path = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    walk(&path, v, out);
                }
            }
            leaf => out.push((prefix.to_owned(), leaf.clone())),
        }
    }
    let mut out = Vec::new();
    if let Ok(defaults) = toml::Value::try_from(Config::default()) {
        walk("", &defaults, &mut out);
    }
    out
}

/// The environment variable that overrides `path`.
pub fn env_name(path: &str) -> String {
    format!("CITADEL_{}", path.replace('.', "_").to_ascii_uppercase())
}

fn apply_env(
    table: &mut toml::Table,
    env: impl IntoIterator<Item = (String, String)>,
) -> Result<(), ConfigError> {
    let leaves = leaf_paths();
    for (name, raw) in env {
        if !name.starts_with("CITADEL_") {
            continue;
        }
        let path = ENV_ALIASES
            .iter()
            .find(|(alias, _)| *alias == name)
            .map(|(_, path)| (*path).to_owned())
            .or_else(|| {
                leaves
                    .iter()
                    .find(|(path, _)| env_name(path) == name)
                    .map(|(path, _)| path.clone())
            });
        let Some(path) = path else { continue };
        let template = leaves
            .iter()
            .find(|(p, _)| *p == path)
            .map(|(_, v)| v.clone())
            .unwrap_or(toml::Value::String(String::new()));
        let value = parse_env_value(&template, &raw).map_err(|message| ConfigError::Parse {
            origin: format!(" in environment variable {name}"),
            message,
        })?;
        set_path(table, &path, value);
    }
    Ok(())
}

fn parse_env_value(template: &toml::Value, raw: &str) -> Result<toml::Value, String> {
    match template {
        toml::Value::Boolean(_) => match raw.trim().to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" | "on" => Ok(toml::Value::Boolean(true)),
            "false" | "0" | "no" | "off" => Ok(toml::Value::Boolean(false)),
            _ => Err(format!("expected a boolean, got `{raw}`")),
        },
        toml::Value::Integer(_) => raw
            .trim()
            .parse::<i64>()
            .map(toml::Value::Integer)
            .map_err(|_| format!("expected an integer, got `{raw}`")),
        toml::Value::Float(_) => raw
            .trim()
            .parse::<f64>()
            .map(toml::Value::Float)
            .map_err(|_| format!("expected a number, got `{raw}`")),
        _ => Ok(toml::Value::String(raw.to_owned())),
    }
}

fn set_path(table: &mut toml::Table, path: &str, value: toml::Value) {
    let mut parts: Vec<&str> = path.split('.').collect();
    let Some(last) = parts.pop() else { return };
    let mut cursor = table;
    for part in parts {
        let entry = cursor
            .entry(part.to_owned())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        if !entry.is_table() {
            *entry = toml::Value::Table(toml::Table::new());
        }
        let toml::Value::Table(next) = entry else {
            return;
        };
        cursor = next;
    }
    cursor.insert(last.to_owned(), value);
}

#[cfg(test)]
mod tests;
