//! Lag-compensated hit validation (§3.8): per-object position history,
//! the shooter's lag profile, the rewind tick and the ray-vs-sphere test.
//!
//! What it is: [`History`] is a fixed-capacity ring of `(tick, position)`
//! samples of one hit-eligible object, written once per simulation tick;
//! [`History::position_at`] interpolates it linearly at a fractional tick,
//! clamped to the oldest and newest samples. [`LagProfile`] is what the
//! server measured for one connection (round-trip time, one-way delay and
//! the client's interpolation delay, in ticks); [`RewindParams::rewind_tick`]
//! turns it into the tick the shooter saw, clamped to `max_unlag` ticks in
//! the past. [`ray_sphere`] is the hit test with the documented edge
//! cases; [`resolve`] picks the nearest forward hit among the targets.
//!
//! What it is not: no clock (ticks are passed in), no ownership checks, no
//! wire encoding. The client's `sim_tick` and any other client timestamp
//! are never an input here: the rewind comes only from the server's own
//! tick and its measured lag profile.
//!
//! Call order: [`History::record`] for every hit-eligible object after each
//! simulation step; per fire command, [`RewindParams::rewind_tick`] from the
//! shooter's profile, then [`resolve`] over the histories.

use std::collections::VecDeque;

/// §3.1 "rewind max unlag" (ticks).
pub const DEFAULT_MAX_UNLAG: u32 = 60;
/// §3.1 "lag-comp RTT cutoff" (ms): lag compensation applies at or below it.
pub const DEFAULT_RTT_CUTOFF_MS: f32 = 220.0;
/// §3.1 "hit sphere radius" (cm).
pub const DEFAULT_HIT_RADIUS: f32 = 50.0;
/// The most history samples one object may keep (≈ 4 s at 255 Hz), so a
/// configuration cannot make rings grow without bound.
pub const MAX_HISTORY_TICKS: u32 = 1_024;

/// One connection's measured lag, all derived on the server.
///
/// `transit_ticks` is the spec's delay term of the rewind formula: how long
/// after a state left the server the input aimed at it arrives. A state
/// travels one way down, the shooter's input one way up, so a measured
/// connection contributes its whole round trip (the spec's "one-way delay"
/// would leave a shot half a round trip short: 50 cm at 500 cm/s and
/// 100 ms each way, the whole hit radius).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LagProfile {
    /// Smoothed round-trip time (ms); lag compensation applies only at or
    /// below the cutoff.
    pub rtt_ms: f32,
    /// Down and up transit of state and input (ticks, fractional).
    pub transit_ticks: f32,
    /// How far in the past the client renders others (ticks, fractional).
    pub interp_delay_ticks: f32,
}

impl LagProfile {
    /// The profile of a connection whose round trip measured `rtt_ms`: the
    /// round trip as transit, and the client runtime's steady
    /// interpolation delay (§4.2: 1.5 send intervals), both in ticks of
    /// `sim_hz`. A non-finite or negative round trip gives the zero
    /// profile.
    pub fn from_rtt(rtt_ms: f32, sim_hz: u8, send_hz: u8) -> LagProfile {
        if !rtt_ms.is_finite() || rtt_ms < 0.0 {
            return LagProfile::default();
        }
        let sim = f32::from(sim_hz.max(1));
        let send = f32::from(send_hz.max(1));
        LagProfile {
            rtt_ms,
            transit_ticks: rtt_ms * sim / 1_000.0,
            interp_delay_ticks: 1.5 * sim / send,
        }
    }
}

/// The §3.8 numbers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RewindParams {
    /// Furthest rewind into the past (ticks).
    pub max_unlag: u32,
    /// Lag compensation only for round trips at or below this (ms).
    pub rtt_cutoff_ms: f32,
    /// Radius of every hit sphere (cm).
    pub radius: f32,
    /// Farthest a shot's origin may be from the shooter's server position
    /// after the input that fired it (cm); 0 = unchecked.
    pub origin_tolerance: f32,
}

impl Default for RewindParams {
    fn default() -> Self {
        RewindParams {
            max_unlag: DEFAULT_MAX_UNLAG,
            rtt_cutoff_ms: DEFAULT_RTT_CUTOFF_MS,
            radius: DEFAULT_HIT_RADIUS,
            origin_tolerance: 0.0,
        }
    }
}

impl RewindParams {
    /// The (fractional) tick to test a shot against, fired at server tick
    /// `current`: `current − (transit + interpolation delay)` clamped to
    /// `[current − max_unlag, current]` when the round trip is within the
    /// cutoff, else `current`. A non-finite profile counts as no lag.
    pub fn rewind_tick(&self, current: u64, lag: &LagProfile) -> f64 {
        self.rewind(current, lag).tick
    }

    /// [`Self::rewind_tick`] and whether a bound applied.
    pub fn rewind(&self, current: u64, lag: &LagProfile) -> Rewound {
        let now = current as f64;
        let within = lag.rtt_ms.is_finite() && lag.rtt_ms <= self.rtt_cutoff_ms;
        if !within {
            return Rewound {
                tick: now,
                bound: Some(RewindBound::OverCutoff),
            };
        }
        let back = f64::from(lag.transit_ticks) + f64::from(lag.interp_delay_ticks);
        let back = if back.is_finite() { back.max(0.0) } else { 0.0 };
        let oldest = (now - f64::from(self.max_unlag)).max(0.0);
        let wanted = now - back;
        Rewound {
            tick: wanted.clamp(oldest, now),
            bound: (wanted < oldest).then_some(RewindBound::MaxUnlag),
        }
    }
}

/// Which bound limited a rewind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RewindBound {
    /// The round trip is over the cutoff: no compensation.
    OverCutoff,
    /// The lag asked for more than `max_unlag` ticks (or before tick 0).
    MaxUnlag,
}

/// A rewind decision.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rewound {
    /// The (fractional) tick to test against.
    pub tick: f64,
    /// The bound that limited it, if any.
    pub bound: Option<RewindBound>,
}

/// The wire's `rewind_tick`: `max(0, round(rewind))`, wrapped to `u32`.
pub fn wire_tick(rewind: f64) -> u32 {
    (rewind.max(0.0) + 0.5).floor() as u64 as u32
}

/// The recent positions of one hit-eligible object, oldest first.
#[derive(Debug, Clone)]
pub struct History {
    capacity: usize,
    samples: VecDeque<(u64, [f32; 3])>,
}

impl History {
    /// An empty ring keeping `ticks` samples (1 ..= [`MAX_HISTORY_TICKS`]).
    pub fn new(ticks: u32) -> History {
        let capacity = ticks.clamp(1, MAX_HISTORY_TICKS) as usize;
        History {
            capacity,
            samples: VecDeque::with_capacity(capacity),
        }
    }

    /// Samples held.
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// Whether nothing is recorded yet.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// Records the position at `tick` (ticks must increase; a repeated or
    /// older tick replaces nothing and is ignored), dropping the oldest
    /// sample when full.
    pub fn record(&mut self, tick: u64, position: [f32; 3]) {
        if self.samples.back().is_some_and(|&(t, _)| t >= tick) {
            return;
        }
        if self.samples.len() == self.capacity {
            self.samples.pop_front();
        }
        self.samples.push_back((tick, position));
    }

    /// The position at the fractional `tick`, linearly interpolated
    /// between the samples around it and clamped to the oldest and newest
    /// ones; `None` when empty.
    pub fn position_at(&self, tick: f64) -> Option<[f32; 3]> {
        let (&(first_tick, first), &(last_tick, last)) =
            (self.samples.front()?, self.samples.back()?);
        if tick <= first_tick as f64 {
            return Some(first);
        }
        if tick >= last_tick as f64 {
            return Some(last);
        }
        // The first sample at or after `tick`; it has a predecessor.
        let i = self.samples.partition_point(|&(t, _)| (t as f64) < tick);
        let (t0, p0) = self.samples[i - 1];
        let (t1, p1) = self.samples[i];
        let f = ((tick - t0 as f64) / (t1 - t0) as f64) as f32;
        Some([0, 1, 2].map(|a| p0[a] + (p1[a] - p0[a]) * f))
    }
}

/// Where a ray meets a sphere: the distance along the normalised
/// direction, or `None`. The direction must be normalised by the caller.
/// An origin inside (or on) the sphere hits at distance 0; a sphere
/// entirely behind the origin is a miss.
pub fn ray_sphere(origin: [f32; 3], dir: [f32; 3], centre: [f32; 3], radius: f32) -> Option<f32> {
    let m = [0, 1, 2].map(|a| f64::from(origin[a]) - f64::from(centre[a]));
    let d = dir.map(f64::from);
    let r = f64::from(radius);
    let c = dot(m, m) - r * r;
    if c <= 0.0 {
        return Some(0.0);
    }
    let b = dot(m, d);
    if b > 0.0 {
        // Outside and pointing away.
        return None;
    }
    let disc = b * b - c;
    if disc < 0.0 {
        return None;
    }
    Some((-b - disc.sqrt()) as f32)
}

fn dot(a: [f64; 3], b: [f64; 3]) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

/// `dir` of unit length; `None` when zero or not finite (a miss).
pub fn normalise(dir: [f32; 3]) -> Option<[f32; 3]> {
    let d = dir.map(f64::from);
    let len = dot(d, d).sqrt();
    if !(len.is_finite() && len > 0.0) {
        return None;
    }
    Some(d.map(|c| (c / len) as f32))
}

/// A resolved hit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    /// The object hit.
    pub object_id: u32,
    /// The point on the ray (the origin when it starts inside).
    pub point: [f32; 3],
    /// Distance from the origin (cm).
    pub distance: f32,
}

/// The nearest forward hit of the ray against `targets` (object id and
/// history) at the fractional `tick`, skipping `exclude` (the shooter's own
/// object). A zero or non-finite direction, or a non-finite origin, misses.
/// Equal distances resolve to the lower object id, so the answer does not
/// depend on iteration order.
pub fn resolve<'a>(
    targets: impl IntoIterator<Item = (u32, &'a History)>,
    exclude: u32,
    origin: [f32; 3],
    direction: [f32; 3],
    tick: f64,
    radius: f32,
) -> Option<Hit> {
    let dir = normalise(direction)?;
    if origin.iter().any(|c| !c.is_finite()) {
        return None;
    }
    let mut best: Option<Hit> = None;
    for (object_id, history) in targets {
        if object_id == exclude {
            continue;
        }
        let Some(centre) = history.position_at(tick) else {
            continue;
        };
        let Some(distance) = ray_sphere(origin, dir, centre, radius) else {
            continue;
        };
        let better = match best {
            None => true,
            Some(b) => distance < b.distance || (distance == b.distance && object_id < b.object_id),
        };
        if better {
            let point = [0, 1, 2].map(|a| origin[a] + dir[a] * distance);
            best = Some(Hit {
                object_id,
                point,
                distance,
            });
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ray_sphere_edge_cases() {
        let c = [100.0, 0.0, 0.0];
        assert_eq!(ray_sphere([0.0; 3], [1.0, 0.0, 0.0], c, 50.0), Some(50.0));
        assert_eq!(ray_sphere([0.0; 3], [-1.0, 0.0, 0.0], c, 50.0), None);
        assert_eq!(ray_sphere([0.0; 3], [0.0, 1.0, 0.0], c, 50.0), None);
        assert_eq!(
            ray_sphere([90.0, 10.0, 0.0], [-1.0, 0.0, 0.0], c, 50.0),
            Some(0.0),
            "an origin inside hits at distance 0 whatever the direction"
        );
        let grazing = ray_sphere([0.0, 50.0, 0.0], [1.0, 0.0, 0.0], c, 50.0);
        assert!(grazing.is_some_and(|d| (d - 100.0).abs() < 1e-3));
        assert_eq!(normalise([0.0; 3]), None);
        assert_eq!(normalise([f32::NAN, 1.0, 0.0]), None);
        assert_eq!(normalise([f32::INFINITY, 0.0, 0.0]), None);
    }

    #[test]
    fn history_interpolates_and_clamps() {
        let mut h = History::new(3);
        assert_eq!(h.position_at(5.0), None);
        for t in 1..=5u64 {
            h.record(t, [t as f32 * 10.0, 0.0, 0.0]);
        }
        assert_eq!(h.len(), 3, "the ring keeps its capacity");
        assert_eq!(h.position_at(3.5), Some([35.0, 0.0, 0.0]));
        assert_eq!(h.position_at(1.0), Some([30.0, 0.0, 0.0]), "clamped oldest");
        assert_eq!(h.position_at(9.0), Some([50.0, 0.0, 0.0]), "clamped newest");
        h.record(5, [0.0; 3]);
        assert_eq!(h.position_at(5.0), Some([50.0, 0.0, 0.0]), "no rewrite");
        assert_eq!(History::new(u32::MAX).capacity, MAX_HISTORY_TICKS as usize);
    }

    #[test]
    fn rewind_tick_clamps_and_respects_the_cutoff() {
        let p = RewindParams::default();
        let lag = LagProfile::from_rtt(200.0, 60, 20);
        assert!((lag.transit_ticks - 12.0).abs() < 1e-4);
        assert!((lag.interp_delay_ticks - 4.5).abs() < 1e-4);
        assert!((p.rewind_tick(1_000, &lag) - 983.5).abs() < 1e-4);
        let far = LagProfile {
            rtt_ms: 100.0,
            transit_ticks: 500.0,
            interp_delay_ticks: 0.0,
        };
        assert_eq!(p.rewind_tick(1_000, &far), 940.0, "clamped to max_unlag");
        assert_eq!(p.rewind_tick(10, &far), 0.0, "never before tick 0");
        let slow = LagProfile::from_rtt(300.0, 60, 20);
        assert_eq!(p.rewind_tick(1_000, &slow), 1_000.0, "over the cutoff");
        let nan = LagProfile {
            rtt_ms: f32::NAN,
            ..lag
        };
        assert_eq!(p.rewind_tick(1_000, &nan), 1_000.0);
        assert_eq!(wire_tick(983.5), 984);
        assert_eq!(wire_tick(-3.0), 0);
    }

    #[test]
    fn nearest_forward_hit_wins_and_the_shooter_is_excluded() {
        let mut near = History::new(4);
        near.record(1, [200.0, 0.0, 0.0]);
        let mut far = History::new(4);
        far.record(1, [400.0, 0.0, 0.0]);
        let mut own = History::new(4);
        own.record(1, [0.0, 0.0, 0.0]);
        let targets = [(3, &far), (2, &near), (1, &own)];
        let hit = resolve(targets, 1, [0.0; 3], [2.0, 0.0, 0.0], 1.0, 50.0).unwrap();
        assert_eq!((hit.object_id, hit.point), (2, [150.0, 0.0, 0.0]));
        assert_eq!(resolve(targets, 1, [0.0; 3], [0.0; 3], 1.0, 50.0), None);
        let inside = resolve(targets, 0, [0.0; 3], [1.0, 0.0, 0.0], 1.0, 50.0).unwrap();
        assert_eq!((inside.object_id, inside.point), (1, [0.0; 3]));
    }
}
