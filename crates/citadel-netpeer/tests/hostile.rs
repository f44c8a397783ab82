//! Hostile bytes without a fuzzer (the libFuzzer target `netpeer_session`
//! explores further): mutations of real server bunches (bit flips,
//! truncations, splices, random tails) go to a session holding state and,
//! as proposals, to the authority. Nothing panics; a refused bunch changes
//! no held state and is not acknowledged; a refused proposal changes no
//! server value.

mod common;

use citadel_netpeer::{Authority, AuthorityConfig, NoVeto, Outcome};
use citadel_testkit::TestRng;
use common::*;

fn mutate(rng: &mut TestRng, seeds: &[Vec<u8>]) -> Vec<u8> {
    let mut b = rng.pick(seeds).clone();
    match rng.below(5) {
        0 if !b.is_empty() => {
            for _ in 0..=rng.below(4) {
                let i = rng.below(b.len() as u64) as usize;
                b[i] ^= 1 << rng.below(8);
            }
        }
        1 => b.truncate(rng.below(b.len() as u64 + 1) as usize),
        2 => {
            let other = rng.pick(seeds);
            let cut = rng.below(b.len() as u64 + 1) as usize;
            let from = rng.below(other.len() as u64 + 1) as usize;
            b.truncate(cut);
            b.extend_from_slice(&other[from..]);
        }
        3 => {
            let mut tail = vec![0u8; rng.below(40) as usize];
            rng.fill_bytes(&mut tail);
            b.extend_from_slice(&tail);
        }
        _ => {
            let keep = rng.below(8).min(b.len() as u64) as usize;
            b.truncate(keep);
            let mut rest = vec![0u8; rng.below(64) as usize];
            rng.fill_bytes(&mut rest);
            b.extend_from_slice(&rest);
        }
    }
    b
}

#[test]
fn mutated_bunches_never_corrupt_a_session_or_the_server() {
    let mut s = Authority::new(AuthorityConfig::default()).expect("config");
    s.register_class(ship_spec()).expect("class");
    s.connect(1, false, 0);
    s.connect(2, false, 0);
    let objects: Vec<u32> = (0..4)
        .map(|i| {
            s.spawn(SHIP, 0, (i < 2).then_some(1), false)
                .expect("spawn")
        })
        .collect();
    let mut rng = TestRng::new(99);
    let mut session = ship_session(&s);
    let mut seeds = Vec::new();
    for tick in 0..30 {
        for _ in 0..3 {
            let o = *rng.pick(&objects);
            random_change(&mut rng, &mut s, o);
        }
        s.tick(tick * 50);
        while let Some(out) = s.poll_output() {
            if out.conn == 1 {
                session
                    .handle_bunch(out.body())
                    .expect("a server bunch applies");
                if let Some(a) = session.poll_ack() {
                    s.handle_ack(1, &a);
                }
            }
            seeds.push(out.body().to_vec());
        }
    }
    let mut applied = 0;
    let mut refused = 0;
    for i in 0..20_000u64 {
        let body = mutate(&mut rng, &seeds);
        let before: Vec<_> = session
            .objects()
            .map(|o| (o, session.state(o).cloned()))
            .collect();
        match session.handle_bunch(&body) {
            Ok(Outcome::Applied { .. }) => {
                applied += 1;
                assert!(session.poll_ack().is_some());
            }
            Ok(Outcome::Duplicate) => {
                session.poll_ack();
            }
            Ok(Outcome::NeedsFull { .. }) | Err(_) => {
                refused += 1;
                let after: Vec<_> = session
                    .objects()
                    .map(|o| (o, session.state(o).cloned()))
                    .collect();
                assert_eq!(before, after, "refused bunch changed the session");
                assert!(session.poll_ack().is_none());
            }
        }
        let values: Vec<_> = objects
            .iter()
            .map(|o| s.values(*o).map(<[_]>::to_vec))
            .collect();
        if s.handle_proposal(1, &body, 10_000 + i, &mut NoVeto)
            .is_err()
        {
            let now: Vec<_> = objects
                .iter()
                .map(|o| s.values(*o).map(<[_]>::to_vec))
                .collect();
            assert_eq!(values, now, "a refused proposal changed the server");
        }
        while s.poll_output().is_some() {}
    }
    assert!(
        applied > 100 && refused > 1_000,
        "both paths exercised: {applied} / {refused}"
    );
}
