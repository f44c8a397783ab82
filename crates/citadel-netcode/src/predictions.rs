//! Owner prediction of every object one client owns (§3.6, §4.3), sans-IO.
//!
//! What it is: [`Predictions`] keeps one [`Predictor`] per object a ROLE
//! made this client's OwnerPredicted object: its avatar, a vehicle game
//! logic handed to it, and so on. [`Predictions::handle_role`] starts,
//! restarts (a new ownership epoch: the sequence starts over at 1) or stops
//! the prediction of that one object and leaves the others alone.
//! [`Predictions::poll_bundle`] builds one kind-9 bundle for the step with
//! the unacknowledged frames of every predicted object (each frame names
//! its object), oldest first per object; when they do not all fit the
//! wire's [`MAX_BUNDLE_FRAMES`], each object gets a fair share, so every
//! object's in-order queue on the server keeps progressing.
//! [`Predictions::handle_applied`] reconciles each object against its own
//! `last_input_seq` in a snapshot.
//!
//! Bound: the server does not limit how many objects game logic hands to
//! one participant, so at most [`MAX_PREDICTED`] objects are predicted at
//! once. A ROLE that would start one more is ignored and counted
//! ([`Predictions::refused`]); that object is drawn from snapshots like
//! any other, and the server keeps it still until its owner sends input.
//!
//! What it is not: no transport, no clock, no snapshot decoding, no
//! knowledge of which participant this client is (the caller says whether
//! a ROLE names it).
//!
//! Call order: [`Predictions::handle_role`] for each ROLE frame (and
//! [`Predictions::handle_forget`] on a despawn); per local simulation step
//! [`Predictions::handle_input`] for each object moved, then one
//! [`Predictions::poll_bundle`] to send; per applied snapshot
//! [`Predictions::handle_applied`]; per rendered frame
//! [`Predictions::poll_render`] for each predicted object.

use std::collections::BTreeMap;

use citadel_wire::tsync::{FireCommand, InputBundle, InputFrame, Role, RoleChange};

use crate::input::InputParams;
use crate::predict::{Correction, MAX_BUNDLE_FRAMES, Predictor};
use crate::receiver::Applied;

/// Most objects predicted at once. When all of them move every step,
/// each still gets `MAX_BUNDLE_FRAMES / MAX_PREDICTED` = 8 frames in every
/// bundle: the unacknowledged window of a 60 Hz step over an 80 ms round
/// trip with 20 Hz snapshots (objects that do not move take no share).
/// A smaller share would resend the same oldest frames until their ack
/// came back and the newer ones would fall behind.
pub const MAX_PREDICTED: usize = 4;

/// What one ROLE frame did to the predictions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoleOutcome {
    /// This client now predicts the object (sequence from 1).
    Started,
    /// A new ownership epoch of an object already predicted: its sequence
    /// restarted at 1 and its unacknowledged input was dropped.
    Restarted,
    /// The object is no longer this client's: its prediction stopped.
    Stopped,
    /// Nothing changed (the same epoch again, an older epoch, or an
    /// object this client neither owns nor predicts).
    Unchanged,
    /// It would have started a prediction past [`MAX_PREDICTED`].
    Refused,
}

/// The predictions of every object this client owns (see the module doc).
#[derive(Debug, Clone, Default)]
pub struct Predictions {
    predictors: BTreeMap<u32, Predictor>,
    refused: u64,
}

impl Predictions {
    /// No predicted object yet.
    pub fn new() -> Predictions {
        Predictions::default()
    }

    /// Applies one ROLE frame. `mine` says whether it names this client as
    /// the owner; `start` is where the client holds the object now, and
    /// `params` and `tolerance` configure a prediction that starts (see
    /// [`Predictor::new`]). A ROLE older than the predicted epoch changes
    /// nothing.
    pub fn handle_role(
        &mut self,
        role: &RoleChange,
        mine: bool,
        start: [f32; 3],
        params: InputParams,
        tolerance: f32,
    ) -> RoleOutcome {
        let id = role.object_id;
        if self
            .predictors
            .get(&id)
            .is_some_and(|p| role.ownership_epoch < p.epoch())
        {
            return RoleOutcome::Unchanged;
        }
        if !(mine && role.role == Role::OwnerPredicted) {
            return match self.predictors.remove(&id) {
                Some(_) => RoleOutcome::Stopped,
                None => RoleOutcome::Unchanged,
            };
        }
        let full = self.predictors.len() >= MAX_PREDICTED;
        match self.predictors.get_mut(&id) {
            Some(p) if p.epoch() == role.ownership_epoch => RoleOutcome::Unchanged,
            Some(p) => {
                p.handle_epoch(role.ownership_epoch, start);
                RoleOutcome::Restarted
            }
            None if full => {
                self.refused += 1;
                RoleOutcome::Refused
            }
            None => {
                let p = Predictor::new(params, tolerance, id, role.ownership_epoch, start);
                self.predictors.insert(id, p);
                RoleOutcome::Started
            }
        }
    }

    /// The object despawned: its prediction (if any) stops.
    pub fn handle_forget(&mut self, object_id: u32) -> bool {
        self.predictors.remove(&object_id).is_some()
    }

    /// One local step of `object_id` (see [`Predictor::handle_input`]);
    /// `None` when it is not predicted.
    pub fn handle_input(
        &mut self,
        object_id: u32,
        sim_tick: u32,
        dt: f32,
        move_velocity: [f32; 3],
        fire: Option<FireCommand>,
    ) -> Option<InputFrame> {
        let p = self.predictors.get_mut(&object_id)?;
        Some(p.handle_input(sim_tick, dt, move_velocity, fire))
    }

    /// The one bundle to send now: every predicted object's oldest
    /// unacknowledged frames, object by object, each object's share of
    /// the [`MAX_BUNDLE_FRAMES`] fair; `None` when nothing is unacknowledged.
    pub fn poll_bundle(&self, acked_snapshot_id: u32) -> Option<InputBundle> {
        let wants: Vec<usize> = self.predictors.values().map(Predictor::unacked).collect();
        let shares = fair_shares(&wants, MAX_BUNDLE_FRAMES);
        let frames: Vec<InputFrame> = self
            .predictors
            .values()
            .zip(shares)
            .flat_map(|(p, share)| p.unacked_frames().take(share))
            .collect();
        (!frames.is_empty()).then_some(InputBundle {
            acked_snapshot_id,
            last_seen_snapshot_id: acked_snapshot_id,
            frames,
        })
    }

    /// Reconciles every predicted object whose `last_input_seq` the
    /// snapshot carries; the corrections, in the snapshot's order.
    pub fn handle_applied(&mut self, applied: &Applied) -> Vec<Correction> {
        let mut corrections = Vec::new();
        for &(object_id, seq) in &applied.input_acks {
            if let Some(p) = self.predictors.get_mut(&object_id)
                && let Some(view) = applied.state.get(&object_id)
                && let Some(c) = p.handle_authoritative(seq, view.position)
            {
                corrections.push(c);
            }
        }
        corrections
    }

    /// The position to draw `object_id` at this frame (see
    /// [`Predictor::poll_render`]); `None` when it is not predicted.
    pub fn poll_render(&mut self, object_id: u32) -> Option<[f32; 3]> {
        self.predictors
            .get_mut(&object_id)
            .map(Predictor::poll_render)
    }

    /// The prediction of `object_id`.
    pub fn get(&self, object_id: u32) -> Option<&Predictor> {
        self.predictors.get(&object_id)
    }

    /// The predicted objects, in id order.
    pub fn objects(&self) -> impl Iterator<Item = u32> + '_ {
        self.predictors.keys().copied()
    }

    /// How many objects are predicted.
    pub fn len(&self) -> usize {
        self.predictors.len()
    }

    /// Whether nothing is predicted.
    pub fn is_empty(&self) -> bool {
        self.predictors.is_empty()
    }

    /// ROLE frames ignored because [`MAX_PREDICTED`] objects were
    /// predicted already.
    pub fn refused(&self) -> u64 {
        self.refused
    }
}

/// Splits `budget` among `wants`: the smallest wants are met in full and
/// the rest is shared evenly (water-filling), so no share exceeds its want
/// and nothing is left over while someone wants more.
fn fair_shares(wants: &[usize], budget: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..wants.len()).collect();
    order.sort_by_key(|&i| wants[i]);
    let mut shares = vec![0; wants.len()];
    let mut left = budget;
    for (k, &i) in order.iter().enumerate() {
        let share = wants[i].min(left.div_ceil(wants.len() - k));
        shares[i] = share;
        left -= share;
    }
    shares
}

#[cfg(test)]
mod tests {
    use citadel_wire::tsync::RoleEvent;

    use super::*;

    fn role(object_id: u32, owner: u64, epoch: u32, role: Role) -> RoleChange {
        RoleChange {
            object_id,
            role,
            owner,
            ownership_epoch: epoch,
            gen_epoch: 0,
            event: RoleEvent::Handoff,
        }
    }

    fn apply(p: &mut Predictions, r: RoleChange) -> RoleOutcome {
        p.handle_role(&r, r.owner == 1, [0.0; 3], InputParams::default(), 0.125)
    }

    #[test]
    fn shares_meet_small_wants_and_split_the_rest_evenly() {
        assert_eq!(fair_shares(&[3, 40, 40], 32), vec![3, 15, 14]);
        assert_eq!(fair_shares(&[40, 40, 40], 32), vec![11, 11, 10]);
        assert_eq!(fair_shares(&[2, 5], 32), vec![2, 5]);
        assert_eq!(fair_shares(&[], 32), Vec::<usize>::new());
        assert_eq!(fair_shares(&[100; 4], 32), vec![8; 4]);
    }

    #[test]
    fn roles_start_restart_and_stop_one_object_and_the_bound_refuses_more() {
        let mut p = Predictions::new();
        let owned = Role::OwnerPredicted;
        assert_eq!(apply(&mut p, role(4, 1, 1, owned)), RoleOutcome::Started);
        assert_eq!(apply(&mut p, role(9, 1, 3, owned)), RoleOutcome::Started);
        assert_eq!(apply(&mut p, role(9, 1, 3, owned)), RoleOutcome::Unchanged);
        p.handle_input(9, 0, 0.1, [100.0, 0.0, 0.0], None).unwrap();
        p.handle_input(9, 0, 0.1, [100.0, 0.0, 0.0], None).unwrap();
        assert_eq!(apply(&mut p, role(9, 1, 4, owned)), RoleOutcome::Restarted);
        let f = p.handle_input(9, 0, 0.1, [0.0; 3], None).unwrap();
        assert_eq!((f.input_seq, f.ownership_epoch), (1, 4));
        assert_eq!(apply(&mut p, role(9, 1, 2, owned)), RoleOutcome::Unchanged);
        // Handed to someone else: only that object stops.
        assert_eq!(apply(&mut p, role(4, 2, 2, owned)), RoleOutcome::Stopped);
        assert_eq!(p.objects().collect::<Vec<_>>(), vec![9]);
        assert_eq!(
            apply(&mut p, role(9, 0, 5, Role::ServerSimulated)),
            RoleOutcome::Stopped
        );
        assert!(p.is_empty());
        for id in 0..MAX_PREDICTED as u32 {
            assert_eq!(apply(&mut p, role(id, 1, 1, owned)), RoleOutcome::Started);
        }
        assert_eq!(apply(&mut p, role(99, 1, 1, owned)), RoleOutcome::Refused);
        assert_eq!((p.len(), p.refused()), (MAX_PREDICTED, 1));
        assert!(p.handle_input(99, 0, 0.1, [1.0; 3], None).is_none());
        assert!(p.handle_forget(3) && !p.handle_forget(3));
    }

    #[test]
    fn one_bundle_carries_every_objects_oldest_frames_within_the_wire_limit() {
        let mut p = Predictions::new();
        assert!(p.poll_bundle(0).is_none());
        for id in [2, 5] {
            apply(&mut p, role(id, 1, 1, Role::OwnerPredicted));
        }
        for _ in 0..3 {
            p.handle_input(2, 0, 0.01, [1.0, 0.0, 0.0], None);
        }
        for _ in 0..40 {
            p.handle_input(5, 0, 0.01, [0.0, 1.0, 0.0], None);
        }
        let b = p.poll_bundle(7).unwrap();
        assert_eq!(b.frames.len(), MAX_BUNDLE_FRAMES);
        assert_eq!(b.acked_snapshot_id, 7);
        let of = |id: u32| -> Vec<u32> {
            b.frames
                .iter()
                .filter(|f| f.object_id == id)
                .map(|f| f.input_seq)
                .collect()
        };
        assert_eq!(of(2), vec![1, 2, 3]);
        assert_eq!(of(5), (1..=29).collect::<Vec<_>>(), "the oldest first");
    }
}
