//! The networked-actor load scenario: N clients (default 500) in rooms of
//! 50, each owner sending NA_STATE at 30 Hz, snapshots at 20 Hz, against a
//! separate `citadel` process (release build). Reports server CPU (from
//! /proc), bytes per client per second, and the p50/p99 age of the newest
//! remote position each client holds (positions carry their send time, in
//! ms since the run started, as their x coordinate), plus the age of the
//! freshest position when a snapshot arrives (the owner→server→viewer path
//! without the wait for the next snapshot). Then the idle cost: a second
//! phase with one room of still actors, reporting bytes per second to each
//! watching client. Each bot keeps its own samples; they are merged at the end.
//!
//! Run: `cargo bench -p citadel-server --bench tsync_load`
//! (`CITADEL_TSYNC_CLIENTS`, `CITADEL_TSYNC_SECS`, `CITADEL_TSYNC_ROOM`,
//! `CITADEL_TSYNC_IDLE_SECS` to scale).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use citadel_client::WsClient;
use citadel_client::actors::{self, ActorView};
use citadel_client::wire::actor::NaTransform;
use citadel_client::wire::protocol::KIND_TSYNC_SNAPSHOT;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let get = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    get(11) + get(12) // utime + stime (fields 14 and 15 of the full line)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// What one bot measured.
#[derive(Default)]
struct BotReport {
    /// Age of every remote position held, sampled every 100 ms.
    ages: Vec<f64>,
    /// Age of the freshest remote position when a snapshot arrives.
    arrivals: Vec<f64>,
}

async fn bot(
    url: String,
    room: String,
    started: Instant,
    measure_from: Instant,
    until: Instant,
    bytes: Arc<AtomicU64>,
    moving: bool,
) -> BotReport {
    let mut report = BotReport::default();
    let Ok((mut client, _)) = WsClient::connect_as_guest(&url).await else {
        return report;
    };
    let _ = client.join_or_create_room(&room).await;
    let _ = client.wait_for_room_joined().await;
    let _ = client.send(&actors::hello()).await;
    let mut view = ActorView::new();
    let elapsed_ms = |now: Instant| (now - started).as_secs_f64() * 1_000.0;
    let place = |ms: f64| NaTransform {
        position: [ms as f32, 0.0, 0.0],
        ..NaTransform::IDENTITY
    };
    let env = view.announce(0, place(elapsed_ms(Instant::now())));
    let _ = client.send(&env).await;
    let mut tick = tokio::time::interval(Duration::from_millis(33));
    let mut sample = tokio::time::interval(Duration::from_millis(100));
    loop {
        tokio::select! {
            _ = tick.tick() => {
                if Instant::now() >= until { break; }
                if moving && let Some(id) = view.local_object() {
                    let _ = client.send(&actors::state(id, place(elapsed_ms(Instant::now())))).await;
                }
            }
            _ = sample.tick() => {
                let now = Instant::now();
                if moving && now >= measure_from
                    && let (Some(state), Some(me)) = (view.latest(), view.local_object()) {
                    let now = elapsed_ms(now);
                    report.ages.extend(state.iter()
                        .filter(|(id, v)| **id != me && v.position[0] > 0.0)
                        .map(|(_, v)| now - f64::from(v.position[0])));
                }
            }
            msg = client.recv() => {
                let Ok(Some(env)) = msg else { break };
                let now = Instant::now();
                if now >= measure_from && now < until {
                    bytes.fetch_add(env.body.len() as u64 + 6, Ordering::Relaxed);
                }
                view.handle_envelope(&env);
                if moving && now >= measure_from && env.kind == KIND_TSYNC_SNAPSHOT
                    && let (Some(state), Some(me)) = (view.latest(), view.local_object()) {
                    let now = elapsed_ms(now);
                    let freshest = state.iter()
                        .filter(|(id, v)| **id != me && v.position[0] > 0.0)
                        .map(|(_, v)| now - f64::from(v.position[0]))
                        .fold(f64::INFINITY, f64::min);
                    if freshest.is_finite() {
                        report.arrivals.push(freshest);
                    }
                }
                if let Some(ack) = view.poll_ack() {
                    let _ = client.send(&ack).await;
                }
            }
        }
    }
    report
}

/// One measured phase: `clients` bots in rooms of `room_size`, a 3 s ramp,
/// then `secs` of measurement.
struct Phase {
    clients: u64,
    secs: u64,
    moving: bool,
}

struct PhaseResult {
    wall: f64,
    cpu_cores: f64,
    bytes_per_client_s: f64,
    ages: Vec<f64>,
    arrivals: Vec<f64>,
}

async fn run_phase(url: &str, pid: u32, room_size: u64, prefix: &str, phase: Phase) -> PhaseResult {
    let started = Instant::now();
    let measure_from = started + Duration::from_secs(3);
    let until = measure_from + Duration::from_secs(phase.secs);
    let bytes = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for i in 0..phase.clients {
        let room = format!("{prefix}-{}", i / room_size);
        tasks.push(tokio::spawn(bot(
            url.to_owned(),
            room,
            started,
            measure_from,
            until,
            bytes.clone(),
            phase.moving,
        )));
    }
    tokio::time::sleep_until(measure_from.into()).await;
    let cpu0 = cpu_ticks(pid);
    let t0 = Instant::now();
    let mut ages = Vec::new();
    let mut arrivals = Vec::new();
    for t in tasks {
        if let Ok(report) = t.await {
            ages.extend(report.ages);
            arrivals.extend(report.arrivals);
        }
    }
    let wall = t0.elapsed().as_secs_f64();
    let cpu = (cpu_ticks(pid) - cpu0) as f64 / 100.0;
    ages.sort_by(f64::total_cmp);
    arrivals.sort_by(f64::total_cmp);
    PhaseResult {
        wall,
        cpu_cores: cpu / wall,
        bytes_per_client_s: bytes.load(Ordering::Relaxed) as f64 / wall / phase.clients as f64,
        ages,
        arrivals,
    }
}

fn main() {
    let clients = env("CITADEL_TSYNC_CLIENTS", 500);
    let secs = env("CITADEL_TSYNC_SECS", 10);
    let room_size = env("CITADEL_TSYNC_ROOM", 50);
    let dir = std::env::temp_dir().join(format!("citadel-tsync-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let config = dir.join("citadel.toml");
    std::fs::write(
        &config,
        format!(
            "[http]\nbind = \"127.0.0.1:0\"\n[transport.websocket]\nbind = \"127.0.0.1:0\"\n\
             [transport.limits]\nmax_connections = 100000\nmessages_per_second = 1000\nmessage_burst = 2000\n\
             [database]\nurl = \"sqlite://{}/db.sqlite\"\n[transform_sync]\nsend_rate_hz = 20\nsim_hz = 60\n",
            dir.display()
        ),
    )
    .expect("config");
    let mut child = Command::new(env!("CARGO_BIN_EXE_citadel"))
        .args(["serve", "--config"])
        .arg(&config)
        .env("CITADEL_LOG_LEVEL", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start citadel");
    let pid = child.id();
    let mut lines = BufReader::new(child.stdout.take().expect("stdout"));
    let mut url = String::new();
    let mut line = String::new();
    while lines.read_line(&mut line).unwrap_or(0) > 0 {
        if let Some(pos) = line.find("ws://") {
            url = line[pos..].trim_end_matches(['│', ' ', '\n']).to_owned();
            break;
        }
        line.clear();
    }
    std::thread::spawn(move || std::io::copy(&mut lines, &mut std::io::sink()));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let report = rt.block_on(async move {
        let load = run_phase(&url, pid, room_size, "room", Phase { clients, secs, moving: true }).await;
        // Idle cost: one room of `room_size` actors that never move.
        let idle_secs = env("CITADEL_TSYNC_IDLE_SECS", 5);
        let idle = run_phase(&url, pid, room_size, "idle", Phase { clients: room_size, secs: idle_secs, moving: false }).await;
        format!(
            "tsync: {clients} clients, rooms of {room_size}, NA_STATE 30 Hz, snapshots 20 Hz, {:.1} s\n\
             server CPU: {:.2} cores\nbytes per client per second: {:.0}\n\
             newest remote position age: p50 {:.1} ms, p99 {:.1} ms ({} samples)\n\
             freshest position age on snapshot arrival: p50 {:.1} ms, p99 {:.1} ms\n\
             idle: {room_size} still actors, {:.1} s: {:.1} bytes per client per second, server CPU {:.3} cores",
            load.wall,
            load.cpu_cores,
            load.bytes_per_client_s,
            percentile(&load.ages, 0.5),
            percentile(&load.ages, 0.99),
            load.ages.len(),
            percentile(&load.arrivals, 0.5),
            percentile(&load.arrivals, 0.99),
            idle.wall,
            idle.bytes_per_client_s,
            idle.cpu_cores,
        )
    });
    println!("{report}");
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(dir);
}
