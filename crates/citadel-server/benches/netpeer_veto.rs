//! The cost of the Lua NetworkPeer veto hook over real sockets, in two
//! modes (`CITADEL_NPV_MODE`):
//!
//! - `throughput` (default): C WebSocket clients, each alone in its own
//!   match with one object it owns, send N proposals (one int field each)
//!   back to back; the run ends when the node has accounted for all of
//!   them (applied, rejected or dropped). Prints proposals per second.
//! - `latency`: C proposers, each in its own match with an observer
//!   client, send N proposals at a modest rate (one every
//!   `CITADEL_NPV_INTERVAL_MS`, 10 by default), each with a new value; the
//!   observer timestamps the rebroadcast carrying that value. Prints p50,
//!   p99 and max from the proposal's send to the rebroadcast's arrival: the
//!   per-proposal latency of the path, not the queueing of a burst.
//!
//! With `CITADEL_NPV_LUA=1` the script registers `netpeer_on_proposal` (a
//! trivial check that allows), so every proposal is validated, judged on
//! the VM thread and committed; with `0` the same script has no handler
//! and proposals take the synchronous path. Both modes print the veto
//! outcomes.
//!
//! Run: `cargo bench -p citadel-server --bench netpeer_veto`
//! (`CITADEL_NPV_MODE` (throughput), `CITADEL_NPV_LUA` (1),
//! `CITADEL_NPV_CLIENTS` (8), `CITADEL_NPV_PROPOSALS` (per client: 5000
//! for throughput, 500 for latency), `CITADEL_NPV_INTERVAL_MS` (10)). Build
//! first and run the binary under `flock -o /tmp/citadel-cargo.lock` so no
//! build competes with it. The node and the clients share this process.
//! Rate limits and the veto budget (1 s) and in-flight bound (4096) are
//! raised so the figure is the path's cost, not a limit tripping.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use citadel_client::WsClient;
use citadel_client::netpeer::NetworkPeerSession;
use citadel_netpeer::{Class, ClassSpec, FieldSpec, Rejection, Value};
use citadel_server::config::Config;
use citadel_server::netpeer::VetoOutcome;
use citadel_server::{NodeBuilder, RunningNode};
use citadel_wire::Envelope;
use citadel_wire::netpeer::{FieldCodec, FieldValue};
use citadel_wire::protocol::{KIND_REP_ACK, KIND_REP_DELTA};

const AMMO_MAX: i64 = 1_000_000;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn script(lua_veto: bool) -> String {
    format!(
        r#"
VETO = {lua_veto}
citadel.netpeer_register_class{{
  class_id = 1,
  fields = {{ {{ name = "ammo", type = "int", min = 0, max = {AMMO_MAX}, client_owned = true }} }},
}}
citadel.on_rpc("spawn", function(ctx, body)
  citadel.netpeer_move_connection(ctx.sender, ctx.sender)
  return tostring(citadel.netpeer_spawn(1, {{ match = ctx.sender, owner = ctx.sender }}))
end)
-- Joins the match of object `body` (its owner's).
citadel.on_rpc("watch", function(ctx, body)
  citadel.netpeer_move_connection(ctx.sender, citadel.netpeer_get(tonumber(body)).owner)
  return "ok"
end)
if VETO then
  citadel.netpeer_on_proposal(function(ctx, p) return p.ammo ~= nil and p.ammo >= 0 end)
end
"#
    )
}

fn session() -> anyhow::Result<NetworkPeerSession> {
    let spec = ClassSpec {
        class_id: 1,
        layout_version: 1,
        fields: vec![
            FieldSpec::new(
                "ammo",
                FieldCodec::IntRange {
                    min: 0,
                    max: AMMO_MAX,
                },
            )
            .client_owned(),
        ],
        evolution: Default::default(),
        position_field: None,
    };
    let class = Class::compile(spec).map_err(|e| anyhow::anyhow!("class: {e}"))?;
    let mut s = NetworkPeerSession::default();
    s.register(class.current().clone());
    Ok(s)
}

/// Applies one envelope to `s` (acking it); whether it was a bunch.
async fn absorb(
    client: &mut WsClient,
    s: &mut NetworkPeerSession,
    env: Envelope,
) -> anyhow::Result<bool> {
    if env.kind != KIND_REP_DELTA {
        return Ok(false);
    }
    let _ = s.handle_bunch(&env.body);
    if let Some(ack) = s.poll_ack() {
        client.send(&Envelope::new(KIND_REP_ACK, ack)).await?;
    }
    Ok(true)
}

async fn next(client: &mut WsClient) -> anyhow::Result<Envelope> {
    client
        .recv()
        .await?
        .ok_or_else(|| anyhow::anyhow!("closed"))
}

/// Connects, calls `rpc` (`spawn`, or `watch` of an object), waits for the
/// object's full bunch; returns the client, its session and the object id.
async fn ready(
    url: &str,
    rpc: &str,
    arg: &str,
) -> anyhow::Result<(WsClient, NetworkPeerSession, u32)> {
    let (mut client, _) = WsClient::connect_as_guest(url).await?;
    let reply = client.call_rpc(rpc, arg.as_bytes()).await?;
    let id: u32 = match rpc {
        "spawn" => String::from_utf8_lossy(&reply).parse()?,
        _ => arg.parse()?,
    };
    let mut s = session()?;
    while s.state(id).is_none() {
        let env = next(&mut client).await?;
        absorb(&mut client, &mut s, env).await?;
    }
    Ok((client, s, id))
}

fn ammo(s: &NetworkPeerSession, id: u32) -> Option<i64> {
    match s.state(id)?.first()? {
        Some(Value::Plain(FieldValue::Int(v))) => Some(*v),
        _ => None,
    }
}

fn accounted(node: &RunningNode) -> u64 {
    let np = &node.shared().metrics.netpeer;
    np.event("proposals_applied")
        + Rejection::ALL.iter().map(|r| np.rejected(*r)).sum::<u64>()
        + np.veto(VetoOutcome::InFlightFull)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

struct Run {
    lua_veto: bool,
    clients: u64,
    proposals: u64,
}

/// Every client sends its proposals back to back; proposals per second.
async fn throughput(node: &RunningNode, url: &str, run: &Run) -> anyhow::Result<()> {
    let mut ready_clients = Vec::new();
    for _ in 0..run.clients {
        ready_clients.push(ready(url, "spawn", "").await?);
    }
    let start_count = accounted(node);
    let barrier = Arc::new(tokio::sync::Barrier::new(ready_clients.len() + 1));
    let mut tasks = Vec::new();
    let proposals = run.proposals;
    for (mut client, mut s, id) in ready_clients {
        let barrier = barrier.clone();
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            for i in 0..proposals {
                let v = i64::try_from(i % 1_000_000).unwrap_or(0);
                let body = s.propose(id, &[(0, FieldValue::Int(v))])?;
                client.send(&Envelope::new(KIND_REP_DELTA, body)).await?;
            }
            anyhow::Ok(client)
        }));
    }
    barrier.wait().await;
    let started = Instant::now();
    let total = run.clients * proposals;
    let deadline = started + Duration::from_secs(120);
    while accounted(node) - start_count < total && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let mut kept = Vec::new();
    for t in tasks {
        kept.push(t.await??);
    }
    let done = accounted(node) - start_count;
    println!(
        "  accounted {done}/{total} in {elapsed:.3} s: {:.0} proposals/s; applied {}",
        done as f64 / elapsed,
        node.shared().metrics.netpeer.event("proposals_applied")
    );
    drop(kept);
    Ok(())
}

/// One proposer: a proposal every `interval` (acking what it receives in
/// between), each value `i + 1` stamped in `sent[i]` just before the send.
async fn propose_paced(
    (mut client, mut s, id): (WsClient, NetworkPeerSession, u32),
    sent: Arc<Vec<AtomicU64>>,
    base: Instant,
    interval: Duration,
) -> anyhow::Result<WsClient> {
    for (i, stamp) in sent.iter().enumerate() {
        let v = i64::try_from(i + 1)?;
        let body = s.propose(id, &[(0, FieldValue::Int(v))])?;
        stamp.store(u64::try_from(base.elapsed().as_nanos())?, Ordering::SeqCst);
        client.send(&Envelope::new(KIND_REP_DELTA, body)).await?;
        let due = tokio::time::Instant::now() + interval;
        // `recv` is cancel safe: a timeout loses no envelope.
        while let Ok(env) = tokio::time::timeout_at(due, client.recv()).await {
            let env = env?.ok_or_else(|| anyhow::anyhow!("closed"))?;
            absorb(&mut client, &mut s, env).await?;
        }
    }
    Ok(client)
}

/// One observer: applies the match's bunches until it saw the last value
/// (or `until`); the latency (ms) of each value it saw change to.
async fn observe(
    (mut client, mut s, id): (WsClient, NetworkPeerSession, u32),
    sent: Arc<Vec<AtomicU64>>,
    base: Instant,
    until: tokio::time::Instant,
) -> anyhow::Result<(WsClient, Vec<f64>)> {
    let last = i64::try_from(sent.len())?;
    let mut seen = ammo(&s, id).unwrap_or(0);
    let mut latencies = Vec::with_capacity(sent.len());
    while seen < last {
        let Ok(env) = tokio::time::timeout_at(until, client.recv()).await else {
            break;
        };
        let env = env?.ok_or_else(|| anyhow::anyhow!("closed"))?;
        let now = u64::try_from(base.elapsed().as_nanos())?;
        if !absorb(&mut client, &mut s, env).await? {
            continue;
        }
        let Some(v) = ammo(&s, id).filter(|v| *v != seen) else {
            continue;
        };
        seen = v;
        let at = usize::try_from(v - 1)?;
        if let Some(stamp) = sent.get(at) {
            let t = stamp.load(Ordering::SeqCst);
            latencies.push(now.saturating_sub(t) as f64 / 1e6);
        }
    }
    Ok((client, latencies))
}

/// Paced proposals, each timed to its rebroadcast at the observer.
async fn latency(url: &str, run: &Run, interval: Duration) -> anyhow::Result<()> {
    let mut pairs = Vec::new();
    for _ in 0..run.clients {
        let proposer = ready(url, "spawn", "").await?;
        let observer = ready(url, "watch", &proposer.2.to_string()).await?;
        pairs.push((proposer, observer));
    }
    let base = Instant::now();
    let until = tokio::time::Instant::now()
        + interval * u32::try_from(run.proposals)?
        + Duration::from_secs(30);
    let mut tasks = Vec::new();
    for (proposer, observer) in pairs {
        let sent: Arc<Vec<AtomicU64>> =
            Arc::new((0..run.proposals).map(|_| AtomicU64::new(0)).collect());
        let watching = tokio::spawn(observe(observer, sent.clone(), base, until));
        let proposing = tokio::spawn(propose_paced(proposer, sent, base, interval));
        tasks.push((proposing, watching));
    }
    let mut all = Vec::new();
    let mut kept = Vec::new();
    for (proposing, watching) in tasks {
        kept.push(proposing.await??);
        let (client, latencies) = watching.await??;
        kept.push(client);
        all.extend(latencies);
    }
    let elapsed = base.elapsed().as_secs_f64();
    all.sort_by(|a, b| a.total_cmp(b));
    let total = run.clients * run.proposals;
    println!(
        "  interval {} ms: {} of {total} values seen at the observers in {elapsed:.1} s",
        interval.as_millis(),
        all.len()
    );
    println!(
        "  send -> rebroadcast arrival ms: p50 {:.3} p99 {:.3} max {:.3} mean {:.3}",
        percentile(&all, 0.5),
        percentile(&all, 0.99),
        percentile(&all, 1.0),
        all.iter().sum::<f64>() / all.len().max(1) as f64
    );
    drop(kept);
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let lua_veto = env("CITADEL_NPV_LUA", 1) == 1;
    let paced = std::env::var("CITADEL_NPV_MODE").is_ok_and(|m| m == "latency");
    let run = Run {
        lua_veto,
        clients: env("CITADEL_NPV_CLIENTS", 8),
        proposals: env("CITADEL_NPV_PROPOSALS", if paced { 500 } else { 5_000 }),
    };
    let interval = Duration::from_millis(env("CITADEL_NPV_INTERVAL_MS", 10));
    let dir = std::env::temp_dir().join(format!("citadel-npv-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("main.lua"), script(lua_veto))?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let mut config = Config::default();
        config.database.url = format!("sqlite://{}", dir.join("db.sqlite").display());
        config.http.bind = "127.0.0.1:0".into();
        config.transport.websocket.bind = "127.0.0.1:0".into();
        config.transport.limits.messages_per_second = 10_000_000;
        config.transport.limits.message_burst = 10_000_000;
        config.runtime.scripts_dir = dir.display().to_string();
        let np = &mut config.transport.network_peer;
        np.enabled = true;
        np.max_bunches_per_sec = 10_000_000;
        np.max_bytes_per_sec = 1_000_000_000;
        np.max_fields_per_sec = 10_000_000;
        np.veto_budget_ms = 1_000;
        np.veto_max_in_flight = 4_096;
        let node = NodeBuilder::new(config).start().await?;
        let url = node
            .ws_url()
            .ok_or_else(|| anyhow::anyhow!("no websocket"))?;
        println!(
            "netpeer veto: mode={} lua_handler={} clients={} proposals/client={}",
            if paced { "latency" } else { "throughput" },
            run.lua_veto,
            run.clients,
            run.proposals
        );
        if paced {
            latency(&url, &run, interval).await?;
        } else {
            throughput(&node, &url, &run).await?;
        }
        let m = &node.shared().metrics.netpeer;
        let outcomes: Vec<String> = VetoOutcome::ALL
            .iter()
            .map(|o| format!("{}={}", o.as_str(), m.veto(*o)))
            .collect();
        println!("  veto outcomes: {}", outcomes.join(" "));
        let rejected: Vec<String> = Rejection::ALL
            .iter()
            .filter(|r| m.rejected(**r) > 0)
            .map(|r| format!("{}={}", r.as_str(), m.rejected(*r)))
            .collect();
        println!("  rejections: {}", rejected.join(" "));
        node.shutdown();
        node.wait().await;
        let _ = std::fs::remove_dir_all(&dir);
        anyhow::Ok(())
    })
}
