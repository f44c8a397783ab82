//! `predicted-input`: owner prediction under load (Citadel only).
//!
//! What it is: `clients` WebSocket bots in rooms of `room_size`; the
//! spawned node runs with archetype [`ARCHETYPE`] predicted-authoritative,
//! so each bot's avatar gets a ROLE Assign and the bot drives it with
//! kind-9 input at `input_hz` through `ActorView::input` (every
//! unacknowledged frame, the newest snapshot acknowledged), moving on a
//! circle. Measured: server CPU, and per input sequence S the time from
//! sending S to receiving the first snapshot whose `last_input_seq` for
//! the bot's object is at least S (one sample per input; inputs covered by
//! a later ack share that arrival), plus the p99 correction magnitude.
//! What it is not: a fire or handoff test; rewind is not exercised.
//!
//! Call order: `run(ctx, scenario)` → `Report`.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use citadel_client::WsClient;
use citadel_client::actors::{self, ActorEvent, ActorView};
use citadel_client::wire::actor::NaTransform;

use super::{Ctx, Sources, guest_in_room, join_connected_bots};
use crate::procstat;
use crate::report::{Report, Table, fmt_value};
use crate::scenario::PredictedInput;
use crate::stats::Histogram;
use crate::targets::addr_of_url;
use crate::transport::Connector;

/// The archetype the spawned node predicts (see [`server_config`]).
pub const ARCHETYPE: u16 = 9;

/// The `[transform_sync]` lines the spawned node needs.
pub fn server_config() -> String {
    format!("[transform_sync]\npredicted_authoritative_archetypes = [{ARCHETYPE}]\n")
}

/// What the bots share.
#[derive(Default)]
struct Shared {
    connected: AtomicU64,
    assigned: AtomicU64,
    inputs: AtomicU64,
    /// Input sent → first snapshot acknowledging it, µs.
    latency: Histogram,
    /// Correction magnitudes, µm (cm × 10 000).
    corrections: Histogram,
}

/// Runs the scenario.
pub async fn run<C: Connector>(ctx: &mut Ctx<C>, s: &PredictedInput) -> anyhow::Result<Report> {
    let url = ctx.server.url.clone();
    let addr = addr_of_url(&url)?;
    let sources = Arc::new(Sources::new(s.source_addresses));
    let shared = Arc::new(Shared::default());
    ctx.progress.update(&format!(
        "[predicted-input] {} owners in rooms of {}, input {} Hz",
        s.clients, s.room_size, s.input_hz
    ));
    let started = Instant::now();
    let measure_from = started + Duration::from_secs_f64(s.warmup_seconds);
    let until = measure_from + Duration::from_secs_f64(s.measure_seconds);
    let period = Duration::from_secs_f64(1.0 / s.input_hz);
    let gate = Arc::new(tokio::sync::Semaphore::new(s.connect_concurrency as usize));
    let mut tasks = Vec::new();
    for i in 0..s.clients {
        let room = format!("predicted-{}", i / s.room_size);
        let (url, sources, shared, gate) =
            (url.clone(), sources.clone(), shared.clone(), gate.clone());
        tasks.push(tokio::spawn(async move {
            match guest_in_room(&gate, sources.next(), addr, &url, &room).await {
                Ok(client) => {
                    shared.connected.fetch_add(1, Ordering::Relaxed);
                    let spin = (i as f32) * 0.37;
                    bot(client, (measure_from, until), period, spin, &shared).await
                }
                Err(e) => Err(e),
            }
        }));
    }
    tokio::time::sleep_until(measure_from.into()).await;
    let before = ctx.server.pid.and_then(procstat::sample);
    while Instant::now() < until {
        let left = until.saturating_duration_since(Instant::now());
        tokio::time::sleep(left.min(Duration::from_secs(1))).await;
        ctx.progress.update(&format!(
            "[predicted-input] {} assigned, input → snapshot p99 {:.1} ms",
            shared.assigned.load(Ordering::Relaxed),
            shared.latency.snapshot().quantile_ms(0.99)
        ));
    }
    let after = ctx.server.pid.and_then(procstat::sample);
    join_connected_bots(tasks, &shared.connected, "predicted-input").await?;
    let cpu = match (before, after) {
        (Some(a), Some(b)) => Some(procstat::cpu_percent(&a, &b, ctx.ticks_per_second)),
        _ => None,
    };
    let latency = shared.latency.snapshot();
    let corrections = shared.corrections.snapshot();
    let (p50, p99) = (latency.quantile_ms(0.5), latency.quantile_ms(0.99));
    // Histogram values are µm here: quantile_ms (value / 1 000) is in mm.
    let correction_p99_cm = corrections.quantile_ms(0.99) / 10.0;
    let assigned = shared.assigned.load(Ordering::Relaxed);
    let inputs = shared.inputs.load(Ordering::Relaxed);
    let mut table = Table::new(&[
        "owners",
        "room size",
        "input Hz",
        "server CPU %",
        "inputs/s",
        "input→snapshot p50 ms",
        "input→snapshot p99 ms",
        "correction p99 cm",
    ]);
    table.rows.push(vec![
        assigned.to_string(),
        s.room_size.to_string(),
        fmt_value(s.input_hz),
        cpu.map_or("-".into(), fmt_value),
        fmt_value(inputs as f64 / s.measure_seconds),
        fmt_value(p50),
        fmt_value(p99),
        fmt_value(correction_p99_cm),
    ]);
    let mut r = Report::empty("predicted-input", table);
    r.metric("owners_assigned", assigned as f64, "owners", true);
    r.metric("inputs_acknowledged", latency.count as f64, "inputs", true);
    r.metric("input_to_snapshot_p50", p50, "ms", false);
    r.metric("input_to_snapshot_p99", p99, "ms", false);
    r.metric("correction_p99", correction_p99_cm, "cm", false);
    if let Some(cpu) = cpu {
        r.metric("server_cpu", cpu, "% of a core", false);
    }
    r.notes.push(format!(
        "{:.1} s measured after {:.1} s of warm-up; one latency sample per input sent \
         while measuring",
        s.measure_seconds, s.warmup_seconds
    ));
    r.notes.push(if p99 <= s.p99_bound_ms {
        format!(
            "p99 input → snapshot {p99:.1} ms is within the {} ms bound",
            s.p99_bound_ms
        )
    } else {
        format!(
            "p99 input → snapshot {p99:.1} ms EXCEEDS the {} ms bound",
            s.p99_bound_ms
        )
    });
    if assigned < u64::from(s.clients) {
        r.notes.push(format!(
            "only {assigned} of {} bots got their ROLE Assign",
            s.clients
        ));
    }
    Ok(r)
}

/// One bot until `until`: opt in, announce a predicted avatar, send one
/// input per period once assigned, acknowledge snapshots, time each input
/// from send to the first snapshot acknowledging it.
async fn bot(
    mut client: WsClient,
    (measure_from, until): (Instant, Instant),
    period: Duration,
    spin: f32,
    shared: &Shared,
) -> anyhow::Result<()> {
    let mut view = ActorView::new();
    client.send(&actors::hello()).await?;
    client
        .send(&view.announce(ARCHETYPE, NaTransform::IDENTITY))
        .await?;
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let dt = period.as_secs_f32();
    // (input_seq, sent at) of inputs not yet acknowledged, oldest first.
    let mut in_flight: VecDeque<(u32, Instant)> = VecDeque::new();
    let mut next_seq = 0u32;
    let mut steps = 0u32;
    let mut assigned = false;
    loop {
        tokio::select! {
            _ = tick.tick() => {
                let now = Instant::now();
                if now >= until {
                    break;
                }
                let Some(avatar) = view.local_object().filter(|id| view.is_predicted(*id)) else {
                    continue;
                };
                if !assigned {
                    assigned = true;
                    shared.assigned.fetch_add(1, Ordering::Relaxed);
                }
                steps += 1;
                let angle = spin + steps as f32 * dt;
                let velocity = [300.0 * angle.cos(), 300.0 * angle.sin(), 0.0];
                if let Some(input) = view.input(avatar, dt, velocity, None) {
                    next_seq += 1;
                    client.send(&input).await?;
                    if now >= measure_from {
                        in_flight.push_back((next_seq, now));
                        shared.inputs.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            msg = client.recv() => {
                let Some(env) = msg? else {
                    anyhow::bail!("the server closed the connection");
                };
                let now = Instant::now();
                for event in view.handle_envelope(&env) {
                    if let ActorEvent::Corrected(c) = event {
                        while let Some(&(seq, sent)) = in_flight.front() {
                            if seq > c.input_seq {
                                break;
                            }
                            in_flight.pop_front();
                            shared.latency.record((now - sent).as_micros() as u64);
                        }
                        if now >= measure_from && now < until {
                            shared.corrections.record((c.magnitude * 10_000.0).max(0.0) as u64);
                        }
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
