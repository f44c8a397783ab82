//! Server-owned rooms for matchmaker results (`services.md` §3.4–3.5).
//!
//! What it is: creating a closed room with no members and a label chosen by
//! the matchmaker, admitting a participant into it on the matchmaker's word
//! (the join policy and the closed flag are not consulted: the redeemed
//! join token is the authorisation), holding it while its tokens are
//! redeemable (emptying it early does not remove it), and pruning it once
//! they have expired if it is empty.
//! What it is not: a plain `ROOM_JOIN` path; `join_by_id` still refuses a
//! closed room. Call order: [`Realm::create_matched`] → any number of
//! [`Realm::enter_matched`] → [`Realm::prune_if_empty`] once the handoffs
//! have expired.

use super::{JoinRefused, Realm, RoomLabel, RoomState, Scope};
use crate::place::{Place, RoomId};

impl Realm {
    /// Creates an empty room labelled `label` (forced closed); `name` is
    /// what `/status` shows. Refused at `rooms.max_rooms`.
    pub fn create_matched(&self, name: &str, mut label: RoomLabel) -> Result<RoomId, JoinRefused> {
        label.open = false;
        let mut st = self.lock();
        if st.rooms.len() >= self.config.max_rooms {
            return Err(JoinRefused::RoomLimit);
        }
        let id = RoomId::new(st.next_room_id).ok_or(JoinRefused::RoomLimit)?;
        st.next_room_id += 1;
        let scope = Scope::new(Place::Room(id));
        self.places.insert(scope.clone());
        st.rooms.insert(
            id,
            RoomState::new(name.as_bytes().to_vec(), label, scope, true),
        );
        Ok(id)
    }

    /// Moves `participant_id` into the matched room `room_id` and sends
    /// ROOM_JOINED. Only `max_players` is enforced.
    pub fn enter_matched(&self, participant_id: u64, room_id: RoomId) -> Result<(), JoinRefused> {
        let mut st = self.lock();
        if !st.participants.contains_key(&participant_id) {
            return Err(JoinRefused::NoSuchRoom);
        }
        if st.participants.get(&participant_id).and_then(|p| p.room) == Some(room_id) {
            self.send_joined(&st, participant_id, room_id);
            return Ok(());
        }
        let room = st.rooms.get(&room_id).ok_or(JoinRefused::NoSuchRoom)?;
        let max = room.label.max_players as usize;
        if max != 0 && room.members.len() >= max {
            return Err(JoinRefused::Full);
        }
        self.move_into(&mut st, participant_id, room_id);
        Ok(())
    }

    /// Whether room `room_id` exists.
    pub fn room_exists(&self, room_id: RoomId) -> bool {
        self.lock().rooms.contains_key(&room_id)
    }

    /// Releases the hold on `room_id` once its handoffs have expired:
    /// removes it if nobody is in it (a match nobody accepted, or whose
    /// players all left), else lets the last leave remove it as usual.
    pub fn prune_if_empty(&self, room_id: RoomId) -> bool {
        let mut st = self.lock();
        let Some(room) = st.rooms.get_mut(&room_id) else {
            return false;
        };
        room.held = false;
        if !room.members.is_empty() {
            return false;
        }
        st.rooms.remove(&room_id);
        self.places.remove(room_id);
        true
    }
}
