//! The issue-18 NetworkPeer scenario over real sockets: a node (WebSocket or
//! QUIC on 127.0.0.1, `transport.network_peer.enabled`, every other key at
//! its default, the outbound queues included) in this process on its own
//! runtime (threads `np-server`), N `NetworkPeerSession` clients on another
//! runtime (threads `np-client`), one match, every object relevant to every
//! client (no viewer: the worst case), M objects of 8 fields, 10 % of all
//! fields changing at 20 Hz. Two spreads of those changes:
//! - `objects` (default): each tick M/5 objects change 4 fields, one of them
//!   field 0, which carries the change time in ms since the run started;
//! - `random` (the wording taken literally): each tick 10 % of all
//!   M × 8 fields, drawn at random without repetition; a drawn field 0
//!   carries the change time, the others a random value.
//!
//! With pinning on (the default on 2+ CPUs), the server threads (and the
//! change driver, which is the game logic) run on CPU 0 and the client
//! threads on CPU 1 (`taskset` per thread), so clients cannot steal the
//! server's core.
//!
//! `CITADEL_NP_APPLYING=K` makes only the first K clients full sessions
//! (they apply every bunch and measure latency); the others are ack-only
//! clients that decode each bunch and acknowledge the newest token per
//! object, which the server cannot tell apart, so a run can load the server
//! with 200 connections without the load generator's core saturating first.
//!
//! Reports, over the measured window after the bootstrap:
//! - CPU: utime + stime of the `np-server` threads and of the `np-client`
//!   threads (/proc), in cores, and the rest of the process;
//! - bytes per client per second (kind-13 bodies + 6-byte framing) against
//!   full state every tick (each object's full bunch, 20 times a second);
//! - p50/p99/max from the server change (the `set_fields` call) to the
//!   client having applied the bunch that carries it.
//!
//! Run: `cargo bench -p citadel-server --bench netpeer_node`
//! (`CITADEL_NP_CLIENTS` (200), `CITADEL_NP_OBJECTS` (1000),
//! `CITADEL_NP_SECS` (10), `CITADEL_NP_TRANSPORT` (`ws` or `quic`),
//! `CITADEL_NP_SPREAD` (`objects` or `random`), `CITADEL_NP_PIN` (1 or 0),
//! `CITADEL_NP_APPLYING` (all), `CITADEL_NP_QUEUE` (unset: the default
//! reliable queue capacity)).
//! Build first and run the binary under `flock -o /tmp/citadel-cargo.lock`
//! so no build competes with it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use citadel_client::netpeer::{NetworkPeerSession, Outcome};
use citadel_client::{Client, QuicClient, ServerTrust, Transport, WsClient};
use citadel_netpeer::{Class, ClassSpec, FieldSpec, Value};
use citadel_server::config::Config;
use citadel_server::{NodeBuilder, RunningNode};
use citadel_wire::Envelope;
use citadel_wire::netpeer::{BunchHeader, FieldCodec, FieldValue, HeaderBase, RepAck, RepAckEntry};
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

fn env_str(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

/// Pins the calling thread to `cpu` (`taskset -pc`; a no-op if it fails).
fn pin_current_thread(cpu: usize) {
    let Ok(link) = std::fs::read_link("/proc/thread-self") else {
        return;
    };
    let Some(tid) = link.file_name().and_then(|t| t.to_str()) else {
        return;
    };
    let _ = std::process::Command::new("taskset")
        .args(["-pc", &cpu.to_string(), tid])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
}

fn runtime(name: &str, pin: Option<usize>) -> tokio::runtime::Runtime {
    let mut b = tokio::runtime::Builder::new_multi_thread();
    b.worker_threads(2).thread_name(name).enable_all();
    if let Some(cpu) = pin {
        b.on_thread_start(move || pin_current_thread(cpu));
    }
    b.build().expect("runtime")
}

/// CPU ticks (utime + stime) of the whole process.
fn process_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return 0;
    };
    let f: Vec<u64> = rest
        .split_whitespace()
        .map(|v| v.parse().unwrap_or(0))
        .collect();
    f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0)
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

async fn node(clients: u64, quic: bool, queue: Option<usize>) -> RunningNode {
    let dir = std::env::temp_dir().join(format!("citadel-np-bench-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let mut config = Config::default();
    config.database.url = format!("sqlite://{}/db.sqlite", dir.display());
    config.http.bind = "127.0.0.1:0".into();
    config.transport.websocket.bind = "127.0.0.1:0".into();
    config.transport.quic.enabled = quic;
    config.transport.quic.bind = "127.0.0.1:0".into();
    config.transport.webtransport.enabled = false;
    config.transport.tls.data_dir = dir.display().to_string();
    config.transport.network_peer.enabled = true;
    // The outbound queues keep their defaults (1 024 envelopes, 4 MiB; the
    // bootstrap is paced by `bootstrap_per_tick`) unless CITADEL_NP_QUEUE
    // sets the reliable capacity (a diagnosis knob, reported in the output).
    if let Some(cap) = queue {
        config.transport.websocket.lanes.outbound_queue_capacity = cap;
        config.transport.quic.lanes.outbound_queue_capacity = cap;
    }
    // CITADEL_NP_ACK_TIMEOUT (ms): a diagnosis knob like CITADEL_NP_QUEUE.
    if let Ok(ms) = std::env::var("CITADEL_NP_ACK_TIMEOUT") {
        config.transport.network_peer.ack_timeout_ms = ms.parse().expect("CITADEL_NP_ACK_TIMEOUT");
    }
    config.transport.limits.max_connections = (clients as usize + 16).max(64);
    NodeBuilder::new(config).start().await.expect("node starts")
}

#[derive(Default)]
struct ClientReport {
    latencies: Vec<f64>,
    full_bytes: u64,
    fulls: u64,
    /// The connection failed or the server closed it.
    closed: bool,
}

impl ClientReport {
    fn failed() -> Self {
        ClientReport {
            closed: true,
            ..ClientReport::default()
        }
    }
}

/// Where the clients connect.
#[derive(Clone)]
enum Target {
    Ws(String),
    Quic(String, ServerTrust),
}

/// What every client shares with the main thread.
#[derive(Clone)]
struct Shared {
    objects: usize,
    started: Instant,
    measuring: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    /// Woken with `stop`, so an idle client notices it without a timer
    /// per receive.
    stopped: Arc<tokio::sync::Notify>,
    bytes: Arc<AtomicU64>,
    ready: Arc<AtomicU64>,
}

async fn client(target: Target, sh: Shared, applying: bool) -> ClientReport {
    match target {
        Target::Ws(url) => match WsClient::connect_as_guest(&url).await {
            Ok((c, _)) => run_client(c, sh, applying).await,
            Err(_) => ClientReport::failed(),
        },
        Target::Quic(addr, trust) => match QuicClient::connect_as_guest(&addr, trust).await {
            Ok((c, _)) => run_client(c, sh, applying).await,
            Err(_) => ClientReport::failed(),
        },
    }
}

/// An ack-only client (`CITADEL_NP_APPLYING` below the client count): it
/// reads each bunch's header (object id and tokens, `BunchHeader::peek`)
/// and acknowledges the newest token it received per object (history 0),
/// without decoding or applying values (the applying sessions check those).
/// The server cannot tell it from a session: same bytes out, same acks
/// back. It keeps the load generator cheap enough that the server, not the
/// clients, is what a 200-client run measures.
struct Acker {
    newest: Vec<u64>,
    dirty: Vec<u32>,
    held: usize,
}

impl Acker {
    fn new(objects: usize) -> Self {
        Acker {
            newest: vec![0; objects + 1],
            dirty: Vec::new(),
            held: 0,
        }
    }

    /// Counts a bunch that decoded and was newer than the last one.
    fn handle(&mut self, body: &[u8]) {
        let Ok(b) = BunchHeader::peek(body) else {
            return;
        };
        let Some(slot) = usize::try_from(b.object_id)
            .ok()
            .and_then(|i| self.newest.get_mut(i))
        else {
            return;
        };
        let full = matches!(b.base, HeaderBase::Full { .. });
        if b.result_id <= *slot || (*slot == 0 && !full) {
            return;
        }
        if *slot == 0 {
            self.held += 1;
        }
        *slot = b.result_id;
        self.dirty.push(b.object_id);
    }
}

/// What a client does with each kind-13 body it receives.
trait Receiver {
    /// Handles one body (`measure`: inside the window).
    fn bunch(&mut self, body: &[u8], measure: bool, report: &mut ClientReport);
    /// How many objects the client holds.
    fn held(&self) -> usize;
    /// The ack body to send, if anything is to be acknowledged.
    fn poll_ack(&mut self) -> Option<Vec<u8>>;
}

impl Receiver for Acker {
    fn bunch(&mut self, body: &[u8], _measure: bool, _report: &mut ClientReport) {
        self.handle(body);
    }

    fn held(&self) -> usize {
        self.held
    }

    fn poll_ack(&mut self) -> Option<Vec<u8>> {
        if self.dirty.is_empty() {
            return None;
        }
        self.dirty.sort_unstable();
        self.dirty.dedup();
        let entries = self
            .dirty
            .drain(..)
            .map(|object_id| RepAckEntry {
                object_id,
                acked_result_id: self.newest[object_id as usize],
                history: 0,
            })
            .collect();
        let mut body = Vec::new();
        RepAck { entries }.encode_into(&mut body);
        Some(body)
    }
}

/// A full session: applies every bunch and measures change -> applied.
struct Applier {
    session: NetworkPeerSession,
    last_stamp: Vec<i64>,
    started: Instant,
    objects: usize,
}

impl Receiver for Applier {
    fn bunch(&mut self, body: &[u8], measure: bool, report: &mut ClientReport) {
        let s = &mut self.session;
        if let Ok(Outcome::Applied {
            object_id, full, ..
        }) = s.handle_bunch(body)
        {
            if full && report.fulls < self.objects as u64 {
                report.fulls += 1;
                report.full_bytes += body.len() as u64;
            }
            let stamp = match s.state(object_id).and_then(|st| st.first().cloned()) {
                Some(Some(Value::Plain(FieldValue::Int(v)))) => v,
                _ => -1,
            };
            let slot = usize::try_from(object_id).unwrap_or(0).min(self.objects);
            if stamp > 0 && stamp != self.last_stamp[slot] {
                self.last_stamp[slot] = stamp;
                if measure {
                    let now = self.started.elapsed().as_secs_f64() * 1_000.0;
                    report.latencies.push(now - stamp as f64);
                }
            }
        }
    }

    fn held(&self) -> usize {
        self.session.objects().count()
    }

    fn poll_ack(&mut self) -> Option<Vec<u8>> {
        self.session.poll_ack()
    }
}

async fn run_client<T: Transport>(c: Client<T>, sh: Shared, applying: bool) -> ClientReport {
    if applying {
        let mut session = NetworkPeerSession::default();
        session.register(Class::compile(spec()).expect("class").current().clone());
        let applier = Applier {
            session,
            last_stamp: vec![-1; sh.objects + 1],
            started: sh.started,
            objects: sh.objects,
        };
        receive(c, sh, applier).await
    } else {
        let acker = Acker::new(sh.objects);
        receive(c, sh, acker).await
    }
}

/// The client loop: receive, hand bodies to `rx`, ack every 20 ms.
async fn receive<T: Transport>(
    mut c: Client<T>,
    sh: Shared,
    mut rx: impl Receiver,
) -> ClientReport {
    let mut report = ClientReport::default();
    let mut counted_ready = false;
    // Registered once, before the flag is read, so a stop between the
    // check and the wait still wakes this client.
    let stopped = sh.stopped.clone();
    let stopped = stopped.notified();
    tokio::pin!(stopped);
    stopped.as_mut().enable();
    // One timer for the acks (every 20 ms), polled before each receive: no
    // clock read or timer registration per body.
    let mut ack_every = tokio::time::interval(Duration::from_millis(20));
    ack_every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while !sh.stop.load(Ordering::Relaxed) {
        let env = tokio::select! {
            biased;
            () = &mut stopped => break,
            _ = ack_every.tick() => {
                if let Some(ack) = rx.poll_ack() {
                    let env = Envelope {
                        kind: KIND_REP_ACK,
                        body: ack.into(),
                    };
                    if c.send(&env).await.is_err() {
                        break;
                    }
                }
                continue;
            }
            got = c.recv() => match got {
                Ok(Some(env)) => env,
                Ok(None) | Err(_) => {
                    report.closed = true;
                    break;
                }
            },
        };
        if env.kind != KIND_REP_DELTA {
            continue;
        }
        let measure = sh.measuring.load(Ordering::Relaxed);
        if measure {
            sh.bytes
                .fetch_add(env.body.len() as u64 + FRAMING, Ordering::Relaxed);
        }
        rx.bunch(&env.body, measure, &mut report);
        if !counted_ready && rx.held() >= sh.objects {
            counted_ready = true;
            sh.ready.fetch_add(1, Ordering::Relaxed);
        }
    }
    report
}

/// One tick of changes: `(object index, field, value)`, at most one per
/// (object, field).
fn changes(
    spread: &str,
    tick: u64,
    objects: usize,
    rng: &mut u64,
    pool: &mut [u32],
) -> Vec<(usize, u16, i64)> {
    let mut next = || {
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        *rng
    };
    if spread == "random" {
        // 10 % of all fields, drawn without repetition (partial shuffle).
        let n = pool.len() / 10;
        for i in 0..n {
            let j = i + (next() % (pool.len() - i) as u64) as usize;
            pool.swap(i, j);
        }
        pool[..n]
            .iter()
            .map(|&f| {
                let (o, field) = (f as usize / FIELDS as usize, (f % u32::from(FIELDS)) as u16);
                (o, field, (next() % 1_000) as i64)
            })
            .collect()
    } else {
        // M/5 objects, 4 fields each (field 0 among them).
        let per_tick = (objects / 5).max(1);
        let mut out = Vec::with_capacity(per_tick * 4);
        for k in 0..per_tick {
            let o = (tick as usize * per_tick + k) % objects;
            let v = ((tick + k as u64) % 1_000) as i64;
            out.push((o, 0, 0));
            out.push((o, 1 + (k % 3) as u16 * 2, v));
            out.push((o, 2 + (k % 3) as u16 * 2, v));
            out.push((o, 7, (v + 1) % 1_000));
        }
        out
    }
}

fn main() {
    let clients = env("CITADEL_NP_CLIENTS", 200);
    let objects = env("CITADEL_NP_OBJECTS", 1_000) as usize;
    let secs = env("CITADEL_NP_SECS", 10);
    let quic = env_str("CITADEL_NP_TRANSPORT", "ws") == "quic";
    let spread = env_str("CITADEL_NP_SPREAD", "objects");
    let applying = env("CITADEL_NP_APPLYING", clients);
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let pin = env("CITADEL_NP_PIN", 1) == 1 && cpus >= 2;
    let server_rt = runtime("np-server", pin.then_some(0));
    let client_rt = runtime("np-client", pin.then_some(1));
    let queue = std::env::var("CITADEL_NP_QUEUE")
        .ok()
        .and_then(|v| v.parse::<usize>().ok());
    let node = server_rt.block_on(node(clients, quic, queue));
    let np = node.shared().netpeer.clone();
    np.register_class(spec()).expect("register");
    let ids: Vec<u32> = (0..objects)
        .map(|_| np.spawn(1, 0, None, false).expect("spawn"))
        .collect();
    let target = if quic {
        let tls = node.shared().tls().expect("tls");
        Target::Quic(
            node.quic_url().expect("quic"),
            ServerTrust::Pinned(tls.chain.clone()),
        )
    } else {
        Target::Ws(node.ws_url().expect("ws"))
    };
    let sh = Shared {
        objects,
        started: Instant::now(),
        measuring: Arc::new(AtomicBool::new(false)),
        stop: Arc::new(AtomicBool::new(false)),
        stopped: Arc::new(tokio::sync::Notify::new()),
        bytes: Arc::new(AtomicU64::new(0)),
        ready: Arc::new(AtomicU64::new(0)),
    };
    let handles: Vec<_> = (0..clients)
        .map(|i| client_rt.spawn(client(target.clone(), sh.clone(), i < applying)))
        .collect();
    // The change driver: a thread of the server runtime's name prefix, so
    // its CPU counts as the server's (it is the game logic).
    let driver = {
        let np = np.clone();
        let stop = sh.stop.clone();
        let started = sh.started;
        let spread = spread.clone();
        std::thread::Builder::new()
            .name("np-server-logic".into())
            .spawn(move || {
                if pin {
                    pin_current_thread(0);
                }
                let mut tick: u64 = 0;
                let mut rng = 0x9e37_79b9_7f4a_7c15u64;
                let mut pool: Vec<u32> = (0..(ids.len() * FIELDS as usize) as u32).collect();
                let mut next = Instant::now();
                while !stop.load(Ordering::Relaxed) {
                    tick += 1;
                    let mut list = changes(&spread, tick, ids.len(), &mut rng, &mut pool);
                    list.sort_unstable_by_key(|c| (c.0, c.1));
                    let stamp = (started.elapsed().as_millis() as i64).clamp(1, STAMP_MAX);
                    for group in list.chunk_by(|a, b| a.0 == b.0) {
                        let values: Vec<(u16, FieldValue)> = group
                            .iter()
                            .map(|&(_, f, v)| {
                                let value = match f {
                                    0 => FieldValue::Int(stamp),
                                    f if f % 2 == 0 => FieldValue::Scalar(v as f32 / 10.0),
                                    _ => FieldValue::Int(v),
                                };
                                (f, value)
                            })
                            .collect();
                        let _ = np.set_fields(ids[group[0].0], &values);
                    }
                    next += TICK;
                    std::thread::sleep(next.saturating_duration_since(Instant::now()));
                }
            })
            .expect("driver thread")
    };
    // Bootstrap: wait until every client holds every object.
    let deadline = Instant::now() + Duration::from_secs(120);
    while sh.ready.load(Ordering::Relaxed) < clients && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let bootstrap = sh.started.elapsed();
    let ready_clients = sh.ready.load(Ordering::Relaxed);
    std::thread::sleep(Duration::from_secs(1));
    let hz = 100.0; // USER_HZ
    let before = (
        thread_ticks("np-server"),
        thread_ticks("np-client"),
        process_ticks(),
    );
    let counters0 = np.inspect(|a| a.counters().clone());
    let t0 = Instant::now();
    sh.measuring.store(true, Ordering::Relaxed);
    std::thread::sleep(Duration::from_secs(secs));
    sh.measuring.store(false, Ordering::Relaxed);
    let window = t0.elapsed().as_secs_f64();
    let after = (
        thread_ticks("np-server"),
        thread_ticks("np-client"),
        process_ticks(),
    );
    let counters1 = np.inspect(|a| a.counters().clone());
    // Every close reason the server counted, for the report.
    let server_closes = node.shared().metrics.closes_json().to_string();
    let slow_closes = node
        .shared()
        .metrics
        .closes(citadel_server::metrics::CloseReason::SlowConsumer);
    sh.stop.store(true, Ordering::Relaxed);
    sh.stopped.notify_waiters();
    let _ = driver.join();
    let reports: Vec<ClientReport> = handles
        .into_iter()
        .map(|h| {
            // A client stuck in a handshake the overloaded server dropped
            // must not hang the report.
            let joined = client_rt
                .block_on(async move { tokio::time::timeout(Duration::from_secs(5), h).await });
            match joined {
                Ok(Ok(report)) => report,
                _ => ClientReport::failed(),
            }
        })
        .collect();
    let mut lat: Vec<f64> = reports
        .iter()
        .flat_map(|r| r.latencies.iter().copied())
        .collect();
    lat.sort_by(|a, b| a.total_cmp(b));
    let (fulls, full_bytes) = reports
        .iter()
        .fold((0u64, 0u64), |(n, b), r| (n + r.fulls, b + r.full_bytes));
    let closed = reports.iter().filter(|r| r.closed).count();
    let avg_full = full_bytes as f64 / fulls.max(1) as f64;
    let full_state = (avg_full + FRAMING as f64) * objects as f64 * 20.0;
    let per_client = sh.bytes.load(Ordering::Relaxed) as f64 / window / clients as f64;
    let cores = |a: u64, b: u64| b.saturating_sub(a) as f64 / hz / window;
    let server = cores(before.0, after.0);
    let client_cpu = cores(before.1, after.1);
    let other = cores(before.2, after.2) - server - client_cpu;
    let d = |f: fn(&citadel_netpeer::Counters) -> u64| f(&counters1) - f(&counters0);
    println!(
        "netpeer_node: {clients} clients ({} applying sessions, the rest ack-only) x {objects} objects x {FIELDS} fields, 10% of fields at 20 Hz (spread {spread}), {}, pinned {}",
        applying.min(clients),
        if quic { "QUIC" } else { "WebSocket" },
        if pin {
            "server CPU 0 / clients CPU 1"
        } else {
            "no"
        }
    );
    println!(
        "reliable outbound queue capacity: {}",
        queue.map_or("1024 (default)".to_string(), |c| format!(
            "{c} (CITADEL_NP_QUEUE)"
        ))
    );
    println!(
        "bootstrap: {ready_clients}/{clients} clients held every object after {:.1} s; {closed} clients closed by the end ({slow_closes} closed by the server as slow consumers; server closes by reason {server_closes})",
        bootstrap.as_secs_f64()
    );
    println!(
        "CPU over {window:.1} s: server (np-server threads) {server:.2} cores, clients (np-client) {client_cpu:.2} cores, rest of process {other:.2} cores"
    );
    println!(
        "bytes per client per second: {per_client:.0} vs full state every tick {full_state:.0} ({:.2}x fewer); avg full bunch {avg_full:.1} B + {FRAMING} framing",
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
        "in the window: fulls {} (ack timeout {}, pending cap {}, deferred {}), deltas {}, acks advanced {}, delta bytes/bunch {:.1}",
        d(|c| c.fulls),
        d(|c| c.full_ack_timeout),
        d(|c| c.full_pending_cap),
        d(|c| c.full_deferred),
        d(|c| c.deltas),
        d(|c| c.acks_advanced),
        d(|c| c.bunch_bytes) as f64 / (d(|c| c.fulls) + d(|c| c.deltas)).max(1) as f64
    );
    server_rt.block_on(async {
        node.shutdown();
    });
}
