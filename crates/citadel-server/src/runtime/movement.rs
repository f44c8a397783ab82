//! `citadel.on_input(fn(ctx, frame))`: game logic judging the predicted
//! movement of one input bundle, as ONE budgeted VM call per bundle.
//!
//! What it is: [`Runtime::on_input`] hands a staged
//! [`MovementBatch`] (citadel-netcode's two-phase input, see its
//! `actors/movement.rs`) to the VM thread and waits, without blocking a
//! tokio worker, for one [`Verdict`] per frame or an
//! [`InputHookFailure`]. On the VM thread, [`judge`] calls the handler once
//! per frame, in sequence order, inside one invocation: `ctx` = `{sender,
//! user_id, room_id, object_id, tick}`; `frame` = `{seq, sim_tick, dt, move,
//! position, velocity, previous = {position, velocity}, fire = {origin,
//! direction}}` (vectors are `{x, y, z}`; `position`/`velocity` are what
//! the built-in integration would produce from `previous`, which is the
//! outcome of the previous frame's verdict). The return: nil or true
//! accepts, false vetoes, `{position = v, velocity = v?}` corrects
//! (velocity defaults to the built-in one; position is clamped to the
//! bounds, the speed clamp does not apply: server code is trusted).
//! Anything else, or a non-finite number, is a bad return. Each frame is
//! one host call into a small Lua shim that builds the `frame` table with
//! table constructors and flattens the return to numbers (one call per
//! frame instead of one per field: 2.6 µs instead of 8.9 µs a frame in a
//! 4-frame bundle).
//!
//! Bounds: the call runs under `runtime.on_input_budget_ms`; the caller
//! waits at most `runtime.on_input_wait_ms` (queue wait included), after
//! which the VM skips the call unrun. Every failure keeps the built-in
//! integration for the whole bundle; the caller counts it once.
//!
//! What it is not: it does not apply anything (the transform hub does,
//! `crate::actors::movement`) and it holds no lock while waiting.
//! Call order: [`install`] once per VM (the shim); per bundle
//! [`Runtime::handles_input`] (cheap, no VM) →
//! [`Runtime::on_input`]; on the VM thread the worker calls
//! [`InputCall::budget`], then `Vm::on_input` (which runs [`judge`]) and
//! [`InputCall::answer`], or [`InputCall::expire`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use citadel_netcode::actors::{Kinematics, MovementBatch, Verdict};
use mlua::{Function, Lua, MultiValue, Table, Value};
use tokio::sync::oneshot;

use super::hooks::{self, Hook};
use super::transform::TransformHost;
use super::vm::{Caller, Failure};
use super::{Call, Runtime, Submitted};
use crate::metrics::ServiceEvent;

/// Why the built-in integration was kept for a bundle (one error enum for
/// the hook, mapped to its metric in [`InputHookFailure::event`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputHookFailure {
    /// The handler raised.
    Error,
    /// The handler ran past `runtime.on_input_budget_ms`.
    Timeout,
    /// The VM hit `runtime.memory_limit_mb`.
    Memory,
    /// No verdicts within `runtime.on_input_wait_ms`.
    Wait,
    /// The runtime queue was full.
    QueueFull,
    /// The handler returned an unusable value.
    BadReturn,
    /// The runtime stopped, or the handler is gone (reload).
    Unavailable,
}

impl InputHookFailure {
    /// The service event it is counted as.
    pub fn event(self) -> ServiceEvent {
        match self {
            InputHookFailure::Error => ServiceEvent::InputHookFallbackError,
            InputHookFailure::Timeout => ServiceEvent::InputHookFallbackTimeout,
            InputHookFailure::Memory => ServiceEvent::InputHookFallbackMemory,
            InputHookFailure::Wait => ServiceEvent::InputHookFallbackWait,
            InputHookFailure::QueueFull => ServiceEvent::InputHookFallbackQueueFull,
            InputHookFailure::BadReturn => ServiceEvent::InputHookFallbackBadReturn,
            InputHookFailure::Unavailable => ServiceEvent::InputHookFallbackUnavailable,
        }
    }
}

/// What one invocation produced: verdicts, or a judgement that cannot be
/// used (bad return, no handler).
pub(super) type Judged = Result<Vec<Verdict>, InputHookFailure>;

/// One queued `on_input` call.
pub(crate) struct InputCall {
    pub(super) caller: Caller,
    pub(super) batch: Arc<MovementBatch>,
    deadline: Instant,
    reply: oneshot::Sender<Judged>,
}

impl InputCall {
    /// The run budget left (at most `budget_ms`); `None` when the caller
    /// stopped waiting (the call is then skipped).
    pub(super) fn budget(&self, budget_ms: u64) -> Option<Duration> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        (!self.reply.is_closed() && !left.is_zero())
            .then(|| left.min(Duration::from_millis(budget_ms)))
    }

    /// Skipped unrun: the caller's wait is over.
    pub(super) fn expire(self) {
        let _ = self.reply.send(Err(InputHookFailure::Wait));
    }

    /// The invocation's result, to the waiting caller.
    pub(super) fn answer(self, result: Result<Judged, Failure>) {
        let judged = match result {
            Ok(judged) => judged,
            Err(Failure::Timeout) => Err(InputHookFailure::Timeout),
            Err(Failure::OutOfMemory) => Err(InputHookFailure::Memory),
            Err(Failure::Error(_)) => Err(InputHookFailure::Error),
        };
        let _ = self.reply.send(judged);
    }
}

impl Runtime {
    /// Whether the script registered `on_input` (no VM involved).
    pub fn handles_input(&self) -> bool {
        self.inner
            .shared
            .registered
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .has(Hook::Input)
    }

    /// Runs `on_input` over `batch` for `caller`: one verdict per frame,
    /// or why the built-in integration applies (see the module docs).
    pub async fn on_input(
        &self,
        caller: Caller,
        batch: Arc<MovementBatch>,
    ) -> Result<Vec<Verdict>, InputHookFailure> {
        let deadline = Instant::now() + self.inner.shared.input_wait;
        let (reply, rx) = oneshot::channel();
        let call = Call::Input(InputCall {
            caller,
            batch,
            deadline,
            reply,
        });
        match self.try_submit(call) {
            Submitted::Queued => {}
            Submitted::Full => return Err(InputHookFailure::QueueFull),
            Submitted::Gone => return Err(InputHookFailure::Unavailable),
        }
        match tokio::time::timeout_at(deadline.into(), rx).await {
            Ok(Ok(judged)) => judged,
            Ok(Err(_)) => Err(InputHookFailure::Unavailable),
            Err(_) => Err(InputHookFailure::Wait),
        }
    }
}

const SHIM: &str = "citadel.on_input_shim";

/// The Lua side of one frame: builds the `frame` table with table
/// constructors (one host call per frame instead of one per field), calls
/// the handler and flattens its return to numbers: `0` accept, `1` veto,
/// `2, px, py, pz [, vx, vy, vz]` correct, `3` bad return.
const SHIM_SOURCE: &str = r#"
local type = type
local function v3(t)
    if type(t) ~= "table" then return nil end
    local x, y, z = t.x or t[1] or 0, t.y or t[2] or 0, t.z or t[3] or 0
    if type(x) ~= "number" or type(y) ~= "number" or type(z) ~= "number" then return nil end
    return x, y, z
end
return function(handler, ctx, seq, sim_tick, dt, mx, my, mz, px, py, pz, vx, vy, vz,
                qx, qy, qz, wx, wy, wz, ox, oy, oz, dx, dy, dz)
    local frame = { seq = seq, sim_tick = sim_tick, dt = dt,
        move = { x = mx, y = my, z = mz },
        position = { x = px, y = py, z = pz },
        velocity = { x = vx, y = vy, z = vz },
        previous = { position = { x = qx, y = qy, z = qz },
                     velocity = { x = wx, y = wy, z = wz } } }
    if ox then
        frame.fire = { origin = { x = ox, y = oy, z = oz },
                       direction = { x = dx, y = dy, z = dz } }
    end
    local r = handler(ctx, frame)
    if r == nil or r == true then return 0 end
    if r == false then return 1 end
    if type(r) ~= "table" then return 3 end
    local x, y, z = v3(r.position)
    if not x then return 3 end
    if r.velocity == nil then return 2, x, y, z end
    local a, b, c = v3(r.velocity)
    if not a then return 3 end
    return 2, x, y, z, a, b, c
end
"#;

/// Loads the per-frame shim into the VM's registry (once per VM).
pub(super) fn install(lua: &Lua) -> mlua::Result<()> {
    let shim: Function = lua.load(SHIM_SOURCE).set_name("=on_input").eval()?;
    lua.set_named_registry_value(SHIM, shim)
}

/// What the shim returned, as one flattened tuple.
type Flat = (
    u8,
    Option<f64>,
    Option<f64>,
    Option<f64>,
    Option<f64>,
    Option<f64>,
    Option<f64>,
);

/// A finite vector, or `None`.
fn finite(x: Option<f64>, y: Option<f64>, z: Option<f64>) -> Option<[f32; 3]> {
    let v = [x? as f32, y? as f32, z? as f32];
    v.iter().all(|c| c.is_finite()).then_some(v)
}

/// The verdict a flattened return means; `None` = a bad return.
fn verdict((kind, px, py, pz, vx, vy, vz): Flat, proposed: Kinematics) -> Option<Verdict> {
    match kind {
        0 => Some(Verdict::Accept),
        1 => Some(Verdict::Veto),
        2 => Some(Verdict::Correct(Kinematics {
            position: finite(px, py, pz)?,
            velocity: match vx {
                None => proposed.velocity,
                Some(_) => finite(vx, vy, vz)?,
            },
        })),
        _ => None,
    }
}

fn push3(args: &mut MultiValue, v: [f32; 3]) {
    args.extend(v.map(|c| Value::Number(f64::from(c))));
}

/// Runs the handler over every frame of `batch` (see the module docs);
/// `ctx` already carries the caller.
pub(super) fn judge(lua: &Lua, ctx: Table, batch: &MovementBatch) -> mlua::Result<Judged> {
    let Some(f) = hooks::hook_fn(lua, Hook::Input)? else {
        return Ok(Err(InputHookFailure::Unavailable));
    };
    let shim: Function = lua.named_registry_value(SHIM)?;
    let object_id = lua
        .app_data_ref::<TransformHost>()
        .map_or(batch.object_id, |host| host.script_id(batch.object_id));
    ctx.set("object_id", object_id)?;
    ctx.set("tick", batch.tick.0)?;
    let mut verdicts = Vec::with_capacity(batch.frames.len());
    let mut previous = batch.start;
    // One argument buffer for the whole bundle: the handler and `ctx` stay
    // in front, each frame replaces the numbers after them.
    const LEAD: usize = 2;
    let mut args = MultiValue::with_capacity(26);
    args.push_back(Value::Function(f));
    args.push_back(Value::Table(ctx));
    for frame in &batch.frames {
        let proposed = batch.proposed(frame, previous);
        args.truncate(LEAD);
        args.push_back(Value::Integer(i64::from(frame.input_seq)));
        args.push_back(Value::Integer(i64::from(frame.sim_tick)));
        args.push_back(Value::Number(f64::from(frame.dt)));
        push3(&mut args, frame.move_velocity);
        push3(&mut args, proposed.position);
        push3(&mut args, proposed.velocity);
        push3(&mut args, previous.position);
        push3(&mut args, previous.velocity);
        if let Some(fire) = frame.fire {
            push3(&mut args, fire.origin);
            push3(&mut args, fire.direction);
        }
        let flat: Flat = shim.call(&args)?;
        let Some(verdict) = verdict(flat, proposed) else {
            return Ok(Err(InputHookFailure::BadReturn));
        };
        previous = match verdict {
            Verdict::Accept => proposed,
            _ => batch.step(frame, previous, &verdict),
        };
        verdicts.push(verdict);
    }
    Ok(Ok(verdicts))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use citadel_netcode::actors::{StagedFrame, Tick};
    use citadel_netcode::input::InputParams;

    use super::*;
    use crate::place::{Place, RoomId};
    use crate::runtime::vm::{Limits, Vm};

    fn vm(src: &str) -> Vm {
        let limits = Limits {
            deadline: Duration::from_millis(100),
            tick_deadline: Duration::from_millis(20),
            memory_bytes: 16 * 1024 * 1024,
            scripts_dir: PathBuf::from("."),
        };
        Vm::load_source(&limits, src.as_bytes(), "=test").unwrap()
    }

    fn caller() -> Caller {
        Caller {
            participant_id: 7,
            user_id: Some("u-1".into()),
            place: Place::Room(RoomId::new(3).unwrap()),
        }
    }

    /// Four frames of +1 000 cm/s along x for 0.05 s from the origin.
    fn batch() -> MovementBatch {
        let frames = (1..=4)
            .map(|seq| StagedFrame {
                input_seq: seq,
                sim_tick: seq,
                dt: 0.05,
                move_velocity: [1_000.0, 0.0, 0.0],
                velocity: [1_000.0, 0.0, 0.0],
                fire: None,
            })
            .collect();
        MovementBatch {
            participant_id: 7,
            object_id: 12,
            ownership_epoch: 1,
            tick: Tick(99),
            start: Kinematics::default(),
            frames,
            last_input_seq: 4,
            params: InputParams::default(),
        }
    }

    const MS: Duration = Duration::from_millis(50);

    #[test]
    fn verdicts_follow_the_returns_and_each_frame_starts_from_the_last_outcome() {
        let vm = vm(r#"
            local seen = {}
            citadel.on_input(function(ctx, frame)
                seen[#seen + 1] = string.format("%s/%s/%d/%d/%d:%g>%g",
                    ctx.sender, ctx.user_id, ctx.room_id, ctx.object_id, ctx.tick,
                    frame.previous.position.x, frame.position.x)
                if frame.seq == 2 then return false end
                if frame.seq == 3 then return { position = { 5, 6, 7 } } end
                if frame.seq == 4 then return true end
            end)
            citadel.on_rpc("seen", function() return table.concat(seen, " ") end)
        "#);
        let out = vm.on_input(&caller(), &batch(), MS);
        let corrected = Kinematics {
            position: [5.0, 6.0, 7.0],
            velocity: [1_000.0, 0.0, 0.0],
        };
        assert_eq!(
            out.result,
            Ok(Ok(vec![
                Verdict::Accept,
                Verdict::Veto,
                Verdict::Correct(corrected),
                Verdict::Accept
            ]))
        );
        let seen = vm.rpc(&caller(), "seen", b"").result;
        let want = "7/u-1/3/12/99:0>50 7/u-1/3/12/99:50>100 \
                    7/u-1/3/12/99:50>100 7/u-1/3/12/99:5>55";
        assert_eq!(
            seen,
            Ok(super::super::vm::RpcReply::Reply(bytes::Bytes::from(want)))
        );
    }

    #[test]
    fn bad_returns_failures_and_a_missing_handler_are_typed() {
        let vm = vm(r#"
            local mode = "fixed"
            citadel.on_rpc("mode", function(ctx, body) mode = body return "" end)
            citadel.on_input(function(ctx, frame)
                if mode == "number" then citadel.send(ctx.sender, 100, "x") return 42 end
                if mode == "no_position" then return { velocity = { 1, 2, 3 } } end
                if mode == "nan" then return { position = { x = 0 / 0 } } end
                if mode == "raise" then error("boom") end
                if mode == "spin" then while true do end end
                return { position = { 1, 2, 3 }, velocity = { x = 9 } }
            end)
        "#);
        let with = |mode: &str| {
            assert!(vm.rpc(&caller(), "mode", mode.as_bytes()).result.is_ok());
            vm.on_input(&caller(), &batch(), MS)
        };
        let bad = with("number");
        assert_eq!(bad.result, Ok(Err(InputHookFailure::BadReturn)));
        assert!(
            bad.commands.is_empty(),
            "a bad return discards its commands"
        );
        for mode in ["no_position", "nan"] {
            assert_eq!(with(mode).result, Ok(Err(InputHookFailure::BadReturn)));
        }
        assert!(matches!(with("raise").result, Err(Failure::Error(_))));
        let started = Instant::now();
        assert_eq!(with("spin").result, Err(Failure::Timeout));
        assert!(started.elapsed() < Duration::from_millis(500));
        let fixed = Kinematics {
            position: [1.0, 2.0, 3.0],
            velocity: [9.0, 0.0, 0.0],
        };
        assert_eq!(
            with("fixed").result,
            Ok(Ok(vec![Verdict::Correct(fixed); 4]))
        );
        let none = vm_without_hook();
        assert_eq!(
            none.on_input(&caller(), &batch(), MS).result,
            Ok(Err(InputHookFailure::Unavailable))
        );
    }

    fn vm_without_hook() -> Vm {
        vm(r#"citadel.on_rpc("x", function() return "" end)"#)
    }
}
