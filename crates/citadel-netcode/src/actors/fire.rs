//! Fire resolution with rewind (§3.8) inside the actor server: which
//! objects are hit-eligible, each participant's measured lag, the history
//! rings written on every tick, and the kind-12 answer to the shooter.
//!
//! What it is: game logic opts objects in with
//! [`ActorServer::handle_hit_eligible`] (the object keeps a ring of
//! `rewind_history_ticks` positions until it despawns or is opted out);
//! the driver reports each connection's measured round trip with
//! [`ActorServer::handle_lag`]; a released input frame with a fire command
//! is resolved once against the rings at the shooter's rewind tick, and a
//! reliable [`Message::Rewind`] goes to the shooter only.
//! [`ActorServer::rewind_query`] runs the same test for game logic without
//! changing anything.
//!
//! What it is not: the client's `sim_tick` (or any client time) is never
//! used; the rewind tick comes from the server's clock and the measured
//! lag alone. The ray origin is the client's; with
//! `RewindParams::origin_tolerance` > 0 a shot whose origin is farther than
//! that from the shooter's server position after the firing input is
//! answered as a miss without a ray test and counted (`origin_refused`).
//!
//! Call order: `handle_lag` whenever the driver measures a new round trip;
//! `handle_hit_eligible` from game logic; rings are recorded in phase 3 of
//! [`ActorServer::handle_tick`] (`record_history`); fire is resolved from
//! `handle_input`.

use citadel_wire::tsync::{FireCommand, Rewind};

use super::{ActorServer, Message, OwnerRefusal, PlaceKey, Refusal, Tick, Tracked, WorldKey};
use crate::rewind::{self, History, Hit, LagProfile, RewindBound};

/// What resolving one fire command did (for the driver's counters).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct FireOutcome {
    pub(super) hit: bool,
    pub(super) bound: Option<RewindBound>,
    pub(super) origin_refused: bool,
}

/// One released fire command and where its shooter's object was after
/// that input (the server's position, for the origin check).
#[derive(Debug, Clone, Copy)]
pub(super) struct Shot {
    pub(super) input_seq: u32,
    pub(super) fire: FireCommand,
    pub(super) shooter_at: [f32; 3],
}

/// The answer of [`ActorServer::rewind_query`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RewindQuery {
    /// The (fractional) tick the objects were rewound to.
    pub tick: f64,
    /// The nearest forward hit, if any.
    pub hit: Option<Hit>,
}

impl<P: PlaceKey> ActorServer<P> {
    /// Advances to `now`, then the world of live object `object_id` (an
    /// unknown one is refused).
    pub(super) fn advance_to_object(
        &mut self,
        object_id: u32,
        now: Tick,
    ) -> Result<WorldKey<P>, Refusal> {
        self.advance(now);
        self.locate(object_id)
            .ok_or(Refusal::Owner(OwnerRefusal::UnknownObject))
    }

    /// The world holding live object `object_id`, if any.
    pub(super) fn locate(&self, object_id: u32) -> Option<WorldKey<P>> {
        if let Some(owned) = self.inputs.get(&object_id) {
            return Some(owned.world);
        }
        if let Some(npc) = self.npcs.get(&object_id) {
            return Some(npc.world);
        }
        self.presences
            .values()
            .find(|p| p.object_id == object_id)
            .map(|p| WorldKey::Place(p.place))
    }

    /// Opts `object_id` in (or out) of hit validation. Opting in starts an
    /// empty ring (a repeat keeps the one it has); opting out drops it.
    pub fn handle_hit_eligible(
        &mut self,
        object_id: u32,
        eligible: bool,
        now: Tick,
    ) -> Result<(), Refusal> {
        let world = self.advance_to_object(object_id, now)?;
        if !eligible {
            self.tracked.remove(&object_id);
            return Ok(());
        }
        let ticks = self.config.history_ticks();
        self.tracked.entry(object_id).or_insert_with(|| Tracked {
            world,
            history: History::new(ticks),
        });
        Ok(())
    }

    /// Whether `object_id` is hit-eligible.
    pub fn is_hit_eligible(&self, object_id: u32) -> bool {
        self.tracked.contains_key(&object_id)
    }

    /// The driver measured `participant_id`'s round trip: its lag profile
    /// ([`LagProfile::from_rtt`]: the round trip as transit, the client
    /// runtime's steady 1.5 send intervals as interpolation delay) is what
    /// its next shots rewind by.
    pub fn handle_lag(&mut self, participant_id: u64, rtt_ms: f32, now: Tick) {
        let hello = &self.config.hello;
        let profile = LagProfile::from_rtt(rtt_ms, hello.sim_rate_hz, hello.send_rate_hz);
        self.handle_lag_profile(participant_id, profile, now);
    }

    /// [`Self::handle_lag`] with every part of the profile given (a driver
    /// that knows the client's interpolation delay, or a test).
    /// Only opted-in clients keep a profile (dropped on disconnect), so
    /// the table is bounded by the clients.
    pub fn handle_lag_profile(&mut self, participant_id: u64, profile: LagProfile, now: Tick) {
        self.advance(now);
        if self.clients.contains_key(&participant_id) {
            self.lag.insert(participant_id, profile);
        }
    }

    /// `participant_id`'s lag profile (zero until measured).
    pub fn lag_of(&self, participant_id: u64) -> LagProfile {
        self.lag.get(&participant_id).copied().unwrap_or_default()
    }

    /// Tick phase 3: every hit-eligible object's position at `now`.
    pub(super) fn record_history(&mut self, now: Tick) {
        let ActorServer {
            tracked, worlds, ..
        } = self;
        for (id, t) in tracked.iter_mut() {
            if let Some(o) = worlds.get(&t.world).and_then(|w| w.get(*id)) {
                t.history.record(now.0, o.transform.position);
            }
        }
    }

    /// The nearest hit-eligible object (in `world` or the global world,
    /// other than `exclude`) the ray meets at `tick`.
    fn cast(&self, world: WorldKey<P>, exclude: u32, fire: &FireCommand, tick: f64) -> Option<Hit> {
        let targets = self
            .tracked
            .iter()
            .filter(|(_, t)| t.world == world || t.world == WorldKey::Global)
            .map(|(id, t)| (*id, &t.history));
        rewind::resolve(
            targets,
            exclude,
            fire.origin,
            fire.direction,
            tick,
            self.config.rewind.radius,
        )
    }

    /// One released fire command of `shooter`'s object `object_id`: the
    /// rewind tick from the shooter's lag at the server's current tick,
    /// the ray test, and the kind-12 answer to the shooter.
    pub(super) fn resolve_fire(
        &mut self,
        shooter: u64,
        object_id: u32,
        world: WorldKey<P>,
        shot: Shot,
    ) -> FireOutcome {
        let Shot {
            input_seq,
            fire,
            shooter_at,
        } = shot;
        let rewound = self.config.rewind.rewind(self.now.0, &self.lag_of(shooter));
        let tick = rewound.tick;
        let origin_refused =
            !origin_within(fire.origin, shooter_at, self.config.rewind.origin_tolerance);
        let hit = if origin_refused {
            None
        } else {
            self.cast(world, object_id, &fire, tick)
        };
        let answer = Rewind {
            input_seq,
            flags: u8::from(hit.is_some()),
            object_id: hit.map_or(0, |h| h.object_id),
            hit_point: hit.map_or([0.0; 3], |h| h.point),
            rewind_tick: rewind::wire_tick(tick),
        };
        self.emit(shooter, Message::Rewind(answer));
        FireOutcome {
            hit: hit.is_some(),
            bound: rewound.bound,
            origin_refused,
        }
    }

    /// Game logic's read-only ray test as `participant_id` would shoot:
    /// at `tick` when given (clamped to `[now − max_unlag, now]`), else at
    /// the participant's rewind tick. Its own presence object is excluded;
    /// targets are the hit-eligible objects of its place and the global
    /// world. `None` if the participant is not opted in.
    pub fn rewind_query(
        &self,
        participant_id: u64,
        origin: [f32; 3],
        direction: [f32; 3],
        tick: Option<u64>,
    ) -> Option<RewindQuery> {
        let place = self.clients.get(&participant_id)?.place;
        let exclude = self.presence_of(participant_id).unwrap_or(0);
        let now = self.now.0;
        let tick = match tick {
            Some(t) => {
                let oldest = now.saturating_sub(u64::from(self.config.rewind.max_unlag));
                t.clamp(oldest, now) as f64
            }
            None => self
                .config
                .rewind
                .rewind_tick(now, &self.lag_of(participant_id)),
        };
        let fire = FireCommand { origin, direction };
        let hit = self.cast(WorldKey::Place(place), exclude, &fire, tick);
        Some(RewindQuery { tick, hit })
    }
}

/// Whether a shot's `origin` is within `tolerance` cm of the shooter's
/// server position (always, when the tolerance is 0: unchecked). A
/// non-finite origin is never within.
fn origin_within(origin: [f32; 3], shooter_at: [f32; 3], tolerance: f32) -> bool {
    if tolerance <= 0.0 {
        return true;
    }
    let d2: f64 = origin
        .iter()
        .zip(shooter_at.iter())
        .map(|(a, b)| f64::from(*a) - f64::from(*b))
        .map(|d| d * d)
        .sum();
    d2.is_finite() && d2 <= f64::from(tolerance) * f64::from(tolerance)
}
