//! Fire resolution with rewind through the actor server (§3.8): a target
//! walking at 500 cm/s, a shooter whose snapshots cross a 100 ms link and
//! who renders 100 ms in the past. The shot the shooter aims at what it
//! saw hits; the shot aimed at the target's current server position
//! misses; a rewind past `max_unlag` clamps; a round trip over the cutoff
//! is not compensated. The client's `sim_tick` never matters.

use citadel_netcode::actors::{
    ActorConfig, InputOutcome, NpcSpawn, OwnerRefusal, Patrol, Refusal, WorldKey,
};
use citadel_netcode::rewind::{LagProfile, RewindParams};
use citadel_wire::tsync::{FireCommand, INPUT_FLAG_FIRE, InputBundle, InputFrame, Rewind};

use super::harness::{Stage, Zone, at, clean};
use super::{PREDICTED, predicted_config};

/// One way, in ticks at 60 Hz: 100 ms.
const ONE_WAY_TICKS: u64 = 6;
/// The shooter's interpolation delay, in ticks: 100 ms.
const INTERP_TICKS: u64 = 6;
/// The target's speed (cm/s) along +x at y = 1 000.
const SPEED: f32 = 500.0;

struct Range {
    stage: Stage,
    shooter: u32,
    target: u32,
    /// What the shooter's snapshots showed of the target: (server tick of
    /// the snapshot, position), in arrival order.
    seen: Vec<(u32, [f32; 3])>,
    /// What the server reported for the last shot's bundle.
    last: InputOutcome,
    /// Where the shooter says its shots start (the shooter stands at the
    /// origin).
    origin: [f32; 3],
}

fn range(config: ActorConfig, lag: LagProfile) -> Range {
    let mut stage = Stage::with_clients(config, clean(100.0), &[(1, Zone::Lobby)]);
    let shooter = stage.presence(1, PREDICTED, at(0.0, 0.0)).unwrap();
    let target = stage
        .npc(NpcSpawn {
            archetype: 3,
            position: [-1_000.0, 1_000.0, 0.0],
            world: WorldKey::Place(Zone::Lobby),
            patrol: Some(Patrol {
                waypoints: vec![[100_000.0, 1_000.0, 0.0]],
                speed: SPEED,
            }),
        })
        .unwrap();
    stage
        .apply(|s, now| s.handle_hit_eligible(target, true, now))
        .unwrap();
    stage.apply(|s, now| s.handle_lag_profile(1, lag, now));
    let mut range = Range {
        stage,
        shooter,
        target,
        seen: Vec::new(),
        last: InputOutcome::default(),
        origin: [0.0; 3],
    };
    range.run(120);
    range
}

/// 100 ms one way and 100 ms of interpolation, as the server measured it.
fn measured() -> LagProfile {
    LagProfile {
        rtt_ms: 200.0,
        transit_ticks: 2.0 * ONE_WAY_TICKS as f32,
        interp_delay_ticks: INTERP_TICKS as f32,
    }
}

impl Range {
    fn run(&mut self, ticks: u64) {
        for _ in 0..ticks {
            self.stage.step();
            let peer = self.stage.peer(1);
            let (Some(&tick), Some(pos)) = (peer.ticks.last(), peer.position(self.target)) else {
                continue;
            };
            if self.seen.last().is_none_or(|&(t, _)| t != tick) {
                self.seen.push((tick, pos));
            }
        }
    }

    /// Where the shooter renders the target now: its newest snapshot's tick
    /// minus the interpolation delay, interpolated between snapshots.
    fn rendered(&self) -> [f32; 3] {
        let &(newest, _) = self.seen.last().expect("snapshots arrived");
        let tick = f64::from(newest) - INTERP_TICKS as f64;
        let i = self
            .seen
            .iter()
            .rposition(|&(t, _)| f64::from(t) <= tick)
            .expect("enough history");
        let (t0, p0) = self.seen[i];
        let (t1, p1) = self.seen[i + 1];
        let f = ((tick - f64::from(t0)) / f64::from(t1 - t0)) as f32;
        [0, 1, 2].map(|a| p0[a] + (p1[a] - p0[a]) * f)
    }

    /// The target's position on the server now.
    fn server_position(&self) -> [f32; 3] {
        self.stage
            .server
            .npc_transform(self.target)
            .unwrap()
            .position
    }

    /// The shooter fires at `aim` from the origin now; its input reaches
    /// the server one way later. Returns the kind-12 answer and the tick
    /// the server resolved it at.
    fn shoot(&mut self, input_seq: u32, aim: [f32; 3]) -> (Rewind, u64) {
        let frame = InputFrame {
            input_seq,
            // A lying client clock: the server must not use it.
            sim_tick: u32::MAX - 5,
            dt: 1.0 / 60.0,
            object_id: self.shooter,
            ownership_epoch: 1,
            flags: INPUT_FLAG_FIRE,
            fire: Some(FireCommand {
                origin: self.origin,
                direction: aim,
            }),
            ..InputFrame::default()
        };
        self.run(ONE_WAY_TICKS);
        let bundle = InputBundle {
            acked_snapshot_id: 0,
            last_seen_snapshot_id: 0,
            frames: vec![frame],
        };
        let at_tick = self.stage.now.0;
        let outcome = self.stage.apply(|s, now| s.handle_input(1, &bundle, now));
        assert_eq!((outcome.applied, outcome.fired), (1, 1));
        self.last = outcome;
        self.run(ONE_WAY_TICKS + 1);
        let answers = self.stage.peer(1).rewinds();
        let answer = *answers
            .iter()
            .find(|r| r.input_seq == input_seq)
            .expect("a kind-12 answer for the shot");
        (answer, at_tick)
    }
}

fn distance(a: [f32; 3], b: [f32; 3]) -> f32 {
    (0..3).map(|i| (a[i] - b[i]).powi(2)).sum::<f32>().sqrt()
}

#[test]
fn a_shot_at_what_the_shooter_saw_hits_and_one_at_the_current_server_position_misses() {
    let mut r = range(predicted_config(), measured());
    let seen = r.rendered();
    let now = r.server_position();
    // The shooter's view lags the server by 100 ms down and 100 ms of
    // interpolation (plus up to one snapshot interval): about 100 cm.
    let lag = now[0] - seen[0];
    assert!((95.0..=125.0).contains(&lag), "view lags by {lag} cm");

    let (hit, fired_at) = r.shoot(1, seen);
    assert!(hit.is_hit(), "aimed where it saw the target: {hit:?}");
    assert_eq!(
        (r.last.hits, r.last.unlag_clamped, r.last.uncompensated),
        (1, 0, 0)
    );
    assert_eq!(hit.object_id, r.target);
    assert_eq!(
        u64::from(hit.rewind_tick),
        fired_at - 2 * ONE_WAY_TICKS - INTERP_TICKS,
        "rewound by the measured lag, not the client's sim_tick"
    );
    let rewound_centre = {
        let dir_len = distance(seen, [0.0; 3]);
        // The hit point lies on the ray, within the sphere.
        let on_ray = hit.hit_point.map(|c| c / distance(hit.hit_point, [0.0; 3]));
        let aim = seen.map(|c| c / dir_len);
        assert!(distance(on_ray, aim) < 1e-3, "hit point on the ray");
        seen
    };
    assert!(distance(hit.hit_point, rewound_centre) <= 55.0);

    // Aimed at where the server has the target when the shooter fires: by
    // the time the shot arrives the rewound target is 150 cm behind that,
    // far more than the 50 cm radius off the ray.
    let now = r.server_position();
    let (miss, _) = r.shoot(2, now);
    assert!(!miss.is_hit(), "aimed at the present: {miss:?}");
    assert_eq!((miss.object_id, miss.hit_point), (0, [0.0; 3]));
}

#[test]
fn a_rewind_past_max_unlag_clamps_and_a_slow_link_is_not_compensated() {
    let config = ActorConfig {
        rewind: RewindParams {
            max_unlag: 4,
            ..RewindParams::default()
        },
        ..predicted_config()
    };
    let mut r = range(config, measured());
    let seen = r.rendered();
    let (shot, fired_at) = r.shoot(1, seen);
    assert_eq!(
        u64::from(shot.rewind_tick),
        fired_at - 4,
        "18 ticks of lag clamp to max_unlag = 4"
    );
    assert_eq!((r.last.unlag_clamped, r.last.hits), (1, 0));
    assert!(
        !shot.is_hit(),
        "the clamped rewind no longer reaches what a 300 ms old view showed"
    );

    // Over the 220 ms cutoff: resolved at the current tick.
    let mut r = range(
        predicted_config(),
        LagProfile {
            rtt_ms: 300.0,
            ..measured()
        },
    );
    let now = r.server_position();
    let ahead = [now[0] + SPEED * ONE_WAY_TICKS as f32 / 60.0, now[1], now[2]];
    let (shot, fired_at) = r.shoot(1, ahead);
    assert_eq!(u64::from(shot.rewind_tick), fired_at);
    assert_eq!(r.last.uncompensated, 1);
    assert!(
        shot.is_hit(),
        "no compensation: the target's position on arrival is hit"
    );
}

#[test]
fn only_hit_eligible_objects_are_targets_and_the_shooter_is_not_one() {
    let mut r = range(predicted_config(), measured());
    r.stage
        .apply(|s, now| s.handle_hit_eligible(r.shooter, true, now))
        .unwrap();
    r.run(2);
    let seen = r.rendered();
    r.stage
        .apply(|s, now| s.handle_hit_eligible(r.target, false, now))
        .unwrap();
    let (shot, _) = r.shoot(1, seen);
    assert!(
        !shot.is_hit(),
        "an opted-out target cannot be hit: {shot:?}"
    );
    assert_eq!(
        r.stage
            .apply(|s, now| s.handle_hit_eligible(9_999, true, now)),
        Err(Refusal::Owner(OwnerRefusal::UnknownObject))
    );
    // Game logic's read-only query sees the same world and changes nothing.
    r.stage
        .apply(|s, now| s.handle_hit_eligible(r.target, true, now))
        .unwrap();
    r.run(30);
    let now = r.server_position();
    let q = r
        .stage
        .server
        .rewind_query(1, [0.0; 3], now, Some(r.stage.now.0));
    let q = q.expect("an opted-in participant");
    assert_eq!(q.hit.map(|h| h.object_id), Some(r.target));
    let inside = r
        .stage
        .server
        .rewind_query(1, [0.0; 3], [1.0, 0.0, 0.0], None);
    assert_eq!(
        inside.and_then(|q| q.hit),
        None,
        "the shooter's own sphere around the origin is excluded"
    );
    assert!(
        r.stage
            .server
            .rewind_query(42, [0.0; 3], now, None)
            .is_none()
    );
}

#[test]
fn with_an_origin_tolerance_a_shot_from_afar_is_a_refused_miss() {
    let config = ActorConfig {
        rewind: RewindParams {
            origin_tolerance: 100.0,
            ..RewindParams::default()
        },
        ..predicted_config()
    };
    let mut r = range(config, measured());
    // From where the shooter stands (within 100 cm): resolved, a hit.
    r.origin = [60.0, 0.0, 50.0];
    let seen = r.rendered();
    let aim = [seen[0] - 60.0, seen[1], seen[2] - 50.0];
    let (hit, _) = r.shoot(1, aim);
    assert!(hit.is_hit(), "origin within the tolerance: {hit:?}");
    assert_eq!((r.last.hits, r.last.origin_refused), (1, 0));
    // The same aim from 2 m away: answered as a miss without a ray test.
    r.origin = [0.0, -200.0, 0.0];
    let seen = r.rendered();
    let aim = [seen[0], seen[1] + 200.0, seen[2]];
    let (miss, _) = r.shoot(2, aim);
    assert!(!miss.is_hit(), "origin 2 m from the shooter: {miss:?}");
    assert_eq!(
        (r.last.fired, r.last.hits, r.last.origin_refused),
        (1, 0, 1)
    );
    // A non-finite origin is never within.
    r.origin = [f32::NAN, 0.0, 0.0];
    let (nan, _) = r.shoot(3, [1.0, 0.0, 0.0]);
    assert!(!nan.is_hit());
    assert_eq!(r.last.origin_refused, 1);
}
