//! `[server]`, `[http]` and `[logging]`: the node's identity, its HTTP
//! listener and its log output.
//!
//! What it is not: the HTTP server itself (`crate::http`) or the tracing
//! setup (`main.rs`). Call order: parsed as part of [`super::Config`], then
//! each section's `validate`, which names the full dotted key it rejects.

use serde::{Deserialize, Serialize};

use super::{ConfigError, at_least, invalid, parse_addr};

/// `[server]`: identity of this node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// Node id shown in the banner, `/status` and logs.
    pub node_id: String,
    /// Address clients are told to use.
    pub public_addr: String,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            node_id: "dev-1".into(),
            public_addr: "127.0.0.1:7350".into(),
        }
    }
}

impl ServerConfig {
    /// Checks `server.*`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.node_id.trim().is_empty() {
            return Err(invalid("server.node_id", "must not be empty"));
        }
        Ok(())
    }
}

/// `[http]`: the HTTP listener (`/health`, `/status`, `/metrics`, `/v1`)
/// and the bounds that keep one client from holding it (docs/operations.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpConfig {
    /// Listen address.
    pub bind: String,
    /// Origins allowed to call the `/v1` API from a browser (CORS): `"*"`
    /// (default: tokens travel in headers, never cookies), exact origins
    /// such as `"https://game.example"`, or empty for no CORS headers.
    pub cors_allowed_origins: Vec<String>,
    /// A connection whose request head (request line and headers) is not
    /// complete this long after the connection opened, or after the first
    /// byte of a later request, is closed.
    pub header_read_timeout_ms: u64,
    /// The largest request head (request line and headers) one connection
    /// buffers, in bytes (8,192..=1,048,576); a longer head is answered 431.
    pub max_header_bytes: usize,
    /// A request body not complete this long after its head was read
    /// closes the connection, whatever its pace.
    pub body_read_timeout_ms: u64,
    /// A keep-alive connection with no request for this long is closed.
    pub keep_alive_timeout_ms: u64,
    /// Open HTTP connections; past it new ones are closed at once.
    pub max_connections: usize,
    /// Open HTTP connections from one source address (0 = no cap; behind a
    /// reverse proxy every connection comes from the proxy).
    pub max_connections_per_ip: usize,
}

/// Most entries in `http.cors_allowed_origins`.
pub const MAX_CORS_ORIGINS: usize = 64;

/// Smallest `http.max_header_bytes` (hyper's minimum read buffer).
pub const MIN_HEADER_BYTES: usize = 8 * 1024;

/// Largest `http.max_header_bytes` (each open connection may buffer it).
pub const MAX_HEADER_BYTES: usize = 1024 * 1024;

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            bind: "127.0.0.1:7350".into(),
            cors_allowed_origins: vec!["*".into()],
            header_read_timeout_ms: 10_000,
            max_header_bytes: 32 * 1024,
            body_read_timeout_ms: 10_000,
            keep_alive_timeout_ms: 60_000,
            max_connections: 4_096,
            max_connections_per_ip: 256,
        }
    }
}

impl HttpConfig {
    /// Checks `http.*`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        parse_addr("http.bind", &self.bind)?;
        self.validate_cors()?;
        at_least(
            "http.header_read_timeout_ms",
            self.header_read_timeout_ms as usize,
            1,
        )?;
        at_least(
            "http.keep_alive_timeout_ms",
            self.keep_alive_timeout_ms as usize,
            1,
        )?;
        at_least(
            "http.body_read_timeout_ms",
            self.body_read_timeout_ms as usize,
            1,
        )?;
        // hyper refuses a read buffer under 8 KiB.
        if !(MIN_HEADER_BYTES..=MAX_HEADER_BYTES).contains(&self.max_header_bytes) {
            return Err(invalid(
                "http.max_header_bytes",
                "must be between 8192 and 1048576",
            ));
        }
        at_least("http.max_connections", self.max_connections, 1)
    }

    fn validate_cors(&self) -> Result<(), ConfigError> {
        const KEY: &str = "http.cors_allowed_origins";
        if self.cors_allowed_origins.len() > MAX_CORS_ORIGINS {
            return Err(invalid(KEY, "lists more than 64 origins"));
        }
        for origin in &self.cors_allowed_origins {
            let scheme_ok = origin.starts_with("http://") || origin.starts_with("https://");
            let host = origin.split_once("://").map_or("", |(_, h)| h);
            let well_formed = origin == "*"
                || (scheme_ok
                    && !host.is_empty()
                    && !host.contains('/')
                    && origin.len() <= 256
                    && origin.bytes().all(|b| b.is_ascii_graphic()));
            if !well_formed {
                return Err(invalid(
                    KEY,
                    "entries must be \"*\" or an origin like \"https://game.example:8443\" (no path)",
                ));
            }
        }
        Ok(())
    }
}

/// `[logging]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LoggingConfig {
    /// A tracing filter directive (`info`, `citadel_server=debug`, …).
    pub level: String,
    /// `pretty` or `json`.
    pub format: String,
}

impl Default for LoggingConfig {
    fn default() -> Self {
        LoggingConfig {
            level: "info".into(),
            format: "pretty".into(),
        }
    }
}

impl LoggingConfig {
    /// Checks `logging.*`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !matches!(self.format.as_str(), "pretty" | "json") {
            return Err(invalid("logging.format", "must be \"pretty\" or \"json\""));
        }
        if tracing_subscriber::EnvFilter::try_new(&self.level).is_err() {
            return Err(invalid("logging.level", "is not a valid log filter"));
        }
        Ok(())
    }
}
