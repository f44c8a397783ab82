//! `rpc-echo`: pipelined RPC round trips.
//!
//! What it is: `clients` connections each keep `pipeline` requests of
//! `payload_bytes` to `method` in flight; every reply (success or error
//! status) is a round trip, counted separately as ok / error, with its
//! latency. A request unanswered for 5 s is counted as lost and replaced.
//! Against Citadel, `echo` comes from `game/main.lua`; a server without the
//! method answers every call with the "unknown RPC method" error, which
//! still crosses the RPC path (decode, route, reply) and is reported apart.
//! What it is not: a test of what the handler computes.
//!
//! Call order: `run(ctx, scenario)` → `Report`.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::{Ctx, Sources, connect_many};
use crate::procstat;
use crate::report::{Report, Table, fmt_value};
use crate::scenario::RpcEcho;
use crate::stats::{Clock, Histogram, Latency, Window};
use crate::transport::{BotTransport, Connector, Inbound};

/// How long a request may stay unanswered before it counts as lost.
const LOST_AFTER: Duration = Duration::from_secs(5);

#[derive(Debug, Default)]
struct Shared {
    window: Window,
    hist: Histogram,
    ok: AtomicU64,
    err: AtomicU64,
    lost: AtomicU64,
    dead: AtomicU64,
}

/// Runs the scenario.
pub async fn run<C: Connector>(ctx: &mut Ctx<C>, s: &RpcEcho) -> anyhow::Result<Report> {
    let sources = Sources::new(s.source_addresses);
    ctx.progress
        .update(&format!("[rpc-echo] connecting {} clients", s.clients));
    let bots = connect_many(ctx, &sources, 0, s.clients, 64, |_, t| async move { Ok(t) }).await?;
    let shared = Arc::new(Shared::default());
    let (stop_tx, stop_rx) = watch::channel(false);
    let payload = vec![0x5au8; s.payload_bytes];
    let mut tasks = Vec::new();
    for t in bots {
        tasks.push(tokio::spawn(bot(
            t,
            shared.clone(),
            ctx.clock,
            s.pipeline,
            s.method.clone(),
            payload.clone(),
            stop_rx.clone(),
        )));
    }
    tokio::time::sleep(Duration::from_secs_f64(s.warmup_seconds)).await;
    for c in [&shared.ok, &shared.err, &shared.lost] {
        c.store(0, Ordering::SeqCst);
    }
    shared.hist.reset();
    let before = ctx.server.pid.and_then(procstat::sample);
    let measure = Duration::from_secs_f64(s.measure_seconds);
    let start_ns = ctx.clock.now_ns();
    shared
        .window
        .open(start_ns, start_ns + measure.as_nanos() as u64);
    let started = Instant::now();
    while started.elapsed() < measure {
        tokio::time::sleep(
            measure
                .saturating_sub(started.elapsed())
                .min(Duration::from_secs(1)),
        )
        .await;
        let secs = started.elapsed().as_secs_f64().max(1e-3);
        let n = shared.ok.load(Ordering::Relaxed) + shared.err.load(Ordering::Relaxed);
        ctx.progress.update(&format!(
            "[rpc-echo] {} round trips/s, p99 {:.2} ms",
            fmt_value(n as f64 / secs),
            shared.hist.snapshot().quantile_ms(0.99)
        ));
    }
    let after = ctx.server.pid.and_then(procstat::sample);
    let elapsed = started.elapsed().as_secs_f64();
    shared.window.close();
    let snap = shared.hist.snapshot();
    let ok = shared.ok.load(Ordering::SeqCst);
    let err = shared.err.load(Ordering::SeqCst);
    let lost = shared.lost.load(Ordering::SeqCst);
    let _ = stop_tx.send(true);
    for t in tasks {
        let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
    }
    let lat = Latency::from(&snap);
    let mut table = Table::new(&[
        "clients",
        "pipeline",
        "ok",
        "error replies",
        "lost",
        "round trips/s",
        "p50 ms",
        "p99 ms",
        "max ms",
    ]);
    table.rows.push(vec![
        s.clients.to_string(),
        s.pipeline.to_string(),
        ok.to_string(),
        err.to_string(),
        lost.to_string(),
        fmt_value((ok + err) as f64 / elapsed),
        fmt_value(lat.p50_ms),
        fmt_value(lat.p99_ms),
        fmt_value(lat.max_ms),
    ]);
    let mut r = Report::empty("rpc-echo", table);
    r.metric(
        "round_trips_per_s",
        (ok + err) as f64 / elapsed,
        "rt/s",
        true,
    );
    r.metric("ok_replies_per_s", ok as f64 / elapsed, "rt/s", true);
    r.metric("p50", lat.p50_ms, "ms", false);
    r.metric("p99", lat.p99_ms, "ms", false);
    if let (Some(a), Some(b)) = (before, after) {
        r.metric(
            "server_cpu",
            procstat::cpu_percent(&a, &b, ctx.ticks_per_second),
            "% of a core",
            false,
        );
    }
    if err > 0 {
        r.notes.push(format!(
            "{err} of {} replies were ERROR replies: the server does not register {:?} \
             (for Citadel it comes from game/main.lua: run the tool from the repository \
             root). They are counted as round trips because each one crossed the full RPC \
             path (decode, route, reply).",
            ok + err,
            s.method
        ));
    }
    if lost > 0 {
        r.notes.push(format!(
            "{lost} requests got no reply within {LOST_AFTER:?}"
        ));
    }
    let dead = shared.dead.load(Ordering::SeqCst);
    if dead > 0 {
        r.notes
            .push(format!("{dead} connections ended during the run"));
    }
    Ok(r)
}

async fn bot<T: BotTransport>(
    mut t: T,
    sh: Arc<Shared>,
    clock: Clock,
    pipeline: u32,
    method: String,
    payload: Vec<u8>,
    mut stop: watch::Receiver<bool>,
) {
    let mut in_flight: HashMap<u64, u64> = HashMap::new();
    let mut next_id = 1u64;
    let mut sweep = tokio::time::interval(Duration::from_secs(1));
    loop {
        while in_flight.len() < pipeline as usize {
            let id = next_id;
            next_id += 1;
            in_flight.insert(id, clock.now_ns());
            if t.send_rpc(id, &method, &payload).await.is_err() {
                sh.dead.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
        tokio::select! {
            biased;
            _ = stop.changed() => break,
            _ = sweep.tick() => {
                let now = clock.now_ns();
                let before = in_flight.len();
                in_flight.retain(|_, sent| now.saturating_sub(*sent) < LOST_AFTER.as_nanos() as u64);
                sh.lost.fetch_add((before - in_flight.len()) as u64, Ordering::Relaxed);
            }
            r = t.recv() => match r {
                Ok(Some(Inbound::RpcReply { id, ok })) => {
                    if let Some(sent) = in_flight.remove(&id)
                        && sh.window.contains(sent)
                    {
                        sh.hist.record(clock.now_ns().saturating_sub(sent) / 1_000);
                        if ok {
                            sh.ok.fetch_add(1, Ordering::Relaxed);
                        } else {
                            sh.err.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => {
                    sh.dead.fetch_add(1, Ordering::Relaxed);
                    return;
                }
            }
        }
    }
    t.close().await;
}
