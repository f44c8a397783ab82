//! Lua RPC round trips against a real node: the default game's `echo`
//! (`game/main.lua`), 32-byte payloads, 64 WebSocket clients each keeping
//! `WINDOW` requests in flight (pipelined). Prints round trips per second
//! and latency percentiles.
//!
//! Run: `cargo bench -p citadel-server --bench lua_rpc`
//! (env `LUA_BENCH_CLIENTS`, `LUA_BENCH_WINDOW`, `LUA_BENCH_SECS` override
//! the defaults 64 / 8 / 5; `LUA_BENCH_BASELINE=1` registers a Rust `echo`
//! instead, which wins over the script's, to measure the path without Lua). The node and the load generator share this
//! process (and this machine's cores). Per-connection inbound rate limits
//! are raised for the run; everything else is the default configuration.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use citadel_server::NodeBuilder;
use citadel_server::config::Config;
use citadel_wire::Envelope;
use citadel_wire::envelope::decode_framed;
use citadel_wire::protocol::{
    KIND_AUTH, KIND_AUTH_RESULT, KIND_RPC_RESPONSE, RpcResponse, encode_rpc_request,
};
use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::Message;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct ClientStats {
    completed: u64,
    errors: u64,
    latencies_us: Vec<u32>,
}

async fn run_client(
    url: String,
    window: u64,
    measure_from: Instant,
    end: Instant,
) -> anyhow::Result<ClientStats> {
    // Nagle off, as every realtime client should (see citadel-client).
    let (mut ws, _) =
        tokio_tungstenite::connect_async_with_config(url.as_str(), None, true).await?;
    ws.send(Message::Binary(
        Envelope::new(KIND_AUTH, Vec::new()).encode_framed(),
    ))
    .await?;
    let payload = [0xA5u8; 32];
    let mut buf = BytesMut::new();
    let mut authed = false;
    let mut next_id = 1u64;
    let mut in_flight: HashMap<u64, Instant> = HashMap::new();
    let mut stats = ClientStats {
        completed: 0,
        errors: 0,
        latencies_us: Vec::with_capacity(1 << 16),
    };
    let mut request = |out: &mut BytesMut, in_flight: &mut HashMap<u64, Instant>| {
        let body = encode_rpc_request(next_id, "echo", &payload);
        Envelope::new(citadel_wire::protocol::KIND_RPC_REQUEST, body).encode_framed_into(out);
        in_flight.insert(next_id, Instant::now());
        next_id += 1;
    };
    loop {
        let msg = match tokio::time::timeout_at(end.into(), ws.next()).await {
            Err(_) => break,
            Ok(None) => anyhow::bail!("server closed"),
            Ok(Some(msg)) => msg?,
        };
        let Message::Binary(data) = msg else {
            continue;
        };
        buf.extend_from_slice(&data);
        let mut out = BytesMut::new();
        while let Some(env) = decode_framed(&mut buf)? {
            match env.kind {
                KIND_AUTH_RESULT if !authed => {
                    authed = true;
                    for _ in 0..window {
                        request(&mut out, &mut in_flight);
                    }
                }
                KIND_RPC_RESPONSE => {
                    let resp = RpcResponse::decode(&env.body)?;
                    let now = Instant::now();
                    if let Some(sent) = in_flight.remove(&resp.request_id)
                        && sent >= measure_from
                    {
                        if resp.is_ok() && resp.payload.len() == 32 {
                            stats.completed += 1;
                            stats.latencies_us.push(
                                u32::try_from(now.duration_since(sent).as_micros())
                                    .unwrap_or(u32::MAX),
                            );
                        } else {
                            stats.errors += 1;
                        }
                    }
                    if now < end {
                        request(&mut out, &mut in_flight);
                    }
                }
                _ => {}
            }
        }
        if !out.is_empty() {
            ws.send(Message::Binary(out.freeze())).await?;
        }
    }
    let _ = ws.close(None).await;
    Ok(stats)
}

fn percentile(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    f64::from(sorted[idx.min(sorted.len() - 1)]) / 1000.0
}

fn main() -> anyhow::Result<()> {
    let clients = env_or("LUA_BENCH_CLIENTS", 64);
    let window = env_or("LUA_BENCH_WINDOW", 8);
    let secs = env_or("LUA_BENCH_SECS", 5);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let mut config = Config::default();
        let db =
            std::env::temp_dir().join(format!("citadel-lua-bench-{}.sqlite", std::process::id()));
        config.database.url = format!("sqlite://{}", db.display());
        config.http.bind = "127.0.0.1:0".into();
        config.transport.websocket.bind = "127.0.0.1:0".into();
        config.transport.limits.messages_per_second = 10_000_000;
        config.transport.limits.message_burst = 10_000_000;
        config.runtime.scripts_dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../game")
            .display()
            .to_string();
        let baseline = std::env::var("LUA_BENCH_BASELINE").is_ok_and(|v| v == "1");
        let mut builder = NodeBuilder::new(config);
        if baseline {
            builder = builder.rpc(
                "echo",
                |_ctx: citadel_server::rpc::RpcContext, payload: bytes::Bytes| async move {
                    Ok(payload)
                },
            );
        }
        let node = builder.start().await?;
        let url = node
            .ws_url()
            .ok_or_else(|| anyhow::anyhow!("no websocket"))?;
        let start = Instant::now();
        let measure_from = start + Duration::from_secs(1);
        let end = measure_from + Duration::from_secs(secs);
        let mut tasks = Vec::new();
        for _ in 0..clients {
            tasks.push(tokio::spawn(run_client(
                url.clone(),
                window,
                measure_from,
                end,
            )));
        }
        let mut completed = 0u64;
        let mut errors = 0u64;
        let mut latencies = Vec::new();
        for t in tasks {
            let s = t.await??;
            completed += s.completed;
            errors += s.errors;
            latencies.extend(s.latencies_us);
        }
        latencies.sort_unstable();
        let rate = completed as f64 / secs as f64;
        let handler = if baseline { "rust (baseline)" } else { "lua" };
        println!("{handler} echo: clients={clients} window={window} payload=32B measured={secs}s");
        println!(
            "  round trips: {completed} ({rate:.0}/s), errors: {errors}, queue_full: {}",
            node.shared()
                .metrics
                .runtime_events(citadel_server::metrics::RuntimeEvent::QueueFull)
        );
        println!(
            "  latency ms: p50 {:.2}  p90 {:.2}  p99 {:.2}  p99.9 {:.2}  max {:.2}",
            percentile(&latencies, 0.50),
            percentile(&latencies, 0.90),
            percentile(&latencies, 0.99),
            percentile(&latencies, 0.999),
            percentile(&latencies, 1.0)
        );
        node.shutdown();
        node.wait().await;
        anyhow::Ok(())
    })
}
