//! The embedded Lua runtime: one sandboxed Lua 5.4 VM on a dedicated
//! thread, fed by a bounded queue of typed calls.
//!
//! What it is: the [`Runtime`] handle the node holds. The gateway asks it
//! (without touching Lua) whether a kind has an `on_message` handler, then
//! submits typed calls (`rpc`, `message`, `join`, `leave`, `room_create`,
//! `room_join`); replies come back on oneshot channels; a full queue fails
//! the call at once and is counted (`queue_full`). What it is not: it never
//! holds node state across a wait and never blocks an async task.
//!
//! Call order: [`Runtime::load`] (loads `<scripts_dir>/main.lua`; `None`
//! when disabled or absent) gives a [`LoadedRuntime`] whose handle
//! ([`LoadedRuntime::runtime`]) the room policy and RPC adapters can take →
//! [`LoadedRuntime::start`] with the [`RuntimeDeps`] the worker delivers
//! through (realm, router, hub, RPC registry) starts the VM thread and
//! registers the script's RPC methods → calls → [`Runtime::stop`] at
//! shutdown. Calls made between load and start wait in the queue.
//!
//! Files: `vm.rs` (one VM, budgeted invocations), `worker.rs` (the thread,
//! ticks, hot reload, command delivery), `hooks.rs` (registration),
//! `api.rs` (host functions and commands), `netpeer.rs` (NetworkPeer
//! host functions), `movement.rs` (`on_input` verdicts), `netpeer_veto.rs`
//! (the `netpeer_on_proposal` hook), `sandbox.rs` (stdlib, require,
//! deadline hook), `policy.rs` (RPC handler and room policy adapters).

mod api;
mod hooks;
mod movement;
mod netpeer;
mod netpeer_veto;
mod policy;
mod sandbox;
mod services;
mod transform;
mod vm;
mod worker;

pub use api::{ActorSpawn, Command, FIRST_ACTOR_ID, MAX_BODY_BYTES, MAX_COMMANDS, MAX_TOTAL_BYTES};
pub use hooks::Registered;
pub use movement::InputHookFailure;
pub use policy::{LuaMatchLabeler, LuaRoomPolicy, LuaRpc};
pub use services::HostServices;
pub use vm::{Caller, Failure, LabelSpec, Limits, LoadError, Vm};
pub use worker::Origin;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::oneshot;

use crate::actors::TransformHub;
use crate::config::RuntimeConfig;
use crate::metrics::{Metrics, RuntimeEvent};
use crate::place::RoomId;
use crate::realm::Realm;
use crate::router::Router;
use crate::rpc::{self, RpcError, RpcRegistry};

/// One typed call into the VM.
pub(crate) enum Call {
    Rpc {
        caller: Caller,
        method: String,
        payload: Bytes,
        reply: oneshot::Sender<Result<vm::RpcReply, Failure>>,
    },
    Message {
        caller: Caller,
        kind: u16,
        body: Bytes,
    },
    Join(Caller),
    Leave(Caller),
    RoomCreate {
        caller: Caller,
        params: Bytes,
        reply: oneshot::Sender<Option<LabelSpec>>,
    },
    RoomJoin {
        caller: Caller,
        room_id: RoomId,
        reply: oneshot::Sender<bool>,
    },
    MatchmakerMatched {
        info: crate::services::matchmaker::label::MatchInfo,
        reply: oneshot::Sender<Option<LabelSpec>>,
    },
    Input(movement::InputCall),
    /// `netpeer_on_proposal` (`netpeer_veto.rs`).
    NetpeerVeto {
        request: crate::netpeer::VetoRequest,
        reply: oneshot::Sender<crate::netpeer::Verdict>,
    },
}

/// What [`Runtime::try_submit`] did with a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Submitted {
    /// On the VM thread's queue.
    Queued,
    /// Dropped: the queue was full (counted).
    Full,
    /// Dropped: the VM thread is gone.
    Gone,
}

/// What the VM thread reaches: where script commands are delivered and
/// where script RPC methods are registered.
#[derive(Clone)]
pub struct RuntimeDeps {
    /// Rooms (ids for `on_tick`, member lists).
    pub realm: Arc<Realm>,
    /// Delivery of `citadel.broadcast` / `citadel.send`.
    pub router: Arc<dyn Router>,
    /// Script-spawned actors.
    pub hub: Arc<TransformHub>,
    /// NetworkPeer objects (`citadel.netpeer_*`).
    pub netpeer: Arc<crate::netpeer::NetPeerNode>,
    /// Where the script's RPC methods are registered (again after a reload).
    pub rpc: Arc<RpcRegistry>,
    /// What the `notifications_*` host functions call.
    pub host: HostServices,
}

/// State shared by the handle and the worker.
pub(crate) struct Shared {
    registered: RwLock<Arc<Registered>>,
    metrics: Arc<Metrics>,
    stop: AtomicBool,
    /// `runtime.on_input_wait_ms`.
    input_wait: Duration,
}

pub(crate) struct Inner {
    tx: SyncSender<Call>,
    shared: Arc<Shared>,
}

fn limits_of(config: &RuntimeConfig) -> (vm::Limits, PathBuf) {
    let scripts_dir = PathBuf::from(&config.scripts_dir);
    let entry = scripts_dir.join("main.lua");
    let limits = vm::Limits {
        deadline: Duration::from_millis(config.deadline_ms),
        tick_deadline: Duration::from_millis(config.effective_tick_deadline_ms()),
        memory_bytes: usize::try_from(config.memory_limit_mb)
            .unwrap_or(usize::MAX / (1024 * 1024))
            .saturating_mul(1024 * 1024),
        scripts_dir,
    };
    (limits, entry)
}

/// Loads `main.lua` once without starting anything (`citadel check`):
/// `Ok(None)` when disabled or absent, else what the script registers.
pub fn check(config: &RuntimeConfig) -> Result<Option<Registered>, LoadError> {
    let (limits, entry) = limits_of(config);
    if !config.enabled || !entry.is_file() {
        return Ok(None);
    }
    vm::Vm::load(&limits, &entry).map(|vm| Some(vm.registered().clone()))
}

/// Handle to the running script runtime (cheap to clone).
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("registered", &self.registered())
            .finish_non_exhaustive()
    }
}

/// A loaded script whose VM thread has not started yet.
pub struct LoadedRuntime {
    runtime: Runtime,
    parts: worker::Parts,
}

impl std::fmt::Debug for LoadedRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedRuntime").finish_non_exhaustive()
    }
}

impl LoadedRuntime {
    /// The handle (calls queue until [`LoadedRuntime::start`]).
    pub fn runtime(&self) -> Runtime {
        self.runtime.clone()
    }

    /// Starts the VM thread delivering through `deps` and registers the
    /// script's RPC methods in `deps.rpc`.
    pub fn start(self, deps: RuntimeDeps) -> Result<Runtime, LoadError> {
        let LoadedRuntime { runtime, parts } = self;
        worker::sync_rpc_registry(&runtime, &deps.rpc);
        let worker = worker::Worker::new(parts, deps);
        std::thread::Builder::new()
            .name("citadel-lua".into())
            .spawn(move || worker.run())
            .map_err(|e| LoadError::Runtime(format!("cannot start the script thread: {e}")))?;
        Ok(runtime)
    }
}

impl Runtime {
    /// Loads `<scripts_dir>/main.lua`. `Ok(None)` when `runtime.enabled =
    /// false` or there is no `main.lua` (the node then runs the built-in
    /// relay and room policy). A present but broken script is an error.
    pub fn load(
        config: &RuntimeConfig,
        metrics: Arc<Metrics>,
    ) -> Result<Option<LoadedRuntime>, LoadError> {
        if !config.enabled {
            return Ok(None);
        }
        let (limits, entry) = limits_of(config);
        if !entry.is_file() {
            tracing::info!(
                entry = %entry.display(),
                "no main.lua: serving the built-in relay"
            );
            return Ok(None);
        }
        let vm = vm::Vm::load(&limits, &entry)?;
        if vm.registered().is_empty() {
            tracing::warn!("main.lua registers no handler");
        }
        tracing::info!(
            entry = %entry.display(),
            rpcs = vm.registered().rpc.len(),
            message_kinds = vm.registered().message.len(),
            "script loaded"
        );
        let (tx, rx) = sync_channel(config.queue_capacity);
        let shared = Arc::new(Shared {
            registered: RwLock::new(Arc::new(vm.registered().clone())),
            metrics,
            stop: AtomicBool::new(false),
            input_wait: Duration::from_millis(config.on_input_wait_ms),
        });
        let inner = Arc::new(Inner {
            tx,
            shared: shared.clone(),
        });
        let parts = worker::Parts {
            vm,
            rx,
            shared,
            runtime: Arc::downgrade(&inner),
            config: config.clone(),
            entry,
            limits,
        };
        Ok(Some(LoadedRuntime {
            runtime: Runtime { inner },
            parts,
        }))
    }

    /// Asks the VM thread to stop after its current invocation.
    pub fn stop(&self) {
        self.inner.shared.stop.store(true, Ordering::Relaxed);
    }

    /// What the current script registered.
    pub fn registered(&self) -> Arc<Registered> {
        self.inner
            .shared
            .registered
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Whether application kind `kind` goes to an `on_message` handler.
    pub fn handles_message(&self, kind: u16) -> bool {
        self.registered().message.contains(&kind)
    }

    /// Hands `call` to the VM thread without blocking; a full queue is
    /// counted as [`RuntimeEvent::QueueFull`].
    fn try_submit(&self, call: Call) -> Submitted {
        match self.inner.tx.try_send(call) {
            Ok(()) => Submitted::Queued,
            Err(TrySendError::Full(_)) => {
                self.inner
                    .shared
                    .metrics
                    .runtime_event(RuntimeEvent::QueueFull);
                Submitted::Full
            }
            Err(TrySendError::Disconnected(_)) => Submitted::Gone,
        }
    }

    /// [`Runtime::try_submit`], as whether the call was queued.
    fn submit(&self, call: Call) -> bool {
        matches!(self.try_submit(call), Submitted::Queued)
    }

    /// Queues `on_message(kind)` (fire and forget).
    pub fn message(&self, caller: Caller, kind: u16, body: Bytes) {
        self.submit(Call::Message { caller, kind, body });
    }

    /// Queues `on_join` (fire and forget; a join is never blocked by it).
    pub fn join(&self, caller: Caller) {
        if self.registered().has(hooks::Hook::Join) {
            self.submit(Call::Join(caller));
        }
    }

    /// Queues `on_leave` (fire and forget).
    pub fn leave(&self, caller: Caller) {
        if self.registered().has(hooks::Hook::Leave) {
            self.submit(Call::Leave(caller));
        }
    }

    /// Runs `on_rpc(method)`; errors carry only the generic client messages.
    pub async fn rpc(
        &self,
        caller: Caller,
        method: String,
        payload: Bytes,
    ) -> Result<Bytes, RpcError> {
        let (reply, rx) = oneshot::channel();
        if !self.submit(Call::Rpc {
            caller,
            method,
            payload,
            reply,
        }) {
            return Err(RpcError::Internal("script runtime queue full".into()));
        }
        match rx.await {
            Ok(Ok(vm::RpcReply::Reply(bytes))) => Ok(bytes),
            Ok(Ok(vm::RpcReply::UnknownMethod)) => Err(RpcError::Client(rpc::UNKNOWN_METHOD)),
            Ok(Err(Failure::Timeout)) => Err(RpcError::Client(rpc::HANDLER_TIMEOUT)),
            Ok(Err(Failure::OutOfMemory)) => Err(RpcError::Internal("script out of memory".into())),
            Ok(Err(Failure::Error(_))) => Err(RpcError::Internal("script error".into())),
            Err(_) => Err(RpcError::Internal("script runtime stopped".into())),
        }
    }

    /// Runs `on_room_create`; `None` = use the default label (no handler,
    /// nil, error, timeout, full queue).
    pub async fn room_create(&self, caller: Caller, params: Bytes) -> Option<LabelSpec> {
        if !self.registered().has(hooks::Hook::RoomCreate) {
            return None;
        }
        let (reply, rx) = oneshot::channel();
        if !self.submit(Call::RoomCreate {
            caller,
            params,
            reply,
        }) {
            return None;
        }
        rx.await.ok().flatten()
    }

    /// Runs `on_matchmaker_matched`; `None` = use the default match label
    /// (no handler, nil, error, timeout, full queue).
    pub async fn matchmaker_matched(
        &self,
        info: crate::services::matchmaker::label::MatchInfo,
    ) -> Option<LabelSpec> {
        if !self.registered().has(hooks::Hook::MatchmakerMatched) {
            return None;
        }
        let (reply, rx) = oneshot::channel();
        if !self.submit(Call::MatchmakerMatched { info, reply }) {
            return None;
        }
        rx.await.ok().flatten()
    }

    /// Runs `on_room_join`: no handler admits; error, timeout or a full
    /// queue rejects.
    pub async fn room_join(&self, caller: Caller, room_id: RoomId) -> bool {
        if !self.registered().has(hooks::Hook::RoomJoin) {
            return true;
        }
        let (reply, rx) = oneshot::channel();
        if !self.submit(Call::RoomJoin {
            caller,
            room_id,
            reply,
        }) {
            return false;
        }
        rx.await.unwrap_or(false)
    }
}
