//! Targets: the server under test, started by the tool or attached to, and
//! the connector its bots use.
//!
//! What it is: [`TargetKind`] (citadel, colyseus, raw), [`ServerHandle`] (the
//! spawned child, its pid for `/proc` sampling, the address bots dial, and
//! the command line for the report), and the spawn helpers shared by the
//! per-target modules. What it is not: protocol code beyond the connectors
//! in `citadel.rs` (Citadel framing, also spoken by the raw relay) and
//! `colyseus.rs`.
//!
//! Call order: `start` (spawn or attach) → scenario → drop the handle (the
//! child is killed; it never outlives the tool).

pub mod citadel;
pub mod colyseus;
pub mod http;
pub mod quic;
pub mod raw;

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

/// Which server the bots talk to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TargetKind {
    /// `target/release/citadel` with a generated config.
    Citadel,
    /// The Colyseus relay peer in `bench/peers/colyseus`.
    Colyseus,
    /// The raw tokio-tungstenite relay (`raw-relay`), the physical ceiling.
    Raw,
}

/// How to reach (and optionally own) the server.
#[derive(Debug, Clone)]
pub struct StartOptions {
    /// Attach to this URL instead of spawning.
    pub url: Option<String>,
    /// pid of an attached server, for `/proc` sampling.
    pub server_pid: Option<u32>,
    /// HTTP API of an attached Citadel (device auth).
    pub http_url: Option<String>,
    /// Binary to spawn (citadel / raw-relay); default: next to this tool.
    pub server_bin: Option<PathBuf>,
    /// Directory of the Colyseus peer (with node_modules).
    pub colyseus_dir: PathBuf,
    /// `taskset -c` list for the spawned server.
    pub server_cpus: Option<String>,
    /// Connections the scenario will hold (sizes server limits).
    pub peak_connections: u64,
    /// Lift Citadel's per-connection message rate limit (rpc-echo measures
    /// RPC throughput, not the 200/s default policy).
    pub lift_rate_limits: bool,
    /// Also serve native QUIC (`[transport.quic]`, citadel only), for
    /// `--transport quic`.
    pub quic: bool,
    /// Config sections appended to a spawned Citadel's generated config.
    pub extra_config: String,
}

/// The server under test.
#[derive(Debug)]
pub struct ServerHandle {
    /// The process the tool started, killed on drop.
    child: Option<Child>,
    /// pid to sample, if known.
    pub pid: Option<u32>,
    /// URL bots use (ws:// for Citadel and raw, http:// for Colyseus).
    pub url: String,
    /// Citadel's HTTP API (device auth), when known.
    pub http_url: Option<String>,
    /// How it was started, for the report.
    pub command: String,
    /// Citadel's QUIC endpoint, when it serves one (`StartOptions::quic`).
    pub quic: Option<quic::QuicEndpoint>,
    /// Files (and directories the tool created) to delete on drop.
    temp_files: Vec<PathBuf>,
}

impl ServerHandle {
    /// A handle for a server someone else runs.
    pub fn attached(url: &str, pid: Option<u32>, http_url: Option<&str>) -> anyhow::Result<Self> {
        addr_of_url(url)?;
        if let Some(h) = http_url {
            addr_of_url(h)?;
        }
        Ok(ServerHandle {
            child: None,
            pid,
            url: url.to_owned(),
            http_url: http_url.map(str::to_owned),
            command: format!("attached to {url}"),
            quic: None,
            temp_files: Vec::new(),
        })
    }

    /// Whether the spawned child has exited (always false when attached).
    pub fn exited(&mut self) -> Option<String> {
        let child = self.child.as_mut()?;
        match child.try_wait() {
            Ok(Some(status)) => Some(format!("server exited: {status}")),
            _ => None,
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // Only the process this tool started, by its handle.
            let _ = child.kill();
            let _ = child.wait();
        }
        for f in &self.temp_files {
            if f.is_dir() {
                let _ = std::fs::remove_dir_all(f);
            } else {
                let _ = std::fs::remove_file(f);
            }
        }
    }
}

/// Spawns or attaches to the target.
pub fn start(kind: TargetKind, opts: &StartOptions) -> anyhow::Result<ServerHandle> {
    if let Some(url) = &opts.url {
        return ServerHandle::attached(url, opts.server_pid, opts.http_url.as_deref());
    }
    match kind {
        TargetKind::Citadel => citadel::spawn(opts),
        TargetKind::Raw => raw::spawn(opts),
        TargetKind::Colyseus => colyseus::spawn(opts),
    }
}

/// `host:port` of a ws:// or http:// URL (loopback only: the tool never
/// generates traffic outside 127.0.0.0/8).
pub fn addr_of_url(url: &str) -> anyhow::Result<SocketAddr> {
    let rest = url
        .strip_prefix("ws://")
        .or_else(|| url.strip_prefix("http://"))
        .with_context(|| format!("url {url:?} must start with ws:// or http://"))?;
    let hostport = rest.split('/').next().unwrap_or(rest);
    let addr: SocketAddr = hostport
        .parse()
        .with_context(|| format!("url {url:?}: give a numeric host:port such as 127.0.0.1:7352"))?;
    match addr {
        SocketAddr::V4(v4) if v4.ip().is_loopback() => Ok(addr),
        _ => bail!("url {url:?}: only 127.0.0.0/8 targets are allowed"),
    }
}

/// A port that was free a moment ago on 127.0.0.1.
pub fn free_port() -> anyhow::Result<u16> {
    let l = TcpListener::bind("127.0.0.1:0").context("cannot find a free port")?;
    Ok(l.local_addr()?.port())
}

/// The binary `name` next to this executable (target/release/…), or `over`.
pub fn sibling_binary(name: &str, over: Option<&PathBuf>) -> anyhow::Result<PathBuf> {
    let path = match over {
        Some(p) => p.clone(),
        None => std::env::current_exe()
            .context("cannot locate citadel-load's own path")?
            .with_file_name(name),
    };
    if !path.is_file() {
        bail!(
            "{} not found: build it first (cargo build --release -p citadel-server -p raw-relay) \
             or pass --server-bin",
            path.display()
        );
    }
    Ok(path)
}

/// Builds the command, wrapped in `taskset -c LIST` when asked.
pub fn command(program: &std::path::Path, cpus: Option<&str>) -> Command {
    let mut cmd = match cpus {
        Some(list) => {
            let mut c = Command::new("taskset");
            c.arg("-c").arg(list).arg(program);
            c
        }
        None => Command::new(program),
    };
    cmd.stdin(Stdio::null()).stdout(Stdio::null());
    cmd
}

/// Spawns `cmd`, waits (at most `within`) until `addr` accepts TCP, and
/// returns the handle. The child's stderr goes to `log` if given.
pub fn spawn_and_wait(
    mut cmd: Command,
    addr: SocketAddr,
    url: String,
    within: Duration,
    temp_files: Vec<PathBuf>,
) -> anyhow::Result<ServerHandle> {
    let command = format!("{cmd:?}");
    let child = cmd
        .spawn()
        .with_context(|| format!("cannot start {command}"))?;
    let mut handle = ServerHandle {
        pid: Some(child.id()),
        child: Some(child),
        url,
        http_url: None,
        command,
        quic: None,
        temp_files,
    };
    let deadline = Instant::now() + within;
    loop {
        if let Some(why) = handle.exited() {
            bail!("{why} before listening on {addr} ({})", handle.command);
        }
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return Ok(handle);
        }
        if Instant::now() > deadline {
            bail!("server did not listen on {addr} within {within:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_loopback_only() {
        assert!(addr_of_url("ws://127.0.0.1:7352/").is_ok());
        assert!(addr_of_url("http://127.0.0.5:2567").is_ok());
        assert!(addr_of_url("ws://10.0.0.1:7352/").is_err());
        assert!(addr_of_url("ws://localhost:7352/").is_err());
        assert!(addr_of_url("ftp://127.0.0.1:1/").is_err());
    }
}
