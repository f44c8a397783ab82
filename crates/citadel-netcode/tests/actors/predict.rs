//! Owner prediction against the real actor server over simulated links
//! (§3.7, §4.3): the owner's [`Predictor`] integrates each input at once
//! and sends redundant bundles up a lossy link; snapshots come back down
//! another; every `last_input_seq` they carry is reconciled. With a clean
//! link the prediction equals the server at every acknowledged sequence;
//! with loss, latency and jitter the correction stays bounded; a speed
//! hacker moves no faster than the clamp; a handoff in the middle of the
//! stream leaves both owners consistent with the server.

use bytes::BytesMut;
use citadel_netcode::input::InputParams;
use citadel_netcode::predict::{Correction, Predictor};
use citadel_netcode::sim::{LinkConfig, SimLink};
use citadel_wire::tsync::{HelloParams, InputBundle, RoleChange};
use citadel_wire::{WireBody, decode_framed};

use super::harness::{Stage, Zone, at, clean};
use super::{PREDICTED, predicted_config};

const DT: f32 = 1.0 / 60.0;

/// One owner: its predictor and its uplink.
struct Owner {
    participant_id: u64,
    predictor: Predictor,
    up: SimLink,
    corrections: Vec<Correction>,
}

impl Owner {
    fn new(participant_id: u64, predictor: Predictor, link: LinkConfig) -> Owner {
        Owner {
            participant_id,
            predictor,
            up: SimLink::new(link, participant_id * 97 + 3),
            corrections: Vec::new(),
        }
    }

    /// One local step with `move_velocity`: predicted now, sent up.
    fn input(&mut self, stage: &Stage, move_velocity: [f32; 3]) {
        let tick = stage.now.0 as u32;
        self.predictor.handle_input(tick, DT, move_velocity, None);
        self.send(stage);
    }

    fn send(&mut self, stage: &Stage) {
        if let Some(bundle) = self.predictor.poll_bundle(0) {
            self.up
                .send(stage.ms(), bundle.to_envelope().encode_framed().to_vec());
        }
    }

    /// Hands the server what arrived by now.
    fn deliver(&mut self, stage: &mut Stage) {
        let pid = self.participant_id;
        for packet in self.up.poll(stage.ms()) {
            let mut buf = BytesMut::from(&packet[..]);
            let envelope = decode_framed(&mut buf).unwrap().unwrap();
            let bundle = InputBundle::decode(&envelope.body).unwrap();
            let _ = stage.apply(|s, now| s.handle_input(pid, &bundle, now));
        }
    }

    /// Reconciles with every snapshot the owner applied since last time.
    fn reconcile(&mut self, stage: &mut Stage) {
        let object_id = self.predictor.object_id();
        for applied in stage.peer(self.participant_id).take_applied() {
            for &(id, seq) in &applied.input_acks {
                if id != object_id {
                    continue;
                }
                let Some(view) = applied.state.get(&id) else {
                    continue;
                };
                if let Some(c) = self.predictor.handle_authoritative(seq, view.position) {
                    self.corrections.push(c);
                }
            }
        }
    }
}

fn params() -> (InputParams, f32) {
    let hello = HelloParams::default();
    (
        InputParams::from_hello(&hello),
        1.0 / hello.position_values_per_unit as f32,
    )
}

/// One owner of a predicted avatar at the origin, over `link` both ways.
fn setup(link: LinkConfig) -> (Stage, Owner) {
    let mut stage = Stage::with_clients(predicted_config(), link, &[(1, Zone::Lobby)]);
    let object = stage.presence(1, PREDICTED, at(0.0, 0.0)).unwrap();
    stage.settle();
    let (params, tolerance) = params();
    let predictor = Predictor::new(params, tolerance, object, 1, [0.0; 3]);
    (stage, Owner::new(1, predictor, link))
}

/// `ticks` steps, the owner moving by `intent(tick)` each one.
fn drive(stage: &mut Stage, owner: &mut Owner, ticks: u64, intent: impl Fn(u64) -> [f32; 3]) {
    for _ in 0..ticks {
        owner.input(stage, intent(stage.now.0));
        owner.deliver(stage);
        stage.step();
        owner.reconcile(stage);
    }
}

fn p99(mut values: Vec<f32>) -> f32 {
    values.sort_by(f32::total_cmp);
    values[(values.len() * 99).div_ceil(100) - 1]
}

#[test]
fn with_a_clean_link_the_prediction_equals_the_server_at_every_acknowledged_sequence() {
    let (mut stage, mut owner) = setup(clean(40.0));
    drive(&mut stage, &mut owner, 300, |_| [700.0, -300.0, 0.0]);
    assert!(
        owner.corrections.len() >= 50,
        "{} acks",
        owner.corrections.len()
    );
    assert!(
        owner
            .corrections
            .iter()
            .all(|c| c.error == 0.0 && c.magnitude == 0.0),
        "zero correction at every acknowledged sequence"
    );
    let server = stage.server.presence_of(1).unwrap();
    let seen = stage.peer(1).position(server).unwrap();
    let acked = owner.predictor.acked();
    // The last acknowledged prediction is where the snapshot holds the object.
    let expect = [700.0 * DT * acked as f32, -300.0 * DT * acked as f32];
    assert!((seen[0] - expect[0]).abs() < 0.5 && (seen[1] - expect[1]).abs() < 0.5);
}

#[test]
fn with_loss_latency_and_jitter_the_correction_stays_bounded() {
    let link = LinkConfig {
        latency_ms: 40.0,
        jitter_ms: 20.0,
        loss: 0.10,
        duplicate: 0.0,
    };
    let (mut stage, mut owner) = setup(link);
    // A changing intent: a slow circle at 1 500 cm/s.
    drive(&mut stage, &mut owner, 1_200, |t| {
        let a = t as f32 / 90.0;
        [1_500.0 * a.cos(), 1_500.0 * a.sin(), 0.0]
    });
    let magnitudes: Vec<f32> = owner.corrections.iter().map(|c| c.magnitude).collect();
    assert!(magnitudes.len() >= 150, "{} acks", magnitudes.len());
    let p99 = p99(magnitudes.clone());
    let max = magnitudes.iter().copied().fold(0.0, f32::max);
    eprintln!(
        "prediction under 10% loss, 80 ms RTT, 20 ms jitter: {} acks, correction p99 {p99} cm, max {max} cm",
        magnitudes.len()
    );
    assert!(p99 <= 1.0, "p99 correction {p99} cm");
    assert!(owner.predictor.unacked() <= 32, "acks keep up");
}

#[test]
fn a_speed_hacking_owner_moves_no_faster_than_the_clamp() {
    let (mut stage, mut owner) = setup(clean(40.0));
    let (params, tolerance) = params();
    // The cheater predicts with no clamps: 10× the speed, 1 s steps.
    let object = owner.predictor.object_id();
    let cheat = InputParams {
        max_speed: 200_000.0,
        max_dt: 10.0,
        ..params
    };
    owner.predictor = Predictor::new(cheat, tolerance, object, 1, [0.0; 3]);
    for _ in 0..30 {
        let tick = stage.now.0 as u32;
        owner
            .predictor
            .handle_input(tick, 1.0, [20_000.0, 0.0, 0.0], None);
        owner.send(&stage);
        owner.deliver(&mut stage);
        stage.step();
        owner.reconcile(&mut stage);
    }
    for _ in 0..12 {
        owner.send(&stage);
        owner.deliver(&mut stage);
        stage.step();
        owner.reconcile(&mut stage);
    }
    let server = stage.peer(1).position(object).unwrap();
    let acked = owner.predictor.acked() as f32;
    // Each frame moved at most 2 000 cm/s × 0.1 s.
    assert!(acked >= 20.0);
    assert!(server[0] <= acked * 200.0 + 0.5, "server at {server:?}");
    assert!(
        (server[0] - acked * 200.0).abs() < 0.5,
        "the clamp, not zero"
    );
    assert!(
        owner.corrections.iter().any(|c| c.magnitude > 1_000.0),
        "the cheater's own prediction is corrected"
    );
}

#[test]
fn a_handoff_in_the_middle_of_the_stream_keeps_both_owners_consistent() {
    let link = clean(30.0);
    let mut stage = Stage::with_clients(
        predicted_config(),
        link,
        &[(1, Zone::Lobby), (2, Zone::Lobby)],
    );
    let object = stage.presence(1, PREDICTED, at(0.0, 0.0)).unwrap();
    stage.presence(2, PREDICTED, at(0.0, 900.0)).unwrap();
    stage.settle();
    let (params, tolerance) = params();
    let mut first = Owner::new(
        1,
        Predictor::new(params, tolerance, object, 1, [0.0; 3]),
        link,
    );
    drive(&mut stage, &mut first, 60, |_| [600.0, 0.0, 0.0]);
    // Game logic hands 1's avatar to 2 while 1 keeps sending.
    stage
        .apply(|s, now| s.handle_set_owner(object, 2, now))
        .unwrap();
    drive(&mut stage, &mut first, 12, |_| [600.0, 0.0, 0.0]);
    let role: RoleChange = *stage
        .peer(2)
        .roles()
        .iter()
        .rfind(|r| r.object_id == object)
        .expect("2 hears the handoff");
    assert_eq!((role.owner, role.ownership_epoch), (2, 2));
    // 2 starts predicting from what its snapshots show, under epoch 2.
    let start = stage.peer(2).position(object).unwrap();
    stage.peer(2).take_applied();
    let mut second = Owner::new(
        2,
        Predictor::new(params, tolerance, object, role.ownership_epoch, start),
        link,
    );
    for _ in 0..90 {
        first.input(&stage, [600.0, 0.0, 0.0]);
        first.deliver(&mut stage);
        second.input(&stage, [0.0, -400.0, 0.0]);
        second.deliver(&mut stage);
        stage.step();
        first.reconcile(&mut stage);
        second.reconcile(&mut stage);
    }
    // Nothing new: the last bundles land and their snapshots come back.
    for _ in 0..12 {
        second.send(&stage);
        second.deliver(&mut stage);
        stage.step();
        second.reconcile(&mut stage);
    }
    assert_eq!(second.predictor.unacked(), 0, "every input acknowledged");
    let server = stage.server.presence_of(1).unwrap();
    assert_eq!(server, object);
    let p1 = stage.peer(1).position(object).unwrap();
    let p2 = stage.peer(2).position(object).unwrap();
    assert_eq!(p1, p2, "both clients reconstruct the same object");
    let predicted = second.predictor.position();
    assert!(
        (0..3).all(|a| (predicted[a] - p2[a]).abs() <= 0.125),
        "the new owner's prediction {predicted:?} is the server's {p2:?}"
    );
    assert!(
        second.corrections.iter().all(|c| c.magnitude == 0.0),
        "the new owner never needed a correction"
    );
    assert!(
        (p2[0] - start[0]).abs() < 0.2,
        "the old owner's input stopped moving it: {p2:?} from {start:?}"
    );
}
