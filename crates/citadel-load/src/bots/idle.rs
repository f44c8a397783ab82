//! `idle-capacity`: ramp to N authenticated idle connections and report the
//! server's resident memory per connection.
//!
//! What it is: `steps` batches of connections (guest auth; Colyseus bots
//! join rooms `idle-<index / 64>` because its connections exist only in a
//! room), spread over 127.0.0.1..N source addresses; after each batch and
//! `settle_seconds`, the server's VmRSS is sampled; the per-connection
//! figure is `(RSS - RSS before any connection) / connections`. Every
//! connection has a task that only answers pings and notices closes, so a
//! connection the server drops is counted, not silently ignored. What it is
//! not: a churn test (see handshake-storm).
//!
//! Call order: `run(ctx, scenario)` → `Report`. Needs `ulimit -n` above the
//! connection count (checked by `main`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::{Ctx, Sources, connect_many};
use crate::procstat;
use crate::report::{Report, Table, fmt_value};
use crate::scenario::IdleCapacity;
use crate::transport::{BotTransport, Connector};

/// Runs the ramp.
pub async fn run<C: Connector>(ctx: &mut Ctx<C>, s: &IdleCapacity) -> anyhow::Result<Report> {
    let pid = ctx.server.pid;
    let settle = Duration::from_secs_f64(s.settle_seconds);
    tokio::time::sleep(settle).await;
    let base = pid.and_then(procstat::sample).map(|p| p.rss_bytes);
    let sources = Sources::new(s.source_addresses);
    let (stop_tx, stop_rx) = watch::channel(false);
    let closed = Arc::new(AtomicU64::new(0));
    let first_close = Arc::new(std::sync::Mutex::new(None::<String>));
    let mut tasks = Vec::new();
    let mut table = Table::new(&[
        "connections",
        "connect/s",
        "srv RSS MiB",
        "RSS/conn KiB",
        "closed by server",
    ]);
    let mut connect_secs = 0.0;
    let mut last_per_conn = None;
    let mut last_rss = None;
    let mut notes = Vec::new();
    let mut have = 0u32;
    let join_needed = !ctx.connector.connects_before_join();
    let mut failure = None;
    for step in 1..=s.steps {
        let target = ((u64::from(s.connections) * u64::from(step)) / u64::from(s.steps)) as u32;
        if target <= have {
            continue;
        }
        ctx.progress.update(&format!(
            "[idle-capacity] connecting {have} -> {target} (step {step}/{})",
            s.steps
        ));
        let t0 = Instant::now();
        let batch = connect_many(
            ctx,
            &sources,
            have,
            target - have,
            s.connect_concurrency,
            move |i, mut t: C::Transport| async move {
                if join_needed {
                    t.join_room(&format!("idle-{}", i / 64)).await?;
                }
                Ok(t)
            },
        )
        .await;
        let batch_secs = t0.elapsed().as_secs_f64();
        let batch = match batch {
            Ok(b) => b,
            Err(e) => {
                failure = Some(e);
                break;
            }
        };
        connect_secs += batch_secs;
        for mut t in batch {
            let mut stop = stop_rx.clone();
            let closed = closed.clone();
            let first_close = first_close.clone();
            tasks.push(tokio::spawn(async move {
                loop {
                    tokio::select! {
                        _ = stop.changed() => break,
                        r = t.recv() => match r {
                            Ok(Some(_)) => {}
                            other => {
                                closed.fetch_add(1, Ordering::Relaxed);
                                let why = match other {
                                    Err(e) => format!("{e:#}"),
                                    _ => "connection ended without a close frame".to_owned(),
                                };
                                if let Ok(mut slot) = first_close.lock() {
                                    slot.get_or_insert(why);
                                }
                                return;
                            }
                        }
                    }
                }
                t.close().await;
            }));
        }
        let rate = f64::from(target - have) / batch_secs.max(1e-6);
        have = target;
        tokio::time::sleep(settle).await;
        let rss = pid.and_then(procstat::sample).map(|p| p.rss_bytes);
        let per_conn = match (rss, base) {
            (Some(r), Some(b)) => Some(r.saturating_sub(b) as f64 / f64::from(have) / 1024.0),
            _ => None,
        };
        last_per_conn = per_conn;
        last_rss = rss;
        table.rows.push(vec![
            have.to_string(),
            fmt_value(rate),
            rss.map_or("-".into(), |r| fmt_value(r as f64 / 1_048_576.0)),
            per_conn.map_or("-".into(), fmt_value),
            closed.load(Ordering::Relaxed).to_string(),
        ]);
        ctx.progress.note(&format!(
            "[idle-capacity] {have} connections: server RSS {} MiB, {} KiB per connection",
            rss.map_or("-".into(), |r| fmt_value(r as f64 / 1_048_576.0)),
            per_conn.map_or("-".into(), fmt_value)
        ));
    }
    if failure.is_none() && s.hold_seconds > 0.0 {
        ctx.progress.update(&format!(
            "[idle-capacity] holding {have} connections for {} s",
            s.hold_seconds
        ));
        tokio::time::sleep(Duration::from_secs_f64(s.hold_seconds)).await;
    }
    let lost = closed.load(Ordering::Relaxed);
    let _ = stop_tx.send(true);
    ctx.progress.update("[idle-capacity] closing");
    for t in tasks {
        let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
    }
    let mut r = Report::empty("idle-capacity", table);
    r.metric("connections", f64::from(have), "conn", true);
    r.metric("held_at_end", f64::from(have) - lost as f64, "conn", true);
    if let Some(b) = base {
        r.metric("server_rss_baseline", b as f64 / 1_048_576.0, "MiB", false);
    }
    if let Some(rss) = last_rss {
        r.metric("server_rss", rss as f64 / 1_048_576.0, "MiB", false);
    }
    if let Some(p) = last_per_conn {
        r.metric("rss_per_connection", p, "KiB", false);
    }
    if connect_secs > 0.0 {
        r.metric(
            "connect_auth_per_s",
            f64::from(have) / connect_secs,
            "conn/s",
            true,
        );
    }
    if pid.is_none() {
        notes.push("no server pid: RSS not measured (pass --server-pid when attaching)".into());
    }
    if let Some(e) = failure {
        notes.push(format!("ramp stopped at {have} connections: {e:#}"));
    }
    if lost > 0 {
        notes.push(format!(
            "{lost} connections were closed by the server during the run"
        ));
    }
    r.notes = notes;
    Ok(r)
}
