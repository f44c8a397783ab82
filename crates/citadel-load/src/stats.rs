//! Lock-free counters and a log-linear latency histogram shared by every bot.
//!
//! What it is: [`Histogram`] records microsecond values into 1,184 atomic
//! buckets (exact below 64 µs, then 32 sub-buckets per power of two, so a
//! percentile is within about 3 % of the true value); [`Window`] says whether
//! a send time belongs to the measurement window; [`Snapshot`] is a frozen
//! copy with percentiles. What it is not: a time series (one window at a
//! time) or a coordinated-omission corrector (latency is measured from the
//! actual send time carried in the payload).
//!
//! Call order: the controller calls [`Histogram::reset`], then
//! [`Window::open`]; bots call [`Window::contains`] and
//! [`Histogram::record`]; after [`Window::close`] the controller takes
//! [`Histogram::snapshot`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Number of buckets: 64 exact ones plus 35 octaves of 32.
const BUCKETS: usize = 64 + 35 * 32;

/// Process-wide monotonic clock shared by every bot (one-way latency needs
/// sender and receiver on the same clock: they are in the same process).
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    epoch: Instant,
}

impl Clock {
    /// A clock whose zero is now.
    pub fn new() -> Self {
        Clock {
            epoch: Instant::now(),
        }
    }

    /// Nanoseconds since the clock's zero (saturating, never 0 after start).
    pub fn now_ns(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos())
            .unwrap_or(u64::MAX)
            .max(1)
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

/// Half-open interval `[start, end)` in clock nanoseconds; empty when closed.
#[derive(Debug, Default)]
pub struct Window {
    start: AtomicU64,
    end: AtomicU64,
}

impl Window {
    /// Opens the window `[start_ns, end_ns)`.
    pub fn open(&self, start_ns: u64, end_ns: u64) {
        self.end.store(0, Ordering::SeqCst);
        self.start.store(start_ns, Ordering::SeqCst);
        self.end.store(end_ns, Ordering::SeqCst);
    }

    /// Closes the window: nothing is inside any more.
    pub fn close(&self) {
        self.end.store(0, Ordering::SeqCst);
        self.start.store(0, Ordering::SeqCst);
    }

    /// Whether `t_ns` lies inside the window.
    pub fn contains(&self, t_ns: u64) -> bool {
        let end = self.end.load(Ordering::Relaxed);
        end != 0 && t_ns < end && t_ns >= self.start.load(Ordering::Relaxed)
    }
}

/// Concurrent latency histogram in microseconds.
#[derive(Debug)]
pub struct Histogram {
    buckets: Vec<AtomicU64>,
    count: AtomicU64,
    max: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

fn bucket_of(us: u64) -> usize {
    if us < 64 {
        return us as usize;
    }
    let exp = 63 - us.leading_zeros() as usize; // >= 6
    let mantissa = (us >> (exp - 5)) as usize; // 32..64
    (64 + (exp - 6) * 32 + (mantissa - 32)).min(BUCKETS - 1)
}

/// Upper bound (inclusive) of the values in bucket `index`.
fn bucket_high(index: usize) -> u64 {
    if index < 64 {
        return index as u64;
    }
    let exp = (index - 64) / 32 + 6;
    let mantissa = ((index - 64) % 32 + 32) as u64;
    ((mantissa + 1) << (exp - 5)) - 1
}

impl Histogram {
    /// An empty histogram.
    pub fn new() -> Self {
        Histogram {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            count: AtomicU64::new(0),
            max: AtomicU64::new(0),
        }
    }

    /// Records one value in microseconds.
    pub fn record(&self, us: u64) {
        if let Some(b) = self.buckets.get(bucket_of(us)) {
            b.fetch_add(1, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.max.fetch_max(us, Ordering::Relaxed);
    }

    /// Forgets every value.
    pub fn reset(&self) {
        for b in &self.buckets {
            b.store(0, Ordering::Relaxed);
        }
        self.count.store(0, Ordering::Relaxed);
        self.max.store(0, Ordering::Relaxed);
    }

    /// A frozen copy.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            buckets: self
                .buckets
                .iter()
                .map(|b| b.load(Ordering::Relaxed))
                .collect(),
            count: self.count.load(Ordering::Relaxed),
            max_us: self.max.load(Ordering::Relaxed),
        }
    }
}

/// A frozen histogram.
#[derive(Debug, Clone)]
pub struct Snapshot {
    buckets: Vec<u64>,
    /// Values recorded.
    pub count: u64,
    /// Largest value recorded, microseconds.
    pub max_us: u64,
}

impl Snapshot {
    /// The `q`-quantile (0..=1) in milliseconds, `0.0` when empty. Reported
    /// as the upper bound of its bucket (never under-reports), capped at max.
    pub fn quantile_ms(&self, q: f64) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0u64;
        for (i, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return bucket_high(i).min(self.max_us) as f64 / 1000.0;
            }
        }
        self.max_us as f64 / 1000.0
    }

    /// Maximum in milliseconds.
    pub fn max_ms(&self) -> f64 {
        self.max_us as f64 / 1000.0
    }
}

/// The four latency figures every report carries, in milliseconds.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct Latency {
    /// Median.
    pub p50_ms: f64,
    /// 95th percentile.
    pub p95_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Maximum.
    pub max_ms: f64,
}

impl From<&Snapshot> for Latency {
    fn from(s: &Snapshot) -> Self {
        Latency {
            p50_ms: s.quantile_ms(0.50),
            p95_ms: s.quantile_ms(0.95),
            p99_ms: s.quantile_ms(0.99),
            max_ms: s.max_ms(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_monotonic_and_bounded() {
        let mut last = 0;
        for us in [0u64, 1, 63, 64, 65, 100, 1_000, 50_000, 1 << 30, u64::MAX] {
            let b = bucket_of(us);
            assert!(b >= last && b < BUCKETS);
            assert!(bucket_high(b) >= us.min(bucket_high(BUCKETS - 1)));
            last = b;
        }
    }

    #[test]
    fn quantiles_are_within_three_percent() {
        let h = Histogram::new();
        for us in 1..=10_000u64 {
            h.record(us);
        }
        let s = h.snapshot();
        let p50 = s.quantile_ms(0.5) * 1000.0;
        let p99 = s.quantile_ms(0.99) * 1000.0;
        assert!((p50 - 5_000.0).abs() / 5_000.0 < 0.04, "{p50}");
        assert!((p99 - 9_900.0).abs() / 9_900.0 < 0.04, "{p99}");
        assert_eq!(s.max_ms(), 10.0);
        h.reset();
        assert_eq!(h.snapshot().quantile_ms(0.99), 0.0);
    }

    #[test]
    fn window_contains_only_inside() {
        let w = Window::default();
        assert!(!w.contains(5));
        w.open(10, 20);
        assert!(w.contains(10) && w.contains(19));
        assert!(!w.contains(9) && !w.contains(20));
        w.close();
        assert!(!w.contains(15));
    }
}
