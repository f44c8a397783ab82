//! The networked-actor load scenario: N clients (default 500) in rooms of
//! 50, each owner sending NA_STATE at 30 Hz, snapshots at 20 Hz, against a
//! separate `citadel` process (release build). Reports server CPU (from
//! /proc), bytes per client per second, and the p50/p99 age of the newest
//! remote position each client holds (positions carry their send time).
//! Also the idle cost: bytes per second to a client watching 50 still actors.
//!
//! Run: `cargo bench -p citadel-server --bench tsync_load`
//! (`CITADEL_TSYNC_CLIENTS`, `CITADEL_TSYNC_SECS`, `CITADEL_TSYNC_ROOM` to scale).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use citadel_client::WsClient;
use citadel_client::actors::{self, ActorView};
use citadel_client::wire::actor::NaTransform;
use tokio::sync::Mutex;

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

struct Shared {
    bytes: AtomicU64,
    ages: Mutex<Vec<f64>>,
}

async fn bot(
    url: String,
    room: String,
    started: Instant,
    until: Instant,
    shared: Arc<Shared>,
    moving: bool,
) {
    let Ok((mut client, _)) = WsClient::connect_as_guest(&url).await else {
        return;
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
                if moving && let (Some(state), Some(me)) = (view.latest(), view.local_object()) {
                    let now = elapsed_ms(Instant::now());
                    let mut ages = shared.ages.lock().await;
                    for (id, v) in state.iter() {
                        if *id != me && v.position[0] > 0.0 {
                            ages.push(now - f64::from(v.position[0]));
                        }
                    }
                }
            }
            msg = client.recv() => {
                let Ok(Some(env)) = msg else { break };
                shared.bytes.fetch_add(env.body.len() as u64 + 6, Ordering::Relaxed);
                view.handle_envelope(&env);
                if let Some(ack) = view.poll_ack() {
                    let _ = client.send(&ack).await;
                }
            }
        }
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
        let started = Instant::now();
        let shared = Arc::new(Shared { bytes: AtomicU64::new(0), ages: Mutex::new(Vec::new()) });
        let ramp = Duration::from_secs(3);
        let until = started + ramp + Duration::from_secs(secs);
        let mut tasks = Vec::new();
        for i in 0..clients {
            let room = format!("room-{}", i / room_size);
            tasks.push(tokio::spawn(bot(url.clone(), room, started, until, shared.clone(), true)));
        }
        tokio::time::sleep(ramp).await;
        shared.bytes.store(0, Ordering::Relaxed);
        shared.ages.lock().await.clear();
        let cpu0 = cpu_ticks(pid);
        let t0 = Instant::now();
        for t in tasks {
            let _ = t.await;
        }
        let wall = t0.elapsed().as_secs_f64();
        let cpu = (cpu_ticks(pid) - cpu0) as f64 / 100.0;
        let mut ages = shared.ages.lock().await.clone();
        ages.sort_by(f64::total_cmp);
        let bytes = shared.bytes.load(Ordering::Relaxed) as f64;
        format!(
            "tsync: {clients} clients, rooms of {room_size}, NA_STATE 30 Hz, snapshots 20 Hz, {wall:.1} s\n\
             server CPU: {:.2} cores\nbytes per client per second: {:.0}\n\
             newest remote position age: p50 {:.1} ms, p99 {:.1} ms ({} samples)",
            cpu / wall,
            bytes / wall / clients as f64,
            percentile(&ages, 0.5),
            percentile(&ages, 0.99),
            ages.len()
        )
    });
    println!("{report}");
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(dir);
}
