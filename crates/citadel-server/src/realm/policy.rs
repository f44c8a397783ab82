//! Room policy: who labels a new room and who may join one.
//!
//! The built-in [`DefaultRoomPolicy`] is the seed's fallback: the create
//! params are the map name, the mode is empty, `max_players` comes from
//! `rooms.default_max_players`, rooms are open and everyone may join. The
//! Lua hooks (`on_room_create`, `on_room_join`) implement the same trait.
//! What it is not: it does not store rooms; the realm does.

use bytes::Bytes;

use crate::place::RoomId;
use crate::util::BoxFuture;

/// A room's server-owned label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoomLabel {
    /// Level clients load.
    pub map: String,
    /// Game mode (may be empty).
    pub mode: String,
    /// Member cap (0 = unlimited).
    pub max_players: u32,
    /// Whether further joins are accepted.
    pub open: bool,
}

/// Who is asking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyContext {
    /// The participant.
    pub participant_id: u64,
    /// Its account (`None` for guests).
    pub user_id: Option<String>,
}

/// Decides labels and admission. Implementations must always answer (a
/// failing script answers with the default label, or a refusal).
pub trait RoomPolicy: Send + Sync + 'static {
    /// Label for a newly created named room; `params` is the join key.
    fn on_room_create(&self, ctx: PolicyContext, params: Bytes) -> BoxFuture<RoomLabel>;
    /// Whether `ctx` may join the existing room `room_id`.
    fn on_room_join(&self, ctx: PolicyContext, room_id: RoomId) -> BoxFuture<bool>;
}

/// The seed's fallback policy.
#[derive(Debug, Clone, Copy, Default)]
pub struct DefaultRoomPolicy {
    /// `max_players` of every label.
    pub default_max_players: u32,
}

impl DefaultRoomPolicy {
    /// The fallback label for `params`.
    pub fn label(&self, params: &[u8]) -> RoomLabel {
        RoomLabel {
            map: String::from_utf8_lossy(params).into_owned(),
            mode: String::new(),
            max_players: self.default_max_players,
            open: true,
        }
    }
}

impl RoomPolicy for DefaultRoomPolicy {
    fn on_room_create(&self, _ctx: PolicyContext, params: Bytes) -> BoxFuture<RoomLabel> {
        let label = self.label(&params);
        Box::pin(async move { label })
    }

    fn on_room_join(&self, _ctx: PolicyContext, _room_id: RoomId) -> BoxFuture<bool> {
        Box::pin(async { true })
    }
}
