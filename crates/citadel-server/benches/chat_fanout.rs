//! Durable chat fan-out: 50 room channels of 20 subscribers (1,000 account
//! sessions over WebSocket, each in its gateway room and joined to the
//! room's chat channel), every subscriber sending `chat.send` at its rate
//! limit (`[chat.limits]` set to the rate: `send_user` and
//! `send_user_channel` = rate × 10 per 10 s, `send_channel` = 20 × that).
//! Reports messages committed per second (successful `chat.send`
//! replies), the time from a send leaving its client to each subscriber's
//! `message.create` (p50/p99 over every (message, subscriber) pair), and
//! to the LAST subscriber's (p99 over messages), on SQLite and PostgreSQL.
//!
//! Run: `cargo bench -p citadel-server --bench chat_fanout` (env
//! `CHAT_BENCH_ROOMS`, `CHAT_BENCH_PER_ROOM`, `CHAT_BENCH_RATE` (sends per
//! second per subscriber), `CHAT_BENCH_SECS` override 50 / 20 / 2 / 5;
//! `CHAT_BENCH_BACKENDS=sqlite` skips PostgreSQL, which otherwise uses a
//! fresh database on 127.0.0.1:5432 dropped afterwards). Clients and node
//! share this process and this machine's cores.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use citadel_client::WsClient;
use citadel_server::config::{Config, RateRule};
use citadel_server::metrics::ServiceEvent;
use citadel_server::services::accounts::SignIn;
use citadel_server::store::CredentialKind;
use citadel_server::{NodeBuilder, RunningNode};
use citadel_wire::protocol::{KIND_CHAT_EVENT, KIND_RPC_RESPONSE, RpcRequest, RpcResponse};
use citadel_wire::{Envelope, WireBody};
use sqlx::Connection;

const PG_ADMIN: &str = "postgres://postgres@127.0.0.1:5432/test";

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct Run {
    origin: Instant,
    /// Send time (ns since origin) by sequence number.
    sent: Vec<AtomicU64>,
    /// Latest arrival (ns since origin) of each message at a subscriber.
    last: Vec<AtomicU64>,
    /// Subscribers that received each message.
    arrivals: Vec<AtomicU64>,
    next_seq: AtomicU64,
    measure_from_ns: u64,
    stop_sending: Instant,
    end: Instant,
    commits: AtomicU64,
    failures: AtomicU64,
}

impl Run {
    fn now_ns(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64
    }
}

async fn subscriber(
    mut client: WsClient,
    channel_id: String,
    rate: u64,
    offset: Duration,
    run: Arc<Run>,
) -> Vec<u32> {
    let mut latencies = Vec::new();
    let period = Duration::from_nanos(1_000_000_000 / rate.max(1));
    let mut ticker = tokio::time::interval_at((Instant::now() + offset).into(), period);
    let mut next_id = 1u64;
    let capacity = run.sent.len() as u64;
    loop {
        tokio::select! {
            _ = ticker.tick(), if Instant::now() < run.stop_sending => {
                let seq = run.next_seq.fetch_add(1, Ordering::Relaxed);
                if seq >= capacity {
                    continue;
                }
                let payload = format!(r#"{{"channel_id":"{channel_id}","content":"{seq}"}}"#);
                run.sent[seq as usize].store(run.now_ns(), Ordering::Relaxed);
                let request = RpcRequest {
                    request_id: next_id,
                    method: "chat.send".into(),
                    payload: payload.into_bytes().into(),
                };
                next_id += 1;
                if client.send(&request.to_envelope()).await.is_err() {
                    break;
                }
            }
            got = tokio::time::timeout_at(run.end.into(), client.recv()) => {
                let Ok(Ok(Some(env))) = got else { break };
                handle(&env, &run, &mut latencies);
            }
        }
    }
    latencies
}

fn handle(env: &Envelope, run: &Run, latencies: &mut Vec<u32>) {
    match env.kind {
        KIND_RPC_RESPONSE => {
            if let Ok(resp) = RpcResponse::decode(&env.body) {
                // Only replies to sends measured; request ids are per client,
                // so count every reply after the warm-up by time.
                if run.now_ns() >= run.measure_from_ns {
                    if resp.is_ok() {
                        run.commits.fetch_add(1, Ordering::Relaxed);
                    } else {
                        run.failures.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }
        KIND_CHAT_EVENT => {
            let now = run.now_ns();
            // A cheap scan instead of a JSON parse: the clients share the
            // node's cores, and only message.create's content (the seq) matters.
            let Some(seq) = message_create_seq(&env.body) else {
                return;
            };
            let sent = run.sent[seq].load(Ordering::Relaxed);
            if sent >= run.measure_from_ns && sent != u64::MAX {
                run.last[seq].fetch_max(now, Ordering::Relaxed);
                run.arrivals[seq].fetch_add(1, Ordering::Relaxed);
                latencies.push(u32::try_from((now - sent) / 1_000).unwrap_or(u32::MAX));
            }
        }
        _ => {}
    }
}

/// The sequence number in a `message.create` event's content.
fn message_create_seq(body: &[u8]) -> Option<usize> {
    let text = std::str::from_utf8(body).ok()?;
    if !text.contains(r#""type":"message.create""#) {
        return None;
    }
    let start = text.find(r#""content":""#)? + r#""content":""#.len();
    let end = text[start..].find('"')? + start;
    text[start..end].parse().ok()
}

fn percentile(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    f64::from(sorted[idx.min(sorted.len() - 1)]) / 1000.0
}

async fn start(url: &str, rate: u64, per_room: u64) -> anyhow::Result<RunningNode> {
    let mut config = Config::default();
    config.database.url = url.to_owned();
    config.http.bind = "127.0.0.1:0".into();
    config.transport.websocket.bind = "127.0.0.1:0".into();
    config.transport.limits.messages_per_second = 10_000_000;
    config.transport.limits.message_burst = 10_000_000;
    config.authentication.limits.source.limit = 1_000_000;
    config.authentication.limits.registration_source.limit = 1_000_000;
    config.database.max_connections = 16;
    let per_user = u32::try_from(rate * 10).unwrap_or(u32::MAX);
    let l = &mut config.chat.limits;
    l.join = RateRule {
        limit: 1_000_000,
        window_ms: 60_000,
    };
    l.send_user = RateRule {
        limit: per_user,
        window_ms: 10_000,
    };
    l.send_user_channel = l.send_user.clone();
    l.send_channel = RateRule {
        limit: per_user * u32::try_from(per_room).unwrap_or(1),
        window_ms: 10_000,
    };
    NodeBuilder::new(config).start().await
}

async fn bench(backend: &str, url: &str) -> anyhow::Result<()> {
    let rooms = env_or("CHAT_BENCH_ROOMS", 50);
    let per_room = env_or("CHAT_BENCH_PER_ROOM", 20);
    let rate = env_or("CHAT_BENCH_RATE", 2);
    let secs = env_or("CHAT_BENCH_SECS", 5);
    let node = start(url, rate, per_room).await?;
    let ws_url = node
        .ws_url()
        .ok_or_else(|| anyhow::anyhow!("no websocket"))?;
    let accounts = node.shared().accounts.clone();
    let total = (rooms * per_room) as usize;
    let mut clients = Vec::with_capacity(total);
    for i in 0..total {
        let pair = accounts
            .sign_in_with_id(
                CredentialKind::Device,
                SignIn {
                    id: format!("chat-bench-{i:05}"),
                    password: None,
                    create: true,
                    username: Some(format!("chatbench{i:05}")),
                    display_name: None,
                    metadata: None,
                },
                "127.0.0.1".parse()?,
            )
            .await
            .map_err(|e| anyhow::anyhow!("sign-in: {e}"))?;
        let mut client = WsClient::connect(&ws_url).await?;
        let outcome = client.authenticate(Some(&pair.token)).await?;
        anyhow::ensure!(outcome.is_accepted(), "client {i} refused");
        client
            .join_or_create_room(&format!("bench-room-{}", i as u64 % rooms))
            .await?;
        client.wait_for_room_joined().await?;
        let joined = client
            .call_rpc("chat.join", br#"{"target":{"kind":"room"}}"#)
            .await?;
        let joined: serde_json::Value = serde_json::from_slice(&joined)?;
        let channel_id = joined["channel_id"]
            .as_str()
            .ok_or_else(|| anyhow::anyhow!("no channel id"))?
            .to_owned();
        clients.push((client, channel_id));
    }
    let capacity = (rate * (rooms * per_room) * (secs + 2) * 2) as usize;
    let origin = Instant::now();
    let run = Arc::new(Run {
        origin,
        sent: (0..capacity).map(|_| AtomicU64::new(u64::MAX)).collect(),
        last: (0..capacity).map(|_| AtomicU64::new(0)).collect(),
        arrivals: (0..capacity).map(|_| AtomicU64::new(0)).collect(),
        next_seq: AtomicU64::new(0),
        measure_from_ns: 1_000_000_000,
        stop_sending: origin + Duration::from_secs(1 + secs),
        end: origin + Duration::from_secs(3 + secs),
        commits: AtomicU64::new(0),
        failures: AtomicU64::new(0),
    });
    let period_ns = 1_000_000_000 / rate.max(1);
    let tasks: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(i, (client, ch))| {
            let offset = Duration::from_nanos(period_ns * i as u64 / total as u64);
            tokio::spawn(subscriber(client, ch, rate, offset, run.clone()))
        })
        .collect();
    let mut latencies = Vec::new();
    for t in tasks {
        latencies.extend(t.await?);
    }
    latencies.sort_unstable();
    let measured_end = (1 + secs) * 1_000_000_000;
    let mut to_last = Vec::new();
    let (mut complete, mut incomplete) = (0u64, 0u64);
    for seq in 0..run.next_seq.load(Ordering::Relaxed).min(capacity as u64) as usize {
        let sent = run.sent[seq].load(Ordering::Relaxed);
        if sent == u64::MAX || sent < run.measure_from_ns || sent >= measured_end {
            continue;
        }
        if run.arrivals[seq].load(Ordering::Relaxed) == per_room {
            complete += 1;
            to_last.push(
                u32::try_from((run.last[seq].load(Ordering::Relaxed) - sent) / 1_000)
                    .unwrap_or(u32::MAX),
            );
        } else {
            incomplete += 1;
        }
    }
    to_last.sort_unstable();
    let commits = run.commits.load(Ordering::Relaxed);
    let failures = run.failures.load(Ordering::Relaxed);
    let metrics = &node.shared().metrics;
    println!(
        "{backend}: rooms={rooms} subscribers/room={per_room} rate={rate}/s per subscriber, measured={secs}s"
    );
    println!(
        "  committed: {commits} ({:.0} msgs/s), refused: {failures}, message.create delivered: {} ({:.0}/s), live dropped: {}",
        commits as f64 / secs as f64,
        latencies.len(),
        latencies.len() as f64 / secs as f64,
        metrics.service_events(ServiceEvent::ChatLiveDropped)
    );
    println!(
        "  send -> each subscriber's message.create ms: p50 {:.2}  p99 {:.2}  max {:.2}",
        percentile(&latencies, 0.50),
        percentile(&latencies, 0.99),
        percentile(&latencies, 1.0)
    );
    println!(
        "  send -> every subscriber's message.create ms: p50 {:.2}  p99 {:.2}  max {:.2}  ({complete} messages complete, {incomplete} not)",
        percentile(&to_last, 0.50),
        percentile(&to_last, 0.99),
        percentile(&to_last, 1.0)
    );
    node.shutdown();
    node.wait().await;
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let backends =
        std::env::var("CHAT_BENCH_BACKENDS").unwrap_or_else(|_| "sqlite,postgres".into());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        if backends.contains("sqlite") {
            let db = std::env::temp_dir()
                .join(format!("citadel-chat-bench-{}.sqlite", std::process::id()));
            bench("sqlite", &format!("sqlite://{}", db.display())).await?;
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
            }
        }
        if backends.contains("postgres") {
            let name = format!("citadel_chat_bench_{}", std::process::id());
            let mut admin = sqlx::PgConnection::connect(PG_ADMIN).await?;
            sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
                .execute(&mut admin)
                .await?;
            let result = bench(
                "postgres",
                &format!("postgres://postgres@127.0.0.1:5432/{name}"),
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
