//! Live realtime connections indexed by session and account, so revoking a
//! session (logout, an operator disabling the account) closes its sockets,
//! and `single_connection_per_user` can close an account's older socket.
//!
//! What it is not: it does not decide validity; the revocation poller asks
//! the store which live sessions are no longer valid (which also covers
//! revocations made by other nodes sharing the database).

use std::collections::HashMap;
use std::sync::Mutex;

use crate::gateway::outbound::Outbound;
use crate::metrics::CloseReason;

#[derive(Debug)]
struct Entry {
    participant_id: u64,
    user_id: String,
    outbound: Outbound,
}

/// The index. Short critical sections; never held across `.await`.
#[derive(Debug, Default)]
pub struct LiveSessions {
    by_session: Mutex<HashMap<String, Vec<Entry>>>,
}

impl LiveSessions {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<Entry>>> {
        self.by_session.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records an authenticated connection. With `single_per_user`, every
    /// other connection of the same account is closed as replaced.
    pub fn register(
        &self,
        session_id: &str,
        user_id: &str,
        participant_id: u64,
        outbound: Outbound,
        single_per_user: bool,
    ) {
        let mut map = self.lock();
        if single_per_user {
            for entries in map.values_mut() {
                entries.retain(|e| {
                    let same_user = e.user_id == user_id;
                    if same_user {
                        e.outbound.close(CloseReason::Replaced);
                    }
                    !same_user
                });
            }
            map.retain(|_, v| !v.is_empty());
        }
        map.entry(session_id.to_owned()).or_default().push(Entry {
            participant_id,
            user_id: user_id.to_owned(),
            outbound,
        });
    }

    /// Forgets a connection (disconnect).
    pub fn unregister(&self, session_id: &str, participant_id: u64) {
        let mut map = self.lock();
        if let Some(entries) = map.get_mut(session_id) {
            entries.retain(|e| e.participant_id != participant_id);
            if entries.is_empty() {
                map.remove(session_id);
            }
        }
    }

    /// Closes every connection of `session_id`; returns how many.
    pub fn close_session(&self, session_id: &str) -> usize {
        let entries = self.lock().remove(session_id).unwrap_or_default();
        for e in &entries {
            e.outbound.close(CloseReason::SessionRevoked);
        }
        entries.len()
    }

    /// Sessions with live connections on this node.
    pub fn session_ids(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }
}
