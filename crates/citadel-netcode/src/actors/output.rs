//! What the actor server asks the driver to deliver: a typed [`Message`]
//! and its [`Audience`]. The driver encodes each output once
//! ([`Message::to_envelope`]) and shares the bytes with every recipient,
//! on the lane [`Message::delivery`] names.
//!
//! Audiences are resolved participant ids, never "a place": only clients
//! that opted in with HELLO receive transform-sync traffic, and the server
//! is the one that knows who they are.

use citadel_wire::Envelope;
use citadel_wire::WireBody;
use citadel_wire::actor::{NaDespawn, NaSpawn, NaSpawnBatch};
use citadel_wire::protocol::KIND_TSYNC_SNAPSHOT;
use citadel_wire::tsync::{HelloParams, Rewind, RoleChange};

/// Who receives one output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Audience {
    /// One participant.
    One(u64),
    /// Several participants, in ascending id order, never empty.
    Many(Vec<u64>),
}

impl Audience {
    /// `Many` of a non-empty list; `None` for an empty one.
    pub(super) fn of(participants: Vec<u64>) -> Option<Audience> {
        (!participants.is_empty()).then_some(Audience::Many(participants))
    }

    /// The recipients.
    pub fn participants(&self) -> &[u64] {
        match self {
            Audience::One(pid) => std::slice::from_ref(pid),
            Audience::Many(pids) => pids,
        }
    }

    /// Whether `participant_id` is a recipient.
    pub fn includes(&self, participant_id: u64) -> bool {
        self.participants().contains(&participant_id)
    }
}

/// How a message must travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Delivery {
    /// In order, never lost (HELLO, spawns, despawns, ROLE, fire results).
    Reliable,
    /// Best effort; a later one supersedes it (snapshots).
    Unreliable,
}

/// One server → client message of transform sync.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// Kind 7: the negotiated codec and rates.
    Hello(HelloParams),
    /// Kind 11: a role transition (Assign, Handoff, RelevancyEnter/Exit).
    Role(RoleChange),
    /// Kind 17: one actor appears.
    Spawn(NaSpawn),
    /// Kind 18: the actors already visible to a newcomer.
    SpawnBatch(NaSpawnBatch),
    /// Kind 19: an actor disappears.
    Despawn(NaDespawn),
    /// Kind 8: one client's encoded snapshot body.
    Snapshot(Vec<u8>),
    /// Kind 12: the resolution of one fire command, to its shooter.
    Rewind(Rewind),
}

impl Message {
    /// The envelope kind it travels as.
    pub fn kind(&self) -> u16 {
        match self {
            Message::Hello(_) => HelloParams::KIND,
            Message::Role(_) => RoleChange::KIND,
            Message::Spawn(_) => NaSpawn::KIND,
            Message::SpawnBatch(_) => NaSpawnBatch::KIND,
            Message::Despawn(_) => NaDespawn::KIND,
            Message::Snapshot(_) => KIND_TSYNC_SNAPSHOT,
            Message::Rewind(_) => Rewind::KIND,
        }
    }

    /// Reliable for everything but snapshots.
    pub fn delivery(&self) -> Delivery {
        match self {
            Message::Snapshot(_) => Delivery::Unreliable,
            _ => Delivery::Reliable,
        }
    }

    /// The encoded envelope (done once per output, whatever its audience).
    pub fn to_envelope(self) -> Envelope {
        match self {
            Message::Hello(hello) => hello.to_envelope(),
            Message::Role(role) => role.to_envelope(),
            Message::Spawn(spawn) => spawn.to_envelope(),
            Message::SpawnBatch(batch) => batch.to_envelope(),
            Message::Despawn(despawn) => despawn.to_envelope(),
            Message::Snapshot(body) => Envelope::new(KIND_TSYNC_SNAPSHOT, body),
            Message::Rewind(rewind) => rewind.to_envelope(),
        }
    }
}

/// One delivery the driver must make.
#[derive(Debug, Clone, PartialEq)]
pub struct Output {
    /// Its recipients.
    pub to: Audience,
    /// What they receive.
    pub message: Message,
}
