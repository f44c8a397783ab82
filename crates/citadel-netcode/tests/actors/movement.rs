//! The two-phase input path of a movement hook: staged frames carry their
//! built-in results and move nothing until judged; a veto consumes a frame
//! without moving, a correction replaces the result (bounds only), no
//! verdicts means the built-in integration exactly, and a handoff between
//! the phases makes the batch stale.

use citadel_netcode::actors::{
    InputOutcome, InputRefusal, Kinematics, MovementBatch, MovementOutcome, Verdict,
};
use citadel_wire::tsync::{FireCommand, InputBundle, InputFrame};

use super::harness::Stage;
use super::input::{frame, near, stage, updates};

const V: [f32; 3] = [1_000.0, 0.0, 0.0];

fn staged(
    stage: &mut Stage,
    participant_id: u64,
    frames: Vec<InputFrame>,
) -> (InputOutcome, Option<MovementBatch>) {
    let bundle = InputBundle {
        acked_snapshot_id: 0,
        last_seen_snapshot_id: 0,
        frames,
    };
    // These tests drive one object per bundle: at most one batch.
    let (outcome, batches) =
        stage.apply(|s, now| s.handle_input_staged(participant_id, &bundle, now));
    assert!(batches.len() <= 1, "one object per bundle here");
    (outcome, batches.into_iter().next())
}

fn judged(
    stage: &mut Stage,
    batch: &MovementBatch,
    verdicts: Option<&[Verdict]>,
) -> MovementOutcome {
    stage.apply(|s, now| s.handle_movement(batch, verdicts, now))
}

/// The newest `last_input_seq` the owner's snapshots echoed for `object_id`.
fn echoed(stage: &mut Stage, participant_id: u64, object_id: u32) -> u32 {
    updates(stage, participant_id, object_id)
        .iter()
        .filter_map(|u| u.last_input_seq)
        .max()
        .unwrap_or(0)
}

/// The motion the judge sees at the end of `verdicts`, walked from the
/// batch's start with the batch's own step.
fn walked(batch: &MovementBatch, verdicts: &[Verdict]) -> Kinematics {
    batch
        .frames
        .iter()
        .zip(verdicts)
        .fold(batch.start, |k, (f, v)| batch.step(f, k, v))
}

#[test]
fn a_vetoed_frame_is_consumed_without_moving_and_the_watermark_still_advances() {
    let (mut stage, a, _, _) = stage();
    let frames = (1..=3).map(|seq| frame(a, seq, V, 0.05)).collect();
    let (out, batch) = staged(&mut stage, 1, frames);
    assert_eq!((out.accepted, out.applied), (3, 0), "staged, not applied");
    let batch = batch.expect("three frames released");
    let seqs: Vec<u32> = batch.frames.iter().map(|f| f.input_seq).collect();
    assert_eq!((seqs, batch.last_input_seq), (vec![1, 2, 3], 3));
    assert_eq!(batch.start.position, [0.0; 3]);
    let first = batch.proposed(&batch.frames[0], batch.start);
    assert_eq!((first.position, first.velocity), ([50.0, 0.0, 0.0], V));

    // Between the phases the object and its watermark are as before.
    stage.run(12);
    assert_eq!(stage.peer(1).position(a), Some([0.0; 3]));
    assert_eq!(echoed(&mut stage, 1, a), 0);

    let verdicts = [Verdict::Accept, Verdict::Veto, Verdict::Accept];
    let moved = judged(&mut stage, &batch, Some(&verdicts));
    assert_eq!(
        (moved.input.applied, moved.vetoed, moved.corrected),
        (3, 1, 0)
    );
    assert!(!moved.fallback && !moved.stale);
    assert_eq!(walked(&batch, &verdicts).position, [100.0, 0.0, 0.0]);
    stage.run(12);
    assert_eq!(stage.peer(1).position(a), Some([100.0, 0.0, 0.0]));
    assert_eq!(echoed(&mut stage, 1, a), 3);

    // Every frame vetoed: nothing moves, the watermark advances, the
    // object stands still, and the consumed sequence numbers are stale.
    let (_, batch) = staged(
        &mut stage,
        1,
        vec![frame(a, 4, V, 0.05), frame(a, 5, V, 0.05)],
    );
    let batch = batch.expect("released");
    let moved = judged(&mut stage, &batch, Some(&[Verdict::Veto, Verdict::Veto]));
    assert_eq!(moved.vetoed, 2);
    stage.run(12);
    assert_eq!(stage.peer(1).position(a), Some([100.0, 0.0, 0.0]));
    assert_eq!(echoed(&mut stage, 1, a), 5);
    let still = walked(&batch, &[Verdict::Veto, Verdict::Veto]);
    assert_eq!(still.velocity, [0.0; 3], "a vetoed frame stands still");
    let (out, batch) = staged(&mut stage, 1, vec![frame(a, 5, V, 0.05)]);
    assert_eq!(out.refused(InputRefusal::Stale), 1);
    assert!(batch.is_none(), "nothing released, nothing to judge");
}

#[test]
fn a_correction_replaces_the_result_clamped_to_the_bounds_but_not_to_the_speed() {
    let (mut stage, a, _, _) = stage();
    let frames = vec![frame(a, 1, V, 0.05), frame(a, 2, V, 0.05)];
    let batch = staged(&mut stage, 1, frames).1.expect("released");
    // Faster than the 2 000 cm/s input clamp: game logic is trusted.
    let fast = Kinematics {
        position: [3_000.0, 5.0, 0.0],
        velocity: [5_000.0, 0.0, 0.0],
    };
    let verdicts = [Verdict::Correct(fast), Verdict::Accept];
    let moved = judged(&mut stage, &batch, Some(&verdicts));
    assert_eq!((moved.corrected, moved.input.applied), (1, 2));
    // The next frame's built-in result starts from the correction.
    assert_eq!(walked(&batch, &verdicts).position, [3_050.0, 5.0, 0.0]);
    stage.run(12);
    assert_eq!(stage.peer(1).position(a), Some([3_050.0, 5.0, 0.0]));
    assert_eq!(echoed(&mut stage, 1, a), 2);

    // Out of bounds and non-finite: clamped like integration clamps.
    let batch = staged(&mut stage, 1, vec![frame(a, 3, V, 0.05)])
        .1
        .expect("released");
    let wild = Kinematics {
        position: [1.0e9, 0.0, f32::NAN],
        velocity: [f32::INFINITY, 0.0, 0.0],
    };
    let k = batch.step(&batch.frames[0], batch.start, &Verdict::Correct(wild));
    assert_eq!(k.position, [262_144.0, 0.0, -32_768.0]);
    assert_eq!(k.velocity, [0.0; 3]);
    let moved = judged(&mut stage, &batch, Some(&[Verdict::Correct(wild)]));
    assert_eq!(moved.corrected, 1);
    stage.run(12);
    let got = stage.peer(1).position(a).expect("owner holds its object");
    assert!(near(got, [262_144.0, 0.0, -32_768.0]), "clamped to {got:?}");
}

#[test]
fn a_handoff_between_the_phases_makes_the_batch_stale() {
    let (mut stage, a, b, _) = stage();
    let batch = staged(
        &mut stage,
        1,
        vec![frame(a, 1, V, 0.05), frame(a, 2, V, 0.05)],
    )
    .1
    .expect("released");
    stage
        .apply(|s, now| s.handle_set_owner(a, 2, now))
        .expect("2 sees a");
    let moved = judged(
        &mut stage,
        &batch,
        Some(&[Verdict::Accept, Verdict::Accept]),
    );
    assert!(moved.stale);
    assert_eq!((moved.input.applied, moved.input.fired), (0, 0));
    stage.run(12);
    assert_eq!(stage.peer(2).position(a), Some([0.0; 3]), "nothing moved");
    // The new owner's epoch-2 sequence starts at 1, untouched by the verdict.
    let mut own = frame(a, 1, V, 0.05);
    own.ownership_epoch = 2;
    assert_eq!(stage.input(2, vec![own]).applied, 1);
    stage.run(12);
    assert_eq!(stage.peer(2).position(a), Some([50.0, 0.0, 0.0]));

    // A batch staged behind another one makes the earlier one stale; the
    // later one applies.
    let first = staged(&mut stage, 2, vec![frame(b, 1, V, 0.05)])
        .1
        .expect("released");
    let second = staged(&mut stage, 2, vec![frame(b, 2, V, 0.05)])
        .1
        .expect("released");
    assert!(judged(&mut stage, &first, None).stale);
    let moved = judged(&mut stage, &second, None);
    assert!(!moved.stale && moved.fallback);
    stage.run(12);
    assert_eq!(stage.peer(2).position(b), Some([550.0, 0.0, 0.0]));
}

#[test]
fn without_verdicts_the_built_in_integration_applies_exactly_as_handle_input() {
    let fire = FireCommand {
        origin: [0.0, 0.0, 0.0],
        direction: [0.0, -1.0, 0.0],
    };
    let frames = |a: u32| {
        let mut frames: Vec<InputFrame> = (1..=6)
            .map(|seq| {
                frame(
                    a,
                    seq,
                    [300.0 * seq as f32, 40_000.0, -10.0],
                    0.03 * seq as f32,
                )
            })
            .collect();
        frames[2].fire = Some(fire);
        frames
    };
    let (mut plain, a, _, _) = stage();
    let direct = plain.input(1, frames(a));
    for verdicts in [None, Some(&[Verdict::Veto][..])] {
        let (mut hooked, a2, _, _) = stage();
        assert_eq!(a2, a);
        let (_, batch) = staged(&mut hooked, 1, frames(a));
        let batch = batch.expect("released");
        // No verdicts, or not one per frame: the whole batch falls back.
        let moved = judged(&mut hooked, &batch, verdicts);
        assert!(moved.fallback);
        assert_eq!(moved.vetoed, 0);
        assert_eq!(
            (moved.input.applied, moved.input.fired),
            (direct.applied, direct.fired)
        );
        plain.run(12);
        hooked.run(12);
        assert_eq!(hooked.peer(1).position(a), plain.peer(1).position(a));
        assert_eq!(echoed(&mut hooked, 1, a), 6);
        assert_eq!(hooked.peer(1).rewinds().len(), 1, "the shot is answered");
    }
    // A vetoed frame's shot is still resolved, from where the object stood.
    let (mut hooked, a, _, _) = stage();
    let batch = staged(&mut hooked, 1, frames(a)).1.expect("released");
    let moved = judged(&mut hooked, &batch, Some(&[Verdict::Veto; 6]));
    assert_eq!((moved.vetoed, moved.input.fired), (6, 1));
}
