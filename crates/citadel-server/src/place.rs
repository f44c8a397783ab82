//! Where a participant is: [`Place::Default`] (the implicit dimension shared
//! by every participant in no room) or [`Place::Room`].
//!
//! What it is: the one spelling of "which place" used by the realm, the
//! router, the transform hub and the Lua runtime. What it is not: the member
//! list of a place (the realm publishes that) or a wire type; on the wire a
//! room id is a non-zero `u64` and "no room" has no id at all, so
//! [`RoomId::new`] refuses 0 and nothing ever has to test for it again.

use std::fmt;
use std::num::NonZeroU64;

/// A room's id: non-zero, never reused while the node runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RoomId(NonZeroU64);

impl RoomId {
    /// The id for a wire value; `None` for 0 (no room has it).
    pub fn new(raw: u64) -> Option<RoomId> {
        NonZeroU64::new(raw).map(RoomId)
    }

    /// The wire value.
    pub fn get(self) -> u64 {
        self.0.get()
    }
}

impl fmt::Display for RoomId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Where relay, broadcasts and networked actors of a participant go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Place {
    /// The default dimension: every participant in no room.
    #[default]
    Default,
    /// A named room.
    Room(RoomId),
}

impl Place {
    /// The room, if any.
    pub fn room(self) -> Option<RoomId> {
        match self {
            Place::Default => None,
            Place::Room(id) => Some(id),
        }
    }

    /// A compact code for lock-free cells: 0 is the default dimension, any
    /// other value the room id (room ids are never 0).
    pub(crate) fn to_code(self) -> u64 {
        self.room().map_or(0, RoomId::get)
    }

    /// The inverse of [`Place::to_code`].
    pub(crate) fn from_code(code: u64) -> Place {
        RoomId::new(code).map_or(Place::Default, Place::Room)
    }
}

impl From<RoomId> for Place {
    fn from(id: RoomId) -> Self {
        Place::Room(id)
    }
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Place::Default => f.write_str("default dimension"),
            Place::Room(id) => write!(f, "room {id}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_is_no_room_and_codes_round_trip() {
        assert_eq!(RoomId::new(0), None);
        let room = RoomId::new(7).map(Place::Room);
        assert_eq!(room.map(Place::to_code), Some(7));
        assert_eq!(Place::from_code(0), Place::Default);
        assert_eq!(room, Some(Place::from_code(7)));
        assert_eq!(Place::Default.room(), None);
    }
}
