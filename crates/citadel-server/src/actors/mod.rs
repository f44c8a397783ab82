//! Networked actors and transform sync in the node: [`TransformHub`] is the
//! thin driver of [`citadel_netcode::actors::ActorServer`], the sans-IO
//! core that owns every world, presence, NPC and client sender and decides
//! who is told what.
//!
//! What the driver does: it holds the core behind one mutex and the
//! gameplay clock (ticks counted by the sim task); each call locks, hands
//! the typed input and the current tick to the core, maps a refusal to its
//! drop metric ([`drop_reason`], the one place), then drains the core's
//! outputs into the [`Router`]: each output is encoded once and the same
//! `Bytes` goes to every participant it names, reliable messages on the
//! reliable lane, snapshots on the unreliable one. Outputs are routed
//! before the lock is released, so two calls can never interleave their
//! frames (a despawn can never overtake the spawn it retires). The lock
//! is never held across an `.await`; a router push never blocks.
//!
//! What it is not: it has no protocol rules of its own; presence order,
//! ownership checks, roles, patrols, interest and snapshots live in
//! citadel-netcode and are tested there over `SimLink`.
//!
//! Call order: the connection routes kinds 7, 9, 10, 16 and 20 to the
//! `handle_*` methods (kind 9 to [`TransformHub::handle_input_judged`]
//! when a script registered `on_input`, `movement.rs`) and reports place
//! changes and disconnects; game
//! logic spawns, moves and despawns NPCs; the sim task calls
//! [`TransformHub::handle_tick`] at `transform_sync.sim_hz`.

use std::sync::{Arc, Mutex};

use citadel_netcode::actors::{
    ActorConfig, ActorServer, Delivery, InputOutcome, Output, Refusal, Tick,
};
use citadel_netcode::interest::InterestConfig;
use citadel_wire::actor::{NaPresence, NaState, NaTransform};
use citadel_wire::tsync::{InputBundle, TsyncAck};

use crate::config::{ConfigError, TransformSyncConfig};
use crate::metrics::{DropReason, Metrics, ServiceEvent};
use crate::place::Place;
use crate::router::{Lane, Router, frame};

pub use citadel_netcode::actors::Patrol;

/// Which transform world an actor lives in: a place's, or the global one
/// of server-owned actors spawned without a room.
pub type WorldKey = citadel_netcode::actors::WorldKey<Place>;

/// A spawn request from game logic (Lua `spawn_actor`).
pub type NpcSpawn = citadel_netcode::actors::NpcSpawn<Place>;

/// The core and the clock it is driven with.
#[derive(Debug)]
struct Driven {
    core: ActorServer<Place>,
    /// Completed sim ticks.
    clock: Tick,
}

/// The node's transform-sync driver.
pub struct TransformHub {
    state: Mutex<Driven>,
    enabled: bool,
    sim_hz: u8,
    metrics: Arc<Metrics>,
    router: Arc<dyn Router>,
}

impl std::fmt::Debug for TransformHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransformHub").finish_non_exhaustive()
    }
}

/// The core's settings from the `[transform_sync]` section.
fn actor_config(config: &TransformSyncConfig) -> Result<ActorConfig, ConfigError> {
    // The codec check names a bad bound by its key.
    config.codec()?;
    Ok(ActorConfig {
        hello: config.hello,
        budget: config.budget as usize,
        interest: config.interest_enabled.then_some(InterestConfig {
            cell_size: config.interest_cell_size,
            inner: config.interest_inner,
            outer: config.interest_outer,
        }),
        predicted_archetypes: config.predicted_authoritative_archetypes.clone(),
        input_max_speed: config.input_max_speed,
        input_max_dt: config.input_max_dt,
        rewind_history_ticks: config.rewind_history_ticks,
        rewind: config.rewind(),
    })
}

/// The drop counted for a refused input (the one mapping); `None` for
/// refusals that are not counted (id exhaustion).
fn drop_reason(refusal: Refusal) -> Option<DropReason> {
    match refusal {
        Refusal::NotOptedIn => Some(DropReason::NotOptedIn),
        Refusal::Malformed => Some(DropReason::MalformedBody),
        Refusal::State(_) => Some(DropReason::ActorStateRefused),
        Refusal::Input(_) => Some(DropReason::ActorInputRefused),
        _ => None,
    }
}

fn lane(delivery: Delivery) -> Lane {
    match delivery {
        Delivery::Reliable => Lane::Reliable,
        Delivery::Unreliable => Lane::Unreliable,
    }
}

impl TransformHub {
    /// A hub for a validated config, delivering through `router`.
    pub fn new(
        config: TransformSyncConfig,
        metrics: Arc<Metrics>,
        router: Arc<dyn Router>,
    ) -> Result<Self, ConfigError> {
        let core = ActorServer::new(actor_config(&config)?).map_err(|e| ConfigError::Invalid {
            key: "transform_sync".into(),
            message: e.to_string(),
        })?;
        Ok(TransformHub {
            state: Mutex::new(Driven {
                core,
                clock: Tick::default(),
            }),
            enabled: config.enabled,
            sim_hz: config.hello.sim_rate_hz,
            metrics,
            router,
        })
    }

    /// Whether transform sync is served.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Simulation rate.
    pub fn sim_hz(&self) -> u8 {
        self.sim_hz
    }

    /// Locks, runs `input` on the core at the current tick, and routes
    /// every output it produced before unlocking.
    fn drive<R>(&self, input: impl FnOnce(&mut ActorServer<Place>, Tick) -> R) -> R {
        self.drive_clock(|d| input(&mut d.core, d.clock))
    }

    /// [`Self::drive`] with the clock writable (the tick advances it).
    fn drive_clock<R>(&self, input: impl FnOnce(&mut Driven) -> R) -> R {
        let mut driven = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let result = input(&mut driven);
        while let Some(output) = driven.core.poll_output() {
            self.route(output);
        }
        result
    }

    /// One output: encoded once, the same bytes to each recipient.
    fn route(&self, Output { to, message }: Output) {
        let lane = lane(message.delivery());
        let frame = frame(&message.to_envelope());
        for &pid in to.participants() {
            self.router.to_participant(pid, lane, frame.clone());
        }
    }

    /// Counts a refusal; true when the input was applied.
    fn count(&self, result: Result<(), Refusal>) -> bool {
        match result {
            Ok(()) => true,
            Err(refusal) => {
                if let Some(reason) = drop_reason(refusal) {
                    self.metrics.dropped(reason);
                }
                false
            }
        }
    }

    /// Kind 7: opt in (or reset baselines on a repeat) and answer with the
    /// negotiated codec.
    pub fn handle_hello(&self, participant_id: u64, place: Place) {
        self.drive(|core, now| core.handle_hello(participant_id, place, now));
    }

    /// Kind 10.
    pub fn handle_ack(&self, participant_id: u64, ack: &TsyncAck) {
        let result = self.drive(|core, now| core.handle_ack(participant_id, ack, now));
        self.count(result);
    }

    /// Kind 9: the piggybacked ack is applied (history 0); the frames go
    /// through the owner's in-order input queue and move its predicted
    /// object; every refused frame is counted.
    pub fn handle_input(&self, participant_id: u64, bundle: &InputBundle) {
        let outcome = self.drive(|core, now| core.handle_input(participant_id, bundle, now));
        self.count_input(&outcome);
    }

    /// Counts what one kind-9 input did: refused frames by drop reason,
    /// fire resolution by service event.
    fn count_input(&self, outcome: &InputOutcome) {
        for (reason, frames) in outcome.refusals() {
            if let Some(drop) = drop_reason(Refusal::Input(reason)) {
                self.metrics.drop_n(drop, frames as u64);
            }
        }
        for (event, n) in [
            (ServiceEvent::FireResolved, outcome.fired),
            (ServiceEvent::FireHits, outcome.hits),
            (ServiceEvent::FireUnlagClamped, outcome.unlag_clamped),
            (ServiceEvent::FireUncompensated, outcome.uncompensated),
            (ServiceEvent::FireOriginRefused, outcome.origin_refused),
        ] {
            self.count_service(event, n);
        }
    }

    /// Counts `n` service events (nothing for 0).
    fn count_service(&self, event: ServiceEvent, n: usize) {
        if n > 0 {
            self.metrics.service_n(event, n as u64);
        }
    }

    /// The transport measured the participant's round trip: its shots
    /// rewind by it (ignored until it opted in with HELLO).
    pub fn handle_round_trip(&self, participant_id: u64, rtt: std::time::Duration) {
        if !self.enabled {
            return;
        }
        let rtt_ms = rtt.as_secs_f32() * 1_000.0;
        self.drive(|core, now| core.handle_lag(participant_id, rtt_ms, now));
    }

    /// The lag profile fire resolution uses for the participant (tests,
    /// status).
    pub fn lag_of(&self, participant_id: u64) -> citadel_netcode::rewind::LagProfile {
        self.drive(|core, _| core.lag_of(participant_id))
    }

    /// Kind 16: spawn (or refresh) the sender's avatar in its place.
    pub fn handle_presence(&self, participant_id: u64, presence: &NaPresence) {
        let result = self.drive(|core, now| core.handle_presence(participant_id, presence, now));
        self.count(result.map(drop));
    }

    /// Kind 20: the owner's relay-mode transform, applied verbatim after the
    /// ownership check. Returns false (and counts) when refused.
    pub fn handle_state(&self, participant_id: u64, state: &NaState) -> bool {
        let result = self.drive(|core, now| core.handle_state(participant_id, state, now));
        self.count(result)
    }

    /// The participant moved to another place (room join or leave).
    pub fn handle_place_change(&self, participant_id: u64, new_place: Place) {
        self.drive(|core, now| core.handle_place_change(participant_id, new_place, now));
    }

    /// The participant left: its avatar despawns and its state is dropped.
    pub fn handle_disconnect(&self, participant_id: u64) {
        self.drive(|core, now| core.handle_disconnect(participant_id, now));
    }

    /// One simulation step; every send interval also sends snapshots.
    pub fn handle_tick(&self) {
        self.drive_clock(|d| {
            d.clock = d.clock.next();
            d.core.handle_tick(d.clock);
        });
    }

    /// Spawns a server-owned actor; returns its id, or `None` if ids are
    /// exhausted or the position is not finite.
    pub fn spawn_npc(&self, spawn: NpcSpawn) -> Option<u32> {
        self.drive(|core, now| core.handle_npc_spawn(spawn, now))
    }

    /// Sets an NPC's position (and velocity, for smooth interpolation).
    pub fn move_npc(&self, id: u32, position: [f32; 3], velocity: Option<[f32; 3]>) -> bool {
        self.drive(|core, now| core.handle_npc_move(id, position, velocity, now))
    }

    /// Removes an NPC everywhere it is visible.
    pub fn despawn_npc(&self, id: u32) -> bool {
        self.drive(|core, now| core.handle_npc_despawn(id, now))
    }

    /// Gives an object to a participant (0 = back to the server): a new
    /// ownership epoch and a ROLE Handoff to old owner, new owner and the
    /// peers that see it. Refused (counted nowhere, answered to the
    /// script) for an unknown object or an owner that does not see it.
    pub fn set_owner(&self, object_id: u32, owner: u64) -> Result<(), Refusal> {
        let result = self.drive(|core, now| core.handle_set_owner(object_id, owner, now));
        if result.is_ok() {
            self.metrics.service_event(ServiceEvent::OwnershipHandoffs);
        }
        result
    }

    /// Opts an object in (or out) of hit validation; false for an unknown
    /// object.
    pub fn set_hit_eligible(&self, object_id: u32, eligible: bool) -> bool {
        self.drive(|core, now| core.handle_hit_eligible(object_id, eligible, now))
            .is_ok()
    }

    /// Game logic's read-only ray test as `participant_id` would shoot
    /// (at `tick`, clamped, or at its measured rewind).
    pub fn rewind_query(
        &self,
        participant_id: u64,
        origin: [f32; 3],
        direction: [f32; 3],
        tick: Option<u64>,
    ) -> Option<citadel_netcode::actors::RewindQuery> {
        self.drive(|core, _| core.rewind_query(participant_id, origin, direction, tick))
    }

    /// The current owner of a live object (0 = the server).
    pub fn owner_of(&self, object_id: u32) -> Option<u64> {
        self.drive(|core, _| core.owner_of(object_id))
    }

    /// An NPC's current transform (tests, status).
    pub fn npc_transform_of(&self, id: u32) -> Option<NaTransform> {
        self.drive(|core, _| core.npc_transform(id))
    }

    /// Live actors (for `/status`).
    pub fn actor_count(&self) -> usize {
        self.drive(|core, _| core.actor_count())
    }

    /// Clients receiving snapshots.
    pub fn client_count(&self) -> usize {
        self.drive(|core, _| core.client_count())
    }
}

/// A hub with the default config, for unit tests of its callers.
#[cfg(test)]
pub(crate) fn test_hub(metrics: Arc<Metrics>, router: Arc<dyn Router>) -> TransformHub {
    let Ok(hub) = TransformHub::new(TransformSyncConfig::default(), metrics, router) else {
        panic!("the default transform-sync config is valid");
    };
    hub
}

mod movement;

#[cfg(test)]
mod tests;
