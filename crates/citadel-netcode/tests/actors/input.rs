//! Validated owner input through the actor server (§3.7): a predicted
//! owner's frames move its object in sequence order and its snapshots echo
//! `last_input_seq`; frames from anyone else are refused per reason and
//! change nothing; the speed and step clamps bound a cheating owner.

use citadel_netcode::actors::InputRefusal;
use citadel_wire::tsync::{InputFrame, SnapshotUpdate};

use super::harness::{Stage, Zone, at, clean};
use super::{PREDICTED, predicted_config};

pub(super) fn frame(
    object_id: u32,
    input_seq: u32,
    move_velocity: [f32; 3],
    dt: f32,
) -> InputFrame {
    InputFrame {
        input_seq,
        sim_tick: input_seq,
        dt,
        object_id,
        ownership_epoch: 1,
        move_velocity,
        ..InputFrame::default()
    }
}

/// Every snapshot entry `participant_id` received for `object_id`.
pub(super) fn updates(
    stage: &mut Stage,
    participant_id: u64,
    object_id: u32,
) -> Vec<SnapshotUpdate> {
    stage
        .peer(participant_id)
        .snapshots()
        .into_iter()
        .flat_map(|s| s.updates)
        .filter(|u| u.object_id == object_id)
        .collect()
}

pub(super) fn near(got: [f32; 3], want: [f32; 3]) -> bool {
    got.iter().zip(want).all(|(g, w)| (g - w).abs() < 1.0)
}

/// Owners 1 (predicted, at the origin) and 2 (predicted, at x = 500),
/// observer 3 without presence, 4 with a relayed avatar.
pub(super) fn stage() -> (Stage, u32, u32, u32) {
    stage_with(predicted_config())
}

/// [`stage`] under another actor configuration.
fn stage_with(config: citadel_netcode::actors::ActorConfig) -> (Stage, u32, u32, u32) {
    let mut stage = Stage::with_clients(
        config,
        clean(30.0),
        &[
            (1, Zone::Lobby),
            (2, Zone::Lobby),
            (3, Zone::Lobby),
            (4, Zone::Lobby),
        ],
    );
    let a = stage.presence(1, PREDICTED, at(0.0, 0.0)).unwrap();
    let b = stage.presence(2, PREDICTED, at(500.0, 0.0)).unwrap();
    let relay = stage.presence(4, 0, at(-500.0, 0.0)).unwrap();
    stage.settle();
    (stage, a, b, relay)
}

#[test]
fn a_predicted_owners_inputs_move_its_object_in_order_and_its_snapshots_echo_last_input_seq() {
    let (mut stage, a, _, _) = stage();
    let v = [1_000.0, 0.0, 0.0];
    // Out of order inside the bundle: the queue releases 1, 2, 3.
    let out = stage.input(
        1,
        vec![
            frame(a, 2, v, 0.05),
            frame(a, 1, v, 0.05),
            frame(a, 3, v, 0.05),
        ],
    );
    assert_eq!((out.accepted, out.applied, out.unserved), (3, 3, 0));
    // 5 waits for 4; 4 releases both.
    let out = stage.input(1, vec![frame(a, 5, v, 0.05)]);
    assert_eq!(
        (out.accepted, out.applied),
        (1, 0),
        "5 is buffered behind the gap"
    );
    let out = stage.input(1, vec![frame(a, 4, v, 0.05), frame(a, 3, v, 0.05)]);
    assert_eq!((out.accepted, out.applied), (1, 2));
    assert_eq!(out.refused(InputRefusal::Stale), 1, "3 was applied already");
    stage.run(12);
    let own = updates(&mut stage, 1, a);
    let last = own.last().expect("the owner's snapshots carry its object");
    assert_eq!(last.last_input_seq, Some(5), "the owner sees the watermark");
    assert_eq!(stage.peer(1).position(a), Some([250.0, 0.0, 0.0]));
    assert!(
        own.iter()
            .filter_map(|u| u.velocity)
            .any(|vel| near(vel, v)),
        "the input's velocity replicates"
    );
    let seen = updates(&mut stage, 3, a);
    assert!(!seen.is_empty(), "an observer sees the object move");
    assert!(
        seen.iter().all(|u| u.last_input_seq.is_none()),
        "last_input_seq goes to the owner only"
    );
    let observed = stage
        .peer(3)
        .position(a)
        .expect("observer holds the object");
    assert!(
        near(observed, [250.0, 0.0, 0.0]),
        "observer at {observed:?}"
    );
}

#[test]
fn input_from_anyone_but_the_predicted_owner_is_refused_and_changes_nothing() {
    let (mut stage, a, b, relay) = stage();
    let v = [1_000.0, 0.0, 0.0];
    let out = stage.input(2, vec![frame(a, 1, v, 0.05), frame(a, 2, v, 0.05)]);
    assert_eq!(out.refused(InputRefusal::NotOwner), 2, "2 does not own a");
    assert_eq!((out.accepted, out.applied, out.unserved), (0, 0, 2));
    let out = stage.input(3, vec![frame(a, 1, v, 0.05)]);
    assert_eq!(out.refused(InputRefusal::NoPresence), 1);
    let out = stage.input(4, vec![frame(relay, 1, v, 0.05)]);
    assert_eq!(
        out.refused(InputRefusal::Relay),
        1,
        "relayed avatars ignore input"
    );
    // The owner itself, with a stale epoch or the reserved sequence 0.
    let mut wrong_epoch = frame(a, 1, v, 0.05);
    wrong_epoch.ownership_epoch = 2;
    let out = stage.input(1, vec![wrong_epoch, frame(a, 0, v, 0.05)]);
    assert_eq!(
        out.refusals().collect::<Vec<_>>(),
        vec![(InputRefusal::WrongEpoch, 1), (InputRefusal::ZeroSeq, 1)]
    );
    stage.run(12);
    assert_eq!(stage.peer(1).position(a), Some([0.0, 0.0, 0.0]));
    assert_eq!(stage.peer(2).position(b), Some([500.0, 0.0, 0.0]));
    assert_eq!(stage.peer(4).position(relay), Some([-500.0, 0.0, 0.0]));
    assert!(
        updates(&mut stage, 1, a)
            .iter()
            .all(|u| u.last_input_seq.unwrap_or(0) == 0),
        "no input was applied"
    );
    // The refused frames did not use up sequence 1: the owner's own is applied.
    let out = stage.input(1, vec![frame(a, 1, v, 0.05)]);
    assert_eq!((out.accepted, out.applied), (1, 1));
}

#[test]
fn a_speed_hacking_owner_moves_no_faster_than_the_clamps() {
    let (mut stage, a, _, _) = stage();
    // 50 times the 2 000 cm/s clamp, over 1 s steps (clamped to 0.1 s).
    let frames = (1..=20)
        .map(|seq| frame(a, seq, [60_000.0, 80_000.0, 0.0], 1.0))
        .collect();
    let out = stage.input(1, frames);
    assert_eq!(out.applied, 20);
    stage.run(12);
    // 20 × 0.1 s at 2 000 cm/s along (0.6, 0.8): 4 000 cm.
    let got = stage.peer(1).position(a).expect("owner holds its object");
    assert!(near(got, [2_400.0, 3_200.0, 0.0]), "moved to {got:?}");
    let speed = updates(&mut stage, 1, a)
        .iter()
        .filter_map(|u| u.velocity)
        .map(|v| v.iter().map(|c| c * c).sum::<f32>().sqrt())
        .fold(0.0, f32::max);
    assert!(
        speed > 1_990.0 && speed < 2_010.0,
        "replicated speed {speed}"
    );
    // A non-finite intent moves nothing.
    let out = stage.input(1, vec![frame(a, 21, [f32::NAN, 0.0, 0.0], 0.05)]);
    assert_eq!(out.applied, 1);
    stage.run(12);
    let still = stage.peer(1).position(a).expect("owner holds its object");
    assert!(near(still, got), "a NaN intent stays put: {still:?}");
}

#[test]
fn the_configured_input_clamps_replace_the_spec_defaults() {
    let (mut stage, a, _, _) = stage_with(citadel_netcode::actors::ActorConfig {
        input_max_speed: 500.0,
        input_max_dt: 0.05,
        ..predicted_config()
    });
    let frames = (1..=20)
        .map(|seq| frame(a, seq, [6_000.0, 8_000.0, 0.0], 1.0))
        .collect();
    assert_eq!(stage.input(1, frames).applied, 20);
    stage.run(12);
    // 20 × 0.05 s at 500 cm/s along (0.6, 0.8): 500 cm.
    let got = stage.peer(1).position(a).expect("owner holds its object");
    assert!(near(got, [300.0, 400.0, 0.0]), "moved to {got:?}");
}
