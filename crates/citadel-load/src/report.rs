//! The run report: a summary table on stdout and the same data as JSON.
//!
//! What it is: [`Report`] (scenario, target, machine, server command,
//! headline metrics, a per-step table, notes), [`Report::print`] and
//! [`Report::write_json`]. Headline metrics carry a unit and whether higher
//! is better, so `citadel-load compare` can compute ratios across targets
//! without knowing the scenario. What it is not: the measurement itself.
//!
//! Call order: a scenario runner fills a `Report` → `print` → `write_json`.

use std::path::Path;

use anyhow::Context;
use serde::{Deserialize, Serialize};

/// One headline figure.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Metric {
    /// Stable name, e.g. `best_deliveries_per_s`.
    pub name: String,
    /// The value.
    pub value: f64,
    /// Unit for humans, e.g. `msg/s`, `ms`, `KiB`.
    pub unit: String,
    /// Whether a larger value is better (for ratios).
    pub higher_is_better: bool,
}

/// A table of strings with a header row.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Table {
    /// Column names.
    pub headers: Vec<String>,
    /// Rows, same width as `headers`.
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column names.
    pub fn new(headers: &[&str]) -> Self {
        Table {
            headers: headers.iter().map(|h| (*h).to_owned()).collect(),
            rows: Vec::new(),
        }
    }

    /// Renders with right-aligned columns.
    pub fn render(&self) -> String {
        let cols = self.headers.len();
        let mut width: Vec<usize> = self.headers.iter().map(String::len).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate().take(cols) {
                width[i] = width[i].max(cell.len());
            }
        }
        let line = |cells: &[String]| -> String {
            cells
                .iter()
                .enumerate()
                .take(cols)
                .map(|(i, c)| format!("{c:>w$}", w = width[i]))
                .collect::<Vec<_>>()
                .join("  ")
        };
        let mut out = line(&self.headers);
        out.push('\n');
        out.push_str(
            &width
                .iter()
                .map(|w| "-".repeat(*w))
                .collect::<Vec<_>>()
                .join("  "),
        );
        for row in &self.rows {
            out.push('\n');
            out.push_str(&line(row));
        }
        out
    }
}

/// The machine the run happened on.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Machine {
    /// Logical CPUs visible.
    pub cpus: usize,
    /// CPU model from /proc/cpuinfo.
    pub cpu_model: String,
    /// Kernel release.
    pub kernel: String,
    /// Total memory in MiB.
    pub memory_mib: u64,
}

impl Machine {
    /// Reads /proc; unknown fields stay empty.
    pub fn detect() -> Self {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split(':').nth(1))
            .map(|s| s.trim().to_owned())
            .unwrap_or_default();
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_owned())
            .unwrap_or_default();
        let memory_mib = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| {
                m.lines()
                    .find(|l| l.starts_with("MemTotal:"))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|v| v.parse::<u64>().ok())
            })
            .map_or(0, |kib| kib / 1024);
        Machine {
            // all CPUs of the machine, not this process' taskset affinity
            cpus: cpuinfo
                .lines()
                .filter(|l| l.starts_with("processor"))
                .count(),
            cpu_model,
            kernel,
            memory_mib,
        }
    }
}

/// Everything a run produced.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    /// Scenario kind.
    pub scenario: String,
    /// Scenario file as given.
    pub scenario_file: String,
    /// Target name.
    pub target: String,
    /// How the server was started (or attached).
    pub server_command: String,
    /// Where it ran.
    pub machine: Machine,
    /// Seconds since the Unix epoch at the start.
    pub started_unix: u64,
    /// Wall time of the run in seconds.
    pub elapsed_seconds: f64,
    /// Headline figures.
    pub headline: Vec<Metric>,
    /// Per-step detail.
    pub steps: Table,
    /// Caveats and verdicts, in plain words.
    pub notes: Vec<String>,
}

impl Report {
    /// A report for `scenario` with this step table; `main` fills in the
    /// target, machine, server command and timing.
    pub fn empty(scenario: &str, steps: Table) -> Self {
        Report {
            scenario: scenario.to_owned(),
            scenario_file: String::new(),
            target: String::new(),
            server_command: String::new(),
            machine: Machine::detect(),
            started_unix: 0,
            elapsed_seconds: 0.0,
            headline: Vec::new(),
            steps,
            notes: Vec::new(),
        }
    }

    /// Adds a headline metric.
    pub fn metric(&mut self, name: &str, value: f64, unit: &str, higher_is_better: bool) {
        self.headline.push(Metric {
            name: name.to_owned(),
            value,
            unit: unit.to_owned(),
            higher_is_better,
        });
    }

    /// The value of a headline metric.
    pub fn get(&self, name: &str) -> Option<f64> {
        self.headline
            .iter()
            .find(|m| m.name == name)
            .map(|m| m.value)
    }

    /// The smoke verdict (`--check`): an error unless the run did what its
    /// scenario exists to do (something delivered, every connection held,
    /// every handshake done). Says nothing about performance targets.
    pub fn check(&self) -> anyhow::Result<()> {
        let get = |n: &str| self.get(n).unwrap_or(0.0);
        let ok = match self.scenario.as_str() {
            "relay-fanout" => get("delivered_in_windows") > 0.0,
            "idle-capacity" => get("connections") > 0.0 && get("held_at_end") == get("connections"),
            "rpc-echo" => get("round_trips_per_s") > 0.0,
            "handshake-storm" => get("handshakes_per_s") > 0.0 && get("failed") == 0.0,
            "actor-sync" => get("snapshots_received") > 0.0 && get("position_age_p99") > 0.0,
            "predicted-input" => get("owners_assigned") > 0.0 && get("inputs_acknowledged") > 0.0,
            _ => false,
        };
        if ok {
            Ok(())
        } else {
            anyhow::bail!(
                "check failed for {} against {}: {}",
                self.scenario,
                self.target,
                self.notes.join("; ")
            )
        }
    }

    /// The human-readable summary.
    pub fn render(&self) -> String {
        let mut out = format!(
            "== citadel-load {} against {} ({:.1} s)\nserver: {}\nmachine: {} CPUs, {}, {} MiB, Linux {}\n\n",
            self.scenario,
            self.target,
            self.elapsed_seconds,
            self.server_command,
            self.machine.cpus,
            self.machine.cpu_model,
            self.machine.memory_mib,
            self.machine.kernel
        );
        if !self.steps.rows.is_empty() {
            out.push_str(&self.steps.render());
            out.push_str("\n\n");
        }
        let mut t = Table::new(&["metric", "value", "unit"]);
        for m in &self.headline {
            t.rows
                .push(vec![m.name.clone(), fmt_value(m.value), m.unit.clone()]);
        }
        out.push_str(&t.render());
        out.push('\n');
        for n in &self.notes {
            out.push_str(&format!("note: {n}\n"));
        }
        out
    }

    /// Writes the JSON form to `path`.
    pub fn write_json(&self, path: &Path) -> anyhow::Result<()> {
        let text = serde_json::to_string_pretty(self)?;
        std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
    }

    /// Reads a JSON report.
    pub fn read_json(path: &Path) -> anyhow::Result<Report> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        serde_json::from_str(&text).with_context(|| format!("{} is not a report", path.display()))
    }
}

/// Formats a figure: integers for large values, 2-3 significant decimals
/// for small ones.
pub fn fmt_value(v: f64) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    let a = v.abs();
    if a >= 1000.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_renders_aligned() {
        let mut t = Table::new(&["a", "bbb"]);
        t.rows.push(vec!["1234".into(), "5".into()]);
        let r = t.render();
        assert_eq!(r, "   a  bbb\n----  ---\n1234    5");
        assert_eq!(fmt_value(12345.6), "12346");
        assert_eq!(fmt_value(1.234), "1.23");
        assert_eq!(fmt_value(f64::NAN), "-");
    }
}
