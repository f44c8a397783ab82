//! Configuration of the authority: the per-connection proposal limits of
//! §6.3 (token buckets holding one second of rate, refilled continuously
//! from explicit time), the replication caps of §6.2, the ack timeout, the
//! per-tick pacing of full bunches and the interest grid. Every value has a default and is validated.
//!
//! What it is not: the node's TOML layer (it maps its keys onto
//! [`AuthorityConfig`] and calls [`AuthorityConfig::validate`]).

/// Per-connection limits on inbound proposals.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Bunches per second (bucket capacity = one second).
    pub bunches_per_sec: u32,
    /// Bytes per second, inbound and the rebroadcast budget.
    pub bytes_per_sec: u32,
    /// Changed fields per second.
    pub fields_per_sec: u32,
    /// Collection items per second (reserved: clients cannot propose
    /// collections, so nothing charges it yet).
    pub collection_items_per_sec: u32,
    /// Largest kind-13 body.
    pub max_bunch_bytes: u32,
    /// Most changed fields in one bunch.
    pub max_fields_per_bunch: u32,
    /// Default per-field cooldown between accepted proposals (ms).
    pub cooldown_ms: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            bunches_per_sec: 240,
            bytes_per_sec: 262_144,
            fields_per_sec: 2_048,
            collection_items_per_sec: 4_096,
            max_bunch_bytes: 65_536,
            max_fields_per_bunch: 1_024,
            cooldown_ms: 0,
        }
    }
}

/// Interest grid parameters (world units).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InterestConfig {
    /// Cell edge; non-finite or ≤ 0 becomes 1.
    pub cell_size: f32,
    /// Enter radius (3-D).
    pub inner: f32,
    /// Exit radius (3-D); swapped with `inner` if smaller.
    pub outer: f32,
}

impl Default for InterestConfig {
    fn default() -> Self {
        InterestConfig {
            cell_size: 100.0,
            inner: 100.0,
            outer: 125.0,
        }
    }
}

/// Everything the authority is configured with.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AuthorityConfig {
    /// Reuse one values section among receivers with the same plan (§6.5).
    pub shared_quantized_state: bool,
    /// Unacked states per (object, receiver) before a full bunch is forced.
    pub pending_cap: usize,
    /// Collection operations in one delta before a full bunch is forced.
    pub collection_cap: usize,
    /// Age of the oldest unacked send after which the pair re-baselines
    /// with a full bunch (ms).
    pub ack_timeout_ms: u64,
    /// Most full bunches one receiver is sent per tick (bootstrap,
    /// relevance entry and every re-baseline); the rest wait for later
    /// ticks, nearest first.
    pub bootstrap_per_tick: usize,
    /// Interest grid.
    pub interest: InterestConfig,
    /// Per-connection proposal limits.
    pub limits: Limits,
}

impl Default for AuthorityConfig {
    fn default() -> Self {
        AuthorityConfig {
            shared_quantized_state: false,
            pending_cap: 64,
            collection_cap: 4_096,
            ack_timeout_ms: 1_000,
            bootstrap_per_tick: 256,
            interest: InterestConfig::default(),
            limits: Limits::default(),
        }
    }
}

impl AuthorityConfig {
    /// Checks every value; the error names the offending key.
    pub fn validate(&self) -> Result<(), &'static str> {
        let l = &self.limits;
        let checks: [(bool, &'static str); 13] = [
            ((1..=4_096).contains(&self.pending_cap), "pending_cap"),
            (
                (1..=65_536).contains(&self.collection_cap),
                "collection_cap",
            ),
            (
                (1..=600_000).contains(&self.ack_timeout_ms),
                "ack_timeout_ms",
            ),
            (
                (1..=65_536).contains(&self.bootstrap_per_tick),
                "bootstrap_per_tick",
            ),
            (
                self.interest.cell_size.is_finite() && self.interest.cell_size > 0.0,
                "interest_cell_size",
            ),
            (
                self.interest.inner.is_finite() && self.interest.inner >= 0.0,
                "interest_inner",
            ),
            (
                self.interest.outer.is_finite() && self.interest.outer >= 0.0,
                "interest_outer",
            ),
            (l.bunches_per_sec >= 1, "max_bunches_per_sec"),
            (l.bytes_per_sec >= 1, "max_bytes_per_sec"),
            (l.fields_per_sec >= 1, "max_fields_per_sec"),
            (
                (1..=1_048_576).contains(&l.max_bunch_bytes),
                "max_bunch_bytes",
            ),
            (
                (1..=65_536).contains(&l.max_fields_per_bunch),
                "max_fields_per_bunch",
            ),
            (l.cooldown_ms <= 3_600_000, "field_cooldown_ms"),
        ];
        match checks.iter().find(|(ok, _)| !ok) {
            Some((_, key)) => Err(key),
            None => Ok(()),
        }
    }
}

/// A token bucket with capacity = one second of `rate`, refilled
/// continuously; starts full.
#[derive(Debug, Clone, Copy)]
pub struct Bucket {
    rate: f64,
    tokens: f64,
    at_ms: u64,
}

impl Bucket {
    /// A full bucket at `now_ms`.
    pub fn new(rate: u32, now_ms: u64) -> Self {
        Bucket {
            rate: f64::from(rate),
            tokens: f64::from(rate),
            at_ms: now_ms,
        }
    }

    fn refill(&mut self, now_ms: u64) {
        let dt = now_ms.saturating_sub(self.at_ms) as f64 / 1000.0;
        self.tokens = (self.tokens + dt * self.rate).min(self.rate);
        self.at_ms = self.at_ms.max(now_ms);
    }

    /// Takes `n` tokens if available.
    pub fn take(&mut self, n: u64, now_ms: u64) -> bool {
        self.refill(now_ms);
        if self.tokens >= n as f64 {
            self.tokens -= n as f64;
            true
        } else {
            false
        }
    }
}
