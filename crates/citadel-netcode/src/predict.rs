//! Owner prediction and reconciliation on the client (§4.3), sans-IO.
//!
//! What it is: [`Predictor`] runs the owner's own object ahead of the
//! server. Each local input is integrated at once with the server's own
//! step ([`crate::input::integrate`], same clamps, same `f32` arithmetic),
//! numbered and kept until acknowledged. [`Predictor::poll_bundle`] builds
//! the redundant kind-9 bundle: the oldest unacknowledged frames first, at
//! most [`MAX_BUNDLE_FRAMES`], so a lost datagram is repaired by the next
//! one and the server's in-order queue never waits on a frame the client
//! stopped sending. On every snapshot that carries `last_input_seq`,
//! [`Predictor::handle_authoritative`] compares the server's position with
//! what the client predicted after that same input: within `tolerance`
//! (the codec's quantization) nothing moves; otherwise the simulation
//! snaps to the server's state and replays the unacknowledged inputs, and
//! the jump is hidden by a visual offset that decays per rendered frame
//! ([`Predictor::poll_render`]: ×0.95 for errors up to 25 cm, ×0.85 from
//! 1 m, interpolated between; errors of [`SNAP_DISTANCE`] or more snap).
//! The correction magnitude of every snapshot is returned and kept.
//!
//! What it is not: no transport, no clock, no snapshot decoding (the
//! caller passes the reconstructed position), no rendering of others.
//! The client never resolves hits: fire commands ride along with inputs
//! and the server answers with kind 12.
//!
//! Call order: [`Predictor::new`] when a ROLE makes this client the owner
//! (a new epoch: [`Predictor::handle_epoch`]); per local simulation step
//! [`Predictor::handle_input`] then send [`Predictor::poll_bundle`]; per
//! applied snapshot holding the object's `last_input_seq`,
//! [`Predictor::handle_authoritative`]; per rendered frame
//! [`Predictor::poll_render`].

use std::collections::VecDeque;

use citadel_wire::tsync::{FireCommand, INPUT_FLAG_FIRE, InputBundle, InputFrame};

use crate::input::{InputParams, MAX_AHEAD, integrate};

/// Most frames one bundle carries: the wire's limit. A bundle holds every
/// unacknowledged frame (about a round trip plus a snapshot interval of
/// inputs: 8 at 60 Hz over 80 ms with 20 Hz snapshots); past 32 the
/// oldest go first, so the server's in-order queue always progresses.
pub const MAX_BUNDLE_FRAMES: usize = citadel_wire::tsync::MAX_INPUT_FRAMES;
/// Corrections at least this long (cm) snap the rendered position.
pub const SNAP_DISTANCE: f32 = 500.0;

/// One unacknowledged input and the state predicted after it.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Pending {
    seq: u32,
    sim_tick: u32,
    dt: f32,
    move_velocity: [f32; 3],
    fire: Option<FireCommand>,
    predicted: [f32; 3],
}

/// What one authoritative state did to the prediction.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Correction {
    /// The predicted object.
    pub object_id: u32,
    /// The acknowledged input.
    pub input_seq: u32,
    /// The distance between the predicted and the server position after
    /// that input (cm); 0 within the tolerance.
    pub error: f32,
    /// How far the current predicted position moved (cm).
    pub magnitude: f32,
    /// Inputs replayed on top of the server state.
    pub replayed: usize,
}

/// The owner-side prediction of one object (see the module doc).
#[derive(Debug, Clone)]
pub struct Predictor {
    params: InputParams,
    tolerance: f32,
    object_id: u32,
    epoch: u32,
    next_seq: u32,
    acked: u32,
    position: [f32; 3],
    velocity: [f32; 3],
    pending: VecDeque<Pending>,
    offset: [f32; 3],
    last: Option<Correction>,
}

fn sub(a: [f32; 3], b: [f32; 3]) -> [f32; 3] {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

fn length(v: [f32; 3]) -> f32 {
    (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt()
}

impl Predictor {
    /// Predicts `object_id` owned under `epoch` from `position`, with the
    /// server's clamps and a `tolerance` (cm) below which a difference is
    /// quantization, not error (one position step: `1 / values_per_unit`).
    pub fn new(
        params: InputParams,
        tolerance: f32,
        object_id: u32,
        epoch: u32,
        position: [f32; 3],
    ) -> Predictor {
        Predictor {
            params,
            tolerance: tolerance.max(0.0),
            object_id,
            epoch,
            next_seq: 1,
            acked: 0,
            position,
            velocity: [0.0; 3],
            pending: VecDeque::new(),
            offset: [0.0; 3],
            last: None,
        }
    }

    /// The predicted object.
    pub fn object_id(&self) -> u32 {
        self.object_id
    }

    /// The ownership epoch inputs are sent under.
    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    /// The predicted simulation position (cm).
    pub fn position(&self) -> [f32; 3] {
        self.position
    }

    /// The velocity of the last input (cm/s, clamped).
    pub fn velocity(&self) -> [f32; 3] {
        self.velocity
    }

    /// Inputs not yet acknowledged.
    pub fn unacked(&self) -> usize {
        self.pending.len()
    }

    /// The newest acknowledged input sequence (0 = none).
    pub fn acked(&self) -> u32 {
        self.acked
    }

    /// The correction of the newest authoritative state.
    pub fn last_correction(&self) -> Option<Correction> {
        self.last
    }

    /// A new ownership epoch (a Handoff back to this client): sequences
    /// restart at 1, unacknowledged input is dropped (the server discarded
    /// it), the simulation restarts from `position`.
    pub fn handle_epoch(&mut self, epoch: u32, position: [f32; 3]) {
        self.epoch = epoch;
        self.next_seq = 1;
        self.acked = 0;
        self.pending.clear();
        self.position = position;
        self.offset = [0.0; 3];
    }

    /// One local input step: integrated at once (the server's clamps),
    /// numbered and kept until acknowledged; returns its frame. At most
    /// 256 inputs stay unacknowledged (the server refuses frames further
    /// ahead): past that the oldest is forgotten and the next
    /// authoritative state corrects the difference.
    pub fn handle_input(
        &mut self,
        sim_tick: u32,
        dt: f32,
        move_velocity: [f32; 3],
        fire: Option<FireCommand>,
    ) -> InputFrame {
        let (_, velocity, position) = integrate(&self.params, self.position, dt, move_velocity);
        self.position = position;
        self.velocity = velocity;
        let seq = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1).max(1);
        if self.pending.len() >= MAX_AHEAD as usize {
            self.pending.pop_front();
        }
        let pending = Pending {
            seq,
            sim_tick,
            dt,
            move_velocity,
            fire,
            predicted: position,
        };
        self.pending.push_back(pending);
        self.frame(&pending)
    }

    fn frame(&self, p: &Pending) -> InputFrame {
        InputFrame {
            input_seq: p.seq,
            sim_tick: p.sim_tick,
            dt: p.dt,
            object_id: self.object_id,
            ownership_epoch: self.epoch,
            move_velocity: p.move_velocity,
            flags: if p.fire.is_some() { INPUT_FLAG_FIRE } else { 0 },
            fire: p.fire,
            ..InputFrame::default()
        }
    }

    /// The bundle to send now: the oldest unacknowledged frames (at most
    /// [`MAX_BUNDLE_FRAMES`]) with the piggybacked snapshot ack; `None`
    /// when everything is acknowledged.
    pub fn poll_bundle(&self, acked_snapshot_id: u32) -> Option<InputBundle> {
        if self.pending.is_empty() {
            return None;
        }
        Some(InputBundle {
            acked_snapshot_id,
            last_seen_snapshot_id: acked_snapshot_id,
            frames: self.unacked_frames().take(MAX_BUNDLE_FRAMES).collect(),
        })
    }

    /// Every unacknowledged frame, oldest first (what a bundle repeats).
    pub fn unacked_frames(&self) -> impl Iterator<Item = InputFrame> + '_ {
        self.pending.iter().map(|p| self.frame(p))
    }

    /// A snapshot says the server applied every input up to `input_seq`
    /// and holds the object at `server_position`: drop what it
    /// acknowledged; if the prediction after `input_seq` differs by more
    /// than the tolerance, restart from the server's state and replay the
    /// rest. `None` for an ack not newer than the last one.
    pub fn handle_authoritative(
        &mut self,
        input_seq: u32,
        server_position: [f32; 3],
    ) -> Option<Correction> {
        if input_seq <= self.acked || input_seq >= self.next_seq {
            return None;
        }
        self.acked = input_seq;
        let mut predicted = None;
        while let Some(p) = self.pending.front() {
            if p.seq > input_seq {
                break;
            }
            predicted = Some(p.predicted);
            self.pending.pop_front();
        }
        // Forgotten past the 256 bound: compare with nothing, trust the server.
        let error = predicted.map_or(f32::INFINITY, |p| length(sub(server_position, p)));
        let correction = if error <= self.tolerance {
            Correction {
                object_id: self.object_id,
                input_seq,
                error: 0.0,
                magnitude: 0.0,
                replayed: 0,
            }
        } else {
            let before = self.position;
            self.replay(server_position);
            let jump = sub(before, self.position);
            let magnitude = length(jump);
            self.offset = if length([0, 1, 2].map(|a| self.offset[a] + jump[a])) >= SNAP_DISTANCE {
                [0.0; 3]
            } else {
                [0, 1, 2].map(|a| self.offset[a] + jump[a])
            };
            Correction {
                object_id: self.object_id,
                input_seq,
                error: if error.is_finite() { error } else { magnitude },
                magnitude,
                replayed: self.pending.len(),
            }
        };
        self.last = Some(correction);
        Some(correction)
    }

    /// Restarts from `from` and re-integrates every unacknowledged input.
    fn replay(&mut self, from: [f32; 3]) {
        let mut position = from;
        for p in &mut self.pending {
            let (_, velocity, next) = integrate(&self.params, position, p.dt, p.move_velocity);
            position = next;
            p.predicted = next;
            self.velocity = velocity;
        }
        self.position = position;
    }

    /// The position to draw this frame: the prediction plus the decaying
    /// correction offset (decayed once per call).
    pub fn poll_render(&mut self) -> [f32; 3] {
        let len = length(self.offset);
        let factor = if len <= 25.0 {
            0.95
        } else if len >= 100.0 {
            0.85
        } else {
            0.95 - 0.10 * (len - 25.0) / 75.0
        };
        self.offset = self.offset.map(|c| c * factor);
        if length(self.offset) < 0.01 {
            self.offset = [0.0; 3];
        }
        [0, 1, 2].map(|a| self.position[a] + self.offset[a])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn predictor() -> Predictor {
        Predictor::new(InputParams::default(), 0.125, 5, 1, [0.0; 3])
    }

    #[test]
    fn matching_acks_correct_nothing_and_a_mismatch_replays() {
        let mut p = predictor();
        for tick in 1..=4 {
            let f = p.handle_input(tick, 0.1, [100.0, 0.0, 0.0], None);
            assert_eq!((f.input_seq, f.object_id, f.ownership_epoch), (tick, 5, 1));
        }
        assert_eq!(p.position(), [40.0, 0.0, 0.0]);
        let c = p.handle_authoritative(2, [20.0, 0.0, 0.0]).unwrap();
        assert_eq!((c.magnitude, p.unacked()), (0.0, 2));
        assert_eq!(p.handle_authoritative(2, [0.0; 3]), None, "not newer");
        // The server had the object 5 cm off after input 3: snap and replay 4.
        let c = p.handle_authoritative(3, [30.0, 5.0, 0.0]).unwrap();
        assert_eq!((c.error, c.replayed), (5.0, 1));
        assert_eq!(p.position(), [40.0, 5.0, 0.0]);
        assert!((c.magnitude - 5.0).abs() < 1e-5);
        let first = p.poll_render();
        assert!(first[1] > 0.0 && first[1] < 5.0, "smoothed: {first:?}");
        for _ in 0..200 {
            p.poll_render();
        }
        assert_eq!(p.poll_render(), [40.0, 5.0, 0.0], "the offset decays away");
    }

    #[test]
    fn bundles_start_at_the_oldest_unacked_and_epochs_restart() {
        let mut p = predictor();
        assert!(p.poll_bundle(0).is_none());
        for tick in 1..=40 {
            p.handle_input(tick, 0.01, [0.0; 3], None);
        }
        let b = p.poll_bundle(9).unwrap();
        let seqs: Vec<u32> = b.frames.iter().map(|f| f.input_seq).collect();
        assert_eq!(seqs, (1..=32).collect::<Vec<_>>(), "the oldest 32");
        assert_eq!(b.acked_snapshot_id, 9);
        p.handle_authoritative(30, [0.0; 3]);
        let seqs: Vec<u32> = p
            .poll_bundle(0)
            .unwrap()
            .frames
            .iter()
            .map(|f| f.input_seq)
            .collect();
        assert_eq!(seqs, (31..=40).collect::<Vec<_>>());
        p.handle_epoch(2, [9.0, 0.0, 0.0]);
        let f = p.handle_input(13, 0.0, [0.0; 3], None);
        assert_eq!((f.input_seq, f.ownership_epoch), (1, 2));
        assert_eq!(p.position(), [9.0, 0.0, 0.0]);
        let fire = FireCommand {
            origin: [0.0; 3],
            direction: [1.0, 0.0, 0.0],
        };
        let f = p.handle_input(14, 0.0, [0.0; 3], Some(fire));
        assert_eq!((f.flags, f.fire), (INPUT_FLAG_FIRE, Some(fire)));
    }
}
