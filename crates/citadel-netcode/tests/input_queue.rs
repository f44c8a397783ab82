//! The in-order owner input queue (§3.7): every refusal, release of the
//! contiguous run only, the clamps, the epoch reset, bounded memory, and a
//! reordered, duplicated and lossy stream over `SimLink`.

use std::collections::BTreeSet;

use citadel_netcode::input::{InputParams, InputQueue, MAX_AHEAD, Offer, Released, integrate};
use citadel_netcode::sim::{LinkConfig, SimLink};
use citadel_testkit::TestRng;
use citadel_wire::tsync::{FireCommand, INPUT_FLAG_FIRE, InputBundle, InputFrame};

const EPOCH: u32 = 1;
const OBJECT: u32 = 7;
const STEP: f32 = 1.0 / 60.0;

fn frame(seq: u32, velocity: [f32; 3], dt: f32) -> InputFrame {
    InputFrame {
        input_seq: seq,
        sim_tick: seq,
        dt,
        object_id: OBJECT,
        ownership_epoch: EPOCH,
        move_velocity: velocity,
        ..InputFrame::default()
    }
}

fn walk(seq: u32) -> InputFrame {
    frame(seq, [100.0, 0.0, 0.0], STEP)
}

fn queue() -> InputQueue {
    InputQueue::new(InputParams::default(), EPOCH)
}

/// Releases everything releasable from the origin; the released frames in order.
fn drain(q: &mut InputQueue, pos: &mut [f32; 3]) -> Vec<Released> {
    let mut vel = [0.0; 3];
    std::iter::from_fn(|| q.poll_released(pos, &mut vel)).collect()
}

fn seqs(released: &[Released]) -> Vec<u32> {
    released.iter().map(|r| r.input_seq).collect()
}

#[test]
fn sequence_zero_is_ignored() {
    let mut q = queue();
    assert_eq!(q.handle_frame(&walk(0)), Offer::ZeroSeq);
    assert_eq!(q.buffered(), 0);
    assert!(drain(&mut q, &mut [0.0; 3]).is_empty());
    assert_eq!(q.last_input_seq(), 0);
}

#[test]
fn at_or_below_the_watermark_is_stale() {
    let mut q = queue();
    for seq in 1..=5 {
        assert_eq!(q.handle_frame(&walk(seq)), Offer::Accepted);
    }
    assert_eq!(seqs(&drain(&mut q, &mut [0.0; 3])), vec![1, 2, 3, 4, 5]);
    assert_eq!(q.last_input_seq(), 5);
    assert_eq!(q.handle_frame(&walk(5)), Offer::Stale);
    assert_eq!(q.handle_frame(&walk(1)), Offer::Stale);
    assert_eq!(q.handle_frame(&walk(6)), Offer::Accepted);
}

#[test]
fn a_buffered_sequence_is_a_duplicate() {
    let mut q = queue();
    assert_eq!(q.handle_frame(&walk(3)), Offer::Accepted);
    // A different body under the same sequence does not replace the first.
    assert_eq!(
        q.handle_frame(&frame(3, [-5.0, 0.0, 0.0], 0.05)),
        Offer::Duplicate
    );
    assert_eq!(q.buffered(), 1);
    q.handle_frame(&walk(1));
    q.handle_frame(&walk(2));
    let out = drain(&mut q, &mut [0.0; 3]);
    assert_eq!(seqs(&out), vec![1, 2, 3]);
    assert_eq!(out[2].velocity, [100.0, 0.0, 0.0]);
}

#[test]
fn more_than_256_ahead_is_refused() {
    let mut q = queue();
    assert_eq!(q.handle_frame(&walk(MAX_AHEAD + 1)), Offer::TooFarAhead);
    assert_eq!(q.handle_frame(&walk(u32::MAX)), Offer::TooFarAhead);
    assert_eq!(q.handle_frame(&walk(MAX_AHEAD)), Offer::Accepted);
    // The window moves with the watermark.
    for seq in 1..=10 {
        q.handle_frame(&walk(seq));
    }
    assert_eq!(drain(&mut q, &mut [0.0; 3]).len(), 10);
    assert_eq!(q.handle_frame(&walk(10 + MAX_AHEAD)), Offer::Accepted);
    assert_eq!(q.handle_frame(&walk(11 + MAX_AHEAD)), Offer::TooFarAhead);
}

#[test]
fn only_the_contiguous_run_is_released() {
    let mut q = queue();
    for seq in [2, 3, 5, 6] {
        assert_eq!(q.handle_frame(&walk(seq)), Offer::Accepted);
    }
    let mut pos = [0.0; 3];
    assert!(drain(&mut q, &mut pos).is_empty(), "1 is missing");
    assert_eq!(q.last_input_seq(), 0);
    q.handle_frame(&walk(1));
    assert_eq!(seqs(&drain(&mut q, &mut pos)), vec![1, 2, 3]);
    assert_eq!(q.last_input_seq(), 3);
    assert_eq!(q.buffered(), 2);
    q.handle_frame(&walk(4));
    assert_eq!(seqs(&drain(&mut q, &mut pos)), vec![4, 5, 6]);
    assert_eq!(q.last_input_seq(), 6);
    assert_eq!(q.buffered(), 0);
    // Six steps of 100 cm/s for 1/60 s.
    assert!((pos[0] - 10.0).abs() < 1e-3, "{pos:?}");
}

#[test]
fn another_epoch_is_refused() {
    let mut q = queue();
    let mut old = walk(1);
    old.ownership_epoch = EPOCH + 1;
    assert_eq!(q.handle_frame(&old), Offer::WrongEpoch);
    old.ownership_epoch = EPOCH - 1;
    assert_eq!(q.handle_frame(&old), Offer::WrongEpoch);
    // The epoch check comes first (§3.7 step 4 before the queue of step 5).
    old.input_seq = 0;
    assert_eq!(q.handle_frame(&old), Offer::WrongEpoch);
    assert_eq!(q.buffered(), 0);
}

#[test]
fn a_new_epoch_restarts_the_sequence_and_discards_buffered_input() {
    let mut q = queue();
    for seq in [1, 2, 4, 5] {
        q.handle_frame(&walk(seq));
    }
    drain(&mut q, &mut [0.0; 3]);
    assert_eq!((q.last_input_seq(), q.buffered()), (2, 2));
    q.handle_epoch(EPOCH + 1);
    assert_eq!(
        (q.last_input_seq(), q.buffered(), q.epoch()),
        (0, 0, EPOCH + 1)
    );
    // The old owner's frames no longer count, even fresh ones.
    assert_eq!(q.handle_frame(&walk(3)), Offer::WrongEpoch);
    let mut new = walk(1);
    new.ownership_epoch = EPOCH + 1;
    assert_eq!(q.handle_frame(&new), Offer::Accepted);
    new.input_seq = 2;
    q.handle_frame(&new);
    // 4 and 5 of the old epoch were discarded: nothing past 2 comes out.
    assert_eq!(seqs(&drain(&mut q, &mut [0.0; 3])), vec![1, 2]);
    assert_eq!(q.buffered(), 0);
}

#[test]
fn dt_is_clamped_to_a_tenth_of_a_second_and_non_finite_dt_is_zero() {
    let p = InputParams::default();
    let v = [1_000.0, 0.0, 0.0];
    assert_eq!(integrate(&p, [0.0; 3], 5.0, v).0, 0.1);
    assert_eq!(integrate(&p, [0.0; 3], 5.0, v).2, [100.0, 0.0, 0.0]);
    assert_eq!(integrate(&p, [0.0; 3], -1.0, v).2, [0.0; 3]);
    assert_eq!(integrate(&p, [0.0; 3], f32::NAN, v).0, 0.0);
    assert_eq!(integrate(&p, [0.0; 3], f32::INFINITY, v).2, [0.0; 3]);
    assert_eq!(integrate(&p, [0.0; 3], 0.05, v).2, [50.0, 0.0, 0.0]);
}

#[test]
fn velocity_is_scaled_down_to_2000_and_non_finite_velocity_is_zero() {
    let p = InputParams::default();
    let (_, v, _) = integrate(&p, [0.0; 3], 0.1, [3_000.0, 4_000.0, 0.0]);
    assert!(
        (v[0] - 1_200.0).abs() < 1e-2 && (v[1] - 1_600.0).abs() < 1e-2,
        "{v:?}"
    );
    let (_, v, _) = integrate(&p, [0.0; 3], 0.1, [f32::MAX, f32::MAX, -f32::MAX]);
    let len = v.iter().map(|c| c * c).sum::<f32>().sqrt();
    assert!(len <= 2_000.01 && len > 1_999.9, "{v:?}");
    let (_, v, pos) = integrate(&p, [5.0; 3], 0.1, [f32::NAN, 1.0, 1.0]);
    assert_eq!((v, pos), ([0.0; 3], [5.0; 3]));
    let (_, v, _) = integrate(&p, [0.0; 3], 0.1, [10.0, -20.0, 30.0]);
    assert_eq!(v, [10.0, -20.0, 30.0], "a legal velocity is kept as is");
}

#[test]
fn position_is_clamped_to_the_world_bounds_and_non_finite_goes_to_the_minimum() {
    let p = InputParams::default();
    let (_, _, pos) = integrate(
        &p,
        [262_100.0, -262_100.0, 32_700.0],
        0.1,
        [1_000.0, -1_000.0, 1_000.0],
    );
    assert_eq!(pos, [262_144.0, -262_144.0, 32_768.0]);
    let (_, _, pos) = integrate(&p, [f32::NAN, 0.0, f32::INFINITY], 0.1, [0.0; 3]);
    assert_eq!(pos, [-262_144.0, 0.0, -32_768.0]);
}

#[test]
fn the_released_frame_carries_its_fire_command_and_sets_the_velocity() {
    let mut q = queue();
    let mut f = frame(1, [0.0, 50_000.0, 0.0], 0.1);
    f.flags = INPUT_FLAG_FIRE;
    f.fire = Some(FireCommand {
        origin: [1.0, 2.0, 3.0],
        direction: [0.0, 0.0, 1.0],
    });
    q.handle_frame(&f);
    let (mut pos, mut vel) = ([0.0; 3], [9.0; 3]);
    let r = q.poll_released(&mut pos, &mut vel).expect("seq 1 releases");
    assert_eq!(r.fire, f.fire);
    assert_eq!((r.input_seq, r.sim_tick, r.dt), (1, 1, 0.1));
    assert!((vel[1] - 2_000.0).abs() < 1e-2 && vel[0] == 0.0, "{vel:?}");
    assert_eq!((r.velocity, r.position), (vel, pos));
    assert!((pos[1] - 200.0).abs() < 1e-3);
}

#[test]
fn a_speed_hacking_client_moves_no_faster_than_the_clamp() {
    let mut q = queue();
    let (mut pos, mut vel) = ([0.0; 3], [0.0; 3]);
    let hacked = [20_000.0, 0.0, 0.0]; // 10× the 2 000 cm/s clamp
    let frames = 100u32;
    for seq in 1..=frames {
        assert_eq!(q.handle_frame(&frame(seq, hacked, 1.0)), Offer::Accepted);
        let before = pos;
        let r = q.poll_released(&mut pos, &mut vel).expect("in order");
        let step = ((pos[0] - before[0]).powi(2) + (pos[1] - before[1]).powi(2)).sqrt();
        // dt 1 s → 0.1 s, 20 000 cm/s → 2 000: exactly 200 cm per frame.
        assert!((step - 200.0).abs() < 1e-2, "frame {seq} moved {step} cm");
        assert_eq!(r.dt, 0.1);
    }
    let limit = frames as f32 * 2_000.0 * 0.1;
    assert!(pos[0] <= limit + 1.0, "{} cm after {frames} frames", pos[0]);
    assert!(
        pos[0] >= limit - 1.0,
        "the clamp must not stop legal movement either"
    );
    assert!(vel[0] <= 2_000.01);
}

#[test]
fn hostile_frames_never_panic_and_memory_stays_bounded() {
    let mut rng = TestRng::new(0x17);
    let mut q = queue();
    let (mut pos, mut vel) = ([0.0; 3], [0.0; 3]);
    let mut refusals = std::collections::HashMap::new();
    for _ in 0..20_000 {
        let seq = match rng.below(4) {
            0 => rng.next_u64() as u32,
            _ => q.last_input_seq().wrapping_add(rng.below(300) as u32),
        };
        let bits = |rng: &mut TestRng| f32::from_bits(rng.next_u64() as u32);
        let mut f = frame(
            seq,
            [bits(&mut rng), bits(&mut rng), bits(&mut rng)],
            bits(&mut rng),
        );
        if rng.below(10) == 0 {
            f.ownership_epoch = rng.next_u64() as u32;
        }
        *refusals.entry(q.handle_frame(&f)).or_insert(0u32) += 1;
        assert!(q.buffered() <= MAX_AHEAD as usize);
        if rng.below(3) == 0 {
            while q.poll_released(&mut pos, &mut vel).is_some() {}
        }
        for (axis, &c) in pos.iter().enumerate() {
            let (lo, hi) = (q.params().position_min[axis], q.params().position_max[axis]);
            assert!(c.is_finite() && c >= lo && c <= hi, "axis {axis}: {c}");
        }
    }
    for outcome in [
        Offer::Accepted,
        Offer::Stale,
        Offer::Duplicate,
        Offer::TooFarAhead,
        Offer::WrongEpoch,
    ] {
        assert!(
            refusals.get(&outcome).copied().unwrap_or(0) > 0,
            "{outcome:?} never seen"
        );
    }
}

/// The owner's side: each packet carries the newest `redundancy` frames.
fn bundle(last: u32, redundancy: u32) -> Vec<u8> {
    let first = last.saturating_sub(redundancy - 1).max(1);
    let body = InputBundle {
        frames: (first..=last).map(walk).collect(),
        ..InputBundle::default()
    };
    let mut out = Vec::new();
    body.encode_into(&mut out);
    out
}

#[test]
fn a_reordered_duplicated_lossy_stream_releases_exactly_the_contiguous_prefix_in_order() {
    let (mut partial, mut complete) = (false, false);
    for (seed, redundancy, loss) in [
        (0x5eed_0001u64, 1u32, 0.02),
        (0x5eed_0002, 3, 0.1),
        (0x5eed_0003, 1, 0.02),
        (0x5eed_0004, 4, 0.1),
    ] {
        let mut link = SimLink::new(
            LinkConfig {
                latency_ms: 40.0,
                jitter_ms: 60.0,
                loss,
                duplicate: 0.3,
            },
            seed,
        );
        let mut q = queue();
        let (mut pos, mut vel) = ([0.0; 3], [0.0; 3]);
        let mut delivered = BTreeSet::new();
        let mut released = Vec::new();
        let (mut duplicates, mut stale, mut reordered) = (0, 0, 0);
        let frames = 200u32;
        let mut now = 0.0;
        let mut next = 1u32;
        while now < frames as f64 * 16.0 + 500.0 {
            if next <= frames {
                link.send(now, bundle(next, redundancy));
                next += 1;
            }
            for packet in link.poll(now) {
                let body = InputBundle::decode(&packet).expect("well-formed");
                for f in &body.frames {
                    match q.handle_frame(f) {
                        Offer::Accepted => {
                            reordered += usize::from(delivered.last() > Some(&f.input_seq));
                            assert!(delivered.insert(f.input_seq));
                        }
                        Offer::Duplicate => duplicates += 1,
                        Offer::Stale => stale += 1,
                        other => panic!("seed {seed}: unexpected {other:?}"),
                    }
                }
                while let Some(r) = q.poll_released(&mut pos, &mut vel) {
                    released.push(r.input_seq);
                }
                let prefix = (1..)
                    .take_while(|s| delivered.contains(s))
                    .last()
                    .unwrap_or(0);
                assert_eq!(q.last_input_seq(), prefix, "seed {seed} at {now} ms");
                assert_eq!(released, (1..=prefix).collect::<Vec<_>>(), "seed {seed}");
                assert_eq!(q.buffered(), delivered.len() - prefix as usize);
            }
            now += 16.0;
        }
        assert!(reordered > 0, "seed {seed}: the link must reorder");
        assert!(
            duplicates + stale > 0,
            "seed {seed}: the link must duplicate"
        );
        eprintln!(
            "seed {seed} redundancy {redundancy}: released {} of {frames}, {reordered} out of order, {duplicates} duplicate, {stale} stale",
            released.len()
        );
        partial |= !released.is_empty() && released.len() < frames as usize;
        complete |= released.len() == frames as usize;
        assert!(link.dropped > 0, "seed {seed}: the link must lose packets");
        // Released movement equals the released count of legal steps.
        let expected = released.len() as f32 * 100.0 * STEP;
        assert!(
            (pos[0] - expected).abs() < 1e-2,
            "seed {seed}: {pos:?} vs {expected}"
        );
    }
    assert!(
        partial,
        "one run must stop at a lost frame with a buffered tail"
    );
    assert!(
        complete,
        "one run must recover every frame through redundancy"
    );
}
