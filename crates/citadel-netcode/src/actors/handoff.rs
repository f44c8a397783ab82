//! Ownership handoff by game logic (§3.6 Handoff): any live object (a
//! presence avatar or an NPC) may be given to an opted-in participant that
//! sees it, or returned to the server with owner 0.
//!
//! Every change applies the epoch rules: `ownership_epoch` += 1 (wrapping,
//! never 0), `last_input_seq` resets to 0, the new owner's input restarts
//! at sequence 1 and input buffered under the old epoch is discarded
//! ([`crate::input::InputQueue::handle_epoch`]). A participant owner makes
//! the object OwnerPredicted (it moves by that owner's validated input
//! only; a patrol pauses); owner 0 makes it ServerSimulated and drops its
//! queue. One ROLE Handoff, built from the object itself, goes to the old
//! owner, the new owner and every opted-in client that sees the object's
//! world, in participant order.
//!
//! What it is not: it does not move presences. A handed-away avatar still
//! lives and dies with the participant that announced it (its disconnect
//! or place change despawns it); when an owner leaves or changes place,
//! every object handed to it returns to the server (a Handoff to owner 0).

use citadel_wire::tsync::{Role, RoleEvent};

use super::ownership::role_of;
use super::{ActorServer, Message, OwnerRefusal, PlaceKey, Refusal, Tick, WorldKey};

impl<P: PlaceKey> ActorServer<P> {
    /// Gives `object_id` to `owner` (a participant id, or 0 for the server)
    /// and announces it; see the module docs. Giving an object to its
    /// current owner still starts a new epoch (a clean restart).
    pub fn handle_set_owner(
        &mut self,
        object_id: u32,
        owner: u64,
        now: Tick,
    ) -> Result<(), Refusal> {
        let world = self.advance_to_object(object_id, now)?;
        if owner != 0 {
            let here = self.clients.get(&owner).is_some_and(|c| match world {
                WorldKey::Global => true,
                WorldKey::Place(p) => c.place == p,
            });
            if !here {
                return Err(Refusal::Owner(OwnerRefusal::OwnerNotHere));
            }
        }
        let object = self
            .worlds
            .get_mut(&world)
            .and_then(|w| w.get_mut(object_id))
            .ok_or(Refusal::Owner(OwnerRefusal::UnknownObject))?;
        let previous = object.owner;
        object.owner = owner;
        object.ownership_epoch = match object.ownership_epoch.wrapping_add(1) {
            0 => 1,
            e => e,
        };
        object.last_input_seq = 0;
        object.role = if owner == 0 {
            Role::ServerSimulated
        } else {
            Role::OwnerPredicted
        };
        let role = role_of(object, RoleEvent::Handoff);
        if owner == 0 {
            self.inputs.remove(&object_id);
        } else {
            self.drive_by_input(object_id, world, role.ownership_epoch);
        }
        let mut audience = self.audience_of(world, None);
        audience.extend(
            [previous, owner]
                .into_iter()
                .filter(|pid| *pid != 0 && self.clients.contains_key(pid)),
        );
        audience.sort_unstable();
        audience.dedup();
        self.emit_many(audience, Message::Role(role));
        Ok(())
    }

    /// The current owner of a live object (0 = the server).
    pub fn owner_of(&self, object_id: u32) -> Option<u64> {
        let world = self.locate(object_id)?;
        self.worlds.get(&world)?.get(object_id).map(|o| o.owner)
    }

    /// Every object handed to `participant_id` (other than its own
    /// presence object) returns to the server.
    pub(super) fn return_owned(&mut self, participant_id: u64) {
        let own = self.presence_of(participant_id);
        let mut handed: Vec<u32> = self
            .inputs
            .iter()
            .filter(|(id, o)| {
                Some(**id) != own
                    && self
                        .worlds
                        .get(&o.world)
                        .and_then(|w| w.get(**id))
                        .is_some_and(|obj| obj.owner == participant_id)
            })
            .map(|(id, _)| *id)
            .collect();
        handed.sort_unstable();
        for object_id in handed {
            // The object is live (it has a queue), and owner 0 needs no client.
            let _ = self.handle_set_owner(object_id, 0, self.now);
        }
    }
}
