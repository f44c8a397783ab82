//! `relay-fanout`: N clients in rooms of K, each relaying a position of
//! `payload_bytes` at R Hz; N ramps through the scenario's client counts.
//!
//! What it is: per step, connect the new bots (guest auth, join room
//! `fanout-<index / K>`), let everyone send for `warmup_seconds`, then
//! measure a window of `measure_seconds`: sends in the window times (K-1)
//! are the expected deliveries, payloads whose send time (carried in the
//! payload) lies in the window and arrive before the window closes
//! (`grace_seconds` after its end) are delivered, with one-way latency
//! `receive time - send time` on the shared process clock. A step passes if
//! p99 ≤ `p99_bound_ms` and drops/expected ≤ `max_drop_ratio` with no bot
//! lost; the headline is the best passing deliveries/s. A step whose bots
//! sent under 95 % of the offered rate is flagged: the load generator, not
//! the server, was the limit. Because a shared machine adds scheduling delay
//! to every latency, the report also gives two noise-robust figures:
//! deliveries per second of server CPU (at the largest clean step: no drops,
//! no lost bots, generator not saturated) and the latency at the first step
//! (same offered load for every target). What it is not: a reliability test (positions
//! ride the unreliable lane; drops are the server shedding load).
//!
//! Bots are lean by default (`lean`: their own RFC 6455 client, one send
//! wheel for all); `--bots tungstenite` runs the classic loop of one task
//! and one timer per bot over `BotTransport`.
//!
//! Call order: `run(ctx, scenario)` → `Report`.

mod lean;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::{Ctx, Sources, connect_each, connect_many, decode_payload, encode_payload};
use crate::procstat;
use crate::report::{Report, Table, fmt_value};
use crate::scenario::RelayFanout;
use crate::stats::{Clock, Histogram, Latency, Window};
use crate::transport::{BotTransport, Connector, Inbound};

/// Counters shared by every bot.
#[derive(Debug, Default)]
struct Shared {
    window: Window,
    hist: Histogram,
    sent_in_window: AtomicU64,
    expected: AtomicU64,
    received_in_window: AtomicU64,
    sent_total: AtomicU64,
    received_total: AtomicU64,
    lost_bots: AtomicU64,
}

/// The bots of a run: classic tasks or the lean engine.
#[derive(Default)]
struct Fleet {
    classic: Vec<JoinHandle<()>>,
    lean: Option<lean::Engine>,
}

impl Fleet {
    fn len(&self) -> u32 {
        self.classic.len() as u32 + self.lean.as_ref().map_or(0, lean::Engine::len)
    }
}

/// One step's result.
#[derive(Debug, Clone)]
struct Step {
    clients: u32,
    sends_per_s: f64,
    offered_per_s: f64,
    deliveries_per_s: f64,
    expected: u64,
    delivered: u64,
    latency: Latency,
    server_cpu: Option<f64>,
    server_rss_mib: Option<f64>,
    load_cpu: Option<f64>,
    lost_bots: u64,
    pass: bool,
    loadgen_limited: bool,
}

/// Above this share of its core the generator is flagged in the report: its
/// own scheduling starts to show in the latencies it measures.
const GENERATOR_FLAG_PERCENT: f64 = 75.0;
/// Above this share a step is never a headline: the figures would describe
/// the generator rather than the server.
const GENERATOR_HEADLINE_PERCENT: f64 = 85.0;

impl Step {
    fn drops(&self) -> u64 {
        self.expected.saturating_sub(self.delivered)
    }

    /// µs of `cpu_percent` (of one core) spent per delivery.
    fn us_per_delivery(&self, cpu_percent: Option<f64>) -> Option<f64> {
        let cpu = cpu_percent?;
        (self.deliveries_per_s > 0.0).then(|| cpu * 10_000.0 / self.deliveries_per_s)
    }

    /// Whether the generator's CPU disqualifies the step from the headline
    /// (unknown CPU does not: the tool then cannot tell).
    fn generator_too_busy(&self) -> bool {
        self.load_cpu
            .is_some_and(|c| c > GENERATOR_HEADLINE_PERCENT)
    }
}

/// Runs the ramp.
pub async fn run<C: Connector>(ctx: &mut Ctx<C>, s: &RelayFanout) -> anyhow::Result<Report> {
    let shared = Arc::new(Shared::default());
    let (stop_tx, stop_rx) = watch::channel(false);
    let sources = Sources::new(s.source_addresses);
    let period = Duration::from_secs_f64(1.0 / s.rate_hz);
    let mut bots = Fleet::default();
    let mut steps: Vec<Step> = Vec::new();
    let mut connect_seconds = 0.0;
    let mut notes = Vec::new();
    let result = ramp(
        ctx,
        s,
        &shared,
        &stop_rx,
        &sources,
        period,
        &mut bots,
        &mut steps,
        &mut connect_seconds,
        &mut notes,
    )
    .await;
    let _ = stop_tx.send(true);
    for b in bots.classic {
        // bounded: every bot closes with a 2 s timeout
        if tokio::time::timeout(Duration::from_secs(5), b)
            .await
            .is_err()
        {
            notes.push("some bots did not close within 5 s".into());
        }
    }
    if let Some(engine) = bots.lean
        && !engine.stop().await
    {
        notes.push("some lean bots did not close within 5 s".into());
    }
    notes.push(if ctx.lean {
        "lean bots: one RFC 6455 client per bot, a 4 KiB read buffer each, one send wheel".into()
    } else {
        "classic bots: one task and one timer per bot over the connector's BotTransport \
         (tungstenite with --bots tungstenite, QuicClient with --transport quic)"
            .into()
    });
    if let Err(e) = result {
        if steps.is_empty() {
            return Err(e);
        }
        notes.push(format!("ramp stopped early: {e:#}"));
    }
    Ok(report(s, &steps, connect_seconds, notes))
}

#[allow(clippy::too_many_arguments)]
async fn ramp<C: Connector>(
    ctx: &mut Ctx<C>,
    s: &RelayFanout,
    shared: &Arc<Shared>,
    stop_rx: &watch::Receiver<bool>,
    sources: &Sources,
    period: Duration,
    bots: &mut Fleet,
    steps: &mut Vec<Step>,
    connect_seconds: &mut f64,
    notes: &mut Vec<String>,
) -> anyhow::Result<()> {
    let room_size = s.room_size;
    let peers = u64::from(room_size - 1);
    let self_pid = std::process::id();
    for (step_index, &n) in s.clients.iter().enumerate() {
        let have = bots.len();
        ctx.progress.update(&format!(
            "[relay-fanout] step {}/{}: connecting {} -> {n} clients",
            step_index + 1,
            s.clients.len(),
            have
        ));
        let t0 = Instant::now();
        if ctx.lean {
            let connector = ctx.connector.clone();
            let auth = ctx.auth.clone();
            let seed = run_seed();
            let dialed = connect_each(
                sources,
                have,
                n - have,
                s.connect_concurrency,
                move |i, source| {
                    let connector = connector.clone();
                    let auth = auth.clone();
                    async move {
                        let room = format!("fanout-{}", i / room_size);
                        let bot_seed = seed ^ u64::from(i).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                        connector
                            .connect_lean(source, &auth, &room, bot_seed)
                            .await
                            .unwrap_or_else(|| {
                                Err(anyhow::anyhow!(
                                    "this target has no lean bots: use --bots tungstenite"
                                ))
                            })
                            .map(|d| (i, d))
                    }
                },
            )
            .await?;
            *connect_seconds += t0.elapsed().as_secs_f64();
            let dialect = dialed.first().map(|(_, d)| d.dialect);
            if let Some(dialect) = dialect {
                bots.lean
                    .get_or_insert_with(|| {
                        lean::Engine::start(
                            shared.clone(),
                            ctx.clock,
                            period,
                            s.payload_bytes,
                            peers,
                            dialect,
                        )
                    })
                    .add(dialed);
            }
        } else {
            let joined = connect_many(
                ctx,
                sources,
                have,
                n - have,
                s.connect_concurrency,
                move |i, mut t: C::Transport| async move {
                    t.join_room(&format!("fanout-{}", i / room_size)).await?;
                    Ok(t)
                },
            )
            .await?;
            *connect_seconds += t0.elapsed().as_secs_f64();
            for (k, t) in joined.into_iter().enumerate() {
                let idx = have + k as u32;
                bots.classic.push(tokio::spawn(bot(
                    t,
                    idx,
                    peers,
                    shared.clone(),
                    ctx.clock,
                    period,
                    s.payload_bytes,
                    stop_rx.clone(),
                )));
            }
        }
        if let Some(why) = ctx.server.exited() {
            anyhow::bail!("{why}");
        }
        tokio::time::sleep(Duration::from_secs_f64(s.warmup_seconds)).await;

        // measurement window
        shared.hist.reset();
        for c in [
            &shared.sent_in_window,
            &shared.expected,
            &shared.received_in_window,
            &shared.lost_bots,
        ] {
            c.store(0, Ordering::SeqCst);
        }
        let before = ctx.server.pid.and_then(procstat::sample);
        let me_before = procstat::sample(self_pid);
        let start_ns = ctx.clock.now_ns();
        let measure = Duration::from_secs_f64(s.measure_seconds);
        let end_ns = start_ns + measure.as_nanos() as u64;
        shared.window.open(start_ns, end_ns);
        let started = Instant::now();
        while started.elapsed() < measure {
            let left = measure.saturating_sub(started.elapsed());
            tokio::time::sleep(left.min(Duration::from_secs(1))).await;
            let secs = started.elapsed().as_secs_f64().max(1e-3);
            ctx.progress.update(&format!(
                "[relay-fanout] step {}/{}: {n} clients, {:.0} sends/s, {:.0} deliveries/s, p99 {:.1} ms",
                step_index + 1,
                s.clients.len(),
                shared.sent_in_window.load(Ordering::Relaxed) as f64 / secs,
                shared.received_in_window.load(Ordering::Relaxed) as f64 / secs,
                shared.hist.snapshot().quantile_ms(0.99),
            ));
        }
        let after = ctx.server.pid.and_then(procstat::sample);
        let me_after = procstat::sample(self_pid);
        tokio::time::sleep(Duration::from_secs_f64(s.grace_seconds)).await;
        shared.window.close();
        let snap = shared.hist.snapshot();
        let secs = measure.as_secs_f64();
        let sent = shared.sent_in_window.load(Ordering::SeqCst);
        let mut step = Step {
            clients: n,
            sends_per_s: sent as f64 / secs,
            offered_per_s: f64::from(n) * s.rate_hz,
            deliveries_per_s: snap.count as f64 / secs,
            expected: shared.expected.load(Ordering::SeqCst),
            delivered: shared.received_in_window.load(Ordering::SeqCst),
            latency: Latency::from(&snap),
            server_cpu: cpu(before, after, ctx.ticks_per_second),
            server_rss_mib: after.map(|a| a.rss_bytes as f64 / 1_048_576.0),
            load_cpu: cpu(me_before, me_after, ctx.ticks_per_second),
            lost_bots: shared.lost_bots.load(Ordering::SeqCst),
            pass: false,
            loadgen_limited: false,
        };
        let drop_ratio = if step.expected == 0 {
            0.0
        } else {
            step.drops() as f64 / step.expected as f64
        };
        step.loadgen_limited = step.sends_per_s < 0.95 * step.offered_per_s;
        step.pass = step.latency.p99_ms <= s.p99_bound_ms
            && drop_ratio <= s.max_drop_ratio
            && step.lost_bots == 0
            && step.delivered > 0
            && !step.loadgen_limited;
        ctx.progress.note(&format!(
            "[relay-fanout] {n} clients: {} deliveries/s, p99 {:.1} ms, drops {} ({:.3}%), {}",
            fmt_value(step.deliveries_per_s),
            step.latency.p99_ms,
            step.drops(),
            drop_ratio * 100.0,
            verdict(&step)
        ));
        let pass = step.pass;
        if step.loadgen_limited {
            notes.push(format!(
                "at {n} clients the bots sent {:.0}/s of {:.0}/s offered: the load generator \
                 (not the server) was saturated; later steps would measure the generator",
                step.sends_per_s, step.offered_per_s
            ));
        }
        let overloaded =
            step.loadgen_limited || step.lost_bots > 0 || drop_ratio > s.max_drop_ratio;
        steps.push(step);
        if !pass && (s.stop_on_failure || overloaded) {
            break;
        }
    }
    Ok(())
}

/// A seed that differs between runs (WebSocket keys and masks).
fn run_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    nanos ^ (u64::from(std::process::id()) << 32)
}

fn verdict(step: &Step) -> &'static str {
    if step.pass {
        "pass"
    } else if step.loadgen_limited {
        "load generator saturated"
    } else if step.lost_bots > 0 {
        "bots lost"
    } else {
        "fail"
    }
}

/// The verdict column, with the generator flag when it was above
/// [`GENERATOR_FLAG_PERCENT`].
fn flagged_verdict(step: &Step) -> String {
    match step.load_cpu {
        Some(c) if c > GENERATOR_FLAG_PERCENT => format!("{} (generator {c:.0} %)", verdict(step)),
        _ => verdict(step).to_owned(),
    }
}

fn cpu(a: Option<procstat::ProcSample>, b: Option<procstat::ProcSample>, tps: u64) -> Option<f64> {
    Some(procstat::cpu_percent(&a?, &b?, tps))
}

#[allow(clippy::too_many_arguments)]
async fn bot<T: BotTransport>(
    mut t: T,
    idx: u32,
    peers: u64,
    sh: Arc<Shared>,
    clock: Clock,
    period: Duration,
    payload_bytes: usize,
    mut stop: watch::Receiver<bool>,
) {
    let mut buf = vec![0u8; payload_bytes];
    // spread send phases evenly (golden-ratio sequence)
    let phase = (f64::from(idx) * 0.618_033_988_75).fract();
    let start = tokio::time::Instant::now() + period.mul_f64(phase);
    let mut tick = tokio::time::interval_at(start, period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut seq = 0u32;
    loop {
        tokio::select! {
            biased;
            _ = stop.changed() => break,
            _ = tick.tick() => {
                let now = clock.now_ns();
                encode_payload(&mut buf, now, idx, seq);
                seq = seq.wrapping_add(1);
                if sh.window.contains(now) {
                    sh.sent_in_window.fetch_add(1, Ordering::Relaxed);
                    sh.expected.fetch_add(peers, Ordering::Relaxed);
                }
                sh.sent_total.fetch_add(1, Ordering::Relaxed);
                if t.send_relay(&buf).await.is_err() {
                    sh.lost_bots.fetch_add(1, Ordering::Relaxed);
                    return;
                }
            }
            r = t.recv() => match r {
                Ok(Some(Inbound::Relay(p))) => {
                    if let Some((sent_ns, _, _)) = decode_payload(&p) {
                        sh.received_total.fetch_add(1, Ordering::Relaxed);
                        if sh.window.contains(sent_ns) {
                            let now = clock.now_ns();
                            sh.received_in_window.fetch_add(1, Ordering::Relaxed);
                            sh.hist.record(now.saturating_sub(sent_ns) / 1_000);
                        }
                    }
                }
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => {
                    sh.lost_bots.fetch_add(1, Ordering::Relaxed);
                    return;
                }
            }
        }
    }
    t.close().await;
}

fn report(s: &RelayFanout, steps: &[Step], connect_seconds: f64, mut notes: Vec<String>) -> Report {
    let mut table = Table::new(&[
        "clients",
        "sends/s",
        "deliveries/s",
        "p50 ms",
        "p95 ms",
        "p99 ms",
        "max ms",
        "drops",
        "srv cpu%",
        "srv µs/dlv",
        "srv RSS MiB",
        "load cpu%",
        "load µs/dlv",
        "verdict",
    ]);
    let opt = |v: Option<f64>| v.map_or("-".to_owned(), fmt_value);
    for st in steps {
        table.rows.push(vec![
            st.clients.to_string(),
            fmt_value(st.sends_per_s),
            fmt_value(st.deliveries_per_s),
            fmt_value(st.latency.p50_ms),
            fmt_value(st.latency.p95_ms),
            fmt_value(st.latency.p99_ms),
            fmt_value(st.latency.max_ms),
            st.drops().to_string(),
            opt(st.server_cpu),
            opt(st.us_per_delivery(st.server_cpu)),
            opt(st.server_rss_mib),
            opt(st.load_cpu),
            opt(st.us_per_delivery(st.load_cpu)),
            flagged_verdict(st),
        ]);
    }
    let busy: Vec<String> = steps
        .iter()
        .filter_map(|st| {
            let c = st.load_cpu.filter(|c| *c > GENERATOR_FLAG_PERCENT)?;
            Some(format!("{} clients ({c:.0} %)", st.clients))
        })
        .collect();
    if !busy.is_empty() {
        notes.push(format!(
            "the generator was above {GENERATOR_FLAG_PERCENT:.0} % of its core at {}; \
             steps above {GENERATOR_HEADLINE_PERCENT:.0} % are not headlines",
            busy.join(", ")
        ));
    }
    let best = steps
        .iter()
        .filter(|st| st.pass && !st.generator_too_busy())
        .max_by(|a, b| a.deliveries_per_s.total_cmp(&b.deliveries_per_s));
    let mut r = Report::empty("relay-fanout", table);
    let delivered: u64 = steps.iter().map(|st| st.delivered).sum();
    r.metric("delivered_in_windows", delivered as f64, "msgs", true);
    match best {
        Some(b) => {
            r.metric("best_deliveries_per_s", b.deliveries_per_s, "msg/s", true);
            r.metric("best_clients", f64::from(b.clients), "clients", true);
            r.metric("p50_at_best", b.latency.p50_ms, "ms", false);
            r.metric("p99_at_best", b.latency.p99_ms, "ms", false);
            if let Some(c) = b.server_cpu {
                r.metric("server_cpu_at_best", c, "% of a core", false);
            }
        }
        None => {
            r.metric("best_deliveries_per_s", 0.0, "msg/s", true);
            notes.push(format!(
                "no step passed with the generator at or below {GENERATOR_HEADLINE_PERCENT:.0} % \
                 (p99 <= {} ms, drop ratio <= {})",
                s.p99_bound_ms, s.max_drop_ratio
            ));
        }
    }
    // Noise-robust figures: CPU cost does not depend on how long the server
    // waited for a core on a shared machine, latency at the first step is at
    // the same offered load for every target.
    let clean = steps
        .iter()
        .filter(|st| {
            !st.loadgen_limited && !st.generator_too_busy() && st.lost_bots == 0 && st.drops() == 0
        })
        .max_by_key(|st| st.clients);
    if let Some(c) = clean
        && let Some(cpu) = c.server_cpu.filter(|c| *c > 0.0)
    {
        r.metric(
            "deliveries_per_server_core_s",
            c.deliveries_per_s / (cpu / 100.0),
            "msg/s per core",
            true,
        );
        r.metric("clean_step_clients", f64::from(c.clients), "clients", true);
        if let Some(us) = c.us_per_delivery(c.server_cpu) {
            r.metric("server_us_per_delivery", us, "µs", false);
        }
        if let Some(us) = c.us_per_delivery(c.load_cpu) {
            r.metric("generator_us_per_delivery", us, "µs", false);
        }
    }
    if let Some(first) = steps.first() {
        r.metric("p50_first_step", first.latency.p50_ms, "ms", false);
        r.metric("p99_first_step", first.latency.p99_ms, "ms", false);
        if let Some(cpu) = first.server_cpu {
            r.metric("server_cpu_first_step", cpu, "% of a core", false);
        }
    }
    let total: u32 = steps.last().map_or(0, |s| s.clients);
    if connect_seconds > 0.0 {
        r.metric(
            "connect_join_per_s",
            f64::from(total) / connect_seconds,
            "conn/s",
            true,
        );
    }
    if steps.last().is_some_and(|st| st.pass) && steps.len() == s.clients.len() {
        notes.push(
            "every step passed: the ceiling is above the largest client count; add larger counts"
                .into(),
        );
    }
    notes.push(format!(
        "rooms of {}, {} Hz, {}-byte payloads, window {} s per step, p99 bound {} ms",
        s.room_size, s.rate_hz, s.payload_bytes, s.measure_seconds, s.p99_bound_ms
    ));
    r.notes = notes;
    r
}
