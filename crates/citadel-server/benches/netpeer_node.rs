//! The issue-18 NetworkPeer scenario over real sockets: a node (WebSocket on
//! 127.0.0.1, `transport.network_peer.enabled`) in this process on its own
//! runtime (threads `np-server`), N `NetworkPeerSession` clients on another
//! runtime (threads `np-client`), one match, every object relevant to every
//! client (no viewer: the worst case), M objects of 8 fields, 10 % of all
//! fields changing at 20 Hz (each tick M/5 objects change 4 fields; field 0
//! carries the change time in ms since the run started).
//!
//! Reports, over the measured window after the bootstrap:
//! - server CPU: utime + stime of the `np-server` threads (/proc), in cores;
//! - bytes per client per second (kind-13 bodies + 6-byte framing) against
//!   full state every tick (each object's full bunch, 20 times a second);
//! - p50/p99/max from the server change (the `set_fields` call) to the
//!   client having applied the bunch that carries it.
//!
//! Run: `cargo bench -p citadel-server --bench netpeer_node`
//! (`CITADEL_NP_CLIENTS` (200), `CITADEL_NP_OBJECTS` (1000),
//! `CITADEL_NP_SECS` (10) to scale). Build first and run the binary under
//! `flock -o /tmp/citadel-cargo.lock` so no build competes with it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use citadel_client::WsClient;
use citadel_client::netpeer::{NetworkPeerSession, Outcome};
use citadel_netpeer::{Class, ClassSpec, FieldSpec, Value};
use citadel_server::config::Config;
use citadel_server::{NodeBuilder, RunningNode};
use citadel_wire::Envelope;
use citadel_wire::netpeer::{FieldCodec, FieldValue};
use citadel_wire::protocol::{KIND_REP_ACK, KIND_REP_DELTA};
use citadel_wire::quant::ScalarCodec;

const FIELDS: u16 = 8;
const TICK: Duration = Duration::from_millis(50);
const FRAMING: u64 = 6;
const STAMP_MAX: i64 = (1 << 31) - 1;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn spec() -> ClassSpec {
    let scalar = ScalarCodec::new(-1_000.0, 1_000.0, 100).expect("codec");
    let mut fields = vec![FieldSpec::new(
        "stamp",
        FieldCodec::IntRange {
            min: 0,
            max: STAMP_MAX,
        },
    )];
    for i in 1..FIELDS {
        let codec = if i % 2 == 0 {
            FieldCodec::Scalar(scalar)
        } else {
            FieldCodec::IntRange { min: 0, max: 1_000 }
        };
        fields.push(FieldSpec::new(format!("f{i}"), codec));
    }
    ClassSpec {
        class_id: 1,
        layout_version: 1,
        fields,
        evolution: Default::default(),
        position_field: None,
    }
}

/// CPU ticks (utime + stime) of this process's threads named `prefix*`.
fn thread_ticks(prefix: &str) -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    let mut total = 0;
    for entry in dir.flatten() {
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let Some((head, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let name = head.split_once('(').map_or("", |(_, n)| n);
        if !name.starts_with(prefix) {
            continue;
        }
        let f: Vec<u64> = rest
            .split_whitespace()
            .map(|v| v.parse().unwrap_or(0))
            .collect();
        total += f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0);
    }
    total
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

async fn node(clients: u64) -> RunningNode {
    let dir = std::env::temp_dir().join(format!("citadel-np-bench-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let mut config = Config::default();
    config.database.url = format!("sqlite://{}/db.sqlite", dir.display());
    config.http.bind = "127.0.0.1:0".into();
    config.transport.websocket.bind = "127.0.0.1:0".into();
    config.transport.quic.enabled = false;
    config.transport.webtransport.enabled = false;
    config.transport.tls.data_dir = dir.display().to_string();
    config.transport.network_peer.enabled = true;
    // The bootstrap queues one full bunch per object at once.
    config.transport.websocket.lanes.outbound_queue_capacity = 16_384;
    config.transport.websocket.lanes.outbound_queue_max_bytes = 64 << 20;
    config.transport.limits.max_connections = (clients as usize + 16).max(64);
    NodeBuilder::new(config).start().await.expect("node starts")
}

#[derive(Default)]
struct ClientReport {
    latencies: Vec<f64>,
    full_bytes: u64,
    fulls: u64,
}

async fn client(
    url: String,
    objects: usize,
    started: Instant,
    measuring: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    bytes: Arc<AtomicU64>,
    ready: Arc<AtomicU64>,
) -> ClientReport {
    let mut report = ClientReport::default();
    let Ok((mut c, _)) = WsClient::connect_as_guest(&url).await else {
        return report;
    };
    let mut s = NetworkPeerSession::default();
    s.register(Class::compile(spec()).expect("class").current().clone());
    let mut last_stamp = vec![-1i64; objects + 1];
    let mut last_ack = Instant::now();
    let mut counted_ready = false;
    while !stop.load(Ordering::Relaxed) {
        let Ok(Ok(Some(env))) = tokio::time::timeout(Duration::from_millis(200), c.recv()).await
        else {
            continue;
        };
        if env.kind != KIND_REP_DELTA {
            continue;
        }
        let len = env.body.len() as u64;
        let measure = measuring.load(Ordering::Relaxed);
        if measure {
            bytes.fetch_add(len + FRAMING, Ordering::Relaxed);
        }
        if let Ok(Outcome::Applied {
            object_id, full, ..
        }) = s.handle_bunch(&env.body)
        {
            if full && report.fulls < objects as u64 {
                report.fulls += 1;
                report.full_bytes += len;
            }
            let stamp = match s.state(object_id).and_then(|st| st.first().cloned()) {
                Some(Some(Value::Plain(FieldValue::Int(v)))) => v,
                _ => -1,
            };
            let slot = usize::try_from(object_id).unwrap_or(0).min(objects);
            if stamp > 0 && stamp != last_stamp[slot] {
                last_stamp[slot] = stamp;
                if measure {
                    let now = started.elapsed().as_secs_f64() * 1_000.0;
                    report.latencies.push(now - stamp as f64);
                }
            }
        }
        if !counted_ready && s.objects().count() >= objects {
            counted_ready = true;
            ready.fetch_add(1, Ordering::Relaxed);
        }
        if last_ack.elapsed() >= Duration::from_millis(20) {
            last_ack = Instant::now();
            if let Some(ack) = s.poll_ack() {
                let env = Envelope {
                    kind: KIND_REP_ACK,
                    body: ack.into(),
                };
                if c.send(&env).await.is_err() {
                    break;
                }
            }
        }
    }
    report
}

fn main() {
    let clients = env("CITADEL_NP_CLIENTS", 200);
    let objects = env("CITADEL_NP_OBJECTS", 1_000) as usize;
    let secs = env("CITADEL_NP_SECS", 10);
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("np-server")
        .enable_all()
        .build()
        .expect("server runtime");
    let client_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("np-client")
        .enable_all()
        .build()
        .expect("client runtime");
    let node = server_rt.block_on(node(clients));
    let np = node.shared().netpeer.clone();
    np.register_class(spec()).expect("register");
    let ids: Vec<u32> = (0..objects)
        .map(|_| np.spawn(1, 0, None, false).expect("spawn"))
        .collect();
    let url = node.ws_url().expect("ws");
    let started = Instant::now();
    let measuring = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let bytes = Arc::new(AtomicU64::new(0));
    let ready = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = (0..clients)
        .map(|_| {
            client_rt.spawn(client(
                url.clone(),
                objects,
                started,
                measuring.clone(),
                stop.clone(),
                bytes.clone(),
                ready.clone(),
            ))
        })
        .collect();
    // The change driver: a thread of the server runtime's name prefix, so
    // its CPU counts as the server's (it is the game logic).
    let driver = {
        let np = np.clone();
        let stop = stop.clone();
        std::thread::Builder::new()
            .name("np-server-logic".into())
            .spawn(move || {
                let mut tick: u64 = 0;
                let mut next = Instant::now();
                let per_tick = (ids.len() / 5).max(1);
                while !stop.load(Ordering::Relaxed) {
                    tick += 1;
                    for k in 0..per_tick {
                        let idx = (tick as usize * per_tick + k) % ids.len();
                        let stamp = (started.elapsed().as_millis() as i64).clamp(1, STAMP_MAX);
                        let v = ((tick + k as u64) % 1_000) as i64;
                        let values = [
                            (0, FieldValue::Int(stamp)),
                            (1 + (k % 3) as u16 * 2, FieldValue::Int(v)),
                            (2 + (k % 3) as u16 * 2, FieldValue::Scalar(v as f32 / 10.0)),
                            (7, FieldValue::Int((v + 1) % 1_000)),
                        ];
                        let _ = np.set_fields(ids[idx], &values);
                    }
                    next += TICK;
                    std::thread::sleep(next.saturating_duration_since(Instant::now()));
                }
            })
            .expect("driver thread")
    };
    // Bootstrap: wait until every client holds every object.
    let deadline = Instant::now() + Duration::from_secs(120);
    while ready.load(Ordering::Relaxed) < clients && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let bootstrap = started.elapsed();
    let ready_clients = ready.load(Ordering::Relaxed);
    std::thread::sleep(Duration::from_secs(1));
    let hz = 100.0; // USER_HZ
    let cpu0 = thread_ticks("np-server");
    let t0 = Instant::now();
    measuring.store(true, Ordering::Relaxed);
    std::thread::sleep(Duration::from_secs(secs));
    measuring.store(false, Ordering::Relaxed);
    let window = t0.elapsed().as_secs_f64();
    let cpu1 = thread_ticks("np-server");
    stop.store(true, Ordering::Relaxed);
    let _ = driver.join();
    let reports: Vec<ClientReport> = handles
        .into_iter()
        .map(|h| client_rt.block_on(h).unwrap_or_default())
        .collect();
    let mut lat: Vec<f64> = reports
        .iter()
        .flat_map(|r| r.latencies.iter().copied())
        .collect();
    lat.sort_by(|a, b| a.total_cmp(b));
    let (fulls, full_bytes) = reports
        .iter()
        .fold((0u64, 0u64), |(n, b), r| (n + r.fulls, b + r.full_bytes));
    let avg_full = full_bytes as f64 / fulls.max(1) as f64;
    let full_state = (avg_full + FRAMING as f64) * objects as f64 * 20.0;
    let per_client = bytes.load(Ordering::Relaxed) as f64 / window / clients as f64;
    let cores = (cpu1 - cpu0) as f64 / hz / window;
    let counters = np.inspect(|a| a.counters().clone());
    println!(
        "netpeer_node: {clients} clients x {objects} objects x {FIELDS} fields, 10% of fields at 20 Hz, WebSocket"
    );
    println!(
        "bootstrap: {ready_clients}/{clients} clients held every object after {:.1} s",
        bootstrap.as_secs_f64()
    );
    println!("server CPU (np-server threads): {cores:.2} cores over {window:.1} s");
    println!(
        "bytes per client per second: {per_client:.0} vs full state every tick {full_state:.0} ({:.1}x fewer)",
        full_state / per_client.max(1.0)
    );
    println!(
        "change -> applied: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms ({} samples)",
        percentile(&lat, 0.5),
        percentile(&lat, 0.99),
        lat.last().copied().unwrap_or(f64::NAN),
        lat.len()
    );
    println!(
        "core counters: fulls {} (ack timeout {}, pending cap {}), deltas {}, acks advanced {}",
        counters.fulls,
        counters.full_ack_timeout,
        counters.full_pending_cap,
        counters.deltas,
        counters.acks_advanced
    );
    server_rt.block_on(async {
        node.shutdown();
    });
}
