//! `actor-sync`: networked actors and transform sync under load (Citadel
//! only; the peers have no actors).
//!
//! What it is: `clients` WebSocket bots in rooms of `room_size`; each opts
//! in to transform sync (HELLO), announces an avatar and, as its owner,
//! sends NA_STATE at `state_hz`; the server answers with snapshots at its
//! configured rate (20 Hz by default). An owner's x coordinate is its send
//! time (ms since the run started), so a viewer knows how old each remote
//! position it holds is. Measured: server CPU, bytes per client per second,
//! the age of every remote position a bot holds (sampled every 100 ms), the
//! age of the freshest remote position when a snapshot arrives (the path
//! owner → server → viewer without the wait for the next snapshot), and then
//! the idle cost: one room of `room_size` avatars that never move, bytes
//! per client per second. What it is not: an input-prediction test.
//!
//! Call order: `run(ctx, scenario)` → `Report`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use citadel_client::WsClient;
use citadel_client::actors::{self, ActorView};
use citadel_client::wire::actor::NaTransform;
use citadel_client::wire::protocol::KIND_TSYNC_SNAPSHOT;

use super::{Ctx, Sources, guest_in_room, join_connected_bots};
use crate::procstat;
use crate::report::{Report, Table, fmt_value};
use crate::scenario::ActorSync;
use crate::stats::Histogram;
use crate::targets::addr_of_url;
use crate::transport::Connector;

/// How often a bot samples the ages of the remote positions it holds.
const SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// What the bots of one phase share.
#[derive(Default)]
struct Shared {
    bytes: AtomicU64,
    snapshots: AtomicU64,
    connected: AtomicU64,
    /// Remote position ages, µs.
    ages: Histogram,
    /// Freshest remote position age on snapshot arrival, µs.
    arrivals: Histogram,
}

/// One phase's timing: measure from `measure_from` to `until`.
#[derive(Clone, Copy)]
struct Window {
    started: Instant,
    measure_from: Instant,
    until: Instant,
}

impl Window {
    fn measuring(&self, now: Instant) -> bool {
        now >= self.measure_from && now < self.until
    }
    fn ms(&self, now: Instant) -> f64 {
        (now - self.started).as_secs_f64() * 1_000.0
    }
}

struct PhaseResult {
    seconds: f64,
    cpu_percent: Option<f64>,
    bytes_per_client_s: f64,
    connected: u64,
    snapshots: u64,
}

/// Runs the scenario.
pub async fn run<C: Connector>(ctx: &mut Ctx<C>, s: &ActorSync) -> anyhow::Result<Report> {
    let url = ctx.server.url.clone();
    let sources = Arc::new(Sources::new(s.source_addresses));
    let moving = Arc::new(Shared::default());
    ctx.progress.update(&format!(
        "[actor-sync] {} clients in rooms of {}",
        s.clients, s.room_size
    ));
    let load = phase(ctx, s, &url, &sources, &moving, s.clients, "actors", true).await?;
    let ages = moving.ages.snapshot();
    let arrivals = moving.arrivals.snapshot();
    let idle_shared = Arc::new(Shared::default());
    let idle = if s.idle_seconds > 0.0 {
        ctx.progress.update(&format!(
            "[actor-sync] idle: one room of {} still actors",
            s.room_size
        ));
        Some(
            phase(
                ctx,
                s,
                &url,
                &sources,
                &idle_shared,
                s.room_size,
                "idle",
                false,
            )
            .await?,
        )
    } else {
        None
    };

    let (p50, p99) = (ages.quantile_ms(0.5), ages.quantile_ms(0.99));
    let mut table = Table::new(&[
        "clients",
        "room size",
        "state Hz",
        "server CPU %",
        "bytes/client/s",
        "age p50 ms",
        "age p99 ms",
        "arrival p50 ms",
        "arrival p99 ms",
        "idle bytes/client/s",
    ]);
    let cpu = |p: &PhaseResult| p.cpu_percent.map_or("-".into(), fmt_value);
    table.rows.push(vec![
        load.connected.to_string(),
        s.room_size.to_string(),
        fmt_value(s.state_hz),
        cpu(&load),
        fmt_value(load.bytes_per_client_s),
        fmt_value(p50),
        fmt_value(p99),
        fmt_value(arrivals.quantile_ms(0.5)),
        fmt_value(arrivals.quantile_ms(0.99)),
        idle.as_ref()
            .map_or("-".into(), |i| fmt_value(i.bytes_per_client_s)),
    ]);
    let mut r = Report::empty("actor-sync", table);
    r.metric("clients_connected", load.connected as f64, "conn", true);
    r.metric(
        "snapshots_received",
        load.snapshots as f64,
        "snapshots",
        true,
    );
    r.metric("bytes_per_client_s", load.bytes_per_client_s, "B/s", false);
    r.metric("position_age_p50", p50, "ms", false);
    r.metric("position_age_p99", p99, "ms", false);
    r.metric("arrival_age_p50", arrivals.quantile_ms(0.5), "ms", false);
    r.metric("arrival_age_p99", arrivals.quantile_ms(0.99), "ms", false);
    if let Some(cpu) = load.cpu_percent {
        r.metric("server_cpu", cpu, "% of a core", false);
    }
    if let Some(idle) = &idle {
        r.metric(
            "idle_bytes_per_client_s",
            idle.bytes_per_client_s,
            "B/s",
            false,
        );
        if let Some(cpu) = idle.cpu_percent {
            r.metric("idle_server_cpu", cpu, "% of a core", false);
        }
    }
    r.notes.push(format!(
        "{:.1} s measured after {:.1} s of warm-up; ages are sampled every {} ms from each \
         bot's newest snapshot",
        load.seconds,
        s.warmup_seconds,
        SAMPLE_EVERY.as_millis()
    ));
    r.notes.push(if p99 <= s.p99_bound_ms {
        format!(
            "p99 position age {p99:.1} ms is within the {} ms bound",
            s.p99_bound_ms
        )
    } else {
        format!(
            "p99 position age {p99:.1} ms EXCEEDS the {} ms bound",
            s.p99_bound_ms
        )
    });
    if load.connected < u64::from(s.clients) {
        r.notes.push(format!(
            "only {} of {} bots connected",
            load.connected, s.clients
        ));
    }
    Ok(r)
}

/// One phase: connect `clients` bots (rooms of `room_size`, named
/// `<prefix>-<n>`), warm up, measure, stop.
#[allow(clippy::too_many_arguments)]
async fn phase<C: Connector>(
    ctx: &mut Ctx<C>,
    s: &ActorSync,
    url: &str,
    sources: &Arc<Sources>,
    shared: &Arc<Shared>,
    clients: u32,
    prefix: &str,
    moving: bool,
) -> anyhow::Result<PhaseResult> {
    let addr = addr_of_url(url)?;
    let started = Instant::now();
    let measure_from = started + Duration::from_secs_f64(s.warmup_seconds);
    let measure = Duration::from_secs_f64(if moving {
        s.measure_seconds
    } else {
        s.idle_seconds
    });
    let window = Window {
        started,
        measure_from,
        until: measure_from + measure,
    };
    let period = Duration::from_secs_f64(1.0 / s.state_hz);
    let gate = Arc::new(tokio::sync::Semaphore::new(s.connect_concurrency as usize));
    let mut tasks = Vec::new();
    for i in 0..clients {
        let room = format!("{prefix}-{}", i / s.room_size);
        let (url, sources, shared, gate) = (
            url.to_owned(),
            sources.clone(),
            shared.clone(),
            gate.clone(),
        );
        tasks.push(tokio::spawn(async move {
            match guest_in_room(&gate, sources.next(), addr, &url, &room).await {
                Ok(client) => {
                    shared.connected.fetch_add(1, Ordering::Relaxed);
                    bot(client, window, period, moving, &shared).await
                }
                Err(e) => Err(e),
            }
        }));
    }
    tokio::time::sleep_until(measure_from.into()).await;
    let before = ctx.server.pid.and_then(procstat::sample);
    while Instant::now() < window.until {
        let left = window.until.saturating_duration_since(Instant::now());
        tokio::time::sleep(left.min(Duration::from_secs(1))).await;
        let secs = Instant::now()
            .saturating_duration_since(measure_from)
            .as_secs_f64()
            .max(1e-3);
        ctx.progress.update(&format!(
            "[actor-sync] {prefix}: {} B/client/s, position age p99 {:.1} ms",
            fmt_value(
                shared.bytes.load(Ordering::Relaxed) as f64 / secs / f64::from(clients.max(1))
            ),
            shared.ages.snapshot().quantile_ms(0.99)
        ));
    }
    let after = ctx.server.pid.and_then(procstat::sample);
    let connected = join_connected_bots(tasks, &shared.connected, "actor-sync").await?;
    Ok(PhaseResult {
        seconds: measure.as_secs_f64(),
        cpu_percent: match (before, after) {
            (Some(a), Some(b)) => Some(procstat::cpu_percent(&a, &b, ctx.ticks_per_second)),
            _ => None,
        },
        bytes_per_client_s: shared.bytes.load(Ordering::Relaxed) as f64
            / measure.as_secs_f64()
            / connected as f64,
        connected,
        snapshots: shared.snapshots.load(Ordering::Relaxed),
    })
}

/// One bot until `window.until`: opt in, announce, move (if `moving`),
/// acknowledge snapshots, measure.
async fn bot(
    mut client: WsClient,
    window: Window,
    period: Duration,
    moving: bool,
    shared: &Shared,
) -> anyhow::Result<()> {
    let mut view = ActorView::new();
    client.send(&actors::hello()).await?;
    let place = |ms: f64| NaTransform {
        position: [ms as f32, 0.0, 0.0],
        ..NaTransform::IDENTITY
    };
    let announce = view.announce(0, place(window.ms(Instant::now())));
    client.send(&announce).await?;
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut sample = tokio::time::interval(SAMPLE_EVERY);
    let ages_us = |view: &ActorView, now_ms: f64| -> Vec<u64> {
        let (Some(state), Some(me)) = (view.latest(), view.local_object()) else {
            return Vec::new();
        };
        state
            .iter()
            .filter(|(id, v)| **id != me && v.position[0] > 0.0)
            .map(|(_, v)| ((now_ms - f64::from(v.position[0])).max(0.0) * 1_000.0) as u64)
            .collect()
    };
    loop {
        tokio::select! {
            _ = tick.tick() => {
                if Instant::now() >= window.until {
                    break;
                }
                if moving && let Some(id) = view.local_object() {
                    client.send(&actors::state(id, place(window.ms(Instant::now())))).await?;
                }
            }
            _ = sample.tick() => {
                let now = Instant::now();
                if moving && window.measuring(now) {
                    for us in ages_us(&view, window.ms(now)) {
                        shared.ages.record(us);
                    }
                }
            }
            msg = client.recv() => {
                let Some(env) = msg? else {
                    anyhow::bail!("the server closed the connection");
                };
                let now = Instant::now();
                let measuring = window.measuring(now);
                if measuring {
                    shared.bytes.fetch_add(env.body.len() as u64 + 6, Ordering::Relaxed);
                }
                view.handle_envelope(&env);
                if env.kind == KIND_TSYNC_SNAPSHOT && measuring {
                    shared.snapshots.fetch_add(1, Ordering::Relaxed);
                    if moving && let Some(freshest) = ages_us(&view, window.ms(now)).into_iter().min() {
                        shared.arrivals.record(freshest);
                    }
                }
                if let Some(ack) = view.poll_ack() {
                    client.send(&ack).await?;
                }
            }
        }
    }
    tokio::time::timeout(Duration::from_secs(2), client.close())
        .await
        .context("close timed out")??;
    Ok(())
}
