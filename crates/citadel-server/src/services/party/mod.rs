//! Parties (`services.md` §6): a leader and up to `party.max_size - 1`
//! other accounts (invitations take slots too) who queue for matches as one
//! indivisible ticket.
//!
//! What it is: [`Parties`], the in-memory party book of this node (one
//! mutex, never held across an `.await`), and the `party.*` RPCs in
//! [`rpc`]. Rules: one active party per account; only the leader invites,
//! promotes, removes and closes; a leader leaving closes the party; while
//! the party's ticket is queued its membership is frozen (the matchmaker
//! says so, see [`crate::services::matchmaker::Matchmaker::party_queued`]).
//! Members learn about changes by polling `party.status`, whose `revision`
//! grows on every change (no push envelope: kinds 1–28 are all taken, see
//! docs/matchmaking.md). What it is not: durable (parties live as long as
//! the node) and not a presence service.
//!
//! Lock order: the party book first, then the matchmaker's state.

pub mod rpc;

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::config::ConfigError;

/// Unknown party, or one the caller may not see.
pub const UNKNOWN_PARTY: &str = "unknown party";
/// A leader-only method called by someone else.
pub const NOT_LEADER: &str = "only the party leader may do this";
/// The caller is already in an active party.
pub const ALREADY_IN_PARTY: &str = "already in a party";
/// No free slot (members plus invitations).
pub const FULL: &str = "party is full";
/// Membership change while the party's ticket is queued.
pub const FROZEN: &str = "party is queued for a match";
/// The caller named itself.
pub const SELF_TARGET: &str = "cannot target yourself";
/// The target is not a member.
pub const NOT_MEMBER: &str = "user is not a party member";
/// The target is already a member or invited.
pub const ALREADY_INVITED: &str = "user is already a member or invited";
/// `party.max_parties` reached.
pub const LIMIT: &str = "party limit reached";

/// `[party]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PartyConfig {
    /// Slots of one party, members and outstanding invitations together.
    pub max_size: usize,
    /// Parties this node keeps at once.
    pub max_parties: usize,
}

impl Default for PartyConfig {
    fn default() -> Self {
        PartyConfig {
            max_size: 8,
            max_parties: 100_000,
        }
    }
}

impl PartyConfig {
    /// `max_size` is 2–255 (a ticket counts at most 255), `max_parties` ≥ 1.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(2..=255).contains(&self.max_size) {
            return Err(ConfigError::Invalid {
                key: "party.max_size".into(),
                message: "must be between 2 and 255".into(),
            });
        }
        if self.max_parties == 0 {
            return Err(ConfigError::Invalid {
                key: "party.max_parties".into(),
                message: "must be at least 1".into(),
            });
        }
        Ok(())
    }
}

/// One party.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Party {
    /// `pty-` and 16 random bytes, base64url.
    pub id: String,
    /// The leader (also the first member).
    pub leader: String,
    /// Members, leader first.
    pub members: Vec<String>,
    /// Invited accounts that have not accepted.
    pub invitations: Vec<String>,
    /// Grows on every change.
    pub revision: u64,
}

impl Party {
    /// The snapshot JSON of §6.
    pub fn snapshot(&self) -> serde_json::Value {
        json!({
            "party_id": self.id,
            "leader_user_id": self.leader,
            "members": self.members,
            "invitations": self.invitations,
            "revision": self.revision,
        })
    }

    fn sees(&self, user: &str) -> bool {
        self.members.iter().any(|m| m == user) || self.invitations.iter().any(|m| m == user)
    }
}

/// The party book's state.
#[derive(Debug, Default)]
pub struct Book {
    parties: HashMap<String, Party>,
    /// Member account → its party.
    by_member: HashMap<String, String>,
}

impl Book {
    /// The party `id` as seen by `user` (a member or invitee).
    pub fn visible(&self, id: &str, user: &str) -> Result<&Party, &'static str> {
        self.parties
            .get(id)
            .filter(|p| p.sees(user))
            .ok_or(UNKNOWN_PARTY)
    }

    /// The members of `id` if `user` leads it.
    pub fn led_by(&self, id: &str, user: &str) -> Result<&Party, &'static str> {
        let party = self.visible(id, user)?;
        if party.leader != user {
            return Err(NOT_LEADER);
        }
        Ok(party)
    }

    fn led_mut(&mut self, id: &str, user: &str) -> Result<&mut Party, &'static str> {
        self.led_by(id, user)?;
        self.parties.get_mut(id).ok_or(UNKNOWN_PARTY)
    }

    /// Parties now.
    pub fn len(&self) -> usize {
        self.parties.len()
    }

    /// Whether there is no party.
    pub fn is_empty(&self) -> bool {
        self.parties.is_empty()
    }

    fn close(&mut self, id: &str) {
        if let Some(party) = self.parties.remove(id) {
            for m in party.members {
                self.by_member.remove(&m);
            }
        }
    }
}

/// The party book of this node.
#[derive(Debug, Default)]
pub struct Parties {
    book: Mutex<Book>,
    config: PartyConfig,
}

fn new_id() -> Result<String, &'static str> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|_| "party service unavailable")?;
    Ok(format!("pty-{}", URL_SAFE_NO_PAD.encode(bytes)))
}

/// Whether the party's ticket is queued (membership frozen); the
/// matchmaker answers it.
pub type QueuedCheck<'a> = &'a dyn Fn(&str) -> bool;

impl Parties {
    /// An empty book.
    pub fn new(config: PartyConfig) -> Self {
        Parties {
            book: Mutex::default(),
            config,
        }
    }

    /// Locks the book (first in the lock order).
    pub fn lock(&self) -> MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `party.create`.
    pub fn create(&self, user: &str) -> Result<serde_json::Value, &'static str> {
        let mut book = self.lock();
        if book.by_member.contains_key(user) {
            return Err(ALREADY_IN_PARTY);
        }
        if book.parties.len() >= self.config.max_parties {
            return Err(LIMIT);
        }
        let party = Party {
            id: new_id()?,
            leader: user.to_owned(),
            members: vec![user.to_owned()],
            invitations: Vec::new(),
            revision: 1,
        };
        let snapshot = party.snapshot();
        book.by_member.insert(user.to_owned(), party.id.clone());
        book.parties.insert(party.id.clone(), party);
        Ok(snapshot)
    }

    /// `party.invite`.
    pub fn invite(
        &self,
        user: &str,
        id: &str,
        target: &str,
        queued: QueuedCheck<'_>,
    ) -> Result<serde_json::Value, &'static str> {
        let max = self.config.max_size;
        let mut book = self.lock();
        let party = book.led_mut(id, user)?;
        if target == user {
            return Err(SELF_TARGET);
        }
        if party.sees(target) {
            return Err(ALREADY_INVITED);
        }
        if queued(id) {
            return Err(FROZEN);
        }
        if party.members.len() + party.invitations.len() >= max {
            return Err(FULL);
        }
        party.invitations.push(target.to_owned());
        party.revision += 1;
        Ok(party.snapshot())
    }

    /// `party.accept`.
    pub fn accept(
        &self,
        user: &str,
        id: &str,
        queued: QueuedCheck<'_>,
    ) -> Result<serde_json::Value, &'static str> {
        let mut book = self.lock();
        let invited = book
            .parties
            .get(id)
            .is_some_and(|p| p.invitations.iter().any(|i| i == user));
        if !invited {
            return Err(UNKNOWN_PARTY);
        }
        if book.by_member.contains_key(user) {
            return Err(ALREADY_IN_PARTY);
        }
        if queued(id) {
            return Err(FROZEN);
        }
        book.by_member.insert(user.to_owned(), id.to_owned());
        let party = book.parties.get_mut(id).ok_or(UNKNOWN_PARTY)?;
        party.invitations.retain(|i| i != user);
        party.members.push(user.to_owned());
        party.revision += 1;
        Ok(party.snapshot())
    }

    /// `party.leave`: a leader leaving closes the party; an invitee
    /// leaving declines.
    pub fn leave(&self, user: &str, id: &str, queued: QueuedCheck<'_>) -> Result<(), &'static str> {
        let mut book = self.lock();
        let party = book.visible(id, user)?;
        let leader = party.leader == user;
        let member = party.members.iter().any(|m| m == user);
        if member && queued(id) {
            return Err(FROZEN);
        }
        if leader {
            book.close(id);
            return Ok(());
        }
        if member {
            book.by_member.remove(user);
        }
        if let Some(party) = book.parties.get_mut(id) {
            party.members.retain(|m| m != user);
            party.invitations.retain(|m| m != user);
            party.revision += 1;
        }
        Ok(())
    }

    /// `party.promote`.
    pub fn promote(
        &self,
        user: &str,
        id: &str,
        target: &str,
        queued: QueuedCheck<'_>,
    ) -> Result<serde_json::Value, &'static str> {
        let mut book = self.lock();
        let party = book.led_mut(id, user)?;
        if !party.members.iter().any(|m| m == target) {
            return Err(NOT_MEMBER);
        }
        if queued(id) {
            return Err(FROZEN);
        }
        if target != user {
            party.leader = target.to_owned();
            // Keep the leader first in the member list.
            party.members.retain(|m| m != target);
            party.members.insert(0, target.to_owned());
            party.revision += 1;
        }
        Ok(party.snapshot())
    }

    /// `party.remove`: removes a member or withdraws an invitation.
    pub fn remove(
        &self,
        user: &str,
        id: &str,
        target: &str,
        queued: QueuedCheck<'_>,
    ) -> Result<serde_json::Value, &'static str> {
        let mut book = self.lock();
        let party = book.led_mut(id, user)?;
        if target == user {
            return Err(SELF_TARGET);
        }
        let member = party.members.iter().any(|m| m == target);
        if !member && !party.invitations.iter().any(|m| m == target) {
            return Err(NOT_MEMBER);
        }
        if queued(id) {
            return Err(FROZEN);
        }
        party.members.retain(|m| m != target);
        party.invitations.retain(|m| m != target);
        party.revision += 1;
        let snapshot = party.snapshot();
        if member {
            book.by_member.remove(target);
        }
        Ok(snapshot)
    }

    /// `party.close`.
    pub fn close(&self, user: &str, id: &str, queued: QueuedCheck<'_>) -> Result<(), &'static str> {
        let mut book = self.lock();
        book.led_by(id, user)?;
        if queued(id) {
            return Err(FROZEN);
        }
        book.close(id);
        Ok(())
    }

    /// `party.status`.
    pub fn status(&self, user: &str, id: &str) -> Result<serde_json::Value, &'static str> {
        Ok(self.lock().visible(id, user)?.snapshot())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn never(_: &str) -> bool {
        false
    }

    #[test]
    fn slots_leadership_and_one_party_per_account() {
        let parties = Parties::new(PartyConfig {
            max_size: 3,
            max_parties: 10,
        });
        let id = parties.create("a").unwrap()["party_id"]
            .as_str()
            .unwrap()
            .to_owned();
        assert_eq!(parties.create("a"), Err(ALREADY_IN_PARTY));
        parties.invite("a", &id, "b", &never).unwrap();
        parties.invite("a", &id, "c", &never).unwrap();
        assert_eq!(
            parties.invite("a", &id, "d", &never),
            Err(FULL),
            "invitations hold slots"
        );
        assert_eq!(parties.invite("b", &id, "d", &never), Err(NOT_LEADER));
        parties.accept("b", &id, &never).unwrap();
        assert_eq!(parties.invite("b", &id, "d", &never), Err(NOT_LEADER));
        assert_eq!(parties.accept("d", &id, &never), Err(UNKNOWN_PARTY));
        assert_eq!(parties.status("d", &id), Err(UNKNOWN_PARTY));
        let frozen = |_: &str| true;
        assert_eq!(parties.remove("a", &id, "b", &frozen), Err(FROZEN));
        assert_eq!(parties.leave("b", &id, &frozen), Err(FROZEN));
        let snap = parties.promote("a", &id, "b", &never).unwrap();
        assert_eq!(snap["leader_user_id"], "b");
        assert_eq!(snap["members"], json!(["b", "a"]));
        parties.leave("b", &id, &never).unwrap();
        assert_eq!(
            parties.status("a", &id),
            Err(UNKNOWN_PARTY),
            "leader leaving closes"
        );
        assert!(parties.create("a").is_ok(), "free again");
    }
}
