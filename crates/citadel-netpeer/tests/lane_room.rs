//! Backpressure (`Authority::set_lane_room`): a receiver whose outbound
//! lane has little room is sent at most that many bunches per tick; the
//! pairs over the room keep their state and wait, and the next tick starts
//! where this one ran out (round robin), so every object keeps moving and the receiver
//! converges exactly with no extra full bunch. With no room at all nothing
//! is sent, not even an ack-timeout re-baseline.

mod common;

use citadel_netpeer::{Authority, AuthorityConfig, NetworkPeerSession, Outcome};
use citadel_testkit::TestRng;
use common::*;

const TICK_MS: u64 = 50;
const OBJECTS: usize = 1_000;

struct Rig {
    server: Authority,
    session: NetworkPeerSession,
    objects: Vec<u32>,
    now: u64,
}

impl Rig {
    fn new() -> Self {
        let mut server = Authority::new(AuthorityConfig {
            bootstrap_per_tick: OBJECTS,
            ..AuthorityConfig::default()
        })
        .expect("config");
        server.register_class(ship_spec()).expect("class");
        let objects = (0..OBJECTS)
            .map(|_| server.spawn(SHIP, 0, None, false).expect("spawn"))
            .collect();
        server.connect(1, false, 0);
        let session = ship_session(&server);
        Rig {
            server,
            session,
            objects,
            now: 0,
        }
    }

    /// One tick with `room` (None: unbounded): every bunch is applied and,
    /// if `ack`, acked at once. Returns the bunches sent.
    fn tick(&mut self, room: Option<usize>, ack: bool) -> usize {
        self.server.set_lane_room(1, room);
        self.server.tick(self.now);
        let mut sent = 0;
        while let Some(out) = self.server.poll_output() {
            assert_eq!(out.conn, 1);
            sent += 1;
            match self.session.handle_bunch(out.body()) {
                Ok(Outcome::NeedsFull { .. }) => panic!("a delta onto a base it lacks"),
                Ok(_) => {}
                Err(e) => panic!("a server bunch was rejected: {e}"),
            }
        }
        while let Some(a) = self.session.poll_ack() {
            if ack {
                self.server.handle_ack(1, &a);
            }
        }
        self.now += TICK_MS;
        sent
    }

    fn change(&mut self, rng: &mut TestRng, n: usize) {
        for _ in 0..n {
            let o = *rng.pick(&self.objects);
            random_change(rng, &mut self.server, o);
        }
    }
}

#[test]
fn a_receiver_with_little_lane_room_is_sent_within_it_and_converges() {
    const ROOM: usize = 30;
    let mut rng = TestRng::new(7);
    let mut rig = Rig::new();
    assert_eq!(rig.tick(None, true), OBJECTS, "the bootstrap is unbounded");
    assert_converged(&rig.server, 1, &rig.session);
    let fulls = rig.server.counters().fulls;

    // 40 ticks of 200 changes each, 30 bunches of room per tick.
    for _ in 0..40 {
        rig.change(&mut rng, 200);
        assert!(rig.tick(Some(ROOM), true) <= ROOM);
    }
    let k = rig.server.counters();
    assert!(k.lane_deferred > 0, "{k:?}");
    // The changes stop; with the same room every waiting object drains.
    let mut ticks = 0;
    while rig.tick(Some(ROOM), true) > 0 {
        ticks += 1;
        assert!(ticks <= OBJECTS / ROOM + 1, "the backlog must drain");
    }
    assert_converged(&rig.server, 1, &rig.session);
    let k = rig.server.counters();
    assert_eq!(k.fulls, fulls, "waiting never re-baselines: {k:?}");
    assert_eq!(k.full_ack_timeout, 0, "{k:?}");
}

#[test]
fn no_room_sends_nothing_not_even_a_timed_out_re_baseline() {
    let mut rng = TestRng::new(11);
    let mut rig = Rig::new();
    rig.tick(None, true);
    // A round of deltas whose acks are lost: their sends will time out.
    rig.change(&mut rng, 300);
    assert!(rig.tick(None, false) > 0);
    // Two ack timeouts (1 s each) pass with no room: nothing goes.
    for _ in 0..40 {
        rig.change(&mut rng, 50);
        assert_eq!(rig.tick(Some(0), true), 0);
    }
    let k = rig.server.counters();
    assert_eq!(k.full_ack_timeout, 0, "{k:?}");
    assert!(k.lane_deferred > 0, "{k:?}");
    // Room again: the timed-out pairs re-baseline (paced fulls), the rest
    // get cumulative deltas, and the receiver converges.
    for _ in 0..3 {
        rig.tick(None, true);
    }
    assert!(rig.server.counters().full_ack_timeout > 0);
    assert_converged(&rig.server, 1, &rig.session);
}
