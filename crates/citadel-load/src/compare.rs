//! `citadel-load compare`: one table from the JSON reports of the same
//! scenario run against Citadel, Colyseus and the raw relay.
//!
//! What it is: for every headline metric of the Citadel report, its value
//! on each target and the ratios Citadel/Colyseus and Citadel/raw (a ratio
//! above 1 means "Citadel is better" only for higher-is-better metrics; the
//! table says which). For relay-fanout it also checks the targets
//! (≥ 3× Colyseus, ≥ 60 % of raw deliveries/s). What it is not: a runner —
//! `bench/compare.sh` runs the three targets and then calls this.
//!
//! Call order: `render(citadel, colyseus, raw)` → print.

use crate::report::{Report, Table, fmt_value};

/// The comparison table (missing reports show as `-`).
pub fn render(citadel: &Report, colyseus: Option<&Report>, raw: Option<&Report>) -> String {
    let mut t = Table::new(&[
        "metric",
        "unit",
        "citadel",
        "colyseus",
        "raw",
        "citadel/colyseus",
        "citadel/raw",
        "better",
    ]);
    let val = |r: Option<&Report>, name: &str| r.and_then(|r| r.get(name));
    let ratio = |a: f64, b: Option<f64>| match b {
        Some(b) if b != 0.0 => format!("{:.2}x", a / b),
        _ => "-".to_owned(),
    };
    for m in &citadel.headline {
        let c = val(colyseus, &m.name);
        let r = val(raw, &m.name);
        t.rows.push(vec![
            m.name.clone(),
            m.unit.clone(),
            fmt_value(m.value),
            c.map_or("-".into(), fmt_value),
            r.map_or("-".into(), fmt_value),
            ratio(m.value, c),
            ratio(m.value, r),
            if m.higher_is_better {
                "higher"
            } else {
                "lower"
            }
            .into(),
        ]);
    }
    let mut out = format!(
        "== {} side by side ({} CPUs, {})\n",
        citadel.scenario, citadel.machine.cpus, citadel.machine.cpu_model
    );
    for r in [Some(citadel), colyseus, raw].into_iter().flatten() {
        out.push_str(&format!("{:>9}: {}\n", r.target, r.server_command));
    }
    out.push('\n');
    out.push_str(&t.render());
    out.push('\n');
    if citadel.scenario == "relay-fanout" {
        let best = citadel.get("best_deliveries_per_s").unwrap_or(0.0);
        if let Some(c) = val(colyseus, "best_deliveries_per_s").filter(|c| *c > 0.0) {
            out.push_str(&format!(
                "target Citadel >= 3x Colyseus deliveries/s: {:.2}x -> {}\n",
                best / c,
                if best >= 3.0 * c { "met" } else { "MISSED" }
            ));
        }
        if let Some(r) = val(raw, "best_deliveries_per_s").filter(|r| *r > 0.0) {
            out.push_str(&format!(
                "target Citadel >= 60% of raw deliveries/s: {:.0}% -> {}\n",
                100.0 * best / r,
                if best >= 0.6 * r { "met" } else { "MISSED" }
            ));
        }
    }
    for r in [Some(citadel), colyseus, raw].into_iter().flatten() {
        out.push_str(&format!("\n-- {} steps\n{}\n", r.target, r.steps.render()));
        for n in &r.notes {
            out.push_str(&format!("note ({}): {n}\n", r.target));
        }
    }
    out
}
