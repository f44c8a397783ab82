//! Workloads: what bots do in each scenario, and the helpers they share.
//!
//! What it is: the relay payload layout ([`encode_payload`] /
//! [`decode_payload`]), round-robin source addresses ([`Sources`]), a bounded
//! parallel connector ([`connect_many`]) and one module per scenario. What it
//! is not: transport code (see `transport` and `targets/`).
//!
//! Call order: `main` builds a [`Ctx`] and calls one scenario module's `run`.

pub mod actors;
pub mod fanout;
pub mod idle;
pub mod predicted;
pub mod rpc;
pub mod storm;

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Context;
use tokio::sync::Semaphore;

use crate::progress::Progress;
use crate::stats::Clock;
use crate::targets::ServerHandle;
use crate::transport::{AuthMode, Connector};

/// Longest a single connect + authenticate (+ join) may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Everything a scenario runner needs besides its scenario.
pub struct Ctx<C: Connector> {
    /// Opens bot connections.
    pub connector: Arc<C>,
    /// How bots authenticate.
    pub auth: AuthMode,
    /// The server under test (pid for /proc sampling, if known).
    pub server: ServerHandle,
    /// Shared clock for one-way latency.
    pub clock: Clock,
    /// Progress line.
    pub progress: Progress,
    /// `getconf CLK_TCK`.
    pub ticks_per_second: u64,
    /// relay-fanout: lean bots (`lean`, the default) rather than the
    /// classic `BotTransport` loop.
    pub lean: bool,
}

/// Writes the 16-byte header (send time ns, bot index, sequence) and pads
/// the rest of `out` with zeros. `out` must be at least 16 bytes.
pub fn encode_payload(out: &mut [u8], send_ns: u64, bot: u32, seq: u32) {
    if let Some(head) = out.get_mut(..16) {
        head[..8].copy_from_slice(&send_ns.to_le_bytes());
        head[8..12].copy_from_slice(&bot.to_le_bytes());
        head[12..16].copy_from_slice(&seq.to_le_bytes());
    }
}

/// The send time in a relay payload, `None` if it is shorter than 16 bytes.
pub fn decode_payload(payload: &[u8]) -> Option<(u64, u32, u32)> {
    let head = payload.get(..16)?;
    let ns = u64::from_le_bytes(head[..8].try_into().ok()?);
    let bot = u32::from_le_bytes(head[8..12].try_into().ok()?);
    let seq = u32::from_le_bytes(head[12..16].try_into().ok()?);
    Some((ns, bot, seq))
}

/// Round-robin over 127.0.0.1 ..= 127.0.0.N (each source address has its
/// own ~28k ephemeral ports towards one server port).
#[derive(Debug)]
pub struct Sources {
    count: u8,
    next: AtomicU64,
}

impl Sources {
    /// `count` addresses (1..=254).
    pub fn new(count: u8) -> Self {
        Sources {
            count: count.max(1),
            next: AtomicU64::new(0),
        }
    }

    /// The next source address.
    pub fn next(&self) -> Ipv4Addr {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % u64::from(self.count);
        Ipv4Addr::new(127, 0, 0, 1 + i as u8)
    }
}

/// Connects `count` bots with at most `concurrency` attempts in flight;
/// each attempt (connect, authenticate, then `after` e.g. join) is bounded
/// by [`CONNECT_TIMEOUT`]. Results come back in index order; the first
/// failure aborts with its index and cause.
pub async fn connect_many<C, F, Fut>(
    ctx: &Ctx<C>,
    sources: &Sources,
    first_index: u32,
    count: u32,
    concurrency: u32,
    after: F,
) -> anyhow::Result<Vec<C::Transport>>
where
    C: Connector,
    F: Fn(u32, C::Transport) -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = anyhow::Result<C::Transport>> + Send,
{
    let connector = ctx.connector.clone();
    let auth = ctx.auth.clone();
    connect_each(
        sources,
        first_index,
        count,
        concurrency,
        move |i, source| {
            let connector = connector.clone();
            let auth = auth.clone();
            let after = after.clone();
            async move {
                let t = connector.connect(source, &auth).await?;
                after(i, t).await
            }
        },
    )
    .await
}

/// Runs `open(index, source address)` for `count` bots with at most
/// `concurrency` in flight, each bounded by [`CONNECT_TIMEOUT`]. Results
/// come back in index order; the first failure aborts with its index and
/// cause.
pub async fn connect_each<T, F, Fut>(
    sources: &Sources,
    first_index: u32,
    count: u32,
    concurrency: u32,
    open: F,
) -> anyhow::Result<Vec<T>>
where
    T: Send + 'static,
    F: Fn(u32, Ipv4Addr) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<T>> + Send + 'static,
{
    let gate = Arc::new(Semaphore::new(concurrency.max(1) as usize));
    let mut tasks = Vec::with_capacity(count as usize);
    for i in first_index..first_index + count {
        let source = sources.next();
        let gate = gate.clone();
        let attempt = open(i, source);
        tasks.push(tokio::spawn(async move {
            let _permit = gate.acquire_owned().await.context("connect gate closed")?;
            tokio::time::timeout(CONNECT_TIMEOUT, attempt)
                .await
                .with_context(|| format!("bot {i}: connect timed out after {CONNECT_TIMEOUT:?}"))?
                .with_context(|| format!("bot {i} (from {source})"))
        }));
    }
    let mut out = Vec::with_capacity(tasks.len());
    let mut first_err = None;
    for task in tasks {
        match task.await {
            Ok(Ok(t)) => out.push(t),
            Ok(Err(e)) => {
                first_err.get_or_insert(e);
            }
            Err(e) => {
                first_err.get_or_insert(anyhow::anyhow!("connect task failed: {e}"));
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// One guest WebSocket bot from `source`: connect, authenticate, join (or
/// create) `room` and wait until joined, within [`CONNECT_TIMEOUT`], at
/// most as many at once as `gate` has permits.
pub async fn guest_in_room(
    gate: &tokio::sync::Semaphore,
    source: Ipv4Addr,
    addr: std::net::SocketAddr,
    url: &str,
    room: &str,
) -> anyhow::Result<citadel_client::WsClient> {
    let _permit = gate.acquire().await.context("connect gate closed")?;
    tokio::time::timeout(CONNECT_TIMEOUT, async {
        let stream = crate::targets::citadel::tcp_from(source, addr).await?;
        let mut client = citadel_client::WsClient::connect_over(stream, url).await?;
        let outcome = client.authenticate(None).await?;
        anyhow::ensure!(outcome.is_accepted(), "handshake refused: {outcome:?}");
        client.join_or_create_room(room).await?;
        client.wait_for_room_joined().await?;
        anyhow::Ok(client)
    })
    .await
    .map_err(|_| anyhow::anyhow!("connect timed out"))?
}

/// Waits for every bot task (at most 10 s each once the run is over);
/// the first error, if any.
pub async fn join_bots(
    tasks: Vec<tokio::task::JoinHandle<anyhow::Result<()>>>,
) -> Option<anyhow::Error> {
    let mut first_error = None;
    for t in tasks {
        match tokio::time::timeout(Duration::from_secs(10), t).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => {
                first_error.get_or_insert(e);
            }
            Ok(Err(e)) => {
                first_error.get_or_insert(anyhow::anyhow!("bot task: {e}"));
            }
            Err(_) => {
                first_error.get_or_insert(anyhow::anyhow!("a bot did not stop"));
            }
        }
    }
    first_error
}

/// Joins the bots (see [`join_bots`]) and returns how many connected; none
/// connecting fails the `scenario` with the first bot error.
pub async fn join_connected_bots(
    tasks: Vec<tokio::task::JoinHandle<anyhow::Result<()>>>,
    connected: &std::sync::atomic::AtomicU64,
    scenario: &str,
) -> anyhow::Result<u64> {
    let first_error = join_bots(tasks).await;
    let connected = connected.load(std::sync::atomic::Ordering::Relaxed);
    if connected == 0 {
        return Err(first_error
            .unwrap_or_else(|| anyhow::anyhow!("no bot connected"))
            .context(format!("{scenario}: no bot connected")));
    }
    Ok(connected)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_round_trips_and_short_is_none() {
        let mut buf = [0u8; 24];
        encode_payload(&mut buf, 123_456_789, 7, 42);
        assert_eq!(decode_payload(&buf), Some((123_456_789, 7, 42)));
        assert_eq!(decode_payload(&buf[..15]), None);
        let mut tiny = [0u8; 4];
        encode_payload(&mut tiny, 1, 2, 3); // ignored, no panic
    }

    #[test]
    fn sources_rotate_within_loopback() {
        let s = Sources::new(3);
        let got: Vec<_> = (0..4).map(|_| s.next()).collect();
        assert_eq!(got[0], Ipv4Addr::new(127, 0, 0, 1));
        assert_eq!(got[2], Ipv4Addr::new(127, 0, 0, 3));
        assert_eq!(got[3], Ipv4Addr::new(127, 0, 0, 1));
    }
}
