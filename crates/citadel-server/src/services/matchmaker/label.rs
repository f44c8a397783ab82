//! The label of a matched room: what `citadel.on_matchmaker_matched` may
//! choose (beyond the reference, where it is fixed).
//!
//! What it is: the [`MatchLabeler`] seam the matchmaker calls after a
//! cohort is committed and before the room exists, and [`DefaultLabel`]
//! (`map = "default"`, `mode = "matchmaker"`, room size = the cohort's
//! member count), used with no hook and whenever the hook fails. The room
//! is always closed, whatever the hook says. What it is not: the Lua side
//! (see `crate::runtime`).

use super::query::Props;
use crate::realm::RoomLabel;
use crate::util::BoxFuture;

/// One ticket of a formed match, as the hook sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct TicketInfo {
    /// The ticket.
    pub ticket_id: String,
    /// Its accounts (a party lists all).
    pub user_ids: Vec<String>,
    /// Its properties.
    pub properties: Props,
    /// Its query text.
    pub query: String,
}

/// A formed match, before its room exists.
#[derive(Debug, Clone, PartialEq)]
pub struct MatchInfo {
    /// Tickets, the one that completed the cohort first.
    pub tickets: Vec<TicketInfo>,
}

/// The fallback label for a match of `members` players.
pub fn default_label(members: u32) -> RoomLabel {
    RoomLabel {
        map: "default".into(),
        mode: "matchmaker".into(),
        max_players: members,
        open: false,
    }
}

/// Chooses a matched room's label. Must always answer (falling back to
/// [`default_label`]).
pub trait MatchLabeler: Send + Sync {
    /// The label for `info`, a match of `members` players.
    fn label(&self, info: MatchInfo, members: u32) -> BoxFuture<RoomLabel>;
}

/// No hook: [`default_label`].
#[derive(Debug, Clone, Copy, Default)]
pub struct DefaultLabel;

impl MatchLabeler for DefaultLabel {
    fn label(&self, _info: MatchInfo, members: u32) -> BoxFuture<RoomLabel> {
        Box::pin(async move { default_label(members) })
    }
}
