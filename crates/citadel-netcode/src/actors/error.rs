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
        }
    }
}

impl std::error::Error for Refusal {}
