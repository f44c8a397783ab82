//! Server CPU time and resident memory read from `/proc/<pid>` (Linux only).
//!
//! What it is: [`sample`] reads user+system CPU ticks from `/proc/<pid>/stat`
//! and `VmRSS` from `/proc/<pid>/status`; [`cpu_percent`] turns two samples
//! into a percentage of one core. What it is not: a profiler, and it covers
//! only the one process (not children). Unreadable files yield `None`, never
//! a panic (the process may have exited, or the target is remote).
//!
//! Call order: [`clock_ticks_per_second`] once, then [`sample`] at the start
//! and end of a window and [`cpu_percent`] on the pair.

use std::time::Instant;

/// One reading of a process.
#[derive(Debug, Clone, Copy)]
pub struct ProcSample {
    /// When it was taken.
    pub at: Instant,
    /// utime + stime, in clock ticks.
    pub cpu_ticks: u64,
    /// Resident set size in bytes.
    pub rss_bytes: u64,
}

/// `getconf CLK_TCK`, or the Linux default of 100 if that fails.
pub fn clock_ticks_per_second() -> u64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .filter(|t: &u64| *t > 0)
        .unwrap_or(100)
}

/// Reads `/proc/<pid>`; `None` if the process is gone or the files are odd.
pub fn sample(pid: u32) -> Option<ProcSample> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    Some(ProcSample {
        at: Instant::now(),
        cpu_ticks: parse_cpu_ticks(&stat)?,
        rss_bytes: parse_rss_bytes(&status)?,
    })
}

/// utime + stime from a `/proc/<pid>/stat` line (fields 14 and 15; the
/// command name in parentheses may itself contain spaces or parentheses).
fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    let after = stat.get(stat.rfind(')')? + 1..)?;
    let fields: Vec<&str> = after.split_whitespace().collect();
    // after ')' the first field is field 3 (state): utime is 14 → index 11.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// `VmRSS` in bytes from `/proc/<pid>/status`.
fn parse_rss_bytes(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// CPU used between two samples, in percent of one core.
pub fn cpu_percent(a: &ProcSample, b: &ProcSample, ticks_per_second: u64) -> f64 {
    let secs = b.at.duration_since(a.at).as_secs_f64();
    if secs <= 0.0 || ticks_per_second == 0 {
        return 0.0;
    }
    let ticks = b.cpu_ticks.saturating_sub(a.cpu_ticks) as f64;
    100.0 * ticks / ticks_per_second as f64 / secs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_odd_command_names() {
        let stat = "42 (we (ird) name) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1 0";
        assert_eq!(parse_cpu_ticks(stat), Some(300));
        assert_eq!(parse_cpu_ticks("garbage"), None);
        assert_eq!(
            parse_rss_bytes("Name:\tx\nVmRSS:\t  1024 kB\n"),
            Some(1024 * 1024)
        );
        assert_eq!(parse_rss_bytes("Name:\tx\n"), None);
    }

    #[test]
    fn samples_this_process() {
        let s = sample(std::process::id());
        assert!(s.is_some_and(|s| s.rss_bytes > 0));
        assert!(sample(u32::MAX).is_none());
    }
}
