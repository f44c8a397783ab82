//! Two-phase validated input for a game-logic movement hook (Lua
//! `citadel.on_input`): the frames a kind-9 bundle releases are staged
//! with their built-in results, judged outside the core, then applied.
//!
//! What it is: [`ActorServer::handle_input_staged`] runs the first half of
//! [`ActorServer::handle_input`] (ack, ownership, epoch and sequence
//! rules) and releases the contiguous run from the object's queue, but
//! does not move the object: it returns a [`MovementBatch`] with every
//! released frame (clamped `dt` and velocity, the wire's move velocity,
//! its fire command) and the object's motion at staging time.
//! [`MovementBatch::proposed`] and [`MovementBatch::step`] are the one
//! definition of what a frame does from a given motion under a
//! [`Verdict`]; the judge (the VM thread) walks them to show each frame's
//! built-in result from the previous verdict's outcome, and
//! [`ActorServer::handle_movement`] walks them again to apply. A
//! verdict is `Accept` (the built-in result), `Veto` (the frame is
//! consumed and `last_input_seq` advances, but the object stays where it
//! is with zero velocity; a fire command is still resolved, from there),
//! or `Correct` (the given motion; the position is clamped to the HELLO
//! bounds, the speed clamp does not apply: game logic is trusted; a
//! non-finite velocity becomes zero). Without verdicts (`None`: the judge
//! failed, timed out or answered the wrong number) every frame gets the
//! built-in result, exactly what [`ActorServer::handle_input`] would have
//! done.
//!
//! What it is not: no Lua, no clock, no deadline; the driver decides when
//! to stage (only when a hook exists: otherwise it calls `handle_input`,
//! whose path is unchanged) and what a failure counts as.
//!
//! Call order, per bundle: `handle_input_staged` → (if a batch came out)
//! judge it → `handle_movement` with the verdicts or `None`, then
//! `poll_output`. At most one batch per object is in flight: its
//! `last_input_seq` and the object's position are published by
//! `handle_movement` together, so a snapshot between the phases shows the
//! object as before the bundle. `handle_movement` re-checks that the
//! object still has the batch's owner, ownership epoch and queue
//! watermark; a handoff (or a respawn, or another batch staged meanwhile)
//! makes the batch stale and it is discarded without moving anything.

use citadel_wire::tsync::{FireCommand, InputBundle};

use super::{ActorServer, InputOutcome, PlaceKey, Tick};
use crate::input::{InputParams, Released, advance, within_bounds};

/// A position and a velocity (cm, cm/s).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Kinematics {
    /// Position (cm).
    pub position: [f32; 3],
    /// Velocity (cm/s).
    pub velocity: [f32; 3],
}

/// One released frame of a [`MovementBatch`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StagedFrame {
    /// Its sequence number.
    pub input_seq: u32,
    /// The client's tick for it (informational; never authority).
    pub sim_tick: u32,
    /// The clamped step (s).
    pub dt: f32,
    /// The move velocity as the wire gave it.
    pub move_velocity: [f32; 3],
    /// The velocity the built-in integration moves with (speed-clamped).
    pub velocity: [f32; 3],
    /// Its fire command, resolved once when the batch is applied.
    pub fire: Option<FireCommand>,
}

impl From<Released> for StagedFrame {
    /// The frame as released, minus the position it integrated to (a
    /// batch recomputes positions from each verdict's outcome).
    fn from(r: Released) -> Self {
        StagedFrame {
            input_seq: r.input_seq,
            sim_tick: r.sim_tick,
            dt: r.dt,
            move_velocity: r.move_velocity,
            velocity: r.velocity,
            fire: r.fire,
        }
    }
}

/// What game logic decided for one frame.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Verdict {
    /// The built-in result.
    Accept,
    /// Consumed without moving the object (velocity zero).
    Veto,
    /// This motion instead (position clamped to the bounds).
    Correct(Kinematics),
}

/// The frames one bundle released, not yet applied (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct MovementBatch {
    /// The sender (the object's owner at staging time).
    pub participant_id: u64,
    /// The object the frames move.
    pub object_id: u32,
    /// The ownership epoch the frames were accepted under.
    pub ownership_epoch: u32,
    /// The server tick at staging time.
    pub tick: Tick,
    /// The object's motion when the batch was staged.
    pub start: Kinematics,
    /// The released frames, in sequence order (never empty).
    pub frames: Vec<StagedFrame>,
    /// The watermark after the last frame.
    pub last_input_seq: u32,
    /// The clamps and bounds of the object's queue.
    pub params: InputParams,
}

impl MovementBatch {
    /// The built-in result of `frame` from `from` (what
    /// [`ActorServer::handle_input`] would integrate).
    pub fn proposed(&self, frame: &StagedFrame, from: Kinematics) -> Kinematics {
        Kinematics {
            position: advance(&self.params, from.position, frame.dt, frame.velocity),
            velocity: frame.velocity,
        }
    }

    /// What `verdict` makes of `frame` from `from`.
    pub fn step(&self, frame: &StagedFrame, from: Kinematics, verdict: &Verdict) -> Kinematics {
        match verdict {
            Verdict::Accept => self.proposed(frame, from),
            Verdict::Veto => Kinematics {
                position: from.position,
                velocity: [0.0; 3],
            },
            Verdict::Correct(k) => Kinematics {
                position: within_bounds(&self.params, k.position),
                velocity: if k.velocity.iter().all(|c| c.is_finite()) {
                    k.velocity
                } else {
                    [0.0; 3]
                },
            },
        }
    }
}

/// What [`ActorServer::handle_movement`] did with one batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[must_use]
pub struct MovementOutcome {
    /// Frames applied (all of the batch unless stale) and the fire
    /// commands resolved, as for [`ActorServer::handle_input`].
    pub input: InputOutcome,
    /// Frames vetoed.
    pub vetoed: usize,
    /// Frames corrected.
    pub corrected: usize,
    /// The built-in result was applied for the whole batch: no verdicts,
    /// or not one per frame.
    pub fallback: bool,
    /// The batch no longer matched the object (handoff, respawn, a later
    /// batch): nothing moved, nothing was resolved.
    pub stale: bool,
}

impl<P: PlaceKey> ActorServer<P> {
    /// Kind 9 when a movement hook judges the frames: like
    /// [`ActorServer::handle_input`] up to the release, which is staged
    /// instead of applied. The outcome counts the ack and the offers; one
    /// batch per owned object whose queue released frames (a bundle may
    /// drive several), in bundle order; empty when nothing was released.
    pub fn handle_input_staged(
        &mut self,
        participant_id: u64,
        bundle: &InputBundle,
        now: Tick,
    ) -> (InputOutcome, Vec<MovementBatch>) {
        let mut outcome = InputOutcome::default();
        let owned = self.offer_bundle(participant_id, bundle, now, &mut outcome);
        let batches = owned
            .iter()
            .filter_map(|&object_id| self.stage_release(participant_id, object_id))
            .collect();
        self.offered = owned;
        (outcome, batches)
    }

    /// Releases the contiguous run of `object_id`'s queue into a batch,
    /// leaving the object as it is.
    fn stage_release(&mut self, participant_id: u64, object_id: u32) -> Option<MovementBatch> {
        let ActorServer {
            inputs,
            worlds,
            now,
            ..
        } = self;
        let owned = inputs.get_mut(&object_id)?;
        let object = worlds.get(&owned.world)?.get(object_id)?;
        let start = Kinematics {
            position: object.transform.position,
            velocity: object.transform.velocity,
        };
        let (mut position, mut velocity) = (start.position, start.velocity);
        let mut frames = Vec::new();
        while let Some(r) = owned.queue.poll_released(&mut position, &mut velocity) {
            frames.push(StagedFrame::from(r));
        }
        if frames.is_empty() {
            return None;
        }
        Some(MovementBatch {
            participant_id,
            object_id,
            ownership_epoch: owned.queue.epoch(),
            tick: *now,
            start,
            frames,
            last_input_seq: owned.queue.last_input_seq(),
            params: *owned.queue.params(),
        })
    }

    /// Applies a staged batch with `verdicts` (one per frame), or the
    /// built-in result without them; see the module docs.
    pub fn handle_movement(
        &mut self,
        batch: &MovementBatch,
        verdicts: Option<&[Verdict]>,
        now: Tick,
    ) -> MovementOutcome {
        self.advance(now);
        let mut outcome = MovementOutcome::default();
        let verdicts = verdicts.filter(|v| v.len() == batch.frames.len());
        outcome.fallback = verdicts.is_none();
        let ActorServer { inputs, worlds, .. } = self;
        let current = inputs.get(&batch.object_id).filter(|o| {
            o.queue.epoch() == batch.ownership_epoch
                && o.queue.last_input_seq() == batch.last_input_seq
        });
        let Some((world, object)) = current.and_then(|o| {
            worlds
                .get_mut(&o.world)
                .and_then(|w| w.get_mut(batch.object_id))
                .filter(|obj| {
                    obj.owner == batch.participant_id
                        && obj.ownership_epoch == batch.ownership_epoch
                })
                .map(|obj| (o.world, obj))
        }) else {
            outcome.stale = true;
            return outcome;
        };
        let mut motion = Kinematics {
            position: object.transform.position,
            velocity: object.transform.velocity,
        };
        let mut fires = Vec::new();
        for (i, frame) in batch.frames.iter().enumerate() {
            let verdict = verdicts.and_then(|v| v.get(i)).unwrap_or(&Verdict::Accept);
            match verdict {
                Verdict::Accept => {}
                Verdict::Veto => outcome.vetoed += 1,
                Verdict::Correct(_) => outcome.corrected += 1,
            }
            motion = batch.step(frame, motion, verdict);
            if let Some(fire) = frame.fire {
                fires.push((frame.input_seq, fire, motion.position));
            }
        }
        object.transform.position = motion.position;
        object.transform.velocity = motion.velocity;
        object.last_input_seq = batch.last_input_seq;
        outcome.input.applied = batch.frames.len();
        self.resolve_fires(
            batch.participant_id,
            batch.object_id,
            world,
            fires,
            &mut outcome.input,
        );
        outcome
    }
}
