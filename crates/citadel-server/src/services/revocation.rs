//! The revocation poller: every `transport.auth.revocation_poll_ms` it asks
//! the store which of this node's live sessions are no longer valid
//! (revoked by a logout on any node, or their account disabled) and closes
//! those connections. Local logouts also close at once (see `http::auth`).

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::services::AccountService;
use crate::services::accounts::now_ms;
use crate::services::live::LiveSessions;

/// Runs every `period` until `shutdown`: closes `live` connections whose
/// session `accounts` no longer accepts.
pub async fn run_poller(
    live: Arc<LiveSessions>,
    accounts: Arc<AccountService>,
    period: Duration,
    shutdown: CancellationToken,
) {
    // The first check comes one period after start (no session is live
    // before that), not at once as a plain `interval` would fire.
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = ticker.tick() => {}
        }
        let sessions = live.session_ids();
        if sessions.is_empty() {
            continue;
        }
        match accounts.store().invalid_sessions(sessions, now_ms()).await {
            Ok(invalid) => {
                for session_id in invalid {
                    let closed = live.close_session(&session_id);
                    if closed > 0 {
                        tracing::info!(session = %session_id, connections = closed, "closed connections of a revoked session");
                    }
                }
            }
            Err(err) => tracing::warn!(error = %err, "revocation check failed"),
        }
    }
}
