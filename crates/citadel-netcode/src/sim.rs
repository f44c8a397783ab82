//! A deterministic lossy link for single-threaded simulations: one-way
//! latency with jitter, loss, duplication and reordering, driven by explicit
//! time (milliseconds) and a seeded generator. Used by the convergence tests
//! and available to embedders for demos.

use citadel_testkit::TestRng;

/// Link impairments.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkConfig {
    /// Base one-way delay (ms).
    pub latency_ms: f64,
    /// Uniform extra delay 0..jitter (ms); reorders packets.
    pub jitter_ms: f64,
    /// Drop probability (0..1).
    pub loss: f64,
    /// Duplicate probability (0..1).
    pub duplicate: f64,
}

/// A one-way link carrying byte packets.
#[derive(Debug, Clone)]
pub struct SimLink {
    config: LinkConfig,
    rng: TestRng,
    in_flight: Vec<(f64, u64, Vec<u8>)>,
    seq: u64,
    /// Packets offered.
    pub sent: u64,
    /// Packets dropped.
    pub dropped: u64,
}

impl SimLink {
    /// A link with a seed (same seed, same behaviour).
    pub fn new(config: LinkConfig, seed: u64) -> Self {
        SimLink {
            config,
            rng: TestRng::new(seed | 1),
            in_flight: Vec::new(),
            seq: 0,
            sent: 0,
            dropped: 0,
        }
    }

    fn next_f64(&mut self) -> f64 {
        self.rng.unit_f64()
    }

    /// Offers a packet at `now_ms`.
    pub fn send(&mut self, now_ms: f64, packet: Vec<u8>) {
        self.sent += 1;
        if self.next_f64() < self.config.loss {
            self.dropped += 1;
            return;
        }
        let copies = if self.next_f64() < self.config.duplicate {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let at = now_ms + self.config.latency_ms + self.next_f64() * self.config.jitter_ms;
            self.seq += 1;
            self.in_flight.push((at, self.seq, packet.clone()));
        }
    }

    /// Packets arriving by `now_ms`, in arrival order.
    pub fn poll(&mut self, now_ms: f64) -> Vec<Vec<u8>> {
        let mut due: Vec<(f64, u64, Vec<u8>)> = Vec::new();
        let mut keep = Vec::with_capacity(self.in_flight.len());
        for p in self.in_flight.drain(..) {
            if p.0 <= now_ms {
                due.push(p)
            } else {
                keep.push(p)
            }
        }
        self.in_flight = keep;
        due.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        due.into_iter().map(|p| p.2).collect()
    }
}
