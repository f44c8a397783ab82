//! The raw target: spawn `raw-relay` (bench/peers/raw-relay), the minimal
//! tokio-tungstenite broadcast relay that marks the machine's ceiling.
//!
//! What it is: process management only; bots reach it with the Citadel
//! connector because it accepts the same framed envelopes (auth, room
//! create, position, RPC). What it is not: a Citadel server (no limits,
//! no auth, no rooms logic beyond a key).
//!
//! Call order: `spawn` → `citadel::CitadelConnector::new(url)`.

use std::net::SocketAddr;
use std::time::Duration;

use super::{ServerHandle, StartOptions, command, free_port, sibling_binary, spawn_and_wait};

/// Starts `target/release/raw-relay --bind 127.0.0.1:PORT`.
pub fn spawn(opts: &StartOptions) -> anyhow::Result<ServerHandle> {
    let bin = sibling_binary("raw-relay", opts.server_bin.as_ref())?;
    let port = free_port()?;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut cmd = command(&bin, opts.server_cpus.as_deref());
    cmd.arg("--bind").arg(addr.to_string());
    spawn_and_wait(
        cmd,
        addr,
        format!("ws://127.0.0.1:{port}/"),
        Duration::from_secs(10),
        Vec::new(),
    )
}
