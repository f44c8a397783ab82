//! The VM thread: drains the bounded call queue, fires `on_tick`, polls
//! `main.lua` for hot reload, and applies each successful invocation's
//! commands to connections.
//!
//! Everything Lua happens here, one invocation at a time, so the VM needs no
//! lock. The node side never blocks on this thread: calls are `try_send`
//! into a bounded queue and replies come back on oneshot channels. What it
//! is not: it does not decide routing (the gateway does) or room state (the
//! realm does). Call order: [`Worker::run`] until the queue disconnects or
//! the stop flag is set; per loop: one call (or a timeout), then a due tick,
//! then swapping in a finished reload, then a due reload poll (which starts
//! building the new VM on a loader thread).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Weak;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::time::{Duration, Instant, SystemTime};

use citadel_wire::Envelope;

use super::api::Command;
use super::hooks::Hook;
use super::transform::{ScriptActors, TransformHost, lock};
use super::vm::{Caller, Failure, Limits, LoadError, Outcome, Vm};
use super::{Call, Inner, LuaRpc, Runtime, RuntimeDeps, Shared};
use crate::actors::WorldKey;
use crate::config::RuntimeConfig;
use crate::metrics::RuntimeEvent;
use crate::place::{Place, RoomId};
use crate::router::{Lane, frame};
use crate::rpc::RpcRegistry;

/// Longest idle wait, so the stop flag is noticed.
const IDLE_WAKE: Duration = Duration::from_millis(100);
/// How often a reload building off-thread is checked for completion.
const RELOAD_CHECK: Duration = Duration::from_millis(10);

/// Whom `citadel.broadcast` reaches, decided by the invocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// A participant's call: its place, minus itself.
    Participant {
        /// The caller.
        id: u64,
        /// Where it was.
        place: Place,
    },
    /// A room tick: every member of the room.
    Room(RoomId),
    /// The server-wide tick: every connected participant.
    Server,
}

/// What the loader built: the VM thread's state before it has its deps.
pub(super) struct Parts {
    pub(super) vm: Vm,
    pub(super) rx: Receiver<Call>,
    pub(super) shared: Arc<Shared>,
    pub(super) runtime: Weak<Inner>,
    pub(super) config: RuntimeConfig,
    pub(super) entry: PathBuf,
    pub(super) limits: Limits,
}

/// The VM thread's state.
pub(super) struct Worker {
    vm: Vm,
    rx: Receiver<Call>,
    shared: Arc<Shared>,
    runtime: Weak<Inner>,
    config: RuntimeConfig,
    entry: PathBuf,
    limits: Limits,
    deps: RuntimeDeps,
    /// A replacement VM being built on a loader thread (hot reload).
    pending: Option<Receiver<Result<Vm, LoadError>>>,
    /// Script actor id → transform-sync hub id of the NPCs scripts spawned
    /// (shared with `citadel.rewind_query`).
    actors: ScriptActors,
}

fn stamp(path: &PathBuf) -> Option<(SystemTime, u64)> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

/// Replaces the script RPC methods in `registry` with what `runtime`'s
/// current script registers.
pub(super) fn sync_rpc_registry(runtime: &Runtime, registry: &RpcRegistry) {
    registry.clear_script();
    for method in &runtime.registered().rpc {
        if let Err(err) = registry.register_script(method, Arc::new(LuaRpc::new(runtime.clone()))) {
            tracing::warn!(method, error = %err, "script RPC method not registered");
        }
    }
}

fn lane(unreliable: bool) -> Lane {
    if unreliable {
        Lane::Unreliable
    } else {
        Lane::Reliable
    }
}

impl Worker {
    /// The thread's state, delivering through `deps`.
    pub(super) fn new(parts: Parts, deps: RuntimeDeps) -> Self {
        let Parts {
            vm,
            rx,
            shared,
            runtime,
            config,
            entry,
            limits,
        } = parts;
        vm.install_host(deps.host.clone());
        vm.install_netpeer(deps.netpeer.clone());
        super::netpeer_veto::connect(&deps.netpeer, &runtime);
        let actors = ScriptActors::default();
        vm.install_transform(TransformHost {
            hub: deps.hub.clone(),
            actors: actors.clone(),
        });
        Worker {
            vm,
            rx,
            shared,
            runtime,
            config,
            entry,
            limits,
            deps,
            pending: None,
            actors,
        }
    }

    /// The loop; returns when the node is gone or stopped.
    pub(super) fn run(mut self) {
        let tick_period = (self.config.tick_hz > 0)
            .then(|| Duration::from_secs_f64(1.0 / f64::from(self.config.tick_hz)));
        let poll = Duration::from_millis(self.config.hot_reload_poll_ms);
        let mut stamp_seen = stamp(&self.entry);
        let start = Instant::now();
        let mut next_tick = start + tick_period.unwrap_or(IDLE_WAKE);
        let mut last_tick = start;
        let mut next_poll = start + poll;
        loop {
            if self.shared.stop.load(Ordering::Relaxed) {
                break;
            }
            let now = Instant::now();
            let mut wake = now + IDLE_WAKE;
            if tick_period.is_some() {
                wake = wake.min(next_tick);
            }
            if self.config.hot_reload {
                wake = wake.min(next_poll);
            }
            if self.pending.is_some() {
                wake = wake.min(now + RELOAD_CHECK);
            }
            match self.rx.recv_timeout(wake.saturating_duration_since(now)) {
                Ok(call) => self.handle(call),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            let now = Instant::now();
            if let Some(period) = tick_period
                && now >= next_tick
            {
                let dt = now.duration_since(last_tick).as_secs_f64();
                last_tick = now;
                if self.vm.registered().has(Hook::Tick) {
                    self.tick(dt);
                }
                next_tick += period;
                let after = Instant::now();
                if next_tick <= after {
                    self.shared.metrics.runtime_event(RuntimeEvent::TicksLate);
                    next_tick = after + period;
                }
            }
            self.finish_reload();
            if self.config.hot_reload && now >= next_poll && self.pending.is_none() {
                let current = stamp(&self.entry);
                if current != stamp_seen {
                    stamp_seen = current;
                    self.start_reload();
                }
                next_poll = Instant::now() + poll;
            }
        }
        tracing::debug!("script runtime stopped");
    }

    fn handle(&mut self, call: Call) {
        match call {
            Call::Rpc {
                caller,
                method,
                payload,
                reply,
            } => {
                let out = self.vm.rpc(&caller, &method, &payload);
                let result = self.finish("on_rpc", out, origin_of(&caller));
                let _ = reply.send(result);
            }
            Call::Message { caller, kind, body } => {
                let out = self.vm.message(&caller, kind, &body);
                let _ = self.finish("on_message", out, origin_of(&caller));
            }
            Call::Join(caller) => {
                let out = self.vm.presence(Hook::Join, &caller);
                let _ = self.finish("on_join", out, origin_of(&caller));
            }
            Call::Leave(caller) => {
                let out = self.vm.presence(Hook::Leave, &caller);
                let _ = self.finish("on_leave", out, origin_of(&caller));
            }
            Call::RoomCreate {
                caller,
                params,
                reply,
            } => {
                let out = self.vm.room_create(&caller, &params);
                let result = self.finish("on_room_create", out, origin_of(&caller));
                let _ = reply.send(result.ok().flatten());
            }
            Call::MatchmakerMatched { info, reply } => {
                let out = self.vm.matchmaker_matched(&info);
                let result = self.finish("on_matchmaker_matched", out, Origin::Server);
                let _ = reply.send(result.ok().flatten());
            }
            Call::RoomJoin {
                caller,
                room_id,
                reply,
            } => {
                let out = self.vm.room_join(&caller, room_id);
                let result = self.finish("on_room_join", out, origin_of(&caller));
                // No handler → admit; failure → reject (fail closed).
                let _ = reply.send(result.map(|r| r.unwrap_or(true)).unwrap_or(false));
            }
            Call::Input(call) => match call.budget(self.config.on_input_budget_ms) {
                Some(budget) => {
                    let out = self.vm.on_input(&call.caller, &call.batch, budget);
                    let result = self.finish("on_input", out, origin_of(&call.caller));
                    call.answer(result);
                }
                None => call.expire(),
            },
            Call::NetpeerVeto { request, reply } => {
                let id = request.participant_id;
                let place = self
                    .deps
                    .realm
                    .room_of(id)
                    .map_or(Place::Default, Place::Room);
                let verdict = match self.vm.netpeer_veto(&request) {
                    // Past the deadline before it started: the driver
                    // already vetoed it.
                    None => crate::netpeer::Verdict::Timeout,
                    Some(out) => super::netpeer_veto::verdict_of(self.finish(
                        "netpeer_on_proposal",
                        out,
                        Origin::Participant { id, place },
                    )),
                };
                let _ = reply.send(verdict);
            }
        }
        if let Some(registered) = self.vm.refresh_registered() {
            let registered = registered.clone();
            self.publish(registered);
        }
    }

    fn tick(&mut self, dt: f64) {
        let out = self.vm.tick(dt, None);
        self.shared.metrics.runtime_event(RuntimeEvent::Ticks);
        let _ = self.finish("on_tick", out, Origin::Server);
        for room in self.deps.realm.room_ids() {
            let out = self.vm.tick(dt, Some(room));
            self.shared.metrics.runtime_event(RuntimeEvent::Ticks);
            let _ = self.finish("on_tick", out, Origin::Room(room));
        }
    }

    /// Counts, logs, applies the commands of a success; returns the result.
    fn finish<T>(
        &mut self,
        hook: &'static str,
        out: Outcome<T>,
        origin: Origin,
    ) -> Result<T, Failure> {
        let m = &self.shared.metrics;
        m.runtime_event(RuntimeEvent::Invocations);
        m.runtime_n(RuntimeEvent::CommandsDropped, out.dropped_commands);
        m.runtime_n(RuntimeEvent::BytesDropped, out.dropped_bytes);
        match &out.result {
            Ok(_) => self.apply(origin, out.commands),
            Err(Failure::Timeout) => {
                m.runtime_event(RuntimeEvent::Timeouts);
                tracing::warn!(
                    hook,
                    "script invocation timed out; its commands were discarded"
                );
            }
            Err(Failure::OutOfMemory) => {
                m.runtime_event(RuntimeEvent::OutOfMemory);
                tracing::warn!(
                    hook,
                    used_bytes = self.vm.used_memory(),
                    "script invocation hit runtime.memory_limit_mb; its commands were discarded"
                );
            }
            Err(Failure::Error(error)) => {
                m.runtime_event(RuntimeEvent::Errors);
                tracing::warn!(hook, %error, "script invocation failed; its commands were discarded");
            }
        }
        out.result
    }

    fn apply(&mut self, origin: Origin, commands: Vec<Command>) {
        let router = self.deps.router.clone();
        for command in commands {
            match command {
                Command::Broadcast {
                    kind,
                    body,
                    unreliable,
                } => {
                    let frame = frame(&Envelope::new(kind, body));
                    let lane = lane(unreliable);
                    match origin {
                        Origin::Participant { id, place } => {
                            router.to_place(place, Some(id), lane, frame);
                        }
                        Origin::Room(room) => {
                            router.to_place(Place::Room(room), None, lane, frame);
                        }
                        Origin::Server => {
                            router.to_everyone(lane, frame);
                        }
                    }
                }
                Command::Send {
                    to,
                    kind,
                    body,
                    unreliable,
                } => {
                    let frame = frame(&Envelope::new(kind, body));
                    if !router.to_participant(to, lane(unreliable), frame) {
                        self.shared
                            .metrics
                            .runtime_event(RuntimeEvent::UnknownRecipient);
                    }
                }
                actor => {
                    self.shared
                        .metrics
                        .runtime_event(RuntimeEvent::ActorCommands);
                    self.apply_actor(actor);
                }
            }
        }
    }

    /// Hands a script's actor command to the transform-sync hub (when
    /// enabled): an NPC spawned with `room = id` exists only in that room;
    /// without `room` it is global (every client sees it, as seed 004 says).
    fn apply_actor(&mut self, command: Command) {
        let hub = &self.deps.hub;
        if !hub.enabled() {
            tracing::debug!(?command, "actor command ignored: transform sync disabled");
            return;
        }
        match command {
            Command::SpawnActor(spawn) => {
                let room = spawn.room;
                let patrol = (spawn.ai.as_deref() == Some("patrol") && !spawn.waypoints.is_empty())
                    .then(|| crate::actors::Patrol {
                        waypoints: spawn.waypoints.clone(),
                        speed: spawn.speed.unwrap_or(100.0),
                    });
                // `room = 0` names the default dimension; no room, the global world.
                let world = room.map_or(WorldKey::Global, |code| {
                    WorldKey::Place(Place::from_code(code))
                });
                let hub_id = hub.spawn_npc(crate::actors::NpcSpawn {
                    archetype: spawn.archetype,
                    position: spawn.position,
                    world,
                    patrol,
                });
                if let Some(hub_id) = hub_id {
                    lock(&self.actors).insert(spawn.id, hub_id);
                }
            }
            Command::MoveActor {
                id,
                position,
                velocity,
            } => {
                if let Some(hub_id) = lock(&self.actors).get(&id).copied() {
                    hub.move_npc(hub_id, position, Some(velocity));
                }
            }
            Command::DespawnActor { id } => {
                let removed = lock(&self.actors).remove(&id);
                if let Some(hub_id) = removed {
                    hub.despawn_npc(hub_id);
                }
            }
            Command::SetOwner { id, owner } => {
                let hub_id = self.transform_host().hub_id(id);
                if let Err(refusal) = hub.set_owner(hub_id, owner) {
                    tracing::debug!(id, owner, %refusal, "citadel.set_owner refused");
                }
            }
            Command::SetHitEligible { id, eligible } => {
                let hub_id = self.transform_host().hub_id(id);
                if !hub.set_hit_eligible(hub_id, eligible) {
                    tracing::debug!(id, "citadel.set_hit_eligible: unknown object");
                }
            }
            Command::Broadcast { .. } | Command::Send { .. } => {}
        }
    }

    fn transform_host(&self) -> TransformHost {
        TransformHost {
            hub: self.deps.hub.clone(),
            actors: self.actors.clone(),
        }
    }

    fn publish(&self, registered: super::hooks::Registered) {
        *self
            .shared
            .registered
            .write()
            .unwrap_or_else(|p| p.into_inner()) = Arc::new(registered);
        if let Some(inner) = self.runtime.upgrade() {
            sync_rpc_registry(&Runtime { inner }, &self.deps.rpc);
        }
    }

    /// Starts building a new VM from `main.lua` on a loader thread; the
    /// current VM keeps serving meanwhile (the load may take up to 5 s).
    fn start_reload(&mut self) {
        let (tx, rx) = std::sync::mpsc::channel();
        let limits = self.limits.clone();
        let entry = self.entry.clone();
        let spawned = std::thread::Builder::new()
            .name("citadel-lua-reload".into())
            .spawn(move || {
                let _ = tx.send(Vm::load(&limits, &entry));
            });
        match spawned {
            Ok(_) => self.pending = Some(rx),
            Err(error) => {
                self.reload_failed(&format!("cannot start the loader thread: {error}"));
            }
        }
    }

    /// Swaps in a finished reload if it loaded and registers something.
    fn finish_reload(&mut self) {
        let Some(rx) = &self.pending else {
            return;
        };
        let loaded = match rx.try_recv() {
            Err(TryRecvError::Empty) => return,
            Err(TryRecvError::Disconnected) => Err(LoadError::Runtime("loader thread died".into())),
            Ok(loaded) => loaded,
        };
        self.pending = None;
        match loaded {
            Ok(vm) if vm.registered().is_empty() => {
                self.reload_failed("main.lua registers no handler");
            }
            Ok(vm) => {
                vm.install_host(self.deps.host.clone());
                vm.install_transform(self.transform_host());
                vm.install_netpeer(self.deps.netpeer.clone());
                let registered = vm.registered().clone();
                self.vm = vm;
                self.publish(registered);
                self.shared.metrics.runtime_event(RuntimeEvent::Reloads);
                tracing::info!("hot reload: main.lua swapped in");
            }
            Err(error) => self.reload_failed(&error.to_string()),
        }
    }

    fn reload_failed(&self, why: &str) {
        self.shared
            .metrics
            .runtime_event(RuntimeEvent::ReloadFailures);
        tracing::warn!(why, "hot reload rejected; keeping the old script");
    }
}

fn origin_of(caller: &Caller) -> Origin {
    Origin::Participant {
        id: caller.participant_id,
        place: caller.place,
    }
}
