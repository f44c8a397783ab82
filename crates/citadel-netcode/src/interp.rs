//! Client interpolation: render remote objects slightly in the past from
//! per-object sample buffers (realtime-behaviour §4.2).
//!
//! Call order: [`Interpolator::handle_applied`] for every applied snapshot,
//! then [`Interpolator::sample`] at render time with the current estimate
//! of the server tick. Position uses cubic Hermite with velocity tangents
//! when both samples carry velocity (linear otherwise); rotation uses slerp
//! on the shorter arc; before the buffer it clamps to the oldest sample;
//! after it, it extrapolates with the last velocity for at most 0.25 s.

use std::collections::{BTreeMap, HashMap, VecDeque};

use crate::receiver::Applied;

/// Samples kept per object.
pub const SAMPLES_PER_OBJECT: usize = 32;
const MAX_EXTRAPOLATION_S: f64 = 0.25;

#[derive(Debug, Clone, Copy, PartialEq)]
struct Sample {
    tick: u32,
    position: [f32; 3],
    rotation: [f32; 4],
    velocity: Option<[f32; 3]>,
}

/// A rendered transform.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rendered {
    /// Position (cm).
    pub position: [f32; 3],
    /// Rotation (x y z w).
    pub rotation: [f32; 4],
}

/// Sample buffers and the adaptive delay.
#[derive(Debug, Clone)]
pub struct Interpolator {
    sim_rate_hz: f64,
    send_rate_hz: f64,
    multiplier: f64,
    buffers: HashMap<u32, VecDeque<Sample>>,
}

impl Interpolator {
    /// An empty interpolator for a server ticking at `sim_rate_hz`.
    pub fn new(sim_rate_hz: u8) -> Self {
        Interpolator {
            sim_rate_hz: f64::from(sim_rate_hz.max(1)),
            send_rate_hz: 20.0,
            multiplier: 2.5,
            buffers: HashMap::new(),
        }
    }

    /// Records an applied snapshot.
    pub fn handle_applied(&mut self, applied: &Applied) {
        if applied.send_rate_hz > 0 {
            self.send_rate_hz = f64::from(applied.send_rate_hz);
        }
        self.multiplier = if applied.gap > 0 {
            (self.multiplier + 0.5 * f64::from(applied.gap)).min(2.5)
        } else {
            (self.multiplier - 0.02).max(1.5)
        };
        self.buffers.retain(|id, _| applied.state.contains_key(id));
        for (id, view) in applied.state.iter() {
            let buf = self.buffers.entry(*id).or_default();
            if buf.back().is_some_and(|s| s.tick >= applied.server_tick) {
                continue;
            }
            buf.push_back(Sample {
                tick: applied.server_tick,
                position: view.position,
                rotation: view.rotation,
                velocity: view.velocity,
            });
            while buf.len() > SAMPLES_PER_OBJECT {
                buf.pop_front();
            }
        }
    }

    /// The render delay in ticks.
    pub fn delay_ticks(&self) -> f64 {
        let interval = 1.0 / self.send_rate_hz;
        let delay = (self.multiplier * interval).clamp(1.5 * interval, 0.4);
        delay * self.sim_rate_hz
    }

    /// The tick to render at, given the newest known server tick.
    pub fn render_tick(&self, newest_tick: f64) -> f64 {
        newest_tick - self.delay_ticks()
    }

    /// Every object's transform at `tick`.
    pub fn sample(&self, tick: f64) -> BTreeMap<u32, Rendered> {
        self.buffers
            .iter()
            .filter_map(|(id, buf)| self.sample_one(buf, tick).map(|r| (*id, r)))
            .collect()
    }

    fn sample_one(&self, buf: &VecDeque<Sample>, tick: f64) -> Option<Rendered> {
        let first = buf.front()?;
        let last = buf.back()?;
        if tick <= f64::from(first.tick) {
            return Some(Rendered {
                position: first.position,
                rotation: first.rotation,
            });
        }
        if tick >= f64::from(last.tick) {
            let ahead = ((tick - f64::from(last.tick)) / self.sim_rate_hz).min(MAX_EXTRAPOLATION_S);
            let v = last.velocity.unwrap_or([0.0; 3]);
            let position =
                [0, 1, 2].map(|i| (f64::from(last.position[i]) + f64::from(v[i]) * ahead) as f32);
            return Some(Rendered {
                position,
                rotation: last.rotation,
            });
        }
        let (a, b) = buf
            .iter()
            .zip(buf.iter().skip(1))
            .find(|(a, b)| f64::from(a.tick) <= tick && tick <= f64::from(b.tick))?;
        let span_ticks = f64::from(b.tick.wrapping_sub(a.tick)).max(1.0);
        let t = (tick - f64::from(a.tick)) / span_ticks;
        let span_s = span_ticks / self.sim_rate_hz;
        let position = match (a.velocity, b.velocity) {
            (Some(va), Some(vb)) => hermite(a.position, b.position, va, vb, t, span_s),
            _ => [0, 1, 2].map(|i| lerp(a.position[i], b.position[i], t)),
        };
        Some(Rendered {
            position,
            rotation: slerp(a.rotation, b.rotation, t),
        })
    }
}

fn lerp(a: f32, b: f32, t: f64) -> f32 {
    (f64::from(a) + (f64::from(b) - f64::from(a)) * t) as f32
}

fn hermite(
    p0: [f32; 3],
    p1: [f32; 3],
    v0: [f32; 3],
    v1: [f32; 3],
    t: f64,
    span_s: f64,
) -> [f32; 3] {
    let (t2, t3) = (t * t, t * t * t);
    let h00 = 2.0 * t3 - 3.0 * t2 + 1.0;
    let h10 = t3 - 2.0 * t2 + t;
    let h01 = -2.0 * t3 + 3.0 * t2;
    let h11 = t3 - t2;
    [0, 1, 2].map(|i| {
        (h00 * f64::from(p0[i])
            + h10 * f64::from(v0[i]) * span_s
            + h01 * f64::from(p1[i])
            + h11 * f64::from(v1[i]) * span_s) as f32
    })
}

fn slerp(a: [f32; 4], b: [f32; 4], t: f64) -> [f32; 4] {
    let a = a.map(f64::from);
    let mut b = b.map(f64::from);
    let mut dot: f64 = (0..4).map(|i| a[i] * b[i]).sum();
    if dot < 0.0 {
        b = b.map(|c| -c);
        dot = -dot;
    }
    let out = if dot > 0.9995 {
        [0, 1, 2, 3].map(|i| a[i] + (b[i] - a[i]) * t)
    } else {
        let theta = dot.clamp(-1.0, 1.0).acos();
        let s = theta.sin();
        let (wa, wb) = (((1.0 - t) * theta).sin() / s, (t * theta).sin() / s);
        [0, 1, 2, 3].map(|i| a[i] * wa + b[i] * wb)
    };
    let norm = out.iter().map(|c| c * c).sum::<f64>().sqrt();
    if !norm.is_finite() || norm < 1e-9 {
        return [0.0, 0.0, 0.0, 1.0];
    }
    out.map(|c| (c / norm) as f32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slerp_endpoints_and_midpoint() {
        let a = [0.0, 0.0, 0.0, 1.0];
        let h = std::f32::consts::FRAC_1_SQRT_2;
        let b = [0.0, h, 0.0, h];
        assert_eq!(slerp(a, b, 0.0), a);
        let mid = slerp(a, b, 0.5);
        let expected = (std::f64::consts::PI / 8.0).sin() as f32;
        assert!((mid[1] - expected).abs() < 1e-5, "{mid:?}");
    }

    #[test]
    fn hermite_matches_linear_motion() {
        let p = hermite(
            [0.0; 3],
            [100.0, 0.0, 0.0],
            [200.0, 0.0, 0.0],
            [200.0, 0.0, 0.0],
            0.5,
            0.5,
        );
        assert!((p[0] - 50.0).abs() < 1e-3);
    }
}
