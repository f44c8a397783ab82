//! `handshake-storm`: connect, authenticate, disconnect, as fast as
//! possible.
//!
//! What it is: `workers` loops, each repeating TCP connect + WebSocket
//! upgrade + guest handshake (plus a room join when `join_room` is set or
//! the target, like Colyseus, has connections only inside rooms) and a
//! graceful close, until `duration_seconds` pass or `max_handshakes` were
//! attempted. Handshake latency is connect-start to handshake-done (the
//! close is not included). What it is not: an idle or relay test.
//!
//! Call order: `run(ctx, scenario)` → `Report`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::{CONNECT_TIMEOUT, Ctx, Sources};
use crate::procstat;
use crate::report::{Report, Table, fmt_value};
use crate::scenario::HandshakeStorm;
use crate::stats::{Histogram, Latency};
use crate::transport::{BotTransport, Connector};

/// Runs the scenario.
pub async fn run<C: Connector>(ctx: &mut Ctx<C>, s: &HandshakeStorm) -> anyhow::Result<Report> {
    let sources = Arc::new(Sources::new(s.source_addresses));
    let hist = Arc::new(Histogram::new());
    let attempts = Arc::new(AtomicU64::new(0));
    let ok = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let join = s.join_room || !ctx.connector.connects_before_join();
    let duration = Duration::from_secs_f64(s.duration_seconds);
    let started = Instant::now();
    let deadline = started + duration;
    let before = ctx.server.pid.and_then(procstat::sample);
    let mut tasks = Vec::new();
    let first_error = Arc::new(std::sync::Mutex::new(None::<String>));
    for w in 0..s.workers {
        let (connector, auth) = (ctx.connector.clone(), ctx.auth.clone());
        let (sources, hist, attempts, ok, failed) = (
            sources.clone(),
            hist.clone(),
            attempts.clone(),
            ok.clone(),
            failed.clone(),
        );
        let first_error = first_error.clone();
        let max = s.max_handshakes;
        tasks.push(tokio::spawn(async move {
            while Instant::now() < deadline && attempts.fetch_add(1, Ordering::Relaxed) < max {
                let t0 = Instant::now();
                let source = sources.next();
                let result = tokio::time::timeout(CONNECT_TIMEOUT, async {
                    let mut t = connector.connect(source, &auth).await?;
                    if join {
                        t.join_room(&format!("storm-{w}")).await?;
                    }
                    anyhow::Ok(t)
                })
                .await;
                match result {
                    Ok(Ok(t)) => {
                        hist.record(t0.elapsed().as_micros() as u64);
                        ok.fetch_add(1, Ordering::Relaxed);
                        t.close().await;
                    }
                    Ok(Err(e)) => {
                        failed.fetch_add(1, Ordering::Relaxed);
                        if let Ok(mut slot) = first_error.lock() {
                            slot.get_or_insert(format!("{e:#}"));
                        }
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                    Err(_) => {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }));
    }
    while Instant::now() < deadline && tasks.iter().any(|t| !t.is_finished()) {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let secs = started.elapsed().as_secs_f64().max(1e-3);
        ctx.progress.update(&format!(
            "[handshake-storm] {} handshakes/s, {} failed",
            fmt_value(ok.load(Ordering::Relaxed) as f64 / secs),
            failed.load(Ordering::Relaxed)
        ));
    }
    for t in tasks {
        let _ = tokio::time::timeout(CONNECT_TIMEOUT + Duration::from_secs(3), t).await;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let after = ctx.server.pid.and_then(procstat::sample);
    let snap = hist.snapshot();
    let lat = Latency::from(&snap);
    let okn = ok.load(Ordering::SeqCst);
    let failn = failed.load(Ordering::SeqCst);
    let mut table = Table::new(&[
        "workers",
        "handshakes",
        "failed",
        "handshakes/s",
        "p50 ms",
        "p99 ms",
        "max ms",
    ]);
    table.rows.push(vec![
        s.workers.to_string(),
        okn.to_string(),
        failn.to_string(),
        fmt_value(okn as f64 / elapsed),
        fmt_value(lat.p50_ms),
        fmt_value(lat.p99_ms),
        fmt_value(lat.max_ms),
    ]);
    let mut r = Report::empty("handshake-storm", table);
    r.metric("handshakes_per_s", okn as f64 / elapsed, "conn/s", true);
    r.metric("handshake_p50", lat.p50_ms, "ms", false);
    r.metric("handshake_p99", lat.p99_ms, "ms", false);
    r.metric("failed", failn as f64, "conn", false);
    if let (Some(a), Some(b)) = (before, after) {
        r.metric(
            "server_cpu",
            procstat::cpu_percent(&a, &b, ctx.ticks_per_second),
            "% of a core",
            false,
        );
    }
    if join {
        r.notes.push("each handshake also joined a room".into());
    }
    if let Ok(slot) = first_error.lock()
        && let Some(e) = slot.as_ref()
    {
        r.notes.push(format!("first failure: {e}"));
    }
    Ok(r)
}
