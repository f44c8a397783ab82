//! Adapters that plug the runtime into the node's extension points: the
//! [`RpcHandler`] registered for each script method, and the
//! [`RoomPolicy`] backed by `on_room_create` / `on_room_join`, and the
//! [`MatchLabeler`] backed by `on_matchmaker_matched`.
//!
//! Seed semantics: no handler → the fallback policy (params are the map,
//! everyone may join); a nil, failing or timed-out `on_room_create` → the
//! default label; a failing or timed-out `on_room_join` → reject. What it is
//! not: no Lua here, only typed calls through [`Runtime`].

use bytes::Bytes;

use super::{Caller, Runtime};
use crate::place::{Place, RoomId};
use crate::realm::{DefaultRoomPolicy, PolicyContext, RoomLabel, RoomPolicy};
use crate::rpc::{RpcContext, RpcError, RpcHandler};
use crate::services::matchmaker::label::{MatchInfo, MatchLabeler, default_label};
use crate::util::BoxFuture;

/// The handler registered for every script RPC method.
#[derive(Debug, Clone)]
pub struct LuaRpc {
    runtime: Runtime,
}

impl LuaRpc {
    /// A handler calling into `runtime`.
    pub fn new(runtime: Runtime) -> Self {
        LuaRpc { runtime }
    }
}

impl RpcHandler for LuaRpc {
    fn call(&self, ctx: RpcContext, payload: Bytes) -> BoxFuture<Result<Bytes, RpcError>> {
        let runtime = self.runtime.clone();
        Box::pin(async move {
            let caller = Caller {
                participant_id: ctx.participant_id,
                user_id: ctx.user_id,
                place: ctx.place,
            };
            runtime.rpc(caller, ctx.method, payload).await
        })
    }
}

/// Room policy decided by the script, with the built-in policy as fallback.
#[derive(Debug, Clone)]
pub struct LuaRoomPolicy {
    runtime: Runtime,
    fallback: DefaultRoomPolicy,
}

impl LuaRoomPolicy {
    /// Script hooks first, `fallback` when the script does not decide.
    pub fn new(runtime: Runtime, fallback: DefaultRoomPolicy) -> Self {
        LuaRoomPolicy { runtime, fallback }
    }
}

fn caller(ctx: PolicyContext) -> Caller {
    Caller {
        participant_id: ctx.participant_id,
        user_id: ctx.user_id,
        place: Place::Default,
    }
}

impl RoomPolicy for LuaRoomPolicy {
    fn on_room_create(&self, ctx: PolicyContext, params: Bytes) -> BoxFuture<RoomLabel> {
        let runtime = self.runtime.clone();
        let fallback = self.fallback;
        Box::pin(async move {
            match runtime.room_create(caller(ctx), params.clone()).await {
                Some(spec) => RoomLabel {
                    map: spec
                        .map
                        .unwrap_or_else(|| String::from_utf8_lossy(&params).into_owned()),
                    mode: spec.mode,
                    max_players: spec.max_players,
                    open: spec.open,
                },
                None => fallback.label(&params),
            }
        })
    }

    fn on_room_join(&self, ctx: PolicyContext, room_id: RoomId) -> BoxFuture<bool> {
        let runtime = self.runtime.clone();
        Box::pin(async move { runtime.room_join(caller(ctx), room_id).await })
    }
}

/// Matched-room labels chosen by `on_matchmaker_matched`. A string is the
/// map; a table may set `map`, `mode` and `max_players` (0 or absent: the
/// match size). Missing fields, no hook, an error or a timeout fall back to
/// `map = "default"`, `mode = "matchmaker"`. The room is always closed.
#[derive(Debug, Clone)]
pub struct LuaMatchLabeler {
    runtime: Runtime,
}

impl LuaMatchLabeler {
    /// Labels decided by `runtime`'s hook.
    pub fn new(runtime: Runtime) -> Self {
        LuaMatchLabeler { runtime }
    }
}

impl MatchLabeler for LuaMatchLabeler {
    fn label(&self, info: MatchInfo, members: u32) -> BoxFuture<RoomLabel> {
        let runtime = self.runtime.clone();
        Box::pin(async move {
            let mut label = default_label(members);
            if let Some(spec) = runtime.matchmaker_matched(info).await {
                if let Some(map) = spec.map.filter(|m| !m.is_empty()) {
                    label.map = map;
                }
                if !spec.mode.is_empty() {
                    label.mode = spec.mode;
                }
                if spec.max_players != 0 {
                    label.max_players = spec.max_players;
                }
            }
            label
        })
    }
}
