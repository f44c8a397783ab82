//! Who may move an object, and the ROLE frames that say so (§3.6).
//!
//! A presence object is either relayed (its owner sends NA_STATE, copied
//! verbatim) or predicted-authoritative (it moves only by validated owner
//! input and refuses NA_STATE). Ownership assignment bumps the object's
//! `ownership_epoch` (first assignment gives 1); every ROLE frame is built
//! here from the object itself, so an Assign, a Handoff or a relevancy
//! change can never disagree with the object's epochs.

use citadel_wire::tsync::{Role, RoleChange, RoleEvent};

use super::{ActorServer, PlaceKey, Refusal, StateRefusal, WorldKey};
use crate::world::Object;

/// How a participant's presence object moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// The owner reports its transform with NA_STATE (kind 20); no ROLE.
    Relay,
    /// Validated owner input (kind 9) only; the owner holds a ROLE Assign.
    /// The in-order input queue of such an object lives with this mode.
    Predicted,
}

impl Control {
    /// The role a presence object of this mode replicates with.
    pub(super) fn role(self) -> Role {
        match self {
            Control::Relay => Role::RemoteInterpolated,
            Control::Predicted => Role::OwnerPredicted,
        }
    }
}

/// The ROLE frame describing `object`'s current ownership for `event`.
pub(super) fn role_of(object: &Object, event: RoleEvent) -> RoleChange {
    RoleChange {
        object_id: object.id,
        role: object.role,
        owner: object.owner,
        ownership_epoch: object.ownership_epoch,
        gen_epoch: object.gen_epoch,
        event,
    }
}

impl<P: PlaceKey> ActorServer<P> {
    /// The object `object_id` if it is `participant_id`'s presence object
    /// and still owned by it (the ownership check of NA_STATE), with how it
    /// moves now: by input if it has an input queue, else by relay.
    pub(super) fn owned_object(
        &mut self,
        participant_id: u64,
        object_id: u32,
    ) -> Result<(&mut crate::world::Object, Control), Refusal> {
        let p = self
            .presences
            .get(&participant_id)
            .copied()
            .ok_or(Refusal::State(StateRefusal::NoPresence))?;
        if p.object_id != object_id {
            return Err(Refusal::State(StateRefusal::NotOwner));
        }
        let control = if self.inputs.contains_key(&object_id) {
            Control::Predicted
        } else {
            Control::Relay
        };
        self.worlds
            .get_mut(&WorldKey::Place(p.place))
            .and_then(|w| w.get_mut(object_id))
            .filter(|o| o.owner == participant_id)
            .map(|o| (o, control))
            .ok_or(Refusal::State(StateRefusal::NotOwner))
    }
}
