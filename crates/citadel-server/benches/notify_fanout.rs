//! Durable notifications created from Lua and delivered live: a script RPC
//! (`bench_notify`) calls `citadel.notifications_send` for one of 1,000
//! connected recipients (accounts, one WebSocket session each); driver
//! connections keep a window of those calls in flight. Reports commits per
//! second (RPC replies, each one committed notification), live envelopes
//! per second, and the time from the call leaving the driver to the
//! KIND_NOTIFICATION arriving at the recipient (p50/p99/max), on SQLite
//! and on PostgreSQL.
//!
//! Run: `cargo bench -p citadel-server --bench notify_fanout`
//! (env `NOTIFY_BENCH_RECIPIENTS`, `NOTIFY_BENCH_DRIVERS`,
//! `NOTIFY_BENCH_WINDOW`, `NOTIFY_BENCH_SECS` override 1000 / 4 / 16 / 5;
//! `NOTIFY_BENCH_BACKENDS=sqlite` skips PostgreSQL, which otherwise uses a
//! fresh database on 127.0.0.1:5432 dropped afterwards). The node, the
//! drivers and the recipients share this process and this machine's cores.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use citadel_client::WsClient;
use citadel_server::config::Config;
use citadel_server::services::accounts::SignIn;
use citadel_server::store::CredentialKind;
use citadel_server::{NodeBuilder, RunningNode};
use citadel_wire::Envelope;
use citadel_wire::envelope::decode_framed;
use citadel_wire::protocol::{
    KIND_AUTH, KIND_AUTH_RESULT, KIND_NOTIFICATION, KIND_RPC_REQUEST, KIND_RPC_RESPONSE,
    RpcResponse, encode_rpc_request,
};
use futures_util::{SinkExt, StreamExt};
use sqlx::Connection;
use tokio_tungstenite::tungstenite::Message;

const SCRIPT: &str = r#"
citadel.on_rpc("bench_notify", function(ctx, body)
    local recipient, seq = body:match("^([^|]*)|(.*)$")
    citadel.notifications_send(recipient, 1, seq, '{"bench":true}', "bench")
    return seq
end)
"#;

const PG_ADMIN: &str = "postgres://postgres@127.0.0.1:5432/test";

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Send times (ns since the run's origin) by sequence number.
struct Clock {
    origin: Instant,
    sent: Vec<AtomicU64>,
}

impl Clock {
    fn now_ns(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64
    }
}

#[derive(Default)]
struct Counters {
    commits: AtomicU64,
    failures: AtomicU64,
    delivered: AtomicU64,
}

struct Run {
    clock: Arc<Clock>,
    counters: Arc<Counters>,
    next_seq: Arc<AtomicU64>,
    measure_from_ns: u64,
    end: Instant,
}

async fn driver(
    url: String,
    users: Arc<Vec<String>>,
    window: u64,
    run: Arc<Run>,
) -> anyhow::Result<()> {
    let (mut ws, _) =
        tokio_tungstenite::connect_async_with_config(url.as_str(), None, true).await?;
    ws.send(Message::Binary(
        Envelope::new(KIND_AUTH, Vec::new()).encode_framed(),
    ))
    .await?;
    let mut buf = BytesMut::new();
    let mut in_flight: HashMap<u64, u64> = HashMap::new();
    let mut next_id = 1u64;
    let capacity = run.clock.sent.len() as u64;
    let request = |out: &mut BytesMut, in_flight: &mut HashMap<u64, u64>, next_id: &mut u64| {
        let seq = run.next_seq.fetch_add(1, Ordering::Relaxed);
        if seq >= capacity {
            return;
        }
        let user = &users[(seq % users.len() as u64) as usize];
        let body = encode_rpc_request(*next_id, "bench_notify", format!("{user}|{seq}").as_bytes());
        run.clock.sent[seq as usize].store(run.clock.now_ns(), Ordering::Relaxed);
        Envelope::new(KIND_RPC_REQUEST, body).encode_framed_into(out);
        in_flight.insert(*next_id, seq);
        *next_id += 1;
    };
    loop {
        let msg = match tokio::time::timeout_at(run.end.into(), ws.next()).await {
            Err(_) => break,
            Ok(None) => anyhow::bail!("server closed the driver"),
            Ok(Some(msg)) => msg?,
        };
        let Message::Binary(data) = msg else { continue };
        buf.extend_from_slice(&data);
        let mut out = BytesMut::new();
        while let Some(env) = decode_framed(&mut buf)? {
            match env.kind {
                KIND_AUTH_RESULT => {
                    for _ in 0..window {
                        request(&mut out, &mut in_flight, &mut next_id);
                    }
                }
                KIND_RPC_RESPONSE => {
                    let resp = RpcResponse::decode(&env.body)?;
                    if let Some(seq) = in_flight.remove(&resp.request_id) {
                        let counted = run.clock.sent[seq as usize].load(Ordering::Relaxed)
                            >= run.measure_from_ns;
                        if counted && resp.is_ok() {
                            run.counters.commits.fetch_add(1, Ordering::Relaxed);
                        } else if counted {
                            run.counters.failures.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    if Instant::now() < run.end {
                        request(&mut out, &mut in_flight, &mut next_id);
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
    Ok(())
}

async fn recipient(mut client: WsClient, run: Arc<Run>) -> Vec<u32> {
    let mut latencies = Vec::new();
    while let Ok(Ok(Some(env))) =
        tokio::time::timeout_at((run.end + Duration::from_secs(2)).into(), client.recv()).await
    {
        if env.kind != KIND_NOTIFICATION {
            continue;
        }
        let now = run.clock.now_ns();
        let Ok(json) = serde_json::from_slice::<serde_json::Value>(&env.body) else {
            continue;
        };
        let Some(seq) = json["subject"]
            .as_str()
            .and_then(|s| s.parse::<usize>().ok())
        else {
            continue;
        };
        let sent = run.clock.sent[seq].load(Ordering::Relaxed);
        if sent >= run.measure_from_ns {
            run.counters.delivered.fetch_add(1, Ordering::Relaxed);
            latencies.push(u32::try_from((now - sent) / 1_000).unwrap_or(u32::MAX));
        }
    }
    latencies
}

fn percentile(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    f64::from(sorted[idx.min(sorted.len() - 1)]) / 1000.0
}

async fn start(url: &str, scripts: &std::path::Path) -> anyhow::Result<RunningNode> {
    let mut config = Config::default();
    config.database.url = url.to_owned();
    config.http.bind = "127.0.0.1:0".into();
    config.transport.websocket.bind = "127.0.0.1:0".into();
    config.transport.limits.messages_per_second = 10_000_000;
    config.transport.limits.message_burst = 10_000_000;
    config.authentication.limits.source.limit = 1_000_000;
    config.authentication.limits.registration_source.limit = 1_000_000;
    config.runtime.scripts_dir = scripts.display().to_string();
    NodeBuilder::new(config).start().await
}

async fn bench(backend: &str, url: &str, scripts: &std::path::Path) -> anyhow::Result<()> {
    let recipients = env_or("NOTIFY_BENCH_RECIPIENTS", 1_000) as usize;
    let drivers = env_or("NOTIFY_BENCH_DRIVERS", 4);
    let window = env_or("NOTIFY_BENCH_WINDOW", 16);
    let secs = env_or("NOTIFY_BENCH_SECS", 5);
    let node = start(url, scripts).await?;
    let ws_url = node
        .ws_url()
        .ok_or_else(|| anyhow::anyhow!("no websocket"))?;
    let accounts = node.shared().accounts.clone();
    let mut users = Vec::with_capacity(recipients);
    let mut clients = Vec::with_capacity(recipients);
    for i in 0..recipients {
        let pair = accounts
            .sign_in_with_id(
                CredentialKind::Device,
                SignIn {
                    id: format!("bench-device-{i:05}"),
                    password: None,
                    create: true,
                    username: Some(format!("bench{i:05}")),
                    display_name: None,
                    metadata: None,
                },
                "127.0.0.1".parse()?,
            )
            .await
            .map_err(|e| anyhow::anyhow!("sign-in: {e}"))?;
        let mut client = WsClient::connect(&ws_url).await?;
        let outcome = client.authenticate(Some(&pair.token)).await?;
        anyhow::ensure!(outcome.is_accepted(), "recipient {i} refused");
        users.push(pair.user_id);
        clients.push(client);
    }
    let capacity = 4_000_000usize;
    let clock = Arc::new(Clock {
        origin: Instant::now(),
        sent: (0..capacity).map(|_| AtomicU64::new(u64::MAX)).collect(),
    });
    let measure_from_ns = clock.now_ns() + 1_000_000_000;
    let run = Arc::new(Run {
        clock,
        counters: Arc::new(Counters::default()),
        next_seq: Arc::new(AtomicU64::new(0)),
        measure_from_ns,
        end: Instant::now() + Duration::from_secs(1 + secs),
    });
    let users = Arc::new(users);
    let receivers: Vec<_> = clients
        .into_iter()
        .map(|c| tokio::spawn(recipient(c, run.clone())))
        .collect();
    let senders: Vec<_> = (0..drivers)
        .map(|_| tokio::spawn(driver(ws_url.clone(), users.clone(), window, run.clone())))
        .collect();
    for s in senders {
        s.await??;
    }
    let mut latencies = Vec::new();
    for r in receivers {
        latencies.extend(r.await?);
    }
    latencies.sort_unstable();
    let commits = run.counters.commits.load(Ordering::Relaxed);
    let delivered = run.counters.delivered.load(Ordering::Relaxed);
    let failures = run.counters.failures.load(Ordering::Relaxed);
    let metrics = &node.shared().metrics;
    println!(
        "{backend}: recipients={recipients} drivers={drivers} window={window} measured={secs}s"
    );
    println!(
        "  commits: {commits} ({:.0}/s), failures: {failures}, live envelopes: {delivered} ({:.0}/s), live dropped (lane full): {}",
        commits as f64 / secs as f64,
        delivered as f64 / secs as f64,
        metrics.service_events(citadel_server::metrics::ServiceEvent::NotificationsLiveDropped)
    );
    println!(
        "  call -> envelope ms: p50 {:.2}  p90 {:.2}  p99 {:.2}  max {:.2}",
        percentile(&latencies, 0.50),
        percentile(&latencies, 0.90),
        percentile(&latencies, 0.99),
        percentile(&latencies, 1.0)
    );
    node.shutdown();
    node.wait().await;
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let scripts = std::env::temp_dir().join(format!("citadel-notify-bench-{}", std::process::id()));
    std::fs::create_dir_all(&scripts)?;
    std::fs::write(scripts.join("main.lua"), SCRIPT)?;
    let backends =
        std::env::var("NOTIFY_BENCH_BACKENDS").unwrap_or_else(|_| "sqlite,postgres".into());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        if backends.contains("sqlite") {
            let db = std::env::temp_dir().join(format!(
                "citadel-notify-bench-{}.sqlite",
                std::process::id()
            ));
            bench("sqlite", &format!("sqlite://{}", db.display()), &scripts).await?;
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
            }
        }
        if backends.contains("postgres") {
            let name = format!("citadel_bench_{}", std::process::id());
            let mut admin = sqlx::PgConnection::connect(PG_ADMIN).await?;
            sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
                .execute(&mut admin)
                .await?;
            let result = bench(
                "postgres",
                &format!("postgres://postgres@127.0.0.1:5432/{name}"),
                &scripts,
            )
            .await;
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
            )))
            .execute(&mut admin)
            .await?;
            result?;
        }
        anyhow::Ok(())
    })
}
