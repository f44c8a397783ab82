//! Why the actor server refused an input: one enum, so the driver maps
//! every refusal to its metric (or wire answer) in one place.

/// An input the server did not apply. Refusals are silent on the wire
/// (§3.9: "otherwise ignored silently"); the driver counts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// Kind 9, 10 or 16 from a participant that never sent HELLO.
    NotOptedIn,
    /// A body that decoded but carries unusable values: an ack window that
    /// does not expand, a non-finite presence transform.
    Malformed,
    /// NA_STATE that may not move the object, and why.
    State(StateRefusal),
    /// Every object id is in use.
    IdsExhausted,
    /// One kind-9 input frame that was not applied, and why.
    Input(InputRefusal),
    /// A game-logic ownership or hit-eligibility change that cannot apply.
    Owner(OwnerRefusal),
}

/// Why [`super::ActorServer::handle_set_owner`] or
/// [`super::ActorServer::handle_hit_eligible`] changed nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OwnerRefusal {
    /// No live object has that id.
    UnknownObject,
    /// The new owner has not opted in with HELLO, or is in another place
    /// than the object.
    OwnerNotHere,
}

/// Why one kind-9 input frame was not applied (§3.7: ownership first,
/// then the epoch, then the in-order queue).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InputRefusal {
    /// The sender has announced no presence.
    NoPresence,
    /// The frame's object is not the sender's presence object.
    NotOwner,
    /// The sender's object is relayed: it moves by NA_STATE only.
    Relay,
    /// The frame names another ownership epoch than the object's.
    WrongEpoch,
    /// `input_seq` 0 is reserved for "none".
    ZeroSeq,
    /// At or below `last_input_seq`: already applied.
    Stale,
    /// The same sequence number is already buffered.
    Duplicate,
    /// More than 256 sequence numbers above `last_input_seq`.
    TooFarAhead,
}

impl InputRefusal {
    /// Every reason, in declaration order.
    pub const ALL: [InputRefusal; 8] = [
        InputRefusal::NoPresence,
        InputRefusal::NotOwner,
        InputRefusal::Relay,
        InputRefusal::WrongEpoch,
        InputRefusal::ZeroSeq,
        InputRefusal::Stale,
        InputRefusal::Duplicate,
        InputRefusal::TooFarAhead,
    ];

    /// The queue's verdict as a refusal; `None` for an accepted frame.
    pub(super) fn of_offer(offer: crate::input::Offer) -> Option<InputRefusal> {
        use crate::input::Offer;
        match offer {
            Offer::Accepted => None,
            Offer::WrongEpoch => Some(InputRefusal::WrongEpoch),
            Offer::ZeroSeq => Some(InputRefusal::ZeroSeq),
            Offer::Stale => Some(InputRefusal::Stale),
            Offer::Duplicate => Some(InputRefusal::Duplicate),
            Offer::TooFarAhead => Some(InputRefusal::TooFarAhead),
        }
    }

    fn text(self) -> &'static str {
        match self {
            InputRefusal::NoPresence => "input without presence",
            InputRefusal::NotOwner => "input for an object the sender does not own",
            InputRefusal::Relay => "input for a relayed object",
            InputRefusal::WrongEpoch => "input of another ownership epoch",
            InputRefusal::ZeroSeq => "input sequence 0",
            InputRefusal::Stale => "input already applied",
            InputRefusal::Duplicate => "input already buffered",
            InputRefusal::TooFarAhead => "input too far ahead",
        }
    }
}

/// Why NA_STATE (kind 20) was refused (§3.9: applied only if the sender's
/// presence object id equals `object_id` and the mode is Relay).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StateRefusal {
    /// The sender has announced no presence.
    NoPresence,
    /// The object is not the sender's presence object.
    NotOwner,
    /// The sender's object is predicted-authoritative: it moves by
    /// validated input only.
    Predicted,
    /// The transform carries a NaN or an infinity.
    NonFinite,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::NotOptedIn => f.write_str("transform sync not opted in"),
            Refusal::Malformed => f.write_str("malformed body"),
            Refusal::State(StateRefusal::NoPresence) => f.write_str("no presence"),
            Refusal::State(StateRefusal::NotOwner) => f.write_str("not the sender's object"),
            Refusal::State(StateRefusal::Predicted) => {
                f.write_str("predicted object moves by input only")
            }
            Refusal::State(StateRefusal::NonFinite) => f.write_str("non-finite transform"),
            Refusal::IdsExhausted => f.write_str("object ids exhausted"),
            Refusal::Input(reason) => f.write_str(reason.text()),
            Refusal::Owner(OwnerRefusal::UnknownObject) => f.write_str("unknown object"),
            Refusal::Owner(OwnerRefusal::OwnerNotHere) => {
                f.write_str("the new owner does not see the object")
            }
        }
    }
}

impl std::error::Error for Refusal {}
