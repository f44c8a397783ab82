//! Immediate revocation: the access changes that the friends and groups
//! services make, reported to chat at once so the affected subscriptions
//! end before the changing call returns.
//!
//! Call order: the friends or groups service commits the change (unfriend,
//! block, kick, leave, group deletion) → calls its [`ChatRevocations`] →
//! the chat service sends `access.revoked` to each affected subscription on
//! this node and removes it (the other subscribers see `presence.leave`),
//! so no later event reaches it → the service answers its caller.
//!
//! What it is not: no cross-node notice. A cluster wraps this seam to tell
//! the other nodes; until then (and as the backstop whenever a notice is
//! lost) the re-authorisation sweep (`chat.reauthorize_interval_ms`) and the
//! check on every call revoke there.

use std::sync::Arc;

/// Access changes that end chat subscriptions.
pub trait ChatRevocations: Send + Sync {
    /// `a` and `b` are no longer mutual friends (an unfriend or a block,
    /// either way): their direct channel's subscriptions end, both sides'.
    fn friendship_ended(&self, a: &str, b: &str);
    /// `user` is no longer a member of `group` (kicked or left).
    fn membership_ended(&self, group: u64, user: &str);
    /// `group` was deleted: every subscription of its channel ends.
    fn group_deleted(&self, group: u64);
}

/// Nothing to revoke (a friends or groups service without chat).
#[derive(Debug, Default)]
pub struct NoRevocations;

impl ChatRevocations for NoRevocations {
    fn friendship_ended(&self, _a: &str, _b: &str) {}
    fn membership_ended(&self, _group: u64, _user: &str) {}
    fn group_deleted(&self, _group: u64) {}
}

/// The default hook of a service built without chat.
pub fn none() -> Arc<dyn ChatRevocations> {
    Arc::new(NoRevocations)
}
