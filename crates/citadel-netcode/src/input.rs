//! The in-order owner input queue of one predicted object (§3.7 steps 5–8).
//!
//! What it is: [`InputQueue`] holds the contiguous watermark (the
//! `last_input_seq` echoed in the owner's snapshots), the object's current
//! `ownership_epoch` and at most [`MAX_AHEAD`] buffered frames ahead of the
//! watermark. Every offered frame gets a typed [`Offer`] so a driver can
//! count refusals. Released frames come out strictly in sequence order and
//! are integrated with the clamps of [`InputParams`]: `dt` to
//! `0..=max_dt` (non-finite → 0), the move velocity scaled down to at most
//! `max_speed` (non-finite → zero), and each position axis clamped to the
//! HELLO bounds (non-finite → the axis minimum).
//!
//! What it is not: no ownership or object lookup (the driver checks that
//! the object exists and the sender owns it), no bundle decoding, no ack
//! folding, no fire resolution (released frames hand their fire command
//! back), no clock. The opaque payload is not kept: it does not influence
//! the simulation, and dropping it keeps a queue's memory fixed (256 small
//! slots, allocated once) whatever a client sends.
//!
//! Call order, per decoded kind-9 bundle of an object the sender owns:
//! 1. [`InputQueue::handle_frame`] for each frame (any order; sorting by
//!    `input_seq` first is what the reference does and changes nothing);
//! 2. [`InputQueue::poll_released`] with the object's position and velocity
//!    until it returns `None`; each call integrates one released frame;
//! 3. publish [`InputQueue::last_input_seq`].
//!
//! When ownership moves (new `ownership_epoch`), call
//! [`InputQueue::handle_epoch`]: the sequence restarts (watermark 0, the
//! next expected frame is 1) and buffered input is discarded.

use citadel_wire::tsync::{FireCommand, HelloParams, InputFrame};

/// Most sequence numbers a frame may be ahead of the watermark (§3.1
/// "input max gap ahead"), and so the most frames a queue buffers.
pub const MAX_AHEAD: u32 = 256;

/// The numbers integration applies (§3.1 defaults).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InputParams {
    /// Fastest move (cm/s); longer move velocities are scaled down to it.
    pub max_speed: f32,
    /// Longest step one frame may cover (s).
    pub max_dt: f32,
    /// Lowest position per axis (cm), as advertised in HELLO.
    pub position_min: [f32; 3],
    /// Highest position per axis (cm), as advertised in HELLO.
    pub position_max: [f32; 3],
}

/// The spec's input speed clamp (§3.1 defaults), cm/s.
pub const DEFAULT_MAX_SPEED: f32 = 2_000.0;
/// The spec's input step clamp (§3.1 defaults), seconds.
pub const DEFAULT_MAX_DT: f32 = 0.1;

impl InputParams {
    /// The spec's speed and dt clamps ([`DEFAULT_MAX_SPEED`],
    /// [`DEFAULT_MAX_DT`]) with the position bounds of `hello` (the node's
    /// `transform_sync.position_min/_max`).
    pub fn from_hello(hello: &HelloParams) -> Self {
        InputParams {
            max_speed: DEFAULT_MAX_SPEED,
            max_dt: DEFAULT_MAX_DT,
            position_min: hello.position_min,
            position_max: hello.position_max,
        }
    }
}

impl Default for InputParams {
    /// The §3.1 defaults, bounds included (±262 144 cm X/Y, ±32 768 cm Z).
    fn default() -> Self {
        Self::from_hello(&HelloParams::default())
    }
}

/// What happened to one offered frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Offer {
    /// Buffered; released once every earlier sequence number has arrived.
    Accepted,
    /// The frame names another ownership epoch than the object's current one.
    WrongEpoch,
    /// `input_seq` 0 is reserved for "none".
    ZeroSeq,
    /// At or below the watermark: already applied.
    Stale,
    /// Already buffered.
    Duplicate,
    /// More than [`MAX_AHEAD`] above the watermark.
    TooFarAhead,
}

/// The part of a frame the queue keeps until release.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Pending {
    input_seq: u32,
    sim_tick: u32,
    dt: f32,
    move_velocity: [f32; 3],
    fire: Option<FireCommand>,
}

/// One released and integrated frame.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Released {
    /// Its sequence number (the new watermark).
    pub input_seq: u32,
    /// The client's tick for it (informational; never authority).
    pub sim_tick: u32,
    /// The clamped step it covered (s).
    pub dt: f32,
    /// The move velocity as the wire gave it (before the speed clamp).
    pub move_velocity: [f32; 3],
    /// The clamped velocity it moved with (cm/s), now the object's velocity.
    pub velocity: [f32; 3],
    /// The position after the step (cm).
    pub position: [f32; 3],
    /// Its fire command, to resolve once (§3.8).
    pub fire: Option<FireCommand>,
}

/// The in-order input queue of one object (see the module doc).
#[derive(Debug, Clone)]
pub struct InputQueue {
    params: InputParams,
    epoch: u32,
    watermark: u32,
    /// Slot `seq % MAX_AHEAD`; sequences in `watermark+1 ..= watermark+MAX_AHEAD`
    /// map to distinct slots.
    slots: Box<[Option<Pending>]>,
    buffered: usize,
}

impl InputQueue {
    /// An empty queue for an object owned under `ownership_epoch`.
    pub fn new(params: InputParams, ownership_epoch: u32) -> Self {
        InputQueue {
            params,
            epoch: ownership_epoch,
            watermark: 0,
            slots: vec![None; MAX_AHEAD as usize].into_boxed_slice(),
            buffered: 0,
        }
    }

    /// The highest contiguous applied sequence (`last_input_seq`; 0 = none).
    pub fn last_input_seq(&self) -> u32 {
        self.watermark
    }

    /// The ownership epoch frames must carry.
    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    /// Frames waiting for an earlier sequence number (at most [`MAX_AHEAD`]).
    pub fn buffered(&self) -> usize {
        self.buffered
    }

    /// The integration parameters.
    pub fn params(&self) -> &InputParams {
        &self.params
    }

    /// Ownership moved: frames must now carry `ownership_epoch`, the
    /// sequence restarts at 1 and buffered input is discarded.
    pub fn handle_epoch(&mut self, ownership_epoch: u32) {
        self.epoch = ownership_epoch;
        self.watermark = 0;
        self.slots.iter_mut().for_each(|s| *s = None);
        self.buffered = 0;
    }

    /// Offers one frame of an object the sender owns.
    pub fn handle_frame(&mut self, frame: &InputFrame) -> Offer {
        let seq = frame.input_seq;
        // The epoch is checked before the queue (§3.7 step 4, then step 5).
        if frame.ownership_epoch != self.epoch {
            return Offer::WrongEpoch;
        }
        if seq == 0 {
            return Offer::ZeroSeq;
        }
        if seq <= self.watermark {
            return Offer::Stale;
        }
        if seq - self.watermark > MAX_AHEAD {
            return Offer::TooFarAhead;
        }
        let slot = &mut self.slots[slot_of(seq)];
        if slot.is_some() {
            return Offer::Duplicate;
        }
        *slot = Some(Pending {
            input_seq: seq,
            sim_tick: frame.sim_tick,
            dt: frame.dt,
            move_velocity: frame.move_velocity,
            fire: frame.fire,
        });
        self.buffered += 1;
        Offer::Accepted
    }

    /// Releases the frame right after the watermark if it has arrived:
    /// advances the watermark, integrates the frame into `position` and
    /// `velocity` (the object's), and returns it. `None` at the first gap.
    pub fn poll_released(
        &mut self,
        position: &mut [f32; 3],
        velocity: &mut [f32; 3],
    ) -> Option<Released> {
        let next = self.watermark.checked_add(1)?;
        let pending = self.slots[slot_of(next)].take()?;
        self.buffered -= 1;
        self.watermark = next;
        let (dt, v, p) = integrate(&self.params, *position, pending.dt, pending.move_velocity);
        *position = p;
        *velocity = v;
        Some(Released {
            input_seq: pending.input_seq,
            sim_tick: pending.sim_tick,
            dt,
            move_velocity: pending.move_velocity,
            velocity: v,
            position: p,
            fire: pending.fire,
        })
    }
}

fn slot_of(seq: u32) -> usize {
    (seq % MAX_AHEAD) as usize
}

/// One step of §3.7 step 7: returns the clamped `dt`, the clamped velocity
/// and the new position (each axis within the bounds).
pub fn integrate(
    params: &InputParams,
    position: [f32; 3],
    dt: f32,
    move_velocity: [f32; 3],
) -> (f32, [f32; 3], [f32; 3]) {
    let dt = if dt.is_finite() {
        dt.clamp(0.0, params.max_dt.max(0.0))
    } else {
        0.0
    };
    let velocity = clamp_speed(move_velocity, params.max_speed);
    (dt, velocity, advance(params, position, dt, velocity))
}

/// `position` moved by `velocity` for `dt` (both already clamped), each
/// axis within the bounds: the last part of [`integrate`].
pub fn advance(params: &InputParams, position: [f32; 3], dt: f32, velocity: [f32; 3]) -> [f32; 3] {
    let mut moved = [0.0; 3];
    for axis in 0..3 {
        moved[axis] = position[axis] + velocity[axis] * dt;
    }
    within_bounds(params, moved)
}

/// Each axis of `position` clamped to the bounds (non-finite → the axis
/// minimum).
pub fn within_bounds(params: &InputParams, position: [f32; 3]) -> [f32; 3] {
    let mut out = [0.0; 3];
    for axis in 0..3 {
        let (lo, hi) = (params.position_min[axis], params.position_max[axis]);
        out[axis] = if position[axis].is_finite() {
            position[axis].max(lo).min(hi)
        } else {
            lo
        };
    }
    out
}

/// `v` scaled down to at most `max_speed` long; non-finite → zero.
fn clamp_speed(v: [f32; 3], max_speed: f32) -> [f32; 3] {
    if v.iter().any(|c| !c.is_finite()) || !max_speed.is_finite() {
        return [0.0; 3];
    }
    // f64 so a huge finite component cannot overflow the length to infinity.
    let len = v
        .iter()
        .map(|&c| f64::from(c) * f64::from(c))
        .sum::<f64>()
        .sqrt();
    let max = f64::from(max_speed.max(0.0));
    if len <= max {
        return v;
    }
    let scale = max / len;
    v.map(|c| (f64::from(c) * scale) as f32)
}
