//! End to end against a recorded server stream: `vectors/stream.txt` holds
//! every kind-13 body (recipient and hex) a scripted two-client run sent,
//! fulls and deltas, owner and peer views. The test replays the file into
//! fresh sessions (acknowledging as it goes) and checks they end on the
//! server's final state; it also re-runs the script and requires the same
//! bytes, so an encoding change cannot slip by unnoticed. Regenerate with
//! `CITADEL_RECORD=1 cargo test -p citadel-netpeer --test recorded_stream`.

mod common;

use citadel_netpeer::{Authority, AuthorityConfig, Outcome};
use citadel_testkit::TestRng;
use common::*;

const PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vectors/stream.txt");

/// The scripted run: 2 clients, 6 objects, 40 ticks of changes with
/// immediate acks. Returns the server and what it sent.
fn script() -> (Authority, Vec<(u64, Vec<u8>)>) {
    let mut s = Authority::new(AuthorityConfig::default()).expect("config");
    s.register_class(ship_spec()).expect("class");
    s.connect(1, false, 0);
    s.connect(2, false, 0);
    let objects: Vec<u32> = (0..6)
        .map(|i| {
            s.spawn(SHIP, 0, (i % 2 == 0).then_some(1), false)
                .expect("spawn")
        })
        .collect();
    let mut sessions = [ship_session(&s), ship_session(&s)];
    let mut rng = TestRng::new(2026);
    let mut sent = Vec::new();
    for tick in 0..40u64 {
        for _ in 0..3 {
            let o = *rng.pick(&objects);
            random_change(&mut rng, &mut s, o);
        }
        s.tick(tick * 50);
        while let Some(out) = s.poll_output() {
            sent.push((out.conn, out.body().to_vec()));
            let session = &mut sessions[(out.conn - 1) as usize];
            session.handle_bunch(out.body()).expect("applies");
            while let Some(ack) = session.poll_ack() {
                s.handle_ack(out.conn, &ack);
            }
        }
    }
    (s, sent)
}

fn parse(text: &str) -> Vec<(u64, Vec<u8>)> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (conn, hex) = l.split_once(' ').expect("conn hex");
            (conn.parse().expect("conn"), hex::decode(hex).expect("hex"))
        })
        .collect()
}

#[test]
fn a_recorded_server_stream_applies_to_the_server_state() -> TestResult {
    let (server, live) = script();
    if std::env::var_os("CITADEL_RECORD").is_some() {
        let mut text =
            String::from("# conn hex (kind-13 bodies of tests/recorded_stream.rs's script)\n");
        for (conn, body) in &live {
            text.push_str(&format!("{conn} {}\n", hex::encode(body)));
        }
        std::fs::write(PATH, text)?;
    }
    let recorded = parse(&std::fs::read_to_string(PATH)?);
    assert!(recorded.len() > 60, "a real stream: {}", recorded.len());
    let fulls = recorded.iter().filter(|(_, b)| b[4] & 0x80 != 0).count();
    assert!(
        fulls >= 12 && fulls < recorded.len() / 2,
        "fulls then deltas: {fulls}"
    );
    let mut sessions = [ship_session(&server), ship_session(&server)];
    for (conn, body) in &recorded {
        let session = &mut sessions[(*conn - 1) as usize];
        assert!(matches!(
            session.handle_bunch(body)?,
            Outcome::Applied { .. }
        ));
        session.poll_ack();
    }
    for (i, session) in sessions.iter().enumerate() {
        assert_converged(&server, i as u64 + 1, session);
    }
    assert!(
        recorded == live,
        "the server still sends the recorded bytes"
    );
    Ok(())
}
